// A stand-in libnvrtc.so.13 for the NVRTC fault tests: it forwards every
// call to the real NVRTC ($FJ_FAKE_NVRTC_REAL, an absolute path) and, as
// the environment asks at the time of each call, misbehaves:
//   FJ_FAKE_NVRTC_VERSION=M.m   nvrtcVersion reports M.m;
//   FJ_FAKE_NVRTC_CRASH=abort   nvrtcCompileProgram calls abort() (=segv:
//                               writes through a null pointer);
//   FJ_FAKE_NVRTC_FAIL=name     entry point `name` answers
//                               NVRTC_ERROR_INTERNAL_ERROR.
// Test code only: the library never reads the environment like this.
#include <dlfcn.h>
#include <nvrtc.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

void* Real(const char* name) {
  static void* handle = [] {
    const char* path = std::getenv("FJ_FAKE_NVRTC_REAL");
    return path != nullptr && path[0] == '/'
               ? dlopen(path, RTLD_NOW | RTLD_LOCAL)
               : nullptr;
  }();
  return handle == nullptr ? nullptr : dlsym(handle, name);
}

bool Fails(const char* name) {
  const char* fail = std::getenv("FJ_FAKE_NVRTC_FAIL");
  return fail != nullptr && std::strcmp(fail, name) == 0;
}

}  // namespace

// Forwards `name(args...)` unless told to fail it.
#define FORWARD(name, params, args)                                  \
  FAKE_API nvrtcResult name params {                                 \
    if (Fails(#name)) return NVRTC_ERROR_INTERNAL_ERROR;             \
    auto real = reinterpret_cast<decltype(&::name)>(Real(#name));    \
    return real == nullptr ? NVRTC_ERROR_INTERNAL_ERROR : real args; \
  }

FAKE_API const char* nvrtcGetErrorString(nvrtcResult result) {
  auto real = reinterpret_cast<decltype(&::nvrtcGetErrorString)>(
      Real("nvrtcGetErrorString"));
  return real != nullptr ? real(result) : "fake NVRTC error";
}

FAKE_API nvrtcResult nvrtcVersion(int* major, int* minor) {
  if (Fails("nvrtcVersion")) return NVRTC_ERROR_INTERNAL_ERROR;
  if (const char* v = std::getenv("FJ_FAKE_NVRTC_VERSION")) {
    char* end = nullptr;
    *major = static_cast<int>(std::strtol(v, &end, 10));
    *minor =
        *end == '.' ? static_cast<int>(std::strtol(end + 1, nullptr, 10)) : 0;
    return NVRTC_SUCCESS;
  }
  auto real = reinterpret_cast<decltype(&::nvrtcVersion)>(Real("nvrtcVersion"));
  return real == nullptr ? NVRTC_ERROR_INTERNAL_ERROR : real(major, minor);
}

FAKE_API nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int n,
                                         const char* const* options) {
  if (const char* crash = std::getenv("FJ_FAKE_NVRTC_CRASH")) {
    // A real SIGSEGV, not a null store: under -fsanitize=undefined
    // (scripts/ci/sanitize) a null store is a UBSan report, not a crash.
    if (std::strcmp(crash, "segv") == 0) std::raise(SIGSEGV);
    std::abort();
  }
  if (Fails("nvrtcCompileProgram")) return NVRTC_ERROR_INTERNAL_ERROR;
  auto real = reinterpret_cast<decltype(&::nvrtcCompileProgram)>(
      Real("nvrtcCompileProgram"));
  return real == nullptr ? NVRTC_ERROR_INTERNAL_ERROR : real(prog, n, options);
}

FORWARD(nvrtcCreateProgram,
        (nvrtcProgram * prog, const char* src, const char* name, int n,
         const char* const* headers, const char* const* includes),
        (prog, src, name, n, headers, includes))
FORWARD(nvrtcDestroyProgram, (nvrtcProgram * prog), (prog))
FORWARD(nvrtcGetPTXSize, (nvrtcProgram prog, size_t* size), (prog, size))
FORWARD(nvrtcGetPTX, (nvrtcProgram prog, char* ptx), (prog, ptx))
FORWARD(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t* size), (prog, size))
FORWARD(nvrtcGetCUBIN, (nvrtcProgram prog, char* cubin), (prog, cubin))
FORWARD(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t* size), (prog, size))
FORWARD(nvrtcGetProgramLog, (nvrtcProgram prog, char* log), (prog, log))
FORWARD(nvrtcAddNameExpression, (nvrtcProgram prog, const char* expr),
        (prog, expr))
FORWARD(nvrtcGetLoweredName,
        (nvrtcProgram prog, const char* expr, const char** lowered),
        (prog, expr, lowered))
FORWARD(nvrtcGetNumSupportedArchs, (int* n), (n))
FORWARD(nvrtcGetSupportedArchs, (int* archs), (archs))
FORWARD(nvrtcGetPCHCreateStatus, (nvrtcProgram prog), (prog))
FORWARD(nvrtcGetPCHHeapSize, (size_t * size), (size))
FORWARD(nvrtcSetPCHHeapSize, (size_t size), (size))

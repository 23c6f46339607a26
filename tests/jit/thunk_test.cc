// Launch thunks: LLVM IR -> ELF object -> ORC JIT -> call. Also: two JITs
// in one process, an object loaded into a fresh JIT (what a module cache
// hit does), malformed objects, and concurrent code generation.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "jit/thunk/arg_rules.h"
#include "jit/thunk/thunk_abi.h"
#include "jit/thunk/thunk_codegen.h"
#include "jit/thunk/thunk_jit.h"
#include "runtime/runtime.h"
#include "tests/runtime/launch/launch_test_util.h"

namespace fleetjit::jit {
namespace {

using fleetjit::testing::F;
using fleetjit::testing::I;
using fleetjit::testing::MakeEntry;
using fleetjit::testing::Ptr;
using fleetjit::testing::Struct;
using fleetjit::testing::Tensor;
using fleetjit::testing::U;

KernelEntry Saxpy() { return MakeEntry("saxpy", {Ptr(), Ptr(), F(4), I(4)}); }

// Calls `thunk` with saxpy-shaped arguments and checks the buffer.
void CheckSaxpy(const LaunchThunk* thunk) {
  ASSERT_NE(thunk, nullptr);
  fj_arg args[4] = {};
  for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
  args[0].kind = FJ_ARG_POINTER;
  args[0].v.pointer = 0x1111222233334444ull;
  args[1].kind = FJ_ARG_POINTER;
  args[1].v.pointer = 0x5555666677778888ull;
  args[2].kind = FJ_ARG_F32;
  args[2].v.f32 = 2.5f;
  args[3].kind = FJ_ARG_U32;  // signedness-agnostic
  args[3].v.u64 = 0xdeadbeef00000007ull;
  uint8_t buffer[32];
  std::memset(buffer, 0xEE, sizeof(buffer));
  ASSERT_EQ(thunk->fn(args, 4, sizeof(fj_arg), buffer, nullptr), 0);
  uint64_t p0, p1;
  float f;
  int32_t n;
  std::memcpy(&p0, buffer, 8);
  std::memcpy(&p1, buffer + 8, 8);
  std::memcpy(&f, buffer + 16, 4);
  std::memcpy(&n, buffer + 20, 4);
  EXPECT_EQ(p0, 0x1111222233334444ull);
  EXPECT_EQ(p1, 0x5555666677778888ull);
  EXPECT_EQ(f, 2.5f);
  EXPECT_EQ(n, 7);
  EXPECT_EQ(buffer[24], 0xEE) << "wrote past param_bytes";
}

TEST(ThunkCodegen, SmallSignaturesHaveNoLoopsNoCallsAndAReturnPerArgument) {
  auto ir = ThunkModuleIR({Saxpy()}, CopyImpl::kSync);
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_TRUE(
      absl::StrContains(*ir, "@" + ThunkSymbol(Saxpy(), CopyImpl::kSync) + "("))
      << *ir;
  // The first refused argument returns its index + 1 at once.
  for (const char* ret : {"ret i32 0", "ret i32 1", "ret i32 2", "ret i32 3",
                          "ret i32 4", "ret i32 -1"}) {
    EXPECT_TRUE(absl::StrContains(*ir, ret)) << ret << " in\n" << *ir;
  }
  EXPECT_FALSE(absl::StrContains(*ir, "phi")) << "no loops in a small thunk:\n"
                                              << *ir;
  EXPECT_FALSE(absl::StrContains(*ir, "call")) << "no calls without tensors:\n"
                                               << *ir;
  auto with_tensor =
      ThunkModuleIR({MakeEntry("t", {Tensor(2, 0), I(4)})}, CopyImpl::kTma);
  ASSERT_TRUE(with_tensor.ok());
  // The declared rank (2), dtype (0) and implementation (2 = tma) are
  // constants of the call.
  EXPECT_TRUE(absl::StrContains(*with_tensor,
                                "i32 0, i8* %tensor_arg, i32 2, i32 0, i32 2"))
      << *with_tensor;
}

TEST(ThunkCodegen, EmitsAnObjectLoadsAndRuns) {
  ThunkCodegenStats stats;
  auto object = EmitThunkObject({Saxpy()}, CopyImpl::kSync, &stats);
  ASSERT_TRUE(object.ok()) << object.status();
  ASSERT_GE(object->size(), 4u);
  EXPECT_EQ(object->substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(stats.thunks, 1);
  EXPECT_EQ(stats.object_bytes, object->size());
  std::printf(
      "[ info     ] one thunk: IR %.3f ms, codegen %.3f ms, %zu-byte object\n",
      stats.ir_ms, stats.codegen_ms, stats.object_bytes);
  auto jit = ThunkJit::Create();
  ASSERT_TRUE(jit.ok()) << jit.status();
  auto library = (*jit)->Load(*object);
  ASSERT_TRUE(library.ok()) << library.status();
  auto thunk = (*jit)->Find(*library, Saxpy(), CopyImpl::kSync);
  ASSERT_TRUE(thunk.ok()) << thunk.status();
  CheckSaxpy(*thunk);
  std::printf("[ info     ] object load %.3f ms\n",
              (*jit)->stats().last_load_ms);

  // Loading the same bytes again is answered from the first load.
  auto again = (*jit)->Load(std::string(*object));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *library);
  EXPECT_EQ((*jit)->stats().load_hits, 1u);
  EXPECT_EQ((*jit)->stats().objects_loaded, 1u);

  // Not in the object: another implementation, another signature.
  EXPECT_EQ((*jit)->Find(*library, Saxpy(), CopyImpl::kTma).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*jit)
                ->Find(*library, MakeEntry("x", {U(2)}), CopyImpl::kSync)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(ThunkJit, TwoJitsInOneProcess) {
  auto object = EmitThunkObject({Saxpy()}, CopyImpl::kSync);
  ASSERT_TRUE(object.ok());
  auto first = ThunkJit::Create();
  auto second = ThunkJit::Create();
  ASSERT_TRUE(first.ok() && second.ok());
  auto lib1 = (*first)->Load(*object);
  auto lib2 = (*second)->Load(*object);
  ASSERT_TRUE(lib1.ok() && lib2.ok());
  auto t1 = (*first)->Find(*lib1, Saxpy(), CopyImpl::kSync);
  auto t2 = (*second)->Find(*lib2, Saxpy(), CopyImpl::kSync);
  ASSERT_TRUE(t1.ok() && t2.ok());
  EXPECT_NE((*t1)->fn, (*t2)->fn) << "each JIT has its own copy";
  CheckSaxpy(*t1);
  CheckSaxpy(*t2);
  first->reset();  // destroying one JIT leaves the other working
  CheckSaxpy(*t2);
  // A third JIT started after one was destroyed works too.
  auto third = ThunkJit::Create();
  ASSERT_TRUE(third.ok());
  auto lib3 = (*third)->Load(*object);
  ASSERT_TRUE(lib3.ok());
  CheckSaxpy(*(*third)->Find(*lib3, Saxpy(), CopyImpl::kSync));
}

TEST(ThunkJit, ObjectRoundTripIntoAFreshJit) {
  // Compile once, keep only the bytes (what the module cache stores), and
  // load them into a JIT that never generated code.
  std::string stored;
  {
    auto object =
        EmitThunkObject({Saxpy(), MakeEntry("other", {U(1), Struct(24, 8)})},
                        CopyImpl::kCpAsync);
    ASSERT_TRUE(object.ok());
    stored.assign(object->data(), object->size());
  }
  auto jit = ThunkJit::Create();
  ASSERT_TRUE(jit.ok());
  const auto start = std::chrono::steady_clock::now();
  auto library = (*jit)->Load(stored);
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  ASSERT_TRUE(library.ok()) << library.status();
  std::printf("[ info     ] cached object load into a fresh JIT: %.3f ms\n",
              ms);
  CheckSaxpy(*(*jit)->Find(*library, Saxpy(), CopyImpl::kCpAsync));
  EXPECT_TRUE((*jit)
                  ->Find(*library, MakeEntry("other", {U(1), Struct(24, 8)}),
                         CopyImpl::kCpAsync)
                  .ok());
  // Two libraries with the same thunk names do not clash.
  auto object2 = EmitThunkObject({Saxpy()}, CopyImpl::kCpAsync);
  ASSERT_TRUE(object2.ok());
  auto library2 = (*jit)->Load(*object2);
  ASSERT_TRUE(library2.ok()) << library2.status();
  CheckSaxpy(*(*jit)->Find(*library2, Saxpy(), CopyImpl::kCpAsync));
  EXPECT_TRUE((*jit)->Unload(*library).ok());
  CheckSaxpy(*(*jit)->Find(*library2, Saxpy(), CopyImpl::kCpAsync));
}

TEST(ThunkJit, MalformedObjectsAreStatuses) {
  auto jit = ThunkJit::Create();
  ASSERT_TRUE(jit.ok());
  auto object = EmitThunkObject({Saxpy()}, CopyImpl::kSync);
  ASSERT_TRUE(object.ok());
  std::string bad_arch = *object;
  bad_arch[18] = 0x28;  // e_machine = ARM
  bad_arch[19] = 0;
  for (const std::string& bytes : {std::string(), std::string("not an object"),
                                   object->substr(0, object->size() / 2),
                                   std::string("\x7f"
                                               "ELF\x02\x01\x01",
                                               7),
                                   bad_arch}) {
    auto library = (*jit)->Load(bytes);
    EXPECT_FALSE(library.ok()) << "accepted " << bytes.size() << " bytes";
  }
  // The JIT still works afterwards.
  auto library = (*jit)->Load(*object);
  ASSERT_TRUE(library.ok()) << library.status();
  CheckSaxpy(*(*jit)->Find(*library, Saxpy(), CopyImpl::kSync));
}

TEST(ThunkJit, ConcurrentCodegenAndLoads) {
  auto jit = ThunkJit::Create();
  ASSERT_TRUE(jit.ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4; ++i) {
        // Distinct signatures per thread and round, plus saxpy everywhere.
        KernelEntry mine =
            MakeEntry("k", {Ptr(), I(4)}, /*trailing=*/8 * (t * 4 + i));
        auto object = EmitThunkObject({Saxpy(), mine}, CopyImpl::kSync);
        if (!object.ok()) {
          ++failures;
          continue;
        }
        auto library = (*jit)->Load(*object);
        if (!library.ok() ||
            !(*jit)->Find(*library, mine, CopyImpl::kSync).ok()) {
          ++failures;
          continue;
        }
        auto saxpy = (*jit)->Find(*library, Saxpy(), CopyImpl::kSync);
        if (!saxpy.ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThunkJit, CodegenTimeForManyKernels) {
  std::vector<KernelEntry> kernels;
  for (int k = 0; k < 32; ++k) {
    std::vector<fleetjit::testing::Param> params;
    for (int p = 0; p <= k % 12; ++p) params.push_back(p % 3 ? I(4) : Ptr());
    if (k % 4 == 0) params.push_back(Tensor(2));
    kernels.push_back(MakeEntry("k" + std::to_string(k), params, 0));
  }
  ThunkCodegenStats stats;
  auto object = EmitThunkObject(kernels, CopyImpl::kTma, &stats);
  ASSERT_TRUE(object.ok()) << object.status();
  std::printf(
      "[ info     ] %d thunks: IR %.3f ms, codegen %.3f ms, %zu bytes\n",
      stats.thunks, stats.ir_ms, stats.codegen_ms, stats.object_bytes);
  auto jit = ThunkJit::Create();
  ASSERT_TRUE(jit.ok());
  auto library = (*jit)->Load(*object);
  ASSERT_TRUE(library.ok()) << library.status();
  for (const KernelEntry& k : kernels) {
    EXPECT_TRUE((*jit)->Find(*library, k, CopyImpl::kTma).ok()) << k.name;
  }
  std::printf("[ info     ] load %.3f ms\n", (*jit)->stats().last_load_ms);
}

// A host process with its own LLVM (here: Debian's shared libLLVM, loaded
// globally after fleetjit) keeps working, and so do fleetjit's thunks. If
// fleetjit exported any LLVM symbol, the host's static initialisers would
// bind to fleetjit's copy and abort with "option registered more than
// once", or calls would cross between two LLVM versions.
TEST(ThunkJit, CoexistsWithTheHostProcessLlvm) {
  // The same major version is the sharpest case (same option names, same
  // mangled names); another version checks ABI separation.
  int hosts = 0;
  for (const char* name : {"libLLVM-14.so.1", "libLLVM-15.so.1"}) {
    void* host = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (host == nullptr) continue;
    ++hosts;
    SCOPED_TRACE(name);
    const char* loaded = name;
    using ContextCreate = void* (*)();
    using ModuleCreate = void* (*)(const char*, void*);
    using Dispose = void (*)(void*);
    using Triple = char* (*)();
    auto context_create =
        reinterpret_cast<ContextCreate>(dlsym(host, "LLVMContextCreate"));
    auto module_create = reinterpret_cast<ModuleCreate>(
        dlsym(host, "LLVMModuleCreateWithNameInContext"));
    auto module_dispose =
        reinterpret_cast<Dispose>(dlsym(host, "LLVMDisposeModule"));
    auto context_dispose =
        reinterpret_cast<Dispose>(dlsym(host, "LLVMContextDispose"));
    auto triple =
        reinterpret_cast<Triple>(dlsym(host, "LLVMGetDefaultTargetTriple"));
    auto dispose_message =
        reinterpret_cast<Dispose>(dlsym(host, "LLVMDisposeMessage"));
    ASSERT_TRUE(context_create && module_create && module_dispose &&
                context_dispose && triple && dispose_message);
    auto use_host_llvm = [&] {
      void* ctx = context_create();
      void* mod = module_create("host_module", ctx);
      ASSERT_NE(mod, nullptr);
      module_dispose(mod);
      context_dispose(ctx);
      char* t = triple();
      EXPECT_NE(std::string(t), "");
      dispose_message(t);
    };
    use_host_llvm();
    auto object = EmitThunkObject({Saxpy()}, CopyImpl::kSync);
    ASSERT_TRUE(object.ok()) << object.status();
    auto jit = ThunkJit::Create();
    ASSERT_TRUE(jit.ok()) << jit.status();
    auto library = (*jit)->Load(*object);
    ASSERT_TRUE(library.ok()) << library.status();
    CheckSaxpy(*(*jit)->Find(*library, Saxpy(), CopyImpl::kSync));
    use_host_llvm();
    std::printf("[ info     ] %s loaded beside fleetjit's LLVM; both work\n",
                loaded);
    // The host library stays loaded: LLVM does not support being unloaded.
  }
  if (hosts == 0) GTEST_SKIP() << "no shared libLLVM to play the host's LLVM";
}

// No LLVM symbol leaves libfleetjit_core: --exclude-libs hides the static
// archives, and the thunk sources hide what they instantiate themselves.
TEST(ThunkJit, LibraryExportsNoLlvmSymbols) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&ThunkJit::Create), &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  const std::string command =
      std::string("nm -D --defined-only '") + info.dli_fname + "' 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) GTEST_SKIP() << "cannot run nm";
  char line[4096];
  int symbols = 0;
  std::vector<std::string> leaked;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    ++symbols;
    // Mangled names in namespace llvm: _ZN4llvm..., _ZNK4llvm..., _ZTVN4llvm...
    if (std::strstr(line, "N4llvm") != nullptr ||
        std::strstr(line, " LLVM") != nullptr) {
      leaked.push_back(line);
    }
  }
  pclose(pipe);
  if (symbols == 0) GTEST_SKIP() << "nm printed nothing for " << info.dli_fname;
  EXPECT_TRUE(leaked.empty()) << leaked.size() << " LLVM symbols exported by "
                              << info.dli_fname << ", first: " << leaked[0];
}

// The runtime generates thunks after a build (in the background) and stores
// them in the cached artifact: a memory or disk cache hit (here in a second
// runtime, as a fresh process would) brings the object along and runs no code
// generation, and the object loads and holds a thunk for every kernel. Needs
// NVRTC, no GPU.
TEST(ThunkRuntime, CacheHitsCarryTheThunkObjectWithoutCodegen) {
  char dir_template[] = "/tmp/fj_thunk_cache.XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string source = R"(
    extern "C" __global__ void a(float* p, int n) {}
    extern "C" __global__ void b(const __grid_constant__ fj::tensor_param t, float k) {}
  )";
  auto build = [&](fleetjit::Runtime& rt) {
    fleetjit::BuildSpec spec;
    spec.source = "#include <fleetjit/copy/tensor_param.h>\n" + source;
    spec.name = "thunk_cache.cu";
    spec.target = *ParseTarget("sm_90");
    return rt.BuildRecord(spec);
  };
  fleetjit::RuntimeOptions options;
  options.cache.dir = dir;
  auto first = fleetjit::Runtime::Create(options);
  ASSERT_TRUE(first.ok()) << first.status();
  auto built = build(**first);
  if (!built.ok() && absl::StrContains(built.status().message(), "NVRTC")) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "no NVRTC: " << built.status();
  }
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->source, fleetjit::CacheSource::kCompiled);
  // The thunk object is generated and published after Build returns.
  (*first)->WaitForBackgroundWork();
  EXPECT_EQ((*first)->thunks().stats().objects_generated, 1u);
  auto again = build(**first);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, fleetjit::CacheSource::kMemory);
  EXPECT_FALSE(again->artifact->thunk_object.empty());
  (*first)->WaitForBackgroundWork();
  EXPECT_EQ((*first)->thunks().stats().objects_generated, 1u)
      << "memory hit ran codegen";

  auto second = fleetjit::Runtime::Create(options);
  ASSERT_TRUE(second.ok());
  auto from_disk = build(**second);
  ASSERT_TRUE(from_disk.ok()) << from_disk.status();
  EXPECT_EQ(from_disk->source, fleetjit::CacheSource::kDisk);
  EXPECT_EQ((*second)->thunks().stats().objects_generated, 0u)
      << "disk hit ran codegen";
  const Artifact& artifact = *from_disk->artifact;
  (*second)->WaitForBackgroundWork();
  EXPECT_EQ((*second)->thunks().stats().objects_generated, 0u)
      << "a disk hit carrying its thunk queued codegen";
  ASSERT_EQ(artifact.thunk_object, again->artifact->thunk_object);
  auto jit = ThunkJit::Create();
  ASSERT_TRUE(jit.ok());
  auto library = (*jit)->Load(artifact.thunk_object);
  ASSERT_TRUE(library.ok()) << library.status();
  for (const KernelEntry& k : artifact.kernels) {
    EXPECT_TRUE((*jit)->Find(*library, k, artifact.copy_impl).ok()) << k.name;
  }
  std::filesystem::remove_all(dir);
}

// With thunks off (FLEETJIT_THUNKS=0 or FJ_RUNTIME_DISABLE_THUNKS) builds
// carry no object and attaching does nothing.
TEST(ThunkRuntime, ThunksOffGenerateNothing) {
  fleetjit::LaunchThunks off(false);
  Artifact artifact;
  artifact.kernels.push_back(Saxpy());
  EXPECT_TRUE(off.AddThunkObject(artifact).ok());
  EXPECT_TRUE(artifact.thunk_object.empty());
  fleetjit::LoadedKernel k;
  k.entry = &artifact.kernels[0];
  EXPECT_TRUE(off.Attach(artifact, k).ok());
  EXPECT_EQ(k.thunk.load(), nullptr);
  // And on: an artifact without an object gets one generated at attach.
  fleetjit::LaunchThunks on(true);
  EXPECT_TRUE(on.Attach(artifact, k).ok());
  ASSERT_NE(k.thunk.load(), nullptr);
  CheckSaxpy(k.thunk.load());
  EXPECT_EQ(on.stats().objects_generated, 1u);
  // A stored object from another generator version is replaced.
  Artifact stale = artifact;
  KernelEntry other = MakeEntry("other", {U(2)});
  auto foreign = EmitThunkObject({other}, CopyImpl::kSync);
  ASSERT_TRUE(foreign.ok());
  stale.thunk_object = *foreign;
  fleetjit::LoadedKernel k2;
  k2.entry = &stale.kernels[0];
  EXPECT_TRUE(on.Attach(stale, k2).ok());
  ASSERT_NE(k2.thunk.load(), nullptr);
  CheckSaxpy(k2.thunk.load());
}

// A kernel whose parameters the driver placed elsewhere at load (sm_90
// puts a 64-aligned tensor at offset 48) packs by a relaid entry: it gets
// a thunk for that layout, not the stored one.
TEST(ThunkRuntime, RelaidEntriesGetTheirOwnThunk) {
  Artifact artifact;
  artifact.copy_impl = CopyImpl::kTma;
  artifact.kernels.push_back(MakeEntry("t", {Ptr(), Tensor(), I(4)}));
  auto stored = EmitThunkObject(artifact.kernels, artifact.copy_impl);
  ASSERT_TRUE(stored.ok());
  artifact.thunk_object = *stored;
  KernelEntry relaid = artifact.kernels[0];
  ASSERT_EQ(relaid.params[1].offset, 64u);
  relaid.params[1].offset = 48;
  relaid.params[2].offset = 368;
  relaid.param_bytes = 372;
  ASSERT_NE(ThunkSymbol(relaid, CopyImpl::kTma),
            ThunkSymbol(artifact.kernels[0], CopyImpl::kTma));
  fleetjit::LaunchThunks thunks(true);
  fleetjit::LoadedKernel k;
  k.entry = &relaid;
  k.copy_impl = CopyImpl::kTma;
  ASSERT_TRUE(thunks.Attach(artifact, k).ok());
  const LaunchThunk* thunk = k.thunk.load();
  ASSERT_NE(thunk, nullptr);
  EXPECT_EQ(thunk->symbol, ThunkSymbol(relaid, CopyImpl::kTma));
  EXPECT_EQ(thunks.stats().objects_generated, 1u);
}

}  // namespace
}  // namespace fleetjit::jit

// The fake CUDA driver (fake_cuda.h). One mutex guards all of its state: it
// serves correctness tests and soaks, not benchmarks.
#include "tests/common/fake_cuda/fake_cuda.h"

#include <cuda.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/common/fake_cuda/fake_images.h"

namespace {

// ---------------------------------------------------------------------------
// 1. The entry points: one index per line of driver_symbols.inc, then cuInit.

enum Symbol : int {
#define FJ_CU(name, version, required) k_##name,
#include "platform/driver_symbols.inc"
#undef FJ_CU
  k_cuInit,
  kSymbolCount
};

constexpr const char* kSymbolNames[] = {
#define FJ_CU(name, version, required) #name,
#include "platform/driver_symbols.inc"
#undef FJ_CU
    "cuInit",
};
static_assert(sizeof(kSymbolNames) / sizeof(kSymbolNames[0]) == kSymbolCount);

int SymbolIndex(std::string_view name) {
  for (int i = 0; i < kSymbolCount; ++i) {
    if (name == kSymbolNames[i]) return i;
  }
  return -1;
}

// ---------------------------------------------------------------------------
// 2. The simulated device.

constexpr int kMaxDevices = 8;
constexpr size_t kMaxSitesRecorded = 1 << 16;  // per entry point

struct Context {
  int device = 0;
  int retains = 0;
};

struct Allocation {
  size_t bytes;
  int device;  // -1: pinned host memory
  int owner;   // the device whose context allocated it
};

struct Module;
struct Function {
  Module* module;
  std::string name;
  fleetjit::fake_cuda::Layout layout;
  // Lazy loading, at its most lazy: a function is only partly loaded until
  // cuFuncLoad, or a launch, finishes it (attribute queries answer from
  // the image's metadata).
  bool loaded = false;
};

struct Module {
  Context* context;
  std::map<std::string, std::unique_ptr<Function>, std::less<>> functions;
  bool is_ptx = false;
  std::string image;
  // __device__ / __constant__ variables of a PTX image, by PTX name: their
  // bytes, looked up by cuModuleGetGlobal, copied like device memory.
  std::map<std::string, std::vector<char>, std::less<>> globals;
};

struct Capture;
struct Stream {
  Context* context;
  bool blocking = false;       // created without CU_STREAM_NON_BLOCKING
  Capture* capture = nullptr;  // the capture sequence it is in, if any
};

// A stream capture sequence (section 4b): begun by `thread` on `stream`
// (null: that thread's per-thread default stream) in `mode`.
struct Capture {
  Stream* stream;
  Context* context;
  std::thread::id thread;
  CUstreamCaptureMode mode;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  uint64_t nodes = 0;  // work captured so far
};

// What cuStreamEndCapture returns: how much work was captured.
struct Graph {
  uint64_t nodes;
};

struct Event {
  Context* context;
};

struct FaultPlan {
  uint64_t nth = 0;  // 0 with `armed`: every call
  bool armed = false;
  CUresult result = CUDA_SUCCESS;
};

struct State {
  std::mutex mu;
  int devices = 1;
  int p2p_devices = kMaxDevices;  // devices at or past this have no P2P path
  // The part every device reports (fjfake_set_part): an H100-like sm_90.
  int cc_major = 9, cc_minor = 0;
  int shared_optin = 227 << 10, shared_per_sm = 228 << 10;
  bool initialised = false;
  Context contexts[kMaxDevices];
  std::map<uintptr_t, Allocation> allocations;  // by start address
  std::set<Module*> modules;
  std::set<Function*> functions;  // of the modules loaded
  std::set<Stream*> streams;
  std::set<Event*> events;
  std::set<std::pair<int, int>> peers;  // (reader, owner) enabled
  uint64_t calls[kSymbolCount] = {};
  // Where each call came from (its return address), in call order.
  std::vector<uintptr_t> sites[kSymbolCount];
  FaultPlan faults[kSymbolCount];
  bool hidden[kSymbolCount] = {};
  uint64_t faults_fired = 0;
  uint64_t reclaimed = 0;  // objects freed with their context
  // Stream capture (section 4b).
  int driver_version = 13000;
  std::set<Capture*> captures;
  std::set<Graph*> graphs;
  uint64_t launch_loads = 0;  // launches that had to finish loading code
};

State& S() {
  static State* state = new State;  // never destroyed: used until exit
  return *state;
}

thread_local Context* current_context = nullptr;
// cuThreadExchangeStreamCaptureMode's per-thread mode, and the capture of
// this thread's per-thread default stream (one per thread, whatever the
// context).
thread_local CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
thread_local Capture* per_thread_capture = nullptr;

// Counts the call from `site`; the injected result if this call is planned
// to fail.
CUresult Injected(int symbol, uintptr_t site) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const uint64_t call = ++s.calls[symbol];
  if (s.sites[symbol].size() < kMaxSitesRecorded)
    s.sites[symbol].push_back(site);
  const FaultPlan& plan = s.faults[symbol];
  if (plan.armed && (plan.nth == 0 || plan.nth == call)) {
    ++s.faults_fired;
    return plan.result;
  }
  return CUDA_SUCCESS;
}

bool ValidDevice(CUdevice d) { return d >= 0 && d < S().devices; }

// The allocation holding [address, address + bytes), or null. Caller holds mu.
const Allocation* FindRange(uintptr_t address, size_t bytes, uintptr_t* start) {
  auto& allocations = S().allocations;
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin()) return nullptr;
  --it;
  if (address + bytes > it->first + it->second.bytes) return nullptr;
  if (start != nullptr) *start = it->first;
  return &it->second;
}

// Device ranges must lie in an allocation; host pointers are the caller's.
CUresult CheckDevice(CUdeviceptr p, size_t bytes) {
  if (bytes == 0) return CUDA_SUCCESS;
  if (FindRange(static_cast<uintptr_t>(p), bytes, nullptr) != nullptr) {
    return CUDA_SUCCESS;
  }
  // A module global's bytes count as device memory too.
  for (Module* m : S().modules) {
    for (auto& [name, bytes_of] : m->globals) {
      const auto start = reinterpret_cast<uintptr_t>(bytes_of.data());
      if (p >= start && p + bytes <= start + bytes_of.size()) {
        return CUDA_SUCCESS;
      }
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult RequireContext() {
  Context* c = current_context;
  if (c == nullptr || c->retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

bool ValidStream(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY ||
      stream == CU_STREAM_PER_THREAD) {
    return true;
  }
  return S().streams.count(reinterpret_cast<Stream*>(stream)) != 0;
}

// ---------------------------------------------------------------------------
// 2b. Stream capture, as cuStreamBeginCapture and
//     cuThreadExchangeStreamCaptureMode document it. Work on a capturing
//     stream is recorded, not run. A "potentially unsafe" call (UnsafeCall)
//     from a thread in GLOBAL mode is refused while that thread has a
//     capture not begun RELAXED, or another thread has a GLOBAL one; in
//     THREAD_LOCAL mode only the former; in RELAXED mode never. A refusal
//     is CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures
//     that caused it. Modules: from CUDA 12.3 on a load is allowed during
//     a capture; before, the fake takes the worst case the reports allow
//     (a load on a thread with a capture of its own is refused whatever
//     its mode). An unload is potentially unsafe. All callers hold mu.

bool IsLegacy(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY;
}

Capture* CaptureOf(CUstream stream) {
  if (IsLegacy(stream)) return nullptr;
  if (stream == CU_STREAM_PER_THREAD) return per_thread_capture;
  return reinterpret_cast<Stream*>(stream)->capture;
}

bool Active(const Capture* c) {
  return c != nullptr && c->status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

// The blocking streams of the current context that capture: what the
// legacy stream would implicitly depend on.
std::vector<Capture*> BlockingCaptures() {
  std::vector<Capture*> found;
  for (Capture* c : S().captures) {
    if (Active(c) && c->stream != nullptr && c->stream->blocking &&
        c->context == current_context) {
      found.push_back(c);
    }
  }
  return found;
}

CUresult Invalidate(const std::vector<Capture*>& captures, CUresult result) {
  for (Capture* c : captures) c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  return result;
}

// Asynchronous work queued on `stream`: CUDA_SUCCESS with *captured set
// when the stream captures it; the capture's error when it cannot.
CUresult StreamWork(CUstream stream, bool* captured) {
  *captured = false;
  if (IsLegacy(stream)) {
    std::vector<Capture*> blocking = BlockingCaptures();
    if (!blocking.empty())
      return Invalidate(blocking, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    return CUDA_SUCCESS;
  }
  Capture* c = CaptureOf(stream);
  if (c == nullptr) return CUDA_SUCCESS;
  if (!Active(c)) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  ++c->nodes;
  *captured = true;
  return CUDA_SUCCESS;
}

// A potentially unsafe call from this thread (the rules above).
CUresult UnsafeCall() {
  if (capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  const std::thread::id self = std::this_thread::get_id();
  std::vector<Capture*> prohibiting;
  for (Capture* c : S().captures) {
    if (!Active(c)) continue;
    if (c->thread == self ? c->mode != CU_STREAM_CAPTURE_MODE_RELAXED
                          : capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                                c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
      prohibiting.push_back(c);
    }
  }
  return Invalidate(prohibiting, prohibiting.empty()
                                     ? CUDA_SUCCESS
                                     : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

// A synchronous call on `stream` (a wait, a synchronous copy on the
// legacy stream): never on a capturing stream, in any mode.
CUresult SyncCall(CUstream stream) {
  if (IsLegacy(stream)) {
    std::vector<Capture*> blocking = BlockingCaptures();
    if (!blocking.empty())
      return Invalidate(blocking, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  } else if (Capture* c = CaptureOf(stream); c != nullptr) {
    return Invalidate({c}, Active(c) ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                                     : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
  return UnsafeCall();
}

// A module load: allowed during a capture from CUDA 12.3 on.
CUresult ModuleLoadCall() {
  if (S().driver_version >= 12030) return CUDA_SUCCESS;
  const std::thread::id self = std::this_thread::get_id();
  std::vector<Capture*> own;
  for (Capture* c : S().captures) {
    if (Active(c) && c->thread == self) own.push_back(c);
  }
  if (!own.empty())
    return Invalidate(own, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  return UnsafeCall();
}

void EndCaptureOf(Capture* c) {
  if (c == nullptr) return;
  if (c->stream != nullptr) c->stream->capture = nullptr;
  if (per_thread_capture == c) per_thread_capture = nullptr;
  S().captures.erase(c);
  delete c;
}

// ---------------------------------------------------------------------------
// 3. Images: kernels and layouts (fake_images.h).

void ParsePtx(Module& m) {
  for (auto& [name, layout] : fleetjit::fake_cuda::PtxKernels(m.image)) {
    auto f = std::make_unique<Function>();
    f->module = &m;
    f->name = name;
    f->layout = std::move(layout);
    m.functions[name] = std::move(f);
  }
}

// ---------------------------------------------------------------------------
// 4. The entry points' bodies. Each runs after the fault check (section 5).

CUresult fake_cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(S().mu);
  S().initialised = true;
  for (int d = 0; d < kMaxDevices; ++d) S().contexts[d].device = d;
  return CUDA_SUCCESS;
}

CUresult fake_cuGetErrorName(CUresult error, const char** out) {
  switch (error) {
#define NAME(e) \
  case e:       \
    *out = #e;  \
    return CUDA_SUCCESS;
    NAME(CUDA_SUCCESS)
    NAME(CUDA_ERROR_INVALID_VALUE)
    NAME(CUDA_ERROR_OUT_OF_MEMORY)
    NAME(CUDA_ERROR_NOT_INITIALIZED)
    NAME(CUDA_ERROR_DEINITIALIZED)
    NAME(CUDA_ERROR_NO_DEVICE)
    NAME(CUDA_ERROR_INVALID_DEVICE)
    NAME(CUDA_ERROR_INVALID_IMAGE)
    NAME(CUDA_ERROR_INVALID_CONTEXT)
    NAME(CUDA_ERROR_INVALID_HANDLE)
    NAME(CUDA_ERROR_NOT_FOUND)
    NAME(CUDA_ERROR_NOT_READY)
    NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    NAME(CUDA_ERROR_LAUNCH_FAILED)
    NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    NAME(CUDA_ERROR_NOT_SUPPORTED)
    NAME(CUDA_ERROR_UNKNOWN)
    NAME(CUDA_ERROR_ECC_UNCORRECTABLE)
    NAME(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
    NAME(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
    NAME(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
    NAME(CUDA_ERROR_ILLEGAL_STATE)
    NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
    NAME(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
#undef NAME
    default:
      *out = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult fake_cuGetErrorString(CUresult error, const char** out) {
  const char* name = nullptr;
  if (fake_cuGetErrorName(error, &name) != CUDA_SUCCESS) {
    *out = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = "reported by the fake CUDA driver";
  return CUDA_SUCCESS;
}

CUresult fake_cuDriverGetVersion(int* version) {
  std::lock_guard<std::mutex> lock(S().mu);
  *version = S().driver_version;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetCount(int* count) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (!S().initialised) return CUDA_ERROR_NOT_INITIALIZED;
  *count = S().devices;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGet(CUdevice* device, int ordinal) {
  if (!ValidDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetName(char* name, int len, CUdevice device) {
  if (!ValidDevice(device) || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::string text = "fleetjit fake GPU " + std::to_string(device);
  snprintf(name, static_cast<size_t>(len), "%s", text.c_str());
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetAttribute(int* out, CUdevice_attribute attribute,
                                   CUdevice device) {
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  int cc_major, cc_minor, shared_optin, shared_per_sm;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    cc_major = S().cc_major;
    cc_minor = S().cc_minor;
    shared_optin = S().shared_optin;
    shared_per_sm = S().shared_per_sm;
  }
  switch (attribute) {  // an H100-like sm_90 part unless fjfake_set_part
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *out = cc_major;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *out = cc_minor;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *out = 132;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      *out = 48 << 10;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *out = shared_optin;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      *out = shared_per_sm;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      *out = 50 << 20;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *out = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      *out = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      *out = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      *out = 64;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      *out = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      *out = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      *out = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      *out = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
      *out = 30 << 20;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
      *out = 128 << 20;
      break;
    default:
      *out = 0;
      break;
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = size_t{80} << 30;
  return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext* out, CUdevice device) {
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(S().mu);
  Context& c = S().contexts[device];
  ++c.retains;
  *out = reinterpret_cast<CUcontext>(&c);
  return CUDA_SUCCESS;
}

// As the driver does when a primary context's last retain goes: every
// object of the context goes with it. Caller holds mu.
void DestroyContextObjects(Context& c) {
  State& s = S();
  for (auto it = s.allocations.begin(); it != s.allocations.end();) {
    if (it->second.owner != c.device) {
      ++it;
      continue;
    }
    std::free(reinterpret_cast<void*>(it->first));
    it = s.allocations.erase(it);
    ++s.reclaimed;
  }
  for (auto it = s.modules.begin(); it != s.modules.end();) {
    if ((*it)->context != &c) {
      ++it;
      continue;
    }
    for (auto& [name, f] : (*it)->functions) s.functions.erase(f.get());
    delete *it;
    it = s.modules.erase(it);
    ++s.reclaimed;
  }
  for (auto it = s.streams.begin(); it != s.streams.end();) {
    if ((*it)->context != &c) {
      ++it;
      continue;
    }
    EndCaptureOf((*it)->capture);
    delete *it;
    it = s.streams.erase(it);
    ++s.reclaimed;
  }
  for (auto it = s.events.begin(); it != s.events.end();) {
    if ((*it)->context != &c) {
      ++it;
      continue;
    }
    delete *it;
    it = s.events.erase(it);
    ++s.reclaimed;
  }
}

CUresult fake_cuDevicePrimaryCtxRelease(CUdevice device) {
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(S().mu);
  Context& c = S().contexts[device];
  if (c.retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--c.retains == 0) DestroyContextObjects(c);
  return CUDA_SUCCESS;
}

Context* AsContext(CUcontext ctx) {
  auto* c = reinterpret_cast<Context*>(ctx);
  State& s = S();
  if (c < s.contexts || c >= s.contexts + s.devices) return nullptr;
  return c;
}

CUresult fake_cuCtxSetCurrent(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (ctx == nullptr) {
    current_context = nullptr;
    return CUDA_SUCCESS;
  }
  Context* c = AsContext(ctx);
  if (c == nullptr || c->retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  current_context = c;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = reinterpret_cast<CUcontext>(current_context);
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSynchronize() {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  return UnsafeCall();
}

CUresult fake_cuMemAlloc(CUdeviceptr* out, size_t bytes) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  if (CUresult r = UnsafeCall(); r != CUDA_SUCCESS) return r;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > (size_t{1} << 40)) return CUDA_ERROR_OUT_OF_MEMORY;  // 1 TiB
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  S().allocations[reinterpret_cast<uintptr_t>(p)] = {
      bytes, current_context->device, current_context->device};
  *out = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult FreeAllocation(uintptr_t p, bool host) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = UnsafeCall(); r != CUDA_SUCCESS) return r;
  auto it = S().allocations.find(p);
  if (it == S().allocations.end() || (it->second.device < 0) != host) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  S().allocations.erase(it);
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}

CUresult fake_cuMemFree(CUdeviceptr p) {
  return FreeAllocation(static_cast<uintptr_t>(p), false);
}

CUresult fake_cuMemHostAlloc(void** out, size_t bytes, unsigned int) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  if (CUresult r = UnsafeCall(); r != CUDA_SUCCESS) return r;
  if (bytes > (size_t{1} << 40)) return CUDA_ERROR_OUT_OF_MEMORY;  // 1 TiB
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  S().allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, -1,
                                                     current_context->device};
  *out = p;
  return CUDA_SUCCESS;
}

CUresult fake_cuMemFreeHost(void* p) {
  return FreeAllocation(reinterpret_cast<uintptr_t>(p), true);
}

// Copies between any two addresses the fake knows or the caller owns;
// device ranges must lie inside allocations. `sync`: a synchronous copy
// (on the legacy stream); else an asynchronous one on `stream`, which a
// capturing stream records instead of running.
CUresult Copy(void* dst, bool dst_device, const void* src, bool src_device,
              size_t bytes, CUstream stream, bool sync = false) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  if (!ValidStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  bool captured = false;
  if (CUresult r = sync ? SyncCall(stream) : StreamWork(stream, &captured);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (dst_device &&
      CheckDevice(reinterpret_cast<CUdeviceptr>(dst), bytes) != CUDA_SUCCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (src_device &&
      CheckDevice(reinterpret_cast<CUdeviceptr>(src), bytes) != CUDA_SUCCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (bytes > 0 && !captured) memmove(dst, src, bytes);
  return CUDA_SUCCESS;
}

void* Ptr(CUdeviceptr p) { return reinterpret_cast<void*>(p); }

CUresult fake_cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  return Copy(Ptr(dst), true, src, false, n, nullptr, true);
}
CUresult fake_cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  return Copy(dst, false, Ptr(src), true, n, nullptr, true);
}
CUresult fake_cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return Copy(Ptr(dst), true, Ptr(src), true, n, nullptr, true);
}
CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n,
                                CUstream s) {
  return Copy(Ptr(dst), true, src, false, n, s);
}
CUresult fake_cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n,
                                CUstream s) {
  return Copy(dst, false, Ptr(src), true, n, s);
}
CUresult fake_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                CUstream s) {
  return Copy(Ptr(dst), true, Ptr(src), true, n, s);
}

// cuMemcpyAsync infers the direction: an address inside an allocation is
// device (or pinned) memory, anything else the caller's host memory.
CUresult fake_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                            CUstream s) {
  bool dst_known, src_known;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    dst_known = FindRange(dst, n, nullptr) != nullptr;
    src_known = FindRange(src, n, nullptr) != nullptr;
  }
  return Copy(Ptr(dst), dst_known, Ptr(src), src_known, n, s);
}

CUresult fake_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext, CUdeviceptr src,
                                CUcontext, size_t n, CUstream s) {
  return Copy(Ptr(dst), true, Ptr(src), true, n, s);
}

CUresult Fill(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream,
              bool sync = false) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  if (!ValidStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  bool captured = false;
  if (CUresult r = sync ? SyncCall(stream) : StreamWork(stream, &captured);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (CheckDevice(dst, n) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  if (n > 0 && !captured) memset(Ptr(dst), value, n);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n) {
  return Fill(dst, v, n, nullptr, true);
}
CUresult fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n,
                              CUstream s) {
  return Fill(dst, v, n, s);
}

CUresult fake_cuMemGetAddressRange(CUdeviceptr* base, size_t* size,
                                   CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(S().mu);
  uintptr_t start = 0;
  const Allocation* a = FindRange(p, 1, &start);
  if (a == nullptr || a->device < 0) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = start;
  if (size != nullptr) *size = a->bytes;
  return CUDA_SUCCESS;
}

CUresult fake_cuPointerGetAttributes(unsigned int n,
                                     CUpointer_attribute* attributes,
                                     void** data, CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(S().mu);
  uintptr_t start = 0;
  const Allocation* a = FindRange(p, 1, &start);
  for (unsigned int i = 0; i < n; ++i) {
    switch (attributes[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned int*>(data[i]) = a == nullptr ? 0
                                               : a->device < 0
                                                   ? CU_MEMORYTYPE_HOST
                                                   : CU_MEMORYTYPE_DEVICE;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data[i]) = a == nullptr    ? -2
                                      : a->device < 0 ? 0
                                                      : a->device;
        break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<unsigned int*>(data[i]) = 0;
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *static_cast<CUdeviceptr*>(data[i]) = a == nullptr ? 0 : start;
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *static_cast<size_t*>(data[i]) = a == nullptr ? 0 : a->bytes;
        break;
      default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamCreate(CUstream* out, unsigned int flags) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  auto* s = new Stream{current_context};
  s->blocking = (flags & CU_STREAM_NON_BLOCKING) == 0;
  S().streams.insert(s);
  *out = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamCreateWithPriority(CUstream* out, unsigned int flags,
                                         int) {
  return fake_cuStreamCreate(out, flags);
}

CUresult fake_cuStreamDestroy(CUstream stream) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto* s = reinterpret_cast<Stream*>(stream);
  if (S().streams.erase(s) == 0) return CUDA_ERROR_INVALID_HANDLE;
  EndCaptureOf(s->capture);
  delete s;
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamSynchronize(CUstream stream) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (!ValidStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  return SyncCall(stream);
}

CUresult fake_cuStreamGetCtx(CUstream stream, CUcontext* out) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (!ValidStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  auto* s = reinterpret_cast<Stream*>(stream);
  bool special = stream == nullptr || stream == CU_STREAM_LEGACY ||
                 stream == CU_STREAM_PER_THREAD;
  *out = reinterpret_cast<CUcontext>(special ? current_context : s->context);
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (!ValidStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (S().events.count(reinterpret_cast<Event*>(event)) == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult fake_cuEventCreate(CUevent* out, unsigned int) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  auto* e = new Event{current_context};
  S().events.insert(e);
  *out = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

CUresult CheckEvent(CUevent event) {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().events.count(reinterpret_cast<Event*>(event)) != 0
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_HANDLE;
}

CUresult fake_cuEventRecord(CUevent event, CUstream stream) {
  {
    std::lock_guard<std::mutex> lock(S().mu);
    if (!ValidStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  }
  return CheckEvent(event);
}

CUresult fake_cuEventSynchronize(CUevent event) { return CheckEvent(event); }
// The fake runs nothing asynchronously: a recorded event is complete.
CUresult fake_cuEventQuery(CUevent event) { return CheckEvent(event); }

CUresult fake_cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (CheckEvent(start) != CUDA_SUCCESS || CheckEvent(end) != CUDA_SUCCESS) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *ms = 0.001f;
  return CUDA_SUCCESS;
}

CUresult fake_cuEventDestroy(CUevent event) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto* e = reinterpret_cast<Event*>(event);
  if (S().events.erase(e) == 0) return CUDA_ERROR_INVALID_HANDLE;
  delete e;
  return CUDA_SUCCESS;
}

// Any image loads. PTX (text with ".entry") gives kernels and layouts; an
// ELF cubin gives the kernels its string table names, with no layouts.
CUresult fake_cuModuleLoadData(CUmodule* out, const void* image) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  if (CUresult r = ModuleLoadCall(); r != CUDA_SUCCESS) return r;
  if (image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto m = std::make_unique<Module>();
  m->context = current_context;
  const auto* bytes = static_cast<const unsigned char*>(image);
  if (bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' &&
      bytes[3] == 'F') {
    // Section headers end the file: e_shoff + e_shnum * e_shentsize.
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, bytes + 0x28, 8);
    memcpy(&shentsize, bytes + 0x3a, 2);
    memcpy(&shnum, bytes + 0x3c, 2);
    m->image.assign(reinterpret_cast<const char*>(bytes),
                    shoff + uint64_t{shentsize} * shnum);
  } else {
    m->image = static_cast<const char*>(image);
    if (m->image.find(".entry") == std::string::npos)
      return CUDA_ERROR_INVALID_IMAGE;
    m->is_ptx = true;
    ParsePtx(*m);
  }
  for (auto& [name, f] : m->functions) S().functions.insert(f.get());
  *out = reinterpret_cast<CUmodule>(m.get());
  S().modules.insert(m.release());
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleLoadDataEx(CUmodule* out, const void* image, unsigned int,
                                 CUjit_option*, void**) {
  return fake_cuModuleLoadData(out, image);
}

CUresult fake_cuModuleUnload(CUmodule module) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto* m = reinterpret_cast<Module*>(module);
  if (S().modules.count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = UnsafeCall(); r != CUDA_SUCCESS) return r;
  S().modules.erase(m);
  for (auto& [name, f] : m->functions) S().functions.erase(f.get());
  delete m;
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleGetFunction(CUfunction* out, CUmodule module,
                                  const char* name) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto* m = reinterpret_cast<Module*>(module);
  if (S().modules.count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  auto it = m->functions.find(name);
  if (it == m->functions.end()) {
    if (m->is_ptx) return CUDA_ERROR_NOT_FOUND;
    // A cubin: the name must be in the image (its string table).
    std::string needle = std::string(1, '\0') + name + std::string(1, '\0');
    if (m->image.find(needle) == std::string::npos) return CUDA_ERROR_NOT_FOUND;
    auto f = std::make_unique<Function>();
    f->module = m;
    f->name = name;
    f->layout = fleetjit::fake_cuda::CubinLayout(m->image, f->name);
    S().functions.insert(f.get());
    it = m->functions.emplace(name, std::move(f)).first;
  }
  *out = reinterpret_cast<CUfunction>(it->second.get());
  return CUDA_SUCCESS;
}

// A function of a module still loaded, or null. Caller holds mu.
Function* LiveFunction(CUfunction function) {
  auto* f = reinterpret_cast<Function*>(function);
  return S().functions.count(f) != 0 ? f : nullptr;
}

CUresult fake_cuFuncGetAttribute(int* out, CUfunction_attribute attribute,
                                 CUfunction function) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (LiveFunction(function) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *out = 1024;
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *out = 32;
      break;
    default:
      *out = 0;
      break;
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuFuncLoad(CUfunction function) {
  std::lock_guard<std::mutex> lock(S().mu);
  Function* f = LiveFunction(function);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  f->loaded = true;
  return CUDA_SUCCESS;
}

CUresult fake_cuFuncSetAttribute(CUfunction function, CUfunction_attribute,
                                 int) {
  std::lock_guard<std::mutex> lock(S().mu);
  return LiveFunction(function) != nullptr ? CUDA_SUCCESS
                                           : CUDA_ERROR_INVALID_HANDLE;
}

CUresult fake_cuFuncGetParamInfo(CUfunction function, size_t index,
                                 size_t* offset, size_t* size) {
  std::lock_guard<std::mutex> lock(S().mu);
  Function* f = LiveFunction(function);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (!f->layout.known) return CUDA_ERROR_NOT_SUPPORTED;
  if (index >= f->layout.params.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = f->layout.params[index].offset;
  *size = f->layout.params[index].size;
  return CUDA_SUCCESS;
}

// The bytes of a FJFAKE_LAUNCH_*_KIB=N setting (N KiB; 0 when unset).
size_t KibFromEnv(const char* name) {
  const char* env = std::getenv(name);
  return env == nullptr ? size_t{0} : std::strtoull(env, nullptr, 10) << 10;
}

// FJFAKE_LAUNCH_TOUCH_KIB=N (benchmarks only): each launch also writes one
// byte in every 64-byte line of an N KiB buffer of its own, as a real
// driver's launch leaves its caller's data colder (docs/measurements.md,
// "A driver's footprint on the build machine"). 0 or unset: nothing touched.
void TouchLikeADriver() {
  static const size_t bytes = KibFromEnv("FJFAKE_LAUNCH_TOUCH_KIB");
  if (bytes == 0) return;
  static auto* buffer = new volatile unsigned char[bytes]();
  for (size_t i = 0; i < bytes; i += 64) buffer[i] = buffer[i] + 1;
}

// FJFAKE_LAUNCH_RUN_KIB=N (benchmarks only, at most 64): each launch also
// runs N KiB of straight-line code (no-ops), as a real driver's launch runs
// through tens of KiB of its own and leaves its caller's code out of the
// first-level instruction cache. With FJFAKE_LAUNCH_TOUCH_KIB it makes the
// fake driver's launches cost the caller what a real one's do
// (docs/measurements.md, "A driver's footprint on the build machine").
#if defined(__x86_64__) || defined(__aarch64__)
// 64 KiB of no-ops, then a return: a launch enters it N KiB before the end.
#if defined(__x86_64__)
#define FJFAKE_SLED_NOPS "65536"  // 1 byte each
#define FJFAKE_PROGBITS "@progbits"
#else
#define FJFAKE_SLED_NOPS "16384"  // 4 bytes each
#define FJFAKE_PROGBITS "%progbits"
#endif
asm(".pushsection .text.fjfake_sled,\"ax\"," FJFAKE_PROGBITS
    "\n"
    ".p2align 6\n"
    ".hidden fjfake_nop_sled\n"
    ".globl fjfake_nop_sled\n"
    "fjfake_nop_sled:\n"
    ".rept " FJFAKE_SLED_NOPS
    "\n"
    "nop\n"
    ".endr\n"
    "ret\n"
    ".popsection\n");
extern "C" void fjfake_nop_sled();
constexpr size_t kSledBytes = size_t{64} << 10;
void RunLikeADriver() {
  static void (*const entry)() = []() -> void (*)() {
    const size_t bytes =
        std::min(KibFromEnv("FJFAKE_LAUNCH_RUN_KIB"), kSledBytes);
    if (bytes == 0) return nullptr;
    return reinterpret_cast<void (*)()>(
        reinterpret_cast<uintptr_t>(&fjfake_nop_sled) + kSledBytes - bytes);
  }();
  if (entry != nullptr) entry();
}
#else
void RunLikeADriver() {}
#endif

// A launch does nothing, after the checks a driver makes: a live function
// of the current context, a live stream, and (when the layout is known) a
// parameter buffer of the kernel's size, or an array of argument pointers
// (`kernel_params`: the driver reads each at the layout's sizes).
CUresult CheckLaunch(CUfunction function, CUstream stream, void** extra,
                     void** kernel_params = nullptr) {
  TouchLikeADriver();
  RunLikeADriver();
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  Function* f = LiveFunction(function);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (f->module->context != current_context) return CUDA_ERROR_INVALID_CONTEXT;
  if (!ValidStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  bool captured = false;
  if (CUresult r = StreamWork(stream, &captured); r != CUDA_SUCCESS) return r;
  if (!f->loaded) {
    f->loaded = true;
    ++S().launch_loads;
  }
  if (!f->layout.known) return CUDA_SUCCESS;
  if (kernel_params != nullptr && extra == nullptr) return CUDA_SUCCESS;
  size_t given = 0;
  for (void** e = extra; e != nullptr && *e != CU_LAUNCH_PARAM_END; e += 2) {
    if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE)
      given = *static_cast<size_t*>(e[1]);
  }
  return given == f->layout.bytes || (extra == nullptr && f->layout.bytes == 0)
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_cuLaunchKernelEx(const CUlaunchConfig* config,
                               CUfunction function, void** kernel_params,
                               void** extra) {
  if (config == nullptr || config->gridDimX == 0 || config->blockDimX == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CheckLaunch(function, config->hStream, extra, kernel_params);
}

CUresult fake_cuLaunchKernel(CUfunction function, unsigned gx, unsigned,
                             unsigned, unsigned bx, unsigned, unsigned,
                             unsigned, CUstream stream, void** kernel_params,
                             void** extra) {
  if (gx == 0 || bx == 0) return CUDA_ERROR_INVALID_VALUE;
  return CheckLaunch(function, stream, extra, kernel_params);
}

CUresult fake_cuOccupancyMaxActiveClusters(int* clusters, CUfunction function,
                                           const CUlaunchConfig*) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (LiveFunction(function) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *clusters = 16;
  return CUDA_SUCCESS;
}

// The bytes of a PTX `.global` / `.const` variable named `name`: a line
// ".global .align 4 .b8 name[64];" or ".const .u32 name;" (the element's
// width from its type, times the array count). 0 when there is none.
size_t PtxGlobalBytes(const std::string& ptx, const std::string& name) {
  size_t line_start = 0;
  while (line_start < ptx.size()) {
    size_t end = ptx.find('\n', line_start);
    if (end == std::string::npos) end = ptx.size();
    std::string line = ptx.substr(line_start, end - line_start);
    line_start = end + 1;
    if (line.find(".global") == std::string::npos &&
        line.find(".const") == std::string::npos) {
      continue;
    }
    size_t at = line.find(" " + name);
    if (at == std::string::npos) continue;
    const size_t after = at + 1 + name.size();
    if (after >= line.size() ||
        (line[after] != '[' && line[after] != ';' && line[after] != ' ')) {
      continue;
    }
    size_t width = 4;
    for (const char* t : {"8 ", "16 ", "32 ", "64 "}) {
      for (const char* k : {".b", ".u", ".s", ".f"}) {
        if (line.find(std::string(k) + t) != std::string::npos) {
          width = static_cast<size_t>(std::atoi(t)) / 8;
        }
      }
    }
    size_t count = 1;
    if (line[after] == '[')
      count = std::strtoul(line.c_str() + after + 1, nullptr, 10);
    return width * count;
  }
  return 0;
}

CUresult fake_cuModuleGetGlobal(CUdeviceptr* out, size_t* bytes,
                                CUmodule module, const char* name) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto* m = reinterpret_cast<Module*>(module);
  if (S().modules.count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (name == nullptr || !m->is_ptx) return CUDA_ERROR_NOT_FOUND;
  auto it = m->globals.find(name);
  if (it == m->globals.end()) {
    const size_t size = PtxGlobalBytes(m->image, name);
    if (size == 0) return CUDA_ERROR_NOT_FOUND;
    it = m->globals.emplace(name, std::vector<char>(size, 0)).first;
  }
  if (out != nullptr) *out = reinterpret_cast<CUdeviceptr>(it->second.data());
  if (bytes != nullptr) *bytes = it->second.size();
  return CUDA_SUCCESS;
}

// Occupancy of an H100-like SM: 2048 threads, 32 blocks, 228 KiB of shared
// memory (fjfake_set_part's; 1 KiB reserved per block), whichever binds
// first.
CUresult fake_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* blocks, CUfunction function, int block_size, size_t dynamic_shared,
    unsigned int) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (LiveFunction(function) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (block_size <= 0 || block_size > 1024) return CUDA_ERROR_INVALID_VALUE;
  int n = std::min(32, 2048 / block_size);
  const size_t per_block = dynamic_shared + 1024;
  n = std::min<int>(
      n, static_cast<int>(static_cast<size_t>(S().shared_per_sm) / per_block));
  *blocks = n;
  return CUDA_SUCCESS;
}

CUresult fake_cuOccupancyMaxPotentialBlockSize(int* min_grid, int* block,
                                               CUfunction function,
                                               CUoccupancyB2DSize,
                                               size_t dynamic_shared,
                                               int limit) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (LiveFunction(function) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  int b = limit > 0 ? std::min(limit, 1024) : 1024;
  const int by_shared = static_cast<int>(
      static_cast<size_t>(S().shared_per_sm) / (dynamic_shared + 1024));
  *block = b;
  *min_grid = 132 * std::max(1, std::min(2048 / b, by_shared));
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return CUDA_SUCCESS;
}

size_t persisting_l2_limit[kMaxDevices] = {};

CUresult fake_cuCtxSetLimit(CUlimit limit, size_t value) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  if (limit != CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
    return CUDA_ERROR_NOT_SUPPORTED;
  persisting_l2_limit[current_context->device] = value;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetLimit(size_t* value, CUlimit limit) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  if (limit != CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
    return CUDA_ERROR_NOT_SUPPORTED;
  *value = persisting_l2_limit[current_context->device];
  return CUDA_SUCCESS;
}

CUresult fake_cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType,
                                     cuuint32_t rank, void* address,
                                     const cuuint64_t*, const cuuint64_t*,
                                     const cuuint32_t*, const cuuint32_t*,
                                     CUtensorMapInterleave, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion,
                                     CUtensorMapFloatOOBfill) {
  if (map == nullptr || rank == 0 || rank > 5 ||
      reinterpret_cast<uintptr_t>(address) % 16 != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  memset(map, 0x5a, sizeof(*map));
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceCanAccessPeer(int* can, CUdevice reader, CUdevice owner) {
  if (!ValidDevice(reader) || !ValidDevice(owner))
    return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(S().mu);
  *can = reader < S().p2p_devices && owner < S().p2p_devices ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxEnablePeerAccess(CUcontext owner, unsigned int) {
  std::lock_guard<std::mutex> lock(S().mu);
  Context* o = AsContext(owner);
  if (o == nullptr || current_context == nullptr)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (o->device >= S().p2p_devices ||
      current_context->device >= S().p2p_devices) {
    return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  }
  if (!S().peers.insert({current_context->device, o->device}).second) {
    return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxDisablePeerAccess(CUcontext owner) {
  std::lock_guard<std::mutex> lock(S().mu);
  Context* o = AsContext(owner);
  if (o == nullptr || current_context == nullptr)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (S().peers.erase({current_context->device, o->device}) == 0) {
    return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  }
  return CUDA_SUCCESS;
}

// Entry points fleetjit declares but the runtime does not call (graphs
// are the caller's business): present, and not supported.
template <typename F>
struct Unsupported;
template <typename... A>
struct Unsupported<CUresult(CUDAAPI*)(A...)> {
  static CUresult CUDAAPI Fn(A...) { return CUDA_ERROR_NOT_SUPPORTED; }
};
#define FJ_UNSUPPORTED(name) \
  constexpr auto fake_##name = &Unsupported<decltype(&::name)>::Fn;
FJ_UNSUPPORTED(cuGraphInstantiateWithFlags)
FJ_UNSUPPORTED(cuGraphLaunch)
FJ_UNSUPPORTED(cuGraphExecDestroy)
FJ_UNSUPPORTED(cuPointerGetAttribute)
#undef FJ_UNSUPPORTED

// Stream capture (section 2b): a test captures as a caller would, through
// the entry points cuGetProcAddress hands out; a graph only counts what
// was captured (nothing is instantiated or replayed).
CUresult fake_cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (CUresult r = RequireContext(); r != CUDA_SUCCESS) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
      mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (IsLegacy(stream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!ValidStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (CaptureOf(stream) != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  auto* s = stream == CU_STREAM_PER_THREAD ? nullptr
                                           : reinterpret_cast<Stream*>(stream);
  auto* c = new Capture{s, s != nullptr ? s->context : current_context,
                        std::this_thread::get_id(), mode};
  (s != nullptr ? s->capture : per_thread_capture) = c;
  S().captures.insert(c);
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamEndCapture(CUstream stream, CUgraph* out) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  Capture* c = CaptureOf(stream);
  if (c == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
      c->thread != std::this_thread::get_id()) {
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  }
  const bool invalidated = !Active(c);
  const uint64_t nodes = c->nodes;
  EndCaptureOf(c);
  if (invalidated) {
    *out = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  auto* g = new Graph{nodes};
  S().graphs.insert(g);
  *out = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

CUresult fake_cuGraphDestroy(CUgraph graph) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto* g = reinterpret_cast<Graph*>(graph);
  if (S().graphs.erase(g) == 0) return CUDA_ERROR_INVALID_VALUE;
  delete g;
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamIsCapturing(CUstream stream,
                                  CUstreamCaptureStatus* status) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidStream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (IsLegacy(stream)) {
    // The legacy stream cannot capture; a blocking stream's capture makes
    // the question an implicit dependency (that capture stays intact).
    if (!BlockingCaptures().empty()) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  const Capture* c = CaptureOf(stream);
  *status = c == nullptr ? CU_STREAM_CAPTURE_STATUS_NONE : c->status;
  return CUDA_SUCCESS;
}

CUresult fake_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == nullptr || *mode < CU_STREAM_CAPTURE_MODE_GLOBAL ||
      *mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::swap(*mode, capture_mode);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// 5. The table cuGetProcAddress hands out: each body behind its fault check,
//    with the prototype cuda.h gives the name.

template <int kSymbol, typename F, auto kBody>
struct Entry;
template <int kSymbol, typename... A, auto kBody>
struct Entry<kSymbol, CUresult(CUDAAPI*)(A...), kBody> {
  static CUresult CUDAAPI Call(A... args) {
    // The return address is the call site in the caller (a call through a
    // function pointer is never inlined).
    const auto site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
    if (CUresult r = Injected(kSymbol, site); r != CUDA_SUCCESS) return r;
    return kBody(args...);
  }
};

// Built on first use: no global constructor.
void* const* Table() {
  static void* const table[] = {
#define FJ_CU(name, version, required) \
  reinterpret_cast<void*>(             \
      &Entry<k_##name, decltype(&::name), fake_##name>::Call),
#include "platform/driver_symbols.inc"
#undef FJ_CU
  };
  return table;
}

}  // namespace

// ---------------------------------------------------------------------------
// 6. What the loader and the tests see.

extern "C" {

FJFAKE_API CUresult CUDAAPI cuInit(unsigned int flags) {
  const auto site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  if (CUresult r = Injected(k_cuInit, site); r != CUDA_SUCCESS) return r;
  return fake_cuInit(flags);
}

FJFAKE_API CUresult CUDAAPI
cuGetProcAddress_v2(const char* symbol, void** out, int, cuuint64_t,
                    CUdriverProcAddressQueryResult* found) {
  int index = symbol == nullptr ? -1 : SymbolIndex(symbol);
  bool hidden;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    hidden = index >= 0 && S().hidden[index];
  }
  if (index < 0 || index == k_cuInit || hidden) {
    *out = nullptr;
    if (found != nullptr) *found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *out = Table()[index];
  if (found != nullptr) *found = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

FJFAKE_API void fjfake_reset(int devices) {
  std::lock_guard<std::mutex> lock(S().mu);
  State& s = S();
  if (devices > 0 && devices <= kMaxDevices) s.devices = devices;
  s.driver_version = 13000;
  s.launch_loads = 0;
  s.p2p_devices = kMaxDevices;
  for (int i = 0; i < kSymbolCount; ++i) {
    s.calls[i] = 0;
    s.sites[i].clear();
    s.faults[i] = FaultPlan{};
    s.hidden[i] = false;
  }
  s.faults_fired = 0;
  s.reclaimed = 0;
}

FJFAKE_API int fjfake_symbol_count(void) { return kSymbolCount; }

FJFAKE_API const char* fjfake_symbol_name(int index) {
  return index >= 0 && index < kSymbolCount ? kSymbolNames[index] : nullptr;
}

FJFAKE_API uint64_t fjfake_calls(const char* name) {
  int index = SymbolIndex(name);
  if (index < 0) return 0;
  std::lock_guard<std::mutex> lock(S().mu);
  return S().calls[index];
}

FJFAKE_API uintptr_t fjfake_call_site(const char* name, uint64_t nth) {
  int index = SymbolIndex(name);
  if (index < 0 || nth == 0) return 0;
  std::lock_guard<std::mutex> lock(S().mu);
  const std::vector<uintptr_t>& sites = S().sites[index];
  return nth <= sites.size() ? sites[nth - 1] : 0;
}

FJFAKE_API int fjfake_fail(const char* name, uint64_t nth, int result) {
  int index = SymbolIndex(name);
  if (index < 0) return -1;
  std::lock_guard<std::mutex> lock(S().mu);
  S().faults[index] = FaultPlan{nth, true, static_cast<CUresult>(result)};
  return 0;
}

FJFAKE_API uint64_t fjfake_faults_fired(void) {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().faults_fired;
}

FJFAKE_API int fjfake_hide(const char* name) {
  int index = SymbolIndex(name);
  if (index < 0) return -1;
  std::lock_guard<std::mutex> lock(S().mu);
  S().hidden[index] = true;
  return 0;
}

FJFAKE_API void fjfake_set_part(int cc_major, int cc_minor, int shared_optin,
                                int shared_per_sm) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().cc_major = cc_major;
  S().cc_minor = cc_minor;
  S().shared_optin = shared_optin;
  S().shared_per_sm = shared_per_sm;
}

FJFAKE_API void fjfake_set_p2p_devices(int devices) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().p2p_devices = devices;
}

FJFAKE_API uint64_t fjfake_create_stream(int device) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (device < 0 || device >= S().devices || S().contexts[device].retains == 0)
    return 0;
  auto* s = new Stream{&S().contexts[device]};
  S().streams.insert(s);
  return reinterpret_cast<uint64_t>(s);
}

FJFAKE_API void fjfake_destroy_stream(uint64_t stream) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto* s = reinterpret_cast<Stream*>(stream);
  if (S().streams.erase(s) == 0) return;
  EndCaptureOf(s->capture);
  delete s;
}

FJFAKE_API uint64_t fjfake_create_blocking_stream(int device) {
  const uint64_t stream = fjfake_create_stream(device);
  std::lock_guard<std::mutex> lock(S().mu);
  if (stream != 0) reinterpret_cast<Stream*>(stream)->blocking = true;
  return stream;
}

FJFAKE_API void fjfake_set_driver_version(int version) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().driver_version = version;
}

FJFAKE_API int64_t fjfake_graph_nodes(uint64_t graph) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto* g = reinterpret_cast<Graph*>(graph);
  return S().graphs.count(g) != 0 ? static_cast<int64_t>(g->nodes) : -1;
}

FJFAKE_API uint64_t fjfake_launch_loads(void) {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().launch_loads;
}

FJFAKE_API void fjfake_get_live(fjfake_live* out) {
  std::lock_guard<std::mutex> lock(S().mu);
  State& s = S();
  *out = fjfake_live{};
  for (const auto& [address, a] : s.allocations) {
    (a.device < 0 ? out->host_allocations : out->allocations)++;
  }
  out->modules = static_cast<int64_t>(s.modules.size());
  out->streams = static_cast<int64_t>(s.streams.size());
  out->events = static_cast<int64_t>(s.events.size());
  for (int d = 0; d < kMaxDevices; ++d)
    out->context_retains += s.contexts[d].retains;
  out->reclaimed = static_cast<int64_t>(s.reclaimed);
}

}  // extern "C"

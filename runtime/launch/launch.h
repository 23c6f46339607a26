// Launching a kernel: checks, parameter packing and the driver call.
//
// Launch() is the one path every fj_launch takes. Before the driver is
// called it checks the configuration against the device and the kernel
// (grid and block limits, threads per block, shared memory, clusters) and
// the arguments against the kernel's parameters (count, kinds, sizes, tensor
// rank and dtype); each mismatch is a status that says what was wrong. It
// then packs the parameter buffer, on the stack, at the kernel's real
// offsets: through the kernel's JIT-built thunk when one is attached
// (jit/thunk/), else through the generic packer PackParams, with identical
// results. Finally it calls cuLaunchKernelEx with the buffer passed as
// CU_LAUNCH_PARAM_BUFFER_POINTER.
//
// A launch allocates nothing and takes no lock: it is safe from many
// threads on different streams, and inside stream capture (it never
// synchronises). The only locks are on rare first-time paths: raising a
// kernel's dynamic shared memory limit, allowing non-portable clusters.
//
// A sticky CUDA error (a faulting kernel) poisons the kernel's device: the
// status names the kernel, and every later launch on that device fails
// with it, while other devices keep working.
#ifndef FLEETJIT_RUNTIME_LAUNCH_LAUNCH_H_
#define FLEETJIT_RUNTIME_LAUNCH_LAUNCH_H_

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "jit/artifact.h"
#include "jit/copy_plan.h"
#include "platform/cu_errors.h"
#include "platform/driver_api.h"
#include "runtime/device/device.h"
#include "runtime/launch/tensor_encoder.h"
#include "runtime/launch/wire.h"
#include "runtime/load/kernel.h"

namespace fleetjit {

// A launch configuration: fj_launch_config's geometry, without its C
// framing (struct_size, ext) or its stream (capi/convert.cc converts and
// resolves the stream).
struct LaunchConfig {
  uint32_t grid[3] = {0, 0, 0};  // 0 entries count as 1
  uint32_t block[3] = {0, 0, 0};
  uint32_t shared_bytes = 0;        // dynamic shared memory
  uint32_t cluster[3] = {0, 0, 0};  // all 0 = no cluster
  // Since ABI 1.3: fj_launch_flags bits and the L2 access-policy window
  // (bytes 0 = none).
  uint32_t flags = 0;
  float l2_hit_ratio = 0;
  uint64_t l2_window_base = 0;
  uint64_t l2_window_bytes = 0;
};

// A launch configuration after its checks: zero entries became 1.
struct LaunchShape {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t cluster[3] = {1, 1, 1};
  bool has_cluster = false;
  bool non_portable_cluster = false;  // more than 8 blocks per cluster
  uint32_t dynamic_shared = 0;
  bool cooperative = false;   // CU_LAUNCH_ATTRIBUTE_COOPERATIVE
  bool programmatic = false;  // ..._PROGRAMMATIC_STREAM_SERIALIZATION
  bool has_window = false;    // ..._ACCESS_POLICY_WINDOW
  float l2_hit_ratio = 0;
  uint64_t l2_window_base = 0;
  uint64_t l2_window_bytes = 0;
};

// Checks `cfg` against the device's facts and the kernel's limits
// (`kernel_max_threads` 0 = unknown). OUT_OF_RANGE for a value over a
// limit, FAILED_PRECONDITION for clusters, cooperative launches,
// programmatic dependent launches or L2 windows on a device without them,
// INVALID_ARGUMENT for unknown flags. Pure: needs no GPU. (Whether a
// cooperative grid fits the device is Launch's check: it needs the
// driver's occupancy.)
absl::Status CheckLaunchConfig(const DeviceFacts& facts, int kernel_max_threads,
                               int static_shared, const LaunchConfig& cfg,
                               LaunchShape* out);

// A plain launch (no flags, no cluster, no L2 window) within `limits`:
// writes its grid, block and dynamic shared memory to `out` (the rest of
// a default LaunchShape is already right) and returns true, where
// CheckLaunchConfig would accept it with the same shape. False otherwise,
// `out` untouched: CheckLaunchConfig decides, and says why. The launch
// path's check: CheckLaunchConfig's loop over the device's limits, each
// with its "not reported" case, cost about 150 instructions a launch.
bool FitsPlainLaunch(const LaunchLimits& limits, const LaunchConfig& cfg,
                     LaunchShape* out);

// Checks the argument array itself: args non-NULL when n > 0, and
// stride >= kMinArgStructSize. Both launch paths call it first.
absl::Status CheckArgArray(const fj_arg* args, size_t n, size_t stride);
// CheckArgArray's rules as a yes/no, for the launch path.
inline bool ArgArrayFits(const fj_arg* args, size_t n, size_t stride) {
  return n == 0 || (args != nullptr && stride >= kMinArgStructSize &&
                    ((reinterpret_cast<uintptr_t>(args) | stride) %
                     alignof(fj_arg)) == 0);
}

// The generic packer: checks every argument against `entry` (count,
// struct_size == stride, kind and size per jit/thunk/arg_rules.h, tensors
// through `encoder`) and writes the parameter buffer: every byte of
// [0, entry.param_bytes), parameters at their offsets and zeros between.
// `buffer` must hold entry.param_bytes. Needs no GPU. `encoder` may be null
// when the kernel has no tensor parameter.
absl::Status PackParams(const jit::KernelEntry& entry, jit::CopyImpl impl,
                        const fj_arg* args, size_t n, size_t stride,
                        const TensorEncoder* encoder, uint8_t* buffer,
                        size_t buffer_size);

// Packs with `k`'s thunk when one is attached (and `use_thunk`), else with
// PackParams; on a thunk rejection PackParams produces the status. What
// Launch runs before the driver call; exposed for tests and benchmarks.
absl::Status PackForLaunch(const LoadedKernel& k, const fj_arg* args, size_t n,
                           size_t stride, const TensorEncoder& encoder,
                           bool use_thunk, uint8_t* buffer, size_t buffer_size);

// Launches `k` on `stream` (a CUstream of k's context, or nullptr for the
// legacy default stream). The C shim converted fj_launch_config into `cfg`
// and resolved its stream (an fj_stream handle) into `stream`. `args` is
// the wire format (wire.h); `arg_stride` is args[0].struct_size.
absl::Status Launch(LoadedKernel& k, const LaunchConfig& cfg, CUstream stream,
                    const fj_arg* args, size_t num_args, size_t arg_stride);

// The launch fj_launch takes (LaunchEncoded below is its twin for the
// runtime's own kernels):
// refuses a fork() child before anything reaches the driver, runs Launch,
// and notes `k` as its device's last kernel (what a later fault names).
absl::Status LaunchAndNote(LoadedKernel& k, const LaunchConfig& cfg,
                           CUstream stream, const fj_arg* args, size_t num_args,
                           size_t arg_stride);

// The co-resident limit of a cooperative launch: blocks of `shape`'s size
// and dynamic shared memory per SM (cuOccupancy...WithFlags) times the
// SMs. OUT_OF_RANGE naming both when the grid has more blocks. Needs `k`'s
// context current.
absl::Status CheckCooperativeGrid(const LoadedKernel& k,
                                  const LaunchShape& shape);
// ------------------------------------------- the runtime's own kernels
// One parameter of LaunchEncoded, already in the kernel's form: `size` bytes
// at `data`, copied to the parameter's offset. A tensor parameter is the
// 320-byte fj::tensor_param that TensorEncoder::EncodeDescribed wrote (its
// TMA map included), so no fj_arg is built on the way.
struct EncodedParam {
  const void* data = nullptr;
  uint32_t size = 0;
};

// Checks `params` against `entry` (count; each size equal to the
// parameter's; a tensor's rank and dtype against what the kernel declares)
// and writes the parameter buffer as PackParams does: every byte of
// [0, entry.param_bytes). Needs no GPU.
absl::Status PackEncoded(const jit::KernelEntry& entry,
                         absl::Span<const EncodedParam> params, uint8_t* buffer,
                         size_t buffer_size);

// LaunchAndNote for parameters already encoded (the copy and prefetch
// kernels, runtime/copy/): the same checks of `cfg`, fork refusal, driver
// call and note, with PackEncoded in place of the wire's packers.
absl::Status LaunchEncoded(LoadedKernel& k, const LaunchConfig& cfg,
                           CUstream stream,
                           absl::Span<const EncodedParam> params);

// OK for CUDA_SUCCESS. Otherwise the CheckCu status of `result`, prefixed
// with `what` (e.g. "kernel 'saxpy.cu:k': cuStreamSynchronize"); for a
// sticky error it also marks `device` poisoned with that status, so it
// names the kernel. For use after launches and synchronisations. Whether
// an error is sticky is the CUresult table's word (IsStickyError,
// platform/cu_errors.h).
absl::Status CheckStickyError(Device& device, const DriverApi& api,
                              CUresult result, absl::string_view what);

// Raises `k`'s dynamic shared memory limit to the most it can use on `f`'s
// device (the opt-in maximum less its static shared memory); launches do it
// on demand, an occupancy query first needs it.
absl::Status RaiseDynamicSharedLimit(LoadedKernel& k, const DeviceFacts& f);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LAUNCH_LAUNCH_H_

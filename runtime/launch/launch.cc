#include "runtime/launch/launch.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "jit/thunk/arg_rules.h"
#include "jit/thunk/thunk_abi.h"
#include "runtime/launch/check_notes.h"

namespace fleetjit {
namespace {

// Reads an enum field as the int it is in memory: a caller may put any
// value there, and loading an out-of-range enum is undefined in C++.
int32_t RawKind(const fj_arg* a) {
  int32_t kind;
  std::memcpy(&kind, reinterpret_cast<const char*>(a) + offsetof(fj_arg, kind),
              sizeof(kind));
  return kind;
}

const fj_arg* ArgAt(const fj_arg* args, size_t i, size_t stride) {
  return reinterpret_cast<const fj_arg*>(reinterpret_cast<const char*>(args) +
                                         i * stride);
}

// The thunk's way back into the encoder (thunk_abi.h).
__attribute__((hot)) int32_t EncodeTensorForThunk(
    void* encoder, uint32_t arg_index, const fj_tensor_arg* arg,
    int32_t declared_rank, int32_t declared_dtype, int32_t copy_impl,
    uint8_t* dst) noexcept {
  const auto* e = static_cast<const TensorEncoder*>(encoder);
  return e->Encode(arg_index, arg, declared_rank, declared_dtype,
                   static_cast<jit::CopyImpl>(copy_impl), dst)
                 .ok()
             ? 0
             : 1;
}

std::string DeviceLabel(const DeviceFacts& f) {
  return absl::StrCat("device ", f.ordinal, " (", f.name.empty() ? "?" : f.name,
                      ", sm_", f.arch(), ")");
}

absl::Status AllowNonPortableClusters(LoadedKernel& k) {
  FJ_RETURN_IF_ERROR(
      CheckCu(*k.api,
              k.api->cuFuncSetAttribute(
                  k.function,
                  CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
              "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)"),
      absl::StrCat("allowing clusters of more than 8 blocks for '",
                   k.display_name, "'"));
  k.non_portable_cluster_allowed.store(true, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace

absl::Status RaiseDynamicSharedLimit(LoadedKernel& k, const DeviceFacts& f) {
  // Raise straight to the most the kernel can ever use: every later launch
  // then fits, and concurrent raisers all set the same value.
  const int target = f.shared_per_block_optin - k.static_shared_bytes;
  FJ_RETURN_IF_ERROR(
      CheckCu(*k.api,
              k.api->cuFuncSetAttribute(
                  k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                  target),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"),
      absl::StrCat("raising the dynamic shared memory limit of '",
                   k.display_name, "' to ", target, " bytes"));
  k.dynamic_shared_limit.store(target, std::memory_order_relaxed);
  k.dynamic_shared_raised.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status CheckLaunchConfig(const DeviceFacts& f, int kernel_max_threads,
                               int static_shared, const LaunchConfig& cfg,
                               LaunchShape* out) {
  static constexpr const char* kAxis[3] = {"x", "y", "z"};
  // Filled in place: a local copied out at the end made the copy's wide
  // loads wait on the narrow stores that built it (a store-forwarding
  // stall on every launch). *out is meaningful only when OK is returned.
  LaunchShape& s = *out;
  s = LaunchShape{};
  for (int i = 0; i < 3; ++i) {
    s.grid[i] = cfg.grid[i] == 0 ? 1 : cfg.grid[i];
    s.block[i] = cfg.block[i] == 0 ? 1 : cfg.block[i];
    if (f.max_grid_dim[i] > 0 &&
        s.grid[i] > static_cast<uint32_t>(f.max_grid_dim[i])) {
      return absl::OutOfRangeError(absl::StrCat(
          "grid.", kAxis[i], " = ", s.grid[i], " exceeds the limit ",
          f.max_grid_dim[i], " of ", DeviceLabel(f)));
    }
    if (f.max_block_dim[i] > 0 &&
        s.block[i] > static_cast<uint32_t>(f.max_block_dim[i])) {
      return absl::OutOfRangeError(absl::StrCat(
          "block.", kAxis[i], " = ", s.block[i], " exceeds the limit ",
          f.max_block_dim[i], " of ", DeviceLabel(f)));
    }
  }
  const uint64_t threads = uint64_t{s.block[0]} * s.block[1] * s.block[2];
  if (f.max_threads_per_block > 0 &&
      threads > static_cast<uint64_t>(f.max_threads_per_block)) {
    return absl::OutOfRangeError(
        absl::StrCat("a block of ", s.block[0], "x", s.block[1], "x",
                     s.block[2], " = ", threads, " threads exceeds the limit ",
                     f.max_threads_per_block, " of ", DeviceLabel(f)));
  }
  if (kernel_max_threads > 0 &&
      threads > static_cast<uint64_t>(kernel_max_threads)) {
    return absl::OutOfRangeError(absl::StrCat(
        "a block of ", threads, " threads exceeds the ", kernel_max_threads,
        " this kernel can run per block (its register use or "
        "__launch_bounds__)"));
  }
  s.dynamic_shared = cfg.shared_bytes;
  const uint64_t shared =
      uint64_t{cfg.shared_bytes} + std::max(static_shared, 0);
  if (f.shared_per_block_optin > 0 &&
      shared > static_cast<uint64_t>(f.shared_per_block_optin)) {
    return absl::OutOfRangeError(absl::StrCat(
        "shared memory of ", shared, " bytes (", static_shared, " static + ",
        cfg.shared_bytes, " dynamic) exceeds the opt-in limit ",
        f.shared_per_block_optin, " of ", DeviceLabel(f)));
  }
  constexpr uint32_t kKnownFlags =
      FJ_LAUNCH_COOPERATIVE | FJ_LAUNCH_PROGRAMMATIC_DEPENDENT;
  if ((cfg.flags & ~kKnownFlags) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config->flags has unknown bits 0x",
        absl::Hex(cfg.flags & ~kKnownFlags), " (fj_launch_flags)"));
  }
  s.cooperative = (cfg.flags & FJ_LAUNCH_COOPERATIVE) != 0;
  if (s.cooperative && !f.cooperative_launch) {
    return absl::FailedPreconditionError(
        absl::StrCat(DeviceLabel(f),
                     " cannot launch cooperative kernels "
                     "(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0)"));
  }
  s.programmatic = (cfg.flags & FJ_LAUNCH_PROGRAMMATIC_DEPENDENT) != 0;
  if (s.programmatic && f.cc_major < 9) {
    return absl::FailedPreconditionError(
        absl::StrCat(DeviceLabel(f),
                     " has no programmatic dependent launch (sm_90 and newer "
                     "have it): clear FJ_LAUNCH_PROGRAMMATIC_DEPENDENT"));
  }
  if (cfg.l2_window_bytes != 0) {
    if (f.cc_major < 8 || f.max_access_policy_window_bytes <= 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          DeviceLabel(f),
          " has no L2 access-policy window (sm_80 and newer have it): set "
          "l2_window_bytes to 0"));
    }
    if (cfg.l2_window_bytes >
        static_cast<uint64_t>(f.max_access_policy_window_bytes)) {
      return absl::OutOfRangeError(absl::StrCat(
          "l2_window_bytes = ", cfg.l2_window_bytes,
          " exceeds the largest "
          "access-policy window of ",
          DeviceLabel(f), ", ", f.max_access_policy_window_bytes, " bytes"));
    }
    if (!(cfg.l2_hit_ratio > 0.0f && cfg.l2_hit_ratio <= 1.0f)) {
      return absl::OutOfRangeError(
          absl::StrCat("l2_hit_ratio = ", cfg.l2_hit_ratio,
                       " is not in (0, 1] (the window's share that persists)"));
    }
    if (cfg.l2_window_base == 0) {
      return absl::InvalidArgumentError(
          "l2_window_base is 0 but l2_window_bytes is not");
    }
    s.has_window = true;
    s.l2_hit_ratio = cfg.l2_hit_ratio;
    s.l2_window_base = cfg.l2_window_base;
    s.l2_window_bytes = cfg.l2_window_bytes;
  }
  s.has_cluster =
      cfg.cluster[0] != 0 || cfg.cluster[1] != 0 || cfg.cluster[2] != 0;
  if (s.has_cluster) {
    if (!f.cluster_launch) {
      return absl::FailedPreconditionError(absl::StrCat(
          DeviceLabel(f),
          " cannot launch thread-block clusters (sm_90 and newer can)"));
    }
    uint64_t blocks = 1;
    for (int i = 0; i < 3; ++i) {
      s.cluster[i] = cfg.cluster[i] == 0 ? 1 : cfg.cluster[i];
      blocks *= s.cluster[i];
    }
    if (blocks > 16) {
      return absl::OutOfRangeError(absl::StrCat(
          "a cluster of ", s.cluster[0], "x", s.cluster[1], "x", s.cluster[2],
          " = ", blocks, " blocks exceeds 16 (8 portable, 16 non-portable)"));
    }
    s.non_portable_cluster = blocks > 8;
    for (int i = 0; i < 3; ++i) {
      if (s.grid[i] % s.cluster[i] != 0) {
        return absl::OutOfRangeError(absl::StrCat(
            "grid.", kAxis[i], " = ", s.grid[i],
            " is not a multiple of cluster.", kAxis[i], " = ", s.cluster[i]));
      }
    }
  }
  return absl::OkStatus();
}

__attribute__((hot)) bool FitsPlainLaunch(const LaunchLimits& limits,
                                          const LaunchConfig& cfg,
                                          LaunchShape* out) {
  if (!limits.resolved ||
      (cfg.flags | cfg.cluster[0] | cfg.cluster[1] | cfg.cluster[2]) != 0 ||
      cfg.l2_window_bytes != 0) {
    return false;
  }
  // Written out, not looped: GCC at -O2 kept the loops (a third of the
  // check's instructions). An extent of 0 counts as 1.
  auto one = [](uint32_t v) { return v | static_cast<uint32_t>(v == 0); };
  const uint32_t g0 = one(cfg.grid[0]), g1 = one(cfg.grid[1]),
                 g2 = one(cfg.grid[2]);
  const uint32_t b0 = one(cfg.block[0]), b1 = one(cfg.block[1]),
                 b2 = one(cfg.block[2]);
  const uint64_t threads = uint64_t{b0} * b1 * b2;
  const uint64_t shared = uint64_t{cfg.shared_bytes} + limits.static_shared;
  // Non-short-circuit: one compare each, no branch between them.
  const bool fits = (g0 <= limits.grid[0]) & (g1 <= limits.grid[1]) &
                    (g2 <= limits.grid[2]) & (b0 <= limits.block[0]) &
                    (b1 <= limits.block[1]) & (b2 <= limits.block[2]) &
                    (threads <= limits.threads) & (shared <= limits.shared);
  if (!fits) return false;
  out->grid[0] = g0;
  out->grid[1] = g1;
  out->grid[2] = g2;
  out->block[0] = b0;
  out->block[1] = b1;
  out->block[2] = b2;
  out->dynamic_shared = cfg.shared_bytes;
  return true;
}

absl::Status CheckArgArray(const fj_arg* args, size_t n, size_t stride) {
  if (ArgArrayFits(args, n, stride)) return absl::OkStatus();
  if (args == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("args is NULL but num_args is ", n));
  }
  if (stride < kMinArgStructSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("args[0].struct_size is ", stride,
                     ", smaller than the first version of "
                     "fj_arg (",
                     kMinArgStructSize, ")"));
  }
  if (reinterpret_cast<uintptr_t>(args) % alignof(fj_arg) != 0 ||
      stride % alignof(fj_arg) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "args (", absl::Hex(reinterpret_cast<uintptr_t>(args)),
        ") and args[0].struct_size (", stride, ") must be multiples of ",
        alignof(fj_arg), ", the alignment of fj_arg"));
  }
  return absl::OkStatus();
}

absl::Status PackParams(const jit::KernelEntry& entry, jit::CopyImpl impl,
                        const fj_arg* args, size_t n, size_t stride,
                        const TensorEncoder* encoder, uint8_t* buffer,
                        size_t buffer_size) {
  if (entry.param_bytes > buffer_size) {
    return absl::OutOfRangeError(absl::StrCat(
        "the kernel takes ", entry.param_bytes,
        " bytes of parameters; at most ", buffer_size, " are supported"));
  }
  absl::Status array = CheckArgArray(args, n, stride);
  if (!array.ok()) return array;
  if (n != entry.params.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the kernel takes ", entry.params.size(), " argument",
        entry.params.size() == 1 ? "" : "s", ", the call passed ", n));
  }
  std::memset(buffer, 0, entry.param_bytes);
  for (size_t i = 0; i < n; ++i) {
    const fj_arg* a = ArgAt(args, i, stride);
    const jit::ParamSpec& spec = entry.params[i];
    if (a->struct_size != stride) {
      return absl::InvalidArgumentError(absl::StrCat(
          "argument ", i, ": struct_size is ", a->struct_size,
          " but args[0].struct_size is ", stride,
          "; every element of the array must carry the same struct_size"));
    }
    if (uint64_t{spec.offset} + spec.size > entry.param_bytes) {
      return absl::InternalError(absl::StrCat(
          "argument ", i, ": the kernel's parameter layout is malformed (",
          spec.offset, "+", spec.size, " > ", entry.param_bytes, ")"));
    }
    const int32_t kind = RawKind(a);
    if (kind < 1 || kind > FJ_ARG_KIND_LAST) {
      return absl::InvalidArgumentError(absl::StrCat(
          "argument ", i, ": kind ", kind, " is not an fj_arg_kind value"));
    }
    const jit::AcceptedArgs accepted = jit::AcceptedArgsFor(spec);
    uint8_t* dst = buffer + spec.offset;
    if ((accepted.scalar_kinds & (uint32_t{1} << kind)) != 0) {
      std::memcpy(dst, &a->v, spec.size);  // every accepted kind has this size
      continue;
    }
    if (kind == FJ_ARG_BYTES && accepted.bytes) {
      if (a->size != spec.size) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", i, ": FJ_ARG_BYTES of ", a->size,
                         " bytes, but the kernel's parameter is ",
                         jit::DescribeParam(spec)));
      }
      if (a->v.bytes == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", i, ": FJ_ARG_BYTES with a NULL v.bytes"));
      }
      std::memcpy(dst, a->v.bytes, spec.size);
      continue;
    }
    if (kind == FJ_ARG_C128 && accepted.c128) {
      if (a->v.bytes == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", i,
                         ": FJ_ARG_C128 with a NULL v.bytes (it points "
                         "to two doubles, real then imaginary)"));
      }
      std::memcpy(dst, a->v.bytes, 16);
      continue;
    }
    if (kind == FJ_ARG_TENSOR && accepted.tensor) {
      if (encoder == nullptr) {
        return absl::InternalError(absl::StrCat(
            "argument ", i, ": no tensor encoder for a tensor argument"));
      }
      absl::Status encoded = encoder->Encode(i, a->v.tensor, spec.tensor_rank,
                                             spec.tensor_dtype, impl, dst);
      if (!encoded.ok()) return encoded;
      continue;
    }
    const uint32_t given =
        kind == FJ_ARG_C128 ? 16 : jit::ScalarKindBytes(kind);
    return absl::InvalidArgumentError(absl::StrCat(
        "argument ", i, ": the kernel expects ", jit::DescribeParam(spec),
        ", got ", jit::ArgKindName(kind),
        given != 0 && given != spec.size ? absl::StrCat(" (", given, " bytes)")
                                         : ""));
  }
  return absl::OkStatus();
}

namespace {

// PackForLaunch's rest: no thunk (or one not ready, or a buffer too small
// for it), a bad argument array, or a thunk that refused an argument.
__attribute__((noinline)) absl::Status PackForLaunchSlow(
    const LoadedKernel& k, const fj_arg* args, size_t n, size_t stride,
    const TensorEncoder& encoder, const LaunchThunk* thunk, int32_t refused,
    uint8_t* buffer, size_t buffer_size) {
  const jit::KernelEntry& entry = *k.entry;
  if (thunk == nullptr) {
    return PackParams(entry, k.copy_impl, args, n, stride, &encoder, buffer,
                      buffer_size);
  }
  // The thunk only says which argument (or that the array itself is bad,
  // `refused` -1); the generic packer, which checks the array first, says
  // why.
  absl::Status detailed = PackParams(entry, k.copy_impl, args, n, stride,
                                     &encoder, buffer, buffer_size);
  if (!detailed.ok()) return detailed;
  return absl::InternalError(absl::StrCat(
      "launch thunk ", thunk->symbol, " rejected ",
      refused == kThunkBadCount ? std::string("the argument count")
                                : absl::StrCat("argument ", refused - 1),
      " that the generic path accepts; please report this (FLEETJIT_THUNKS=0 "
      "avoids it)"));
}

// The thunk's path, inlined where fj_launch packs; all else is
// PackForLaunchSlow.
__attribute__((always_inline, hot)) inline absl::Status PackForLaunchInline(
    const LoadedKernel& k, const fj_arg* args, size_t n, size_t stride,
    const TensorEncoder& encoder, bool use_thunk, uint8_t* buffer,
    size_t buffer_size) {
  const LaunchThunk* thunk =
      use_thunk ? k.thunk.load(std::memory_order_acquire) : nullptr;
  if (thunk == nullptr || thunk->fn == nullptr ||
      k.entry->param_bytes > buffer_size) {
    return PackForLaunchSlow(k, args, n, stride, encoder, nullptr, 0, buffer,
                             buffer_size);
  }
  int32_t r = -1;  // the argument array itself is refused
  if (ArgArrayFits(args, n, stride)) {
    FjThunkContext ctx{&EncodeTensorForThunk,
                       const_cast<void*>(static_cast<const void*>(&encoder))};
    r = thunk->fn(args, n, stride, buffer, &ctx);
    if (__builtin_expect(r == 0, 1)) return absl::OkStatus();
  }
  return PackForLaunchSlow(k, args, n, stride, encoder, thunk, r, buffer,
                           buffer_size);
}

}  // namespace

absl::Status PackForLaunch(const LoadedKernel& k, const fj_arg* args, size_t n,
                           size_t stride, const TensorEncoder& encoder,
                           bool use_thunk, uint8_t* buffer,
                           size_t buffer_size) {
  return PackForLaunchInline(k, args, n, stride, encoder, use_thunk, buffer,
                             buffer_size);
}

namespace {

// Makes `k`'s context current on this thread when another one, or none, is
// (a current context that cannot be read counts as none). True when it had
// to: a failed launch is then worth trying again.
__attribute__((noinline, cold)) absl::StatusOr<bool> EnterKernelContext(
    const LoadedKernel& k) {
  const DriverApi& api = *k.api;
  CUcontext current = nullptr;
  if (api.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == k.context) {
    return false;
  }
  FJ_RETURN_IF_ERROR(FJ_CU_CALL(api, cuCtxSetCurrent, k.context),
                     absl::StrCat("launching '", k.display_name, "'"));
  return true;
}

// Parameter buffers up to this size sit in a small stack frame.
constexpr size_t kSmallParamBytes = 4096;

// Packs and launches with the parameter buffer on the stack: nothing is
// allocated per launch. Most kernels take the small frame; the 32 KiB one
// is only entered for kernels that need it.
// `pack(buffer, size)` writes the parameter buffer: the wire's packers for
// fj_launch (WirePacker), PackEncoded for the runtime's own kernels.
template <size_t kBufferBytes, typename Pack>
__attribute__((always_inline, hot)) inline absl::Status PackAndLaunch(
    LoadedKernel& k, const LaunchShape& shape, CUstream stream,
    const Pack& pack) {
  const DriverApi& api = *k.api;
  Device& device = *k.device;
  const DeviceFacts& facts = device.facts();
  alignas(64) uint8_t buffer[kBufferBytes];
  absl::Status status = pack(buffer, sizeof(buffer));
  if (__builtin_expect(!status.ok(), 0)) {
    return Annotate(status, absl::StrCat("launching '", k.display_name, "'"));
  }

  // The thread's current context is not read before a plain launch: in the
  // kernel's context (every launch but a thread's first) that read is pure
  // cost. A launch that fails is tried once more in the kernel's context
  // when another one, or none, was current (docs/launch.md). The rarer
  // launches that set a function attribute or ask the occupancy first
  // enter the kernel's context before doing so.
  const bool raise_shared =
      __builtin_expect(shape.dynamic_shared > 0, 0) &&
      !k.dynamic_shared_raised.load(std::memory_order_acquire) &&
      static_cast<int64_t>(shape.dynamic_shared) >
          // A fresh function allows 48 KiB minus its static shared memory.
          std::min(k.dynamic_shared_limit.load(std::memory_order_relaxed),
                   facts.shared_per_block - k.static_shared_bytes);
  const bool allow_clusters =
      shape.non_portable_cluster &&
      !k.non_portable_cluster_allowed.load(std::memory_order_acquire);
  if (__builtin_expect(raise_shared || allow_clusters || shape.cooperative,
                       0)) {
    FJ_RETURN_IF_ERROR(EnterKernelContext(k).status());
  }
  if (raise_shared) {
    FJ_RETURN_IF_ERROR(RaiseDynamicSharedLimit(k, facts), "launching");
  }
  if (allow_clusters) {
    FJ_RETURN_IF_ERROR(AllowNonPortableClusters(k), "launching");
  }

  CUlaunchConfig config = {};
  config.gridDimX = shape.grid[0];
  config.gridDimY = shape.grid[1];
  config.gridDimZ = shape.grid[2];
  config.blockDimX = shape.block[0];
  config.blockDimY = shape.block[1];
  config.blockDimZ = shape.block[2];
  config.sharedMemBytes = shape.dynamic_shared;
  config.hStream = stream;
  // Each attribute is zeroed when it is used: zeroing the whole array
  // (288 bytes, a `rep stos`) cost more than the rest of the launch path.
  CUlaunchAttribute attributes[4];
  unsigned num_attributes = 0;
  auto add_attribute = [&](CUlaunchAttributeID id) -> CUlaunchAttribute& {
    CUlaunchAttribute& a = attributes[num_attributes++];
    std::memset(&a, 0, sizeof(a));
    a.id = id;
    return a;
  };
  if (__builtin_expect(shape.has_cluster, 0)) {
    CUlaunchAttribute& a = add_attribute(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
    a.value.clusterDim.x = shape.cluster[0];
    a.value.clusterDim.y = shape.cluster[1];
    a.value.clusterDim.z = shape.cluster[2];
  }
  if (__builtin_expect(shape.cooperative, 0)) {
    FJ_RETURN_IF_ERROR(CheckCooperativeGrid(k, shape),
                       absl::StrCat("launching '", k.display_name, "'"));
    add_attribute(CU_LAUNCH_ATTRIBUTE_COOPERATIVE).value.cooperative = 1;
  }
  if (__builtin_expect(shape.programmatic, 0)) {
    add_attribute(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
        .value.programmaticStreamSerializationAllowed = 1;
  }
  if (__builtin_expect(shape.has_window, 0)) {
    CUlaunchAttribute& a =
        add_attribute(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
    a.value.accessPolicyWindow.base_ptr =
        reinterpret_cast<void*>(static_cast<uintptr_t>(shape.l2_window_base));
    a.value.accessPolicyWindow.num_bytes = shape.l2_window_bytes;
    a.value.accessPolicyWindow.hitRatio = shape.l2_hit_ratio;
    a.value.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
    a.value.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  }
  if (__builtin_expect(num_attributes > 0, 0)) {
    config.attrs = attributes;
    config.numAttrs = num_attributes;
  }
  size_t param_bytes = k.entry->param_bytes;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer,
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &param_bytes,
                   CU_LAUNCH_PARAM_END};
  void** const launch_extra = param_bytes != 0 ? extra : nullptr;
  CUresult r = api.cuLaunchKernelEx(&config, k.function, nullptr, launch_extra);
  if (__builtin_expect(r != CUDA_SUCCESS, 0)) {
    absl::StatusOr<bool> entered = EnterKernelContext(k);
    if (!entered.ok()) return entered.status();
    if (*entered) {
      r = api.cuLaunchKernelEx(&config, k.function, nullptr, launch_extra);
    }
    if (r != CUDA_SUCCESS) {
      return CheckStickyError(
          device, api, r,
          absl::StrCat("kernel '", k.display_name, "': cuLaunchKernelEx"));
    }
  }
  return absl::OkStatus();
}

// The frame of the largest parameter buffers, entered only by kernels that
// need it.
template <typename Pack>
__attribute__((noinline)) absl::Status PackAndLaunchLarge(
    LoadedKernel& k, const LaunchShape& shape, CUstream stream,
    const Pack& pack) {
  return PackAndLaunch<jit::kMaxParamBytes>(k, shape, stream, pack);
}

// The launch of `k` under `cfg` with the parameter buffer `pack` writes:
// the kernel and its device usable, the configuration checked, then the
// small or the large frame.
template <typename Pack>
__attribute__((always_inline, hot)) inline absl::Status CheckAndLaunch(
    LoadedKernel& k, const LaunchConfig& cfg, CUstream stream,
    const Pack& pack) {
  if (__builtin_expect(k.api == nullptr || k.device == nullptr ||
                           k.entry == nullptr || k.function == nullptr,
                       0)) {
    return absl::FailedPreconditionError("launch: the kernel is not loaded");
  }
  Device& device = *k.device;
  if (__builtin_expect(device.is_poisoned(), 0)) return device.poisoned();
  const DeviceFacts& facts = device.facts();

  LaunchShape shape;
  if (__builtin_expect(!FitsPlainLaunch(k.limits, cfg, &shape), 0)) {
    absl::Status status = CheckLaunchConfig(facts, k.max_threads_per_block,
                                            k.static_shared_bytes, cfg, &shape);
    if (!status.ok()) {
      return Annotate(status, absl::StrCat("launching '", k.display_name, "'"));
    }
  }

  if (__builtin_expect(k.entry->param_bytes <= kSmallParamBytes, 1)) {
    return PackAndLaunch<kSmallParamBytes>(k, shape, stream, pack);
  }
  return PackAndLaunchLarge(k, shape, stream, pack);
}

// A launch reads the driver's status only when it fails, so a fork() child
// (`k.api` is set) is refused before anything reaches the driver.
__attribute__((noinline, cold)) absl::Status RefuseForkedChild(
    const LoadedKernel& k) {
  return CheckCu(*k.api, CUDA_SUCCESS, "cuLaunchKernelEx");
}

// Launch's body, inlined into Launch and into LaunchAndNote: fj_launch's
// path is then one function down to the driver call, save the packer and
// the configuration check (every call and frame on it was a few more
// cache lines of code to fetch after the driver's launch evicted them).
__attribute__((always_inline, hot)) inline absl::Status LaunchInline(
    LoadedKernel& k, const LaunchConfig& cfg, CUstream stream,
    const fj_arg* args, size_t num_args, size_t arg_stride) {
  // The encoder is made inside the frame: it exists only where the kernel
  // is known to be loaded.
  auto wire = [&](uint8_t * buffer, size_t size)
      __attribute__((always_inline)) {
    TensorEncoder encoder(k.api, k.display_name, &k.tma_fallbacks,
                          &k.tma_fallback_reported, k.logger);
    return PackForLaunchInline(k, args, num_args, arg_stride, encoder,
                               /*use_thunk=*/true, buffer, size);
  };
  return CheckAndLaunch(k, cfg, stream, wire);
}

}  // namespace

__attribute__((hot)) absl::Status Launch(LoadedKernel& k,
                                         const LaunchConfig& cfg,
                                         CUstream stream, const fj_arg* args,
                                         size_t num_args, size_t arg_stride) {
  return LaunchInline(k, cfg, stream, args, num_args, arg_stride);
}

__attribute__((hot)) absl::Status LaunchAndNote(
    LoadedKernel& k, const LaunchConfig& cfg, CUstream stream,
    const fj_arg* args, size_t num_args, size_t arg_stride) {
  if (__builtin_expect(k.api != nullptr && IsForkedChild(*k.api), 0)) {
    return RefuseForkedChild(k);
  }
  absl::Status status =
      LaunchInline(k, cfg, stream, args, num_args, arg_stride);
  if (__builtin_expect(status.ok(), 1)) k.device->NoteLaunch(&k.display_name);
  // A checked build's notes (check_notes.h): debug logging only.
  if (__builtin_expect(k.check_notes != nullptr, 0) && status.ok()) {
    return ReportCheckNotes(k, stream);
  }
  return status;
}

absl::Status CheckCooperativeGrid(const LoadedKernel& k,
                                  const LaunchShape& shape) {
  const DriverApi& api = *k.api;
  const DeviceFacts& f = k.device->facts();
  if (api.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags == nullptr) {
    return absl::UnavailableError(
        "this CUDA driver lacks "
        "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, which a "
        "cooperative launch needs");
  }
  const uint64_t threads =
      uint64_t{shape.block[0]} * shape.block[1] * shape.block[2];
  int per_sm = 0;
  FJ_CU_RETURN_IF_ERROR(api,
                        cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
                        &per_sm, k.function, static_cast<int>(threads),
                        shape.dynamic_shared, CU_OCCUPANCY_DEFAULT);
  const uint64_t grid = uint64_t{shape.grid[0]} * shape.grid[1] * shape.grid[2];
  const uint64_t most = uint64_t(std::max(per_sm, 0)) * f.sm_count;
  if (grid > most) {
    return absl::OutOfRangeError(absl::StrCat(
        "a cooperative grid of ", shape.grid[0], "x", shape.grid[1], "x",
        shape.grid[2], " = ", grid, " blocks exceeds the ", most,
        " blocks that can be co-resident on ", DeviceLabel(f), " (", per_sm,
        " per SM x ", f.sm_count, " SMs for blocks of ", threads,
        " threads and ", shape.dynamic_shared,
        " bytes of dynamic shared memory; fj_kernel_occupancy)"));
  }
  return absl::OkStatus();
}

absl::Status PackEncoded(const jit::KernelEntry& entry,
                         absl::Span<const EncodedParam> params, uint8_t* buffer,
                         size_t buffer_size) {
  if (entry.param_bytes > buffer_size) {
    return absl::OutOfRangeError(absl::StrCat(
        "the kernel takes ", entry.param_bytes,
        " bytes of parameters; at most ", buffer_size, " are supported"));
  }
  if (params.size() != entry.params.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the kernel takes ", entry.params.size(), " argument",
                     entry.params.size() == 1 ? "" : "s", ", the call passed ",
                     params.size()));
  }
  std::memset(buffer, 0, entry.param_bytes);
  for (size_t i = 0; i < params.size(); ++i) {
    const EncodedParam& p = params[i];
    const jit::ParamSpec& spec = entry.params[i];
    if (uint64_t{spec.offset} + spec.size > entry.param_bytes) {
      return absl::InternalError(absl::StrCat(
          "argument ", i, ": the kernel's parameter layout is malformed (",
          spec.offset, "+", spec.size, " > ", entry.param_bytes, ")"));
    }
    if (p.size != spec.size || p.data == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "argument ", i, ": ", p.size, " encoded bytes",
          p.data == nullptr ? " at NULL" : "",
          ", but the kernel's parameter is ", jit::DescribeParam(spec)));
    }
    if (jit::AcceptedArgsFor(spec).tensor) {
      fj::tensor_param t;
      std::memcpy(static_cast<void*>(&t), p.data, sizeof(t));
      FJ_RETURN_IF_ERROR(CheckDeclaredTensor(
          i, t.rank, t.dtype, spec.tensor_rank, spec.tensor_dtype));
    }
    std::memcpy(buffer + spec.offset, p.data, spec.size);
  }
  return absl::OkStatus();
}

absl::Status LaunchEncoded(LoadedKernel& k, const LaunchConfig& cfg,
                           CUstream stream,
                           absl::Span<const EncodedParam> params) {
  FJ_RETURN_IF_ERROR(RefuseForkedChild(k));
  auto encoded = [&](uint8_t* buffer, size_t size) {
    return PackEncoded(*k.entry, params, buffer, size);
  };
  FJ_RETURN_IF_ERROR(CheckAndLaunch(k, cfg, stream, encoded));
  k.device->NoteLaunch(&k.display_name);
  return absl::OkStatus();
}

absl::Status CheckStickyError(Device& device, const DriverApi& api,
                              CUresult result, absl::string_view what) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  // The call name goes last in `what`; CheckCu puts it first in the message.
  absl::Status status = CheckCu(api, result, what);
  if (IsStickyError(result)) device.MarkPoisoned(status);
  return status;
}

}  // namespace fleetjit

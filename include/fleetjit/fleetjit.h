/* fleetjit: one CUDA kernel source, built at run time for the GPU it lands on.
 *
 * fleetjit JIT-builds CUDA C++ kernels with NVRTC for the live device (or for
 * a named target), against the portable copy layer <fleetjit/copy.cuh>,
 * caches the result so no process compiles what it or a sibling already
 * built, and launches kernels with checked arguments.
 *
 * Conventions of this header (the ABI promise):
 *  1. C99 and C++; it includes only <stddef.h> and <stdint.h>. No CUDA type
 *     appears: devices are ordinals, streams are fj_stream handles, device
 *     memory is a uint64_t address.
 *  2. Every fallible call returns `fj_status*`. NULL means success. A non-NULL
 *     status is owned by the caller, who frees it with fj_status_free(); its
 *     message lives as long as it does. Codes are the closed enum fj_code.
 *     There is no thread-local "last error": calls are safe from any thread,
 *     including Go's goroutines that move between OS threads.
 *  3. Outputs come last, named out_*, and are left untouched on error.
 *  4. Handles are opaque and checked: a destroyed, foreign or forged handle
 *     is an FJ_INVALID_ARGUMENT status, never a crash. Destroy calls accept
 *     NULL. A handle may be destroyed while other threads use it (a module
 *     torn down while requests launch from it): their calls either finish
 *     or are refused with FJ_INVALID_ARGUMENT (the handle is no longer
 *     live) or FJ_FAILED_PRECONDITION ("... was destroyed while this call
 *     ran"), never a crash. A destroy returns once the calls already using
 *     what it frees have returned; calls that block for long (builds,
 *     fj_build_wait/take, fj_module_link, fj_tune) do not hold it up: they
 *     keep what they need and end with FJ_FAILED_PRECONDITION. A destroy
 *     called from inside a fleetjit callback (log_fn) is
 *     FJ_FAILED_PRECONDITION. GPU work already queued is the caller's to
 *     finish: destroying a buffer a queued kernel reads is still a race.
 *  5. Every argument struct begins with `size_t struct_size` (set it to
 *     sizeof(the struct) as you compiled it) and `const void* ext` (NULL).
 *     Older, shorter structs get defaults for the missing tail; newer, longer
 *     ones have their unknown tail ignored. A struct_size smaller than the
 *     first version of the struct is FJ_INVALID_ARGUMENT. Enum fields and
 *     arguments may hold any int: one outside its enum is
 *     FJ_INVALID_ARGUMENT naming the field (the *_name calls: "unknown").
 *  6. Strings are UTF-8 fj_str values with explicit lengths; none need a
 *     terminating NUL, and none may contain one (FJ_INVALID_ARGUMENT naming
 *     the field). Strings returned by the library are also NUL-terminated
 *     for convenience.
 *  7. Nothing happens at load time. libcuda.so.1 is loaded by
 *     fj_runtime_create(); NVRTC only when a build needs a compiler. With no
 *     driver or no GPU the runtime still works for builds to named targets;
 *     device calls return FJ_UNAVAILABLE. After fork(), a child's calls on a
 *     runtime created by the parent, or on anything made from it (modules,
 *     kernels, streams, builds; builds and destroys included), return
 *     FJ_FAILED_PRECONDITION; the child creates its own runtime.
 *  8. Versioning: FJ_VERSION_MAJOR changes on removal, retyping or
 *     reordering; FJ_VERSION_MINOR on addition. Compare fj_version() with
 *     the macros to check the library you loaded.
 *  9. Exported symbols all begin with fj_. No C++ exception or abort crosses
 *     this boundary.
 * 10. Each declaration says which minor version brought it: "(since 1.0)",
 *     "(since 1.1)", "(since 1.2)", "(since 1.3)" or "(since 1.4)". A field
 *     or enumerator
 * added later says so where it stands; a 1.0 caller's shorter struct_size never
 * reaches it (rule 5).
 * 11. Coordinates in this header (shape, strides, fj_tensor_arg.box,
 *     fj_copy_desc.src_start, fj_prefetch_desc.tile_*) are outermost-first,
 *     DLPack's order: index 0 is the slowest-varying dimension. Device code
 *     (<fleetjit/copy.cuh>: fj::tensor::shape(d), box(d), tile coordinates)
 *     counts from the innermost, as PTX and CUtensorMap do: its d = 0 is
 *     this header's ndim - 1. The runtime reverses the order once.
 * 12. This header states contracts. What they cost on real GPUs (times,
 *     bandwidths) is measured in docs/measurements.md, from the files under
 *     bench/results/; what each GPU generation can do natively and what the
 *     copy layer emulates is in docs/copy-matrix.md.
 *
 * Sections, by topic: versions; strings and status; targets and copy
 * implementations; runtime (options, start-up, exit); devices; streams;
 * memory; builds (blocking, CUDA's headers, asynchronous, images built
 * elsewhere, device linking, the module cache); tensors; kernels and launch;
 * kernel attributes and occupancy; module globals; tensor copies, L2 prefetch
 * and peer access; tuning; logs.
 */
#ifndef FLEETJIT_FLEETJIT_H_
#define FLEETJIT_FLEETJIT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FJ_API __attribute__((visibility("default")))
#else
#define FJ_API
#endif

/* ------------------------------------------------------------------------ */
/* Versions                                                                 */

/* The version of this header (since 1.0). */
#define FJ_VERSION_MAJOR 1
#define FJ_VERSION_MINOR 4
/* (major << 16) | minor of the library actually loaded (since 1.0). */
FJ_API uint32_t fj_version(void);

/* ------------------------------------------------------------------------ */
/* Strings and status (since 1.0)                                           */

/* A UTF-8 string with an explicit length (since 1.0). */
typedef struct fj_str {
  const char*
      data;    /* UTF-8, need not be NUL-terminated; may be NULL if size 0 */
  size_t size; /* bytes */
} fj_str;

/* The closed set of status codes (since 1.0); each says when it is used. */
typedef enum fj_code {
  FJ_OK = 0,
  /* A caller error: NULL pointer, bad struct_size, stale handle, enum value
   * out of range, malformed target name, argument mismatch. */
  FJ_INVALID_ARGUMENT = 1,
  /* A named thing does not exist: kernel name, device ordinal. */
  FJ_NOT_FOUND = 2,
  /* A dependency is missing: no driver, no GPU, no NVRTC. Say what to
   * install; retrying without a change will fail again. */
  FJ_UNAVAILABLE = 3,
  /* The call is valid but the state forbids it: forcing a copy
   * implementation the hardware lacks, a context poisoned by a faulting
   * kernel, use after fork. */
  FJ_FAILED_PRECONDITION = 4,
  /* NVRTC rejected the source. The status carries the build log, options,
   * target and copy implementation as payloads. */
  FJ_BUILD_ERROR = 5,
  /* The CUDA driver returned an error; the message names the call and
   * carries the driver's own text. */
  FJ_CUDA_ERROR = 6,
  /* Out of memory or another bounded resource. */
  FJ_RESOURCE_EXHAUSTED = 7,
  /* A value outside what the device supports: grid, block, shared memory or
   * cluster limits. */
  FJ_OUT_OF_RANGE = 8,
  /* A bug in fleetjit. Please report it with the message. */
  FJ_INTERNAL = 9,
  /* (since 1.2) A wait bounded by the caller ran out of time before the
   * work was done: fj_cache_flush with remote publications still queued
   * after timeout_ms. The work goes on; calling again may succeed. (A
   * timed-out fj_build_wait is not an error: it reports *out_done = 0.) */
  FJ_DEADLINE_EXCEEDED = 10
} fj_code;
#define FJ_CODE_LAST FJ_DEADLINE_EXCEEDED

/* (since 1.0) */
typedef struct fj_status fj_status;

/* The status's code; FJ_OK for NULL. (since 1.0) */
FJ_API fj_code fj_status_code(const fj_status* status);
/* The message, NUL-terminated, valid until fj_status_free(). "" for NULL.
 * If out_size is not NULL it receives the length without the NUL.
 * (since 1.0) */
FJ_API const char* fj_status_message(const fj_status* status, size_t* out_size);
/* A named detail of the status, or NULL if absent. Build errors carry
 * "build_log", "options", "target" and "copy_impl"; CUDA errors carry
 * "cuda_call" and "cuda_error". Valid until fj_status_free(). (since 1.0) */
FJ_API const char* fj_status_detail(const fj_status* status, fj_str key,
                                    size_t* out_size);
/* Frees a status. NULL is accepted. (since 1.0) */
FJ_API void fj_status_free(fj_status* status);
/* The name of a code ("INVALID_ARGUMENT"); "UNKNOWN" out of range.
 * (since 1.0) */
FJ_API const char* fj_code_name(fj_code code);

/* ------------------------------------------------------------------------ */
/* Targets and copy implementations (since 1.0)                             */

/* How <fleetjit/copy.cuh> moves data on a device. (since 1.0) */
typedef enum fj_copy_impl {
  FJ_COPY_IMPL_AUTO = 0,     /* choose from the target's compute capability */
  FJ_COPY_IMPL_SYNC = 1,     /* ld/st + block barrier: any GPU */
  FJ_COPY_IMPL_CP_ASYNC = 2, /* cp.async: sm_80+ */
  FJ_COPY_IMPL_TMA = 3       /* bulk/tensor copies on mbarriers: sm_90+ */
} fj_copy_impl;
#define FJ_COPY_IMPL_LAST FJ_COPY_IMPL_TMA

/* Effects the copy layer offers on every device, natively or emulated.
 * (since 1.0) */
typedef enum fj_feature {
  FJ_FEATURE_BARRIER = 0,     /* copies complete on an fj::barrier */
  FJ_FEATURE_GROUP_WAIT = 1,  /* commit / wait for <= N groups */
  FJ_FEATURE_COPY_G2S = 2,    /* contiguous GMEM -> SMEM */
  FJ_FEATURE_COPY_S2G = 3,    /* contiguous SMEM -> GMEM */
  FJ_FEATURE_PREDICATE = 4,   /* per-copy user predicate */
  FJ_FEATURE_TILE_COPY = 5,   /* 1-5-D strided tile copies */
  FJ_FEATURE_OOB_ZEROS = 6,   /* out-of-bounds reads as zero */
  FJ_FEATURE_OOB_NAN = 7,     /* out-of-bounds reads as NaN */
  FJ_FEATURE_MULTICAST = 8,   /* cluster collective copies */
  FJ_FEATURE_L2_PREFETCH = 9, /* L2 prefetch of spans and tiles */
  FJ_FEATURE_COUNT = 10
} fj_feature;

/* (since 1.0) */
typedef enum fj_support {
  FJ_SUPPORT_NATIVE = 1,  /* the hardware does it */
  FJ_SUPPORT_EMULATED = 2 /* the copy layer builds it from other parts */
} fj_support;

/* The stable lower-case name of an implementation ("tma"), feature
 * ("group_wait") or support level ("native"). "unknown" out of range.
 * (since 1.0) */
FJ_API const char* fj_copy_impl_name(fj_copy_impl impl);
FJ_API const char* fj_feature_name(fj_feature feature);
FJ_API const char* fj_support_name(fj_support support);

/* (since 1.0) */
typedef struct fj_copy_plan {
  size_t struct_size;
  const void* ext;
  char target[32];   /* canonical target, e.g. "sm_90a", "compute_80" */
  fj_copy_impl impl; /* the implementation chosen (never AUTO) */
  fj_support support[FJ_FEATURE_COUNT]; /* indexed by fj_feature */
} fj_copy_plan;

/* The copy plan for a target name ("sm_90", "sm_90a", "compute_80") and an
 * optional forced implementation. Needs no GPU and no runtime. Forcing an
 * implementation the target lacks is FJ_FAILED_PRECONDITION. The name is
 * checked for its form only: which architectures build is the NVRTC's
 * list, checked when a build compiles. (since 1.0) */
FJ_API fj_status* fj_copy_plan_for_target(fj_str target, fj_copy_impl impl,
                                          fj_copy_plan* out_plan);

/* ------------------------------------------------------------------------ */
/* Runtime (since 1.0)                                                      */

/* A runtime: the loaded driver and compiler, the module cache, and every
 * handle made from it (since 1.0). */
typedef struct fj_runtime fj_runtime;

/* Bits of fj_runtime_options.flags (since 1.0). */
typedef enum fj_runtime_flags {
  FJ_RUNTIME_DISABLE_DISK_CACHE = 1u << 0,
  /* Launch through the generic path only (no JIT-built launch thunks). */
  FJ_RUNTIME_DISABLE_THUNKS = 1u << 1,
  /* Since 1.1: load NVRTC inside fj_runtime_create (see "Start-up"). */
  FJ_RUNTIME_PRELOAD_NVRTC = 1u << 2
} fj_runtime_flags;

/* How to create a runtime (since 1.0; NULL options = all defaults). */
typedef struct fj_runtime_options {
  size_t struct_size;
  const void* ext;
  /* Library files to load instead of the loader's search ("" = default:
   * libcuda.so.1; libnvrtc.so.13, then .12, then /usr/local/cuda). */
  fj_str libcuda_path;
  fj_str libnvrtc_path;
  /* Build every module for this target instead of the live device's
   * ("sm_80", "compute_80"). Empty = live device. Applies to the builds
   * that name no target, except one whose fj_build_options.copy_impl the
   * forced target lacks (tma under compute_80): it yields, and that build
   * gets the device's target (fj_module_info says which; a log line at
   * info says why), so rehearsing an older fleet does not refuse a suite's
   * explicit builds; with no device such a build is
   * FJ_FAILED_PRECONDITION. Which targets build at all is the NVRTC's
   * list (nvrtcGetSupportedArchs): another is FJ_INVALID_ARGUMENT naming
   * it. */
  fj_str target_override;
  /* Force a copy implementation for every build whose target has it (as
   * FLEETJIT_COPY_IMPL does). A build for a target that lacks it gets that
   * target's best implementation instead (fj_module_info's copy_impl says
   * which; a log line at info says why), so forcing tma to rehearse the
   * fleet does not refuse a suite's builds for sm_80. An implementation
   * set in fj_build_options.copy_impl is not softened: one its target
   * lacks is FJ_FAILED_PRECONDITION. AUTO = choose. */
  fj_copy_impl copy_impl_override;
  uint32_t flags; /* fj_runtime_flags */
  /* Disk cache directory. Empty = $FLEETJIT_CACHE_DIR, else
   * $XDG_CACHE_HOME/fleetjit, else ~/.cache/fleetjit. */
  fj_str cache_dir;
  /* Byte cap of the disk cache, LRU-evicted. 0 = default (1 GiB). */
  uint64_t cache_max_bytes;
  /* Since 1.1 (fields a 1.0 caller lacks read as empty): the fleet's shared
   * cache tier, behind memory and disk. Empty = none.
   * redis://[[user]:password@]host[:port][/db] or
   * unix://[[user]:password@]/path.sock[?db=N]; rediss:// is refused (this
   * build's hiredis 0.14 has no TLS). Needs libhiredis.so.0.14 at run time
   * (loaded only then; without it the tier is off and fj_cache_stats says
   * why) and a fleet key. The password is never logged.
   * file:///PATH names a cache bundle instead (no Redis): one read-only file
   * of built modules that `fleetjit cache export PATH` wrote, served before
   * the disk cache; with fleet_key set, only a bundle signed with it is
   * used. Its hits count as disk hits (FJ_CACHE_DISK_HIT). The variable
   * FLEETJIT_CACHE_BUNDLE sets one beside a Redis tier (and wins over this
   * field). */
  fj_str remote_cache_url;
  /* HMAC-SHA256 key that signs and checks remote entries (and bundles): hex
   * (at least 32 digits) or raw bytes (at least 16). Entries not signed with
   * it are refused and rebuilt. */
  fj_str fleet_key;
  /* Since 1.1 (a caller built before these fields gets no callback and no
   * pre-opening): log lines through the caller; see fj_log_level under
   * "Logs". NULL log_fn = the library logs nothing (unless
   * FLEETJIT_LOG is set: then to stderr). log_level is an fj_log_level;
   * FJ_LOG_OFF (0) with a log_fn means the default, FJ_LOG_WARN. */
  void (*log_fn)(void* user, int32_t level, fj_str message);
  void* log_user;
  int32_t log_level;
  /* Since 1.1: device ordinals whose primary contexts fj_runtime_create
   * opens (retains and makes current) so the first request does not pay
   * for it; an entry -1 means every device (none without a GPU: not an
   * error). An ordinal that does not exist fails the create.
   * FLEETJIT_PREOPEN=all|none|N[,N...] replaces the list (all = {-1}),
   * and FLEETJIT_PRELOAD_NVRTC (a switch: 1|0, true|false, on|off, yes|no)
   * sets or clears FJ_RUNTIME_PRELOAD_NVRTC; another value fails the
   * create with FJ_INVALID_ARGUMENT. */
  const int32_t* preopen_devices;
  size_t num_preopen_devices;
} fj_runtime_options;

/* Environment variables override the options (since 1.0; fleetjit info
 * lists those in effect; docs/configuration.md is their table, with each
 * one's values): FLEETJIT_TARGET, FLEETJIT_COPY_IMPL (auto|sync|cp_async|tma),
 * FLEETJIT_CACHE_DIR, FLEETJIT_CACHE_MAX_BYTES, FLEETJIT_CACHE,
 * FLEETJIT_THUNKS, FLEETJIT_PCH, FLEETJIT_LIBCUDA, FLEETJIT_LIBNVRTC,
 * FLEETJIT_REMOTE_CACHE, FLEETJIT_FLEET_KEY, FLEETJIT_LIBHIREDIS,
 * FLEETJIT_LOG (off|error|warn|info|debug, since 1.1), FLEETJIT_PREOPEN
 * (all|none|N[,N...]) and FLEETJIT_PRELOAD_NVRTC, since 1.1, and
 * FLEETJIT_SLOW_PATH_LIBRARY (default off: kernels on <fleetjit/copy.cuh>
 * link the layer's slow paths from a library built once per target,
 * docs/slow-path-library.md), since 1.3, and FLEETJIT_COPY_TUNE (default
 * on: fj_copy's window kernel takes the launch shape tuned for the device
 * model, looked up in the cache tiers or tuned once in the background,
 * docs/tuning.md), since 1.3; FLEETJIT_CACHE_BUNDLE (a cache bundle, as
 * remote_cache_url's file:// form), FLEETJIT_BUILD_WAIT (seconds a build
 * waits for another process building the same kernel into the same cache
 * folder before compiling it too; default 120, 0 = never;
 * docs/fleet-cache.md) and FLEETJIT_CHECK (default off: the caller's builds
 * get -DFJ_CHECK=1, the copy layer's checked mode, which traps on a tile
 * load outside a promise-in-bounds tensor naming the call; under
 * FLEETJIT_LOG=debug each launch of a checked kernel then waits and logs
 * the tiles that left TMA once per call site; `fleetjit matrix` sets it)
 * and FLEETJIT_COPY_DEFINES (FJ_NAME=INT[,FJ_NAME=INT...]: copy-layer
 * macros of docs/copy-macros.md for the caller's builds, e.g.
 * FJ_TMA_SMALL_TILES=0; a build whose own options name the macro keeps its
 * own), since 1.4. The switches (FLEETJIT_CACHE, _THUNKS, _PCH, _PRELOAD_NVRTC,
 * _SLOW_PATH_LIBRARY, _COPY_TUNE, _CHECK) take 1|0, true|false,
 * on|off or yes|no in any case; a malformed value of any variable fails
 * fj_runtime_create with FJ_INVALID_ARGUMENT naming the variable and the
 * values it accepts. */

/* Creates a runtime. options may be NULL for defaults. A missing driver or
 * GPU is not an error here: the runtime reports 0 devices. (since 1.0) */
FJ_API fj_status* fj_runtime_create(const fj_runtime_options* options,
                                    fj_runtime** out_runtime);
/* Releases the runtime's contexts, modules, streams and memory. NULL is
 * accepted. Handles created from it become invalid. (since 1.0) */
FJ_API fj_status* fj_runtime_destroy(fj_runtime* runtime);

/* Why the driver is unavailable ("" if it loaded), NUL-terminated, valid
 * for the runtime's life. (since 1.0) */
FJ_API const char* fj_runtime_driver_error(const fj_runtime* runtime);

/* Start-up (since 1.1): fj_runtime_options.preopen_devices opens device
 * contexts and FJ_RUNTIME_PRELOAD_NVRTC loads NVRTC inside fj_runtime_create,
 * so that the first build or load does not pay for them (what each costs:
 * docs/measurements.md, "Process start"). Preloading NVRTC on a host without it
 * fails the create with FJ_UNAVAILABLE.
 *
 * Exit with builds in flight (since 1.1): exit() on the thread that created a
 * runtime, when that is the main thread (returning from main() included), first
 * waits (30 s at most) for the builds in flight, NVRTC and the driver's module
 * loads included, before any library's exit handlers run; a build that would
 * start after that is FJ_FAILED_PRECONDITION, and the cache only ever holds
 * whole entries. The library then stays loaded until the main thread ends (a
 * dlclose unloads nothing). exit() from another thread is not waited for so
 * surely: such a process destroys its runtimes first. */

/* ------------------------------------------------------------------------ */
/* Devices (since 1.0)                                                      */

/* Number of visible CUDA devices: 0 when there is no driver or no GPU.
 * (since 1.0) */
FJ_API fj_status* fj_device_count(const fj_runtime* runtime,
                                  int32_t* out_count);

/* Facts about one device and the copy plan chosen for it (since 1.0). */
typedef struct fj_device_info {
  size_t struct_size;
  const void* ext;
  char name[256];
  int32_t ordinal;
  int32_t cc_major;
  int32_t cc_minor;
  int32_t sm_count;
  uint64_t total_memory_bytes;
  int32_t shared_memory_per_block;       /* default limit, bytes */
  int32_t shared_memory_per_block_optin; /* opt-in maximum, bytes */
  int32_t shared_memory_per_sm;
  int32_t l2_cache_bytes;
  int32_t max_threads_per_block;
  int32_t cluster_launch; /* 1 if clusters can be launched */
  int32_t driver_version; /* e.g. 13000 */
  fj_copy_plan plan;      /* target and copy plan chosen */
  /* Since 1.3 (a shorter struct_size does not receive them): */
  int32_t cooperative_launch; /* 1 if FJ_LAUNCH_COOPERATIVE can be used */
  /* The most fj_device_set_persisting_l2 accepts, and the largest
   * fj_launch_config.l2_window_bytes (0 before sm_80: no window). */
  int32_t max_persisting_l2_bytes;
  int32_t max_access_policy_window_bytes;
} fj_device_info;

/* Facts about device `ordinal` and the copy plan fleetjit will use on it.
 * (since 1.0) */
FJ_API fj_status* fj_device_info_get(fj_runtime* runtime, int32_t ordinal,
                                     fj_device_info* out_info);

/* Sets aside `bytes` of device `ordinal`'s L2 for persisting accesses
 * (cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE) on its primary
 * context): what launches with an L2 access-policy window
 * (fj_launch_config.l2_window_bytes) keep resident. 0 gives it back. The
 * driver may round it; *out_bytes (may be NULL) receives what it set.
 * More than fj_device_info.max_persisting_l2_bytes is FJ_OUT_OF_RANGE; a
 * device before sm_80 is FJ_FAILED_PRECONDITION. (since 1.3) */
FJ_API fj_status* fj_device_set_persisting_l2(fj_runtime* runtime,
                                              int32_t ordinal, uint64_t bytes,
                                              uint64_t* out_bytes);
/* ------------------------------------------------------------------------ */
/* Streams                                                                  */

/* A stream of one device (since 1.0): one fleetjit created, or one of the
 * caller's, wrapped. */
typedef struct fj_stream fj_stream;

/* Creates a non-blocking stream on device `ordinal`. (since 1.0) */
FJ_API fj_status* fj_stream_create(fj_runtime* runtime, int32_t ordinal,
                                   fj_stream** out_stream);
/* The stream priorities of device `ordinal`: *out_least (the default, 0)
 * to *out_greatest (e.g. -5; lower numbers are higher priorities, as in
 * CUDA). Either output may be NULL. (since 1.3) */
FJ_API fj_status* fj_stream_priority_range(fj_runtime* runtime, int32_t ordinal,
                                           int32_t* out_least,
                                           int32_t* out_greatest);
/* fj_stream_create with a priority (cuStreamCreateWithPriority): work on a
 * higher-priority stream's kernels is scheduled first when blocks of
 * several streams wait. A priority outside fj_stream_priority_range is
 * FJ_OUT_OF_RANGE naming the range (CUDA would clamp it silently).
 * (since 1.3) */
FJ_API fj_status* fj_stream_create_with_priority(fj_runtime* runtime,
                                                 int32_t ordinal,
                                                 int32_t priority,
                                                 fj_stream** out_stream);
/* Wraps a CUstream the caller owns (torch.cuda.current_stream().cuda_stream,
 * a CuPy stream's ptr) as an fj_stream of device `device`: launches, copies
 * (fj_memcpy*, fj_memset_d8, fj_copy, fj_prefetch) and
 * fj_stream_synchronize on it are ordered on the caller's stream, with the
 * caller's own work, with no synchronisation in between.
 *
 * The stream is borrowed: fleetjit never destroys it. fj_stream_destroy of
 * the wrapper (and fj_runtime_destroy) only forgets it, without waiting;
 * the caller keeps it alive while the wrapper is used. `cu_stream` may be
 * 0 or CU_STREAM_LEGACY (1): the legacy default stream; or
 * CU_STREAM_PER_THREAD (2): the per-thread default stream of the thread
 * making each call. Any other value must be a live stream of the device's
 * primary context (the one fleetjit, PyTorch and CuPy use): one of another
 * context or device is FJ_INVALID_ARGUMENT. A value that is no CUstream at
 * all (a forged or freed pointer) is undefined behaviour: the driver
 * dereferences it, and on the H200 a forged one crashed the process.
 * A bad device is FJ_NOT_FOUND, no GPU FJ_UNAVAILABLE.
 * Wrapping the same CUstream twice gives two independent wrappers.
 * The caller may capture the stream into a CUDA graph around fleetjit
 * calls on the wrapper (see "Graph capture" after fj_launch).
 * (since 1.1) */
FJ_API fj_status* fj_stream_wrap(fj_runtime* runtime, int32_t device,
                                 uint64_t cu_stream, fj_stream** out_stream);
/* Waits for all work on the stream; reports a kernel fault as a status.
 *
 * Kernel faults (an illegal address, a trap, a misaligned access) and how
 * to recover. The status of the call where the fault surfaces (usually a
 * synchronize, a copy or the next launch) is FJ_CUDA_ERROR naming the
 * kernel last launched on that device. From then on every call that
 * touches a device of this runtime returns FJ_FAILED_PRECONDITION quoting
 * that first fault: the CUDA driver keeps such errors ("sticky") for every
 * context of the process, not only the faulting GPU's, and resetting a
 * primary context does not clear them (docs/measurements.md, "Kernel
 * faults"). Calls that need no device still work: builds for named targets,
 * cache statistics, fj_module_load of images for later use. To recover,
 * a caller must end the process and start a new one (a server: let its
 * supervisor restart the worker); destroying and re-creating the runtime in
 * the same process does not clear the driver's error. (since 1.0) */
FJ_API fj_status* fj_stream_synchronize(fj_stream* stream);
/* Destroys a stream after its work completes. NULL is accepted. (since 1.0) */
FJ_API fj_status* fj_stream_destroy(fj_stream* stream);

/* ------------------------------------------------------------------------ */
/* Memory (since 1.0; enough to drive kernels end to end)                   */

/* Allocates device memory on device `ordinal`. The address is returned in
 * *out_address and must be freed with fj_mem_free on the same runtime.
 * `bytes` above INT64_MAX (a negative size converted to uint64_t) is
 * FJ_INVALID_ARGUMENT, not FJ_RESOURCE_EXHAUSTED. (since 1.0) */
FJ_API fj_status* fj_mem_alloc(fj_runtime* runtime, int32_t ordinal,
                               uint64_t bytes, uint64_t* out_address);
/* Frees an address returned by fj_mem_alloc. 0 is accepted. An address not
 * allocated by this runtime is FJ_INVALID_ARGUMENT. (since 1.0) */
FJ_API fj_status* fj_mem_free(fj_runtime* runtime, uint64_t address);
/* Copies host -> device, device -> host, device -> device. With a NULL
 * stream the copy is complete on return; with a stream it is ordered on it
 * and host memory must stay live until the stream is synchronised. The
 * device ranges must lie inside allocations of this runtime. (since 1.0) */
FJ_API fj_status* fj_memcpy_htod(fj_runtime* runtime, uint64_t dst,
                                 const void* src, uint64_t bytes,
                                 fj_stream* stream);
FJ_API fj_status* fj_memcpy_dtoh(fj_runtime* runtime, void* dst, uint64_t src,
                                 uint64_t bytes, fj_stream* stream);
FJ_API fj_status* fj_memcpy_dtod(fj_runtime* runtime, uint64_t dst,
                                 uint64_t src, uint64_t bytes,
                                 fj_stream* stream);
/* Sets `bytes` bytes at dst to `value` (e.g. to poison an output).
 * (since 1.0) */
FJ_API fj_status* fj_memset_d8(fj_runtime* runtime, uint64_t dst, uint8_t value,
                               uint64_t bytes, fj_stream* stream);

/* ------------------------------------------------------------------------ */
/* Builds: blocking (since 1.0)                                             */

/* A built module: an image for one target, loaded on devices as its
 * kernels are looked up (since 1.0). */
typedef struct fj_module fj_module;

/* What a build produces (since 1.0). */
typedef enum fj_output {
  FJ_OUTPUT_AUTO = 0, /* cubin for sm_XX targets, PTX for compute_XX */
  FJ_OUTPUT_CUBIN = 1,
  FJ_OUTPUT_PTX = 2
} fj_output;

/* Bits of fj_build_options.flags (since 1.0). */
typedef enum fj_build_flags {
  FJ_BUILD_NO_CACHE = 1u << 0 /* neither read nor write any cache tier */
} fj_build_flags;

/* What to build: fj_module_build and fj_module_build_async take it
 * (since 1.0). */
typedef struct fj_build_options {
  size_t struct_size;
  const void* ext;
  fj_str source; /* CUDA C++; <fleetjit/copy.cuh> is available */
  fj_str name;   /* a name for logs and file stems, e.g. "saxpy.cu" */
  const fj_str* nvrtc_options; /* extra NVRTC options, e.g. "-DTILE=64" */
  size_t num_nvrtc_options;
  /* Kernels to instantiate and look up by their C++ name, e.g.
   * "scale<float>". extern "C" kernels need no entry. */
  const fj_str* name_expressions;
  size_t num_name_expressions;
  /* "sm_XX[a]" (cubin) or "compute_XX[a]" (PTX). Empty = the runtime's
   * target override, else the live device `device`. */
  fj_str target;
  int32_t device; /* ordinal used when target is empty */
  /* AUTO = the runtime's override where the target has it, else chosen;
   * another value is used as is, and one the target lacks is
   * FJ_FAILED_PRECONDITION. */
  fj_copy_impl copy_impl;
  fj_output output;
  uint32_t flags; /* fj_build_flags */
  /* Since 1.1 (a 1.0 caller's shorter struct_size reads as none): folders
   * searched for #include, in order, after any -I in nvrtc_options and
   * before CUDA's own headers, which every build finds by itself (see
   * fj_runtime_include_dir). Macros go in nvrtc_options ("-DNAME=VAL"). The
   * cache key covers the content of every header a build may read from
   * these folders, not their paths: an edited header is rebuilt. */
  const fj_str* include_dirs;
  size_t num_include_dirs;
} fj_build_options;

/* Where a module came from. (since 1.0) */
typedef enum fj_cache_result {
  FJ_CACHE_COMPILED = 0, /* NVRTC ran */
  FJ_CACHE_MEMORY_HIT = 1,
  FJ_CACHE_DISK_HIT = 2,  /* a local file: the disk cache or a cache bundle */
  FJ_CACHE_REMOTE_HIT = 3 /* from the fleet's remote tier (since 1.1) */
} fj_cache_result;

/* A module's target, implementation and origin (since 1.0). */
typedef struct fj_module_info {
  size_t struct_size;
  const void* ext;
  char target[32];
  fj_copy_impl copy_impl;
  fj_output output; /* CUBIN or PTX, never AUTO */
  fj_cache_result cache_result;
  double build_ms;   /* wall time of fj_module_build */
  double compile_ms; /* NVRTC time when compiled, else the original */
  uint64_t image_bytes;
} fj_module_info;

/* Builds (or fetches from the cache) a module. A compile error is
 * FJ_BUILD_ERROR with the log in the "build_log" detail; a header NVRTC
 * could not open is named in the message with every folder searched
 * (details "missing_header" and "searched"). While a stream captures a
 * CUDA graph a build works from CUDA 12.3 on and leaves the capture
 * intact; before 12.3 one that must load its image is
 * FJ_FAILED_PRECONDITION (see "Graph capture" after fj_launch). (since 1.0) */
FJ_API fj_status* fj_module_build(fj_runtime* runtime,
                                  const fj_build_options* options,
                                  fj_module** out_module);
/* What the module holds and where it came from (since 1.0). */
FJ_API fj_status* fj_module_info_get(const fj_module* module,
                                     fj_module_info* out_info);
/* The built image (cubin or PTX text), valid while the module lives.
 * (since 1.0) */
FJ_API fj_status* fj_module_image(const fj_module* module,
                                  const void** out_data, size_t* out_size);
/* Destroys a module; its kernels become invalid. NULL is accepted.
 * (since 1.0) */
FJ_API fj_status* fj_module_destroy(fj_module* module);
/* NVRTC's log of the build that made the module, warnings included,
 * NUL-terminated and valid while the module lives ("" when NVRTC printed
 * nothing, and for fj_module_load images). The log is stored with the
 * cache entry, so a memory, disk or remote hit returns the log of the
 * compile that made the entry. out_size (may be NULL) receives its length.
 * (since 1.3) */
FJ_API fj_status* fj_module_build_log(const fj_module* module,
                                      const char** out_log, size_t* out_size);

/* ------------------------------------------------------------------------ */
/* Builds: CUDA's headers (since 1.1)                                       */

/* Every build searches CUDA's header folders after the caller's, so
 * <cuda_fp16.h>, <cuda_bf16.h>, <cuda_fp8.h>, <cuda/std/...>, <cub/...>
 * build wherever the toolkit's headers exist. They are found once per
 * runtime, in this order: $CUDA_HOME/include, $CUDA_PATH/include, the
 * toolkit of the NVRTC in use, /usr/local/cuda/include, and the include
 * folders of NVIDIA's Python wheels (nvidia/<pkg>/include under the
 * VIRTUAL_ENV, CONDA_PREFIX and system site-packages); each toolkit folder
 * with a cccl/ subfolder brings it too. Sets `*out_path` and `*out_origin`
 * (NUL-terminated, valid for the runtime's life) to folder `index` and why
 * it is searched ("CUDA_HOME", "/usr/local/cuda", ...); `*out_count` (may
 * be NULL) to the number of folders. With out_path and out_origin NULL it
 * only counts; otherwise an index past the last is FJ_OUT_OF_RANGE.
 * (since 1.1) */
FJ_API fj_status* fj_runtime_include_dir(fj_runtime* runtime, size_t index,
                                         size_t* out_count,
                                         const char** out_path,
                                         const char** out_origin);

/* ------------------------------------------------------------------------ */
/* Builds that do not block (since 1.1)                                     */

/* An asynchronous build: fj_module_build's work, run on a pool of threads
 * the runtime owns (at most min(hardware threads, 8) builds at once).
 * Blocking and asynchronous builds share the module cache's single flight:
 * any number of callers of one build, mixing both, compile it once.
 * (since 1.1) */
typedef struct fj_build fj_build;

/* Starts building per `options` and returns at once. Every string and array
 * of `options` is copied before the call returns. Errors found before the
 * build starts (NULLs, struct_size, enum values) are returned here; the
 * build's own errors (FJ_BUILD_ERROR with its "build_log" detail, no NVRTC,
 * ...) come from fj_build_take. Destroy the handle with fj_build_destroy.
 * (since 1.1) */
FJ_API fj_status* fj_module_build_async(fj_runtime* runtime,
                                        const fj_build_options* options,
                                        fj_build** out_build);
/* *out_done = 1 once the build has finished (successfully or not), else 0.
 * Never blocks. (since 1.1) */
FJ_API fj_status* fj_build_poll(const fj_build* build, int32_t* out_done);
/* Waits until the build finishes or `timeout_ms` passes (UINT32_MAX:
 * forever); *out_done says which (1 finished, 0 timed out). A timeout is
 * not an error. (since 1.1) */
FJ_API fj_status* fj_build_wait(fj_build* build, uint32_t timeout_ms,
                                int32_t* out_done);
/* Waits for the build, then hands over its module (owned by the caller, as
 * from fj_module_build) or returns its error status. Once: a second take
 * is FJ_FAILED_PRECONDITION. The fj_build handle stays valid until
 * fj_build_destroy. (since 1.1) */
FJ_API fj_status* fj_build_take(fj_build* build, fj_module** out_module);
/* Gives up the build. One not started yet is skipped; one running finishes
 * in the background and its module is dropped (a cached build stays in the
 * module cache for later builds). A module already taken is not affected.
 * NULL is accepted. fj_runtime_destroy destroys its builds: it skips those
 * not started and waits for those running (a compile cannot be stopped),
 * and their handles become invalid. (since 1.1) */
FJ_API fj_status* fj_build_destroy(fj_build* build);

/* ------------------------------------------------------------------------ */
/* Modules built elsewhere (since 1.1)                                      */

/* The format of an image given to fj_module_load (since 1.1). */
typedef enum fj_image_kind {
  FJ_IMAGE_AUTO = 0, /* sniffed: ELF = cubin, 0xBA55ED50 = fatbin, text
                      * starting with "//" or ".version" = PTX */
  FJ_IMAGE_CUBIN = 1,
  FJ_IMAGE_PTX = 2,
  FJ_IMAGE_FATBIN = 3
} fj_image_kind;
#define FJ_IMAGE_KIND_LAST FJ_IMAGE_FATBIN

/* An image built elsewhere, and how to read it (since 1.1). */
typedef struct fj_module_load_options {
  size_t struct_size;
  const void* ext;
  const void* image; /* the bytes (PTX need not be NUL-terminated) */
  size_t image_size;
  fj_image_kind kind;
  fj_str name; /* for messages; empty = "image" */
  /* "sm_XX" / "compute_XX" to override what the image says (a PTX's
   * .target, a cubin's ELF header). Empty = the image's own; a fatbin
   * without one loads wherever the driver finds an entry. */
  fj_str target;
} fj_module_load_options;

/* Makes a module of an image built elsewhere: `fleetjit build -o` output,
 * fj_module_image of another runtime, nvcc's cubin or fatbin. The image is
 * copied. Kernels and their parameters come from the PTX text (as for a
 * build); a cubin has no PTX, so its kernel names come from its ELF symbol
 * table and its parameters (count, sizes, offsets) from the driver
 * (CUDA 12.4+), which makes this call need a GPU the image runs on
 * (FJ_UNAVAILABLE without a driver or GPU). A fatbin's names come from its
 * uncompressed cubins. Launches are checked against the parameters: count
 * and sizes (a cubin's kinds are unknown). A malformed image is
 * FJ_INVALID_ARGUMENT (a fatbin with compressed entries only:
 * FJ_FAILED_PRECONDITION), never a crash.
 * Loaded modules are not cached by build key: one image (by SHA-256) loaded
 * twice shares its loaded copy per device, and no cache tier is written.
 * fj_module_info_get reports FJ_CACHE_COMPILED and build_ms 0. (since 1.1) */
FJ_API fj_status* fj_module_load(fj_runtime* runtime,
                                 const fj_module_load_options* options,
                                 fj_module** out_module);

/* ------------------------------------------------------------------------ */
/* Builds: device linking (since 1.3)                                       */

/* Several inputs linked into one module by nvJitLink: a kernel split over
 * several sources, dynamic parallelism (a kernel that launches kernels,
 * with libcudadevrt), link-time optimization (LTO-IR), and prebuilt cubins,
 * PTX or fatbins mixed in. nvJitLink is found and loaded on the first link
 * that needs it, as NVRTC is on the first build: the folders NVRTC is
 * searched in, then NVRTC's own folder, for libnvJitLink.so.13, .so.12 or
 * .so; FLEETJIT_NVJITLINK names the library or the one folder to search. A
 * host without it gets FJ_UNAVAILABLE naming the library and every folder
 * searched. nvJitLink runs without a GPU: a link for a named target works
 * on any host. (since 1.3) */

/* What one link input is (since 1.3). */
typedef enum fj_link_input_kind {
  /* CUDA C++ compiled by NVRTC for the link: -dc (relocatable device code),
   * or -dlto (LTO-IR) when the link has FJ_LINK_LTO; <fleetjit/copy.cuh> is
   * available as in a build. Must not contain a NUL byte. */
  FJ_LINK_SOURCE = 0,
  FJ_LINK_CUBIN = 1,  /* a relocatable cubin (nvcc -dc, NVRTC -dc) */
  FJ_LINK_PTX = 2,    /* PTX text, need not be NUL-terminated */
  FJ_LINK_FATBIN = 3, /* a fatbin (nvcc -fatbin -dc) */
  FJ_LINK_LTOIR = 4,  /* LTO-IR (nvcc -dlto, NVRTC -dlto); implies -lto */
  FJ_LINK_LIBRARY = 5 /* an archive of device objects (nvcc -lib) */
} fj_link_input_kind;
#define FJ_LINK_INPUT_KIND_LAST FJ_LINK_LIBRARY

/* One input of a link (since 1.3). The array fj_link_options.inputs is
 * read with the stride inputs[0].struct_size, so every element must carry
 * the same struct_size. */
typedef struct fj_link_input {
  size_t struct_size;
  const void* ext;
  fj_link_input_kind kind;
  /* For messages and nvJitLink's log; empty = "input<index>". */
  fj_str name;
  /* The source text or the object's bytes; neither NULL nor empty. Copied
   * before the call returns. */
  const void* data;
  size_t size;
  /* FJ_LINK_SOURCE only (else they must be empty): extra NVRTC options and
   * the C++ names of kernels to instantiate and look up, as in
   * fj_build_options. */
  const fj_str* nvrtc_options;
  size_t num_nvrtc_options;
  const fj_str* name_expressions;
  size_t num_name_expressions;
} fj_link_input;

/* Bits of fj_link_options.flags (since 1.3). */
typedef enum fj_link_flags {
  FJ_LINK_NO_CACHE = 1u << 0, /* neither read nor write any cache tier */
  /* Link-time optimization: sources become LTO-IR (-dlto) and nvJitLink
   * optimizes across every input (-lto). Set by itself when an input is
   * FJ_LINK_LTOIR. */
  FJ_LINK_LTO = 1u << 1,
  /* Links the toolkit's libcudadevrt.a, which a kernel launching kernels
   * (dynamic parallelism, `child<<<g, b>>>(...)` in device code) needs. It
   * is found in $CUDA_HOME/lib64, $CUDA_PATH/lib64, the folder of the NVRTC
   * in use, then /usr/local/cuda/lib64; FJ_UNAVAILABLE names them when it
   * is in none. */
  FJ_LINK_DEVRT = 1u << 2
} fj_link_flags;

/* What to link (since 1.3). */
typedef struct fj_link_options {
  size_t struct_size;
  const void* ext;
  const fj_link_input* inputs; /* at least one */
  size_t num_inputs;
  fj_str name; /* for logs, e.g. "split.cu"; empty = "link" */
  /* "sm_XX[a]": a link produces a cubin. Empty = the runtime's target
   * override, else the live device `device`. A compute_XX target is
   * FJ_INVALID_ARGUMENT. */
  fj_str target;
  int32_t device; /* ordinal used when target is empty */
  /* Extra nvJitLink options, e.g. "-O3", "-maxrregcount=64". */
  const fj_str* link_options;
  size_t num_link_options;
  /* Folders every source searches for #include, as in fj_build_options
   * (their headers' content is part of the cache key). */
  const fj_str* include_dirs;
  size_t num_include_dirs;
  uint32_t flags; /* fj_link_flags */
} fj_link_options;

/* Links `options->inputs` into one module, used like a built one
 * (fj_module_get_kernel, fj_launch, fj_module_image: the linked cubin,
 * fj_module_info_get: output CUBIN). Each source is compiled by NVRTC for
 * the link, then nvJitLink links every input (and libcudadevrt with
 * FJ_LINK_DEVRT). The module is cached in the memory and disk tiers like a
 * build, under a key that covers every input: each source with its NVRTC
 * options and the headers it may read, each binary input's bytes, the link
 * options and flags, the target, and the identities of NVRTC and nvJitLink;
 * a changed input links again. Kernels are the linked cubin's; a source's
 * name expressions name theirs. Each kernel's parameters come from the PTX
 * that declares it (a source's, a PTX input, or for LTO-IR the PTX
 * nvJitLink makes of it); a kernel of a prebuilt cubin or fatbin has its
 * parameters read from the driver, which needs a device the target runs on
 * (else FJ_FAILED_PRECONDITION). A source NVRTC rejects is FJ_BUILD_ERROR
 * with its "build_log"; a link error (an undefined symbol, an input of the
 * wrong kind) is FJ_BUILD_ERROR with nvJitLink's error log in the message
 * and in the details "link_log" and "build_log". Bad arguments (NULLs,
 * struct_size, kind or flags out of range, empty data, a NUL byte in a
 * source, options on a binary input) are FJ_INVALID_ARGUMENT naming the
 * input. A link error costs memory: nvJitLink 13.0 does not free the state
 * of a link whose completion fails (about 128 KB each, measured under
 * LeakSanitizer, docs/architecture.md); successful links and cache hits
 * leak nothing. (since 1.3) */
FJ_API fj_status* fj_module_link(fj_runtime* runtime,
                                 const fj_link_options* options,
                                 fj_module** out_module);

/* ------------------------------------------------------------------------ */
/* The module cache (since 1.0)                                             */

/* Hosts without NVRTC. A host with the driver alone builds nothing, but
 * fj_module_build still succeeds when another host (e.g. a CPU build box
 * running `fleetjit build --target sm_90 --publish`) published the same
 * build: same source, options, target, copy implementation and fleetjit
 * version, any NVRTC. Such a host looks the build up without a compiler in
 * the key, follows the signed pointer the publisher wrote, and uses the
 * entry only if everything but the compiler matches exactly and the
 * recorded compiler's output loads on this driver (a cubin needs a driver
 * of the same or a later CUDA major version; PTX one that knows its ISA).
 * The module then reports FJ_CACHE_REMOTE_HIT (or FJ_CACHE_DISK_HIT once
 * kept locally). Otherwise the build fails with NVRTC's UNAVAILABLE status,
 * which says that no published entry was found. A host with NVRTC never
 * takes another compiler's output. */

/* The state of the remote tier's circuit breaker (since 1.1). */
typedef enum fj_remote_state {
  FJ_REMOTE_OFF = 0, /* not configured */
  FJ_REMOTE_UNAVAILABLE =
      1,                  /* configured but off: no hiredis, no key, bad URL */
  FJ_REMOTE_CLOSED = 2,   /* in use */
  FJ_REMOTE_OPEN = 3,     /* failing: not asked until the cooldown ends */
  FJ_REMOTE_HALF_OPEN = 4 /* the next call probes it */
} fj_remote_state;

/* Counters of the module cache (since 1.0). */
typedef struct fj_cache_stats {
  size_t struct_size;
  const void* ext;
  uint64_t memory_hits;
  uint64_t disk_hits; /* the disk cache's and a cache bundle's */
  uint64_t misses;
  uint64_t compiles;
  double compile_ms_total;
  uint64_t evictions;
  uint64_t rejected_entries; /* corrupt, foreign-owned or unsafe, rebuilt */
  uint64_t disk_entries;
  uint64_t disk_bytes;
  /* Since 1.1 (a caller built against 1.0 passes a shorter struct_size and
   * gets the fields above): the remote tier (all 0 when it is off). */
  fj_remote_state remote_state;
  uint64_t remote_hits;
  uint64_t remote_misses;
  uint64_t remote_errors;      /* failed or timed-out calls */
  uint64_t remote_rejected;    /* refused: bad signature, key or size */
  uint64_t remote_writes;      /* entries published */
  uint64_t remote_write_drops; /* not published: queue full, Redis down */
  uint64_t remote_breaker_opens;
} fj_cache_stats;

/* The cache's counters, summed over its tiers (since 1.0). */
FJ_API fj_status* fj_cache_stats_get(fj_runtime* runtime,
                                     fj_cache_stats* out_stats);
/* Empties the memory tier and deletes this cache's disk entries. (since 1.0) */
FJ_API fj_status* fj_cache_clear(fj_runtime* runtime);
/* Waits until the cache work that earlier builds left to the background is
 * done: disk entries written, and remote publications sent (at most
 * timeout_ms for those; FJ_DEADLINE_EXCEEDED if they are still queued). Builds
 * never wait for the remote tier; call this before exiting a process whose
 * builds must reach the fleet (fj_runtime_destroy also sends what is
 * queued, each write bounded by the tier's timeouts). (since 1.1) */
FJ_API fj_status* fj_cache_flush(fj_runtime* runtime, uint32_t timeout_ms);

/* ------------------------------------------------------------------------ */
/* Tensors (since 1.0; DLPack-compatible)                                   */

/* Layout-identical to DLPack's DLTensor (dlpack.h >= 0.6): a caller can pass
 * a DLTensor* cast to fj_tensor*. Shape and strides are outermost-first, in
 * elements; NULL strides mean compact row-major. (since 1.0) */
typedef struct fj_dl_device {
  int32_t device_type; /* kDLCUDA = 2 */
  int32_t device_id;
} fj_dl_device;
/* (since 1.0) */
typedef struct fj_dl_dtype {
  uint8_t code; /* kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLFloat8... */
  uint8_t bits;
  uint16_t lanes;
} fj_dl_dtype;
/* (since 1.0) */
typedef struct fj_tensor {
  void* data;
  fj_dl_device device;
  int32_t ndim;
  fj_dl_dtype dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} fj_tensor;

/* (since 1.0) */
typedef enum fj_oob {
  FJ_OOB_PROMISE_IN_BOUNDS = 0, /* the kernel never reads outside */
  FJ_OOB_ZEROS = 1,             /* out-of-bounds elements read as 0 */
  FJ_OOB_NAN = 2                /* as NaN (floating-point types only) */
} fj_oob;

/* FP8 has no DLPack code in 0.6: use these with bits = 8. (since 1.0) */
#define FJ_DL_FLOAT8_E4M3 0x80
#define FJ_DL_FLOAT8_E5M2 0x81

/* The SMEM layout of a tensor's tiles: the TMA swizzle modes, written in
 * software under cp_async and sync (<fleetjit/copy.cuh>, fj::swizzle). A
 * swizzled tensor's innermost box extent times the element size must equal
 * the width (32, 64 or 128 bytes). (since 1.2) */
typedef enum fj_swizzle {
  FJ_SWIZZLE_NONE = 0,
  FJ_SWIZZLE_32B = 1,
  FJ_SWIZZLE_64B = 2,
  FJ_SWIZZLE_128B = 3
} fj_swizzle;

/* A tensor argument: the borrowed tensor plus how kernels tile it.
 * Launches keep what they derive from a tensor (its TMA map, on a tma
 * build) for about 256 recently passed tensors per launching thread
 * (128 KiB, freed when the thread ends), whichever kernels and argument
 * slots passed them: a tensor launched again with the same data, shape,
 * strides, box, dtype, oob and swizzle costs no new encoding.
 * (since 1.0) */
typedef struct fj_tensor_arg {
  size_t struct_size;
  const void* ext;
  const fj_tensor* tensor; /* borrowed for the duration of the launch call */
  /* Tile extents, outermost-first like shape (box[0] is the outermost
   * dimension; device code's fj::tensor::box(d) counts from the innermost,
   * so box(0) there is box[ndim - 1] here). box[i] = 0 means shape[i].
   * Entries past tensor->ndim must be 0 (a 3-D box on a 2-D tensor is
   * FJ_INVALID_ARGUMENT). Under FJ_OOB_PROMISE_IN_BOUNDS a box larger than
   * shape[i] is FJ_INVALID_ARGUMENT (no tile of it could lie inside); under
   * FJ_OOB_ZEROS / FJ_OOB_NAN the part past the tensor reads as the fill.
   * A box of any extent is valid: one above the TMA limit (256 per
   * dimension) is split into several hardware copies behind one barrier;
   * one that no split fits falls back to cp.async for that argument
   * (fj_tensor_check says so and why). */
  uint32_t box[5];
  fj_oob oob;
  /* (since 1.2; a 1.0/1.1 caller's shorter struct_size reads as NONE) */
  fj_swizzle swizzle;
} fj_tensor_arg;

/* How the tma implementation would move a tensor argument. (since 1.0) */
typedef struct fj_tensor_check {
  size_t struct_size;
  const void* ext;
  int32_t tma;      /* 1: a TMA tensor map describes it; 0: it falls back to
                       cp.async for that argument (the launch still works) */
  char reason[256]; /* why not, NUL-terminated and possibly cut ("" if tma) */
} fj_tensor_check;

/* Checks `arg` as fj_launch would (rank, dtype, shape, strides, box, oob)
 * and fills `out_check` with whether TMA can describe it. An argument that
 * fj_launch would refuse returns that status. Needs no runtime or GPU.
 * (since 1.0) */
FJ_API fj_status* fj_tensor_arg_check(const fj_tensor_arg* arg,
                                      fj_tensor_check* out_check);

/* ------------------------------------------------------------------------ */
/* Kernels and launch (since 1.0)                                           */

/* A kernel of a module, loaded on one device (since 1.0). */
typedef struct fj_kernel fj_kernel;

/* Looks a kernel up by its extern "C" name or one of the module's name
 * expressions, loading the module on `device` (its context) if needed, and
 * the kernel whole, so that no launch loads code (see "Graph capture" after
 * fj_launch). The kernel belongs to the module. (since 1.0) */
FJ_API fj_status* fj_module_get_kernel(fj_module* module, fj_str name,
                                       int32_t device, fj_kernel** out_kernel);

/* The C type of a kernel argument (since 1.0). */
typedef enum fj_arg_kind {
  FJ_ARG_I8 = 1,
  FJ_ARG_I16 = 2,
  FJ_ARG_I32 = 3,
  FJ_ARG_I64 = 4,
  FJ_ARG_U8 = 5,
  FJ_ARG_U16 = 6,
  FJ_ARG_U32 = 7,
  FJ_ARG_U64 = 8,
  FJ_ARG_F16 = 9,   /* IEEE half bits in v.u16 */
  FJ_ARG_BF16 = 10, /* bfloat16 bits in v.u16 */
  FJ_ARG_F32 = 11,
  FJ_ARG_F64 = 12,
  FJ_ARG_POINTER = 13, /* device address in v.pointer */
  FJ_ARG_BYTES = 14,   /* a struct by value: v.bytes, `size` bytes */
  FJ_ARG_TENSOR = 15,  /* v.tensor */
  /* (since 1.3) A cuFloatComplex (float2, 8 bytes, aligned to 8) held in v
   * itself: the real part in bytes 0-3 of v, the imaginary in bytes 4-7
   * (memcpy a float[2] or a cuFloatComplex into &arg.v). Passed to a
   * parameter of 8 bytes that is not an integer, float or pointer:
   * cuFloatComplex, float2, cuda::std::complex<float>. */
  FJ_ARG_C64 = 16,
  /* (since 1.3) A cuDoubleComplex (double2, 16 bytes, aligned to 16): v.bytes
   * points to two doubles, real then imaginary (any alignment), read
   * during the launch call. Passed to a 16-byte by-value parameter. */
  FJ_ARG_C128 = 17
} fj_arg_kind;
#define FJ_ARG_KIND_LAST FJ_ARG_C128

/* One kernel argument. An array of these is read with the stride
 * args[0].struct_size; every element must carry the same struct_size.
 * The elements are read in place, so the array must be aligned for fj_arg
 * and the stride a multiple of alignof(fj_arg) (8 on 64-bit hosts), as
 * sizeof(fj_arg) of any compiler is. Since 1.1 a misaligned array or
 * stride is FJ_INVALID_ARGUMENT (1.0 read it misaligned). (since 1.0) */
typedef struct fj_arg {
  size_t struct_size;
  fj_arg_kind kind;
  uint32_t size; /* bytes, for FJ_ARG_BYTES only */
  union {
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;
    uint64_t pointer;
    const void* bytes;
    const fj_tensor_arg* tensor;
  } v;
} fj_arg;

/* Bits of fj_launch_config.flags (since 1.3). */
typedef enum fj_launch_flags {
  /* A cooperative launch (CU_LAUNCH_ATTRIBUTE_COOPERATIVE): every block is
   * resident at once, so the kernel may call cooperative_groups'
   * this_grid().sync() (<cooperative_groups.h> builds under NVRTC; no -rdc
   * needed). A grid of more blocks than the device holds co-resident
   * (fj_kernel_occupancy's blocks per SM for this block and dynamic shared
   * memory, times the SMs) is FJ_OUT_OF_RANGE naming both numbers; a device
   * without cooperative launches is FJ_FAILED_PRECONDITION. */
  FJ_LAUNCH_COOPERATIVE = 1u << 0,
  /* Programmatic dependent launch
   * (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): this kernel
   * may start before the previous kernel on the stream has finished, once
   * every block of that one has executed `griddepcontrol.launch_dependents`
   * (cudaTriggerProgrammaticLaunchCompletion) or exited; it must execute
   * `griddepcontrol.wait` (cudaGridDependencySynchronize) before it reads
   * what the previous kernel writes. sm_90 and newer; an older device is
   * FJ_FAILED_PRECONDITION. */
  FJ_LAUNCH_PROGRAMMATIC_DEPENDENT = 1u << 1
} fj_launch_flags;

/* Grid, block, shared memory, cluster and stream of a launch (since 1.0). */
typedef struct fj_launch_config {
  size_t struct_size;
  const void* ext;
  uint32_t grid[3]; /* 0 entries count as 1 */
  uint32_t block[3];
  uint32_t shared_bytes; /* dynamic shared memory; above 48 KiB is opted in */
  uint32_t cluster[3];   /* all 0 = no cluster */
  fj_stream* stream;     /* NULL = the device's legacy default stream */
  /* Since 1.3 (a 1.0-1.2 caller's shorter struct_size reads as 0: no flag,
   * no window). */
  uint32_t flags; /* fj_launch_flags; an unknown bit is FJ_INVALID_ARGUMENT */
  /* An L2 access-policy window (CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW):
   * the fraction l2_hit_ratio, in (0, 1], of the lines of
   * [l2_window_base, l2_window_base + l2_window_bytes) this kernel touches
   * is kept in the persisting part of L2 (fj_device_set_persisting_l2), the
   * rest streams. l2_window_bytes 0 = no window. More than
   * fj_device_info.max_access_policy_window_bytes is FJ_OUT_OF_RANGE; a
   * device before sm_80 is FJ_FAILED_PRECONDITION. */
  float l2_hit_ratio;
  uint64_t l2_window_base;
  uint64_t l2_window_bytes;
} fj_launch_config;

/* Launches `kernel` asynchronously. Arguments are checked against the
 * kernel's parameters (count, size, kind, tensor rank and dtype where the
 * kernel declares them: FJ_TENSOR(T, R) with T a dtype's C++ type
 * (float, __half, __nv_bfloat16, __nv_fp8_e4m3, int, ...: the dtype must
 * match), an unsigned integer type (raw bits: any dtype of its size), or
 * another type such as float4 or a struct of the caller's own, whose
 * element size must then match the tensor's. A C++ kernel's signature
 * declares them; for an extern "C" kernel (since 1.4) the build reads its
 * FJ_TENSOR parameters from its declaration in the source, through the
 * source's #defines, typedefs and -D options: a kernel declared by a
 * function-like macro, or built elsewhere (fj_module_load), has only
 * count and sizes checked) and the configuration against the device's
 * limits before the driver is called. Since 1.3 the same call makes
 * cooperative,
 * programmatic dependent and L2-window launches (fj_launch_config.flags and
 * l2_window_*; see fj_launch_flags) and takes complex scalars
 * (FJ_ARG_C64, FJ_ARG_C128). (since 1.0) */
FJ_API fj_status* fj_launch(fj_kernel* kernel, const fj_launch_config* config,
                            const fj_arg* args, size_t num_args);

/* Graph capture. A caller may capture fleetjit's work into a CUDA graph:
 * cuStreamBeginCapture on a stream of its own, wrapped with fj_stream_wrap
 * (or CU_STREAM_PER_THREAD), fleetjit calls on the wrapper, then
 * cuStreamEndCapture. What fleetjit does while that stream captures
 * (docs/launch.md, "Graph capture", has the reasons and the tests):
 *  - Launches. fj_module_get_kernel loads a kernel whole: the module
 *    (cuModuleLoadData), the function, and cuFuncLoad where lazy loading
 *    (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2) left it partly
 *    loaded. So fj_launch never loads code, the kernel's first launch
 *    included, and makes no call a capture forbids (no allocation,
 *    synchronisation, stream or event query): cuLaunchKernelEx and, on
 *    first-time paths, cuCtxGetCurrent / cuCtxSetCurrent, cuFuncSetAttribute
 *    (dynamic shared memory above 48 KiB, non-portable clusters), the
 *    occupancy query of a cooperative launch and cuTensorMapEncodeTiled.
 *    Each launch on the capturing stream is captured like the caller's own.
 *  - Builds and loads. A build the cache serves calls no driver. A compile
 *    for a target a local GPU runs, fj_module_load of a cubin and
 *    fj_module_link load the image and unload it again (to read the
 *    driver's parameter layout); fj_module_get_kernel, fj_module_get_global
 *    and the global copies load the module on a device the first time, as
 *    do fj_copy and fj_prefetch their own kernels. fleetjit makes these
 *    calls with the thread's stream-capture mode set to
 *    CU_STREAM_CAPTURE_MODE_RELAXED (cuThreadExchangeStreamCaptureMode,
 *    restored after), so the driver counts none of them against a capture
 *    in progress, in any mode, on any thread; its own threads
 *    (fj_module_build_async, the background tuning of fj_copy's launch
 *    shape) do the same, and so does fj_tune, whose allocations and
 *    synchronisations are of its own stream. From CUDA 12.3 on the driver
 *    loads modules during a capture: a build, a load or a first
 *    fj_module_get_kernel inside the capture works, and the capture goes
 *    on.
 *  - Before CUDA 12.3 the driver refuses a module load during a capture
 *    (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, which invalidates the capture).
 *    There a call that must load, while fleetjit sees a capture (the calling
 *    thread's per-thread default stream, or a blocking stream of the device,
 *    which the legacy stream reports), is FJ_FAILED_PRECONDITION before the
 *    driver is called, and the capture goes on; a capture it cannot see (a
 *    stream created CU_STREAM_NON_BLOCKING) gets the driver's refusal, as
 *    FJ_FAILED_PRECONDITION. Both say what to do: build the module and get
 *    its kernels before cuStreamBeginCapture.
 *  - Not during a capture of the thread, as with CUDA itself: the
 *    synchronous calls (fj_stream_synchronize of the capturing stream,
 *    fj_mem_alloc, fj_mem_free, copies and fills with a NULL stream),
 *    launches on the legacy default stream while a blocking stream captures
 *    (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), fj_runtime_destroy. An
 *    fj_copy between GPUs with no P2P path is staged through host memory
 *    and synchronises: FJ_FAILED_PRECONDITION on a capturing stream.
 *  - A graph uses its kernels' code: fj_module_destroy leaves the module
 *    loaded and fj_runtime_destroy unloads it, so keep the runtime while a
 *    graph holding its kernels may launch. */

/* A kernel's lowered name, parameters and resources (since 1.0). */
typedef struct fj_kernel_info {
  size_t struct_size;
  const void* ext;
  char lowered_name[512];
  int32_t num_params;
  uint32_t param_bytes;
  int32_t max_threads_per_block;
  int32_t static_shared_bytes;
  int32_t num_regs;
  int32_t uses_thunk; /* 1 if launches go through a JIT-built host thunk */
  /* Since 1.3 (cuFuncGetAttribute; a shorter struct_size does not receive
   * them; all 0 once a kernel fault poisoned the device): */
  int32_t const_bytes;              /* user __constant__ memory */
  int32_t local_bytes;              /* local memory per thread */
  int32_t max_dynamic_shared_bytes; /* the current limit (see below) */
  int32_t ptx_version;              /* major * 10 + minor, e.g. 90 */
  int32_t binary_version;           /* the SASS's, e.g. 90 */
  int32_t cache_mode_ca;            /* 1 if built with -Xptxas -dlcm=ca */
  int32_t preferred_carveout;       /* percent of shared memory; -1 default */
} fj_kernel_info;

/* The kernel's parameters and resources on its device (since 1.0). */
FJ_API fj_status* fj_kernel_info_get(const fj_kernel* kernel,
                                     fj_kernel_info* out_info);

/* ------------------------------------------------------------------------ */
/* Kernel attributes and occupancy (since 1.3)                              */

/* What fj_kernel_set_attribute sets (cuFuncSetAttribute) (since 1.3). */
typedef enum fj_kernel_attr {
  /* The most dynamic shared memory a launch may ask for, in [0, the
   * device's opt-in limit minus the kernel's static shared memory]. A
   * launch that asks for more raises it again (as every launch above
   * 48 KiB does). */
  FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES = 0,
  /* The preferred split of the SM's unified L1 / shared memory, as a
   * percentage of the most shared memory: 0-100, or -1 for the driver's
   * default. A hint the driver rounds to a supported split. */
  FJ_KERNEL_ATTR_PREFERRED_CARVEOUT = 1
} fj_kernel_attr;
#define FJ_KERNEL_ATTR_LAST FJ_KERNEL_ATTR_PREFERRED_CARVEOUT

/* Sets `attr` of the kernel on its device. A value out of its range is
 * FJ_OUT_OF_RANGE naming the range. (since 1.3) */
FJ_API fj_status* fj_kernel_set_attribute(fj_kernel* kernel,
                                          fj_kernel_attr attr, int32_t value);

/* How many blocks of `block_threads` threads using `dynamic_shared_bytes`
 * of dynamic shared memory one SM of the kernel's device holds at once
 * (cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags); times
 * fj_device_info.sm_count, the largest grid a cooperative launch may have.
 * 0 when such a block cannot run at all. block_threads 0 or above the
 * kernel's limit is FJ_OUT_OF_RANGE. (since 1.3) */
FJ_API fj_status* fj_kernel_occupancy(const fj_kernel* kernel,
                                      uint32_t block_threads,
                                      uint32_t dynamic_shared_bytes,
                                      int32_t* out_blocks_per_sm);

/* The block size that gives the kernel the most occupancy with a fixed
 * `dynamic_shared_bytes` per block (cuOccupancyMaxPotentialBlockSize), and
 * the smallest grid that reaches it on the whole device. out_min_grid may
 * be NULL. (since 1.3) */
FJ_API fj_status* fj_kernel_suggest_block(const fj_kernel* kernel,
                                          uint32_t dynamic_shared_bytes,
                                          int32_t* out_block_threads,
                                          int32_t* out_min_grid);

/* ------------------------------------------------------------------------ */
/* Module globals (since 1.3)                                               */

/* A module's `__device__` or `__constant__` variable on one device
 * (since 1.3). */
typedef struct fj_global_info {
  size_t struct_size;
  const void* ext;
  uint64_t address; /* device address, valid while the module lives */
  uint64_t bytes;   /* the variable's size */
  char lowered_name[512];
} fj_global_info;

/* Looks up the global `name` of `module` on `device`, loading the module
 * there if needed (cuModuleGetGlobal). `name` is one of the build's name
 * expressions, with or without its leading `&`, or the variable's symbol as
 * it is in the image: an unmangled name for a variable at namespace scope
 * ("counter"). An unknown name is FJ_NOT_FOUND. The address may be passed
 * to kernels (FJ_ARG_POINTER) of the same module on that device.
 * A variable in a namespace, or a variable template, is mangled: list it in
 * fj_build_options.name_expressions by its address, "&ns::counter",
 * "&table<float>" (NVRTC lowers each at build time, and one that names a
 * variable, not a kernel, becomes a global). NVRTC takes a name expression
 * as a constant expression: a scalar without its `&` ("ns::counter" for a
 * `__device__ int`) fails the build with FJ_BUILD_ERROR ("expression must
 * have a constant value"); an array's name alone is accepted. Look it up
 * as "&ns::counter" or "ns::counter". (since 1.3) */
FJ_API fj_status* fj_module_get_global(fj_module* module, fj_str name,
                                       int32_t device,
                                       fj_global_info* out_info);

/* Writes `bytes` from host `src` into the global `name` (as for
 * fj_module_get_global) on `device`, starting `offset` bytes into it; reads
 * likewise into host `dst`. Ordered on `stream` (which must be of
 * `device`), where host memory must stay live until the stream has passed
 * the copy; with a NULL stream the copy is complete on return. So a
 * `__constant__` table can be rewritten between two launches on one stream
 * and each launch sees its own table. A range past the variable's end is
 * FJ_OUT_OF_RANGE. (since 1.3) */
FJ_API fj_status* fj_module_global_write(fj_module* module, fj_str name,
                                         int32_t device, uint64_t offset,
                                         const void* src, uint64_t bytes,
                                         fj_stream* stream);
FJ_API fj_status* fj_module_global_read(fj_module* module, fj_str name,
                                        int32_t device, uint64_t offset,
                                        void* dst, uint64_t bytes,
                                        fj_stream* stream);

/* ------------------------------------------------------------------------ */
/* Tensor copies, L2 prefetch and peer access (since 1.1)                   */

/* A copy of a window of `src` into `dst`:
 *
 * dst[i] = src[src_start + i] where that element lies inside src, the fill
 * elsewhere: 0 (FJ_OOB_ZEROS), NaN (FJ_OOB_NAN, floating-point dtypes),
 *
 * for every index i of dst (dst's shape is the window's extent). With
 * gather_index, the outermost coordinate of src is instead gather_index[i0] +
 * src_start[0]: rows of a paged KV cache, gathered into consecutive rows of
 * dst. A row whose index lies outside src reads as the fill (zeros under
 * FJ_OOB_PROMISE_IN_BOUNDS): a bad index never faults.
 *
 * With scatter_index (since 1.4), the window has one row per entry of the
 * index (its outermost extent is the index's length; the others are dst's)
 * and window row i0 is written to dst row scatter_index[i0]:
 *
 * dst[scatter_index[i0], j...] = src[src_start + (i0, j...)]
 *
 * (src's row gather_index[i0] + src_start[0] with both): new rows of a
 * paged KV cache appended at their slots. A row whose index lies outside
 * dst (negative, or >= dst->shape[0]) is not written, so -1 skips a row:
 * a bad index never faults either. dst rows no entry names keep their
 * contents; two equal entries write the same row in an unspecified order.
 * The device-side gather and scatter (fj::gather_tiles, fj::scatter_tiles
 * of <fleetjit/copy.cuh>) follow the same rule. A scatter always runs the
 * copy kernel.
 *
 * Tensors are 1-5-D, of one dtype (no conversion), with any strides; each may
 * be device memory of this GPU, of a peer GPU, or pinned host memory
 * (kDLCUDAHost, or kDLCPU if the driver knows it as pinned), classified with
 * cuPointerGetAttributes. A dense, in-bounds copy of a dense window takes the
 * driver's copy engine (cuMemcpyAsync / cuMemcpyPeerAsync). Any other copy runs
 * a kernel built from <fleetjit/copy.cuh> with the device's copy implementation
 * (honouring fj_runtime_options.copy_impl_override and FLEETJIT_COPY_IMPL),
 * cached like any module. (since 1.1) */
typedef struct fj_copy_desc {
  size_t struct_size;
  const void* ext;
  const fj_tensor* src;
  /* Window start in src per dimension, outermost-first like shape; may be
   * negative or run past the end under FJ_OOB_ZEROS / FJ_OOB_NAN. Entries
   * past src->ndim must be 0. */
  int64_t src_start[5];
  fj_oob oob;
  const fj_tensor* dst;
  /* Optional (NULL = none): 1-D int32/int64 with an entry per window row
   * (dst->shape[0], or scatter_index's length). */
  const fj_tensor* gather_index;
  /* Optional (NULL = none; since 1.4): 1-D int32/int64, an entry per window
   * row: the dst row it is written to (see above). Not overlapping dst. */
  const fj_tensor* scatter_index;
} fj_copy_desc;

/* Copies per `desc`, ordered on `stream` (whose GPU runs the kernel), or
 * with a NULL stream on the legacy default stream of dst's GPU (else
 * src's). Asynchronous: host memory must stay live until the stream has
 * passed the copy. Bad input is FJ_INVALID_ARGUMENT before anything is
 * enqueued: NULLs, ranks or dtypes that differ, unknown dtypes, addresses
 * not aligned to the element, a window leaving src under
 * FJ_OOB_PROMISE_IN_BOUNDS, NaN fill of an integer dtype, src and dst
 * whose byte ranges overlap, host memory that is not pinned, a range
 * running outside its allocation. A peer GPU's memory that the copy kernel
 * must reach needs fj_peer_enable first (FJ_FAILED_PRECONDITION says so);
 * between GPUs with no P2P path the source is staged through pinned host
 * memory and the copy completes before the call returns (a log line at
 * level info says so). (since 1.1)
 * The kernel's launch shape (since 1.3): the first kernel copy on a
 * (device, implementation) uses the shipped shape and queues, on the
 * runtime's background worker, a lookup of the device model's tuned shape
 * in the cache tiers, or where none is stored a tuning run (under a second
 * of GPU time and about 0.5 GiB of device memory on an H200, once per GPU
 * model and driver across a fleet that shares a cache); later copies use
 * the result. FLEETJIT_COPY_TUNE=0 turns this off (docs/tuning.md).
 * Speed: the kernel reads fastest when each row of the window starts on a
 * 256-byte boundary of src (on an H200, a 2 GiB window 128 bytes off one
 * ran at 0.93x of cuMemcpyDtoD, on one at 0.95x; docs/measurements.md). */
FJ_API fj_status* fj_copy(fj_runtime* runtime, const fj_copy_desc* desc,
                          fj_stream* stream);

/* What fj_prefetch does (since 1.1). Why each mode exists, and what it
 * bought on two GPUs joined by NVLink, is measured in docs/measurements.md
 * ("Peer memory and L2"). */
typedef enum fj_prefetch_mode {
  /* LOCAL_L2 for the reader's own memory, WARM_OWNER_L2 for a peer's;
   * pinned host memory needs STAGE_LOCAL (and a stage buffer). */
  FJ_PREFETCH_AUTO = 0,
  /* A kernel on the reader issues L2 prefetches (cp.async.bulk.prefetch.L2
   * on sm_90, prefetch.global.L2 below) over the range. Local memory only:
   * on a peer address it warms neither GPU's L2, so it is refused there. */
  FJ_PREFETCH_LOCAL_L2 = 1,
  /* The prefetch kernel runs on the GPU that owns the memory, on an
   * internal stream ordered after the caller's stream's earlier work and
   * before its later work. The owner's L2 serves NVLink reads, so the
   * reader's dependent loads get faster; streaming reads stay bound by the
   * link. Needs no peer access. */
  FJ_PREFETCH_WARM_OWNER_L2 = 2,
  /* Copies the data into a caller-given buffer on the reader
   * (stage_address, stage_bytes): re-reads then run at the speed of
   * local memory, not of the link. The reader must then read the stage
   * buffer, not the original. */
  FJ_PREFETCH_STAGE_LOCAL = 3
} fj_prefetch_mode;
#define FJ_PREFETCH_MODE_LAST FJ_PREFETCH_STAGE_LOCAL

/* What to prefetch, for which reader, and how (since 1.1). */
typedef struct fj_prefetch_desc {
  size_t struct_size;
  const void* ext;
  /* A byte range... */
  uint64_t address;
  uint64_t bytes;
  /* ...or, when tensor is not NULL, the tile of tensor starting at
   * tile_start with tile_extent elements per dimension (outermost-first;
   * extent 0 = to the end), clipped to the tensor. */
  const fj_tensor* tensor;
  int64_t tile_start[5];
  int64_t tile_extent[5];
  fj_prefetch_mode mode;
  /* The GPU that will read the data; -1 = the stream's GPU (with a NULL
   * stream: the owner). */
  int32_t reader_device;
  /* FJ_PREFETCH_STAGE_LOCAL: device memory on the reader that receives the
   * data (a tile lands dense, row-major), and its capacity in bytes. */
  uint64_t stage_address;
  uint64_t stage_bytes;
} fj_prefetch_desc;

/* Prefetches per `desc`, ordered on `stream` (NULL: the legacy default
 * stream of the reader). A hint for the L2 modes: it never changes what a
 * later read returns. Bad input is FJ_INVALID_ARGUMENT, including
 * FJ_PREFETCH_LOCAL_L2 on a peer's or host memory. (since 1.1) */
FJ_API fj_status* fj_prefetch(fj_runtime* runtime, const fj_prefetch_desc* desc,
                              fj_stream* stream);

/* Peer access from GPU `reader` to memory owned by GPU `owner` (one
 * direction; call again with the roles swapped for the other). */
/* *out_can_access = 1 when the hardware has a P2P path (always for
 * reader == owner), else 0. (since 1.1) */
FJ_API fj_status* fj_peer_query(fj_runtime* runtime, int32_t reader,
                                int32_t owner, int32_t* out_can_access);
/* Lets kernels on `reader` (fj_copy's included) use `owner`'s memory.
 * Idempotent. Without a P2P path: FJ_FAILED_PRECONDITION (copies between
 * the two are staged through pinned host memory instead). (since 1.1) */
FJ_API fj_status* fj_peer_enable(fj_runtime* runtime, int32_t reader,
                                 int32_t owner);
/* Undoes fj_peer_enable. Idempotent. (since 1.1) */
FJ_API fj_status* fj_peer_disable(fj_runtime* runtime, int32_t reader,
                                  int32_t owner);

/* ------------------------------------------------------------------------ */
/* Tuning (since 1.3)                                                       */

/* fj_tune picks, on the live device, the fastest of a kernel's candidate
 * builds and launch shapes, and keeps the answer like a module: in the
 * memory, disk and remote tiers, under a key of the source, the base build
 * options, the kernel, the expanded space (every candidate's options, shape
 * and grid), the problem (integer scalar arguments by value, and each
 * tensor argument's dtype, shape, strides, box, fill and swizzle; never
 * addresses or floating-point scalars: a persistent kernel, whose grid is
 * the same for every problem, tunes per problem), the device model (name, SM
 * count, compute capability), the driver version, the target and the copy
 * implementation. Another process,
 * or another host of the same GPU model and driver, then gets the result
 * by a lookup, timing nothing; a different driver or GPU model tunes again.
 * A remote entry is taken only if its stored key equals the key looked up
 * byte for byte and its signature verifies under the fleet key. Headers
 * read from include folders are not in the key. docs/tuning.md has the
 * details and the JSON form that `fleetjit tune` reads.
 *
 * The candidates are every (macro set, shape) pair, macro sets outermost.
 * Each builds (in parallel, through the module cache) with the base
 * options plus its macro set; each is launched with `args` on a stream the
 * call owns, once to check its outputs, then warmed up and timed: the
 * median of `samples` samples, each a batch of launches between two CUDA
 * events (the batch grows until a sample lasts about 20 us).
 *
 * Correctness: with no check_fn, the outputs (the buffers named by
 * output_addresses / output_bytes) of the first candidate that runs are the
 * reference, and a candidate whose outputs differ in any byte is
 * WRONG_OUTPUT: put a trusted candidate first. With check_fn, it decides
 * for every candidate. A wrong candidate never wins.
 *
 * The caller's data: the output buffers are written while the call runs.
 * The call saves them first, resets them before every check run (so a
 * kernel that accumulates starts from the same state) and restores them
 * before returning: afterwards they hold what they held before the call
 * (unless a candidate faulted or ran past the deadline: see below). Other
 * buffers the kernel writes are the caller's to protect; name them as
 * outputs. The tuning synchronises its own stream only; work the caller
 * queued elsewhere on the device runs concurrently (and shows as noise).
 *
 * Noise: a candidate whose samples spread ((p75 - p25) / median) above
 * noise_threshold is timed again, once; still above, it is flagged noisy.
 * A result whose winner is noisy is returned (fj_tune_summary.noisy) but
 * not stored: the next call tunes again.
 *
 * Safety: a candidate that fails to build or whose launch is refused
 * (limits, resources, the grid rule) is skipped, with its status in the
 * table. A candidate that faults (an illegal address: a sticky CUDA error)
 * poisons the CUDA context of the whole process, as any faulting kernel
 * does (fj_launch): fj_tune returns that FJ_CUDA_ERROR naming the
 * candidate, and the process can use no GPU afterwards. To tune candidates
 * that may fault, run `fleetjit tune --isolate`, which tunes in a child
 * process and retries without a candidate that killed it. A candidate that
 * runs past timeout_ms (a hang) stops the call with FJ_DEADLINE_EXCEEDED;
 * the kernel keeps the device busy until it ends, and the call leaves its
 * stream and saved copies behind rather than wait for it.
 *
 * No candidate correct: FJ_NOT_FOUND, the message listing every row. */

/* One launch shape of a search space (since 1.3). An array of these is read
 * with the stride shapes[0].struct_size, like fj_arg. */
typedef struct fj_tune_shape {
  size_t struct_size;
  const void* ext;
  uint32_t block[3]; /* 0 entries count as 1 */
  uint32_t shared_bytes;
  uint32_t cluster[3]; /* all 0 = no cluster */
} fj_tune_shape;

/* Bits of fj_tune_options.flags (since 1.3). */
typedef enum fj_tune_flags {
  FJ_TUNE_NO_CACHE_READ = 1u << 0, /* tune even if a result is stored */
  FJ_TUNE_NO_CACHE_WRITE = 1u << 1 /* keep the result out of every tier */
} fj_tune_flags;

/* The most warm-up launches and timed samples one candidate may ask for
 * (more is FJ_INVALID_ARGUMENT): timeout_ms bounds each wait, not the whole
 * call, so the counts bound its length. */
#define FJ_TUNE_MAX_COUNT 10000u

/* What to tune and with what (since 1.3). */
typedef struct fj_tune_options {
  size_t struct_size;
  const void* ext;
  /* The base build (source, name, options, name expressions, target, copy
   * implementation); its device is the one tuned on. With
   * FJ_BUILD_NO_CACHE the candidates compile every time (the tuning result
   * is still stored unless flags say otherwise). */
  const fj_build_options* build;
  fj_str kernel; /* looked up in each candidate's module */
  /* Candidate macro sets, each NVRTC options separated by spaces
   * ("-DBM=64 -DSTAGES=3"). None = the base build alone. Two sets with the
   * same options are FJ_INVALID_ARGUMENT. */
  const fj_str* macro_sets;
  size_t num_macro_sets;
  /* At least one; two equal shapes are FJ_INVALID_ARGUMENT. */
  const fj_tune_shape* shapes;
  size_t num_shapes;
  /* The grid of each candidate, first rule that applies:
   *  1. grid_fn (not NULL): called once per candidate; fills out_grid (0
   *     entries count as 1) and returns 0, or non-zero to skip the
   *     candidate (LAUNCH_REFUSED). Called during fj_tune only.
   *  2. grid_extent not all 0: grid[i] = ceil(grid_extent[i] / d), d the
   *     value of macro grid_divisor[i] in the candidate's set ("BM" reads
   *     -DBM=64), or its block's x/y/z for "block.x"/"block.y"/"block.z",
   *     or 1 for ""; a set without that macro is LAUNCH_REFUSED.
   *  3. grid (0 entries count as 1). */
  uint32_t grid[3];
  uint64_t grid_extent[3];
  fj_str grid_divisor[3];
  int32_t (*grid_fn)(void* user, size_t candidate, fj_str macros,
                     const fj_tune_shape* shape, uint32_t out_grid[3]);
  void* grid_user;
  /* The arguments every candidate is launched with (as fj_launch's). */
  const fj_arg* args;
  size_t num_args;
  /* The device buffers the kernel writes: checked and restored (above).
   * Each bytes entry must be > 0. */
  const uint64_t* output_addresses;
  const uint64_t* output_bytes;
  size_t num_outputs;
  /* Optional: returns 1 if candidate `candidate`'s outputs (host copies,
   * in output order, valid during the call) are correct, else 0. */
  int32_t (*check_fn)(void* user, size_t candidate, const void* const* outputs,
                      const uint64_t* bytes, size_t num_outputs);
  void* check_user;
  uint32_t warmup;  /* launches before timing; 0 = 3; <= FJ_TUNE_MAX_COUNT */
  uint32_t samples; /* timed samples; 0 = 21; <= FJ_TUNE_MAX_COUNT */
  double noise_threshold; /* 0 = 0.10 */
  uint32_t timeout_ms;    /* watchdog per wait; 0 = 10000 */
  uint32_t flags;         /* fj_tune_flags */
} fj_tune_options;

/* What happened to one candidate (since 1.3). */
typedef enum fj_tune_status {
  FJ_TUNE_OK = 0,             /* correct and timed */
  FJ_TUNE_BUILD_FAILED = 1,   /* NVRTC refused it, or no such kernel */
  FJ_TUNE_LAUNCH_REFUSED = 2, /* limits, resources, the grid rule */
  FJ_TUNE_WRONG_OUTPUT = 3,   /* its outputs were not correct */
  FJ_TUNE_FAULTED = 4,        /* (never in a returned table: see above) */
  FJ_TUNE_TIMED_OUT = 5,      /* (never in a returned table: see above) */
  FJ_TUNE_NOT_RUN = 6
} fj_tune_status;
#define FJ_TUNE_STATUS_LAST FJ_TUNE_NOT_RUN

/* The result of fj_tune, owned by the caller (since 1.3): a checked handle,
 * freed with fj_tune_result_free. */
typedef struct fj_tune_result fj_tune_result;

/* The result as a whole (since 1.3). */
typedef struct fj_tune_summary {
  size_t struct_size;
  const void* ext;
  size_t num_rows; /* one per candidate */
  size_t winner;   /* row index of the fastest correct candidate */
  /* COMPILED: tuned by this call; MEMORY/DISK/REMOTE_HIT: stored. */
  fj_cache_result source;
  int32_t noisy;    /* the winner's timings were noisy: not stored */
  int32_t stored;   /* this call stored it in the cache tiers */
  double tune_ms;   /* wall time of the tuning run (the original's on a hit) */
  double lookup_ms; /* key and lookup time of this call */
  char key[65];     /* the entry's digest, 64 hex digits and a NUL */
} fj_tune_summary;

/* One candidate's row of the table (since 1.3). */
typedef struct fj_tune_row {
  size_t struct_size;
  const void* ext;
  size_t macro_index; /* into fj_tune_options.macro_sets (0 if none) */
  size_t shape_index; /* into fj_tune_options.shapes */
  fj_str macros;      /* the macro set; valid while the result lives */
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t cluster[3];
  uint32_t grid[3];
  fj_tune_status status;
  fj_str message;   /* why not OK; valid while the result lives */
  double median_us; /* per launch */
  double min_us;
  double spread; /* (p75 - p25) / median */
  int32_t noisy;
  uint32_t samples;
  uint32_t batch; /* launches per sample */
} fj_tune_row;

/* Tunes per `options` on the device of options->build, or returns the
 * stored result (see above). Calls of one key on one runtime tune one at a
 * time: a call that finds the key being tuned waits for that run and then
 * returns its stored result (a memory hit), or tunes after it when that
 * run stored nothing (noisy, FJ_TUNE_NO_CACHE_WRITE) or the call asked for
 * FJ_TUNE_NO_CACHE_READ. Runtimes in other processes do not wait for each
 * other. (since 1.3) */
FJ_API fj_status* fj_tune(fj_runtime* runtime, const fj_tune_options* options,
                          fj_tune_result** out_result);
/* (since 1.3) */
FJ_API fj_status* fj_tune_result_summary(const fj_tune_result* result,
                                         fj_tune_summary* out_summary);
/* Row `index` < num_rows; FJ_OUT_OF_RANGE past the end. (since 1.3) */
FJ_API fj_status* fj_tune_result_row(const fj_tune_result* result, size_t index,
                                     fj_tune_row* out_row);
/* Frees a result. NULL is accepted. (since 1.3) */
FJ_API fj_status* fj_tune_result_free(fj_tune_result* result);
/* "ok", "build_failed", ...; "unknown" out of range. (since 1.3) */
FJ_API const char* fj_tune_status_name(fj_tune_status status);

/* ------------------------------------------------------------------------ */
/* Logs (since 1.1)                                                         */

/* Log levels of fj_runtime_options.log_level and of the log callback. A
 * line is passed when its level is at or below the runtime's level.
 * FLEETJIT_LOG=off|error|warn|info|debug overrides the option (a malformed
 * value fails fj_runtime_create with FJ_INVALID_ARGUMENT); with
 * FLEETJIT_LOG set and no log_fn, lines go to stderr. Otherwise the library
 * never writes to stderr or stdout.
 *
 * The callback receives one whole line without a trailing newline (e.g.
 * "cache: refused entry ...: bad checksum"); the message is valid only
 * during the call. It may be called from any thread, including the
 * runtime's background thread, concurrently, and during
 * fj_runtime_destroy; it must not call back into fleetjit. Lines at warn:
 * refused or unwritable cache entries, the remote tier going off or
 * failing, background failures; at info: TMA fallbacks of a tensor
 * argument, copies staged through host memory. (since 1.1) */
typedef enum fj_log_level {
  FJ_LOG_OFF = 0,
  FJ_LOG_ERROR = 1,
  FJ_LOG_WARN = 2,
  FJ_LOG_INFO = 3,
  FJ_LOG_DEBUG = 4
} fj_log_level;
#define FJ_LOG_LEVEL_LAST FJ_LOG_DEBUG

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEETJIT_FLEETJIT_H_ */

//! Raw FFI declarations for `libfleetjit.so.1`, written by hand from
//! `include/fleetjit/fleetjit.h` (no bindgen). Names, types, field order
//! and values match the header exactly; `tests/layout.rs` checks every size,
//! alignment, offset, enum value and version macro against the C compiler's
//! view of the header, and fails on any struct, field, enum or constant of
//! the header this crate lacks (build.rs reads them from the header itself).
//! It also compiles every `extern "C"` signature below, spelled in C, against
//! the header's prototype, so a parameter or return type that differs fails.
//! scripts/ci/check-binding-parity fails on any `FJ_API` function lacking
//! here.
//!
//! Conventions inherited from the header:
//! * every fallible call returns `*mut fj_status`, null meaning success; a
//!   non-null status belongs to the caller, who frees it with
//!   [`fj_status_free`];
//! * every argument struct starts with `struct_size` (set it to
//!   `size_of::<T>()`) and `ext` (null);
//! * strings are [`fj_str`] (pointer + length, UTF-8, no NUL needed);
//! * C enums are `u32` type aliases with `pub const` values, so a value a
//!   newer library returns is never undefined behaviour in Rust.
//!
//! The safe wrapper is the `fleetjit` crate.
#![allow(non_camel_case_types)]
#![no_std]

use core::ffi::{c_char, c_void};

pub const FJ_VERSION_MAJOR: u32 = 1;
pub const FJ_VERSION_MINOR: u32 = 3;

// ----------------------------------------------------------------- strings
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_str {
    pub data: *const c_char,
    pub size: usize,
}

impl fj_str {
    /// A view of `s`; valid while `s` is.
    pub const fn from_str(s: &str) -> fj_str {
        fj_str {
            data: s.as_ptr() as *const c_char,
            size: s.len(),
        }
    }
    pub const fn empty() -> fj_str {
        fj_str {
            data: core::ptr::null(),
            size: 0,
        }
    }
}

// ------------------------------------------------------------------ status
pub type fj_code = u32;
pub const FJ_OK: fj_code = 0;
pub const FJ_INVALID_ARGUMENT: fj_code = 1;
pub const FJ_NOT_FOUND: fj_code = 2;
pub const FJ_UNAVAILABLE: fj_code = 3;
pub const FJ_FAILED_PRECONDITION: fj_code = 4;
pub const FJ_BUILD_ERROR: fj_code = 5;
pub const FJ_CUDA_ERROR: fj_code = 6;
pub const FJ_RESOURCE_EXHAUSTED: fj_code = 7;
pub const FJ_OUT_OF_RANGE: fj_code = 8;
pub const FJ_INTERNAL: fj_code = 9;
pub const FJ_DEADLINE_EXCEEDED: fj_code = 10;
pub const FJ_CODE_LAST: fj_code = FJ_DEADLINE_EXCEEDED;

/// Opaque status object.
#[repr(C)]
pub struct fj_status {
    _private: [u8; 0],
}

// ------------------------------------------------- copy implementations
pub type fj_copy_impl = u32;
pub const FJ_COPY_IMPL_AUTO: fj_copy_impl = 0;
pub const FJ_COPY_IMPL_SYNC: fj_copy_impl = 1;
pub const FJ_COPY_IMPL_CP_ASYNC: fj_copy_impl = 2;
pub const FJ_COPY_IMPL_TMA: fj_copy_impl = 3;
pub const FJ_COPY_IMPL_LAST: fj_copy_impl = FJ_COPY_IMPL_TMA;

pub type fj_feature = u32;
pub const FJ_FEATURE_BARRIER: fj_feature = 0;
pub const FJ_FEATURE_GROUP_WAIT: fj_feature = 1;
pub const FJ_FEATURE_COPY_G2S: fj_feature = 2;
pub const FJ_FEATURE_COPY_S2G: fj_feature = 3;
pub const FJ_FEATURE_PREDICATE: fj_feature = 4;
pub const FJ_FEATURE_TILE_COPY: fj_feature = 5;
pub const FJ_FEATURE_OOB_ZEROS: fj_feature = 6;
pub const FJ_FEATURE_OOB_NAN: fj_feature = 7;
pub const FJ_FEATURE_MULTICAST: fj_feature = 8;
pub const FJ_FEATURE_L2_PREFETCH: fj_feature = 9;
pub const FJ_FEATURE_COUNT: fj_feature = 10;

pub type fj_support = u32;
pub const FJ_SUPPORT_NATIVE: fj_support = 1;
pub const FJ_SUPPORT_EMULATED: fj_support = 2;

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_copy_plan {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub target: [c_char; 32],
    /// `impl` in C (a Rust keyword).
    pub impl_: fj_copy_impl,
    pub support: [fj_support; FJ_FEATURE_COUNT as usize],
}

// ----------------------------------------------------------------- runtime
#[repr(C)]
pub struct fj_runtime {
    _private: [u8; 0],
}

pub type fj_runtime_flags = u32;
pub const FJ_RUNTIME_DISABLE_DISK_CACHE: fj_runtime_flags = 1 << 0;
pub const FJ_RUNTIME_DISABLE_THUNKS: fj_runtime_flags = 1 << 1;
/// Since 1.1: load NVRTC inside fj_runtime_create.
pub const FJ_RUNTIME_PRELOAD_NVRTC: fj_runtime_flags = 1 << 2;

/// Since 1.1: levels of the log callback (fj_log_level).
pub type fj_log_level = i32;
pub const FJ_LOG_OFF: fj_log_level = 0;
pub const FJ_LOG_ERROR: fj_log_level = 1;
pub const FJ_LOG_WARN: fj_log_level = 2;
pub const FJ_LOG_INFO: fj_log_level = 3;
pub const FJ_LOG_DEBUG: fj_log_level = 4;

/// Since 1.1: receives one log line (valid during the call only).
pub type fj_log_fn = Option<unsafe extern "C" fn(user: *mut c_void, level: i32, message: fj_str)>;

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_runtime_options {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub libcuda_path: fj_str,
    pub libnvrtc_path: fj_str,
    pub target_override: fj_str,
    pub copy_impl_override: fj_copy_impl,
    pub flags: u32,
    pub cache_dir: fj_str,
    pub cache_max_bytes: u64,
    /// Since 1.1: the fleet's shared cache tier (see the header).
    pub remote_cache_url: fj_str,
    /// Since 1.1: the key that signs remote entries.
    pub fleet_key: fj_str,
    /// Since 1.1: log lines through the caller (see the header).
    pub log_fn: fj_log_fn,
    pub log_user: *mut c_void,
    pub log_level: i32,
    /// Since 1.1: device ordinals opened at create (-1 = all).
    pub preopen_devices: *const i32,
    pub num_preopen_devices: usize,
}

// ----------------------------------------------------------------- devices
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_device_info {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub name: [c_char; 256],
    pub ordinal: i32,
    pub cc_major: i32,
    pub cc_minor: i32,
    pub sm_count: i32,
    pub total_memory_bytes: u64,
    pub shared_memory_per_block: i32,
    pub shared_memory_per_block_optin: i32,
    pub shared_memory_per_sm: i32,
    pub l2_cache_bytes: i32,
    pub max_threads_per_block: i32,
    pub cluster_launch: i32,
    pub driver_version: i32,
    pub plan: fj_copy_plan,
    /// Since 1.3.
    pub cooperative_launch: i32,
    pub max_persisting_l2_bytes: i32,
    pub max_access_policy_window_bytes: i32,
}

// ------------------------------------------------------- memory & streams
#[repr(C)]
pub struct fj_stream {
    _private: [u8; 0],
}

// -------------------------------------------------------- modules/kernels
#[repr(C)]
pub struct fj_module {
    _private: [u8; 0],
}
#[repr(C)]
pub struct fj_kernel {
    _private: [u8; 0],
}

pub type fj_output = u32;
pub const FJ_OUTPUT_AUTO: fj_output = 0;
pub const FJ_OUTPUT_CUBIN: fj_output = 1;
pub const FJ_OUTPUT_PTX: fj_output = 2;

pub type fj_build_flags = u32;
pub const FJ_BUILD_NO_CACHE: fj_build_flags = 1 << 0;

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_build_options {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub source: fj_str,
    pub name: fj_str,
    pub nvrtc_options: *const fj_str,
    pub num_nvrtc_options: usize,
    pub name_expressions: *const fj_str,
    pub num_name_expressions: usize,
    pub target: fj_str,
    pub device: i32,
    pub copy_impl: fj_copy_impl,
    pub output: fj_output,
    pub flags: u32,
    /// Since 1.1.
    pub include_dirs: *const fj_str,
    pub num_include_dirs: usize,
}

pub type fj_cache_result = u32;
pub const FJ_CACHE_COMPILED: fj_cache_result = 0;
pub const FJ_CACHE_MEMORY_HIT: fj_cache_result = 1;
pub const FJ_CACHE_DISK_HIT: fj_cache_result = 2;
pub const FJ_CACHE_REMOTE_HIT: fj_cache_result = 3;

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_module_info {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub target: [c_char; 32],
    pub copy_impl: fj_copy_impl,
    pub output: fj_output,
    pub cache_result: fj_cache_result,
    pub build_ms: f64,
    pub compile_ms: f64,
    pub image_bytes: u64,
}

// ----------------------------------------------------------------- tensors
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_dl_device {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_dl_dtype {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_tensor {
    pub data: *mut c_void,
    pub device: fj_dl_device,
    pub ndim: i32,
    pub dtype: fj_dl_dtype,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

pub type fj_oob = u32;
pub const FJ_OOB_PROMISE_IN_BOUNDS: fj_oob = 0;
pub const FJ_OOB_ZEROS: fj_oob = 1;
pub const FJ_OOB_NAN: fj_oob = 2;

pub type fj_swizzle = u32;
pub const FJ_SWIZZLE_NONE: fj_swizzle = 0;
pub const FJ_SWIZZLE_32B: fj_swizzle = 1;
pub const FJ_SWIZZLE_64B: fj_swizzle = 2;
pub const FJ_SWIZZLE_128B: fj_swizzle = 3;

pub const FJ_DL_FLOAT8_E4M3: u8 = 0x80;
pub const FJ_DL_FLOAT8_E5M2: u8 = 0x81;

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_tensor_arg {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub tensor: *const fj_tensor,
    /// `box` in C (reserved in Rust).
    pub box_: [u32; 5],
    pub oob: fj_oob,
    /// Since 1.1.
    pub swizzle: fj_swizzle,
}

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_tensor_check {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub tma: i32,
    pub reason: [c_char; 256],
}

// ------------------------------------------------------------------ launch
pub type fj_arg_kind = u32;
pub const FJ_ARG_I8: fj_arg_kind = 1;
pub const FJ_ARG_I16: fj_arg_kind = 2;
pub const FJ_ARG_I32: fj_arg_kind = 3;
pub const FJ_ARG_I64: fj_arg_kind = 4;
pub const FJ_ARG_U8: fj_arg_kind = 5;
pub const FJ_ARG_U16: fj_arg_kind = 6;
pub const FJ_ARG_U32: fj_arg_kind = 7;
pub const FJ_ARG_U64: fj_arg_kind = 8;
pub const FJ_ARG_F16: fj_arg_kind = 9;
pub const FJ_ARG_BF16: fj_arg_kind = 10;
pub const FJ_ARG_F32: fj_arg_kind = 11;
pub const FJ_ARG_F64: fj_arg_kind = 12;
pub const FJ_ARG_POINTER: fj_arg_kind = 13;
pub const FJ_ARG_BYTES: fj_arg_kind = 14;
pub const FJ_ARG_TENSOR: fj_arg_kind = 15;
/// Since 1.3: a cuFloatComplex in `v` (real in bytes 0-3, imaginary 4-7).
pub const FJ_ARG_C64: fj_arg_kind = 16;
/// Since 1.3: a cuDoubleComplex at `v.bytes` (two f64, real first).
pub const FJ_ARG_C128: fj_arg_kind = 17;
pub const FJ_ARG_KIND_LAST: fj_arg_kind = FJ_ARG_C128;

/// The anonymous union `v` of `fj_arg`.
#[repr(C)]
#[derive(Copy, Clone)]
pub union fj_arg_value {
    pub i8_: i8,
    pub i16_: i16,
    pub i32_: i32,
    pub i64_: i64,
    pub u8_: u8,
    pub u16_: u16,
    pub u32_: u32,
    pub u64_: u64,
    pub f32_: f32,
    pub f64_: f64,
    pub pointer: u64,
    pub bytes: *const c_void,
    pub tensor: *const fj_tensor_arg,
}

#[repr(C)]
#[derive(Copy, Clone)]
pub struct fj_arg {
    pub struct_size: usize,
    pub kind: fj_arg_kind,
    pub size: u32,
    pub v: fj_arg_value,
}

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_launch_config {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub cluster: [u32; 3],
    pub stream: *mut fj_stream,
    /// Since 1.3: `fj_launch_flags` and an L2 access-policy window.
    pub flags: u32,
    pub l2_hit_ratio: f32,
    pub l2_window_base: u64,
    pub l2_window_bytes: u64,
}

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_kernel_info {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub lowered_name: [c_char; 512],
    pub num_params: i32,
    pub param_bytes: u32,
    pub max_threads_per_block: i32,
    pub static_shared_bytes: i32,
    pub num_regs: i32,
    pub uses_thunk: i32,
    /// Since 1.3 (cuFuncGetAttribute).
    pub const_bytes: i32,
    pub local_bytes: i32,
    pub max_dynamic_shared_bytes: i32,
    pub ptx_version: i32,
    pub binary_version: i32,
    pub cache_mode_ca: i32,
    pub preferred_carveout: i32,
}

// ------------------------------------------------------------------- cache
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_cache_stats {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub memory_hits: u64,
    pub disk_hits: u64,
    pub misses: u64,
    pub compiles: u64,
    pub compile_ms_total: f64,
    pub evictions: u64,
    pub rejected_entries: u64,
    pub disk_entries: u64,
    pub disk_bytes: u64,
    /// Since 1.1: the remote tier (all 0 when it is off).
    pub remote_state: fj_remote_state,
    pub remote_hits: u64,
    pub remote_misses: u64,
    pub remote_errors: u64,
    pub remote_rejected: u64,
    pub remote_writes: u64,
    pub remote_write_drops: u64,
    pub remote_breaker_opens: u64,
}

pub type fj_remote_state = u32;
pub const FJ_REMOTE_OFF: fj_remote_state = 0;
pub const FJ_REMOTE_UNAVAILABLE: fj_remote_state = 1;
pub const FJ_REMOTE_CLOSED: fj_remote_state = 2;
pub const FJ_REMOTE_OPEN: fj_remote_state = 3;
pub const FJ_REMOTE_HALF_OPEN: fj_remote_state = 4;

pub const FJ_LOG_LEVEL_LAST: fj_log_level = FJ_LOG_DEBUG;

// ------------------------------------------------ builds that do not block
/// Since 1.1: an asynchronous build (opaque).
#[repr(C)]
pub struct fj_build {
    _private: [u8; 0],
}

// ---------------------------------------------- modules built elsewhere
/// Since 1.1: the format of an image given to fj_module_load.
pub type fj_image_kind = u32;
pub const FJ_IMAGE_AUTO: fj_image_kind = 0;
pub const FJ_IMAGE_CUBIN: fj_image_kind = 1;
pub const FJ_IMAGE_PTX: fj_image_kind = 2;
pub const FJ_IMAGE_FATBIN: fj_image_kind = 3;
pub const FJ_IMAGE_KIND_LAST: fj_image_kind = FJ_IMAGE_FATBIN;

/// Since 1.1.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_module_load_options {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub image: *const c_void,
    pub image_size: usize,
    pub kind: fj_image_kind,
    pub name: fj_str,
    pub target: fj_str,
}

// --------------------------------------- tensor copies, prefetch, peers
/// Since 1.1: a window of `src` copied into `dst` (see the header).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_copy_desc {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub src: *const fj_tensor,
    pub src_start: [i64; 5],
    pub oob: fj_oob,
    pub dst: *const fj_tensor,
    pub gather_index: *const fj_tensor,
}

/// Since 1.1.
pub type fj_prefetch_mode = u32;
pub const FJ_PREFETCH_AUTO: fj_prefetch_mode = 0;
pub const FJ_PREFETCH_LOCAL_L2: fj_prefetch_mode = 1;
pub const FJ_PREFETCH_WARM_OWNER_L2: fj_prefetch_mode = 2;
pub const FJ_PREFETCH_STAGE_LOCAL: fj_prefetch_mode = 3;
pub const FJ_PREFETCH_MODE_LAST: fj_prefetch_mode = FJ_PREFETCH_STAGE_LOCAL;

/// Since 1.1: what to prefetch, for which reader, and how.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_prefetch_desc {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub address: u64,
    pub bytes: u64,
    pub tensor: *const fj_tensor,
    pub tile_start: [i64; 5],
    pub tile_extent: [i64; 5],
    pub mode: fj_prefetch_mode,
    pub reader_device: i32,
    pub stage_address: u64,
    pub stage_bytes: u64,
}

// Since 1.1: asynchronous builds, images built elsewhere, the cache flush,
// tensor copies, L2 prefetch and peer access.
extern "C" {
    pub fn fj_module_build_async(
        runtime: *mut fj_runtime,
        options: *const fj_build_options,
        out_build: *mut *mut fj_build,
    ) -> *mut fj_status;
    pub fn fj_build_poll(build: *const fj_build, out_done: *mut i32) -> *mut fj_status;
    pub fn fj_build_wait(
        build: *mut fj_build,
        timeout_ms: u32,
        out_done: *mut i32,
    ) -> *mut fj_status;
    pub fn fj_build_take(build: *mut fj_build, out_module: *mut *mut fj_module) -> *mut fj_status;
    pub fn fj_build_destroy(build: *mut fj_build) -> *mut fj_status;

    pub fn fj_module_load(
        runtime: *mut fj_runtime,
        options: *const fj_module_load_options,
        out_module: *mut *mut fj_module,
    ) -> *mut fj_status;

    pub fn fj_cache_flush(runtime: *mut fj_runtime, timeout_ms: u32) -> *mut fj_status;

    pub fn fj_copy(
        runtime: *mut fj_runtime,
        desc: *const fj_copy_desc,
        stream: *mut fj_stream,
    ) -> *mut fj_status;
    pub fn fj_prefetch(
        runtime: *mut fj_runtime,
        desc: *const fj_prefetch_desc,
        stream: *mut fj_stream,
    ) -> *mut fj_status;
    pub fn fj_peer_query(
        runtime: *mut fj_runtime,
        reader: i32,
        owner: i32,
        out_can_access: *mut i32,
    ) -> *mut fj_status;
    pub fn fj_peer_enable(runtime: *mut fj_runtime, reader: i32, owner: i32) -> *mut fj_status;
    pub fn fj_peer_disable(runtime: *mut fj_runtime, reader: i32, owner: i32) -> *mut fj_status;
}

extern "C" {
    pub fn fj_version() -> u32;

    pub fn fj_status_code(status: *const fj_status) -> fj_code;
    pub fn fj_status_message(status: *const fj_status, out_size: *mut usize) -> *const c_char;
    pub fn fj_status_detail(
        status: *const fj_status,
        key: fj_str,
        out_size: *mut usize,
    ) -> *const c_char;
    pub fn fj_status_free(status: *mut fj_status);
    pub fn fj_code_name(code: fj_code) -> *const c_char;

    pub fn fj_copy_impl_name(impl_: fj_copy_impl) -> *const c_char;
    pub fn fj_feature_name(feature: fj_feature) -> *const c_char;
    pub fn fj_support_name(support: fj_support) -> *const c_char;
    pub fn fj_copy_plan_for_target(
        target: fj_str,
        impl_: fj_copy_impl,
        out_plan: *mut fj_copy_plan,
    ) -> *mut fj_status;

    pub fn fj_runtime_create(
        options: *const fj_runtime_options,
        out_runtime: *mut *mut fj_runtime,
    ) -> *mut fj_status;
    pub fn fj_runtime_destroy(runtime: *mut fj_runtime) -> *mut fj_status;
    pub fn fj_runtime_driver_error(runtime: *const fj_runtime) -> *const c_char;
    /// Since 1.1.
    pub fn fj_runtime_include_dir(
        runtime: *mut fj_runtime,
        index: usize,
        out_count: *mut usize,
        out_path: *mut *const c_char,
        out_origin: *mut *const c_char,
    ) -> *mut fj_status;

    pub fn fj_device_count(runtime: *const fj_runtime, out_count: *mut i32) -> *mut fj_status;
    pub fn fj_device_info_get(
        runtime: *mut fj_runtime,
        ordinal: i32,
        out_info: *mut fj_device_info,
    ) -> *mut fj_status;

    pub fn fj_mem_alloc(
        runtime: *mut fj_runtime,
        ordinal: i32,
        bytes: u64,
        out_address: *mut u64,
    ) -> *mut fj_status;
    pub fn fj_mem_free(runtime: *mut fj_runtime, address: u64) -> *mut fj_status;
    pub fn fj_memcpy_htod(
        runtime: *mut fj_runtime,
        dst: u64,
        src: *const c_void,
        bytes: u64,
        stream: *mut fj_stream,
    ) -> *mut fj_status;
    pub fn fj_memcpy_dtoh(
        runtime: *mut fj_runtime,
        dst: *mut c_void,
        src: u64,
        bytes: u64,
        stream: *mut fj_stream,
    ) -> *mut fj_status;
    pub fn fj_memcpy_dtod(
        runtime: *mut fj_runtime,
        dst: u64,
        src: u64,
        bytes: u64,
        stream: *mut fj_stream,
    ) -> *mut fj_status;
    pub fn fj_memset_d8(
        runtime: *mut fj_runtime,
        dst: u64,
        value: u8,
        bytes: u64,
        stream: *mut fj_stream,
    ) -> *mut fj_status;

    pub fn fj_stream_create(
        runtime: *mut fj_runtime,
        ordinal: i32,
        out_stream: *mut *mut fj_stream,
    ) -> *mut fj_status;
    pub fn fj_stream_synchronize(stream: *mut fj_stream) -> *mut fj_status;
    pub fn fj_stream_destroy(stream: *mut fj_stream) -> *mut fj_status;
    /// Since 1.1: borrows the caller's CUstream (see the header).
    pub fn fj_stream_wrap(
        runtime: *mut fj_runtime,
        device: i32,
        cu_stream: u64,
        out_stream: *mut *mut fj_stream,
    ) -> *mut fj_status;

    pub fn fj_module_build(
        runtime: *mut fj_runtime,
        options: *const fj_build_options,
        out_module: *mut *mut fj_module,
    ) -> *mut fj_status;
    pub fn fj_module_info_get(
        module: *const fj_module,
        out_info: *mut fj_module_info,
    ) -> *mut fj_status;
    pub fn fj_module_image(
        module: *const fj_module,
        out_data: *mut *const c_void,
        out_size: *mut usize,
    ) -> *mut fj_status;
    pub fn fj_module_destroy(module: *mut fj_module) -> *mut fj_status;
    pub fn fj_module_get_kernel(
        module: *mut fj_module,
        name: fj_str,
        device: i32,
        out_kernel: *mut *mut fj_kernel,
    ) -> *mut fj_status;

    pub fn fj_tensor_arg_check(
        arg: *const fj_tensor_arg,
        out_check: *mut fj_tensor_check,
    ) -> *mut fj_status;

    pub fn fj_launch(
        kernel: *mut fj_kernel,
        config: *const fj_launch_config,
        args: *const fj_arg,
        num_args: usize,
    ) -> *mut fj_status;
    pub fn fj_kernel_info_get(
        kernel: *const fj_kernel,
        out_info: *mut fj_kernel_info,
    ) -> *mut fj_status;

    pub fn fj_cache_stats_get(
        runtime: *mut fj_runtime,
        out_stats: *mut fj_cache_stats,
    ) -> *mut fj_status;
    pub fn fj_cache_clear(runtime: *mut fj_runtime) -> *mut fj_status;
}

// --- module globals, kernel attributes, launch flags, priorities (1.3)
pub type fj_launch_flags = u32;
pub const FJ_LAUNCH_COOPERATIVE: fj_launch_flags = 1 << 0;
pub const FJ_LAUNCH_PROGRAMMATIC_DEPENDENT: fj_launch_flags = 1 << 1;

pub type fj_kernel_attr = u32;
pub const FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES: fj_kernel_attr = 0;
pub const FJ_KERNEL_ATTR_PREFERRED_CARVEOUT: fj_kernel_attr = 1;
pub const FJ_KERNEL_ATTR_LAST: fj_kernel_attr = FJ_KERNEL_ATTR_PREFERRED_CARVEOUT;

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_global_info {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub address: u64,
    pub bytes: u64,
    pub lowered_name: [c_char; 512],
}

extern "C" {
    pub fn fj_module_build_log(
        module: *const fj_module,
        out_log: *mut *const c_char,
        out_size: *mut usize,
    ) -> *mut fj_status;
    pub fn fj_module_get_global(
        module: *mut fj_module,
        name: fj_str,
        device: i32,
        out_info: *mut fj_global_info,
    ) -> *mut fj_status;
    pub fn fj_module_global_write(
        module: *mut fj_module,
        name: fj_str,
        device: i32,
        offset: u64,
        src: *const c_void,
        bytes: u64,
        stream: *mut fj_stream,
    ) -> *mut fj_status;
    pub fn fj_module_global_read(
        module: *mut fj_module,
        name: fj_str,
        device: i32,
        offset: u64,
        dst: *mut c_void,
        bytes: u64,
        stream: *mut fj_stream,
    ) -> *mut fj_status;
    pub fn fj_kernel_set_attribute(
        kernel: *mut fj_kernel,
        attr: fj_kernel_attr,
        value: i32,
    ) -> *mut fj_status;
    pub fn fj_kernel_occupancy(
        kernel: *const fj_kernel,
        block_threads: u32,
        dynamic_shared_bytes: u32,
        out_blocks_per_sm: *mut i32,
    ) -> *mut fj_status;
    pub fn fj_kernel_suggest_block(
        kernel: *const fj_kernel,
        dynamic_shared_bytes: u32,
        out_block_threads: *mut i32,
        out_min_grid: *mut i32,
    ) -> *mut fj_status;
    pub fn fj_stream_priority_range(
        runtime: *mut fj_runtime,
        ordinal: i32,
        out_least: *mut i32,
        out_greatest: *mut i32,
    ) -> *mut fj_status;
    pub fn fj_stream_create_with_priority(
        runtime: *mut fj_runtime,
        ordinal: i32,
        priority: i32,
        out_stream: *mut *mut fj_stream,
    ) -> *mut fj_status;
    pub fn fj_device_set_persisting_l2(
        runtime: *mut fj_runtime,
        ordinal: i32,
        bytes: u64,
        out_bytes: *mut u64,
    ) -> *mut fj_status;
}

// --- tuning (1.3)

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fj_tune_shape {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub cluster: [u32; 3],
}

pub type fj_tune_flags = u32;
pub const FJ_TUNE_NO_CACHE_READ: fj_tune_flags = 1 << 0;
pub const FJ_TUNE_NO_CACHE_WRITE: fj_tune_flags = 1 << 1;
/// The most warm-up launches and timed samples one candidate may ask for
/// (more is `FJ_INVALID_ARGUMENT`).
pub const FJ_TUNE_MAX_COUNT: u32 = 10000;

pub type fj_tune_grid_fn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        candidate: usize,
        macros: fj_str,
        shape: *const fj_tune_shape,
        out_grid: *mut u32,
    ) -> i32,
>;
pub type fj_tune_check_fn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        candidate: usize,
        outputs: *const *const c_void,
        bytes: *const u64,
        num_outputs: usize,
    ) -> i32,
>;

#[repr(C)]
pub struct fj_tune_options {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub build: *const fj_build_options,
    pub kernel: fj_str,
    pub macro_sets: *const fj_str,
    pub num_macro_sets: usize,
    pub shapes: *const fj_tune_shape,
    pub num_shapes: usize,
    pub grid: [u32; 3],
    pub grid_extent: [u64; 3],
    pub grid_divisor: [fj_str; 3],
    pub grid_fn: fj_tune_grid_fn,
    pub grid_user: *mut c_void,
    pub args: *const fj_arg,
    pub num_args: usize,
    pub output_addresses: *const u64,
    pub output_bytes: *const u64,
    pub num_outputs: usize,
    pub check_fn: fj_tune_check_fn,
    pub check_user: *mut c_void,
    pub warmup: u32,
    pub samples: u32,
    pub noise_threshold: f64,
    pub timeout_ms: u32,
    pub flags: u32,
}

pub type fj_tune_status = u32;
pub const FJ_TUNE_OK: fj_tune_status = 0;
pub const FJ_TUNE_BUILD_FAILED: fj_tune_status = 1;
pub const FJ_TUNE_LAUNCH_REFUSED: fj_tune_status = 2;
pub const FJ_TUNE_WRONG_OUTPUT: fj_tune_status = 3;
pub const FJ_TUNE_FAULTED: fj_tune_status = 4;
pub const FJ_TUNE_TIMED_OUT: fj_tune_status = 5;
pub const FJ_TUNE_NOT_RUN: fj_tune_status = 6;
pub const FJ_TUNE_STATUS_LAST: fj_tune_status = FJ_TUNE_NOT_RUN;

#[repr(C)]
pub struct fj_tune_result {
    _private: [u8; 0],
}

#[repr(C)]
pub struct fj_tune_summary {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub num_rows: usize,
    pub winner: usize,
    pub source: fj_cache_result,
    pub noisy: i32,
    pub stored: i32,
    pub tune_ms: f64,
    pub lookup_ms: f64,
    pub key: [c_char; 65],
}

#[repr(C)]
pub struct fj_tune_row {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub macro_index: usize,
    pub shape_index: usize,
    pub macros: fj_str,
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub cluster: [u32; 3],
    pub grid: [u32; 3],
    pub status: fj_tune_status,
    pub message: fj_str,
    pub median_us: f64,
    pub min_us: f64,
    pub spread: f64,
    pub noisy: i32,
    pub samples: u32,
    pub batch: u32,
}

extern "C" {
    pub fn fj_tune(
        runtime: *mut fj_runtime,
        options: *const fj_tune_options,
        out_result: *mut *mut fj_tune_result,
    ) -> *mut fj_status;
    pub fn fj_tune_result_summary(
        result: *const fj_tune_result,
        out_summary: *mut fj_tune_summary,
    ) -> *mut fj_status;
    pub fn fj_tune_result_row(
        result: *const fj_tune_result,
        index: usize,
        out_row: *mut fj_tune_row,
    ) -> *mut fj_status;
    pub fn fj_tune_result_free(result: *mut fj_tune_result) -> *mut fj_status;
    pub fn fj_tune_status_name(status: fj_tune_status) -> *const c_char;
}

// --- device linking (1.3)
pub type fj_link_input_kind = u32;
pub const FJ_LINK_SOURCE: fj_link_input_kind = 0;
pub const FJ_LINK_CUBIN: fj_link_input_kind = 1;
pub const FJ_LINK_PTX: fj_link_input_kind = 2;
pub const FJ_LINK_FATBIN: fj_link_input_kind = 3;
pub const FJ_LINK_LTOIR: fj_link_input_kind = 4;
pub const FJ_LINK_LIBRARY: fj_link_input_kind = 5;
pub const FJ_LINK_INPUT_KIND_LAST: fj_link_input_kind = FJ_LINK_LIBRARY;

pub type fj_link_flags = u32;
pub const FJ_LINK_NO_CACHE: fj_link_flags = 1 << 0;
pub const FJ_LINK_LTO: fj_link_flags = 1 << 1;
pub const FJ_LINK_DEVRT: fj_link_flags = 1 << 2;

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_link_input {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub kind: fj_link_input_kind,
    pub name: fj_str,
    pub data: *const c_void,
    pub size: usize,
    pub nvrtc_options: *const fj_str,
    pub num_nvrtc_options: usize,
    pub name_expressions: *const fj_str,
    pub num_name_expressions: usize,
}

#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct fj_link_options {
    pub struct_size: usize,
    pub ext: *const c_void,
    pub inputs: *const fj_link_input,
    pub num_inputs: usize,
    pub name: fj_str,
    pub target: fj_str,
    pub device: i32,
    pub link_options: *const fj_str,
    pub num_link_options: usize,
    pub include_dirs: *const fj_str,
    pub num_include_dirs: usize,
    pub flags: u32,
}

extern "C" {
    pub fn fj_module_link(
        runtime: *mut fj_runtime,
        options: *const fj_link_options,
        out_module: *mut *mut fj_module,
    ) -> *mut fj_status;
}

//! Safe Rust bindings for fleetjit, the CUDA JIT runtime behind
//! `libfleetjit.so.1` (C ABI: `include/fleetjit/fleetjit.h`).
//!
//! ```no_run
//! use fleetjit::{BuildOptions, Runtime, RuntimeOptions};
//! fleetjit::check_version()?;
//! let rt = Runtime::new(&RuntimeOptions::new())?;
//! let src = r#"extern "C" __global__ void k(float* y) { y[threadIdx.x] = 1.0f; }"#;
//! let module = rt.build(&BuildOptions::new(src).name("k.cu").target("sm_90"))?;
//! println!("{} bytes of cubin for {}", module.image()?.len(), module.info()?.target);
//! # Ok::<(), fleetjit::Error>(())
//! ```
//!
//! # Ownership
//! Every C handle has one owning Rust value whose `Drop` calls the C destroy
//! function: [`Runtime`] (`fj_runtime_destroy`), [`Module`]
//! (`fj_module_destroy`), [`Stream`] (`fj_stream_destroy`) and
//! [`DeviceBuffer`] (`fj_mem_free`). Destroying a runtime invalidates what
//! was created from it, so modules, streams and buffers borrow the runtime
//! (`Module<'rt>`), and a [`Kernel<'m>`] borrows its module: the C ABI has no
//! kernel destroy call, a kernel lives exactly as long as its module, and the
//! borrow checker enforces that. Errors from destroy calls in `Drop` are
//! ignored (they cannot be returned); the handles are checked by the library,
//! so a failure there is never a crash.
//!
//! # Threads: why the handles are `Send` and `Sync`
//! Convention 2 of the header promises that calls are safe from any thread
//! (no thread-local "last error"; statuses are returned objects) and
//! convention 4 makes destroying a handle while another thread uses it "the
//! caller's race". The first allows `Send + Sync` on [`Runtime`],
//! [`Module`], [`Kernel`] and [`Stream`]: every method takes `&self` and maps
//! to one thread-safe C call. The second is excluded by construction: the
//! only destroy is `Drop`, which needs ownership, and ownership is impossible
//! while any thread holds a borrow. [`DeviceBuffer`] writes take `&mut self`.
//!
//! # Errors
//! Every fallible call returns [`Result<T>`]; [`Error`] carries the
//! [`Code`] (mirroring `fj_code`), the library's message and its details
//! (the NVRTC build log of a [`Code::BuildError`], the CUDA call of a
//! [`Code::CudaError`]).
#![deny(unsafe_op_in_unsafe_fn)]

pub use fleetjit_sys as sys;

use std::ffi::{c_char, c_void, CStr};
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};

// ----------------------------------------------------------------- version

/// The major version these bindings were written against
/// (`FJ_VERSION_MAJOR` of the header).
pub const EXPECTED_MAJOR: u32 = sys::FJ_VERSION_MAJOR;
/// The minor version these bindings were written against.
pub const EXPECTED_MINOR: u32 = sys::FJ_VERSION_MINOR;
/// The release these bindings belong to, "major.minor.patch": the header's
/// version and the release's patch (the crate's version, stamped by
/// scripts/dev/gen-bindings).
pub const CRATE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A library version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The version of the library actually loaded (`fj_version`).
pub fn version() -> Version {
    let v = unsafe { sys::fj_version() };
    Version {
        major: v >> 16,
        minor: v & 0xffff,
    }
}

/// Checks that the loaded library has the major version these bindings
/// expect. A newer minor is fine (additions only); an older minor is fine
/// as long as nothing newer is used (argument structs are size-versioned).
pub fn check_version() -> Result<Version> {
    let v = version();
    if v.major != EXPECTED_MAJOR {
        return Err(Error::new(
            Code::FailedPrecondition,
            format!(
                "libfleetjit {v} is loaded but these bindings expect major version {EXPECTED_MAJOR}"
            ),
        ));
    }
    Ok(v)
}

// ------------------------------------------------------------------- enums

/// A Rust enum over one C enum of `fleetjit-sys`, each variant naming its
/// constant once: `from_raw` and `raw` convert both ways, and a value the
/// bindings do not know (a newer library's) is kept in the catch-all
/// variant (`Other`, or the name given after the raw type).
macro_rules! c_enum {
    ($(#[$m:meta])* $name:ident : $raw:ty { $($body:tt)* }) => {
        c_enum!($(#[$m])* $name : $raw, Other { $($body)* });
    };
    ($(#[$m:meta])* $name:ident : $raw:ty, $other:ident {
        $($(#[$vm:meta])* $v:ident = $c:path,)*
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $v,)*
            /// A value this version of the bindings does not know.
            $other($raw),
        }
        impl $name {
            pub fn from_raw(v: $raw) -> Self {
                match v { $($c => $name::$v,)* other => $name::$other(other) }
            }
            pub fn raw(self) -> $raw {
                match self { $($name::$v => $c,)* $name::$other(v) => v }
            }
        }
    };
}

// ------------------------------------------------------------------ errors

c_enum!(
    /// The error codes of `fj_code` (`FJ_OK` is never an error).
    Code: sys::fj_code, Unknown {
        InvalidArgument = sys::FJ_INVALID_ARGUMENT,
        NotFound = sys::FJ_NOT_FOUND,
        Unavailable = sys::FJ_UNAVAILABLE,
        FailedPrecondition = sys::FJ_FAILED_PRECONDITION,
        BuildError = sys::FJ_BUILD_ERROR,
        CudaError = sys::FJ_CUDA_ERROR,
        ResourceExhausted = sys::FJ_RESOURCE_EXHAUSTED,
        OutOfRange = sys::FJ_OUT_OF_RANGE,
        Internal = sys::FJ_INTERNAL,
        /// Since 1.2: a bounded wait ran out (`fj_cache_flush`).
        DeadlineExceeded = sys::FJ_DEADLINE_EXCEEDED,
    }
);

impl Code {
    /// The library's name for the code, e.g. `"INVALID_ARGUMENT"`.
    pub fn name(self) -> String {
        unsafe { c_string(sys::fj_code_name(self.raw())) }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Status detail keys the library documents.
const DETAIL_KEYS: [&str; 7] = [
    "build_log",
    "options",
    "target",
    "copy_impl",
    "cuda_call",
    "cuda_error",
    "link_log",
];

/// An error from fleetjit (a non-NULL `fj_status`, copied and freed) or
/// from these bindings' own argument checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    code: Code,
    message: String,
    details: Vec<(&'static str, String)>,
}

impl Error {
    /// An error made by the bindings themselves.
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
            details: Vec::new(),
        }
    }
    pub fn code(&self) -> Code {
        self.code
    }
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The NVRTC log of a [`Code::BuildError`].
    pub fn build_log(&self) -> Option<&str> {
        self.detail("build_log")
    }
    /// A named detail: "build_log", "options", "target", "copy_impl" (build
    /// errors), "cuda_call", "cuda_error" (CUDA errors).
    pub fn detail(&self, key: &str) -> Option<&str> {
        self.details
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The same error with `what: ` in front of its message (which of
    /// several descriptors failed).
    pub(crate) fn prefixed(mut self, what: &str) -> Error {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// Takes ownership of a non-NULL status: copies it out and frees it.
    ///
    /// # Safety
    /// `status` must be a status returned by the library and not yet freed.
    pub unsafe fn from_status(status: NonNull<sys::fj_status>) -> Error {
        struct Free(*mut sys::fj_status);
        impl Drop for Free {
            fn drop(&mut self) {
                unsafe { sys::fj_status_free(self.0) }
            }
        }
        let guard = Free(status.as_ptr());
        let st = guard.0 as *const sys::fj_status;
        unsafe {
            let code = Code::from_raw(sys::fj_status_code(st));
            let mut size = 0usize;
            let msg = sys::fj_status_message(st, &mut size);
            let message = c_bytes(msg, size);
            let mut details = Vec::new();
            for key in DETAIL_KEYS {
                let mut n = 0usize;
                let p = sys::fj_status_detail(st, sys::fj_str::from_str(key), &mut n);
                if !p.is_null() {
                    details.push((key, c_bytes(p, n)));
                }
            }
            Error {
                code,
                message,
                details,
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fleetjit {}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Turns a returned status into a `Result`.
fn check(status: *mut sys::fj_status) -> Result<()> {
    match NonNull::new(status) {
        None => Ok(()),
        // The pointer came straight from a library call.
        Some(s) => Err(unsafe { Error::from_status(s) }),
    }
}

unsafe fn c_bytes(p: *const c_char, n: usize) -> String {
    if p.is_null() {
        return String::new();
    }
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, n) };
    String::from_utf8_lossy(bytes).into_owned()
}

unsafe fn c_string(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A NUL-terminated fixed array of a C struct (always terminated by the
/// library; cut at the array's end regardless).
fn fixed_string(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn path_str(p: &Path) -> Result<&str> {
    p.to_str().ok_or_else(|| {
        Error::new(
            Code::InvalidArgument,
            format!("path {} is not UTF-8", p.display()),
        )
    })
}

/// Refuses a string with an embedded NUL: NVRTC and the driver read C
/// strings, so everything after it would be silently dropped (a source cut
/// short still compiles).
pub(crate) fn no_nul(what: &str, s: &str) -> Result<()> {
    match s.bytes().position(|b| b == 0) {
        None => Ok(()),
        Some(i) => Err(Error::new(
            Code::InvalidArgument,
            format!(
                "{what} has an embedded NUL at byte {i} of {}: the C string would end there and silently drop the rest",
                s.len()
            ),
        )),
    }
}

fn opt_str(s: &Option<String>) -> sys::fj_str {
    s.as_deref()
        .map(sys::fj_str::from_str)
        .unwrap_or(sys::fj_str::empty())
}

macro_rules! zeroed_struct {
    ($t:ty) => {{
        // All argument and output structs are plain C data: zero is valid.
        let mut v: $t = unsafe { std::mem::zeroed() };
        v.struct_size = std::mem::size_of::<$t>();
        v
    }};
}

c_enum!(
    /// How `<fleetjit/copy.cuh>` moves data (`fj_copy_impl`).
    #[derive(Default)]
    CopyImpl: sys::fj_copy_impl {
        /// Choose from the target's compute capability.
        #[default]
        Auto = sys::FJ_COPY_IMPL_AUTO,
        Sync = sys::FJ_COPY_IMPL_SYNC,
        CpAsync = sys::FJ_COPY_IMPL_CP_ASYNC,
        Tma = sys::FJ_COPY_IMPL_TMA,
    }
);
impl CopyImpl {
    /// The library's stable name ("tma").
    pub fn name(self) -> String {
        unsafe { c_string(sys::fj_copy_impl_name(self.raw())) }
    }
}

c_enum!(
    /// What a build produces (`fj_output`).
    #[derive(Default)]
    Output: sys::fj_output {
        /// Cubin for sm_XX targets, PTX for compute_XX.
        #[default]
        Auto = sys::FJ_OUTPUT_AUTO,
        Cubin = sys::FJ_OUTPUT_CUBIN,
        Ptx = sys::FJ_OUTPUT_PTX,
    }
);

c_enum!(
    /// Where a module came from (`fj_cache_result`).
    CacheResult: sys::fj_cache_result {
        Compiled = sys::FJ_CACHE_COMPILED,
        MemoryHit = sys::FJ_CACHE_MEMORY_HIT,
        DiskHit = sys::FJ_CACHE_DISK_HIT,
        /// Since 1.1: from the fleet's remote tier.
        RemoteHit = sys::FJ_CACHE_REMOTE_HIT,
    }
);

// --------------------------------------------------------------- copy plan

/// The copy plan for a target (`fj_copy_plan`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyPlan {
    /// Canonical target, e.g. "sm_90a".
    pub target: String,
    /// The implementation chosen (never `Auto`).
    pub copy_impl: CopyImpl,
    /// `(feature name, support name)` for every `fj_feature`, e.g.
    /// `("group_wait", "native")`.
    pub support: Vec<(String, String)>,
}

impl CopyPlan {
    fn from_raw(p: &sys::fj_copy_plan) -> CopyPlan {
        let support = p
            .support
            .iter()
            .enumerate()
            .map(|(i, &s)| unsafe {
                (
                    c_string(sys::fj_feature_name(i as u32)),
                    c_string(sys::fj_support_name(s)),
                )
            })
            .collect();
        CopyPlan {
            target: fixed_string(&p.target),
            copy_impl: CopyImpl::from_raw(p.impl_),
            support,
        }
    }
}

/// The copy plan for a target name ("sm_90", "compute_80"), optionally
/// forcing an implementation. Needs no GPU and no runtime.
pub fn copy_plan(target: &str, copy_impl: CopyImpl) -> Result<CopyPlan> {
    let mut p = zeroed_struct!(sys::fj_copy_plan);
    check(unsafe {
        sys::fj_copy_plan_for_target(sys::fj_str::from_str(target), copy_impl.raw(), &mut p)
    })?;
    Ok(CopyPlan::from_raw(&p))
}

// ----------------------------------------------------------------- runtime

/// Options of [`Runtime::new`] (`fj_runtime_options`). Environment
/// variables (FLEETJIT_TARGET, FLEETJIT_CACHE_DIR, ...) override them.
#[derive(Clone, Default)]
pub struct RuntimeOptions {
    libcuda_path: Option<String>,
    libnvrtc_path: Option<String>,
    target_override: Option<String>,
    copy_impl_override: CopyImpl,
    flags: u32,
    cache_dir: Option<String>,
    cache_max_bytes: u64,
    remote_cache_url: Option<String>,
    fleet_key: Option<String>,
    log: Option<std::sync::Arc<LogFn>>,
    log_level: LogLevel,
    preopen_devices: Vec<i32>,
    bad_path: Option<PathBuf>,
}

/// The log callback's type: a level and one whole line.
pub type LogFn = dyn Fn(LogLevel, &str) + Send + Sync + 'static;

c_enum!(
    /// Log levels (`fj_log_level`, since 1.1).
    #[derive(Default)]
    LogLevel: sys::fj_log_level {
        #[default]
        Off = sys::FJ_LOG_OFF,
        Error = sys::FJ_LOG_ERROR,
        Warn = sys::FJ_LOG_WARN,
        Info = sys::FJ_LOG_INFO,
        Debug = sys::FJ_LOG_DEBUG,
    }
);

impl fmt::Debug for RuntimeOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeOptions")
            .field("target_override", &self.target_override)
            .field("cache_dir", &self.cache_dir)
            .field("flags", &self.flags)
            .field("log", &self.log.is_some())
            .finish_non_exhaustive()
    }
}

/// Receives the library's log lines (any thread, concurrently; see the
/// header): `user` is the runtime's `Arc<LogFn>`, alive until the runtime
/// is destroyed. A panic of the callback is caught here (it must not
/// unwind into C) and the line dropped.
unsafe extern "C" fn log_trampoline(user: *mut c_void, level: i32, message: sys::fj_str) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let f = unsafe { &*(user as *const std::sync::Arc<LogFn>) };
        let text = unsafe { c_bytes(message.data, message.size) };
        f(LogLevel::from_raw(level as sys::fj_log_level), &text);
    }));
}

impl RuntimeOptions {
    pub fn new() -> Self {
        Self::default()
    }
    fn path(&mut self, p: &Path) -> Option<String> {
        match path_str(p) {
            Ok(s) => Some(s.to_string()),
            Err(_) => {
                self.bad_path = Some(p.to_path_buf());
                None
            }
        }
    }
    /// Load this libcuda instead of `libcuda.so.1`.
    pub fn libcuda_path(mut self, p: impl AsRef<Path>) -> Self {
        self.libcuda_path = self.path(p.as_ref());
        self
    }
    /// Load this NVRTC instead of the default search.
    pub fn libnvrtc_path(mut self, p: impl AsRef<Path>) -> Self {
        self.libnvrtc_path = self.path(p.as_ref());
        self
    }
    /// Build every module for this target ("sm_80") instead of the device's.
    pub fn target_override(mut self, t: impl Into<String>) -> Self {
        self.target_override = Some(t.into());
        self
    }
    pub fn copy_impl_override(mut self, c: CopyImpl) -> Self {
        self.copy_impl_override = c;
        self
    }
    pub fn disable_disk_cache(mut self, on: bool) -> Self {
        self.set_flag(sys::FJ_RUNTIME_DISABLE_DISK_CACHE, on);
        self
    }
    /// Launch through the generic path only (no JIT-built launch thunks).
    pub fn disable_thunks(mut self, on: bool) -> Self {
        self.set_flag(sys::FJ_RUNTIME_DISABLE_THUNKS, on);
        self
    }
    /// Disk cache directory (default: $FLEETJIT_CACHE_DIR, else
    /// $XDG_CACHE_HOME/fleetjit, else ~/.cache/fleetjit).
    pub fn cache_dir(mut self, p: impl AsRef<Path>) -> Self {
        self.cache_dir = self.path(p.as_ref());
        self
    }
    /// Byte cap of the disk cache (0: 1 GiB).
    pub fn cache_max_bytes(mut self, n: u64) -> Self {
        self.cache_max_bytes = n;
        self
    }
    /// Since 1.1: load NVRTC inside [`Runtime::new`].
    pub fn preload_nvrtc(mut self, on: bool) -> Self {
        self.set_flag(sys::FJ_RUNTIME_PRELOAD_NVRTC, on);
        self
    }
    /// Since 1.1: the fleet's shared cache tier (redis:// or unix://).
    pub fn remote_cache_url(mut self, url: impl Into<String>) -> Self {
        self.remote_cache_url = Some(url.into());
        self
    }
    /// Since 1.1: the HMAC key that signs and checks remote entries.
    pub fn fleet_key(mut self, key: impl Into<String>) -> Self {
        self.fleet_key = Some(key.into());
        self
    }
    /// Since 1.1: device ordinals whose contexts [`Runtime::new`] opens
    /// (-1 = every device).
    pub fn preopen_devices(mut self, ordinals: &[i32]) -> Self {
        self.preopen_devices = ordinals.to_vec();
        self
    }
    /// Since 1.1: log lines at or below `level` go to `f` (from any thread,
    /// concurrently, also during the runtime's drop; it must not call back
    /// into fleetjit). `LogLevel::Off` means the library's default (warn).
    pub fn log(
        mut self,
        level: LogLevel,
        f: impl Fn(LogLevel, &str) + Send + Sync + 'static,
    ) -> Self {
        self.log = Some(std::sync::Arc::new(f));
        self.log_level = level;
        self
    }
    fn set_flag(&mut self, f: u32, on: bool) {
        if on {
            self.flags |= f
        } else {
            self.flags &= !f
        }
    }
}

/// A fleetjit runtime (`fj_runtime`): devices, the module cache, memory.
///
/// `Send + Sync`: see the crate documentation.
pub struct Runtime {
    raw: NonNull<sys::fj_runtime>,
    /// The log callback, boxed so its address is stable; dropped after
    /// fj_runtime_destroy (which may still call it).
    _log: Option<Box<std::sync::Arc<LogFn>>>,
}

// SAFETY: the header's convention 2: calls are safe from any thread; the
// only destroy is Drop (exclusive ownership).
unsafe impl Send for Runtime {}
unsafe impl Sync for Runtime {}

impl Runtime {
    /// Creates a runtime. No driver or no GPU is not an error: the runtime
    /// then reports 0 devices and still builds for named targets.
    pub fn new(options: &RuntimeOptions) -> Result<Runtime> {
        if let Some(p) = &options.bad_path {
            return Err(Error::new(
                Code::InvalidArgument,
                format!("path {} is not UTF-8", p.display()),
            ));
        }
        for (what, v) in [
            ("libcuda_path", &options.libcuda_path),
            ("libnvrtc_path", &options.libnvrtc_path),
            ("target_override", &options.target_override),
            ("cache_dir", &options.cache_dir),
            ("remote_cache_url", &options.remote_cache_url),
        ] {
            if let Some(v) = v {
                no_nul(what, v)?;
            }
        }
        let mut o = zeroed_struct!(sys::fj_runtime_options);
        o.libcuda_path = opt_str(&options.libcuda_path);
        o.libnvrtc_path = opt_str(&options.libnvrtc_path);
        o.target_override = opt_str(&options.target_override);
        o.copy_impl_override = options.copy_impl_override.raw();
        o.flags = options.flags;
        o.cache_dir = opt_str(&options.cache_dir);
        o.cache_max_bytes = options.cache_max_bytes;
        o.remote_cache_url = opt_str(&options.remote_cache_url);
        o.fleet_key = opt_str(&options.fleet_key);
        let log = options.log.clone().map(Box::new);
        if let Some(l) = &log {
            o.log_fn = Some(log_trampoline);
            o.log_user = &**l as *const std::sync::Arc<LogFn> as *mut c_void;
            o.log_level = options.log_level.raw() as i32;
        }
        if !options.preopen_devices.is_empty() {
            o.preopen_devices = options.preopen_devices.as_ptr();
            o.num_preopen_devices = options.preopen_devices.len();
        }
        let mut rt = ptr::null_mut();
        check(unsafe { sys::fj_runtime_create(&o, &mut rt) })?;
        NonNull::new(rt)
            .map(|raw| Runtime { raw, _log: log })
            .ok_or_else(|| Error::new(Code::Internal, "fj_runtime_create returned no runtime"))
    }

    pub fn as_raw(&self) -> *mut sys::fj_runtime {
        self.raw.as_ptr()
    }

    /// Why the CUDA driver is unavailable; `None` if it loaded.
    pub fn driver_error(&self) -> Option<String> {
        let s = unsafe { c_string(sys::fj_runtime_driver_error(self.raw.as_ptr())) };
        (!s.is_empty()).then_some(s)
    }

    /// Number of visible CUDA devices; 0 without a driver or GPU.
    pub fn device_count(&self) -> Result<usize> {
        let mut n = 0i32;
        check(unsafe { sys::fj_device_count(self.raw.as_ptr(), &mut n) })?;
        Ok(n.max(0) as usize)
    }

    /// Facts about device `ordinal` and the copy plan used on it.
    pub fn device_info(&self, ordinal: i32) -> Result<DeviceInfo> {
        let mut d = zeroed_struct!(sys::fj_device_info);
        check(unsafe { sys::fj_device_info_get(self.raw.as_ptr(), ordinal, &mut d) })?;
        Ok(DeviceInfo {
            name: fixed_string(&d.name),
            ordinal: d.ordinal,
            compute_capability: (d.cc_major, d.cc_minor),
            sm_count: d.sm_count,
            total_memory_bytes: d.total_memory_bytes,
            shared_memory_per_block: d.shared_memory_per_block,
            shared_memory_per_block_optin: d.shared_memory_per_block_optin,
            shared_memory_per_sm: d.shared_memory_per_sm,
            l2_cache_bytes: d.l2_cache_bytes,
            max_threads_per_block: d.max_threads_per_block,
            cluster_launch: d.cluster_launch != 0,
            driver_version: d.driver_version,
            plan: CopyPlan::from_raw(&d.plan),
        })
    }

    /// Builds a module, or fetches it from the cache.
    pub fn build(&self, options: &BuildOptions) -> Result<Module<'_>> {
        let b = options.to_raw()?;
        let mut m = ptr::null_mut();
        check(unsafe { sys::fj_module_build(self.raw.as_ptr(), &b.raw, &mut m) })?;
        Module::from_created(m, "fj_module_build returned no module")
    }

    /// Counters of the module cache.
    pub fn cache_stats(&self) -> Result<CacheStats> {
        let mut s = zeroed_struct!(sys::fj_cache_stats);
        check(unsafe { sys::fj_cache_stats_get(self.raw.as_ptr(), &mut s) })?;
        Ok(CacheStats::from_raw(&s))
    }

    /// The state of the cache's remote tier (since 1.1).
    pub fn cache_remote_state(&self) -> Result<RemoteState> {
        let mut s = zeroed_struct!(sys::fj_cache_stats);
        check(unsafe { sys::fj_cache_stats_get(self.raw.as_ptr(), &mut s) })?;
        Ok(RemoteState::from_raw(s.remote_state))
    }

    /// Empties the memory tier and deletes this cache's disk entries.
    pub fn clear_cache(&self) -> Result<()> {
        check(unsafe { sys::fj_cache_clear(self.raw.as_ptr()) })
    }

    /// A non-blocking stream on device `ordinal`.
    pub fn create_stream(&self, ordinal: i32) -> Result<Stream<'_>> {
        let mut s = ptr::null_mut();
        check(unsafe { sys::fj_stream_create(self.raw.as_ptr(), ordinal, &mut s) })?;
        Stream::from_created(s, "fj_stream_create returned no stream")
    }

    /// Allocates `len` elements of `T` on device `ordinal` (uninitialised).
    pub fn alloc<T: DeviceCopy>(&self, ordinal: i32, len: usize) -> Result<DeviceBuffer<'_, T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::new(Code::InvalidArgument, "allocation size overflows"))?;
        let mut addr = 0u64;
        check(unsafe { sys::fj_mem_alloc(self.raw.as_ptr(), ordinal, bytes as u64, &mut addr) })?;
        Ok(DeviceBuffer {
            rt: self,
            address: addr,
            len,
            _t: PhantomData,
        })
    }

    /// Allocates a device buffer holding a copy of `data`.
    pub fn upload<T: DeviceCopy>(&self, ordinal: i32, data: &[T]) -> Result<DeviceBuffer<'_, T>> {
        let mut b = self.alloc(ordinal, data.len())?;
        b.copy_from_host(data)?;
        Ok(b)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = check(unsafe { sys::fj_runtime_destroy(self.raw.as_ptr()) });
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime").field("raw", &self.raw).finish()
    }
}

/// Facts about a device (`fj_device_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub ordinal: i32,
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    pub total_memory_bytes: u64,
    pub shared_memory_per_block: i32,
    pub shared_memory_per_block_optin: i32,
    pub shared_memory_per_sm: i32,
    pub l2_cache_bytes: i32,
    pub max_threads_per_block: i32,
    pub cluster_launch: bool,
    pub driver_version: i32,
    pub plan: CopyPlan,
}

/// A plain Rust struct copying fields of a `fleetjit-sys` output struct,
/// each field named once: `from_raw` copies them by name.
macro_rules! c_struct_copy {
    ($(#[$m:meta])* $name:ident from $raw:ty { $($(#[$fm:meta])* $f:ident: $t:ty,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Default)]
        pub struct $name {
            $($(#[$fm])* pub $f: $t,)*
        }
        impl $name {
            fn from_raw(r: &$raw) -> $name {
                $name { $($f: r.$f,)* }
            }
        }
    };
}

c_struct_copy!(
    /// Module cache counters (`fj_cache_stats`).
    CacheStats from sys::fj_cache_stats {
        memory_hits: u64,
        disk_hits: u64,
        misses: u64,
        compiles: u64,
        compile_ms_total: f64,
        evictions: u64,
        /// Corrupt, foreign-owned or unsafe entries that were rebuilt.
        rejected_entries: u64,
        disk_entries: u64,
        disk_bytes: u64,
        /// Since 1.1: the remote tier (all 0 when it is off); its state is
        /// `fj_remote_state` (see [`Runtime::cache_remote_state`]).
        remote_hits: u64,
        remote_misses: u64,
        /// Failed or timed-out calls.
        remote_errors: u64,
        /// Refused: bad signature, key or size.
        remote_rejected: u64,
        /// Entries published.
        remote_writes: u64,
        /// Not published: queue full, Redis down.
        remote_write_drops: u64,
        remote_breaker_opens: u64,
    }
);

c_enum!(
    /// The remote tier's circuit breaker (`fj_remote_state`, since 1.1).
    RemoteState: sys::fj_remote_state {
        /// Not configured.
        Off = sys::FJ_REMOTE_OFF,
        /// Configured but off: no hiredis, no key, bad URL.
        Unavailable = sys::FJ_REMOTE_UNAVAILABLE,
        /// In use.
        Closed = sys::FJ_REMOTE_CLOSED,
        /// Failing: not asked until the cooldown ends.
        Open = sys::FJ_REMOTE_OPEN,
        /// The next call probes it.
        HalfOpen = sys::FJ_REMOTE_HALF_OPEN,
    }
);

// ------------------------------------------------------------------ module

/// What to build (`fj_build_options`).
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    source: String,
    name: String,
    nvrtc_options: Vec<String>,
    name_expressions: Vec<String>,
    target: String,
    device: i32,
    copy_impl: CopyImpl,
    output: Output,
    flags: u32,
    include_dirs: Vec<String>,
    bad_path: Option<PathBuf>,
}

/// An `fj_build_options` and the arrays its pointers reach (heap buffers:
/// moving this value keeps them valid), borrowed from a [`BuildOptions`].
pub(crate) struct RawBuildOptions<'a> {
    _nvrtc: Vec<sys::fj_str>,
    _names: Vec<sys::fj_str>,
    _includes: Vec<sys::fj_str>,
    pub(crate) raw: sys::fj_build_options,
    _options: PhantomData<&'a BuildOptions>,
}

/// The pointer a C array field takes: NULL for an empty slice.
pub(crate) fn ptr_or_null<T>(v: &[T]) -> *const T {
    if v.is_empty() {
        ptr::null()
    } else {
        v.as_ptr()
    }
}

/// `fj_str`s borrowing `items` (keep `items` alive while C reads them).
pub(crate) fn fj_strs(items: &[String]) -> Vec<sys::fj_str> {
    items.iter().map(|s| sys::fj_str::from_str(s)).collect()
}

fn str_array(items: &[String]) -> (Vec<sys::fj_str>, *const sys::fj_str, usize) {
    let v = fj_strs(items);
    let p = ptr_or_null(&v);
    let n = v.len();
    (v, p, n)
}

impl BuildOptions {
    pub(crate) fn to_raw(&self) -> Result<RawBuildOptions<'_>> {
        if let Some(p) = &self.bad_path {
            return Err(Error::new(
                Code::InvalidArgument,
                format!("include folder {} is not UTF-8", p.display()),
            ));
        }
        no_nul("the source", &self.source)?;
        no_nul("the build name", &self.name)?;
        no_nul("the target", &self.target)?;
        for (what, list) in [
            ("an NVRTC option", &self.nvrtc_options),
            ("a name expression", &self.name_expressions),
            ("an include folder", &self.include_dirs),
        ] {
            for item in list {
                no_nul(what, item)?;
            }
        }
        let (nvrtc, np, nn) = str_array(&self.nvrtc_options);
        let (names, ep, en) = str_array(&self.name_expressions);
        let (includes, ip, inn) = str_array(&self.include_dirs);
        let mut b = zeroed_struct!(sys::fj_build_options);
        b.source = sys::fj_str::from_str(&self.source);
        b.name = sys::fj_str::from_str(&self.name);
        (b.nvrtc_options, b.num_nvrtc_options) = (np, nn);
        (b.name_expressions, b.num_name_expressions) = (ep, en);
        (b.include_dirs, b.num_include_dirs) = (ip, inn);
        b.target = sys::fj_str::from_str(&self.target);
        b.device = self.device;
        b.copy_impl = self.copy_impl.raw();
        b.output = self.output.raw();
        b.flags = self.flags;
        Ok(RawBuildOptions {
            _nvrtc: nvrtc,
            _names: names,
            _includes: includes,
            raw: b,
            _options: PhantomData,
        })
    }
    /// Since 1.1: a folder searched for `#include`, after any `-I` of the
    /// NVRTC options and before CUDA's own headers (in the order added).
    /// The cache key covers the content of the headers read from it.
    pub fn include_dir(mut self, p: impl AsRef<Path>) -> Self {
        match path_str(p.as_ref()) {
            Ok(s) => self.include_dirs.push(s.to_string()),
            Err(_) => self.bad_path = Some(p.as_ref().to_path_buf()),
        }
        self
    }
    /// CUDA C++ source; `<fleetjit/copy.cuh>` is available to it.
    pub fn new(source: impl Into<String>) -> Self {
        BuildOptions {
            source: source.into(),
            ..Default::default()
        }
    }
    /// A name for logs and file stems, e.g. "saxpy.cu".
    pub fn name(mut self, n: impl Into<String>) -> Self {
        self.name = n.into();
        self
    }
    /// An extra NVRTC option, e.g. "-DTILE=64".
    pub fn nvrtc_option(mut self, o: impl Into<String>) -> Self {
        self.nvrtc_options.push(o.into());
        self
    }
    /// A kernel to instantiate and look up by its C++ name ("axpy<float>").
    pub fn name_expression(mut self, e: impl Into<String>) -> Self {
        self.name_expressions.push(e.into());
        self
    }
    /// "sm_XX[a]" (cubin) or "compute_XX[a]" (PTX); empty = the runtime's
    /// override, else the live device [`BuildOptions::device`].
    pub fn target(mut self, t: impl Into<String>) -> Self {
        self.target = t.into();
        self
    }
    pub fn device(mut self, ordinal: i32) -> Self {
        self.device = ordinal;
        self
    }
    pub fn copy_impl(mut self, c: CopyImpl) -> Self {
        self.copy_impl = c;
        self
    }
    pub fn output(mut self, o: Output) -> Self {
        self.output = o;
        self
    }
    /// Neither read nor write any cache tier.
    pub fn no_cache(mut self, on: bool) -> Self {
        if on {
            self.flags |= sys::FJ_BUILD_NO_CACHE
        } else {
            self.flags &= !sys::FJ_BUILD_NO_CACHE
        }
        self
    }
}

/// Facts about a built module (`fj_module_info`).
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleInfo {
    pub target: String,
    pub copy_impl: CopyImpl,
    /// `Cubin` or `Ptx`, never `Auto`.
    pub output: Output,
    pub cache_result: CacheResult,
    pub build_ms: f64,
    pub compile_ms: f64,
    pub image_bytes: u64,
}

/// A built module (`fj_module`), alive no longer than its runtime.
pub struct Module<'rt> {
    raw: NonNull<sys::fj_module>,
    _rt: PhantomData<&'rt Runtime>,
}

// SAFETY: as for Runtime (header conventions 2 and 4).
unsafe impl Send for Module<'_> {}
unsafe impl Sync for Module<'_> {}

impl<'rt> Module<'rt> {
    pub fn as_raw(&self) -> *mut sys::fj_module {
        self.raw.as_ptr()
    }

    /// Owns the module a creating call (build, link, load, take) wrote to
    /// `raw`; NULL without an error status is `Internal` with `missing`.
    pub(crate) fn from_created(raw: *mut sys::fj_module, missing: &'static str) -> Result<Self> {
        NonNull::new(raw)
            .map(|raw| Module {
                raw,
                _rt: PhantomData,
            })
            .ok_or_else(|| Error::new(Code::Internal, missing))
    }

    pub fn info(&self) -> Result<ModuleInfo> {
        let mut i = zeroed_struct!(sys::fj_module_info);
        check(unsafe { sys::fj_module_info_get(self.raw.as_ptr(), &mut i) })?;
        Ok(ModuleInfo {
            target: fixed_string(&i.target),
            copy_impl: CopyImpl::from_raw(i.copy_impl),
            output: Output::from_raw(i.output),
            cache_result: CacheResult::from_raw(i.cache_result),
            build_ms: i.build_ms,
            compile_ms: i.compile_ms,
            image_bytes: i.image_bytes,
        })
    }

    /// The built image (cubin or PTX text), borrowed from the module.
    pub fn image(&self) -> Result<&[u8]> {
        let mut data: *const c_void = ptr::null();
        let mut size = 0usize;
        check(unsafe { sys::fj_module_image(self.raw.as_ptr(), &mut data, &mut size) })?;
        if data.is_null() || size == 0 {
            return Ok(&[]);
        }
        // Valid while the module lives (header), i.e. while &self is.
        Ok(unsafe { std::slice::from_raw_parts(data as *const u8, size) })
    }

    /// Looks a kernel up by its extern "C" name or a name expression,
    /// loading the module on `device` if needed (this needs a GPU).
    pub fn kernel(&self, name: &str, device: i32) -> Result<Kernel<'_>> {
        no_nul("the kernel name", name)?;
        let mut k = ptr::null_mut();
        check(unsafe {
            sys::fj_module_get_kernel(
                self.raw.as_ptr(),
                sys::fj_str::from_str(name),
                device,
                &mut k,
            )
        })?;
        NonNull::new(k)
            .map(|raw| Kernel {
                raw,
                _module: PhantomData,
            })
            .ok_or_else(|| Error::new(Code::Internal, "fj_module_get_kernel returned no kernel"))
    }
}

impl Drop for Module<'_> {
    fn drop(&mut self) {
        let _ = check(unsafe { sys::fj_module_destroy(self.raw.as_ptr()) });
    }
}

impl fmt::Debug for Module<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module").field("raw", &self.raw).finish()
    }
}

// ------------------------------------------------------------------ kernel

/// Facts about a loaded kernel (`fj_kernel_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInfo {
    pub lowered_name: String,
    pub num_params: i32,
    pub param_bytes: u32,
    pub max_threads_per_block: i32,
    pub static_shared_bytes: i32,
    pub num_regs: i32,
    pub uses_thunk: bool,
}

/// A kernel of a module (`fj_kernel`). The C ABI has no destroy call for
/// kernels: they belong to their module, which this borrow expresses.
#[derive(Clone, Copy)]
pub struct Kernel<'m> {
    raw: NonNull<sys::fj_kernel>,
    _module: PhantomData<&'m Module<'m>>,
}

// SAFETY: as for Runtime (header conventions 2 and 4).
unsafe impl Send for Kernel<'_> {}
unsafe impl Sync for Kernel<'_> {}

impl<'m> Kernel<'m> {
    pub fn as_raw(&self) -> *mut sys::fj_kernel {
        self.raw.as_ptr()
    }

    pub fn info(&self) -> Result<KernelInfo> {
        let mut i = zeroed_struct!(sys::fj_kernel_info);
        check(unsafe { sys::fj_kernel_info_get(self.raw.as_ptr(), &mut i) })?;
        Ok(KernelInfo {
            lowered_name: fixed_string(&i.lowered_name),
            num_params: i.num_params,
            param_bytes: i.param_bytes,
            max_threads_per_block: i.max_threads_per_block,
            static_shared_bytes: i.static_shared_bytes,
            num_regs: i.num_regs,
            uses_thunk: i.uses_thunk != 0,
        })
    }

    /// Launches the kernel asynchronously. The library checks the argument
    /// count, sizes and kinds against the kernel's parameters and the
    /// configuration against the device before calling the driver.
    ///
    /// # Safety
    /// A kernel is arbitrary device code: it may read or write any memory
    /// its pointer arguments reach, including host-mapped memory. The caller
    /// must make sure the pointers are valid for what the kernel does, and
    /// that the device memory it uses stays allocated (and host memory of
    /// stream-ordered copies stays alive) until the launch's stream is
    /// synchronised.
    pub unsafe fn launch(&self, config: &LaunchConfig<'_>, args: &[Arg<'_>]) -> Result<()> {
        let c = config.to_raw();
        with_raw_args(args, |raw| {
            check(unsafe { sys::fj_launch(self.raw.as_ptr(), &c, ptr_or_null(raw), raw.len()) })
        })
    }
}

/// Calls `f` with `args` as `fj_arg`s. No allocation for up to
/// `INLINE_ARGS` arguments: they are packed on the stack, into an array of
/// which only the first `args.len()` entries are written (initialising all
/// 16, 384 bytes, cost more than packing 4 arguments); beyond that, a `Vec`.
#[inline]
pub(crate) fn with_raw_args<R>(
    args: &[Arg<'_>],
    f: impl FnOnce(&[sys::fj_arg]) -> Result<R>,
) -> Result<R> {
    const INLINE_ARGS: usize = 16;
    if args.len() > INLINE_ARGS {
        return f(&args.iter().map(|a| a.raw()).collect::<Result<Vec<_>>>()?);
    }
    let mut inline = [std::mem::MaybeUninit::<sys::fj_arg>::uninit(); INLINE_ARGS];
    for (slot, a) in inline.iter_mut().zip(args) {
        slot.write(a.raw()?);
    }
    // SAFETY: the first args.len() entries were written just above.
    f(unsafe { std::slice::from_raw_parts(inline.as_ptr().cast::<sys::fj_arg>(), args.len()) })
}

impl fmt::Debug for Kernel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel").field("raw", &self.raw).finish()
    }
}

/// A kernel argument (`fj_arg`).
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    /// IEEE half bits.
    F16(u16),
    /// bfloat16 bits.
    Bf16(u16),
    F32(f32),
    F64(f64),
    /// A device address.
    Pointer(u64),
    /// A struct by value.
    Bytes(&'a [u8]),
    /// A DLPack-compatible tensor argument, borrowed for the launch call.
    ///
    /// Its `box_` (the C field `box`) is outermost-first, like the tensor's
    /// `shape`: `box_[0]` is the slowest-varying dimension, and entries past
    /// `ndim` must be 0. Device code counts the other way
    /// (`fj::tensor::box(0)` is the innermost dimension). A box of another
    /// rank, or one larger than the tensor under `FJ_OOB_PROMISE_IN_BOUNDS`,
    /// is an `INVALID_ARGUMENT` error from the launch, naming the order.
    ///
    /// A [`TensorArg`] (from [`Tensor::arg`]) rather than a raw
    /// `fj_tensor_arg`, so that the argument cannot outlive its tensor.
    Tensor(&'a TensorArg<'a>),
    /// Since 1.3: a `cuFloatComplex` by value, `[real, imaginary]`.
    C64([f32; 2]),
    /// Since 1.3: a `cuDoubleComplex` by value, `[real, imaginary]`.
    C128(&'a [f64; 2]),
}

impl Arg<'_> {
    // Inlined into the launch loop: as a call it returned the Result
    // through memory, which the loop read back at once (a store-forwarding
    // stall: the hottest instructions of a launch under perf with the fake
    // driver).
    #[inline(always)]
    fn raw(self) -> Result<sys::fj_arg> {
        let mut a = sys::fj_arg {
            struct_size: std::mem::size_of::<sys::fj_arg>(),
            kind: 0,
            size: 0,
            v: sys::fj_arg_v { u64_: 0 },
        };
        match self {
            Arg::I8(x) => (a.kind, a.v.i8_) = (sys::FJ_ARG_I8, x),
            Arg::I16(x) => (a.kind, a.v.i16_) = (sys::FJ_ARG_I16, x),
            Arg::I32(x) => (a.kind, a.v.i32_) = (sys::FJ_ARG_I32, x),
            Arg::I64(x) => (a.kind, a.v.i64_) = (sys::FJ_ARG_I64, x),
            Arg::U8(x) => (a.kind, a.v.u8_) = (sys::FJ_ARG_U8, x),
            Arg::U16(x) => (a.kind, a.v.u16_) = (sys::FJ_ARG_U16, x),
            Arg::U32(x) => (a.kind, a.v.u32_) = (sys::FJ_ARG_U32, x),
            Arg::U64(x) => (a.kind, a.v.u64_) = (sys::FJ_ARG_U64, x),
            Arg::F16(x) => (a.kind, a.v.u16_) = (sys::FJ_ARG_F16, x),
            Arg::Bf16(x) => (a.kind, a.v.u16_) = (sys::FJ_ARG_BF16, x),
            Arg::F32(x) => (a.kind, a.v.f32_) = (sys::FJ_ARG_F32, x),
            Arg::F64(x) => (a.kind, a.v.f64_) = (sys::FJ_ARG_F64, x),
            Arg::Pointer(x) => (a.kind, a.v.pointer) = (sys::FJ_ARG_POINTER, x),
            Arg::Bytes(b) => {
                a.kind = sys::FJ_ARG_BYTES;
                a.size = u32::try_from(b.len()).map_err(|_| {
                    Error::new(
                        Code::InvalidArgument,
                        "a by-value argument larger than 4 GiB",
                    )
                })?;
                a.v.bytes = b.as_ptr() as *const c_void;
            }
            Arg::Tensor(t) => (a.kind, a.v.tensor) = (sys::FJ_ARG_TENSOR, t.as_raw() as *const _),
            Arg::C64(z) => {
                a.kind = sys::FJ_ARG_C64;
                a.v.u64_ = u64::from(z[0].to_bits()) | (u64::from(z[1].to_bits()) << 32);
            }
            Arg::C128(z) => (a.kind, a.v.bytes) = (sys::FJ_ARG_C128, z.as_ptr() as *const c_void),
        }
        Ok(a)
    }
}

macro_rules! arg_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Arg<'_> { fn from(x: $t) -> Self { Arg::$v(x) } }
    )*};
}
arg_from!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32,
          u64 => U64, f32 => F32, f64 => F64);

impl<'a> From<&'a TensorArg<'_>> for Arg<'a> {
    fn from(t: &'a TensorArg<'_>) -> Self {
        Arg::Tensor(t)
    }
}

impl<'a, T: DeviceCopy> From<&'a DeviceBuffer<'_, T>> for Arg<'a> {
    fn from(b: &'a DeviceBuffer<'_, T>) -> Self {
        Arg::Pointer(b.address())
    }
}

/// Grid, block, shared memory, cluster and stream of a launch
/// (`fj_launch_config`).
#[derive(Debug, Clone, Copy)]
pub struct LaunchConfig<'s> {
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: u32,
    cluster: [u32; 3],
    stream: Option<&'s Stream<'s>>,
}

impl<'s> LaunchConfig<'s> {
    /// `grid` blocks of `block` threads (0 entries count as 1).
    pub fn new(grid: [u32; 3], block: [u32; 3]) -> Self {
        LaunchConfig {
            grid,
            block,
            shared_bytes: 0,
            cluster: [0; 3],
            stream: None,
        }
    }
    /// Enough 1-D blocks of `block` threads to cover `n` threads.
    pub fn for_elements(n: usize, block: u32) -> Self {
        let blocks = n.div_ceil(block.max(1) as usize).max(1);
        Self::new(
            [u32::try_from(blocks).unwrap_or(u32::MAX), 1, 1],
            [block, 1, 1],
        )
    }
    /// Dynamic shared memory; above 48 KiB is opted in.
    pub fn shared_bytes(mut self, n: u32) -> Self {
        self.shared_bytes = n;
        self
    }
    pub fn cluster(mut self, c: [u32; 3]) -> Self {
        self.cluster = c;
        self
    }
    /// Launch on `stream` (default: the device's legacy default stream).
    pub fn stream(mut self, s: &'s Stream<'s>) -> Self {
        self.stream = Some(s);
        self
    }
    /// The `fj_launch_config` of `launch` and `launch_ex` (no flags, no L2
    /// window: `launch_ex` adds those).
    #[inline]
    pub(crate) fn to_raw(&self) -> sys::fj_launch_config {
        let mut c = zeroed_struct!(sys::fj_launch_config);
        c.grid = self.grid;
        c.block = self.block;
        c.shared_bytes = self.shared_bytes;
        c.cluster = self.cluster;
        c.stream = self.stream.map_or(ptr::null_mut(), |s| s.raw.as_ptr());
        c
    }
}

// ------------------------------------------------------------------ stream

/// A non-blocking CUDA stream (`fj_stream`), alive no longer than its
/// runtime.
pub struct Stream<'rt> {
    raw: NonNull<sys::fj_stream>,
    _rt: PhantomData<&'rt Runtime>,
}

// SAFETY: as for Runtime (header conventions 2 and 4).
unsafe impl Send for Stream<'_> {}
unsafe impl Sync for Stream<'_> {}

impl Stream<'_> {
    pub fn as_raw(&self) -> *mut sys::fj_stream {
        self.raw.as_ptr()
    }
    /// Owns the stream a creating call (create, create with priority,
    /// wrap) wrote to `raw`; NULL without an error status is `Internal`
    /// with `missing`.
    pub(crate) fn from_created(raw: *mut sys::fj_stream, missing: &'static str) -> Result<Self> {
        NonNull::new(raw)
            .map(|raw| Stream {
                raw,
                _rt: PhantomData,
            })
            .ok_or_else(|| Error::new(Code::Internal, missing))
    }
    /// Waits for all work on the stream; a kernel fault comes back here.
    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { sys::fj_stream_synchronize(self.raw.as_ptr()) })
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        let _ = check(unsafe { sys::fj_stream_destroy(self.raw.as_ptr()) });
    }
}

impl fmt::Debug for Stream<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream").field("raw", &self.raw).finish()
    }
}

// ------------------------------------------------------------------ memory

/// Types whose bytes may be copied to and from the device: no padding, no
/// pointers to host memory, every bit pattern valid.
///
/// # Safety
/// Implement only for `#[repr(C)]` plain data meeting those rules.
pub unsafe trait DeviceCopy: Copy + 'static {}
macro_rules! device_copy {
    ($($t:ty),*) => {$( unsafe impl DeviceCopy for $t {} )*};
}
device_copy!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, isize, usize);

/// Device memory from [`Runtime::alloc`], freed on drop. Copies through it
/// are synchronous (NULL stream): complete when the call returns.
pub struct DeviceBuffer<'rt, T: DeviceCopy> {
    rt: &'rt Runtime,
    address: u64,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: DeviceCopy> DeviceBuffer<'_, T> {
    /// The device address (for [`Arg::Pointer`]).
    pub fn address(&self) -> u64 {
        self.address
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    fn bytes(&self) -> u64 {
        (self.len * std::mem::size_of::<T>()) as u64
    }
    /// Refuses a copy whose other side (`what`: "the host slice", "the
    /// source buffer") has `n` elements instead of `len()`, saying both.
    fn same_len(&self, what: &str, n: usize) -> Result<()> {
        if n != self.len {
            return Err(Error::new(
                Code::InvalidArgument,
                format!(
                    "{what} has {n} elements, expected {}: the device buffer's length (a copy moves the whole buffer)",
                    self.len
                ),
            ));
        }
        Ok(())
    }
    /// Copies `src` (exactly `len()` elements) to the device.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        self.same_len("the host slice", src.len())?;
        check(unsafe {
            sys::fj_memcpy_htod(
                self.rt.as_raw(),
                self.address,
                src.as_ptr() as *const c_void,
                self.bytes(),
                ptr::null_mut(),
            )
        })
    }
    /// Copies the buffer into `dst` (exactly `len()` elements).
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        self.same_len("the host slice", dst.len())?;
        check(unsafe {
            sys::fj_memcpy_dtoh(
                self.rt.as_raw(),
                dst.as_mut_ptr() as *mut c_void,
                self.address,
                self.bytes(),
                ptr::null_mut(),
            )
        })
    }
    /// The buffer's contents.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = Vec::with_capacity(self.len);
        // Written fully by the copy before it is read; on error dropped
        // without reading.
        check(unsafe {
            sys::fj_memcpy_dtoh(
                self.rt.as_raw(),
                v.as_mut_ptr() as *mut c_void,
                self.address,
                self.bytes(),
                ptr::null_mut(),
            )
        })?;
        unsafe { v.set_len(self.len) };
        Ok(v)
    }
    /// Sets every byte of the buffer to `value`.
    pub fn fill_bytes(&mut self, value: u8) -> Result<()> {
        check(unsafe {
            sys::fj_memset_d8(
                self.rt.as_raw(),
                self.address,
                value,
                self.bytes(),
                ptr::null_mut(),
            )
        })
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<'_, T> {
    fn drop(&mut self) {
        let _ = check(unsafe { sys::fj_mem_free(self.rt.as_raw(), self.address) });
    }
}

impl<T: DeviceCopy> fmt::Debug for DeviceBuffer<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer({:#x}, {} x {})",
            self.address,
            self.len,
            std::any::type_name::<T>()
        )
    }
}

// Since 1.1: asynchronous builds (fj_module_build_async, fj_build_*).
mod build_async;
pub use build_async::{BuildFuture, PendingBuild};
// Since 1.1: images built elsewhere (fj_module_load), the cache flush,
// CUDA's header folders, wrapped streams, device-to-device copies.
mod images_streams_memory;
pub use images_streams_memory::{tensor_check, ImageKind, IncludeDir, LoadOptions, TensorCheck};
// Since 1.1: tensor copies, L2 prefetch and peer access.
mod copy;
pub use copy::{CopyDesc, Oob, PrefetchDesc, PrefetchMode, Tensor, TensorArg};
// --- module globals, kernel attributes, launch flags, priorities (1.3)
mod globals_and_attributes;
pub use globals_and_attributes::{GlobalInfo, KernelAttr, KernelAttributes, LaunchAttrs};
mod tuning; // fj_tune (1.3)
pub use tuning::{tune_status_name, TuneOptions, TuneResult, TuneRow, TuneShape};
// Device linking (since 1.3).
mod link;
pub use link::{LinkInput, LinkInputKind, LinkOptions};

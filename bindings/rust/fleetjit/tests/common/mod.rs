//! Helpers of the test binaries that run over the tests' fake CUDA driver
//! (libfj_fake_cuda.so, built with the library: memory, copies, streams and
//! launches that check their arguments, all on the CPU). Found through
//! $FJ_FAKE_CUDA, else next to the library in $FLEETJIT_LIB_DIR
//! (scripts/dev/test-bindings sets it), else the default build folder;
//! without it a test prints SKIP and why.
#![allow(dead_code)] // each test binary uses its own subset

use fleetjit::{BuildOptions, Code, Module, Runtime, RuntimeOptions};
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};

pub fn fake_driver() -> Option<PathBuf> {
    let mut paths: Vec<PathBuf> = std::env::var_os("FJ_FAKE_CUDA")
        .into_iter()
        .map(PathBuf::from)
        .collect();
    if let Some(d) = std::env::var_os("FLEETJIT_LIB_DIR") {
        paths.push(PathBuf::from(d).join("libfj_fake_cuda.so"));
    }
    paths.push(PathBuf::from("../../../build/lib/libfj_fake_cuda.so"));
    paths.into_iter().find(|p| p.is_file())
}

/// A runtime over the fake driver with a device, or None after printing
/// SKIP and why.
pub fn fake_runtime(test: &str, dir: &Path) -> Option<Runtime> {
    let Some(drv) = fake_driver() else {
        println!("SKIP {test}: no libfj_fake_cuda.so (set FJ_FAKE_CUDA or FLEETJIT_LIB_DIR to the built library's folder)");
        return None;
    };
    let rt =
        Runtime::new(&RuntimeOptions::new().libcuda_path(&drv).cache_dir(dir)).expect("runtime");
    if rt.device_count().unwrap_or(0) == 0 {
        println!(
            "SKIP {test}: the fake driver {} reports no device ({}); FLEETJIT_LIBCUDA in the environment wins over libcuda_path",
            drv.display(),
            rt.driver_error().unwrap_or_default()
        );
        return None;
    }
    Some(rt)
}

/// Runs `body` on a runtime over the fake driver whose cache lives in a
/// folder of its own, removed afterwards (the runtime is dropped first);
/// without a fake device prints SKIP and why instead.
pub fn with_fake_runtime(test: &str, body: impl FnOnce(&Runtime)) {
    let dir = std::env::temp_dir().join(format!("fleetjit-rust-{}-{test}", std::process::id()));
    if let Some(rt) = fake_runtime(test, &dir) {
        body(&rt);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rt.build(options)`, or None after printing SKIP when NVRTC is missing.
pub fn build_or_skip<'rt>(
    test: &str,
    rt: &'rt Runtime,
    options: &BuildOptions,
) -> Option<Module<'rt>> {
    match rt.build(options) {
        Ok(m) => Some(m),
        Err(e) if e.code() == Code::Unavailable => {
            println!("SKIP {test}: no NVRTC ({e})");
            None
        }
        Err(e) => panic!("{test}: build: {e}"),
    }
}

extern "C" {
    fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}

/// Calls of the driver entry point `name` ("cuStreamSynchronize") the fake
/// driver has seen so far (`fjfake_calls`, all runtimes of the process):
/// the copy of the library a runtime over [`fake_driver`] loaded
/// (RTLD_NOLOAD: none is loaded here). None when no runtime loaded it.
pub fn fake_calls(name: &str) -> Option<u64> {
    const RTLD_NOW: c_int = 2;
    const RTLD_NOLOAD: c_int = 4;
    let path = CString::new(fake_driver()?.to_str()?).ok()?;
    let name = CString::new(name).ok()?;
    // SAFETY: dlopen/dlsym with NUL-terminated strings; the symbol is the
    // fake driver's `uint64_t fjfake_calls(const char*)`.
    unsafe {
        let h = dlopen(path.as_ptr(), RTLD_NOW | RTLD_NOLOAD);
        if h.is_null() {
            return None;
        }
        let f = dlsym(h, c"fjfake_calls".as_ptr());
        if f.is_null() {
            return None;
        }
        let calls: unsafe extern "C" fn(*const c_char) -> u64 = std::mem::transmute(f);
        Some(calls(name.as_ptr()))
    }
}

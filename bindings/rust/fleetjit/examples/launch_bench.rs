//! Launch cost through the Rust binding, next to a raw `cuLaunchKernel` of
//! the same kernel called from Rust (libcuda dlopen'ed), in the same run:
//! host time per launch of an empty kernel with 4 scalar/pointer
//! arguments, median of interleaved batches (so drift hits both), and the
//! heap allocations one `Kernel::launch` makes (a counting allocator).
//! Issue 21's goal: the binding at most 1.05x raw.
//!
//!   cargo run --release --offline --example launch_bench [-- BATCHES]
//!
//! Without a GPU it says so and exits 0 (nothing to measure). The raw side
//! dlopens the driver the runtime loads: `FLEETJIT_LIBCUDA` when set, so
//! with the tests' fake driver (`libfj_fake_cuda.so`, whose launches check
//! their arguments and do nothing) both sides call the same fake
//! `cuLaunchKernel` and the difference is the binding's and the library's
//! own host cost.
use fleetjit::{Arg, BuildOptions, LaunchConfig, Runtime, RuntimeOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

const SOURCE: &str =
    r#"extern "C" __global__ void empty_args(float* a, const float* b, float c, int n) {}"#;
const BATCH: usize = 64;
const WARMUP: usize = 50;

#[link(name = "dl")]
extern "C" {
    fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
    fn dlerror() -> *const c_char;
}
const RTLD_NOW: c_int = 2;

type CuResult = c_int;
type CuInit = unsafe extern "C" fn(c_uint) -> CuResult;
type CuDeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> CuResult;
type CuPrimaryCtxRetain = unsafe extern "C" fn(*mut *mut c_void, c_int) -> CuResult;
type CuCtxSetCurrent = unsafe extern "C" fn(*mut c_void) -> CuResult;
type CuCtxSynchronize = unsafe extern "C" fn() -> CuResult;
type CuModuleLoadData = unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CuResult;
type CuModuleGetFunction =
    unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> CuResult;
type CuGetProcAddress =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CuResult;
type CuLaunchKernel = unsafe extern "C" fn(
    *mut c_void,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    *mut c_void,
    *mut *mut c_void,
    *mut *mut c_void,
) -> CuResult;

struct Driver {
    sync: CuCtxSynchronize,
    launch: CuLaunchKernel,
    func: *mut c_void,
}

/// An entry point of the driver: dlsym, or else `cuGetProcAddress_v2`
/// (the fake driver exports only that and `cuInit`).
fn sym<T>(lib: *mut c_void, name: &str) -> T {
    let c = CString::new(name).unwrap();
    let mut p = unsafe { dlsym(lib, c.as_ptr()) };
    if p.is_null() {
        let get = unsafe { dlsym(lib, c"cuGetProcAddress_v2".as_ptr()) };
        if !get.is_null() {
            let get: CuGetProcAddress = unsafe { std::mem::transmute(get) };
            if unsafe { get(c.as_ptr(), &mut p, 12000, 0, std::ptr::null_mut()) } != 0 {
                p = std::ptr::null_mut();
            }
        }
    }
    assert!(!p.is_null(), "the CUDA driver lacks {name}");
    unsafe { std::mem::transmute_copy(&p) }
}

fn check(what: &str, r: CuResult) {
    if r != 0 {
        eprintln!("launch_bench: {what} returned CUDA error {r}");
        std::process::exit(1);
    }
}

/// Loads `image` (the cubin fleetjit built) into GPU 0's primary context,
/// the one fleetjit uses, and looks the kernel up.
fn raw_driver(image: &[u8], kernel: &str) -> Driver {
    let path = std::env::var("FLEETJIT_LIBCUDA").unwrap_or_else(|_| "libcuda.so.1".into());
    let lib = unsafe { dlopen(CString::new(path.as_str()).unwrap().as_ptr(), RTLD_NOW) };
    if lib.is_null() {
        let why = unsafe { std::ffi::CStr::from_ptr(dlerror()) };
        eprintln!("launch_bench: dlopen({path}): {why:?}");
        std::process::exit(1);
    }
    unsafe {
        check("cuInit", sym::<CuInit>(lib, "cuInit")(0));
        let mut dev = 0;
        check(
            "cuDeviceGet",
            sym::<CuDeviceGet>(lib, "cuDeviceGet")(&mut dev, 0),
        );
        let mut ctx = std::ptr::null_mut();
        check(
            "cuDevicePrimaryCtxRetain",
            sym::<CuPrimaryCtxRetain>(lib, "cuDevicePrimaryCtxRetain")(&mut ctx, dev),
        );
        check(
            "cuCtxSetCurrent",
            sym::<CuCtxSetCurrent>(lib, "cuCtxSetCurrent")(ctx),
        );
        let mut module = std::ptr::null_mut();
        // A cubin needs no NUL; copy it anyway so PTX would work too.
        let mut img = image.to_vec();
        img.push(0);
        check(
            "cuModuleLoadData",
            sym::<CuModuleLoadData>(lib, "cuModuleLoadData")(
                &mut module,
                img.as_ptr() as *const c_void,
            ),
        );
        let mut func = std::ptr::null_mut();
        let name = CString::new(kernel).unwrap();
        check(
            "cuModuleGetFunction",
            sym::<CuModuleGetFunction>(lib, "cuModuleGetFunction")(
                &mut func,
                module,
                name.as_ptr(),
            ),
        );
        Driver {
            sync: sym(lib, "cuCtxSynchronize"),
            // The legacy-default-stream entry, as fleetjit's NULL stream.
            launch: sym(lib, "cuLaunchKernel"),
            func,
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    let rt = match Runtime::new(&RuntimeOptions::new()) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("launch_bench: no runtime: {e}");
            std::process::exit(1);
        }
    };
    if rt.device_count().unwrap_or(0) == 0 {
        println!(
            "launch_bench (Rust): no GPU, nothing to measure ({})",
            rt.driver_error()
                .unwrap_or_else(|| "the driver reports 0 devices".into())
        );
        return;
    }
    let module = rt
        .build(&BuildOptions::new(SOURCE).name("launch_bench.cu"))
        .expect("build");
    let kernel = module.kernel("empty_args", 0).expect("kernel");
    let a = rt.alloc::<f32>(0, 256).expect("alloc");
    let b = rt.alloc::<f32>(0, 256).expect("alloc");
    let drv = raw_driver(module.image().expect("image"), "empty_args");
    let cfg = LaunchConfig::new([1, 1, 1], [32, 1, 1]);
    let args = [
        Arg::Pointer(a.address()),
        Arg::Pointer(b.address()),
        Arg::F32(2.0),
        Arg::I32(256),
    ];
    // Raw: the same values, as cuLaunchKernel's void** params.
    let (mut pa, mut pb, mut pc, mut pn) = (a.address(), b.address(), 2.0f32, 256i32);
    let mut params: [*mut c_void; 4] = [
        &mut pa as *mut u64 as *mut c_void,
        &mut pb as *mut u64 as *mut c_void,
        &mut pc as *mut f32 as *mut c_void,
        &mut pn as *mut i32 as *mut c_void,
    ];
    let fj_batch = || -> f64 {
        let t = Instant::now();
        for _ in 0..BATCH {
            unsafe { kernel.launch(&cfg, &args) }.expect("launch");
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / BATCH as f64;
        check("cuCtxSynchronize", unsafe { (drv.sync)() });
        us
    };
    let mut raw_batch = || -> f64 {
        let t = Instant::now();
        for _ in 0..BATCH {
            let r = unsafe {
                (drv.launch)(
                    drv.func,
                    1,
                    1,
                    1,
                    32,
                    1,
                    1,
                    0,
                    std::ptr::null_mut(),
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            };
            if r != 0 {
                check("cuLaunchKernel", r);
            }
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / BATCH as f64;
        check("cuCtxSynchronize", unsafe { (drv.sync)() });
        us
    };
    for _ in 0..WARMUP {
        fj_batch();
        raw_batch();
    }
    // Heap allocations of one launch (the counting allocator).
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..1000 {
        unsafe { kernel.launch(&cfg, &args) }.expect("launch");
    }
    let allocs = (ALLOCS.load(Ordering::Relaxed) - before) as f64 / 1000.0;
    check("cuCtxSynchronize", unsafe { (drv.sync)() });
    let (mut fj, mut raw) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        fj.push(fj_batch());
        raw.push(raw_batch());
    }
    let (f, r) = (median(&mut fj), median(&mut raw));
    let info = rt.device_info(0).expect("device info");
    println!(
        "launch_bench (Rust) on {} (driver {}): host time per launch of an empty kernel, \
         4 scalar/pointer args, median of {rounds} interleaved batches of {BATCH}",
        info.name, info.driver_version
    );
    println!("  raw cuLaunchKernel from Rust      {r:8.3} us   (anchor)");
    println!(
        "  fleetjit::Kernel::launch          {f:8.3} us   {:.3}x raw (goal <= 1.05x)",
        f / r
    );
    println!("  heap allocations per launch       {allocs:8.3}");
    println!(
        "  thunk path: {}",
        kernel.info().map(|i| i.uses_thunk).unwrap_or(false)
    );
}

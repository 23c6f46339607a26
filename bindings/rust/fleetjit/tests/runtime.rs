//! Integration tests over the real libfleetjit.so.1. They pass on a machine
//! without a GPU (0 devices): builds go to the named target sm_90. The GPU
//! test skips, printing why, when the runtime reports no device.
use fleetjit::{
    copy_plan, sys, Arg, BuildOptions, CacheResult, Code, CopyImpl, LaunchConfig, Output, Runtime,
    RuntimeOptions,
};
use std::path::PathBuf;

// The corpus kernel (examples/saxpy.cu: saxpy and the axpy<T> template),
// compiled in, so the staged test binary needs no source tree.
const SAXPY: &str = include_str!("../../../../examples/saxpy.cu");

/// A runtime with its own disk cache directory, removed on drop.
struct TestRuntime {
    rt: Option<Runtime>,
    dir: PathBuf,
}

impl TestRuntime {
    fn new(test: &str) -> TestRuntime {
        let dir = std::env::temp_dir().join(format!("fleetjit-rust-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let rt = Runtime::new(&RuntimeOptions::new().cache_dir(&dir)).expect("runtime");
        TestRuntime { rt: Some(rt), dir }
    }
}
impl std::ops::Deref for TestRuntime {
    type Target = Runtime;
    fn deref(&self) -> &Runtime {
        self.rt.as_ref().unwrap()
    }
}
impl Drop for TestRuntime {
    fn drop(&mut self) {
        self.rt.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn version_major_matches_loaded_library() {
    let v = fleetjit::version();
    assert_eq!(v.major, fleetjit::EXPECTED_MAJOR, "loaded libfleetjit {v}");
    assert_eq!(fleetjit::check_version().unwrap(), v);
    println!(
        "libfleetjit {v}, bindings expect {}.{}",
        fleetjit::EXPECTED_MAJOR,
        fleetjit::EXPECTED_MINOR
    );
}

#[test]
fn device_report() {
    let rt = TestRuntime::new("devices");
    let n = rt.device_count().unwrap();
    println!(
        "{n} device(s); driver: {}",
        rt.driver_error().as_deref().unwrap_or("loaded")
    );
    if n == 0 {
        // No GPU is not an error at create time, but device calls say why.
        let e = rt.device_info(0).unwrap_err();
        assert!(
            matches!(e.code(), Code::Unavailable | Code::NotFound),
            "{e}"
        );
        assert!(!e.message().is_empty());
    } else {
        for i in 0..n as i32 {
            let d = rt.device_info(i).unwrap();
            assert_eq!(d.ordinal, i);
            assert!(d.compute_capability.0 >= 5 && d.sm_count > 0, "{d:?}");
            assert_ne!(d.plan.copy_impl, CopyImpl::Auto);
            println!(
                "device {i}: {} sm_{}{} plan {}",
                d.name,
                d.compute_capability.0,
                d.compute_capability.1,
                d.plan.copy_impl.name()
            );
        }
        let e = rt.device_info(n as i32 + 7).unwrap_err();
        assert!(
            matches!(e.code(), Code::NotFound | Code::InvalidArgument),
            "{e}"
        );
    }
}

#[test]
fn build_for_named_target_without_gpu() {
    let rt = TestRuntime::new("sm90");
    let m = rt
        .build(&BuildOptions::new(SAXPY).name("saxpy.cu").target("sm_90"))
        .unwrap();
    let info = m.info().unwrap();
    assert_eq!(info.target, "sm_90");
    assert_eq!(info.output, Output::Cubin);
    assert_ne!(info.copy_impl, CopyImpl::Auto);
    assert_eq!(info.cache_result, CacheResult::Compiled);
    assert!(info.build_ms > 0.0);
    let image = m.image().unwrap();
    assert_eq!(image.len() as u64, info.image_bytes);
    assert_eq!(&image[..4], b"\x7fELF", "a cubin is an ELF file");
    println!(
        "sm_90 cubin: {} bytes, {:?}, built in {:.1} ms",
        image.len(),
        info.copy_impl,
        info.build_ms
    );

    // PTX for a virtual target names the kernel and the target in text.
    let p = rt
        .build(
            &BuildOptions::new(SAXPY)
                .name("saxpy.cu")
                .target("compute_90")
                .name_expression("axpy<float>"),
        )
        .unwrap();
    assert_eq!(p.info().unwrap().output, Output::Ptx);
    let ptx = String::from_utf8_lossy(p.image().unwrap()).into_owned();
    assert!(ptx.contains(".entry saxpy"), "{ptx}");
    assert!(ptx.contains(".target sm_90"), "{ptx}");

    // Loading a kernel needs a device.
    if rt.device_count().unwrap() == 0 {
        let e = m.kernel("saxpy", 0).unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "{e}");
    }
}

#[test]
fn cache_statistics() {
    let rt = TestRuntime::new("cache");
    let opts = BuildOptions::new(SAXPY).name("saxpy.cu").target("sm_90");
    let before = rt.cache_stats().unwrap();
    assert_eq!(before.compiles, 0);
    let a = rt.build(&opts).unwrap();
    assert_eq!(a.info().unwrap().cache_result, CacheResult::Compiled);
    let b = rt.build(&opts).unwrap();
    assert_eq!(b.info().unwrap().cache_result, CacheResult::MemoryHit);
    let s = rt.cache_stats().unwrap();
    assert_eq!(s.compiles, 1, "{s:?}");
    assert!(s.memory_hits >= 1, "{s:?}");
    assert!(s.misses >= 1 && s.compile_ms_total > 0.0, "{s:?}");
    // The cache neither read nor written with no_cache.
    let c = rt.build(&opts.clone().no_cache(true)).unwrap();
    assert_eq!(c.info().unwrap().cache_result, CacheResult::Compiled);
    rt.clear_cache().unwrap();
    let d = rt.build(&opts).unwrap();
    assert_ne!(d.info().unwrap().cache_result, CacheResult::MemoryHit);
    println!("{:?}", rt.cache_stats().unwrap());
}

#[test]
fn disk_cache_outlives_the_runtime() {
    // Disk entries are written in the background and flushed when the
    // runtime is destroyed; a later runtime on the same directory reads them.
    let dir = std::env::temp_dir().join(format!("fleetjit-rust-{}-disk", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = BuildOptions::new(SAXPY).name("saxpy.cu").target("sm_90");
    let first = {
        let rt = Runtime::new(&RuntimeOptions::new().cache_dir(&dir)).unwrap();
        let m = rt.build(&opts).unwrap();
        assert_eq!(m.info().unwrap().cache_result, CacheResult::Compiled);
        let image = m.image().unwrap().to_vec();
        image
    };
    let rt = Runtime::new(&RuntimeOptions::new().cache_dir(&dir)).unwrap();
    let m = rt.build(&opts).unwrap();
    assert_eq!(m.info().unwrap().cache_result, CacheResult::DiskHit);
    assert_eq!(m.image().unwrap(), &first[..]);
    let s = rt.cache_stats().unwrap();
    assert_eq!((s.disk_hits, s.compiles), (1, 0), "{s:?}");
    drop(m);
    drop(rt);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_error_carries_build_log() {
    let rt = TestRuntime::new("builderr");
    let e = rt
        .build(
            &BuildOptions::new("__global__ void broken() { undeclared_thing; }")
                .name("broken.cu")
                .target("sm_90"),
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::BuildError);
    let log = e.build_log().expect("a build error carries the NVRTC log");
    assert!(log.contains("undeclared_thing"), "{log}");
    assert!(log.contains("broken.cu"), "{log}");
    assert_eq!(e.detail("target"), Some("sm_90"));
    assert!(e.to_string().contains("BUILD_ERROR"), "{e}");
}

#[test]
fn bad_input_is_an_error_not_a_crash() {
    let rt = TestRuntime::new("badinput");
    let bad_target = rt
        .build(&BuildOptions::new(SAXPY).target("sm_xx"))
        .unwrap_err();
    assert_eq!(bad_target.code(), Code::InvalidArgument, "{bad_target}");
    assert!(bad_target.message().contains("sm_xx"));

    assert_eq!(
        copy_plan("not_a_target", CopyImpl::Auto)
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    // Forcing TMA on an sm_80 is a precondition failure.
    assert_eq!(
        copy_plan("sm_80", CopyImpl::Tma).unwrap_err().code(),
        Code::FailedPrecondition
    );
    assert_eq!(
        copy_plan("sm_90", CopyImpl::Other(42)).unwrap_err().code(),
        Code::InvalidArgument
    );
    let plan = copy_plan("sm_90", CopyImpl::Auto).unwrap();
    assert_eq!(plan.target, "sm_90");
    assert_eq!(plan.support.len(), sys::FJ_FEATURE_COUNT as usize);

    let enum_out_of_range = rt
        .build(
            &BuildOptions::new(SAXPY)
                .target("sm_90")
                .copy_impl(CopyImpl::Other(99)),
        )
        .unwrap_err();
    assert_eq!(enum_out_of_range.code(), Code::InvalidArgument);

    // A forged handle through the raw layer: checked, not dereferenced.
    unsafe {
        let st = sys::fj_module_destroy(0x1234 as *mut sys::fj_module);
        assert!(!st.is_null());
        assert_eq!(sys::fj_status_code(st), sys::FJ_INVALID_ARGUMENT);
        sys::fj_status_free(st);
        // NULL is accepted by destroy calls.
        assert!(sys::fj_module_destroy(std::ptr::null_mut()).is_null());
    }
    // Device calls without a device.
    if rt.device_count().unwrap() == 0 {
        assert_eq!(
            rt.alloc::<f32>(0, 16).unwrap_err().code(),
            Code::Unavailable
        );
        assert_eq!(rt.create_stream(0).unwrap_err().code(), Code::Unavailable);
    } else {
        assert!(rt.alloc::<f32>(0, usize::MAX / 2).is_err());
        let mut buf = rt.alloc::<f32>(0, 4).unwrap();
        assert_eq!(
            buf.copy_from_host(&[1.0; 3]).unwrap_err().code(),
            Code::InvalidArgument
        );
    }
}

#[test]
fn handles_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Runtime>();
    both::<fleetjit::Module<'static>>();
    both::<fleetjit::Kernel<'static>>();
    both::<fleetjit::Stream<'static>>();
    both::<fleetjit::Error>();
    // One runtime shared by threads, each building.
    let rt = TestRuntime::new("threads");
    std::thread::scope(|s| {
        for i in 0..2 {
            let rt = &*rt;
            s.spawn(move || {
                let src = format!("extern \"C\" __global__ void k{i}(int* p) {{ *p = {i}; }}");
                let m = rt.build(&BuildOptions::new(src).target("sm_90")).unwrap();
                assert!(!m.image().unwrap().is_empty());
            });
        }
    });
}

/// xorshift64*: deterministic "random" data without external crates.
fn random_floats(n: usize, mut seed: u64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            let r = seed.wrapping_mul(0x2545_f491_4f6c_dd1d);
            (r >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn gpu_saxpy_build_launch_verify() {
    let rt = TestRuntime::new("gpu");
    let n_dev = rt.device_count().unwrap();
    if n_dev == 0 {
        println!(
            "SKIP gpu_saxpy_build_launch_verify: the runtime reports 0 CUDA devices ({})",
            rt.driver_error().unwrap_or_default()
        );
        return;
    }
    let n = 1 << 20;
    let a = 2.5f32;
    let x = random_floats(n, 0x9e37_79b9_7f4a_7c15);
    let y = random_floats(n, 0x1234_5678_9abc_def1);
    let expect: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a * x + y).collect();
    let close = |got: &[f32]| {
        let bad = got
            .iter()
            .zip(&expect)
            .position(|(g, e)| (g - e).abs() > 1e-5 * (1.0 + e.abs()));
        assert!(
            bad.is_none(),
            "element {} differs: {} vs {}",
            bad.unwrap(),
            got[bad.unwrap()],
            expect[bad.unwrap()]
        );
    };

    // Built for the live device (empty target), default stream.
    let m = rt
        .build(
            &BuildOptions::new(SAXPY)
                .name("saxpy.cu")
                .name_expression("axpy<float>"),
        )
        .unwrap();
    println!(
        "built for {} ({:?})",
        m.info().unwrap().target,
        m.info().unwrap().copy_impl
    );
    let dx = rt.upload(0, &x).unwrap();
    let mut dy = rt.upload(0, &y).unwrap();
    let k = m.kernel("saxpy", 0).unwrap();
    let ki = k.info().unwrap();
    assert_eq!(ki.num_params, 4, "{ki:?}");
    let args = [
        Arg::from(&dy),
        Arg::from(&dx),
        Arg::F32(a),
        Arg::I32(n as i32),
    ];
    unsafe {
        k.launch(&LaunchConfig::for_elements(n, 256), &args)
            .unwrap()
    };
    close(&dy.to_vec().unwrap()); // synchronous copy orders after the launch

    // The template instantiation, on a stream.
    dy.copy_from_host(&y).unwrap();
    let s = rt.create_stream(0).unwrap();
    let kt = m.kernel("axpy<float>", 0).unwrap();
    let args = [
        Arg::from(&dy),
        Arg::from(&dx),
        Arg::F32(a),
        Arg::I32(n as i32),
    ];
    unsafe {
        kt.launch(
            &LaunchConfig::new([132, 1, 1], [256, 1, 1]).stream(&s),
            &args,
        )
        .unwrap()
    };
    s.synchronize().unwrap();
    let mut got = vec![0f32; n];
    dy.copy_to_host(&mut got).unwrap();
    close(&got);

    // A mismatched argument list is refused before the driver is called.
    let e = unsafe { k.launch(&LaunchConfig::for_elements(n, 256), &[Arg::F32(a)]) }.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    println!("saxpy on {n} floats verified against the host");
}

#[test]
fn codes_convert_both_ways_and_keep_unknown_values() {
    // Every code the bindings name maps to its constant and back, and the
    // library names it as the Rust variant does.
    let named = [
        (Code::InvalidArgument, sys::FJ_INVALID_ARGUMENT, "INVALID_ARGUMENT"),
        (Code::NotFound, sys::FJ_NOT_FOUND, "NOT_FOUND"),
        (Code::Unavailable, sys::FJ_UNAVAILABLE, "UNAVAILABLE"),
        (Code::FailedPrecondition, sys::FJ_FAILED_PRECONDITION, "FAILED_PRECONDITION"),
        (Code::BuildError, sys::FJ_BUILD_ERROR, "BUILD_ERROR"),
        (Code::CudaError, sys::FJ_CUDA_ERROR, "CUDA_ERROR"),
        (Code::ResourceExhausted, sys::FJ_RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"),
        (Code::OutOfRange, sys::FJ_OUT_OF_RANGE, "OUT_OF_RANGE"),
        (Code::Internal, sys::FJ_INTERNAL, "INTERNAL"),
        (Code::DeadlineExceeded, sys::FJ_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"),
    ];
    for (code, raw, name) in named {
        assert_eq!(code.raw(), raw, "{name}");
        assert_eq!(Code::from_raw(raw), code, "{name}");
        assert_eq!(code.name(), name);
    }
    // A newer library's code survives the round trip.
    for raw in [sys::FJ_CODE_LAST + 1, 77, u32::MAX] {
        assert_eq!(Code::from_raw(raw), Code::Unknown(raw));
        assert_eq!(Code::Unknown(raw).raw(), raw);
        assert_eq!(Code::Unknown(raw).name(), "UNKNOWN");
    }
}

// --- ABI 1.3 on a machine without a GPU: the build log and the device
// entries' errors.
#[test]
fn build_log_keeps_warnings_and_device_entries_say_why() {
    let rt = TestRuntime::new("abi13");
    let salt = std::process::id();
    let src = format!(
        "__device__ int counter;\nextern \"C\" __global__ void k(int* o) {{\n  int unused_{salt};\n  counter = 1;\n}}\n"
    );
    let m = match rt.build(
        &BuildOptions::new(src.clone())
            .name("warn.cu")
            .target("sm_90"),
    ) {
        Ok(m) => m,
        Err(e) if e.code() == Code::Unavailable => {
            println!("skipped: no NVRTC: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let log = m.build_log().expect("log");
    assert!(
        log.contains("warning") && log.contains(&format!("unused_{salt}")),
        "{log}"
    );
    let again = rt
        .build(&BuildOptions::new(src).name("warn.cu").target("sm_90"))
        .unwrap();
    assert_eq!(again.build_log().unwrap(), log);
    if rt.device_count().unwrap() > 0 {
        return;
    }
    assert_eq!(
        m.global("counter", 0).unwrap_err().code(),
        Code::Unavailable
    );
    assert_eq!(
        rt.stream_priority_range(0).unwrap_err().code(),
        Code::Unavailable
    );
    assert_eq!(
        rt.create_stream_with_priority(0, 0).unwrap_err().code(),
        Code::Unavailable
    );
    assert_eq!(
        rt.set_persisting_l2(0, 1 << 20).unwrap_err().code(),
        Code::Unavailable
    );
}

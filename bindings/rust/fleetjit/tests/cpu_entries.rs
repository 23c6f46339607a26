//! The 1.1 entries through the safe crate, on the CPU (builds for the named
//! target sm_90; device calls return UNAVAILABLE without a GPU, checked as
//! such), and issue 21's bad-input table: every bad call is an `Err` with
//! the library's message, never a panic or a crash, and the runtime keeps
//! working after it.
use fleetjit::{
    sys, BuildOptions, Code, CopyDesc, CopyImpl, ImageKind, LinkInput, LinkOptions, LoadOptions,
    LogLevel, Oob, Output, PrefetchDesc, PrefetchMode, Runtime, RuntimeOptions, Tensor,
};
use std::future::{Future, IntoFuture};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SAXPY: &str = include_str!("../../../../examples/saxpy.cu");

fn temp_dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fleetjit-rust11-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn runtime(test: &str) -> (Runtime, PathBuf) {
    let dir = temp_dir(test);
    let rt = Runtime::new(&RuntimeOptions::new().cache_dir(dir.join("cache"))).expect("runtime");
    (rt, dir)
}

/// A fresh number per run, so a build cannot come from an earlier run.
fn fresh() -> u64 {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    t.as_nanos() as u64 ^ (std::process::id() as u64) << 40
}

/// A minimal executor: parks the thread until the waker fires.
fn block_on<F: IntoFuture>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread, Mutex<u32>);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            *self.1.lock().unwrap() += 1;
            self.0.unpark();
        }
    }
    let unpark = Arc::new(Unpark(std::thread::current(), Mutex::new(0)));
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = Box::pin(f.into_future());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park_timeout(Duration::from_secs(1));
    }
}

#[test]
fn async_build_polls_waits_takes_and_matches_the_blocking_build() {
    let (rt, dir) = runtime("async");
    let opts = BuildOptions::new(SAXPY)
        .name("saxpy_async.cu")
        .target("sm_90")
        .nvrtc_option(format!("-DFJ_FRESH={}", fresh()));
    let b = rt.build_async(&opts).unwrap();
    assert!(b.wait(None).unwrap());
    assert!(b.poll().unwrap());
    let m = b.take().unwrap();
    // A second take is refused, with a message.
    let again = b.take().unwrap_err();
    assert_eq!(again.code(), Code::FailedPrecondition, "{again}");
    assert!(!again.message().is_empty());
    // The same build, blocking, is the same image (from the cache).
    let blocking = rt.build(&opts).unwrap();
    assert_eq!(m.image().unwrap(), blocking.image().unwrap());
    assert_eq!(m.info().unwrap().target, "sm_90");
    drop((m, blocking, b));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn async_build_as_a_future_and_its_build_error() {
    let (rt, dir) = runtime("future");
    let n = fresh();
    let opts = BuildOptions::new(SAXPY)
        .target("sm_90")
        .nvrtc_option(format!("-DFJ_FRESH={n}"));
    let m = block_on(rt.build_async(&opts).unwrap().into_future()).unwrap();
    assert!(!m.image().unwrap().is_empty());
    // A compile error comes from the future with NVRTC's log.
    let broken = format!("extern \"C\" __global__ void k{n}() {{ undeclared_{n}(); }}");
    let e = block_on(
        rt.build_async(&BuildOptions::new(broken).name("broken.cu").target("sm_90"))
            .unwrap(),
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::BuildError, "{e}");
    assert!(
        e.build_log()
            .unwrap_or("")
            .contains(&format!("undeclared_{n}")),
        "{e:?}"
    );
    // Dropping an unfinished future (and its waker thread) is clean.
    let slow = BuildOptions::new(SAXPY)
        .target("sm_90")
        .nvrtc_option(format!("-DFJ_FRESH={}", n + 1));
    let mut fut = rt.build_async(&slow).unwrap().into_future();
    let waker = Waker::noop();
    let _ = Pin::new(&mut fut).poll(&mut Context::from_waker(waker));
    drop(fut);
    drop(m);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn include_folders_reach_the_build() {
    let (rt, dir) = runtime("include");
    let n = fresh() % 1_000_000_007;
    let inc = dir.join("inc");
    std::fs::create_dir_all(&inc).unwrap();
    std::fs::write(inc.join("fj_value.h"), format!("#define FJ_VALUE {n}ull\n")).unwrap();
    let src = "#include \"fj_value.h\"\n\
               extern \"C\" __global__ void k(unsigned long long* y) { *y = FJ_VALUE; }\n";
    let m = rt
        .build(
            &BuildOptions::new(src)
                .target("compute_90")
                .output(Output::Ptx)
                .include_dir(&inc),
        )
        .unwrap();
    let ptx = String::from_utf8_lossy(m.image().unwrap()).into_owned();
    assert!(
        ptx.contains(&n.to_string()),
        "the header's value {n} is not in the PTX"
    );
    // Without the folder the header is missing, and the message says so.
    let e = rt
        .build(
            &BuildOptions::new(src)
                .target("compute_90")
                .output(Output::Ptx),
        )
        .unwrap_err();
    assert!(e.to_string().contains("fj_value.h"), "{e}");
    // CUDA's own folders are listed (possibly none on this host).
    for d in rt.include_dirs().unwrap() {
        assert!(!d.path.is_empty() && !d.origin.is_empty(), "{d:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn module_load_of_an_image_built_here() {
    let (rt, dir) = runtime("load");
    let m = rt
        .build(
            &BuildOptions::new(SAXPY)
                .target("compute_90")
                .output(Output::Ptx)
                .nvrtc_option(format!("-DFJ_FRESH={}", fresh())),
        )
        .unwrap();
    let image = m.image().unwrap().to_vec();
    let loaded = rt
        .load_module(
            &LoadOptions::new(&image)
                .kind(ImageKind::Ptx)
                .name("saxpy.ptx"),
        )
        .unwrap();
    assert_eq!(loaded.image().unwrap(), &image[..]);
    assert_eq!(loaded.info().unwrap().target, "compute_90");
    // Garbage is INVALID_ARGUMENT, with a message.
    let e = rt
        .load_module(&LoadOptions::new(b"\x7fELF garbage").kind(ImageKind::Auto))
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    rt.flush_cache(Duration::from_secs(5)).unwrap();
    // No remote tier configured: its state says so and its counters are 0.
    assert_eq!(rt.cache_remote_state().unwrap(), fleetjit::RemoteState::Off);
    let st = rt.cache_stats().unwrap();
    assert_eq!(
        (st.remote_hits, st.remote_writes, st.remote_errors),
        (0, 0, 0)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn log_callback_receives_lines_and_survives_a_panic() {
    let dir = temp_dir("log");
    let cache = dir.join("cache");
    let opts = BuildOptions::new(SAXPY)
        .target("sm_90")
        .nvrtc_option(format!("-DFJ_FRESH={}", fresh()));
    {
        let rt = Runtime::new(&RuntimeOptions::new().cache_dir(&cache)).unwrap();
        rt.build(&opts).unwrap();
        rt.flush_cache(Duration::from_secs(10)).unwrap();
    }
    // Corrupt every cache file: the next runtime refuses the entry (a line
    // at warn) and rebuilds.
    fn corrupt(d: &std::path::Path, n: &mut usize) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                corrupt(&p, n);
            } else if std::fs::write(&p, b"not a fleetjit cache entry").is_ok() {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    corrupt(&cache, &mut n);
    assert!(
        n > 0,
        "the build wrote no cache file under {}",
        cache.display()
    );
    let lines = Arc::new(Mutex::new(Vec::<(LogLevel, String)>::new()));
    let l2 = lines.clone();
    let rt = Runtime::new(&RuntimeOptions::new().cache_dir(&cache).log(
        LogLevel::Info,
        move |level, line| {
            l2.lock().unwrap().push((level, line.to_string()));
            panic!("a panicking callback is caught, never unwinds into C");
        },
    ))
    .unwrap();
    let m = rt.build(&opts).unwrap();
    assert!(!m.image().unwrap().is_empty());
    drop(m);
    drop(rt);
    let got = lines.lock().unwrap();
    assert!(
        got.iter()
            .any(|(l, line)| *l == LogLevel::Warn && line.contains("cache")),
        "no warn line about the refused entry: {got:?}"
    );
    for (_, line) in got.iter() {
        assert!(!line.is_empty() && !line.ends_with('\n'), "{line:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// One row of the bad-input table: the call's result must be an `Err`
/// with a non-empty message (and the given code when one is named).
fn expect_err<T: std::fmt::Debug>(row: &str, r: fleetjit::Result<T>, codes: &[Code]) {
    match r {
        Ok(v) => panic!("{row}: accepted ({v:?})"),
        Err(e) => {
            assert!(!e.message().is_empty(), "{row}: empty message");
            assert!(
                codes.is_empty() || codes.contains(&e.code()),
                "{row}: {} ({e}), expected one of {codes:?}",
                e.code()
            );
            println!("  {row}: {e}");
        }
    }
}

#[test]
fn bad_input_table() {
    use Code::*;
    let (rt, dir) = runtime("badinput");
    let gpu = rt.device_count().unwrap() > 0;
    let dev: &[Code] = if gpu { &[] } else { &[Unavailable] };

    // Embedded NULs: refused by the binding before NVRTC can cut them.
    expect_err(
        "NUL in the source",
        rt.build(&BuildOptions::new("__global__ void k(){}\0junk").target("sm_90")),
        &[InvalidArgument],
    );
    expect_err(
        "NUL in a name expression",
        rt.build(
            &BuildOptions::new(SAXPY)
                .target("sm_90")
                .name_expression("axpy<float>\0"),
        ),
        &[InvalidArgument],
    );
    expect_err(
        "NUL in an NVRTC option",
        rt.build(
            &BuildOptions::new(SAXPY)
                .target("sm_90")
                .nvrtc_option("-DX=1\0-DY"),
        ),
        &[InvalidArgument],
    );
    expect_err(
        "NUL in an async build",
        rt.build_async(&BuildOptions::new("\0").target("sm_90")),
        &[InvalidArgument],
    );
    expect_err(
        "NUL in a runtime option",
        Runtime::new(&RuntimeOptions::new().target_override("sm_90\0")),
        &[InvalidArgument],
    );
    // Links: every name, option and folder (the source alone links).
    let saxpy = || LinkInput::source(SAXPY).name("saxpy.cu");
    let link = |input: LinkInput| LinkOptions::new().input(input).target("sm_90");
    for (row, options) in [
        ("NUL in a link name", link(saxpy()).name("link\0junk")),
        ("NUL in a link target", link(saxpy()).target("sm_90\0")),
        ("NUL in a link option", link(saxpy()).link_option("-O3\0-g")),
        (
            "NUL in a link include folder",
            link(saxpy()).include_dir("/tmp\0/x"),
        ),
        (
            "NUL in a link input's name",
            link(LinkInput::source(SAXPY).name("saxpy\0.cu")),
        ),
        (
            "NUL in a link input's NVRTC option",
            link(saxpy().nvrtc_option("-DX=1\0-DY")),
        ),
        (
            "NUL in a link input's name expression",
            link(saxpy().name_expression("axpy<float>\0")),
        ),
    ] {
        expect_err(row, rt.link(&options), &[InvalidArgument]);
    }
    // Bad enums and targets.
    expect_err(
        "unknown copy impl",
        rt.build(
            &BuildOptions::new(SAXPY)
                .target("sm_90")
                .copy_impl(CopyImpl::Other(77)),
        ),
        &[InvalidArgument],
    );
    expect_err(
        "unknown output",
        rt.build(
            &BuildOptions::new(SAXPY)
                .target("sm_90")
                .output(Output::Other(9)),
        ),
        &[InvalidArgument],
    );
    expect_err(
        "unknown output, async",
        rt.build_async(
            &BuildOptions::new(SAXPY)
                .target("sm_90")
                .output(Output::Other(9)),
        ),
        &[InvalidArgument],
    );
    expect_err(
        "malformed target",
        rt.build(&BuildOptions::new(SAXPY).target("sm_9x")),
        &[InvalidArgument],
    );
    expect_err(
        "unknown image kind",
        rt.load_module(&LoadOptions::new(b"// ptx").kind(ImageKind::Other(42))),
        &[InvalidArgument],
    );
    expect_err(
        "empty image",
        rt.load_module(&LoadOptions::new(b"")),
        &[InvalidArgument],
    );
    expect_err(
        "unknown log level",
        Runtime::new(&RuntimeOptions::new().log(LogLevel::Other(99), |_, _| {})),
        &[InvalidArgument],
    );
    // Unknown kernel name, kernel names with a NUL.
    let m = rt.build(&BuildOptions::new(SAXPY).target("sm_90")).unwrap();
    expect_err(
        "kernel name with a NUL",
        m.kernel("saxpy\0", 0),
        &[InvalidArgument],
    );
    // Global names with a NUL: refused before the driver can cut them.
    expect_err(
        "global name with a NUL",
        m.global("counter\0junk", 0),
        &[InvalidArgument],
    );
    expect_err(
        "global write name with a NUL",
        m.write_global("c\0", 0, 0, &[0u8; 4], None),
        &[InvalidArgument],
    );
    expect_err(
        "global read name with a NUL",
        m.read_global("c\0", 0, 0, &mut [0u8; 4], None),
        &[InvalidArgument],
    );
    expect_err(
        "unknown kernel name",
        m.kernel("no_such_kernel", 0),
        if gpu {
            &[NotFound]
        } else {
            &[Unavailable, NotFound]
        },
    );
    expect_err(
        "bad device ordinal",
        m.kernel("saxpy", -7),
        &[NotFound, InvalidArgument, Unavailable],
    );
    // Sizes: an element count whose bytes overflow, a huge allocation.
    expect_err(
        "alloc overflowing usize",
        rt.alloc::<f32>(0, usize::MAX),
        &[InvalidArgument],
    );
    expect_err(
        "huge alloc",
        rt.alloc::<u8>(0, usize::MAX / 2),
        if gpu {
            &[ResourceExhausted, InvalidArgument, OutOfRange]
        } else {
            dev
        },
    );
    expect_err(
        "stream on a bad device",
        rt.create_stream(1 << 20),
        &[NotFound, InvalidArgument, Unavailable],
    );
    expect_err(
        "device info of a negative ordinal",
        rt.device_info(-1),
        &[NotFound, InvalidArgument, Unavailable],
    );
    // A zero-time flush either succeeds (nothing queued) or says the time ran out.
    if let Err(e) = rt.flush_cache(Duration::ZERO) {
        assert_eq!(e.code(), DeadlineExceeded, "{e}");
    }
    // Copies and prefetches: bad descriptors, bad enums, no device.
    let shape = [4i64, 4];
    let a = Tensor::cuda(0x1000, 0, Tensor::F32, &shape, None).unwrap();
    let b = Tensor::cuda(0x2000, 0, Tensor::I32, &shape, None).unwrap();
    let mut desc = CopyDesc::new(&a, &b);
    expect_err(
        "copy between dtypes",
        unsafe { rt.copy(&[desc], None) },
        &[InvalidArgument],
    );
    let c = Tensor::cuda(0x3000, 0, Tensor::F32, &shape, None).unwrap();
    desc.dst = &c;
    desc.oob = Oob::Other(12);
    expect_err(
        "copy with an unknown oob",
        unsafe { rt.copy(&[desc], None) },
        &[InvalidArgument],
    );
    expect_err(
        "copy onto itself",
        unsafe { rt.copy(&[CopyDesc::new(&a, &a)], None) },
        &[InvalidArgument],
    );
    let bad_rank = [1i64; 6];
    let t6 = Tensor::cuda(0x1000, 0, Tensor::F32, &bad_rank, None).unwrap();
    expect_err(
        "copy of a 6-D tensor",
        unsafe { rt.copy(&[CopyDesc::new(&t6, &t6)], None) },
        &[InvalidArgument],
    );
    let neg = [-4i64, 4];
    let tn = Tensor::cuda(0x1000, 0, Tensor::F32, &neg, None).unwrap();
    expect_err(
        "copy of a negative shape",
        unsafe { rt.copy(&[CopyDesc::new(&tn, &a)], None) },
        &[InvalidArgument],
    );
    let mut p = PrefetchDesc::range(0x1000, 64);
    p.mode = PrefetchMode::Other(9);
    expect_err(
        "prefetch with an unknown mode",
        unsafe { rt.prefetch(&[p], None) },
        &[InvalidArgument],
    );
    expect_err(
        "prefetch of 64 bytes at address 0",
        unsafe { rt.prefetch(&[PrefetchDesc::range(0, 64)], None) },
        &[InvalidArgument, Unavailable],
    );
    expect_err(
        "peer query of bad devices",
        rt.peer_query(-3, 1 << 30),
        &[NotFound, InvalidArgument, Unavailable],
    );
    expect_err(
        "peer enable of bad devices",
        rt.peer_enable(0, 99),
        &[NotFound, InvalidArgument, Unavailable, FailedPrecondition],
    );
    expect_err(
        "peer disable of bad devices",
        rt.peer_disable(99, 0),
        &[NotFound, InvalidArgument, Unavailable],
    );
    // No "wrap of a forged CUstream" row: the driver dereferences a stream
    // handle, so a forged pointer is undefined behaviour (the header says so);
    // it crashed this table on the H200.
    // A tensor argument the launch would refuse (a box past the rank).
    let ok =
        fleetjit::tensor_check(&a.arg([2, 2, 0, 0, 0], Oob::Zeros, sys::FJ_SWIZZLE_NONE)).unwrap();
    assert!(ok.tma == ok.reason.is_empty(), "{ok:?}");
    let arg = a.arg([2, 2, 2, 0, 0], Oob::PromiseInBounds, sys::FJ_SWIZZLE_NONE);
    expect_err(
        "tensor check of a 3-D box on a 2-D tensor",
        fleetjit::tensor_check(&arg),
        &[InvalidArgument],
    );
    // A short struct_size needs the raw struct: only TensorArg::from_raw
    // (unsafe) makes an argument of it; its pointer is still a's tensor.
    let mut raw = *arg.with_box([2, 2, 0, 0, 0]).as_raw();
    raw.struct_size = 3;
    let short = unsafe { fleetjit::TensorArg::from_raw(raw) };
    expect_err(
        "tensor check with a short struct_size",
        fleetjit::tensor_check(&short),
        &[InvalidArgument],
    );
    // Closed handles used again: the safe crate makes that a compile
    // error (a Module borrows its Runtime, Drop needs ownership); through
    // the raw layer the library checks the handle, never a crash.
    let raw = m.as_raw();
    drop(m);
    unsafe {
        let mut info: sys::fj_module_info = std::mem::zeroed();
        info.struct_size = std::mem::size_of::<sys::fj_module_info>();
        let st = sys::fj_module_info_get(raw, &mut info);
        assert!(!st.is_null(), "a destroyed module's info was accepted");
        assert_eq!(sys::fj_status_code(st), sys::FJ_INVALID_ARGUMENT);
        sys::fj_status_free(st);
        let st = sys::fj_build_poll(std::ptr::null(), std::ptr::null_mut());
        assert_eq!(sys::fj_status_code(st), sys::FJ_INVALID_ARGUMENT);
        sys::fj_status_free(st);
    }
    // The runtime still works after all of it.
    let ok = rt.build(&BuildOptions::new(SAXPY).target("sm_90")).unwrap();
    assert!(!ok.image().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(dir);
}

fn random_floats(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = s.wrapping_mul(0x2545_f491_4f6c_dd1d);
            (r >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

/// fj_copy through the binding on a GPU: a window of a random 2-D source
/// (partly outside it, zero-filled) and a gather of random rows, into
/// poisoned outputs, against a host reference. Skips without a GPU.
#[test]
fn gpu_copy_window_and_gather_against_a_reference() {
    let (rt, dir) = runtime("gpucopy");
    if rt.device_count().unwrap() == 0 {
        println!(
            "SKIP gpu_copy_window_and_gather_against_a_reference: the runtime reports 0 CUDA devices ({})",
            rt.driver_error().unwrap_or_default()
        );
        return;
    }
    let seed = fresh();
    let (rows, cols) = (64usize, 48usize);
    let src_host = random_floats(rows * cols, seed);
    let src = rt.upload(0, &src_host).unwrap();
    let (wr, wc) = (20usize, 40usize);
    let (r0, c0) = (50i64, 17i64); // runs past the last row and column
    let mut win = rt.alloc::<f32>(0, wr * wc).unwrap();
    win.fill_bytes(0xff).unwrap(); // NaN poison
    let src_shape = [rows as i64, cols as i64];
    let win_shape = [wr as i64, wc as i64];
    let ts = Tensor::cuda(src.address(), 0, Tensor::F32, &src_shape, None).unwrap();
    let tw = Tensor::cuda(win.address(), 0, Tensor::F32, &win_shape, None).unwrap();
    let mut d = CopyDesc::new(&ts, &tw);
    d.src_start = [r0, c0, 0, 0, 0];
    d.oob = Oob::Zeros;
    // Gather: random rows (some outside src: they read as zeros).
    let g = 16usize;
    let idx: Vec<i32> = random_floats(g, seed ^ 0x5555)
        .iter()
        .map(|v| ((v + 1.0) * 0.55 * rows as f32) as i32)
        .collect();
    let idx_dev = rt.upload(0, &idx).unwrap();
    let mut gat = rt.alloc::<f32>(0, g * cols).unwrap();
    gat.fill_bytes(0xff).unwrap();
    let idx_shape = [g as i64];
    let gat_shape = [g as i64, cols as i64];
    let ti = Tensor::cuda(idx_dev.address(), 0, Tensor::I32, &idx_shape, None).unwrap();
    let tg = Tensor::cuda(gat.address(), 0, Tensor::F32, &gat_shape, None).unwrap();
    let mut dg = CopyDesc::new(&ts, &tg);
    dg.gather_index = Some(&ti);
    let stream = rt.create_stream(0).unwrap();
    unsafe { rt.copy(&[d, dg], Some(&stream)) }.unwrap();
    stream.synchronize().unwrap();
    let at = |r: i64, c: i64| -> f32 {
        if r < 0 || c < 0 || r >= rows as i64 || c >= cols as i64 {
            0.0
        } else {
            src_host[r as usize * cols + c as usize]
        }
    };
    let got = win.to_vec().unwrap();
    for i in 0..wr {
        for j in 0..wc {
            let want = at(r0 + i as i64, c0 + j as i64);
            assert_eq!(
                got[i * wc + j].to_bits(),
                want.to_bits(),
                "window [{i}][{j}]"
            );
        }
    }
    let got = gat.to_vec().unwrap();
    for (i, &r) in idx.iter().enumerate() {
        for j in 0..cols {
            assert_eq!(
                got[i * cols + j].to_bits(),
                at(r as i64, j as i64).to_bits(),
                "gather row {i} (src row {r}) col {j}"
            );
        }
    }
    // An async build for the live device, launched: y = a*x + y.
    let m = block_on(
        rt.build_async(&BuildOptions::new(SAXPY).nvrtc_option(format!("-DFJ_FRESH={seed}")))
            .unwrap(),
    )
    .unwrap();
    let k = m.kernel("saxpy", 0).unwrap();
    let n = 4096usize;
    let x = random_floats(n, seed ^ 1);
    let y0 = random_floats(n, seed ^ 2);
    let xd = rt.upload(0, &x).unwrap();
    let yd = rt.upload(0, &y0).unwrap();
    let args = [
        fleetjit::Arg::Pointer(yd.address()),
        fleetjit::Arg::Pointer(xd.address()),
        1.5f32.into(),
        (n as i32).into(),
    ];
    unsafe { k.launch(&fleetjit::LaunchConfig::for_elements(n, 128), &args) }.unwrap();
    let y = yd.to_vec().unwrap();
    for i in 0..n {
        let want = 1.5f32 * x[i] + y0[i];
        assert!(
            (y[i] - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "saxpy[{i}]: {} vs {want}",
            y[i]
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

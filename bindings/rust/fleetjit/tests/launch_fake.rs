//! Launches over the tests' fake CUDA driver (libfj_fake_cuda.so, built with
//! the library; its launches check their arguments and do nothing), so they
//! run on the CPU: no heap allocation per launch, and the bad-input checks
//! of the same path. Found through $FJ_FAKE_CUDA, else next to the library
//! in $FLEETJIT_LIB_DIR (scripts/dev/test-bindings sets it), else the
//! default build folder; without it each test prints SKIP and why.
//!
//! One test binary with its own allocator: it counts the allocations of the
//! calling thread only, so the other tests' threads do not disturb it.
mod common;

use common::{build_or_skip, fake_runtime};
use fleetjit::{Arg, BuildOptions, Code, LaunchAttrs, LaunchConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;
thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCS.with(|n| n.get())
}

const SOURCE: &str = r#"extern "C" __global__ void empty_args(float* a, const float* b, float c, int n) {}
extern "C" __global__ void many(int p0, int p1, int p2, int p3, int p4, int p5, int p6, int p7,
                                int p8, int p9, int p10, int p11, int p12, int p13, int p14,
                                int p15, int p16, int p17, int p18, int p19) {}"#;

#[test]
fn launch_makes_no_heap_allocation_and_refuses_bad_input() {
    let dir = std::env::temp_dir().join(format!("fleetjit-rust-{}-fake", std::process::id()));
    let Some(rt) = fake_runtime(
        "launch_makes_no_heap_allocation_and_refuses_bad_input",
        &dir,
    ) else {
        return;
    };
    let Some(module) = build_or_skip(
        "launch_makes_no_heap_allocation_and_refuses_bad_input",
        &rt,
        &BuildOptions::new(SOURCE).name("launch_fake.cu"),
    ) else {
        return;
    };
    let kernel = module.kernel("empty_args", 0).expect("kernel");
    let buf = rt.alloc::<f32>(0, 256).expect("alloc");
    let stream = rt.create_stream(0).expect("stream");
    let args = [
        Arg::from(&buf),
        Arg::from(&buf),
        Arg::F32(2.0),
        Arg::I32(256),
    ];
    for cfg in [
        LaunchConfig::new([1, 1, 1], [32, 1, 1]),
        LaunchConfig::new([1, 1, 1], [32, 1, 1]).stream(&stream),
    ] {
        unsafe { kernel.launch(&cfg, &args) }.expect("launch");
        let before = allocations();
        for _ in 0..1000 {
            unsafe { kernel.launch(&cfg, &args) }.expect("launch");
            unsafe { kernel.launch_ex(&cfg, &LaunchAttrs::default(), &args) }.expect("launch_ex");
        }
        assert_eq!(
            allocations() - before,
            0,
            "heap allocations in 2000 launches"
        );
    }

    // Bad input: a wrong count or size, past 16 arguments too (the heap path).
    let cfg = LaunchConfig::new([1, 1, 1], [32, 1, 1]);
    let err = |r: fleetjit::Result<()>| r.expect_err("a bad launch succeeded").code();
    assert_eq!(
        err(unsafe { kernel.launch(&cfg, &args[..3]) }),
        Code::InvalidArgument
    );
    let wrong = [args[0], args[1], Arg::F64(2.0), args[3]];
    assert_eq!(
        err(unsafe { kernel.launch(&cfg, &wrong) }),
        Code::InvalidArgument
    );
    let many_kernel = module.kernel("many", 0).expect("kernel");
    let mut many: Vec<Arg> = (0..20).map(|i| Arg::I32(-i)).collect();
    unsafe { many_kernel.launch(&cfg, &many) }.expect("20 arguments");
    assert_eq!(
        err(unsafe { many_kernel.launch(&cfg, &many[..19]) }),
        Code::InvalidArgument
    );
    many[19] = Arg::I64(1);
    assert_eq!(
        err(unsafe { many_kernel.launch(&cfg, &many) }),
        Code::InvalidArgument
    );
    drop((buf, stream, module));
    drop(rt);
    let _ = std::fs::remove_dir_all(&dir);
}

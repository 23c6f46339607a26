//! Device linking over the real libfleetjit.so.1, without a GPU: a link for
//! a named target, its cache hit, nvJitLink's log, bad input refused.
use fleetjit::{
    CacheResult, Code, LinkInput, LinkInputKind, LinkOptions, Output, Runtime, RuntimeOptions,
};

const CALLER: &str = "extern \"C\" __device__ float fj_rs_link_scale(float x);\n\
extern \"C\" __global__ void rs_scale_all(float* out, const float* in, int n) {\n\
  int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
  if (i < n) out[i] = fj_rs_link_scale(in[i]);\n}\n";

fn callee(factor: u64) -> String {
    format!(
        "extern \"C\" __device__ float fj_rs_link_scale(float x) {{ return x * {factor}.0f; }}\n"
    )
}

fn runtime(test: &str) -> (Runtime, std::path::PathBuf) {
    let dir =
        std::env::temp_dir().join(format!("fleetjit-rust-link-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    (
        Runtime::new(&RuntimeOptions::new().cache_dir(&dir)).expect("runtime"),
        dir,
    )
}

fn factor() -> u64 {
    // A fresh factor per run: no earlier run's cache entry can stand in.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    2 + (nanos ^ std::process::id() as u64) % 1_000_000
}

#[test]
fn two_sources_link_for_a_named_target() {
    let (rt, dir) = runtime("named");
    let f = factor();
    for lto in [false, true] {
        let options = LinkOptions::new()
            .input(LinkInput::source(CALLER).name("caller.cu"))
            .input(LinkInput::source(callee(f)).name("callee.cu"))
            .target("sm_90")
            .lto(lto);
        let m = rt.link(&options).expect("link");
        let info = m.info().unwrap();
        assert_eq!(info.target, "sm_90");
        assert_eq!(info.output, Output::Cubin);
        assert_eq!(info.cache_result, CacheResult::Compiled);
        let image = m.image().unwrap();
        assert!(image.starts_with(b"\x7fELF"));
        assert!(image.windows(12).any(|w| w == b"rs_scale_all"));
        let again = rt.link(&options).expect("second link");
        assert_eq!(again.info().unwrap().cache_result, CacheResult::MemoryHit);
        assert_eq!(again.image().unwrap(), image);
    }
    drop(rt);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn link_errors() {
    let (rt, dir) = runtime("errors");
    let err = rt
        .link(
            &LinkOptions::new()
                .input(LinkInput::source(CALLER))
                .target("sm_80"),
        )
        .err()
        .expect("undefined symbol");
    assert_eq!(err.code(), Code::BuildError);
    assert!(
        err.detail("link_log")
            .unwrap_or("")
            .contains("fj_rs_link_scale"),
        "{err}"
    );
    let cases: Vec<(LinkOptions, &str)> = vec![
        (LinkOptions::new().target("sm_90"), "inputs is NULL"),
        (
            LinkOptions::new()
                .input(LinkInput::source(""))
                .target("sm_90"),
            "data is NULL",
        ),
        (
            LinkOptions::new()
                .input(LinkInput::new(LinkInputKind::Raw(9), "x"))
                .target("sm_90"),
            "kind",
        ),
        (
            LinkOptions::new()
                .input(LinkInput::source("int a;\0"))
                .target("sm_90"),
            "NUL byte",
        ),
        (
            LinkOptions::new()
                .input(LinkInput::source(CALLER))
                .target("compute_90"),
            "sm_XX",
        ),
        (
            LinkOptions::new()
                .input(LinkInput::source(CALLER))
                .target("sm_90")
                .flags(1 << 12),
            "unknown bits",
        ),
    ];
    // Embedded NULs, refused by the binding naming the field; without them
    // the link works (NVRTC, nvJitLink and the driver read C strings).
    let caller_input = || LinkInput::source(CALLER).name("caller.cu");
    let callee_input = || LinkInput::source(callee(3)).name("callee.cu");
    let both = || {
        LinkOptions::new()
            .input(caller_input())
            .input(callee_input())
            .target("sm_90")
    };
    let nul_cases: Vec<(LinkOptions, &str)> = vec![
        (
            both().name("link\0junk"),
            "the link name has an embedded NUL at byte 4",
        ),
        (both().target("sm_90\0"), "the target has an embedded NUL"),
        (
            both().link_option("-O3").link_option("-O3\0-g"),
            "a link option has an embedded NUL",
        ),
        (
            both().include_dir("/tmp\0/x"),
            "an include folder has an embedded NUL",
        ),
        (
            LinkOptions::new()
                .input(caller_input())
                .input(LinkInput::source(callee(3)).name("callee\0.cu"))
                .target("sm_90"),
            "the name of input 1 has an embedded NUL",
        ),
        (
            LinkOptions::new()
                .input(caller_input().nvrtc_option("-DX=1\0-DY"))
                .input(callee_input())
                .target("sm_90"),
            "an NVRTC option of input 0 has an embedded NUL",
        ),
        (
            LinkOptions::new()
                .input(caller_input().name_expression("rs_scale_all\0"))
                .input(callee_input())
                .target("sm_90"),
            "a name expression of input 0 has an embedded NUL",
        ),
    ];
    for (options, says) in cases.into_iter().chain(nul_cases) {
        let err = rt.link(&options).err().expect(says);
        assert_eq!(err.code(), Code::InvalidArgument, "{says}: {err}");
        assert!(err.message().contains(says), "{says}: {err}");
    }
    drop(rt);
    let _ = std::fs::remove_dir_all(&dir);
}

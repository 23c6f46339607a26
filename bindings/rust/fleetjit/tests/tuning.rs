//! `Runtime::tune` (fj_tune) without a GPU: bad spaces are refused naming
//! the field, a valid one says why it cannot run, status names.
//!
//! SAFETY of the `unsafe { rt.tune(..) }` calls (tune launches with its
//! pointer arguments): every one is refused before a launch, for a bad
//! space or option, or run only when the runtime has no device.
use fleetjit::{
    tune_status_name, Arg, BuildOptions, Code, Runtime, RuntimeOptions, TuneOptions, TuneShape,
};

const SOURCE: &str = r#"extern "C" __global__ void fill(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = TILE;
}"#;

fn options() -> TuneOptions<'static> {
    TuneOptions {
        build: BuildOptions::new(SOURCE).name("fill.cu"),
        kernel: "fill".into(),
        macro_sets: vec!["-DTILE=1".into(), "-DTILE=2".into()],
        shapes: vec![TuneShape::block(64), TuneShape::block(128)],
        grid_extent: [4096, 0, 0],
        grid_divisor: ["block.x".into(), String::new(), String::new()],
        args: vec![Arg::Pointer(0x1000), Arg::I32(4096)],
        outputs: vec![(0x1000, 4096 * 4)],
        ..Default::default()
    }
}

#[test]
fn bad_spaces_are_refused() {
    let rt = Runtime::new(&RuntimeOptions::new()).unwrap();
    let cases: Vec<(&str, Box<dyn Fn(&mut TuneOptions)>)> = vec![
        ("num_shapes", Box::new(|o| o.shapes.clear())),
        ("shapes[1]", Box::new(|o| o.shapes[1] = o.shapes[0])),
        (
            "macro_sets[1]",
            Box::new(|o| o.macro_sets[1] = " -DTILE=1 ".into()),
        ),
        ("check_fn", Box::new(|o| o.outputs.clear())),
        ("output_bytes[0]", Box::new(|o| o.outputs[0].1 = 0)),
        ("kernel", Box::new(|o| o.kernel.clear())),
    ];
    for (field, change) in cases {
        let mut o = options();
        change(&mut o);
        let err = unsafe { rt.tune(&o) }.unwrap_err();
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "{field}: {}",
            err.message()
        );
        assert!(err.message().contains(field), "{field}: {}", err.message());
    }
    if rt.device_count().unwrap() == 0 {
        let err = unsafe { rt.tune(&options()) }.unwrap_err();
        assert_ne!(err.code(), Code::Internal, "{}", err.message());
    }
}

#[test]
fn status_names() {
    assert_eq!(tune_status_name(0), "ok");
    assert_eq!(tune_status_name(3), "wrong_output");
    assert_eq!(tune_status_name(77), "unknown");
}

/// The base build converts as `Runtime::build` converts it: an embedded NUL
/// or a non-UTF-8 include folder is refused with build's own error, and the
/// include folders reach `fj_tune`.
#[test]
fn base_build_converts_as_build_does() {
    let rt = Runtime::new(&RuntimeOptions::new()).unwrap();
    let cases: Vec<(&str, Box<dyn Fn(BuildOptions) -> BuildOptions>)> = vec![
        (
            "the source",
            Box::new(|_| BuildOptions::new(format!("{SOURCE}\0junk")).name("fill.cu")),
        ),
        ("the build name", Box::new(|b| b.name("fill\0.cu"))),
        ("the target", Box::new(|b| b.target("sm_90\0"))),
        (
            "an NVRTC option",
            Box::new(|b| b.nvrtc_option("-DX=1\0-DY")),
        ),
        (
            "a name expression",
            Box::new(|b| b.name_expression("fill\0")),
        ),
        ("an include folder", Box::new(|b| b.include_dir("/tmp\0/x"))),
    ];
    for (what, change) in cases {
        let mut o = options();
        o.build = change(o.build);
        let err = unsafe { rt.tune(&o) }.unwrap_err();
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "{what}: {}",
            err.message()
        );
        assert!(
            err.message()
                .contains(&format!("{what} has an embedded NUL")),
            "{what}: {}",
            err.message()
        );
        let build_err = rt.build(&o.build).err().expect("build accepted it");
        assert_eq!(err.message(), build_err.message(), "{what}");
    }
    let tune_cases: Vec<(&str, Box<dyn Fn(&mut TuneOptions)>)> = vec![
        ("the kernel name", Box::new(|o| o.kernel = "fill\0".into())),
        (
            "a macro set",
            Box::new(|o| o.macro_sets[1] = "-DTILE=2\0-DX".into()),
        ),
        (
            "a grid divisor",
            Box::new(|o| o.grid_divisor[0] = "block.x\0".into()),
        ),
    ];
    for (what, change) in tune_cases {
        let mut o = options();
        change(&mut o);
        let err = unsafe { rt.tune(&o) }.unwrap_err();
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "{what}: {}",
            err.message()
        );
        assert!(
            err.message()
                .contains(&format!("{what} has an embedded NUL")),
            "{what}: {}",
            err.message()
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let mut o = options();
        o.build = o
            .build
            .include_dir(std::path::Path::new(std::ffi::OsStr::from_bytes(
                b"/tmp/\xff",
            )));
        let err = unsafe { rt.tune(&o) }.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
        assert!(err.message().contains("is not UTF-8"), "{}", err.message());
    }
    // The include folders reach fj_tune: an empty one is refused by the
    // library, naming it, before any device is needed (a dropped list got
    // the missing device's error instead).
    let dir = std::env::temp_dir();
    let mut o = options();
    o.build = o.build.include_dir(&dir).include_dir("");
    let err = unsafe { rt.tune(&o) }.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
    assert!(
        err.message().contains("include_dirs[1]"),
        "{}",
        err.message()
    );
}

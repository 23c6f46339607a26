//! `Runtime::tune` (fj_tune) without a GPU: bad spaces are refused naming
//! the field, a valid one says why it cannot run, status names.
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
        let err = rt.tune(&o).unwrap_err();
        assert_eq!(
            err.code(),
            Code::InvalidArgument,
            "{field}: {}",
            err.message()
        );
        assert!(err.message().contains(field), "{field}: {}", err.message());
    }
    if rt.device_count().unwrap() == 0 {
        let err = rt.tune(&options()).unwrap_err();
        assert_ne!(err.code(), Code::Internal, "{}", err.message());
    }
}

#[test]
fn status_names() {
    assert_eq!(tune_status_name(0), "ok");
    assert_eq!(tune_status_name(3), "wrong_output");
    assert_eq!(tune_status_name(77), "unknown");
}

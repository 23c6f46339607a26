//! The README's Rust example: `cargo run --example saxpy` (needs a GPU).
use fleetjit::{BuildOptions, LaunchConfig, Runtime, RuntimeOptions};

const SRC: &str = r#"extern "C" __global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }"#;

fn main() -> Result<(), fleetjit::Error> {
    fleetjit::check_version()?;
    let rt = Runtime::new(&RuntimeOptions::new())?;
    let module = rt.build(&BuildOptions::new(SRC).name("saxpy.cu"))?; // for GPU 0
    let x = rt.upload(0, &[1.0f32, 2.0, 3.0, 4.0])?;
    let y = rt.upload(0, &[10.0f32, 20.0, 30.0, 40.0])?;
    let saxpy = module.kernel("saxpy", 0)?;
    let args = [(&y).into(), (&x).into(), 2.0f32.into(), 4i32.into()];
    unsafe { saxpy.launch(&LaunchConfig::for_elements(4, 256), &args)? };
    println!("{:?}", y.to_vec()?); // [12.0, 24.0, 36.0, 48.0]
    Ok(())
}

//! Gives this crate's tests, examples and binaries an rpath to the directory
//! fleetjit-sys linked libfleetjit from (cargo does not pass link args of a
//! dependency's build script on), so `cargo test` needs no LD_LIBRARY_PATH.
//! Applications linking the `fleetjit` crate set their own rpath or
//! LD_LIBRARY_PATH, or install libfleetjit.so.1 where the loader looks.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_FLEETJIT_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_FLEETJIT_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}

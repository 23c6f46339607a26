//! Gives this crate's tests, examples and binaries an rpath to the directory
//! fleetjit-sys linked libfleetjit from (cargo does not pass link args of a
//! dependency's build script on), so `cargo test` needs no LD_LIBRARY_PATH.
//! An application does the same in its own build script, with fleetjit-sys
//! as a direct dependency (bindings/README.md, "Using the bindings from
//! outside the checkout").
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_FLEETJIT_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_FLEETJIT_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}

//! Build script of fleetjit-sys: where `libfleetjit.so` is, in this order:
//!
//! 1. `$FLEETJIT_LIB_DIR`, when set (an explicit choice wins);
//! 2. pkg-config's `fleetjit` (`libdir` of `fleetjit.pc`, e.g. an install
//!    prefix's `lib/pkgconfig` on `$PKG_CONFIG_PATH`);
//! 3. `<repo>/build/lib`, the repository's CMake build tree.
//!
//! It links `-lfleetjit` from there and emits an rpath to it for this
//! crate's own tests. Cargo passes a build script's link arguments to no
//! other crate, so the directory also goes on as metadata:
//! `DEP_FLEETJIT_LIB_DIR` in the build script of every crate that depends on
//! this one directly. The `fleetjit` crate's build script and an
//! application's own (two lines, bindings/README.md) turn it into an rpath,
//! so the binaries they link run without `LD_LIBRARY_PATH`.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pkg_config_libdir() -> Option<PathBuf> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let out = Command::new(pkg_config)
        .args(["--variable=libdir", "fleetjit"])
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !dir.is_empty()).then(|| PathBuf::from(dir))
}

fn main() {
    println!("cargo:rerun-if-env-changed=FLEETJIT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    let (lib_dir, how) = if let Some(dir) = env::var_os("FLEETJIT_LIB_DIR") {
        (PathBuf::from(dir), "FLEETJIT_LIB_DIR")
    } else if let Some(dir) = pkg_config_libdir() {
        (dir, "pkg-config")
    } else {
        let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
        (manifest.join("../../../build/lib"), "the repository's build tree")
    };
    let lib_dir = lib_dir.canonicalize().unwrap_or(lib_dir);
    if !Path::new(&lib_dir).join("libfleetjit.so").exists() {
        println!(
            "cargo:warning=no libfleetjit.so in {} (from {how}): set FLEETJIT_LIB_DIR or \
             PKG_CONFIG_PATH=<prefix>/lib/pkgconfig",
            lib_dir.display()
        );
    }
    println!("cargo:rerun-if-changed={}", lib_dir.join("libfleetjit.so").display());
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib=fleetjit");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    println!("cargo:lib_dir={}", lib_dir.display());
}

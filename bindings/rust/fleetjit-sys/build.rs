//! Build script of fleetjit-sys.
//!
//! 1. Links `libfleetjit.so` (-> `.so.1`): the directory is `$FLEETJIT_LIB_DIR`,
//!    else `<repo>/build/lib` (the repository's CMake build tree). It is also
//!    passed on as `DEP_FLEETJIT_LIB_DIR` to crates that depend on this one
//!    (the `fleetjit` crate uses it to set an rpath for its own tests).
//! 2. Layout probe: compiles a tiny C program against the public header
//!    (`$FLEETJIT_INCLUDE_DIR`, else `<repo>/include`) with the system C
//!    compiler (`$CC`, else `cc`), runs it, and writes
//!    `$OUT_DIR/layout_check.rs`: a function that compares every `sizeof`,
//!    `offsetof`, enum value and version macro of the header with the Rust
//!    declarations in `src/lib.rs`. `tests/layout.rs` runs it. No external
//!    crates are used. If the probe cannot run (no compiler, no header,
//!    cross-compiling) the build still succeeds and the layout test fails
//!    with the reason.
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (C struct name, Rust path, fields). Every field of every struct in the
/// header; a field missing on the Rust side is a compile error of the test.
const STRUCTS: &[(&str, &[&str])] = &[
    ("fj_str", &["data", "size"]),
    (
        "fj_copy_plan",
        &["struct_size", "ext", "target", "impl_", "support"],
    ),
    (
        "fj_runtime_options",
        &[
            "struct_size",
            "ext",
            "libcuda_path",
            "libnvrtc_path",
            "target_override",
            "copy_impl_override",
            "flags",
            "cache_dir",
            "cache_max_bytes",
        ],
    ),
    (
        "fj_device_info",
        &[
            "struct_size",
            "ext",
            "name",
            "ordinal",
            "cc_major",
            "cc_minor",
            "sm_count",
            "total_memory_bytes",
            "shared_memory_per_block",
            "shared_memory_per_block_optin",
            "shared_memory_per_sm",
            "l2_cache_bytes",
            "max_threads_per_block",
            "cluster_launch",
            "driver_version",
            "plan",
        ],
    ),
    (
        "fj_build_options",
        &[
            "struct_size",
            "ext",
            "source",
            "name",
            "nvrtc_options",
            "num_nvrtc_options",
            "name_expressions",
            "num_name_expressions",
            "target",
            "device",
            "copy_impl",
            "output",
            "flags",
        ],
    ),
    (
        "fj_module_info",
        &[
            "struct_size",
            "ext",
            "target",
            "copy_impl",
            "output",
            "cache_result",
            "build_ms",
            "compile_ms",
            "image_bytes",
        ],
    ),
    ("fj_dl_device", &["device_type", "device_id"]),
    ("fj_dl_dtype", &["code", "bits", "lanes"]),
    (
        "fj_tensor",
        &[
            "data",
            "device",
            "ndim",
            "dtype",
            "shape",
            "strides",
            "byte_offset",
        ],
    ),
    (
        "fj_tensor_arg",
        &["struct_size", "ext", "tensor", "box_", "oob", "swizzle"],
    ),
    ("fj_tensor_check", &["struct_size", "ext", "tma", "reason"]),
    ("fj_arg", &["struct_size", "kind", "size", "v"]),
    (
        "fj_launch_config",
        &[
            "struct_size",
            "ext",
            "grid",
            "block",
            "shared_bytes",
            "cluster",
            "stream",
        ],
    ),
    (
        "fj_kernel_info",
        &[
            "struct_size",
            "ext",
            "lowered_name",
            "num_params",
            "param_bytes",
            "max_threads_per_block",
            "static_shared_bytes",
            "num_regs",
            "uses_thunk",
        ],
    ),
    (
        "fj_cache_stats",
        &[
            "struct_size",
            "ext",
            "memory_hits",
            "disk_hits",
            "misses",
            "compiles",
            "compile_ms_total",
            "evictions",
            "rejected_entries",
            "disk_entries",
            "disk_bytes",
        ],
    ),
    // --- tuning (1.3)
    (
        "fj_tune_shape",
        &["struct_size", "ext", "block", "shared_bytes", "cluster"],
    ),
    (
        "fj_tune_options",
        &[
            "struct_size", "ext", "build", "kernel", "macro_sets", "num_macro_sets",
            "shapes", "num_shapes", "grid", "grid_extent", "grid_divisor", "grid_fn",
            "grid_user", "args", "num_args", "output_addresses", "output_bytes",
            "num_outputs", "check_fn", "check_user", "warmup", "samples",
            "noise_threshold", "timeout_ms", "flags",
        ],
    ),
    (
        "fj_tune_summary",
        &[
            "struct_size", "ext", "num_rows", "winner", "source", "noisy", "stored",
            "tune_ms", "lookup_ms", "key",
        ],
    ),
    (
        "fj_tune_row",
        &[
            "struct_size", "ext", "macro_index", "shape_index", "macros", "block",
            "shared_bytes", "cluster", "grid", "status", "message", "median_us",
            "min_us", "spread", "noisy", "samples", "batch",
        ],
    ),
];

/// Enum types whose size must be 4 (they are `u32` aliases in Rust).
const ENUM_TYPES: &[&str] = &[
    "fj_code",
    "fj_copy_impl",
    "fj_feature",
    "fj_support",
    "fj_runtime_flags",
    "fj_output",
    "fj_build_flags",
    "fj_cache_result",
    "fj_oob",
    "fj_arg_kind",
    "fj_tune_flags",
    "fj_tune_status",
];

/// Enum constants and macros whose values must match the Rust consts.
const CONSTANTS: &[&str] = &[
    "FJ_VERSION_MAJOR",
    "FJ_VERSION_MINOR",
    "FJ_OK",
    "FJ_INVALID_ARGUMENT",
    "FJ_NOT_FOUND",
    "FJ_UNAVAILABLE",
    "FJ_FAILED_PRECONDITION",
    "FJ_BUILD_ERROR",
    "FJ_CUDA_ERROR",
    "FJ_RESOURCE_EXHAUSTED",
    "FJ_OUT_OF_RANGE",
    "FJ_INTERNAL",
    "FJ_DEADLINE_EXCEEDED",
    "FJ_CODE_LAST",
    "FJ_COPY_IMPL_AUTO",
    "FJ_COPY_IMPL_SYNC",
    "FJ_COPY_IMPL_CP_ASYNC",
    "FJ_COPY_IMPL_TMA",
    "FJ_COPY_IMPL_LAST",
    "FJ_FEATURE_BARRIER",
    "FJ_FEATURE_GROUP_WAIT",
    "FJ_FEATURE_COPY_G2S",
    "FJ_FEATURE_COPY_S2G",
    "FJ_FEATURE_PREDICATE",
    "FJ_FEATURE_TILE_COPY",
    "FJ_FEATURE_OOB_ZEROS",
    "FJ_FEATURE_OOB_NAN",
    "FJ_FEATURE_MULTICAST",
    "FJ_FEATURE_L2_PREFETCH",
    "FJ_FEATURE_COUNT",
    "FJ_SUPPORT_NATIVE",
    "FJ_SUPPORT_EMULATED",
    "FJ_RUNTIME_DISABLE_DISK_CACHE",
    "FJ_RUNTIME_DISABLE_THUNKS",
    "FJ_OUTPUT_AUTO",
    "FJ_OUTPUT_CUBIN",
    "FJ_OUTPUT_PTX",
    "FJ_BUILD_NO_CACHE",
    "FJ_CACHE_COMPILED",
    "FJ_CACHE_MEMORY_HIT",
    "FJ_CACHE_DISK_HIT",
    "FJ_OOB_PROMISE_IN_BOUNDS",
    "FJ_OOB_ZEROS",
    "FJ_OOB_NAN",
    "FJ_DL_FLOAT8_E4M3",
    "FJ_DL_FLOAT8_E5M2",
    "FJ_ARG_I8",
    "FJ_ARG_I16",
    "FJ_ARG_I32",
    "FJ_ARG_I64",
    "FJ_ARG_U8",
    "FJ_ARG_U16",
    "FJ_ARG_U32",
    "FJ_ARG_U64",
    "FJ_ARG_F16",
    "FJ_ARG_BF16",
    "FJ_ARG_F32",
    "FJ_ARG_F64",
    "FJ_ARG_POINTER",
    "FJ_ARG_BYTES",
    "FJ_ARG_TENSOR",
    "FJ_ARG_KIND_LAST",
    "FJ_TUNE_NO_CACHE_READ",
    "FJ_TUNE_NO_CACHE_WRITE",
    "FJ_TUNE_OK",
    "FJ_TUNE_BUILD_FAILED",
    "FJ_TUNE_LAUNCH_REFUSED",
    "FJ_TUNE_WRONG_OUTPUT",
    "FJ_TUNE_FAULTED",
    "FJ_TUNE_TIMED_OUT",
    "FJ_TUNE_NOT_RUN",
];

/// Rust field names that differ from C ones (Rust keywords / reserved).
fn c_field(rust: &str) -> &str {
    match rust {
        "impl_" => "impl",
        "box_" => "box",
        other => other,
    }
}

fn repo_root(manifest_dir: &Path) -> PathBuf {
    // <repo>/bindings/rust/fleetjit-sys
    manifest_dir.join("../../..")
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=FLEETJIT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=FLEETJIT_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=CC");

    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = repo_root(&manifest_dir);
    let lib_dir = env::var_os("FLEETJIT_LIB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("build/lib"));
    let lib_dir = lib_dir.canonicalize().unwrap_or(lib_dir);
    let include_dir = env::var_os("FLEETJIT_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("include"));
    let include_dir = include_dir.canonicalize().unwrap_or(include_dir);
    let header = include_dir.join("fleetjit/fleetjit.h");
    println!("cargo:rerun-if-changed={}", header.display());

    if !lib_dir.join("libfleetjit.so").exists() && !lib_dir.join("libfleetjit.so.1").exists() {
        println!(
            "cargo:warning=libfleetjit.so not found in {} (set FLEETJIT_LIB_DIR to the directory holding libfleetjit.so.1)",
            lib_dir.display()
        );
    }
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib=fleetjit");
    // This crate's own tests find the library without LD_LIBRARY_PATH.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    // Metadata for dependents: DEP_FLEETJIT_LIB_DIR / DEP_FLEETJIT_INCLUDE.
    println!("cargo:lib_dir={}", lib_dir.display());
    println!("cargo:include={}", include_dir.display());

    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let check = match probe_layout(&out_dir, &include_dir, &header) {
        Ok(values) => generate_check(&values),
        Err(why) => {
            println!("cargo:warning=fleetjit-sys layout probe skipped: {why}");
            format!(
                "/// Generated by build.rs: the probe could not run.\n\
                 pub fn layout_mismatches() -> Vec<String> {{ vec![{:?}.to_string()] }}\n\
                 pub const LAYOUT_VALUES: usize = 0;\n",
                format!("layout probe unavailable: {why}")
            )
        }
    };
    fs::write(out_dir.join("layout_check.rs"), check).unwrap();
}

/// Compiles and runs the C probe; returns `name value` lines as pairs.
fn probe_layout(
    out_dir: &Path,
    include_dir: &Path,
    header: &Path,
) -> Result<Vec<(String, u64)>, String> {
    if !header.exists() {
        return Err(format!(
            "header {} not found (set FLEETJIT_INCLUDE_DIR)",
            header.display()
        ));
    }
    if env::var("HOST").ok() != env::var("TARGET").ok() {
        return Err("cross-compiling: the probe cannot run on the host".into());
    }
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <fleetjit/fleetjit.h>\n\
         #define P(name, v) printf(\"%s %llu\\n\", name, (unsigned long long)(v))\n\
         int main(void) {\n",
    );
    for (s, fields) in STRUCTS {
        writeln!(c, "  P(\"sizeof {s}\", sizeof({s}));").unwrap();
        writeln!(c, "  P(\"alignof {s}\", _Alignof({s}));").unwrap();
        for f in *fields {
            let cf = c_field(f);
            writeln!(c, "  P(\"offsetof {s} {f}\", offsetof({s}, {cf}));").unwrap();
            writeln!(
                c,
                "  P(\"fieldsize {s} {f}\", sizeof(((const {s}*)0)->{cf}));"
            )
            .unwrap();
        }
    }
    for e in ENUM_TYPES {
        writeln!(c, "  P(\"sizeof {e}\", sizeof({e}));").unwrap();
    }
    for k in CONSTANTS {
        writeln!(c, "  P(\"const {k}\", {k});").unwrap();
    }
    c.push_str("  return 0;\n}\n");
    let src = out_dir.join("layout_probe.c");
    let exe = out_dir.join("layout_probe");
    fs::write(&src, c).map_err(|e| e.to_string())?;
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-I")
        .arg(include_dir)
        .status()
        .map_err(|e| format!("cannot run the C compiler '{cc}': {e}"))?;
    if !status.success() {
        return Err(format!("'{cc}' failed to compile {}", src.display()));
    }
    let out = Command::new(&exe).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err("the layout probe exited with an error".into());
    }
    let text = String::from_utf8(out.stdout).map_err(|e| e.to_string())?;
    let mut values = Vec::new();
    for line in text.lines() {
        let (name, v) = line.rsplit_once(' ').ok_or("malformed probe output")?;
        values.push((
            name.to_string(),
            v.parse::<u64>().map_err(|e| e.to_string())?,
        ));
    }
    Ok(values)
}

/// Emits `layout_mismatches()`, comparing each C value with its Rust twin.
fn generate_check(values: &[(String, u64)]) -> String {
    let mut r = String::from(
        "/// Generated by build.rs from the C header; see tests/layout.rs.\n\
         #[allow(unused_mut)]\n\
         pub fn layout_mismatches() -> Vec<String> {\n\
         \x20   use core::mem::{align_of, offset_of, size_of};\n\
         \x20   let mut bad = Vec::new();\n\
         \x20   let mut chk = |what: &str, rust: u64, c: u64| {\n\
         \x20       if rust != c { bad.push(format!(\"{what}: Rust {rust}, C {c}\")); }\n\
         \x20   };\n",
    );
    // Size of a field's type, via a raw pointer projection (no UB).
    r.push_str(
        "    fn fsize<T, F>(_: fn(*const T) -> *const F) -> u64 { size_of::<F>() as u64 }\n",
    );
    for (name, v) in values {
        let parts: Vec<&str> = name.split(' ').collect();
        let rust = match parts.as_slice() {
            ["sizeof", t] => format!("size_of::<fleetjit_sys::{t}>() as u64"),
            ["alignof", t] => format!("align_of::<fleetjit_sys::{t}>() as u64"),
            ["offsetof", t, f] => format!("offset_of!(fleetjit_sys::{t}, {f}) as u64"),
            ["fieldsize", t, f] => format!(
                "fsize::<fleetjit_sys::{t}, _>(|p| unsafe {{ core::ptr::addr_of!((*p).{f}) }})"
            ),
            ["const", k] => format!("fleetjit_sys::{k} as u64"),
            _ => panic!("unexpected probe line {name}"),
        };
        writeln!(r, "    chk({name:?}, {rust}, {v});").unwrap();
    }
    r.push_str("    bad\n}\n");
    r.push_str(&format!(
        "/// Number of values compared.\npub const LAYOUT_VALUES: usize = {};\n",
        values.len()
    ));
    r
}

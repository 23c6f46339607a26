//! Build script of fleetjit-sys.
//!
//! 1. Links `libfleetjit.so` (-> `.so.1`): the directory is `$FLEETJIT_LIB_DIR`,
//!    else `<repo>/build/lib` (the repository's CMake build tree). It is also
//!    passed on as `DEP_FLEETJIT_LIB_DIR` to crates that depend on this one
//!    (the `fleetjit` crate uses it to set an rpath for its own tests).
//! 2. Layout probe: reads the public header (`$FLEETJIT_INCLUDE_DIR`, else
//!    `<repo>/include`) for every struct with a body and each of its fields,
//!    every enum type and enumerator and every `FJ_` macro with a value
//!    (1.0, 1.1, 1.2 and whatever a later minor adds: nothing is listed by
//!    hand), and `src/*.rs` for the Rust twins. It compiles a tiny C program
//!    over them with the system C compiler (`$CC`, else `cc`), runs it, and
//!    writes `$OUT_DIR/layout_check.rs`: a function that compares every
//!    `sizeof`, `_Alignof`, `offsetof`, field size, enum size and constant
//!    with the Rust declarations, and reports each header item that `src/`
//!    lacks (and each Rust field the header lacks) as a mismatch.
//!    A second C file spells every `extern "C"` signature of `src/` as a
//!    function pointer initialised with the header's function, compiled with
//!    -Werror: a parameter or return type that differs is a mismatch too.
//!    `tests/layout.rs` runs it. No external crates are used. If the probe
//!    cannot run (no compiler, no header, cross-compiling) the build still
//!    succeeds and the layout test fails with the reason.
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the header declares, read from its text: every struct with a body
/// and its fields, every enum type and its enumerators, every FJ_ macro
/// with a value. A 1.3 struct, field or enumerator is checked as soon as the
/// header has it; one missing on the Rust side is a reported mismatch.
struct HeaderItems {
    structs: Vec<(String, Vec<String>)>,
    enum_types: Vec<String>,
    constants: Vec<String>,
}

/// What `src/*.rs` declares: struct fields, `pub const`s and `pub type`s.
struct RustItems {
    structs: Vec<(String, Vec<String>)>,
    consts: Vec<String>,
    types: Vec<String>,
}

fn strip_c_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
            let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            out.push(' ');
            i = end;
        } else if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'/' {
            let end = text[i..].find('\n').map_or(b.len(), |e| i + e);
            i = end;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The text between the `{` at `open` and its matching `}`, and the index
/// just past that `}`.
fn braced(text: &str, open: usize) -> (&str, usize) {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return (&text[open + 1..open + i], open + i + 1);
                }
            }
            _ => {}
        }
    }
    (&text[open + 1..], text.len())
}

fn ident_end(s: &str) -> usize {
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len())
}

/// The declared name of one C field declaration ("uint32_t box[5]",
/// "void (*log_fn)(void*, int32_t, fj_str)", "union { ... } v").
fn c_decl_name(decl: &str) -> Option<String> {
    let d = decl.trim();
    if let Some(p) = d.find("(*") {
        let rest = &d[p + 2..];
        return Some(rest[..ident_end(rest)].to_string());
    }
    let d = match d.find('[') {
        Some(p) => &d[..p],
        None => d,
    };
    let d = d.trim_end();
    let start = d
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |p| p + 1);
    let name = &d[start..];
    (!name.is_empty()).then(|| name.to_string())
}

fn parse_header(text: &str) -> HeaderItems {
    let text = strip_c_comments(text);
    let mut items = HeaderItems {
        structs: Vec::new(),
        enum_types: Vec::new(),
        constants: Vec::new(),
    };
    for (kw, is_struct) in [("typedef struct ", true), ("typedef enum ", false)] {
        let mut at = 0;
        while let Some(p) = text[at..].find(kw) {
            let start = at + p + kw.len();
            let name_len = ident_end(&text[start..]);
            let name = text[start..start + name_len].to_string();
            let after = text[start + name_len..].trim_start();
            at = start + name_len;
            if !after.starts_with('{') {
                continue; // an opaque handle: `typedef struct fj_x fj_x;`
            }
            let open = text.len() - after.len();
            let (body, end) = braced(&text, open);
            at = end;
            if is_struct {
                let mut fields = Vec::new();
                // Split on `;` at brace depth 0 (a union's members stay inside).
                let mut depth = 0;
                let mut cur = String::new();
                for c in body.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ';' if depth == 0 => {
                            let decl = std::mem::take(&mut cur);
                            let decl = match decl.rfind('}') {
                                Some(p) => decl[p + 1..].to_string(),
                                None => decl,
                            };
                            // `int a, b;` declares two fields; a function
                            // pointer's parameter list is one.
                            let mut paren = 0;
                            let mut part = String::new();
                            for ch in decl.chars().chain([',']) {
                                match ch {
                                    '(' => paren += 1,
                                    ')' => paren -= 1,
                                    ',' if paren == 0 => {
                                        fields.extend(c_decl_name(&part));
                                        part.clear();
                                        continue;
                                    }
                                    _ => {}
                                }
                                part.push(ch);
                            }
                            continue;
                        }
                        _ => {}
                    }
                    cur.push(c);
                }
                items.structs.push((name, fields));
            } else {
                items.enum_types.push(name);
                for e in body.split(',') {
                    let e = e.trim();
                    let n = &e[..ident_end(e)];
                    if !n.is_empty() {
                        items.constants.push(n.to_string());
                    }
                }
            }
        }
    }
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("#define ") {
            let n = &rest[..ident_end(rest)];
            let value = rest[n.len()..].trim();
            if n.starts_with("FJ_") && n != "FJ_API" && !value.is_empty() {
                items.constants.push(n.to_string());
            }
        }
    }
    items
}

fn parse_rust(text: &str) -> RustItems {
    let mut items = RustItems {
        structs: Vec::new(),
        consts: Vec::new(),
        types: Vec::new(),
    };
    let text = strip_c_comments(text);
    for (i, _) in text.match_indices("pub struct ") {
        let rest = &text[i + "pub struct ".len()..];
        let name = rest[..ident_end(rest)].to_string();
        let Some(open) = rest.find(['{', ';']) else {
            continue;
        };
        let mut fields = Vec::new();
        if rest.as_bytes()[open] == b'{' {
            let (body, _) = braced(rest, open);
            for line in body.lines() {
                if let Some(f) = line.trim().strip_prefix("pub ") {
                    let f = &f[..ident_end(f)];
                    fields.push(f.to_string());
                }
            }
        }
        items.structs.push((name, fields));
    }
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("pub const ") {
            items.consts.push(rest[..ident_end(rest)].to_string());
        } else if let Some(rest) = l.strip_prefix("pub type ") {
            items.types.push(rest[..ident_end(rest)].to_string());
        }
    }
    items
}

/// The C spelling of a Rust FFI type of `fleetjit-sys` (`*const *mut
/// fj_build` -> `fj_build* const*`); None for a type it does not know.
fn c_type(t: &str) -> Option<String> {
    let t = t.trim();
    if let Some(rest) = t.strip_prefix("*const ") {
        return Some(format!("{} const*", c_type(rest)?));
    }
    if let Some(rest) = t.strip_prefix("*mut ") {
        return Some(format!("{}*", c_type(rest)?));
    }
    let base = match t {
        "c_char" => "char",
        "c_void" => "void",
        "c_int" => "int",
        "u8" => "uint8_t",
        "u16" => "uint16_t",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "i8" => "int8_t",
        "i16" => "int16_t",
        "i32" => "int32_t",
        "i64" => "int64_t",
        "usize" => "size_t",
        "f32" => "float",
        "f64" => "double",
        other
            if other.starts_with("fj_")
                && other.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            other
        }
        _ => return None,
    };
    Some(base.to_string())
}

/// Checks every `extern "C"` function of `src/` against the header's
/// prototype: a C file initialises a function pointer of the type the Rust
/// declaration spells with the header's function, and the C compiler
/// (-Werror) refuses any parameter or return type that differs. Returns one
/// line per mismatch.
fn check_signatures(
    out_dir: &Path,
    include_dir: &Path,
    rust_text: &str,
) -> Result<Vec<String>, String> {
    let text = strip_c_comments(rust_text);
    let mut bad = Vec::new();
    let mut c =
        String::from("#include <stddef.h>\n#include <stdint.h>\n#include <fleetjit/fleetjit.h>\n");
    let mut count = 0;
    let mut at = 0;
    while let Some(p) = text[at..].find("extern \"C\" {") {
        let open = at + p + "extern \"C\" ".len();
        let (body, end) = braced(&text, open);
        at = end;
        for decl in body.split(';') {
            let Some(fp) = decl.find("pub fn ") else {
                continue;
            };
            let d = &decl[fp + "pub fn ".len()..];
            let name = &d[..ident_end(d)];
            let Some(lp) = d.find('(') else { continue };
            let Some(rp) = d.rfind(')') else { continue };
            let params = &d[lp + 1..rp];
            let ret = d[rp + 1..].trim().strip_prefix("->").map(str::trim);
            let mut c_params = Vec::new();
            let mut ok = true;
            for p in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                match p.split_once(':').and_then(|(_, t)| c_type(t)) {
                    Some(t) => c_params.push(t),
                    None => ok = false,
                }
            }
            let c_ret = match ret {
                None => Some("void".to_string()),
                Some(r) => c_type(r),
            };
            let (true, Some(c_ret)) = (ok, c_ret) else {
                bad.push(format!(
                    "fn {name}: a Rust type the signature check cannot spell in C"
                ));
                continue;
            };
            if c_params.is_empty() {
                c_params.push("void".into());
            }
            writeln!(
                c,
                "{c_ret} (*const fjsig_{name})({}) = {name};",
                c_params.join(", ")
            )
            .unwrap();
            count += 1;
        }
    }
    if count == 0 {
        return Ok(vec![
            "no extern \"C\" functions found in src/ (signature check)".into(),
        ]);
    }
    let src = out_dir.join("signature_probe.c");
    fs::write(&src, c).map_err(|e| e.to_string())?;
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc)
        .args([
            "-std=c11",
            "-fsyntax-only",
            "-Werror",
            "-Wall",
            "-Wincompatible-pointer-types",
        ])
        .arg(&src)
        .arg("-I")
        .arg(include_dir)
        .output()
        .map_err(|e| format!("cannot run the C compiler '{cc}': {e}"))?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<_> = msg
            .lines()
            .filter(|l| l.contains("fjsig_") || l.contains("error"))
            .collect();
        for l in &lines {
            bad.push(format!("signature: {}", l.trim()));
        }
        if lines.is_empty() {
            bad.push(format!("signature probe failed: {msg}"));
        }
    }
    println!("cargo:rustc-env=FLEETJIT_SYS_SIGNATURES={count}");
    Ok(bad)
}

/// The Rust name of a C field that is a Rust keyword.
fn rust_field(c: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "impl", "box", "type", "ref", "move", "fn", "struct", "match", "loop", "use", "mod",
        "self", "super", "crate", "where", "trait", "priv", "override", "final", "virtual",
        "yield", "async", "await", "dyn", "abstract", "become", "macro", "typeof", "unsized", "do",
        "in", "let", "mut", "pub", "static", "unsafe", "extern", "enum", "const", "continue",
        "break", "return", "if", "else", "for", "while", "as", "true", "false",
    ];
    if KEYWORDS.contains(&c) {
        format!("{c}_")
    } else {
        c.to_string()
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
    let src_dir = manifest_dir.join("src");
    println!("cargo:rerun-if-changed={}", src_dir.display());
    let check = match probe_layout(&out_dir, &include_dir, &header, &src_dir) {
        Ok((values, missing, counts)) => generate_check(&values, &missing, counts),
        Err(why) => {
            println!("cargo:warning=fleetjit-sys layout probe skipped: {why}");
            format!(
                "/// Generated by build.rs: the probe could not run.\n\
                 pub fn layout_mismatches() -> Vec<String> {{ vec![{:?}.to_string()] }}\n\
                 pub const LAYOUT_VALUES: usize = 0;\n\
                 pub const LAYOUT_ITEMS: (usize, usize, usize) = (0, 0, 0);\n",
                format!("layout probe unavailable: {why}")
            )
        }
    };
    fs::write(out_dir.join("layout_check.rs"), check).unwrap();
}

/// Probe values, items missing on the Rust side, and (structs, fields,
/// constants) counted in the header.
type Probe = (Vec<(String, u64)>, Vec<String>, (usize, usize, usize));

/// Compiles and runs the C probe over everything the header declares that
/// `src/` also declares; returns `name value` pairs and what `src/` lacks.
fn probe_layout(
    out_dir: &Path,
    include_dir: &Path,
    header: &Path,
    src_dir: &Path,
) -> Result<Probe, String> {
    if !header.exists() {
        return Err(format!(
            "header {} not found (set FLEETJIT_INCLUDE_DIR)",
            header.display()
        ));
    }
    if env::var("HOST").ok() != env::var("TARGET").ok() {
        return Err("cross-compiling: the probe cannot run on the host".into());
    }
    let h = parse_header(&fs::read_to_string(header).map_err(|e| e.to_string())?);
    let mut rust_text = String::new();
    let mut entries: Vec<_> = fs::read_dir(src_dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    entries.sort();
    for p in entries {
        rust_text.push_str(&fs::read_to_string(&p).map_err(|e| e.to_string())?);
        rust_text.push('\n');
    }
    let r = parse_rust(&rust_text);
    let mut missing = Vec::new();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <fleetjit/fleetjit.h>\n\
         #define P(name, v) printf(\"%s %llu\\n\", name, (unsigned long long)(v))\n\
         int main(void) {\n",
    );
    let nfields: usize = h.structs.iter().map(|(_, f)| f.len()).sum();
    for (s, fields) in &h.structs {
        let Some((_, rfields)) = r.structs.iter().find(|(n, _)| n == s) else {
            missing.push(format!("struct {s}: not declared in fleetjit-sys"));
            continue;
        };
        writeln!(c, "  P(\"sizeof {s}\", sizeof({s}));").unwrap();
        writeln!(c, "  P(\"alignof {s}\", _Alignof({s}));").unwrap();
        for cf in fields {
            let f = rust_field(cf);
            if !rfields.contains(&f) {
                missing.push(format!(
                    "field {s}.{cf}: not declared in fleetjit-sys ({f})"
                ));
                continue;
            }
            writeln!(c, "  P(\"offsetof {s} {f}\", offsetof({s}, {cf}));").unwrap();
            writeln!(
                c,
                "  P(\"fieldsize {s} {f}\", sizeof(((const {s}*)0)->{cf}));"
            )
            .unwrap();
        }
        for f in rfields {
            if !fields.iter().any(|cf| &rust_field(cf) == f) {
                missing.push(format!(
                    "field {s}.{f}: in fleetjit-sys but not in the header"
                ));
            }
        }
    }
    for e in &h.enum_types {
        if !r.types.contains(e) {
            missing.push(format!("enum type {e}: no `pub type` in fleetjit-sys"));
            continue;
        }
        writeln!(c, "  P(\"sizeof {e}\", sizeof({e}));").unwrap();
    }
    for k in &h.constants {
        if !r.consts.contains(k) {
            missing.push(format!("constant {k}: no `pub const` in fleetjit-sys"));
            continue;
        }
        if k == "FJ_VERSION_MINOR" {
            // The header's minor may be newer than the crate's (additions
            // only); the crate's may not be newer than the header's.
            writeln!(c, "  P(\"minor {k}\", {k});").unwrap();
        } else {
            writeln!(c, "  P(\"const {k}\", {k});").unwrap();
        }
    }
    c.push_str("  return 0;\n}\n");
    missing.extend(check_signatures(out_dir, include_dir, &rust_text)?);
    let counts = (h.structs.len(), nfields, h.constants.len());
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
    Ok((values, missing, counts))
}

/// Emits `layout_mismatches()`, comparing each C value with its Rust twin.
fn generate_check(
    values: &[(String, u64)],
    missing: &[String],
    counts: (usize, usize, usize),
) -> String {
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
            ["minor", k] => {
                // Rust's minor must not be newer than the header's.
                writeln!(
                    r,
                    "    chk({name:?}, (fleetjit_sys::{k} as u64).max({v}), {v});"
                )
                .unwrap();
                continue;
            }
            _ => panic!("unexpected probe line {name}"),
        };
        writeln!(r, "    chk({name:?}, {rust}, {v});").unwrap();
    }
    for m in missing {
        writeln!(r, "    bad.push({m:?}.to_string());").unwrap();
    }
    r.push_str("    bad\n}\n");
    r.push_str(&format!(
        "/// (structs, fields, constants) the header declares.\npub const LAYOUT_ITEMS: (usize, usize, usize) = {counts:?};\n"
    ));
    r.push_str(&format!(
        "/// Number of values compared.\npub const LAYOUT_VALUES: usize = {};\n",
        values.len()
    ));
    r
}

//! Raw FFI declarations for `libfleetjit.so.1` (`include/fleetjit/fleetjit.h`).
//!
//! Every struct, enum, constant and `extern "C"` function is in `ffi.rs`,
//! which `scripts/dev/gen-bindings` writes from the header (ctest's
//! `bindings_generated_test` fails when it is not current); names, field
//! order and types are the header's. Conventions inherited from the header:
//! * every fallible call returns `*mut fj_status`, null meaning success; a
//!   non-null status belongs to the caller, who frees it with
//!   [`fj_status_free`];
//! * every argument struct starts with `struct_size` (set it to
//!   `size_of::<T>()`) and `ext` (null);
//! * strings are [`fj_str`] (pointer + length, UTF-8, no NUL needed);
//! * C enums are `u32` type aliases with `pub const` values, so a value a
//!   newer library returns is never undefined behaviour in Rust;
//! * a field or parameter named after a Rust keyword or primitive type
//!   takes a trailing `_` (`impl_`, `box_`, `fj_arg_v::i32_`); an anonymous
//!   union or a function pointer field is the type `<struct>_<field>`
//!   (`fj_arg_v`, `fj_runtime_options_log_fn`).
//!
//! The build script links the library found through `$FLEETJIT_LIB_DIR`,
//! else pkg-config, else `<repo>/build/lib` (see build.rs). The safe wrapper
//! is the `fleetjit` crate.
#![allow(non_camel_case_types)]
#![no_std]

mod ffi;
pub use ffi::*;

impl fj_str {
    /// A view of `s`; valid while `s` is.
    pub const fn from_str(s: &str) -> fj_str {
        fj_str {
            data: s.as_ptr() as *const core::ffi::c_char,
            size: s.len(),
        }
    }
    pub const fn empty() -> fj_str {
        fj_str {
            data: core::ptr::null(),
            size: 0,
        }
    }
}

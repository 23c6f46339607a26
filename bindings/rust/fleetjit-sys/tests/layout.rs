//! Every size, alignment, field offset, field size, enum value and version
//! macro of `fleetjit.h`, as the system C compiler sees it (build.rs probe),
//! compared with the Rust declarations.
include!(concat!(env!("OUT_DIR"), "/layout_check.rs"));

#[test]
fn layout_matches_c_header() {
    let bad = layout_mismatches();
    assert!(
        bad.is_empty(),
        "fleetjit-sys disagrees with fleetjit.h:\n{}",
        bad.join("\n")
    );
    println!("checked {} values against the C header", LAYOUT_VALUES);
}

#[test]
fn symbols_link_and_library_major_matches() {
    let v = unsafe { fleetjit_sys::fj_version() };
    assert_eq!(
        v >> 16,
        fleetjit_sys::FJ_VERSION_MAJOR,
        "library version {:#x}",
        v
    );
}

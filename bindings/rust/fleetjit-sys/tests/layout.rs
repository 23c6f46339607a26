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
    let (structs, fields, consts) = LAYOUT_ITEMS;
    println!(
        "checked {LAYOUT_VALUES} values against the C header: {structs} structs, {fields} fields, {consts} constants"
    );
    assert!(
        structs >= 18 && fields >= 149,
        "the probe read too little of the header"
    );
    let sigs: usize = option_env!("FLEETJIT_SYS_SIGNATURES")
        .unwrap_or("0")
        .parse()
        .unwrap();
    println!("checked {sigs} extern \"C\" signatures against the header's prototypes");
    assert!(sigs >= 48, "the signature check saw {sigs} functions");
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

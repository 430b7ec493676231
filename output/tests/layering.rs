//! The crate's modules are layered — atomic files and leaf formats, tables, reading tables back — and no two import each other
//! (see `stampede_devtools::assert_layered` for what is checked).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[&["atomic", "folder", "hdr", "markup"], &["table"], &["read"], &["long"]];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 2, "the scanner read the imports: {imports}");
}

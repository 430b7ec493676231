//! The crate's modules are layered — hashing, stores and strategies, the explorer, the journal and the status that read it, the comparison — and no two import each other
//! (see `stampede_devtools::assert_layered` for what is checked).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[&["hash"], &["store", "strategy"], &["explorer"], &["journal", "status"], &["compare"]];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 10, "the scanner read the imports: {imports}");
}

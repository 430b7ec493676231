//! The crate's modules are layered — measurement, components, models (the policies are the `stampede-policy` crate) (testing stands alone) — and no two import each other
//! (see `stampede_devtools::assert_layered` for what is checked).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[&["measurement", "testing"], &["components"], &["models"]];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 20, "the scanner read the imports: {imports}");
}

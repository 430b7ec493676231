//! The crate's modules are layered — the scenario layer: errors and typing, inputs from data, the scenario document, the models, the output schema, the resolved scenario — and no two import each other
//! (see `stampede_devtools::assert_layered` for what is checked).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[&["base"], &["inputs"], &["scenario"], &["models"], &["schema"], &["resolved"]];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 100, "the scanner read the imports: {imports}");
}

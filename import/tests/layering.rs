//! The crate's modules are layered — the span, then the model the spans feed, then
//! the assembler and the writer, then the formats' readers — and no two import each
//! other (see `stampede_devtools::assert_layered` for what is checked).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[&["span"], &["infer"], &["assemble", "write"], &["formats"]];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 5, "the scanner read the imports: {imports}");
}

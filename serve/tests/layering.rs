//! The crate's modules are layered — the guard, the page shell and the LLM runs, then
//! the pages that use them — and no two import each other (see
//! `stampede_devtools::assert_layered` for what is checked).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[&["guard", "shell", "llm"], &["pages"]];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 8, "the scanner read the imports: {imports}");
}

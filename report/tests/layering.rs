//! The crate's modules are layered — chart and folder, data, what a big graph shows, blocks, one-figure modules, sections and compare, the page — and no two import each other
//! (see `stampede_devtools::assert_layered` for what is checked).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[
        &["chart", "folder"],
        &["data"],
        &["big"],
        &["blocks"],
        &["race", "topology", "fit_page", "calibrate_page", "map_page", "rare_page"],
        &["sections", "compare"],
        &["page"],
    ];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 20, "the scanner read the imports: {imports}");
}

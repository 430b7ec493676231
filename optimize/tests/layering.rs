//! The crate's modules are layered — the race and the space, the search and the goal, the request, the answer, the driver — and no two import each other
//! (see `stampede_devtools::assert_layered` for what is checked).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[
        &["race", "space"],
        &["goal", "search", "across"],
        &["request"],
        &["answer"],
        &["driver"],
        &["calibrate", "map"],
    ];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 15, "the scanner read the imports: {imports}");
}

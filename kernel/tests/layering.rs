//! The crate's modules are layered — time and the small leaf types, the structures over them, the simulation loop — and no two import each other
//! (see `stampede_devtools::assert_layered` for what is checked).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[
        &["time", "float", "names", "slab", "timer", "ziggurat"],
        &["event_queue", "histogram", "rng", "timeout_fifo"],
        &["sim", "replica_quantiles"],
        &["splitting"],
    ];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 8, "the scanner read the imports: {imports}");
}

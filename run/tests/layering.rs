//! The crate's modules are layered — statistics, then the runner, then the output folder (rows, report, partials, checkpoint, pipeline, shards), then verify — and no two import each other
//! (see `stampede_devtools::assert_layered` for what is checked).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[
        &["plan", "sparse", "stats", "trace", "otlp"],
        &["batches", "moments", "fidelity"],
        &["windows", "latency"],
        &["runner"],
        &["layout", "rows", "over_time", "budget", "rare"],
        &["report"],
        &["partial", "summary", "precision", "warmup"],
        &["checkpoint"],
        &["pipeline"],
        &["shards", "staged"],
        &["verify"],
    ];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 60, "the scanner read the imports: {imports}");
}

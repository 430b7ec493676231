//! The crate's modules are layered and no two import each other (see
//! `stampede_devtools::assert_layered`): first the parts and policies that use no other
//! module, then those composed of one (the running quantile of its histogram, the
//! bulkhead of CoDel, the quota of token buckets, retry of backoff and the classifier),
//! then those built on the second layer (the hedge's and the adaptive timeout's running
//! quantile; the breaker, whose tests drive a quota beside it).

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[
        &[
            "log_histogram",
            "backoff",
            "classify",
            "codel",
            "token_bucket",
            "admission",
            "autoscale",
            "health",
            "limiter",
            "outlier",
            "pool",
            "retry_budget",
            "shedder",
        ],
        &["running_quantile", "bulkhead", "quota", "retry"],
        &["adaptive_timeout", "hedge", "breaker"],
    ];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 8, "the scanner read the imports: {imports}");
}

//! The crate's modules are layered — the clock, errors and parsers; the decision
//! events and outcomes; the layers by what they build on; the stacks built from
//! scenarios; the gateway — and no two import each other (issue 74: `events.rs` and
//! `stream.rs` did, until a stream's endings moved to `stream_end.rs`). See
//! `stampede_devtools::assert_layered` for what is checked.

#[test]
fn modules_import_only_from_layers_below_and_form_no_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: &[&[&str]] = &[
        &["clock", "error", "sse", "retry_after", "shared", "timeout", "stream_end"],
        &["events", "outcome"],
        &["stream", "fallback", "bulkhead", "quota"],
        &["retry", "gate", "admission"],
        &["gates", "hedge"],
        &["scenario"],
        &["steps"],
        &["gateway"],
    ];
    let imports = stampede_devtools::assert_layered(&src, layers);
    assert!(imports >= 40, "the scanner read the imports: {imports}");
}

//! `stampede import`'s OTLP JSON reader: spans per second on one core, from the JSON
//! line to the model (parse, intern, assemble traces, analyse them), over the trace of
//! the round-trip graph (`tests/cli/fixtures/import-roundtrip.toml`, 20 s at 200
//! requests/s: about 46,000 spans in 16 lines) exported by `run --trace-format otlp`.
//! Target (issue 49): ≥ 1 million spans per second. `otlp_json_spans_serde_reader`
//! measures the serde reader alone beside it (the path of any document the scanner
//! gives up).
//!
//! `cargo bench -p stampede-benches --bench import`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stampede_import::formats::{otlp, Reader};
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Overrides, Scenario};

/// The OTLP JSON lines of the round-trip graph's traced replica.
fn lines() -> Vec<Vec<u8>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/cli/fixtures/import-roundtrip.toml");
    let source = load_scenario_source(path).expect("the fixture");
    let scenario = Scenario::resolve(source, &Overrides::default()).expect("valid");
    let point = scenario.grid_point(0).expect("one point");
    let trace = point.model.trace_replica(&point.run, scenario.run.seed, 0).expect("the graph traces").trace;
    let mut text = Vec::new();
    stampede_run::otlp::write_point(&mut text, &trace, "graph", 0, 0).expect("in memory");
    text.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect()
}

fn import(c: &mut Criterion) {
    let lines = lines();
    type ReadDocument = fn(&[u8], &mut Reader) -> Result<(), String>;
    let read_by = |lines: &[Vec<u8>], read_document: ReadDocument| {
        let mut reader = Reader::new(60_000_000_000);
        for line in lines {
            read_document(line, &mut reader).expect("our own export reads");
        }
        reader.finish()
    };
    let read = |lines: &[Vec<u8>]| read_by(lines, otlp::read_document);
    let spans = read(&lines).0.spans;
    let bytes: usize = lines.iter().map(Vec::len).sum();
    println!("{spans} spans, {bytes} bytes ({} bytes a span)", bytes as u64 / spans);
    let mut group = c.benchmark_group("import");
    group.sample_size(20);
    group.throughput(Throughput::Elements(spans));
    group.bench_function("otlp_json_spans", |b| b.iter(|| read(&lines)));
    // The serde reader alone, beside it: what a document the scanner gives up costs.
    group.bench_function("otlp_json_spans_serde_reader", |b| b.iter(|| read_by(&lines, otlp::read_document_by_serde)));
    group.finish();
}

criterion_group!(benches, import);
criterion_main!(benches);

//! The import's readers fuzzed: each of the shop's exports (OTLP JSON, Jaeger, Zipkin,
//! Alibaba v2021 and v2022) and each layout fixture (pretty OTLP, OTLP protobuf whole
//! and framed, Jaeger's one trace and list of spans, Zipkin's shared spans and
//! fragments) damaged at random — bytes replaced, removed, inserted, the
//! file cut short — is read by every format's reader and by detection. The only
//! allowed outcomes are a model or an error; never a panic, and never more than a
//! second. 500 cases by default (CI); `PROPTEST_CASES=10000 cargo test -p
//! stampede-import --test fuzz` is the long run (documented in CONTRIBUTING.md).

use std::time::Instant;

use proptest::prelude::{any, ProptestConfig};
use proptest::sample::{select, Index};
use stampede_import::{import, Format, Input, Options};

const EXPORTS: [&str; 12] = [
    "docs/src/examples/shop.otlp.json",
    "docs/src/examples/shop.jaeger.json",
    "docs/src/examples/shop.zipkin.json",
    "docs/src/examples/shop.alibaba-2021.csv",
    "docs/src/examples/shop.alibaba-2022.csv",
    "tests/cli/fixtures/traces/otlp-pretty.json",
    "tests/cli/fixtures/traces/tempo-v2.json",
    "tests/cli/fixtures/traces/otlp-proto.pb",
    "tests/cli/fixtures/traces/otlp-proto-frames.pb",
    "tests/cli/fixtures/traces/jaeger-one-trace.json",
    "tests/cli/fixtures/traces/jaeger-spans.json",
    "tests/cli/fixtures/traces/zipkin-shared-and-fragments.json",
];

fn export(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../{name}", env!("CARGO_MANIFEST_DIR"))).expect("the export")
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(500)
}

/// Every reader (and detection) on `bytes`: a model or an error, within a second.
fn every_reader(bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("traces");
    std::fs::write(&path, bytes).unwrap();
    let options = Options {
        name: "fuzz".into(),
        data_dir: "fuzz.data".into(),
        sample_rate: 1.0,
        source: "fuzz".into(),
        window_s: None,
    };
    let started = Instant::now();
    for format in [
        None,
        Some(Format::OtlpJson),
        Some(Format::OtlpProto),
        Some(Format::JaegerJson),
        Some(Format::ZipkinJson),
        Some(Format::AlibabaCsv),
    ] {
        let input = Input { files: vec![path.clone()], format, bucket_ns: 1_000_000_000, skew_ns: 5_000_000 };
        let _ = import(&input, &options);
    }
    assert!(started.elapsed().as_secs_f64() < 1.0, "{:?} on {} bytes", started.elapsed(), bytes.len());
}

proptest::proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn damaged_exports_never_panic(
        which in 0usize..EXPORTS.len(),
        edits in proptest::collection::vec((any::<Index>(), 0usize..3, select(b"\"{}[],:0a\\ -.e\n\t\xef\xbb\xbf".to_vec())), 1..12),
        cut in any::<Option<Index>>(),
    ) {
        let mut bytes = export(EXPORTS[which]);
        for (at, how, byte) in edits {
            let i = at.index(bytes.len().max(1)).min(bytes.len().saturating_sub(1));
            match how {
                0 if !bytes.is_empty() => bytes[i] = byte,
                1 if !bytes.is_empty() => { bytes.remove(i); }
                _ => bytes.insert(i, byte),
            }
        }
        if let Some(cut) = cut {
            let len = cut.index(bytes.len().max(1));
            bytes.truncate(len);
        }
        every_reader(&bytes);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        every_reader(&bytes);
    }
}

/// The undamaged exports import (the fuzz starts from files that work).
#[test]
fn every_export_imports() {
    for name in EXPORTS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name.rsplit('/').next().unwrap());
        std::fs::write(&path, export(name)).unwrap();
        let options = Options {
            name: "x".into(),
            data_dir: "x.data".into(),
            sample_rate: 1.0,
            source: name.into(),
            window_s: None,
        };
        let input = Input { files: vec![path], format: None, bucket_ns: 1_000_000_000, skew_ns: 5_000_000 };
        assert!(import(&input, &options).is_ok(), "{name}");
    }
}

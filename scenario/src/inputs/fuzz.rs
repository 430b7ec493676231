//! The input readers fuzzed (issue 43, item 3): HdrHistogram (V2, compressed, an
//! interval log), Prometheus text and JSON, CSV and Parquet, and the production
//! metrics `calibrate` reads (a CSV or a range-query matrix), each fed random bytes and
//! valid files with bytes flipped, truncated or spliced. None may panic, and none may
//! allocate by a length the bytes declare: a declared length beyond the file, or a
//! compressed stream that inflates without bound, is refused in milliseconds.
//! `PROPTEST_CASES=10000 cargo test -p stampede-scenario fuzz` runs more cases
//! (the default, 256 a reader, runs in seconds).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
use hdrhistogram::Histogram;
use proptest::prelude::*;

use super::sources;

fn valid_histogram() -> Histogram<u64> {
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 10_000_000, 3).unwrap();
    for i in 1..=500u64 {
        histogram.record(100 + i * i).unwrap();
    }
    histogram
}

fn v2() -> Vec<u8> {
    let mut bytes = Vec::new();
    V2Serializer::new().serialize(&valid_histogram(), &mut bytes).unwrap();
    bytes
}

fn v2_deflate() -> Vec<u8> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(&valid_histogram(), &mut bytes).unwrap();
    bytes
}

fn hlog() -> Vec<u8> {
    let mut log = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let mut writer = IntervalLogWriterBuilder::new().begin_log_with(&mut log, &mut serializer).unwrap();
    let second = std::time::Duration::from_secs(1);
    writer.write_histogram(&valid_histogram(), second, second, None).unwrap();
    drop(writer);
    log
}

const EXPOSITION: &str = "# TYPE rpc_seconds histogram\nrpc_seconds_bucket{le=\"0.01\"} 200\n\
     rpc_seconds_bucket{le=\"0.05\"} 700\nrpc_seconds_bucket{le=\"+Inf\"} 1000\nrpc_seconds_sum 60\nrpc_seconds_count 1000\n";

const API: &str = r#"{"status":"success","data":{"resultType":"vector","result":[
  {"metric":{"__name__":"rpc_seconds_bucket","le":"0.1"},"value":[1,"5"]},
  {"metric":{"__name__":"rpc_seconds_bucket","le":"+Inf"},"value":[1,"9"]}]}}"#;

fn parquet_file() -> Vec<u8> {
    use arrow_array::{Float64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![Field::new("lat", DataType::Float64, true)]));
    let values = Float64Array::from((0..300).map(|i| f64::from(i) * 0.01).collect::<Vec<_>>());
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values)]).unwrap();
    let mut bytes = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    bytes
}

/// Every reader on `bytes` (written to a fresh file, so nothing is sealed twice): it
/// may refuse, never panic, and answers within a second.
fn every_reader(bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    for name in ["x.hdr", "x.csv", "x.txt", "x.parquet"] {
        let path = dir.path().join(name);
        std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
        let _ = sources::hdr(&path, (None, None));
        let _ = sources::hdr(&path, (Some(0.0), Some(10.0)));
        let _ = sources::sample(&path, None);
        let _ = sources::sample(&path, Some("lat"));
        let _ = sources::labels(&path, "lat");
        let _ = sources::prometheus(&path, "rpc_seconds", &BTreeMap::new());
        let _ = sources::bounded_histogram(bytes);
        let _ = super::observed::read(&path, &[]);
        let selector = super::observed::Selector::parse("rpc_seconds").expect("a selector");
        let _ = super::observed::read(&path, &[("m".to_string(), selector)]);
    }
    assert!(started.elapsed().as_secs_f64() < 2.0, "the readers took {:?} on {} bytes", started.elapsed(), bytes.len());
}

fn seeds() -> Vec<Vec<u8>> {
    vec![
        v2(),
        v2_deflate(),
        hlog(),
        EXPOSITION.into(),
        API.into(),
        parquet_file(),
        b"lat\n0.1\n0.2\n".to_vec(),
        b"time_s,a.goodput_rps,a.p99_s\n0,1,0.2\n60,,0.3\n".to_vec(),
        br#"{"data":{"resultType":"matrix","result":[{"metric":{"__name__":"rpc_seconds"},"values":[[1,"0.5"],[2,"NaN"]]}]}}"#.to_vec(),
    ]
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        every_reader(&bytes);
    }

    #[test]
    fn damaged_valid_files_never_panic(
        which in 0usize..9,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = seeds().swap_remove(which);
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if truncate {
            let len = cut.index(bytes.len());
            bytes.truncate(len);
        }
        every_reader(&bytes);
    }
}

/// An interval log's histograms draw their inflated bytes from one allowance
/// ([`sources::MAX_INFLATED_LOG_BYTES`]), not only each its own cap: lines that each
/// inflate to just under the per-histogram cap cannot add up without bound.
#[test]
fn a_logs_histograms_share_one_inflation_allowance() {
    let one = v2_deflate();
    let inflated = v2().len() as u64;
    let mut allowance = 3 * inflated;
    for _ in 0..3 {
        assert_eq!(sources::bounded_histogram_within(&one, &mut allowance).unwrap().len(), 500);
    }
    assert_eq!(allowance, 0, "each histogram took what it inflated to");
    let error = sources::bounded_histogram_within(&one, &mut allowance).unwrap_err();
    assert!(error.contains("together"), "{error}");
}

/// A 40-byte V2 header that declares 2 GB of counts (and one a negative length, read
/// as u32) is refused without allocating it; so is a compressed one declaring more
/// than follows, and a DEFLATE bomb (a 200 MB inflation of zeros) stops at the cap.
#[test]
fn declared_lengths_and_bombs_are_refused_in_milliseconds() {
    let started = Instant::now();
    for declared in [0x7fff_ffffu32, 0xffff_fff0u32] {
        let mut header = v2()[..40].to_vec();
        header[4..8].copy_from_slice(&declared.to_be_bytes());
        header.extend_from_slice(b"abc");
        let error = sources::bounded_histogram(&header).unwrap_err();
        assert!(error.contains("follow its header"), "{error}");
    }
    let mut compressed = v2_deflate();
    compressed[4..8].copy_from_slice(&0x7fff_0000u32.to_be_bytes());
    assert!(sources::bounded_histogram(&compressed).unwrap_err().contains("compressed bytes"));
    // The bomb: a V2 header declaring 200 MB of counts, then 200 MB of zeros, deflated.
    let mut inner = v2()[..40].to_vec();
    inner[4..8].copy_from_slice(&200_000_000u32.to_be_bytes());
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&inner).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..200 {
        encoder.write_all(&zeros).unwrap();
    }
    let stream = encoder.finish().unwrap();
    let mut bomb = v2_deflate()[..4].to_vec();
    bomb.extend_from_slice(&(stream.len() as u32).to_be_bytes());
    bomb.extend_from_slice(&stream);
    assert!(bomb.len() < 1 << 20, "a small file: {} bytes", bomb.len());
    let error = sources::bounded_histogram(&bomb).unwrap_err();
    assert!(error.contains("inflates to more than"), "{error}");
    assert!(started.elapsed().as_secs_f64() < 5.0, "{:?}", started.elapsed());
    // The valid ones still read.
    assert_eq!(sources::bounded_histogram(&v2()).unwrap().len(), 500);
    assert_eq!(sources::bounded_histogram(&v2_deflate()).unwrap().len(), 500);
}

/// Parquet as pandas, pyarrow, DuckDB and Spark write it: every codec (snappy, gzip,
/// lz4, zstd, brotli), dictionary and plain encodings, a nullable column, float32 and
/// integers; a text column dictionary-encoded as pandas writes a category.
#[test]
fn parquet_in_every_codec_and_encoding_is_read() {
    use arrow_array::{Float32Array, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    let schema = Arc::new(Schema::new(vec![
        Field::new("lat", DataType::Float32, true),
        Field::new("n", DataType::Int64, false),
        Field::new("route", DataType::Utf8, true),
    ]));
    let lat = Float32Array::from((0..1000).map(|i| 0.001 * (i % 97) as f32).collect::<Vec<_>>());
    let n = Int64Array::from((0..1000).collect::<Vec<i64>>());
    let route = StringArray::from((0..1000).map(|i| if i % 3 == 0 { "/a" } else { "/b" }).collect::<Vec<_>>());
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(lat), Arc::new(n), Arc::new(route)]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let codecs = [
        Compression::UNCOMPRESSED,
        Compression::SNAPPY,
        Compression::GZIP(GzipLevel::default()),
        Compression::LZ4_RAW,
        Compression::LZ4,
        Compression::ZSTD(ZstdLevel::default()),
        Compression::BROTLI(BrotliLevel::default()),
    ];
    for (i, codec) in codecs.into_iter().enumerate() {
        for dictionary in [true, false] {
            let properties = WriterProperties::builder()
                .set_compression(codec)
                .set_dictionary_enabled(dictionary)
                .set_max_row_group_row_count(Some(300))
                .build();
            let path = dir.path().join(format!("t{i}-{dictionary}.parquet"));
            let mut writer = parquet::arrow::ArrowWriter::try_new(
                std::fs::File::create(&path).unwrap(),
                schema.clone(),
                Some(properties),
            )
            .unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
            let values = sources::sample(&path, Some("lat")).unwrap_or_else(|e| panic!("{codec:?}: {e}"));
            assert_eq!(values.len(), 1000, "{codec:?}");
            assert!((values[96] - 0.096).abs() < 1e-6);
            assert_eq!(sources::sample(&path, Some("n")).unwrap()[999], 999.0);
            let routes = sources::labels(&path, "route").unwrap();
            assert_eq!((routes[0].as_str(), routes[1].as_str(), routes.len()), ("/a", "/b", 1000));
        }
    }
}

/// A Parquet column whose metadata declares more bytes than the input limit is
/// refused before its pages are read.
#[test]
fn a_parquet_column_larger_than_the_limit_is_refused_from_its_metadata() {
    let bytes: Arc<[u8]> = parquet_file().into();
    let error = stampede_output::read::number_column_of(bytes.clone(), Path::new("p.parquet"), "lat", 100).unwrap_err();
    assert!(error.to_string().contains("declares") && error.to_string().contains("at most 100 bytes"), "{error}");
    assert_eq!(
        stampede_output::read::number_column_of(bytes, Path::new("p.parquet"), "lat", 1 << 20).unwrap().len(),
        300
    );
}

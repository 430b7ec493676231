//! HdrHistogram serialisation in the V2 format (uncompressed), the form other
//! HdrHistogram libraries (Java, Python `hdrh`, Go) decode.

use hdrhistogram::serialization::{Serializer, V2Serializer};
use hdrhistogram::Histogram;

/// The V2 serialised bytes of `histogram`.
pub fn serialize_v2(histogram: &Histogram<u64>) -> Vec<u8> {
    let mut bytes = Vec::new();
    V2Serializer::new().serialize(histogram, &mut bytes).expect("writing to a Vec cannot fail");
    bytes
}

/// Decodes V2 bytes written by [`serialize_v2`] (or any V2 encoder).
pub fn deserialize_v2(mut bytes: &[u8]) -> Result<Histogram<u64>, String> {
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes)
        .map_err(|e| format!("not an HdrHistogram V2 encoding: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn round_trips() {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 1_000_000, 3).unwrap();
        for v in [1, 5, 900, 123_456] {
            histogram.record(v).unwrap();
        }
        let bytes = serialize_v2(&histogram);
        // V2 cookie: base 0x1c849303 with the word-size nibble (8 bytes → 0x10), as in Java.
        assert_eq!(&bytes[..4], &[0x1c, 0x84, 0x93, 0x13]);
        let back: Histogram<u64> = Deserializer::new().deserialize(&mut bytes.as_slice()).unwrap();
        assert_eq!(back, histogram);
    }
}

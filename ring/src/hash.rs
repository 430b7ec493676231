//! Hashing names onto the ring. A name's hash is 64 bits; its ring position is the
//! upper 32 — for SHA-256 exactly the seed's "first 8 hex digits" — so the ring
//! strategies and the 64-bit ones (jump, rendezvous, Maglev) share one hash per key.

use sha2::{Digest, Sha256};
use stampede_kernel::rng::mix64;

stampede_kernel::named_enum! {
    /// How names are hashed.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum HashKind {
        /// SHA-256, first 8 bytes big-endian: the seed's hash (its position is the
        /// first 8 hex digits of the digest).
        Sha256 = "sha256",
        /// FNV-1a (64-bit) finished with SplitMix64's mixer: about 20× faster.
        Fast = "fast",
    }
}

impl HashKind {
    /// The 64-bit hash of `bytes`.
    pub fn hash(self, bytes: &[u8]) -> u64 {
        match self {
            HashKind::Sha256 => {
                let digest = Sha256::digest(bytes);
                u64::from_be_bytes(digest[..8].try_into().expect("a digest has 32 bytes"))
            }
            HashKind::Fast => {
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for &b in bytes {
                    h ^= b as u64;
                    h = h.wrapping_mul(0x0000_0100_0000_01b3);
                }
                mix64(h)
            }
        }
    }

    /// The hash of a name.
    pub fn name(self, name: &str) -> u64 {
        self.hash(name.as_bytes())
    }
}

/// A 64-bit hash's position on the 32-bit ring.
#[inline]
pub fn position(hash: u64) -> u32 {
    (hash >> 32) as u32
}

/// A second, independent hash derived from `hash` and `salt` (probes, scores, offsets).
#[inline]
pub fn derive(hash: u64, salt: u64) -> u64 {
    mix64(hash ^ mix64(salt.wrapping_add(0x9e37_79b9_7f4a_7c15)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's hash: `parseInt(sha256(input).hex.substring(0, 8), 16)`.
    #[test]
    fn sha256_positions_are_the_first_eight_hex_digits() {
        // Checked independently: `echo -n abc | sha256sum` starts ba7816bf8f01cfea.
        let hash = HashKind::Sha256.name("abc");
        assert_eq!(position(hash), 0xba78_16bf, "sha256(\"abc\") starts ba7816bf");
        assert_eq!(hash, 0xba78_16bf_8f01_cfea);
    }
}

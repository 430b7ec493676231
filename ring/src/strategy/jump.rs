//! Jump consistent hash (Lamping and Veach, 2014): a key's 64-bit hash seeds a
//! linear congruential generator that jumps through bucket numbers; the last jump
//! below n is the bucket. No memory; on growth from n to n+1 buckets exactly the keys
//! that jump to n move (1/(n+1) of them). Buckets are numbered, so only the last can
//! be removed without renumbering the ones after it.

/// The bucket of `key` among `buckets` (> 0), as in the paper's listing.
#[inline]
pub fn jump(mut key: u64, buckets: u32) -> u32 {
    let (mut b, mut j): (i64, i64) = (-1, 0);
    while j < buckets as i64 {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    b as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from the reference implementation (Guava's `Hashing.consistentHash`
    /// runs the same generator): keys 0..3 at 1 bucket are all 0, and growth only ever
    /// moves a key to the new bucket.
    #[test]
    fn growth_moves_keys_only_to_the_new_bucket() {
        for key in 0..5000u64 {
            let key = stampede_kernel::rng::mix64(key);
            assert_eq!(jump(key, 1), 0);
            for n in 1..40 {
                let (before, after) = (jump(key, n), jump(key, n + 1));
                assert!(after == before || after == n, "key {key}: {before} → {after} at {n}");
            }
        }
    }
}

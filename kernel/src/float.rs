//! Float helpers that are exact and cheap on every x86-64.
//!
//! Baseline x86-64 (which the release build targets, so that results and binaries
//! travel) has no instruction that rounds a double to an integer value: `f64::round`
//! is a call into a software routine, 3.4% of an llm-stack replica where token counts
//! are rounded. The truncating conversion to an integer is an instruction, and the
//! fraction it leaves is exact, so rounding half away from zero needs nothing more.
//! (Non-negative seconds to integer nanoseconds have their own, branch-free
//! [`crate::time::round_to_nanos`].)

/// `x.round()`, bit for bit (half away from zero, the sign of zero kept), without the
/// library call for |x| < 2^63.
#[inline]
pub fn round(x: f64) -> f64 {
    if x.is_nan() || x.abs() >= 9.2e18 {
        return x.round(); // huge (already an integer), infinite or NaN
    }
    let truncated = x as i64 as f64; // toward zero: exact
    let fraction = x - truncated; // exact: the bits of x below its units
    let rounded = if fraction >= 0.5 {
        truncated + 1.0
    } else if fraction <= -0.5 {
        truncated - 1.0
    } else {
        truncated
    };
    rounded.copysign(x) // -0.3 rounds to -0.0, as f64::round does
}

/// `round(x).max(1.0) as u64` — a count drawn from a continuous distribution (an
/// LLM call's tokens), rounded half away from zero and at least one — with one
/// predictable branch: the half-way test is a flag added, not a branch, since it goes
/// either way at random (an `llm-stack` replica draws 8,000 token counts).
#[inline]
pub fn round_to_count(x: f64) -> u64 {
    // Below 1.5 (and NaN) rounds to at most 1; past 2^63 the value is an integer
    // already and the conversion saturates as `as u64` does.
    if x.is_nan() || x < 1.5 {
        return 1;
    }
    if x >= 9.2e18 {
        return x as u64;
    }
    let truncated = x as u64; // toward zero: exact
    let fraction = x - truncated as f64; // exact
    truncated + u64::from(fraction >= 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_at_the_edges_are_the_rounded_value_at_least_one() {
        let edges = [f64::NAN, f64::NEG_INFINITY, -1.0, -0.0, 0.0, 0.49, 0.5, 1.0, 1.49, 1.5, 2.5, 1e15 + 0.5];
        let huge = [9.1e18, 9.2e18, 1.9e19, f64::INFINITY];
        for x in edges.into_iter().chain(huge) {
            assert_eq!(round_to_count(x), round(x).max(1.0) as u64, "{x}");
        }
        assert_eq!(round_to_count(2.5), 3, "half away from zero");
    }

    #[test]
    fn halves_signs_and_edges_round_as_the_library_does() {
        let cases = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            0.3,
            -0.3,
            4503599627370495.5,
            4503599627370497.0,
            9007199254740993.0,
            9.2e18,
            -9.3e18,
            1e300,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            123456.5,
            -123456.49999999999,
        ];
        for x in cases {
            assert_eq!(round(x).to_bits(), x.round().to_bits(), "round({x:e})");
        }
        assert!(round(f64::NAN).is_nan());
    }

    proptest! {
        #[test]
        fn any_double_rounds_as_the_library_does(bits in any::<u64>()) {
            let x = f64::from_bits(bits);
            prop_assume!(!x.is_nan());
            prop_assert_eq!(round(x).to_bits(), x.round().to_bits());
        }

        #[test]
        fn a_count_is_the_rounded_value_at_least_one(bits in any::<u64>(), x in -10.0f64..1e6, halves in 0u64..1_000_000) {
            let wide = f64::from_bits(bits);
            for x in [wide, x, halves as f64 + 0.5, halves as f64 + 0.499_999_999_999] {
                prop_assert_eq!(round_to_count(x), round(x).max(1.0) as u64, "{}", x);
            }
        }

        #[test]
        fn any_moderate_value_rounds_as_the_library_does(x in -1e7f64..1e7, halves in -2_000_000i64..2_000_000) {
            prop_assert_eq!(round(x).to_bits(), x.round().to_bits());
            let half = halves as f64 + 0.5;
            prop_assert_eq!(round(half).to_bits(), half.round().to_bits());
        }
    }
}

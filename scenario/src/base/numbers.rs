//! Numbers as messages and files print them: scientific notation to a number of
//! significant digits with the mantissa's trailing zeros dropped (`1e300`,
//! `1.23457e-300`, `4.62963e-5`). One function, so an error, a precision target and a
//! chart label abbreviate alike.

/// `value` in scientific notation with `digits` significant digits (at least 1),
/// trailing zeros of the mantissa dropped: `scientific(1.5e-7, 4)` is `1.5e-7`.
pub fn scientific(value: f64, digits: usize) -> String {
    let text = format!("{value:.*e}", digits.max(1) - 1);
    let (mantissa, exponent) = text.split_once('e').expect("scientific notation");
    let mantissa = if mantissa.contains('.') { mantissa.trim_end_matches('0').trim_end_matches('.') } else { mantissa };
    format!("{mantissa}e{exponent}")
}

#[cfg(test)]
mod tests {
    use super::scientific;

    #[test]
    fn digits_kept_and_zeros_dropped() {
        assert_eq!(scientific(1e300, 6), "1e300");
        assert_eq!(scientific(1.234_567_8e-300, 6), "1.23457e-300");
        assert_eq!(scientific(1.5e-7, 4), "1.5e-7");
        assert_eq!(scientific(-25_000.0, 3), "-2.5e4");
        assert_eq!(scientific(7.0, 1), "7e0");
    }
}

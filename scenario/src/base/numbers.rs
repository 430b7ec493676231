//! Numbers as messages and files print them: scientific notation to a number of
//! significant digits with the mantissa's trailing zeros dropped (`1e300`,
//! `1.23457e-300`, `4.62963e-5`). One function, so an error, a precision target and a
//! chart label abbreviate alike. And durations as flags write them ([`duration_s`]),
//! one reader for every command.

/// `value` in scientific notation with `digits` significant digits (at least 1),
/// trailing zeros of the mantissa dropped: `scientific(1.5e-7, 4)` is `1.5e-7`.
pub fn scientific(value: f64, digits: usize) -> String {
    let text = format!("{value:.*e}", digits.max(1) - 1);
    let (mantissa, exponent) = text.split_once('e').expect("scientific notation");
    let mantissa = if mantissa.contains('.') { mantissa.trim_end_matches('0').trim_end_matches('.') } else { mantissa };
    format!("{mantissa}e{exponent}")
}

/// A duration as a flag writes it, in seconds: plain seconds, or a number with `ms`,
/// `s`, `m`, `h` or `d` (`500ms`, `60s`, `10m`, `1d`); `None` unless positive and finite.
pub fn duration_s(text: &str) -> Option<f64> {
    let text = text.trim();
    let units = [("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86_400.0)];
    let (number, scale) =
        units.iter().find_map(|&(unit, scale)| text.strip_suffix(unit).map(|n| (n, scale))).unwrap_or((text, 1.0));
    number.trim().parse::<f64>().ok().map(|n| n * scale).filter(|s| s.is_finite() && *s > 0.0)
}

#[cfg(test)]
mod tests {
    use super::{duration_s, scientific};

    #[test]
    fn durations_read_with_their_units() {
        assert_eq!(duration_s("90"), Some(90.0));
        assert_eq!(duration_s("500ms"), Some(0.5));
        assert_eq!(duration_s(" 10m "), Some(600.0));
        assert_eq!(duration_s("1d"), Some(86_400.0));
        assert_eq!(duration_s("-1h"), None);
        assert_eq!(duration_s("soon"), None);
    }

    #[test]
    fn digits_kept_and_zeros_dropped() {
        assert_eq!(scientific(1e300, 6), "1e300");
        assert_eq!(scientific(1.234_567_8e-300, 6), "1.23457e-300");
        assert_eq!(scientific(1.5e-7, 4), "1.5e-7");
        assert_eq!(scientific(-25_000.0, 3), "-2.5e4");
        assert_eq!(scientific(7.0, 1), "7e0");
    }
}

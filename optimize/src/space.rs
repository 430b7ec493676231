//! What `optimize` searches: `--range` dimensions, the low-discrepancy design that
//! samples them, and how a point of the unit cube becomes field values.
//!
//! A dimension maps u ∈ [0, 1] to a value: linearly, on a log scale, or to an
//! integer (each integer of the range an equal share of the interval). The design is
//! the Halton sequence (bases 2, 3, 5, …; J. H. Halton, 1960): deterministic, so a
//! search is the same on every run, and spread evenly at any prefix length. Each
//! generation of a search takes a fresh stretch of the sequence.

use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::scenario::overrides::normalize_path;

/// How a range's values are spread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
    Integer,
}

/// `--range PATH=LO..HI[:log|:int]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Dimension {
    pub path: String,
    pub low: f64,
    pub high: f64,
    pub scale: Scale,
}

impl Dimension {
    /// Parses `retry.budget_ratio=0.01..0.5:log` or `shards.servers=2..16:int`.
    pub fn parse(text: &str) -> Result<Dimension> {
        let bad = |why: &str| {
            Error::bad_input(format!("--range {text:?}: {why}"))
                .with_hint("e.g. --range 'retry.budget_ratio=0.01..0.5:log' or --range 'shards.servers=2..16:int'")
        };
        let (path, rest) = text.split_once('=').ok_or_else(|| bad("expected PATH=LO..HI"))?;
        let (span, scale) = match rest.rsplit_once(':') {
            Some((span, "log")) => (span, Scale::Log),
            Some((span, "int")) => (span, Scale::Integer),
            Some((span, "linear")) => (span, Scale::Linear),
            Some((_, other)) => return Err(bad(&format!("unknown scale {other:?}; expected log, int or linear"))),
            None => (rest, Scale::Linear),
        };
        let (low, high) = span.split_once("..").ok_or_else(|| bad("expected LO..HI"))?;
        let number = |s: &str| s.trim().parse::<f64>().ok().filter(|v| v.is_finite());
        let (Some(low), Some(high)) = (number(low), number(high)) else {
            return Err(bad("both ends must be numbers"));
        };
        if low >= high {
            return Err(bad(&format!("the range is empty: {low} is not below {high}")));
        }
        if scale == Scale::Log && low <= 0.0 {
            return Err(bad("a log range must be above 0"));
        }
        if scale == Scale::Integer && (low.fract() != 0.0 || high.fract() != 0.0) {
            return Err(bad("an integer range needs integer ends"));
        }
        let path = normalize_path(path.trim());
        stampede_scenario::scenario::overrides::check_path(&path, "--range")?;
        Ok(Dimension { path, low, high, scale })
    }

    /// The value at `u` ∈ [0, 1] (integers rounded; floats to 6 significant digits,
    /// so printed values are the simulated ones).
    pub fn value(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        match self.scale {
            Scale::Linear | Scale::Log => round_significant(self.unrounded(u)),
            Scale::Integer => (self.low + (u * (self.high - self.low + 1.0)).floor()).min(self.high),
        }
    }

    /// The point at `u` ∈ [0, 1] on the range's scale, unrounded: where an estimate
    /// between two values lies (a stability map's boundary), not a value to simulate.
    /// An integer range is treated as the line from its low to its high end.
    pub fn unrounded(&self, u: f64) -> f64 {
        match self.scale {
            Scale::Log => self.low * (self.high / self.low).powf(u),
            Scale::Linear | Scale::Integer => self.low + u * (self.high - self.low),
        }
    }

    /// Where `value` sits in [0, 1] (the centre of an integer's share).
    pub fn unit(&self, value: f64) -> f64 {
        match self.scale {
            Scale::Linear => (value - self.low) / (self.high - self.low),
            Scale::Log => (value / self.low).ln() / (self.high / self.low).ln(),
            Scale::Integer => (value - self.low + 0.5) / (self.high - self.low + 1.0),
        }
    }

    /// The value as TOML (an integer for an integer range).
    pub fn toml(&self, value: f64) -> toml::Value {
        match self.scale {
            Scale::Integer => toml::Value::Integer(value as i64),
            _ => toml::Value::Float(value),
        }
    }
}

fn round_significant(value: f64) -> f64 {
    if value == 0.0 || !value.is_finite() {
        return value;
    }
    let digits = 6 - value.abs().log10().ceil() as i32;
    let factor = 10f64.powi(digits);
    (value * factor).round() / factor
}

const PRIMES: [u32; 16] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53];

/// The most `--range` dimensions (one Halton base each).
pub const MAX_DIMENSIONS: usize = PRIMES.len();

/// Element `index` (≥ 1) of the Halton sequence in `dimensions` dimensions.
pub fn halton(index: u64, dimensions: usize) -> Vec<f64> {
    assert!(dimensions <= MAX_DIMENSIONS);
    PRIMES[..dimensions]
        .iter()
        .map(|&base| {
            let (mut i, mut f, mut r) = (index, 1.0, 0.0);
            while i > 0 {
                f /= base as f64;
                r += f * (i % base as u64) as f64;
                i /= base as u64;
            }
            r
        })
        .collect()
}

/// `count` points of the box centred on `centre` with side `width` (clipped to the
/// unit cube), from the Halton sequence's stretch for `generation`.
pub fn sample_box(centre: &[f64], width: f64, count: usize, generation: u64) -> Vec<Vec<f64>> {
    let start = 1 + generation * 10_007;
    (0..count as u64)
        .map(|i| {
            halton(start + i, centre.len())
                .into_iter()
                .zip(centre)
                .map(|(u, &c)| {
                    let (lo, hi) = ((c - width / 2.0).max(0.0), (c + width / 2.0).min(1.0));
                    lo + u * (hi - lo)
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halton_is_the_radical_inverse() {
        assert_eq!(halton(1, 2), vec![0.5, 1.0 / 3.0]);
        assert_eq!(halton(2, 2), vec![0.25, 2.0 / 3.0]);
        assert_eq!(halton(3, 1), vec![0.75]);
        // Low discrepancy: 64 points leave no eighth of [0, 1] empty in either axis.
        for axis in 0..2 {
            let mut seen = [false; 8];
            for i in 1..=64 {
                seen[(halton(i, 2)[axis] * 8.0) as usize] = true;
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn ranges_parse_and_map() {
        let log = Dimension::parse("retry.budget_ratio=0.01..0.5:log").unwrap();
        assert_eq!((log.low, log.high, log.scale), (0.01, 0.5, Scale::Log));
        assert!((log.value(0.5) - (0.01f64 * 0.5).sqrt()).abs() < 1e-6);
        assert!((log.unit(log.value(0.3)) - 0.3).abs() < 1e-5);
        let int = Dimension::parse("shards.servers=2..5:int").unwrap();
        let values: Vec<f64> = [0.0, 0.24, 0.26, 0.74, 0.76, 1.0].iter().map(|&u| int.value(u)).collect();
        assert_eq!(values, vec![2.0, 2.0, 3.0, 4.0, 5.0, 5.0]);
        assert_eq!(int.toml(3.0), toml::Value::Integer(3));
        for bad in ["x=1..0", "x=0..1:cube", "x=0..1:log", "x=1.5..3:int", "x=a..b", "x"] {
            let error = Dimension::parse(bad).unwrap_err().to_string();
            assert!(error.contains("--range"), "{bad}: {error}");
        }
        assert!(Dimension::parse("x=1..0").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn a_box_stays_in_the_unit_cube_around_its_centre() {
        for point in sample_box(&[0.95, 0.1], 0.5, 20, 1) {
            assert!((0.7..=1.0).contains(&point[0]) && (0.0..=0.35).contains(&point[1]), "{point:?}");
        }
    }
}

//! Events only a finished run can tell, for `stampede rare`: `METRIC OP NUMBER` over
//! the replica's metrics (`recovered == false`, `front.p99_all_s > 2`), and
//! `window(W, KIND.STAT) OP NUMBER` over its latencies kept in windows
//! (`window(60, p99_all_s) > 2`: some minute whose requests' p99 was above 2 s).
//!
//! A window event's spans slide: the run keeps its latencies in steps of W/k (k the
//! first of 6, 5, 4, 3, 2, 1 that divides W in nanoseconds, so 60 s slides by 10 s),
//! and a span is k consecutive steps that end by the horizon. STAT is a quantile of
//! every request (`p99_all_s`) or of those answered in full (`p99_s`, `p50_s`,
//! `p999_s`…), a share of endings (`ok_share`, `degraded_share`, `failed_share`) or
//! `ended_rps`; a span with no requests has no quantile and never holds.
//!
//! Judging reads the [`ReplicaOutput`] the model writes for a replica, so a metric
//! means here what it means in `replicas.parquet`.

use stampede_engine::kernel::time::{secs_to_nanos, Nanos};
use stampede_engine::measurement::latency_windows::{quantile_of, WindowCounts, BUCKETS};

use super::Comparison;
use crate::base::error::{Error, Result};
use crate::base::numbers::duration_s;
use crate::models::expression::MetricExpr;
use crate::models::metrics::ReplicaOutput;

/// Most latency steps a window event may keep per request kind (each is 8.7 KB).
const MAX_STEPS: u64 = 20_000;

/// What a window's requests are summarised by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum WindowStat {
    /// A quantile of every request (`all`) or of those answered in full.
    Quantile { q: f64, all: bool },
    /// The share of requests that ended ok (0), degraded (1) or failed (2).
    Share(usize),
    /// Requests that ended, per second.
    EndedRps,
}

impl WindowStat {
    /// `p99_all_s`, `p50_s`, `window_p99_all_s`, `failed_share`, `ended_rps`.
    fn parse(text: &str) -> Option<WindowStat> {
        let text = text.strip_prefix("window_").unwrap_or(text);
        match text {
            "ok_share" => return Some(WindowStat::Share(0)),
            "degraded_share" => return Some(WindowStat::Share(1)),
            "failed_share" => return Some(WindowStat::Share(2)),
            "ended_rps" => return Some(WindowStat::EndedRps),
            _ => {}
        }
        let digits_and_rest = text.strip_prefix('p')?;
        let (digits, all) = match digits_and_rest.strip_suffix("_all_s") {
            Some(digits) => (digits, true),
            None => (digits_and_rest.strip_suffix("_s")?, false),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let q: f64 = format!("0.{digits}").parse().ok()?;
        (q > 0.0).then_some(WindowStat::Quantile { q, all })
    }
}

/// An event judged once, on the finished run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AtEnd {
    /// Metric `metric` (the model's, then the derived ones) compares so.
    Metric { metric: usize, comparison: Comparison, value: f64 },
    /// Some span of `steps` consecutive latency steps of request kind `kind` has
    /// `stat` comparing so.
    Window { kind: usize, stat: WindowStat, step: Nanos, steps: usize, comparison: Comparison, value: f64 },
}

impl AtEnd {
    /// `window(INSIDE) OP VALUE` for a model that keeps request kinds `timed` over
    /// time, its trajectories running to `horizon`.
    pub(crate) fn window(
        inside: &str,
        comparison: Comparison,
        value: f64,
        timed: &[String],
        horizon: Nanos,
    ) -> Result<AtEnd> {
        let (width, name) = inside.split_once(',').ok_or_else(|| {
            Error::bad_input(format!(
                "--event 'window({inside})': expected window(SECONDS, STAT), e.g. window(60, p99_all_s)"
            ))
        })?;
        let width_s = duration_s(width).ok_or_else(|| {
            Error::bad_input(format!(
                "--event 'window({inside})': '{}' is not a duration (seconds, or with ms, s, m, h)",
                width.trim()
            ))
        })?;
        let width = secs_to_nanos(width_s);
        if width > horizon {
            return Err(Error::bad_input(format!(
                "--event 'window({inside})': a window of {width_s} s does not fit in the {} s the trajectories run \
                 (--within)",
                horizon as f64 / 1e9
            )));
        }
        let name = name.trim();
        if timed.is_empty() {
            return Err(Error::bad_input(format!(
                "--event 'window({inside})': this model keeps no latencies over time; judge a metric of the run \
                 instead (METRIC OP NUMBER)"
            )));
        }
        let (kind, stat) = kind_and_stat(name, timed).ok_or_else(|| {
            let kinds = timed.join(", ");
            Error::bad_input(format!(
                "--event 'window({inside})': '{name}' is not KIND.STAT, with KIND one of {kinds} and STAT p99_all_s, \
                 p99_s (any quantile: p50, p999…), ok_share, degraded_share, failed_share or ended_rps{}",
                if timed.len() == 1 { " (KIND. may be left out)" } else { "" }
            ))
        })?;
        let steps = [6u64, 5, 4, 3, 2, 1].into_iter().find(|&k| width.is_multiple_of(k)).expect("1 divides");
        let step = width / steps;
        if horizon / step > MAX_STEPS {
            return Err(Error::bad_input(format!(
                "--event 'window({inside})': {} steps of {} s over the horizon are more than the {MAX_STEPS} kept; \
                 widen the window or shorten --within",
                horizon / step,
                step as f64 / 1e9
            )));
        }
        Ok(AtEnd::Window { kind, stat, step, steps: steps as usize, comparison, value })
    }

    /// The step latencies must be kept in for this event (`None`: a metric event).
    pub(crate) fn latency_step(&self) -> Option<Nanos> {
        match self {
            AtEnd::Metric { .. } => None,
            AtEnd::Window { step, .. } => Some(*step),
        }
    }

    /// Whether the event held over the finished run's `output` (`derived` computes
    /// the metrics past the model's own; `horizon` bounds the spans).
    pub(crate) fn holds(&self, output: &ReplicaOutput, derived: &[MetricExpr], horizon: Nanos) -> bool {
        match *self {
            AtEnd::Metric { metric, comparison, value } => {
                let own = output.metrics.len();
                let seen =
                    if metric < own { output.metrics[metric] } else { derived[metric - own].eval(&output.metrics) };
                comparison.holds(seen, value)
            }
            AtEnd::Window { kind, stat, step, steps, comparison, value } => {
                let counts = &output.latency_windows[kind];
                let complete = ((horizon / step) as usize).min(counts.windows());
                any_span(counts, complete, steps, step, stat, |seen| comparison.holds(seen, value))
            }
        }
    }
}

/// The request kind and statistic `name` reads: `KIND.STAT`, or `STAT` alone when
/// the model keeps one kind.
fn kind_and_stat(name: &str, timed: &[String]) -> Option<(usize, WindowStat)> {
    let prefixed = timed.iter().enumerate().find_map(|(kind, timed)| {
        let stat = name.strip_prefix(timed.as_str())?.strip_prefix('.')?;
        WindowStat::parse(stat).map(|stat| (kind, stat))
    });
    prefixed.or_else(|| (timed.len() == 1).then(|| WindowStat::parse(name).map(|stat| (0, stat))).flatten())
}

/// Whether some span of `steps` consecutive windows among the first `complete` has
/// a `stat` that `holds`: running sums, each window added once and removed once.
fn any_span(
    counts: &WindowCounts,
    complete: usize,
    steps: usize,
    step: Nanos,
    stat: WindowStat,
    holds: impl Fn(f64) -> bool,
) -> bool {
    let mut histogram = vec![0u64; BUCKETS];
    let mut endings = [0u64; 3];
    // Only a quantile reads the latencies; shares and rates need the endings alone.
    let histogram_of = |w: usize| match stat {
        WindowStat::Quantile { all: true, .. } => counts.all(w),
        WindowStat::Quantile { all: false, .. } => counts.ok(w),
        WindowStat::Share(_) | WindowStat::EndedRps => &[],
    };
    let span_s = (step as f64 * steps as f64) / 1e9;
    for w in 0..complete {
        for (sum, &count) in histogram.iter_mut().zip(histogram_of(w)) {
            *sum += u64::from(count);
        }
        for (sum, count) in endings.iter_mut().zip(counts.endings[w]) {
            *sum += u64::from(count);
        }
        if w >= steps {
            let gone = w - steps;
            for (sum, &count) in histogram.iter_mut().zip(histogram_of(gone)) {
                *sum -= u64::from(count);
            }
            for (sum, count) in endings.iter_mut().zip(counts.endings[gone]) {
                *sum -= u64::from(count);
            }
        }
        if w + 1 < steps {
            continue;
        }
        let ended: u64 = endings.iter().sum();
        let seen = match stat {
            WindowStat::Quantile { q, .. } => quantile_of(&histogram, q) / 1e9,
            WindowStat::Share(ending) if ended > 0 => endings[ending] as f64 / ended as f64,
            WindowStat::Share(_) => f64::NAN,
            WindowStat::EndedRps => ended as f64 / span_s,
        };
        if holds(seen) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_engine::measurement::ending::Ending;

    #[test]
    fn stats_read_as_the_timeseries_names_them() {
        assert_eq!(WindowStat::parse("p99_all_s"), Some(WindowStat::Quantile { q: 0.99, all: true }));
        assert_eq!(WindowStat::parse("window_p999_s"), Some(WindowStat::Quantile { q: 0.999, all: false }));
        assert_eq!(WindowStat::parse("failed_share"), Some(WindowStat::Share(2)));
        assert_eq!(WindowStat::parse("ended_rps"), Some(WindowStat::EndedRps));
        assert_eq!(WindowStat::parse("p_all_s"), None);
        assert_eq!(WindowStat::parse("p99"), None);
        let timed = ["front".to_string(), "front.admin".to_string()];
        assert_eq!(kind_and_stat("front.admin.p50_s", &timed), Some((1, WindowStat::Quantile { q: 0.5, all: false })));
        assert_eq!(kind_and_stat("p50_s", &timed), None, "two kinds: KIND. is needed");
        assert_eq!(kind_and_stat("p50_s", &timed[..1]), Some((0, WindowStat::Quantile { q: 0.5, all: false })));
    }

    /// Windows of 10 s where one 30 s stretch (windows 3, 4, 5) is slow: a 30 s span
    /// sees it only when it covers all three.
    #[test]
    fn a_span_holds_only_when_its_whole_width_is_slow() {
        let mut counts = WindowCounts::new(9);
        for w in 0..9 {
            let latency: Nanos = if (3..6).contains(&w) { 3_000_000_000 } else { 10_000_000 };
            counts.count(w, Ending::Ok, latency, 100);
        }
        let step = 10_000_000_000;
        let p99 = WindowStat::Quantile { q: 0.99, all: true };
        let p50 = WindowStat::Quantile { q: 0.5, all: true };
        assert!(any_span(&counts, 9, 3, step, p99, |s| s > 2.0), "windows 3–5 together");
        assert!(any_span(&counts, 9, 3, step, p50, |s| s > 2.0));
        assert!(!any_span(&counts, 9, 7, step, p50, |s| s > 2.0), "every 70 s span is mostly fast");
        assert!(!any_span(&counts, 4, 3, step, p50, |s| s > 2.0), "windows 4 and 5 end after the horizon");
        assert!(any_span(&counts, 9, 3, step, WindowStat::EndedRps, |rps| (rps - 10.0).abs() < 1e-9));
    }
}

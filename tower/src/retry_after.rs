//! How long a server asked the caller to wait, in every form providers send it: the
//! standard `Retry-After` (delay-seconds, fractional seconds, or an HTTP-date),
//! `retry-after-ms` (OpenAI, Azure OpenAI), and, when neither is there, the rate-limit
//! reset headers of the exhausted limit — Anthropic's `anthropic-ratelimit-*-reset`
//! (RFC 3339 instants) and OpenAI's `x-ratelimit-reset-*` (Go durations: `1s`, `6m0s`,
//! `20ms`). The simulator's provider says "retry after" directly; this is the live
//! reading of the same thing, a floor under the next backoff.
//!
//! Invariants: never negative (a date in the past is zero), never more than a day
//! (a mistaken header cannot park a call for a week), `None` when nothing parses.

use std::time::{Duration, SystemTime};

use http::HeaderMap;

/// The longest wait any header is believed for.
pub const LONGEST: Duration = Duration::from_secs(86_400);

/// The (remaining, reset) header pairs of the providers' rate limits: Anthropic's
/// reset is an RFC 3339 instant, OpenAI's a duration from now.
const RESETS: &[(&str, &str)] = &[
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
    ("anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"),
    ("anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"),
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
];

/// The wait `headers` ask for, read at `now` (for dates): `retry-after-ms`, else
/// `Retry-After`, else the reset of each limit whose remaining count is 0 (the latest
/// of them), else the latest reset given.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let seconds = |s: f64| (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(LONGEST.as_secs_f64())));
    if let Some(ms) = text("retry-after-ms").and_then(|t| t.parse::<f64>().ok()).and_then(|ms| seconds(ms / 1000.0)) {
        return Some(ms);
    }
    if let Some(value) = text("retry-after") {
        if let Some(wait) = value.parse::<f64>().ok().and_then(seconds) {
            return Some(wait);
        }
        if let Ok(date) = httpdate::parse_http_date(value) {
            return Some(until(date, now));
        }
    }
    let reset = |name: &str| {
        let value = text(name)?;
        go_duration(value).or_else(|| humantime::parse_rfc3339_weak(value).ok().map(|instant| until(instant, now)))
    };
    let exhausted = RESETS
        .iter()
        .filter(|(remaining, _)| text(remaining).and_then(|r| r.parse::<f64>().ok()) == Some(0.0))
        .filter_map(|(_, name)| reset(name))
        .max();
    exhausted.or_else(|| RESETS.iter().filter_map(|(_, name)| reset(name)).max())
}

/// From `now` until `instant`, zero if it has passed, at most [`LONGEST`].
fn until(instant: SystemTime, now: SystemTime) -> Duration {
    instant.duration_since(now).unwrap_or(Duration::ZERO).min(LONGEST)
}

/// A Go duration string (`1h2m3.5s`, `6m0s`, `20ms`, `150us`): OpenAI's reset format.
fn go_duration(text: &str) -> Option<Duration> {
    let mut total = 0.0;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).filter(|&at| at > 0)?;
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit..];
    }
    Some(Duration::from_secs_f64(total.min(LONGEST.as_secs_f64())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        }
        map
    }

    /// 2026-12-03T12:00:00Z.
    fn noon() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_299_200)
    }

    #[test]
    fn every_form_providers_send() {
        let read = |pairs: &[(&str, &str)]| retry_after(&headers(pairs), noon());
        assert_eq!(read(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
        assert_eq!(read(&[("retry-after", "1.5")]), Some(Duration::from_millis(1500)));
        assert_eq!(read(&[("retry-after", "Thu, 03 Dec 2026 12:00:30 GMT")]), Some(Duration::from_secs(30)));
        assert_eq!(read(&[("retry-after", "Thu, 03 Dec 2026 11:00:00 GMT")]), Some(Duration::ZERO), "past: now");
        // retry-after-ms is the finer of the two.
        assert_eq!(read(&[("retry-after", "1"), ("retry-after-ms", "250")]), Some(Duration::from_millis(250)));
        // Anthropic: the exhausted limit's reset instant.
        let anthropic = [
            ("anthropic-ratelimit-requests-remaining", "12"),
            ("anthropic-ratelimit-requests-reset", "2026-12-03T12:00:05Z"),
            ("anthropic-ratelimit-output-tokens-remaining", "0"),
            ("anthropic-ratelimit-output-tokens-reset", "2026-12-03T12:00:20Z"),
        ];
        assert_eq!(read(&anthropic), Some(Duration::from_secs(20)));
        // OpenAI: Go durations from now.
        let openai = [
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "6m0s"),
            ("x-ratelimit-remaining-tokens", "100"),
            ("x-ratelimit-reset-tokens", "20ms"),
        ];
        assert_eq!(read(&openai), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("1h2m3.5s"), Some(Duration::from_secs_f64(3723.5)));
        // Nothing exhausted said: the latest reset.
        assert_eq!(
            read(&[("x-ratelimit-reset-tokens", "1s"), ("x-ratelimit-reset-requests", "2s")]),
            Some(Duration::from_secs(2))
        );
        // Bounded, and nothing from nonsense.
        assert_eq!(read(&[("retry-after", "99999999")]), Some(LONGEST));
        assert_eq!(read(&[("retry-after", "soon")]), None);
        assert_eq!(read(&[("x-ratelimit-reset-tokens", "5 parsecs")]), None);
        assert_eq!(read(&[]), None);
    }
}

//! The resource guard: every bound on what one command or one web request may ask
//! for, in one table, checked when a scenario or a request is resolved — before
//! anything runs — so no later input (an incident's time, a `[load]` schedule, an
//! observed series fed to `calibrate`, a bisection's tolerance) can bypass it.
//!
//! | limit | value | why | checked by |
//! |---|---|---|---|
//! | [`MAX_SECONDS`] | 1.8e10 s | simulated time is u64 nanoseconds (584 years); room for sums of two | every `*_s` field of every scenario (`resolved::check_numbers`) |
//! | [`MAX_RATE_PER_S`] | 1e12 /s | a rate above it cannot be simulated in any horizon | every `*_rate_per_s`, and the peak of every `[load]` (points × scale × bursts) |
//! | [`MAX_EVENTS_PER_REPLICA`] | 1e12 | about a day of one core at 10 M events/s | each model's rate × horizon, a `[load]` by its mean rate |
//! | [`MAX_COMMAND_REPLICAS`] | 1e9 | replicas one `map` or `calibrate` may plan (`optimize` has `--budget-replicas`) | `map`, `calibrate` before their first replica, with the memory estimate of `run` |
//! | `MAX_GRID_POINTS` | 1e6 | `scenario::document` | the grid |
//! | `map::MIN_TOLERANCE` | 1e-6 of the range | 20 bisection rounds; under 1e-16 a bracket stops shrinking | `map --tolerance` |
//! | `calibrate::fit::MAX_SAMPLES` | 10,000 | the first design's candidates | `calibrate --samples` |
//! | `serve`'s `Caps` | 1,000 replicas, 600 s, 2e6 turns | one web request | every run the web app starts |
//!
//! A web request's times reach the engine only through a scenario resolved like a
//! file, so the same table holds for it; the server's own caps are tighter.

/// The longest time a scenario may state, in seconds.
pub(crate) const MAX_SECONDS: f64 = 1.8e10;

/// The highest arrival rate, per second, anywhere in a scenario.
pub(crate) const MAX_RATE_PER_S: f64 = 1e12;

/// The most events one replica may be expected to handle.
pub(crate) const MAX_EVENTS_PER_REPLICA: f64 = 1e12;

/// The most replicas one `map` or `calibrate` may plan.
pub const MAX_COMMAND_REPLICAS: u64 = 1_000_000_000;

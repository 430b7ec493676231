//! `stampede serve`: a local web app, bound to 127.0.0.1 unless told otherwise. The
//! front end is plain HTML, CSS and JavaScript compiled into the binary — nothing
//! to install, no build step, no request leaves the machine.
//!
//! Each page is one module under [`pages`] with its routes (page and JSON API); the
//! shell ([`shell`]) gives every page the same header and navigation. Adding a page
//! is a module and a line in [`shell::PAGES`] and [`app`].

#![forbid(unsafe_code)]

pub mod guard;
pub mod llm;
pub mod pages;
pub mod shell;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;

/// What the app serves.
#[derive(Debug)]
pub struct Options {
    /// The ring's SQLite file (shared with `stampede ring --db`).
    pub db: PathBuf,
    /// Output folders are listed from here (`stampede run --out`).
    pub results: PathBuf,
    /// Host names answered besides the loopback ones (`--allow-host`; see [`guard`]).
    pub allow_hosts: Vec<String>,
    /// The most work one request may start (see [`Caps`]).
    pub caps: Caps,
    /// The simulations that may run at once and wait (`--jobs`; see [`llm::jobs::Slots`]).
    pub jobs: llm::jobs::Slots,
}

/// The most work one request may start: a request above a cap is refused with 400
/// naming the cap and the flag that raises it. The defaults keep the largest allowed
/// Sandbox run under about 10 s on one core (the default run, 100 replicas × 70 s ×
/// 20 turns/s = 140,000 turns, takes about 0.6 s of one core).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Caps {
    /// Replicas per run (`--max-replicas`).
    pub replicas: u32,
    /// Simulated seconds per replica, warm-up included (`--max-sim-seconds`).
    pub sim_seconds: f64,
    /// Turns simulated in all: replicas × simulated seconds × turns per second (`--max-turns`).
    pub turns: f64,
    /// Keys one ring request may generate (`--max-keys`; 1,000,000 take about 17 s here,
    /// each key placed and journaled).
    pub keys: u64,
}

impl Default for Caps {
    fn default() -> Self {
        Caps { replicas: 1_000, sim_seconds: 600.0, turns: 2_000_000.0, keys: 500_000 }
    }
}

/// The largest request body (the Sandbox's TOML load is the largest legitimate one).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Shared by every handler.
pub type State = Arc<Options>;

/// The whole app.
pub fn app(options: Options) -> Router {
    // A request may not make the server read a file it names (a fixture's
    // `ttft_s = { dist = "empirical", file = "/etc/passwd" }`): only inline values and
    // the uploaded fixture, which the Sandbox keeps in memory.
    stampede_scenario::inputs::sealed::refuse_all_files(
        "the web app reads no file on the server; give the values inline (a distribution's parameters, or \
         dist = \"quantiles\") or run the scenario with `stampede run`",
    );
    let state: State = Arc::new(options);
    Router::new()
        .merge(pages::home::routes())
        .merge(pages::learn::routes())
        .merge(pages::sandbox::routes())
        .merge(pages::ring::routes())
        .merge(pages::results::routes())
        .with_state(state)
}

/// The app as served at `bound`: every request first through [`guard::check`] (its
/// Host, and the Origin of a change), bodies capped at [`MAX_BODY_BYTES`].
pub fn guarded_app(options: Options, bound: SocketAddr) -> Router {
    let allowed = Arc::new(guard::Allowed::for_address(bound, &options.allow_hosts));
    app(options)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(allowed, guard::check))
}

/// Serves `options` on `address` until the process ends; `ready` is told the bound
/// address (port 0 picks a free port) before the first request is accepted.
pub fn serve(options: Options, address: SocketAddr, ready: impl FnOnce(SocketAddr)) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let bound = listener.local_addr()?;
        ready(bound);
        axum::serve(listener, guarded_app(options, bound)).await
    })
}

//! `stampede serve`: a local web app, bound to 127.0.0.1 unless told otherwise. The
//! front end is plain HTML, CSS and JavaScript compiled into the binary — nothing
//! to install, no build step, no request leaves the machine.
//!
//! Each page is one module under [`pages`] with its routes (page and JSON API); the
//! shell ([`shell`]) gives every page the same header and navigation. Adding a page
//! is a module and a line in [`pages::PAGES`] and [`app`].

pub mod guard;
pub mod llm;
pub mod pages;
pub mod shell;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;

/// What the app serves.
#[derive(Clone, Debug)]
pub struct Options {
    /// The ring's SQLite file (shared with `stampede ring --db`).
    pub db: PathBuf,
    /// Output folders are listed from here (`stampede run --out`).
    pub results: PathBuf,
    /// Host names answered besides the loopback ones (`--allow-host`; see [`guard`]).
    pub allow_hosts: Vec<String>,
}

/// The largest request body (the Sandbox's TOML load is the largest legitimate one).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Shared by every handler.
pub type State = Arc<Options>;

/// The whole app.
pub fn app(options: Options) -> Router {
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

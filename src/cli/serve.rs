//! `stampede serve`: the local web app on 127.0.0.1.

use std::path::PathBuf;

use clap::Args;
use stampede_scenario::{Error, Result};

#[derive(Args)]
pub(super) struct ServeArgs {
    /// The port (0: any free port).
    #[arg(long, value_name = "P", default_value_t = 8350)]
    pub(super) port: u16,
    /// The address to listen on. Anything but loopback lets other machines change the
    /// ring file: a warning says so.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub(super) bind: std::net::IpAddr,
    /// Open the app in the default browser.
    #[arg(long)]
    pub(super) open: bool,
    /// The ring's SQLite file (the same as `stampede ring --db`).
    #[arg(long, value_name = "FILE", default_value = "stampede-ring.sqlite")]
    pub(super) db: PathBuf,
    /// Where the results page finds output folders (`stampede run --out`).
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub(super) results: PathBuf,
    /// Also answer requests for this host name (repeatable), for a deliberate reverse
    /// proxy: NAME matches at any port, NAME:PORT at that port. Only 127.0.0.1, localhost
    /// and [::1] at the server's port are answered otherwise (defeats DNS rebinding).
    #[arg(long = "allow-host", value_name = "NAME")]
    pub(super) allow_hosts: Vec<String>,
    /// The most replicas one Sandbox run may ask for.
    #[arg(long, value_name = "N", default_value_t = stampede_serve::Caps::default().replicas)]
    pub(super) max_replicas: u32,
    /// The most simulated seconds (warm-up included) a Sandbox replica may ask for.
    #[arg(long, value_name = "S", default_value_t = stampede_serve::Caps::default().sim_seconds)]
    pub(super) max_sim_seconds: f64,
    /// The most turns one Sandbox run may simulate in all (replicas × seconds × turns/s).
    #[arg(long, value_name = "N", default_value_t = stampede_serve::Caps::default().turns)]
    pub(super) max_turns: f64,
    /// Simulations (Learn and Sandbox runs) that run at once; a short queue of as many
    /// waits behind them, and past that a request gets 503 with Retry-After
    /// (default: the machine's cores).
    #[arg(long, value_name = "N")]
    pub(super) jobs: Option<usize>,
    /// The most keys one ring request may generate.
    #[arg(long, value_name = "N", default_value_t = stampede_serve::Caps::default().keys)]
    pub(super) max_keys: u64,
}

pub(super) fn serve(args: ServeArgs) -> Result<()> {
    if !args.bind.is_loopback() {
        eprintln!(
            "stampede: warning: serving on {}: anyone who can reach this machine can read and change {}; requests \
             are answered for the loopback names, the bound address and --allow-host NAMEs only (add the name \
             others use to reach it)",
            args.bind,
            args.db.display()
        );
    }
    if args.jobs == Some(0) {
        return Err(Error::bad_input("--jobs 0: at least one simulation must be able to run"));
    }
    let options = stampede_serve::Options {
        db: args.db.clone(),
        results: args.results.clone(),
        allow_hosts: args.allow_hosts.clone(),
        caps: stampede_serve::Caps {
            replicas: args.max_replicas,
            sim_seconds: args.max_sim_seconds,
            turns: args.max_turns,
            keys: args.max_keys,
        },
        jobs: {
            let running = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
            stampede_serve::llm::jobs::Slots::new(running, running)
        },
    };
    let address = std::net::SocketAddr::new(args.bind, args.port);
    stampede_serve::serve(options, address, |bound| {
        // A wildcard address is not a name a browser may use (nor one the server answers to).
        let shown = if bound.ip().is_unspecified() {
            std::net::SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), bound.port())
        } else {
            bound
        };
        let url = format!("http://{shown}/");
        println!(
            "stampede serve: {url} (ring file {}, results from {}); Ctrl-C stops",
            args.db.display(),
            args.results.display()
        );
        if args.open {
            // Best effort: a machine without a desktop just has the URL above.
            let _ = std::process::Command::new("xdg-open").arg(&url).spawn();
        }
    })
    .map_err(|e| Error::io(format!("cannot serve on {address}: {e}")))
}

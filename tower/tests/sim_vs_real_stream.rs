//! Sim versus real for a streamed LLM call: one scenario and fixture configure the
//! simulated gateway and the live class stack (`gateway_from_scenario`), and the live
//! call's fallbacks and latency must fall inside the simulation's replica distribution.
//!
//! The product: one streamed call per turn, class `reply` on tier `smart` (first
//! token at 0.2 s × a jitter j ~ LogNormal(0, 0.25), then 20 tokens at 200/s × j —
//! the simulated provider's formula at a load far below its slots), with a 0.22 s
//! first-token timeout, one attempt, and `fallback_tier = "fast"` (0.05 s, 400
//! tokens/s): about 35% of calls time out on their first token and are answered by the
//! fast tier, degraded.
//!
//! The live side: an axum server on 127.0.0.1 with a route per tier that sends its
//! headers at once and then the SSE frames at the drawn instants (each frame slept
//! to an absolute instant, so the timer's lateness does not add up); a client
//! sending open-loop Poisson turns through the stack the scenario builds — the
//! fallback layer around `reply`'s class stack over its stream timeouts over an HTTP
//! client (hyper, a connection per attempt), the fallback `reply_fallback`'s stack
//! over the fast tier — reading each body to its end. Measured per run: the share
//! of turns answered degraded and the turns' median and p95 latency (start to last
//! token). The simulated side: `REPLICAS` replicas of the same scenario. Each live
//! figure must lie between the replicas' 0.1st and 99.9th percentiles (with 200
//! replicas, their smallest and largest; see `compare::within`).
//!
//! Every loop is bounded; traffic stays on loopback; the live run takes about
//! `HORIZON_S` seconds.

// Builds stacks from scenario files: only with the `scenario` feature (its parser
// brings the simulator's output stack; see Cargo.toml).
#![cfg(feature = "scenario")]

mod compare;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use stampede_kernel::{LatencyHistogram, RngStream, StreamPurpose};
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Overrides, Scenario};
use stampede_tower::{gateway_from_scenario, BoxError, ErrorsFail, TokensWith};
use tower_layer::Layer;
use tower_service::Service;

use compare::{percentile, within, write_temporary};

const RATE: f64 = 20.0;
const HORIZON_S: f64 = 7.0;
const WARMUP_S: f64 = 1.0;
const REPLICAS: u64 = 200;
const TOKENS: u32 = 20;

const FIXTURE: &str = r#"
[tiers.smart]
rpm = 1000000
itpm = 1000000000
otpm = 1000000000
prefill_tokens_per_s = 1000000.0
decode_tokens_per_s = 200.0
base_latency_s = 0.2
usd_per_mtok_in = 3.0
usd_per_mtok_out = 15.0
server_slots = 1000
error_rate = 0.0

[tiers.fast]
rpm = 1000000
itpm = 1000000000
otpm = 1000000000
prefill_tokens_per_s = 1000000.0
decode_tokens_per_s = 400.0
base_latency_s = 0.05
usd_per_mtok_in = 0.25
usd_per_mtok_out = 1.25
server_slots = 1000
error_rate = 0.0

[classes.reply]
tier = "smart"
input_tokens = { mean = 100.0, sd = 0.0 }
output_tokens = { mean = 20.0, sd = 0.0 }
max_tokens = 100
streamed = true
deadline_s = 5.0
timeouts_s = { connect = 1.0, first_token = 0.22, total = 3.0 }
max_attempts = 1
fallback_tier = "fast"

[turn]
steps = [{ call = "reply" }]
"#;

/// (base latency s, decode tokens/s) of each tier, as the fixture gives them.
const SMART: (f64, f64) = (0.2, 200.0);
const FAST: (f64, f64) = (0.05, 400.0);
/// Input tokens over the tiers' prefill rate: part of the first token's time.
const PREFILL_S: f64 = 100.0 / 1_000_000.0;

fn scenario(fixture: &std::path::Path) -> String {
    format!(
        "name = \"sim-vs-real-stream\"\nmodel = \"gateway\"\n[run]\nhorizon_s = {HORIZON_S}\nwarmup_s = {WARMUP_S}\n\
         replicas = {REPLICAS}\nseed = 3\n[workload]\nturns_per_s = {RATE}\nfixture = {:?}\n\
         [stack]\ngates = [\"retry\", \"fallback\"]\n",
        fixture.display()
    )
}

/// One run's figures (live or simulated).
#[derive(Clone, Copy, Debug)]
struct Figures {
    degraded: f64,
    p50_s: f64,
    p95_s: f64,
}

fn simulate(path: &std::path::Path) -> Vec<Figures> {
    let source = load_scenario_source(&path.to_string_lossy()).expect("readable");
    let scenario = Scenario::resolve(source, &Overrides::default()).expect("valid");
    let point = &scenario.grid_points().expect("one point")[0];
    let names: Vec<&str> = point.model.metrics().iter().map(|m| m.name).collect();
    let at = |name: &str| names.iter().position(|n| *n == name).unwrap_or_else(|| panic!("{name}"));
    let (degraded, p50, p95) = (at("degraded_answer_ratio"), at("turn_p50_s"), at("turn_p95_s"));
    (0..REPLICAS)
        .map(|replica| {
            let mut histograms: Vec<LatencyHistogram> =
                point.model.latencies().iter().map(|_| LatencyHistogram::new()).collect();
            let m = point.model.run_replica(&point.run, scenario.run.seed, replica, &mut histograms).metrics;
            Figures { degraded: m[degraded], p50_s: m[p50], p95_s: m[p95] }
        })
        .collect()
}

/// A tier's streamed answer: headers at once, then `TOKENS` SSE frames, the first at
/// `start + first`, the rest evenly to `start + first + decode`.
struct Stream {
    at: tokio::time::Instant,
    gap: Duration,
    left: u32,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Body for Stream {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::convert::Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        std::task::ready!(self.sleep.as_mut().poll(cx));
        self.left -= 1;
        let gap = self.gap;
        self.at += gap;
        let next = self.at;
        self.sleep.as_mut().reset(next);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"event: content_block_delta\ndata: {}\n\n")))))
    }
}

/// The provider: draws each call's jitter as the simulated tier does.
struct Provider {
    rng: Mutex<RngStream>,
}

impl Provider {
    fn answer(&self, (base, decode): (f64, f64)) -> axum::response::Response {
        let jitter = self.rng.lock().unwrap().lognormal(0.0, 0.25);
        let first = Duration::from_secs_f64((base + PREFILL_S) * jitter);
        let decoding = f64::from(TOKENS) / decode * jitter;
        let gap = Duration::from_secs_f64(decoding / f64::from(TOKENS - 1));
        let at = tokio::time::Instant::now() + first;
        let body = Stream { at, gap, left: TOKENS, sleep: Box::pin(tokio::time::sleep_until(at)) };
        axum::response::Response::new(axum::body::Body::new(body))
    }
}

/// A prompt to a tier's route.
#[derive(Clone, Copy, Debug)]
struct Prompt;

/// One attempt: a fresh connection to the live provider, `GET /<tier>`, the response
/// with its body still streaming.
#[derive(Clone)]
struct HttpClient {
    address: SocketAddr,
    route: &'static str,
}

impl Service<Prompt> for HttpClient {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Prompt) -> Self::Future {
        let (address, route) = (self.address, self.route);
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(address).await?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
            tokio::spawn(connection);
            let request = http::Request::get(route).header("host", "127.0.0.1").body(String::new())?;
            Ok(sender.send_request(request).await?)
        })
    }
}

async fn live(path: &std::path::Path) -> Figures {
    let provider =
        Arc::new(Provider { rng: Mutex::new(RngStream::derive(11, 0, StreamPurpose::named("test.provider"))) });
    let (smart, fast) = (provider.clone(), provider.clone());
    let app = axum::Router::new()
        .route("/smart", axum::routing::get(move || async move { smart.answer(SMART) }))
        .route("/fast", axum::routing::get(move || async move { fast.answer(FAST) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
    let address = listener.local_addr().unwrap();
    let serving = tokio::spawn(async move { axum::serve(listener, app).await });

    let stacks = gateway_from_scenario(path, None, 7).expect("the same scenario");
    let tokens = TokensWith(|_: &Prompt| (100, 100), |_: &http::Response<_>| 20);
    let fallback_class = stacks.fallback_class("reply").expect("reply falls back").expect("to a class");
    assert_eq!(fallback_class, "reply_fallback");
    let fast = stacks
        .class(fallback_class, tokens)
        .unwrap()
        .layer(stacks.stream_timeouts(fallback_class).unwrap().layer(HttpClient { address, route: "/fast" }));
    let primary = stacks
        .class("reply", tokens)
        .unwrap()
        .layer(stacks.stream_timeouts("reply").unwrap().layer(HttpClient { address, route: "/smart" }));
    let fallback = stacks.fallback("reply", fast, ErrorsFail).expect("the scenario's fallback");
    let counts = fallback.counts();
    let service = fallback.layer(primary);

    let mut arrivals = RngStream::derive(11, 0, StreamPurpose::named("test.arrivals"));
    let start = tokio::time::Instant::now();
    let mut next = 0.0;
    let mut turns = Vec::new();
    while next < HORIZON_S - WARMUP_S {
        tokio::time::sleep_until(start + Duration::from_secs_f64(next)).await;
        let mut service = service.clone();
        turns.push(tokio::spawn(async move {
            let began = tokio::time::Instant::now();
            std::future::poll_fn(|cx| service.poll_ready(cx)).await.expect("always ready");
            let response = service.call(Prompt).await.ok()?;
            let mut body = std::pin::pin!(response.into_body());
            let mut frames = 0;
            while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
                frame.ok()?;
                frames += 1;
            }
            (frames == TOKENS).then(|| began.elapsed().as_secs_f64())
        }));
        next += arrivals.standard_exponential() / RATE;
    }
    let mut latencies = Vec::new();
    for turn in turns {
        let answered = tokio::time::timeout(Duration::from_secs(10), turn).await.expect("bounded").expect("no panic");
        latencies.push(answered.expect("every turn is answered, by smart or by fast"));
    }
    serving.abort();
    let degraded = counts.degraded.load(std::sync::atomic::Ordering::SeqCst);
    let primary = counts.primary.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(counts.failed.load(std::sync::atomic::Ordering::SeqCst), 0, "no fallback failed");
    println!("live: {} turns, {primary} answered by smart, {degraded} by fast", latencies.len());
    Figures {
        degraded: degraded as f64 / latencies.len() as f64,
        p50_s: percentile(latencies.clone(), 0.5),
        p95_s: percentile(latencies, 0.95),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_calls_first_token_timeouts_and_fallbacks_match_the_simulation() {
    let fixture = write_temporary(FIXTURE, ".toml");
    let path = write_temporary(&scenario(&fixture), ".toml");
    let simulated = simulate(&path);
    let live = live(&path).await;
    let pick = |f: fn(&Figures) -> f64| simulated.iter().map(f).collect::<Vec<_>>();
    let checks = [
        within("degraded share (first-token timeouts answered by fast)", live.degraded, &pick(|f| f.degraded)),
        within("turn p50 s", live.p50_s, &pick(|f| f.p50_s)),
        within("turn p95 s", live.p95_s, &pick(|f| f.p95_s)),
    ];
    for check in &checks {
        match check {
            Ok(line) => println!("ok   {line}"),
            Err(line) => println!("FAIL {line}"),
        }
    }
    assert!(checks.iter().all(Result::is_ok), "a live figure fell outside the simulation's 0.1–99.9% range (above)");
}

//! The graph model against the dependency model: `graph-dependency` is
//! `dependency-slowdown` written as a graph, and every figure the two share agrees
//! within the interval of their difference, for every protection policy. A graph that
//! propagated the client's deadline into the dependency call (a different policy)
//! moves utilisation by 2% and fails this test; see the scenario's note.

mod common;

use common::replica_metrics;
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Overrides, Scenario};

const REPLICAS: u64 = 60;

/// Per grid point, per replica, the metrics named in `metrics`, each summed (a metric
/// spelled `a+b+c` is the sum of three).
fn figures(name: &str, metrics: &[&str]) -> Vec<Vec<Vec<f64>>> {
    let scenario = Scenario::resolve(load_scenario_source(name).unwrap(), &Overrides::default()).unwrap();
    let seed = scenario.run.seed;
    scenario
        .grid_points()
        .unwrap()
        .iter()
        .map(|point| {
            (0..REPLICAS)
                .map(|replica| {
                    let values = replica_metrics(point, seed, replica);
                    metrics
                        .iter()
                        .map(|spec| {
                            spec.split('+').map(|m| *values.get(m).unwrap_or_else(|| panic!("{name}: {m}"))).sum()
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

fn mean_and_se(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

#[test]
fn graph_dependency_equals_the_dependency_model_for_every_protection_policy() {
    let graph = figures(
        "graph-dependency",
        &[
            "service.handle.goodput_rps",
            "service.utilisation",
            "service.refused_queue_full",
            "service.refused_shed",
            "recovery_s",
        ],
    );
    let dependency = figures(
        "dependency-slowdown",
        &[
            "goodput_high_rps+goodput_normal_rps+goodput_low_rps",
            "pool_saturation_ratio",
            "queue_full",
            "shed",
            "recovery_s",
        ],
    );
    let labels = ["goodput", "utilisation", "queue full", "shed", "recovery"];
    let policies = ["none", "breaker", "shedder", "both"];
    assert_eq!(graph.len(), 4);
    assert_eq!(dependency.len(), 4);
    let mut compared = 0;
    for (p, policy) in policies.iter().enumerate() {
        for (m, label) in labels.iter().enumerate() {
            let column = |runs: &Vec<Vec<Vec<f64>>>| runs[p].iter().map(|r| r[m]).collect::<Vec<f64>>();
            let (g, g_se) = mean_and_se(&column(&graph));
            let (d, d_se) = mean_and_se(&column(&dependency));
            if g == 0.0 && d == 0.0 {
                continue; // no shedding without a shedder, no recovery time with a breaker
            }
            // 3.29 standard errors of the difference: a 99.9% interval, so that twenty
            // comparisons together stay above 98%.
            let bound = 3.29 * (g_se * g_se + d_se * d_se).sqrt();
            assert!((g - d).abs() <= bound, "{policy}, {label}: graph {g} ± {g_se}, dependency {d} ± {d_se}");
            // The test can fail: each interval is tight next to the figure.
            assert!(
                bound < 0.12 * d.abs().max(g.abs()),
                "{policy}, {label}: ±{bound} is too wide to compare {g} and {d}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 13, "figures compared");
}

/// One replica's metrics of a graph scenario given as TOML, by name.
fn one_replica(source: &str, seed: u64) -> std::collections::BTreeMap<String, f64> {
    let table: toml::Table = toml::from_str(source).unwrap();
    let scenario = Scenario::resolve(table, &Overrides::default()).unwrap();
    replica_metrics(&scenario.grid_point(0).unwrap(), seed, 0)
}

/// `[edges."api.checkout->db.read"]` gives one call site its own client policy: its
/// calls leave the service edge `api->db` (whose policy the other endpoint keeps),
/// inherit the link's network, and a fault on the link reaches them too.
#[test]
fn a_call_site_edge_carries_its_own_policy_and_shares_the_link() {
    let scenario = |faults: &str| {
        format!(
            r#"
name = "call-sites"
model = "graph"
[run]
horizon_s = 20.0
warmup_s = 0.0
replicas = 1
seed = 1
[services.api]
instances = 1
workers = 64
[services.api.endpoints.checkout]
steps = [{{ call = "db.read" }}]
[services.api.endpoints.browse]
steps = [{{ call = "db.read" }}]
[services.db]
instances = 1
workers = 64
[services.db.endpoints.read]
work = {{ dist = "constant", value_s = 0.001 }}
[edges."api->db"]
network = {{ dist = "constant", value_s = 0.01 }}
retry = {{ max_attempts = 2, backoff = "constant", backoff_base_s = 0.0, backoff_cap_s = 0.0, budget = "none" }}
[edges."api.checkout->db.read"]
retry = {{ max_attempts = 5, backoff = "constant", backoff_base_s = 0.0, backoff_cap_s = 0.0, budget = "none" }}
[[workload]]
entry = "api.checkout"
arrivals = "even"
rate_per_s = 50.0
[[workload]]
entry = "api.browse"
arrivals = "even"
rate_per_s = 50.0
{faults}
"#
        )
    };
    // Healthy: both sites answer in one attempt, and the checkout call pays the
    // link's network both ways (2 × 10 ms + 1 ms of work).
    let healthy = one_replica(&scenario(""), 7);
    let site = "api.checkout->db.read";
    assert!(healthy[&format!("{site}.calls")] > 900.0, "{healthy:?}");
    assert_eq!(healthy[&format!("{site}.attempts")], healthy[&format!("{site}.calls")]);
    let p50 = healthy["api.checkout.p50_s"];
    assert!((p50 - 0.021).abs() < 0.0015, "checkout p50 {p50}: the call-site edge lost the link's network");
    // Every db answer an error: the call site tries 5 times, the service edge 2.
    let failing = one_replica(
        &scenario("[[faults]]\ntarget = \"db\"\nkind = \"errors\"\nrate = 1.0\nstart_s = 0.0\nduration_s = 100.0"),
        7,
    );
    let per_call = |edge: &str| failing[&format!("{edge}.attempts")] / failing[&format!("{edge}.calls")];
    // (Calls still retrying at the horizon end short of their last attempts.)
    assert!((per_call(site) - 5.0).abs() < 0.02, "{}", per_call(site));
    assert!((per_call("api->db") - 2.0).abs() < 0.02, "{}", per_call("api->db"));
    // A fail-fast partition of the link api->db fails both sites' calls.
    let cut = one_replica(
        &scenario(
            "[[faults]]\ntarget = \"api->db\"\nkind = \"partition\"\nmode = \"fail_fast\"\nstart_s = 0.0\nduration_s = 100.0",
        ),
        7,
    );
    for edge in [site, "api->db"] {
        assert_eq!(cut[&format!("{edge}.failed")], cut[&format!("{edge}.calls")], "{edge}: {cut:?}");
        assert!(cut[&format!("{edge}.calls")] > 900.0);
    }
}

#[test]
fn a_call_site_edge_no_call_uses_is_refused_with_the_graph_s_edges() {
    let source = r#"
name = "call-sites"
model = "graph"
[run]
horizon_s = 1.0
replicas = 1
[services.api]
instances = 1
workers = 1
[services.api.endpoints.checkout]
steps = [{ call = "db.read" }]
[services.db]
instances = 1
workers = 1
[services.db.endpoints.read]
work = { dist = "constant", value_s = 0.001 }
[edges."api.browse->db.read"]
timeout_s = 1.0
[[workload]]
entry = "api.checkout"
rate_per_s = 10.0
"#;
    let error = Scenario::resolve(toml::from_str(source).unwrap(), &Overrides::default()).unwrap_err();
    let text = format!("{} {:?}", error.message, error.hint);
    for expected in ["edges.\"api.browse->db.read\": no call goes along it", "api->db, client->api", "by call site"] {
        assert!(text.contains(expected), "{expected:?} not in {text}");
    }
}

/// A step's `one_of` and `wait = "none"` are checked by field: probabilities summing
/// past 1, some given and some not, an empty list, a quorum on a single call.
#[test]
fn one_of_and_fire_and_forget_steps_are_refused_by_field() {
    let resolve =
        |steps: &str| Scenario::resolve(toml::from_str(&api_and_db(steps, "")).unwrap(), &Overrides::default());
    for (steps, expected) in [
        (
            r#"{ one_of = [{ call = "db.read", probability = 0.7 }, { call = "db.write", probability = 0.5 }] }"#,
            "services.api.endpoints.get.steps[0].one_of: the probabilities sum to 1.2",
        ),
        (
            r#"{ one_of = [{ call = "db.read", probability = 0.7 }, { call = "db.write" }] }"#,
            "give every alternative a probability, or none",
        ),
        (r#"{ one_of = [] }"#, "one_of = []: give at least one alternative"),
        (r#"{ call = "db.read", wait = "quorum", quorum = 1 }"#, "a single call takes wait = \"none\""),
        (r#"{ call = "db.read", wait = "never" }"#, "a single call takes wait = \"none\""),
    ] {
        let error = resolve(steps).unwrap_err();
        assert!(error.message.contains(expected), "{steps}: {expected:?} not in {}", error.message);
    }
    for steps in [
        r#"{ one_of = [{ call = "db.read" }, { call = "db.write" }] }"#,
        r#"{ call = "db.write", wait = "none" }"#,
        r#"{ parallel = [{ call = "db.read" }, { call = "db.write" }], wait = "none" }"#,
    ] {
        assert!(resolve(steps).is_ok(), "{steps}: {:?}", resolve(steps).err().map(|e| e.message));
    }
}

/// One access log drives every entry point: with `endpoint_column`, each workload
/// replays only the rows that name its entry, at their instants; a name no row has is
/// refused with the names it does have.
#[test]
fn one_replayed_access_log_drives_each_entry_by_its_endpoint_column() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.csv");
    let rows =
        [(0.5, "api.checkout"), (0.75, "api.browse"), (1.0, "api.browse"), (2.5, "api.checkout"), (3.0, "api.browse")];
    let mut text = String::from("t_s,endpoint\n");
    for (t, e) in rows {
        text.push_str(&format!("{t},{e}\n"));
    }
    std::fs::write(&log, text).unwrap();
    let scenario = |second_entry: &str| {
        format!(
            r#"
name = "access-log"
model = "graph"
[run]
horizon_s = 10.0
warmup_s = 0.0
replicas = 1
[services.api]
instances = 1
workers = 4
[services.api.endpoints.checkout]
work = {{ dist = "constant", value_s = 0.001 }}
[services.api.endpoints.browse]
work = {{ dist = "constant", value_s = 0.001 }}
[[workload]]
entry = "api.checkout"
load = {{ arrivals = {{ trace = "{log}", column = "t_s", endpoint_column = "endpoint" }} }}
[[workload]]
entry = "{second_entry}"
load = {{ arrivals = {{ trace = "{log}", column = "t_s", endpoint_column = "endpoint" }} }}
"#,
            log = log.display()
        )
    };
    let metrics = one_replica(&scenario("api.browse"), 3);
    assert_eq!(metrics["api.checkout.offered"], 2.0);
    assert_eq!(metrics["api.browse.offered"], 3.0);
    assert_eq!(metrics["api.checkout.success_ratio"], 1.0);
    let table: toml::Table = toml::from_str(&scenario("api.search").replace(
        "[services.api.endpoints.browse]",
        "[services.api.endpoints.search]\nwork = { dist = \"constant\", value_s = 0.001 }\n[services.api.endpoints.browse]",
    ))
    .unwrap();
    let error = Scenario::resolve(table, &Overrides::default()).unwrap_err();
    assert!(
        error.message.contains("no row of \"endpoint\"")
            && error.message.contains("names \"api.search\"; it names api.browse, api.checkout"),
        "{}",
        error.message
    );
}

/// Root-cause columns exist only for the services an entry can reach (a graph of many
/// one-service entries would otherwise carry entries × services columns), and they
/// still account for every failure: for each graph built-in with failures, per entry
/// and replica, Σ `failed_by.*` equals Σ `failed_*`. A cause outside the reachable set
/// would be lost and fail this; so would a column set that missed a reachable service.
#[test]
fn root_cause_columns_of_reachable_services_account_for_every_failure() {
    let mut checked_failures = 0.0;
    for name in ["graph-fanout", "graph-pool", "graph-three-tier", "graph-hedging"] {
        let scenario = Scenario::resolve(load_scenario_source(name).unwrap(), &Overrides::default()).unwrap();
        let seed = scenario.run.seed;
        for point in scenario.grid_points().unwrap() {
            for replica in 0..4 {
                let values = replica_metrics(&point, seed, replica);
                let entries: std::collections::BTreeSet<&str> =
                    values.keys().filter_map(|m| m.split_once(".failed_by.").map(|(entry, _)| entry)).collect();
                assert!(!entries.is_empty(), "{name}: no root-cause columns");
                for entry in entries {
                    let caused: f64 = values
                        .iter()
                        .filter(|(m, _)| m.starts_with(&format!("{entry}.failed_by.")))
                        .map(|(_, v)| v)
                        .sum();
                    let failed: f64 = ["timeout", "refused", "error", "breaker_open"]
                        .iter()
                        .map(|reason| values[&format!("{entry}.failed_{reason}")])
                        .sum();
                    assert_eq!(caused, failed, "{name} point {} replica {replica}: {entry}", point.index);
                    checked_failures += failed;
                }
            }
        }
    }
    assert!(checked_failures > 100.0, "the built-ins fail some requests: {checked_failures}");
}

/// A call chain 5,000 services deep resolves on a thread with a 512 KiB stack: the
/// graph's walks (its cycle check, the reachable services) keep an explicit stack, so
/// a deep graph costs memory, never the thread's stack (a 50,000-deep chain overflowed
/// the main thread's 8 MiB).
#[test]
fn a_deep_call_chain_resolves_on_a_small_stack() {
    let depth = 5_000;
    let mut text = String::from(
        "name = \"chain\"\nmodel = \"graph\"\n[run]\nhorizon_s = 10.0\nwarmup_s = 1.0\nreplicas = 2\nseed = 1\n",
    );
    for i in 0..depth {
        text.push_str(&format!(
            "[services.s{i}]\nworkers = 8\n[services.s{i}.endpoints.op]\nwork = {{ dist = \"exponential\", mean_s = 0.001 }}\n"
        ));
        if i + 1 < depth {
            text.push_str(&format!("steps = [{{ call = \"s{}.op\" }}]\n", i + 1));
        }
    }
    text.push_str("[[workload]]\nentry = \"s0.op\"\nrate_per_s = 10.0\n");
    let resolved = std::thread::Builder::new()
        .stack_size(512 << 10)
        .spawn(move || {
            let source = stampede_scenario::base::typing::parse_text(&text, "the chain").unwrap();
            Scenario::resolve(source, &Overrides::default()).map(|s| s.schema.metrics.len())
        })
        .unwrap()
        .join()
        .expect("no stack overflow");
    assert!(resolved.unwrap() > depth, "resolved, with every service's columns");
}

/// `show` prints what a run uses: an autoscaler's provisioning, left out, is written
/// out as its default (30 s constant) with the cpu metric (issue 71: show omitted it).
#[test]
fn the_resolved_scenario_writes_the_autoscalers_defaults_out() {
    let source = "name = \"a\"\nmodel = \"graph\"\n[run]\nhorizon_s = 10.0\nreplicas = 1\n[services.api]\ninstances = 2\nworkers = 4\n\
                  autoscale = { target = 0.5, max = 4 }\n[services.api.endpoints.get]\n\
                  work = { dist = \"constant\", value_s = 0.001 }\n[[workload]]\nentry = \"api.get\"\nrate_per_s = 10.0\n";
    let scenario = Scenario::resolve(source.parse().unwrap(), &Overrides::default()).unwrap();
    let text = scenario.to_toml();
    assert!(text.contains("[services.api.autoscale.provisioning]"), "{text}");
    assert!(text.contains("dist = \"constant\"") && text.contains("value_s = 30.0"), "{text}");
    assert!(text.contains("metric = \"cpu\""), "{text}");
}

/// A `one_of` whose alternatives have steps of their own (an endpoint's call
/// patterns, each with its own work) takes exactly one of them per request. Constant
/// work, no queueing: 30% of requests take 10 ms, 40% take 30 ms and a 5 ms call, 30%
/// nothing — mean 0.3 × 10 + 0.4 × 35 = 17 ms, median 10 ms, p99 35 ms, and db sees
/// 0.4 calls a request. Independent choices (the way to write it before) would make
/// 12% of requests do both (p99 45 ms).
#[test]
fn a_one_of_with_steps_takes_one_pattern_with_its_own_work() {
    let source = |alternatives: &str| {
        format!(
            r#"
name = "patterns"
model = "graph"
[run]
horizon_s = 200.0
warmup_s = 0.0
replicas = 1
[services.api]
instances = 1
workers = 1000
[services.api.endpoints.get]
steps = [{{ one_of = [{alternatives}] }}]
[services.db]
instances = 1
workers = 1000
[services.db.endpoints.read]
work = {{ dist = "constant", value_s = 0.005 }}
[[workload]]
entry = "api.get"
rate_per_s = 100.0
"#
        )
    };
    let metrics = one_replica(
        &source(
            r#"{ probability = 0.3, steps = [{ work = { dist = "constant", value_s = 0.010 } }] },
               { probability = 0.4, steps = [{ work = { dist = "constant", value_s = 0.030 } }, { call = "db.read" }] }"#,
        ),
        7,
    );
    let requests = metrics["api.get.offered"];
    assert!((19_000.0..21_000.0).contains(&requests), "{requests} requests in 200 s at 100/s");
    // Standard errors over 20,000 requests: mean 0.10 ms, a share 0.0035.
    let (mean, p50, p99) = (metrics["api.get.mean_s"], metrics["api.get.p50_s"], metrics["api.get.p99_s"]);
    assert!((mean - 0.017).abs() < 0.0005, "mean {mean} s, expected 0.017");
    assert!((p50 - 0.010).abs() < 0.0002, "p50 {p50} s, expected 0.010");
    assert!((p99 - 0.035).abs() < 0.0005, "p99 {p99} s, expected 0.035 (both patterns at once: 0.045)");
    let share = metrics["api->db.calls"] / requests;
    assert!((share - 0.4).abs() < 0.015, "db is called by {share} of requests, expected 0.4");
    // A mixed list: one alternative a call, one with steps; they nest.
    let nested = one_replica(
        &source(
            r#"{ probability = 0.5, call = "db.read" },
               { probability = 0.5, steps = [{ one_of = [{ steps = [{ work = { dist = "constant", value_s = 0.002 } }] },
                                                        { call = "db.read" }] }] }"#,
        ),
        7,
    );
    let share = nested["api->db.calls"] / nested["api.get.offered"];
    assert!((share - 0.75).abs() < 0.015, "db is called by {share} of requests, expected 0.5 + 0.5 × 0.5");
}

/// An alternative is a call or steps, never both or neither; its steps are not empty;
/// alternatives nest at most 8 deep; the path names the alternative.
#[test]
fn alternatives_with_steps_are_refused_by_field() {
    let scenario = |steps: &str| {
        format!(
            "name = \"s\"\nmodel = \"graph\"\n[run]\nhorizon_s = 1.0\nreplicas = 1\n[services.api]\nworkers = 1\n\
             [services.api.endpoints.get]\nsteps = [{steps}]\n[services.db]\nworkers = 1\n[services.db.endpoints.read]\n\
             work = {{ dist = \"constant\", value_s = 0.001 }}\n[[workload]]\nentry = \"api.get\"\nrate_per_s = 10.0\n"
        )
    };
    let resolve = |steps: &str| Scenario::resolve(toml::from_str(&scenario(steps)).unwrap(), &Overrides::default());
    let mut deep = String::from(r#"{ call = "db.read" }"#);
    for _ in 0..9 {
        deep = format!("{{ one_of = [{{ steps = [{deep}] }}] }}");
    }
    for (steps, expected) in [
        (
            r#"{ one_of = [{ call = "db.read", steps = [{ call = "db.read" }] }] }"#,
            "steps[0].one_of[0]: an alternative is one of call = \"service.endpoint\" or steps = [...]",
        ),
        (r#"{ one_of = [{ probability = 0.5 }] }"#, "steps[0].one_of[0]: an alternative is one of"),
        (
            r#"{ one_of = [{ steps = [] }, { call = "db.read" }] }"#,
            "steps[0].one_of[0].steps = []: give the alternative a step",
        ),
        (
            r#"{ one_of = [{ steps = [{ call = "db.nope" }] }] }"#,
            "steps[0].one_of[0].steps[0].call = \"db.nope\": no such endpoint",
        ),
        (deep.as_str(), "alternatives nested 9 deep; at most 8"),
    ] {
        let error = resolve(steps).unwrap_err();
        assert!(error.message.contains(expected), "{steps}: {expected:?} not in {}", error.message);
    }
}

/// Each fault kind refuses what it does not take and names the field; one that does
/// not fit its target (a crash or a flush on an edge, a partition of a service) says
/// what it is for.
#[test]
fn a_fault_refuses_the_fields_and_targets_its_kind_does_not_take() {
    let source = |fault: &str| {
        api_and_db(r#"{ call = "db.read" }"#, &format!("[[faults]]\nstart_s = 0.0\nduration_s = 1.0\n{fault}\n"))
    };
    let cases = [
        (
            "target = \"db\"\nkind = \"slowdown\"\nfactor = 2.0\nrate = 0.5",
            "faults[0].rate: kind = \"slowdown\" takes no rate",
        ),
        ("target = \"db\"\nkind = \"slowdown\"", "faults[0].factor: missing; a slowdown multiplies work"),
        (
            "target = \"db\"\nkind = \"latency\"\nadded_s = 0.1\nfactor = 2.0",
            "faults[0].factor: kind = \"latency\" takes no factor",
        ),
        (
            "target = \"db\"\nkind = \"errors\"\nrate = 0.5\nadded_s = 0.1",
            "faults[0].added_s: kind = \"errors\" takes no added_s",
        ),
        ("target = \"db\"\nkind = \"errors\"", "faults[0].rate: missing; the share of answers that are errors"),
        ("target = \"db\"\nkind = \"crash\"\nfactor = 2.0", "faults[0].factor: kind = \"crash\" takes no factor"),
        ("target = \"db\"\nkind = \"flush\"\nrate = 0.5", "faults[0].rate: kind = \"flush\" takes no rate"),
        (
            "target = \"api->db\"\nkind = \"crash\"",
            "faults[0].kind = \"crash\": instances crash; an edge is partitioned",
        ),
        (
            "target = \"api->db\"\nkind = \"flush\"",
            "faults[0].kind = \"flush\": empties a service's caches; an edge has none",
        ),
        ("target = \"db\"\nkind = \"partition\"", "faults[0].kind = \"partition\": partitions an edge"),
        (
            "target = \"api->db\"\nkind = \"partition\"\nmode = \"slow\"",
            "faults[0].mode = \"slow\": allowed: timeout, fail_fast",
        ),
        (
            "target = \"db\"\nkind = \"melt\"",
            "faults[0].kind = \"melt\": allowed: slowdown, latency, errors, crash, flush, partition",
        ),
    ];
    for (fault, expected) in cases {
        let error = Scenario::resolve(toml::from_str(&source(fault)).unwrap(), &Overrides::default()).unwrap_err();
        assert!(error.message.contains(expected), "{fault}:\n  {}\nshould contain\n  {expected}", error.message);
    }
    let fine = Scenario::resolve(
        toml::from_str(&source("target = \"api->db\"\nkind = \"partition\"\nmode = \"fail_fast\"")).unwrap(),
        &Overrides::default(),
    );
    assert!(fine.is_ok(), "{:?}", fine.err().map(|e| e.message));
}

/// A one-instance `api` whose endpoint `get` runs `steps`, and a `db` with `read` and
/// `write`, at 10 requests a second for 1 s; `extra` is appended (faults, say).
fn api_and_db(steps: &str, extra: &str) -> String {
    format!(
        r#"
name = "steps"
model = "graph"
[run]
horizon_s = 1.0
replicas = 1
[services.api]
instances = 1
workers = 1
[services.api.endpoints.get]
steps = [{steps}]
[services.db]
instances = 1
workers = 1
[services.db.endpoints.read]
work = {{ dist = "constant", value_s = 0.001 }}
[services.db.endpoints.write]
work = {{ dist = "constant", value_s = 0.001 }}
[[workload]]
entry = "api.get"
rate_per_s = 10.0
{extra}"#
    )
}

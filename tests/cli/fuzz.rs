//! The command line's inputs, fuzzed: every built-in scenario, mutated at random
//! (a field deleted, or replaced by a string, a boolean, a table, a huge, negative,
//! zero, tiny, NaN or infinite number, or a 20,000-character string), through `show`
//! and then `run` at two replicas. The only allowed outcomes are exit 0, or exit 2 with
//! a message and no output written — never a panic (101), an I/O error (3), a hang
//! (30 s) or a half-written folder. Cases come from a fixed sequence, so a failure
//! repeats; `STAMPEDE_FUZZ_CASES=10000` runs more (the default runs in well under a minute).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{files_below, stampede, stdout};

/// A path into a TOML document: table keys and array indexes.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn paths(value: &toml::Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match value {
        toml::Value::Table(table) => {
            for (key, inner) in table {
                prefix.push(Step::Key(key.clone()));
                out.push(prefix.clone());
                paths(inner, prefix, out);
                prefix.pop();
            }
        }
        toml::Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                prefix.push(Step::Index(i));
                out.push(prefix.clone());
                paths(inner, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

/// Replaces (or, with `None`, deletes) the value at `path`.
fn mutate(value: &mut toml::Value, path: &[Step], new: Option<toml::Value>) {
    let (last, parents) = path.split_last().expect("a non-empty path");
    let parent = parents.iter().fold(value, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()).unwrap(),
        Step::Index(i) => v.get_mut(*i).unwrap(),
    });
    match (last, parent, new) {
        (Step::Key(k), toml::Value::Table(t), Some(v)) => {
            t.insert(k.clone(), v);
        }
        (Step::Key(k), toml::Value::Table(t), None) => {
            t.remove(k);
        }
        (Step::Index(i), toml::Value::Array(a), Some(v)) => a[*i] = v,
        (Step::Index(i), toml::Value::Array(a), None) => {
            a.remove(*i);
        }
        _ => unreachable!("paths come from the document"),
    }
}

/// Runs `stampede args`, killed after `limit`: its exit code (None: it hung) and stderr.
fn run_bounded(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut text = String::new();
            use std::io::Read;
            let _ = child.stderr.take().unwrap().read_to_string(&mut text);
            return (status.code(), text);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return (None, String::new());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn mutated_scenarios_exit_0_or_2_with_a_message_and_nothing_written() {
    let cases: u64 = std::env::var("STAMPEDE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let list = stdout(&stampede(&["list"]));
    let names: Vec<&str> = list.lines().filter_map(|l| l.split_whitespace().next()).collect();
    let sources: Vec<toml::Value> =
        names.iter().map(|name| toml::Value::Table(stdout(&stampede(&["show", name])).parse().unwrap())).collect();
    let scratch = tempfile::tempdir().unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: usize| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % n as u64) as usize
    };
    let (mut ran, mut refused) = (0, 0);
    let mut failures = Vec::new();
    for case in 0..cases {
        let which = next(sources.len());
        let mut document = sources[which].clone();
        let mut all = Vec::new();
        paths(&document, &mut Vec::new(), &mut all);
        let path = all[next(all.len())].clone();
        let replacements: [Option<toml::Value>; 11] = [
            None,
            Some(toml::Value::String("x".into())),
            Some(toml::Value::Boolean(true)),
            Some(toml::Value::Float(1e308)),
            Some(toml::Value::Float(-5.0)),
            Some(toml::Value::Integer(0)),
            Some(toml::Value::Float(1e-300)),
            Some(toml::Value::Float(f64::NAN)),
            Some(toml::Value::Float(f64::INFINITY)),
            Some(toml::Value::String("y".repeat(20_000))),
            Some(toml::Value::Table("a = { b = { c = { d = 1 } } }".parse().unwrap())),
        ];
        let kind = next(replacements.len());
        mutate(&mut document, &path, replacements[kind].clone());
        let file = scratch.path().join(format!("case-{case}.toml"));
        std::fs::write(&file, toml::to_string(&document).unwrap()).unwrap();
        let out = scratch.path().join(format!("out-{case}"));
        let what = format!("case {case}: {} with {path:?} → mutation {kind}", names[which]);
        let file = file.to_str().unwrap();
        for args in [
            vec!["show", file],
            vec!["run", file, "--replicas", "2", "--quiet", "--no-report", "--out", out.to_str().unwrap()],
        ] {
            let (code, message) = run_bounded(&args, Duration::from_secs(30));
            match code {
                Some(0) => {
                    if args[0] == "run" {
                        ran += 1;
                    }
                    continue;
                }
                Some(2) => {
                    refused += 1;
                    if !message.starts_with("stampede: error: ") || message.len() < 30 {
                        failures.push(format!("{what}: {} exit 2 without a message: {message:?}", args[0]));
                    }
                    if args[0] == "run" && !files_below(Path::new(&out)).is_empty() {
                        failures.push(format!("{what}: run exit 2 wrote {:?}", files_below(&out)));
                    }
                }
                Some(other) => failures.push(format!("{what}: {} exit {other}: {}", args[0], tail(&message))),
                None => failures.push(format!("{what}: {} did not finish in 30 s", args[0])),
            }
            break;
        }
    }
    assert!(failures.is_empty(), "{} of {cases} cases failed:\n{}", failures.len(), failures.join("\n"));
    assert!(ran > 0 && refused > 0, "{ran} ran, {refused} refused: the mutations exercise both outcomes");
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}

/// A random JSON value of at most `depth` levels.
fn random_json(next: &mut dyn FnMut(usize) -> usize, depth: usize) -> serde_json::Value {
    use serde_json::json;
    match next(if depth == 0 { 7 } else { 9 }) {
        0 => json!(null),
        1 => json!(next(2) == 0),
        2 => json!([-1e308, -1.0, 0.0, 1e-300, 0.5, 3.0, 1e12, 1e308][next(8)]),
        3 => json!([-1i64, 0, 1, 7, 4_294_967_296, i64::MAX][next(6)]),
        4 => json!(["", "x", "stack", "naive", "haiku", "brownout", "capacity_step", "fifo"][next(8)]),
        5 => json!("z".repeat(next(5000))),
        6 => json!(u64::MAX),
        7 => serde_json::Value::Array((0..next(4)).map(|_| random_json(next, depth - 1)).collect()),
        _ => {
            let keys = ["config", "knobs", "replicas", "seed", "channel", "toml", "name", "count", "names", "strategy"];
            serde_json::Value::Object(
                (0..next(4)).map(|_| (keys[next(keys.len())].to_string(), random_json(next, depth - 1))).collect(),
            )
        }
    }
}

/// Replaces one leaf of `value` (found by walking at random) with `new`.
fn replace_leaf(value: &mut serde_json::Value, next: &mut dyn FnMut(usize) -> usize, new: serde_json::Value) {
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => {
            let key = map.keys().nth(next(map.len())).unwrap().clone();
            if next(3) == 0 {
                map.insert(key, new);
            } else {
                replace_leaf(map.get_mut(&key).unwrap(), next, new);
            }
        }
        serde_json::Value::Array(items) if !items.is_empty() => {
            let i = next(items.len());
            replace_leaf(&mut items[i], next, new);
        }
        leaf => *leaf = new,
    }
}

/// A server with `caps` over a temporary ring journal and results folder (kept while
/// the folder lives), the Sandbox's default answer and the Learn experiments' ids.
fn api_server(caps: &[&str]) -> (tempfile::TempDir, crate::common::Server, serde_json::Value, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.sqlite");
    let mut args = vec!["--db", db.to_str().unwrap(), "--results", dir.path().to_str().unwrap()];
    args.extend_from_slice(caps);
    let server = crate::common::Server::start(&args);
    let get = |path: &str| -> serde_json::Value {
        let (_, body) = crate::common::http("GET", &format!("{}{path}", server.url), None);
        serde_json::from_str(&body).unwrap()
    };
    let (sandbox, learn) = (get("/api/sandbox"), get("/api/learn"));
    let experiments = learn
        .as_array()
        .or_else(|| learn["experiments"].as_array())
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    (dir, server, sandbox, experiments)
}

/// Every JSON API route of `stampede serve`, fed random bodies and mutations of valid
/// ones over HTTP: the answer is always 2xx or 4xx (never 5xx, never a dropped
/// connection), and the server keeps answering.
#[test]
fn random_bodies_to_every_api_route_get_2xx_or_4xx() {
    let cases: usize =
        std::env::var("STAMPEDE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(500).min(10_000);
    let (_dir, server, sandbox, experiments) = api_server(&["--max-replicas", "20", "--max-keys", "2000"]);
    let http = |method: &str, path: &str, body: Option<&str>| {
        crate::common::http(method, &format!("{}{path}", server.url), body)
    };
    let config = sandbox["config"].clone();
    let valid: Vec<(&str, String, serde_json::Value)> = {
        let mut routes = vec![
            ("POST", "/api/sandbox/run".to_string(), serde_json::json!({"config": config, "channel": "f"})),
            ("POST", "/api/sandbox/toml".to_string(), serde_json::json!({"config": config})),
            ("POST", "/api/sandbox/load".to_string(), serde_json::json!({"toml": "name = \"x\""})),
            ("POST", "/api/ring/init".to_string(), serde_json::json!({"strategy": "vnodes", "hash": "fast"})),
            ("POST", "/api/ring/strategy".to_string(), serde_json::json!({"strategy": "jump"})),
            ("POST", "/api/ring/nodes".to_string(), serde_json::json!({"name": "n", "weight": 1.0})),
            ("POST", "/api/ring/keys".to_string(), serde_json::json!({"count": 10})),
            ("DELETE", "/api/ring/nodes/n".to_string(), serde_json::json!(null)),
            ("DELETE", "/api/ring/keys/key-1".to_string(), serde_json::json!(null)),
        ];
        for id in &experiments {
            routes.push(("POST", format!("/api/learn/{id}"), serde_json::json!({"knobs": {}, "replicas": 4})));
        }
        routes
    };
    let mut state = 0x5851_f42d_4c95_7f2d_u64;
    let mut next = |n: usize| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % n.max(1) as u64) as usize
    };
    let mut failures = Vec::new();
    let mut outcomes = std::collections::BTreeMap::new();
    let mut statuses = std::collections::BTreeMap::new();
    for case in 0..cases {
        let (method, path, body) = &valid[next(valid.len())];
        let mut body = body.clone();
        match next(4) {
            0 => body = random_json(&mut next, 3),
            1 => {
                let new = random_json(&mut next, 2);
                replace_leaf(&mut body, &mut next, new);
            }
            // A number where a number was: gets past the types to the handlers' own checks.
            _ => {
                let new = serde_json::json!([-1.0, 0.0, 1e-300, 1e308, 1e12, 0.5, 3.0, 100.0][next(8)]);
                replace_leaf(&mut body, &mut next, new);
            }
        }
        let text = body.to_string();
        let (status, answer) = http(method, path, Some(&text));
        *outcomes.entry(status / 100).or_insert(0) += 1;
        *statuses.entry(status).or_insert(0) += 1;
        if !(200..500).contains(&status) {
            failures.push(format!("case {case}: {method} {path} {}: {status} {answer}", &text[..text.len().min(300)]));
        }
    }
    let (status, _) = http("GET", "/api/ring", None);
    assert_eq!(status, 200, "the server still answers");
    assert!(failures.is_empty(), "{} of {cases} requests got 5xx:\n{}", failures.len(), failures.join("\n"));
    // Both outcomes occur: the mutations reach the handlers, not only the JSON parser.
    assert!(outcomes.get(&2).is_some_and(|n| *n > 0) && outcomes.get(&4).is_some_and(|n| *n > 0), "{outcomes:?}");
    eprintln!("JSON API fuzz: {cases} requests, by status {statuses:?}");
}

/// Every numeric field of every JSON API route's valid body, replaced in turn by each
/// extreme a tester reaches for (an incident starting or lasting 1e9 s made the server
/// allocate 128 GB and abort): each answer is 2xx or 4xx, and after each route's
/// worst cases the server still answers. Deterministic, unlike the random fuzz above:
/// every (route, field, value) is sent once.
#[test]
fn the_server_survives_the_worst_value_in_every_field_of_every_route() {
    let caps = ["--max-replicas", "4", "--max-sim-seconds", "40", "--max-turns", "4000", "--max-keys", "2000"];
    let (_dir, server, sandbox, experiments) = api_server(&caps);
    let http = |method: &str, path: &str, body: Option<&str>| {
        crate::common::http(method, &format!("{}{path}", server.url), body)
    };
    let mut config = sandbox["config"].clone();
    config["replicas"] = 2.into();
    config["duration_s"] = 10.0.into();
    config["warmup_s"] = 2.0.into();
    let mut routes = vec![
        ("/api/sandbox/run", serde_json::json!({"config": config, "channel": "w"})),
        ("/api/sandbox/toml", serde_json::json!({"config": config})),
        ("/api/ring/nodes", serde_json::json!({"name": "n", "weight": 1.0})),
        ("/api/ring/keys", serde_json::json!({"count": 10})),
    ];
    let learn_routes: Vec<String> = experiments.iter().map(|id| format!("/api/learn/{id}")).collect();
    for route in &learn_routes {
        routes.push((route.as_str(), serde_json::json!({"knobs": {}, "replicas": 2})));
    }
    /// The paths to every number in `value`.
    fn numbers(value: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match value {
            serde_json::Value::Number(_) => out.push(path.clone()),
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    path.push(key.clone());
                    numbers(inner, path, out);
                    path.pop();
                }
            }
            serde_json::Value::Array(items) => {
                for (i, inner) in items.iter().enumerate() {
                    path.push(i.to_string());
                    numbers(inner, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let extremes = [1e9, 1e308, -1e9, -1.0, 0.0, 1e-300, 4_294_967_296.0];
    let (mut sent, mut failures) = (0, Vec::new());
    let started = Instant::now();
    for (route, body) in &routes {
        let mut paths = Vec::new();
        numbers(body, &mut Vec::new(), &mut paths);
        for path in &paths {
            for value in extremes {
                let mut worst = body.clone();
                let leaf = path.iter().fold(&mut worst, |v, key| match v {
                    serde_json::Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
                    other => &mut other[key.as_str()],
                });
                *leaf = serde_json::json!(value);
                let text = worst.to_string();
                let (status, answer) = http("POST", route, Some(&text));
                sent += 1;
                if !(200..500).contains(&status) {
                    failures.push(format!("{route} {} = {value}: {status} {answer}", path.join(".")));
                }
            }
        }
        let (status, _) = http("GET", "/api/ring", None);
        assert_eq!(status, 200, "the server still answers after {route}'s worst cases");
    }
    assert!(failures.is_empty(), "{} of {sent} requests got 5xx:\n{}", failures.len(), failures.join("\n"));
    assert!(sent > 200, "every numeric field of every route: {sent}");
    eprintln!("worst values: {sent} requests in {:.1} s", started.elapsed().as_secs_f64());
}

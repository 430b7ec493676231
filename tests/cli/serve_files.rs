//! The web app reads no server file (issue 43, item 4): a fixture or scenario that
//! arrives over HTTP and names a file — absolute, relative, `..`, through a symlink,
//! under `/proc`, a FIFO — in any field that takes one is refused with 400 before
//! anything is read, and no answer quotes a byte of the file.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::Server;

/// Paths a hostile page might name, with what the server must not echo.
fn hostile_paths(dir: &std::path::Path) -> Vec<String> {
    let link = dir.join("link-to-passwd");
    let _ = std::os::unix::fs::symlink("/etc/passwd", &link);
    let fifo = dir.join("pipe");
    let _ = std::process::Command::new("mkfifo").arg(&fifo).status();
    let secret = dir.join("secret.csv");
    std::fs::write(&secret, "latency_s\n0.25\n0.5\n").unwrap();
    vec![
        "/etc/passwd".into(),
        "../../../../../../etc/passwd".into(),
        "lat.csv".into(),
        link.display().to_string(),
        "/proc/self/environ".into(),
        fifo.display().to_string(),
        secret.display().to_string(),
        "/dev/zero".into(),
    ]
}

#[test]
fn the_web_app_refuses_every_file_a_request_names_before_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--results", dir.path().to_str().unwrap()]);
    let post =
        |body: Value| crate::common::http("POST", &format!("{}/api/sandbox/load", server.url), Some(&body.to_string()));
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/examples");
    let fixture = std::fs::read_to_string(examples.join("chat-product.toml")).unwrap();
    let scenario = std::fs::read_to_string(examples.join("chat-product-scenario.toml")).unwrap();
    let scenario = scenario.split("[[grid.case]]").next().unwrap().to_string();
    // The untouched pair loads (the uploaded fixture is held in memory, not a file).
    let (status, body) = post(json!({"toml": scenario, "fixture": fixture}));
    assert_eq!(status, 200, "{body}");

    let without_rate = scenario.replace("turns_per_s = 5.0\n", "");
    let measured = "ttft_s = { dist = \"lognormal\", median_s = 0.3, sigma = 0.3 }";
    for path in hostile_paths(dir.path()) {
        let fields: Vec<(&str, String, String)> = vec![
            (
                "tiers.fast.ttft_s (empirical)",
                fixture.replace(measured, &format!("ttft_s = {{ dist = \"empirical\", file = {path:?} }}")),
                scenario.clone(),
            ),
            (
                "tiers.fast.ttft_s (a column)",
                fixture.replace(
                    measured,
                    &format!("ttft_s = {{ dist = \"empirical\", file = {path:?}, column = \"zzz\" }}"),
                ),
                scenario.clone(),
            ),
            (
                "tiers.fast.ttft_s (hdr)",
                fixture.replace(measured, &format!("ttft_s = {{ dist = \"hdr\", file = {path:?}, unit = \"us\" }}")),
                scenario.clone(),
            ),
            (
                "tiers.fast.ttft_s (prometheus)",
                fixture.replace(
                    measured,
                    &format!("ttft_s = {{ dist = \"prometheus\", file = {path:?}, metric = \"x\" }}"),
                ),
                scenario.clone(),
            ),
            ("load.rate_file", fixture.clone(), format!("{without_rate}\n[load]\nrate_file = {path:?}\n")),
            (
                "load.arrivals.trace",
                fixture.clone(),
                format!("{without_rate}\n[load]\narrivals = {{ trace = {path:?} }}\n"),
            ),
            ("workload.fixture", fixture.clone(), scenario.replace("\"chat-product.toml\"", &format!("{path:?}"))),
        ];
        for (field, fixture_text, scenario_text) in fields {
            if field == "workload.fixture" && path == "lat.csv" {
                continue; // the uploaded fixture may be named so: it is the upload, not a server file
            }
            let started = Instant::now();
            let (status, body) = post(json!({"toml": scenario_text, "fixture": fixture_text}));
            assert!(started.elapsed() < Duration::from_secs(10), "{field} = {path}: took {:?}", started.elapsed());
            assert_eq!(status, 400, "{field} = {path}: {body}");
            for leaked in ["root:", "0.25", "PATH=", "its columns"] {
                assert!(!body.contains(leaked), "{field} = {path}: the answer quotes the file: {body}");
            }
            let refused_before_reading =
                ["reads no file on the server", "which the Sandbox cannot see", "inside the scenario's folder"]
                    .iter()
                    .any(|why| body.contains(why));
            assert!(refused_before_reading, "{field} = {path}: {body}");
        }
    }
    // The server still answers at once (no thread waits on the FIFO).
    let started = Instant::now();
    let (status, _) = crate::common::http("GET", &format!("{}/", server.url), None);
    assert_eq!(status, 200);
    assert!(started.elapsed() < Duration::from_secs(5));
}

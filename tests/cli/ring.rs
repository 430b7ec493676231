//! `stampede ring` and the ring page of `stampede serve`: the README's walk-through,
//! bad input refused with exit 2 and the file unchanged, the comparison and its
//! Parquet, the JSON API against the CLI and the database, and — in headless
//! Chromium — the page driven like a user, its tables checked against `status --json`.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::{http, stampede, stderr, stdout, Server};

fn ring(db: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["ring", "--db", db.to_str().unwrap()];
    all.extend_from_slice(args);
    stampede(&all)
}

fn ok(db: &Path, args: &[&str]) -> String {
    let output = ring(db, args);
    assert!(output.status.success(), "ring {args:?}: {}", stderr(&output));
    stdout(&output)
}

fn json(db: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&ok(db, args)).unwrap()
}

/// Keys per node from `status --json`.
fn counts(status: &Value) -> Vec<(String, u64)> {
    status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap().to_string(), n["keys"].as_u64().unwrap()))
        .collect()
}

#[test]
fn the_walk_through_moves_only_what_it_must_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.sqlite");
    ok(&db, &["init", "--strategy", "vnodes", "--vnodes", "50"]);
    for node in ["a", "b", "c"] {
        ok(&db, &["add-node", node]);
    }
    assert!(ok(&db, &["add-keys", "--count", "3000"]).contains("3000 keys added"));
    let before = json(&db, &["status", "--json"]);
    let joined = ok(&db, &["add-node", "d"]);
    assert!(joined.contains("keys moved") && joined.contains("→ d"), "{joined}");
    let after = json(&db, &["status", "--json"]);
    // Only keys that now belong to d moved: every other node lost keys, none gained.
    let (b, a) = (counts(&before), counts(&after));
    let d = a.iter().find(|(n, _)| n == "d").unwrap().1;
    let lost: u64 = b.iter().zip(&a).map(|((_, x), (_, y))| x - y).sum();
    assert_eq!(lost, d, "the keys d gained are exactly those the others lost");
    assert_eq!(after["keys"], 3000);

    let history = json(&db, &["history", "--json"]);
    let entries = history.as_array().unwrap();
    assert_eq!(entries.len(), 6);
    assert_eq!(entries[5]["moved"].as_u64().unwrap(), d);
    // Replaying to operation 5 is the state before d joined, and changes nothing.
    let replayed = json(&db, &["replay", "--to", "5", "--json"]);
    assert_eq!(counts(&replayed), counts(&before));
    assert_eq!(json(&db, &["history", "--json"]), history);

    let found = json(&db, &["lookup", "key-17", "--json"]);
    assert_eq!(found["stored"], true);
    assert!(found["arc"].is_array(), "a ring strategy names the arc");
    let removed = ok(&db, &["remove-node", "b"]);
    assert!(removed.contains("b → "), "{removed}");
    assert!(
        !removed.contains("a → ") && !removed.contains("c → ") && !removed.contains("d → "),
        "only b's keys moved: {removed}"
    );
}

#[test]
fn bad_input_is_refused_with_exit_2_and_the_file_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.sqlite");
    let missing = ring(&db, &["status"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("stampede ring init"), "{}", stderr(&missing));
    assert!(!db.exists(), "a read creates nothing");
    ok(&db, &["init", "--strategy", "ring"]);
    ok(&db, &["add-node", "a"]);
    ok(&db, &["add-keys", "x", "y"]);
    let history = json(&db, &["history", "--json"]);
    let status = json(&db, &["status", "--json"]);
    for (args, expected) in [
        (vec!["add-node", "a"], "a node with that name exists"),
        (vec!["remove-node", "zzz"], "no such node"),
        (vec!["remove-key", "zzz"], "no such key"),
        (vec!["add-keys", "x"], "already exists"),
        (vec!["add-node", "w", "--weight", "2"], "weights work with"),
        (vec!["init"], "already holds a ring"),
        (vec!["strategy", "--strategy", "nonsense"], "not a strategy"),
        (vec!["strategy", "--strategy", "maglev", "--table-size", "100"], "must be a prime"),
        (vec!["add-keys"], "--count"),
        (vec!["replay", "--to", "99"], "operations 1 to"),
    ] {
        let output = ring(&db, &args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{args:?}: {}", stderr(&output));
        assert_eq!(json(&db, &["history", "--json"]), history, "{args:?} changed the journal");
        assert_eq!(json(&db, &["status", "--json"]), status, "{args:?} changed the ring");
    }
    // An empty ring has nowhere to look a key up.
    let empty = dir.path().join("empty.sqlite");
    ok(&empty, &["init"]);
    let output = ring(&empty, &["lookup", "k"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("no nodes"), "{}", stderr(&output));
    // A file that is not a ring is refused and left alone.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "x".repeat(200)).unwrap();
    let output = ring(&text, &["add-node", "a"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "x".repeat(200));
}

#[test]
fn compare_prints_every_strategy_and_writes_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let output = stampede(&[
        "ring",
        "compare",
        "--nodes",
        "8",
        "--keys",
        "20000",
        "--grow-to",
        "10",
        "--hash",
        "fast",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let result: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let rows = result["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["strategy"].as_str().unwrap()).collect();
    assert_eq!(names, ["ring", "vnodes", "bounded", "jump", "rendezvous", "maglev", "multiprobe"]);
    assert_eq!(result["growth"].as_array().unwrap().len(), 7 * 2);
    let table = stampede_output::Table::read(&out.join("compare.parquet")).unwrap();
    assert_eq!(table.rows(), 7);
    let peaks = table.numbers("peak_over_mean").unwrap();
    for (row, peak) in rows.iter().zip(peaks) {
        assert_eq!(row["peak_over_mean"].as_f64().unwrap(), peak);
    }
    assert_eq!(stampede_output::Table::read(&out.join("growth.parquet")).unwrap().rows(), 14);
}

#[test]
fn the_api_agrees_with_the_cli_and_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.sqlite");
    let server = Server::start(&["--db", db.to_str().unwrap(), "--results", dir.path().to_str().unwrap()]);
    let url = &server.url;
    let (status, body) = http("GET", &format!("{url}/api/ring"), None);
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["initialised"], false);
    let (status, _) = http("POST", &format!("{url}/api/ring/init"), Some(r#"{"strategy":"rendezvous","hash":"fast"}"#));
    assert_eq!(status, 200);
    for name in ["n1", "n2", "n3"] {
        let (status, body) = http("POST", &format!("{url}/api/ring/nodes"), Some(&format!(r#"{{"name":"{name}"}}"#)));
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = http("POST", &format!("{url}/api/ring/keys"), Some(r#"{"count":500}"#));
    assert_eq!(status, 200, "{body}");
    // The CLI sees what the API did, on the same file.
    ok(&db, &["add-node", "n4"]);
    let (status, body) = http("DELETE", &format!("{url}/api/ring/nodes/n2"), None);
    assert_eq!(status, 200, "{body}");
    let applied: Value = serde_json::from_str(&body).unwrap();
    assert!(applied["flows"].as_array().unwrap().iter().all(|f| f[0] == "n2"), "only n2's keys move: {applied}");
    let (status, body) = http("POST", &format!("{url}/api/ring/nodes"), Some(r#"{"name":"n1"}"#));
    assert_eq!(status, 400);
    assert!(body.contains("a node with that name exists"), "{body}");

    let (_, body) = http("GET", &format!("{url}/api/ring"), None);
    let api: Value = serde_json::from_str(&body).unwrap();
    let cli = json(&db, &["status", "--json"]);
    assert_eq!(api["status"], cli, "the API's status is the CLI's");
    assert_eq!(api["keys"].as_array().unwrap().len(), 500);
    // And both agree with the database's own rows.
    let conn = rusqlite_count(&db);
    assert_eq!(counts(&cli), conn);
    let (_, body) = http("GET", &format!("{url}/api/ring?at=5"), None);
    let past: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(past["status"]["nodes"].as_array().unwrap().len(), 3, "before n4 joined");
    let (status, _) = http("GET", &format!("{url}/api/ring?at=99"), None);
    assert_eq!(status, 400);
    let (status, page) = http("GET", &format!("{url}/ring"), None);
    assert!(status == 200 && page.contains("Ring explorer") && page.contains("/ring/ring.js"));
}

/// Keys per node straight from SQLite, through the `ring` crate's journal.
fn rusqlite_count(db: &Path) -> Vec<(String, u64)> {
    let journal = stampede_ring::Journal::open(db, false).unwrap();
    let assignment = journal.assignment().unwrap();
    let status = {
        let mut journal = stampede_ring::Journal::open(db, false).unwrap();
        journal.read(|e| Ok(e.nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>())).unwrap()
    };
    status
        .into_iter()
        .map(|name| {
            let n = assignment.iter().filter(|(_, owner)| *owner == name).count() as u64;
            (name, n)
        })
        .collect()
}

#[test]
fn the_results_page_lists_output_folders_and_serves_their_reports() {
    let dir = tempfile::tempdir().unwrap();
    let run = stampede(&["run", "mmc", "--replicas", "2", "--out", dir.path().to_str().unwrap(), "--quiet"]);
    assert!(run.status.success());
    let server = Server::start(&[
        "--db",
        dir.path().join("r.sqlite").to_str().unwrap(),
        "--results",
        dir.path().to_str().unwrap(),
    ]);
    let (status, body) = http("GET", &format!("{}/api/results", server.url), None);
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list[0]["name"], "mmc");
    assert_eq!(list[0]["has_report"], true);
    let (status, page) = http("GET", &format!("{}/results", server.url), None);
    assert!(status == 200 && page.contains("/results/mmc/report.html"));
    let (status, report) = http("GET", &format!("{}/results/mmc/report.html", server.url), None);
    assert_eq!(status, 200);
    assert_eq!(report, std::fs::read_to_string(dir.path().join("mmc/report.html")).unwrap());
    let (status, _) = http("GET", &format!("{}/results/..%2Fetc/report.html", server.url), None);
    assert!(status == 400 || status == 404);
}

/// The page driven as a user would: add nodes and keys, remove a node, step back;
/// what it shows is checked against `stampede ring status --json` on the same file.
#[test]
fn the_ring_page_in_headless_chromium_shows_what_the_cli_reports() {
    let chromium = match crate::common::chromium() {
        Ok(browser) => browser,
        Err(why) => {
            return crate::common::skip_browser("the_ring_page_in_headless_chromium_shows_what_the_cli_reports", &why)
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.sqlite");
    ok(&db, &["init", "--strategy", "vnodes", "--vnodes", "20"]);
    let server = Server::start(&["--db", db.to_str().unwrap(), "--results", dir.path().to_str().unwrap()]);
    let mut browser = crate::cdp::Browser::start(&chromium);
    browser.navigate(&format!("{}/ring", server.url));
    browser.wait_for("document.body.dataset.ringSeq === '1'");
    let mut seq = 1;
    let mut act = |browser: &mut crate::cdp::Browser, script: &str| {
        browser.eval(script);
        seq += 1;
        browser.wait_for(&format!("document.body.dataset.ringSeq === '{seq}'"));
    };
    for name in ["alpha", "beta", "gamma"] {
        act(&mut browser, &format!(
            "document.querySelector('#add-node [name=name]').value = '{name}'; document.querySelector('#add-node').requestSubmit();"
        ));
    }
    act(&mut browser, "document.querySelector('#add-keys [name=count]').value = '300'; document.querySelector('#add-keys').requestSubmit();");
    act(&mut browser, "document.querySelector('[data-remove-node=beta]').click();");

    let shown = browser.eval(
        "Array.from(document.querySelectorAll('#nodes tbody tr')).map(r => [r.dataset.node, Number(r.querySelector('td.keys').textContent)])",
    );
    let status = json(&db, &["status", "--json"]);
    let expected: Vec<Value> = counts(&status).into_iter().map(|(n, k)| json!([n, k])).collect();
    assert_eq!(shown.as_array().unwrap(), &expected, "the page's node table is the CLI's status");
    assert_eq!(browser.eval("document.querySelector('#stat-keys').textContent"), json!("300"));
    // The keys beta held are listed as moved, from beta.
    let moved =
        browser.eval("Array.from(document.querySelectorAll('#moved tbody tr')).map(r => r.children[1].textContent)");
    let moved = moved.as_array().unwrap();
    let history = json(&db, &["history", "--json"]);
    assert_eq!(moved.len() as u64, history[5]["moved"].as_u64().unwrap());
    assert!(!moved.is_empty() && moved.iter().all(|from| from == "beta"), "{moved:?}");
    // The ring shows every key and a point per virtual node.
    assert_eq!(browser.eval("document.querySelectorAll('#ring circle.key').length"), json!(300));
    assert_eq!(browser.eval("document.querySelectorAll('#ring circle.point').length"), json!(40));
    // One step back: beta is there again, and the journal is untouched.
    browser.eval("document.querySelector('#back').click();");
    browser.wait_for("document.body.dataset.ringSeq === '5'");
    let names = browser.eval("Array.from(document.querySelectorAll('#nodes tbody tr')).map(r => r.dataset.node)");
    assert_eq!(names, json!(["alpha", "beta", "gamma"]));
    assert_eq!(json(&db, &["history", "--json"]), history);
    // A refused operation is shown, not thrown.
    browser.eval("document.querySelector('#latest').click();");
    browser.wait_for("document.body.dataset.ringSeq === '6'");
    browser.eval("document.querySelector('#add-node [name=name]').value = 'alpha'; document.querySelector('#add-node').requestSubmit();");
    browser.wait_for("document.querySelector('#message').textContent.includes('exists')");
    assert!(browser.errors.is_empty(), "console errors: {:?}", browser.errors);
}

#[test]
fn a_strategy_is_named_as_a_word_or_with_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.sqlite");
    assert!(ok(&db, &["init", "rendezvous"]).contains("init rendezvous"));
    ok(&db, &["add-node", "a"]);
    assert!(ok(&db, &["strategy", "jump"]).contains("strategy jump"));
    assert_eq!(json(&db, &["status", "--json"])["settings"]["strategy"], "jump", "the word is the strategy");
    assert!(ok(&db, &["strategy", "--strategy", "maglev"]).contains("strategy maglev"));
    let both = ring(&db, &["strategy", "jump", "--strategy", "maglev"]);
    assert_eq!(both.status.code(), Some(2), "two strategies at once are refused");
}

/// `ring add-keys --count 200000` killed with SIGKILL at moments spread over its run:
/// after each, `status` works, the journal's last operation is complete (all its keys
/// are there) or absent (none are), and replaying the journal gives the tables. A soak
/// loop: CI kills it at 8 moments (about 15 s), `STAMPEDE_KILL_MOMENTS=200` many more
/// (the same sequence of moments, continued).
#[test]
fn the_journal_survives_sigkill_in_the_middle_of_adding_keys() {
    let moments: usize = std::env::var("STAMPEDE_KILL_MOMENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ring.sqlite");
    ok(&db, &["init", "--strategy", "vnodes", "--vnodes", "50", "--hash", "fast"]);
    for node in ["a", "b", "c"] {
        ok(&db, &["add-node", node]);
    }
    let history_len = |db: &Path| json(db, &["history", "--json"]).as_array().unwrap().len();
    let (mut keys, mut operations) = (0u64, history_len(&db));
    // Moments from a fixed sequence (not the clock), spread over about three seconds.
    let mut state = 0x2545_f491_u64;
    let (mut completed, mut interrupted) = (0, 0);
    for _ in 0..moments {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let delay = std::time::Duration::from_millis(50 + (state >> 33) % 3_000);
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["ring", "--db", db.to_str().unwrap(), "add-keys", "--count", "200000"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let finished = child.try_wait().unwrap().is_some();
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let status = json(&db, &["status", "--json"]);
        let now = status["keys"].as_u64().unwrap();
        let length = history_len(&db);
        if now == keys + 200_000 {
            assert_eq!(length, operations + 1, "a complete add-keys is journaled once");
            completed += 1;
        } else {
            assert!(!finished, "a finished run left {now} keys, expected {}", keys + 200_000);
            assert_eq!(now, keys, "a killed add-keys left some of its keys");
            assert_eq!(length, operations, "a killed add-keys left a journal entry");
            interrupted += 1;
        }
        (keys, operations) = (now, length);
        let replayed = json(&db, &["replay", "--to", &length.to_string(), "--json"]);
        assert_eq!(replayed["keys"], status["keys"]);
        assert_eq!(counts(&replayed), counts(&status), "replaying the journal gives the tables");
    }
    if completed == 0 {
        // A loaded machine (the whole suite runs in parallel) may not finish 200,000 keys
        // within any of the moments: let one run finish, and check it is journaled once.
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["ring", "--db", db.to_str().unwrap(), "add-keys", "--count", "200000"])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let now = json(&db, &["status", "--json"]);
        assert_eq!(now["keys"].as_u64(), Some(keys + 200_000), "a complete add-keys adds every key");
        assert_eq!(history_len(&db), operations + 1, "a complete add-keys is journaled once");
        let replayed = json(&db, &["replay", "--to", &(operations + 1).to_string(), "--json"]);
        assert_eq!(counts(&replayed), counts(&now), "replaying the journal gives the tables");
        completed += 1;
    }
    assert!(completed >= 1 && interrupted >= 1, "{completed} completed, {interrupted} interrupted");
}

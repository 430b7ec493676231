//! The Learn and Sandbox pages in headless Chromium, driven as a user would: the
//! retries experiment draws a second attempt after a dotted wait; every experiment
//! renders; a reordered Sandbox stack runs, and the numbers it shows are those
//! `stampede run` writes for the TOML it exports; nothing is requested from outside
//! the server, and nothing is logged as an error.

use serde_json::{json, Value};
use stampede_output::Table;

use crate::cdp::Browser;
use crate::common::{skip_browser, stampede, stderr, Server};

fn browser_or_skip(test: &str) -> Option<Browser> {
    match crate::common::chromium() {
        Ok(chromium) => Some(Browser::start(&chromium)),
        Err(why) => {
            skip_browser(test, &why);
            None
        }
    }
}

/// Waits for the page's next finished run (it counts them in `data-runs`).
fn next_run(browser: &mut Browser, after: u64) -> u64 {
    browser.wait_for(&format!(
        "Number(document.body.dataset.runs || 0) > {after} && document.body.dataset.state === 'ready'"
    ));
    browser.eval("Number(document.body.dataset.runs)").as_u64().unwrap()
}

/// Every resource the page loaded came from `server`.
fn only_local(browser: &mut Browser, server: &str) {
    let outside = browser.eval(&format!(
        "performance.getEntriesByType('resource').map(e => e.name).filter(n => !n.startsWith({server:?}))"
    ));
    assert_eq!(outside, json!([]), "requests outside the server");
}

#[test]
fn the_learn_page_draws_a_retry_after_a_dotted_wait_and_every_experiment_runs() {
    let Some(mut browser) =
        browser_or_skip("the_learn_page_draws_a_retry_after_a_dotted_wait_and_every_experiment_runs")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--results", dir.path().to_str().unwrap()]);
    browser.navigate(&format!("{}/learn#retries", server.url));
    let mut runs = next_run(&mut browser, 0);
    assert_eq!(browser.eval("document.querySelector('#title').textContent"), json!("3 · Retries"));
    // A call's second attempt starts where its dotted wait ends, which starts where its first attempt ends.
    let drawn = browser.eval(
        "(() => { const svg = document.querySelector('#timeline svg'); \
           for (const second of svg.querySelectorAll('rect.attempt[data-attempt=\"2\"]')) { \
             const call = second.dataset.call; \
             const first = svg.querySelector(`rect.attempt[data-attempt=\"1\"][data-call=\"${call}\"]`); \
             const wait = svg.querySelector(`line.wait[data-call=\"${call}\"]`); \
             if (!first || !wait || wait.getAttribute('stroke-dasharray') === null) continue; \
             const firstEnd = Number(first.getAttribute('x')) + Number(first.getAttribute('width')); \
             return { firstEnd, waitStart: Number(wait.getAttribute('x1')), waitEnd: Number(wait.getAttribute('x2')), \
                      secondStart: Number(second.getAttribute('x')), outcome: first.dataset.outcome }; } \
           return null; })()",
    );
    assert!(drawn.is_object(), "no second attempt after a dotted wait");
    let at = |k: &str| drawn[k].as_f64().unwrap();
    assert!((at("waitEnd") - at("secondStart")).abs() < 0.01, "{drawn}");
    assert!((at("firstEnd") - at("waitStart")).abs() < 2.01, "{drawn}"); // a bar is at least 2 px wide
    assert_ne!(drawn["outcome"], json!("200"), "the first attempt failed");
    let note = browser.eval("document.querySelector('#timeline figcaption').textContent");
    assert!(note.as_str().unwrap().contains("showing 50 of"), "{note}");
    assert_eq!(browser.eval("document.querySelectorAll('#checks tr').length"), json!(2));
    // The knobs rerun it: one attempt means one attempt per request.
    browser.eval(
        "const knob = document.querySelector('input[data-knob=attempts]'); knob.value = 1; knob.dispatchEvent(new Event('input'));",
    );
    browser.wait_for(
        "document.querySelector('#status').classList.contains('stale') || Number(document.body.dataset.runs) > 1",
    );
    runs = next_run(&mut browser, runs);
    assert_eq!(browser.eval("document.querySelector('.card[data-name=amplification]').dataset.value"), json!("1"));
    assert!(browser
        .eval("document.querySelector('#setup').textContent")
        .as_str()
        .unwrap()
        .contains("up to 1 attempts"));
    // Every experiment renders, with its cards and its timeline.
    browser.eval("document.querySelector('#steps li:first-child button').click();");
    for step in 1..=10 {
        runs = next_run(&mut browser, runs);
        let title = browser.eval("document.querySelector('#title').textContent");
        assert!(title.as_str().unwrap().starts_with(&format!("{step} ·")), "{title}");
        assert!(browser.eval("document.querySelectorAll('#cards .card').length").as_u64().unwrap() >= 5);
        assert!(browser.eval("document.querySelectorAll('#timeline rect.attempt').length").as_u64().unwrap() > 0);
        if step < 10 {
            browser.eval("document.querySelector('#next').click();");
        }
    }
    only_local(&mut browser, &server.url);
    assert!(browser.errors.is_empty(), "console errors: {:?}", browser.errors);
}

#[test]
fn a_reordered_sandbox_shows_what_stampede_run_gives_for_its_exported_toml() {
    let Some(mut browser) = browser_or_skip("a_reordered_sandbox_shows_what_stampede_run_gives_for_its_exported_toml")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--results", dir.path().to_str().unwrap()]);
    browser.navigate(&format!("{}/sandbox", server.url));
    let mut runs = next_run(&mut browser, 0);
    // Fewer replicas and a shorter run, as a user would type them.
    browser.eval(
        "for (const [id, v] of [['load-replicas', 20], ['load-duration_s', 30], ['load-seed', 7]]) { \
           const input = document.getElementById(id); input.value = v; input.dispatchEvent(new Event('change')); }",
    );
    runs = next_run(&mut browser, runs);
    // Keyboard: the breaker moves above the adaptive limiter; a button removes the limiter.
    browser.eval(
        "const breaker = document.querySelector('#stack li[data-gate=breaker]'); breaker.focus(); \
         breaker.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowUp', altKey: true, bubbles: true }));",
    );
    browser.eval(
        "document.querySelector('#stack li[data-gate=adaptive] button[aria-label=\"remove adaptive\"]').click();",
    );
    runs = next_run(&mut browser, runs);
    let order = browser.eval("Array.from(document.querySelectorAll('#stack li')).map(li => li.dataset.gate)");
    assert_eq!(order, json!(["admission", "bulkhead", "breaker", "quota", "retry", "fallback"]));
    assert_eq!(browser.eval("document.querySelectorAll('#palette [data-restore=adaptive]').length"), json!(1));
    let toml = browser.eval("document.querySelector('#toml').value").as_str().unwrap().to_string();
    assert!(
        toml.contains("gates = [\"admission\", \"bulkhead\", \"breaker\", \"quota\", \"retry\", \"fallback\"]"),
        "{toml}"
    );
    // As text: serde_json's default float parsing may be one ulp off; Rust's `parse` is exact.
    let shown: Value = browser.eval(
        "Object.fromEntries(Array.from(document.querySelectorAll('#cards .card')).map(c => [c.dataset.name, c.dataset.value]))",
    );
    // The exported scenario, run by the CLI with the same seed and replicas.
    let file = dir.path().join("sandbox.toml");
    std::fs::write(&file, &toml).unwrap();
    let out = dir.path().join("out");
    let output = stampede(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap(), "--no-report", "--quiet"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = Table::read(&out.join("sandbox/summary.parquet")).unwrap();
    let names = [
        "turns_answered",
        "answered_turns_per_s",
        "wasted_usd",
        "attempts",
        "retry_ratio",
        "calls_failed_http_529",
        "breaker_trips",
    ];
    for name in names {
        let cli = summary.numbers(&format!("{name}_mean")).unwrap()[0];
        let page: f64 = shown[name].as_str().unwrap().parse().unwrap();
        assert_eq!(page, cli, "{name}: the page shows what stampede run writes");
    }
    // The fan-out shown is the one the model made (the reference's 3.11 counts the answer
    // call even when think answered): the mean of each replica's calls ÷ turns.
    let replicas = Table::read(&out.join("sandbox/replicas.parquet")).unwrap();
    let column = |name: &str| replicas.numbers(name).unwrap();
    let (calls, turns) = (column("calls_offered"), column("turns_offered"));
    let fan_out = calls.iter().zip(&turns).map(|(c, t)| c / t).sum::<f64>() / calls.len() as f64;
    let page: f64 = shown["calls_per_turn"].as_str().unwrap().parse().unwrap();
    assert!((page - fan_out).abs() < 1e-12 && page < 3.11 && page > 2.5, "{page} vs {fan_out}");
    // Pin it, change the load, and the comparison says which differences are significant.
    browser.eval("document.querySelector('#pin').click();");
    browser.eval("const load = document.getElementById('load-turns_per_s'); load.value = 5; load.dispatchEvent(new Event('change'));");
    runs = next_run(&mut browser, runs);
    let significant =
        browser.eval("document.querySelector('#comparison tr[data-metric=turns_answered]').dataset.significant");
    assert_eq!(significant, json!("true"), "a quarter of the load answers significantly fewer turns");
    // An incident outside the run is flagged.
    browser.eval("const start = document.querySelector('#incidents input'); start.value = 500; start.dispatchEvent(new Event('change'));");
    runs = next_run(&mut browser, runs);
    assert!(browser
        .eval("document.querySelector('#warnings').textContent")
        .as_str()
        .unwrap()
        .contains("after the run ends"));
    // A capacity step takes its severity, the share of the fleet still up.
    browser.eval("const kind = document.querySelectorAll('#incidents select')[1]; kind.value = 'capacity_step'; kind.dispatchEvent(new Event('change'));");
    runs = next_run(&mut browser, runs);
    let exported = browser.eval("document.querySelector('#toml').value");
    assert!(
        exported
            .as_str()
            .unwrap()
            .contains("kind = \"capacity_step\"\nstart_s = 500.0\nduration_s = 20.0\nscale = 0.5"),
        "{exported}"
    );
    // A TOML loads back into the form.
    browser.eval(&format!(
        "document.querySelector('#toml').value = {:?}; document.querySelector('#load-toml').click();",
        toml.replace("turns_per_s = 20.0", "turns_per_s = 11.0")
    ));
    next_run(&mut browser, runs);
    assert_eq!(browser.eval("document.getElementById('load-turns_per_s').value"), json!("11"));
    assert_eq!(browser.eval("document.querySelectorAll('#stack li').length"), json!(6));
    // Drag and drop: the bulkhead (second) dropped on the admission gate (first) goes first.
    browser.eval(
        "const items = document.querySelectorAll('#stack li'); const data = new DataTransfer(); \
         items[1].dispatchEvent(new DragEvent('dragstart', { dataTransfer: data, bubbles: true })); \
         items[0].dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true }));",
    );
    let order =
        browser.eval("Array.from(document.querySelectorAll('#stack li')).map(li => li.dataset.gate).slice(0, 2)");
    assert_eq!(order, json!(["bulkhead", "admission"]));
    only_local(&mut browser, &server.url);
    assert!(browser.errors.is_empty(), "console errors: {:?}", browser.errors);
}

/// A second run from the same tab cancels the first, which answers 409 at once (that
/// other tabs are not disturbed is `llm::jobs`' unit test).
#[test]
fn a_newer_run_cancels_the_older_on_its_channel() {
    let dir = tempfile::tempdir().unwrap();
    // Caps raised: the older run must be seconds of work.
    let server = Server::start(&[
        "--results",
        dir.path().to_str().unwrap(),
        "--max-replicas",
        "3000",
        "--max-turns",
        "10000000",
    ]);
    let (_, defaults) = crate::common::http("GET", &format!("{}/api/sandbox", server.url), None);
    let mut config: Value = serde_json::from_str::<Value>(&defaults).unwrap()["config"].clone();
    config["replicas"] = json!(3000); // seconds of work on two cores
    let body = |channel: &str| json!({"config": config, "channel": channel}).to_string();
    let url = format!("{}/api/sandbox/run", server.url);
    let (first_url, first_body) = (url.clone(), body("tab-a"));
    let first = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let (status, _) = crate::common::http("POST", &first_url, Some(&first_body));
        (status, started.elapsed())
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut quick = config.clone();
    quick["replicas"] = json!(5);
    let (status, answer) =
        crate::common::http("POST", &url, Some(&json!({"config": quick, "channel": "tab-a"}).to_string()));
    assert_eq!(status, 200, "{answer}");
    let (status, elapsed) = first.join().unwrap();
    assert_eq!(status, 409, "the older run was cancelled");
    assert!(elapsed < std::time::Duration::from_secs(3), "and answered soon after: {elapsed:?}");
}

/// Learn and the Sandbox laid out 1,400 px wide: no chart text under 10 px (the trace's
/// row labels were 7 px), no two labels or controls overlapping (an incident row's
/// severity box and remove button spilled over the funnel table), every Learn
/// experiment's ticks on round values, and the attempts histogram has a y axis.
#[test]
fn the_llm_pages_read_at_1400_px() {
    let Some(mut browser) = browser_or_skip("the_llm_pages_read_at_1400_px") else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--results", dir.path().to_str().unwrap()]);
    browser.set_width(1400);
    browser.navigate(&format!("{}/sandbox", server.url));
    let mut runs = next_run(&mut browser, 0);
    // Two incidents, one a capacity step with its severity box enabled.
    browser.eval("document.querySelector('#add-incident').click();");
    runs = next_run(&mut browser, runs);
    browser.eval("const kind = document.querySelectorAll('#incidents select')[3]; kind.value = 'capacity_step'; kind.dispatchEvent(new Event('change'));");
    next_run(&mut browser, runs);
    assert_eq!(browser.eval("document.querySelectorAll('#incidents tr').length"), json!(2));
    assert!(browser.assert_layout("sandbox") > 150);
    // The caps are shown beside the knobs; a run above one says which and how to raise it.
    let caps = browser.eval("document.querySelector('#caps').textContent");
    assert!(caps.as_str().unwrap().contains("at most 1000 replicas"), "{caps}");
    assert_eq!(browser.eval("document.getElementById('load-replicas').max"), json!("1000"));
    browser.eval(
        "const r = document.getElementById('load-replicas'); r.value = 5000; r.dispatchEvent(new Event('change'));",
    );
    browser.wait_for("document.body.dataset.state === 'error'");
    let status = browser.eval("document.querySelector('#status').textContent");
    assert!(status.as_str().unwrap().contains("--max-replicas"), "{status}");
    assert!(browser.eval("document.querySelector('#caps').textContent").as_str().unwrap().contains("over a cap"));
    browser.errors.retain(|e| !e.contains("400")); // the refused request is logged by the browser
    browser.navigate(&format!("{}/learn", server.url));
    let mut runs = next_run(&mut browser, 0);
    let count = browser.eval("document.querySelectorAll('nav.steps button').length").as_u64().unwrap();
    assert_eq!(count, 10);
    for step in 0..count {
        if step > 0 {
            browser.eval(&format!("document.querySelectorAll('nav.steps button')[{step}].click();"));
            runs = next_run(&mut browser, runs);
        }
        let what = format!("learn experiment {}", step + 1);
        browser.assert_layout(&what);
        // Ticks are round: evenly 1, 2 or 5 × 10^k apart, each a multiple of that step.
        let odd = browser.eval(
            "(() => { const odd = []; for (const svg of document.querySelectorAll('figure.chart svg')) { \
               for (const anchor of ['middle', 'end']) { \
                 const ticks = Array.from(svg.querySelectorAll(`text.tick[text-anchor=${anchor}]`)) \
                   .map(t => Number(t.textContent)).filter(Number.isFinite).sort((a, b) => a - b); \
                 if (ticks.length < 2) continue; \
                 const step = ticks[1] - ticks[0]; const m = step / Math.pow(10, Math.floor(Math.log10(step))); \
                 const round = [1, 2, 5, 10].some(r => Math.abs(m - r) < 1e-6); \
                 const even = ticks.every((t, i) => i === 0 || Math.abs(t - ticks[i - 1] - step) < 1e-6 * step); \
                 const multiples = ticks.every(t => Math.abs(t / step - Math.round(t / step)) < 1e-6); \
                 if (!(round && even && multiples)) odd.push(ticks.join(' ')); } } return odd; })()",
        );
        assert_eq!(odd, json!([]), "{what}: ticks on odd values");
        let y_ticks = browser.eval(
            "Array.from(document.querySelectorAll('#histogram svg text.tick')).filter(t => t.getAttribute('text-anchor') === 'end').length",
        );
        assert!(y_ticks.as_u64().unwrap() >= 2, "{what}: the attempts histogram has no y axis");
        let x_ticks = browser.eval("document.querySelectorAll('#timeline svg text.tick').length");
        assert!(x_ticks.as_u64().unwrap() >= 2, "{what}: the timeline's axis has no ticks to check");
    }
    assert!(browser.errors.is_empty(), "{:?}", browser.errors);
}

/// When every simulation slot and the queue are taken, the Sandbox says the server is
/// busy and runs again after the server's Retry-After, by itself — never a spinner forever.
#[test]
fn the_sandbox_shows_a_busy_server_and_retries() {
    let Some(mut browser) = browser_or_skip("the_sandbox_shows_a_busy_server_and_retries") else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--results", dir.path().to_str().unwrap(), "--jobs", "1"]);
    browser.navigate(&format!("{}/sandbox", server.url));
    let runs = next_run(&mut browser, 0);
    let (_, defaults) = crate::common::http("GET", &format!("{}/api/sandbox", server.url), None);
    let defaults: Value = serde_json::from_str(&defaults).unwrap();
    let mut config = defaults["config"].clone();
    config["replicas"] = 1000.into();
    let url = server.url.clone();
    // One run takes the slot, one the queue.
    let occupy: Vec<_> = (0..2)
        .map(|i| {
            let body = json!({"config": config, "channel": format!("occupy-{i}")}).to_string();
            let url = url.clone();
            let handle = std::thread::spawn(move || {
                crate::common::http("POST", &format!("{url}/api/sandbox/run"), Some(&body)).0
            });
            std::thread::sleep(std::time::Duration::from_millis(150));
            handle
        })
        .collect();
    browser.eval("document.querySelector('#run').click();");
    browser.wait_for("document.body.dataset.state === 'busy'");
    let status = browser.eval("document.querySelector('#status').textContent");
    assert!(
        status.as_str().unwrap().contains("the server is busy") && status.as_str().unwrap().contains("again in 2 s")
    );
    // It retries by itself once a slot is free.
    next_run(&mut browser, runs);
    for handle in occupy {
        assert_eq!(handle.join().unwrap(), 200);
    }
    browser.errors.retain(|e| !e.contains("503"));
    assert!(browser.errors.is_empty(), "{:?}", browser.errors);
}

/// The Sandbox runs your own fixture (no browser needed: its API): loading a scenario
/// that names the docs' two-tier, three-class product needs that file and then shows
/// its tiers, classes and re-sendable classes; its run is named after them; and the
/// exported scenario, saved beside the exported fixture, gives `stampede run`'s numbers.
#[test]
fn the_sandbox_runs_your_own_fixture_and_its_export_reproduces() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/examples");
    let fixture = std::fs::read_to_string(examples.join("chat-product.toml")).unwrap();
    let scenario = std::fs::read_to_string(examples.join("chat-product-scenario.toml")).unwrap();
    // One configuration: the scenario without its grid and claims, a shorter run.
    let scenario = scenario.split("[[grid.case]]").next().unwrap().replace("horizon_s = 240.0", "horizon_s = 150.0");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--results", dir.path().to_str().unwrap()]);
    let post = |path: &str, body: Value| {
        crate::common::http("POST", &format!("{}{path}", server.url), Some(&body.to_string()))
    };
    let (status, refused) = post("/api/sandbox/load", json!({"toml": scenario}));
    assert_eq!(status, 400);
    assert!(
        refused.contains("workload.fixture = \\\"chat-product.toml\\\"") && refused.contains("fixture box"),
        "{refused}"
    );
    let (status, loaded) = post("/api/sandbox/load", json!({"toml": scenario, "fixture": fixture}));
    assert_eq!(status, 200, "{loaded}");
    let loaded: Value = serde_json::from_str(&loaded).unwrap();
    assert_eq!(loaded["product"]["tiers"], json!(["fast", "smart"]));
    assert_eq!(loaded["product"]["classes"], json!(["classify", "answer", "summarize"]));
    assert_eq!(loaded["product"]["resendable"], json!(["classify", "answer"]));
    let mut config = loaded["config"].clone();
    assert_eq!(config["fixture"]["file"], "chat-product.toml");
    assert_eq!(config["incidents"][0]["tier"], "smart");
    assert_eq!(config["knobs"]["fallback_tiers"], json!({}), "the fixture's own fallback_tier is not a knob override");
    config["replicas"] = json!(10);
    config["seed"] = json!(3);
    let (status, body) = post("/api/sandbox/run", json!({"config": config, "channel": "fixture"}));
    assert_eq!(status, 200, "{body}");
    let ran: Value = serde_json::from_str(&body).unwrap();
    // A metric's mean as the server wrote it (serde_json's float parsing may be one ulp
    // off; Rust's `parse` is exact).
    let mean = |name: &str| -> f64 {
        let at = body.find(&format!("\"{name}\":[")).unwrap_or_else(|| panic!("{name}")) + name.len() + 4;
        body[at..].split([',', ']']).next().unwrap().parse().unwrap()
    };
    assert!(ran["latency"]["summarize_total_s"]["p50"].as_f64().unwrap() > 0.0, "{}", ran["latency"]);
    assert!(ran["metrics"].get("guard_offered").is_none());
    let (status, exported) = post("/api/sandbox/toml", json!({"config": config}));
    assert_eq!(status, 200, "{exported}");
    let exported: Value = serde_json::from_str(&exported).unwrap();
    let toml = exported["toml"].as_str().unwrap();
    assert!(toml.contains("fixture = \"chat-product.toml\""), "{toml}");
    assert_eq!(exported["fixture"]["text"], fixture.as_str(), "the fixture file, byte for byte");
    let save = dir.path().join("export");
    std::fs::create_dir(&save).unwrap();
    std::fs::write(save.join("sandbox.toml"), toml).unwrap();
    std::fs::write(save.join("chat-product.toml"), &fixture).unwrap();
    let out = dir.path().join("out");
    let run = stampede(&[
        "run",
        save.join("sandbox.toml").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-report",
        "--quiet",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let summary = Table::read(&out.join("sandbox/summary.parquet")).unwrap();
    for name in [
        "turns_answered",
        "classify_offered",
        "answer_served",
        "answer_fallback_served",
        "summarize_offered",
        "wasted_usd",
    ] {
        let cli = summary.numbers(&format!("{name}_mean")).unwrap()[0];
        assert_eq!(mean(name), cli, "{name}: the Sandbox shows what stampede run writes");
    }
    assert!(summary.numbers("answer_fallback_served_mean").unwrap()[0] > 0.0, "the fast tier answered some");
    // A path out of the scenario's folder is refused, not written.
    let escaping = scenario.replace("chat-product.toml", "../chat-product.toml");
    let (status, refused) = post("/api/sandbox/load", json!({"toml": escaping, "fixture": fixture}));
    assert_eq!(status, 400);
    assert!(refused.contains("inside the scenario's folder"), "{refused}");
}

/// The Sandbox page with your own fixture, as a user would load it: the docs' scenario
/// pasted in the TOML box and its fixture in the fixture box; the page then shows the
/// product's classes, offers its tiers for incidents and a fallback tier per class
/// that can be re-sent, and its export offers the fixture file beside the scenario.
#[test]
fn the_sandbox_page_loads_your_own_fixture() {
    let Some(mut browser) = browser_or_skip("the_sandbox_page_loads_your_own_fixture") else { return };
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/examples");
    let fixture = std::fs::read_to_string(examples.join("chat-product.toml")).unwrap();
    let scenario = std::fs::read_to_string(examples.join("chat-product-scenario.toml")).unwrap();
    let scenario = scenario.split("[[grid.case]]").next().unwrap().replace("replicas = 30", "replicas = 10");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--results", dir.path().to_str().unwrap()]);
    browser.navigate(&format!("{}/sandbox", server.url));
    let runs = next_run(&mut browser, 0);
    browser.eval(&format!(
        "document.querySelector('#toml').value = {scenario:?}; document.querySelector('#fixture').value = {fixture:?}; \
         document.querySelector('#load-toml').click();"
    ));
    next_run(&mut browser, runs);
    let classes = browser.eval("Array.from(document.querySelectorAll('#classes tr')).map(tr => tr.dataset.class)");
    assert_eq!(classes, json!(["classify", "answer", "summarize"]));
    let tiers = browser.eval("Array.from(document.querySelectorAll('#incidents select')[0].options).map(o => o.value)");
    assert_eq!(tiers, json!(["fast", "smart"]));
    let resent = browser
        .eval("Array.from(document.querySelectorAll('#stack select[data-fallback]')).map(s => s.dataset.fallback)");
    assert_eq!(resent, json!(["classify", "answer"]));
    assert!(browser
        .eval("document.querySelector('#product').textContent")
        .as_str()
        .unwrap()
        .contains("chat-product.toml"));
    browser.eval("document.querySelector('#export').click();");
    browser.wait_for("!document.querySelector('#download-fixture').hidden");
    assert_eq!(browser.eval("document.querySelector('#download-fixture').download"), json!("chat-product.toml"));
    assert!(browser
        .eval("document.querySelector('#toml').value")
        .as_str()
        .unwrap()
        .contains("fixture = \"chat-product.toml\""));
    only_local(&mut browser, &server.url);
    assert!(browser.errors.is_empty(), "console errors: {:?}", browser.errors);
}

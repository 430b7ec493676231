//! `stampede report` and the report `run` and `verify` write: the command's contract,
//! bad folders, and — in one headless Chromium driven over the DevTools protocol —
//! every built-in's report rendering with no console message, no request and every
//! expected plot drawn, each model's report a screenshot that is not blank, and the
//! reports that once had layout defects laid out cleanly at 1,400 px.

use std::path::Path;

use crate::cdp::Browser;
use crate::common::{chromium, skip_browser, stampede, stderr, stdout};

/// What the page says about itself once its script ran.
#[derive(Debug)]
struct PageFacts {
    dom: String,
    plots: u64,
}

/// Loads `page` in `browser` and checks it: the script ran to the end, no console
/// message or log entry at all (an error, a failed request and a blocked one are all
/// one; the page's Content-Security-Policy blocks every request), no resource fetched,
/// and every plot has data.
fn check_page(browser: &mut Browser, page: &Path) -> Result<PageFacts, String> {
    let url = format!("file://{}", page.display());
    browser.take_messages();
    browser.navigate(&url);
    // The report's script marks the body when it has drawn every plot (a page that
    // never does fails here, after wait_for's 15 s).
    browser.wait_for(&format!(
        "location.href === {url:?} && document.readyState === 'complete' && document.body.dataset.ready === 'yes'"
    ));
    let facts = browser.eval(
        "({resources: document.body.dataset.resources, \
          plots: Number(document.body.dataset.plots || 0), withData: Number(document.body.dataset.plotsWithData || 0), \
          dom: document.documentElement.outerHTML})",
    );
    let messages = browser.take_messages();
    if !messages.is_empty() {
        return Err(format!("{}: console messages:\n{}", page.display(), messages.join("\n")));
    }
    if facts["resources"] != "0" {
        return Err(format!("{}: the page fetched {} resources", page.display(), facts["resources"]));
    }
    let (plots, with_data) = (facts["plots"].as_u64().unwrap_or(0), facts["withData"].as_u64().unwrap_or(0));
    if plots == 0 || with_data != plots {
        return Err(format!("{}: {with_data} of {plots} plots have data", page.display()));
    }
    Ok(PageFacts { dom: facts["dom"].as_str().unwrap_or_default().to_string(), plots })
}

/// Share of a screenshot's pixels (a PNG file's bytes) that are not (nearly) white.
fn ink(png: &[u8]) -> f64 {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().unwrap();
    let mut buffer = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buffer).unwrap();
    let channels = info.color_type.samples();
    let pixels = buffer[..info.buffer_size()].chunks(channels);
    let total = (info.width * info.height) as f64;
    pixels.filter(|p| p.iter().take(3).any(|&c| c < 235)).count() as f64 / total
}

/// The plot kinds a model's report must hold.
fn expected_plots(model: &str, grid_points: u64) -> Vec<&'static str> {
    let mut kinds = vec!["percentiles", "cdf"];
    match model {
        "cluster" => kinds.extend(["timeseries", "counts", "bars"]),
        "dependency" => kinds.extend(["timeseries", "bars"]),
        "graph" => kinds.extend(["topology", "timeseries", "bars"]),
        "gateway" => kinds.extend(["outcomes", "funnel"]),
        _ => {}
    }
    if grid_points > 1 {
        kinds.push("grid");
    }
    kinds
}

/// The reports laid out 1,400 px wide, as people read them, and held to the layout
/// rules (no chart text under 10 px, no two labels overlapping; bounding boxes from the
/// DOM): the scenarios whose reports had such defects (half-width time series, a
/// crowded log axis, rotated case names, window labels over curves), one per model.
const LAID_OUT_AT_1400: [&str; 8] =
    ["mmc", "mg1", "baltor", "policy-grid", "dependency-slowdown", "llm-stack", "llm-breaker", "graph-three-tier"];

/// Every built-in's report in one Chromium (each start of one is seconds of CI): the
/// checks of [`check_page`], the model's plots present, a screenshot per model that is
/// not blank, and the layout rules for [`LAID_OUT_AT_1400`].
#[test]
fn every_builtin_report_renders_offline_in_headless_chromium() {
    let chromium = match chromium() {
        Ok(browser) => browser,
        Err(why) => return skip_browser("every_builtin_report_renders_offline_in_headless_chromium", &why),
    };
    let mut browser = Browser::start(&chromium);
    let out = tempfile::tempdir().unwrap();
    let list = stdout(&stampede(&["list"]));
    let names: Vec<&str> = list.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.len() >= 10, "{list}");
    assert!(LAID_OUT_AT_1400.iter().all(|name| names.contains(name)), "{list}");
    let mut screenshot = std::collections::BTreeSet::new();
    let mut laid_out = 0;
    for name in names {
        let root = out.path().to_str().unwrap();
        let run = stampede(&["run", name, "--replicas", "3", "--out", root, "--quiet"]);
        assert!(run.status.success(), "{name}: {}", stderr(&run));
        let page = out.path().join(name).join("report.html");
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(html.len() < 2 << 20, "{name}: report is {} bytes", html.len());
        // Nothing refers outside the file (the SVG namespace is a name, not a request).
        let outside = html.replace("http://www.w3.org/2000/svg", "");
        assert!(!outside.contains("http://") && !outside.contains("https://"), "{name}: an external URL");
        let wide = LAID_OUT_AT_1400.contains(&name);
        browser.set_viewport(if wide { 1400 } else { 1280 }, 2400);
        let facts = check_page(&mut browser, &page).unwrap_or_else(|e| panic!("{name}: {e}"));
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join(name).join("manifest.json")).unwrap())
                .unwrap();
        let model = manifest["model"].as_str().unwrap();
        for kind in expected_plots(model, manifest["grid_points"].as_u64().unwrap()) {
            let present = if kind == "grid" {
                ["grid-line", "heatmap", "bars"].iter().any(|k| facts.dom.contains(&format!("data-plot=\"{k}\"")))
            } else {
                facts.dom.contains(&format!("data-plot=\"{kind}\""))
            };
            assert!(present, "{name} ({model}): no {kind} plot among its {}", facts.plots);
        }
        if wide {
            let texts = browser.assert_layout(name);
            assert!(texts > 100, "{name}: only {texts} texts checked");
            laid_out += 1;
        }
        // A screenshot per model, not per built-in: a blank page is a model's report
        // failing to draw.
        if screenshot.insert(model.to_string()) {
            let share = ink(&browser.screenshot());
            assert!(share > 0.03, "{name}: the screenshot is {:.1}% ink", share * 100.0);
        }
    }
    assert_eq!(laid_out, LAID_OUT_AT_1400.len());
    assert!(screenshot.len() >= 6, "a screenshot of each model's report: {screenshot:?}");
    assert!(browser.errors.is_empty(), "{:?}", browser.errors);
}

/// The checks above would catch a broken page: a script error, a blocked request.
#[test]
fn the_browser_check_catches_console_errors_and_requests() {
    let chromium = match chromium() {
        Ok(browser) => browser,
        Err(why) => return skip_browser("the_browser_check_catches_console_errors_and_requests", &why),
    };
    let mut browser = Browser::start(&chromium);
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.html");
    std::fs::write(&broken, "<!DOCTYPE html><body data-ready=\"yes\"><script>undefinedFunction();</script></body>")
        .unwrap();
    let error = check_page(&mut browser, &broken).unwrap_err();
    assert!(error.contains("console messages") && error.contains("undefinedFunction"), "{error}");
    let fetching = dir.path().join("fetching.html");
    let csp = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\">";
    std::fs::write(
        &fetching,
        format!("<!DOCTYPE html><head>{csp}</head><body data-ready=\"yes\"><img src=\"https://example.invalid/x.png\"></body>"),
    )
    .unwrap();
    let error = check_page(&mut browser, &fetching).unwrap_err();
    assert!(error.contains("Content Security Policy"), "{error}");
    let silent = dir.path().join("silent.html");
    std::fs::write(&silent, "<!DOCTYPE html><body data-ready=\"yes\" data-resources=\"0\"></body>").unwrap();
    let error = check_page(&mut browser, &silent).unwrap_err();
    assert!(error.contains("0 of 0 plots have data"), "a quiet page with no plot is still refused: {error}");
}

#[test]
fn run_writes_the_report_and_says_where_unless_told_not_to() {
    let out = tempfile::tempdir().unwrap();
    let root = out.path().to_str().unwrap();
    let run = stampede(&["run", "mmc", "--replicas", "3", "--out", root]);
    assert!(run.status.success(), "{}", stderr(&run));
    let page = out.path().join("mmc/report.html");
    assert!(stdout(&run).contains(&format!("report: {}", page.display())), "{}", stdout(&run));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("Content-Security-Policy"));
    assert!(html.contains("stampede run mmc --replicas 3 --out"), "the command that reproduces the run");

    let again = stampede(&["run", "mmc", "--replicas", "3", "--out", root, "--no-report"]);
    assert!(again.status.success());
    assert!(!page.exists(), "--no-report: the new folder has no report");
    assert!(!stdout(&again).contains("report:"));

    // `stampede report DIR` writes it afterwards, from the folder alone.
    let report = stampede(&["report", out.path().join("mmc").to_str().unwrap()]);
    assert!(report.status.success(), "{}", stderr(&report));
    assert_eq!(stdout(&report).trim(), page.display().to_string());
    assert!(page.exists());
}

#[test]
fn verify_puts_its_claims_into_the_folder_and_the_report() {
    let out = tempfile::tempdir().unwrap();
    let root = out.path().to_str().unwrap();
    let verify = stampede(&["verify", "mg1", "--replicas", "20", "--out", root, "--quiet"]);
    assert!(verify.status.code() == Some(0) || verify.status.code() == Some(1), "{}", stderr(&verify));
    let claims: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("mg1/verify.json")).unwrap()).unwrap();
    let checks = claims["checks"].as_array().unwrap();
    assert!(!checks.is_empty());
    let passed = checks.iter().filter(|c| c["passed"] == true).count();
    let html = std::fs::read_to_string(out.path().join("mg1/report.html")).unwrap();
    assert!(html.contains(&format!("Claims: {passed} of {} passed", checks.len())), "the report shows the claims");
}

/// A fraction or quantile claim prints what it claims: the fraction with its count and
/// Wilson interval, the quantile with its order-statistic interval — not the mean's —
/// and verify.json and the report carry the same.
#[test]
fn verify_lines_say_what_each_claim_measured() {
    let out = tempfile::tempdir().unwrap();
    let root = out.path().to_str().unwrap();
    let verify = stampede(&["verify", "baltor", "--replicas", "100", "--out", root]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    let text = stdout(&verify);
    let line = |fragment: &str| text.lines().find(|l| l.contains(fragment)).unwrap_or_else(|| panic!("{text}"));
    let claims: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("baltor/verify.json")).unwrap()).unwrap();
    let checks = claims["checks"].as_array().unwrap();
    let fraction = checks.iter().find(|c| c["statistic"] == "fraction_ci_lo" && c["grid_point"] == 1).unwrap();
    let (successes, replicas) = (fraction["successes"].as_u64().unwrap(), fraction["replicas"].as_u64().unwrap());
    assert_eq!(replicas, 100);
    assert_eq!(fraction["interval"], "wilson");
    // The interval is Wilson's of the count, and the claimed statistic is its lower end.
    let (lo, hi) = stampede_run::verify::wilson(successes as usize, replicas as usize);
    assert_eq!(fraction["interval_lo"].as_f64().unwrap(), lo);
    assert_eq!(fraction["value"].as_f64().unwrap(), lo);
    let printed = line("recovery_s: expected fraction_ci_lo");
    let expected = format!(
        "fraction {:.1}% = {successes} of 100 replicas, Wilson 95% [{:.1}%, {:.1}%]",
        successes as f64,
        100.0 * lo,
        100.0 * hi
    );
    assert!(printed.contains(&expected), "{printed}\n  should contain: {expected}");
    assert!(!printed.contains("(mean "), "{printed}");
    let quantile = checks.iter().find(|c| c["statistic"] == "p95").unwrap();
    assert_eq!(quantile["interval"], "order_statistic");
    let (q_lo, q_hi) = (quantile["interval_lo"].as_f64().unwrap(), quantile["interval_hi"].as_f64().unwrap());
    let value = quantile["value"].as_f64().unwrap();
    assert!(q_lo <= value && value <= q_hi, "{q_lo} {value} {q_hi}");
    assert!(line("expected p95").contains(&format!("order-statistic 95% [{q_lo:.4}, {q_hi:.4}]")));
    assert!(line("expected ci_lo").contains(", 95% ["), "the mean's claims keep theirs");
    let html = std::fs::read_to_string(out.path().join("baltor/report.html")).unwrap();
    assert!(html.contains(&format!("{:.1}% ({successes} of 100 replicas)", successes as f64)), "the report shows it");
    assert!(html.contains("] Wilson") && html.contains("] order statistics"));
}

#[test]
fn report_on_a_folder_that_is_not_one_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing");
    let output = stampede(&["report", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("no such output folder"), "{}", stderr(&output));
    let output = stampede(&["report", dir.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("manifest.json"), "{}", stderr(&output));
    assert!(!dir.path().join("report.html").exists(), "nothing written");
}

/// Two identical runs write the same report.html but for what the README names: the
/// run's wall-clock time and date, the command line, and the folder it was written to
/// (issue 45, item 7).
#[test]
fn identical_runs_write_identical_reports_but_the_named_lines() {
    let scratch = tempfile::tempdir().unwrap();
    let pages: Vec<String> = ["one", "two"]
        .iter()
        .map(|leaf| {
            let out = scratch.path().join(leaf);
            let run = crate::common::stampede(&[
                "run",
                "baltor",
                "--replicas",
                "3",
                "--quiet",
                "--out",
                out.to_str().unwrap(),
            ]);
            assert!(run.status.success(), "{}", crate::common::stderr(&run));
            let page = std::fs::read_to_string(out.join("baltor/report.html")).unwrap();
            // The three named differences, masked.
            let timing = mask_run_time(&page);
            timing.replace(out.to_str().unwrap(), "OUT")
        })
        .collect();
    assert!(pages[0] == pages[1], "the reports differ beyond the run's time, command and folder");
}

/// `text` with the header's run fact (`<dt>run</dt><dd>0.057 s on 2 thread(s), written
/// 2026-12-02 21:50 UTC</dd>`) blanked: the run's wall-clock time and date.
fn mask_run_time(text: &str) -> String {
    let start = text.find("<dt>run</dt><dd>").expect("the header's run fact") + "<dt>run</dt><dd>".len();
    let end = start + text[start..].find("</dd>").expect("its end");
    assert!(text[start..end].contains(" UTC") && end - start < 80, "{}", &text[start..end]);
    format!("{}<masked>{}", &text[..start], &text[end..])
}

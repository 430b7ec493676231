//! Integrity, round 3 (issue 68): every defect the round found, as the command line
//! meets it. Edits to files stampede wrote for the user are never lost; bad input to
//! the newer commands (import, calibrate, map, merge, --precision) exits 2 with the
//! field and the reason and writes nothing; the resource guard holds for every way a
//! rate or a cost can reach a run; a rare endpoint, a steady trace and a crowd of
//! names that clean alike import as they should.

use std::path::{Path, PathBuf};

use crate::common::{stampede, stderr, stdout};

fn example(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/examples").join(file)
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs `args`, expects exit 2 and a message containing `needle`; returns stderr.
fn refused(args: &[&str], needle: &str) -> String {
    let output = stampede(args);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {message}{}", stdout(&output));
    assert!(message.contains(needle), "{args:?}: wanted {needle:?} in:\n{message}");
    assert!(!message.contains("panicked") && !message.contains("a bug in stampede"), "{message}");
    message
}

/// Re-running `import` over a scenario the user edited refuses (the seal no longer
/// matches), and so does a data folder with a changed, added or removed file; `--force`
/// keeps what was there as `.bak` instead of deleting it; an unedited import is
/// replaced without a word.
#[test]
fn an_edited_import_is_refused_and_force_keeps_the_edits() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shop.toml");
    let data = dir.path().join("shop.data");
    let trace = example("shop.zipkin.json");
    let import = |extra: &[&str]| stampede(&[&["import", s(&trace), "--out", s(&out)][..], extra].concat());
    assert!(import(&[]).status.success());
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.lines().last().unwrap().starts_with("# stampede seal"), "{written}");
    let again = import(&[]);
    assert!(again.status.success(), "an unedited import is ours to replace: {}", stderr(&again));

    // An edit to the scenario: refused, the edit kept.
    let edited = written.replace("replicas = 30", "replicas = 31");
    assert_ne!(edited, written);
    std::fs::write(&out, &edited).unwrap();
    let message = refused(&["import", s(&trace), "--out", s(&out)], "was edited since stampede wrote it");
    assert!(message.contains("--force"), "{message}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), edited);
    // --force replaces it and keeps the edited one beside it.
    let forced = import(&["--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(std::fs::read_to_string(dir.path().join("shop.toml.bak")).unwrap(), edited);
    assert!(stderr(&forced).contains("shop.toml.bak"), "{}", stderr(&forced));

    // A file the user added to the data folder, and one changed there: refused, named.
    std::fs::write(data.join("notes.txt"), "mine").unwrap();
    refused(&["import", s(&trace), "--out", s(&out)], "notes.txt (not written by stampede import)");
    std::fs::remove_file(data.join("notes.txt")).unwrap();
    let sample = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "csv"))
        .expect("a sample file");
    std::fs::write(&sample, "self_s\n0.5\n").unwrap();
    refused(&["import", s(&trace), "--out", s(&out)], "(changed)");
    // --force moves the folder aside, never deletes the user's bytes.
    std::fs::write(data.join("notes.txt"), "mine").unwrap();
    assert!(import(&["--force"]).status.success());
    let kept = dir.path().join("shop.data.bak");
    assert_eq!(std::fs::read_to_string(kept.join("notes.txt")).unwrap(), "mine");
    assert_eq!(std::fs::read_to_string(kept.join(sample.file_name().unwrap())).unwrap(), "self_s\n0.5\n");
    assert!(!data.join("notes.txt").exists());
    // The fresh folder is ours again: a plain re-run replaces it.
    assert!(import(&[]).status.success());
}

/// A CSV of production for `docs/src/examples/calibrate-model.toml`: 10 intervals of
/// 20 s from 0 s, `busy` and `goodput` as given (a negative value is impossible).
fn observed_csv(dir: &Path, busy: f64, goodput: f64) -> PathBuf {
    let path = dir.join(format!("observed-{busy:e}-{goodput:e}.csv"));
    let mut text = "time_s,api.read.offered_rps,api.read.goodput_rps,api.busy\n".to_string();
    for i in 0..10 {
        text.push_str(&format!("{},{},{goodput},{busy}\n", i * 20, 250.0));
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// The new commands' worst inputs each exit 2 naming what is wrong and write nothing:
/// calibrate --samples 0 (was a panic), impossible observations, map's endless
/// tolerance and its cost above the guard, import's absurd sample rate, negative Jaeger
/// times, files on two clocks, output folders at the file system's root, a vacuous
/// --precision, a [load] schedule above the rate cap or the event budget.
#[test]
fn the_newer_commands_refuse_their_worst_inputs_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = example("calibrate-model.toml");
    let fit = "services.api.workers=4..32:int";
    let good = observed_csv(dir.path(), 3.0, 250.0);
    let page = dir.path().join("page.html");
    let calibrate = |observed: &Path, extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["calibrate", s(&model), "--observed", s(observed), "--page", s(&page)]
            .iter()
            .map(|a| a.to_string())
            .collect();
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let call = |args: Vec<String>, needle: &str| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&refs, needle);
    };
    call(calibrate(&good, &["--fit", fit, "--samples", "0"]), "--samples 0: the first design needs from 1");
    call(calibrate(&observed_csv(dir.path(), -2.0, 250.0), &["--check"]), "api.busy at 0 s = -2: is negative");
    call(calibrate(&observed_csv(dir.path(), 3.0, 400.0), &["--check"]), "more requests answered than were sent");
    call(calibrate(&observed_csv(dir.path(), 1e308, 250.0), &["--check"]), "is beyond 1e15");
    assert!(!page.exists(), "nothing written");

    // mmc's map over its arrival rate, with `extra` flags.
    let map_out = dir.path().join("map");
    let map = |extra: &[&str]| -> Vec<String> {
        let base = ["map", "mmc", "--x", "queue.arrival_rate_per_s=0.5..1.4", "--metric", "wait_mean_s", "--out"];
        base.iter().copied().chain([s(&map_out)]).chain(extra.iter().copied()).map(str::to_string).collect()
    };
    call(
        map(&["--y", "queue.servers=1..3:int", "--tolerance", "1e-17"]),
        "--tolerance 1e-17: a share of the x range from 1e-6",
    );
    call(
        map(&["--y", "queue.service_rate_per_s=1.5..2", "--ys", "1000", "--replicas", "100000"]),
        "at most 1000000000 are allowed",
    );
    assert!(!map_out.exists());

    let out = dir.path().join("x.toml");
    refused(
        &["import", s(&example("shop.otlp.json")), "--sample-rate", "1e-300", "--out", s(&out)],
        "--sample-rate 1e-300",
    );
    refused(
        &["import", s(&example("shop.otlp.json")), s(&example("shop.alibaba-2021.csv")), "--out", s(&out)],
        "do the files share a clock?",
    );
    let mut jaeger: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example("shop.jaeger.json")).unwrap()).unwrap();
    for trace in jaeger["data"].as_array_mut().unwrap() {
        for span in trace["spans"].as_array_mut().unwrap() {
            let start = span["startTime"].as_i64().unwrap();
            span["startTime"] = (-start).into();
        }
    }
    let negative = dir.path().join("negative.json");
    std::fs::write(&negative, jaeger.to_string()).unwrap();
    refused(&["import", s(&negative), "--out", s(&out)], "with a negative start time or duration");
    refused(&["import", s(dir.path()), "--out", s(&out)], "is a folder");
    assert!(!out.exists());

    // No folder made at the file system's root, even by a command that then exits 2.
    let root_dir = "/nonexistent-stampede-integrity";
    refused(&["verify", "mg1", "--replicas", "3", "--junit", &format!("{root_dir}/j.xml")], "does not exist");
    refused(&["import", s(&example("shop.otlp.json")), "--out", &format!("{root_dir}/x.toml")], "does not exist");
    assert!(!Path::new(root_dir).exists());

    refused(
        &["run", "mmc", "--precision", "wait_mean_s / 0=5%", "--out", s(&dir.path().join("p"))],
        "has no value in any of the",
    );
    assert!(!dir.path().join("p/mmc").exists());

    // A [load] schedule is held to the rate cap and the event budget like a constant rate.
    let scenario = |horizon: f64, rate: f64| {
        let path = dir.path().join(format!("load-{rate}.toml"));
        let text = format!(
            "name = \"l\"\nmodel = \"graph\"\n[run]\nhorizon_s = {horizon:?}\nwarmup_s = 0.0\nreplicas = 2\nseed = 1\n\
             [services.a]\nworkers = 4\n[services.a.endpoints.e]\nwork = {{ dist = \"exponential\", mean_s = 0.001 }}\n\
             [[workload]]\nentry = \"a.e\"\nload = {{ rate = [[0, 10.0], [1, {rate:?}]] }}\n[series]\nbucket_s = 100.0\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    refused(&["show", s(&scenario(10.0, 1e15))], "the rate reaches 1e15 per second");
    refused(&["run", s(&scenario(1e7, 1e6)), "--out", s(&dir.path().join("l"))], "at most 1e12 are allowed");
    assert!(!dir.path().join("l").exists());
}

/// `calibrate --write` seals what it writes like `import`: an edited calibrated scenario
/// is refused, `--force` keeps it as `.bak`.
#[test]
fn an_edited_calibrated_scenario_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let observed = observed_csv(dir.path(), 3.0, 250.0);
    let written = dir.path().join("calibrated.toml");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "calibrate",
            s(&example("calibrate-model.toml")),
            "--observed",
            s(&observed),
            "--fit",
            "services.api.workers=4..32:int",
            "--samples",
            "2",
            "--steps",
            "1",
            "--fit-replicas",
            "2",
            "--replicas",
            "2",
            "--quiet",
            "--page",
            s(&dir.path().join("page.html")),
            "--write",
            s(&written),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let run = |extra: &[&str]| {
        let args = args(extra);
        stampede(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let first = run(&[]);
    assert!(first.status.code().is_some_and(|c| c <= 1), "{}", stderr(&first));
    assert!(run(&[]).status.code().is_some_and(|c| c <= 1), "an unedited one is replaced");
    let mut text = std::fs::read_to_string(&written).unwrap();
    text.push_str("# my note\n");
    std::fs::write(&written, &text).unwrap();
    let args = args(&[]);
    refused(&args.iter().map(String::as_str).collect::<Vec<_>>(), "was edited since stampede wrote it");
    assert!(run(&["--force"]).status.code().is_some_and(|c| c <= 1));
    assert_eq!(std::fs::read_to_string(dir.path().join("calibrated.toml.bak")).unwrap(), text);
}

/// An endpoint seen twice six hours apart imports at 1/21,600 per second (four
/// decimals wrote 0 and the import failed), with a series bucket the long window can
/// hold; the scenario resolves.
#[test]
fn a_rare_endpoint_imports_with_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    let mut jaeger: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example("shop.jaeger.json")).unwrap()).unwrap();
    let traces = jaeger["data"].as_array_mut().unwrap();
    traces.truncate(2);
    let first_start = traces[0]["spans"][0]["startTime"].as_i64().unwrap();
    let second_start = traces[1]["spans"][0]["startTime"].as_i64().unwrap();
    let shift = first_start + 6 * 3600 * 1_000_000 - second_start;
    for span in traces[1]["spans"].as_array_mut().unwrap() {
        let start = span["startTime"].as_i64().unwrap();
        span["startTime"] = (start + shift).into();
    }
    let file = dir.path().join("rare.json");
    std::fs::write(&file, jaeger.to_string()).unwrap();
    let out = dir.path().join("rare.toml");
    let output = stampede(&["import", s(&file), "--out", s(&out)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let scenario: toml::Table = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let rate = scenario["workload"][0]["rate_per_s"].as_float().unwrap();
    assert!((rate - 1.0 / 21_600.0).abs() < 1e-9, "{rate}");
    assert!(scenario["series"]["bucket_s"].as_float().unwrap() >= 0.216);
    assert!(stampede(&["show", s(&out)]).status.success());
}

/// One OTLP request per line at `rate` per second for `seconds`, Poisson arrivals
/// from a fixed generator, one server span each.
fn steady_otlp(path: &Path, rate: f64, seconds: f64) {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut uniform = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut text = String::new();
    let (mut t, mut id) = (1_767_225_600.0, 0u64);
    while t < 1_767_225_600.0 + seconds {
        id += 1;
        let start = (t * 1e9) as u64;
        text.push_str(&format!(
            "{{\"resourceSpans\":[{{\"resource\":{{\"attributes\":[{{\"key\":\"service.name\",\"value\":\
             {{\"stringValue\":\"api\"}}}}]}},\"scopeSpans\":[{{\"spans\":[{{\"traceId\":\"{id:032x}\",\
             \"spanId\":\"{id:016x}\",\"name\":\"get\",\"kind\":2,\"startTimeUnixNano\":\"{start}\",\
             \"endTimeUnixNano\":\"{}\"}}]}}]}}]}}\n",
            start + 5_000_000
        ));
        t += -(1.0 - uniform()).ln() / rate;
    }
    std::fs::write(path, text).unwrap();
}

/// A steady 20/s over 10 minutes imports as one rate (its 60 s buckets vary as
/// Poisson counts do, and the partial last bucket is not a rate of its own); the
/// same stream with a tenfold step becomes a schedule with no partial bucket's rate.
#[test]
fn a_steady_trace_is_one_rate_and_a_step_a_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let steady = dir.path().join("steady.json");
    steady_otlp(&steady, 20.0, 630.0);
    let out = dir.path().join("steady.toml");
    let output = stampede(&["import", s(&steady), "--bucket", "60s", "--out", s(&out)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let scenario: toml::Table = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let workload = &scenario["workload"][0];
    assert!(workload.get("load").is_none(), "a steady rate is not a schedule: {workload}");
    let rate = workload["rate_per_s"].as_float().unwrap();
    assert!((rate - 20.0).abs() < 1.0, "{rate}");

    // A step from 20/s to 200/s at 5 minutes: a schedule, every point a full bucket's rate.
    let step = dir.path().join("step.json");
    steady_otlp(&step, 20.0, 300.0);
    let later = dir.path().join("later.json");
    steady_otlp(&later, 200.0, 330.0);
    let shifted: String = std::fs::read_to_string(&later)
        .unwrap()
        .lines()
        .map(|line| {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            let span = &mut v["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
            for key in ["startTimeUnixNano", "endTimeUnixNano"] {
                let t: u64 = span[key].as_str().unwrap().parse().unwrap();
                span[key] = (t + 300_000_000_000).to_string().into();
            }
            let id = span["spanId"].as_str().unwrap().to_string();
            span["traceId"] = format!("f{}", &format!("{id:0>31}")[..31]).into();
            format!("{v}\n")
        })
        .collect();
    let mut both = std::fs::read_to_string(&step).unwrap();
    both.push_str(&shifted);
    std::fs::write(&step, both).unwrap();
    let out = dir.path().join("step.toml");
    let output = stampede(&["import", s(&step), "--bucket", "60s", "--out", s(&out)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let scenario: toml::Table = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let points = scenario["workload"][0]["load"]["rate"].as_array().expect("a schedule").clone();
    let rates: Vec<f64> = points.iter().map(|p| p[1].as_float().unwrap()).collect();
    assert!(rates.iter().all(|r| (15.0..25.0).contains(r) || (180.0..220.0).contains(r)), "{rates:?}");
}

/// 4,000 endpoints whose names clean to the same identifier (all CJK) import in
/// seconds as `_op`, `_op_2`, … `_op_4000`, each with its original in a comment.
#[test]
fn names_that_clean_alike_are_numbered_in_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for i in 0..4000u64 {
        let name: String =
            (0..3).map(|k| char::from_u32(0x4e00 + ((i * 7 + k * 1301) % 20_000) as u32).unwrap()).collect();
        lines.push_str(&format!(
            "{{\"resourceSpans\":[{{\"resource\":{{\"attributes\":[{{\"key\":\"service.name\",\"value\":\
             {{\"stringValue\":\"api\"}}}}]}},\"scopeSpans\":[{{\"spans\":[{{\"traceId\":\"{:032x}\",\
             \"spanId\":\"{:016x}\",\"name\":\"{name}\",\"kind\":2,\"startTimeUnixNano\":\"{}\",\
             \"endTimeUnixNano\":\"{}\"}}]}}]}}]}}\n",
            i + 1,
            i + 1,
            1_767_225_600_000_000_000u64 + i * 100_000_000,
            1_767_225_600_005_000_000u64 + i * 100_000_000
        ));
    }
    let file = dir.path().join("cjk.json");
    std::fs::write(&file, lines).unwrap();
    let out = dir.path().join("cjk.toml");
    let started = std::time::Instant::now();
    let output = stampede(&["import", s(&file), "--out", s(&out)]);
    assert!(output.status.success(), "{}", stderr(&output));
    // A generous bound: the quadratic numbering took 28 s on this input.
    assert!(started.elapsed().as_secs_f64() < 20.0, "{:?}", started.elapsed());
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("[services.api.endpoints._op_4000]   # in the traces: \""), "numbered to the last");
    assert_eq!(text.matches("# in the traces:").count(), 4000);
}

/// Spans whose parent links form a loop are counted in the summary, not dropped
/// silently; an Alibaba CSV whose header follows a byte-order mark, with quoted
/// fields, reads like the plain one.
#[test]
fn loops_of_parents_are_counted_and_spreadsheet_csv_reads() {
    let dir = tempfile::tempdir().unwrap();
    let span = |trace: u32, id: u32, parent: Option<u32>, start: u64| {
        let parent = parent.map_or(String::new(), |p| format!(",\"parentSpanId\":\"{p:016x}\""));
        format!(
            "{{\"traceId\":\"{trace:032x}\",\"spanId\":\"{id:016x}\"{parent},\"name\":\"get\",\"kind\":2,\
             \"startTimeUnixNano\":\"{start}\",\"endTimeUnixNano\":\"{}\"}}",
            start + 1_000_000
        )
    };
    let t0 = 1_767_225_600_000_000_000u64;
    let spans = [
        span(1, 1, None, t0),
        span(2, 2, None, t0 + 1_000_000_000),
        span(2, 3, Some(4), t0 + 1_000_000_000),
        span(2, 4, Some(3), t0 + 1_000_000_000),
    ];
    let document = format!(
        "{{\"resourceSpans\":[{{\"resource\":{{\"attributes\":[{{\"key\":\"service.name\",\"value\":\
         {{\"stringValue\":\"api\"}}}}]}},\"scopeSpans\":[{{\"spans\":[{}]}}]}}]}}\n",
        spans.join(",")
    );
    let file = dir.path().join("loop.json");
    std::fs::write(&file, document).unwrap();
    let output = stampede(&["import", s(&file), "--out", s(&dir.path().join("loop.toml"))]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("2 spans in a loop of parent links"), "{}", stdout(&output));

    let plain = std::fs::read_to_string(example("shop.alibaba-2022.csv")).unwrap();
    let quoted: String = plain
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let line = if i == 0 {
                line.to_string()
            } else {
                line.split(',').map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(",")
            };
            format!("{line}\r\n")
        })
        .collect();
    let spreadsheet = dir.path().join("sheet.csv");
    std::fs::write(&spreadsheet, format!("\u{feff}{quoted}")).unwrap();
    let import = |file: &Path, name: &str| {
        let out = dir.path().join(format!("{name}.toml"));
        let output = stampede(&["import", s(file), "--format", "alibaba-csv", "--out", s(&out)]);
        assert!(output.status.success(), "{name}: {}", stderr(&output));
        let text = std::fs::read_to_string(&out).unwrap();
        // The same model but for the header's source line and the seal.
        let text = text.replace(&format!("{name}.data/"), "DATA/");
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("description") && !l.starts_with("name"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(import(&spreadsheet, "sheet"), import(&example("shop.alibaba-2022.csv"), "plain"));
}

/// A shard whose manifest lost its checksums is refused unless --allow-unchecked.
#[test]
fn a_shard_without_checksums_needs_allow_unchecked() {
    let dir = tempfile::tempdir().unwrap();
    let parts = dir.path().join("parts");
    for shard in ["0/2", "1/2"] {
        let output = stampede(&[
            "run",
            "mmc",
            "--replicas",
            "6",
            "--set",
            "run.horizon_s=20",
            "--set",
            "run.warmup_s=1",
            "--no-report",
            "--quiet",
            "--shard",
            shard,
            "--out",
            s(&parts),
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let shards = parts.join("mmc/shards");
    let manifest_path = shards.join("shard=0/manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest.as_object_mut().unwrap().remove("file_checksums").expect("recorded");
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let merged = dir.path().join("merged");
    let merge = |extra: &[&str]| {
        stampede(
            &[
                &["merge", s(&shards.join("shard=0")), s(&shards.join("shard=1")), "--out", s(&merged), "--no-report"]
                    [..],
                extra,
            ]
            .concat(),
        )
    };
    let output = merge(&[]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("its manifest has no file_checksums"), "{}", stderr(&output));
    assert!(!merged.join("mmc").exists());
    let output = merge(&["--allow-unchecked"]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// A map whose later rounds hold one open bracket, of a scenario whose claims name grid
/// point 1, runs (each round's candidates are a grid of their own; the claims are not
/// theirs).
#[test]
fn a_map_of_a_scenario_with_claims_on_later_points_runs() {
    let dir = tempfile::tempdir().unwrap();
    let output = stampede(&[
        "map",
        "retry-storm",
        "--x",
        "faults.0.duration_s=0.05..0.5",
        "--y",
        "clients.arrival_rate_per_s=800..1200",
        "--ys",
        "2",
        "--replicas",
        "4",
        "--quiet",
        "--out",
        s(dir.path()),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(dir.path().join("retry-storm-map/map.parquet").is_file());
}

/// `warmup_s = "auto"` on a series of a handful of buckets says it cannot tell and
/// which bucket would do.
#[test]
fn an_automatic_warmup_on_a_coarse_series_says_so() {
    let output = stampede(&[
        "run",
        "retry-storm",
        "--replicas",
        "2",
        "--set",
        "run.warmup_s=\"auto\"",
        "--set",
        "series.bucket_s=1.5",
        "--no-report",
        "--quiet",
        "--out",
        s(tempfile::tempdir().unwrap().path()),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("the automatic warm-up cannot tell") && message.contains("at most 0.75 s"), "{message}");
}

/// One OTLP document line: a server span of `service`.`name` in trace `trace`, and
/// `clients` client spans under it, each to its own uninstrumented `peer.service`.
fn otlp_line(trace: u64, service: &str, clients: u64, at_ns: u64) -> String {
    let mut spans = vec![format!(
        "{{\"traceId\":\"{trace:032x}\",\"spanId\":\"{:016x}\",\"name\":\"op\",\"kind\":2,\"startTimeUnixNano\":\
         \"{at_ns}\",\"endTimeUnixNano\":\"{}\"}}",
        trace << 20,
        at_ns + 50_000_000
    )];
    for c in 0..clients {
        spans.push(format!(
            "{{\"traceId\":\"{trace:032x}\",\"spanId\":\"{:016x}\",\"parentSpanId\":\"{:016x}\",\"name\":\"call\",\
             \"kind\":3,\"startTimeUnixNano\":\"{}\",\"endTimeUnixNano\":\"{}\",\"attributes\":[{{\"key\":\
             \"peer.service\",\"value\":{{\"stringValue\":\"callee{c}\"}}}}]}}",
            (trace << 20) + c + 1,
            trace << 20,
            at_ns + 1_000_000,
            at_ns + 2_000_000
        ));
    }
    format!(
        "{{\"resourceSpans\":[{{\"resource\":{{\"attributes\":[{{\"key\":\"service.name\",\"value\":{{\"stringValue\":\
         \"{service}\"}}}}]}},\"scopeSpans\":[{{\"spans\":[{}]}}]}}]}}\n",
        spans.join(",")
    )
}

/// Import is linear in entry services and in callees (it was quadratic: 1,000 root
/// services took 5.5 GB and aborted, one span calling 10,000 callees 3.9 GB): 2,000
/// one-span roots, and one span calling 5,000 uninstrumented callees, each import and
/// `show` in seconds (generous bounds for a loaded machine; measured 0.4 s and 2–5 s in
/// a debug build).
#[test]
fn import_and_show_are_linear_in_roots_and_callees() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = 1_767_225_600_000_000_000u64;
    let roots: String = (0..2000u64).map(|i| otlp_line(i + 1, &format!("root{i}"), 0, t0 + i * 10_000_000)).collect();
    let fan = otlp_line(1, "front", 5000, t0);
    for (name, text) in [("roots", roots), ("fan", fan)] {
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, text).unwrap();
        let out = dir.path().join(format!("{name}.toml"));
        let started = std::time::Instant::now();
        let output = stampede(&["import", s(&file), "--out", s(&out)]);
        assert!(output.status.success(), "{name}: {}", stderr(&output));
        let shown = stampede(&["show", s(&out)]);
        assert!(shown.status.success(), "{name}: {}", stderr(&shown));
        assert!(started.elapsed().as_secs_f64() < 60.0, "{name}: {:?}", started.elapsed());
    }
    let fan = std::fs::read_to_string(dir.path().join("fan.toml")).unwrap();
    assert!(fan.contains("callee4999.call"), "every callee is called");
}

/// A killed `--precision` run's stages (`.NAME.precision-PID` of a process that is
/// gone) are removed by the next `--precision` run of that name.
#[test]
fn a_killed_precision_runs_stages_are_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join(".mmc.precision-4194303");
    std::fs::create_dir_all(stale.join("stage-0")).unwrap();
    let output = stampede(&[
        "run",
        "mmc",
        "--precision",
        "20%",
        "--set",
        "run.horizon_s=60",
        "--set",
        "run.warmup_s=5",
        "--no-report",
        "--quiet",
        "--out",
        s(dir.path()),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stale.exists(), "the dead process's stages are gone");
    assert!(dir.path().join("mmc/summary.parquet").is_file());
}

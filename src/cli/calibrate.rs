//! `stampede calibrate`: a scenario's unknowns fitted to production's metrics over
//! time, the calibrated scenario, and the fidelity report with its page.

use std::path::{Path, PathBuf};

use clap::Args;
use stampede_optimize::calibrate::{self, report::INTERVAL_METHOD, Calibration, Request};
use stampede_optimize::space::Dimension;
use stampede_scenario::inputs::observed::{self, Selector};
use stampede_scenario::{Error, Result};

use super::run::{progress_bar, threads};
use super::{output_file, resolve, warn, ExitStatus, ScenarioArgs};

#[derive(Args)]
pub(super) struct CalibrateArgs {
    /// A built-in scenario name or a path to a .toml file: one configuration (pick a case or
    /// --set each grid axis). --replicas sets the replicas of the fidelity report.
    pub(super) scenario: String,
    #[command(flatten)]
    pub(super) scenario_args: ScenarioArgs,
    /// Production's metrics over time: a CSV (time_s, then columns named as the model's
    /// metrics, e.g. web.page.goodput_rps, api.busy, web.page.p99_s, and a load column
    /// such as web.page.offered_rps) or a Prometheus range-query answer (with --map).
    #[arg(long, value_name = "FILE")]
    pub(super) observed: PathBuf,
    /// Which Prometheus series is which metric (repeatable): --map 'web.page.p99_s=checkout_p99{job="web"}'.
    #[arg(long = "map", value_name = "METRIC=SELECTOR")]
    pub(super) maps: Vec<String>,
    /// An unknown to fit (repeatable): 'services.api.endpoints.read.work.scale=0.5..2',
    /// 'services.api.workers=4..32:int', 'services.api.endpoints.read.steps.1.probability=0.01..0.5:log'.
    #[arg(long = "fit", value_name = "PATH=LO..HI[:log|:int]")]
    pub(super) fits: Vec<String>,
    /// Only the fidelity report of the scenario as it is (no --fit): does the model still match?
    #[arg(long)]
    pub(super) check: bool,
    /// Compare only these metrics, each with a weight in the discrepancy (repeatable):
    /// --metric web.page.p99_s:2 (default: every observed metric, weight 1).
    #[arg(long = "metric", value_name = "NAME[:WEIGHT]")]
    pub(super) metrics: Vec<String>,
    /// Exit 1 when any compared metric's MAPE exceeds this: a fraction (0.05) or a percentage (5%).
    #[arg(long, value_name = "ERROR", allow_hyphen_values = true)]
    pub(super) max_error: Option<String>,
    /// Replicas per candidate in the search (all on the same replica indices).
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub(super) fit_replicas: u32,
    /// Halton points of the first design (default 6 × unknowns + 4).
    #[arg(long, value_name = "N")]
    pub(super) samples: Option<usize>,
    /// Trust-region steps after the design.
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub(super) steps: u32,
    /// Print the calibrated scenario as TOML on stdout (the account goes to stderr).
    #[arg(long)]
    pub(super) show_toml: bool,
    /// Print the result as one JSON document on stdout.
    #[arg(long)]
    pub(super) json: bool,
    /// Where the page goes (default: out/calibrate-<scenario name>.html).
    #[arg(long, value_name = "FILE")]
    pub(super) page: Option<PathBuf>,
    /// Where the calibrated scenario goes, with --fit (default: out/calibrate-<scenario name>.toml).
    #[arg(long, value_name = "FILE")]
    pub(super) write: Option<PathBuf>,
    /// Replace those files even if stampede did not write them.
    #[arg(long)]
    pub(super) force: bool,
    /// Worker threads; never changes any result (default: all cores).
    #[arg(long, value_name = "T")]
    pub(super) threads: Option<usize>,
    /// No progress bar and no account on the terminal (the page and files are still written).
    #[arg(long)]
    pub(super) quiet: bool,
}

/// `--max-error 5%` or `0.05`.
fn parse_fraction(text: &str) -> Result<f64> {
    let bad = || Error::bad_input(format!("--max-error {text:?}: a positive fraction (0.05) or percentage (5%)"));
    let value = match text.trim().strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
        None => text.trim().parse::<f64>().map_err(|_| bad())?,
    };
    (value.is_finite() && value > 0.0).then_some(value).ok_or_else(bad)
}

fn parse_map(text: &str) -> Result<(String, Selector)> {
    let (name, selector) = text.split_once('=').ok_or_else(|| {
        Error::bad_input(format!(
            "--map {text:?}: write METRIC=SELECTOR, e.g. --map 'web.page.p99_s=checkout_p99{{job=\"web\"}}'"
        ))
    })?;
    let selector = Selector::parse(selector).map_err(|why| Error::bad_input(format!("--map {text:?}: {why}")))?;
    Ok((name.trim().to_string(), selector))
}

/// The page's data from a calibration.
fn page_of(
    calibration: &Calibration,
    observed_file: &str,
    notes: Vec<String>,
) -> stampede_report::calibrate_page::CalibratePage {
    use stampede_report::calibrate_page::{CalibratePage, MetricPanel};
    let disagreeing: Vec<&str> = calibration.disagreeing().into_iter().map(|(n, _)| n).collect();
    let fitted = calibration
        .fitted_text()
        .into_iter()
        .map(|(path, value, interval)| (path, value, interval.unwrap_or_else(str::to_string)))
        .collect();
    CalibratePage {
        scenario: calibration.scenario.name.clone(),
        observed_file: observed_file.to_string(),
        notes,
        fitted,
        interval_method: INTERVAL_METHOD.to_string(),
        replicas: calibration.replicas,
        metrics: calibration
            .metrics
            .iter()
            .map(|m| {
                let f = &m.fidelity;
                MetricPanel {
                    name: m.name.clone(),
                    times_s: calibration.intervals_s.iter().map(|(a, b)| (a + b) / 2.0).collect(),
                    observed: m.observed.clone(),
                    mean: f.mean.clone(),
                    low: f.low.clone(),
                    high: f.high.clone(),
                    figures: [f.mape, f.bias, f.correlation, f.inside],
                    disagrees: disagreeing.contains(&m.name.as_str()),
                }
            })
            .collect(),
    }
}

pub(super) fn calibrate(args: CalibrateArgs) -> Result<ExitStatus> {
    let scenario = resolve(&args.scenario, &args.scenario_args)?;
    warn(&scenario);
    // The same syntax as optimize's --range, said as --fit.
    let dimensions = args
        .fits
        .iter()
        .map(|text| Dimension::parse(text))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| Error::bad_input(e.to_string().replace("--range", "--fit")))?;
    match (args.check, dimensions.is_empty()) {
        (true, false) => return Err(Error::bad_input("--check reports the scenario as it is; give it without --fit")),
        (false, true) => {
            return Err(Error::bad_input("nothing to do: give the unknowns to fit (--fit PATH=LO..HI), or --check")
                .with_hint("e.g. --fit 'services.api.workers=4..32:int', or --check for the fidelity report alone"))
        }
        _ => {}
    }
    let metrics = args.metrics.iter().map(|m| calibrate::parse_metric(m)).collect::<Result<Vec<_>>>()?;
    let max_error = args.max_error.as_deref().map(parse_fraction).transpose()?;
    let maps = args.maps.iter().map(|m| parse_map(m)).collect::<Result<Vec<_>>>()?;
    let threads = threads(args.threads)?;
    let page =
        args.page.clone().unwrap_or_else(|| PathBuf::from("out").join(format!("calibrate-{}.html", scenario.name)));
    let toml_file = (!dimensions.is_empty()).then(|| {
        args.write.clone().unwrap_or_else(|| PathBuf::from("out").join(format!("calibrate-{}.toml", scenario.name)))
    });
    if args.check && args.write.is_some() {
        return Err(Error::bad_input(
            "--write is the calibrated scenario of a --fit; --check changes nothing to write",
        ));
    }
    output_file::check(&page, "--page", args.force)?;
    if let Some(file) = &toml_file {
        output_file::check(file, "--write", args.force)?;
    }
    let observed = observed::read(&args.observed, &maps)?;
    let request = Request {
        observed,
        dimensions,
        metrics,
        fit_replicas: args.fit_replicas,
        replicas: scenario.run.replicas,
        shape: Some(calibrate::fit::Shape {
            samples: args.samples.unwrap_or(calibrate::fit::Shape::default_for(args.fits.len()).samples),
            refinements: args.steps,
        }),
        max_error,
    };
    let quiet = args.quiet || args.json || args.show_toml;
    calibrate::check_shape(&request)?;
    super::cost::check(
        "calibrate",
        &scenario,
        super::cost::Planned::About(calibrate::planned_replicas(&request)),
        "--samples, --steps, --fit-replicas and --replicas",
        threads,
        &page,
        quiet,
    )?;
    let bar = progress_bar(calibrate::planned_replicas(&request), quiet);
    let calibration = calibrate::calibrate(&scenario, &request, threads, &|| bar.inc(1))?;
    bar.finish_and_clear();
    write_and_say(&args, &calibration, &page, toml_file.as_deref())?;
    Ok(if calibration.passed() { ExitStatus::Success } else { ExitStatus::CalibrationFailed })
}

/// Writes the page and (after a `--fit`) the calibrated scenario, then says what was
/// found: the account, the JSON document, or the scenario's TOML, as asked.
fn write_and_say(args: &CalibrateArgs, calibration: &Calibration, page: &Path, toml_file: Option<&Path>) -> Result<()> {
    let observed_file = args.observed.display().to_string();
    let account = calibration.render();
    let notes: Vec<String> = account.lines().take_while(|l| !l.is_empty()).map(|l| l.trim().to_string()).collect();
    output_file::write(
        page,
        "--page",
        stampede_report::calibrate_page::render(&page_of(calibration, &observed_file, notes)).as_bytes(),
        args.force,
    )?;
    if let Some(file) = toml_file {
        let text = calibration.to_toml(&observed_file);
        output_file::write(file, "--write", &output_file::sealed(text.as_bytes()), args.force)?;
    }
    let shown = |p: &Path| p.display().to_string();
    if args.json {
        let json = calibration.to_json(&observed_file, Some(&shown(page)), toml_file.map(shown).as_deref());
        super::print_json(&json);
    } else if args.show_toml {
        if !args.quiet {
            eprint!("{account}");
        }
        print!("{}", calibration.to_toml(&observed_file));
    } else if !args.quiet {
        print!("{account}");
        println!("page: {}", shown(page));
        if let Some(file) = toml_file {
            println!("calibrated scenario: {}", shown(file));
        }
    }
    Ok(())
}

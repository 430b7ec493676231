//! What the sim-versus-real tests share: a scenario written to a temporary file, and
//! the check of a live figure against the simulated replicas' spread.

/// `text` as a file ending in `suffix`, removed when the returned path is dropped.
pub fn write_temporary(text: &str, suffix: &str) -> tempfile::TempPath {
    let mut file = tempfile::Builder::new().suffix(suffix).tempfile().expect("a temporary file");
    std::io::Write::write_all(&mut file, text.as_bytes()).expect("written");
    file.into_temp_path()
}

/// The `p` quantile of `values` (nearest rank).
pub fn percentile(mut values: Vec<f64>, p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = (p * (values.len() - 1) as f64).round() as usize;
    values[rank]
}

/// The live figure against the simulated replicas' 0.1st–99.9th percentiles (the
/// 5th–95th and the median printed beside them). Why so wide: a run makes up to eight
/// checks, and a perfect model's live figure falls outside a band of 1 − 2α with
/// probability 2α per check — at 5–95% the test would fail a correct simulator about
/// half the time, at 1–99% about one run in seven (it did: a naive storm's live
/// recovery of 3.5 s against the replicas' 99th percentile 3.4 s); at 0.1–99.9% about
/// one in sixty. The replicas must be many enough for those tails (sim_vs_real runs
/// 2,000; with 200 they are the smallest and largest replica).
pub fn within(what: &str, live: f64, simulated: &[f64]) -> Result<String, String> {
    let p = |q: f64| percentile(simulated.to_vec(), q);
    let (low, high) = (p(0.001), p(0.999));
    let inner = if (p(0.05)..=p(0.95)).contains(&live) { "inside" } else { "outside" };
    let line = format!(
        "{what}: live {live:.4}, simulated 0.1–99.9% [{low:.4}, {high:.4}] (5–95% [{:.4}, {:.4}]: {inner}; median {:.4})",
        p(0.05),
        p(0.95),
        p(0.5)
    );
    if (low..=high).contains(&live) {
        Ok(line)
    } else {
        Err(line)
    }
}

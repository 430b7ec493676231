//! The race: candidates compared on common random numbers, eliminated by Kim and
//! Nelson's fully sequential procedure, their constraints settled by one-sided
//! intervals.
//!
//! Every candidate's replica `j` uses the random streams of replica index `j` (the
//! runner derives them from the master seed and the index alone), so two candidates'
//! values at the same index are a *pair* and their difference has the variance of the
//! difference, usually far below the sum of the variances: common random numbers.
//!
//! **Selection** is KN (S.-H. Kim and B. L. Nelson, "A fully sequential procedure for
//! indifference-zone selection in simulation", ACM TOMACS 11(3), 2001): with k
//! candidates, a first stage of n0 replicas, error α and indifference δ,
//! η = ½[(2α/(k−1))^(−2/(n0−1)) − 1] and h² = 2η(n0−1). Each pair's variance of
//! differences S²ᵢₗ comes from its first n0 common replicas. After r common
//! replicas, candidate i is eliminated by l when l's mean beats i's by more than
//! Wᵢₗ(r) = max(0, δ/(2r)·(h²S²ᵢₗ/δ² − r)). A pair is *open* while Wᵢₗ(r) > 0; once
//! r ≥ h²S²ᵢₗ/δ² it is decided by the sign of the difference alone. The guarantee: the
//! best candidate survives with probability ≥ 1 − α whenever it beats the others by
//! δ or more (otherwise, what survives is within δ of it).
//!
//! **Constraints** (after S. Andradóttir and S.-H. Kim, "Fully sequential procedures
//! for comparing constrained systems via simulation", Naval Research Logistics 57,
//! 2010, who also let only feasible systems eliminate others): a constraint on a
//! mean holds once its one-sided interval at the confidence level lies on the right
//! side of the bound and fails once it lies wholly on the wrong side; a constraint on
//! a fraction of replicas (a quantile across replicas is one) uses the one-sided
//! Wilson bound. A verdict, once reached, is final. Only a candidate whose every
//! constraint holds may eliminate others; a candidate with a failed constraint is out.
//!
//! Invariants: values are appended in replica order and never change; a candidate's
//! status only moves from alive to out; the judgement depends only on the values, so
//! it is the same for any thread count.

use stampede_run::stats::{normal_quantile, t_quantile};

/// Which way the objective is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sense {
    Maximize,
    Minimize,
}

impl Sense {
    /// The value oriented so that larger is better.
    fn orient(self, value: f64) -> f64 {
        match self {
            Sense::Maximize => value,
            Sense::Minimize => -value,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Sense::Maximize => "maximize",
            Sense::Minimize => "minimize",
        }
    }
}

/// A bound on a value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    AtMost(f64),
    AtLeast(f64),
}

impl Bound {
    /// Whether `value` meets the bound (NaN never does).
    pub fn admits(self, value: f64) -> bool {
        match self {
            Bound::AtMost(b) => value <= b,
            Bound::AtLeast(b) => value >= b,
        }
    }

    pub fn value(self) -> f64 {
        match self {
            Bound::AtMost(b) | Bound::AtLeast(b) => b,
        }
    }

    pub fn operator(self) -> &'static str {
        match self {
            Bound::AtMost(_) => "<=",
            Bound::AtLeast(_) => ">=",
        }
    }

    /// How far `value` is on the wrong side, relative to the bound's size (0 when met).
    fn violation(self, value: f64) -> f64 {
        let scale = self.value().abs().max(1e-12);
        match self {
            Bound::AtMost(b) => ((value - b) / scale).max(0.0),
            Bound::AtLeast(b) => ((b - value) / scale).max(0.0),
        }
    }
}

/// What a constraint requires of a candidate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Requirement {
    /// The mean over replicas (undefined replicas left out, as in `summary.parquet`).
    Mean(Bound),
    /// The fraction of replicas whose value meets `each` (an undefined value never
    /// does) is within `share`: `p95(m) <= v` is the fraction with m ≤ v at least 0.95.
    Fraction { each: Bound, share: Bound },
}

/// A constraint on one tracked metric.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    /// As the user wrote it (`recovery_s <= 1.5`), for messages.
    pub text: String,
    /// The metric's name.
    pub metric: String,
    pub requirement: Requirement,
}

/// Where a constraint stands for one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Open,
    Holds,
    Fails,
}

/// Why a candidate left the race.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    Alive,
    /// KN: `by` beat it by more than the boundary after `replicas` common replicas.
    Eliminated {
        by: usize,
        round: u32,
        difference: f64,
        boundary: f64,
        replicas: u32,
    },
    /// Successive halving (a `--range` search): in the worse half by mean.
    Halved {
        round: u32,
    },
    /// Constraint `constraint` failed.
    Infeasible {
        constraint: usize,
        round: u32,
    },
}

/// What the race settings are.
#[derive(Clone, Debug)]
pub struct Settings {
    pub sense: Sense,
    /// δ: differences in the objective smaller than this do not matter.
    pub indifference: f64,
    /// 1 − α.
    pub confidence: f64,
    /// n0: the replicas every candidate gets first (≥ 2), which the pair variances come from.
    pub first_stage: u32,
    /// The most candidates the search may enter (KN's k).
    pub planned_candidates: usize,
}

/// One candidate's data and standing.
#[derive(Clone, Debug)]
pub struct Entrant {
    /// `[tracked][replica]`: tracked 0 is the objective, tracked `1 + c` constraint c's metric.
    values: Vec<Vec<f64>>,
    pub status: Status,
    pub verdicts: Vec<Verdict>,
}

impl Entrant {
    pub fn replicas(&self) -> u32 {
        self.values[0].len() as u32
    }

    pub fn is_alive(&self) -> bool {
        self.status == Status::Alive
    }

    fn feasible(&self) -> bool {
        self.verdicts.iter().all(|v| *v == Verdict::Holds)
    }

    /// The objective's values, one per replica.
    pub fn objective(&self) -> &[f64] {
        &self.values[0]
    }
}

/// A mean with a two-sided interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    /// The values it is over (undefined ones left out).
    pub count: u32,
}

/// Count, mean and sample variance of the defined values (Welford).
fn moments(values: impl Iterator<Item = f64>) -> (u32, f64, f64) {
    let (mut n, mut mean, mut squares) = (0u32, 0.0, 0.0);
    for v in values.filter(|v| !v.is_nan()) {
        n += 1;
        let delta = v - mean;
        mean += delta / n as f64;
        squares += delta * (v - mean);
    }
    let variance = if n < 2 { f64::NAN } else { (squares / (n - 1) as f64).max(0.0) };
    (n, if n == 0 { f64::NAN } else { mean }, variance)
}

/// Mean and two-sided interval at `confidence` of the defined values.
pub fn estimate(values: impl Iterator<Item = f64>, confidence: f64) -> Estimate {
    let (n, mean, variance) = moments(values);
    if n < 2 {
        return Estimate { mean, lo: f64::NAN, hi: f64::NAN, count: n };
    }
    let half = t_quantile(0.5 + confidence / 2.0, (n - 1) as u64) * (variance / n as f64).sqrt();
    Estimate { mean, lo: mean - half, hi: mean + half, count: n }
}

/// A constraint's estimate for one candidate: the statistic, and its one-sided
/// bound towards the requirement (the upper one for `<=`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConstraintEstimate {
    pub value: f64,
    pub bound: f64,
    pub verdict_now: Verdict,
}

/// The race itself.
#[derive(Clone, Debug)]
pub struct Race {
    pub settings: Settings,
    pub constraints: Vec<Constraint>,
    /// KN's h².
    h2: f64,
    pub entrants: Vec<Entrant>,
    /// δ as asked (or derived), when the budget could not resolve it and it was raised.
    pub indifference_raised_from: Option<f64>,
    /// Whether δ is settled (after the first stage).
    indifference_settled: bool,
}

impl Race {
    pub fn new(settings: Settings, constraints: Vec<Constraint>) -> Race {
        assert!(settings.first_stage >= 2, "a pair variance needs two replicas");
        assert!(settings.indifference > 0.0 || settings.indifference.is_nan(), "δ > 0, or NaN: from the first stage");
        assert!(settings.confidence > 0.0 && settings.confidence < 1.0);
        let k = settings.planned_candidates.max(2) as f64;
        let alpha = 1.0 - settings.confidence;
        let n0 = settings.first_stage as f64;
        let eta = 0.5 * ((2.0 * alpha / (k - 1.0)).powf(-2.0 / (n0 - 1.0)) - 1.0);
        let h2 = 2.0 * eta * (n0 - 1.0);
        debug_assert!(h2.is_finite() && h2 > 0.0);
        Race {
            settings,
            constraints,
            h2,
            entrants: Vec::new(),
            indifference_raised_from: None,
            indifference_settled: false,
        }
    }

    /// Settles δ once the first stage is in: when the user gave none, 1% of the
    /// candidates' mean objective in magnitude (at least 1e-12). Then δ is raised, if it
    /// must be, to the smallest difference `budget_per_candidate` replicas can resolve:
    /// KN's boundary for a pair closes by r = h²S²/δ² replicas, so with the noisiest
    /// pair's first-stage variance S² the floor is √(h²S²/budget). A δ below the noise
    /// the budget can see would only spend the whole budget to end undecided.
    pub fn settle_indifference(&mut self, budget_per_candidate: f64) {
        if self.indifference_settled {
            return;
        }
        self.indifference_settled = true;
        if self.settings.indifference.is_nan() {
            let means: Vec<f64> =
                (0..self.entrants.len()).map(|e| self.objective(e).mean.abs()).filter(|m| m.is_finite()).collect();
            let typical = means.iter().sum::<f64>() / means.len().max(1) as f64;
            self.settings.indifference = (0.01 * typical).max(1e-12);
        }
        let noisiest = (0..self.entrants.len())
            .flat_map(|i| (0..i).map(move |l| (i, l)))
            .map(|(i, l)| self.pair_variance(i, l))
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let floor = (self.h2 * noisiest / budget_per_candidate.max(1.0)).sqrt();
        if floor > self.settings.indifference {
            self.indifference_raised_from = Some(self.settings.indifference);
            self.settings.indifference = floor;
        }
        debug_assert!(self.settings.indifference > 0.0, "δ settled positive");
    }

    /// How many metrics each replica reports to the race (the objective, then one per constraint).
    pub fn tracked(&self) -> usize {
        1 + self.constraints.len()
    }

    /// Enters a candidate with no replicas yet; returns its number.
    pub fn enter(&mut self) -> usize {
        self.entrants.push(Entrant {
            values: vec![Vec::new(); self.tracked()],
            status: Status::Alive,
            verdicts: vec![Verdict::Open; self.constraints.len()],
        });
        self.entrants.len() - 1
    }

    /// Appends one replica's tracked values to candidate `c` (its next replica index).
    pub fn record(&mut self, c: usize, tracked: &[f64]) {
        assert_eq!(tracked.len(), self.tracked());
        for (column, &v) in self.entrants[c].values.iter_mut().zip(tracked) {
            column.push(v);
        }
    }

    pub fn replicas(&self, c: usize) -> u32 {
        self.entrants[c].replicas()
    }

    /// The objective's mean and interval over candidate `c`'s replicas.
    pub fn objective(&self, c: usize) -> Estimate {
        estimate(self.entrants[c].values[0].iter().copied(), self.settings.confidence)
    }

    /// Paired differences `l − i` of the oriented objective over their first `r`
    /// common replicas (pairs with an undefined value left out).
    fn differences(&self, i: usize, l: usize, r: u32) -> impl Iterator<Item = f64> + '_ {
        let sense = self.settings.sense;
        let (a, b) = (&self.entrants[i].values[0], &self.entrants[l].values[0]);
        (0..r as usize).map(move |j| sense.orient(b[j]) - sense.orient(a[j])).filter(|d| !d.is_nan())
    }

    /// S²ᵢₗ: the variance of the first stage's paired differences.
    fn pair_variance(&self, i: usize, l: usize) -> f64 {
        let (count, _, variance) = moments(self.differences(i, l, self.settings.first_stage));
        if count < 2 {
            f64::INFINITY
        } else {
            variance
        }
    }

    /// KN's boundary for pair (i, l) after `r` common replicas, and whether it is still open.
    fn boundary(&self, i: usize, l: usize, r: u32) -> (f64, bool) {
        let delta = self.settings.indifference;
        let s2 = self.pair_variance(i, l);
        let w = (delta / (2.0 * r as f64) * (self.h2 * s2 / (delta * delta) - r as f64)).max(0.0);
        // A pair without a first-stage variance (its objective undefined in nearly every
        // replica) can never be decided: more replicas would not help, so it is not open.
        (w, w > 0.0 && s2.is_finite())
    }

    /// Constraint `c`'s estimate for candidate `e`.
    pub fn constraint_estimate(&self, e: usize, c: usize) -> ConstraintEstimate {
        let values = &self.entrants[e].values[1 + c];
        let level = self.settings.confidence;
        let (value, lower, upper, bound) = match self.constraints[c].requirement {
            Requirement::Mean(bound) => {
                // One-sided at `level` is two-sided at 2·level − 1.
                let est = estimate(values.iter().copied(), 2.0 * level - 1.0);
                (est.mean, est.lo, est.hi, bound)
            }
            Requirement::Fraction { each, share } => {
                let n = values.len();
                let successes = values.iter().filter(|v| each.admits(**v)).count();
                let (lo, hi) = wilson_one_sided(successes, n, level);
                (successes as f64 / n.max(1) as f64, lo, hi, share)
            }
        };
        let decided = values.len() as u32 >= self.settings.first_stage;
        let (towards, verdict) = match bound {
            Bound::AtMost(b) => (
                upper,
                if decided && upper <= b {
                    Verdict::Holds
                } else if decided && lower > b {
                    Verdict::Fails
                } else {
                    Verdict::Open
                },
            ),
            Bound::AtLeast(b) => (
                lower,
                if decided && lower >= b {
                    Verdict::Holds
                } else if decided && upper < b {
                    Verdict::Fails
                } else {
                    Verdict::Open
                },
            ),
        };
        ConstraintEstimate { value, bound: towards, verdict_now: verdict }
    }

    /// Settles what the data decides after round `round`: constraint verdicts, then
    /// KN eliminations (simultaneous: decided on the standings before any of them).
    pub fn judge(&mut self, round: u32) {
        for e in 0..self.entrants.len() {
            if !self.entrants[e].is_alive() {
                continue;
            }
            for c in 0..self.constraints.len() {
                if self.entrants[e].verdicts[c] == Verdict::Open {
                    let verdict = self.constraint_estimate(e, c).verdict_now;
                    self.entrants[e].verdicts[c] = verdict;
                    if verdict == Verdict::Fails && self.entrants[e].is_alive() {
                        self.entrants[e].status = Status::Infeasible { constraint: c, round };
                    }
                }
            }
        }
        let n0 = self.settings.first_stage;
        let mut out = Vec::new();
        for i in self.alive() {
            for l in self.alive() {
                if l == i || !self.entrants[l].feasible() {
                    continue;
                }
                let r = self.replicas(i).min(self.replicas(l));
                if r < n0 {
                    continue;
                }
                let estimate = estimate(self.differences(i, l, r), 0.95);
                if estimate.count < 2 {
                    continue;
                }
                let (w, _) = self.boundary(i, l, estimate.count);
                if estimate.mean > w {
                    out.push((
                        i,
                        Status::Eliminated { by: l, round, difference: estimate.mean, boundary: w, replicas: r },
                    ));
                    break;
                }
            }
        }
        for (i, status) in out {
            debug_assert!(self.entrants[i].is_alive(), "a candidate leaves the race once");
            self.entrants[i].status = status;
        }
        debug_assert!(
            self.entrants.iter().any(Entrant::is_alive)
                || self.entrants.iter().all(|e| matches!(e.status, Status::Infeasible { .. })),
            "KN never eliminates the last feasible candidate: the best one cannot be beaten"
        );
    }

    /// Candidates still in the race, in entry order.
    pub fn alive(&self) -> Vec<usize> {
        (0..self.entrants.len()).filter(|&e| self.entrants[e].is_alive()).collect()
    }

    /// Alive candidates whose standing more replicas could change: a constraint still
    /// open, or a KN pair with another alive candidate still open.
    pub fn doubtful(&self) -> Vec<usize> {
        let alive = self.alive();
        let mut doubtful = Vec::new();
        for &i in &alive {
            let open_constraint = self.entrants[i].verdicts.contains(&Verdict::Open);
            let open_pair = alive.iter().any(|&l| {
                if l == i {
                    return false;
                }
                let r = self.replicas(i).min(self.replicas(l));
                if r < self.settings.first_stage {
                    return true;
                }
                let count = self.differences(i, l, r).count() as u32;
                count >= 2 && self.boundary(i, l, count).1
            });
            if open_constraint || open_pair {
                doubtful.push(i);
            }
        }
        doubtful
    }

    /// What ranks candidates: the oriented mean objective (larger is better; an
    /// undefined mean ranks last).
    fn rank_key(&self, e: usize) -> f64 {
        let mean = self.objective(e).mean;
        if mean.is_nan() {
            f64::NEG_INFINITY
        } else {
            self.settings.sense.orient(mean)
        }
    }

    /// Alive candidates, best objective mean first (ties: entry order).
    pub fn leaders(&self) -> Vec<usize> {
        let mut alive = self.alive();
        alive.sort_by(|&a, &b| self.rank_key(b).total_cmp(&self.rank_key(a)).then(a.cmp(&b)));
        alive
    }

    /// Successive halving: keeps the best `keep` alive candidates by mean; the rest
    /// leave the race in round `round`.
    pub fn halve(&mut self, keep: usize, round: u32) {
        for e in self.leaders().into_iter().skip(keep) {
            self.entrants[e].status = Status::Halved { round };
        }
    }

    /// The answer as the race stands.
    pub fn answer(&self) -> Answer {
        let leaders = self.leaders();
        let feasible: Vec<usize> = leaders.iter().copied().filter(|&e| self.entrants[e].feasible()).collect();
        let chosen = feasible.first().or(leaders.first()).copied();
        let Some(chosen) = chosen else {
            let closest = (0..self.entrants.len()).min_by(|&a, &b| self.violation(a).total_cmp(&self.violation(b)));
            return Answer { chosen: None, runner_up: None, doubtful: Vec::new(), closest };
        };
        let runner_up = (0..self.entrants.len())
            .filter(|&e| e != chosen && !matches!(self.entrants[e].status, Status::Infeasible { .. }))
            .max_by(|&a, &b| self.rank_key(a).total_cmp(&self.rank_key(b)).then(b.cmp(&a)));
        Answer { chosen: Some(chosen), runner_up, doubtful: self.doubtful(), closest: None }
    }

    /// The paired difference `a − b` of the objective over their common replicas,
    /// with its two-sided interval at the confidence level.
    pub fn paired_difference(&self, a: usize, b: usize) -> Estimate {
        let r = self.replicas(a).min(self.replicas(b)) as usize;
        let (x, y) = (&self.entrants[a].values[0], &self.entrants[b].values[0]);
        estimate((0..r).map(|j| x[j] - y[j]), self.settings.confidence)
    }

    /// The same difference as if the two had independent replicas (Welch): what common
    /// random numbers save, shown beside the paired interval.
    pub fn unpaired_difference(&self, a: usize, b: usize) -> Estimate {
        let (na, ma, va) = moments(self.entrants[a].values[0].iter().copied());
        let (nb, mb, vb) = moments(self.entrants[b].values[0].iter().copied());
        let se = (va / na as f64 + vb / nb as f64).sqrt();
        let z = normal_quantile(0.5 + self.settings.confidence / 2.0);
        let mean = ma - mb;
        Estimate { mean, lo: mean - z * se, hi: mean + z * se, count: na.min(nb) }
    }

    /// How far candidate `e` is from meeting every constraint (the largest relative
    /// violation of a constraint's estimate).
    fn violation(&self, e: usize) -> f64 {
        (0..self.constraints.len())
            .map(|c| {
                let estimate = self.constraint_estimate(e, c);
                let bound = match self.constraints[c].requirement {
                    Requirement::Mean(bound) | Requirement::Fraction { share: bound, .. } => bound,
                };
                if estimate.value.is_nan() {
                    f64::INFINITY
                } else {
                    bound.violation(estimate.value)
                }
            })
            .fold(0.0, f64::max)
    }
}

/// The one-sided Wilson bounds at `level` of `successes` out of `n`: (lower, upper).
pub fn wilson_one_sided(successes: usize, n: usize, level: f64) -> (f64, f64) {
    stampede_run::stats::wilson(successes, n, normal_quantile(level))
}

/// Who the race picks.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The best alive candidate by mean whose constraints hold (or, if none is proven
    /// feasible yet, the best alive one); `None` when every candidate failed a constraint.
    pub chosen: Option<usize>,
    /// The strongest other candidate not proven infeasible.
    pub runner_up: Option<usize>,
    /// Alive candidates whose standing was still open (empty: the choice is certain).
    pub doubtful: Vec<usize>,
    /// With no feasible candidate: the one closest to meeting the constraints.
    pub closest: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(k: usize) -> Settings {
        Settings { sense: Sense::Minimize, indifference: 0.1, confidence: 0.95, first_stage: 10, planned_candidates: k }
    }

    /// KN's constants for k = 10, n0 = 10, α = 0.05: η = ½[(0.1/9)^(−2/9) − 1] = ½(e^0.99996 − 1) = 0.8591.
    #[test]
    fn kn_constants_match_the_paper_formula() {
        let race = Race::new(settings(10), Vec::new());
        let eta: f64 = 0.5 * ((0.1f64 / 9.0).powf(-2.0 / 9.0) - 1.0);
        assert!((eta - 0.8591).abs() < 1e-4, "{eta}");
        assert!((race.h2 - 2.0 * eta * 9.0).abs() < 1e-12);
    }

    /// Identical replicas apart from a constant: the worse candidate goes at once, and
    /// the pair is closed (S² = 0).
    #[test]
    fn a_constant_gap_eliminates_at_the_first_stage() {
        let mut race = Race::new(settings(2), Vec::new());
        let (a, b) = (race.enter(), race.enter());
        for j in 0..10 {
            let noise = (j as f64 * 0.7).sin();
            race.record(a, &[1.0 + noise]);
            race.record(b, &[1.05 + noise]);
        }
        race.judge(0);
        assert!(race.entrants[a].is_alive());
        assert!(matches!(race.entrants[b].status, Status::Eliminated { by: 0, .. }));
        assert!(race.doubtful().is_empty());
        let answer = race.answer();
        assert_eq!((answer.chosen, answer.runner_up), (Some(a), Some(b)));
        let d = race.paired_difference(a, b);
        assert!((d.mean + 0.05).abs() < 1e-12 && (d.hi - d.lo) < 1e-9, "paired: exact, {d:?}");
        let u = race.unpaired_difference(a, b);
        assert!(u.hi - u.lo > 0.5, "unpaired: the noise's width, {u:?}");
    }

    /// A constraint on a mean holds, fails or stays open by its one-sided interval.
    #[test]
    fn constraints_settle_by_one_sided_intervals() {
        let constraint =
            |bound| Constraint { text: String::new(), metric: "m".into(), requirement: Requirement::Mean(bound) };
        let mut race = Race::new(settings(3), vec![constraint(Bound::AtMost(1.0)), constraint(Bound::AtLeast(0.0))]);
        let (low, high, edge) = (race.enter(), race.enter(), race.enter());
        for j in 0..10 {
            let noise = if j % 2 == 0 { 0.1 } else { -0.1 };
            race.record(low, &[0.0, 0.5 + noise, 0.5 + noise]);
            race.record(high, &[0.0, 1.5 + noise, 1.5 + noise]);
            race.record(edge, &[0.0, 1.0 + noise, 1.0 + noise]);
        }
        race.judge(0);
        assert_eq!(race.entrants[low].verdicts, vec![Verdict::Holds, Verdict::Holds]);
        assert_eq!(race.entrants[high].verdicts[0], Verdict::Fails);
        assert!(matches!(race.entrants[high].status, Status::Infeasible { constraint: 0, round: 0 }));
        assert_eq!(race.entrants[edge].verdicts[0], Verdict::Open);
        // The open one is tied with `low` on the objective but cannot be dropped by it
        // (a tie); it is still in doubt because its constraint is open.
        assert!(race.doubtful().contains(&edge));
    }

    /// p95(m) <= v as a fraction: 60 of 60 replicas under v establish 0.95 (Wilson's
    /// one-sided lower bound 0.957), 40 of 40 do not yet (0.937).
    #[test]
    fn a_fraction_needs_enough_replicas_to_hold() {
        assert!(wilson_one_sided(60, 60, 0.95).0 > 0.95);
        assert!(wilson_one_sided(40, 40, 0.95).0 < 0.95);
        let constraint = Constraint {
            text: String::new(),
            metric: "m".into(),
            requirement: Requirement::Fraction { each: Bound::AtMost(1.0), share: Bound::AtLeast(0.95) },
        };
        let mut race = Race::new(settings(1), vec![constraint]);
        let e = race.enter();
        for _ in 0..40 {
            race.record(e, &[0.0, 0.5]);
        }
        race.judge(0);
        assert_eq!(race.entrants[e].verdicts[0], Verdict::Open);
        for _ in 0..20 {
            race.record(e, &[0.0, 0.5]);
        }
        race.judge(1);
        assert_eq!(race.entrants[e].verdicts[0], Verdict::Holds);
    }

    /// A candidate whose objective is undefined in every replica (a recovery that
    /// never happens) cannot be compared; it must not hold the race open forever.
    #[test]
    fn an_undefined_objective_does_not_keep_the_race_open() {
        let mut race = Race::new(settings(2), Vec::new());
        let (a, b) = (race.enter(), race.enter());
        for j in 0..10 {
            race.record(a, &[1.0 + (j as f64).sin()]);
            race.record(b, &[f64::NAN]);
        }
        race.judge(0);
        assert!(race.doubtful().is_empty());
        assert_eq!(race.answer().chosen, Some(a), "a defined mean ranks above an undefined one");
    }

    /// Halving keeps the best by mean.
    #[test]
    fn halving_keeps_the_leaders() {
        let mut race = Race::new(settings(4), Vec::new());
        for mean in [3.0, 1.0, 4.0, 2.0] {
            let e = race.enter();
            for j in 0..10 {
                race.record(e, &[mean + (j as f64).sin() * 5.0]);
            }
        }
        race.halve(2, 0);
        assert_eq!(race.alive(), vec![1, 3]);
        assert_eq!(race.leaders(), vec![1, 3]);
    }
}

//! Which tasks (grid point, replica) a process runs: all of them, or shard K of N.
//!
//! A shard takes a contiguous range of replicas of *every* grid point — the point's
//! replicas cut into N near-equal ranges, the ranges dealt to the shards starting
//! at a different shard for each point — so every shard gets the same share of every
//! point's cost, however much the points' costs differ, and a grid with fewer
//! replicas per point than shards still spreads its work.

use std::ops::Range;

use stampede_scenario::base::error::{Error, Result};

/// Shard `index` of `count` (0-based), or the whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// `K/N` (0 ≤ K < N).
    pub fn parse(text: &str) -> Result<Shard> {
        let bad = || {
            Error::bad_input(format!(
                "--shard {text}: expected K/N with 0 ≤ K < N (e.g. 3/8), or auto (from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX)"
            ))
        };
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if count == 0 || index >= count || count > 100_000 {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// From the scheduler's environment: a Slurm array task (ID − MIN of COUNT) or a
    /// Kubernetes Indexed Job (JOB_COMPLETION_INDEX of `STAMPEDE_SHARDS` or the
    /// completion count); returns the shard and which variables it used.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<(Shard, String)> {
        let number = |name: &str| -> Result<Option<u32>> {
            match get(name) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| Error::bad_input(format!("--shard auto: {name}={v:?} is not a number"))),
            }
        };
        if let (Some(id), Some(count)) = (number("SLURM_ARRAY_TASK_ID")?, number("SLURM_ARRAY_TASK_COUNT")?) {
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let index = id.checked_sub(min).ok_or_else(|| {
                Error::bad_input(format!("--shard auto: SLURM_ARRAY_TASK_ID={id} is below SLURM_ARRAY_TASK_MIN={min}"))
            })?;
            let shard = Shard::parse(&format!("{index}/{count}"))?;
            return Ok((
                shard,
                format!("SLURM_ARRAY_TASK_ID={id} − SLURM_ARRAY_TASK_MIN={min} of SLURM_ARRAY_TASK_COUNT={count}"),
            ));
        }
        if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let (name, count) = match number("STAMPEDE_SHARDS")? {
                Some(count) => ("STAMPEDE_SHARDS", count),
                None => ("JOB_COMPLETIONS", number("JOB_COMPLETIONS")?.ok_or_else(|| {
                    Error::bad_input("--shard auto: JOB_COMPLETION_INDEX is set but neither STAMPEDE_SHARDS nor JOB_COMPLETIONS says how many shards")
                })?),
            };
            let shard = Shard::parse(&format!("{index}/{count}"))?;
            return Ok((shard, format!("JOB_COMPLETION_INDEX={index} of {name}={count}")));
        }
        Err(Error::bad_input(
            "--shard auto: no scheduler variables (SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, or JOB_COMPLETION_INDEX); use --shard K/N",
        ))
    }
}

/// The tasks one process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub points: u32,
    pub replicas: u32,
    pub shard: Option<Shard>,
    /// Only tasks `from..to` of the list above (a checkpoint piece).
    pub window: Option<(u64, u64)>,
}

impl Plan {
    /// Every task of `points` × `replicas`, or shard `shard`'s.
    pub fn new(points: u32, replicas: u32, shard: Option<Shard>) -> Plan {
        Plan { points, replicas, shard, window: None }
    }

    /// Tasks `from..to` of this plan's list.
    pub fn window(self, from: u64, to: u64) -> Plan {
        Plan { window: Some((from, to)), ..self }
    }

    /// The replicas of `point` this process runs.
    pub fn replicas_of(&self, point: u32) -> Range<u32> {
        let Some(Shard { index, count }) = self.shard else { return 0..self.replicas };
        let r = self.replicas as u64;
        let n = count as u64;
        // The point's ranges are dealt starting at shard (point mod N).
        let slot = (index as u64 + n - point as u64 % n) % n;
        let from = (slot * r / n) as u32;
        let to = ((slot + 1) * r / n) as u32;
        from..to
    }

    /// Every task, grid point major: (point, replica).
    pub fn tasks(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let (from, to) = self.window.unwrap_or((0, u64::MAX));
        (0..self.points)
            .flat_map(move |p| self.replicas_of(p).map(move |r| (p, r)))
            .skip(from as usize)
            .take((to - from) as usize)
    }

    /// Tasks in the plan (its window's, when it has one).
    pub fn task_count(&self) -> u64 {
        let all: u64 = (0..self.points).map(|p| self.replicas_of(p).len() as u64).sum();
        match self.window {
            Some((from, to)) => to.min(all).saturating_sub(from),
            None => all,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shards of a plan cover every task exactly once, and shares differ by at
    /// most one replica per point.
    #[test]
    fn shards_partition_every_point() {
        for (points, replicas, count) in [(1, 10, 3), (27, 100, 7), (5, 2, 8), (3, 1, 4), (4, 9, 1)] {
            let mut seen = vec![vec![0u32; replicas as usize]; points as usize];
            let mut totals = vec![0u64; count as usize];
            for index in 0..count {
                let plan = Plan::new(points, replicas, Some(Shard { index, count }));
                for (p, r) in plan.tasks() {
                    seen[p as usize][r as usize] += 1;
                }
                totals[index as usize] = plan.task_count();
                for p in 0..points {
                    let n = plan.replicas_of(p).len() as u32;
                    assert!(n == replicas / count || n == replicas.div_ceil(count), "{points} {replicas} {count}");
                }
            }
            assert!(seen.iter().flatten().all(|&c| c == 1), "{points} {replicas} {count}");
            let (lo, hi) = (totals.iter().min().unwrap(), totals.iter().max().unwrap());
            assert!(hi - lo <= points.div_ceil(count) as u64 + 1, "balanced: {totals:?}");
        }
    }

    #[test]
    fn shards_come_from_the_schedulers_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        let (shard, how) = Shard::from_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "12"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
            ("SLURM_ARRAY_TASK_MIN", "10"),
        ]))
        .unwrap();
        assert_eq!(shard, Shard { index: 2, count: 4 });
        assert!(how.contains("SLURM_ARRAY_TASK_MIN=10"));
        let (shard, _) = Shard::from_env(env(&[("JOB_COMPLETION_INDEX", "3"), ("JOB_COMPLETIONS", "5")])).unwrap();
        assert_eq!(shard, Shard { index: 3, count: 5 });
        assert!(Shard::from_env(env(&[])).unwrap_err().to_string().contains("no scheduler variables"));
        assert!(Shard::parse("4/4").is_err() && Shard::parse("x").is_err());
        assert_eq!(Shard::parse("0/1").unwrap(), Shard { index: 0, count: 1 });
    }
}

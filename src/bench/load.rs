//! How busy the machine was while tuneloop measured: the cores other
//! processes kept busy over each run's timed steps
//! ([`Measurement::others_cores`]), per state, and which turns were decided
//! on a busy machine. Paired, interleaved runs share a steady load, but a
//! load that comes and goes (a build, another job) lands on one run of a pair
//! and not the other: on a 2-core box, a compute change kept at ×1.6 while
//! other processes took cores timed ×0.98 on the quiet box (bench/RESULTS.md).
//! The report says so, so that nobody trusts such a decision blindly.
//!
//! The loop acts on it too (`run_loop`): a pair whose two runs saw clearly
//! different loads ([`uneven`]) is set aside and measured again, and after a
//! busy run it waits, up to `[decision] busy_wait_s`, for the machine to
//! quiet down ([`others_now`]) before the next pair.

use serde::{Deserialize, Serialize};

use super::{stats, Measurement};

/// A state ran on a busy machine when other processes kept at least this
/// share of the job's cores busy (median over its runs): half a core of two.
pub const BUSY_SHARE: f64 = 0.25;

/// Whether other processes kept at least [`BUSY_SHARE`] of the job's cores
/// busy over this run's timed steps.
pub fn busy_run(m: &Measurement) -> bool {
    match (m.others_cores(), m.job_cores()) {
        (Some(o), Some(c)) => o >= BUSY_SHARE * c,
        _ => false,
    }
}

/// Whether the two runs of a pair saw clearly different loads: what other
/// processes took differs by [`BUSY_SHARE`] of the job's cores or more (half
/// a core of two). Smaller gaps are the box's own noise: a run with workers
/// shows 0.1–0.2 cores more "others" than one without on a quiet 2-core box
/// (their start and their queues' threads), so the line sits above that.
/// `Some(gap)` in cores when uneven.
pub fn uneven(a: &Measurement, b: &Measurement) -> Option<f64> {
    let (oa, ob) = (a.others_cores()?, b.others_cores()?);
    let cores = a.job_cores().or(b.job_cores())?;
    let gap = (oa - ob).abs();
    (gap >= BUSY_SHARE * cores).then_some(gap)
}

/// The machine's busy cores right now, over `over` (from `/proc/stat`):
/// sampled between runs, when none of the job's processes runs, so it is
/// what others take. With the host's core count. `None` off Linux.
pub fn others_now(over: std::time::Duration) -> Option<(f64, f64)> {
    let first = proc_stat()?;
    std::thread::sleep(over);
    let (busy, total, cores) = {
        let second = proc_stat()?;
        (second.0 - first.0, second.1 - first.1, second.2)
    };
    (total > 0.0).then(|| (busy / total * cores, cores))
}

/// busy and total jiffies of all CPUs, and the number of CPUs.
fn proc_stat() -> Option<(f64, f64, f64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let mut lines = text.lines();
    let all: Vec<f64> = lines
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    if all.len() < 5 {
        return None;
    }
    let cores = lines.filter(|l| l.starts_with("cpu")).count() as f64;
    // user nice system idle iowait irq softirq steal (guest time is in user)
    let idle = all[3] + all[4];
    let total: f64 = all.iter().take(8).sum();
    Some((total - idle, total, cores.max(1.0)))
}

/// A pair left out of a comparison because other processes took clearly
/// more of the machine during one of its runs (`bench::load::uneven`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetAside {
    /// Its place among the pairs measured (1-based, set-aside ones counted).
    pub pair: u32,
    pub candidate_sps: f64,
    pub incumbent_sps: f64,
    /// Cores other processes kept busy during each run.
    pub candidate_others: Option<f64>,
    pub incumbent_others: Option<f64>,
}

impl SetAside {
    /// "pair 3 (other processes took 0.8 cores during the best's run, 0.0
    /// during the baseline's)", with the two sides named by the caller.
    pub fn describe(&self, ja: bool, cand: &str, inc: &str) -> String {
        let c = |o: Option<f64>| o.map_or("?".to_string(), |o| format!("{o:.1}"));
        let (co, io) = (c(self.candidate_others), c(self.incumbent_others));
        if ja {
            format!(
                "ペア {}（他のプロセスの使用: {cand}の実行中 {co} コア、{inc}の実行中 {io} コア）",
                self.pair
            )
        } else {
            format!(
                "pair {} (other processes took {co} cores during the {cand}'s run, {io} during the {inc}'s)",
                self.pair
            )
        }
    }
}

/// One measured turn's runs, for [`MachineLoad::of`].
pub struct TurnRuns<'a> {
    pub turn: u32,
    pub kept: bool,
    pub runs: &'a [Measurement],
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct MachineLoad {
    /// The cores the job may use (the runs' median).
    pub cores: f64,
    /// Cores other processes kept busy: median and most over every measured run.
    pub others_median: f64,
    pub others_max: f64,
    /// Whether the baseline's runs ran on a busy machine.
    pub baseline_busy: bool,
    /// Turns whose runs (candidate and incumbent) ran on a busy machine.
    pub busy_turns: Vec<u32>,
    /// Those of them whose change was kept.
    pub kept_busy_turns: Vec<u32>,
}

fn others(runs: &[Measurement]) -> Vec<f64> {
    runs.iter().filter_map(Measurement::others_cores).collect()
}

impl MachineLoad {
    /// `None` when no run has the figures (contract mode, an older harness).
    pub fn of(
        baseline: &[Measurement],
        turns: &[TurnRuns<'_>],
        final_runs: &[Measurement],
    ) -> Option<MachineLoad> {
        let all: Vec<&Measurement> = baseline
            .iter()
            .chain(turns.iter().flat_map(|t| t.runs.iter()))
            .chain(final_runs)
            .collect();
        let every: Vec<f64> = all.iter().filter_map(|m| m.others_cores()).collect();
        if every.is_empty() {
            return None;
        }
        let cores: Vec<f64> = all.iter().filter_map(|m| m.job_cores()).collect();
        let cores = if cores.is_empty() {
            1.0
        } else {
            stats::median(&cores)
        };
        let busy = |runs: &[Measurement]| {
            let o = others(runs);
            !o.is_empty() && stats::median(&o) >= BUSY_SHARE * cores
        };
        let busy_turns: Vec<&TurnRuns> = turns.iter().filter(|t| busy(t.runs)).collect();
        Some(MachineLoad {
            cores,
            others_median: stats::median(&every),
            others_max: every.iter().copied().fold(0.0, f64::max),
            baseline_busy: busy(baseline),
            busy_turns: busy_turns.iter().map(|t| t.turn).collect(),
            kept_busy_turns: busy_turns
                .iter()
                .filter(|t| t.kept)
                .map(|t| t.turn)
                .collect(),
        })
    }

    /// Whether the report should warn: the baseline or some turn ran busy.
    pub fn busy(&self) -> bool {
        self.baseline_busy || !self.busy_turns.is_empty()
    }

    /// The report's line (`ja`: in Japanese).
    pub fn describe(&self, ja: bool) -> String {
        let list = |v: &[u32]| {
            v.iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if ja {
            parts.push(format!(
                "他のプロセスが {:.1} / {:.0} コアを使用（計測した実行の中央値、最大 {:.1}）",
                self.others_median, self.cores, self.others_max
            ));
            if self.baseline_busy {
                parts.push("ベースラインは混雑時に計測".into());
            }
            if !self.busy_turns.is_empty() {
                parts.push(format!(
                    "混雑時に判定したターン: {}",
                    list(&self.busy_turns)
                ));
            }
            if !self.kept_busy_turns.is_empty() {
                parts.push(format!(
                    "そのうち採用: {}。空いたマシンで再確認してください",
                    list(&self.kept_busy_turns)
                ));
            }
            parts.join("。")
        } else {
            parts.push(format!(
                "other processes kept {:.1} of {:.0} cores busy (median of the measured runs, up to {:.1})",
                self.others_median, self.cores, self.others_max
            ));
            if self.baseline_busy {
                parts.push("the baseline was measured on a busy machine".into());
            }
            if !self.busy_turns.is_empty() {
                parts.push(format!(
                    "turn{} {} decided on a busy machine",
                    if self.busy_turns.len() == 1 { "" } else { "s" },
                    list(&self.busy_turns)
                ));
            }
            if !self.kept_busy_turns.is_empty() {
                parts.push(format!(
                    "kept among them: {} — a load that comes and goes can favour one run of a pair, so confirm on a quiet machine",
                    list(&self.kept_busy_turns)
                ));
            }
            parts.join("; ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of 10 s on 2 cores whose job used 1 core: `others` the rest.
    fn run(others: f64) -> Measurement {
        Measurement {
            samples_per_sec: 100.0,
            wall_s: Some(10.0),
            loader_cpu_s: Some(4.0),
            main_cpu_s: Some(6.0),
            machine_busy_s: Some(10.0 + others * 10.0),
            usable_cores: Some(2.0),
            cpu_count: Some(2),
            ..Default::default()
        }
    }

    #[test]
    fn turns_measured_while_others_took_cores_are_named_and_the_kept_ones_flagged() {
        let base = [run(0.0), run(0.1), run(0.0)];
        let (t1, t2, t3) = (
            [run(0.05), run(0.0)],
            [run(1.2), run(0.9)],
            [run(0.8), run(0.6)],
        );
        let turns = [
            TurnRuns {
                turn: 1,
                kept: true,
                runs: &t1,
            },
            TurnRuns {
                turn: 2,
                kept: true,
                runs: &t2,
            },
            TurnRuns {
                turn: 3,
                kept: false,
                runs: &t3,
            },
        ];
        let l = MachineLoad::of(&base, &turns, &[run(0.0)]).unwrap();
        assert_eq!(l.cores, 2.0);
        assert!((l.others_max - 1.2).abs() < 1e-9, "{l:?}");
        assert!(!l.baseline_busy);
        assert_eq!(l.busy_turns, vec![2, 3]);
        assert_eq!(l.kept_busy_turns, vec![2]);
        assert!(l.busy());
        let line = l.describe(false);
        assert!(
            line.contains("turns 2, 3 decided on a busy machine"),
            "{line}"
        );
        assert!(line.contains("kept among them: 2"), "{line}");
        assert!(l.describe(true).contains("そのうち採用: 2"));
    }

    #[test]
    fn a_pair_is_uneven_when_one_run_saw_half_a_core_more_of_others() {
        assert_eq!(uneven(&run(0.0), &run(0.2)), None);
        assert_eq!(uneven(&run(0.15), &run(0.0)), None);
        let gap = uneven(&run(0.8), &run(0.1)).unwrap();
        assert!((gap - 0.7).abs() < 1e-9, "{gap}");
        assert!(uneven(&run(0.1), &run(0.8)).is_some());
        // Both loaded alike: even (a steady load is shared by the pair).
        assert_eq!(uneven(&run(1.0), &run(0.9)), None);
        assert!(busy_run(&run(0.6)) && !busy_run(&run(0.3)));
        let bare = Measurement::default();
        assert_eq!(uneven(&bare, &run(1.0)), None);
    }

    #[test]
    fn the_machine_load_now_counts_a_busy_thread() {
        let spin = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let s = spin.clone();
        let t = std::thread::spawn(move || {
            let mut x = 0u64;
            while s.load(std::sync::atomic::Ordering::Relaxed) {
                x = x.wrapping_add(1);
            }
            x
        });
        let (busy, cores) = others_now(std::time::Duration::from_millis(400)).unwrap();
        spin.store(false, std::sync::atomic::Ordering::Relaxed);
        t.join().unwrap();
        assert!(cores >= 1.0);
        // One spinning thread is about one core (less when descheduled).
        assert!(busy >= 0.5 && busy <= cores + 0.01, "{busy} of {cores}");
    }

    #[test]
    fn a_quiet_machine_gives_no_warning_and_no_figures_give_none() {
        let base = [run(0.0), run(0.2)];
        let t = [run(0.3), run(0.1)];
        let turns = [TurnRuns {
            turn: 1,
            kept: true,
            runs: &t,
        }];
        let l = MachineLoad::of(&base, &turns, &[]).unwrap();
        assert!(!l.busy(), "{l:?}");
        let bare = Measurement {
            samples_per_sec: 1.0,
            ..Default::default()
        };
        assert_eq!(MachineLoad::of(&[bare], &[], &[]), None);
    }
}

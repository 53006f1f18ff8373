//! What one state of the project costs to run: its workers, their memory,
//! and the cores it keeps busy — the other side of its samples/sec.
//!
//! The report gives these for the baseline, every measured turn's candidate
//! and the final state, so that a setting kept because it is as fast and
//! cheaper (fewer workers, less memory, fewer cores) shows what it saved.
//! Each figure is the median run's of that state (the run whose samples/sec
//! is the median, the lower of the two middle ones for an even count), so
//! memory and CPU come from one real run rather than mixing runs.
//!
//! Pure arithmetic on the harness's figures ([`Measurement`]); nothing here
//! reads the disk. Under a launcher the harness's CPU and memory figures are
//! rank 0's, so these are too.

use serde::{Deserialize, Serialize};

use super::Measurement;

/// One state's cost, from the median run of its measurements.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StateCost {
    /// Runs of the state the median run was chosen from.
    pub runs: u32,
    /// The median run's samples/sec.
    pub samples_per_sec: f64,
    /// DataLoader workers: the setting as the harness saw it, else the live
    /// workers it counted.
    #[serde(default)]
    pub num_workers: Option<u64>,
    /// The workers' memory summed: PSS (shared pages split among the
    /// processes mapping them) where the harness could read it, else RSS.
    /// 0 without workers.
    #[serde(default)]
    pub workers_memory_bytes: Option<u64>,
    /// `"pss"` or `"rss"`: which of them `workers_memory_bytes` is.
    #[serde(default)]
    pub workers_memory_kind: Option<String>,
    /// The training process's resident memory.
    #[serde(default)]
    pub main_rss_bytes: Option<u64>,
    /// Cores kept busy over the timed steps: the loading's CPU seconds
    /// (every thread of the workers where counted, else their main threads;
    /// without workers the training process's own loading) plus the
    /// training process's, over the timed steps' wall time.
    #[serde(default)]
    pub cpu_cores: Option<f64>,
    /// The cores the job may use (affinity mask, cgroup quota).
    #[serde(default)]
    pub usable_cores: Option<f64>,
}

/// A measured turn's candidate cost, as `report.json` lists them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TurnCost {
    pub turn: u32,
    #[serde(flatten)]
    pub cost: StateCost,
}

/// Every state's cost in a run: baseline, measured turns, final.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StateCosts {
    #[serde(default)]
    pub baseline: Option<StateCost>,
    /// Each measured turn's candidate, in turn order (kept or not).
    #[serde(default)]
    pub turns: Vec<TurnCost>,
    /// The final state: the final comparison's runs of it, else the last
    /// kept turn's candidate runs, else the baseline's.
    #[serde(default, rename = "final")]
    pub final_: Option<StateCost>,
}

impl StateCosts {
    /// The cost of a turn's candidate, when it was measured.
    pub fn turn(&self, turn: u32) -> Option<&StateCost> {
        self.turns.iter().find(|t| t.turn == turn).map(|t| &t.cost)
    }

    /// Whether any state has a figure beyond its samples/sec (a contract-mode
    /// run has none, and then the report shows no memory/CPU lines).
    pub fn has_figures(&self) -> bool {
        self.baseline
            .iter()
            .chain(self.turns.iter().map(|t| &t.cost))
            .chain(self.final_.iter())
            .any(StateCost::has_figures)
    }
}

impl StateCost {
    /// The cost of a state from its measurements (failed runs are not
    /// among them); `None` without any.
    pub fn of(runs: &[Measurement]) -> Option<StateCost> {
        let m = median_run(runs)?;
        let num_workers = m.num_workers().or(m.live_workers);
        let (workers_memory_bytes, workers_memory_kind) =
            match (m.workers_pss_bytes, m.workers_rss_bytes) {
                (Some(p), _) => (Some(p), Some("pss".to_string())),
                (None, Some(r)) => (Some(r), Some("rss".to_string())),
                // No worker processes: nothing to add up.
                (None, None) if num_workers == Some(0) => (Some(0), None),
                (None, None) => (None, None),
            };
        Some(StateCost {
            runs: runs.len() as u32,
            samples_per_sec: m.samples_per_sec,
            num_workers,
            workers_memory_bytes,
            workers_memory_kind,
            main_rss_bytes: m.main_rss_bytes,
            cpu_cores: cores_busy(m),
            usable_cores: m.job_cores(),
        })
    }

    /// Whether it has a figure beyond its samples/sec.
    pub fn has_figures(&self) -> bool {
        self.num_workers.is_some()
            || self.workers_memory_bytes.is_some()
            || self.main_rss_bytes.is_some()
            || self.cpu_cores.is_some()
    }
}

/// The run whose samples/sec is the median (the lower middle one for an
/// even count; a run without a finite figure sorts last).
pub fn median_run(runs: &[Measurement]) -> Option<&Measurement> {
    let mut v: Vec<&Measurement> = runs.iter().collect();
    v.sort_by(|a, b| {
        let key = |m: &Measurement| {
            if m.samples_per_sec.is_finite() {
                m.samples_per_sec
            } else {
                f64::INFINITY
            }
        };
        key(a).total_cmp(&key(b))
    });
    let finite = v.iter().filter(|m| m.samples_per_sec.is_finite()).count();
    match finite {
        0 => v.first().copied(),
        n => v.get((n - 1) / 2).copied(),
    }
}

/// Cores one run kept busy over its timed steps: (loading + training CPU
/// seconds) / wall seconds. `None` when a figure is missing or the wall
/// time is not positive.
pub fn cores_busy(m: &Measurement) -> Option<f64> {
    let wall = m.wall_s.filter(|w| w.is_finite() && *w > 0.0)?;
    let cpu = m.loader_threads_cpu_s.or(m.loader_cpu_s)? + m.main_cpu_s?;
    Some(cpu / wall).filter(|c| c.is_finite() && *c >= 0.0)
}

/// Bytes as the report shows them: `412 MB`, `1.23 GB` (10^6, 10^9).
pub fn bytes_text(b: u64) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.0} MB", b / 1e6)
    } else if b > 0.0 {
        format!("{:.2} MB", b / 1e6)
    } else {
        "0 MB".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run with `nw` workers at `sps`, its CPU and memory figures given.
    fn run(sps: f64, nw: u64, loader_cpu: f64, main_cpu: f64, wall: f64) -> Measurement {
        let mut m = Measurement {
            samples_per_sec: sps,
            wall_s: Some(wall),
            loader_cpu_s: Some(loader_cpu),
            main_cpu_s: Some(main_cpu),
            usable_cores: Some(2.0),
            cpu_count: Some(8),
            live_workers: Some(nw),
            main_rss_bytes: Some(900_000_000),
            ..Default::default()
        };
        m.loader.insert("num_workers".into(), nw.into());
        m
    }

    #[test]
    fn the_figures_are_the_median_runs() {
        let mut slow = run(90.0, 4, 1.0, 1.0, 10.0);
        slow.workers_pss_bytes = Some(111);
        let mut mid = run(100.0, 4, 6.0, 4.0, 8.0);
        mid.workers_pss_bytes = Some(400_000_000);
        mid.workers_rss_bytes = Some(1_600_000_000);
        let mut fast = run(120.0, 4, 9.0, 9.0, 2.0);
        fast.workers_pss_bytes = Some(999);
        let c = StateCost::of(&[fast, slow, mid]).unwrap();
        assert_eq!(c.runs, 3);
        assert_eq!(c.samples_per_sec, 100.0);
        assert_eq!(c.num_workers, Some(4));
        // PSS before RSS: shared pages are not counted four times.
        assert_eq!(c.workers_memory_bytes, Some(400_000_000));
        assert_eq!(c.workers_memory_kind.as_deref(), Some("pss"));
        assert_eq!(c.main_rss_bytes, Some(900_000_000));
        // (6 s loading + 4 s training) over 8 s of timed steps.
        assert_eq!(c.cpu_cores, Some(1.25));
        assert_eq!(c.usable_cores, Some(2.0));
    }

    #[test]
    fn an_even_count_takes_the_lower_middle_run_and_unfinished_figures_sort_last() {
        let runs = [
            run(f64::NAN, 1, 1.0, 1.0, 1.0),
            run(200.0, 2, 1.0, 1.0, 1.0),
            run(100.0, 3, 1.0, 1.0, 1.0),
        ];
        // Finite: 100, 200 → the lower middle, 100 (3 workers).
        assert_eq!(median_run(&runs).unwrap().num_workers(), Some(3));
        assert!(median_run(&[]).is_none());
        assert_eq!(StateCost::of(&[]), None);
    }

    #[test]
    fn rss_when_pss_is_unreadable_and_zero_without_workers() {
        let mut m = run(100.0, 4, 1.0, 1.0, 1.0);
        m.workers_rss_bytes = Some(1_600_000_000);
        let c = StateCost::of(&[m]).unwrap();
        assert_eq!(
            (c.workers_memory_bytes, c.workers_memory_kind.as_deref()),
            (Some(1_600_000_000), Some("rss"))
        );
        let c = StateCost::of(&[run(100.0, 0, 1.0, 1.0, 1.0)]).unwrap();
        assert_eq!(c.workers_memory_bytes, Some(0));
        assert_eq!(c.workers_memory_kind, None);
        // Workers whose memory could not be read: unknown, not zero.
        let c = StateCost::of(&[run(100.0, 4, 1.0, 1.0, 1.0)]).unwrap();
        assert_eq!(c.workers_memory_bytes, None);
    }

    #[test]
    fn cores_busy_counts_every_worker_thread_when_measured() {
        let mut m = run(100.0, 4, 3.0, 1.0, 2.0);
        assert_eq!(cores_busy(&m), Some(2.0));
        // A thread pool in the workers: its CPU counts too.
        m.loader_threads_cpu_s = Some(5.0);
        assert_eq!(cores_busy(&m), Some(3.0));
        m.wall_s = Some(0.0);
        assert_eq!(cores_busy(&m), None);
        m.wall_s = Some(2.0);
        m.main_cpu_s = None;
        assert_eq!(cores_busy(&m), None);
    }

    #[test]
    fn a_contract_figure_alone_has_no_cost_figures() {
        let m = Measurement {
            samples_per_sec: 50.0,
            ..Default::default()
        };
        let c = StateCost::of(&[m]).unwrap();
        assert_eq!(c.samples_per_sec, 50.0);
        let costs = StateCosts {
            baseline: Some(c.clone()),
            turns: vec![],
            final_: Some(c),
        };
        assert!(!costs.has_figures());
    }

    #[test]
    fn report_json_keeps_final_under_its_own_name_and_turns_flat() {
        let costs = StateCosts {
            baseline: StateCost::of(&[run(100.0, 0, 1.0, 1.0, 1.0)]),
            turns: vec![TurnCost {
                turn: 2,
                cost: StateCost::of(&[run(300.0, 4, 1.0, 1.0, 1.0)]).unwrap(),
            }],
            final_: StateCost::of(&[run(300.0, 4, 1.0, 1.0, 1.0)]),
        };
        let v = serde_json::to_value(&costs).unwrap();
        assert_eq!(v["final"]["num_workers"], 4);
        assert_eq!(v["turns"][0]["turn"], 2);
        assert_eq!(v["turns"][0]["cpu_cores"], 2.0);
        let back: StateCosts = serde_json::from_value(v).unwrap();
        assert_eq!(back, costs);
        assert_eq!(back.turn(2).unwrap().samples_per_sec, 300.0);
        assert!(back.turn(1).is_none());
    }

    #[test]
    fn bytes_read_as_megabytes_and_gigabytes() {
        assert_eq!(bytes_text(0), "0 MB");
        assert_eq!(bytes_text(412_300_000), "412 MB");
        assert_eq!(bytes_text(1_234_000_000), "1.23 GB");
        assert_eq!(bytes_text(250_000), "0.25 MB");
    }
}

//! The two limits no DataLoader setting can pass, and which of them binds.
//!
//! * The step alone (the harness's ceiling): the training step fed one batch
//!   already in memory. No loader makes the step faster than that.
//! * What the cores can feed: every sample costs CPU — the workers' loading
//!   and collation, and the training process's receiving and stepping. The
//!   cores the job may use (affinity mask, cgroup quota) divided by the CPU
//!   seconds one sample costs is the most samples per second they can give,
//!   however the work is spread over workers or threads.
//!
//! The lower one binds; the final's share of it says how much is really left
//! on the table ("92% of what 2 cores can feed", not "10% of the ceiling").
//! Pure arithmetic on the harness's figures, so it is unit-tested here and
//! shared by the report, `tuneloop bench`, the plot and both agents.

use serde::{Deserialize, Serialize};

use super::stats;
use super::Measurement;

/// Which limit is the lower one.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// The training step alone (the ceiling).
    StepAlone,
    /// What the cores the job may use can feed.
    Cpu,
}

/// The limits of one run, as `report.json` keeps them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ThroughputLimits {
    /// samples/sec of the step alone on one batch in memory.
    #[serde(default)]
    pub step_alone_sps: Option<f64>,
    /// usable_cores / cpu_s_per_sample.
    #[serde(default)]
    pub cpu_limit_sps: Option<f64>,
    /// CPU seconds one sample costs, loading and training together (median
    /// over the measurements it was computed from).
    #[serde(default)]
    pub cpu_s_per_sample: Option<f64>,
    /// The cores the job may use.
    #[serde(default)]
    pub usable_cores: Option<f64>,
    /// What limited them: "cpu_count", "affinity" or "cgroup_quota".
    #[serde(default)]
    pub cores_limited_by: Option<String>,
    /// Cores other processes kept busy meanwhile (median): on a shared
    /// machine the job reached only what the rest could feed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_cores: Option<f64>,
    #[serde(default)]
    pub binding: Option<Binding>,
    /// The final throughput as a share of the binding limit.
    #[serde(default)]
    pub final_share: Option<f64>,
}

impl ThroughputLimits {
    /// The limits for a final throughput of `final_sps`: the ceiling as
    /// measured, the CPU limit from `ms` (the final state's measurements).
    pub fn of(step_alone_sps: Option<f64>, ms: &[Measurement], final_sps: f64) -> Self {
        let costs: Vec<f64> = ms.iter().filter_map(cpu_s_per_sample).collect();
        let cost = (!costs.is_empty()).then(|| stats::median(&costs));
        let last = ms.iter().rev().find(|m| m.job_cores().is_some());
        let cores = last.and_then(|m| m.job_cores());
        let cpu_limit = match (cores, cost) {
            (Some(c), Some(s)) if s > 0.0 => Some(c / s),
            _ => None,
        };
        let mut out = ThroughputLimits {
            step_alone_sps: step_alone_sps.filter(|c| c.is_finite() && *c > 0.0),
            cpu_limit_sps: cpu_limit.filter(|c| c.is_finite()),
            cpu_s_per_sample: cost,
            usable_cores: cores,
            cores_limited_by: last.map(|m| {
                m.cores_limited_by
                    .clone()
                    .unwrap_or_else(|| "cpu_count".into())
            }),
            others_cores: {
                let o: Vec<f64> = ms
                    .iter()
                    .filter(|m| m.world_size.unwrap_or(1) <= 1)
                    .filter_map(|m| m.others_cores())
                    .collect();
                (!o.is_empty()).then(|| stats::median(&o))
            },
            binding: None,
            final_share: None,
        };
        if let Some((b, sps)) = out.lower() {
            out.binding = Some(b);
            out.final_share = Some(final_sps / sps).filter(|s| s.is_finite());
        }
        out
    }

    /// The lower of the two limits, and which it is.
    pub fn lower(&self) -> Option<(Binding, f64)> {
        match (self.step_alone_sps, self.cpu_limit_sps) {
            (Some(s), Some(c)) if c < s => Some((Binding::Cpu, c)),
            (Some(s), _) => Some((Binding::StepAlone, s)),
            (None, Some(c)) => Some((Binding::Cpu, c)),
            (None, None) => None,
        }
    }

    /// The binding limit in samples/sec.
    pub fn binding_sps(&self) -> Option<f64> {
        self.lower().map(|(_, s)| s)
    }

    /// What a stop reason adds: "; the CPU binds at 8300 samples/sec and
    /// the incumbent is at 92% of it" (empty without figures).
    pub fn stop_note(&self) -> String {
        match (self.lower(), self.final_share) {
            (Some((b, sps)), Some(share)) => format!(
                "; {} at {sps:.0} samples/sec and the incumbent is at {:.0}% of it",
                match b {
                    Binding::StepAlone => "the step alone binds",
                    Binding::Cpu => "what the cores can feed binds",
                },
                share * 100.0
            ),
            _ => String::new(),
        }
    }

    /// One line for the terminal and the agents' evidence.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = self.step_alone_sps {
            parts.push(format!("step alone {s:.0} samples/sec"));
        }
        if let (Some(c), Some(cores), Some(cost)) =
            (self.cpu_limit_sps, self.usable_cores, self.cpu_s_per_sample)
        {
            parts.push(format!(
                "what the cores can feed {c:.0} samples/sec ({} ÷ {:.0} µs CPU per sample)",
                cores_text(cores, self.cores_limited_by.as_deref()),
                cost * 1e6
            ));
        }
        if let Some(o) = self.others_cores.filter(|o| *o >= 0.05) {
            parts.push(format!("other processes kept {o:.1} cores busy"));
        }
        let mut out = parts.join("; ");
        if let Some((b, _)) = self.lower() {
            out.push_str(match b {
                Binding::StepAlone => "; the step alone binds",
                Binding::Cpu => "; the CPU binds",
            });
        }
        out
    }
}

/// CPU seconds one sample cost in one measurement: the workers' loading and
/// collation (or the training process's own loading, without workers) plus
/// the training process's receiving and stepping. Under a launcher the CPU
/// figures are rank 0's and the samples everyone's, so the samples are
/// rank 0's share.
pub fn cpu_s_per_sample(m: &Measurement) -> Option<f64> {
    // Every thread of the workers when the harness counted them.
    let cpu = m.loader_threads_cpu_s.or(m.loader_cpu_s)? + m.main_cpu_s?;
    let ranks = f64::from(m.world_size.unwrap_or(1).max(1));
    let samples = match m.samples {
        Some(s) => s as f64 / ranks,
        None => f64::from(m.steps?) * m.batch_size? as f64,
    };
    (samples > 0.0 && cpu > 0.0).then(|| cpu / samples)
}

/// "2 cores", "1 core (affinity mask)", "1.5 cores (cgroup quota)".
pub fn cores_text(cores: f64, by: Option<&str>) -> String {
    let n = if (cores - cores.round()).abs() < 1e-9 {
        format!("{cores:.0}")
    } else {
        format!("{cores:.2}")
    };
    let unit = if n == "1" { "core" } else { "cores" };
    match by {
        Some("affinity") => format!("{n} {unit} (affinity mask)"),
        Some("cgroup_quota") => format!("{n} {unit} (cgroup quota)"),
        _ => format!("{n} {unit}"),
    }
}

/// For `tuneloop bench`'s device line: ", 1 usable (affinity mask)" when the
/// job may use fewer cores than the host has, else nothing.
pub fn usable_cores_note(m: &Measurement) -> String {
    match (m.usable_cores, m.cores_limited_by.as_deref()) {
        (Some(c), Some(by)) if by != "cpu_count" => {
            // "1 core (affinity mask)" → ", 1 usable (affinity mask)"
            let t = cores_text(c, Some(by));
            let (n, rest) = t.split_once(' ').unwrap_or((&t, ""));
            let why = rest.split_once(' ').map(|(_, w)| w).unwrap_or("");
            format!(", {n} usable {why}").trim_end().to_string()
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100 steps of 32 samples; CPU seconds of loading and of training.
    fn m(loader_cpu: f64, main_cpu: f64, cores: Option<f64>, by: Option<&str>) -> Measurement {
        Measurement {
            samples_per_sec: 1000.0,
            steps: Some(100),
            batch_size: Some(32),
            samples: Some(3200),
            loader_cpu_s: Some(loader_cpu),
            main_cpu_s: Some(main_cpu),
            cpu_count: Some(2),
            usable_cores: cores,
            cores_limited_by: by.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn cpu_seconds_per_sample_are_loading_plus_training_over_the_samples() {
        // 0.6 s of loading, 0.2 s of training over 3,200 samples: 250 µs each.
        let x = m(0.6, 0.2, Some(2.0), Some("cpu_count"));
        assert!((cpu_s_per_sample(&x).unwrap() - 0.00025).abs() < 1e-12);
        // The workers' every thread, when counted, not their main threads alone.
        let mut threads = x.clone();
        threads.loader_threads_cpu_s = Some(1.0);
        assert!((cpu_s_per_sample(&threads).unwrap() - 0.000375).abs() < 1e-12);
        // Without the samples figure (an older harness): steps × batch.
        let mut old = x.clone();
        old.samples = None;
        assert!((cpu_s_per_sample(&old).unwrap() - 0.00025).abs() < 1e-12);
        // Under a launcher, rank 0's CPU over rank 0's share of the samples.
        let mut ranks = x.clone();
        ranks.world_size = Some(2);
        assert!((cpu_s_per_sample(&ranks).unwrap() - 0.0005).abs() < 1e-12);
        // Contract mode: no CPU figures, no limit.
        let contract = Measurement {
            samples_per_sec: 5.0,
            ..Default::default()
        };
        assert_eq!(cpu_s_per_sample(&contract), None);
    }

    #[test]
    fn the_cpu_limit_binds_when_the_cores_feed_less_than_the_step_alone_takes() {
        // The demo's shape: 2 cores, 240 µs a sample → 8,333/s; step alone 32,000/s.
        let x = m(0.6, 0.168, Some(2.0), Some("cpu_count"));
        let l = ThroughputLimits::of(Some(32_000.0), &[x], 7_700.0);
        let cpu = l.cpu_limit_sps.unwrap();
        assert!((cpu - 2.0 / 0.00024).abs() < 1e-6, "{l:?}");
        assert_eq!(l.binding, Some(Binding::Cpu));
        assert!((l.final_share.unwrap() - 7_700.0 / cpu).abs() < 1e-9);
        assert!(l.summary().contains("the CPU binds"), "{}", l.summary());
        assert!(l.summary().contains("240 µs"), "{}", l.summary());
        assert_eq!(
            l.stop_note(),
            "; what the cores can feed binds at 8333 samples/sec and the incumbent is at 92% of it"
        );
    }

    #[test]
    fn the_step_alone_binds_when_the_cores_could_feed_more() {
        let x = m(0.06, 0.1, Some(2.0), None);
        let l = ThroughputLimits::of(Some(10_000.0), &[x], 9_000.0);
        assert_eq!(l.binding, Some(Binding::StepAlone));
        assert!((l.final_share.unwrap() - 0.9).abs() < 1e-12);
        assert_eq!(l.cores_limited_by.as_deref(), Some("cpu_count"));
    }

    #[test]
    fn the_usable_cores_not_the_hosts_set_the_limit_and_the_cost_is_a_median() {
        // Held to one core of two: half the limit of the whole host.
        let a = m(0.6, 0.2, Some(1.0), Some("affinity"));
        let b = m(0.9, 0.2, Some(1.0), Some("affinity"));
        let c = m(0.7, 0.1, Some(1.0), Some("affinity"));
        let l = ThroughputLimits::of(None, &[a, b, c], 3_000.0);
        // Costs 250, 343.75, 250 µs: the median is 250 µs → 4,000/s on 1 core.
        assert!((l.cpu_limit_sps.unwrap() - 4_000.0).abs() < 1e-6, "{l:?}");
        assert_eq!(l.binding, Some(Binding::Cpu));
        assert!(
            l.summary().contains("1 core (affinity mask)"),
            "{}",
            l.summary()
        );
        // No usable count (an older harness): the host's.
        let old = m(0.6, 0.2, None, None);
        let l = ThroughputLimits::of(None, &[old], 3_000.0);
        assert!((l.cpu_limit_sps.unwrap() - 8_000.0).abs() < 1e-6, "{l:?}");
    }

    #[test]
    fn other_processes_load_is_reported_beside_the_limit() {
        // 0.8 s of own CPU over 1 s; the machine was busy 2.0 s: others took 1.2 cores.
        let mut x = m(0.6, 0.2, Some(2.0), None);
        x.wall_s = Some(1.0);
        x.machine_busy_s = Some(2.0);
        let l = ThroughputLimits::of(None, &[x.clone()], 3_000.0);
        assert!((l.others_cores.unwrap() - 1.2).abs() < 1e-9, "{l:?}");
        assert!(
            l.summary().contains("other processes kept 1.2 cores busy"),
            "{}",
            l.summary()
        );
        // Under a launcher the other ranks are this job: not counted.
        x.world_size = Some(2);
        assert_eq!(ThroughputLimits::of(None, &[x], 3_000.0).others_cores, None);
    }

    #[test]
    fn without_figures_there_is_no_limit_and_no_share() {
        let l = ThroughputLimits::of(None, &[], 100.0);
        assert_eq!(l.lower(), None);
        assert_eq!(l.final_share, None);
        let l = ThroughputLimits::of(Some(f64::NAN), &[], 100.0);
        assert_eq!(l.step_alone_sps, None);
    }

    #[test]
    fn the_bench_line_names_a_limited_core_count_only() {
        let x = m(0.6, 0.2, Some(1.0), Some("affinity"));
        assert_eq!(usable_cores_note(&x), ", 1 usable (affinity mask)");
        let q = m(0.6, 0.2, Some(1.5), Some("cgroup_quota"));
        assert_eq!(usable_cores_note(&q), ", 1.50 usable (cgroup quota)");
        let host = m(0.6, 0.2, Some(2.0), Some("cpu_count"));
        assert_eq!(usable_cores_note(&host), "");
    }
}

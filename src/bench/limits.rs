//! The limits no DataLoader setting can pass, and which of them binds.
//!
//! * The step alone (the harness's ceiling): the training step fed one batch
//!   already in memory. No loader makes the step faster than that. With
//!   workers the training process also receives every batch from them (its
//!   CPU inside `next()`, measured): serial work beside the step that no
//!   worker count removes, so the step's limit counts it.
//! * What the cores can feed: every sample costs CPU — the workers' loading
//!   and collation, and the training process's receiving and stepping. The
//!   cores the job may use (affinity mask, cgroup quota) divided by the CPU
//!   seconds one sample costs is the most samples per second they can give,
//!   however the work is spread over workers or threads.
//!
//! * What the cores can feed with the epochs' restarts: every epoch starts
//!   with an empty pipeline, and until its first batch arrives the step idles
//!   and the cores are busy only with what the workers can do meanwhile. The
//!   harness times each epoch start within the timed steps (the wait for the
//!   first batch and the machine's CPU meanwhile); the core-time left idle
//!   there is added to every sample's CPU cost at the measured rate of
//!   restarts. On long epochs it is nothing; on an epoch of 32 batches, with
//!   more workers × prefetch than that, it is a limit no worker count passes.
//!
//! The lowest one binds; the final's share of it says how much is really left
//! on the table ("92% of what 2 cores can feed", not "10% of the ceiling").
//! Pure arithmetic on the harness's figures, so it is unit-tested here and
//! shared by the report, `tuneloop bench`, the plot and both agents.

use serde::{Deserialize, Serialize};

use super::stats;
use super::Measurement;

/// How a stop reason names each binding limit.
const BINDS: [&str; 4] = [
    "the step alone with receiving its batches binds",
    "the step alone binds",
    "what the cores can feed binds",
    "what the cores can feed with each epoch's restart binds",
];

/// Which limit is the lowest.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// The training step alone (the ceiling).
    StepAlone,
    /// What the cores the job may use can feed.
    Cpu,
    /// What the cores can feed, less what each epoch's restart leaves idle.
    EpochRestarts,
}

/// What the timed epoch starts cost: how long each waited for its first
/// batch and how much of the cores stayed idle meanwhile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct EpochRestarts {
    /// `len(loader)` of the measured loader, when it has one.
    #[serde(default)]
    pub batches_per_epoch: Option<u64>,
    /// Seconds from an epoch's new iterator to its first batch (median).
    pub fill_s: f64,
    /// Core-seconds left idle during that fill (usable cores × fill − the
    /// machine's busy CPU meanwhile, median).
    pub idle_core_s: f64,
    /// Epoch starts per sample over the timed steps. Under a launcher, per
    /// sample of every rank: the ranks start their epochs together, and the
    /// idle cores are the machine's.
    pub restarts_per_sample: f64,
}

/// The limits of one run, as `report.json` keeps them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ThroughputLimits {
    /// samples/sec of the step alone on one batch in memory.
    #[serde(default)]
    pub step_alone_sps: Option<f64>,
    /// CPU seconds a sample costs the training process receiving its batch
    /// from the workers (inside `next()`; median over the measurements with
    /// workers, one process): serial with the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_s_per_sample: Option<f64>,
    /// The step alone with that receiving: 1 / (1 / step alone + receive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_limit_sps: Option<f64>,
    /// samples/sec of the training step as it ran in these measurements,
    /// beside the workers (median). Not a limit: the workers share its cores,
    /// so a step slower here than alone is what the chosen setting costs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_beside_sps: Option<f64>,
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
    /// The CPU limit with each epoch start's idle cores counted: only when
    /// the timed steps held an epoch start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_limit_sps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_restarts: Option<EpochRestarts>,
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
        let restarts = cores.and_then(|c| epoch_restarts(ms, c));
        let epoch_limit = match (cores, cost, &restarts) {
            (Some(c), Some(s), Some(r)) if s > 0.0 => {
                Some(1.0 / (s / c + r.restarts_per_sample * r.idle_core_s / c))
            }
            _ => None,
        };
        let step_alone_sps = step_alone_sps.filter(|c| c.is_finite() && *c > 0.0);
        let receives: Vec<f64> = ms.iter().filter_map(receive_s_per_sample).collect();
        let receive = (!receives.is_empty()).then(|| stats::median(&receives));
        let step_limit = step_alone_sps
            .zip(receive)
            .map(|(s, r)| 1.0 / (1.0 / s + r))
            .filter(|s| s.is_finite());
        let besides: Vec<f64> = ms.iter().filter_map(step_beside_sps).collect();
        let mut out = ThroughputLimits {
            step_alone_sps,
            receive_s_per_sample: receive,
            step_limit_sps: step_limit,
            step_beside_sps: (!besides.is_empty()).then(|| stats::median(&besides)),
            cpu_limit_sps: cpu_limit.filter(|c| c.is_finite()),
            epoch_limit_sps: epoch_limit.filter(|c| c.is_finite()),
            epoch_restarts: restarts,
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

    /// The lowest of the limits, and which it is.
    pub fn lower(&self) -> Option<(Binding, f64)> {
        [
            (
                Binding::StepAlone,
                self.step_limit_sps.or(self.step_alone_sps),
            ),
            (Binding::Cpu, self.cpu_limit_sps),
            (Binding::EpochRestarts, self.epoch_limit_sps),
        ]
        .into_iter()
        .filter_map(|(b, s)| Some((b, s?)))
        .fold(None, |low: Option<(Binding, f64)>, (b, s)| match low {
            Some((_, l)) if l <= s => low,
            _ => Some((b, s)),
        })
    }

    /// The step's speed beside the workers, when it is well under the step
    /// alone (under 90% of it): the cores it shares with them slow it, and
    /// that is why the final stops short of a step-bound limit.
    pub fn step_slowed(&self) -> Option<f64> {
        let (beside, alone) = (self.step_beside_sps?, self.step_alone_sps?);
        (beside < 0.9 * alone).then_some(beside)
    }

    /// The binding limit in samples/sec.
    pub fn binding_sps(&self) -> Option<f64> {
        self.lower().map(|(_, s)| s)
    }

    /// What a stop reason adds: "; the CPU binds at 8300 samples/sec and
    /// the incumbent is at 92% of it" (empty without figures).
    pub fn stop_note(&self) -> String {
        self.note("the incumbent")
    }

    fn note(&self, subject: &str) -> String {
        match (self.lower(), self.final_share) {
            (Some((b, sps)), Some(share)) => format!(
                "; {} at {sps:.0} samples/sec and {subject} is at {:.0}% of it",
                match b {
                    Binding::StepAlone if self.step_limit_sps.is_some() => BINDS[0],
                    Binding::StepAlone => BINDS[1],
                    Binding::Cpu => BINDS[2],
                    Binding::EpochRestarts => BINDS[3],
                },
                share * 100.0
            ),
            _ => String::new(),
        }
    }

    /// `reason` with the note [`stop_note`](Self::stop_note) put in it when
    /// the loop stopped (figured from one run of the incumbent) restated from
    /// these limits, the final's: a report cites one binding figure, the one
    /// of its Binding line. A reason without a note comes back as it was.
    pub fn restate_stop_note(&self, reason: &str) -> String {
        let Some(start) = BINDS
            .iter()
            .filter_map(|b| reason.find(&format!("; {b} at ")))
            .min()
        else {
            return reason.to_string();
        };
        let Some(len) = reason[start..].find("% of it") else {
            return reason.to_string();
        };
        let end = start + len + "% of it".len();
        format!(
            "{}{}{}",
            &reason[..start],
            self.note("the final"),
            &reason[end..]
        )
    }

    /// One line for the terminal and the agents' evidence.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = self.step_alone_sps {
            parts.push(format!("step alone {s:.0} samples/sec"));
        }
        if let (Some(s), Some(r)) = (self.step_limit_sps, self.receive_s_per_sample) {
            parts.push(format!(
                "with receiving each batch from the workers {s:.0} samples/sec ({:.0} µs a sample in the training process)",
                r * 1e6
            ));
        }
        if let Some(b) = self.step_slowed() {
            parts.push(format!(
                "beside the workers the step itself ran at {b:.0} samples/sec (they share its cores)"
            ));
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
        if let (Some(e), Some(r)) = (self.epoch_limit_sps, &self.epoch_restarts) {
            parts.push(format!(
                "with each epoch's restart {e:.0} samples/sec ({})",
                r.text()
            ));
        }
        if let Some(o) = self.others_cores.filter(|o| *o >= 0.05) {
            parts.push(format!("other processes kept {o:.1} cores busy"));
        }
        let mut out = parts.join("; ");
        if let Some((b, _)) = self.lower() {
            out.push_str(match b {
                Binding::StepAlone if self.step_limit_sps.is_some() => {
                    "; the step alone with receiving its batches binds"
                }
                Binding::StepAlone => "; the step alone binds",
                Binding::Cpu => "; the CPU binds",
                Binding::EpochRestarts => "; the CPU with the epochs' restarts binds",
            });
        }
        out
    }
}

impl EpochRestarts {
    /// "an epoch of 32 batches starts empty: 70 ms to its first batch with
    /// 0.9 cores idle meanwhile".
    pub fn text(&self) -> String {
        let epoch = match self.batches_per_epoch {
            Some(n) => format!("an epoch of {n} batches"),
            None => "each epoch".to_string(),
        };
        format!(
            "{epoch} starts empty: {:.0} ms to its first batch with {:.1} cores idle meanwhile",
            self.fill_s * 1e3,
            self.idle_cores()
        )
    }

    /// Cores idle on average during the fill.
    pub fn idle_cores(&self) -> f64 {
        self.idle_core_s / self.fill_s.max(f64::MIN_POSITIVE)
    }
}

/// The timed epoch starts' figures over the measurements that held one
/// (medians), with `cores` the usable cores; `None` when none did.
fn epoch_restarts(ms: &[Measurement], cores: f64) -> Option<EpochRestarts> {
    let mut fills = Vec::new();
    let mut idles = Vec::new();
    let mut rates = Vec::new();
    for m in ms {
        let (Some(n), Some(fill), Some(samples)) = (
            m.epoch_starts_timed.filter(|n| *n > 0),
            m.epoch_fill_s,
            m.samples,
        ) else {
            continue;
        };
        let samples = samples as f64;
        if samples <= 0.0 || fill <= 0.0 {
            continue;
        }
        // Busy CPU beyond what the cores could give (another process's
        // share on a loaded machine) leaves nothing idle, never less.
        let busy = m.epoch_fill_busy_s.unwrap_or(0.0).clamp(0.0, cores * fill);
        fills.push(fill);
        idles.push(cores * fill - busy);
        rates.push(f64::from(n) / samples);
    }
    (!fills.is_empty()).then(|| EpochRestarts {
        batches_per_epoch: ms.iter().rev().find_map(|m| m.batches_per_epoch),
        fill_s: stats::median(&fills),
        idle_core_s: stats::median(&idles),
        restarts_per_sample: stats::median(&rates),
    })
}

/// CPU seconds one sample cost in one measurement: the workers' loading and
/// collation (or the training process's own loading, without workers) plus
/// the training process's receiving and stepping. Under a launcher the CPU
/// figures are rank 0's and the samples everyone's, so the samples are
/// rank 0's share.
pub fn cpu_s_per_sample(m: &Measurement) -> Option<f64> {
    // Every thread of the workers when the harness counted them.
    let cpu = m.loader_threads_cpu_s.or(m.loader_cpu_s)? + step_cpu_s(m)?;
    let ranks = f64::from(m.world_size.unwrap_or(1).max(1));
    let samples = match m.samples {
        Some(s) => s as f64 / ranks,
        None => f64::from(m.steps?) * m.batch_size? as f64,
    };
    (samples > 0.0 && cpu > 0.0).then(|| cpu / samples)
}

/// The training process's CPU seconds outside `next()` that count as the
/// samples' cost. On CUDA one host thread drives the step, so at most one
/// core over the step's time: more is the intra-op thread pool spinning on
/// after in-process loading (on an H200 at num_workers=0, a ResNet-18 script
/// that never sets `torch.set_num_threads` kept 8.2 of 16 cores busy through
/// GPU steps, and the CPU limit read 188 samples/s where 16 workers ran
/// 613-735; bench/RESULTS.md, "The GPU check on one H200"). On the CPU the
/// step's threads compute, and all of their time counts.
pub fn step_cpu_s(m: &Measurement) -> Option<f64> {
    let main = m.main_cpu_s?;
    let on_cuda = m.device.as_deref().is_some_and(|d| d.starts_with("cuda"));
    Some(match m.train_step_s {
        Some(step) if on_cuda && step > 0.0 => main.min(step),
        _ => main,
    })
}

/// samples/sec of the training step itself in one measurement, beside its
/// workers (the timed steps' samples over their training time, the wait for
/// data left out).
/// Only with workers and one process, as for the receiving.
pub fn step_beside_sps(m: &Measurement) -> Option<f64> {
    let samples = samples_beside_workers(m)?;
    m.train_step_s
        .filter(|t| *t > 0.0)
        .map(|t| samples / t)
        .filter(|s| s.is_finite() && *s > 0.0)
}

/// CPU seconds the training process spent receiving one sample from the
/// workers in one measurement: its CPU inside `next()` over the samples.
/// Only with workers (without them that CPU is the loading itself) and one
/// process (under a launcher the step alone and the figures differ in scope).
pub fn receive_s_per_sample(m: &Measurement) -> Option<f64> {
    let samples = samples_beside_workers(m)?;
    m.fetch_cpu_s
        .filter(|f| *f >= 0.0)
        .map(|f| f / samples)
        .filter(|r| r.is_finite() && samples > 0.0)
}

/// The samples of a measurement whose training process had workers beside
/// it, one process only (under a launcher the step alone and the figures
/// differ in scope); `None` otherwise.
fn samples_beside_workers(m: &Measurement) -> Option<f64> {
    if m.num_workers().unwrap_or(0) == 0 || m.world_size.unwrap_or(1) > 1 {
        return None;
    }
    match m.samples {
        Some(s) => Some(s as f64),
        None => Some(f64::from(m.steps?) * m.batch_size? as f64),
    }
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
    fn on_cuda_the_training_process_counts_one_core_over_its_steps() {
        // The H200 run's baseline at num_workers=0 (profiled run): 0.75 s of
        // loading, 29.8 s of the training process over a 3.63 s step time.
        let mut x = m(0.75, 29.8, Some(16.0), Some("cpu_count"));
        x.samples = Some(320);
        x.train_step_s = Some(3.63);
        x.device = Some("cuda:0".into());
        let cost = cpu_s_per_sample(&x).unwrap();
        assert!((cost - (0.75 + 3.63) / 320.0).abs() < 1e-12, "{cost}");
        // A step that used less than a core keeps what it used.
        x.main_cpu_s = Some(2.0);
        assert!((cpu_s_per_sample(&x).unwrap() - 2.75 / 320.0).abs() < 1e-12);
        // On the CPU the step's threads compute: all of their time counts.
        let mut cpu = x.clone();
        cpu.main_cpu_s = Some(29.8);
        cpu.device = Some("cpu".into());
        assert!((cpu_s_per_sample(&cpu).unwrap() - 30.55 / 320.0).abs() < 1e-12);
        // No step time (an older harness): the figure as measured.
        let mut old = x.clone();
        old.main_cpu_s = Some(29.8);
        old.train_step_s = None;
        assert!((cpu_s_per_sample(&old).unwrap() - 30.55 / 320.0).abs() < 1e-12);
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
    fn a_stop_reason_cites_the_final_binding_figure_once_restated() {
        // The argparse script's report: the loop stopped on one run of the
        // incumbent (4,825/s, 83%), the final's runs give 8,333/s.
        let x = m(0.6, 0.168, Some(2.0), Some("cpu_count"));
        let l = ThroughputLimits::of(Some(32_000.0), &[x], 7_700.0);
        let reason = "candidates exhausted; what the cores can feed binds at 4825 samples/sec \
                      and the incumbent is at 83% of it; the command ran 192 training batches";
        assert_eq!(
            l.restate_stop_note(reason),
            "candidates exhausted; what the cores can feed binds at 8333 samples/sec \
             and the final is at 92% of it; the command ran 192 training batches"
        );
        // Another limit named at the stop is restated as the final's one.
        let step = "settled; the step alone with receiving its batches binds at 4937 samples/sec \
                    and the incumbent is at 85% of it";
        assert_eq!(
            l.restate_stop_note(step),
            "settled; what the cores can feed binds at 8333 samples/sec and the final is at 92% of it"
        );
        let plain = "iteration limit (5) reached";
        assert_eq!(l.restate_stop_note(plain), plain);
        // Limits without figures drop the stale note rather than keep it.
        let bare = ThroughputLimits::default();
        assert_eq!(
            bare.restate_stop_note(reason),
            "candidates exhausted; the command ran 192 training batches"
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
    fn receiving_each_batch_from_workers_counts_against_the_step() {
        // io_latency's final, as measured: 11 workers, step alone 5,837/s,
        // the training thread 80 ms of CPU inside next() over 2,560 samples.
        let mut x = m(0.15, 0.48, Some(2.0), None);
        x.samples = Some(2560);
        x.fetch_cpu_s = Some(0.08);
        x.loader
            .insert("num_workers".into(), serde_json::Value::from(11));
        let r = receive_s_per_sample(&x).unwrap();
        assert!((r - 0.08 / 2560.0).abs() < 1e-12);
        let l = ThroughputLimits::of(Some(5_837.0), &[x.clone()], 4_206.0);
        let step = l.step_limit_sps.unwrap();
        assert!((step - 1.0 / (1.0 / 5_837.0 + r)).abs() < 1e-6, "{l:?}");
        assert!(step < 5_837.0 && step > 4_800.0, "{step}");
        assert_eq!(l.binding, Some(Binding::StepAlone));
        assert_eq!(l.binding_sps(), Some(step));
        assert!((l.final_share.unwrap() - 4_206.0 / step).abs() < 1e-9);
        assert!(
            l.stop_note()
                .starts_with("; the step alone with receiving its batches binds at 4937"),
            "{}",
            l.stop_note()
        );
        assert!(l.summary().contains("31 µs a sample"), "{}", l.summary());
        // Without workers that CPU is the loading itself: no such limit.
        let mut none = x.clone();
        none.loader
            .insert("num_workers".into(), serde_json::Value::from(0));
        assert_eq!(receive_s_per_sample(&none), None);
        let l = ThroughputLimits::of(Some(5_837.0), &[none], 4_206.0);
        assert_eq!(l.step_limit_sps, None);
        assert_eq!(l.binding_sps(), Some(5_837.0));
        // Under a launcher neither (the step alone's scope differs).
        let mut ranks = x;
        ranks.world_size = Some(2);
        assert_eq!(receive_s_per_sample(&ranks), None);
    }

    #[test]
    fn the_step_beside_the_workers_is_shown_when_they_slow_it() {
        // io_latency at 11 workers, as measured: 2,560 samples, 0.607 s of
        // training over the timed steps (4,220/s), against 6,001/s alone.
        let mut x = m(0.18, 0.72, Some(2.0), None);
        x.samples = Some(2560);
        x.train_step_s = Some(0.6066);
        x.loader
            .insert("num_workers".into(), serde_json::Value::from(11));
        let b = step_beside_sps(&x).unwrap();
        assert!((b - 2560.0 / 0.6066).abs() < 1e-6, "{b}");
        let l = ThroughputLimits::of(Some(6_001.0), &[x.clone()], 4_279.0);
        assert_eq!(l.step_slowed(), Some(b));
        assert!(
            l.summary()
                .contains("beside the workers the step itself ran at 4220 samples/sec"),
            "{}",
            l.summary()
        );
        // A step within 10% of its speed alone is not news.
        let l = ThroughputLimits::of(Some(4_500.0), &[x.clone()], 4_279.0);
        assert_eq!(l.step_slowed(), None);
        assert!(
            !l.summary().contains("beside the workers"),
            "{}",
            l.summary()
        );
        // Without workers the step runs alone: nothing to compare.
        x.loader
            .insert("num_workers".into(), serde_json::Value::from(0));
        assert_eq!(step_beside_sps(&x), None);
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
        // The workers' feeder threads are the job's own CPU, not others'.
        let mut threads = x.clone();
        threads.loader_threads_cpu_s = Some(0.9);
        let l = ThroughputLimits::of(None, &[threads], 3_000.0);
        assert!((l.others_cores.unwrap() - 0.9).abs() < 1e-9, "{l:?}");
        // Under a launcher the other ranks are this job: not counted.
        x.world_size = Some(2);
        assert_eq!(ThroughputLimits::of(None, &[x], 3_000.0).others_cores, None);
    }

    #[test]
    fn each_epoch_start_adds_its_idle_cores_to_every_sample_and_can_bind() {
        // 3,200 samples on 2 cores at 250 µs each: 8,000/s. One epoch start
        // timed; its first batch took 100 ms with 0.05 core-seconds busy, so
        // 0.15 core-seconds idle: 46.9 µs of core time more per sample.
        let mut x = m(0.6, 0.2, Some(2.0), Some("cpu_count"));
        x.epoch_starts_timed = Some(1);
        x.batches_per_epoch = Some(32);
        x.epoch_fill_s = Some(0.1);
        x.epoch_fill_busy_s = Some(0.05);
        let l = ThroughputLimits::of(Some(32_000.0), &[x.clone()], 6_000.0);
        let want = 1.0 / (0.00025 / 2.0 + (1.0 / 3200.0) * 0.15 / 2.0);
        assert!((l.epoch_limit_sps.unwrap() - want).abs() < 1e-6, "{l:?}");
        assert!(l.epoch_limit_sps < l.cpu_limit_sps);
        assert_eq!(l.binding, Some(Binding::EpochRestarts));
        assert!((l.final_share.unwrap() - 6_000.0 / want).abs() < 1e-9);
        let r = l.epoch_restarts.as_ref().unwrap();
        assert!((r.idle_cores() - 1.5).abs() < 1e-9, "{r:?}");
        assert!(
            l.summary().contains(
                "an epoch of 32 batches starts empty: 100 ms to its first batch with 1.5 cores idle meanwhile"
            ),
            "{}",
            l.summary()
        );
        assert!(l.stop_note().contains("with each epoch's restart binds"));

        // A loaded machine: more busy than the cores hold leaves none idle,
        // and the limit is the CPU limit's.
        let mut busy = x.clone();
        busy.epoch_fill_busy_s = Some(0.5);
        let l = ThroughputLimits::of(None, &[busy], 6_000.0);
        assert!((l.epoch_limit_sps.unwrap() - l.cpu_limit_sps.unwrap()).abs() < 1e-6);

        // No epoch began while timed: no such limit, the CPU binds.
        let mut long = x.clone();
        long.epoch_starts_timed = Some(0);
        long.epoch_fill_s = None;
        let l = ThroughputLimits::of(Some(32_000.0), &[long.clone(), x], 6_000.0);
        // Only the measurement that held a restart counts, at its own rate.
        assert!((l.epoch_limit_sps.unwrap() - want).abs() < 1e-6, "{l:?}");
        let l = ThroughputLimits::of(Some(32_000.0), &[long], 6_000.0);
        assert_eq!(l.epoch_limit_sps, None);
        assert_eq!(l.binding, Some(Binding::Cpu));

        // Two ranks on the machine, each with its own restart: the idle
        // cores are the machine's, spread over both ranks' samples; the CPU
        // cost is rank 0's over its share, as for the CPU limit.
        let mut ranks = m(1.2, 0.4, Some(2.0), None);
        ranks.samples = Some(6400);
        ranks.world_size = Some(2);
        ranks.epoch_starts_timed = Some(1);
        ranks.epoch_fill_s = Some(0.1);
        ranks.epoch_fill_busy_s = Some(0.05);
        let l = ThroughputLimits::of(None, &[ranks], 6_000.0);
        let r = l.epoch_restarts.as_ref().unwrap();
        assert!(
            (r.restarts_per_sample - 1.0 / 6400.0).abs() < 1e-12,
            "{r:?}"
        );
        // 1.6 s of rank 0's CPU over its 3,200 samples: 500 µs a sample.
        let want = 1.0 / (0.0005 / 2.0 + (1.0 / 6400.0) * 0.15 / 2.0);
        assert!((l.epoch_limit_sps.unwrap() - want).abs() < 1e-6, "{l:?}");

        // The step alone still binds when it is lower than all.
        let mut slow_step = m(0.6, 0.2, Some(2.0), None);
        slow_step.epoch_starts_timed = Some(1);
        slow_step.epoch_fill_s = Some(0.1);
        let l = ThroughputLimits::of(Some(1_000.0), &[slow_step], 900.0);
        assert_eq!(l.binding, Some(Binding::StepAlone));
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

//! What the incumbent's own measurement says about its loader: the figures
//! every agent decides from. Pure arithmetic on a [`Measurement`], no I/O.
//!
//! The builtin agent picks its next setting from these figures; the Claude
//! Code agent gets the same figures in its prompt ([`Evidence`], rendered by
//! `claude::prompt`), as evidence rather than as an order, so that a paid
//! turn does not have to rediscover what the measurement already says: the
//! ceiling and the incumbent's share of it, how long one worker takes per
//! batch against how long the step could take, the CPU the loader, the
//! training process and the machine keep busy, whether the wait comes as a
//! few stalls or steadily, and what each knob could give at most.
//!
//! [`Evidence`] is a plain struct of optional figures: a new figure is a new
//! field (filled in [`Evidence::of`], shown by the prompt's renderer), and a
//! new bound on a knob a new arm in [`Evidence::outlook`].

use crate::bench::Measurement;
use crate::knob::LoaderKnob;

/// Spend a turn on more workers (or on prefetching) only when the figures
/// promise at least this speed-up: a smaller one is a close call that costs
/// many runs to settle and is seldom kept.
pub const MIN_PREDICTED_GAIN: f64 = 1.15;
/// The step waits steadily when its median data_wait is at least this share
/// of the mean: no few long stalls for a deeper prefetch to absorb.
pub const STEADY_WAIT: f64 = 0.5;
/// Workers asked for beyond the estimate: a worker too many costs little
/// (it waits), one too few leaves the step waiting.
pub const WORKER_HEADROOM: f64 = 1.25;

/// What one measurement says about the loader, per timed step. Without
/// workers, loading happens inside `next()` in the training process; with W
/// workers that keep the step waiting, each takes W steps to produce a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoaderModel {
    /// Seconds per step now: data_wait + train_step.
    pub step_s: f64,
    /// The training step alone: no loader setting gets below it.
    pub train_s: f64,
    /// With workers, the training thread's CPU inside `next()` (receiving a
    /// batch from a worker): part of data_wait however many workers there are.
    pub fetch_s: f64,
    /// What the CPU allows: the CPU that loading and training use per step,
    /// spread over the cores left free for this job.
    pub cpu_s: f64,
    /// Seconds one worker (or the training process, without workers) takes
    /// to produce one batch.
    pub batch_latency_s: f64,
    /// Cores free for this job: its share of the machine, less what other
    /// processes kept busy over the timed steps.
    pub cores_free: f64,
}

impl LoaderModel {
    /// `None` when the measurement lacks the figures (contract mode, an older harness).
    pub fn of(m: &Measurement, workers: u64, cores: u64) -> Option<LoaderModel> {
        let steps = f64::from(m.steps.filter(|&s| s > 0)?);
        let (dw, train) = (m.data_wait_s? / steps, m.train_step_s? / steps);
        // The training process's CPU as the CPU limit counts it (on CUDA,
        // at most one core over the steps: the rest is spinning threads).
        let (load_cpu, main_cpu) = (m.loader_cpu_s?, crate::bench::limits::step_cpu_s(m)?);
        let step = dw + train;
        if step <= 0.0 || train <= 0.0 {
            return None;
        }
        // Other processes' load, from the machine's busy time; under a
        // launcher the other ranks are this job, so it is left out there.
        let others = match m.world_size.unwrap_or(1) {
            1 => m.others_cores().unwrap_or(0.0),
            _ => 0.0,
        };
        // Others' load counts against the host's cores, not against a job
        // held to fewer of them (taskset, a quota): it may run elsewhere.
        let host = m.cpu_count.map(f64::from).unwrap_or(cores as f64);
        let usable = match m.world_size.unwrap_or(1) {
            1 => m.usable_cores.filter(|c| *c > 0.0).unwrap_or(cores as f64),
            _ => cores as f64,
        };
        let cores_free = (cores as f64)
            .min(usable)
            .min(host.max(cores as f64) - others)
            .max(0.5);
        let fetch = if workers == 0 {
            0.0
        } else {
            m.fetch_cpu_s.unwrap_or(0.0) / steps
        };
        Some(LoaderModel {
            step_s: step,
            train_s: train,
            fetch_s: fetch,
            cpu_s: (load_cpu + main_cpu) / steps / cores_free,
            batch_latency_s: if workers == 0 {
                dw
            } else {
                workers as f64 * step
            },
            cores_free,
        })
    }

    /// The fastest step any loader setting could give.
    pub fn best_step_s(&self) -> f64 {
        (self.train_s + self.fetch_s).max(self.cpu_s)
    }

    /// How much faster the step could get with enough workers.
    pub fn predicted_gain(&self) -> f64 {
        self.step_s / self.best_step_s()
    }

    /// Workers that keep up with the fastest step, with some headroom.
    pub fn workers_needed(&self) -> u64 {
        (self.batch_latency_s / self.best_step_s() * WORKER_HEADROOM).ceil() as u64
    }

    /// Whether no loader setting can make the step much faster: what keeps
    /// it waiting is the CPU, or the training process's own work, not the
    /// number of workers.
    pub fn saturated(&self) -> bool {
        self.predicted_gain() < MIN_PREDICTED_GAIN
    }

    /// Whether the CPU, rather than the training step, sets the fastest step.
    pub fn cpu_bound(&self) -> bool {
        self.cpu_s > self.train_s + self.fetch_s
    }
}

/// Cores each rank's loader may use: the machine's, shared among the ranks.
pub fn cores_per_rank(m: &Measurement) -> u64 {
    let ranks = m.world_size.unwrap_or(1).max(1) as u64;
    (m.cpu_count.unwrap_or(1).max(1) as u64 / ranks).max(1)
}

/// How the step's wait comes: the median step's data_wait against the mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WaitShape {
    pub mean_s: f64,
    pub median_s: f64,
}

impl WaitShape {
    pub fn of(m: &Measurement) -> Option<WaitShape> {
        let steps = m.steps.filter(|&s| s > 0)?;
        Some(WaitShape {
            mean_s: m.data_wait_s? / f64::from(steps),
            median_s: m.data_wait_step_median_s?,
        })
    }

    /// Every step waits about alike: the workers' rate is the limit, and a
    /// deeper queue does not raise it. Otherwise the wait comes as stalls
    /// (most steps wait little, a few long), which prefetching absorbs.
    pub fn steady(&self) -> bool {
        self.median_s >= STEADY_WAIT * self.mean_s
    }
}

/// Whether an epoch is so short that, with `workers` each asking for
/// `prefetch` batches, all its batches are requested at its start already:
/// the wait left is the epoch's first batch, which no deeper queue removes.
/// The batches an epoch holds are `len(loader)` when the harness read it,
/// else estimated from the timed steps over the epochs begun among them.
pub fn short_epochs(
    batches_per_epoch: Option<u64>,
    epoch_starts: Option<u32>,
    steps: Option<u32>,
    workers: u64,
    prefetch: u64,
) -> bool {
    match (batches_per_epoch, epoch_starts, steps) {
        (Some(b), ..) => b <= workers * prefetch,
        (None, Some(n), Some(steps)) if n > 0 => {
            u64::from(steps) / u64::from(n) <= workers * prefetch
        }
        _ => false,
    }
}

/// The timed steps, when none of them started an epoch: then at most this
/// many batches (num_workers × prefetch_factor) can be told apart, since an
/// epoch's start makes every worker's first batches ready at once, before
/// the timed steps begin (see `bench::window`).
pub fn window_steps(epoch_starts: Option<u32>, steps: Option<u32>) -> Option<u64> {
    (epoch_starts == Some(0))
        .then_some(steps.filter(|s| *s > 0))
        .flatten()
        .map(u64::from)
}

/// The most workers the timed steps can tell apart (see [`window_steps`]).
pub fn window_workers(epoch_starts: Option<u32>, steps: Option<u32>, prefetch: u64) -> Option<u64> {
    window_steps(epoch_starts, steps).map(|s| s / prefetch.max(1))
}

/// CPU kept busy over the timed steps, in cores (CPU seconds per second).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuBusy {
    /// The loader: the workers, or the training process inside `next()` without them.
    pub loader: f64,
    /// The training process, loading excluded.
    pub training: f64,
    /// The whole machine, every process counted.
    pub machine: Option<f64>,
    /// Other processes (the machine less this job); under a launcher the
    /// other ranks count here.
    pub others: Option<f64>,
    /// The machine's cores.
    pub cores: Option<u32>,
}

impl CpuBusy {
    pub fn of(m: &Measurement) -> Option<CpuBusy> {
        let wall = m.wall_s.filter(|&w| w > 0.0)?;
        Some(CpuBusy {
            loader: m.loader_cpu_s? / wall,
            training: m.main_cpu_s? / wall,
            machine: m.machine_busy_s.map(|b| b / wall),
            others: m.others_cores(),
            cores: m.cpu_count,
        })
    }
}

/// What one knob could give at most, by the figures.
#[derive(Clone, Debug, PartialEq)]
pub enum Outlook {
    /// At most this speed-up of samples/sec.
    AtMost(f64),
    /// The CPU or the training process is the limit: at most this (under
    /// [`MIN_PREDICTED_GAIN`]), whatever the setting.
    Saturated(f64),
    /// pin_memory: no CUDA device, nothing crosses to a device.
    NoCuda,
    /// The knob acts on workers and there are none yet.
    NeedsWorkers,
    /// persistent_workers: no epoch began during the measurement, so the
    /// measurement cannot show a difference.
    NoEpochSeen,
    /// prefetch_factor: every step waits alike; a deeper queue does not raise
    /// the workers' rate.
    SteadyWait,
    /// prefetch_factor: epochs so short that every batch is requested at their start.
    ShortEpochs,
    /// num_workers: as many workers as an epoch has batches (this many): one
    /// more would have none to fetch.
    EpochCovered(u64),
    /// num_workers: no epoch start among this many timed steps, and the
    /// workers' first batches already cover them: more workers would have
    /// theirs ready before the timed steps begin, so the steps cannot show them.
    WindowCovered(u64),
    /// Already at the value that helps.
    AlreadySet,
    /// The measurement lacks the figures (contract mode, an older harness).
    Unknown,
}

/// One knob and what the figures say it could give.
#[derive(Clone, Debug, PartialEq)]
pub struct KnobOutlook {
    pub knob: LoaderKnob,
    pub outlook: Outlook,
    /// num_workers: about how many workers keep up with the fastest step.
    pub workers_needed: Option<u64>,
}

/// Everything the incumbent's measurement says, for any agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Evidence {
    /// The incumbent's median samples/sec.
    pub incumbent_sps: f64,
    /// samples/sec of the training step alone, fed one batch from memory.
    pub ceiling_sps: Option<f64>,
    pub data_wait_share: Option<f64>,
    /// The loader's workers as the harness saw them (0 when unknown).
    pub workers: u64,
    /// Cores per rank (what num_workers is counted against).
    pub cores: u64,
    pub cuda: bool,
    pub model: Option<LoaderModel>,
    pub cpu: Option<CpuBusy>,
    pub wait: Option<WaitShape>,
    /// New epochs begun during the timed steps.
    pub epoch_starts: Option<u32>,
    /// `len(loader)`, when the harness read it.
    pub batches_per_epoch: Option<u64>,
    /// Timed steps of the measurement.
    pub steps: Option<u32>,
    pub prefetch_factor: u64,
    pub persistent_workers: bool,
    pub pin_memory: bool,
}

impl Evidence {
    /// The evidence of `m`, the incumbent's latest measurement, whose median
    /// is `incumbent_sps`; `ceiling_sps` comes from the baseline.
    pub fn of(m: &Measurement, incumbent_sps: f64, ceiling_sps: Option<f64>) -> Evidence {
        let workers = m.num_workers().unwrap_or(0);
        let cores = cores_per_rank(m);
        let flag = |k| m.loader_value(k).and_then(|v| v.as_bool()).unwrap_or(false);
        Evidence {
            incumbent_sps,
            ceiling_sps: ceiling_sps.filter(|c| c.is_finite() && *c > 0.0),
            data_wait_share: m.data_wait_share,
            workers,
            cores,
            cuda: m.is_cuda(),
            model: LoaderModel::of(m, workers, cores),
            cpu: CpuBusy::of(m),
            wait: WaitShape::of(m),
            // The window as planned: a slow run's window ended by time
            // stands for the whole stretch a faster one times.
            epoch_starts: m.planned_epoch_starts(),
            batches_per_epoch: m.batches_per_epoch,
            steps: m.planned_steps(),
            prefetch_factor: m
                .loader_value(LoaderKnob::PrefetchFactor)
                .and_then(|v| v.as_u64())
                .unwrap_or(2),
            persistent_workers: flag(LoaderKnob::PersistentWorkers),
            pin_memory: flag(LoaderKnob::PinMemory),
        }
    }

    /// The incumbent's share of the ceiling.
    pub fn share_of_ceiling(&self) -> Option<f64> {
        self.ceiling_sps.map(|c| self.incumbent_sps / c)
    }

    /// No loader setting beats the ceiling: the most any of them can give.
    pub fn ceiling_gain(&self) -> Option<f64> {
        self.ceiling_sps
            .filter(|_| self.incumbent_sps > 0.0)
            .map(|c| c / self.incumbent_sps)
    }

    /// Removing every wait: the step becomes the training step alone.
    pub fn no_wait_gain(&self) -> Option<f64> {
        match (self.model, self.data_wait_share) {
            (Some(m), _) => Some(m.step_s / m.train_s),
            (None, Some(s)) if s < 1.0 => Some(1.0 / (1.0 - s)),
            _ => None,
        }
    }

    /// What a loader setting could give at most: the lower of the loader
    /// model's bound and the ceiling's.
    fn loader_bound(&self) -> Option<f64> {
        min_of(
            self.model.map(|m| m.predicted_gain()),
            min_of(self.ceiling_gain(), self.no_wait_gain()),
        )
    }

    /// What `knob` could give at most, by the figures.
    pub fn outlook(&self, knob: LoaderKnob) -> KnobOutlook {
        let saturated = self.model.filter(|m| m.saturated());
        let bound = |o: Option<f64>| o.map(Outlook::AtMost).unwrap_or(Outlook::Unknown);
        let window = window_workers(self.epoch_starts, self.steps, self.prefetch_factor);
        let mut needed = None;
        let outlook = match knob {
            LoaderKnob::NumWorkers => match (saturated, self.model, self.batches_per_epoch) {
                (Some(m), ..) => Outlook::Saturated(m.predicted_gain()),
                (None, _, Some(b)) if self.workers >= b => Outlook::EpochCovered(b),
                (None, ..) if window.is_some_and(|w| self.workers >= w) => {
                    Outlook::WindowCovered(u64::from(self.steps.unwrap_or(0)))
                }
                (None, Some(m), b) => {
                    // No more workers than an epoch has batches, nor than
                    // the timed steps can tell apart.
                    needed = Some(
                        [b, window]
                            .into_iter()
                            .flatten()
                            .fold(m.workers_needed(), u64::min),
                    );
                    bound(self.loader_bound())
                }
                (None, None, _) => bound(self.loader_bound()),
            },
            LoaderKnob::PinMemory if !self.cuda => Outlook::NoCuda,
            LoaderKnob::PinMemory if self.pin_memory => Outlook::AlreadySet,
            LoaderKnob::PinMemory => bound(self.loader_bound()),
            LoaderKnob::PrefetchFactor | LoaderKnob::PersistentWorkers if self.workers == 0 => {
                Outlook::NeedsWorkers
            }
            LoaderKnob::PrefetchFactor => {
                if let Some(m) = saturated {
                    Outlook::Saturated(m.predicted_gain())
                } else if self.wait.is_some_and(|w| w.steady()) {
                    Outlook::SteadyWait
                } else if short_epochs(
                    self.batches_per_epoch,
                    self.epoch_starts,
                    self.steps,
                    self.workers,
                    self.prefetch_factor,
                ) {
                    Outlook::ShortEpochs
                } else {
                    // A deeper queue absorbs the stalls: at most the wait
                    // above the median step's.
                    let stalls = match (self.model, self.wait) {
                        (Some(m), Some(w)) if m.step_s > w.mean_s - w.median_s => {
                            Some(m.step_s / (m.step_s - (w.mean_s - w.median_s).max(0.0)))
                        }
                        _ => None,
                    };
                    bound(min_of(stalls, self.loader_bound()))
                }
            }
            LoaderKnob::PersistentWorkers if self.persistent_workers => Outlook::AlreadySet,
            LoaderKnob::PersistentWorkers if self.epoch_starts == Some(0) => Outlook::NoEpochSeen,
            LoaderKnob::PersistentWorkers => bound(self.loader_bound()),
            // Cheaper items lower the CPU floor too: only the training step
            // and the ceiling bound it.
            LoaderKnob::Preprocessing => bound(min_of(self.ceiling_gain(), self.no_wait_gain())),
        };
        KnobOutlook {
            knob,
            outlook,
            workers_needed: needed,
        }
    }
}

fn min_of(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A measurement with the harness's loader figures, per step in ms over
    /// 100 timed steps, on 2 cores; `others` is the cores other processes kept busy.
    pub(crate) fn figures(
        nw: u64,
        data_wait_ms: f64,
        train_ms: f64,
        load_cpu_ms: f64,
        main_cpu_ms: f64,
        others: f64,
    ) -> Measurement {
        let steps = 100.0;
        let wall = (data_wait_ms + train_ms) * steps / 1e3;
        let mut m = Measurement {
            samples_per_sec: 100.0,
            data_wait_share: Some(data_wait_ms / (data_wait_ms + train_ms)),
            cpu_count: Some(2),
            device: Some("cpu".into()),
            steps: Some(steps as u32),
            wall_s: Some(wall),
            data_wait_s: Some(data_wait_ms * steps / 1e3),
            train_step_s: Some(train_ms * steps / 1e3),
            loader_cpu_s: Some(load_cpu_ms * steps / 1e3),
            main_cpu_s: Some(main_cpu_ms * steps / 1e3),
            machine_busy_s: Some((load_cpu_ms + main_cpu_ms) * steps / 1e3 + others * wall),
            epoch_starts_timed: Some(0),
            ..Default::default()
        };
        m.loader.insert("num_workers".into(), nw.into());
        m
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn on_cuda_the_model_counts_one_core_of_the_training_process() {
        // No workers, 80 ms of data_wait and 20 ms of GPU step, 10 ms of
        // loading CPU a step; the training process kept 8 cores busy through
        // its 20 ms steps (its thread pool spinning). On CUDA the model
        // counts one core of it, as the CPU limit does: 30 ms a step over 2
        // cores, so no worker count could pass 15 ms a step.
        let mut m = figures(0, 80.0, 20.0, 10.0, 160.0, 0.0);
        m.device = Some("cuda:0".into());
        let model = LoaderModel::of(&m, 0, 2).unwrap();
        assert!(close(model.cpu_s, 0.015), "{model:?}");
        // The same figures on the CPU: all 160 ms count.
        m.device = Some("cpu".into());
        let model = LoaderModel::of(&m, 0, 2).unwrap();
        assert!(close(model.cpu_s, 0.085), "{model:?}");
    }

    #[test]
    fn the_ceiling_bounds_every_knob_and_the_model_bounds_the_loaders() {
        // Two workers, 30 ms of data_wait and 5 ms of step: a worker takes
        // 70 ms a batch, the step could take 5 ms (×7 by the loader model).
        let m = figures(2, 30.0, 5.0, 2.0, 5.5, 0.0);
        let e = Evidence::of(&m, 900.0, Some(3600.0));
        assert_eq!(e.share_of_ceiling(), Some(0.25));
        assert_eq!(e.ceiling_gain(), Some(4.0));
        let model = e.model.unwrap();
        assert!(close(model.batch_latency_s, 0.070), "{model:?}");
        assert!(close(model.best_step_s(), 0.005), "{model:?}");
        // The ceiling (×4) is tighter than the model (×7).
        let nw = e.outlook(LoaderKnob::NumWorkers);
        assert_eq!(nw.outlook, Outlook::AtMost(4.0));
        assert_eq!(nw.workers_needed, Some(18));
        // Without a ceiling the model's bound stands.
        let e = Evidence::of(&m, 900.0, None);
        match e.outlook(LoaderKnob::NumWorkers).outlook {
            Outlook::AtMost(g) => assert!(close(g, 7.0), "{g}"),
            o => panic!("{o:?}"),
        }
        // An epoch of 12 batches: no more than 12 workers needed; with 12
        // already, one more would have none to fetch.
        let mut short = m.clone();
        short.batches_per_epoch = Some(12);
        assert_eq!(
            Evidence::of(&short, 900.0, None)
                .outlook(LoaderKnob::NumWorkers)
                .workers_needed,
            Some(12)
        );
        short.loader.insert("num_workers".into(), 12.into());
        assert_eq!(
            Evidence::of(&short, 900.0, None)
                .outlook(LoaderKnob::NumWorkers)
                .outlook,
            Outlook::EpochCovered(12)
        );
        // No epoch start among 20 timed steps: at most 20 / 2 workers can be
        // told apart (the model alone asks for 18), and 10 already cover them.
        let mut window = m.clone();
        window.steps = Some(20);
        window.epoch_starts_timed = Some(0);
        let needed = Evidence::of(&window, 900.0, None)
            .outlook(LoaderKnob::NumWorkers)
            .workers_needed;
        assert_eq!(needed, Some(10));
        window.loader.insert("num_workers".into(), 10.into());
        assert_eq!(
            Evidence::of(&window, 900.0, None)
                .outlook(LoaderKnob::NumWorkers)
                .outlook,
            Outlook::WindowCovered(20)
        );
        // An epoch start among them: no such bound.
        window.epoch_starts_timed = Some(1);
        assert_ne!(
            Evidence::of(&window, 900.0, None)
                .outlook(LoaderKnob::NumWorkers)
                .outlook,
            Outlook::WindowCovered(20)
        );
        // Preprocessing is bounded by the training step alone: 35 / 5.
        match e.outlook(LoaderKnob::Preprocessing).outlook {
            Outlook::AtMost(g) => assert!(close(g, 7.0), "{g}"),
            o => panic!("{o:?}"),
        }
        let cpu = e.cpu.unwrap();
        assert!(close(cpu.loader, 2.0 / 35.0) && close(cpu.training, 5.5 / 35.0));
        assert!(close(cpu.others.unwrap(), 0.0) && cpu.cores == Some(2));
    }

    #[test]
    fn a_loader_short_of_cpu_is_saturated_for_workers_and_prefetching() {
        // 19 ms of loading CPU and 4.6 of training per step on 2 cores: the
        // step cannot beat 11.8 ms and takes 11.5.
        let e = Evidence::of(&figures(2, 7.0, 4.5, 19.0, 4.6, 0.0), 1000.0, None);
        assert!(e.model.unwrap().cpu_bound());
        assert!(matches!(
            e.outlook(LoaderKnob::NumWorkers).outlook,
            Outlook::Saturated(_)
        ));
        assert!(matches!(
            e.outlook(LoaderKnob::PrefetchFactor).outlook,
            Outlook::Saturated(_)
        ));
    }

    #[test]
    fn knobs_that_cannot_act_say_why() {
        let mut m = figures(0, 30.0, 5.0, 2.0, 5.5, 0.0);
        let e = Evidence::of(&m, 900.0, None);
        assert_eq!(e.outlook(LoaderKnob::PinMemory).outlook, Outlook::NoCuda);
        assert_eq!(
            e.outlook(LoaderKnob::PrefetchFactor).outlook,
            Outlook::NeedsWorkers
        );
        assert_eq!(
            e.outlook(LoaderKnob::PersistentWorkers).outlook,
            Outlook::NeedsWorkers
        );
        m.loader.insert("num_workers".into(), 4.into());
        let e = Evidence::of(&m, 900.0, None);
        assert_eq!(
            e.outlook(LoaderKnob::PersistentWorkers).outlook,
            Outlook::NoEpochSeen
        );
        m.loader.insert("persistent_workers".into(), true.into());
        let e = Evidence::of(&m, 900.0, None);
        assert_eq!(
            e.outlook(LoaderKnob::PersistentWorkers).outlook,
            Outlook::AlreadySet
        );
        m.device = Some("cuda:0".into());
        assert!(matches!(
            Evidence::of(&m, 900.0, None)
                .outlook(LoaderKnob::PinMemory)
                .outlook,
            Outlook::AtMost(_)
        ));
    }

    #[test]
    fn prefetching_is_bounded_by_the_stalls() {
        // 16 workers, data_wait 3 ms a step on average, step 8 ms.
        let mut m = figures(16, 3.0, 5.0, 2.0, 5.5, 0.0);
        m.data_wait_step_median_s = Some(0.0028);
        let e = Evidence::of(&m, 900.0, None);
        assert!(e.wait.unwrap().steady());
        assert_eq!(
            e.outlook(LoaderKnob::PrefetchFactor).outlook,
            Outlook::SteadyWait
        );
        // Stalls: 2.8 ms of the wait lie above the median step's 0.2 ms.
        m.data_wait_step_median_s = Some(0.0002);
        let e = Evidence::of(&m, 900.0, None);
        match e.outlook(LoaderKnob::PrefetchFactor).outlook {
            Outlook::AtMost(g) => assert!(close(g, 8.0 / 5.2), "{g}"),
            o => panic!("{o:?}"),
        }
        // Epochs of 25 batches with 16 workers asking for 2 each: short.
        m.epoch_starts_timed = Some(4);
        assert_eq!(
            Evidence::of(&m, 900.0, None)
                .outlook(LoaderKnob::PrefetchFactor)
                .outlook,
            Outlook::ShortEpochs
        );
        // The epoch's own length, when known, rules: 100 batches are more
        // than 16 workers × 2 ask for at its start.
        m.batches_per_epoch = Some(100);
        assert_ne!(
            Evidence::of(&m, 900.0, None)
                .outlook(LoaderKnob::PrefetchFactor)
                .outlook,
            Outlook::ShortEpochs
        );
        m.batches_per_epoch = Some(32);
        assert_eq!(
            Evidence::of(&m, 900.0, None)
                .outlook(LoaderKnob::PrefetchFactor)
                .outlook,
            Outlook::ShortEpochs
        );
    }

    #[test]
    fn without_loader_figures_only_the_share_and_ceiling_speak() {
        // Contract mode: samples/sec only.
        let m = Measurement {
            samples_per_sec: 500.0,
            ..Default::default()
        };
        let e = Evidence::of(&m, 500.0, None);
        assert_eq!(e.model, None);
        assert_eq!(e.cpu, None);
        assert_eq!(e.outlook(LoaderKnob::NumWorkers).outlook, Outlook::Unknown);
        let e = Evidence::of(&m, 500.0, Some(2000.0));
        assert_eq!(
            e.outlook(LoaderKnob::NumWorkers).outlook,
            Outlook::AtMost(4.0)
        );
    }

    #[test]
    fn ranks_share_the_cores() {
        let mut m = figures(0, 30.0, 5.0, 2.0, 5.5, 0.0);
        m.cpu_count = Some(8);
        assert_eq!(cores_per_rank(&m), 8);
        m.world_size = Some(4);
        assert_eq!(cores_per_rank(&m), 2);
    }
}

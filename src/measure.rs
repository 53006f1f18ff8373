//! What the loop needs from a measurement, as a small trait: one run of the
//! project as it is on disk (in a [`Mode`]), one profiled run, and the guards
//! around the bench's own files (the managed harness, the bench script).
//! [`Bencher`] implements it by running the project; the loop (`run_loop`)
//! only sees `&dyn Measure`, so the keep/revert/reject rules and the stop
//! rule are unit-tested with scripted measurements, without Python.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::bench::{whole, Bencher, Measurement, Mode, Profiled};
use crate::error::BenchError;
use crate::process::Interrupt;

/// A measurement under way (the trait is used as `dyn`, so its futures are boxed).
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, BenchError>> + 'a>>;

/// A whole run of the command under way: its wall seconds, or how it ended
/// without them ([`crate::bench::whole`]).
pub type WholePending<'a> = Pin<Box<dyn Future<Output = Result<f64, whole::Failure>> + 'a>>;

/// Measures the project with whatever files are in place under its root
/// (the caller writes the candidate's or the incumbent's files first).
pub trait Measure: Send + Sync {
    /// One run: samples/sec, data_wait vs train_step, the data fingerprint.
    fn measure<'a>(&'a self, mode: Mode, interrupt: &'a Interrupt) -> Pending<'a, Measurement>;

    /// One profiled run: its figures and the profiler table.
    fn profile<'a>(&'a self, interrupt: &'a Interrupt) -> Pending<'a, Profiled>;

    /// The baseline's first throughput run with the profiler's steps taken
    /// after its window in the same process: the run and the profiled
    /// run's record. `None` where the measure cannot (command mode, across
    /// ranks, scripted measures): the loop takes a profiled run apart.
    fn measure_then_profile<'a>(
        &'a self,
        _interrupt: &'a Interrupt,
    ) -> Option<Pending<'a, (Measurement, Profiled)>> {
        None
    }

    /// The batches a run times (`[bench] steps`), where this measure has them.
    fn steps(&self) -> Option<u32> {
        None
    }

    /// The same measure timing `steps` batches a run (see `bench::window`).
    fn with_steps(&self, _steps: u32) -> Option<Arc<dyn Measure>> {
        None
    }

    /// The same measure with torch's intra-op threads pinned to `threads`:
    /// the numerics guard's calibration run (`numerics::Yardstick`).
    fn with_threads(&self, _threads: u32) -> Option<Arc<dyn Measure>> {
        None
    }

    /// The same measure with each run's timed window ended once it has run
    /// `cap_s` seconds (`Measurement::window_cut`): a candidate's runs, see
    /// `run_loop::measure_pairs`.
    fn with_window_cap(&self, _cap_s: f64) -> Option<Arc<dyn Measure>> {
        None
    }

    /// Command mode: the user's own command is run, and what it writes while
    /// measured is recorded at the baseline.
    fn runs_command(&self) -> bool {
        false
    }

    /// Whether an agent modified the managed harness since it was written.
    fn harness_changed(&self) -> bool {
        false
    }

    /// Writes the managed harness back as tuneloop wrote it.
    fn restore_harness(&self) -> std::io::Result<()> {
        Ok(())
    }

    /// Why runs start as fresh processes though the fork server was on
    /// (`bench::fork`): it could not start, or it died.
    fn fresh_because(&self) -> Option<String> {
        None
    }

    /// Project files that are part of the measurement (the bench script,
    /// the command's script): an agent may not edit them.
    fn script_files(&self) -> Vec<String> {
        Vec::new()
    }

    /// Command mode: the training batches the command runs, once a run has
    /// met its end (see `bench::command::CommandLength`).
    fn command_batches(&self) -> Option<u64> {
        None
    }

    /// The cores other processes keep busy now, and the host's cores:
    /// asked between runs, when the machine may be busy (see
    /// `bench::load::others_now`). `None`: not known (tests script it).
    fn load_now(&self) -> Pending<'_, Option<(f64, f64)>> {
        Box::pin(async { Ok(None) })
    }

    /// `[bench] warmup_steps`, where the measure has one.
    fn warmup(&self) -> Option<u32> {
        None
    }

    /// Command mode: once the command's length cut a run short, which flag
    /// of it runs longer (`bench::command::longer_run_hint`).
    fn length_hint(&self) -> Option<String> {
        None
    }

    /// Command mode: one run of the command as it stands, to its end, as
    /// the user runs it (no instrumentation); `None` without a command.
    fn time_whole<'a>(
        &'a self,
        _limit: Duration,
        _interrupt: &'a Interrupt,
    ) -> Option<WholePending<'a>> {
        None
    }
}

impl Measure for Bencher {
    fn measure<'a>(&'a self, mode: Mode, interrupt: &'a Interrupt) -> Pending<'a, Measurement> {
        Box::pin(Bencher::measure(self, mode, interrupt))
    }

    fn profile<'a>(&'a self, interrupt: &'a Interrupt) -> Pending<'a, Profiled> {
        Box::pin(Bencher::profile(self, interrupt))
    }

    fn measure_then_profile<'a>(
        &'a self,
        interrupt: &'a Interrupt,
    ) -> Option<Pending<'a, (Measurement, Profiled)>> {
        self.profiles_after_window()
            .then(|| Box::pin(Bencher::measure_then_profile(self, interrupt)) as Pending<'a, _>)
    }

    fn steps(&self) -> Option<u32> {
        Some(self.steps)
    }

    fn load_now(&self) -> Pending<'_, Option<(f64, f64)>> {
        Box::pin(async {
            let probe = || crate::bench::load::others_now(Duration::from_secs(1));
            Ok(tokio::task::spawn_blocking(probe).await.ok().flatten())
        })
    }

    fn with_steps(&self, steps: u32) -> Option<Arc<dyn Measure>> {
        Some(Arc::new(self.with_steps_of(steps)))
    }

    fn with_threads(&self, threads: u32) -> Option<Arc<dyn Measure>> {
        // Contract mode runs a command that reports no losses: nothing to calibrate.
        (self.command.is_none()).then(|| -> Arc<dyn Measure> {
            Arc::new(Bencher {
                threads: Some(threads),
                ..self.clone()
            })
        })
    }

    fn with_window_cap(&self, cap_s: f64) -> Option<Arc<dyn Measure>> {
        // Contract mode's command times its own window: nothing to cut.
        (self.command.is_none()).then(|| -> Arc<dyn Measure> {
            Arc::new(Bencher {
                window_cap_s: Some(cap_s),
                ..self.clone()
            })
        })
    }

    fn runs_command(&self) -> bool {
        self.run.is_some()
    }

    fn harness_changed(&self) -> bool {
        Bencher::harness_changed(self)
    }

    fn restore_harness(&self) -> std::io::Result<()> {
        Bencher::restore_harness(self)
    }

    fn fresh_because(&self) -> Option<String> {
        self.fork.gave_up()
    }

    fn script_files(&self) -> Vec<String> {
        Bencher::script_files(self)
    }

    fn command_batches(&self) -> Option<u64> {
        self.known_length().map(|l| u64::from(l.batches))
    }

    fn warmup(&self) -> Option<u32> {
        Some(self.warmup)
    }

    fn length_hint(&self) -> Option<String> {
        Bencher::length_hint(self)
    }

    fn time_whole<'a>(
        &'a self,
        limit: Duration,
        interrupt: &'a Interrupt,
    ) -> Option<WholePending<'a>> {
        self.run
            .is_some()
            .then(|| Box::pin(whole::time_once(self, limit, interrupt)) as WholePending<'a>)
    }
}

/// The measure's runs cut to its command's length, once a run has met the
/// command's end and the configured steps did not fit (see
/// [`crate::bench::command::fitted_steps`]); `None` when they fit, when the
/// length is not known, or when too few steps would be left.
pub fn fit_to_command(m: &dyn Measure) -> Option<crate::bench::command::Fitted> {
    let (batches, configured) = (m.command_batches()?, m.steps()?);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let steps =
        crate::bench::command::fitted_steps(batches, configured, m.warmup().unwrap_or(1), cores)?;
    Some(crate::bench::command::Fitted {
        batches,
        configured,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bencher_gives_a_capped_copy_except_in_contract_mode() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("train.py"), "").unwrap();
        let toml = |bench: &str| {
            format!("[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\n{bench}\n")
        };
        let bencher = |bench: &str| {
            std::fs::write(d.path().join("tuneloop.toml"), toml(bench)).unwrap();
            let ws = crate::config::Workspace::load(d.path()).unwrap();
            Bencher::new(&ws, &d.path().join("harness")).unwrap()
        };
        let managed = bencher("entry = \"train:build\"");
        assert_eq!(managed.window_cap_s, None);
        let capped = managed
            .with_window_cap(6.5)
            .expect("a managed run can be cut");
        // The copy measures the same project (the steps are the bencher's own).
        assert_eq!(capped.steps(), Some(managed.steps));
        // Contract mode's command times its own window: nothing to cut.
        let contract = bencher("command = \"python train.py\"");
        assert!(contract.with_window_cap(6.5).is_none());
    }
}

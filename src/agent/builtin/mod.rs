//! The offline agent: deterministic, needs no network and no account, and is
//! the baseline any LLM agent must beat. It follows the article's order —
//! num_workers, pin_memory (CUDA only), prefetch_factor, persistent_workers —
//! and edits each knob where its value is defined (the DataLoader call's
//! keyword, the default of the flag that feeds it, the config value, the
//! `TrainingArguments` keyword: [`crate::edit::knobs`]), so the user's own
//! command, run again unchanged, gets the new setting.
//!
//! num_workers jumps from 0 to the count the baseline's own figures predict
//! (without workers, data_wait is one batch's loading latency), within the
//! same caps as the climb, when that is clearly past the cores; else it
//! starts at the cores the job may use, as the harness reports
//! them (the affinity mask and the cgroup CPU quota, not the host's count).
//! A jump not kept leads to the core count once before the climb ends. From there the
//! next count comes from the incumbent's own figures ([`LoaderModel`]): how long
//! one worker takes to produce a batch, how long the step takes, and how much
//! CPU loading and training use against the cores left free (other processes
//! counted). The climb goes on while data_wait is a fifth of the step, or
//! above the stop line when those figures still promise ×1.15 or more. Items that wait on storage get, in one step, about as many workers
//! as it takes to keep up with the step, far past the core count; a loader whose
//! CPU is the limit gets no more workers, and neither a prefetch_factor turn,
//! which cannot create CPU either. A count within the headroom of the present
//! one is not worth a turn, and neither is one past what the timed steps can
//! tell apart: with no epoch start among them, workers × prefetch_factor at
//! least the timed steps could serve them all from an epoch's first burst
//! (`window_cap`). prefetch_factor is tried only when the wait comes as
//! stalls (the median step waits far less than the mean), not when every step
//! waits alike (the workers' rate is the limit). persistent_workers is tried, before more
//! workers, when the measurement saw epochs restart the workers, and not at all
//! when it saw none (the measurement could not show a difference); reverted
//! at a few workers, it is tried once more after the count has doubled (each
//! epoch restarts them all, so the saving grows with their number). Without those
//! figures (contract mode, an older harness) the count doubles while data_wait
//! stays large. The first revert ends the climb, unless it points up (its
//! median reached 1 + min_gain, its interval open): then the next count is
//! tried before giving up. `max_consecutive_reverts` turns not kept in a row
//! end the climb too, and then only the cheaper neighbours of the incumbent
//! are proposed (`TurnContext::only_cheaper`). Everything it knows comes from
//! the measurements and the history rows, so a resumed run proposes exactly
//! what the interrupted one would have.

use std::path::Path;

use crate::bench::Measurement;
use crate::config::{DecisionPolicy, Workspace};
use crate::edit::{self, CallSite, KnobSite, SiteKind};
use crate::knob::LoaderKnob;
use crate::turn::{AgentInfo, Decision, TurnRow};

use super::evidence;
/// The loader's arithmetic lives in [`super::evidence`], shared with the Claude agent's prompt.
pub use super::evidence::LoaderModel;
use super::{cheaper, threaded, AgentReport, TurnContext};
use crate::bench::memory::{self, FreeMemory};

mod persistent;
mod pin_memory;
mod prefetch;
mod workers;

/// Climb num_workers while data_wait is at least this share of the step.
/// Between `stop_when_data_wait_below` and this share the climb goes on only
/// when the incumbent's figures promise a gain worth a turn (the model is not
/// saturated): at 19% data_wait five waiting workers can still leave ×1.2 on
/// the table, which a whole epoch (and the user's command) shows.
const CLIMB_WHILE_DATA_WAIT_ABOVE: f64 = 0.2;
/// Items wait (on storage, a network) rather than compute when the loader's
/// CPU per batch is under this share of a worker's wall time per batch.
const ITEMS_WAIT_BELOW: f64 = 0.25;
/// More workers may take at most this share of the machine's free memory.
const MEMORY_HEADROOM: f64 = 0.5;
/// Never more workers than this, whatever memory allows.
const MAX_WORKERS: u64 = 256;

/// The most workers worth asking for. Normally 8 per core (at least 8, at
/// most 64). Past that only when the figures say items wait (a worker's CPU
/// per batch far below its wall time per batch), the CPU limit does not bind
/// (the cores could feed a faster step), and memory allows: each worker's
/// measured memory (PSS, else RSS) against half the free memory (the
/// machine's, or under the job's cgroup limit when that is lower).
/// Known memory also bounds the count below 8 per core, never below `nw`,
/// and so do the batches an epoch holds: a worker past them has none to fetch.
pub fn worker_cap(cpus: u64, nw: u64, m: &Measurement, model: Option<LoaderModel>) -> u64 {
    let cap = worker_cap_before_epoch(cpus, nw, m, model);
    [epoch_cap(nw, m), window_cap(nw, m), fit_cap(nw, m)]
        .into_iter()
        .flatten()
        .fold(cap, u64::min)
}

/// The workers the timed steps can tell apart when none of them starts an
/// epoch (never below `nw`). At an epoch's start every worker delivers its
/// first batches at once; with `num_workers × prefetch_factor` at least the
/// timed steps, those steps can all be served from batches made ready
/// before they began, and they show the step's speed, not the loader's
/// (while the epoch start that paid for them goes unmeasured). More timed
/// steps (`[bench] steps`), or an epoch start within them, measure further.
fn window_cap(nw: u64, m: &Measurement) -> Option<u64> {
    evidence::window_workers(m.planned_epoch_starts(), m.planned_steps(), prefetch_of(m))
        .map(|w| w.max(nw))
}

fn window_steps(m: &Measurement) -> Option<u64> {
    evidence::window_steps(m.planned_epoch_starts(), m.planned_steps())
}

/// The workers a measurement can warm up within the command's batches, once
/// a run has met the command's end (a short `--epochs 1`): their first
/// prefetch round must be done before the timed steps
/// ([`crate::bench::command::workers_that_fit`]). Never below `nw`.
fn fit_cap(nw: u64, m: &Measurement) -> Option<u64> {
    let fit = crate::bench::command::workers_that_fit(
        m.command_batches?,
        u64::from(m.planned_steps()?),
        prefetch_of(m),
        1,
    )?;
    Some(fit.max(nw))
}

fn prefetch_of(m: &Measurement) -> u64 {
    m.loader_value(LoaderKnob::PrefetchFactor)
        .and_then(|v| v.as_u64())
        .unwrap_or(2)
}

/// The batches one epoch holds, as a bound on workers (never below `nw`).
fn epoch_cap(nw: u64, m: &Measurement) -> Option<u64> {
    m.batches_per_epoch.filter(|b| *b > 0).map(|b| b.max(nw))
}

fn worker_cap_before_epoch(cpus: u64, nw: u64, m: &Measurement, model: Option<LoaderModel>) -> u64 {
    let base = (cpus * 8).clamp(8, 64);
    let memory_cap = memory_cap(nw, m).map(|(cap, _)| cap);
    let waits_not_cpu = model.is_some_and(|model| {
        let steps = m.steps.filter(|&s| s > 0).map(f64::from);
        let cpu_per_batch = m.loader_cpu_s.zip(steps).map(|(c, s)| c / s);
        // The CPU limit does not bind: the cores could feed a step clearly
        // faster than this one. (Not "the CPU is not the floor at all": with
        // 16 waiting workers on 2 cores, 1.4 cores busy, the CPU is the floor
        // of the fastest step and still ×1.4 away; workers_needed asks for
        // no more than keep up with that floor.)
        cpu_per_batch.is_some_and(|c| c < ITEMS_WAIT_BELOW * model.batch_latency_s)
            && model.step_s >= evidence::MIN_PREDICTED_GAIN * model.cpu_s
    });
    match memory_cap {
        Some(mem) if waits_not_cpu => mem.min(MAX_WORKERS).max(base.min(mem.max(nw))),
        Some(mem) => base.min(mem.max(nw)),
        None => base,
    }
}

/// The workers memory allows: `nw` and as many more as half the free
/// memory holds at the measured memory per worker; with the free memory's figure.
fn memory_cap(nw: u64, m: &Measurement) -> Option<(u64, FreeMemory)> {
    let per = m.memory_per_worker().filter(|p| *p > 0.0)?;
    let free = memory::free_memory(m)?;
    Some((
        nw + (free.bytes as f64 * MEMORY_HEADROOM / per).floor() as u64,
        free,
    ))
}

pub struct BuiltinAgent {
    /// The editable file holding the measured loader (from the entry's module).
    preferred_file: Option<String>,
}

/// One knob setting the agent would write.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub knob: LoaderKnob,
    pub value: String,
    pub why: String,
}

impl BuiltinAgent {
    pub fn new(ws: &Workspace) -> BuiltinAgent {
        let preferred_file = ws.file.bench.entry.as_ref().and_then(|e| {
            let module = e.split(':').next()?;
            let f = format!("{}.py", module.replace('.', "/"));
            ws.file.project.editable.contains(&f).then_some(f)
        });
        // Command mode: the script the command runs.
        let preferred_file = preferred_file.or_else(|| {
            let run = ws.file.bench.run.as_ref()?;
            let f = crate::bench::command::script_of(run, &ws.project_root)?;
            ws.file.project.editable.contains(&f).then_some(f)
        });
        BuiltinAgent { preferred_file }
    }

    /// The editable file holding the measured loader, where compute
    /// changes go first.
    pub fn preferred_file(&self) -> Option<&str> {
        self.preferred_file.as_deref()
    }

    pub fn propose(&mut self, ctx: &TurnContext<'_>) -> AgentReport {
        let started = std::time::Instant::now();
        let mut report = AgentReport {
            info: AgentInfo {
                backend: "builtin".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        // The loader settled (or never the bottleneck): the step's turn.
        if super::compute_turn::loader_settled(ctx) {
            if let Some(r) = super::compute_turn::propose(ctx, self.preferred_file.as_deref(), None)
            {
                return r;
            }
        }
        let site = match self.find_site(
            ctx.project_root,
            &ctx.ws.file.project.editable,
            ctx.incumbent.call_site.as_deref(),
        ) {
            Ok(t) => t,
            Err(e) => {
                report.failure = Some(e.to_string());
                return report;
            }
        };
        // The knobs' values where they are defined (a flag default, a config
        // value), not the expressions written in the call.
        let call = site.effective_call();
        // A knob whose value is computed has no place to write a setting,
        // and one defined in a file outside the editable ones cannot change.
        let not_editable = site.not_editable(&ctx.ws.file.project.editable);
        // The structural turn needs a dataset class to add the method to.
        let dataset_file = self.find_dataset(ctx.project_root, &ctx.ws.file.project.editable);
        let knobs: Vec<LoaderKnob> = ctx
            .policy
            .loop_
            .loader_knobs()
            .into_iter()
            .filter(|k| !not_editable.iter().any(|o| k.is(&o.knob)))
            .filter(|k| *k != LoaderKnob::Preprocessing || dataset_file.is_some())
            .collect();
        let next = match ctx.only_cheaper {
            true => cheaper_proposal(
                &call,
                ctx.incumbent,
                ctx.history,
                &knobs,
                ctx.policy.decision.min_gain,
            ),
            false => next_proposal_for(
                ctx.incumbent,
                &call,
                ctx.history,
                &knobs,
                &ctx.policy.decision,
            ),
        };
        let Some(p) = next else {
            // The loader's candidates are exhausted: the step's turn. With
            // data_wait still large the loader is not settled: say why it
            // gets no turn (a knob no turn can change, nothing left to try).
            let why = (!super::compute_turn::loader_settled(ctx))
                .then(|| loader_left_why(ctx.incumbent, &not_editable));
            if let Some(r) =
                super::compute_turn::propose(ctx, self.preferred_file.as_deref(), why.as_deref())
            {
                return r;
            }
            report.exhausted = true;
            // Which limit binds says whether anything is left on the table.
            report.summary = format!("no candidates left; {}", ctx.limits().summary());
            // The command's own length bounded the workers (more tightly
            // than the timed steps do): say so.
            let m = ctx.incumbent;
            let nw = m.num_workers().unwrap_or(0);
            if let (Some(fit), Some(batches)) = (fit_cap(nw, m), m.command_batches) {
                if window_cap(nw, m).is_none_or(|w| fit < w) {
                    report.summary.push_str(&format!(
                        "; the command's {batches} training batches fit the first batches of no more than {fit} workers before the {} timed steps",
                        m.planned_steps().unwrap_or(0)
                    ));
                }
            }
            for o in not_editable {
                report.summary.push_str(&format!("; {}", o.why));
            }
            return report;
        };
        if p.knob == LoaderKnob::Preprocessing {
            self.add_threads(ctx, dataset_file, &p, &mut report);
            report.info.exit_code = Some(if report.failure.is_some() { 1 } else { 0 });
            report.info.duration_ms = started.elapsed().as_millis() as u64;
            return report;
        }
        let read = edit::knobs::read_under(ctx.project_root);
        // "(default)" drops the setting (a cheaper neighbour).
        let written = if p.value == "(default)" {
            drop_knob(&site, p.knob, &read).map_err(|e| e.to_string())
        } else {
            edit::knobs::set_knob(&site, p.knob.name(), &p.value, &read).map_err(|e| e.to_string())
        };
        match written {
            Ok((file, new_src)) => {
                if let Err(e) =
                    crate::store::write_atomic(&ctx.project_root.join(&file), new_src.as_bytes())
                {
                    report.failure = Some(format!("cannot write {file}: {e}"));
                } else {
                    let origin = site.origin(p.knob.name());
                    report.summary = match origin.map(|o| &o.source) {
                        Some(edit::Source::Keyword) | None => format!(
                            "set {}={} in {}:{} ({})",
                            p.knob, p.value, site.file, site.line, p.why
                        ),
                        Some(edit::Source::Spread {
                            holder, file, line, ..
                        }) => format!(
                            "set \"{}\": {} in {holder} ({file}:{line}) ({})",
                            p.knob, p.value, p.why
                        ),
                        Some(_) => format!(
                            "set {}={} where it is defined: {} ({})",
                            p.knob,
                            p.value,
                            origin.map(|o| o.describe(&site.at())).unwrap_or_default(),
                            p.why
                        ),
                    };
                }
            }
            Err(e) => report.failure = Some(e),
        }
        report.info.exit_code = Some(if report.failure.is_some() { 1 } else { 0 });
        report.info.duration_ms = started.elapsed().as_millis() as u64;
        report
    }

    /// The editable file holding the dataset class the structural turn can
    /// change (a `__getitem__` and no `__getitems__` yet), and its text.
    fn find_dataset(&self, root: &Path, editable: &[String]) -> Option<(String, String)> {
        let mut order: Vec<&String> = self.preferred_file.iter().collect();
        order.extend(
            editable
                .iter()
                .filter(|f| Some(*f) != self.preferred_file.as_ref()),
        );
        order
            .into_iter()
            .filter(|f| f.ends_with(".py"))
            .find_map(|f| {
                let src = std::fs::read_to_string(root.join(f)).ok()?;
                threaded::insertion_point(&src).map(|_| (f.clone(), src))
            })
    }

    /// The structural turn: a threaded `__getitems__` in the dataset class.
    fn add_threads(
        &self,
        ctx: &TurnContext<'_>,
        dataset_file: Option<(String, String)>,
        p: &Proposal,
        report: &mut AgentReport,
    ) {
        let Some((file, src)) = dataset_file else {
            report.failure =
                Some("no dataset class with __getitem__ to add __getitems__ to".into());
            return;
        };
        let threads: u32 = p.value.parse().unwrap_or(4);
        let Some(new_src) = threaded::add_getitems(&src, threads) else {
            report.failure = Some(format!("{file}: no place for __getitems__"));
            return;
        };
        match crate::store::write_atomic(&ctx.project_root.join(&file), new_src.as_bytes()) {
            Ok(()) => {
                report.summary = format!(
                    "added __getitems__ with {threads} threads to the dataset in {file} ({})",
                    p.why
                )
            }
            Err(e) => report.failure = Some(format!("cannot write {file}: {e}")),
        }
    }

    /// The call whose knobs to tune: the DataLoader call the measurement saw
    /// build the training loader (`call_site`); when that call is outside
    /// the editable files (inside transformers), a `TrainingArguments` call;
    /// otherwise the first DataLoader call of the entry's module, else of any
    /// editable file (a Lightning `train_dataloader()` first), else a
    /// `TrainingArguments` call.
    fn find_site(
        &self,
        root: &Path,
        editable: &[String],
        call_site: Option<&str>,
    ) -> Result<KnobSite, SiteError> {
        measured_knob_site(root, editable, self.preferred_file.as_ref(), call_site)
    }
}

/// Why the loader gets no turn while its data_wait is still large: the
/// knobs no turn can change (each with why), else its candidates are spent.
fn loader_left_why(m: &Measurement, not_editable: &[edit::knobs::NotEditable]) -> String {
    let wait = m
        .data_wait_share
        .map(|s| format!("data_wait still {:.0}% of the step", s * 100.0))
        .unwrap_or_else(|| "data_wait still large".into());
    if not_editable.is_empty() {
        return format!("the loader's candidates are exhausted, {wait}");
    }
    let knobs: Vec<String> = not_editable.iter().map(|n| n.why.clone()).collect();
    format!(
        "the loader has nothing editable left, {wait}: {}",
        knobs.join("; ")
    )
}

/// Why no call with knobs to tune was found; its text is the turn's
/// recorded failure.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("cannot read {file}: {err}")]
    Read {
        file: String,
        #[source]
        err: std::io::Error,
    },
    #[error("cannot parse {file}: {err}")]
    Parse {
        file: String,
        #[source]
        err: edit::ScanError,
    },
    #[error("no DataLoader call found in the editable files")]
    NoLoader,
}

/// The call whose knobs to tune (see [`BuiltinAgent::find_site`]), also what
/// the report names as where the measured loader's knobs are set.
pub fn measured_knob_site(
    root: &Path,
    editable: &[String],
    preferred_file: Option<&String>,
    call_site: Option<&str>,
) -> Result<KnobSite, SiteError> {
    let mut order: Vec<&String> = Vec::new();
    if let Some(p) = preferred_file {
        order.push(p);
    }
    order.extend(editable.iter().filter(|f| Some(*f) != preferred_file));
    let read = edit::knobs::read_under(root);
    let mut all: Vec<KnobSite> = Vec::new();
    for f in order {
        if !f.ends_with(".py") {
            continue;
        }
        let src = std::fs::read_to_string(root.join(f)).map_err(|err| SiteError::Read {
            file: f.clone(),
            err,
        })?;
        all.extend(
            edit::knob_sites(f, &src, &read).map_err(|err| SiteError::Parse {
                file: f.clone(),
                err,
            })?,
        );
    }
    let loader = |s: &&KnobSite| s.kind == SiteKind::DataLoader;
    let training_args = |s: &&KnobSite| s.kind == SiteKind::TrainingArguments;
    let measured = call_site
        .and_then(|c| c.rsplit_once(':'))
        .and_then(|(f, l)| Some((f, l.parse::<usize>().ok()?)));
    if let Some((file, line)) = measured {
        if let Some(s) = all.iter().filter(loader).find(|s| s.matches(file, line)) {
            return Ok(s.clone());
        }
        if let Some(s) = all.iter().find(training_args) {
            return Ok(s.clone());
        }
    }
    all.iter()
        .filter(loader)
        .find(|s| s.function.as_deref() == Some("train_dataloader"))
        .or_else(|| all.iter().find(loader))
        .or_else(|| all.iter().find(training_args))
        .cloned()
        .ok_or(SiteError::NoLoader)
}

/// Why a knob could not be dropped back to its default; its text is the
/// turn's recorded failure.
#[derive(Debug, thiserror::Error)]
enum DropError {
    #[error("cannot read {0}")]
    Unreadable(String),
    #[error("cannot edit {at}: {err}")]
    Rewrite {
        at: String,
        #[source]
        err: edit::RewriteError,
    },
    /// Writing the default where the value is defined failed (the editor's words).
    #[error(transparent)]
    Set(#[from] edit::knobs::SetKnobError),
}

/// Drops a knob back to the library's default: the keyword removed where the
/// call itself holds it, else the default written where the value is defined.
fn drop_knob(
    site: &KnobSite,
    knob: LoaderKnob,
    read: edit::knobs::ReadFile<'_>,
) -> Result<(String, String), DropError> {
    if let (Some(o), Some(call), SiteKind::DataLoader) =
        (site.origin(knob.name()), &site.call, site.kind)
    {
        if matches!(o.source, edit::Source::Keyword) {
            let src = read(&site.file).ok_or_else(|| DropError::Unreadable(site.file.clone()))?;
            return edit::set_kwarg(&src, call, knob.name(), None)
                .map(|out| (site.file.clone(), out))
                .map_err(|err| DropError::Rewrite { at: site.at(), err });
        }
    }
    let default = match knob {
        LoaderKnob::NumWorkers => "0",
        LoaderKnob::PrefetchFactor => "2",
        _ => "False",
    };
    edit::knobs::set_knob(site, knob.name(), default, read).map_err(DropError::Set)
}

/// One history row's change, read back from its one-line form
/// ("num_workers (default) → 4": knob, value before, value written).
pub(super) struct Tried {
    pub knob: String,
    pub from: String,
    pub to: String,
    pub decision: Decision,
    /// The measured ratio and its interval, when the change was measured.
    pub ratio: Option<(f64, [f64; 2])>,
    /// Its measurement failed because the command ended first (too few
    /// steps): a bound on the count, not a verdict on it.
    pub did_not_fit: bool,
}

impl Tried {
    /// Whether the row changed this knob.
    pub fn is(&self, knob: LoaderKnob) -> bool {
        knob.is(&self.knob)
    }
}

fn tried(history: &[TurnRow]) -> Vec<Tried> {
    history
        .iter()
        .filter_map(|r| {
            let c = cheaper::Change::parse(&r.change)?;
            Some(Tried {
                knob: c.knob,
                from: c.from,
                to: c.to,
                decision: r.decision,
                ratio: r.ratio.zip(r.ratio_ci),
                did_not_fit: r.decision == Decision::Failed && r.reason.contains("too_few_steps"),
            })
        })
        .collect()
}

/// Below the fewest workers that did not fit the command's batches. Where
/// the command's length is not known (a resumed run), half way there from
/// `nw`; `fit_cap` bounds it once the length is known.
fn unfit_cap(tried: &[Tried], nw: u64, m: &Measurement) -> u64 {
    let Some(unfit) = tried
        .iter()
        .filter(|t| t.is(LoaderKnob::NumWorkers) && t.did_not_fit)
        .filter_map(|t| t.to.parse::<u64>().ok())
        .min()
    else {
        return u64::MAX;
    };
    match m.command_batches {
        Some(_) => unfit.saturating_sub(1).max(nw),
        None => (nw + (unfit.saturating_sub(nw)) / 2).max(nw),
    }
}

fn current_value(site: &CallSite, m: &Measurement, knob: LoaderKnob) -> Option<String> {
    if let Some(v) = m.loader_value(knob) {
        return Some(match v {
            serde_json::Value::Bool(true) => "True".into(),
            serde_json::Value::Bool(false) => "False".into(),
            serde_json::Value::Null => return None,
            other => other.to_string(),
        });
    }
    site.kwargs
        .get(knob.name())
        .and_then(|v| v.as_str())
        .map(|s| s.to_string())
}

/// The next setting to try, or `None` when the candidates are exhausted,
/// under the default decision policy with this data_wait stop line.
pub fn next_proposal(
    incumbent: &Measurement,
    site: &CallSite,
    history: &[TurnRow],
    knobs: &[LoaderKnob],
    stop_when_data_wait_below: f64,
) -> Option<Proposal> {
    let decision = DecisionPolicy {
        stop_when_data_wait_below,
        ..DecisionPolicy::default()
    };
    next_proposal_for(incumbent, site, history, knobs, &decision)
}

/// The first cheaper neighbour of the incumbent not tried yet, among the
/// policy's knobs; "(default)" as the value drops the argument.
fn cheaper_proposal(
    site: &CallSite,
    incumbent: &Measurement,
    history: &[TurnRow],
    knobs: &[LoaderKnob],
    min_gain: f64,
) -> Option<Proposal> {
    let current = |knob: LoaderKnob| {
        let written = site
            .kwargs
            .get(knob.name())
            .and_then(|v| v.as_str())
            .map(str::to_string);
        match knob {
            LoaderKnob::NumWorkers => current_value(site, incumbent, knob).or(written),
            _ => written,
        }
        .unwrap_or_else(|| "(default)".into())
    };
    let ranks = incumbent.world_size.unwrap_or(1).max(1) as u64;
    let cpus = ((incumbent.job_cores().unwrap_or(1.0) / ranks as f64).round() as u64).max(1);
    // The step's time per sample now (the loader's floor from no workers).
    let step_s = incumbent
        .train_step_s
        .zip(incumbent.samples)
        .filter(|(_, n)| *n > 0)
        .map(|(t, n)| t / n as f64);
    cheaper::neighbours(history, current, cpus, min_gain, step_s)
        .into_iter()
        .find(|n| knobs.contains(&n.knob))
        .map(|n| Proposal {
            knob: n.knob,
            value: n.value.unwrap_or_else(|| "(default)".into()),
            why: n.why,
        })
}

/// What every loader knob's rule reads: the incumbent's measurement and
/// call site, the policy's knobs and decision rule, and the history's
/// changes read back.
pub(super) struct LoaderState<'a> {
    pub incumbent: &'a Measurement,
    pub site: &'a CallSite,
    pub knobs: &'a [LoaderKnob],
    pub decision: &'a DecisionPolicy,
    pub tried: Vec<Tried>,
    /// The cores one rank's loader may use: the job's (affinity mask, cgroup
    /// quota, not the host's), shared among the ranks.
    pub cpus: u64,
    /// data_wait's share of the step (1 when not measured).
    pub share: f64,
    /// num_workers now.
    pub nw: u64,
    pub model: Option<LoaderModel>,
}

impl<'a> LoaderState<'a> {
    pub fn of(
        incumbent: &'a Measurement,
        site: &'a CallSite,
        history: &[TurnRow],
        knobs: &'a [LoaderKnob],
        decision: &'a DecisionPolicy,
    ) -> LoaderState<'a> {
        let ranks = incumbent.world_size.unwrap_or(1).max(1) as u64;
        let cpus = ((incumbent.job_cores().unwrap_or(1.0) / ranks as f64).round() as u64).max(1);
        let nw: u64 = current_value(site, incumbent, LoaderKnob::NumWorkers)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        LoaderState {
            incumbent,
            site,
            knobs,
            decision,
            tried: tried(history),
            cpus,
            share: incumbent.data_wait_share.unwrap_or(1.0),
            nw,
            model: LoaderModel::of(incumbent, nw, cpus),
        }
    }

    /// The policy lets the agent change this knob.
    pub fn allows(&self, knob: LoaderKnob) -> bool {
        self.knobs.contains(&knob)
    }

    /// A turn already wrote this value of this knob.
    pub fn was_tried(&self, knob: LoaderKnob, value: &str) -> bool {
        self.tried.iter().any(|t| t.is(knob) && t.to == value)
    }

    /// The knob's value now, as the loader saw it or the call writes it.
    pub fn current(&self, knob: LoaderKnob) -> Option<String> {
        current_value(self.site, self.incumbent, knob)
    }
}

/// The next setting to try under the run's decision policy (its min_gain
/// tells a reverted step that still points up from one that does not): the
/// knobs' rules in the article's order, each in its own module.
pub fn next_proposal_for(
    incumbent: &Measurement,
    site: &CallSite,
    history: &[TurnRow],
    knobs: &[LoaderKnob],
    decision: &DecisionPolicy,
) -> Option<Proposal> {
    // Once a cheaper neighbour has been tried, the climb is over: only the
    // remaining cheaper neighbours are left (never another step up).
    if history.iter().any(|r| cheaper::is_cheaper(&r.change)) {
        return cheaper_proposal(site, incumbent, history, knobs, decision.min_gain);
    }
    let s = LoaderState::of(incumbent, site, history, knobs, decision);
    persistent::before_workers(&s)
        .or_else(|| workers::proposal(&s))
        .or_else(|| pin_memory::proposal(&s))
        .or_else(|| prefetch::proposal(&s))
        .or_else(|| persistent::after_prefetch(&s))
        // The knobs are exhausted: overlap the items' waits inside each
        // worker (one structural turn), then the cheapest setting that is as fast.
        .or_else(|| threads_proposal(incumbent, history, knobs, s.model))
        .or_else(|| cheaper_proposal(site, incumbent, history, knobs, decision.min_gain))
}

/// The structural turn, when the policy allows preprocessing changes, the
/// figures say items mostly wait (a batch's CPU far below a worker's wall
/// time per batch), and it was not tried yet: a threaded `__getitems__`
/// sized from that wait.
fn threads_proposal(
    incumbent: &Measurement,
    history: &[TurnRow],
    knobs: &[LoaderKnob],
    model: Option<LoaderModel>,
) -> Option<Proposal> {
    if !knobs.contains(&LoaderKnob::Preprocessing)
        || history.iter().any(|r| r.change.contains("__getitems__"))
    {
        return None;
    }
    let model = model?;
    let steps = f64::from(incumbent.steps.filter(|&s| s > 0)?);
    let cpu_per_batch = incumbent.loader_cpu_s? / steps;
    if cpu_per_batch >= ITEMS_WAIT_BELOW * model.batch_latency_s {
        return None;
    }
    let threads = threaded::threads_for(
        model.batch_latency_s,
        cpu_per_batch,
        incumbent.batch_size.unwrap_or(16),
    );
    Some(Proposal {
        knob: LoaderKnob::Preprocessing,
        value: threads.to_string(),
        why: format!(
            "items mostly wait: a worker takes {:.0} ms per batch for {:.1} ms of CPU, so {threads} threads per worker overlap the waits",
            model.batch_latency_s * 1e3,
            cpu_per_batch * 1e3
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn site(src: &str) -> CallSite {
        edit::scan_source("t.py", src).unwrap().remove(0)
    }

    pub(super) fn meas(nw: u64, share: f64, cuda: bool) -> Measurement {
        let mut m = Measurement {
            samples_per_sec: 100.0,
            data_wait_share: Some(share),
            cpu_count: Some(2),
            device: Some(if cuda { "cuda:0" } else { "cpu" }.into()),
            ..Default::default()
        };
        m.loader.insert("num_workers".into(), nw.into());
        m
    }

    pub(super) fn row(turn: u32, change: &str, d: Decision) -> TurnRow {
        TurnRow {
            turn,
            change: change.into(),
            file: None,
            before_sps: None,
            after_sps: None,
            ratio: None,
            ratio_ci: None,
            runs: 0,
            decision: d,
            reason: String::new(),
            agent: AgentInfo::default(),
            candidate_samples: vec![],
            incumbent_samples: vec![],
            data_wait_share: None,
            confirmation: None,
        }
    }

    /// Nothing left to climb: no proposal, or only a cheaper neighbour
    /// (fewer workers, a kept setting dropped).
    fn assert_climb_over(p: Option<Proposal>) {
        if let Some(p) = p {
            let change = format!("{} 99 → {}", p.knob.name(), p.value);
            assert!(
                p.why.starts_with("cheaper neighbour")
                    && (p.knob.name() != "num_workers" || cheaper::is_cheaper(&change)),
                "{p:?}"
            );
        }
    }

    #[test]
    fn after_the_climb_the_cheaper_neighbours_and_never_another_step_up() {
        // 2 → 16 kept on 2 cores, nothing left to climb: a quarter fewer, 13.
        let s16 = site("DataLoader(ds, num_workers=16, persistent_workers=True)\n");
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "persistent_workers (default) → True", Decision::Kept),
            row(3, "num_workers 2 → 16", Decision::Kept),
        ];
        let mut m = figures(16, 3.0, 5.0, 2.0, 5.5, 0.0);
        m.epoch_starts_timed = Some(4);
        let p = next_proposal(&m, &s16, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "13"),
            "{}",
            p.why
        );
        // 13 kept as cheaper: even if the figures wanted more workers now,
        // no step up — the next cheaper neighbour (7, halfway back to 2).
        let s13 = site("DataLoader(ds, num_workers=13, persistent_workers=True)\n");
        let mut h2 = h.clone();
        h2.push(row(4, "num_workers 16 → 13", Decision::KeptCheaper));
        let wants_more = figures(13, 30.0, 5.0, 2.0, 5.5, 0.0);
        let p = next_proposal(&wants_more, &s13, &h2, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "7"),
            "{}",
            p.why
        );
        // 7 slower: halfway between, 10 (it saves 3 of 13 workers).
        h2.push(row(5, "num_workers 13 → 7", Decision::Reverted));
        let p = next_proposal(&wants_more, &s13, &h2, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "10"),
            "{}",
            p.why
        );
        // 10 slower too: 11 would save under a quarter; persistent dropped.
        h2.push(row(6, "num_workers 13 → 10", Decision::Reverted));
        let p = next_proposal(&wants_more, &s13, &h2, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("persistent_workers", "(default)"),
            "{}",
            p.why
        );
        // Only the policy's knobs.
        assert_eq!(
            next_proposal(&wants_more, &s13, &h2, &[LoaderKnob::NumWorkers], 0.1),
            None
        );
    }

    const ALL: [LoaderKnob; 4] = [
        LoaderKnob::NumWorkers,
        LoaderKnob::PinMemory,
        LoaderKnob::PrefetchFactor,
        LoaderKnob::PersistentWorkers,
    ];

    #[test]
    fn starts_num_workers_at_the_core_count() {
        let s = site("DataLoader(ds, batch_size=8)\n");
        let p = next_proposal(&meas(0, 0.9, false), &s, &[], &ALL, 0.1).unwrap();
        assert_eq!((p.knob.name(), p.value.as_str()), ("num_workers", "2"));
    }

    #[test]
    fn doubles_while_kept_and_waiting_then_moves_on_after_a_revert() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers (default) → 2", Decision::Kept)];
        let p = next_proposal(&meas(2, 0.6, false), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(p.value, "4");
        let s4 = site("DataLoader(ds, num_workers=4)\n");
        let h2 = [
            h.clone(),
            vec![row(2, "num_workers 4 → 8", Decision::Reverted)],
        ]
        .concat();
        let p = next_proposal(&meas(4, 0.6, false), &s4, &h2, &ALL, 0.1).unwrap();
        assert_eq!(p.knob.name(), "prefetch_factor");
    }

    #[test]
    fn ranks_share_the_cores() {
        let s = site("DataLoader(ds)\n");
        let mut m = meas(0, 0.9, false);
        m.cpu_count = Some(8);
        assert_eq!(next_proposal(&m, &s, &[], &ALL, 0.1).unwrap().value, "8");
        m.world_size = Some(4);
        assert_eq!(next_proposal(&m, &s, &[], &ALL, 0.1).unwrap().value, "2");
    }

    #[test]
    fn workers_follow_the_cores_the_job_may_use_not_the_hosts() {
        // A job given 8 of 32 cores (taskset, a Slurm allocation).
        let s = site("DataLoader(ds)\n");
        let mut m = meas(0, 0.9, false);
        m.cpu_count = Some(32);
        assert_eq!(next_proposal(&m, &s, &[], &ALL, 0.1).unwrap().value, "32");
        m.usable_cores = Some(8.0);
        m.cores_limited_by = Some("affinity".into());
        let p = next_proposal(&m, &s, &[], &ALL, 0.1).unwrap();
        assert_eq!(p.value, "8");
        assert!(p.why.contains("affinity mask"), "{}", p.why);
        // A quota of 2.5 cores: rounded, never below one.
        m.usable_cores = Some(2.5);
        m.cores_limited_by = Some("cgroup_quota".into());
        let p = next_proposal(&m, &s, &[], &ALL, 0.1).unwrap();
        assert_eq!(p.value, "3");
        assert!(p.why.contains("quota"), "{}", p.why);
        // The model spreads the CPU over the usable cores: 7.5 ms a step on 2.5 cores.
        let mut f = figures(2, 30.0, 5.0, 2.0, 5.5, 0.0);
        f.cpu_count = Some(128);
        f.usable_cores = Some(2.5);
        let model = LoaderModel::of(&f, 2, 3).unwrap();
        assert!((model.cores_free - 2.5).abs() < 1e-9, "{model:?}");
        assert!((model.cpu_s - 0.003).abs() < 1e-9, "{model:?}");
    }

    #[test]
    fn an_unproven_step_that_points_up_leads_to_the_next_count() {
        // The CPU-bound job on 2 cores: 0 → 2 measured ×1.14 with its
        // 99% interval [0.94, 1.36] after 16 runs, reverted.
        let s = site("DataLoader(ds)\n");
        let mut open = row(1, "num_workers (default) → 2", Decision::Reverted);
        open.ratio = Some(1.14);
        open.ratio_ci = Some([0.94, 1.36]);
        let m = meas(0, 0.9, false);
        let p = next_proposal(&m, &s, std::slice::from_ref(&open), &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "4"),
            "{}",
            p.why
        );
        assert!(p.why.contains("pointing up"), "{}", p.why);
        assert!(p.why.contains("[0.94, 1.36]"), "{}", p.why);
        // A step that was clearly no gain (median under 1 + min_gain) ends the climb.
        let mut flat = open.clone();
        flat.ratio = Some(1.01);
        flat.ratio_ci = Some([0.94, 1.08]);
        assert_ne!(
            next_proposal(&m, &s, &[flat], &ALL, 0.1).map(|p| p.knob.name()),
            Some("num_workers")
        );
        // A stricter policy (min_gain 20%) does not read ×1.14 as pointing up.
        let strict = DecisionPolicy {
            min_gain: 0.2,
            stop_when_data_wait_below: 0.1,
            ..DecisionPolicy::default()
        };
        assert_ne!(
            next_proposal_for(&m, &s, std::slice::from_ref(&open), &ALL, &strict)
                .map(|p| p.knob.name()),
            Some("num_workers")
        );
        // The next count also points up but is not proven: on to 8; then the
        // cap (16 on 2 cores) ends it after 16.
        let mut open4 = row(2, "num_workers (default) → 4", Decision::Reverted);
        open4.ratio = Some(1.2);
        open4.ratio_ci = Some([0.97, 1.5]);
        let p = next_proposal(&m, &s, &[open.clone(), open4], &ALL, 0.1).unwrap();
        assert_eq!(p.value, "8");
    }

    #[test]
    fn waiting_items_get_workers_past_8_per_core_when_memory_allows() {
        let s = site("DataLoader(ds, num_workers=16)\n");
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 16", Decision::Kept),
        ];
        // 16 workers, 12 ms of data_wait and 5 ms of step: a worker takes
        // 272 ms a batch on 2 ms of CPU. The cores could feed a 3.75 ms step.
        let mut m = figures(16, 12.0, 5.0, 2.0, 5.5, 0.0);
        // No epoch-start figure: the timed steps' own cap (tested on its own) stays out.
        m.epoch_starts_timed = None;
        // Without memory figures: 8 per core, the climb is over.
        assert_eq!(worker_cap(2, 16, &m, LoaderModel::of(&m, 16, 2)), 16);
        assert_ne!(
            next_proposal(&m, &s, &h, &ALL, 0.1).map(|p| p.knob.name()),
            Some("num_workers")
        );
        // 30 MB a worker (PSS), 8 GB free: room for far more.
        m.live_workers = Some(16);
        m.workers_pss_bytes = Some(16 * 30_000_000);
        m.workers_rss_bytes = Some(16 * 400_000_000);
        m.mem_available_bytes = Some(8_000_000_000);
        let model = LoaderModel::of(&m, 16, 2).unwrap();
        assert_eq!(worker_cap(2, 16, &m, Some(model)), 149);
        let p = next_proposal(&m, &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(p.knob.name(), "num_workers", "{}", p.why);
        assert_eq!(p.value, model.workers_needed().to_string(), "{}", p.why);
        assert!(p.why.contains("past 8 per core"), "{}", p.why);
        assert!(p.why.contains("30 MB a worker"), "{}", p.why);
        // An epoch of 40 batches: a worker past 40 has none to fetch.
        let mut short = m.clone();
        short.batches_per_epoch = Some(40);
        assert_eq!(worker_cap(2, 16, &short, Some(model)), 40);
        let p = next_proposal(&short, &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "40"),
            "{}",
            p.why
        );
        assert!(
            p.why.contains(
                "an epoch holds 40 batches, so a worker past 40 would have none to fetch"
            ),
            "{}",
            p.why
        );
        // Never below the count now; at it, the climb is over.
        short.batches_per_epoch = Some(12);
        assert_eq!(worker_cap(2, 16, &short, Some(model)), 16);
        let p = next_proposal(&short, &s, &h, &ALL, 0.1);
        assert!(
            p.as_ref().is_none_or(
                |p| p.knob.name() != "num_workers" || p.value.parse::<u64>().unwrap() < 16
            ),
            "{p:?}"
        );
        // Little free memory: no more than it allows, even below 8 per core.
        m.mem_available_bytes = Some(120_000_000);
        assert_eq!(worker_cap(2, 4, &m, Some(model)), 6);
        assert_eq!(worker_cap(2, 4, &m, None), 6);
        // Items that compute (CPU per batch near a worker's wall time): 8 per core.
        let mut busy = figures(16, 12.0, 5.0, 200.0, 5.5, 0.0);
        busy.live_workers = m.live_workers;
        busy.workers_pss_bytes = m.workers_pss_bytes;
        busy.mem_available_bytes = Some(8_000_000_000);
        assert_eq!(worker_cap(2, 16, &busy, LoaderModel::of(&busy, 16, 2)), 16);
    }

    /// The demo's figures at 16 workers on 2 cores: items wait (a worker
    /// takes 82 ms a batch on 5 ms of CPU), the CPU is the floor of the
    /// fastest step (7 ms of CPU a step over 2 cores, 3.5 ms, against 1 ms of
    /// training) but the step now takes 5.1 ms: the cores could feed ×1.46
    /// more, so memory, not 8 per core, bounds the count.
    #[test]
    fn no_more_workers_than_the_timed_steps_can_tell_apart() {
        // The argparse example's shape: 14 waiting workers, 40 timed steps,
        // no epoch start among them, 30 MB a worker and room for far more.
        let s = site("DataLoader(ds, num_workers=14)\n");
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 14", Decision::Kept),
        ];
        let mut m = figures(14, 12.0, 5.0, 2.0, 5.5, 0.0);
        m.live_workers = Some(14);
        m.workers_pss_bytes = Some(14 * 30_000_000);
        m.mem_available_bytes = Some(8_000_000_000);
        let model = LoaderModel::of(&m, 14, 2).unwrap();
        assert!(model.workers_needed() > 20, "{model:?}");
        // 40 steps at prefetch 2: past 20 workers every timed batch could be
        // ready before the timed steps begin.
        m.steps = Some(40);
        let model = LoaderModel::of(&m, 14, 2);
        assert_eq!(worker_cap(2, 14, &m, model), 20);
        let p = next_proposal(&m, &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "20"),
            "{}",
            p.why
        );
        assert!(
            p.why.contains(
                "the 40 timed steps could all be served from batches made ready before them"
            ),
            "{}",
            p.why
        );
        // A deeper prefetch holds more ready: fewer workers.
        let mut deep = m.clone();
        deep.loader.insert("prefetch_factor".into(), 4.into());
        assert_eq!(worker_cap(2, 14, &deep, model), 14);
        // An epoch start within the timed steps measures the refill too: no cap.
        let mut restarts = m.clone();
        restarts.epoch_starts_timed = Some(1);
        assert!(worker_cap(2, 14, &restarts, model) > 20);
        // Nor without the figure (an older harness).
        restarts.epoch_starts_timed = None;
        assert!(worker_cap(2, 14, &restarts, model) > 20);
        // A slow incumbent whose window ended by time after 12 of its 40
        // steps: a faster candidate times at least the 40, so the cap stays.
        let mut by_time = m.clone();
        by_time.steps = Some(12);
        by_time.window_by_time = true;
        by_time.stretch = Some(40);
        by_time.warmup_steps = Some(5);
        by_time.batches_per_epoch = Some(10_000);
        assert_eq!(worker_cap(2, 14, &by_time, model), 20);
        by_time.window_by_time = false;
        assert_eq!(
            worker_cap(2, 14, &by_time, model),
            14,
            "12 steps tell 6 apart, never below 14"
        );
    }

    /// The Lightning `--epochs 1` shape: 2 waiting workers kept, 40 timed
    /// steps, no epoch start among them; memory allows many more.
    fn short_command(batches: Option<u64>) -> Measurement {
        let mut m = figures(2, 40.0, 5.0, 1.0, 5.0, 0.0);
        m.steps = Some(40);
        m.live_workers = Some(2);
        m.workers_pss_bytes = Some(2 * 30_000_000);
        m.mem_available_bytes = Some(8_000_000_000);
        m.command_batches = batches;
        m
    }

    #[test]
    fn a_count_that_did_not_fit_the_command_leads_to_the_largest_that_fits() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let mut failed = row(2, "num_workers 2 → 17", Decision::Failed);
        failed.reason = "bench failed (candidate): too_few_steps: `python train.py --epochs 1` ran 60 training batches: …".into();
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            failed.clone(),
        ];
        // 60 batches, 40 timed: 19 of warm-up hold the first round of 9.
        let m = short_command(Some(60));
        let p = next_proposal(&m, &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "9"),
            "{}",
            p.why
        );
        assert!(
            p.why
                .contains("the command runs 60 training batches, so past 9 workers"),
            "{}",
            p.why
        );
        // A resumed run that has not met the command's end yet: half way.
        let p = next_proposal(&short_command(None), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "9"),
            "{}",
            p.why
        );
        // A count that failed otherwise (it crashed) still ends the climb.
        let mut crashed = failed;
        crashed.reason = "bench failed (candidate): crashed (signal 9)".into();
        let h = vec![row(1, "num_workers (default) → 2", Decision::Kept), crashed];
        let p = next_proposal(&m, &s, &h, &ALL, 0.1);
        assert!(
            p.as_ref().is_none_or(|p| p.knob.name() != "num_workers"),
            "{p:?}"
        );
    }

    #[test]
    fn a_command_too_short_for_the_core_count_starts_at_the_workers_that_fit() {
        // 16 batches, 12 timed: 3 of warm-up, one worker's first round (2).
        let s = site("DataLoader(ds)\n");
        let mut failed = row(1, "num_workers (default) → 2", Decision::Failed);
        failed.reason = "bench failed (candidate): too_few_steps: …".into();
        let mut m = meas(0, 0.95, false);
        m.steps = Some(12);
        m.command_batches = Some(16);
        let p = next_proposal(&m, &s, &[failed], &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "1"),
            "{}",
            p.why
        );
        assert!(
            p.why.contains("the command runs 16 training batches"),
            "{}",
            p.why
        );
        // With room for the core count's first rounds, the core count.
        m.command_batches = Some(40);
        let p = next_proposal(&m, &s, &[], &ALL, 0.1).unwrap();
        assert_eq!(p.value, "2", "{}", p.why);
    }

    #[test]
    fn a_known_command_length_caps_the_workers_before_any_fails() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers (default) → 2", Decision::Kept)];
        // Unknown length: the timed steps' cap (20 at prefetch 2).
        let p = next_proposal(&short_command(None), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(p.value, "20", "{}", p.why);
        // 96 batches leave 55 of warm-up: still 20 (the window binds).
        let p = next_proposal(&short_command(Some(96)), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(p.value, "20", "{}", p.why);
        // 70 batches leave 29: 14 workers' first rounds fit.
        let m = short_command(Some(70));
        assert_eq!(worker_cap(2, 2, &m, LoaderModel::of(&m, 2, 2)), 14);
        let p = next_proposal(&m, &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(p.value, "14", "{}", p.why);
        // At that count already: no step up, and no deeper prefetch (its
        // first round would not fit either); a cheaper neighbour may follow.
        let s14 = site("DataLoader(ds, num_workers=14)\n");
        let mut at = short_command(Some(70));
        at.loader.insert("num_workers".into(), 14.into());
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 14", Decision::Kept),
        ];
        let p = next_proposal(&at, &s14, &h, &ALL, 0.1);
        assert!(
            p.as_ref().is_none_or(|p| p.knob.name() != "prefetch_factor"
                && !(p.knob.name() == "num_workers" && p.value.parse::<u64>().unwrap_or(0) > 14)),
            "{p:?}"
        );
    }

    #[test]
    fn workers_past_8_per_core_until_the_cpu_limit_binds() {
        let s = site("DataLoader(ds, num_workers=16)\n");
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 16", Decision::Kept),
        ];
        let mut m = figures(16, 4.1, 1.0, 5.0, 2.0, 0.0);
        m.live_workers = Some(16);
        m.workers_pss_bytes = Some(16 * 33_000_000);
        m.mem_available_bytes = Some(8_000_000_000);
        let model = LoaderModel::of(&m, 16, 2).unwrap();
        assert!(model.cpu_bound(), "{model:?}");
        assert!(worker_cap(2, 16, &m, Some(model)) > 16);
        let p = next_proposal(&m, &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(p.knob.name(), "num_workers", "{}", p.why);
        assert_eq!(p.value, model.workers_needed().to_string(), "{}", p.why);
        assert!(model.workers_needed() > 20, "{model:?}");
        // Once the cores are nearly all busy (the step within ×1.15 of what
        // they can feed), 8 per core again: more workers would only contend.
        let mut full = figures(16, 0.5, 1.0, 5.0, 2.0, 0.0);
        full.live_workers = m.live_workers;
        full.workers_pss_bytes = m.workers_pss_bytes;
        full.mem_available_bytes = m.mem_available_bytes;
        assert_eq!(worker_cap(2, 16, &full, LoaderModel::of(&full, 16, 2)), 16);
    }

    /// A run driven by the builtin agent's proposals on a job whose items
    /// wait (2 cores), each proposal given a scripted verdict: the first
    /// count reverted with its interval open but pointing up, the next kept,
    /// the one after reverted with no gain, persistent_workers kept, every
    /// other knob and the structural turn reverted. The cheaper neighbours
    /// must come only once all of that is spent, and nothing but them after.
    #[test]
    fn the_cheaper_neighbours_come_only_once_the_climb_is_exhausted() {
        let knobs: Vec<LoaderKnob> = ALL
            .iter()
            .copied()
            .chain([LoaderKnob::Preprocessing])
            .collect();
        let mut nw: u64 = 0;
        let mut persistent = false;
        let call = |nw: u64, persistent: bool| {
            let p = if persistent {
                ", persistent_workers=True"
            } else {
                ""
            };
            site(&format!("DataLoader(ds, num_workers={nw}{p})\n"))
        };
        let mut history: Vec<TurnRow> = Vec::new();
        let mut steps_up = 0;
        let mut first_cheaper = None;
        for turn in 1..=14u32 {
            let s = call(nw, persistent);
            let mut m = figures(nw, 30.0, 5.0, 2.0, 5.5, 0.0);
            m.batch_size = Some(32);
            m.epoch_starts_timed = Some(2);
            let Some(p) = next_proposal(&m, &s, &history, &knobs, 0.1) else {
                break;
            };
            let from = match p.knob.name() {
                "num_workers" => nw.to_string(),
                "prefetch_factor" => "2".into(),
                "persistent_workers" if persistent => "True".into(),
                _ => "(default)".into(),
            };
            let change = if p.knob.name() == "preprocessing" {
                "preprocessing in Items.__getitems__ (train.py:8)".to_string()
            } else {
                format!("{} {from} → {}", p.knob.name(), p.value)
            };
            let cheaper = cheaper::is_cheaper(&change);
            if cheaper {
                first_cheaper.get_or_insert(turn);
            } else {
                assert!(
                    first_cheaper.is_none(),
                    "turn {turn}: {change} after a cheaper neighbour ({})",
                    p.why
                );
            }
            let mut r = row(turn, &change, Decision::Reverted);
            (r.ratio, r.ratio_ci) = (Some(1.0), Some([0.98, 1.02]));
            if p.knob.name() == "num_workers" && !cheaper {
                steps_up += 1;
                match steps_up {
                    // ×1.14, [0.94, 1.36]: not proven, pointing up.
                    1 => (r.ratio, r.ratio_ci) = (Some(1.14), Some([0.94, 1.36])),
                    2 => r.decision = Decision::Kept,
                    _ => {}
                }
            }
            if p.knob.name() == "persistent_workers" && !cheaper {
                r.decision = Decision::Kept;
                persistent = true;
            }
            if r.decision.is_kept() && p.knob.name() == "num_workers" {
                nw = p.value.parse().unwrap();
            }
            history.push(r);
        }
        let changes: Vec<&str> = history.iter().map(|r| r.change.as_str()).collect();
        let first = first_cheaper.expect("a cheaper neighbour once the climb was over") as usize;
        let before = &history[..first - 1];
        // The jump the baseline's figures predict (30 ms / 5 ms × 1.25 → 8)
        // was reverted pointing up, which led to the next count, kept; at
        // 16 (the cap on 2 cores) the climb was over.
        assert_eq!(changes[0], "num_workers 0 → 8", "{changes:?}");
        assert_eq!(changes[1], "num_workers 0 → 16", "{changes:?}");
        assert_eq!(steps_up, 2, "{changes:?}");
        // Every knob the figures allowed, and the structural turn, before.
        for want in ["prefetch_factor", "persistent_workers", "__getitems__"] {
            assert!(
                before.iter().any(|r| r.change.contains(want)),
                "{want} not tried before the first cheaper neighbour: {changes:?}"
            );
        }
        // The climb is exhausted there: the same history without the cheaper
        // turns still proposes the first cheaper neighbour, nothing else.
        let mut m = figures(nw, 30.0, 5.0, 2.0, 5.5, 0.0);
        m.batch_size = Some(32);
        m.epoch_starts_timed = Some(2);
        assert_climb_over(next_proposal(&m, &call(nw, true), before, &knobs, 0.1));
        assert!(history[first - 1..]
            .iter()
            .all(|r| cheaper::is_cheaper(&r.change)));
    }

    #[test]
    fn the_cgroups_memory_limit_bounds_the_workers_when_it_is_lower() {
        let s = site("DataLoader(ds, num_workers=16)\n");
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 16", Decision::Kept),
        ];
        // As above: items wait, 30 MB a worker, 8 GB free on the machine.
        let mut m = figures(16, 12.0, 5.0, 2.0, 5.5, 0.0);
        m.live_workers = Some(16);
        m.workers_pss_bytes = Some(16 * 30_000_000);
        m.mem_available_bytes = Some(8_000_000_000);
        m.main_rss_bytes = Some(520_000_000);
        let model = LoaderModel::of(&m, 16, 2).unwrap();
        let free_machine = worker_cap(2, 16, &m, Some(model));
        // The job's cgroup had 1.6 GB left after the run; the job itself
        // took 1 GB of it (16 × 30 MB workers, 520 MB training process):
        // 600 MB free while it ran, half of it for 10 more workers.
        m.cgroup_memory_headroom_bytes = Some(1_600_000_000);
        assert_eq!(worker_cap(2, 16, &m, Some(model)), 26);
        assert!(free_machine > 26);
        let p = next_proposal(&m, &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "26"),
            "{}",
            p.why
        );
        assert!(model.workers_needed() > 26);
        assert!(
            p.why
                .contains(&format!("about {} workers keep up", model.workers_needed()))
                && p.why.contains("memory bounds it at 26, at 30 MB a worker")
                && p.why
                    .contains("600 MB free under the job's cgroup memory limit"),
            "{}",
            p.why
        );
        // A cgroup with room to spare: the machine's MemAvailable bounds it.
        m.cgroup_memory_headroom_bytes = Some(60_000_000_000);
        assert_eq!(worker_cap(2, 16, &m, Some(model)), free_machine);
        let p = next_proposal(&m, &s, &h, &ALL, 0.1).unwrap();
        assert!(!p.why.contains("cgroup"), "{}", p.why);
    }

    #[test]
    fn the_structural_turn_comes_when_items_wait_and_the_knobs_are_exhausted() {
        let with_pre: Vec<LoaderKnob> = ALL
            .iter()
            .copied()
            .chain([LoaderKnob::Preprocessing])
            .collect();
        // 16 workers at the cap, steady waiting: no knob left.
        let s = site("DataLoader(ds, num_workers=16)\n");
        let h = vec![row(1, "num_workers 2 → 16", Decision::Kept)];
        let mut m = figures(16, 3.0, 5.0, 2.0, 5.5, 0.0);
        m.data_wait_step_median_s = Some(0.0028);
        m.batch_size = Some(32);
        // Without the preprocessing knob: only a cheaper neighbour.
        assert_climb_over(next_proposal(&m, &s, &h, &ALL, 0.1));
        // With it: 128 ms a batch for 2 ms of CPU → 16 threads (the most).
        let p = next_proposal(&m, &s, &h, &with_pre, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("preprocessing", "16"),
            "{}",
            p.why
        );
        assert!(p.why.contains("items mostly wait"), "{}", p.why);
        // Once tried (kept or not), not again: then the cheaper neighbours.
        let mut h2 = h.clone();
        h2.push(row(
            2,
            "preprocessing in Items.__getitems__ (train.py:8)",
            Decision::Reverted,
        ));
        assert_climb_over(next_proposal(&m, &s, &h2, &with_pre, 0.1));
        // Items that compute (CPU per batch near a worker's wall time): not offered.
        let mut busy = figures(16, 3.0, 5.0, 100.0, 5.5, 0.0);
        busy.data_wait_step_median_s = Some(0.0028);
        assert_ne!(
            next_proposal(&busy, &s, &h, &with_pre, 0.1).map(|p| p.knob.name()),
            Some("preprocessing")
        );
    }

    #[test]
    fn pin_memory_only_on_cuda() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers 2 → 4", Decision::Reverted)];
        let cpu = next_proposal(&meas(2, 0.5, false), &s, &h, &ALL, 0.1).unwrap();
        assert_ne!(cpu.knob, LoaderKnob::PinMemory);
        let gpu = next_proposal(&meas(2, 0.5, true), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(gpu.knob, LoaderKnob::PinMemory);
    }

    #[test]
    fn exhausts_and_respects_the_policy_knobs() {
        let s = site("DataLoader(ds, num_workers=2, persistent_workers=True)\n");
        let h = vec![
            row(1, "num_workers 2 → 4", Decision::Reverted),
            row(2, "prefetch_factor (default) → 4", Decision::Reverted),
        ];
        assert_eq!(next_proposal(&meas(2, 0.5, false), &s, &h, &ALL, 0.1), None);
        let s0 = site("DataLoader(ds)\n");
        assert_eq!(
            next_proposal(
                &meas(0, 0.9, false),
                &s0,
                &[],
                &[LoaderKnob::PinMemory],
                0.1
            ),
            None
        );
    }

    /// A measurement with the harness's loader figures, per step in ms over
    /// 100 timed steps; `others` is the cores other processes kept busy.
    pub(super) fn figures(
        nw: u64,
        data_wait_ms: f64,
        train_ms: f64,
        load_cpu_ms: f64,
        main_cpu_ms: f64,
        others: f64,
    ) -> Measurement {
        let steps = 100.0;
        let wall = (data_wait_ms + train_ms) * steps / 1e3;
        let mut m = meas(nw, data_wait_ms / (data_wait_ms + train_ms), false);
        m.steps = Some(steps as u32);
        m.wall_s = Some(wall);
        m.data_wait_s = Some(data_wait_ms * steps / 1e3);
        m.train_step_s = Some(train_ms * steps / 1e3);
        m.loader_cpu_s = Some(load_cpu_ms * steps / 1e3);
        m.main_cpu_s = Some(main_cpu_ms * steps / 1e3);
        m.machine_busy_s = Some((load_cpu_ms + main_cpu_ms) * steps / 1e3 + others * wall);
        m.epoch_starts_timed = Some(0);
        m
    }

    #[test]
    fn the_model_reads_latency_step_and_cpu() {
        // Two workers, 30 ms of data_wait and 5 ms of step: a worker takes 70 ms a batch.
        let m = LoaderModel::of(&figures(2, 30.0, 5.0, 2.0, 5.5, 0.0), 2, 2).unwrap();
        assert!((m.batch_latency_s - 0.070).abs() < 1e-9, "{m:?}");
        assert!((m.cpu_s - 0.00375).abs() < 1e-9, "{m:?}");
        assert!((m.best_step_s() - 0.005).abs() < 1e-9);
        assert!((m.predicted_gain() - 7.0).abs() < 1e-9);
        assert_eq!(m.workers_needed(), 18);
        // Without workers, the loading time is the data_wait itself.
        let m0 = LoaderModel::of(&figures(0, 30.0, 5.0, 2.0, 5.5, 0.0), 0, 2).unwrap();
        assert!((m0.batch_latency_s - 0.030).abs() < 1e-9);
        // Figures missing (contract mode, an older harness): no model.
        assert_eq!(LoaderModel::of(&meas(2, 0.9, false), 2, 2), None);
    }

    #[test]
    fn waiting_items_get_the_workers_that_keep_up_in_one_step() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers (default) → 2", Decision::Kept)];
        // 18 wanted, capped at 8 per core on 2 cores.
        let p = next_proposal(&figures(2, 30.0, 5.0, 2.0, 5.5, 0.0), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "16"),
            "{}",
            p.why
        );
        // A smaller shortfall asks for fewer: 2 × 16 ms / 6.25 ms × 1.25 → 7.
        let p = next_proposal(&figures(2, 11.5, 4.5, 8.0, 4.5, 0.0), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "7"),
            "{}",
            p.why
        );
        // At the cap the climb is over; prefetching may still help.
        let s16 = site("DataLoader(ds, num_workers=16)\n");
        let p = next_proposal(&figures(16, 3.0, 5.0, 2.0, 5.5, 0.0), &s16, &h, &ALL, 0.1).unwrap();
        assert_eq!(p.knob.name(), "prefetch_factor");
    }

    #[test]
    fn a_loader_short_of_cpu_gets_no_more_workers_and_no_prefetch_turn() {
        // Loading takes 19 ms of CPU a step, training 4.6: on 2 cores the step
        // cannot beat 11.8 ms, and it takes 11.5 already.
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers (default) → 2", Decision::Kept)];
        let m = figures(2, 7.0, 4.5, 19.0, 4.6, 0.0);
        assert!(LoaderModel::of(&m, 2, 2).unwrap().saturated());
        // No epoch began during the measurement either: nothing left to try.
        assert_climb_over(next_proposal(&m, &s, &h, &ALL, 0.1));
    }

    #[test]
    fn receiving_batches_counts_against_the_step_not_the_workers() {
        // 16 workers; the step takes 7.1 ms, of which training 6.4 and
        // receiving the batch in next() 0.6 of CPU: data_wait is 10% but no
        // number of workers, nor a deeper prefetch, removes it.
        let s = site("DataLoader(ds, num_workers=16)\n");
        let h = vec![row(1, "num_workers 2 → 16", Decision::Kept)];
        let mut m = figures(16, 0.7, 6.4, 3.0, 6.5, 0.0);
        m.fetch_cpu_s = Some(0.6 * 100.0 / 1e3);
        let model = LoaderModel::of(&m, 16, 2).unwrap();
        assert!((model.best_step_s() - 0.007).abs() < 1e-9, "{model:?}");
        assert!(model.saturated());
        assert_climb_over(next_proposal(&m, &s, &h, &ALL, 0.1));
        // Without workers the same CPU is the loading itself, not a floor.
        let m0 = LoaderModel::of(&m, 0, 2).unwrap();
        assert_eq!(m0.fetch_s, 0.0);
    }

    #[test]
    fn wanting_less_than_the_headroom_more_workers_ends_the_climb() {
        // Measured on the tuner benchmark's io_latency: 13 workers kept, the
        // figures then wanted 16 (under 13 × 1.25); that turn took 16 runs
        // to revert at ×1.03.
        let s = site("DataLoader(ds, num_workers=13)\n");
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "num_workers 2 → 13", Decision::Kept),
        ];
        let m = figures(13, 1.6, 5.0, 3.0, 5.0, 0.0);
        let model = LoaderModel::of(&m, 13, 2).unwrap();
        // 22 by the figures, 16 at the cap on 2 cores.
        assert_eq!(model.workers_needed(), 22, "{model:?}");
        assert!(!model.saturated(), "{model:?}");
        let p = next_proposal(&m, &s, &h, &ALL, 0.1);
        assert_ne!(p.map(|p| p.knob.name()), Some("num_workers"));
        // From the core count, twice as many is well past the headroom: tried.
        let s2 = site("DataLoader(ds, num_workers=2)\n");
        let h2 = vec![row(1, "num_workers (default) → 2", Decision::Kept)];
        let p = next_proposal(&figures(2, 2.0, 5.0, 2.0, 5.0, 0.0), &s2, &h2, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "4"),
            "{}",
            p.why
        );
    }

    #[test]
    fn prefetching_is_tried_for_stalls_not_for_steady_waiting() {
        // 16 workers (the cap), data_wait 3 ms a step on average.
        let s = site("DataLoader(ds, num_workers=16)\n");
        let h = vec![row(1, "num_workers 2 → 16", Decision::Kept)];
        let mut m = figures(16, 3.0, 5.0, 2.0, 5.5, 0.0);
        // Every step waits about the same: the workers' rate is the limit.
        m.data_wait_step_median_s = Some(0.0028);
        assert_climb_over(next_proposal(&m, &s, &h, &ALL, 0.1));
        // Most steps wait nothing and a few wait long: a deeper queue helps.
        m.data_wait_step_median_s = Some(0.0002);
        let p = next_proposal(&m, &s, &h, &ALL, 0.1).unwrap();
        assert_eq!((p.knob.name(), p.value.as_str()), ("prefetch_factor", "4"));
        // 16 × 4 batches in flight cover 40 timed steps with no epoch start
        // among them: they could all be ready before the steps begin.
        let mut few = m.clone();
        few.steps = Some(40);
        assert_ne!(
            next_proposal(&few, &s, &h, &ALL, 0.1).map(|p| p.knob.name()),
            Some("prefetch_factor")
        );
        // An epoch start among them measures the refill too.
        few.epoch_starts_timed = Some(1);
        few.batches_per_epoch = Some(1000);
        let mut kept_alive = h.clone();
        kept_alive.push(row(
            2,
            "persistent_workers (default) → True",
            Decision::Kept,
        ));
        let s_alive = site("DataLoader(ds, num_workers=16, persistent_workers=True)\n");
        assert_eq!(
            next_proposal(&few, &s_alive, &kept_alive, &ALL, 0.1).map(|p| p.knob.name()),
            Some("prefetch_factor")
        );
    }

    #[test]
    fn persistent_workers_reverted_at_few_workers_is_tried_again_at_many() {
        // The demo: keeping 2 workers alive saved ×1.026 (reverted, under
        // min_gain); at 16 workers every epoch restarts eight times as many.
        let h = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "persistent_workers (default) → True", Decision::Reverted),
            row(3, "num_workers 2 → 16", Decision::Kept),
        ];
        let s16 = site("DataLoader(ds, num_workers=16)\n");
        let mut m = figures(16, 3.0, 5.0, 2.0, 5.5, 0.0);
        m.epoch_starts_timed = Some(3);
        let p = next_proposal(&m, &s16, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("persistent_workers", "True")
        );
        // Tried and reverted at 16 as well: not a third time.
        let h2 = [
            h.clone(),
            vec![row(
                4,
                "persistent_workers (default) → True",
                Decision::Reverted,
            )],
        ]
        .concat();
        assert_ne!(
            next_proposal(&m, &s16, &h2, &ALL, 0.1).map(|p| p.knob.name()),
            Some("persistent_workers")
        );
        // Not when the count grew by less than double (2 → 3).
        let h3 = vec![
            row(1, "num_workers (default) → 2", Decision::Kept),
            row(2, "persistent_workers (default) → True", Decision::Reverted),
            row(3, "num_workers 2 → 3", Decision::Kept),
        ];
        let s3 = site("DataLoader(ds, num_workers=3)\n");
        let mut m3 = figures(3, 3.0, 5.0, 2.0, 5.5, 0.0);
        m3.epoch_starts_timed = Some(3);
        assert_ne!(
            next_proposal(&m3, &s3, &h3, &ALL, 0.1).map(|p| p.knob.name()),
            Some("persistent_workers")
        );
        // Workers set in the file (4) and reverted there: the count before
        // comes from the first num_workers change after it.
        let h4 = vec![
            row(1, "persistent_workers (default) → True", Decision::Reverted),
            row(2, "num_workers 4 → 16", Decision::Kept),
        ];
        let p = next_proposal(&m, &s16, &h4, &ALL, 0.1).unwrap();
        assert_eq!(p.knob.name(), "persistent_workers");
    }

    #[test]
    fn a_few_more_workers_are_not_worth_a_turn() {
        // 15 workers would want 18, but the cap (16 on 2 cores) leaves one
        // more: under ×1.15, a close call. Prefetching instead.
        let s = site("DataLoader(ds, num_workers=15)\n");
        let h = vec![row(1, "num_workers 2 → 15", Decision::Kept)];
        let m = figures(15, 1.5, 6.0, 2.0, 6.0, 0.0);
        let model = LoaderModel::of(&m, 15, 2).unwrap();
        assert!(!model.saturated(), "{model:?}");
        assert!(model.workers_needed() > 16, "{model:?}");
        assert_eq!(
            next_proposal(&m, &s, &h, &ALL, 0.1).unwrap().knob,
            LoaderKnob::PrefetchFactor
        );
    }

    #[test]
    fn cores_taken_by_other_processes_count_against_the_loader() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers (default) → 2", Decision::Kept)];
        let alone =
            next_proposal(&figures(2, 11.5, 4.5, 8.0, 4.5, 0.0), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(alone.knob, LoaderKnob::NumWorkers);
        // Others kept 1.2 of the 2 cores busy: 12.5 ms of CPU a step on 0.8 free cores.
        let shared = figures(2, 11.5, 4.5, 8.0, 4.5, 1.2);
        let m = LoaderModel::of(&shared, 2, 2).unwrap();
        assert!((m.cores_free - 0.8).abs() < 1e-9, "{m:?}");
        assert_eq!(next_proposal(&shared, &s, &h, &ALL, 0.1), None);
    }

    #[test]
    fn workers_restarted_every_epoch_are_kept_alive_before_adding_more() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers (default) → 2", Decision::Kept)];
        let mut m = figures(2, 30.0, 5.0, 2.0, 5.5, 0.0);
        m.epoch_starts_timed = Some(3);
        let p = next_proposal(&m, &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("persistent_workers", "True")
        );
        assert!(p.why.contains("3 epochs"), "{}", p.why);
        // Once they persist, the climb goes on.
        let sp = site("DataLoader(ds, num_workers=2, persistent_workers=True)\n");
        let h2 = [
            h.clone(),
            vec![row(
                2,
                "persistent_workers (default) → True",
                Decision::Kept,
            )],
        ]
        .concat();
        let p = next_proposal(&m, &sp, &h2, &ALL, 0.1).unwrap();
        assert_eq!((p.knob.name(), p.value.as_str()), ("num_workers", "16"));
        // At the cap, with epochs of 25 batches (100 steps, 4 epoch starts) and
        // 16 workers asking for 2 each, every batch is requested at the epoch's
        // start already: no prefetch turn.
        let s16 = site("DataLoader(ds, num_workers=16, persistent_workers=True)\n");
        let h3 = [
            h2.clone(),
            vec![row(3, "num_workers 2 → 16", Decision::Kept)],
        ]
        .concat();
        let mut m16 = figures(16, 3.0, 5.0, 2.0, 5.5, 0.0);
        m16.epoch_starts_timed = Some(4);
        assert_climb_over(next_proposal(&m16, &s16, &h3, &ALL, 0.1));
        // Long epochs leave room for it.
        m16.epoch_starts_timed = Some(1);
        assert_eq!(
            next_proposal(&m16, &s16, &h3, &ALL, 0.1).unwrap().knob,
            LoaderKnob::PrefetchFactor
        );
        // Without workers there is nothing to keep alive: workers first, as
        // many as the baseline's figures predict (30 ms / 5 ms × 1.25 → 8).
        let s0 = site("DataLoader(ds)\n");
        let mut m0 = figures(0, 30.0, 5.0, 2.0, 5.5, 0.0);
        m0.epoch_starts_timed = Some(3);
        let p = next_proposal(&m0, &s0, &[], &ALL, 0.1).unwrap();
        assert_eq!((p.knob.name(), p.value.as_str()), ("num_workers", "8"));
    }

    #[test]
    fn a_fifth_of_the_step_waiting_climbs_on_when_the_figures_promise_a_gain() {
        // Five workers kept, 19% data_wait: the step alone (6.8 ms) is ×1.24
        // faster than the step now (8.4), so about 8 workers keep up.
        let s = site("DataLoader(ds, num_workers=5)\n");
        let h = vec![
            row(1, "num_workers 0 → 2", Decision::Kept),
            row(2, "num_workers 2 → 5", Decision::Kept),
        ];
        let m = figures(5, 1.6, 6.8, 3.0, 6.0, 0.0);
        assert!(m.data_wait_share.unwrap() < CLIMB_WHILE_DATA_WAIT_ABOVE);
        let p = next_proposal(&m, &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(
            (p.knob.name(), p.value.as_str()),
            ("num_workers", "8"),
            "{}",
            p.why
        );
        // 12% waiting promises under ×1.15: not worth a turn.
        let m = figures(5, 0.9, 6.8, 3.0, 6.0, 0.0);
        assert!(LoaderModel::of(&m, 5, 2).unwrap().saturated());
        let more = |p: Option<Proposal>| {
            p.is_some_and(|p| p.knob.name() == "num_workers" && p.value.parse::<u64>().unwrap() > 5)
        };
        assert!(!more(next_proposal(&m, &s, &h, &ALL, 0.1)));
        // Without the figures (contract mode), a fifth is still the floor.
        assert!(!more(next_proposal(
            &meas(5, 0.19, false),
            &s,
            &h,
            &ALL,
            0.1
        )));
    }

    #[test]
    fn little_data_wait_means_no_more_workers() {
        let s = site("DataLoader(ds, num_workers=2)\n");
        let h = vec![row(1, "num_workers 0 → 2", Decision::Kept)];
        let p = next_proposal(&meas(2, 0.05, false), &s, &h, &ALL, 0.1).unwrap();
        assert_eq!(p.knob.name(), "persistent_workers");
    }

    #[test]
    fn a_change_made_at_its_source_is_read_back_with_its_values() {
        let t = tried(&[row(
            1,
            "num_workers 0 → 4 (--workers default, train.py:12)",
            Decision::Kept,
        )]);
        assert_eq!(
            (t[0].knob.as_str(), t[0].from.as_str(), t[0].to.as_str()),
            ("num_workers", "0", "4")
        );
        let t = tried(&[row(1, "pin_memory (default) → True", Decision::Reverted)]);
        assert_eq!(
            (t[0].from.as_str(), t[0].to.as_str()),
            ("(default)", "True")
        );
    }

    #[test]
    fn a_knob_that_cannot_be_dropped_says_why() {
        let src = "from torch.utils.data import DataLoader\nl = DataLoader(ds, num_workers=4)\n";
        let none = |_: &str| None;
        let sites = edit::knob_sites("train.py", src, &none).unwrap();
        let e = drop_knob(&sites[0], LoaderKnob::NumWorkers, &none).unwrap_err();
        assert!(
            matches!(&e, DropError::Unreadable(f) if f == "train.py"),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "cannot read train.py");
        // The file changed since it was scanned: the call is not there any more.
        let changed = |_: &str| Some("x = 1\n".to_string());
        let e = drop_knob(&sites[0], LoaderKnob::NumWorkers, &changed).unwrap_err();
        assert!(matches!(e, DropError::Rewrite { .. }), "{e:?}");
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.to_string().starts_with("cannot edit train.py:2: "), "{e}");
        // And the file as scanned: the keyword goes.
        let same = |_: &str| Some(src.to_string());
        let (file, out) = drop_knob(&sites[0], LoaderKnob::NumWorkers, &same).unwrap();
        assert_eq!(
            (file.as_str(), out.contains("num_workers")),
            ("train.py", false)
        );
    }

    #[test]
    fn no_site_to_tune_says_why() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("model.py"), "import torch\nx = 1\n").unwrap();
        let e = measured_knob_site(d.path(), &["model.py".to_string()], None, None).unwrap_err();
        assert!(matches!(e, SiteError::NoLoader), "{e:?}");
        assert_eq!(
            e.to_string(),
            "no DataLoader call found in the editable files"
        );
        let e = measured_knob_site(d.path(), &["gone.py".to_string()], None, None).unwrap_err();
        assert!(
            matches!(&e, SiteError::Read { file, .. } if file == "gone.py"),
            "{e:?}"
        );
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.to_string().starts_with("cannot read gone.py: "), "{e}");
    }

    #[test]
    fn the_measured_call_site_and_training_arguments_choose_the_site() {
        let d = tempfile::tempdir().unwrap();
        let train = "import argparse\nfrom torch.utils.data import DataLoader\np = argparse.ArgumentParser()\np.add_argument('--workers', type=int, default=0)\nargs = p.parse_args()\nval = DataLoader(vs, batch_size=8)\ntrain = DataLoader(\n    ds,\n    num_workers=args.workers,\n)\n";
        std::fs::write(d.path().join("train.py"), train).unwrap();
        let hf = "from transformers import TrainingArguments\nta = TrainingArguments('out', dataloader_num_workers=1)\n";
        std::fs::write(d.path().join("hf.py"), hf).unwrap();
        let agent = BuiltinAgent {
            preferred_file: None,
        };
        let editable = vec!["train.py".to_string(), "hf.py".to_string()];
        let pick = |cs: Option<&str>| agent.find_site(d.path(), &editable, cs).unwrap();
        // Without a call site: the first DataLoader call.
        assert_eq!(pick(None).line, 6);
        // The measured one, by any line of the call and an absolute path.
        let abs = format!("{}:9", d.path().join("train.py").display());
        let s = pick(Some(&abs));
        assert_eq!(s.line, 7);
        let nw = s.origin("num_workers").unwrap();
        assert!(matches!(&nw.source, edit::Source::Flag { flag, .. } if flag == "--workers"));
        // Its knob values as the proposal reads them: the flag's default.
        assert_eq!(s.effective_call().kwarg("num_workers"), Some("0"));
        // Built inside transformers: the TrainingArguments call.
        let s = pick(Some(
            "/venv/lib/python3.12/site-packages/transformers/trainer.py:1042",
        ));
        assert_eq!(
            (s.file.as_str(), s.kind),
            ("hf.py", SiteKind::TrainingArguments)
        );
        assert_eq!(s.effective_call().kwarg("num_workers"), Some("1"));
    }

    /// Run one builtin turn on a project folder with a tuneloop.toml.
    fn propose_in(dir: &Path, m: &Measurement, knobs: &[LoaderKnob]) -> AgentReport {
        let ws = crate::config::Workspace::load(dir).unwrap();
        let mut policy = crate::config::Policy::default();
        policy.loop_.knobs = knobs.iter().map(|k| k.to_string()).collect();
        let interrupt = crate::process::Interrupt::new();
        let ctx = TurnContext {
            turn: 1,
            max_iterations: 4,
            ws: &ws,
            policy: &policy,
            project_root: dir,
            incumbent: m,
            incumbent_sps: 100.0,
            ceiling_sps: None,
            history: &[],
            profile_table: "",
            step_parts: None,
            turn_dir: dir.join("turn"),
            interrupt: &interrupt,
            only_cheaper: false,
        };
        BuiltinAgent::new(&ws).propose(&ctx)
    }

    #[test]
    fn a_turn_writes_the_config_value_the_loader_reads() {
        let d = tempfile::tempdir().unwrap();
        let script = "import yaml\nfrom torch.utils.data import DataLoader\ncfg = yaml.safe_load(open('config.yaml'))\nloader = DataLoader(ds, batch_size=cfg['batch_size'], num_workers=cfg['loader']['workers'])\n";
        let yaml = "batch_size: 32\nloader:\n  workers: 0  # per GPU\n";
        std::fs::write(d.path().join("train.py"), script).unwrap();
        std::fs::write(d.path().join("config.yaml"), yaml).unwrap();
        std::fs::write(
            d.path().join("tuneloop.toml"),
            "[project]\nroot = \".\"\neditable = [\"train.py\", \"config.yaml\"]\n\n[bench]\nentry = \"train:build\"\n",
        )
        .unwrap();
        let r = propose_in(d.path(), &meas(0, 0.8, false), &ALL);
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert!(
            r.summary.starts_with("set num_workers=2 where it is defined: num_workers = cfg['loader']['workers'] → loader.workers: 0 (config.yaml:3)"),
            "{}",
            r.summary
        );
        // The script is untouched; the config holds the new value, comment kept.
        assert_eq!(
            std::fs::read_to_string(d.path().join("train.py")).unwrap(),
            script
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("config.yaml")).unwrap(),
            yaml.replace("workers: 0  #", "workers: 2  #")
        );
    }

    #[test]
    fn the_commands_length_is_named_when_it_ended_the_climb() {
        // 9 workers kept; 64 batches, 40 timed: 23 of warm-up fit 11
        // workers' first rounds, within the headroom of 9.
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("train.py"),
            "from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=9)\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("tuneloop.toml"),
            "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nentry = \"train:build\"\n",
        )
        .unwrap();
        let mut m = figures(9, 20.0, 5.0, 1.0, 5.0, 0.0);
        m.steps = Some(40);
        m.command_batches = Some(64);
        let r = propose_in(d.path(), &m, &[LoaderKnob::NumWorkers]);
        assert!(r.exhausted, "{r:?}");
        assert!(
            r.summary.contains("the command's 64 training batches fit the first batches of no more than 11 workers before the 40 timed steps"),
            "{}",
            r.summary
        );
        // Without a known length, nothing is said of it.
        m.command_batches = None;
        m.steps = Some(20);
        let r = propose_in(d.path(), &m, &[LoaderKnob::NumWorkers]);
        assert!(!r.summary.contains("training batches fit"), "{}", r.summary);
    }

    #[test]
    fn computed_knobs_are_left_alone_and_named_when_nothing_is_left() {
        let d = tempfile::tempdir().unwrap();
        let script = "import os\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=os.cpu_count() // 2)\n";
        std::fs::write(d.path().join("train.py"), script).unwrap();
        std::fs::write(
            d.path().join("tuneloop.toml"),
            "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nentry = \"train:build\"\n",
        )
        .unwrap();
        let r = propose_in(d.path(), &meas(0, 0.8, false), &[LoaderKnob::NumWorkers]);
        assert!(r.exhausted, "{r:?}");
        assert!(
            r.summary
                .contains("num_workers = os.cpu_count() // 2: not editable"),
            "{}",
            r.summary
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("train.py")).unwrap(),
            script
        );
    }
}

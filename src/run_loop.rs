//! The tuning loop: baseline, then turns (snapshot → agent → verify → measure
//! interleaved → keep or revert → record), then the final best-vs-baseline
//! measurement and the report. It never prints: it emits [`Event`]s, which the
//! run log and the terminal view consume. A failed turn is data (a row with a
//! reason); only set-up and infrastructure failures end the run with an error.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::agent::Agent;
use crate::bench::stats::{self, PairedRatio, Verdict};
use crate::bench::window::{self, Widened};
use crate::bench::{Bencher, Measurement, Mode};
use crate::config::{Policy, Workspace};
use crate::edit;
use crate::error::{exit, BenchError};
use crate::event::Event;
use crate::judge;
use crate::measure::Measure;
use crate::process::Interrupt;
use crate::report::{self, RunReport};
use crate::run_folder::{
    self, BaselineBench, FinalBench, RunEnvironment, RunRecord, RunState, TurnBench, TurnFolder,
};
use crate::run_report::{self, LiveFigures, RunFacts};
use crate::store::{self, FileSet, Lock, RunStore};
use crate::turn::TurnRow;
use crate::verify::{self, ProjectSnapshot};

/// Why a run ended early with an error (exit codes: docs/configuration.md).
#[derive(Debug)]
pub enum LoopError {
    Config(String),
    Baseline(String),
    Agent(String),
    Interrupted,
    /// A file of the project or of the run folder could not be read or
    /// written: what was being done, and where.
    Files {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl LoopError {
    pub fn exit_code(&self) -> i32 {
        match self {
            LoopError::Config(_) => exit::CONFIG,
            LoopError::Baseline(_) => exit::BASELINE,
            LoopError::Agent(_) => exit::AGENT,
            LoopError::Interrupted => exit::INTERRUPTED,
            LoopError::Files { .. } => 1,
        }
    }
}

impl std::fmt::Display for LoopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoopError::Config(m) => write!(f, "{m}"),
            LoopError::Baseline(m) => write!(f, "the baseline could not be measured: {m}"),
            LoopError::Agent(m) => write!(f, "the agent could not be started: {m}"),
            LoopError::Interrupted => write!(f, "interrupted; the incumbent's files are in place"),
            LoopError::Files { what, path, source } => write!(
                f,
                "{what} {}: {source}\n  hint: check that this folder exists, is writable and its disk is not full; the run folder keeps every finished turn (`tuneloop resume` continues the run)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for LoopError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoopError::Files { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Names the file (or folder) and the action of a failed read or write, so
/// that it surfaces as [`LoopError::Files`] and not as a bare io error.
trait AtPath<T> {
    fn at(self, what: &'static str, path: &Path) -> Result<T, LoopError>;
}

impl<T> AtPath<T> for std::io::Result<T> {
    fn at(self, what: &'static str, path: &Path) -> Result<T, LoopError> {
        self.map_err(|source| LoopError::Files {
            what,
            path: path.to_owned(),
            source,
        })
    }
}

pub use crate::bench::load::SetAside;

/// Candidate and incumbent measured interleaved.
#[derive(Clone, Debug)]
pub struct Paired {
    pub candidate: Vec<Measurement>,
    pub incumbent: Vec<Measurement>,
    pub ratio: PairedRatio,
    pub verdict: Verdict,
    /// Pairs whose two runs saw clearly different loads: measured, not used.
    pub set_aside: Vec<SetAside>,
    /// Seconds spent waiting for a busy machine to quiet down.
    pub waited_s: f64,
    /// The runs of the pairs set aside.
    pub set_aside_runs: Vec<Measurement>,
    /// A kept change's second comparison (see `stages::confirm`).
    pub again: Option<Box<Paired>>,
}

impl Paired {
    /// Bench processes the comparison took, set-aside pairs included.
    pub fn runs(&self) -> u32 {
        (self.candidate.len() + self.incumbent.len() + self.set_aside_runs.len()) as u32
    }
    pub fn cand_sps(&self) -> Vec<f64> {
        self.candidate.iter().map(|m| m.samples_per_sec).collect()
    }
    pub fn inc_sps(&self) -> Vec<f64> {
        self.incumbent.iter().map(|m| m.samples_per_sec).collect()
    }
    /// Whether a run the figures use ran while others kept a busy share of
    /// the cores (the pairs set aside and the waits not counted).
    pub fn used_runs_saw_load(&self) -> bool {
        runs_saw_load(&self.candidate, &self.incumbent)
    }
    /// Whether load was present: a pair set aside, a wait, or a run used
    /// while others kept a busy share of the cores.
    pub fn saw_load(&self) -> bool {
        !self.set_aside.is_empty() || self.waited_s > 0.0 || self.used_runs_saw_load()
    }
}

/// Whether any of these runs ran while others kept a busy share of the cores.
fn runs_saw_load(cand: &[Measurement], inc: &[Measurement]) -> bool {
    cand.iter().chain(inc).any(crate::bench::load::busy_run)
}

/// A measurement failed inside a paired comparison.
pub struct PairFailure {
    pub role: &'static str,
    pub error: BenchError,
    pub runs: u32,
}

/// What a paired comparison reports while it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum PairEvent {
    /// One run measured (`pair` 1-based, set-aside pairs counted).
    Ran {
        role: &'static str,
        pair: u32,
        samples_per_sec: f64,
    },
    /// A pair left out (see [`SetAside`]).
    SetAside(SetAside),
    /// Others keep `others` of the host's `cores` busy: waiting up to `limit_s`.
    Waiting {
        others: f64,
        cores: f64,
        limit_s: u64,
    },
    /// The wait ended: the machine quieted down, or the limit passed.
    Waited { seconds: f64, quiet: bool },
    /// A run used saw load and the call is open at `pairs` pairs, its
    /// median (`median`) still reaching 1 + min_gain: up to `up_to` pairs
    /// ([`PairRule::first`]).
    PairsAdded { pairs: u32, up_to: u32, median: f64 },
}

/// When a paired comparison stops: `decide` says after each pair used
/// (`Undecided`: one more), and at most `max_pairs` pairs are used.
#[derive(Clone, Copy)]
pub struct PairRule {
    pub decide: fn(&PairedRatio, &crate::config::DecisionPolicy) -> Verdict,
    pub max_pairs: u32,
    /// The rule and its cap once a run the figures use saw load; `None`:
    /// `decide` and `max_pairs` throughout.
    pub beside_load: Option<(DecideFn, u32)>,
}

type DecideFn = fn(&PairedRatio, &crate::config::DecisionPolicy) -> Verdict;

impl PairRule {
    /// The decision rule: `stats::decide` (or the cheaper rule) up to
    /// `[decision] max_repeats`.
    pub fn turn(cheaper: bool, policy: &Policy) -> PairRule {
        PairRule {
            decide: if cheaper {
                stats::decide_cheaper
            } else {
                stats::decide
            },
            max_pairs: policy.decision.max_repeats,
            beside_load: None,
        }
    }

    /// A change's first comparison: [`PairRule::turn`] with the futility
    /// look at the cap (`stats::decide_first`), and, once a run it
    /// uses saw load, an open call still pointing up at `max_repeats` gets
    /// more pairs, up to `[decision] max_repeats_beside_load`
    /// (`stats::decide_beside_load`; the cheaper rule never does). A second
    /// comparison does not: beside load it already stands unless refuted.
    pub fn first(cheaper: bool, policy: &Policy) -> PairRule {
        let d = &policy.decision;
        let turn = PairRule::turn(cheaper, policy);
        PairRule {
            // The futility look at the cap is a first comparison's: a
            // second one has its own look there (`stats::confirmed`).
            decide: if cheaper {
                turn.decide
            } else {
                stats::decide_first
            },
            beside_load: (!cheaper && d.max_repeats_beside_load > d.max_repeats).then_some((
                stats::decide_beside_load as DecideFn,
                d.max_repeats_beside_load,
            )),
            ..turn
        }
    }

    /// Exactly `n` pairs.
    pub fn fixed(n: u32) -> PairRule {
        PairRule {
            decide: |_, _| Verdict::Undecided,
            max_pairs: n,
            beside_load: None,
        }
    }

    /// The rule and cap in force: `beside_load`'s once a used run saw load.
    fn now(&self, cand: &[Measurement], inc: &[Measurement]) -> (DecideFn, u32) {
        match self.beside_load {
            Some(b) if runs_saw_load(cand, inc) => b,
            _ => (self.decide, self.max_pairs),
        }
    }

    /// The final comparison: pairs until the interval's high end is within
    /// `[decision] final_spread` times its low end (at least `repeats`, and 3),
    /// at most `[decision] final_max_pairs`.
    pub fn final_comparison(policy: &Policy) -> PairRule {
        PairRule {
            decide: |pr, d| {
                let enough = pr.pairs() >= d.repeats.max(3) as usize;
                let narrow = pr.ci[0] > 0.0 && pr.ci[1] / pr.ci[0] <= d.final_spread;
                if enough && narrow {
                    Verdict::Keep
                } else {
                    Verdict::Undecided
                }
            },
            max_pairs: policy.decision.final_max_pairs.max(3),
            beside_load: None,
        }
    }
}

/// Runs candidate and incumbent alternately — A B, B A, A B … — writing each
/// side's files before its run, until a first comparison's rule decides
/// ([`PairRule::first`]; or `pairs_fixed` pairs when given). The caller puts
/// the right files in place afterwards.
#[allow(clippy::too_many_arguments)]
pub async fn measure_interleaved(
    bencher: &dyn Measure,
    root: &Path,
    candidate: &FileSet,
    incumbent: &FileSet,
    policy: &Policy,
    pairs_fixed: Option<u32>,
    interrupt: &Interrupt,
    mut on_run: impl FnMut(&'static str, u32, f64),
) -> Result<Paired, PairFailure> {
    let rule = pairs_fixed.map_or_else(|| PairRule::first(false, policy), PairRule::fixed);
    measure_pairs(
        rule,
        bencher,
        root,
        candidate,
        incumbent,
        policy,
        interrupt,
        |e| {
            if let PairEvent::Ran {
                role,
                pair,
                samples_per_sec,
            } = e
            {
                on_run(role, pair, samples_per_sec)
            }
        },
    )
    .await
}

/// Candidate and incumbent, interleaved, under `rule`. A candidate's run
/// whose window passes [`crate::bench::window::CUT_AFTER`] times the
/// incumbent's is cut there (`Measurement::window_cut`). A pair whose two runs
/// saw clearly different loads from other processes (`bench::load::uneven`)
/// is set aside and another measured in its place, up to `[decision]
/// max_set_aside` such pairs (past that they are used as they are). After a
/// run on a busy machine the next pair waits, up to `[decision] busy_wait_s`,
/// for the load to fall under a quarter of the job's cores. A pair at the
/// rule's cap still undecided is a revert (not proven faster); the rule
/// and its cap are `rule.beside_load`'s once a used run saw load.
#[allow(clippy::too_many_arguments)]
pub async fn measure_pairs(
    rule: PairRule,
    bencher: &dyn Measure,
    root: &Path,
    candidate: &FileSet,
    incumbent: &FileSet,
    policy: &Policy,
    interrupt: &Interrupt,
    mut on: impl FnMut(PairEvent),
) -> Result<Paired, PairFailure> {
    let d = &policy.decision;
    let (mut cand, mut inc, mut set_aside) = (Vec::new(), Vec::<Measurement>::new(), Vec::new());
    let mut set_aside_runs = Vec::new();
    let (mut runs, mut waited_s, mut k) = (0, 0.0, 0u32);
    let mut last_busy = false;
    let mut added = false;
    while (cand.len() as u32) < rule.now(&cand, &inc).1 {
        if last_busy {
            waited_s += wait_for_quiet(bencher, policy, interrupt, &mut on).await;
        }
        // The order alternates over every pair measured, set-aside ones
        // too: a pair set aside leaves two used pairs in the same order,
        // which only matters under a drift, and the load that set it aside
        // is the larger error.
        let order: [(&'static str, &FileSet); 2] = if k % 2 == 0 {
            [("incumbent", incumbent), ("candidate", candidate)]
        } else {
            [("candidate", candidate), ("incumbent", incumbent)]
        };
        k += 1;
        last_busy = false;
        for (role, files) in order {
            files.apply(root).map_err(|e| PairFailure {
                role,
                error: BenchError::Files {
                    role: role.into(),
                    root: root.to_owned(),
                    message: e.to_string(),
                },
                runs,
            })?;
            runs += 1;
            // A candidate's window is cut at a multiple of the incumbent's
            // (`bench::window::cap_s`): a run that slow decides nothing more
            // by running on. The incumbent's side always has a run by then.
            let capped = (role == "candidate")
                .then(|| crate::bench::window::cap_s(&inc))
                .flatten()
                .and_then(|cap| bencher.with_window_cap(cap));
            let m = capped
                .as_deref()
                .unwrap_or(bencher)
                .measure(Mode::Throughput, interrupt)
                .await
                .map_err(|error| PairFailure { role, error, runs })?;
            on(PairEvent::Ran {
                role,
                pair: k,
                samples_per_sec: m.samples_per_sec,
            });
            last_busy |= crate::bench::load::busy_run(&m);
            if role == "candidate" {
                cand.push(m)
            } else {
                inc.push(m)
            }
        }
        let (c, i) = (
            cand.last().expect("measured"),
            inc.last().expect("measured"),
        );
        if crate::bench::load::uneven(c, i).is_some() && set_aside.len() < d.max_set_aside as usize
        {
            let (c, i) = (cand.pop().expect("measured"), inc.pop().expect("measured"));
            let aside = SetAside {
                pair: k,
                candidate_sps: c.samples_per_sec,
                incumbent_sps: i.samples_per_sec,
                candidate_others: c.others_cores(),
                incumbent_others: i.others_cores(),
            };
            on(PairEvent::SetAside(aside.clone()));
            set_aside.push(aside);
            set_aside_runs.extend([i, c]);
            continue;
        }
        let pr = PairedRatio::new(&sps(&cand), &sps(&inc), d.confidence);
        let (decide, cap) = rule.now(&cand, &inc);
        if decide(&pr, d) != Verdict::Undecided {
            break;
        }
        if !added && pr.pairs() as u32 >= rule.max_pairs && cap > rule.max_pairs {
            added = true;
            on(PairEvent::PairsAdded {
                pairs: pr.pairs() as u32,
                up_to: cap,
                median: pr.median,
            });
        }
    }
    let pr = PairedRatio::new(&sps(&cand), &sps(&inc), d.confidence);
    let mut v = (rule.now(&cand, &inc).0)(&pr, d);
    if v == Verdict::Undecided {
        v = Verdict::Revert;
    }
    Ok(Paired {
        candidate: cand,
        incumbent: inc,
        ratio: pr,
        verdict: v,
        set_aside,
        waited_s,
        set_aside_runs,
        again: None,
    })
}

/// A paired comparison as a turn's `bench.json` holds it.
fn turn_bench(p: &Paired) -> TurnBench {
    TurnBench {
        candidate: p.candidate.clone(),
        incumbent: p.incumbent.clone(),
        ratios: p.ratio.ratios.clone(),
        median: Some(p.ratio.median),
        ci: Some(p.ratio.ci),
        verdict: Some(p.verdict),
        set_aside_runs: p.set_aside_runs.clone(),
        again: p.again.as_deref().map(|a| Box::new(turn_bench(a))),
    }
}

/// The event the run log and the terminal get for a pair's event: a run of
/// a turn (`turn`), the final's runs are not listed one by one.
pub(crate) fn pair_event(turn: Option<u32>, e: PairEvent) -> Option<Event> {
    Some(match e {
        PairEvent::Ran {
            role,
            pair,
            samples_per_sec,
        } => Event::Measured {
            turn: turn?,
            role: role.into(),
            pair,
            samples_per_sec,
        },
        PairEvent::SetAside(a) => Event::PairSetAside {
            turn,
            pair: a.pair,
            candidate_others: a.candidate_others,
            incumbent_others: a.incumbent_others,
        },
        PairEvent::Waiting {
            others,
            cores,
            limit_s,
        } => Event::MachineBusy {
            turn,
            others,
            cores,
            limit_s,
        },
        PairEvent::Waited { seconds, quiet } => Event::MachineWaited {
            turn,
            waited_s: seconds,
            quiet,
        },
        PairEvent::PairsAdded {
            pairs,
            up_to,
            median,
        } => Event::PairsAdded {
            turn,
            pairs,
            up_to,
            median,
        },
    })
}

/// Waits while other processes keep at least a quarter of the host's cores
/// busy, up to `[decision] busy_wait_s` (0: never), asking the measure for
/// the load about once a second. Returns the seconds waited.
pub async fn wait_for_quiet(
    bencher: &dyn Measure,
    policy: &Policy,
    interrupt: &Interrupt,
    on: &mut impl FnMut(PairEvent),
) -> f64 {
    let limit = policy.decision.busy_wait_s;
    if limit == 0 {
        return 0.0;
    }
    let start = std::time::Instant::now();
    let mut announced = false;
    let quiet = loop {
        let Ok(Some((others, cores))) = bencher.load_now().await else {
            break true;
        };
        if others < crate::bench::load::BUSY_SHARE * cores || interrupt.is_raised() {
            break true;
        }
        if start.elapsed().as_secs_f64() >= limit as f64 {
            break false;
        }
        if !announced {
            on(PairEvent::Waiting {
                others,
                cores,
                limit_s: limit,
            });
            announced = true;
        }
        // The probe itself takes a second on the machine; a scripted one
        // answers at once, so pace it.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let seconds = start.elapsed().as_secs_f64();
    if announced {
        on(PairEvent::Waited { seconds, quiet });
        seconds
    } else {
        0.0
    }
}

fn sps(ms: &[Measurement]) -> Vec<f64> {
    ms.iter().map(|m| m.samples_per_sec).collect()
}

fn median_share(ms: &[Measurement]) -> Option<f64> {
    let v: Vec<f64> = ms.iter().filter_map(|m| m.data_wait_share).collect();
    (!v.is_empty()).then(|| stats::median(&v))
}

/// What the article lists when data_wait is small: compute-side candidates.
pub fn compute_side_advice() -> Vec<String> {
    vec![
        "optimizer.zero_grad(set_to_none=True)".into(),
        "torch.no_grad() (or inference_mode) for evaluation".into(),
        "torch.backends.cudnn.benchmark = True".into(),
        "mixed precision (torch.autocast / AMP)".into(),
    ]
}

pub struct StartOptions {
    pub policy_path: PathBuf,
    pub policy: Policy,
    pub iterations: Option<u32>,
    /// Start even when the editable files have uncommitted changes.
    pub allow_dirty: bool,
    /// Record each kept change as a commit on `tuneloop/<run-id>`.
    pub git_commits: bool,
}

/// A running tuning session.
pub struct Session<'a> {
    ws: &'a Workspace,
    policy: Policy,
    policy_path: PathBuf,
    agent: Agent,
    /// What measures the project: the [`Bencher`], or a scripted one in tests.
    bencher: Arc<dyn Measure>,
    store: RunStore,
    view: &'a mut (dyn FnMut(&Event) + Send),
    interrupt: Interrupt,
    root: PathBuf,
    editable: Vec<String>,
    max_iterations: u32,
    started: Instant,
    started_at: String,
    baseline_files: FileSet,
    incumbent_files: FileSet,
    baseline_samples: Vec<f64>,
    /// baseline/bench.json as written (the report is assembled from it).
    baseline_bench: BaselineBench,
    baseline_share: Option<f64>,
    ceiling: Option<f64>,
    incumbent: Measurement,
    incumbent_sps: f64,
    profile_table: String,
    /// Command mode: what the user's command itself writes while measured
    /// (logs, checkpoints, `lightning_logs/`), never an agent's change.
    command_outputs: Vec<PathBuf>,
    /// The files tuneloop's own output goes into ([`verify::own_output_files`]),
    /// found once: the redirections and the pipeline are set when it starts.
    own_outputs: Vec<PathBuf>,
    rows: Vec<TurnRow>,
    /// The streak of turns not kept that ended the climb, while the builtin
    /// agent's cheaper neighbours still get their turns.
    streak: Option<String>,
    bench_runs: u32,
    /// Each throughput run's seconds, process start to end (the pace of
    /// the time-left estimate).
    run_secs: Vec<f64>,
    cost: f64,
    agent_ms: u64,
    /// Continues an interrupted run: the baseline is already measured.
    resumed: bool,
    /// The numerics guard's calibration run was tried (`calibrate_once`).
    calibration_tried: bool,
    /// `--git-commits`: each kept change becomes a commit on this branch.
    git_branch: Option<String>,
    _lock: Lock,
}

/// Starts a run: creates the run folder, takes the lock, and returns the
/// session; [`Session::run`] does the work.
pub fn prepare<'a>(
    ws: &'a Workspace,
    opts: StartOptions,
    agent: Agent,
    interrupt: Interrupt,
    view: &'a mut (dyn FnMut(&Event) + Send),
) -> Result<Session<'a>, LoopError> {
    let root = std::fs::canonicalize(&ws.project_root)
        .at("cannot find the project folder", &ws.project_root)?;
    let editable = ws.file.project.editable.clone();
    // A loop with nothing to tune would only burn time: find the loader first.
    let mut found = 0;
    for f in editable.iter().filter(|f| f.ends_with(".py")) {
        let src = std::fs::read_to_string(root.join(f)).at("cannot read", &root.join(f))?;
        match edit::scan_source(f, &src) {
            Ok(s) => found += s.len(),
            Err(e) => {
                return Err(LoopError::Config(format!(
                    "{}: {e}",
                    root.join(f).display()
                )))
            }
        }
    }
    if found == 0 && ws.file.bench.entry.is_some() {
        return Err(LoopError::Config(format!(
            "no DataLoader call found in the editable files ({}) of {}\n  hint: list the file that builds your DataLoader in [project] editable",
            editable.join(", "),
            root.display()
        )));
    }
    agent
        .preflight()
        .map_err(|e| LoopError::Agent(e.to_string()))?;
    let runs_dir = ws.runs_dir();
    let lock = Lock::acquire(&runs_dir, "start").map_err(|e| LoopError::Config(e.to_string()))?;
    if let Some((dir, state)) = crate::run_folder::unfinished_run(&runs_dir) {
        let id = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        return Err(LoopError::Config(format!(
            "run {id} was {state} before it finished, and the project may hold its files\n  hint: `tuneloop resume {id}` continues it; `tuneloop restore {id} --to best` (or `--to baseline`) puts the files back and closes it"
        )));
    }
    crate::git::check_clean(&root, &editable, opts.allow_dirty)
        .map_err(|e| LoopError::Config(e.to_string()))?;
    let mut editable = editable;
    if let Some(f) = command_file(ws, &root) {
        if !editable.contains(&f) {
            editable.push(f);
        }
    }
    let store = RunStore::create(&runs_dir).at("cannot create a run folder in", &runs_dir)?;
    let harness = store.dir.join("harness");
    let bencher: Arc<dyn Measure> =
        Arc::new(Bencher::new(ws, &harness).at("cannot write the bench harness to", &harness)?);
    let baseline_files =
        FileSet::capture(&root, &editable).at("cannot read the editable files in", &root)?;
    let saved = store.dir.join("baseline").join("files");
    baseline_files
        .save(&saved)
        .at("cannot save the baseline files to", &saved)?;
    let saved = store.dir.join("incumbent");
    baseline_files
        .save(&saved)
        .at("cannot save the incumbent files to", &saved)?;
    let max_iterations = opts.iterations.unwrap_or(opts.policy.loop_.max_iterations);
    let git_branch = if opts.git_commits {
        Some(format!("tuneloop/{}", store.id))
    } else {
        None
    };
    Ok(Session {
        ws,
        policy: opts.policy,
        policy_path: opts.policy_path,
        agent,
        bencher,
        store,
        view,
        interrupt,
        root,
        editable,
        max_iterations,
        started: Instant::now(),
        started_at: chrono::Local::now().to_rfc3339(),
        incumbent_files: baseline_files.clone(),
        baseline_files,
        baseline_samples: vec![],
        baseline_bench: BaselineBench::default(),
        baseline_share: None,
        ceiling: None,
        incumbent: Measurement::default(),
        incumbent_sps: 0.0,
        profile_table: String::new(),
        command_outputs: Vec::new(),
        own_outputs: verify::own_output_files(),
        rows: vec![],
        streak: None,
        bench_runs: 0,
        run_secs: Vec::new(),
        cost: 0.0,
        agent_ms: 0,
        resumed: false,
        calibration_tried: false,
        git_branch,
        _lock: lock,
    })
}

/// Command mode: the workspace file, when it sits at the project root, is
/// one of the files a turn may change: a knob the command passes (`-j 0`)
/// is changed in its `[bench] run` ([`edit::command_line`]). Carried with
/// the editable files, it is measured, kept, reverted byte for byte,
/// resumed and restored like them; the bench reads the command from it
/// before each run.
fn command_file(ws: &Workspace, root: &Path) -> Option<String> {
    ws.file.bench.run.as_ref()?;
    let dir = std::fs::canonicalize(&ws.dir).ok()?;
    (dir == root).then(|| edit::command_line::RUN_FILE.to_string())
}

/// Rebuilds a session from an interrupted run's folder: the completed turns
/// (those with a `decision.json`), the baseline, and the incumbent (the
/// candidate files of the last kept turn). A turn without a decision is
/// discarded and done again; the files any agent touched are put back first.
pub fn resume<'a>(
    ws: &'a Workspace,
    run_dir: &Path,
    interrupt: Interrupt,
    view: &'a mut (dyn FnMut(&Event) + Send),
) -> Result<Session<'a>, LoopError> {
    let runs_dir = ws.runs_dir();
    let lock = Lock::acquire(&runs_dir, "resume").map_err(|e| LoopError::Config(e.to_string()))?;
    let run = RunRecord::read(run_dir).map_err(|e| LoopError::Config(e.to_string()))?;
    if run.state.is_closed() {
        return Err(LoopError::Config(format!(
            "run {} is {}; nothing to resume",
            run_dir.display(),
            run.state
        )));
    }
    let policy = run.policy.clone();
    let editable = run.editable.clone();
    let root = run.project_root();
    let outputs = verify::load_command_outputs(run_dir, &root);
    let agent = Agent::from_policy(&policy, ws);
    agent
        .preflight()
        .map_err(|e| LoopError::Agent(e.to_string()))?;
    let rec = Recovered::read(run_dir, &editable)?;
    // Put the project back as it was before the interrupted turn began.
    if let Ok(snap) = ProjectSnapshot::load(&run_dir.join("snapshot")) {
        snap.restore_others(&editable);
    }
    rec.incumbent_files
        .apply(&root)
        .at("cannot put the incumbent's files back in", &root)?;
    let saved = run_dir.join("incumbent");
    rec.incumbent_files
        .save(&saved)
        .at("cannot save the incumbent files to", &saved)?;
    let store = RunStore::open(run_dir).at("cannot open the run log in", run_dir)?;
    let harness = run_dir.join("harness");
    let mut bencher: Arc<dyn Measure> =
        Arc::new(Bencher::new(ws, &harness).at("cannot write the bench harness to", &harness)?);
    // The baseline's runs say how many batches every run of this run times:
    // one whole epoch, or fewer steps than configured for a short command.
    // Its stretch, not its timed steps: a window lengthened by time holds
    // several stretches, and one ended by time fewer steps.
    let timed = rec
        .baseline_bench
        .runs
        .first()
        .and_then(|m| m.stretch_steps());
    if let Some(steps) = timed.filter(|s| Some(*s) != bencher.steps()) {
        bencher = bencher.with_steps(steps).unwrap_or(bencher);
    }
    let git_branch = run.git_branch.clone();
    Ok(Session {
        ws,
        policy_path: PathBuf::from(&run.policy_path),
        max_iterations: run.max_iterations(),
        policy,
        agent,
        bencher,
        store,
        view,
        interrupt,
        root,
        editable,
        started: Instant::now(),
        started_at: run.started_at.clone(),
        incumbent_files: rec.incumbent_files,
        baseline_files: rec.baseline_files,
        baseline_samples: rec.baseline_samples,
        baseline_bench: rec.baseline_bench,
        baseline_share: rec.baseline_share,
        ceiling: rec.ceiling,
        incumbent: rec.incumbent,
        incumbent_sps: rec.incumbent_sps,
        profile_table: rec.profile_table,
        command_outputs: outputs,
        own_outputs: verify::own_output_files(),
        bench_runs: rec.bench_runs,
        // A resumed run knows no run's seconds until its first turn's runs.
        run_secs: Vec::new(),
        cost: crate::turn::total_cost_usd(&rec.rows),
        agent_ms: rec.rows.iter().map(|r| r.agent.duration_ms).sum(),
        rows: rec.rows,
        // Found again from the rows by the stop rule, before the next turn.
        streak: None,
        resumed: true,
        calibration_tried: false,
        git_branch,
        _lock: lock,
    })
}

/// What a run folder says about a run's progress.
pub struct Recovered {
    pub baseline_files: FileSet,
    pub incumbent_files: FileSet,
    pub baseline_samples: Vec<f64>,
    pub baseline_bench: BaselineBench,
    pub baseline_share: Option<f64>,
    pub ceiling: Option<f64>,
    pub incumbent: Measurement,
    pub incumbent_sps: f64,
    pub profile_table: String,
    pub rows: Vec<TurnRow>,
    pub bench_runs: u32,
}

/// The editable files of a run's best state: the candidate files of its last
/// kept turn (decision.json is the commit point), else the baseline.
pub fn best_files(run_dir: &Path, editable: &[String]) -> std::io::Result<FileSet> {
    let last_kept = run_folder::decided_turns(run_dir)
        .into_iter()
        .rev()
        .find(|(_, row)| row.decision.is_kept());
    match last_kept {
        Some((t, _)) => FileSet::load(&t.candidate_dir(), editable),
        None => FileSet::load(&run_dir.join("baseline").join("files"), editable),
    }
}

impl Recovered {
    pub fn read(run_dir: &Path, editable: &[String]) -> Result<Recovered, LoopError> {
        let baseline_files = FileSet::load(&run_dir.join("baseline").join("files"), editable)
            .map_err(|e| {
                LoopError::Config(format!(
                    "{}: the baseline files are missing: {e}",
                    run_dir.display()
                ))
            })?;
        let mut rows: Vec<TurnRow> = Vec::new();
        let mut incumbent_files = baseline_files.clone();
        let mut incumbent_meas: Option<Measurement> = None;
        for t in run_folder::turn_folders(run_dir) {
            let Some(row) = t.decision() else {
                // An unfinished turn: done again on resume.
                let _ = std::fs::remove_dir_all(&t.dir);
                continue;
            };
            if row.decision.is_kept() {
                incumbent_files = FileSet::load(&t.candidate_dir(), editable).map_err(|e| {
                    LoopError::Config(format!("{}: kept files missing: {e}", t.dir.display()))
                })?;
                incumbent_meas = t
                    .bench()
                    .ok()
                    .and_then(|b| b.candidate.last().cloned())
                    .map(|mut m| {
                        m.data_wait_share = row.data_wait_share;
                        m
                    });
            }
            rows.push(row);
        }
        let bench = BaselineBench::read(run_dir).map_err(|e| {
            LoopError::Config(format!(
                "{}: the baseline was not measured yet; start a new run ({e})",
                run_dir.display()
            ))
        })?;
        let base_runs = bench.runs.clone();
        let baseline_samples = sps(&base_runs);
        let baseline_share = median_share(&base_runs);
        let mut base_inc = base_runs.last().cloned().unwrap_or_default();
        base_inc.data_wait_share = baseline_share;
        let incumbent_sps = rows
            .iter()
            .rev()
            .find(|r| r.decision.is_kept())
            .and_then(|r| r.after_sps)
            .unwrap_or_else(|| stats::median(&baseline_samples));
        Ok(Recovered {
            bench_runs: bench.run_count() + rows.iter().map(|r| r.runs).sum::<u32>(),
            ceiling: crate::bench::median_ceiling(&base_runs),
            baseline_files,
            incumbent_files,
            baseline_samples,
            baseline_bench: bench,
            baseline_share,
            incumbent: incumbent_meas.unwrap_or(base_inc),
            incumbent_sps,
            profile_table: std::fs::read_to_string(run_dir.join("baseline").join("profile.txt"))
                .unwrap_or_default(),
            rows,
        })
    }
}

impl<'a> Session<'a> {
    pub fn run_dir(&self) -> &Path {
        &self.store.dir
    }

    /// tuneloop's own run folders are not the project's files.
    /// Command mode: where the measured loader's knobs are set, as they are now.
    fn knob_sources(&self) -> Vec<String> {
        let Some(site) = self.incumbent.call_site.as_deref() else {
            return vec![];
        };
        crate::agent::builtin::measured_knob_site(&self.root, &self.editable, None, Some(site))
            .map(|s| s.describe_knobs())
            .unwrap_or_default()
    }

    /// The measured loader's knobs no turn can change, when the incumbent's
    /// data_wait is still at least the policy's share (the loader was not
    /// settled, so they were what was left on the table).
    fn not_editable_knobs(&self) -> Vec<edit::knobs::NotEditable> {
        let share = self.incumbent.data_wait_share.unwrap_or(0.0);
        if share < self.policy.decision.stop_when_data_wait_below {
            return vec![];
        }
        crate::agent::builtin::measured_knob_site(
            &self.root,
            &self.editable,
            None,
            self.incumbent.call_site.as_deref(),
        )
        .map(|s| s.not_editable(&self.editable))
        .unwrap_or_default()
        .into_iter()
        .filter(|n| self.policy.loop_.knobs.contains(&n.knob))
        .collect()
    }

    fn snapshot_skip(&self) -> Vec<PathBuf> {
        std::fs::canonicalize(self.ws.runs_dir())
            .into_iter()
            .chain(self.command_outputs.iter().cloned())
            .chain(self.own_outputs.iter().cloned())
            .collect()
    }

    fn emit(&mut self, ev: Event) {
        send(&mut self.store, &mut *self.view, &ev);
    }

    fn phase(&mut self, phase: &str, turn: Option<u32>, detail: impl Into<String>) {
        self.emit(Event::Phase {
            phase: phase.into(),
            turn,
            detail: detail.into(),
        });
    }

    fn write_run_json(&self, state: RunState) -> Result<(), LoopError> {
        let r = RunRecord {
            format_version: run_folder::RUN_FORMAT_VERSION,
            run_id: self.store.id.clone(),
            state,
            started_at: self.started_at.clone(),
            workspace: self.ws.dir.display().to_string(),
            project_root: self.root.display().to_string(),
            editable: self.editable.clone(),
            bench: self.ws.file.bench.clone(),
            python: self.ws.python(),
            agent: self.agent.name().into(),
            policy_path: self.policy_path.display().to_string(),
            policy: self.policy.clone(),
            max_iterations: Some(self.max_iterations),
            git_branch: self.git_branch.clone(),
            environment: RunEnvironment {
                cpu_count: self.incumbent.cpu_count,
                device: self.incumbent.device.clone(),
                torch_version: self.incumbent.torch_version.clone(),
                cuda_available: self.incumbent.cuda_available,
                world_size: self.incumbent.world_size.unwrap_or(1),
                os: std::env::consts::OS.into(),
                tuneloop_version: env!("CARGO_PKG_VERSION").into(),
            },
        };
        r.write(&self.store.dir)
            .at("cannot write", &RunRecord::path(&self.store.dir))
    }

    fn check_interrupt(&self) -> Result<(), LoopError> {
        if self.interrupt.is_raised() {
            Err(LoopError::Interrupted)
        } else {
            Ok(())
        }
    }

    /// The whole run. On Ctrl-C it restores the incumbent's files and writes
    /// the log and the report before returning `Interrupted`.
    pub async fn run(mut self) -> Result<RunReport, (LoopError, Option<PathBuf>)> {
        let dir = self.store.dir.clone();
        let result = self.run_inner().await;
        match result {
            Ok(r) => Ok(r),
            Err(e) => {
                // Whatever happened, the project ends with the incumbent's files.
                let _ = self.incumbent_files.apply(&self.root);
                let reason = match &e {
                    LoopError::Interrupted => "interrupted".to_string(),
                    other => format!("error: {other}"),
                };
                self.emit(Event::Stopped {
                    reason: reason.clone(),
                });
                let state = if matches!(e, LoopError::Interrupted) {
                    RunState::Interrupted
                } else {
                    RunState::Failed
                };
                let _ = self.write_run_json(state);
                if !self.baseline_samples.is_empty() {
                    let _ = self.write_report(&reason, matches!(e, LoopError::Interrupted), None);
                }
                Err((e, Some(dir)))
            }
        }
    }

    async fn run_inner(&mut self) -> Result<RunReport, LoopError> {
        if self.resumed {
            self.emit(Event::RunResumed {
                run_id: self.store.id.clone(),
                completed_turns: self.rows.len() as u32,
            });
            self.write_run_json(RunState::Running)?;
        } else {
            self.emit(Event::RunStarted {
                run_id: self.store.id.clone(),
                project: self.root.display().to_string(),
                agent: self.agent.name().into(),
                policy: self.policy_path.display().to_string(),
                world_size: if self.ws.file.bench.launcher.is_some() {
                    self.ws.file.bench.nproc
                } else {
                    1
                },
            });
            self.write_run_json(RunState::Running)?;
            self.baseline().await?;
            // Feature `libtorch` only (a no-op otherwise): runs/<id>/probe.json.
            crate::probe::after_baseline(&self.store.dir);
            self.write_run_json(RunState::Running)?;
        }

        let mut stop_reason: Option<String> = None;
        if let Some(share) = self.baseline_share.filter(|_| self.rows.is_empty()) {
            let (warn, stop) = judge::baseline_stop(Some(share), &self.policy);
            if warn {
                self.emit(Event::LowDataWait {
                    share,
                    advice: compute_side_advice(),
                });
            }
            stop_reason = self.unless_compute(stop).map(|r| r.to_string());
        }
        let mut turn = self.rows.last().map(|r| r.turn).unwrap_or(0);
        while stop_reason.is_none() {
            self.check_interrupt()?;
            if let Some(r) = self.stop_rule(turn) {
                stop_reason = Some(r);
                break;
            }
            turn += 1;
            if let Some(r) = self.turn(turn).await? {
                stop_reason = Some(r);
            }
        }
        let mut stop_reason = stop_reason.unwrap_or_default();
        // The command's own length cut a run short: say which flag runs longer,
        // when a loader turn was in play (the hint is about worker counts; a
        // compute-only run measured within the command is said elsewhere).
        let loader_turns = self
            .rows
            .iter()
            .any(|r| crate::edit::compute::knob_of_change(&r.change).is_none());
        if let Some(hint) = self.bencher.length_hint().filter(|_| loader_turns) {
            stop_reason.push_str(&format!("; {hint}"));
        }
        self.emit(Event::Stopped {
            reason: stop_reason.clone(),
        });
        let final_ = self.final_measurement().await?;
        self.whole_command().await?;
        self.incumbent_files
            .apply(&self.root)
            .at("cannot put the best files back in", &self.root)?;
        let report = self.write_report(&stop_reason, false, final_)?;
        self.write_run_json(RunState::Finished)?;
        Ok(report)
    }

    /// The stop rule's reason to stop, if any. With the builtin agent a streak
    /// of turns not kept ends the climb, and the cheaper neighbours still
    /// come: a cheaper neighbour gains nothing by design ("not kept" is its
    /// usual answer, the incumbent being the cheapest), and there are few.
    fn stop_rule(&mut self, turns_done: u32) -> Option<String> {
        let progress = judge::Progress {
            turns_done,
            max_iterations: self.max_iterations,
            rows: &self.rows,
            cost_usd: self.cost,
            elapsed: self.started.elapsed(),
            incumbent_share: self.incumbent.data_wait_share,
            incumbent_sps: self.incumbent_sps,
            ceiling_sps: self.ceiling,
            cheaper_after_streak: self.agent.has_cheaper_neighbours(),
        };
        // Only a streak met during the climb ends it (after a cheaper
        // neighbour the climb is over already, and the streak changes nothing).
        let climbing = !self
            .rows
            .iter()
            .any(|r| crate::agent::cheaper::is_cheaper(&r.change));
        if self.streak.is_none() && progress.cheaper_after_streak && climbing {
            self.streak = judge::not_kept_streak(&progress, &self.policy).map(|r| r.to_string());
        }
        let stop = judge::stop_rule(&progress, &self.policy);
        self.unless_compute(stop).map(|r| r.to_string())
    }

    /// A stop for the loader's sake (data_wait small, the step-alone
    /// ceiling reached) is no stop while compute changes are left to try:
    /// those make the step itself faster. Says so (a phase event) until the
    /// first compute turn.
    fn unless_compute(&mut self, stop: Option<judge::StopReason>) -> Option<judge::StopReason> {
        use judge::StopReason as S;
        let loader_only = matches!(
            stop,
            Some(
                S::LowDataWaitAtBaseline { .. }
                    | S::DataWaitInsignificant { .. }
                    | S::NearCeiling { .. }
            )
        );
        if !loader_only || !self.agent.takes_compute() {
            return stop;
        }
        let (left, _) = self.compute_left();
        if left.is_empty() {
            // Every compute change had its turn or has nothing to act on:
            // that, not the loader, is why the run ends here.
            let tally = self.compute_tally();
            return stop.map(|s| match tally {
                Some(tally) => S::ComputeTried {
                    tally,
                    loader: Box::new(s),
                },
                None => s,
            });
        }
        if !self
            .rows
            .iter()
            .any(|r| crate::edit::compute::knob_of_change(&r.change).is_some())
        {
            let names: Vec<&str> = left.iter().map(|k| k.name()).collect();
            self.phase(
                "compute",
                None,
                format!(
                    "{}: the compute-side changes come next ({})",
                    stop.map(|r| r.to_string()).unwrap_or_default(),
                    names.join(", ")
                ),
            );
        }
        None
    }

    /// The compute knobs the agent can still try: with the builtin agent
    /// (alone or in hybrid) those its [`crate::compute::Plan`] can write,
    /// and the plan; with Claude Code every pending one whose part of the
    /// step can win a change's gain ([`crate::compute::pending_worth`]), and
    /// no plan. None while the loader binds ([`crate::compute::gate`]): then
    /// no compute change can move the limit, and the loader's side alone
    /// decides when the run is done.
    fn compute_left(&self) -> (Vec<crate::knob::ComputeKnob>, Option<crate::compute::Plan>) {
        match self.agent.builtin() {
            Some(b) => {
                let plan = crate::compute::plan(
                    &self.policy,
                    &self.rows,
                    &self.incumbent,
                    self.baseline_bench.step_parts().as_ref(),
                    &self.root,
                    &self.ws.file.project.editable,
                    b.preferred_file(),
                );
                (plan.ready.iter().map(|(k, _)| *k).collect(), Some(plan))
            }
            None => (
                crate::compute::pending_worth(
                    &self.policy,
                    &self.rows,
                    &self.incumbent,
                    self.baseline_bench.step_parts().as_ref(),
                ),
                None,
            ),
        }
    }

    /// The run's compute turns, once none is left to try; `None` while some
    /// are, or when there was none.
    fn compute_tally(&self) -> Option<judge::ComputeTally> {
        if !self.agent.takes_compute() {
            return None;
        }
        let (left, plan) = self.compute_left();
        if !left.is_empty() {
            return None;
        }
        let passed = crate::compute::not_tried(
            &self.policy,
            &self.rows,
            &self.incumbent,
            self.baseline_bench.step_parts().as_ref(),
            plan.as_ref(),
            "",
        );
        // Knobs held back while the loader binds are not "not applicable":
        // the report names them with why.
        let binds = crate::compute::gate_for(&self.policy, &self.incumbent)
            .err()
            .map(|b| b.to_string());
        let skipped = passed
            .iter()
            .filter(|n| binds.as_ref() != Some(&n.why))
            .count();
        judge::ComputeTally::of(&self.rows, skipped)
    }

    /// The enabled compute knobs the run ends without trying, and why.
    fn compute_not_tried(&self, stop_reason: &str) -> Vec<crate::compute::NotTried> {
        if !self.agent.takes_compute() {
            return Vec::new();
        }
        let turns = self.rows.last().map_or(0, |r| r.turn);
        let ended = if turns >= self.max_iterations {
            format!(
                "iteration limit {}; raise [loop] max_iterations or pass --iterations",
                self.max_iterations
            )
        } else {
            format!("the run ended first: {stop_reason}")
        };
        let (_, plan) = self.compute_left();
        crate::compute::not_tried(
            &self.policy,
            &self.rows,
            &self.incumbent,
            self.baseline_bench.step_parts().as_ref(),
            plan.as_ref(),
            &ended,
        )
    }

    async fn baseline(&mut self) -> Result<(), LoopError> {
        let bdir = self.store.dir.join("baseline");
        let before = match self.bencher.runs_command() {
            true => Some(
                ProjectSnapshot::capture(&self.root, &self.snapshot_skip())
                    .at("cannot snapshot the project folder", &self.root)?,
            ),
            false => None,
        };
        let n = self.policy.decision.baseline_runs;
        // Managed mode on one process: the profiler's steps follow the first
        // throughput run's window in its process (no process of their own).
        // That run then decides the window's widening, as a first run
        // without a profiled measurement does below.
        let mut first: Option<Measurement> = None;
        let mut prof;
        let (bencher, interrupt) = (self.bencher.clone(), self.interrupt.clone());
        if let Some(run) = bencher.measure_then_profile(&interrupt) {
            self.phase(
                "baseline",
                None,
                format!("throughput run 1 of {n}, then the profiler's steps"),
            );
            let clock = Instant::now();
            let run = run.await;
            self.bench_runs += 1;
            prof = match run {
                Ok((m, p)) => {
                    self.run_secs.push(clock.elapsed().as_secs_f64());
                    first = Some(m);
                    Ok(p)
                }
                // A run that failed on its way past the window: the
                // throughput runs below say whether the project measures
                // at all, without a profile, as after a failed profiled run.
                Err(e) => Err(e),
            };
        } else {
            self.phase("baseline", None, "profiled run");
            prof = self.bencher.profile(&self.interrupt).await;
            self.bench_runs += 1;
            if matches!(&prof, Err(e) if e.is_too_few_steps()) && self.fit_steps_to_command() {
                prof = self.bencher.profile(&self.interrupt).await;
                self.bench_runs += 1;
            }
        }
        match &prof {
            Err(BenchError::Interrupted) => return Err(LoopError::Interrupted),
            Err(e) if e.fails_every_run() => return Err(LoopError::Baseline(e.to_string())),
            _ => {}
        }
        // The table is the agent's extra: a profiled run that crashed, timed
        // out or gave no table never ends the baseline (the throughput runs
        // say whether the command can be measured at all).
        let profile_unavailable = crate::bench::table_unavailable(&prof);
        if let Some(reason) = &profile_unavailable {
            self.emit(Event::ProfileUnavailable {
                reason: reason.clone(),
            });
        }
        let mut prof = prof.ok();
        let table = prof.as_ref().map(|p| p.table.clone()).unwrap_or_default();
        std::fs::write(bdir.join("profile.txt"), &table)
            .at("cannot write", &bdir.join("profile.txt"))?;
        self.profile_table = table;
        // Short epochs: the measure as configured, kept for a command too
        // short. Without a profiled run apart (it failed, or its steps
        // followed the first throughput run's window) the first throughput
        // run decides, and is taken again over the widened window.
        let mut configured = prof
            .as_ref()
            .filter(|_| first.is_none())
            .and_then(|p| self.widen_to_epochs(&p.measurement));
        let mut decided = prof.is_some() && first.is_none();
        let mut ms = Vec::new();
        while ms.len() < n as usize {
            self.check_interrupt()?;
            let i = ms.len();
            let run = match first.take() {
                Some(m) => Ok(m),
                None => {
                    self.phase("baseline", None, format!("throughput run {} of {n}", i + 1));
                    let clock = Instant::now();
                    let run = self
                        .bencher
                        .measure(Mode::ThroughputWithCeiling, &self.interrupt)
                        .await;
                    self.bench_runs += 1;
                    self.run_secs.push(clock.elapsed().as_secs_f64());
                    run
                }
            };
            match run {
                Ok(m) if !decided => {
                    decided = true;
                    configured = self.widen_to_epochs(&m);
                    if configured.is_none() {
                        ms.push(m);
                    } else if let Some(p) = prof.as_mut() {
                        // Its run set aside for the widened window: the
                        // profiler's steps had a process of their own.
                        p.measurement.in_first_run = false;
                    }
                }
                Ok(m) => ms.push(m),
                Err(BenchError::Interrupted) => return Err(LoopError::Interrupted),
                Err(e) if e.is_too_few_steps() && i == 0 && configured.is_some() => {
                    if let Some((measure, w)) = configured.take() {
                        self.narrow_back(measure, w);
                    }
                }
                Err(e) => return Err(LoopError::Baseline(e.to_string())),
            }
        }
        self.baseline_bench = BaselineBench {
            profiled: prof.map(|p| p.measurement),
            runs: ms.clone(),
            profile_unavailable,
            calibration: None,
        };
        self.baseline_bench
            .write(&self.store.dir)
            .at("cannot write", &BaselineBench::path(&self.store.dir))?;
        if let Some(before) = before {
            let after = ProjectSnapshot::capture(&self.root, &self.snapshot_skip())
                .at("cannot snapshot the project folder", &self.root)?;
            let outputs = verify::command_outputs(&before, &after, &self.editable);
            verify::save_command_outputs(&self.store.dir, &outputs)
                .at("cannot record the command's outputs in", &self.store.dir)?;
            self.command_outputs = outputs.iter().map(|o| self.root.join(o)).collect();
        }
        self.baseline_samples = sps(&ms);
        self.incumbent_sps = stats::median(&self.baseline_samples);
        self.baseline_share = median_share(&ms);
        self.ceiling = crate::bench::median_ceiling(&ms);
        let mut inc = ms.last().cloned().unwrap_or_default();
        inc.data_wait_share = self.baseline_share;
        self.incumbent = inc;
        self.emit(Event::BaselineMeasured {
            samples: self.baseline_samples.clone(),
            median_sps: self.incumbent_sps,
            data_wait_share: self.baseline_share,
            ceiling_sps: self.ceiling,
            cpu_count: self.incumbent.cpu_count,
            device: self.incumbent.device.clone(),
            torch_version: self.incumbent.torch_version.clone(),
        });
        if let Some(why) = self.bencher.fresh_because() {
            self.emit(Event::Warning {
                message: format!(
                    "runs start as fresh processes, each paying Python's start and `import torch`: {why}"
                ),
            });
        }
        Ok(())
    }

    /// The numerics guard's yardstick, before the first compute change is
    /// judged (a run that never tries one never pays for it): one more run
    /// of the baseline's files with torch's intra-op threads at another
    /// count (1, or 2 when the baseline ran on one), when the baseline's
    /// runs recorded losses. Kept in `baseline/bench.json`; the caller puts
    /// the turn's files back (the record stage does). A run that fails
    /// leaves the guard uncalibrated (its plain tolerances), with a warning.
    pub(super) async fn calibrate_once(&mut self, turn: u32) -> Result<(), LoopError> {
        if self.calibration_tried || self.baseline_bench.calibration.is_some() {
            return Ok(());
        }
        self.calibration_tried = true;
        let ms = self.baseline_bench.runs.clone();
        if !ms.iter().any(|m| !m.losses.is_empty()) {
            return Ok(());
        }
        let threads = match ms.iter().find_map(|m| m.torch_threads) {
            Some(t) if t > 1 => 1,
            _ => 2,
        };
        let Some(measure) = self.bencher.with_threads(threads) else {
            return Ok(());
        };
        self.check_interrupt()?;
        self.baseline_files
            .apply(&self.root)
            .at("cannot put the baseline's files in", &self.root)?;
        self.phase(
            "measuring",
            Some(turn),
            format!(
                "the numerics guard's yardstick: the baseline once more at {threads} thread(s)"
            ),
        );
        let clock = Instant::now();
        let run = measure.measure(Mode::Throughput, &self.interrupt).await;
        self.bench_runs += 1;
        self.run_secs.push(clock.elapsed().as_secs_f64());
        match run {
            Ok(m) => {
                self.baseline_bench.calibration = Some(m);
                self.baseline_bench
                    .write(&self.store.dir)
                    .at("cannot write", &BaselineBench::path(&self.store.dir))?;
            }
            Err(BenchError::Interrupted) => return Err(LoopError::Interrupted),
            Err(e) => self.emit(Event::Warning {
                message: format!(
                    "the numerics guard's calibration run failed ({}); compute changes are held to the plain tolerances",
                    e.short()
                ),
            }),
        }
        Ok(())
    }

    /// A command with fewer training batches than warm-up + `[bench] steps`
    /// (`--max_epochs 1` of a small data set): every run times the steps
    /// its batches leave ([`crate::measure::fit_to_command`], the rule
    /// `tuneloop bench` follows too), and the stop reason names the flag
    /// that gives longer runs (`Measure::length_hint`). Whether the steps
    /// were cut.
    fn fit_steps_to_command(&mut self) -> bool {
        let Some(fit) = crate::measure::fit_to_command(&*self.bencher) else {
            return false;
        };
        let Some(fitted) = self.bencher.with_steps(fit.steps) else {
            return false;
        };
        self.bencher = fitted;
        self.phase(
            "baseline",
            None,
            format!("{}; the profiled run again", fit.describe()),
        );
        true
    }

    /// Short epochs (see `bench::window`): when the profiled run timed no
    /// epoch start and an epoch holds at most twice `[bench] steps`, every
    /// later run times one whole epoch. Returns the measure as configured
    /// and the widening, for [`Session::narrow_back`].
    fn widen_to_epochs(&mut self, first: &Measurement) -> Option<(Arc<dyn Measure>, Widened)> {
        let configured = self.bencher.steps()?;
        let steps = window::whole_epoch_steps(first, configured)?;
        let wide = self.bencher.with_steps(steps)?;
        let before = std::mem::replace(&mut self.bencher, wide);
        self.emit(Event::WindowWidened { configured, steps });
        Some((before, Widened { configured, steps }))
    }

    /// The command ended before a whole epoch after the warm-up: back to the
    /// configured steps, and the builtin agent's cap on workers applies.
    fn narrow_back(&mut self, configured: Arc<dyn Measure>, w: Widened) {
        self.bencher = configured;
        self.emit(Event::WindowNarrowed {
            configured: w.configured,
            steps: w.steps,
        });
    }

    fn finish_turn(
        &mut self,
        row: TurnRow,
        tdir: &Path,
        paired: Option<&Paired>,
    ) -> Result<(), LoopError> {
        let folder = TurnFolder {
            turn: row.turn,
            dir: tdir.to_owned(),
        };
        if let Some(p) = paired {
            folder
                .write_bench(&turn_bench(p))
                .at("cannot write", &tdir.join("bench.json"))?;
        }
        folder
            .write_decision(&row)
            .at("cannot write", &folder.decision_path())?;
        self.rows.push(row.clone());
        self.emit(Event::TurnDecided { row });
        Ok(())
    }

    fn diff(&self, a: &FileSet, b: &FileSet) -> String {
        self.editable
            .iter()
            .map(|f| edit::unified_diff(f, &a.text(f), &b.text(f)))
            .collect()
    }

    /// The estimate of the time left as turn `turn` starts: the turns the
    /// iteration limit still allows at this run's pace, the final
    /// comparison, and in command mode the whole-command rounds.
    fn time_left(&self, turn: u32) -> Option<crate::event::TimeLeft> {
        use crate::bench::{time, whole};
        let d = &self.policy.decision;
        let turn_runs: Vec<u32> = self.rows.iter().map(|r| r.runs).collect();
        let agent_s: Vec<f64> = self
            .rows
            .iter()
            .map(|r| r.agent.duration_ms as f64 / 1000.0)
            .collect();
        let max_wall = self.policy.loop_.max_wall_s;
        time::time_left(&time::Pace {
            turns_left: (self.max_iterations + 1).saturating_sub(turn),
            run_s: &self.run_secs,
            turn_runs: &turn_runs,
            agent_s: &agent_s,
            least_turn_runs: 2 * d.repeats,
            most_turn_runs: 2 * d.max_repeats,
            final_runs: 2 * d.repeats.max(3),
            most_final_runs: 2 * d.final_max_pairs.max(3),
            whole_s: whole::ROUNDS as f64 * 2.0 * self.whole_run_s().unwrap_or(0.0),
            wall_left_s: (max_wall > 0)
                .then(|| max_wall as f64 - self.started.elapsed().as_secs_f64()),
        })
    }

    /// Command mode: about how long one whole run of the command is, at the
    /// baseline's rate; `None` when it will not be timed whole (off, or
    /// clearly past `[bench] whole_command_s`) or its length is unknown.
    fn whole_run_s(&self) -> Option<f64> {
        use crate::bench::whole;
        if !self.bencher.runs_command() {
            return None;
        }
        let limit = whole::limit(self.ws.file.bench.whole_command_s)?.as_secs_f64();
        let ws_file = self.ws.dir.join(crate::config::WORKSPACE_FILE);
        let words = std::fs::read_to_string(ws_file)
            .ok()
            .and_then(|t| crate::edit::command_line::run_words(&t))?;
        let est = self
            .baseline_bench
            .runs
            .iter()
            .filter_map(|m| whole::estimate_s(m, &words, &self.root))
            .fold(None, |a: Option<f64>, e| Some(a.map_or(e, |a| a.min(e))))?;
        (est <= 1.5 * limit).then_some(est.min(limit))
    }

    /// Best vs baseline, interleaved: the headline speedup.
    async fn final_measurement(&mut self) -> Result<Option<FinalBench>, LoopError> {
        if self.incumbent_files == self.baseline_files {
            return Ok(None);
        }
        self.check_interrupt()?;
        let d = &self.policy.decision;
        self.phase(
            "final",
            None,
            format!(
                "best vs baseline, interleaved pairs until the interval is within ×{} (at most {})",
                d.final_spread,
                d.final_max_pairs.max(3)
            ),
        );
        let (root, best, base) = (
            self.root.clone(),
            self.incumbent_files.clone(),
            self.baseline_files.clone(),
        );
        let (bencher, policy, interrupt) = (
            self.bencher.clone(),
            self.policy.clone(),
            self.interrupt.clone(),
        );
        let (store, view) = (&mut self.store, &mut self.view);
        let res = measure_pairs(
            PairRule::final_comparison(&policy),
            &*bencher,
            &root,
            &best,
            &base,
            &policy,
            &interrupt,
            |e| {
                if let Some(ev) = pair_event(None, e) {
                    send(store, &mut **view, &ev);
                }
            },
        )
        .await;
        self.incumbent_files
            .apply(&self.root)
            .at("cannot put the best files back in", &self.root)?;
        match res {
            Ok(p) => {
                self.bench_runs += p.runs();
                let fin = FinalBench {
                    best: p.candidate.clone(),
                    baseline: p.incumbent.clone(),
                    ratios: p.ratio.ratios.clone(),
                    median: Some(p.ratio.median),
                    ci: Some(p.ratio.ci),
                    set_aside: p.set_aside.clone(),
                    spread_bound: Some(policy.decision.final_spread),
                    set_aside_runs: p.set_aside_runs.clone(),
                };
                fin.write(&self.store.dir)
                    .at("cannot write", &FinalBench::path(&self.store.dir))?;
                self.emit(Event::FinalMeasured {
                    baseline_samples: p.inc_sps(),
                    best_samples: p.cand_sps(),
                    speedup: p.ratio.median,
                    ci: p.ratio.ci,
                });
                Ok(Some(fin))
            }
            Err(f) if matches!(f.error, BenchError::Interrupted) => Err(LoopError::Interrupted),
            Err(f) => {
                self.bench_runs += f.runs;
                self.emit(Event::Warning {
                    message: format!("final measurement failed: {}", f.error.short()),
                });
                Ok(None)
            }
        }
    }

    /// Command mode: the user's command timed whole, the baseline's files
    /// against the final's in interleaved rounds (ABBA order, so a drift of
    /// the machine favours neither), when something was kept and one run
    /// ends within `[bench] whole_command_s`. Writes `whole.json`, which the
    /// report reads; a command that fails or runs too long is noted there,
    /// and never fails the session.
    async fn whole_command(&mut self) -> Result<(), LoopError> {
        use crate::bench::whole::{self, Round, WholeCommand};
        if !self.bencher.runs_command() || self.incumbent_files == self.baseline_files {
            return Ok(());
        }
        let Some(limit) = whole::limit(self.ws.file.bench.whole_command_s) else {
            return Ok(());
        };
        self.check_interrupt()?;
        let fin = FinalBench::read(&self.store.dir).unwrap_or_default();
        let starts: Vec<f64> = fin
            .baseline
            .iter()
            .chain(&fin.best)
            .filter_map(|m| m.startup_s)
            .collect();
        let ws_file = self.ws.dir.join(crate::config::WORKSPACE_FILE);
        let words_with = |files: &FileSet, root: &Path| -> Result<Vec<String>, LoopError> {
            files
                .apply(root)
                .at("cannot write the files of a state to", root)?;
            Ok(std::fs::read_to_string(&ws_file)
                .ok()
                .and_then(|t| crate::edit::command_line::run_words(&t))
                .unwrap_or_default())
        };
        let (base, best) = (self.baseline_files.clone(), self.incumbent_files.clone());
        let base_words = words_with(&base, &self.root)?;
        let best_words = words_with(&best, &self.root)?;
        let mut w = WholeCommand {
            baseline_command: shell_words::join(&base_words),
            final_command: shell_words::join(&best_words),
            startup_s: (!starts.is_empty()).then(|| stats::median(&starts)),
            ..Default::default()
        };
        // The baseline's rate says about how long a run is: clearly past the
        // limit, no run is spent finding out.
        let base_runs = if fin.baseline.is_empty() {
            self.baseline_bench.runs.clone()
        } else {
            fin.baseline.clone()
        };
        let estimate = base_runs
            .iter()
            .filter_map(|m| whole::estimate_s(m, &base_words, &self.root))
            .fold(None, |a: Option<f64>, e| Some(a.map_or(e, |a| a.min(e))));
        if let Some(est) = estimate.filter(|e| *e > 1.5 * limit.as_secs_f64()) {
            w.not_timed = Some(format!(
                "about {est:.0} s a run at the baseline's measured rate, longer than {} s ([bench] whole_command_s)",
                limit.as_secs()
            ));
        } else {
            'rounds: for round in 0..whole::ROUNDS {
                let mut r = Round {
                    baseline_s: 0.0,
                    final_s: 0.0,
                };
                let order = if round % 2 == 0 {
                    [true, false]
                } else {
                    [false, true]
                };
                for is_base in order {
                    self.phase(
                        "whole",
                        None,
                        format!(
                            "your command run whole, round {} of {}: {}",
                            round + 1,
                            whole::ROUNDS,
                            if is_base {
                                &w.baseline_command
                            } else {
                                &w.final_command
                            }
                        ),
                    );
                    (if is_base { &base } else { &best })
                        .apply(&self.root)
                        .at("cannot write the files of a state to", &self.root)?;
                    let Some(run) = self.bencher.time_whole(limit, &self.interrupt) else {
                        return Ok(());
                    };
                    match run.await {
                        Ok(s) if is_base => r.baseline_s = s,
                        Ok(s) => r.final_s = s,
                        Err(whole::Failure::Interrupted) => {
                            self.incumbent_files
                                .apply(&self.root)
                                .at("cannot put the best files back in", &self.root)?;
                            return Err(LoopError::Interrupted);
                        }
                        Err(f) => {
                            w.not_timed = Some(f.describe());
                            break 'rounds;
                        }
                    }
                }
                w.rounds.push(r);
            }
            // A run that failed part-way leaves the rounds before it: figures
            // from those only when at least one round finished.
            w.summarise();
        }
        self.incumbent_files
            .apply(&self.root)
            .at("cannot put the best files back in", &self.root)?;
        let line = w.describe(false);
        self.phase("whole", None, format!("your command, run whole: {line}"));
        w.write(&self.store.dir)
            .at("cannot write", &WholeCommand::path(&self.store.dir))?;
        Ok(())
    }

    /// The final state's runs: the final comparison's, else those
    /// [`run_report::unmeasured_final_runs`] names (the same runs a rebuilt
    /// report uses; the incumbent alone is one run, not the state's median).
    fn final_state_runs(&self) -> Vec<Measurement> {
        let best = FinalBench::read(&self.store.dir)
            .map(|f| f.best)
            .unwrap_or_default();
        if !best.is_empty() {
            return best;
        }
        let last_kept = self
            .rows
            .iter()
            .rev()
            .find(|r| r.decision.is_kept())
            .and_then(|r| {
                run_folder::turn_folders(&self.store.dir)
                    .into_iter()
                    .find(|t| t.turn == r.turn)
            });
        let runs = run_report::unmeasured_final_runs(last_kept.as_ref(), &self.baseline_bench);
        if runs.is_empty() {
            vec![self.incumbent.clone()]
        } else {
            runs
        }
    }

    fn write_report(
        &mut self,
        stop_reason: &str,
        interrupted: bool,
        final_bench: Option<FinalBench>,
    ) -> Result<RunReport, LoopError> {
        // The run folder's records as this session holds them (no re-parse),
        // plus what only the live session knows.
        let facts = RunFacts {
            run_id: self.store.id.clone(),
            project: self.root.display().to_string(),
            agent: self.agent.name().into(),
            language: self.policy.agent.language.clone(),
            started_at: self.started_at.clone(),
            state: None,
            baseline: self.baseline_bench.clone(),
            turns: self.rows.clone(),
            kept_diff: self.diff(&self.baseline_files, &self.incumbent_files),
            run_command: run_report::changed_command(&self.baseline_files, &self.incumbent_files),
            final_bench,
            incumbent: Some(self.incumbent.clone()),
            final_runs: self.final_state_runs(),
        };
        let live = LiveFigures {
            stop_reason: stop_reason.into(),
            interrupted,
            wall_s: self.started.elapsed().as_secs_f64(),
            bench_runs: self.bench_runs,
            total_cost_usd: self.cost,
            agent_time_ms: self.agent_ms,
            knob_sources: self.knob_sources(),
            compute_not_tried: self.compute_not_tried(stop_reason),
            not_editable_knobs: self.not_editable_knobs(),
        };
        let r = run_report::assemble(&self.store.dir, facts, Some(live));
        test_stall("report");
        write_report_files(&self.store.dir, &r)
            .at("cannot write the report files to", &self.store.dir)?;
        self.emit(Event::ReportWritten {
            path: self.store.dir.join("report.md").display().to_string(),
        });
        Ok(r)
    }
}

/// The one event sink: appends the event to `events.jsonl` and shows it; a
/// failed append is shown as a warning (the run goes on; the log is a record,
/// not the run's state).
fn send(store: &mut RunStore, view: &mut (dyn FnMut(&Event) + Send), ev: &Event) {
    if let Err(e) = store.append(ev) {
        view(&Event::Warning {
            message: format!(
                "cannot append to {}: {e}",
                store.dir.join("events.jsonl").display()
            ),
        });
    }
    view(ev);
}

/// report.json, report.md, report.html, plot.svg.
pub fn write_report_files(dir: &Path, r: &RunReport) -> std::io::Result<()> {
    let svg = report::render_plot_svg(r);
    store::write_atomic(&dir.join("report.json"), report::render_json(r).as_bytes())?;
    store::write_atomic(
        &dir.join("report.md"),
        report::render_markdown(r).as_bytes(),
    )?;
    store::write_atomic(&dir.join("plot.svg"), svg.as_bytes())?;
    store::write_atomic(
        &dir.join("report.html"),
        report::render_html(r, &svg).as_bytes(),
    )?;
    Ok(())
}

/// A/A calibration: the incumbent against itself, `pairs` interleaved pairs.
pub async fn calibrate(
    bencher: &dyn Measure,
    root: &Path,
    files: &FileSet,
    policy: &Policy,
    pairs: u32,
    interrupt: &Interrupt,
    on_run: impl FnMut(&'static str, u32, f64),
) -> Result<Paired, PairFailure> {
    measure_interleaved(
        bencher,
        root,
        files,
        files,
        policy,
        Some(pairs),
        interrupt,
        on_run,
    )
    .await
}

/// Test hook: `TUNELOOP_TEST_STALL=<point>` makes the run sleep at that point
/// (agent, measure, report) so a crash test can kill it there.
fn test_stall(point: &str) {
    if std::env::var("TUNELOOP_TEST_STALL").is_ok_and(|p| p == point) {
        std::thread::sleep(std::time::Duration::from_secs(120));
    }
}

mod stages;

#[cfg(test)]
mod turn_tests;

#[cfg(test)]
mod compute_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_file_write_names_the_file_and_is_no_spawn_error() {
        let d = tempfile::tempdir().unwrap();
        // A file where a folder should be: the write fails even as root.
        std::fs::write(d.path().join("blocker"), "x").unwrap();
        let files = FileSet(
            [("blocker/train.py".to_string(), b"x = 1\n".to_vec())]
                .into_iter()
                .collect(),
        );
        let e = files
            .save(d.path())
            .at("cannot save the candidate files to", d.path())
            .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("cannot save the candidate files to"), "{msg}");
        assert!(msg.contains("blocker/train.py"), "the file is named: {msg}");
        assert!(!msg.contains("python"), "no interpreter hint: {msg}");
        assert!(msg.contains("hint:"), "{msg}");
        assert_eq!(e.exit_code(), 1);
        assert!(std::error::Error::source(&e).is_some());
        // Inside a paired measurement the same failure is a file error too.
        let b = BenchError::Files {
            role: "candidate".into(),
            root: d.path().to_owned(),
            message: files.apply(d.path()).unwrap_err().to_string(),
        };
        assert!(!b.to_string().contains("[project] python"), "{b}");
        assert!(b.short().contains("candidate"), "{}", b.short());
    }
}

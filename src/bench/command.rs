//! Command mode: measuring the user's own training command (`[bench] run`).
//!
//! The command runs as the user runs it, in the project root, with stdin
//! closed. tuneloop's instrumentation (`instrument/sitecustomize.py`, which
//! arms `instrument/tuneloop_instrument.py`) rides in on `PYTHONPATH`, so it
//! reaches `python train.py`, `python -m pkg.train` and every rank a launcher
//! starts; it times the training loader's batches inside the process and
//! writes `result.<rank>.json` (the harness's schema) into a folder of the
//! run, then ends the process. This module builds that command line, reads
//! those files, and turns a command that gave no figure into an error that
//! says why (never iterated a DataLoader, ended too early, crashed).
//!
//! A short command (`--epochs 1`) can end before a run's warm-up and timed
//! steps: the run that meets its end teaches the command's length
//! ([`CommandLength`]), and every later run warms up within it
//! ([`warmup_that_fits`]). Workers whose first prefetch round does not fit
//! before the timed steps get no figure (it would read the step, not the
//! loader): the error says how many fit ([`workers_that_fit`]), and the
//! session says which flag of the command runs longer ([`longer_run_hint`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{ending_text, tail_n, Bencher, Measurement, Mode};
use crate::error::BenchError;
use crate::knob::{LoaderKnob, DATA_PRESERVING};
use crate::process::{self, Ending, Interrupt, Spec};

/// Files written next to the harness for command mode (name, text).
pub const INSTRUMENT_FILES: [(&str, &str); 2] = [
    (
        "sitecustomize.py",
        include_str!("instrument/sitecustomize.py"),
    ),
    (
        "tuneloop_instrument.py",
        include_str!("instrument/tuneloop_instrument.py"),
    ),
];

/// Heads of a command that mean "the Python interpreter" by name alone
/// (a path names its own, [`crate::interpreter::of_command`]).
fn is_python_word(w: &str) -> bool {
    !w.contains('/') && crate::interpreter::names_python(w)
}

/// The command as it will run: a `python` at its head is the project's
/// interpreter; a launcher named bare (`torchrun`, `accelerate`, `lightning`)
/// is the one installed beside that interpreter when there is one, so the
/// ranks run the same environment.
pub fn resolve(words: &[String], python: &str, project_root: &Path) -> Vec<String> {
    let mut out = words.to_vec();
    let Some(head) = out.first_mut() else {
        return out;
    };
    if is_python_word(head) {
        *head = python.to_string();
    } else if !head.contains('/') {
        if let Some(dir) = Path::new(python).parent() {
            let sibling = dir.join(&*head);
            if sibling.is_file() {
                *head = sibling.display().to_string();
            }
        }
    } else if Path::new(head).is_relative() {
        // `./train.sh`: relative to the project root, where it runs.
        let p = project_root.join(&*head);
        if p.is_file() {
            *head = p.display().to_string();
        }
    }
    out
}

/// The project file a command runs (`train.py` of `python train.py`, the
/// module's file of `python -m pkg.train`, the script a launcher is given),
/// relative to the project root, when it exists there.
pub fn script_of(words: &[String], project_root: &Path) -> Option<String> {
    let mut it = words.iter().skip(1).peekable();
    while let Some(w) = it.next() {
        if w == "-m" {
            let module = it.next()?;
            let base = module.replace('.', "/");
            for cand in [format!("{base}.py"), format!("{base}/__main__.py")] {
                if project_root.join(&cand).is_file() {
                    return Some(cand);
                }
            }
            continue;
        }
        if w.ends_with(".py") {
            let rel = w.strip_prefix("./").unwrap_or(w);
            if project_root.join(rel).is_file() {
                return Some(rel.to_string());
            }
        }
    }
    None
}

fn result_dir(b: &Bencher) -> PathBuf {
    b.harness_dir.join("result")
}

/// The launcher and any `python` the command itself starts come from the
/// project's environment first on `PATH` (a measured run, a whole run).
pub fn project_env_first(b: &Bencher, env: &mut BTreeMap<String, String>) {
    if let Some(dir) = Path::new(&b.python).parent().filter(|d| d.is_dir()) {
        let path = std::env::var("PATH").unwrap_or_default();
        env.insert("PATH".into(), format!("{}:{path}", dir.display()));
    }
}

/// The command line of one measurement of the user's command.
pub fn spec(b: &Bencher, words: &[String], mode: Mode, mut env: BTreeMap<String, String>) -> Spec {
    let instr = b.harness_dir.display().to_string();
    let pythonpath = match std::env::var("PYTHONPATH") {
        Ok(p) if !p.is_empty() => format!("{instr}:{p}"),
        _ => instr,
    };
    env.insert("PYTHONPATH".into(), pythonpath);
    project_env_first(b, &mut env);
    env.insert(
        "TUNELOOP_RESULT_DIR".into(),
        result_dir(b).display().to_string(),
    );
    env.insert("TUNELOOP_STEPS".into(), b.steps.to_string());
    env.insert("TUNELOOP_WARMUP".into(), b.warmup.to_string());
    env.insert("TUNELOOP_WINDOW_S".into(), b.window_s.to_string());
    if let Some(cap) = b.window_cap_s {
        env.insert("TUNELOOP_WINDOW_CAP_S".into(), cap.to_string());
    }
    if let Some(slow) = b.window_slow_s() {
        env.insert("TUNELOOP_WINDOW_SLOW_S".into(), slow.to_string());
    }
    if let Some(len) = b.known_length() {
        // A window lengthened by time stays within the command's batches.
        env.insert("TUNELOOP_COMMAND_BATCHES".into(), len.batches.to_string());
        let room = warmup_that_fits(u64::from(len.batches), u64::from(b.steps)).unwrap_or(0);
        env.insert(
            "TUNELOOP_WARMUP_MAX".into(),
            room.max(u64::from(b.warmup.max(1))).to_string(),
        );
    }
    env.insert(
        "TUNELOOP_PROJECT".into(),
        b.project_root.display().to_string(),
    );
    // The numerics guard's calibration run: torch's threads pinned (the
    // instrumentation reads it). Here, not in `Bencher::spec` alone: a
    // measurement of the command starts from this function.
    if let Some(n) = b.threads {
        env.insert("TUNELOOP_THREADS".into(), n.to_string());
    }
    match mode {
        Mode::Throughput => {}
        // A command is never asked for the profile after its window
        // (`Bencher::profiles_after_window`): its throughput run is its own.
        Mode::ThroughputWithCeiling | Mode::ThroughputThenProfile => {
            env.insert("TUNELOOP_CEILING".into(), "1".into());
        }
        Mode::Profile => {
            env.insert("TUNELOOP_MODE".into(), "profile".into());
            env.insert(
                "TUNELOOP_TABLE_OUT".into(),
                b.table_path().display().to_string(),
            );
        }
    }
    Spec {
        program: words[0].clone(),
        args: words[1..].to_vec(),
        cwd: b.project_root.clone(),
        env,
        stdin: None,
        timeout: b.timeout,
        done_marker: None,
        end_at_done: false,
        env_remove: Vec::new(),
    }
}

/// Runs the command once and reads what its processes wrote.
pub async fn measure(
    b: &Bencher,
    mode: Mode,
    interrupt: &Interrupt,
) -> Result<Measurement, BenchError> {
    let io_err = |e: std::io::Error| BenchError::Spawn {
        program: "harness".into(),
        message: e.to_string(),
    };
    b.restore_harness().map_err(io_err)?;
    let dir = result_dir(b);
    let words = b.command_words().expect("command mode");
    // Each retry warms up within a length shorter than the last one's.
    for _ in 0..4 {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(io_err)?;
        let spec = b
            .fork
            .wrap_command(spec(b, &words, mode, BTreeMap::new()), &b.harness_dir)
            .await;
        let out = process::run(&spec, interrupt, |_| {})
            .await
            .map_err(|e| BenchError::Spawn {
                program: spec.program.clone(),
                message: format!(
                    "{e} (the head of [bench] run; a `python` there is [project] python)"
                ),
            })?;
        if matches!(out.ending, Ending::Interrupted) {
            return Err(BenchError::Interrupted);
        }
        let files = RankFiles::read(&dir);
        if let Some(mut m) = files.measurement()? {
            m.command_batches = b.known_length().map(|l| u64::from(l.batches));
            return Ok(m);
        }
        let tail = tail_n(&out.stdout, &out.stderr, 30);
        let Some(short) = files
            .short_run()
            .filter(|_| matches!(out.ending, Ending::Exited(0)))
        else {
            return Err(files.explain(b, &out.ending, &tail));
        };
        // The command ended before the figure: its length is known now.
        b.learn_length(short.reached, short.wanted(b.steps, b.warmup));
        match short.next_try(b.steps, b.warmup) {
            // The workers' longer warm-up went past the command's end: once
            // more within it (and every later run).
            NextTry::Retry => continue,
            NextTry::DoesNotFit { fit } => {
                return Err(short.does_not_fit(b, fit, &tail));
            }
            NextTry::TooShort => return Err(files.explain(b, &out.ending, &tail)),
        }
    }
    Err(BenchError::NoFigure {
        tail: "    the command ended before its figure on every try, each time shorter".into(),
    })
}

/// How long the user's command runs, as the runs that met its end showed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommandLength {
    /// The training batches the command ran (the fewest seen).
    pub batches: u32,
    /// The most batches a run wanted: the full warm-up of its workers, the
    /// timed steps, and the request that closes them.
    pub wanted: u32,
}

/// The warm-up a command of `batches` training batches leaves before
/// `steps` timed ones. The timed window closes when the loop asks for the
/// batch after its last timed one, and a loop that knows its length (a
/// Lightning `Trainer`) never asks past its last batch: one batch less.
pub fn warmup_that_fits(batches: u64, steps: u64) -> Option<u64> {
    batches.checked_sub(steps + 1)
}

/// The fewest timed steps a run is cut to when the command is shorter than
/// warm-up + `[bench] steps` (see [`fitted_steps`]): below it the pairs'
/// noise swamps the figure, and the command must run longer.
pub const MIN_FITTED_STEPS: u32 = 8;

/// The steps every run times in a command of `batches` training batches
/// that is shorter than warm-up + `steps` (`--max_epochs 1` of a small data
/// set): what is left after room for the warm-up of as many workers as
/// `cores` (their first prefetch round, 2 batches each; where the climb
/// starts), at least `warmup`, and the request that closes the window.
/// `None` when `steps` fit already, or when fewer than
/// [`MIN_FITTED_STEPS`] would be left. `tuneloop start` and `tuneloop
/// bench` both cut their runs by it.
pub fn fitted_steps(batches: u64, steps: u32, warmup: u32, cores: u64) -> Option<u32> {
    let warmup = u64::from(warmup.max(1));
    let fit = batches.saturating_sub(warmup.max(2 * cores) + 1);
    let fit = u32::try_from(fit).ok()?;
    (fit >= MIN_FITTED_STEPS && fit < steps).then_some(fit)
}

/// A command's runs cut to its length by [`fitted_steps`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Fitted {
    /// The training batches the command runs.
    pub batches: u64,
    /// `[bench] steps`.
    pub configured: u32,
    /// The steps every run times now.
    pub steps: u32,
}

impl Fitted {
    /// What the run log and `tuneloop bench` say.
    pub fn describe(&self) -> String {
        format!(
            "the command runs {} training batches, fewer than warm-up + {} steps: every run times {} steps",
            self.batches, self.configured, self.steps
        )
    }
}

/// The least warm-up that still gives a figure of the loader: the workers'
/// first prefetch round (each worker asks for `prefetch` batches at once
/// when it starts; timed steps served from that round show the step's
/// speed, not the loader's), and never less than `[bench] warmup_steps`.
/// The full warm-up is longer: 4 batches a worker (the harness's `warmup_for`).
pub fn least_warmup(workers: u64, prefetch: u64, warmup: u32) -> u64 {
    (workers * prefetch.max(1)).max(u64::from(warmup.max(1)))
}

/// The most workers whose first prefetch round fits before `steps` timed
/// steps in a command of `batches` training batches; `None` when not even
/// `[bench] warmup_steps` fits.
pub fn workers_that_fit(batches: u64, steps: u64, prefetch: u64, warmup: u32) -> Option<u64> {
    let room = warmup_that_fits(batches, steps)?;
    (room >= u64::from(warmup.max(1))).then(|| room / prefetch.max(1))
}

/// The full warm-up the harness asks of `workers` (`warmup_for`): 4 batches
/// a worker, at least the prefetch round and `[bench] warmup_steps`.
fn full_warmup(workers: u64, prefetch: u64, warmup: u32) -> u64 {
    (workers * prefetch.max(4)).max(u64::from(warmup.max(1)))
}

/// What to do after a run ended before its figure.
#[derive(Debug, PartialEq, Eq)]
enum NextTry {
    /// Its warm-up was cut short by the command's end; one that fits is valid.
    Retry,
    /// Not even the workers' first prefetch round fits: up to `fit` do.
    DoesNotFit { fit: u64 },
    /// The command is too short for the configured warm-up and steps (or the
    /// warm-up was not what ran out).
    TooShort,
}

/// A run that ended (status 0) before its figure, from its status files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ShortRun {
    /// The training batches it ran (the fewest of any rank).
    reached: u32,
    /// The warm-up that run used (the most of any rank).
    warmup_used: u64,
    workers: u64,
    prefetch: u64,
}

impl ShortRun {
    fn wanted(&self, steps: u32, warmup: u32) -> u32 {
        let w = full_warmup(self.workers, self.prefetch, warmup) + u64::from(steps) + 1;
        u32::try_from(w).unwrap_or(u32::MAX)
    }

    fn next_try(&self, steps: u32, warmup: u32) -> NextTry {
        let Some(room) = warmup_that_fits(u64::from(self.reached), u64::from(steps)) else {
            return NextTry::TooShort;
        };
        if room >= least_warmup(self.workers, self.prefetch, warmup) {
            // A run within the room: unless this one was within it already.
            return match self.warmup_used > room {
                true => NextTry::Retry,
                false => NextTry::TooShort,
            };
        }
        match workers_that_fit(
            u64::from(self.reached),
            u64::from(steps),
            self.prefetch,
            warmup,
        ) {
            Some(fit) if self.workers > fit => NextTry::DoesNotFit { fit },
            _ => NextTry::TooShort,
        }
    }

    fn does_not_fit(&self, b: &Bencher, fit: u64, tail: &str) -> BenchError {
        let words = b.command_words().unwrap_or_default();
        let command = shell_words::join(&words);
        let least = least_warmup(self.workers, self.prefetch, b.warmup);
        BenchError::User {
            kind: "too_few_steps".into(),
            message: format!(
                "`{command}` ran {} training batches: with num_workers={}, their first round of {least} batches (prefetch_factor {}) and the {} timed steps need {}; up to {fit} workers fit\n  hint: {}\n  last output:\n{tail}",
                self.reached,
                self.workers,
                self.prefetch,
                b.steps,
                least + u64::from(b.steps) + 1,
                b.length_hint().unwrap_or_default(),
            ),
        }
    }
}

impl Bencher {
    /// The command's length, once a run of this session has met its end.
    pub fn known_length(&self) -> Option<CommandLength> {
        *self
            .command_length
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn learn_length(&self, batches: u32, wanted: u32) {
        let mut known = self
            .command_length
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *known = Some(match *known {
            Some(l) => CommandLength {
                batches: l.batches.min(batches),
                wanted: l.wanted.max(wanted),
            },
            None => CommandLength { batches, wanted },
        });
    }

    /// Which flag of the command runs longer, once its length cut a run
    /// short (see [`longer_run_hint`]).
    pub fn length_hint(&self) -> Option<String> {
        let len = self.known_length()?;
        Some(longer_run_hint(
            &self.command_words()?,
            &self.project_root,
            u64::from(len.batches),
            u64::from(len.wanted),
        ))
    }
}

/// Flags that set how long a training command runs, normalised (no leading
/// dashes, `_` for `-`): epochs first, then steps.
const EPOCH_FLAGS: [&str; 7] = [
    "epochs",
    "epoch",
    "max_epochs",
    "num_epochs",
    "n_epochs",
    "num_train_epochs",
    "trainer.max_epochs",
];
const STEP_FLAGS: [&str; 7] = [
    "max_steps",
    "num_steps",
    "steps",
    "train_steps",
    "max_iters",
    "iters",
    "trainer.max_steps",
];

/// Whether `flag` (as written, dashes and all) sets a count of epochs, not of steps.
pub fn is_epoch_flag(flag: &str) -> bool {
    EPOCH_FLAGS.contains(&normalised(flag).as_str())
}

fn normalised(flag: &str) -> String {
    flag.trim_start_matches('-')
        .replace('-', "_")
        .to_lowercase()
}

/// A flag that makes the command run longer: as written, its value when
/// known, and whether `[bench] run` gives it already.
#[derive(Debug, Clone, PartialEq)]
pub struct LengthFlag {
    pub flag: String,
    pub value: Option<f64>,
    pub on_command_line: bool,
}

/// The flag of `words` (the command) that sets its length, else one its
/// script defines (an argparse `add_argument`, the `--num_train_epochs` of
/// an `HfArgumentParser` over `TrainingArguments`, LightningCLI's
/// `--trainer.max_epochs`).
pub fn length_flag(words: &[String], project_root: &Path) -> Option<LengthFlag> {
    let rank = |name: &str| {
        let n = normalised(name);
        EPOCH_FLAGS
            .iter()
            .chain(STEP_FLAGS.iter())
            .position(|f| *f == n)
    };
    let mut best: Option<(usize, LengthFlag)> = None;
    let consider = |best: &mut Option<(usize, LengthFlag)>, r: usize, f: LengthFlag| {
        if best.as_ref().is_none_or(|(b, _)| r < *b) {
            *best = Some((r, f));
        }
    };
    for (i, w) in words.iter().enumerate().skip(1) {
        if !w.starts_with("--") {
            continue;
        }
        let (name, value) = match w.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (w.as_str(), words.get(i + 1).cloned()),
        };
        if let Some(r) = rank(name) {
            let value = value.and_then(|v| v.parse::<f64>().ok());
            consider(
                &mut best,
                r,
                LengthFlag {
                    flag: name.to_string(),
                    value,
                    on_command_line: true,
                },
            );
        }
    }
    if best.is_some() {
        return best.map(|(_, f)| f);
    }
    let source =
        std::fs::read_to_string(project_root.join(script_of(words, project_root)?)).ok()?;
    for call in source.split("add_argument(").skip(1) {
        let call = call_text(call);
        let names: Vec<&str> = call
            .split(['"', '\''])
            .skip(1)
            .step_by(2)
            .filter(|q| q.starts_with("--"))
            .collect();
        let default = call.split_once("default=").and_then(|(_, rest)| {
            let v: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            v.parse::<f64>().ok()
        });
        for n in names {
            if let Some(r) = rank(n) {
                consider(
                    &mut best,
                    r,
                    LengthFlag {
                        flag: n.to_string(),
                        value: default,
                        on_command_line: false,
                    },
                );
            }
        }
    }
    let framework = |flag: &str| LengthFlag {
        flag: flag.into(),
        value: None,
        on_command_line: false,
    };
    best.map(|(_, f)| f)
        .or_else(|| {
            (source.contains("HfArgumentParser") && source.contains("TrainingArguments"))
                .then(|| framework("--num_train_epochs"))
        })
        .or_else(|| {
            source
                .contains("LightningCLI")
                .then(|| framework("--trainer.max_epochs"))
        })
}

/// The text of one call, from after its `(` to its matching `)`.
fn call_text(rest: &str) -> &str {
    let mut depth = 1;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return &rest[..i];
                }
            }
            _ => {}
        }
    }
    rest
}

/// What to change in `[bench] run` for runs of `wanted` training batches,
/// when the command ran `batches`: the flag that sets its length with a
/// value scaled up (never less than one more epoch), or the advice in
/// general words when the command has no such flag.
pub fn longer_run_hint(words: &[String], project_root: &Path, batches: u64, wanted: u64) -> String {
    format!(
        "the command ran {batches} training batches; {} would let larger worker counts be measured (a run wanted {wanted})",
        longer_run(words, project_root, batches, wanted)
    )
}

/// The change to `[bench] run` alone, e.g. "`--epochs 2` (or more) in [bench] run".
fn longer_run(words: &[String], project_root: &Path, batches: u64, wanted: u64) -> String {
    let flag = length_flag(words, project_root);
    let scaled = |v: f64| {
        let by = wanted as f64 / batches.max(1) as f64;
        let m = (v * by).ceil().max(v.floor() + 1.0);
        format!("{m}")
    };
    let what = match flag {
        Some(LengthFlag {
            flag,
            value: Some(v),
            on_command_line: true,
        }) => format!("`{flag} {}` (or more) in [bench] run", scaled(v)),
        Some(LengthFlag {
            flag,
            value: Some(v),
            on_command_line: false,
        }) => format!("`{flag} {}` (or more) added to [bench] run", scaled(v)),
        Some(LengthFlag { flag, .. }) => format!("a larger `{flag}` in [bench] run"),
        None => "a longer run in [bench] run (more epochs or steps)".into(),
    };
    what
}

/// What the command's processes left in the result folder.
#[derive(Debug, Default)]
struct RankFiles {
    results: Vec<Value>,
    statuses: Vec<Value>,
    progress: Vec<Value>,
}

impl RankFiles {
    fn read(dir: &Path) -> RankFiles {
        let mut f = RankFiles::default();
        let Ok(rd) = std::fs::read_dir(dir) else {
            return f;
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        names.sort();
        for n in names {
            let Some(v) = std::fs::read_to_string(dir.join(&n))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            else {
                continue;
            };
            if n.starts_with("result.") {
                f.results.push(v);
            } else if n.starts_with("status.") {
                f.statuses.push(v);
            } else if n.starts_with("progress.") {
                f.progress.push(v);
            }
        }
        f
    }

    /// The figures, once every rank has written its own.
    fn measurement(&self) -> Result<Option<Measurement>, BenchError> {
        let Some(first) = self.results.first() else {
            return Ok(None);
        };
        let world = first["world_size"].as_u64().unwrap_or(1) as usize;
        if self.results.len() < world {
            return Ok(None);
        }
        let combined = combine(&self.results);
        serde_json::from_value(combined)
            .map(Some)
            .map_err(|e| BenchError::NoFigure {
                tail: format!("    unreadable result ({e})"),
            })
    }

    fn loaders_seen(&self) -> Vec<String> {
        let src = self
            .statuses
            .first()
            .or(self.progress.first())
            .and_then(|v| v["loaders"].as_array().cloned())
            .unwrap_or_default();
        src.iter()
            .map(|l| {
                format!(
                    "{} ({} batches{})",
                    l["site"].as_str().or(l["origin"].as_str()).unwrap_or("?"),
                    l["batches"].as_u64().unwrap_or(0),
                    if l["backward"].as_u64().unwrap_or(0) > 0 {
                        ", training"
                    } else {
                        ""
                    }
                )
            })
            .collect()
    }

    /// The run as its status files tell it, when the command ended with
    /// the training loader known (every rank wrote how far it got).
    fn short_run(&self) -> Option<ShortRun> {
        let reached = self
            .statuses
            .iter()
            .map(|st| st["reached"].as_u64().unwrap_or(0))
            .min()?;
        if self.statuses.iter().any(|st| st["training"].is_null()) {
            return None;
        }
        let warmup_used = self
            .statuses
            .iter()
            .filter_map(|st| st["warmup_wanted"].as_u64())
            .max()?;
        let settings = self.statuses[0]["loaders"]
            .as_array()
            .and_then(|ls| ls.iter().find(|l| l["training"] == true))
            .map(|l| l["settings"].clone())
            .unwrap_or_default();
        Some(ShortRun {
            reached: u32::try_from(reached).ok()?,
            warmup_used,
            workers: settings[LoaderKnob::NumWorkers.name()]
                .as_u64()
                .unwrap_or(0),
            prefetch: settings[LoaderKnob::PrefetchFactor.name()]
                .as_u64()
                .unwrap_or(2),
        })
    }

    /// Why there is no figure, in words that say what to do.
    fn explain(&self, b: &Bencher, ending: &Ending, tail: &str) -> BenchError {
        // The window closes on the request after its last timed batch.
        let needed = b.warmup.max(1) + b.steps + 1;
        let seen = self.loaders_seen();
        let words = b.command_words().unwrap_or_default();
        let command = shell_words::join(&words);
        if let Some(status) = self.statuses.first() {
            let reached = status["reached"].as_u64().unwrap_or(0);
            if matches!(ending, Ending::Exited(0)) {
                let what = if seen.is_empty() {
                    "it never iterated a DataLoader".to_string()
                } else if status["training"].is_null() && reached > 0 {
                    format!(
                        "no loader's batches were followed by a backward pass (loaders: {})",
                        seen.join("; ")
                    )
                } else {
                    format!("{reached} training batches (loaders: {})", seen.join("; "))
                };
                return BenchError::User {
                    kind: "too_few_steps".into(),
                    message: format!(
                        "`{command}` ended after {what}; a measurement needs {needed} ({} warm-up + {} steps + the request that ends them)\n  hint: {}, or lower [bench] steps / warmup_steps\n  last output:\n{tail}",
                        b.warmup.max(1),
                        b.steps,
                        match reached {
                            0 => "let the command run longer (more epochs or steps in [bench] run)"
                                .to_string(),
                            n => longer_run(
                                &words,
                                &b.project_root,
                                n,
                                u64::from(needed),
                            ),
                        },
                    ),
                };
            }
            return BenchError::Crashed {
                code: ending_text(ending),
                tail: format!(
                    "{tail}\n    (it had reached {reached} of {needed} training batches)"
                ),
            };
        }
        match ending {
            Ending::TimedOut if self.progress.is_empty() => BenchError::User {
                kind: "no_loader".into(),
                message: format!(
                    "`{command}` never iterated a DataLoader within {} s and was stopped\n  hint: check that the command trains (the tail below), or raise [bench] timeout_s if its set-up is slow\n  last output:\n{tail}",
                    b.timeout.as_secs()
                ),
            },
            Ending::TimedOut => BenchError::Timeout {
                limit_s: b.timeout.as_secs(),
                tail: format!("    loaders seen: {}\n{tail}", seen.join("; ")),
            },
            Ending::Exited(0) => BenchError::User {
                kind: "no_loader".into(),
                message: format!(
                    "`{command}` ended without iterating a DataLoader\n  hint: [bench] run must be the command that trains, e.g. `python train.py`\n  last output:\n{tail}"
                ),
            },
            e => BenchError::Crashed {
                code: ending_text(e),
                tail: tail.to_string(),
            },
        }
    }
}

/// The measured loader in one line (command mode): its call site, where
/// the DataLoader was really built when that is elsewhere, its settings.
pub fn loader_summary(m: &Measurement) -> Option<String> {
    let site = m.call_site.as_ref()?;
    let train = m.loaders.iter().find(|l| l["training"] == true);
    let origin = train
        .and_then(|l| l["origin"].as_str())
        .filter(|o| o != site)
        .map(|o| format!(", built at {o}"))
        .unwrap_or_default();
    let settings = DATA_PRESERVING
        .iter()
        .filter_map(|k| m.loader.get(*k).map(|x| format!("{k}={x}")))
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!("{site}{origin} ({settings})"))
}

/// Which loader a command-mode measurement timed, and the others it saw:
/// lines for `bench`.
pub fn describe_loaders(m: &Measurement) -> Vec<String> {
    let Some(summary) = loader_summary(m) else {
        return vec![];
    };
    let mut out = vec![format!("measured: the training loader from {summary}")];
    for l in m.loaders.iter().filter(|l| l["training"] != true) {
        out.push(format!(
            "  not measured: {} ({} batches, no backward pass after them)",
            l["site"].as_str().or(l["origin"].as_str()).unwrap_or("?"),
            l["batches"].as_u64().unwrap_or(0)
        ));
    }
    out
}

/// Every rank's figures as one: samples/sec summed, the slowest rank's
/// data_wait share, rank 0's own timings, each rank's summary kept.
pub fn combine(ranks: &[Value]) -> Value {
    let mut sorted: Vec<&Value> = ranks.iter().collect();
    sorted.sort_by_key(|r| r["rank"].as_u64().unwrap_or(0));
    if sorted.len() == 1 {
        return sorted[0].clone();
    }
    let mut total = sorted[0].clone();
    let sum = |k: &str| sorted.iter().filter_map(|r| r[k].as_f64()).sum::<f64>();
    let slowest = sorted
        .iter()
        .max_by(|a, b| {
            let (x, y) = (
                a["data_wait_share"].as_f64().unwrap_or(0.0),
                b["data_wait_share"].as_f64().unwrap_or(0.0),
            );
            x.total_cmp(&y)
        })
        .expect("at least one rank");
    total["samples_per_sec"] = sum("samples_per_sec").into();
    total["samples"] = match sorted
        .iter()
        .filter_map(|r| r["samples"].as_u64())
        .sum::<u64>()
    {
        0 => Value::Null,
        n => n.into(),
    };
    total["data_wait_share"] = slowest["data_wait_share"].clone();
    total["slowest_rank"] = slowest["rank"].clone();
    total["ceiling_sps"] = if sorted.iter().all(|r| r["ceiling_sps"].is_number()) {
        sum("ceiling_sps").into()
    } else {
        Value::Null
    };
    total["world_size"] = (sorted.len() as u64).into();
    total["per_rank"] = sorted
        .iter()
        .map(|r| {
            let mut o = serde_json::Map::new();
            for k in [
                "rank",
                "samples_per_sec",
                "data_wait_share",
                "data_wait_s",
                "train_step_s",
                "wall_s",
                "fingerprint",
            ] {
                o.insert(k.into(), r[k].clone());
            }
            Value::Object(o)
        })
        .collect::<Vec<_>>()
        .into();
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_command_is_fitted_with_room_for_the_cores_warm_up_and_no_further() {
        // 30 batches on 2 cores: 4 of warm-up and the closing request leave 25.
        assert_eq!(fitted_steps(30, 40, 2, 2), Some(25));
        // More cores want more warm-up; a longer [bench] warmup_steps too.
        assert_eq!(fitted_steps(30, 40, 2, 4), Some(21));
        assert_eq!(fitted_steps(30, 40, 10, 2), Some(19));
        // The configured steps fit: nothing to cut.
        assert_eq!(fitted_steps(100, 40, 2, 2), None);
        assert_eq!(fitted_steps(30, 25, 2, 2), None);
        // Fewer than MIN_FITTED_STEPS left: the command must run longer.
        assert_eq!(fitted_steps(12, 40, 2, 2), None);
        assert_eq!(fitted_steps(13, 40, 2, 2), Some(MIN_FITTED_STEPS));
        let f = Fitted {
            batches: 30,
            configured: 40,
            steps: 25,
        };
        assert_eq!(
            f.describe(),
            "the command runs 30 training batches, fewer than warm-up + 40 steps: every run times 25 steps"
        );
    }
    use serde_json::json;

    fn w(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_python_head_is_the_projects_interpreter() {
        let root = Path::new("/nonexistent");
        assert_eq!(
            resolve(&w(&["python", "train.py"]), "/venv/bin/python", root),
            w(&["/venv/bin/python", "train.py"])
        );
        assert_eq!(
            resolve(
                &w(&["python3.12", "-m", "pkg.train"]),
                "/v/bin/python",
                root
            )[0],
            "/v/bin/python"
        );
        // Not an interpreter word: left alone when nothing of that name is beside it.
        assert_eq!(
            resolve(&w(&["pythonista", "x"]), "/v/bin/python", root)[0],
            "pythonista"
        );
    }

    #[test]
    fn a_bare_launcher_is_the_one_beside_the_interpreter() {
        let d = tempfile::tempdir().unwrap();
        let bin = d.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("torchrun"), "#!/bin/sh\n").unwrap();
        let py = bin.join("python").display().to_string();
        let r = resolve(
            &w(&["torchrun", "--nproc_per_node", "2", "train.py"]),
            &py,
            d.path(),
        );
        assert_eq!(r[0], bin.join("torchrun").display().to_string());
        assert_eq!(resolve(&w(&["srun", "x"]), &py, d.path())[0], "srun");
    }

    #[test]
    fn the_script_of_a_command_is_found() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("train.py"), "").unwrap();
        std::fs::create_dir_all(d.path().join("pkg")).unwrap();
        std::fs::write(d.path().join("pkg/train.py"), "").unwrap();
        let r = d.path();
        assert_eq!(
            script_of(&w(&["python", "train.py", "--epochs", "1"]), r).as_deref(),
            Some("train.py")
        );
        assert_eq!(
            script_of(&w(&["python", "-m", "pkg.train"]), r).as_deref(),
            Some("pkg/train.py")
        );
        assert_eq!(
            script_of(&w(&["torchrun", "--nproc_per_node", "2", "./train.py"]), r).as_deref(),
            Some("train.py")
        );
        assert_eq!(script_of(&w(&["python", "missing.py"]), r), None);
    }

    #[test]
    fn the_warm_up_that_fits_leaves_the_request_that_closes_the_window() {
        // Lightning's `--epochs 1`: 96 batches, 40 timed: 55 warm-up, not 56
        // (it never asks past its last batch).
        assert_eq!(warmup_that_fits(96, 40), Some(55));
        assert_eq!(warmup_that_fits(41, 40), Some(0));
        assert_eq!(warmup_that_fits(40, 40), None);
    }

    #[test]
    fn the_workers_that_fit_are_those_whose_first_round_fits() {
        // 60 batches, 40 timed: 19 of warm-up, 9 workers at prefetch_factor 2.
        assert_eq!(workers_that_fit(60, 40, 2, 5), Some(9));
        assert_eq!(workers_that_fit(60, 40, 4, 5), Some(4));
        // Not even the configured warm-up fits.
        assert_eq!(workers_that_fit(44, 40, 2, 5), None);
        assert_eq!(least_warmup(0, 2, 5), 5);
        assert_eq!(least_warmup(17, 2, 5), 34);
    }

    fn short(reached: u32, warmup_used: u64, workers: u64) -> ShortRun {
        ShortRun {
            reached,
            warmup_used,
            workers,
            prefetch: 2,
        }
    }

    #[test]
    fn a_run_cut_by_the_commands_end_is_retried_within_it_or_says_what_fits() {
        // 15 workers wanted 60 of warm-up; 55 fit and hold their first round.
        assert_eq!(short(96, 60, 15).next_try(40, 5), NextTry::Retry);
        // Within the room already and still no figure: not the warm-up.
        assert_eq!(short(96, 55, 15).next_try(40, 5), NextTry::TooShort);
        // 17 workers' first round (34) does not fit in 19: up to 9 do.
        assert_eq!(
            short(60, 68, 17).next_try(40, 5),
            NextTry::DoesNotFit { fit: 9 }
        );
        // The configured warm-up and steps do not fit at all.
        assert_eq!(short(30, 5, 0).next_try(40, 5), NextTry::TooShort);
        assert_eq!(short(44, 8, 2).next_try(40, 5), NextTry::TooShort);
        // What such runs wanted: 4 batches a worker, the steps, the close.
        assert_eq!(short(60, 68, 17).wanted(40, 5), 68 + 40 + 1);
        assert_eq!(short(60, 5, 0).wanted(40, 5), 46);
    }

    #[test]
    fn the_flag_that_runs_longer_is_found_on_the_command_line_or_in_the_script() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let f = length_flag(&w(&["python", "train.py", "--epochs", "1"]), r).unwrap();
        assert_eq!(
            (f.flag.as_str(), f.value, f.on_command_line),
            ("--epochs", Some(1.0), true)
        );
        let f = length_flag(
            &w(&["python", "train.py", "--max_steps=50", "--lr", "3"]),
            r,
        )
        .unwrap();
        assert_eq!((f.flag.as_str(), f.value), ("--max_steps", Some(50.0)));
        // Epochs before steps.
        let f = length_flag(
            &w(&[
                "python",
                "t.py",
                "--max-steps",
                "9",
                "--num-train-epochs",
                "1",
            ]),
            r,
        )
        .unwrap();
        assert_eq!(f.flag, "--num-train-epochs");
        std::fs::write(
            r.join("train.py"),
            "import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr', type=float, default=0.1)\np.add_argument(\n    '-e', '--n-epochs', type=int, default=3, help='passes (over the data)')\n",
        )
        .unwrap();
        let f = length_flag(&w(&["python", "train.py"]), r).unwrap();
        assert_eq!(
            (f.flag.as_str(), f.value, f.on_command_line),
            ("--n-epochs", Some(3.0), false)
        );
        std::fs::write(
            r.join("cli.py"),
            "from lightning.pytorch.cli import LightningCLI\nLightningCLI(Model)\n",
        )
        .unwrap();
        assert_eq!(
            length_flag(&w(&["python", "cli.py", "fit"]), r)
                .unwrap()
                .flag,
            "--trainer.max_epochs"
        );
        std::fs::write(r.join("plain.py"), "for x in loader: pass\n").unwrap();
        assert_eq!(length_flag(&w(&["python", "plain.py"]), r), None);
    }

    #[test]
    fn the_hint_scales_the_flag_to_the_batches_a_run_wanted() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let hint = longer_run_hint(&w(&["python", "train.py", "--epochs", "1"]), r, 48, 109);
        assert!(hint.starts_with("the command ran 48 training batches; `--epochs 3` (or more) in [bench] run would let larger worker counts be measured"), "{hint}");
        // Never less than one more epoch; a float flag stays a number.
        let hint = longer_run_hint(&w(&["python", "train.py", "--epochs", "1.0"]), r, 96, 101);
        assert!(hint.contains("`--epochs 2` (or more)"), "{hint}");
        let hint = longer_run_hint(&w(&["python", "train.py", "--max-steps", "50"]), r, 50, 81);
        assert!(hint.contains("`--max-steps 81` (or more)"), "{hint}");
        let hint = longer_run_hint(&w(&["./run.sh"]), r, 50, 81);
        assert!(
            hint.contains("a longer run in [bench] run (more epochs or steps)"),
            "{hint}"
        );
    }

    #[test]
    fn ranks_combine_into_one_figure() {
        let r0 = json!({"rank": 0, "world_size": 2, "samples_per_sec": 100.0, "samples": 400,
                        "data_wait_share": 0.2, "ceiling_sps": 1000.0, "data_wait_s": 1.0});
        let r1 = json!({"rank": 1, "world_size": 2, "samples_per_sec": 80.0, "samples": 400,
                        "data_wait_share": 0.5, "ceiling_sps": 900.0, "data_wait_s": 2.0});
        let c = combine(&[r1.clone(), r0.clone()]);
        assert_eq!(c["samples_per_sec"], 180.0);
        assert_eq!(c["samples"], 800);
        assert_eq!(c["data_wait_share"], 0.5);
        assert_eq!(c["slowest_rank"], 1);
        assert_eq!(c["ceiling_sps"], 1900.0);
        assert_eq!(c["data_wait_s"], 1.0, "rank 0's own timings stay");
        assert_eq!(c["per_rank"].as_array().unwrap().len(), 2);
        let no_ceiling =
            json!({"rank": 1, "world_size": 2, "samples_per_sec": 1.0, "ceiling_sps": null});
        assert!(combine(&[r0, no_ceiling])["ceiling_sps"].is_null());
    }

    #[test]
    fn a_figure_needs_every_rank() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("result.0.json"),
            r#"{"rank": 0, "world_size": 2, "samples_per_sec": 5.0}"#,
        )
        .unwrap();
        assert!(RankFiles::read(d.path()).measurement().unwrap().is_none());
        std::fs::write(
            d.path().join("result.1.json"),
            r#"{"rank": 1, "world_size": 2, "samples_per_sec": 7.0}"#,
        )
        .unwrap();
        let m = RankFiles::read(d.path()).measurement().unwrap().unwrap();
        assert_eq!(m.samples_per_sec, 12.0);
        assert_eq!(m.world_size, Some(2));
    }
}

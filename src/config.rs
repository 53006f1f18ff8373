//! The workspace (`tuneloop.toml`) and the policy (`policies/*.toml`): finding,
//! parsing, defaults, and the warnings for keys nobody reads.
//!
//! Defaults live in the `Default` impls below; `policies/default.toml` in this
//! repository (embedded as [`DEFAULT_POLICY_TOML`] and written by `init`) spells
//! them out with comments, and a test keeps the two equal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{place, ConfigError, Position};
use crate::knob::{ComputeKnob, LoaderKnob, DATA_PRESERVING};

pub const WORKSPACE_FILE: &str = "tuneloop.toml";
pub const DEFAULT_POLICY_TOML: &str = include_str!("../policies/default.toml");

/// `tuneloop.toml`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct WorkspaceFile {
    pub project: ProjectSection,
    pub bench: BenchSection,
    pub run: RunSection,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(default)]
pub struct ProjectSection {
    /// The training code's folder, relative to the workspace.
    pub root: String,
    /// The Python interpreter; `~` is expanded; `TUNELOOP_PYTHON` overrides it.
    /// Unset: discovered (active venv or conda env, the binary's own env,
    /// `python3` on PATH; see `interpreter`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// The only files an agent may change, relative to `root`.
    pub editable: Vec<String>,
}

impl Default for ProjectSection {
    fn default() -> Self {
        ProjectSection {
            root: ".".into(),
            python: None,
            editable: vec![],
        }
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(default)]
pub struct BenchSection {
    /// Managed mode: `MODULE:FUNCTION` of the user's `build()`.
    pub entry: Option<String>,
    /// Contract mode: a command that prints `samples/sec: N`.
    pub command: Option<String>,
    /// Command mode: the user's own training command, word by word
    /// (`["python", "train.py", "--epochs", "1"]`), run as is with tuneloop's
    /// instrumentation on its interpreter's path.
    pub run: Option<Vec<String>>,
    pub steps: u32,
    pub warmup_steps: u32,
    /// The timed window's least length, seconds: past `steps`, a run keeps
    /// timing whole `steps`-long stretches until this much time is timed
    /// (0: `steps` only). See [`crate::bench::window_s`].
    pub window_s: f64,
    /// Wall-clock limit of one bench process, seconds.
    pub timeout_s: u64,
    /// A command prefix the harness runs under, e.g.
    /// `torchrun --standalone --nproc_per_node {nproc}` or `srun -n {nproc} {python}`;
    /// the harness script and its arguments are appended.
    pub launcher: Option<String>,
    /// Processes (ranks) the launcher starts; `{nproc}` in `launcher`.
    pub nproc: u32,
    /// Under a launcher: give the loader a DistributedSampler when it has none.
    pub distributed_sampler: bool,
    /// Command mode: after tuning, time the command whole (baseline against
    /// final, interleaved) when one run of it ends within this many seconds;
    /// 0 = never ([`crate::bench::whole`]).
    pub whole_command_s: u64,
    /// Fork each measured run from a server that imported torch once,
    /// instead of starting Python afresh (managed mode, and command mode's
    /// `python SCRIPT` / `python -m MODULE`; see `bench::fork`).
    pub fork_server: bool,
}

/// `[bench] window_s`'s default: a run times at least `steps` steps and at
/// least this many seconds of them. 40 steps of a fast loader are a fifth of
/// a second, where an epoch's restart or one stall moves the figure by a
/// tenth; a second of steps holds several epochs' restarts and pauses alike,
/// so fewer pairs settle a decision (measured in bench/RESULTS.md, "The
/// timed window by time").
pub const WINDOW_S: f64 = 1.0;

impl Default for BenchSection {
    fn default() -> Self {
        BenchSection {
            entry: None,
            command: None,
            run: None,
            steps: 40,
            warmup_steps: 5,
            window_s: WINDOW_S,
            timeout_s: 300,
            launcher: None,
            nproc: 1,
            distributed_sampler: false,
            whole_command_s: 120,
            fork_server: true,
        }
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(default)]
pub struct RunSection {
    pub policy: String,
}

impl Default for RunSection {
    fn default() -> Self {
        RunSection {
            policy: "policies/default.toml".into(),
        }
    }
}

/// A policy file: what the agent may do, how the loop runs, how it decides.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct Policy {
    pub agent: AgentPolicy,
    #[serde(rename = "loop")]
    pub loop_: LoopPolicy,
    pub decision: DecisionPolicy,
    /// Compute-side turns and their numerics guard (see [`crate::compute`]).
    pub compute: ComputePolicy,
}

/// `[compute]` of a policy file.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(default)]
pub struct ComputePolicy {
    /// The compute changes an agent may make, each one turn: num_threads,
    /// channels_last, foreach_optimizer, fused_optimizer, cudnn_benchmark
    /// (numerics-preserving), tf32, autocast, compile (numerics-changing).
    pub knobs: Vec<String>,
    /// Numerics-preserving changes: the largest relative difference of a
    /// loss from the incumbent's at the same step.
    pub exact_rtol: f64,
    /// Numerics-changing changes: the largest relative difference of a loss
    /// from the baseline's at the same step.
    pub loss_rtol: f64,
}

/// The compute knobs a policy enables when it does not say: the numerics-
/// preserving ones, and `tf32`/`autocast` under the loss guard. Not
/// `compile`: each run pays its compilation, which a short bench cannot
/// amortize, so a user asks for it.
pub const DEFAULT_KNOBS: [ComputeKnob; 7] = [
    ComputeKnob::NumThreads,
    ComputeKnob::ChannelsLast,
    ComputeKnob::ForeachOptimizer,
    ComputeKnob::FusedOptimizer,
    ComputeKnob::CudnnBenchmark,
    ComputeKnob::Tf32,
    ComputeKnob::Autocast,
];

impl Default for ComputePolicy {
    fn default() -> Self {
        ComputePolicy {
            knobs: DEFAULT_KNOBS.iter().map(|k| k.name().to_string()).collect(),
            exact_rtol: 1e-3,
            loss_rtol: 0.02,
        }
    }
}

impl ComputePolicy {
    /// The knobs named, in the order the builtin agent tries them.
    pub fn enabled(&self) -> Vec<ComputeKnob> {
        ComputeKnob::ALL
            .into_iter()
            .filter(|k| self.knobs.iter().any(|n| n == k.name()))
            .collect()
    }

    /// `(key, message)` for a value that parses but cannot work.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for k in &self.knobs {
            if ComputeKnob::parse(k).is_none() {
                let known: Vec<&str> = ComputeKnob::ALL.iter().map(|k| k.name()).collect();
                return Err((
                    "compute.knobs",
                    format!("unknown compute knob `{k}`; known: {}", known.join(", ")),
                ));
            }
        }
        for (key, v) in [
            ("compute.exact_rtol", self.exact_rtol),
            ("compute.loss_rtol", self.loss_rtol),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err((key, "must be a relative tolerance >= 0, e.g. 0.02".into()));
            }
        }
        Ok(())
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(default)]
pub struct AgentPolicy {
    /// `builtin` (offline, deterministic), `claude` (Claude Code headless), or
    /// `hybrid` (builtin for the knobs, then Claude Code for structural turns).
    pub backend: String,
    pub command: String,
    pub tools: Vec<String>,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    pub max_turns: u32,
    pub timeout_s: u64,
    pub model: Option<String>,
    pub max_budget_usd: Option<f64>,
    pub permission_mode: String,
    /// Prompt template; `{language}` is replaced by `language`.
    pub prompt: String,
    /// `en` or `ja`: the prompt, the report labels.
    pub language: String,
    pub extra_args: Vec<String>,
}

impl Default for AgentPolicy {
    fn default() -> Self {
        AgentPolicy {
            backend: "builtin".into(),
            command: "claude".into(),
            tools: vec!["Read".into(), "Edit".into(), "Glob".into(), "Grep".into()],
            allowed_tools: vec!["Read".into(), "Edit".into(), "Glob".into(), "Grep".into()],
            disallowed_tools: vec![
                "Bash".into(),
                "Write".into(),
                "WebFetch".into(),
                "WebSearch".into(),
            ],
            max_turns: 8,
            timeout_s: 600,
            model: None,
            max_budget_usd: Some(1.0),
            permission_mode: "dontAsk".into(),
            prompt: "prompts/turn.{language}.md".into(),
            language: "en".into(),
            extra_args: vec![],
        }
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(default)]
pub struct LoopPolicy {
    pub max_iterations: u32,
    /// What the agent may change: the names of loader knobs
    /// ([`LoaderKnob::name`]), kept as written so that an unknown one is
    /// refused by [`Policy::validate`] at its line; read them as knobs with
    /// [`LoopPolicy::loader_knobs`] and [`LoopPolicy::allows`].
    pub knobs: Vec<String>,
    pub max_consecutive_reverts: u32,
    /// Stop when the agent's summed cost reaches this (USD); 0 = no limit.
    pub max_total_usd: f64,
    /// Stop when the run has lasted this long (seconds); 0 = no limit.
    pub max_wall_s: u64,
    /// Go on tuning even when the baseline shows little data_wait.
    pub force: bool,
    /// Let a preprocessing change alter the data the model sees (flagged in the report).
    pub allow_data_change: bool,
}

impl LoopPolicy {
    /// The loader knobs the policy lets a turn change, in its order.
    pub fn loader_knobs(&self) -> Vec<LoaderKnob> {
        self.knobs
            .iter()
            .filter_map(|k| LoaderKnob::parse(k))
            .collect()
    }

    /// Whether the policy lets a turn change `knob`.
    pub fn allows(&self, knob: LoaderKnob) -> bool {
        self.knobs.iter().any(|k| knob.is(k))
    }
}

impl Default for LoopPolicy {
    fn default() -> Self {
        LoopPolicy {
            max_iterations: 10,
            knobs: DATA_PRESERVING.iter().map(|k| k.to_string()).collect(),
            max_consecutive_reverts: 3,
            max_total_usd: 5.0,
            max_wall_s: 0,
            force: false,
            allow_data_change: false,
        }
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(default)]
pub struct DecisionPolicy {
    /// Interleaved pairs measured first (candidate + incumbent = 2 runs a pair).
    pub repeats: u32,
    /// Pairs at most, when the first ones leave the answer open.
    pub max_repeats: u32,
    /// Pairs at most for a change's first comparison whose runs saw other
    /// processes take cores, while it stays open and its median still
    /// reaches 1 + min_gain ([`crate::bench::stats::decide_beside_load`]);
    /// at or under `max_repeats`: no more pairs beside load.
    pub max_repeats_beside_load: u32,
    /// The median paired ratio must reach 1 + min_gain.
    pub min_gain: f64,
    /// The whole confidence interval must lie above 1 + noise_threshold.
    pub noise_threshold: f64,
    /// Two-sided confidence level of the ratio's interval.
    pub confidence: f64,
    /// The futility look: from the second pair on, a candidate is reverted
    /// once even this (lower) confidence's interval tops out under
    /// 1 + min_gain; 0 turns it off. It only ever reverts sooner, so it
    /// cannot keep a null change ([`crate::bench::stats::decide`]).
    pub futility_confidence: f64,
    /// Stop when data_wait falls below this share of step time.
    pub stop_when_data_wait_below: f64,
    /// Stop when the incumbent reaches this share of the ceiling.
    pub stop_when_ceiling_share_above: f64,
    /// Throughput runs of the baseline (profiled run not counted).
    pub baseline_runs: u32,
    /// After a run on a busy machine (others on a quarter of the cores or
    /// more), wait up to this many seconds for it to quiet down before the
    /// next pair; 0: never wait.
    pub busy_wait_s: u64,
    /// Pairs of one comparison that may be set aside for uneven load (one
    /// run saw clearly more of other processes than its partner) and
    /// measured again; past that they are used as they are. 0: never.
    pub max_set_aside: u32,
    /// Measure a change kept while other processes took cores again (after
    /// waiting for a quiet machine) before it stays.
    pub confirm_kept: bool,
    /// Measure every kept compute change again before it stays.
    pub confirm_compute: bool,
    /// The final comparison adds pairs until its interval's high end is
    /// within this factor of its low end...
    pub final_spread: f64,
    /// ...or it has this many pairs.
    pub final_max_pairs: u32,
}

impl Default for DecisionPolicy {
    fn default() -> Self {
        DecisionPolicy {
            repeats: 2,
            max_repeats: 8,
            max_repeats_beside_load: 16,
            min_gain: 0.03,
            noise_threshold: 0.01,
            confidence: 0.99,
            futility_confidence: 0.80,
            stop_when_data_wait_below: 0.10,
            stop_when_ceiling_share_above: 0.95,
            baseline_runs: 3,
            busy_wait_s: 60,
            max_set_aside: 4,
            confirm_kept: true,
            confirm_compute: true,
            final_spread: 1.5,
            final_max_pairs: 10,
        }
    }
}

impl Policy {
    pub fn parse(text: &str, path: &Path) -> Result<(Policy, Vec<UnknownKey>), ConfigError> {
        parse_toml(text, path)
    }

    /// Reads and parses a policy file; the caller prints its warnings, then
    /// calls [`PolicyFile::validate`].
    pub fn load(path: &Path) -> Result<PolicyFile, ConfigError> {
        let source = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            err: e,
            hint: "pass --policy FILE, or run `tuneloop init` to write policies/default.toml",
        })?;
        let (policy, unknown) = parse_toml(&source, path)?;
        Ok(PolicyFile {
            policy,
            path: path.to_owned(),
            unknown,
            source,
        })
    }

    /// Checks values that parse but cannot work; the errors name no line
    /// (see [`PolicyFile::validate`] for a policy read from a file).
    pub fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        self.validate_in(path, None)
    }

    /// [`Policy::validate`], with each error placed in `source`, the text
    /// the policy was parsed from.
    fn validate_in(&self, path: &Path, source: Option<&str>) -> Result<(), ConfigError> {
        let bad_at = |key: &str, element: Option<&str>, msg: String| ConfigError::Invalid {
            path: path.to_owned(),
            key: key.to_string(),
            at: source.and_then(|s| key_position(s, key, element)),
            message: msg,
        };
        let bad = |key: &str, msg: String| bad_at(key, None, msg);
        if !["builtin", "claude", "hybrid"].contains(&self.agent.backend.as_str()) {
            return Err(bad(
                "agent.backend",
                format!(
                    "`{}` is not an agent; use \"builtin\", \"claude\" or \"hybrid\"",
                    self.agent.backend
                ),
            ));
        }
        if !["en", "ja"].contains(&self.agent.language.as_str()) {
            return Err(bad(
                "agent.language",
                format!("`{}`: use \"en\" or \"ja\"", self.agent.language),
            ));
        }
        if self.agent.max_turns < 1 {
            return Err(bad(
                "agent.max_turns",
                "must be at least 1 (2 or more recommended)".into(),
            ));
        }
        let d = &self.decision;
        if d.repeats < 2 {
            return Err(bad(
                "decision.repeats",
                "at least 2 pairs are needed for an interval".into(),
            ));
        }
        if d.max_repeats < d.repeats {
            return Err(bad(
                "decision.max_repeats",
                "must be >= decision.repeats".into(),
            ));
        }
        if !(0.5..1.0).contains(&d.confidence) {
            return Err(bad(
                "decision.confidence",
                "must be in [0.5, 1), e.g. 0.95".into(),
            ));
        }
        if d.futility_confidence != 0.0 && !(0.5..d.confidence).contains(&d.futility_confidence) {
            return Err(bad(
                "decision.futility_confidence",
                "must be 0 (off) or in [0.5, decision.confidence), e.g. 0.8".into(),
            ));
        }
        if d.baseline_runs < 1 {
            return Err(bad("decision.baseline_runs", "must be at least 1".into()));
        }
        if d.final_spread.is_nan() || d.final_spread <= 1.0 {
            return Err(bad(
                "decision.final_spread",
                "must be above 1 (the interval's high end over its low end), e.g. 1.5".into(),
            ));
        }
        if d.final_max_pairs < 3 {
            return Err(bad("decision.final_max_pairs", "must be at least 3".into()));
        }
        for k in &self.loop_.knobs {
            if LoaderKnob::parse(k).is_none() {
                let known: Vec<&str> = LoaderKnob::ALL.iter().map(|k| k.name()).collect();
                return Err(bad_at(
                    "loop.knobs",
                    Some(k),
                    format!("unknown knob `{k}`; known: {}", known.join(", ")),
                ));
            }
        }
        self.compute.check().map_err(|(key, msg)| {
            // The element the check refused, to point at its line.
            let unknown = self
                .compute
                .knobs
                .iter()
                .find(|k| crate::knob::ComputeKnob::parse(k).is_none());
            let element = if key == "compute.knobs" {
                unknown
            } else {
                None
            };
            bad_at(key, element.map(String::as_str), msg)
        })?;
        Ok(())
    }

    pub fn agent_timeout(&self) -> Duration {
        Duration::from_secs(self.agent.timeout_s.max(1))
    }
}

/// A policy file as read: the policy, the keys it does not read, and the
/// text, so that a value [`PolicyFile::validate`] refuses is named with
/// its line.
#[derive(Clone, Debug)]
pub struct PolicyFile {
    pub policy: Policy,
    pub path: PathBuf,
    pub unknown: Vec<UnknownKey>,
    source: String,
}

impl PolicyFile {
    /// The built-in default policy, standing in for a file at `path` that
    /// does not exist: nothing in it has a line.
    pub fn built_in(path: &Path) -> PolicyFile {
        PolicyFile {
            policy: Policy::default(),
            path: path.to_owned(),
            unknown: Vec::new(),
            source: String::new(),
        }
    }

    /// `path:line:column` of dotted `key` (of `element`, one string of its
    /// array, when given and written so), else `path`: where a warning
    /// about that key points.
    pub fn place(&self, key: &str, element: Option<&str>) -> String {
        place(&self.path, &key_position(&self.source, key, element))
    }

    /// One warning a key nobody reads, `path:line:column: unknown key …`.
    pub fn warnings(&self) -> Vec<String> {
        self.unknown.iter().map(|u| u.warning(&self.path)).collect()
    }

    /// [`Policy::validate`], each error naming the line of its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.policy.validate_in(&self.path, Some(&self.source))
    }
}

/// A key of a file that no field reads (a typo, or a key of another
/// version): the dotted path serde saw and where it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKey {
    pub key: String,
    pub at: Option<Position>,
}

impl UnknownKey {
    pub fn warning(&self, path: &Path) -> String {
        format!(
            "{}: unknown key `{}` (ignored)",
            place(path, &self.at),
            self.key
        )
    }
}

/// Parses TOML into `T`, returning the keys `T` does not read.
fn parse_toml<T: for<'de> Deserialize<'de>>(
    text: &str,
    path: &Path,
) -> Result<(T, Vec<UnknownKey>), ConfigError> {
    let mut unknown = Vec::new();
    let de = toml::Deserializer::new(text);
    let value: T = serde_ignored::deserialize(de, |p| unknown.push(p.to_string()))
        .map_err(|e: toml::de::Error| parse_error(text, path, &e))?;
    let unknown = unknown
        .into_iter()
        .map(|key| UnknownKey {
            at: key_position(text, &key, None),
            key,
        })
        .collect();
    Ok((value, unknown))
}

/// toml's error, placed: the line and column of its span, the key whose
/// value it is about, and the line with a caret under the span.
fn parse_error(text: &str, path: &Path, e: &toml::de::Error) -> ConfigError {
    let span = e.span();
    let at = span.as_ref().map(|r| Position::of_offset(text, r.start));
    let key = span.as_ref().and_then(|r| {
        let doc = toml_edit::ImDocument::parse(text).ok()?;
        key_at(doc.as_item(), r.start, "")
    });
    let snippet = match (&span, at) {
        (Some(r), Some(at)) => {
            let line = text.lines().nth(at.line - 1).unwrap_or("");
            let width = text
                .get(r.clone())
                .map_or(1, |s| s.lines().next().unwrap_or("").chars().count().max(1));
            let gutter = " ".repeat(at.line.to_string().len());
            format!(
                "\n{gutter} |\n{} | {line}\n{gutter} | {}{}",
                at.line,
                " ".repeat(at.column - 1),
                "^".repeat(width)
            )
        }
        _ => String::new(),
    };
    ConfigError::Parse {
        path: path.to_owned(),
        key,
        at,
        message: e.message().trim_end().to_string(),
        snippet,
    }
}

/// Where dotted `key` is written in TOML `text`: the element of its array
/// equal to `element` when given and present, else the key itself, else
/// (the key is missing) the nearest table above it that is written. `None`
/// when the text does not parse or holds none of these.
pub(crate) fn key_position(text: &str, key: &str, element: Option<&str>) -> Option<Position> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut item = doc.as_item();
    let mut found = None;
    for part in key.split('.') {
        let Some(table) = item.as_table_like() else {
            break;
        };
        let Some(child) = table.get(part) else {
            break;
        };
        found = table
            .key(part)
            .and_then(|k| k.span())
            .or_else(|| child.span())
            .or(found);
        item = child;
    }
    if let (Some(element), toml_edit::Item::Value(toml_edit::Value::Array(a))) = (element, item) {
        if let Some(span) = a
            .iter()
            .find(|v| v.as_str() == Some(element))
            .and_then(|v| v.span())
        {
            found = Some(span);
        }
    }
    found.map(|r| Position::of_offset(text, r.start))
}

/// The dotted key whose value holds byte `offset` (the deepest one).
fn key_at(item: &toml_edit::Item, offset: usize, prefix: &str) -> Option<String> {
    let table = item.as_table_like()?;
    for (name, child) in table.iter() {
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        if let Some(deeper) = key_at(child, offset, &path) {
            return Some(deeper);
        }
        let start = table.key(name).and_then(|k| k.span()).map(|r| r.start);
        let end = child.span().map(|r| r.end);
        if let (Some(start), Some(end)) = (start, end) {
            if (start..end).contains(&offset) {
                return Some(path);
            }
        }
    }
    None
}

/// A loaded workspace: where things are, and what they say.
#[derive(Clone, Debug)]
pub struct Workspace {
    /// The folder holding `tuneloop.toml`.
    pub dir: PathBuf,
    pub file: WorkspaceFile,
    /// Absolute project root.
    pub project_root: PathBuf,
    pub warnings: Vec<String>,
}

impl Workspace {
    /// Walks up from `start` to the first folder with `tuneloop.toml`, like Cargo.
    pub fn find(start: &Path) -> Result<PathBuf, ConfigError> {
        let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_owned());
        let mut dir = Some(start.as_path());
        while let Some(d) = dir {
            if d.join(WORKSPACE_FILE).is_file() {
                return Ok(d.to_owned());
            }
            dir = d.parent();
        }
        Err(ConfigError::NoWorkspace { start })
    }

    pub fn load(dir: &Path) -> Result<Workspace, ConfigError> {
        let path = dir.join(WORKSPACE_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| ConfigError::Read {
            path: path.clone(),
            err: e,
            hint: "run `tuneloop init` in your project to create it",
        })?;
        let (file, unknown): (WorkspaceFile, _) = parse_toml(&text, &path)?;
        let warnings = unknown
            .iter()
            .map(|u: &UnknownKey| u.warning(&path))
            .collect();
        let project_root = dir.join(&file.project.root);
        let ws = Workspace {
            dir: dir.to_owned(),
            file,
            project_root,
            warnings,
        };
        ws.validate(&text)?;
        Ok(ws)
    }

    /// Checks values that parse but cannot work; `source` is the file's
    /// text, where each error finds its key's line.
    fn validate(&self, source: &str) -> Result<(), ConfigError> {
        let path = self.dir.join(WORKSPACE_FILE);
        let bad_at = |key: &str, element: Option<&str>, message: String| ConfigError::Invalid {
            path: path.clone(),
            key: key.into(),
            at: key_position(source, key, element),
            message,
        };
        let bad = |key: &str, message: String| bad_at(key, None, message);
        if !self.project_root.is_dir() {
            return Err(bad(
                "project.root",
                format!("folder {} does not exist", self.project_root.display()),
            ));
        }
        let b = &self.file.bench;
        let modes = [b.entry.is_some(), b.command.is_some(), b.run.is_some()];
        match modes.iter().filter(|m| **m).count() {
            0 => {
                return Err(bad(
                    "bench.run",
                    "say how to measure: `run = [\"python\", \"train.py\"]` (your own training command), `entry = \"train:build\"` (managed mode) or `command = \"python bench.py\"` (contract mode); `tuneloop init -- python train.py` writes it"
                        .into(),
                ))
            }
            1 => {}
            _ => {
                return Err(bad(
                    "bench",
                    "set one of bench.run, bench.entry or bench.command, not several".into(),
                ))
            }
        }
        if let Some(e) = &b.entry {
            if !e.contains(':') {
                return Err(bad(
                    "bench.entry",
                    format!("`{e}` must look like MODULE:FUNCTION, e.g. train:build"),
                ));
            }
        }
        if b.run
            .as_ref()
            .is_some_and(|r| r.is_empty() || r[0].trim().is_empty())
        {
            return Err(bad(
                "bench.run",
                "the command is empty; e.g. run = [\"python\", \"train.py\"]".into(),
            ));
        }
        if let Some(l) = &b.launcher {
            if b.command.is_some() || b.run.is_some() {
                return Err(bad(
                    "bench.launcher",
                    "a launcher runs the managed harness; it cannot wrap bench.command or bench.run (put `torchrun …` at the head of bench.run instead)".into(),
                ));
            }
            if shell_words::split(l).map(|w| w.is_empty()).unwrap_or(true) {
                return Err(bad(
                    "bench.launcher",
                    format!("`{l}` is not a command line"),
                ));
            }
        }
        if b.nproc < 1 {
            return Err(bad("bench.nproc", "must be at least 1".into()));
        }
        if b.steps < 1 {
            return Err(bad("bench.steps", "must be at least 1".into()));
        }
        if self.file.project.editable.is_empty() {
            return Err(bad(
                "project.editable",
                "list the files the agent may change, e.g. [\"train.py\"]".into(),
            ));
        }
        for f in &self.file.project.editable {
            if Path::new(f).is_absolute() || f.split('/').any(|c| c == "..") {
                return Err(bad_at(
                    "project.editable",
                    Some(f),
                    format!("`{f}` must be a path inside the project root"),
                ));
            }
            let p = self.project_root.join(f);
            if !p.is_file() {
                return Err(bad_at(
                    "project.editable",
                    Some(f),
                    format!(
                        "editable file {} does not exist; fix the path or create the file",
                        p.display()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The interpreter to run: see [`crate::interpreter`] for the order.
    pub fn python(&self) -> String {
        self.interpreter().program
    }

    /// The interpreter and the rule that chose it, from this process's
    /// environment; a `[bench] run` whose head is a path to a Python runs
    /// that one, so it is that one.
    pub fn interpreter(&self) -> crate::interpreter::Interpreter {
        if let Some(i) = self
            .file
            .bench
            .run
            .as_deref()
            .and_then(|w| crate::interpreter::of_command(w, &self.project_root))
        {
            return i;
        }
        crate::interpreter::discover(
            self.file.project.python.as_deref(),
            &crate::interpreter::DiscoveryEnv::from_process(),
            &Path::is_file,
        )
    }

    pub fn policy_path(&self, override_: Option<&Path>) -> PathBuf {
        match override_ {
            Some(p) => p.to_owned(),
            None => self.dir.join(&self.file.run.policy),
        }
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.dir.join("runs")
    }

    /// Whether the project is the workspace itself (its own CLAUDE.md reaches the agent).
    pub fn project_is_workspace(&self) -> bool {
        std::fs::canonicalize(&self.project_root).ok() == std::fs::canonicalize(&self.dir).ok()
    }
}

pub fn expand_home(p: &str) -> String {
    if let Some(rest) = p.strip_prefix("~/") {
        if let Ok(home) = std::env::var("HOME") {
            return format!("{home}/{rest}");
        }
    }
    p.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_policy_equals_the_defaults() {
        let (p, unknown) = Policy::parse(DEFAULT_POLICY_TOML, Path::new("default.toml")).unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(p, Policy::default());
    }

    #[test]
    fn unknown_keys_are_reported_with_their_path_and_line() {
        let (_, unknown) = Policy::parse(
            "[decision]\nrepeats = 4\nrepeatz = 5\n[agnet]\nx=1\n",
            Path::new("p.toml"),
        )
        .unwrap();
        let at = |line, column| Some(Position { line, column });
        assert_eq!(
            unknown,
            vec![
                UnknownKey {
                    key: "decision.repeatz".into(),
                    at: at(3, 1)
                },
                UnknownKey {
                    key: "agnet".into(),
                    at: at(4, 2)
                },
            ]
        );
        assert_eq!(
            unknown[0].warning(Path::new("p.toml")),
            "p.toml:3:1: unknown key `decision.repeatz` (ignored)"
        );
    }

    #[test]
    fn type_errors_name_file_key_and_line() {
        let err =
            Policy::parse("[decision]\n\nrepeats = \"many\"\n", Path::new("pol.toml")).unwrap_err();
        assert!(
            matches!(
                &err,
                ConfigError::Parse { key: Some(k), at: Some(Position { line: 3, column: 11 }), .. }
                    if k == "decision.repeats"
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "pol.toml:3:11: `decision.repeats`: invalid type: string \"many\", expected u32\n  |\n3 | repeats = \"many\"\n  |           ^^^^^^"
        );
        // A dotted key and an inline table are found as well.
        let err = Policy::parse("agent.max_turns = -1\n", Path::new("p.toml")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("p.toml:1:19: `agent.max_turns`: "),
            "{err}"
        );
        let err = Policy::parse("\n\ncompute = { knobs = 3 }\n", Path::new("p.toml")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("p.toml:3:21: `compute.knobs`: "),
            "{err}"
        );
    }

    #[test]
    fn syntax_errors_name_file_and_line() {
        let err = Policy::parse(
            "[decision]\nrepeats = 4\nmin_gain = = 0.1\n",
            Path::new("p.toml"),
        )
        .unwrap_err();
        let ConfigError::Parse { key, at, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*key, None, "the file does not parse: no key to name");
        assert_eq!(at.map(|a| a.line), Some(3), "{err}");
        assert!(err.to_string().starts_with("p.toml:3:"), "{err}");
        assert!(err.to_string().contains("3 | min_gain = = 0.1"), "{err}");
    }

    /// Writes `text` as a policy file and loads it.
    fn policy_file(text: &str) -> (tempfile::TempDir, PolicyFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pol.toml");
        std::fs::write(&path, text).unwrap();
        let file = Policy::load(&path).unwrap();
        (dir, file)
    }

    /// The policy's validation error, with the temporary folder cut off.
    fn invalid(text: &str) -> String {
        let (dir, file) = policy_file(text);
        let msg = file.validate().unwrap_err().to_string();
        msg.replace(&format!("{}/", dir.path().display()), "")
    }

    #[test]
    fn policy_values_out_of_range_name_file_key_and_line() {
        assert_eq!(
            invalid("# tuned\n[agent]\nmax_turns = 2\nbackend = \"gpt\"\n"),
            "pol.toml:4:1: `agent.backend`: `gpt` is not an agent; use \"builtin\", \"claude\" or \"hybrid\""
        );
        assert_eq!(
            invalid("[decision]\nrepeats = 4\nmax_repeats = 3\n"),
            "pol.toml:3:1: `decision.max_repeats`: must be >= decision.repeats"
        );
        assert_eq!(
            invalid("[decision]\n  confidence = 1.5\n"),
            "pol.toml:2:3: `decision.confidence`: must be in [0.5, 1), e.g. 0.95"
        );
        // An unknown knob: the line of the element itself, in a list over lines.
        let msg = invalid("[loop]\nknobs = [\n  \"num_workers\",\n  \"batch_size\",\n]\n");
        assert!(
            msg.starts_with("pol.toml:4:3: `loop.knobs`: unknown knob `batch_size`"),
            "{msg}"
        );
        let msg = invalid("[compute]\nknobs = [\"channels_last\",\n \"warp_speed\"]\n");
        assert!(
            msg.starts_with("pol.toml:3:2: `compute.knobs`: unknown compute knob `warp_speed`"),
            "{msg}"
        );
        assert!(invalid("[compute]\n\nloss_rtol = -1.0\n")
            .starts_with("pol.toml:3:1: `compute.loss_rtol`: "),);
    }

    #[test]
    fn a_policy_file_warns_of_unknown_keys_with_their_line() {
        let (dir, file) = policy_file("[decision]\nrepeats = 3\nrepetes = 4\n");
        assert_eq!(
            file.warnings(),
            vec![format!(
                "{}:3:1: unknown key `decision.repetes` (ignored)",
                dir.path().join("pol.toml").display()
            )]
        );
        file.validate().unwrap();
    }

    /// A workspace folder with `train.py` and `tuneloop.toml` holding `toml`.
    fn workspace_error(toml: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("train.py"), "").unwrap();
        std::fs::write(dir.path().join(WORKSPACE_FILE), toml).unwrap();
        let msg = Workspace::load(dir.path()).unwrap_err().to_string();
        msg.replace(&format!("{}/", dir.path().display()), "")
    }

    const EDITABLE: &str = "[project]\neditable = [\"train.py\"]\n";

    #[test]
    fn workspace_values_out_of_range_name_file_key_and_line() {
        assert_eq!(
            workspace_error(&format!(
                "{EDITABLE}[bench]\nentry = \"train:build\"\nsteps = 0\n"
            )),
            "tuneloop.toml:5:1: `bench.steps`: must be at least 1"
        );
        assert_eq!(
            workspace_error(&format!("{EDITABLE}\n[bench]\nentry = \"train\"\n")),
            "tuneloop.toml:5:1: `bench.entry`: `train` must look like MODULE:FUNCTION, e.g. train:build"
        );
        // A missing key: the table it belongs in.
        assert!(workspace_error(&format!("{EDITABLE}[bench]\nsteps = 3\n"))
            .starts_with("tuneloop.toml:3:2: `bench.run`: say how to measure"),);
        // Two modes at once: the [bench] table.
        assert!(workspace_error(&format!(
            "{EDITABLE}\n[bench]\nentry = \"a:b\"\ncommand = \"python b.py\"\n"
        ))
        .starts_with("tuneloop.toml:4:2: `bench`: set one of"),);
        // The editable file that is missing, not the first of the list.
        let msg = workspace_error(
            "[project]\neditable = [\n  \"train.py\",\n  \"gone.py\",\n]\n[bench]\nentry = \"a:b\"\n",
        );
        assert!(
            msg.starts_with("tuneloop.toml:4:3: `project.editable`: editable file "),
            "{msg}"
        );
        assert!(msg.contains("gone.py does not exist"), "{msg}");
        // A type error in the workspace file.
        let msg = workspace_error(&format!(
            "{EDITABLE}[bench]\nentry = \"a:b\"\nsteps = \"many\"\n"
        ));
        assert!(
            msg.starts_with("tuneloop.toml:5:9: `bench.steps`: invalid type"),
            "{msg}"
        );
    }

    #[test]
    fn workspace_unknown_keys_name_their_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("train.py"), "").unwrap();
        std::fs::write(
            dir.path().join(WORKSPACE_FILE),
            format!("{EDITABLE}[bench]\nentry = \"a:b\"\nstep = 3\n"),
        )
        .unwrap();
        let ws = Workspace::load(dir.path()).unwrap();
        assert_eq!(
            ws.warnings,
            vec![format!(
                "{}:5:1: unknown key `bench.step` (ignored)",
                dir.path().join(WORKSPACE_FILE).display()
            )]
        );
    }

    #[test]
    fn a_file_that_cannot_be_read_keeps_its_io_error_as_source() {
        let err = Policy::load(Path::new("/nonexistent/pol.toml")).unwrap_err();
        let source = std::error::Error::source(&err).expect("the io error");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        let cause = source.to_string();
        // Printed once, although both the message and its source say it.
        let text = crate::error::render(&anyhow::Error::from(err));
        assert_eq!(text.matches(&cause).count(), 1, "{text}");
        assert!(text.contains("hint: pass --policy FILE"), "{text}");
    }

    #[test]
    fn validate_rejects_unknown_backend_and_knob() {
        let mut p = Policy::default();
        p.agent.backend = "gpt".into();
        assert!(p
            .validate(Path::new("x"))
            .unwrap_err()
            .to_string()
            .contains("agent.backend"));
        let mut p = Policy::default();
        p.loop_.knobs.push("batch_size".into());
        assert!(p
            .validate(Path::new("x"))
            .unwrap_err()
            .to_string()
            .contains("batch_size"));
    }
}

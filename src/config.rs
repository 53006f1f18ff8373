//! The workspace (`tuneloop.toml`) and the policy (`policies/*.toml`): finding,
//! parsing, defaults, and the warnings for keys nobody reads.
//!
//! Defaults live in the `Default` impls below; `policies/default.toml` in this
//! repository (embedded as [`DEFAULT_POLICY_TOML`] and written by `init`) spells
//! them out with comments, and a test keeps the two equal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::knob::ComputeKnob;

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
}

impl Default for BenchSection {
    fn default() -> Self {
        BenchSection {
            entry: None,
            command: None,
            run: None,
            steps: 40,
            warmup_steps: 5,
            timeout_s: 300,
            launcher: None,
            nproc: 1,
            distributed_sampler: false,
            whole_command_s: 120,
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
    /// What the agent may change: num_workers, pin_memory, prefetch_factor,
    /// persistent_workers, preprocessing.
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

impl Default for LoopPolicy {
    fn default() -> Self {
        LoopPolicy {
            max_iterations: 10,
            knobs: vec![
                "num_workers".into(),
                "pin_memory".into(),
                "prefetch_factor".into(),
                "persistent_workers".into(),
            ],
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
    /// The median paired ratio must reach 1 + min_gain.
    pub min_gain: f64,
    /// The whole confidence interval must lie above 1 + noise_threshold.
    pub noise_threshold: f64,
    /// Two-sided confidence level of the ratio's interval.
    pub confidence: f64,
    /// Stop when data_wait falls below this share of step time.
    pub stop_when_data_wait_below: f64,
    /// Stop when the incumbent reaches this share of the ceiling.
    pub stop_when_ceiling_share_above: f64,
    /// Throughput runs of the baseline (profiled run not counted).
    pub baseline_runs: u32,
}

impl Default for DecisionPolicy {
    fn default() -> Self {
        DecisionPolicy {
            repeats: 2,
            max_repeats: 8,
            min_gain: 0.03,
            noise_threshold: 0.01,
            confidence: 0.99,
            stop_when_data_wait_below: 0.10,
            stop_when_ceiling_share_above: 0.95,
            baseline_runs: 3,
        }
    }
}

impl Policy {
    pub fn parse(text: &str, path: &Path) -> Result<(Policy, Vec<String>), ConfigError> {
        parse_toml(text, path)
    }

    /// Reads and parses a policy file; the caller reports the unknown keys,
    /// then calls [`Policy::validate`].
    pub fn load(path: &Path) -> Result<(Policy, Vec<String>), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            err: e,
            hint: "pass --policy FILE, or run `tuneloop init` to write policies/default.toml",
        })?;
        parse_toml(&text, path)
    }

    /// Checks values that parse but cannot work.
    pub fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |key: &str, msg: String| ConfigError::Invalid {
            path: path.to_owned(),
            key: key.to_string(),
            message: msg,
        };
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
        if d.baseline_runs < 1 {
            return Err(bad("decision.baseline_runs", "must be at least 1".into()));
        }
        const KNOBS: [&str; 5] = [
            "num_workers",
            "pin_memory",
            "prefetch_factor",
            "persistent_workers",
            "preprocessing",
        ];
        for k in &self.loop_.knobs {
            if !KNOBS.contains(&k.as_str()) {
                return Err(bad(
                    "loop.knobs",
                    format!("unknown knob `{k}`; known: {}", KNOBS.join(", ")),
                ));
            }
        }
        self.compute.check().map_err(|(key, msg)| bad(key, msg))?;
        Ok(())
    }

    pub fn agent_timeout(&self) -> Duration {
        Duration::from_secs(self.agent.timeout_s.max(1))
    }
}

/// Parses TOML into `T`, returning the dotted paths of keys `T` does not read.
fn parse_toml<T: for<'de> Deserialize<'de>>(
    text: &str,
    path: &Path,
) -> Result<(T, Vec<String>), ConfigError> {
    let mut unknown = Vec::new();
    let de = toml::Deserializer::new(text);
    let value: T = serde_ignored::deserialize(de, |p| unknown.push(p.to_string())).map_err(
        |e: toml::de::Error| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_string(),
        },
    )?;
    Ok((value, unknown))
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
            .into_iter()
            .map(|k| format!("{}: unknown key `{k}` (ignored)", path.display()))
            .collect();
        let project_root = dir.join(&file.project.root);
        let ws = Workspace {
            dir: dir.to_owned(),
            file,
            project_root,
            warnings,
        };
        ws.validate()?;
        Ok(ws)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let path = self.dir.join(WORKSPACE_FILE);
        let bad = |key: &str, message: String| ConfigError::Invalid {
            path: path.clone(),
            key: key.into(),
            message,
        };
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
                return Err(bad(
                    "project.editable",
                    format!("`{f}` must be a path inside the project root"),
                ));
            }
            let p = self.project_root.join(f);
            if !p.is_file() {
                return Err(bad(
                    "project.editable",
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

    /// The interpreter and the rule that chose it, from this process's environment.
    pub fn interpreter(&self) -> crate::interpreter::Interpreter {
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
    fn unknown_keys_are_reported_with_their_path() {
        let (_, unknown) = Policy::parse(
            "[decision]\nrepeats = 4\nrepeatz = 5\n[agnet]\nx=1\n",
            Path::new("p.toml"),
        )
        .unwrap();
        assert_eq!(
            unknown,
            vec!["decision.repeatz".to_string(), "agnet".to_string()]
        );
    }

    #[test]
    fn type_errors_name_file_key_and_line() {
        let err =
            Policy::parse("[decision]\n\nrepeats = \"many\"\n", Path::new("pol.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("pol.toml"), "{msg}");
        assert!(msg.contains("line 3"), "{msg}");
        assert!(msg.contains("repeats"), "{msg}");
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

//! Reading a run folder back for review: the [`RunReport`] (from
//! `report.json`, or rebuilt from the turn files when the run was killed
//! before writing it), the one-line summaries of `tuneloop runs`, and one
//! turn's files for `tuneloop show`. Reading is here; the text for the
//! terminal is made by the pure renderers of `cli::review_view`, and the
//! reports themselves by [`crate::report`].

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::report::RunReport;
use crate::run_folder::{self, AgentRecord, RunFolderError, RunRecord, RunState, TurnBench};
use crate::run_report::{self, RunFacts};
use crate::store;
use crate::turn::TurnRow;

/// Why a run folder cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("{dir} has no report.json, and its baseline was not measured yet (baseline/bench.json is missing): there is nothing to report")]
    NoBaseline { dir: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not what this tuneloop expects: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Folder(#[from] RunFolderError),
    #[error(
        "run {run} has no turn {turn} (it has {have}); `tuneloop show {run}` shows the whole run"
    )]
    NoTurn {
        run: String,
        turn: u32,
        have: String,
    },
}

fn read_text(path: &Path) -> Result<String, ReviewError> {
    std::fs::read_to_string(path).map_err(|source| ReviewError::Read {
        path: path.to_owned(),
        source,
    })
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ReviewError> {
    serde_json::from_str(&read_text(path)?).map_err(|source| ReviewError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// `run.json`, or `None` when it is missing or torn.
fn run_record(dir: &Path) -> Option<RunRecord> {
    RunRecord::read(dir).ok()
}

/// The run's language for the words of `show` (English when unknown).
fn run_language(run: Option<&RunRecord>) -> String {
    run.map_or_else(|| "en".to_string(), |r| r.policy.agent.language.clone())
}

fn run_id(dir: &Path) -> String {
    dir.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn decided_count(dir: &Path) -> usize {
    run_folder::turn_folders(dir)
        .iter()
        .filter(|t| t.is_decided())
        .count()
}

/// The run's report: `report.json` when it covers every decided turn, else
/// rebuilt from the folder by [`rebuild_report`] (marked interrupted).
pub fn load_report(dir: &Path) -> Result<RunReport, ReviewError> {
    let path = dir.join("report.json");
    let written: Option<Result<RunReport, ReviewError>> = path.exists().then(|| read_json(&path));
    // A resumed run killed again has decisions its old report lacks.
    let written = match written {
        Some(Ok(r)) if r.turns.len() >= decided_count(dir) => return Ok(r),
        other => other,
    };
    match rebuild_report(dir) {
        Ok(r) => Ok(r),
        Err(e) => match written {
            Some(w) => w,
            None => Err(e),
        },
    }
}

/// Rebuilds the report of a run that ended without writing one (killed, or
/// still running) from what it left: `run.json`, `baseline/bench.json`, each
/// decided turn's `decision.json`, `final.json` when the final measurement
/// was done, and the saved files for the kept diff. Always `interrupted`.
pub fn rebuild_report(dir: &Path) -> Result<RunReport, ReviewError> {
    let facts = match RunFacts::read(dir) {
        Ok(f) => f,
        Err(e) if e.is_missing() => {
            return Err(ReviewError::NoBaseline {
                dir: dir.to_owned(),
            })
        }
        Err(e) => return Err(ReviewError::Folder(e)),
    };
    Ok(run_report::assemble(dir, facts, None))
}

// ---------------------------------------------------------------- runs

/// One line of `tuneloop runs` (and one object of `runs --json`).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub id: String,
    /// When it started (RFC 3339, as in run.json).
    pub date: String,
    /// The project folder, relative to the workspace when inside it.
    pub project: String,
    pub agent: String,
    /// Decided turns.
    pub turns: Option<usize>,
    pub speedup: Option<f64>,
    pub stop_reason: Option<String>,
    /// run.json's state: finished, interrupted, running, restored, failed —
    /// or `killed` for a `running` run whose process is gone.
    pub state: String,
    /// The run did not finish on its own: Ctrl-C, killed, or still going.
    pub interrupted: bool,
}

/// Summaries of every run in `runs_dir`, oldest first.
pub fn list_runs(runs_dir: &Path) -> Vec<RunSummary> {
    let live_owner = std::fs::read_to_string(runs_dir.join(".lock"))
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u32>().ok())
        .is_some_and(crate::process::pid_alive);
    store::list_runs(runs_dir)
        .iter()
        .map(|d| summarize(d, live_owner))
        .collect()
}

fn summarize(dir: &Path, lock_held: bool) -> RunSummary {
    let run = run_record(dir);
    let rep = load_report(dir).ok();
    let state = match run.as_ref().map(|r| r.state) {
        Some(RunState::Running) if !lock_held => "killed".to_string(),
        Some(s) => s.to_string(),
        None => "?".to_string(),
    };
    let project_root = run.as_ref().map_or("", |r| r.project_root.as_str());
    let workspace = run.as_ref().map(|r| r.workspace.as_str());
    let project = match workspace.filter(|w| !w.is_empty()).map(Path::new) {
        Some(ws) => match Path::new(project_root).strip_prefix(ws) {
            Ok(p) if p.as_os_str().is_empty() => ".".to_string(),
            Ok(p) => p.display().to_string(),
            Err(_) => project_root.to_string(),
        },
        None => project_root.to_string(),
    };
    RunSummary {
        id: run_id(dir),
        date: run
            .as_ref()
            .map(|r| r.started_at.clone())
            .unwrap_or_default(),
        project,
        agent: run.as_ref().map(|r| r.agent.clone()).unwrap_or_default(),
        turns: rep.as_ref().map(|r| r.turns.len()),
        speedup: rep.as_ref().map(|r| r.speedup).filter(|s| s.is_finite()),
        stop_reason: rep.as_ref().map(|r| r.stop_reason.clone()),
        interrupted: matches!(
            state.as_str(),
            "interrupted" | "running" | "killed" | "restored"
        ) || rep.as_ref().is_some_and(|r| r.interrupted),
        state,
    }
}

// ---------------------------------------------------------------- show

/// One tool call the agent made.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolCall {
    pub tool: String,
    pub input: String,
}

/// Everything a turn folder holds, read for `tuneloop show RUN TURN`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TurnFiles {
    pub run_id: String,
    pub language: String,
    pub turn: u32,
    /// How many turn folders the run has.
    pub of: usize,
    pub prompt: Option<String>,
    /// agent.json: `info`, `failure`, `summary`, `exhausted`.
    pub agent: Option<AgentRecord>,
    /// From the agent's raw stream (`turns/NN/events.jsonl`, Claude Code)
    /// or else the run log's `agent_tool` events of this turn.
    pub tool_calls: Vec<ToolCall>,
    pub diff: Option<String>,
    /// bench.json: candidate and incumbent measured interleaved.
    pub bench: Option<TurnBench>,
    pub bench_error: Option<String>,
    pub decision: Option<TurnRow>,
    /// The policy's `decision.confidence`, for the interval's label.
    pub confidence: Option<f64>,
}

/// Reads turn `turn` of the run in `dir`.
pub fn read_turn(dir: &Path, turn: u32) -> Result<TurnFiles, ReviewError> {
    let all = run_folder::turn_folders(dir);
    let Some(folder) = all.iter().find(|t| t.turn == turn) else {
        let have = match (all.first(), all.last()) {
            (Some(a), Some(b)) if a.turn == b.turn => format!("turn {}", a.turn),
            (Some(a), Some(b)) => format!("turns {}–{}", a.turn, b.turn),
            _ => "no turns".to_string(),
        };
        return Err(ReviewError::NoTurn {
            run: run_id(dir),
            turn,
            have,
        });
    };
    let tdir = &folder.dir;
    let text = |f: &str| std::fs::read_to_string(tdir.join(f)).ok();
    let run = run_record(dir);
    let raw = tdir.join("events.jsonl");
    let tool_calls = if raw.is_file() {
        let mut st = crate::agent::claude::stream::Stream::default();
        for line in text("events.jsonl").unwrap_or_default().lines() {
            st.feed(line);
        }
        st.tool_uses
            .into_iter()
            .map(|t| ToolCall {
                tool: t.name,
                input: t.summary,
            })
            .collect()
    } else {
        store::read_events(dir)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e["event"] == "agent_tool" && e["turn"].as_u64() == Some(turn as u64))
            .map(|e| ToolCall {
                tool: e["tool"].as_str().unwrap_or("?").to_string(),
                input: e["input"].as_str().unwrap_or_default().to_string(),
            })
            .collect()
    };
    Ok(TurnFiles {
        run_id: run_id(dir),
        language: run_language(run.as_ref()),
        turn,
        of: all.len(),
        prompt: text("prompt.md"),
        agent: folder.agent().ok(),
        tool_calls,
        diff: text("diff.patch"),
        bench: folder.bench().ok(),
        bench_error: text("bench_error.txt"),
        decision: folder.decision(),
        confidence: run.as_ref().map(|r| r.policy.decision.confidence),
    })
}

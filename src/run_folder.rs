//! The run folder's on-disk format, typed: what `run.json`, `baseline/bench.json`,
//! `turns/NN/bench.json`, `turns/NN/decision.json` and `final.json` hold, the
//! run's [`RunState`], and the one listing of turn folders in turn order.
//! Everything under `src/` that reads these files reads them through here;
//! [`crate::store`] owns how files are written (atomically) and the event log.
//!
//! Compatibility: folders written before `format_version` existed (this
//! version's predecessor) read as version 0 with the same fields; a folder
//! written by a newer tuneloop is refused with a message that says so.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::bench::stats::Verdict;
use crate::bench::Measurement;
use crate::config::{BenchSection, Policy};
use crate::turn::{AgentInfo, TurnRow};

/// The version of the run folder format this tuneloop writes (`run.json`'s
/// `format_version`). Folders without one are version 0 and read the same.
pub const RUN_FORMAT_VERSION: u32 = 1;

/// Why a run folder's file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RunFolderError {
    #[error("cannot read {path}: {source}\n  hint: is this a tuneloop run folder? `tuneloop runs` lists them")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not what this tuneloop expects ({source})\n  hint: the file may be torn by a crash, or written by an older tuneloop; `tuneloop restore` still puts the saved files back")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path} was written by a newer tuneloop (run folder format {found}, this one reads up to {RUN_FORMAT_VERSION})\n  hint: use that tuneloop version to resume or restore it")]
    Newer { path: PathBuf, found: u32 },
}

impl RunFolderError {
    /// The file is simply not there (as opposed to unreadable or malformed).
    pub fn is_missing(&self) -> bool {
        matches!(self, RunFolderError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

fn read_typed<T: DeserializeOwned>(path: &Path) -> Result<T, RunFolderError> {
    let text = std::fs::read_to_string(path).map_err(|source| RunFolderError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| RunFolderError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// Where a run stands, as `run.json` records it. The serde names are the
/// strings earlier versions wrote.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Started and not ended; if its process is gone, it was killed.
    Running,
    /// Stopped by Ctrl-C with the incumbent's files in place; resumable.
    Interrupted,
    /// Ended by a set-up or infrastructure error.
    Failed,
    /// Ran to its stop rule and wrote its report.
    Finished,
    /// Closed by `tuneloop restore` after it stopped unfinished.
    Restored,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Interrupted => "interrupted",
            RunState::Failed => "failed",
            RunState::Finished => "finished",
            RunState::Restored => "restored",
        }
    }

    /// Stopped before it finished, and the project may hold its files
    /// (`resume` continues it, `restore` closes it).
    pub fn is_unfinished(self) -> bool {
        matches!(self, RunState::Running | RunState::Interrupted)
    }

    /// `resume` has nothing to do.
    pub fn is_closed(self) -> bool {
        matches!(self, RunState::Finished | RunState::Restored)
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The machine the run measured on (`run.json`'s `environment`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct RunEnvironment {
    pub cpu_count: Option<u32>,
    pub device: Option<String>,
    pub torch_version: Option<String>,
    pub cuda_available: Option<bool>,
    pub world_size: u32,
    pub os: String,
    pub tuneloop_version: String,
}

/// `run.json`: what a run is (project, policy, agent) and where it stands.
/// Rewritten at each state change; the fields are in the order earlier
/// versions wrote them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// 0 (absent) for folders written before the format had a version.
    #[serde(default)]
    pub format_version: u32,
    #[serde(default)]
    pub run_id: String,
    pub state: RunState,
    #[serde(default)]
    pub started_at: String,
    /// The workspace folder (holding `tuneloop.toml`).
    #[serde(default)]
    pub workspace: String,
    #[serde(default)]
    pub project_root: String,
    #[serde(default)]
    pub editable: Vec<String>,
    #[serde(default)]
    pub bench: BenchSection,
    #[serde(default)]
    pub python: String,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub policy_path: String,
    #[serde(default)]
    pub policy: Policy,
    /// Absent in hand-made folders: the policy's `loop.max_iterations` then.
    #[serde(default)]
    pub max_iterations: Option<u32>,
    #[serde(default)]
    pub git_branch: Option<String>,
    #[serde(default)]
    pub environment: RunEnvironment,
}

impl RunRecord {
    pub fn path(run_dir: &Path) -> PathBuf {
        run_dir.join("run.json")
    }

    /// Reads `run.json`; refuses a folder written by a newer tuneloop.
    pub fn read(run_dir: &Path) -> Result<RunRecord, RunFolderError> {
        let path = Self::path(run_dir);
        let r: RunRecord = read_typed(&path)?;
        if r.format_version > RUN_FORMAT_VERSION {
            return Err(RunFolderError::Newer {
                path,
                found: r.format_version,
            });
        }
        Ok(r)
    }

    pub fn write(&self, run_dir: &Path) -> std::io::Result<()> {
        crate::fsio::write_json(&Self::path(run_dir), self)
    }

    /// Sets the state in the run's `run.json`, keeping the rest.
    pub fn set_state(run_dir: &Path, state: RunState) -> Result<(), RunFolderError> {
        let mut r = Self::read(run_dir)?;
        r.state = state;
        r.write(run_dir).map_err(|source| RunFolderError::Read {
            path: Self::path(run_dir),
            source,
        })
    }

    pub fn project_root(&self) -> PathBuf {
        PathBuf::from(if self.project_root.is_empty() {
            "."
        } else {
            &self.project_root
        })
    }

    pub fn max_iterations(&self) -> u32 {
        self.max_iterations
            .unwrap_or(self.policy.loop_.max_iterations)
    }
}

/// `baseline/bench.json`: the profiled run and the throughput runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct BaselineBench {
    #[serde(default)]
    pub profiled: Option<Measurement>,
    #[serde(default)]
    pub runs: Vec<Measurement>,
    /// Why the baseline has no profiler table (its profiled run failed, or
    /// gave no table; see `bench::table_unavailable`); absent when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_unavailable: Option<String>,
    /// The numerics guard's calibration run: the baseline with another
    /// thread count ([`crate::numerics::Yardstick`]); absent when the
    /// compute side is off or the runs record no losses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Measurement>,
}

impl BaselineBench {
    /// How far another thread count moves the baseline's losses, step by step.
    pub fn yardstick(&self) -> Option<crate::numerics::Yardstick> {
        crate::numerics::Yardstick::of(&self.runs, self.calibration.as_ref()?)
    }

    /// The profiled run's step by part (on CPU): what the compute side
    /// weighs a knob by ([`crate::compute::part_can_win`]).
    pub fn step_parts(&self) -> Option<crate::bench::StepParts> {
        self.profiled.as_ref()?.step_parts
    }

    pub fn path(run_dir: &Path) -> PathBuf {
        run_dir.join("baseline").join("bench.json")
    }

    pub fn read(run_dir: &Path) -> Result<BaselineBench, RunFolderError> {
        read_typed(&Self::path(run_dir))
    }

    pub fn write(&self, run_dir: &Path) -> std::io::Result<()> {
        crate::fsio::write_json(&Self::path(run_dir), self)
    }

    /// Bench runs it took: the profiled one (when recorded, or failed),
    /// unless its steps were taken in the first throughput run's process,
    /// and the throughput runs.
    pub fn run_count(&self) -> u32 {
        let profiled_apart = match &self.profiled {
            Some(p) => !p.in_first_run,
            None => self.profile_unavailable.is_some(),
        };
        u32::from(profiled_apart) + self.runs.len() as u32 + u32::from(self.calibration.is_some())
    }

    /// Which parts of the first batches the baseline's own runs (the
    /// profiled one and the throughput runs) reproduce: the data check
    /// compares only those. Read from this file, so `resume` sees the same.
    pub fn reproduced(&self) -> crate::bench::identity::Reproduced {
        crate::bench::identity::Reproduced::of(self.profiled.iter().chain(&self.runs))
    }

    /// Whether the throughput runs timed one whole epoch instead of the
    /// steps the profiled run timed (`[bench] steps`; see `bench::window`).
    pub fn widened(&self) -> Option<crate::bench::window::Widened> {
        let configured = self.profiled.as_ref()?.stretch_steps()?;
        let steps = self.runs.first()?.stretch_steps()?;
        (steps != configured).then_some(crate::bench::window::Widened { configured, steps })
    }
}

/// `turns/NN/bench.json`: candidate and incumbent measured interleaved.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TurnBench {
    #[serde(default)]
    pub candidate: Vec<Measurement>,
    #[serde(default)]
    pub incumbent: Vec<Measurement>,
    /// Pair by pair, candidate over incumbent.
    #[serde(default)]
    pub ratios: Vec<f64>,
    #[serde(default)]
    pub median: Option<f64>,
    #[serde(default)]
    pub ci: Option<[f64; 2]>,
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// The runs of pairs set aside for uneven load (not in the figures).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside_runs: Vec<Measurement>,
    /// A kept change measured again (`TurnRow::confirmation`): its runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub again: Option<Box<TurnBench>>,
}

impl TurnBench {
    /// Every run the turn measured: both sides, the pairs set aside and
    /// the second comparison's, for the time the turn spent measuring.
    pub fn all_runs(&self) -> Vec<Measurement> {
        let mut out = [
            &self.candidate[..],
            &self.incumbent[..],
            &self.set_aside_runs[..],
        ]
        .concat();
        if let Some(a) = &self.again {
            out.extend(a.all_runs());
        }
        out
    }
}

/// `final.json`: the best files against the baseline's, interleaved.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct FinalBench {
    #[serde(default)]
    pub best: Vec<Measurement>,
    #[serde(default)]
    pub baseline: Vec<Measurement>,
    #[serde(default)]
    pub ratios: Vec<f64>,
    #[serde(default)]
    pub median: Option<f64>,
    #[serde(default)]
    pub ci: Option<[f64; 2]>,
    /// Pairs measured and left out: one run saw clearly more load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<crate::bench::load::SetAside>,
    /// The interval's high end over its low end the pairs were added for
    /// (`[decision] final_spread`); absent in older folders (a fixed 3 pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_bound: Option<f64>,
    /// The runs of those pairs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside_runs: Vec<Measurement>,
}

impl FinalBench {
    pub fn path(run_dir: &Path) -> PathBuf {
        run_dir.join("final.json")
    }

    pub fn read(run_dir: &Path) -> Result<FinalBench, RunFolderError> {
        read_typed(&Self::path(run_dir))
    }

    pub fn write(&self, run_dir: &Path) -> std::io::Result<()> {
        crate::fsio::write_json(&Self::path(run_dir), self)
    }
}

/// `turns/NN/agent.json`: how the agent call went.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct AgentRecord {
    #[serde(default)]
    pub info: AgentInfo,
    #[serde(default)]
    pub failure: Option<String>,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub exhausted: bool,
}

/// One `turns/NN` folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnFolder {
    pub turn: u32,
    pub dir: PathBuf,
}

impl TurnFolder {
    /// `decision.json`, the turn's commit point; `None` for a turn that was
    /// killed before its decision (or whose decision is torn).
    pub fn decision(&self) -> Option<TurnRow> {
        read_typed(&self.decision_path()).ok()
    }

    pub fn decision_path(&self) -> PathBuf {
        self.dir.join("decision.json")
    }

    pub fn is_decided(&self) -> bool {
        self.decision_path().is_file()
    }

    pub fn write_decision(&self, row: &TurnRow) -> std::io::Result<()> {
        crate::fsio::write_json(&self.decision_path(), row)
    }

    pub fn agent(&self) -> Result<AgentRecord, RunFolderError> {
        read_typed(&self.dir.join("agent.json"))
    }

    pub fn write_agent(&self, a: &AgentRecord) -> std::io::Result<()> {
        crate::fsio::write_json(&self.dir.join("agent.json"), a)
    }

    pub fn bench(&self) -> Result<TurnBench, RunFolderError> {
        read_typed(&self.dir.join("bench.json"))
    }

    pub fn write_bench(&self, b: &TurnBench) -> std::io::Result<()> {
        crate::fsio::write_json(&self.dir.join("bench.json"), b)
    }

    /// The candidate's editable files, saved before it was measured.
    pub fn candidate_dir(&self) -> PathBuf {
        self.dir.join("candidate")
    }
}

/// The turn folders (`turns/NN`) in turn order: "100" after "99", not after
/// "10". Folders whose name is not a number are not turns and are left out.
pub fn turn_folders(run_dir: &Path) -> Vec<TurnFolder> {
    let mut v: Vec<TurnFolder> = std::fs::read_dir(run_dir.join("turns"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    Some(TurnFolder {
                        turn: e.file_name().to_str()?.parse().ok()?,
                        dir: e.path(),
                    })
                })
                .filter(|t| t.dir.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|t| t.turn);
    v
}

/// The decided turns in order, each with its `decision.json`.
pub fn decided_turns(run_dir: &Path) -> Vec<(TurnFolder, TurnRow)> {
    turn_folders(run_dir)
        .into_iter()
        .filter_map(|t| {
            let row = t.decision()?;
            Some((t, row))
        })
        .collect()
}

/// A run that stopped without finishing (killed, or interrupted and not yet
/// resumed or restored): its folder and how it stopped (`killed` for a run
/// still marked running). The project may hold its files.
pub fn unfinished_run(runs_dir: &Path) -> Option<(PathBuf, String)> {
    crate::store::list_runs(runs_dir)
        .into_iter()
        .rev()
        .find_map(|d| match RunRecord::read(&d).ok()?.state {
            RunState::Running => Some((d, "killed".to_string())),
            RunState::Interrupted => Some((d, RunState::Interrupted.to_string())),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(path: &Path, v: &serde_json::Value) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    }

    /// A run.json as the predecessor wrote it: built with `json!`, no
    /// `format_version`, the state a bare string.
    fn old_run_json(state: &str) -> serde_json::Value {
        json!({
            "run_id": "20250101-120000",
            "state": state,
            "started_at": "2025-01-01T12:00:00+00:00",
            "workspace": "/w",
            "project_root": "/w/proj",
            "editable": ["train.py"],
            "bench": { "entry": "train.py" },
            "python": "/usr/bin/python3",
            "agent": "builtin",
            "policy_path": "/w/policy.toml",
            "policy": { "agent": { "backend": "builtin", "language": "ja" }, "decision": { "confidence": 0.9 } },
            "max_iterations": 7,
            "git_branch": null,
            "environment": { "cpu_count": 4, "device": "cpu", "torch_version": "2.5.0",
                             "cuda_available": false, "world_size": 1, "os": "linux",
                             "tuneloop_version": "0.1.0" },
        })
    }

    #[test]
    fn an_old_run_folder_without_a_version_reads() {
        let d = tempfile::tempdir().unwrap();
        for (s, want) in [
            ("running", RunState::Running),
            ("interrupted", RunState::Interrupted),
            ("failed", RunState::Failed),
            ("finished", RunState::Finished),
            ("restored", RunState::Restored),
        ] {
            write(&d.path().join("run.json"), &old_run_json(s));
            let r = RunRecord::read(d.path()).unwrap();
            assert_eq!(r.state, want);
            assert_eq!(r.state.as_str(), s);
            assert_eq!(r.format_version, 0);
            assert_eq!(r.editable, vec!["train.py".to_string()]);
            assert_eq!(r.project_root(), PathBuf::from("/w/proj"));
            assert_eq!(r.policy.agent.language, "ja");
            assert_eq!(r.max_iterations(), 7);
            assert_eq!(r.environment.cpu_count, Some(4));
        }
    }

    #[test]
    fn a_written_record_keeps_the_old_keys_and_reads_back() {
        let d = tempfile::tempdir().unwrap();
        write(&d.path().join("run.json"), &old_run_json("running"));
        let mut r = RunRecord::read(d.path()).unwrap();
        r.format_version = RUN_FORMAT_VERSION;
        r.write(d.path()).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("run.json")).unwrap())
                .unwrap();
        // Every key the predecessor wrote is still there, with its value's shape.
        for (k, old) in old_run_json("running").as_object().unwrap() {
            assert!(v.get(k).is_some(), "{k} lost");
            if !old.is_object() {
                assert_eq!(&v[k], old, "{k} changed");
            }
        }
        assert_eq!(v["format_version"], RUN_FORMAT_VERSION);
        RunRecord::set_state(d.path(), RunState::Restored).unwrap();
        assert_eq!(RunRecord::read(d.path()).unwrap().state, RunState::Restored);
    }

    #[test]
    fn a_newer_or_broken_run_json_is_refused_with_what_to_do() {
        let d = tempfile::tempdir().unwrap();
        let mut v = old_run_json("finished");
        v["format_version"] = (RUN_FORMAT_VERSION + 1).into();
        write(&d.path().join("run.json"), &v);
        let e = RunRecord::read(d.path()).unwrap_err().to_string();
        assert!(e.contains("newer tuneloop"), "{e}");
        write(&d.path().join("run.json"), &json!({"state": "exploded"}));
        let e = RunRecord::read(d.path()).unwrap_err().to_string();
        assert!(e.contains("run.json") && e.contains("hint"), "{e}");
        let missing = RunRecord::read(&d.path().join("nope")).unwrap_err();
        assert!(missing.is_missing());
    }

    #[test]
    fn turn_folders_are_in_turn_order_and_only_numbers() {
        let d = tempfile::tempdir().unwrap();
        for n in ["100", "02", "10", "99", "notes", "1"] {
            std::fs::create_dir_all(d.path().join("turns").join(n)).unwrap();
        }
        let turns: Vec<u32> = turn_folders(d.path()).iter().map(|t| t.turn).collect();
        assert_eq!(turns, vec![1, 2, 10, 99, 100]);
        assert!(turn_folders(&d.path().join("none")).is_empty());
    }

    #[test]
    fn bench_files_read_in_the_old_shape() {
        let d = tempfile::tempdir().unwrap();
        let m = json!({"samples_per_sec": 800.0, "data_wait_share": 0.7, "ceiling_sps": 3000.0});
        write(
            &BaselineBench::path(d.path()),
            &json!({"profiled": m, "runs": [m, m]}),
        );
        let b = BaselineBench::read(d.path()).unwrap();
        assert_eq!(b.run_count(), 3);
        assert_eq!(b.runs[0].ceiling_sps, Some(3000.0));
        let t = d.path().join("turns/01");
        write(
            &t.join("bench.json"),
            &json!({"candidate": [m], "incumbent": [m], "ratios": [1.0], "median": 1.0, "ci": [0.9, 1.1], "verdict": "revert"}),
        );
        let tf = &turn_folders(d.path())[0];
        let tb = tf.bench().unwrap();
        assert_eq!(tb.verdict, Some(Verdict::Revert));
        assert_eq!(tb.ci, Some([0.9, 1.1]));
        assert!(tf.decision().is_none());
        assert!(tf.agent().unwrap_err().is_missing());
        write(
            &t.join("agent.json"),
            &json!({ "info": {"backend": "claude", "num_turns": 3, "cost_usd": 0.1, "exit_code": 0, "duration_ms": 1500},
                     "failure": null, "summary": "set num_workers", "exhausted": false }),
        );
        let a = tf.agent().unwrap();
        assert_eq!(
            (a.info.backend.as_str(), a.info.duration_ms),
            ("claude", 1500)
        );
        assert_eq!(a.summary, "set num_workers");
        write(
            &FinalBench::path(d.path()),
            &json!({ "best": [], "baseline": [], "ratios": [], "median": 2.45, "ci": [2.39, 2.51] }),
        );
        assert_eq!(FinalBench::read(d.path()).unwrap().median, Some(2.45));
    }

    #[test]
    fn a_profile_taken_in_the_first_runs_process_is_no_run_of_its_own() {
        let m = |sps| Measurement {
            samples_per_sec: sps,
            ..Measurement::default()
        };
        let mut profiled = m(90.0);
        profiled.in_first_run = true;
        let mut b = BaselineBench {
            profiled: Some(profiled),
            runs: vec![m(100.0), m(101.0), m(99.0)],
            ..Default::default()
        };
        assert_eq!(b.run_count(), 3);
        // Its first run set aside for a widened window: a process apart.
        b.profiled.as_mut().unwrap().in_first_run = false;
        assert_eq!(b.run_count(), 4);
        // A profile that failed: its process counted, folded or not.
        b.profiled = None;
        b.profile_unavailable = Some("the profiled run failed (crashed)".into());
        assert_eq!(b.run_count(), 4);
        // Taken, with no table (the profiler did not stop): no process apart.
        let mut p = m(90.0);
        p.in_first_run = true;
        b.profiled = Some(p);
        assert_eq!(b.run_count(), 3);
        // And it round-trips through baseline/bench.json.
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("baseline")).unwrap();
        b.write(d.path()).unwrap();
        assert_eq!(BaselineBench::read(d.path()).unwrap().run_count(), 3);
    }

    #[test]
    fn a_baseline_says_whether_its_runs_timed_a_whole_epoch() {
        let run = |steps| Measurement {
            steps: Some(steps),
            ..Measurement::default()
        };
        let mut b = BaselineBench {
            profiled: Some(run(40)),
            runs: vec![run(64), run(64)],
            ..Default::default()
        };
        // What a resumed run times again, and what the report says.
        let w = crate::bench::window::Widened {
            configured: 40,
            steps: 64,
        };
        assert_eq!(b.widened(), Some(w));
        b.runs = vec![run(40)];
        assert_eq!(b.widened(), None);
        // A baseline from before the profiled run was recorded: nothing to compare.
        b.profiled = None;
        assert_eq!(b.widened(), None);
    }
}

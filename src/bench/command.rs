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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::{ending_text, tail_n, Bencher, Measurement, Mode};
use crate::error::BenchError;
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

/// Heads of a command that mean "the Python interpreter".
fn is_python_word(w: &str) -> bool {
    w == "python"
        || w == "python3"
        || w.strip_prefix("python3.")
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
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

/// The command line of one measurement of the user's command.
pub fn spec(b: &Bencher, words: &[String], mode: Mode, mut env: BTreeMap<String, String>) -> Spec {
    let instr = b.harness_dir.display().to_string();
    let pythonpath = match std::env::var("PYTHONPATH") {
        Ok(p) if !p.is_empty() => format!("{instr}:{p}"),
        _ => instr,
    };
    env.insert("PYTHONPATH".into(), pythonpath);
    if let Some(dir) = Path::new(&b.python).parent().filter(|d| d.is_dir()) {
        // The launcher and any `python` the command itself starts come from
        // the project's environment first.
        let path = std::env::var("PATH").unwrap_or_default();
        env.insert("PATH".into(), format!("{}:{path}", dir.display()));
    }
    env.insert(
        "TUNELOOP_RESULT_DIR".into(),
        result_dir(b).display().to_string(),
    );
    env.insert("TUNELOOP_STEPS".into(), b.steps.to_string());
    env.insert("TUNELOOP_WARMUP".into(), b.warmup.to_string());
    let batches = b.command_batches.load(Ordering::Relaxed);
    if batches > 0 {
        env.insert(
            "TUNELOOP_WARMUP_MAX".into(),
            batches.saturating_sub(b.steps).max(b.warmup).to_string(),
        );
    }
    env.insert(
        "TUNELOOP_PROJECT".into(),
        b.project_root.display().to_string(),
    );
    match mode {
        Mode::Throughput => {}
        Mode::ThroughputWithCeiling => {
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
    loop {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(io_err)?;
        let spec = spec(b, &words, mode, BTreeMap::new());
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
        if let Some(m) = files.measurement()? {
            return Ok(m);
        }
        // The workers' longer warm-up went past the command's end: now that
        // its length is known, once more within it (and every later run).
        match files.batches_short_of_warmup(b) {
            Some(batches) if matches!(out.ending, Ending::Exited(0)) => {
                b.command_batches.store(batches, Ordering::Relaxed);
            }
            _ => return Err(files.explain(b, &out.ending, &tail_n(&out.stdout, &out.stderr, 30))),
        }
    }
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

    /// The training batches the command ran, when it ended short only of
    /// the warm-up the workers asked for past `[bench] warmup_steps` (it had
    /// room for the configured warm-up and steps) and a run within them has
    /// not been tried yet.
    fn batches_short_of_warmup(&self, b: &Bencher) -> Option<u32> {
        let reached = self
            .statuses
            .iter()
            .map(|s| s["reached"].as_u64().unwrap_or(0))
            .min()?;
        let wanted = self
            .statuses
            .iter()
            .filter_map(|s| s["warmup_wanted"].as_u64())
            .max()?;
        let reached = u32::try_from(reached).ok()?;
        let known = b.command_batches.load(Ordering::Relaxed);
        (wanted > u64::from(b.warmup)
            && reached >= b.warmup.max(1) + b.steps
            && (known == 0 || reached < known))
            .then_some(reached)
    }

    /// Why there is no figure, in words that say what to do.
    fn explain(&self, b: &Bencher, ending: &Ending, tail: &str) -> BenchError {
        let needed = b.warmup.max(1) + b.steps;
        let seen = self.loaders_seen();
        let command = b
            .command_words()
            .as_deref()
            .map(shell_words::join)
            .unwrap_or_default();
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
                        "`{command}` ended after {what}; a measurement needs {needed} ({} warm-up + {} steps)\n  hint: let the command run longer (e.g. more epochs or a larger --max-steps in [bench] run), or lower [bench] steps / warmup_steps\n  last output:\n{tail}",
                        b.warmup.max(1),
                        b.steps
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
    let settings = [
        "num_workers",
        "pin_memory",
        "prefetch_factor",
        "persistent_workers",
    ]
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

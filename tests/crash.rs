//! Crash safety: `kill -9` at several points of a real run, then `resume` or
//! `restore`; the project's files must end byte-identical to the expected
//! state and the run log must stay readable.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::Value;

fn spawn_start(ws: &Ws, stall: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tuneloop"))
        .arg("start")
        .current_dir(ws.path())
        .env("TUNELOOP_PYTHON", python())
        .env("TUNELOOP_WINDOW_S", "0")
        .env("TUNELOOP_TEST_STALL", stall)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn events(ws: &Ws) -> Vec<Value> {
    let runs = ws.path().join("runs");
    let Some(dir) = std::fs::read_dir(&runs).ok().and_then(|rd| {
        rd.filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.is_dir())
    }) else {
        return vec![];
    };
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits for an event matching `pred`, then SIGKILLs the run.
fn kill_when(ws: &Ws, mut child: Child, what: &str, pred: impl Fn(&Value) -> bool) {
    let t = Instant::now();
    loop {
        if events(ws).iter().any(&pred) {
            // Give the stall hook a moment to be reached.
            std::thread::sleep(Duration::from_millis(300));
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before {what}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(180),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// `before` with the one line the agent adds: the count the baseline's
/// figures predict, read back from `now` (at least the 2 cores).
fn kept_version(before: &str, now: &str) -> String {
    let workers: u32 = now
        .split_once("        num_workers=")
        .and_then(|(_, rest)| rest.split_once(",\n"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no num_workers line:\n{now}"));
    assert!(workers >= 2, "{now}");
    before.replace(
        "        shuffle=True,\n",
        &format!("        shuffle=True,\n        num_workers={workers},\n"),
    )
}

#[test]
fn kill_during_measurement_then_start_refuses_and_resume_finishes() {
    let _run = slot();
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    let before = ws.read("train.py");
    let child = spawn_start(&ws, "measure");
    kill_when(&ws, child, "the agent's edit", |e| {
        e["event"] == "agent_finished"
    });
    // The agent's edit is on disk, unmeasured.
    let edited = ws.read("train.py");
    assert_eq!(edited, kept_version(&before, &edited));
    // No python process of the killed run is left behind.
    std::thread::sleep(Duration::from_millis(500));

    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("tuneloop resume") && r.stderr.contains("restore"),
        "{}",
        r.stderr
    );

    let r = ws.tuneloop(&["resume"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let dir = r.run_dir();
    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(rep["turns"].as_array().unwrap().len(), 1, "{rep:#}");
    assert_eq!(rep["turns"][0]["decision"], "kept");
    assert_eq!(ws.read("train.py"), edited);
    let ev = events(&ws);
    assert!(ev.iter().any(|e| e["event"] == "run_resumed"));
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["state"], "finished");
}

#[test]
fn kill_during_the_agent_call_then_restore_to_baseline() {
    let _run = slot();
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    ws.write("bench_notes.txt", "untouched\n");
    let before = std::fs::read(ws.path().join("train.py")).unwrap();
    let child = spawn_start(&ws, "agent");
    kill_when(&ws, child, "the agent phase", |e| {
        e["event"] == "phase" && e["phase"] == "agent"
    });
    let r = ws.tuneloop(&["restore", "--to", "baseline"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(ws.path().join("train.py")).unwrap(), before);
    assert_eq!(ws.read("bench_notes.txt"), "untouched\n");
    // The run is closed: a new start is no longer refused for it.
    let runs = ws.tuneloop(&["runs", "--json"]);
    let v: Value = serde_json::from_str(&runs.stdout).unwrap();
    assert_eq!(v[0]["state"], "restored");
    let r = ws.tuneloop(&["resume"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn kill_while_writing_the_report_then_resume_writes_it() {
    let _run = slot();
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    let before = ws.read("train.py");
    let child = spawn_start(&ws, "report");
    kill_when(&ws, child, "the final measurement", |e| {
        e["event"] == "final_measured"
    });
    let dir = std::fs::read_dir(ws.path().join("runs"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap();
    assert!(!dir.join("report.json").exists());
    // The log is readable up to the kill.
    assert!(events(&ws).iter().any(|e| e["event"] == "turn_decided"));
    // `report` works before the resume: rebuilt from the folder, marked interrupted.
    let r = ws.tuneloop(&["report"]);
    assert!(
        r.code == 0
            && r.stdout.contains("**Interrupted**")
            && r.stdout.contains("| 1 | num_workers (default) → "),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    // resume finds every turn done: it measures the final again and writes the report.
    let r = ws.tuneloop(&["resume"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(rep["turns"][0]["decision"], "kept");
    let kept = ws.read("train.py");
    assert_eq!(kept, kept_version(&before, &kept));
    // restore --to baseline and --to best on the finished run.
    assert_eq!(ws.tuneloop(&["restore", "--to", "baseline"]).code, 0);
    assert_eq!(ws.read("train.py"), before);
    assert_eq!(ws.tuneloop(&["restore", "--to", "best"]).code, 0);
    assert_eq!(ws.read("train.py"), kept);
}

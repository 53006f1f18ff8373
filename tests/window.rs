//! The timed window by time (`[bench] window_s`), end to end: the binary
//! passes the workspace's window to the harness, whose runs then time whole
//! stretches of `[bench] steps` until the window is long enough, or end a
//! slow first stretch at twice the window (not over a whole epoch), and
//! `tuneloop bench` says so; a profiled run ends with its profiler's steps,
//! and the short-epochs rule reads the steps it was given; `start` takes
//! the profiler's steps after its first run's window, and that run decides. (Every other
//! test binary runs with `TUNELOOP_WINDOW_S=0`: `[bench] steps` only, for
//! the suite's time.)

use crate::support::{slot, Ws};
use serde_json::Value;

/// A fast step over a quick loader: 12 steps take a few tens of ms (on a
/// loaded 2-core box, half a second: the window is longer than that).
/// A batch takes about 5 ms to load (16 items of 0.3 ms), so a stretch of
/// 12 steps is about 60 ms and 1.5 s is some 25 stretches: more than one,
/// and well inside the harness's 64 (a step of microseconds would reach the
/// 64 before the 1.5 s, and the window would rightly end short).
const TRAIN_PY: &str = r#"
import time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.0003)
        return torch.full((8,), float(i % 7)), i % 2


def build():
    loader = DataLoader(Items(), batch_size=16, shuffle=True)
    model = nn.Linear(8, 2)
    return {"loader": loader, "model": model,
            "optimizer": torch.optim.SGD(model.parameters(), lr=0.1)}
"#;

fn bench_json(ws: &Ws, window_env: &str) -> Value {
    // An empty TUNELOOP_WINDOW_S is no override: the workspace's key counts.
    let r = ws.tuneloop_env(
        &["bench", "--repeats", "2", "--json"],
        &[("TUNELOOP_WINDOW_S", window_env)],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

#[test]
fn the_workspace_window_lengthens_every_run_by_whole_stretches() {
    let _run = slot();
    let ws = Ws::managed(TRAIN_PY, "window_s = 1.5", "");
    let v = bench_json(&ws, "");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for m in runs {
        let stretches = m["window_stretches"].as_u64().unwrap();
        assert!(stretches > 1, "{m}");
        // steps = 12 in Ws::managed: whole stretches of it.
        assert_eq!(m["steps"].as_u64().unwrap(), 12 * stretches, "{m}");
        assert!(m["wall_s"].as_f64().unwrap() >= 1.5, "{m}");
        assert_eq!(
            m["samples"].as_u64().unwrap(),
            16 * m["steps"].as_u64().unwrap()
        );
    }
    // The text form says how long the windows were.
    let r = ws.tuneloop_env(&["bench", "--repeats", "2"], &[("TUNELOOP_WINDOW_S", "")]);
    assert!(
        r.stdout
            .contains("lengthened by whole stretches of [bench] steps; [bench] window_s = 1.5 s"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_zero_window_times_the_configured_steps_and_the_environment_overrides() {
    let _run = slot();
    let ws = Ws::managed(TRAIN_PY, "window_s = 0", "");
    for m in bench_json(&ws, "").as_array_of_runs() {
        assert_eq!(m["steps"], 12, "{m}");
        assert_eq!(m["window_stretches"], 1, "{m}");
    }
    // TUNELOOP_WINDOW_S beats the workspace's 0.
    for m in bench_json(&ws, "1.5").as_array_of_runs() {
        assert!(m["window_stretches"].as_u64().unwrap() > 1, "{m}");
    }
}

/// A slow loader: `items` items of 4 ms in batches of 16, about 70 ms a
/// batch, so 12 steps take most of a second.
fn slow_train(items: usize) -> String {
    TRAIN_PY
        .replace("time.sleep(0.0003)", "time.sleep(0.004)")
        .replace("return 4096", &format!("return {items}"))
}

#[test]
fn a_slow_first_stretch_ends_at_twice_the_window() {
    let _run = slot();
    // window_s 0.15: a window still in its first 12 steps ends past 0.3 s.
    let ws = Ws::managed(&slow_train(4096), "window_s = 0.15", "");
    for m in bench_json(&ws, "").as_array_of_runs() {
        assert_eq!(m["window_by_time"], true, "{m}");
        let steps = m["steps"].as_u64().unwrap();
        assert!((1..12).contains(&steps), "{m}");
        assert_eq!(
            (&m["stretch_steps"], &m["window_stretches"]),
            (&12.into(), &1.into()),
            "{m}"
        );
        assert!(m["wall_s"].as_f64().unwrap() >= 0.3, "{m}");
        assert_eq!(m["samples"].as_u64().unwrap(), 16 * steps);
    }
    let r = ws.tuneloop_env(&["bench", "--repeats", "2"], &[("TUNELOOP_WINDOW_S", "")]);
    assert!(
        r.stdout
            .contains("2 of 2 ended before [bench] steps, at 2 × [bench] window_s"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_whole_epoch_window_is_never_ended_by_time() {
    let _run = slot();
    // 20 batches an epoch, 12 steps configured: every run times one whole
    // epoch (bench::window), well past 0.3 s, and none ends by time.
    let ws = Ws::managed(&slow_train(320), "window_s = 0.15", "");
    for m in bench_json(&ws, "").as_array_of_runs() {
        assert_eq!(m["steps"], 20, "{m}");
        assert_eq!(m["epoch_starts_timed"], 1, "{m}");
        assert!(m.get("window_by_time").is_none_or(|v| v == false), "{m}");
    }
}

#[test]
fn a_profiled_run_ended_with_its_profile_widens_by_the_steps_it_was_given() {
    let _run = slot();
    // 30 steps configured and 2 warm-up: the profiled run times the
    // profiler's 11 (batches 2 to 12) and ends, before any epoch restart.
    // Whether the 30 steps hold one is worked out from the epoch's length:
    // an epoch of 31 batches restarts at batch 31, inside them, and every
    // run times the 30 steps; one of 40 does not, and every run times one
    // whole epoch of 40.
    for (batches, want) in [(31, 30), (40, 40)] {
        let train = TRAIN_PY.replace("return 4096", &format!("return {}", batches * 16));
        let ws = Ws::managed(&train, "", "");
        let toml = ws.read("tuneloop.toml").replace("steps = 12", "steps = 30");
        ws.write("tuneloop.toml", &toml);
        let r = ws.tuneloop_env(
            &["bench", "--profile", "--repeats", "1", "--json"],
            &[("TUNELOOP_WINDOW_S", "0")],
        );
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        assert!(
            v["profile_table"]
                .as_str()
                .is_some_and(|t| t.contains("train_step")),
            "{v:#}"
        );
        for m in v.as_array_of_runs() {
            assert_eq!(m["steps"], want, "an epoch of {batches}: {m}");
        }
    }
}

#[test]
fn starts_profile_follows_its_first_window_and_that_run_decides_the_widening() {
    let _run = slot();
    // `start`'s baseline in managed mode: no profiled run of its own. The
    // first throughput run times its 30 steps with the profiler off, then
    // takes the profiler's steps in its process. An epoch of 31 batches
    // restarts inside its window: it is the first of the baseline's two
    // runs, and the bench runs are those two. One of 40 does not: the run
    // is set aside, two runs time a whole epoch of 40, and the profile
    // stands as a process apart (3 bench runs).
    let policy = crate::support::FAST_POLICY
        .replace("max_iterations = 1", "max_iterations = 0")
        .replace("baseline_runs = 1", "baseline_runs = 2");
    for (batches, steps, in_first_run, bench_runs) in [(31, 30, true, 2), (40, 40, false, 3)] {
        let train = TRAIN_PY.replace("return 4096", &format!("return {}", batches * 16));
        let ws = Ws::managed(&train, "", &policy);
        let toml = ws.read("tuneloop.toml").replace("steps = 12", "steps = 30");
        ws.write("tuneloop.toml", &toml);
        let r = ws.tuneloop_env(&["start"], &[("TUNELOOP_WINDOW_S", "0")]);
        assert_eq!(
            r.code, 0,
            "{}
{}",
            r.stdout, r.stderr
        );
        assert!(
            r.stderr
                .contains("throughput run 1 of 2, then the profiler's steps"),
            "{}",
            r.stderr
        );
        assert!(!r.stderr.contains("profiled run"), "{}", r.stderr);
        let dir = r.run_dir();
        let base: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("baseline/bench.json")).unwrap(),
        )
        .unwrap();
        let p = &base["profiled"];
        assert_eq!(
            p["in_first_run"].as_bool().unwrap_or(false),
            in_first_run,
            "{p}"
        );
        assert_eq!(p["steps"], 10, "{p}");
        assert!(p["step_parts"]["optimizer"].is_number(), "{p}");
        let runs = base.as_array_of_runs();
        assert_eq!(runs.len(), 2);
        for m in &runs {
            assert_eq!(m["steps"], steps, "an epoch of {batches}: {m}");
        }
        // The run that took them carries the profiler's steps; where it was
        // set aside no run of the baseline does.
        assert_eq!(
            !runs[0]["profile_after"].is_null(),
            in_first_run,
            "{}",
            runs[0]
        );
        assert!(runs[1]["profile_after"].is_null());
        let table = std::fs::read_to_string(dir.join("baseline/profile.txt")).unwrap();
        assert!(table.contains("train_step"), "{table}");
        let rep: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
                .unwrap();
        assert_eq!(rep["bench_runs"], bench_runs, "{rep:#}");
        // A report rebuilt from the folder counts the same processes.
        std::fs::remove_file(dir.join("report.json")).unwrap();
        let again: Value =
            serde_json::from_str(&ws.tuneloop(&["report", "--format", "json"]).stdout).unwrap();
        assert_eq!(again["bench_runs"], bench_runs);
    }
}

trait Runs {
    fn as_array_of_runs(&self) -> Vec<Value>;
}

impl Runs for Value {
    fn as_array_of_runs(&self) -> Vec<Value> {
        self["runs"].as_array().unwrap().clone()
    }
}

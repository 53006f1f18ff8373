//! Short commands end to end: a Lightning script and a Hugging Face
//! `Trainer` script run as `python train.py --epochs 1`, so short that the
//! workers' warm-up and the timed steps barely fit (or do not) in the
//! batches the command has. Real PyTorch, Lightning and transformers, the
//! real binary, the builtin agent: every candidate is measured within the
//! command's batches or the agent goes on with the most workers that fit;
//! no run stops at a candidate that did not fit, and the stop reason names
//! the flag that gives longer runs.

use std::path::Path;

use crate::support::*;
use serde_json::Value;

/// A workspace holding `tests/fixtures/<name>/train.py`, initialised with
/// `init -- command…`, 12 timed steps after 2 of warm-up, one turn decided
/// on 2 pairs.
fn short_ws(fixture: &str, command: &[&str]) -> Ws {
    let ws = Ws::fixture(fixture);
    ws.init_command(
        command,
        12,
        &FAST_POLICY.replace("max_repeats = 4", "max_repeats = 2"),
    );
    ws
}

/// `start --agent builtin`: its run folder, report and stdout.
fn start(ws: &Ws) -> (std::path::PathBuf, Value, String) {
    let (r, dir, rep) = ws.start_builtin();
    (dir, rep, r.stdout)
}

/// No turn failed for want of batches, and the run did not stop there.
fn no_turn_failed_for_too_few_steps(rep: &Value, out: &str) {
    for t in rep["turns"].as_array().unwrap() {
        assert!(
            !t["reason"].as_str().unwrap_or("").contains("too_few_steps"),
            "a candidate did not fit: {t:#}\n{out}"
        );
        assert_ne!(t["decision"], "failed", "{t:#}\n{out}");
    }
}

/// The candidate's runs of turn 1: (warm-up, timed steps, workers, the
/// command's batches as learned).
fn candidate_runs(dir: &Path) -> Vec<(u64, u64, u64, u64)> {
    let bench = json_file(&dir.join("turns/01/bench.json"));
    bench["candidate"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["warmup_steps"].as_u64().unwrap(),
                m["steps"].as_u64().unwrap(),
                m["loader"]["num_workers"].as_u64().unwrap(),
                m["command_batches"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn a_lightning_epoch_that_ends_at_the_timed_steps_is_measured_within_it() {
    // 320 records of 16: one epoch of 20 batches. Two workers want 8 of
    // warm-up; 8 + 12 timed steps end exactly at the last batch, and a
    // Lightning Trainer that knows its length never asks past it: the
    // timed window never closed ("too_few_steps" on main). 7 fit.
    let _one = serial();
    let ws = short_ws(
        "short_lightning",
        &[
            "python",
            "train.py",
            "--epochs",
            "1",
            "--train-records",
            "320",
        ],
    );
    let (dir, rep, out) = start(&ws);
    no_turn_failed_for_too_few_steps(&rep, &out);
    let t1 = &rep["turns"][0];
    // The core count, or the count the baseline's figures predict within
    // the command's batches (3 workers' first rounds fit its 7 of warm-up).
    let n: u64 = t1["change"]
        .as_str()
        .and_then(|c| c.strip_prefix("num_workers 0 → "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{t1:#}\n{out}"));
    assert!((2..=3).contains(&n), "{t1:#}\n{out}");
    assert!(
        ["kept", "reverted"].contains(&t1["decision"].as_str().unwrap()),
        "measured and decided: {t1:#}\n{out}"
    );
    for run in candidate_runs(&dir) {
        assert_eq!(
            run,
            (7, 12, n, 20),
            "within the command's 20 batches\n{out}"
        );
    }
    let stop = rep["stop_reason"].as_str().unwrap();
    assert!(
        stop.contains(
            "the command ran 20 training batches; `--epochs 2` (or more) in [bench] run would let larger worker counts be measured"
        ),
        "{stop}"
    );
    assert!(out.contains(stop), "the summary says it too:\n{out}");
}

#[test]
fn a_trainer_command_too_short_for_the_core_count_gets_the_workers_that_fit() {
    // 256 tickets of 16: 16 batches. After 12 timed steps and the request
    // that closes them, 3 batches of warm-up are left: one worker's first
    // round (2) fits, the core count's (4) does not. The length is learned
    // at the baseline, so the climb starts at one worker instead of failing
    // at two and stopping "candidates exhausted".
    let _one = serial();
    let ws = short_ws(
        "short_hf",
        &["python", "train.py", "--epochs", "1", "--train-size", "256"],
    );
    let (dir, rep, out) = start(&ws);
    no_turn_failed_for_too_few_steps(&rep, &out);
    let t1 = &rep["turns"][0];
    assert!(
        t1["change"]
            .as_str()
            .unwrap()
            .starts_with("num_workers 0 → 1 "),
        "the most workers that fit: {t1:#}\n{out}"
    );
    let agent = json_file(&dir.join("turns/01/agent.json"));
    assert!(
        agent["summary"]
            .as_str()
            .unwrap()
            .contains("the command runs 16 training batches, so no more than 1 worker(s) fit"),
        "{agent:#}"
    );
    for run in candidate_runs(&dir) {
        assert_eq!(run, (3, 12, 1, 16), "{out}");
    }
    let diff = std::fs::read_to_string(dir.join("turns/01/diff.patch")).unwrap();
    assert!(
        diff.contains("+        dataloader_num_workers=1,"),
        "{diff}"
    );
    let stop = rep["stop_reason"].as_str().unwrap();
    assert!(
        stop.contains(
            "the command ran 16 training batches; `--epochs 2` (or more) in [bench] run would let larger worker counts be measured"
        ),
        "{stop}"
    );
}

#[test]
fn a_command_shorter_than_the_configured_steps_is_measured_within_it() {
    // 480 records of 16: 30 batches, fewer than 2 warm-up + 40 steps. The
    // profiled run meets the command's end, and every run then times the
    // steps its batches leave (30 less the warm-up of 2 workers, 4, and
    // the closing request: 25) instead of the baseline failing.
    let _one = serial();
    let ws = Ws::fixture("short_lightning");
    ws.init_command(
        &[
            "python",
            "train.py",
            "--epochs",
            "1",
            "--train-records",
            "480",
        ],
        40,
        &FAST_POLICY.replace("max_repeats = 4", "max_repeats = 2"),
    );
    let (dir, rep, out) = start(&ws);
    let base = json_file(&dir.join("baseline/bench.json"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let want = 30 - (2 * cores).max(2) - 1;
    for m in base["runs"].as_array().unwrap() {
        assert_eq!(m["steps"].as_u64(), Some(want), "{base:#}\n{out}");
    }
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(
        events.contains(&format!("every run times {want} steps")),
        "the run log says why:\n{events}"
    );
    no_turn_failed_for_too_few_steps(&rep, &out);
    let stop = rep["stop_reason"].as_str().unwrap();
    assert!(
        stop.contains("the command ran 30 training batches; `--epochs 2` (or more) in [bench] run"),
        "{stop}"
    );
}

#[test]
fn tuneloop_bench_on_a_command_shorter_than_the_configured_steps_measures_within_it() {
    // The same 30-batch command as above, `tuneloop bench` alone: its first
    // run meets the command's end, and it measures the steps the batches
    // leave, by the rule `start` follows, instead of failing too_few_steps.
    let _one = serial();
    let ws = Ws::fixture("short_lightning");
    ws.init_command(
        &[
            "python",
            "train.py",
            "--epochs",
            "1",
            "--train-records",
            "480",
        ],
        40,
        FAST_POLICY,
    );
    let r = ws.tuneloop(&["bench", "--repeats", "1"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let want = 30 - (2 * cores).max(2) - 1;
    assert!(
        r.stderr.contains(&format!(
            "the command runs 30 training batches, fewer than warm-up + 40 steps: every run times {want} steps"
        )),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.contains(&format!(
            "measured {want} steps a run, not the 40 of [bench] steps: the command ran 30 training batches; `--epochs 2` (or more) in [bench] run"
        )),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("samples/sec: "), "{}", r.stdout);
    // The JSON form carries the same figures.
    let r = ws.tuneloop(&["bench", "--repeats", "1", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["timed_steps"].as_u64(), Some(want), "{v:#}");
    assert_eq!(v["fitted_to_command"]["batches"], 30, "{v:#}");
    assert_eq!(v["runs"][0]["steps"].as_u64(), Some(want), "{v:#}");
}

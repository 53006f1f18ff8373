//! A two-optimizer GAN loop (tests/fixtures/gan: module-level code, three
//! backward passes a batch, `num_workers=int(opt.workers)`) through the
//! profiled run, end to end with real PyTorch: the profiler's table comes
//! out, `start` gets past its baseline, a command that ends inside the
//! profiled steps no longer dies by SIGSEGV at exit, and a profiled run that
//! does crash leaves the baseline measured and the report saying why there
//! is no table.

use std::path::Path;

use crate::support::*;
use serde_json::Value;

const GAN: &str = include_str!("fixtures/gan/train.py");

/// A workspace holding `train_py`, after `init -- python train.py <args>`,
/// with small step counts and a fast policy: one turn of at most 2 pairs
/// (these tests check that the loop got past its baseline into the turn,
/// not the turn's decision; a turn undecided at the cap is reverted, and
/// nothing kept means no final measurement).
fn gan_ws(train_py: &str, args: &[&str]) -> Ws {
    let ws = Ws::new();
    ws.write("train.py", train_py);
    let mut cmd = vec!["python", "train.py"];
    cmd.extend_from_slice(args);
    // `force`: the loop goes on into its turn whatever share of the step
    // data_wait is on a loaded box (the turn is what these tests reach for).
    ws.init_command(
        &cmd,
        12,
        &FAST_POLICY
            .replace("max_iterations = 1\n", "max_iterations = 1\nforce = true\n")
            .replace("max_repeats = 4", "max_repeats = 2"),
    );
    ws
}

/// The GAN, killed by SIGSEGV at its first batch whenever torch's profiler
/// is on: only the profiled run dies, as a profiler crash would.
fn crashing_under_the_profiler() -> String {
    let loop_head = "    for i, data in enumerate(dataloader, 0):\n";
    assert!(GAN.contains(loop_head));
    GAN.replace("import random\n", "import random\nimport signal\n")
        .replace(
            loop_head,
            &format!(
                "{loop_head}        if torch.autograd.profiler._is_profiler_enabled:\n            os.kill(os.getpid(), signal.SIGSEGV)\n"
            ),
        )
}

#[test]
fn the_gan_loops_profiled_run_gives_its_table() {
    let _one = serial();
    let ws = gan_ws(GAN, &["--workers", "0", "--niter", "2"]);
    let r = ws.tuneloop(&["bench", "--profile", "--repeats", "1", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let table = v["profile_table"]
        .as_str()
        .unwrap_or_else(|| panic!("{v:#}"));
    // The profiled steps ran the GAN's ops under the profiler: its own
    // range for the steps and the backward passes' convolutions.
    assert!(table.contains("train_step"), "{table}");
    assert!(table.contains("aten::"), "{table}");
    assert!(table.contains("Self CPU time total"), "{table}");
    assert!(v["profile_unavailable"].is_null(), "{v:#}");
    assert!(v["samples_per_sec"].as_f64().unwrap() > 0.0, "{v:#}");
}

#[test]
fn start_on_the_gan_loop_gets_past_its_baseline_with_the_table() {
    let _one = serial();
    let ws = gan_ws(GAN, &["--workers", "0", "--niter", "2"]);
    let r = ws.tuneloop(&["start", "--agent", "builtin", "--iterations", "1"]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let dir = r.run_dir();
    let bench = json_file(&dir.join("baseline/bench.json"));
    assert!(bench["profiled"].is_object(), "{bench:#}");
    assert!(!bench["runs"].as_array().unwrap().is_empty(), "{bench:#}");
    let table = std::fs::read_to_string(dir.join("baseline/profile.txt")).unwrap();
    assert!(table.contains("train_step"), "{table}");
    let rep = json_file(&dir.join("report.json"));
    assert!(rep["baseline_sps"].as_f64().unwrap() > 0.0, "{rep:#}");
    assert!(rep.get("profile_unavailable").is_none(), "{rep:#}");
    past_the_baseline(&dir);
}

/// The loop went on past its baseline: it was measured and the agent's
/// turn began (whatever the agent then found to change).
fn past_the_baseline(dir: &Path) {
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let kinds: Vec<String> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["event"].as_str().map(str::to_string))
        .collect();
    let measured = kinds.iter().position(|k| k == "baseline_measured");
    let turn = kinds.iter().position(|k| k == "turn_started");
    assert!(
        matches!((measured, turn), (Some(m), Some(t)) if m < t),
        "{events}"
    );
}

#[test]
fn a_command_ending_inside_the_profiled_steps_says_so_instead_of_segfaulting() {
    let _one = serial();
    // 160 images of 16: 10 batches, fewer than the 2 warm-up + 12 steps, and
    // the profiler (10 steps from batch 2) still on when the script ends. A
    // profiler left running at exit died by SIGSEGV in torch's teardown.
    let ws = gan_ws(GAN, &["--workers", "0", "--niter", "1", "--nimages", "160"]);
    let r = ws.tuneloop(&["bench", "--profile", "--repeats", "1"]);
    // The command cannot be measured at all: exit 3 at the profiled run,
    // with the command's own reason, not a signal.
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stderr.contains("signal 11"), "{}", r.stderr);
    assert!(
        r.stderr.contains("ended after 10 training batches"),
        "{}",
        r.stderr
    );
    // The instrumentation stopped the profiler as the script ended.
    assert!(
        r.stderr
            .contains("profiler table unavailable: the command ended inside the profiled steps"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("throughput run"), "{}", r.stderr);
}

#[test]
fn a_profiled_run_that_crashes_leaves_the_baseline_measured_without_the_table() {
    let _one = serial();
    let ws = gan_ws(
        &crashing_under_the_profiler(),
        &["--workers", "0", "--niter", "2"],
    );
    // bench: the reason, then the throughput figures, exit 0.
    let r = ws.tuneloop(&["bench", "--profile", "--repeats", "1"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("profiler table unavailable: the profiled run failed (the bench exited with status signal 11"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("samples/sec:"), "{}", r.stdout);

    // start: the baseline is measured, the run log and every report say why
    // there is no table, and the turn runs.
    let r = ws.tuneloop(&["start", "--agent", "builtin", "--iterations", "1"]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("profiler table unavailable"),
        "{}",
        r.stdout
    );
    let dir = r.run_dir();
    let bench = json_file(&dir.join("baseline/bench.json"));
    assert!(bench["profiled"].is_null(), "{bench:#}");
    assert!(!bench["runs"].as_array().unwrap().is_empty(), "{bench:#}");
    let reason = bench["profile_unavailable"].as_str().unwrap_or_default();
    assert!(reason.contains("signal 11"), "{bench:#}");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(
        events
            .lines()
            .any(|l| l.contains("\"profile_unavailable\"") && l.contains("signal 11")),
        "{events}"
    );
    let rep = json_file(&dir.join("report.json"));
    assert_eq!(rep["profile_unavailable"].as_str(), Some(reason), "{rep:#}");
    assert!(rep["baseline_sps"].as_f64().unwrap() > 0.0, "{rep:#}");
    past_the_baseline(&dir);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains(&format!("profiler table unavailable: {reason}")),
        "{md}"
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("profiler table unavailable: "), "{html}");
}

//! Command mode, measured: what the instrumentation costs a training
//! command, and what tuneloop does to each bundled example as a user runs it.
//!
//! 1. Overhead: the same script run with and without tuneloop's
//!    instrumentation on its path (set never to end the process), each run
//!    timing itself; interleaved pairs, ratio instrumented / plain.
//! 2. Examples: for each of `examples/{own_script,hf_trainer,lightning,
//!    torchrun_ddp}` on a fresh copy, `tuneloop init -- <its command>` then
//!    `tuneloop start --agent builtin`; then the user's own command, run as
//!    before, timed end to end with the baseline files and with the tuned
//!    ones, interleaved: how much faster the user's own run got.
//!
//! Writes `bench/command.json` and the "Command mode" section of
//! `bench/RESULTS.md`. Sizes: `TL_OVERHEAD_PAIRS` (8), `TL_USER_PAIRS` (3),
//! `TL_COMMAND_ONLY` (comma-separated example names).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Value};

const HARNESS: &str = include_str!("../src/bench/harness.py");
const SITECUSTOMIZE: &str = include_str!("../src/bench/instrument/sitecustomize.py");
const INSTRUMENT: &str = include_str!("../src/bench/instrument/tuneloop_instrument.py");

/// The worst case for the instrumentation: batches already in memory and a
/// step of a few hundred microseconds, so its per-batch cost shows.
const TINY_STEP: &str = r#"import sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.set_num_threads(1)
N, SKIP = 3000, 200
ds = TensorDataset(torch.randn(N * 8, 4), torch.zeros(N * 8, dtype=torch.long))
loader = DataLoader(ds, batch_size=8)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    if i == SKIP:
        t = time.perf_counter()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print(f"own samples/sec: {(N - SKIP) * 8 / (time.perf_counter() - t):.1f}")
"#;

fn python() -> String {
    std::env::var("TUNELOOP_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/tuneloop/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The last figure a script printed next to `label`: after it
/// (`own samples/sec: 812.3`) or before it (`… 812 samples/sec`).
fn figure(out: &str, label: &str) -> Option<f64> {
    out.lines().rev().find_map(|l| {
        let at = l.find(label)?;
        let after = l[at + label.len()..].split_whitespace().next();
        let before = l[..at].split_whitespace().last();
        // transformers 5 prints its metrics quoted: `'train_samples_per_second': '121.6',`
        let number = |w: &str| {
            w.trim_end_matches([',', '}'])
                .trim_matches('\'')
                .parse()
                .ok()
        };
        after.and_then(number).or_else(|| before.and_then(number))
    })
}

fn run_self_timed(dir: &Path, args: &[&str], instr: Option<&Path>, prefix: &str) -> f64 {
    let mut c = Command::new(python());
    c.args(args).current_dir(dir);
    if let Some(i) = instr {
        c.env("PYTHONPATH", i)
            .env("TUNELOOP_RESULT_DIR", i.join("out"))
            .env("TUNELOOP_STEPS", "1000000000")
            .env("TUNELOOP_PROJECT", dir);
    }
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    figure(&text, prefix).unwrap_or_else(|| panic!("no `{prefix}` in {text}"))
}

/// Interleaved pairs (plain, instrumented, instrumented, plain, …): the
/// median ratio instrumented / plain and its range.
fn overhead(name: &str, dir: &Path, args: &[&str], prefix: &str, pairs: usize) -> Value {
    let instr = dir.join(".instr");
    std::fs::create_dir_all(instr.join("out")).unwrap();
    std::fs::write(instr.join("tuneloop_harness.py"), HARNESS).unwrap();
    std::fs::write(instr.join("sitecustomize.py"), SITECUSTOMIZE).unwrap();
    std::fs::write(instr.join("tuneloop_instrument.py"), INSTRUMENT).unwrap();
    let (mut plain, mut with, mut ratios) = (vec![], vec![], vec![]);
    for p in 0..pairs {
        let order = if p % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut pair = [0.0; 2];
        for on in order {
            let v = run_self_timed(dir, args, on.then_some(instr.as_path()), prefix);
            pair[on as usize] = v;
        }
        plain.push(pair[0]);
        with.push(pair[1]);
        ratios.push(pair[1] / pair[0]);
        eprintln!(
            "overhead {name}: pair {}: plain {:.1}, instrumented {:.1}",
            p + 1,
            pair[0],
            pair[1]
        );
    }
    let mut r = ratios.clone();
    let lo = r.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    json!({
        "workload": name,
        "pairs": pairs,
        "plain_sps_median": median(&mut plain.clone()),
        "instrumented_sps_median": median(&mut with.clone()),
        "ratio_median": median(&mut r),
        "ratio_min": lo,
        "ratio_max": hi,
        "ratios": ratios,
    })
}

fn copy_example(repo: &Path, name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(repo.join("examples").join(name)).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
    }
    (tmp, dir)
}

fn tuneloop(bin: &Path, dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .env("TUNELOOP_PYTHON", python())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Wall seconds of the user's own command, as they run it (no tuneloop),
/// and what it printed.
fn user_run(dir: &Path, command: &[String]) -> (f64, String) {
    let py = python();
    let bin = Path::new(&py).parent().unwrap().to_path_buf();
    let head = match command[0].as_str() {
        "python" => py.clone(),
        other => bin.join(other).display().to_string(),
    };
    let t = Instant::now();
    let out = Command::new(head)
        .args(&command[1..])
        .current_dir(dir)
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let wall = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The median of every figure the script printed next to `label`.
fn own_throughput(out: &str, label: &str) -> Option<f64> {
    let mut v: Vec<f64> = out.lines().filter_map(|l| figure(l, label)).collect();
    (!v.is_empty()).then(|| median(&mut v))
}

struct Example {
    name: &'static str,
    /// What `init` is given.
    command: &'static [&'static str],
    /// The user's own run, timed before and after.
    user: &'static [&'static str],
    /// The label of the throughput the script reports itself, if it does.
    own_figure: Option<&'static str>,
}

const EXAMPLES: [Example; 4] = [
    Example {
        name: "own_script",
        command: &["python", "train.py", "--epochs", "3"],
        user: &["python", "train.py", "--epochs", "3"],
        own_figure: Some("samples/sec"),
    },
    Example {
        name: "hf_trainer",
        command: &["python", "train.py"],
        user: &["python", "train.py", "--epochs", "2"],
        own_figure: Some("'train_samples_per_second':"),
    },
    Example {
        name: "lightning",
        command: &["python", "train.py"],
        user: &["python", "train.py"],
        own_figure: None,
    },
    Example {
        name: "torchrun_ddp",
        command: &[
            "torchrun",
            "--standalone",
            "--nproc_per_node",
            "2",
            "train.py",
        ],
        user: &[
            "torchrun",
            "--standalone",
            "--nproc_per_node",
            "2",
            "train.py",
            "--epochs",
            "3",
        ],
        own_figure: None,
    },
];

fn example(repo: &Path, bin: &Path, ex: &Example, user_pairs: usize) -> Value {
    let (_tmp, dir) = copy_example(repo, ex.name);
    let mut init = vec!["init", "--"];
    init.extend_from_slice(ex.command);
    let (code, _, err) = tuneloop(bin, &dir, &init);
    assert_eq!(code, 0, "{err}");
    let t = Instant::now();
    let (code, out, err) = tuneloop(bin, &dir, &["start", "--agent", "builtin"]);
    let wall = t.elapsed().as_secs_f64();
    assert_eq!(code, 0, "{out}\n{err}");
    let run_dir = PathBuf::from(out.lines().next().unwrap().strip_prefix("run: ").unwrap());
    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("report.json")).unwrap())
            .unwrap();
    let kept: Vec<String> = rep["turns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["decision"] == "kept")
        .map(|t| t["change"].as_str().unwrap_or("").to_string())
        .collect();
    // The user's own command, before and after, interleaved.
    let tuned = std::fs::read(dir.join("train.py")).unwrap();
    let base = std::fs::read(run_dir.join("baseline/files/train.py")).unwrap();
    let user: Vec<String> = ex.user.iter().map(|s| s.to_string()).collect();
    let (mut before, mut after, mut ratios, mut own_ratios) = (vec![], vec![], vec![], vec![]);
    for p in 0..user_pairs {
        let order = if p % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut pair = [0.0; 2];
        let mut own = [None; 2];
        for tuned_side in order {
            let text = if tuned_side { &tuned } else { &base };
            std::fs::write(dir.join("train.py"), text).unwrap();
            let (wall, out) = user_run(&dir, &user);
            pair[tuned_side as usize] = wall;
            own[tuned_side as usize] = ex.own_figure.and_then(|l| own_throughput(&out, l));
        }
        before.push(pair[0]);
        after.push(pair[1]);
        ratios.push(pair[0] / pair[1]);
        if let [Some(b), Some(a)] = own {
            own_ratios.push(a / b);
        }
        eprintln!(
            "{}: user run pair {}: before {:.1} s, after {:.1} s",
            ex.name,
            p + 1,
            pair[0],
            pair[1]
        );
    }
    std::fs::write(dir.join("train.py"), &tuned).unwrap();
    json!({
        "example": ex.name,
        "command": ex.command,
        "baseline_sps": rep["baseline_sps"],
        "final_sps": rep["final_sps"],
        "speedup": rep["speedup"],
        "speedup_ci": rep["speedup_ci"],
        "ceiling_sps": rep["ceiling_sps"],
        "measured_loader": rep["measured_loader"],
        "kept": kept,
        "bench_runs": rep["bench_runs"],
        "tuneloop_wall_s": wall,
        "stop_reason": rep["stop_reason"],
        "user_command": ex.user,
        "user_wall_before_s": median(&mut before),
        "user_wall_after_s": median(&mut after),
        "user_speedup_median": median(&mut ratios.clone()),
        "user_speedups": ratios,
        "own_figure": ex.own_figure,
        "own_figure_speedup_median": (!own_ratios.is_empty()).then(|| median(&mut own_ratios.clone())),
        "own_figure_speedups": own_ratios,
    })
}

fn main() {
    if common::skip_unless_benchmarking("command") {
        return;
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_tuneloop"));
    let pairs = common::env_u("TL_OVERHEAD_PAIRS", 8);
    let user_pairs = common::env_u("TL_USER_PAIRS", 3);
    let only: Option<Vec<String>> = std::env::var("TL_COMMAND_ONLY")
        .ok()
        .map(|s| s.split(',').map(|w| w.trim().to_string()).collect());

    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tiny.py"), TINY_STEP).unwrap();
    let mut over = vec![overhead(
        "tiny in-memory step (worst case)",
        tmp.path(),
        &["tiny.py"],
        "own samples/sec:",
        pairs,
    )];
    let (_own_tmp, own) = copy_example(&repo, "own_script");
    over.push(overhead(
        "examples/own_script, 1 epoch, 2 workers",
        &own,
        &["train.py", "--epochs", "1", "--workers", "2"],
        "samples/sec",
        pairs,
    ));

    let mut examples = vec![];
    // Written after each part, so a long run cut short keeps what it measured.
    write_results(&repo, &over, &examples);
    for ex in EXAMPLES.iter() {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == ex.name))
        {
            continue;
        }
        examples.push(example(&repo, &bin, ex, user_pairs));
        write_results(&repo, &over, &examples);
    }
}

fn write_results(repo: &Path, over: &[Value], examples: &[Value]) {
    let result = json!({"machine": common::machine(), "overhead": over, "examples": examples});
    std::fs::write(
        repo.join("bench/command.json"),
        serde_json::to_string_pretty(&result).unwrap() + "\n",
    )
    .unwrap();

    let mut body = format!(
        "Machine: {}. `make bench-command` (`benches/command.rs`), figures in `bench/command.json`.\n\n",
        common::machine()
    );
    body.push_str("### What the instrumentation costs\n\nThe same script, run plain and with tuneloop's instrumentation on its path (never ending it), timing itself; interleaved pairs, ratio instrumented / plain (1.00 = no cost).\n\n| workload | pairs | plain (samples/sec, median) | instrumented | ratio (median) | range |\n|---|---:|---:|---:|---:|---|\n");
    for o in over {
        body.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.3} | [{:.3}, {:.3}] |\n",
            o["workload"].as_str().unwrap(),
            o["pairs"],
            o["plain_sps_median"].as_f64().unwrap(),
            o["instrumented_sps_median"].as_f64().unwrap(),
            o["ratio_median"].as_f64().unwrap(),
            o["ratio_min"].as_f64().unwrap(),
            o["ratio_max"].as_f64().unwrap()
        ));
    }
    body.push_str("\n### The bundled examples, tuned as a user would\n\n`tuneloop init -- <command>` then `tuneloop start --agent builtin` (default policy) on a fresh copy; then the user's own command, run exactly as before, timed end to end with the baseline files and with the tuned ones (interleaved pairs; speed-up = wall before / wall after, median).\n\n| example | baseline → final (samples/sec) | speed-up (interval) | kept | runs / wall | user's command | its wall before → after | its speed-up | its own throughput figure, after / before |\n|---|---|---|---|---:|---|---|---:|---:|\n");
    for e in examples {
        let ci = e["speedup_ci"]
            .as_array()
            .map(|c| {
                format!(
                    " [{:.2}, {:.2}]",
                    c[0].as_f64().unwrap(),
                    c[1].as_f64().unwrap()
                )
            })
            .unwrap_or_default();
        body.push_str(&format!(
            "| {} | {:.0} → {:.0} | ×{:.2}{} | {} | {} / {:.0} s | `{}` | {:.1} s → {:.1} s | ×{:.2} | {} |\n",
            e["example"].as_str().unwrap(),
            e["baseline_sps"].as_f64().unwrap_or(f64::NAN),
            e["final_sps"].as_f64().unwrap_or(f64::NAN),
            e["speedup"].as_f64().unwrap_or(f64::NAN),
            ci,
            e["kept"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect::<Vec<_>>().join("; "),
            e["bench_runs"],
            e["tuneloop_wall_s"].as_f64().unwrap(),
            e["user_command"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect::<Vec<_>>().join(" "),
            e["user_wall_before_s"].as_f64().unwrap(),
            e["user_wall_after_s"].as_f64().unwrap(),
            e["user_speedup_median"].as_f64().unwrap(),
            e["own_figure_speedup_median"]
                .as_f64()
                .map(|r| format!("×{r:.2}"))
                .unwrap_or_else(|| "(prints none)".into()),
        ));
    }
    common::write_section(&repo.join("bench/RESULTS.md"), "Command mode", &body);
    println!("{body}");
}

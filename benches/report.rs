//! Report speed: `tuneloop report` (and `runs`, `show`) on a run of 1,000
//! turns, timed end to end through the real release binary — process start,
//! reading the run folder, rendering, writing stdout.
//!
//! `make bench-report` (or `cargo bench --bench report`) builds the run folder
//! in a temporary directory, runs each command several times, and writes the
//! medians to the "Report speed" section of bench/RESULTS.md. The machine is
//! described from /proc/cpuinfo; set BENCH_MACHINE to say more (e.g. that
//! the box is shared).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use tuneloop::report::{AgentInfo, Decision, RunReport, TurnRow, SCHEMA_VERSION};

const TURNS: u32 = 1_000;
const REPEATS: usize = 9;

const TRAIN: &str = "from torch.utils.data import DataLoader\n\n\ndef build():\n    loader = DataLoader(\n        ds,\n        batch_size=64,\n    )\n    return {\"loader\": loader}\n";

fn row(turn: u32) -> TurnRow {
    // A deterministic mix of every decision, samples around a slow climb.
    let decision = match turn % 10 {
        0 | 3 => Decision::Kept,
        1 | 4 | 6 | 8 => Decision::Reverted,
        2 => Decision::Rejected,
        5 => Decision::Failed,
        _ => Decision::NoChange,
    };
    let base = 400.0 + turn as f64 * 3.0;
    let jitter = |k: u32| ((turn * 7 + k * 13) % 17) as f64 - 8.0;
    let measured = matches!(decision, Decision::Kept | Decision::Reverted);
    let n = 2 + turn % 5;
    let cand: Vec<f64> = if measured {
        (0..n).map(|k| base * 1.02 + jitter(k)).collect()
    } else {
        vec![]
    };
    let inc: Vec<f64> = if measured {
        (0..n).map(|k| base + jitter(k + 1)).collect()
    } else {
        vec![]
    };
    TurnRow {
        turn,
        change: format!("num_workers {} → {}", turn % 16, turn % 16 + 1),
        file: Some("train.py".into()),
        before_sps: measured.then_some(base),
        after_sps: measured.then_some(base * 1.02),
        ratio: measured.then_some(1.02),
        ratio_ci: measured.then_some([1.005, 1.035]),
        runs: 2 * n,
        decision,
        reason: format!("{}: ratio 1.020, 99% CI [1.005, 1.035]", decision.as_str()),
        agent: AgentInfo {
            backend: "claude".into(),
            num_turns: Some(4),
            cost_usd: Some(0.05),
            exit_code: Some(0),
            duration_ms: 20_000,
        },
        candidate_samples: cand,
        incumbent_samples: inc,
        data_wait_share: Some(0.5),
        confirmation: None,
    }
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A finished run of `TURNS` turns, as the loop leaves it.
fn build_run(ws: &Path) -> PathBuf {
    write(
        &ws.join("tuneloop.toml"),
        "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nentry = \"train:build\"\n",
    );
    write(&ws.join("train.py"), TRAIN);
    let id = "20250101-120000";
    let dir = ws.join("runs").join(id);
    let rows: Vec<TurnRow> = (1..=TURNS).map(row).collect();
    let m = |sps: f64| json!({ "samples_per_sec": sps, "steps": 40, "batch_size": 64, "data_wait_share": 0.5 });
    write(
        &dir.join("run.json"),
        &serde_json::to_string_pretty(&json!({
            "run_id": id, "state": "finished", "started_at": "2025-01-01T12:00:00+00:00",
            "workspace": ws.display().to_string(), "project_root": ws.display().to_string(),
            "editable": ["train.py"], "agent": "claude",
            "policy": tuneloop::config::Policy::default(),
        }))
        .unwrap(),
    );
    write(&dir.join("baseline/files/train.py"), TRAIN);
    write(
        &dir.join("baseline/bench.json"),
        &json!({ "runs": [m(400.0), m(401.0), m(399.0)] }).to_string(),
    );
    let mut events = String::new();
    for r in &rows {
        let t = dir.join(format!("turns/{:02}", r.turn));
        write(
            &t.join("prompt.md"),
            &format!(
                "Turn {} of {TURNS}: change ONE DataLoader setting.\n",
                r.turn
            ),
        );
        write(
            &t.join("agent.json"),
            &json!({ "info": r.agent, "summary": r.change, "failure": null }).to_string(),
        );
        write(
            &t.join("diff.patch"),
            &tuneloop::edit::unified_diff("train.py", TRAIN, &TRAIN.replace("64", "32")),
        );
        let c: Vec<_> = r.candidate_samples.iter().map(|s| m(*s)).collect();
        let i: Vec<_> = r.incumbent_samples.iter().map(|s| m(*s)).collect();
        write(
            &t.join("bench.json"),
            &json!({ "candidate": c, "incumbent": i, "median": r.ratio, "ci": r.ratio_ci })
                .to_string(),
        );
        write(
            &t.join("decision.json"),
            &serde_json::to_string_pretty(r).unwrap(),
        );
        if r.decision == Decision::Kept {
            write(&t.join("candidate/train.py"), &TRAIN.replace("64", "32"));
        }
        for ev in [
            json!({"event": "turn_started", "turn": r.turn}),
            json!({"event": "agent_tool", "turn": r.turn, "tool": "Edit", "input": "train.py"}),
            json!({"event": "turn_decided", "row": r}),
        ] {
            events.push_str(&ev.to_string());
            events.push('\n');
        }
    }
    write(&dir.join("events.jsonl"), &events);
    let last = rows.last().and_then(|r| r.after_sps).unwrap_or(3400.0);
    let report = RunReport {
        schema_version: SCHEMA_VERSION,
        run_id: id.into(),
        project: ws.display().to_string(),
        agent: "claude".into(),
        language: "en".into(),
        started_at: "2025-01-01T12:00:00+00:00".into(),
        baseline_sps: 400.0,
        baseline_samples: vec![400.0, 401.0, 399.0],
        baseline_data_wait_share: Some(0.9),
        final_sps: last,
        final_data_wait_share: Some(0.5),
        speedup: last / 400.0,
        speedup_ci: Some([8.0, 9.0]),
        final_interval: None,
        numerics_yardstick: None,
        ceiling_sps: Some(5000.0),
        final_share_of_ceiling: Some(last / 5000.0),
        stop_reason: format!("iteration limit ({TURNS}) reached"),
        interrupted: false,
        total_cost_usd: 50.0,
        agent_time_ms: 20_000 * TURNS as u64,
        wall_s: 86_400.0,
        bench_runs: rows.iter().map(|r| r.runs).sum(),
        kept_diff: tuneloop::edit::unified_diff("train.py", TRAIN, &TRAIN.replace("64", "32")),
        turns: rows,
        data_path: None,
        measured_loader: None,
        knob_sources: Vec::new(),
        not_editable_knobs: Vec::new(),
        window: None,
        limits: None,
        costs: None,
        profile_unavailable: None,
        data_check: None,
        run_command: None,
        whole_command: None,
        machine_load: None,
        time: None,
        compute_not_tried: vec![],
    };
    tuneloop::run_loop::write_report_files(&dir, &report).unwrap();
    dir
}

struct Timing {
    what: String,
    median: Duration,
    min: Duration,
    max: Duration,
    bytes: usize,
}

fn time(ws: &Path, what: &str, args: &[&str]) -> Timing {
    let mut runs = Vec::new();
    let mut bytes = 0;
    for _ in 0..REPEATS {
        let t = Instant::now();
        let o = Command::new(env!("CARGO_BIN_EXE_tuneloop"))
            .args(args)
            .current_dir(ws)
            .env("NO_COLOR", "1")
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        runs.push(t.elapsed());
        assert!(o.status.success(), "tuneloop {args:?} failed");
        bytes = o.stdout.len();
    }
    runs.sort();
    let t = Timing {
        what: what.into(),
        median: runs[runs.len() / 2],
        min: runs[0],
        max: runs[runs.len() - 1],
        bytes,
    };
    println!(
        "{:<48} median {:>7.1} ms  (min {:.1}, max {:.1}; {} bytes out)",
        t.what,
        ms(t.median),
        ms(t.min),
        ms(t.max),
        t.bytes
    );
    t
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let note = std::env::var("BENCH_MACHINE").unwrap_or_default();
    let note = if note.is_empty() {
        String::new()
    } else {
        format!(" {note}.")
    };
    format!("{cores} cores ({model}), {}.{note}", std::env::consts::OS)
}

fn main() {
    if common::skip_unless_benchmarking("report") {
        return;
    }
    // `cargo bench` passes --bench; a filter argument is not supported.
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    let t = Instant::now();
    let dir = build_run(ws);
    println!(
        "built a run of {TURNS} turns in {:.1} s: {}",
        t.elapsed().as_secs_f64(),
        dir.display()
    );
    let id = "20250101-120000";
    let mut timings = vec![
        time(ws, "`tuneloop report` (Markdown)", &["report", id]),
        time(
            ws,
            "`tuneloop report --format json`",
            &["report", id, "--format", "json"],
        ),
        time(
            ws,
            "`tuneloop report --format html` (with the plot)",
            &["report", id, "--format", "html"],
        ),
        time(ws, "`tuneloop runs`", &["runs"]),
        time(ws, "`tuneloop show RUN 500`", &["show", id, "500"]),
    ];
    // A run killed before its report: rebuilt from 1,000 decision.json files.
    std::fs::remove_file(dir.join("report.json")).unwrap();
    timings.push(time(
        ws,
        "`tuneloop report` with no report.json (rebuilt)",
        &["report", id],
    ));

    let mut md = format!(
        "`tuneloop report` on a run of {TURNS} turns (every decision; 2–6 measurement pairs per measured turn), \
         timed end to end through the release binary (process start, reading the run folder, rendering, writing \
         stdout); median of {REPEATS} runs each. Machine: {} Reproduce with `make bench-report` \
         (benches/report.rs).\n\n",
        machine()
    );
    md.push_str("| command | median | min | max | output |\n|---|---:|---:|---:|---:|\n");
    for t in &timings {
        let size = if t.bytes < 1024 {
            format!("{} B", t.bytes)
        } else {
            format!("{:.0} KB", t.bytes as f64 / 1024.0)
        };
        md.push_str(&format!(
            "| {} | {:.1} ms | {:.1} ms | {:.1} ms | {size} |\n",
            t.what,
            ms(t.median),
            ms(t.min),
            ms(t.max),
        ));
    }
    let slowest = timings.iter().map(|t| t.median).max().unwrap_or_default();
    md.push_str(&format!(
        "\nThe slowest median is {:.0} ms: {} the one-second goal.\n",
        ms(slowest),
        if slowest < Duration::from_secs(1) {
            "under"
        } else {
            "OVER"
        }
    ));
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/RESULTS.md");
    write_section(&results, "Report speed", &md);
    println!("\n{md}\nwritten to {}", results.display());
}

/// Replaces (or appends) the `## {title}` section of RESULTS.md, leaving
/// the other sections alone.
fn write_section(path: &Path, title: &str, body: &str) {
    let old = std::fs::read_to_string(path).unwrap_or_else(|_| "# Benchmark results\n".into());
    let head = format!("## {title}\n");
    let section = format!("{head}\n{body}\n");
    let new = match old.find(&head) {
        Some(start) => {
            let rest = &old[start + head.len()..];
            let end = rest
                .find("\n## ")
                .map(|i| start + head.len() + i + 1)
                .unwrap_or(old.len());
            format!("{}{}{}", &old[..start], section, &old[end..])
        }
        None => format!(
            "{}\n{}",
            old.trim_end_matches('\n').to_string() + "\n",
            section
        ),
    };
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, new).unwrap();
}

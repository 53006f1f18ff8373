//! Reviewing a run through the real binary: `report` (md, json, html),
//! `runs` and `show`, on a hand-made run folder that has every decision, on
//! the same run killed before its report, and on a real run of a small
//! example (under a pseudo-terminal, so the live view is exercised too).
//! The HTML report is opened in headless Chromium.
//!
//! Snapshots redact what changes between runs: ids, dates, durations, paths,
//! and — for the real run — every measured number.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use serde_json::{json, Value};
use tuneloop::report::{AgentInfo, Decision, RunReport, TurnRow, SCHEMA_VERSION};

const RUN_ID: &str = "20250101-120000";
const KILLED_ID: &str = "20250102-093000";

// ---------------------------------------------------------------- the hand-made run

const TRAIN_BASE: &str = "from torch.utils.data import DataLoader\n\n\ndef build():\n    loader = DataLoader(\n        ds,\n        batch_size=64,\n    )\n    return {\"loader\": loader}\n";

fn train_with(extra: &str) -> String {
    TRAIN_BASE.replace(
        "        batch_size=64,\n",
        &format!("        batch_size=64,\n{extra}"),
    )
}

fn agent(backend: &str, cost: Option<f64>, ms: u64) -> AgentInfo {
    AgentInfo {
        backend: backend.into(),
        num_turns: Some(3),
        cost_usd: cost,
        exit_code: Some(0),
        duration_ms: ms,
    }
}

fn measurement(sps: f64, share: f64) -> Value {
    json!({ "samples_per_sec": sps, "steps": 40, "batch_size": 64, "data_wait_share": share,
            "device": "cpu", "torch_version": "2.13.0", "cpu_count": 2, "ceiling_sps": null })
}

fn rows() -> Vec<TurnRow> {
    let row = |turn: u32, change: &str, decision: Decision, reason: &str| TurnRow {
        turn,
        change: change.into(),
        file: Some("train.py".into()),
        before_sps: None,
        after_sps: None,
        ratio: None,
        ratio_ci: None,
        runs: 0,
        decision,
        reason: reason.into(),
        agent: agent("claude", Some(0.1), 15_000),
        candidate_samples: vec![],
        incumbent_samples: vec![],
        data_wait_share: None,
        confirmation: None,
    };
    vec![
        TurnRow {
            before_sps: Some(812.0),
            after_sps: Some(1999.5),
            ratio: Some(2.4623),
            ratio_ci: Some([2.401, 2.525]),
            runs: 4,
            candidate_samples: vec![1990.0, 2009.0],
            incumbent_samples: vec![810.0, 814.0],
            data_wait_share: Some(0.21),
            ..row(
                1,
                "num_workers (default) → 4",
                Decision::Kept,
                "faster: ratio 2.462, 95% CI [2.401, 2.525] above 1.01",
            )
        },
        TurnRow {
            before_sps: Some(2001.0),
            after_sps: Some(2010.5),
            ratio: Some(1.0047),
            ratio_ci: Some([0.9812, 1.0204]),
            runs: 6,
            candidate_samples: vec![1990.0, 2010.5, 2030.0],
            incumbent_samples: vec![1995.0, 2001.0, 2005.0],
            data_wait_share: Some(0.2),
            ..row(
                2,
                "prefetch_factor (default) → 4",
                Decision::Reverted,
                "not shown faster: ratio 1.005, CI [0.981, 1.020]",
            )
        },
        TurnRow {
            file: None,
            ..row(
                3,
                "num_workers 4 → 8; pin_memory=True",
                Decision::Rejected,
                "more than one DataLoader argument changed (num_workers, pin_memory)",
            )
        },
        TurnRow {
            runs: 1,
            before_sps: Some(2001.0),
            ..row(
                4,
                "persistent_workers (default) → True",
                Decision::Failed,
                "bench failed (candidate): exited with code 1",
            )
        },
        TurnRow {
            file: None,
            agent: agent("claude", Some(0.0931), 9_000),
            ..row(
                5,
                "(no change proposed)",
                Decision::NoChange,
                "the agent changed no file",
            )
        },
    ]
}

fn report(ws: &Path) -> RunReport {
    RunReport {
        schema_version: SCHEMA_VERSION,
        run_id: RUN_ID.into(),
        project: ws.join("proj").display().to_string(),
        agent: "claude".into(),
        language: "en".into(),
        started_at: "2025-01-01T12:00:00.123+00:00".into(),
        baseline_sps: 812.34,
        baseline_samples: vec![805.0, 812.34, 820.5],
        baseline_data_wait_share: Some(0.72),
        final_sps: 1999.5,
        final_data_wait_share: Some(0.21),
        speedup: 2.4512,
        speedup_ci: Some([2.39, 2.51]),
        final_interval: None,
        numerics_yardstick: None,
        ceiling_sps: Some(3000.0),
        final_share_of_ceiling: Some(1999.5 / 3000.0),
        stop_reason: "iteration limit (5) reached".into(),
        interrupted: false,
        total_cost_usd: 0.4931,
        agent_time_ms: 69_000,
        wall_s: 723.4,
        bench_runs: 21,
        turns: rows(),
        kept_diff: tuneloop::edit::unified_diff(
            "train.py",
            TRAIN_BASE,
            &train_with("        num_workers=4,\n"),
        ),
        data_path: None,
        measured_loader: None,
        knob_sources: Vec::new(),
        not_editable_knobs: Vec::new(),
        window: None,
        limits: None,
        costs: None,
        data_check: None,
        profile_unavailable: None,
        run_command: None,
        whole_command: None,
        machine_load: None,
        time: None,
        compute_not_tried: vec![],
    }
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn write_json(p: &Path, v: &impl serde::Serialize) {
    write(p, &(serde_json::to_string_pretty(v).unwrap() + "\n"));
}

/// A raw Claude Code stream: two tool calls and the result.
const CLAUDE_STREAM: &str = r#"{"type":"system","subtype":"init","session_id":"s1","tools":["Read","Edit"],"model":"claude-test"}
{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Reading the loader."},{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/p/train.py"}}]},"parent_tool_use_id":null,"session_id":"s1"}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"..."}]}}
{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t2","name":"Edit","input":{"file_path":"/p/train.py","old_string":"num_workers=4,","new_string":"num_workers=4,\n        prefetch_factor=4,"}}]},"parent_tool_use_id":null,"session_id":"s1"}
{"type":"result","subtype":"success","is_error":false,"duration_ms":15000,"num_turns":3,"result":"Set prefetch_factor=4.","session_id":"s1","total_cost_usd":0.1}
"#;

/// Writes a run folder by hand into `<ws>/runs/<id>`: run.json, events.jsonl,
/// baseline/, turns/01..05 (kept, reverted, rejected, failed, no change).
/// With `finished`, also final.json and the report files; without, the run
/// looks killed during turn 6 (a turn folder with no decision).
fn handmade_run(ws: &Path, id: &str, finished: bool) -> PathBuf {
    let dir = ws.join("runs").join(id);
    let mut policy = serde_json::to_value(tuneloop::config::Policy::default()).unwrap();
    policy["agent"]["backend"] = "claude".into();
    write_json(
        &dir.join("run.json"),
        &json!({
            "run_id": id, "state": if finished { "finished" } else { "running" },
            "started_at": "2025-01-01T12:00:00.123+00:00",
            "workspace": ws.display().to_string(), "project_root": ws.join("proj").display().to_string(),
            "editable": ["train.py"], "agent": "claude", "policy": policy, "max_iterations": 5,
        }),
    );
    let ev = |e: Value, secs: u32| {
        let mut e = e;
        e["ts"] = format!("2025-01-01T12:{:02}:{:02}.000+00:00", secs / 60, secs % 60).into();
        serde_json::to_string(&e).unwrap()
    };
    let mut events = vec![
        ev(
            json!({"event": "run_started", "run_id": id, "project": "proj", "agent": "claude", "policy": "p", "world_size": 1}),
            0,
        ),
        ev(json!({"event": "turn_started", "turn": 1}), 30),
        ev(
            json!({"event": "agent_tool", "turn": 1, "tool": "Edit", "input": "train.py: `batch_size=64,` → `batch_size=64, num_workers=4,`"}),
            40,
        ),
    ];
    for r in rows() {
        events.push(ev(json!({"event": "turn_decided", "row": r}), 60 * r.turn));
    }
    if finished {
        events.push(ev(
            json!({"event": "stopped", "reason": "iteration limit (5) reached"}),
            600,
        ));
    }
    write(&dir.join("events.jsonl"), &(events.join("\n") + "\n"));

    let base = dir.join("baseline");
    write(&base.join("files/train.py"), TRAIN_BASE);
    write(&base.join("profile.txt"), "data_wait 97%\n");
    let mut first = measurement(805.0, 0.71);
    first["ceiling_sps"] = 3000.0.into();
    write_json(
        &base.join("bench.json"),
        &json!({ "profiled": measurement(700.0, 0.7), "runs": [first, measurement(812.34, 0.72), measurement(820.5, 0.73)] }),
    );

    let files = [
        Some(train_with("        num_workers=4,\n")),
        Some(train_with(
            "        num_workers=4,\n        prefetch_factor=4,\n",
        )),
        None,
        Some(train_with(
            "        num_workers=4,\n        persistent_workers=True,\n",
        )),
        None,
    ];
    let mut incumbent = TRAIN_BASE.to_string();
    for (row, cand) in rows().into_iter().zip(files) {
        let t = dir.join(format!("turns/{:02}", row.turn));
        write(
            &t.join("prompt.md"),
            &format!(
                "Turn {} of 5. Change ONE DataLoader setting in train.py.\n",
                row.turn
            ),
        );
        write_json(
            &t.join("agent.json"),
            &json!({ "info": row.agent, "failure": null, "summary": format!("tried: {}", row.change), "exhausted": false }),
        );
        let diff = cand
            .as_deref()
            .map(|c| tuneloop::edit::unified_diff("train.py", &incumbent, c))
            .unwrap_or_default();
        write(&t.join("diff.patch"), &diff);
        if !row.candidate_samples.is_empty() {
            let c: Vec<Value> = row
                .candidate_samples
                .iter()
                .map(|s| measurement(*s, 0.2))
                .collect();
            let i: Vec<Value> = row
                .incumbent_samples
                .iter()
                .map(|s| measurement(*s, 0.7))
                .collect();
            let ratios: Vec<f64> = row
                .candidate_samples
                .iter()
                .zip(&row.incumbent_samples)
                .map(|(c, i)| c / i)
                .collect();
            let verdict = if row.decision == Decision::Kept {
                "keep"
            } else {
                "revert"
            };
            write_json(
                &t.join("bench.json"),
                &json!({ "candidate": c, "incumbent": i, "ratios": ratios, "median": row.ratio, "ci": row.ratio_ci, "verdict": verdict }),
            );
        }
        if row.decision == Decision::Failed {
            write(
                &t.join("bench_error.txt"),
                "the bench exited with code 1\nTraceback: ...\n",
            );
        }
        if row.turn == 2 {
            write(&t.join("events.jsonl"), CLAUDE_STREAM);
        }
        if let Some(c) = cand.filter(|_| row.decision == Decision::Kept) {
            write(&t.join("candidate/train.py"), &c);
            incumbent = c;
        }
        write_json(&t.join("decision.json"), &row);
    }
    if finished {
        write_json(
            &dir.join("final.json"),
            &json!({ "best": [], "baseline": [], "ratios": [], "median": 2.4512, "ci": [2.39, 2.51] }),
        );
        tuneloop::run_loop::write_report_files(&dir, &report(ws)).unwrap();
    } else {
        // Killed in turn 6: the agent had started, nothing decided.
        write(&dir.join("turns/06/prompt.md"), "Turn 6 of 5.\n");
    }
    dir
}

/// Runs the binary in `ws` without a terminal and without colour.
fn tl(ws: &Path, args: &[&str]) -> Run {
    let o = Command::new(env!("CARGO_BIN_EXE_tuneloop"))
        .args(args)
        .current_dir(ws)
        .env("NO_COLOR", "1")
        .env("TUNELOOP_PYTHON", python())
        .env("TUNELOOP_WINDOW_S", "0")
        .output()
        .unwrap();
    let r = Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert_eq!(
        r.code, 0,
        "tuneloop {args:?} failed:\n{}\n{}",
        r.stdout, r.stderr
    );
    r
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    write(&ws.path().join("tuneloop.toml"), "[project]\nroot = \"proj\"\neditable = [\"train.py\"]\n\n[bench]\nentry = \"train:build\"\n");
    write(&ws.path().join("proj/train.py"), TRAIN_BASE);
    ws
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                format!("\\{c}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Filters for what changes between runs: the workspace path, run ids,
/// times, durations.
fn redactions(ws: &Path) -> Vec<(String, String)> {
    let mut f = vec![(regex_escape(&ws.display().to_string()), "[WS]".to_string())];
    if let Ok(c) = ws.canonicalize() {
        f.insert(
            0,
            (regex_escape(&c.display().to_string()), "[WS]".to_string()),
        );
    }
    f.extend(
        [
            (r"\d{8}-\d{6}(-\d+)?", "[RUN_ID]"),
            (
                r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)",
                "[TIME]",
            ),
            (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "[DATE]"),
            (r"\b(\d+h )?\d+m \d{2}s\b", "[DURATION]"),
            (r"\b\d+\.\d+s\b", "[DURATION]"),
            (
                r#""(wall_s|agent_time_ms|duration_ms)": [0-9.]+"#,
                r#""$1": "[DURATION]""#,
            ),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string())),
    );
    f
}

macro_rules! snapshot {
    ($filters:expr, $name:expr, $value:expr) => {{
        let mut s = insta::Settings::clone_current();
        for (re, with) in $filters.iter() {
            s.add_filter(re, with.as_str());
        }
        s.set_prepend_module_to_snapshot(false);
        s.bind(|| insta::assert_snapshot!($name, $value));
    }};
}

#[test]
fn handmade_run_report_runs_and_show() {
    let _run = slot();
    let ws = workspace();
    let dir = handmade_run(ws.path(), RUN_ID, true);
    let f = redactions(ws.path());

    let md = tl(ws.path(), &["report", RUN_ID]).stdout;
    // Every decision has its row, and the headline has the parts the issue names.
    for want in [
        "| 1 | num_workers (default) → 4 | 812.0 | 1999.5 | 2.462 | [2.401, 2.525] | 4 | kept |",
        "| reverted |",
        "| rejected |",
        "| failed |",
        "| no change |",
        "812.3 → 1999.5 samples/sec",
        "×2.45",
        "final is 66.6% of it",
        "$0.49",
        "iteration limit (5) reached",
        "+        num_workers=4,",
    ] {
        assert!(md.contains(want), "missing {want:?} in\n{md}");
    }
    assert_eq!(md, std::fs::read_to_string(dir.join("report.md")).unwrap());
    snapshot!(f, "handmade_report_md", md);

    let js = tl(ws.path(), &["report", "--format", "json"]).stdout;
    let v: Value = serde_json::from_str(&js).unwrap();
    let decisions: Vec<&str> = v["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        decisions,
        ["kept", "reverted", "rejected", "failed", "no_change"]
    );
    assert_eq!(tl(ws.path(), &["report", "--json"]).stdout, js);
    snapshot!(f, "handmade_report_json", js);

    let runs = tl(ws.path(), &["runs"]).stdout;
    assert!(runs.starts_with("ID "), "{runs}");
    // One aligned line per run: the columns start at the same place.
    let lines: Vec<&str> = runs.lines().collect();
    assert_eq!(lines.len(), 2, "{runs}");
    assert_eq!(
        lines[0].find("TURNS").map(|i| i + 5),
        lines[1].find("5  ").map(|i| i + 1),
        "{runs}"
    );
    for want in [
        RUN_ID,
        "2025-01-01",
        "proj",
        "claude",
        "×2.45",
        "finished",
        "iteration limit (5) reached",
    ] {
        assert!(lines[1].contains(want), "missing {want:?} in {runs}");
    }
    snapshot!(f, "handmade_runs", runs);

    let show = tl(ws.path(), &["show", RUN_ID, "2"]).stdout;
    for want in [
        "turn 2/5 · prefetch_factor (default) → 4 · reverted",
        "Turn 2 of 5. Change ONE DataLoader setting",
        "tried: prefetch_factor (default) → 4",
        "tool calls (2):",
        "Read  /p/train.py",
        "Edit  /p/train.py",
        "+        prefetch_factor=4,",
        "99% CI [0.981, 1.020] → revert",
        "reverted — not shown faster",
    ] {
        assert!(show.contains(want), "missing {want:?} in\n{show}");
    }
    assert!(
        !show.contains('\x1b'),
        "colour with NO_COLOR and no terminal"
    );
    snapshot!(f, "handmade_show_turn_2", show);

    // Turn 1's tool calls come from the run log; turn 4 shows its bench error.
    let show1 = tl(ws.path(), &["show", RUN_ID, "1"]).stdout;
    assert!(
        show1.contains("Edit  train.py: `batch_size=64,` → `batch_size=64, num_workers=4,`"),
        "{show1}"
    );
    let show4 = tl(ws.path(), &["show", RUN_ID, "4"]).stdout;
    assert!(
        show4.contains("bench error:\nthe bench exited with code 1"),
        "{show4}"
    );
    assert!(
        show4.contains("failed — bench failed (candidate)"),
        "{show4}"
    );
    // `show RUN` is the report.
    assert_eq!(tl(ws.path(), &["show", RUN_ID]).stdout, md);
    // A turn that does not exist is a usage error naming the turns there are.
    let o = Command::new(env!("CARGO_BIN_EXE_tuneloop"))
        .args(["show", RUN_ID, "9"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no turn 9 (it has turns 1–5)"));
}

#[test]
fn a_run_killed_before_its_report_is_rebuilt_from_the_folder() {
    let _run = slot();
    let ws = workspace();
    let dir = handmade_run(ws.path(), KILLED_ID, false);
    assert!(!dir.join("report.json").exists());
    let f = redactions(ws.path());

    let md = tl(ws.path(), &["report"]).stdout;
    assert!(md.contains("**Interrupted**"), "{md}");
    let turns: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| turn"))
        .map(|l| &l[..4])
        .collect();
    // Turn 6 was killed before its decision: not a row.
    assert_eq!(turns, ["| 1 ", "| 2 ", "| 3 ", "| 4 ", "| 5 "], "{md}");
    // The kept change is the diff; the final throughput is the last kept turn's.
    assert!(
        md.contains("+        num_workers=4,") && !md.contains("+        prefetch_factor=4,"),
        "{md}"
    );
    assert!(md.contains("812.3 → 1999.5 samples/sec"), "{md}");
    snapshot!(f, "killed_report_md", md);

    let v: Value =
        serde_json::from_str(&tl(ws.path(), &["report", "--format", "json"]).stdout).unwrap();
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["turns"].as_array().unwrap().len(), 5);
    assert_eq!(v["bench_runs"], 1 + 3 + 4 + 6 + 1);
    assert!(
        (v["total_cost_usd"].as_f64().unwrap() - 0.4931).abs() < 1e-9,
        "{v:#}"
    );
    let html = tl(ws.path(), &["report", "--format", "html"]).stdout;
    assert!(html.contains("<table id=\"turns\">") && html.contains("<svg"));

    // Next to a finished run, `runs` says which one did not finish.
    handmade_run(ws.path(), RUN_ID, true);
    let runs = tl(ws.path(), &["runs"]).stdout;
    snapshot!(f, "runs_finished_and_killed", runs);
    let j: Value = serde_json::from_str(&tl(ws.path(), &["runs", "--json"]).stdout).unwrap();
    assert_eq!(j[0]["id"], RUN_ID);
    assert_eq!(j[0]["interrupted"], false);
    assert_eq!(j[1]["id"], KILLED_ID);
    assert_eq!(j[1]["state"], "killed");
    assert_eq!(j[1]["interrupted"], true);
    assert_eq!(j[1]["turns"], 5);
}

/// A measurement with the figures of a state's cost: `nw` workers of
/// `pss` bytes between them, `cpu` CPU seconds over 10 s of timed steps.
fn costly(sps: f64, nw: u64, pss: u64, cpu: f64) -> Value {
    let mut m = measurement(sps, 0.5);
    m["loader"] = json!({ "num_workers": nw });
    m["live_workers"] = nw.into();
    if nw > 0 {
        m["workers_pss_bytes"] = pss.into();
        m["workers_rss_bytes"] = (pss * 3).into();
    }
    m["main_rss_bytes"] = 1_200_000_000u64.into();
    m["loader_cpu_s"] = (cpu * 0.75).into();
    m["main_cpu_s"] = (cpu * 0.25).into();
    m["wall_s"] = 10.0.into();
    m["usable_cores"] = 2.0.into();
    m
}

#[test]
fn report_and_show_give_each_states_memory_and_cpu() {
    let _run = slot();
    let ws = workspace();
    let dir = handmade_run(ws.path(), KILLED_ID, false);
    // The harness's memory and CPU figures in the baseline's and turn 1's runs.
    write_json(
        &dir.join("baseline/bench.json"),
        &json!({ "profiled": null, "runs": [
            costly(812.0, 0, 0, 9.0), costly(805.0, 0, 0, 8.0), costly(820.0, 0, 0, 9.5)] }),
    );
    let t1 = dir.join("turns/01/bench.json");
    let mut b: Value = serde_json::from_str(&std::fs::read_to_string(&t1).unwrap()).unwrap();
    b["candidate"] = json!([
        costly(1990.0, 4, 600_000_000, 17.0),
        costly(2009.0, 4, 640_000_000, 18.0)
    ]);
    b["incumbent"] = json!([costly(810.0, 0, 0, 9.0), costly(814.0, 0, 0, 9.2)]);
    write_json(&t1, &b);

    let md = tl(ws.path(), &["report"]).stdout;
    // The before/after in the headline: the final state is turn 1's candidate.
    assert!(
        md.contains("- **Memory and CPU:** workers 0 → 4 · workers' memory 0 MB → 600 MB (PSS) · CPU 0.90 → 1.70 cores (baseline → final)"),
        "{md}"
    );
    for want in [
        "## Memory and CPU by state",
        "| baseline | — | — | 812.0 | 0 | 0 MB | 1.20 GB | 0.90 / 2 cores |",
        "| turn 1 | num_workers (default) → 4 | kept | 1990.0 | 4 | 600 MB (PSS) | 1.20 GB | 1.70 / 2 cores |",
        "| final | — | — | 1990.0 | 4 | 600 MB (PSS) | 1.20 GB | 1.70 / 2 cores |",
    ] {
        assert!(md.contains(want), "missing {want:?} in\n{md}");
    }
    // Turn 2's runs carry no such figures: its row has dashes, not zeros.
    assert!(
        md.contains(
            "| turn 2 | prefetch_factor (default) → 4 | reverted | 2010.5 | — | — | — | — |"
        ),
        "{md}"
    );
    let v: Value =
        serde_json::from_str(&tl(ws.path(), &["report", "--format", "json"]).stdout).unwrap();
    assert_eq!(v["costs"]["baseline"]["cpu_cores"], 0.9);
    assert_eq!(v["costs"]["final"]["workers_memory_bytes"], 600_000_000);
    assert_eq!(v["costs"]["final"]["workers_memory_kind"], "pss");
    assert_eq!(v["costs"]["turns"][0]["turn"], 1);
    let html = tl(ws.path(), &["report", "--format", "html"]).stdout;
    assert!(html.contains("<table id=\"costs\">"), "{html}");

    let show = tl(ws.path(), &["show", KILLED_ID, "1"]).stdout;
    for want in [
        "Memory and CPU (incumbent): workers 0 · workers' memory 0 MB · training process (RSS) 1.20 GB · CPU 0.90 / 2 cores",
        "Memory and CPU (candidate): workers 4 · workers' memory 600 MB (PSS) · training process (RSS) 1.20 GB · CPU 1.70 / 2 cores",
    ] {
        assert!(show.contains(want), "missing {want:?} in\n{show}");
    }
}

#[test]
fn japanese_runs_show_japanese_words() {
    let _run = slot();
    let ws = workspace();
    write(
        &ws.path().join("policies/default.toml"),
        "[agent]\nlanguage = \"ja\"\n",
    );
    let dir = handmade_run(ws.path(), RUN_ID, true);
    let mut r = report(ws.path());
    r.language = "ja".into();
    tuneloop::run_loop::write_report_files(&dir, &r).unwrap();
    let md = tl(ws.path(), &["report"]).stdout;
    assert!(
        md.contains("| 採用 |") && md.contains("| 差し戻し |") && md.contains("| 却下 |"),
        "{md}"
    );
    let runs = tl(ws.path(), &["runs"]).stdout;
    assert!(
        runs.contains("高速化") && runs.contains("停止理由"),
        "{runs}"
    );
    let mut run: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    run["policy"]["agent"]["language"] = "ja".into();
    write_json(&dir.join("run.json"), &run);
    let show = tl(ws.path(), &["show", RUN_ID, "2"]).stdout;
    assert!(
        show.contains("== 差分 ==") && show.contains("差し戻し"),
        "{show}"
    );
}

// ---------------------------------------------------------------- Chromium

/// Headless Chromium, or why not. A missing browser fails the test (run
/// `make setup`) unless TUNELOOP_SKIP_BROWSER=1.
fn chromium() -> Option<String> {
    if std::env::var("TUNELOOP_SKIP_BROWSER").is_ok_and(|v| v == "1") {
        eprintln!("TUNELOOP_SKIP_BROWSER=1: not opening the HTML report in a browser");
        return None;
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(name.to_string());
        }
    }
    panic!("headless Chromium is needed to check the HTML report: run `make setup` (it installs Debian's `chromium`), or set TUNELOOP_SKIP_BROWSER=1 to skip this check");
}

fn chromium_cmd(browser: &str, profile: &Path) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// The page's DOM after Chromium has parsed and laid it out.
fn dump_dom(browser: &str, page: &Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let o = chromium_cmd(browser, profile.path())
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn screenshot(browser: &str, page: &Path, png: &Path) -> Vec<u8> {
    let profile = tempfile::tempdir().unwrap();
    let o = chromium_cmd(browser, profile.path())
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,1600")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read(png).unwrap()
}

/// Checks the DOM of an HTML report: the table with one row per turn, and
/// the plot as inline SVG.
fn check_report_dom(dom: &str, turns: &[(&str, &str)]) {
    let table = dom
        .split("<table id=\"turns\">")
        .nth(1)
        .expect("no table#turns in the DOM");
    let body = table.split("</table>").next().unwrap();
    let rows: Vec<&str> = body.split("<tr class=\"").skip(1).collect();
    assert_eq!(rows.len(), turns.len(), "rows of table#turns:\n{body}");
    for (row, (class, change)) in rows.iter().zip(turns) {
        assert!(
            row.starts_with(class) && row.contains(change),
            "row {row:?} is not {class} {change}"
        );
    }
    let figure = dom
        .split("<figure id=\"plot\">")
        .nth(1)
        .expect("no figure#plot");
    let svg = figure.split("</figure>").next().unwrap();
    assert!(
        svg.trim_start().starts_with("<svg"),
        "the plot is not inline SVG: {svg:.200}"
    );
    // Points for the measurements, lines for the baseline/ceiling/incumbent.
    assert!(svg.matches("<circle").count() >= turns.len(), "{svg:.400}");
    assert!(
        svg.contains("<polyline") || svg.contains("<path") || svg.contains("<line"),
        "{svg:.400}"
    );
    assert!(!dom.contains("<script"), "the page must not run scripts");
}

#[test]
fn html_report_opens_in_headless_chromium() {
    let _run = slot();
    let Some(browser) = chromium() else { return };
    let ws = workspace();
    handmade_run(ws.path(), RUN_ID, true);
    let html = tl(ws.path(), &["report", "--format", "html"]).stdout;
    // Self-contained: no scripts, no external resources.
    assert!(
        !html.contains("<script") && !html.contains("src=\"http") && !html.contains("href=\"http")
    );
    let page = ws.path().join("report.html");
    write(&page, &html);
    let dom = dump_dom(&browser, &page);
    check_report_dom(
        &dom,
        &[
            ("kept", "num_workers (default) → 4"),
            ("reverted", "prefetch_factor (default) → 4"),
            ("rejected", "num_workers 4 → 8; pin_memory=True"),
            ("failed", "persistent_workers (default) → True"),
            ("no_change", "(no change proposed)"),
        ],
    );
    // The rendered page is not blank: far more ink than an empty page.
    let png = screenshot(&browser, &page, &ws.path().join("report.png"));
    let blank_page = ws.path().join("blank.html");
    write(&blank_page, "<!DOCTYPE html><html><body></body></html>\n");
    let blank = screenshot(&browser, &blank_page, &ws.path().join("blank.png"));
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    assert!(
        png.len() > 4 * blank.len(),
        "the screenshot looks empty: {} bytes vs {} for a blank page",
        png.len(),
        blank.len()
    );
}

// ---------------------------------------------------------------- a real run

/// Runs `tuneloop start` in a pseudo-terminal (util-linux `script`), so that
/// stderr is a terminal and the live view is used. Returns the transcript.
fn start_in_a_terminal(ws: &Ws) -> (i32, String) {
    let o = Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(format!("{} start", env!("CARGO_BIN_EXE_tuneloop")))
        .arg("/dev/null")
        .current_dir(ws.path())
        .env("TUNELOOP_PYTHON", python())
        .env("TUNELOOP_WINDOW_S", "0")
        .env("NO_COLOR", "1")
        .env("TERM", "xterm")
        .env("COLUMNS", "160")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("`script` (util-linux) runs the command in a pseudo-terminal");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn a_real_run_shows_live_progress_and_its_report_has_the_expected_shape() {
    let _run = slot();
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    let (code, term) = start_in_a_terminal(&ws);
    assert_eq!(code, 0, "{term}");
    // The live view: a status line redrawn in place, with the pair count.
    assert!(
        term.contains("\r\x1b[2K"),
        "no status line redrawn in place:\n{term:?}"
    );
    assert!(
        term.contains("turn 1 · measuring · pair 1 of 4"),
        "{term:?}"
    );
    assert!(
        term.contains("baseline · throughput run 1 of 1"),
        "{term:?}"
    );
    // The count the baseline's figures predict (16 on 2 cores: items wait
    // 64 ms a batch), or the core count: kept either way.
    assert!(
        term.contains("turn 1: num_workers (default) → ")
            && term
                .split("turn 1: num_workers (default) → ")
                .nth(1)
                .is_some_and(|t| t.split_once(" — ").is_some_and(|(n, d)| {
                    n.parse::<u32>().is_ok_and(|n| n >= 2) && d.starts_with("kept")
                })),
        "{term:?}"
    );
    assert!(
        !term.contains("\x1b[32"),
        "colour despite NO_COLOR: {term:?}"
    );
    // Measurements stay on the status line instead of scrolling.
    assert!(!term.contains("samples/sec\r\n[00:"), "{term:?}");

    let md = ws.tuneloop(&["report"]).stdout;
    let mut f = redactions(ws.path());
    f.extend(
        [
            // The first count is what the baseline's figures predict.
            (
                r"num_workers \(default\) → \d+",
                "num_workers (default) → [W]",
            ),
            (r"workers 0 → \d+ ·", "workers 0 → [W] ·"),
            (r"\| \d+ \| ([0-9.]+ [MG]B \(PSS\))", "| [W] | $1"),
            (r"num_workers=\d+,", "num_workers=[W],"),
            (r"(?m)^- \*\*Bench runs:\*\* \d+", "- **Bench runs:** [N]"),
            (
                r"\| \d+ \| (kept|reverted|rejected|failed|no change) \|",
                "| [N] | $1 |",
            ),
            // Which limit binds, the cores and the CPU per sample depend on the machine.
            (r"; other processes kept [0-9.]+ cores busy", ""),
            // Whether other processes took cores while measuring depends on the machine.
            (r"(?m)^- \*\*Machine load:\*\* .*\n", ""),
            // Whether 3 pairs left the headline's interval wide depends on the
            // box's noise (the line itself is tested in run_loop's load tests).
            (r"(?m)^- \*\*Interval:\*\* .*\n", ""),
            // Whether the workers slowed the step depends on the machine's load.
            (
                r"; beside the workers the step itself ran at [0-9.]+ samples/sec: they share its cores",
                "",
            ),
            (
                r"the step alone with receiving its batches|the step alone \(ceiling\)|what the cores can feed \(CPU limit\)|what the cores can feed with each epoch's restart",
                "[BINDING]",
            ),
            (r"\d+ ms to its first batch", "[N] ms to its first batch"),
            // The timed steps' share of the wall time depends on the machine,
            // and how many runs the pairs took on its noise.
            (
                r"\(\d+%\): the timed steps of \d+ throughput runs",
                "([PCT]): the timed steps of [N] throughput runs",
            ),
            // Whether num_threads has room depends on the cores and the
            // workers' load (the line itself is tested in tests/compute.rs).
            (
                r"(?m)^(- \*\*Compute changes not tried:\*\*) .*$",
                "$1 [KNOBS]",
            ),
            (
                r"\d+(\.\d+)? cores?( \((affinity mask|cgroup quota)\))?",
                "[CORES]",
            ),
            (r"\d+ µs", "[N] µs"),
            // The processes' memory varies from run to run.
            (r"\d+(\.\d+)? [MG]B", "[MEM]"),
            (r"\d+\.\d+", "[N]"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string())),
    );
    snapshot!(f, "real_run_report_md", md);

    // The same run's HTML report in the browser.
    if let Some(browser) = chromium() {
        let run = std::fs::read_dir(ws.path().join("runs"))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.is_dir())
            .unwrap();
        let dom = dump_dom(&browser, &run.join("report.html"));
        check_report_dom(&dom, &[("kept", "num_workers (default) → ")]);
    }
}

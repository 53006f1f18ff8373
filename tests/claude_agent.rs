//! The `claude` agent backend against a fake Claude Code CLI
//! (`tests/fake-claude/`, built on first use): the exact command line, the
//! prompt and stdin it gets, what each turn records, and every misbehaviour
//! ending in the right decision with no changed byte left behind.
//!
//! Most cases use a contract-mode bench (`bench_loader.py`, plain Python, no
//! torch) whose figure follows `num_workers` in train.py, so decisions are
//! deterministic and each run takes a second; the two cases that need the
//! managed harness run the bundled example with real PyTorch.

use crate::support::slot;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

const EXAMPLE_TRAIN: &str = include_str!("../examples/slow_loader/train.py");

/// The bundled example as shipped. `make demo` tunes it in place (kept
/// settings stay, one per line), so the tuning arguments are taken out again.
fn example_train() -> String {
    let knobs = [
        "num_workers=",
        "pin_memory=",
        "prefetch_factor=",
        "persistent_workers=",
    ];
    let t: String = EXAMPLE_TRAIN
        .split_inclusive('\n')
        .filter(|l| {
            !(knobs.iter().any(|k| l.trim_start().starts_with(k)) && l.trim_end().ends_with(','))
        })
        .collect();
    assert!(
        t.contains("        shuffle=True,\n    )"),
        "the example's DataLoader call changed shape:\n{t}"
    );
    t
}

const DATA_UTILS: &str = "\"\"\"Helpers the agent must not touch.\"\"\"\nSEED = 0\n";

/// A contract-mode bench: samples/sec = 100 × (1 + num_workers in train.py),
/// and a small profiler-like table when asked for one (padded on request).
const BENCH_LOADER: &str = r#""""Contract-mode bench for tests: the figure follows num_workers in train.py."""
import os
import re
import sys

src = open("train.py").read()
# The last mention is the DataLoader call's (the docstring mentions num_workers=0 first).
found = re.findall(r"num_workers\s*=\s*(\d+)", src)
nw = int(found[-1]) if found else 0
if os.environ.get("TUNELOOP_PROFILE") == "1":
    print("Name          Self CPU total   CPU total   # of Calls")
    print("data_wait     1.200ms          812.000ms   10")
    print("train_step    0.400ms          40.000ms    10")
    pad = int(os.environ.get("BENCH_TABLE_PAD", "0"))
    line = "x" * 99 + "\n"
    for _ in range(pad // 100 + 1 if pad else 0):
        sys.stdout.write(line)
print(f"samples/sec: {100.0 * (1 + nw):.1f}")
"#;

fn python() -> String {
    std::env::var("TUNELOOP_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/tuneloop/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

/// The fake CLI, built once per test binary into its own target folder (no
/// lock shared with the cargo that runs these tests).
fn fake_claude() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake-claude/Cargo.toml");
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-claude");
        let out = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--offline", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&target)
            .output()
            .expect("run cargo to build the fake claude");
        assert!(
            out.status.success(),
            "building the fake claude failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        target.join("debug/fake-claude")
    })
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.into()).to_string()
}

/// A policy file as sections of key = TOML value, defaults first.
struct PolicyToml(BTreeMap<&'static str, Vec<(String, String)>>);

impl PolicyToml {
    fn new() -> PolicyToml {
        let mut p = PolicyToml(BTreeMap::new());
        p.set("agent", "backend", "\"claude\"")
            .set(
                "agent",
                "command",
                &toml_str(&fake_claude().display().to_string()),
            )
            .set("agent", "timeout_s", "60")
            .set("agent", "max_turns", "6")
            .set("loop", "max_iterations", "1")
            .set("loop", "max_consecutive_reverts", "0")
            .set("decision", "repeats", "2")
            .set("decision", "max_repeats", "2")
            .set("decision", "baseline_runs", "1")
            // As FAST_POLICY: the other test's processes on this 2-core box
            // are load, and waiting it out is not what these tests check.
            .set("decision", "final_max_pairs", "3")
            .set("decision", "busy_wait_s", "0")
            .set("decision", "max_set_aside", "0")
            .set("decision", "confirm_kept", "false");
        p
    }

    fn set(&mut self, section: &'static str, key: &str, value: &str) -> &mut Self {
        let s = self.0.entry(section).or_default();
        match s.iter_mut().find(|(k, _)| k == key) {
            Some(kv) => kv.1 = value.into(),
            None => s.push((key.into(), value.into())),
        }
        self
    }

    fn render(&self) -> String {
        self.0
            .iter()
            .map(|(sec, kvs)| {
                format!(
                    "[{sec}]\n{}\n",
                    kvs.iter()
                        .map(|(k, v)| format!("{k} = {v}\n"))
                        .collect::<String>()
                )
            })
            .collect()
    }
}

/// A temporary folder holding the workspace (`ws/`, also the project) and,
/// outside it, the fake's log (`log/`).
struct Ws {
    tmp: tempfile::TempDir,
    log: PathBuf,
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    fn run_dir(&self) -> PathBuf {
        let line = self.stdout.lines().next().unwrap_or_default();
        PathBuf::from(
            line.strip_prefix("run: ")
                .unwrap_or_else(|| panic!("no run line in\n{}\n{}", self.stdout, self.stderr)),
        )
    }

    fn ok(&self) -> &Run {
        assert_eq!(
            self.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl Ws {
    fn empty() -> Ws {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("ws")).unwrap();
        let log = tmp.path().join("log");
        Ws { tmp, log }
    }

    /// train.py (the example), data_utils.py, bench_loader.py; contract-mode bench.
    fn contract(policy: &PolicyToml) -> Ws {
        let ws = Ws::empty();
        ws.write("train.py", &example_train());
        ws.write("data_utils.py", DATA_UTILS);
        ws.write("bench_loader.py", BENCH_LOADER);
        ws.write(
            "tuneloop.toml",
            &format!(
                "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\ncommand = {}\ntimeout_s = 60\n",
                toml_str(&format!("{} bench_loader.py", shell_words::quote(&python())))
            ),
        );
        ws.write("policies/default.toml", &policy.render());
        ws
    }

    /// The bundled example in managed mode, with real PyTorch.
    fn managed(policy: &PolicyToml) -> Ws {
        let ws = Ws::empty();
        ws.write("train.py", &example_train());
        ws.write(
            "tuneloop.toml",
            "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nentry = \"train:build\"\nsteps = 8\nwarmup_steps = 2\ntimeout_s = 120\n",
        );
        ws.write("policies/default.toml", &policy.render());
        ws
    }

    fn path(&self) -> PathBuf {
        self.tmp.path().join("ws")
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tuneloop"));
        c.args(args)
            .current_dir(self.path())
            .env("TUNELOOP_PYTHON", python())
            .env("TUNELOOP_WINDOW_S", "0")
            .env("NO_COLOR", "1")
            .env("TUNELOOP_WHOLE_COMMAND_S", "0")
            .env("FAKE_CLAUDE_LOG", &self.log)
            .env_remove("FAKE_CLAUDE_MODES")
            .envs(env.iter().copied());
        c
    }

    fn tuneloop(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        Run::from(self.command(args, env).output().unwrap())
    }

    fn start(&self, modes: &str) -> Run {
        self.tuneloop(
            &["start", "--agent", "claude"],
            &[("FAKE_CLAUDE_MODES", modes)],
        )
    }

    /// Every file of the project but the run folders and caches.
    fn files(&self) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let root = self.path();
        let mut stack = vec![root.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if ["runs", "__pycache__"].contains(&name.as_str()) {
                    continue;
                }
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                } else {
                    let rel = e
                        .path()
                        .strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    out.insert(rel, std::fs::read(e.path()).unwrap());
                }
            }
        }
        out
    }

    /// What the fake recorded of its call `n` (argv, cwd, stdin).
    fn fake_call(&self, n: u32) -> Value {
        json(&self.log.join(format!("call-{n}.json")))
    }

    fn fake_calls(&self) -> usize {
        (1..)
            .take_while(|n| self.log.join(format!("call-{n}.json")).exists())
            .count()
    }
}

fn json(p: &Path) -> Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{}: {e}\n{t}", p.display()))
}

fn turn_file(run: &Path, turn: u32, f: &str) -> PathBuf {
    run.join("turns").join(format!("{turn:02}")).join(f)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

/// train.py as the fake edits it: `num_workers=2` added after `shuffle=True,`.
fn with_num_workers_2() -> String {
    let t = example_train().replacen(
        "        shuffle=True,\n",
        "        shuffle=True, num_workers=2,\n",
        1,
    );
    assert_ne!(t, example_train());
    t
}

/// One turn of `mode` on a contract workspace: the run folder, the report's
/// row, the call record, and the project before and after.
struct OneTurn {
    ws: Ws,
    run: PathBuf,
    row: Value,
    call: Value,
    before: BTreeMap<String, Vec<u8>>,
}

fn one_turn(mode: &str, policy: &PolicyToml) -> OneTurn {
    let ws = Ws::contract(policy);
    let before = ws.files();
    let r = ws.start(mode);
    r.ok();
    let run = r.run_dir();
    let rep = json(&run.join("report.json"));
    let row = rep["turns"][0].clone();
    let call = json(&turn_file(&run, 1, "call.json"));
    OneTurn {
        ws,
        run,
        row,
        call,
        before,
    }
}

impl OneTurn {
    /// A turn that ends without the change: every byte of the project as before.
    fn assert_untouched(&self) {
        let now = self.ws.files();
        for (k, v) in &self.before {
            assert_eq!(
                now.get(k),
                Some(v),
                "{k} changed or vanished after the turn"
            );
        }
        let extra: Vec<&String> = now
            .keys()
            .filter(|k| !self.before.contains_key(*k))
            .collect();
        assert!(extra.is_empty(), "files left behind: {extra:?}");
    }

    fn assert_decision(&self, decision: &str, reason_has: &str) {
        assert_eq!(self.row["decision"], decision, "{:#}", self.row);
        let reason = self.row["reason"].as_str().unwrap();
        assert!(
            reason.contains(reason_has),
            "reason {reason:?} lacks {reason_has:?}"
        );
    }
}

/// The command line `policy show` prints last (its quoted procedure spans lines), split as a shell would.
fn shown_command_line(stdout: &str) -> Vec<String> {
    let start = shell_words::quote(&fake_claude().display().to_string()).into_owned();
    let at = stdout
        .lines()
        .scan(0, |off, l| {
            let here = *off;
            *off += l.len() + 1;
            Some((here, l))
        })
        .find(|(_, l)| l.starts_with(&start))
        .map(|(o, _)| o)
        .unwrap_or_else(|| panic!("no command line in\n{stdout}"));
    shell_words::split(stdout[at..].trim_end()).unwrap_or_else(|e| panic!("{e}: {}", &stdout[at..]))
}

fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie has finished; it only waits to be reaped.
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

fn assert_gone(pid: u32) {
    let t = Instant::now();
    while pid_alive(pid) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !pid_alive(pid),
        "process {pid} (started by the fake claude) outlived the call"
    );
}

// ------------------------------------------------------------ command line

#[test]
fn the_command_line_is_built_from_the_policy_exactly() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("agent", "max_turns", "5")
        .set("agent", "tools", r#"["Read", "Edit"]"#)
        .set(
            "agent",
            "allowed_tools",
            r#"["Read", "Edit(train.py)", "Bash(python bench_loader.py)"]"#,
        )
        .set(
            "agent",
            "disallowed_tools",
            r#"["Bash", "Write", "WebFetch"]"#,
        )
        .set("agent", "model", "\"sonnet\"")
        .set("agent", "max_budget_usd", "0.25")
        .set("agent", "permission_mode", "\"dontAsk\"")
        .set("agent", "extra_args", r#"["--no-session-persistence"]"#);
    let t = one_turn("edit:num_workers=2", &p);
    let run = &t.run;
    let prompt = std::fs::read_to_string(turn_file(run, 1, "prompt.md")).unwrap();
    // No CLAUDE.md in this workspace: the procedure goes in with --append-system-prompt.
    let procedure = tuneloop::agent::claude::procedure_block(tuneloop::cli::PROCEDURE_MD).unwrap();
    let expected: Vec<String> = [
        "-p",
        prompt.as_str(),
        "--output-format",
        "stream-json",
        "--verbose",
        "--max-turns",
        "5",
        "--permission-mode",
        "dontAsk",
        "--tools",
        "Read,Edit",
        "--allowedTools",
        "Read,Edit(train.py),Bash(python bench_loader.py)",
        "--disallowedTools",
        "Bash,Write,WebFetch",
        "--model",
        "sonnet",
        "--max-budget-usd",
        "0.25",
        "--append-system-prompt",
        procedure,
        "--no-session-persistence",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let fake = t.ws.fake_call(1);
    let got = strings(&fake["argv"]);
    assert_eq!(got[1..], expected[..], "the argv the CLI received");
    // argv.json records the same argv, program first.
    let recorded = strings(&json(&turn_file(run, 1, "argv.json")));
    assert_eq!(recorded, got);
    assert_eq!(Path::new(&recorded[0]), fake_claude());
    // It ran in the project folder, with the profiler table on stdin.
    let root = t.ws.path().canonicalize().unwrap();
    assert_eq!(Path::new(fake["cwd"].as_str().unwrap()), root);
    let table = std::fs::read_to_string(run.join("baseline/profile.txt")).unwrap();
    assert!(table.contains("data_wait"), "{table}");
    assert_eq!(fake["stdin"], table.as_str());
    assert_eq!(t.call["stdin"]["bytes"], table.len());
    assert_eq!(t.call["stdin"]["delivery"], "stdin");
    assert!(prompt.contains("The table follows this prompt"), "{prompt}");

    // `policy show` prints the same command line, prompt aside, ready to paste.
    let show = t.ws.tuneloop(&["policy", "show"], &[]);
    show.ok();
    let shown = shown_command_line(&show.stdout);
    assert_eq!(shown[1], "-p");
    assert!(shown[2].contains("prompts/turn.en.md"), "{}", shown[2]);
    assert_eq!(shown[3..], got[3..], "policy show and the real call differ");
    // Nothing risky; but `Bash(python bench_loader.py)` is dead here (Bash is
    // neither in `tools` nor undenied), and said so.
    let warnings: Vec<&str> = show
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 2, "{}", show.stderr);
    assert!(
        warnings
            .iter()
            .all(|w| w.contains("`Bash(python bench_loader.py)`") && w.contains("never applies")),
        "{}",
        show.stderr
    );

    // The correct edit was measured and kept: train.py has the one change.
    t.assert_decision("kept", "faster");
    assert_eq!(t.ws.read("train.py"), with_num_workers_2());
    assert_eq!(t.ws.read("data_utils.py"), DATA_UTILS);
    // The call's record: the result event as received, and what the report sums.
    let result = json(&turn_file(run, 1, "result.json"));
    assert_eq!(result["type"], "result");
    assert_eq!(t.call["session_id"], result["session_id"]);
    assert_eq!(t.call["num_turns"], result["num_turns"]);
    assert_eq!(t.call["total_cost_usd"], result["total_cost_usd"]);
    assert_eq!(t.call["exit_code"], 0);
    assert_eq!(t.call["success"], true);
    assert_eq!(t.call["init"]["tools"], serde_json::json!(["Read", "Edit"]));
    assert_eq!(t.row["agent"]["backend"], "claude");
    assert_eq!(t.row["agent"]["cost_usd"], result["total_cost_usd"]);
    assert_eq!(t.row["agent"]["num_turns"], result["num_turns"]);
    assert_eq!(t.row["agent"]["exit_code"], 0);
    let rep = json(&run.join("report.json"));
    assert_eq!(rep["total_cost_usd"], result["total_cost_usd"]);
    assert!(
        rep["agent_time_ms"].as_u64().unwrap() >= t.row["agent"]["duration_ms"].as_u64().unwrap()
    );
    // The raw stream is kept line for line, and tool calls were shown live.
    let raw = std::fs::read_to_string(turn_file(run, 1, "events.jsonl")).unwrap();
    assert!(raw.lines().next().unwrap().contains("\"subtype\":\"init\""));
    assert_eq!(
        serde_json::from_str::<Value>(raw.lines().last().unwrap()).unwrap(),
        result
    );
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    let tools: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "agent_tool")
        .collect();
    assert_eq!(
        tools
            .iter()
            .map(|e| e["tool"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["Read", "Edit"]
    );
    // Paths relative to the project, and what the edit changed.
    assert_eq!(tools[0]["input"], "train.py");
    assert_eq!(tools[1]["input"], "train.py: + `num_workers=2,`");
}

#[test]
fn turns_are_kept_reverted_and_no_change_and_each_prompt_carries_the_history() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("loop", "max_iterations", "3");
    let ws = Ws::contract(&p);
    // The workspace is the project and its CLAUDE.md carries the procedure:
    // Claude Code reads it by itself, so nothing is appended.
    ws.write(
        "CLAUDE.md",
        &format!("# notes\n\n{}", tuneloop::cli::PROCEDURE_MD),
    );
    let r = ws.start("edit:num_workers=2;edit:persistent_workers=True;nochange");
    r.ok();
    let run = r.run_dir();
    let rep = json(&run.join("report.json"));
    let decisions: Vec<&str> = rep["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, ["kept", "reverted", "no_change"], "{rep:#}");
    assert_eq!(rep["agent"], "claude");
    // Only the kept change is left.
    assert_eq!(ws.read("train.py"), with_num_workers_2());
    assert_eq!(ws.read("bench_loader.py"), BENCH_LOADER);
    for n in 1..=3 {
        let argv = strings(&ws.fake_call(n)["argv"]);
        assert!(
            !argv.contains(&"--append-system-prompt".to_string()),
            "call {n}: {argv:?}"
        );
    }
    let call1 = json(&turn_file(&run, 1, "call.json"));
    assert!(
        call1["procedure"].as_str().unwrap().contains("CLAUDE.md"),
        "{call1:#}"
    );
    // Each prompt names the turn, the incumbent, and what was tried.
    let prompt = |n| std::fs::read_to_string(turn_file(&run, n, "prompt.md")).unwrap();
    assert!(prompt(1).contains("Turn 1 of at most 3"), "{}", prompt(1));
    assert!(prompt(1).contains("100.0 samples/sec"), "{}", prompt(1));
    assert!(prompt(1).contains("nothing yet"), "{}", prompt(1));
    assert!(
        prompt(2).contains("300.0 samples/sec"),
        "incumbent after the kept turn:\n{}",
        prompt(2)
    );
    assert!(
        prompt(2).contains("- turn 1: num_workers (default) → 2 — kept, 100.0 → 300.0 samples/sec"),
        "{}",
        prompt(2)
    );
    assert!(
        prompt(2).contains("num_workers=2"),
        "the current call is shown:\n{}",
        prompt(2)
    );
    assert!(
        prompt(3).contains("- turn 2: persistent_workers (default) → True — reverted"),
        "{}",
        prompt(3)
    );
    // The no-change turn: recorded with the agent's own words.
    let agent3 = json(&turn_file(&run, 3, "agent.json"));
    assert!(
        agent3["summary"]
            .as_str()
            .unwrap()
            .contains("Shall I apply it?"),
        "{agent3:#}"
    );
    assert_eq!(agent3["failure"], Value::Null);
    // Costs and agent time are summed over the calls.
    let costs: Vec<f64> = (1..=3)
        .map(|n| {
            json(&turn_file(&run, n, "result.json"))["total_cost_usd"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let total = rep["total_cost_usd"].as_f64().unwrap();
    assert!(
        (total - costs.iter().sum::<f64>()).abs() < 1e-9,
        "{total} vs {costs:?}"
    );
    let times: u64 = rep["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["agent"]["duration_ms"].as_u64().unwrap())
        .sum();
    assert_eq!(rep["agent_time_ms"].as_u64().unwrap(), times);
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    for word in ["kept", "reverted", "claude"] {
        assert!(md.contains(word), "report.md lacks {word}:\n{md}");
    }
}

// ------------------------------------------------------------ misbehaviours: rejected

#[test]
fn two_arguments_at_once_are_rejected_and_reverted() {
    let _run = slot();
    let t = one_turn("two", &PolicyToml::new());
    t.assert_decision("rejected", "2 DataLoader arguments changed");
    assert_eq!(t.row["runs"], 0, "a rejected change is never measured");
    t.assert_untouched();
    assert!(std::fs::read_to_string(turn_file(&t.run, 1, "diff.patch"))
        .unwrap()
        .contains("pin_memory=True"));
}

#[test]
fn an_edit_outside_the_editable_files_is_rejected_and_undone() {
    let _run = slot();
    let t = one_turn("outside", &PolicyToml::new());
    t.assert_decision("rejected", "outside the editable files");
    assert!(
        t.row["reason"].as_str().unwrap().contains("data_utils.py"),
        "{:#}",
        t.row
    );
    // data_utils.py back byte for byte, the stray file gone, train.py as before.
    t.assert_untouched();
}

#[test]
fn an_edit_of_the_bench_script_is_rejected_and_undone() {
    let _run = slot();
    let t = one_turn("bench_script", &PolicyToml::new());
    t.assert_decision("rejected", "bench_loader.py");
    t.assert_untouched();
}

#[test]
fn a_new_file_is_rejected_and_removed() {
    let _run = slot();
    let t = one_turn("new_file", &PolicyToml::new());
    t.assert_decision("rejected", "fast_loader.py");
    t.assert_untouched();
}

#[test]
fn a_deleted_file_is_rejected_and_put_back() {
    let _run = slot();
    let t = one_turn("delete_file", &PolicyToml::new());
    t.assert_decision("rejected", "data_utils.py");
    t.assert_untouched();
}

#[test]
fn batch_size_is_part_of_the_measurement_and_never_kept() {
    let _run = slot();
    let t = one_turn("edit:batch_size=64", &PolicyToml::new());
    t.assert_decision("rejected", "`batch_size` is part of the measurement");
    assert_eq!(t.row["runs"], 0);
    t.assert_untouched();
}

#[test]
fn the_step_count_model_and_training_step_are_never_the_agents() {
    let _run = slot();
    // The measurement settings in the workspace's tuneloop.toml (inside the project here).
    let t = one_turn("config:timeout_s = 60->timeout_s = 5", &PolicyToml::new());
    t.assert_decision("rejected", "tuneloop.toml");
    t.assert_untouched();
    // The model and the training step in the editable file itself.
    let t = one_turn("replace:nn.ReLU()->nn.Identity()", &PolicyToml::new());
    t.assert_decision("rejected", "changed outside DataLoader arguments");
    t.assert_untouched();
    let t = one_turn("replace:lr=0.01->lr=0.1", &PolicyToml::new());
    t.assert_decision("rejected", "changed outside DataLoader arguments");
    t.assert_untouched();
}

#[test]
fn a_syntax_error_is_rejected_and_undone() {
    let _run = slot();
    let t = one_turn("syntax", &PolicyToml::new());
    t.assert_decision("rejected", "no longer parses");
    t.assert_untouched();
}

#[test]
fn a_call_that_changes_nothing_is_no_change_and_counts_toward_the_stop_rule() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("loop", "max_iterations", "5")
        .set("loop", "max_consecutive_reverts", "2");
    let ws = Ws::contract(&p);
    let before = ws.files();
    let r = ws.start("nochange");
    r.ok();
    let rep = json(&r.run_dir().join("report.json"));
    let turns = rep["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{rep:#}");
    assert!(
        turns.iter().all(|t| t["decision"] == "no_change"),
        "{rep:#}"
    );
    assert!(
        rep["stop_reason"]
            .as_str()
            .unwrap()
            .contains("2 turns in a row"),
        "{}",
        rep["stop_reason"]
    );
    assert_eq!(ws.files(), before);
    assert_eq!(ws.fake_calls(), 2);
}

// ------------------------------------------------------------ misbehaviours: failed

#[test]
fn a_hanging_call_is_ended_at_the_timeout_with_its_whole_group() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("agent", "timeout_s", "2");
    let t = one_turn("hang", &p);
    t.assert_decision("failed", "timed out after 2 s");
    assert_eq!(t.call["ending"], "timed_out");
    assert_eq!(t.row["agent"]["exit_code"], Value::Null);
    t.assert_untouched();
    // The grandchild ignored SIGTERM; the group's SIGKILL ended it.
    let pid: u32 = std::fs::read_to_string(t.ws.log.join("hang-child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(pid);
    // What the call printed before it hung is kept.
    let raw = std::fs::read_to_string(turn_file(&t.run, 1, "events.jsonl")).unwrap();
    assert!(raw.contains("\"name\":\"Edit\""), "{raw}");
}

#[test]
fn a_crash_fails_the_turn_with_the_clis_words() {
    let _run = slot();
    let t = one_turn("crash", &PolicyToml::new());
    t.assert_decision("failed", "crashed (exit 1)");
    t.assert_decision("failed", "TypeError: Cannot read properties of undefined");
    assert_eq!(t.row["agent"]["exit_code"], 1);
    assert!(std::fs::read_to_string(turn_file(&t.run, 1, "stderr.txt"))
        .unwrap()
        .contains("TypeError"));
    t.assert_untouched();
}

#[test]
fn a_call_killed_by_a_signal_fails_the_turn() {
    let _run = slot();
    let t = one_turn("abort", &PolicyToml::new());
    t.assert_decision("failed", "signal 6");
    assert_eq!(t.call["ending"], "signalled");
    t.assert_untouched();
}

#[test]
fn truncated_output_fails_the_turn_even_with_exit_zero() {
    let _run = slot();
    let t = one_turn("truncated", &PolicyToml::new());
    t.assert_decision("failed", "unreadable output");
    assert_eq!(t.call["exit_code"], 0);
    assert_eq!(t.call["events"]["not_json"], 1);
    t.assert_untouched();
}

#[test]
fn error_max_turns_fails_the_turn() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("agent", "max_turns", "3");
    let t = one_turn("max_turns", &p);
    t.assert_decision("failed", "Reached maximum number of turns (3)");
    t.assert_decision("failed", "error_max_turns");
    assert_eq!(t.call["terminal_reason"], "max_turns");
    t.assert_untouched();
}

#[test]
fn an_exhausted_budget_fails_the_turn() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("agent", "max_budget_usd", "0.5");
    let t = one_turn("budget", &p);
    t.assert_decision("failed", "Reached maximum budget ($0.5)");
    t.assert_decision("failed", "budget_exhausted");
    t.assert_untouched();
}

#[test]
fn not_logged_in_fails_the_turn_in_the_clis_words() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("loop", "max_iterations", "5");
    let t = one_turn("not_logged_in", &p);
    t.assert_decision("failed", "Not logged in · Please run /login");
    // Every later call would fail the same way: the run stops at once.
    let rep = json(&t.run.join("report.json"));
    assert_eq!(rep["turns"].as_array().unwrap().len(), 1);
    assert!(
        rep["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("the agent cannot work"),
        "{rep:#}"
    );
    assert_eq!(t.row["agent"]["exit_code"], 1);
    assert_eq!(t.call["is_error"], true);
    t.assert_untouched();
}

#[test]
fn a_cli_that_ignores_max_turns_is_ended() {
    let _run = slot();
    let mut p = PolicyToml::new();
    // A generous wall clock: the turn count must end it, long before.
    p.set("agent", "max_turns", "3")
        .set("agent", "timeout_s", "120");
    let t = one_turn("ignore_max_turns", &p);
    t.assert_decision("failed", "went on past --max-turns 3");
    assert_eq!(t.call["ending"], "ended_past_max_turns");
    assert!(
        t.row["agent"]["duration_ms"].as_u64().unwrap() < 60_000,
        "{:#}",
        t.row
    );
    t.assert_untouched();
}

// ------------------------------------------------------------ records

#[test]
fn permission_denials_are_recorded() {
    let _run = slot();
    // Bash exists but is not allowed: with dontAsk, its call is denied.
    let mut p = PolicyToml::new();
    p.set("agent", "tools", r#"["Read", "Edit", "Bash"]"#);
    let t = one_turn("deny_edit:num_workers=2", &p);
    // The edit itself went through and was kept.
    t.assert_decision("kept", "faster");
    let denials = t.call["permission_denials"].as_array().unwrap();
    assert_eq!(denials.len(), 1, "{:#}", t.call);
    assert_eq!(denials[0]["tool_name"], "Bash");
    assert_eq!(denials[0]["tool_input"]["command"], "python train.py");
    let agent = json(&turn_file(&t.run, 1, "agent.json"));
    assert!(
        agent["summary"]
            .as_str()
            .unwrap()
            .contains("permission denied: Bash"),
        "{agent:#}"
    );
}

#[test]
fn a_table_over_the_stdin_cap_is_passed_as_a_file() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("agent", "max_turns", "4");
    let ws = Ws::contract(&p);
    let pad = (10 * 1024 * 1024 + 4096).to_string();
    let r = ws.tuneloop(
        &["start", "--agent", "claude"],
        &[
            ("FAKE_CLAUDE_MODES", "edit:num_workers=2"),
            ("BENCH_TABLE_PAD", &pad),
        ],
    );
    r.ok();
    let run = r.run_dir();
    let call = json(&turn_file(&run, 1, "call.json"));
    assert_eq!(call["stdin"]["delivery"], "file", "{call:#}");
    assert_eq!(call["stdin"]["bytes"], 0);
    // Nothing was piped (the fake refuses more than 10 MB, like the CLI)...
    let fake = ws.fake_call(1);
    assert_eq!(fake["stdin_bytes"], 0);
    // ...the prompt names the file, which holds the whole table, and the agent may read its folder.
    let file = turn_file(&run, 1, "profile.txt");
    let prompt = std::fs::read_to_string(turn_file(&run, 1, "prompt.md")).unwrap();
    assert!(prompt.contains(&file.display().to_string()), "{prompt}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(run.join("baseline/profile.txt")).unwrap()
    );
    assert!(std::fs::metadata(&file).unwrap().len() > 10 * 1024 * 1024);
    let argv = strings(&fake["argv"]);
    let at = argv
        .iter()
        .position(|a| a == "--add-dir")
        .expect("--add-dir");
    assert_eq!(Path::new(&argv[at + 1]), turn_file(&run, 1, ""));
    assert_eq!(
        json(&run.join("report.json"))["turns"][0]["decision"],
        "kept"
    );
}

// ------------------------------------------------------------ before and around the loop

#[test]
fn a_missing_claude_fails_before_the_baseline_and_says_how_to_install_it() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("agent", "command", "\"claude-not-installed-anywhere\"");
    let ws = Ws::contract(&p);
    let before = ws.files();
    let r = ws.start("edit:num_workers=2");
    assert_eq!(r.code, 4, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("npm install -g @anthropic-ai/claude-code"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("--agent builtin"), "{}", r.stderr);
    // No run folder, no baseline: nothing was measured.
    let runs: Vec<_> = std::fs::read_dir(ws.path().join("runs"))
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(runs.is_empty(), "{runs:?}");
    assert_eq!(ws.files(), before);
}

#[test]
fn ctrl_c_during_a_call_ends_it_restores_the_files_and_exits_130() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("agent", "timeout_s", "300");
    let ws = Ws::contract(&p);
    let before = ws.files();
    let mut child = ws
        .command(
            &["start", "--agent", "claude"],
            &[("FAKE_CLAUDE_MODES", "hang")],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = ws.log.join("hang-ready");
    let t = Instant::now();
    while !ready.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the fake never started hanging"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "tuneloop ended before the call hung"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The fake has edited train.py and hangs; Ctrl-C reaches tuneloop.
    assert_ne!(ws.read("train.py"), example_train());
    let pid = child.id() as libc::pid_t;
    // SAFETY: sends SIGINT to the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let r = Run::from(child.wait_with_output().unwrap());
    assert_eq!(r.code, 130, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert_eq!(ws.files(), before, "the incumbent's files are back");
    let run = r.run_dir();
    assert_eq!(json(&run.join("run.json"))["state"], "interrupted");
    let call = json(&turn_file(&run, 1, "call.json"));
    assert_eq!(call["ending"], "interrupted");
    assert!(std::fs::read_to_string(run.join("events.jsonl"))
        .unwrap()
        .contains("\"interrupted\""));
    let grandchild: u32 = std::fs::read_to_string(ws.log.join("hang-child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(grandchild);
}

#[test]
fn policy_show_prints_the_command_line_and_warns_about_rules_that_give_too_much() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set(
        "agent",
        "allowed_tools",
        r#"["Read", "Edit", "Bash", "Write"]"#,
    )
    .set("agent", "permission_mode", "\"bypassPermissions\"");
    let ws = Ws::contract(&p);
    let r = ws.tuneloop(&["policy", "show"], &[]);
    r.ok();
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 7, "{}", r.stderr);
    assert!(
        warnings[0].contains("`Bash`") && warnings[1].contains("`Write`"),
        "{warnings:#?}"
    );
    assert!(warnings[2].contains("bypassPermissions"), "{warnings:#?}");
    // Then the dead rules: neither is in `tools`, and the default deny list
    // removes both.
    for (tool, why) in [
        ("Bash", "is not in tools"),
        ("Bash", "disallowed_tools has `Bash`"),
        ("Write", "is not in tools"),
        ("Write", "disallowed_tools has `Write`"),
    ] {
        assert!(
            warnings[3..]
                .iter()
                .any(|w| w.contains(&format!("allowed_tools has `{tool}`, but"))
                    && w.contains(why)
                    && w.contains("never applies")),
            "{tool} {why}: {warnings:#?}"
        );
    }
    let argv = shown_command_line(&r.stdout);
    let at = |f: &str| argv[argv.iter().position(|a| a == f).unwrap() + 1].clone();
    assert_eq!(at("--allowedTools"), "Read,Edit,Bash,Write");
    assert_eq!(at("--permission-mode"), "bypassPermissions");
    // The policy as loaded is printed too.
    assert!(
        r.stdout.contains("permission_mode = \"bypassPermissions\""),
        "{}",
        r.stdout
    );
}

// ------------------------------------------------------------ real PyTorch

#[test]
fn tampering_with_the_managed_harness_is_rejected_and_undone() {
    let _run = slot();
    let ws = Ws::managed(&PolicyToml::new());
    let before = ws.files();
    let r = ws.start("harness");
    r.ok();
    let run = r.run_dir();
    let rep = json(&run.join("report.json"));
    assert_eq!(rep["turns"][0]["decision"], "rejected", "{rep:#}");
    assert!(
        rep["turns"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("harness was modified"),
        "{rep:#}"
    );
    assert_eq!(
        std::fs::read_to_string(run.join("harness/tuneloop_harness.py")).unwrap(),
        tuneloop::bench::HARNESS_PY
    );
    assert_eq!(ws.files(), before);
}

#[test]
fn a_multi_turn_run_on_the_example_with_real_pytorch() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("loop", "max_iterations", "3")
        .set("agent", "tools", r#"["Read", "Edit", "Bash"]"#);
    let ws = Ws::managed(&p);
    let before = ws.files();
    // Turn 3 writes 4 workers: a second argument whether turn 1 kept 2 or not.
    let r = ws.start("deny_edit:num_workers=2;nochange;two:num_workers=4");
    r.ok();
    let run = r.run_dir();
    let rep = json(&run.join("report.json"));
    let turns = rep["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{rep:#}");
    // Turn 1 was measured against the incumbent, interleaved, and decided by the rule.
    let t1 = &turns[0];
    assert!(
        ["kept", "reverted"].contains(&t1["decision"].as_str().unwrap()),
        "{t1:#}"
    );
    assert!(
        t1["runs"].as_u64().unwrap() >= 4 && t1["after_sps"].as_f64().unwrap() > 0.0,
        "{t1:#}"
    );
    assert_eq!(t1["change"], "num_workers (default) → 2");
    assert_eq!(turns[1]["decision"], "no_change");
    assert_eq!(turns[2]["decision"], "rejected");
    // The project ends as the incumbent: the kept change, or nothing.
    let expected = if t1["decision"] == "kept" {
        with_num_workers_2()
    } else {
        example_train()
    };
    assert_eq!(ws.read("train.py"), expected);
    assert_eq!(
        std::fs::read_to_string(run.join("incumbent/train.py")).unwrap(),
        expected
    );
    let now = ws.files();
    assert_eq!(
        now.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    // The agent got the real profiler table on stdin and the real figures in its prompt.
    let table = std::fs::read_to_string(run.join("baseline/profile.txt")).unwrap();
    assert!(
        table.contains("train_step") && table.contains("CPU total"),
        "{table}"
    );
    assert_eq!(ws.fake_call(1)["stdin"], table.as_str());
    let prompt1 = std::fs::read_to_string(turn_file(&run, 1, "prompt.md")).unwrap();
    let baseline = format!("{:.1} samples/sec", rep["baseline_sps"].as_f64().unwrap());
    assert!(prompt1.contains(&baseline), "{baseline} not in\n{prompt1}");
    assert!(prompt1.contains("CPU cores: "), "{prompt1}");
    assert!(!prompt1.contains("CPU cores: unknown"), "{prompt1}");
    let prompt3 = std::fs::read_to_string(turn_file(&run, 3, "prompt.md")).unwrap();
    assert!(
        prompt3.contains("- turn 2: (no change proposed) — no change"),
        "{prompt3}"
    );
    // The report shows the agent's turns, costs and decisions.
    let costs: Vec<f64> = (1..=3)
        .map(|n| {
            json(&turn_file(&run, n, "result.json"))["total_cost_usd"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert!((rep["total_cost_usd"].as_f64().unwrap() - costs.iter().sum::<f64>()).abs() < 1e-9);
    for (t, c) in turns.iter().zip(&costs) {
        assert_eq!(t["agent"]["backend"], "claude");
        assert_eq!(t["agent"]["cost_usd"].as_f64().unwrap(), *c);
        assert!(t["agent"]["num_turns"].as_u64().unwrap() >= 1);
    }
    let denials = &json(&turn_file(&run, 1, "call.json"))["permission_denials"];
    assert_eq!(denials[0]["tool_name"], "Bash");
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(md.contains("claude") && md.contains("rejected"), "{md}");
}

// ------------------------------------------------------------ issue 15

/// Milliseconds as the prompt writes them (a second decimal below 1 ms).
fn ms(seconds: f64) -> String {
    let v = seconds * 1e3;
    if v.abs() < 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// The lines the prompt's diagnosis must hold for incumbent measurement `m`
/// (a harness JSON object) at `sps` samples/sec, computed here from the
/// figures themselves rather than by tuneloop's code.
fn expected_diagnosis(m: &Value, sps: f64, ceiling: f64) -> Vec<String> {
    let f = |k: &str| {
        m[k].as_f64()
            .unwrap_or_else(|| panic!("{k} missing in the measurement {m:#}"))
    };
    let steps = f("steps");
    let (dw, train) = (f("data_wait_s") / steps, f("train_step_s") / steps);
    let wall = f("wall_s");
    let workers = m["loader"]["num_workers"].as_u64().unwrap_or(0);
    let per_batch = if workers == 0 {
        format!("loading one takes {} inside the training process", ms(dw))
    } else {
        format!(
            "one worker takes {} to produce a batch ({workers} workers)",
            ms(workers as f64 * (dw + train))
        )
    };
    vec![
        format!(
            "- ceiling: {ceiling:.1} samples/sec (the training step alone, fed one batch from memory); the incumbent is at {:.1}% of it",
            sps / ceiling * 100.0
        ),
        format!(
            "- the step now: {} = data_wait {} + train_step {}",
            ms(dw + train),
            ms(dw),
            ms(train)
        ),
        format!("- per batch: {per_batch}"),
        format!(
            "- CPU busy (cores, over the timed steps): loader {:.2}, training process {:.2}, whole machine {:.2} of {}",
            f("loader_cpu_s") / wall,
            f("main_cpu_s") / wall,
            f("machine_busy_s") / wall,
            m["cpu_count"].as_u64().unwrap()
        ),
        format!(
            "the median step waits {}, the mean {}",
            ms(f("data_wait_step_median_s")),
            ms(dw)
        ),
    ]
}

#[test]
fn the_prompt_carries_the_incumbents_figures_from_its_bench_json() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("loop", "max_iterations", "2");
    p.set("decision", "baseline_runs", "3");
    let ws = Ws::managed(&p);
    let r = ws.start("edit:num_workers=2;nochange");
    r.ok();
    let run = r.run_dir();
    let rep = json(&run.join("report.json"));
    let baseline = json(&run.join("baseline/bench.json"));
    // Every baseline run measures the step alone; the ceiling is their median.
    let mut ceilings: Vec<f64> = baseline["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["ceiling_sps"].as_f64().unwrap())
        .collect();
    assert_eq!(ceilings.len(), 3, "{baseline:#}");
    ceilings.sort_by(f64::total_cmp);
    let ceiling = ceilings[1];
    assert_eq!(rep["ceiling_sps"].as_f64(), Some(ceiling));
    // Turn 1 tries to beat the baseline: its last run, at the baseline's median.
    let mut incumbent = baseline["runs"].as_array().unwrap().last().unwrap().clone();
    let mut sps = rep["baseline_sps"].as_f64().unwrap();
    let prompt1 = std::fs::read_to_string(turn_file(&run, 1, "prompt.md")).unwrap();
    for line in expected_diagnosis(&incumbent, sps, ceiling) {
        assert!(prompt1.contains(&line), "{line:?} not in\n{prompt1}");
    }
    assert!(
        prompt1.contains("about ") && prompt1.contains(" workers keep up"),
        "{prompt1}"
    );
    // Turn 2 tries to beat turn 1's candidate if it was kept: its last run, at its median.
    let t1 = &rep["turns"][0];
    if t1["decision"] == "kept" {
        let b1 = json(&turn_file(&run, 1, "bench.json"));
        incumbent = b1["candidate"].as_array().unwrap().last().unwrap().clone();
        sps = t1["after_sps"].as_f64().unwrap();
        assert_eq!(incumbent["loader"]["num_workers"], 2);
    }
    let prompt2 = std::fs::read_to_string(turn_file(&run, 2, "prompt.md")).unwrap();
    for line in expected_diagnosis(&incumbent, sps, ceiling) {
        assert!(prompt2.contains(&line), "{line:?} not in\n{prompt2}");
    }
    // Each allowed knob gets its bound; pin_memory cannot matter without CUDA.
    for k in ["num_workers", "prefetch_factor", "persistent_workers"] {
        assert!(prompt2.contains(&format!("  - `{k}`: ")), "{k}: {prompt2}");
    }
    assert!(
        prompt2.contains("  - `pin_memory`: nothing: no CUDA device"),
        "{prompt2}"
    );
    // `tuneloop show RUN 2` shows the prompt as the agent saw it.
    let show = ws.tuneloop(&["show", run.to_str().unwrap(), "2"], &[]);
    show.ok();
    assert!(show.stdout.contains(prompt2.trim_end()), "{}", show.stdout);
    // What the fake received is that prompt, right after -p.
    assert_eq!(strings(&ws.fake_call(2)["argv"])[2], prompt2);
}

#[test]
fn a_hybrid_run_spends_no_claude_call_until_the_knobs_are_settled() {
    let _run = slot();
    // The bundled example is storage-bound: the builtin agent climbs
    // num_workers; only then does Claude Code get the structural turns. No
    // data_wait is too small to stop on, so the loop goes on to Claude.
    let mut p = PolicyToml::new();
    p.set("agent", "backend", "\"hybrid\"")
        // Room for every builtin turn the noise may bring (the climb, the
        // threaded turn, cheaper neighbours), and no streak rule that could
        // end the run before Claude's turn: Claude's turns add no measurement.
        .set("loop", "max_iterations", "10")
        .set("loop", "max_consecutive_reverts", "0")
        .set("loop", "knobs", r#"["num_workers", "preprocessing"]"#)
        .set("decision", "stop_when_data_wait_below", "0.0")
        // The loader's knobs only: the builtin part's compute turns (on by
        // default) would come before Claude's too, each measured with real
        // PyTorch, and are shown in the contract-mode hybrid run below.
        .set("compute", "knobs", "[]");
    let ws = Ws::managed(&p);
    let r = ws.tuneloop(&["start"], &[("FAKE_CLAUDE_MODES", "nochange")]);
    r.ok();
    let run = r.run_dir();
    let rep = json(&run.join("report.json"));
    assert_eq!(rep["agent"], "hybrid");
    let turns = rep["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 10, "{rep:#}");
    let backends: Vec<&str> = turns
        .iter()
        .map(|t| t["agent"]["backend"].as_str().unwrap())
        .collect();
    let builtin = backends.iter().take_while(|b| **b == "builtin").count();
    assert!(builtin >= 1, "{backends:?}");
    assert!(
        backends[builtin..].iter().all(|b| *b == "claude") && builtin < backends.len(),
        "builtin turns first, then Claude's: {:?}",
        turns
            .iter()
            .map(|t| format!(
                "{} {} {}",
                t["agent"]["backend"], t["change"], t["decision"]
            ))
            .collect::<Vec<_>>()
    );
    // The core count, or the count the baseline's figures predict.
    assert!(
        turns[0]["change"]
            .as_str()
            .unwrap()
            .starts_with("num_workers (default) → "),
        "{rep:#}"
    );
    // One Claude call per Claude turn, none before the knobs were settled.
    assert_eq!(ws.fake_calls(), backends.len() - builtin);
    for n in 1..=builtin as u32 {
        let prompt = std::fs::read_to_string(turn_file(&run, n, "prompt.md")).unwrap();
        assert!(prompt.starts_with("(builtin agent: no prompt)"), "{prompt}");
    }
    // The first Claude prompt: every builtin turn in its history, only the
    // structural knob on offer, the figures of the incumbent it must beat.
    let first = builtin as u32 + 1;
    let prompt = std::fs::read_to_string(turn_file(&run, first, "prompt.md")).unwrap();
    for t in &turns[..builtin] {
        let line = format!("- turn {}: {}", t["turn"], t["change"].as_str().unwrap());
        assert!(prompt.contains(&line), "{line} not in\n{prompt}");
    }
    assert!(prompt.contains("1. `preprocessing`"), "{prompt}");
    assert!(!prompt.contains("1. `num_workers`"), "{prompt}");
    assert!(
        prompt.contains("- ceiling: ") && prompt.contains("per batch: "),
        "{prompt}"
    );
    // The costs: each call's, summed, and per point of speed-up.
    let costs: Vec<f64> = (first..=turns.len() as u32)
        .map(|n| {
            json(&turn_file(&run, n, "result.json"))["total_cost_usd"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let total = costs.iter().sum::<f64>();
    assert!(total > 0.0);
    assert!(
        (rep["total_cost_usd"].as_f64().unwrap() - total).abs() < 1e-9,
        "{rep:#}"
    );
    let agents = rep["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("no agents in {rep:#}"));
    assert_eq!(agents.len(), 2, "{rep:#}");
    assert_eq!(agents[0]["backend"], "builtin");
    assert_eq!(agents[0]["cost_usd"].as_f64(), Some(0.0));
    assert_eq!(agents[1]["backend"], "claude");
    assert!((agents[1]["cost_usd"].as_f64().unwrap() - total).abs() < 1e-9);
    let claude_turns: Vec<u64> = (first as u64..=turns.len() as u64).collect();
    assert_eq!(agents[1]["turns"], serde_json::json!(claude_turns));
    let speedup = rep["speedup"].as_f64().unwrap();
    match rep["cost_per_point_usd"].as_f64() {
        Some(c) => assert!((c - total / ((speedup - 1.0) * 100.0)).abs() < 1e-9),
        None => assert!(speedup <= 1.0, "{rep:#}"),
    }
    for f in ["report.md", "report.html"] {
        let text = std::fs::read_to_string(run.join(f)).unwrap();
        assert!(
            text.contains(&format!("claude turns {first}–"))
                || text.contains(&format!("claude turns {first} (")),
            "{f}:\n{text}"
        );
    }
}

#[test]
fn a_hybrid_run_without_preprocessing_never_calls_claude_and_says_why_it_stopped() {
    let _run = slot();
    // Contract mode: the figure follows num_workers, so the builtin agent
    // climbs until its cap. Claude Code is not even installed. The policy
    // says claude; `--agent hybrid` overrides it.
    let mut p = PolicyToml::new();
    p.set("agent", "command", "\"./no-such-claude\"")
        .set("loop", "max_iterations", "8")
        .set("loop", "knobs", r#"["num_workers"]"#);
    let ws = Ws::contract(&p);
    let r = ws.tuneloop(&["start", "--agent", "hybrid"], &[]);
    r.ok();
    let rep = json(&r.run_dir().join("report.json"));
    assert_eq!(rep["agent"], "hybrid");
    let turns = rep["turns"].as_array().unwrap();
    assert!(!turns.is_empty(), "{rep:#}");
    assert!(
        turns.iter().all(|t| t["agent"]["backend"] == "builtin"),
        "{rep:#}"
    );
    assert_eq!(ws.fake_calls(), 0);
    // The builtin part made the compute turns too (on by default), and the
    // stop says so after why Claude Code got none.
    let stop = rep["stop_reason"].as_str().unwrap();
    assert!(
        stop.starts_with(
            "candidates exhausted: the knobs are settled, and structural changes need `preprocessing` in [loop] knobs; every compute change was tried ("
        ),
        "{stop}"
    );
}

#[test]
fn a_deny_rule_that_kills_an_allowed_rule_is_named_by_policy_show_and_start() {
    let _run = slot();
    // The issue's policy: Bash(python bench_loader.py) allowed, bare Bash
    // denied by default — observed with the real CLI to leave no Bash tool.
    let mut p = PolicyToml::new();
    p.set("agent", "tools", r#"["Read", "Edit", "Bash"]"#).set(
        "agent",
        "allowed_tools",
        r#"["Read", "Edit(train.py)", "Bash(python bench_loader.py)"]"#,
    );
    let ws = Ws::contract(&p);
    // The warning points at the line of the allowed rule that never applies.
    let line = ws
        .read("policies/default.toml")
        .lines()
        .position(|l| l.contains("\"Bash(python bench_loader.py)\""))
        .unwrap()
        + 1;
    let at = format!("policies/default.toml:{line}:");
    let check = |stderr: &str| {
        let w: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("warning:") && l.contains("never applies"))
            .collect();
        assert_eq!(w.len(), 1, "{stderr}");
        for want in [
            at.as_str(),
            "`Bash(python bench_loader.py)`",
            "disallowed_tools has `Bash`",
            "drop `Bash` from disallowed_tools",
        ] {
            assert!(w[0].contains(want), "{want} not in {}", w[0]);
        }
    };
    let show = ws.tuneloop(&["policy", "show"], &[]);
    show.ok();
    check(&show.stderr);
    let start = ws.start("edit:num_workers=2");
    start.ok();
    check(&start.stderr);
    // The other cases, each named with its fix.
    let mut p = PolicyToml::new();
    p.set("agent", "tools", r#"["Read", "Edit"]"#)
        .set(
            "agent",
            "allowed_tools",
            r#"["Read", "Edit(train.py)", "Bash(python bench_loader.py)", "Grpe"]"#,
        )
        .set("agent", "disallowed_tools", r#"["Edit(*.py)", "WebFetch"]"#);
    ws.write("policies/default.toml", &p.render());
    let show = ws.tuneloop(&["policy", "show"], &[]);
    show.ok();
    let stderr = &show.stderr;
    for want in [
        "`Bash(python bench_loader.py)`, but `Bash` is not in tools (Read, Edit)",
        "add \"Bash\" to tools",
        "`Edit(train.py)`, but disallowed_tools has `Edit(*.py)`, which covers it",
        "narrow `Edit(*.py)`",
        "allowed_tools has `Grpe`: Claude Code has no tool `Grpe`",
        "did you mean `Grep`?",
    ] {
        assert!(stderr.contains(want), "{want} not in\n{stderr}");
    }
    // The default policy has nothing dead.
    ws.write("policies/default.toml", &PolicyToml::new().render());
    let show = ws.tuneloop(&["policy", "show"], &[]);
    assert!(!show.stderr.contains("warning"), "{}", show.stderr);
}

#[test]
fn tuneloop_started_inside_a_claude_code_session_still_starts_claude() {
    let _run = slot();
    let parent = [
        ("CLAUDECODE", "1"),
        ("CLAUDE_CODE_ENTRYPOINT", "cli"),
        ("ANTHROPIC_API_KEY", "sk-ant-test-not-a-key"),
        ("FAKE_CLAUDE_NESTED_GUARD", "1"),
    ];
    // The fake refuses a nested start, like CLI 2.1.39 and later.
    let refused = Command::new(fake_claude())
        .args(["-p", "hi", "--output-format", "stream-json", "--verbose"])
        .envs(parent)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("cannot be launched inside another Claude Code session"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    // tuneloop under the same environment: the call runs and the turn is kept.
    let ws = Ws::contract(&PolicyToml::new());
    let mut env: Vec<(&str, &str)> = parent.to_vec();
    env.push(("FAKE_CLAUDE_MODES", "edit:num_workers=2"));
    let r = ws.tuneloop(&["start", "--agent", "claude"], &env);
    r.ok();
    let run = r.run_dir();
    let rep = json(&run.join("report.json"));
    assert_eq!(rep["turns"][0]["decision"], "kept", "{rep:#}");
    let seen = strings(&ws.fake_call(1)["env_names"]);
    assert!(
        !seen
            .iter()
            .any(|k| k == "CLAUDECODE" || k == "CLAUDE_CODE_ENTRYPOINT"),
        "{seen:?}"
    );
    // Authentication is the user's, and passes through.
    assert!(seen.contains(&"ANTHROPIC_API_KEY".to_string()), "{seen:?}");
    let call = json(&turn_file(&run, 1, "call.json"));
    assert_eq!(
        strings(&call["env_removed"]),
        ["CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"]
    );
}

/// Fewer workers than the incumbent is a cheaper change: decided by the
/// equivalence rule (kept when no more than min_gain slower), with real
/// PyTorch. Which way it goes depends on this machine, so the test checks
/// the rule that was applied and that each outcome is carried through.
#[test]
fn fewer_workers_are_judged_by_the_equivalence_rule() {
    let _run = slot();
    let mut p = PolicyToml::new();
    p.set("decision", "max_repeats", "4");
    let ws = Ws::managed(&p);
    let four = with_num_workers_2().replacen("num_workers=2", "num_workers=4", 1);
    ws.write("train.py", &four);
    let r = ws.start("edit:num_workers=3");
    r.ok();
    let run = r.run_dir();
    let rep = json(&run.join("report.json"));
    let t1 = &rep["turns"][0];
    assert_eq!(t1["change"], "num_workers 4 → 3", "{t1:#}");
    let reason = t1["reason"].as_str().unwrap();
    assert!(reason.starts_with("cheaper"), "{reason}");
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    match t1["decision"].as_str().unwrap() {
        "kept_cheaper" => {
            assert!(reason.contains("within min_gain"), "{reason}");
            assert!(md.contains("| kept (cheaper, within min_gain) |"), "{md}");
            assert_eq!(
                ws.read("train.py"),
                four.replacen("num_workers=4", "num_workers=3", 1)
            );
        }
        "reverted" => assert_eq!(ws.read("train.py"), four),
        other => panic!("decision {other}: {t1:#}"),
    }
    // The agent's evidence names the limits, from the harness's own figures.
    let prompt = std::fs::read_to_string(turn_file(&run, 1, "prompt.md")).unwrap();
    assert!(
        prompt.contains("- limits no DataLoader setting passes: step alone "),
        "{prompt}"
    );
    assert!(prompt.contains("what the cores can feed"), "{prompt}");
}

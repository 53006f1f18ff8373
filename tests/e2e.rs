//! End-to-end: the real binary on temporary workspaces with real PyTorch (CPU).

use crate::support::*;
use serde_json::Value;

/// The plain view's turn line carries the estimate.
fn says_the_time_left(stderr: &str) -> bool {
    stderr
        .lines()
        .any(|l| l.contains("turn 1: incumbent") && l.contains("estimate: about"))
}

fn json_file(p: &std::path::Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

#[test]
fn a_real_gain_is_kept_and_the_run_folder_is_complete() {
    let _run = slot();
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    let before = ws.read("train.py");
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let dir = r.run_dir();
    for f in [
        "run.json",
        "events.jsonl",
        "baseline/profile.txt",
        "baseline/bench.json",
        "baseline/files/train.py",
        "incumbent/train.py",
        "turns/01/prompt.md",
        "turns/01/agent.json",
        "turns/01/diff.patch",
        "turns/01/bench.json",
        "turns/01/decision.json",
        "report.md",
        "report.json",
        "report.html",
        "plot.svg",
        "final.json",
    ] {
        assert!(
            dir.join(f).is_file(),
            "missing {f} in {}\nstderr:\n{}",
            dir.display(),
            r.stderr
        );
    }
    let rep = json_file(&dir.join("report.json"));
    assert_eq!(rep["turns"][0]["decision"], "kept", "{rep:#}");
    // The count the baseline's figures predict (items wait 64 ms a batch on
    // a step under a millisecond: the cap, 16 on 2 cores), at least the cores.
    let change = rep["turns"][0]["change"].as_str().unwrap();
    let workers: u32 = change
        .strip_prefix("num_workers (default) → ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{change}"));
    assert!(workers >= 2, "{change}");
    let line = format!("num_workers={workers},");
    // The kept change stays in the file, and it is the only change.
    let after = ws.read("train.py");
    assert_eq!(
        after,
        before.replace(
            "        shuffle=True,\n",
            &format!("        shuffle=True,\n        {line}\n")
        )
    );
    assert!(rep["speedup"].as_f64().unwrap() > 1.3, "{rep:#}");
    assert!(rep["ceiling_sps"].as_f64().unwrap() > rep["baseline_sps"].as_f64().unwrap());
    for key in [
        "schema_version",
        "run_id",
        "baseline_sps",
        "final_sps",
        "stop_reason",
    ] {
        assert!(!rep[key].is_null(), "report.json lacks {key}");
    }
    let ci = rep["turns"][0]["ratio_ci"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() > 1.01);
    // How much of the wall time was measuring: the throughput runs' timed
    // steps, a part of the session's wall time; turn 1's seconds from the log.
    let time = &rep["time"];
    let (measured, wall) = (
        time["measured_s"].as_f64().unwrap(),
        time["wall_s"].as_f64().unwrap(),
    );
    assert!(measured > 0.0 && measured < wall, "{time:#}");
    assert_eq!(time["bench_runs"], rep["bench_runs"]);
    let measured_runs = time["measured_runs"].as_u64().unwrap();
    assert!(measured_runs > 0 && measured_runs < rep["bench_runs"].as_u64().unwrap());
    assert_eq!(time["turns"][0]["turn"], 1, "{time:#}");
    assert!(time["turns"][0]["s"].as_f64().unwrap() > 0.0);
    // The baseline files are saved byte for byte; the diff names the change.
    assert_eq!(
        std::fs::read_to_string(dir.join("baseline/files/train.py")).unwrap(),
        before
    );
    assert!(std::fs::read_to_string(dir.join("turns/01/diff.patch"))
        .unwrap()
        .contains(&format!("+        {line}")));
    // The events log is complete JSON lines in order.
    let events: Vec<Value> = std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.first().unwrap()["event"], "run_started");
    assert!(events.iter().any(|e| e["event"] == "turn_decided"));
    // Turn 1 starts with the estimate of the time left, from the baseline's runs.
    let started = events
        .iter()
        .find(|e| e["event"] == "turn_started")
        .unwrap();
    let left = &started["time_left"];
    assert!(left["run_s"].as_f64().unwrap() > 0.0, "{started}");
    assert!(
        left["at_most_s"].as_f64().unwrap() >= left["about_s"].as_f64().unwrap(),
        "{started}"
    );
    assert!(says_the_time_left(&r.stderr), "{}", r.stderr);
    assert_eq!(events.last().unwrap()["event"], "report_written");
    // The harness never lands in the project.
    assert!(!ws.path().join("tuneloop_harness.py").exists());
    assert!(dir.join("harness/tuneloop_harness.py").exists());
    // The table is printed at the end; report/runs/show read the folder.
    assert!(
        r.stdout.contains(&format!("| 1 | {change} |")),
        "{}",
        r.stdout
    );
    let rep_md = ws.tuneloop(&["report"]);
    assert_eq!(rep_md.code, 0);
    assert!(rep_md.stdout.contains(change));
    let rep_json = ws.tuneloop(&["report", "--format", "json"]);
    let parsed: Value = serde_json::from_str(&rep_json.stdout).unwrap();
    assert_eq!(parsed["run_id"], rep["run_id"]);
    let runs = ws.tuneloop(&["runs", "--json"]);
    let runs: Value = serde_json::from_str(&runs.stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!(runs[0]["turns"], 1);
    let show = ws.tuneloop(&["show", rep["run_id"].as_str().unwrap(), "1"]);
    assert_eq!(show.code, 0);
    assert!(
        show.stdout.contains(&format!("+        {line}")),
        "{}",
        show.stdout
    );
    let show_json = ws.tuneloop(&["show", rep["run_id"].as_str().unwrap(), "1", "--json"]);
    let turn: Value = serde_json::from_str(&show_json.stdout).unwrap();
    assert_eq!(turn["turn"], 1);
    assert!(turn["diff"]
        .as_str()
        .unwrap()
        .contains(&format!("+        {line}")));
    // restore --to baseline puts the original bytes back, --to best the tuned ones.
    assert_eq!(ws.tuneloop(&["restore", "--to", "baseline"]).code, 0);
    assert_eq!(ws.read("train.py"), before);
    assert_eq!(ws.tuneloop(&["restore", "--to", "best"]).code, 0);
    assert_eq!(ws.read("train.py"), after);
    // The lock is gone after the run.
    assert!(!ws.path().join("runs/.lock").exists());
}

/// Items are cheap in the training process but slow in a worker process, so
/// adding workers is a clear loss.
const WORKERS_HURT_TRAIN: &str = r#"import time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Items(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        time.sleep(0.03 if get_worker_info() is not None else 0.002)
        return torch.full((8,), float(i)), i % 2


def build():
    loader = DataLoader(Items(), batch_size=8)  # one line
    model = nn.Linear(8, 2)
    return {"loader": loader, "model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=0.1)}
"#;

#[test]
fn a_slower_change_is_reverted_byte_for_byte() {
    let _run = slot();
    // The loader's climb and its stop reason are the subject: the compute
    // turns (on by default) would follow the settled loader.
    let ws = Ws::managed(
        WORKERS_HURT_TRAIN,
        "",
        &format!(
            "{}{COMPUTE_OFF}",
            // Two baseline runs: the final row below is their median run.
            FAST_POLICY
                .replace("max_iterations = 1", "max_iterations = 3")
                .replace("baseline_runs = 1", "baseline_runs = 2")
        ),
    );
    let before = std::fs::read(ws.path().join("train.py")).unwrap();
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        std::fs::read(ws.path().join("train.py")).unwrap(),
        before,
        "reverted file differs"
    );
    let rep = json_file(&r.run_dir().join("report.json"));
    let turns = rep["turns"].as_array().unwrap();
    assert_eq!(turns[0]["decision"], "reverted", "{rep:#}");
    assert!(turns[0]["ratio"].as_f64().unwrap() < 1.0);
    // The first count is the core count (2 here) or, where the baseline's
    // figures predict more, a jump past it; a jump not kept leads to the
    // core count once, which loses too. Climbing stops at that loss, and
    // with no workers the later knobs do not apply.
    let first = turns[0]["change"].as_str().unwrap();
    match turns.len() {
        1 => assert!(first.ends_with("→ 2"), "{first}"),
        2 => {
            assert!(!first.ends_with("→ 2"), "{first}");
            let second = turns[1]["change"].as_str().unwrap();
            assert!(second.ends_with("→ 2"), "{second}");
            assert_eq!(turns[1]["decision"], "reverted", "{rep:#}");
        }
        n => panic!("{n} turns: {rep:#}"),
    }
    // The stop reason names the limit that binds and the incumbent's share of it.
    let stop = rep["stop_reason"].as_str().unwrap();
    assert!(stop.starts_with("candidates exhausted; "), "{stop}");
    assert!(stop.contains(" binds at "), "{stop}");
    assert!(rep["limits"]["binding"].is_string(), "{rep:#}");
    assert!(
        rep["limits"]["cpu_limit_sps"].as_f64().unwrap() > 0.0,
        "{rep:#}"
    );
    assert_eq!(rep["speedup"].as_f64().unwrap(), 1.0);
    // Nothing kept: the final state is the baseline's, and its row in
    // "Memory and CPU by state" is the same median run of the same runs.
    let costs = &rep["costs"];
    assert_eq!(costs["final"], costs["baseline"], "{costs:#}");
    assert_eq!(costs["final"]["runs"], 2, "{costs:#}");
}

const CRASHES_IN_WORKERS_TRAIN: &str = r#"import time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Items(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        if get_worker_info() is not None:
            raise RuntimeError("this dataset cannot be read from a worker")
        time.sleep(0.003)
        return torch.zeros(4), 0


def build():
    model = nn.Linear(4, 2)
    return {"loader": DataLoader(Items(), batch_size=8), "model": model,
            "optimizer": torch.optim.SGD(model.parameters(), lr=0.1)}
"#;

#[test]
fn a_turn_whose_bench_fails_is_recorded_failed_and_reverted() {
    let _run = slot();
    let ws = Ws::managed(CRASHES_IN_WORKERS_TRAIN, "", FAST_POLICY);
    let before = ws.read("train.py");
    // As a user may run it: `tuneloop start > tune.log 2> >(tee tune.err)`
    // in the project folder, one output into a file, the other through a
    // pipe into `tee`. tuneloop's own output is no change of the turn's (else
    // the turn is rejected as "outside the editable files"), and undoing the
    // turn leaves the files alone (else the rest of the output goes into
    // replaced, deleted files).
    let (log, err) = (ws.path().join("tune.log"), ws.path().join("tune.err"));
    let mut tee = std::process::Command::new("tee")
        .arg(&err)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = ws
        .command(&["start"])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(tee.stdin.take().unwrap())
        .status()
        .unwrap();
    assert!(tee.wait().unwrap().success());
    let r = Run {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read_to_string(&log).unwrap(),
        stderr: std::fs::read_to_string(&err).unwrap(),
    };
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        format!("{}{}", r.stdout, r.stderr).contains("report: "),
        "the output's end is in the files: {}\n{}",
        r.stdout,
        r.stderr
    );
    assert_eq!(ws.read("train.py"), before);
    let dir = r.run_dir();
    let rep = json_file(&dir.join("report.json"));
    assert_eq!(rep["turns"][0]["decision"], "failed", "{rep:#}");
    assert!(
        rep["turns"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("bench failed (candidate)"),
        "{rep:#}"
    );
    assert!(
        std::fs::read_to_string(dir.join("turns/01/bench_error.txt"))
            .unwrap()
            .contains("cannot be read from a worker")
    );
}

/// `[compute] knobs = []`: the loader only, as before the compute side.
const COMPUTE_OFF: &str = "\n[compute]\nknobs = []\n";

/// Wide layers so a step costs tens of milliseconds against well under one
/// for the batch: data_wait stays a small share even on a loaded box. The
/// optimizer is a statement of its own, where the compute changes anchor.
const COMPUTE_BOUND_TRAIN: &str = r#"import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build():
    ds = TensorDataset(torch.randn(512, 256), torch.randint(0, 4, (512,)))
    model = nn.Sequential(nn.Linear(256, 1024), *[nn.Linear(1024, 1024) for _ in range(8)],
                          nn.Linear(1024, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    return {"loader": DataLoader(ds, batch_size=64), "model": model, "optimizer": optimizer}
"#;

#[test]
fn a_compute_bound_baseline_goes_on_to_a_compute_turn_by_default() {
    let _run = slot();
    // The policy has no [compute] table: the defaults apply. The turn need
    // only be measured and decided, kept or reverted: 2 pairs at most.
    let ws = Ws::managed(
        COMPUTE_BOUND_TRAIN,
        "",
        &FAST_POLICY.replace("max_repeats = 4", "max_repeats = 2"),
    );
    let before = ws.read("train.py");
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let rep = json_file(&r.run_dir().join("report.json"));
    let stop = rep["stop_reason"].as_str().unwrap();
    assert!(!stop.contains("cannot help much"), "{rep:#}");
    assert!(
        r.stderr.contains("the compute-side changes come next"),
        "{}",
        r.stderr
    );
    // One turn (max_iterations = 1), and it is a compute change of the
    // default set whose losses were checked.
    let turns = rep["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{rep:#}");
    let change = turns[0]["change"].as_str().unwrap();
    let default_knobs = [
        "num_threads:",
        "channels_last:",
        "foreach_optimizer:",
        "fused_optimizer:",
        "autocast:",
    ];
    assert!(
        default_knobs.iter().any(|k| change.starts_with(k)),
        "{change}"
    );
    let decision = turns[0]["decision"].as_str().unwrap();
    let reason = turns[0]["reason"].as_str().unwrap();
    assert!(reason.contains("; losses: "), "{reason}");
    // Kept, the file holds the one change; otherwise its bytes are back.
    let after = ws.read("train.py");
    if decision == "kept" {
        assert_ne!(after, before);
    } else {
        assert_eq!(after, before, "{decision}: {reason}");
    }
}

#[test]
fn with_the_compute_side_off_a_compute_bound_baseline_stops_with_advice() {
    let _run = slot();
    let ws = Ws::managed(
        COMPUTE_BOUND_TRAIN,
        "",
        &format!("{FAST_POLICY}{COMPUTE_OFF}"),
    );
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let rep = json_file(&r.run_dir().join("report.json"));
    assert!(rep["turns"].as_array().unwrap().is_empty(), "{rep:#}");
    assert!(
        rep["stop_reason"]
            .as_str()
            .unwrap()
            .contains("cannot help much"),
        "{rep:#}"
    );
    assert!(
        r.stderr.contains("zero_grad(set_to_none=True)"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("cudnn.benchmark"));
}

// ---------------------------------------------------------------- bad input

#[test]
fn no_workspace_is_a_config_error_with_a_hint() {
    let _run = slot();
    let ws = Ws::new();
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("no tuneloop.toml") && r.stderr.contains("tuneloop init"),
        "{}",
        r.stderr
    );
}

#[test]
fn malformed_files_name_the_file_key_and_line() {
    let _run = slot();
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    ws.write("tuneloop.toml", "[project]\neditable = [\"train.py\"]\n[bench]\nentry = \"train:build\"\nsteps = \"many\"\n");
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("tuneloop.toml:5:9: `bench.steps`: invalid type: string \"many\""),
        "{}",
        r.stderr
    );

    let ws = Ws::managed(
        IO_BOUND_TRAIN,
        "",
        "[decision]\nrepeats = 3\nrepetes = 4\n[agent]\nbackend = \"gpt\"\n",
    );
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("default.toml:3:1: unknown key `decision.repetes` (ignored)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("default.toml:5:1: `agent.backend`: `gpt` is not an agent"),
        "{}",
        r.stderr
    );
}

#[test]
fn missing_editable_file_and_missing_loader_are_config_errors() {
    let _run = slot();
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    ws.write(
        "tuneloop.toml",
        "[project]\neditable = [\"nope.py\"]\n[bench]\nentry = \"train:build\"\n",
    );
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("nope.py") && r.stderr.contains("does not exist"),
        "{}",
        r.stderr
    );

    let ws = Ws::managed("def build():\n    return {}\n", "", FAST_POLICY);
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("no DataLoader call found"),
        "{}",
        r.stderr
    );
    assert!(
        !ws.path().join("runs").exists()
            || std::fs::read_dir(ws.path().join("runs")).unwrap().count() == 0
    );
}

#[test]
fn user_errors_in_build_stop_the_baseline_with_exit_3() {
    let _run = slot();
    let loader_line = "from torch.utils.data import DataLoader\n# DataLoader(ds) is built elsewhere\nx = DataLoader\n";
    let cases: [(&str, &str); 4] = [
        ("import not_a_module_anywhere\n", "could not import"),
        ("", "has no function 'build'"),
        ("def build():\n    return 42\n", "build() returned int"),
        (
            "def build():\n    raise ValueError('boom in build')\n",
            "boom in build",
        ),
    ];
    for (body, expect) in cases {
        let src = format!("{loader_line}def make():\n    return DataLoader([1])\n{body}");
        let ws = Ws::managed(&src, "", FAST_POLICY);
        let r = ws.tuneloop(&["start"]);
        assert_eq!(r.code, 3, "case {expect}: {}", r.stderr);
        assert!(r.stderr.contains(expect), "case {expect}: {}", r.stderr);
        assert_eq!(ws.read("train.py"), src, "files must be untouched");
    }
}

#[test]
fn a_bench_past_its_timeout_is_killed_with_its_group() {
    let _run = slot();
    let marker = tempfile::NamedTempFile::new().unwrap().into_temp_path();
    let marker_s = marker.to_str().unwrap().to_string();
    std::fs::remove_file(&marker).ok();
    let src = format!(
        "import subprocess, time\nfrom torch.utils.data import DataLoader\n\ndef build():\n    subprocess.Popen(['sh', '-c', 'sleep 4; touch {marker_s}'])\n    time.sleep(60)\n    return {{'loader': DataLoader([1])}}\n"
    );
    let ws = Ws::managed(&src, "", FAST_POLICY);
    ws.write(
        "tuneloop.toml",
        &ws.read("tuneloop.toml")
            .replace("timeout_s = 120", "timeout_s = 3"),
    );
    let t = std::time::Instant::now();
    let r = ws.tuneloop(&["bench"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("ran past its limit of 3 s"),
        "{}",
        r.stderr
    );
    assert!(t.elapsed().as_secs() < 30);
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert!(
        !std::path::Path::new(&marker_s).exists(),
        "a child of the bench outlived the timeout"
    );
}

#[test]
fn contract_mode_reads_the_figure_and_reports_a_missing_one() {
    let _run = slot();
    let ws = Ws::new();
    ws.write(
        "train.py",
        "from torch.utils.data import DataLoader\nloader = DataLoader([1, 2], batch_size=1)\n",
    );
    ws.write("bench_loader.py", "import os\nprint('warming up')\nprint('samples/sec: 1234.5' if not os.environ.get('NOFIG') else 'done')\n");
    ws.write(
        "tuneloop.toml",
        &format!("[project]\npython = \"{}\"\neditable = [\"train.py\"]\n[bench]\ncommand = \"python3 bench_loader.py\"\n", python()),
    );
    ws.write("policies/default.toml", FAST_POLICY);
    let r = ws.tuneloop(&["bench", "--repeats", "2", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["samples_per_sec"], 1234.5);
    let r = ws.tuneloop_env(&["bench"], &[("NOFIG", "1")]);
    assert_eq!(r.code, 3);
    assert!(
        r.stderr.contains("samples/sec: N") && r.stderr.contains("done"),
        "{}",
        r.stderr
    );
}

// ---------------------------------------------------------------- init

#[test]
fn init_writes_the_workspace_and_merges_claude_md_once() {
    let _run = slot();
    let ws = Ws::new();
    ws.write("train.py", IO_BOUND_TRAIN);
    ws.write("CLAUDE.md", "# My project\n\nKeep this line.\n");
    let r = ws.tuneloop(&["init", "--entry", "train:build"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for f in [
        "tuneloop.toml",
        "policies/default.toml",
        "prompts/turn.en.md",
        "prompts/turn.ja.md",
        "runs/README.md",
    ] {
        assert!(ws.path().join(f).is_file(), "{f}");
    }
    let toml = ws.read("tuneloop.toml");
    assert!(
        toml.contains("editable = [\"train.py\"]") && toml.contains("entry = \"train:build\""),
        "{toml}"
    );
    let claude = ws.read("CLAUDE.md");
    assert!(claude.starts_with("# My project\n\nKeep this line.\n"));
    assert_eq!(claude.matches("<!-- tuneloop:begin").count(), 1);
    assert!(
        claude.contains("1回に変えるのは DataLoader の引数1つか")
            && claude.contains("Change ONE thing per turn")
    );
    // A second init changes nothing and duplicates nothing.
    let r = ws.tuneloop(&["init", "--entry", "train:build"]);
    assert_eq!(r.code, 0);
    assert_eq!(ws.read("CLAUDE.md"), claude);
    assert_eq!(ws.read("tuneloop.toml"), toml);
    // The written workspace loads.
    let r = ws.tuneloop(&["policy", "show"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("backend = \"builtin\""));
}

#[test]
fn init_without_a_bench_says_how() {
    let _run = slot();
    let ws = Ws::new();
    ws.write("train.py", IO_BOUND_TRAIN);
    let r = ws.tuneloop(&["init"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("--entry train:build") && r.stderr.contains("--bench-cmd"),
        "{}",
        r.stderr
    );
}

// ---------------------------------------------------------------- scan

#[test]
fn scan_finds_the_right_call_sites_in_several_kinds_of_source() {
    let _run = slot();
    let ws = Ws::new();
    ws.write(
        "aliases.py",
        "import torch\nimport torch.utils.data as tud\nfrom torch.utils.data import DataLoader as DL\n\n\
         a = DL(ds, batch_size=8)\n\
         b = torch.utils.data.DataLoader(ds, num_workers=2)\n\
         c = tud.DataLoader(ds, **opts)\n",
    );
    ws.write(
        "multi.py",
        "from torch.utils.data import DataLoader\n\n\
         class MyDataLoader:\n    pass\n\n\
         # DataLoader(in_a_comment, num_workers=9)\n\
         s = \"DataLoader(in_a_string)\"\n\
         m = MyDataLoader(ds, num_workers=3)\n\
         train = DataLoader(\n    train_ds,  # the training split\n    batch_size=32,\n    shuffle=True,  # every epoch\n    pin_memory=False,\n)\n\
         val = DataLoader(val_ds, batch_size=64)\n",
    );
    ws.write("none.py", "import torch\nx = torch.zeros(3)\n");
    let r = ws.tuneloop(&["scan", "aliases.py", "multi.py", "none.py", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let sites = v.as_array().unwrap();
    let brief: Vec<(String, u64, String)> = sites
        .iter()
        .map(|s| {
            (
                s["file"].as_str().unwrap().into(),
                s["line"].as_u64().unwrap(),
                s["callee"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        brief,
        vec![
            ("aliases.py".into(), 5, "DL".into()),
            ("aliases.py".into(), 6, "torch.utils.data.DataLoader".into()),
            ("aliases.py".into(), 7, "tud.DataLoader".into()),
            ("multi.py".into(), 9, "DataLoader".into()),
            ("multi.py".into(), 15, "DataLoader".into()),
        ]
    );
    assert_eq!(sites[0]["kwargs"]["batch_size"], "8");
    assert_eq!(sites[1]["kwargs"]["num_workers"], "2");
    assert_eq!(sites[2]["has_spread"], true);
    assert_eq!(sites[3]["positional"], 1);
    assert_eq!(sites[3]["kwargs"]["pin_memory"], "False");
    assert_eq!(sites[3]["kwargs"].as_object().unwrap().len(), 3);
    assert_eq!(sites[3]["column"], 9);
    // Plain output gives hints; a file with no loader says so.
    let r = ws.tuneloop(&["scan", "none.py"]);
    assert!(r.stdout.contains("no DataLoader call found"));
    let r = ws.tuneloop(&["scan", "multi.py"]);
    assert!(r.stdout.contains("hint: num_workers is 0"), "{}", r.stdout);
}

#[test]
fn bench_aa_reports_the_noise_and_a_threshold() {
    let _run = slot();
    let ws = Ws::new();
    ws.write(
        "train.py",
        "from torch.utils.data import DataLoader\nloader = DataLoader([1, 2], batch_size=1)\n",
    );
    // A figure with ±5% noise from the clock: an A/A comparison must see it.
    ws.write(
        "bench_loader.py",
        "import time\nprint(f'samples/sec: {1000 * (0.95 + (time.time_ns() % 1000) / 10000):.1f}')\n",
    );
    ws.write(
        "tuneloop.toml",
        &format!("[project]\npython = \"{}\"\neditable = [\"train.py\"]\n[bench]\ncommand = \"python3 bench_loader.py\"\n", python()),
    );
    let r = ws.tuneloop(&["bench", "--aa", "--repeats", "4", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let ratios = v["ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), 4);
    for x in ratios {
        let x = x.as_f64().unwrap();
        assert!((0.85..1.18).contains(&x), "{x}");
    }
    let ci = v["ci"].as_array().unwrap();
    let (lo, hi, med) = (
        ci[0].as_f64().unwrap(),
        ci[1].as_f64().unwrap(),
        v["median"].as_f64().unwrap(),
    );
    assert!(
        lo < med && med < hi,
        "the interval must surround the median: {v}"
    );
    assert!(v["suggested_noise_threshold"].as_f64().unwrap() >= 0.005);
    assert!(r.stderr.contains("A/A calibration"), "{}", r.stderr);
}

// ---------------------------------------------------------------- knob sources

/// `num_workers` comes from an argparse flag's default, as in an ordinary
/// script; a validation loader sits next to the training one.
const FLAG_TRAIN: &str = r#"import argparse
import time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        time.sleep(0.004)  # storage latency
        g = torch.Generator().manual_seed(i)
        return torch.randn(32, generator=g), i % 4


def get_args(argv=None):
    parser = argparse.ArgumentParser(description="train a classifier")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=0, help="loader processes")
    return parser.parse_args(argv)


def build():
    torch.set_num_threads(1)
    args = get_args([])
    loader = DataLoader(Items(), batch_size=16, shuffle=True, num_workers=args.workers)
    val_loader = DataLoader(Items(), batch_size=64)
    model = nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return {"loader": loader, "model": model, "optimizer": opt}
"#;

#[test]
fn a_change_at_the_flag_default_is_kept_and_is_that_one_line() {
    let _run = slot();
    let ws = Ws::managed(FLAG_TRAIN, "", FAST_POLICY);
    let scan = ws.tuneloop(&["scan", "train.py"]);
    assert!(
        scan.stdout
            .contains("knob: num_workers = args.workers → --workers default=0 (train.py:21)"),
        "{}",
        scan.stdout
    );
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let rep = json_file(&r.run_dir().join("report.json"));
    let turn = &rep["turns"][0];
    assert_eq!(turn["decision"], "kept", "{rep:#}");
    let change = turn["change"].as_str().unwrap();
    let workers = change
        .strip_prefix("num_workers 0 → ")
        .and_then(|c| c.strip_suffix(" (--workers default, train.py:21)"))
        .unwrap_or_else(|| panic!("{change}"));
    assert!(workers.parse::<u32>().unwrap() >= 2, "{change}");
    // The file differs from the original by that default alone.
    assert_eq!(
        ws.read("train.py"),
        FLAG_TRAIN.replace(
            "default=0, help=\"loader processes\"",
            &format!("default={workers}, help=\"loader processes\"")
        )
    );
    let diff = std::fs::read_to_string(r.run_dir().join("turns/01/diff.patch")).unwrap();
    let changed: Vec<&str> = diff
        .lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .collect();
    assert_eq!(
        changed,
        vec![
            "-    parser.add_argument(\"--workers\", type=int, default=0, help=\"loader processes\")".to_string(),
            format!("+    parser.add_argument(\"--workers\", type=int, default={workers}, help=\"loader processes\")"),
        ],
        "{diff}"
    );
}

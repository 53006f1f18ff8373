//! Knobs where real code keeps them, end to end: a flag passed through a
//! wrapper (`num_workers=int(opt.workers)`) by module-level code, and a flag
//! the user's command passes (`-j 0`, HfArgumentParser's
//! `--dataloader_num_workers 0`, LightningCLI's `--data.num_workers 0`),
//! which is changed in `[bench] run` of tuneloop.toml. Real scripts
//! (tests/fixtures), real PyTorch (and transformers, Lightning) on CPU, the
//! real binary: `init -- <command>`, `scan`, `start --agent builtin`,
//! `restore`, `resume`.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::Value;

fn fixture(name: &str) -> Ws {
    Ws::fixture(name)
}

/// Line (1-based) of the first line of `file` containing `needle`.
fn line_of(ws: &Ws, file: &str, needle: &str) -> usize {
    ws.read(file)
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in {file}"))
        + 1
}

/// `init -- command…`, then small step counts and a one-turn policy
/// (`decision_extra` added under `[decision]`). 12 timed steps: the
/// fixtures' ×2 from 2 workers shows in them, and an epoch of 32 batches is
/// then more than twice the window, so runs are not widened to a whole
/// epoch (24 steps were: 32 timed batches a run, for nothing these tests
/// check).
fn init_command(ws: &Ws, command: &[&str], decision_extra: &str) {
    ws.init_command(
        command,
        12,
        &format!(
            "{}{decision_extra}\n",
            FAST_POLICY.replace("max_repeats = 4", "max_repeats = 8")
        ),
    );
}

fn start(ws: &Ws) -> (Run, PathBuf, Value) {
    ws.start_builtin()
}

/// The count a first turn from 0 workers wrote ("num_workers 0 → N (…)"):
/// what the baseline's figures predict for these storage-bound fixtures
/// (within the caps: 12 timed steps serve at most 6 workers' first burst),
/// at least the 2 cores.
fn first_count(change: &Value) -> u32 {
    let change = change.as_str().unwrap_or_default();
    let n = change
        .strip_prefix("num_workers 0 → ")
        .and_then(|rest| rest.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("{change}"));
    assert!(n >= 2, "{change}");
    n
}

/// The changed lines of a unified diff, without the file headers.
fn changed_lines(diff: &str) -> Vec<&str> {
    diff.lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .collect()
}

/// The `run = [...]` line of tuneloop.toml.
fn run_line(ws: &Ws) -> String {
    ws.read("tuneloop.toml")
        .lines()
        .find(|l| l.starts_with("run = "))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn scan_follows_a_wrapped_flag_of_module_level_code_to_its_default() {
    let _run = slot();
    let ws = fixture("module_workers");
    let r = ws.tuneloop(&["scan", "train.py"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let flag = line_of(&ws, "train.py", r#"add_argument("--workers""#);
    let knob =
        format!("knob: num_workers = int(opt.workers) → --workers default=0 (train.py:{flag})");
    assert!(r.stdout.contains(&knob), "{}", r.stdout);
    assert!(!r.stdout.contains("not editable"), "{}", r.stdout);
}

#[test]
fn scan_shows_a_flag_the_command_passes_in_the_command() {
    let _run = slot();
    let ws = fixture("workers_j");
    init_command(&ws, &["python", "train.py", "-j", "0", "--epochs", "3"], "");
    let r = ws.tuneloop(&["scan", "train.py"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let flag = line_of(&ws, "train.py", r#"add_argument("-j", "--workers""#);
    let run = line_of(&ws, "tuneloop.toml", "run = [");
    let knob = format!(
        "knob: num_workers = args.workers → -j 0 in [bench] run (tuneloop.toml:{run}), over --workers default=4 (train.py:{flag})"
    );
    // Both loaders read -j.
    assert_eq!(r.stdout.matches(&knob).count(), 2, "{}", r.stdout);
    // Without the command (another script's workspace), the default is the source.
    let plain = fixture("workers_j");
    let r = plain.tuneloop(&["scan", "train.py"]);
    assert!(
        r.stdout.contains(&format!(
            "knob: num_workers = args.workers → --workers default=4 (train.py:{flag})"
        )),
        "{}",
        r.stdout
    );
}

#[test]
fn scan_shows_hf_argument_parser_knobs_as_options_of_the_command() {
    let _run = slot();
    let ws = fixture("hf_argparser");
    init_command(
        &ws,
        &[
            "python",
            "train.py",
            "--output_dir",
            "out",
            "--dataloader_num_workers",
            "0",
            "--max_steps",
            "60",
            "--use_cpu",
        ],
        "",
    );
    let r = ws.tuneloop(&["scan", "train.py"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let parser = line_of(&ws, "train.py", "HfArgumentParser((");
    let run = line_of(&ws, "tuneloop.toml", "run = [");
    assert!(
        r.stdout.contains(&format!(
            "train.py:{parser}  HfArgumentParser(…): the DataLoader is built inside transformers; its knobs are the dataloader_* options of the command"
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "knob: num_workers → --dataloader_num_workers 0 in [bench] run (tuneloop.toml:{run}), over the TrainingArguments default"
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "knob: prefetch_factor not set: the default; add --dataloader_prefetch_factor to [bench] run (tuneloop.toml:{run})"
        )),
        "{}",
        r.stdout
    );
}

#[test]
fn scan_shows_lightning_cli_knobs_as_options_of_the_command() {
    let _run = slot();
    let ws = fixture("lightning_cli");
    init_command(
        &ws,
        &[
            "python",
            "train.py",
            "fit",
            "--data.num_workers",
            "0",
            "--trainer.max_epochs",
            "2",
        ],
        "",
    );
    let r = ws.tuneloop(&["scan", "train.py"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let param = line_of(
        &ws,
        "train.py",
        "def __init__(self, batch_size: int = 32, num_workers",
    );
    let run = line_of(&ws, "tuneloop.toml", "run = [");
    let knob = format!(
        "knob: num_workers = self.num_workers → --data.num_workers 0 in [bench] run (tuneloop.toml:{run}), over TileData.__init__ num_workers=0 (train.py:{param})"
    );
    // The training and the validation loader both take it.
    assert_eq!(r.stdout.matches(&knob).count(), 2, "{}", r.stdout);
    // Scanned without the command: the option that sets it.
    let plain = fixture("lightning_cli");
    let r = plain.tuneloop(&["scan", "train.py"]);
    assert!(
        r.stdout
            .contains("which LightningCLI sets with --data.num_workers; `tuneloop init -- python train.py fit …` lets tuneloop change it there"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_wrapped_flag_of_module_level_code_is_tuned_at_its_default() {
    let _one = serial();
    let ws = fixture("module_workers");
    init_command(&ws, &["python", "train.py", "--epochs", "3"], "");
    let toml = ws.read("tuneloop.toml");
    let (r, dir, rep) = start(&ws);
    assert_eq!(rep["turns"][0]["decision"], "kept", "{rep:#}\n{}", r.stderr);
    // One line: the flag's default, where a reviewer would write it.
    let diff = std::fs::read_to_string(dir.join("turns/01/diff.patch")).unwrap();
    let changed = changed_lines(&diff);
    assert_eq!(changed.len(), 2, "{diff}");
    assert!(
        changed[0].starts_with('-') && changed[0].contains(r#""--workers", type=int, default=0"#),
        "{diff}"
    );
    let n = first_count(&rep["turns"][0]["change"]);
    assert!(
        changed[1].starts_with('+')
            && changed[1].contains(&format!(r#""--workers", type=int, default={n}"#)),
        "{diff}"
    );
    let flag = line_of(&ws, "train.py", r#"add_argument("--workers""#);
    assert_eq!(
        rep["turns"][0]["change"],
        format!("num_workers 0 → {n} (--workers default, train.py:{flag})"),
        "{rep:#}"
    );
    // The command did not change: nothing new to run.
    assert_eq!(ws.read("tuneloop.toml"), toml);
    assert!(rep["run_command"].is_null(), "{rep:#}");
    assert!(!r.stdout.contains("run from now on"), "{}", r.stdout);
}

#[test]
fn a_flag_the_command_passes_is_tuned_in_the_command_and_restored_byte_for_byte() {
    let _one = serial();
    let ws = fixture("workers_j");
    init_command(&ws, &["python", "train.py", "-j", "0", "--epochs", "3"], "");
    let toml = ws.read("tuneloop.toml");
    let script = ws.read("train.py");
    let (r, dir, rep) = start(&ws);
    assert_eq!(rep["turns"][0]["decision"], "kept", "{rep:#}\n{}", r.stderr);
    let run = line_of(&ws, "tuneloop.toml", "run = [");
    let n = first_count(&rep["turns"][0]["change"]);
    assert_eq!(
        rep["turns"][0]["change"],
        format!("num_workers 0 → {n} (-j in [bench] run, tuneloop.toml:{run})"),
        "{rep:#}"
    );
    // The change is the command's argument; the script's unused default stays.
    assert_eq!(ws.read("train.py"), script);
    let kept_line = format!(r#"run = ["python", "train.py", "-j", "{n}", "--epochs", "3"]"#);
    assert_eq!(run_line(&ws), kept_line);
    let diff = std::fs::read_to_string(dir.join("turns/01/diff.patch")).unwrap();
    assert_eq!(changed_lines(&diff).len(), 2, "{diff}");
    // The report and the final summary say what to run from now on.
    let now = format!("python train.py -j {n} --epochs 3");
    assert_eq!(rep["run_command"], now);
    assert!(
        r.stdout
            .trim_end()
            .ends_with(&format!("run from now on: {now}")),
        "{}",
        r.stdout
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains(&format!("**Run from now on:** {now}")), "{md}");
    // The final measurement ran the kept command: n workers.
    let kept = json_file(&dir.join("turns/01/bench.json"));
    assert_eq!(kept["candidate"][0]["loader"]["num_workers"], n, "{kept:#}");

    // restore: the baseline's tuneloop.toml byte for byte, then the best.
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let r = ws.tuneloop(&["restore", &id, "--to", "baseline"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(ws.read("tuneloop.toml"), toml);
    assert!(!r.stdout.contains("run from now on"), "{}", r.stdout);
    let r = ws.tuneloop(&["restore", &id, "--to", "best"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!("run from now on: {now}")),
        "{}",
        r.stdout
    );
    assert_eq!(run_line(&ws), kept_line);
}

#[test]
fn a_reverted_command_change_leaves_tuneloop_toml_byte_identical() {
    let _one = serial();
    let ws = fixture("workers_j");
    // A keep needs ×50: the measured ×2 is reverted.
    init_command(
        &ws,
        &["python", "train.py", "--workers=0", "--epochs", "3"],
        "min_gain = 49.0",
    );
    let toml = ws.read("tuneloop.toml");
    let (r, dir, rep) = start(&ws);
    assert_eq!(
        rep["turns"][0]["decision"], "reverted",
        "{rep:#}\n{}",
        r.stderr
    );
    // The candidate was the command with `--workers=N`, measured.
    let n = first_count(&rep["turns"][0]["change"]);
    let candidate = std::fs::read_to_string(dir.join("turns/01/candidate/tuneloop.toml")).unwrap();
    assert!(
        candidate.contains(&format!(
            r#"run = ["python", "train.py", "--workers={n}", "--epochs", "3"]"#
        )),
        "{candidate}"
    );
    let bench = json_file(&dir.join("turns/01/bench.json"));
    assert_eq!(
        bench["candidate"][0]["loader"]["num_workers"], n,
        "{bench:#}"
    );
    assert_eq!(
        bench["incumbent"][0]["loader"]["num_workers"], 0,
        "{bench:#}"
    );
    assert_eq!(ws.read("tuneloop.toml"), toml, "reverted byte for byte");
    assert!(rep["run_command"].is_null(), "{rep:#}");
}

/// Waits until the run's events show `what`, then SIGKILLs it.
fn kill_when(ws: &Ws, mut child: std::process::Child, what: &str) {
    let t = Instant::now();
    loop {
        let seen = std::fs::read_dir(ws.path().join("runs"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .any(|e| {
                std::fs::read_to_string(e.path().join("events.jsonl"))
                    .unwrap_or_default()
                    .contains(what)
            });
        if seen {
            std::thread::sleep(Duration::from_millis(300));
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "ended before {what}");
        assert!(t.elapsed() < Duration::from_secs(240), "no {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_run_killed_while_measuring_a_command_change_resumes_from_the_incumbent_command() {
    let _one = serial();
    let ws = fixture("workers_j");
    init_command(&ws, &["python", "train.py", "-j", "0", "--epochs", "3"], "");
    // What is checked is where the resumed turn starts from, whatever its
    // decision: 2 pairs at most (undecided at the cap is reverted, and a
    // run with nothing kept needs no final measurement).
    ws.write(
        "policies/default.toml",
        &ws.read("policies/default.toml")
            .replace("max_repeats = 8", "max_repeats = 2"),
    );
    let toml = ws.read("tuneloop.toml");
    let child = Command::new(env!("CARGO_BIN_EXE_tuneloop"))
        .args(["start", "--agent", "builtin"])
        .current_dir(ws.path())
        .env("TUNELOOP_PYTHON", python())
        .env("TUNELOOP_WINDOW_S", "0")
        .env("TUNELOOP_TEST_STALL", "measure")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    kill_when(&ws, child, "\"agent_finished\"");
    // The unmeasured candidate command is on disk.
    assert!(!run_line(&ws).contains(r#""-j", "0""#), "{}", run_line(&ws));
    let r = ws.tuneloop(&["resume"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let rep = json_file(&r.run_dir().join("report.json"));
    let turns = rep["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{rep:#}");
    // The turn was done again from the incumbent's command (-j 0), not
    // from the killed turn's candidate.
    let run = line_of(&ws, "tuneloop.toml", "run = [");
    let n = first_count(&turns[0]["change"]);
    assert_eq!(
        turns[0]["change"],
        format!("num_workers 0 → {n} (-j in [bench] run, tuneloop.toml:{run})"),
        "{rep:#}"
    );
    match turns[0]["decision"].as_str().unwrap() {
        "kept" => {
            assert_eq!(
                rep["run_command"],
                format!("python train.py -j {n} --epochs 3")
            );
            assert_eq!(
                ws.read("tuneloop.toml"),
                toml.replace(r#""-j", "0""#, &format!(r#""-j", "{n}""#))
            );
        }
        _ => assert_eq!(ws.read("tuneloop.toml"), toml),
    }
}

#[test]
fn an_hf_argument_parser_option_is_tuned_in_the_command() {
    let _one = serial();
    let ws = fixture("hf_argparser");
    init_command(
        &ws,
        &[
            "python",
            "train.py",
            "--output_dir",
            "out",
            "--dataloader_num_workers",
            "0",
            "--max_steps",
            "80",
            "--per_device_train_batch_size",
            "8",
            "--use_cpu",
            "--report_to",
            "none",
            "--save_strategy",
            "no",
        ],
        "",
    );
    // Each run starts transformers: two pairs at most keep the test short
    // (an undecided pair is reverted, which this test accepts).
    ws.write(
        "policies/default.toml",
        &FAST_POLICY.replace("max_repeats = 4", "max_repeats = 2"),
    );
    let toml = ws.read("tuneloop.toml");
    let script = ws.read("train.py");
    let (r, dir, rep) = start(&ws);
    let turn = &rep["turns"][0];
    let run = line_of(&ws, "tuneloop.toml", "run = [");
    let n = first_count(&turn["change"]);
    assert_eq!(
        turn["change"],
        format!(
            "num_workers 0 → {n} (--dataloader_num_workers in [bench] run, tuneloop.toml:{run})"
        ),
        "{rep:#}\n{}",
        r.stderr
    );
    // The candidate ran with n workers, built inside transformers.
    let bench = json_file(&dir.join("turns/01/bench.json"));
    assert_eq!(
        bench["candidate"][0]["loader"]["num_workers"], n,
        "{bench:#}"
    );
    assert_eq!(ws.read("train.py"), script);
    let kept = toml.replace(
        r#""--dataloader_num_workers", "0""#,
        &format!(r#""--dataloader_num_workers", "{n}""#),
    );
    // Starting transformers in every run makes the pairs noisy on a loaded
    // box: kept or reverted, the command is the one the decision says.
    match turn["decision"].as_str().unwrap() {
        "kept" => {
            assert_eq!(ws.read("tuneloop.toml"), kept);
            assert!(
                r.stdout.contains(&format!(
                    "run from now on: python train.py --output_dir out --dataloader_num_workers {n}"
                )),
                "{}",
                r.stdout
            );
        }
        "reverted" => assert_eq!(ws.read("tuneloop.toml"), toml),
        other => panic!("{other}: {rep:#}"),
    }
}

#[test]
fn a_lightning_cli_option_is_tuned_in_the_command() {
    // `LightningCLI(TileModel, TileData)`: `num_workers` is TileData's
    // `__init__` parameter, and the command sets it (`--data.num_workers 0`).
    // Its default in the script is never used: the change is the command's.
    let _one = serial();
    let ws = fixture("lightning_cli");
    let command = [
        "python",
        "train.py",
        "fit",
        "--data.num_workers",
        "0",
        "--trainer.max_epochs",
        "2",
        "--trainer.accelerator",
        "cpu",
    ];
    init_command(&ws, &command, "");
    let toml = ws.read("tuneloop.toml");
    let script = ws.read("train.py");
    let (r, dir, rep) = start(&ws);
    let turn = &rep["turns"][0];
    assert_eq!(turn["decision"], "kept", "{rep:#}\n{}", r.stderr);
    let run = line_of(&ws, "tuneloop.toml", "run = [");
    let n = first_count(&turn["change"]);
    assert_eq!(
        turn["change"],
        format!("num_workers 0 → {n} (--data.num_workers in [bench] run, tuneloop.toml:{run})"),
        "{rep:#}"
    );
    // The command's word changed, nothing else in tuneloop.toml; the script
    // is byte for byte what the user wrote.
    assert_eq!(ws.read("train.py"), script);
    assert_eq!(
        ws.read("tuneloop.toml"),
        toml.replace(
            r#""--data.num_workers", "0""#,
            &format!(r#""--data.num_workers", "{n}""#)
        )
    );
    assert_eq!(
        run_line(&ws),
        format!(
            r#"run = ["python", "train.py", "fit", "--data.num_workers", "{n}", "--trainer.max_epochs", "2", "--trainer.accelerator", "cpu"]"#
        )
    );
    let diff = std::fs::read_to_string(dir.join("turns/01/diff.patch")).unwrap();
    assert_eq!(changed_lines(&diff).len(), 2, "{diff}");
    // The report, report.json and the final summary say what to run now.
    let now = format!(
        "python train.py fit --data.num_workers {n} --trainer.max_epochs 2 --trainer.accelerator cpu"
    );
    assert_eq!(rep["run_command"], now, "{rep:#}");
    assert!(
        r.stdout
            .trim_end()
            .ends_with(&format!("run from now on: {now}")),
        "{}",
        r.stdout
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains(&format!("**Run from now on:** {now}")), "{md}");
    // LightningCLI really built the loaders from the option: the baseline
    // ran 0 workers, the kept command 2.
    let base = json_file(&dir.join("baseline/bench.json"));
    assert_eq!(base["runs"][0]["loader"]["num_workers"], 0, "{base:#}");
    let kept = json_file(&dir.join("turns/01/bench.json"));
    assert_eq!(kept["candidate"][0]["loader"]["num_workers"], n, "{kept:#}");
}

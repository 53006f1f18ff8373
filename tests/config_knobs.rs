//! A knob kept in the project's own `config.py` (a dataclass default read
//! as `cfg.num_workers` by the loader in `data.py`), end to end: `init`
//! makes config.py editable, the builtin agent changes that one literal and
//! nothing else; with config.py not editable, the run says which knob it
//! could not change and what to do, instead of calling the loader settled.
//! Real scripts (tests/fixtures/config_dataclass), real PyTorch on CPU, the
//! real binary.

use crate::support::*;

/// Line (1-based) of the first line of `file` containing `needle`.
fn line_of(ws: &Ws, file: &str, needle: &str) -> usize {
    ws.read(file)
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in {file}"))
        + 1
}

/// The fixture after `init -- python train.py --epochs 3`, small steps and
/// a one-turn `policy`.
fn project(policy: &str) -> Ws {
    let ws = Ws::fixture_project("config_dataclass");
    ws.init_command(&["python", "train.py", "--epochs", "3"], 24, policy);
    ws
}

#[test]
fn init_and_scan_follow_cfg_num_workers_to_the_dataclass_default() {
    let _run = slot();
    let ws = project(FAST_POLICY);
    let toml = ws.read("tuneloop.toml");
    let editable = toml
        .lines()
        .find(|l| l.starts_with("editable = "))
        .unwrap_or_default();
    assert!(
        editable.contains("\"config.py\"")
            && editable.contains("\"data.py\"")
            && editable.contains("\"train.py\""),
        "{toml}"
    );
    let r = ws.tuneloop(&["scan", "data.py"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let field = line_of(&ws, "config.py", "num_workers: int = 0");
    assert!(
        r.stdout.contains(&format!(
            "knob: num_workers = cfg.num_workers → Config.num_workers = 0 (config.py:{field})"
        )),
        "{}",
        r.stdout
    );
}

#[test]
fn the_builtin_agent_changes_only_the_dataclass_default() {
    let _one = serial();
    let ws = project(&FAST_POLICY.replace("max_repeats = 4", "max_repeats = 8"));
    let (config, data, train) = (
        ws.read("config.py"),
        ws.read("data.py"),
        ws.read("train.py"),
    );
    let (r, dir, rep) = ws.start_builtin();
    assert_eq!(rep["turns"][0]["decision"], "kept", "{rep:#}\n{}", r.stderr);
    let field = line_of(&ws, "config.py", "num_workers: int = ");
    let change = rep["turns"][0]["change"].as_str().unwrap_or_default();
    let workers: String = change
        .strip_prefix("num_workers 0 → ")
        .and_then(|c| c.split(' ').next())
        .unwrap_or_else(|| panic!("{rep:#}"))
        .to_string();
    assert_eq!(
        change,
        format!("num_workers 0 → {workers} (Config.num_workers, config.py:{field})"),
        "{rep:#}"
    );
    // The only difference: that literal, where a reviewer would write it.
    assert_eq!(
        ws.read("config.py"),
        config.replace(
            "num_workers: int = 0",
            &format!("num_workers: int = {workers}")
        )
    );
    assert_eq!(ws.read("data.py"), data);
    assert_eq!(ws.read("train.py"), train);
    let kept = json_file(&dir.join("turns/01/bench.json"));
    assert_eq!(
        kept["candidate"][0]["loader"]["num_workers"].to_string(),
        workers,
        "{kept:#}"
    );
    assert!(
        rep["not_editable_knobs"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "{rep:#}"
    );
}

/// The project as a workspace made before config.py was followed would
/// have it: config.py, where `num_workers` is defined, left out of editable.
fn project_without_config_py(policy: &str) -> Ws {
    let ws = project(policy);
    let toml = ws.read("tuneloop.toml");
    let editable = toml
        .lines()
        .find(|l| l.starts_with("editable = "))
        .unwrap()
        .to_string();
    ws.write(
        "tuneloop.toml",
        &toml.replace(&editable, "editable = [\"train.py\", \"data.py\"]"),
    );
    ws
}

/// report.json names num_workers as not editable, with the fix.
fn names_config_py(rep: &serde_json::Value) {
    let blocked = rep["not_editable_knobs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(blocked.len(), 1, "{rep:#}");
    assert_eq!(blocked[0]["knob"], "num_workers");
    assert!(
        blocked[0]["fix"]
            .as_str()
            .is_some_and(|f| f.contains("Add \"config.py\" to [project] editable")),
        "{rep:#}"
    );
}

#[test]
fn with_config_py_not_editable_the_run_says_which_knob_and_what_to_do() {
    let _one = serial();
    // The compute turn it gets instead need not be decided: 2 pairs at
    // most (what is checked is the agent's summary and the report's words,
    // written whatever the turn's decision).
    let ws = project_without_config_py(&FAST_POLICY.replace("max_repeats = 4", "max_repeats = 2"));
    let config = ws.read("config.py");
    // bf16 autocast stays a compute turn whatever this machine's CPU: on one
    // without bf16 arithmetic this step may have no other.
    let r = ws.tuneloop_env(
        &["start", "--agent", "builtin"],
        &[("TUNELOOP_CPU_BF16", "1")],
    );
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let dir = r.run_dir();
    let rep = json_file(&dir.join("report.json"));
    assert_eq!(ws.read("config.py"), config);
    // The turn went to the step, and says why the loader got none.
    let agent = json_file(&dir.join("turns/01/agent.json"));
    let summary = agent["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("the loader has nothing editable left, data_wait still")
            && summary.contains("num_workers = cfg.num_workers → Config.num_workers = 0")
            && summary.contains("config.py is not an editable file")
            && !summary.contains("the loader is settled"),
        "{summary}\n{}",
        r.stdout
    );
    // The report names the knob and what the user can do.
    names_config_py(&rep);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("Not editable while data_wait stayed large")
            && md.contains("config.py is not an editable file"),
        "{md}"
    );
}

#[test]
fn with_config_py_not_editable_and_no_compute_turn_left_the_report_still_says_what_to_do() {
    let _one = serial();
    let ws = project_without_config_py(FAST_POLICY);
    // On a CPU without bf16 arithmetic this step has no compute change that
    // can pay: the run ends after its baseline, without a turn.
    let r = ws.tuneloop_env(
        &["start", "--agent", "builtin"],
        &[("TUNELOOP_CPU_BF16", "0")],
    );
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let rep = json_file(&r.run_dir().join("report.json"));
    assert!(
        rep["turns"].as_array().is_some_and(|t| t.is_empty()),
        "{rep:#}"
    );
    assert!(
        rep["stop_reason"]
            .as_str()
            .is_some_and(|s| s.starts_with("candidates exhausted")),
        "{rep:#}"
    );
    names_config_py(&rep);
    assert!(
        r.stdout
            .contains("Not editable while data_wait stayed large")
            && r.stdout.contains("config.py is not an editable file"),
        "{}",
        r.stdout
    );
}

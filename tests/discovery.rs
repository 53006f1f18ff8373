//! Interpreter discovery and `doctor` through the cargo-built binary, with the
//! real cached venv: which rule picks the interpreter when nothing is
//! configured, what `init` writes, and how `doctor` reports an interpreter
//! without torch. (The installed-wheel cases are in `tests/wheel.rs`.)

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use serde_json::Value;

/// The cached venv's folder (`.../venv`, from `.../venv/bin/python`).
fn cached_venv() -> PathBuf {
    Path::new(&python())
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_owned()
}

/// The binary with no interpreter configured, plus `env`.
fn tuneloop(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tuneloop"));
    c.args(args)
        .current_dir(dir)
        .env_remove("TUNELOOP_PYTHON")
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn fast_workspace() -> Ws {
    Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY)
}

#[test]
fn init_writes_a_python_line_only_when_asked() {
    let _run = slot();
    let ws = Ws::new();
    ws.write("train.py", IO_BOUND_TRAIN);
    let (code, _, err) = tuneloop(ws.path(), &["init", "--entry", "train:build"], &[]);
    assert_eq!(code, 0, "{err}");
    let toml = ws.read("tuneloop.toml");
    assert!(!toml.lines().any(|l| l.starts_with("python")), "{toml}");
    assert!(
        toml.contains("# python = "),
        "the commented example is missing:\n{toml}"
    );

    let ws = Ws::new();
    ws.write("train.py", IO_BOUND_TRAIN);
    let (code, _, err) = tuneloop(
        ws.path(),
        &[
            "init",
            "--entry",
            "train:build",
            "--python",
            "~/envs/t/bin/python",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(ws
        .read("tuneloop.toml")
        .lines()
        .any(|l| l == "python = \"~/envs/t/bin/python\""));
}

#[test]
fn bench_uses_the_active_virtualenv_and_says_so_with_its_torch() {
    let _run = slot();
    let ws = fast_workspace();
    let venv = cached_venv();
    let (code, out, err) = tuneloop(
        ws.path(),
        &["bench", "--repeats", "1"],
        &[("VIRTUAL_ENV", &venv.display().to_string())],
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let want = format!(
        "python: {} (the active virtualenv ($VIRTUAL_ENV)), torch 2.",
        venv.join("bin/python").display()
    );
    assert!(err.contains(&want), "want {want:?} in:\n{err}");
    assert!(out.contains("samples/sec: "), "{out}");
}

#[test]
fn conda_prefix_is_used_when_no_virtualenv_is_active() {
    let _run = slot();
    let ws = fast_workspace();
    let venv = cached_venv();
    let (code, out, err) = tuneloop(
        ws.path(),
        &["doctor", "--json"],
        &[("CONDA_PREFIX", &venv.display().to_string())],
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let d: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["interpreter"]["rule"], "conda_prefix", "{d:#}");
    assert_eq!(
        d["interpreter"]["program"],
        venv.join("bin/python").display().to_string()
    );
    assert_eq!(d["ready"], true, "{d:#}");
    // The figures behind the lines, for scripts.
    assert!(d["machine"]["cores_usable"].as_u64().unwrap() >= 1, "{d:#}");
    assert!(
        d["machine"]["mem_total_bytes"].as_u64().unwrap() > 0,
        "{d:#}"
    );
    assert!(d["torch"]["torch_version"]
        .as_str()
        .is_some_and(|t| t.starts_with("2.")));
    let names: Vec<&str> = d["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for want in [
        "workspace",
        "policy",
        "python",
        "torch",
        "cores",
        "memory",
        "git",
        "claude",
    ] {
        assert!(names.contains(&want), "no {want} check in {names:?}");
    }
}

#[test]
fn tuneloop_python_still_wins_over_the_file_and_the_virtualenv() {
    let _run = slot();
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    let toml = ws.read("tuneloop.toml").replace(
        "[project]\n",
        "[project]\npython = \"/nonexistent/bin/python\"\n",
    );
    ws.write("tuneloop.toml", &toml);
    let (code, out, err) = tuneloop(
        ws.path(),
        &["doctor", "--json"],
        &[
            ("TUNELOOP_PYTHON", &python()),
            ("VIRTUAL_ENV", "/nonexistent-venv"),
        ],
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let d: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["interpreter"]["rule"], "tuneloop_python", "{d:#}");
    assert_eq!(d["interpreter"]["program"], python());
}

#[test]
fn doctor_fails_on_an_interpreter_without_torch_and_says_how_to_fix_it() {
    let _run = slot();
    // The cached venv's base interpreter: a real Python without torch.
    let o = Command::new(python())
        .args(["-c", "import sys; print(sys._base_executable)"])
        .output()
        .unwrap();
    let base = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let ws = fast_workspace();
    let toml = ws
        .read("tuneloop.toml")
        .replace("[project]\n", &format!("[project]\npython = \"{base}\"\n"));
    ws.write("tuneloop.toml", &toml);
    let (code, out, err) = tuneloop(ws.path(), &["doctor"], &[]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("FAIL  torch"), "{out}");
    assert!(out.contains("No module named 'torch'"), "{out}");
    assert!(
        out.contains(&format!("[project] python is {base}: install torch there")),
        "{out}"
    );
    assert!(out.contains("not ready"), "{out}");
}

#[test]
fn doctor_checks_the_launcher_program_where_the_bench_finds_it() {
    let _run = slot();
    let ws = Ws::managed(
        IO_BOUND_TRAIN,
        "launcher = \"no-such-launcher-xyz --n {nproc}\"\nnproc = 2\n",
        FAST_POLICY,
    );
    let (code, out, _) = tuneloop(ws.path(), &["doctor"], &[("TUNELOOP_PYTHON", &python())]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("FAIL  launcher") && out.contains("no-such-launcher-xyz"),
        "{out}"
    );
    // torchrun is found where the bench finds it: beside the interpreter.
    let ws = Ws::managed(
        IO_BOUND_TRAIN,
        "launcher = \"torchrun --standalone --nproc_per_node {nproc}\"\nnproc = 2\n",
        FAST_POLICY,
    );
    let (code, out, _) = tuneloop(
        ws.path(),
        &["doctor"],
        &[("TUNELOOP_PYTHON", &python()), ("PATH", "/usr/bin:/bin")],
    );
    assert_eq!(code, 0, "{out}");
    let torchrun = cached_venv().join("bin/torchrun");
    assert!(
        out.contains(&format!("ok    launcher     {}", torchrun.display())),
        "{out}"
    );
}

#[test]
fn a_command_that_names_its_interpreter_is_the_one_announced() {
    let _run = slot();
    // `[bench] run` starts the cached venv's python by path; nothing else
    // names an interpreter, and the python3 on PATH has no torch (the
    // venv's base interpreter). doctor and bench speak of the one that runs.
    let o = Command::new(python())
        .args(["-c", "import sys; print(sys._base_executable)"])
        .output()
        .unwrap();
    let base = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&base, bin.path().join("python3")).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.path().display());
    let ws = Ws::new();
    ws.write("train.py", IO_BOUND_TRAIN);
    ws.write(
        "tuneloop.toml",
        &format!(
            "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nrun = [\"{}\", \"train.py\"]\nsteps = 4\nwarmup_steps = 2\n",
            python()
        ),
    );
    let (code, out, err) = tuneloop(ws.path(), &["doctor"], &[("PATH", &path)]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("(command mode)"), "{out}");
    assert!(
        out.contains(&format!("{} (the head of [bench] run)", python())),
        "{out}"
    );
    assert!(!out.contains("no torch"), "{out}");
}

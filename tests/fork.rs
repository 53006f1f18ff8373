//! The fork server of managed mode (`bench::fork`), end to end: `tuneloop
//! bench` forks its runs from one server that imported torch once, says so,
//! and leaves no server behind; `[bench] fork_server = false` and
//! `TUNELOOP_FORK_SERVER=0` give fresh processes with the same figures'
//! shape. (tests/python/test_zygote.py holds the server's own behaviour:
//! exit status, signals, seeds, the fallback on another environment.)

use crate::support::{slot, Ws};
use serde_json::Value;

const TRAIN_PY: &str = r#"
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build():
    data = TensorDataset(torch.randn(512, 8), torch.randint(0, 2, (512,)))
    model = nn.Linear(8, 2)
    return {"loader": DataLoader(data, batch_size=16, shuffle=True), "model": model,
            "optimizer": torch.optim.SGD(model.parameters(), lr=0.1)}
"#;

/// `tuneloop bench` with its temporary harness folder inside the workspace
/// (TMPDIR), so that what it leaves running can be found by that path.
fn bench(ws: &Ws, args: &[&str], env: &[(&str, &str)]) -> crate::support::Run {
    let tmp = ws.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let tmp = tmp.display().to_string();
    let mut all = vec![("TMPDIR", tmp.as_str())];
    all.extend_from_slice(env);
    let r = ws.tuneloop_env(args, &all);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    r
}

fn starts(r: &crate::support::Run) -> Vec<String> {
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["process_start"].as_str().unwrap_or("none").to_string())
        .collect()
}

/// The processes whose command line holds `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                found.push(cmd);
            }
        }
    }
    found
}

#[test]
fn bench_forks_its_runs_and_leaves_no_server() {
    let _run = slot();
    let ws = Ws::managed(TRAIN_PY, "", "");
    let r = bench(&ws, &["bench", "--repeats", "3", "--json"], &[]);
    assert_eq!(starts(&r), ["forked"; 3], "{}", r.stdout);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    for m in v["runs"].as_array().unwrap() {
        assert_eq!(m["steps"], 12, "{m}");
        assert!(m["samples_per_sec"].as_f64().unwrap() > 0.0, "{m}");
    }
    // The text form says how the runs started.
    let r = bench(&ws, &["bench", "--repeats", "2"], &[]);
    assert!(
        r.stdout.contains("process start: 2 of 2 runs forked"),
        "{}",
        r.stdout
    );
    // The server ended with tuneloop (its stdin closed; PDEATHSIG besides).
    let tmp = ws.path().join("tmp").display().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left: Vec<_> = processes_with(&tmp)
            .into_iter()
            .filter(|c| c.contains("tuneloop_zygote.py"))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left running: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn the_setting_and_the_environment_turn_it_off() {
    let _run = slot();
    let off = Ws::managed(TRAIN_PY, "fork_server = false", "");
    let r = bench(&off, &["bench", "--repeats", "2", "--json"], &[]);
    assert_eq!(starts(&r), ["fresh"; 2], "{}", r.stdout);
    // The environment overrides the workspace, either way.
    let r = bench(
        &off,
        &["bench", "--repeats", "2", "--json"],
        &[("TUNELOOP_FORK_SERVER", "1")],
    );
    assert_eq!(starts(&r), ["forked"; 2], "{}", r.stdout);
    let on = Ws::managed(TRAIN_PY, "", "");
    let r = bench(
        &on,
        &["bench", "--repeats", "2"],
        &[("TUNELOOP_FORK_SERVER", "0")],
    );
    assert!(!r.stdout.contains("process start:"), "{}", r.stdout);
}

/// A user's own command: `python train.py`, three epochs of a small loop.
/// It notes whether a package it imports was there before its first line
/// (the fork server preloads the script's installed imports).
const COMMAND_TRAIN_PY: &str = r#"
import sys
with open("preloaded.txt", "w") as f:
    f.write(str("xml.dom.minidom" in sys.modules))
import xml.dom.minidom
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(512, 8), torch.randint(0, 2, (512,)))
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for x, y in DataLoader(data, batch_size=16, shuffle=True):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"#;

#[test]
fn command_mode_forks_python_commands_with_the_same_data() {
    let _run = slot();
    let ws = Ws::new();
    ws.write("train.py", COMMAND_TRAIN_PY);
    ws.init_command(&["python", "train.py"], 8, "");
    let forked = bench(&ws, &["bench", "--repeats", "2", "--json"], &[]);
    assert_eq!(starts(&forked), ["forked"; 2], "{}", forked.stdout);
    assert_eq!(ws.read("preloaded.txt"), "True");
    let fresh = bench(
        &ws,
        &["bench", "--repeats", "2", "--json"],
        &[("TUNELOOP_FORK_SERVER", "0")],
    );
    assert_eq!(starts(&fresh), ["fresh"; 2], "{}", fresh.stdout);
    assert_eq!(ws.read("preloaded.txt"), "False");
    // The same batches either way: the data identity is the command's.
    let identity = |r: &crate::support::Run| {
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        v["runs"][0]["data_identity"].clone()
    };
    assert!(identity(&forked).is_object(), "{}", forked.stdout);
    assert_eq!(identity(&forked), identity(&fresh));
}

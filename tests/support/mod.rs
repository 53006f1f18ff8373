//! Test support: a temporary workspace with real files, and the real
//! `tuneloop` binary run against it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn python() -> String {
    std::env::var("TUNELOOP_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/tuneloop/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

pub struct Ws {
    pub dir: tempfile::TempDir,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// The run folder printed on the first line of `start`.
    pub fn run_dir(&self) -> PathBuf {
        let line = self.stdout.lines().next().unwrap_or_default();
        PathBuf::from(
            line.strip_prefix("run: ")
                .unwrap_or_else(|| panic!("no run line in {:?}", self.stdout)),
        )
    }
}

impl Ws {
    pub fn new() -> Ws {
        Ws {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, text: &str) -> &Ws {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    /// A managed-mode workspace: `train.py` with `build()`, one editable file.
    pub fn managed(train_py: &str, bench_extra: &str, policy: &str) -> Ws {
        let ws = Ws::new();
        ws.write("train.py", train_py);
        ws.write(
            "tuneloop.toml",
            &format!(
                "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nentry = \"train:build\"\nsteps = 12\nwarmup_steps = 2\ntimeout_s = 120\n{bench_extra}\n"
            ),
        );
        ws.write("policies/default.toml", policy);
        ws
    }

    pub fn tuneloop(&self, args: &[&str]) -> Run {
        self.tuneloop_env(args, &[])
    }

    pub fn tuneloop_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tuneloop"));
        c.args(args)
            .current_dir(self.path())
            .env("TUNELOOP_PYTHON", python())
            .env("NO_COLOR", "1");
        for (k, v) in env {
            c.env(k, v);
        }
        Run::from(c.output().unwrap())
    }
}

/// A small policy for tests: few runs per decision.
pub const FAST_POLICY: &str = "[agent]\nbackend = \"builtin\"\n\n[loop]\nmax_iterations = 1\n\n[decision]\nrepeats = 2\nmax_repeats = 4\nbaseline_runs = 1\n";

/// A training job whose items wait on (simulated) storage: more workers pay.
pub const IO_BOUND_TRAIN: &str = r#"import time
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


def build():
    torch.set_num_threads(1)
    loader = DataLoader(
        Items(),
        batch_size=16,  # the measurement's batch
        shuffle=True,
    )
    model = nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return {"loader": loader, "model": model, "optimizer": opt}
"#;

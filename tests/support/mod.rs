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

    /// A workspace holding `tests/fixtures/<name>/train.py`.
    pub fn fixture(name: &str) -> Ws {
        let ws = Ws::new();
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
            .join("train.py");
        ws.write("train.py", &std::fs::read_to_string(src).unwrap());
        ws
    }

    /// A workspace holding every file of `tests/fixtures/<name>/` (a
    /// project of several modules).
    pub fn fixture_project(name: &str) -> Ws {
        let ws = Ws::new();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name);
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                ws.write(
                    &e.file_name().to_string_lossy(),
                    &std::fs::read_to_string(e.path()).unwrap(),
                );
            }
        }
        ws
    }

    /// Command mode as a user sets it up: `init -- command…`, then `steps`
    /// timed steps after 2 of warm-up (small, for a test) and `policy` as the
    /// default policy.
    pub fn init_command(&self, command: &[&str], steps: u32, policy: &str) -> &Ws {
        let mut args = vec!["init", "--"];
        args.extend_from_slice(command);
        let r = self.tuneloop(&args);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        let toml = self
            .read("tuneloop.toml")
            .replace("steps = 40", &format!("steps = {steps}"))
            .replace("warmup_steps = 5", "warmup_steps = 2");
        self.write("tuneloop.toml", &toml);
        self.write("policies/default.toml", policy);
        self
    }

    /// `start --agent builtin`, which must succeed: what it printed, its run
    /// folder and its report.json.
    pub fn start_builtin(&self) -> (Run, PathBuf, serde_json::Value) {
        let r = self.tuneloop(&["start", "--agent", "builtin"]);
        assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
        let dir = r.run_dir();
        let rep = json_file(&dir.join("report.json"));
        (r, dir, rep)
    }

    pub fn tuneloop(&self, args: &[&str]) -> Run {
        self.tuneloop_env(args, &[])
    }

    pub fn tuneloop_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut c = self.command(args);
        for (k, v) in env {
            c.env(k, v);
        }
        Run::from(c.output().unwrap())
    }

    /// The tuneloop command the tests run, in this workspace, not yet
    /// started (a test that needs its own stdio sets it).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tuneloop"));
        c.args(args)
            .current_dir(self.path())
            .env("TUNELOOP_PYTHON", python())
            // Timed windows of `[bench] steps` only (tests/window.rs turns the
            // window by time on): a second a run would add minutes to the suite.
            .env("TUNELOOP_WINDOW_S", "0")
            .env("NO_COLOR", "1")
            // No whole runs of the command after tuning (tests/whole_command.rs
            // turns them on): they would add minutes to every command-mode test.
            .env("TUNELOOP_WHOLE_COMMAND_S", "0");
        c
    }
}

/// A JSON file's value (a panic names the file).
pub fn json_file(p: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One tuning run at a time in the whole suite (tests/suite.rs is one
/// binary): two at once on a 2-core box leave the pairs too noisy to decide
/// anything (a failed test's poison is no reason to fail the next). The
/// holder also takes one of the suite's running slots ([`slot`]), ahead of
/// the tests waiting for one: the locked tests are the suite's longest
/// chain.
///
/// With `TL_SERIAL_LOG=FILE`, each test appends how long it waited and how
/// long it ran ("lock|slot waited_s held_s name"): where to look when the
/// suite's wall time grows.
pub fn serial() -> Serial {
    let asked = std::time::Instant::now();
    let guard = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut slot = SLOTS.take(true);
    // The wait for the lock counts too.
    slot.asked = asked;
    Serial {
        _guard: guard,
        _slot: slot,
    }
}

/// [`serial`]'s hold on the suite's one tuning run (and its slot).
pub struct Serial {
    // Given back first, then the lock (fields drop in this order).
    _slot: Slot,
    _guard: std::sync::MutexGuard<'static, ()>,
}

/// One of the suite's running slots, as many as the machine's cores (at
/// least 2): every suite test takes one first ([`serial`] takes its own;
/// `suite_rules` checks), so no more tests run at once than the cores hold. The
/// suite runs on more test threads than that (`make test`: 12) so that a
/// thread waiting for the lock never leaves a core idle: with 2 threads on
/// 2 cores, the second thread waited for the lock 459 s of a 1,188-s suite
/// (2026-12-07), where slots let it run the tests that tune nothing.
pub fn slot() -> Slot {
    SLOTS.take(false)
}

/// [`slot`]'s hold; given back when the test ends, passed or not.
pub struct Slot {
    slots: &'static Slots,
    locked: bool,
    asked: std::time::Instant,
    got: std::time::Instant,
}

/// Running slots: a count that the lock's holder takes ahead of the rest.
pub struct Slots {
    /// Free slots (set on first use), and whether the lock's holder waits
    /// for one.
    state: std::sync::Mutex<Option<(usize, bool)>>,
    freed: std::sync::Condvar,
    count: Option<usize>,
}

static SLOTS: Slots = Slots::new(None);

impl Slots {
    /// `count` slots; `None`: as many as the machine's cores, at least 2.
    pub const fn new(count: Option<usize>) -> Slots {
        Slots {
            state: std::sync::Mutex::new(None),
            freed: std::sync::Condvar::new(),
            count,
        }
    }

    /// A slot, once one is free and (unless `locked`, the lock's holder)
    /// the lock's holder is not waiting for it.
    pub fn take(&'static self, locked: bool) -> Slot {
        let asked = std::time::Instant::now();
        let count = self
            .count
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get().max(2)));
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let (free, holder_waits) = state.get_or_insert((count, false));
            if *free > 0 && (locked || !*holder_waits) {
                *free -= 1;
                if locked {
                    *holder_waits = false;
                }
                break;
            }
            if locked {
                *holder_waits = true;
            }
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        Slot {
            slots: self,
            locked,
            asked,
            got: std::time::Instant::now(),
        }
    }

    /// Whether the lock's holder waits for a slot now.
    pub fn holder_waits(&self) -> bool {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.is_some_and(|(_, waits)| waits)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        {
            let mut state = self.slots.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((free, _)) = state.as_mut() {
                *free += 1;
            }
        }
        self.slots.freed.notify_all();
        if !std::ptr::eq(self.slots, &SLOTS) {
            return;
        }
        let Some(log) = std::env::var_os("TL_SERIAL_LOG") else {
            return;
        };
        let line = format!(
            "{} {:.1} {:.1} {}\n",
            if self.locked { "lock" } else { "slot" },
            (self.got - self.asked).as_secs_f64(),
            self.got.elapsed().as_secs_f64(),
            std::thread::current().name().unwrap_or("?")
        );
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// A small policy for tests: few runs per decision, the final at its 3
/// pairs, and the machine's load left out of the decisions (a test's runs
/// share the box with the suite; the load rules have their own tests in
/// `run_loop`). A kept compute change is not measured again: tests/compute.rs
/// turns that on and checks it end to end.
pub const FAST_POLICY: &str = "[agent]\nbackend = \"builtin\"\n\n[loop]\nmax_iterations = 1\n\n[decision]\nrepeats = 2\nmax_repeats = 4\nbaseline_runs = 1\nfinal_max_pairs = 3\nbusy_wait_s = 0\nmax_repeats_beside_load = 0\nmax_set_aside = 0\nconfirm_kept = false\nconfirm_compute = false\n";

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

//! The epochs' restarts as a limit: with real PyTorch through the real
//! binary, both ways of measuring (a `build()` job and a command) report the
//! batches an epoch holds and time each epoch start inside the timed steps
//! (the wait for its first batch, the machine's CPU meanwhile); the limits
//! then carry "what the cores can feed with each epoch's restart", never
//! above the CPU limit, and nothing of it when no epoch began while timed.

use crate::support::*;
use serde_json::Value;

/// Items that wait on "storage"; `N_ITEMS` items a dataset, batches of 8, two
/// workers kept alive across epochs (so the fill, not the start-up, is timed).
const SHORT_EPOCHS: &str = r#"import time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return N_ITEMS

    def __getitem__(self, i):
        time.sleep(0.003)  # storage latency
        return torch.full((16,), float(i)), i % 4


def build():
    torch.set_num_threads(1)
    loader = DataLoader(Items(), batch_size=8, num_workers=2, persistent_workers=True)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return {"loader": loader, "model": model, "optimizer": opt}
"#;

fn bench_json(ws: &Ws) -> Value {
    let r = ws.tuneloop(&["bench", "--json", "--repeats", "1"]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

/// The run's and the limits' epoch figures agree with a job of `batches`
/// batches an epoch that began at least one epoch while timed.
fn assert_timed_restarts(v: &Value, batches: u64) {
    let run = &v["runs"][0];
    assert_eq!(run["batches_per_epoch"].as_u64(), Some(batches), "{run}");
    assert!(run["epoch_starts_timed"].as_u64().unwrap() >= 1, "{run}");
    let fill = run["epoch_fill_s"].as_f64().unwrap();
    // Eight items of 3 ms each, read one after the other by one worker.
    assert!(
        fill >= 0.02,
        "the first batch cannot come before its items: {run}"
    );
    assert!(run["epoch_fill_busy_s"].as_f64().unwrap() >= 0.0, "{run}");
    let lim = &v["limits"];
    let cpu = lim["cpu_limit_sps"].as_f64().unwrap();
    let epoch = lim["epoch_limit_sps"].as_f64().unwrap();
    assert!(epoch > 0.0 && epoch <= cpu, "{lim}");
    let r = &lim["epoch_restarts"];
    assert_eq!(r["batches_per_epoch"].as_u64(), Some(batches), "{lim}");
    assert!((r["fill_s"].as_f64().unwrap() - fill).abs() < 1e-9, "{lim}");
    let idle = r["idle_core_s"].as_f64().unwrap();
    let cores = lim["usable_cores"].as_f64().unwrap();
    assert!(idle >= 0.0 && idle <= cores * fill + 1e-9, "{lim}");
}

#[test]
fn a_short_epoch_job_reports_its_restarts_and_the_limit_they_set() {
    let _run = slot();
    // 32 items: 4 batches an epoch, 12 timed steps → 3 epoch starts timed.
    let ws = Ws::managed(&SHORT_EPOCHS.replace("N_ITEMS", "32"), "", FAST_POLICY);
    let v = bench_json(&ws);
    assert_timed_restarts(&v, 4);
    assert_eq!(v["runs"][0]["epoch_starts_timed"].as_u64(), Some(3), "{v}");
    // The terminal names it too.
    let r = ws.tuneloop(&["bench", "--repeats", "1"]);
    assert!(
        r.stdout
            .contains("with the epochs' restarts (an epoch of 4 batches starts empty:"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_long_epoch_job_has_no_restart_limit() {
    let _run = slot();
    // 4,000 items: 500 batches an epoch; no epoch begins in 14 steps.
    let ws = Ws::managed(&SHORT_EPOCHS.replace("N_ITEMS", "4000"), "", FAST_POLICY);
    let v = bench_json(&ws);
    let run = &v["runs"][0];
    assert_eq!(run["batches_per_epoch"].as_u64(), Some(500), "{run}");
    assert_eq!(run["epoch_starts_timed"].as_u64(), Some(0), "{run}");
    assert!(run["epoch_fill_s"].is_null(), "{run}");
    assert!(v["limits"]["epoch_limit_sps"].is_null(), "{}", v["limits"]);
    assert_ne!(v["limits"]["binding"], "epoch_restarts", "{}", v["limits"]);
}

#[test]
fn a_command_times_its_epoch_starts_too() {
    let _run = slot();
    // The same dataset trained by a plain script over 6 epochs of 4 batches.
    let script = SHORT_EPOCHS.replace("N_ITEMS", "32")
        + r#"

job = build()
for epoch in range(6):
    for x, y in job["loader"]:
        loss = torch.nn.functional.cross_entropy(job["model"](x), y)
        job["optimizer"].zero_grad()
        loss.backward()
        job["optimizer"].step()
print("trained")
"#;
    let ws = Ws::new();
    ws.write("train.py", &script);
    ws.write(
        "tuneloop.toml",
        "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nrun = [\"python\", \"train.py\"]\nsteps = 12\nwarmup_steps = 2\ntimeout_s = 120\n",
    );
    ws.write("policies/default.toml", FAST_POLICY);
    let v = bench_json(&ws);
    assert_timed_restarts(&v, 4);
}

//! The data check on scripts as people write them: an unseeded
//! `shuffle=True`, random augmentation inside the workers, a seed drawn from
//! the clock. `tuneloop init -- <command>` then `start --agent builtin`, with
//! real PyTorch: a worker-count change is checked on the items, their order
//! and the batches' structure, never rejected for bytes that the workers'
//! own seeds change by design, and a part the baseline's own runs do not
//! reproduce is not compared at all.

use std::path::PathBuf;

use crate::support::*;
use serde_json::Value;

/// A workspace holding `tests/fixtures/<name>/train.py`, set up with
/// `init -- command…`, small step counts and one turn of up to 2 pairs:
/// kept or reverted, it is measured and decided, and what these tests check
/// (each run's data identity, the report's data check) holds either way. An
/// undecided call at the cap is reverted, and nothing kept means no final
/// measurement.
fn fixture(name: &str, command: &[&str]) -> Ws {
    let ws = Ws::fixture(name);
    ws.init_command(
        command,
        12,
        &FAST_POLICY.replace("max_repeats = 4", "max_repeats = 2"),
    );
    ws
}

/// What a run left: its folder, report.json and the one turn's bench.json.
struct Ran {
    dir: PathBuf,
    report: Value,
    turn: Value,
    stdout: String,
}

/// `start --agent builtin` for one turn, which must change the worker count
/// and be measured and decided on speed alone: kept or reverted, never
/// rejected for its data.
fn start_one_worker_turn(ws: &Ws) -> Ran {
    let (r, dir, report) = ws.start_builtin();
    let t = &report["turns"][0];
    assert!(
        t["change"]
            .as_str()
            .unwrap_or_default()
            .contains("num_workers"),
        "{report:#}"
    );
    let reason = t["reason"].as_str().unwrap_or_default();
    assert!(
        ["kept", "reverted"].contains(&t["decision"].as_str().unwrap_or_default()),
        "a worker-count change is decided on its speed: {reason}\n{report:#}"
    );
    assert!(!reason.contains("first batches changed"), "{reason}");
    let turn = json_file(&dir.join("turns/01/bench.json"));
    Ran {
        dir,
        report,
        turn,
        stdout: r.stdout,
    }
}

fn part<'a>(m: &'a Value, p: &str) -> &'a str {
    m["data_identity"][p]
        .as_str()
        .unwrap_or_else(|| panic!("no data_identity.{p} in {m:#}"))
}

/// Every candidate run against the turn's first incumbent run: whether the
/// part `p` is the same, and the worker counts they ran with.
fn same_as_incumbent(turn: &Value, p: &str) -> bool {
    let inc = &turn["incumbent"][0];
    let cands = turn["candidate"].as_array().unwrap();
    assert!(!cands.is_empty());
    for c in cands {
        assert_ne!(
            c["loader"]["num_workers"], inc["loader"]["num_workers"],
            "the candidate runs another worker count"
        );
    }
    cands.iter().all(|c| part(c, p) == part(inc, p))
}

fn parts(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect()
}

#[test]
fn an_unseeded_shuffle_is_seeded_so_the_order_is_checked_and_holds() {
    let _one = serial();
    let ws = fixture("unseeded_shuffle", &["python", "train.py", "--epochs", "2"]);
    // `bench` says what its runs reproduce: everything, the runs seeded.
    let r = ws.tuneloop(&["bench", "--repeats", "2"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(
            "data: the first batches' items, order, structure and bytes are the same in all 2 runs\n"
        ),
        "{}",
        r.stdout
    );
    let ran = start_one_worker_turn(&ws);
    // The script sets no seed; the run is seeded before it starts, so the
    // baseline's runs drew the same order, and so do more workers.
    let base = json_file(&ran.dir.join("baseline/bench.json"));
    assert_eq!(
        part(&base["profiled"], "order"),
        part(&base["runs"][0], "order")
    );
    for p in ["items", "order", "structure", "bytes"] {
        assert!(same_as_incumbent(&ran.turn, p), "{p}: {:#}", ran.turn);
    }
    let check = &ran.report["data_check"];
    assert_eq!(
        parts(&check["loader_setting"]),
        ["items", "order", "structure"]
    );
    assert_eq!(
        parts(&check["other"]),
        ["items", "order", "structure", "bytes"]
    );
    assert!(parts(&check["not_reproduced"]).is_empty(), "{check}");
    let md = std::fs::read_to_string(ran.dir.join("report.md")).unwrap();
    assert!(
        md.contains("items, order and structure compared on a loader-setting turn"),
        "{md}"
    );
}

#[test]
fn augmentation_in_workers_changes_the_bytes_and_a_worker_count_is_not_rejected_for_it() {
    let _one = serial();
    let ws = fixture(
        "augment_workers",
        &["python", "train.py", "--epochs", "2", "--seed", "3"],
    );
    let ran = start_one_worker_turn(&ws);
    // Seeded by the script: the baseline's runs reproduce every part...
    let check = &ran.report["data_check"];
    assert!(parts(&check["not_reproduced"]).is_empty(), "{check}");
    // ...and the workers, each seeded on its own, crop and flip otherwise:
    // the same items in the same order and shapes, other bytes. Before the
    // data check was split by part this very turn was rejected.
    assert!(!same_as_incumbent(&ran.turn, "bytes"), "{:#}", ran.turn);
    for p in ["items", "order", "structure"] {
        assert!(same_as_incumbent(&ran.turn, p), "{p}: {:#}", ran.turn);
    }
    assert!(
        !ran.stdout.contains("fingerprint differs"),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_seed_from_the_clock_leaves_only_what_reproduces_to_compare() {
    let _one = serial();
    let ws = fixture("augment_workers", &["python", "train.py", "--epochs", "2"]);
    let ran = start_one_worker_turn(&ws);
    // Each run of the script seeds itself from the clock: another order,
    // other crops. The baseline's own runs show it, and only the structure
    // is compared.
    let base = json_file(&ran.dir.join("baseline/bench.json"));
    assert_ne!(
        part(&base["profiled"], "order"),
        part(&base["runs"][0], "order")
    );
    let check = &ran.report["data_check"];
    assert_eq!(parts(&check["loader_setting"]), ["structure"], "{check}");
    assert_eq!(
        parts(&check["not_reproduced"]),
        ["items", "order", "bytes"],
        "{check}"
    );
    assert!(!same_as_incumbent(&ran.turn, "order"), "{:#}", ran.turn);
    let md = std::fs::read_to_string(ran.dir.join("report.md")).unwrap();
    assert!(
        md.contains(
            "items, order and bytes not compared: they differ between the baseline's own 2 runs"
        ),
        "{md}"
    );
}

/// The harness's own fingerprints of one loader's first batches, by part,
/// for each loader a Python snippet builds (`loaders`, a dict of name →
/// DataLoader), each run seeded as a measured run is.
fn identities(dataset: &str, loaders: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tuneloop_harness.py"),
        tuneloop::bench::HARNESS_PY,
    )
    .unwrap();
    let script = format!(
        r#"
import json
import torch
import torch.utils.data.dataloader as dl
from torch.utils.data import DataLoader, Dataset
import tuneloop_harness as h

h.watch_indices(dl)
{dataset}

def loaders():
{loaders}

out = {{}}
for name in list(loaders()):
    h.seed_all(torch)
    loader = loaders()[name]
    ident = h.DataIdentity()
    it = iter(loader)
    for _ in range(5):
        batch = next(it)
        ident.add(batch, h.indices_of(it), torch)
    out[name] = ident.result()[0]
    del it
print(json.dumps(out))
"#
    );
    let o = std::process::Command::new(python())
        .current_dir(dir.path())
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

const AUGMENTED: &str = r#"
class Augmented(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        image = torch.rand(3, 8, 8, generator=g)
        if float(torch.rand(1)) < 0.5:  # a random flip: the worker's own stream
            image = image.flip(-1)
        return image, i % 3
"#;

fn same(ids: &Value, a: &str, b: &str, p: &str) -> bool {
    assert!(ids[a][p].is_string() && ids[b][p].is_string(), "{ids:#}");
    ids[a][p] == ids[b][p]
}

#[test]
fn the_samplers_order_is_taken_in_the_training_process_whatever_the_worker_count() {
    let _run = slot();
    let ids = identities(
        AUGMENTED,
        "    return {\n\
        \x20       'main': DataLoader(Augmented(), batch_size=4, shuffle=True),\n\
        \x20       'again': DataLoader(Augmented(), batch_size=4, shuffle=True),\n\
        \x20       'workers': DataLoader(Augmented(), batch_size=4, shuffle=True, num_workers=2),\n\
        \x20       'persistent': DataLoader(Augmented(), batch_size=4, shuffle=True, num_workers=2, persistent_workers=True, prefetch_factor=4),\n\
        \x20   }",
    );
    // Seeded: the same run twice is the same in every part.
    for p in ["items", "order", "structure", "bytes"] {
        assert!(same(&ids, "main", "again", p), "{p}: {ids:#}");
    }
    // With workers: the same items in the same order and shapes, other
    // flips (each worker's own seed) -- what a worker-count turn compares.
    for other in ["workers", "persistent"] {
        for p in ["items", "order", "structure"] {
            assert!(same(&ids, "main", other, p), "{other} {p}: {ids:#}");
        }
        assert!(!same(&ids, "main", other, "bytes"), "{other}: {ids:#}");
    }
}

#[test]
fn a_loader_change_that_alters_the_data_shows_in_the_part_it_alters() {
    let _run = slot();
    // Settings that look like tuning but are not: another sampler seed,
    // every other item dropped, another batch size, a collate that casts.
    let ids = identities(
        AUGMENTED,
        "    half = list(range(0, 64, 2))\n\
        \x20   return {\n\
        \x20       'main': DataLoader(Augmented(), batch_size=4, shuffle=True, num_workers=2),\n\
        \x20       'reseeded': DataLoader(Augmented(), batch_size=4, shuffle=True, num_workers=2, generator=torch.Generator().manual_seed(7)),\n\
        \x20       'subset': DataLoader(torch.utils.data.Subset(Augmented(), half), batch_size=4, shuffle=True, num_workers=2),\n\
        \x20       'batch': DataLoader(Augmented(), batch_size=2, shuffle=True, num_workers=2),\n\
        \x20       'cast': DataLoader(Augmented(), batch_size=4, shuffle=True, num_workers=2, collate_fn=lambda b: [torch.stack([x for x, _ in b]).half(), torch.tensor([y for _, y in b])]),\n\
        \x20   }",
    );
    assert!(!same(&ids, "main", "reseeded", "order"), "{ids:#}");
    assert!(!same(&ids, "main", "reseeded", "items"), "{ids:#}");
    assert!(same(&ids, "main", "reseeded", "structure"), "{ids:#}");
    assert!(!same(&ids, "main", "subset", "items"), "{ids:#}");
    assert!(!same(&ids, "main", "batch", "structure"), "{ids:#}");
    assert!(!same(&ids, "main", "cast", "structure"), "{ids:#}");
    assert!(same(&ids, "main", "cast", "order"), "{ids:#}");
    // Judged as a worker-count turn, each is rejected for the part it changed.
    use tuneloop::bench::identity::Reproduced;
    use tuneloop::bench::stats::Verdict;
    use tuneloop::judge::{judge, DataCheck};
    let run = |name: &str| tuneloop::bench::Measurement {
        samples_per_sec: 1.0,
        data_identity: Some(serde_json::from_value(ids[name].clone()).unwrap()),
        ..Default::default()
    };
    let baseline = Reproduced::of(&[run("main"), run("main")]);
    for (name, part) in [
        ("reseeded", "their items and order differ"),
        ("subset", "their items and order differ"),
        ("batch", "structure"),
        ("cast", "their structure differs"),
    ] {
        let check = DataCheck::of("num_workers", &baseline, &[run("main")], &[run(name)]);
        let j = judge(
            "num_workers",
            Verdict::Keep,
            "faster".into(),
            &check,
            &tuneloop::config::Policy::default(),
        );
        assert_eq!(j.decision, tuneloop::turn::Decision::Rejected, "{name}");
        assert!(j.reason.contains(part), "{name}: {}", j.reason);
    }
}

//! The builtin agent's structural turn through the real binary with real
//! PyTorch: on items that wait, a threaded `__getitems__` added to the
//! dataset class goes through the loop's checks (one spot in the dataset's
//! code, the first batches' fingerprint identical) and the interleaved
//! decision. Only the `preprocessing` knob is allowed, so it is turn 1.

use crate::support::*;
use serde_json::Value;

fn json_file(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn a_threaded_getitems_keeps_the_data_and_is_measured() {
    let _run = slot();
    // At most 2 pairs: the turn need only be measured and decided (an
    // undecided call at the cap is reverted, and nothing kept means no final
    // measurement); the edit itself is checked in the candidate's file.
    let policy = FAST_POLICY
        .replace(
            "max_iterations = 1",
            "max_iterations = 1\nknobs = [\"preprocessing\"]",
        )
        .replace("max_repeats = 4", "max_repeats = 2");
    let ws = Ws::managed(IO_BOUND_TRAIN, "", &policy);
    let r = ws.tuneloop(&["start"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let rep = json_file(&r.run_dir().join("report.json"));
    let t1 = &rep["turns"][0];
    let change = t1["change"].as_str().unwrap();
    assert!(change.contains("Items.__getitems__"), "{t1:#}");
    // Same items in the same order: never rejected for changed data.
    let decision = t1["decision"].as_str().unwrap();
    assert!(["kept", "reverted"].contains(&decision), "{t1:#}");
    assert!(t1["runs"].as_u64().unwrap() >= 4, "{t1:#}");
    // The measured candidate fetches a batch's items on threads.
    let candidate =
        std::fs::read_to_string(r.run_dir().join("turns/01/candidate/train.py")).unwrap();
    assert!(
        candidate.contains("def __getitems__(self, indices):"),
        "{candidate}"
    );
    assert!(
        candidate.contains("ThreadPoolExecutor(max_workers="),
        "{candidate}"
    );
    // Kept, the project holds the candidate; reverted, its bytes are back.
    let train = ws.read("train.py");
    if decision == "kept" {
        assert_eq!(train, candidate);
    } else {
        assert_eq!(train, IO_BOUND_TRAIN);
    }
    // The agent said why, from the figures.
    let agent = json_file(&r.run_dir().join("turns/01/agent.json"));
    assert!(
        agent["summary"]
            .as_str()
            .unwrap()
            .contains("items mostly wait"),
        "{agent:#}"
    );
}

//! The builtin agent's structural turn through the real binary with real
//! PyTorch: on items that wait, a threaded `__getitems__` added to the
//! dataset class goes through the loop's checks (one spot in the dataset's
//! code, the first batches' fingerprint identical) and the interleaved
//! decision. Only the `preprocessing` knob is allowed, so it is turn 1.

mod support;

use serde_json::Value;
use support::*;

fn json_file(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn a_threaded_getitems_keeps_the_data_and_is_measured() {
    let policy = FAST_POLICY.replace(
        "max_iterations = 1",
        "max_iterations = 1\nknobs = [\"preprocessing\"]",
    );
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
    let train = ws.read("train.py");
    if decision == "kept" {
        assert!(
            train.contains("def __getitems__(self, indices):"),
            "{train}"
        );
        assert!(train.contains("ThreadPoolExecutor(max_workers="), "{train}");
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

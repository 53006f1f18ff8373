//! The suite's own rules: every test takes a running slot or the tuning
//! lock (`support::slot`, `support::serial`), the lock's holder gets the
//! next free slot ahead of the others, and `make test` runs every test file.

use std::path::Path;

use crate::support::{slot, Slots};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The suite's modules: `mod x;` lines of tests/suite.rs, less `support`.
fn suite_modules() -> Vec<String> {
    let suite = std::fs::read_to_string(Path::new(ROOT).join("tests/suite.rs")).unwrap();
    suite
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .filter(|m| *m != "support")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_suite_test_takes_a_slot_or_the_lock_first() {
    let _run = slot();
    let mut missing = Vec::new();
    let mut seen = 0;
    for m in suite_modules() {
        let src = std::fs::read_to_string(Path::new(ROOT).join(format!("tests/{m}.rs"))).unwrap();
        let mut lines = src.lines().peekable();
        while let Some(l) = lines.next() {
            if l.trim() != "#[test]" {
                continue;
            }
            // The signature (after any other attributes), then the first
            // statement that is not a comment.
            let name = lines
                .by_ref()
                .find_map(|l| {
                    l.trim()
                        .strip_prefix("fn ")?
                        .split('(')
                        .next()
                        .map(str::to_string)
                })
                .unwrap_or_default();
            let first = lines
                .by_ref()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with("//"))
                .unwrap_or_default();
            seen += 1;
            if first != "let _one = serial();" && first != "let _run = slot();" {
                missing.push(format!("tests/{m}.rs: {name}"));
            }
        }
    }
    assert!(seen > 100, "found only {seen} tests");
    assert!(
        missing.is_empty(),
        "these tests start with neither `let _one = serial();` (a tuning run that decides) nor `let _run = slot();`:\n{}",
        missing.join("\n")
    );
}

#[test]
fn make_test_runs_every_test_file() {
    let _run = slot();
    let makefile = std::fs::read_to_string(Path::new(ROOT).join("Makefile")).unwrap();
    let own: Vec<&str> = makefile
        .lines()
        .find_map(|l| l.strip_prefix("OWN_TEST_BINARIES = "))
        .expect("the Makefile's OWN_TEST_BINARIES line")
        .split_whitespace()
        .collect();
    assert!(
        makefile.contains("--test suite"),
        "the Makefile runs tests/suite.rs"
    );
    let modules = suite_modules();
    let mut unrun = Vec::new();
    for entry in std::fs::read_dir(Path::new(ROOT).join("tests")).unwrap() {
        let path = entry.unwrap().path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs")
            && stem != "suite"
            && !modules.iter().any(|m| m == stem)
            && !own.contains(&stem)
        {
            unrun.push(stem.to_string());
        }
    }
    assert!(
        unrun.is_empty(),
        "tests/{{{}}}.rs: neither a module of tests/suite.rs nor in the Makefile's OWN_TEST_BINARIES",
        unrun.join(",")
    );
}

#[test]
fn the_locks_holder_takes_the_next_free_slot_ahead_of_the_others() {
    let _run = slot();
    let slots: &'static Slots = Box::leak(Box::new(Slots::new(Some(2))));
    let (a, b) = (slots.take(false), slots.take(false));
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (got, got_rx) = std::sync::mpsc::channel();
    let holder = {
        let (order, got) = (order.clone(), got.clone());
        std::thread::spawn(move || {
            let s = slots.take(true);
            order.lock().unwrap().push("lock");
            got.send(()).unwrap();
            s
        })
    };
    while !slots.holder_waits() {
        std::thread::yield_now();
    }
    let other = {
        let order = order.clone();
        std::thread::spawn(move || {
            let s = slots.take(false);
            order.lock().unwrap().push("slot");
            got.send(()).unwrap();
            s
        })
    };
    // Both slots are taken: neither has one. One given back goes to the holder.
    assert!(order.lock().unwrap().is_empty());
    drop(a);
    got_rx.recv().unwrap();
    assert_eq!(*order.lock().unwrap(), ["lock"]);
    // The other still waits: no slot is free until the next is given back.
    drop(b);
    got_rx.recv().unwrap();
    assert_eq!(*order.lock().unwrap(), ["lock", "slot"]);
    drop((holder.join().unwrap(), other.join().unwrap()));
}

//! `tuneloop probe` through the real binary: without the `libtorch` feature it
//! explains how to build with it; with it, it measures and its JSON has the
//! report's shape, and a run writes probe.json and shows the data-path limit.

mod support;

use std::process::Command;

use serde_json::Value;
use support::*;

fn probe(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_tuneloop"))
        .arg("-C")
        .arg(dir)
        .arg("probe")
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The harness reports the first batch's size in bytes: 16 samples of 32
/// float32 values and an int64 label.
#[test]
fn bench_reports_the_batch_in_bytes() {
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    let r = ws.tuneloop(&["bench", "--json", "--repeats", "1"]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["runs"][0]["batch_size"], 16);
    assert_eq!(v["runs"][0]["batch_bytes"], 16 * (32 * 4 + 8));
}

#[cfg(not(feature = "libtorch"))]
#[test]
fn probe_without_the_feature_says_how_to_build_it() {
    let t = tempfile::tempdir().unwrap();
    for args in [&[][..], &["--json"][..]] {
        let (code, out, err) = probe(t.path(), args);
        assert_eq!(code, 2, "a usage error: {err}");
        assert!(out.is_empty(), "{out}");
        assert!(err.contains("--features libtorch"), "{err}");
        assert!(err.contains("LIBTORCH_USE_PYTORCH=1"), "{err}");
        assert!(err.contains("2.13.0"), "{err}");
    }
}

#[cfg(feature = "libtorch")]
#[test]
fn probe_json_has_the_reports_shape_and_sane_figures() {
    let t = tempfile::tempdir().unwrap();
    let (code, out, err) = probe(
        t.path(),
        &[
            "--json",
            "--bytes-per-sample",
            "4096",
            "--batch-size",
            "256",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let d: tuneloop::report::DataPathLimit =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(d.bytes_per_sample, 4096.0);
    assert_eq!(d.batch_bytes, 4096 * 256);
    assert_eq!(d.bytes_source, "--bytes-per-sample");
    assert!(
        (0.1..1000.0).contains(&d.host_copy_gbps),
        "host copy {} GB/s",
        d.host_copy_gbps
    );
    assert!(
        (d.host_copy_ceiling_sps - d.host_copy_gbps * 1e9 / 4096.0).abs()
            < 1e-6 * d.host_copy_ceiling_sps
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    for k in [
        "cuda_available",
        "host_copy_gbps",
        "h2d_pageable_gbps",
        "h2d_pinned_gbps",
        "host_copy_ceiling_sps",
        "note",
    ] {
        assert!(v.get(k).is_some(), "{k} missing: {out}");
    }
    if !d.cuda_available {
        assert!(v["h2d_pinned_gbps"].is_null() && v["h2d_pageable_gbps"].is_null());
        // The text form says pin_memory cannot matter here.
        let (code, text, err) = probe(t.path(), &["--bytes-per-sample", "4096"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            text.contains("host memory copy") && text.contains("pin_memory cannot matter"),
            "{text}"
        );
        assert!(text.contains("data-path limit:"), "{text}");
    } else {
        assert!(
            d.h2d_pinned_gbps
                .is_some_and(|g| (0.1..1000.0).contains(&g)),
            "{out}"
        );
    }
}

/// A run made with the feature: probe.json from the baseline's batch, and
/// the report's headline shows the data-path limit.
#[cfg(feature = "libtorch")]
#[test]
fn probe_a_run_records_the_data_path_limit() {
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    let r = ws.tuneloop(&["start", "--iterations", "0"]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let dir = r.run_dir();
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("probe.json")).unwrap()).unwrap();
    assert_eq!(written["batch_bytes"], 16 * (32 * 4 + 8));
    assert_eq!(written["bytes_per_sample"], 136.0);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["data_path"], written);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("- **Data-path limit:** "), "{md}");
    // And `tuneloop probe` in that workspace takes its bytes per sample from the run.
    let (code, out, err) = probe(ws.path(), &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["bytes_per_sample"], 136.0);
    assert!(
        v["bytes_source"]
            .as_str()
            .unwrap()
            .contains("baseline of run"),
        "{out}"
    );
}

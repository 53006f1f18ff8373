//! The GPU check (`bench/gpu/check.sh`) in its `--dry-run`: the same steps
//! as on a GPU machine, on the CPU with tiny sizes, against the binary cargo
//! built for this test. What it must leave in its out folder: a report (md
//! and json) for each tuning, the CUDA turns marked not applicable, the
//! whole-command times where the tuning has a command of its own, and a
//! summary (json and md) saying all of it.

use std::path::Path;
use std::process::Command;

use crate::support::*;

const CUDA_TURNS: [&str; 5] = [
    "pin_memory",
    "non_blocking",
    "cudnn_benchmark",
    "tf32",
    "autocast",
];

#[test]
fn the_dry_run_tunes_both_jobs_and_summarises_every_figure() {
    let _run = slot();
    let out = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources: Vec<(&str, String)> =
        ["examples/slow_loader/train.py", "bench/gpu/image_train.py"]
            .into_iter()
            .map(|f| (f, std::fs::read_to_string(root.join(f)).unwrap()))
            .collect();
    let script = root.join("bench/gpu/check.sh");
    let o = Command::new("bash")
        .arg(&script)
        .arg("--dry-run")
        .arg(out.path())
        .env("TUNELOOP_BIN", env!("CARGO_BIN_EXE_tuneloop"))
        .env("TUNELOOP_PYTHON", python())
        .env("TUNELOOP_WINDOW_S", "0")
        .env_remove("OUT")
        .output()
        .expect("run bench/gpu/check.sh");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "exit {:?}\n{stdout}\n{stderr}",
        o.status
    );

    let s = json_file(&out.path().join("summary.json"));
    assert_eq!(s["mode"], "dry-run", "{s:#}");
    assert_eq!(s["essential_failed"], false, "{s:#}");
    assert!(s["total_wall_s"].as_f64().unwrap() > 0.0, "{s:#}");
    // The binary under test ran, and the machine's Python was recorded.
    assert!(
        s["config"]["binary"]
            .as_str()
            .unwrap()
            .ends_with(env!("CARGO_BIN_EXE_tuneloop")),
        "{s:#}"
    );
    assert!(s["machine"]["torch"].as_str().is_some(), "{s:#}");
    assert_eq!(s["machine"]["cuda_available"], false, "{s:#}");
    let steps = s["steps"].as_array().unwrap();
    let step = |name: &str| {
        steps
            .iter()
            .find(|st| st["step"] == name)
            .unwrap_or_else(|| panic!("no step {name}: {s:#}"))
    };
    assert_eq!(step("doctor")["exit"], 0, "{s:#}");
    for name in ["demo-start", "image-start"] {
        assert_eq!(step(name)["exit"], 0, "{s:#}");
        assert!(step(name)["wall_s"].as_f64().unwrap() > 0.0, "{s:#}");
    }

    for name in ["demo", "image"] {
        let t = &s["tunings"][name];
        assert_eq!(t["ran"], true, "{name}: {t:#}");
        // Each tuning's own report, md and json, copied into the out folder.
        let md = std::fs::read_to_string(out.path().join(name).join("report.md")).unwrap();
        assert!(md.contains("# tuneloop report"), "{md}");
        let rep = json_file(&out.path().join(name).join("report.json"));
        assert_eq!(t["run_id"], rep["run_id"], "{t:#}");
        assert_eq!(t["baseline_sps"], rep["baseline_sps"], "{t:#}");
        assert!(t["baseline_sps"].as_f64().unwrap() > 0.0, "{t:#}");
        assert_eq!(t["device"], "cpu", "{t:#}");
        // On the CPU every CUDA turn is not applicable, and none was taken.
        for k in CUDA_TURNS {
            let c = &t["cuda_turns"][k];
            assert_eq!(c["applicable"], false, "{name} {k}: {c:#}");
            assert_eq!(c["status"], "not applicable (ran on cpu)", "{c:#}");
            assert!(c["turns"].as_array().unwrap().is_empty(), "{c:#}");
        }
        // Every turn of the report is in the summary with its figures.
        let turns = t["turns"].as_array().unwrap();
        assert_eq!(turns.len(), rep["turns"].as_array().unwrap().len());
        for r in turns {
            assert!(r["ratio"].as_f64().is_some(), "{r:#}");
            assert!(r["ratio_ci"].as_array().is_some(), "{r:#}");
            assert!(r["decision"].as_str().is_some(), "{r:#}");
        }
    }
    // The image script had one turn; the demo its baseline alone.
    assert_eq!(s["tunings"]["image"]["turns"].as_array().unwrap().len(), 1);
    assert!(s["tunings"]["image"]["turns"][0]["change"]
        .as_str()
        .unwrap()
        .contains("num_workers"));

    // Whole-command times: none for build() (managed mode); for the image
    // script's own command the times, or why there are none.
    let dw = &s["tunings"]["demo"]["whole_command"];
    assert_eq!(dw["applicable"], false, "{dw:#}");
    let w = &s["tunings"]["image"]["whole_command"];
    assert_eq!(w["applicable"], true, "{w:#}");
    if w["timed"] == true {
        for k in ["baseline_s", "final_s", "speedup"] {
            assert!(w[k].as_f64().is_some(), "{k}: {w:#}");
        }
        assert_eq!(w["rounds"].as_array().unwrap().len(), 3, "{w:#}");
    } else {
        let kept = s["tunings"]["image"]["turns"][0]["kept"] == true;
        let why = w["not_timed"].as_str().or(w["note"].as_str()).unwrap();
        assert!(kept || why.starts_with("nothing was kept"), "{why}: {w:#}");
    }

    // The summary in words, for a person.
    let md = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(md.starts_with("# GPU check (dry-run)"), "{md}");
    assert!(md.contains("## demo: examples/slow_loader"), "{md}");
    assert!(md.contains("## image: bench/gpu/image_train.py"), "{md}");
    assert!(
        md.contains("- pin_memory: not applicable (ran on cpu)"),
        "{md}"
    );
    assert!(
        md.contains("- autocast: not applicable (ran on cpu)"),
        "{md}"
    );
    // The repository's own files are untouched: the tunings ran in copies.
    for (f, before) in &sources {
        assert_eq!(
            &std::fs::read_to_string(root.join(f)).unwrap(),
            before,
            "{f} changed"
        );
    }
}

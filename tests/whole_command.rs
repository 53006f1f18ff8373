//! The user's command timed whole after tuning (`[bench] whole_command_s`):
//! the baseline's command against the final's, in interleaved rounds, each
//! run to its end as the user runs it, and the report's line about it.

use crate::support::*;

/// The `-j` script (`tests/fixtures/workers_j`): one epoch of 32 batches
/// whose items wait 3 ms each; the measured runs time 8 steps after 2 of
/// warm-up and end the command there, so only a whole run reaches its end
/// (where it saves `checkpoint.pth.tar`).
fn workspace() -> Ws {
    let ws = Ws::fixture("workers_j");
    ws.init_command(
        &["python", "train.py", "-j", "0", "--epochs", "1"],
        8,
        &format!(
            "{}\n",
            FAST_POLICY.replace("max_repeats = 4", "max_repeats = 8")
        ),
    );
    ws
}

#[test]
fn the_command_is_timed_whole_before_and_after_in_interleaved_rounds() {
    let _run = slot();
    let ws = workspace();
    let r = ws.tuneloop_env(
        &["start", "--agent", "builtin"],
        &[("TUNELOOP_WHOLE_COMMAND_S", "120")],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let dir = r.run_dir();
    let rep = json_file(&dir.join("report.json"));
    assert_eq!(rep["turns"][0]["decision"], "kept", "{rep:#}");
    // The core count's floor (2), or the count the baseline's figures
    // predict (items wait; 8 timed steps serve at most 4 workers' first burst).
    let change = rep["turns"][0]["change"].as_str().unwrap();
    let n: u32 = change
        .strip_prefix("num_workers 0 → ")
        .and_then(|rest| rest.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("{change}"));
    assert!(n >= 2, "{change}");
    // A real run records how busy the machine was beside its figures.
    let load = &rep["machine_load"];
    assert!(load["cores"].as_f64().is_some_and(|c| c >= 1.0), "{load:#}");
    assert!(
        load["others_median"].as_f64().is_some_and(|o| o >= 0.0),
        "{load:#}"
    );
    let w = &rep["whole_command"];
    assert_eq!(
        w["baseline_command"], "python train.py -j 0 --epochs 1",
        "{w:#}"
    );
    assert_eq!(
        w["final_command"],
        format!("python train.py -j {n} --epochs 1"),
        "{w:#}"
    );
    assert!(w["not_timed"].is_null(), "{w:#}");
    let rounds = w["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 3, "{w:#}");
    let startup = w["startup_s"]
        .as_f64()
        .expect("start-up from the measured runs");
    for round in rounds {
        for k in ["baseline_s", "final_s"] {
            // Each whole run includes the start-up before the training loader.
            assert!(round[k].as_f64().unwrap() > startup, "{w:#}");
        }
    }
    for k in ["baseline_s", "final_s", "speedup"] {
        assert!(w[k].as_f64().is_some(), "{k}: {w:#}");
    }
    // The runs went to the command's end, which no measured run reaches.
    let ckpt = ws.path().join("checkpoint.pth.tar");
    assert!(ckpt.is_file(), "no whole run reached the end of train.py");
    // The report and the final summary say it.
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let line = md
        .lines()
        .find(|l| l.contains("Your command, run whole"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(line.contains("median of 3 interleaved rounds"), "{line}");
    // The rounds are measuring of their own: the report sums them beside
    // the timed steps, in report.json and on the Measuring line.
    let rounds_s: f64 = rounds
        .iter()
        .map(|r| r["baseline_s"].as_f64().unwrap() + r["final_s"].as_f64().unwrap())
        .sum();
    let t = &rep["time"];
    assert!(
        (t["whole_s"].as_f64().unwrap() - rounds_s).abs() < 1e-9,
        "{t:#}"
    );
    let measuring = md
        .lines()
        .find(|l| l.contains("**Measuring:**"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        measuring.contains("your command timed whole (its rounds before and after)"),
        "{measuring}"
    );
    assert!(
        line.contains("before the training loader starts (imports, set-up)"),
        "{line}"
    );
    assert!(
        r.stdout.contains("your command, run whole: "),
        "{}",
        r.stdout
    );
    // The final's files are back in place, and the command to run is printed last.
    assert!(ws
        .read("tuneloop.toml")
        .contains(&format!(r#""-j", "{n}""#)));
    assert_eq!(
        r.stdout.trim_end().lines().last(),
        Some(format!("run from now on: python train.py -j {n} --epochs 1").as_str())
    );
}

#[test]
fn a_command_longer_than_the_limit_is_not_run_whole() {
    let _run = slot();
    let ws = workspace();
    // One second: the start-up alone is longer, as the measured runs show.
    let r = ws.tuneloop_env(
        &["start", "--agent", "builtin"],
        &[("TUNELOOP_WHOLE_COMMAND_S", "1")],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let rep = json_file(&r.run_dir().join("report.json"));
    assert_eq!(rep["turns"][0]["decision"], "kept", "{rep:#}");
    let w = &rep["whole_command"];
    let why = w["not_timed"].as_str().unwrap_or_else(|| panic!("{w:#}"));
    assert!(
        why.contains("at the baseline's measured rate, longer than 1 s ([bench] whole_command_s)"),
        "{why}"
    );
    assert_eq!(
        w["rounds"].as_array().map(Vec::len).unwrap_or(0),
        0,
        "{w:#}"
    );
    assert!(!ws.path().join("checkpoint.pth.tar").exists());
}

//! The compute side through the real loop without Python: the builtin agent
//! writes compute changes into a script whose data_wait is small, a scripted
//! [`Measure`] returns speed and losses by what the file on disk holds, and
//! the loop verifies, measures, judges, runs the numerics guard and keeps or
//! restores. Each test asserts the decisions and the reasons recorded.

use std::sync::Mutex;

use super::*;
use crate::bench::Profiled;
use crate::measure::Pending;
use crate::turn::Decision;

const TRAIN: &str = "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\n\ntorch.set_num_threads(1)\n\n\ndef build():\n    loader = DataLoader(ds, batch_size=8, num_workers=0)\n    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten())\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    return {\"loader\": loader, \"model\": model, \"optimizer\": optimizer}\n";

const LOSSES: [f64; 5] = [2.30, 2.25, 2.20, 2.12, 2.05];

/// Figures by the text on disk: `(text) -> (samples/sec, loss scale)`.
type Figures = dyn Fn(&str) -> (f64, f64) + Send + Sync;

struct ByText {
    root: PathBuf,
    figures: Arc<Figures>,
    texts: Arc<Mutex<Vec<String>>>,
    /// Every run's figures but its speed and losses.
    shape: Measurement,
    /// The calibration run's thread count (`with_threads`): its losses move
    /// 0.1% more each step, as another summation order would.
    threads: Option<u32>,
}

/// A compute-bound job: data_wait 2% of the step, no loader settings read.
fn compute_bound() -> Measurement {
    Measurement {
        data_wait_share: Some(0.02),
        cpu_count: Some(2),
        usable_cores: Some(2.0),
        device: Some("cpu".into()),
        ..Default::default()
    }
}

impl ByText {
    fn run(&self) -> Result<Measurement, BenchError> {
        let text = std::fs::read_to_string(self.root.join("train.py")).unwrap();
        let (sps, scale) = (self.figures)(&text);
        self.texts.lock().unwrap().push(text);
        let drift = |k: usize| match self.threads {
            Some(_) => 1.0 + 0.001 * k as f64,
            None => 1.0,
        };
        Ok(Measurement {
            samples_per_sec: sps,
            losses: LOSSES
                .iter()
                .enumerate()
                .map(|(k, v)| Some(v * scale * drift(k)))
                .collect(),
            torch_threads: self.threads.or(Some(2)),
            ..self.shape.clone()
        })
    }
}

impl Measure for ByText {
    fn measure<'a>(&'a self, _: Mode, _: &'a Interrupt) -> Pending<'a, Measurement> {
        // Only the profiled run weighs the step's parts, as the harness does.
        let r = self.run().map(|m| Measurement {
            step_parts: None,
            ..m
        });
        Box::pin(async move { r })
    }

    fn profile<'a>(&'a self, _: &'a Interrupt) -> Pending<'a, Profiled> {
        let r = self.run().map(|measurement| Profiled {
            measurement,
            table: String::new(),
            no_table: None,
        });
        Box::pin(async move { r })
    }

    fn with_threads(&self, threads: u32) -> Option<Arc<dyn Measure>> {
        Some(Arc::new(ByText {
            root: self.root.clone(),
            figures: self.figures.clone(),
            texts: self.texts.clone(),
            shape: self.shape.clone(),
            threads: Some(threads),
        }))
    }
}

struct Outcome {
    report: RunReport,
    on_disk: String,
    _tmp: tempfile::TempDir,
}

fn session(
    knobs: &[&str],
    policy: impl FnOnce(&mut Policy),
    figures: impl Fn(&str) -> (f64, f64) + Send + Sync + 'static,
) -> Outcome {
    session_on(TRAIN, knobs, policy, figures)
}

/// [`session`] on another script.
fn session_on(
    train: &str,
    knobs: &[&str],
    policy: impl FnOnce(&mut Policy),
    figures: impl Fn(&str) -> (f64, f64) + Send + Sync + 'static,
) -> Outcome {
    session_shaped(train, knobs, policy, compute_bound(), figures)
}

/// [`session_on`] with every run's other figures `shape`.
fn session_shaped(
    train: &str,
    knobs: &[&str],
    policy: impl FnOnce(&mut Policy),
    shape: Measurement,
    figures: impl Fn(&str) -> (f64, f64) + Send + Sync + 'static,
) -> Outcome {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("train.py"), train).unwrap();
    std::fs::write(
        d.join("tuneloop.toml"),
        "[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nentry = \"train:build\"\n",
    )
    .unwrap();
    let ws = Workspace::load(d).unwrap();
    let mut p = Policy::default();
    p.compute.knobs = knobs.iter().map(|s| s.to_string()).collect();
    p.decision.baseline_runs = 1;
    p.loop_.max_iterations = 6;
    policy(&mut p);
    let agent = Agent::Builtin(crate::agent::builtin::BuiltinAgent::new(&ws));
    let mut view = |_: &Event| {};
    let mut s = prepare(
        &ws,
        StartOptions {
            policy_path: d.join("policies/default.toml"),
            policy: p,
            iterations: None,
            allow_dirty: true,
            git_commits: false,
        },
        agent,
        Interrupt::new(),
        &mut view,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    s.bencher = Arc::new(ByText {
        root: s.root.clone(),
        figures: Arc::new(figures),
        texts: Arc::new(Mutex::new(Vec::new())),
        shape,
        threads: None,
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = rt.block_on(s.run()).unwrap_or_else(|(e, _)| panic!("{e}"));
    let on_disk = std::fs::read_to_string(d.join("train.py")).unwrap();
    Outcome {
        report,
        on_disk,
        _tmp: tmp,
    }
}

#[test]
fn a_small_data_wait_leads_to_compute_turns_kept_reverted_and_rejected_by_the_losses() {
    let o = session(
        &["num_threads", "channels_last", "autocast"],
        |_| {},
        |t| {
            let mut sps = 100.0;
            let mut scale = 1.0;
            if t.contains("set_num_threads(2)") {
                sps *= 1.6;
            }
            if t.contains("autocast") {
                // Faster, but the losses move 5%: over the 2% tolerance.
                sps *= 1.5;
                scale = 1.05;
            }
            (sps, scale)
        },
    );
    let rows = &o.report.turns;
    let changes: Vec<&str> = rows.iter().map(|r| r.change.as_str()).collect();
    assert_eq!(rows.len(), 3, "{changes:?}\n{}", o.report.stop_reason);
    assert!(
        changes[0].starts_with("num_threads: torch.set_num_threads 1 → 2"),
        "{changes:?}"
    );
    assert_eq!(rows[0].decision, Decision::Kept, "{}", rows[0].reason);
    assert!(
        rows[0].reason.contains(
            "losses: 5 of 5 steps within 0% of the incumbent's (tolerance 0.10%); \
             measured again (a compute change): ×1.60 [1.60, 1.60] in 2 pairs, held"
        ),
        "{}",
        rows[0].reason
    );
    // A compute change is measured again even on a quiet machine: 2 + 2 pairs.
    let c = rows[0].confirmation.as_ref().expect("measured again");
    assert!(c.held && c.why == "a compute change", "{c:?}");
    assert_eq!(rows[0].runs, 8);
    assert!(changes[1].starts_with("channels_last: "), "{changes:?}");
    assert_eq!(rows[1].decision, Decision::Reverted, "{}", rows[1].reason);
    assert!(changes[2].starts_with("autocast: "), "{changes:?}");
    assert_eq!(rows[2].decision, Decision::Rejected, "{}", rows[2].reason);
    assert!(
        rows[2].reason.starts_with("loss at step ")
            && rows[2].reason.contains(
                "(the baseline's), 5.00% apart, over the 2.00% tolerance ([compute] loss_rtol) for `autocast` (measured: faster"
            ),
        "{}",
        rows[2].reason
    );
    // The baseline ran once more at 1 thread (it ran at 2): the yardstick,
    // in the report and its Markdown.
    let y = o.report.numerics_yardstick.as_ref().expect("a yardstick");
    assert_eq!((y.threads, y.baseline_threads), (1, Some(2)));
    assert!((y.apart[4] - 0.004).abs() < 1e-9, "{y:?}");
    let md = crate::report::render_markdown(&o.report);
    assert!(
        md.contains("**Numerics yardstick:** another thread count (2 → 1) moves the losses 0%"),
        "{md}"
    );
    // Kept byte for byte: only the thread count changed; the rest restored.
    assert_eq!(
        o.on_disk,
        TRAIN.replace("set_num_threads(1)", "set_num_threads(2)")
    );
    // With nothing left on the compute side, that is why the run ends.
    assert_eq!(
        o.report.stop_reason,
        "every compute change was tried (1 kept, 2 not kept); data_wait 2.0% of the step"
    );
    assert!(o.report.compute_not_tried.is_empty());
}

#[test]
fn a_wider_tolerance_keeps_the_numerics_changing_change_and_without_compute_knobs_the_baseline_stops(
) {
    let o = session(
        &["autocast"],
        |p| p.compute.loss_rtol = 0.10,
        |t| match t.contains("autocast") {
            true => (150.0, 1.05),
            false => (100.0, 1.0),
        },
    );
    assert_eq!(o.report.turns.len(), 1);
    let r = &o.report.turns[0];
    assert_eq!(r.decision, Decision::Kept, "{}", r.reason);
    assert!(
        r.reason
            .contains("within 5.00% of the baseline's (tolerance 10.00%)"),
        "{}",
        r.reason
    );
    assert!(o.on_disk.contains("model.forward = torch.autocast(\"cpu\", dtype=torch.bfloat16)(model.forward)\n    optimizer ="));

    let o = session(&[], |_| {}, |_| (100.0, 1.0));
    assert!(o.report.turns.is_empty());
    assert!(
        o.report
            .stop_reason
            .ends_with("DataLoader tuning cannot help much"),
        "{}",
        o.report.stop_reason
    );
    assert_eq!(o.on_disk, TRAIN);
}

#[test]
fn compute_turns_all_reverted_go_on_past_the_streak_and_the_stop_says_every_one_was_tried() {
    // Nothing is faster: five compute turns in a row are reverted, more
    // than [loop] max_consecutive_reverts (3), and none is cut short.
    let o = session(
        &[
            "num_threads",
            "channels_last",
            "foreach_optimizer",
            "fused_optimizer",
            "cudnn_benchmark",
            "tf32",
            "autocast",
        ],
        |p| p.loop_.max_consecutive_reverts = 3,
        |_| (100.0, 1.0),
    );
    let changes: Vec<&str> = o.report.turns.iter().map(|r| r.change.as_str()).collect();
    assert_eq!(changes.len(), 5, "{changes:?}\n{}", o.report.stop_reason);
    for (c, knob) in changes.iter().zip([
        "num_threads",
        "channels_last",
        "foreach_optimizer",
        "fused_optimizer",
        "autocast",
    ]) {
        assert!(c.starts_with(&format!("{knob}: ")), "{changes:?}");
    }
    assert!(o.report.turns.iter().all(|r| !r.decision.is_kept()));
    assert_eq!(
        o.report.stop_reason,
        "every compute change was tried (0 kept, 5 not kept, 2 not applicable); data_wait 2.0% of the step"
    );
    assert_eq!(o.on_disk, TRAIN);
    // The CUDA-only knobs are named once, with why.
    let why = |k: &str| {
        o.report
            .compute_not_tried
            .iter()
            .find(|n| n.knob == k)
            .map(|n| n.why.clone())
    };
    assert_eq!(o.report.compute_not_tried.len(), 2);
    assert_eq!(
        why("cudnn_benchmark").as_deref(),
        Some("CUDA only, and the job ran on cpu")
    );
    assert_eq!(why("tf32"), why("cudnn_benchmark"));
    let md = crate::report::render_markdown(&o.report);
    assert!(
        md.contains("Compute changes not tried")
            && md.contains("cudnn_benchmark, tf32 (CUDA only, and the job ran on cpu)"),
        "{md}"
    );
    let json = crate::report::render_json(&o.report);
    assert!(json.contains("\"compute_not_tried\""), "{json}");
}

#[test]
fn knobs_left_at_the_iteration_limit_and_knobs_passed_over_are_named_with_why() {
    // No convolution and no thread call: channels_last and num_threads have
    // nothing to act on.
    let train = TRAIN
        .replace("torch.set_num_threads(1)\n", "")
        .replace("nn.Conv2d(3, 8, 3)", "nn.Linear(12, 8)");
    let knobs = [
        "num_threads",
        "channels_last",
        "foreach_optimizer",
        "fused_optimizer",
        "autocast",
    ];
    // Room for every turn: the three that can be written are reverted, and
    // the run ends because they were all tried (the two passed over are no
    // reason to go on with loader turns on a settled loader).
    let o = session_on(&train, &knobs, |_| {}, |_| (100.0, 1.0));
    let changes: Vec<&str> = o.report.turns.iter().map(|r| r.change.as_str()).collect();
    assert_eq!(changes.len(), 3, "{changes:?}");
    assert_eq!(
        o.report.stop_reason,
        "every compute change was tried (0 kept, 3 not kept, 2 not applicable); data_wait 2.0% of the step"
    );
    assert_eq!(o.report.compute_not_tried.len(), 2);

    // Two turns leave autocast untried: the iteration limit says so.
    let o = session_on(
        &train,
        &knobs,
        |p| p.loop_.max_iterations = 2,
        |_| (100.0, 1.0),
    );
    let changes: Vec<&str> = o.report.turns.iter().map(|r| r.change.as_str()).collect();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(changes[0].starts_with("foreach_optimizer: "), "{changes:?}");
    assert_eq!(o.report.stop_reason, "iteration limit (2) reached");
    let line = crate::compute::describe_not_tried(&o.report.compute_not_tried);
    assert_eq!(
        line,
        "num_threads (torch's default already uses the 2 cores); channels_last (no 2-d convolution in the script); autocast (iteration limit 2; raise [loop] max_iterations or pass --iterations)"
    );
    assert!(
        crate::report::render_markdown(&o.report).contains(&line),
        "{}",
        crate::report::render_markdown(&o.report)
    );
}

#[test]
fn a_knob_whose_part_of_the_profiled_step_is_too_small_gets_no_turn() {
    // The profiled run finds the optimizer's step 1% of the step and the
    // convolutions half of it: fused and foreach could win at most 1%, and
    // are passed over; channels_last and autocast get their turns.
    let shape = Measurement {
        step_parts: Some(crate::bench::StepParts {
            optimizer: 0.01,
            convolution: 0.5,
        }),
        ..compute_bound()
    };
    let knobs = [
        "channels_last",
        "foreach_optimizer",
        "fused_optimizer",
        "autocast",
    ];
    let o = session_shaped(TRAIN, &knobs, |_| {}, shape, |_| (100.0, 1.0));
    let changes: Vec<&str> = o.report.turns.iter().map(|r| r.change.as_str()).collect();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(changes[0].starts_with("channels_last: "), "{changes:?}");
    assert!(changes[1].starts_with("autocast: "), "{changes:?}");
    assert_eq!(
        o.report.stop_reason,
        "every compute change was tried (0 kept, 2 not kept, 2 not applicable); data_wait 2.0% of the step"
    );
    assert_eq!(
        crate::compute::describe_not_tried(&o.report.compute_not_tried),
        "foreach_optimizer, fused_optimizer (the optimizer's step took 1.0% of the step under the profiler, and the step is 98% of what binds: removing all of it would gain under the 3% a change must gain)"
    );
}

#[test]
fn when_the_agent_has_nothing_left_the_stop_also_says_the_compute_changes_were_tried() {
    // data_wait (2%) is not small under this policy: the loader is not
    // settled, and the compute turn comes once the builtin agent's loader
    // candidates are exhausted (this scripted measure reports no loader
    // settings, so there are none); then the agent has nothing left.
    let o = session(
        &["channels_last"],
        |p| {
            p.decision.stop_when_data_wait_below = 0.01;
            p.loop_.max_iterations = 10;
        },
        |_| (100.0, 1.0),
    );
    let changes: Vec<&str> = o.report.turns.iter().map(|r| r.change.as_str()).collect();
    assert!(
        changes.last().unwrap().starts_with("channels_last: "),
        "{changes:?}\n{}",
        o.report.stop_reason
    );
    assert!(
        o.report.stop_reason.starts_with(
            "candidates exhausted; every compute change was tried (0 kept, 1 not kept)"
        ),
        "{changes:?}\n{}",
        o.report.stop_reason
    );
}

/// A job whose loader binds: 21 workers, data_wait `share` of the step, the
/// step's own CPU 17% of a sample's and the job keeping 43% of its 2 cores
/// busy (the demo's settled incumbent, `tuneloop bench` on the 2-core box).
fn loader_bound(share: f64) -> Measurement {
    let mut m = Measurement {
        wall_s: Some(0.240),
        train_step_s: Some(0.0401),
        data_wait_share: Some(share),
        cpu_count: Some(2),
        usable_cores: Some(2.0),
        device: Some("cpu".into()),
        loader_cpu_s: Some(0.116),
        loader_threads_cpu_s: Some(0.147),
        main_cpu_s: Some(0.0607),
        fetch_cpu_s: Some(0.0254),
        ..Default::default()
    };
    m.loader.insert("num_workers".into(), 21.into());
    m.loader.insert("persistent_workers".into(), true.into());
    m
}

const EVERY_CPU_KNOB: [&str; 4] = [
    "channels_last",
    "foreach_optimizer",
    "fused_optimizer",
    "autocast",
];

#[test]
fn while_the_loader_binds_no_compute_turn_comes_and_the_run_ends_done() {
    // data_wait 82% at 21 workers with cores idle: a faster step would only
    // wait longer. The loader's candidates are spent, and the run ends
    // there: no compute turn, not the iteration limit.
    let o = session_shaped(
        TRAIN,
        &EVERY_CPU_KNOB,
        |p| {
            p.loop_.knobs = vec!["num_workers".into()];
            p.loop_.max_iterations = 10;
        },
        loader_bound(0.82),
        |_| (100.0, 1.0),
    );
    let changes: Vec<&str> = o.report.turns.iter().map(|r| r.change.as_str()).collect();
    assert!(
        o.report
            .turns
            .iter()
            .all(|r| crate::edit::compute::knob_of_change(&r.change).is_none()),
        "{changes:?}"
    );
    // 21 workers on 2 cores: the builtin agent has no loader candidate left.
    assert!(changes.is_empty(), "{changes:?}");
    assert!(
        o.report.stop_reason.starts_with("candidates exhausted"),
        "{changes:?}\n{}",
        o.report.stop_reason
    );
    // Each compute knob is named once, with why.
    let why = "the loader binds: data_wait 82% of the step, a faster step would only wait longer, and the CPU it frees would feed no worker (the job kept 43% of its cores busy)";
    assert_eq!(o.report.compute_not_tried.len(), EVERY_CPU_KNOB.len());
    assert!(
        o.report.compute_not_tried.iter().all(|n| n.why == why),
        "{:?}",
        o.report.compute_not_tried
    );
    let md = crate::report::render_markdown(&o.report);
    assert!(
        md.contains(&format!(
            "channels_last, foreach_optimizer, fused_optimizer, autocast ({why})"
        )),
        "{md}"
    );
    assert_eq!(o.on_disk, TRAIN);
}

#[test]
fn the_same_job_with_the_step_most_of_the_time_still_gets_its_compute_turns() {
    // Same figures, data_wait 30%: the step is most of each iteration, so
    // once the loader's candidates run out the compute changes come.
    let o = session_shaped(
        TRAIN,
        &EVERY_CPU_KNOB,
        |p| {
            p.loop_.knobs = vec!["num_workers".into()];
            p.loop_.max_iterations = 12;
        },
        loader_bound(0.30),
        |_| (100.0, 1.0),
    );
    let compute: Vec<&str> = o
        .report
        .turns
        .iter()
        .filter(|r| crate::edit::compute::knob_of_change(&r.change).is_some())
        .map(|r| r.change.as_str())
        .collect();
    assert_eq!(
        compute.len(),
        EVERY_CPU_KNOB.len(),
        "{compute:?}\n{}",
        o.report.stop_reason
    );
    for (c, knob) in compute.iter().zip(EVERY_CPU_KNOB) {
        assert!(c.starts_with(&format!("{knob}: ")), "{compute:?}");
    }
    assert!(
        o.report.compute_not_tried.is_empty(),
        "{:?}",
        o.report.compute_not_tried
    );
    assert!(
        o.report
            .stop_reason
            .contains("every compute change was tried (0 kept, 4 not kept)"),
        "{}",
        o.report.stop_reason
    );
}

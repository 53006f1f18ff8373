//! Tuner quality: how close does `tuneloop start --agent builtin` get to the
//! best DataLoader setting, and at what cost, on workloads whose bottleneck is
//! known?
//!
//! For each workload of `bench/workloads/<name>/` (a `train.py` with `build()`
//! and a `tuneloop.toml`: each is a workspace of its own), in one invocation:
//! 1. The sweep (the oracle): every configuration the loader allows —
//!    num_workers over `TL_SWEEP_WORKERS` (0,1,2,3,4,6,8,12,16), and with
//!    workers prefetch_factor {2, 4} × persistent_workers {False, True}, and
//!    pin_memory {False, True} when the workload runs on CUDA — each written
//!    into the DataLoader call with `edit::set_kwarg` and measured
//!    `TL_SWEEP_REPEATS` times (3) by tuneloop's own harness, round-robin over
//!    the configurations so drift hits them alike. The best median is the
//!    oracle's best.
//! 2. tuneloop: the real binary (`tuneloop -C <copy> start --agent builtin`,
//!    the default policy with `[compute] knobs = []`: the loader only, like
//!    the oracle) on a fresh copy; its report.json gives baseline, final,
//!    ceiling, bench runs; its wall time is timed here.
//! 3. Reproduction: every kept change is measured again against its
//!    predecessor, `TL_CHECK_PAIRS` interleaved pairs (3); it reproduces when
//!    the median ratio is above 1.
//! 4. Like with like: tuneloop's final files and the oracle's best
//!    configuration measured interleaved, `TL_CHECK_PAIRS` pairs; their median
//!    ratio is "final / oracle" (1 when both are the same configuration).
//!
//! `make bench-tuner` (or `cargo bench --bench tuner`). Env: TL_TUNER_ONLY
//! (comma-separated workload names: those are run again, and the others keep
//! the figures last recorded under the same label), TL_SWEEP_REPEATS, TL_SWEEP_WORKERS,
//! TL_CHECK_PAIRS, TL_TUNER_LABEL (names the results section, e.g. "before"),
//! TL_TUNELOOP_BIN (another tuneloop binary, e.g. an older build),
//! TL_KEEP_TMP=1 (keep the temporary workspaces), TL_TUNER_NOTE (a sentence
//! for the section's first paragraph), TL_TUNER_RENDER=1 (measure nothing:
//! write the label's section again from bench/tuner.json). Writes bench/tuner.json
//! (after every workload, so a crash loses nothing) and the "Tuner vs
//! exhaustive sweep — {label}" section of bench/RESULTS.md.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tuneloop::bench::stats;
use tuneloop::bench::{Bencher, Measurement, Mode};
use tuneloop::config::{Policy, Workspace};
use tuneloop::edit;
use tuneloop::process::Interrupt;
use tuneloop::run_loop::{best_files, measure_interleaved};
use tuneloop::store::FileSet;

/// What each workload should show besides a final near the oracle's.
fn expectation(name: &str) -> Expect {
    match name {
        "already_tuned" => Expect::NothingKept,
        "compute_bound" => Expect::StopAfterBaseline,
        _ => Expect::Gain,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
enum Expect {
    /// A real gain to find.
    Gain,
    /// Already at its best: no turn may be kept.
    NothingKept,
    /// data_wait is small: tuneloop should say so and stop before any turn.
    StopAfterBaseline,
}

/// One DataLoader configuration of the sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct Config {
    num_workers: u32,
    prefetch_factor: Option<u32>,
    persistent_workers: bool,
    pin_memory: bool,
}

impl Config {
    /// The keyword arguments it writes (defaults are left out).
    fn kwargs(&self) -> Vec<(&'static str, String)> {
        let mut k = vec![];
        if self.num_workers > 0 {
            k.push(("num_workers", self.num_workers.to_string()));
            if let Some(p) = self.prefetch_factor {
                k.push(("prefetch_factor", p.to_string()));
            }
            if self.persistent_workers {
                k.push(("persistent_workers", "True".into()));
            }
        }
        if self.pin_memory {
            k.push(("pin_memory", "True".into()));
        }
        k
    }

    fn label(&self) -> String {
        let k = self.kwargs();
        if k.is_empty() {
            "defaults (num_workers=0)".into()
        } else {
            k.iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    }

    /// The baseline's source with this configuration written into its
    /// DataLoader call, one argument at a time (tuning knobs the baseline
    /// already sets are removed first, so every configuration is exact).
    fn apply(&self, src: &str) -> String {
        let mut s = src.to_string();
        let set = |s: &str, name: &str, value: Option<&str>| {
            let site = edit::scan_source("train.py", s).unwrap().remove(0);
            edit::set_kwarg(s, &site, name, value).unwrap()
        };
        for knob in KNOBS {
            s = set(&s, knob, None);
        }
        for (name, value) in self.kwargs() {
            s = set(&s, name, Some(&value));
        }
        s
    }

    /// The same configuration, read back from a source's DataLoader call.
    fn of_source(src: &str) -> Config {
        let site = edit::scan_source("train.py", src).unwrap().remove(0);
        let get = |k: &str| {
            site.kwargs
                .get(k)
                .and_then(|v| v.as_str())
                .map(|v| v.trim().to_string())
        };
        let num_workers = get("num_workers").and_then(|v| v.parse().ok()).unwrap_or(0);
        let prefetch_factor = get("prefetch_factor")
            .and_then(|v| v.parse().ok())
            .filter(|&p| p != 2);
        Config {
            num_workers,
            prefetch_factor: prefetch_factor.filter(|_| num_workers > 0),
            persistent_workers: num_workers > 0
                && get("persistent_workers").as_deref() == Some("True"),
            pin_memory: get("pin_memory").as_deref() == Some("True"),
        }
    }
}

/// The DataLoader arguments the sweep (and the builtin agent) may set.
const KNOBS: [&str; 4] = [
    "num_workers",
    "prefetch_factor",
    "persistent_workers",
    "pin_memory",
];

fn sweep_configs(workers: &[u32], cuda: bool) -> Vec<Config> {
    let pins: &[bool] = if cuda { &[false, true] } else { &[false] };
    let mut out = vec![];
    for &pin in pins {
        for &w in workers {
            if w == 0 {
                out.push(Config {
                    num_workers: 0,
                    prefetch_factor: None,
                    persistent_workers: false,
                    pin_memory: pin,
                });
                continue;
            }
            for pf in [None, Some(4)] {
                for pers in [false, true] {
                    out.push(Config {
                        num_workers: w,
                        prefetch_factor: pf,
                        persistent_workers: pers,
                        pin_memory: pin,
                    });
                }
            }
        }
    }
    out
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SweepPoint {
    config: String,
    samples: Vec<f64>,
    median_sps: f64,
    data_wait_share: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct KeptCheck {
    turn: u64,
    change: String,
    /// tuneloop's own ratio when it kept the change.
    kept_ratio: f64,
    /// Re-measured: candidate / predecessor, interleaved.
    ratios: Vec<f64>,
    median_ratio: f64,
    reproduced: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Outcome {
    workload: String,
    expect: String,
    cuda: bool,
    sweep_configs: usize,
    sweep_runs: u32,
    sweep_wall_s: f64,
    sweep: Vec<SweepPoint>,
    oracle_config: String,
    oracle_sps: f64,
    tuneloop_exit: i32,
    tuneloop_wall_s: f64,
    tuneloop_runs: u64,
    baseline_sps: f64,
    final_sps: f64,
    final_config: String,
    ceiling_sps: Option<f64>,
    final_share_of_ceiling: Option<f64>,
    /// The lower of the step alone and what the cores can feed (report.json's
    /// `limits`), which it is, and the final's and the oracle's share of it.
    binding_limit_sps: Option<f64>,
    binding: Option<String>,
    final_share_of_limit: Option<f64>,
    oracle_share_of_limit: Option<f64>,
    /// The final state's worker processes and their memory (PSS, else RSS;
    /// median over the final comparison's runs of it), in MB.
    final_workers: Option<u64>,
    final_workers_mb: Option<f64>,
    stop_reason: String,
    turns: Vec<Value>,
    kept: Vec<KeptCheck>,
    /// Interleaved: tuneloop's final files / the oracle's best configuration.
    vs_oracle_ratios: Vec<f64>,
    final_share_of_oracle: f64,
    same_config_as_oracle: bool,
    expectation_met: bool,
    check_runs: u32,
    /// Cores other processes kept busy during each measurement (the harness's
    /// machine figures): what the sweep, tuneloop and the checks ran against.
    others_sweep: Vec<f64>,
    others_tuneloop: Vec<f64>,
    others_checks: Vec<f64>,
    /// Wall time of the whole workload: sweep, tuneloop and checks.
    total_s: f64,
}

impl Outcome {
    fn time_share(&self) -> f64 {
        self.tuneloop_wall_s / self.sweep_wall_s.max(1e-9)
    }

    /// The sweep's cheapest configuration whose median is within `min_gain`
    /// of the best median: fewest workers, then fewest settings written.
    fn cheapest_as_fast(&self, min_gain: f64) -> Option<&SweepPoint> {
        let best = self.sweep.iter().map(|p| p.median_sps).fold(0.0, f64::max);
        self.sweep
            .iter()
            .filter(|p| p.median_sps >= (1.0 - min_gain) * best)
            .min_by_key(|p| (workers_of(&p.config), p.config.matches('=').count()))
    }

    /// Whether tuneloop's final uses no more workers than that configuration.
    fn no_more_workers_than_cheapest(&self, min_gain: f64) -> Option<bool> {
        let c = self.cheapest_as_fast(min_gain)?;
        Some(workers_of(&self.final_config) <= workers_of(&c.config))
    }
}

/// The worker count of a configuration's label (`num_workers=4, …`; the
/// defaults are 0).
fn workers_of(config: &str) -> u32 {
    config
        .split([',', '(', ')'])
        .filter_map(|kv| kv.trim().strip_prefix("num_workers="))
        .find_map(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "runs" || name == "__pycache__" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(&name));
        } else {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

fn files(text: &str) -> FileSet {
    FileSet(
        [("train.py".to_string(), text.as_bytes().to_vec())]
            .into_iter()
            .collect(),
    )
}

struct Ctx {
    rt: tokio::runtime::Runtime,
    intr: Interrupt,
    policy: Policy,
    pairs: u32,
    /// Other processes' load seen by the measurements since the last `take_others`.
    others: std::cell::RefCell<Vec<f64>>,
}

/// The other processes' load during tuneloop's own measurements, from its run folder.
fn others_in_run(run_dir: &Path) -> Vec<f64> {
    let mut files = vec![run_dir.join("baseline").join("bench.json")];
    if let Ok(rd) = std::fs::read_dir(run_dir.join("turns")) {
        files.extend(
            rd.filter_map(|e| e.ok())
                .map(|e| e.path().join("bench.json")),
        );
    }
    let mut out = vec![];
    for f in files {
        let Some(v) = std::fs::read_to_string(&f)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        for key in ["runs", "candidate", "incumbent"] {
            let ms: Vec<Measurement> = serde_json::from_value(v[key].clone()).unwrap_or_default();
            out.extend(ms.iter().filter_map(Measurement::others_cores));
        }
    }
    out
}

impl Ctx {
    fn measure(&self, b: &Bencher) -> Measurement {
        let m = self
            .rt
            .block_on(b.measure(Mode::Throughput, &self.intr))
            .unwrap_or_else(|e| panic!("bench failed: {e}"));
        self.others.borrow_mut().extend(m.others_cores());
        m
    }

    fn take_others(&self) -> Vec<f64> {
        std::mem::take(&mut *self.others.borrow_mut())
    }

    /// `cand` vs `inc`, `pairs` interleaved pairs: the candidate/incumbent ratios.
    fn paired(&self, b: &Bencher, root: &Path, cand: &FileSet, inc: &FileSet) -> Vec<f64> {
        let p = self
            .rt
            .block_on(measure_interleaved(
                b,
                root,
                cand,
                inc,
                &self.policy,
                Some(self.pairs),
                &self.intr,
                |_, _, _| {},
            ))
            .unwrap_or_else(|f| panic!("bench failed ({}): {}", f.role, f.error));
        let seen = p
            .candidate
            .iter()
            .chain(&p.incumbent)
            .filter_map(Measurement::others_cores);
        self.others.borrow_mut().extend(seen);
        p.ratio.ratios.clone()
    }
}

fn run_workload(
    ctx: &Ctx,
    name: &str,
    src_dir: &Path,
    tmp: &Path,
    bin: &Path,
    workers: &[u32],
    repeats: usize,
) -> Outcome {
    let t0 = Instant::now();
    let log = |what: &str| eprintln!("[{:>6.0}s] {name}: {what}", t0.elapsed().as_secs_f64());
    let expect = expectation(name);
    let mut out = Outcome {
        workload: name.into(),
        expect: format!("{expect:?}"),
        ..Default::default()
    };

    // ---- 1. the sweep
    let sweep_dir = tmp.join(format!("{name}-sweep"));
    copy_dir(src_dir, &sweep_dir);
    let ws = Workspace::load(&sweep_dir).unwrap();
    let bencher = Bencher::new(&ws, &sweep_dir.join(".harness")).unwrap();
    let root = std::fs::canonicalize(&sweep_dir).unwrap();
    let base_src = std::fs::read_to_string(root.join("train.py")).unwrap();
    let started = Instant::now();
    // The first configuration (num_workers=0, no pinning) also says whether it runs on CUDA.
    let configs = sweep_configs(workers, false);
    files(&configs[0].apply(&base_src)).apply(&root).unwrap();
    let first = ctx.measure(&bencher);
    let cuda = first.is_cuda();
    out.cuda = cuda;
    let configs = sweep_configs(workers, cuda);
    let mut samples: Vec<Vec<f64>> = vec![vec![]; configs.len()];
    let mut shares: Vec<Vec<f64>> = vec![vec![]; configs.len()];
    samples[0].push(first.samples_per_sec);
    shares[0].extend(first.data_wait_share);
    out.sweep_runs = 1;
    for rep in 0..repeats {
        for (i, c) in configs.iter().enumerate() {
            if samples[i].len() > rep {
                continue;
            }
            files(&c.apply(&base_src)).apply(&root).unwrap();
            let m = ctx.measure(&bencher);
            samples[i].push(m.samples_per_sec);
            shares[i].extend(m.data_wait_share);
            out.sweep_runs += 1;
        }
        log(&format!(
            "sweep pass {} of {repeats} ({} configurations)",
            rep + 1,
            configs.len()
        ));
    }
    out.sweep_wall_s = started.elapsed().as_secs_f64();
    out.others_sweep = ctx.take_others();
    out.sweep_configs = configs.len();
    out.sweep = configs
        .iter()
        .zip(samples.iter().zip(&shares))
        .map(|(c, (s, sh))| SweepPoint {
            config: c.label(),
            samples: s.clone(),
            median_sps: stats::median(s),
            data_wait_share: (!sh.is_empty()).then(|| stats::median(sh)),
        })
        .collect();
    let best = (0..configs.len())
        .max_by(|&a, &b| out.sweep[a].median_sps.total_cmp(&out.sweep[b].median_sps))
        .unwrap();
    out.oracle_config = configs[best].label();
    out.oracle_sps = out.sweep[best].median_sps;
    let oracle_src = configs[best].apply(&base_src);
    files(&base_src).apply(&root).unwrap();
    log(&format!(
        "oracle: {} at {:.1} samples/sec",
        out.oracle_config, out.oracle_sps
    ));

    // ---- 2. tuneloop, on a fresh copy
    let tl_dir = tmp.join(format!("{name}-tuneloop"));
    copy_dir(src_dir, &tl_dir);
    // The loader's tuner against the loader's oracle: the compute turns (on
    // by default) would add changes the sweep has no counterpart for.
    let policy = tl_dir.join("loader-only.toml");
    // Every other key at its default.
    std::fs::write(&policy, "[compute]\nknobs = []\n").unwrap();
    let started = Instant::now();
    let o = Command::new(bin)
        .args([
            "-C",
            tl_dir.to_str().unwrap(),
            "start",
            "--agent",
            "builtin",
            "--policy",
            policy.to_str().unwrap(),
        ])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    out.tuneloop_wall_s = started.elapsed().as_secs_f64();
    out.tuneloop_exit = o.status.code().unwrap_or(-1);
    std::fs::write(
        tmp.join(format!("{name}-tuneloop.log")),
        [o.stdout.as_slice(), o.stderr.as_slice()].concat(),
    )
    .unwrap();
    assert_eq!(
        out.tuneloop_exit,
        0,
        "tuneloop failed on {name}:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let run_dir = std::fs::read_dir(tl_dir.join("runs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("report.json").is_file())
        .expect("a run folder with report.json");
    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("report.json")).unwrap())
            .unwrap();
    out.tuneloop_runs = rep["bench_runs"].as_u64().unwrap_or(0);
    out.others_tuneloop = others_in_run(&run_dir);
    out.baseline_sps = rep["baseline_sps"].as_f64().unwrap_or(0.0);
    out.final_sps = rep["final_sps"].as_f64().unwrap_or(0.0);
    out.ceiling_sps = rep["ceiling_sps"].as_f64();
    out.final_share_of_ceiling = rep["final_share_of_ceiling"].as_f64();
    let limits: Option<tuneloop::bench::limits::ThroughputLimits> =
        serde_json::from_value(rep["limits"].clone()).ok();
    if let Some(l) = &limits {
        out.binding_limit_sps = l.binding_sps();
        out.binding = l.lower().map(|(b, _)| binding_name(b, l).to_string());
        out.final_share_of_limit = l.final_share;
    }
    out.oracle_share_of_limit = out
        .binding_limit_sps
        .filter(|l| *l > 0.0)
        .map(|l| out.oracle_sps / l);
    // The final state's memory, from its runs in the final comparison.
    let final_runs = tuneloop::run_folder::FinalBench::read(&run_dir)
        .map(|f| f.best)
        .unwrap_or_default();
    let mb: Vec<f64> = final_runs
        .iter()
        .filter_map(|m| m.workers_pss_bytes.or(m.workers_rss_bytes))
        .map(|b| b as f64 / 1e6)
        .collect();
    out.final_workers = final_runs.iter().find_map(|m| m.live_workers);
    out.final_workers_mb = (!mb.is_empty()).then(|| stats::median(&mb));
    out.stop_reason = rep["stop_reason"].as_str().unwrap_or("").into();
    out.turns = rep["turns"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|t| json!({"turn": t["turn"], "change": t["change"], "decision": t["decision"], "ratio": t["ratio"], "runs": t["runs"]}))
        .collect();
    let editable = vec!["train.py".to_string()];
    let final_files = best_files(&run_dir, &editable).unwrap();
    let final_src = final_files.text("train.py");
    out.final_config = Config::of_source(&final_src).label();
    log(&format!(
        "tuneloop: {} → {} ({:.1} → {:.1} samples/sec), {} runs, {:.0} s, stop: {}",
        "baseline",
        out.final_config,
        out.baseline_sps,
        out.final_sps,
        out.tuneloop_runs,
        out.tuneloop_wall_s,
        out.stop_reason
    ));

    // ---- 3. does every kept change reproduce?
    let base_files = FileSet::load(&run_dir.join("baseline").join("files"), &editable).unwrap();
    let mut predecessor = base_files;
    for t in rep["turns"].as_array().cloned().unwrap_or_default() {
        if t["decision"] != "kept" {
            continue;
        }
        let turn = t["turn"].as_u64().unwrap();
        let cand = FileSet::load(
            &run_dir
                .join("turns")
                .join(format!("{turn:02}"))
                .join("candidate"),
            &editable,
        )
        .unwrap();
        let ratios = ctx.paired(&bencher, &root, &cand, &predecessor);
        out.check_runs += 2 * ctx.pairs;
        let median_ratio = stats::median(&ratios);
        let k = KeptCheck {
            turn,
            change: t["change"].as_str().unwrap_or("").into(),
            kept_ratio: t["ratio"].as_f64().unwrap_or(0.0),
            ratios,
            median_ratio,
            reproduced: median_ratio > 1.0,
        };
        log(&format!(
            "re-measured turn {turn} ({}): ×{:.3} (kept at ×{:.3})",
            k.change, k.median_ratio, k.kept_ratio
        ));
        out.kept.push(k);
        predecessor = cand;
    }

    // ---- 4. tuneloop's final vs the oracle's best, like with like
    out.same_config_as_oracle = Config::of_source(&final_src) == configs[best];
    if out.same_config_as_oracle {
        out.final_share_of_oracle = 1.0;
    } else {
        out.vs_oracle_ratios = ctx.paired(&bencher, &root, &final_files, &files(&oracle_src));
        out.check_runs += 2 * ctx.pairs;
        out.final_share_of_oracle = stats::median(&out.vs_oracle_ratios);
    }
    files(&base_src).apply(&root).unwrap();
    log(&format!("final / oracle: {:.3}", out.final_share_of_oracle));

    out.others_checks = ctx.take_others();
    out.total_s = t0.elapsed().as_secs_f64();
    let kept_any = !out.kept.is_empty();
    out.expectation_met = match expect {
        Expect::Gain => kept_any,
        Expect::NothingKept => !kept_any,
        Expect::StopAfterBaseline => !kept_any && out.turns.is_empty(),
    };
    out
}

fn fmt_s(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// "median / highest" of the cores other processes kept busy.
fn load(v: &[f64]) -> String {
    if v.is_empty() {
        return "–".into();
    }
    format!(
        "{:.1} / {:.1}",
        stats::median(v),
        v.iter().cloned().fold(0.0, f64::max)
    )
}

fn render(
    outs: &[Outcome],
    label: &str,
    note: &str,
    repeats: usize,
    pairs: u32,
    total_s: f64,
) -> String {
    let min_gain = Policy::default().decision.min_gain;
    let mut md = String::new();
    md.push_str(&format!(
        "Machine: {}. {note}Each figure is one benchmark invocation (`make bench-tuner`, label \"{label}\", {:.0} min in all): \
         the sweep measured every configuration {repeats} times (medians; round-robin over the configurations), \
         tuneloop ran with its default policy (the compute side off), and the checks used {pairs} interleaved pairs. \
         Single figures carry a few percent of noise on this machine (more under load).\n\n",
        common::machine(),
        total_s / 60.0
    ));
    md.push_str(
        "| workload | baseline | tuneloop final | oracle best | final / oracle | final / ceiling | binding limit: final, oracle share | final's workers' memory | cheapest within min_gain (sweep): final's workers no more | tuneloop runs / wall | sweep runs / wall | time share | kept changes reproduced | expected outcome |\n\
         |---|---:|---|---|---:|---:|---|---:|---|---:|---:|---:|---|---|\n",
    );
    for o in outs {
        let kept = if o.kept.is_empty() {
            "none kept".to_string()
        } else {
            let ok = o.kept.iter().filter(|k| k.reproduced).count();
            format!(
                "{ok} of {} ({})",
                o.kept.len(),
                o.kept
                    .iter()
                    .map(|k| format!("×{:.2}", k.median_ratio))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let exp = match o.expect.as_str() {
            "NothingKept" => "nothing kept",
            "StopAfterBaseline" => "stop after the baseline",
            _ => "a gain kept",
        };
        md.push_str(&format!(
            "| {} | {:.0} | {:.0} ({}) | {:.0} ({}) | {:.3}{} | {} | {} | {} | {} | {} / {} | {} / {} | {:.0}% | {} | {}: {} |\n",
            o.workload,
            o.baseline_sps,
            o.final_sps,
            o.final_config,
            o.oracle_sps,
            o.oracle_config,
            o.final_share_of_oracle,
            if o.same_config_as_oracle { " (same)" } else { "" },
            o.final_share_of_ceiling.map(|s| format!("{:.0}%", s * 100.0)).unwrap_or_else(|| "–".into()),
            match (o.binding.as_deref(), o.binding_limit_sps) {
                (Some(b), Some(l)) => format!(
                    "{} {:.0}: {}, {}",
                    // Older records hold the enum's name.
                    match b {
                        "Cpu" => "CPU",
                        "StepAlone" => "step alone",
                        "EpochRestarts" => "CPU with epochs' restarts",
                        named => named,
                    },
                    l,
                    o.final_share_of_limit.map(|s| format!("{:.0}%", s * 100.0)).unwrap_or_else(|| "–".into()),
                    o.oracle_share_of_limit.map(|s| format!("{:.0}%", s * 100.0)).unwrap_or_else(|| "–".into())
                ),
                _ => "–".into(),
            },
            match (o.final_workers, o.final_workers_mb) {
                (Some(n), Some(mb)) if n > 0 => format!("{n} × {:.0} MB", mb / n as f64),
                _ => "–".into(),
            },
            match (o.cheapest_as_fast(min_gain), o.no_more_workers_than_cheapest(min_gain)) {
                (Some(c), Some(ok)) => format!(
                    "{} ({:.0}): {}",
                    c.config,
                    c.median_sps,
                    if ok { "yes" } else { "NO" }
                ),
                _ => "–".into(),
            },
            o.tuneloop_runs,
            fmt_s(o.tuneloop_wall_s),
            o.sweep_runs,
            fmt_s(o.sweep_wall_s),
            o.time_share() * 100.0,
            kept,
            exp,
            if o.expectation_met { "yes" } else { "NO" },
        ));
    }
    let shares: Vec<f64> = outs.iter().map(|o| o.final_share_of_oracle).collect();
    let worst = shares.iter().cloned().fold(f64::INFINITY, f64::min);
    let tl: f64 = outs.iter().map(|o| o.tuneloop_wall_s).sum();
    let sw: f64 = outs.iter().map(|o| o.sweep_wall_s).sum();
    let tl_runs: u64 = outs.iter().map(|o| o.tuneloop_runs).sum();
    let sw_runs: u32 = outs.iter().map(|o| o.sweep_runs).sum();
    let worst_time = outs.iter().map(|o| o.time_share()).fold(0.0, f64::max);
    let failed: Vec<String> = outs
        .iter()
        .flat_map(|o| {
            o.kept
                .iter()
                .filter(|k| !k.reproduced)
                .map(move |k| format!("{} turn {}", o.workload, k.turn))
        })
        .collect();
    md.push_str(&format!(
        "\nFinal / oracle: worst {:.3}, median {:.3} (goal: every workload ≥ 0.90, median ≥ 0.95). \
         Machine time: tuneloop {} in {tl_runs} runs vs the sweep {} in {sw_runs} runs, {:.0}% overall, {:.0}% at worst per workload (goal: under 33%). \
         Kept changes that did not reproduce: {}. Expected outcomes met: {} of {}. \
         The final uses no more workers than the sweep's cheapest configuration within min_gain ({:.0}%) of its best: {} of {}.\n",
        worst,
        stats::median(&shares),
        fmt_s(tl),
        fmt_s(sw),
        tl / sw.max(1e-9) * 100.0,
        worst_time * 100.0,
        if failed.is_empty() { "none".to_string() } else { failed.join(", ") },
        outs.iter().filter(|o| o.expectation_met).count(),
        outs.len(),
        min_gain * 100.0,
        outs.iter()
            .filter(|o| o.no_more_workers_than_cheapest(min_gain) == Some(true))
            .count(),
        outs.iter()
            .filter(|o| o.no_more_workers_than_cheapest(min_gain).is_some())
            .count(),
    ));
    md.push_str(
        "\n\"final / oracle\" is measured, not computed from the columns: tuneloop's final files and the oracle's best configuration run \
         interleaved, median of the paired ratios (1 exactly when tuneloop ended on the oracle's configuration). \"time share\" is \
         tuneloop's wall time (the whole `tuneloop start`, baseline, turns and final measurement) over the sweep's. \"final / ceiling\" is \
         tuneloop's final throughput over the step alone fed an in-memory batch. \"binding limit\" is the lowest of the step alone (with \
         the training process's CPU receiving each batch from the workers, when the final has workers: \"step + receiving\"), what the cores can feed (usable cores ÷ CPU seconds per sample of tuneloop's final state, from its report) and that with each epoch's restart, with the final's and \
         the oracle's best throughput as shares of it; the memory is the final state's workers' (PSS) from the final comparison. \
         \"cheapest within min_gain\" is the sweep's configuration with the fewest workers (then the fewest settings) whose median is within \
         min_gain of the sweep's best median, with its median; the sweep's medians carry the machine's noise, so near-ties can swap. A kept change reproduces when, measured again against the \
         state it was kept over, the median ratio is above 1.\n\nWhat tuneloop did, and the load other processes put on the machine meanwhile (cores they kept busy during the timed steps, \
         median and highest, from the harness's machine figures; – where the harness had none):\n\n\
         | workload | turns (change: decision ×ratio, runs) | stop reason | others' load: sweep | tuneloop | checks |\n|---|---|---|---|---|---|\n",
    );
    for o in outs {
        let turns: Vec<String> = o
            .turns
            .iter()
            .map(|t| {
                format!(
                    "{}: {} ×{:.2}, {}",
                    t["change"].as_str().unwrap_or(""),
                    t["decision"].as_str().unwrap_or(""),
                    t["ratio"].as_f64().unwrap_or(f64::NAN),
                    t["runs"]
                )
            })
            .collect();
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            o.workload,
            if turns.is_empty() {
                "(none)".to_string()
            } else {
                turns.join("; ")
            },
            o.stop_reason.replace('|', "/"),
            load(&o.others_sweep),
            load(&o.others_tuneloop),
            load(&o.others_checks),
        ));
    }
    md
}

/// `TL_TUNER_RENDER=1`: the label's section written again from the figures
/// recorded in bench/tuner.json, nothing measured (after a change to the
/// table, or to add a column computed from recorded figures).
fn render_recorded(repo: &Path, label: &str, note: &str) {
    let path = repo.join("bench/tuner.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let rec = &all[label];
    let outs: Vec<Outcome> = serde_json::from_value(rec["workloads"].clone())
        .unwrap_or_else(|e| panic!("no workloads under \"{label}\" in {}: {e}", path.display()));
    let repeats = rec["sweep_repeats"].as_u64().unwrap_or(3) as usize;
    let pairs = rec["check_pairs"].as_u64().unwrap_or(3) as u32;
    let total_s = outs.iter().map(|o| o.total_s).sum();
    let md = render(&outs, label, note, repeats, pairs, total_s);
    common::write_section(
        &repo.join("bench/RESULTS.md"),
        &format!("Tuner vs exhaustive sweep — {label}"),
        &md,
    );
    println!("{md}");
}

/// The binding limit's name in the table.
fn binding_name(
    b: tuneloop::bench::limits::Binding,
    l: &tuneloop::bench::limits::ThroughputLimits,
) -> &'static str {
    use tuneloop::bench::limits::Binding;
    match b {
        Binding::StepAlone if l.step_limit_sps.is_some() => "step + receiving",
        Binding::StepAlone => "step alone",
        Binding::Cpu => "CPU",
        Binding::EpochRestarts => "CPU with epochs' restarts",
    }
}

fn main() {
    if common::skip_unless_benchmarking("tuner") {
        return;
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let repeats = common::env_u("TL_SWEEP_REPEATS", 3);
    let pairs = common::env_u("TL_CHECK_PAIRS", 3) as u32;
    let label = std::env::var("TL_TUNER_LABEL").unwrap_or_else(|_| "current".into());
    let note = std::env::var("TL_TUNER_NOTE")
        .map(|n| format!("{n} "))
        .unwrap_or_default();
    if std::env::var("TL_TUNER_RENDER").is_ok() {
        return render_recorded(&repo, &label, &note);
    }
    let workers: Vec<u32> = std::env::var("TL_SWEEP_WORKERS")
        .unwrap_or_else(|_| "0,1,2,3,4,6,8,12,16".into())
        .split(',')
        .map(|w| {
            w.trim()
                .parse()
                .expect("TL_SWEEP_WORKERS: comma-separated integers")
        })
        .collect();
    let bin = std::env::var("TL_TUNELOOP_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_BIN_EXE_tuneloop")));
    let only: Option<Vec<String>> = std::env::var("TL_TUNER_ONLY")
        .ok()
        .map(|s| s.split(',').map(|w| w.trim().to_string()).collect());
    let wl_root = repo.join("bench/workloads");
    let mut names: Vec<String> = std::fs::read_dir(&wl_root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("train.py").is_file() && e.path().join("tuneloop.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| only.as_ref().is_none_or(|o| o.contains(n)))
        .collect();
    names.sort();
    assert!(
        !names.is_empty(),
        "no workloads selected in {}",
        wl_root.display()
    );
    let tmp = std::env::temp_dir().join(format!("tuneloop-tuner-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    eprintln!(
        "tuner bench: {} workloads, binary {}, temporary workspaces in {}",
        names.len(),
        bin.display(),
        tmp.display()
    );
    let ctx = Ctx {
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        intr: Interrupt::new(),
        policy: Policy::default(),
        pairs,
        others: Default::default(),
    };
    let json_path = repo.join("bench/tuner.json");
    // With TL_TUNER_ONLY, the other workloads' figures stay as this label last recorded them.
    let mut outs: Vec<Outcome> = if only.is_some() {
        std::fs::read_to_string(&json_path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| serde_json::from_value(v[&label]["workloads"].clone()).ok())
            .unwrap_or_default()
    } else {
        vec![]
    };
    for name in &names {
        outs.retain(|o| &o.workload != name);
        outs.push(run_workload(
            &ctx,
            name,
            &wl_root.join(name),
            &tmp,
            &bin,
            &workers,
            repeats,
        ));
        outs.sort_by(|a, b| a.workload.cmp(&b.workload));
        // After every workload: a crash later loses nothing.
        let mut all: serde_json::Map<String, Value> = std::fs::read_to_string(&json_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        all.insert(
            label.clone(),
            json!({"machine": common::machine(), "sweep_repeats": repeats, "check_pairs": pairs,
                   "sweep_workers": workers, "binary": bin.display().to_string(), "workloads": outs}),
        );
        std::fs::write(
            &json_path,
            serde_json::to_string_pretty(&Value::Object(all)).unwrap(),
        )
        .unwrap();
    }
    let total_s = outs.iter().map(|o| o.total_s).sum();
    let md = render(&outs, &label, &note, repeats, pairs, total_s);
    common::write_section(
        &repo.join("bench/RESULTS.md"),
        &format!("Tuner vs exhaustive sweep — {label}"),
        &md,
    );
    if std::env::var("TL_KEEP_TMP").is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    println!("{md}");
}

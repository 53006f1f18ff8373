//! Decision-quality benchmark: how often does the keep/revert rule keep a
//! change that cannot matter, and how often does it keep real gains of 5% and
//! 20% — and how many bench runs does each decision take?
//!
//! Two parts, both on this machine with real PyTorch:
//! 1. Real trials: a copy of `examples/slow_loader` (num_workers=2, 20 steps),
//!    candidate vs incumbent measured by tuneloop's own `measure_interleaved`
//!    with the default policy. Null changes: a comment added; the same setting
//!    written differently (`num_workers=2` → `num_workers=int(2)`). Real gains:
//!    the per-item storage latency lowered so throughput rises by about 5% and
//!    20% (the gain actually reached is measured and reported).
//! 2. Resampled trials: a long A/A series of real runs of the incumbent is
//!    recorded once; each simulated trial reads consecutive runs from a random
//!    offset in the measurement order A B B A …, scales the candidate's by
//!    1.00 / 1.05 / 1.20, and applies a first comparison's rule (`stats::decide_first`) pair by
//!    pair. This gives thousands of trials with this machine's real noise and
//!    drift, which real trials alone could not afford.
//!
//! 3. The equivalence rule for cheaper settings (`stats::decide_cheaper`: keep
//!    when no more than min_gain slower), resampled the same way with the
//!    candidate scaled by 1.00 / 0.99 / 0.97 / 0.95: its error rate is how
//!    often a candidate min_gain slower or worse is kept as "as fast".
//!
//! `cargo bench --bench decision` (or `make bench-decision`); sizes by env:
//! TL_REAL_TRIALS (per kind, default 12), TL_POOL_RUNS (default 120),
//! TL_SIM_TRIALS (per kind, default 20000). Writes bench/decision.json and the
//! "Decision quality" section of bench/RESULTS.md, and the "Equivalence rule"
//! section. TL_POOL_FROM=bench/decision.json reuses that file's recorded A/A
//! series and runs only the resampling (seconds, no measurement): it writes
//! only the "Equivalence rule" section.

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;
use tuneloop::bench::stats::{self, PairedRatio, Verdict};
use tuneloop::bench::{Bencher, Mode};
use tuneloop::config::{Policy, Workspace};
use tuneloop::edit;
use tuneloop::process::Interrupt;
use tuneloop::run_loop::measure_interleaved;
use tuneloop::store::FileSet;

/// splitmix64: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn workspace(dir: &Path, repo: &Path) -> (Workspace, String) {
    let src = std::fs::read_to_string(repo.join("examples/slow_loader/train.py")).unwrap();
    let site = edit::scan_source("train.py", &src).unwrap().remove(0);
    let src = edit::set_kwarg(&src, &site, "num_workers", Some("2")).unwrap();
    std::fs::write(dir.join("train.py"), &src).unwrap();
    std::fs::write(
        dir.join("tuneloop.toml"),
        "[project]\nroot = \".\"\npython = \"~/.cache/tuneloop/venv/bin/python\"\neditable = [\"train.py\"]\n[bench]\nentry = \"train:build\"\nsteps = 20\nwarmup_steps = 3\ntimeout_s = 300\n",
    )
    .unwrap();
    (Workspace::load(dir).unwrap(), src)
}

#[derive(Default, Clone, serde::Serialize)]
struct Tally {
    kind: String,
    trials: usize,
    kept: usize,
    runs: Vec<u32>,
    /// Median of all candidate/incumbent ratios seen (real trials: the true effect).
    pooled_ratio: f64,
}

impl Tally {
    fn keep_rate(&self) -> f64 {
        self.kept as f64 / self.trials.max(1) as f64
    }
    /// The tally without its per-trial list: runs per decision as a histogram.
    fn summary(&self) -> serde_json::Value {
        let mut hist = std::collections::BTreeMap::new();
        for r in &self.runs {
            *hist.entry(r.to_string()).or_insert(0u32) += 1;
        }
        json!({"kind": self.kind, "trials": self.trials, "kept": self.kept, "keep_rate": self.keep_rate(),
               "runs_histogram": hist})
    }

    fn runs_summary(&self) -> (f64, f64, u32) {
        let v: Vec<f64> = self.runs.iter().map(|&r| r as f64).collect();
        (
            v.iter().sum::<f64>() / v.len().max(1) as f64,
            stats::median(&v),
            self.runs.iter().cloned().max().unwrap_or(0),
        )
    }
}

/// One simulated trial over the A/A pool: ABBA order from `offset`, decided
/// pair by pair by `rule` (`stats::decide` or `stats::decide_cheaper`).
fn sim_trial(
    pool: &[f64],
    offset: usize,
    gain: f64,
    policy: &Policy,
    rule: fn(&PairedRatio, &tuneloop::config::DecisionPolicy) -> Verdict,
) -> (Verdict, u32) {
    let (v, _, n) = sim_trial_pr(pool, offset, gain, policy, rule);
    (v, n)
}

/// [`sim_trial`], with the paired ratio the verdict was reached on.
fn sim_trial_pr(
    pool: &[f64],
    offset: usize,
    gain: f64,
    policy: &Policy,
    rule: fn(&PairedRatio, &tuneloop::config::DecisionPolicy) -> Verdict,
) -> (Verdict, PairedRatio, u32) {
    let d = &policy.decision;
    let (mut cand, mut inc) = (Vec::new(), Vec::new());
    let mut i = offset;
    // The rule stops at its own cap; this bound only ends a rule that never
    // decides (`decide_beside_load` runs to `max_repeats_beside_load`).
    let bound = d.max_repeats.max(d.max_repeats_beside_load);
    for k in 0..bound {
        let (a, b) = (pool[i % pool.len()], pool[(i + 1) % pool.len()]);
        i += 2;
        // Pair k: incumbent first on even k, candidate first on odd k.
        if k % 2 == 0 {
            inc.push(a);
            cand.push(b * gain);
        } else {
            cand.push(a * gain);
            inc.push(b);
        }
        let pr = PairedRatio::new(&cand, &inc, d.confidence);
        let v = rule(&pr, d);
        if v != Verdict::Undecided {
            return (v, pr, 2 * (k + 1));
        }
    }
    // A rule still open at the cap: reverted (not shown faster).
    let pr = PairedRatio::new(&cand, &inc, d.confidence);
    (Verdict::Revert, pr, 2 * bound)
}

/// `sim_trials` simulated trials of `rule` at `gain`, from offsets drawn by
/// an Rng seeded with `seed`: the keep rate (%) and the mean runs per
/// decision. `after` sees each verdict, with the Rng, for a follow-up trial.
fn keep_rate(
    series: &[f64],
    gain: f64,
    policy: &Policy,
    rule: fn(&PairedRatio, &tuneloop::config::DecisionPolicy) -> Verdict,
    seed: u64,
    sim_trials: usize,
    mut after: impl FnMut(Verdict, &mut Rng),
) -> (f64, f64) {
    let (mut kept, mut runs) = (0usize, 0u64);
    let mut r = Rng(seed);
    for _ in 0..sim_trials {
        let (v, n) = sim_trial(series, r.below(series.len()), gain, policy, rule);
        kept += (v == Verdict::Keep) as usize;
        runs += u64::from(n);
        after(v, &mut r);
    }
    (
        kept as f64 / sim_trials as f64 * 100.0,
        runs as f64 / sim_trials as f64,
    )
}

/// The rule as it was with the futility look from the third pair on: at two
/// pairs, the rule without the look.
fn decide_from3(pr: &PairedRatio, p: &tuneloop::config::DecisionPolicy) -> Verdict {
    if pr.pairs() < 3 {
        let off = tuneloop::config::DecisionPolicy {
            futility_confidence: 0.0,
            ..p.clone()
        };
        return stats::decide(pr, &off);
    }
    stats::decide(pr, p)
}

fn wilson_upper(k: usize, n: usize) -> f64 {
    // 95% upper bound of a binomial proportion (Wilson score interval).
    let (k, n, z) = (k as f64, n.max(1) as f64, 1.96f64);
    let p = k / n;
    let c = p + z * z / (2.0 * n);
    let s = z * ((p * (1.0 - p) + z * z / (4.0 * n)) / n).sqrt();
    (c + s) / (1.0 + z * z / n)
}

fn main() {
    if common::skip_unless_benchmarking("decision") {
        return;
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if let Ok(from) = std::env::var("TL_POOL_FROM") {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&from).unwrap()).unwrap();
        let pool: Vec<f64> = v["pool"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|x| x.as_f64())
            .collect();
        let sim_trials = common::env_u("TL_SIM_TRIALS", 20000);
        equivalence(&repo, &pool, sim_trials, &Policy::default(), &from);
        futility(&repo, &pool, sim_trials, &Policy::default(), &from);
        confirmation(&repo, &pool, sim_trials, &Policy::default(), &from);
        beside_load(&repo, &pool, sim_trials, &Policy::default(), &from);
        return;
    }
    let real_trials = common::env_u("TL_REAL_TRIALS", 12);
    let pool_runs = common::env_u("TL_POOL_RUNS", 120);
    let sim_trials = common::env_u("TL_SIM_TRIALS", 20000);
    let policy = Policy::default();
    let tmp = std::env::temp_dir().join(format!("tuneloop-decision-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let (ws, base_src) = workspace(&tmp, &repo);
    let bencher = Bencher::new(&ws, &tmp.join(".harness")).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let intr = Interrupt::new();
    let root = std::fs::canonicalize(&tmp).unwrap();
    let editable = vec!["train.py".to_string()];
    let base = FileSet::capture(&root, &editable).unwrap();
    let started = Instant::now();

    // ---- real trials
    let variant = |text: String| {
        FileSet(
            [("train.py".to_string(), text.into_bytes())]
                .into_iter()
                .collect(),
        )
    };
    let latency =
        |s: f64| base_src.replace("IO_LATENCY_S = 0.002", &format!("IO_LATENCY_S = {s:.6}"));
    // Per item: 2 ms sleep + ~0.4 ms CPU, two workers: time per item ∝ latency + CPU.
    let kinds: Vec<(&str, FileSet)> = vec![
        (
            "null: comment added",
            variant(format!("{base_src}# a comment: cannot matter\n")),
        ),
        (
            "null: same setting written differently",
            variant(base_src.replace("num_workers=2", "num_workers=int(2)")),
        ),
        (
            "gain ~5%: item latency 2.0 → 1.886 ms",
            variant(latency(0.001886)),
        ),
        (
            "gain ~20%: item latency 2.0 → 1.6 ms",
            variant(latency(0.0016)),
        ),
    ];
    let mut real: Vec<Tally> = Vec::new();
    for (kind, cand) in &kinds {
        let mut t = Tally {
            kind: kind.to_string(),
            ..Default::default()
        };
        let mut ratios = Vec::new();
        for i in 0..real_trials {
            let p = rt
                .block_on(measure_interleaved(
                    &bencher,
                    &root,
                    cand,
                    &base,
                    &policy,
                    None,
                    &intr,
                    |_, _, _| {},
                ))
                .unwrap_or_else(|f| panic!("bench failed: {}", f.error));
            t.trials += 1;
            t.kept += (p.verdict == Verdict::Keep) as usize;
            t.runs.push(p.runs());
            ratios.extend(p.ratio.ratios.iter().cloned());
            eprintln!(
                "[{:>5.0}s] {kind}: trial {} → {:?} in {} runs (ratio {:.3})",
                started.elapsed().as_secs_f64(),
                i + 1,
                p.verdict,
                p.runs(),
                p.ratio.median
            );
        }
        t.pooled_ratio = stats::median(&ratios);
        real.push(t);
    }
    base.apply(&root).unwrap();

    // ---- the A/A pool
    let mut pool = Vec::new();
    for i in 0..pool_runs {
        let m = rt
            .block_on(bencher.measure(Mode::Throughput, &intr))
            .unwrap();
        pool.push(m.samples_per_sec);
        if i % 20 == 19 {
            eprintln!(
                "[{:>5.0}s] A/A pool: {} runs",
                started.elapsed().as_secs_f64(),
                i + 1
            );
        }
    }
    let pool_med = stats::median(&pool);
    let adj: Vec<f64> = pool.windows(2).map(|w| (w[1] / w[0]).ln()).collect();
    let sd_pair = (adj.iter().map(|x| x * x).sum::<f64>() / adj.len().max(1) as f64).sqrt();

    // ---- resampled trials
    let mut rng = Rng(0x5eed);
    let mut sim: Vec<Tally> = Vec::new();
    for (kind, gain) in [
        ("null (×1.00)", 1.0),
        ("gain ×1.05", 1.05),
        ("gain ×1.20", 1.20),
    ] {
        let mut t = Tally {
            kind: kind.into(),
            pooled_ratio: gain,
            ..Default::default()
        };
        for _ in 0..sim_trials {
            let (v, runs) = sim_trial(
                &pool,
                rng.below(pool.len()),
                gain,
                &policy,
                stats::decide_first,
            );
            t.trials += 1;
            t.kept += (v == Verdict::Keep) as usize;
            t.runs.push(runs);
        }
        sim.push(t);
    }
    let _ = std::fs::remove_dir_all(&tmp);

    // ---- write the results
    let d = &policy.decision;
    let mut md = String::new();
    md.push_str(&format!(
        "Machine: this project's 2-core shared development box (other work was running at times: figures include that noise). \
         Policy defaults: repeats {}, max_repeats {}, confidence {} per look, noise_threshold {}, min_gain {}. \
         Workload: examples/slow_loader with num_workers=2, 20 timed steps, the runs made as `tuneloop start` makes them by default (forked from the fork server, each pair's load checked). Wall time {:.0} s.\n\n",
        d.repeats, d.max_repeats, d.confidence, d.noise_threshold, d.min_gain, started.elapsed().as_secs_f64()
    ));
    md.push_str(
        "**Real trials** (candidate and incumbent measured interleaved by tuneloop, each decision from scratch):\n\n",
    );
    md.push_str("| change | trials | kept | keep rate | 95% upper bound | true effect (median ratio) | runs per decision: mean / median / max |\n|---|---:|---:|---:|---:|---:|---|\n");
    for t in &real {
        let (mean, med, max) = t.runs_summary();
        md.push_str(&format!(
            "| {} | {} | {} | {:.1}% | {:.1}% | {:.3} | {:.1} / {:.0} / {} |\n",
            t.kind,
            t.trials,
            t.kept,
            t.keep_rate() * 100.0,
            wilson_upper(t.kept, t.trials) * 100.0,
            t.pooled_ratio,
            mean,
            med,
            max
        ));
    }
    md.push_str(&format!(
        "\n**Resampled trials** over a recorded A/A series of {} real runs (median {:.1} samples/sec; sd of ln(ratio) of adjacent runs {:.4}), \
         candidate scaled by the gain, same rule pair by pair:\n\n",
        pool.len(), pool_med, sd_pair
    ));
    md.push_str("| change | trials | kept | keep rate | 95% upper bound | runs per decision: mean / median / max |\n|---|---:|---:|---:|---:|---|\n");
    for t in &sim {
        let (mean, med, max) = t.runs_summary();
        md.push_str(&format!(
            "| {} | {} | {} | {:.2}% | {:.2}% | {:.1} / {:.0} / {} |\n",
            t.kind,
            t.trials,
            t.kept,
            t.keep_rate() * 100.0,
            wilson_upper(t.kept, t.trials) * 100.0,
            mean,
            med,
            max
        ));
    }
    let results = repo.join("bench/RESULTS.md");
    common::write_section(&results, "Decision quality", &md);
    std::fs::write(
        repo.join("bench/decision.json"),
        serde_json::to_string_pretty(&json!({
            "real": real,
            "resampled": sim.iter().map(Tally::summary).collect::<Vec<_>>(),
            "pool": pool,
            "policy": policy.decision,
        }))
        .unwrap(),
    )
    .unwrap();
    println!("{md}");
    equivalence(&repo, &pool, sim_trials, &policy, "this run's A/A series");
    futility(&repo, &pool, sim_trials, &policy, "this run's A/A series");
    confirmation(&repo, &pool, sim_trials, &policy, "this run's A/A series");
    beside_load(&repo, &pool, sim_trials, &policy, "this run's A/A series");
}

/// A synthetic A/A series: `n` runs of 1000 samples/sec with log-normal
/// noise of standard deviation `sd` (Box–Muller over the same splitmix64).
/// The recorded A/A series and synthetic log-normal series of each `sds`,
/// named for the tables' rows.
fn noise_pools(pool: &[f64], sds: &[f64], rng: &mut Rng) -> Vec<(String, Vec<f64>)> {
    let mut pools = vec![(format!("recorded ({} runs)", pool.len()), pool.to_vec())];
    for &sd in sds {
        pools.push((
            format!("log-normal, sd {sd:.2}"),
            lognormal_pool(4000, sd, rng),
        ));
    }
    pools
}

fn lognormal_pool(n: usize, sd: f64, rng: &mut Rng) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let u1 = ((rng.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            let u2 = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            1000.0 * (sd * z).exp()
        })
        .collect()
}

/// The futility look (`[decision] futility_confidence`) on and off, over
/// the recorded A/A series and over synthetic series of more noise (a
/// busy box, a fast loader timed over a fifth of a second): keep rates and
/// runs per decision. Writes the "The futility look" section.
fn futility(repo: &Path, pool: &[f64], sim_trials: usize, policy: &Policy, source: &str) {
    let started = Instant::now();
    let mut rng = Rng(0xf071);
    let off = Policy {
        decision: tuneloop::config::DecisionPolicy {
            futility_confidence: 0.0,
            ..policy.decision.clone()
        },
        ..policy.clone()
    };
    let pools = noise_pools(pool, &[0.05, 0.10, 0.20], &mut rng);
    let d = &policy.decision;
    let mut md = format!(
        "The futility look reverts a candidate once, from pair {} on, even the top of its {:.0}% interval lies under \
         1 + min_gain ({:.2}); the keep side (the {:.0}% interval above {:.2}, the median at {:.2}) is unchanged. Resampled as in \
         \"Decision quality\" (A B B A order, the candidate's runs scaled by the gain), over the A/A series from {source} and \
         over synthetic log-normal series of more noise; {sim_trials} trials a cell, {{secs}} s. Each cell: keep rate, mean \
         runs per decision: with the look at the cap as well (`stats::decide_first`, a first comparison's rule: revert \
         once {} pairs at the spread seen so far could not lift the {:.0}% interval's low end above {:.2}, from the top of \
         the {:.0}% interval) / with the look on the gain alone from pair {} / from pair 3 (the first design) / without \
         either.\n\n",
        stats::FUTILITY_FROM_PAIRS,
        d.futility_confidence * 100.0,
        1.0 + d.min_gain,
        d.confidence * 100.0,
        1.0 + d.noise_threshold,
        1.0 + d.min_gain,
        d.max_repeats,
        d.confidence * 100.0,
        1.0 + d.noise_threshold,
        d.futility_confidence * 100.0,
        stats::FUTILITY_FROM_PAIRS,
    );
    let gains = [1.0, 1.05, 1.10, 1.20];
    md.push_str("| noise | ×1.00 (null) | ×1.05 | ×1.10 | ×1.20 |\n|---|---|---|---|---|\n");
    for (name, series) in &pools {
        md.push_str(&format!("| {name} |"));
        for gain in gains {
            let mut cell = Vec::new();
            let rules: [fn(&PairedRatio, &tuneloop::config::DecisionPolicy) -> Verdict; 4] = [
                stats::decide_first,
                stats::decide,
                decide_from3,
                stats::decide,
            ];
            for (pol, rule) in [policy, policy, policy, &off].into_iter().zip(rules) {
                cell.push(keep_rate(
                    series,
                    gain,
                    pol,
                    rule,
                    0x5eed,
                    sim_trials,
                    |_, _| {},
                ));
            }
            md.push_str(&format!(
                " {:.2}%, {:.1} runs / {:.2}%, {:.1} runs / {:.2}%, {:.1} runs / {:.2}%, {:.1} runs |",
                cell[0].0,
                cell[0].1,
                cell[1].0,
                cell[1].1,
                cell[2].0,
                cell[2].1,
                cell[3].0,
                cell[3].1
            ));
        }
        md.push('\n');
    }
    let md = md.replace("{secs}", &format!("{:.1}", started.elapsed().as_secs_f64()));
    common::write_section(&repo.join("bench/RESULTS.md"), "The futility look", &md);
    println!("{md}");
}

/// A kept change measured again (`[decision] confirm_kept`,
/// `confirm_compute`): how often the second comparison holds it when it is
/// held only if the rule keeps it again, and when an open call at the cap
/// that passes the keep rule at 90% holds too (`stats::confirmed`), and when,
/// measured again beside load as well, anything not refuted stands
/// (`stats::refuted`). At ×1.00 a hold is a keep that load made surviving
/// the re-measure (an error); at the gains it is the confirmation's power.
/// Writes "The confirmation".
fn confirmation(repo: &Path, pool: &[f64], sim_trials: usize, policy: &Policy, source: &str) {
    let started = Instant::now();
    let mut rng = Rng(0xc0f1);
    let pools = noise_pools(pool, &[0.05, 0.10, 0.15], &mut rng);
    let d = &policy.decision;
    let gains = [1.0, 1.1, 1.2, 1.3];
    let mut md = format!(
        "A kept change measured again (a compute change, or one kept while other processes took cores): fresh pairs under \
         the same rule, up to {} pairs. It holds when the rule keeps it again, or when the pairs run to the cap still open \
         with the median at {:.2} or more and the {:.0}% interval above {:.2} (`stats::confirmed`). Resampled as in \"The futility \
         look\" over the A/A series from {source} and over synthetic log-normal series; the second comparison's candidate \
         runs scaled by the change's true effect; {sim_trials} trials a cell, {{secs}} s. Each cell: held rate when only a \
         second keep holds / when an open call passing at the cap holds too / when, measured again beside load as well, \
         anything not refuted stands (`stats::refuted`). At ×1.00 a hold is an error (a keep that load made, \
         surviving the re-measure); at the gains it is the confirmation's power.\n\n\
         | noise | ×1.00 (null) | ×1.10 | ×1.20 | ×1.30 |\n|---|---|---|---|---|\n",
        d.max_repeats,
        1.0 + d.min_gain,
        stats::CONFIRM_AT_CAP_CONFIDENCE * 100.0,
        1.0 + d.noise_threshold,
    );
    for (name, series) in &pools {
        md.push_str(&format!("| {name} |"));
        for gain in gains {
            let (mut again, mut held, mut stands) = (0usize, 0usize, 0usize);
            let mut r = Rng(0xc0f2);
            for _ in 0..sim_trials {
                let (v, pr, _) =
                    sim_trial_pr(series, r.below(series.len()), gain, policy, stats::decide);
                again += (v == Verdict::Keep) as usize;
                let confirmed = stats::confirmed(v, &pr, d);
                held += confirmed as usize;
                stands += (confirmed || !stats::refuted(&pr, d)) as usize;
            }
            let pct = |k: usize| k as f64 / sim_trials as f64 * 100.0;
            md.push_str(&format!(
                " {:.2}% / {:.2}% / {:.2}% |",
                pct(again),
                pct(held),
                pct(stands)
            ));
        }
        md.push('\n');
    }
    let md = md.replace("{secs}", &format!("{:.1}", started.elapsed().as_secs_f64()));
    common::write_section(&repo.join("bench/RESULTS.md"), "The confirmation", &md);
    println!("{md}");
}

/// A synthetic series of runs beside a bursty load on a 2-core box: each
/// run, with probability one half, shares its time with a burst that takes
/// a core for part of it and loses 10–50% (uniform) of its rate, on top of
/// log-normal noise of sd 0.05.
fn bursty_pool(n: usize, rng: &mut Rng) -> Vec<f64> {
    lognormal_pool(n, 0.05, rng)
        .into_iter()
        .map(|x| {
            if rng.below(2) == 0 {
                let loss = 0.1 + 0.4 * (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
                x * (1.0 - loss)
            } else {
                x
            }
        })
        .collect()
}

/// More pairs for a first comparison beside load
/// (`[decision] max_repeats_beside_load`, `stats::decide_beside_load`):
/// keep rates and runs per decision with and without the extension, over
/// noise as load spreads runs, and what a null change kept that way does at
/// its second comparison beside load (stands unless refuted). Writes "More
/// pairs beside load".
fn beside_load(repo: &Path, pool: &[f64], sim_trials: usize, policy: &Policy, source: &str) {
    let started = Instant::now();
    let mut rng = Rng(0xb51d);
    let mut pools = noise_pools(pool, &[0.10, 0.15, 0.20], &mut rng);
    pools.push((
        "bursty load (half the runs lose 10–50%)".into(),
        bursty_pool(4000, &mut rng),
    ));
    let d = &policy.decision;
    let gains = [1.0, 1.05, 1.10, 1.20, 1.30];
    let mut md = format!(
        "A first comparison whose runs saw load: a call still open at {} pairs whose median reaches {:.2} gets more \
         pairs, up to {}, while it stays so (`stats::decide_beside_load`); the keep rule is the same at every look. \
         Resampled as in \"The futility look\" over the A/A series from {source}, synthetic log-normal series and a \
         synthetic bursty series (each run, with probability ½, loses 10–50% of its rate to a burst, over log-normal \
         noise of sd 0.05); {sim_trials} trials a cell, {{secs}} s. Each cell: keep rate and mean runs per decision \
         with the extension / without it. The last column: of the null changes the extension kept, how many have a \
         second comparison beside load (same rule, fresh pairs) that does not refute them, so they stay.\n\n\
         | noise | ×1.00 (null) | ×1.05 | ×1.10 | ×1.20 | ×1.30 | null kept, then stands |\n|---|---|---|---|---|---|---|\n",
        d.max_repeats,
        1.0 + d.min_gain,
        d.max_repeats_beside_load,
    );
    for (name, series) in &pools {
        md.push_str(&format!("| {name} |"));
        let mut null_stands = (0usize, 0usize);
        for gain in gains {
            let mut cell = Vec::new();
            let rules: [fn(&PairedRatio, &tuneloop::config::DecisionPolicy) -> Verdict; 2] =
                [stats::decide_beside_load, stats::decide_first];
            for (extended, rule) in [true, false].into_iter().zip(rules) {
                cell.push(keep_rate(
                    series,
                    gain,
                    policy,
                    rule,
                    0xb51e,
                    sim_trials,
                    |v, r| {
                        if gain == 1.0 && v == Verdict::Keep && extended {
                            let (v2, pr2, _) = sim_trial_pr(
                                series,
                                r.below(series.len()),
                                gain,
                                policy,
                                stats::decide,
                            );
                            null_stands.0 += 1;
                            null_stands.1 += (stats::confirmed(v2, &pr2, d)
                                || !stats::refuted(&pr2, d))
                                as usize;
                        }
                    },
                ));
            }
            md.push_str(&format!(
                " {:.2}%, {:.1} runs / {:.2}%, {:.1} runs |",
                cell[0].0, cell[0].1, cell[1].0, cell[1].1
            ));
        }
        md.push_str(&format!(" {} of {} |\n", null_stands.1, null_stands.0));
    }
    let md = md.replace("{secs}", &format!("{:.1}", started.elapsed().as_secs_f64()));
    common::write_section(
        &repo.join("bench/RESULTS.md"),
        "More pairs beside load",
        &md,
    );
    println!("{md}");
}

/// The equivalence rule's resampled trials: a cheaper candidate as fast,
/// slightly slower, at the min_gain line, and past it. Writes the
/// "Equivalence rule" section of bench/RESULTS.md.
fn equivalence(repo: &Path, pool: &[f64], sim_trials: usize, policy: &Policy, source: &str) {
    let started = Instant::now();
    let d = &policy.decision;
    let floor = 1.0 - d.min_gain;
    let mut rng = Rng(0xc4ea9e);
    let mut rows = Vec::new();
    for (kind, scale) in [
        ("as fast (×1.00)", 1.0),
        ("1% slower (×0.99)", 0.99),
        ("at the min_gain line (×0.97)", floor),
        ("5% slower (×0.95)", 0.95),
    ] {
        let mut t = Tally {
            kind: kind.into(),
            pooled_ratio: scale,
            ..Default::default()
        };
        for _ in 0..sim_trials {
            let (v, runs) = sim_trial(
                pool,
                rng.below(pool.len()),
                scale,
                policy,
                stats::decide_cheaper,
            );
            t.trials += 1;
            t.kept += (v == Verdict::Keep) as usize;
            t.runs.push(runs);
        }
        rows.push(t);
    }
    let pool_med = stats::median(pool);
    let mut md = format!(
        "The rule for a cheaper setting (fewer workers, a kept setting dropped): keep it when the whole {:.0}% interval of \
         cheaper/incumbent lies above {floor:.2} (1 − min_gain), checked pair by pair from {} pairs up to {}. Resampled over \
         the A/A series of {} real runs from {source} (median {pool_med:.1} samples/sec), the cheaper candidate's runs \
         scaled; {} trials a row, {{secs}} s. A keep at ×{floor:.2} or below is an error (a real loss of min_gain passed as \
         \"as fast\"); at ×1.00 a keep is the rule's power.\n\n",
        d.confidence * 100.0,
        d.repeats,
        d.max_repeats,
        pool.len(),
        sim_trials,
    );
    md.push_str("| cheaper candidate | trials | kept | keep rate | 95% upper bound | runs per decision: mean / median / max |\n|---|---:|---:|---:|---:|---|\n");
    for t in &rows {
        let (mean, med, max) = t.runs_summary();
        md.push_str(&format!(
            "| {} | {} | {} | {:.2}% | {:.2}% | {:.1} / {:.0} / {} |\n",
            t.kind,
            t.trials,
            t.kept,
            t.keep_rate() * 100.0,
            wilson_upper(t.kept, t.trials) * 100.0,
            mean,
            med,
            max
        ));
    }
    // The futility look on and off, by noise (`stats::futile_cheaper`): it
    // only reverts sooner, so the ×0.97 and ×0.95 columns cannot gain keeps;
    // the ×1.00 and ×0.99 ones show the power it costs, the runs what it saves.
    let off = Policy {
        decision: tuneloop::config::DecisionPolicy {
            futility_confidence: 0.0,
            ..policy.decision.clone()
        },
        ..policy.clone()
    };
    let scales = [1.0, 0.99, floor, 0.95];
    md.push_str(&format!(
        "\nThe futility look (from pair {}: revert once {} pairs at the spread seen so far could not lift the low end above \
         {floor:.2}, from the top of the {:.0}% interval), on and off, over the recorded series and synthetic log-normal \
         series of more noise (the sd of one run's ln(samples/sec)). Each cell: keep rate, mean runs per decision, with \
         the look / without it.\n\n| noise | ×1.00 | ×0.99 | ×{floor:.2} | ×0.95 |\n|---|---|---|---|---|\n",
        stats::FUTILITY_FROM_PAIRS,
        d.max_repeats,
        d.futility_confidence * 100.0,
    ));
    for (name, series) in &noise_pools(pool, &[0.02, 0.05, 0.10], &mut rng) {
        md.push_str(&format!("| {name} |"));
        for scale in scales {
            let on = keep_rate(
                series,
                scale,
                policy,
                stats::decide_cheaper,
                0xc4ea,
                sim_trials,
                |_, _| {},
            );
            let no = keep_rate(
                series,
                scale,
                &off,
                stats::decide_cheaper,
                0xc4ea,
                sim_trials,
                |_, _| {},
            );
            md.push_str(&format!(
                " {:.2}%, {:.1} runs / {:.2}%, {:.1} runs |",
                on.0, on.1, no.0, no.1
            ));
        }
        md.push('\n');
    }
    let md = md.replace("{secs}", &format!("{:.1}", started.elapsed().as_secs_f64()));
    common::write_section(&repo.join("bench/RESULTS.md"), "Equivalence rule", &md);
    println!("{md}");
}

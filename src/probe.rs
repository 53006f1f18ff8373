//! `tuneloop probe`: how fast this machine can move the project's batches at
//! all, measured natively through libtorch (the `tch` crate), so the report can
//! say how far the training loop is from the data path's physical limit.
//!
//! This module owns the probe: choosing the bytes per sample (an option, else
//! the latest run's `baseline/bench.json`, else a stated default), the
//! measurement itself (host memory copy of a batch-sized tensor; with CUDA,
//! host-to-device copies from pageable and from pinned memory), the implied
//! samples/sec ceilings, `runs/<id>/probe.json`, and the probe's text. The
//! measurement needs the `libtorch` cargo feature (off by default: tch pins one
//! exact libtorch, and a project must stay free to use its own PyTorch); without
//! it this module only reads probe.json for the report and explains how to
//! build with the feature. The report's model of the result is
//! [`DataPathLimit`].

use std::path::{Path, PathBuf};

use crate::report::DataPathLimit;
use crate::store;

/// The probe's result in a run folder.
pub const PROBE_FILE: &str = "probe.json";

/// What `tuneloop probe` says in a build without the feature.
pub const BUILD_HINT: &str = "`tuneloop probe` needs the `libtorch` cargo feature, which this build does not have.\n\
Build it against the PyTorch of your Python environment (torch 2.13.0, the version tch 0.26 expects), with that virtualenv active:\n  \
LIBTORCH_USE_PYTORCH=1 cargo install --path . --features libtorch\n\
(`make test` in the tuneloop repository builds and tests it too; see docs/probe.md)";

/// Bytes per sample when nothing says otherwise: one 3×224×224 float32 image
/// and an int64 label.
pub const DEFAULT_BYTES_PER_SAMPLE: u64 = 3 * 224 * 224 * 4 + 8;
/// Batch size when nothing says otherwise.
pub const DEFAULT_BATCH_SIZE: u64 = 64;
const DEFAULT_SOURCE: &str = "default: a 3×224×224 float32 image + int64 label";

/// The batch the probe copies, and where its size came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Bytes of one batch (all its tensors).
    pub batch_bytes: u64,
    pub batch_size: u64,
    /// In words: a run's baseline, an option, or the default.
    pub source: String,
}

impl Workload {
    pub fn bytes_per_sample(&self) -> f64 {
        self.batch_bytes as f64 / self.batch_size.max(1) as f64
    }
}

/// The batch of a baseline's measurements (`baseline/bench.json`): the first
/// run (or the profiled one) that reports both `batch_bytes` and `batch_size`.
pub fn workload_from_bench_json(path: &Path) -> Option<(u64, u64)> {
    let b: crate::run_folder::BaselineBench =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    b.runs
        .iter()
        .chain(b.profiled.iter())
        .find_map(|m| match (m.batch_bytes, m.batch_size) {
            (Some(b), Some(n)) if b > 0 && n > 0 => Some((b, n)),
            _ => None,
        })
}

/// The newest run in `runs_dir` whose baseline reports its batch in bytes.
pub fn latest_baseline(runs_dir: &Path) -> Option<(PathBuf, u64, u64)> {
    store::list_runs(runs_dir).into_iter().rev().find_map(|d| {
        workload_from_bench_json(&d.join("baseline/bench.json")).map(|(b, n)| (d, b, n))
    })
}

fn run_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// The batch to probe: `--bytes-per-sample` when given (an explicit option
/// wins), else the latest run's baseline, else the default. The batch size is
/// `--batch-size`, else the baseline's, else [`DEFAULT_BATCH_SIZE`].
pub fn choose_workload(
    runs_dir: Option<&Path>,
    bytes_per_sample: Option<u64>,
    batch_size: Option<u64>,
) -> Workload {
    let baseline = runs_dir.and_then(latest_baseline);
    let n = batch_size
        .or(baseline.as_ref().map(|b| b.2))
        .unwrap_or(DEFAULT_BATCH_SIZE)
        .max(1);
    match (bytes_per_sample, baseline) {
        (Some(bps), _) => Workload {
            batch_bytes: bps.max(1) * n,
            batch_size: n,
            source: "--bytes-per-sample".into(),
        },
        (None, Some((dir, bytes, base_n))) => {
            let per = bytes as f64 / base_n as f64;
            Workload {
                batch_bytes: (per * n as f64).round().max(1.0) as u64,
                batch_size: n,
                source: format!(
                    "baseline of run {}: {bytes} bytes in a batch of {base_n}",
                    run_name(&dir)
                ),
            }
        }
        (None, None) => Workload {
            batch_bytes: DEFAULT_BYTES_PER_SAMPLE * n,
            batch_size: n,
            source: DEFAULT_SOURCE.into(),
        },
    }
}

/// A run's probe result, when the run was made with the feature.
pub fn read_probe(run_dir: &Path) -> Option<DataPathLimit> {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join(PROBE_FILE)).ok()?).ok()
}

/// Bandwidths in GB/s and the workload → the full result, with the implied
/// ceilings (bandwidth / bytes per sample) and a note on what they mean here.
pub fn limits(w: &Workload, host_copy_gbps: f64, h2d: Option<(f64, f64)>) -> DataPathLimit {
    let bps = w.bytes_per_sample();
    let ceiling = |gbps: f64| gbps * 1e9 / bps;
    let note = match h2d {
        None => "no CUDA on this machine: batches never cross to a device, so pin_memory cannot matter here; \
                 the data path is bounded by host memory copies"
            .to_string(),
        Some((pageable, pinned)) if pinned >= 1.2 * pageable => format!(
            "pinned memory reaches the device {:.1}× as fast as pageable memory: pin_memory=True can pay",
            pinned / pageable
        ),
        Some(_) => "pinned and pageable copies to the device run at about the same speed: pin_memory is unlikely to matter"
            .to_string(),
    };
    DataPathLimit {
        cuda_available: h2d.is_some(),
        host_copy_gbps,
        h2d_pageable_gbps: h2d.map(|h| h.0),
        h2d_pinned_gbps: h2d.map(|h| h.1),
        bytes_per_sample: bps,
        batch_bytes: w.batch_bytes,
        bytes_source: w.source.clone(),
        host_copy_ceiling_sps: ceiling(host_copy_gbps),
        h2d_pageable_ceiling_sps: h2d.map(|h| ceiling(h.0)),
        h2d_pinned_ceiling_sps: h2d.map(|h| ceiling(h.1)),
        note,
    }
}

/// The probe's result for a person.
pub fn render_text(d: &DataPathLimit) -> String {
    let row = |name: &str, gbps: f64, sps: f64| {
        format!("  {name:<22} {gbps:>8.2} GB/s  → {sps:>14.1} samples/sec\n")
    };
    let mut out = String::from("data path limits (measured natively through libtorch)\n");
    out.push_str(&format!(
        "  bytes per sample: {:.0} ({})\n",
        d.bytes_per_sample, d.bytes_source
    ));
    out.push_str(&format!("  batch copied: {} bytes\n", d.batch_bytes));
    out.push_str(&row(
        "host memory copy",
        d.host_copy_gbps,
        d.host_copy_ceiling_sps,
    ));
    if let (Some(g), Some(s)) = (d.h2d_pageable_gbps, d.h2d_pageable_ceiling_sps) {
        out.push_str(&row("to device, pageable", g, s));
    }
    if let (Some(g), Some(s)) = (d.h2d_pinned_gbps, d.h2d_pinned_ceiling_sps) {
        out.push_str(&row("to device, pinned", g, s));
    }
    out.push_str(&format!(
        "data-path limit: {:.1} samples/sec\n",
        d.limit_sps()
    ));
    out.push_str(&format!("note: {}\n", d.note));
    out
}

/// Called once a run's baseline is measured: with the feature, probes with
/// the baseline's batch and writes `runs/<id>/probe.json` (a failure is a
/// warning, never the run's end); without it, nothing.
pub fn after_baseline(run_dir: &Path) {
    #[cfg(feature = "libtorch")]
    if let Err(e) = write_for_run(run_dir) {
        eprintln!("warning: the libtorch probe failed, the report will not show the data-path limit: {e:#}");
    }
    #[cfg(not(feature = "libtorch"))]
    let _ = run_dir;
}

/// Probes with the run's baseline batch (or the default) and writes probe.json.
#[cfg(feature = "libtorch")]
pub fn write_for_run(run_dir: &Path) -> anyhow::Result<DataPathLimit> {
    let w = match workload_from_bench_json(&run_dir.join("baseline/bench.json")) {
        Some((bytes, n)) => Workload {
            batch_bytes: bytes,
            batch_size: n,
            source: format!("baseline of run {}", run_name(run_dir)),
        },
        None => choose_workload(None, None, None),
    };
    let d = native::measure(&w)?;
    crate::fsio::write_json(&run_dir.join(PROBE_FILE), &d)?;
    Ok(d)
}

#[cfg(feature = "libtorch")]
pub use native::measure;

/// The measurements through tch.
#[cfg(feature = "libtorch")]
mod native {
    use std::time::Instant;

    use anyhow::{Context, Result};
    use tch::{Cuda, Device, Kind, Tensor};

    use super::{limits, Workload};
    use crate::bench::stats;
    use crate::report::DataPathLimit;

    /// Timed repetitions per figure (the median is kept).
    const REPEATS: usize = 7;
    /// Each timed repetition copies until it lasts at least this long.
    const MIN_REPEAT_S: f64 = 0.02;
    const MAX_COPIES: usize = 10_000;
    /// Larger batches are probed with a tensor of this size (bandwidth does not grow past it).
    const MAX_TENSOR_BYTES: u64 = 1 << 30;

    /// Median GB/s of `copy`, which moves `bytes` per call; `sync` waits for
    /// the copies to end (CUDA copies may still be in flight).
    fn bandwidth(bytes: u64, mut copy: impl FnMut() -> Result<()>, sync: impl Fn()) -> Result<f64> {
        copy()?; // warm-up: first-touch, allocator, CUDA context
        sync();
        let t = Instant::now();
        copy()?;
        sync();
        let one = t.elapsed().as_secs_f64().max(1e-9);
        let n = ((MIN_REPEAT_S / one).ceil() as usize).clamp(1, MAX_COPIES);
        let mut gbps = Vec::with_capacity(REPEATS);
        for _ in 0..REPEATS {
            let t = Instant::now();
            for _ in 0..n {
                copy()?;
            }
            sync();
            gbps.push(bytes as f64 * n as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
        Ok(stats::median(&gbps))
    }

    /// Puts libtorch's intra-op thread count back when the probe ends.
    struct Threads(i32);
    impl Drop for Threads {
        fn drop(&mut self) {
            tch::set_num_threads(self.0);
        }
    }

    /// Host copy always; with CUDA also host-to-device from pageable and
    /// pinned memory. One thread, like a DataLoader worker (torch runs them
    /// with one) and the pin-memory thread: one copy stream, and figures that
    /// do not swing when other processes want the cores (a two-thread copy of
    /// a 256 KiB tensor measured 0.04 to 40 GB/s on a busy 2-core machine).
    pub fn measure(w: &Workload) -> Result<DataPathLimit> {
        let _restore = Threads(tch::get_num_threads());
        tch::set_num_threads(1);
        let elems = (w.batch_bytes.min(MAX_TENSOR_BYTES).div_ceil(4)).max(1) as i64;
        let bytes = elems as u64 * 4;
        let cpu = (Kind::Float, Device::Cpu);
        let src = Tensor::f_ones([elems], cpu).context("allocating the source tensor")?;
        let mut dst = Tensor::f_zeros([elems], cpu).context("allocating the destination tensor")?;
        let host =
            bandwidth(bytes, || Ok(dst.f_copy_(&src)?), || {}).context("host memory copy")?;
        let h2d = if Cuda::is_available() {
            let gpu = Device::Cuda(0);
            let sync = || Cuda::synchronize(0);
            let mut on_gpu =
                Tensor::f_zeros([elems], (Kind::Float, gpu)).context("allocating on the device")?;
            let pageable =
                bandwidth(bytes, || Ok(on_gpu.f_copy_(&src)?), sync).context("pageable copy")?;
            let pinned_src = src.f_pin_memory(gpu).context("pinning host memory")?;
            let pinned = bandwidth(bytes, || Ok(on_gpu.f_copy_(&pinned_src)?), sync)
                .context("pinned copy")?;
            Some((pageable, pinned))
        } else {
            None
        };
        let mut d = limits(w, host, h2d);
        if w.batch_bytes > MAX_TENSOR_BYTES {
            d.note.push_str(&format!(
                "; probed with a {MAX_TENSOR_BYTES}-byte tensor (the batch is larger)"
            ));
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace_with_baseline(batch_bytes: u64, batch_size: u64) -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("runs/20260101-000000");
        std::fs::create_dir_all(run.join("baseline")).unwrap();
        std::fs::write(run.join("events.jsonl"), "").unwrap();
        let m = serde_json::json!({"samples_per_sec": 10.0, "batch_size": batch_size, "batch_bytes": batch_bytes});
        crate::fsio::write_json(
            &run.join("baseline/bench.json"),
            &serde_json::json!({"profiled": m, "runs": [m]}),
        )
        .unwrap();
        (t, run)
    }

    #[test]
    fn probe_workload_comes_from_the_latest_baseline() {
        let (t, _) = workspace_with_baseline(6400, 64);
        let w = choose_workload(Some(&t.path().join("runs")), None, None);
        assert_eq!((w.batch_bytes, w.batch_size), (6400, 64));
        assert_eq!(w.bytes_per_sample(), 100.0);
        assert!(w.source.contains("20260101-000000"), "{}", w.source);
        // An explicit option wins over the baseline; --batch-size scales the batch.
        let w = choose_workload(Some(&t.path().join("runs")), Some(10), Some(8));
        assert_eq!(
            (w.batch_bytes, w.batch_size, w.source.as_str()),
            (80, 8, "--bytes-per-sample")
        );
        let w = choose_workload(Some(&t.path().join("runs")), None, Some(8));
        assert_eq!((w.batch_bytes, w.batch_size), (800, 8));
    }

    #[test]
    fn probe_workload_defaults_when_no_baseline_has_batch_bytes() {
        let t = tempfile::tempdir().unwrap();
        let w = choose_workload(Some(t.path()), None, None);
        assert_eq!(w.batch_bytes, DEFAULT_BYTES_PER_SAMPLE * DEFAULT_BATCH_SIZE);
        assert!(w.source.starts_with("default"), "{}", w.source);
        // A contract-mode baseline has no batch_bytes: the default again.
        let (t, run) = workspace_with_baseline(0, 64);
        std::fs::write(
            run.join("baseline/bench.json"),
            r#"{"runs":[{"samples_per_sec":5.0}]}"#,
        )
        .unwrap();
        assert!(choose_workload(Some(&t.path().join("runs")), None, None)
            .source
            .starts_with("default"));
    }

    #[test]
    fn probe_limits_follow_bandwidth_over_bytes() {
        let w = Workload {
            batch_bytes: 1000 * 64,
            batch_size: 64,
            source: "test".into(),
        };
        let cpu = limits(&w, 10.0, None);
        assert_eq!(cpu.host_copy_ceiling_sps, 1e7);
        assert_eq!(cpu.limit_sps(), 1e7);
        assert!(!cpu.cuda_available && cpu.h2d_pinned_gbps.is_none());
        assert!(
            cpu.note.contains("pin_memory cannot matter"),
            "{}",
            cpu.note
        );
        let gpu = limits(&w, 10.0, Some((2.0, 5.0)));
        assert_eq!(gpu.h2d_pinned_ceiling_sps, Some(5e6));
        assert_eq!(
            gpu.limit_sps(),
            5e6,
            "the faster device copy, under the host copy"
        );
        assert!(gpu.note.contains("2.5×"), "{}", gpu.note);
        assert!(
            limits(&w, 1.0, Some((2.0, 5.0))).limit_sps() == 1e6,
            "host copy binds"
        );
    }

    #[test]
    fn probe_json_round_trips_and_reaches_the_report_headline() {
        let w = Workload {
            batch_bytes: 64_000,
            batch_size: 64,
            source: "test".into(),
        };
        let d = limits(&w, 10.0, None);
        let t = tempfile::tempdir().unwrap();
        assert_eq!(read_probe(t.path()), None);
        crate::fsio::write_json(&t.path().join(PROBE_FILE), &d).unwrap();
        assert_eq!(read_probe(t.path()), Some(d.clone()));

        // A report.json from before the field: no data path.
        let mut r: crate::report::RunReport = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "run_id": "r", "project": "p", "agent": "builtin", "language": "en",
            "started_at": "t", "baseline_sps": 5e4, "final_sps": 1e5, "speedup": 2.0,
            "stop_reason": "done", "interrupted": false, "total_cost_usd": 0.0, "agent_time_ms": 0,
            "wall_s": 1.0, "bench_runs": 3, "turns": [], "kept_diff": ""
        }))
        .unwrap();
        assert!(r.data_path.is_none(), "older reports have no data path");
        assert!(
            !crate::report::render_json(&r).contains("data_path"),
            "absent, not null"
        );
        assert!(!crate::report::render_markdown(&r).contains("Data-path limit"));
        r.data_path = Some(d);
        let md = crate::report::render_markdown(&r);
        let line = md
            .lines()
            .find(|l| l.contains("Data-path limit"))
            .expect(&md);
        assert_eq!(
            line,
            "- **Data-path limit:** 10.0M samples/sec (host copy 10.0 GB/s · no CUDA: pin_memory cannot matter here; final is 1.0% of it)"
        );
        let html = crate::report::render_html(&r, "<svg></svg>");
        assert!(
            html.contains("<dt>Data-path limit</dt><dd>10.0M samples/sec (host copy 10.0 GB/s"),
            "{html}"
        );
        r.final_sps = 10.0;
        assert!(crate::report::render_markdown(&r).contains("final is <0.1% of it)"));
        r.final_sps = 1e5;
        let json = crate::report::render_json(&r);
        let back: crate::report::RunReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.data_path, r.data_path);
    }

    #[test]
    fn probe_text_names_each_path() {
        let w = Workload {
            batch_bytes: 64_000,
            batch_size: 64,
            source: "test".into(),
        };
        let s = render_text(&limits(&w, 10.0, Some((3.0, 6.0))));
        assert!(
            s.contains("to device, pageable") && s.contains("to device, pinned"),
            "{s}"
        );
        assert!(s.contains("data-path limit: 6000000.0 samples/sec"), "{s}");
    }

    /// The real measurement: positive figures, within what a machine can do,
    /// ceilings that follow from them.
    #[cfg(feature = "libtorch")]
    #[test]
    fn probe_native_figures_are_sane() {
        let w = Workload {
            batch_bytes: 8 << 20,
            batch_size: 64,
            source: "test".into(),
        };
        let d = measure(&w).unwrap();
        let sane = |g: f64| (0.1..1000.0).contains(&g);
        assert!(
            sane(d.host_copy_gbps),
            "host copy {} GB/s",
            d.host_copy_gbps
        );
        let rel = |a: f64, b: f64| ((a - b) / b).abs() < 1e-9;
        assert!(rel(
            d.host_copy_ceiling_sps,
            d.host_copy_gbps * 1e9 / w.bytes_per_sample()
        ));
        assert_eq!(d.batch_bytes, 8 << 20);
        assert_eq!(d.cuda_available, tch::Cuda::is_available());
        if d.cuda_available {
            for g in [d.h2d_pageable_gbps.unwrap(), d.h2d_pinned_gbps.unwrap()] {
                assert!(sane(g), "host-to-device {g} GB/s");
            }
            assert!(rel(
                d.h2d_pinned_ceiling_sps.unwrap(),
                d.h2d_pinned_gbps.unwrap() * 1e9 / w.bytes_per_sample()
            ));
        } else {
            assert!(d.h2d_pageable_gbps.is_none() && d.h2d_pinned_gbps.is_none());
            assert!(d.note.contains("pin_memory cannot matter"), "{}", d.note);
        }
        assert!(d.limit_sps() > 0.0 && d.limit_sps() <= d.host_copy_ceiling_sps);
    }

    /// What a run does after its baseline: probe.json from the baseline's batch.
    #[cfg(feature = "libtorch")]
    #[test]
    fn probe_after_baseline_writes_probe_json() {
        let (_t, run) = workspace_with_baseline(1 << 20, 32);
        after_baseline(&run);
        let d = read_probe(&run).expect("probe.json written");
        assert_eq!(d.batch_bytes, 1 << 20);
        assert_eq!(d.bytes_per_sample, (1 << 20) as f64 / 32.0);
        assert!(
            d.bytes_source.contains("20260101-000000"),
            "{}",
            d.bytes_source
        );
        assert!(d.host_copy_gbps > 0.0);
    }
}

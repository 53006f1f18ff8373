//! The cores the job may really use: the harness reads the affinity mask and
//! the cgroup CPU quota, not just the host's count. Under `taskset` with real
//! PyTorch through the real binary, and the quota reader against real cgroup
//! files (v2 and v1 layouts) written in a temporary folder.

use std::process::Command;

use crate::support::*;
use serde_json::Value;

/// The host's CPU count as Python sees it.
fn host_cpus() -> u64 {
    let o = Command::new(python())
        .args(["-c", "import os; print(os.cpu_count())"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

#[test]
fn under_taskset_the_harness_reports_one_usable_core_limited_by_affinity() {
    let _run = slot();
    let host = host_cpus();
    if host < 2 {
        eprintln!("skipped: one CPU on this machine, taskset cannot restrict it");
        return;
    }
    let ws = Ws::managed(IO_BOUND_TRAIN, "", FAST_POLICY);
    let o = Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_tuneloop")])
        .args(["bench", "--json", "--repeats", "1"])
        .current_dir(ws.path())
        .env("TUNELOOP_PYTHON", python())
        .env("TUNELOOP_WINDOW_S", "0")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let run = &v["runs"][0];
    // The host's count stays the host's; the job may use one core.
    assert_eq!(run["cpu_count"].as_u64(), Some(host), "{run}");
    assert_eq!(run["usable_cores"].as_f64(), Some(1.0), "{run}");
    assert_eq!(run["cores_limited_by"], "affinity", "{run}");

    // Without the mask, the same job may use more than one core.
    let r = ws.tuneloop(&["bench", "--json", "--repeats", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(
        v["runs"][0]["usable_cores"].as_f64().unwrap() > 1.0,
        "{}",
        r.stdout
    );
}

/// Runs the harness's `cgroup_quota_cores` against a cgroup tree in `root`.
fn quota(root: &std::path::Path, self_cgroup: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tuneloop_harness.py"),
        tuneloop::bench::HARNESS_PY,
    )
    .unwrap();
    let proc_file = dir.path().join("cgroup");
    std::fs::write(&proc_file, self_cgroup).unwrap();
    let o = Command::new(python())
        .current_dir(dir.path())
        .args([
            "-c",
            &format!(
                "import tuneloop_harness as h; print(h.cgroup_quota_cores({:?}, {:?}))",
                root.display().to_string(),
                proc_file.display().to_string()
            ),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn put(root: &std::path::Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn the_cgroup_cpu_quota_is_read_from_v2_and_v1_trees() {
    let _run = slot();
    // cgroup v2: the job's group allows 3 cores, its parent 1.5: the parent binds.
    let v2 = tempfile::tempdir().unwrap();
    put(v2.path(), "cpu.max", "max 100000\n");
    put(v2.path(), "slurm/cpu.max", "150000 100000\n");
    put(v2.path(), "slurm/job_7/cpu.max", "300000 100000\n");
    assert_eq!(quota(v2.path(), "0::/slurm/job_7\n"), "1.5");
    // No quota anywhere: none.
    let open = tempfile::tempdir().unwrap();
    put(open.path(), "cpu.max", "max 100000\n");
    put(open.path(), "docker/cpu.max", "max 100000\n");
    assert_eq!(quota(open.path(), "0::/docker\n"), "None");
    // cgroup v1: cfs_quota_us / cfs_period_us under the cpu controller; -1 is none.
    let v1 = tempfile::tempdir().unwrap();
    put(v1.path(), "cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put(v1.path(), "cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    put(
        v1.path(),
        "cpu,cpuacct/kube/pod1/cpu.cfs_quota_us",
        "200000\n",
    );
    put(
        v1.path(),
        "cpu,cpuacct/kube/pod1/cpu.cfs_period_us",
        "100000\n",
    );
    assert_eq!(
        quota(v1.path(), "4:memory:/kube/pod1\n3:cpu,cpuacct:/kube/pod1\n"),
        "2.0"
    );
}

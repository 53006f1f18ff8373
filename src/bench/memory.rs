//! How much memory more DataLoader workers may take: the machine's free
//! memory, and the job's cgroup memory limit, whichever is lower.
//!
//! The harness reports the machine's `MemAvailable` while the workers are
//! alive. In a container, a Slurm allocation or a systemd slice the job's
//! cgroup may have far less: past its limit the kernel kills the job, however
//! much the machine has free. So after each run tuneloop reads the cgroup of
//! its own process (the job runs as its child, in the same cgroup):
//!
//! * cgroup v2: `memory.max` − `memory.current` (`/sys/fs/cgroup/<path>`);
//! * cgroup v1: `memory.limit_in_bytes` − `memory.usage_in_bytes`
//!   (`/sys/fs/cgroup/memory/<path>`);
//!
//! at the process's own cgroup and every ancestor up to the mount (a parent's
//! limit binds its children too), keeping the tightest. `max`, or a v1 limit
//! near 2^63, is no limit. The usage counts the page cache, which the kernel
//! reclaims before it kills anything, so the cache's inactive part
//! (`inactive_file` in `memory.stat`) is not counted as used.
//!
//! The reading is made when the run has ended, its processes gone; the job's
//! own memory as the harness measured it (workers and training process) is
//! taken off to compare it with `MemAvailable`, which was read while they
//! ran. Parsing is pure and the file system root is a parameter, so the unit
//! tests build cgroup trees in a temp dir.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Measurement;

/// A v1 limit at or above this is "no limit" (the kernel writes
/// 9223372036854771712, `PAGE_COUNTER_MAX` pages rounded).
const NO_LIMIT_V1: u64 = 1 << 62;

/// The tightest memory limit over the job's cgroup and its ancestors.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CgroupMemory {
    /// 1 or 2.
    pub version: u8,
    /// The cgroup folder whose limit binds.
    pub dir: PathBuf,
    pub limit_bytes: u64,
    pub usage_bytes: u64,
    /// Inactive page cache, reclaimable before anything is killed.
    pub inactive_file_bytes: u64,
}

impl CgroupMemory {
    /// What may still be taken under the limit: the limit less the usage,
    /// the inactive page cache not counted as used.
    pub fn headroom(&self) -> u64 {
        let used = self.usage_bytes.saturating_sub(self.inactive_file_bytes);
        self.limit_bytes.saturating_sub(used)
    }
}

/// The tightest cgroup memory limit of the current process, with `root` the
/// file system's root (`/`; a temp dir in tests). `None` without a limit or
/// where the files cannot be read (not Linux, no cgroup mounted).
pub fn read_cgroup_memory(root: &Path) -> Option<CgroupMemory> {
    let own = std::fs::read_to_string(root.join("proc/self/cgroup")).ok()?;
    let mut found: Vec<CgroupMemory> = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (version, mount) = if id == "0" && controllers.is_empty() {
            (2, root.join("sys/fs/cgroup"))
        } else if controllers.split(',').any(|c| c == "memory") {
            (1, root.join("sys/fs/cgroup/memory"))
        } else {
            continue;
        };
        found.extend(tightest_along(version, &mount, path));
    }
    found.into_iter().min_by_key(CgroupMemory::headroom)
}

/// The tightest limit from the cgroup at `path` up to the mount. A path
/// that is not under the mount (a cgroup namespace shows "/" or "/../..")
/// is read at the mount itself: inside a container that is its own cgroup.
fn tightest_along(version: u8, mount: &Path, path: &str) -> Option<CgroupMemory> {
    let rel = path.trim().trim_start_matches('/');
    let mut dir = mount.join(rel);
    if rel.split('/').any(|p| p == "..") || !dir.is_dir() {
        dir = mount.to_path_buf();
    }
    let mut best: Option<CgroupMemory> = None;
    loop {
        if let Some(c) = limit_at(version, &dir) {
            if best.as_ref().is_none_or(|b| c.headroom() < b.headroom()) {
                best = Some(c);
            }
        }
        if dir == mount {
            return best;
        }
        match dir.parent() {
            Some(p) if p.starts_with(mount) => dir = p.to_path_buf(),
            _ => return best,
        }
    }
}

/// The limit set at one cgroup folder, `None` when it has none.
fn limit_at(version: u8, dir: &Path) -> Option<CgroupMemory> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let (limit, usage, inactive_key) = match version {
        2 => (
            read("memory.max")?,
            read("memory.current")?,
            "inactive_file",
        ),
        _ => (
            read("memory.limit_in_bytes")?,
            read("memory.usage_in_bytes")?,
            "total_inactive_file",
        ),
    };
    let limit = limit.trim();
    if limit == "max" {
        return None;
    }
    let limit: u64 = limit.parse().ok()?;
    if version == 1 && limit >= NO_LIMIT_V1 {
        return None;
    }
    let stat = read("memory.stat").unwrap_or_default();
    Some(CgroupMemory {
        version,
        dir: dir.to_path_buf(),
        limit_bytes: limit,
        usage_bytes: usage.trim().parse().ok()?,
        inactive_file_bytes: stat_value(&stat, inactive_key)
            .or_else(|| stat_value(&stat, "inactive_file"))
            .unwrap_or(0),
    })
}

/// `key`'s value in a `memory.stat` ("key value" lines).
fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Which figure bounds the memory more workers may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryBound {
    /// The machine's MemAvailable, as the harness read it.
    MachineAvailable,
    /// The job's cgroup memory limit less its usage.
    CgroupLimit,
}

/// The memory free while the job ran, and which figure bounded it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FreeMemory {
    pub bytes: u64,
    pub bound: MemoryBound,
}

impl FreeMemory {
    /// "1.20 GB free under the cgroup's memory limit (memory.max −
    /// memory.current, the job's own memory taken off)", or "... MemAvailable".
    pub fn describe(&self) -> String {
        let b = super::cost::bytes_text(self.bytes);
        match self.bound {
            MemoryBound::MachineAvailable => format!("{b} free on the machine (MemAvailable)"),
            MemoryBound::CgroupLimit => format!(
                "{b} free under the job's cgroup memory limit (its limit less its usage, the job's own memory taken off), below the machine's MemAvailable"
            ),
        }
    }
}

/// The memory free while the run's workers were alive: the machine's
/// MemAvailable as the harness read it, and the cgroup's headroom as read
/// after the run less the job's memory then (its workers' PSS, else RSS, and
/// the training process's RSS), whichever is lower.
pub fn free_memory(m: &Measurement) -> Option<FreeMemory> {
    let machine = m.mem_available_bytes.map(|bytes| FreeMemory {
        bytes,
        bound: MemoryBound::MachineAvailable,
    });
    let job =
        m.workers_pss_bytes.or(m.workers_rss_bytes).unwrap_or(0) + m.main_rss_bytes.unwrap_or(0);
    let cgroup = m.cgroup_memory_headroom_bytes.map(|h| FreeMemory {
        bytes: h.saturating_sub(job),
        bound: MemoryBound::CgroupLimit,
    });
    match (machine, cgroup) {
        (Some(a), Some(c)) if c.bytes < a.bytes => Some(c),
        (Some(a), _) => Some(a),
        (None, c) => c,
    }
}

/// A measurement with the cgroup's headroom read now (the run just ended).
pub fn with_cgroup_headroom(mut m: Measurement) -> Measurement {
    if m.cgroup_memory_headroom_bytes.is_none() {
        m.cgroup_memory_headroom_bytes = read_cgroup_memory(Path::new("/")).map(|c| c.headroom());
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn cgroup_v2_limit_less_usage_with_inactive_cache_reclaimable() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "proc/self/cgroup", "0::/job.slice/run-1.scope\n");
        let dir = "sys/fs/cgroup/job.slice/run-1.scope";
        write(r, &format!("{dir}/memory.max"), "4000000000\n");
        write(r, &format!("{dir}/memory.current"), "1500000000\n");
        write(
            r,
            &format!("{dir}/memory.stat"),
            "anon 900000000\nfile 600000000\nactive_file 100000000\ninactive_file 500000000\n",
        );
        let c = read_cgroup_memory(r).unwrap();
        assert_eq!((c.version, c.limit_bytes), (2, 4_000_000_000));
        // 4 GB − (1.5 GB − 0.5 GB of inactive cache).
        assert_eq!(c.headroom(), 3_000_000_000);
        assert!(c.dir.ends_with("run-1.scope"));
    }

    #[test]
    fn a_parents_tighter_limit_binds_and_max_is_no_limit() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "proc/self/cgroup", "0::/user.slice/job\n");
        write(r, "sys/fs/cgroup/user.slice/job/memory.max", "max\n");
        write(r, "sys/fs/cgroup/user.slice/job/memory.current", "100\n");
        write(r, "sys/fs/cgroup/user.slice/memory.max", "2000000000\n");
        write(r, "sys/fs/cgroup/user.slice/memory.current", "1200000000\n");
        let c = read_cgroup_memory(r).unwrap();
        assert_eq!(c.headroom(), 800_000_000);
        assert!(c.dir.ends_with("user.slice"));
        // No limit anywhere: none.
        write(r, "sys/fs/cgroup/user.slice/memory.max", "max\n");
        assert_eq!(read_cgroup_memory(r), None);
    }

    #[test]
    fn cgroup_v1_with_the_kernels_no_limit_value_and_a_real_one() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        // A hybrid host: the v2 line has no memory controller files.
        write(
            r,
            "proc/self/cgroup",
            "9:name=systemd:/\n4:memory:/process_api/abc\n3:cpuset:/\n0::/\n",
        );
        let dir = "sys/fs/cgroup/memory/process_api/abc";
        write(
            r,
            &format!("{dir}/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        write(r, &format!("{dir}/memory.usage_in_bytes"), "1205456896\n");
        write(
            r,
            "sys/fs/cgroup/memory/process_api/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        write(
            r,
            "sys/fs/cgroup/memory/process_api/memory.usage_in_bytes",
            "5\n",
        );
        assert_eq!(read_cgroup_memory(r), None, "no limit set");
        write(r, &format!("{dir}/memory.limit_in_bytes"), "3000000000\n");
        write(
            r,
            &format!("{dir}/memory.stat"),
            "cache 900000000\ninactive_file 100\ntotal_inactive_file 205456896\n",
        );
        let c = read_cgroup_memory(r).unwrap();
        assert_eq!(c.version, 1);
        // 3 GB − (1.205 GB − 0.205 GB inactive, the hierarchy's total).
        assert_eq!(c.headroom(), 2_000_000_000);
    }

    #[test]
    fn inside_a_namespace_the_mounts_own_limit_is_read() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        // A container's cgroup namespace: the process sees itself at "/".
        write(r, "proc/self/cgroup", "0::/\n");
        write(r, "sys/fs/cgroup/memory.max", "1000000000\n");
        write(r, "sys/fs/cgroup/memory.current", "400000000\n");
        assert_eq!(read_cgroup_memory(r).unwrap().headroom(), 600_000_000);
        // A path outside the namespace's view: the mount again.
        write(r, "proc/self/cgroup", "0::/../../other\n");
        assert_eq!(read_cgroup_memory(r).unwrap().headroom(), 600_000_000);
        // Unreadable: none.
        assert_eq!(read_cgroup_memory(&r.join("nowhere")), None);
    }

    #[test]
    fn the_lower_of_memavailable_and_the_cgroups_headroom_bounds_the_workers() {
        let mut m = Measurement {
            mem_available_bytes: Some(8_000_000_000),
            workers_pss_bytes: Some(400_000_000),
            main_rss_bytes: Some(600_000_000),
            ..Default::default()
        };
        // No cgroup limit: the machine's figure.
        assert_eq!(
            free_memory(&m),
            Some(FreeMemory {
                bytes: 8_000_000_000,
                bound: MemoryBound::MachineAvailable
            })
        );
        // 3 GB under the limit after the run, the job took 1 GB of it.
        m.cgroup_memory_headroom_bytes = Some(3_000_000_000);
        let f = free_memory(&m).unwrap();
        assert_eq!(f.bytes, 2_000_000_000);
        assert_eq!(f.bound, MemoryBound::CgroupLimit);
        assert!(
            f.describe().contains("cgroup memory limit"),
            "{}",
            f.describe()
        );
        // A generous limit does not raise the machine's figure.
        m.cgroup_memory_headroom_bytes = Some(64_000_000_000);
        assert_eq!(
            free_memory(&m).unwrap().bound,
            MemoryBound::MachineAvailable
        );
        // Without MemAvailable (not Linux's /proc/meminfo): the cgroup alone.
        m.mem_available_bytes = None;
        assert_eq!(free_memory(&m).unwrap().bytes, 63_000_000_000);
        m.cgroup_memory_headroom_bytes = None;
        assert_eq!(free_memory(&m), None);
    }
}

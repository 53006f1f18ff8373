//! The run folder `runs/<id>/`: events.jsonl (append-only, fsynced per event),
//! per-turn files, snapshots of the editable files (baseline, incumbent), the
//! project lock, and listing past runs. Every file is written atomically
//! (temp file, fsync, rename, by [`crate::fsio`]) so a crash leaves either the
//! old or the new one. What the files hold, typed, and reading them back is
//! [`crate::run_folder`].

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::event::Event;
// Writing a file atomically is the leaf [`crate::fsio`]; the run code
// has always reached it through here.
pub use crate::fsio::{write_atomic, write_json};

/// The same error, its message naming the file it is about (an io error
/// alone does not say which of several files failed).
fn naming(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// The editable files' bytes, by path relative to the project root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSet(pub BTreeMap<String, Vec<u8>>);

impl FileSet {
    pub fn capture(root: &Path, files: &[String]) -> io::Result<FileSet> {
        let mut m = BTreeMap::new();
        for f in files {
            m.insert(
                f.clone(),
                fs::read(root.join(f)).map_err(|e| naming(e, &root.join(f)))?,
            );
        }
        Ok(FileSet(m))
    }

    /// Puts these bytes back, each file atomically; files already equal are left alone.
    pub fn apply(&self, root: &Path) -> io::Result<()> {
        for (rel, bytes) in &self.0 {
            let p = root.join(rel);
            if fs::read(&p).ok().as_deref() == Some(bytes.as_slice()) {
                continue;
            }
            write_atomic(&p, bytes).map_err(|e| naming(e, &p))?;
        }
        Ok(())
    }

    pub fn save(&self, dir: &Path) -> io::Result<()> {
        for (rel, bytes) in &self.0 {
            write_atomic(&dir.join(rel), bytes).map_err(|e| naming(e, &dir.join(rel)))?;
        }
        Ok(())
    }

    pub fn load(dir: &Path, files: &[String]) -> io::Result<FileSet> {
        Self::capture(dir, files)
    }

    pub fn text(&self, rel: &str) -> String {
        self.0
            .get(rel)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }
}

/// A run folder being written.
pub struct RunStore {
    pub dir: PathBuf,
    pub id: String,
    events: File,
    started: std::time::Instant,
}

impl RunStore {
    pub fn create(runs_dir: &Path) -> io::Result<RunStore> {
        fs::create_dir_all(runs_dir)?;
        let base = chrono::Local::now().format("%Y%m%d-%H%M%S").to_string();
        let mut id = base.clone();
        let mut n = 1;
        while runs_dir.join(&id).exists() {
            n += 1;
            id = format!("{base}-{n}");
        }
        let dir = runs_dir.join(&id);
        fs::create_dir_all(dir.join("turns"))?;
        Self::open(&dir)
    }

    /// Opens an existing run folder to append to it (resume).
    pub fn open(dir: &Path) -> io::Result<RunStore> {
        let events = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("events.jsonl"))?;
        let id = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("run")
            .to_string();
        Ok(RunStore {
            dir: dir.to_owned(),
            id,
            events,
            started: std::time::Instant::now(),
        })
    }

    /// Appends one event line and fsyncs it.
    pub fn append(&mut self, ev: &Event) -> io::Result<()> {
        let mut v = serde_json::to_value(ev).map_err(io::Error::other)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("ts".into(), chrono::Local::now().to_rfc3339().into());
            o.insert(
                "elapsed_s".into(),
                serde_json::json!((self.started.elapsed().as_secs_f64() * 10.0).round() / 10.0),
            );
            o.insert("v".into(), EVENT_FORMAT_VERSION.into());
        }
        let mut line = serde_json::to_string(&v).map_err(io::Error::other)?;
        line.push('\n');
        self.events.write_all(line.as_bytes())?;
        self.events.sync_data()
    }

    pub fn turn_dir(&self, turn: u32) -> PathBuf {
        self.dir.join("turns").join(format!("{turn:02}"))
    }
}

/// The version of an `events.jsonl` line (its `v` key). Lines written before
/// the log had a version have no `v` and read the same: [`event_version`] is 0.
pub const EVENT_FORMAT_VERSION: u32 = 1;

/// The format version of one event line read by [`read_events`].
pub fn event_version(line: &serde_json::Value) -> u32 {
    line["v"].as_u64().unwrap_or(0) as u32
}

/// Reads every event of a run folder; a torn last line (crash mid-write) is skipped.
pub fn read_events(dir: &Path) -> io::Result<Vec<serde_json::Value>> {
    let text = fs::read_to_string(dir.join("events.jsonl"))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// Run folders, oldest first (ids sort by time).
pub fn list_runs(runs_dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(runs_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir() && p.join("events.jsonl").exists())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// No run folder where `RUN` (or "the latest run") points.
#[derive(Debug, Error)]
pub enum NoRun {
    #[error("no run `{run}` in {}; `tuneloop runs` lists them", .runs_dir.display())]
    Named { run: String, runs_dir: PathBuf },
    #[error("no runs in {} yet; start one with `tuneloop start`", .runs_dir.display())]
    NoneYet { runs_dir: PathBuf },
}

/// `RUN` as given (an id, a path) or the latest run.
pub fn resolve_run(runs_dir: &Path, run: Option<&str>) -> Result<PathBuf, NoRun> {
    match run {
        Some(r) => {
            let p = Path::new(r);
            if p.join("events.jsonl").exists() {
                return Ok(p.to_owned());
            }
            let q = runs_dir.join(r);
            if q.join("events.jsonl").exists() {
                return Ok(q);
            }
            Err(NoRun::Named {
                run: r.to_string(),
                runs_dir: runs_dir.to_owned(),
            })
        }
        None => list_runs(runs_dir).pop().ok_or_else(|| NoRun::NoneYet {
            runs_dir: runs_dir.to_owned(),
        }),
    }
}

/// Why a run could not take the project's lock.
#[derive(Debug, Error)]
pub enum LockError {
    #[error("another tuneloop run ({owner}, pid {pid}) holds {}; wait for it or stop it", .path.display())]
    Held {
        owner: String,
        pid: u32,
        path: PathBuf,
    },
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A stale lock came back twice: another process races for it.
    #[error("cannot take the lock {}", .path.display())]
    Contended { path: PathBuf },
}

/// One tuning run per project at a time: `runs/.lock` holds the owner's pid.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
}

impl Lock {
    pub fn acquire(runs_dir: &Path, run_id: &str) -> Result<Lock, LockError> {
        let io_error = |action, path: &Path| {
            let path = path.to_owned();
            move |source| LockError::Io {
                action,
                path,
                source,
            }
        };
        fs::create_dir_all(runs_dir).map_err(io_error("create", runs_dir))?;
        let path = runs_dir.join(".lock");
        let me = format!("{} {}\n", std::process::id(), run_id);
        for _ in 0..2 {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut f) => {
                    f.write_all(me.as_bytes())
                        .map_err(io_error("write", &path))?;
                    let _ = f.sync_all();
                    return Ok(Lock { path });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let text = fs::read_to_string(&path).unwrap_or_default();
                    let mut it = text.split_whitespace();
                    let pid: Option<u32> = it.next().and_then(|p| p.parse().ok());
                    let owner = it.next().unwrap_or("?").to_string();
                    match pid {
                        Some(pid) if crate::process::pid_alive(pid) => {
                            return Err(LockError::Held { owner, pid, path })
                        }
                        // Its owner is gone: a stale lock.
                        _ => {
                            let _ = fs::remove_file(&path);
                        }
                    }
                }
                Err(e) => return Err(io_error("create", &path)(e)),
            }
        }
        Err(LockError::Contended { path })
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fileset_roundtrip_is_byte_exact() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("a.py"), b"x = 1\r\n# \xff\n").unwrap();
        let s = FileSet::capture(d.path(), &["a.py".into()]).unwrap();
        fs::write(d.path().join("a.py"), b"changed").unwrap();
        s.apply(d.path()).unwrap();
        assert_eq!(
            fs::read(d.path().join("a.py")).unwrap(),
            b"x = 1\r\n# \xff\n"
        );
    }

    #[test]
    fn lock_refuses_a_live_owner_and_clears_a_dead_one() {
        let d = tempfile::tempdir().unwrap();
        let l = Lock::acquire(d.path(), "r1").unwrap();
        let e = Lock::acquire(d.path(), "r2").unwrap_err();
        assert!(
            matches!(&e, LockError::Held { owner, pid, .. } if owner == "r1" && *pid == std::process::id()),
            "{e:?}"
        );
        assert!(e.to_string().contains("another tuneloop run (r1"), "{e}");
        drop(l);
        // A lock left by a process that no longer exists.
        fs::write(d.path().join(".lock"), "999999999 old\n").unwrap();
        assert!(Lock::acquire(d.path(), "r3").is_ok());
    }

    #[test]
    fn resolve_run_says_which_run_is_missing() {
        let d = tempfile::tempdir().unwrap();
        let e = resolve_run(d.path(), None).unwrap_err();
        assert!(matches!(e, NoRun::NoneYet { .. }), "{e:?}");
        assert!(
            e.to_string().contains("start one with `tuneloop start`"),
            "{e}"
        );
        let e = resolve_run(d.path(), Some("r9")).unwrap_err();
        assert!(
            matches!(&e, NoRun::Named { run, .. } if run == "r9"),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("no run `r9` in "), "{e}");
    }

    #[test]
    fn events_survive_a_torn_last_line() {
        let d = tempfile::tempdir().unwrap();
        let mut s = RunStore::open(d.path()).unwrap();
        s.append(&Event::Stopped { reason: "x".into() }).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(d.path().join("events.jsonl"))
            .unwrap();
        f.write_all(b"{\"event\": \"tor").unwrap();
        let ev = read_events(d.path()).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0]["event"], "stopped");
        assert_eq!(event_version(&ev[0]), EVENT_FORMAT_VERSION);
    }

    #[test]
    fn old_event_lines_without_a_version_still_read() {
        let d = tempfile::tempdir().unwrap();
        fs::write(
            d.path().join("events.jsonl"),
            "{\"event\":\"stopped\",\"reason\":\"x\",\"ts\":\"2025-01-01T12:00:00+00:00\",\"elapsed_s\":1.0}\n",
        )
        .unwrap();
        let ev = read_events(d.path()).unwrap();
        assert_eq!(event_version(&ev[0]), 0);
        let typed: Event = serde_json::from_value(ev[0].clone()).unwrap();
        assert_eq!(typed, Event::Stopped { reason: "x".into() });
    }
}

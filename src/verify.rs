//! Checking what an agent did, from the files, never from its word: only the
//! editable files changed, they still parse, and exactly ONE knob changed at
//! its source (a keyword of a DataLoader call, the default of a flag that
//! feeds one, a config value that feeds one, a `TrainingArguments`
//! `dataloader_*` keyword, the word of the command in `[bench] run` that
//! passes one: see [`crate::edit::knobs`]), naming a knob the
//! policy allows. Also the
//! project snapshot that lets a turn put back files an agent had no right to
//! touch.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::edit;
use crate::knob::LoaderKnob;
use crate::store::FileSet;

/// Files bigger than this are tracked by size and time only (not restorable).
const MAX_SNAPSHOT_FILE: u64 = 1 << 20;
/// Stop walking after this many files: a data folder is not source.
const MAX_FILES: usize = 20_000;
/// Folders never walked (besides the workspace's own `runs/`).
const SKIP_DIRS: [&str; 5] = [".git", "__pycache__", ".venv", "venv", "node_modules"];

#[derive(Clone, Debug, PartialEq)]
struct Entry {
    size: u64,
    modified: Option<SystemTime>,
    content: Option<Vec<u8>>,
}

/// Every file under the project root (small ones with their bytes).
#[derive(Clone, Debug, Default)]
pub struct ProjectSnapshot {
    root: PathBuf,
    /// Folders not walked: tuneloop's own `runs/` when it lies inside the project.
    skip: Vec<PathBuf>,
    files: BTreeMap<String, Entry>,
}

/// `snapshot/manifest.json` in a run folder: every file of the snapshot
/// (fields in the order earlier versions wrote them).
#[derive(serde::Serialize, serde::Deserialize)]
struct Manifest {
    #[serde(default)]
    files: BTreeMap<String, ManifestEntry>,
    #[serde(default = "dot")]
    root: PathBuf,
    #[serde(default)]
    skip: Vec<PathBuf>,
}

fn dot() -> PathBuf {
    PathBuf::from(".")
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ManifestEntry {
    #[serde(default)]
    mtime_ns: Option<u64>,
    #[serde(default)]
    saved: bool,
    #[serde(default)]
    size: u64,
}

impl ProjectSnapshot {
    pub fn capture(root: &Path, skip: &[PathBuf]) -> std::io::Result<ProjectSnapshot> {
        let mut files = BTreeMap::new();
        let mut stack = vec![root.to_owned()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir)? {
                let e = e?;
                let path = e.path();
                let ft = e.file_type()?;
                let name = e.file_name().to_string_lossy().into_owned();
                if ft.is_dir() {
                    if !SKIP_DIRS.contains(&name.as_str()) && !skip.contains(&path) {
                        stack.push(path);
                    }
                    continue;
                }
                if !ft.is_file()
                    || name.starts_with(".tuneloop")
                    || name.ends_with(".pyc")
                    || skip.contains(&path)
                {
                    continue;
                }
                let md = e.metadata()?;
                let rel = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                let content = if md.len() <= MAX_SNAPSHOT_FILE {
                    std::fs::read(&path).ok()
                } else {
                    None
                };
                files.insert(
                    rel,
                    Entry {
                        size: md.len(),
                        modified: md.modified().ok(),
                        content,
                    },
                );
                if files.len() >= MAX_FILES {
                    return Ok(ProjectSnapshot {
                        root: root.to_owned(),
                        skip: skip.to_vec(),
                        files,
                    });
                }
            }
        }
        Ok(ProjectSnapshot {
            root: root.to_owned(),
            skip: skip.to_vec(),
            files,
        })
    }

    /// Writes the snapshot to `dir` (`manifest.json` + `files/`), durably, so
    /// a resumed run can put back what a killed turn's agent touched.
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        let _ = std::fs::remove_dir_all(dir);
        let mut files = BTreeMap::new();
        for (rel, e) in &self.files {
            if let Some(c) = &e.content {
                crate::fsio::write_atomic(&dir.join("files").join(rel), c)?;
            }
            let mtime_ns = e
                .modified
                .and_then(|m| m.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos() as u64);
            files.insert(
                rel.clone(),
                ManifestEntry {
                    mtime_ns,
                    saved: e.content.is_some(),
                    size: e.size,
                },
            );
        }
        crate::fsio::write_json(
            &dir.join("manifest.json"),
            &Manifest {
                files,
                root: self.root.clone(),
                skip: self.skip.clone(),
            },
        )
    }

    pub fn load(dir: &Path) -> std::io::Result<ProjectSnapshot> {
        let m: Manifest =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json"))?)?;
        let mut files = BTreeMap::new();
        for (rel, e) in m.files {
            let content = if e.saved {
                Some(std::fs::read(dir.join("files").join(&rel))?)
            } else {
                None
            };
            let modified = e
                .mtime_ns
                .map(|n| SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(n));
            files.insert(
                rel,
                Entry {
                    size: e.size,
                    modified,
                    content,
                },
            );
        }
        Ok(ProjectSnapshot {
            root: m.root,
            skip: m.skip,
            files,
        })
    }

    /// Paths added, removed or changed since `self`, other than `ignore`.
    pub fn changes(&self, now: &ProjectSnapshot, ignore: &[String]) -> Vec<String> {
        let keys: BTreeSet<&String> = self.files.keys().chain(now.files.keys()).collect();
        keys.into_iter()
            .filter(|k| !ignore.contains(k))
            .filter(|k| match (self.files.get(*k), now.files.get(*k)) {
                (Some(a), Some(b)) => match (&a.content, &b.content) {
                    (Some(x), Some(y)) => x != y,
                    _ => a.size != b.size || a.modified != b.modified,
                },
                _ => true,
            })
            .map(|k| k.to_string())
            .collect()
    }

    /// Puts back every changed path except `ignore`: new files removed,
    /// changed or deleted files rewritten. Returns paths it could not restore.
    pub fn restore_others(&self, ignore: &[String]) -> Vec<String> {
        let Ok(now) = ProjectSnapshot::capture(&self.root, &self.skip) else {
            return vec!["(cannot read the project)".into()];
        };
        let mut lost = Vec::new();
        for rel in self.changes(&now, ignore) {
            let p = self.root.join(&rel);
            match self.files.get(&rel) {
                None => {
                    let _ = std::fs::remove_file(&p);
                }
                Some(Entry {
                    content: Some(bytes),
                    ..
                }) => {
                    if crate::fsio::write_atomic(&p, bytes).is_err() {
                        lost.push(rel);
                    }
                }
                Some(_) => lost.push(rel),
            }
        }
        lost
    }
}

/// What a command wrote while it was measured (command mode), as paths
/// relative to the project root to leave out of every later snapshot: a
/// folder it wrote into (`lightning_logs`, `checkpoints`) as a whole, unless
/// an editable file lies in it, else the file itself. Editable files are
/// never left out.
pub fn command_outputs(
    before: &ProjectSnapshot,
    after: &ProjectSnapshot,
    editable: &[String],
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for rel in before.changes(after, editable) {
        let top = rel.split('/').next().unwrap_or(&rel).to_string();
        let folder_is_safe =
            top != rel && !editable.iter().any(|e| e.starts_with(&format!("{top}/")));
        let path = if folder_is_safe { top } else { rel };
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out.sort();
    out
}

const COMMAND_OUTPUTS_FILE: &str = "baseline/command_outputs.json";

pub fn save_command_outputs(run_dir: &Path, outputs: &[String]) -> std::io::Result<()> {
    crate::fsio::write_json(&run_dir.join(COMMAND_OUTPUTS_FILE), &outputs)
}

/// The files tuneloop's own output goes into: its standard output and error
/// where they are files (`tuneloop start > tune.log` in the project folder),
/// and where they are pipes, the files that the processes reading them have
/// open for writing (`tuneloop start | tee tune.log`, followed down a
/// pipeline). These are written all along, so a turn's snapshot leaves them
/// out: otherwise the first turn is rejected for a file it did not change,
/// and undoing it replaces the file, so the rest of the output goes on into
/// a deleted one. Where `/proc` is not there, none.
pub fn own_output_files() -> Vec<PathBuf> {
    let proc = Path::new("/proc");
    let mut files = Vec::new();
    let mut pipes = Vec::new();
    for fd in [1, 2] {
        match std::fs::read_link(proc.join(format!("self/fd/{fd}"))) {
            Ok(p) if p.is_file() => files.push(p),
            Ok(p) if is_pipe(&p) => pipes.push(p),
            _ => {}
        }
    }
    files.extend(files_down_pipes(proc, pipes));
    files.sort();
    files.dedup();
    files
}

/// The files written by the processes that read `pipes`, and by those that
/// read theirs in turn: a few hops down the pipeline at most (`| grep x |
/// tee log`). Each hop reads the fd tables of this user's processes once.
fn files_down_pipes(proc: &Path, mut pipes: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for _ in 0..4 {
        if pipes.is_empty() {
            break;
        }
        let (more_files, more_pipes) = pipe_readers_outputs(proc, &pipes);
        files.extend(more_files);
        pipes = more_pipes;
    }
    files
}

fn is_pipe(link: &Path) -> bool {
    link.to_string_lossy().starts_with("pipe:")
}

/// Of the processes whose standard input is one of `pipes`: the regular
/// files they have open for writing, and the pipes their own output goes
/// into (the pipeline's next hop). Processes that cannot be read (another
/// user's) are passed over.
fn pipe_readers_outputs(proc: &Path, pipes: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut files, mut next) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(proc) else {
        return (files, next);
    };
    let me = std::process::id().to_string();
    for e in entries.flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = e.path();
        match std::fs::read_link(dir.join("fd/0")) {
            Ok(stdin) if pipes.contains(&stdin) => {}
            _ => continue,
        }
        let Ok(fds) = std::fs::read_dir(dir.join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let name = fd.file_name().to_string_lossy().into_owned();
            if is_pipe(&target) {
                if name == "1" || name == "2" {
                    next.push(target);
                }
            } else if target.is_file() && open_for_writing(&dir.join("fdinfo").join(&name)) {
                files.push(target);
            }
        }
    }
    (files, next)
}

/// Whether an fdinfo file's `flags` (octal) open its file for writing.
fn open_for_writing(fdinfo: &Path) -> bool {
    std::fs::read_to_string(fdinfo)
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        })
        // O_ACCMODE: 0 read-only, 1 write-only, 2 read-write.
        .is_some_and(|flags| flags & 0o3 != 0)
}

/// The command's outputs recorded by a run's baseline, as absolute paths.
pub fn load_command_outputs(run_dir: &Path, root: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string(run_dir.join(COMMAND_OUTPUTS_FILE))
        .ok()
        .and_then(|t| serde_json::from_str::<Vec<String>>(&t).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|r| root.join(r))
        .collect()
}

/// What a turn's edit amounts to.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Exactly one allowed DataLoader argument changed.
    OneChange {
        file: String,
        knob: String,
        change: String,
        line: usize,
    },
    NoChange,
    Rejected {
        reason: String,
        change: String,
    },
}

/// A turn whose one changed file differs by exactly one compute change
/// ([`edit::compute::recognize`]): that change, if the policy allows its
/// knob and the file still parses. `None`: not a compute change.
fn compute_change(
    before: &FileSet,
    after: &FileSet,
    changed: &[&String],
    knobs: &[String],
) -> Option<Verdict> {
    let [file] = changed else { return None };
    if !file.ends_with(".py") {
        return None;
    }
    let new = after.text(file);
    let c = edit::compute::recognize(&before.text(file), &new)?;
    if let Err(e) = edit::check_syntax(&new) {
        return Some(Verdict::Rejected {
            reason: format!("{file} no longer parses: {e}"),
            change: c.change,
        });
    }
    let knob = c.knob.name();
    if !knobs.iter().any(|k| k == knob) {
        return Some(Verdict::Rejected {
            reason: format!(
                "`{knob}` is a compute change the policy does not allow; add it to [compute] knobs"
            ),
            change: c.change,
        });
    }
    Some(Verdict::OneChange {
        file: file.to_string(),
        knob: knob.into(),
        change: c.change,
        line: c.line,
    })
}

/// Compares the editable files before and after a turn, plus the rest of the project.
pub fn check_turn(
    before: &FileSet,
    after: &FileSet,
    other_changes: &[String],
    knobs: &[String],
) -> Verdict {
    if !other_changes.is_empty() {
        let list = other_changes
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        return Verdict::Rejected {
            reason: format!("changed files outside the editable files: {list}"),
            change: "outside editable files".into(),
        };
    }
    let changed: Vec<&String> = before
        .0
        .keys()
        .filter(|k| before.0.get(*k) != after.0.get(*k))
        .collect();
    if changed.is_empty() {
        return Verdict::NoChange;
    }
    if let Some(v) = compute_change(before, after, &changed, knobs) {
        return v;
    }
    // (file, knob or keyword, one-line change, line)
    let mut found: Vec<(String, String, String, usize)> = Vec::new();
    let mut preprocessing: Vec<(String, String, usize)> = Vec::new();
    // Knob sites of the editable scripts before the turn: which config
    // values feed a knob.
    let knob_sites = || -> Vec<edit::KnobSite> {
        let read = |f: &str| {
            before
                .0
                .get(f)
                .map(|b| String::from_utf8_lossy(b).into_owned())
        };
        before
            .0
            .keys()
            .filter(|f| f.ends_with(".py"))
            .flat_map(|f| edit::knob_sites(f, &before.text(f), &read).unwrap_or_default())
            .collect()
    };
    for file in &changed {
        let old = before.text(file);
        let new = after.text(file);
        // Command mode: the user's command, where it passes a knob's flag.
        if file.as_str() == edit::command_line::RUN_FILE {
            match edit::command_line::command_edit(&old, &new, &knob_sites()) {
                Ok(changes) => {
                    found.extend(
                        changes
                            .into_iter()
                            .map(|c| (c.file, c.knob, c.change, c.line)),
                    );
                    continue;
                }
                Err(reason) => {
                    return Verdict::Rejected {
                        reason: reason.to_string(),
                        change: format!("edit of {file}"),
                    }
                }
            }
        }
        if edit::config_file::ConfigKind::of(file).is_some() {
            match edit::knobs::config_edit(file, &old, &new, &knob_sites()) {
                Ok(changes) => {
                    found.extend(
                        changes
                            .into_iter()
                            .map(|c| (c.file, c.knob, c.change, c.line)),
                    );
                    continue;
                }
                Err(reason) => {
                    return Verdict::Rejected {
                        reason: reason.to_string(),
                        change: format!("edit of {file}"),
                    }
                }
            }
        }
        if !file.ends_with(".py") {
            return Verdict::Rejected {
                reason: format!("{file} is not Python; only DataLoader arguments may change"),
                change: format!("edit of {file}"),
            };
        }
        if let Err(e) = edit::check_syntax(&new) {
            return Verdict::Rejected {
                reason: format!("{file} no longer parses: {e}"),
                change: format!("edit of {file}"),
            };
        }
        // A literal of the project's own modules that feeds a knob
        // (`num_workers: int = 0` in config.py).
        match edit::knobs::python_value_edit(file, &old, &new, &knob_sites()) {
            Some(Ok(changes)) => {
                found.extend(
                    changes
                        .into_iter()
                        .map(|c| (c.file, c.knob, c.change, c.line)),
                );
                continue;
            }
            Some(Err(reason)) => {
                return Verdict::Rejected {
                    reason: reason.to_string(),
                    change: format!("code edit in {file}"),
                }
            }
            None => {}
        }
        // A flag default or TrainingArguments keyword: the knob at its source.
        let read = |f: &str| {
            before
                .0
                .get(f)
                .map(|b| String::from_utf8_lossy(b).into_owned())
        };
        match edit::knobs::python_edit(file, &old, &new, &read) {
            edit::knobs::PythonEdit::Changes(changes) => {
                found.extend(
                    changes
                        .into_iter()
                        .map(|c| (c.file, c.knob, c.change, c.line)),
                );
                continue;
            }
            edit::knobs::PythonEdit::Rejected(reason) => {
                return Verdict::Rejected {
                    reason,
                    change: format!("code edit in {file}"),
                }
            }
            edit::knobs::PythonEdit::NotAtSource => {}
        }
        let (Ok(s_old), Ok(s_new)) = (edit::scan_source(file, &old), edit::scan_source(file, &new))
        else {
            return Verdict::Rejected {
                reason: format!("{file} cannot be scanned"),
                change: format!("edit of {file}"),
            };
        };
        // compare_sources also sees positional and `**` argument text change.
        let deltas = match edit::compare_sources(file, &old, &new) {
            Ok(d) => d,
            Err(e) => {
                return Verdict::Rejected {
                    reason: format!("{file}: {e}"),
                    change: format!("edit of {file}"),
                }
            }
        };
        if edit::non_call_changes(&old, &new, &s_old, &s_new) {
            if !knobs.iter().any(|k| LoaderKnob::Preprocessing.is(k)) {
                return Verdict::Rejected {
                    reason: format!("{file} changed outside DataLoader arguments (training step, model, data code)"),
                    change: format!("code edit in {file}"),
                };
            }
            match preprocessing_spot(file, &old, &new, &s_new) {
                Ok(spot) => preprocessing.push(spot),
                Err(e) => {
                    return Verdict::Rejected {
                        reason: e.to_string(),
                        change: format!("code edit in {file}"),
                    }
                }
            }
        }
        for d in deltas {
            if d.positional_changed || d.callee_changed || d.spread_changed {
                return Verdict::Rejected {
                    reason: format!(
                        "{file}: a DataLoader call's positional arguments or callee changed"
                    ),
                    change: format!("call edit in {file}"),
                };
            }
            let line = s_new.get(d.site_index).map(|s| s.line).unwrap_or(0);
            for c in d.changes {
                found.push((file.to_string(), c.name().to_string(), c.describe(), line));
            }
        }
    }
    if !preprocessing.is_empty() {
        if preprocessing.len() > 1 || !found.is_empty() {
            return Verdict::Rejected {
                reason: "a preprocessing change must be the turn's only change".into(),
                change: "several changes".into(),
            };
        }
        let (file, change, line) = preprocessing.remove(0);
        return Verdict::OneChange {
            file,
            knob: LoaderKnob::Preprocessing.name().into(),
            change,
            line,
        };
    }
    match found.len() {
        0 => Verdict::Rejected {
            reason: "the editable files changed but no DataLoader argument did (formatting or comments only)".into(),
            change: "no argument changed".into(),
        },
        1 => {
            let (file, knob, change, line) = found.remove(0);
            if !knobs.iter().any(|k| k == &knob) {
                let why = if knob == "batch_size" || knob == "drop_last" || knob == "sampler" || knob == "shuffle" {
                    format!("`{knob}` is part of the measurement, not a DataLoader tuning")
                } else {
                    format!("`{knob}` is not a knob the policy allows ({})", knobs.join(", "))
                };
                return Verdict::Rejected { reason: why, change };
            }
            Verdict::OneChange { file, knob, change, line }
        }
        n => Verdict::Rejected {
            reason: format!("{n} DataLoader arguments changed; one change per turn"),
            change: found.iter().map(|(_, _, c, _)| c.as_str()).collect::<Vec<_>>().join("; "),
        },
    }
}

/// Why a code edit is not one preprocessing spot; its text is the turn's
/// recorded rejection reason.
#[derive(Debug, thiserror::Error)]
enum SpotError {
    #[error("{file}: {hunks} separate code changes; one preprocessing spot per turn")]
    Scattered { file: String, hunks: usize },
    #[error("{file}: {err}")]
    Unparsed {
        file: String,
        #[source]
        err: edit::ScanError,
    },
    /// `functions` enclose the change, innermost last; none at module level.
    #[error(
        "{file}:{line}: the change is outside the dataset's code ({}); preprocessing changes belong in __getitem__, a transform or the collate function",
        if .functions.is_empty() { "module level".to_string() } else { .functions.join(" in ") }
    )]
    OutsideDataCode {
        file: String,
        line: usize,
        functions: Vec<String>,
    },
}

/// A preprocessing change must be ONE contiguous spot inside the dataset's
/// code: `__getitem__`/`__getitems__`, a transform, or the collate function.
fn preprocessing_spot(
    file: &str,
    old: &str,
    new: &str,
    sites: &[edit::CallSite],
) -> Result<(String, String, usize), SpotError> {
    let ranges = edit::changed_ranges(old, new);
    if ranges.len() != 1 {
        return Err(SpotError::Scattered {
            file: file.to_string(),
            hunks: ranges.len(),
        });
    }
    let (mut a, mut b) = ranges[0];
    // Blank lines at either end of the hunk belong to no function: a method
    // added with its separating blank line is still one spot in that method.
    let lines: Vec<&str> = new.lines().collect();
    let blank = |n: usize| lines.get(n - 1).is_some_and(|l| l.trim().is_empty());
    while a < b && blank(a) {
        a += 1;
    }
    while b > a && blank(b) {
        b -= 1;
    }
    let funcs = edit::enclosing_functions(new, a, b).map_err(|err| SpotError::Unparsed {
        file: file.to_string(),
        err,
    })?;
    let collate: Vec<&str> = sites.iter().filter_map(|s| s.kwarg("collate_fn")).collect();
    let is_data_code = |f: &str| {
        let name = f.rsplit('.').next().unwrap_or(f);
        name == "__getitem__"
            || name == "__getitems__"
            || name.contains("transform")
            || name.contains("collate")
            || collate.contains(&name)
    };
    match funcs.iter().find(|f| is_data_code(f)) {
        Some(f) => Ok((
            file.to_string(),
            format!("preprocessing in {f} ({file}:{a})"),
            a,
        )),
        None => Err(SpotError::OutsideDataCode {
            file: file.to_string(),
            line: a,
            functions: funcs,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `| tee log` and `| cat | tee log`: the file the pipeline's reader
    /// writes is found from the pipe alone, one hop and two hops down; the
    /// file the reader only reads is not.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_files_down_a_pipeline_are_the_ones_its_readers_write() {
        use std::os::fd::AsRawFd;
        use std::process::{Command, Stdio};
        let dir = tempfile::tempdir().unwrap();
        let (one, two, read) = (
            dir.path().join("one.log"),
            dir.path().join("two.log"),
            dir.path().join("read.txt"),
        );
        std::fs::write(&read, "x").unwrap();
        let proc = Path::new("/proc");
        for (script, log) in [
            (format!("exec tee {}", one.display()), &one),
            (
                format!("cat | tee {} 3< {}", two.display(), read.display()),
                &two,
            ),
        ] {
            let mut child = Command::new("sh")
                .args(["-c", &script])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let pipe = child.stdin.as_ref().unwrap().as_raw_fd();
            let pipe = std::fs::read_link(format!("/proc/self/fd/{pipe}")).unwrap();
            assert!(is_pipe(&pipe), "{}", pipe.display());
            // The pipeline opens its files as it starts.
            let mut found = Vec::new();
            for _ in 0..100 {
                found = files_down_pipes(proc, vec![pipe.clone()]);
                if found.iter().any(|f| f.ends_with(log.file_name().unwrap())) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            drop(child.stdin.take());
            child.wait().unwrap();
            let log = std::fs::canonicalize(log).unwrap();
            assert_eq!(found, vec![log], "{script}");
        }
    }

    #[test]
    fn a_preprocessing_rejection_says_which_lines_and_why() {
        let src = "class Items:\n    def __getitem__(self, i):\n        return i\n\n\ndef main():\n    steps = 10\n";
        let moved = src.replace("steps = 10", "steps = 5");
        let e = preprocessing_spot("train.py", src, &moved, &[]).unwrap_err();
        assert!(
            matches!(e, SpotError::OutsideDataCode { line: 7, .. }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "train.py:7: the change is outside the dataset's code (main); preprocessing changes belong in __getitem__, a transform or the collate function"
        );
        let both = moved.replace("return i", "return i + 0");
        let e = preprocessing_spot("train.py", src, &both, &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "train.py: 2 separate code changes; one preprocessing spot per turn"
        );
        let top = src.replace("class Items:", "X = 1\nclass Items:");
        let e = preprocessing_spot("train.py", src, &top, &[]).unwrap_err();
        assert!(e.to_string().contains("(module level)"), "{e}");
    }
    use crate::knob::DATA_PRESERVING;

    fn fs(src: &str) -> FileSet {
        FileSet(
            [("train.py".to_string(), src.as_bytes().to_vec())]
                .into_iter()
                .collect(),
        )
    }

    fn knobs() -> Vec<String> {
        DATA_PRESERVING.iter().map(|s| s.to_string()).collect()
    }

    const BASE: &str = "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=32)\nsteps = 10\n";

    #[test]
    fn what_a_command_writes_is_left_out_of_later_snapshots() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let w = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w("train.py", "x = 1\n");
        w("conf/data.yaml", "num_workers: 0\n");
        w("logs/old.txt", "old\n");
        let editable = vec!["train.py".to_string(), "conf/data.yaml".to_string()];
        let before = ProjectSnapshot::capture(root, &[]).unwrap();
        // The command: a log folder, a checkpoint at the top, a file beside an editable one.
        w("logs/run.txt", "epoch 0\n");
        w("lightning_logs/version_0/hparams.yaml", "{}\n");
        w("last.pt", "weights");
        w("conf/cache.json", "{}");
        let after = ProjectSnapshot::capture(root, &[]).unwrap();
        let out = command_outputs(&before, &after, &editable);
        assert_eq!(
            out,
            ["conf/cache.json", "last.pt", "lightning_logs", "logs"]
        );
        // Skipped from then on: the next run of the command is no change at all...
        let skip: Vec<PathBuf> = out.iter().map(|o| root.join(o)).collect();
        let s1 = ProjectSnapshot::capture(root, &skip).unwrap();
        w("logs/run.txt", "epoch 0\nepoch 1\n");
        w("lightning_logs/version_1/hparams.yaml", "{}\n");
        w("last.pt", "new weights");
        let s2 = ProjectSnapshot::capture(root, &skip).unwrap();
        assert!(s1.changes(&s2, &editable).is_empty());
        // ...while any other file still counts.
        w("conf/other.yaml", "a: 1\n");
        let s3 = ProjectSnapshot::capture(root, &skip).unwrap();
        assert_eq!(s1.changes(&s3, &editable), ["conf/other.yaml"]);
    }

    #[test]
    fn one_argument_is_one_change() {
        let after = BASE.replace("batch_size=32)", "batch_size=32, num_workers=2)");
        match check_turn(&fs(BASE), &fs(&after), &[], &knobs()) {
            Verdict::OneChange {
                knob, change, line, ..
            } => {
                assert_eq!(knob, "num_workers");
                assert!(
                    change.contains("num_workers") && change.contains('2'),
                    "{change}"
                );
                assert_eq!(line, 2);
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn two_arguments_batch_size_and_code_edits_are_rejected() {
        let two = BASE.replace(
            "batch_size=32)",
            "batch_size=32, num_workers=2, pin_memory=True)",
        );
        assert!(
            matches!(check_turn(&fs(BASE), &fs(&two), &[], &knobs()), Verdict::Rejected { ref reason, .. } if reason.contains("2 DataLoader arguments"))
        );
        let bs = BASE.replace("batch_size=32", "batch_size=64");
        assert!(
            matches!(check_turn(&fs(BASE), &fs(&bs), &[], &knobs()), Verdict::Rejected { ref reason, .. } if reason.contains("part of the measurement"))
        );
        let steps = BASE.replace("steps = 10", "steps = 5");
        assert!(
            matches!(check_turn(&fs(BASE), &fs(&steps), &[], &knobs()), Verdict::Rejected { ref reason, .. } if reason.contains("outside DataLoader"))
        );
        let broken = BASE.replace("batch_size=32)", "batch_size=32");
        assert!(
            matches!(check_turn(&fs(BASE), &fs(&broken), &[], &knobs()), Verdict::Rejected { ref reason, .. } if reason.contains("no longer parses"))
        );
    }

    const DATA: &str = "from torch.utils.data import DataLoader\n\nclass Items:\n    def __getitem__(self, i):\n        x = decode(i)\n        return x\n\n\ndef build():\n    steps = 10\n    return DataLoader(Items(), batch_size=8)\n";

    #[test]
    fn preprocessing_is_one_spot_in_the_dataset_code_when_allowed() {
        let mut k = knobs();
        let spot = DATA.replace("x = decode(i)", "x = decode_fast(i)");
        assert!(matches!(
            check_turn(&fs(DATA), &fs(&spot), &[], &k),
            Verdict::Rejected { .. }
        ));
        k.push("preprocessing".into());
        match check_turn(&fs(DATA), &fs(&spot), &[], &k) {
            Verdict::OneChange { knob, change, .. } => {
                assert_eq!(knob, "preprocessing");
                assert!(change.contains("Items.__getitem__"), "{change}");
            }
            v => panic!("{v:?}"),
        }
        let outside = DATA.replace("steps = 10", "steps = 5");
        assert!(
            matches!(check_turn(&fs(DATA), &fs(&outside), &[], &k), Verdict::Rejected { ref reason, .. } if reason.contains("outside the dataset's code"))
        );
        let two = spot.replace("return x", "return x  # fast");
        let two = two.replace("steps = 10", "steps = 5");
        assert!(
            matches!(check_turn(&fs(DATA), &fs(&two), &[], &k), Verdict::Rejected { ref reason, .. } if reason.contains("separate"))
        );
        let with_arg = spot.replace("batch_size=8)", "batch_size=8, num_workers=2)");
        assert!(matches!(
            check_turn(&fs(DATA), &fs(&with_arg), &[], &k),
            Verdict::Rejected { .. }
        ));
    }

    #[test]
    fn a_changed_positional_argument_is_rejected() {
        let other = BASE.replace("DataLoader(ds,", "DataLoader(val_ds,");
        assert!(matches!(
            check_turn(&fs(BASE), &fs(&other), &[], &knobs()),
            Verdict::Rejected { ref reason, .. } if reason.contains("positional")
        ));
    }

    #[test]
    fn outside_changes_and_no_change() {
        assert!(matches!(
            check_turn(&fs(BASE), &fs(BASE), &["bench.py".into()], &knobs()),
            Verdict::Rejected { ref reason, .. } if reason.contains("bench.py")
        ));
        assert_eq!(
            check_turn(&fs(BASE), &fs(BASE), &[], &knobs()),
            Verdict::NoChange
        );
    }

    fn files(f: &[(&str, &str)]) -> FileSet {
        FileSet(
            f.iter()
                .map(|(p, t)| (p.to_string(), t.as_bytes().to_vec()))
                .collect(),
        )
    }

    const FLAGS: &str = "import argparse\nfrom torch.utils.data import DataLoader\nparser = argparse.ArgumentParser()\nparser.add_argument('--epochs', type=int, default=3)\nparser.add_argument('--workers', type=int, default=0)\nargs = parser.parse_args()\ntrain = DataLoader(ds, batch_size=32, num_workers=args.workers)\nval = DataLoader(vs, batch_size=32)\n";

    #[test]
    fn a_flag_default_that_feeds_a_knob_is_the_one_change() {
        let after = FLAGS.replace("type=int, default=0", "type=int, default=4");
        match check_turn(&fs(FLAGS), &fs(&after), &[], &knobs()) {
            Verdict::OneChange {
                knob,
                change,
                line,
                file,
            } => {
                assert_eq!(
                    (knob.as_str(), line, file.as_str()),
                    ("num_workers", 5, "train.py")
                );
                assert_eq!(change, "num_workers 0 → 4 (--workers default, train.py:5)");
            }
            v => panic!("{v:?}"),
        }
        let epochs = FLAGS.replace("default=3", "default=1");
        assert!(
            matches!(check_turn(&fs(FLAGS), &fs(&epochs), &[], &knobs()),
            Verdict::Rejected { ref reason, .. } if reason.contains("--epochs feeds no DataLoader knob"))
        );
        let two = after.replace(
            "val = DataLoader(vs, batch_size=32)",
            "val = DataLoader(vs, batch_size=32, num_workers=2)",
        );
        assert!(matches!(check_turn(&fs(FLAGS), &fs(&two), &[], &knobs()),
            Verdict::Rejected { ref reason, .. } if reason.contains("one change per turn")));
        let code = after.replace("args = parser.parse_args()", "args = parser.parse_args([])");
        assert!(matches!(
            check_turn(&fs(FLAGS), &fs(&code), &[], &knobs()),
            Verdict::Rejected { .. }
        ));
        // Not a knob the policy allows.
        let only_pin = vec!["pin_memory".to_string()];
        assert!(
            matches!(check_turn(&fs(FLAGS), &fs(&after), &[], &only_pin),
            Verdict::Rejected { ref reason, .. } if reason.contains("not a knob the policy allows"))
        );
    }

    #[test]
    fn a_config_value_that_feeds_a_knob_is_the_one_change() {
        let script = "import yaml\nfrom torch.utils.data import DataLoader\ncfg = yaml.safe_load(open('config.yaml'))\nloader = DataLoader(ds, batch_size=cfg['batch_size'], num_workers=cfg['loader']['workers'])\n";
        let yaml = "batch_size: 32\nloader:\n  workers: 0  # per GPU\n";
        let before = files(&[("train.py", script), ("config.yaml", yaml)]);
        let after = files(&[
            ("train.py", script),
            ("config.yaml", &yaml.replace("workers: 0", "workers: 6")),
        ]);
        match check_turn(&before, &after, &[], &knobs()) {
            Verdict::OneChange {
                knob,
                change,
                file,
                line,
            } => {
                assert_eq!(
                    (knob.as_str(), file.as_str(), line),
                    ("num_workers", "config.yaml", 3)
                );
                assert_eq!(change, "num_workers 0 → 6 (loader.workers, config.yaml:3)");
            }
            v => panic!("{v:?}"),
        }
        let bs = files(&[
            ("train.py", script),
            (
                "config.yaml",
                &yaml.replace("batch_size: 32", "batch_size: 8"),
            ),
        ]);
        assert!(matches!(
            check_turn(&before, &bs, &[], &knobs()),
            Verdict::Rejected { .. }
        ));
        let comment = files(&[
            ("train.py", script),
            (
                "config.yaml",
                &yaml.replace("workers: 0  # per GPU", "workers: 6"),
            ),
        ]);
        assert!(matches!(check_turn(&before, &comment, &[], &knobs()),
            Verdict::Rejected { ref reason, .. } if reason.contains("beyond")));
        // A non-Python file no knob reads is still rejected.
        let other = files(&[
            ("train.py", script),
            ("config.yaml", yaml),
            ("notes.txt", "a"),
        ]);
        let other_after = files(&[
            ("train.py", script),
            ("config.yaml", yaml),
            ("notes.txt", "b"),
        ]);
        assert!(matches!(check_turn(&other, &other_after, &[], &knobs()),
            Verdict::Rejected { ref reason, .. } if reason.contains("not Python")));
    }

    #[test]
    fn a_keyword_of_an_imported_dataloader_subclass_is_the_one_change() {
        let loaders =
            "from torch.utils.data import DataLoader\n\nclass FastLoader(DataLoader):\n    pass\n";
        let script = "from loaders import FastLoader\nloader = FastLoader(ds, batch_size=8)\n";
        let after = script.replace("batch_size=8)", "batch_size=8, num_workers=2)");
        let before = files(&[("train.py", script), ("loaders.py", loaders)]);
        let edited = files(&[("train.py", &after), ("loaders.py", loaders)]);
        match check_turn(&before, &edited, &[], &knobs()) {
            Verdict::OneChange {
                knob, change, line, ..
            } => {
                assert_eq!(
                    (knob.as_str(), change.as_str(), line),
                    ("num_workers", "num_workers (default) → 2", 2)
                );
            }
            v => panic!("{v:?}"),
        }
        // Without the module among the editable files the call is unknown.
        assert!(matches!(
            check_turn(&fs(script), &fs(&after), &[], &knobs()),
            Verdict::Rejected { .. }
        ));
    }

    #[test]
    fn a_training_arguments_keyword_is_the_one_change() {
        let src = "from transformers import TrainingArguments\nargs = TrainingArguments(\n    output_dir='out',\n    num_train_epochs=1,\n)\n";
        let after = src.replace(
            "num_train_epochs=1,\n",
            "num_train_epochs=1,\n    dataloader_num_workers=4,\n",
        );
        match check_turn(&fs(src), &fs(&after), &[], &knobs()) {
            Verdict::OneChange { knob, change, .. } => {
                assert_eq!(knob, "num_workers");
                assert_eq!(change, "num_workers (default) → 4 (TrainingArguments dataloader_num_workers, train.py:2)");
            }
            v => panic!("{v:?}"),
        }
        let epochs = src.replace("num_train_epochs=1", "num_train_epochs=2");
        assert!(matches!(check_turn(&fs(src), &fs(&epochs), &[], &knobs()),
            Verdict::Rejected { ref reason, .. } if reason.contains("not a DataLoader knob")));
    }

    #[test]
    fn snapshot_restores_files_outside_the_editable_set() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("train.py"), "a").unwrap();
        std::fs::write(d.path().join("bench.py"), "b").unwrap();
        let snap = ProjectSnapshot::capture(d.path(), &[]).unwrap();
        std::fs::write(d.path().join("bench.py"), "tampered").unwrap();
        std::fs::write(d.path().join("new.py"), "x").unwrap();
        std::fs::write(d.path().join("train.py"), "edited").unwrap();
        let now = ProjectSnapshot::capture(d.path(), &[]).unwrap();
        assert_eq!(
            snap.changes(&now, &["train.py".into()]),
            vec!["bench.py".to_string(), "new.py".to_string()]
        );
        assert!(snap.restore_others(&["train.py".into()]).is_empty());
        assert_eq!(
            std::fs::read_to_string(d.path().join("bench.py")).unwrap(),
            "b"
        );
        assert!(!d.path().join("new.py").exists());
        assert_eq!(
            std::fs::read_to_string(d.path().join("train.py")).unwrap(),
            "edited"
        );
    }

    #[test]
    fn a_saved_snapshot_loads_back_and_restores() {
        let d = tempfile::tempdir().unwrap();
        let proj = d.path().join("proj");
        std::fs::create_dir(&proj).unwrap();
        std::fs::write(proj.join("train.py"), "a").unwrap();
        std::fs::write(proj.join("bench.py"), "b").unwrap();
        let snap = ProjectSnapshot::capture(&proj, &[]).unwrap();
        let saved = d.path().join("snapshot");
        snap.save(&saved).unwrap();
        // The manifest as earlier versions wrote it (fields, order).
        let text = std::fs::read_to_string(saved.join("manifest.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["files"]["bench.py"]["saved"], true);
        assert_eq!(v["files"]["bench.py"]["size"], 1);
        assert!(v["files"]["bench.py"]["mtime_ns"].as_u64().is_some());
        assert!(text.find("\"files\"").unwrap() < text.find("\"root\"").unwrap());
        let back = ProjectSnapshot::load(&saved).unwrap();
        assert_eq!(back.root, snap.root);
        assert_eq!(back.files, snap.files);
        std::fs::write(proj.join("bench.py"), "tampered").unwrap();
        assert!(back.restore_others(&["train.py".into()]).is_empty());
        assert_eq!(std::fs::read_to_string(proj.join("bench.py")).unwrap(), "b");
    }
}

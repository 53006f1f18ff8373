//! Git, where the project is a repository: refusing to start over uncommitted
//! edits to the editable files, and recording kept changes as commits on a
//! branch `tuneloop/<run-id>` with plumbing commands (a temporary index), so
//! the user's current branch, index and work tree are never touched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::process::{self, Spec};
use crate::store::FileSet;

/// Why a git command gave no answer, or the work tree cannot start a run.
#[derive(Debug, Error)]
pub enum GitError {
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    /// git ran and refused: the command line and what it printed.
    #[error("git {args}: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("the project is not in a git repository")]
    NotARepository,
    #[error("cannot resolve {}: {source}", .path.display())]
    Path {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the editable files have uncommitted changes: {}\n  hint: commit or stash them first, or pass --allow-dirty", .files.join(", "))]
    Dirty { files: Vec<String> },
}

fn git(
    cwd: &Path,
    args: &[&str],
    env: &BTreeMap<String, String>,
    stdin: Option<&[u8]>,
) -> Result<String, GitError> {
    let spec = Spec {
        program: "git".into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        cwd: cwd.to_owned(),
        env: env.clone(),
        env_remove: Vec::new(),
        stdin: stdin.map(|b| b.to_vec()),
        timeout: std::time::Duration::from_secs(60),
        done_marker: None,
        end_at_done: false,
    };
    let out = process::run_quick(&spec).map_err(GitError::Spawn)?;
    if out.success() {
        Ok(out.stdout.trim_end().to_string())
    } else {
        Err(GitError::Failed {
            args: args.join(" "),
            stderr: out.stderr.trim().to_string(),
        })
    }
}

/// The repository's top folder, when `dir` is inside one.
pub fn repo_root(dir: &Path) -> Option<PathBuf> {
    git(
        dir,
        &["rev-parse", "--show-toplevel"],
        &BTreeMap::new(),
        None,
    )
    .ok()
    .map(PathBuf::from)
}

/// Refuses when an editable file has uncommitted changes (unless allowed):
/// a run must be able to say what the baseline was.
pub fn check_clean(root: &Path, editable: &[String], allow_dirty: bool) -> Result<(), GitError> {
    if allow_dirty || repo_root(root).is_none() {
        return Ok(());
    }
    let mut args = vec!["status", "--porcelain", "--"];
    args.extend(editable.iter().map(|s| s.as_str()));
    let out = git(root, &args, &BTreeMap::new(), None)?;
    if out.trim().is_empty() {
        return Ok(());
    }
    let files = out
        .lines()
        .map(|l| l.get(3..).unwrap_or(l).to_string())
        .collect();
    Err(GitError::Dirty { files })
}

/// Commits the editable files' kept state on `branch` (created from HEAD the
/// first time), touching neither HEAD, the index nor the work tree.
pub fn commit_kept(
    root: &Path,
    files: &FileSet,
    branch: &str,
    message: &str,
) -> Result<String, GitError> {
    let top = repo_root(root).ok_or(GitError::NotARepository)?;
    let canonical = |path: &Path| {
        std::fs::canonicalize(path).map_err(|source| GitError::Path {
            path: path.to_owned(),
            source,
        })
    };
    let root = canonical(root)?;
    let prefix = root.strip_prefix(canonical(&top)?).unwrap_or(Path::new(""));
    let none = BTreeMap::new();
    let parent = git(
        &top,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ],
        &none,
        None,
    )
    .or_else(|_| git(&top, &["rev-parse", "--verify", "HEAD"], &none, None))?;
    let index = std::env::temp_dir().join(format!("tuneloop-index-{}", std::process::id()));
    let mut env = BTreeMap::new();
    env.insert("GIT_INDEX_FILE".to_string(), index.display().to_string());
    if git(&top, &["config", "user.email"], &none, None)
        .unwrap_or_default()
        .is_empty()
    {
        for k in ["GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"] {
            env.insert(k.into(), "tuneloop".into());
        }
        for k in ["GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"] {
            env.insert(k.into(), "tuneloop@localhost".into());
        }
    }
    let result = (|| {
        git(&top, &["read-tree", &parent], &env, None)?;
        for (rel, bytes) in &files.0 {
            let blob = git(&top, &["hash-object", "-w", "--stdin"], &env, Some(bytes))?;
            let path = prefix.join(rel).to_string_lossy().into_owned();
            git(
                &top,
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("100644,{blob},{path}"),
                ],
                &env,
                None,
            )?;
        }
        let tree = git(&top, &["write-tree"], &env, None)?;
        let commit = git(
            &top,
            &["commit-tree", &tree, "-p", &parent, "-m", message],
            &env,
            None,
        )?;
        git(
            &top,
            &["update-ref", &format!("refs/heads/{branch}"), &commit],
            &env,
            None,
        )?;
        Ok(commit)
    })();
    let _ = std::fs::remove_file(&index);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, cmd: &str) -> String {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        sh(d.path(), "git init -q -b main && git config user.email t@t && git config user.name t && mkdir proj && echo 'a = 1' > proj/train.py && echo x > other && git add -A && git commit -qm init");
        d
    }

    #[test]
    fn dirty_editable_files_are_refused_unless_allowed() {
        let d = repo();
        let proj = d.path().join("proj");
        assert!(check_clean(&proj, &["train.py".into()], false).is_ok());
        std::fs::write(proj.join("train.py"), "a = 2\n").unwrap();
        let e = check_clean(&proj, &["train.py".into()], false).unwrap_err();
        assert!(
            matches!(&e, GitError::Dirty { files } if files == &["proj/train.py"]),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains("train.py") && e.contains("--allow-dirty"), "{e}");
        assert!(check_clean(&proj, &["train.py".into()], true).is_ok());
    }

    #[test]
    fn kept_changes_become_commits_on_a_branch_and_head_is_untouched() {
        let d = repo();
        let proj = d.path().join("proj");
        let head = sh(d.path(), "git rev-parse HEAD");
        let fs = FileSet(
            [("train.py".to_string(), b"a = 2\n".to_vec())]
                .into_iter()
                .collect(),
        );
        commit_kept(&proj, &fs, "tuneloop/r1", "turn 1: a 1 → 2").unwrap();
        let fs2 = FileSet(
            [("train.py".to_string(), b"a = 3\n".to_vec())]
                .into_iter()
                .collect(),
        );
        commit_kept(&proj, &fs2, "tuneloop/r1", "turn 2: a 2 → 3").unwrap();
        assert_eq!(sh(d.path(), "git rev-parse HEAD"), head);
        assert_eq!(sh(d.path(), "git branch --show-current"), "main");
        assert_eq!(sh(d.path(), "git status --porcelain"), "");
        assert_eq!(sh(d.path(), "git show tuneloop/r1:proj/train.py"), "a = 3");
        assert_eq!(
            sh(d.path(), "git log --format=%s tuneloop/r1"),
            "turn 2: a 2 → 3\nturn 1: a 1 → 2\ninit"
        );
        assert_eq!(sh(d.path(), "git show tuneloop/r1:other"), "x");
    }
}

//! Error types of the operations that can stop a command, and the exit codes
//! of docs/configuration.md. A failed *turn* is not an error: it is a recorded decision.
//!
//! Errors that wrap another keep it as `#[source]`; where their message
//! already words the cause (users read one line), [`render`] prints it once.

use std::path::{Path, PathBuf};

use thiserror::Error;

pub mod exit {
    pub const OK: i32 = 0;
    /// Usage or configuration error.
    pub const CONFIG: i32 = 2;
    /// The baseline could not be measured.
    pub const BASELINE: i32 = 3;
    /// The agent could not be started.
    pub const AGENT: i32 = 4;
    /// Interrupted (SIGINT/SIGTERM).
    pub const INTERRUPTED: i32 = 130;
}

/// A place in a TOML file the user edits: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    /// The line and column (in characters) of byte `offset` of `text`.
    pub fn of_offset(text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Position {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

/// `path:line:column` where the place is known, else `path`: the form
/// editors and terminals open at the line.
pub fn place(path: &Path, at: &Option<Position>) -> String {
    match at {
        Some(p) => format!("{}:{}:{}", path.display(), p.line, p.column),
        None => path.display().to_string(),
    }
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("no tuneloop.toml in {start} or any folder above it\n  hint: run `tuneloop init` in your project, or pass -C DIR")]
    NoWorkspace { start: PathBuf },
    #[error("cannot read {path}: {err}\n  hint: {hint}")]
    Read {
        path: PathBuf,
        #[source]
        err: std::io::Error,
        hint: &'static str,
    },
    /// Not TOML, or a value of the wrong type: `key` is the dotted key whose
    /// value is wrong, when the file parsed far enough to say; `snippet`
    /// shows the line with a caret under the span. (toml's own error is
    /// taken apart into these, not kept: its text repeats them.)
    #[error("{}: {}{message}{snippet}", place(.path, .at), .key.as_ref().map(|k| format!("`{k}`: ")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        key: Option<String>,
        at: Option<Position>,
        message: String,
        snippet: String,
    },
    /// A value of the right type that cannot work; `at` is where the key
    /// (or the offending element of its array) is written, or the table it
    /// belongs in when the key is missing.
    #[error("{}: `{key}`: {message}", place(.path, .at))]
    Invalid {
        path: PathBuf,
        key: String,
        at: Option<Position>,
        message: String,
    },
}

/// An error and its causes for the terminal, each cause once: the causes
/// joined by `: `, as anyhow's `{:#}` does, but a cause whose text the
/// message before it already shows (a typed error that words its
/// `#[source]` into its own message) is not repeated.
pub fn render(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

/// Why a bench process gave no figure.
#[derive(Debug, Error, Clone)]
pub enum BenchError {
    #[error("could not start `{program}`: {message}\n  hint: set [project] python in tuneloop.toml or TUNELOOP_PYTHON to an interpreter with torch installed")]
    Spawn { program: String, message: String },
    #[error("the bench ran past its limit of {limit_s} s and was killed (whole process group)\n  hint: lower [bench] steps or raise [bench] timeout_s; where it was stuck:\n{tail}")]
    Timeout { limit_s: u64, tail: String },
    #[error("{kind}: {message}")]
    User { kind: String, message: String },
    #[error("the bench exited with status {code} and printed no figure; last output:\n{tail}")]
    Crashed { code: String, tail: String },
    #[error(
        "the bench printed no figure (expected a line `samples/sec: N`); last output:\n{tail}"
    )]
    NoFigure { tail: String },
    #[error("interrupted")]
    Interrupted,
    /// The side's files could not be put in place before its run: not a
    /// bench failure, a file one (no interpreter is involved).
    #[error("cannot put the {role}'s files in place in {root}: {message}\n  hint: check that the project folder is writable and its disk is not full")]
    Files {
        role: String,
        root: PathBuf,
        message: String,
    },
}

impl BenchError {
    /// The command ended before the measurement's batches (command mode).
    pub fn is_too_few_steps(&self) -> bool {
        matches!(self, BenchError::User { kind, .. } if kind == "too_few_steps")
    }

    /// The command cannot be measured in any run, whatever the mode: it
    /// could not start, its set-up failed (an import, `build()`, no torch),
    /// it never iterated a DataLoader or ended too early. A profiled run
    /// that fails so ends the baseline at once; one that crashed, timed out
    /// or printed no figure may be the profiler's doing, and the throughput
    /// runs go on without its table.
    pub fn fails_every_run(&self) -> bool {
        matches!(
            self,
            BenchError::Spawn { .. } | BenchError::User { .. } | BenchError::Files { .. }
        )
    }

    /// A short one-line reason for tables.
    pub fn short(&self) -> String {
        let s = self.to_string();
        let first = s.lines().next().unwrap_or("").to_string();
        if first.len() > 160 {
            format!(
                "{}…",
                &first[..first
                    .char_indices()
                    .nth(157)
                    .map(|(i, _)| i)
                    .unwrap_or(first.len())]
            )
        } else {
            first
        }
    }
}

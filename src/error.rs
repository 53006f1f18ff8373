//! Error types of the operations that can stop a command, and the exit codes
//! of docs/configuration.md. A failed *turn* is not an error: it is a recorded decision.

use std::path::PathBuf;

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

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("no tuneloop.toml in {start} or any folder above it\n  hint: run `tuneloop init` in your project, or pass -C DIR")]
    NoWorkspace { start: PathBuf },
    #[error("cannot read {path}: {err}\n  hint: {hint}")]
    Read {
        path: PathBuf,
        err: std::io::Error,
        hint: &'static str,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: `{key}`: {message}")]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
    },
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

//! How one Claude Code call can fail, typed: the agent report and the turn
//! folder's `call.json` record each as its `Display` text, so the wording
//! here is what run folders and tests read.

use std::path::PathBuf;

use super::ProgramNotFound;

/// Why a call gave no usable answer: either it could not be made (or its
/// records could not be written), or the CLI ran and did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A record of the call (`prompt.md`, `events.jsonl`, ...) or the turn
    /// folder itself could not be written.
    #[error("cannot write {what} in {}: {err}", .dir.display())]
    Write {
        what: &'static str,
        dir: PathBuf,
        #[source]
        err: std::io::Error,
    },
    #[error(transparent)]
    Program(#[from] ProgramNotFound),
    /// The executable was found but the process could not be started.
    #[error("could not start `{program}`: {err}")]
    Spawn {
        program: String,
        #[source]
        err: std::io::Error,
    },
    /// Ctrl-C or SIGTERM to tuneloop.
    #[error("interrupted (Ctrl-C or SIGTERM to tuneloop); the call was ended")]
    Interrupted,
    #[error("timed out after {limit_s} s (timeout_s); the whole process group was ended")]
    TimedOut { limit_s: u64 },
    /// The stream showed more assistant turns than `--max-turns` allows.
    #[error("went on past --max-turns {limit} ({seen} assistant turns seen); the call was ended")]
    TurnLimit { limit: u32, seen: u32 },
    /// `stderr` is the line of the CLI's stderr that names the error, or empty.
    #[error("crashed (killed by signal {signal}){}", then(.stderr))]
    Signalled { signal: i32, stderr: String },
    #[error("crashed (exit {code}) before its result{}", then(.stderr))]
    Crashed { code: i32, stderr: String },
    /// Exit 0 but no `result` event: the output was not the stream expected.
    #[error("unreadable output: no result event in {lines} lines ({not_json} not JSON){}", .last.as_ref().map(|l| format!("; last unreadable line: {l}")).unwrap_or_default())]
    Unreadable {
        lines: u32,
        not_json: u32,
        last: Option<String>,
    },
    /// The `result` event says the call failed: `words` are the CLI's own
    /// (its errors, its result text, or stderr), `tags` the subtype,
    /// terminal reason, exit and `is_error` that say so.
    #[error("{words} ({})", .tags.join(", "))]
    Result { words: String, tags: Vec<String> },
}

/// `: text`, or nothing when there is no text.
fn then(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

impl CallError {
    /// No later turn can do better without the user (not logged in, no
    /// credit): the run stops now.
    pub fn is_fatal(&self) -> bool {
        super::is_fatal(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_could_not_start_keeps_its_cause_and_says_it_once() {
        let e = CallError::Spawn {
            program: "/usr/bin/claude".into(),
            err: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert!(std::error::Error::source(&e).is_some());
        let shown = crate::error::render(&anyhow::Error::new(e));
        assert_eq!(
            shown,
            "could not start `/usr/bin/claude`: permission denied"
        );
        let e = CallError::Write {
            what: "prompt.md",
            dir: "/r/turns/01".into(),
            err: std::io::Error::from(std::io::ErrorKind::StorageFull),
        };
        assert_eq!(
            crate::error::render(&anyhow::Error::new(e)),
            "cannot write prompt.md in /r/turns/01: no storage space"
        );
    }

    #[test]
    fn a_missing_program_reads_as_before() {
        let e = CallError::from(ProgramNotFound::Empty);
        assert_eq!(e.to_string(), ProgramNotFound::Empty.to_string());
    }
}

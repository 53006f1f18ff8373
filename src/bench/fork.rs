//! The fork server (`zygote.py`): one Python process per bencher imports
//! torch and the first step's lazy imports once, and each run is forked
//! from it instead of starting Python afresh: managed mode's harness runs,
//! and command mode's `python SCRIPT …` / `python -m MODULE …`. A run is still
//! a process of its own that tuneloop spawns, times, limits and ends (the
//! small client `zygote.py run`), with its own session, stdio, environment
//! and random seeds; only the 2-4 s of imports before its first step are
//! gone (bench/RESULTS.md, "Tuning in minutes").
//!
//! The server starts with the first run that can use it, and is given up
//! for the bencher's life when it cannot start: the runs are then fresh
//! processes, as with `[bench] fork_server = false` or
//! `TUNELOOP_FORK_SERVER=0`. A launcher (torchrun, `[bench] launcher` or at
//! the command's head), a command with interpreter flags (`python -u …`),
//! contract mode and the whole-command rounds always start fresh processes.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::process::{Server, Spec};

pub const ZYGOTE_PY: &str = include_str!("zygote.py");
pub const ZYGOTE_FILE: &str = "tuneloop_zygote.py";
const READY: &str = "TUNELOOP_ZYGOTE_READY";
/// Where the server's own stderr goes, beside the harness.
const LOG_FILE: &str = "tuneloop_zygote.log";
/// Turns the fork server off for this process (`0`, `false`, `off`, `no`).
pub const ENV_FORK_SERVER: &str = "TUNELOOP_FORK_SERVER";
/// The longest the server may take to import torch before runs go fresh.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Whether the fork server is on: `[bench] fork_server`, unless
/// [`ENV_FORK_SERVER`] says otherwise.
pub fn enabled(configured: bool) -> bool {
    enabled_by(configured, std::env::var(ENV_FORK_SERVER).ok().as_deref())
}

fn enabled_by(configured: bool, env: Option<&str>) -> bool {
    match env.map(|v| v.trim().to_ascii_lowercase()) {
        Some(v) if !v.is_empty() => !matches!(v.as_str(), "0" | "false" | "off" | "no"),
        _ => configured,
    }
}

enum State {
    Off,
    NotStarted,
    Running {
        server: Box<Server>,
        name: String,
        /// The interpreter it runs: a run of another goes fresh.
        program: String,
    },
    /// It could not start (or died): fresh processes from now on.
    GaveUp(String),
}

/// The bencher's fork server, shared by its copies (a widened window's).
#[derive(Clone)]
pub struct ForkServer(Arc<Mutex<State>>);

impl Default for ForkServer {
    /// Off: every run a fresh process.
    fn default() -> Self {
        ForkServer(Arc::new(Mutex::new(State::Off)))
    }
}

impl std::fmt::Debug for ForkServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForkServer")
    }
}

impl ForkServer {
    pub fn new(enabled: bool) -> Self {
        ForkServer(Arc::new(Mutex::new(if enabled {
            State::NotStarted
        } else {
            State::Off
        })))
    }

    /// `run` (a fresh harness run: python, the harness, its arguments)
    /// turned into the same run forked from the server, starting the server
    /// first if need be; `run` unchanged where there is no server to use.
    /// The server gets `run`'s interpreter, folder and environment: a run
    /// whose environment differs goes fresh (the server checks).
    pub async fn wrap(&self, run: Spec, harness_dir: &Path) -> Spec {
        let args = run.args.iter().skip(1).cloned().collect();
        self.wrap_as(run, harness_dir, "harness", args).await
    }

    /// Command mode: `run` (the user's command as measured) forked from the
    /// server where it is `python SCRIPT …` or `python -m MODULE …`;
    /// unchanged otherwise (a launcher, a shell script, interpreter flags).
    pub async fn wrap_command(&self, run: Spec, harness_dir: &Path) -> Spec {
        let Some((kind, args)) = command_kind(&run) else {
            return run;
        };
        self.wrap_as(run, harness_dir, kind, args).await
    }

    async fn wrap_as(&self, run: Spec, harness_dir: &Path, kind: &str, args: Vec<String>) -> Spec {
        let mut state = self.0.lock().await;
        if let State::Running { server, .. } = &mut *state {
            if !server.is_running() {
                *state = State::GaveUp(format!(
                    "the fork server ended (its log: {})",
                    harness_dir.join(LOG_FILE).display()
                ));
            }
        }
        if matches!(*state, State::NotStarted) {
            // `python SCRIPT …`: the server imports what the script imports
            // of installed packages too.
            let script = (kind == "script").then(|| args[0].as_str());
            *state = start(&run, harness_dir, script).await;
        }
        let State::Running { name, program, .. } = &*state else {
            return run;
        };
        if *program != run.program {
            return run;
        }
        let zygote = harness_dir.join(ZYGOTE_FILE).display().to_string();
        let mut words = vec![zygote, "run".into(), "--socket".into(), name.clone()];
        words.extend(["--kind".into(), kind.into(), "--".into()]);
        words.extend(args);
        Spec { args: words, ..run }
    }

    /// Why runs are fresh processes though the server was on, if they are
    /// (none while a run is starting, which holds the lock).
    pub fn gave_up(&self) -> Option<String> {
        match &*self.0.try_lock().ok()? {
            State::GaveUp(why) => Some(why.clone()),
            _ => None,
        }
    }
}

/// What a command-mode run is to the server: `script` with `SCRIPT ARGS…`,
/// or `module` with `MODULE ARGS…`; none where the program is not a Python
/// or the words after it are interpreter flags.
fn command_kind(run: &Spec) -> Option<(&'static str, Vec<String>)> {
    if !crate::interpreter::names_python(&run.program) {
        return None;
    }
    match run.args.first().map(String::as_str) {
        Some("-m") if run.args.len() >= 2 => Some(("module", run.args[1..].to_vec())),
        Some(w) if !w.starts_with('-') => Some(("script", run.args.clone())),
        _ => None,
    }
}

async fn start(run: &Spec, harness_dir: &Path, script: Option<&str>) -> State {
    let name = format!(
        "tuneloop-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let spec = Spec {
        program: run.program.clone(),
        args: [
            harness_dir.join(ZYGOTE_FILE).display().to_string(),
            "serve".into(),
            "--socket".into(),
            name.clone(),
        ]
        .into_iter()
        .chain(
            script
                .into_iter()
                .flat_map(|s| ["--preload-script".into(), s.to_string()]),
        )
        .collect(),
        // Not the TUNELOOP_* variables: in command mode they arm the
        // instrumentation at start-up, which only the forked run may do.
        env: run
            .env
            .iter()
            .filter(|(k, _)| !k.starts_with("TUNELOOP_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        timeout: READY_TIMEOUT.min(run.timeout.max(Duration::from_secs(1))),
        stdin: None,
        done_marker: None,
        end_at_done: false,
        ..run.clone()
    };
    match Server::start(&spec, READY, &harness_dir.join(LOG_FILE)).await {
        Ok(server) => State::Running {
            server: Box::new(server),
            name,
            program: run.program.clone(),
        },
        Err(e) => State::GaveUp(format!("the fork server did not start: {e}")),
    }
}

/// What `tuneloop bench` says of how its runs started, where it is worth
/// saying: how many were forked, or why none could be.
pub fn start_line(runs: &[crate::bench::Measurement], fork: &ForkServer) -> Option<String> {
    if let Some(why) = fork.gave_up() {
        return Some(format!("process start: fresh processes; {why}"));
    }
    let forked = runs
        .iter()
        .filter(|m| m.process_start.as_deref() == Some("forked"))
        .count();
    match forked {
        0 => None,
        n => Some(format!(
            "process start: {n} of {} runs forked from a server that imported torch once ([bench] fork_server)",
            runs.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_forked_as_a_script_or_a_module_and_nothing_else() {
        let spec = |program: &str, args: &[&str]| Spec {
            program: program.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            cwd: ".".into(),
            env: Default::default(),
            env_remove: vec![],
            stdin: None,
            timeout: Duration::from_secs(1),
            done_marker: None,
            end_at_done: false,
        };
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            command_kind(&spec("/v/bin/python", &["train.py", "--epochs", "1"])),
            Some(("script", w(&["train.py", "--epochs", "1"])))
        );
        assert_eq!(
            command_kind(&spec("/v/bin/python3.12", &["-m", "pkg.train", "-x"])),
            Some(("module", w(&["pkg.train", "-x"])))
        );
        for (program, args) in [
            ("/v/bin/python", &["-u", "train.py"][..]),
            ("/v/bin/python", &["-m"]),
            ("/v/bin/python", &[]),
            ("/v/bin/torchrun", &["train.py"]),
            ("sh", &["-c", "python train.py"]),
        ] {
            assert_eq!(
                command_kind(&spec(program, args)),
                None,
                "{program} {args:?}"
            );
        }
    }

    #[test]
    fn the_environment_overrides_the_workspace_either_way() {
        assert!(enabled_by(true, None));
        assert!(!enabled_by(false, None));
        for off in ["0", "false", "OFF", " no "] {
            assert!(!enabled_by(true, Some(off)), "{off}");
        }
        assert!(enabled_by(false, Some("1")));
        // Empty is no override.
        assert!(!enabled_by(false, Some("")));
        assert!(enabled_by(true, Some("")));
    }
}

//! Claude Code in headless mode (`claude -p`) as the agent.
//!
//! One turn is one call: the prompt is rendered from `prompts/turn.{language}.md`
//! ([`prompt`]), the command line is built from the policy alone ([`command`]),
//! the incumbent's profiler table goes in on stdin (or, past the CLI's 10 MB
//! cap, as a file named in the prompt), and the call runs through
//! [`crate::process`] in the project folder, in its own process group, under
//! the policy's `timeout_s`. Its `stream-json` events are read line by line
//! ([`stream`]): each tool call is shown live, the raw stream is written to the
//! turn folder as it arrives, and the final `result` event decides success.
//! A call that goes on past `--max-turns` (some CLI versions ignore it) is ended
//! like a timeout.
//!
//! The tuning procedure reaches the agent on every turn: Claude Code reads the
//! `CLAUDE.md` files of the working folder and its ancestors by itself, so when
//! one of those carries tuneloop's marked block nothing more is passed;
//! otherwise the block goes in with `--append-system-prompt`.
//!
//! The agent's word is never trusted: the loop verifies the files afterwards.
//! What this module leaves in `turns/NN/`: `prompt.md`, `argv.json`,
//! `events.jsonl` (the raw stream), `stderr.txt`, `result.json` (the result
//! event as received), `call.json` (stdin size, session id, permission
//! denials, tool calls, cost, turns, exit, duration, failure) and `stdin.txt`
//! or `profile.txt` (the table it was given).

pub mod command;
mod error;
pub mod prompt;
pub mod stream;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use crate::config::{AgentPolicy, Policy, Workspace};
use crate::process::{self, Ending, Interrupt, Spec};
use crate::turn::AgentInfo;

use super::{AgentReport, TurnContext};
pub use error::CallError;
use prompt::TableDelivery;
use stream::{CallEnd, Stream};

const MARK_BEGIN: &str = "<!-- tuneloop:begin";
const MARK_END: &str = "<!-- tuneloop:end -->";

/// Turns past `--max-turns` tolerated before tuneloop ends the call itself
/// (the CLI may count the final reply differently).
const TURN_SLACK: u32 = 1;

pub struct ClaudeAgent {
    command: String,
    ws_dir: PathBuf,
}

/// How the tuning procedure reaches the agent.
#[derive(Clone, Debug, PartialEq)]
pub enum Procedure {
    /// A `CLAUDE.md` that Claude Code reads by itself carries it.
    Discovered(PathBuf),
    /// Passed with `--append-system-prompt`.
    Appended(String),
}

impl ClaudeAgent {
    pub fn new(policy: &Policy, ws: &Workspace) -> ClaudeAgent {
        ClaudeAgent {
            command: policy.agent.command.clone(),
            ws_dir: ws.dir.clone(),
        }
    }

    /// The executable must exist before the baseline is spent on a run it cannot finish.
    pub fn preflight(&self) -> Result<(), ProgramNotFound> {
        resolve_program(&self.command, &self.ws_dir).map(|_| ())
    }

    pub async fn propose(
        &mut self,
        ctx: &TurnContext<'_>,
        on_tool: &mut (dyn FnMut(&str, &str) + Send),
    ) -> AgentReport {
        let started = Instant::now();
        let mut rep = AgentReport {
            info: AgentInfo {
                backend: "claude".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        if let Err(e) = self.call(ctx, on_tool, &mut rep).await {
            rep.failure = Some(e.to_string());
        }
        if rep.info.duration_ms == 0 {
            rep.info.duration_ms = started.elapsed().as_millis() as u64;
        }
        rep
    }

    /// One call; `Err` for failures before the CLI ran (or its records could not be written).
    async fn call(
        &self,
        ctx: &TurnContext<'_>,
        on_tool: &mut (dyn FnMut(&str, &str) + Send),
        rep: &mut AgentReport,
    ) -> Result<(), CallError> {
        let ap = &ctx.policy.agent;
        let dir = &ctx.turn_dir;
        let io = |what: &'static str, err: std::io::Error| CallError::Write {
            what,
            dir: dir.clone(),
            err,
        };
        std::fs::create_dir_all(dir).map_err(|e| io("the turn folder", e))?;
        let program = resolve_program(&ap.command, &ctx.ws.dir)?;

        // The profiler table: stdin, or a file the agent is told about.
        let table = ctx.profile_table;
        let delivery = prompt::table_delivery(table, &dir.join("profile.txt"));
        let mut add_dirs = Vec::new();
        let stdin = match &delivery {
            TableDelivery::Stdin => {
                std::fs::write(dir.join("stdin.txt"), table).map_err(|e| io("stdin.txt", e))?;
                Some(table.as_bytes().to_vec())
            }
            TableDelivery::File(p) => {
                std::fs::write(p, table).map_err(|e| io("profile.txt", e))?;
                add_dirs.push(dir.display().to_string());
                None
            }
            TableDelivery::None => None,
        };

        let (template, template_source) =
            prompt::load_template(&ctx.ws.dir, &ap.prompt, &ap.language);
        let editable = &ctx.ws.file.project.editable;
        let sites = scan_call_sites(ctx.project_root, editable);
        let evidence =
            crate::agent::evidence::Evidence::of(ctx.incumbent, ctx.incumbent_sps, ctx.ceiling_sps);
        let knob_sites = scan_knob_sites(ctx.project_root, editable);
        // The loader's knobs and the compute side's (told as one more rule);
        // not the compute side's while the loader binds: no compute change
        // can move the limit then (crate::compute::gate).
        let allowed =
            crate::compute::offered_knobs(ctx.policy, ctx.incumbent, ctx.step_parts.as_ref());
        let with_command = prompt_editable(editable, &knob_sites);
        let editable = &with_command;
        let facts = prompt::PromptFacts {
            language: &ap.language,
            turn: ctx.turn,
            max_iterations: ctx.max_iterations,
            knobs: &allowed,
            editable,
            incumbent_sps: ctx.incumbent_sps,
            data_wait_share: ctx.incumbent.data_wait_share,
            cpu_count: ctx.incumbent.cpu_count,
            limits: limits_evidence(ctx),
            device: ctx.incumbent.device.as_deref(),
            call_sites: &sites,
            knob_sites: &knob_sites,
            measured_site: ctx.incumbent.call_site.as_deref(),
            loader_settings: ctx
                .incumbent
                .loader
                .iter()
                .map(|(k, v)| (k.clone(), python_literal(v)))
                .collect(),
            history: ctx.history,
            table: &delivery,
            evidence: Some(&evidence),
        };
        let text = prompt::render(&template, &facts);
        std::fs::write(dir.join("prompt.md"), &text).map_err(|e| io("prompt.md", e))?;

        let procedure = procedure(&ctx.ws.dir, ctx.project_root);
        let append = match &procedure {
            Procedure::Appended(t) => Some(t.as_str()),
            Procedure::Discovered(_) => None,
        };
        let args = command::args(
            ap,
            &command::Invocation {
                prompt: &text,
                append_system_prompt: append,
                add_dirs: &add_dirs,
            },
        );
        let spec = Spec {
            program: program.display().to_string(),
            args,
            cwd: ctx.project_root.to_owned(),
            env: BTreeMap::new(),
            // Started from inside a Claude Code session, the child would see
            // the parent's markers and refuse to start nested.
            env_remove: command::PARENT_SESSION_VARS
                .iter()
                .map(|k| k.to_string())
                .collect(),
            stdin,
            timeout: ctx.policy.agent_timeout(),
            done_marker: None,
            end_at_done: false,
        };
        let argv: Vec<&String> = std::iter::once(&spec.program)
            .chain(spec.args.iter())
            .collect();
        crate::fsio::write_json(&dir.join("argv.json"), &argv).map_err(|e| io("argv.json", e))?;

        // The call. Its own interrupt flag follows tuneloop's, and is also
        // raised when the stream shows more turns than --max-turns allows.
        let mut events =
            std::fs::File::create(dir.join("events.jsonl")).map_err(|e| io("events.jsonl", e))?;
        let local = Interrupt::new();
        let watcher = {
            let (global, local) = (ctx.interrupt.clone(), local.clone());
            tokio::spawn(async move {
                while !global.is_raised() {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                local.raise();
            })
        };
        let mut st = Stream::default();
        let mut tripped: Option<u32> = None;
        let turn_cap = ap.max_turns.saturating_add(TURN_SLACK);
        // Shown live with paths relative to the project.
        let root_prefix = format!("{}/", ctx.project_root.display());
        let ran = process::run(&spec, &local, |line| {
            let _ = writeln!(events, "{line}");
            for t in st.feed(line) {
                on_tool(&t.name, &t.summary.replace(&root_prefix, ""));
            }
            if tripped.is_none() && st.assistant_turns() > turn_cap {
                tripped = Some(st.assistant_turns());
                local.raise();
            }
        })
        .await;
        watcher.abort();
        let _ = events.sync_all();
        let out = ran.map_err(|err| CallError::Spawn {
            program: spec.program.clone(),
            err,
        })?;

        let end = match out.ending {
            Ending::Exited(c) => CallEnd::Exited(c),
            Ending::Signalled(s) => CallEnd::Signalled(s),
            Ending::TimedOut => CallEnd::TimedOut(spec.timeout),
            Ending::Interrupted => match tripped {
                Some(seen) if !ctx.interrupt.is_raised() => CallEnd::TurnLimit {
                    limit: ap.max_turns,
                    seen,
                },
                _ => CallEnd::Interrupted,
            },
        };
        let failure = stream::failure(&end, &st, &out.stderr);
        let result = st.result.clone();

        rep.interrupted = end == CallEnd::Interrupted;
        rep.info.exit_code = out.code();
        rep.info.duration_ms = out.duration.as_millis() as u64;
        rep.info.num_turns = result
            .as_ref()
            .and_then(|r| r.num_turns)
            .or((st.assistant_turns() > 0).then(|| st.assistant_turns()));
        rep.info.cost_usd = result.as_ref().and_then(|r| r.total_cost_usd);
        let reply = result.as_ref().and_then(|r| r.result.as_deref()).map(|t| {
            let first = t
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("");
            stream::shorten(first, 200)
        });
        let denials: Vec<String> = result
            .as_ref()
            .map(|r| {
                r.permission_denials
                    .iter()
                    .map(|d| d["tool_name"].as_str().unwrap_or("?").to_string())
                    .collect()
            })
            .unwrap_or_default();
        rep.summary = match (&reply, denials.is_empty()) {
            (Some(r), true) => r.clone(),
            (Some(r), false) => format!("{r} [permission denied: {}]", denials.join(", ")),
            (None, true) => String::new(),
            (None, false) => format!("[permission denied: {}]", denials.join(", ")),
        };
        // No later turn can do better without the user: stop the run now.
        rep.fatal = failure.as_ref().is_some_and(CallError::is_fatal);
        let failure = failure.map(|f| f.to_string());
        rep.failure = failure.clone();

        if !out.stderr.is_empty() {
            std::fs::write(dir.join("stderr.txt"), &out.stderr).map_err(|e| io("stderr.txt", e))?;
        }
        if let Some(r) = &result {
            crate::fsio::write_json(&dir.join("result.json"), &r.raw)
                .map_err(|e| io("result.json", e))?;
        }
        let (ending, signal) = match &end {
            CallEnd::Exited(_) => ("exited", None),
            CallEnd::Signalled(s) => ("signalled", Some(*s)),
            CallEnd::TimedOut(_) => ("timed_out", None),
            CallEnd::TurnLimit { .. } => ("ended_past_max_turns", None),
            CallEnd::Interrupted => ("interrupted", None),
        };
        let record = json!({
            "backend": "claude",
            "program": spec.program,
            "cwd": spec.cwd,
            "shell_line": spec.shell_line(),
            "env_removed": command::parent_session_vars_set(),
            "timeout_s": spec.timeout.as_secs(),
            "prompt_template": template_source,
            "procedure": match &procedure {
                Procedure::Discovered(p) => format!("CLAUDE.md read by Claude Code: {}", p.display()),
                Procedure::Appended(_) => "--append-system-prompt".to_string(),
            },
            "stdin": {
                "delivery": match &delivery {
                    TableDelivery::Stdin => "stdin",
                    TableDelivery::File(_) => "file",
                    TableDelivery::None => "none",
                },
                "bytes": if delivery == TableDelivery::Stdin { table.len() } else { 0 },
                "utf16_units": if delivery == TableDelivery::Stdin { table.encode_utf16().count() } else { 0 },
                "table_bytes": table.len(),
                "file": match &delivery { TableDelivery::File(p) => Some(p.display().to_string()), _ => None },
            },
            "ending": ending,
            "exit_code": out.code(),
            "signal": signal,
            "duration_ms": out.duration.as_millis() as u64,
            "result_duration_ms": result.as_ref().and_then(|r| r.duration_ms),
            "success": failure.is_none(),
            "failure": failure,
            "subtype": result.as_ref().map(|r| r.subtype.clone()),
            "is_error": result.as_ref().map(|r| r.is_error),
            "terminal_reason": result.as_ref().and_then(|r| r.terminal_reason.clone()),
            "num_turns": result.as_ref().and_then(|r| r.num_turns),
            "assistant_turns_seen": st.assistant_turns(),
            "total_cost_usd": result.as_ref().and_then(|r| r.total_cost_usd),
            "session_id": result.as_ref().and_then(|r| r.session_id.clone())
                .or_else(|| st.init.as_ref().and_then(|i| i["session_id"].as_str().map(str::to_string))),
            "permission_denials": result.as_ref().map(|r| r.permission_denials.clone()).unwrap_or_default(),
            "tool_calls": st.tool_uses,
            "reply": result.as_ref().and_then(|r| r.result.clone()),
            "errors": result.as_ref().map(|r| r.errors.clone()).unwrap_or_default(),
            "init": st.init_summary(),
            "events": { "lines": st.lines, "not_json": st.not_json },
        });
        crate::fsio::write_json(&dir.join("call.json"), &record).map_err(|e| io("call.json", e))?;
        Ok(())
    }
}

/// How to get Claude Code, or do without it: the hint of [`ProgramNotFound`].
const HOW_TO_INSTALL: &str = "  install Claude Code: npm install -g @anthropic-ai/claude-code (then run `claude` once to log in)\n  \
    or set [agent] command in the policy to the path of the executable\n  \
    or tune without it: tuneloop start --agent builtin";

/// The Claude Code executable the policy names is not there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramNotFound {
    #[error("[agent] command is empty\n{how}", how = HOW_TO_INSTALL)]
    Empty,
    #[error("the Claude Code CLI was not found: {} is not an executable file ([agent] command = \"{command}\")\n{how}", .path.display(), how = HOW_TO_INSTALL)]
    NotExecutable { path: PathBuf, command: String },
    #[error("the Claude Code CLI `{name}` was not found on PATH\n{how}", how = HOW_TO_INSTALL)]
    NotOnPath { name: String },
}

/// The executable the policy names: a path (relative to the workspace, `~`
/// expanded) or a name found on PATH. The error says how to get it.
pub fn resolve_program(command: &str, ws_dir: &Path) -> Result<PathBuf, ProgramNotFound> {
    let cmd = crate::config::expand_home(command.trim());
    if cmd.is_empty() {
        return Err(ProgramNotFound::Empty);
    }
    if cmd.contains('/') {
        let p = ws_dir.join(&cmd);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(ProgramNotFound::NotExecutable {
                path: p,
                command: command.to_string(),
            })
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(&cmd))
        .find(|p| is_executable(p))
        .ok_or(ProgramNotFound::NotOnPath { name: cmd })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The text between tuneloop's markers in a `CLAUDE.md`.
pub fn procedure_block(text: &str) -> Option<&str> {
    let b = text.find(MARK_BEGIN)?;
    let e = text.find(MARK_END)?;
    let start = b + text[b..].find('\n')? + 1;
    (start <= e).then(|| text[start..e].trim())
}

/// Whether a `CLAUDE.md` that Claude Code reads from the project folder (or
/// one above it) carries the procedure; else the workspace's block, or the
/// built-in one, to append to the system prompt.
pub fn procedure(ws_dir: &Path, project_root: &Path) -> Procedure {
    let root = std::fs::canonicalize(project_root).unwrap_or_else(|_| project_root.to_owned());
    for d in root.ancestors() {
        let md = d.join("CLAUDE.md");
        if let Ok(t) = std::fs::read_to_string(&md) {
            if procedure_block(&t).is_some_and(|b| !b.is_empty()) {
                return Procedure::Discovered(md);
            }
        }
    }
    let own = std::fs::read_to_string(ws_dir.join("CLAUDE.md")).ok();
    let text = own
        .as_deref()
        .and_then(procedure_block)
        .filter(|b| !b.is_empty())
        .or_else(|| procedure_block(crate::agent::assets::PROCEDURE_MD))
        .unwrap_or(crate::agent::assets::PROCEDURE_MD);
    Procedure::Appended(text.to_string())
}

/// The command line `policy show` prints: exactly what a turn runs, with a
/// placeholder for the prompt rendered each turn.
pub fn command_line_preview(ap: &AgentPolicy, ws: &Workspace) -> (String, Procedure) {
    let procedure = procedure(&ws.dir, &ws.project_root);
    let placeholder = format!(
        "<turn prompt: {} rendered each turn>",
        ap.prompt.replace("{language}", &ap.language)
    );
    let append = match &procedure {
        Procedure::Appended(t) => Some(t.as_str()),
        Procedure::Discovered(_) => None,
    };
    let args = command::args(
        ap,
        &command::Invocation {
            prompt: &placeholder,
            append_system_prompt: append,
            add_dirs: &[],
        },
    );
    let mut argv = vec![ap.command.clone()];
    argv.extend(args);
    (shell_words::join(argv), procedure)
}

fn scan_call_sites(root: &Path, editable: &[String]) -> Vec<crate::edit::CallSite> {
    editable
        .iter()
        .filter(|f| f.ends_with(".py"))
        .filter_map(|f| {
            let src = std::fs::read_to_string(root.join(f)).ok()?;
            crate::edit::scan_source(f, &src).ok()
        })
        .flatten()
        .collect()
}

/// The files the prompt lists as the agent's to edit: the editable files,
/// and tuneloop.toml when a knob's value is a word of the user's command in
/// its `[bench] run` ([`crate::edit::command_line`]).
fn prompt_editable(editable: &[String], knob_sites: &[crate::edit::KnobSite]) -> Vec<String> {
    let mut out = editable.to_vec();
    let run_file = crate::edit::command_line::RUN_FILE;
    let in_command = knob_sites
        .iter()
        .flat_map(|s| &s.knobs)
        .any(|o| matches!(&o.source, crate::edit::Source::Command { .. }));
    if in_command && !out.iter().any(|f| f == run_file) {
        out.push(format!(
            "{run_file} (only the one word of `[bench] run` that passes a knob's value)"
        ));
    }
    out
}

/// Every knob-taking call of the editable files, with where each knob's value is defined.
fn scan_knob_sites(root: &Path, editable: &[String]) -> Vec<crate::edit::KnobSite> {
    let read = crate::edit::knobs::read_under(root);
    editable
        .iter()
        .filter(|f| f.ends_with(".py"))
        .filter_map(|f| crate::edit::knob_sites(f, &read(f)?, &read).ok())
        .flatten()
        .collect()
}

/// A harness value as Python would print it.
fn python_literal(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Bool(true) => "True".into(),
        serde_json::Value::Bool(false) => "False".into(),
        serde_json::Value::Null => "None".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The prompt's line on the limits: both, which binds, the incumbent's
/// share of it, and the cores the job may use when fewer than the host's.
fn limits_evidence(ctx: &TurnContext<'_>) -> String {
    let l = ctx.limits();
    let mut out = l.summary();
    if let Some(share) = l.final_share {
        out.push_str(&format!(
            "; the incumbent is at {:.0}% of the binding one",
            share * 100.0
        ));
    }
    out
}

/// Failures that every later call would repeat (authentication, a missing
/// account or key): the run stops instead of burning its turns.
pub fn is_fatal(failure: &str) -> bool {
    let f = failure.to_lowercase();
    [
        "not logged in",
        "/login",
        "invalid api key",
        "authentication",
        "credit balance",
    ]
    .iter()
    .any(|k| f.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_executable_says_how_to_install_it() {
        let d = tempfile::tempdir().unwrap();
        let e = resolve_program("claude-surely-not-installed-here", d.path()).unwrap_err();
        assert_eq!(
            e,
            ProgramNotFound::NotOnPath {
                name: "claude-surely-not-installed-here".into()
            }
        );
        let e = e.to_string();
        assert!(
            e.contains("npm install -g @anthropic-ai/claude-code") && e.contains("--agent builtin"),
            "{e}"
        );
        let e = resolve_program("bin/claude", d.path()).unwrap_err();
        assert!(matches!(e, ProgramNotFound::NotExecutable { .. }), "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains(&d.path().join("bin/claude").display().to_string()),
            "{e}"
        );
        // A path relative to the workspace, executable: found.
        std::fs::create_dir_all(d.path().join("bin")).unwrap();
        std::fs::write(d.path().join("bin/claude"), "#!/bin/sh\n").unwrap();
        assert!(
            resolve_program("bin/claude", d.path()).is_err(),
            "not executable yet"
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            d.path().join("bin/claude"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_eq!(
            resolve_program("bin/claude", d.path()).unwrap(),
            d.path().join("bin/claude")
        );
        // A name on PATH.
        assert!(resolve_program("sh", d.path()).unwrap().is_absolute());
    }

    #[test]
    fn the_procedure_is_appended_only_when_no_claude_md_reaches_the_agent() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let project = ws.join("proj");
        std::fs::create_dir_all(&project).unwrap();
        // No CLAUDE.md anywhere: the built-in block, without its markers.
        match procedure(&ws, &project) {
            Procedure::Appended(t) => {
                assert!(
                    t.contains("Change ONE thing per turn") && !t.contains("tuneloop:begin"),
                    "{t}"
                );
            }
            other => panic!("{other:?}"),
        }
        // The workspace's block, edited by the user, one folder up from the project: read by the CLI.
        let md = format!("# mine\n{MARK_BEGIN} (managed) -->\nMY PROCEDURE\n{MARK_END}\n");
        std::fs::write(ws.join("CLAUDE.md"), &md).unwrap();
        assert_eq!(
            procedure(&ws, &project),
            Procedure::Discovered(ws.join("CLAUDE.md"))
        );
        // A project outside the workspace gets the workspace's block appended.
        let elsewhere = tempfile::tempdir().unwrap();
        assert_eq!(
            procedure(&ws, elsewhere.path()),
            Procedure::Appended("MY PROCEDURE".into())
        );
        // A CLAUDE.md without the block does not count.
        std::fs::write(ws.join("CLAUDE.md"), "# only notes\n").unwrap();
        assert!(matches!(procedure(&ws, &project), Procedure::Appended(_)));
    }

    #[test]
    fn procedure_block_reads_between_the_markers() {
        assert_eq!(
            procedure_block(crate::agent::assets::PROCEDURE_MD).map(|b| b.starts_with("## ")),
            Some(true)
        );
        assert_eq!(procedure_block("no markers"), None);
    }

    #[test]
    fn the_prompt_lists_tuneloop_toml_when_a_knob_is_in_the_command() {
        let script = "import argparse\nfrom torch.utils.data import DataLoader\np = argparse.ArgumentParser()\np.add_argument('-j', '--workers', type=int, default=4)\nargs = p.parse_args()\nDataLoader(ds, num_workers=args.workers)\n";
        let editable = vec!["train.py".to_string()];
        let sites_with = |toml: &str| {
            let toml = toml.to_string();
            let read = move |f: &str| (f == "tuneloop.toml").then(|| toml.clone());
            crate::edit::knob_sites("train.py", script, &read).unwrap()
        };
        let passed = sites_with("[bench]\nrun = [\"python\", \"train.py\", \"-j\", \"0\"]\n");
        let listed = prompt_editable(&editable, &passed);
        assert_eq!(listed.len(), 2);
        assert!(listed[1].starts_with("tuneloop.toml (only the one word of `[bench] run`"));
        let not_passed = sites_with("[bench]\nrun = [\"python\", \"train.py\"]\n");
        assert_eq!(prompt_editable(&editable, &not_passed), editable);
    }
}

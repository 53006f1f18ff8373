//! `tuneloop doctor`: everything a run needs, checked in one go, each miss
//! with how to fix it. Two halves: [`gather`] looks at the machine (runs the
//! interpreter once, `git --version`, `claude --version`; never a model call),
//! and [`assess`] turns those [`Facts`] into [`Check`]s — pure, unit-tested.
//! A run can start when no check failed; warnings (a missing Claude Code CLI
//! while the builtin agent is chosen, no git) do not stop it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::config::{Policy, Workspace};
use crate::interpreter::{self, Interpreter, TorchInfo};
use crate::process::{self, Ending, Interrupt, Spec};

/// Exit code when a run cannot start (the configuration error code, docs/configuration.md).
pub const EXIT_NOT_READY: i32 = crate::error::exit::CONFIG;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// Worth knowing; a run still starts.
    Warn,
    /// A run cannot start until this is fixed.
    Fail,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// Short name: `python`, `torch`, `cores`, …
    pub name: &'static str,
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// How to fix it (absent when the check passed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// `doctor --json`: the checks, and whether a run can start.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub ready: bool,
    pub checks: Vec<Check>,
    pub interpreter: Interpreter,
    pub torch: TorchInfo,
    pub machine: Machine,
}

/// The figures behind the `cores`, `memory`, `git` and `claude` lines.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub cores_usable: usize,
    pub cores_online: usize,
    pub mem_total_bytes: Option<u64>,
    pub mem_available_bytes: Option<u64>,
    pub git_version: Option<String>,
    pub claude_path: Option<PathBuf>,
    pub claude_version: Option<String>,
}

/// The workspace as `doctor` found it.
#[derive(Clone, Debug)]
pub enum WorkspaceFacts {
    /// No `tuneloop.toml` here or above.
    Missing(String),
    /// Found but does not load (the error names file, key and fix).
    Invalid(String),
    Loaded {
        dir: PathBuf,
        warnings: Vec<String>,
        mode: BenchMode,
        launcher: Option<String>,
    },
}

/// How the workspace measures (docs/measuring.md, "Three ways in").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchMode {
    /// `[bench] entry`: tuneloop's harness runs `build()`.
    Managed,
    /// `[bench] run`: the user's training command, instrumented.
    Command,
    /// `[bench] command`: a script that prints `samples/sec: N`.
    Contract,
}

impl BenchMode {
    fn of(b: &crate::config::BenchSection) -> BenchMode {
        if b.entry.is_some() {
            BenchMode::Managed
        } else if b.run.is_some() {
            BenchMode::Command
        } else {
            BenchMode::Contract
        }
    }

    fn word(self) -> &'static str {
        match self {
            BenchMode::Managed => "managed",
            BenchMode::Command => "command",
            BenchMode::Contract => "contract",
        }
    }
}

#[derive(Clone, Debug)]
pub enum PolicyFacts {
    /// No workspace, so no policy to read.
    NotRead,
    Invalid(String),
    Loaded {
        path: PathBuf,
        backend: String,
        /// Unknown keys and the agent command-line warnings.
        warnings: Vec<String>,
    },
}

/// What can be told about a Claude Code login without calling a model.
#[derive(Clone, Debug, PartialEq)]
pub enum Login {
    /// An environment variable that carries a key or token (its name).
    Env(&'static str),
    /// The credentials file `claude` writes when you log in.
    CredentialsFile(PathBuf),
    /// Neither: `claude -p` would answer "Not logged in".
    NoneFound,
}

#[derive(Clone, Debug)]
pub struct ClaudeFacts {
    /// `[agent] command` of the policy (default `claude`).
    pub command: String,
    pub program: Result<PathBuf, crate::agent::claude::ProgramNotFound>,
    /// `claude --version`'s first line, or why it gave none.
    pub version: Result<String, VersionError>,
    pub login: Login,
}

#[derive(Clone, Debug)]
pub struct Facts {
    pub workspace: WorkspaceFacts,
    pub policy: PolicyFacts,
    pub interpreter: Interpreter,
    pub torch: TorchInfo,
    /// CPUs this process may run on (affinity), and CPUs online.
    pub cores_usable: usize,
    pub cores_online: usize,
    /// From /proc/meminfo, bytes.
    pub mem_total: Option<u64>,
    pub mem_available: Option<u64>,
    /// `git --version`, or why not.
    pub git: Result<String, VersionError>,
    /// The repository above the project, when there is one.
    pub git_repo: Option<PathBuf>,
    pub claude: ClaudeFacts,
    /// The launcher's program (first word), resolved as the bench resolves it.
    pub launcher: Option<LauncherFacts>,
}

#[derive(Clone, Debug)]
pub struct LauncherFacts {
    pub template: String,
    pub program: String,
    pub found: Option<PathBuf>,
}

// ---------------------------------------------------------------- gather

const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// Looks at the machine from `cwd` (the workspace is found from there).
pub async fn gather(cwd: &Path, interrupt: &Interrupt) -> Facts {
    let (workspace, ws) = match Workspace::find(cwd) {
        Err(e) => (WorkspaceFacts::Missing(e.to_string()), None),
        Ok(dir) => match Workspace::load(&dir) {
            Err(e) => (WorkspaceFacts::Invalid(e.to_string()), None),
            Ok(ws) => (
                WorkspaceFacts::Loaded {
                    dir: ws.dir.clone(),
                    warnings: ws.warnings.clone(),
                    mode: BenchMode::of(&ws.file.bench),
                    launcher: ws.file.bench.launcher.clone(),
                },
                Some(ws),
            ),
        },
    };
    let (policy, agent) = match &ws {
        None => (PolicyFacts::NotRead, None),
        Some(ws) => read_policy(ws),
    };
    let interpreter = match &ws {
        Some(ws) => ws.interpreter(),
        None => interpreter::discover(
            None,
            &interpreter::DiscoveryEnv::from_process(),
            &Path::is_file,
        ),
    };
    let run_dir = ws
        .as_ref()
        .map(|w| w.project_root.clone())
        .unwrap_or_else(|| cwd.to_owned());
    let torch = interpreter::probe_torch(&interpreter.program, &run_dir, interrupt).await;
    let git = version_of("git", &run_dir, interrupt).await;
    let git_repo = crate::git::repo_root(&run_dir);
    let command = agent
        .map(|a| a.command)
        .unwrap_or_else(|| crate::config::AgentPolicy::default().command);
    let ws_dir = ws.as_ref().map(|w| w.dir.clone()).unwrap_or(cwd.to_owned());
    let program = crate::agent::claude::resolve_program(&command, &ws_dir);
    let version = match &program {
        Ok(p) => version_of(&p.display().to_string(), &run_dir, interrupt).await,
        Err(_) => Err(VersionError::NotFound),
    };
    let launcher = ws.as_ref().and_then(|ws| {
        let b = &ws.file.bench;
        let template = b.launcher.clone()?;
        let words = crate::bench::launcher_words(&template, b.nproc, &interpreter.program);
        let program = words.first()?.clone();
        Some(LauncherFacts {
            found: find_program(&program, &ws.dir),
            template,
            program,
        })
    });
    let (mem_total, mem_available) = meminfo();
    Facts {
        workspace,
        policy,
        interpreter,
        torch,
        cores_usable: usable_cores(),
        cores_online: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .max(online_cores()),
        mem_total,
        mem_available,
        git,
        git_repo,
        claude: ClaudeFacts {
            command,
            program,
            version,
            login: claude_login(&|k| std::env::var(k).ok(), &Path::exists),
        },
        launcher,
    }
}

fn read_policy(ws: &Workspace) -> (PolicyFacts, Option<crate::config::AgentPolicy>) {
    let path = ws.policy_path(None);
    let default_path = ws.file.run.policy == crate::config::RunSection::default().policy;
    let (policy, mut warnings) = if default_path && !path.exists() {
        (
            Policy::default(),
            vec![format!(
                "{} not found: the built-in default policy is used (`tuneloop init` writes it)",
                path.display()
            )],
        )
    } else {
        match Policy::load(&path) {
            Err(e) => return (PolicyFacts::Invalid(e.to_string()), None),
            Ok(file) => {
                if let Err(e) = file.validate() {
                    return (PolicyFacts::Invalid(e.to_string()), Some(file.policy.agent));
                }
                let warnings = file.warnings();
                (file.policy, warnings)
            }
        }
    };
    if policy.agent.backend == "claude" {
        warnings.extend(
            crate::agent::claude::command::warnings(&policy.agent)
                .into_iter()
                .map(|w| format!("{}: {w}", path.display())),
        );
    }
    (
        PolicyFacts::Loaded {
            path,
            backend: policy.agent.backend.clone(),
            warnings,
        },
        Some(policy.agent),
    )
}

/// Why `PROGRAM --version` gave no version. (Facts are cloned, so the io
/// error is shared rather than owned.)
#[derive(Clone, Debug, thiserror::Error)]
pub enum VersionError {
    #[error("cannot run {program}: {err}")]
    Spawn {
        program: String,
        #[source]
        err: Arc<std::io::Error>,
    },
    /// It ran and did not succeed; `stderr` is its last line.
    #[error("`{program} --version` ended {ending:?}: {stderr}")]
    Failed {
        program: String,
        ending: Ending,
        stderr: String,
    },
    /// There is no program to ask.
    #[error("not found")]
    NotFound,
}

/// `PROGRAM --version`'s first line.
async fn version_of(
    program: &str,
    cwd: &Path,
    interrupt: &Interrupt,
) -> Result<String, VersionError> {
    let spec = Spec {
        program: program.to_string(),
        args: vec!["--version".into()],
        cwd: cwd.to_owned(),
        timeout: VERSION_TIMEOUT,
        ..Spec::default()
    };
    let out = process::run(&spec, interrupt, |_| {})
        .await
        .map_err(|err| VersionError::Spawn {
            program: program.to_string(),
            err: Arc::new(err),
        })?;
    if !out.success() {
        return Err(VersionError::Failed {
            program: program.to_string(),
            ending: out.ending,
            stderr: out.stderr.lines().last().unwrap_or("").trim().to_string(),
        });
    }
    Ok(out.stdout.lines().next().unwrap_or("").trim().to_string())
}

/// A path (relative to `base`) or a name on PATH.
fn find_program(program: &str, base: &Path) -> Option<PathBuf> {
    if program.contains('/') {
        let p = base.join(program);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Where Claude Code's login can be seen without running it: a key or token
/// in the environment, or the credentials file (`$CLAUDE_CONFIG_DIR` or
/// `~/.claude`, `.credentials.json`; on macOS it lives in the Keychain instead).
pub fn claude_login(var: &dyn Fn(&str) -> Option<String>, exists: &dyn Fn(&Path) -> bool) -> Login {
    for k in [
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
    ] {
        if var(k).is_some_and(|v| !v.trim().is_empty()) {
            return Login::Env(k);
        }
    }
    let dir = var("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".claude")));
    if let Some(f) = dir.map(|d| d.join(".credentials.json")) {
        if exists(&f) {
            return Login::CredentialsFile(f);
        }
    }
    Login::NoneFound
}

/// CPUs in this process's affinity mask (what `taskset` or a container allows).
fn usable_cores() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call only fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let n = libc::CPU_COUNT(&set);
            if n > 0 {
                return n as usize;
            }
        }
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

/// MemTotal and MemAvailable, bytes.
fn meminfo() -> (Option<u64>, Option<u64>) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    parse_meminfo(&text)
}

pub fn parse_meminfo(text: &str) -> (Option<u64>, Option<u64>) {
    let kib = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|k| k * 1024)
    };
    (kib("MemTotal:"), kib("MemAvailable:"))
}

/// The command: gather, assess, print; the exit code says whether a run can start.
pub async fn command(cwd: &Path, json: bool, interrupt: &Interrupt) -> i32 {
    let report = assess(&gather(cwd, interrupt).await);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print!("{}", render_text(&report));
    }
    if report.ready {
        crate::error::exit::OK
    } else {
        EXIT_NOT_READY
    }
}

// ---------------------------------------------------------------- assess

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The checks, in the order a user fixes them.
pub fn assess(f: &Facts) -> Report {
    let mut v = Vec::new();
    let ok = |name, detail: String| Check {
        name,
        status: Status::Ok,
        detail,
        fix: None,
    };
    let miss = |name, status, detail: String, fix: String| Check {
        name,
        status,
        detail,
        fix: Some(fix),
    };

    // The workspace, and with it the editable files and bench mode.
    let (mode, launcher_set) = match &f.workspace {
        WorkspaceFacts::Missing(e) => {
            v.push(miss(
                "workspace",
                Status::Fail,
                first_line(e),
                "run `tuneloop init --entry train:build` in your project (or `--bench-cmd \"python bench.py\"`), or pass -C DIR".into(),
            ));
            (BenchMode::Managed, false)
        }
        WorkspaceFacts::Invalid(e) => {
            v.push(miss(
                "workspace",
                Status::Fail,
                e.clone(),
                "fix the key named above in tuneloop.toml".into(),
            ));
            (BenchMode::Managed, false)
        }
        WorkspaceFacts::Loaded {
            dir,
            warnings,
            mode,
            launcher,
        } => {
            v.push(ok(
                "workspace",
                format!(
                    "{} ({} mode)",
                    dir.join(crate::config::WORKSPACE_FILE).display(),
                    mode.word()
                ),
            ));
            for w in warnings {
                v.push(miss(
                    "workspace",
                    Status::Warn,
                    w.clone(),
                    "remove or rename the key (see docs/configuration.md)".into(),
                ));
            }
            (*mode, launcher.is_some())
        }
    };
    match &f.policy {
        PolicyFacts::NotRead => {}
        PolicyFacts::Invalid(e) => v.push(miss(
            "policy",
            Status::Fail,
            e.clone(),
            "fix the key named above in the policy file (`tuneloop policy show` prints it as loaded)".into(),
        )),
        PolicyFacts::Loaded {
            path,
            backend,
            warnings,
        } => {
            v.push(ok(
                "policy",
                format!("{} (agent: {backend})", path.display()),
            ));
            for w in warnings {
                v.push(miss(
                    "policy",
                    Status::Warn,
                    w.clone(),
                    "see the comments in policies/default.toml".into(),
                ));
            }
        }
    }

    // The interpreter and its torch.
    let i = &f.interpreter;
    v.push(ok(
        "python",
        format!(
            "{} ({}){}",
            i.program,
            i.rule.describe(),
            f.torch
                .python_version
                .as_deref()
                .map(|p| format!(", Python {p}"))
                .unwrap_or_default()
        ),
    ));
    match &f.torch.torch_version {
        Some(_) => v.push(ok("torch", f.torch.summary())),
        None => v.push(miss(
            "torch",
            // It is the Python that runs in managed mode, and in command mode
            // where the command names it; otherwise the user's own command
            // may start another.
            if mode == BenchMode::Managed || i.rule == interpreter::Rule::CommandHead {
                Status::Fail
            } else {
                Status::Warn
            },
            format!("{}: {}", i.program, f.torch.summary()),
            interpreter::fix_missing_torch(i),
        )),
    }

    // The machine.
    let cores = format!(
        "{} usable of {} online{}",
        f.cores_usable,
        f.cores_online,
        if f.cores_usable < f.cores_online {
            " (CPU affinity limits this process)"
        } else {
            ""
        }
    );
    if f.cores_usable < 2 {
        v.push(miss(
            "cores",
            Status::Warn,
            cores,
            "with one core, DataLoader workers compete with the training step: expect small gains; run where more cores are allowed (taskset, the container's CPU limit)".into(),
        ));
    } else {
        v.push(ok("cores", cores));
    }
    match (f.mem_total, f.mem_available) {
        (Some(t), Some(a)) => {
            let detail = format!(
                "{:.1} GiB available of {:.1} GiB",
                a as f64 / GIB,
                t as f64 / GIB
            );
            if (a as f64) < GIB {
                v.push(miss(
                    "memory",
                    Status::Warn,
                    detail,
                    "under 1 GiB free: every DataLoader worker holds a copy of the dataset object; free memory or expect workers to be killed".into(),
                ));
            } else {
                v.push(ok("memory", detail));
            }
        }
        _ => v.push(miss(
            "memory",
            Status::Warn,
            "/proc/meminfo is not readable".into(),
            "nothing to do unless runs die for lack of memory".into(),
        )),
    }

    // git: optional (dirty-file check, --git-commits).
    match (&f.git, &f.git_repo) {
        (Ok(ver), Some(repo)) => v.push(ok("git", format!("{ver}; project in {}", repo.display()))),
        (Ok(ver), None) => v.push(miss(
            "git",
            Status::Warn,
            format!("{ver}; the project is not in a git repository"),
            "optional: `git init && git add -A && git commit -m base` lets tuneloop refuse to start over uncommitted edits and record kept changes (--git-commits)".into(),
        )),
        (Err(e), _) => v.push(miss(
            "git",
            Status::Warn,
            format!("git is not usable: {e}"),
            "optional: install git (`apt-get install git`) to protect uncommitted edits and record kept changes".into(),
        )),
    }

    // The Claude Code CLI: needed only when the policy's agent is claude.
    let needs_claude =
        matches!(&f.policy, PolicyFacts::Loaded { backend, .. } if backend == "claude");
    let absent = if needs_claude {
        Status::Fail
    } else {
        Status::Warn
    };
    let c = &f.claude;
    match (&c.program, &c.version) {
        (Err(e), _) => v.push(miss(
            "claude",
            absent,
            format!(
                "{}{}",
                first_line(&e.to_string()),
                if needs_claude { "" } else { " (needed only for --agent claude; the builtin agent runs without it)" }
            ),
            "npm install -g @anthropic-ai/claude-code, or set [agent] command to its path, or tune with --agent builtin".into(),
        )),
        (Ok(p), Err(e)) => v.push(miss(
            "claude",
            absent,
            format!("{} does not run: {e}", p.display()),
            "reinstall Claude Code (npm install -g @anthropic-ai/claude-code), or set [agent] command to a working executable".into(),
        )),
        (Ok(p), Ok(ver)) => {
            v.push(ok("claude", format!("{} ({ver})", p.display())));
            match &c.login {
                Login::Env(k) => v.push(ok("claude login", format!("{k} is set"))),
                Login::CredentialsFile(f) => v.push(ok("claude login", format!("credentials in {}", f.display()))),
                Login::NoneFound => v.push(miss(
                    "claude login",
                    // Logins kept elsewhere (a keychain, an apiKeyHelper) cannot be seen: a warning, not a failure.
                    Status::Warn,
                    "no ANTHROPIC_API_KEY, no CLAUDE_CODE_OAUTH_TOKEN and no ~/.claude/.credentials.json".into(),
                    format!("run `{}` once and log in (/login), or export ANTHROPIC_API_KEY", c.command),
                )),
            }
        }
    }

    // The launcher (torchrun, srun, …) when the bench runs under one.
    if let (true, Some(l)) = (launcher_set, &f.launcher) {
        match &l.found {
            Some(p) => v.push(ok("launcher", format!("{} (from `{}`)", p.display(), l.template))),
            None => v.push(miss(
                "launcher",
                Status::Fail,
                format!("`{}` of [bench] launcher = \"{}\" is not on PATH nor beside {}", l.program, l.template, f.interpreter.program),
                if l.program == "torchrun" {
                    format!("torchrun comes with torch: activate the environment that has it, or write its path in [bench] launcher (`{} -m torch.distributed.run` works too)", f.interpreter.program)
                } else {
                    format!("install `{}` or write its full path in [bench] launcher", l.program)
                },
            )),
        }
    }

    Report {
        ready: !v.iter().any(|c| c.status == Status::Fail),
        checks: v,
        interpreter: f.interpreter.clone(),
        torch: f.torch.clone(),
        machine: Machine {
            cores_usable: f.cores_usable,
            cores_online: f.cores_online,
            mem_total_bytes: f.mem_total,
            mem_available_bytes: f.mem_available,
            git_version: f.git.as_ref().ok().cloned(),
            claude_path: f.claude.program.as_ref().ok().cloned(),
            claude_version: f.claude.version.as_ref().ok().cloned(),
        },
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// The report as text, one line a check, fixes indented below.
pub fn render_text(r: &Report) -> String {
    let mut out = String::new();
    for c in &r.checks {
        let mark = match c.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!("{mark}  {:<12} {}\n", c.name, c.detail));
        if let Some(f) = &c.fix {
            out.push_str(&format!("      {:<12} fix: {f}\n", ""));
        }
    }
    out.push_str(if r.ready {
        "ready: a run can start (`tuneloop bench`, `tuneloop start`)\n"
    } else {
        "not ready: fix the FAIL lines above, then run `tuneloop doctor` again\n"
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::Rule;

    fn facts() -> Facts {
        Facts {
            workspace: WorkspaceFacts::Loaded {
                dir: "/p".into(),
                warnings: vec![],
                mode: BenchMode::Managed,
                launcher: None,
            },
            policy: PolicyFacts::Loaded {
                path: "/p/policies/default.toml".into(),
                backend: "builtin".into(),
                warnings: vec![],
            },
            interpreter: Interpreter {
                program: "/venv/bin/python".into(),
                rule: Rule::VirtualEnv,
            },
            torch: TorchInfo {
                python_version: Some("3.11.7".into()),
                torch_version: Some("2.13.0".into()),
                ..TorchInfo::default()
            },
            cores_usable: 2,
            cores_online: 2,
            mem_total: Some(24 << 30),
            mem_available: Some(20 << 30),
            git: Ok("git version 2.39.5".into()),
            git_repo: Some("/p".into()),
            claude: ClaudeFacts {
                command: "claude".into(),
                program: Err(crate::agent::claude::ProgramNotFound::NotOnPath {
                    name: "claude".into(),
                }),
                version: Err(VersionError::NotFound),
                login: Login::NoneFound,
            },
            launcher: None,
        }
    }

    fn status(r: &Report, name: &str) -> Status {
        r.checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no check {name} in {r:#?}"))
            .status
    }

    #[test]
    fn a_builtin_run_is_ready_without_claude_code() {
        let r = assess(&facts());
        assert!(r.ready, "{}", render_text(&r));
        assert_eq!(status(&r, "claude"), Status::Warn);
        assert_eq!(status(&r, "torch"), Status::Ok);
    }

    #[test]
    fn the_claude_agent_needs_its_cli() {
        let mut f = facts();
        f.policy = PolicyFacts::Loaded {
            path: "/p/policies/default.toml".into(),
            backend: "claude".into(),
            warnings: vec![],
        };
        let r = assess(&f);
        assert!(!r.ready);
        assert_eq!(status(&r, "claude"), Status::Fail);
        let fix = r
            .checks
            .iter()
            .find(|c| c.name == "claude")
            .unwrap()
            .fix
            .clone()
            .unwrap();
        assert!(
            fix.contains("npm install -g @anthropic-ai/claude-code"),
            "{fix}"
        );
        // Found and runs, but no login to be seen: a warning with the way to log in.
        f.claude.program = Ok("/usr/bin/claude".into());
        f.claude.version = Ok("2.1.332 (Claude Code)".into());
        let r = assess(&f);
        assert!(r.ready);
        assert_eq!(status(&r, "claude login"), Status::Warn);
        f.claude.login = Login::Env("ANTHROPIC_API_KEY");
        assert_eq!(status(&assess(&f), "claude login"), Status::Ok);
    }

    #[tokio::test]
    async fn a_version_that_cannot_be_read_says_why() {
        let d = tempfile::tempdir().unwrap();
        let i = Interrupt::new();
        let e = version_of("/no/such/program", d.path(), &i)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, VersionError::Spawn { program, .. } if program == "/no/such/program"),
            "{e:?}"
        );
        assert!(std::error::Error::source(&e).is_some());
        assert!(
            e.to_string().starts_with("cannot run /no/such/program: "),
            "{e}"
        );
        let e = version_of("false", d.path(), &i).await.unwrap_err();
        assert_eq!(e.to_string(), "`false --version` ended Exited(1): ");
        let mut f = facts();
        f.git = Err(e);
        let r = assess(&f);
        let git = r.checks.iter().find(|c| c.name == "git").unwrap();
        assert_eq!(git.status, Status::Warn);
        assert_eq!(
            git.detail,
            "git is not usable: `false --version` ended Exited(1): "
        );
    }

    #[test]
    fn no_torch_fails_in_managed_mode_and_warns_in_contract_mode() {
        let mut f = facts();
        f.torch = TorchInfo {
            python_version: Some("3.12.1".into()),
            error: Some("ModuleNotFoundError: No module named 'torch'".into()),
            ..TorchInfo::default()
        };
        let r = assess(&f);
        assert!(!r.ready);
        let c = r.checks.iter().find(|c| c.name == "torch").unwrap();
        assert_eq!(c.status, Status::Fail);
        assert!(c.detail.contains("No module named 'torch'"), "{}", c.detail);
        assert!(c.fix.as_deref().unwrap().contains("activate"), "{c:?}");
        f.workspace = WorkspaceFacts::Loaded {
            dir: "/p".into(),
            warnings: vec![],
            mode: BenchMode::Contract,
            launcher: None,
        };
        assert!(assess(&f).ready);
        assert!(render_text(&assess(&f)).contains("(contract mode)"));
        // Command mode: a bare `python` may be another interpreter than the
        // one discovered (a warning); a command that names its interpreter
        // runs exactly that one, so no torch there stops the run.
        f.workspace = WorkspaceFacts::Loaded {
            dir: "/p".into(),
            warnings: vec![],
            mode: BenchMode::Command,
            launcher: None,
        };
        let r = assess(&f);
        assert!(r.ready);
        assert!(render_text(&r).contains("(command mode)"));
        f.interpreter = crate::interpreter::Interpreter {
            program: "/v/bin/python".into(),
            rule: Rule::CommandHead,
        };
        let r = assess(&f);
        assert!(!r.ready);
        let c = r.checks.iter().find(|c| c.name == "torch").unwrap();
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.fix
                .as_deref()
                .unwrap()
                .contains("[bench] run starts /v/bin/python"),
            "{c:?}"
        );
    }

    #[test]
    fn a_missing_workspace_or_launcher_stops_a_run_and_says_how() {
        let mut f = facts();
        f.workspace =
            WorkspaceFacts::Missing("no tuneloop.toml in /x or any folder above it".into());
        f.policy = PolicyFacts::NotRead;
        let r = assess(&f);
        assert!(!r.ready);
        assert!(render_text(&r).contains("tuneloop init --entry train:build"));

        let mut f = facts();
        f.workspace = WorkspaceFacts::Loaded {
            dir: "/p".into(),
            warnings: vec![],
            mode: BenchMode::Managed,
            launcher: Some("torchrun --nproc_per_node {nproc}".into()),
        };
        f.launcher = Some(LauncherFacts {
            template: "torchrun --nproc_per_node {nproc}".into(),
            program: "torchrun".into(),
            found: None,
        });
        let r = assess(&f);
        assert!(!r.ready);
        assert_eq!(status(&r, "launcher"), Status::Fail);
        f.launcher.as_mut().unwrap().found = Some("/venv/bin/torchrun".into());
        assert!(assess(&f).ready);
    }

    #[test]
    fn login_is_seen_in_the_environment_or_the_credentials_file() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let nothing = |_: &Path| false;
        assert_eq!(
            claude_login(
                &env(&[("ANTHROPIC_API_KEY", "sk-x"), ("HOME", "/h")]),
                &nothing
            ),
            Login::Env("ANTHROPIC_API_KEY")
        );
        assert_eq!(
            claude_login(
                &env(&[("ANTHROPIC_API_KEY", " "), ("HOME", "/h")]),
                &nothing
            ),
            Login::NoneFound
        );
        let creds = |p: &Path| p == Path::new("/h/.claude/.credentials.json");
        assert_eq!(
            claude_login(&env(&[("HOME", "/h")]), &creds),
            Login::CredentialsFile("/h/.claude/.credentials.json".into())
        );
        // CLAUDE_CONFIG_DIR moves the file.
        assert_eq!(
            claude_login(
                &env(&[("HOME", "/h"), ("CLAUDE_CONFIG_DIR", "/cfg")]),
                &creds
            ),
            Login::NoneFound
        );
    }

    #[test]
    fn meminfo_is_read_in_bytes() {
        let (t, a) = parse_meminfo(
            "MemTotal:       24576000 kB\nMemFree:  1 kB\nMemAvailable:   12288000 kB\n",
        );
        assert_eq!(t, Some(24576000 * 1024));
        assert_eq!(a, Some(12288000 * 1024));
    }

    #[test]
    fn few_usable_cores_are_named_as_an_affinity_limit() {
        let mut f = facts();
        f.cores_usable = 1;
        f.cores_online = 8;
        let r = assess(&f);
        let c = r.checks.iter().find(|c| c.name == "cores").unwrap();
        assert_eq!(c.status, Status::Warn);
        assert!(c.detail.contains("1 usable of 8 online") && c.detail.contains("affinity"));
        assert!(r.ready);
    }
}

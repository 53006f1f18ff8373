//! The command line: clap definitions, turning arguments into settings, and
//! the commands themselves (thin: the work lives in the other modules). The
//! terminal view of a run is here too — it only listens to events.

pub mod scan_view;
pub mod view;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::json;

use crate::agent::Agent;
use crate::bench::{stats, Bencher, Mode};
use crate::config::{Policy, Workspace, DEFAULT_POLICY_TOML};
use crate::edit;
use crate::error::exit;
use crate::process::Interrupt;
use crate::report::{self, RunReport};
use crate::run_loop::{self, StartOptions};
use crate::store::{self, FileSet};

#[derive(Parser, Debug)]
#[command(
    name = "tuneloop",
    version,
    about = "Makes PyTorch training faster on its own: measures samples/sec, changes ONE DataLoader setting per turn, keeps what is really faster, reverts the rest, and reports every attempt.",
    after_help = "Exit codes: 0 done (also when nothing improved), 2 usage or configuration error, 3 the baseline could not be measured, 4 the agent could not be started, 130 interrupted."
)]
pub struct Cli {
    /// Run as if started in DIR (the workspace is found from there, like Cargo).
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write tuneloop.toml, policies/default.toml, prompts/, the CLAUDE.md procedure and runs/.
    Init(InitArgs),
    /// Measure the project as it is: samples/sec, data_wait vs train_step, ceiling.
    Bench(BenchArgs),
    /// Run the tuning loop. Prints `run: <run folder>` first.
    Start(StartArgs),
    /// Continue an interrupted run.
    Resume {
        /// Run id or folder (default: the latest run).
        run: Option<String>,
    },
    /// Put the editable files back as they were at the baseline or at the best state.
    Restore {
        run: Option<String>,
        #[arg(long, value_enum, default_value = "best")]
        to: RestoreTo,
    },
    /// The before/after table of a run (latest by default).
    Report {
        run: Option<String>,
        #[arg(long, value_enum, default_value = "md")]
        format: ReportFormat,
        /// Same as --format json.
        #[arg(long)]
        json: bool,
    },
    /// List runs.
    Runs {
        #[arg(long)]
        json: bool,
    },
    /// One run, or one turn of it: prompt, agent output, diff, measurements, decision.
    Show {
        run: String,
        turn: Option<u32>,
        /// The turn's records (or the run's report) as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Every DataLoader call site and its keyword arguments, with hints.
    Scan {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The policy as loaded, and the exact agent command line it produces.
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
    },
    /// Check what a run needs (Python, torch, cores, memory, git, workspace, policy, Claude Code) and say how to fix each miss. Exit 0 when a run can start.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Native measurement of the machine's data-path limits (needs the `libtorch` feature).
    Probe {
        #[arg(long)]
        json: bool,
        /// Bytes of one sample (default: from the latest run's baseline, else a 3×224×224 float32 image + label).
        #[arg(long, value_name = "N")]
        bytes_per_sample: Option<u64>,
        /// Samples per batch (default: the latest run's baseline's, else 64).
        #[arg(long, value_name = "N")]
        batch_size: Option<u64>,
    },
}

#[derive(Subcommand, Debug)]
pub enum PolicyAction {
    /// Print the policy as loaded and the agent command line.
    Show { file: Option<PathBuf> },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreTo {
    Baseline,
    Best,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    Md,
    Json,
    Html,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentChoice {
    Claude,
    Builtin,
    /// The builtin agent for the knobs, then Claude Code for structural changes.
    Hybrid,
}

#[derive(Args, Debug)]
pub struct InitArgs {
    /// Managed mode: MODULE:FUNCTION of your build(); the module's file becomes editable.
    #[arg(long, conflicts_with_all = ["bench_cmd", "run"])]
    pub entry: Option<String>,
    /// Contract mode: a command that prints `samples/sec: N`.
    #[arg(long, conflicts_with = "run")]
    pub bench_cmd: Option<String>,
    /// Files the agent may change (default: the entry's module, or files with a DataLoader call).
    #[arg(long = "editable")]
    pub editable: Vec<String>,
    /// Python interpreter with torch installed.
    #[arg(long)]
    pub python: Option<String>,
    /// Overwrite an existing tuneloop.toml.
    #[arg(long)]
    pub force: bool,
    /// Command mode: your own training command, after `--`, run as you run it
    /// (e.g. `tuneloop init -- python train.py --epochs 1`).
    #[arg(last = true, value_name = "COMMAND")]
    pub run: Vec<String>,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Also run once with the profiler and print its table.
    #[arg(long)]
    pub profile: bool,
    /// Throughput runs (or A/A pairs with --aa).
    #[arg(long)]
    pub repeats: Option<u32>,
    /// Calibrate: the project against itself, interleaved; prints the noise and a suggested noise_threshold.
    #[arg(long)]
    pub aa: bool,
    #[arg(long)]
    pub json: bool,
    #[arg(long)]
    pub policy: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct StartArgs {
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Override the policy's agent backend.
    #[arg(long, value_enum)]
    pub agent: Option<AgentChoice>,
    /// Override the policy's loop.max_iterations.
    #[arg(long)]
    pub iterations: Option<u32>,
    /// Go on even when the baseline shows little data_wait.
    #[arg(long)]
    pub force: bool,
    /// Start even when the editable files have uncommitted git changes.
    #[arg(long)]
    pub allow_dirty: bool,
    /// Record each kept change as a commit on the branch `tuneloop/<run-id>` (your branch is left alone).
    #[arg(long)]
    pub git_commits: bool,
}

/// A command's failure with its exit code.
pub struct Failure {
    pub code: i32,
    pub error: anyhow::Error,
}

fn config_err(e: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: exit::CONFIG,
        error: e.into(),
    }
}

pub fn run(cli: Cli, interrupt: Interrupt) -> std::result::Result<i32, Failure> {
    let cwd = match &cli.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(config_err)?,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure {
            code: 1,
            error: e.into(),
        })?;
    let _guard = rt.enter();
    interrupt.install();
    match cli.command {
        Command::Init(a) => init(&cwd, a).map_err(config_err),
        Command::Scan { files, json } => scan(&files, json).map_err(config_err),
        Command::Bench(a) => rt.block_on(bench(&cwd, a, &interrupt)),
        Command::Start(a) => rt.block_on(start(&cwd, a, &interrupt)),
        Command::Resume { run } => rt.block_on(resume(&cwd, run.as_deref(), &interrupt)),
        Command::Restore { run, to } => restore(&cwd, run.as_deref(), to).map_err(config_err),
        Command::Report { run, format, json } => {
            let f = if json { ReportFormat::Json } else { format };
            report_cmd(&cwd, run.as_deref(), f)
        }
        Command::Runs { json } => runs(&cwd, json),
        Command::Show { run, turn, json } => show(&cwd, &run, turn, json),
        Command::Policy {
            action: PolicyAction::Show { file },
        } => policy_show(&cwd, file.as_deref()),
        Command::Doctor { json } => Ok(rt.block_on(crate::doctor::command(&cwd, json, &interrupt))),
        Command::Probe {
            json,
            bytes_per_sample,
            batch_size,
        } => probe(&cwd, json, bytes_per_sample, batch_size),
    }
}

// ---------------------------------------------------------------- probe

#[cfg(not(feature = "libtorch"))]
fn probe(_: &Path, _: bool, _: Option<u64>, _: Option<u64>) -> std::result::Result<i32, Failure> {
    Err(config_err(anyhow!(crate::probe::BUILD_HINT)))
}

/// The data path's limits for the project's batch; a workspace is optional
/// (its latest baseline gives the bytes per sample).
#[cfg(feature = "libtorch")]
fn probe(
    cwd: &Path,
    json_out: bool,
    bytes_per_sample: Option<u64>,
    batch_size: Option<u64>,
) -> std::result::Result<i32, Failure> {
    let runs_dir = Workspace::find(cwd).ok().map(|d| d.join("runs"));
    let w = crate::probe::choose_workload(runs_dir.as_deref(), bytes_per_sample, batch_size);
    let d = crate::probe::measure(&w).map_err(|e| Failure { code: 1, error: e })?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&d).unwrap_or_default());
    } else {
        print!("{}", crate::probe::render_text(&d));
    }
    Ok(exit::OK)
}

fn load_workspace(cwd: &Path) -> std::result::Result<Workspace, Failure> {
    let dir = Workspace::find(cwd).map_err(config_err)?;
    let ws = Workspace::load(&dir).map_err(config_err)?;
    for w in &ws.warnings {
        eprintln!("warning: {w}");
    }
    Ok(ws)
}

fn load_policy(
    ws: &Workspace,
    file: Option<&Path>,
) -> std::result::Result<(PathBuf, Policy), Failure> {
    let path = ws.policy_path(file);
    let default_path =
        file.is_none() && ws.file.run.policy == crate::config::RunSection::default().policy;
    if default_path && !path.exists() {
        eprintln!(
            "note: {} not found; using the built-in default policy (`tuneloop init` writes it)",
            path.display()
        );
        return Ok((path, Policy::default()));
    }
    let (p, unknown) = Policy::load(&path).map_err(config_err)?;
    for k in unknown {
        eprintln!("warning: {}: unknown key `{k}` (ignored)", path.display());
    }
    p.validate(&path).map_err(config_err)?;
    Ok((path, p))
}

// ---------------------------------------------------------------- init

const MARK_BEGIN: &str = "<!-- tuneloop:begin";
const MARK_END: &str = "<!-- tuneloop:end -->";
// The agent owns its texts; `init` writes them into a new workspace.
pub use crate::agent::assets::{PROCEDURE_MD, PROMPT_EN, PROMPT_JA};
const RUNS_README: &str = include_str!("../runs/README.md");

/// Adds (or refreshes) the marked procedure block in a CLAUDE.md text,
/// leaving everything outside the markers alone.
pub fn merge_procedure(existing: &str) -> String {
    if let (Some(b), Some(e)) = (existing.find(MARK_BEGIN), existing.find(MARK_END)) {
        if b < e {
            let end = e + MARK_END.len();
            let end = if existing[end..].starts_with('\n') {
                end + 1
            } else {
                end
            };
            return format!("{}{}{}", &existing[..b], PROCEDURE_MD, &existing[end..]);
        }
    }
    if existing.is_empty() {
        return PROCEDURE_MD.to_string();
    }
    let sep = if existing.ends_with("\n\n") {
        ""
    } else if existing.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    format!("{existing}{sep}{PROCEDURE_MD}")
}

fn write_if_absent(path: &Path, text: &str, done: &mut Vec<String>) -> std::io::Result<()> {
    if !path.exists() {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(path, text)?;
        done.push(format!("wrote {}", path.display()));
    }
    Ok(())
}

fn init(dir: &Path, a: InitArgs) -> Result<i32> {
    let ws_file = dir.join(crate::config::WORKSPACE_FILE);
    let mut done = Vec::new();
    if ws_file.exists() && !a.force {
        done.push(format!(
            "kept {} (use --force to overwrite)",
            ws_file.display()
        ));
    } else {
        if a.entry.is_none() && a.bench_cmd.is_none() && a.run.is_empty() {
            return Err(anyhow!("{}", how_to_measure(dir)));
        }
        let script = (!a.run.is_empty())
            .then(|| crate::bench::command::script_of(&a.run, dir))
            .flatten();
        let editable: Vec<String> = if !a.editable.is_empty() {
            a.editable.clone()
        } else if let Some(e) = &a.entry {
            let module = e.split(':').next().unwrap_or(e);
            vec![format!("{}.py", module.replace('.', "/"))]
        } else {
            let mut v = find_loader_files(dir);
            if let Some(s) = &script {
                for f in edit::knob_files(dir, s) {
                    if !v.contains(&f) {
                        v.push(f);
                    }
                }
                if !v.contains(s) {
                    v.insert(0, s.clone());
                }
            }
            v
        };
        if let Some(e) = &a.entry {
            if !e.contains(':') {
                return Err(anyhow!(
                    "--entry `{e}` must look like MODULE:FUNCTION, e.g. train:build"
                ));
            }
        }
        if editable.is_empty() {
            return Err(anyhow!(
                "found no Python file with a DataLoader (or Trainer settings) for the agent to change in {}\n  hint: pass --editable FILE (the file that builds your DataLoader)",
                dir.display()
            ));
        }
        for f in &editable {
            if !dir.join(f).is_file() {
                return Err(anyhow!(
                    "editable file {} does not exist; pass --editable FILE",
                    dir.join(f).display()
                ));
            }
        }
        let bench = match (&a.entry, &a.bench_cmd) {
            (Some(e), _) => format!("entry = {}", toml_str(e)),
            (None, Some(c)) => format!("command = {}", toml_str(c)),
            _ => format!(
                "# Your training command, run as you run it; tuneloop measures its training\n# loader from inside and ends it after warmup_steps + steps batches.\nrun = [{}]",
                a.run.iter().map(|w| toml_str(w)).collect::<Vec<_>>().join(", ")
            ),
        };
        let python = init_python_line(a.python.as_deref());
        let text = format!(
            "# tuneloop workspace. `tuneloop start` tunes the project below.\n\n[project]\n# The training code's folder, relative to this file.\nroot = \".\"\n{python}# The only files an agent may change.\neditable = [{}]\n\n[bench]\n{bench}\n# Measured steps per run, after warmup_steps that are not timed.\nsteps = 40\nwarmup_steps = 5\n# Wall-clock limit of one bench process, seconds.\ntimeout_s = 300\n\n[run]\npolicy = \"policies/default.toml\"\n",
            editable.iter().map(|e| toml_str(e)).collect::<Vec<_>>().join(", "),
        );
        std::fs::write(&ws_file, text)?;
        done.push(format!("wrote {}", ws_file.display()));
    }
    write_if_absent(
        &dir.join("policies/default.toml"),
        DEFAULT_POLICY_TOML,
        &mut done,
    )?;
    write_if_absent(&dir.join("prompts/turn.en.md"), PROMPT_EN, &mut done)?;
    write_if_absent(&dir.join("prompts/turn.ja.md"), PROMPT_JA, &mut done)?;
    write_if_absent(&dir.join("runs/README.md"), RUNS_README, &mut done)?;
    write_if_absent(
        &dir.join("runs/.gitignore"),
        "*\n!.gitignore\n!README.md\n",
        &mut done,
    )?;
    let claude_md = dir.join("CLAUDE.md");
    let old = std::fs::read_to_string(&claude_md).unwrap_or_default();
    let new = merge_procedure(&old);
    if new != old {
        std::fs::write(&claude_md, &new)?;
        done.push(format!(
            "added the tuning procedure to {}",
            claude_md.display()
        ));
    }
    for d in done {
        println!("{d}");
    }
    println!("next: `tuneloop bench` to measure, `tuneloop start` to tune");
    Ok(exit::OK)
}

/// `[project] python` only when asked for: unset, the interpreter is
/// discovered each time (the active venv first), which is what a user inside
/// a venv wants.
fn init_python_line(python: Option<&str>) -> String {
    match python {
        Some(p) => format!(
            "# Python with torch installed (TUNELOOP_PYTHON overrides it).\npython = {}\n",
            toml_str(p)
        ),
        None => "# Python with torch: unset, so tuneloop uses TUNELOOP_PYTHON, else the active\n# virtualenv or conda environment, else the one tuneloop is installed in, else\n# python3 on PATH (`tuneloop doctor` says which). Set it to pin one:\n# python = \"~/venvs/train/bin/python\"\n".into(),
    }
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// What to say to `tuneloop init` without a way to measure: the command to
/// use for the training script found here, if any.
fn how_to_measure(dir: &Path) -> String {
    let mut scripts: Vec<String> = find_loader_files(dir)
        .into_iter()
        .filter(|f| {
            std::fs::read_to_string(dir.join(f))
                .map(|s| s.contains("__main__"))
                .unwrap_or(false)
        })
        .collect();
    scripts.sort_by_key(|f| (!f.contains("train"), f.clone()));
    let mut msg = String::from("say how to measure");
    match scripts.first() {
        Some(f) => msg.push_str(&format!(
            ": `tuneloop init -- python {f}` tunes {f} as you run it (add its usual flags after the file name)"
        )),
        None => msg.push_str(
            ": `tuneloop init -- python train.py …` (your own training command, run as you run it)",
        ),
    }
    msg.push_str("\n  other ways: `tuneloop init --entry train:build` (a build() that returns the loader, model and optimizer) or `tuneloop init --bench-cmd \"python bench_loader.py\"` (a script that prints `samples/sec: N`)");
    msg
}

/// Python files in `dir` (not recursive) with a DataLoader call.
fn find_loader_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let src = std::fs::read_to_string(e.path()).ok()?;
                    (name.ends_with(".py") && !edit::scan_source(&name, &src).ok()?.is_empty())
                        .then_some(name)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

// ---------------------------------------------------------------- scan

fn scan(files: &[PathBuf], json_out: bool) -> Result<i32> {
    let scanned = scan_view::scan_files(files)?;
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&scan_view::to_json(&scanned))?
        );
    } else {
        print!("{}", scan_view::to_text(&scanned, hints));
    }
    Ok(exit::OK)
}

fn hints(s: &edit::CallSite) -> Vec<String> {
    let mut h = Vec::new();
    let get = |k: &str| s.kwargs.get(k).and_then(|v| v.as_str()).map(str::to_string);
    if s.has_spread {
        h.push(
            "arguments come from **kwargs too: a setting there overrides what is written here"
                .into(),
        );
    }
    match get("num_workers").as_deref() {
        None | Some("0") => h.push("num_workers is 0 (the default): data loads in the training process; try the core count".into()),
        Some(_) => {
            if get("persistent_workers").is_none() {
                h.push("persistent_workers not set: workers restart every epoch".into());
            }
        }
    }
    if get("pin_memory").is_none() {
        h.push("pin_memory not set: matters only when batches are copied to a GPU".into());
    }
    h
}

// ---------------------------------------------------------------- bench

async fn bench(
    cwd: &Path,
    a: BenchArgs,
    interrupt: &Interrupt,
) -> std::result::Result<i32, Failure> {
    let ws = load_workspace(cwd)?;
    let (_, policy) = load_policy(&ws, a.policy.as_deref())?;
    crate::interpreter::announce_workspace(&ws, interrupt).await;
    let tmp = std::env::temp_dir().join(format!("tuneloop-bench-{}", std::process::id()));
    let bencher = Bencher::new(&ws, &tmp).map_err(config_err)?;
    let out = bench_inner(&ws, &bencher, &policy, &a, interrupt).await;
    let _ = std::fs::remove_dir_all(&tmp);
    out
}

async fn bench_inner(
    ws: &Workspace,
    bencher: &Bencher,
    policy: &Policy,
    a: &BenchArgs,
    interrupt: &Interrupt,
) -> std::result::Result<i32, Failure> {
    let baseline_fail = |e: crate::error::BenchError| {
        if matches!(e, crate::error::BenchError::Interrupted) {
            Failure {
                code: exit::INTERRUPTED,
                error: anyhow!("interrupted"),
            }
        } else {
            Failure {
                code: exit::BASELINE,
                error: anyhow!("the bench failed: {e}"),
            }
        }
    };
    if a.aa {
        let pairs = a.repeats.unwrap_or(8).max(2);
        let root = std::fs::canonicalize(&ws.project_root).map_err(config_err)?;
        let files = FileSet::capture(&root, &ws.file.project.editable).map_err(config_err)?;
        eprintln!(
            "A/A calibration: the project against itself, {pairs} interleaved pairs ({} runs)",
            pairs * 2
        );
        let p = run_loop::calibrate(
            bencher,
            &root,
            &files,
            policy,
            pairs,
            interrupt,
            |role, k, v| {
                eprintln!("  pair {k} {role:<9} {v:>10.1} samples/sec");
            },
        )
        .await
        .map_err(|f| baseline_fail(f.error))?;
        let cal = Calibration::from_ratios(&p.ratio.ratios, policy.decision.confidence);
        if a.json {
            println!("{}", serde_json::to_string_pretty(&cal).unwrap_or_default());
        } else {
            println!(
                "A/A ratios: {}",
                cal.ratios
                    .iter()
                    .map(|r| format!("{r:.3}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            println!(
                "median {:.3}, min {:.3}, max {:.3}, sd of ln(ratio) {:.4}",
                cal.median, cal.min, cal.max, cal.sd_log
            );
            println!(
                "{:.0}% interval of the mean ratio: [{:.3}, {:.3}]",
                policy.decision.confidence * 100.0,
                cal.ci[0],
                cal.ci[1]
            );
            println!(
                "suggested noise_threshold: {:.3} (policy has {:.3})",
                cal.suggested_noise_threshold, policy.decision.noise_threshold
            );
        }
        return Ok(exit::OK);
    }
    let mut profiled = None;
    if a.profile {
        eprintln!("profiled run…");
        let p = bencher.profile(interrupt).await.map_err(baseline_fail)?;
        if !a.json {
            println!("{}", p.table);
        }
        profiled = Some(p);
    }
    let n = a.repeats.unwrap_or(policy.decision.baseline_runs).max(1);
    let mut ms = Vec::new();
    for i in 0..n {
        eprintln!("throughput run {} of {n}…", i + 1);
        let mode = if i == 0 {
            Mode::ThroughputWithCeiling
        } else {
            Mode::Throughput
        };
        ms.push(
            bencher
                .measure(mode, interrupt)
                .await
                .map_err(baseline_fail)?,
        );
    }
    let s: Vec<f64> = ms.iter().map(|m| m.samples_per_sec).collect();
    let med = stats::median(&s);
    let share = {
        let v: Vec<f64> = ms.iter().filter_map(|m| m.data_wait_share).collect();
        (!v.is_empty()).then(|| stats::median(&v))
    };
    let ceiling = ms.iter().find_map(|m| m.ceiling_sps);
    let limits = crate::bench::limits::ThroughputLimits::of(ceiling, &ms, med);
    let ci = if s.len() >= 2 {
        let c = stats::log_t_interval(
            &s.iter().map(|x| x / med).collect::<Vec<_>>(),
            policy.decision.confidence,
        );
        Some([c[0] * med, c[1] * med])
    } else {
        None
    };
    if a.json {
        let v = json!({
            "samples_per_sec": med, "samples": s, "ci": ci, "data_wait_share": share,
            "ceiling_sps": ceiling, "limits": limits, "runs": ms, "profile_table": profiled.map(|p| p.table),
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(exit::OK);
    }
    println!(
        "samples/sec: {med:.1} (median of {n}; runs: {})",
        s.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some([lo, hi]) = ci {
        println!(
            "{:.0}% interval: [{lo:.1}, {hi:.1}]",
            policy.decision.confidence * 100.0
        );
    }
    if let (Some(m), Some(sh)) = (ms.last(), share) {
        let dw = ms.iter().filter_map(|m| m.data_wait_s).sum::<f64>() / n as f64;
        let ts = ms.iter().filter_map(|m| m.train_step_s).sum::<f64>() / n as f64;
        println!(
            "data_wait: {:.1}% of step time ({dw:.3} s), train_step: {ts:.3} s per run",
            sh * 100.0
        );
        println!(
            "device: {}, torch {}, {} CPUs{}, num_workers={}",
            m.device.as_deref().unwrap_or("?"),
            m.torch_version.as_deref().unwrap_or("?"),
            m.cpu_count.unwrap_or(0),
            crate::bench::limits::usable_cores_note(m),
            m.num_workers().map(|n| n.to_string()).unwrap_or("?".into())
        );
        for line in crate::bench::command::describe_loaders(m) {
            println!("{line}");
        }
        if let (Some(n), Some(per)) = (m.live_workers.filter(|&n| n > 0), m.memory_per_worker()) {
            println!(
                "workers: {n} alive, {:.0} MB each (PSS: what one more adds){}",
                per / 1e6,
                m.mem_available_bytes
                    .map(|f| format!(", {:.1} GB free on the machine", f as f64 / 1e9))
                    .unwrap_or_default()
            );
        }
        if sh < policy.decision.stop_when_data_wait_below {
            println!(
                "data_wait is small: DataLoader tuning cannot help much. Compute-side candidates:"
            );
            for c in run_loop::compute_side_advice() {
                println!("  - {c}");
            }
        }
    }
    if let Some(c) = ceiling {
        println!(
            "ceiling (step alone, one batch in memory): {c:.1} samples/sec; now at {:.1}% of it",
            med / c * 100.0
        );
    }
    if let (Some(c), Some(cores), Some(cost)) = (
        limits.cpu_limit_sps,
        limits.usable_cores,
        limits.cpu_s_per_sample,
    ) {
        println!(
            "CPU limit (what {} can feed at {:.0} µs of CPU per sample): {c:.1} samples/sec; now at {:.1}% of it",
            crate::bench::limits::cores_text(cores, limits.cores_limited_by.as_deref()),
            cost * 1e6,
            med / c * 100.0
        );
        if let Some(o) = limits.others_cores.filter(|o| *o >= 0.05) {
            println!(
                "  other processes kept {o:.1} cores busy meanwhile: the rest feeds about {:.1} samples/sec",
                ((cores - o).max(0.0)) / cost
            );
        }
    }
    if let Some((b, _)) = limits.lower() {
        println!(
            "binding limit: {}",
            match b {
                crate::bench::limits::Binding::StepAlone =>
                    "the step alone (more loader speed cannot pass it)",
                crate::bench::limits::Binding::Cpu =>
                    "the CPU (what the cores can feed; no loader setting passes it)",
            }
        );
    }
    Ok(exit::OK)
}

// The A/A figures are pure statistics: they live (and are tested) in bench::stats.
pub use crate::bench::stats::Calibration;

// ---------------------------------------------------------------- start

async fn start(
    cwd: &Path,
    a: StartArgs,
    interrupt: &Interrupt,
) -> std::result::Result<i32, Failure> {
    let ws = load_workspace(cwd)?;
    let (policy_path, mut policy) = load_policy(&ws, a.policy.as_deref())?;
    crate::interpreter::announce_workspace(&ws, interrupt).await;
    if let Some(agent) = a.agent {
        policy.agent.backend = match agent {
            AgentChoice::Claude => "claude",
            AgentChoice::Builtin => "builtin",
            AgentChoice::Hybrid => "hybrid",
        }
        .into();
    }
    if a.force {
        policy.loop_.force = true;
    }
    if policy.agent.backend != "builtin" {
        for w in crate::agent::claude::command::warnings(&policy.agent)
            .into_iter()
            .chain(crate::policy_lint::lint(&policy.agent))
        {
            eprintln!("warning: {}: {w}", policy_path.display());
        }
    }
    let agent = Agent::from_policy(&policy, &ws);
    let mut view =
        view::View::new(&policy.agent.language).with_max_pairs(policy.decision.max_repeats);
    let mut on_event = |ev: &crate::event::Event| view.show(ev);
    let session = run_loop::prepare(
        &ws,
        StartOptions {
            policy_path,
            policy,
            iterations: a.iterations,
            allow_dirty: a.allow_dirty,
            git_commits: a.git_commits,
        },
        agent,
        interrupt.clone(),
        &mut on_event,
    )
    .map_err(|e| Failure {
        code: e.exit_code(),
        error: anyhow!("{e}"),
    })?;
    drive(session).await
}

async fn resume(
    cwd: &Path,
    run: Option<&str>,
    interrupt: &Interrupt,
) -> std::result::Result<i32, Failure> {
    let ws = load_workspace(cwd)?;
    let runs = ws.runs_dir();
    let dir = match run {
        Some(r) => store::resolve_run(&runs, Some(r)).map_err(|e| config_err(anyhow!(e)))?,
        None => store::unfinished_run(&runs)
            .map(|(d, _)| d)
            .ok_or_else(|| {
                config_err(anyhow!(
                    "no interrupted run to resume in {}",
                    runs.display()
                ))
            })?,
    };
    // The view speaks the run's own policy (its language, its pairs per turn).
    let run_policy: Policy = crate::run_folder::RunRecord::read(&dir)
        .map(|r| r.policy)
        .unwrap_or_default();
    let mut view =
        view::View::new(&run_policy.agent.language).with_max_pairs(run_policy.decision.max_repeats);
    let mut on_event = |ev: &crate::event::Event| view.show(ev);
    let session =
        run_loop::resume(&ws, &dir, interrupt.clone(), &mut on_event).map_err(|e| Failure {
            code: e.exit_code(),
            error: anyhow!("{e}"),
        })?;
    drive(session).await
}

/// Runs a prepared or resumed session to its end and prints the report.
async fn drive(session: run_loop::Session<'_>) -> std::result::Result<i32, Failure> {
    println!("run: {}", session.run_dir().display());
    let _ = std::io::stdout().flush();
    match session.run().await {
        Ok(r) => {
            println!();
            print!("{}", report::render_markdown(&r));
            Ok(exit::OK)
        }
        Err((e, dir)) => {
            if let Some(d) = dir {
                eprintln!("run folder: {}", d.display());
            }
            Err(Failure {
                code: e.exit_code(),
                error: anyhow!("{e}"),
            })
        }
    }
}

// ---------------------------------------------------------------- reading runs

fn runs_dir_of(cwd: &Path) -> std::result::Result<PathBuf, Failure> {
    let dir = Workspace::find(cwd).map_err(config_err)?;
    Ok(dir.join("runs"))
}

fn load_report(dir: &Path) -> Result<RunReport> {
    Ok(crate::review::load_report(dir)?)
}

/// The language of the workspace's policy, for the words of `runs`; English
/// when there is no readable policy.
fn workspace_language(cwd: &Path) -> String {
    Workspace::find(cwd)
        .and_then(|d| Workspace::load(&d))
        .ok()
        .and_then(|ws| Policy::load(&ws.policy_path(None)).ok())
        .map(|(p, _)| p.agent.language)
        .unwrap_or_else(|| "en".into())
}

fn report_cmd(cwd: &Path, run: Option<&str>, f: ReportFormat) -> std::result::Result<i32, Failure> {
    let runs = runs_dir_of(cwd)?;
    let dir = store::resolve_run(&runs, run).map_err(|e| config_err(anyhow!(e)))?;
    let r = load_report(&dir).map_err(config_err)?;
    let fmt = match f {
        ReportFormat::Md => report::Format::Markdown,
        ReportFormat::Json => report::Format::Json,
        ReportFormat::Html => report::Format::Html,
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(report::render(&r, fmt).as_bytes());
    Ok(exit::OK)
}

fn runs(cwd: &Path, json_out: bool) -> std::result::Result<i32, Failure> {
    let runs = runs_dir_of(cwd)?;
    let rows = crate::review::list_runs(&runs);
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
    } else {
        print!(
            "{}",
            crate::review::render_runs(&rows, &workspace_language(cwd))
        );
    }
    Ok(exit::OK)
}

fn show(
    cwd: &Path,
    run: &str,
    turn: Option<u32>,
    json_out: bool,
) -> std::result::Result<i32, Failure> {
    let runs = runs_dir_of(cwd)?;
    let dir = store::resolve_run(&runs, Some(run)).map_err(|e| config_err(anyhow!(e)))?;
    let Some(t) = turn else {
        let r = load_report(&dir).map_err(config_err)?;
        let fmt = if json_out {
            report::Format::Json
        } else {
            report::Format::Markdown
        };
        print!("{}", report::render(&r, fmt));
        return Ok(exit::OK);
    };
    let files = crate::review::read_turn(&dir, t).map_err(config_err)?;
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&files).unwrap_or_default()
        );
        return Ok(exit::OK);
    }
    let paint = crate::review::Paint {
        diff_line: view::diff_line,
        color: view::use_color_stdout(),
    };
    print!("{}", crate::review::render_turn(&files, &paint));
    Ok(exit::OK)
}

fn restore(cwd: &Path, run: Option<&str>, to: RestoreTo) -> Result<i32> {
    let ws_dir = Workspace::find(cwd)?;
    let ws = Workspace::load(&ws_dir)?;
    let runs = ws.runs_dir();
    let dir = store::resolve_run(&runs, run).map_err(|e| anyhow!(e))?;
    let lock = store::Lock::acquire(&runs, "restore").map_err(|e| anyhow!(e))?;
    let run = crate::run_folder::RunRecord::read(&dir)?;
    let editable = run.editable.clone();
    let root = run.project_root();
    let files = match to {
        RestoreTo::Baseline => FileSet::load(&dir.join("baseline").join("files"), &editable),
        RestoreTo::Best => run_loop::best_files(&dir, &editable),
    }
    .with_context(|| format!("cannot read the saved files in {}", dir.display()))?;
    if run.state.is_unfinished() {
        // A killed turn's agent may have touched other files: put them back.
        if let Ok(snap) = crate::verify::ProjectSnapshot::load(&dir.join("snapshot")) {
            let lost = snap.restore_others(&editable);
            if !lost.is_empty() {
                eprintln!("warning: could not restore {}", lost.join(", "));
            }
        }
        crate::run_folder::RunRecord::set_state(&dir, crate::run_folder::RunState::Restored)?;
    }
    files.apply(&root)?;
    drop(lock);
    println!(
        "restored {} file(s) in {} to the {} state of run {}",
        editable.len(),
        root.display(),
        if to == RestoreTo::Baseline {
            "baseline"
        } else {
            "best"
        },
        dir.file_name().unwrap_or_default().to_string_lossy()
    );
    Ok(exit::OK)
}

fn policy_show(cwd: &Path, file: Option<&Path>) -> std::result::Result<i32, Failure> {
    let ws = load_workspace(cwd)?;
    let (path, policy) = load_policy(&ws, file)?;
    println!("# policy as loaded from {}", path.display());
    println!("{}", toml::to_string_pretty(&policy).unwrap_or_default());
    // What `--agent claude` runs each turn, ready to paste into a shell.
    let (line, procedure) = crate::agent::claude::command_line_preview(&policy.agent, &ws);
    let used = if policy.agent.backend == "claude" {
        "backend = \"claude\""
    } else if policy.agent.backend == "hybrid" {
        "backend = \"hybrid\": for the structural turns, after the builtin agent settled the knobs"
    } else {
        "used with --agent claude"
    };
    let root = std::fs::canonicalize(&ws.project_root).unwrap_or_else(|_| ws.project_root.clone());
    println!(
        "# the agent command line ({used}); it runs in {}",
        root.display()
    );
    println!("# with the incumbent's profiler table on stdin, and the prompt rendered each turn");
    match &procedure {
        crate::agent::claude::Procedure::Discovered(p) => {
            println!("# the procedure reaches the agent through {}", p.display())
        }
        crate::agent::claude::Procedure::Appended(_) => {
            println!("# no CLAUDE.md above the project carries the procedure: it is appended to the system prompt")
        }
    }
    println!("{line}");
    for w in crate::agent::claude::command::warnings(&policy.agent)
        .into_iter()
        .chain(crate::policy_lint::lint(&policy.agent))
    {
        eprintln!("warning: {}: {w}", path.display());
    }
    Ok(exit::OK)
}

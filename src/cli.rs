//! The command line: the clap definitions and the dispatch to one module per
//! command (`init`, `scan`, `bench`, `run` for start/resume, `runs` for
//! runs/show/report/restore, `policy`, `probe`; `doctor` lives in
//! `crate::doctor`). The commands are thin: the work lives in the other
//! modules. The terminal view of a run (`view`) and the text of `runs` and
//! `show` (`review_view`) are here too — they only render.

mod bench;
mod init;
mod load;
mod policy;
mod probe;
pub mod review_view;
mod run;
mod runs;
mod scan;
pub mod scan_view;
pub mod view;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::exit;
use crate::process::Interrupt;

// The agent owns its texts; `init` writes them into a new workspace.
pub use crate::agent::assets::{PROCEDURE_MD, PROMPT_EN, PROMPT_JA};
// The A/A figures are pure statistics: they live (and are tested) in bench::stats.
pub use crate::bench::stats::Calibration;
pub use init::merge_procedure;

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
        Command::Init(a) => init::init(&cwd, a).map_err(config_err),
        Command::Scan { files, json } => scan::scan(&files, json).map_err(config_err),
        Command::Bench(a) => rt.block_on(bench::bench(&cwd, a, &interrupt)),
        Command::Start(a) => rt.block_on(run::start(&cwd, a, &interrupt)),
        Command::Resume { run } => rt.block_on(run::resume(&cwd, run.as_deref(), &interrupt)),
        Command::Restore { run, to } => runs::restore(&cwd, run.as_deref(), to).map_err(config_err),
        Command::Report { run, format, json } => {
            let f = if json { ReportFormat::Json } else { format };
            runs::report_cmd(&cwd, run.as_deref(), f)
        }
        Command::Runs { json } => runs::runs(&cwd, json),
        Command::Show { run, turn, json } => runs::show(&cwd, &run, turn, json),
        Command::Policy {
            action: PolicyAction::Show { file },
        } => policy::policy_show(&cwd, file.as_deref()),
        Command::Doctor { json } => Ok(rt.block_on(crate::doctor::command(&cwd, json, &interrupt))),
        Command::Probe {
            json,
            bytes_per_sample,
            batch_size,
        } => probe::probe(&cwd, json, bytes_per_sample, batch_size),
    }
}

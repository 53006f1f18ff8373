//! Reading runs back: `tuneloop runs`, `show`, `report` and `restore`. The
//! folders are read by `review` and `run_folder`; the text comes from
//! `review_view` and `report`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{config_err, review_view, view, Failure, ReportFormat, RestoreTo};
use crate::config::{Policy, Workspace};
use crate::error::exit;
use crate::report::{self, RunReport};
use crate::run_loop;
use crate::store::{self, FileSet};

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
        .map(|f| f.policy.agent.language)
        .unwrap_or_else(|| "en".into())
}

pub(super) fn report_cmd(
    cwd: &Path,
    run: Option<&str>,
    f: ReportFormat,
) -> std::result::Result<i32, Failure> {
    let runs = runs_dir_of(cwd)?;
    let dir = store::resolve_run(&runs, run).map_err(config_err)?;
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

pub(super) fn runs(cwd: &Path, json_out: bool) -> std::result::Result<i32, Failure> {
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
            review_view::render_runs(&rows, &workspace_language(cwd))
        );
    }
    Ok(exit::OK)
}

pub(super) fn show(
    cwd: &Path,
    run: &str,
    turn: Option<u32>,
    json_out: bool,
) -> std::result::Result<i32, Failure> {
    let runs = runs_dir_of(cwd)?;
    let dir = store::resolve_run(&runs, Some(run)).map_err(config_err)?;
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
    let paint = review_view::Paint {
        diff_line: view::diff_line,
        color: view::use_color_stdout(),
    };
    print!("{}", review_view::render_turn(&files, &paint));
    Ok(exit::OK)
}

pub(super) fn restore(cwd: &Path, run: Option<&str>, to: RestoreTo) -> Result<i32> {
    let ws_dir = Workspace::find(cwd)?;
    let ws = Workspace::load(&ws_dir)?;
    let runs = ws.runs_dir();
    let dir = store::resolve_run(&runs, run)?;
    let lock = store::Lock::acquire(&runs, "restore")?;
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
    // A kept change to the command's arguments: the command is part of the state.
    let baseline = FileSet::load(&dir.join("baseline").join("files"), &editable);
    if let Some(c) = baseline
        .ok()
        .and_then(|b| crate::run_report::changed_command(&b, &files))
    {
        println!("run from now on: {c}");
    }
    Ok(exit::OK)
}

//! `tuneloop start` and `tuneloop resume`: a session prepared or resumed,
//! driven to its end with the terminal view listening, then the report.

use std::io::Write;
use std::path::Path;

use anyhow::anyhow;

use super::load::{load_policy, load_workspace};
use super::{config_err, view, AgentChoice, Failure, StartArgs};
use crate::agent::Agent;
use crate::config::Policy;
use crate::error::exit;
use crate::process::Interrupt;
use crate::report;
use crate::run_loop::{self, StartOptions};
use crate::store;

pub(super) async fn start(
    cwd: &Path,
    a: StartArgs,
    interrupt: &Interrupt,
) -> std::result::Result<i32, Failure> {
    let ws = load_workspace(cwd)?;
    let file = load_policy(&ws, a.policy.as_deref())?;
    let (policy_path, mut policy) = (file.path.clone(), file.policy.clone());
    super::load::announce_workspace(&ws, interrupt).await;
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
        for w in crate::agent::claude::command::warnings(&policy.agent) {
            eprintln!("warning: {}: {w}", policy_path.display());
        }
        for w in crate::policy_lint::placed(&policy.agent, &file) {
            eprintln!("warning: {w}");
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

pub(super) async fn resume(
    cwd: &Path,
    run: Option<&str>,
    interrupt: &Interrupt,
) -> std::result::Result<i32, Failure> {
    let ws = load_workspace(cwd)?;
    let runs = ws.runs_dir();
    let dir = match run {
        Some(r) => store::resolve_run(&runs, Some(r)).map_err(config_err)?,
        None => crate::run_folder::unfinished_run(&runs)
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
            if let Some(w) = &r.whole_command {
                println!("\nyour command, run whole: {}", w.describe(false));
            }
            // The last line: the kept change is in the command itself.
            if let Some(c) = &r.run_command {
                println!("\nrun from now on: {c}");
            }
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

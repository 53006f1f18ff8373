//! `tuneloop policy show`: the policy as loaded and the agent command line it
//! produces.

use std::path::Path;

use super::load::{load_policy, load_workspace};
use super::Failure;
use crate::error::exit;

pub(super) fn policy_show(cwd: &Path, file: Option<&Path>) -> std::result::Result<i32, Failure> {
    let ws = load_workspace(cwd)?;
    let loaded = load_policy(&ws, file)?;
    let (path, policy) = (&loaded.path, &loaded.policy);
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
    for w in crate::agent::claude::command::warnings(&policy.agent) {
        eprintln!("warning: {}: {w}", path.display());
    }
    for w in crate::policy_lint::placed(&policy.agent, &loaded) {
        eprintln!("warning: {w}");
    }
    Ok(exit::OK)
}

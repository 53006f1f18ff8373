//! The workspace and the policy as the commands load them: warnings printed,
//! a missing default policy replaced by the built-in one; and the line that
//! says which Python will run the project.

use std::path::Path;

use super::{config_err, Failure};
use crate::config::{Policy, PolicyFile, Workspace};
use crate::interpreter;
use crate::process::Interrupt;

pub(super) fn load_workspace(cwd: &Path) -> std::result::Result<Workspace, Failure> {
    let dir = Workspace::find(cwd).map_err(config_err)?;
    let ws = Workspace::load(&dir).map_err(config_err)?;
    for w in &ws.warnings {
        eprintln!("warning: {w}");
    }
    Ok(ws)
}

pub(super) fn load_policy(
    ws: &Workspace,
    file: Option<&Path>,
) -> std::result::Result<PolicyFile, Failure> {
    let path = ws.policy_path(file);
    let default_path =
        file.is_none() && ws.file.run.policy == crate::config::RunSection::default().policy;
    if default_path && !path.exists() {
        eprintln!(
            "note: {} not found; using the built-in default policy (`tuneloop init` writes it)",
            path.display()
        );
        return Ok(PolicyFile::built_in(&path));
    }
    let file = Policy::load(&path).map_err(config_err)?;
    for w in file.warnings() {
        eprintln!("warning: {w}");
    }
    file.validate().map_err(config_err)?;
    Ok(file)
}

/// Discovers the workspace's interpreter, finds its torch, and says both on
/// stderr (stdout stays the command's own output); a missing torch is a
/// warning here, since a contract-mode command may run another Python.
/// Torch is not imported here: the runs import it (the baseline's line
/// names the device), and an import here cost every `start` and `bench`
/// 2 s on a 2-core box, 5–8% of a short tuning run. `doctor` imports it.
pub(super) async fn announce_workspace(ws: &Workspace, interrupt: &Interrupt) {
    let i = ws.interpreter();
    let t = interpreter::probe_torch_version(&i.program, &ws.project_root, interrupt).await;
    eprintln!("{}", interpreter::announce(&i, &t));
    if t.torch_version.is_none() {
        eprintln!("  hint: {}", interpreter::fix_missing_torch(&i));
    }
}

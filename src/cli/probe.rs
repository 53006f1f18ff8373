//! `tuneloop probe`: the machine's data-path limits, measured natively (the
//! `libtorch` feature); without the feature it says how to build with it.

use std::path::Path;

#[cfg(not(feature = "libtorch"))]
use anyhow::anyhow;

#[cfg(not(feature = "libtorch"))]
use super::config_err;
use super::Failure;
#[cfg(feature = "libtorch")]
use crate::config::Workspace;
#[cfg(feature = "libtorch")]
use crate::error::exit;

#[cfg(not(feature = "libtorch"))]
pub(super) fn probe(
    _: &Path,
    _: bool,
    _: Option<u64>,
    _: Option<u64>,
) -> std::result::Result<i32, Failure> {
    Err(config_err(anyhow!(crate::probe::BUILD_HINT)))
}

/// The data path's limits for the project's batch; a workspace is optional
/// (its latest baseline gives the bytes per sample).
#[cfg(feature = "libtorch")]
pub(super) fn probe(
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

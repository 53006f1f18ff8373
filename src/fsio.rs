//! Writing one file so that a crash leaves either the old bytes or the new:
//! a temp file beside it, fsync, rename, fsync of the folder. A leaf: it
//! imports nothing from the crate, so every layer may write files this way
//! (the run folder, the bench's outputs, the agents' writes to the project).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

/// Writes `bytes` to `path` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// `value` as pretty JSON with a final newline, written by [`write_atomic`].
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> io::Result<()> {
    let mut s = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    s.push('\n');
    write_atomic(path, s.as_bytes())
}

//! `tuneloop scan`: every DataLoader call site of the given files, with hints.

use std::path::PathBuf;

use anyhow::Result;

use super::scan_view;
use crate::edit;
use crate::error::exit;
use crate::knob::LoaderKnob;

pub(super) fn scan(files: &[PathBuf], json_out: bool) -> Result<i32> {
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
    let get = |k: LoaderKnob| {
        s.kwargs
            .get(k.name())
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    if s.has_spread {
        h.push(
            "arguments come from **kwargs too: a knob set in that dict must not also be written here (Python refuses the same keyword twice); tuneloop edits it in the dict"
                .into(),
        );
    }
    match get(LoaderKnob::NumWorkers).as_deref() {
        None | Some("0") => h.push("num_workers is 0 (the default): data loads in the training process; try the core count".into()),
        Some(_) => {
            if get(LoaderKnob::PersistentWorkers).is_none() {
                h.push("persistent_workers not set: workers restart every epoch".into());
            }
        }
    }
    if get(LoaderKnob::PinMemory).is_none() {
        h.push("pin_memory not set: matters only when batches are copied to a GPU".into());
    }
    h
}

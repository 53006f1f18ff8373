//! `tuneloop scan`: the DataLoader call sites of the given files (and the
//! `TrainingArguments` calls whose keywords are a loader's knobs), with where
//! each knob's value is defined, as text or JSON.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::edit::{self, KnobSite, SiteKind};

/// What `scan` found in one file.
pub struct Scanned {
    pub knob_sites: Vec<KnobSite>,
}

/// Scan `files` (paths as given; config files they name are looked up
/// relative to the current folder and to the script's folder).
pub fn scan_files(files: &[PathBuf]) -> Result<Vec<Scanned>> {
    let read = |rel: &str| std::fs::read_to_string(Path::new(rel)).ok();
    let mut out = Vec::new();
    for f in files {
        let label = f.display().to_string();
        let src = std::fs::read_to_string(f).with_context(|| format!("cannot read {label}"))?;
        let knob_sites = edit::knob_sites(&label, &src, &read)
            .with_context(|| format!("cannot scan {label}"))?;
        out.push(Scanned { knob_sites });
    }
    Ok(out)
}

/// JSON: every DataLoader call site as before, with `kind`, `function` and
/// `knobs` (each knob's origin) added, and the `TrainingArguments` calls, in
/// source order.
pub fn to_json(scanned: &[Scanned]) -> serde_json::Value {
    let mut all = Vec::new();
    for ks in scanned.iter().flat_map(|s| &s.knob_sites) {
        match (&ks.call, ks.kind) {
            (Some(site), SiteKind::DataLoader) => {
                let mut v = serde_json::to_value(site).unwrap_or_default();
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("kind".into(), "dataloader".into());
                    obj.insert("function".into(), serde_json::json!(ks.function));
                    obj.insert("knobs".into(), serde_json::json!(ks.knobs));
                }
                all.push(v);
            }
            _ => all.push(serde_json::to_value(ks).unwrap_or_default()),
        }
    }
    serde_json::Value::Array(all)
}

/// Text: one line per call, its hints, and one line per knob saying where
/// its value comes from.
pub fn to_text(scanned: &[Scanned], hints: impl Fn(&edit::CallSite) -> Vec<String>) -> String {
    let mut out = String::new();
    if scanned.iter().all(|s| s.knob_sites.is_empty()) {
        out.push_str("no DataLoader call found\n");
    }
    for s in scanned {
        for ks in &s.knob_sites {
            match (ks.kind, &ks.call) {
                (SiteKind::DataLoader, Some(site)) => {
                    let kw: Vec<String> = site
                        .kwargs
                        .iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect();
                    out.push_str(&format!(
                        "{}:{}:{}  {}({} positional{}{})\n",
                        site.file,
                        site.line,
                        site.column,
                        site.callee,
                        site.positional,
                        if kw.is_empty() {
                            String::new()
                        } else {
                            format!(", {}", kw.join(", "))
                        },
                        if site.has_spread { ", **…" } else { "" }
                    ));
                    // Hints read the values where they are defined.
                    let mut effective = site.clone();
                    for o in &ks.knobs {
                        if !matches!(o.source, edit::Source::Keyword) {
                            match o.current() {
                                Some(v) => effective.kwargs.insert(o.knob.clone(), v.into()),
                                None => effective.kwargs.shift_remove(&o.knob),
                            };
                        }
                    }
                    for h in hints(&effective) {
                        out.push_str(&format!("    hint: {h}\n"));
                    }
                }
                _ => out.push_str(&format!(
                    "{}  {}(…): the DataLoader is built inside transformers; its knobs are the dataloader_* {}\n",
                    ks.at(),
                    ks.callee,
                    if ks.callee.ends_with("HfArgumentParser") {
                        "options of the command"
                    } else {
                        "keywords"
                    }
                )),
            }
            if ks.function.as_deref() == Some("train_dataloader") {
                out.push_str("    Lightning train_dataloader(): the training loader\n");
            }
            for line in ks.describe_knobs() {
                out.push_str(&format!("    knob: {line}\n"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_say_where_each_value_comes_from() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("train.py");
        std::fs::write(
            &f,
            "import argparse\nfrom torch.utils.data import DataLoader\nfrom transformers import TrainingArguments\np = argparse.ArgumentParser()\np.add_argument('--workers', type=int, default=0)\nargs = p.parse_args()\nloader = DataLoader(ds, num_workers=args.workers)\nta = TrainingArguments('out', dataloader_pin_memory=False)\n",
        )
        .unwrap();
        let scanned = scan_files(std::slice::from_ref(&f)).unwrap();
        let label = f.display().to_string();
        let text = to_text(&scanned, |s| {
            vec![format!("num_workers seen as {:?}", s.kwarg("num_workers"))]
        });
        assert!(
            text.contains(&format!(
                "    knob: num_workers = args.workers → --workers default=0 ({label}:5)\n"
            )),
            "{text}"
        );
        // Hints see the flag's default, not the expression.
        assert!(
            text.contains("hint: num_workers seen as Some(\"0\")"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "{label}:8  TrainingArguments(…): the DataLoader is built inside transformers"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "    knob: pin_memory: dataloader_pin_memory=False ({label}:8)"
            )),
            "{text}"
        );
        let json = to_json(&scanned);
        let a = json.as_array().unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0]["kind"], "dataloader");
        assert_eq!(a[0]["kwargs"]["num_workers"], "args.workers");
        assert_eq!(a[0]["knobs"][0]["source"]["kind"], "flag");
        assert_eq!(a[0]["knobs"][0]["source"]["default"], "0");
        assert_eq!(a[1]["kind"], "training_arguments");
        assert_eq!(a[1]["knobs"][1]["keyword"], "dataloader_pin_memory");
    }
}

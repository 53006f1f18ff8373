//! `tuneloop init`: writes tuneloop.toml, the default policy, the prompt
//! templates, runs/ and the procedure block of CLAUDE.md.

use std::path::Path;

use anyhow::{anyhow, Result};

use super::InitArgs;
use crate::config::DEFAULT_POLICY_TOML;
use crate::edit;
use crate::error::exit;

const MARK_BEGIN: &str = "<!-- tuneloop:begin";
const MARK_END: &str = "<!-- tuneloop:end -->";
// The agent owns its texts; `init` writes them into a new workspace.
pub use crate::agent::assets::{PROCEDURE_MD, PROMPT_EN, PROMPT_JA};
const RUNS_README: &str = include_str!("../../runs/README.md");

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

pub(super) fn init(dir: &Path, a: InitArgs) -> Result<i32> {
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
            // The files the knobs' values come from (a config file, a
            // `config.py` whose dataclass default feeds `cfg.num_workers`),
            // for the script and for each file with a DataLoader call.
            let mut from: Vec<String> = script.iter().cloned().collect();
            from.extend(v.iter().filter(|f| Some(*f) != script.as_ref()).cloned());
            for s in &from {
                for f in edit::knob_files(dir, s, script.as_deref()) {
                    if !v.contains(&f) {
                        v.push(f);
                    }
                }
            }
            if let Some(s) = &script {
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
                "# Your training command, run as you run it; tuneloop measures its training\n# loader from inside and ends it after warmup_steps + steps batches.\nrun = [{}]\n# After tuning, the command is timed whole, before against after (3 rounds),\n# when one run of it ends within this many seconds; 0 = never.\nwhole_command_s = 120",
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

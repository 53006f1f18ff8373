//! The types the knob-source code of `edit` shares: a knob's call site
//! ([`KnobSite`]), where each knob's value is defined ([`KnobOrigin`],
//! [`Source`], [`Target`]), what a turn's edit amounts to ([`SourceChange`],
//! [`PythonEdit`]), and how files are read ([`ReadFile`]). They live apart
//! from [`super::knobs`] (which finds and edits the sources) so that the
//! helpers that follow one kind of source ([`super::command_line`],
//! [`super::cli_knobs`], [`super::py_defs`], [`super::spread`]) import them
//! from here rather than back from `knobs`.

use std::path::Path;

use serde::Serialize;

use super::config_file;
use super::scan::CallSite;
use super::wrap::{Applied, Wrapper};

/// The workspace file, relative to the project root: knobs are followed
/// into its command only when the workspace is the project root (what
/// `tuneloop init` writes).
pub const RUN_FILE: &str = crate::config::WORKSPACE_FILE;

/// Reads a project file by its path relative to the project root.
pub type ReadFile<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The kind of call that takes the knobs.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SiteKind {
    /// A DataLoader (or subclass, or PyG loader) call: keywords `num_workers`, ….
    DataLoader,
    /// `TrainingArguments(...)`: keywords `dataloader_num_workers`, ….
    TrainingArguments,
}

/// Where a knob's value is defined.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// The call's own keyword: a literal, or absent (the library default).
    Keyword,
    /// The `default=` of an argparse flag of the same file.
    Flag {
        file: String,
        line: usize,
        /// The option as written: `--workers`.
        flag: String,
        /// The attribute it sets on the parsed arguments: `workers`.
        dest: String,
        /// The `default=` text, if the flag has one.
        default: Option<String>,
        #[serde(skip)]
        call_start: usize,
    },
    /// A value in a config file the script loads.
    Config {
        file: String,
        line: usize,
        /// Dotted key path: `data.num_workers`.
        key: String,
        /// The value as written in the file.
        value: String,
    },
    /// A literal in one of the project's own Python modules: a class
    /// field's default, a module-level dict's entry, an imported module
    /// constant ([`super::py_defs`]).
    Python {
        file: String,
        line: usize,
        /// The definition as a reader names it: `Config.num_workers`,
        /// `CFG["num_workers"]`, `NUM_WORKERS`.
        name: String,
        /// The literal as written.
        value: String,
        #[serde(skip)]
        target: Target,
    },
    /// An entry of a dict literal the call spreads (`**train_kwargs`),
    /// assigned in the same function ([`super::spread`]).
    Spread {
        file: String,
        /// Line of the entry's value, or of the literal it would be added to.
        line: usize,
        /// The dict the call spreads: `train_kwargs`.
        dict: String,
        /// The variable whose literal holds (or gets) the entry: `dict`, or
        /// the dict a `dict.update(other)` adds.
        holder: String,
        /// The entry's value as written; `None`: not set (the default).
        value: Option<String>,
        /// Later conditional writes of the key that may win at run time:
        /// "overridden to 1 under `if use_cuda` by cuda_kwargs (main.py:77)".
        overrides: Vec<String>,
    },
    /// A word of the user's command, `[bench] run` of the workspace file,
    /// that passes the flag feeding the knob (so the flag's `default=` is
    /// not used): [`super::command_line`].
    Command {
        file: String,
        /// Line of the word in the workspace file.
        line: usize,
        /// The option as the command passes it: `-j`, `--data.num_workers`.
        flag: String,
        /// The value as passed; `None`: not passed, and only the command line
        /// sets the knob (HfArgumentParser's `--dataloader_num_workers`).
        value: Option<String>,
        /// The default the command overrides: `--workers default=0 (train.py:11)`.
        #[serde(skip_serializing_if = "Option::is_none")]
        overrides: Option<String>,
        /// The word of `[bench] run` holding the value (`None`: to be added).
        #[serde(skip)]
        index: Option<usize>,
        /// The text before the value in that word: `""`, `"--workers="`, `"-j"`.
        #[serde(skip)]
        prefix: String,
    },
    /// Not editable: the value is computed.
    Unresolved { reason: String },
}

/// One knob of one call site and where its value comes from.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct KnobOrigin {
    /// `num_workers`, `pin_memory`, `prefetch_factor`, `persistent_workers`.
    pub knob: String,
    /// The keyword that carries it at the call (`dataloader_num_workers` for
    /// TrainingArguments).
    pub keyword: String,
    /// The keyword's value as written at the call; `None` when absent.
    pub expr: Option<String>,
    pub source: Source,
    /// The wrapper between the source and the knob (`int(·)`, `max(1, ·)`),
    /// when the call wraps the value it reads ([`super::wrap`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrapper: Option<Wrapper>,
}

impl KnobOrigin {
    /// The value now, as Python source (`None`: not set, or not known):
    /// the value at the source, through the wrapper if there is one.
    pub fn current(&self) -> Option<String> {
        let at_source = self.at_source()?;
        match &self.wrapper {
            Some(w) => Some(
                w.apply(&at_source)
                    .map(|a| a.value().to_string())
                    .unwrap_or(at_source),
            ),
            None => Some(at_source),
        }
    }

    /// The value where it is defined, before any wrapper.
    fn at_source(&self) -> Option<String> {
        match &self.source {
            Source::Keyword => self.expr.clone(),
            Source::Flag { default, .. } => default.clone(),
            Source::Config { value, .. } => Some(config_file::python_value(value)),
            Source::Python { value, .. } => Some(value.clone()),
            Source::Spread { value, .. } => value.clone(),
            Source::Command { value, .. } => value.clone(),
            Source::Unresolved { .. } => None,
        }
    }

    /// Whether tuneloop can change the value where it is defined.
    pub fn editable(&self) -> bool {
        !matches!(self.source, Source::Unresolved { .. })
    }

    /// Why `value` cannot be written for this knob: its wrapper would make
    /// it another value (`max(1, ·)` of 0). `None`: it can.
    pub fn refuses(&self, value: &str) -> Option<String> {
        self.wrapper.as_ref()?.refuses(&self.knob, value)
    }

    /// One line: `num_workers = args.workers → --workers default=0 (train.py:12)`.
    /// `at` is the call's `file:line`. A wrapper that changes the value at
    /// the source says what the knob gets: `…, so num_workers is 1`.
    pub fn describe(&self, at: &str) -> String {
        let mut line = self.describe_source(at);
        if let (Some(w), Some(v)) = (&self.wrapper, self.at_source()) {
            match w.apply(&v) {
                Some(Applied::Exactly(got)) if got != v.trim() => {
                    line.push_str(&format!(", so {} is {got}", self.knob))
                }
                Some(Applied::AtMost(_, bound)) => {
                    line.push_str(&format!(", at most {bound} at run time"))
                }
                _ => {}
            }
        }
        line
    }

    fn describe_source(&self, at: &str) -> String {
        let lhs = match &self.expr {
            Some(e) if self.keyword == self.knob => format!("{} = {e}", self.knob),
            Some(e) => format!("{}: {}={e}", self.knob, self.keyword),
            // Set on the command line only (HfArgumentParser).
            None if matches!(self.source, Source::Command { value: Some(_), .. }) => {
                self.knob.clone()
            }
            None => format!("{} not set", self.knob),
        };
        match &self.source {
            Source::Keyword if self.expr.is_some() => format!("{lhs} ({at})"),
            Source::Keyword => format!("{lhs}: the default; set {}= at {at}", self.keyword),
            Source::Flag {
                file,
                line,
                flag,
                default,
                ..
            } => format!(
                "{lhs} → {flag} default={} ({file}:{line})",
                default.as_deref().unwrap_or("(none)")
            ),
            Source::Config {
                file,
                line,
                key,
                value,
            } => format!("{lhs} → {key}: {value} ({file}:{line})"),
            Source::Python {
                file,
                line,
                name,
                value,
                ..
            } => format!("{lhs} → {name} = {value} ({file}:{line})"),
            Source::Spread {
                file,
                line,
                holder,
                value,
                overrides,
                ..
            } => {
                let mut s = match value {
                    Some(v) => format!(
                        "{} = {v} → {holder}[\"{}\"] ({file}:{line})",
                        self.knob, self.keyword
                    ),
                    None => format!(
                        "{lhs}: the default; set \"{}\" in {holder} ({file}:{line})",
                        self.keyword
                    ),
                };
                for o in overrides {
                    s.push_str(&format!(", {o}"));
                }
                s
            }
            Source::Command {
                file,
                line,
                flag,
                value: Some(v),
                overrides,
                ..
            } => {
                let mut s = format!("{lhs} → {flag} {v} in [bench] run ({file}:{line})");
                if let Some(o) = overrides {
                    s.push_str(&format!(", over {o}"));
                }
                s
            }
            Source::Command {
                file, line, flag, ..
            } => format!("{lhs}: the default; add {flag} to [bench] run ({file}:{line})"),
            Source::Unresolved { reason } => format!("{lhs}: not editable ({reason})"),
        }
    }
}

/// A knob of the measured loader that no turn can change, with why and
/// what the user can do (in `report.json` as `not_editable_knobs`).
#[derive(Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub struct NotEditable {
    /// `num_workers`.
    pub knob: String,
    /// Where its value comes from and why it cannot be edited: "num_workers
    /// = cfg.num_workers: not editable (…)".
    pub why: String,
    /// What the user can do about it.
    pub fix: String,
}

impl KnobOrigin {
    /// The file a turn would write to change this knob, when it is not the
    /// call's own file.
    pub fn source_file(&self) -> Option<&str> {
        match &self.source {
            Source::Flag { file, .. }
            | Source::Config { file, .. }
            | Source::Python { file, .. }
            | Source::Spread { file, .. }
            | Source::Command { file, .. } => Some(file),
            Source::Keyword | Source::Unresolved { .. } => None,
        }
    }
}

/// A call that takes DataLoader knobs, with each knob's origin.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct KnobSite {
    pub file: String,
    /// 1-based first and last line of the call.
    pub line: usize,
    pub end_line: usize,
    pub callee: String,
    pub kind: SiteKind,
    /// The function the call is in (`train_dataloader` for Lightning).
    pub function: Option<String>,
    pub knobs: Vec<KnobOrigin>,
    /// The scanned DataLoader call (not for TrainingArguments).
    #[serde(skip)]
    pub call: Option<CallSite>,
    #[serde(skip)]
    pub call_start: usize,
}

impl KnobSite {
    pub fn origin(&self, knob: &str) -> Option<&KnobOrigin> {
        self.knobs.iter().find(|o| o.knob == knob)
    }

    /// `file:line` of the call.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    /// Whether `file:line` (as the instrumentation reports it) is this call.
    pub fn matches(&self, file: &str, line: usize) -> bool {
        let same_file = self.file == file
            || Path::new(file).ends_with(&self.file)
            || Path::new(&self.file).ends_with(file);
        same_file && (self.line..=self.end_line).contains(&line)
    }

    /// The lines `scan`, the prompt and the agent show about where values
    /// come from: one per knob.
    pub fn describe_knobs(&self) -> Vec<String> {
        let at = self.at();
        self.knobs.iter().map(|o| o.describe(&at)).collect()
    }

    /// The knobs no turn can change, given the files a turn may change
    /// (`editable`; the workspace file counts in command mode): computed
    /// values, and values defined in a file outside `editable`.
    pub fn not_editable(&self, editable: &[String]) -> Vec<NotEditable> {
        let at = self.at();
        self.knobs
            .iter()
            .filter_map(|o| {
                if !o.editable() {
                    return Some(NotEditable {
                        knob: o.knob.clone(),
                        why: o.describe(&at),
                        fix: format!(
                            "Write {} as a value tuneloop can follow (a literal in the call, a flag default, a config-file value, a field default or constant of the project's own modules: docs/knobs.md in the tuneloop repository), or pass it on the command line in [bench] run",
                            o.knob
                        ),
                    });
                }
                let file = o.source_file()?;
                if file == RUN_FILE || editable.iter().any(|e| e == file) {
                    return None;
                }
                Some(NotEditable {
                    knob: o.knob.clone(),
                    why: format!("{}, but {file} is not an editable file", o.describe(&at)),
                    fix: format!(
                        "Add \"{file}\" to [project] editable in tuneloop.toml (or rerun `tuneloop init --force`, or pass --editable {file} with the other files)"
                    ),
                })
            })
            .collect()
    }

    /// A [`CallSite`] whose keywords hold the knobs' present values (as
    /// Python source), for code that reasons about values, not text.
    pub fn effective_call(&self) -> CallSite {
        let mut kwargs = serde_json::Map::new();
        for o in &self.knobs {
            if let Some(v) = o.current() {
                kwargs.insert(o.knob.clone(), serde_json::Value::String(v));
            }
        }
        CallSite {
            file: self.file.clone(),
            line: self.line,
            column: 1,
            callee: self.callee.clone(),
            positional: 0,
            kwargs,
            has_spread: false,
            call_range: 0..0,
        }
    }
}

/// Which definition holds the value, as found again in any version of its file.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// A class-body field: `class Config: num_workers: int = 0`.
    ClassField { class: String, field: String },
    /// An entry of a module-level dict literal: `CFG = {"data": {"num_workers": 0}}`.
    DictEntry { var: String, keys: Vec<String> },
    /// A module-level constant: `NUM_WORKERS = 0`.
    Constant { name: String },
}

impl Target {
    /// As a reader names it: `Config.num_workers`, `CFG["num_workers"]`, `NUM_WORKERS`.
    pub fn name(&self) -> String {
        match self {
            Target::ClassField { class, field } => format!("{class}.{field}"),
            Target::DictEntry { var, keys } => {
                let mut s = var.clone();
                for k in keys {
                    s.push_str(&format!("[\"{k}\"]"));
                }
                s
            }
            Target::Constant { name } => name.clone(),
        }
    }
}

/// One knob change found in a turn's edit.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceChange {
    pub file: String,
    /// The knob, or the keyword name when it is none (`batch_size`).
    pub knob: String,
    /// `num_workers 0 → 4 (--workers default, train.py:12)`.
    pub change: String,
    pub line: usize,
}

/// What a Python file's edit amounts to, seen through the knob sources.
#[derive(Clone, Debug, PartialEq)]
pub enum PythonEdit {
    /// It touches no flag default or TrainingArguments keyword (or changes
    /// code outside calls): the DataLoader-only check decides.
    NotAtSource,
    /// Only keywords of knob-taking calls and flag defaults changed.
    Changes(Vec<SourceChange>),
    /// It touched a flag or TrainingArguments in a way that is no knob change.
    Rejected(String),
}

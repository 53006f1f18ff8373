//! Knobs that only a command line sets, by a framework's own parser:
//!
//! * Hugging Face `HfArgumentParser((…, TrainingArguments))`: the
//!   `TrainingArguments` fields are options (`--dataloader_num_workers 4`),
//!   and no `TrainingArguments(...)` call exists in the script to edit;
//! * `LightningCLI(Model, DataModule)`: each `__init__` parameter of the
//!   model and the data module is an option (`--model.workers`,
//!   `--data.num_workers`); a loader built with `num_workers=self.num_workers`
//!   takes the parameter.
//!
//! Such a knob's source is the user's command (`[bench] run`, see
//! [`super::command_line`]): the word after the option when the command
//! passes it, else the option and its value added at the end. Without a
//! command that runs the script (a bare `tuneloop scan`), the knob is not
//! editable, and the reason says which option sets it.

use tree_sitter::Node;

use super::command_line::{self, Passed};
use super::scan::{argument_nodes, line_col, named_children, text};
use super::types::{ReadFile, Source};

/// `HfArgumentParser(...)` calls whose dataclasses include
/// `TrainingArguments` (or `Seq2SeqTrainingArguments`).
pub(super) fn is_hf_parser(call: Node<'_>, src: &str) -> bool {
    let Some(f) = call.child_by_field_name("function") else {
        return false;
    };
    let name = text(f, src).rsplit('.').next().unwrap_or("");
    name == "HfArgumentParser"
        && call
            .child_by_field_name("arguments")
            .is_some_and(|a| text(a, src).contains("TrainingArguments"))
}

/// The options HfArgumentParser makes for a `TrainingArguments` field:
/// `--dataloader_num_workers` (and its dashed alias).
pub(super) fn hf_options(field: &str) -> Vec<String> {
    let mut v = vec![format!("--{field}")];
    if field.contains('_') {
        v.push(format!("--{}", field.replace('_', "-")));
    }
    v
}

/// The source of a knob that the option `options[0]` sets, as the user's
/// command (`[bench] run` of the workspace file, read with `read`) holds it:
/// the word after the option, or the option to add. `None` when no command
/// runs `file`.
pub(super) fn command_source(
    file: &str,
    read: ReadFile<'_>,
    options: &[String],
    overrides: Option<String>,
) -> Option<Source> {
    let toml = read(command_line::RUN_FILE)?;
    let (words, array) = command_line::run_array(&toml)?;
    let values: Vec<String> = words.iter().map(|w| w.value.clone()).collect();
    let from = command_line::script_args_start(&values, file)?;
    let line = |i: usize| words.get(i).map(|w| w.line);
    let array_line = toml[..array.end].matches('\n').count() + 1;
    Some(match command_line::find_passed(&values, from, options) {
        Some(Passed::Value {
            option,
            index,
            prefix,
            value,
        }) => Source::Command {
            file: command_line::RUN_FILE.to_string(),
            line: line(index).unwrap_or(array_line),
            flag: option,
            value: Some(value),
            overrides,
            index: Some(index),
            prefix,
        },
        Some(Passed::Switch { option, index }) => Source::Unresolved {
            reason: format!(
                "[bench] run passes the switch {option} ({}:{}) with no value; pass a value",
                command_line::RUN_FILE,
                line(index).unwrap_or(array_line)
            ),
        },
        None => Source::Command {
            file: command_line::RUN_FILE.to_string(),
            line: array_line,
            flag: options[0].clone(),
            value: None,
            overrides,
            index: None,
            prefix: String::new(),
        },
    })
}

/// A `self.x` (or `self.hparams.x`) of a LightningModule or
/// LightningDataModule method, followed to the class's `__init__`
/// parameter and the option LightningCLI makes for it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct InitArg {
    pub class: String,
    pub param: String,
    /// The parameter's default as written.
    pub default: Option<String>,
    pub line: usize,
    /// `["--data.num_workers", "--data.init_args.num_workers"]`; empty when
    /// no `LightningCLI(...)` of the file takes the class.
    pub options: Vec<String>,
}

impl InitArg {
    /// `Data.__init__ num_workers=0 (train.py:12)`.
    pub fn describe(&self, file: &str) -> String {
        format!(
            "{}.__init__ {}={} ({file}:{})",
            self.class,
            self.param,
            self.default.as_deref().unwrap_or("(none)"),
            self.line
        )
    }
}

fn ancestor<'t>(node: Node<'t>, kind: &str) -> Option<Node<'t>> {
    let mut n = node.parent();
    while let Some(p) = n {
        if p.kind() == kind {
            return Some(p);
        }
        n = p.parent();
    }
    None
}

fn identifier_param<'t>(p: Node<'t>) -> Option<Node<'t>> {
    match p.kind() {
        "identifier" => Some(p),
        _ => p
            .child_by_field_name("name")
            .or_else(|| named_children(p).into_iter().next())
            .filter(|n| n.kind() == "identifier"),
    }
}

/// `value` is `self.<attr>` or `self.hparams.<attr>` inside a class whose
/// `__init__` takes the parameter that sets it.
pub(super) fn init_arg(value: Node<'_>, src: &str) -> Option<InitArg> {
    let written = text(value, src);
    let (attr, via_hparams) = if let Some(a) = written.strip_prefix("self.hparams.") {
        (a, true)
    } else {
        (written.strip_prefix("self.")?, false)
    };
    if value.kind() != "attribute" || !attr.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let class = ancestor(value, "class_definition")?;
    let class_name = text(class.child_by_field_name("name")?, src).to_string();
    let body = class.child_by_field_name("body")?;
    let init = named_children(body).into_iter().find_map(|n| {
        let f = match n.kind() {
            "function_definition" => n,
            "decorated_definition" => n.child_by_field_name("definition")?,
            _ => return None,
        };
        (f.child_by_field_name("name").map(|x| text(x, src)) == Some("__init__")).then_some(f)
    })?;
    let params = init.child_by_field_name("parameters")?;
    let param_name = if via_hparams {
        attr.to_string()
    } else {
        // `self.<attr> = <param>` in __init__.
        let mut stack = vec![init.child_by_field_name("body")?];
        let mut found = None;
        while let Some(n) = stack.pop() {
            if n.kind() == "assignment" {
                let (l, r) = (
                    n.child_by_field_name("left"),
                    n.child_by_field_name("right"),
                );
                if let (Some(l), Some(r)) = (l, r) {
                    if text(l, src) == format!("self.{attr}") && r.kind() == "identifier" {
                        found = Some(text(r, src).to_string());
                    }
                }
            }
            stack.extend(named_children(n));
        }
        found?
    };
    let param = named_children(params)
        .into_iter()
        .find(|p| identifier_param(*p).is_some_and(|i| text(i, src) == param_name))?;
    let default = param
        .child_by_field_name("value")
        .map(|d| text(d, src).to_string());
    let root = {
        let mut r = value;
        while let Some(p) = r.parent() {
            r = p;
        }
        r
    };
    let options = lightning_prefix(root, src, &class_name)
        .map(|prefix| {
            vec![
                format!("--{prefix}.{param_name}"),
                format!("--{prefix}.init_args.{param_name}"),
            ]
        })
        .unwrap_or_default();
    Some(InitArg {
        class: class_name,
        param: param_name,
        default,
        line: line_col(src, param.start_byte()).0,
        options,
    })
}

/// `model` or `data`: how `LightningCLI(...)` in the file takes `class`
/// (first positional or `model_class=`; second or `datamodule_class=`).
fn lightning_prefix(root: Node<'_>, src: &str, class: &str) -> Option<&'static str> {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind() == "call" {
            let f = n.child_by_field_name("function");
            if f.is_some_and(|f| text(f, src).rsplit('.').next() == Some("LightningCLI")) {
                let args = argument_nodes(n.child_by_field_name("arguments")?);
                let mut positional = 0;
                for a in args {
                    if a.kind() == "keyword_argument" {
                        let key = a.child_by_field_name("name").map(|k| text(k, src));
                        let v = a.child_by_field_name("value").map(|v| text(v, src));
                        if v == Some(class) {
                            match key {
                                Some("model_class") => return Some("model"),
                                Some("datamodule_class") => return Some("data"),
                                _ => {}
                            }
                        }
                        continue;
                    }
                    if text(a, src) == class {
                        return match positional {
                            0 => Some("model"),
                            1 => Some("data"),
                            _ => None,
                        };
                    }
                    positional += 1;
                }
            }
        }
        stack.extend(named_children(n));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::knobs::{knob_sites, set_knob, KnobSite, SiteKind};
    use super::*;
    use std::collections::HashMap;

    fn sites(files: &HashMap<&str, String>, file: &str) -> Vec<KnobSite> {
        let read = |p: &str| files.get(p).cloned();
        knob_sites(file, &files[file], &read).unwrap()
    }

    fn workspace(run: &str) -> String {
        format!("[project]\nroot = \".\"\n\n[bench]\nrun = {run}\nsteps = 40\n")
    }

    const HF: &str = r#"from dataclasses import dataclass, field
from transformers import HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    hidden: int = field(default=32)


def main():
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    Trainer(model=make(model_args), args=training_args, train_dataset=ds).train()
"#;

    #[test]
    fn hf_argument_parser_knobs_are_options_of_the_command() {
        let ws = workspace(
            r#"["python", "train.py", "--output_dir", "out", "--dataloader_num_workers", "0"]"#,
        );
        let files = HashMap::from([("train.py", HF.to_string()), ("tuneloop.toml", ws.clone())]);
        let s = &sites(&files, "train.py")[0];
        assert_eq!((s.kind, s.line), (SiteKind::TrainingArguments, 11));
        let nw = s.origin("num_workers").unwrap();
        assert!(
            matches!(&nw.source, Source::Command { flag, value: Some(v), index: Some(5), .. } if flag == "--dataloader_num_workers" && v == "0"),
            "{nw:?}"
        );
        assert_eq!(
            nw.describe(&s.at()),
            "num_workers → --dataloader_num_workers 0 in [bench] run (tuneloop.toml:5), over the TrainingArguments default"
        );
        let read = |p: &str| files.get(p).cloned();
        let (file, out) = set_knob(s, "num_workers", "4", &read).unwrap();
        assert_eq!(file, "tuneloop.toml");
        assert_eq!(
            out,
            ws.replace(
                r#""--dataloader_num_workers", "0""#,
                r#""--dataloader_num_workers", "4""#
            )
        );
        // A knob the command does not pass: its option is added at the end.
        let pf = s.origin("prefetch_factor").unwrap();
        assert!(pf.editable());
        assert!(pf
            .describe(&s.at())
            .contains("add --dataloader_prefetch_factor to [bench] run"));
        let (_, added) = set_knob(s, "prefetch_factor", "4", &read).unwrap();
        assert!(
            added.contains(r#""0", "--dataloader_prefetch_factor", "4"]"#),
            "{added}"
        );
        let changes = command_line::command_edit(&ws, &added, std::slice::from_ref(s)).unwrap();
        assert_eq!(
            changes[0].change,
            "prefetch_factor (default) → 4 (--dataloader_prefetch_factor added to [bench] run, tuneloop.toml:5)"
        );
        // The dashed spelling is the same option.
        let dashed = workspace(r#"["python", "train.py", "--dataloader-num-workers=2"]"#);
        let files = HashMap::from([("train.py", HF.to_string()), ("tuneloop.toml", dashed)]);
        let s = &sites(&files, "train.py")[0];
        assert_eq!(
            s.origin("num_workers").unwrap().current().as_deref(),
            Some("2")
        );
        // No command that runs the script: not editable, and why.
        let files = HashMap::from([("train.py", HF.to_string())]);
        let s = &sites(&files, "train.py")[0];
        let nw = s.origin("num_workers").unwrap();
        assert!(!nw.editable());
        assert!(nw
            .describe(&s.at())
            .contains("HfArgumentParser sets it with --dataloader_num_workers"));
    }

    const CLI: &str = r#"import pytorch_lightning as pl
from pytorch_lightning.cli import LightningCLI
from torch.utils.data import DataLoader


class Data(pl.LightningDataModule):
    def __init__(self, batch_size: int = 32, num_workers: int = 0):
        super().__init__()
        self.batch_size = batch_size
        self.workers = num_workers

    def train_dataloader(self):
        return DataLoader(Items(), batch_size=self.batch_size, num_workers=self.workers)


class Model(pl.LightningModule):
    def __init__(self, workers=2):
        super().__init__()
        self.save_hyperparameters()

    def val_dataloader(self):
        return DataLoader(Items(), num_workers=self.hparams.workers)


if __name__ == "__main__":
    LightningCLI(Model, datamodule_class=Data)
"#;

    #[test]
    fn lightning_cli_init_arguments_are_options_of_the_command() {
        let ws = workspace(
            r#"["python", "train.py", "fit", "--data.num_workers", "0", "--trainer.max_epochs", "1"]"#,
        );
        let files = HashMap::from([("train.py", CLI.to_string()), ("tuneloop.toml", ws.clone())]);
        let all = sites(&files, "train.py");
        let (data, model) = (&all[0], &all[1]);
        let nw = data.origin("num_workers").unwrap();
        assert_eq!(
            nw.describe(&data.at()),
            "num_workers = self.workers → --data.num_workers 0 in [bench] run (tuneloop.toml:5), over Data.__init__ num_workers=0 (train.py:7)"
        );
        let read = |p: &str| files.get(p).cloned();
        let (_, out) = set_knob(data, "num_workers", "8", &read).unwrap();
        assert!(out.contains(r#""--data.num_workers", "8""#), "{out}");
        // The model's hparams: `--model.workers`, not passed, so added.
        let mw = model.origin("num_workers").unwrap();
        assert!(
            mw.describe(&model.at())
                .contains("add --model.workers to [bench] run"),
            "{}",
            mw.describe(&model.at())
        );
        let (_, out) = set_knob(model, "num_workers", "4", &read).unwrap();
        assert!(out.contains(r#""1", "--model.workers", "4"]"#), "{out}");
        // Without a command: which option sets it.
        let files = HashMap::from([("train.py", CLI.to_string())]);
        let nw = sites(&files, "train.py")[0]
            .origin("num_workers")
            .unwrap()
            .clone();
        assert!(!nw.editable());
        assert!(
            nw.describe("train.py:13")
                .contains("LightningCLI sets with --data.num_workers"),
            "{}",
            nw.describe("train.py:13")
        );
        // Without LightningCLI: the parameter is named, not editable.
        let plain = CLI.replace(
            "    LightningCLI(Model, datamodule_class=Data)\n",
            "    pl.Trainer().fit(Model(), datamodule=Data(num_workers=4))\n",
        );
        let files = HashMap::from([("train.py", plain)]);
        let nw = sites(&files, "train.py")[0]
            .origin("num_workers")
            .unwrap()
            .clone();
        assert!(
            nw.describe("train.py:13")
                .contains("set where Data is made"),
            "{}",
            nw.describe("train.py:13")
        );
    }
}

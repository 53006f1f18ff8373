//! Where each DataLoader knob's value is defined, changing it there, and
//! checking that a turn changed exactly one knob at its source.
//!
//! Real training scripts seldom write `num_workers=4` in the call. This
//! module follows a knob's value from the call that takes it to the place a
//! reviewer would edit:
//!
//! * a literal keyword of the call (or none: the library default), edited in
//!   the call;
//! * `num_workers=args.workers`, where `args` holds `parser.parse_args()`: the
//!   `add_argument("--workers", default=N)` of the same file, edited at its
//!   `default=`;
//! * `cfg.data.num_workers` / `cfg["data"]["num_workers"]`, where the script
//!   names a config file (YAML, JSON, TOML) of the project: the value at that
//!   key path, edited in place ([`super::config_file`]);
//! * Hugging Face `TrainingArguments(...)` / `Seq2SeqTrainingArguments(...)`,
//!   whose `dataloader_*` keywords are the knobs of the loader transformers
//!   builds; a keyword there may itself come from a flag or a config file.
//! * a knob absent from a call that spreads a dict literal of the same
//!   function (`DataLoader(ds, **train_kwargs)`): that dict's entry, added
//!   to the literal when absent ([`super::spread`]).
//!
//! * `cfg.num_workers`, `CFG["num_workers"]`, an imported `NUM_WORKERS`,
//!   whose literal is defined in one of the project's own Python modules (a
//!   dataclass field's default in `config.py`, a module-level dict's entry,
//!   a module constant): that literal, edited in place ([`super::py_defs`]).
//! * a wrapped value (`int(args.workers)`, `max(1, args.workers)`) or a
//!   local bound once to one: what it wraps, with the wrapper kept to say
//!   what the knob gets ([`super::wrap`]);
//! * a flag the user's command passes (`-j 0` in `[bench] run`), an
//!   `HfArgumentParser` option, a LightningCLI `--data.`/`--model.` init
//!   argument: that word of the command in the workspace file
//!   ([`super::command_line`], [`super::cli_knobs`]).
//!
//! Anything else (a computed expression, a local bound to one) stays "not
//! editable", with the reason. Call sites themselves come from
//! [`super::scan`], which also counts DataLoader subclasses and PyTorch
//! Geometric's loaders.

use std::collections::BTreeSet;
use std::path::Path;

use tree_sitter::{Node, Tree};

use thiserror::Error;

use super::cli_knobs;
use super::command_line::{self, RunWordsError};
use super::config_file::{self, ConfigKind, ConfigValueError};
use super::py_defs::{self, normalise, DefinitionGone, Resolution};
use super::rewrite::{set_call_kwarg, set_kwarg, RewriteError};
use super::scan::{
    argument_nodes, call_node, call_site, line_col, named_children, outside, parse_python,
    scan_tree, scan_tree_with, string_value, text, CallSite, ScanError,
};
use super::spread::{self, Spread, SpreadEditError};
use super::types::Target;
use super::wrap::{self, Wrapper};
use crate::knob::LoaderKnob;
// The shared types have their own module; `edit::knobs::…` paths keep working.
pub use super::types::{
    KnobOrigin, KnobSite, NotEditable, PythonEdit, ReadFile, SiteKind, Source, SourceChange,
};

// ---------------------------------------------------------------------------
// Facts about one file
// ---------------------------------------------------------------------------

/// One `add_argument(...)` call.
#[derive(Clone, Debug)]
struct Flag {
    option: String,
    dest: String,
    default: Option<String>,
    line: usize,
    call_start: usize,
}

struct FileFacts {
    flags: Vec<Flag>,
    /// Names that hold parsed arguments (and parameters, which may).
    args_names: BTreeSet<String>,
    params: BTreeSet<String>,
    /// Config files the file names that exist in the project.
    configs: Vec<String>,
    /// Other project files whose imports count as the project's local
    /// modules (the workspace's entry script), for [`super::py_defs`].
    roots: Vec<String>,
}

/// Every `call` node, in source order.
fn all_calls(tree: &Tree) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() == "call" {
            out.push(n);
        }
        let mut kids = named_children(n);
        kids.reverse();
        stack.extend(kids);
    }
    out.sort_by_key(|n| n.start_byte());
    out
}

/// The last name of a callee: `add_argument` of `parser.add_argument`.
fn callee_name<'s>(call: Node<'_>, src: &'s str) -> &'s str {
    let Some(f) = call.child_by_field_name("function") else {
        return "";
    };
    match f.kind() {
        "attribute" => f
            .child_by_field_name("attribute")
            .map(|a| text(a, src))
            .unwrap_or(""),
        _ => text(f, src),
    }
}

fn is_training_arguments(call: Node<'_>, src: &str) -> bool {
    matches!(
        callee_name(call, src),
        "TrainingArguments" | "Seq2SeqTrainingArguments"
    )
}

fn is_add_argument(call: Node<'_>, src: &str) -> bool {
    callee_name(call, src) == "add_argument"
}

/// The keyword argument `name` of a call, as a node.
fn keyword<'t>(call: Node<'t>, src: &str, name: &str) -> Option<Node<'t>> {
    let args = call.child_by_field_name("arguments")?;
    argument_nodes(args).into_iter().find(|a| {
        a.kind() == "keyword_argument"
            && a.child_by_field_name("name").map(|n| text(n, src)) == Some(name)
    })
}

fn keyword_value<'t>(call: Node<'t>, src: &str, name: &str) -> Option<Node<'t>> {
    keyword(call, src, name).and_then(|k| k.child_by_field_name("value"))
}

fn flag_of(call: Node<'_>, src: &str) -> Option<Flag> {
    let args = call.child_by_field_name("arguments")?;
    let options: Vec<String> = argument_nodes(args)
        .into_iter()
        .filter(|a| a.kind() == "string")
        .filter_map(|a| string_value(a, src))
        .collect();
    let first = options.first()?.clone();
    let long = options.iter().find(|o| o.starts_with("--"));
    let dest = match keyword_value(call, src, "dest").and_then(|d| string_value(d, src)) {
        Some(d) => d,
        None => match long {
            Some(l) => l.trim_start_matches('-').replace('-', "_"),
            None => first.trim_start_matches('-').replace('-', "_"),
        },
    };
    Some(Flag {
        option: long.cloned().unwrap_or(first),
        dest,
        default: keyword_value(call, src, "default")
            .map(|d| text(d, src).to_string())
            .or_else(|| {
                // argparse's own default of a switch.
                match keyword_value(call, src, "action").and_then(|a| string_value(a, src)) {
                    Some(a) if a == "store_true" => Some("False".into()),
                    Some(a) if a == "store_false" => Some("True".into()),
                    _ => None,
                }
            }),
        line: line_col(src, call.start_byte()).0,
        call_start: call.start_byte(),
    })
}

fn file_facts(file: &str, src: &str, tree: &Tree, read: ReadFile<'_>) -> FileFacts {
    let calls = all_calls(tree);
    let flags: Vec<Flag> = calls
        .iter()
        .filter(|c| is_add_argument(**c, src))
        .filter_map(|c| flag_of(*c, src))
        .collect();
    // Functions that return parsed arguments: `args = get_args()`.
    let mut parsers: BTreeSet<String> = BTreeSet::new();
    let mut args_names = BTreeSet::new();
    let mut params = BTreeSet::new();
    let mut configs = Vec::new();
    let dir = Path::new(file)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut stack = vec![tree.root_node()];
    let mut assignments = Vec::new();
    while let Some(n) = stack.pop() {
        match n.kind() {
            "function_definition" => {
                let body = text(n, src);
                if body.contains("parse_args(") || body.contains("parse_known_args(") {
                    if let Some(name) = n.child_by_field_name("name") {
                        parsers.insert(text(name, src).to_string());
                    }
                }
                if let Some(ps) = n.child_by_field_name("parameters") {
                    for p in named_children(ps) {
                        let id = match p.kind() {
                            "identifier" => Some(p),
                            _ => p
                                .child_by_field_name("name")
                                .or_else(|| named_children(p).into_iter().next()),
                        };
                        if let Some(id) = id.filter(|i| i.kind() == "identifier") {
                            params.insert(text(id, src).to_string());
                        }
                    }
                }
            }
            "assignment" => assignments.push(n),
            // `@hydra.main(config_path="conf", config_name="train")`.
            "call"
                if callee_name(n, src) == "main"
                    && n.child_by_field_name("function")
                        .is_some_and(|f| text(f, src).contains("hydra")) =>
            {
                let value = |k: &str| keyword_value(n, src, k).and_then(|v| string_value(v, src));
                if let (Some(path), Some(name)) = (value("config_path"), value("config_name")) {
                    let name = if ConfigKind::of(&name).is_some() {
                        name
                    } else {
                        format!("{name}.yaml")
                    };
                    let c = normalise(&format!("{dir}/{path}/{name}"));
                    if read(&c).is_some() && !configs.contains(&c) {
                        configs.push(c);
                    }
                }
            }
            "string" => {
                if let Some(s) = string_value(n, src) {
                    if ConfigKind::of(&s).is_some() && !s.contains('\n') {
                        let mut candidates = vec![normalise(&s)];
                        if !dir.is_empty() {
                            candidates.push(normalise(&format!("{dir}/{s}")));
                        }
                        if let Some(c) = candidates.into_iter().find(|c| read(c).is_some()) {
                            if !configs.contains(&c) {
                                configs.push(c);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        stack.extend(named_children(n));
    }
    for a in assignments {
        let (Some(left), Some(right)) = (
            a.child_by_field_name("left"),
            a.child_by_field_name("right"),
        ) else {
            continue;
        };
        if right.kind() != "call" {
            continue;
        }
        let name = callee_name(right, src);
        let parsed = matches!(
            name,
            "parse_args" | "parse_known_args" | "parse_intermixed_args"
        ) || parsers.contains(name);
        if !parsed {
            continue;
        }
        let target = match left.kind() {
            "identifier" => Some(left),
            // `args, rest = parser.parse_known_args()`
            _ => named_children(left).into_iter().next(),
        };
        if let Some(t) = target.filter(|t| t.kind() == "identifier") {
            args_names.insert(text(t, src).to_string());
        }
    }
    FileFacts {
        flags,
        args_names,
        params,
        configs,
        roots: Vec::new(),
    }
}

/// DataLoader classes the file imports from other project files:
/// (`module.Class` as written in the import, for [`scan_tree_with`]; the
/// file that defines it).
fn project_loaders(
    file: &str,
    src: &str,
    tree: &Tree,
    read: ReadFile<'_>,
) -> Vec<(String, String)> {
    let dir = Path::new(file)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() != "import_from_statement" {
            stack.extend(named_children(n));
            continue;
        }
        let Some(module) = n.child_by_field_name("module_name") else {
            continue;
        };
        let written: String = text(module, src).split_whitespace().collect();
        if written.starts_with("torch") || written == "transformers" {
            continue;
        }
        // `.a.b` → `<dir>/a/b`, `..a` → the parent of `<dir>`; `a.b` → `a/b`
        // from the project root or from the script's folder.
        let dots = written.len() - written.trim_start_matches('.').len();
        let rest = written.trim_start_matches('.').replace('.', "/");
        let bases: Vec<String> = if dots > 0 {
            let mut base = dir.clone();
            for _ in 1..dots {
                base = format!("{base}/..");
            }
            vec![base]
        } else {
            vec![String::new(), dir.clone()]
        };
        let mut defined: Option<(String, Vec<String>)> = None;
        for base in bases {
            for candidate in [
                format!("{base}/{rest}.py"),
                format!("{base}/{rest}/__init__.py"),
            ] {
                let candidate = normalise(&candidate);
                if candidate == normalise(file) {
                    continue;
                }
                if let Some(text) = read(&candidate) {
                    defined = Some((candidate, super::scan::loader_classes(&text)));
                    break;
                }
            }
            if defined.is_some() {
                break;
            }
        }
        let Some((module_file, classes)) = defined else {
            continue;
        };
        let mut cursor = n.walk();
        for name in n.children_by_field_name("name", &mut cursor) {
            let imported = match name.kind() {
                "aliased_import" => name.child_by_field_name("name"),
                _ => Some(name),
            };
            if let Some(imported) = imported {
                let class = text(imported, src).to_string();
                if classes.contains(&class) {
                    out.push((format!("{written}.{class}"), module_file.clone()));
                }
            }
        }
    }
    out
}

/// `a.b["c"].d` → `["a", "b", "c", "d"]`; `None` for anything else.
fn chain(node: Node<'_>, src: &str) -> Option<Vec<String>> {
    match node.kind() {
        "identifier" => Some(vec![text(node, src).to_string()]),
        "attribute" => {
            let mut c = chain(node.child_by_field_name("object")?, src)?;
            c.push(text(node.child_by_field_name("attribute")?, src).to_string());
            Some(c)
        }
        "subscript" => {
            let mut c = chain(node.child_by_field_name("value")?, src)?;
            let key = node.child_by_field_name("subscript")?;
            c.push(string_value(key, src)?);
            Some(c)
        }
        "parenthesized_expression" => chain(argument_nodes(node).into_iter().next()?, src),
        _ => None,
    }
}

fn is_literal(node: Node<'_>, src: &str) -> bool {
    match node.kind() {
        "integer" | "float" | "true" | "false" | "none" => true,
        "string" => string_value(node, src).is_some(),
        "unary_operator" => node
            .child_by_field_name("argument")
            .is_some_and(|a| matches!(a.kind(), "integer" | "float")),
        _ => false,
    }
}

fn resolve(
    value: Node<'_>,
    src: &str,
    file: &str,
    facts: &FileFacts,
    read: ReadFile<'_>,
) -> Source {
    if is_literal(value, src) {
        return Source::Keyword;
    }
    let written = text(value, src);
    let Some(parts) = chain(value, src) else {
        return Source::Unresolved {
            reason: format!("`{written}` is computed; change it where it is computed"),
        };
    };
    // `self.num_workers` of a Lightning module or data module: an
    // `__init__` parameter, which LightningCLI sets from the command line.
    if parts[0] == "self" {
        if let Some(arg) = cli_knobs::init_arg(value, src) {
            if arg.options.is_empty() {
                return Source::Unresolved {
                    reason: format!(
                        "`{written}` is the argument {}, set where {} is made",
                        arg.describe(file),
                        arg.class
                    ),
                };
            }
            return cli_knobs::command_source(file, read, &arg.options, Some(arg.describe(file)))
                .unwrap_or_else(|| Source::Unresolved {
                    reason: format!(
                        "`{written}` is {}, which LightningCLI sets with {}; `tuneloop init -- python {file} fit …` lets tuneloop change it there",
                        arg.describe(file),
                        arg.options[0]
                    ),
                });
        }
    }
    if parts.len() == 2
        && (facts.args_names.contains(&parts[0]) || facts.params.contains(&parts[0]))
    {
        if let Some(f) = facts.flags.iter().find(|f| f.dest == parts[1]) {
            return Source::Flag {
                file: file.to_string(),
                line: f.line,
                flag: f.option.clone(),
                dest: f.dest.clone(),
                default: f.default.clone(),
                call_start: f.call_start,
            };
        }
    }
    for start in 1..parts.len() {
        let path = &parts[start..];
        for cfg in &facts.configs {
            let (Some(kind), Some(text)) = (ConfigKind::of(cfg), read(cfg)) else {
                continue;
            };
            if let Some(v) = config_file::lookup(kind, &text, path) {
                return Source::Config {
                    file: cfg.clone(),
                    line: v.line,
                    key: path.join("."),
                    value: v.text,
                };
            }
        }
    }
    // A literal of the project's own modules: `Config.num_workers`,
    // `CFG["num_workers"]`, an imported `NUM_WORKERS`.
    match py_defs::resolve(file, src, &parts, written, &facts.roots, read) {
        Resolution::Found(d) => {
            return Source::Python {
                file: d.file,
                line: d.found.line,
                name: d.target.name(),
                value: d.found.text,
                target: d.target,
            }
        }
        Resolution::Unresolved(reason) => return Source::Unresolved { reason },
        Resolution::None => {}
    }
    let reason = if facts.args_names.contains(&parts[0]) {
        format!("no add_argument in {file} sets `{}`", parts[1..].join("."))
    } else if facts.configs.is_empty() {
        format!("`{written}` is not a literal, a flag default, a value of a config file the script names, nor a literal of the project's own modules")
    } else {
        format!(
            "`{written}` is not a literal, a flag default, nor a key of {}",
            facts.configs.join(", ")
        )
    };
    Source::Unresolved { reason }
}

/// The one value a local name is bound to in its scope (the enclosing
/// function, else the module): `workers = int(args.workers)` for `workers`.
/// `None` when it is a parameter, bound more than once, or not at all.
fn bound_value<'t>(node: Node<'t>, src: &str, facts: &FileFacts) -> Option<Node<'t>> {
    if node.kind() != "identifier" {
        return None;
    }
    let name = text(node, src);
    if facts.args_names.contains(name) {
        return None;
    }
    let mut scope = node.parent();
    while let Some(p) = scope {
        if matches!(p.kind(), "function_definition" | "module") {
            break;
        }
        scope = p.parent();
    }
    let scope = scope?;
    if scope.kind() == "function_definition" {
        let params = scope.child_by_field_name("parameters")?;
        if text(params, src).contains(name)
            && named_children(params).iter().any(|p| {
                let id = if p.kind() == "identifier" {
                    Some(*p)
                } else {
                    p.child_by_field_name("name")
                        .or_else(|| named_children(*p).into_iter().next())
                };
                id.is_some_and(|i| text(i, src) == name)
            })
        {
            return None;
        }
    }
    let mut found = Vec::new();
    let mut stack = named_children(scope);
    while let Some(n) = stack.pop() {
        match n.kind() {
            // Their own scopes.
            "function_definition" | "class_definition" | "lambda" => continue,
            "assignment" | "augmented_assignment" | "for_statement" | "named_expression" => {
                let left = n
                    .child_by_field_name("left")
                    .or_else(|| n.child_by_field_name("name"));
                if left.is_some_and(|l| l.kind() == "identifier" && text(l, src) == name) {
                    found.push(n);
                } else if left.is_some_and(|l| {
                    l.kind() != "identifier"
                        && text(l, src)
                            .split(|c: char| !c.is_alphanumeric() && c != '_')
                            .any(|w| w == name)
                }) {
                    // Unpacked into: its value cannot be told.
                    return None;
                }
            }
            _ => {}
        }
        stack.extend(named_children(n));
    }
    match found.as_slice() {
        [a] if a.kind() == "assignment" => a.child_by_field_name("right"),
        _ => None,
    }
}

/// [`resolve`], also through a local bound once (`workers = args.workers`)
/// and through a wrapper (`int(args.workers)`, `max(1, args.workers)`:
/// [`super::wrap`]), returned with the source.
fn resolve_wrapped(
    value: Node<'_>,
    src: &str,
    file: &str,
    facts: &FileFacts,
    read: ReadFile<'_>,
) -> (Source, Option<Wrapper>) {
    resolve_within(value, src, file, facts, read, 0)
}

fn resolve_within(
    value: Node<'_>,
    src: &str,
    file: &str,
    facts: &FileFacts,
    read: ReadFile<'_>,
    depth: usize,
) -> (Source, Option<Wrapper>) {
    let direct = resolve(value, src, file, facts, read);
    if !matches!(direct, Source::Unresolved { .. }) {
        return (direct, None);
    }
    // A local bound once to a flag, a config value or a wrapper of one (a
    // literal there is not the call's keyword: it stays not editable).
    if let Some(bound) = bound_value(value, src, facts).filter(|_| depth < 4) {
        match resolve_within(bound, src, file, facts, read, depth + 1) {
            (Source::Keyword, _) | (Source::Unresolved { .. }, _) => {}
            found => return found,
        }
    }
    let leads_to_source = |n: Node<'_>| {
        let n = bound_value(n, src, facts).unwrap_or(n);
        !matches!(
            resolve(n, src, file, facts, read),
            Source::Unresolved { .. } | Source::Keyword
        )
    };
    match wrap::peel(value, src, &leads_to_source) {
        Some((inner, w)) => {
            let inner = bound_value(inner, src, facts).unwrap_or(inner);
            (resolve(inner, src, file, facts, read), Some(w))
        }
        None => (direct, None),
    }
}

/// A knob absent from a DataLoader call: the entry of the dict literal the
/// call spreads, if it spreads one ([`super::spread`]); an entry that is no
/// literal is followed like a keyword (`"num_workers": args.workers`).
fn spread_origin(
    call: Node<'_>,
    src: &str,
    file: &str,
    key: &str,
    facts: &FileFacts,
    read: ReadFile<'_>,
) -> (Option<String>, Source, Option<Wrapper>) {
    match spread::follow_key(call, src, file, key) {
        Spread::NotApplicable => (None, Source::Keyword, None),
        Spread::Unresolved(reason) => (None, Source::Unresolved { reason }, None),
        Spread::Found(f) => match f.value {
            Some(v) if !is_literal(v, src) => {
                let (source, wrapper) = resolve_wrapped(v, src, file, facts, read);
                (Some(text(v, src).to_string()), source, wrapper)
            }
            value => (
                None,
                Source::Spread {
                    file: file.to_string(),
                    line: line_col(src, value.unwrap_or(f.target).start_byte()).0,
                    dict: f.dict,
                    holder: f.holder,
                    value: value.map(|v| text(v, src).to_string()),
                    overrides: f.overrides,
                },
                None,
            ),
        },
    }
}

fn site_of(
    file: &str,
    src: &str,
    call: Node<'_>,
    kind: SiteKind,
    scanned: Option<CallSite>,
    facts: &FileFacts,
    read: ReadFile<'_>,
) -> KnobSite {
    let knobs = LoaderKnob::settings()
        .map(|knob| {
            let kw = match kind {
                SiteKind::DataLoader => knob.to_string(),
                SiteKind::TrainingArguments => knob.hf_argument(),
            };
            let value = keyword_value(call, src, &kw);
            let (expr, source, wrapper) = match value {
                None if kind == SiteKind::DataLoader => {
                    spread_origin(call, src, file, &kw, facts, read)
                }
                None => (None, Source::Keyword, None),
                Some(v) => {
                    let (source, wrapper) = resolve_wrapped(v, src, file, facts, read);
                    (Some(text(v, src).to_string()), source, wrapper)
                }
            };
            KnobOrigin {
                knob: knob.to_string(),
                keyword: kw,
                expr,
                source,
                wrapper,
            }
        })
        .collect();
    let callee = call
        .child_by_field_name("function")
        .map(|f| text(f, src).to_string())
        .unwrap_or_default();
    KnobSite {
        file: file.to_string(),
        line: line_col(src, call.start_byte()).0,
        end_line: line_col(src, call.end_byte()).0,
        callee,
        kind,
        function: py_defs::enclosing_definition(call, src, "function_definition"),
        knobs,
        call: scanned,
        call_start: call.start_byte(),
    }
}

/// `HfArgumentParser((…, TrainingArguments))`: the `dataloader_*` fields are
/// options of the user's command ([`super::cli_knobs`]).
fn hf_parser_site(file: &str, src: &str, call: Node<'_>, read: ReadFile<'_>) -> KnobSite {
    let knobs = LoaderKnob::settings()
        .map(|knob| {
            let field = knob.hf_argument();
            let options = cli_knobs::hf_options(&field);
            let source = cli_knobs::command_source(
                file,
                read,
                &options,
                Some("the TrainingArguments default".into()),
            )
            .unwrap_or_else(|| Source::Unresolved {
                reason: format!(
                    "HfArgumentParser sets it with {} on the command line; `tuneloop init -- python {file} …` lets tuneloop change it there",
                    options[0]
                ),
            });
            KnobOrigin {
                knob: knob.to_string(),
                keyword: field,
                expr: None,
                source,
                wrapper: None,
            }
        })
        .collect();
    KnobSite {
        file: file.to_string(),
        line: line_col(src, call.start_byte()).0,
        end_line: line_col(src, call.end_byte()).0,
        callee: call
            .child_by_field_name("function")
            .map(|f| text(f, src).to_string())
            .unwrap_or_default(),
        kind: SiteKind::TrainingArguments,
        function: py_defs::enclosing_definition(call, src, "function_definition"),
        knobs,
        call: None,
        call_start: call.start_byte(),
    }
}

/// Every call of `src` that takes DataLoader knobs (DataLoader calls and
/// TrainingArguments calls, in source order), each knob with its origin.
/// `read` reads project files (for config files the script names).
pub fn knob_sites(file: &str, src: &str, read: ReadFile<'_>) -> Result<Vec<KnobSite>, ScanError> {
    let roots: Vec<String> = read(command_line::RUN_FILE)
        .and_then(|toml| command_line::run_words(&toml))
        .unwrap_or_default()
        .into_iter()
        .filter(|w| w.ends_with(".py") && read(w).is_some())
        .collect();
    knob_sites_from(file, src, read, &roots)
}

/// [`knob_sites`], with the scripts whose imports also count as the
/// project's local modules given (`roots`: the entry script, before the
/// workspace file names it).
pub fn knob_sites_from(
    file: &str,
    src: &str,
    read: ReadFile<'_>,
    roots: &[String],
) -> Result<Vec<KnobSite>, ScanError> {
    let tree = parse_python(src, file)?;
    let mut facts = file_facts(file, src, &tree, read);
    facts.roots = roots.to_vec();
    let loaders: Vec<String> = project_loaders(file, src, &tree, read)
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    let mut sites = Vec::new();
    for s in scan_tree_with(file, src, &tree, &loaders) {
        if let Some(call) = call_node(&tree, &s.call_range) {
            sites.push(site_of(
                file,
                src,
                call,
                SiteKind::DataLoader,
                Some(s.clone()),
                &facts,
                read,
            ));
        }
    }
    for call in all_calls(&tree) {
        if cli_knobs::is_hf_parser(call, src) {
            sites.push(hf_parser_site(file, src, call, read));
        }
        if is_training_arguments(call, src) {
            sites.push(site_of(
                file,
                src,
                call,
                SiteKind::TrainingArguments,
                None,
                &facts,
                read,
            ));
        }
    }
    sites.sort_by_key(|s| s.call_start);
    if let Some(toml) = read(command_line::RUN_FILE) {
        command_line_overlay(file, src, &tree, &mut sites, &toml);
    }
    Ok(sites)
}

/// The option strings of the `add_argument(...)` call at `call_start`:
/// `["-j", "--workers"]`.
fn flag_options(tree: &Tree, src: &str, call_start: usize) -> Vec<String> {
    let mut node = tree
        .root_node()
        .descendant_for_byte_range(call_start, call_start);
    while let Some(n) = node {
        if n.kind() == "call" && n.start_byte() == call_start {
            return n
                .child_by_field_name("arguments")
                .map(|a| {
                    argument_nodes(a)
                        .into_iter()
                        .filter(|x| x.kind() == "string")
                        .filter_map(|x| string_value(x, src))
                        .collect()
                })
                .unwrap_or_default();
        }
        node = n.parent();
    }
    Vec::new()
}

/// Knobs whose flag the user's command passes (`[bench] run` of the
/// workspace file `toml`, when it runs `file`): their source is that word
/// of the command, not the flag's default ([`super::command_line`]).
fn command_line_overlay(file: &str, src: &str, tree: &Tree, sites: &mut [KnobSite], toml: &str) {
    let Some((words, _)) = command_line::run_array(toml) else {
        return;
    };
    let values: Vec<String> = words.iter().map(|w| w.value.clone()).collect();
    let Some(from) = command_line::script_args_start(&values, file) else {
        return;
    };
    for site in sites.iter_mut() {
        for o in site.knobs.iter_mut() {
            let Source::Flag {
                flag,
                default,
                line,
                call_start,
                file: flag_file,
                ..
            } = &o.source
            else {
                continue;
            };
            let options = flag_options(tree, src, *call_start);
            let overrides = format!(
                "{flag} default={} ({flag_file}:{line})",
                default.as_deref().unwrap_or("(none)")
            );
            match command_line::find_passed(&values, from, &options) {
                None => {}
                Some(command_line::Passed::Switch { option, index }) => {
                    o.source = Source::Unresolved {
                        reason: format!(
                            "[bench] run passes the switch {option} ({}:{}), so {overrides} is not used; remove it from the command or pass a value",
                            command_line::RUN_FILE,
                            words[index].line
                        ),
                    }
                }
                Some(command_line::Passed::Value {
                    option,
                    index,
                    prefix,
                    value,
                }) => {
                    o.source = Source::Command {
                        file: command_line::RUN_FILE.to_string(),
                        line: words[index].line,
                        flag: option,
                        value: Some(value),
                        overrides: Some(overrides),
                        index: Some(index),
                        prefix,
                    }
                }
            }
        }
    }
}

/// A reader of files under `root`, for [`knob_sites`].
pub fn read_under(root: &Path) -> impl Fn(&str) -> Option<String> + '_ {
    move |rel: &str| std::fs::read_to_string(root.join(rel)).ok()
}

/// The files the knob values of `script_rel` (the entry script, or a file
/// with DataLoader calls) come from, besides itself: the config files it
/// reads them from, the project modules whose literals define them, and
/// the project files that define the DataLoader subclasses it imports
/// (paths relative to the project root), for `[project] editable`, so that
/// verification can read them and a turn may change them. `entry`: the
/// script the command runs, whose imports count as local modules too.
pub fn knob_files(project_root: &Path, script_rel: &str, entry: Option<&str>) -> Vec<String> {
    let read = read_under(project_root);
    let Some(src) = read(script_rel) else {
        return Vec::new();
    };
    let roots: Vec<String> = entry.map(str::to_string).into_iter().collect();
    let mut out: Vec<String> = Vec::new();
    // The file that defines an imported DataLoader subclass: verification
    // reads it to know the class's calls are DataLoader calls.
    if let Ok(tree) = parse_python(&src, script_rel) {
        for (_, module_file) in project_loaders(script_rel, &src, &tree, &read) {
            if !out.contains(&module_file) {
                out.push(module_file);
            }
        }
    }
    for site in knob_sites_from(script_rel, &src, &read, &roots).unwrap_or_default() {
        for o in site.knobs {
            if let Source::Config { file, .. } | Source::Python { file, .. } = o.source {
                if file != script_rel && !out.contains(&file) {
                    out.push(file);
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Editing at the source
// ---------------------------------------------------------------------------

/// Why [`set_knob`] cannot set a knob where it is defined. One type over
/// every kind of source: the builtin agent records its text as the reason
/// a proposal was dropped, whichever source refused. The source-specific
/// errors it wraps are kept as `#[source]` (or passed through whole where
/// their text already names the file).
#[derive(Debug, Error)]
pub enum SetKnobError {
    #[error("`{knob}` is not a DataLoader knob")]
    NotAKnob { knob: String },
    /// The reader had no text for `file` (gone, or outside the project).
    #[error("cannot read {file}")]
    Unreadable { file: String },
    /// `at` is the site's `file:line`; `why` the wrapper's reason.
    #[error("{knob} at {at} cannot be set to {value}: {why}; choose a value the wrapper keeps, or write the knob as a literal")]
    WrapperRefuses {
        knob: String,
        at: String,
        value: String,
        why: String,
    },
    #[error("cannot edit {at}: {source}")]
    Keyword {
        at: String,
        #[source]
        source: RewriteError,
    },
    #[error("cannot edit the flag's default in {file}: {source}")]
    FlagDefault {
        file: String,
        #[source]
        source: RewriteError,
    },
    #[error("{file} is not a config file")]
    NotAConfigFile { file: String },
    #[error("cannot edit {file}: {source}")]
    Config {
        file: String,
        #[source]
        source: ConfigValueError,
    },
    #[error(transparent)]
    Python(#[from] DefinitionGone),
    #[error(transparent)]
    Spread(#[from] SpreadEditError),
    /// `word` is 1-based.
    #[error("[bench] run in {file} no longer passes `{expected}` as word {word} (it changed since it was read)")]
    CommandWordMoved {
        file: String,
        expected: String,
        word: usize,
    },
    #[error(transparent)]
    RunWords(#[from] RunWordsError),
    #[error("{knob} at {at} is not editable: {reason}; write the value as a literal, a flag default, a config value or a literal of the project's own modules")]
    Unresolved {
        knob: String,
        at: String,
        reason: String,
    },
}

/// Set `knob` of `site` to `value` (Python source) where it is defined.
/// Returns the file to write and its new text.
pub fn set_knob(
    site: &KnobSite,
    knob: &str,
    value: &str,
    read: ReadFile<'_>,
) -> Result<(String, String), SetKnobError> {
    let origin = site.origin(knob).ok_or_else(|| SetKnobError::NotAKnob {
        knob: knob.to_string(),
    })?;
    let read_file = |f: &str| {
        read(f).ok_or_else(|| SetKnobError::Unreadable {
            file: f.to_string(),
        })
    };
    if let Some(why) = origin.refuses(value) {
        return Err(SetKnobError::WrapperRefuses {
            knob: knob.to_string(),
            at: site.at(),
            value: value.to_string(),
            why,
        });
    }
    match &origin.source {
        Source::Keyword => {
            let src = read_file(&site.file)?;
            let out = match (&site.call, site.kind) {
                (Some(call), SiteKind::DataLoader) => {
                    match set_kwarg(&src, call, knob, Some(value)) {
                        // A subclass imported from another file: only this
                        // file's scan with its imports knows the call.
                        Err(RewriteError::SiteNotFound { .. }) => {
                            set_call_kwarg(&src, site.call_start, knob, Some(value))
                        }
                        other => other,
                    }
                }
                _ => set_call_kwarg(&src, site.call_start, &origin.keyword, Some(value)),
            }
            .map_err(|source| SetKnobError::Keyword {
                at: site.at(),
                source,
            })?;
            Ok((site.file.clone(), out))
        }
        Source::Flag {
            file, call_start, ..
        } => {
            let src = read_file(file)?;
            let out =
                set_call_kwarg(&src, *call_start, "default", Some(value)).map_err(|source| {
                    SetKnobError::FlagDefault {
                        file: file.clone(),
                        source,
                    }
                })?;
            Ok((file.clone(), out))
        }
        Source::Config { file, key, .. } => {
            let src = read_file(file)?;
            let kind = ConfigKind::of(file)
                .ok_or_else(|| SetKnobError::NotAConfigFile { file: file.clone() })?;
            let path: Vec<String> = key.split('.').map(str::to_string).collect();
            let out = config_file::set_value(kind, &src, &path, value).map_err(|source| {
                SetKnobError::Config {
                    file: file.clone(),
                    source,
                }
            })?;
            Ok((file.clone(), out))
        }
        Source::Python { file, target, .. } => {
            let src = read_file(file)?;
            let out = py_defs::set_value(file, &src, target, value)?;
            Ok((file.clone(), out))
        }
        Source::Spread { .. } => {
            let src = read_file(&site.file)?;
            let out = spread::set_entry(&src, &site.file, site.call_start, knob, value)?;
            Ok((site.file.clone(), out))
        }
        Source::Command {
            file,
            flag,
            index,
            prefix,
            value: passed,
            ..
        } => {
            let toml = read_file(file)?;
            let word = command_line::as_word(value);
            let out = match index {
                Some(i) => {
                    let words = command_line::run_words(&toml).unwrap_or_default();
                    let expected = format!("{prefix}{}", passed.as_deref().unwrap_or(""));
                    if words.get(*i) != Some(&expected) {
                        return Err(SetKnobError::CommandWordMoved {
                            file: file.clone(),
                            expected,
                            word: i + 1,
                        });
                    }
                    command_line::set_word(&toml, *i, &format!("{prefix}{word}"))?
                }
                None => command_line::append_words(&toml, &[flag.clone(), word])?,
            };
            Ok((file.clone(), out))
        }
        Source::Unresolved { reason } => Err(SetKnobError::Unresolved {
            knob: knob.to_string(),
            at: site.at(),
            reason: reason.clone(),
        }),
    }
}

// ---------------------------------------------------------------------------
// Verifying a turn's edit
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum CallRole {
    DataLoader,
    Flag,
    TrainingArguments,
}

fn role_calls<'t>(
    tree: &'t Tree,
    src: &str,
    label: &str,
    project_loaders: &[String],
) -> Vec<(Node<'t>, CallRole)> {
    let loaders: Vec<usize> = scan_tree_with(label, src, tree, project_loaders)
        .iter()
        .map(|s| s.call_range.start)
        .collect();
    all_calls(tree)
        .into_iter()
        .filter_map(|c| {
            let role = if loaders.contains(&c.start_byte()) {
                CallRole::DataLoader
            } else if is_add_argument(c, src) {
                CallRole::Flag
            } else if is_training_arguments(c, src) {
                CallRole::TrainingArguments
            } else {
                return None;
            };
            Some((c, role))
        })
        .collect()
}

/// Positional and `**` argument texts of a call.
fn other_args(call: Node<'_>, src: &str) -> Vec<String> {
    call.child_by_field_name("arguments")
        .map(|a| {
            argument_nodes(a)
                .into_iter()
                .filter(|n| n.kind() != "keyword_argument")
                .map(|n| text(n, src).to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Classify the edit of Python file `file` from `old` to `new`: which knob
/// changes it makes at their sources (flag defaults, TrainingArguments
/// keywords, DataLoader keywords). `read` reads other project files (as
/// they were before the edit), for DataLoader subclasses defined there.
pub fn python_edit(file: &str, old: &str, new: &str, read: ReadFile<'_>) -> PythonEdit {
    let (Ok(old_tree), Ok(new_tree)) = (parse_python(old, file), parse_python(new, file)) else {
        return PythonEdit::NotAtSource;
    };
    // An entry of a dict spread into a DataLoader call.
    if let Some(edit) = spread::spread_edit(file, old, new, read) {
        return edit;
    }
    let loaders: Vec<String> = project_loaders(file, old, &old_tree, read)
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    let before = role_calls(&old_tree, old, file, &loaders);
    let after = role_calls(&new_tree, new, file, &loaders);
    // Calls of an imported subclass are DataLoader calls only here: the
    // DataLoader-only check would count their keywords as code.
    let imported_loader_calls = before
        .iter()
        .filter(|(_, r)| *r == CallRole::DataLoader)
        .count()
        > scan_tree(file, old, &old_tree).len();
    if before.len() != after.len() || before.iter().zip(&after).any(|(b, a)| b.1 != a.1) {
        return PythonEdit::NotAtSource;
    }
    let ranges = |calls: &[(Node<'_>, CallRole)]| -> Vec<std::ops::Range<usize>> {
        calls.iter().map(|(c, _)| c.byte_range()).collect()
    };
    if outside(old, &ranges(&before)) != outside(new, &ranges(&after)) {
        return PythonEdit::NotAtSource;
    }
    // Which knobs each flag feeds, from the file before the edit.
    let no_files = |_: &str| None;
    let sites = knob_sites(file, old, &no_files).unwrap_or_default();
    let feeds = |dest: &str| -> Vec<String> {
        let mut k: Vec<String> = Vec::new();
        for s in &sites {
            for o in &s.knobs {
                if matches!(&o.source, Source::Flag { dest: d, .. } if d == dest)
                    && !k.contains(&o.knob)
                {
                    k.push(o.knob.clone());
                }
            }
        }
        k
    };
    let mut changes = Vec::new();
    let mut at_source = imported_loader_calls;
    for ((b, role), (a, _)) in before.iter().zip(&after) {
        let old_site = call_site(file, old, *b);
        let new_site = call_site(file, new, *a);
        let delta = super::compare::site_delta(0, &old_site, &new_site);
        if delta.changes.is_empty()
            && old_site.callee == new_site.callee
            && other_args(*b, old) == other_args(*a, new)
        {
            continue;
        }
        let line = line_col(new, a.start_byte()).0;
        if old_site.callee != new_site.callee || other_args(*b, old) != other_args(*a, new) {
            if *role == CallRole::DataLoader {
                // The DataLoader-only check reports this as it always has.
                return PythonEdit::NotAtSource;
            }
            return PythonEdit::Rejected(format!(
                "{file}:{line}: `{}` changed beyond one keyword",
                old_site.callee
            ));
        }
        for c in delta.changes {
            let (from, to) = match &c {
                super::KwargChange::Added { value, .. } => ("(default)".to_string(), value.clone()),
                super::KwargChange::Changed { from, to, .. } => (from.clone(), to.clone()),
                super::KwargChange::Removed { from, .. } => (from.clone(), "(default)".to_string()),
            };
            match role {
                CallRole::DataLoader => changes.push(SourceChange {
                    file: file.to_string(),
                    knob: c.name().to_string(),
                    change: c.describe(),
                    line,
                }),
                CallRole::Flag => {
                    at_source = true;
                    let flag = flag_of(*b, old);
                    let option = flag.as_ref().map(|f| f.option.clone()).unwrap_or_default();
                    if c.name() != "default" {
                        return PythonEdit::Rejected(format!(
                            "{file}:{line}: `{}=` of the {option} flag changed; only a flag's default= that feeds a DataLoader knob may change",
                            c.name()
                        ));
                    }
                    let dest = flag.as_ref().map(|f| f.dest.clone()).unwrap_or_default();
                    let knobs = feeds(&dest);
                    // The user's command passes the flag: its default is not used.
                    if let Some(passed) = passed_on_command_line(file, old, read, &dest, &sites) {
                        return PythonEdit::Rejected(format!(
                            "{file}:{line}: the default of {option} is not used: {passed}; change the value there"
                        ));
                    }
                    if let Some(why) = sites
                        .iter()
                        .flat_map(|s| &s.knobs)
                        .filter(|o| matches!(&o.source, Source::Flag { dest: d, .. } if *d == dest))
                        .find_map(|o| o.refuses(&to))
                    {
                        return PythonEdit::Rejected(format!(
                            "{file}:{line}: the new default of {option}: {why}"
                        ));
                    }
                    if knobs.len() != 1 {
                        return PythonEdit::Rejected(if knobs.is_empty() {
                            format!("{file}:{line}: the default of {option} changed, but {option} feeds no DataLoader knob")
                        } else {
                            format!(
                                "{file}:{line}: {option} feeds several knobs ({})",
                                knobs.join(", ")
                            )
                        });
                    }
                    changes.push(SourceChange {
                        file: file.to_string(),
                        knob: knobs[0].clone(),
                        change: format!(
                            "{} {from} → {to} ({option} default, {file}:{line})",
                            knobs[0]
                        ),
                        line,
                    });
                }
                CallRole::TrainingArguments => {
                    at_source = true;
                    let Some(knob) = LoaderKnob::from_hf_argument(c.name()) else {
                        let fields: Vec<String> =
                            LoaderKnob::settings().map(|k| k.hf_argument()).collect();
                        return PythonEdit::Rejected(format!(
                            "{file}:{line}: `{}` of {} is not a DataLoader knob (only {})",
                            c.name(),
                            old_site.callee,
                            fields.join(", ")
                        ));
                    };
                    changes.push(SourceChange {
                        file: file.to_string(),
                        knob: knob.to_string(),
                        change: format!(
                            "{knob} {from} → {to} ({} {}, {file}:{line})",
                            old_site.callee,
                            c.name()
                        ),
                        line,
                    });
                }
            }
        }
    }
    if at_source {
        PythonEdit::Changes(changes)
    } else {
        PythonEdit::NotAtSource
    }
}

/// Where the user's command passes the flag `dest` (as seen with the
/// workspace file), when a knob fed by that flag's default (`flag_sites`,
/// read without it) is set by the command instead.
fn passed_on_command_line(
    file: &str,
    src: &str,
    read: ReadFile<'_>,
    dest: &str,
    flag_sites: &[KnobSite],
) -> Option<String> {
    read(command_line::RUN_FILE)?;
    let with_command = knob_sites(file, src, read).ok()?;
    for (a, b) in flag_sites.iter().zip(&with_command) {
        for (x, y) in a.knobs.iter().zip(&b.knobs) {
            if matches!(&x.source, Source::Flag { dest: d, .. } if d == dest) {
                if let Source::Command {
                    flag, value, line, ..
                } = &y.source
                {
                    return Some(format!(
                        "[bench] run passes {flag} {} ({}:{line})",
                        value.as_deref().unwrap_or(""),
                        command_line::RUN_FILE
                    ));
                }
            }
        }
    }
    None
}

/// Why a turn's edit of a file that holds knob values is more than those
/// values ([`config_edit`], [`python_value_edit`]). One type for both:
/// verification records either as the turn's rejection, and they are the
/// same judgement on two kinds of file. `file` is the edited file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueEditError {
    #[error("{file} is not a config file")]
    NotAConfigFile { file: String },
    #[error("{file} changed, but no DataLoader knob reads its value from it")]
    NoKnobReadsIt { file: String },
    #[error("{file}: the key `{key}` that feeds {knob} is gone")]
    KeyGone {
        file: String,
        key: String,
        knob: String,
    },
    #[error("{file}: `{key}` cannot be located")]
    KeyNotLocated { file: String, key: String },
    #[error("{file} changed, but no value that feeds a DataLoader knob did")]
    NoKnobValueChanged { file: String },
    #[error("{file} changed beyond the values that feed DataLoader knobs")]
    BeyondKnobValues { file: String },
    /// `knobs`: the knobs it feeds, `, `-joined.
    #[error("{file}: `{name}`, which feeds {knobs}, is gone or defined more than once")]
    DefinitionGone {
        file: String,
        name: String,
        knobs: String,
    },
    /// `text`: what the definition became.
    #[error("{file}:{line}: `{name}` is no longer a literal ({text}); a turn writes a value")]
    NotALiteral {
        file: String,
        line: usize,
        name: String,
        text: String,
    },
    #[error("{file}:{line}: `{name}` feeds several knobs ({knobs})")]
    FeedsSeveralKnobs {
        file: String,
        line: usize,
        name: String,
        knobs: String,
    },
    /// `changes`: the knob changes it did make, `; `-joined.
    #[error("{file} changed beyond the values that feed DataLoader knobs ({changes})")]
    BeyondTheseValues { file: String, changes: String },
}

/// The knob changes an edit of config file `file` makes, given the knob
/// sites of the project's scripts (before the edit). Any other difference
/// is an error with the reason.
pub fn config_edit(
    file: &str,
    old: &str,
    new: &str,
    sites: &[KnobSite],
) -> Result<Vec<SourceChange>, ValueEditError> {
    let file_ = || file.to_string();
    let kind =
        ConfigKind::of(file).ok_or_else(|| ValueEditError::NotAConfigFile { file: file_() })?;
    let mut keys: Vec<(String, String)> = Vec::new();
    for s in sites {
        for o in &s.knobs {
            if let Source::Config { file: f, key, .. } = &o.source {
                if f == file && !keys.iter().any(|(k, _)| k == key) {
                    keys.push((key.clone(), o.knob.clone()));
                }
            }
        }
    }
    if keys.is_empty() {
        return Err(ValueEditError::NoKnobReadsIt { file: file_() });
    }
    let mut changes = Vec::new();
    let mut rebuilt = old.to_string();
    for (key, knob) in &keys {
        let path: Vec<String> = key.split('.').map(str::to_string).collect();
        let (Some(b), Some(a)) = (
            config_file::lookup(kind, old, &path),
            config_file::lookup(kind, new, &path),
        ) else {
            return Err(ValueEditError::KeyGone {
                file: file_(),
                key: key.clone(),
                knob: knob.clone(),
            });
        };
        if a.text == b.text {
            continue;
        }
        rebuilt = match config_file::lookup(kind, &rebuilt, &path) {
            Some(r) => format!(
                "{}{}{}",
                &rebuilt[..r.range.start],
                a.text,
                &rebuilt[r.range.end..]
            ),
            None => {
                return Err(ValueEditError::KeyNotLocated {
                    file: file_(),
                    key: key.clone(),
                })
            }
        };
        changes.push(SourceChange {
            file: file.to_string(),
            knob: knob.clone(),
            change: format!("{knob} {} → {} ({key}, {file}:{})", b.text, a.text, a.line),
            line: a.line,
        });
    }
    if rebuilt != new {
        return Err(if changes.is_empty() {
            ValueEditError::NoKnobValueChanged { file: file_() }
        } else {
            ValueEditError::BeyondKnobValues { file: file_() }
        });
    }
    Ok(changes)
}

/// The knob changes an edit of Python file `file` makes at literals of the
/// project's own modules that feed knobs (`Config.num_workers = 0` in
/// `config.py`: [`super::py_defs`]), given the knob sites of the project's
/// scripts before the edit. `None`: no such literal changed (the file's
/// other checks decide); an error when one did and the edit is more than
/// those values.
pub fn python_value_edit(
    file: &str,
    old: &str,
    new: &str,
    sites: &[KnobSite],
) -> Option<Result<Vec<SourceChange>, ValueEditError>> {
    let mut targets: Vec<(Target, String, Vec<String>)> = Vec::new();
    for s in sites {
        for o in &s.knobs {
            if let Source::Python {
                file: f,
                target,
                name,
                ..
            } = &o.source
            {
                if f != file {
                    continue;
                }
                match targets.iter_mut().find(|(t, _, _)| t == target) {
                    Some((_, _, knobs)) if !knobs.contains(&o.knob) => knobs.push(o.knob.clone()),
                    Some(_) => {}
                    None => targets.push((target.clone(), name.clone(), vec![o.knob.clone()])),
                }
            }
        }
    }
    let mut changes = Vec::new();
    let mut rebuilt = old.to_string();
    for (target, name, knobs) in &targets {
        let before = py_defs::lookup(old, target)?;
        let Some(after) = py_defs::lookup(new, target) else {
            return Some(Err(ValueEditError::DefinitionGone {
                file: file.to_string(),
                name: name.clone(),
                knobs: knobs.join(", "),
            }));
        };
        if after.text == before.text {
            continue;
        }
        if !after.literal {
            return Some(Err(ValueEditError::NotALiteral {
                file: file.to_string(),
                line: after.line,
                name: name.clone(),
                text: after.text,
            }));
        }
        if knobs.len() != 1 {
            return Some(Err(ValueEditError::FeedsSeveralKnobs {
                file: file.to_string(),
                line: after.line,
                name: name.clone(),
                knobs: knobs.join(", "),
            }));
        }
        let at = py_defs::lookup(&rebuilt, target)?;
        rebuilt = format!(
            "{}{}{}",
            &rebuilt[..at.range.start],
            after.text,
            &rebuilt[at.range.end..]
        );
        changes.push(SourceChange {
            file: file.to_string(),
            knob: knobs[0].clone(),
            change: format!(
                "{} {} → {} ({name}, {file}:{})",
                knobs[0], before.text, after.text, after.line
            ),
            line: after.line,
        });
    }
    if changes.is_empty() {
        return None;
    }
    if rebuilt != new {
        return Some(Err(ValueEditError::BeyondTheseValues {
            file: file.to_string(),
            changes: changes
                .iter()
                .map(|c| c.change.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        }));
    }
    Some(Ok(changes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A project held in memory: path → text.
    pub(super) fn project(files: &[(&str, &str)]) -> HashMap<String, String> {
        files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    pub(super) fn sites_in(files: &HashMap<String, String>, file: &str) -> Vec<KnobSite> {
        let read = |p: &str| files.get(p).cloned();
        knob_sites(file, &files[file], &read).unwrap()
    }

    fn set(
        files: &HashMap<String, String>,
        site: &KnobSite,
        knob: &str,
        v: &str,
    ) -> (String, String) {
        let read = |p: &str| files.get(p).cloned();
        set_knob(site, knob, v, &read).unwrap()
    }

    /// Lines that differ between two texts of equal line count.
    fn changed_lines(a: &str, b: &str) -> Vec<(String, String)> {
        assert_eq!(a.lines().count(), b.lines().count(), "{b}");
        a.lines()
            .zip(b.lines())
            .filter(|(x, y)| x != y)
            .map(|(x, y)| (x.to_string(), y.to_string()))
            .collect()
    }

    const ARGPARSE: &str = r#"import argparse

import torch
from torch.utils.data import DataLoader


def get_args():
    parser = argparse.ArgumentParser(description="train a classifier")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("-j", "--workers", type=int, default=0, help="data loading workers")
    parser.add_argument("--pin", dest="pin_memory", action="store_true")
    return parser.parse_args()


def main():
    args = get_args()
    train_loader = DataLoader(
        train_ds,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=args.pin_memory,
    )
    val_loader = DataLoader(val_ds, batch_size=64, num_workers=2)
    for epoch in range(args.epochs):
        train_one_epoch(train_loader)
        evaluate(val_loader)


if __name__ == "__main__":
    main()
"#;

    #[test]
    fn argparse_flags_feed_the_training_loader() {
        let p = project(&[("train.py", ARGPARSE)]);
        let sites = sites_in(&p, "train.py");
        assert_eq!(sites.len(), 2);
        let train = &sites[0];
        assert_eq!((train.line, train.end_line), (18, 24));
        assert!(train.matches("train.py", 22) && !train.matches("train.py", 25));
        assert_eq!(train.function.as_deref(), Some("main"));
        let nw = train.origin("num_workers").unwrap();
        assert_eq!(
            nw.source,
            Source::Flag {
                file: "train.py".into(),
                line: 11,
                flag: "--workers".into(),
                dest: "workers".into(),
                default: Some("0".into()),
                call_start: ARGPARSE.find("parser.add_argument(\"-j\"").unwrap(),
            }
        );
        assert_eq!(nw.current().as_deref(), Some("0"));
        assert_eq!(
            nw.describe(&train.at()),
            "num_workers = args.workers → --workers default=0 (train.py:11)"
        );
        let pin = train.origin("pin_memory").unwrap();
        // A store_true switch defaults to False.
        assert!(
            matches!(&pin.source, Source::Flag { flag, default: Some(d), .. } if flag == "--pin" && d == "False")
        );
        let pf = train.origin("prefetch_factor").unwrap();
        assert_eq!(
            (pf.source.clone(), pf.expr.clone()),
            (Source::Keyword, None)
        );
        assert!(pf
            .describe("train.py:18")
            .contains("the default; set prefetch_factor= at train.py:18"));
        // The validation loader keeps its literal.
        let val = sites[1].origin("num_workers").unwrap();
        assert_eq!(
            (val.source.clone(), val.current()),
            (Source::Keyword, Some("2".into()))
        );
        assert_eq!(sites[0].effective_call().kwarg("num_workers"), Some("0"));
    }

    #[test]
    fn argparse_edit_is_the_default_and_is_one_change() {
        let p = project(&[("train.py", ARGPARSE)]);
        let sites = sites_in(&p, "train.py");
        let (file, out) = set(&p, &sites[0], "num_workers", "4");
        assert_eq!(file, "train.py");
        assert_eq!(
            changed_lines(ARGPARSE, &out),
            vec![(
                r#"    parser.add_argument("-j", "--workers", type=int, default=0, help="data loading workers")"#.to_string(),
                r#"    parser.add_argument("-j", "--workers", type=int, default=4, help="data loading workers")"#.to_string()
            )]
        );
        assert_eq!(
            python_edit("train.py", ARGPARSE, &out, &|_: &str| None),
            PythonEdit::Changes(vec![SourceChange {
                file: "train.py".into(),
                knob: "num_workers".into(),
                change: "num_workers 0 → 4 (--workers default, train.py:11)".into(),
                line: 11,
            }])
        );
        // A flag without default= gets one.
        let (_, out) = set(&p, &sites[0], "pin_memory", "True");
        assert!(
            out.contains(
                r#"add_argument("--pin", dest="pin_memory", action="store_true", default=True)"#
            ),
            "{out}"
        );
        match python_edit("train.py", ARGPARSE, &out, &|_: &str| None) {
            PythonEdit::Changes(c) => {
                assert_eq!(c.len(), 1);
                assert_eq!(
                    c[0].change,
                    "pin_memory (default) → True (--pin default, train.py:12)"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn argparse_edits_that_are_not_one_knob_are_told_apart() {
        // The default of a flag that feeds no knob.
        let epochs = ARGPARSE.replace("type=int, default=3", "type=int, default=1");
        match python_edit("train.py", ARGPARSE, &epochs, &|_: &str| None) {
            PythonEdit::Rejected(r) => {
                assert!(r.contains("--epochs feeds no DataLoader knob"), "{r}")
            }
            other => panic!("{other:?}"),
        }
        // Another keyword of a knob's flag.
        let help = ARGPARSE.replace("help=\"data loading workers\"", "help=\"workers\"");
        assert!(
            matches!(python_edit("train.py", ARGPARSE, &help, &|_: &str| None), PythonEdit::Rejected(r) if r.contains("`help=`"))
        );
        // The flag default and the validation loader: two changes.
        let two = ARGPARSE
            .replace("default=0, help", "default=4, help")
            .replace(
                "batch_size=64, num_workers=2",
                "batch_size=64, num_workers=4",
            );
        match python_edit("train.py", ARGPARSE, &two, &|_: &str| None) {
            PythonEdit::Changes(c) => assert_eq!(c.len(), 2),
            other => panic!("{other:?}"),
        }
        // A code edit next to the default is not a source edit at all.
        let code = ARGPARSE
            .replace("default=0, help", "default=4, help")
            .replace("evaluate(val_loader)", "pass");
        assert_eq!(
            python_edit("train.py", ARGPARSE, &code, &|_: &str| None),
            PythonEdit::NotAtSource
        );
        // Only a DataLoader keyword: left to the DataLoader-only check.
        let kw = ARGPARSE.replace(
            "batch_size=64, num_workers=2",
            "batch_size=64, num_workers=4",
        );
        assert_eq!(
            python_edit("train.py", ARGPARSE, &kw, &|_: &str| None),
            PythonEdit::NotAtSource
        );
    }

    #[test]
    fn parse_known_args_and_main_parameters_count_as_parsed_arguments() {
        let src = "import argparse\nfrom torch.utils.data import DataLoader\np = argparse.ArgumentParser()\np.add_argument('--num-workers', type=int, default=1)\n\ndef run(opt):\n    return DataLoader(ds, num_workers=opt.num_workers)\n\nif __name__ == '__main__':\n    opt, _ = p.parse_known_args()\n    run(opt)\n";
        let p = project(&[("t.py", src)]);
        let s = &sites_in(&p, "t.py")[0];
        assert!(matches!(&s.origin("num_workers").unwrap().source,
            Source::Flag { flag, default: Some(d), line: 4, .. } if flag == "--num-workers" && d == "1"));
    }

    #[test]
    fn computed_values_are_not_editable_and_say_why() {
        let src = "import os\nfrom torch.utils.data import DataLoader\nn = 4\nDataLoader(ds, num_workers=os.cpu_count() // 2, pin_memory=n > 2, prefetch_factor=n)\n";
        let p = project(&[("t.py", src)]);
        let s = &sites_in(&p, "t.py")[0];
        let nw = s.origin("num_workers").unwrap();
        assert!(!nw.editable());
        assert!(
            nw.describe("t.py:4")
                .contains("not editable (`os.cpu_count() // 2` is computed"),
            "{}",
            nw.describe("t.py:4")
        );
        assert!(!s.origin("prefetch_factor").unwrap().editable());
        let read = |f: &str| p.get(f).cloned();
        let err = set_knob(s, "num_workers", "4", &read)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not editable") && err.contains("write the value as a literal"),
            "{err}"
        );
    }

    /// A module-level script (no main()) that wraps its flag: the DCGAN
    /// pattern.
    const MODULE_LEVEL: &str = r#"import argparse
import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=0, help="number of data loading workers")
parser.add_argument("--batchSize", type=int, default=64)
opt = parser.parse_args()

dataset = make_dataset()
dataloader = DataLoader(dataset, batch_size=opt.batchSize, shuffle=True, num_workers=int(opt.workers))
for epoch in range(3):
    for i, data in enumerate(dataloader, 0):
        step(data)
"#;

    #[test]
    fn a_wrapped_flag_at_module_level_is_followed_to_its_default() {
        let p = project(&[("dcgan.py", MODULE_LEVEL)]);
        let s = &sites_in(&p, "dcgan.py")[0];
        assert_eq!(s.function, None);
        let nw = s.origin("num_workers").unwrap();
        assert!(nw.editable());
        assert!(
            matches!(&nw.source, Source::Flag { flag, line: 6, default: Some(d), .. } if flag == "--workers" && d == "0")
        );
        assert_eq!(
            nw.wrapper.as_ref().map(|w| w.written.as_str()),
            Some("int(·)")
        );
        assert_eq!(
            nw.describe(&s.at()),
            "num_workers = int(opt.workers) → --workers default=0 (dcgan.py:6)"
        );
        assert_eq!(nw.current().as_deref(), Some("0"));
        // The edit is the flag's default, one line.
        let (file, out) = set(&p, s, "num_workers", "8");
        assert_eq!(file, "dcgan.py");
        assert_eq!(
            changed_lines(MODULE_LEVEL, &out),
            vec![(
                r#"parser.add_argument("--workers", type=int, default=0, help="number of data loading workers")"#.to_string(),
                r#"parser.add_argument("--workers", type=int, default=8, help="number of data loading workers")"#.to_string()
            )]
        );
        // Verification sees one knob change at its source.
        let read = |_: &str| None;
        match python_edit("dcgan.py", MODULE_LEVEL, &out, &read) {
            PythonEdit::Changes(c) => {
                assert_eq!(c.len(), 1);
                assert_eq!(
                    c[0].change,
                    "num_workers 0 → 8 (--workers default, dcgan.py:6)"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_floor_wrapper_says_what_the_knob_gets_and_refuses_what_it_changes() {
        let src = MODULE_LEVEL.replace(
            "num_workers=int(opt.workers)",
            "num_workers=max(1, opt.workers)",
        );
        let p = project(&[("dcgan.py", &src)]);
        let s = &sites_in(&p, "dcgan.py")[0];
        let nw = s.origin("num_workers").unwrap();
        // The loader gets 1 from a default of 0.
        assert_eq!(nw.current().as_deref(), Some("1"));
        assert_eq!(
            nw.describe(&s.at()),
            "num_workers = max(1, opt.workers) → --workers default=0 (dcgan.py:6), so num_workers is 1"
        );
        assert_eq!(s.effective_call().kwarg("num_workers"), Some("1"));
        // 4 reaches the loader as it is; 0 would not.
        let (_, out) = set(&p, s, "num_workers", "4");
        assert!(out.contains("default=4, help"));
        let read = |f: &str| p.get(f).cloned();
        let err = set_knob(s, "num_workers", "0", &read)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`max(1, ·)` turns 0 into 1"), "{err}");
        // An agent that writes such a default anyway is told why.
        let wrote_zero_from_four = out.replace("default=4, help", "default=0, help");
        match python_edit("dcgan.py", &out, &wrote_zero_from_four, &|_: &str| None) {
            PythonEdit::Rejected(why) => assert!(why.contains("turns 0 into 1"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_runtime_cap_and_a_fallback_are_followed() {
        let capped = MODULE_LEVEL.replace(
            "num_workers=int(opt.workers)",
            "num_workers=min(opt.workers, os.cpu_count())",
        );
        let p = project(&[("t.py", &capped)]);
        let nw = sites_in(&p, "t.py")[0]
            .origin("num_workers")
            .unwrap()
            .clone();
        assert!(nw.editable());
        assert!(
            nw.describe("t.py:11")
                .ends_with(", at most os.cpu_count() at run time"),
            "{}",
            nw.describe("t.py:11")
        );
        assert_eq!(nw.refuses("16"), None);
        let fallback = MODULE_LEVEL.replace(
            "num_workers=int(opt.workers)",
            "num_workers=opt.workers or 0",
        );
        let p = project(&[("t.py", &fallback)]);
        let nw = sites_in(&p, "t.py")[0]
            .origin("num_workers")
            .unwrap()
            .clone();
        assert!(matches!(&nw.source, Source::Flag { flag, .. } if flag == "--workers"));
        assert_eq!(nw.current().as_deref(), Some("0"));
    }

    #[test]
    fn a_local_bound_to_a_flag_is_followed_and_a_local_literal_is_not() {
        let src = "import argparse\nfrom torch.utils.data import DataLoader\n\ndef main():\n    p = argparse.ArgumentParser()\n    p.add_argument('-j', '--workers', type=int, default=2)\n    args = p.parse_args()\n    workers = args.workers\n    nw = int(workers)\n    n = 4\n    return DataLoader(ds, num_workers=nw, prefetch_factor=n)\n";
        let p = project(&[("t.py", src)]);
        let s = &sites_in(&p, "t.py")[0];
        let nw = s.origin("num_workers").unwrap();
        assert!(
            matches!(&nw.source, Source::Flag { flag, default: Some(d), .. } if flag == "--workers" && d == "2"),
            "{nw:?}"
        );
        assert_eq!(
            nw.wrapper.as_ref().map(|w| w.written.as_str()),
            Some("int(·)")
        );
        // A literal in a local is no keyword of the call.
        assert!(!s.origin("prefetch_factor").unwrap().editable());
        // A name bound twice is not followed.
        let twice = src.replace("    n = 4\n", "    n = 4\n    nw = 3\n");
        let p = project(&[("t.py", &twice)]);
        assert!(!sites_in(&p, "t.py")[0]
            .origin("num_workers")
            .unwrap()
            .editable());
    }

    fn workspace(run: &str) -> String {
        format!("[project]\nroot = \".\"\neditable = [\"train.py\"]\n\n[bench]\nrun = {run}\nsteps = 40\n")
    }

    #[test]
    fn a_flag_the_command_passes_is_changed_in_the_command() {
        let ws = workspace(r#"["python", "train.py", "-j", "0", "--epochs", "3"]"#);
        let p = project(&[("train.py", ARGPARSE), ("tuneloop.toml", &ws)]);
        let s = &sites_in(&p, "train.py")[0];
        let nw = s.origin("num_workers").unwrap();
        assert!(
            matches!(&nw.source, Source::Command { flag, value: Some(v), line: 6, index: Some(3), .. } if flag == "-j" && v == "0"),
            "{nw:?}"
        );
        assert_eq!(
            nw.describe(&s.at()),
            "num_workers = args.workers → -j 0 in [bench] run (tuneloop.toml:6), over --workers default=0 (train.py:11)"
        );
        // pin_memory's flag is not passed: still its default.
        assert!(matches!(
            &s.origin("pin_memory").unwrap().source,
            Source::Flag { .. }
        ));
        let (file, out) = set(&p, s, "num_workers", "8");
        assert_eq!(file, "tuneloop.toml");
        assert_eq!(out, ws.replace(r#""-j", "0""#, r#""-j", "8""#));
        // Verification: that one word is the one knob change.
        let changes = command_line::command_edit(&ws, &out, std::slice::from_ref(s)).unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(
            changes[0].change,
            "num_workers 0 → 8 (-j in [bench] run, tuneloop.toml:6)"
        );
        // Anything else in the file, or another word, is no knob change.
        let other = out.replace("steps = 40", "steps = 41");
        assert!(
            command_line::command_edit(&ws, &other, std::slice::from_ref(s))
                .unwrap_err()
                .to_string()
                .contains("beyond the [bench] run command")
        );
        let epochs = ws.replace(r#""3"]"#, r#""4"]"#);
        assert!(
            command_line::command_edit(&ws, &epochs, std::slice::from_ref(s))
                .unwrap_err()
                .to_string()
                .contains("passes no DataLoader knob")
        );
        // Editing the unused default is refused with where the value is.
        let default_edit = ARGPARSE.replace(
            "type=int, default=0, help=\"data",
            "type=int, default=4, help=\"data",
        );
        let read = |f: &str| p.get(f).cloned();
        match python_edit("train.py", ARGPARSE, &default_edit, &read) {
            PythonEdit::Rejected(why) => {
                assert!(
                    why.contains("not used: [bench] run passes -j 0 (tuneloop.toml:6)"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn joined_forms_and_switches_on_the_command_line() {
        let ws = workspace(r#"["python", "train.py", "--workers=0", "--pin"]"#);
        let p = project(&[("train.py", ARGPARSE), ("tuneloop.toml", &ws)]);
        let s = &sites_in(&p, "train.py")[0];
        let (_, out) = set(&p, s, "num_workers", "4");
        assert!(
            out.contains(r#"run = ["python", "train.py", "--workers=4", "--pin"]"#),
            "{out}"
        );
        // A switch passes no value to change.
        let pin = s.origin("pin_memory").unwrap();
        assert!(!pin.editable());
        assert!(
            pin.describe(&s.at()).contains("passes the switch --pin"),
            "{}",
            pin.describe(&s.at())
        );
        // Another script's command, or no command: the defaults as before.
        let other = workspace(r#"["python", "other.py", "-j", "0"]"#);
        let p = project(&[("train.py", ARGPARSE), ("tuneloop.toml", &other)]);
        assert!(matches!(
            &sites_in(&p, "train.py")[0]
                .origin("num_workers")
                .unwrap()
                .source,
            Source::Flag { .. }
        ));
    }

    #[test]
    fn a_wrapped_flag_on_the_command_line_keeps_its_wrapper() {
        let src = MODULE_LEVEL.replace(
            "num_workers=int(opt.workers)",
            "num_workers=max(1, opt.workers)",
        );
        let ws = workspace(r#"["python", "dcgan.py", "--workers", "2"]"#);
        let p = project(&[("dcgan.py", &src), ("tuneloop.toml", &ws)]);
        let s = &sites_in(&p, "dcgan.py")[0];
        let nw = s.origin("num_workers").unwrap();
        assert!(matches!(&nw.source, Source::Command { flag, .. } if flag == "--workers"));
        assert_eq!(nw.current().as_deref(), Some("2"));
        let read = |f: &str| p.get(f).cloned();
        assert!(set_knob(s, "num_workers", "0", &read)
            .unwrap_err()
            .to_string()
            .contains("turns 0 into 1"));
        let zero = ws.replace(r#""2"]"#, r#""0"]"#);
        assert!(
            command_line::command_edit(&ws, &zero, std::slice::from_ref(s))
                .unwrap_err()
                .to_string()
                .contains("turns 0 into 1")
        );
    }

    const YAML_SCRIPT: &str = r#"import yaml
from torch.utils.data import DataLoader

with open("configs/train.yaml") as f:
    cfg = yaml.safe_load(f)

loader = DataLoader(
    dataset,
    batch_size=cfg["data"]["batch_size"],
    num_workers=cfg["data"]["num_workers"],
    pin_memory=cfg["data"]["pin_memory"],
)
"#;
    const YAML: &str = "# experiment 12\ndata:\n  root: /data/items\n  batch_size: 64\n  num_workers: 0   # bump on the cluster\n  pin_memory: false\ntrain:\n  epochs: 2\n";

    #[test]
    fn yaml_config_values_feed_the_knobs() {
        let p = project(&[("train.py", YAML_SCRIPT), ("configs/train.yaml", YAML)]);
        let s = &sites_in(&p, "train.py")[0];
        let nw = s.origin("num_workers").unwrap();
        assert_eq!(
            nw.source,
            Source::Config {
                file: "configs/train.yaml".into(),
                line: 5,
                key: "data.num_workers".into(),
                value: "0".into()
            }
        );
        assert_eq!(
            nw.describe(&s.at()),
            r#"num_workers = cfg["data"]["num_workers"] → data.num_workers: 0 (configs/train.yaml:5)"#
        );
        assert_eq!(
            s.origin("pin_memory").unwrap().current().as_deref(),
            Some("False")
        );
        let (file, out) = set(&p, s, "num_workers", "8");
        assert_eq!(file, "configs/train.yaml");
        assert_eq!(
            out,
            YAML.replace("num_workers: 0   #", "num_workers: 8   #")
        );
        let sites = sites_in(&p, "train.py");
        let c = config_edit("configs/train.yaml", YAML, &out, &sites).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].change,
            "num_workers 0 → 8 (data.num_workers, configs/train.yaml:5)"
        );
        let (_, pinned) = set(&p, s, "pin_memory", "True");
        assert!(pinned.contains("  pin_memory: true\n"));
        assert_eq!(
            knob_files_in(&p, "train.py"),
            vec!["configs/train.yaml".to_string()]
        );
    }

    fn knob_files_in(p: &HashMap<String, String>, script: &str) -> Vec<String> {
        let d = tempfile::tempdir().unwrap();
        for (path, text) in p {
            let f = d.path().join(path);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        }
        knob_files(d.path(), script, Some(script))
    }

    #[test]
    fn yaml_edits_other_than_one_knob_value_are_rejected() {
        let p = project(&[("train.py", YAML_SCRIPT), ("configs/train.yaml", YAML)]);
        let sites = sites_in(&p, "train.py");
        let check = |new: &str| config_edit("configs/train.yaml", YAML, new, &sites);
        // batch_size is read by the loader but is no knob; epochs by nothing.
        assert!(check(&YAML.replace("batch_size: 64", "batch_size: 32"))
            .unwrap_err()
            .to_string()
            .contains("no value that feeds"));
        assert!(check(&YAML.replace("epochs: 2", "epochs: 1")).is_err());
        assert!(check(&YAML.replace("# bump", "# raise")).is_err());
        let both = YAML
            .replace("num_workers: 0", "num_workers: 4")
            .replace("epochs: 2", "epochs: 1");
        assert!(check(&both).unwrap_err().to_string().contains("beyond"));
        let two = YAML
            .replace("num_workers: 0", "num_workers: 4")
            .replace("pin_memory: false", "pin_memory: true");
        assert_eq!(check(&two).unwrap().len(), 2);
        // A config no knob reads.
        assert!(config_edit("other.yaml", "a: 1\n", "a: 2\n", &sites)
            .unwrap_err()
            .to_string()
            .contains("no DataLoader knob"));
    }

    #[test]
    fn attribute_style_config_and_json_next_to_the_script() {
        let script = "from omegaconf import OmegaConf\nfrom torch.utils.data import DataLoader\ncfg = OmegaConf.load('loader.json')\ndl = DataLoader(ds, num_workers=cfg.loader.workers, persistent_workers=cfg.loader.keep)\n";
        let json = "{\n  \"loader\": {\"workers\": 2, \"keep\": false}\n}\n";
        let p = project(&[("src/train.py", script), ("src/loader.json", json)]);
        let s = &sites_in(&p, "src/train.py")[0];
        assert!(matches!(&s.origin("num_workers").unwrap().source,
            Source::Config { file, key, value, .. } if file == "src/loader.json" && key == "loader.workers" && value == "2"));
        let (_, out) = set(&p, s, "persistent_workers", "True");
        assert_eq!(out, json.replace("\"keep\": false", "\"keep\": true"));
    }

    const HF: &str = r#"from transformers import AutoConfig, AutoModelForSequenceClassification, Trainer, TrainingArguments

model = AutoModelForSequenceClassification.from_config(AutoConfig.for_model("bert", num_hidden_layers=1))
training_args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=16,
    num_train_epochs=1,
    report_to=[],
)
trainer = Trainer(model=model, args=training_args, train_dataset=train_ds)
trainer.train()
"#;

    #[test]
    fn training_arguments_keywords_are_the_knobs() {
        let p = project(&[("train.py", HF)]);
        let sites = sites_in(&p, "train.py");
        assert_eq!(sites.len(), 1);
        let s = &sites[0];
        assert_eq!(
            (s.kind, s.line, s.callee.as_str()),
            (SiteKind::TrainingArguments, 4, "TrainingArguments")
        );
        let nw = s.origin("num_workers").unwrap();
        assert_eq!(
            (nw.keyword.as_str(), nw.expr.clone()),
            ("dataloader_num_workers", None)
        );
        assert_eq!(
            nw.describe(&s.at()),
            "num_workers not set: the default; set dataloader_num_workers= at train.py:4"
        );
        let (_, out) = set(&p, s, "num_workers", "4");
        assert_eq!(
            out,
            HF.replace(
                "    report_to=[],\n",
                "    report_to=[],\n    dataloader_num_workers=4,\n"
            )
        );
        assert_eq!(
            python_edit("train.py", HF, &out, &|_: &str| None),
            PythonEdit::Changes(vec![SourceChange {
                file: "train.py".into(),
                knob: "num_workers".into(),
                change: "num_workers (default) → 4 (TrainingArguments dataloader_num_workers, train.py:4)".into(),
                line: 4,
            }])
        );
        // Changing it again: the keyword's value.
        let p2 = project(&[("train.py", &out)]);
        let s2 = &sites_in(&p2, "train.py")[0];
        assert_eq!(
            s2.origin("num_workers").unwrap().current().as_deref(),
            Some("4")
        );
        let (_, again) = set(&p2, s2, "num_workers", "8");
        assert!(again.contains("dataloader_num_workers=8,"));
        // Other TrainingArguments keywords are not knobs.
        let lr = HF.replace(
            "num_train_epochs=1,",
            "num_train_epochs=1,\n    learning_rate=1e-3,",
        );
        assert!(
            matches!(python_edit("train.py", HF, &lr, &|_: &str| None), PythonEdit::Rejected(r) if r.contains("`learning_rate`"))
        );
        let bs = HF.replace(
            "per_device_train_batch_size=16",
            "per_device_train_batch_size=32",
        );
        assert!(matches!(
            python_edit("train.py", HF, &bs, &|_: &str| None),
            PythonEdit::Rejected(_)
        ));
    }

    #[test]
    fn training_arguments_keyword_from_a_flag_and_seq2seq() {
        let src = "import argparse\nfrom transformers import Seq2SeqTrainingArguments\nparser = argparse.ArgumentParser()\nparser.add_argument('--workers', type=int, default=0)\nargs = parser.parse_args()\nta = Seq2SeqTrainingArguments('out', dataloader_num_workers=args.workers, dataloader_pin_memory=False)\n";
        let p = project(&[("t.py", src)]);
        let s = &sites_in(&p, "t.py")[0];
        assert_eq!(s.kind, SiteKind::TrainingArguments);
        assert!(
            matches!(&s.origin("num_workers").unwrap().source, Source::Flag { flag, .. } if flag == "--workers")
        );
        assert_eq!(
            s.origin("pin_memory").unwrap().current().as_deref(),
            Some("False")
        );
        let (_, out) = set(&p, s, "num_workers", "2");
        assert!(out.contains("default=2)"));
        assert!(
            matches!(python_edit("t.py", src, &out, &|_: &str| None), PythonEdit::Changes(c) if c.len() == 1 && c[0].knob == "num_workers")
        );
    }

    #[test]
    fn subclass_pyg_and_lightning_loaders_are_knob_sites() {
        let sub = "from torch.utils.data import DataLoader\n\nclass FastLoader(DataLoader):\n    def __init__(self, ds, **kw):\n        super().__init__(ds, **kw)\n\nloader = FastLoader(ds, batch_size=8, num_workers=0)\n";
        let p = project(&[("t.py", sub)]);
        let s = sites_in(&p, "t.py");
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].callee.as_str(), s[0].line), ("FastLoader", 7));
        let (_, out) = set(&p, &s[0], "num_workers", "4");
        assert!(out.contains("FastLoader(ds, batch_size=8, num_workers=4)"));

        let pyg = "from torch_geometric.loader import DataLoader\nimport torch_geometric\nfrom torch_geometric.loader import NeighborLoader\na = DataLoader(dataset, batch_size=32, shuffle=True)\nb = torch_geometric.loader.DataLoader(dataset)\nc = NeighborLoader(data, num_neighbors=[10], num_workers=2)\n";
        let p = project(&[("gnn.py", pyg)]);
        let s = sites_in(&p, "gnn.py");
        assert_eq!(s.iter().map(|x| x.line).collect::<Vec<_>>(), vec![4, 5, 6]);
        assert_eq!(
            s[2].origin("num_workers").unwrap().current().as_deref(),
            Some("2")
        );

        let lit = "import lightning as L\nfrom torch.utils.data import DataLoader\n\nclass Data(L.LightningDataModule):\n    def __init__(self, num_workers=0):\n        super().__init__()\n        self.save_hyperparameters()\n\n    def train_dataloader(self):\n        return DataLoader(self.train_ds, batch_size=32, num_workers=4)\n\n    def val_dataloader(self):\n        return DataLoader(self.val_ds, batch_size=32, num_workers=self.hparams.num_workers)\n";
        let p = project(&[("lit.py", lit)]);
        let s = sites_in(&p, "lit.py");
        assert_eq!(s[0].function.as_deref(), Some("train_dataloader"));
        assert_eq!(s[0].origin("num_workers").unwrap().source, Source::Keyword);
        assert!(!s[1].origin("num_workers").unwrap().editable());
    }

    const LOADERS: &str = "from torch.utils.data import DataLoader\n\n\nclass FastLoader(DataLoader):\n    \"\"\"Pins and shuffles by default.\"\"\"\n\n\nclass Helper:\n    pass\n";

    #[test]
    fn a_subclass_imported_from_a_project_file_is_a_knob_site() {
        let script = "from loaders import FastLoader, Helper\nfrom mylib import OtherLoader\nloader = FastLoader(ds, batch_size=8, num_workers=0)\nh = Helper(ds, num_workers=1)\no = OtherLoader(ds, num_workers=1)\n";
        let p = project(&[("train.py", script), ("loaders.py", LOADERS)]);
        let sites = sites_in(&p, "train.py");
        assert_eq!(sites.len(), 1, "{sites:?}");
        assert_eq!((sites[0].callee.as_str(), sites[0].line), ("FastLoader", 3));
        let (file, out) = set(&p, &sites[0], "num_workers", "4");
        assert_eq!(file, "train.py");
        assert_eq!(out, script.replace("num_workers=0)", "num_workers=4)"));
        // Verification knows the call through the module it reads.
        let read = |f: &str| p.get(f).cloned();
        match python_edit("train.py", script, &out, &read) {
            PythonEdit::Changes(c) => {
                assert_eq!(c.len(), 1);
                assert_eq!(
                    (c[0].knob.as_str(), c[0].change.as_str()),
                    ("num_workers", "num_workers 0 → 4")
                );
            }
            other => panic!("{other:?}"),
        }
        let two = script.replace("batch_size=8, num_workers=0", "batch_size=4, num_workers=0");
        assert!(
            matches!(python_edit("train.py", script, &two, &read), PythonEdit::Changes(c) if c[0].knob == "batch_size")
        );
        assert_eq!(
            knob_files_in(&p, "train.py"),
            vec!["loaders.py".to_string()]
        );
        // A relative import inside a package.
        let pkg = project(&[
            (
                "pkg/train.py",
                "from .loaders import FastLoader as FL\nFL(ds, num_workers=2)\n",
            ),
            ("pkg/loaders.py", LOADERS),
        ]);
        let s = sites_in(&pkg, "pkg/train.py");
        assert_eq!(s.len(), 1);
        assert_eq!(
            s[0].origin("num_workers").unwrap().current().as_deref(),
            Some("2")
        );
    }

    #[test]
    fn a_hydra_config_feeds_the_knobs() {
        let script = "import hydra\nfrom torch.utils.data import DataLoader\n\n@hydra.main(version_base=None, config_path=\"conf\", config_name=\"train\")\ndef main(cfg):\n    loader = DataLoader(ds, num_workers=cfg.loader.num_workers)\n";
        let p = project(&[
            ("train.py", script),
            ("conf/train.yaml", "loader:\n  num_workers: 1\n"),
        ]);
        let s = &sites_in(&p, "train.py")[0];
        assert!(matches!(&s.origin("num_workers").unwrap().source,
            Source::Config { file, key, .. } if file == "conf/train.yaml" && key == "loader.num_workers"));
    }

    /// The refusals' words are the reasons the builtin agent and
    /// verification record: pinned as they were written when they were
    /// strings, and the wrapped error kept as the source.
    #[test]
    fn refusals_keep_their_recorded_words() {
        use std::error::Error as _;
        let s = |t: &str| t.to_string();
        let config = SetKnobError::Config {
            file: s("c.toml"),
            source: ConfigValueError::TomlNull,
        };
        assert_eq!(
            config.to_string(),
            "cannot edit c.toml: TOML has no null: remove the key instead of setting None"
        );
        assert!(config.source().is_some());
        let keyword = SetKnobError::Keyword {
            at: s("t.py:3"),
            source: RewriteError::EmptyValue {
                name: s("num_workers"),
            },
        };
        assert_eq!(
            keyword.to_string(),
            "cannot edit t.py:3: the value for `num_workers` is empty"
        );
        assert!(keyword.source().is_some());
        let gone = DefinitionGone {
            file: s("config.py"),
            name: s("cfg.num_workers"),
        };
        for (e, words) in [
            (SetKnobError::NotAKnob { knob: s("epochs") }, "`epochs` is not a DataLoader knob"),
            (SetKnobError::Unreadable { file: s("a.py") }, "cannot read a.py"),
            (
                SetKnobError::WrapperRefuses { knob: s("num_workers"), at: s("t.py:3"), value: s("0"), why: s("`max(1, ·)` turns 0 into 1") },
                "num_workers at t.py:3 cannot be set to 0: `max(1, ·)` turns 0 into 1; choose a value the wrapper keeps, or write the knob as a literal",
            ),
            (
                SetKnobError::FlagDefault { file: s("t.py"), source: RewriteError::InvalidName(s("1x")) },
                "cannot edit the flag's default in t.py: `1x` is not a valid Python keyword-argument name",
            ),
            (SetKnobError::NotAConfigFile { file: s("a.ini") }, "a.ini is not a config file"),
            (SetKnobError::Python(gone), "config.py no longer defines `cfg.num_workers` once (it changed since it was read)"),
            (
                SetKnobError::CommandWordMoved { file: s("tuneloop.toml"), expected: s("-j2"), word: 4 },
                "[bench] run in tuneloop.toml no longer passes `-j2` as word 4 (it changed since it was read)",
            ),
            (SetKnobError::RunWords(RunWordsError::NoRunArray), "tuneloop.toml has no [bench] run array of strings"),
            (
                SetKnobError::Unresolved { knob: s("num_workers"), at: s("t.py:3"), reason: s("`n` is computed") },
                "num_workers at t.py:3 is not editable: `n` is computed; write the value as a literal, a flag default, a config value or a literal of the project's own modules",
            ),
        ] {
            assert_eq!(e.to_string(), words);
        }
        let f = || s("c.yaml");
        for (e, words) in [
            (ValueEditError::NotAConfigFile { file: f() }, "c.yaml is not a config file"),
            (ValueEditError::NoKnobReadsIt { file: f() }, "c.yaml changed, but no DataLoader knob reads its value from it"),
            (ValueEditError::KeyGone { file: f(), key: s("data.workers"), knob: s("num_workers") }, "c.yaml: the key `data.workers` that feeds num_workers is gone"),
            (ValueEditError::KeyNotLocated { file: f(), key: s("data.workers") }, "c.yaml: `data.workers` cannot be located"),
            (ValueEditError::NoKnobValueChanged { file: f() }, "c.yaml changed, but no value that feeds a DataLoader knob did"),
            (ValueEditError::BeyondKnobValues { file: f() }, "c.yaml changed beyond the values that feed DataLoader knobs"),
            (
                ValueEditError::DefinitionGone { file: s("config.py"), name: s("NW"), knobs: s("num_workers, prefetch_factor") },
                "config.py: `NW`, which feeds num_workers, prefetch_factor, is gone or defined more than once",
            ),
            (
                ValueEditError::NotALiteral { file: s("config.py"), line: 8, name: s("NW"), text: s("os.cpu_count()") },
                "config.py:8: `NW` is no longer a literal (os.cpu_count()); a turn writes a value",
            ),
            (
                ValueEditError::FeedsSeveralKnobs { file: s("config.py"), line: 8, name: s("NW"), knobs: s("num_workers, prefetch_factor") },
                "config.py:8: `NW` feeds several knobs (num_workers, prefetch_factor)",
            ),
            (
                ValueEditError::BeyondTheseValues { file: s("config.py"), changes: s("a; b") },
                "config.py changed beyond the values that feed DataLoader knobs (a; b)",
            ),
        ] {
            assert_eq!(e.to_string(), words);
        }
    }
}

/// Knobs passed through a `**name` spread of a dict literal ([`super::spread`]).
#[cfg(test)]
mod spread_tests {
    use super::*;
    use std::collections::HashMap;

    /// pytorch/examples' MNIST `main.py` (synthetic data): `train_kwargs`
    /// spread into the loader, `num_workers` added under `if use_cuda`.
    const MNIST: &str = include_str!("../../tests/fixtures/mnist/main.py");

    fn sites(file: &str, src: &str) -> Vec<KnobSite> {
        knob_sites(file, src, &|_: &str| None).unwrap()
    }

    fn set(file: &str, src: &str, site: &KnobSite, knob: &str, v: &str) -> String {
        let files: HashMap<String, String> = [(file.to_string(), src.to_string())].into();
        let (f, out) = set_knob(site, knob, v, &|p: &str| files.get(p).cloned()).unwrap();
        assert_eq!(f, file);
        out
    }

    fn line(src: &str, needle: &str) -> usize {
        src.lines().position(|l| l.contains(needle)).unwrap() + 1
    }

    fn edit(file: &str, old: &str, new: &str) -> PythonEdit {
        python_edit(file, old, new, &|_: &str| None)
    }

    #[test]
    fn a_key_absent_everywhere_is_added_to_the_base_literal() {
        let s = sites("main.py", MNIST);
        assert_eq!(s.len(), 2);
        let base = line(MNIST, "train_kwargs = {");
        let update = line(MNIST, "train_kwargs.update(cuda_kwargs)");
        let nw = s[0].origin("num_workers").unwrap();
        assert!(nw.editable());
        assert_eq!(nw.current(), None);
        assert_eq!(
            nw.describe(&s[0].at()),
            format!("num_workers not set: the default; set \"num_workers\" in train_kwargs (main.py:{base}), overridden to 1 under `if use_cuda` by cuda_kwargs (main.py:{update})")
        );
        assert_eq!(
            s[0].origin("prefetch_factor").unwrap().describe(&s[0].at()),
            format!("prefetch_factor not set: the default; set \"prefetch_factor\" in train_kwargs (main.py:{base})")
        );
        // The test loader spreads its own dict.
        assert!(s[1].describe_knobs()[0].contains("in test_kwargs"));

        // Never a keyword next to the spread: the entry goes into the literal.
        let out = set("main.py", MNIST, &s[0], "num_workers", "2");
        assert_eq!(
            out,
            MNIST.replace(
                r#"train_kwargs = {"batch_size": args.batch_size}"#,
                r#"train_kwargs = {"batch_size": args.batch_size, "num_workers": 2}"#
            )
        );
        assert_eq!(
            edit("main.py", MNIST, &out),
            PythonEdit::Changes(vec![SourceChange {
                file: "main.py".into(),
                knob: "num_workers".into(),
                change: format!(
                    "num_workers (default) → 2 (train_kwargs[\"num_workers\"], main.py:{base})"
                ),
                line: base,
            }])
        );
        // Tuned again: the entry is now the source, changed in place.
        let s2 = sites("main.py", &out);
        let nw2 = s2[0].origin("num_workers").unwrap();
        assert_eq!(nw2.current().as_deref(), Some("2"));
        assert!(
            nw2.describe(&s2[0].at()).starts_with(&format!(
                "num_workers = 2 → train_kwargs[\"num_workers\"] (main.py:{base}), overridden to 1"
            )),
            "{}",
            nw2.describe(&s2[0].at())
        );
        let again = set("main.py", &out, &s2[0], "num_workers", "4");
        assert_eq!(
            again,
            out.replace("\"num_workers\": 2}", "\"num_workers\": 4}")
        );
    }

    #[test]
    fn a_key_present_in_the_literal_is_changed_there() {
        let src = "from torch.utils.data import DataLoader\n\ndef make(ds):\n    loader_kwargs = {\n        \"batch_size\": 64,\n        \"num_workers\": 4,  # two per GPU\n    }\n    return DataLoader(ds, shuffle=True, **loader_kwargs)\n";
        let s = sites("t.py", src);
        let nw = s[0].origin("num_workers").unwrap();
        assert_eq!(
            nw.source,
            Source::Spread {
                file: "t.py".into(),
                line: 6,
                dict: "loader_kwargs".into(),
                holder: "loader_kwargs".into(),
                value: Some("4".into()),
                overrides: vec![],
            }
        );
        assert_eq!(
            nw.describe(&s[0].at()),
            "num_workers = 4 → loader_kwargs[\"num_workers\"] (t.py:6)"
        );
        assert_eq!(s[0].effective_call().kwarg("num_workers"), Some("4"));
        let out = set("t.py", src, &s[0], "num_workers", "8");
        assert_eq!(
            out,
            src.replace("\"num_workers\": 4,", "\"num_workers\": 8,")
        );
        assert!(
            matches!(edit("t.py", src, &out), PythonEdit::Changes(c) if c.len() == 1 && c[0].change == "num_workers 4 → 8 (loader_kwargs[\"num_workers\"], t.py:6)" && c[0].line == 6)
        );
        // An absent key: a line of its own, like its neighbours.
        let out = set("t.py", src, &s[0], "pin_memory", "True");
        assert_eq!(
            out,
            src.replace(
                "# two per GPU\n",
                "# two per GPU\n        \"pin_memory\": True,\n"
            )
        );
        assert!(
            matches!(edit("t.py", src, &out), PythonEdit::Changes(c) if c.len() == 1 && c[0].knob == "pin_memory")
        );
    }

    #[test]
    fn an_unconditional_later_write_is_the_source() {
        // `update` of another literal, after an update tuneloop cannot see.
        let src = "from torch.utils.data import DataLoader\nkw = {'batch_size': 8}\nkw.update(load_extra())\nfast = {'num_workers': 2}\nkw.update(fast)\nloader = DataLoader(ds, **kw)\n";
        let s = sites("t.py", src);
        let nw = s[0].origin("num_workers").unwrap();
        assert!(
            matches!(&nw.source, Source::Spread { holder, value: Some(v), line: 4, dict, .. } if holder == "fast" && v == "2" && dict == "kw"),
            "{nw:?}"
        );
        assert_eq!(
            nw.describe(&s[0].at()),
            "num_workers = 2 → fast[\"num_workers\"] (t.py:4)"
        );
        let out = set("t.py", src, &s[0], "num_workers", "6");
        assert_eq!(out, src.replace("{'num_workers': 2}", "{'num_workers': 6}"));
        assert!(
            matches!(edit("t.py", src, &out), PythonEdit::Changes(c) if c[0].change == "num_workers 2 → 6 (fast[\"num_workers\"], t.py:4)")
        );
        // The keys the unknown update may add stay unknown.
        assert!(!s[0].origin("pin_memory").unwrap().editable());
        // A subscript assignment, last: it wins over the literal's entry.
        let src = "from torch.utils.data import DataLoader\nkw = {'num_workers': 0}\nkw['num_workers'] = 3\nloader = DataLoader(ds, **kw)\n";
        let s = sites("t.py", src);
        let nw = s[0].origin("num_workers").unwrap();
        assert_eq!(nw.current().as_deref(), Some("3"));
        assert_eq!(
            nw.describe(&s[0].at()),
            "num_workers = 3 → kw[\"num_workers\"] (t.py:3)"
        );
        let out = set("t.py", src, &s[0], "num_workers", "5");
        assert_eq!(out, src.replace("] = 3", "] = 5"));
        assert!(
            matches!(edit("t.py", src, &out), PythonEdit::Changes(c) if c[0].change == "num_workers 3 → 5 (kw[\"num_workers\"], t.py:3)")
        );
        // The literal's entry is dead: changing it is no knob change.
        let dead = src.replace("{'num_workers': 0}", "{'num_workers': 4}");
        assert!(
            matches!(edit("t.py", src, &dead), PythonEdit::Rejected(r) if r.contains("not where the loader's num_workers is set")),
            "{:?}",
            edit("t.py", src, &dead)
        );
    }

    #[test]
    fn conditional_writes_are_described_as_overrides() {
        let src = "from torch.utils.data import DataLoader\n\ndef main(fast):\n    kw = dict(batch_size=8)\n    if fast:\n        kw['num_workers'] = 4\n    else:\n        kw.update(pin_memory=False)\n    return DataLoader(ds, **kw)\n";
        let s = sites("t.py", src);
        assert_eq!(
            s[0].describe_knobs()[..2],
            [
                "num_workers not set: the default; set \"num_workers\" in kw (t.py:4), overridden to 4 under `if fast` by `kw['num_workers'] = 4` (t.py:6)".to_string(),
                "pin_memory not set: the default; set \"pin_memory\" in kw (t.py:4), overridden to False under `else` by `kw.update(pin_memory=False)` (t.py:8)".to_string(),
            ]
        );
        // `dict(...)`: a keyword added to it.
        let out = set("t.py", src, &s[0], "num_workers", "2");
        assert_eq!(
            out,
            src.replace("dict(batch_size=8)", "dict(batch_size=8, num_workers=2)")
        );
        assert!(
            matches!(edit("t.py", src, &out), PythonEdit::Changes(c) if c[0].change == "num_workers (default) → 2 (kw[\"num_workers\"], t.py:4)")
        );
        let s2 = sites("t.py", &out);
        let again = set("t.py", &out, &s2[0], "num_workers", "6");
        assert!(
            again.contains("dict(batch_size=8, num_workers=6)"),
            "{again}"
        );
    }

    #[test]
    fn an_update_whose_content_is_unknown_leaves_the_knob_unresolved() {
        let src = "from torch.utils.data import DataLoader\n\ndef main(extra):\n    kw = {\"batch_size\": 8}\n    if extra:\n        kw.update(extra)\n    return DataLoader(ds, **kw)\n";
        let s = sites("t.py", src);
        let nw = s[0].origin("num_workers").unwrap();
        assert!(!nw.editable());
        let d = nw.describe(&s[0].at());
        assert_eq!(
            d,
            "num_workers not set: not editable (`kw.update(extra)` (t.py:6) may set \"num_workers\" in `kw` from a dict tuneloop cannot see; write \"num_workers\" into the `kw` literal (t.py:4), or make what it adds a dict literal of the same function)"
        );
        let read = |_: &str| Some(src.to_string());
        let err = set_knob(&s[0], "num_workers", "2", &read)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not editable") && err.contains("cannot see"),
            "{err}"
        );
        // A key set after the unknown update is known again.
        let fixed = src.replace(
            "    return DataLoader",
            "    kw[\"num_workers\"] = 1\n    return DataLoader",
        );
        let s = sites("t.py", &fixed);
        assert_eq!(
            s[0].origin("num_workers").unwrap().current().as_deref(),
            Some("1")
        );
        // A dict built by a call: not a literal whose keys can be seen.
        let built = src.replace("{\"batch_size\": 8}", "vars(opts)");
        let nw = sites("t.py", &built)[0]
            .origin("num_workers")
            .unwrap()
            .clone();
        assert!(
            matches!(&nw.source, Source::Unresolved { reason } if reason.contains("`kw` is `vars(opts)` (t.py:4), not a dict literal")),
            "{nw:?}"
        );
    }

    #[test]
    fn module_level_calls_use_module_level_dicts_only() {
        let src = "from torch.utils.data import DataLoader\nkw = {'batch_size': 8, 'pin_memory': True}\nloader = DataLoader(ds, **kw)\n\ndef other(ds, **opts):\n    return DataLoader(ds, **kw)\n";
        let s = sites("t.py", src);
        assert_eq!(
            s[0].origin("pin_memory").unwrap().describe(&s[0].at()),
            "pin_memory = True → kw[\"pin_memory\"] (t.py:2)"
        );
        let out = set("t.py", src, &s[0], "num_workers", "2");
        assert_eq!(
            out,
            src.replace(
                "'pin_memory': True}",
                "'pin_memory': True, 'num_workers': 2}"
            )
        );
        // Inside a function, a module-level dict is not followed: the
        // call's own keyword, as without a spread.
        assert_eq!(s[1].origin("num_workers").unwrap().source, Source::Keyword);
    }

    #[test]
    fn a_turn_that_changes_the_dict_otherwise_is_no_knob_change() {
        let base = line(MNIST, "train_kwargs = {");
        // batch_size in the spread dict: not a knob.
        let bs = MNIST.replace(
            r#"train_kwargs = {"batch_size": args.batch_size}"#,
            r#"train_kwargs = {"batch_size": 32}"#,
        );
        match edit("main.py", MNIST, &bs) {
            PythonEdit::Rejected(r) => assert_eq!(
                r,
                format!("main.py:{base}: \"batch_size\" in `train_kwargs` changed; only the DataLoader knobs (num_workers, pin_memory, prefetch_factor, persistent_workers) may change")
            ),
            other => panic!("{other:?}"),
        }
        // Claude's own layout of the same knob entry is that knob's change.
        let own = MNIST.replace(
            r#"train_kwargs = {"batch_size": args.batch_size}"#,
            "train_kwargs = {\n        'batch_size': args.batch_size,\n        'num_workers': 3,\n    }",
        );
        assert!(
            matches!(edit("main.py", MNIST, &own), PythonEdit::Changes(c) if c.len() == 1 && c[0].change.starts_with("num_workers (default) → 3 (train_kwargs"))
        );
        // A knob entry and other code: not one knob change; the
        // DataLoader-only check rejects the code edit.
        let two = MNIST
            .replace(
                r#"{"batch_size": args.batch_size}"#,
                r#"{"batch_size": args.batch_size, "num_workers": 2}"#,
            )
            .replace("lr=args.lr", "lr=0.1");
        assert_eq!(edit("main.py", MNIST, &two), PythonEdit::NotAtSource);
        // A keyword next to the spread the dict may carry: it would crash on CUDA.
        let kw = MNIST.replace(
            "(dataset1, **train_kwargs)",
            "(dataset1, num_workers=2, **train_kwargs)",
        );
        match edit("main.py", MNIST, &kw) {
            PythonEdit::Rejected(r) => assert_eq!(
                r,
                format!("main.py:{}: num_workers= added next to `**train_kwargs`, whose dict may carry \"num_workers\" too (the call would get it twice and fail); set \"num_workers\" in train_kwargs (main.py:{base}) instead", line(MNIST, "train_loader ="))
            ),
            other => panic!("{other:?}"),
        }
        // One the dict never carries is the call's keyword, as before.
        let pf = MNIST.replace(
            "(dataset1, **train_kwargs)",
            "(dataset1, prefetch_factor=4, **train_kwargs)",
        );
        assert_eq!(edit("main.py", MNIST, &pf), PythonEdit::NotAtSource);
        // The CUDA-only dict is no source: left to the other checks.
        let cuda = MNIST.replace("\"num_workers\": 1, \"pin", "\"num_workers\": 4, \"pin");
        assert_eq!(edit("main.py", MNIST, &cuda), PythonEdit::NotAtSource);
    }
}

#[cfg(test)]
mod py_defs_tests;

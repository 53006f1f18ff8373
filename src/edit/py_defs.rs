//! Knob values defined in the project's own Python modules: the literal a
//! `cfg.num_workers`, `CFG["num_workers"]` or imported `NUM_WORKERS` reads.
//!
//! Many real projects keep their settings in a `config.py` next to the
//! training script rather than in flags or a YAML file:
//!
//! * a class-body field default: `num_workers: int = 0` in a `@dataclass`
//!   (also `= field(default=0)`), or a plain class attribute
//!   `num_workers = 0`; a nested chain `cfg.data.num_workers` is narrowed
//!   to the class a `data` field names (`data: DataConfig = field(...)`);
//! * an entry of a module-level dict literal: `CFG = {"num_workers": 0}` or
//!   `CFG = dict(num_workers=0)`, read as `CFG["num_workers"]` (nested dicts
//!   by their key path);
//! * a module-level constant imported from a local module:
//!   `from config import NUM_WORKERS` (or `import config` then
//!   `config.NUM_WORKERS`).
//!
//! The modules searched are the project's local Python files: the calling
//! file, the workspace's entry script, and what they import (transitively)
//! that resolves to a file under the project root. A value is resolved only
//! when exactly one definition matches; several matches, or a write that
//! would override the default at run time (`Config(num_workers=…)`,
//! `cfg.num_workers = …`, `CFG["num_workers"] = …`), leave it unresolved
//! with the candidates or the write named. Editing writes only the
//! literal's bytes ([`Target`] finds it again in any version of the file,
//! so a turn's edit is checked the same way).

use std::ops::Range;
use std::path::Path;

use tree_sitter::Node;

use super::scan::{argument_nodes, line_col, named_children, parse_python, string_value, text};
use super::types::{ReadFile, Target};

/// At most this many local modules are read while following a value.
const MAX_MODULES: usize = 64;

/// A definition's value in one text of its file.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// 1-based line of the value.
    pub line: usize,
    /// Byte range of the value's text.
    pub range: Range<usize>,
    /// The value as written.
    pub text: String,
    /// Whether it is a plain literal (only those are knob sources).
    pub literal: bool,
}

/// One definition in a project file.
#[derive(Clone, Debug, PartialEq)]
pub struct Definition {
    pub file: String,
    pub target: Target,
    pub found: Found,
}

/// What following a value into the project's modules gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Resolution {
    /// Exactly one literal defines it.
    Found(Definition),
    /// Definitions were found, but none can be edited alone: the reason.
    Unresolved(String),
    /// No definition in the project's modules.
    None,
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

fn found(node: Node<'_>, src: &str) -> Found {
    Found {
        line: line_col(src, node.start_byte()).0,
        range: node.byte_range(),
        text: text(node, src).to_string(),
        literal: is_literal(node, src),
    }
}

/// The last name of a callee: `field` of `dataclasses.field`.
fn callee(call: Node<'_>, src: &str) -> String {
    let Some(f) = call.child_by_field_name("function") else {
        return String::new();
    };
    match f.kind() {
        "attribute" => f
            .child_by_field_name("attribute")
            .map(|a| text(a, src).to_string())
            .unwrap_or_default(),
        _ => text(f, src).to_string(),
    }
}

fn keyword_arg<'t>(call: Node<'t>, src: &str, name: &str) -> Option<Node<'t>> {
    let args = call.child_by_field_name("arguments")?;
    argument_nodes(args).into_iter().find_map(|a| {
        (a.kind() == "keyword_argument"
            && a.child_by_field_name("name").map(|n| text(n, src)) == Some(name))
        .then(|| a.child_by_field_name("value"))
        .flatten()
    })
}

/// The statements of a block or module that are simple assignments:
/// (target name, annotation, value).
fn assignments<'t>(body: Node<'t>, src: &str) -> Vec<(String, Option<Node<'t>>, Node<'t>)> {
    let mut out = Vec::new();
    for stmt in named_children(body) {
        if stmt.kind() != "expression_statement" {
            continue;
        }
        for a in named_children(stmt) {
            if a.kind() != "assignment" {
                continue;
            }
            let (Some(left), Some(right)) = (
                a.child_by_field_name("left"),
                a.child_by_field_name("right"),
            ) else {
                continue;
            };
            if left.kind() == "identifier" {
                out.push((
                    text(left, src).to_string(),
                    a.child_by_field_name("type"),
                    right,
                ));
            }
        }
    }
    out
}

/// The class definitions at the top level of a module (decorated or not).
fn classes(root: Node<'_>) -> Vec<Node<'_>> {
    named_children(root)
        .into_iter()
        .filter_map(|n| match n.kind() {
            "class_definition" => Some(n),
            "decorated_definition" => n
                .child_by_field_name("definition")
                .filter(|d| d.kind() == "class_definition"),
            _ => None,
        })
        .collect()
}

/// The value node a class field holds: the literal of `= 0` or of
/// `= field(default=0)`.
fn field_value<'t>(value: Node<'t>, src: &str) -> Node<'t> {
    if value.kind() == "call" && callee(value, src) == "field" {
        if let Some(d) = keyword_arg(value, src, "default") {
            return d;
        }
    }
    value
}

/// The class a field names: `data: DataConfig`, `= field(default_factory=DataConfig)`,
/// `= DataConfig()`.
fn field_class(ann: Option<Node<'_>>, value: Node<'_>, src: &str) -> Option<String> {
    let simple = |s: &str| {
        let s = s.trim().trim_matches(|c| c == '"' || c == '\'');
        let last = s.rsplit('.').next().unwrap_or(s);
        (!last.is_empty() && last.chars().all(|c| c.is_alphanumeric() || c == '_'))
            .then(|| last.to_string())
    };
    if value.kind() == "call" {
        if callee(value, src) == "field" {
            if let Some(f) = keyword_arg(value, src, "default_factory") {
                return simple(text(f, src));
            }
        } else if let Some(f) = value.child_by_field_name("function") {
            return simple(text(f, src));
        }
    }
    ann.and_then(|a| simple(text(a, src)))
}

/// The one module-level assignment of `name` in `root` (`None` when there
/// is none, or more than one).
fn module_assignment<'t>(root: Node<'t>, src: &str, name: &str) -> Option<Node<'t>> {
    let mut found = assignments(root, src)
        .into_iter()
        .filter(|(n, _, _)| n == name)
        .map(|(_, _, v)| v);
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// The entry at `keys` of a dict literal (`{…}` or `dict(…)`).
fn dict_entry<'t>(dict: Node<'t>, src: &str, keys: &[String]) -> Option<Node<'t>> {
    let (key, rest) = keys.split_first()?;
    let value = match dict.kind() {
        "dictionary" => named_children(dict).into_iter().find_map(|p| {
            (p.kind() == "pair"
                && p.child_by_field_name("key")
                    .and_then(|k| string_value(k, src))
                    .as_deref()
                    == Some(key.as_str()))
            .then(|| p.child_by_field_name("value"))
            .flatten()
        })?,
        "call" if callee(dict, src) == "dict" => keyword_arg(dict, src, key)?,
        _ => return None,
    };
    if rest.is_empty() {
        Some(value)
    } else {
        dict_entry(value, src, rest)
    }
}

/// Every (key path, value) of a dict literal, nested dicts included.
fn dict_entries<'t>(dict: Node<'t>, src: &str, prefix: &[String]) -> Vec<(Vec<String>, Node<'t>)> {
    let pairs: Vec<(String, Node<'t>)> = match dict.kind() {
        "dictionary" => named_children(dict)
            .into_iter()
            .filter(|p| p.kind() == "pair")
            .filter_map(|p| {
                Some((
                    string_value(p.child_by_field_name("key")?, src)?,
                    p.child_by_field_name("value")?,
                ))
            })
            .collect(),
        "call" if callee(dict, src) == "dict" => dict
            .child_by_field_name("arguments")
            .map(argument_nodes)
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a.kind() == "keyword_argument")
            .filter_map(|a| {
                Some((
                    text(a.child_by_field_name("name")?, src).to_string(),
                    a.child_by_field_name("value")?,
                ))
            })
            .collect(),
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    for (k, v) in pairs {
        let mut path = prefix.to_vec();
        path.push(k);
        out.push((path.clone(), v));
        out.extend(dict_entries(v, src, &path));
    }
    out
}

/// The value `target` has in `src` (any text of its file), if the file
/// still defines it exactly once.
pub fn lookup(src: &str, target: &Target) -> Option<Found> {
    let tree = parse_python(src, "").ok()?;
    let root = tree.root_node();
    let node = match target {
        Target::Constant { name } => module_assignment(root, src, name)?,
        Target::DictEntry { var, keys } => {
            dict_entry(module_assignment(root, src, var)?, src, keys)?
        }
        Target::ClassField { class, field } => {
            let mut defs = classes(root).into_iter().filter(|c| {
                c.child_by_field_name("name").map(|n| text(n, src)) == Some(class.as_str())
            });
            let c = defs.next()?;
            if defs.next().is_some() {
                return None;
            }
            let mut values = assignments(c.child_by_field_name("body")?, src)
                .into_iter()
                .filter(|(n, _, _)| n == field)
                .map(|(_, _, v)| field_value(v, src));
            let v = values.next()?;
            if values.next().is_some() {
                return None;
            }
            v
        }
    };
    Some(found(node, src))
}

/// [`set_value`]'s one refusal: `file` no longer holds exactly one
/// definition of the target read earlier. A struct, not an enum: there is
/// no other way for the write to fail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file} no longer defines `{name}` once (it changed since it was read)")]
pub struct DefinitionGone {
    pub file: String,
    /// The target as the script reads it (`cfg.num_workers`).
    pub name: String,
}

/// `src` with the value of `target` set to `value` (Python source).
pub fn set_value(
    file: &str,
    src: &str,
    target: &Target,
    value: &str,
) -> Result<String, DefinitionGone> {
    let f = lookup(src, target).ok_or_else(|| DefinitionGone {
        file: file.to_string(),
        name: target.name().to_string(),
    })?;
    Ok(format!(
        "{}{value}{}",
        &src[..f.range.start],
        &src[f.range.end..]
    ))
}

// ---------------------------------------------------------------------------
// The project's local modules
// ---------------------------------------------------------------------------

/// Normalise `a/./b/../c` to `a/c` (relative, `/`-separated).
pub(crate) fn normalise(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// The project file a module named as `written` in `importer` resolves to:
/// `.a.b` → `<dir>/a/b.py`, `a.b` → `a/b.py` from the project root or the
/// importer's folder (or a package's `__init__.py`).
pub fn module_file(importer: &str, written: &str, read: ReadFile<'_>) -> Option<String> {
    let dir = Path::new(importer)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dots = written.len() - written.trim_start_matches('.').len();
    let rest = written.trim_start_matches('.').replace('.', "/");
    let bases: Vec<String> = if dots > 0 {
        let mut base = dir.clone();
        for _ in 1..dots {
            base = format!("{base}/..");
        }
        vec![base]
    } else {
        vec![String::new(), dir]
    };
    for base in bases {
        let candidates = if rest.is_empty() {
            vec![format!("{base}/__init__.py")]
        } else {
            vec![
                format!("{base}/{rest}.py"),
                format!("{base}/{rest}/__init__.py"),
            ]
        };
        for c in candidates {
            let c = normalise(&c);
            if c != normalise(importer) && read(&c).is_some() {
                return Some(c);
            }
        }
    }
    None
}

/// What a file imports from local modules: (name bound here, module file,
/// name in that module; `None` when the name is the module itself).
fn local_imports(
    file: &str,
    root: Node<'_>,
    src: &str,
    read: ReadFile<'_>,
) -> Vec<(String, String, Option<String>)> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "import_from_statement" => {
                let Some(module) = n.child_by_field_name("module_name") else {
                    continue;
                };
                let written: String = text(module, src).split_whitespace().collect();
                let from = module_file(file, &written, read);
                let mut cursor = n.walk();
                for name in n.children_by_field_name("name", &mut cursor) {
                    let (orig, bound) = match name.kind() {
                        "aliased_import" => (
                            name.child_by_field_name("name"),
                            name.child_by_field_name("alias"),
                        ),
                        _ => (Some(name), Some(name)),
                    };
                    let (Some(orig), Some(bound)) = (orig, bound) else {
                        continue;
                    };
                    let orig = text(orig, src).to_string();
                    let bound = text(bound, src).to_string();
                    // `from pkg import config`: a submodule.
                    let sep = if written.ends_with('.') { "" } else { "." };
                    if let Some(sub) = module_file(file, &format!("{written}{sep}{orig}"), read) {
                        out.push((bound, sub, None));
                    } else if let Some(m) = &from {
                        out.push((bound, m.clone(), Some(orig)));
                    }
                }
            }
            "import_statement" => {
                for name in named_children(n) {
                    let (dotted, bound) = match name.kind() {
                        "aliased_import" => (
                            name.child_by_field_name("name"),
                            name.child_by_field_name("alias"),
                        ),
                        _ => (Some(name), None),
                    };
                    let Some(dotted) = dotted else { continue };
                    let written = text(dotted, src).to_string();
                    // `import a.b` binds `a`: only a plain or aliased module is followed.
                    let bound = match bound {
                        Some(b) => text(b, src).to_string(),
                        None if !written.contains('.') => written.clone(),
                        None => continue,
                    };
                    if let Some(m) = module_file(file, &written, read) {
                        out.push((bound, m, None));
                    }
                }
            }
            _ => stack.extend(named_children(n)),
        }
    }
    out
}

/// The project's local Python files reachable from `roots` through their
/// imports (the roots included), with their text.
pub fn local_modules(roots: &[(String, String)], read: ReadFile<'_>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut queue: Vec<(String, String)> = roots.to_vec();
    while let Some((f, src)) = queue.pop() {
        if out.len() >= MAX_MODULES || out.iter().any(|(g, _)| *g == f) {
            continue;
        }
        if let Ok(tree) = parse_python(&src, &f) {
            for (_, m, _) in local_imports(&f, tree.root_node(), &src, read) {
                if !out.iter().any(|(g, _)| *g == m) && !queue.iter().any(|(g, _)| *g == m) {
                    if let Some(t) = read(&m) {
                        queue.insert(0, (m, t));
                    }
                }
            }
        }
        out.push((f, src));
    }
    out
}

// ---------------------------------------------------------------------------
// Resolving a value
// ---------------------------------------------------------------------------

/// A definition that matches, with how much of the chain it matched.
struct Candidate {
    def: Definition,
    score: usize,
}

/// Class fields named `field`, in every top-level class of `modules`.
fn class_fields(modules: &[(String, String)], field: &str) -> Vec<Definition> {
    let mut out = Vec::new();
    for (file, src) in modules {
        let Ok(tree) = parse_python(src, file) else {
            continue;
        };
        for c in classes(tree.root_node()) {
            let (Some(name), Some(body)) =
                (c.child_by_field_name("name"), c.child_by_field_name("body"))
            else {
                continue;
            };
            let class = text(name, src).to_string();
            for (n, _, v) in assignments(body, src) {
                if n == field {
                    out.push(Definition {
                        file: file.clone(),
                        target: Target::ClassField {
                            class: class.clone(),
                            field: field.to_string(),
                        },
                        found: found(field_value(v, src), src),
                    });
                }
            }
        }
    }
    out
}

/// The classes the fields named `field` hold (`data: DataConfig`).
fn classes_of_field(modules: &[(String, String)], field: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (file, src) in modules {
        let Ok(tree) = parse_python(src, file) else {
            continue;
        };
        for c in classes(tree.root_node()) {
            let Some(body) = c.child_by_field_name("body") else {
                continue;
            };
            for (n, ann, v) in assignments(body, src) {
                if n == field {
                    out.extend(field_class(ann, v, src));
                }
            }
        }
    }
    out
}

/// Module-level dict entries whose key path ends the chain `rest`.
fn dict_candidates(modules: &[(String, String)], parts: &[String]) -> Vec<Candidate> {
    let rest = &parts[1..];
    let mut out = Vec::new();
    for (file, src) in modules {
        let Ok(tree) = parse_python(src, file) else {
            continue;
        };
        let root = tree.root_node();
        for (var, _, value) in assignments(root, src) {
            if module_assignment(root, src, &var).is_none() {
                continue;
            }
            for (keys, v) in dict_entries(value, src, &[]) {
                if !rest.ends_with(&keys) {
                    continue;
                }
                // `CFG["num_workers"]` read through the dict's own name counts more.
                let score = keys.len() + usize::from(parts[0] == var && rest == keys.as_slice());
                out.push(Candidate {
                    def: Definition {
                        file: file.clone(),
                        target: Target::DictEntry {
                            var: var.clone(),
                            keys,
                        },
                        found: found(v, src),
                    },
                    score,
                });
            }
        }
    }
    out
}

/// Writes in `modules` that set the value at run time, over its default.
fn overrides(modules: &[(String, String)], target: &Target) -> Vec<String> {
    let mut out = Vec::new();
    for (file, src) in modules {
        let Ok(tree) = parse_python(src, file) else {
            continue;
        };
        let mut stack = vec![tree.root_node()];
        while let Some(n) = stack.pop() {
            stack.extend(named_children(n));
            let at = || format!("{file}:{}", line_col(src, n.start_byte()).0);
            match (n.kind(), target) {
                ("call", Target::ClassField { class, field })
                    if callee(n, src) == *class && keyword_arg(n, src, field).is_some() =>
                {
                    out.push(format!("`{class}({field}=…)` ({})", at()));
                }
                ("assignment" | "augmented_assignment", _) => {
                    let Some(left) = n.child_by_field_name("left") else {
                        continue;
                    };
                    let hit = match (left.kind(), target) {
                        ("attribute", Target::ClassField { field, .. }) => {
                            left.child_by_field_name("attribute").map(|a| text(a, src))
                                == Some(field.as_str())
                                // `self.x = x` of another class is another object.
                                && (left
                                    .child_by_field_name("object")
                                    .map(|o| text(o, src))
                                    != Some("self")
                                    || enclosing_definition(n, src, "class_definition").as_deref()
                                        == match target {
                                            Target::ClassField { class, .. } => Some(class.as_str()),
                                            _ => None,
                                        })
                        }
                        ("subscript", Target::DictEntry { keys, .. }) => {
                            left.child_by_field_name("subscript")
                                .and_then(|k| string_value(k, src))
                                .as_ref()
                                == keys.last()
                        }
                        _ => false,
                    };
                    if hit {
                        out.push(format!("`{}` ({})", text(n, src).trim(), at()));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The name of the nearest `kind` (`"class_definition"`,
/// `"function_definition"`) around `node`.
pub(crate) fn enclosing_definition(node: Node<'_>, src: &str, kind: &str) -> Option<String> {
    let mut n = node.parent();
    while let Some(p) = n {
        if p.kind() == kind {
            return p
                .child_by_field_name("name")
                .map(|x| text(x, src).to_string());
        }
        n = p.parent();
    }
    None
}

/// Follow the value `parts` (`["cfg", "data", "num_workers"]`, or one name)
/// read in `file` into the project's local modules (`file` and `roots` with
/// what they import). `written` is the expression as written, for reasons.
pub fn resolve(
    file: &str,
    src: &str,
    parts: &[String],
    written: &str,
    roots: &[String],
    read: ReadFile<'_>,
) -> Resolution {
    let Ok(tree) = parse_python(src, file) else {
        return Resolution::None;
    };
    let imports = local_imports(file, tree.root_node(), src, read);
    let mut start = vec![(file.to_string(), src.to_string())];
    for r in roots {
        if r != file {
            if let Some(t) = read(r) {
                start.push((r.clone(), t));
            }
        }
    }
    let modules = local_modules(&start, read);
    let module = |f: &str| modules.iter().find(|(g, _)| g == f).map(|(_, t)| t.clone());
    let mut candidates: Vec<Candidate> = Vec::new();
    // A name imported from a local module, or an attribute of one.
    let imported = imports.iter().find(|(b, _, _)| *b == parts[0]);
    match (imported, parts.len()) {
        (Some((_, m, Some(orig))), 1) => {
            if let Some(t) = module(m).or_else(|| read(m)) {
                let target = Target::Constant { name: orig.clone() };
                if let Some(f) = lookup(&t, &target) {
                    candidates.push(Candidate {
                        def: Definition {
                            file: m.clone(),
                            target,
                            found: f,
                        },
                        score: 1,
                    });
                }
            }
        }
        (Some((_, m, None)), n) if n >= 2 => {
            if let Some(t) = module(m).or_else(|| read(m)) {
                let targets = [
                    Target::Constant {
                        name: parts[1].clone(),
                    },
                    Target::DictEntry {
                        var: parts[1].clone(),
                        keys: parts[2..].to_vec(),
                    },
                ];
                for target in targets {
                    let fits = match &target {
                        Target::Constant { .. } => n == 2,
                        _ => n > 2,
                    };
                    if let Some(f) = lookup(&t, &target).filter(|_| fits) {
                        candidates.push(Candidate {
                            def: Definition {
                                file: m.clone(),
                                target,
                                found: f,
                            },
                            score: n,
                        });
                    }
                }
            }
        }
        _ => {}
    }
    if candidates.is_empty() && parts.len() >= 2 {
        let field = parts.last().expect("two parts");
        let mut fields: Vec<Candidate> = class_fields(&modules, field)
            .into_iter()
            .map(|def| Candidate { def, score: 1 })
            .collect();
        // `cfg.data.num_workers`: the class the `data` field holds.
        if parts.len() >= 3 {
            let holders = classes_of_field(&modules, &parts[parts.len() - 2]);
            for c in &mut fields {
                if matches!(&c.def.target, Target::ClassField { class, .. } if holders.contains(class))
                {
                    c.score = 2;
                }
            }
        }
        candidates.extend(fields);
        candidates.extend(dict_candidates(&modules, parts));
    }
    let Some(best) = candidates.iter().map(|c| c.score).max() else {
        return Resolution::None;
    };
    let top: Vec<&Candidate> = candidates.iter().filter(|c| c.score == best).collect();
    if top.len() > 1 {
        let names: Vec<String> = top
            .iter()
            .map(|c| {
                format!(
                    "{} = {} ({}:{})",
                    c.def.target.name(),
                    c.def.found.text,
                    c.def.file,
                    c.def.found.line
                )
            })
            .collect();
        return Resolution::Unresolved(format!(
            "`{written}` matches {} definitions in the project's modules: {}; tuneloop edits one only when exactly one matches",
            top.len(),
            names.join(", ")
        ));
    }
    let def = top[0].def.clone();
    if !def.found.literal {
        return Resolution::Unresolved(format!(
            "`{written}` is {} = {} ({}:{}), which is computed; change it there",
            def.target.name(),
            def.found.text,
            def.file,
            def.found.line
        ));
    }
    let writes = overrides(&modules, &def.target);
    if !writes.is_empty() {
        return Resolution::Unresolved(format!(
            "`{written}` is {} = {} ({}:{}), but {} sets it at run time; change the value there",
            def.target.name(),
            def.found.text,
            def.file,
            def.found.line,
            writes.join(", ")
        ));
    }
    Resolution::Found(def)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_each_form_and_set_value_writes_only_its_bytes() {
        let src = "from dataclasses import dataclass, field\n\n@dataclass\nclass Config:\n    batch_size: int = 24\n    num_workers: int = 0\n    pin: bool = field(default=False)\n\nCFG = {\"data\": {\"num_workers\": 2}}\nFLAT = dict(num_workers=3)\nNUM_WORKERS = 4\n";
        let t = |target: Target| lookup(src, &target).map(|f| (f.line, f.text, f.literal));
        assert_eq!(
            t(Target::ClassField {
                class: "Config".into(),
                field: "num_workers".into()
            }),
            Some((6, "0".into(), true))
        );
        assert_eq!(
            t(Target::ClassField {
                class: "Config".into(),
                field: "pin".into()
            }),
            Some((7, "False".into(), true))
        );
        assert_eq!(
            t(Target::DictEntry {
                var: "CFG".into(),
                keys: vec!["data".into(), "num_workers".into()]
            }),
            Some((9, "2".into(), true))
        );
        assert_eq!(
            t(Target::DictEntry {
                var: "FLAT".into(),
                keys: vec!["num_workers".into()]
            }),
            Some((10, "3".into(), true))
        );
        let c = Target::Constant {
            name: "NUM_WORKERS".into(),
        };
        assert_eq!(t(c.clone()), Some((11, "4".into(), true)));
        let out = set_value("config.py", src, &c, "16").unwrap();
        assert_eq!(out, src.replace("NUM_WORKERS = 4", "NUM_WORKERS = 16"));
        // Bound twice: no single definition.
        let twice = format!("{src}NUM_WORKERS = 5\n");
        assert_eq!(lookup(&twice, &c), None);
        let gone = set_value("config.py", &twice, &c, "1").unwrap_err();
        assert_eq!(
            gone.to_string(),
            "config.py no longer defines `NUM_WORKERS` once (it changed since it was read)"
        );
    }

    #[test]
    fn module_files_resolve_absolute_relative_and_package_imports() {
        let files = ["train.py", "config.py", "pkg/__init__.py", "pkg/conf.py"];
        let read = |f: &str| files.contains(&f).then(String::new);
        assert_eq!(
            module_file("train.py", "config", &read).as_deref(),
            Some("config.py")
        );
        assert_eq!(
            module_file("pkg/conf.py", ".", &read).as_deref(),
            Some("pkg/__init__.py")
        );
        assert_eq!(
            module_file("train.py", "pkg.conf", &read).as_deref(),
            Some("pkg/conf.py")
        );
        assert_eq!(
            module_file("pkg/x.py", ".conf", &read).as_deref(),
            Some("pkg/conf.py")
        );
        assert_eq!(module_file("train.py", "torch", &read), None);
    }
}

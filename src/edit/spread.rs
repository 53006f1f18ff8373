//! Knobs that reach a DataLoader call through a `**name` spread of a dict
//! literal: `DataLoader(ds, **train_kwargs)`.
//!
//! This module owns following a knob absent from the call's own keywords
//! into the dict the call spreads, when that dict is a literal (`{...}` or
//! `dict(k=v)`) assigned in the same function (at module level for a
//! module-level call), through the writes to it before the call
//! (`name["k"] = v`, `name.update({...})`, `name.update(other)` of another
//! literal, `name.update(k=v)`, `name |= {...}`), and editing the entry
//! there.
//!
//! Why not a keyword next to the spread: `DataLoader(ds, num_workers=2,
//! **kw)` raises "got multiple values for keyword argument" as soon as `kw`
//! carries the key at run time (pytorch/examples' MNIST adds `num_workers`
//! under `if use_cuda`). An entry added to the base literal is safe whatever
//! a later `.update(...)` adds: the update wins, it never crashes.
//!
//! The last unconditional write of the key is its source; conditional
//! writes after it are reported as overrides; a write whose keys cannot be
//! seen (`name.update(extra)` of an unknown dict) leaves the knob not
//! editable, with what to do.

use thiserror::Error;
use tree_sitter::Node;

use super::knobs::knob_sites;
use super::rewrite::RewriteError;
use super::scan::{
    argument_nodes, line_col, named_children, outside, parse_python, string_value, text, ScanError,
    SyntaxError,
};
use super::types::{PythonEdit, ReadFile, Source, SourceChange};
use super::DATA_PRESERVING;

/// Where a knob absent from the call's keywords is written in a spread dict.
pub(crate) struct Found<'t> {
    /// The dict the call spreads: `train_kwargs`.
    pub dict: String,
    /// The variable whose literal holds the entry (`cuda_kwargs` for
    /// `train_kwargs.update(cuda_kwargs)`), or `dict`.
    pub holder: String,
    /// The node to edit: a `dictionary`, a `call` taking keywords
    /// (`dict(...)`, `name.update(k=v)`), or an `assignment`
    /// (`name["k"] = v`).
    pub target: Node<'t>,
    /// The entry's value, if the key is written there.
    pub value: Option<Node<'t>>,
    /// Later conditional writes that may win at run time, described.
    pub overrides: Vec<String>,
}

/// What the spreads of one call say about one knob.
pub(crate) enum Spread<'t> {
    /// The call spreads no dict literal of its scope: the knob is the
    /// call's keyword, as without a spread.
    NotApplicable,
    Found(Found<'t>),
    Unresolved(String),
}

/// One write to the spread dict before the call.
struct Write<'t> {
    /// The statement (for its line and condition).
    stmt: Node<'t>,
    /// `None`: the keys it writes cannot be seen.
    entries: Option<Vec<(String, Node<'t>)>>,
    holder: String,
    target: Node<'t>,
    /// How a reader recognises it: `cuda_kwargs`, `train_kwargs["k"] = v`.
    what: String,
}

fn is_scope_boundary(n: Node<'_>) -> bool {
    matches!(
        n.kind(),
        "function_definition" | "class_definition" | "lambda"
    )
}

/// The block the call's names live in: the enclosing function, else the module.
fn scope_of(call: Node<'_>) -> Node<'_> {
    let mut n = call.parent();
    let mut last = call;
    while let Some(p) = n {
        if p.kind() == "function_definition" {
            return p.child_by_field_name("body").unwrap_or(p);
        }
        last = p;
        n = p.parent();
    }
    last
}

/// Statements-level nodes of `scope` (not inside nested functions or
/// classes) that start before `before`, in source order.
fn scope_nodes<'t>(scope: Node<'t>, before: usize) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    let mut stack = vec![scope];
    while let Some(n) = stack.pop() {
        if n.start_byte() >= before {
            continue;
        }
        if n.id() != scope.id() && is_scope_boundary(n) {
            continue;
        }
        if matches!(
            n.kind(),
            "assignment" | "augmented_assignment" | "call" | "delete_statement"
        ) {
            out.push(n);
        }
        let mut kids = named_children(n);
        kids.reverse();
        stack.extend(kids);
    }
    out.sort_by_key(|n| n.start_byte());
    out
}

/// The entries of a dict literal (`{...}`, `dict(k=v)`, or the keywords of
/// `name.update(k=v)`): `None` when some key cannot be known
/// (`{**other}`, `{key: v}`, a positional argument).
fn literal_entries<'t>(node: Node<'t>, src: &str) -> Option<Vec<(String, Node<'t>)>> {
    let mut out = Vec::new();
    match node.kind() {
        "dictionary" => {
            for c in named_children(node) {
                match c.kind() {
                    "comment" => {}
                    "pair" => {
                        let key = string_value(c.child_by_field_name("key")?, src)?;
                        out.push((key, c.child_by_field_name("value")?));
                    }
                    _ => return None,
                }
            }
        }
        "call" => {
            for a in argument_nodes(node.child_by_field_name("arguments")?) {
                if a.kind() != "keyword_argument" {
                    return None;
                }
                let name = text(a.child_by_field_name("name")?, src).to_string();
                out.push((name, a.child_by_field_name("value")?));
            }
        }
        _ => return None,
    }
    Some(out)
}

/// `{...}` or `dict(k=...)`: a literal whose keys can be seen.
fn is_dict_literal(node: Node<'_>, src: &str) -> bool {
    match node.kind() {
        "dictionary" => true,
        "call" => node
            .child_by_field_name("function")
            .is_some_and(|f| text(f, src) == "dict"),
        _ => false,
    }
}

/// `name = <right>` assignments of plain `name` among `nodes`.
fn assignments_of<'t>(nodes: &[Node<'t>], src: &str, name: &str) -> Vec<Node<'t>> {
    nodes
        .iter()
        .copied()
        .filter(|n| n.kind() == "assignment")
        .filter(|n| {
            n.child_by_field_name("left")
                .is_some_and(|l| l.kind() == "identifier" && text(l, src) == name)
        })
        .collect()
}

/// The condition a statement runs under, relative to its scope:
/// "under `if use_cuda`", "in a `for` loop"; `None`: always.
fn condition(stmt: Node<'_>, scope: Node<'_>, src: &str) -> Option<String> {
    let mut child = stmt;
    let mut n = stmt.parent();
    while let Some(p) = n {
        if p.id() == scope.id() {
            return None;
        }
        let cond = |p: Node<'_>| {
            p.child_by_field_name("condition")
                .map(|c| text(c, src).to_string())
                .unwrap_or_default()
        };
        let found = match p.kind() {
            "if_statement"
                if p.child_by_field_name("consequence")
                    .is_some_and(|c| c.id() == child.id()) =>
            {
                Some(format!("under `if {}`", cond(p)))
            }
            "elif_clause" => Some(format!("under `elif {}`", cond(p))),
            "else_clause" => Some("under `else`".to_string()),
            "for_statement" | "while_statement" => Some(format!(
                "in a `{}` loop",
                p.kind().trim_end_matches("_statement")
            )),
            "try_statement" => Some("under `try`".to_string()),
            "except_clause" | "finally_clause" => {
                Some(format!("under `{}`", p.kind().trim_end_matches("_clause")))
            }
            "case_clause" => Some("under a `case`".to_string()),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
        child = p;
        n = p.parent();
    }
    None
}

/// The write `node` makes to dict `name`, if it is one.
fn write_of<'t>(node: Node<'t>, nodes: &[Node<'t>], src: &str, name: &str) -> Option<Write<'t>> {
    let stmt = node;
    let unknown = |what: String| Write {
        stmt,
        entries: None,
        holder: name.to_string(),
        target: node,
        what,
    };
    match node.kind() {
        "assignment" => {
            let left = node.child_by_field_name("left")?;
            if left.kind() != "subscript"
                || left
                    .child_by_field_name("value")
                    .is_none_or(|v| v.kind() != "identifier" || text(v, src) != name)
            {
                return None;
            }
            let key = left
                .child_by_field_name("subscript")
                .and_then(|k| string_value(k, src));
            let right = node.child_by_field_name("right")?;
            Some(match key {
                Some(k) => Write {
                    stmt,
                    entries: Some(vec![(k, right)]),
                    holder: name.to_string(),
                    target: node,
                    what: format!("`{}`", text(node, src)),
                },
                None => unknown(format!("`{}`", text(node, src))),
            })
        }
        "augmented_assignment" => {
            let left = node.child_by_field_name("left")?;
            if left.kind() != "identifier" || text(left, src) != name {
                return None;
            }
            let right = node.child_by_field_name("right")?;
            Some(match literal_entries(right, src) {
                Some(e) if right.kind() == "dictionary" => Write {
                    stmt,
                    entries: Some(e),
                    holder: name.to_string(),
                    target: right,
                    what: format!("`{name} |= {{…}}`"),
                },
                _ => unknown(format!("`{}`", text(node, src))),
            })
        }
        "delete_statement" => text(node, src)
            .contains(name)
            .then(|| unknown(format!("`{}`", text(node, src)))),
        "call" => {
            let f = node.child_by_field_name("function")?;
            if f.kind() != "attribute"
                || f.child_by_field_name("object")
                    .is_none_or(|o| o.kind() != "identifier" || text(o, src) != name)
            {
                return None;
            }
            let method = text(f.child_by_field_name("attribute")?, src);
            let written = format!("`{}`", text(node, src));
            if method != "update" {
                return matches!(method, "setdefault" | "pop" | "popitem" | "clear")
                    .then(|| unknown(written));
            }
            let args = argument_nodes(node.child_by_field_name("arguments")?);
            match args.as_slice() {
                [] => None,
                [one] if one.kind() == "dictionary" || is_dict_literal(*one, src) => {
                    Some(match literal_entries(*one, src) {
                        Some(e) => Write {
                            stmt,
                            entries: Some(e),
                            holder: name.to_string(),
                            target: *one,
                            what: format!("`{name}.update(…)`"),
                        },
                        None => unknown(written),
                    })
                }
                [one] if one.kind() == "identifier" => {
                    let other = text(*one, src);
                    let before: Vec<Node<'t>> = nodes
                        .iter()
                        .copied()
                        .filter(|n| n.start_byte() < node.start_byte())
                        .collect();
                    let defs = assignments_of(&before, src, other);
                    let literal = match defs.as_slice() {
                        [d] => d
                            .child_by_field_name("right")
                            .filter(|r| is_dict_literal(*r, src)),
                        _ => None,
                    };
                    Some(
                        match literal.and_then(|l| Some((l, literal_entries(l, src)?))) {
                            Some((l, e)) => Write {
                                stmt,
                                entries: Some(e),
                                holder: other.to_string(),
                                target: l,
                                what: other.to_string(),
                            },
                            None => unknown(written),
                        },
                    )
                }
                kws if kws.iter().all(|a| a.kind() == "keyword_argument") => {
                    Some(match literal_entries(node, src) {
                        Some(e) => Write {
                            stmt,
                            entries: Some(e),
                            holder: name.to_string(),
                            target: node,
                            what: written,
                        },
                        None => unknown(written),
                    })
                }
                _ => Some(unknown(written)),
            }
        }
        _ => None,
    }
}

/// Follow `key` through the dict `name` spread into `call`.
fn follow<'t>(call: Node<'t>, src: &str, file: &str, name: &str, key: &str) -> Spread<'t> {
    let scope = scope_of(call);
    let nodes = scope_nodes(scope, call.start_byte());
    let at = |n: Node<'_>| format!("{file}:{}", line_col(src, n.start_byte()).0);
    let defs = assignments_of(&nodes, src, name);
    let base = match defs.as_slice() {
        [] => return Spread::NotApplicable,
        [one] => *one,
        several => {
            let lines: Vec<String> = several.iter().map(|d| at(*d)).collect();
            return Spread::Unresolved(format!(
                "`{name}` is assigned more than once before the call ({}); keep one dict literal and set \"{key}\" in it",
                lines.join(", ")
            ));
        }
    };
    let Some(right) = base.child_by_field_name("right") else {
        return Spread::NotApplicable;
    };
    let base_entries = if is_dict_literal(right, src) {
        literal_entries(right, src)
    } else {
        None
    };
    let Some(base_entries) = base_entries else {
        return Spread::Unresolved(format!(
            "`{name}` is `{}` ({}), not a dict literal whose keys can be seen; write it as `{name} = {{...}}` or set \"{key}\" where it is built",
            text(right, src),
            at(base)
        ));
    };
    let writes: Vec<Write<'t>> = nodes
        .iter()
        .filter(|n| n.start_byte() > base.start_byte())
        .filter_map(|n| write_of(*n, &nodes, src, name))
        .collect();
    let sets = |w: &Write<'t>| -> Option<Node<'t>> {
        w.entries
            .as_ref()?
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
    };
    // The last unconditional write of the key is its source.
    let source = writes
        .iter()
        .rposition(|w| sets(w).is_some() && condition(w.stmt, scope, src).is_none());
    let after = &writes[source.map(|i| i + 1).unwrap_or(0)..];
    if let Some(w) = after.iter().find(|w| w.entries.is_none()) {
        return Spread::Unresolved(format!(
            "{} ({}) may set \"{key}\" in `{name}` from a dict tuneloop cannot see; write \"{key}\" into the `{name}` literal ({}), or make what it adds a dict literal of the same function",
            w.what,
            at(w.stmt),
            at(base)
        ));
    }
    let overrides = after
        .iter()
        .filter_map(|w| {
            let v = sets(w)?;
            Some(format!(
                "overridden to {} {} by {} ({})",
                text(v, src),
                condition(w.stmt, scope, src).unwrap_or_default(),
                w.what,
                at(w.stmt)
            ))
        })
        .collect();
    let found = match source.map(|i| &writes[i]) {
        Some(w) => Found {
            dict: name.to_string(),
            holder: w.holder.clone(),
            target: w.target,
            value: sets(w),
            overrides,
        },
        None => Found {
            dict: name.to_string(),
            holder: name.to_string(),
            target: right,
            value: base_entries
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| *v),
            overrides,
        },
    };
    Spread::Found(found)
}

/// Where `key`, absent from `call`'s keywords, comes from through the
/// call's `**name` spreads.
pub(crate) fn follow_key<'t>(call: Node<'t>, src: &str, file: &str, key: &str) -> Spread<'t> {
    let Some(args) = call.child_by_field_name("arguments") else {
        return Spread::NotApplicable;
    };
    let names: Vec<String> = argument_nodes(args)
        .into_iter()
        .filter(|a| a.kind() == "dictionary_splat")
        .filter_map(|a| named_children(a).into_iter().next())
        .filter(|v| v.kind() == "identifier")
        .map(|v| text(v, src).to_string())
        .collect();
    let mut first_found = None;
    for name in names {
        match follow(call, src, file, &name, key) {
            Spread::NotApplicable => {}
            Spread::Unresolved(r) => return Spread::Unresolved(r),
            Spread::Found(f) => {
                // The spread that carries the key, else the first one.
                if f.value.is_some() || !f.overrides.is_empty() {
                    return Spread::Found(f);
                }
                first_found.get_or_insert(f);
            }
        }
    }
    first_found.map_or(Spread::NotApplicable, Spread::Found)
}

/// The `call` node that starts at byte `start` of `tree`.
fn call_at(root: Node<'_>, start: usize) -> Option<Node<'_>> {
    let mut node = root.descendant_for_byte_range(start, start)?;
    while !(node.kind() == "call" && node.start_byte() == start) {
        node = node.parent()?;
    }
    Some(node)
}

/// Why `set_entry` cannot set a key in the spread dict: the file moved
/// on since it was scanned, the key's source cannot be edited, or the edit
/// would break the file. `file` is the script's path as scanned.
#[derive(Debug, Error)]
pub enum SpreadEditError {
    #[error(transparent)]
    Parse(#[from] ScanError),
    #[error("{file}: the DataLoader call moved; scan again")]
    CallMoved { file: String },
    /// `reason` is the scan's own reason the key is unresolved.
    #[error("{key} is not editable: {reason}")]
    NotEditable { key: String, reason: String },
    #[error("{file}: the call no longer spreads a dict literal; scan again")]
    NoLongerSpreads { file: String },
    #[error("cannot edit {file}: {source}")]
    Rewrite {
        file: String,
        #[source]
        source: RewriteError,
    },
    /// `holder` is the spread dict's name as written.
    #[error("{file}: no place for \"{key}\" in `{holder}`")]
    NoPlace {
        file: String,
        key: String,
        holder: String,
    },
    #[error("{file}: setting \"{key}\" in `{holder}` broke it: {source}")]
    BrokeIt {
        file: String,
        key: String,
        holder: String,
        #[source]
        source: SyntaxError,
    },
}

/// Set `key` of the DataLoader call at byte `call_start` to `value` in the
/// spread dict it comes from: the entry's value replaced, or an entry
/// added to the literal. Returns the new text.
pub(crate) fn set_entry(
    src: &str,
    file: &str,
    call_start: usize,
    key: &str,
    value: &str,
) -> Result<String, SpreadEditError> {
    let file_ = || file.to_string();
    let tree = parse_python(src, file)?;
    let call = call_at(tree.root_node(), call_start)
        .ok_or_else(|| SpreadEditError::CallMoved { file: file_() })?;
    let found = match follow_key(call, src, file, key) {
        Spread::Found(f) => f,
        Spread::Unresolved(reason) => {
            return Err(SpreadEditError::NotEditable {
                key: key.to_string(),
                reason,
            })
        }
        Spread::NotApplicable => return Err(SpreadEditError::NoLongerSpreads { file: file_() }),
    };
    let out = match (found.value, found.target.kind()) {
        (Some(v), _) => format!("{}{value}{}", &src[..v.start_byte()], &src[v.end_byte()..]),
        (None, "dictionary") => insert_pair(src, found.target, key, value),
        (None, "call") => {
            super::rewrite::set_call_kwarg(src, found.target.start_byte(), key, Some(value))
                .map_err(|source| SpreadEditError::Rewrite {
                    file: file_(),
                    source,
                })?
        }
        (None, _) => {
            return Err(SpreadEditError::NoPlace {
                file: file_(),
                key: key.to_string(),
                holder: found.holder,
            })
        }
    };
    super::scan::check_syntax(&out).map_err(|source| SpreadEditError::BrokeIt {
        file: file_(),
        key: key.to_string(),
        holder: found.holder,
        source,
    })?;
    Ok(out)
}

/// `{"a": 1}` → `{"a": 1, "key": value}`, one entry per line kept as such;
/// the key quoted like the dict's other keys.
fn insert_pair(src: &str, dict: Node<'_>, key: &str, value: &str) -> String {
    let entries: Vec<Node<'_>> = named_children(dict)
        .into_iter()
        .filter(|c| c.kind() != "comment")
        .collect();
    let quote = entries
        .iter()
        .filter_map(|e| e.child_by_field_name("key"))
        .map(|k| text(k, src))
        .find(|k| k.starts_with('\''))
        .map_or('"', |_| '\'');
    let pair = format!("{quote}{key}{quote}: {value}");
    let splice = |at: usize, s: &str| format!("{}{s}{}", &src[..at], &src[at..]);
    let Some(last) = entries.last().copied() else {
        // `{}`: `{"key": value}`.
        return splice(dict.start_byte() + 1, &pair);
    };
    let mut cursor = dict.walk();
    let comma = dict
        .children(&mut cursor)
        .skip_while(|c| c.id() != last.id())
        .skip(1)
        .find(|c| c.kind() != "comment")
        .filter(|c| c.kind() == ",");
    let line_start = src[..last.start_byte()].rfind('\n').map_or(0, |i| i + 1);
    let indent = &src[line_start..last.start_byte()];
    if !indent.chars().all(|c| c == ' ' || c == '\t') {
        // On one line: after the last entry.
        return splice(last.end_byte(), &format!(", {pair}"));
    }
    // One entry per line: a line of its own after the last entry's, after
    // its comma and any comment ending that line.
    let anchor = comma.map_or(last.end_byte(), |c| c.end_byte());
    let line_end = src[anchor..].find('\n').map_or(src.len(), |i| anchor + i);
    let rest = src[anchor..line_end].trim();
    let nl = if src.contains("\r\n") { "\r\n" } else { "\n" };
    let line_end = if src[..line_end].ends_with('\r') {
        line_end - 1
    } else {
        line_end
    };
    if rest.is_empty() || rest.starts_with('#') {
        let trailing = if comma.is_some() { "," } else { "" };
        let added = splice(line_end, &format!("{nl}{indent}{pair}{trailing}"));
        if comma.is_none() {
            let at = last.end_byte();
            return format!("{},{}", &added[..at], &added[at..]);
        }
        return added;
    }
    splice(last.end_byte(), &format!(", {pair}"))
}

/// The literal entries (or the one assigned value) of a spread target, as
/// `(key, value text, line of the value)`.
fn target_entries(node: Node<'_>, src: &str) -> Option<Vec<(String, String, usize)>> {
    let entry =
        |k: String, v: Node<'_>| (k, text(v, src).to_string(), line_col(src, v.start_byte()).0);
    if node.kind() == "assignment" {
        let key = node
            .child_by_field_name("left")?
            .child_by_field_name("subscript")
            .and_then(|k| string_value(k, src))?;
        return Some(vec![entry(key, node.child_by_field_name("right")?)]);
    }
    Some(
        literal_entries(node, src)?
            .into_iter()
            .map(|(k, v)| entry(k, v))
            .collect(),
    )
}

/// A spread target of one file: its node range, line, holder, and the
/// knobs whose source it is.
struct Target {
    range: std::ops::Range<usize>,
    line: usize,
    holder: String,
    knobs: Vec<String>,
}

/// The spread targets of `src`'s DataLoader calls (the calls
/// [`knob_sites`] finds, imported subclasses included).
fn targets(file: &str, src: &str, read: ReadFile<'_>) -> Vec<Target> {
    let Ok(tree) = parse_python(src, file) else {
        return Vec::new();
    };
    let mut out: Vec<Target> = Vec::new();
    for site in knob_sites(file, src, read).unwrap_or_default() {
        let Some(scanned) = site.call.as_ref().filter(|c| c.has_spread) else {
            continue;
        };
        let Some(call) = call_at(tree.root_node(), site.call_start) else {
            continue;
        };
        for knob in DATA_PRESERVING {
            if scanned.kwargs.contains_key(knob) {
                continue;
            }
            let Spread::Found(f) = follow_key(call, src, file, knob) else {
                continue;
            };
            let range = f.target.byte_range();
            match out.iter_mut().find(|t| t.range == range) {
                Some(t) => {
                    if !t.knobs.iter().any(|k| k == knob) {
                        t.knobs.push(knob.to_string());
                    }
                }
                None => out.push(Target {
                    line: line_col(src, range.start).0,
                    range,
                    holder: f.holder.clone(),
                    knobs: vec![knob.to_string()],
                }),
            }
        }
    }
    out.sort_by_key(|t| t.range.start);
    out
}

/// A knob keyword added to a call next to a `**` spread whose dict may
/// carry the same key: the call would get it twice at run time.
fn keyword_beside_spread(
    file: &str,
    old: &str,
    new: &str,
    read: ReadFile<'_>,
) -> Option<PythonEdit> {
    let before = knob_sites(file, old, read).ok()?;
    let after = knob_sites(file, new, read).ok()?;
    if before.len() != after.len() {
        return None;
    }
    for (b, a) in before.iter().zip(&after) {
        let Some(call) = a.call.as_ref() else {
            continue;
        };
        for o in &b.knobs {
            let Source::Spread {
                holder,
                value,
                overrides,
                file: f,
                line,
                ..
            } = &o.source
            else {
                continue;
            };
            if call.kwargs.contains_key(&o.keyword) && (value.is_some() || !overrides.is_empty()) {
                return Some(PythonEdit::Rejected(format!(
                    "{file}:{}: {k}= added next to `**{}`, whose dict may carry \"{k}\" too (the call would get it twice and fail); set \"{k}\" in {holder} ({f}:{line}) instead",
                    a.line,
                    match &o.source {
                        Source::Spread { dict, .. } => dict.as_str(),
                        _ => "",
                    },
                    k = o.keyword
                )));
            }
        }
    }
    None
}

/// A Python file's edit seen through the dicts spread into its DataLoader
/// calls: `None` when no such dict changed (the other checks decide), else
/// the knob changes it makes there, or why it is no knob change.
pub(crate) fn spread_edit(
    file: &str,
    old: &str,
    new: &str,
    read: ReadFile<'_>,
) -> Option<PythonEdit> {
    if let Some(rejected) = keyword_beside_spread(file, old, new, read) {
        return Some(rejected);
    }
    let before = targets(file, old, read);
    if before.is_empty() {
        return None;
    }
    let after = targets(file, new, read);
    let texts = |src: &str, t: &[Target]| -> Vec<String> {
        t.iter().map(|t| src[t.range.clone()].to_string()).collect()
    };
    if before.len() == after.len() && texts(old, &before) == texts(new, &after) {
        return None;
    }
    let ranges = |t: &[Target]| -> Vec<std::ops::Range<usize>> {
        t.iter().map(|t| t.range.clone()).collect()
    };
    if before.len() != after.len()
        || outside(old, &ranges(&before)) != outside(new, &ranges(&after))
    {
        // Not a change of entries alone: the other checks say what it is.
        return None;
    }
    let mut changes = Vec::new();
    for (b, a) in before.iter().zip(&after) {
        let (ob, ab) = (&old[b.range.clone()], &new[a.range.clone()]);
        if ob == ab {
            continue;
        }
        let node_b = node_at(old, file, &b.range)?;
        let node_a = node_at(new, file, &a.range)?;
        let (Some(eb), Some(ea)) = (node_b, node_a) else {
            return Some(PythonEdit::Rejected(format!(
                "{file}:{}: `{}` changed into something whose keys cannot be seen",
                a.line, b.holder
            )));
        };
        let keys: Vec<&String> = eb.iter().chain(&ea).map(|(k, _, _)| k).collect();
        let value = |e: &[(String, String, usize)], k: &str| {
            e.iter()
                .rev()
                .find(|(x, _, _)| x == k)
                .map(|(_, v, _)| v.clone())
        };
        let mut seen: Vec<&String> = Vec::new();
        for k in keys {
            if seen.contains(&k) {
                continue;
            }
            seen.push(k);
            let (from, to) = (value(&eb, k), value(&ea, k));
            if from == to {
                continue;
            }
            if !DATA_PRESERVING.contains(&k.as_str()) {
                return Some(PythonEdit::Rejected(format!(
                    "{file}:{}: \"{k}\" in `{}` changed; only the DataLoader knobs ({}) may change",
                    a.line,
                    b.holder,
                    DATA_PRESERVING.join(", ")
                )));
            }
            if !b.knobs.contains(k) {
                return Some(PythonEdit::Rejected(format!(
                    "{file}:{}: \"{k}\" in `{}` is not where the loader's {k} is set (a later write wins); change it at its source (`tuneloop scan` shows it)",
                    a.line, b.holder
                )));
            }
            // The line of the new value (of the dict when it was removed).
            let line = ea
                .iter()
                .rev()
                .find(|(x, _, _)| x == k)
                .map_or(a.line, |(_, _, l)| *l);
            let from = from.unwrap_or_else(|| "(default)".into());
            let to = to.unwrap_or_else(|| "(default)".into());
            changes.push(SourceChange {
                file: file.to_string(),
                knob: k.clone(),
                change: format!("{k} {from} → {to} ({}[\"{k}\"], {file}:{line})", b.holder),
                line,
            });
        }
    }
    if changes.is_empty() {
        return Some(PythonEdit::Rejected(format!(
            "{file}: a dict spread into a DataLoader call changed, but none of its DataLoader knobs did"
        )));
    }
    Some(PythonEdit::Changes(changes))
}

/// The entries of the spread target spanning `range` (`Some(None)`: its
/// keys cannot be seen; `None`: no such node).
fn node_at(
    src: &str,
    file: &str,
    range: &std::ops::Range<usize>,
) -> Option<Option<Vec<(String, String, usize)>>> {
    let tree = parse_python(src, file).ok()?;
    let mut node = tree
        .root_node()
        .descendant_for_byte_range(range.start, range.end)?;
    while node.byte_range() != *range {
        node = node.parent()?;
    }
    // Several nodes may span the same bytes (an assignment and its
    // expression statement): the target kinds only.
    while !matches!(node.kind(), "dictionary" | "call" | "assignment") {
        node = node.parent().filter(|p| p.byte_range() == *range)?;
    }
    Some(target_entries(node, src))
}

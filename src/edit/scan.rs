//! Finding `torch.utils.data.DataLoader` call sites in Python source.
//!
//! Everything here works on the tree-sitter syntax tree; no regular expression
//! ever looks at Python text, so names in comments and strings are never
//! mistaken for calls.
//!
//! # What counts as a DataLoader call
//!
//! A `call` whose callee *resolves* to `torch.utils.data.DataLoader`:
//!
//! * the bare name `DataLoader`, whether imported from `torch.utils.data`
//!   (or `torch.utils.data.dataloader`) or not bound at all (a star import);
//! * a name imported as an alias: `from torch.utils.data import DataLoader as DL`;
//! * a simple alias assignment: `DL = torch.utils.data.DataLoader`;
//! * an attribute chain rooted at a torch module: `torch.utils.data.DataLoader`,
//!   `tud.DataLoader` after `import torch.utils.data as tud`, `data.DataLoader`
//!   after `from torch.utils import data`, `torch.utils.data.dataloader.DataLoader`;
//! * PyTorch Geometric's loaders (`torch_geometric.loader.DataLoader`,
//!   `torch_geometric.data.DataLoader`, `NeighborLoader`, …), which pass the
//!   knobs on to torch's;
//! * a class of the file whose base (one named `…Loader`) resolves to a
//!   DataLoader: `class FastLoader(DataLoader)`, and its own subclasses;
//!   with `scan_tree_with`, also such classes imported from other project
//!   files.
//!
//! Names are resolved with Python's scoping rules, approximately: module,
//! class, function, lambda and comprehension scopes; a name bound anywhere in a
//! scope counts for the whole scope; class scopes do not enclose nested
//! functions. If the scope that binds a name binds it to anything that is not a
//! torch import or alias (a `class DataLoader`, a `def`, a parameter, an
//! assignment from another value, an import from another module), calls
//! through that name are not DataLoader calls. Assigning `None` is ignored (the
//! `try: import … except ImportError: X = None` idiom).
//!
//! Scanning does not require the file to be free of syntax errors; use
//! [`check_syntax`] for that.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tree_sitter::{Node, Parser, Tree};

/// Fully qualified paths under which torch exports the DataLoader class.
const DATALOADER_PATHS: &[&str] = &[
    "torch.utils.data.DataLoader",
    "torch.utils.data.dataloader.DataLoader",
    // PyTorch Geometric's loaders derive from torch's and pass num_workers,
    // pin_memory, prefetch_factor and persistent_workers through to it.
    "torch_geometric.loader.DataLoader",
    "torch_geometric.data.DataLoader",
    "torch_geometric.loader.dataloader.DataLoader",
    "torch_geometric.loader.NeighborLoader",
    "torch_geometric.loader.LinkNeighborLoader",
    "torch_geometric.loader.DenseDataLoader",
];

/// One DataLoader call expression found in a file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CallSite {
    /// The file label, as given by the caller.
    pub file: String,
    /// 1-based line of the start of the call expression.
    pub line: usize,
    /// 1-based column (in characters, not bytes) of the start of the call.
    pub column: usize,
    /// The callee exactly as written: `DataLoader`, `tud.DataLoader`, `DL`, ...
    pub callee: String,
    /// Number of positional arguments; `*args` counts as one.
    pub positional: usize,
    /// Keyword arguments in source order: name -> source text of the value.
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// Whether a `**mapping` argument is present.
    pub has_spread: bool,
    /// Byte range of the whole call expression (callee and argument list).
    #[serde(skip)]
    pub call_range: Range<usize>,
}

impl CallSite {
    /// The source text of keyword argument `name`, if present.
    pub fn kwarg(&self, name: &str) -> Option<&str> {
        self.kwargs.get(name).and_then(|v| v.as_str())
    }
}

/// Reading or parsing a file for scanning failed.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("cannot read {path}: {source}", path = path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot load the tree-sitter Python grammar: {0}")]
    Language(String),
    #[error("tree-sitter could not parse {0}")]
    Parse(String),
}

/// The first syntax error in a Python source (1-based position).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("syntax error at line {line}, column {column}")]
pub struct SyntaxError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

/// Parse Python source with tree-sitter.
pub(crate) fn parse_python(src: &str, label: &str) -> Result<Tree, ScanError> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .map_err(|e| ScanError::Language(e.to_string()))?;
    parser
        .parse(src, None)
        .ok_or_else(|| ScanError::Parse(label.to_string()))
}

/// Source text of a node (empty if the range is not on char boundaries, which
/// cannot happen for trees parsed from `src`).
pub(crate) fn text<'s>(node: Node<'_>, src: &'s str) -> &'s str {
    src.get(node.byte_range()).unwrap_or("")
}

/// Named children of `node`, in order.
pub(crate) fn named_children<'t>(node: Node<'t>) -> Vec<Node<'t>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

/// All children (named and anonymous) of `node`, in order.
pub(crate) fn all_children<'t>(node: Node<'t>) -> Vec<Node<'t>> {
    let mut cursor = node.walk();
    node.children(&mut cursor).collect()
}

/// 1-based (line, column) of a byte offset; the column counts characters.
pub(crate) fn line_col(src: &str, byte: usize) -> (usize, usize) {
    let byte = byte.min(src.len());
    let before = &src[..floor_char_boundary(src, byte)];
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Check that `src` parses as Python: no ERROR or MISSING node in the
/// tree-sitter parse, and the indentation is consistent.
///
/// Reports the earliest problem. tree-sitter's grammar is more permissive than
/// CPython's, so besides its ERROR and MISSING nodes this also rejects what it
/// lets through silently but Python would not compile: a block without any
/// statement (`def f():` followed by nothing indented), an indented
/// statement at module level, and statements of one block that start at
/// different indentation. Some errors CPython would raise are still not seen
/// (a repeated keyword argument, Python 2 `print x`), so this catches
/// breakage, not every error Python would raise.
pub fn check_syntax(src: &str) -> Result<(), SyntaxError> {
    let tree = match parse_python(src, "<source>") {
        Ok(t) => t,
        // Only a missing grammar or a cancelled parse end here; report the
        // start of the file rather than pretending the source is fine.
        Err(_) => return Err(SyntaxError { line: 1, column: 1 }),
    };
    let mut first: Option<usize> = None;
    let mut note = |at: usize| {
        if !matches!(first, Some(f) if f <= at) {
            first = Some(at);
        }
    };
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            // An ERROR node's own start is the earliest point inside it (the
            // cause may lie further in; the error cannot lie before it).
            note(node.start_byte());
            continue;
        }
        match node.kind() {
            "module" | "block" => {
                if let Some(at) = indentation_problem(node, src) {
                    note(at);
                }
            }
            _ => {}
        }
        stack.extend(all_children(node));
    }
    match first {
        None => Ok(()),
        Some(at) => {
            let (line, column) = line_col(src, at);
            Err(SyntaxError { line, column })
        }
    }
}

/// The first statement of a `module` or `block` whose indentation Python
/// would reject (or the block itself, when it holds no statement).
fn indentation_problem(node: Node<'_>, src: &str) -> Option<usize> {
    let statements: Vec<Node<'_>> = named_children(node)
        .into_iter()
        .filter(|n| !matches!(n.kind(), "comment" | "line_continuation"))
        .collect();
    if node.kind() == "block" && statements.is_empty() {
        return Some(node.start_byte());
    }
    let mut block_indent: Option<&str> = None;
    for stmt in statements {
        let start = stmt.start_byte();
        let line_start = src[..start].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let indent = &src[line_start..start];
        if !indent.chars().all(|c| c == ' ' || c == '\t' || c == '\x0c') {
            // Not first on its line: `a = 1; b = 2`, `if x: y()`.
            continue;
        }
        let continued = src[..line_start]
            .strip_suffix('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .is_some_and(|l| l.ends_with('\\'));
        if continued {
            // After a backslash continuation the indentation is free.
            continue;
        }
        if node.kind() == "module" {
            if !indent.is_empty() {
                return Some(start);
            }
        } else {
            match block_indent {
                None => block_indent = Some(indent),
                Some(expected) if expected != indent => return Some(start),
                Some(_) => {}
            }
        }
    }
    None
}

/// Read `path` and scan it; `label` becomes [`CallSite::file`].
pub fn scan_file(path: &Path, label: &str) -> Result<Vec<CallSite>, ScanError> {
    let src = std::fs::read_to_string(path).map_err(|source| ScanError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    scan_source(label, &src)
}

/// Find every DataLoader call in `src`, sorted by position.
pub fn scan_source(file_label: &str, src: &str) -> Result<Vec<CallSite>, ScanError> {
    let tree = parse_python(src, file_label)?;
    Ok(scan_tree(file_label, src, &tree))
}

/// Scan an already parsed tree of `src`.
pub(crate) fn scan_tree(file_label: &str, src: &str, tree: &Tree) -> Vec<CallSite> {
    scan_tree_with(file_label, src, tree, &[])
}

/// [`scan_tree`], also counting as DataLoaders the classes named in
/// `project_loaders`: `module.Class` as the file imports it
/// (`from loaders import FastLoader` → `loaders.FastLoader`,
/// `from .loaders import FastLoader` → `.loaders.FastLoader`), for
/// DataLoader subclasses defined in another file of the project.
pub(crate) fn scan_tree_with(
    file_label: &str,
    src: &str,
    tree: &Tree,
    project_loaders: &[String],
) -> Vec<CallSite> {
    let mut walk = Walk::new(src);
    walk.project_loaders = project_loaders.to_vec();
    walk.run(tree.root_node());
    walk.resolve_pending();
    let mut sites: Vec<CallSite> = walk
        .calls
        .iter()
        .filter(|(call, scope)| {
            call.child_by_field_name("function")
                .and_then(|f| walk.resolve(f, *scope))
                == Some(Meaning::DataLoader)
        })
        .map(|(call, _)| call_site(file_label, src, *call))
        .collect();
    sites.sort_by_key(|s| (s.call_range.start, std::cmp::Reverse(s.call_range.end)));
    sites
}

/// Module-level names of `src` that are DataLoader classes (subclasses
/// defined there, aliases), for files that import them.
pub(crate) fn loader_classes(src: &str) -> Vec<String> {
    let Ok(tree) = parse_python(src, "<module>") else {
        return Vec::new();
    };
    let mut walk = Walk::new(src);
    walk.run(tree.root_node());
    walk.resolve_pending();
    let mut names: Vec<String> = walk.scopes[0]
        .bindings
        .iter()
        .filter(|(_, b)| walk.meaning_of(b) == Some(Meaning::DataLoader))
        .map(|(n, _)| n.clone())
        .collect();
    names.sort();
    names
}

/// The argument nodes of a call's `argument_list` (comments left out).
pub(crate) fn argument_nodes<'t>(args: Node<'t>) -> Vec<Node<'t>> {
    named_children(args)
        .into_iter()
        .filter(|n| n.kind() != "comment")
        .collect()
}

/// The `call` node spanning exactly `range`.
pub(crate) fn call_node<'t>(tree: &'t Tree, range: &Range<usize>) -> Option<Node<'t>> {
    let mut node = tree
        .root_node()
        .descendant_for_byte_range(range.start, range.end)?;
    loop {
        if node.kind() == "call" && node.byte_range() == *range {
            return Some(node);
        }
        if node.start_byte() < range.start || node.end_byte() > range.end {
            return None;
        }
        node = node.parent()?;
    }
}

pub(crate) fn call_site(file_label: &str, src: &str, call: Node<'_>) -> CallSite {
    let callee = call
        .child_by_field_name("function")
        .map(|f| text(f, src).to_string())
        .unwrap_or_default();
    let mut positional = 0;
    let mut kwargs = serde_json::Map::new();
    let mut has_spread = false;
    if let Some(args) = call.child_by_field_name("arguments") {
        if args.kind() == "argument_list" {
            for arg in argument_nodes(args) {
                match arg.kind() {
                    "keyword_argument" => {
                        let name = arg.child_by_field_name("name").map(|n| text(n, src));
                        let value = arg.child_by_field_name("value").map(|n| text(n, src));
                        if let (Some(name), Some(value)) = (name, value) {
                            kwargs.insert(
                                name.to_string(),
                                serde_json::Value::String(value.to_string()),
                            );
                        }
                    }
                    "dictionary_splat" => has_spread = true,
                    _ if arg.is_error() => {}
                    _ => positional += 1,
                }
            }
        } else {
            // `DataLoader(x for x in xs)`: a lone generator argument.
            positional = 1;
        }
    }
    let (line, column) = line_col(src, call.start_byte());
    CallSite {
        file: file_label.to_string(),
        line,
        column,
        callee,
        positional,
        kwargs,
        has_spread,
        call_range: call.byte_range(),
    }
}

// ---------------------------------------------------------------------------
// Name resolution
// ---------------------------------------------------------------------------

/// What a name or attribute chain refers to, as far as we care.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Meaning {
    /// The `torch.utils.data.DataLoader` class.
    DataLoader,
    /// A module (or other object) under `torch`, by dotted path.
    Module(String),
}

#[derive(Clone, Debug)]
enum Binding {
    /// Bound by a torch import or an alias assignment that resolved.
    Torch(Meaning),
    /// Bound to something we do not track.
    Other,
    /// `name = <expr>`; resolved after the walk (index into `Walk::pending`).
    Pending(usize),
}

#[derive(Default)]
struct Scope {
    parent: Option<usize>,
    is_class: bool,
    bindings: HashMap<String, Vec<Binding>>,
}

#[derive(Clone, Debug, PartialEq)]
enum PendingState {
    Unknown,
    Resolved(Option<Meaning>),
}

struct Walk<'s, 't> {
    src: &'s str,
    scopes: Vec<Scope>,
    calls: Vec<(Node<'t>, usize)>,
    /// (scope the right-hand side is evaluated in, right-hand side)
    pending: Vec<(usize, Node<'t>)>,
    pending_state: Vec<PendingState>,
    /// Classes of other project files known to be DataLoaders (`module.Class`).
    project_loaders: Vec<String>,
}

impl<'s, 't> Walk<'s, 't> {
    fn new(src: &'s str) -> Self {
        Walk {
            src,
            scopes: vec![Scope::default()],
            calls: Vec::new(),
            pending: Vec::new(),
            pending_state: Vec::new(),
            project_loaders: Vec::new(),
        }
    }

    fn new_scope(&mut self, parent: usize, is_class: bool) -> usize {
        self.scopes.push(Scope {
            parent: Some(parent),
            is_class,
            bindings: HashMap::new(),
        });
        self.scopes.len() - 1
    }

    fn bind(&mut self, scope: usize, name: &str, binding: Binding) {
        self.scopes[scope]
            .bindings
            .entry(name.to_string())
            .or_default()
            .push(binding);
    }

    fn bind_targets(&mut self, scope: usize, target: Node<'t>) {
        for name in target_names(target, self.src) {
            self.bind(scope, name, Binding::Other);
        }
    }

    /// Walk the whole tree iteratively (deep expressions must not overflow
    /// the stack), recording scopes, bindings and calls.
    fn run(&mut self, root: Node<'t>) {
        let mut stack: Vec<(Node<'t>, usize)> = vec![(root, 0)];
        while let Some((node, scope)) = stack.pop() {
            let kids = named_children(node);
            // Scope for each child; default: the current one.
            let mut child_scope: Vec<usize> = vec![scope; kids.len()];
            match node.kind() {
                "function_definition" => {
                    if let Some(name) = node.child_by_field_name("name") {
                        self.bind(scope, text(name, self.src), Binding::Other);
                    }
                    let inner = self.new_scope(scope, false);
                    if let Some(params) = node.child_by_field_name("parameters") {
                        self.bind_parameters(inner, params);
                    }
                    let body = node.child_by_field_name("body").map(|b| b.id());
                    for (i, k) in kids.iter().enumerate() {
                        if Some(k.id()) == body {
                            child_scope[i] = inner;
                        }
                    }
                }
                "lambda" => {
                    let inner = self.new_scope(scope, false);
                    if let Some(params) = node.child_by_field_name("parameters") {
                        self.bind_parameters(inner, params);
                    }
                    child_scope.iter_mut().for_each(|s| *s = inner);
                }
                "class_definition" => {
                    if let Some(name) = node.child_by_field_name("name") {
                        // `class FastLoader(DataLoader)`: calls of the subclass
                        // take the same keywords, so they are call sites too.
                        let binding = match loader_base(node, self.src) {
                            Some(base) => {
                                self.pending.push((scope, base));
                                self.pending_state.push(PendingState::Unknown);
                                Binding::Pending(self.pending.len() - 1)
                            }
                            None => Binding::Other,
                        };
                        self.bind(scope, text(name, self.src), binding);
                    }
                    let inner = self.new_scope(scope, true);
                    let body = node.child_by_field_name("body").map(|b| b.id());
                    for (i, k) in kids.iter().enumerate() {
                        if Some(k.id()) == body {
                            child_scope[i] = inner;
                        }
                    }
                }
                "list_comprehension"
                | "set_comprehension"
                | "dictionary_comprehension"
                | "generator_expression" => {
                    let inner = self.new_scope(scope, false);
                    child_scope.iter_mut().for_each(|s| *s = inner);
                }
                "for_in_clause" | "for_statement" => {
                    if let Some(left) = node.child_by_field_name("left") {
                        self.bind_targets(scope, left);
                    }
                }
                "assignment" => self.assignment(node, scope),
                "augmented_assignment" => {
                    if let Some(left) = node.child_by_field_name("left") {
                        self.bind_targets(scope, left);
                    }
                }
                "named_expression" => {
                    if let Some(name) = node.child_by_field_name("name") {
                        self.bind(scope, text(name, self.src), Binding::Other);
                    }
                }
                "as_pattern" => {
                    // `with x as y`, `except E as e`, `case p as q`
                    if let Some(alias) = node.child_by_field_name("alias") {
                        self.bind_targets(scope, alias);
                    }
                }
                "except_clause" => {
                    if let Some(alias) = node.child_by_field_name("alias") {
                        self.bind_targets(scope, alias);
                    }
                }
                "import_statement" => self.import(node, scope),
                "import_from_statement" => self.import_from(node, scope),
                "call" => self.calls.push((node, scope)),
                _ => {}
            }
            for (k, s) in kids.into_iter().zip(child_scope).rev() {
                stack.push((k, s));
            }
        }
    }

    fn bind_parameters(&mut self, scope: usize, params: Node<'t>) {
        for p in named_children(params) {
            let target = match p.kind() {
                "default_parameter" | "typed_default_parameter" => p.child_by_field_name("name"),
                "typed_parameter" => named_children(p)
                    .into_iter()
                    .find(|c| c.kind() != "type" && c.kind() != "comment"),
                _ => Some(p),
            };
            if let Some(t) = target {
                self.bind_targets(scope, t);
            }
        }
    }

    fn assignment(&mut self, node: Node<'t>, scope: usize) {
        let Some(left) = node.child_by_field_name("left") else {
            return;
        };
        let right = node.child_by_field_name("right");
        let Some(right) = right else {
            // `x: int` binds nothing.
            return;
        };
        if left.kind() == "identifier" && right.kind() != "assignment" {
            if right.kind() == "none" {
                return;
            }
            self.pending.push((scope, right));
            self.pending_state.push(PendingState::Unknown);
            let idx = self.pending.len() - 1;
            self.bind(scope, text(left, self.src), Binding::Pending(idx));
        } else {
            self.bind_targets(scope, left);
            // Chained `a = b = value`: the inner assignment node binds `b`
            // when the walk reaches it; `a` is bound here as untracked.
        }
    }

    /// `import a.b.c` binds `a`; `import a.b.c as x` binds `x` to `a.b.c`.
    fn import(&mut self, node: Node<'t>, scope: usize) {
        let mut cursor = node.walk();
        let names: Vec<Node<'t>> = node.children_by_field_name("name", &mut cursor).collect();
        for name in names {
            match name.kind() {
                "dotted_name" => {
                    let path = dotted(name, self.src);
                    let first = path.split('.').next().unwrap_or("").to_string();
                    let binding = match torch_meaning(&first) {
                        Some(m) => Binding::Torch(m),
                        None => Binding::Other,
                    };
                    self.bind(scope, &first, binding);
                }
                "aliased_import" => {
                    let path = name
                        .child_by_field_name("name")
                        .map(|n| dotted(n, self.src))
                        .unwrap_or_default();
                    if let Some(alias) = name.child_by_field_name("alias") {
                        let binding = torch_meaning(&path)
                            .map(Binding::Torch)
                            .unwrap_or(Binding::Other);
                        self.bind(scope, text(alias, self.src), binding);
                    }
                }
                _ => {}
            }
        }
    }

    /// `from m import n [as x]` binds `x` (or `n`) to `m.n`.
    fn import_from(&mut self, node: Node<'t>, scope: usize) {
        let module = node.child_by_field_name("module_name");
        // Relative imports (`from .x import y`) never name torch.
        let module_path = module
            .filter(|m| m.kind() == "dotted_name")
            .map(|m| dotted(m, self.src));
        let mut cursor = node.walk();
        let names: Vec<Node<'t>> = node.children_by_field_name("name", &mut cursor).collect();
        for name in names {
            let (imported, bound) = match name.kind() {
                "dotted_name" => (name, name),
                "aliased_import" => match (
                    name.child_by_field_name("name"),
                    name.child_by_field_name("alias"),
                ) {
                    (Some(n), Some(a)) => (n, a),
                    _ => continue,
                },
                _ => continue,
            };
            let binding = match &module_path {
                Some(m) => torch_meaning(&format!("{m}.{}", dotted(imported, self.src)))
                    .map(Binding::Torch)
                    .unwrap_or(Binding::Other),
                None => Binding::Other,
            };
            let as_written = module.map(|m| {
                format!(
                    "{}.{}",
                    text(m, self.src).split_whitespace().collect::<String>(),
                    dotted(imported, self.src)
                )
            });
            let binding = match as_written {
                Some(w) if self.project_loaders.contains(&w) => Binding::Torch(Meaning::DataLoader),
                _ => binding,
            };
            self.bind(scope, text(bound, self.src), binding);
        }
    }

    /// Resolve the right-hand sides of `name = expr` assignments, a few
    /// rounds so short alias chains (`A = DataLoader; B = A`) settle.
    fn resolve_pending(&mut self) {
        for _ in 0..4 {
            let mut changed = false;
            for i in 0..self.pending.len() {
                let (scope, rhs) = self.pending[i];
                let state = PendingState::Resolved(self.resolve(rhs, scope));
                if self.pending_state[i] != state {
                    self.pending_state[i] = state;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// What `expr`, evaluated in `scope`, refers to (if it is torch).
    fn resolve(&self, expr: Node<'_>, scope: usize) -> Option<Meaning> {
        match expr.kind() {
            "identifier" => self.resolve_name(text(expr, self.src), scope),
            "attribute" => {
                let object = expr.child_by_field_name("object")?;
                let attr = expr.child_by_field_name("attribute")?;
                match self.resolve(object, scope)? {
                    Meaning::Module(path) => {
                        torch_meaning(&format!("{path}.{}", text(attr, self.src)))
                    }
                    Meaning::DataLoader => None,
                }
            }
            "parenthesized_expression" => {
                let inner = argument_nodes(expr).into_iter().next()?;
                self.resolve(inner, scope)
            }
            _ => None,
        }
    }

    fn resolve_name(&self, name: &str, scope: usize) -> Option<Meaning> {
        let mut current = Some(scope);
        let mut first = true;
        while let Some(s) = current {
            let sc = &self.scopes[s];
            // A class body's names are not visible in nested functions.
            if first || !sc.is_class {
                if let Some(bindings) = sc.bindings.get(name) {
                    return self.meaning_of(bindings);
                }
            }
            first = false;
            current = sc.parent;
        }
        // Not bound anywhere in the file: builtins, star imports.
        match name {
            "DataLoader" => Some(Meaning::DataLoader),
            "torch" => Some(Meaning::Module("torch".into())),
            _ => None,
        }
    }

    /// All bindings of a name in one scope must agree on a torch meaning.
    fn meaning_of(&self, bindings: &[Binding]) -> Option<Meaning> {
        let mut meaning: Option<Meaning> = None;
        for b in bindings {
            let m = match b {
                Binding::Torch(m) => m.clone(),
                Binding::Other => return None,
                Binding::Pending(i) => match &self.pending_state[*i] {
                    PendingState::Resolved(Some(m)) => m.clone(),
                    _ => return None,
                },
            };
            match &meaning {
                Some(prev) if *prev != m => return None,
                _ => meaning = Some(m),
            }
        }
        meaning
    }
}

/// The base class of a class definition that may be a DataLoader: the first
/// positional base whose name ends in `Loader` (mixins come first or last).
fn loader_base<'t>(class: Node<'t>, src: &str) -> Option<Node<'t>> {
    let bases = class.child_by_field_name("superclasses")?;
    argument_nodes(bases)
        .into_iter()
        .filter(|b| matches!(b.kind(), "identifier" | "attribute"))
        .find(|b| text(*b, src).ends_with("Loader"))
}

/// The meaning of a fully qualified path, if it is under `torch` (or
/// `torch_geometric`, whose loaders are DataLoaders).
fn torch_meaning(path: &str) -> Option<Meaning> {
    if DATALOADER_PATHS.contains(&path) {
        Some(Meaning::DataLoader)
    } else if path == "torch"
        || path.starts_with("torch.")
        || path == "torch_geometric"
        || path.starts_with("torch_geometric.")
    {
        Some(Meaning::Module(path.to_string()))
    } else {
        None
    }
}

/// A dotted name with any whitespace or comments between parts removed.
fn dotted(node: Node<'_>, src: &str) -> String {
    if node.kind() == "dotted_name" {
        named_children(node)
            .into_iter()
            .filter(|n| n.kind() == "identifier")
            .map(|n| text(n, src))
            .collect::<Vec<_>>()
            .join(".")
    } else {
        text(node, src).to_string()
    }
}

/// Identifiers bound by an assignment target or parameter pattern.
fn target_names<'s>(target: Node<'_>, src: &'s str) -> Vec<&'s str> {
    let mut out = Vec::new();
    let mut stack = vec![target];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "identifier" => out.push(text(n, src)),
            // `obj.attr = …`, `obj[i] = …` bind no name.
            "attribute" | "subscript" => {}
            _ => stack.extend(named_children(n)),
        }
    }
    out
}

/// The content of a plain string literal (no f-string interpolation).
pub(super) fn string_value(node: Node<'_>, src: &str) -> Option<String> {
    if node.kind() != "string"
        || named_children(node)
            .iter()
            .any(|c| c.kind() == "interpolation")
    {
        return None;
    }
    let t = text(node, src);
    let t = t.trim_start_matches(|c: char| "rRbBuU".contains(c));
    for q in ["\"\"\"", "'''", "\"", "'"] {
        if t.len() >= 2 * q.len() && t.starts_with(q) && t.ends_with(q) {
            return Some(t[q.len()..t.len() - q.len()].to_string());
        }
    }
    None
}

/// The text outside the given (possibly nested) byte ranges.
pub(super) fn outside<'s>(src: &'s str, ranges: &[std::ops::Range<usize>]) -> Vec<&'s str> {
    let mut sorted = ranges.to_vec();
    sorted.sort_by_key(|r| r.start);
    let mut pieces = Vec::new();
    let mut pos = 0;
    for r in sorted {
        if r.start < pos {
            continue;
        }
        pieces.push(&src[pos..r.start]);
        pos = r.end;
    }
    pieces.push(&src[pos..]);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callees(src: &str) -> Vec<String> {
        scan_source("t.py", src)
            .unwrap()
            .into_iter()
            .map(|s| s.callee)
            .collect()
    }

    #[test]
    fn bare_name_with_import() {
        let src = "from torch.utils.data import DataLoader\n\nloader = DataLoader(ds, batch_size=32, num_workers=4)\n";
        let sites = scan_source("train.py", src).unwrap();
        assert_eq!(sites.len(), 1);
        let s = &sites[0];
        assert_eq!(s.file, "train.py");
        assert_eq!((s.line, s.column), (3, 10));
        assert_eq!(s.callee, "DataLoader");
        assert_eq!(s.positional, 1);
        assert!(!s.has_spread);
        assert_eq!(
            s.kwargs.keys().collect::<Vec<_>>(),
            vec!["batch_size", "num_workers"]
        );
        assert_eq!(s.kwarg("batch_size"), Some("32"));
        assert_eq!(s.kwarg("num_workers"), Some("4"));
        assert_eq!(
            &src[s.call_range.clone()],
            "DataLoader(ds, batch_size=32, num_workers=4)"
        );
    }

    #[test]
    fn bare_name_without_import_is_accepted() {
        assert_eq!(
            callees("from torch.utils.data import *\nx = DataLoader(ds)\n"),
            vec!["DataLoader"]
        );
        assert_eq!(callees("x = DataLoader(ds)\n"), vec!["DataLoader"]);
    }

    #[test]
    fn aliases_and_qualified_names() {
        let src = r#"
import torch
import torch.utils.data as tud
from torch.utils import data
from torch.utils.data import DataLoader as DL
import torch.utils.data.dataloader

a = DL(ds)
b = torch.utils.data.DataLoader(ds)
c = tud.DataLoader(ds)
d = data.DataLoader(ds)
e = torch.utils.data.dataloader.DataLoader(ds)
"#;
        assert_eq!(
            callees(src),
            vec![
                "DL",
                "torch.utils.data.DataLoader",
                "tud.DataLoader",
                "data.DataLoader",
                "torch.utils.data.dataloader.DataLoader"
            ]
        );
    }

    #[test]
    fn more_alias_forms() {
        let src = r#"
import torch.utils.data as data
import torch as th
from torch.utils.data import dataloader as dlm
from torch.utils.data.dataloader import DataLoader as Loader
Alias = th.utils.data.DataLoader
a = data.DataLoader(ds)
b = th.utils.data.DataLoader(ds)
c = dlm.DataLoader(ds)
d = Loader(ds)
e = Alias(ds)
"#;
        assert_eq!(
            callees(src),
            vec![
                "data.DataLoader",
                "th.utils.data.DataLoader",
                "dlm.DataLoader",
                "Loader",
                "Alias"
            ]
        );
    }

    #[test]
    fn fully_qualified_without_import_statement() {
        assert_eq!(
            callees("x = torch.utils.data.DataLoader(ds)\n"),
            vec!["torch.utils.data.DataLoader"]
        );
    }

    #[test]
    fn alias_does_not_make_plain_name_other() {
        // With only `DL` imported, the bare `DataLoader` is still unbound and
        // therefore accepted (it may come from a star import).
        let src = "from torch.utils.data import DataLoader as DL\nDL(a)\nDataLoader(b)\n";
        assert_eq!(callees(src), vec!["DL", "DataLoader"]);
    }

    #[test]
    fn non_dataloader_calls_are_ignored() {
        let src = r#"
import mylib
from mylib import data as mydata
class Trainer:
    def build(self):
        self.DataLoader(ds)
        return MyDataLoader(ds)
x = mylib.DataLoader(ds)
y = mydata.DataLoader(ds)
z = DataLoaderFactory(ds)
w = torch.utils.data.MyDataLoader(ds)
v = data.DataLoader(ds)  # `data` never imported from torch
# DataLoader(ds, num_workers=4)
s = "DataLoader(ds)"
t = '''
loader = DataLoader(ds)
'''
"#;
        assert!(callees(src).is_empty(), "{:?}", callees(src));
    }

    #[test]
    fn no_dataloader_at_all() {
        assert!(callees("import os\nprint(os.getcwd())\n").is_empty());
        assert!(callees("").is_empty());
    }

    #[test]
    fn local_class_shadows_bare_name() {
        let src = r#"
class DataLoader:
    def __init__(self, ds):
        self.ds = ds

loader = DataLoader(ds)
"#;
        assert!(callees(src).is_empty());
    }

    #[test]
    fn other_bindings_shadow_bare_name() {
        for src in [
            "def DataLoader(x):\n    return x\nDataLoader(1)\n",
            "from mylib import DataLoader\nDataLoader(1)\n",
            "DataLoader = make_loader_class()\nDataLoader(1)\n",
            "from torch.utils.data import DataLoader\nfrom mylib import DataLoader\nDataLoader(1)\n",
            "def f(DataLoader):\n    return DataLoader(1)\n",
        ] {
            assert!(callees(src).is_empty(), "{src}");
        }
    }

    #[test]
    fn shadowing_is_scoped() {
        let src = r#"
from torch.utils import data
from torch.utils.data import DataLoader

def collate(data):
    return data

def inner():
    class DataLoader:
        pass
    return DataLoader(1)

train = data.DataLoader(ds, collate_fn=collate)
val = DataLoader(ds)
"#;
        assert_eq!(callees(src), vec!["data.DataLoader", "DataLoader"]);
    }

    #[test]
    fn class_body_names_do_not_reach_methods() {
        let src = r#"
class Module:
    DataLoader = make_custom_loader_class()
    custom = DataLoader(1)

    def train_dataloader(self):
        return DataLoader(self.ds)
"#;
        let sites = scan_source("t.py", src).unwrap();
        assert_eq!(sites.len(), 1);
        assert_eq!(sites[0].line, 7);
    }

    #[test]
    fn dataloader_subclasses_are_call_sites() {
        let src = r#"
import torch.utils.data as tud
from torch.utils.data import DataLoader

class FastLoader(DataLoader):
    pass

class CachedLoader(FastLoader):
    pass

class QualifiedLoader(tud.DataLoader):
    pass

class NotALoader(Base):
    pass

class OtherLoader(mylib.Loader):
    pass

a = FastLoader(ds, num_workers=2)
b = CachedLoader(ds)
c = QualifiedLoader(ds)
d = NotALoader(ds, num_workers=2)
e = OtherLoader(ds, num_workers=2)
"#;
        assert_eq!(
            callees(src),
            vec!["FastLoader", "CachedLoader", "QualifiedLoader"]
        );
    }

    #[test]
    fn torch_geometric_loaders_are_call_sites() {
        let src = r#"
import torch_geometric.loader as gl
from torch_geometric.data import DataLoader as OldLoader
from torch_geometric.loader import NeighborLoader
import torch_geometric
a = gl.DataLoader(ds, batch_size=32)
b = OldLoader(ds)
c = NeighborLoader(data, num_neighbors=[5])
d = torch_geometric.loader.DataLoader(ds)
e = gl.ClusterData(data)
"#;
        assert_eq!(
            callees(src),
            vec![
                "gl.DataLoader",
                "OldLoader",
                "NeighborLoader",
                "torch_geometric.loader.DataLoader"
            ]
        );
    }

    #[test]
    fn loop_and_with_targets_bind() {
        let src = "for DataLoader in xs:\n    DataLoader(1)\n";
        assert!(callees(src).is_empty());
        let src = "with open(p) as DataLoader:\n    DataLoader(1)\n";
        assert!(callees(src).is_empty());
        // A comprehension variable is local to the comprehension.
        let src = "ys = [DataLoader(1) for DataLoader in xs]\nz = DataLoader(2)\n";
        assert_eq!(scan_source("t.py", src).unwrap().len(), 1);
        assert_eq!(scan_source("t.py", src).unwrap()[0].line, 2);
    }

    #[test]
    fn try_import_fallback_to_none_is_ignored() {
        let src = "try:\n    from torch.utils.data import DataLoader\nexcept ImportError:\n    DataLoader = None\nDataLoader(ds)\n";
        assert_eq!(callees(src), vec!["DataLoader"]);
    }

    #[test]
    fn nested_calls_are_found_and_sorted() {
        let src = r#"from torch.utils.data import DataLoader

def make(dsets):
    loaders = [DataLoader(d, batch_size=8) for d in dsets]
    return loaders

class Module:
    def train_dataloader(self):
        return DataLoader(self.train_ds, shuffle=True)

    def all(self):
        return dict(val=DataLoader(self.val_ds), test=(lambda: DataLoader(self.test_ds))())

first = DataLoader(a); second = DataLoader(b)
"#;
        let sites = scan_source("m.py", src).unwrap();
        let lines: Vec<usize> = sites.iter().map(|s| s.line).collect();
        assert_eq!(lines, vec![4, 9, 12, 12, 14, 14]);
        assert_eq!(sites[0].column, 16);
        assert_eq!(sites[0].kwarg("batch_size"), Some("8"));
        assert_eq!(sites[1].kwarg("shuffle"), Some("True"));
        assert!(sites
            .windows(2)
            .all(|w| w[0].call_range.start < w[1].call_range.start));
        assert_eq!(sites[4].column, 9);
        assert_eq!(sites[5].column, 33);
    }

    #[test]
    fn multi_line_call_with_comments_spread_and_star_args() {
        let src = r#"import os
from torch.utils.data import DataLoader
loader = DataLoader(
    dataset,  # the data
    *extra,
    batch_size=cfg.batch_size,
    # num_workers=8,
    num_workers=os.cpu_count() // 2,
    pin_memory=True,
    **loader_kwargs,
)
"#;
        let sites = scan_source("t.py", src).unwrap();
        assert_eq!(sites.len(), 1);
        let s = &sites[0];
        assert_eq!(s.positional, 2);
        assert!(s.has_spread);
        assert_eq!(
            serde_json::Value::Object(s.kwargs.clone()),
            serde_json::json!({
                "batch_size": "cfg.batch_size",
                "num_workers": "os.cpu_count() // 2",
                "pin_memory": "True"
            })
        );
        assert_eq!(
            s.kwargs.keys().collect::<Vec<_>>(),
            vec!["batch_size", "num_workers", "pin_memory"]
        );
        assert!(src[s.call_range.clone()].ends_with("**loader_kwargs,\n)"));
    }

    #[test]
    fn dataloader_as_argument_and_nested_in_dataloader() {
        let src = "wrap(DataLoader(a), key=DataLoader(b, num_workers=2))\n";
        let sites = scan_source("t.py", src).unwrap();
        assert_eq!(sites.len(), 2);
        assert_eq!(sites[1].kwarg("num_workers"), Some("2"));
    }

    #[test]
    fn column_counts_characters() {
        let src = "x = \"é\"; y = DataLoader(ds)\n";
        let sites = scan_source("t.py", src).unwrap();
        assert_eq!(sites[0].column, 14);
    }

    #[test]
    fn generator_argument_counts_as_positional() {
        let sites = scan_source("t.py", "DataLoader(x for x in y)\n").unwrap();
        assert_eq!(sites[0].positional, 1);
        assert!(sites[0].kwargs.is_empty());
    }

    #[test]
    fn serde_skips_range_and_keeps_kwarg_order() {
        let sites = scan_source("t.py", "DataLoader(ds, z=1, a=2)\n").unwrap();
        let json = serde_json::to_string(&sites[0]).unwrap();
        assert!(!json.contains("call_range"));
        assert!(json.contains(r#""kwargs":{"z":"1","a":"2"}"#), "{json}");
        let back: CallSite = serde_json::from_str(&json).unwrap();
        assert_eq!(back.kwargs, sites[0].kwargs);
        assert_eq!(back.call_range, 0..0);
    }

    #[test]
    fn scan_file_reads_and_reports_io_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train.py");
        std::fs::write(&path, "DataLoader(ds)\n").unwrap();
        let sites = scan_file(&path, "src/train.py").unwrap();
        assert_eq!(sites[0].file, "src/train.py");
        let err = scan_file(&dir.path().join("missing.py"), "missing.py").unwrap_err();
        assert!(matches!(err, ScanError::Io { .. }));
        assert!(err.to_string().contains("missing.py"));
    }

    #[test]
    fn check_syntax_reports_first_error() {
        assert_eq!(check_syntax("x = 1\n"), Ok(()));
        assert_eq!(check_syntax(""), Ok(()));
        let err = check_syntax("x = 1\ny = DataLoader(ds,, 2)\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert_eq!(
            err.to_string(),
            format!("syntax error at line 2, column {}", err.column)
        );
        let err = check_syntax("a = 1\nb = 2\nc = f(1\n").unwrap_err();
        assert_eq!(err.line, 3, "{err}");
        let err = check_syntax("def f(:\n    pass\n").unwrap_err();
        assert_eq!(err.line, 1);
    }

    #[test]
    fn check_syntax_catches_what_tree_sitter_lets_through() {
        // Indented statement at module level.
        let err = check_syntax("x = 1\n    y = 2\n").unwrap_err();
        assert_eq!((err.line, err.column), (2, 5));
        // Inconsistent indentation inside a block.
        let err = check_syntax("def f():\n    a = 1\n      b = 2\n").unwrap_err();
        assert_eq!((err.line, err.column), (3, 7));
        // A dedent to a level that never existed.
        let err = check_syntax(
            "class A:\n    def f(self):\n        pass\n  def g(self):\n        pass\n",
        )
        .unwrap_err();
        assert_eq!(err.line, 4);
        // A body that lost its statements.
        assert!(check_syntax("def f():\nreturn 1\n").is_err());
        assert!(check_syntax("def f():\n    # only a comment\n").is_err());
    }

    #[test]
    fn check_syntax_accepts_valid_layouts() {
        let src = r#"#!/usr/bin/env python
"""Docstring."""
import os, sys  # comment
from torch.utils.data import (
    DataLoader,
        Dataset,
)

@decorator(
  arg=1)
class Model(Base):
    """Doc."""
    x: int = 1
      # an oddly indented comment
    def f(self): return 1
    def g(self):
        if self.x: a = 1; b = 2
        s = """
  text at any indent
"""
        total = 1 + \
                2
        y = 1; \
            z = 2
        return [i
    for i in range(3)]

def h():
	if True:
		pass
	return DataLoader(
ds,
        num_workers=2)

match command:
    case [x, y]:
        pass
    case _:
        ...
"#;
        assert_eq!(check_syntax(src), Ok(()));
        assert_eq!(check_syntax("x = 1\r\nif x:\r\n    y = 2\r\n"), Ok(()));
    }
}

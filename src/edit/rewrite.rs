//! Editing one keyword argument of one DataLoader call, in place.
//!
//! Edits are computed from the syntax tree and touch only the bytes they must:
//! every other byte of the file (formatting, comments, trailing commas,
//! multi-line layout, line endings) is kept. After editing, the result is
//! parsed and scanned again and checked against what was intended; an edit
//! that would break the syntax or change anything else is refused.

use std::ops::Range;

use tree_sitter::{Node, Tree};

use super::scan::{
    all_children, argument_nodes, call_node, check_syntax, parse_python, scan_source, scan_tree,
    text, CallSite, ScanError, SyntaxError,
};

/// Why a keyword argument could not be set or removed.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error(
        "no DataLoader call of {file} starts at line {line}, column {column} any more \
         (the file changed since it was scanned)"
    )]
    SiteNotFound {
        file: String,
        line: usize,
        column: usize,
    },
    #[error("`{0}` is not a valid Python keyword-argument name")]
    InvalidName(String),
    #[error("the value for `{name}` is empty")]
    EmptyValue { name: String },
    #[error("the DataLoader call at line {line} passes `{name}` more than once")]
    DuplicateKwarg { name: String, line: usize },
    #[error(
        "the DataLoader call at line {line} takes a bare generator argument; \
         add parentheses around it before adding keyword arguments"
    )]
    GeneratorArgument { line: usize },
    #[error("the file already has a syntax error before editing: {0}")]
    SourceSyntax(#[source] SyntaxError),
    #[error("setting `{name}` would break the file: {source}")]
    BrokenSyntax {
        name: String,
        #[source]
        source: SyntaxError,
    },
    #[error("setting `{name}` did not come out as intended: {detail}")]
    Unexpected { name: String, detail: String },
}

/// The first site that starts on `line` (1-based), if any.
pub fn find_site(sites: &[CallSite], line: usize) -> Option<&CallSite> {
    sites.iter().find(|s| s.line == line)
}

/// Set (`Some(value)`) or remove (`None`) keyword argument `name` of the
/// DataLoader call `site` in `src`, returning the new source.
///
/// * present, `Some`: only the value's bytes are replaced;
/// * absent, `Some`: `name=value` is added after the last argument (before a
///   `**mapping` argument if there is one), following the call's layout: on
///   the same line for calls written on one line, on a new line with the same
///   indentation for calls with one argument per line (trailing-comma style
///   and trailing comments are kept);
/// * present, `None`: the argument and its separating comma are removed (its
///   whole line, with any comment on it, when it sits on a line of its own);
/// * absent, `None`: the source is returned unchanged.
///
/// `site` must come from scanning this same `src`: its `call_range` locates
/// the call, or, when that does not match (a site read back from JSON has an
/// empty range), its line, column and callee. `value` is Python source text
/// and is trimmed.
pub fn set_kwarg(
    src: &str,
    site: &CallSite,
    name: &str,
    value: Option<&str>,
) -> Result<String, RewriteError> {
    let value = check_request(src, name, value)?;

    let tree = parse_python(src, &site.file)?;
    let sites = scan_tree(&site.file, src, &tree);
    let not_found = || RewriteError::SiteNotFound {
        file: site.file.clone(),
        line: site.line,
        column: site.column,
    };
    let index = sites
        .iter()
        .position(|s| s.call_range == site.call_range && s.callee == site.callee)
        .or_else(|| {
            // A site that went through JSON has no byte range: locate it by
            // its position and callee instead.
            sites.iter().position(|s| {
                s.line == site.line && s.column == site.column && s.callee == site.callee
            })
        })
        .ok_or_else(not_found)?;
    let current = &sites[index];
    let call = call_node(&tree, &current.call_range).ok_or_else(not_found)?;
    let args = call
        .child_by_field_name("arguments")
        .ok_or_else(not_found)?;
    let Some(out) = keyword_edit(src, &tree, args, name, value, current.line, not_found)? else {
        return Ok(src.to_string());
    };
    verify(&sites, index, &out, name, value)?;
    Ok(out)
}

/// The name must be an identifier, a value not empty, the source valid:
/// the value, trimmed.
fn check_request<'v>(
    src: &str,
    name: &str,
    value: Option<&'v str>,
) -> Result<Option<&'v str>, RewriteError> {
    if !is_identifier(name) {
        return Err(RewriteError::InvalidName(name.to_string()));
    }
    let value = value.map(str::trim);
    if value == Some("") {
        return Err(RewriteError::EmptyValue {
            name: name.to_string(),
        });
    }
    check_syntax(src).map_err(RewriteError::SourceSyntax)?;
    Ok(value)
}

/// Sets, adds or removes keyword `name` in the argument list `args` of a
/// call at `line`: the new source, or `None` when there is nothing to do
/// (an absent keyword to remove).
fn keyword_edit(
    src: &str,
    tree: &Tree,
    args: Node<'_>,
    name: &str,
    value: Option<&str>,
    line: usize,
    not_found: impl Fn() -> RewriteError,
) -> Result<Option<String>, RewriteError> {
    if args.kind() != "argument_list" {
        return Err(RewriteError::GeneratorArgument { line });
    }
    let ctx = Ctx {
        src,
        tree,
        args,
        arg_nodes: argument_nodes(args),
        nl: if src.contains("\r\n") { "\r\n" } else { "\n" },
    };
    let matching: Vec<Node<'_>> = ctx
        .arg_nodes
        .iter()
        .copied()
        .filter(|a| {
            a.kind() == "keyword_argument"
                && a.child_by_field_name("name").map(|n| text(n, src)) == Some(name)
        })
        .collect();
    if matching.len() > 1 {
        return Err(RewriteError::DuplicateKwarg {
            name: name.to_string(),
            line,
        });
    }
    let edits = match (matching.first(), value) {
        (Some(kw), Some(v)) => {
            let val = kw.child_by_field_name("value").ok_or_else(&not_found)?;
            vec![(val.byte_range(), v.to_string())]
        }
        (None, Some(v)) => ctx.insert(&format!("{name}={v}")),
        (Some(kw), None) => ctx.remove(*kw),
        (None, None) => return Ok(None),
    };
    Ok(Some(apply(src, edits)))
}

/// Everything the layout decisions need about one call.
struct Ctx<'s, 't> {
    src: &'s str,
    tree: &'t Tree,
    args: Node<'t>,
    arg_nodes: Vec<Node<'t>>,
    nl: &'static str,
}

/// What follows a position up to the end of its line.
enum Rest {
    /// Only blanks; the line terminator starts at `.0`.
    Blank(usize),
    /// Blanks and a comment that ends at `.0` (where the terminator starts).
    Comment(usize),
    /// More code (e.g. a closing parenthesis).
    Code,
}

impl<'s, 't> Ctx<'s, 't> {
    /// Start of the line containing `pos`.
    fn line_start(&self, pos: usize) -> usize {
        self.src[..pos].rfind('\n').map(|i| i + 1).unwrap_or(0)
    }

    /// Position of the line terminator (`\n` or `\r\n`) after `pos`, or EOF.
    fn line_end(&self, pos: usize) -> usize {
        let end = self.src[pos..]
            .find('\n')
            .map(|i| pos + i)
            .unwrap_or(self.src.len());
        if end > pos && self.src.as_bytes()[end - 1] == b'\r' {
            end - 1
        } else {
            end
        }
    }

    /// Length of the line terminator at `pos` (0 at EOF).
    fn terminator_len(&self, pos: usize) -> usize {
        let rest = &self.src[pos..];
        if rest.starts_with("\r\n") {
            2
        } else if rest.starts_with('\n') {
            1
        } else {
            0
        }
    }

    /// The blanks before `node` on its line, if nothing else precedes it there.
    fn own_line_indent(&self, node: Node<'_>) -> Option<&'s str> {
        let start = node.start_byte();
        let prefix = &self.src[self.line_start(start)..start];
        prefix.chars().all(is_blank).then_some(prefix)
    }

    fn rest_of_line(&self, pos: usize) -> Rest {
        let skipped = self.src[pos..]
            .char_indices()
            .find(|(_, c)| !is_blank(*c))
            .map(|(i, _)| pos + i)
            .unwrap_or(self.src.len());
        if self.terminator_len(skipped) > 0 || skipped == self.src.len() {
            return Rest::Blank(skipped);
        }
        match self
            .tree
            .root_node()
            .descendant_for_byte_range(skipped, skipped + 1)
        {
            Some(n) if n.kind() == "comment" && n.start_byte() == skipped => {
                Rest::Comment(self.line_end(skipped))
            }
            _ => Rest::Code,
        }
    }

    /// The `,` token right after argument `arg` (comments skipped).
    fn comma_after(&self, arg: Node<'t>) -> Option<Node<'t>> {
        all_children(self.args)
            .into_iter()
            .skip_while(|c| c.id() != arg.id())
            .skip(1)
            .find(|c| c.kind() != "comment")
            .filter(|c| c.kind() == ",")
    }

    fn has_comment_in(&self, range: Range<usize>) -> bool {
        all_children(self.args).iter().any(|c| {
            c.kind() == "comment" && c.start_byte() >= range.start && c.end_byte() <= range.end
        })
    }

    fn insert(&self, kw: &str) -> Vec<(Range<usize>, String)> {
        let Some(last) = self.arg_nodes.last().copied() else {
            if !self.has_comment_in(self.args.byte_range()) {
                // `DataLoader()`, `DataLoader(\n)`: `DataLoader(kw)`.
                let inner = self.args.start_byte() + 1..self.args.end_byte() - 1;
                return vec![(inner, kw.to_string())];
            }
            // Only comments inside: right after the parenthesis.
            let at = self.args.start_byte() + 1;
            return vec![(at..at, kw.to_string())];
        };
        if let Some(spread) = self
            .arg_nodes
            .iter()
            .copied()
            .find(|a| a.kind() == "dictionary_splat")
        {
            return match self.own_line_indent(spread) {
                Some(indent) => {
                    let at = self.line_start(spread.start_byte());
                    vec![(at..at, format!("{indent}{kw},{}", self.nl))]
                }
                None => {
                    let at = spread.start_byte();
                    vec![(at..at, format!("{kw}, "))]
                }
            };
        }
        match self.own_line_indent(last) {
            Some(indent) => {
                // One argument per line: a new line after the last argument's,
                // after its comma and any comment that ends that line.
                let comma = self.comma_after(last);
                let anchor = comma.map(|c| c.end_byte()).unwrap_or(last.end_byte());
                let at = match self.rest_of_line(anchor) {
                    Rest::Comment(end) => end,
                    Rest::Blank(_) | Rest::Code => anchor,
                };
                let mut edits = Vec::new();
                if comma.is_none() {
                    edits.push((last.end_byte()..last.end_byte(), ",".to_string()));
                }
                let trailing = if comma.is_some() { "," } else { "" };
                edits.push((at..at, format!("{}{indent}{kw}{trailing}", self.nl)));
                edits
            }
            None => vec![(last.end_byte()..last.end_byte(), format!(", {kw}"))],
        }
    }

    fn remove(&self, kw: Node<'t>) -> Vec<(Range<usize>, String)> {
        let i = self
            .arg_nodes
            .iter()
            .position(|a| a.id() == kw.id())
            .unwrap_or(0);
        let only = self.arg_nodes.len() == 1;
        let inner = self.args.start_byte() + 1..self.args.end_byte().saturating_sub(1);
        if only && !self.has_comment_in(self.args.byte_range()) {
            // Nothing else inside the parentheses: `DataLoader()`.
            return vec![(inner, String::new())];
        }
        let comma = self.comma_after(kw);
        let after = comma.map(|c| c.end_byte()).unwrap_or(kw.end_byte());
        let prev = i.checked_sub(1).map(|p| self.arg_nodes[p]);
        let next = self.arg_nodes.get(i + 1).copied();

        // On a line of its own: drop the whole line (with its comment).
        if self.own_line_indent(kw).is_some() {
            let line_end = match self.rest_of_line(after) {
                Rest::Blank(e) | Rest::Comment(e) => Some(e),
                Rest::Code => None,
            };
            if let Some(e) = line_end {
                let start = self.line_start(kw.start_byte());
                let end = e + self.terminator_len(e);
                let mut edits = vec![(start..end, String::new())];
                if comma.is_none() && next.is_none() {
                    // It was the last argument without a trailing comma:
                    // the previous argument's comma becomes a stray one.
                    if let Some(pc) = prev.and_then(|p| self.comma_after(p)) {
                        edits.push((pc.byte_range(), String::new()));
                    }
                }
                return edits;
            }
        }

        match (prev, next) {
            // Followed by another argument.
            (_, Some(next)) => {
                if self.line_start(next.start_byte()) == self.line_start(kw.start_byte()) {
                    // `a, kw=1, b` -> `a, b`
                    vec![(kw.start_byte()..next.start_byte(), String::new())]
                } else {
                    // `a, kw=1,\n    b` -> `a,\n    b`
                    let mut start = kw.start_byte();
                    while start > 0 && is_blank(self.src.as_bytes()[start - 1] as char) {
                        start -= 1;
                    }
                    vec![(start..after, String::new())]
                }
            }
            // The last argument, after another one.
            (Some(prev), None) => {
                if !self.has_comment_in(prev.end_byte()..kw.start_byte()) {
                    // `a, kw=1)` -> `a)`; `a, kw=1,)` -> `a,)`
                    vec![(prev.end_byte()..kw.end_byte(), String::new())]
                } else {
                    let mut edits = Vec::new();
                    if let Some(pc) = self.comma_after(prev) {
                        edits.push((pc.byte_range(), String::new()));
                    }
                    let start = match self.own_line_indent(kw) {
                        Some(_) => self.line_start(kw.start_byte()),
                        None => kw.start_byte(),
                    };
                    edits.push((start..after, String::new()));
                    edits
                }
            }
            // The only argument, next to comments.
            (None, None) => {
                let mut end = after;
                while end < self.src.len() && is_blank(self.src.as_bytes()[end] as char) {
                    end += 1;
                }
                vec![(kw.start_byte()..end, String::new())]
            }
        }
    }
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\x0c'
}

/// Apply non-overlapping edits (insertions at the same point keep their order).
fn apply(src: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(src.len() + 64);
    let mut pos = 0;
    for (range, replacement) in edits {
        let start = range.start.max(pos);
        out.push_str(&src[pos..start]);
        out.push_str(&replacement);
        pos = range.end.max(start);
    }
    out.push_str(&src[pos..]);
    out
}

/// Check the edited source: it parses, has the same DataLoader calls, the
/// edited call differs exactly by the intended keyword argument, and the
/// other calls outside it are unchanged.
fn verify(
    before: &[CallSite],
    index: usize,
    out: &str,
    name: &str,
    value: Option<&str>,
) -> Result<(), RewriteError> {
    let unexpected = |detail: String| RewriteError::Unexpected {
        name: name.to_string(),
        detail,
    };
    check_syntax(out).map_err(|source| RewriteError::BrokenSyntax {
        name: name.to_string(),
        source,
    })?;
    let target = &before[index];
    let after = scan_source(&target.file, out)?;
    if after.len() != before.len() {
        return Err(unexpected(format!(
            "{} DataLoader calls before the edit, {} after",
            before.len(),
            after.len()
        )));
    }
    let edited = &after[index];
    if edited.call_range.start != target.call_range.start {
        return Err(unexpected("the DataLoader call moved".into()));
    }
    let mut expected = target.kwargs.clone();
    match value {
        Some(v) => {
            expected.insert(name.to_string(), serde_json::Value::String(v.to_string()));
        }
        None => {
            expected.shift_remove(name);
        }
    }
    let sorted = |m: &serde_json::Map<String, serde_json::Value>| {
        let mut v: Vec<(String, serde_json::Value)> =
            m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    if sorted(&edited.kwargs) != sorted(&expected) {
        return Err(unexpected(format!(
            "keyword arguments came out as {} instead of {}",
            serde_json::Value::Object(edited.kwargs.clone()),
            serde_json::Value::Object(expected)
        )));
    }
    if edited.positional != target.positional
        || edited.has_spread != target.has_spread
        || edited.callee != target.callee
    {
        return Err(unexpected(
            "the call's other arguments or callee changed".into(),
        ));
    }
    let old_end = target.call_range.end;
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        let inside = b.call_range.start >= target.call_range.start && b.call_range.end <= old_end;
        if i == index || inside {
            continue;
        }
        let same = b.callee == a.callee
            && b.positional == a.positional
            && b.has_spread == a.has_spread
            && b.kwargs == a.kwargs;
        if !same {
            return Err(unexpected(format!(
                "the DataLoader call at line {} changed too",
                b.line
            )));
        }
    }
    Ok(())
}

/// Set (`Some`) or remove (`None`) keyword argument `name` of *any* call
/// that starts at byte `call_start` (an `add_argument(...)`, a
/// `TrainingArguments(...)`), with the same layout rules as [`set_kwarg`].
/// The result must parse and the call must come out with exactly that
/// keyword changed; the caller checks the rest of the file.
pub(crate) fn set_call_kwarg(
    src: &str,
    call_start: usize,
    name: &str,
    value: Option<&str>,
) -> Result<String, RewriteError> {
    let value = check_request(src, name, value)?;
    let tree = parse_python(src, "<source>")?;
    let (line, column) = super::scan::line_col(src, call_start);
    let not_found = || RewriteError::SiteNotFound {
        file: "<source>".into(),
        line,
        column,
    };
    let mut node = tree
        .root_node()
        .descendant_for_byte_range(call_start, call_start)
        .ok_or_else(not_found)?;
    while !(node.kind() == "call" && node.start_byte() == call_start) {
        node = node.parent().ok_or_else(not_found)?;
    }
    let args = node
        .child_by_field_name("arguments")
        .ok_or_else(not_found)?;
    let Some(out) = keyword_edit(src, &tree, args, name, value, line, not_found)? else {
        return Ok(src.to_string());
    };
    check_syntax(&out).map_err(|source| RewriteError::BrokenSyntax {
        name: name.to_string(),
        source,
    })?;
    Ok(out)
}

const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c == '_' || c.is_alphabetic() => {}
        _ => return false,
    }
    chars.all(|c| c == '_' || c.is_alphanumeric()) && !PYTHON_KEYWORDS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scan `src`, apply `set_kwarg` to its `n`-th call, and check the
    /// invariants every edit must keep.
    fn edit_nth(src: &str, n: usize, name: &str, value: Option<&str>) -> String {
        let sites = scan_source("t.py", src).unwrap();
        let out = set_kwarg(src, &sites[n], name, value).unwrap();
        check_syntax(&out).unwrap();
        let after = scan_source("t.py", &out).unwrap();
        assert_eq!(after.len(), sites.len());
        match value {
            Some(v) => assert_eq!(after[n].kwarg(name), Some(v.trim())),
            None => assert_eq!(after[n].kwarg(name), None),
        }
        out
    }

    fn edit(src: &str, name: &str, value: Option<&str>) -> String {
        edit_nth(src, 0, name, value)
    }

    // ---- single line ------------------------------------------------------

    #[test]
    fn change_existing_value_only() {
        let src = "x = DataLoader(ds, batch_size=32, num_workers=0)  # keep\n";
        assert_eq!(
            edit(src, "num_workers", Some("4")),
            "x = DataLoader(ds, batch_size=32, num_workers=4)  # keep\n"
        );
        assert_eq!(
            edit(src, "batch_size", Some("os.cpu_count() // 2")),
            "x = DataLoader(ds, batch_size=os.cpu_count() // 2, num_workers=0)  # keep\n"
        );
    }

    #[test]
    fn add_single_line() {
        assert_eq!(
            edit("DataLoader(ds, batch_size=32)\n", "num_workers", Some("2")),
            "DataLoader(ds, batch_size=32, num_workers=2)\n"
        );
        assert_eq!(
            edit(
                "DataLoader(ds, batch_size=32,)\n",
                "num_workers",
                Some(" 2 ")
            ),
            "DataLoader(ds, batch_size=32, num_workers=2,)\n"
        );
    }

    #[test]
    fn add_to_empty_call() {
        assert_eq!(
            edit("loader = DataLoader()\n", "num_workers", Some("2")),
            "loader = DataLoader(num_workers=2)\n"
        );
    }

    #[test]
    fn add_to_empty_call_with_newline_or_comment() {
        assert_eq!(
            edit("loader = DataLoader(\n)\n", "num_workers", Some("2")),
            "loader = DataLoader(num_workers=2)\n"
        );
        assert_eq!(
            edit(
                "loader = DataLoader(  # none yet\n)\n",
                "num_workers",
                Some("2")
            ),
            "loader = DataLoader(num_workers=2  # none yet\n)\n"
        );
    }

    #[test]
    fn remove_single_line() {
        let src = "DataLoader(ds, num_workers=4, pin_memory=True)\n";
        assert_eq!(
            edit(src, "num_workers", None),
            "DataLoader(ds, pin_memory=True)\n"
        );
        assert_eq!(
            edit(src, "pin_memory", None),
            "DataLoader(ds, num_workers=4)\n"
        );
        assert_eq!(
            edit("DataLoader(ds, num_workers=4,)\n", "num_workers", None),
            "DataLoader(ds,)\n"
        );
        assert_eq!(
            edit("DataLoader(num_workers=4)\n", "num_workers", None),
            "DataLoader()\n"
        );
        assert_eq!(
            edit(
                "DataLoader(num_workers=4, shuffle=True)\n",
                "num_workers",
                None
            ),
            "DataLoader(shuffle=True)\n"
        );
    }

    #[test]
    fn remove_absent_is_a_no_op() {
        let src = "DataLoader(ds)\n";
        assert_eq!(edit(src, "num_workers", None), src);
    }

    // ---- multi-line, trailing comma ---------------------------------------

    const TRAILING: &str = "\
loader = DataLoader(
    dataset,
    batch_size=64,
    shuffle=True,
)
";

    #[test]
    fn add_multi_line_trailing_comma() {
        assert_eq!(
            edit(TRAILING, "num_workers", Some("4")),
            "\
loader = DataLoader(
    dataset,
    batch_size=64,
    shuffle=True,
    num_workers=4,
)
"
        );
    }

    #[test]
    fn change_multi_line() {
        assert_eq!(
            edit(TRAILING, "batch_size", Some("128")),
            TRAILING.replace("batch_size=64", "batch_size=128")
        );
    }

    #[test]
    fn remove_multi_line_trailing_comma() {
        assert_eq!(
            edit(TRAILING, "shuffle", None),
            "\
loader = DataLoader(
    dataset,
    batch_size=64,
)
"
        );
        assert_eq!(
            edit(TRAILING, "batch_size", None),
            "\
loader = DataLoader(
    dataset,
    shuffle=True,
)
"
        );
    }

    #[test]
    fn remove_only_argument_of_multi_line_call() {
        let src = "loader = DataLoader(\n    num_workers=2,\n)\n";
        assert_eq!(edit(src, "num_workers", None), "loader = DataLoader()\n");
    }

    // ---- multi-line, no trailing comma ------------------------------------

    const NO_TRAILING: &str = "\
def build():
    return DataLoader(
        dataset,
        batch_size=64,
        shuffle=True
    )
";

    #[test]
    fn add_multi_line_without_trailing_comma() {
        assert_eq!(
            edit(NO_TRAILING, "num_workers", Some("4")),
            "\
def build():
    return DataLoader(
        dataset,
        batch_size=64,
        shuffle=True,
        num_workers=4
    )
"
        );
    }

    #[test]
    fn remove_last_multi_line_without_trailing_comma() {
        assert_eq!(
            edit(NO_TRAILING, "shuffle", None),
            "\
def build():
    return DataLoader(
        dataset,
        batch_size=64
    )
"
        );
        assert_eq!(
            edit(NO_TRAILING, "batch_size", None),
            "\
def build():
    return DataLoader(
        dataset,
        shuffle=True
    )
"
        );
    }

    // ---- multi-line with comments -----------------------------------------

    #[test]
    fn add_after_comment_on_last_argument() {
        let src = "\
loader = DataLoader(
    dataset,  # training split
    batch_size=64,  # fits in memory
)
";
        assert_eq!(
            edit(src, "num_workers", Some("8")),
            "\
loader = DataLoader(
    dataset,  # training split
    batch_size=64,  # fits in memory
    num_workers=8,
)
"
        );
        let src = "\
loader = DataLoader(
    dataset,
    batch_size=64  # fits in memory
)
";
        assert_eq!(
            edit(src, "num_workers", Some("8")),
            "\
loader = DataLoader(
    dataset,
    batch_size=64,  # fits in memory
    num_workers=8
)
"
        );
    }

    #[test]
    fn comment_lines_between_arguments_are_kept() {
        let src = "\
loader = DataLoader(
    dataset,
    # workers: tuned by hand
    num_workers=2,  # was 0
    # pinned for GPU
    pin_memory=True,
)
";
        assert_eq!(
            edit(src, "num_workers", Some("6")),
            src.replace("num_workers=2", "num_workers=6")
        );
        assert_eq!(
            edit(src, "num_workers", None),
            "\
loader = DataLoader(
    dataset,
    # workers: tuned by hand
    # pinned for GPU
    pin_memory=True,
)
"
        );
        assert_eq!(
            edit(src, "pin_memory", None),
            "\
loader = DataLoader(
    dataset,
    # workers: tuned by hand
    num_workers=2,  # was 0
    # pinned for GPU
)
"
        );
    }

    #[test]
    fn remove_last_without_comma_after_commented_argument() {
        let src = "\
loader = DataLoader(
    dataset,  # the data
    num_workers=2
)
";
        assert_eq!(
            edit(src, "num_workers", None),
            "\
loader = DataLoader(
    dataset  # the data
)
"
        );
    }

    // ---- hanging indent ---------------------------------------------------

    #[test]
    fn hanging_indent() {
        let src = "loader = DataLoader(ds,\n                    batch_size=8)\n";
        assert_eq!(
            edit(src, "num_workers", Some("2")),
            "loader = DataLoader(ds,\n                    batch_size=8,\n                    num_workers=2)\n"
        );
        assert_eq!(edit(src, "batch_size", None), "loader = DataLoader(ds)\n");
    }

    #[test]
    fn several_per_line_multi_line() {
        let src = "DataLoader(\n    ds, batch_size=8,\n    shuffle=True, drop_last=True,\n)\n";
        assert_eq!(
            edit(src, "num_workers", Some("2")),
            "DataLoader(\n    ds, batch_size=8,\n    shuffle=True, drop_last=True, num_workers=2,\n)\n"
        );
        assert_eq!(
            edit(src, "shuffle", None),
            "DataLoader(\n    ds, batch_size=8,\n    drop_last=True,\n)\n"
        );
        assert_eq!(
            edit(src, "batch_size", None),
            "DataLoader(\n    ds,\n    shuffle=True, drop_last=True,\n)\n"
        );
    }

    // ---- **spread ---------------------------------------------------------

    #[test]
    fn add_with_spread_single_line() {
        assert_eq!(
            edit(
                "DataLoader(ds, batch_size=8, **kw)\n",
                "num_workers",
                Some("2")
            ),
            "DataLoader(ds, batch_size=8, num_workers=2, **kw)\n"
        );
        assert_eq!(
            edit("DataLoader(**kw)\n", "num_workers", Some("2")),
            "DataLoader(num_workers=2, **kw)\n"
        );
    }

    #[test]
    fn add_with_spread_multi_line() {
        let src = "\
loader = DataLoader(
    ds,
    batch_size=8,
    **cfg.loader,
)
";
        let out = edit(src, "num_workers", Some("2"));
        assert_eq!(
            out,
            "\
loader = DataLoader(
    ds,
    batch_size=8,
    num_workers=2,
    **cfg.loader,
)
"
        );
        assert!(scan_source("t.py", &out).unwrap()[0].has_spread);
    }

    #[test]
    fn change_and_remove_next_to_spread() {
        let src = "DataLoader(ds, num_workers=0, **kw)\n";
        assert_eq!(
            edit(src, "num_workers", Some("4")),
            "DataLoader(ds, num_workers=4, **kw)\n"
        );
        assert_eq!(edit(src, "num_workers", None), "DataLoader(ds, **kw)\n");
    }

    // ---- several calls, nesting, line endings ------------------------------

    #[test]
    fn only_the_chosen_call_changes() {
        let src = "\
train = DataLoader(train_ds, batch_size=32)
val = DataLoader(val_ds, batch_size=32)
";
        assert_eq!(
            edit_nth(src, 1, "num_workers", Some("2")),
            "\
train = DataLoader(train_ds, batch_size=32)
val = DataLoader(val_ds, batch_size=32, num_workers=2)
"
        );
        let sites = scan_source("t.py", src).unwrap();
        assert_eq!(find_site(&sites, 2), Some(&sites[1]));
        assert_eq!(find_site(&sites, 3), None);
    }

    #[test]
    fn nested_in_comprehension() {
        let src = "loaders = [DataLoader(d) for d in sets]\n";
        assert_eq!(
            edit(src, "pin_memory", Some("True")),
            "loaders = [DataLoader(d, pin_memory=True) for d in sets]\n"
        );
    }

    #[test]
    fn crlf_line_endings_are_kept() {
        let src = "loader = DataLoader(\r\n    ds,\r\n    batch_size=8,\r\n)\r\n";
        assert_eq!(
            edit(src, "num_workers", Some("2")),
            "loader = DataLoader(\r\n    ds,\r\n    batch_size=8,\r\n    num_workers=2,\r\n)\r\n"
        );
        assert_eq!(
            edit(src, "batch_size", None),
            "loader = DataLoader(\r\n    ds,\r\n)\r\n"
        );
    }

    // ---- refusals ---------------------------------------------------------

    #[test]
    fn refuses_bad_input() {
        let src = "DataLoader(ds)\n";
        let site = &scan_source("t.py", src).unwrap()[0];
        assert!(matches!(
            set_kwarg(src, site, "num workers", Some("2")),
            Err(RewriteError::InvalidName(_))
        ));
        assert!(matches!(
            set_kwarg(src, site, "lambda", Some("2")),
            Err(RewriteError::InvalidName(_))
        ));
        assert!(matches!(
            set_kwarg(src, site, "num_workers", Some("  ")),
            Err(RewriteError::EmptyValue { .. })
        ));
        // A value that is not one expression.
        assert!(matches!(
            set_kwarg(src, site, "num_workers", Some("2, shuffle=True")),
            Err(RewriteError::Unexpected { .. })
        ));
        assert!(matches!(
            set_kwarg(src, site, "num_workers", Some("(")),
            Err(RewriteError::BrokenSyntax { .. })
        ));
        assert!(matches!(
            set_kwarg(src, site, "num_workers", Some("2  # four")),
            Err(RewriteError::BrokenSyntax { .. }) | Err(RewriteError::Unexpected { .. })
        ));
        // A value that adds another DataLoader call.
        let err = set_kwarg(src, site, "sampler", Some("DataLoader(x)")).unwrap_err();
        assert!(err.to_string().contains("2 after"), "{err}");
    }

    #[test]
    fn site_read_back_from_json_is_found_by_position() {
        let src = "a = DataLoader(x)\nb = DataLoader(y)\n";
        let sites = scan_source("t.py", src).unwrap();
        let json = serde_json::to_string(&sites[1]).unwrap();
        let back: CallSite = serde_json::from_str(&json).unwrap();
        assert_eq!(back.call_range, 0..0);
        assert_eq!(
            set_kwarg(src, &back, "num_workers", Some("2")).unwrap(),
            "a = DataLoader(x)\nb = DataLoader(y, num_workers=2)\n"
        );
    }

    #[test]
    fn refuses_stale_site_and_broken_source() {
        let src = "DataLoader(ds)\n";
        let site = scan_source("t.py", src).unwrap()[0].clone();
        let moved = format!("\n{src}");
        assert!(matches!(
            set_kwarg(&moved, &site, "num_workers", Some("2")),
            Err(RewriteError::SiteNotFound { .. })
        ));
        let broken = "DataLoader(ds)\ndef f(:\n";
        assert!(matches!(
            set_kwarg(broken, &site, "num_workers", Some("2")),
            Err(RewriteError::SourceSyntax(_))
        ));
        let dup = "DataLoader(ds, num_workers=1, num_workers=2)\n";
        let dsite = &scan_source("t.py", dup).unwrap()[0];
        assert!(matches!(
            set_kwarg(dup, dsite, "num_workers", Some("3")),
            Err(RewriteError::DuplicateKwarg { .. })
        ));
        let generator = "DataLoader(x for x in y)\n";
        let gsite = &scan_source("t.py", generator).unwrap()[0];
        assert!(matches!(
            set_kwarg(generator, gsite, "num_workers", Some("3")),
            Err(RewriteError::GeneratorArgument { .. })
        ));
    }

    #[test]
    fn output_differs_only_in_the_edited_span() {
        let src = "\
import torch  # torch
from torch.utils.data import DataLoader


def make(ds):   # two blank lines above, odd spacing here
    return DataLoader( ds ,  batch_size = 32 )
";
        let out = edit(src, "num_workers", Some("3"));
        assert_eq!(
            out,
            src.replace("batch_size = 32 )", "batch_size = 32, num_workers=3 )")
        );
    }
}

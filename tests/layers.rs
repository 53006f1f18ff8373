//! The crate's layers, kept. `docs/architecture.md` holds the one table of
//! layers (between `<!-- layers:begin -->` and `<!-- layers:end -->`); this
//! test reads it, reads every `crate::` path of every file under `src/`
//! (`use` lines, `{}` groups over several lines, paths in code, and
//! `super::` chains that climb out of a top-level module), and fails when:
//!
//! * a module imports a module of a higher layer (it prints `file:line` and
//!   the line);
//! * modules of one layer import each other in a circle (imports within a
//!   layer are allowed when they form no circle);
//! * a top-level module of `src/lib.rs` has no place in the table, or the
//!   table names a module that does not exist, or names one twice.
//!
//! Comments (doc comments included: an intra-doc link is not an import)
//! and string literals are blanked before reading, and `#[cfg(test)]` code
//! counts like any other: a test that needs a higher layer belongs to that
//! layer's tests. Plain std, so the check costs no dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const DOC: &str = "docs/architecture.md";
const BEGIN: &str = "<!-- layers:begin -->";
const END: &str = "<!-- layers:end -->";

#[test]
fn no_import_goes_up_a_layer_and_no_layer_has_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = fs::read_to_string(root.join(DOC)).expect("docs/architecture.md");
    let layers = parse_layers(&doc).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    let lib = fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let modules = declared_modules(&lib);
    assert!(modules.len() > 10, "src/lib.rs declares {modules:?}");
    let files = source_files(root);
    let report = check(&layers, &modules, &files);
    // Shown with `--nocapture`: the graph the table admits.
    println!(
        "{} modules, {} edges between them; within a layer: {}",
        modules.len(),
        report.edges.len(),
        report
            .same_layer
            .iter()
            .map(|(a, b)| format!("{a} -> {b}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(
        report.errors.is_empty(),
        "the layers of {DOC} are broken:\n{}\n\nA module may import modules of its own layer (without a circle) \
         and of lower layers only. Move the item down, or the caller up; a new module takes a row in {DOC}.",
        report.errors.join("\n")
    );
}

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

/// Module name → layer number, from the rows between the markers:
/// `| 3 | `bench`, `measure` | … |`. The header and the `|---|` row are
/// the only rows without a number.
fn parse_layers(doc: &str) -> Result<BTreeMap<String, usize>, String> {
    let start = doc
        .find(BEGIN)
        .ok_or_else(|| format!("no `{BEGIN}` marker"))?;
    let end = doc[start..]
        .find(END)
        .map(|e| start + e)
        .ok_or_else(|| format!("no `{END}` marker after `{BEGIN}`"))?;
    let mut of = BTreeMap::new();
    let mut layers_seen = BTreeSet::new();
    for row in doc[start + BEGIN.len()..end].lines().map(str::trim) {
        if !row.starts_with('|') {
            continue;
        }
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let first = cells[0];
        if first.chars().all(|c| c == '-' || c == ':') || first.eq_ignore_ascii_case("layer") {
            continue;
        }
        let layer: usize = first
            .parse()
            .map_err(|_| format!("row `{row}`: the first cell is not a layer number"))?;
        if !layers_seen.insert(layer) {
            return Err(format!("layer {layer} has two rows"));
        }
        let names = backticked(cells.get(1).copied().unwrap_or(""));
        if names.is_empty() {
            return Err(format!("row `{row}`: no `module` names in the second cell"));
        }
        for name in names {
            if let Some(prev) = of.insert(name.clone(), layer) {
                return Err(format!("`{name}` is in layers {prev} and {layer}"));
            }
        }
    }
    if of.is_empty() {
        return Err(format!("no table rows between `{BEGIN}` and `{END}`"));
    }
    Ok(of)
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The top-level modules: `mod x;` / `pub mod x;` lines of `src/lib.rs`.
fn declared_modules(lib: &str) -> Vec<String> {
    let code = blank_comments_and_strings(lib);
    code.split(';')
        .filter_map(|stmt| {
            let words: Vec<&str> = stmt.split_whitespace().collect();
            let at = words.iter().rposition(|w| *w == "mod")?;
            (at + 2 == words.len()).then(|| words[at + 1].to_string())
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The sources
// ---------------------------------------------------------------------------

/// A file under `src/`: its path (for messages), its top-level module, how
/// deep its module sits below the crate root (src/x.rs and src/x/mod.rs: 1,
/// src/x/y.rs: 2), and its text.
struct SourceFile {
    path: String,
    module: String,
    depth: usize,
    text: String,
}

fn source_files(root: &Path) -> Vec<SourceFile> {
    let src = root.join("src");
    let mut paths = Vec::new();
    walk(&src, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(&src).ok()?.to_path_buf();
            let parts: Vec<String> = rel
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            // lib.rs only declares the modules; main.rs is the binary's
            // crate, whose `crate::` is not the library's.
            if parts.len() == 1 && (parts[0] == "lib.rs" || parts[0] == "main.rs") {
                return None;
            }
            let module = parts[0].trim_end_matches(".rs").to_string();
            let depth = if parts.last().is_some_and(|f| f == "mod.rs") {
                parts.len() - 1
            } else {
                parts.len()
            };
            Some(SourceFile {
                path: format!("src/{}", rel.display()),
                module,
                depth,
                text: fs::read_to_string(&p).ok()?,
            })
        })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// One reference from a file to a top-level module: `crate::name…`, a
/// `name` in a `crate::{…}` group, or `super::…::name` past the root.
#[derive(Debug, PartialEq)]
struct Ref {
    name: String,
    /// 1-based.
    line: usize,
}

/// The text with every comment and string/char literal replaced by spaces
/// (newlines kept), so byte offsets and line numbers stay those of the file.
fn blank_comments_and_strings(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let ident_before = i > 0 && is_ident(b[i - 1]);
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |e| i + e);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut j, mut nest) = (i + 2, 1);
                while j < b.len() && nest > 0 {
                    if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                        nest += 1;
                        j += 2;
                    } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                        nest -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            // r"…", r#"…"#, br"…" (the `b`, if any, was passed as an ident char).
            b'r' if !ident_before
                || (i > 0 && b[i - 1] == b'b' && (i < 2 || !is_ident(b[i - 2]))) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    let close: Vec<u8> = std::iter::once(b'"')
                        .chain(std::iter::repeat_n(b'#', hashes))
                        .collect();
                    let body = i + 2 + hashes;
                    let end = b[body..]
                        .windows(close.len())
                        .position(|w| w == close.as_slice())
                        .map_or(b.len(), |e| body + e + close.len());
                    blank(&mut out, i, end);
                    i = end;
                } else {
                    i += 1;
                }
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i, j + 1);
                i = j + 1;
            }
            // A char literal ('x', '\n', '\u{1F600}', 'é'); else a lifetime.
            b'\'' => {
                // The escaped character itself may be a quote: '\''.
                let j = if b.get(i + 1) == Some(&b'\\') {
                    b.get(i + 3..)
                        .and_then(|rest| rest.iter().position(|&c| c == b'\''))
                        .map(|e| i + 3 + e)
                } else {
                    let len = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 1 + len)
                };
                match j {
                    Some(j) => {
                        blank(&mut out, i, j + 1);
                        i = j + 1;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).expect("only whole characters are blanked")
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The identifier at `i` and the offset after it.
fn ident_at(b: &[u8], i: usize) -> Option<(&str, usize)> {
    let end = b[i..]
        .iter()
        .position(|&c| !is_ident(c))
        .map_or(b.len(), |e| i + e);
    (end > i).then(|| (std::str::from_utf8(&b[i..end]).unwrap(), end))
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// After `::` at `i`: the offset past it, if there is one (spaces allowed).
fn after_colons(b: &[u8], i: usize) -> Option<usize> {
    let i = skip_ws(b, i);
    (b.get(i) == Some(&b':') && b.get(i + 1) == Some(&b':')).then(|| skip_ws(b, i + 2))
}

/// The top-level names a path names from its first segment at `i`: one
/// identifier, or each first identifier of a `{…}` group.
fn heads(b: &[u8], i: usize, out: &mut Vec<(String, usize)>) {
    if b.get(i) != Some(&b'{') {
        if let Some((name, _)) = ident_at(b, i) {
            out.push((name.to_string(), i));
        }
        return;
    }
    let mut j = i + 1;
    let mut item_start = true;
    let mut depth = 0usize;
    while j < b.len() {
        match b[j] {
            b'{' => depth += 1,
            b'}' if depth == 0 => return,
            b'}' => depth -= 1,
            b',' if depth == 0 => item_start = true,
            c if c.is_ascii_whitespace() => {}
            _ if item_start && depth == 0 => {
                item_start = false;
                if let Some((name, end)) = ident_at(b, j) {
                    if name != "self" {
                        out.push((name.to_string(), j));
                    }
                    j = end;
                    continue;
                }
            }
            _ => {}
        }
        j += 1;
    }
}

/// Every reference of a file to a top-level module (its own included).
/// `depth`: how deep the file's module is below the crate root.
fn crate_refs(text: &str, depth: usize) -> Vec<Ref> {
    let code = blank_comments_and_strings(text);
    let b = code.as_bytes();
    let mut found: Vec<(String, usize)> = Vec::new();
    // Inline `mod x { … }` blocks open at this point: each adds a level.
    let mut braces = 0usize;
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut pending_mod = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'{' {
            braces += 1;
            if pending_mod {
                inline_mods.push(braces);
                pending_mod = false;
            }
            i += 1;
            continue;
        }
        if c == b'}' {
            if inline_mods.last() == Some(&braces) {
                inline_mods.pop();
            }
            braces = braces.saturating_sub(1);
            i += 1;
            continue;
        }
        if c == b';' {
            pending_mod = false;
        }
        if !is_ident(c) || (i > 0 && is_ident(b[i - 1])) {
            i += 1;
            continue;
        }
        let (word, end) = ident_at(b, i).unwrap();
        // A path's first segment: not after `::` (so `a::crate` is not one).
        let before = code[..i].trim_end();
        let first_segment = !before.ends_with("::");
        match word {
            "mod" => {
                if let Some((_, after)) = ident_at(b, skip_ws(b, end)) {
                    pending_mod = b.get(skip_ws(b, after)) == Some(&b'{');
                }
            }
            "crate" if first_segment => {
                if let Some(at) = after_colons(b, end) {
                    heads(b, at, &mut found);
                }
            }
            "super" if first_segment => {
                let mut ups = 1;
                let mut at = after_colons(b, end);
                while let Some(a) = at {
                    match ident_at(b, a) {
                        Some(("super", e)) => {
                            ups += 1;
                            at = after_colons(b, e);
                        }
                        _ => break,
                    }
                }
                if let Some(a) = at {
                    if ups >= depth + inline_mods.len() {
                        heads(b, a, &mut found);
                    }
                }
            }
            _ => {}
        }
        i = end;
    }
    found
        .into_iter()
        .map(|(name, at)| Ref {
            name,
            line: 1 + b[..at].iter().filter(|&&c| c == b'\n').count(),
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The check
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Report {
    errors: Vec<String>,
    /// Every edge between two top-level modules, with where it first shows.
    edges: BTreeMap<(String, String), String>,
    same_layer: Vec<(String, String)>,
}

fn check(layers: &BTreeMap<String, usize>, modules: &[String], files: &[SourceFile]) -> Report {
    let mut r = Report::default();
    let declared: BTreeSet<&String> = modules.iter().collect();
    for m in modules {
        if !layers.contains_key(m) {
            r.errors.push(format!(
                "src/lib.rs: module `{m}` has no layer: give it a row's place in {DOC}"
            ));
        }
    }
    for m in layers.keys() {
        if !declared.contains(m) {
            r.errors
                .push(format!("{DOC}: `{m}` is not a module of src/lib.rs"));
        }
    }
    for f in files {
        let Some(&from) = layers.get(&f.module) else {
            continue;
        };
        let lines: Vec<&str> = f.text.lines().collect();
        for rf in crate_refs(&f.text, f.depth) {
            if rf.name == f.module || !declared.contains(&rf.name) {
                // Its own module, or an item of the crate root (none today).
                continue;
            }
            let Some(&to) = layers.get(&rf.name) else {
                continue;
            };
            let at = format!(
                "{}:{}: {}",
                f.path,
                rf.line,
                lines.get(rf.line - 1).map_or("", |l| l.trim())
            );
            if to > from {
                r.errors.push(format!(
                    "{at}\n    `{}` (layer {from}) imports `{}` (layer {to})",
                    f.module, rf.name
                ));
            }
            r.edges
                .entry((f.module.clone(), rf.name.clone()))
                .or_insert(at);
        }
    }
    r.same_layer = r
        .edges
        .keys()
        .filter(|(a, b)| layers.get(a) == layers.get(b))
        .cloned()
        .collect();
    if let Some(circle) = find_circle(&r.same_layer) {
        let steps: Vec<String> = circle
            .windows(2)
            .map(|w| {
                let at = &r.edges[&(w[0].clone(), w[1].clone())];
                format!("    {} -> {}   ({at})", w[0], w[1])
            })
            .collect();
        r.errors.push(format!(
            "a circle within layer {}:\n{}",
            layers[&circle[0]],
            steps.join("\n")
        ));
    }
    r
}

/// A circle among the edges, as its modules with the first repeated last.
fn find_circle(edges: &[(String, String)]) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        next.entry(a).or_default().push(b);
    }
    fn visit<'a>(
        n: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| *p == n) {
            let mut c: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
            c.push(n.to_string());
            return Some(c);
        }
        if !done.insert(n) {
            return None;
        }
        path.push(n);
        for m in next.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for start in next.keys() {
        if let Some(c) = visit(start, &next, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

// ---------------------------------------------------------------------------
// The checker's own tests: each would pass a broken layering if it failed.
// ---------------------------------------------------------------------------

fn file(path: &str, module: &str, depth: usize, text: &str) -> SourceFile {
    SourceFile {
        path: path.into(),
        module: module.into(),
        depth,
        text: text.into(),
    }
}

fn names(refs: &[Ref]) -> Vec<(&str, usize)> {
    refs.iter().map(|r| (r.name.as_str(), r.line)).collect()
}

#[test]
fn the_reader_finds_use_lines_groups_over_lines_and_paths_in_code() {
    let src = r##"use crate::alpha::A;
use crate::{
    beta::{self, B},
    gamma,
    self,
};
pub use crate :: delta::D;
fn f() -> crate::epsilon::E { crate::zeta::g(); x::crate_like::h() }
// crate::comment::X
/// [`crate::doclink`]
/* crate::block /* nested crate::inner */ */
const S: &str = "crate::string";
const R: &str = r#"crate::raw "quoted" "#;
const C: char = '"'; const Q: [char; 2] = ['\'', '\u{22}']; fn after_char() { crate::eta::i() }
fn lt<'a>(x: &'a str) -> crate::theta::T<'a> { todo!() }
"##;
    assert_eq!(
        names(&crate_refs(src, 1)),
        [
            ("alpha", 1),
            ("beta", 3),
            ("gamma", 4),
            ("delta", 7),
            ("epsilon", 8),
            ("zeta", 8),
            ("eta", 14),
            ("theta", 15)
        ]
    );
}

#[test]
fn super_counts_only_when_it_climbs_out_of_the_top_level_module() {
    // src/a/b.rs is two deep: one `super` is `a`, two are the crate root.
    let nested = "use super::sibling::X;\nuse super::super::other::{Y, Z};\n";
    assert_eq!(names(&crate_refs(nested, 2)), [("other", 2)]);
    // An inline test module adds a level: in src/a.rs, `super::super` from
    // `mod tests` is the root too; outside it, one `super` already is.
    let inline = "mod tests {\n    use super::super::up::Q;\n    use super::own;\n}\nfn f() { super::root::g() }\n";
    assert_eq!(names(&crate_refs(inline, 1)), [("up", 2), ("root", 5)]);
}

#[test]
fn an_import_of_a_higher_layer_is_named_with_its_file_line_and_text() {
    let layers: BTreeMap<String, usize> = [("low".into(), 0), ("high".into(), 1)].into();
    let modules = vec!["low".to_string(), "high".to_string()];
    let files = [
        file("src/high.rs", "high", 1, "use crate::low::Thing;\n"),
        file(
            "src/low/part.rs",
            "low",
            2,
            "use std::fmt;\n\nuse crate::{\n    high::Up,\n};\n",
        ),
    ];
    let r = check(&layers, &modules, &files);
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert!(
        r.errors[0].starts_with("src/low/part.rs:4: high::Up,"),
        "{}",
        r.errors[0]
    );
    assert!(r.errors[0].contains("`low` (layer 0) imports `high` (layer 1)"));
    // Downward alone is fine.
    let r = check(&layers, &modules, &files[..1]);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
}

#[test]
fn a_circle_within_a_layer_fails_and_a_chain_does_not() {
    let layers: BTreeMap<String, usize> =
        [("a".into(), 1), ("b".into(), 1), ("c".into(), 1)].into();
    let modules: Vec<String> = layers.keys().cloned().collect();
    let chain = [
        file("src/a.rs", "a", 1, "use crate::b;\n"),
        file("src/b.rs", "b", 1, "use crate::c;\n"),
    ];
    let r = check(&layers, &modules, &chain);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.same_layer.len(), 2);
    let circle = [
        file("src/a.rs", "a", 1, "use crate::b;\n"),
        file("src/b.rs", "b", 1, "use crate::c;\n"),
        file("src/c.rs", "c", 1, "fn f() { crate::a::g() }\n"),
    ];
    let r = check(&layers, &modules, &circle);
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert!(
        r.errors[0].contains("a circle within layer 1"),
        "{}",
        r.errors[0]
    );
    assert!(
        r.errors[0].contains("c -> a   (src/c.rs:1: fn f() { crate::a::g() })"),
        "{}",
        r.errors[0]
    );
}

#[test]
fn every_module_needs_a_row_and_every_row_a_module() {
    let layers: BTreeMap<String, usize> = [("old".into(), 0)].into();
    let r = check(&layers, &["new".to_string()], &[]);
    assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
    assert!(r.errors[0].contains("module `new` has no layer"));
    assert!(r.errors[1].contains("`old` is not a module of src/lib.rs"));
}

#[test]
fn the_table_is_read_between_its_markers_and_bad_rows_are_refused() {
    let doc = format!(
        "| 9 | `outside` | not read |\n{BEGIN}\n| Layer | Modules | What |\n|---|---|---|\n| 0 | `error`, `fsio` | leaves |\n| 1 | `config` | the workspace |\n{END}\n"
    );
    let layers = parse_layers(&doc).unwrap();
    assert_eq!(
        layers.into_iter().collect::<Vec<_>>(),
        [
            ("config".into(), 1),
            ("error".into(), 0),
            ("fsio".into(), 0)
        ]
    );
    let twice = format!("{BEGIN}\n| 0 | `a` |\n| 1 | `a` |\n{END}");
    assert!(parse_layers(&twice)
        .unwrap_err()
        .contains("`a` is in layers 0 and 1"));
    let no_number = format!("{BEGIN}\n| zero | `a` |\n{END}");
    assert!(parse_layers(&no_number).is_err());
    assert!(parse_layers("no markers").is_err());
    assert_eq!(
        declared_modules("//! doc mod fake;\npub mod a;\n#[cfg(test)]\nmod b;\nmod c {\n}\n"),
        ["a", "b"]
    );
}

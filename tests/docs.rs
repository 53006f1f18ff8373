//! The documentation holds together.
//!
//! - Every relative link in `README.md` and `docs/*.md` resolves: the file (or folder) exists,
//!   and a `#anchor` names a heading of the target, slugged as GitHub slugs headings.
//! - No source file (nor the README and docs themselves) cites a document the repository does
//!   not hold: the project's private design notes (`DESIGN`, `DESIGN.md`), notes on the Claude
//!   CLI (`CLAUDE-CLI.md`), anything under `../shared/`, a `docs/<name>.md` that does not exist,
//!   or any other path to a Markdown file of the repository that is not there.
//!
//! The checkers take the repository root as an argument, so the unit checks at the end run them
//! on small synthetic trees and prove they fail on bad input.

use crate::support::slot;
use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Component, Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------------------------
// Markdown: headings, anchors, links
// ---------------------------------------------------------------------------------------------

/// The lines of a Markdown text outside fenced code blocks, with their 1-based numbers.
fn prose_lines(md: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in md.lines().enumerate() {
        let t = line.trim_start();
        let marker = if t.starts_with("```") {
            Some("```")
        } else if t.starts_with("~~~") {
            Some("~~~")
        } else {
            None
        };
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// `text` without its inline code spans (a link inside backticks is not a link).
fn without_code_spans(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + ticks..];
        let closer = "`".repeat(ticks);
        match after.find(&closer) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                out.push_str(&rest[start..]);
                return out;
            }
        }
    }
    out.push_str(rest);
    out
}

/// GitHub's anchor for a heading's text: the text as rendered (code spans keep their content,
/// links their text), lowercased, with every character but letters, digits, `_`, `-` and spaces
/// dropped, and spaces turned into `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[text](target)` renders as `text`.
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a Markdown text's headings give, the repeats numbered as GitHub does
/// (`a`, `a-1`, `a-2`).
fn anchors(md: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(md) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#'));
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The link targets of a Markdown text, with their line: `[text](target)`, `![alt](target)`,
/// and reference definitions `[label]: target`. Code blocks and code spans are skipped; a
/// title after the target (`(target "title")`) and `<…>` around it are dropped.
fn links(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(md) {
        let line = without_code_spans(line);
        let t = line.trim_start();
        if t.starts_with('[') {
            if let Some(i) = t.find("]: ") {
                if !t[..i].contains("](") {
                    out.push((n, clean_target(&t[i + 3..])));
                    continue;
                }
            }
        }
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            // The target ends at the `)` that closes the one opened by `](`.
            let mut depth = 0usize;
            let mut end = None;
            for (j, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = Some(j);
                        break;
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            out.push((n, clean_target(&after[..end])));
            rest = &after[end + 1..];
        }
    }
    out
}

fn clean_target(t: &str) -> String {
    let t = t.trim();
    let t = t.split_once(' ').map_or(t, |(target, _title)| target);
    t.trim_start_matches('<').trim_end_matches('>').to_string()
}

/// `a/./b/../c` → `a/c`, without touching the file system.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// The broken links of one Markdown file of the repository at `root` (`file` relative to it),
/// each as `file:line: target: why`.
fn broken_links(root: &Path, file: &Path) -> Vec<String> {
    let md = fs::read_to_string(root.join(file)).unwrap_or_default();
    let dir = file.parent().unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for (n, target) in links(&md) {
        let at = format!("{}:{n}: {target}", file.display());
        if target.is_empty() {
            out.push(format!("{at}: empty link"));
            continue;
        }
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else if path.starts_with('/') {
            out.push(format!(
                "{at}: an absolute path; write it relative to the file"
            ));
            continue;
        } else {
            normalize(&dir.join(path))
        };
        if resolved.starts_with("..") {
            out.push(format!("{at}: points outside the repository"));
            continue;
        }
        let full = root.join(&resolved);
        if !full.exists() {
            out.push(format!("{at}: {} does not exist", resolved.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            if full.extension().is_some_and(|e| e == "md") {
                let heads = anchors(&fs::read_to_string(&full).unwrap_or_default());
                if !heads.contains(anchor) {
                    out.push(format!(
                        "{at}: no heading of {} has the anchor #{anchor}",
                        resolved.display()
                    ));
                }
            }
        }
    }
    out
}

/// `README.md` and every `docs/*.md` of the repository at `root`, relative to it.
fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md")];
    if let Ok(entries) = fs::read_dir(root.join("docs")) {
        let mut docs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .map(|p| PathBuf::from("docs").join(p.file_name().unwrap()))
            .collect();
        docs.sort();
        files.extend(docs);
    }
    files
}

// ---------------------------------------------------------------------------------------------
// Citations in source files
// ---------------------------------------------------------------------------------------------

/// The files whose text may cite a document, relative to `root`: `src/**`, `tests/**` (but not
/// the report snapshots, nor this file, whose synthetic inputs cite on purpose), `scripts/`, `Makefile`,
/// `examples/**`, `bench/*.sh|py`, `benches/`, `prompts/`, `policies/`, `CLAUDE.md`,
/// `build.rs`, `Cargo.toml`, `pyproject.toml`, and the README and docs themselves.
fn source_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, rel: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(root.join(rel)) else {
            return;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "__pycache__" || name == "target" {
                continue;
            }
            let path = rel.join(&*name);
            if e.path().is_dir() {
                walk(root, &path, keep, out);
            } else if keep(&path) {
                out.push(path);
            }
        }
    }
    let text = |p: &Path| {
        p.extension().is_some_and(|e| {
            [
                "rs", "py", "sh", "md", "toml", "txt", "yaml", "yml", "json", "cfg",
            ]
            .contains(&e.to_str().unwrap_or(""))
        })
    };
    let mut out = Vec::new();
    walk(root, Path::new("src"), &text, &mut out);
    walk(
        root,
        Path::new("tests"),
        // This file's own checks hold bad citations on purpose.
        &|p: &Path| text(p) && !p.starts_with("tests/snapshots") && p != Path::new("tests/docs.rs"),
        &mut out,
    );
    walk(root, Path::new("scripts"), &text, &mut out);
    walk(root, Path::new("examples"), &text, &mut out);
    walk(root, Path::new("benches"), &text, &mut out);
    walk(root, Path::new("prompts"), &text, &mut out);
    walk(root, Path::new("policies"), &text, &mut out);
    walk(
        root,
        Path::new("bench"),
        &|p: &Path| {
            p.parent() == Some(Path::new("bench"))
                && p.extension().is_some_and(|e| e == "sh" || e == "py")
        },
        &mut out,
    );
    for f in [
        "Makefile",
        "CLAUDE.md",
        "build.rs",
        "Cargo.toml",
        "pyproject.toml",
    ] {
        if root.join(f).is_file() {
            out.push(PathBuf::from(f));
        }
    }
    out.extend(doc_files(root));
    out
}

/// Every Markdown file name in the repository (for bare citations such as `RESULTS.md`).
fn md_names(root: &Path) -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if e.path().is_dir() {
                walk(&e.path(), out);
            } else if name.ends_with(".md") {
                out.insert(name);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root, &mut out);
    out
}

/// Whether `word` occurs in `line` as a whole word of capitals: not inside an identifier
/// (`DESIGN_X`, `MY_DESIGN`) nor a longer word.
fn has_word(line: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(word).any(|(i, _)| {
        !line[..i].chars().next_back().is_some_and(ident)
            && !line[i + word.len()..].chars().next().is_some_and(ident)
    })
}

/// The citations of documents the repository at `root` does not hold, in the text of `file`
/// (relative to `root`), each as `file:line: why`.
fn bad_citations(root: &Path, file: &Path, text: &str, names: &BTreeSet<String>) -> Vec<String> {
    let dir = file.parent().unwrap_or(Path::new(""));
    let top_dirs: BTreeSet<String> = fs::read_dir(root)
        .map(|es| {
            es.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.') && n != "target")
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = format!("{}:{}", file.display(), i + 1);
        if line.contains("../shared/") || line.contains("shared/seed") {
            out.push(format!(
                "{at}: cites ../shared/, which is not in the repository"
            ));
        }
        if line.contains("CLAUDE-CLI") {
            out.push(format!(
                "{at}: cites CLAUDE-CLI.md, which is not in the repository"
            ));
        }
        if has_word(line, "DESIGN") {
            out.push(format!(
                "{at}: cites DESIGN, which is not in the repository"
            ));
        }
        // Paths to Markdown files: runs of path characters that end in `.md`.
        let path_char = |c: char| c.is_alphanumeric() || "_./-{}<>*$".contains(c);
        let mut start = None;
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        for (k, &(pos, c)) in chars.iter().enumerate() {
            if path_char(c) {
                start.get_or_insert(pos);
            }
            let ends = !path_char(c) || k + 1 == chars.len();
            if let (true, Some(s)) = (ends, start) {
                let end = if path_char(c) {
                    pos + c.len_utf8()
                } else {
                    pos
                };
                let token = line[s..end].trim_end_matches('.');
                start = None;
                if !token.ends_with(".md") || token.contains(['{', '}', '<', '>', '*', '$']) {
                    continue;
                }
                if token.starts_with("CLAUDE-CLI") || token.starts_with("DESIGN") {
                    continue; // already reported above
                }
                let first = token.split('/').next().unwrap_or("");
                if token.contains("shared/") {
                    continue; // already reported above
                }
                if token.starts_with("runs/") && token != "runs/README.md" {
                    continue; // a file a run writes into its folder
                }
                let missing = if token.starts_with("./") || token.starts_with("../") {
                    let p = normalize(&dir.join(token));
                    p.starts_with("..") || !root.join(&p).exists()
                } else if token.contains('/') {
                    (first == "docs" || top_dirs.contains(first)) && !root.join(token).exists()
                } else {
                    // A bare name in capitals (`RESULTS.md`, `STYLE.md`) names a document;
                    // a lowercase one (`report.md`, `prompt.md`) is a file a run writes.
                    let stem = token.trim_end_matches(".md");
                    let capitals = stem.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                        && stem.chars().all(|c| !c.is_lowercase());
                    capitals && !names.contains(token)
                };
                if missing {
                    out.push(format!(
                        "{at}: cites {token}, which is not in the repository"
                    ));
                }
            }
        }
    }
    out
}

fn all_bad_citations(root: &Path) -> Vec<String> {
    let names = md_names(root);
    let mut out = Vec::new();
    for f in source_files(root) {
        let Ok(text) = fs::read_to_string(root.join(&f)) else {
            continue; // not UTF-8 text
        };
        out.extend(bad_citations(root, &f, &text, &names));
    }
    out
}

fn all_broken_links(root: &Path) -> Vec<String> {
    doc_files(root)
        .iter()
        .flat_map(|f| broken_links(root, f))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The repository
// ---------------------------------------------------------------------------------------------

#[test]
fn every_relative_link_of_the_readme_and_docs_resolves() {
    let _run = slot();
    let broken = all_broken_links(&repo());
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn no_source_file_cites_a_document_the_repository_does_not_hold() {
    let _run = slot();
    let bad = all_bad_citations(&repo());
    assert!(
        bad.is_empty(),
        "citations of documents not in the repository:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_readme_is_a_front_page_and_docs_hold_the_manual() {
    let _run = slot();
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; the manual belongs in docs/"
    );
    // The two commands stay at the very top.
    let top: Vec<&str> = readme.lines().take(6).collect();
    assert!(top.iter().any(|l| l.starts_with("make demo")), "{top:?}");
    assert!(top.iter().any(|l| l.starts_with("make test")), "{top:?}");
    // Every docs page is reachable from the README.
    let linked: BTreeSet<String> = links(&readme).into_iter().map(|(_, t)| t).collect();
    for f in doc_files(&repo()).iter().skip(1) {
        let name = f.to_string_lossy().into_owned();
        assert!(
            linked
                .iter()
                .any(|t| t.split('#').next() == Some(name.as_str())),
            "README.md does not link {name}"
        );
    }
}

#[test]
fn the_message_that_sends_users_to_docs_names_a_file_that_exists() {
    let _run = slot();
    // probe.rs tells users of a build without the `libtorch` feature where to read on.
    let probe = fs::read_to_string(repo().join("src/probe.rs")).unwrap();
    assert!(probe.contains("docs/probe.md"));
    assert!(repo().join("docs/probe.md").is_file());
}

// ---------------------------------------------------------------------------------------------
// The checkers themselves, on synthetic trees
// ---------------------------------------------------------------------------------------------

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = d.path().join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    d
}

#[test]
fn slugs_follow_github() {
    let _run = slot();
    assert_eq!(
        slug("The compute side (`[compute]`)"),
        "the-compute-side-compute"
    );
    assert_eq!(
        slug("Short commands (`--epochs 1`)"),
        "short-commands---epochs-1"
    );
    assert_eq!(
        slug("What is checked (guardrails)"),
        "what-is-checked-guardrails"
    );
    assert_eq!(slug("`tuneloop doctor`"), "tuneloop-doctor");
    assert_eq!(slug("The epochs' restarts"), "the-epochs-restarts");
    assert_eq!(slug("See [the docs](docs/a.md) now"), "see-the-docs-now");
    assert_eq!(slug("手順 (tuneloop)"), "手順-tuneloop");
    let a = anchors("# A\n## A\n```\n# not a heading\n```\n### B b\n#nospace\n");
    assert_eq!(
        a.into_iter().collect::<Vec<_>>(),
        vec!["a".to_string(), "a-1".into(), "b-b".into()]
    );
}

#[test]
fn links_are_found_outside_code_only() {
    let _run = slot();
    let md = "See [a](docs/a.md#x) and ![p](docs/p.png \"title\").\n\
              `[not](a link)` here\n\
              ```\n[not](either)\n```\n\
              [ref]: docs/b.md\n\
              [nested](f(1).md)\n";
    let got: Vec<String> = links(md).into_iter().map(|(_, t)| t).collect();
    assert_eq!(got, ["docs/a.md#x", "docs/p.png", "docs/b.md", "f(1).md"]);
}

#[test]
fn the_link_checker_fails_on_a_missing_file_a_missing_anchor_and_an_escape() {
    let _run = slot();
    let good = tree(&[
        (
            "README.md",
            "# T\n[m](docs/m.md#two-words) [s](#t) [p](docs/p.png) [w](https://x.y/z.md)\n",
        ),
        (
            "docs/m.md",
            "# M\n## Two words\n[back](../README.md#t) [self](#m)\n",
        ),
        ("docs/p.png", ""),
    ]);
    assert_eq!(all_broken_links(good.path()), Vec::<String>::new());

    let bad = tree(&[
        (
            "README.md",
            "# T\n[gone](docs/gone.md)\n[anchor](docs/m.md#three)\n[here](#nowhere)\n\
             [out](../shared/seed/x.txt)\n[abs](/docs/m.md)\n",
        ),
        ("docs/m.md", "# M\n```\n## three\n```\n"),
    ]);
    let broken = all_broken_links(bad.path());
    assert_eq!(broken.len(), 5, "{broken:#?}");
    assert!(
        broken[0].contains("docs/gone.md does not exist"),
        "{}",
        broken[0]
    );
    assert!(broken[1].contains("#three"), "{}", broken[1]);
    assert!(broken[2].contains("#nowhere"), "{}", broken[2]);
    assert!(
        broken[3].contains("outside the repository"),
        "{}",
        broken[3]
    );
    assert!(broken[4].contains("absolute path"), "{}", broken[4]);
}

#[test]
fn the_citation_checker_fails_on_documents_the_repository_does_not_hold() {
    let _run = slot();
    let bad = tree(&[
        ("README.md", "# T\n"),
        ("docs/a.md", "# A\n"),
        ("bench/RESULTS.md", ""),
        (
            "src/main.rs",
            "//! DESIGN's exit codes.\n\
             //! See `CLAUDE-CLI.md`.\n\
             //! The article in ../shared/seed/.\n\
             const M: &str = \"see docs/probe.md\";\n\
             // STYLE.md says so\n\
             // bench/NOTES.md has the figures\n",
        ),
        ("tests/x.rs", "// as DESIGN.md says\n"),
        ("Makefile", "# see docs/missing.md\n"),
    ]);
    let found = all_bad_citations(bad.path());
    let want = [
        "Makefile:1: cites docs/missing.md",
        "src/main.rs:1: cites DESIGN",
        "src/main.rs:2: cites CLAUDE-CLI.md",
        "src/main.rs:3: cites ../shared/",
        "src/main.rs:4: cites docs/probe.md",
        "src/main.rs:5: cites STYLE.md",
        "src/main.rs:6: cites bench/NOTES.md",
        "tests/x.rs:1: cites DESIGN",
    ];
    assert_eq!(found.len(), want.len(), "{found:#?}");
    for w in want {
        assert!(
            found.iter().any(|f| f.starts_with(w)),
            "missing {w:?} in {found:#?}"
        );
    }
}

#[test]
fn the_citation_checker_accepts_what_exists_and_what_a_run_writes() {
    let _run = slot();
    let good = tree(&[
        ("README.md", "# T\n"),
        ("docs/probe.md", "# P\n"),
        ("bench/RESULTS.md", ""),
        ("runs/README.md", ""),
        (
            "src/cli/init.rs",
            "const R: &str = include_str!(\"../../runs/README.md\");\n\
             // docs/probe.md, bench/RESULTS.md, RESULTS.md, README.md\n\
             // the run folder's report.md and turns/01/prompt.md; prompts/turn.{language}.md;\n\
             // runs/<id>/report.md, runs/r1/report.md; notes/*.md; DESIGN_LIMIT and MY_DESIGN are identifiers\n",
        ),
    ]);
    assert_eq!(all_bad_citations(good.path()), Vec::<String>::new());
}

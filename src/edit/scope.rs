//! Where a change sits in the code: the functions enclosing a line range, and
//! the single contiguous spot a preprocessing change may touch.

use similar::{DiffTag, TextDiff};

use super::scan::{parse_python, text, ScanError};

/// Names of the `def`s enclosing lines `first..=last` (1-based), innermost
/// first, each as `Class.method` when it sits in a class.
pub fn enclosing_functions(src: &str, first: usize, last: usize) -> Result<Vec<String>, ScanError> {
    let tree = parse_python(src, "source")?;
    let mut out = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        let (s, e) = (node.start_position().row + 1, node.end_position().row + 1);
        if s > first || e < last {
            continue;
        }
        if node.kind() == "function_definition" {
            let name = node
                .child_by_field_name("name")
                .map(|n| text(n, src))
                .unwrap_or("?");
            let class = {
                let mut p = node.parent();
                let mut found = None;
                while let Some(n) = p {
                    if n.kind() == "class_definition" {
                        found = n
                            .child_by_field_name("name")
                            .map(|c| text(c, src).to_string());
                        break;
                    }
                    if n.kind() == "function_definition" {
                        break;
                    }
                    p = n.parent();
                }
                found
            };
            out.push(match class {
                Some(c) => format!("{c}.{name}"),
                None => name.to_string(),
            });
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            stack.push(child);
        }
    }
    out.reverse();
    Ok(out)
}

/// The changed line ranges of `new` against `old` (1-based, inclusive, in
/// the new text; a pure deletion gives the line where it happened), one per
/// contiguous hunk with no context.
pub fn changed_ranges(old: &str, new: &str) -> Vec<(usize, usize)> {
    let diff = TextDiff::from_lines(old, new);
    let mut out: Vec<(usize, usize)> = Vec::new();
    for op in diff.ops() {
        if op.tag() == DiffTag::Equal {
            continue;
        }
        let r = op.new_range();
        let (a, b) = if r.is_empty() {
            (r.start + 1, r.start + 1)
        } else {
            (r.start + 1, r.end)
        };
        match out.last_mut() {
            Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "class Items:\n    def __getitem__(self, i):\n        x = load(i)\n        return x\n\n\ndef collate(batch):\n    return batch\n\n\ndef build():\n    return 1\n";

    #[test]
    fn finds_the_method_and_its_class() {
        assert_eq!(
            enclosing_functions(SRC, 3, 4).unwrap(),
            vec!["Items.__getitem__".to_string()]
        );
        assert_eq!(
            enclosing_functions(SRC, 8, 8).unwrap(),
            vec!["collate".to_string()]
        );
        assert!(enclosing_functions(SRC, 4, 8).unwrap().is_empty());
    }

    #[test]
    fn ranges_are_contiguous_hunks() {
        let new = SRC.replace("x = load(i)", "x = load(i).float()");
        assert_eq!(changed_ranges(SRC, &new), vec![(3, 3)]);
        let two = new.replace("return 1", "return 2");
        assert_eq!(changed_ranges(SRC, &two), vec![(3, 3), (12, 12)]);
        let deleted = SRC.replace("        x = load(i)\n", "");
        assert_eq!(changed_ranges(SRC, &deleted), vec![(3, 3)]);
    }
}

//! Unified diffs of edited files, as `git diff` would print them.

use similar::TextDiff;

/// A unified diff of `old` → `new` with `--- a/{label}` / `+++ b/{label}`
/// headers and 3 lines of context; the empty string when they are equal.
///
/// A last line without a terminating newline is marked with
/// `\ No newline at end of file`, as git does.
pub fn unified_diff(label: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{label}"), &format!("b/{label}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_give_empty_diff() {
        assert_eq!(unified_diff("train.py", "a\nb\n", "a\nb\n"), "");
        assert_eq!(unified_diff("train.py", "", ""), "");
    }

    #[test]
    fn one_line_change_with_three_lines_of_context() {
        let old = "1\n2\n3\n4\nloader = DataLoader(ds, num_workers=0)\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nloader = DataLoader(ds, num_workers=4)\n6\n7\n8\n9\n";
        assert_eq!(
            unified_diff("src/train.py", old, new),
            "\
--- a/src/train.py
+++ b/src/train.py
@@ -2,7 +2,7 @@
 2
 3
 4
-loader = DataLoader(ds, num_workers=0)
+loader = DataLoader(ds, num_workers=4)
 6
 7
 8
"
        );
    }

    #[test]
    fn insertion_and_separate_hunks() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let mut lines: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
        lines[17] = "eighteen".into();
        lines.insert(2, "new".into());
        let new: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let diff = unified_diff("f.py", &old, &new);
        assert_eq!(
            diff,
            "\
--- a/f.py
+++ b/f.py
@@ -1,5 +1,6 @@
 1
 2
+new
 3
 4
 5
@@ -15,6 +16,6 @@
 15
 16
 17
-18
+eighteen
 19
 20
"
        );
    }

    #[test]
    fn missing_final_newline_is_marked() {
        let diff = unified_diff("f.py", "a\nb", "a\nc");
        assert_eq!(
            diff,
            "\
--- a/f.py
+++ b/f.py
@@ -1,2 +1,2 @@
 a
-b
\\ No newline at end of file
+c
\\ No newline at end of file
"
        );
    }
}

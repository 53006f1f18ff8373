//! Comparing a file's DataLoader call sites before and after a change, to
//! check that an edit made exactly the DataLoader-argument change it claims.
//!
//! Sites are matched by index (the n-th call before is the n-th call after),
//! so a change that adds or removes a call is reported as an error rather than
//! guessed at.

use std::ops::Range;

use serde::Serialize;

use super::scan::{argument_nodes, call_node, parse_python, scan_tree, text, CallSite, ScanError};

/// One keyword-argument difference at a call site. Values are source text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum KwargChange {
    Added {
        name: String,
        value: String,
    },
    Changed {
        name: String,
        from: String,
        to: String,
    },
    Removed {
        name: String,
        from: String,
    },
}

impl KwargChange {
    /// The keyword argument's name.
    pub fn name(&self) -> &str {
        match self {
            KwargChange::Added { name, .. }
            | KwargChange::Changed { name, .. }
            | KwargChange::Removed { name, .. } => name,
        }
    }

    /// One line such as `num_workers 0 → 4`, `pin_memory (default) → True`
    /// or `prefetch_factor 4 → (default)`.
    pub fn describe(&self) -> String {
        match self {
            KwargChange::Added { name, value } => format!("{name} (default) → {value}"),
            KwargChange::Changed { name, from, to } => format!("{name} {from} → {to}"),
            KwargChange::Removed { name, from } => format!("{name} {from} → (default)"),
        }
    }
}

/// How one call site differs between before and after.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteDelta {
    /// Index of the site in the sorted site lists.
    pub site_index: usize,
    /// Keyword-argument changes: changed and removed ones in the old order,
    /// then added ones in the new order.
    pub changes: Vec<KwargChange>,
    /// The positional arguments changed (their number; with
    /// [`compare_sources`], also their text).
    pub positional_changed: bool,
    /// The callee is written differently (`DataLoader` → `tud.DataLoader`).
    pub callee_changed: bool,
    /// A `**mapping` argument appeared or disappeared (with
    /// [`compare_sources`], also: its expression changed).
    pub spread_changed: bool,
}

impl SiteDelta {
    /// True when the only differences are keyword-argument changes.
    pub fn kwargs_only(&self) -> bool {
        !self.positional_changed && !self.callee_changed && !self.spread_changed
    }

    fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.kwargs_only()
    }
}

/// The two versions cannot be compared site by site.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("the number of DataLoader calls changed: {before} before the edit, {after} after")]
    SiteCount { before: usize, after: usize },
    #[error(transparent)]
    Scan(#[from] ScanError),
}

/// Differences between matching call sites; only sites with a difference
/// appear. Errors when the number of sites differs.
pub fn compare_sites(
    before: &[CallSite],
    after: &[CallSite],
) -> Result<Vec<SiteDelta>, CompareError> {
    if before.len() != after.len() {
        return Err(CompareError::SiteCount {
            before: before.len(),
            after: after.len(),
        });
    }
    Ok(before
        .iter()
        .zip(after)
        .enumerate()
        .map(|(i, (b, a))| site_delta(i, b, a))
        .filter(|d| !d.is_empty())
        .collect())
}

pub(crate) fn site_delta(site_index: usize, b: &CallSite, a: &CallSite) -> SiteDelta {
    let value = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut changes = Vec::new();
    for (name, old) in &b.kwargs {
        match a.kwargs.get(name) {
            None => changes.push(KwargChange::Removed {
                name: name.clone(),
                from: value(old),
            }),
            Some(new) if new != old => changes.push(KwargChange::Changed {
                name: name.clone(),
                from: value(old),
                to: value(new),
            }),
            Some(_) => {}
        }
    }
    for (name, new) in &a.kwargs {
        if !b.kwargs.contains_key(name) {
            changes.push(KwargChange::Added {
                name: name.clone(),
                value: value(new),
            });
        }
    }
    SiteDelta {
        site_index,
        changes,
        positional_changed: b.positional != a.positional,
        callee_changed: b.callee != a.callee,
        spread_changed: b.has_spread != a.has_spread,
    }
}

/// Scan both versions of a file and compare them like [`compare_sites`],
/// but also look at the *text* of positional and `**` arguments, which a
/// [`CallSite`] only counts: `DataLoader(train_ds)` → `DataLoader(val_ds)`
/// is reported as `positional_changed`, a changed `**mapping` expression as
/// `spread_changed`.
pub fn compare_sources(
    label: &str,
    before_src: &str,
    after_src: &str,
) -> Result<Vec<SiteDelta>, CompareError> {
    let before_tree = parse_python(before_src, label)?;
    let after_tree = parse_python(after_src, label)?;
    let before = scan_tree(label, before_src, &before_tree);
    let after = scan_tree(label, after_src, &after_tree);
    if before.len() != after.len() {
        return Err(CompareError::SiteCount {
            before: before.len(),
            after: after.len(),
        });
    }
    let mut deltas = Vec::new();
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        let mut delta = site_delta(i, b, a);
        let (b_pos, b_spread) = other_arguments(before_src, &before_tree, &b.call_range);
        let (a_pos, a_spread) = other_arguments(after_src, &after_tree, &a.call_range);
        delta.positional_changed |= b_pos != a_pos;
        delta.spread_changed |= b_spread != a_spread;
        if !delta.is_empty() {
            deltas.push(delta);
        }
    }
    Ok(deltas)
}

/// Source texts of a call's positional (incl. `*args`) and `**` arguments.
fn other_arguments(
    src: &str,
    tree: &tree_sitter::Tree,
    range: &Range<usize>,
) -> (Vec<String>, Vec<String>) {
    let mut positional = Vec::new();
    let mut spreads = Vec::new();
    let Some(args) = call_node(tree, range).and_then(|c| c.child_by_field_name("arguments")) else {
        return (positional, spreads);
    };
    if args.kind() != "argument_list" {
        positional.push(text(args, src).to_string());
        return (positional, spreads);
    }
    for arg in argument_nodes(args) {
        match arg.kind() {
            "keyword_argument" => {}
            "dictionary_splat" => spreads.push(text(arg, src).to_string()),
            _ => positional.push(text(arg, src).to_string()),
        }
    }
    (positional, spreads)
}

/// Whether the source changed anywhere outside the DataLoader calls: the
/// texts are compared with every call's byte range cut out (nested calls are
/// covered by their outermost call). Whitespace and comment changes outside
/// the calls count as changes. Site ranges that do not fit the source count
/// as a change too.
pub fn non_call_changes(
    before_src: &str,
    after_src: &str,
    before: &[CallSite],
    after: &[CallSite],
) -> bool {
    match (
        outside_calls(before_src, before),
        outside_calls(after_src, after),
    ) {
        (Some(b), Some(a)) => b != a,
        _ => true,
    }
}

/// The pieces of `src` between the (merged) call ranges, or `None` when a
/// range does not fit `src`.
fn outside_calls<'s>(src: &'s str, sites: &[CallSite]) -> Option<Vec<&'s str>> {
    let mut ranges: Vec<Range<usize>> = sites.iter().map(|s| s.call_range.clone()).collect();
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start < last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    let mut pieces = Vec::with_capacity(merged.len() + 1);
    let mut pos = 0;
    for r in merged {
        pieces.push(src.get(pos..r.start)?);
        pos = r.end;
    }
    pieces.push(src.get(pos..)?);
    Some(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::scan::scan_source;

    fn sites(src: &str) -> Vec<CallSite> {
        scan_source("t.py", src).unwrap()
    }

    fn compare(before: &str, after: &str) -> Vec<SiteDelta> {
        compare_sites(&sites(before), &sites(after)).unwrap()
    }

    #[test]
    fn identical_sources_have_no_deltas() {
        let src = "a = DataLoader(ds, num_workers=0)\nb = DataLoader(ds)\n";
        assert!(compare(src, src).is_empty());
        assert!(compare_sources("t.py", src, src).unwrap().is_empty());
        assert!(!non_call_changes(src, src, &sites(src), &sites(src)));
    }

    #[test]
    fn changed_added_removed() {
        let before = "a = DataLoader(ds, num_workers=0, prefetch_factor=4)\nb = DataLoader(ds)\n";
        let after = "a = DataLoader(ds, num_workers=4, pin_memory=True)\nb = DataLoader(ds)\n";
        let deltas = compare(before, after);
        assert_eq!(
            deltas,
            vec![SiteDelta {
                site_index: 0,
                changes: vec![
                    KwargChange::Changed {
                        name: "num_workers".into(),
                        from: "0".into(),
                        to: "4".into()
                    },
                    KwargChange::Removed {
                        name: "prefetch_factor".into(),
                        from: "4".into()
                    },
                    KwargChange::Added {
                        name: "pin_memory".into(),
                        value: "True".into()
                    },
                ],
                positional_changed: false,
                callee_changed: false,
                spread_changed: false,
            }]
        );
        let described: Vec<String> = deltas[0].changes.iter().map(|c| c.describe()).collect();
        assert_eq!(
            described,
            vec![
                "num_workers 0 → 4",
                "prefetch_factor 4 → (default)",
                "pin_memory (default) → True"
            ]
        );
        let names: Vec<&str> = deltas[0].changes.iter().map(|c| c.name()).collect();
        assert_eq!(names, vec!["num_workers", "prefetch_factor", "pin_memory"]);
        assert!(deltas[0].kwargs_only());
    }

    #[test]
    fn only_changed_sites_are_listed() {
        let before = "a = DataLoader(ds)\nb = DataLoader(ds)\nc = DataLoader(ds)\n";
        let after = "a = DataLoader(ds)\nb = DataLoader(ds)\nc = DataLoader(ds, num_workers=2)\n";
        let deltas = compare(before, after);
        assert_eq!(deltas.len(), 1);
        assert_eq!(deltas[0].site_index, 2);
        assert_eq!(deltas[0].changes.len(), 1);
    }

    #[test]
    fn reordering_kwargs_is_not_a_change() {
        assert!(compare("DataLoader(ds, a=1, b=2)\n", "DataLoader(ds, b=2, a=1)\n").is_empty());
    }

    #[test]
    fn positional_callee_and_spread_flags() {
        let deltas = compare(
            "from torch.utils import data\nDataLoader(ds, bs)\n",
            "from torch.utils import data\ndata.DataLoader(ds, **kw)\n",
        );
        assert_eq!(deltas.len(), 1);
        let d = &deltas[0];
        assert!(d.positional_changed && d.callee_changed && d.spread_changed);
        assert!(d.changes.is_empty());
        assert!(!d.kwargs_only());
    }

    #[test]
    fn different_site_counts_are_an_error() {
        let err = compare_sites(
            &sites("DataLoader(a)\n"),
            &sites("DataLoader(a)\nDataLoader(b)\n"),
        )
        .unwrap_err();
        assert!(matches!(
            err,
            CompareError::SiteCount {
                before: 1,
                after: 2
            }
        ));
        assert_eq!(
            err.to_string(),
            "the number of DataLoader calls changed: 1 before the edit, 2 after"
        );
        assert!(compare_sources("t.py", "DataLoader(a)\n", "x = 1\n").is_err());
    }

    #[test]
    fn compare_sources_sees_positional_and_spread_text() {
        let d = compare_sources("t.py", "DataLoader(train_ds)\n", "DataLoader(val_ds)\n").unwrap();
        assert_eq!(d.len(), 1);
        assert!(d[0].positional_changed && !d[0].spread_changed);
        assert!(compare_sites(
            &sites("DataLoader(train_ds)\n"),
            &sites("DataLoader(val_ds)\n")
        )
        .unwrap()
        .is_empty());
        let d = compare_sources("t.py", "DataLoader(ds, **a)\n", "DataLoader(ds, **b)\n").unwrap();
        assert!(d[0].spread_changed && !d[0].positional_changed);
        let d = compare_sources(
            "t.py",
            "DataLoader(ds, num_workers=0)\n",
            "DataLoader(ds, num_workers=2)\n",
        )
        .unwrap();
        assert_eq!(
            d[0].changes,
            vec![KwargChange::Changed {
                name: "num_workers".into(),
                from: "0".into(),
                to: "2".into()
            }]
        );
        assert!(d[0].kwargs_only());
    }

    #[test]
    fn non_call_changes_cases() {
        let check = |b: &str, a: &str| non_call_changes(b, a, &sites(b), &sites(a));
        let base = "import os\nloader = DataLoader(ds, num_workers=0)  # tuned\nx = 1\n";
        // Inside the call only (even reformatted across lines): no outside change.
        assert!(!check(
            base,
            &base.replace("num_workers=0", "num_workers=4")
        ));
        assert!(!check(
            base,
            &base.replace("(ds, num_workers=0)", "(\n    ds,\n    num_workers=0,\n)")
        ));
        // Outside changes of any kind count, comments and whitespace included.
        assert!(check(base, &base.replace("x = 1", "x = 2")));
        assert!(check(base, &base.replace("# tuned", "# tuned!")));
        assert!(check(base, &base.replace("x = 1", "x  = 1")));
        assert!(check(base, &base.replace("loader =", "train_loader =")));
        // Both an argument and something outside.
        assert!(check(
            base,
            &base
                .replace("num_workers=0", "num_workers=4")
                .replace("import os", "import sys")
        ));
        // Nested calls are covered by the outer one.
        let nested = "wrap(DataLoader(a, sampler=DataLoader(b)))\n";
        assert!(!check(
            nested,
            &nested.replace(
                "sampler=DataLoader(b)",
                "sampler=DataLoader(b, num_workers=1)"
            )
        ));
        // Ranges that do not fit the text.
        assert!(non_call_changes("x", "x", &sites(base), &sites("x")));
    }
}

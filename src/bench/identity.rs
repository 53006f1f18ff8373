//! What a measured run fed the model, by part: the harness's (and the
//! command-mode instrumentation's) fingerprints of the first batches, and
//! which of them a set of runs of one state reproduces.
//!
//! The harness seeds `random`, numpy and torch at the start of every run, so
//! most scripts reproduce every part. What still differs between two runs of
//! the same code (an order drawn from the clock, augmentation from an
//! unseeded generator) cannot say whether a change altered the data, and is
//! left out of the comparison: `judge::DataCheck` decides what a turn compares.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Measurement;

/// One part of the first batches' identity.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// The sampler's indices of the first batches, as a set.
    Items,
    /// The same indices in the sampler's order, batch by batch.
    Order,
    /// Containers, keys, tensor shapes and dtypes.
    Structure,
    /// The tensors' bytes (and every other leaf's value).
    Bytes,
}

impl Part {
    pub const ALL: [Part; 4] = [Part::Items, Part::Order, Part::Structure, Part::Bytes];

    pub fn name(self) -> &'static str {
        match self {
            Part::Items => "items",
            Part::Order => "order",
            Part::Structure => "structure",
            Part::Bytes => "bytes",
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parts as words: "items, order and structure".
pub fn list(parts: &[Part]) -> String {
    let names: Vec<&str> = parts.iter().map(|p| p.name()).collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The result JSON's `data_identity`: sha256 hex digests of the first
/// `batches` batches by part. `items` and `order` are absent where the
/// sampler's indices are not known (an iterable dataset).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct DataIdentity {
    #[serde(default)]
    pub batches: u32,
    #[serde(default)]
    pub items: Option<String>,
    #[serde(default)]
    pub order: Option<String>,
    #[serde(default)]
    pub structure: Option<String>,
    #[serde(default)]
    pub bytes: Option<String>,
}

impl DataIdentity {
    pub fn part(&self, p: Part) -> Option<&str> {
        match p {
            Part::Items => self.items.as_deref(),
            Part::Order => self.order.as_deref(),
            Part::Structure => self.structure.as_deref(),
            Part::Bytes => self.bytes.as_deref(),
        }
    }
}

/// Which parts the runs of one state reproduce. A part is `unstable` when
/// two runs that both carry it disagree; `missing` when no run carries it;
/// with one run only, every part it carries counts as reproduced.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Reproduced {
    /// Runs that carried a data identity.
    pub runs: u32,
    pub stable: Vec<Part>,
    pub unstable: Vec<Part>,
    pub missing: Vec<Part>,
}

impl Reproduced {
    pub fn of<'a>(runs: impl IntoIterator<Item = &'a Measurement>) -> Reproduced {
        let ids: Vec<&DataIdentity> = runs
            .into_iter()
            .filter_map(|m| m.data_identity.as_ref())
            .collect();
        let mut r = Reproduced {
            runs: ids.len() as u32,
            ..Default::default()
        };
        for p in Part::ALL {
            let seen: Vec<&str> = ids.iter().filter_map(|i| i.part(p)).collect();
            match seen.first() {
                None => r.missing.push(p),
                Some(first) if seen.iter().all(|s| s == first) => r.stable.push(p),
                Some(_) => r.unstable.push(p),
            }
        }
        r
    }

    /// One line for `tuneloop bench`: which parts its runs reproduce, and
    /// what `start` would therefore leave out. None under two runs.
    pub fn describe(&self) -> Option<String> {
        if self.runs < 2 {
            return None;
        }
        let mut out = if self.stable.is_empty() {
            format!(
                "data: no part of the first batches is the same in all {} runs",
                self.runs
            )
        } else {
            format!(
                "data: the first batches' {} are the same in all {} runs",
                list(&self.stable),
                self.runs
            )
        };
        if !self.unstable.is_empty() {
            out.push_str(&format!(
                "; {} differ between runs, so a turn will not compare them",
                list(&self.unstable)
            ));
        }
        if !self.missing.is_empty() {
            out.push_str(&format!(
                "; {} not recorded (no sampler indices)",
                list(&self.missing)
            ));
        }
        Some(out)
    }

    /// Whether the runs say nothing against comparing `p` (it is stable, or
    /// no run carried an identity at all: an older run folder).
    pub fn allows(&self, p: Part) -> bool {
        self.runs == 0 || !self.unstable.contains(&p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(items: &str, order: &str, bytes: &str) -> Measurement {
        Measurement {
            data_identity: Some(DataIdentity {
                batches: 3,
                items: Some(items.into()),
                order: Some(order.into()),
                structure: Some("s".into()),
                bytes: Some(bytes.into()),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_part_two_runs_disagree_on_is_unstable() {
        let r = Reproduced::of(&[
            run("i", "o", "b1"),
            run("i", "o", "b2"),
            run("i", "o", "b1"),
        ]);
        assert_eq!(r.runs, 3);
        assert_eq!(r.stable, vec![Part::Items, Part::Order, Part::Structure]);
        assert_eq!(r.unstable, vec![Part::Bytes]);
        assert!(r.allows(Part::Order) && !r.allows(Part::Bytes));
    }

    #[test]
    fn runs_without_an_identity_neither_confirm_nor_deny() {
        let bare = Measurement::default();
        let r = Reproduced::of(&[bare.clone(), run("i", "o1", "b"), bare.clone()]);
        assert_eq!(r.runs, 1);
        assert!(r.unstable.is_empty());
        let none = Reproduced::of(&[bare]);
        assert_eq!(none.runs, 0);
        assert_eq!(none.missing, Part::ALL.to_vec());
        assert!(Part::ALL.iter().all(|p| none.allows(*p)));
        // An iterable dataset: no indices, so no items or order.
        let mut m = run("i", "o", "b");
        let id = m.data_identity.as_mut().unwrap();
        id.items = None;
        id.order = None;
        let r = Reproduced::of(&[m.clone(), m]);
        assert_eq!(r.missing, vec![Part::Items, Part::Order]);
    }

    #[test]
    fn bench_says_which_parts_its_runs_reproduce() {
        let r = Reproduced::of(&[run("i", "o", "b1"), run("i", "o", "b2")]);
        assert_eq!(
            r.describe().unwrap(),
            "data: the first batches' items, order and structure are the same in all 2 runs; bytes differ between runs, so a turn will not compare them"
        );
        assert_eq!(Reproduced::of(&[run("i", "o", "b")]).describe(), None);
    }

    #[test]
    fn parts_read_as_a_list() {
        assert_eq!(list(&[]), "");
        assert_eq!(list(&[Part::Bytes]), "bytes");
        assert_eq!(
            list(&[Part::Items, Part::Order, Part::Structure]),
            "items, order and structure"
        );
    }

    #[test]
    fn the_result_lines_identity_is_read() {
        let m: Measurement = serde_json::from_str(
            r#"{"samples_per_sec": 1.0, "fingerprint": "f", "data_identity":
               {"batches": 3, "items": null, "order": null, "structure": "s", "bytes": "b"}}"#,
        )
        .unwrap();
        let id = m.data_identity.unwrap();
        assert_eq!(id.part(Part::Structure), Some("s"));
        assert_eq!(id.part(Part::Order), None);
    }
}

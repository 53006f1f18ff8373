//! The words of the reports, chosen by language. The table itself is in
//! [`crate::words`] with every other user-visible word, so that both
//! languages always have the same set of labels. Markdown, HTML and the
//! plot all read from here.

use super::model::{Decision, RunReport};
pub use crate::words::{Labels, EN, JA};

impl Labels {
    /// The label of a decision in this language.
    pub fn decision(&self, d: Decision) -> &'static str {
        match d {
            Decision::Kept => self.kept,
            Decision::KeptCheaper => self.kept_cheaper,
            Decision::Reverted => self.reverted,
            Decision::Rejected => self.rejected,
            Decision::Failed => self.failed,
            Decision::NoChange => self.no_change,
        }
    }
}

/// Labels for a language code: "ja" (also "ja-JP", "ja_JP") → Japanese,
/// anything else → English.
pub fn labels_for(language: &str) -> &'static Labels {
    &crate::words::for_language(language).report
}

/// Labels for a report's `language`.
pub fn labels(r: &RunReport) -> &'static Labels {
    labels_for(&r.language)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_report_labels_are_the_word_tables_own() {
        for code in ["ja", "en"] {
            assert!(std::ptr::eq(
                super::labels_for(code),
                &crate::words::for_language(code).report
            ));
        }
    }
}

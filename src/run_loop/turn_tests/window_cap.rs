//! The pair loop cuts a slow candidate's window: each candidate run is
//! measured with a cap of `bench::window::CUT_AFTER` times the incumbent's
//! longest window so far, the incumbent's runs never.

use super::*;

/// Each run: the workers on disk and the window cap it was measured with.
type Seen = Arc<Mutex<Vec<(u64, Option<f64>)>>>;

/// A measure for the pair loop alone that records, for each run, the
/// workers on disk and the window cap it was given. The candidate (2
/// workers) runs 40× slower: its windows would be 40 s to the incumbent's 1.
struct Recording {
    root: PathBuf,
    cap: Option<f64>,
    seen: Seen,
}

impl Measure for Recording {
    fn measure<'a>(&'a self, _: Mode, _: &'a Interrupt) -> Pending<'a, Measurement> {
        let nw = workers_in(&std::fs::read_to_string(self.root.join("train.py")).unwrap());
        self.seen.lock().unwrap().push((nw, self.cap));
        // The incumbent's windows grow by a second each run: the cap follows the longest.
        let incumbent_runs = self
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.0 == 0)
            .count();
        let (sps, wall) = match (nw, self.cap) {
            (0, _) => (100.0, incumbent_runs as f64),
            // As the harness does it: the window ends at the cap, the rate is what it timed.
            (_, Some(cap)) => (2.5, cap),
            (_, None) => (2.5, 40.0),
        };
        let r = Ok(Measurement {
            wall_s: Some(wall),
            window_cut: nw != 0 && self.cap.is_some(),
            ..m(sps, 0.5, Some("fp"))
        });
        Box::pin(async move { r })
    }

    fn profile<'a>(&'a self, _: &'a Interrupt) -> Pending<'a, Profiled> {
        unreachable!("the pair loop does not profile")
    }

    fn with_window_cap(&self, cap_s: f64) -> Option<Arc<dyn Measure>> {
        Some(Arc::new(Recording {
            root: self.root.clone(),
            cap: Some(cap_s),
            seen: self.seen.clone(),
        }))
    }
}

#[test]
fn a_candidates_runs_are_cut_at_four_times_the_incumbents_longest_window() {
    let tmp = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let measure = Recording {
        root: tmp.path().to_owned(),
        cap: None,
        seen: seen.clone(),
    };
    let p = pairs_of(&measure, tmp.path(), &Policy::default(), |_| {});
    assert_eq!(
        p.verdict,
        Verdict::Revert,
        "a candidate 40× slower is reverted"
    );
    let seen = seen.lock().unwrap().clone();
    // A B, B A: incumbent first in pair 1, candidate first in pair 2.
    assert_eq!(
        seen,
        vec![(0, None), (2, Some(4.0)), (2, Some(4.0)), (0, None)],
        "each candidate run capped at 4× the incumbent's longest window so far, no incumbent run capped"
    );
    assert!(p.candidate.iter().all(|m| m.window_cut));
    assert!(p.incumbent.iter().all(|m| !m.window_cut));
    assert_eq!(crate::bench::window::cap_s(&p.incumbent), Some(8.0));
    // Without an incumbent's window to go by (none yet, or none recorded), no cap.
    assert_eq!(crate::bench::window::cap_s(&[]), None);
    assert_eq!(crate::bench::window::cap_s(&[m(1.0, 0.5, None)]), None);
}

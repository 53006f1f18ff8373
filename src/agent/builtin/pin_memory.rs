//! pin_memory=True: on a CUDA device only (copies from pinned memory are
//! faster; on a CPU there is no copy to speed up), once.

use super::{LoaderState, Proposal};
use crate::knob::LoaderKnob;

/// pin_memory=True, when the device is CUDA and it is not set nor tried.
pub(super) fn proposal(s: &LoaderState<'_>) -> Option<Proposal> {
    if !s.allows(LoaderKnob::PinMemory) || !s.incumbent.is_cuda() {
        return None;
    }
    let cur = s.current(LoaderKnob::PinMemory);
    (cur.as_deref() != Some("True") && !s.was_tried(LoaderKnob::PinMemory, "True")).then(|| {
        Proposal {
            knob: LoaderKnob::PinMemory,
            value: "True".into(),
            why: "CUDA device: copies from pinned memory are faster".into(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{meas, row, site};
    use super::*;
    use crate::config::DecisionPolicy;
    use crate::knob::LoaderKnob;
    use crate::turn::Decision;

    fn propose(cuda: bool, src: &str, history: &[crate::turn::TurnRow]) -> Option<Proposal> {
        let (m, s, d) = (meas(2, 0.5, cuda), site(src), DecisionPolicy::default());
        let knobs = [LoaderKnob::PinMemory];
        proposal(&LoaderState::of(&m, &s, history, &knobs, &d))
    }

    #[test]
    fn pinned_memory_on_cuda_once_and_never_on_a_cpu() {
        let p = propose(true, "DataLoader(ds, num_workers=2)\n", &[]).unwrap();
        assert_eq!((p.knob, p.value.as_str()), (LoaderKnob::PinMemory, "True"));
        assert_eq!(propose(false, "DataLoader(ds, num_workers=2)\n", &[]), None);
        // Set already, or tried already: nothing.
        let set = "DataLoader(ds, num_workers=2, pin_memory=True)\n";
        assert_eq!(propose(true, set, &[]), None);
        let tried = [row(1, "pin_memory (default) → True", Decision::Reverted)];
        assert_eq!(
            propose(true, "DataLoader(ds, num_workers=2)\n", &tried),
            None
        );
    }
}

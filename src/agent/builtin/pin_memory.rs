//! pin_memory=True: on a CUDA device only (copies from pinned memory are
//! faster; on a CPU there is no copy to speed up), once.

use super::{LoaderState, Proposal};

/// pin_memory=True, when the device is CUDA and it is not set nor tried.
pub(super) fn proposal(s: &LoaderState<'_>) -> Option<Proposal> {
    if !s.allows("pin_memory") || !s.incumbent.is_cuda() {
        return None;
    }
    let cur = s.current("pin_memory");
    (cur.as_deref() != Some("True") && !s.was_tried("pin_memory", "True")).then(|| Proposal {
        knob: "pin_memory",
        value: "True".into(),
        why: "CUDA device: copies from pinned memory are faster".into(),
    })
}

//! The structural turn: overlap the items' waits inside each worker.
//!
//! When items mostly wait (storage, a network) and the DataLoader knobs are
//! exhausted, the builtin agent may add a batched fetch to the dataset class:
//! a `__getitems__` method (PyTorch's fetcher calls it with a batch's indices
//! when a map-style dataset defines it) that maps `__getitem__` over the
//! indices through a bounded thread pool. `pool.map` keeps the order, so the
//! batch holds the same items in the same order; the run loop checks that
//! (fingerprint), that the change is one contiguous spot in the dataset's
//! code, and that it measures faster, like any preprocessing change.
//!
//! It assumes `__getitem__` is safe to call from several threads at once
//! (no shared file handle or global random state), which is why it is offered
//! only under the policy's `preprocessing` knob. The pool lives in a class
//! attribute keyed by process id — never in the instance, so the dataset
//! still pickles for spawned workers, and a forked worker makes its own.
//! Pure text: the insertion point comes from the source's lines.

/// Where the method goes: before the line of `def __getitem__` of the first
/// class that defines it and no `__getitems__` yet; with its indentation.
pub fn insertion_point(src: &str) -> Option<(usize, String)> {
    if src.contains("def __getitems__") {
        return None;
    }
    src.lines().enumerate().find_map(|(i, l)| {
        let body = l.trim_start();
        let indent = &l[..l.len() - body.len()];
        (body.starts_with("def __getitem__(") && !indent.is_empty())
            .then(|| (i, indent.to_string()))
    })
}

/// The source with a threaded `__getitems__` of `threads` threads inserted
/// before `__getitem__`, or `None` when there is no place for it.
pub fn add_getitems(src: &str, threads: u32) -> Option<String> {
    let (at, indent) = insertion_point(src)?;
    let body = format!("{indent}    ");
    let method = [
        format!("{indent}def __getitems__(self, indices):"),
        format!("{body}# tuneloop: overlap the items' waits (storage, network) with a bounded"),
        format!("{body}# thread pool, one per process; same items, same order. Assumes"),
        format!("{body}# __getitem__ is safe to call from threads."),
        format!("{body}import concurrent.futures"),
        format!("{body}import os"),
        format!("{body}pools = type(self).__dict__.get(\"_tuneloop_pools\")"),
        format!("{body}if pools is None:"),
        format!("{body}    pools = {{}}"),
        format!("{body}    type(self)._tuneloop_pools = pools"),
        format!("{body}pool = pools.get(os.getpid())"),
        format!("{body}if pool is None:"),
        format!(
            "{body}    pool = pools[os.getpid()] = concurrent.futures.ThreadPoolExecutor(max_workers={threads})"
        ),
        format!("{body}return list(pool.map(self.__getitem__, indices))"),
        String::new(),
    ];
    let mut lines: Vec<String> = src.lines().map(str::to_string).collect();
    for (k, l) in method.into_iter().enumerate() {
        lines.insert(at + k, l);
    }
    let mut out = lines.join("\n");
    if src.ends_with('\n') {
        out.push('\n');
    }
    Some(out)
}

/// Threads per worker from the figures: a worker's wall time per batch over
/// the CPU a batch takes (how many items can wait at once while one
/// computes), at least 2 and at most 16 or the batch size.
pub fn threads_for(batch_latency_s: f64, cpu_per_batch_s: f64, batch_size: u64) -> u32 {
    let ratio = if cpu_per_batch_s > 0.0 {
        batch_latency_s / cpu_per_batch_s
    } else {
        16.0
    };
    let most = batch_size.clamp(2, 16) as f64;
    ratio.round().clamp(2.0, most) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "import time\n\n\nclass Items(Dataset):\n    def __len__(self):\n        return 8\n\n    def __getitem__(self, i):\n        time.sleep(0.01)\n        return i\n\n\ndef build():\n    return Items()\n";

    #[test]
    fn the_method_goes_before_getitem_as_one_block_of_valid_python() {
        let new = add_getitems(SRC, 6).unwrap();
        crate::edit::check_syntax(&new).unwrap();
        let ranges = crate::edit::changed_ranges(SRC, &new);
        assert_eq!(ranges.len(), 1, "{ranges:?}");
        assert!(new.contains("    def __getitems__(self, indices):\n"));
        assert!(new.contains("ThreadPoolExecutor(max_workers=6)"));
        // The rest of the file is untouched.
        assert_eq!(
            new.replace(
                &new[new.find("    def __getitems__").unwrap()
                    ..new.find("    def __getitem__(").unwrap()],
                ""
            ),
            SRC
        );
        // Once there, not again; no class with __getitem__, no place.
        assert_eq!(add_getitems(&new, 6), None);
        assert_eq!(add_getitems("def __getitem__(i):\n    return i\n", 4), None);
    }

    #[test]
    fn threads_follow_the_wait_per_unit_of_cpu() {
        // 60 ms a batch for 10 ms of CPU: 6 threads.
        assert_eq!(threads_for(0.060, 0.010, 32), 6);
        assert_eq!(threads_for(0.5, 0.001, 32), 16);
        assert_eq!(threads_for(0.5, 0.001, 4), 4);
        assert_eq!(threads_for(0.01, 0.01, 32), 2);
        assert_eq!(threads_for(0.01, 0.0, 32), 16);
    }

    const DATA: &str = "from torch.utils.data import DataLoader\n\nclass Items:\n    def __getitem__(self, i):\n        x = decode(i)\n        return x\n\n\ndef build():\n    steps = 10\n    return DataLoader(Items(), batch_size=8)\n";

    #[test]
    fn a_threaded_getitems_added_to_the_dataset_is_one_preprocessing_spot() {
        // The agent's edit is what verification accepts as one preprocessing
        // change (verify owns the rule; this is the agent keeping to it).
        use crate::store::FileSet;
        use crate::verify::{check_turn, Verdict};
        let fs = |src: &str| {
            FileSet(
                [("train.py".to_string(), src.as_bytes().to_vec())]
                    .into_iter()
                    .collect(),
            )
        };
        let mut k: Vec<String> = crate::knob::DATA_PRESERVING
            .iter()
            .map(|s| s.to_string())
            .collect();
        k.push("preprocessing".into());
        let new = add_getitems(DATA, 4).unwrap();
        match check_turn(&fs(DATA), &fs(&new), &[], &k) {
            Verdict::OneChange { knob, change, .. } => {
                assert_eq!(knob, "preprocessing");
                assert!(change.contains("Items.__getitems__"), "{change}");
            }
            v => panic!("{v:?}"),
        }
    }
}

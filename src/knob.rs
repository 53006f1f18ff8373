//! What a turn may change, as one type: the DataLoader family (a keyword of
//! the loader, or one spot of preprocessing) and the compute family (one
//! line of the training script that changes how the step computes). Policy
//! files, the run log and the verification speak in the knobs' names
//! ([`Knob::name`], [`Knob::parse`]); the code that reasons about a knob
//! (is it CUDA-only, may it change the losses) asks the type.

use std::fmt;

/// The DataLoader knobs an agent may change: settings that must not change
/// what the model is fed (same items, same order), so a turn that changes
/// the first batches' fingerprint is rejected.
pub const DATA_PRESERVING: [&str; 4] = [
    LoaderKnob::NumWorkers.name(),
    LoaderKnob::PinMemory.name(),
    LoaderKnob::PrefetchFactor.name(),
    LoaderKnob::PersistentWorkers.name(),
];

/// The DataLoader family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LoaderKnob {
    NumWorkers,
    PinMemory,
    PrefetchFactor,
    PersistentWorkers,
    Preprocessing,
}

/// The compute family: each sits at one findable place of the script
/// (see [`crate::edit::compute`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ComputeKnob {
    /// `torch.set_num_threads(n)`: intra-op threads against the workers'
    /// share of the cores.
    NumThreads,
    /// `model = model.to(memory_format=torch.channels_last)`.
    ChannelsLast,
    /// `fused=True` on the optimizer's constructor.
    FusedOptimizer,
    /// `foreach=True` on the optimizer's constructor.
    ForeachOptimizer,
    /// `torch.backends.cudnn.benchmark = True` (CUDA only).
    CudnnBenchmark,
    /// TF32 matmuls: `torch.backends.cuda.matmul.allow_tf32 = True` (CUDA only).
    Tf32,
    /// Autocast (bf16; fp16 too on CUDA) around the model's forward or the step.
    Autocast,
    /// `model = torch.compile(model)`.
    Compile,
}

/// Whether a knob may change what the step computes, and so the losses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numerics {
    /// The same arithmetic in another order or layout: losses match within
    /// float rounding (`[compute] exact_rtol`).
    Preserving,
    /// Lower precision or rewritten kernels: losses stay within the policy's
    /// stated tolerance (`[compute] loss_rtol`).
    Changing,
}

/// One knob of either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Knob {
    Loader(LoaderKnob),
    Compute(ComputeKnob),
}

impl LoaderKnob {
    pub const ALL: [LoaderKnob; 5] = [
        LoaderKnob::NumWorkers,
        LoaderKnob::PinMemory,
        LoaderKnob::PrefetchFactor,
        LoaderKnob::PersistentWorkers,
        LoaderKnob::Preprocessing,
    ];

    /// The knob's name in policy files, records and prose; for the four
    /// DataLoader settings it is also the loader's keyword argument.
    pub const fn name(self) -> &'static str {
        match self {
            LoaderKnob::NumWorkers => "num_workers",
            LoaderKnob::PinMemory => "pin_memory",
            LoaderKnob::PrefetchFactor => "prefetch_factor",
            LoaderKnob::PersistentWorkers => "persistent_workers",
            LoaderKnob::Preprocessing => "preprocessing",
        }
    }

    pub fn parse(name: &str) -> Option<LoaderKnob> {
        LoaderKnob::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether this knob's name is `name` (a record's or a policy's string).
    pub fn is(self, name: &str) -> bool {
        self.name() == name
    }

    /// The four DataLoader settings: preprocessing is no keyword.
    pub fn is_setting(self) -> bool {
        self != LoaderKnob::Preprocessing
    }

    /// The DataLoader settings, in [`LoaderKnob::ALL`]'s order.
    pub fn settings() -> impl Iterator<Item = LoaderKnob> {
        LoaderKnob::ALL.into_iter().filter(|k| k.is_setting())
    }

    /// The field of HuggingFace's `TrainingArguments` (and option of its
    /// `HfArgumentParser`) that sets this loader setting:
    /// `dataloader_num_workers`.
    pub fn hf_argument(self) -> String {
        format!("{HF_PREFIX}{}", self.name())
    }

    /// The loader setting a `TrainingArguments` field sets, if it is one.
    pub fn from_hf_argument(field: &str) -> Option<LoaderKnob> {
        field
            .strip_prefix(HF_PREFIX)
            .and_then(LoaderKnob::parse)
            .filter(|k| k.is_setting())
    }
}

/// HuggingFace names the DataLoader's settings in `TrainingArguments` with
/// this prefix.
const HF_PREFIX: &str = "dataloader_";

impl ComputeKnob {
    /// In the order the builtin agent tries them: the cheap, numerics-
    /// preserving ones first, the ones that may change the losses last.
    pub const ALL: [ComputeKnob; 8] = [
        ComputeKnob::NumThreads,
        ComputeKnob::ChannelsLast,
        ComputeKnob::ForeachOptimizer,
        ComputeKnob::FusedOptimizer,
        ComputeKnob::CudnnBenchmark,
        ComputeKnob::Tf32,
        ComputeKnob::Autocast,
        ComputeKnob::Compile,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            ComputeKnob::NumThreads => "num_threads",
            ComputeKnob::ChannelsLast => "channels_last",
            ComputeKnob::FusedOptimizer => "fused_optimizer",
            ComputeKnob::ForeachOptimizer => "foreach_optimizer",
            ComputeKnob::CudnnBenchmark => "cudnn_benchmark",
            ComputeKnob::Tf32 => "tf32",
            ComputeKnob::Autocast => "autocast",
            ComputeKnob::Compile => "compile",
        }
    }

    pub fn parse(name: &str) -> Option<ComputeKnob> {
        ComputeKnob::ALL.into_iter().find(|k| k.name() == name)
    }

    /// cuDNN's autotuner and TF32 do nothing on a CPU.
    pub fn cuda_only(self) -> bool {
        matches!(self, ComputeKnob::CudnnBenchmark | ComputeKnob::Tf32)
    }

    /// Why each is classed as it is:
    /// - threads: the same kernels split over fewer or more threads; only the
    ///   order of a reduction's partial sums may differ (float rounding);
    /// - channels_last: the same convolution in another memory layout, whose
    ///   kernels may sum in another order (rounding);
    /// - foreach / fused optimizer: the same update rule over all parameters
    ///   at once (rounding; fused may fold multiply-adds);
    /// - cudnn.benchmark: another algorithm for the same convolution
    ///   (rounding), chosen by timing;
    /// - TF32 and bf16 autocast compute matmuls with a shorter mantissa, and
    ///   `torch.compile` fuses and reorders kernels: the losses move more
    ///   than rounding, so they must stay within the policy's tolerance.
    pub fn numerics(self) -> Numerics {
        match self {
            ComputeKnob::NumThreads
            | ComputeKnob::ChannelsLast
            | ComputeKnob::FusedOptimizer
            | ComputeKnob::ForeachOptimizer
            | ComputeKnob::CudnnBenchmark => Numerics::Preserving,
            ComputeKnob::Tf32 | ComputeKnob::Autocast | ComputeKnob::Compile => Numerics::Changing,
        }
    }

    /// Whether the change can move which elements a seeded random draw falls
    /// on, though it computes the same thing: channels_last lays activations
    /// out in another order, and dropout's mask is drawn in memory order, so
    /// a model with dropout drops other units (losses about 1% apart after a
    /// few steps on an MNIST-style net, bit-equal without its dropout).
    pub fn moves_random_draws(self) -> bool {
        matches!(self, ComputeKnob::ChannelsLast)
    }
}

impl Knob {
    /// Every knob's name, both families.
    pub fn names() -> Vec<&'static str> {
        LoaderKnob::ALL
            .iter()
            .map(|k| k.name())
            .chain(ComputeKnob::ALL.iter().map(|k| k.name()))
            .collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            Knob::Loader(k) => k.name(),
            Knob::Compute(k) => k.name(),
        }
    }

    pub fn parse(name: &str) -> Option<Knob> {
        LoaderKnob::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .map(Knob::Loader)
            .or_else(|| ComputeKnob::parse(name).map(Knob::Compute))
    }

    pub fn compute(self) -> Option<ComputeKnob> {
        match self {
            Knob::Compute(k) => Some(k),
            Knob::Loader(_) => None,
        }
    }
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for LoaderKnob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for ComputeKnob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_knob_and_the_families_do_not_overlap() {
        let names = Knob::names();
        for n in &names {
            assert_eq!(Knob::parse(n).unwrap().name(), *n);
        }
        let mut dedup = names.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), names.len());
        assert_eq!(Knob::parse("batch_size"), None);
        assert_eq!(
            Knob::parse("num_workers"),
            Some(Knob::Loader(LoaderKnob::NumWorkers))
        );
        assert_eq!(
            Knob::parse("channels_last").and_then(Knob::compute),
            Some(ComputeKnob::ChannelsLast)
        );
        // The loader family's names are the ones the policy has always used.
        for k in DATA_PRESERVING {
            assert!(matches!(Knob::parse(k), Some(Knob::Loader(_))), "{k}");
        }
    }

    #[test]
    fn a_training_arguments_field_names_its_loader_setting_and_no_other() {
        for k in LoaderKnob::settings() {
            assert_eq!(LoaderKnob::from_hf_argument(&k.hf_argument()), Some(k));
        }
        assert_eq!(
            LoaderKnob::NumWorkers.hf_argument(),
            "dataloader_num_workers"
        );
        // Not a loader setting, or not a TrainingArguments field.
        assert_eq!(LoaderKnob::from_hf_argument("dataloader_drop_last"), None);
        assert_eq!(
            LoaderKnob::from_hf_argument("dataloader_preprocessing"),
            None
        );
        assert_eq!(LoaderKnob::from_hf_argument("num_workers"), None);
        assert_eq!(
            LoaderKnob::settings().map(|k| k.name()).collect::<Vec<_>>(),
            DATA_PRESERVING
        );
    }

    #[test]
    fn lower_precision_and_compile_are_the_numerics_changing_ones() {
        let changing: Vec<&str> = ComputeKnob::ALL
            .into_iter()
            .filter(|k| k.numerics() == Numerics::Changing)
            .map(|k| k.name())
            .collect();
        assert_eq!(changing, ["tf32", "autocast", "compile"]);
    }
}

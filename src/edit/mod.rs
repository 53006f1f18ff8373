//! DataLoader call sites in Python source: finding, rewriting, diffing and
//! comparing them.
//!
//! This module owns everything tuneloop knows about the *text* of the user's
//! training code:
//!
//! * [`scan`] parses Python with tree-sitter and finds the calls that resolve
//!   to `torch.utils.data.DataLoader` (bare name, aliases, qualified and
//!   module-alias forms), with their keyword arguments as source text;
//!   [`check_syntax`] locates the first syntax error.
//! * [`rewrite`] sets or removes one keyword argument of one call through the
//!   syntax tree, touching no other byte, and refuses edits that would break
//!   the file or change anything else.
//! * [`diff`] renders a git-style unified diff of an edit.
//! * [`knobs`] follows each knob's value to where it is defined (the call's
//!   keyword, an argparse flag's `default=`, a config file's value, a Hugging
//!   Face `TrainingArguments` keyword), edits it there, and classifies a
//!   turn's edit as knob changes at their sources; [`config_file`] finds and
//!   edits one value of a YAML, JSON or TOML file; [`spread`] follows a knob
//!   into the dict literal a call spreads (`**train_kwargs`); [`wrap`] sees
//!   through `int(·)`, `max(1, ·)` and the like; [`command_line`] and
//!   [`cli_knobs`] follow a knob into the user's command (`-j 0`,
//!   `--dataloader_num_workers 0`, `--data.num_workers 0`) in `[bench] run`.
//! * [`compare`] matches a file's call sites before and after a change, so the
//!   caller can check that exactly one DataLoader argument changed and nothing
//!   outside the calls did.
//!
//! Everything here is a pure function of its inputs (only [`scan_file`] reads
//! a file); nothing spawns processes or writes files.
//!
//! Errors are typed per operation, not one shared enum: each function's
//! type holds only the ways *it* can fail, so a caller (and a test) can
//! match on them. Two families: the refusals to make a change
//! ([`knobs::SetKnobError`] over the per-source ones, and
//! [`compute::ComputeRefusal`]), and the verdicts that a turn's edit is
//! more than one knob's value ([`command_line::CommandEditError`],
//! [`knobs::ValueEditError`]). Their text is the reason a run folder
//! records, so a variant's words are part of its contract; wrapped errors
//! (a [`rewrite::RewriteError`], [`scan::ScanError`], a syntax error) stay
//! the `#[source]`.

// The loader knobs' names are the knob vocabulary's; edit's code has
// always called them by this name.
pub use crate::knob::DATA_PRESERVING;

pub mod cli_knobs;
pub mod command_line;
pub mod compare;
pub mod compute;
pub mod config_file;
pub mod diff;
pub mod knobs;
pub mod py_defs;
pub mod rewrite;
pub mod scan;
pub mod scope;
pub mod spread;
pub mod types;
pub mod wrap;

pub use compare::{
    compare_sites, compare_sources, non_call_changes, CompareError, KwargChange, SiteDelta,
};
pub use diff::unified_diff;
pub use knobs::{knob_files, knob_sites, KnobOrigin, KnobSite, SiteKind, Source};
pub use rewrite::{find_site, set_kwarg, RewriteError};
pub use scan::{check_syntax, scan_file, scan_source, CallSite, ScanError, SyntaxError};
pub use scope::{changed_ranges, enclosing_functions};

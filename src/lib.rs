//! tuneloop: makes PyTorch training faster on its own, and leaves the evidence.
//!
//! Theory of operation
//! -------------------
//! A *workspace* (`tuneloop.toml`, `policies/`, `prompts/`, `CLAUDE.md`, `runs/`)
//! names a *project* (the training code) and its *editable files*. `bench` runs an
//! embedded Python harness against the project's `build()` in a fresh process and
//! reads one JSON line back (samples/sec, data_wait vs train_step, a fingerprint of
//! the first batches). `run_loop` measures a baseline, then asks an `agent` for ONE
//! change per turn, verifies it from the syntax tree (`edit`, `verify`), measures
//! candidate and incumbent interleaved, and keeps or reverts by the paired-ratio
//! rule in `bench::stats`. Every step is an event: `store` appends it to
//! `runs/<id>/events.jsonl` and the terminal view prints it; `report` renders the
//! run folder as Markdown, JSON, HTML and SVG. `process` is the only place that
//! spawns children (own process group, timeout, SIGTERM → grace → SIGKILL).
//! `probe` (cargo feature `libtorch`) measures the machine's data-path limits
//! natively; without the feature it only reads a run's probe.json.
//!
//! The modules sit in layers, each importing only from its own layer and
//! those below: docs/architecture.md has the table, and `tests/layers.rs`
//! fails on an import that goes up.

pub mod agent;
pub mod bench;
pub mod cli;
pub mod compute;
pub mod config;
pub mod doctor;
pub mod edit;
pub mod error;
pub mod event;
pub mod fsio;
pub mod git;
pub mod interpreter;
pub mod judge;
pub mod knob;
pub mod measure;
pub mod numerics;
pub mod policy_lint;
pub mod probe;
pub mod process;
pub mod report;
pub mod review;
pub mod run_folder;
pub mod run_loop;
pub mod run_report;
pub mod store;
pub mod turn;
pub mod verify;
pub mod words;

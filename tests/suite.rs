//! The integration tests, one binary: the real `tuneloop` binary on real
//! workspaces, real PyTorch on CPU, real processes and git (each module's
//! own doc says what it covers). One binary rather than one per file: the
//! suite links once, and `support::serial()` is one lock for the whole
//! suite, so one tuning run measures at a time while the tests that tune
//! nothing run beside it. Every test takes one of as many running slots as
//! the machine has cores (`support::slot()`; the lock's holder first), and
//! `make test` runs the suite on more threads than that, so a thread
//! waiting for the lock leaves its core to another test (`suite_rules`
//! keeps both rules). Three stay binaries of their own:
//! `tests/distributed.rs`, whose torchrun jobs put two ranks on the two cores
//! and, beside the suite's other tests, measured a ×1.33 change too noisily to
//! keep it; `tests/probe.rs`, built again with the `libtorch` feature; and
//! `tests/layers.rs`, read on its own in docs/architecture.md.

mod support;

mod claude_agent;
mod command_mode;
mod compute;
mod config_knobs;
mod cores;
mod crash;
mod data_identity;
mod discovery;
mod docs;
mod e2e;
mod epochs;
mod fork;
mod gan;
mod gpu_check;
mod knob_forms;
mod review;
mod short_commands;
mod structural;
mod suite_rules;
mod wheel;
mod whole_command;
mod window;

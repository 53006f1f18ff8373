//! The texts the agents are given, embedded at build time: the tuning
//! procedure (`prompts/procedure.md`, also written into the project's
//! CLAUDE.md by `tuneloop init`) and the per-turn prompt templates in English
//! and Japanese. They belong to the agent, so that the agent does not import
//! the command-line layer; `init` copies them from here.

/// The tuning procedure for agents (the `## tuneloop` block of CLAUDE.md).
pub const PROCEDURE_MD: &str = include_str!("../../prompts/procedure.md");
/// The per-turn prompt template, English.
pub const PROMPT_EN: &str = include_str!("../../prompts/turn.en.md");
/// The per-turn prompt template, Japanese.
pub const PROMPT_JA: &str = include_str!("../../prompts/turn.ja.md");

//! The `claude` command line as plain data, built from the policy alone, and
//! the policy rules that give the agent more than a tuning turn needs.
//!
//! The facts this follows are in `docs/claude-code.md`: `-p` is a flag and the
//! prompt is the positional argument right after it (`--allowedTools`,
//! `--disallowedTools`, `--tools` and `--add-dir` take several values, so a
//! prompt placed after one of them would be read as a rule); `stream-json`
//! needs `--verbose`; `--max-turns` is a number. Each tool list goes in as ONE
//! argument, its rules joined by commas (the CLI splits on commas outside
//! parentheses), so no list can swallow the argument after it.

use crate::config::AgentPolicy;

/// Variables a Claude Code session sets for the processes it starts, by
/// which newer CLI versions detect a nested session and refuse to start
/// ("Claude Code cannot be launched inside another Claude Code session").
/// tuneloop started by Claude Code (a user asked it to tune) starts its own
/// `claude -p` without them. Everything else is inherited as it is:
/// authentication (`ANTHROPIC_API_KEY`, `CLAUDE_CODE_OAUTH_TOKEN`), the
/// provider (`CLAUDE_CODE_USE_BEDROCK`, `CLAUDE_CODE_USE_VERTEX`) and the
/// user's own `CLAUDE_CODE_*` settings.
pub const PARENT_SESSION_VARS: [&str; 4] = [
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SSE_PORT",
    "CLAUDE_CODE_SESSION_ID",
];

/// The parent-session variables set in this process's environment.
pub fn parent_session_vars_set() -> Vec<String> {
    PARENT_SESSION_VARS
        .iter()
        .filter(|k| std::env::var_os(k).is_some())
        .map(|k| k.to_string())
        .collect()
}

/// What changes from one call to the next; everything else is the policy.
#[derive(Clone, Debug, Default)]
pub struct Invocation<'a> {
    /// The rendered turn prompt.
    pub prompt: &'a str,
    /// The tuning procedure, when no `CLAUDE.md` on the way up from the
    /// project carries it (Claude Code reads those by itself).
    pub append_system_prompt: Option<&'a str>,
    /// Folders outside the project the agent may read (the turn folder, when
    /// the profiler table is too large for stdin and is passed as a file).
    pub add_dirs: &'a [String],
}

/// The arguments after the program name, in the order the CLI expects.
pub fn args(p: &AgentPolicy, inv: &Invocation) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "-p".into(),
        inv.prompt.into(),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
    ];
    let mut flag = |name: &str, value: String| {
        a.push(name.into());
        a.push(value);
    };
    flag("--max-turns", p.max_turns.to_string());
    flag("--permission-mode", p.permission_mode.clone());
    if !p.tools.is_empty() {
        flag("--tools", join_rules(&p.tools));
    }
    if !p.allowed_tools.is_empty() {
        flag("--allowedTools", join_rules(&p.allowed_tools));
    }
    if !p.disallowed_tools.is_empty() {
        flag("--disallowedTools", join_rules(&p.disallowed_tools));
    }
    if let Some(m) = p.model.as_deref().filter(|m| !m.is_empty()) {
        flag("--model", m.to_string());
    }
    if let Some(b) = p.max_budget_usd {
        flag("--max-budget-usd", b.to_string());
    }
    for d in inv.add_dirs {
        flag("--add-dir", d.clone());
    }
    if let Some(s) = inv.append_system_prompt {
        flag("--append-system-prompt", s.to_string());
    }
    a.extend(p.extra_args.iter().cloned());
    a
}

/// One argument for a variadic tool flag: rules joined by commas.
fn join_rules(rules: &[String]) -> String {
    rules
        .iter()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
        .collect::<Vec<_>>()
        .join(",")
}

/// The rules the CLI will see, split as it splits them: on commas and
/// whitespace outside parentheses.
pub fn split_rules(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    for ch in value.chars() {
        match ch {
            '(' => {
                depth += 1;
                cur.push(ch);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                cur.push(ch);
            }
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(ch),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `(tool, specifier)` of a rule such as `Bash(npm run *)`.
pub(crate) fn parse_rule(rule: &str) -> (&str, Option<&str>) {
    match rule.find('(') {
        Some(i) if rule.ends_with(')') => {
            (rule[..i].trim(), Some(rule[i + 1..rule.len() - 1].trim()))
        }
        _ => (rule.trim(), None),
    }
}

/// A specifier that matches everything (`*`, `**`, `/**`, `:*`, …).
pub(crate) fn matches_everything(spec: Option<&str>) -> bool {
    match spec {
        None => true,
        Some(s) => {
            let s = s
                .trim()
                .trim_start_matches("//")
                .trim_start_matches('/')
                .trim_start_matches("~/");
            s.is_empty()
                || s.chars()
                    .all(|c| c == '*' || c == ':' || c == '/' || c == ' ')
        }
    }
}

/// Permission modes the CLI accepts.
pub const PERMISSION_MODES: [&str; 7] = [
    "acceptEdits",
    "auto",
    "bypassPermissions",
    "default",
    "dontAsk",
    "manual",
    "plan",
];

/// Rules in the policy that hand the agent more than one tuning turn needs,
/// each with what to write instead.
pub fn warnings(p: &AgentPolicy) -> Vec<String> {
    let mut w = Vec::new();
    for rule in p.allowed_tools.iter().flat_map(|r| split_rules(r)) {
        let (tool, spec) = parse_rule(&rule);
        if tool == "Bash" && matches_everything(spec) {
            w.push(format!(
                "allowed_tools has `{rule}`: the agent may run ANY shell command without asking \
                 (delete files, install packages, reach the network). Allow exact commands instead, \
                 e.g. \"Bash(python bench_loader.py)\""
            ));
        } else if tool == "Write" {
            let scope = if matches_everything(spec) {
                "any file, anywhere it can reach"
            } else {
                "new files"
            };
            w.push(format!(
                "allowed_tools has `{rule}`: the agent may create or overwrite {scope}; \
                 a tuning turn only needs Edit on the editable files"
            ));
        }
    }
    if p.permission_mode == "bypassPermissions" {
        w.push(
            "permission_mode = \"bypassPermissions\": every tool call runs without a check and the \
             allowed/disallowed lists no longer protect anything (the CLI also refuses it as root); \
             use \"dontAsk\""
                .into(),
        );
    } else if !PERMISSION_MODES.contains(&p.permission_mode.as_str()) {
        w.push(format!(
            "permission_mode = \"{}\" is not a mode the CLI knows ({}); the call will fail",
            p.permission_mode,
            PERMISSION_MODES.join(", ")
        ));
    }
    for a in &p.extra_args {
        if a == "--dangerously-skip-permissions" || a == "--allow-dangerously-skip-permissions" {
            w.push(format!(
                "extra_args has `{a}`: every permission check is skipped"
            ));
        }
    }
    if p.max_turns < 2 {
        w.push("max_turns = 1 leaves no turn to edit after reading the file; use 2 or more".into());
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_comes_right_after_p_and_lists_are_one_argument_each() {
        let p = AgentPolicy {
            allowed_tools: vec![
                "Read".into(),
                "Edit(train.py)".into(),
                "Bash(python bench_loader.py)".into(),
            ],
            model: Some("sonnet".into()),
            extra_args: vec!["--no-session-persistence".into()],
            ..Default::default()
        };
        let a = args(
            &p,
            &Invocation {
                prompt: "PROMPT",
                append_system_prompt: Some("PROC"),
                add_dirs: &[],
            },
        );
        assert_eq!(&a[..2], ["-p", "PROMPT"]);
        let at = |f: &str| {
            a[a.iter()
                .position(|x| x == f)
                .unwrap_or_else(|| panic!("{f} missing in {a:?}"))
                + 1]
            .clone()
        };
        assert_eq!(at("--output-format"), "stream-json");
        assert!(a.contains(&"--verbose".to_string()));
        assert_eq!(at("--max-turns"), "8");
        assert_eq!(at("--permission-mode"), "dontAsk");
        assert_eq!(at("--tools"), "Read,Edit,Glob,Grep");
        assert_eq!(
            at("--allowedTools"),
            "Read,Edit(train.py),Bash(python bench_loader.py)"
        );
        assert_eq!(split_rules(&at("--allowedTools")), p.allowed_tools);
        assert_eq!(at("--disallowedTools"), "Bash,Write,WebFetch,WebSearch");
        assert_eq!(at("--model"), "sonnet");
        assert_eq!(at("--max-budget-usd"), "1");
        assert_eq!(at("--append-system-prompt"), "PROC");
        assert_eq!(a.last().unwrap(), "--no-session-persistence");
        // Every flag that takes a value is followed by exactly one value.
        assert!(!a.contains(&"--add-dir".to_string()));
    }

    #[test]
    fn empty_lists_and_unset_values_leave_their_flags_out() {
        let mut p = AgentPolicy::default();
        p.tools.clear();
        p.allowed_tools.clear();
        p.disallowed_tools.clear();
        p.max_budget_usd = None;
        let a = args(
            &p,
            &Invocation {
                prompt: "x",
                add_dirs: &["/tmp/t".into()],
                ..Default::default()
            },
        );
        for f in [
            "--tools",
            "--allowedTools",
            "--disallowedTools",
            "--model",
            "--max-budget-usd",
            "--append-system-prompt",
        ] {
            assert!(!a.contains(&f.to_string()), "{f} in {a:?}");
        }
        assert_eq!(
            a[a.len() - 2..],
            ["--add-dir".to_string(), "/tmp/t".to_string()]
        );
    }

    #[test]
    fn rules_split_outside_parentheses_only() {
        assert_eq!(
            split_rules("Read,Edit Bash(npm run *),Bash(a, b)"),
            ["Read", "Edit", "Bash(npm run *)", "Bash(a, b)"]
        );
    }

    #[test]
    fn the_default_policy_gives_nothing_away() {
        assert_eq!(warnings(&AgentPolicy::default()), Vec::<String>::new());
    }

    #[test]
    fn risky_rules_are_named() {
        for (rule, word) in [
            ("Bash", "ANY shell command"),
            ("Bash(*)", "ANY shell command"),
            ("Bash(:*)", "ANY shell command"),
            ("Write", "any file"),
            ("Write(/**)", "any file"),
            ("Write(notes/*.md)", "new files"),
        ] {
            let mut p = AgentPolicy::default();
            p.allowed_tools.push(rule.into());
            let w = warnings(&p);
            assert_eq!(w.len(), 1, "{rule}: {w:?}");
            assert!(w[0].contains(word) && w[0].contains(rule), "{rule}: {w:?}");
        }
        let mut p = AgentPolicy::default();
        p.allowed_tools.push("Bash(python bench_loader.py)".into());
        assert!(warnings(&p).is_empty());
        p.permission_mode = "bypassPermissions".into();
        p.extra_args.push("--dangerously-skip-permissions".into());
        p.max_turns = 1;
        let w = warnings(&p).join("\n");
        assert!(
            w.contains("bypassPermissions") && w.contains("skipped") && w.contains("max_turns"),
            "{w}"
        );
    }
}

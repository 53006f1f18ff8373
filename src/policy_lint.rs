//! Rules of a policy's `[agent]` tool lists that can never take effect.
//!
//! Claude Code applies its permission rules silently (`docs/claude-code.md`,
//! pitfall 5): deny beats allow, a bare deny rule (`Bash`) removes the tool
//! altogether — the call's `init` event then lists no such tool —, `--tools`
//! decides which built-in tools exist at all, and an unknown tool name in a
//! rule is ignored. So an allow rule such as `Bash(python bench_loader.py)`
//! next to the default deny list does nothing, and nothing says so. This
//! module finds those rules from the policy alone, before a paid call does:
//!
//! - an allowed rule whose tool is missing from `tools`;
//! - an allowed rule whose tool a bare deny rule removes (a denied tool the
//!   allowed rule needs);
//! - an allowed rule covered by a narrower deny rule (shadowed);
//! - a rule naming a tool Claude Code does not have.
//!
//! Each warning names the rule(s) and says the fix, and [`placed`] puts
//! it at the line of the rule it is about (the allowed rule that never
//! applies, or the rule naming an unknown tool). `policy show` and `start`
//! print them; none stops a run.

use crate::agent::claude::command::{matches_everything, parse_rule, split_rules};
use crate::config::{AgentPolicy, PolicyFile};

/// One rule that cannot work as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lint {
    /// The `[agent]` list the rule is in: `tools`, `allowed_tools` or `disallowed_tools`.
    pub list: &'static str,
    /// The rule, as one element of that list.
    pub rule: String,
    /// What is wrong, naming the rule(s), and the fix.
    pub message: String,
}

/// [`lint`]'s warnings for `p`, read from `file`, each as
/// `path:line:column: message` at the rule it is about (`path` alone
/// where the rule has no line: the built-in policy).
pub fn placed(p: &AgentPolicy, file: &PolicyFile) -> Vec<String> {
    lint(p)
        .into_iter()
        .map(|l| {
            let at = file.place(&format!("agent.{}", l.list), Some(&l.rule));
            format!("{at}: {}", l.message)
        })
        .collect()
}

/// Claude Code's tool names: those its `init` event lists
/// (2.1.x: Task, Bash, Glob, Grep, LS, Read, Edit, MultiEdit, Write,
/// NotebookEdit, WebFetch, WebSearch), and the others its documentation
/// names. Tools of MCP servers are `mcp__<server>[__<tool>]`.
pub const KNOWN_TOOLS: [&str; 25] = [
    "Agent",
    "AskUserQuestion",
    "Bash",
    "BashOutput",
    "Edit",
    "ExitPlanMode",
    "Glob",
    "Grep",
    "KillBash",
    "KillShell",
    "LS",
    "ListMcpResourcesTool",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Read",
    "ReadMcpResourceTool",
    "SlashCommand",
    "Skill",
    "Task",
    "TodoRead",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "Write",
];

fn known(tool: &str) -> bool {
    KNOWN_TOOLS.contains(&tool) || tool.starts_with("mcp__")
}

/// A known tool spelled alike (other case, a letter or two off).
fn did_you_mean(tool: &str) -> Option<&'static str> {
    let lower = tool.to_lowercase();
    KNOWN_TOOLS
        .iter()
        .find(|k| k.to_lowercase() == lower)
        .or_else(|| {
            KNOWN_TOOLS
                .iter()
                .map(|k| (edit_distance(&k.to_lowercase(), &lower), k))
                .filter(|(d, _)| *d <= 2)
                .min_by_key(|(d, _)| *d)
                .map(|(_, k)| k)
        })
        .copied()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Whether deny specifier `deny` covers every call allow specifier `allow`
/// names: the same specifier, or a pattern the allowed one falls under
/// (`python *`, legacy `python:*`, `src/**`, `*.py`). `*` and `**` match
/// any run of characters here: a deny rule that covers the allowed one
/// under this reading does under the CLI's too, for the rules a policy
/// writes (one command, one path pattern).
fn covers(deny: &str, allow: &str) -> bool {
    let norm = |s: &str| s.trim().trim_start_matches("./").to_string();
    let (deny, allow) = (norm(deny), norm(allow));
    if deny == allow {
        return true;
    }
    let pattern = match deny.strip_suffix(":*") {
        Some(p) => format!("{p}*"),
        None => deny.clone(),
    };
    pattern.contains('*') && wildcard(&pattern, &allow)
}

/// `*` (and `**`) matching any run of characters, everything else itself.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Every rule of the three lists that cannot work as written, with its fix.
pub fn lint(p: &AgentPolicy) -> Vec<Lint> {
    let rules = |list: &[String]| -> Vec<String> {
        list.iter()
            .flat_map(|r| split_rules(r))
            .filter(|r| !r.trim().is_empty())
            .collect()
    };
    let (tools, allowed, denied) = (
        rules(&p.tools),
        rules(&p.allowed_tools),
        rules(&p.disallowed_tools),
    );
    let mut w = Vec::new();
    // An allowed rule that never applies.
    let dead = |rule: &String, message: String| Lint {
        list: "allowed_tools",
        rule: rule.clone(),
        message,
    };

    for (key, list) in [
        ("tools", &tools),
        ("allowed_tools", &allowed),
        ("disallowed_tools", &denied),
    ] {
        for rule in list {
            let (tool, _) = parse_rule(rule);
            if known(tool) {
                continue;
            }
            let fix = match did_you_mean(tool) {
                Some(k) => format!("did you mean `{k}`? Tool names are case-sensitive"),
                None => format!("known tools: {}", KNOWN_TOOLS.join(", ")),
            };
            w.push(Lint {
                list: key,
                rule: rule.clone(),
                message: format!(
                    "{key} has `{rule}`: Claude Code has no tool `{tool}`, so the rule does nothing; {fix}"
                ),
            });
        }
    }

    let dont_ask = if p.permission_mode == "dontAsk" {
        String::new()
    } else {
        " (with permission_mode = \"dontAsk\", whatever no allow rule names is still refused)"
            .to_string()
    };
    for a in &allowed {
        let (tool, spec) = parse_rule(a);
        if !known(tool) {
            continue;
        }
        if !tools.is_empty() && !tools.iter().any(|t| parse_rule(t).0 == tool) {
            w.push(dead(a, format!(
                "allowed_tools has `{a}`, but `{tool}` is not in tools ({}): the tool does not exist in the call, so the rule never applies; add \"{tool}\" to tools, or drop `{a}`",
                tools.join(", ")
            )));
        }
        for d in &denied {
            let (dtool, dspec) = parse_rule(d);
            if dtool != tool {
                continue;
            }
            if matches_everything(dspec) {
                // A bare deny removes the tool: the allowed rule needs a denied tool.
                let fix = if matches_everything(spec) {
                    format!("decide: drop `{d}` from disallowed_tools to let the agent use {tool}, or drop `{a}` from allowed_tools")
                } else {
                    format!("to let the agent run only what `{a}` names, drop `{d}` from disallowed_tools{dont_ask}; else drop `{a}`")
                };
                w.push(dead(a, format!(
                    "allowed_tools has `{a}`, but disallowed_tools has `{d}`, which removes the tool `{tool}` altogether (deny beats allow; Claude Code then lists no {tool} tool): `{a}` never applies; {fix}"
                )));
            } else if let (Some(ds), Some(s)) = (dspec, spec) {
                // (`Bash` allowed next to `Bash(rm *)` denied: both apply.)
                if covers(ds, s) {
                    w.push(dead(a, format!(
                        "allowed_tools has `{a}`, but disallowed_tools has `{d}`, which covers it (deny beats allow): `{a}` never applies; narrow `{d}` so that it leaves `{a}` out, or drop `{a}`"
                    )));
                }
            }
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warnings' texts.
    fn lint(p: &AgentPolicy) -> Vec<String> {
        super::lint(p).into_iter().map(|l| l.message).collect()
    }

    fn policy(tools: &[&str], allowed: &[&str], denied: &[&str]) -> AgentPolicy {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        AgentPolicy {
            tools: v(tools),
            allowed_tools: v(allowed),
            disallowed_tools: v(denied),
            ..Default::default()
        }
    }

    #[test]
    fn each_warning_names_the_file_and_the_line_of_its_rule() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("policy.toml");
        std::fs::write(
            &path,
            "[agent]\ntools = [\"Read\", \"Edit\"]\nallowed_tools = [\n    \"Read\",\n    \"Bash(python bench_loader.py)\",\n    \"Grpe\",\n]\ndisallowed_tools = [\"Edit(*.py)\", \"Frobnicate\"]\n",
        )
        .unwrap();
        let file = crate::config::Policy::load(&path).unwrap();
        let w = placed(&file.policy.agent, &file);
        let at = |line: &str| format!("{}:{line}: ", path.display());
        assert_eq!(w.len(), 3, "{w:#?}");
        assert!(
            w[0].starts_with(&format!("{}allowed_tools has `Grpe`", at("6:5"))),
            "{}",
            w[0]
        );
        assert!(
            w[1].starts_with(&format!("{}disallowed_tools has `Frobnicate`", at("8:35"))),
            "{}",
            w[1]
        );
        assert!(
            w[2].starts_with(&format!(
                "{}allowed_tools has `Bash(python bench_loader.py)`, but `Bash` is not in tools",
                at("5:5")
            )),
            "{}",
            w[2]
        );
        // Past the file, the message is lint's own.
        assert_eq!(
            w[2].split_once(": ").unwrap().1,
            super::lint(&file.policy.agent)[2].message
        );
        // The built-in policy has no file to point into: the path alone.
        let built_in = PolicyFile::built_in(&path);
        let mut p = policy(&[], &["Bash"], &["Bash"]);
        p.permission_mode = built_in.policy.agent.permission_mode.clone();
        let w = placed(&p, &built_in);
        assert!(
            w[0].starts_with(&format!("{}: allowed_tools has `Bash`", path.display())),
            "{}",
            w[0]
        );
    }

    #[test]
    fn the_default_policy_has_no_dead_rule() {
        assert_eq!(lint(&AgentPolicy::default()), Vec::<String>::new());
    }

    #[test]
    fn an_allowed_rule_under_a_bare_deny_names_both_rules_and_the_fix() {
        // The case, observed with the real CLI (2.1.332): no Bash in `init`.
        let p = policy(
            &["Read", "Edit", "Bash"],
            &["Read", "Edit(train.py)", "Bash(python bench_loader.py)"],
            &["Bash", "Write", "WebFetch", "WebSearch"],
        );
        let w = lint(&p);
        assert_eq!(w.len(), 1, "{w:#?}");
        for want in [
            "`Bash(python bench_loader.py)`",
            "`Bash`",
            "never applies",
            "drop `Bash` from disallowed_tools",
        ] {
            assert!(w[0].contains(want), "{want} missing: {}", w[0]);
        }
        // The fix works: without the bare deny, nothing is dead.
        let fixed = policy(
            &["Read", "Edit", "Bash"],
            &["Read", "Edit(train.py)", "Bash(python bench_loader.py)"],
            &["Write", "WebFetch", "WebSearch"],
        );
        assert_eq!(lint(&fixed), Vec::<String>::new());
        // Allowed and denied both bare: one of them has to go.
        let w = lint(&policy(&[], &["Bash"], &["Bash"]));
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(w[0].contains("decide"), "{}", w[0]);
    }

    #[test]
    fn an_allowed_rule_covered_by_a_narrower_deny_is_shadowed() {
        for (deny, allow) in [
            ("Bash(python *)", "Bash(python bench_loader.py)"),
            ("Bash(python:*)", "Bash(python bench_loader.py)"),
            ("Edit(src/**)", "Edit(src/train.py)"),
            ("Edit(train.py)", "Edit(train.py)"),
            ("Edit(*.py)", "Edit(./train.py)"),
            ("Bash(npm run *)", "Bash(npm run test *)"),
        ] {
            let w = lint(&policy(&[], &[allow], &[deny]));
            assert_eq!(w.len(), 1, "{deny} / {allow}: {w:#?}");
            assert!(
                w[0].contains(&format!("`{deny}`"))
                    && w[0].contains(&format!("`{allow}`"))
                    && w[0].contains("covers it")
                    && w[0].contains(&format!("narrow `{deny}`")),
                "{}",
                w[0]
            );
        }
        // A deny rule that leaves the allowed call out is fine.
        for (deny, allow) in [
            ("Bash(rm *)", "Bash(python bench_loader.py)"),
            ("Edit(data/**)", "Edit(train.py)"),
            ("Bash(rm *)", "Bash"),
            ("Edit(*.cfg)", "Edit(train.py)"),
            ("Bash(python *.sh)", "Bash(python bench_loader.py)"),
        ] {
            assert_eq!(
                lint(&policy(&[], &[allow], &[deny])),
                Vec::<String>::new(),
                "{deny} / {allow}"
            );
        }
    }

    #[test]
    fn an_allowed_rule_whose_tool_is_not_in_tools_never_applies() {
        let p = policy(
            &["Read", "Edit"],
            &["Read", "Edit", "Bash(python bench_loader.py)"],
            &[],
        );
        let w = lint(&p);
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(
            w[0].contains("`Bash(python bench_loader.py)`")
                && w[0].contains("not in tools (Read, Edit)")
                && w[0].contains("add \"Bash\" to tools"),
            "{}",
            w[0]
        );
        // An empty tools list leaves every built-in tool in place.
        assert_eq!(
            lint(&policy(&[], &["Bash(python bench_loader.py)"], &[])),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_tool_claude_code_does_not_have_is_named_with_a_suggestion() {
        let w = lint(&policy(
            &["Read", "edit"],
            &["Read", "Bsh(ls)"],
            &["Frobnicate"],
        ));
        assert_eq!(w.len(), 3, "{w:#?}");
        assert!(
            w[0].starts_with("tools has `edit`") && w[0].contains("did you mean `Edit`"),
            "{}",
            w[0]
        );
        assert!(
            w[1].starts_with("allowed_tools has `Bsh(ls)`") && w[1].contains("did you mean `Bash`"),
            "{}",
            w[1]
        );
        assert!(
            w[2].starts_with("disallowed_tools has `Frobnicate`")
                && w[2].contains("known tools: Agent"),
            "{}",
            w[2]
        );
        // MCP tools are the servers' own names.
        assert_eq!(
            lint(&policy(&[], &["mcp__github__get_issue"], &[])),
            Vec::<String>::new()
        );
    }
}

//! Reading Claude Code's `stream-json` output, one line at a time, and
//! deciding how a call ended.
//!
//! The stream is NDJSON: `system`/`init` first, then `assistant` messages
//! (`text` and `tool_use` items), `user` messages (`tool_result`), and last a
//! `result` object. Unknown types and fields are skipped: new ones appear
//! often. A call succeeded only when the process exited 0, the `result` event
//! arrived, and it says no error (`is_error` false, `subtype` "success", no
//! failing `terminal_reason`) — `subtype: "success"` alone means nothing.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::CallError;

/// The final `result` event, the fields tuneloop reads (the raw object is kept too).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ResultEvent {
    pub subtype: String,
    pub is_error: bool,
    /// The reply text (absent on error subtypes).
    pub result: Option<String>,
    /// Error subtypes carry these instead, e.g. "Reached maximum number of turns (8)".
    pub errors: Vec<String>,
    pub num_turns: Option<u32>,
    pub total_cost_usd: Option<f64>,
    pub session_id: Option<String>,
    /// `[{tool_name, tool_use_id, tool_input}]`.
    pub permission_denials: Vec<Value>,
    pub terminal_reason: Option<String>,
    pub duration_ms: Option<u64>,
    #[serde(skip)]
    pub raw: Value,
}

impl ResultEvent {
    fn from_value(v: &Value) -> ResultEvent {
        let errors = match &v["errors"] {
            Value::Array(a) => a
                .iter()
                .map(|e| match e {
                    Value::String(s) => s.clone(),
                    other => other
                        .get("message")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or(other.to_string()),
                })
                .collect(),
            _ => vec![],
        };
        ResultEvent {
            subtype: v["subtype"].as_str().unwrap_or("").to_string(),
            is_error: v["is_error"].as_bool().unwrap_or(false),
            result: v["result"].as_str().map(str::to_string),
            errors,
            num_turns: v["num_turns"].as_u64().map(|n| n as u32),
            // Old versions named it `cost_usd`.
            total_cost_usd: v["total_cost_usd"]
                .as_f64()
                .or_else(|| v["cost_usd"].as_f64()),
            session_id: v["session_id"].as_str().map(str::to_string),
            permission_denials: v["permission_denials"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            terminal_reason: v["terminal_reason"].as_str().map(str::to_string),
            duration_ms: v["duration_ms"].as_u64(),
            raw: v.clone(),
        }
    }
}

/// A tool call the agent made, for the live view and the record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolUse {
    pub name: String,
    /// One short line: the file, the command or the pattern.
    pub summary: String,
}

/// Everything read from the stream so far.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    pub lines: u32,
    /// Lines that are not JSON objects (a truncated line, a stray print).
    pub not_json: u32,
    pub last_not_json: Option<String>,
    /// The `system`/`init` event.
    pub init: Option<Value>,
    pub tool_uses: Vec<ToolUse>,
    pub result: Option<ResultEvent>,
    /// Assistant messages of the main conversation (not of sub-agents), by id.
    assistant_ids: BTreeSet<String>,
    assistant_without_id: u32,
}

impl Stream {
    /// Reads one line; returns the tool calls it holds.
    pub fn feed(&mut self, line: &str) -> Vec<ToolUse> {
        let line = line.trim();
        if line.is_empty() {
            return vec![];
        }
        self.lines += 1;
        let v: Value = match serde_json::from_str(line) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                self.not_json += 1;
                self.last_not_json = Some(shorten(line, 120));
                return vec![];
            }
        };
        match v["type"].as_str() {
            Some("system") if v["subtype"] == "init" => self.init = Some(v),
            Some("assistant") => {
                // Sub-agents' messages carry their parent's tool_use id; they
                // do not count against --max-turns.
                if v["parent_tool_use_id"].is_null() {
                    match v["message"]["id"].as_str() {
                        Some(id) => {
                            self.assistant_ids.insert(id.to_string());
                        }
                        None => self.assistant_without_id += 1,
                    }
                }
                let mut found = Vec::new();
                for item in v["message"]["content"].as_array().into_iter().flatten() {
                    if item["type"] == "tool_use" {
                        let name = item["name"].as_str().unwrap_or("?").to_string();
                        let summary = summarize_input(&name, &item["input"]);
                        found.push(ToolUse { name, summary });
                    }
                }
                self.tool_uses.extend(found.iter().cloned());
                return found;
            }
            Some("result") => self.result = Some(ResultEvent::from_value(&v)),
            _ => {}
        }
        vec![]
    }

    /// Assistant turns of the main conversation seen so far.
    pub fn assistant_turns(&self) -> u32 {
        self.assistant_ids.len() as u32 + self.assistant_without_id
    }

    /// The init event's tool list, model and permission mode, for the record.
    pub fn init_summary(&self) -> Value {
        match &self.init {
            Some(i) => serde_json::json!({
                "tools": i["tools"], "model": i["model"], "permissionMode": i["permissionMode"],
                "claude_code_version": i["claude_code_version"], "cwd": i["cwd"],
            }),
            None => Value::Null,
        }
    }
}

/// One short line describing a tool call's input.
pub fn summarize_input(tool: &str, input: &Value) -> String {
    let s = |k: &str| input[k].as_str().map(|x| shorten(x, 80));
    let text = match tool {
        "Edit" | "MultiEdit" | "Write" | "Read" | "NotebookEdit" => {
            let path = s("file_path")
                .or_else(|| s("notebook_path"))
                .unwrap_or_default();
            match (input["old_string"].as_str(), input["new_string"].as_str()) {
                (Some(o), Some(n)) => format!("{path}: {}", edit_summary(o, n)),
                _ => path,
            }
        }
        "Bash" => s("command").unwrap_or_default(),
        "Glob" | "Grep" => {
            let p = s("pattern").unwrap_or_default();
            match s("path") {
                Some(dir) => format!("{p} in {dir}"),
                None => p,
            }
        }
        "WebFetch" => s("url").unwrap_or_default(),
        "WebSearch" => s("query").unwrap_or_default(),
        _ => String::new(),
    };
    if text.is_empty() && !input.is_null() {
        shorten(&input.to_string(), 100)
    } else {
        text
    }
}

/// What an Edit replaced: the differing middle of old and new, widened to
/// whole words, e.g. "+ `num_workers=2,`" or "`num_workers=2` → `num_workers=4`".
fn edit_summary(old: &str, new: &str) -> String {
    if old == new {
        return "(no change)".into();
    }
    let (o, n): (Vec<char>, Vec<char>) = (old.chars().collect(), new.chars().collect());
    let boundary = |c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | '[' | ']' | ':');
    // A split point inside a word (word characters on both sides, in either text) moves outwards.
    let word_at = |v: &[char], i: usize| v.get(i).is_some_and(|c| !boundary(*c));
    let mut pre = o.iter().zip(&n).take_while(|(a, b)| a == b).count();
    while pre > 0 && !boundary(o[pre - 1]) && (word_at(&o, pre) || word_at(&n, pre)) {
        pre -= 1;
    }
    let max_suf = o.len().min(n.len()) - pre;
    let mut suf = o
        .iter()
        .rev()
        .zip(n.iter().rev())
        .take(max_suf)
        .take_while(|(a, b)| a == b)
        .count();
    let before = |v: &[char], suf: usize| {
        (v.len() - suf)
            .checked_sub(1)
            .is_some_and(|i| i >= pre && word_at(v, i))
    };
    while suf > 0 && !boundary(o[o.len() - suf]) && (before(&o, suf) || before(&n, suf)) {
        suf -= 1;
    }
    let mid = |v: &[char]| shorten(&v[pre..v.len() - suf].iter().collect::<String>(), 60);
    let (om, nm) = (mid(&o), mid(&n));
    match (om.is_empty(), nm.is_empty()) {
        (true, true) => "(no change)".into(),
        (true, false) => format!("+ `{nm}`"),
        (false, true) => format!("- `{om}`"),
        (false, false) => format!("`{om}` → `{nm}`"),
    }
}

/// `s` on one line, at most `max` characters.
pub fn shorten(s: &str, max: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= max {
        one
    } else {
        format!(
            "{}…",
            one.chars().take(max.saturating_sub(1)).collect::<String>()
        )
    }
}

/// How the process ended, from tuneloop's side.
#[derive(Clone, Debug, PartialEq)]
pub enum CallEnd {
    Exited(i32),
    Signalled(i32),
    /// Ran past `timeout_s`; the group got SIGTERM, a grace, SIGKILL.
    TimedOut(Duration),
    /// Went on past `--max-turns` (some versions ignore it); ended like a timeout.
    TurnLimit {
        limit: u32,
        seen: u32,
    },
    /// Ctrl-C / SIGTERM to tuneloop.
    Interrupted,
}

/// Terminal reasons that mean the call did not finish its work.
const FAILING_TERMINAL_REASONS: [&str; 6] = [
    "max_turns",
    "api_error",
    "blocking_limit",
    "budget_exhausted",
    "error_during_execution",
    "aborted",
];

/// `None` when the call succeeded; else why not, in the CLI's own words where it gave any.
pub fn failure(end: &CallEnd, stream: &Stream, stderr: &str) -> Option<CallError> {
    let code = match end {
        CallEnd::Interrupted => return Some(CallError::Interrupted),
        CallEnd::TimedOut(d) => {
            return Some(CallError::TimedOut {
                limit_s: d.as_secs(),
            })
        }
        CallEnd::TurnLimit { limit, seen } => {
            return Some(CallError::TurnLimit {
                limit: *limit,
                seen: *seen,
            })
        }
        CallEnd::Signalled(sig) => {
            return Some(CallError::Signalled {
                signal: *sig,
                stderr: stderr_words(stderr),
            })
        }
        CallEnd::Exited(code) => *code,
    };
    let Some(r) = &stream.result else {
        if code != 0 {
            return Some(CallError::Crashed {
                code,
                stderr: stderr_words(stderr),
            });
        }
        return Some(CallError::Unreadable {
            lines: stream.lines,
            not_json: stream.not_json,
            last: stream.last_not_json.clone(),
        });
    };
    let bad_reason = r
        .terminal_reason
        .as_deref()
        .filter(|t| FAILING_TERMINAL_REASONS.contains(t));
    if code == 0 && !r.is_error && r.subtype == "success" && bad_reason.is_none() {
        return None;
    }
    // The CLI's words: its errors, else its result text, else stderr.
    let err_tail = stderr_words(stderr);
    let words = if !r.errors.is_empty() {
        r.errors.join("; ")
    } else if let Some(t) = r.result.as_deref().filter(|t| !t.trim().is_empty()) {
        shorten(t, 200)
    } else if !err_tail.is_empty() {
        err_tail
    } else {
        "no message".into()
    };
    let mut tags = Vec::new();
    if r.subtype != "success" && !r.subtype.is_empty() {
        tags.push(r.subtype.clone());
    }
    if let Some(t) = &r.terminal_reason {
        tags.push(t.clone());
    }
    tags.push(format!("exit {code}"));
    if r.is_error {
        tags.push("is_error".into());
    }
    Some(CallError::Result { words, tags })
}

/// The line of `stderr` that says what went wrong: the last one naming an
/// error (`TypeError: …`, `Error: …`, `error: …`), else the last line.
fn stderr_words(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let named = lines
        .iter()
        .rev()
        .find(|l| !l.starts_with("at ") && (l.contains("Error") || l.contains("error:")));
    shorten(named.or(lines.last()).copied().unwrap_or(""), 300)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The failure as recorded in `call.json` and the agent report.
    fn failure(end: &CallEnd, stream: &Stream, stderr: &str) -> Option<String> {
        super::failure(end, stream, stderr).map(|f| f.to_string())
    }

    const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/p","session_id":"s1","tools":["Read","Edit"],"model":"claude-sonnet","permissionMode":"dontAsk"}"#;
    const TOOL: &str = r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"reading"},{"type":"tool_use","id":"t1","name":"Edit","input":{"file_path":"/p/train.py","old_string":"shuffle=True,","new_string":"shuffle=True, num_workers=2,"}}]},"parent_tool_use_id":null,"session_id":"s1"}"#;
    const OK: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":1200,"num_turns":3,"result":"Set num_workers=2.","session_id":"s1","total_cost_usd":0.0421,"permission_denials":[{"tool_name":"Bash","tool_use_id":"t0","tool_input":{"command":"python train.py"}}],"terminal_reason":"completed","new_field":1}"#;

    fn stream(lines: &[&str]) -> Stream {
        let mut s = Stream::default();
        for l in lines {
            s.feed(l);
        }
        s
    }

    #[test]
    fn a_full_stream_is_read_and_succeeds() {
        let mut s = Stream::default();
        s.feed(INIT);
        let tools = s.feed(TOOL);
        assert_eq!(
            tools,
            vec![ToolUse {
                name: "Edit".into(),
                summary: "/p/train.py: + `num_workers=2,`".into()
            }]
        );
        s.feed(r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}"#);
        s.feed(r#"{"type":"system","subtype":"something_new"}"#);
        s.feed(OK);
        let r = s.result.as_ref().unwrap();
        assert_eq!(
            (r.num_turns, r.total_cost_usd, r.session_id.as_deref()),
            (Some(3), Some(0.0421), Some("s1"))
        );
        assert_eq!(r.permission_denials.len(), 1);
        assert_eq!(
            s.init_summary()["tools"],
            serde_json::json!(["Read", "Edit"])
        );
        assert_eq!(s.assistant_turns(), 1);
        assert_eq!(failure(&CallEnd::Exited(0), &s, ""), None);
    }

    #[test]
    fn success_needs_exit_zero_no_error_and_the_result() {
        let s = stream(&[INIT, OK]);
        assert!(failure(&CallEnd::Exited(1), &s, "")
            .unwrap()
            .contains("exit 1"));
        let err = OK.replace(r#""is_error":false"#, r#""is_error":true"#);
        assert!(failure(&CallEnd::Exited(0), &stream(&[&err]), "")
            .unwrap()
            .contains("is_error"));
        let f = failure(&CallEnd::Exited(0), &stream(&[INIT, TOOL]), "").unwrap();
        assert!(f.starts_with("unreadable output: no result event"), "{f}");
    }

    #[test]
    fn not_logged_in_is_reported_in_the_clis_words() {
        let r = r#"{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","result":"Not logged in · Please run /login","total_cost_usd":0,"num_turns":1}"#;
        let f = failure(&CallEnd::Exited(1), &stream(&[INIT, r]), "").unwrap();
        assert_eq!(
            f,
            "Not logged in · Please run /login (api_error, exit 1, is_error)"
        );
    }

    #[test]
    fn error_subtypes_use_their_errors() {
        let r = r#"{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["Reached maximum number of turns (8)"],"terminal_reason":"max_turns","num_turns":9}"#;
        let f = failure(&CallEnd::Exited(0), &stream(&[r]), "").unwrap();
        assert_eq!(
            f,
            "Reached maximum number of turns (8) (error_max_turns, max_turns, exit 0, is_error)"
        );
        let b = r#"{"type":"result","subtype":"error_max_budget_usd","is_error":true,"errors":["Reached maximum budget ($1)"],"terminal_reason":"budget_exhausted"}"#;
        let f = failure(&CallEnd::Exited(1), &stream(&[b]), "").unwrap();
        assert!(
            f.contains("maximum budget") && f.contains("budget_exhausted"),
            "{f}"
        );
        // A failing terminal reason fails the call even when everything else says success.
        let t = OK.replace("\"completed\"", "\"blocking_limit\"");
        assert!(failure(&CallEnd::Exited(0), &stream(&[&t]), "")
            .unwrap()
            .contains("blocking_limit"));
    }

    #[test]
    fn truncated_json_crashes_and_kills_are_named() {
        let cut = &OK[..OK.len() / 2];
        let s = stream(&[INIT, TOOL, cut]);
        assert_eq!(s.not_json, 1);
        let f = failure(&CallEnd::Exited(0), &s, "").unwrap();
        assert!(
            f.contains("unreadable output")
                && f.contains("1 not JSON")
                && f.contains("last unreadable line"),
            "{f}"
        );
        let f = failure(
            &CallEnd::Exited(1),
            &s,
            "file:///cli.js:1\nTypeError: x is undefined\n    at main (cli.js:1)\n",
        )
        .unwrap();
        assert_eq!(
            f,
            "crashed (exit 1) before its result: TypeError: x is undefined"
        );
        let f = failure(&CallEnd::Exited(3), &s, "first\nsomething broke\n").unwrap();
        assert_eq!(f, "crashed (exit 3) before its result: something broke");
        assert!(failure(&CallEnd::Signalled(6), &s, "")
            .unwrap()
            .contains("signal 6"));
        assert!(failure(&CallEnd::TimedOut(Duration::from_secs(5)), &s, "")
            .unwrap()
            .starts_with("timed out after 5 s"));
        let f = failure(&CallEnd::TurnLimit { limit: 3, seen: 5 }, &s, "").unwrap();
        assert!(
            f.contains("--max-turns 3") && f.contains("5 assistant turns"),
            "{f}"
        );
        let stdin_cap = "Error: piped stdin input exceeds 10MB. Pass large content as a file path in your prompt instead.\n";
        assert!(failure(&CallEnd::Exited(1), &Stream::default(), stdin_cap)
            .unwrap()
            .contains("exceeds 10MB"));
    }

    #[test]
    fn each_way_a_call_ends_has_its_own_kind() {
        let s = stream(&[INIT, TOOL]);
        let kind = |end: CallEnd, stderr: &str| super::failure(&end, &s, stderr).unwrap();
        assert!(matches!(
            kind(CallEnd::TimedOut(Duration::from_secs(5)), ""),
            CallError::TimedOut { limit_s: 5 }
        ));
        assert!(matches!(
            kind(CallEnd::Interrupted, ""),
            CallError::Interrupted
        ));
        assert!(matches!(
            kind(CallEnd::TurnLimit { limit: 3, seen: 5 }, ""),
            CallError::TurnLimit { limit: 3, seen: 5 }
        ));
        assert!(matches!(
            kind(CallEnd::Signalled(9), "Error: gone"),
            CallError::Signalled { signal: 9, ref stderr } if stderr == "Error: gone"
        ));
        assert!(matches!(
            kind(CallEnd::Exited(2), ""),
            CallError::Crashed { code: 2, ref stderr } if stderr.is_empty()
        ));
        assert!(matches!(
            kind(CallEnd::Exited(0), ""),
            CallError::Unreadable {
                lines: 2,
                not_json: 0,
                last: None
            }
        ));
        let r = r#"{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","result":"Not logged in · Please run /login"}"#;
        let f = super::failure(&CallEnd::Exited(1), &stream(&[INIT, r]), "").unwrap();
        assert!(f.is_fatal(), "{f}");
        match f {
            CallError::Result { words, tags } => {
                assert_eq!(words, "Not logged in · Please run /login");
                assert_eq!(tags, ["api_error", "exit 1", "is_error"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sub_agent_messages_do_not_count_as_turns() {
        let sub = TOOL
            .replace(
                r#""parent_tool_use_id":null"#,
                r#""parent_tool_use_id":"t9""#,
            )
            .replace("\"m1\"", "\"m2\"");
        let again = TOOL.replace(
            "\"text\",\"text\":\"reading\"",
            "\"text\",\"text\":\"more\"",
        );
        let s = stream(&[TOOL, &again, &sub]);
        assert_eq!(s.assistant_turns(), 1);
        assert_eq!(s.tool_uses.len(), 3);
    }

    #[test]
    fn edits_are_summarised_by_what_they_change() {
        let call = "DataLoader(\n    ds,\n    batch_size=32,\n    num_workers=2,\n)";
        assert_eq!(
            edit_summary(call, &call.replace("=2", "=4")),
            "`num_workers=2` → `num_workers=4`"
        );
        assert_eq!(
            edit_summary(call, &call.replace("    num_workers=2,\n", "")),
            "- `num_workers=2,`"
        );
        assert_eq!(edit_summary("a", "a"), "(no change)");
        assert_eq!(edit_summary("x = 1", "x = 1\ny = 2"), "+ `y = 2`");
    }

    #[test]
    fn legacy_cost_field_is_read() {
        let s =
            stream(&[r#"{"type":"result","subtype":"success","is_error":false,"cost_usd":0.5}"#]);
        assert_eq!(s.result.unwrap().total_cost_usd, Some(0.5));
    }
}

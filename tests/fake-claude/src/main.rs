//! A fake `claude` (Claude Code CLI in headless mode) for tuneloop's tests.
//!
//! It reads its command line the way Claude Code's does (commander.js, see
//! `docs/claude-code.md`): `-p` is a flag and the prompt is the first positional
//! argument; `--allowedTools`, `--disallowedTools`, `--tools` and `--add-dir`
//! are variadic and swallow every following argument that does not start with
//! `-`, each value split on commas and spaces outside parentheses;
//! `--output-format stream-json` needs `--verbose` (else exit 1, nothing on
//! stdout); `--max-turns` must be a number; unknown options are errors; piped
//! stdin above 10 × 1024 × 1024 UTF-16 units is refused. Where the real CLI
//! would silently do the wrong thing it is stricter and exits 2 with
//! `fake claude: …` on stderr: a prompt that is not right after `-p` (or
//! `--`), a "tool rule" that cannot be one (a prompt swallowed by a variadic
//! flag), a missing prompt (the real CLI would take stdin as the prompt).
//!
//! Then it prints real-shaped `stream-json` events — `system`/`init` with the
//! tools that exist, `assistant` messages with `tool_use`, `user` messages
//! with `tool_result`, an unknown `system` subtype, and a final `result` — and
//! does what `FAKE_CLAUDE_MODES` asks for this call (`;`-separated, one per
//! call, the last one repeating). Tool calls go through a small model of the
//! permission rules: `--tools` decides what exists, a bare `--disallowedTools`
//! rule denies, Read/Glob/Grep are free, `--allowedTools` (any specifier)
//! allows, and the rest is denied and listed in `permission_denials`.
//!
//!   edit:K=V          Read, then one Edit of the DataLoader call setting K=V
//!   deny_edit:K=V     a Bash call first (denied unless allowed), then edit:K=V
//!   two[:K=V]         one Edit setting K=V (num_workers=2) AND pin_memory=True
//!   outside           edit:num_workers=2, an Edit of data_utils.py, and a stray new file
//!   bench_script      edit:num_workers=2, and an Edit of bench_loader.py
//!   harness           edit:num_workers=2, and a change to runs/*/harness/tuneloop_harness.py
//!   syntax            an Edit that leaves the call without its closing parenthesis
//!   nochange          reads, then ends with a question and changes nothing
//!   replace:OLD->NEW  one Edit of train.py replacing OLD by NEW (the model, the step…)
//!   replace           the same with FAKE_CLAUDE_OLD / FAKE_CLAUDE_NEW in FAKE_CLAUDE_FILE
//!                     (text with commas or whole lines: a step put under autocast)
//!   hang              edit, start a grandchild that ignores SIGTERM, sleep forever
//!   crash             edit, then die with a stack trace on stderr (exit 1, no result)
//!   abort             edit, then abort (SIGABRT)
//!   truncated         edit, then only the first half of the result line (exit 0)
//!   max_turns         edit, then `error_max_turns` when --max-turns runs out (exit 1)
//!   budget            edit, then `error_max_budget_usd` (exit 1)
//!   not_logged_in     the offline answer, "Not logged in · Please run /login" (exit 1)
//!   ignore_max_turns  edit, then keep calling tools past --max-turns, forever
//!
//! Environment: `FAKE_CLAUDE_LOG`, a folder that receives `call-N.json` (argv,
//! cwd, stdin of call N, and the names of the `CLAUDE*`/`ANTHROPIC*`
//! variables it was started with), `hang-child.pid` and `hang-ready`;
//! `FAKE_CLAUDE_FILE`, the file to edit (default `train.py`);
//! `FAKE_CLAUDE_NESTED_GUARD=1`, refuse to start, as CLI 2.1.39 and later do,
//! when a parent session's `CLAUDECODE` or `CLAUDE_CODE_ENTRYPOINT` is set
//! (exit 1, the real message on stderr, nothing on stdout, no call logged).

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::exit;
use std::time::{Duration, Instant};

const STDIN_CAP_UTF16: usize = 10 * 1024 * 1024;
const DEFAULT_TOOLS: [&str; 12] = [
    "Task",
    "Bash",
    "Glob",
    "Grep",
    "LS",
    "Read",
    "Edit",
    "MultiEdit",
    "Write",
    "NotebookEdit",
    "WebFetch",
    "WebSearch",
];
const PERMISSION_MODES: [&str; 7] = [
    "acceptEdits",
    "auto",
    "bypassPermissions",
    "default",
    "dontAsk",
    "manual",
    "plan",
];

#[derive(Default, Debug)]
struct Cli {
    print: bool,
    prompt: Option<String>,
    output_format: Option<String>,
    verbose: bool,
    max_turns: Option<u32>,
    permission_mode: String,
    model: Option<String>,
    max_budget_usd: Option<f64>,
    tools: Option<Vec<String>>,
    allowed: Vec<String>,
    disallowed: Vec<String>,
}

/// What the real CLI prints for a bad command line.
fn usage_error(msg: &str) -> ! {
    eprintln!("error: {msg}");
    exit(1)
}

/// Where the real CLI would go on doing the wrong thing, the fake stops.
fn strict(msg: &str) -> ! {
    eprintln!("fake claude: {msg}");
    exit(2)
}

enum Kind {
    Flag,
    Value,
    Variadic,
}

fn kind(name: &str) -> Option<Kind> {
    Some(match name {
        "-p"
        | "--print"
        | "--verbose"
        | "--strict-mcp-config"
        | "--no-session-persistence"
        | "--bare"
        | "--dangerously-skip-permissions"
        | "--allow-dangerously-skip-permissions"
        | "--include-partial-messages"
        | "-c"
        | "--continue" => Kind::Flag,
        "--output-format"
        | "--input-format"
        | "--max-turns"
        | "--permission-mode"
        | "--model"
        | "--fallback-model"
        | "--max-budget-usd"
        | "--append-system-prompt"
        | "--system-prompt"
        | "--settings"
        | "--session-id"
        | "-r"
        | "--resume" => Kind::Value,
        "--tools" | "--allowedTools" | "--allowed-tools" | "--disallowedTools"
        | "--disallowed-tools" | "--add-dir" | "--mcp-config" | "--betas" => Kind::Variadic,
        _ => return None,
    })
}

/// Splits a tool list value as the CLI does: commas and whitespace outside parentheses.
fn split_rules(value: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0usize);
    for ch in value.chars() {
        match ch {
            '(' => {
                depth += 1;
                cur.push(ch)
            }
            ')' => {
                depth = depth.saturating_sub(1);
                cur.push(ch)
            }
            c if (c == ',' || c.is_whitespace()) && depth == 0 => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur))
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur)
    }
    out
}

/// `Tool` or `Tool(specifier)`; a swallowed prompt is neither.
fn check_rule(rule: &str) {
    let name = rule.split('(').next().unwrap_or("");
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let spec_ok = !rule.contains('(') || rule.ends_with(')');
    if !name_ok || !spec_ok {
        strict(&format!(
            "`{rule}` is not a tool rule: was the prompt placed after a variadic flag?"
        ));
    }
}

fn parse(argv: &[String]) -> Cli {
    let mut c = Cli {
        permission_mode: "default".into(),
        ..Default::default()
    };
    let mut positionals: Vec<(usize, String)> = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        if a == "--" {
            positionals.extend(
                argv[i + 1..]
                    .iter()
                    .enumerate()
                    .map(|(j, r)| (i + 1 + j, r.clone())),
            );
            break;
        }
        if !a.starts_with('-') || a == "-" {
            positionals.push((i, a.clone()));
            i += 1;
            continue;
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        match kind(&name).unwrap_or_else(|| usage_error(&format!("unknown option '{name}'"))) {
            Kind::Flag => match name.as_str() {
                "-p" | "--print" => c.print = true,
                "--verbose" => c.verbose = true,
                _ => {}
            },
            Kind::Value => {
                let v = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        argv.get(i).cloned().unwrap_or_else(|| {
                            usage_error(&format!("option '{name} <value>' argument missing"))
                        })
                    }
                };
                match name.as_str() {
                    "--output-format" => c.output_format = Some(v),
                    "--max-turns" => {
                        c.max_turns = Some(v.parse().unwrap_or_else(|_| {
                            usage_error(&format!(
                            "option '--max-turns <turns>' argument '{v}' is invalid. Not a number."
                        ))
                        }))
                    }
                    "--permission-mode" => {
                        if !PERMISSION_MODES.contains(&v.as_str()) {
                            usage_error(&format!(
                                "option '--permission-mode <mode>' argument '{v}' is invalid. Allowed choices are {}.",
                                PERMISSION_MODES.join(", ")
                            ));
                        }
                        c.permission_mode = v
                    }
                    "--model" => c.model = Some(v),
                    "--max-budget-usd" => match v.parse::<f64>() {
                        Ok(b) if b > 0.0 => c.max_budget_usd = Some(b),
                        _ => usage_error(&format!(
                            "option '--max-budget-usd <amount>' argument '{v}' is invalid."
                        )),
                    },
                    _ => {}
                }
            }
            Kind::Variadic => {
                let mut vals: Vec<String> = inline.into_iter().collect();
                while i + 1 < argv.len() && !argv[i + 1].starts_with('-') {
                    i += 1;
                    vals.push(argv[i].clone());
                }
                if vals.is_empty() {
                    usage_error(&format!("option '{name} <values...>' argument missing"));
                }
                if name != "--add-dir" && name != "--mcp-config" && name != "--betas" {
                    let rules: Vec<String> = vals.iter().flat_map(|v| split_rules(v)).collect();
                    rules.iter().for_each(|r| check_rule(r));
                    match name.as_str() {
                        "--tools" => c.tools = Some(rules),
                        "--allowedTools" | "--allowed-tools" => c.allowed.extend(rules),
                        _ => c.disallowed.extend(rules),
                    }
                }
            }
        }
        i += 1;
    }
    if let Some((idx, p)) = positionals.first() {
        let before = if *idx == 0 {
            ""
        } else {
            argv[idx - 1].as_str()
        };
        if !matches!(before, "-p" | "--print" | "--") {
            strict(&format!(
                "the prompt must come right after -p; found it after `{before}`"
            ));
        }
        if positionals.len() > 1 {
            usage_error(&format!(
                "too many arguments. Expected 1 argument but got {}.",
                positionals.len()
            ));
        }
        c.prompt = Some(p.clone());
    }
    c
}

/// A JSON string literal.
fn q(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn q_list(v: &[String]) -> String {
    format!("[{}]", v.iter().map(|s| q(s)).collect::<Vec<_>>().join(","))
}

struct Session {
    cli: Cli,
    call: u32,
    id: String,
    cwd: PathBuf,
    messages: u32,
    tool_ids: u32,
    denials: Vec<String>,
    started: Instant,
}

impl Session {
    fn emit(&self, line: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    fn tools(&self) -> Vec<String> {
        self.cli
            .tools
            .clone()
            .unwrap_or_else(|| DEFAULT_TOOLS.iter().map(|s| s.to_string()).collect())
    }

    fn init(&self) {
        self.emit(&format!(
            r#"{{"type":"system","subtype":"init","cwd":{},"session_id":{},"tools":{},"mcp_servers":[],"model":{},"permissionMode":{},"slash_commands":["compact","review"],"apiKeySource":"none","claude_code_version":"2.1.332","output_style":"default","agents":["general-purpose"],"uuid":"00000000-0000-4000-8000-00000000000{}"}}"#,
            q(&self.cwd.display().to_string()),
            q(&self.id),
            q_list(&self.tools()),
            q(self.cli.model.as_deref().unwrap_or("claude-sonnet-4-5-20250929")),
            q(&self.cli.permission_mode),
            self.call % 10
        ));
        // A type this version of tuneloop has never heard of.
        self.emit(&format!(
            r#"{{"type":"system","subtype":"status","status":"thinking","session_id":{}}}"#,
            q(&self.id)
        ));
    }

    fn assistant(&mut self, content: &str) {
        self.messages += 1;
        self.emit(&format!(
            r#"{{"type":"assistant","message":{{"id":"msg_fake_{}_{}","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{content}],"stop_reason":null,"usage":{{"input_tokens":812,"output_tokens":64}}}},"parent_tool_use_id":null,"session_id":{}}}"#,
            self.call,
            self.messages,
            q(&self.id)
        ));
    }

    fn say(&mut self, text: &str) {
        self.assistant(&format!(r#"{{"type":"text","text":{}}}"#, q(text)));
    }

    /// One tool call as the CLI would run it: permission check, then `run`.
    fn tool(
        &mut self,
        name: &str,
        input: &str,
        run: impl FnOnce() -> Result<String, String>,
    ) -> bool {
        self.tool_ids += 1;
        let id = format!("toolu_fake_{}_{}", self.call, self.tool_ids);
        self.assistant(&format!(
            r#"{{"type":"tool_use","id":{},"name":{},"input":{input}}}"#,
            q(&id),
            q(name)
        ));
        let (ok, content) = match self.permitted(name) {
            Err((denial, msg)) => {
                if denial {
                    self.denials.push(format!(
                        r#"{{"tool_name":{},"tool_use_id":{},"tool_input":{input}}}"#,
                        q(name),
                        q(&id)
                    ));
                }
                (false, msg)
            }
            Ok(()) => match run() {
                Ok(out) => (true, out),
                Err(e) => (false, e),
            },
        };
        self.emit(&format!(
            r#"{{"type":"user","message":{{"role":"user","content":[{{"tool_use_id":{},"type":"tool_result","content":{},"is_error":{}}}]}},"parent_tool_use_id":null,"session_id":{}}}"#,
            q(&id),
            q(&content),
            !ok,
            q(&self.id)
        ));
        ok
    }

    fn permitted(&self, tool: &str) -> Result<(), (bool, String)> {
        if !self.tools().iter().any(|t| t == tool) {
            return Err((
                false,
                format!("<tool_use_error>No such tool available: {tool}</tool_use_error>"),
            ));
        }
        let denied =
            format!("Claude requested permissions to use {tool}, but you haven't granted it yet.");
        if self.cli.disallowed.iter().any(|r| r == tool) {
            return Err((true, denied));
        }
        let prefix = format!("{tool}(");
        let allowed = self
            .cli
            .allowed
            .iter()
            .any(|r| r == tool || r.starts_with(&prefix));
        let free = matches!(tool, "Read" | "Glob" | "Grep" | "LS")
            || self.cli.permission_mode == "bypassPermissions"
            || (self.cli.permission_mode == "acceptEdits"
                && matches!(tool, "Edit" | "Write" | "MultiEdit"));
        if allowed || free {
            Ok(())
        } else {
            Err((true, denied))
        }
    }

    fn cost(&self) -> f64 {
        0.01 * self.call as f64 + 0.0023
    }

    fn result_line(
        &self,
        subtype: &str,
        is_error: bool,
        text: Option<&str>,
        errors: &[String],
        reason: &str,
        turns: u32,
    ) -> String {
        let body = match text {
            Some(t) => format!(r#""result":{},"#, q(t)),
            None => format!(r#""errors":{},"#, q_list(errors)),
        };
        format!(
            r#"{{"type":"result","subtype":{},"is_error":{is_error},"duration_ms":{},"duration_api_ms":{},"num_turns":{turns},{body}"session_id":{},"total_cost_usd":{},"usage":{{"input_tokens":2436,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":192,"server_tool_use":{{"web_search_requests":0}},"service_tier":"standard"}},"modelUsage":{{}},"permission_denials":[{}],"terminal_reason":{},"uuid":"11111111-0000-4000-8000-00000000000{}"}}"#,
            q(subtype),
            self.started.elapsed().as_millis(),
            self.started.elapsed().as_millis() / 2,
            q(&self.id),
            self.cost(),
            self.denials.join(","),
            q(reason),
            self.call % 10
        )
    }

    fn success(&mut self, text: &str) -> ! {
        self.say(text);
        let line = self.result_line(
            "success",
            false,
            Some(text),
            &[],
            "completed",
            self.messages,
        );
        self.emit(&line);
        exit(0)
    }

    fn error(&mut self, subtype: &str, errors: &[String], reason: &str) -> ! {
        let line = self.result_line(subtype, true, None, errors, reason, self.messages + 1);
        self.emit(&line);
        exit(1)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.cwd.join(rel)
    }

    /// An Edit tool call replacing `old` by `new` in `file`.
    fn edit(&mut self, file: &Path, old: &str, new: &str) -> bool {
        let input = format!(
            r#"{{"file_path":{},"old_string":{},"new_string":{}}}"#,
            q(&file.display().to_string()),
            q(old),
            q(new)
        );
        let (file, old, new) = (file.to_owned(), old.to_string(), new.to_string());
        self.tool("Edit", &input, move || {
            let src = std::fs::read_to_string(&file)
                .map_err(|e| format!("<tool_use_error>{e}</tool_use_error>"))?;
            if !src.contains(&old) {
                return Err(
                    "<tool_use_error>String to replace not found in file.</tool_use_error>".into(),
                );
            }
            std::fs::write(&file, src.replacen(&old, &new, 1)).map_err(|e| e.to_string())?;
            Ok(format!("The file {} has been updated.", file.display()))
        })
    }

    fn read(&mut self, file: &Path) -> Option<String> {
        let input = format!(r#"{{"file_path":{}}}"#, q(&file.display().to_string()));
        let f = file.to_owned();
        let mut text = None;
        let ok = self.tool("Read", &input, || {
            let t = std::fs::read_to_string(&f)
                .map_err(|e| format!("<tool_use_error>{e}</tool_use_error>"))?;
            text = Some(t.clone());
            Ok(t)
        });
        if ok {
            text
        } else {
            None
        }
    }

    /// Read the editable file, then one Edit of its DataLoader call.
    fn edit_loader(&mut self, set: &[(&str, &str)], drop_close: bool) -> bool {
        let file =
            self.path(&std::env::var("FAKE_CLAUDE_FILE").unwrap_or_else(|_| "train.py".into()));
        let Some(src) = self.read(&file) else {
            return false;
        };
        let Some((a, b)) = call_span(&src) else {
            return false;
        };
        let old = &src[a..b];
        let mut new = old.to_string();
        for (k, v) in set {
            new = with_kwarg(&new, k, v);
        }
        if drop_close {
            new.pop();
        }
        self.edit(&file, old, &new)
    }
}

/// The byte range of the first `DataLoader(…)` call.
fn call_span(src: &str) -> Option<(usize, usize)> {
    let start = src.find("DataLoader(")?;
    let open = start + "DataLoader".len();
    let mut depth = 0i32;
    for (i, ch) in src[open..].char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((start, open + i + 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// The call with keyword `key` set to `value`: replaced where present, else added last.
fn with_kwarg(call: &str, key: &str, value: &str) -> String {
    let bytes = call.as_bytes();
    let mut from = 0;
    while let Some(p) = call[from..].find(key).map(|p| p + from) {
        let before_ok = p > 0 && matches!(bytes[p - 1], b'(' | b',' | b' ' | b'\n' | b'\t');
        let rest = call[p + key.len()..].trim_start();
        if before_ok && rest.starts_with('=') && !rest.starts_with("==") {
            let eq = p + key.len() + call[p + key.len()..].find('=').unwrap_or(0);
            let vstart = eq + 1 + (call[eq + 1..].len() - call[eq + 1..].trim_start().len());
            let vend = vstart
                + call[vstart..]
                    .find([',', ')', '\n'])
                    .unwrap_or(call.len() - vstart);
            return format!("{}{value}{}", &call[..vstart], &call[vend..]);
        }
        from = p + key.len();
    }
    let body = &call[..call.len() - 1];
    let end = body.trim_end().len();
    if body.trim_end().ends_with(',') {
        format!("{} {key}={value},{}", &call[..end], &call[end..])
    } else {
        format!("{}, {key}={value}{}", &call[..end], &call[end..])
    }
}

fn log_call(dir: &Path, argv: &[String], cwd: &Path, stdin: &str, mode: &str) -> u32 {
    let _ = std::fs::create_dir_all(dir);
    let n = (1..)
        .find(|n| !dir.join(format!("call-{n}.json")).exists())
        .unwrap_or(1);
    let shown: String = if stdin.len() <= 1 << 20 {
        stdin.to_string()
    } else {
        stdin.chars().take(1000).collect()
    };
    let mut env_names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.starts_with("CLAUDE") || k.starts_with("ANTHROPIC"))
        .collect();
    env_names.sort();
    let json = format!(
        "{{\"argv\":{},\"cwd\":{},\"stdin_bytes\":{},\"stdin\":{},\"mode\":{},\"env_names\":{}}}\n",
        q_list(argv),
        q(&cwd.display().to_string()),
        stdin.len(),
        q(&shown),
        q(mode),
        q_list(&env_names)
    );
    let _ = std::fs::write(dir.join(format!("call-{n}.json")), json);
    n
}

fn calls_so_far(dir: Option<&Path>) -> u32 {
    dir.map(|d| {
        (1..)
            .find(|n| !d.join(format!("call-{n}.json")).exists())
            .unwrap_or(1)
            - 1
    })
    .unwrap_or(0)
}

/// Newer CLIs refuse to start inside another Claude Code session, which they
/// detect from the variables the parent sets.
fn nested_guard() {
    if std::env::var("FAKE_CLAUDE_NESTED_GUARD").as_deref() != Ok("1") {
        return;
    }
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    if set("CLAUDECODE") || set("CLAUDE_CODE_ENTRYPOINT") {
        eprintln!("Error: Claude Code cannot be launched inside another Claude Code session.");
        eprintln!("Nested sessions share runtime resources and will crash all active sessions.");
        eprintln!("To bypass this check, unset the CLAUDECODE environment variable.");
        exit(1)
    }
}

fn main() {
    nested_guard();
    let argv: Vec<String> = std::env::args().collect();
    let cli = parse(&argv[1..]);
    if !cli.print {
        strict("interactive mode is not faked; tuneloop must pass -p");
    }
    match cli.output_format.as_deref() {
        Some("stream-json") if !cli.verbose => {
            eprintln!("Error: When using --print, --output-format=stream-json requires --verbose");
            exit(1)
        }
        Some("stream-json") => {}
        other => strict(&format!(
            "tuneloop must ask for --output-format stream-json, not {other:?}"
        )),
    }
    let mut stdin = String::new();
    if !std::io::stdin().is_terminal() {
        let mut bytes = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut bytes);
        stdin = String::from_utf8_lossy(&bytes).into_owned();
    }
    if stdin.encode_utf16().count() > STDIN_CAP_UTF16 {
        eprintln!("Error: piped stdin input exceeds 10MB. Pass large content as a file path in your prompt instead.");
        exit(1)
    }
    if cli.prompt.is_none() {
        if stdin.trim().is_empty() {
            eprintln!("Error: Input must be provided either through stdin or as a prompt argument when using --print");
            exit(1)
        }
        strict("no prompt argument: the real CLI would have taken stdin as the prompt");
    }
    let log = std::env::var_os("FAKE_CLAUDE_LOG").map(PathBuf::from);
    let modes_env =
        std::env::var("FAKE_CLAUDE_MODES").unwrap_or_else(|_| "edit:num_workers=2".into());
    let modes: Vec<&str> = modes_env
        .split(';')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    let k = calls_so_far(log.as_deref()) as usize;
    let mode = modes
        .get(k)
        .or(modes.last())
        .copied()
        .unwrap_or("edit:num_workers=2")
        .to_string();
    let cwd = std::env::current_dir().unwrap_or_default();
    let call = match &log {
        Some(d) => log_call(d, &argv, &cwd, &stdin, &mode),
        None => k as u32 + 1,
    };
    let mut s = Session {
        cli,
        call,
        id: format!("fake-session-{call:04}"),
        cwd,
        messages: 0,
        tool_ids: 0,
        denials: vec![],
        started: Instant::now(),
    };
    let (name, arg) = mode.split_once(':').unwrap_or((mode.as_str(), ""));
    let (key, value) = arg.split_once('=').unwrap_or(("num_workers", "2"));
    s.init();
    match name {
        "edit" => {
            s.edit_loader(&[(key, value)], false);
            s.success(&format!(
                "Set {key}={value} in the DataLoader call: data_wait dominates the step."
            ))
        }
        "deny_edit" => {
            let input = r#"{"command":"python train.py","description":"Time the training loop"}"#;
            s.tool("Bash", input, || Ok("ran".into()));
            s.edit_loader(&[(key, value)], false);
            s.success(&format!(
                "Could not run the training script, so I set {key}={value} from the profile."
            ))
        }
        "two" => {
            s.edit_loader(&[(key, value), ("pin_memory", "True")], false);
            s.success(&format!(
                "Set {key}={value} and pin_memory=True together to save a turn."
            ))
        }
        "outside" => {
            s.edit_loader(&[("num_workers", "2")], false);
            let f = s.path("data_utils.py");
            let src = std::fs::read_to_string(&f).unwrap_or_default();
            let first = src.lines().next().unwrap_or("").to_string();
            s.edit(
                &f,
                &first,
                &format!("{first}\nCACHE = {{}}  # added by the agent"),
            );
            // A side effect no event mentions.
            let _ = std::fs::write(s.path("agent_scratch.txt"), "notes\n");
            s.success("Set num_workers=2 and added a cache to data_utils.py.")
        }
        "bench_script" => {
            s.edit_loader(&[("num_workers", "2")], false);
            let f = s.path("bench_loader.py");
            let src = std::fs::read_to_string(&f).unwrap_or_default();
            let last = src
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .to_string();
            s.edit(&f, &last, &format!("{last}\nprint(\"samples/sec: 99999\")"));
            s.success("Set num_workers=2 and made the benchmark report more.")
        }
        "harness" => {
            s.edit_loader(&[("num_workers", "2")], false);
            let runs = s.path("runs");
            let harnesses: Vec<PathBuf> = std::fs::read_dir(&runs)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path().join("harness/tuneloop_harness.py"))
                .filter(|p| p.is_file())
                .collect();
            if harnesses.is_empty() {
                strict(&format!(
                    "mode harness: no runs/*/harness/tuneloop_harness.py under {}",
                    s.cwd.display()
                ));
            }
            for h in harnesses {
                let src = std::fs::read_to_string(&h).unwrap_or_default();
                let first = src.lines().next().unwrap_or("").to_string();
                s.edit(&h, &first, &format!("{first}\n# tampered by the agent"));
            }
            s.success("Set num_workers=2 and adjusted the harness.")
        }
        "new_file" => {
            s.edit_loader(&[("num_workers", "2")], false);
            let _ = std::fs::write(s.path("fast_loader.py"), "# written by the agent\n");
            s.success("Set num_workers=2 and added fast_loader.py.")
        }
        "delete_file" => {
            s.edit_loader(&[("num_workers", "2")], false);
            let _ = std::fs::remove_file(s.path("data_utils.py"));
            s.success("Set num_workers=2 and removed an unused helper.")
        }
        // `replace:OLD->NEW`: one Edit of the editable file, anywhere in it
        // (the training step, the model, a step count…).
        // Without `:OLD->NEW` (text with commas or lines of its own): the
        // replacement comes from FAKE_CLAUDE_OLD / FAKE_CLAUDE_NEW, in
        // FAKE_CLAUDE_FILE (default train.py), read first.
        "replace" if arg.is_empty() => {
            let file = std::env::var("FAKE_CLAUDE_FILE").unwrap_or_else(|_| "train.py".into());
            let f = s.path(&file);
            let old = std::env::var("FAKE_CLAUDE_OLD").unwrap_or_default();
            let new = std::env::var("FAKE_CLAUDE_NEW").unwrap_or_default();
            s.read(&f);
            if !s.edit(&f, &old, &new) {
                strict(&format!("mode replace: FAKE_CLAUDE_OLD not found in {file}"));
            }
            s.success("Made the one change the prompt allows.")
        }
        "replace" => {
            let (old, new) = arg.split_once("->").unwrap_or(("", ""));
            let f = s.path("train.py");
            if !s.edit(&f, old, new) {
                strict(&format!("mode replace: `{old}` not found in train.py"));
            }
            s.success(&format!("Replaced `{old}` with `{new}`."))
        }
        // `config:OLD->NEW`: an edit of the workspace's tuneloop.toml (the step count).
        "config" => {
            let (old, new) = arg.split_once("->").unwrap_or(("", ""));
            let f = s.path("tuneloop.toml");
            if !s.edit(&f, old, new) {
                strict(&format!("mode config: `{old}` not found in tuneloop.toml"));
            }
            s.success("Fewer steps make the measurement faster.")
        }
        "syntax" => {
            s.edit_loader(&[("num_workers", "2")], true);
            s.success("Set num_workers=2.")
        }
        "nochange" => {
            let file =
                s.path(&std::env::var("FAKE_CLAUDE_FILE").unwrap_or_else(|_| "train.py".into()));
            s.read(&file);
            s.success("I would set num_workers=2 next. Shall I apply it?")
        }
        "hang" => {
            s.edit_loader(&[("num_workers", "2")], false);
            let child = std::process::Command::new("sh")
                .args(["-c", "trap '' TERM; sleep 600"])
                .spawn();
            if let (Some(d), Ok(c)) = (&log, &child) {
                let _ = std::fs::write(d.join("hang-child.pid"), c.id().to_string());
                let _ = std::fs::write(d.join("hang-ready"), "");
            }
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        "crash" => {
            s.edit_loader(&[("num_workers", "2")], false);
            eprintln!("file:///usr/lib/node_modules/@anthropic-ai/claude-code/cli.js:4242");
            eprintln!("TypeError: Cannot read properties of undefined (reading 'content')");
            eprintln!("    at fakeStep (cli.js:4242:17)");
            exit(1)
        }
        "abort" => {
            s.edit_loader(&[("num_workers", "2")], false);
            std::process::abort()
        }
        "truncated" => {
            s.edit_loader(&[("num_workers", "2")], false);
            s.say("Set num_workers=2.");
            let line = s.result_line(
                "success",
                false,
                Some("Set num_workers=2."),
                &[],
                "completed",
                s.messages,
            );
            let cut: String = line.chars().take(line.chars().count() / 2).collect();
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(cut.as_bytes());
            let _ = out.flush();
            exit(0)
        }
        "max_turns" => {
            let limit = s.cli.max_turns.unwrap_or(u32::MAX);
            s.edit_loader(&[("num_workers", "2")], false);
            let file = s.path("train.py");
            while s.messages < limit {
                s.read(&file);
            }
            s.error(
                "error_max_turns",
                &[format!("Reached maximum number of turns ({limit})")],
                "max_turns",
            )
        }
        "budget" => {
            s.edit_loader(&[("num_workers", "2")], false);
            let b = s.cli.max_budget_usd.unwrap_or(0.0);
            s.error(
                "error_max_budget_usd",
                &[format!("Reached maximum budget (${b})")],
                "budget_exhausted",
            )
        }
        "not_logged_in" => {
            let line = s.result_line(
                "success",
                true,
                Some("Not logged in · Please run /login"),
                &[],
                "api_error",
                1,
            );
            s.emit(&line.replace(
                &format!("\"total_cost_usd\":{}", s.cost()),
                "\"total_cost_usd\":0",
            ));
            exit(1)
        }
        "ignore_max_turns" => {
            s.edit_loader(&[("num_workers", "2")], false);
            let file = s.path("train.py");
            loop {
                s.read(&file);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        other => strict(&format!("unknown FAKE_CLAUDE_MODES entry `{other}`")),
    }
}

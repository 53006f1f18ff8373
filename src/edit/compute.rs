//! Compute-side changes in a training script's text: where each one sits,
//! how the builtin agent makes it, and how a turn's edit is recognised as
//! exactly one of them.
//!
//! Each change is ONE line at one findable place:
//!
//! * after the top-level imports (the script must `import torch`):
//!   `torch.set_num_threads(n)` — or the argument of the script's own single
//!   `torch.set_num_threads(<int>)` call —, `torch.backends.cudnn.benchmark =
//!   True`, `torch.backends.cuda.matmul.allow_tf32 = True`;
//! * just before the one optimizer constructor that takes a model's
//!   `.parameters()` (a statement of its own): `model = model.to(memory_format=
//!   torch.channels_last)`, `model = torch.compile(model)`, `model.forward =
//!   torch.autocast(...)(model.forward)`;
//! * on that constructor's call, written on one line: `foreach=True` or
//!   `fused=True`.
//!
//! A script with two optimizers, a constructor spread over lines or no
//! `import torch` has no findable place for the change: the builtin agent
//! skips it. Recognition ([`recognize`]) accepts those one-line forms plus
//! one that only an agent that edits the loop makes: a block of the step
//! indented under `with torch.autocast(...):` and nothing else changed.
//! Pure text, like [`crate::agent::threaded`]: no parse beyond
//! [`super::check_syntax`], which the caller runs on the result.

use similar::{DiffTag, TextDiff};
use thiserror::Error;

use crate::knob::ComputeKnob;

/// Why the script has no place for a compute change ([`apply`],
/// [`threads_call`]). One type for both: the builtin agent records either
/// as the reason it passed the knob over, and its text is that reason.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ComputeRefusal {
    #[error("torch.set_num_threads(...) spans lines")]
    ThreadsCallSpansLines,
    #[error("torch.set_num_threads({arg}) is not set to a number")]
    ThreadsNotANumber { arg: String },
    #[error("torch.set_num_threads is called in several places")]
    ThreadsCalledTwice,
    /// `line` is 1-based.
    #[error("torch.set_num_threads({n}) is already set (line {line})")]
    ThreadsAlreadySet { n: u32, line: usize },
    #[error("no top-level `import torch` to add torch.set_num_threads after")]
    NoImportForThreads,
    #[error("`{line}` is already there")]
    SettingAlreadyThere { line: &'static str },
    #[error("no top-level `import torch` to add the setting after")]
    NoImportForSetting,
    #[error("the script already uses {marker}")]
    AlreadyUses { marker: &'static str },
    #[error(
        "no single optimizer constructor over a model's .parameters() to put the change before"
    )]
    NoOptimizerToPrecede,
    #[error("no single optimizer constructor over a model's .parameters()")]
    NoOptimizer,
    #[error("the torch.optim.{class} call spans lines")]
    OptimizerSpansLines { class: String },
    #[error("torch.optim.{class} has no fused implementation")]
    NotFused { class: String },
    #[error("the torch.optim.{class} call already chooses its implementation")]
    AlreadyChooses { class: String },
    #[error("unbalanced optimizer call")]
    UnbalancedOptimizerCall,
}

/// A compute change found in a turn's edit.
#[derive(Clone, Debug, PartialEq)]
pub struct ComputeEdit {
    pub knob: ComputeKnob,
    /// One line, starting with the knob's name: "num_threads: 1 → 2".
    pub change: String,
    /// 1-based line in the new text.
    pub line: usize,
}

/// The optimizer constructor the model-level changes anchor to.
#[derive(Clone, Debug, PartialEq)]
pub struct OptimizerCall {
    /// 0-based line index.
    pub line: usize,
    pub indent: String,
    /// The expression whose `.parameters()` the optimizer takes (`model`,
    /// `self.net`).
    pub model: String,
    /// `SGD`, `Adam`, ...
    pub class: String,
    /// Whether the call opens and closes on its line.
    pub one_line: bool,
}

/// Optimizers whose constructor takes `fused=` on the CPU and CUDA (torch ≥ 2.4).
pub const FUSED_OPTIMIZERS: [&str; 4] = ["SGD", "Adam", "AdamW", "Adagrad"];

fn lines_of(src: &str) -> Vec<&str> {
    src.split_inclusive('\n').collect()
}

fn indent_of(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// The bracket depth at the start of each line (strings and comments
/// skipped, roughly: enough to tell a statement's first line from a
/// continuation).
fn depths(src: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<(char, bool)> = None; // (char, triple)
    for line in lines_of(src) {
        out.push(depth);
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match quote {
                Some((q, triple)) => {
                    if c == '\\' {
                        i += 1;
                    } else if c == q {
                        if !triple {
                            quote = None;
                        } else if chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q) {
                            quote = None;
                            i += 2;
                        }
                    }
                }
                None => match c {
                    '#' => break,
                    '"' | '\'' => {
                        let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
                        quote = Some((c, triple));
                        if triple {
                            i += 2;
                        }
                    }
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' => depth -= 1,
                    _ => {}
                },
            }
            i += 1;
        }
        if matches!(quote, Some((_, false))) {
            quote = None;
        }
    }
    out
}

/// Where a line goes after the top-level imports: the index of the line
/// after the last one (an import's continuation lines included), or `None`
/// without a top-level `import torch`.
pub fn after_imports(src: &str) -> Option<usize> {
    let lines = lines_of(src);
    let d = depths(src);
    let has_torch = lines.iter().any(|l| {
        let t = l.trim_end();
        t == "import torch" || t.starts_with("import torch,") || t.starts_with("import torch  #")
    });
    if !has_torch {
        return None;
    }
    let mut end = None;
    for (i, l) in lines.iter().enumerate() {
        let import = d[i] == 0 && (l.starts_with("import ") || l.starts_with("from "));
        // An import's continuation lines (inside its parentheses) belong to it.
        let continued = d[i] > 0 && end == Some(i);
        if import || continued {
            end = Some(i + 1);
        }
    }
    end
}

/// The one `torch.set_num_threads(<int>)` of the script: its line and value.
/// `Err` when there are several, or its argument is not a literal.
pub fn threads_call(src: &str) -> Result<Option<(usize, u32)>, ComputeRefusal> {
    let hits: Vec<(usize, &str)> = lines_of(src)
        .into_iter()
        .enumerate()
        .filter(|(_, l)| l.contains("torch.set_num_threads(") && !l.trim_start().starts_with('#'))
        .collect();
    match hits.as_slice() {
        [] => Ok(None),
        [(i, l)] => {
            let arg = between(l, "torch.set_num_threads(", ")")
                .ok_or(ComputeRefusal::ThreadsCallSpansLines)?;
            arg.trim().parse().map(|n| Some((*i, n))).map_err(|_| {
                ComputeRefusal::ThreadsNotANumber {
                    arg: arg.to_string(),
                }
            })
        }
        _ => Err(ComputeRefusal::ThreadsCalledTwice),
    }
}

fn between<'a>(l: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let s = l.find(open)? + open.len();
    let e = s + l[s..].find(close)?;
    Some(&l[s..e])
}

/// The script's one optimizer constructor over a model's `.parameters()`,
/// as a statement of its own; `None` when there is none or several.
pub fn optimizer_call(src: &str) -> Option<OptimizerCall> {
    let lines = lines_of(src);
    let d = depths(src);
    let mut found = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.trim_start().starts_with('#') {
            continue;
        }
        let Some(at) = l.find("optim.") else { continue };
        let rest = &l[at + "optim.".len()..];
        let class: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if class.is_empty() || !class.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
            continue;
        }
        // The call's text, over the lines it spans.
        let mut call = l[at..].to_string();
        let mut j = i + 1;
        while j < lines.len() && d[j] > d[i] {
            call.push_str(lines[j]);
            j += 1;
        }
        let Some(p) = call.find(".parameters()") else {
            continue;
        };
        let model: String = call[..p]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if model.is_empty() {
            continue;
        }
        // A statement's first line: at depth 0, after a line that does not continue.
        let prev_continues = i > 0 && lines[i - 1].trim_end().ends_with('\\');
        if d[i] != 0 || prev_continues {
            continue;
        }
        let open = at + "optim.".len() + class.len();
        let one_line = l[open..].starts_with('(') && matching_paren(l, open).is_some();
        found.push(OptimizerCall {
            line: i,
            indent: indent_of(l).to_string(),
            model,
            class,
            one_line,
        });
    }
    (found.len() == 1).then(|| found.remove(0))
}

/// The index of the `)` closing the `(` at `open`, on the same line.
fn matching_paren(l: &str, open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in l[open..].char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

fn insert_line(src: &str, at: usize, line: &str) -> String {
    let mut lines: Vec<String> = lines_of(src).into_iter().map(str::to_string).collect();
    if at > 0 && !lines[at - 1].ends_with('\n') {
        lines[at - 1].push('\n');
    }
    lines.insert(at, format!("{line}\n"));
    lines.concat()
}

/// The module-level line of a CUDA setting.
pub fn module_line(knob: ComputeKnob) -> Option<&'static str> {
    match knob {
        ComputeKnob::CudnnBenchmark => Some("torch.backends.cudnn.benchmark = True"),
        ComputeKnob::Tf32 => Some("torch.backends.cuda.matmul.allow_tf32 = True"),
        _ => None,
    }
}

/// The line a model-level change inserts before the optimizer, for `model`
/// on `device` ("cpu" or "cuda").
pub fn model_line(knob: ComputeKnob, model: &str, device: &str) -> Option<String> {
    match knob {
        ComputeKnob::ChannelsLast => Some(format!(
            "{model} = {model}.to(memory_format=torch.channels_last)"
        )),
        ComputeKnob::Compile => Some(format!("{model} = torch.compile({model})")),
        ComputeKnob::Autocast => Some(format!(
            "{model}.forward = torch.autocast(\"{device}\", dtype=torch.bfloat16)({model}.forward)"
        )),
        _ => None,
    }
}

/// Makes one compute change in `src`. `threads` is the thread count for
/// `num_threads`; `device` ("cpu"/"cuda") the autocast's device type.
/// `Err` says why the script has no place for it.
pub fn apply(
    knob: ComputeKnob,
    src: &str,
    threads: u32,
    device: &str,
) -> Result<String, ComputeRefusal> {
    match knob {
        ComputeKnob::NumThreads => match threads_call(src)? {
            Some((i, n)) if n == threads => {
                Err(ComputeRefusal::ThreadsAlreadySet { n, line: i + 1 })
            }
            Some((i, n)) => {
                let mut lines: Vec<String> =
                    lines_of(src).into_iter().map(str::to_string).collect();
                lines[i] = lines[i].replacen(
                    &format!("torch.set_num_threads({n})"),
                    &format!("torch.set_num_threads({threads})"),
                    1,
                );
                Ok(lines.concat())
            }
            None => {
                let at = after_imports(src).ok_or(ComputeRefusal::NoImportForThreads)?;
                Ok(insert_line(
                    src,
                    at,
                    &format!("torch.set_num_threads({threads})"),
                ))
            }
        },
        ComputeKnob::CudnnBenchmark | ComputeKnob::Tf32 => {
            let line = module_line(knob).unwrap_or_default();
            if src.contains(line) {
                return Err(ComputeRefusal::SettingAlreadyThere { line });
            }
            let at = after_imports(src).ok_or(ComputeRefusal::NoImportForSetting)?;
            Ok(insert_line(src, at, line))
        }
        ComputeKnob::ChannelsLast | ComputeKnob::Compile | ComputeKnob::Autocast => {
            let marker = match knob {
                ComputeKnob::ChannelsLast => "channels_last",
                ComputeKnob::Compile => "torch.compile(",
                _ => "autocast",
            };
            if src.contains(marker) {
                return Err(ComputeRefusal::AlreadyUses { marker });
            }
            let call = optimizer_call(src).ok_or(ComputeRefusal::NoOptimizerToPrecede)?;
            let line = model_line(knob, &call.model, device).unwrap_or_default();
            Ok(insert_line(
                src,
                call.line,
                &format!("{}{line}", call.indent),
            ))
        }
        ComputeKnob::FusedOptimizer | ComputeKnob::ForeachOptimizer => {
            let kw = optimizer_keyword(knob).unwrap_or_default();
            let call = optimizer_call(src).ok_or(ComputeRefusal::NoOptimizer)?;
            if !call.one_line {
                return Err(ComputeRefusal::OptimizerSpansLines { class: call.class });
            }
            if knob == ComputeKnob::FusedOptimizer
                && !FUSED_OPTIMIZERS.contains(&call.class.as_str())
            {
                return Err(ComputeRefusal::NotFused { class: call.class });
            }
            let mut lines: Vec<String> = lines_of(src).into_iter().map(str::to_string).collect();
            let l = &lines[call.line];
            if l.contains("fused=") || l.contains("foreach=") {
                return Err(ComputeRefusal::AlreadyChooses { class: call.class });
            }
            let open = l.find(&format!("optim.{}(", call.class)).unwrap_or(0)
                + "optim.".len()
                + call.class.len();
            let close = matching_paren(l, open).ok_or(ComputeRefusal::UnbalancedOptimizerCall)?;
            let empty = l[open + 1..close].trim().is_empty();
            let text = if empty {
                kw.to_string()
            } else {
                format!(", {kw}")
            };
            let mut new = l.clone();
            new.insert_str(close, &text);
            lines[call.line] = new;
            Ok(lines.concat())
        }
    }
}

fn optimizer_keyword(knob: ComputeKnob) -> Option<&'static str> {
    match knob {
        ComputeKnob::FusedOptimizer => Some("fused=True"),
        ComputeKnob::ForeachOptimizer => Some("foreach=True"),
        _ => None,
    }
}

/// `a.b = a.b.to(memory_format=torch.channels_last)` and the like: the
/// same target on both sides.
fn same_target(line: &str, make: impl Fn(&str) -> String) -> bool {
    let Some((lhs, _)) = line.split_once('=') else {
        return false;
    };
    let target = lhs.trim().trim_end_matches(".forward");
    !target.is_empty()
        && target
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && squash(&make(target)) == squash(line)
}

/// A line without its spaces, `'` as `"`: how two spellings compare.
fn squash(l: &str) -> String {
    l.chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| if c == '\'' { '"' } else { c })
        .collect()
}

/// One added line, classified.
fn added_line(line: &str) -> Option<(ComputeKnob, String)> {
    let t = line.trim();
    let s = squash(t);
    if let Some(n) = between(&s, "torch.set_num_threads(", ")") {
        if s.starts_with("torch.set_num_threads(") && s.ends_with(')') && n.parse::<u32>().is_ok() {
            return Some((
                ComputeKnob::NumThreads,
                format!("torch.set_num_threads({n}) added"),
            ));
        }
    }
    let tf32 = [
        "torch.backends.cuda.matmul.allow_tf32=True",
        "torch.backends.cudnn.allow_tf32=True",
        "torch.set_float32_matmul_precision(\"high\")",
        "torch.set_float32_matmul_precision(\"medium\")",
    ];
    if tf32.contains(&s.as_str()) {
        return Some((ComputeKnob::Tf32, format!("`{t}` added")));
    }
    if s == "torch.backends.cudnn.benchmark=True" {
        return Some((ComputeKnob::CudnnBenchmark, format!("`{t}` added")));
    }
    if same_target(t, |m| {
        format!("{m} = {m}.to(memory_format=torch.channels_last)")
    }) {
        return Some((ComputeKnob::ChannelsLast, format!("`{t}` added")));
    }
    if same_target(t, |m| format!("{m} = torch.compile({m})")) {
        return Some((ComputeKnob::Compile, format!("`{t}` added")));
    }
    // model.forward = torch.autocast(<args>)(model.forward)
    if let Some((lhs, rhs)) = t.split_once('=') {
        let target = lhs.trim();
        let r = squash(rhs);
        if let Some(m) = target.strip_suffix(".forward") {
            if autocast_call(&r) && r.ends_with(&format!(")({m}.forward)")) {
                return Some((ComputeKnob::Autocast, format!("`{t}` added")));
            }
        }
    }
    None
}

/// `torch.autocast(...)`, `torch.amp.autocast(...)`,
/// `torch.cpu.amp.autocast(...)`, `torch.cuda.amp.autocast(...)` with a
/// reduced-precision dtype (bf16, or fp16) or none (the device's default).
fn autocast_call(s: &str) -> bool {
    let s = s.trim_start_matches("with");
    [
        "torch.autocast(",
        "torch.amp.autocast(",
        "torch.cpu.amp.autocast(",
        "torch.cuda.amp.autocast(",
    ]
    .iter()
    .any(|p| s.starts_with(p))
        && !s.contains("enabled=False")
        && !s.contains("dtype=torch.float32")
}

/// One changed line, classified: a thread count changed, or an optimizer
/// keyword added.
fn changed_line(old: &str, new: &str) -> Option<(ComputeKnob, String)> {
    let (o, n) = (squash(old), squash(new));
    if let (Some(a), Some(b)) = (
        between(&o, "torch.set_num_threads(", ")"),
        between(&n, "torch.set_num_threads(", ")"),
    ) {
        let rest = |s: &str, v: &str| s.replacen(&format!("torch.set_num_threads({v})"), "", 1);
        if a != b && rest(&o, a) == rest(&n, b) && b.parse::<u32>().is_ok() {
            return Some((
                ComputeKnob::NumThreads,
                format!("torch.set_num_threads {a} → {b}"),
            ));
        }
    }
    if o.contains("optim.") && o.contains(".parameters()") {
        for knob in [ComputeKnob::FusedOptimizer, ComputeKnob::ForeachOptimizer] {
            let kw = optimizer_keyword(knob).unwrap_or_default();
            if o.contains(kw) {
                continue;
            }
            let without = n.replacen(&format!(",{kw}"), "", 1).replacen(kw, "", 1);
            if n.contains(kw) && without == o {
                let class = between(&o, "optim.", "(")
                    .unwrap_or("optimizer")
                    .to_string();
                return Some((knob, format!("{kw} on torch.optim.{class}")));
            }
        }
    }
    None
}

/// A block indented one level deeper under an added `with <autocast>:`
/// line, nothing else changed: the step's forward (and loss) under autocast.
fn wrapped_block(removed: &[&str], added: &[&str]) -> Option<(ComputeKnob, String)> {
    let (head, body) = added.split_first()?;
    if removed.is_empty() || body.len() != removed.len() {
        return None;
    }
    let h = squash(head);
    if !(h.starts_with("with") && h.ends_with("):") && autocast_call(&h[..h.len() - 1])) {
        return None;
    }
    let base = indent_of(head);
    // The block starts where the `with` line stands.
    if indent_of(removed[0]) != base {
        return None;
    }
    let mut extra: Option<&str> = None;
    for (r, a) in removed.iter().zip(body) {
        if r.trim().is_empty() && a.trim().is_empty() {
            continue;
        }
        if r.trim_start() != a.trim_start() || !indent_of(r).starts_with(base) {
            return None;
        }
        let (ri, ai) = (indent_of(r), indent_of(a));
        let more = ai.strip_prefix(ri)?;
        if more.is_empty() || *extra.get_or_insert(more) != more {
            return None;
        }
    }
    Some((
        ComputeKnob::Autocast,
        format!(
            "`{}` around {} lines",
            head.trim().trim_end_matches(':'),
            removed.len()
        ),
    ))
}

/// Whether the edit from `old` to `new` is exactly one compute change, and
/// which. `None` when it is not one (the caller's other checks apply).
pub fn recognize(old: &str, new: &str) -> Option<ComputeEdit> {
    let diff = TextDiff::from_lines(old, new);
    let ops: Vec<_> = diff
        .ops()
        .iter()
        .filter(|op| op.tag() != DiffTag::Equal)
        .collect();
    let (first, last) = (ops.first()?, ops.last()?);
    // One contiguous hunk.
    for w in ops.windows(2) {
        if w[0].old_range().end != w[1].old_range().start
            || w[0].new_range().end != w[1].new_range().start
        {
            return None;
        }
    }
    let old_lines = lines_of(old);
    let new_lines = lines_of(new);
    let removed = &old_lines[first.old_range().start..last.old_range().end];
    let added = &new_lines[first.new_range().start..last.new_range().end];
    let line = first.new_range().start + 1;
    let found = match (removed, added) {
        ([], [a]) => added_line(a),
        ([r], [a]) => changed_line(r, a),
        _ => wrapped_block(removed, added),
    }?;
    Some(ComputeEdit {
        knob: found.0,
        change: format!("{}: {}", found.0.name(), found.1),
        line,
    })
}

/// The knob a turn's one-line change names (the text before its first `:`),
/// when it is a compute one: how the history says which were tried.
pub fn knob_of_change(change: &str) -> Option<ComputeKnob> {
    ComputeKnob::parse(change.split(':').next()?.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRAIN: &str = "\"\"\"A script.\"\"\"\nimport argparse\nimport torch\nfrom torch import (\n    nn,\n)\n\n\ndef main():\n    model = Net()\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    for x, y in loader:\n        out = model(x)\n        loss = nn.functional.cross_entropy(out, y)\n        loss.backward()\n";

    #[test]
    fn each_change_the_agent_makes_is_recognised_as_that_one_change() {
        for knob in ComputeKnob::ALL {
            let new = apply(knob, TRAIN, 2, "cpu").unwrap_or_else(|e| panic!("{knob}: {e}"));
            assert!(super::super::check_syntax(&new).is_ok(), "{knob}:\n{new}");
            let r = recognize(TRAIN, &new).unwrap_or_else(|| panic!("{knob}:\n{new}"));
            assert_eq!(r.knob, knob, "{new}");
            assert!(
                r.change.starts_with(&format!("{}: ", knob.name())),
                "{}",
                r.change
            );
            assert_eq!(knob_of_change(&r.change), Some(knob));
            // The line recorded is the changed one.
            let at = new.lines().nth(r.line - 1).unwrap();
            assert!(
                !TRAIN.lines().any(|l| l == at),
                "{knob}: line {} is {at:?}",
                r.line
            );
        }
    }

    #[test]
    fn the_places_are_after_the_imports_and_before_the_optimizer() {
        let t = apply(ComputeKnob::NumThreads, TRAIN, 2, "cpu").unwrap();
        // After the parenthesised import's last line.
        assert!(t.contains("    nn,\n)\ntorch.set_num_threads(2)\n"), "{t}");
        let c = apply(ComputeKnob::ChannelsLast, TRAIN, 2, "cpu").unwrap();
        assert!(c.contains("    model = model.to(memory_format=torch.channels_last)\n    optimizer = torch.optim.SGD("), "{c}");
        let f = apply(ComputeKnob::FusedOptimizer, TRAIN, 2, "cpu").unwrap();
        assert!(
            f.contains("torch.optim.SGD(model.parameters(), lr=0.1, fused=True)"),
            "{f}"
        );
        let a = apply(ComputeKnob::Autocast, TRAIN, 2, "cpu").unwrap();
        assert!(
            a.contains(
                "model.forward = torch.autocast(\"cpu\", dtype=torch.bfloat16)(model.forward)"
            ),
            "{a}"
        );
        // An existing literal thread count is edited in place.
        let one = t.replace("set_num_threads(2)", "set_num_threads(1)");
        let two = apply(ComputeKnob::NumThreads, &one, 2, "cpu").unwrap();
        assert_eq!(two, t);
        let r = recognize(&one, &two).unwrap();
        assert_eq!(r.change, "num_threads: torch.set_num_threads 1 → 2");
        assert!(matches!(
            apply(ComputeKnob::NumThreads, &t, 2, "cpu"),
            Err(ComputeRefusal::ThreadsAlreadySet { n: 2, .. })
        ));
    }

    #[test]
    fn no_findable_place_means_no_change() {
        let two_opts = TRAIN.replace(
            "    for x",
            "    sched = torch.optim.Adam(model.parameters())\n    for x",
        );
        let refused = |knob, src: &str| apply(knob, src, 2, "cpu").unwrap_err();
        assert_eq!(
            refused(ComputeKnob::ChannelsLast, &two_opts),
            ComputeRefusal::NoOptimizerToPrecede
        );
        assert_eq!(
            refused(ComputeKnob::FusedOptimizer, &two_opts),
            ComputeRefusal::NoOptimizer
        );
        let no_torch = TRAIN.replace("import torch\n", "");
        assert_eq!(
            refused(ComputeKnob::NumThreads, &no_torch),
            ComputeRefusal::NoImportForThreads
        );
        let spread = TRAIN.replace(
            "(model.parameters(), lr=0.1)",
            "(\n        model.parameters(), lr=0.1)",
        );
        assert!(optimizer_call(&spread).is_some_and(|c| !c.one_line));
        assert_eq!(
            refused(ComputeKnob::ForeachOptimizer, &spread),
            ComputeRefusal::OptimizerSpansLines {
                class: "SGD".into()
            }
        );
        let rms = TRAIN.replace("optim.SGD", "optim.RMSprop");
        assert_eq!(
            refused(ComputeKnob::FusedOptimizer, &rms),
            ComputeRefusal::NotFused {
                class: "RMSprop".into()
            }
        );
        assert!(apply(ComputeKnob::ForeachOptimizer, &rms, 2, "cpu").is_ok());
        let flag = TRAIN.replace(
            "import torch\n",
            "import torch\ntorch.set_num_threads(args.threads)\n",
        );
        assert_eq!(
            refused(ComputeKnob::NumThreads, &flag),
            ComputeRefusal::ThreadsNotANumber {
                arg: "args.threads".into()
            }
        );
    }

    /// The refusals' words are the reasons run folders record: pinned here
    /// as they were written when they were strings.
    #[test]
    fn refusals_keep_their_recorded_words() {
        use ComputeRefusal as R;
        let class = || "Adam".to_string();
        for (r, words) in [
            (R::ThreadsCallSpansLines, "torch.set_num_threads(...) spans lines"),
            (R::ThreadsNotANumber { arg: "k".into() }, "torch.set_num_threads(k) is not set to a number"),
            (R::ThreadsCalledTwice, "torch.set_num_threads is called in several places"),
            (R::ThreadsAlreadySet { n: 4, line: 7 }, "torch.set_num_threads(4) is already set (line 7)"),
            (R::NoImportForThreads, "no top-level `import torch` to add torch.set_num_threads after"),
            (R::SettingAlreadyThere { line: "x = 1" }, "`x = 1` is already there"),
            (R::NoImportForSetting, "no top-level `import torch` to add the setting after"),
            (R::AlreadyUses { marker: "autocast" }, "the script already uses autocast"),
            (R::NoOptimizerToPrecede, "no single optimizer constructor over a model's .parameters() to put the change before"),
            (R::NoOptimizer, "no single optimizer constructor over a model's .parameters()"),
            (R::OptimizerSpansLines { class: class() }, "the torch.optim.Adam call spans lines"),
            (R::NotFused { class: class() }, "torch.optim.Adam has no fused implementation"),
            (R::AlreadyChooses { class: class() }, "the torch.optim.Adam call already chooses its implementation"),
            (R::UnbalancedOptimizerCall, "unbalanced optimizer call"),
        ] {
            assert_eq!(r.to_string(), words);
        }
    }

    #[test]
    fn anything_beside_the_one_change_is_not_a_compute_change() {
        let new = apply(ComputeKnob::ChannelsLast, TRAIN, 2, "cpu").unwrap();
        // A second edit elsewhere.
        assert_eq!(recognize(TRAIN, &new.replace("lr=0.1", "lr=0.2")), None);
        // A line that only looks like it: another target.
        let other = TRAIN.replace(
            "    optimizer =",
            "    model = net.to(memory_format=torch.channels_last)\n    optimizer =",
        );
        assert_eq!(recognize(TRAIN, &other), None);
        // fused plus another keyword changed on the same line.
        let f = TRAIN.replace("lr=0.1)", "lr=0.5, fused=True)");
        assert_eq!(recognize(TRAIN, &f), None);
        // A model change is not a compute change.
        assert_eq!(
            recognize(TRAIN, &TRAIN.replace("Net()", "Net(width=2)")),
            None
        );
        assert_eq!(recognize(TRAIN, TRAIN), None);
    }

    #[test]
    fn the_step_indented_under_autocast_is_one_change_and_nothing_more() {
        let wrapped = TRAIN.replace(
            "        out = model(x)\n        loss = nn.functional.cross_entropy(out, y)\n",
            "        with torch.autocast(device_type=\"cpu\", dtype=torch.bfloat16):\n            out = model(x)\n            loss = nn.functional.cross_entropy(out, y)\n",
        );
        let r = recognize(TRAIN, &wrapped).unwrap();
        assert_eq!(r.knob, ComputeKnob::Autocast);
        assert!(r.change.contains("around 2 lines"), "{}", r.change);
        // A line changed inside the block: not just a wrap.
        let sneaky = wrapped.replace(
            "loss = nn.functional.cross_entropy(out, y)",
            "loss = out.sum()",
        );
        assert_eq!(recognize(TRAIN, &sneaky), None);
        // Disabled autocast, or float32: not a reduced precision.
        let off = wrapped.replace("dtype=torch.bfloat16", "enabled=False");
        assert_eq!(recognize(TRAIN, &off), None);
        let nested = TRAIN.replace(
            "        out = model(x)\n",
            "        with torch.no_grad():\n            out = model(x)\n",
        );
        assert_eq!(recognize(TRAIN, &nested), None);
    }

    #[test]
    fn cuda_settings_and_their_spellings_are_recognised() {
        for (line, knob) in [
            (
                "torch.backends.cudnn.benchmark = True",
                ComputeKnob::CudnnBenchmark,
            ),
            (
                "torch.backends.cuda.matmul.allow_tf32 = True",
                ComputeKnob::Tf32,
            ),
            (
                "torch.set_float32_matmul_precision('high')",
                ComputeKnob::Tf32,
            ),
        ] {
            let new = TRAIN.replace("import torch\n", &format!("import torch\n{line}\n"));
            assert_eq!(recognize(TRAIN, &new).map(|r| r.knob), Some(knob), "{line}");
        }
        let off = TRAIN.replace(
            "import torch\n",
            "import torch\ntorch.backends.cudnn.benchmark = False\n",
        );
        assert_eq!(recognize(TRAIN, &off), None);
    }
}

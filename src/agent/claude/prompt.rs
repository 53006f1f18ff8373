//! The turn prompt: a template from `prompts/` (the policy's `prompt` path
//! with `{language}` filled in, else the copy inside the binary) with its
//! `{{placeholders}}` filled from the turn's facts; and where the profiler
//! table goes (stdin, or a file when stdin would pass the CLI's cap).

use std::path::{Path, PathBuf};

use crate::edit::CallSite;
use crate::report::{Decision, TurnRow};

/// Claude Code refuses piped stdin above 10 × 1024 × 1024 UTF-16 code units.
pub const STDIN_CAP_UTF16: usize = 10 * 1024 * 1024;

/// The knobs in the article's order.
pub const ARTICLE_ORDER: [&str; 5] = [
    "num_workers",
    "pin_memory",
    "prefetch_factor",
    "persistent_workers",
    "preprocessing",
];

/// How the profiler table reaches the agent.
#[derive(Clone, Debug, PartialEq)]
pub enum TableDelivery {
    /// On stdin, after the prompt.
    Stdin,
    /// Too large for stdin: in this file, named in the prompt.
    File(PathBuf),
    /// There is no table (contract mode without one).
    None,
}

/// Stdin, unless the table is empty or would pass the CLI's cap; then `file`.
pub fn table_delivery(table: &str, file: &Path) -> TableDelivery {
    if table.trim().is_empty() {
        TableDelivery::None
    } else if table.encode_utf16().count() > STDIN_CAP_UTF16 {
        TableDelivery::File(file.to_owned())
    } else {
        TableDelivery::Stdin
    }
}

/// The template text and where it came from.
pub fn load_template(ws_dir: &Path, prompt_path: &str, language: &str) -> (String, String) {
    let rel = prompt_path.replace("{language}", language);
    let path = ws_dir.join(&rel);
    match std::fs::read_to_string(&path) {
        Ok(t) => (t, path.display().to_string()),
        Err(_) => {
            let embedded = if language == "ja" {
                crate::cli::PROMPT_JA
            } else {
                crate::cli::PROMPT_EN
            };
            (
                embedded.to_string(),
                format!(
                    "(built-in prompts/turn.{language}.md; {} not found)",
                    path.display()
                ),
            )
        }
    }
}

/// The facts a prompt is made of.
#[derive(Clone, Debug)]
pub struct PromptFacts<'a> {
    pub language: &'a str,
    pub turn: u32,
    pub max_iterations: u32,
    pub knobs: &'a [String],
    pub editable: &'a [String],
    pub incumbent_sps: f64,
    pub data_wait_share: Option<f64>,
    pub cpu_count: Option<u32>,
    /// The limits no loader setting passes, in one line ("" when unknown).
    pub limits: String,
    pub device: Option<&'a str>,
    pub call_sites: &'a [CallSite],
    /// The DataLoader's settings as the harness saw them at run time.
    pub loader_settings: Vec<(String, String)>,
    pub history: &'a [TurnRow],
    pub table: &'a TableDelivery,
}

/// Fills the template's `{{placeholders}}`; unknown ones are left as written.
pub fn render(template: &str, f: &PromptFacts) -> String {
    let ja = f.language == "ja";
    let pick = |en: &str, jp: &str| if ja { jp.to_string() } else { en.to_string() };
    let values: Vec<(&str, String)> = vec![
        ("turn", f.turn.to_string()),
        ("max_iterations", f.max_iterations.to_string()),
        ("preprocessing_rule", preprocessing_rule(f.knobs, ja)),
        ("knobs", knobs(f.knobs, ja)),
        (
            "editable",
            f.editable
                .iter()
                .map(|e| format!("- {e}"))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        ("incumbent_sps", format!("{:.1}", f.incumbent_sps)),
        (
            "data_wait_share",
            f.data_wait_share
                .map(|s| format!("{:.0}%", s * 100.0))
                .unwrap_or_else(|| pick("unknown", "不明")),
        ),
        (
            "cpu_count",
            f.cpu_count
                .map(|c| c.to_string())
                .unwrap_or_else(|| pick("unknown", "不明")),
        ),
        (
            "limits",
            if f.limits.is_empty() {
                pick("unknown", "不明")
            } else {
                f.limits.clone()
            },
        ),
        (
            "device",
            f.device
                .unwrap_or(if ja { "不明" } else { "unknown" })
                .to_string(),
        ),
        ("call_sites", call_sites(f, ja)),
        ("history", history(f.history, ja)),
        ("profile_source", profile_source(f.table, ja)),
    ];
    let mut out = template.to_string();
    for (k, v) in values {
        out = out.replace(&format!("{{{{{k}}}}}"), &v);
    }
    out
}

fn preprocessing_rule(knobs: &[String], ja: bool) -> String {
    let on = knobs.iter().any(|k| k == "preprocessing");
    match (on, ja) {
        (true, false) => "- one spot of preprocessing in the dataset's code (one hunk).".into(),
        (true, true) => "- データセットのコードの前処理1か所(1ハンク)を変える".into(),
        (false, false) => {
            "- (nothing else: this policy does not allow preprocessing changes).".into()
        }
        (false, true) => "- (それ以外は不可: このポリシーでは前処理の変更は許されていない)".into(),
    }
}

fn knobs(allowed: &[String], ja: bool) -> String {
    let hint = |k: &str| -> &str {
        match (k, ja) {
            ("num_workers", false) => {
                "worker processes that load batches in parallel; start near the CPU core count"
            }
            ("num_workers", true) => {
                "並列にバッチを読むワーカープロセスの数。CPU コア数の近くから始める"
            }
            ("pin_memory", false) => "True only when batches are copied to a CUDA device",
            ("pin_memory", true) => "バッチを CUDA デバイスへ送るときだけ True",
            ("prefetch_factor", false) => "batches each worker loads ahead (needs num_workers > 0)",
            ("prefetch_factor", true) => "各ワーカーが先読みするバッチ数(num_workers > 0 が必要)",
            ("persistent_workers", false) => {
                "True keeps workers alive between epochs (needs num_workers > 0)"
            }
            ("persistent_workers", true) => {
                "True でエポック間もワーカーを生かしておく(num_workers > 0 が必要)"
            }
            ("preprocessing", false) => {
                "one spot of the dataset's per-item work (decode once, cache, vectorise)"
            }
            ("preprocessing", true) => {
                "データセットの1件ごとの処理1か所(デコードを1回に、キャッシュ、ベクトル化)"
            }
            _ => "",
        }
    };
    let mut lines = Vec::new();
    for k in ARTICLE_ORDER
        .iter()
        .filter(|k| allowed.iter().any(|a| a == *k))
    {
        lines.push(format!("{}. `{k}`: {}", lines.len() + 1, hint(k)));
    }
    if lines.is_empty() {
        lines.push(
            if ja {
                "(ポリシーが変更を許すノブはない)"
            } else {
                "(the policy allows no knob)"
            }
            .to_string(),
        );
    }
    lines.join("\n")
}

fn call_sites(f: &PromptFacts, ja: bool) -> String {
    let mut lines: Vec<String> = f
        .call_sites
        .iter()
        .map(|s| {
            let mut args: Vec<String> = Vec::new();
            if s.positional > 0 {
                args.push(if ja {
                    format!("位置引数 {}", s.positional)
                } else {
                    format!("{} positional", s.positional)
                });
            }
            args.extend(
                s.kwargs
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))),
            );
            if s.has_spread {
                args.push("**…".into());
            }
            let at = if ja {
                format!("{} の {} 行目", s.file, s.line)
            } else {
                format!("{} line {}", s.file, s.line)
            };
            format!("  - {at}: {}({})", s.callee, args.join(", "))
        })
        .collect();
    if lines.is_empty() {
        lines.push(
            if ja {
                "  - (見つからない)"
            } else {
                "  - (none found)"
            }
            .to_string(),
        );
    }
    if !f.loader_settings.is_empty() {
        let s = f
            .loader_settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        lines.push(if ja {
            format!("  - 実行時の設定: {s}")
        } else {
            format!("  - settings at run time: {s}")
        });
    }
    lines.join("\n")
}

fn decision_word(d: Decision, ja: bool) -> &'static str {
    match (d, ja) {
        (Decision::Kept, false) => "kept",
        (Decision::KeptCheaper, false) => "kept (cheaper, within min_gain)",
        (Decision::Reverted, false) => "reverted",
        (Decision::Rejected, false) => "rejected",
        (Decision::Failed, false) => "failed",
        (Decision::NoChange, false) => "no change",
        (Decision::Kept, true) => "採用",
        (Decision::KeptCheaper, true) => "採用 (より安価、min_gain 以内)",
        (Decision::Reverted, true) => "差し戻し",
        (Decision::Rejected, true) => "却下",
        (Decision::Failed, true) => "失敗",
        (Decision::NoChange, true) => "変更なし",
    }
}

fn history(rows: &[TurnRow], ja: bool) -> String {
    if rows.is_empty() {
        return if ja {
            "(まだない: これが最初のターン)"
        } else {
            "(nothing yet: this is the first turn)"
        }
        .into();
    }
    rows.iter()
        .map(|r| {
            let turn = if ja {
                format!("ターン {}", r.turn)
            } else {
                format!("turn {}", r.turn)
            };
            let measured = match (r.before_sps, r.after_sps, r.ratio) {
                (Some(b), Some(a), Some(x)) => format!(", {b:.1} → {a:.1} samples/sec (×{x:.3})"),
                _ => String::new(),
            };
            let reason = if r.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", r.reason)
            };
            format!(
                "- {turn}: {} — {}{measured}{reason}",
                r.change,
                decision_word(r.decision, ja)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn profile_source(t: &TableDelivery, ja: bool) -> String {
    match (t, ja) {
        (TableDelivery::Stdin, false) => "The table follows this prompt (piped on stdin).".into(),
        (TableDelivery::Stdin, true) => "表はこのプロンプトの後に続く(標準入力から)。".into(),
        (TableDelivery::File(p), false) => {
            format!(
                "The table is too large to pipe in; read it from this file: {}",
                p.display()
            )
        }
        (TableDelivery::File(p), true) => format!(
            "表は大きすぎて標準入力に渡せないので、このファイルから読むこと: {}",
            p.display()
        ),
        (TableDelivery::None, false) => {
            "(no profiler table for this project: the bench gives none)".into()
        }
        (TableDelivery::None, true) => "(このプロジェクトにはプロファイラの表がない)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::AgentInfo;

    fn row(
        turn: u32,
        change: &str,
        d: Decision,
        m: Option<(f64, f64, f64)>,
        reason: &str,
    ) -> TurnRow {
        TurnRow {
            turn,
            change: change.into(),
            file: Some("train.py".into()),
            before_sps: m.map(|x| x.0),
            after_sps: m.map(|x| x.1),
            ratio: m.map(|x| x.2),
            ratio_ci: None,
            runs: 0,
            decision: d,
            reason: reason.into(),
            agent: AgentInfo::default(),
            candidate_samples: vec![],
            incumbent_samples: vec![],
            data_wait_share: None,
        }
    }

    fn facts<'a>(
        lang: &'a str,
        sites: &'a [CallSite],
        hist: &'a [TurnRow],
        knobs: &'a [String],
        table: &'a TableDelivery,
    ) -> PromptFacts<'a> {
        PromptFacts {
            language: lang,
            turn: 3,
            max_iterations: 10,
            knobs,
            editable: &[],
            incumbent_sps: 812.345,
            data_wait_share: Some(0.714),
            cpu_count: Some(8),
            limits: crate::bench::limits::ThroughputLimits {
                step_alone_sps: Some(32_000.0),
                cpu_limit_sps: Some(8_000.0),
                cpu_s_per_sample: Some(0.001),
                usable_cores: Some(8.0),
                binding: Some(crate::bench::limits::Binding::Cpu),
                ..Default::default()
            }
            .summary(),
            device: Some("cpu"),
            call_sites: sites,
            loader_settings: vec![
                ("num_workers".into(), "2".into()),
                ("pin_memory".into(), "False".into()),
            ],
            history: hist,
            table,
        }
    }

    fn setup() -> (Vec<CallSite>, Vec<TurnRow>, Vec<String>) {
        let sites = crate::edit::scan_source(
            "train.py",
            "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=32, num_workers=2)\n",
        )
        .unwrap();
        let hist = vec![
            row(
                1,
                "num_workers (default) → 2",
                Decision::Kept,
                Some((400.0, 812.3, 2.03)),
                "faster",
            ),
            row(
                2,
                "num_workers 2 → 4",
                Decision::Reverted,
                Some((812.0, 800.0, 0.985)),
                "not shown faster",
            ),
            row(
                3,
                "(no change proposed)",
                Decision::NoChange,
                None,
                "the agent changed no file",
            ),
        ];
        // Out of the article's order on purpose: the prompt puts them back in order.
        let knobs = vec![
            "persistent_workers".into(),
            "num_workers".into(),
            "pin_memory".into(),
        ];
        (sites, hist, knobs)
    }

    #[test]
    fn every_placeholder_of_both_templates_is_filled() {
        let (sites, hist, knobs) = setup();
        for (lang, tpl) in [("en", crate::cli::PROMPT_EN), ("ja", crate::cli::PROMPT_JA)] {
            let mut f = facts(lang, &sites, &hist, &knobs, &TableDelivery::Stdin);
            let editable = vec!["train.py".to_string()];
            f.editable = &editable;
            let out = render(tpl, &f);
            assert!(
                !out.contains("{{"),
                "{lang}: unfilled placeholder in\n{out}"
            );
            assert!(out.contains("812.3 samples/sec"), "{out}");
            assert!(out.contains("71%"), "{out}");
            assert!(out.contains("- train.py"), "{out}");
            assert!(
                out.contains("DataLoader(") && out.contains("batch_size=32, num_workers=2)"),
                "{out}"
            );
            assert!(out.contains("num_workers 2 → 4"), "{out}");
            assert!(out.contains("400.0 → 812.3 samples/sec (×2.030)"), "{out}");
            let (a, b, c) = (
                out.find("`num_workers`").unwrap(),
                out.find("`pin_memory`").unwrap(),
                out.find("`persistent_workers`").unwrap(),
            );
            assert!(a < b && b < c, "knobs not in the article's order:\n{out}");
            assert!(
                !out.contains("`prefetch_factor`"),
                "a knob the policy does not allow is offered"
            );
        }
    }

    #[test]
    fn rendered_prompts_snapshot() {
        let (sites, hist, knobs) = setup();
        let editable = vec!["train.py".to_string()];
        let file = TableDelivery::File(PathBuf::from("/runs/r1/turns/03/profile.txt"));
        let mut en = facts("en", &sites, &hist, &knobs, &TableDelivery::Stdin);
        en.editable = &editable;
        insta::assert_snapshot!("prompt_en", render(crate::cli::PROMPT_EN, &en));
        let mut ja = facts("ja", &sites, &hist[..1], &knobs, &file);
        ja.editable = &editable;
        insta::assert_snapshot!("prompt_ja", render(crate::cli::PROMPT_JA, &ja));
    }

    #[test]
    fn the_first_turn_says_nothing_was_tried_and_unknowns_are_named() {
        let knobs = vec!["num_workers".to_string()];
        let mut f = facts("en", &[], &[], &knobs, &TableDelivery::None);
        f.data_wait_share = None;
        f.loader_settings.clear();
        let out = render(
            "{{history}}|{{data_wait_share}}|{{call_sites}}|{{profile_source}}|{{unknown}}",
            &f,
        );
        assert_eq!(out, "(nothing yet: this is the first turn)|unknown|  - (none found)|(no profiler table for this project: the bench gives none)|{{unknown}}");
    }

    #[test]
    fn a_table_over_the_stdin_cap_goes_to_a_file() {
        let f = Path::new("/t/profile.txt");
        assert_eq!(table_delivery("", f), TableDelivery::None);
        assert_eq!(table_delivery("name  total\n", f), TableDelivery::Stdin);
        let at_cap = "a".repeat(STDIN_CAP_UTF16);
        assert_eq!(table_delivery(&at_cap, f), TableDelivery::Stdin);
        // Counted in UTF-16 units, as the CLI counts: 'あ' is one unit but three bytes.
        let multibyte = "あ".repeat(STDIN_CAP_UTF16 / 2 + 1);
        assert!(multibyte.len() > STDIN_CAP_UTF16);
        assert_eq!(table_delivery(&multibyte, f), TableDelivery::Stdin);
        assert_eq!(
            table_delivery(&format!("{at_cap}x"), f),
            TableDelivery::File(f.to_owned())
        );
        // A character outside the BMP is two units.
        assert_eq!(
            table_delivery(&"😀".repeat(STDIN_CAP_UTF16 / 2 + 1), f),
            TableDelivery::File(f.to_owned())
        );
    }

    #[test]
    fn the_workspace_template_wins_over_the_built_in_one() {
        let d = tempfile::tempdir().unwrap();
        let (t, src) = load_template(d.path(), "prompts/turn.{language}.md", "ja");
        assert_eq!(t, crate::cli::PROMPT_JA);
        assert!(src.contains("built-in"));
        std::fs::create_dir_all(d.path().join("prompts")).unwrap();
        std::fs::write(d.path().join("prompts/turn.en.md"), "mine {{turn}}").unwrap();
        let (t, src) = load_template(d.path(), "prompts/turn.{language}.md", "en");
        assert_eq!(t, "mine {{turn}}");
        assert!(src.ends_with("prompts/turn.en.md"));
    }
}

//! The turn prompt: a template from `prompts/` (the policy's `prompt` path
//! with `{language}` filled in, else the copy inside the binary) with its
//! `{{placeholders}}` filled from the turn's facts; and where the profiler
//! table goes (stdin, or a file when stdin would pass the CLI's cap).

use std::path::{Path, PathBuf};

use crate::agent::evidence::{Evidence, Outlook};
use crate::edit::CallSite;
use crate::knob::LoaderKnob;
use crate::turn::{Decision, TurnRow};

/// Claude Code refuses piped stdin above 10 × 1024 × 1024 UTF-16 code units.
pub const STDIN_CAP_UTF16: usize = 10 * 1024 * 1024;

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
                crate::agent::assets::PROMPT_JA
            } else {
                crate::agent::assets::PROMPT_EN
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
    /// The same calls (and `TrainingArguments` calls) with where each knob's
    /// value is defined; empty when not known.
    pub knob_sites: &'a [crate::edit::KnobSite],
    /// Command mode: the call site (`file:line`) the measurement saw build
    /// the training loader.
    pub measured_site: Option<&'a str>,
    /// The DataLoader's settings as the harness saw them at run time.
    pub loader_settings: Vec<(String, String)>,
    pub history: &'a [TurnRow],
    pub table: &'a TableDelivery,
    /// What the incumbent's measurement says (`None`: no measurement yet).
    pub evidence: Option<&'a Evidence>,
}

/// Fills the template's `{{placeholders}}`; unknown ones are left as written.
pub fn render(template: &str, f: &PromptFacts) -> String {
    let ja = f.language == "ja";
    let pick = |en: &str, jp: &str| if ja { jp.to_string() } else { en.to_string() };
    let values: Vec<(&str, String)> = vec![
        ("turn", f.turn.to_string()),
        ("max_iterations", f.max_iterations.to_string()),
        (
            "preprocessing_rule",
            preprocessing_rule(f.knobs, ja) + &crate::compute::prompt_rule(f.knobs, ja),
        ),
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
        ("diagnosis", diagnosis(f, ja)),
    ];
    let mut out = template.to_string();
    for (k, v) in values {
        out = out.replace(&format!("{{{{{k}}}}}"), &v);
    }
    out
}

fn preprocessing_rule(knobs: &[String], ja: bool) -> String {
    let on = knobs.iter().any(|k| LoaderKnob::Preprocessing.is(k));
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
    let hint = |k: LoaderKnob| -> &str {
        use LoaderKnob::*;
        match (k, ja) {
            (NumWorkers, false) => {
                "worker processes that load batches in parallel; start near the CPU core count"
            }
            (NumWorkers, true) => {
                "並列にバッチを読むワーカープロセスの数。CPU コア数の近くから始める"
            }
            (PinMemory, false) => "True only when batches are copied to a CUDA device",
            (PinMemory, true) => "バッチを CUDA デバイスへ送るときだけ True",
            (PrefetchFactor, false) => "batches each worker loads ahead (needs num_workers > 0)",
            (PrefetchFactor, true) => "各ワーカーが先読みするバッチ数(num_workers > 0 が必要)",
            (PersistentWorkers, false) => {
                "True keeps workers alive between epochs (needs num_workers > 0)"
            }
            (PersistentWorkers, true) => {
                "True でエポック間もワーカーを生かしておく(num_workers > 0 が必要)"
            }
            (Preprocessing, false) => {
                "one spot of the dataset's per-item work (decode once, cache, vectorise)"
            }
            (Preprocessing, true) => {
                "データセットの1件ごとの処理1か所(デコードを1回に、キャッシュ、ベクトル化)"
            }
        }
    };
    let mut lines = Vec::new();
    for k in LoaderKnob::ALL
        .into_iter()
        .filter(|k| allowed.iter().any(|a| k.is(a)))
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
            let mut line = format!("  - {at}: {}({})", s.callee, args.join(", "));
            let ks = f.knob_sites.iter().find(|k| {
                k.kind == crate::edit::SiteKind::DataLoader && k.file == s.file && k.line == s.line
            });
            let measured = f
                .measured_site
                .and_then(|m| m.rsplit_once(':'))
                .and_then(|(file, l)| Some((file, l.parse::<usize>().ok()?)))
                .is_some_and(|(file, l)| match ks {
                    Some(k) => k.matches(file, l),
                    None => file == s.file && l == s.line,
                });
            if measured {
                line.push_str(if ja {
                    "  ← tuneloop が計測している学習用ローダー"
                } else {
                    "  ← the training loader tuneloop measures"
                });
            }
            for o in ks.iter().flat_map(|k| &k.knobs) {
                // Keywords written in the call are in the line above.
                if !matches!(o.source, crate::edit::Source::Keyword) {
                    line.push_str(&format!(
                        "\n      {}",
                        o.describe(&format!("{}:{}", s.file, s.line))
                    ));
                }
            }
            line
        })
        .collect();
    for k in f
        .knob_sites
        .iter()
        .filter(|k| k.kind == crate::edit::SiteKind::TrainingArguments)
    {
        lines.push(if ja {
            format!(
                "  - {} の {} 行目: {}(…) — DataLoader は transformers の中で作られる。設定はこの dataloader_* キーワード:",
                k.file, k.line, k.callee
            )
        } else {
            format!(
                "  - {} line {}: {}(…) — the DataLoader is built inside transformers; its knobs are these dataloader_* keywords:",
                k.file, k.line, k.callee
            )
        });
        for d in k.describe_knobs() {
            lines.push(format!("      {d}"));
        }
    }
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

/// Milliseconds, with a second decimal below 1 ms.
pub fn ms(seconds: f64) -> String {
    let v = seconds * 1e3;
    if v.abs() < 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// A speed-up factor: ×22.4, ×1.35.
pub fn gain(x: f64) -> String {
    if x >= 10.0 {
        format!("×{x:.1}")
    } else {
        format!("×{x:.2}")
    }
}

/// The incumbent's figures as the builtin agent reads them, one line each,
/// in the prompt's language: evidence, not orders.
fn diagnosis(f: &PromptFacts, ja: bool) -> String {
    let Some(e) = f.evidence else {
        return if ja {
            "- (まだ計測がない)".into()
        } else {
            "- (no measurement yet)".into()
        };
    };
    let mut out: Vec<String> = Vec::new();
    match (e.ceiling_sps, e.share_of_ceiling(), e.ceiling_gain()) {
        (Some(c), Some(share), Some(g)) => out.push(if ja {
            format!(
                "- 天井: {c:.1} samples/sec(メモリ上の1バッチを与えた学習ステップだけの速さ)。incumbent はその {:.1}% なので、どの DataLoader 設定でも {} を超えない",
                share * 100.0,
                gain(g)
            )
        } else {
            format!(
                "- ceiling: {c:.1} samples/sec (the training step alone, fed one batch from memory); the incumbent is at {:.1}% of it, so no DataLoader setting can give more than {}",
                share * 100.0,
                gain(g)
            )
        }),
        _ => out.push(if ja {
            "- 天井: 不明(このベンチは測らない)".into()
        } else {
            "- ceiling: unknown (this bench does not measure it)".into()
        }),
    }
    if let Some(m) = e.model {
        let dw = m.step_s - m.train_s;
        out.push(if ja {
            format!(
                "- 現在の1ステップ: {} = data_wait {} + train_step {}",
                ms(m.step_s),
                ms(dw),
                ms(m.train_s)
            )
        } else {
            format!(
                "- the step now: {} = data_wait {} + train_step {}",
                ms(m.step_s),
                ms(dw),
                ms(m.train_s)
            )
        });
        let per_batch = match (e.workers, ja) {
            (0, false) => format!(
                "- per batch: loading one takes {} inside the training process (no workers)",
                ms(m.batch_latency_s)
            ),
            (0, true) => format!(
                "- 1バッチあたり: 学習プロセスの中で読み込みに {} かかる(ワーカーなし)",
                ms(m.batch_latency_s)
            ),
            (w, false) => format!(
                "- per batch: one worker takes {} to produce a batch ({w} workers)",
                ms(m.batch_latency_s)
            ),
            (w, true) => format!(
                "- 1バッチあたり: ワーカー1つがバッチ1つを作るのに {} かかる(ワーカー {w})",
                ms(m.batch_latency_s)
            ),
        };
        out.push(per_batch);
        out.push(if ja {
            format!(
                "- ステップが縮められる下限: {}(学習ステップ+バッチの受け取り {}、読み込みと学習が1ステップに使う CPU を空きコア {:.2} で割ると {} の大きい方)。今より最大 {}。それに追いつくワーカー数はおよそ {}",
                ms(m.best_step_s()),
                ms(m.train_s + m.fetch_s),
                m.cores_free,
                ms(m.cpu_s),
                gain(m.predicted_gain()),
                m.workers_needed()
            )
        } else {
            format!(
                "- the step could take {} at best (the larger of train_step plus receiving a batch, {}, and the CPU that loading and training need per step over {:.2} free cores, {}): up to {} faster; about {} workers keep up with that step",
                ms(m.best_step_s()),
                ms(m.train_s + m.fetch_s),
                m.cores_free,
                ms(m.cpu_s),
                gain(m.predicted_gain()),
                m.workers_needed()
            )
        });
    }
    if let Some(c) = e.cpu {
        let machine = match (c.machine, c.cores, ja) {
            (Some(b), Some(n), false) => format!(", whole machine {b:.2} of {n}"),
            (Some(b), Some(n), true) => format!("、マシン全体 {b:.2} / {n}"),
            _ => String::new(),
        };
        let others = match (c.others, ja) {
            (Some(o), false) => format!(" (other processes {o:.2})"),
            (Some(o), true) => format!("(他のプロセス {o:.2})"),
            _ => String::new(),
        };
        out.push(if ja {
            format!(
                "- CPU 使用(計測ステップ中の平均コア数): ローダー {:.2}、学習プロセス {:.2}{machine}{others}",
                c.loader, c.training
            )
        } else {
            format!(
                "- CPU busy (cores, over the timed steps): loader {:.2}, training process {:.2}{machine}{others}",
                c.loader, c.training
            )
        });
    }
    if let Some(w) = e.wait {
        out.push(match (w.steady(), ja) {
            (true, false) => format!(
                "- the wait comes steadily: the median step waits {}, the mean {} (the workers' rate is the limit; a deeper prefetch does not raise it)",
                ms(w.median_s),
                ms(w.mean_s)
            ),
            (true, true) => format!(
                "- 待ちは一様: ステップの待ちの中央値 {}、平均 {}(ワーカーの速さが上限で、先読みを深くしても上がらない)",
                ms(w.median_s),
                ms(w.mean_s)
            ),
            (false, false) => format!(
                "- the wait comes as stalls: the median step waits {}, the mean {} (most steps wait little, a few long: a deeper prefetch absorbs them)",
                ms(w.median_s),
                ms(w.mean_s)
            ),
            (false, true) => format!(
                "- 待ちは時々の停滞: ステップの待ちの中央値 {}、平均 {}(ほとんど待たず、まれに長く待つ。深い先読みで吸収できる)",
                ms(w.median_s),
                ms(w.mean_s)
            ),
        });
    }
    if let Some(n) = e.epoch_starts {
        out.push(if ja {
            format!("- 計測ステップ中に始まったエポック: {n}(そのたびに persistent でないワーカーが起動し直す)")
        } else {
            format!("- epochs begun during the timed steps: {n} (each starts non-persistent workers again)")
        });
    }
    if e.model.is_none() && e.cpu.is_none() {
        out.push(if ja {
            "- (このベンチはローダーの内訳を報告しない: samples/sec と上記だけ)".into()
        } else {
            "- (this bench reports no loader figures: only samples/sec and the above)".into()
        });
    }
    out.push(if ja {
        "- 許されたノブごとに、これらの数字から見込める上限:".into()
    } else {
        "- what each allowed knob could give at most, by these figures:".into()
    });
    let allowed: Vec<LoaderKnob> = LoaderKnob::ALL
        .into_iter()
        .filter(|k| f.knobs.iter().any(|a| k.is(a)))
        .collect();
    for &k in &allowed {
        let o = e.outlook(k);
        out.push(format!(
            "  - `{k}`: {}",
            outlook_text(&o.outlook, o.workers_needed, k, ja)
        ));
    }
    if allowed.is_empty() {
        out.push(if ja {
            "  - (なし)".into()
        } else {
            "  - (none)".into()
        });
    }
    out.join("\n")
}

fn outlook_text(o: &Outlook, needed: Option<u64>, knob: LoaderKnob, ja: bool) -> String {
    match (o, ja) {
        (Outlook::AtMost(g), false) => {
            let tail = match (knob, needed) {
                (LoaderKnob::NumWorkers, Some(n)) => format!(" (about {n} workers keep up)"),
                (LoaderKnob::Preprocessing, _) => " (if loading cost nothing: the wait gone, the ceiling the limit)".into(),
                _ => String::new(),
            };
            format!("up to {}{tail}", gain(*g))
        }
        (Outlook::AtMost(g), true) => {
            let tail = match (knob, needed) {
                (LoaderKnob::NumWorkers, Some(n)) => format!("(ワーカーおよそ {n} で追いつく)"),
                (LoaderKnob::Preprocessing, _) => "(読み込みが無料になり待ちが消えた場合。上限は天井)".into(),
                _ => String::new(),
            };
            format!("最大 {}{tail}", gain(*g))
        }
        (Outlook::Saturated(g), false) => format!(
            "little, at most {}: the CPU or the training process is the limit, not the loader's setting",
            gain(*g)
        ),
        (Outlook::Saturated(g), true) => format!(
            "ほとんどない(最大 {}): 上限は CPU か学習プロセスで、ローダーの設定ではない",
            gain(*g)
        ),
        (Outlook::NoCuda, false) => "nothing: no CUDA device, batches never cross to a device".into(),
        (Outlook::NoCuda, true) => "効果なし: CUDA デバイスがなく、バッチはデバイスへ送られない".into(),
        (Outlook::NeedsWorkers, false) => "nothing yet: it acts on workers, and there are none".into(),
        (Outlook::NeedsWorkers, true) => "まだ効果なし: ワーカーに作用するが、ワーカーがない".into(),
        (Outlook::NoEpochSeen, false) => "cannot show: no epoch began during the measurement".into(),
        (Outlook::NoEpochSeen, true) => "計測では差が出ない: 計測中にエポックが始まっていない".into(),
        (Outlook::SteadyWait, false) => "little: every step waits alike, so a deeper queue does not raise the workers' rate".into(),
        (Outlook::SteadyWait, true) => "ほとんどない: どのステップも同じだけ待つので、深い先読みでもワーカーの速さは上がらない".into(),
        (Outlook::ShortEpochs, false) => "little: epochs are so short that every batch is requested at their start already".into(),
        (Outlook::ShortEpochs, true) => "ほとんどない: エポックが短く、全バッチがエポックの始めに要求済み".into(),
        (Outlook::EpochCovered(b), false) => format!(
            "none: an epoch holds {b} batches and there are as many workers already; one more would have none to fetch"
        ),
        (Outlook::EpochCovered(b), true) => format!(
            "効果なし: 1 エポックは {b} バッチで、ワーカーはすでにその数だけある。増やしても取りに行くバッチがない"
        ),
        (Outlook::WindowCovered(s), false) => format!(
            "cannot show: no epoch start among the {s} timed steps, and the workers' first batches already cover them; more workers would have theirs ready before the timed steps begin (more timed steps, [bench] steps, would measure further)"
        ),
        (Outlook::WindowCovered(s), true) => format!(
            "計測では差が出ない: 計測する {s} ステップにエポックの始まりがなく、ワーカーの最初のバッチだけでそれを賄える。増やしたワーカーのバッチは計測の前に用意済みになる（[bench] steps を増やせばさらに計測できる）"
        ),
        (Outlook::AlreadySet, false) => "already set".into(),
        (Outlook::AlreadySet, true) => "設定済み".into(),
        (Outlook::Unknown, false) => "unknown: the figures are missing".into(),
        (Outlook::Unknown, true) => "不明: 数字がない".into(),
    }
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
    use crate::turn::AgentInfo;

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
            confirmation: None,
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
            knob_sites: &[],
            measured_site: None,
            loader_settings: vec![
                ("num_workers".into(), "2".into()),
                ("pin_memory".into(), "False".into()),
            ],
            history: hist,
            table,
            evidence: None,
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
        for (lang, tpl) in [
            ("en", crate::agent::assets::PROMPT_EN),
            ("ja", crate::agent::assets::PROMPT_JA),
        ] {
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

    /// The incumbent's figures: 2 workers, per step 30 ms of data_wait and
    /// 5 ms of training over 100 steps, 2 ms of loading CPU and 5.5 of
    /// training CPU, on 2 cores, a few stalls, 3 epochs begun.
    fn evidence() -> Evidence {
        let mut m = crate::bench::Measurement {
            samples_per_sec: 900.0,
            data_wait_share: Some(30.0 / 35.0),
            cpu_count: Some(2),
            device: Some("cpu".into()),
            steps: Some(100),
            wall_s: Some(3.5),
            data_wait_s: Some(3.0),
            train_step_s: Some(0.5),
            loader_cpu_s: Some(0.2),
            main_cpu_s: Some(0.55),
            machine_busy_s: Some(1.45),
            data_wait_step_median_s: Some(0.004),
            epoch_starts_timed: Some(3),
            ..Default::default()
        };
        m.loader.insert("num_workers".into(), 2.into());
        Evidence::of(&m, 812.345, Some(3600.0))
    }

    #[test]
    fn workers_the_timed_steps_cannot_tell_apart_are_named_in_both_languages() {
        let o = Outlook::WindowCovered(40);
        let en = outlook_text(&o, None, LoaderKnob::NumWorkers, false);
        assert!(
            en.contains("no epoch start among the 40 timed steps"),
            "{en}"
        );
        assert!(en.contains("[bench] steps"), "{en}");
        let ja = outlook_text(&o, None, LoaderKnob::NumWorkers, true);
        assert!(ja.contains("計測する 40 ステップ"), "{ja}");
    }

    #[test]
    fn rendered_prompts_snapshot() {
        let (sites, hist, knobs) = setup();
        let editable = vec!["train.py".to_string()];
        let file = TableDelivery::File(PathBuf::from("/runs/r1/turns/03/profile.txt"));
        let e = evidence();
        let mut en = facts("en", &sites, &hist, &knobs, &TableDelivery::Stdin);
        en.editable = &editable;
        en.evidence = Some(&e);
        insta::assert_snapshot!("prompt_en", render(crate::agent::assets::PROMPT_EN, &en));
        let mut ja = facts("ja", &sites, &hist[..1], &knobs, &file);
        ja.editable = &editable;
        ja.evidence = Some(&e);
        insta::assert_snapshot!("prompt_ja", render(crate::agent::assets::PROMPT_JA, &ja));
    }

    #[test]
    fn the_diagnosis_carries_the_ceiling_the_per_batch_figures_and_each_knobs_bound() {
        let (sites, hist, _) = setup();
        let knobs: Vec<String> = LoaderKnob::ALL.iter().map(|k| k.to_string()).collect();
        let e = evidence();
        for (lang, tpl) in [
            ("en", crate::agent::assets::PROMPT_EN),
            ("ja", crate::agent::assets::PROMPT_JA),
        ] {
            let mut f = facts(lang, &sites, &hist, &knobs, &TableDelivery::Stdin);
            f.evidence = Some(&e);
            let out = render(tpl, &f);
            // Ceiling 3600, incumbent 812.3: 22.6% of it, at most ×4.43.
            for want in [
                "3600.0 samples/sec",
                "22.6%",
                "×4.43",
                // A worker takes 2 × 35 ms per batch; the step could take 5 ms.
                "70.0 ms",
                "5.0 ms",
                // CPU busy: 0.2 / 3.5 s, 0.55 / 3.5 s, 1.45 / 3.5 s of 2 cores.
                "0.06",
                "0.16",
                "0.41",
                // The median step waits 4 ms, the mean 30 ms.
                "4.0 ms",
                "30.0 ms",
            ] {
                assert!(out.contains(want), "{lang}: {want} missing in\n{out}");
            }
            for k in LoaderKnob::ALL {
                assert!(
                    out.matches(&format!("`{k}`")).count() >= 2,
                    "{lang}: no bound for {k}\n{out}"
                );
            }
        }
        // English words for what cannot help, and for the stall shape.
        let mut f = facts("en", &sites, &hist, &knobs, &TableDelivery::Stdin);
        f.evidence = Some(&e);
        let out = render(crate::agent::assets::PROMPT_EN, &f);
        assert!(
            out.contains("`pin_memory`: nothing: no CUDA device"),
            "{out}"
        );
        assert!(out.contains("the wait comes as stalls"), "{out}");
        assert!(out.contains("about 18 workers keep up"), "{out}");
        // Without a measurement the section says so rather than inventing figures.
        f.evidence = None;
        assert!(render("{{diagnosis}}", &f).contains("no measurement yet"));
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
        assert_eq!(t, crate::agent::assets::PROMPT_JA);
        assert!(src.contains("built-in"));
        std::fs::create_dir_all(d.path().join("prompts")).unwrap();
        std::fs::write(d.path().join("prompts/turn.en.md"), "mine {{turn}}").unwrap();
        let (t, src) = load_template(d.path(), "prompts/turn.{language}.md", "en");
        assert_eq!(t, "mine {{turn}}");
        assert!(src.ends_with("prompts/turn.en.md"));
    }

    #[test]
    fn call_sites_show_where_each_knob_is_defined() {
        let src = "import argparse\nfrom torch.utils.data import DataLoader\nfrom transformers import TrainingArguments\np = argparse.ArgumentParser()\np.add_argument('--workers', type=int, default=0)\nargs = p.parse_args()\nloader = DataLoader(ds, batch_size=8, num_workers=args.workers, pin_memory=True)\nta = TrainingArguments('out')\n";
        let sites = crate::edit::scan_source("train.py", src).unwrap();
        let read = |_: &str| None;
        let knob_sites = crate::edit::knob_sites("train.py", src, &read).unwrap();
        let (_, hist, knobs) = setup();
        let mut f = facts("en", &sites, &hist, &knobs, &TableDelivery::Stdin);
        f.knob_sites = &knob_sites;
        let text = call_sites(&f, false);
        assert!(text.contains("  - train.py line 7: DataLoader(1 positional, batch_size=8, num_workers=args.workers, pin_memory=True)\n      num_workers = args.workers → --workers default=0 (train.py:5)\n"), "{text}");
        // A literal in the call is not repeated.
        assert!(!text.contains("pin_memory = True"), "{text}");
        assert!(text.contains("  - train.py line 8: TrainingArguments(…) — the DataLoader is built inside transformers"), "{text}");
        assert!(
            text.contains(
                "      num_workers not set: the default; set dataloader_num_workers= at train.py:8"
            ),
            "{text}"
        );
        assert!(!text.contains("tuneloop measures"), "{text}");
        // Command mode: the loader the measurement timed is marked.
        f.measured_site = Some("train.py:7");
        let text = call_sites(&f, false);
        assert!(
            text.contains("pin_memory=True)  ← the training loader tuneloop measures\n"),
            "{text}"
        );
        f.measured_site = Some("other.py:7");
        assert!(!call_sites(&f, false).contains("tuneloop measures"));
    }

    #[test]
    fn a_spread_dict_shows_where_its_knobs_are_set() {
        let src = "from torch.utils.data import DataLoader\n\ndef main(use_cuda):\n    kw = {'batch_size': 64}\n    if use_cuda:\n        kw.update({'num_workers': 1})\n    loader = DataLoader(ds, **kw)\n";
        let sites = crate::edit::scan_source("train.py", src).unwrap();
        let read = |_: &str| None;
        let knob_sites = crate::edit::knob_sites("train.py", src, &read).unwrap();
        let (_, hist, knobs) = setup();
        let mut f = facts("en", &sites, &hist, &knobs, &TableDelivery::Stdin);
        f.knob_sites = &knob_sites;
        let text = call_sites(&f, false);
        assert!(text.contains("  - train.py line 7: DataLoader(1 positional, **…)\n      num_workers not set: the default; set \"num_workers\" in kw (train.py:4), overridden to 1 under `if use_cuda` by `kw.update(…)` (train.py:6)\n      pin_memory not set: the default; set \"pin_memory\" in kw (train.py:4)\n"), "{text}");
    }
}

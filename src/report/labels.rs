//! The words of the reports, in English and Japanese, in one table so that
//! both languages always have the same set of labels. Markdown, HTML and the
//! plot all read from here.

use super::model::{Decision, RunReport};

/// Every user-visible label of a report, in one language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Labels {
    /// `lang` attribute of the HTML page.
    pub lang: &'static str,
    pub title: &'static str,
    pub project: &'static str,
    pub agent: &'static str,
    pub started: &'static str,
    pub throughput: &'static str,
    pub baseline: &'static str,
    pub final_: &'static str,
    pub speedup: &'static str,
    /// The ratio's confidence interval. No level here: the policy sets it
    /// (`decision.confidence`), and each row's reason states it.
    pub ci: &'static str,
    pub ceiling: &'static str,
    pub measured_loader: &'static str,
    pub knob_sources: &'static str,
    /// The final throughput as a share of the ceiling; `{pct}` is replaced
    /// by the percentage, e.g. "final is 81.7% of it".
    pub of_ceiling: &'static str,
    /// The data path's limit measured by `tuneloop probe` (feature `libtorch`).
    pub data_path: &'static str,
    /// What the cores the job may use can feed: usable cores / CPU per sample.
    pub cpu_limit: &'static str,
    /// How the CPU limit was reached; `{cores}` and `{cost}` are replaced.
    pub cpu_limit_how: &'static str,
    /// Cores other processes kept busy; `{n}` is replaced.
    pub others_busy: &'static str,
    /// The lower of the ceiling and the CPU limit.
    pub binding_limit: &'static str,
    pub binding_step_alone: &'static str,
    pub binding_cpu: &'static str,
    pub data_wait_share: &'static str,
    pub agent_cost: &'static str,
    pub agent_time: &'static str,
    pub bench_runs: &'static str,
    pub wall_time: &'static str,
    pub stop_reason: &'static str,
    pub interrupted: &'static str,
    pub interrupted_note: &'static str,
    pub turns: &'static str,
    pub plot: &'static str,
    // Table columns.
    pub col_turn: &'static str,
    pub col_change: &'static str,
    pub col_before: &'static str,
    pub col_after: &'static str,
    pub col_ratio: &'static str,
    pub col_ci: &'static str,
    pub col_runs: &'static str,
    pub col_decision: &'static str,
    pub col_reason: &'static str,
    pub no_turns: &'static str,
    // Decisions.
    pub kept: &'static str,
    pub kept_cheaper: &'static str,
    pub reverted: &'static str,
    pub rejected: &'static str,
    pub failed: &'static str,
    pub no_change: &'static str,
    // Kept changes.
    pub kept_changes: &'static str,
    pub none: &'static str,
    // Plot.
    pub plot_x: &'static str,
    pub plot_y: &'static str,
    /// The y axis when it is logarithmic (a run spanning a wide range).
    pub plot_y_log: &'static str,
    pub plot_samples: &'static str,
    pub plot_incumbent: &'static str,
    pub plot_spread: &'static str,
    pub plot_rejected_failed: &'static str,
    pub plot_baseline: &'static str,
    pub plot_ceiling: &'static str,
    pub plot_cpu_limit: &'static str,
}

impl Labels {
    /// The label of a decision in this language.
    pub fn decision(&self, d: Decision) -> &'static str {
        match d {
            Decision::Kept => self.kept,
            Decision::KeptCheaper => self.kept_cheaper,
            Decision::Reverted => self.reverted,
            Decision::Rejected => self.rejected,
            Decision::Failed => self.failed,
            Decision::NoChange => self.no_change,
        }
    }
}

pub const EN: Labels = Labels {
    lang: "en",
    title: "tuneloop report",
    project: "Project",
    agent: "Agent",
    started: "Started",
    throughput: "Throughput",
    baseline: "baseline",
    final_: "final",
    speedup: "Speedup",
    ci: "CI",
    ceiling: "Ceiling",
    measured_loader: "Measured loader",
    knob_sources: "Its knobs are set at",
    of_ceiling: "final is {pct} of it",
    data_path: "Data-path limit",
    cpu_limit: "CPU limit",
    cpu_limit_how: "{cores} ÷ {cost} of CPU per sample",
    others_busy: "other processes kept {n} cores busy",
    binding_limit: "Binding limit",
    binding_step_alone: "the step alone (ceiling)",
    binding_cpu: "what the cores can feed (CPU limit)",
    data_wait_share: "data_wait share",
    agent_cost: "Agent cost",
    agent_time: "Agent time",
    bench_runs: "Bench runs",
    wall_time: "Wall time",
    stop_reason: "Stop reason",
    interrupted: "Interrupted",
    interrupted_note: "the run was interrupted; this report covers the turns finished so far",
    turns: "Turns",
    plot: "Throughput by turn",
    col_turn: "turn",
    col_change: "change",
    col_before: "before (samples/sec)",
    col_after: "after",
    col_ratio: "ratio",
    col_ci: "CI",
    col_runs: "runs",
    col_decision: "decision",
    col_reason: "reason",
    no_turns: "no turns",
    kept: "kept",
    kept_cheaper: "kept (cheaper, within min_gain)",
    reverted: "reverted",
    rejected: "rejected",
    failed: "failed",
    no_change: "no change",
    kept_changes: "Kept changes",
    none: "none",
    plot_x: "turn (0 = baseline)",
    plot_y: "samples/sec",
    plot_y_log: "samples/sec (log scale)",
    plot_samples: "measurements",
    plot_incumbent: "incumbent",
    plot_spread: "candidate min–max",
    plot_rejected_failed: "rejected / failed",
    plot_baseline: "baseline",
    plot_ceiling: "ceiling",
    plot_cpu_limit: "CPU limit",
};

pub const JA: Labels = Labels {
    lang: "ja",
    title: "tuneloop レポート",
    project: "プロジェクト",
    agent: "エージェント",
    started: "開始",
    throughput: "スループット",
    baseline: "ベースライン",
    final_: "最終",
    speedup: "高速化",
    ci: "信頼区間",
    ceiling: "上限 (ceiling)",
    measured_loader: "計測したローダー",
    knob_sources: "設定値の定義場所",
    of_ceiling: "最終は上限の {pct}",
    data_path: "データ経路の上限 (data-path limit)",
    cpu_limit: "CPU の上限 (CPU limit)",
    cpu_limit_how: "{cores} ÷ 1 サンプルあたりの CPU 時間 {cost}",
    others_busy: "他のプロセスが {n} コアを使用",
    binding_limit: "律速する上限 (binding limit)",
    binding_step_alone: "ステップ単体 (上限)",
    binding_cpu: "コアが供給できる量 (CPU の上限)",
    data_wait_share: "data_wait の割合",
    agent_cost: "エージェント費用",
    agent_time: "エージェント時間",
    bench_runs: "ベンチ実行回数",
    wall_time: "所要時間",
    stop_reason: "停止理由",
    interrupted: "中断",
    interrupted_note: "実行は中断されました。このレポートは完了したターンまでを示します",
    turns: "ターン",
    plot: "ターンごとのスループット",
    col_turn: "ターン",
    col_change: "変更",
    col_before: "変更前 (samples/sec)",
    col_after: "変更後",
    col_ratio: "比",
    col_ci: "信頼区間",
    col_runs: "実行回数",
    col_decision: "判定",
    col_reason: "理由",
    no_turns: "ターンなし",
    kept: "採用",
    kept_cheaper: "採用 (より安価、min_gain 以内)",
    reverted: "差し戻し",
    rejected: "却下",
    failed: "失敗",
    no_change: "変更なし",
    kept_changes: "採用した変更",
    none: "なし",
    plot_x: "ターン (0 = ベースライン)",
    plot_y: "samples/sec",
    plot_y_log: "samples/sec (対数目盛)",
    plot_samples: "測定値",
    plot_incumbent: "現行ベスト",
    plot_spread: "候補の最小–最大",
    plot_rejected_failed: "却下 / 失敗",
    plot_baseline: "ベースライン",
    plot_ceiling: "上限",
    plot_cpu_limit: "CPU の上限",
};

/// Labels for a language code: "ja" (also "ja-JP", "ja_JP") → Japanese,
/// anything else → English.
pub fn labels_for(language: &str) -> &'static Labels {
    let l = language.trim().to_ascii_lowercase();
    if l == "ja" || l.starts_with("ja-") || l.starts_with("ja_") {
        &JA
    } else {
        &EN
    }
}

/// Labels for a report's `language`.
pub fn labels(r: &RunReport) -> &'static Labels {
    labels_for(&r.language)
}

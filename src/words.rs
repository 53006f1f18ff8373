//! Every user-visible word of tuneloop, English and Japanese, in one table:
//! the reports' labels ([`Labels`], read by `report`), the live terminal
//! view's ([`ViewWords`], `cli::view`) and those of `runs` and `show`
//! ([`ReviewWords`], `review`). [`for_language`] is the one place a
//! language code is mapped to a language. Adding a word means adding it to
//! both languages here; the compiler checks that none is missing.

/// The words of one language, for every part of tuneloop that speaks.
pub struct Words {
    pub report: Labels,
    pub view: ViewWords,
    pub review: ReviewWords,
}

pub const ENGLISH: Words = Words {
    report: EN,
    view: VIEW_EN,
    review: REVIEW_EN,
};

pub const JAPANESE: Words = Words {
    report: JA,
    view: VIEW_JA,
    review: REVIEW_JA,
};

/// The words for a language code: "ja" (also "ja-JP", "ja_JP") → Japanese,
/// anything else → English.
pub fn for_language(language: &str) -> &'static Words {
    let l = language.trim().to_ascii_lowercase();
    if l == "ja" || l.starts_with("ja-") || l.starts_with("ja_") {
        &JAPANESE
    } else {
        &ENGLISH
    }
}

// ------------------------------------------------------------- reports

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
    /// The headline interval's line (when it stayed wide or pairs were left out).
    pub interval: &'static str,
    /// The numerics guard's yardstick line; `{y}` and `{k}` are replaced.
    pub numerics_yardstick: &'static str,
    pub numerics_yardstick_text: &'static str,
    pub ceiling: &'static str,
    /// What the cores the job may use can feed: usable cores / CPU per sample.
    pub cpu_limit: &'static str,
    /// How the CPU limit was reached; `{cores}` and `{cost}` are replaced.
    pub cpu_limit_how: &'static str,
    /// Cores other processes kept busy; `{n}` is replaced.
    pub others_busy: &'static str,
    /// The lowest of the ceiling, the CPU limit and the CPU limit with the epochs' restarts.
    pub binding_limit: &'static str,
    pub binding_step_alone: &'static str,
    /// The step alone with the training process's receiving of each batch.
    pub step_receive_limit: &'static str,
    /// How: `{step}` (the step alone, samples/sec) and `{cost}` (receiving, a sample) are replaced.
    pub step_receive_how: &'static str,
    /// The step's own speed beside the workers; `{sps}` is replaced.
    pub step_beside: &'static str,
    pub binding_step_receive: &'static str,
    pub binding_cpu: &'static str,
    /// The CPU limit with each epoch start's idle cores counted.
    pub epoch_limit: &'static str,
    /// How: `{epoch}` (batches an epoch, or empty), `{fill}` (ms to the first
    /// batch) and `{idle}` (cores idle meanwhile) are replaced.
    pub epoch_limit_how: &'static str,
    pub binding_epoch: &'static str,
    pub kept_cheaper: &'static str,
    pub plot_cpu_limit: &'static str,
    pub plot_epoch_limit: &'static str,
    pub measured_loader: &'static str,
    pub timed_steps: &'static str,
    /// Each run timed one whole epoch; `{steps}` and `{configured}` are replaced.
    pub timed_steps_epoch: &'static str,
    pub knob_sources: &'static str,
    pub not_editable: &'static str,
    /// What the turns compare of the first batches (see `judge::DataCheckPlan`).
    pub data_check: &'static str,
    /// `{parts}` compared on a loader-setting turn.
    pub data_check_loader: &'static str,
    /// `{parts}` compared on any other turn.
    pub data_check_other: &'static str,
    /// `{parts}` not compared: they differ between the baseline's `{n}` runs.
    pub data_check_unstable: &'static str,
    /// `{parts}` not recorded (no sampler indices).
    pub data_check_unrecorded: &'static str,
    /// Nothing reproduces: nothing compared.
    pub data_check_nothing: &'static str,
    /// Command mode: the command to run from now on, when a kept change is
    /// in its arguments.
    pub run_from_now_on: &'static str,
    /// Command mode: the user's command timed whole, before and after.
    pub whole_command: &'static str,
    /// Other processes' load while measuring, when some state ran busy.
    pub machine_load: &'static str,
    /// The final throughput as a share of the ceiling; `{pct}` is replaced
    /// by the percentage, e.g. "final is 81.7% of it".
    pub of_ceiling: &'static str,
    /// Added when the final is well past a limit measured at the baseline.
    pub past_limit: &'static str,
    /// Added when the final is well past a limit figured from its own runs'
    /// CPU (what the cores can feed): that figure, not a baseline's, is low.
    pub past_own_limit: &'static str,
    /// The data path's limit measured by `tuneloop probe` (feature `libtorch`).
    pub data_path: &'static str,
    pub data_wait_share: &'static str,
    pub agent_cost: &'static str,
    pub agent_time: &'static str,
    pub bench_runs: &'static str,
    pub wall_time: &'static str,
    /// How much of the wall time the timed steps took.
    pub measuring: &'static str,
    /// `{measured}`, `{wall}`, `{pct}`, `{runs}` are replaced.
    pub measuring_line: &'static str,
    /// The same runs' time around their windows: `{start}`, `{build}`,
    /// `{warmup}`, `{after}`, `{other}` are replaced.
    pub around_line: &'static str,
    /// Command mode's whole-command rounds: `{whole}` and `{pct}` (the
    /// timed steps and these together) are replaced.
    pub whole_line: &'static str,
    pub stop_reason: &'static str,
    pub profiler: &'static str,
    /// The enabled compute knobs the run ended without trying, with why.
    pub compute_not_tried: &'static str,
    /// The baseline has no profiler table; `{reason}` is replaced.
    pub profile_unavailable: &'static str,
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
    // Each state's memory and CPU.
    /// The headline's baseline → final line of workers, memory and CPU.
    pub memory_cpu: &'static str,
    /// The section with each state's memory and CPU.
    pub costs: &'static str,
    /// What the section's figures are (one sentence under its title).
    pub costs_note: &'static str,
    pub col_state: &'static str,
    pub col_sps: &'static str,
    pub col_workers: &'static str,
    pub col_workers_memory: &'static str,
    pub col_main_memory: &'static str,
    pub col_cpu: &'static str,
    /// A turn's candidate as a state; `{n}` is replaced by the turn.
    pub state_turn: &'static str,
    /// The unit of the CPU figures.
    pub cores_unit: &'static str,
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
    interval: "Interval",
    numerics_yardstick: "Numerics yardstick",
    numerics_yardstick_text: "{y} (the baseline run once more); a compute change's losses after step 1 may differ by up to {k}× that",
    ceiling: "Ceiling",
    cpu_limit: "CPU limit",
    cpu_limit_how: "{cores} ÷ {cost} of CPU per sample",
    others_busy: "other processes kept {n} cores busy",
    binding_limit: "Binding limit",
    binding_step_alone: "the step alone (ceiling)",
    step_receive_limit: "Step with receiving batches",
    step_receive_how: "the step alone {step} samples/sec, plus {cost} a sample in the training process receiving each batch from the workers",
    step_beside: "beside the workers the step itself ran at {sps} samples/sec: they share its cores",
    binding_step_receive: "the step alone with receiving its batches",
    binding_cpu: "what the cores can feed (CPU limit)",
    epoch_limit: "With the epochs' restarts",
    epoch_limit_how: "each epoch{epoch} starts empty: {fill} ms to its first batch with {idle} cores idle meanwhile",
    binding_epoch: "what the cores can feed with each epoch's restart",
    kept_cheaper: "kept (cheaper, within min_gain)",
    plot_cpu_limit: "CPU limit",
    plot_epoch_limit: "CPU limit with epoch restarts",
    measured_loader: "Measured loader",
    timed_steps: "Timed steps",
    timed_steps_epoch: "{steps} a run, one whole epoch with its restart: [bench] steps ({configured}) held no epoch start",
    knob_sources: "Its knobs are set at",
    not_editable: "Not editable while data_wait stayed large",
    data_check: "Data check",
    data_check_loader: "{parts} compared on a loader-setting turn (bytes not compared: the workers' random seeds change with their count, by design, for augmentation in workers)",
    data_check_other: "{parts} on any other change",
    data_check_unstable: "{parts} not compared: they differ between the baseline's own {n} runs",
    data_check_unrecorded: "{parts} not recorded (no sampler indices)",
    data_check_nothing: "nothing compared",
    run_from_now_on: "Run from now on",
    whole_command: "Your command, run whole",
    machine_load: "Machine load",
    of_ceiling: "final is {pct} of it",
    past_limit: "measured at the baseline, and the final is past it: the machine was busier then, or the step itself got faster",
    past_own_limit: "figured from the final's own runs, which went past it: their CPU over the timed window overstates what a sample costs, so read this limit as a floor",
    data_path: "Data-path limit",
    data_wait_share: "data_wait share",
    agent_cost: "Agent cost",
    agent_time: "Agent time",
    bench_runs: "Bench runs",
    wall_time: "Wall time",
    measuring: "Measuring",
    measuring_line: "{measured} of {wall} ({pct}): the timed steps of {runs} throughput runs (the rest is each process's start, imports and warm-up, the profiler's steps, the agent)",
    around_line: "around those windows: start and import torch {start}, the project's build() {build}, warm-up {warmup}, after the window {after}, the rest {other}",
    whole_line: "your command timed whole (its rounds before and after) {whole} more, {pct} of the wall time with the timed steps",
    stop_reason: "Stop reason",
    profiler: "Profiler",
    compute_not_tried: "Compute changes not tried",
    profile_unavailable: "profiler table unavailable: {reason}; the baseline was measured without it",
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
    memory_cpu: "Memory and CPU",
    costs: "Memory and CPU by state",
    costs_note: "Each state's median run. Workers' memory: PSS (shared pages split among the processes that map them) where readable, else RSS. CPU: the loading's and the training process's CPU seconds over the timed steps' wall time, in cores.",
    col_state: "state",
    col_sps: "samples/sec",
    col_workers: "workers",
    col_workers_memory: "workers' memory",
    col_main_memory: "training process (RSS)",
    col_cpu: "CPU",
    state_turn: "turn {n}",
    cores_unit: "cores",
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
    interval: "区間について",
    numerics_yardstick: "数値の物差し",
    numerics_yardstick_text: "{y}（ベースラインをもう 1 回実行）。計算側の変更の 2 ステップ目以降の損失は、その {k} 倍まで許容",
    ceiling: "上限 (ceiling)",
    cpu_limit: "CPU の上限 (CPU limit)",
    cpu_limit_how: "{cores} ÷ 1 サンプルあたりの CPU 時間 {cost}",
    others_busy: "他のプロセスが {n} コアを使用",
    binding_limit: "律速する上限 (binding limit)",
    binding_step_alone: "ステップ単体 (上限)",
    step_receive_limit: "バッチ受け取り込みのステップ",
    step_receive_how: "ステップ単体 {step} サンプル/秒 + 学習プロセスがワーカーから各バッチを受け取る時間 (1 サンプルあたり {cost})",
    step_beside: "ワーカーと同じコアを使うため、ワーカーと並んだステップ自体は {sps} サンプル/秒",
    binding_step_receive: "ステップ単体 + バッチ受け取り",
    binding_cpu: "コアが供給できる量 (CPU の上限)",
    epoch_limit: "エポック再開込みの上限",
    epoch_limit_how: "各エポック{epoch}は空のパイプラインから始まる: 最初のバッチまで {fill} ms、その間 {idle} コアが空き",
    binding_epoch: "エポック再開込みでコアが供給できる量",
    kept_cheaper: "採用 (より安価、min_gain 以内)",
    plot_cpu_limit: "CPU の上限",
    plot_epoch_limit: "エポック再開込みの CPU 上限",
    measured_loader: "計測したローダー",
    timed_steps: "計測ステップ",
    timed_steps_epoch: "各実行 {steps}（ワーカーの再起動を含む 1 エポック全体）: [bench] steps（{configured}）にはエポックの始まりが入っていなかったため",
    knob_sources: "設定値の定義場所",
    not_editable: "data_wait が大きいまま変更できなかった設定",
    data_check: "データの確認",
    data_check_loader: "ローダー設定のターンでは {parts} を比較（bytes は比較しない: ワーカー内の拡張はワーカー数でシードが変わるため、設計上異なる）",
    data_check_other: "その他の変更では {parts}",
    data_check_unstable: "{parts} は比較しない: ベースライン自身の {n} 回の実行で異なるため",
    data_check_unrecorded: "{parts} は記録なし（サンプラーのインデックスなし）",
    data_check_nothing: "比較なし",
    run_from_now_on: "今後の実行コマンド",
    whole_command: "コマンド全体の実行時間",
    machine_load: "マシンの負荷",
    of_ceiling: "最終は上限の {pct}",
    past_limit: "ベースライン時の計測値で、最終はそれを超えている（当時マシンが混雑していたか、ステップ自体が速くなった）",
    past_own_limit: "最終自身の実行から求めた値だが、最終はそれを超えている（計測窓の CPU 時間が 1 サンプルのコストを多めに見積もっている。この上限は下限として読むこと）",
    data_path: "データ経路の上限 (data-path limit)",
    data_wait_share: "data_wait の割合",
    agent_cost: "エージェント費用",
    agent_time: "エージェント時間",
    bench_runs: "ベンチ実行回数",
    wall_time: "所要時間",
    measuring: "計測",
    measuring_line: "{wall} のうち {measured} ({pct}): スループット計測 {runs} 回の計測区間（残りは各プロセスの起動・import・ウォームアップ、プロファイラの計測ステップ、エージェント）",
    around_line: "計測区間の前後: 起動と import torch {start}、プロジェクトの build() {build}、ウォームアップ {warmup}、計測後 {after}、その他 {other}",
    whole_line: "コマンド全体の計時（前後の各ラウンド）がさらに {whole}、計測区間と合わせて所要時間の {pct}",
    stop_reason: "停止理由",
    profiler: "プロファイラ",
    compute_not_tried: "試さなかった計算側の変更",
    profile_unavailable: "profiler table unavailable（プロファイラの表なし）: {reason}。ベースラインは表なしで計測しました",
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
    memory_cpu: "メモリと CPU",
    costs: "状態ごとのメモリと CPU",
    costs_note: "各状態の中央値の実行の値。ワーカーのメモリ: 読めれば PSS (共有ページを対応付けたプロセスで按分)、読めなければ RSS。CPU: 計測区間の経過時間あたりの、ローダーと学習プロセスの CPU 秒 (コア数)。",
    col_state: "状態",
    col_sps: "samples/sec",
    col_workers: "ワーカー数",
    col_workers_memory: "ワーカーのメモリ",
    col_main_memory: "学習プロセス (RSS)",
    col_cpu: "CPU",
    state_turn: "ターン {n}",
    cores_unit: "コア",
};

// ----------------------------------------------------- the live view

/// The words of the view in one language. English wording is the plain
/// mode's contract (tests and scripts grep it): change it with care.
pub struct ViewWords {
    pub turn: &'static str,
    pub run_started: &'static str,
    pub run_resumed: &'static str,
    pub baseline_line: &'static str,
    pub cpus: &'static str,
    /// Short epochs: each run times one whole epoch ({steps}) instead of {configured}.
    pub window_widened: &'static str,
    /// The command ended before that: back to {configured}.
    pub window_narrowed: &'static str,
    /// The profiled run gave no table; `{reason}` is replaced.
    pub profile_unavailable: &'static str,
    pub low_data_wait: &'static str,
    pub incumbent: &'static str,
    /// The time-left estimate at a turn's start; `{about}` and `{most}` are
    /// minutes ("4 min").
    pub time_left: &'static str,
    pub agent_done: &'static str,
    pub agent_failed: &'static str,
    pub agent_line: &'static str,
    pub pair_of: &'static str,
    pub runs: &'static str,
    pub stopped: &'static str,
    pub final_line: &'static str,
    pub warning: &'static str,
    /// `{others}` `{cores}` `{limit}` are replaced.
    pub machine_busy: &'static str,
    /// `{secs}` is replaced.
    pub machine_quiet: &'static str,
    pub machine_still_busy: &'static str,
    /// `{k}` `{c}` `{i}` are replaced.
    pub pair_set_aside: &'static str,
    /// `{k}` `{x}` `{total}` are replaced.
    pub pairs_added: &'static str,
    pub report: &'static str,
    pub phase_baseline: &'static str,
    pub phase_agent: &'static str,
    pub phase_measuring: &'static str,
    pub phase_deciding: &'static str,
    pub phase_final: &'static str,
    pub last: &'static str,
}

// Placeholders: {id} {agent} {n} {sps} {dw} {ceil} {cpus} {dev} {pct} {list}
// {state} {secs} {cost} {summary} {k} {total} {reason} {x} {lo} {hi} {path}
// {steps} {configured}.
pub const VIEW_EN: ViewWords = ViewWords {
    turn: "turn",
    run_started: "run {id} started, agent {agent}",
    run_resumed: "run {id} resumed after {n} completed turn(s)",
    baseline_line: "baseline {sps} samples/sec, data_wait {dw}, ceiling {ceil}, {cpus}, {dev}",
    cpus: "{n} CPUs",
    window_widened: "an epoch holds {steps} batches and the {configured} timed steps held no epoch start: each run times one whole epoch ({steps} steps), its restart included",
    window_narrowed: "the command ended before {steps} steps after the warm-up: each run times the {configured} steps of [bench] steps again (with no epoch start among them, the builtin agent asks for no more workers than they can tell apart)",
    profile_unavailable: "profiler table unavailable: {reason}; the baseline goes on with its throughput runs",
    low_data_wait: "data_wait is only {pct}% of step time: DataLoader tuning cannot help much. Compute-side candidates: {list}",
    incumbent: "incumbent",
    time_left: "estimate: about {about} left, at most {most}",
    agent_done: "done",
    agent_failed: "failed",
    agent_line: "agent {state} in {secs} s{cost}: {summary}",
    pair_of: "pair {k} of {total}",
    runs: "runs",
    stopped: "stopped: {reason}",
    final_line: "final: best vs baseline ×{x} [{lo}, {hi}]",
    warning: "warning: ",
    machine_busy: "the machine is busy: other processes keep {others} of {cores} cores busy; waiting up to {limit} s for it to quiet down ([decision] busy_wait_s)",
    machine_quiet: "the machine quieted down after {secs} s; measuring goes on",
    machine_still_busy: "the machine stayed busy for {secs} s; measuring goes on, and the report names the turn",
    pair_set_aside: "pair {k} set aside: other processes took {c} cores during the candidate's run and {i} during the incumbent's; another pair is measured in its place",
    pairs_added: "other processes took cores during this comparison and it is still open after {k} pairs, its median at ×{x}: measuring up to {total} pairs ([decision] max_repeats_beside_load)",
    report: "report: {path}",
    phase_baseline: "baseline",
    phase_agent: "agent",
    phase_measuring: "measuring",
    phase_deciding: "deciding",
    phase_final: "final",
    last: "last",
};

pub const VIEW_JA: ViewWords = ViewWords {
    turn: "ターン",
    run_started: "実行 {id} を開始 (エージェント {agent})",
    run_resumed: "実行 {id} を再開 (完了済み {n} ターン)",
    baseline_line: "ベースライン {sps} samples/sec, data_wait {dw}, 上限 {ceil}, {cpus}, {dev}",
    cpus: "CPU {n} 個",
    window_widened: "1 エポックは {steps} バッチで、計測する {configured} ステップにはエポックの始まりが入っていなかったため、各実行で 1 エポック全体（{steps} ステップ、ワーカーの再起動を含む）を計測します",
    window_narrowed: "コマンドがウォームアップ後 {steps} ステップより前に終了したため、各実行で [bench] steps の {configured} ステップを計測に戻します（エポックの始まりが含まれないので、組み込みエージェントは計測で見分けられる数を超えるワーカーを求めません）",
    profile_unavailable: "profiler table unavailable（プロファイラの表なし）: {reason}。ベースラインはスループット計測を続けます",
    low_data_wait: "data_wait はステップ時間の {pct}% にすぎません: DataLoader の調整ではほとんど速くなりません。計算側の候補: {list}",
    incumbent: "現行ベスト",
    time_left: "見積もり: 残り約 {about}（長くても {most}）",
    agent_done: "完了",
    agent_failed: "失敗",
    agent_line: "エージェント{state} ({secs} 秒{cost}): {summary}",
    pair_of: "ペア {k}/{total}",
    runs: "回実行",
    stopped: "停止: {reason}",
    final_line: "最終: ベスト対ベースライン ×{x} [{lo}, {hi}]",
    warning: "警告: ",
    machine_busy: "マシンが混雑しています: 他のプロセスが {cores} コア中 {others} コアを使用中。静かになるまで最大 {limit} 秒待ちます ([decision] busy_wait_s)",
    machine_quiet: "{secs} 秒でマシンが静かになりました。計測を続けます",
    machine_still_busy: "{secs} 秒待ってもマシンは混雑したままです。計測を続け、レポートにそのターンを記します",
    pair_set_aside: "ペア {k} を除外: 他のプロセスの使用が候補の実行中 {c} コア、現行の実行中 {i} コアと大きく異なるため、代わりのペアを計測します",
    pairs_added: "この比較の間に他のプロセスがコアを使い、{k} ペアの時点でまだ判定できません (中央値 ×{x}): 最大 {total} ペアまで計測します ([decision] max_repeats_beside_load)",
    report: "レポート: {path}",
    phase_baseline: "ベースライン測定",
    phase_agent: "エージェント",
    phase_measuring: "測定中",
    phase_deciding: "判定中",
    phase_final: "最終測定",
    last: "直近",
};

// ------------------------------------------------------- runs, show

/// Words of `runs` and `show`, English and Japanese.
pub struct ReviewWords {
    pub id: &'static str,
    pub date: &'static str,
    pub project: &'static str,
    pub agent: &'static str,
    pub turns: &'static str,
    pub speedup: &'static str,
    pub state: &'static str,
    pub stop_reason: &'static str,
    pub no_runs: &'static str,
    pub run: &'static str,
    pub turn: &'static str,
    pub prompt: &'static str,
    pub summary: &'static str,
    pub failure: &'static str,
    pub tool_calls: &'static str,
    pub none: &'static str,
    pub diff: &'static str,
    pub measurements: &'static str,
    pub pair: &'static str,
    pub incumbent: &'static str,
    pub candidate: &'static str,
    pub ratio: &'static str,
    pub median: &'static str,
    pub decision: &'static str,
    pub bench_error: &'static str,
    pub exit: &'static str,
    pub cost: &'static str,
    pub time: &'static str,
    pub agent_turns: &'static str,
    pub runs: &'static str,
    pub interrupted: &'static str,
    pub agent_section: &'static str,
}

pub const REVIEW_EN: ReviewWords = ReviewWords {
    id: "ID",
    date: "DATE",
    project: "PROJECT",
    agent: "AGENT",
    turns: "TURNS",
    speedup: "SPEEDUP",
    state: "STATE",
    stop_reason: "STOP REASON",
    no_runs: "no runs yet; start one with `tuneloop start`",
    run: "run",
    turn: "turn",
    prompt: "prompt",
    summary: "summary",
    failure: "failure",
    tool_calls: "tool calls",
    none: "(none)",
    diff: "diff",
    measurements: "measurements (samples/sec)",
    pair: "pair",
    incumbent: "incumbent",
    candidate: "candidate",
    ratio: "ratio",
    median: "median",
    decision: "decision",
    bench_error: "bench error",
    exit: "exit",
    cost: "cost",
    time: "time",
    agent_turns: "turns",
    runs: "runs",
    interrupted: "interrupted",
    agent_section: "agent",
};

pub const REVIEW_JA: ReviewWords = ReviewWords {
    id: "ID",
    date: "日時",
    project: "プロジェクト",
    agent: "エージェント",
    turns: "ターン",
    speedup: "高速化",
    state: "状態",
    stop_reason: "停止理由",
    no_runs: "まだ実行がありません。`tuneloop start` で始めます",
    run: "実行",
    turn: "ターン",
    prompt: "プロンプト",
    summary: "要約",
    failure: "失敗",
    tool_calls: "ツール呼び出し",
    none: "(なし)",
    diff: "差分",
    measurements: "測定 (samples/sec)",
    pair: "ペア",
    incumbent: "現行ベスト",
    candidate: "候補",
    ratio: "比",
    median: "中央値",
    decision: "判定",
    bench_error: "ベンチのエラー",
    exit: "終了コード",
    cost: "費用",
    time: "時間",
    agent_turns: "ターン数",
    runs: "回実行",
    interrupted: "中断",
    agent_section: "エージェント",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_language_choice_for_every_part() {
        for code in ["ja", "JA", " ja-JP", "ja_JP"] {
            let w = for_language(code);
            assert_eq!(w.report.lang, "ja", "{code}");
            assert_eq!(w.view.turn, "ターン", "{code}");
            assert_eq!(w.review.turn, JAPANESE.review.turn, "{code}");
        }
        for code in ["en", "", "fr", "japanese"] {
            let w = for_language(code);
            assert_eq!(w.report.lang, "en", "{code}");
            assert_eq!(w.view.turn, "turn", "{code}");
            assert_eq!(w.review.id, "ID", "{code}");
        }
    }
}

//! The user's own command, timed whole (command mode): the baseline's files
//! against the final's, in interleaved rounds, each run as the user runs it —
//! no instrumentation on `PYTHONPATH`, no seeding, nothing ended early. The
//! measured windows say why a setting is faster; this says what the user's
//! command gains from start to end, start-up and every epoch's restart
//! included ("26.7 s → 9.1 s"). A command longer than `[bench]
//! whole_command_s` is not timed whole: the estimate from the measured rate
//! skips it before any run when it is clearly longer, else the first run past
//! the limit ends the timing.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{command, stats, tail_n, Bencher, Measurement};
use crate::process::{self, Ending, Interrupt, Spec};

/// Overrides `[bench] whole_command_s` (scripts and CI that want no whole runs: `0`).
pub const ENV_LIMIT: &str = "TUNELOOP_WHOLE_COMMAND_S";

/// Interleaved rounds (one run of each state a round).
pub const ROUNDS: usize = 3;

/// One round: the command's wall seconds with the baseline's files and with the final's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Round {
    pub baseline_s: f64,
    pub final_s: f64,
}

/// What timing the command whole found (`whole.json` in the run folder).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WholeCommand {
    /// The command with the baseline's files, and from now on, as the user types them.
    pub baseline_command: String,
    pub final_command: String,
    pub rounds: Vec<Round>,
    /// Medians over the rounds, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_s: Option<f64>,
    /// Median of the rounds' ratios (baseline seconds over final seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// Seconds before the training loader first ran, from the measured runs
    /// (the baseline's, the final's): imports and set-up, which no loader
    /// setting shortens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_s: Option<f64>,
    /// Why the command was not timed whole (too long, it failed, turned off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_timed: Option<String>,
}

impl WholeCommand {
    pub const FILE: &'static str = "whole.json";

    pub fn path(dir: &Path) -> std::path::PathBuf {
        dir.join(Self::FILE)
    }

    pub fn read(dir: &Path) -> Option<WholeCommand> {
        serde_json::from_str(&std::fs::read_to_string(Self::path(dir)).ok()?).ok()
    }

    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        crate::fsio::write_atomic(
            &Self::path(dir),
            serde_json::to_string_pretty(self)
                .expect("plain data")
                .as_bytes(),
        )
    }

    /// Medians and the paired speed-up, from the rounds.
    pub fn summarise(&mut self) {
        if self.rounds.is_empty() {
            return;
        }
        let b: Vec<f64> = self.rounds.iter().map(|r| r.baseline_s).collect();
        let f: Vec<f64> = self.rounds.iter().map(|r| r.final_s).collect();
        let ratios: Vec<f64> = self
            .rounds
            .iter()
            .filter(|r| r.final_s > 0.0)
            .map(|r| r.baseline_s / r.final_s)
            .collect();
        self.baseline_s = Some(stats::median(&b));
        self.final_s = Some(stats::median(&f));
        self.speedup = (!ratios.is_empty()).then(|| stats::median(&ratios));
    }

    /// One line for the report and the final summary (`ja`: in Japanese).
    pub fn describe(&self, ja: bool) -> String {
        let (Some(b), Some(f), Some(x)) = (self.baseline_s, self.final_s, self.speedup) else {
            let why = self.not_timed.as_deref().unwrap_or("no round finished");
            return if ja {
                format!("全体は計測せず: {why}")
            } else {
                format!("not timed whole: {why}")
            };
        };
        let n = self.rounds.len();
        let mut s = if ja {
            format!("{b:.1} 秒 → {f:.1} 秒（×{x:.2}、交互に {n} 回の中央値）")
        } else {
            format!(
                "{b:.1} s → {f:.1} s (×{x:.2}, median of {n} interleaved round{})",
                if n == 1 { "" } else { "s" }
            )
        };
        if let Some(up) = self.startup_s.filter(|u| *u > 0.0) {
            // What the loader's side gained: the time after the start-up.
            let after = (b > up && f > up).then(|| (b - up, f - up, (b - up) / (f - up)));
            if ja {
                s.push_str(&format!(
                    "。各実行のうち {up:.1} 秒は学習ローダーの開始前（import・準備）で、ローダー設定では短くならない"
                ));
                if let Some((b2, f2, x2)) = after {
                    s.push_str(&format!("。その後は {b2:.1} 秒 → {f2:.1} 秒（×{x2:.2}）"));
                }
            } else {
                s.push_str(&format!(
                    "; {up:.1} s of each run comes before the training loader starts (imports, set-up), which no loader setting shortens"
                ));
                if let Some((b2, f2, x2)) = after {
                    s.push_str(&format!(
                        ", and the time after it went {b2:.1} s → {f2:.1} s (×{x2:.2})"
                    ));
                }
            }
        }
        s
    }
}

/// The limit on one whole run: `[bench] whole_command_s`, or its override
/// from the environment ([`ENV_LIMIT`]). `None`: never time the command whole.
pub fn limit(configured_s: u64) -> Option<Duration> {
    let s = std::env::var(ENV_LIMIT)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(configured_s);
    (s > 0).then(|| Duration::from_secs(s))
}

/// About how long the whole command runs, from a measurement of it: its
/// start-up plus the training batches it runs (the length a run met, else
/// its epochs flag × an epoch's batches, else its steps flag) at the measured
/// rate. `None` when its length is unknown.
pub fn estimate_s(m: &Measurement, words: &[String], project_root: &Path) -> Option<f64> {
    let batches = m.command_batches.map(|b| b as f64).or_else(|| {
        let flag = command::length_flag(words, project_root)?;
        let value = flag.value?;
        if command::is_epoch_flag(&flag.flag) {
            Some(value * m.batches_per_epoch? as f64)
        } else {
            Some(value)
        }
    })?;
    let per_batch = m.batch_size.unwrap_or(1).max(1) as f64 / m.samples_per_sec;
    (m.samples_per_sec > 0.0).then(|| m.startup_s.unwrap_or(0.0) + batches * per_batch)
}

/// How a whole run ended when it gave no time.
#[derive(Debug)]
pub enum Failure {
    /// It ran past the limit and was ended.
    Longer(Duration),
    /// It exited with an error or a signal: the ending and its last lines.
    Failed(String),
    Interrupted,
    Spawn(String),
}

impl Failure {
    pub fn describe(&self) -> String {
        match self {
            Failure::Longer(d) => format!(
                "a run took longer than {} s ([bench] whole_command_s)",
                d.as_secs()
            ),
            Failure::Failed(why) => format!("the command failed: {why}"),
            Failure::Interrupted => "interrupted".into(),
            Failure::Spawn(e) => format!("the command could not start: {e}"),
        }
    }
}

/// The command line of one whole run: the user's command in the project
/// root, stdin closed, the project's environment first on `PATH` (as for a
/// measured run, so `python` and launchers are the same ones).
pub fn spec(b: &Bencher, words: &[String], limit: Duration) -> Spec {
    let mut env = std::collections::BTreeMap::new();
    command::project_env_first(b, &mut env);
    Spec {
        program: words[0].clone(),
        args: words[1..].to_vec(),
        cwd: b.project_root.clone(),
        env,
        // tuneloop's own variables are the measured runs', never the user's command's.
        env_remove: vec![
            "TUNELOOP_RESULT_DIR".into(),
            "TUNELOOP_STEPS".into(),
            "TUNELOOP_WARMUP".into(),
            "TUNELOOP_WINDOW_S".into(),
            "TUNELOOP_COMMAND_BATCHES".into(),
        ],
        stdin: None,
        timeout: limit,
        done_marker: None,
        end_at_done: false,
    }
}

/// Runs the command as it stands now (`[bench] run` on disk) once, to its
/// end: its wall seconds.
pub async fn time_once(
    b: &Bencher,
    limit: Duration,
    interrupt: &Interrupt,
) -> Result<f64, Failure> {
    let words = b
        .command_words()
        .ok_or_else(|| Failure::Spawn("no [bench] run".into()))?;
    let spec = spec(b, &words, limit);
    let out = process::run(&spec, interrupt, |_| {})
        .await
        .map_err(|e| Failure::Spawn(format!("{}: {e}", spec.program)))?;
    match out.ending {
        Ending::Exited(0) => Ok(out.duration.as_secs_f64()),
        Ending::Interrupted => Err(Failure::Interrupted),
        Ending::TimedOut => Err(Failure::Longer(limit)),
        e => Err(Failure::Failed(format!(
            "exit {}\n{}",
            super::ending_text(&e),
            tail_n(&out.stdout, &out.stderr, 10)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(b: f64, f: f64) -> Round {
        Round {
            baseline_s: b,
            final_s: f,
        }
    }

    #[test]
    fn the_rounds_give_medians_and_the_paired_speedup() {
        let mut w = WholeCommand {
            rounds: vec![round(26.0, 9.0), round(27.0, 9.5), round(30.0, 8.0)],
            startup_s: Some(3.4),
            ..Default::default()
        };
        w.summarise();
        assert_eq!(w.baseline_s, Some(27.0));
        assert_eq!(w.final_s, Some(9.0));
        // Paired: 2.89, 2.84, 3.75 → 2.89, not 27 / 9.
        assert!((w.speedup.unwrap() - 26.0 / 9.0).abs() < 1e-9);
        let line = w.describe(false);
        assert!(
            line.starts_with("27.0 s → 9.0 s (×2.89, median of 3 interleaved rounds)"),
            "{line}"
        );
        assert!(
            line.contains("3.4 s of each run comes before the training loader starts"),
            "{line}"
        );
        assert!(line.contains("23.6 s → 5.6 s (×4.21)"), "{line}");
    }

    #[test]
    fn a_command_not_timed_says_why() {
        let w = WholeCommand {
            not_timed: Some(Failure::Longer(Duration::from_secs(120)).describe()),
            ..Default::default()
        };
        assert_eq!(
            w.describe(false),
            "not timed whole: a run took longer than 120 s ([bench] whole_command_s)"
        );
        assert!(w.describe(true).starts_with("全体は計測せず"));
    }

    #[test]
    fn the_length_comes_from_the_epochs_flag_and_the_measured_rate() {
        let dir = tempfile::tempdir().unwrap();
        let m = Measurement {
            samples_per_sec: 320.0,
            batch_size: Some(32),
            batches_per_epoch: Some(48),
            startup_s: Some(3.0),
            ..Default::default()
        };
        let words: Vec<String> = ["python", "main.py", "--epochs", "3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // 3 × 48 batches of 32 at 320 samples/sec: 14.4 s, after 3 s of start-up.
        let est = estimate_s(&m, &words, dir.path()).unwrap();
        assert!((est - 17.4).abs() < 1e-9, "{est}");
        // A steps flag counts batches.
        let words: Vec<String> = ["python", "main.py", "--max_steps", "10"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!((estimate_s(&m, &words, dir.path()).unwrap() - 4.0).abs() < 1e-9);
        // The length a run met wins over the flags.
        let short = Measurement {
            command_batches: Some(20),
            ..m.clone()
        };
        assert!((estimate_s(&short, &words, dir.path()).unwrap() - 5.0).abs() < 1e-9);
        // No flag and no length met: unknown.
        let words: Vec<String> = ["python", "main.py"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(estimate_s(&m, &words, dir.path()), None);
    }

    #[test]
    fn zero_turns_it_off_and_the_environment_overrides() {
        // The only test touching the variable.
        std::env::remove_var(ENV_LIMIT);
        assert_eq!(limit(0), None);
        assert_eq!(limit(120), Some(Duration::from_secs(120)));
        std::env::set_var(ENV_LIMIT, "0");
        assert_eq!(limit(120), None);
        std::env::set_var(ENV_LIMIT, "30");
        assert_eq!(limit(0), Some(Duration::from_secs(30)));
        std::env::remove_var(ENV_LIMIT);
    }
}

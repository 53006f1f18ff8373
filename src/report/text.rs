//! Number formatting and escaping shared by the renderers. A missing or
//! non-finite value is shown as [`DASH`].

/// Shown for a missing value.
pub const DASH: &str = "—";

fn finite(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite())
}

/// samples/sec, one decimal: `812.3`.
pub fn sps(x: Option<f64>) -> String {
    finite(x).map_or_else(|| DASH.to_string(), |v| format!("{v:.1}"))
}

/// A ratio, three decimals: `1.234`.
pub fn ratio(x: Option<f64>) -> String {
    finite(x).map_or_else(|| DASH.to_string(), |v| format!("{v:.3}"))
}

/// An interval with `decimals` decimals: `[0.981, 1.020]`.
pub fn interval(ci: Option<[f64; 2]>, decimals: usize) -> String {
    match ci {
        Some([lo, hi]) if lo.is_finite() && hi.is_finite() => {
            format!("[{lo:.decimals$}, {hi:.decimals$}]")
        }
        _ => DASH.to_string(),
    }
}

/// A fraction as a percentage, one decimal: `0.817` → `81.7%`.
pub fn percent(x: Option<f64>) -> String {
    finite(x).map_or_else(|| DASH.to_string(), |v| format!("{:.1}%", v * 100.0))
}

/// US dollars: `$0.42`; under a cent (but not zero) with four decimals.
pub fn usd(x: f64) -> String {
    if !x.is_finite() {
        DASH.to_string()
    } else if x != 0.0 && x.abs() < 0.01 {
        format!("${x:.4}")
    } else {
        format!("${x:.2}")
    }
}

/// A duration: `4.2s`, `1m 23s`, `2h 05m 09s`.
pub fn duration_s(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return DASH.to_string();
    }
    if secs < 60.0 {
        return format!("{secs:.1}s");
    }
    let total = secs.round() as u64;
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    if h > 0 {
        format!("{h}h {m:02}m {s:02}s")
    } else {
        format!("{m}m {s:02}s")
    }
}

/// The Measuring line: the timed steps' seconds of the wall time, as a
/// share, and over how many throughput runs.
pub fn measuring(t: &crate::bench::time::TimeSpent, l: &super::labels::Labels) -> String {
    l.measuring_line
        .replace("{measured}", &duration_s(t.measured_s))
        .replace("{wall}", &duration_s(t.wall_s))
        .replace("{pct}", &percent_whole(t.measured_share))
        .replace("{runs}", &t.measured_runs.to_string())
        + &t.around.as_ref().map_or_else(String::new, |a| {
            format!(
                "; {}",
                l.around_line
                    .replace("{start}", &duration_s(a.start_s))
                    .replace("{build}", &duration_s(a.build_s))
                    .replace("{warmup}", &duration_s(a.warmup_s))
                    .replace("{after}", &duration_s(a.after_s))
                    .replace("{other}", &duration_s(a.other_s))
            )
        })
        + &t.whole_s.map_or_else(String::new, |w| {
            format!(
                "; {}",
                l.whole_line
                    .replace("{whole}", &duration_s(w))
                    .replace("{pct}", &percent_whole(t.share_with_whole()))
            )
        })
}

/// A share as a whole percent (`16%`), a dash when unknown.
fn percent_whole(x: Option<f64>) -> String {
    finite(x).map_or_else(|| DASH.to_string(), |v| format!("{:.0}%", v * 100.0))
}

/// A duration given in milliseconds.
pub fn duration_ms(ms: u64) -> String {
    duration_s(ms as f64 / 1000.0)
}

/// The final throughput as a share of the ceiling: the report's field, or
/// computed from `final_sps / ceiling_sps` when only the ceiling is known.
/// A final well past a limit measured at the baseline says that figure
/// was low (a busier machine then, or a step the change itself sped up):
/// the note that says so, beside the share.
pub fn past_limit(l: &crate::words::Labels, share: f64) -> Option<&'static str> {
    (share > PAST_LIMIT).then_some(l.past_limit)
}

/// Past this share of a limit the limit's figure is not a limit of the final.
const PAST_LIMIT: f64 = 1.15;

pub fn share_of_ceiling(r: &super::model::RunReport) -> Option<f64> {
    finite(r.final_share_of_ceiling).or_else(|| {
        finite(r.ceiling_sps)
            .filter(|c| *c > 0.0)
            .map(|c| r.final_sps / c)
            .filter(|v| v.is_finite())
    })
}

/// The headline's CPU limit (what the cores can feed, and how it was
/// reached) and the binding limit with the final's share of it.
pub fn limits(
    lim: &crate::bench::limits::ThroughputLimits,
    l: &super::labels::Labels,
) -> Vec<(&'static str, String)> {
    use crate::bench::limits::{cores_text, Binding};
    let mut items = Vec::new();
    if let (Some(s), Some(alone), Some(r)) = (
        lim.step_limit_sps,
        lim.step_alone_sps,
        lim.receive_s_per_sample,
    ) {
        let mut how = l
            .step_receive_how
            .replace("{step}", &sps(Some(alone)))
            .replace("{cost}", &format!("{:.0} µs", r * 1e6));
        if let Some(b) = lim.step_slowed() {
            how = format!("{how}; {}", l.step_beside.replace("{sps}", &sps(Some(b))));
        }
        items.push((
            l.step_receive_limit,
            format!("{} samples/sec ({how})", sps(Some(s))),
        ));
    }
    if let (Some(c), Some(cores), Some(cost)) =
        (lim.cpu_limit_sps, lim.usable_cores, lim.cpu_s_per_sample)
    {
        let how = l
            .cpu_limit_how
            .replace(
                "{cores}",
                &cores_text(cores, lim.cores_limited_by.as_deref()),
            )
            .replace("{cost}", &format!("{:.0} µs", cost * 1e6));
        let how = match lim.others_cores.filter(|o| *o >= 0.05) {
            Some(o) => format!(
                "{how}; {}",
                l.others_busy.replace("{n}", &format!("{o:.1}"))
            ),
            None => how,
        };
        items.push((l.cpu_limit, format!("{} samples/sec ({how})", sps(Some(c)))));
    }
    if let (Some(e), Some(r)) = (lim.epoch_limit_sps, &lim.epoch_restarts) {
        let how = l
            .epoch_limit_how
            .replace(
                "{epoch}",
                &r.batches_per_epoch
                    .map(|n| format!(" ({n} batches)"))
                    .unwrap_or_default(),
            )
            .replace("{fill}", &format!("{:.0}", r.fill_s * 1e3))
            .replace("{idle}", &format!("{:.1}", r.idle_cores()));
        items.push((
            l.epoch_limit,
            format!("{} samples/sec ({how})", sps(Some(e))),
        ));
    }
    if let Some((b, at)) = lim.lower() {
        let which = match b {
            Binding::StepAlone if lim.step_limit_sps.is_some() => l.binding_step_receive,
            Binding::StepAlone => l.binding_step_alone,
            Binding::Cpu => l.binding_cpu,
            Binding::EpochRestarts => l.binding_epoch,
        };
        let mut v = format!("{which}: {} samples/sec", sps(Some(at)));
        if let Some(share) = finite(lim.final_share) {
            let mut note = l.of_ceiling.replace("{pct}", &percent(Some(share)));
            // Only the step alone is the baseline's figure; the CPU
            // limits are figured from the final's own runs.
            if let Some(past) = past_limit(l, share) {
                note.push_str("; ");
                note.push_str(match b {
                    Binding::StepAlone => past,
                    Binding::Cpu | Binding::EpochRestarts => l.past_own_limit,
                });
            }
            let _ = std::fmt::Write::write_fmt(&mut v, format_args!(" ({note})"));
        }
        items.push((l.binding_limit, v));
    }
    items
}

/// The headline's data-path limit: the limit in samples/sec, the bandwidths
/// behind it, and the final throughput as a share of it.
pub fn data_path(
    d: &super::model::DataPathLimit,
    final_sps: f64,
    l: &super::labels::Labels,
) -> String {
    let gbps = |x: f64| format!("{x:.1} GB/s");
    let mut parts = vec![format!("host copy {}", gbps(d.host_copy_gbps))];
    match (d.cuda_available, d.h2d_pageable_gbps, d.h2d_pinned_gbps) {
        (true, pageable, pinned) => {
            parts.extend(pageable.map(|g| format!("H2D pageable {}", gbps(g))));
            parts.extend(pinned.map(|g| format!("H2D pinned {}", gbps(g))));
        }
        (false, ..) => parts.push("no CUDA: pin_memory cannot matter here".into()),
    }
    let limit = d.limit_sps();
    // Often millions: 46.8M reads better than 46797181.7.
    let shown = if limit >= 1e6 {
        format!("{:.1}M", limit / 1e6)
    } else {
        sps(Some(limit))
    };
    let mut out = format!("{shown} samples/sec ({}", parts.join(" · "));
    if let Some(share) = finite(Some(final_sps / limit)).filter(|_| limit > 0.0) {
        let pct = if share < 0.001 {
            "<0.1%".to_string()
        } else {
            percent(Some(share))
        };
        out.push_str("; ");
        out.push_str(&l.of_ceiling.replace("{pct}", &pct));
    }
    out.push(')');
    out
}

/// One Markdown table cell: `|` escaped, line breaks folded into spaces.
pub fn md_cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '|' => out.push_str("\\|"),
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push(' ');
            }
            '\n' => out.push(' '),
            other => out.push(other),
        }
    }
    out.trim().to_string()
}

/// Inline Markdown text outside a table: line breaks folded into spaces.
pub fn md_inline(s: &str) -> String {
    s.split(['\r', '\n'])
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Text escaped for HTML content and attribute values.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// A code fence long enough not to be closed by any backtick run in `body`.
pub fn fence_for(body: &str) -> String {
    let mut longest = 0usize;
    let mut run = 0usize;
    for c in body.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// The data-check line: what a loader-setting turn and any other turn
/// compare of the first batches, and what the baseline's runs left out.
pub fn data_check(d: &crate::judge::DataCheckPlan, l: &super::labels::Labels) -> String {
    use crate::bench::identity::{list as parts, Part};
    let mut out = Vec::new();
    if !d.loader_setting.is_empty() {
        out.push(
            l.data_check_loader
                .replace("{parts}", &parts(&d.loader_setting)),
        );
    }
    if d.other.contains(&Part::Bytes) {
        out.push(l.data_check_other.replace("{parts}", &parts(&d.other)));
    }
    if !d.not_reproduced.is_empty() {
        out.push(
            l.data_check_unstable
                .replace("{parts}", &parts(&d.not_reproduced))
                .replace("{n}", &d.baseline_runs.to_string()),
        );
    }
    if !d.not_recorded.is_empty() {
        out.push(
            l.data_check_unrecorded
                .replace("{parts}", &parts(&d.not_recorded)),
        );
    }
    if d.other.is_empty() {
        out.insert(0, l.data_check_nothing.to_string());
    }
    out.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(sps(Some(812.345)), "812.3");
        assert_eq!(sps(None), DASH);
        assert_eq!(sps(Some(f64::NAN)), DASH);
        assert_eq!(ratio(Some(1.0)), "1.000");
        assert_eq!(interval(Some([0.9812, 1.02]), 3), "[0.981, 1.020]");
        assert_eq!(interval(Some([f64::INFINITY, 1.0]), 3), DASH);
        assert_eq!(percent(Some(0.8172)), "81.7%");
        assert_eq!(usd(0.0), "$0.00");
        assert_eq!(usd(0.0031), "$0.0031");
        assert_eq!(usd(1.234), "$1.23");
        assert_eq!(duration_s(4.21), "4.2s");
        assert_eq!(duration_s(83.0), "1m 23s");
        assert_eq!(duration_s(7509.0), "2h 05m 09s");
        assert_eq!(duration_ms(1500), "1.5s");
    }

    #[test]
    fn escaping() {
        assert_eq!(md_cell("a | b\r\nc\nd"), "a \\| b c d");
        assert_eq!(
            html_escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(fence_for("no ticks"), "```");
        assert_eq!(fence_for("a ```` b"), "`````");
    }

    #[test]
    fn the_data_check_says_what_is_compared_and_why() {
        use crate::bench::identity::Part::*;
        use crate::judge::DataCheckPlan;
        let l = &crate::words::EN;
        let all = DataCheckPlan {
            baseline_runs: 4,
            loader_setting: vec![Items, Order, Structure],
            other: vec![Items, Order, Structure, Bytes],
            not_reproduced: vec![],
            not_recorded: vec![],
        };
        assert_eq!(
            data_check(&all, l),
            "items, order and structure compared on a loader-setting turn (bytes not compared: the workers' random seeds change with their count, by design, for augmentation in workers); items, order, structure and bytes on any other change"
        );
        let clock = DataCheckPlan {
            baseline_runs: 2,
            loader_setting: vec![Structure],
            other: vec![Structure],
            not_reproduced: vec![Items, Order, Bytes],
            not_recorded: vec![],
        };
        let t = data_check(&clock, l);
        assert!(
            t.starts_with("structure compared on a loader-setting turn"),
            "{t}"
        );
        assert!(
            t.ends_with("; items, order and bytes not compared: they differ between the baseline's own 2 runs"),
            "{t}"
        );
        assert!(!t.contains("any other change"), "{t}");
        let ja = data_check(&clock, &crate::words::JA);
        assert!(ja.contains("ベースライン自身の 2 回"), "{ja}");
    }
}

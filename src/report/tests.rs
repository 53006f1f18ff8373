//! Snapshot and property tests of the renderers on a hand-made run that has
//! every decision and missing values.

use super::*;

fn agent(cost: Option<f64>, ms: u64) -> AgentInfo {
    AgentInfo {
        backend: "builtin".into(),
        num_turns: Some(3),
        cost_usd: cost,
        exit_code: Some(0),
        duration_ms: ms,
    }
}

fn sample_report() -> RunReport {
    RunReport {
        schema_version: SCHEMA_VERSION,
        run_id: "20250101-120000-ab12".into(),
        project: "examples/imagenet-lite".into(),
        agent: "builtin".into(),
        language: "en".into(),
        started_at: "2025-01-01T12:00:00Z".into(),
        baseline_sps: 812.34,
        baseline_samples: vec![805.0, 812.34, 820.5],
        baseline_data_wait_share: Some(0.72),
        final_sps: 2450.06,
        final_data_wait_share: Some(0.081),
        speedup: 3.0161,
        speedup_ci: Some([2.951, 3.104]),
        final_interval: None,
        numerics_yardstick: None,
        ceiling_sps: Some(3000.0),
        final_share_of_ceiling: Some(0.8167),
        stop_reason: "iteration limit (5)".into(),
        interrupted: false,
        total_cost_usd: 0.4231,
        agent_time_ms: 83_000,
        wall_s: 723.4,
        bench_runs: 57,
        turns: vec![
            TurnRow {
                turn: 1,
                change: "num_workers 0 → 4".into(),
                file: Some("train.py".into()),
                before_sps: Some(812.0),
                after_sps: Some(1999.95),
                ratio: Some(2.4631),
                ratio_ci: Some([2.40, 2.52]),
                runs: 10,
                decision: Decision::Kept,
                reason: "CI [2.400, 2.520] above 1.01".into(),
                agent: agent(Some(0.12), 20_000),
                candidate_samples: vec![1980.0, 1999.95, 2010.0, 2003.1, 1990.2],
                incumbent_samples: vec![810.0, 812.0, 815.0, 809.0, 813.0],
                data_wait_share: Some(0.2),
                confirmation: None,
            },
            TurnRow {
                turn: 2,
                change: "prefetch_factor 2 → 4 | retry".into(),
                file: Some("train.py".into()),
                before_sps: Some(2001.0),
                after_sps: Some(2010.5),
                ratio: Some(1.0047),
                ratio_ci: Some([0.9812, 1.0204]),
                runs: 10,
                decision: Decision::Reverted,
                reason: "CI includes 1 + noise\n(0.981 ≤ 1.01)".into(),
                agent: agent(Some(0.1), 15_000),
                candidate_samples: vec![1990.0, 2010.5, 2030.0],
                incumbent_samples: vec![1995.0, 2001.0, 2005.0],
                data_wait_share: Some(0.19),
                confirmation: None,
            },
            TurnRow {
                turn: 3,
                change: "num_workers 4 → 8; pin_memory=True".into(),
                file: Some("train.py".into()),
                before_sps: None,
                after_sps: None,
                ratio: None,
                ratio_ci: None,
                runs: 0,
                decision: Decision::Rejected,
                reason: "more than one DataLoader argument changed <2>".into(),
                agent: agent(Some(0.11), 18_000),
                candidate_samples: vec![],
                incumbent_samples: vec![],
                data_wait_share: None,
                confirmation: None,
            },
            TurnRow {
                turn: 4,
                change: "persistent_workers=True".into(),
                file: None,
                before_sps: Some(2003.0),
                after_sps: None,
                ratio: None,
                ratio_ci: None,
                runs: 1,
                decision: Decision::Failed,
                reason: "bench exited with code 1 & no JSON line".into(),
                agent: agent(None, 12_000),
                candidate_samples: vec![],
                incumbent_samples: vec![2003.0],
                data_wait_share: None,
                confirmation: None,
            },
            TurnRow {
                turn: 5,
                change: "".into(),
                file: None,
                before_sps: None,
                after_sps: None,
                ratio: None,
                ratio_ci: None,
                runs: 0,
                decision: Decision::NoChange,
                reason: "agent ended without changing a file".into(),
                agent: agent(Some(0.0931), 18_000),
                candidate_samples: vec![],
                incumbent_samples: vec![],
                data_wait_share: None,
                confirmation: None,
            },
            TurnRow {
                turn: 6,
                change: "num_workers 4 → 6".into(),
                file: Some("train.py".into()),
                before_sps: Some(2002.0),
                after_sps: Some(2450.06),
                ratio: Some(1.2238),
                ratio_ci: Some([1.19, 1.25]),
                runs: 12,
                decision: Decision::Kept,
                reason: "CI [1.190, 1.250] above 1.01".into(),
                agent: agent(Some(0.0), 0),
                candidate_samples: vec![2440.0, 2450.06, 2461.0, f64::NAN],
                incumbent_samples: vec![2000.0, 2002.0],
                data_wait_share: Some(0.081),
                confirmation: None,
            },
        ],
        kept_diff: "--- a/train.py\n+++ b/train.py\n@@ -10,3 +10,3 @@\n     loader = DataLoader(\n-        ds, batch_size=64, num_workers=0,\n+        ds, batch_size=64, num_workers=6,\n     )\n"
            .into(),
        data_path: None,
            measured_loader: None,
            knob_sources: Vec::new(),
            not_editable_knobs: Vec::new(),
            window: None,
        // 2 cores at 800 µs of CPU a sample feed 2,500/s, under the step alone's 3,000.
        limits: Some(crate::bench::limits::ThroughputLimits {
            step_alone_sps: Some(3000.0),
            cpu_limit_sps: Some(2500.0),
            cpu_s_per_sample: Some(0.0008),
            usable_cores: Some(2.0),
            cores_limited_by: Some("affinity".into()),
            others_cores: Some(0.4),
            binding: Some(crate::bench::limits::Binding::Cpu),
            final_share: Some(0.98),
            ..Default::default()
        }),
        costs: Some(sample_costs()),
        data_check: None,
        profile_unavailable: None,
        run_command: None,
        whole_command: None,
        machine_load: None,
        compute_not_tried: vec![],
        time: Some(crate::bench::time::TimeSpent {
            wall_s: 723.4,
            measured_s: 116.2,
            measured_share: Some(116.2 / 723.4),
            bench_runs: 57,
            measured_runs: 53,
            turns: vec![
                crate::bench::time::TurnSeconds { turn: 1, s: 61.5 },
                crate::bench::time::TurnSeconds { turn: 2, s: 58.0 },
            ],
            around: None,
            whole_s: None,
        }),
    }
}

/// Baseline without workers, turns 1, 2 and 6 measured, the final at 6 workers.
fn sample_costs() -> crate::bench::cost::StateCosts {
    use crate::bench::cost::{StateCost, StateCosts, TurnCost};
    let cost = |sps: f64, nw: u64, mem: Option<u64>, cores: f64| StateCost {
        runs: 5,
        samples_per_sec: sps,
        num_workers: Some(nw),
        workers_memory_bytes: mem,
        workers_memory_kind: mem.filter(|b| *b > 0).map(|_| "pss".to_string()),
        main_rss_bytes: Some(1_100_000_000),
        cpu_cores: Some(cores),
        usable_cores: Some(2.0),
    };
    StateCosts {
        baseline: Some(cost(812.34, 0, Some(0), 0.98)),
        turns: vec![
            TurnCost {
                turn: 1,
                cost: cost(1999.95, 4, Some(620_000_000), 1.71),
            },
            TurnCost {
                turn: 2,
                cost: cost(2010.5, 4, Some(655_000_000), 1.74),
            },
            TurnCost {
                turn: 6,
                cost: cost(2450.06, 6, Some(930_000_000), 1.93),
            },
        ],
        final_: Some(cost(2450.06, 6, Some(930_000_000), 1.93)),
    }
}

fn ja_report() -> RunReport {
    RunReport {
        language: "ja".into(),
        interrupted: true,
        stop_reason: "中断 (SIGINT)".into(),
        ..sample_report()
    }
}

/// A report with nothing optional: no turns, no ceiling, no CI, no diff.
fn bare_report() -> RunReport {
    RunReport {
        baseline_samples: vec![],
        baseline_data_wait_share: None,
        final_sps: 812.34,
        final_data_wait_share: None,
        speedup: 1.0,
        speedup_ci: None,
        final_interval: None,
        numerics_yardstick: None,
        ceiling_sps: None,
        final_share_of_ceiling: None,
        stop_reason: "baseline: data_wait below 5%".into(),
        total_cost_usd: 0.0,
        agent_time_ms: 0,
        wall_s: 12.0,
        bench_runs: 5,
        turns: vec![],
        kept_diff: String::new(),
        limits: None,
        costs: None,
        data_check: None,
        run_command: None,
        whole_command: None,
        machine_load: None,
        compute_not_tried: vec![],
        ..sample_report()
    }
}

/// The Markdown table rows (lines starting with "| " after the header).
fn table_rows(md: &str) -> Vec<&str> {
    md.lines()
        .skip_while(|l| !l.starts_with("|---"))
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .collect()
}

/// Splits a Markdown table row into cells, honouring `\|`.
fn md_cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&'|') {
            cells.last_mut().unwrap().push('|');
            chars.next();
        } else if c == '|' {
            cells.push(String::new());
        } else {
            cells.last_mut().unwrap().push(c);
        }
    }
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

// ---- Markdown ----

#[test]
fn markdown_en_snapshot() {
    insta::assert_snapshot!("markdown_en", render_markdown(&sample_report()));
}

#[test]
fn markdown_ja_snapshot() {
    insta::assert_snapshot!("markdown_ja", render_markdown(&ja_report()));
}

#[test]
fn markdown_bare_snapshot() {
    insta::assert_snapshot!("markdown_bare", render_markdown(&bare_report()));
}

#[test]
fn markdown_table_has_every_turn_in_order_with_nine_cells() {
    let r = sample_report();
    let md = render_markdown(&r);
    let rows = table_rows(&md);
    assert_eq!(rows.len(), r.turns.len(), "{md}");
    for (row, t) in rows.iter().zip(&r.turns) {
        let cells = md_cells(row);
        assert_eq!(cells.len(), 9, "row {row:?}");
        assert_eq!(cells[0], t.turn.to_string());
        assert_eq!(cells[7], t.decision.as_str().replace('_', " "));
    }
    // The `|` inside a change is escaped, not a column break.
    assert!(md.contains("prefetch_factor 2 → 4 \\| retry"));
    // Missing values are dashes; numbers have the stated precision.
    let failed = md_cells(rows[3]);
    assert_eq!(&failed[2..6], ["2003.0", "—", "—", "—"]);
    let reverted = md_cells(rows[1]);
    assert_eq!(
        &reverted[2..6],
        ["2001.0", "2010.5", "1.005", "[0.981, 1.020]"]
    );
    // Empty change shows a dash rather than an empty cell.
    assert_eq!(md_cells(rows[4])[1], "—");
}

#[test]
fn markdown_headline() {
    let md = render_markdown(&sample_report());
    assert!(md.contains("812.3 → 2450.1 samples/sec"), "{md}");
    assert!(md.contains("×3.02 (CI [2.95, 3.10])"), "{md}");
    assert!(
        md.contains("3000.0 samples/sec (final is 81.7% of it)"),
        "{md}"
    );
    assert!(md.contains("72.0% → 8.1%"), "{md}");
    assert!(md.contains("$0.42"), "{md}");
    assert!(md.contains("1m 23s"), "{md}");
    assert!(md.contains("**Bench runs:** 57"), "{md}");
    assert!(md.contains("12m 03s"), "{md}");
    assert!(md.contains("iteration limit (5)"), "{md}");
    assert!(!md.contains("Interrupted"), "{md}");
    assert!(md.contains("```diff\n--- a/train.py\n"), "{md}");
}

#[test]
fn markdown_and_html_say_what_the_data_check_compared() {
    use crate::bench::identity::Part::*;
    let mut r = sample_report();
    r.data_check = Some(crate::judge::DataCheckPlan {
        baseline_runs: 4,
        loader_setting: vec![Structure],
        other: vec![Structure],
        not_reproduced: vec![Items, Order, Bytes],
        not_recorded: vec![],
    });
    let md = render_markdown(&r);
    assert!(
        md.contains("**Data check:** structure compared on a loader-setting turn"),
        "{md}"
    );
    assert!(
        md.contains(
            "items, order and bytes not compared: they differ between the baseline's own 4 runs"
        ),
        "{md}"
    );
    let html = render_html(&r, PLACEHOLDER_SVG);
    assert!(html.contains("Data check"), "{html}");
    assert!(!render_markdown(&sample_report()).contains("Data check"));
}

#[test]
fn markdown_says_when_the_workers_slow_the_step() {
    let mut r = sample_report();
    let lim = r.limits.as_mut().unwrap();
    lim.receive_s_per_sample = Some(0.00003);
    lim.step_limit_sps = Some(2750.0);
    lim.step_beside_sps = Some(2000.0);
    let md = render_markdown(&r);
    let line = md
        .lines()
        .find(|l| l.contains("Step with receiving batches"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        line.ends_with(
            "; beside the workers the step itself ran at 2000.0 samples/sec: they share its cores)"
        ),
        "{line}"
    );
    // Near its speed alone, the line says nothing of it.
    r.limits.as_mut().unwrap().step_beside_sps = Some(2900.0);
    assert!(!render_markdown(&r).contains("beside the workers"));
}

#[test]
fn a_final_past_a_limit_measured_at_the_baseline_says_the_figure_was_low() {
    let mut r = sample_report();
    // Measured on a busy machine at the baseline, the step alone read 490
    // samples/sec; the final reached 1184.
    r.ceiling_sps = Some(490.0);
    r.final_share_of_ceiling = Some(1184.0 / 490.0);
    let lim = r.limits.as_mut().unwrap();
    lim.final_share = Some(1184.0 / 490.0);
    let md = render_markdown(&r);
    let ceiling = md.lines().find(|l| l.contains("**Ceiling:**")).unwrap();
    assert!(
        ceiling
            .contains("final is 241.6% of it; measured at the baseline, and the final is past it"),
        "{ceiling}"
    );
    let binding = md
        .lines()
        .find(|l| l.contains("**Binding limit:**"))
        .unwrap();
    // The binding limit here is what the cores can feed, figured from the
    // final's own runs: not "measured at the baseline".
    assert!(
        binding.contains("figured from the final's own runs, which went past it"),
        "{binding}"
    );
    assert!(!binding.contains("measured at the baseline"), "{binding}");
    // Where the step alone binds, it is the baseline's figure.
    let mut step = r.clone();
    let lim = step.limits.as_mut().unwrap();
    lim.cpu_limit_sps = None;
    lim.step_alone_sps = Some(490.0);
    lim.binding = Some(crate::bench::limits::Binding::StepAlone);
    let md = render_markdown(&step);
    let binding = md
        .lines()
        .find(|l| l.contains("**Binding limit:**"))
        .unwrap();
    assert!(binding.contains("the machine was busier then"), "{binding}");
    // Within the noise of a limit, nothing is added.
    r.final_share_of_ceiling = Some(1.05);
    r.limits.as_mut().unwrap().final_share = Some(1.05);
    assert!(!render_markdown(&r).contains("measured at the baseline, and"));
}

#[test]
fn markdown_ja_labels() {
    let md = render_markdown(&ja_report());
    for word in [
        "変更",
        "採用",
        "差し戻し",
        "却下",
        "失敗",
        "変更なし",
        "中断",
        "採用した変更",
    ] {
        assert!(md.contains(word), "missing {word}: {md}");
    }
    assert!(!md.contains("| kept |"), "{md}");
}

#[test]
fn markdown_bare_has_no_optional_lines() {
    let md = render_markdown(&bare_report());
    assert!(!md.contains("Ceiling"), "{md}");
    assert!(!md.contains("data_wait share"), "{md}");
    assert!(md.contains("**Speedup:** ×1.00\n"), "{md}");
    assert!(md.contains("## Kept changes\n\nnone\n"), "{md}");
    assert!(table_rows(&md).is_empty());
}

#[test]
fn markdown_diff_fence_outlasts_backticks_in_diff() {
    let r = RunReport {
        kept_diff: "+x = \"```\"\n".into(),
        ..sample_report()
    };
    let md = render_markdown(&r);
    assert!(md.contains("````diff\n+x = \"```\"\n````\n"), "{md}");
}

#[test]
fn language_choice() {
    assert_eq!(labels_for("ja").lang, "ja");
    assert_eq!(labels_for("ja-JP").lang, "ja");
    assert_eq!(labels_for("JA").lang, "ja");
    assert_eq!(labels_for("en").lang, "en");
    assert_eq!(labels_for("").lang, "en");
    assert_eq!(labels_for("jav").lang, "en");
}

// ---- JSON ----

#[test]
fn json_snapshot() {
    let r = sample_report();
    let s = render_json(&r);
    assert!(s.ends_with("}\n"));
    insta::assert_snapshot!("json", s);
}

#[test]
fn json_round_trips() {
    // NaN cannot survive JSON (it becomes null), so round-trip a finite report.
    let mut r = sample_report();
    r.turns[5].candidate_samples.pop();
    let back: RunReport = serde_json::from_str(&render_json(&r)).unwrap();
    assert_eq!(back, r);
}

// ---- SVG ----

/// A minimal well-formedness check: every element opened is closed in order,
/// attributes are quoted, and there is exactly one root element.
fn assert_xmlish(s: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut roots = 0;
    let mut rest = s;
    while let Some(i) = rest.find('<') {
        let after = &rest[i + 1..];
        let end = after.find('>').expect("unclosed tag");
        let tag = &after[..end];
        rest = &after[end + 1..];
        assert_eq!(
            tag.matches('"').count() % 2,
            0,
            "unbalanced quotes in <{tag}>"
        );
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().unwrap_or_else(|| panic!("stray </{name}>"));
            assert_eq!(open, name.trim(), "mismatched close tag");
        } else {
            if stack.is_empty() {
                roots += 1;
            }
            if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().unwrap().to_string();
                stack.push(name);
            }
        }
    }
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
    assert_eq!(roots, 1, "expected one root element");
}

fn hex(c: plotters::style::RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

#[test]
fn svg_is_standalone_and_has_the_parts() {
    use plot::*;
    let svg = render_plot_svg(&sample_report());
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    assert!(svg.contains("xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(!svg.contains("plot unavailable"));
    assert_xmlish(&svg);
    // Points are circles; kept markers are filled green, reverted grey.
    assert!(svg.contains("<circle"));
    assert!(svg.contains(&format!("fill=\"{}\"", hex(KEPT_COLOR))));
    assert!(svg.contains(&format!("fill=\"{}\"", hex(REVERTED_COLOR))));
    // Baseline, ceiling, incumbent and crosses are stroked lines.
    for c in [
        BASELINE_COLOR,
        CEILING_COLOR,
        INCUMBENT_COLOR,
        REJECTED_COLOR,
    ] {
        assert!(
            svg.contains(&format!("stroke=\"{}\"", hex(c))),
            "no {}",
            hex(c)
        );
    }
    // Text is plain SVG text, labels included.
    assert!(svg.contains("<text"));
    for label in [
        "samples/sec",
        "turn (0 = baseline)",
        "ceiling 3000.0",
        "baseline 812.3",
    ] {
        assert!(svg.contains(label), "missing {label}");
    }
}

#[test]
fn svg_without_ceiling_or_turns() {
    use plot::*;
    let svg = render_plot_svg(&bare_report());
    assert!(svg.starts_with("<svg"));
    assert!(!svg.contains("plot unavailable"));
    assert_xmlish(&svg);
    assert!(!svg.contains(&format!("stroke=\"{}\"", hex(CEILING_COLOR))));
    assert!(svg.contains(&format!("stroke=\"{}\"", hex(BASELINE_COLOR))));
}

#[test]
fn svg_survives_degenerate_numbers() {
    let mut r = bare_report();
    r.baseline_sps = f64::NAN;
    r.final_sps = f64::INFINITY;
    r.ceiling_sps = Some(f64::NAN);
    let svg = render_plot_svg(&r);
    assert!(svg.starts_with("<svg"));
    assert_xmlish(&svg);
}

#[test]
fn svg_ja_labels() {
    let svg = render_plot_svg(&ja_report());
    assert!(svg.contains("採用"));
    assert_xmlish(&svg);
}

// ---- HTML ----

const PLACEHOLDER_SVG: &str =
    "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"></svg>\n";

#[test]
fn html_snapshot() {
    // The plot is a placeholder so the snapshot follows the page, not plotters.
    insta::assert_snapshot!("html", render_html(&sample_report(), PLACEHOLDER_SVG));
}

#[test]
fn html_ja_snapshot() {
    insta::assert_snapshot!("html_ja", render_html(&ja_report(), PLACEHOLDER_SVG));
}

#[test]
fn html_is_self_contained_with_table_and_plot() {
    let r = sample_report();
    let html = render(&r, Format::Html);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<table id=\"turns\">"));
    let plot_at = html.find("id=\"plot\"").expect("plot element");
    let svg_at = html.find("<svg").expect("inline svg");
    assert!(svg_at > plot_at);
    assert!(html[plot_at..].find("</figure>").unwrap() > svg_at - plot_at);
    // No external references; the SVG namespace is the only URL.
    let without_ns = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!without_ns.contains("http://"), "external reference");
    assert!(!without_ns.contains("https://"), "external reference");
    for bad in ["<script", "<link", "src=", "@import", "url("] {
        assert!(!html.contains(bad), "found {bad}");
    }
    // Every turn is a row, its decision coloured by class.
    for t in &r.turns {
        let d = t.decision.as_str();
        assert!(
            html.contains(&format!(
                "<tr class=\"{d}\"><td class=\"num\">{}</td>",
                t.turn
            )),
            "turn {}",
            t.turn
        );
        assert!(html.contains(&format!("<td class=\"decision {d}\">")));
    }
    assert_xmlish(
        &html[html.find("<html").unwrap()..]
            .replace("<meta charset=\"utf-8\">", "")
            .replace(
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
                "",
            ),
    );
}

#[test]
fn html_escapes_text_and_colours_the_diff() {
    let html = render_html(&sample_report(), PLACEHOLDER_SVG);
    assert!(html.contains("changed &lt;2&gt;"));
    assert!(html.contains("exited with code 1 &amp; no JSON"));
    assert!(!html.contains("<2>"));
    assert!(html.contains("<span class=\"add\">+        ds, batch_size=64, num_workers=6,</span>"));
    assert!(html.contains("<span class=\"del\">-        ds, batch_size=64, num_workers=0,</span>"));
    assert!(html.contains("<span class=\"hunk\">@@ -10,3 +10,3 @@</span>"));
    // The XML declaration of the plot is dropped when embedding.
    assert!(!html.contains("<?xml"));
}

#[test]
fn html_escapes_hostile_fields() {
    let mut r = sample_report();
    r.run_id = "<script>alert(1)</script>".into();
    r.turns[0].change = "\"><img src=x onerror=alert(1)>".into();
    r.kept_diff = "+</pre><script>x</script>\n".into();
    let html = render_html(&r, PLACEHOLDER_SVG);
    assert!(!html.contains("<script"));
    assert!(!html.contains("<img"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn render_dispatches_and_formats_parse() {
    let r = sample_report();
    assert_eq!(render(&r, Format::Markdown), render_markdown(&r));
    assert_eq!(render(&r, Format::Json), render_json(&r));
    assert!(render(&r, Format::Html).contains(&render_plot_svg(&r)[..40]));
    assert_eq!("md".parse::<Format>(), Ok(Format::Markdown));
    assert_eq!("Markdown".parse::<Format>(), Ok(Format::Markdown));
    assert_eq!("json".parse::<Format>(), Ok(Format::Json));
    assert_eq!("HTML".parse::<Format>(), Ok(Format::Html));
    assert!("pdf".parse::<Format>().is_err());
    assert_eq!(Format::Markdown.extension(), "md");
}

#[test]
fn a_cheaper_setting_kept_within_min_gain_renders_as_its_own_decision() {
    let mut r = sample_report();
    let last = r.turns.last().unwrap().clone();
    r.turns.push(TurnRow {
        turn: 7,
        change: "num_workers 6 → 4".into(),
        before_sps: Some(2450.0),
        after_sps: Some(2440.0),
        ratio: Some(0.996),
        ratio_ci: Some([0.985, 1.006]),
        decision: Decision::KeptCheaper,
        reason:
            "cheaper and as fast: ratio 0.996, 99% CI [0.985, 1.006] above 0.97 (within min_gain)"
                .into(),
        candidate_samples: vec![2440.0],
        ..last
    });
    // NaN samples do not survive JSON (null): none in this report.
    for t in &mut r.turns {
        t.candidate_samples.retain(|v| v.is_finite());
    }
    let md = render_markdown(&r);
    let row = table_rows(&md).into_iter().last().unwrap();
    assert_eq!(md_cells(row)[7], "kept (cheaper, within min_gain)", "{row}");
    let ja = render_markdown(&RunReport {
        language: "ja".into(),
        ..r.clone()
    });
    assert!(ja.contains("採用 (より安価、min_gain 以内)"), "{ja}");
    let json = render_json(&r);
    assert!(json.contains("\"decision\": \"kept_cheaper\""), "{json}");
    let back: RunReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back.turns.last().unwrap().decision, Decision::KeptCheaper);
    assert!(back.turns.last().unwrap().decision.is_kept());
    // The plot draws it as kept (the incumbent line steps to it).
    let svg = render_plot_svg(&r);
    assert!(
        svg.contains(&hex(super::plot::KEPT_COLOR)),
        "no kept marker"
    );
}

#[test]
fn each_states_memory_and_cpu_in_order_baseline_turns_final() {
    let md = render_markdown(&sample_report());
    let section = md
        .split("## Memory and CPU by state")
        .nth(1)
        .expect("the costs section")
        .split("## Kept changes")
        .next()
        .unwrap();
    let rows: Vec<Vec<String>> = section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| state"))
        .map(md_cells)
        .collect();
    let states: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    // Only the measured turns (1, 2, 6): rejected, failed and unchanged ones have no runs.
    assert_eq!(states, ["baseline", "turn 1", "turn 2", "turn 6", "final"]);
    assert_eq!(rows[2][2], "reverted");
    assert_eq!(
        &rows[3][3..],
        ["2450.1", "6", "930 MB (PSS)", "1.10 GB", "1.93 / 2 cores"]
    );
    assert_eq!(rows[0][5], "0 MB", "no workers, no workers' memory");
    // The headline's before/after.
    assert!(md.contains(
        "- **Memory and CPU:** workers 0 → 6 · workers' memory 0 MB → 930 MB (PSS) · CPU 0.98 → 1.93 cores (baseline → final)"
    ));
    let html = render_html(&sample_report(), PLACEHOLDER_SVG);
    assert!(html.contains("<table id=\"costs\">"));
    assert_eq!(html.matches("<tr class=\"kept\"><td>turn").count(), 2);
    // Without figures (contract mode, an older report): no section, no line.
    let bare = render_markdown(&bare_report());
    assert!(!bare.contains("Memory and CPU"), "{bare}");
    assert!(!render_html(&bare_report(), PLACEHOLDER_SVG).contains("id=\"costs\""));
    // An older report.json without the field still reads.
    let json = render_json(&bare_report());
    assert!(!json.contains("\"costs\""), "{json}");
    let old: RunReport = serde_json::from_str(&json).unwrap();
    assert_eq!(old.costs, None);
}

#[test]
fn the_epochs_restart_limit_is_a_line_of_its_own_and_can_bind() {
    use crate::bench::limits::{Binding, EpochRestarts};
    let mut r = sample_report();
    let lim = r.limits.as_mut().unwrap();
    lim.epoch_limit_sps = Some(2_200.0);
    lim.epoch_restarts = Some(EpochRestarts {
        batches_per_epoch: Some(32),
        fill_s: 0.114,
        idle_core_s: 0.1026,
        restarts_per_sample: 1.0 / 1280.0,
    });
    lim.binding = Some(Binding::EpochRestarts);
    lim.final_share = Some(0.9);
    let md = render_markdown(&r);
    assert!(
        md.contains("2200.0 samples/sec (each epoch (32 batches) starts empty: 114 ms to its first batch with 0.9 cores idle meanwhile)"),
        "{md}"
    );
    assert!(
        md.contains("what the cores can feed with each epoch's restart: 2200.0 samples/sec (final is 90.0% of it)"),
        "{md}"
    );
    let ja = RunReport {
        language: "ja".into(),
        ..r
    };
    let md = render_markdown(&ja);
    assert!(md.contains("エポック再開込みでコアが供給できる量"), "{md}");
}

#[test]
fn a_baseline_without_its_profiler_table_says_why_in_every_format() {
    let reason =
        "the profiled run failed (the bench exited with status signal 11 and printed no figure)";
    let r = RunReport {
        profile_unavailable: Some(reason.into()),
        ..sample_report()
    };
    let line = format!("profiler table unavailable: {reason}");
    let md = render_markdown(&r);
    assert!(md.contains(&format!("- **Profiler:** {line}")), "{md}");
    let html = render_html(&r, PLACEHOLDER_SVG);
    assert!(html.contains(&line), "{html}");
    let json: serde_json::Value = serde_json::from_str(&render_json(&r)).unwrap();
    assert_eq!(json["profile_unavailable"], reason);
    // Japanese: the same reason under its own label.
    let ja = render_markdown(&RunReport {
        language: "ja".into(),
        ..r
    });
    assert!(
        ja.contains(&format!(
            "- **プロファイラ:** profiler table unavailable（プロファイラの表なし）: {reason}"
        )),
        "{ja}"
    );
    // With the table: no line, no key.
    assert!(!render_markdown(&sample_report()).contains("profiler table unavailable"));
    assert!(!render_json(&sample_report()).contains("profile_unavailable"));
}

#[test]
fn the_report_says_how_much_of_the_wall_time_was_measuring() {
    let r = sample_report();
    let md = render_markdown(&r);
    assert!(
        md.contains(
            "- **Measuring:** 1m 56s of 12m 03s (16%): the timed steps of 53 throughput runs"
        ),
        "{md}"
    );
    let json: serde_json::Value = serde_json::from_str(&render_json(&r)).unwrap();
    let t = &json["time"];
    assert_eq!(
        (
            &t["wall_s"],
            &t["measured_s"],
            &t["bench_runs"],
            &t["measured_runs"]
        ),
        (&723.4.into(), &116.2.into(), &57.into(), &53.into())
    );
    assert!((t["measured_share"].as_f64().unwrap() - 0.1606).abs() < 1e-3);
    assert_eq!(t["turns"][1]["turn"], 2);
    assert!(render_html(&r, "").contains("<dt>Measuring</dt><dd>1m 56s of 12m 03s (16%)"));
    // Managed mode: the same runs' time around their windows goes on the line.
    let mut around = r.clone();
    if let Some(t) = around.time.as_mut() {
        t.around = Some(crate::bench::time::Around {
            start_s: 4.0,
            build_s: 61.5,
            warmup_s: 90.0,
            after_s: 12.0,
            other_s: 3.0,
            runs: 53,
        });
    }
    let md = render_markdown(&around);
    assert!(
        md.contains("(16%): the timed steps of 53 throughput runs (the rest is each process's start, imports and warm-up, the profiler's steps, the agent); around those windows: start and import torch 4.0s, the project's build() 1m 02s"),
        "{md}"
    );
    let json: serde_json::Value = serde_json::from_str(&render_json(&around)).unwrap();
    assert_eq!(json["time"]["around"]["warmup_s"], 90.0);
    assert!(!render_json(&r).contains("\"around\""));
    // Command mode: the whole-command rounds, beside the timed steps.
    let mut whole = r.clone();
    if let Some(t) = whole.time.as_mut() {
        t.whole_s = Some(245.0);
    }
    let md = render_markdown(&whole);
    assert!(
        md.contains("the agent); your command timed whole (its rounds before and after) 4m 05s more, 50% of the wall time with the timed steps"),
        "{md}"
    );
    let json: serde_json::Value = serde_json::from_str(&render_json(&whole)).unwrap();
    assert_eq!(json["time"]["whole_s"], 245.0);
    assert!(!render_json(&r).contains("\"whole_s\""));
    // A report written before it has no time, and no line.
    let old = RunReport { time: None, ..r };
    assert!(!render_markdown(&old).contains("Measuring"));
    assert!(!render_json(&old).contains("\"time\""));
}

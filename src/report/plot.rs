//! `plot.svg`: samples/sec by turn. Every measurement is a small point, each
//! turn's candidate spread a vertical min–max bar, each decision a marker
//! (kept: filled green circle, reverted: grey circle, rejected/failed: red
//! cross, no change: hollow grey circle), the incumbent a step line, and the
//! baseline and ceiling horizontal dashed lines. The legend sits in its own
//! panel to the right so it never covers data. When the values span a wide
//! range (×8 or more — typically a far ceiling, or a run that gained several
//! times over) the y axis is logarithmic, with 1-2-5 ticks, so equal ratios
//! get equal heights and the early turns are not flattened at the bottom.
//!
//! Drawn with plotters' SVG backend and its built-in "naive" font handling:
//! text is emitted as SVG `<text>` elements and laid out by the viewer, so no
//! font file or system font library is needed.

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::labels::{labels, Labels};
use super::model::{Decision, RunReport};
use super::text;

/// The y axis turns logarithmic when the largest value is this many times
/// the smallest.
pub const LOG_SCALE_FROM: f64 = 8.0;

/// Width and height of the SVG in pixels.
pub const PLOT_SIZE: (u32, u32) = (880, 460);
const LEGEND_WIDTH: u32 = 200;

// Colours (the SVG writes them as upper-case hex, e.g. "#1F77B4").
pub(crate) const BASELINE_COLOR: RGBColor = RGBColor(0x1F, 0x77, 0xB4);
pub(crate) const CEILING_COLOR: RGBColor = RGBColor(0x94, 0x67, 0xBD);
/// What the cores can feed (usable cores / CPU per sample).
pub(crate) const CPU_LIMIT_COLOR: RGBColor = RGBColor(0xD6, 0x27, 0x28);
pub(crate) const INCUMBENT_COLOR: RGBColor = RGBColor(0xFF, 0x7F, 0x0E);
pub(crate) const KEPT_COLOR: RGBColor = RGBColor(0x2C, 0xA0, 0x2C);
pub(crate) const REVERTED_COLOR: RGBColor = RGBColor(0x9E, 0x9E, 0x9E);
pub(crate) const REJECTED_COLOR: RGBColor = RGBColor(0xD6, 0x27, 0x28);
pub(crate) const SAMPLE_COLOR: RGBColor = RGBColor(0x55, 0x6B, 0x8D);
const GRID_COLOR: RGBColor = RGBColor(0xE6, 0xE6, 0xE6);
const TEXT_COLOR: RGBColor = RGBColor(0x22, 0x22, 0x22);

type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Renders the run's plot as a standalone SVG document (starts with `<svg`,
/// carries its own `xmlns`). Never fails: if drawing goes wrong, a small SVG
/// saying so is returned instead.
pub fn render_plot_svg(r: &RunReport) -> String {
    let mut buf = String::new();
    match draw(r, &mut buf) {
        Ok(()) => buf,
        Err(e) => fallback_svg(&e.to_string()),
    }
}

fn fallback_svg(msg: &str) -> String {
    let (w, h) = PLOT_SIZE;
    format!(
        "<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <text x=\"20\" y=\"40\" font-family=\"sans-serif\" font-size=\"14\">plot unavailable: {}</text>\n</svg>\n",
        text::html_escape(msg)
    )
}

fn finite(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite())
}

/// One decision marker: where it goes and what it is.
struct Marker {
    x: f64,
    y: f64,
    decision: Decision,
}

/// What the plot shows, computed from the report before drawing.
struct PlotData {
    max_turn: u32,
    y_max: f64,
    /// The smallest positive value drawn (for a logarithmic axis).
    y_min: Option<f64>,
    baseline: Option<f64>,
    ceiling: Option<f64>,
    /// What the cores can feed, when measured: with the epochs' restarts
    /// counted when the timed steps held one (the lower figure).
    cpu_limit: Option<f64>,
    cpu_limit_with_restarts: bool,
    /// Every measurement (x, samples/sec).
    samples: Vec<(f64, f64)>,
    /// Candidate min–max per turn: (x, min, max).
    spreads: Vec<(f64, f64, f64)>,
    markers: Vec<Marker>,
    /// The incumbent as a step line.
    incumbent: Vec<(f64, f64)>,
}

fn plot_data(r: &RunReport) -> PlotData {
    let baseline = Some(r.baseline_sps).filter(|v| v.is_finite());
    let ceiling = finite(r.ceiling_sps);
    let epoch_limit = finite(r.limits.as_ref().and_then(|l| l.epoch_limit_sps));
    let cpu_limit = epoch_limit.or_else(|| finite(r.limits.as_ref().and_then(|l| l.cpu_limit_sps)));
    let max_turn = r.turns.iter().map(|t| t.turn).max().unwrap_or(0);

    let mut samples: Vec<(f64, f64)> = r
        .baseline_samples
        .iter()
        .filter(|v| v.is_finite())
        .map(|&v| (0.0, v))
        .collect();
    let mut spreads = Vec::new();
    let mut markers = Vec::new();
    let mut incumbent = Vec::new();

    let mut turns: Vec<_> = r.turns.iter().collect();
    turns.sort_by_key(|t| t.turn);
    let mut level = baseline;
    if let Some(b) = baseline {
        incumbent.push((0.0, b));
    }
    for t in turns {
        let x = f64::from(t.turn);
        let cand: Vec<f64> = t
            .candidate_samples
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        samples.extend(cand.iter().map(|&v| (x, v)));
        if cand.len() >= 2 {
            let lo = cand.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = cand.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            spreads.push((x, lo, hi));
        }
        let after = finite(t.after_sps);
        // A turn without a measurement is marked at the incumbent's level.
        let at = after.or(level).or(finite(t.before_sps));
        if let Some(y) = at {
            markers.push(Marker {
                x,
                y,
                decision: t.decision,
            });
        }
        if t.decision.is_kept() {
            if let Some(a) = after {
                if let Some(l) = level {
                    incumbent.push((x, l));
                }
                incumbent.push((x, a));
                level = Some(a);
            }
        }
    }
    if let Some(l) = level {
        if !incumbent.is_empty() {
            incumbent.push((f64::from(max_turn), l));
        }
    }

    let mut y_max = 0.0f64;
    let mut y_min: Option<f64> = None;
    let mut see = |v: f64| {
        if v.is_finite() {
            y_max = y_max.max(v);
            if v > 0.0 {
                y_min = Some(y_min.map_or(v, |m| m.min(v)));
            }
        }
    };
    samples.iter().for_each(|p| see(p.1));
    markers.iter().for_each(|m| see(m.y));
    baseline.into_iter().for_each(&mut see);
    ceiling.into_iter().for_each(&mut see);
    cpu_limit.into_iter().for_each(&mut see);
    see(r.final_sps);
    for t in &r.turns {
        t.before_sps.into_iter().for_each(&mut see);
        t.incumbent_samples.iter().copied().for_each(&mut see);
    }
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };

    PlotData {
        max_turn,
        y_max,
        y_min,
        baseline,
        ceiling,
        cpu_limit,
        cpu_limit_with_restarts: epoch_limit.is_some(),
        samples,
        spreads,
        markers,
        incumbent,
    }
}

/// How values map to the y axis: as they are, or by their logarithm.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scale {
    Linear,
    Log,
}

impl Scale {
    fn of(d: &PlotData) -> Scale {
        match d.y_min {
            Some(m) if d.y_max / 1.1 >= LOG_SCALE_FROM * m => Scale::Log,
            _ => Scale::Linear,
        }
    }

    /// A value's position on the axis; `None` for what the axis cannot show
    /// (zero or less on a logarithmic one).
    fn y(self, v: f64) -> Option<f64> {
        match self {
            Scale::Linear => Some(v),
            Scale::Log => (v > 0.0).then(|| v.ln()),
        }
    }
}

/// Round values 1, 2, 5 × 10^k within `[lo, hi]`: the ticks of a
/// logarithmic axis.
fn ticks_125(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return out;
    }
    let mut p = 10f64.powf(lo.log10().floor());
    while p <= hi {
        for m in [1.0, 2.0, 5.0] {
            let v = p * m;
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
        p *= 10.0;
    }
    out
}

fn draw(r: &RunReport, buf: &mut String) -> DrawResult<()> {
    let l = labels(r);
    let d = plot_data(r);
    let scale = Scale::of(&d);
    let root = SVGBackend::with_string(buf, PLOT_SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (chart_area, legend_area) = root.split_horizontally(PLOT_SIZE.0 - LEGEND_WIDTH);

    let x_lo = -0.5;
    let x_hi = f64::from(d.max_turn) + 0.5;
    // Plotters picks the nicest step that gives at most this many labels;
    // the range's width is max_turn + 1, so the step is 1 up to 15 turns.
    let x_labels = (d.max_turn as usize + 1).min(15);
    // A little room above and below on a logarithmic axis (10% above on a linear one).
    let (lo, hi) = match (scale, d.y_min) {
        (Scale::Log, Some(m)) => (m / 1.25, d.y_max / 1.1 * 1.25),
        _ => (0.0, d.y_max),
    };
    let (y_lo, y_hi) = (scale.y(lo).unwrap_or(0.0), scale.y(hi).unwrap_or(1.0));

    let mut chart = ChartBuilder::on(&chart_area)
        .caption(l.plot, ("sans-serif", 18).into_font().color(&TEXT_COLOR))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)?;

    let label_font = ("sans-serif", 12).into_font().color(&TEXT_COLOR);
    chart
        .configure_mesh()
        .x_desc(l.plot_x)
        .y_desc(if scale == Scale::Log {
            l.plot_y_log
        } else {
            l.plot_y
        })
        .x_labels(x_labels)
        // A logarithmic axis gets its own 1-2-5 ticks below.
        .y_labels(if scale == Scale::Log { 0 } else { 8 })
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-9 && *x >= 0.0 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .bold_line_style(GRID_COLOR)
        .light_line_style(TRANSPARENT)
        .axis_style(TEXT_COLOR)
        .label_style(label_font.clone())
        .axis_desc_style(("sans-serif", 13).into_font().color(&TEXT_COLOR))
        .draw()?;
    if scale == Scale::Log {
        let tick_font = label_font.pos(Pos::new(HPos::Right, VPos::Center));
        for v in ticks_125(lo, hi) {
            let y = v.ln();
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x_lo, y), (x_hi, y)],
                GRID_COLOR,
            )))?;
            let (px, py) = chart.backend_coord(&(x_lo, y));
            chart_area.draw(&PathElement::new(vec![(px - 5, py), (px, py)], TEXT_COLOR))?;
            chart_area.draw(&Text::new(
                format!("{v:.0}"),
                (px - 8, py),
                tick_font.clone(),
            ))?;
        }
    }

    // Reference lines first, so data draws on top.
    if let Some(c) = d.ceiling.and_then(|c| scale.y(c)) {
        chart.draw_series(DashedLineSeries::new(
            vec![(x_lo, c), (x_hi, c)],
            8,
            4,
            CEILING_COLOR.stroke_width(2),
        ))?;
    }
    if let Some(c) = d.cpu_limit.and_then(|c| scale.y(c)) {
        chart.draw_series(DashedLineSeries::new(
            vec![(x_lo, c), (x_hi, c)],
            3,
            3,
            CPU_LIMIT_COLOR.stroke_width(2),
        ))?;
    }
    if let Some(b) = d.baseline.and_then(|b| scale.y(b)) {
        chart.draw_series(DashedLineSeries::new(
            vec![(x_lo, b), (x_hi, b)],
            6,
            4,
            BASELINE_COLOR.stroke_width(1),
        ))?;
    }
    let incumbent: Vec<(f64, f64)> = d
        .incumbent
        .iter()
        .filter_map(|&(x, y)| Some((x, scale.y(y)?)))
        .collect();
    if incumbent.len() >= 2 {
        chart.draw_series(LineSeries::new(incumbent, INCUMBENT_COLOR.stroke_width(2)))?;
    }
    for m in &d.markers {
        let Some(y) = scale.y(m.y) else { continue };
        let p = (m.x, y);
        match m.decision {
            Decision::Kept | Decision::KeptCheaper => {
                chart.draw_series(std::iter::once(Circle::new(p, 6, KEPT_COLOR.filled())))?;
            }
            Decision::Reverted => {
                chart.draw_series(std::iter::once(Circle::new(p, 5, REVERTED_COLOR.filled())))?;
            }
            Decision::Rejected | Decision::Failed => {
                chart.draw_series(std::iter::once(Cross::new(
                    p,
                    5,
                    REJECTED_COLOR.stroke_width(2),
                )))?;
            }
            Decision::NoChange => {
                chart.draw_series(std::iter::once(Circle::new(
                    p,
                    4,
                    REVERTED_COLOR.stroke_width(1),
                )))?;
            }
        }
    }

    // Measurements over the markers, so they stay visible.
    chart.draw_series(d.spreads.iter().filter_map(|&(x, lo, hi)| {
        Some(PathElement::new(
            vec![(x, scale.y(lo)?), (x, scale.y(hi)?)],
            SAMPLE_COLOR.mix(0.6).stroke_width(2),
        ))
    }))?;
    chart.draw_series(d.samples.iter().filter_map(|&(x, y)| {
        Some(Circle::new(
            (x, scale.y(y)?),
            2,
            SAMPLE_COLOR.mix(0.7).filled(),
        ))
    }))?;

    draw_legend(&legend_area, l, &d)?;
    root.present()?;
    Ok(())
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw_legend(area: &Area<'_>, l: &Labels, d: &PlotData) -> DrawResult<()> {
    let font = ("sans-serif", 13)
        .into_font()
        .color(&TEXT_COLOR)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let x0 = 8;
    let x_text = 40;
    let mut y = 60;
    let dy = 24;
    let label = |area: &Area<'_>, y: i32, s: String| -> DrawResult<()> {
        area.draw(&Text::new(s, (x_text, y), font.clone()))?;
        Ok(())
    };
    let sym = (x0 + 12, 0);

    area.draw(&Circle::new((sym.0, y), 2, SAMPLE_COLOR.mix(0.7).filled()))?;
    label(area, y, l.plot_samples.to_string())?;
    y += dy;
    area.draw(&PathElement::new(
        vec![(sym.0, y - 7), (sym.0, y + 7)],
        SAMPLE_COLOR.mix(0.6).stroke_width(2),
    ))?;
    label(area, y, l.plot_spread.to_string())?;
    y += dy;
    area.draw(&Circle::new((sym.0, y), 6, KEPT_COLOR.filled()))?;
    label(area, y, l.kept.to_string())?;
    y += dy;
    area.draw(&Circle::new((sym.0, y), 5, REVERTED_COLOR.filled()))?;
    label(area, y, l.reverted.to_string())?;
    y += dy;
    area.draw(&Cross::new((sym.0, y), 5, REJECTED_COLOR.stroke_width(2)))?;
    label(area, y, l.plot_rejected_failed.to_string())?;
    y += dy;
    area.draw(&Circle::new((sym.0, y), 4, REVERTED_COLOR.stroke_width(1)))?;
    label(area, y, l.no_change.to_string())?;
    y += dy;
    area.draw(&PathElement::new(
        vec![(x0, y), (x0 + 24, y)],
        INCUMBENT_COLOR.stroke_width(2),
    ))?;
    label(area, y, l.plot_incumbent.to_string())?;
    if let Some(b) = d.baseline {
        y += dy;
        area.draw(&DashedPathElement::new(
            vec![(x0, y), (x0 + 24, y)],
            6,
            4,
            BASELINE_COLOR.stroke_width(1),
        ))?;
        label(
            area,
            y,
            format!("{} {}", l.plot_baseline, text::sps(Some(b))),
        )?;
    }
    if let Some(c) = d.ceiling {
        y += dy;
        area.draw(&DashedPathElement::new(
            vec![(x0, y), (x0 + 24, y)],
            8,
            4,
            CEILING_COLOR.stroke_width(2),
        ))?;
        label(
            area,
            y,
            format!("{} {}", l.plot_ceiling, text::sps(Some(c))),
        )?;
    }
    if let Some(c) = d.cpu_limit {
        y += dy;
        area.draw(&DashedPathElement::new(
            vec![(x0, y), (x0 + 24, y)],
            3,
            3,
            CPU_LIMIT_COLOR.stroke_width(2),
        ))?;
        label(
            area,
            y,
            format!(
                "{} {}",
                if d.cpu_limit_with_restarts {
                    l.plot_epoch_limit
                } else {
                    l.plot_cpu_limit
                },
                text::sps(Some(c))
            ),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{AgentInfo, TurnRow};

    fn run(baseline: f64, kept_after: f64, ceiling: Option<f64>) -> RunReport {
        RunReport {
            schema_version: 1,
            run_id: "r".into(),
            project: "p".into(),
            agent: "builtin".into(),
            language: "en".into(),
            started_at: String::new(),
            baseline_sps: baseline,
            baseline_samples: vec![baseline],
            baseline_data_wait_share: None,
            final_sps: kept_after,
            final_data_wait_share: None,
            speedup: kept_after / baseline,
            speedup_ci: None,
            final_interval: None,
            numerics_yardstick: None,
            ceiling_sps: ceiling,
            final_share_of_ceiling: None,
            stop_reason: String::new(),
            interrupted: false,
            total_cost_usd: 0.0,
            agent_time_ms: 0,
            wall_s: 0.0,
            bench_runs: 0,
            turns: vec![TurnRow {
                turn: 1,
                change: "num_workers 0 → 4".into(),
                file: None,
                before_sps: Some(baseline),
                after_sps: Some(kept_after),
                ratio: Some(kept_after / baseline),
                ratio_ci: None,
                runs: 4,
                decision: Decision::Kept,
                reason: String::new(),
                agent: AgentInfo::default(),
                candidate_samples: vec![kept_after * 0.98, kept_after * 1.02],
                incumbent_samples: vec![baseline],
                data_wait_share: None,
                confirmation: None,
            }],
            kept_diff: String::new(),
            data_path: None,
            measured_loader: None,
            knob_sources: Vec::new(),
            not_editable_knobs: Vec::new(),
            window: None,
            limits: None,
            costs: None,
            data_check: None,
            profile_unavailable: None,
            run_command: None,
            whole_command: None,
            machine_load: None,
            time: None,
            compute_not_tried: vec![],
        }
    }

    #[test]
    fn the_cpu_limit_is_a_line_of_its_own_in_the_legend() {
        let mut r = run(400.0, 800.0, Some(1_000.0));
        assert!(!render_plot_svg(&r).contains("CPU limit"));
        r.limits = Some(crate::bench::limits::ThroughputLimits {
            cpu_limit_sps: Some(900.0),
            ..Default::default()
        });
        let svg = render_plot_svg(&r);
        assert!(
            svg.contains("CPU limit 900.0"),
            "no CPU limit in the legend"
        );
        // Within the axis: the limit is drawn, not clipped.
        assert!(plot_data(&r).y_max >= 900.0);
        // With the epochs' restarts counted, that lower line instead.
        r.limits.as_mut().unwrap().epoch_limit_sps = Some(700.0);
        let svg = render_plot_svg(&r);
        assert!(svg.contains("CPU limit with epoch restarts 700.0"), "{svg}");
        assert!(!svg.contains("CPU limit 900.0"));
    }

    #[test]
    fn ticks_are_1_2_5_within_the_range() {
        assert_eq!(
            ticks_125(300.0, 45_000.0),
            [500.0, 1000.0, 2000.0, 5000.0, 10_000.0, 20_000.0]
        );
        assert_eq!(ticks_125(1.0, 10.0), [1.0, 2.0, 5.0, 10.0]);
        assert!(ticks_125(0.0, 10.0).is_empty());
        assert!(ticks_125(5.0, f64::INFINITY).is_empty());
    }

    #[test]
    fn a_wide_range_gets_a_logarithmic_axis() {
        // Baseline 400, ceiling 38000: linear would flatten every turn at the bottom.
        let svg = render_plot_svg(&run(400.0, 800.0, Some(38_000.0)));
        assert!(svg.contains("samples/sec (log scale)"), "no log axis title");
        for tick in [
            ">\n500\n<",
            ">\n1000\n<",
            ">\n2000\n<",
            ">\n5000\n<",
            ">\n10000\n<",
            ">\n20000\n<",
        ] {
            assert!(svg.contains(tick), "no tick {tick}");
        }
        // The baseline sits well above the bottom edge: equal ratios, equal heights.
        let d = plot_data(&run(400.0, 800.0, Some(38_000.0)));
        assert_eq!(Scale::of(&d), Scale::Log);
        // A near ceiling keeps the linear axis from zero.
        let d = plot_data(&run(400.0, 800.0, Some(1_000.0)));
        assert_eq!(Scale::of(&d), Scale::Linear);
        let svg = render_plot_svg(&run(400.0, 800.0, Some(1_000.0)));
        assert!(
            !svg.contains("log scale") && svg.contains(">\n0\n<"),
            "linear axis should start at 0"
        );
    }

    #[test]
    fn a_logarithmic_axis_skips_what_it_cannot_show() {
        let mut r = run(400.0, 800.0, Some(38_000.0));
        r.turns[0].candidate_samples.push(0.0);
        let svg = render_plot_svg(&r);
        assert!(!svg.contains("plot unavailable") && svg.contains("log scale"));
    }

    #[test]
    fn japanese_log_axis_title() {
        let mut r = run(400.0, 800.0, Some(38_000.0));
        r.language = "ja".into();
        assert!(render_plot_svg(&r).contains("samples/sec (対数目盛)"));
    }
}

//! `plot.svg`: samples/sec by turn. Every measurement is a small point, each
//! turn's candidate spread a vertical min–max bar, each decision a marker
//! (kept: filled green circle, reverted: grey circle, rejected/failed: red
//! cross, no change: hollow grey circle), the incumbent a step line, and the
//! baseline and ceiling horizontal dashed lines. The legend sits in its own
//! panel to the right so it never covers data.
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

/// Width and height of the SVG in pixels.
pub const PLOT_SIZE: (u32, u32) = (880, 460);
const LEGEND_WIDTH: u32 = 200;

// Colours (the SVG writes them as upper-case hex, e.g. "#1F77B4").
pub(crate) const BASELINE_COLOR: RGBColor = RGBColor(0x1F, 0x77, 0xB4);
pub(crate) const CEILING_COLOR: RGBColor = RGBColor(0x94, 0x67, 0xBD);
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
    baseline: Option<f64>,
    ceiling: Option<f64>,
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
        if t.decision == Decision::Kept {
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
    let mut see = |v: f64| {
        if v.is_finite() {
            y_max = y_max.max(v);
        }
    };
    samples.iter().for_each(|p| see(p.1));
    markers.iter().for_each(|m| see(m.y));
    baseline.into_iter().for_each(&mut see);
    ceiling.into_iter().for_each(&mut see);
    see(r.final_sps);
    for t in &r.turns {
        t.before_sps.into_iter().for_each(&mut see);
        t.incumbent_samples.iter().copied().for_each(&mut see);
    }
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };

    PlotData {
        max_turn,
        y_max,
        baseline,
        ceiling,
        samples,
        spreads,
        markers,
        incumbent,
    }
}

fn draw(r: &RunReport, buf: &mut String) -> DrawResult<()> {
    let l = labels(r);
    let d = plot_data(r);
    let root = SVGBackend::with_string(buf, PLOT_SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (chart_area, legend_area) = root.split_horizontally(PLOT_SIZE.0 - LEGEND_WIDTH);

    let x_lo = -0.5;
    let x_hi = f64::from(d.max_turn) + 0.5;
    // Plotters picks the nicest step that gives at most this many labels;
    // the range's width is max_turn + 1, so the step is 1 up to 15 turns.
    let x_labels = (d.max_turn as usize + 1).min(15);

    let mut chart = ChartBuilder::on(&chart_area)
        .caption(l.plot, ("sans-serif", 18).into_font().color(&TEXT_COLOR))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x_lo..x_hi, 0f64..d.y_max)?;

    chart
        .configure_mesh()
        .x_desc(l.plot_x)
        .y_desc(l.plot_y)
        .x_labels(x_labels)
        .y_labels(8)
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
        .label_style(("sans-serif", 12).into_font().color(&TEXT_COLOR))
        .axis_desc_style(("sans-serif", 13).into_font().color(&TEXT_COLOR))
        .draw()?;

    // Reference lines first, so data draws on top.
    if let Some(c) = d.ceiling {
        chart.draw_series(DashedLineSeries::new(
            vec![(x_lo, c), (x_hi, c)],
            8,
            4,
            CEILING_COLOR.stroke_width(2),
        ))?;
    }
    if let Some(b) = d.baseline {
        chart.draw_series(DashedLineSeries::new(
            vec![(x_lo, b), (x_hi, b)],
            6,
            4,
            BASELINE_COLOR.stroke_width(1),
        ))?;
    }
    if d.incumbent.len() >= 2 {
        chart.draw_series(LineSeries::new(
            d.incumbent.iter().copied(),
            INCUMBENT_COLOR.stroke_width(2),
        ))?;
    }
    for m in &d.markers {
        let p = (m.x, m.y);
        match m.decision {
            Decision::Kept => {
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
    chart.draw_series(d.spreads.iter().map(|&(x, lo, hi)| {
        PathElement::new(
            vec![(x, lo), (x, hi)],
            SAMPLE_COLOR.mix(0.6).stroke_width(2),
        )
    }))?;
    chart.draw_series(
        d.samples
            .iter()
            .map(|&p| Circle::new(p, 2, SAMPLE_COLOR.mix(0.7).filled())),
    )?;

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
    Ok(())
}

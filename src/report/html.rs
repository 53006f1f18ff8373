//! `report.html`: one self-contained page (inline CSS, inline SVG, no
//! scripts, no external resources) with the headline, the plot, the
//! before/after table (`#turns`) and the kept diff.

use std::fmt::Write as _;

use super::labels::{labels, Labels};
use super::markdown::{columns, headline_items, row_cells};
use super::model::RunReport;
use super::text::{html_escape as esc, md_inline};

const CSS: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#222;line-height:1.45}
h1{font-size:1.5rem;margin-bottom:.2rem}
h2{font-size:1.15rem;margin-top:2rem}
.meta{color:#666;margin-top:0}
#headline dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;margin:1rem 0}
#headline dt{font-weight:600}
#headline dd{margin:0;font-variant-numeric:tabular-nums}
.interrupted{background:#fff4e5;border-left:4px solid #ff7f0e;padding:.4rem .8rem}
#plot{margin:1rem 0;overflow-x:auto}
#plot svg{max-width:100%;height:auto}
table{border-collapse:collapse;width:100%;font-size:.92rem}
th,td{border-bottom:1px solid #ddd;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f5f5f5}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.decision{font-weight:600;white-space:nowrap}
td.kept{color:#1a7f1a}
td.reverted{color:#6b6b6b}
td.rejected,td.failed{color:#c62828}
td.no_change{color:#8a8a8a;font-style:italic}
tr.kept{background:#f0faf0}
tr.rejected,tr.failed{background:#fdf1f1}
pre.diff{background:#f8f8f8;border:1px solid #e2e2e2;padding:.75rem;overflow-x:auto;font-size:.85rem;line-height:1.35}
pre.diff .add{color:#1a7f1a;background:#e9f7e9}
pre.diff .del{color:#c62828;background:#fdecec}
pre.diff .hunk{color:#6f42c1}
pre.diff .file{color:#444;font-weight:600}
";

/// Renders the run as one self-contained HTML page. `plot_svg` is embedded
/// inline as given (normally [`super::render_plot_svg`]'s output); an XML
/// declaration or doctype in front of it is dropped.
pub fn render_html(r: &RunReport, plot_svg: &str) -> String {
    let l = labels(r);
    let mut out = String::with_capacity(16 * 1024 + plot_svg.len());
    let title = format!("{} — {}", l.title, md_inline(&r.run_id));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"{}\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{}</style>\n</head>\n<body>\n",
        l.lang,
        esc(&title),
        CSS
    );
    headline(&mut out, r, l, &title);
    plot(&mut out, l, plot_svg);
    table(&mut out, r, l);
    costs_table(&mut out, r, l);
    kept_diff(&mut out, r, l);
    out.push_str("</body>\n</html>\n");
    out
}

fn headline(out: &mut String, r: &RunReport, l: &Labels, title: &str) {
    let _ = writeln!(out, "<header>\n<h1>{}</h1>", esc(title));
    let _ = writeln!(
        out,
        "<p class=\"meta\">{}: {} · {}: {} · {}: {}</p>\n</header>",
        esc(l.project),
        esc(&md_inline(&r.project)),
        esc(l.agent),
        esc(&md_inline(&r.agent)),
        esc(l.started),
        esc(&md_inline(&r.started_at)),
    );
    out.push_str("<section id=\"headline\">\n<dl>\n");
    for (label, value) in headline_items(r, l) {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", esc(label), esc(&value));
    }
    out.push_str("</dl>\n");
    if r.interrupted {
        let _ = writeln!(
            out,
            "<p class=\"interrupted\"><strong>{}</strong> — {}</p>",
            esc(l.interrupted),
            esc(l.interrupted_note)
        );
    }
    out.push_str("</section>\n");
}

/// The SVG without anything XML puts before the root element.
fn svg_body(svg: &str) -> &str {
    let mut s = svg.trim_start_matches('\u{feff}').trim_start();
    loop {
        if s.starts_with("<?") {
            s = s.find("?>").map_or("", |i| &s[i + 2..]).trim_start();
        } else if s.starts_with("<!DOCTYPE") || s.starts_with("<!doctype") {
            s = s.find('>').map_or("", |i| &s[i + 1..]).trim_start();
        } else {
            return s.trim_end();
        }
    }
}

fn plot(out: &mut String, l: &Labels, plot_svg: &str) {
    let _ = writeln!(out, "<h2>{}</h2>", esc(l.plot));
    let _ = writeln!(
        out,
        "<figure id=\"plot\">\n{}\n</figure>",
        svg_body(plot_svg)
    );
}

fn table(out: &mut String, r: &RunReport, l: &Labels) {
    // Columns holding numbers are right-aligned.
    const NUMERIC: [bool; 9] = [true, false, true, true, true, true, true, false, false];
    let _ = writeln!(out, "<h2>{}</h2>", esc(l.turns));
    out.push_str("<table id=\"turns\">\n<thead><tr>");
    for c in columns(l) {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for t in &r.turns {
        let d = t.decision.as_str();
        let _ = write!(out, "<tr class=\"{d}\">");
        for (i, cell) in row_cells(t, l).iter().enumerate() {
            let class = if i == 7 {
                format!(" class=\"decision {d}\"")
            } else if NUMERIC[i] {
                " class=\"num\"".to_string()
            } else {
                String::new()
            };
            let _ = write!(out, "<td{class}>{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    if r.turns.is_empty() {
        let _ = writeln!(
            out,
            "<tr><td colspan=\"9\"><em>{}</em></td></tr>",
            esc(l.no_turns)
        );
    }
    out.push_str("</tbody>\n</table>\n");
}

/// Each state's memory and CPU (`#costs`; nothing without figures).
fn costs_table(out: &mut String, r: &RunReport, l: &Labels) {
    use super::costs;
    let rows = costs::rows(r, l);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h2>{}</h2>\n<p>{}</p>\n<table id=\"costs\">\n<thead><tr>",
        esc(l.costs),
        esc(l.costs_note)
    );
    for c in costs::columns(l) {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        let _ = write!(out, "<tr class=\"{}\">", row.class);
        for (i, cell) in row.cells.iter().enumerate() {
            let class = if costs::NUMERIC[i] {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

fn diff_line_class(line: &str) -> &'static str {
    if line.starts_with("+++ ")
        || line.starts_with("--- ")
        || line.starts_with("diff ")
        || line.starts_with("index ")
    {
        "file"
    } else if line.starts_with("@@") {
        "hunk"
    } else if line.starts_with('+') {
        "add"
    } else if line.starts_with('-') {
        "del"
    } else {
        "ctx"
    }
}

fn kept_diff(out: &mut String, r: &RunReport, l: &Labels) {
    let _ = writeln!(
        out,
        "<section id=\"kept-changes\">\n<h2>{}</h2>",
        esc(l.kept_changes)
    );
    if r.kept_diff.trim().is_empty() {
        let _ = writeln!(out, "<p>{}</p>", esc(l.none));
    } else {
        out.push_str("<pre class=\"diff\">");
        for line in r.kept_diff.lines() {
            let _ = writeln!(
                out,
                "<span class=\"{}\">{}</span>",
                diff_line_class(line),
                esc(line)
            );
        }
        out.push_str("</pre>\n");
    }
    out.push_str("</section>\n");
}

//! Pure renderers of a run: Markdown, JSON, HTML, SVG plot. They read a
//! [`model::RunReport`] and return text; nothing here touches the disk.
pub mod model;
pub use model::*;

pub mod agents;
pub(crate) mod costs;
pub mod html;
pub mod json;
pub mod labels;
pub mod markdown;
pub mod plot;
mod text;

pub use html::render_html;
pub use json::render_json;
pub use labels::{labels_for, Labels};
pub use markdown::render_markdown;
pub use plot::render_plot_svg;

#[cfg(test)]
mod tests;

/// A report format that `tuneloop report --format` can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    Markdown,
    Json,
    Html,
}

impl Format {
    /// The usual file extension: `md`, `json`, `html`.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Markdown => "md",
            Format::Json => "json",
            Format::Html => "html",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    /// Accepts `md`/`markdown`, `json`, `html`/`htm` (any case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "md" | "markdown" => Ok(Format::Markdown),
            "json" => Ok(Format::Json),
            "html" | "htm" => Ok(Format::Html),
            other => Err(format!(
                "unknown report format `{other}` (expected md, json or html)"
            )),
        }
    }
}

/// Renders a run in one format. HTML embeds [`render_plot_svg`] inline.
pub fn render(r: &RunReport, f: Format) -> String {
    match f {
        Format::Markdown => render_markdown(r),
        Format::Json => render_json(r),
        Format::Html => render_html(r, &render_plot_svg(r)),
    }
}

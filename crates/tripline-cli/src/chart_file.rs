//! `--chart FILE`: where a chart goes and in which format.
//!
//! The charts are drawn as SVG, which is exact, small and diffable; a
//! `.png` path gets the same SVG rasterised by resvg (pure Rust, so the
//! command needs no system library), at twice the SVG's size so that the
//! 9–10 px labels stay readable. Any other extension is refused before any
//! work: bytes of one format under another's name open as a broken image.
//!
//! The rasteriser is the cargo feature `charts` (on by default): a build
//! that leaves it out (the README's quick first build) still writes SVG and
//! refuses a `.png` up front, saying how to get it.

use std::path::Path;

#[cfg(feature = "charts")]
use resvg::{tiny_skia, usvg};

use crate::CliError;

/// Pixels per SVG unit in a PNG.
#[cfg(feature = "charts")]
const PNG_SCALE: f32 = 2.0;

/// Families the charts name, then common sans-serif families a system is
/// likely to have, tried in order for the generic `sans-serif`.
#[cfg(feature = "charts")]
const SANS_SERIF: [&str; 6] = [
    "Helvetica",
    "Arial",
    "Liberation Sans",
    "DejaVu Sans",
    "Noto Sans",
    "FreeSans",
];

/// A chart file's format, from its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChartFormat {
    Svg,
    Png,
}

/// The format of `--chart PATH`, or an input error (exit status 2) naming
/// the extensions understood.
pub(crate) fn format_of(path: &Path) -> Result<ChartFormat, CliError> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if ext.eq_ignore_ascii_case("svg") {
        Ok(ChartFormat::Svg)
    } else if ext.eq_ignore_ascii_case("png") {
        Ok(ChartFormat::Png)
    } else {
        Err(CliError::input(format!(
            "--chart {}: charts are written as SVG or PNG; name the file .svg or .png",
            path.display()
        )))
    }
}

/// Checks `--chart` before any work, so a typo'd extension costs nothing.
pub(crate) fn check(path: Option<&Path>) -> Result<(), CliError> {
    let Some(path) = path else { return Ok(()) };
    match format_of(path)? {
        ChartFormat::Png if !cfg!(feature = "charts") => Err(CliError::input(format!(
            "--chart {}: this tripline was built without PNG charts (cargo feature `charts`); \
             name the file .svg, or build with the default features",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// Writes `svg` to `path` in the format its extension names.
pub(crate) fn write(path: &Path, svg: &str) -> Result<(), CliError> {
    let bytes = match format_of(path)? {
        ChartFormat::Svg => svg.as_bytes().to_vec(),
        ChartFormat::Png => png(svg).map_err(|e| {
            CliError::other(format!("cannot draw the chart {}: {e}", path.display()))
        })?,
    };
    std::fs::write(path, bytes)
        .map_err(|e| CliError::other(format!("cannot write the chart to {}: {e}", path.display())))
}

/// `svg` rasterised as a PNG at [`PNG_SCALE`]. Text needs a font: without
/// any system font resvg would silently draw a chart with no labels, so
/// that is an error saying what to install instead.
#[cfg(feature = "charts")]
fn png(svg: &str) -> Result<Vec<u8>, String> {
    let mut options = usvg::Options::default();
    let db = options.fontdb_mut();
    db.load_system_fonts();
    let has = |name: &str| {
        db.faces()
            .any(|f| f.families.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)))
    };
    let family = SANS_SERIF
        .iter()
        .find(|f| has(f))
        .map(|f| (*f).to_owned())
        .or_else(|| {
            db.faces()
                .find_map(|f| f.families.first().map(|(n, _)| n.clone()))
        })
        .ok_or(
            "no system font to draw the chart's text with (install one, e.g. the \
             fonts-dejavu-core package, or write the chart as .svg)",
        )?;
    db.set_sans_serif_family(family);
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| e.to_string())?;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(PNG_SCALE)
        .ok_or("the chart is too large for a PNG")?;
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or("the chart is too large for a PNG")?;
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(PNG_SCALE, PNG_SCALE),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| e.to_string())
}

/// Without the `charts` feature [`check`] refuses a `.png` before any work.
#[cfg(not(feature = "charts"))]
fn png(_svg: &str) -> Result<Vec<u8>, String> {
    Err("this tripline was built without PNG charts (cargo feature `charts`)".to_owned())
}

//! SVG plot of a bench report (placeholder until drawn).
use std::path::Path;

use super::report::BenchReport;

/// Draws `report` to `path`.
///
/// # Errors
/// Always, for now.
pub fn draw(_report: &BenchReport, _path: &Path) -> Result<(), String> {
    Err("plotting is not built yet".into())
}

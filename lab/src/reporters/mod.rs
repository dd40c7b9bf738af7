//! Reporters: a finished [`Report`] rendered for people ([`Report::to_human`]) or for CI
//! (`json`, `junit`). They take any report, whichever command filled it (`lab run`, `lab fuzz`),
//! and never look at how the rows were produced.

mod json;
mod junit;

use std::path::Path;

use crate::report::Report;

pub use json::SCHEMA_VERSION;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The table, then failures and skips (colour is the caller's business).
    Human,
    /// The JSON schema of docs/report-schema.md.
    Json,
    /// JUnit XML (the Jenkins/Ant schema GitHub, GitLab and Jenkins read).
    Junit,
}

impl Format {
    /// Every format, in `--format` order.
    pub const ALL: [Format; 3] = [Format::Human, Format::Json, Format::Junit];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Human => "human",
            Format::Json => "json",
            Format::Junit => "junit",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Errors while rendering or writing a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The JUnit serializer failed.
    #[error("JUnit XML: {0}")]
    Junit(#[from] quick_junit::SerializeError),
    /// The JSON serializer failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The output file could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// Renders `report` in `format` without colour. `command` names the run in the output (`"run"`,
/// `"fuzz"`): the JUnit report is called `kernel-lab <command>` and the JSON has it in `command`.
///
/// # Errors
/// Only a serializer failure.
pub fn render(report: &Report, format: Format, command: &str) -> Result<String, ReportError> {
    Ok(match format {
        Format::Human => report.to_human(),
        Format::Json => json::render(report, command)?,
        Format::Junit => junit::render(report, command)?,
    })
}

/// Renders `report` into the file at `path` (created or replaced).
///
/// # Errors
/// A serializer failure, or the file's I/O error naming the file.
pub fn write(report: &Report, format: Format, command: &str, path: &Path) -> Result<(), ReportError> {
    let text = render(report, format, command)?;
    std::fs::write(path, text).map_err(|source| ReportError::Io { path: path.to_path_buf(), source })
}

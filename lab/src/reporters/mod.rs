//! Reporters: a finished [`Report`] rendered for people ([`Report::to_human`]) or for CI
//! (`json`, `junit`, `sarif`). They take any report, whichever command filled it (`lab run`, `lab fuzz`),
//! and never look at how the rows were produced.

mod human;
mod json;
mod junit;
mod sarif;

use std::path::Path;

use crate::report::Report;

pub use json::SCHEMA_VERSION;
pub use junit::FAILURES_LISTED;
pub use sarif::{RESULTS_LISTED as SARIF_RESULTS_LISTED, SCHEMA_URI as SARIF_SCHEMA_URI};

/// An output format (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The table, then failures and skips.
    Human,
    /// The JSON schema of docs/report-schema.md.
    Json,
    /// JUnit XML (the Jenkins/Ant schema GitHub, GitLab and Jenkins read).
    Junit,
    /// SARIF 2.1.0 (OASIS), for GitHub and GitLab code scanning: a result per image finding
    /// and per failed case, located at the kernel source line where DWARF maps it.
    Sarif,
}

impl Format {
    /// Every format, in `--format` order.
    pub const ALL: [Format; 4] = [Format::Human, Format::Json, Format::Junit, Format::Sarif];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Human => "human",
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Sarif => "sarif",
        }
    }
}

/// How many JUnit test cases the rows become (`--junit-cases`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum JunitCases {
    /// One per row (variant × backend × kernel × set, or fuzz target), failures listed inside
    /// (capped with a count); a variant × backend skipped whole is one skipped case.
    #[default]
    Rows,
    /// One per case.
    All,
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
    render_with(report, format, command, JunitCases::default())
}

/// [`render`] with the JUnit granularity `cases`.
///
/// # Errors
/// Only a serializer failure.
pub fn render_with(report: &Report, format: Format, command: &str, cases: JunitCases) -> Result<String, ReportError> {
    let mut text = Vec::new();
    render_into(report, format, command, cases, &mut text)?;
    // Every renderer writes UTF-8 (`String`s and serde_json's output).
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// [`render_with`] into `out`, as it renders: the JSON report is streamed, not built whole.
///
/// # Errors
/// A serializer failure, or `out`'s I/O error ([`ReportError::Json`] for the JSON format; see
/// [`ReportError::into_io`]).
pub fn render_into(
    report: &Report,
    format: Format,
    command: &str,
    cases: JunitCases,
    out: &mut dyn std::io::Write,
) -> Result<(), ReportError> {
    let io = |source| ReportError::Io { path: std::path::PathBuf::new(), source };
    match format {
        Format::Human => out.write_all(report.to_human().as_bytes()).map_err(io),
        Format::Json => Ok(json::render_into(report, command, out)?),
        Format::Junit => out.write_all(junit::render(report, command, cases)?.as_bytes()).map_err(io),
        Format::Sarif => Ok(sarif::render_into(report, command, out)?),
    }
}

/// Renders `report` into the file at `path`, atomically: a temporary file in the same folder,
/// renamed over `path` once complete, so a reader never sees half a report and an interrupted
/// write leaves no file that looks finished.
///
/// # Errors
/// A serializer failure, or the file's I/O error naming the file.
pub fn write(report: &Report, format: Format, command: &str, path: &Path) -> Result<(), ReportError> {
    write_with(report, format, command, JunitCases::default(), path)
}

/// [`write()`] with the JUnit granularity `cases`: written to a temporary file beside `path`, then
/// renamed over it, so a reader never sees half a report. The file gets the mode the umask gives
/// any new file (0644 under umask 022). A `path` that is not a regular file
/// (`/dev/null`, `/dev/stdout`, a FIFO) is written in place: a rename would replace the device
/// node with a file.
///
/// # Errors
/// A serializer failure, or the file's I/O error naming the file.
pub fn write_with(
    report: &Report,
    format: Format,
    command: &str,
    cases: JunitCases,
    path: &Path,
) -> Result<(), ReportError> {
    use std::io::Write as _;
    let io = |source| ReportError::Io { path: path.to_path_buf(), source };
    let render = |out: &mut dyn std::io::Write| {
        let mut buf = std::io::BufWriter::new(out);
        render_into(report, format, command, cases, &mut buf).map_err(|e| e.into_io(path))?;
        buf.flush().map_err(io)
    };
    if is_special(path) {
        return render(&mut open_in_place(path).map_err(io)?);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Mode 0666 through the umask, as any new file gets (tempfile's default is 0600).
    let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o666);
    let mut tmp = tempfile::Builder::new().prefix(".lab-report-").permissions(mode).tempfile_in(dir).map_err(io)?;
    render(tmp.as_file_mut())?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

impl ReportError {
    /// This error with an I/O failure (also one the JSON serializer met while writing) as
    /// [`ReportError::Io`] naming `path`.
    pub fn into_io(self, path: &Path) -> ReportError {
        match self {
            ReportError::Json(e) if e.is_io() => ReportError::Io { path: path.to_path_buf(), source: e.into() },
            ReportError::Io { source, .. } => ReportError::Io { path: path.to_path_buf(), source },
            other => other,
        }
    }
}

/// Removes a report left at `path` by an earlier run, so that a run that dies before writing
/// its own leaves no stale verdict behind. A missing file is fine.
///
/// # Errors
/// The file exists and cannot be removed.
pub fn remove_stale(path: &Path) -> Result<(), ReportError> {
    if is_special(path) {
        return Ok(()); // a device or FIFO holds no stale report, and must not be unlinked
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(ReportError::Io { path: path.to_path_buf(), source: e })
        }
        _ => Ok(()),
    }
}

/// Opens the device or FIFO at `path` for writing in place. The open does not wait for a
/// reader: a FIFO nobody reads is an error (ENXIO), not a lab blocked for ever after its run,
/// deaf to SIGTERM.
fn open_in_place(path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt as _;
    let nonblock = OFlags::NONBLOCK.bits() as i32;
    let f = std::fs::OpenOptions::new().write(true).custom_flags(nonblock).open(path).map_err(|e| {
        if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) {
            std::io::Error::other("no process has this FIFO open for reading")
        } else {
            e
        }
    })?;
    // Blocking again for the writes themselves: a reader may take the text slower than it comes.
    let flags = rustix::fs::fcntl_getfl(&f)?;
    rustix::fs::fcntl_setfl(&f, flags - OFlags::NONBLOCK)?;
    Ok(f)
}

/// Whether `path` (symlinks followed) exists and is not a regular file: a device such as
/// `/dev/null`, a FIFO, a socket or a folder.
fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.file_type().is_file())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::BackendKind;
    use crate::finding::{Class, Finding};
    use crate::report::{CaseOutcome, Row, Verdict};
    use crate::variant::Kernel;

    /// A row of 2 passed cases, 1 failed and 3 skipped, built case by case.
    fn sample_report() -> Report {
        let mut row = Row {
            elapsed: Duration::from_millis(5),
            ..Row::for_set("aarch64", BackendKind::Qemu, Kernel::Poly1305, "fuzz")
        };
        let bounds = vec![Finding::new(Class::Bounds, "limb 2 is 0x4000000, above 2^26")];
        let verdicts = [Verdict::Passed, Verdict::Passed, Verdict::Failed(bounds)]
            .into_iter()
            .chain(std::iter::repeat_n(Verdict::Skipped("campaign ended".into()), 3));
        for (i, verdict) in verdicts.enumerate() {
            let (name, msg_len) = if i == 2 { ("shrunk".to_string(), 32) } else { (format!("case {i}"), 0) };
            row.push(CaseOutcome { name, msg_len, time: Duration::ZERO, verdict });
        }
        let replay = Some(crate::replay::Replay { root: None, seed: u64::MAX, options: Vec::new() });
        Report { rows: vec![row], seed: u64::MAX, replay, ..Report::default() }
    }

    #[test]
    fn junit_all_lists_every_case_of_a_row() {
        let xml = render_with(&sample_report(), Format::Junit, "fuzz", JunitCases::All).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let root = doc.root_element();
        let counts: Vec<Option<&str>> =
            ["name", "tests", "failures", "errors", "skipped"].iter().map(|a| root.attribute(*a)).collect();
        // No `skipped` on <testsuites>: the Jenkins schema does not allow it there.
        assert_eq!(counts, [Some("kernel-lab fuzz"), Some("6"), Some("1"), Some("0"), None]);
        let suite = root.first_element_child().unwrap();
        assert_eq!((suite.attribute("name"), suite.attribute("skipped")), (Some("aarch64 on qemu"), Some("3")));
        let failure = doc.descendants().find(|n| n.has_tag_name("failure")).unwrap();
        assert_eq!(failure.attribute("type"), Some("bounds"));
        assert_eq!(failure.parent().unwrap().attribute("name"), Some("shrunk"));
    }

    #[test]
    fn default_junit_is_one_case_per_row_listing_its_failures() {
        let xml = render(&sample_report(), Format::Junit, "fuzz").unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
        assert_eq!(cases.len(), 1, "{xml}");
        assert_eq!(
            (cases[0].attribute("classname"), cases[0].attribute("name"), cases[0].attribute("time")),
            (Some("aarch64.qemu.poly1305"), Some("fuzz"), Some("0.005"))
        );
        let failure = cases[0].children().find(|n| n.has_tag_name("failure")).unwrap();
        assert_eq!(
            failure.attribute("message"),
            Some("1 of 6 cases failed; first: shrunk: limb 2 is 0x4000000, above 2^26")
        );
        let body = failure.text().unwrap();
        assert!(body.contains("shrunk (32 bytes):\n  [bounds] limb 2 is 0x4000000, above 2^26\n"), "{body}");
        assert!(
            body.contains("replay: lab run --seed 18446744073709551615 --variant '=aarch64' --backend qemu --kernel poly1305 --set '=fuzz' --case '=shrunk'"),
            "{body}"
        );
    }

    #[test]
    fn default_junit_caps_the_failures_it_lists_and_counts_the_rest() {
        let mut report = sample_report();
        let row = &mut report.rows[0];
        let failure = row.cases.iter().find(|c| matches!(c.verdict, Verdict::Failed(_))).unwrap().clone();
        row.cases.retain(|c| !matches!(c.verdict, Verdict::Failed(_)));
        for i in 0..FAILURES_LISTED + 5 {
            row.push(CaseOutcome { name: format!("failing {i}"), ..failure.clone() });
        }
        let xml = render(&report, Format::Junit, "run").unwrap();
        assert!(xml.contains("... and 5 more failed cases"), "{xml}");
        assert_eq!(xml.matches("[bounds] limb 2").count(), FAILURES_LISTED, "{xml}");
    }

    /// The sample's failed case is one SARIF result: its class, an error, the case named in the
    /// message, the fuzz replay line, and (no image known) its contract symbol as the place.
    #[test]
    fn sarif_lists_a_failed_case_with_its_class_message_and_replay() {
        let doc: serde_json::Value =
            serde_json::from_str(&render(&sample_report(), Format::Sarif, "fuzz").unwrap()).unwrap();
        assert_eq!((doc["version"].as_str(), doc["$schema"].as_str()), (Some("2.1.0"), Some(SARIF_SCHEMA_URI)));
        let results = doc["runs"][0]["results"].as_array().unwrap();
        assert_eq!(results.len(), 1, "{doc:#}");
        let r = &results[0];
        assert_eq!((r["ruleId"].as_str(), r["level"].as_str()), (Some("bounds"), Some("error")));
        assert_eq!(
            r["message"]["text"],
            "aarch64 on qemu, poly1305 kernel, set fuzz, case shrunk: limb 2 is 0x4000000, above 2^26"
        );
        assert_eq!(
            r["properties"]["replay"],
            "lab fuzz --seed 18446744073709551615 --variant '=aarch64' --backend qemu --kernel poly1305"
        );
        assert_eq!(r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"], "poly1305_processBlocks");
        assert_eq!(doc["runs"][0]["invocations"][0]["properties"]["seed"], "18446744073709551615");
    }

    /// A case the vote blamed on the emulator is a warning, not the kernel's error; results past
    /// the cap are counted in a notification, and an interrupted run did not execute successfully.
    #[test]
    fn sarif_levels_cap_and_interruption() {
        let mut report = sample_report();
        report.rows[0].reattribute(0, Finding::new(Class::EmulatorFault, "qemu returned 1, native 2"));
        let failure = report.rows[0].cases.iter().find(|c| matches!(c.verdict, Verdict::Failed(_))).unwrap().clone();
        for _ in 0..SARIF_RESULTS_LISTED {
            report.rows[0].push(failure.clone());
        }
        report.interrupted = Some(2);
        let doc: serde_json::Value = serde_json::from_str(&render(&report, Format::Sarif, "run").unwrap()).unwrap();
        let run = &doc["runs"][0];
        let results = run["results"].as_array().unwrap();
        assert_eq!(results.len(), SARIF_RESULTS_LISTED);
        assert_eq!(run["properties"]["results_left_out"], 2);
        assert!(results.iter().all(|r| r["level"] == "error"), "kernel failures come first");
        let inv = &run["invocations"][0];
        assert_eq!(inv["executionSuccessful"], false);
        let notes: Vec<&str> = inv["toolExecutionNotifications"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["message"]["text"].as_str().unwrap())
            .collect();
        assert!(notes.iter().any(|n| n.contains("2 more results left out")), "{notes:?}");

        report.rows[0].cases.retain(|c| !matches!(c.verdict, Verdict::Failed(_)));
        let doc: serde_json::Value = serde_json::from_str(&render(&report, Format::Sarif, "run").unwrap()).unwrap();
        let r = &doc["runs"][0]["results"][0];
        assert_eq!((r["ruleId"].as_str(), r["level"].as_str()), (Some("emulator-fault"), Some("warning")));
    }

    #[test]
    fn json_keeps_a_u64_seed_exact_and_lists_every_case() {
        let text = render(&sample_report(), Format::Json, "fuzz").unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["seed"], "18446744073709551615");
        assert_eq!(doc["schema_version"], SCHEMA_VERSION);
        let outcomes: Vec<&str> =
            doc["rows"][0]["cases"].as_array().unwrap().iter().map(|c| c["outcome"].as_str().unwrap()).collect();
        assert_eq!(outcomes, ["passed", "passed", "failed", "skipped", "skipped", "skipped"]);
        assert_eq!(doc["rows"][0]["cases"][5]["skip_reason"], "campaign ended");
    }

    /// An interrupted report says so in every format, exits 128 + signal and never looks green.
    #[test]
    fn an_interrupted_report_says_so_in_every_format() {
        let report = Report { interrupted: Some(15), ..sample_report() };
        assert_eq!(report.status().code(), 143);
        let doc: serde_json::Value = serde_json::from_str(&render(&report, Format::Json, "run").unwrap()).unwrap();
        assert_eq!((doc["status"].as_str(), doc["interrupted"].as_str()), (Some("interrupted"), Some("SIGTERM")));
        assert_eq!(doc["exit_code"], 143);
        let xml = render(&report, Format::Junit, "run").unwrap();
        let junit = roxmltree::Document::parse(&xml).unwrap();
        let error = junit.descendants().find(|n| n.has_tag_name("error")).expect("an <error>");
        assert_eq!(error.attribute("type"), Some("interrupted"));
        assert_eq!(error.parent().unwrap().attribute("name"), Some("interrupted"));
        assert!(report.to_human().contains("INTERRUPTED by SIGTERM"), "{}", report.to_human());
    }

    /// A FIFO (as `/dev/null` or `/dev/stdout`: not a regular file) is written in place and never
    /// unlinked or replaced by a file.
    #[test]
    fn a_fifo_is_written_in_place_not_replaced() {
        use std::os::unix::fs::FileTypeExt as _;
        let (dir, path) = fifo();
        remove_stale(&path).unwrap();
        // The reader is there before the write (a non-blocking open for reading never waits);
        // the small report fits the pipe's buffer.
        let mut reader = {
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path).unwrap()
        };
        write(&sample_report(), Format::Json, "run", &path).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut reader, &mut text).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["schema_version"], SCHEMA_VERSION);
        assert!(std::fs::metadata(&path).unwrap().file_type().is_fifo());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
    }

    /// A FIFO `pipe` in a fresh temporary folder (keep the folder alive while it is used).
    fn fifo() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pipe");
        let fifo_mode = rustix::fs::Mode::from_raw_mode(0o600);
        rustix::fs::mknodat(rustix::fs::CWD, &path, rustix::fs::FileType::Fifo, fifo_mode, 0).expect("mkfifo");
        (dir, path)
    }

    /// A FIFO nobody reads is an error naming the path, at once (not a lab blocked for ever).
    #[test]
    fn a_fifo_without_a_reader_is_an_error_not_a_hang() {
        let (_dir, path) = fifo();
        let err = write(&sample_report(), Format::Json, "run", &path).unwrap_err().to_string();
        assert!(err.contains("pipe") && err.contains("no process has this FIFO open for reading"), "{err}");
    }

    /// `write` replaces an existing file whole and leaves no temporary file behind.
    #[test]
    fn write_replaces_the_file_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "stale").unwrap();
        write(&sample_report(), Format::Json, "run", &path).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(doc["schema_version"], SCHEMA_VERSION);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        remove_stale(&path).unwrap();
        assert!(!path.exists());
        remove_stale(&path).unwrap();
    }

    /// The JSON report is streamed: a write that fails half-way (a full device) is an I/O error
    /// naming the file, in every format.
    #[test]
    fn a_write_failing_while_streaming_names_the_file() {
        for format in Format::ALL {
            let e = write(&sample_report(), format, "run", Path::new("/dev/full")).unwrap_err();
            assert!(matches!(e, ReportError::Io { .. }), "{format:?}: {e:?}");
            assert!(e.to_string().starts_with("/dev/full: "), "{e}");
        }
    }

    #[test]
    fn write_names_the_file_it_cannot_write() {
        let e = write(&sample_report(), Format::Json, "run", Path::new("/nonexistent/dir/r.json")).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/dir/r.json: "), "{e}");
    }
}

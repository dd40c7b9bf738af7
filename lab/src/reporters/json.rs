//! The JSON report (schema in docs/report-schema.md). These structs are the schema: a field is
//! added with a default meaning for old readers, and anything else bumps [`SCHEMA_VERSION`].

use serde::Serialize;

use crate::contract::Family;
use crate::report::{Report, Row, Verdict};

use crate::vocab::envelope::Envelope;
pub use crate::vocab::envelope::SCHEMA_VERSION;

/// The report's fields, inside the shared envelope ([`Envelope`]).
#[derive(Serialize)]
struct JsonReport<'a> {
    /// Decimal string: a u64 is beyond the exact integers of JavaScript's and jq's numbers.
    seed: String,
    elapsed_s: f64,
    status: &'static str,
    exit_code: i32,
    totals: Totals,
    rows: Vec<JsonRow<'a>>,
    vector_errors: Vec<JsonVectorError>,
    setup_errors: &'a [String],
    /// Findings about a whole image (the static ISA and system-call scan); added in version 1
    /// with an empty default.
    image_findings: Vec<JsonImageFinding<'a>>,
    /// The signal that stopped the run (`SIGINT`, `SIGTERM`), null for a finished run; added in
    /// version 2 with `status` "interrupted".
    interrupted: Option<String>,
    /// What the run could not guarantee (unconfined guests); added in version 2.
    warnings: &'a [String],
    /// Variant × backend combinations that cannot exist on this host (native on another
    /// architecture), with the reason; they have no rows. Added in version 2 with an empty
    /// default.
    not_applicable: Vec<JsonNotApplicable<'a>>,
    /// One sentence per variant and kernel that fails at some vector lengths
    /// ([`Report::vector_length_verdicts`]); added within version 2 with an empty default.
    vector_length_verdicts: Vec<String>,
    /// Variants whose every row was skipped: built but run on no backend (the rows' skip
    /// reasons say why). Added in version 2 with an empty default.
    ran_nowhere: Vec<&'static str>,
}

/// The vector length a row ran at; added within version 2, absent for a scalar row.
#[derive(Serialize)]
struct JsonVectorLength {
    /// `VLEN` (RVV) or `SVE VL`.
    name: &'static str,
    bits: u32,
}

#[derive(Serialize)]
struct JsonNotApplicable<'a> {
    variant: &'a str,
    backend: &'static str,
    reason: &'a str,
}

#[derive(Serialize)]
struct JsonImageFinding<'a> {
    variant: &'a str,
    class: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct Totals {
    passed: usize,
    failed: usize,
    skipped: usize,
    /// Cases whose result differs between backends (an emulator fault is likely); not in
    /// `failed`. Added in version 1 with default 0.
    disagreed: usize,
    /// Variant × backend combinations (not cases) that cannot exist on this host; not in
    /// `skipped`. Added in version 2 with default 0.
    not_applicable: usize,
}

#[derive(Serialize)]
struct JsonRow<'a> {
    variant: &'a str,
    backend: &'static str,
    /// How finely the backend checks buffer bounds: `bytes` or `pages`; added in version 1.
    bounds: &'static str,
    /// The vector length qemu ran the row at (`lab run --vlen`); absent for a scalar row.
    #[serde(skip_serializing_if = "Option::is_none")]
    vector_length: Option<JsonVectorLength>,
    kernel: &'static str,
    /// The contract family the kernel ran through when it is not HotSpot's (`openssl`);
    /// absent for HotSpot. Added in version 2.
    #[serde(skip_serializing_if = "Option::is_none")]
    family: Option<&'static str>,
    set: &'a str,
    passed: usize,
    failed: usize,
    /// See [`Totals::disagreed`].
    disagreed: usize,
    skipped: usize,
    skip_reason: Option<&'a str>,
    elapsed_s: f64,
    cases: Vec<JsonCase>,
}

#[derive(Serialize)]
struct JsonCase {
    name: String,
    msg_len: usize,
    time_s: f64,
    outcome: &'static str,
    findings: Vec<JsonFinding>,
    skip_reason: Option<String>,
}

#[derive(Serialize)]
struct JsonFinding {
    class: &'static str,
    text: String,
}

#[derive(Serialize)]
struct JsonVectorError {
    file: String,
    entry_index: Option<usize>,
    entry_name: Option<String>,
    field: Option<String>,
    problem: String,
    message: String,
}

/// Writes the report to `out` as pretty-printed JSON and a newline, as it serializes (a full
/// run's report is tens of megabytes: never held whole in memory).
pub(super) fn render_into(
    report: &Report,
    command: &str,
    out: &mut dyn std::io::Write,
) -> Result<(), serde_json::Error> {
    let (passed, failed, skipped) = report.totals();
    let doc = JsonReport {
        seed: report.seed.to_string(),
        elapsed_s: report.elapsed.as_secs_f64(),
        status: report.status().name(),
        exit_code: report.status().code(),
        totals: Totals {
            passed,
            failed,
            skipped,
            disagreed: report.disagreed(),
            not_applicable: report.not_applicable.len(),
        },
        rows: report.rows.iter().map(row).collect(),
        ran_nowhere: report.ran_nowhere(),
        vector_errors: report
            .vector_errors
            .iter()
            .map(|e| JsonVectorError {
                file: e.file.display().to_string(),
                entry_index: e.entry.as_ref().map(|(i, _)| *i),
                entry_name: e.entry.as_ref().and_then(|(_, n)| n.clone()),
                field: e.field.clone(),
                problem: e.problem.clone(),
                message: e.to_string(),
            })
            .collect(),
        setup_errors: &report.setup_errors,
        image_findings: report
            .image_findings
            .iter()
            .map(|f| JsonImageFinding { variant: f.variant, class: f.finding.class.name(), text: &f.finding.text })
            .collect(),
        interrupted: report.interrupted.map(crate::interrupt::name),
        warnings: &report.warnings,
        not_applicable: report
            .not_applicable
            .iter()
            .map(|n| JsonNotApplicable { variant: n.variant, backend: n.backend.name(), reason: &n.reason })
            .collect(),
        vector_length_verdicts: report.vector_length_verdicts(),
    };
    serde_json::to_writer_pretty(&mut *out, &Envelope::new(command, doc))?;
    out.write_all(b"\n").map_err(serde_json::Error::io)
}

fn row(r: &Row) -> JsonRow<'_> {
    let cases = r
        .cases
        .iter()
        .map(|c| {
            let (outcome, findings, skip_reason) = match &c.verdict {
                Verdict::Passed => ("passed", Vec::new(), None),
                Verdict::Failed(f) => (
                    "failed",
                    f.iter().map(|f| JsonFinding { class: f.class.name(), text: f.text.clone() }).collect(),
                    None,
                ),
                Verdict::Disagreed(f) => (
                    "disagreed",
                    f.iter().map(|f| JsonFinding { class: f.class.name(), text: f.text.clone() }).collect(),
                    None,
                ),
                Verdict::OutOfDomain(f) => (
                    "out-of-domain",
                    f.iter().map(|f| JsonFinding { class: f.class.name(), text: f.text.clone() }).collect(),
                    None,
                ),
                Verdict::Skipped(why) => ("skipped", Vec::new(), Some(why.clone())),
            };
            JsonCase {
                name: c.name.clone(),
                msg_len: c.msg_len,
                time_s: c.time.as_secs_f64(),
                outcome,
                findings,
                skip_reason,
            }
        })
        .collect();
    JsonRow {
        variant: r.variant,
        backend: r.backend.name(),
        bounds: r.backend.bounds(),
        vector_length: r.vector_length.map(|vl| JsonVectorLength { name: vl.spec.name, bits: vl.bits }),
        kernel: r.kernel.name(),
        family: (r.family != Family::HotSpot).then(|| r.family.name()),
        set: &r.set,
        passed: r.passed(),
        failed: r.failed().len(),
        disagreed: r.disagreed().len(),
        skipped: r.skipped(),
        skip_reason: r.skip_reason(),
        elapsed_s: r.elapsed.as_secs_f64(),
        cases,
    }
}

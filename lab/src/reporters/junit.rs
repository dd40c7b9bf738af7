//! The JUnit XML report (quick-junit writes the Jenkins/Ant schema that GitHub, GitLab and
//! Jenkins read): one `<testsuite>` per variant × backend. By default one `<testcase>` per
//! kernel × vector set (classname `variant.backend.kernel`, name the set, time the row's wall
//! time), its failure listing the first failed cases with findings and replay lines; a variant ×
//! backend that cannot run at all is one skipped case. A full run stays far below GitLab's
//! 30 MB per file (about 150 cases). `--junit-cases all` writes one `<testcase>` per case
//! instead (classname `variant.backend.kernel.set`). A row of another contract family than
//! HotSpot's names it in the kernel part (`md5-openssl`). Set-up or vector-file problems are
//! `<error>` cases in a `set-up` suite, so a run that exits 2 never shows green. Combinations
//! that cannot exist on the host (native on another architecture) are no test case: properties
//! of a `not applicable` suite with no case.

use std::collections::HashMap;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};

use super::JunitCases;
use crate::contract::Family;
use crate::finding::{Class, Finding};
use crate::replay::Replay;
use crate::report::{Report, Row, Verdict};

/// Failed cases listed in a row's test case by default (`--junit-cases all` lists each).
pub const FAILURES_LISTED: usize = 20;
/// Findings listed per failed case inside a row's test case.
const FINDINGS_LISTED: usize = 6;

/// The report as JUnit XML, one test case per row or per case as `cases` says.
pub(super) fn render(report: &Report, command: &str, cases: JunitCases) -> Result<String, quick_junit::SerializeError> {
    let mut junit = quick_junit::Report::new(format!("kernel-lab {command}"));
    junit.set_time(report.elapsed);
    let replay = report.replay.as_ref();
    let mut suites: Vec<(String, TestSuite)> = Vec::new();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let groups = report
        .rows
        .chunk_by(|a, b| a.variant == b.variant && a.backend == b.backend && a.vector_length == b.vector_length);
    for group in groups {
        let name = format!("{} on {}", group[0].variant, group[0].backend_label());
        let at = match suites.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                suites.push((name.clone(), new_suite(&name, &group[0], report.seed)));
                suites.len() - 1
            }
        };
        let suite = &mut suites[at].1;
        suite.time = Some(suite.time.unwrap_or_default() + group.iter().map(|r| r.elapsed).sum::<Duration>());
        match (cases, skipped_whole(group)) {
            (JunitCases::Rows, Some(reason)) => {
                suite.add_test_case(skipped_cell(group, reason));
            }
            (JunitCases::Rows, None) => {
                for r in group {
                    suite.add_test_case(row_case(r, replay, command != "fuzz"));
                }
            }
            (JunitCases::All, _) => {
                for r in group {
                    add_every_case(suite, r, replay, &mut seen);
                }
            }
        };
    }
    junit.add_test_suites(suites.into_iter().map(|(_, s)| s));
    if let Some(s) = image_suite(report) {
        junit.add_test_suite(s);
    }
    if let Some(s) = setup_suite(report) {
        junit.add_test_suite(s);
    }
    if let Some(s) = interrupted_suite(report) {
        junit.add_test_suite(s);
    }
    if let Some(s) = not_applicable_suite(report) {
        junit.add_test_suite(s);
    }
    Ok(drop_root_skipped(&junit.to_string()?))
}

/// The reason, when every row of a variant × backend was skipped whole for one reason (the
/// backend cannot run the variant): then the cell is one skipped test case.
fn skipped_whole(group: &[Row]) -> Option<&str> {
    let reason = group.first()?.skip_reason()?;
    group
        .iter()
        .all(|r| {
            r.passed() == 0 && r.failed().is_empty() && r.disagreed().is_empty() && r.skip_reason() == Some(reason)
        })
        .then_some(reason)
}

/// One skipped test case for a whole variant × backend.
fn skipped_cell(group: &[Row], reason: &str) -> TestCase {
    let mut status = TestCaseStatus::skipped();
    status.set_message(reason);
    let r = &group[0];
    let mut case = TestCase::new("all kernels and sets", status);
    case.set_classname(format!("{}.{}", r.variant, backend_part(r)));
    case
}

/// The backend in a classname: `qemu`, or `qemu-vlen=256` at a vector length (no space).
fn backend_part(r: &Row) -> String {
    r.backend_label().replace(' ', "-")
}

/// One test case for a row (variant × backend × kernel × set): classname
/// `variant.backend.kernel`, name the set, time the row's wall time, the counts in
/// `<system-out>` when `counts`; a failure lists the first
/// [`FAILURES_LISTED`] failed cases with their findings and replay lines, then how many more.
fn row_case(r: &Row, replay: Option<&Replay>, counts: bool) -> TestCase {
    let status = if !r.failed().is_empty() || !r.disagreed().is_empty() {
        row_failure(r, replay)
    } else if r.passed() > 0 {
        TestCaseStatus::success()
    } else {
        let mut s = TestCaseStatus::skipped();
        s.set_message(r.skip_reason().unwrap_or("no case ran"));
        s
    };
    let mut case = TestCase::new(r.set.clone(), status);
    case.set_classname(format!("{}.{}.{}", r.variant, backend_part(r), kernel_part(r))).set_time(r.elapsed);
    // A fuzz row holds one case, the campaign: its count would say nothing.
    if counts {
        let mut out = format!(
            "{} passed, {} failed, {} disagreed between backends, {} skipped\n",
            r.passed(),
            r.failed().len(),
            r.disagreed().len(),
            r.skipped()
        );
        if let (Some(reason), true) = (&r.skip_reason(), r.skipped() > 0) {
            out.push_str(&format!("skipped: {reason}\n"));
        }
        case.set_system_out(out);
    }
    case
}

/// The kernel part of a classname: `md5`, or `md5-openssl` for a row of another contract
/// family than HotSpot's (HotSpot rows keep their names, so test history follows them).
fn kernel_part(r: &Row) -> String {
    match r.family {
        Family::HotSpot => r.kernel.name().to_string(),
        f => format!("{}-{f}", r.kernel),
    }
}

/// Kernel failures first, then cases the backends disagreed on (an emulator fault is likely).
fn row_failure(r: &Row, replay: Option<&Replay>) -> TestCaseStatus {
    let bad: Vec<crate::report::CaseFailure> = r.failed().into_iter().chain(r.disagreed()).collect();
    let findings = bad.iter().flat_map(|f| f.findings);
    let kind = if findings.clone().all(|f| f.class == Class::NotRun) {
        NonSuccessKind::Error
    } else {
        NonSuccessKind::Failure
    };
    let mut s = TestCaseStatus::non_success(kind);
    let total = r.passed() + bad.len() + r.skipped();
    let first = bad[0];
    let first_text = first.findings.first().map(|f| f.text.as_str()).unwrap_or("");
    let disagreed = if r.disagreed().is_empty() {
        String::new()
    } else {
        format!(" ({} of them backends disagree on)", r.disagreed().len())
    };
    s.set_message(format!("{} of {total} cases failed{disagreed}; first: {}: {first_text}", bad.len(), first.name));
    if let Some(f) = first.findings.first() {
        s.set_type(f.class.name());
    }
    let line = |case: Option<&str>| {
        replay.map(|p| p.narrowed_at(r.variant, r.backend, r.vector_length, r.kernel, Some(&r.set), case))
    };
    let mut body = line(None).map(|l| format!("replay: {l}\n")).unwrap_or_default();
    for c in bad.iter().take(FAILURES_LISTED) {
        body.push_str(&format!("\n{} ({} bytes):\n", c.name, c.msg_len));
        for f in c.findings.iter().take(FINDINGS_LISTED) {
            body.push_str(&format!("  [{}] {}\n", f.class.name(), f.text));
        }
        if c.findings.len() > FINDINGS_LISTED {
            body.push_str(&format!("  ... and {} more findings\n", c.findings.len() - FINDINGS_LISTED));
        }
        if let Some(l) = line(Some(c.name)) {
            body.push_str(&format!("  replay: {l}\n"));
        }
    }
    if bad.len() > FAILURES_LISTED {
        body.push_str(&format!(
            "\n... and {} more failed cases (--junit-cases all or --format json lists each)\n",
            bad.len() - FAILURES_LISTED
        ));
    }
    s.set_description(body);
    s
}

/// `--junit-cases all`: one test case per case of `r`, classname `variant.backend.kernel.set`.
fn add_every_case(
    suite: &mut TestSuite,
    r: &Row,
    replay: Option<&Replay>,
    seen: &mut HashMap<(String, String), usize>,
) {
    let classname = format!("{}.{}.{}.{}", r.variant, backend_part(r), kernel_part(r), r.set);
    for c in &r.cases {
        // Poly1305's unsplit and split cases of a short message share a name; JUnit readers
        // merge equal names, so later ones get " #2", " #3".
        let n = seen.entry((classname.clone(), c.name.clone())).or_insert(0);
        *n += 1;
        let name = if *n == 1 { c.name.clone() } else { format!("{} #{n}", c.name) };
        let line =
            replay.map(|p| p.narrowed_at(r.variant, r.backend, r.vector_length, r.kernel, Some(&r.set), Some(&c.name)));
        let mut case = TestCase::new(name, status(&c.verdict, line.as_deref()));
        case.set_classname(classname.clone()).set_time(c.time);
        suite.add_test_case(case);
    }
}

/// Removes the `skipped` attribute quick-junit writes on `<testsuites>`: the Jenkins schema
/// (xunit-plugin junit-10.xsd, which validating readers apply) allows only name, time, tests,
/// failures and errors there. Each `<testsuite>` keeps its own `skipped` count.
fn drop_root_skipped(xml: &str) -> String {
    let Some(start) = xml.find("<testsuites ") else { return xml.to_string() };
    let end = start + xml[start..].find('>').unwrap_or(0);
    let Some(attr) = xml[start..end].find(" skipped=\"").map(|i| start + i) else { return xml.to_string() };
    let close = attr + " skipped=\"".len() + xml[attr + " skipped=\"".len()..].find('"').unwrap_or(0) + 1;
    format!("{}{}", &xml[..attr], &xml[close..])
}

fn new_suite(name: &str, r: &Row, seed: u64) -> TestSuite {
    let mut s = TestSuite::new(name);
    s.add_properties([
        Property::new("variant", r.variant),
        Property::new("backend", r.backend.name()),
        Property::new("seed", seed.to_string()),
    ]);
    if let Some(vl) = r.vector_length {
        s.add_property(Property::new("vector_length", format!("{} {}", vl.spec.name, vl.bits)));
    }
    s
}

/// Passed, a failure (an error when nothing ran at all), or skipped with its reason.
fn status(verdict: &Verdict, replay: Option<&str>) -> TestCaseStatus {
    match verdict {
        Verdict::Passed => TestCaseStatus::success(),
        Verdict::Failed(findings) | Verdict::Disagreed(findings) => failure(findings, replay),
        Verdict::Skipped(reason) => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(reason.as_str());
            s
        }
        // Not a failure of the HotSpot contract: a skipped test case whose message says what
        // happened outside the JDK's call domain.
        Verdict::OutOfDomain(findings) => {
            let mut s = TestCaseStatus::skipped();
            let text: Vec<String> = findings.iter().map(|f| format!("[{}] {}", f.class.name(), f.text)).collect();
            s.set_message(text.join("; "));
            s
        }
    }
}

/// `message` is the first finding, `type` its class, and the body lists every finding with its
/// class (each sentence names the call, what was expected and what came back) and the command
/// that replays it.
fn failure(findings: &[Finding], replay: Option<&str>) -> TestCaseStatus {
    let kind =
        if findings.iter().all(|f| f.class == Class::NotRun) { NonSuccessKind::Error } else { NonSuccessKind::Failure };
    let mut s = TestCaseStatus::non_success(kind);
    if let Some(first) = findings.first() {
        s.set_message(first.text.as_str()).set_type(first.class.name());
    }
    let mut body: String = findings.iter().map(|f| format!("[{}] {}\n", f.class.name(), f.text)).collect();
    if let Some(replay) = replay {
        body.push_str(&format!("replay: {replay}\n"));
    }
    s.set_description(body);
    s
}

/// Findings about whole images (static ISA and system-call scan), one `<failure>` case each in a
/// suite `images`; `None` when there are none.
fn image_suite(report: &Report) -> Option<TestSuite> {
    if report.image_findings.is_empty() {
        return None;
    }
    let mut suite = TestSuite::new("images");
    for (i, f) in report.image_findings.iter().enumerate() {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
        s.set_message(f.finding.text.as_str()).set_type(f.finding.class.name());
        let mut case = TestCase::new(format!("{} image scan #{}", f.variant, i + 1), s);
        case.set_classname(format!("{}.image", f.variant));
        suite.add_test_case(case);
    }
    Some(suite)
}

/// A run stopped by SIGINT/SIGTERM: one `<error>` case `interrupted` in a suite of that name,
/// so an incomplete report never shows green; `None` for a finished run.
fn interrupted_suite(report: &Report) -> Option<TestSuite> {
    let sig = crate::interrupt::name(report.interrupted?);
    let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
    s.set_message(format!("the run was interrupted by {sig}; cases it did not finish are skipped"))
        .set_type("interrupted");
    let mut case = TestCase::new("interrupted", s);
    case.set_classname("interrupted");
    let mut suite = TestSuite::new("interrupted");
    suite.add_test_case(case);
    Some(suite)
}

/// Vector-file and set-up problems, one `<error>` case each; `None` when there are none.
fn setup_suite(report: &Report) -> Option<TestSuite> {
    if report.vector_errors.is_empty() && report.setup_errors.is_empty() {
        return None;
    }
    let mut suite = TestSuite::new("set-up");
    let errors = report
        .vector_errors
        .iter()
        .map(|e| (format!("vector file {}", e.file.display()), e.to_string()))
        .chain(report.setup_errors.iter().enumerate().map(|(i, e)| (format!("set-up error {}", i + 1), e.clone())));
    for (i, (name, text)) in errors.enumerate() {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
        s.set_message(text.lines().next().unwrap_or_default()).set_type("setup").set_description(text);
        let mut case = TestCase::new(format!("{name} #{}", i + 1), s);
        case.set_classname("set-up");
        suite.add_test_case(case);
    }
    Some(suite)
}

/// Variant × backend combinations that cannot exist on this host: a suite `not applicable`
/// with no test case (nothing was skipped) and one property per combination, named
/// `riscv64 on native`, valued with the reason; `None` when there are none.
fn not_applicable_suite(report: &Report) -> Option<TestSuite> {
    if report.not_applicable.is_empty() {
        return None;
    }
    let mut suite = TestSuite::new("not applicable");
    suite.add_properties(
        report
            .not_applicable
            .iter()
            .map(|n| Property::new(format!("{} on {}", n.variant, n.backend), n.reason.as_str())),
    );
    Some(suite)
}

//! The JUnit XML report (quick-junit writes the Jenkins/Ant schema that GitHub, GitLab and
//! Jenkins read): one `<testsuite>` per variant × backend, one `<testcase>` per case with
//! classname `variant.backend.kernel.set`, failures carrying every finding, skips their reason,
//! and set-up or vector-file problems as `<error>` cases in a `set-up` suite, so a run that
//! exits 2 never shows green.

use std::collections::HashMap;

use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};

use crate::checks::{Class, Finding};
use crate::report::{Report, Row, Verdict};
use crate::variant::{Arch, Variant};

/// The report as JUnit XML.
pub(super) fn render(report: &Report, command: &str) -> Result<String, quick_junit::SerializeError> {
    let mut junit = quick_junit::Report::new(format!("kernel-lab {command}"));
    junit.set_time(report.elapsed);
    let mut suites: Vec<(String, TestSuite)> = Vec::new();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    for r in &report.rows {
        let name = format!("{} on {}", r.variant, r.backend);
        let at = match suites.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                suites.push((name.clone(), new_suite(&name, r, report.seed)));
                suites.len() - 1
            }
        };
        let suite = &mut suites[at].1;
        suite.time = Some(suite.time.unwrap_or_default() + r.elapsed);
        let classname = format!("{}.{}.{}.{}", r.variant, r.backend, r.kernel, r.set);
        for c in r.outcomes().iter() {
            // Poly1305's unsplit and split cases of a short message share a name; JUnit readers
            // merge equal names, so later ones get " #2", " #3".
            let n = seen.entry((classname.clone(), c.name.clone())).or_insert(0);
            *n += 1;
            let name = if *n == 1 { c.name.clone() } else { format!("{} #{n}", c.name) };
            let mut case = TestCase::new(name, status(&c.verdict, &replay(command, report.seed, r)));
            case.set_classname(classname.clone()).set_time(c.time);
            suite.add_test_case(case);
        }
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
    Ok(drop_root_skipped(&junit.to_string()?))
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
    s
}

/// The command line that replays `row` (the same seed, the row's variant, backend and kernel).
fn replay(command: &str, seed: u64, row: &Row) -> String {
    let variant = match Variant::by_name(row.variant) {
        Some(v) if v.arch == Arch::Riscv64 => format!("--arch {} --{}zbb", v.arch, if v.zbb { "" } else { "no-" }),
        Some(v) => format!("--arch {}", v.arch),
        None => String::new(),
    };
    format!("lab {command} --seed {seed} {variant} --backend {} --kernel {}", row.backend, row.kernel)
}

/// Passed, a failure (an error when nothing ran at all), or skipped with its reason.
fn status(verdict: &Verdict, replay: &str) -> TestCaseStatus {
    match verdict {
        Verdict::Passed => TestCaseStatus::success(),
        Verdict::Failed(findings) | Verdict::Disagreed(findings) => failure(findings, replay),
        Verdict::Skipped(reason) => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(reason.as_str());
            s
        }
    }
}

/// `message` is the first finding, `type` its class, and the body lists every finding with its
/// class (each sentence names the call, what was expected and what came back) and the command
/// that replays it.
fn failure(findings: &[Finding], replay: &str) -> TestCaseStatus {
    let kind =
        if findings.iter().all(|f| f.class == Class::NotRun) { NonSuccessKind::Error } else { NonSuccessKind::Failure };
    let mut s = TestCaseStatus::non_success(kind);
    if let Some(first) = findings.first() {
        s.set_message(first.text.as_str()).set_type(first.class.name());
    }
    let mut body: String = findings.iter().map(|f| format!("[{}] {}\n", f.class.name(), f.text)).collect();
    body.push_str(&format!("replay: {replay} (plus the run's --vectors/--kernels-dir options)\n"));
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

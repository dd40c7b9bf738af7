//! The cross-backend comparison of `lab run`: every case that more than one backend ran for the
//! same variant, kernel and vector set is put to the vote ([`crate::vote`]), and a backend the
//! vote blames has its case turned from a kernel failure (or a pass) into an emulator fault
//! ([`Verdict::Disagreed`]). Rows are matched by kernel *and* set: the MD5 and Poly1305 sets of
//! one name (`intermediate`, `chains`) hold different cases.

use crate::backend::BackendKind;
use crate::finding::{Class, Finding};
use crate::report::{Report, Verdict};
use crate::variant::{Arch, Kernel};
use crate::vote::{self, Ballot, Decision};

/// A row that ran, for the comparison: its index in the report and its case digests in row
/// order ([`crate::cases::plan::CasePlan::outputs_digest`]; 0: no outputs).
pub(crate) type Ran = (usize, Vec<u64>);

/// Compares the rows of one variant (`ran`, all of architecture `arch`) case by case across
/// backends, grouping them by kernel and vector set, and applies the vote's decision to the
/// report's rows.
pub(crate) fn compare_backends(report: &mut Report, ran: &[Ran], arch: Arch) {
    // Rows at different vector lengths are different machines: a kernel right only from some
    // VLEN up is the kernel's failure at the others, never an emulator's.
    let key = |report: &Report, i: usize| {
        let r = &report.rows[i];
        (r.kernel, r.set.clone(), r.vector_length.map(|vl| vl.bits))
    };
    let mut keys: Vec<(Kernel, String, Option<u32>)> = ran.iter().map(|(i, _)| key(report, *i)).collect();
    keys.sort_unstable();
    keys.dedup();
    for k in keys {
        let rows: Vec<&Ran> = ran.iter().filter(|(i, _)| key(report, *i) == k).collect();
        if rows.len() < 2 || !same_cases(report, &rows) {
            continue;
        }
        for case in 0..rows[0].1.len() {
            let ballots: Vec<Ballot> = rows.iter().map(|(i, d)| ballot(report, *i, d[case], case)).collect();
            let decision = vote::decide(&ballots);
            apply(report, &rows, case, &decision, arch);
        }
    }
}

/// Whether the rows hold the same cases in the same order (a row cut short by an interruption
/// is not compared).
fn same_cases(report: &Report, rows: &[&Ran]) -> bool {
    let first = &report.rows[rows[0].0];
    rows.iter().all(|(i, d)| {
        let r = &report.rows[*i];
        d.len() == first.cases.len()
            && r.cases.len() == first.cases.len()
            && r.cases.iter().zip(&first.cases).all(|(a, b)| a.name == b.name)
    })
}

/// Row `i`'s ballot for `case`; a skipped case has no outputs.
fn ballot(report: &Report, i: usize, digest: u64, case: usize) -> Ballot {
    let row = &report.rows[i];
    let verdict = &row.cases[case].verdict;
    let ran = !matches!(verdict, Verdict::Skipped(_));
    Ballot {
        backend: row.backend,
        digest: (ran && digest != 0).then_some(digest),
        passed: matches!(verdict, Verdict::Passed),
    }
}

/// Turns the blamed backends' case into an emulator fault or a disagreement, with the sentence
/// that says who returned what.
fn apply(report: &mut Report, rows: &[&Ran], case: usize, decision: &Decision, arch: Arch) {
    let row_of = |report: &Report, b: BackendKind| rows.iter().map(|(i, _)| *i).find(|&i| report.rows[i].backend == b);
    match decision {
        Decision::Unanimous => {}
        Decision::EmulatorFault { faulty, witnesses, .. } => {
            for &b in faulty {
                let Some(i) = row_of(report, b) else { continue };
                let text = fault_text(report, rows, case, b, faulty, witnesses, arch);
                report.rows[i].reattribute(case, Finding::new(Class::EmulatorFault, text));
            }
        }
        Decision::NoMajority { failing, passing } => {
            let text = no_majority_text(report, rows, case, failing, passing);
            for &b in failing {
                let Some(i) = row_of(report, b) else { continue };
                report.rows[i].reattribute(case, Finding::new(Class::Disagreement, text.clone()));
            }
        }
    }
}

/// The first finding of `b`'s case (what it returned), or "the reference's outputs".
fn what(report: &Report, rows: &[&Ran], case: usize, b: BackendKind) -> String {
    rows.iter()
        .map(|(i, _)| &report.rows[*i])
        .find(|r| r.backend == b)
        .and_then(|r| match &r.cases[case].verdict {
            Verdict::Failed(f) | Verdict::Disagreed(f) => f.iter().find(|f| f.class != Class::EmulatorFault),
            _ => None,
        })
        .map_or_else(|| "the reference's outputs".into(), |f| f.text.clone())
}

/// "emulator fault: qemu 7.2.22 returns … ; native and unicorn and the reference agree".
fn fault_text(
    report: &Report,
    rows: &[&Ran],
    case: usize,
    b: BackendKind,
    faulty: &[BackendKind],
    witnesses: &[BackendKind],
    arch: Arch,
) -> String {
    let culprit = vote::culprit_name(b, arch);
    let returned = what(report, rows, case, b);
    let alike: Vec<String> = faulty.iter().filter(|&&o| o != b).map(|&o| vote::culprit_name(o, arch)).collect();
    let also = if alike.is_empty() {
        String::new()
    } else {
        format!(" ({} is at fault on this case too)", alike.join(" and "))
    };
    if witnesses.is_empty() {
        // Native failed and this emulator passed: it hides a bug that hardware shows.
        let native = what(report, rows, case, BackendKind::Native);
        return format!(
            "emulator fault: {culprit} returns the reference's outputs where native hardware does not ({native}); \
             the kernel's failure stands in the native row, and this pass is not one{also}"
        );
    }
    let names: Vec<&str> = witnesses.iter().map(|w| w.name()).collect();
    // The call's label ("step 3: md5_implCompress(buffered block 0)"): up to the call's `)`.
    let first = returned.split_once("): ").map_or(returned.as_str(), |(call, _)| call);
    let first = if first.len() < returned.len() { format!("{first})") } else { first.to_string() };
    format!(
        "emulator fault: {culprit} returns other outputs ({first}: see below); {} and the reference agree{also}; \
         not counted as a kernel failure",
        names.join(" and ")
    )
}

/// "backends disagree and no side has a majority: unicorn and the reference agree; qemu returns …".
fn no_majority_text(
    report: &Report,
    rows: &[&Ran],
    case: usize,
    failing: &[BackendKind],
    passing: &[BackendKind],
) -> String {
    let agree: Vec<&str> = passing.iter().map(|b| b.name()).collect();
    let wrong: Vec<String> =
        failing.iter().map(|&b| format!("{} returns {}", b.name(), what(report, rows, case, b))).collect();
    format!(
        "backends disagree and no side has a majority: {} and the reference agree; {}",
        agree.join(" and "),
        wrong.join("; ")
    )
}

//! A campaign as a report (`crate::report::Report`) for the JSON, JUnit and SARIF reporters.

use super::{Outcome, TargetResult};
use crate::finding::{Class, Finding};

/// Why a failure lies outside its contract family's call domain (`--domain wide`), if it does:
/// its shrunk case makes a call the family's callers never make (HotSpot: the JDK's call
/// domain; OpenSSL: a `poly1305_blocks` length that is not a multiple of 16).
pub fn out_of_domain(r: &TargetResult, f: &super::Failure) -> Option<String> {
    use crate::domain::Domain;
    if crate::domain::current() != Domain::Wide {
        return None;
    }
    let why = crate::domain::outside_for(&f.case, Domain::Wide, r.family)?;
    Some(crate::domain::outside_message(r.family, &why))
}

/// The campaign as a [`Report`](crate::report::Report) for the JSON and JUnit reporters: one row
/// per target (set `fuzz`) holding one case, the campaign, which passed, failed with the
/// shrunk case's findings and file, or was skipped with its reason. A variant × backend that
/// cannot exist on this host has no row: it is listed once in the report's `not_applicable`.
pub fn to_report(
    results: &[TargetResult],
    seed: u64,
    shard: (u64, u64),
    elapsed: std::time::Duration,
) -> crate::report::Report {
    use crate::report::{CaseOutcome, NotApplicable, Report, Row, Verdict};
    let mut not_applicable: Vec<NotApplicable> = Vec::new();
    for r in results {
        let Outcome::NotApplicable(reason) = &r.outcome else { continue };
        if !not_applicable.iter().any(|n| n.variant == r.variant && n.backend == r.backend) {
            not_applicable.push(NotApplicable { variant: r.variant, backend: r.backend, reason: reason.clone() });
        }
    }
    let rows = results
        .iter()
        .filter(|r| !matches!(r.outcome, Outcome::NotApplicable(_)))
        .map(|r| {
            // No seed, shard or case count in the name: they change every night, and CI
            // viewers follow a test's history by its name.
            let name = "differential fuzzing".to_string();
            let verdict = match &r.outcome {
                Outcome::Clean => Verdict::Passed,
                Outcome::Skipped(why) | Outcome::NotApplicable(why) => Verdict::Skipped(why.clone()),
                Outcome::Error(e) => Verdict::Failed(vec![Finding::new(Class::NotRun, e.clone())]),
                Outcome::Failed(f) => {
                    let mut findings = f.findings.clone();
                    let written = format!(
                        "minimal case (case {} of seed {seed}, shard {}/{}) written to {}; replay: {}",
                        f.case_index,
                        shard.0,
                        shard.1,
                        f.file.display(),
                        f.replay
                    );
                    // The note takes the class of what failed (its first finding).
                    let class = findings.first().map_or(Class::Value, |f| f.class);
                    findings.push(Finding::new(class, written));
                    if matches!(findings[0].class, Class::Disagreement | Class::EmulatorFault) {
                        Verdict::Disagreed(findings)
                    } else if let Some(why) = out_of_domain(r, f) {
                        findings.insert(0, Finding::new(Class::OutOfDomain, why));
                        Verdict::OutOfDomain(findings)
                    } else {
                        Verdict::Failed(findings)
                    }
                }
            };
            let mut row =
                Row { elapsed: r.elapsed, family: r.family, ..Row::for_set(r.variant, r.backend, r.kernel, "fuzz") };
            row.push(CaseOutcome { name, msg_len: 0, time: r.elapsed, verdict });
            if let (n @ 1.., Some(why)) = (r.not_run.count, &r.not_run.reason) {
                // Cases a backend could not run to the end: a skip of their own, never a pass.
                let verdict = Verdict::Skipped(format!("{n} cases, the first: {why}"));
                row.push(CaseOutcome { name: "cases not run".into(), msg_len: 0, time: Default::default(), verdict });
            }
            row.at(r.vector_length)
        })
        .collect();
    let mut image_findings: Vec<crate::report::ImageFinding> = Vec::new();
    for r in results {
        for f in &r.image_findings {
            if !image_findings.iter().any(|g| g.variant == r.variant && g.finding == *f) {
                image_findings.push(crate::report::ImageFinding { variant: r.variant, finding: f.clone() });
            }
        }
    }
    let mut images: Vec<(&'static str, std::path::PathBuf)> = Vec::new();
    for r in results {
        if let (Some(path), false) = (&r.image, images.iter().any(|(v, _)| *v == r.variant)) {
            images.push((r.variant, path.clone()));
        }
    }
    let interrupted = crate::interrupt::interrupted();
    let warnings = results.iter().flat_map(|r| r.warnings.iter().map(|w| w.text.clone())).collect();
    let warnings = crate::upper_bits_report::merge_paths(warnings);
    Report { rows, seed, elapsed, image_findings, interrupted, not_applicable, images, warnings, ..Report::default() }
}

//! A shrunk failure replayed on the variant's other backends and put to the vote (`crate::vote`).

use super::{run_cases, FuzzConfig, Outcome, Target, TargetResult};
use crate::finding::{Class, Finding};
use crate::image::Image;
use crate::variant::Variant;

/// Replays each shrunk failure of one variant whose findings are wrong outputs (value,
/// bounds) on the campaign's other backends for that variant and puts it to the vote
/// ([`blame`]): when the vote blames this backend, the failure's first finding says so (the
/// cases are the same on every backend: the runner is seeded by variant and kernel, and so are
/// the argument garbage and poison).
pub(super) fn cross_check(cfg: &FuzzConfig, variant: &'static Variant, image: &Image, results: &mut [TargetResult]) {
    let others: Vec<crate::backend::BackendKind> = results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Clean | Outcome::Failed(_)))
        .map(|r| r.backend)
        .collect();
    for r in results.iter_mut() {
        let Outcome::Failed(f) = &mut r.outcome else { continue };
        // Only wrong outputs are compared: a fault one backend alone sees (bounds are checked
        // by bytes on Unicorn, by pages elsewhere) is a kernel finding, not an emulator's.
        let outputs_only = f.findings.iter().all(|x| matches!(x.class, Class::Value | Class::Bounds));
        if !outputs_only {
            continue;
        }
        let mut verdicts: Vec<(crate::backend::BackendKind, bool)> = Vec::new();
        for &kind in others.iter().filter(|&&k| k != r.backend) {
            let Ok(mut backend) = kind.open(variant, image, cfg.limits) else { continue };
            let mut t = Target { backend: backend.as_mut(), variant, image, seed: cfg.seed, partial_loads: Vec::new() };
            if let Ok(found) = run_cases(&mut t, std::slice::from_ref(&f.case)) {
                verdicts.push((kind, found[0].is_empty()));
            }
        }
        if let Some(finding) = blame(variant, r.backend, &verdicts) {
            f.findings.insert(0, finding);
        }
    }
}

/// The vote ([`crate::vote`]) on a shrunk failure of `failed` replayed on other backends
/// (`verdicts`: backend and whether it passed): the finding that blames an emulator, or says
/// no side has a majority; `None` when the failure stands as the kernel's. The outputs
/// themselves are not kept here, so every failing backend counts as failing alike.
pub(super) fn blame(
    variant: &Variant,
    failed: crate::backend::BackendKind,
    verdicts: &[(crate::backend::BackendKind, bool)],
) -> Option<Finding> {
    use crate::vote::{culprit_name, decide, Ballot, Decision};
    let ballot = |backend, passed: bool| Ballot { backend, digest: Some(u64::from(passed)), passed };
    let ballots: Vec<Ballot> =
        std::iter::once(ballot(failed, false)).chain(verdicts.iter().map(|&(b, p)| ballot(b, p))).collect();
    let names = |v: &[crate::backend::BackendKind]| v.iter().map(|b| b.name()).collect::<Vec<_>>().join(" and ");
    match decide(&ballots) {
        Decision::EmulatorFault { faulty, witnesses, .. } if faulty.contains(&failed) => {
            let others: Vec<_> = faulty.iter().copied().filter(|&b| b != failed).collect();
            let also = if others.is_empty() { String::new() } else { format!(" ({} fails it too)", names(&others)) };
            Some(Finding::new(
                Class::EmulatorFault,
                format!(
                    "emulator fault on the shrunk case: {} fails it; {} and the reference agree{also}; not counted as \
                     a kernel failure",
                    culprit_name(failed, variant.arch),
                    names(&witnesses)
                ),
            ))
        }
        Decision::NoMajority { failing, passing } => Some(Finding::new(
            Class::Disagreement,
            format!(
                "backends disagree on the shrunk case and no side has a majority: {} and the reference agree; {} fail it",
                names(&passing),
                names(&failing)
            ),
        )),
        _ => None,
    }
}

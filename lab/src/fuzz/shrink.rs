//! Running fuzz cases in one batch on a backend, and shrinking a failing case with proptest's value
//! trees.

use super::Case;
use crate::abi::Abi;
use crate::backend::{self, Backend, BackendError};
use crate::batch::{BatchBuilder, Placement};
use crate::cases::plan::{CasePlan, Stubs};
use crate::cases::procedure;
use crate::cases::verdict;
use crate::finding::Finding;
use crate::image::Image;
use crate::variant::Variant;
use crate::vectors::Body;
use proptest::strategy::ValueTree;
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;

/// Where and what to run.
pub struct Target<'a> {
    /// The backend, open on `image`.
    pub backend: &'a mut dyn Backend,
    /// The variant the image was built for.
    pub variant: &'static Variant,
    /// The image.
    pub image: &'a Image,
    /// Seed for poison values and argument garbage.
    pub seed: u64,
    /// Partial loads the backend let run ([`crate::backend::PartialLoads::Warn`]) in the
    /// cases so far, one (pc, sentence) per load instruction.
    pub partial_loads: Vec<(u64, String)>,
}

/// Runs `cases` in one batch and returns each case's findings (empty = agrees with the
/// reference). Each case runs twice ([`procedure::plan_vector`]): guarded against guard pages, and
/// packed at its offset; a case's findings are those of both.
///
/// Cases whose calls do not fit the arena together run in halves.
///
/// # Errors
/// When the backend itself fails or one case alone does not fit the arena.
pub fn run_cases(t: &mut Target, cases: &[Case]) -> Result<Vec<Vec<Finding>>, BackendError> {
    let entry = Stubs::of(t.image);
    let abi = Abi::of(t.variant.arch);
    // The thread's builder and payload from the batch before: no fresh memory per batch.
    let mut b = BatchBuilder::take_spare(abi);
    let mut rng = ChaCha8Rng::seed_from_u64(t.seed);
    let plans: Vec<Vec<CasePlan>> =
        cases.iter().map(|c| procedure::plan_vector(&mut b, &entry, &mut rng, "fuzz", c, Placement::End)).collect();
    let spare = crate::batch::ZeroedPayload::take_spare();
    let arena = t.image.arena()?;
    let batch = b.layout_and_clear(arena, spare);
    b.keep_as_spare();
    let batch = match batch {
        Ok(batch) => batch,
        // More calls than the arena holds (a dispatch path judged through `emit` after every
        // `blocks` call, as OpenSSL's IFMA path is): the halves, one after the other.
        Err(crate::batch::BatchError::TooLarge { .. }) if cases.len() > 1 => {
            let (front, back) = cases.split_at(cases.len() / 2);
            let mut out = run_cases(t, front)?;
            out.extend(run_cases(t, back)?);
            return Ok(out);
        }
        Err(e) => return Err(BackendError::Unsupported(e.to_string())),
    };
    let run = backend::run_batch(t.backend, &batch)?;
    let findings = |ps: &Vec<CasePlan>| {
        let mut all: Vec<Finding> = Vec::new();
        for f in ps.iter().flat_map(|p| verdict::check(p, &batch, &run, abi, t.image)) {
            // The guarded and the offset case usually fail alike: say it once.
            if !all.iter().any(|g| g.text == f.text) {
                all.push(f);
            }
        }
        all
    };
    let out = plans.iter().map(findings).collect();
    for (pc, text) in plans.iter().flatten().flat_map(|p| verdict::partial_load_warnings(p, &batch, &run, t.image)) {
        if !t.partial_loads.iter().any(|(seen, _)| *seen == pc) {
            t.partial_loads.push((pc, text));
        }
    }
    t.backend.recycle(run.resp);
    batch.into_payload().keep_as_spare();
    Ok(out)
}

/// Shrinks a failing value tree to a minimal failing case (proptest's simplify/complicate
/// loop), evaluating each candidate on the backend. Returns the smallest failing case found
/// and its findings, and whether shrinking stopped at `deadline` (then the case is failing but
/// maybe not minimal). Each candidate is one batch, so the deadline is kept to within one
/// batch's budget (a hanging kernel makes every candidate cost the whole budget).
///
/// # Errors
/// When the backend fails.
pub fn shrink(
    t: &mut Target,
    mut tree: impl ValueTree<Value = Case>,
    findings: Vec<Finding>,
    max_iters: u32,
    deadline: Option<std::time::Instant>,
) -> Result<(Case, Vec<Finding>, bool), BackendError> {
    let mut best = (tree.current(), findings);
    let mut iters = 0;
    if !tree.simplify() {
        return Ok((best.0, best.1, false));
    }
    while iters < max_iters {
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Ok((best.0, best.1, true));
        }
        iters += 1;
        let candidate = tree.current();
        let f = run_cases(t, std::slice::from_ref(&candidate))?.remove(0);
        // A union can "simplify" into a bigger value (another arm); only smaller failures count.
        // A candidate the backend stopped before an instruction it cannot execute proves nothing.
        let passes = f.is_empty() || crate::cases::verdict::is_not_run_past(&f);
        let more = if passes || blocks_of(&candidate) > blocks_of(&best.0) {
            tree.complicate()
        } else {
            best = (candidate, f);
            tree.simplify()
        };
        if !more {
            break;
        }
    }
    Ok((best.0, best.1, false))
}

/// How big a case is, for messages: blocks of its input.
pub fn blocks_of(c: &Case) -> usize {
    match &c.body {
        Body::Md5Digest { msg, .. } => msg.len().div_ceil(64),
        Body::Md5Call(m) => m.input.len() / 64,
        Body::Poly1305Tag { msg, .. } => msg.len().div_ceil(16),
        Body::Poly1305Call(p) => p.input.len().div_ceil(16),
        Body::Md5Chain(c) => c.seed.len().div_ceil(64) + c.steps,
        Body::Poly1305MacOfMacs(m) => m.count * (m.count + 16) / 32,
    }
}

//! One vector set on one backend: its cases planned, laid into batches that fit the arena,
//! run, judged and carried from call to call, with skips and interruptions recorded.

use super::interrupted_reason;
use crate::abi::Abi;
use crate::backend::{self};
use crate::batch::{BatchBuilder, Placement, ZeroedPayload};
use crate::cases::answers::Answers;
use crate::cases::plan::{self, CasePlan, Stubs};
use crate::cases::procedure::CaseRun;
use crate::cases::verdict;
use crate::finding::{Class, Finding};
use crate::fnv::fnv1a;
use crate::image::Image;
use crate::progress::{self, Progress};
use crate::report::Row;
use crate::variant::Variant;
use crate::vectors::VectorSet;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::time::Instant;

/// Cases a vector set makes (see [`plan::cases_of`]).
pub fn cases_in(set: &VectorSet) -> usize {
    set.vectors.iter().map(plan::cases_of).sum()
}

/// The names [`run_set`] gives the cases of `set`, for rows that skip it.
pub fn case_names(set: &VectorSet) -> Vec<String> {
    set.vectors.iter().flat_map(plan::case_names).collect()
}

/// Runs one vector set on one backend, in as few batches as the arena allows. `image` must hold
/// the set's kernel (see [`Stubs::missing`]); `seed` fixes poison values, garbage and splits.
/// The guarded cases' inputs are flush against the end of their pages ([`Placement::End`]).
pub fn run_set(
    backend: &mut dyn backend::Backend,
    variant: &'static Variant,
    image: &Image,
    set: &VectorSet,
    seed: u64,
) -> Row {
    run_set_with_progress(backend, variant, image, set, seed, Placement::End, &mut progress::ignore)
}

/// [`run_set`] with the guarded cases' inputs placed as `guard_at` says ([`Placement::End`] or
/// [`Placement::Start`]), reporting `Progress::Advance` (unit: cases) after each batch.
pub fn run_set_with_progress(
    backend: &mut dyn backend::Backend,
    variant: &'static Variant,
    image: &Image,
    set: &VectorSet,
    seed: u64,
    guard_at: Placement,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Row {
    run_set_digested(backend, variant, image, set, &CellSet { seed, guard_at, answers: None }, progress).0
}

/// How one set runs in a cell: the seed of the draws, where guarded inputs go, and the run's
/// shared reference answers with the set's position in the run (none: compute every answer).
pub(super) struct CellSet<'a> {
    pub(super) seed: u64,
    pub(super) guard_at: Placement,
    pub(super) answers: Option<(&'a Answers, usize)>,
}

/// [`run_set_with_progress`], also returning each case's [`CasePlan::outputs_digest`] in row
/// order (0 where the backend failed), for the comparison across backends: 8 bytes per case
/// and backend, never the buffers.
pub(super) fn run_set_digested(
    backend: &mut dyn backend::Backend,
    variant: &'static Variant,
    image: &Image,
    set: &VectorSet,
    how: &CellSet<'_>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> (Row, Vec<u64>) {
    let (seed, guard_at) = (how.seed, how.guard_at);
    let started = Instant::now();
    let kind = backend.kind();
    let entry = &Stubs::of(image);
    let abi = Abi::of(variant.arch);
    // Not the variant: riscv64 and riscv64+zbb (every variant) run identical cases.
    let stream = seed ^ fnv1a(set.set.as_bytes());
    let arena = match image.arena() {
        Ok(a) => a,
        Err(e) => return (Row::error(variant, kind, set, cases_in(set), e.to_string()), Vec::new()),
    };
    let mut digests = Vec::with_capacity(cases_in(set));
    let mut row = Row::new(variant, kind, set);
    row.cases.reserve(cases_in(set));
    row.family = entry.family(set.kernel).unwrap_or(row.family);
    let note = format!("{variant} on {kind}, {} / {}", set.kernel, set.set);
    let mut batch = Pending {
        builder: BatchBuilder::take_spare(abi),
        plans: Vec::new(),
        estimate: 0,
        spare: ZeroedPayload::take_spare(),
    };
    let mut run_pending = |batch: &mut Pending, row: &mut Row| {
        let (n, carried) = run_pending_batch(batch, backend, image, abi, arena, row, &mut digests);
        progress(Progress::Advance { by: n as u64, note: &note });
        carried
    };
    let domain = crate::domain::current();
    // Vectors outside the JDK's call domain: skipped (recorded after the rest) or run and marked.
    let mut skip: Vec<(&crate::vectors::Vector, String)> = Vec::new();
    let mut outside: Vec<(String, String)> = Vec::new();
    for v in &set.vectors {
        if let Some(why) = crate::domain::outside_for(v, domain, row.family) {
            if domain == crate::domain::Domain::Jdk {
                skip.push((v, why));
                continue;
            }
            outside.extend(plan::case_names(v).into_iter().map(|n| (n, why.clone())));
        }
        // Each vector's draws depend on its index alone, so `--case` repeats them exactly.
        let mut vector_rng = ChaCha8Rng::seed_from_u64(case_seed(stream, v.index, 0));
        let misalign = vector_rng.random_range(1..64);
        for (i, (layout, name)) in plan::layouts(v, guard_at, misalign).zip(plan::case_names(v)).enumerate() {
            // A case of its own stream: what an earlier case drew (fewer segments after a
            // failure) never shifts a later case's poison, garbage or split points.
            let mut case_rng = ChaCha8Rng::seed_from_u64(case_seed(stream, v.index, i + 1));
            let key = how.answers.map(|(a, s)| (a, (s, v.index, i)));
            let tape = key.map(|(a, k)| a.tape(k)).unwrap_or_default();
            let mut case = CaseRun::replaying(v, &set.set, &name, layout, tape);
            loop {
                // Run the batch when the next segment might not fit in the arena (a sum of upper bounds,
                // not `payload_size`, which walks every buffer of the batch).
                let next = case.estimate();
                if !batch.plans.is_empty() && BATCH_OVERHEAD + batch.estimate + next > arena.size {
                    run_pending(&mut batch, &mut row);
                }
                batch.estimate += next;
                let plan = case.plan_next(&mut batch.builder, entry, &mut case_rng);
                let more = plan.more;
                batch.plans.push(plan);
                if !more {
                    break;
                }
                // The next segment starts from what the kernel left: run this one now.
                match run_pending(&mut batch, &mut row) {
                    Some(carried) => case.absorb(&carried),
                    None => break, // the segment failed and was recorded
                }
            }
            if let Some((answers, k)) = key {
                answers.keep(k, case.into_tape());
            }
        }
    }
    run_pending(&mut batch, &mut row);
    std::mem::take(&mut batch.spare).keep_as_spare();
    std::mem::replace(&mut batch.builder, BatchBuilder::new(abi)).keep_as_spare();
    for (v, why) in skip {
        skip_outside_domain(v, &why, &mut row, &mut digests);
    }
    for (name, why) in outside {
        if let Some(i) = row.cases.iter().position(|c| c.name == name) {
            row.mark_out_of_domain(i, &why);
        }
    }
    row.elapsed = started.elapsed();
    (row, digests)
}

/// The seed of the draws of case `case` (from 1; 0 is the vector's own draws) of vector
/// `index` in the set whose stream is `stream` (the run's seed and the set's name): a case's
/// identity, so every variant and backend runs the same cases.
pub(super) fn case_seed(stream: u64, index: usize, case: usize) -> u64 {
    let mut key = [0u8; 24];
    key[..8].copy_from_slice(&stream.to_le_bytes());
    key[8..16].copy_from_slice(&(index as u64).to_le_bytes());
    key[16..].copy_from_slice(&(case as u64).to_le_bytes());
    fnv1a(&key)
}

/// The buffers a segment hands to the next one, as the kernel left them.
pub(super) type Carried = Vec<Vec<u8>>;

/// Payload bytes of a batch besides its segments: header, kernel stack, its guard pages and
/// the stack guard ([`crate::batch::STACK_GUARD`]), table alignment (an upper bound).
pub const BATCH_OVERHEAD: u64 = crate::batch::STACK_GUARD + 64 * 1024;

/// The batch being filled: its builder, the case segments laid into it, the sum of their
/// [`CaseRun::estimate`]s, and the payload allocation of the batch before, to lay this one into.
pub(super) struct Pending {
    pub(super) builder: BatchBuilder,
    pub(super) plans: Vec<CasePlan>,
    pub(super) estimate: u64,
    pub(super) spare: ZeroedPayload,
}

/// Runs the planned segments as one batch and records every case that ends in it in `row`,
/// each with an even share of the batch's wall time, and its digest in `digests` (0 when the
/// backend failed). Returns how many cases it recorded, and for a segment with more to come
/// that passed, the buffers it carries (a segment that failed ends its case: it is recorded
/// with its findings).
pub(super) fn run_pending_batch(
    pending: &mut Pending,
    backend: &mut dyn backend::Backend,
    image: &Image,
    abi: &'static Abi,
    arena: crate::image::Arena,
    row: &mut Row,
    digests: &mut Vec<u64>,
) -> (usize, Option<Vec<Vec<u8>>>) {
    if pending.plans.is_empty() {
        return (0, None);
    }
    let started = Instant::now();
    pending.estimate = 0;
    let taken: Vec<CasePlan> = std::mem::take(&mut pending.plans);
    // Long calls get a budget scaled to their blocks (instructions per block x blocks).
    let need = taken.iter().map(|p| p.call_instructions).max().unwrap_or(0);
    backend.set_call_instructions(need);
    if let Some(why) = interrupted_reason() {
        pending.builder = BatchBuilder::new(abi);
        return (skip_interrupted(&taken, why, row), None);
    }
    let outcome = pending
        .builder
        .layout_and_clear(arena, std::mem::take(&mut pending.spare))
        .map_err(|e| e.to_string())
        .and_then(|batch| backend::run_batch(backend, &batch).map(|run| (batch, run)).map_err(|e| e.to_string()));
    let (findings, carried, sums): (Vec<Vec<Finding>>, Vec<Option<Carried>>, Vec<u64>) = match &outcome {
        Ok((batch, run)) => {
            let mut f: Vec<Vec<Finding>> = taken.iter().map(|p| verdict::check(p, batch, run, abi, image)).collect();
            for (pc, text) in taken.iter().flat_map(|p| verdict::partial_load_warnings(p, batch, run, image)) {
                row.note_partial_load(pc, text);
            }
            crate::int_args::diagnose(backend, batch, &taken, &mut f, abi, image);
            let carry: Vec<Option<Carried>> = taken
                .iter()
                .zip(&f)
                .map(|(p, f)| (p.more && f.is_empty()).then(|| p.carried(batch, &run.resp)))
                .collect();
            let sums = taken.iter().map(|p| p.outputs_digest(batch, run)).collect();
            (f, carry, sums)
        }
        Err(e) => (
            taken.iter().map(|_| vec![Finding::new(Class::NotRun, format!("backend error: {e}"))]).collect(),
            taken.iter().map(|_| None).collect(),
            taken.iter().map(|_| 0).collect(),
        ),
    };
    if let Ok((batch, run)) = outcome {
        pending.spare = batch.into_payload();
        backend.recycle(run.resp);
    }
    // A batch the interruption killed proves nothing about its cases either way.
    if let Some(why) = interrupted_reason() {
        return (skip_interrupted(&taken, why, row), None);
    }
    let share = started.elapsed() / taken.len() as u32;
    let mut recorded = 0;
    let mut carry_out = None;
    for (((p, f), c), sum) in taken.into_iter().zip(findings).zip(carried).zip(sums) {
        if let Some(c) = c {
            carry_out = Some(c);
            continue;
        }
        recorded += 1;
        digests.push(sum);
        // A case the batch gave up on for time after many faults elsewhere did not fail: it
        // did not run (every one of its findings says so).
        let given_up =
            !f.is_empty() && f.iter().all(|x| x.class == Class::NotRun && x.text.contains(backend::RESUME_GIVEN_UP));
        let verdict = if crate::cases::verdict::is_not_run_past(&f) {
            crate::report::Verdict::Skipped(f[0].text.clone())
        } else if given_up {
            let why = f[0].text.split_once(" did not run: ").map_or(f[0].text.as_str(), |(_, w)| w).to_string();
            crate::report::Verdict::Skipped(why)
        } else {
            crate::report::Verdict::of(f)
        };
        row.push(crate::report::CaseOutcome { name: p.name, msg_len: p.msg_len, time: share, verdict });
    }
    (recorded, carry_out)
}

/// Records every case of `v` as skipped: it calls a stub outside the JDK's call domain
/// (`why`), which runs only with `--domain wide`.
fn skip_outside_domain(v: &crate::vectors::Vector, why: &str, row: &mut Row, digests: &mut Vec<u64>) {
    for name in plan::case_names(v) {
        let verdict = crate::report::Verdict::Skipped(format!(
            "outside the JDK's call domain ({why}); --domain wide runs it (docs/contracts.md)"
        ));
        row.push(crate::report::CaseOutcome { name, msg_len: 0, time: Default::default(), verdict });
        digests.push(0);
    }
}

/// Records every case of `taken` as skipped for `why`; returns how many.
pub(super) fn skip_interrupted(taken: &[CasePlan], why: String, row: &mut Row) -> usize {
    for p in taken {
        let verdict = crate::report::Verdict::Skipped(why.clone());
        row.push(crate::report::CaseOutcome {
            name: p.name.clone(),
            msg_len: p.msg_len,
            time: Default::default(),
            verdict,
        });
    }
    taken.len()
}

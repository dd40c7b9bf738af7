//! The campaign: targets cut into pieces run on the worker pool, the lowest piece that does not
//! pass decides a target.

use super::{
    blocks_of, cross_check, interrupted_reason, run_cases, runner, shrink, strategy_for, write_failure, Budget, Case,
    FuzzConfig, Outcome, Target, TargetResult, Warning,
};
use crate::cases::plan::Stubs;
use crate::contract::Family;
use crate::finding::Finding;
use crate::image::Image;
use crate::variant::{Kernel, Variant};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

pub(super) fn stable_hash(parts: &[&str]) -> u64 {
    let mut h = crate::fnv::Fnv1a::default();
    for p in parts {
        h.add(p.as_bytes());
        h.add(&[0]);
    }
    h.finish()
}

/// Batches in a piece: a target's case indices are cut into pieces of `PIECE_BATCHES × batch`
/// consecutive indices (the last one shorter), which the workers run independently. Piece 0 is
/// the campaign as it ran before pieces (a target of at most that many cases is one piece, so
/// its cases are those of earlier versions for the same seed).
pub const PIECE_BATCHES: u64 = 8;

/// Case indices in one piece of `cfg`'s targets.
pub(super) fn piece_size(cfg: &FuzzConfig) -> u64 {
    PIECE_BATCHES * cfg.batch.max(1) as u64
}

/// The seed of piece `piece` of a target: piece 0 keeps the (campaign seed, variant, kernel)
/// stream; the others get their own, so no piece has to generate another's cases to skip them.
pub(super) fn piece_seed(seed: u64, variant: &str, kernel: Kernel, piece: u64) -> u64 {
    match piece {
        0 => seed ^ stable_hash(&[variant, kernel.name()]),
        p => seed ^ stable_hash(&[variant, kernel.name(), &p.to_string()]),
    }
}

/// A variant × backend × kernel that can run: its slot in the results, its image.
pub(super) struct Runnable {
    slot: usize,
    image: usize,
    kind: crate::backend::BackendKind,
    kernel: Kernel,
    /// The vector length qemu runs it at ([`FuzzConfig::vector_lengths`]).
    vector_length: Option<crate::arch::VectorLength>,
    /// Pieces it is cut into (case budgets; `u64::MAX` for time budgets, bounded by time).
    pieces: u64,
}

/// Shared between the pieces of one target while they run.
#[derive(Default)]
pub(super) struct TargetState {
    /// The lowest piece that failed or errored (`u64::MAX`: none): higher pieces stop, since
    /// the target's verdict is the lowest piece's.
    stop_above: std::sync::atomic::AtomicU64,
    /// End of the target's time window, fixed when its first piece starts (time budgets).
    window: std::sync::OnceLock<Option<std::time::Instant>>,
}

/// One job of the pool: pieces `first`, `first + stride`, ... of target `target` on one
/// backend (a target has one such stream per worker, at most one per piece), until its pieces
/// are done, one does not pass, or (time budgets) the target's window closes.
pub(super) struct Job {
    target: usize,
    first: u64,
    stride: u64,
}

/// How a piece ended.
pub(super) enum PieceOutcome {
    Clean,
    Failed(Box<Shrunk>),
    Error(String),
    Interrupted(String),
    /// A lower piece failed first: this one's cases do not count.
    Cancelled,
}

/// A failure found and shrunk in a piece, not yet written.
pub(super) struct Shrunk {
    pub(super) case_index: u64,
    pub(super) original_blocks: usize,
    pub(super) case: Case,
    pub(super) findings: Vec<Finding>,
    pub(super) stopped: bool,
}

pub(super) struct PieceResult {
    piece: u64,
    /// Cases that ran (not those [`NotRun`]).
    cases: u64,
    elapsed: std::time::Duration,
    outcome: PieceOutcome,
    not_run: NotRun,
    /// Partial loads the piece's cases made, (pc, sentence) ([`Target::partial_loads`]).
    partial_loads: Vec<(u64, String)>,
}

/// Cases a backend stopped before an instruction it cannot execute
/// ([`crate::cases::verdict::not_run_past`]): neither failed nor passed, counted apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotRun {
    /// How many.
    pub count: u64,
    /// The first one's reason (`not run past `vpxor ...` at sym+0xb: Unicorn 2.1.5 cannot
    /// execute avx (...)`).
    pub reason: Option<String>,
}

impl NotRun {
    fn add(&mut self, other: &NotRun) {
        self.count += other.count;
        if self.reason.is_none() {
            self.reason.clone_from(&other.reason);
        }
    }
}

/// Runs a campaign: every variant × backend × kernel, until the budget is spent or a case fails.
///
/// Targets are cut into pieces ([`PIECE_BATCHES`]) that run on [`FuzzConfig::jobs`] workers
/// ([`crate::pool`]); a target's verdict is that of its lowest piece that did not pass, so
/// results (cases, failing case, shrunk case) are the same for any number of workers, and the
/// results come in variant, backend, kernel order.
///
/// A time budget is one deadline for the whole campaign: each target gets an equal share of the
/// workers' time (budget × workers / targets) on `ceil(workers / targets)` streams of pieces,
/// never past the deadline, and stops (shrinking included) at the first batch boundary after
/// it, so the campaign ends by the budget plus one batch's budget; a target reached after the
/// deadline is skipped, saying so.
pub fn campaign(cfg: &FuzzConfig, progress: &mut dyn FnMut(crate::progress::Progress<'_>)) -> Vec<TargetResult> {
    let started = std::time::Instant::now();
    let deadline = match cfg.budget {
        Budget::Time(d) => Some(started + d),
        Budget::Cases(_) => None,
    };
    let workers = crate::pool::resolve_jobs(cfg.jobs);
    let mut out: Vec<TargetResult> = Vec::new();
    let mut runnable: Vec<Runnable> = Vec::new();
    let mut images: Vec<(&'static Variant, Image)> = Vec::new();
    for &variant in &cfg.variants {
        plan_variant(cfg, variant, &mut out, &mut runnable, &mut images);
    }
    // Streams per target: one per worker for a case budget (at most one per piece); with a
    // time budget the workers are spread over the targets.
    let targets = runnable.len().max(1) as u64;
    let time_streams = (workers as u64).div_ceil(targets);
    let jobs: Vec<Job> = runnable
        .iter()
        .enumerate()
        .flat_map(|(target, r)| {
            let streams = match cfg.budget {
                Budget::Cases(_) => r.pieces.min(workers as u64),
                Budget::Time(_) => time_streams,
            };
            (0..streams).map(move |first| Job { target, first, stride: streams })
        })
        .collect();
    let states: Vec<TargetState> =
        runnable.iter().map(|_| TargetState { stop_above: u64::MAX.into(), ..TargetState::default() }).collect();
    // A time budget is shared by the targets that can run, not by the skipped ones: each gets
    // budget × workers / targets of worker time, on its `time_streams` streams at once.
    let share = match cfg.budget {
        Budget::Time(d) => Some(d.mul_f64(workers as f64 / (targets * time_streams) as f64)),
        Budget::Cases(_) => None,
    };
    let total = match cfg.budget {
        Budget::Cases(n) => runnable.len() as u64 * shard_cases(n, cfg.shard.0, cfg.shard.1),
        Budget::Time(_) => 0,
    };
    progress(crate::progress::Progress::Start { task: "fuzzing", total, unit: "cases" });
    let ctx = JobContext { cfg, runnable: &runnable, images: &images, states: &states, deadline, share };
    let results = crate::pool::run_ordered(&jobs, workers, &[], |job, lane| run_job(&ctx, job, lane), progress);
    progress(crate::progress::Progress::Finish);
    let mut per_target: Vec<Vec<PieceResult>> = runnable.iter().map(|_| Vec::new()).collect();
    for (job, r) in jobs.iter().zip(results) {
        match r {
            Some(pieces) => per_target[job.target].extend(pieces),
            None => per_target[job.target].push(PieceResult {
                piece: job.first,
                cases: 0,
                not_run: NotRun::default(),
                elapsed: Default::default(),
                outcome: PieceOutcome::Error("the lab panicked fuzzing this piece (a bug in the lab)".into()),
                partial_loads: Vec::new(),
            }),
        }
    }
    for (r, pieces) in runnable.iter().zip(per_target) {
        let (variant, _) = &images[r.image];
        let not_run = pieces.iter().filter(|p| !matches!(p.outcome, PieceOutcome::Cancelled)).fold(
            NotRun::default(),
            |mut all, p| {
                all.add(&p.not_run);
                all
            },
        );
        for (pc, text) in pieces.iter().flat_map(|p| &p.partial_loads) {
            if !out[r.slot].warnings.iter().any(|w| w.pc == Some(*pc)) {
                let on = crate::run::backend_label(r.kind, r.vector_length);
                let text = format!("{} on {on}, {} / fuzz: partial load: {text}", variant.name, r.kernel);
                out[r.slot].warnings.push(Warning { pc: Some(*pc), text });
            }
        }
        let result = merge_pieces(cfg, variant, r, pieces);
        out[r.slot].cases = result.0;
        out[r.slot].elapsed = result.1;
        out[r.slot].outcome = result.2;
        if let (0, Outcome::Clean, Some(why)) = (result.0, &out[r.slot].outcome, &not_run.reason) {
            // Every case stopped before an instruction the backend cannot execute: not clean.
            out[r.slot].outcome = Outcome::Skipped(format!("every case: {why}"));
        }
        out[r.slot].not_run = not_run;
    }
    probe_upper_bits(cfg, &runnable, &images, &mut out);
    for (variant, image) in &images {
        let mine: Vec<usize> = (0..out.len()).filter(|&i| out[i].variant == variant.name).collect();
        if let (Some(&first), Some(&last)) = (mine.first(), mine.last()) {
            cross_check(cfg, variant, image, &mut out[first..=last]);
        }
    }
    out
}

/// The `abi-upper-bits` probe ([`crate::int_args::reliance`]) once per image and kernel, as
/// `lab run` makes it: on the first runnable backend of the image that is not Unicorn (whose
/// calls may stop at vector code), else Unicorn; its warnings go to that target's result.
fn probe_upper_bits(
    cfg: &FuzzConfig,
    runnable: &[Runnable],
    images: &[(&'static Variant, Image)],
    out: &mut [TargetResult],
) {
    let mut done: Vec<(usize, Kernel)> = Vec::new();
    let unicorn = crate::backend::BackendKind::Unicorn;
    let mut order: Vec<&Runnable> = runnable.iter().filter(|r| r.kind != unicorn).collect();
    order.extend(runnable.iter().filter(|r| r.kind == unicorn));
    for r in order {
        if done.contains(&(r.image, r.kernel)) {
            continue;
        }
        done.push((r.image, r.kernel));
        let (variant, image) = &images[r.image];
        let found = r
            .kind
            .open_at(variant, image, cfg.limits, r.vector_length)
            .map_err(|e| e.to_string())
            .and_then(|mut b| crate::int_args::reliance(b.as_mut(), image, r.kernel));
        let head = format!("{} ({}, probed on {})", variant.name, r.kernel, r.kind);
        let text = match found {
            Ok(found) => {
                found.iter().map(|f| crate::upper_bits_report::warning(variant.name, r.kernel, r.kind, f)).collect()
            }
            Err(e) => vec![format!("{head}: the upper-bits probe could not run: {e}")],
        };
        out[r.slot].warnings.extend(text.into_iter().map(|text| Warning { pc: None, text }));
    }
}

/// What every job reads.
pub(super) struct JobContext<'a> {
    cfg: &'a FuzzConfig,
    runnable: &'a [Runnable],
    images: &'a [(&'static Variant, Image)],
    states: &'a [TargetState],
    deadline: Option<std::time::Instant>,
    /// Each target's share of a time budget.
    share: Option<std::time::Duration>,
}

/// The backends `variant` is fuzzed on, qemu once per vector length when the variant's ISA has
/// one ([`FuzzConfig::vector_lengths`], else the arch row's defaults), as `lab run` places its
/// cells: a kernel right only from some VLEN up fails at the VLENs below.
fn targets_of(
    cfg: &FuzzConfig,
    variant: &'static Variant,
) -> Vec<(crate::backend::BackendKind, Option<crate::arch::VectorLength>)> {
    let mut out = Vec::new();
    for &kind in &cfg.backends {
        let runs = kind == crate::backend::BackendKind::Qemu && kind.supports(variant).is_ok();
        match crate::user_kernel::vector_length(variant).filter(|_| runs) {
            Some(spec) if !cfg.vector_lengths.is_empty() => {
                out.extend(cfg.vector_lengths.iter().map(|&b| (kind, Some(spec.at(b)))));
            }
            Some(spec) => out.extend(spec.defaults.iter().map(|&b| (kind, Some(spec.at(b))))),
            None => out.push((kind, None)),
        }
    }
    out
}

/// Builds and scans `variant`'s image and pushes one result per backend × kernel: final for the
/// targets that cannot run (skipped or errors), a placeholder for the [`Runnable`] ones.
pub(super) fn plan_variant(
    cfg: &FuzzConfig,
    variant: &'static Variant,
    out: &mut Vec<TargetResult>,
    runnable: &mut Vec<Runnable>,
    images: &mut Vec<(&'static Variant, Image)>,
) {
    let image = crate::toolchain::build_image(&cfg.build, variant)
        .map_err(|e| e.to_string())
        .and_then(|p| Image::load(&p, variant.arch).map_err(|e| e.to_string()));
    let (scan, scan_errors) = match &image {
        Ok(i) => crate::run::scan_image(variant, i),
        Err(_) => Default::default(),
    };
    let index = images.len();
    for (kind, vector_length) in targets_of(cfg, variant) {
        for &kernel in &cfg.kernels {
            let mut findings: Vec<Finding> = scan.iter().map(|f| f.finding.clone()).collect();
            let not_provided = crate::run::not_provided(variant, kernel);
            if let (Ok(i), None) = (&image, &not_provided) {
                findings.extend(crate::run::missing_symbols(variant, i, &[kernel]).into_iter().map(|f| f.finding));
            }
            let family = image.as_ref().ok().and_then(|i| Stubs::of(i).family(kernel)).unwrap_or(Family::HotSpot);
            let result = |outcome| TargetResult {
                variant: variant.name,
                backend: kind,
                kernel,
                vector_length,
                family,
                cases: 0,
                not_run: NotRun::default(),
                elapsed: Default::default(),
                outcome,
                image_findings: findings.clone(),
                image: image.as_ref().ok().map(|i| i.path.clone()),
                warnings: Vec::new(),
            };
            if let Err(why) = kind.applicable(variant) {
                out.push(result(Outcome::NotApplicable(why)));
                continue;
            }
            let image = match (&image, scan_errors.first()) {
                (Ok(i), None) => i,
                (Err(e), _) | (Ok(_), Some(e)) => {
                    out.push(result(Outcome::Error(e.clone())));
                    continue;
                }
            };
            let why = kind.supports(variant).err().or(not_provided).or_else(|| Stubs::of(image).missing(kernel));
            if let Some(why) = why.or_else(interrupted_reason) {
                out.push(result(Outcome::Skipped(why)));
                continue;
            }
            let pieces = match cfg.budget {
                Budget::Cases(n) => n.div_ceil(piece_size(cfg)).max(1),
                Budget::Time(_) => u64::MAX,
            };
            runnable.push(Runnable { slot: out.len(), image: index, kind, kernel, vector_length, pieces });
            out.push(result(Outcome::Clean));
        }
    }
    if let Ok(image) = image {
        images.push((variant, image));
    }
}

/// Runs one job's pieces on a backend of its own.
pub(super) fn run_job(ctx: &JobContext, job: &Job, lane: &crate::pool::Lane) -> Vec<PieceResult> {
    let r = &ctx.runnable[job.target];
    let state = &ctx.states[job.target];
    let (variant, image) = &ctx.images[r.image];
    let window = *state.window.get_or_init(|| {
        let now = std::time::Instant::now();
        match (ctx.share, ctx.deadline) {
            (Some(share), Some(deadline)) => Some((now + share).min(deadline)),
            _ => None,
        }
    });
    if window.is_some_and(|end| std::time::Instant::now() >= end) {
        return Vec::new();
    }
    let mut backend = match r.kind.open_at(variant, image, ctx.cfg.limits, r.vector_length) {
        Ok(b) => b,
        Err(e) => {
            let outcome = PieceOutcome::Error(e.to_string());
            state.stop_above.fetch_min(job.first, std::sync::atomic::Ordering::Relaxed);
            let piece = PieceResult {
                piece: job.first,
                cases: 0,
                elapsed: Default::default(),
                outcome,
                not_run: NotRun::default(),
                partial_loads: Vec::new(),
            };
            return vec![piece];
        }
    };
    let mut t = Target { backend: backend.as_mut(), variant, image, seed: ctx.cfg.seed, partial_loads: Vec::new() };
    let mut pieces = Vec::new();
    let mut piece = job.first;
    loop {
        let mut result = run_piece(ctx, &mut t, (r, state), piece, window, lane);
        result.partial_loads = std::mem::take(&mut t.partial_loads);
        let stop = !matches!(result.outcome, PieceOutcome::Clean);
        pieces.push(result);
        piece += job.stride;
        let closed = window.is_some_and(|end| std::time::Instant::now() >= end);
        if stop || piece >= r.pieces || closed || state.stop_above.load(std::sync::atomic::Ordering::Relaxed) < piece {
            break;
        }
    }
    pieces
}

/// Runs piece `piece` of target `r`: its case indices of this shard, batch by batch, until
/// they are done, a case fails (then shrunk), the window closes or a lower piece failed.
pub(super) fn run_piece(
    ctx: &JobContext,
    t: &mut Target,
    (r, state): (&Runnable, &TargetState),
    piece: u64,
    window: Option<std::time::Instant>,
    lane: &crate::pool::Lane,
) -> PieceResult {
    use std::sync::atomic::Ordering;
    let cfg = ctx.cfg;
    let started = std::time::Instant::now();
    let label = format!("{}/{}/{}", t.variant.name, crate::run::backend_label(r.kind, r.vector_length), r.kernel);
    let label = match r.pieces {
        1 => label,
        u64::MAX => format!("{label} piece {}", piece + 1),
        n => format!("{label} piece {}/{n}", piece + 1),
    };
    let mut runner = runner(piece_seed(cfg.seed, t.variant.name, r.kernel, piece));
    let family = Stubs::of(t.image).family(r.kernel).unwrap_or(Family::HotSpot);
    let strategy = strategy_for(r.kernel, family);
    let (shard, shards) = cfg.shard;
    let first = piece * piece_size(cfg);
    let end = match cfg.budget {
        Budget::Cases(n) => (first + piece_size(cfg)).min(n),
        Budget::Time(_) => first + piece_size(cfg),
    };
    let mut index = first;
    let mut cases = 0u64;
    let mut not_run = NotRun::default();
    let result = |cases, outcome, not_run: &NotRun| PieceResult {
        piece,
        cases,
        elapsed: started.elapsed(),
        outcome,
        not_run: not_run.clone(),
        partial_loads: Vec::new(),
    };
    loop {
        if state.stop_above.load(Ordering::Relaxed) < piece {
            return result(cases, PieceOutcome::Cancelled, &not_run);
        }
        if let Some(why) = interrupted_reason() {
            return result(cases, PieceOutcome::Interrupted(why), &not_run);
        }
        if window.is_some_and(|w| std::time::Instant::now() >= w) {
            return result(cases, PieceOutcome::Clean, &not_run);
        }
        let mut trees = Vec::with_capacity(cfg.batch);
        while trees.len() < cfg.batch.max(1) && index < end {
            let tree = strategy.new_tree(&mut runner).expect("strategies do not reject");
            if index % shards == shard {
                trees.push((index, tree));
            }
            index += 1;
        }
        if trees.is_empty() {
            return result(cases, PieceOutcome::Clean, &not_run);
        }
        let batch: Vec<Case> = trees.iter().map(|(_, tree)| tree.current()).collect();
        let findings = run_cases(t, &batch);
        // A batch the interruption killed proves nothing about its cases.
        if let Some(why) = interrupted_reason() {
            return result(cases, PieceOutcome::Interrupted(why), &not_run);
        }
        let findings = match findings {
            Ok(f) => f,
            Err(e) => {
                state.stop_above.fetch_min(piece, Ordering::Relaxed);
                return result(cases, PieceOutcome::Error(e.to_string()), &not_run);
            }
        };
        // A case stopped before an instruction the backend cannot execute did not run.
        let stopped: Vec<usize> =
            (0..findings.len()).filter(|&i| crate::cases::verdict::is_not_run_past(&findings[i])).collect();
        if let Some(&first) = stopped.first() {
            not_run.add(&NotRun { count: stopped.len() as u64, reason: Some(findings[first][0].text.clone()) });
        }
        cases += (batch.len() - stopped.len()) as u64;
        let rate = cases as f64 / started.elapsed().as_secs_f64().max(1e-9);
        lane.advance(batch.len() as u64, &format!("{label}: {cases} cases, {rate:.0} cases/s"));
        let failed = |f: &Vec<Finding>| !f.is_empty() && !crate::cases::verdict::is_not_run_past(f);
        if let Some(j) = findings.iter().position(failed) {
            state.stop_above.fetch_min(piece, Ordering::Relaxed);
            let (case_index, tree) = trees.swap_remove(j);
            let original_blocks = blocks_of(&tree.current());
            lane.advance(0, &format!("{label}: shrinking case {case_index}"));
            let outcome = match shrink(t, tree, findings[j].clone(), 4096, window) {
                Ok((case, findings, stopped)) => {
                    PieceOutcome::Failed(Box::new(Shrunk { case_index, original_blocks, case, findings, stopped }))
                }
                Err(e) => PieceOutcome::Error(e.to_string()),
            };
            return result(cases, outcome, &not_run);
        }
    }
}

/// The lowest piece that did not pass, which decides a target's verdict (so it does not depend
/// on which pieces ran first), with the cases and time of the pieces up to it (of every piece
/// when all passed; cancelled pieces, above a failed one, do not count).
pub(super) fn decide(mut pieces: Vec<PieceResult>) -> (u64, std::time::Duration, Option<PieceOutcome>) {
    pieces.sort_by_key(|p| p.piece);
    let (mut cases, mut elapsed) = (0u64, std::time::Duration::ZERO);
    for p in pieces {
        if matches!(p.outcome, PieceOutcome::Cancelled) {
            continue;
        }
        cases += p.cases;
        elapsed += p.elapsed;
        if !matches!(p.outcome, PieceOutcome::Clean) {
            return (cases, elapsed, Some(p.outcome));
        }
    }
    (cases, elapsed, None)
}

/// Why a timed target ran no case.
pub(super) const TIME_SPENT: &str =
    "not run: the --time budget was spent before this target ran a case (earlier targets and set-up ran to it)";

/// A target's result from its pieces ([`decide`]); a failure is written as a vector file.
pub(super) fn merge_pieces(
    cfg: &FuzzConfig,
    variant: &'static Variant,
    r: &Runnable,
    pieces: Vec<PieceResult>,
) -> (u64, std::time::Duration, Outcome) {
    let (cases, elapsed, decided) = decide(pieces);
    let outcome = match decided {
        Some(PieceOutcome::Failed(s)) => write_failure(cfg, variant, (r.kind, r.vector_length), r.kernel, *s),
        Some(PieceOutcome::Error(e)) => Outcome::Error(e),
        Some(PieceOutcome::Interrupted(why)) => Outcome::Skipped(why),
        // A timed target whose share went before its first batch (set-up, earlier targets)
        // proves nothing: skipped, not clean.
        Some(PieceOutcome::Clean | PieceOutcome::Cancelled) | None
            if cases == 0 && matches!(cfg.budget, Budget::Time(_)) =>
        {
            Outcome::Skipped(TIME_SPENT.into())
        }
        Some(PieceOutcome::Clean | PieceOutcome::Cancelled) | None => Outcome::Clean,
    };
    (cases, elapsed, outcome)
}

/// How many of a campaign's first `n` case indices shard `shard` of `shards` owns (index k
/// belongs to shard k mod `shards`); over shards 0..`shards` they add up to `n`.
pub fn shard_cases(n: u64, shard: u64, shards: u64) -> u64 {
    (n + shards - 1 - shard) / shards
}

#[cfg(test)]
mod tests {
    use super::{decide, shard_cases, PieceOutcome, PieceResult};

    /// Whatever order the pieces finished in, the lowest one that did not pass decides, and
    /// only the pieces up to it count.
    #[test]
    fn the_lowest_piece_that_did_not_pass_decides() {
        let piece = |piece: u64, cases: u64, outcome: PieceOutcome| PieceResult {
            piece,
            cases,
            elapsed: std::time::Duration::from_millis(cases),
            outcome,
            not_run: Default::default(),
            partial_loads: Vec::new(),
        };
        let pieces = || {
            vec![
                piece(3, 5, PieceOutcome::Error("piece 3".into())),
                piece(0, 16, PieceOutcome::Clean),
                piece(4, 2, PieceOutcome::Cancelled),
                piece(2, 7, PieceOutcome::Error("piece 2".into())),
                piece(1, 16, PieceOutcome::Clean),
            ]
        };
        for rotate in 0..5 {
            let mut p = pieces();
            p.rotate_left(rotate);
            let (cases, elapsed, outcome) = decide(p);
            assert_eq!((cases, elapsed.as_millis()), (39, 39), "pieces 0, 1 and 2");
            assert!(matches!(outcome, Some(PieceOutcome::Error(e)) if e == "piece 2"));
        }
        let (cases, _, outcome) = decide(vec![piece(1, 16, PieceOutcome::Clean), piece(0, 16, PieceOutcome::Clean)]);
        assert!(cases == 32 && outcome.is_none());
    }

    #[test]
    fn shards_0_to_n_minus_1_own_every_case_index_exactly_once() {
        for n in [0u64, 1, 3, 4, 5, 2000, 2001] {
            for shards in 1..=5u64 {
                // The indices shard i takes: i, i + N, i + 2N, ... below n.
                let owned: Vec<u64> = (0..shards).map(|i| (0..n).filter(|k| k % shards == i).count() as u64).collect();
                let counted: Vec<u64> = (0..shards).map(|i| shard_cases(n, i, shards)).collect();
                assert_eq!(counted, owned, "n {n}, {shards} shards");
                assert_eq!(counted.iter().sum::<u64>(), n);
            }
        }
    }
}

//! `lab run`: every selected variant × backend × kernel against every vector, as a library call
//! the CLI and the tests share. Emits a [`Report`]; printing it is the reporter's business.

use std::path::PathBuf;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::abi::Abi;
use crate::backend::{self, BackendKind, Limits};
use crate::batch::{BatchBuilder, Placement};
use crate::checks::{self, CasePlan, Class, Entry, Finding};
use crate::image::Image;
use crate::isa;
use crate::procedure::CaseRun;
use crate::progress::{self, Progress};
use crate::report::ImageFinding;
use crate::report::{Report, Row, Status};
use crate::toolchain::{self, BuildConfig};
use crate::variant::{Kernel, Variant};
use crate::vectors::{self, CostLimits, VectorError, VectorSet};

/// What to run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Variants, in report order.
    pub variants: Vec<&'static Variant>,
    /// Backends, in report order.
    pub backends: Vec<BackendKind>,
    /// Kernels to check.
    pub kernels: Vec<Kernel>,
    /// Vector files (bundled and the user's).
    pub vector_files: Vec<PathBuf>,
    /// Where kernels come from and where images go.
    pub build: BuildConfig,
    /// Seed for poison values, argument garbage and split points (printed in the report).
    pub seed: u64,
    /// Hang budgets.
    pub limits: Limits,
    /// Where the flush cases put their inputs: [`Placement::End`] (over-reads fault, the
    /// default) or [`Placement::Start`] (under-reads fault).
    pub flush: Placement,
    /// `--set`, `--case`, `--fail-fast`.
    pub filter: Filter,
    /// Limits on what the vector entries may cost ([`vectors::CostLimits`]).
    pub cost_limits: CostLimits,
}

/// The vector sets of a run, loaded and checked before anything runs.
#[derive(Debug, Default)]
pub struct LoadedSets {
    /// The sets of the selected kernels, with their valid entries within the cost limits.
    pub sets: Vec<VectorSet>,
    /// What is wrong in the files (each names the file, entry and field).
    pub errors: Vec<VectorError>,
    /// Why a file gives no case although it loaded (left out by `--kernel`, no entries).
    pub notes: Vec<String>,
}

/// Loads every vector file of `cfg`, refuses entries over the cost limits, and keeps the sets
/// of the selected kernels.
pub fn load_sets(cfg: &RunConfig) -> LoadedSets {
    let mut loaded = LoadedSets::default();
    for f in &cfg.vector_files {
        let (set, errors) = vectors::load_file(f);
        loaded.errors.extend(errors);
        let Some(set) = set else { continue };
        if !cfg.kernels.contains(&set.kernel) {
            let kernels: Vec<&str> = cfg.kernels.iter().map(|k| k.name()).collect();
            loaded.notes.push(format!(
                "{}: a {} file, left out because --kernel selects {}",
                f.display(),
                set.kernel,
                kernels.join(", ")
            ));
        } else if set.vectors.is_empty() {
            let why =
                if loaded.errors.iter().any(|e| e.file == *f) { "no valid entries" } else { "an empty `vectors` list" };
            loaded.notes.push(format!("{}: {why}, nothing to run", f.display()));
        } else {
            loaded.sets.push(set);
        }
    }
    loaded.errors.extend(vectors::enforce_costs(&mut loaded.sets, cfg.cost_limits));
    loaded.sets.retain(|s| !s.vectors.is_empty());
    loaded
}

/// Which sets and cases run, and whether the run stops at the first failure.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Vector set names to run (empty: every set).
    pub sets: Vec<String>,
    /// Vector or case names to run (empty: all). A vector runs whole (every case of it) when
    /// its name or one of its case names is listed; each vector's random draws depend only on
    /// the seed, variant, set and its index, so the narrowed run repeats the full run's cases.
    pub cases: Vec<String>,
    /// After the first row with a failed case, the remaining rows are skipped with the reason.
    pub fail_fast: bool,
}

/// Why rows after a failure are skipped under `--fail-fast`.
pub const FAIL_FAST_SKIP: &str = "not run: --fail-fast stopped the run at the first failure";

/// Runs everything in `cfg` and returns the report. Never panics on bad input: vector problems,
/// build failures and backend failures land in the report.
pub fn run(cfg: &RunConfig) -> Report {
    run_with_progress(cfg, &mut progress::ignore)
}

/// [`run`], reporting progress to `progress`: one task "building kernels" (unit: images, one per
/// variant), then one task "checking" (unit: cases, over every cell that runs).
pub fn run_with_progress(cfg: &RunConfig, progress: &mut dyn FnMut(Progress<'_>)) -> Report {
    run_loaded(cfg, load_sets(cfg), progress)
}

/// [`run_with_progress`] with the vector files loaded already ([`load_sets`]).
pub fn run_loaded(cfg: &RunConfig, loaded: LoadedSets, progress: &mut dyn FnMut(Progress<'_>)) -> Report {
    let started = Instant::now();
    let mut report = Report { seed: cfg.seed, ..Report::default() };
    report.vector_errors = loaded.errors;
    report.notes = loaded.notes;
    let sets = apply_filter(&cfg.filter, loaded.sets, &mut report);
    let images = build_images(cfg, &mut report, progress);
    let total: usize = images.iter().map(|(v, image)| runnable_cases(cfg, v, image, &sets)).sum();
    progress(Progress::Start { task: "checking", total: total as u64, unit: "cases" });
    for (variant, image) in &images {
        run_variant(cfg, variant, image, &sets, &mut report, progress);
    }
    progress(Progress::Finish);
    report.elapsed = started.elapsed();
    report
}

/// Builds (or takes from the cache) and loads the image of every variant; a variant that fails
/// lands in the report's set-up errors and is left out.
fn build_images(
    cfg: &RunConfig,
    report: &mut Report,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Vec<(&'static Variant, Image)> {
    progress(Progress::Start { task: "building kernels", total: cfg.variants.len() as u64, unit: "images" });
    let mut images = Vec::new();
    for &variant in &cfg.variants {
        let image = toolchain::build_image(&cfg.build, variant)
            .map_err(|e| e.to_string())
            .and_then(|p| Image::load(&p, variant.arch).map_err(|e| e.to_string()));
        match image {
            Ok(i) => images.push((variant, i)),
            Err(e) => report.setup_errors.push(format!("{variant}: {e}")),
        }
        progress(Progress::Advance { by: 1, note: variant.name });
    }
    progress(Progress::Finish);
    images
}

/// Cases of `variant` that will run (backend supports it, image has the kernel).
fn runnable_cases(cfg: &RunConfig, variant: &Variant, image: &Image, sets: &[VectorSet]) -> usize {
    let entry = Entry::of(image);
    let backends = cfg.backends.iter().filter(|b| b.supports(variant).is_ok()).count();
    backends * sets.iter().filter(|s| entry.missing(s.kernel).is_none()).map(cases_in).sum::<usize>()
}

/// Keeps the sets and vectors `filter` selects; a `--set` or `--case` name that selects
/// nothing is a set-up error naming what exists, so a mistyped name never passes as "0 failed".
fn apply_filter(filter: &Filter, sets: Vec<VectorSet>, report: &mut Report) -> Vec<VectorSet> {
    for name in filter.sets.iter().filter(|n| !sets.iter().any(|s| &&s.set == n)) {
        let mut known: Vec<&str> = sets.iter().map(|s| s.set.as_str()).collect();
        known.sort_unstable();
        known.dedup();
        report.setup_errors.push(format!("--set {name}: no such vector set (sets here: {})", known.join(", ")));
    }
    let mut sets: Vec<VectorSet> =
        sets.into_iter().filter(|s| filter.sets.is_empty() || filter.sets.contains(&s.set)).collect();
    if filter.cases.is_empty() {
        return sets;
    }
    let selected = |v: &vectors::Vector| filter.cases.iter().any(|c| *c == v.name || checks::case_names(v).contains(c));
    for name in &filter.cases {
        let hit = sets.iter().flat_map(|s| &s.vectors).any(|v| *name == v.name || checks::case_names(v).contains(name));
        if !hit {
            report.setup_errors.push(format!("--case {name}: no vector or case of that name in the selected sets"));
        }
    }
    for s in &mut sets {
        s.vectors.retain(selected);
    }
    sets.retain(|s| !s.vectors.is_empty());
    sets
}

/// Cases a vector set makes (see [`checks::cases_of`]).
pub fn cases_in(set: &VectorSet) -> usize {
    set.vectors.iter().map(checks::cases_of).sum()
}

/// The names [`run_set`] gives the cases of `set`, for rows that skip it.
pub fn case_names(set: &VectorSet) -> Vec<String> {
    set.vectors.iter().flat_map(checks::case_names).collect()
}

fn run_variant(
    cfg: &RunConfig,
    variant: &'static Variant,
    image: &Image,
    sets: &[VectorSet],
    report: &mut Report,
    progress: &mut dyn FnMut(Progress<'_>),
) {
    let entry = Entry::of(image);
    let unicorn_refusal = scan_isa(variant, image, report);
    for &kind in &cfg.backends {
        let skip_all = |report: &mut Report, reason: String| {
            for set in sets {
                report.rows.push(Row::skipped_named(variant, kind, set, case_names(set), reason.clone()));
            }
        };
        if let Err(reason) = kind.supports(variant) {
            skip_all(report, reason);
            continue;
        }
        if let (BackendKind::Unicorn, Some(reason)) = (kind, &unicorn_refusal) {
            skip_all(report, reason.clone());
            continue;
        }
        let mut backend = match kind.open(variant, image, cfg.limits) {
            Ok(b) => b,
            Err(e) => {
                report.setup_errors.push(format!("{variant} on {kind}: {e}"));
                continue;
            }
        };
        for set in sets {
            if cfg.filter.fail_fast && report.rows.iter().any(|r| !r.failed.is_empty()) {
                report.rows.push(Row::skipped_named(variant, kind, set, case_names(set), FAIL_FAST_SKIP.into()));
                continue;
            }
            if let Some(reason) = entry.missing(set.kernel) {
                report.rows.push(Row::skipped_named(variant, kind, set, case_names(set), reason));
                continue;
            }
            report.rows.push(run_set_with_progress(
                backend.as_mut(),
                variant,
                image,
                set,
                cfg.seed,
                cfg.flush,
                progress,
            ));
        }
    }
}

/// The static ISA scan of `image` ([`isa::scan`]): one image finding per violation. Returns why
/// Unicorn must not run the image (VEX/EVEX code on x86_64), if it must not.
fn scan_isa(variant: &'static Variant, image: &Image, report: &mut Report) -> Option<String> {
    match isa::scan(image, variant) {
        Ok(violations) => report.image_findings.extend(violations.into_iter().map(|v| {
            let class = if v.why.starts_with("a system call") { Class::Syscall } else { Class::Isa };
            ImageFinding { variant: variant.name, finding: Finding::new(class, v.to_string()) }
        })),
        Err(e) => report.setup_errors.push(format!("{variant}: ISA scan: {e}")),
    }
    isa::unicorn_refusal(image).ok().flatten()
}

/// Runs one vector set on one backend, in as few batches as the arena allows. `image` must hold
/// the set's kernel (see [`Entry::missing`]); `seed` fixes poison values, garbage and splits.
/// Flush cases put their inputs at the end of their pages ([`Placement::End`]).
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
    let started = Instant::now();
    let kind = backend.kind();
    let entry = &Entry::of(image);
    let abi = Abi::of(variant.arch);
    let stream = seed ^ fxhash(variant.name) ^ fxhash(&set.set);
    let arena = match image.arena() {
        Ok(a) => a,
        Err(e) => return Row::error(variant, kind, set, cases_in(set), e.to_string()),
    };
    let mut row = Row::new(variant, kind, set);
    let note = format!("{variant} on {kind}, {} / {}", set.kernel, set.set);
    let mut batch = Pending { builder: BatchBuilder::new(abi), plans: Vec::new(), estimate: 0 };
    let mut run_pending = |batch: &mut Pending, row: &mut Row| {
        let (n, carried) = flush(batch, backend, image, abi, arena, row);
        progress(Progress::Advance { by: n as u64, note: &note });
        carried
    };
    for v in &set.vectors {
        // Each vector's draws depend on its index alone, so `--case` repeats them exactly.
        let mut case_rng = ChaCha8Rng::seed_from_u64(stream ^ (v.index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let misalign = case_rng.gen_range(1..64);
        for (layout, name) in checks::layouts(v, guard_at, misalign).zip(checks::case_names(v)) {
            let mut case = CaseRun::new(v, &set.set, &name, layout);
            loop {
                // Flush when the next segment might not fit in the arena (a sum of upper bounds,
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
        }
    }
    run_pending(&mut batch, &mut row);
    row.elapsed = started.elapsed();
    row
}

/// Payload bytes of a batch besides its segments (an upper bound): header, table alignment,
/// the kernel stack and its guard pages (64 KiB), plus the unmapped region of at least
/// [`crate::batch::STACK_GUARD`] bytes below the stack budget.
pub const BATCH_OVERHEAD: u64 = 64 * 1024 + crate::batch::STACK_GUARD;

/// The batch being filled: its builder, the case segments laid into it, and the sum of their
/// [`CaseRun::estimate`]s.
struct Pending {
    builder: BatchBuilder,
    plans: Vec<CasePlan>,
    estimate: u64,
}

/// Runs the planned segments as one batch and records every case that ends in it in `row`,
/// each with an even share of the batch's wall time. Returns how many cases it recorded, and
/// for a segment with more to come that passed, the buffers it carries (a segment that failed
/// ends its case: it is recorded with its findings).
fn flush(
    pending: &mut Pending,
    backend: &mut dyn backend::Backend,
    image: &Image,
    abi: &'static Abi,
    arena: crate::image::Arena,
    row: &mut Row,
) -> (usize, Option<Vec<Vec<u8>>>) {
    if pending.plans.is_empty() {
        return (0, None);
    }
    let started = Instant::now();
    let b = std::mem::replace(&mut pending.builder, BatchBuilder::new(abi));
    pending.estimate = 0;
    let taken: Vec<CasePlan> = std::mem::take(&mut pending.plans);
    // Long calls get a budget scaled to their blocks (instructions per block x blocks).
    let need = taken.iter().map(|p| p.call_instructions).max().unwrap_or(0);
    backend.set_call_instructions(need);
    let outcome = b
        .layout(arena)
        .map_err(|e| e.to_string())
        .and_then(|batch| backend::run_batch(backend, &batch).map(|run| (batch, run)).map_err(|e| e.to_string()));
    let (findings, carried): (Vec<Vec<Finding>>, Vec<Option<Vec<Vec<u8>>>>) = match &outcome {
        Ok((batch, run)) => taken
            .iter()
            .map(|p| {
                let f = checks::check(p, batch, run, abi, image);
                let carry = (p.more && f.is_empty()).then(|| p.carried(batch, &run.resp));
                (f, carry)
            })
            .unzip(),
        Err(e) => {
            taken.iter().map(|_| (vec![Finding::new(Class::NotRun, format!("backend error: {e}"))], None)).unzip()
        }
    };
    let share = started.elapsed() / taken.len() as u32;
    let mut recorded = 0;
    let mut carry_out = None;
    for ((p, f), c) in taken.iter().zip(findings).zip(carried) {
        match c {
            Some(c) => carry_out = Some(c),
            None => {
                row.record_timed(p, f, share);
                recorded += 1;
            }
        }
    }
    (recorded, carry_out)
}

/// A small stable hash for seeding per (variant, set) streams.
fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The status the CLI exits with: 1 when a case or an image failed (even if some vector files
/// were bad: a kernel failure is never reported as an input error), else 2 for input or set-up
/// errors or when nothing ran, else 0.
pub fn exit_code(report: &Report) -> i32 {
    match report.status() {
        Status::Passed => 0,
        Status::Failed => 1,
        Status::SetupError => 2,
    }
}

//! `lab run`: every selected variant × backend × kernel against every vector, as a library call
//! the CLI and the tests share. Emits a [`Report`]; printing it is the reporter's business.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::abi::Abi;
use crate::backend::{self, BackendKind, Limits};
use crate::batch::{BatchBuilder, Placement, ZeroedPayload};
use crate::cases::answers::Answers;
use crate::cases::plan::{self, CasePlan, Stubs};
use crate::cases::procedure::CaseRun;
use crate::cases::verdict;
use crate::finding::{Class, Finding};
use crate::fnv::fnv1a;
use crate::image::Image;
use crate::isa;
use crate::pool;
use crate::progress::{self, Progress};
use crate::report::ImageFinding;
use crate::report::{Report, Row};
use crate::toolchain::{self, BuildConfig};
use crate::variant::{Kernel, Variant};
use crate::vectors::{self, CostLimits, VectorError, VectorSet};

pub mod compare;

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
    /// Which end of their pages the guarded cases' inputs are flush against (`--flush`):
    /// [`Placement::End`] (over-reads fault, the default) or [`Placement::Start`] (under-reads
    /// fault).
    pub flush: Placement,
    /// `--set`, `--case`, `--fail-fast`.
    pub filter: Filter,
    /// Limits on what the vector entries may cost ([`vectors::CostLimits`]).
    pub cost_limits: CostLimits,
    /// Worker threads for the variant × backend cells; 0 = one per CPU
    /// ([`pool::default_jobs`]). The report does not depend on it (but for times).
    pub jobs: usize,
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
    /// Patterns of the vector sets to run (empty: every set), matched as [`crate::filter`]
    /// says: substrings, `=NAME` exactly, `*`/`?` as globs.
    pub sets: Vec<String>,
    /// Patterns of the vectors or cases to run (empty: all), matched as `sets` are. A vector
    /// runs whole (every case of it) when its name or one of its case names matches; each
    /// case's random draws depend only on the seed, set, vector index and case (never the
    /// variant, the backend, the filter or other cases), so the narrowed run repeats the full
    /// run's cases.
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

/// [`run_with_progress`] with the vector files loaded already ([`load_sets`]). The variant ×
/// backend cells run on [`RunConfig::jobs`] worker threads ([`crate::pool`]); the report is
/// assembled in variant, backend, set order afterwards, so it is the same whatever the number
/// of workers (but for times).
pub fn run_loaded(cfg: &RunConfig, loaded: LoadedSets, progress: &mut dyn FnMut(Progress<'_>)) -> Report {
    let started = Instant::now();
    let mut report = Report { seed: cfg.seed, ..Report::default() };
    if cfg.backends.iter().any(|&b| b != BackendKind::Unicorn) {
        let gaps = backend::confine::Support::probe().gaps();
        report.warnings.extend(gaps.into_iter().map(|g| format!("qemu and native guests: {g}")));
    }
    report.warnings.extend(crate::build_confine::gaps().into_iter().map(|g| format!("builds: {g}")));
    report.vector_errors = loaded.errors;
    report.notes = loaded.notes;
    let sets = apply_filter(&cfg.filter, loaded.sets, &mut report);
    let images = build_images(cfg, &mut report, progress);
    report.images = images.iter().map(|(v, image)| (v.name, image.path.clone())).collect();
    report.kernels_dir = Some(cfg.build.kernels_dir.clone());
    let total: usize = images.iter().map(|(v, image)| runnable_cases(cfg, v, image, &sets)).sum();
    let scans: Vec<Scan> = images.iter().map(|(v, image)| Scan::of(cfg, v, image, &sets)).collect();
    let cells: Vec<PlacedCell> = (0..images.len())
        .flat_map(|image| cfg.backends.iter().map(move |&kind| Cell { image, kind }))
        .enumerate()
        .map(|(i, c)| c.at(i))
        .collect();
    progress(Progress::Start { task: "checking", total: total as u64, unit: "cases" });
    let first_failed = AtomicUsize::new(usize::MAX);
    let answers = Answers::default();
    let rank = rank_cells(&cells, &images, &sets);
    let outs = pool::run_ordered(
        &cells,
        pool::resolve_jobs(cfg.jobs),
        &rank,
        |cell, lane| {
            run_cell(
                cfg,
                cell,
                &images,
                &sets,
                &Shared { scans: &scans, first_failed: &first_failed, answers: &answers },
                lane,
            )
        },
        progress,
    );
    progress(Progress::Finish);
    assemble(cfg, &images, scans, &cells, outs, &sets, &mut report);
    report.elapsed = started.elapsed();
    report.interrupted = crate::interrupt::interrupted();
    report.set_apart_not_applicable(&cfg.variants, &cfg.backends);
    report
}

/// One variant × backend of the run: the index of its image in the built images and the
/// backend, placed (by [`Cell::at`]) at its position in report order.
#[derive(Debug, Clone, Copy)]
struct Cell {
    image: usize,
    kind: BackendKind,
}

/// A [`Cell`] and its position among the cells in report order.
#[derive(Debug, Clone, Copy)]
struct PlacedCell {
    cell: Cell,
    pos: usize,
}

impl Cell {
    fn at(self, pos: usize) -> PlacedCell {
        PlacedCell { cell: self, pos }
    }
}

/// What the static scans found in one image, before any backend runs it.
struct Scan {
    /// Image findings (ISA, system calls, missing contract symbols), in report order.
    findings: Vec<ImageFinding>,
    /// Set-up errors of the scan itself.
    errors: Vec<String>,
    /// Why Unicorn must not run the image, if it must not.
    unicorn_refusal: Option<String>,
}

impl Scan {
    fn of(cfg: &RunConfig, variant: &'static Variant, image: &Image, sets: &[VectorSet]) -> Scan {
        let (mut findings, unicorn_refusal, errors) = scan_image(variant, image);
        let selected: Vec<Kernel> =
            cfg.kernels.iter().copied().filter(|k| sets.iter().any(|s| s.kernel == *k)).collect();
        let provided: Vec<Kernel> = selected.into_iter().filter(|&k| not_provided(variant, k).is_none()).collect();
        findings.extend(missing_symbols(variant, image, &provided));
        Scan { findings, errors, unicorn_refusal }
    }
}

/// What the cells of a run share: the static scans, the lowest report position of a failed
/// row (`--fail-fast`), and the reference's answers.
struct Shared<'a> {
    scans: &'a [Scan],
    first_failed: &'a AtomicUsize,
    answers: &'a Answers,
}

/// What one cell gives back: its rows (with the case digests of the rows that ran, for
/// [`compare::compare_backends`]), or the error that kept its backend from opening.
enum CellOut {
    /// One row per set, in set order; `None` digests for rows that did not run.
    Rows(Vec<(Row, Option<Vec<u64>>)>),
    /// Every set of the cell skipped for the same reason, before the backend was opened.
    Skipped(String),
    /// The backend did not open.
    OpenError(String),
}

/// The order the workers take the cells in: the most expensive first (its cases times a
/// weight: Unicorn emulates Zbb by trapping each instruction, ~2.5x plain riscv64), so the
/// longest cell does not start last and leave the other cores idle.
fn rank_cells(cells: &[PlacedCell], images: &[(&'static Variant, Image)], sets: &[VectorSet]) -> Vec<usize> {
    let cases: usize = sets.iter().map(cases_in).sum();
    let weight = |c: &PlacedCell| {
        let variant = images[c.cell.image].0;
        let w = if c.cell.kind == BackendKind::Unicorn && variant.zbb { 5 } else { 2 };
        cases * w
    };
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(weight(&cells[i])));
    order
}

/// Runs one cell on this worker: opens its backend (here, so a `!Send` Unicorn engine never
/// leaves the thread) and runs every set. Under `--fail-fast`, a set is not started once a
/// row earlier in the same variant failed (`first_failed`: the lowest report position of a
/// failed row); [`assemble`] decides the rest in report order.
fn run_cell(
    cfg: &RunConfig,
    placed: &PlacedCell,
    images: &[(&'static Variant, Image)],
    sets: &[VectorSet],
    shared: &Shared<'_>,
    lane: &pool::Lane,
) -> CellOut {
    let Shared { scans, first_failed, answers } = *shared;
    let Cell { image: i, kind } = placed.cell;
    let (variant, image) = (images[i].0, &images[i].1);
    if let Err(reason) = kind.supports(variant) {
        return CellOut::Skipped(reason);
    }
    if let Some(reason) = interrupted_reason() {
        return CellOut::Skipped(reason);
    }
    if let (BackendKind::Unicorn, Some(reason)) = (kind, &scans[i].unicorn_refusal) {
        return CellOut::Skipped(reason.clone());
    }
    let mut backend = match kind.open(variant, image, cfg.limits) {
        Ok(b) => b,
        Err(e) => return CellOut::OpenError(format!("{variant} on {kind}: {e}")),
    };
    let entry = Stubs::of(image);
    let per_variant = cfg.backends.len() * sets.len();
    let variant_start = placed.pos / cfg.backends.len().max(1) * per_variant;
    let mut rows = Vec::with_capacity(sets.len());
    for (s, set) in sets.iter().enumerate() {
        let pos = placed.pos * sets.len() + s;
        let failed_before = first_failed.load(Ordering::SeqCst);
        if cfg.filter.fail_fast && failed_before >= variant_start && failed_before < pos {
            rows.push((Row::skipped_named(variant, kind, set, case_names(set), FAIL_FAST_SKIP.into()), None));
            continue;
        }
        let missing = || not_provided(variant, set.kernel).or_else(|| entry.missing(set.kernel));
        if let Some(reason) = missing().or_else(interrupted_reason) {
            rows.push((Row::skipped_named(variant, kind, set, case_names(set), reason), None));
            continue;
        }
        let mut progress = lane.callback();
        let cell = CellSet { seed: cfg.seed, guard_at: cfg.flush, answers: Some((answers, s)) };
        let (row, digests) = run_set_digested(backend.as_mut(), variant, image, set, &cell, &mut progress);
        if !row.failed.is_empty() {
            first_failed.fetch_min(pos, Ordering::SeqCst);
        }
        rows.push((row, Some(digests)));
    }
    CellOut::Rows(rows)
}

/// Puts the cells' results into `report` in report order (variant, backend, set), applies
/// `--fail-fast` as a run one cell after another would (every row after the first failed one
/// is skipped; the backends of a variant are compared before the next variant's rows), and
/// compares the backends of each variant.
fn assemble(
    cfg: &RunConfig,
    images: &[(&'static Variant, Image)],
    scans: Vec<Scan>,
    cells: &[PlacedCell],
    outs: Vec<Option<CellOut>>,
    sets: &[VectorSet],
    report: &mut Report,
) {
    let mut outs = outs.into_iter();
    let mut cells = cells.iter();
    for ((variant, _), scan) in images.iter().zip(scans) {
        let variant: &'static Variant = variant;
        report.image_findings.extend(scan.findings);
        report.setup_errors.extend(scan.errors);
        let mut ran: Vec<(usize, Vec<u64>)> = Vec::new();
        for (cell, out) in cells.by_ref().take(cfg.backends.len()).zip(outs.by_ref()) {
            let kind = cell.cell.kind;
            let out = out.unwrap_or_else(|| {
                CellOut::OpenError(format!("{variant} on {kind}: lab bug: the worker running this cell panicked"))
            });
            match out {
                CellOut::OpenError(e) => report.setup_errors.push(e),
                CellOut::Skipped(reason) => {
                    for set in sets {
                        report.rows.push(Row::skipped_named(variant, kind, set, case_names(set), reason.clone()));
                    }
                }
                CellOut::Rows(rows) => {
                    for ((row, digests), set) in rows.into_iter().zip(sets) {
                        if cfg.filter.fail_fast && report.rows.iter().any(|r| !r.failed.is_empty()) {
                            let skip = Row::skipped_named(variant, kind, set, case_names(set), FAIL_FAST_SKIP.into());
                            report.rows.push(skip);
                            continue;
                        }
                        if let Some(d) = digests {
                            ran.push((report.rows.len(), d));
                        }
                        report.rows.push(row);
                    }
                }
            }
        }
        compare::compare_backends(report, &ran, variant.arch);
    }
}

/// Why work is not started or not judged after SIGINT/SIGTERM (lab/src/interrupt.rs).
fn interrupted_reason() -> Option<String> {
    crate::interrupt::interrupted()
        .map(|s| format!("not finished: the run was interrupted by {}", crate::interrupt::name(s)))
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
        if crate::interrupt::interrupted().is_some() {
            break;
        }
        let image = toolchain::build_image(&cfg.build, variant)
            .map_err(|e| match e {
                // These already say "building <variant>: ...".
                toolchain::ToolchainError::Failed { .. }
                | toolchain::ToolchainError::Object { .. }
                | toolchain::ToolchainError::Refused { .. }
                | toolchain::ToolchainError::Stopped { .. }
                | toolchain::ToolchainError::Interrupted { .. } => e.to_string(),
                _ => format!("{variant}: {e}"),
            })
            .and_then(|p| Image::load(&p, variant.arch).map_err(|e| format!("{variant}: {e}")));
        match image {
            Ok(i) => images.push((variant, i)),
            // A build the signal killed is no set-up error: the report says it was interrupted.
            Err(_) if crate::interrupt::interrupted().is_some() => break,
            Err(e) => report.setup_errors.push(e),
        }
        progress(Progress::Advance { by: 1, note: variant.name });
    }
    progress(Progress::Finish);
    images
}

/// Cases of `variant` that will run (backend supports it, image has the kernel).
fn runnable_cases(cfg: &RunConfig, variant: &Variant, image: &Image, sets: &[VectorSet]) -> usize {
    let entry = Stubs::of(image);
    let backends = cfg.backends.iter().filter(|b| b.supports(variant).is_ok()).count();
    let runs = |s: &&VectorSet| entry.missing(s.kernel).is_none() && not_provided(variant, s.kernel).is_none();
    backends * sets.iter().filter(runs).map(cases_in).sum::<usize>()
}

/// Keeps the sets and vectors `filter` selects ([`crate::filter::select`]: names match as
/// substrings, `=NAME` exactly, `*`/`?` as globs); a `--set` or `--case` pattern that selects
/// nothing is a set-up error naming the nearest names, so a mistyped name never passes as
/// "0 failed".
fn apply_filter(filter: &Filter, sets: Vec<VectorSet>, report: &mut Report) -> Vec<VectorSet> {
    let (sets, misses) = crate::filter::select(filter, sets);
    report.setup_errors.extend(misses);
    sets
}

/// Cases a vector set makes (see [`plan::cases_of`]).
pub fn cases_in(set: &VectorSet) -> usize {
    set.vectors.iter().map(plan::cases_of).sum()
}

/// The names [`run_set`] gives the cases of `set`, for rows that skip it.
pub fn case_names(set: &VectorSet) -> Vec<String> {
    set.vectors.iter().flat_map(plan::case_names).collect()
}

/// Why a user's kernel has no `kernel` to run, if it has none: its manifest entry (or
/// `--symbol` options) maps no symbol of that kernel's contracts, or, with nothing mapped, its
/// objects define none ([`crate::user_kernel::UserKernel::lacks`]).
pub fn not_provided(variant: &Variant, kernel: Kernel) -> Option<String> {
    crate::user_kernel::of(variant)?.lacks(kernel)
}

/// One finding per contract symbol of a selected kernel that `image` does not define, for
/// kernels no contract family ([`crate::contract::family_of`]) is complete for (the symbols of
/// [`crate::contract::intended_family`]): a kernels folder without `poly1305.S`, or with `md5_implCompressMB` misspelt,
/// fails its variant instead of passing with the kernel's cases skipped. Names the closest
/// symbol the image does define, when one is close (edit distance at most 3, or equal ignoring
/// case).
pub fn missing_symbols(variant: &'static Variant, image: &Image, kernels: &[Kernel]) -> Vec<ImageFinding> {
    let mut out = Vec::new();
    let defined = |s: &str| image.symbol(s).is_some();
    for &kernel in kernels.iter().filter(|&&k| crate::contract::family_of(k, defined).is_none()) {
        // A misspelt OpenSSL name (`poly1305_blocs`) still points at the OpenSSL family.
        let near = |s: &str| image.symbol_names().any(|n| strsim::levenshtein(n, s) <= 3 || n.eq_ignore_ascii_case(s));
        let family = crate::contract::intended_family(kernel, |s| defined(s) || near(s));
        for symbol in crate::contract::contracts(family, kernel).map(|c| c.symbol).filter(|s| !defined(s)) {
            let near = image
                .symbol_names()
                .map(|n| (strsim::levenshtein(n, symbol), n))
                .filter(|&(d, n)| d <= 3 || n.eq_ignore_ascii_case(symbol))
                .min()
                .map(|(_, n)| format!("; the image defines `{n}`: misspelt?"))
                .unwrap_or_default();
            let text = format!(
                "the {kernel} kernel's contract symbol `{symbol}` is missing from {} (its {kernel} cases cannot run){near}",
                image.path.display()
            );
            out.push(ImageFinding { variant: variant.name, finding: Finding::new(Class::MissingSymbol, text) });
        }
    }
    out
}

/// The static ISA and system-call scan of `image` ([`isa::scan`]) and its stack-pointer
/// alignment scan ([`crate::align::sp_scan`], class abi): one image finding per violation, why Unicorn must not run the image (VEX/EVEX code on x86_64), if it must not, and
/// set-up errors of the scan itself. Shared by `lab run` and `lab fuzz`.
pub fn scan_image(variant: &'static Variant, image: &Image) -> (Vec<ImageFinding>, Option<String>, Vec<String>) {
    let (findings, errors) = match isa::scan(image, variant) {
        Ok(violations) => (
            violations
                .into_iter()
                .map(|v| {
                    let class = if v.why.starts_with("a system call") { Class::Syscall } else { Class::Isa };
                    ImageFinding { variant: variant.name, finding: Finding::new(class, v.to_string()) }
                })
                .collect(),
            Vec::new(),
        ),
        Err(e) => (Vec::new(), vec![format!("{variant}: ISA scan: {e}")]),
    };
    // The static sp-alignment check (qemu and native cannot see a misaligned sp; align.rs).
    let mut findings = findings;
    let sp = crate::align::sp_scan(image).unwrap_or_default().into_iter();
    findings
        .extend(sp.map(|v| ImageFinding { variant: variant.name, finding: Finding::new(Class::Abi, v.to_string()) }));
    (findings, isa::unicorn_refusal(image).ok().flatten(), errors)
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
struct CellSet<'a> {
    seed: u64,
    guard_at: Placement,
    answers: Option<(&'a Answers, usize)>,
}

/// [`run_set_with_progress`], also returning each case's [`CasePlan::outputs_digest`] in row
/// order (0 where the backend failed), for the comparison across backends: 8 bytes per case
/// and backend, never the buffers.
fn run_set_digested(
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
    let hotspot = row.family == crate::contract::Family::HotSpot;
    let domain = crate::domain::current();
    // Vectors outside the JDK's call domain: skipped (recorded after the rest) or run and marked.
    let mut skip: Vec<(&crate::vectors::Vector, String)> = Vec::new();
    let mut outside: Vec<(String, String)> = Vec::new();
    for v in &set.vectors {
        if let Some(why) = crate::domain::vector_outside(v, domain).filter(|_| hotspot) {
            if domain == crate::domain::Domain::Jdk {
                skip.push((v, why));
                continue;
            }
            outside.extend(plan::case_names(v).into_iter().map(|n| (n, why.clone())));
        }
        // Each vector's draws depend on its index alone, so `--case` repeats them exactly.
        let mut vector_rng = ChaCha8Rng::seed_from_u64(case_seed(stream, v.index, 0));
        let misalign = vector_rng.gen_range(1..64);
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
fn case_seed(stream: u64, index: usize, case: usize) -> u64 {
    let mut key = [0u8; 24];
    key[..8].copy_from_slice(&stream.to_le_bytes());
    key[8..16].copy_from_slice(&(index as u64).to_le_bytes());
    key[16..].copy_from_slice(&(case as u64).to_le_bytes());
    fnv1a(&key)
}

/// The buffers a segment hands to the next one, as the kernel left them.
type Carried = Vec<Vec<u8>>;

/// Payload bytes of a batch besides its segments: header, kernel stack, its guard pages and
/// the stack guard ([`crate::batch::STACK_GUARD`]), table alignment (an upper bound).
pub const BATCH_OVERHEAD: u64 = crate::batch::STACK_GUARD + 64 * 1024;

/// The batch being filled: its builder, the case segments laid into it, the sum of their
/// [`CaseRun::estimate`]s, and the payload allocation of the batch before, to lay this one into.
struct Pending {
    builder: BatchBuilder,
    plans: Vec<CasePlan>,
    estimate: u64,
    spare: ZeroedPayload,
}

/// Runs the planned segments as one batch and records every case that ends in it in `row`,
/// each with an even share of the batch's wall time, and its digest in `digests` (0 when the
/// backend failed). Returns how many cases it recorded, and for a segment with more to come
/// that passed, the buffers it carries (a segment that failed ends its case: it is recorded
/// with its findings).
fn run_pending_batch(
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
            crate::diagnose::upper_bits(backend, batch, &taken, &mut f, abi, image);
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
        let verdict = if given_up {
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
fn skip_interrupted(taken: &[CasePlan], why: String, row: &mut Row) -> usize {
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

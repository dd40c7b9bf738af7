//! The run matrix: images built per variant, cells (variant × backend) ranked and run on the
//! worker pool, each cell's vector sets in order.

use super::{
    case_names, cases_in, interrupted_reason, not_provided, run_set_digested, CellSet, RunConfig, FAIL_FAST_SKIP,
};
use crate::arch::VectorLength;
use crate::backend::BackendKind;
use crate::cases::answers::Answers;
use crate::cases::plan::Stubs;
use crate::image::Image;
use crate::pool;
use crate::progress::Progress;
use crate::report::{Report, Row};
use crate::toolchain::{self};
use crate::variant::Variant;
use crate::vectors::VectorSet;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One variant × backend of the run: the index of its image in the built images and the
/// backend, placed (by [`Cell::at`]) at its position in report order.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cell {
    pub(super) image: usize,
    pub(super) kind: BackendKind,
    /// The vector length qemu runs this cell at (one cell per length of an RVV or SVE image).
    pub(super) vector_length: Option<VectorLength>,
}

/// A [`Cell`] and its position among the cells in report order.
#[derive(Debug, Clone, Copy)]
pub(super) struct PlacedCell {
    pub(super) cell: Cell,
    pub(super) pos: usize,
    /// The position of its variant's first cell (`--fail-fast` compares row positions).
    pub(super) variant_first: usize,
}

/// Every cell of the run in report order: per image, per backend, per vector length (qemu runs
/// an image whose ISA has a vector length once per length: `lengths`, else the arch row's
/// defaults).
pub(super) fn place_cells(
    images: &[(&'static Variant, Image)],
    backends: &[BackendKind],
    lengths: &[u32],
) -> Vec<PlacedCell> {
    let mut cells = Vec::new();
    for (image, (variant, _)) in images.iter().enumerate() {
        let variant_first = cells.len();
        for &kind in backends {
            // One cell per length only where qemu runs the variant (else one skipped cell).
            let runs = kind == BackendKind::Qemu && kind.supports(variant).is_ok();
            let spec = crate::user_kernel::vector_length(variant).filter(|_| runs);
            let bits: Vec<Option<VectorLength>> = match spec {
                Some(spec) if !lengths.is_empty() => lengths.iter().map(|&b| Some(spec.at(b))).collect(),
                Some(spec) => spec.defaults.iter().map(|&b| Some(spec.at(b))).collect(),
                None => vec![None],
            };
            for vector_length in bits {
                let pos = cells.len();
                cells.push(PlacedCell { cell: Cell { image, kind, vector_length }, pos, variant_first });
            }
        }
    }
    cells
}

/// What the cells of a run share: the lowest report position of a failed
/// row (`--fail-fast`), and the reference's answers.
pub(super) struct Shared<'a> {
    pub(super) first_failed: &'a AtomicUsize,
    pub(super) answers: &'a Answers,
}

/// What one cell gives back: its rows (with the case digests of the rows that ran, for
/// [`compare::compare_backends`]), or the error that kept its backend from opening.
pub(super) enum CellOut {
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
pub(super) fn rank_cells(cells: &[PlacedCell], images: &[(&'static Variant, Image)], sets: &[VectorSet]) -> Vec<usize> {
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
pub(super) fn run_cell(
    cfg: &RunConfig,
    placed: &PlacedCell,
    images: &[(&'static Variant, Image)],
    sets: &[VectorSet],
    shared: &Shared<'_>,
    lane: &pool::Lane,
) -> CellOut {
    let Shared { first_failed, answers } = *shared;
    let Cell { image: i, kind, vector_length } = placed.cell;
    let (variant, image) = (images[i].0, &images[i].1);
    if let Err(reason) = kind.supports(variant) {
        return CellOut::Skipped(reason);
    }
    if let Some(reason) = interrupted_reason() {
        return CellOut::Skipped(reason);
    }
    let mut backend = match kind.open_at(variant, image, cfg.limits, vector_length) {
        Ok(b) => b,
        Err(e) => return CellOut::OpenError(format!("{variant} on {}: {e}", backend_label(kind, vector_length))),
    };
    let entry = Stubs::of(image);
    let variant_start = placed.variant_first * sets.len();
    let mut rows = Vec::with_capacity(sets.len());
    for (s, set) in sets.iter().enumerate() {
        let pos = placed.pos * sets.len() + s;
        let failed_before = first_failed.load(Ordering::SeqCst);
        if cfg.filter.fail_fast && failed_before >= variant_start && failed_before < pos {
            let row = Row::skipped_named(variant, kind, set, case_names(set), FAIL_FAST_SKIP.into());
            rows.push((row.at(vector_length), None));
            continue;
        }
        let missing = || not_provided(variant, set.kernel).or_else(|| entry.missing(set.kernel));
        if let Some(reason) = missing().or_else(interrupted_reason) {
            rows.push((Row::skipped_named(variant, kind, set, case_names(set), reason).at(vector_length), None));
            continue;
        }
        let mut progress = lane.callback();
        let cell = CellSet { seed: cfg.seed, guard_at: cfg.flush, answers: Some((answers, s)) };
        let (row, digests) = run_set_digested(backend.as_mut(), variant, image, set, &cell, &mut progress);
        if !row.failed().is_empty() {
            first_failed.fetch_min(pos, Ordering::SeqCst);
        }
        rows.push((row.at(vector_length), Some(digests)));
    }
    CellOut::Rows(rows)
}

/// `qemu vlen=256`, or the backend's name: how rows, fuzz targets and errors name where they ran.
pub fn backend_label(kind: BackendKind, vector_length: Option<VectorLength>) -> String {
    match vector_length {
        Some(vl) => format!("{kind} {vl}"),
        None => kind.to_string(),
    }
}

/// Builds (or takes from the cache) and loads the image of every variant; a variant that fails
/// lands in the report's set-up errors and is left out.
pub(super) fn build_images(
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
pub(super) fn runnable_cases(cfg: &RunConfig, variant: &Variant, image: &Image, sets: &[VectorSet]) -> usize {
    let entry = Stubs::of(image);
    let lengths = |b: &BackendKind| match crate::user_kernel::vector_length(variant).filter(|_| *b == BackendKind::Qemu)
    {
        Some(spec) if cfg.vector_lengths.is_empty() => spec.defaults.len(),
        Some(_) => cfg.vector_lengths.len(),
        None => 1,
    };
    let backends: usize = cfg.backends.iter().filter(|b| b.supports(variant).is_ok()).map(lengths).sum();
    let runs = |s: &&VectorSet| entry.missing(s.kernel).is_none() && not_provided(variant, s.kernel).is_none();
    backends * sets.iter().filter(runs).map(cases_in).sum::<usize>()
}

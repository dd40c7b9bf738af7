//! The run matrix: images built per variant, cells (variant × backend) ranked and run on the
//! worker pool, each cell's vector sets in order.

use super::{
    case_names, cases_in, interrupted_reason, not_provided, run_set_digested, CellSet, RunConfig, Scan, FAIL_FAST_SKIP,
};
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
}

/// A [`Cell`] and its position among the cells in report order.
#[derive(Debug, Clone, Copy)]
pub(super) struct PlacedCell {
    pub(super) cell: Cell,
    pub(super) pos: usize,
}

impl Cell {
    pub(super) fn at(self, pos: usize) -> PlacedCell {
        PlacedCell { cell: self, pos }
    }
}

/// What the cells of a run share: the static scans, the lowest report position of a failed
/// row (`--fail-fast`), and the reference's answers.
pub(super) struct Shared<'a> {
    pub(super) scans: &'a [Scan],
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
    let backends = cfg.backends.iter().filter(|b| b.supports(variant).is_ok()).count();
    let runs = |s: &&VectorSet| entry.missing(s.kernel).is_none() && not_provided(variant, s.kernel).is_none();
    backends * sets.iter().filter(runs).map(cases_in).sum::<usize>()
}

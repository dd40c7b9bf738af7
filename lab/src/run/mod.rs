//! `lab run`: every selected variant × backend × kernel against every vector, as a library call
//! the CLI and the tests share. Emits a [`Report`]; printing it is the reporter's business.

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use crate::backend::{BackendKind, Limits};
use crate::batch::Placement;
use crate::cases::answers::Answers;
use crate::pool;
use crate::progress::{self, Progress};
use crate::report::Report;
use crate::toolchain::BuildConfig;
use crate::variant::{Kernel, Variant};
use crate::vectors::{self, CostLimits, VectorError, VectorSet};

mod assemble;
pub mod compare;
mod image_scan;
mod matrix;
mod set;

pub use crate::filter::Filter;
use assemble::*;
use image_scan::*;
pub use image_scan::{missing_symbols, not_provided, scan_image};
pub use matrix::backend_label;
use matrix::*;
use set::*;
pub use set::{case_names, cases_in, run_set, run_set_with_progress, BATCH_OVERHEAD};

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
    /// Vector lengths in bits qemu runs every RVV/SVE image at (`--vlen`, each checked against
    /// the image's arch row: [`check_vector_lengths`]); empty: the arch row's defaults (RVV: VLEN
    /// 128, 256, 512, 1024).
    pub vector_lengths: Vec<u32>,
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

/// Checks `--vlen` values against every selected variant with a vector length: each value
/// must be one its arch row allows (RVV: a power of two in 128..=1024).
///
/// # Errors
/// The first value a variant's row refuses, naming the value, the variant and the rule; or
/// values given when no selected variant has a vector length.
pub fn check_vector_lengths(variants: &[&'static Variant], lengths: &[u32]) -> Result<(), String> {
    if lengths.is_empty() {
        return Ok(());
    }
    let vector: Vec<&&Variant> = variants.iter().filter(|v| crate::user_kernel::vector_length(v).is_some()).collect();
    if vector.is_empty() {
        let names: Vec<&str> = variants.iter().map(|v| v.name).collect();
        return Err(format!(
            "--vlen: no selected variant has a vector length ({} are scalar; RVV and SVE rows have one)",
            names.join(", ")
        ));
    }
    for v in vector {
        let spec = crate::user_kernel::vector_length(v).expect("filtered");
        for &bits in lengths {
            spec.check(bits).map_err(|why| format!("--vlen {bits} for {v}: {why}"))?;
        }
    }
    Ok(())
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
        let gaps = crate::sandbox::Support::probe().gaps();
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
    let cells = place_cells(&images, &cfg.backends, &cfg.vector_lengths);
    progress(Progress::Start { task: "checking", total: total as u64, unit: "cases" });
    let first_failed = AtomicUsize::new(usize::MAX);
    let answers = Answers::default();
    let rank = rank_cells(&cells, &images, &sets);
    let outs = pool::run_ordered(
        &cells,
        pool::resolve_jobs(cfg.jobs),
        &rank,
        |cell, lane| {
            run_cell(cfg, cell, &images, &sets, &Shared { first_failed: &first_failed, answers: &answers }, lane)
        },
        progress,
    );
    progress(Progress::Finish);
    assemble(cfg, &images, scans, &cells, outs, &sets, &mut report);
    report.warnings.extend(crate::backend::witness_gaps().into_iter().map(|g| format!("qemu guests: {g}")));
    report.warnings = crate::upper_bits_report::merge_paths(std::mem::take(&mut report.warnings));
    report.elapsed = started.elapsed();
    report.interrupted = crate::interrupt::interrupted();
    report.set_apart_not_applicable(&cfg.variants, &cfg.backends);
    report
}

//! `lab run`: every selected variant × backend × kernel against every vector, as a library call
//! the CLI and the tests share. Emits a [`Report`]; printing it is the reporter's business.

use std::path::PathBuf;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::abi::Abi;
use crate::backend::{self, BackendKind, Limits};
use crate::batch::{BatchBuilder, Placement};
use crate::checks::{self, CaseKind, CasePlan, Class, Entry, Finding};
use crate::image::Image;
use crate::isa;
use crate::report::{CaseFailure, ImageFinding, Report, Row, Status};
use crate::toolchain::{self, BuildConfig};
use crate::variant::{Kernel, Variant};
use crate::vectors::{self, VectorSet};

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
}

/// Runs everything in `cfg` and returns the report. Never panics on bad input: vector problems,
/// build failures and backend failures land in the report.
pub fn run(cfg: &RunConfig) -> Report {
    let started = Instant::now();
    let mut report = Report { seed: cfg.seed, ..Report::default() };
    let sets = load_sets(cfg, &mut report);
    for variant in &cfg.variants {
        run_variant(cfg, variant, &sets, &mut report);
    }
    report.elapsed = started.elapsed();
    report
}

fn load_sets(cfg: &RunConfig, report: &mut Report) -> Vec<VectorSet> {
    let mut sets = Vec::new();
    for f in &cfg.vector_files {
        let (set, errors) = vectors::load_file(f);
        report.vector_errors.extend(errors);
        sets.extend(set.filter(|s| cfg.kernels.contains(&s.kernel)));
    }
    sets
}

/// Cases per vector: two. MD5 (DigestBase-driven): inputs flush against a guard page, and
/// inputs misaligned by `index mod 16`; Poly1305: one call with the input flush against a
/// guard page, and split calls with the input misaligned.
pub fn cases_in(set: &VectorSet) -> usize {
    2 * set.vectors.len()
}

/// The case kinds of one vector (see [`cases_in`]); `flush` is [`RunConfig::flush`].
pub fn case_kinds(kernel: Kernel, index: usize, flush: Placement) -> [CaseKind; 2] {
    let misaligned = Placement::Offset(index % 16);
    let split = kernel == Kernel::Poly1305;
    [CaseKind { split: false, inputs: flush }, CaseKind { split, inputs: misaligned }]
}

fn run_variant(cfg: &RunConfig, variant: &'static Variant, sets: &[VectorSet], report: &mut Report) {
    let image = toolchain::build_image(&cfg.build, variant)
        .map_err(|e| e.to_string())
        .and_then(|p| Image::load(&p, variant.arch).map_err(|e| e.to_string()));
    let image = match image {
        Ok(i) => i,
        Err(e) => {
            report.setup_errors.push(format!("{variant}: {e}"));
            return;
        }
    };
    let entry = Entry::of(&image);
    let unicorn_refusal = scan_isa(variant, &image, report);
    for &kind in &cfg.backends {
        let skip_all = |report: &mut Report, reason: String| {
            for set in sets {
                report.rows.push(Row::skipped(variant, kind, set, cases_in(set), reason.clone()));
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
        let mut backend = match kind.open(variant, &image, cfg.limits) {
            Ok(b) => b,
            Err(e) => {
                report.setup_errors.push(format!("{variant} on {kind}: {e}"));
                continue;
            }
        };
        for set in sets {
            if let Some(reason) = entry.missing(set.kernel) {
                report.rows.push(Row::skipped(variant, kind, set, cases_in(set), reason));
                continue;
            }
            report.rows.push(run_set_placed(backend.as_mut(), variant, &image, set, cfg.seed, cfg.flush));
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
    run_set_placed(backend, variant, image, set, seed, Placement::End)
}

/// [`run_set`] with the flush cases' inputs placed as `flush` says.
pub fn run_set_placed(
    backend: &mut dyn backend::Backend,
    variant: &'static Variant,
    image: &Image,
    set: &VectorSet,
    seed: u64,
    placement: Placement,
) -> Row {
    let started = Instant::now();
    let kind = backend.kind();
    let entry = &Entry::of(image);
    let abi = Abi::of(variant.arch);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ fxhash(variant.name) ^ fxhash(&set.set));
    let arena = match image.arena() {
        Ok(a) => a,
        Err(e) => return Row::error(variant, kind, set, cases_in(set), e.to_string()),
    };
    let mut row = Row::new(variant, kind, set);
    let mut builder = BatchBuilder::new(abi);
    let mut plans: Vec<CasePlan> = Vec::new();
    for v in &set.vectors {
        for kind in case_kinds(set.kernel, v.index, placement) {
            // Flush when the next case might not fit (message, padding, buffers of a page and a
            // guard page each, table).
            let need = 2 * v.msg_len() as u64 + 128 * 1024;
            if !plans.is_empty() && builder.payload_size() + need > arena.size {
                flush(&mut builder, &mut plans, backend, image, abi, arena, &mut row);
            }
            let seed = rng.gen();
            plans.push(checks::plan_vector(
                &mut builder,
                entry,
                &mut ChaCha8Rng::seed_from_u64(seed),
                &set.set,
                v,
                kind,
            ));
        }
    }
    flush(&mut builder, &mut plans, backend, image, abi, arena, &mut row);
    row.elapsed = started.elapsed();
    row
}

fn flush(
    builder: &mut BatchBuilder,
    plans: &mut Vec<CasePlan>,
    backend: &mut dyn backend::Backend,
    image: &Image,
    abi: &'static Abi,
    arena: crate::image::Arena,
    row: &mut Row,
) {
    if plans.is_empty() {
        return;
    }
    let b = std::mem::replace(builder, BatchBuilder::new(abi));
    let taken: Vec<CasePlan> = std::mem::take(plans);
    let outcome = b
        .layout(arena)
        .map_err(|e| e.to_string())
        .and_then(|batch| backend::run_batch(backend, &batch).map(|run| (batch, run)).map_err(|e| e.to_string()));
    match outcome {
        Ok((batch, run)) => {
            for p in &taken {
                let findings = checks::check(p, &batch, &run, abi, image);
                row.record(p, findings);
            }
        }
        Err(e) => {
            for p in &taken {
                row.failed.push(CaseFailure {
                    name: p.name.clone(),
                    msg_len: p.msg_len,
                    findings: vec![Finding::new(Class::NotRun, format!("backend error: {e}"))],
                });
            }
        }
    }
}

/// A small stable hash for seeding per (variant, set) streams.
fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The status the CLI exits with: 0 all passed, 1 something failed, 2 set-up or input errors.
pub fn exit_code(report: &Report) -> i32 {
    match report.status() {
        Status::Passed => 0,
        Status::Failed => 1,
        Status::SetupError => 2,
    }
}

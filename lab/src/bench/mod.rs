//! `lab bench`: what the kernels cost and how fast the lab runs them, as a library call.
//!
//! * [`counts`]: dynamic instructions per block and per call on Unicorn, or under qemu-user's
//!   exec log where Unicorn cannot run the row ([`counter`]), exact and repeated on a fresh
//!   engine, beside the HotSpot stub figures, with the Zbb saving and an instruction mix
//!   ([`mix`]).
//! * [`mca`]: predicted cycles per block on named CPU models (`llvm-mca-19`) for the
//!   steady-state loop ([`steady`]) of each multi-block stub, held against the VisionFive 2
//!   figures of the HotSpot seeds ([`board`]); [`baseline`] gates regressions against a saved
//!   report and [`plot`] draws the counts and predictions as SVG.
//! * [`native`]: the x86_64 kernels in-process against OpenSSL and RustCrypto;
//!   [`user_native`]: a user's kernel (`--object`, `--manifest`) timed natively through the
//!   native backend against OpenSSL (never the lab's own figures under the user's name).
//! * [`throughput`]: calls/s, bytes/s and the overhead ratio per backend, and the wall time of
//!   a default `lab run`.
//!
//! The result is a [`BenchReport`] ([`report`] prints it as a table or JSON).

pub mod baseline;
pub mod board;
pub mod counter;
pub mod counts;
pub mod gate;
pub mod mca;
pub mod mix;
pub mod native;
pub mod plot;

pub mod report;
pub mod static_loop;
pub mod steady;
pub mod throughput;
pub mod user_native;
pub mod workload;

use std::time::Instant;

use crate::backend::BackendKind;
use crate::image::Image;
use crate::paths;
use crate::pool;
use crate::progress::Progress;
use crate::run::{self, RunConfig};
use crate::toolchain::{self, BuildConfig};
use crate::variant::{Kernel, Variant, VARIANTS};
use crate::vectors;

pub use report::BenchReport;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Variants, in report order.
    pub variants: Vec<&'static Variant>,
    /// Kernels.
    pub kernels: Vec<Kernel>,
    /// Backends for the throughput section (counts are always on Unicorn).
    pub backends: Vec<BackendKind>,
    /// Where kernels come from and where images go.
    pub build: BuildConfig,
    /// Samples per timing (medians are reported).
    pub runs: usize,
    /// Run the native comparison (x86_64 hosts).
    pub native: bool,
    /// Run the throughput section and time a default `lab run` (only when every variant is the
    /// lab's own: that run is of the lab's kernels).
    pub throughput: bool,
    /// Seed for operands.
    pub seed: u64,
    /// Predict cycles per block with llvm-mca-19.
    pub predict: bool,
    /// `-mcpu` models to predict on; empty: [`mca::Mca::default_models`] of each architecture.
    pub cpus: Vec<String>,
    /// Workers for the instruction counts (one job per variant) and the llvm-mca runs (one per
    /// variant × kernel × model); 0: one per CPU ([`crate::pool::default_jobs`]). Counts and
    /// predictions are exact, so the report is the same for any number. The timed sections
    /// (native comparison, throughput) always run alone: a busy sibling core would slow them.
    pub jobs: usize,
}

impl BenchConfig {
    /// Everything: all variants, kernels and backends, the bundled kernels, 5 runs.
    pub fn all() -> BenchConfig {
        BenchConfig {
            variants: VARIANTS.iter().collect(),
            kernels: Kernel::ALL.to_vec(),
            backends: BackendKind::ALL.to_vec(),
            build: toolchain::default_build(),
            runs: 5,
            native: true,
            throughput: true,
            seed: 7,
            predict: true,
            cpus: Vec::new(),
            jobs: 0,
        }
    }
}

fn load(build: &BuildConfig, v: &'static Variant) -> Result<Image, String> {
    let path = toolchain::build_image(build, v).map_err(|e| e.to_string())?;
    Image::load(&path, v.arch).map_err(|e| e.to_string())
}

/// What counting one variant gave: rows, and lines for the report's lists.
#[derive(Default)]
struct VariantCounts {
    counts: Vec<counts::CountRow>,
    statics: Vec<static_loop::StaticCount>,
    skipped: Vec<String>,
    errors: Vec<String>,
    setup_errors: Vec<String>,
}

/// Instruction counts of every selected kernel × input placement of `v`: on Unicorn where it
/// runs the row, else under qemu at each vector length ([`counter`]); a user's call that
/// Unicorn stops in (its vector path) is counted under qemu instead. A row neither can run is
/// listed as not counted, with both reasons.
fn count_variant(cfg: &BenchConfig, v: &'static Variant) -> VariantCounts {
    let mut out = VariantCounts::default();
    let on_unicorn = BackendKind::Unicorn.supports(v);
    if let (Err(uc), Err(qemu)) = (&on_unicorn, BackendKind::Qemu.supports(v)) {
        out.skipped.push(format!("counting on {v}: not counted: Unicorn: {uc}; qemu: {qemu}"));
        count_statically(cfg, v, &mut out);
        return out;
    }
    let image = match load(&cfg.build, v) {
        Ok(i) => i,
        Err(e) => {
            out.setup_errors.push(format!("{v}: {e}"));
            return out;
        }
    };
    let dis = match mix::Disassembly::of(&image) {
        Ok(d) => d,
        Err(e) => {
            out.setup_errors.push(format!("{v}: {e}"));
            return out;
        }
    };
    for &k in &cfg.kernels {
        if let Some(why) = run::not_provided(v, k) {
            out.skipped.push(format!("counting {k} on {v}: {why}"));
            continue;
        }
        for m in counts::MISALIGNS {
            let on_uc = || counter::Counter::unicorn(&image, v);
            let stopped = match on_unicorn.is_ok().then(|| counts::count_with(&image, v, &dis, k, m, cfg.seed, &on_uc))
            {
                Some(Ok(row)) => {
                    out.counts.push(row);
                    continue;
                }
                Some(Err(e)) if !counter::unicorn_stopped(&e) => {
                    out.errors.push(format!("counting {k} on {v} (input +{m}): {e}"));
                    continue;
                }
                Some(Err(e)) => Some(e),
                None => None,
            };
            count_under_qemu(cfg, v, &image, &dis, k, m, stopped, &mut out);
        }
    }
    out
}

/// The steady loops of a row no counter runs, counted from their text ([`static_loop`]).
fn count_statically(cfg: &BenchConfig, v: &'static Variant, out: &mut VariantCounts) {
    let image = match load(&cfg.build, v) {
        Ok(i) => i,
        Err(e) => {
            out.setup_errors.push(format!("{v}: {e}"));
            return;
        }
    };
    for &k in cfg.kernels.iter().filter(|&&k| run::not_provided(v, k).is_none()) {
        match static_loop::find(&image, v, k) {
            Ok((row, _)) => out.statics.push(row),
            Err(e) => out.skipped.push(format!("counting {k} on {v} {}: {e}", static_loop::COUNTER)),
        }
    }
}

/// Counts `k` on `v` under qemu at each vector length; `stopped` is Unicorn's stop, when it
/// tried first (named if qemu cannot count either).
#[allow(clippy::too_many_arguments)]
fn count_under_qemu(
    cfg: &BenchConfig,
    v: &'static Variant,
    image: &Image,
    dis: &mix::Disassembly,
    k: Kernel,
    m: usize,
    stopped: Option<String>,
    out: &mut VariantCounts,
) {
    // qemu cannot run the variant, is missing or refuses the -cpu string: a skip naming why
    // (the Debian package of a missing qemu-user), as for a missing llvm-mca.
    if let Err(why) = counter::Counter::qemu(image, v, counter::vector_lengths(v)[0]) {
        let uc = stopped.map_or_else(|| format!("Unicorn cannot run {v}"), |e| format!("Unicorn: {e}"));
        out.skipped.push(format!("counting {k} on {v} (input +{m}): not counted: {uc}; qemu: {why}"));
        return;
    }
    for vl in counter::vector_lengths(v) {
        let on_qemu = || counter::Counter::qemu(image, v, vl);
        match counts::count_with(image, v, dis, k, m, cfg.seed, &on_qemu) {
            Ok(row) => out.counts.push(row),
            Err(e) => {
                let at = vl.map(|vl| format!(" at {} {}", vl.spec.name, vl.bits)).unwrap_or_default();
                out.errors.push(format!("counting {k} on {v} (input +{m}) under qemu{at}: {e}"));
            }
        }
    }
}

/// Instruction counts of every selected variant × kernel × input placement, one variant per
/// job on [`BenchConfig::jobs`] workers, reported in variant order.
pub fn count_all(cfg: &BenchConfig, report: &mut BenchReport, progress: &mut dyn FnMut(Progress<'_>)) {
    progress(Progress::Start { task: "counting", total: cfg.variants.len() as u64, unit: "variants" });
    let outs = pool::run_ordered(
        &cfg.variants,
        pool::resolve_jobs(cfg.jobs),
        &[],
        |&v, lane| {
            lane.advance(0, &format!("counting {v}"));
            let out = count_variant(cfg, v);
            lane.advance(1, &format!("counted {v}"));
            out
        },
        progress,
    );
    progress(Progress::Finish);
    for (v, out) in cfg.variants.iter().zip(outs) {
        let Some(out) = out else {
            report.errors.push(format!("counting on {v}: the lab panicked (a bug in the lab)"));
            continue;
        };
        report.counts.extend(out.counts);
        report.static_counts.extend(out.statics);
        report.skipped.extend(out.skipped);
        report.errors.extend(out.errors);
        report.setup_errors.extend(out.setup_errors);
    }
    counts::add_zbb_savings(&mut report.counts);
}

/// The models to predict `variant` on: `cfg.cpus` that llvm-mca knows for it, else the defaults.
fn models_for(cfg: &BenchConfig, m: &mca::Mca, variant: &Variant) -> Result<Vec<String>, String> {
    if cfg.cpus.is_empty() {
        return Ok(m.default_models(variant));
    }
    let known = m.known_models(variant.arch)?;
    Ok(cfg.cpus.iter().filter(|c| known.contains(c)).cloned().collect())
}

/// One llvm-mca simulation to run: a loop of `kernel` on `variant` and a model, and for a row
/// with a vector length the reading's label ([`mca::vector_readings`]).
struct McaJob<'a> {
    variant: &'static Variant,
    kernel: Kernel,
    lp: &'a steady::SteadyLoop,
    model: &'a str,
    vector_length: Option<&'a str>,
}

/// The models to predict a loop on, each with its reading's label (`VLEN 256`), if any.
type ModelReadings = Vec<(String, Option<String>)>;

/// A steady-state loop and the models (each with its reading's label) to predict it on.
type LoopToPredict = (&'static Variant, Kernel, steady::SteadyLoop, ModelReadings);

/// The aligned count rows of `v` and `k` to predict, each with its models: the first row on
/// every model, or, for rows counted at several vector lengths, each row on the models read at
/// its length ([`mca::vector_readings`]).
fn rows_to_predict<'a>(
    report: &'a BenchReport,
    v: &Variant,
    k: Kernel,
    models: &[String],
) -> Vec<(&'a counts::CountRow, ModelReadings)> {
    let rows: Vec<&counts::CountRow> =
        report.counts.iter().filter(|r| r.variant == v.name && r.kernel == k.name() && r.misalign == 0).collect();
    let bits = |r: &counts::CountRow| r.vector_length.as_deref()?.rsplit(' ').next()?.parse::<u32>().ok();
    let counted: Vec<(u32, String)> = rows.iter().filter_map(|r| Some((bits(r)?, r.vector_length.clone()?))).collect();
    if counted.is_empty() {
        return rows.first().map(|r| (*r, models.iter().map(|m| (m.clone(), None)).collect())).into_iter().collect();
    }
    rows.into_iter()
        .filter_map(|r| {
            let b = bits(r)?;
            let at: Vec<(String, Option<String>)> = models
                .iter()
                .filter_map(|m| {
                    let reading = mca::vector_readings(v.arch, m, &counted).into_iter().find(|(x, _)| *x == b)?;
                    Some((m.clone(), Some(reading.1)))
                })
                .collect();
            (!at.is_empty()).then_some((r, at))
        })
        .collect()
}

/// The steady-state loops to predict (variant, kernel, loop, models), in report order; errors
/// and the models of each variant go to `report` and `used`.
fn loops_to_predict(
    cfg: &BenchConfig,
    m: &mca::Mca,
    report: &mut BenchReport,
    used: &mut Vec<String>,
) -> Vec<LoopToPredict> {
    let mut loops = Vec::new();
    for &v in &cfg.variants {
        let models = match models_for(cfg, m, v) {
            Ok(x) => x,
            Err(e) => {
                report.setup_errors.push(format!("{v}: {e}"));
                continue;
            }
        };
        used.extend(models.iter().cloned());
        let Ok(image) = load(&cfg.build, v) else { continue }; // count_all has said why
        for &k in &cfg.kernels {
            // a row no counter runs: its loop as counted from the text
            if report.static_counts.iter().any(|r| r.variant == v.name && r.kernel == k.name()) {
                match static_loop::find(&image, v, k) {
                    Ok((_, lp)) => loops.push((v, k, lp, models.iter().map(|m| (m.clone(), None)).collect())),
                    Err(e) => report.errors.push(format!("steady-state loop of {k} on {v}: {e}")),
                }
                continue;
            }
            // no count, no loop to find: count_all has said why
            let mut errors = Vec::new();
            for (row, at) in rows_to_predict(report, v, k, &models) {
                // A kernel with a vector path for long lengths is not linear from 1 block: its
                // steady state is the loop around the 256-block call's most executed code.
                let found = steady::find(&image, k, row.per_block).or_else(|e| match &row.hot_loop {
                    Some(Ok((addr, per))) => steady::find_hot(&image, k, *addr, *per).map_err(|h| format!("{e}; {h}")),
                    Some(Err(h)) => Err(format!("{e}; {h}")),
                    None => Err(e),
                });
                match found {
                    Ok(lp) => loops.push((v, k, lp, at)),
                    Err(e) => errors.push(format!("steady-state loop of {k} on {v}: {e}")),
                }
            }
            errors.dedup();
            // The lab's own kernels keep their loop findable (an error is a regression); a
            // user's loop may hold branches its aligned input skips: not predicted, said why.
            match v.custom {
                Some(_) => report.skipped.extend(errors.into_iter().map(|e| format!("llvm-mca prediction: {e}"))),
                None => report.errors.extend(errors),
            }
        }
    }
    loops
}

/// Predicted cycles per block of every aligned count row's steady-state loop on each model;
/// the llvm-mca runs go to [`BenchConfig::jobs`] workers and come back in report order.
fn predict_all(cfg: &BenchConfig, report: &mut BenchReport, progress: &mut dyn FnMut(Progress<'_>)) {
    let m = match mca::Mca::find() {
        Ok(m) => m,
        Err(why) => {
            report.skipped.push(format!("cycle predictions: {why}"));
            return;
        }
    };
    report.llvm_mca = Some(m.version());
    let mut used = Vec::new();
    let loops = loops_to_predict(cfg, &m, report, &mut used);
    let jobs: Vec<McaJob> = loops
        .iter()
        .flat_map(|(variant, kernel, lp, models)| {
            models.iter().map(move |(model, vl)| McaJob {
                variant,
                kernel: *kernel,
                lp,
                model,
                vector_length: vl.as_deref(),
            })
        })
        .collect();
    progress(Progress::Start { task: "predicting", total: jobs.len() as u64, unit: "llvm-mca runs" });
    let outs = pool::run_ordered(
        &jobs,
        pool::resolve_jobs(cfg.jobs),
        &[],
        |j, lane| {
            lane.advance(0, &format!("{} {} on {}", j.kernel, j.variant, j.model));
            let p = m.predict(j.variant, j.kernel.name(), workload::Workload::block_bytes(j.kernel), j.lp, j.model);
            lane.advance(1, "");
            p
        },
        progress,
    );
    progress(Progress::Finish);
    for (j, out) in jobs.iter().zip(outs) {
        let (v, k, model) = (j.variant, j.kernel, j.model);
        match out.unwrap_or_else(|| Err("the lab panicked (a bug in the lab)".into())) {
            Ok(p) => {
                report.predictions.push(mca::Prediction { vector_length: j.vector_length.map(str::to_string), ..p })
            }
            Err(e) if e.starts_with(mca::NO_MODEL) => {
                let why = format!("cycle predictions on {model}: {} {}", mca::NO_MODEL, mca::LLVM_MCA.program);
                if !report.skipped.contains(&why) {
                    report.skipped.push(why);
                }
            }
            Err(e) => report.errors.push(format!("predicting {k} on {v} for {model}: {e}")),
        }
    }
    for c in cfg.cpus.iter().filter(|c| !used.contains(c)) {
        report.setup_errors.push(format!(
            "--cpu {c}: not a CPU model {} knows for the selected architectures (see `{} -mtriple=riscv64 -mcpu=help`)",
            mca::LLVM_MCA.program,
            mca::LLVM_MCA.program
        ));
    }
    report.board = board::vision_five_2(&report.counts, &report.predictions);
}

/// Raw rates and throughput of every selected variant × backend that can run.
fn throughput_all(cfg: &BenchConfig, report: &mut BenchReport) {
    for &v in &cfg.variants {
        // lab_spin is baseline code, counted on Unicorn in every variant's spin image (the
        // driver's vector entry block is jumped over there); kernel instructions come from
        // Unicorn or qemu (throughput::measure).
        let images = load(&cfg.build, v).and_then(|i| Ok((i, throughput::Spin::new(&cfg.build, v)?)));
        let (image, spin) = match images {
            Ok(x) => x,
            Err(e) => {
                // The count section has usually said it already: say it once.
                let msg = format!("{v}: {e}");
                if !report.setup_errors.contains(&msg) {
                    report.setup_errors.push(msg);
                }
                continue;
            }
        };
        for &kind in &cfg.backends {
            if let Err(why) = kind.supports(v) {
                report.skipped.push(format!("throughput of {v} on {kind}: {why}"));
                continue;
            }
            let kernels: Vec<Kernel> =
                cfg.kernels.iter().copied().filter(|&k| run::not_provided(v, k).is_none()).collect();
            match throughput::variant_on(kind, v, &image, &spin, &kernels, cfg.runs, cfg.seed) {
                Ok((rate, rows)) => {
                    report.raw_rates.push(rate);
                    report.throughput.extend(rows);
                }
                // A user's vector path stops on Unicorn at its first vector instruction: qemu
                // and native time it.
                Err(e) if kind == BackendKind::Unicorn && counter::unicorn_stopped(&e) => {
                    report.skipped.push(format!("throughput of {v} on {kind}: {e}"))
                }
                Err(e) => report.errors.push(format!("throughput of {v} on {kind}: {e}")),
            }
        }
    }
}

/// The `abi-upper-bits` probe ([`crate::int_args::reliance`]) of each user's image and kernel
/// as `lab run` makes it (on the first of the bench's backends that runs the image, Unicorn
/// last), merged across one object's paths ([`crate::upper_bits_report`]): the bench times with
/// clean upper bits and says what a caller leaving garbage there would meet.
fn probe_upper_bits(cfg: &BenchConfig, report: &mut BenchReport) {
    let mut order: Vec<BackendKind> = cfg.backends.iter().copied().filter(|&k| k != BackendKind::Unicorn).collect();
    order.extend(cfg.backends.iter().copied().filter(|&k| k == BackendKind::Unicorn));
    let mut out = Vec::new();
    for &v in cfg.variants.iter().filter(|v| crate::user_kernel::of(v).is_some()) {
        let Ok(image) = load(&cfg.build, v) else { continue }; // count_all has said why
        let Some(kind) = order.iter().copied().find(|k| k.supports(v).is_ok()) else { continue };
        for &k in cfg.kernels.iter().filter(|&&k| run::not_provided(v, k).is_none()) {
            let found = kind
                .open(v, &image, crate::backend::Limits::default())
                .map_err(|e| e.to_string())
                .and_then(|mut b| crate::int_args::reliance(b.as_mut(), &image, k));
            match found {
                Ok(f) => out.extend(f.iter().map(|f| crate::upper_bits_report::warning(v.name, k, kind, f))),
                Err(e) => report.skipped.push(format!("upper-bits probe of {k} on {v} ({kind}): {e}")),
            }
        }
    }
    report.warnings = crate::upper_bits_report::merge_paths(out);
}

/// Wall time of the default `lab run` (every variant, backend, kernel and bundled vector set).
fn time_lab_run(cfg: &BenchConfig, report: &mut BenchReport) {
    let run_cfg = RunConfig {
        variants: VARIANTS.iter().collect(),
        backends: BackendKind::ALL.to_vec(),
        kernels: Kernel::ALL.to_vec(),
        vector_files: vectors::bundled_files(&paths::vectors_dir(), &Kernel::ALL),
        build: cfg.build.clone(),
        seed: cfg.seed,
        limits: Default::default(),
        flush: crate::batch::Placement::End,
        vector_lengths: Vec::new(),
        filter: crate::run::Filter::default(),
        cost_limits: Default::default(),
        jobs: 0,
    };
    let t = Instant::now();
    let r = run::run(&run_cfg);
    let seconds = t.elapsed().as_secs_f64();
    let (passed, failed, skipped) = r.totals();
    report.lab_run = Some(report::LabRunTime { seconds, passed, failed, skipped });
}

/// The native section: the lab's own x86_64 kernels against OpenSSL and RustCrypto unless every
/// selected variant is a user's kernel, and each user's kernel on its own ([`user_native`]);
/// both only for the selected kernels.
fn native_all(cfg: &BenchConfig, report: &mut BenchReport, progress: &mut dyn FnMut(Progress<'_>)) {
    if let Some(why) = native::unavailable() {
        report.skipped.push(format!("native comparison: {why}"));
        return;
    }
    let names: Vec<&str> = cfg.kernels.iter().map(|k| k.name()).collect();
    let users: Vec<&'static Variant> = cfg.variants.iter().copied().filter(|v| v.custom.is_some()).collect();
    progress(Progress::Start { task: "native timing", total: 0, unit: "" });
    if users.len() < cfg.variants.len() {
        match native::bench(cfg.runs) {
            Ok(mut n) => {
                n.rows.retain(|r| names.contains(&r.kernel.as_str()));
                n.ratios.retain(|r| names.contains(&r.kernel));
                report.native = Some(n);
            }
            Err(e) => report.errors.push(format!("native comparison: {e}")),
        }
    }
    if !users.is_empty() {
        let openssl = match &report.native {
            Some(n) => Ok(n.rows.clone()),
            None => native::openssl_figures(cfg.runs),
        };
        let openssl = openssl.unwrap_or_else(|e| {
            report.errors.push(format!("native comparison: OpenSSL: {e}"));
            Vec::new()
        });
        for v in users {
            let timed = load(&cfg.build, v).and_then(|image| {
                let kernels: Vec<Kernel> =
                    cfg.kernels.iter().copied().filter(|&k| run::not_provided(v, k).is_none()).collect();
                user_native::measure(v, &image, &kernels, &openssl, cfg.runs, cfg.seed)
            });
            match timed {
                Ok(rows) => report.user_native.extend(rows),
                Err(e) => report.skipped.push(format!("native figures of {v}: {e}")),
            }
        }
    }
    progress(Progress::Finish);
}

/// Runs every section `cfg` asks for. Never panics on set-up problems: they land in the report.
pub fn bench(cfg: &BenchConfig) -> BenchReport {
    bench_with_progress(cfg, &mut crate::progress::ignore)
}

/// [`bench()`], reporting progress: the counting and predicting tasks with their workers, and
/// a task without a total for each timed section.
pub fn bench_with_progress(cfg: &BenchConfig, progress: &mut dyn FnMut(Progress<'_>)) -> BenchReport {
    let started = Instant::now();
    let mut report = BenchReport { runs: cfg.runs, ..BenchReport::default() };
    let load_at_start = report::load_average();
    count_all(cfg, &mut report, progress);
    probe_upper_bits(cfg, &mut report);
    if cfg.predict {
        predict_all(cfg, &mut report, progress);
    }
    if cfg.native {
        native_all(cfg, &mut report, progress);
    }
    if cfg.throughput {
        progress(Progress::Start { task: "throughput", total: 0, unit: "" });
        throughput_all(cfg, &mut report);
        progress(Progress::Finish);
        // The default `lab run` is the lab's own kernels: no figure of a user's bench.
        if cfg.variants.iter().all(|v| v.custom.is_none()) {
            time_lab_run(cfg, &mut report);
        }
    }
    report.elapsed_seconds = started.elapsed().as_secs_f64();
    report.load_average = (load_at_start, report::load_average());
    report
}

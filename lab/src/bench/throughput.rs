//! The lab's own throughput per variant × backend: kernel calls per second and bytes per second
//! for MD5 single-block calls, MD5 16 KiB calls and Poly1305 1 KiB calls, through the whole lab
//! path (calls added to a batch, layout, the backend run, every call record decoded), and the
//! overhead ratio = wall time ÷ (kernel instructions ÷ the backend's raw instruction rate).
//!
//! The raw rate comes from `lab_spin` (`lab/guest/<arch>/spin.S`, a loop of 256 straight-line ALU
//! instructions) run through the same driver on the same backend in the same run; its
//! instruction count per call is counted on Unicorn. Kernel instructions per call come from a
//! profile of the same workload ([`super::counter::CallCounts`]: Unicorn, or qemu's exec log where
//! Unicorn cannot run it), so every backend is charged the same count.
//!
//! Register-only ALU code is the cheapest thing an emulator runs (TCG keeps the guest registers
//! in host registers within a block), so kernel code with loads, stores and rotates runs at a
//! lower rate even with no lab around it. A second ratio isolates the lab's own cost: wall time
//! ÷ (instructions ÷ the rate of the same kernel in long calls of 64 KiB, its "kernel loop").

use std::time::{Duration, Instant};

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

use super::counter::CallCounts;
use super::workload::Workload;
use crate::abi::Abi;
use crate::backend::{run_batch, Backend, BackendKind, Limits, UnicornBackend};
use crate::batch::{Arg, BatchBuilder};
use crate::cases::plan::Stubs;
use crate::cases::verdict::{self, describe_fault};
use crate::image::Image;
use crate::toolchain::{self, BuildConfig};
use crate::variant::{Arch, Kernel, Variant};

/// A backend's raw instruction rate on the straight-line loop.
#[derive(Debug, Clone, Serialize)]
pub struct RawRate {
    /// Variant name.
    pub variant: &'static str,
    /// Backend name.
    pub backend: &'static str,
    /// Guest instructions of the timed `lab_spin` call (counted on Unicorn).
    pub instructions: u64,
    /// Median wall time of that call (one batch of one call), seconds.
    pub seconds: f64,
    /// instructions / seconds.
    pub instructions_per_s: f64,
}

/// Throughput of one workload on one variant × backend.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputRow {
    /// Variant name.
    pub variant: &'static str,
    /// Backend name.
    pub backend: &'static str,
    /// `md5 1 block`, `md5 16 KiB`, `poly1305 1 KiB`.
    pub workload: &'static str,
    /// The stub called.
    pub stub: &'static str,
    /// Input bytes per call.
    pub bytes_per_call: u64,
    /// Calls per batch (chosen so a batch takes about 0.1 s).
    pub calls_per_batch: usize,
    /// Median kernel calls per second.
    pub calls_per_s: f64,
    /// Median input bytes per second.
    pub bytes_per_s: f64,
    /// Kernel instructions per call; `None` when neither counter could count it.
    pub instructions_per_call: Option<u64>,
    /// Which counter counted ([`super::counter::UNICORN`], [`super::counter::QEMU`]), or
    /// `not counted: <reason>`.
    pub counted: String,
    /// Wall time per call ÷ (instructions per call ÷ raw rate); 1.0 = no cost beyond the loop rate.
    pub overhead_ratio: Option<f64>,
    /// The same kernel's rate in long calls over 64 KiB on this backend, instructions/s (when
    /// that call was counted).
    pub kernel_loop_instructions_per_s: Option<f64>,
    /// Wall time per call ÷ (instructions per call ÷ kernel-loop rate): the lab's own cost.
    pub overhead_vs_kernel_loop: Option<f64>,
}

/// The three workloads of the issue: (name, call).
pub fn workloads() -> [(&'static str, Workload); 3] {
    [
        ("md5 1 block", Workload::md5_single(0)),
        ("md5 16 KiB", Workload::md5(256, 0)),
        ("poly1305 1 KiB", Workload::poly1305(64, 0)),
    ]
}

/// Wall time one batch should take when timing.
const TARGET: Duration = Duration::from_millis(100);

/// The spin source of `arch`.
fn spin_source(arch: Arch) -> &'static str {
    arch.spec().spin_source
}

/// Builds the spin image of `variant`: the lab's driver plus `spin.S`, cached under
/// `<cache>/bench`.
///
/// # Errors
/// Build failures (with the tool's message).
pub fn spin_image(build: &BuildConfig, variant: &'static Variant) -> Result<Image, String> {
    let src = tempfile::tempdir().map_err(|e| e.to_string())?;
    let arch_dir = src.path().join(variant.arch.name());
    std::fs::create_dir_all(&arch_dir).map_err(|e| e.to_string())?;
    std::fs::write(arch_dir.join("spin.S"), spin_source(variant.arch)).map_err(|e| e.to_string())?;
    let cfg = BuildConfig { kernels_dir: src.path().to_path_buf(), cache_dir: build.cache_dir.join("bench") };
    // The lab's spin code, also for a user's variant (whose own image holds only its objects).
    let path = toolchain::build_lab_image(&cfg, variant).map_err(|e| e.to_string())?;
    Image::load(&path, variant.arch).map_err(|e| e.to_string())
}

/// Runs one `lab_spin(n)` call; returns the wall time of the batch.
fn spin_once(backend: &mut dyn Backend, image: &Image, n: u64) -> Result<Duration, String> {
    let spin = image.require("lab_spin").map_err(|e| e.to_string())?;
    let mut b = BatchBuilder::new(Abi::of(image.arch));
    b.page_bounds_only();
    b.call(spin.addr, [Arg::Imm(n), Arg::Imm(0), Arg::Imm(0), Arg::Imm(0)], 1);
    let batch = b.layout(image.arena().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let run = run_batch(backend, &batch).map_err(|e| e.to_string())?;
    let elapsed = t.elapsed();
    match run.faults.first() {
        Some(f) => Err(describe_fault("lab_spin", f, image, &batch).text),
        None => Ok(elapsed),
    }
}

/// The spin image of a variant and the instructions of `lab_spin(n)` = fixed + n × per_iteration.
#[derive(Debug, Clone)]
pub struct Spin {
    /// driver.S + spin.S, built for the variant.
    pub image: Image,
    /// Instructions outside the loop.
    pub fixed: u64,
    /// Instructions per loop iteration (256 ALU + loop control).
    pub per_iteration: u64,
}

impl Spin {
    /// Builds the spin image of `variant` and counts `lab_spin` on Unicorn.
    ///
    /// # Errors
    /// Build failures, engine set-up or a fault.
    pub fn new(build: &BuildConfig, variant: &'static Variant) -> Result<Spin, String> {
        let image = spin_image(build, variant)?;
        let (fixed, per_iteration) = spin_instructions(&image, variant)?;
        Ok(Spin { image, fixed, per_iteration })
    }
}

/// Instructions of `lab_spin(n)` as (fixed, per iteration), counted on Unicorn at n = 1 and 2.
/// `lab_spin` is baseline code in every variant's spin image; the driver's vector entry state
/// of a vector variant (`image` built for `variant`) is jumped over, as in every Unicorn run.
///
/// # Errors
/// Engine set-up or a fault.
pub fn spin_instructions(image: &Image, variant: &Variant) -> Result<(u64, u64), String> {
    let spin = image.require("lab_spin").map_err(|e| e.to_string())?;
    let mut uc = UnicornBackend::new(image, Limits::default()).map_err(|e| e.to_string())?;
    uc.stop_at_unsupported(image, variant.extensions).map_err(|e| e.to_string())?;
    let mut count = |n| -> Result<u64, String> {
        uc.start_profile(spin.addr, spin.addr + spin.size).map_err(|e| e.to_string())?;
        let r = spin_once(&mut uc, image, n);
        let p = uc.take_profile().ok_or("the profile vanished")?;
        r.map(|_| p.instructions())
    };
    let (c1, c2) = (count(1)?, count(2)?);
    Ok((c1 - (c2 - c1), c2 - c1))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Measures the raw rate of `backend` with `lab_spin`: calibrated to about `TARGET` per call,
/// median of `runs`.
///
/// # Errors
/// A fault or backend failure.
pub fn raw_rate(
    backend: &mut dyn Backend,
    variant: &'static Variant,
    spin: &Spin,
    runs: usize,
) -> Result<RawRate, String> {
    let image = &spin.image;
    let n0 = 1u64 << 14;
    let t0 = spin_once(backend, image, n0)?.as_secs_f64().max(1e-6);
    let n = ((n0 as f64 * TARGET.as_secs_f64() / t0) as u64).clamp(n0, 1 << 32);
    let seconds =
        median((0..runs).map(|_| spin_once(backend, image, n).map(|d| d.as_secs_f64())).collect::<Result<_, _>>()?);
    let instructions = spin.fixed + n * spin.per_iteration;
    Ok(RawRate {
        variant: variant.name,
        backend: backend.kind().name(),
        instructions,
        seconds,
        instructions_per_s: instructions as f64 / seconds,
    })
}

/// Seconds per call of workload `w` on `backend`: batches calibrated to about `TARGET`
/// each, median of `runs`; with the calls per batch.
///
/// # Errors
/// A fault or backend failure.
pub fn time_calls(
    backend: &mut dyn Backend,
    image: &Image,
    w: &Workload,
    runs: usize,
    rng: &mut impl RngExt,
) -> Result<(usize, f64), String> {
    let k0 = 16;
    let t0 = round(backend, image, w, k0, rng)?.as_secs_f64().max(1e-6);
    let k = ((k0 as f64 * TARGET.as_secs_f64() / t0) as usize).clamp(k0, MAX_CALLS);
    let per_call: Vec<f64> = (0..runs.max(1))
        .map(|_| round(backend, image, w, k, rng).map(|d| d.as_secs_f64() / k as f64))
        .collect::<Result<_, _>>()?;
    Ok((k, median(per_call)))
}

/// One timed batch of `k` calls of `w`: calls added, layout, run, records decoded.
fn round(
    backend: &mut dyn Backend,
    image: &Image,
    w: &Workload,
    k: usize,
    rng: &mut impl RngExt,
) -> Result<Duration, String> {
    let e = Stubs::of(image);
    let mut b = BatchBuilder::new(Abi::of(image.arch));
    b.page_bounds_only();
    // Random input and the reference's answer: not the lab's work, so before the clock.
    let plan = w.plan(&mut b, &e, rng);
    let first = timed_call(&b, &e);
    let seed: u64 = rng.random();
    let t = Instant::now();
    for i in 1..k {
        b.repeat(first, seed ^ i as u64);
    }
    let batch = b.layout(image.arena().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let run = run_batch(backend, &batch).map_err(|e| e.to_string())?;
    if let Some(f) = run.faults.first() {
        return Err(describe_fault(&w.label_on(image), f, image, &batch).text);
    }
    let completed = (0..k).filter(|&i| batch.record(&run.resp, i).completed).count();
    let elapsed = t.elapsed();
    if completed != k {
        return Err(format!("{}: {completed} of {k} calls completed", w.label_on(image)));
    }
    // Every repeat starts from the same snapshot, so the last leaves the planned call's answer.
    if let Some(f) = verdict::check(&plan, &batch, &run, Abi::of(image.arch), image).first() {
        return Err(f.text.clone());
    }
    Ok(elapsed)
}

/// The call of a planned case that `round` repeats: the block function's. An OpenSSL-family
/// image whose init the lab calls plans `init`, `blocks` and an `emit` that judges h; repeating
/// the last call would time `emit` and divide by the message bytes (an IFMA path at 93 GB/s).
fn timed_call(b: &BatchBuilder, e: &Stubs) -> usize {
    let last = b.ncalls().saturating_sub(1);
    let Some(blocks) = e.poly1305_path.as_ref().map(|p| p.blocks) else { return last };
    (0..b.ncalls()).rev().find(|&i| b.call_target(i) == Some(blocks)).unwrap_or(last)
}

/// Median wall time of one batch of `k` calls of `w`.
fn time_batch(
    backend: &mut dyn Backend,
    image: &Image,
    w: &Workload,
    k: usize,
    runs: usize,
    rng: &mut impl RngExt,
) -> Result<f64, String> {
    let times: Vec<f64> =
        (0..runs).map(|_| round(backend, image, w, k, rng).map(|d| d.as_secs_f64())).collect::<Result<_, _>>()?;
    Ok(median(times))
}

/// Rate of `kernel` in long calls over [`KERNEL_LOOP_BYTES`] (instructions/s): a batch of
/// [`KERNEL_LOOP_CALLS`] such calls on one input, so the input transfer and the round trip are
/// a few percent of the time (which makes the rate slightly low and the overhead ratio slightly
/// favourable). The count is that call's own ([`CallCounts`]); `None` when it was not counted.
fn kernel_loop_rate(
    backend: &mut dyn Backend,
    counts: &mut CallCounts<'_>,
    image: &Image,
    kernel: Kernel,
    runs: usize,
    rng: &mut impl RngExt,
) -> Result<Option<f64>, String> {
    let w = Workload::of(kernel, KERNEL_LOOP_BYTES / Workload::block_bytes(kernel), 0);
    let Ok((instructions, _)) = counts.instructions(&w, rng) else { return Ok(None) };
    let t = time_batch(backend, image, &w, KERNEL_LOOP_CALLS, runs, rng)?;
    Ok(Some((KERNEL_LOOP_CALLS as u64 * instructions) as f64 / t))
}

/// Input of the kernel-loop call.
const KERNEL_LOOP_BYTES: u64 = 64 << 10;
/// Calls per kernel-loop batch.
const KERNEL_LOOP_CALLS: usize = 16;

/// Most calls one batch may hold (the call table must fit the 32 MiB arena).
const MAX_CALLS: usize = 40_000;

/// Throughput of each of `workloads` (name, call) on one opened backend. Timing never waits
/// on a count: a call no counter can count ([`CallCounts`]) is timed all the same, its
/// instruction columns `None` and [`ThroughputRow::counted`] saying why.
///
/// # Errors
/// The first fault or backend failure of a timed batch.
pub fn measure(
    backend: &mut dyn Backend,
    variant: &'static Variant,
    image: &Image,
    workloads: &[(&'static str, Workload)],
    rate: Option<&RawRate>,
    runs: usize,
    seed: u64,
) -> Result<Vec<ThroughputRow>, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut rows = Vec::new();
    let mut counts = CallCounts::new(image, variant);
    let mut loop_rates: Vec<(Kernel, Option<f64>)> = Vec::new();
    for (name, w) in workloads {
        let (instructions, counted) = match counts.instructions(w, &mut rng) {
            Ok((n, counter)) => (Some(n), counter.to_string()),
            Err(why) => (None, format!("not counted: {why}")),
        };
        let loop_rate = match loop_rates.iter().find(|(k, _)| *k == w.kernel) {
            Some(&(_, r)) => r,
            None => {
                let r = kernel_loop_rate(backend, &mut counts, image, w.kernel, runs, &mut rng)?;
                loop_rates.push((w.kernel, r));
                r
            }
        };
        let (k, per_call) = time_calls(backend, image, w, runs, &mut rng)?;
        let over = |rate: f64| instructions.map(|n| per_call / (n as f64 / rate));
        rows.push(ThroughputRow {
            variant: variant.name,
            backend: backend.kind().name(),
            workload: name,
            stub: w.stub_of(image),
            bytes_per_call: w.bytes(),
            calls_per_batch: k,
            calls_per_s: 1.0 / per_call,
            bytes_per_s: w.bytes() as f64 / per_call,
            instructions_per_call: instructions,
            counted,
            overhead_ratio: rate.and_then(|r| over(r.instructions_per_s)),
            kernel_loop_instructions_per_s: loop_rate,
            overhead_vs_kernel_loop: loop_rate.and_then(over),
        });
    }
    Ok(rows)
}

/// Raw rate and throughput of `variant` on `kind`: opens the backend for the kernel image and
/// for the spin image.
///
/// # Errors
/// Set-up failures, faults.
pub fn variant_on(
    kind: BackendKind,
    variant: &'static Variant,
    image: &Image,
    spin: &Spin,
    kernels: &[Kernel],
    runs: usize,
    seed: u64,
) -> Result<(RawRate, Vec<ThroughputRow>), String> {
    // Unicorn implements a wall-clock budget with a timer thread that wakes every 2 us for the
    // whole emu_start (unicorn 2.1.5 uc.c, `_timeout_fn`): on 2 cores that thread alone halved
    // the measured rates. The kernels timed here have just run to completion under the default
    // budget (the Unicorn profiles), so the timed Unicorn engines run without one.
    let limits = match kind {
        BackendKind::Unicorn => Limits { batch_time: Duration::ZERO, call_instructions: u64::MAX, ..Limits::default() },
        _ => Limits::default(),
    };
    let mut spin_backend = kind.open(variant, &spin.image, limits).map_err(|e| e.to_string())?;
    let rate = raw_rate(spin_backend.as_mut(), variant, spin, runs)?;
    drop(spin_backend);
    let mut backend = kind.open(variant, image, limits).map_err(|e| e.to_string())?;
    let workloads: Vec<_> = workloads().into_iter().filter(|(_, w)| kernels.contains(&w.kernel)).collect();
    let rows = measure(backend.as_mut(), variant, image, &workloads, Some(&rate), runs, seed)?;
    Ok((rate, rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::dispatch::PolyPath;

    fn path(init: u64, blocks: u64, emit: u64) -> PolyPath {
        PolyPath {
            init,
            blocks,
            emit,
            via_func: true,
            blocks_name: "poly1305_blocks_vpmadd52".into(),
            emit_name: "poly1305_emit_base2_44".into(),
            probe_error: None,
            scalar_form: false,
            init_call: "poly1305_init(ctx, key, func)".into(),
            init_tail: None,
            glue: None,
        }
    }

    #[test]
    fn the_timed_call_is_the_block_function_not_the_emit_after_it() {
        let mut b = BatchBuilder::new(Abi::of(Arch::X86_64));
        let args = [Arg::Imm(0), Arg::Imm(0), Arg::Imm(0), Arg::Imm(0)];
        for func in [0x1000, 0x2000, 0x3000] {
            b.call(func, args, 0);
        }
        let e = Stubs { poly1305_path: Some(path(0x1000, 0x2000, 0x3000)), ..Stubs::default() };
        assert_eq!(timed_call(&b, &e), 1);
        // Without a path (HotSpot's stubs, the scalar-layout contract) the case's last call.
        assert_eq!(timed_call(&b, &Stubs::default()), 2);
    }
}

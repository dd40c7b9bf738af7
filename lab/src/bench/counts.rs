//! Dynamic instruction counts per variant × kernel, measured on Unicorn or, where Unicorn cannot
//! run the call, under qemu-user ([`super::counter`]): one call at 1, 16 and 256 blocks, each
//! profiling the kernel's code range only (the driver's instructions are not counted). Per-block cost = (count(256) − count(1)) / 255, per-call fixed
//! cost = count(1) − per-block cost, and count(16) must lie on the same line. Every profiled
//! call is checked against the reference first: a wrong kernel gets no count.

use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;
use serde::Serialize;

use super::counter::Counter;
use super::mix::{Disassembly, Mix};
use super::workload::Workload;
use crate::contract::Family;
use crate::image::Image;
use crate::variant::{Kernel, Variant};

/// Blocks per call at which every kernel is counted.
pub const BLOCKS: [u64; 3] = [1, 16, 256];

/// Input placements counted: 0 (64-byte aligned) and 1 byte past it.
pub const MISALIGNS: [usize; 2] = [0, 1];

/// HotSpot stub figures, instructions per block, from docs/DESIGN.md "Reference figures" (counted by
/// reading the OpenJDK stubs, not measured). The riscv64 Poly1305 stub uses no Zbb, so the
/// Zbb variant is compared with the same figure.
pub fn hotspot_figure(variant: &Variant, kernel: Kernel) -> Option<f64> {
    Some(match (variant.name, kernel) {
        ("riscv64", Kernel::Md5) => 835.0,
        ("riscv64+zbb", Kernel::Md5) => 660.0,
        ("aarch64", Kernel::Md5) => 690.0,
        ("x86_64", Kernel::Md5) => 606.0,
        ("riscv64" | "riscv64+zbb", Kernel::Poly1305) => 60.0,
        ("aarch64", Kernel::Poly1305) => 40.0,
        ("x86_64", Kernel::Poly1305) => 41.0,
        _ => return None,
    })
}

/// Counts of one variant × kernel × input placement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CountRow {
    /// Variant name.
    pub variant: &'static str,
    /// Kernel name.
    pub kernel: &'static str,
    /// The contract family the image runs the kernel through (`hotspot`, `openssl`).
    pub family: &'static str,
    /// Bytes past a 64-byte boundary where the input starts.
    pub misalign: usize,
    /// Which engine counted ([`super::counter::UNICORN`], [`super::counter::QEMU`]).
    pub counter: &'static str,
    /// The vector length the calls ran at (`VLEN 256`, `SVE VL 128`) on a vector row counted
    /// under qemu; `None` elsewhere.
    pub vector_length: Option<String>,
    /// The stub (contract symbol) counted at 1, 16 and 256 blocks.
    pub stub: &'static str,
    /// `(blocks, kernel instructions for one call)` at each of [`BLOCKS`].
    pub per_call: Vec<(u64, u64)>,
    /// Instructions per block: (count(256) − count(1)) / 255.
    pub per_block: f64,
    /// Per-call fixed cost: count(1) − per_block (entry, exit, set-up outside the block loop).
    pub fixed: f64,
    /// Whether count(16) = fixed + 16 × per_block exactly (the cost is linear in blocks).
    pub linear: bool,
    /// MD5: instructions of one single-block call (`md5_implCompress`, or
    /// `md5_block_data_order` with num = 1).
    pub single_block_call: Option<u64>,
    /// HotSpot stub figure per block (docs/DESIGN.md), when there is one (HotSpot-family rows
    /// only: the figures count HotSpot's stubs).
    pub hotspot: Option<f64>,
    /// per_block / hotspot.
    pub hotspot_ratio: Option<f64>,
    /// On riscv64+zbb rows: instructions per block saved against riscv64, in percent.
    pub zbb_saving_pct: Option<f64>,
    /// Instruction mix per block: mix(256) − mix(1), divided by 255.
    pub mix_per_block: Mix,
    /// Whether a second measurement on a fresh engine gave identical counts.
    pub repeatable: bool,
    /// The most executed block of the 256-block call, (address, executions): it lies in the
    /// loop a long call spends its time in, also when the cost is not linear from 1 block.
    #[serde(skip)]
    pub hot_block: Option<(u64, u64)>,
    /// A kernel not linear from 1 block because long calls take another path (a vector loop):
    /// that loop's instructions per block ([`super::steady::find_hot`]), else `None`.
    pub steady_per_block: Option<f64>,
}

impl CountRow {
    /// Whether the counts are explained: linear in blocks, or a second path for long calls
    /// whose loop was found.
    pub fn explained(&self) -> bool {
        self.linear || self.steady_per_block.is_some()
    }
}

/// The raw measurements of one row, compared across repeated runs.
#[derive(Debug, Clone, PartialEq)]
struct Raw {
    per_call: Vec<(u64, u64)>,
    single: Option<u64>,
    mixes: Vec<Mix>,
    /// The most executed block of the 256-block call: (address, executions).
    hot: Option<(u64, u64)>,
}

fn measure(
    image: &Image,
    dis: &Disassembly,
    kernel: Kernel,
    misalign: usize,
    seed: u64,
    counter: &dyn Fn() -> Result<Counter, String>,
) -> Result<Raw, String> {
    // A fresh engine per measurement, so a repeat shares no translation cache with the first.
    // On Unicorn a call that reaches code it cannot execute stops there: no count
    // (bench/mod.rs then counts under qemu).
    let mut c = counter()?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut raw = Raw { per_call: Vec::new(), single: None, mixes: Vec::new(), hot: None };
    for n in BLOCKS {
        let p = c.profile(image, &Workload::of(kernel, n, misalign), &mut rng)?;
        raw.per_call.push((n, p.instructions()));
        raw.mixes.push(dis.mix(&p)?);
        raw.hot = p.blocks().into_iter().max_by_key(|&(a, _, k)| (k, std::cmp::Reverse(a))).map(|(a, _, k)| (a, k));
    }
    if kernel == Kernel::Md5 {
        raw.single = Some(c.profile(image, &Workload::md5_single(misalign), &mut rng)?.instructions());
    }
    Ok(raw)
}

/// Counts `kernel` on `variant` with the input `misalign` bytes off, twice on fresh Unicorn
/// engines ([`count_with`] [`Counter::unicorn`]).
///
/// # Errors
/// Set-up failures and any fault or wrong result of a profiled call (a stop before an
/// instruction Unicorn cannot execute among them).
pub fn count(
    image: &Image,
    variant: &'static Variant,
    dis: &Disassembly,
    kernel: Kernel,
    misalign: usize,
    seed: u64,
) -> Result<CountRow, String> {
    count_with(image, variant, dis, kernel, misalign, seed, &|| Counter::unicorn(image, variant))
}

/// Counts `kernel` on `variant` with the input `misalign` bytes off, twice on fresh engines
/// that `counter` sets up (all of one kind: [`Counter::unicorn`] or [`Counter::qemu`]).
///
/// # Errors
/// Set-up failures and any fault or wrong result of a profiled call.
pub fn count_with(
    image: &Image,
    variant: &'static Variant,
    dis: &Disassembly,
    kernel: Kernel,
    misalign: usize,
    seed: u64,
    counter: &dyn Fn() -> Result<Counter, String>,
) -> Result<CountRow, String> {
    let probe = counter()?;
    let (name, vector_length) = (probe.name(), probe.vector_length());
    drop(probe);
    let first = measure(image, dis, kernel, misalign, seed, counter)?;
    // Other operands on the repeat: the kernels have no data-dependent paths, so the counts
    // must not move.
    let second = measure(image, dis, kernel, misalign, seed.wrapping_add(1), counter)?;
    let ((_, c1), (_, c16), (_, c256)) = (first.per_call[0], first.per_call[1], first.per_call[2]);
    let span = (BLOCKS[2] - BLOCKS[0]) as f64;
    let per_block = (c256 as f64 - c1 as f64) / span;
    let fixed = c1 as f64 - per_block;
    let w = Workload::of(kernel, 1, misalign);
    let family = w.family_in(image);
    let hotspot = hotspot_figure(variant, kernel).filter(|_| family == Family::HotSpot);
    let linear = (fixed + BLOCKS[1] as f64 * per_block - c16 as f64).abs() < 1e-9;
    let steady_per_block = match first.hot {
        Some((addr, runs)) if !linear => super::steady::find_hot(image, kernel, addr, runs)
            .ok()
            .map(|lp| lp.insns.len() as f64 / f64::from(lp.blocks_per_iteration)),
        _ => None,
    };
    Ok(CountRow {
        variant: variant.name,
        kernel: kernel.name(),
        family: family.name(),
        misalign,
        counter: name,
        vector_length: vector_length.map(|vl| format!("{} {}", vl.spec.name, vl.bits)),
        stub: w.stub_in(family),
        per_call: first.per_call.clone(),
        per_block,
        fixed,
        linear,
        single_block_call: first.single,
        hotspot,
        hotspot_ratio: hotspot.map(|h| per_block / h),
        zbb_saving_pct: None,
        mix_per_block: first.mixes[2].per(&first.mixes[0], span),
        repeatable: first == second,
        hot_block: first.hot,
        steady_per_block,
    })
}

/// Fills in the Zbb saving of each riscv64+zbb row from the riscv64 row of the same kernel,
/// contract family and input placement.
pub fn add_zbb_savings(rows: &mut [CountRow]) {
    let base: Vec<(&'static str, &'static str, usize, f64)> =
        rows.iter().filter(|r| r.variant == "riscv64").map(|r| (r.kernel, r.family, r.misalign, r.per_block)).collect();
    for r in rows.iter_mut().filter(|r| r.variant == "riscv64+zbb") {
        if let Some(&(.., b)) = base.iter().find(|(k, f, m, _)| *k == r.kernel && *f == r.family && *m == r.misalign) {
            r.zbb_saving_pct = Some((1.0 - r.per_block / b) * 100.0);
        }
    }
}

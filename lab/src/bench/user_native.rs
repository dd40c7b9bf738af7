//! Native speed of a user's kernel (`lab bench --object`, `--manifest`): the kernel cannot be
//! linked into this binary as the lab's own x86_64 kernels are ([`super::native`]), so it is
//! timed where the host runs it, through the native backend: the lab's driver calls the
//! kernel in a guest process on this CPU, in batches of one call of each kernel at each of
//! [`super::native::SIZES`] (64 B, 1 KiB, 16 KiB), median of `runs` timings of whole batches. The
//! figure is OpenSSL's beside it at the same message size ([`super::native`]'s OpenSSL rows:
//! whole digests and tags through EVP, its default path): the user's figure counts the block
//! function and the driver's per-call work (fresh callee-saved values, the input copy), so it is
//! a lower bound on the kernel's own speed. Only the selected kernels are timed.
//!
//! The timing never depends on an instruction count: each call's kernel instructions come
//! from [`super::counter::CallCounts`] (Unicorn, or qemu's exec log when Unicorn stops at an AVX
//! instruction), and a call neither can count (AVX-512: qemu 7.2 has none) is timed all the
//! same and reported as `not counted: <reason>`.

use serde::Serialize;

use super::native::{NativeRow, SIZES};
use super::throughput;
use super::workload::Workload;
use crate::backend::{BackendKind, Limits};
use crate::image::Image;
use crate::variant::{Kernel, Variant};

/// One workload of a user's kernel, timed natively.
#[derive(Debug, Clone, Serialize)]
pub struct UserNativeRow {
    /// The user's variant (its name in reports: the object's stem or the manifest entry).
    pub variant: &'static str,
    /// `md5` or `poly1305`.
    pub kernel: &'static str,
    /// The workload (`md5 16 KiB`).
    pub workload: &'static str,
    /// The contract symbol called (the user's function behind it).
    pub symbol: &'static str,
    /// Message bytes per call.
    pub bytes: u64,
    /// Median nanoseconds per message byte through the native backend.
    pub ns_per_byte: f64,
    /// Median throughput through the native backend, MB/s (10^6 bytes).
    pub mb_per_s: f64,
    /// Kernel instructions of one call, when a counter counted it.
    pub instructions_per_call: Option<u64>,
    /// Which counter counted (`counted on Unicorn`, `counted under qemu (exec log)`), or
    /// `not counted: <reason>`.
    pub counted: String,
    /// OpenSSL's throughput at the same size (default path), MB/s, when it was timed.
    pub openssl_mb_per_s: Option<f64>,
    /// `mb_per_s` over `openssl_mb_per_s` (> 1: the user's kernel is faster).
    pub vs_openssl: Option<f64>,
}

/// Times `variant`'s `kernels` natively ([`BackendKind::Native`]) on `image`, beside OpenSSL's
/// rows `openssl` (implementation `openssl`) at the same sizes.
///
/// # Errors
/// The host cannot run the variant natively (another architecture, a declared extension the
/// CPU lacks: the reason), the backend cannot start, or a call faults.
pub fn measure(
    variant: &'static Variant,
    image: &Image,
    kernels: &[Kernel],
    openssl: &[NativeRow],
    runs: usize,
    seed: u64,
) -> Result<Vec<UserNativeRow>, String> {
    BackendKind::Native.supports(variant)?;
    let mut backend = BackendKind::Native.open(variant, image, Limits::default()).map_err(|e| e.to_string())?;
    let rows = throughput::measure(backend.as_mut(), variant, image, &workloads(kernels), None, runs, seed)?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let kernel = if r.workload.starts_with("md5") { Kernel::Md5 } else { Kernel::Poly1305 };
            let mb_per_s = r.bytes_per_s / 1e6;
            let theirs = openssl
                .iter()
                .find(|o| {
                    o.implementation == "openssl" && o.kernel == kernel.name() && o.bytes as u64 == r.bytes_per_call
                })
                .map(|o| o.mb_per_s);
            UserNativeRow {
                variant: r.variant,
                kernel: kernel.name(),
                workload: r.workload,
                symbol: r.stub,
                bytes: r.bytes_per_call,
                ns_per_byte: 1e9 / r.bytes_per_s,
                mb_per_s,
                instructions_per_call: r.instructions_per_call,
                counted: r.counted,
                openssl_mb_per_s: theirs,
                vs_openssl: theirs.filter(|t| *t > 0.0).map(|t| mb_per_s / t),
            }
        })
        .collect())
}

/// Workload names, one per kernel and size of [`SIZES`].
const NAMES: [(Kernel, usize, &str); 6] = [
    (Kernel::Md5, 64, "md5 64 B"),
    (Kernel::Md5, 1024, "md5 1 KiB"),
    (Kernel::Md5, 16384, "md5 16 KiB"),
    (Kernel::Poly1305, 64, "poly1305 64 B"),
    (Kernel::Poly1305, 1024, "poly1305 1 KiB"),
    (Kernel::Poly1305, 16384, "poly1305 16 KiB"),
];

/// One call of each of `kernels` at each size of [`SIZES`] (through the multi-block stub).
fn workloads(kernels: &[Kernel]) -> Vec<(&'static str, Workload)> {
    NAMES
        .iter()
        .filter(|(k, bytes, _)| kernels.contains(k) && SIZES.contains(bytes))
        .map(|&(k, bytes, name)| (name, Workload::of(k, bytes as u64 / Workload::block_bytes(k), 0)))
        .collect()
}

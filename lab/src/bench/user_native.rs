//! Native speed of a user's kernel (`lab bench --object`, `--manifest`): the kernel cannot be
//! linked into this binary as the lab's own x86_64 kernels are ([`super::native`]), so it is
//! timed where the host runs it, through the native backend: the lab's driver calls the
//! kernel in a guest process on this CPU, in batches of the [`super::throughput`] workloads
//! (MD5 one block and 16 KiB, Poly1305 1 KiB), median of `runs` timings of whole batches. The
//! figure is OpenSSL's beside it at the same message size ([`super::native`]'s OpenSSL rows:
//! whole digests and tags through EVP, its default path): the user's figure counts the block
//! function and the driver's per-call work (fresh callee-saved values, the input copy), so it is
//! a lower bound on the kernel's own speed. Only the selected kernels are timed. An object with
//! dispatch paths (an OpenSSL capability word, Linux's glue) is one variant per path, so each
//! path the host runs gets its own rows, labelled with the path; the timing needs no
//! instruction count (no Unicorn profile), so vector paths Unicorn cannot run are timed too.

use serde::Serialize;

use super::native::NativeRow;
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;

use super::throughput;
use crate::backend::{BackendKind, Limits};
use crate::image::Image;
use crate::variant::{Kernel, Variant};

/// One workload of a user's kernel, timed natively.
#[derive(Debug, Clone, Serialize)]
pub struct UserNativeRow {
    /// The user's variant (its name in reports: the object's stem or the manifest entry, with
    /// `@path` for a dispatch path).
    pub variant: &'static str,
    /// The dispatch path the variant runs (`avx2`), when its objects choose one.
    pub path: Option<&'static str>,
    /// `md5` or `poly1305`.
    pub kernel: &'static str,
    /// The workload (`md5 16 KiB`).
    pub workload: &'static str,
    /// The contract symbol called (the user's function behind it).
    pub symbol: &'static str,
    /// Message bytes per call.
    pub bytes: u64,
    /// Median throughput through the native backend, MB/s (10^6 bytes).
    pub mb_per_s: f64,
    /// The same as nanoseconds per message byte (1000 / `mb_per_s`).
    pub ns_per_byte: f64,
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
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let path = crate::user_kernel::of(variant).and_then(|k| k.dispatch_path);
    let mut rows = Vec::new();
    for (workload, w) in throughput::workloads().into_iter().filter(|(_, w)| kernels.contains(&w.kernel)) {
        let (_, per_call) = throughput::time_calls(backend.as_mut(), image, &w, runs, &mut rng)?;
        let mb_per_s = w.bytes() as f64 / per_call / 1e6;
        let theirs = openssl
            .iter()
            .find(|o| o.implementation == "openssl" && o.kernel == w.kernel.name() && o.bytes as u64 == w.bytes())
            .map(|o| o.mb_per_s);
        rows.push(UserNativeRow {
            variant: variant.name,
            path,
            kernel: w.kernel.name(),
            workload,
            symbol: w.stub_of(image),
            bytes: w.bytes(),
            mb_per_s,
            ns_per_byte: 1e3 / mb_per_s,
            openssl_mb_per_s: theirs,
            vs_openssl: theirs.filter(|t| *t > 0.0).map(|t| mb_per_s / t),
        });
    }
    Ok(rows)
}

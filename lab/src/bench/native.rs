//! Native speed on an x86_64 host: the lab's x86_64 kernels, assembled into this binary by
//! `build.rs`, timed in-process beside OpenSSL's libcrypto and RustCrypto's `md-5` and
//! `poly1305`, at the JMH sizes of the HotSpot seeds (64, 1024, 16384 bytes).
//!
//! Every implementation computes the whole digest or tag of the same message, so the
//! comparison is like for like: the lab's MD5 is driven as DigestBase drives the stubs
//! (`md5_implCompressMB` over the whole blocks, `md5_implCompress` per padding block); its
//! Poly1305 is `poly1305_processBlocks` over the message (the sizes are whole blocks) plus the
//! final reduction and `+ s`. The outputs are compared before any timing.
//!
//! OpenSSL is called as its users call it: MD5 through one `EVP_MD_CTX` reused for every
//! digest (`EVP_DigestUpdate` + `EVP_DigestFinal_ex`, which re-initialises it), Poly1305 through
//! one `EVP_MAC_CTX` of the fetched `POLY1305` MAC reused for every tag (`EVP_MAC_init` with the
//! message's one-time key, update, final); no per-message key object or fetch. It is timed on
//! its default path (what libcrypto picks for this CPU: AVX2 or AVX-512 for Poly1305 where the
//! CPU has them) and on its scalar path: a child process (this binary again) started with
//! `OPENSSL_ia32cap=`[`SCALAR_IA32CAP`], which libcrypto reads when it initialises, before
//! `main`, so it cannot be set in-process.
//!
//! Times are CPU time of the timing thread (`CLOCK_THREAD_CPUTIME_ID`), not wall time: the
//! figures hold on a shared machine. Each sample times `reps` calls per implementation,
//! implementations interleaved; the figure is the median.

use serde::Serialize;

/// Message sizes in bytes (the JMH sizes of the seeds).
pub const SIZES: [usize; 3] = [64, 1024, 16384];

/// `OPENSSL_ia32cap` for OpenSSL's scalar path: clears AVX (bit 60 of the CPUID(1) word) and
/// every CPUID(7) feature (AVX2, BMI1/2, ADX, AVX-512, SHA): no SIMD path is eligible.
pub const SCALAR_IA32CAP: &str = "~0x1000000000000000:0";

/// `OPENSSL_ia32cap` for OpenSSL's AVX2 path: the CPUID(1) word as detected (`~0x0`), the
/// CPUID(7) EBX bits of AVX-512 cleared (F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30,
/// VL 31; Intel SDM vol. 2A, CPUID leaf 7): `poly1305_blocks` dispatches to its AVX2 code.
pub const AVX2_IA32CAP: &str = "~0x0:~0xdc230000";

/// Environment variable that turns this binary into the OpenSSL timing child (its value: runs).
pub const CHILD_ENV: &str = "KERNEL_LAB_OPENSSL_CHILD";

/// One implementation at one size.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct NativeRow {
    /// `md5` or `poly1305`.
    pub kernel: String,
    /// Message bytes.
    pub bytes: usize,
    /// `lab`, `lab-avx2` / `lab-ifma` (the AVX2 and AVX-512 IFMA builds, Poly1305), `openssl`
    /// (default path), `openssl-scalar`, `openssl-avx2` (Poly1305) or `rustcrypto`.
    pub implementation: String,
    /// Median nanoseconds per message byte.
    pub ns_per_byte: f64,
    /// Median throughput, MB/s (10^6 bytes).
    pub mb_per_s: f64,
}

/// The lab's throughput over another implementation's at one size (> 1: the lab is faster).
#[derive(Debug, Clone, Serialize)]
pub struct NativeRatio {
    /// `md5` or `poly1305`.
    pub kernel: &'static str,
    /// Message bytes.
    pub bytes: usize,
    /// lab throughput / OpenSSL throughput, OpenSSL's default path.
    pub lab_vs_openssl: f64,
    /// lab throughput / OpenSSL throughput, OpenSSL's scalar path (child process).
    pub lab_vs_openssl_scalar: Option<f64>,
    /// lab throughput / RustCrypto throughput.
    pub lab_vs_rustcrypto: f64,
}

/// The native comparison.
#[derive(Debug, Clone, Serialize)]
pub struct NativeReport {
    /// CPU model from /proc/cpuinfo.
    pub cpu: String,
    /// OpenSSL version string.
    pub openssl: String,
    /// Which OpenSSL code paths were timed, in words.
    pub openssl_paths: Vec<String>,
    /// Why the scalar path was not timed, when it was not.
    pub openssl_scalar_skipped: Option<String>,
    /// Samples per figure (the median is reported).
    pub runs: usize,
    /// Every implementation at every size.
    pub rows: Vec<NativeRow>,
    /// The lab against the others.
    pub ratios: Vec<NativeRatio>,
    /// The lab's Poly1305 vector builds against OpenSSL's paths, per build and size (empty
    /// when none was timed).
    pub poly1305_vector: Vec<VectorRatio>,
    /// Why vector rows are missing or partial (a CPU without the ISA, a child that failed).
    pub vector_skipped: Vec<String>,
}

/// A vector build of the lab's Poly1305 (`lab-avx2`, `lab-ifma` rows) at one size; ratios are
/// throughput (> 1: the build is faster).
#[derive(Debug, Clone, Serialize)]
pub struct VectorRatio {
    /// `lab-avx2` or `lab-ifma`.
    pub build: &'static str,
    /// Message bytes.
    pub bytes: usize,
    /// OpenSSL's path on the same ISA: `openssl-avx2` (child with [`AVX2_IA32CAP`]) for AVX2,
    /// `openssl` (its default, the IFMA code on a CPU with IFMA) for IFMA.
    pub openssl_path: &'static str,
    /// The build over `openssl_path`, when it was timed.
    pub vs_openssl_path: Option<f64>,
    /// The build over OpenSSL's default path.
    pub vs_openssl: f64,
    /// The build over the lab's baseline (scalar) build.
    pub vs_lab: f64,
}

/// Why the comparison cannot run in this binary (not an x86_64 host, or build.rs could not
/// assemble the kernels in), or `None` when it can.
pub fn unavailable() -> Option<&'static str> {
    let why = env!("KERNEL_LAB_NATIVE_SKIP");
    if !why.is_empty() {
        return Some(why);
    }
    (!cfg!(feature = "openssl")).then_some(NO_OPENSSL)
}

/// Why the comparison is left out of a build without the `openssl` feature.
const NO_OPENSSL: &str = "this lab was built without the cargo feature `openssl` (on by default; \
     `--no-default-features` turns it off), so there is no OpenSSL to compare with";

/// Runs the comparison with `runs` samples per figure; the scalar OpenSSL path runs in a child
/// process when this binary is `lab` (in other binaries, such as tests, it is reported skipped).
///
/// # Errors
/// [`unavailable`]'s reason, or implementations that disagree on a digest or tag.
pub fn bench(runs: usize) -> Result<NativeReport, String> {
    imp::bench(runs.max(1))
}

/// OpenSSL alone at every size of [`SIZES`] (default path), rows named `openssl`: the figures
/// a user's kernel is held against ([`super::user_native`]).
///
/// # Errors
/// As [`bench()`].
pub fn openssl_figures(runs: usize) -> Result<Vec<NativeRow>, String> {
    imp::openssl_rows(runs.max(1))
}

/// When this process is the OpenSSL timing child ([`CHILD_ENV`] set): the runs it was asked for.
pub fn child_request() -> Option<usize> {
    std::env::var(CHILD_ENV).ok().and_then(|v| v.parse().ok())
}

/// The child's work: OpenSSL alone at every size, as JSON rows on success.
///
/// # Errors
/// OpenSSL failing or disagreeing with the reference.
pub fn child_main(runs: usize) -> Result<String, String> {
    imp::openssl_rows(runs.max(1)).and_then(|rows| serde_json::to_string(&rows).map_err(|e| e.to_string()))
}

#[cfg_attr(not(all(target_arch = "x86_64", native_kernels, feature = "openssl")), allow(dead_code))]
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// The SIMD features of this CPU that OpenSSL's Poly1305 can use (/proc/cpuinfo flags).
fn simd_flags() -> String {
    let flags = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines().find(|l| l.starts_with("flags")).map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
    });
    let have: Vec<&str> = ["avx", "avx2", "avx512f", "avx512ifma"]
        .into_iter()
        .filter(|f| flags.as_ref().is_some_and(|fl| fl.iter().any(|x| x == f)))
        .collect();
    if have.is_empty() {
        "no AVX".into()
    } else {
        have.join(", ")
    }
}

#[cfg_attr(not(all(target_arch = "x86_64", native_kernels, feature = "openssl")), allow(dead_code))]
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Times `impls` (name, one call) interleaved; returns the median CPU ns per call of each.
#[cfg_attr(not(all(target_arch = "x86_64", native_kernels, feature = "openssl")), allow(dead_code))]
fn time_interleaved(runs: usize, reps: usize, impls: &mut [(&'static str, &mut dyn FnMut())]) -> Vec<f64> {
    let mut samples = vec![Vec::with_capacity(runs); impls.len()];
    for (_, f) in impls.iter_mut() {
        f(); // warm caches and lazy initialisation
    }
    for _ in 0..runs {
        for (i, (_, f)) in impls.iter_mut().enumerate() {
            let t = thread_cpu_ns();
            for _ in 0..reps {
                f();
            }
            samples[i].push((thread_cpu_ns() - t) / reps as f64);
        }
    }
    samples.iter_mut().map(|s| median(s)).collect()
}

#[cfg(not(all(target_arch = "x86_64", native_kernels, feature = "openssl")))]
mod imp {
    pub fn bench(_runs: usize) -> Result<super::NativeReport, String> {
        Err(super::unavailable().unwrap_or(super::NO_OPENSSL).to_string())
    }

    pub fn openssl_rows(_runs: usize) -> Result<Vec<super::NativeRow>, String> {
        Err(env!("KERNEL_LAB_NATIVE_SKIP").to_string())
    }
}

#[cfg(all(target_arch = "x86_64", native_kernels, feature = "openssl"))]
mod imp {
    use std::hint::black_box;

    use md5::Digest as _;
    use openssl::hash::{Hasher, MessageDigest};
    use poly1305::universal_hash::KeyInit as _;
    use rand::rngs::ChaCha8Rng;
    use rand::{RngExt, SeedableRng};

    use super::{cpu_model, simd_flags, time_interleaved, NativeRatio, NativeReport, NativeRow, VectorRatio, SIZES};
    use crate::reference::{md5 as md5_ref, poly1305 as poly_ref};

    /// The kernels of kernels/x86_64, linked in by build.rs (SysV x86-64 psABI calls).
    mod ffi {
        extern "C" {
            /// kernels/x86_64/poly1305.S assembled at x86-64-v3 (its AVX2 path), renamed.
            #[cfg(native_avx2)]
            #[link_name = "poly1305_processBlocks_avx2"]
            pub fn poly1305_process_blocks_avx2(input: *const u8, length: i64, acc: *mut i64, r: *const i64);
            /// The same at x86-64-v4 with AVX-512 IFMA (its IFMA path), renamed.
            #[cfg(native_ifma)]
            #[link_name = "poly1305_processBlocks_ifma"]
            pub fn poly1305_process_blocks_ifma(input: *const u8, length: i64, acc: *mut i64, r: *const i64);
            #[link_name = "md5_implCompress"]
            pub fn md5_impl_compress(buf: *const u8, state: *mut u32);
            #[link_name = "md5_implCompressMB"]
            pub fn md5_impl_compress_mb(buf: *const u8, state: *mut u32, ofs: i32, limit: i32) -> i32;
            #[link_name = "poly1305_processBlocks"]
            pub fn poly1305_process_blocks(input: *const u8, length: i64, acc: *mut i64, r: *const i64);
        }
    }

    /// MD5 of `msg` through the stubs, as DigestBase drives them; padding per RFC 1321 §3.1–3.2.
    fn lab_md5(msg: &[u8]) -> [u8; 16] {
        let mut st = md5_ref::IV;
        let whole = msg.len() / 64 * 64;
        if whole > 0 {
            // SAFETY: msg holds `whole` readable bytes (limit = whole - 64 is the last block
            // start) and st is 4 writable u32s, as the md5_implCompressMB contract requires.
            unsafe { ffi::md5_impl_compress_mb(msg.as_ptr(), st.as_mut_ptr(), 0, (whole - 64) as i32) };
        }
        let tail = &msg[whole..];
        let mut pad = [0u8; 128];
        pad[..tail.len()].copy_from_slice(tail);
        pad[tail.len()] = 0x80;
        let n = if tail.len() < 56 { 64 } else { 128 };
        pad[n - 8..n].copy_from_slice(&(msg.len() as u64 * 8).to_le_bytes());
        for block in pad[..n].chunks_exact(64) {
            // SAFETY: block is 64 readable bytes, st 4 writable u32s (md5_implCompress contract).
            unsafe { ffi::md5_impl_compress(block.as_ptr(), st.as_mut_ptr()) };
        }
        md5_ref::state_to_digest(&st)
    }

    /// A `poly1305_processBlocks` entry (HotSpot contract, SysV x86-64 psABI).
    type ProcessBlocks = unsafe extern "C" fn(*const u8, i64, *mut i64, *const i64);

    /// The AVX2 build's entry when it was assembled in and this CPU has AVX2 (it uses AVX and
    /// AVX2 instructions only, beside baseline x86-64).
    fn avx2_entry() -> Result<ProcessBlocks, String> {
        #[cfg(native_avx2)]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                return Ok(ffi::poly1305_process_blocks_avx2);
            }
            Err("lab-avx2: this CPU has no AVX2".into())
        }
        #[cfg(not(native_avx2))]
        Err("lab-avx2: build.rs could not assemble kernels/x86_64/poly1305.S at x86-64-v3".into())
    }

    /// The IFMA build's entry when it was assembled in and this CPU has AVX-512 F, VL and IFMA
    /// (its IFMA path; lengths it leaves to AVX2 need AVX2, which AVX-512 F implies).
    fn ifma_entry() -> Result<ProcessBlocks, String> {
        #[cfg(native_ifma)]
        {
            if std::arch::is_x86_feature_detected!("avx512ifma") && std::arch::is_x86_feature_detected!("avx512vl") {
                return Ok(ffi::poly1305_process_blocks_ifma);
            }
            Err("lab-ifma: this CPU has no AVX-512 IFMA".into())
        }
        #[cfg(not(native_ifma))]
        Err("lab-ifma: build.rs could not assemble kernels/x86_64/poly1305.S with -mavx512ifma".into())
    }

    /// Poly1305 tag of a whole-block `msg` (RFC 8439 §2.5): processBlocks, then h mod p + s.
    fn lab_poly1305(key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
        lab_poly1305_with(ffi::poly1305_process_blocks, key, msg)
    }

    /// [`lab_poly1305`] through the entry `f`.
    fn lab_poly1305_with(f: ProcessBlocks, key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
        debug_assert_eq!(msg.len() % 16, 0);
        let r = poly_ref::clamp_r(key[..16].try_into().expect("16 bytes")).0.map(|l| l as i64);
        let mut acc = [0i64; 5];
        // SAFETY: msg holds msg.len() readable bytes; acc and r are 5 limbs each, r clamped, acc
        // within bounds (zero), as the poly1305_processBlocks contract requires.
        unsafe { f(msg.as_ptr(), msg.len() as i64, acc.as_mut_ptr(), r.as_ptr()) };
        finish(&acc.map(|l| l as u64), key[16..].try_into().expect("16 bytes"))
    }

    /// `(h mod 2^130-5) + s mod 2^128` for 26-bit limbs within the contract bounds (h < 2^131),
    /// in 64-bit words: fold bits 130.. back with 2^130 = 5 (mod p), then subtract p once if
    /// h + 5 reaches 2^130 (the final step of poly1305-donna).
    fn finish(l: &[u64; 5], s: &[u8; 16]) -> [u8; 16] {
        let h0 = l[0] | l[1] << 26 | l[2] << 52;
        let h1 = l[2] >> 12 | l[3] << 14 | l[4] << 40;
        let h2 = l[4] >> 24;
        let mut h = (u128::from(h0) | u128::from(h1) << 64, h2);
        let fold = 5 * u128::from(h.1 >> 2);
        let (lo, c) = h.0.overflowing_add(fold);
        h = (lo, (h.1 & 3) + u64::from(c));
        let (g, c) = h.0.overflowing_add(5);
        if (h.1 + u64::from(c)) >> 2 != 0 {
            h.0 = g; // h >= p: h - p = h + 5 - 2^130, and the 2^130 bit is dropped with h.1
        }
        h.0.wrapping_add(u128::from_le_bytes(*s)).to_le_bytes()
    }

    /// OpenSSL's Poly1305 as users call it: the `POLY1305` MAC fetched once, one `EVP_MAC_CTX`
    /// reused, `EVP_MAC_init` with each message's one-time key (OpenSSL 3, `EVP_MAC(3)`).
    struct OpensslPoly1305 {
        mac: *mut ffi_ossl::EVP_MAC,
        ctx: *mut ffi_ossl::EVP_MAC_CTX,
    }

    use openssl_sys as ffi_ossl;

    impl OpensslPoly1305 {
        fn new() -> Result<OpensslPoly1305, String> {
            openssl_sys::init();
            // SAFETY: a NUL-terminated name, the default library context (null), no properties.
            let mac = unsafe { ffi_ossl::EVP_MAC_fetch(std::ptr::null_mut(), c"POLY1305".as_ptr(), std::ptr::null()) };
            if mac.is_null() {
                return Err("EVP_MAC_fetch(POLY1305) failed".into());
            }
            // SAFETY: mac is a valid fetched EVP_MAC.
            let ctx = unsafe { ffi_ossl::EVP_MAC_CTX_new(mac) };
            if ctx.is_null() {
                // SAFETY: mac came from EVP_MAC_fetch and is freed once.
                unsafe { ffi_ossl::EVP_MAC_free(mac) };
                return Err("EVP_MAC_CTX_new failed".into());
            }
            Ok(OpensslPoly1305 { mac, ctx })
        }

        fn tag(&mut self, key: &[u8; 32], msg: &[u8]) -> Result<[u8; 16], String> {
            let mut out = [0u8; 16];
            let mut outl = 0usize;
            // SAFETY: ctx is valid for self's lifetime; key is 32 readable bytes, msg msg.len()
            // readable bytes, out 16 writable bytes (the Poly1305 tag size).
            let ok = unsafe {
                ffi_ossl::EVP_MAC_init(self.ctx, key.as_ptr(), key.len(), std::ptr::null()) == 1
                    && ffi_ossl::EVP_MAC_update(self.ctx, msg.as_ptr(), msg.len()) == 1
                    && ffi_ossl::EVP_MAC_final(self.ctx, out.as_mut_ptr(), &mut outl, out.len()) == 1
            };
            if ok && outl == 16 {
                Ok(out)
            } else {
                Err("EVP_MAC_init/update/final (POLY1305) failed".into())
            }
        }
    }

    impl Drop for OpensslPoly1305 {
        fn drop(&mut self) {
            // SAFETY: both came from EVP_MAC_CTX_new / EVP_MAC_fetch and are freed once.
            unsafe {
                ffi_ossl::EVP_MAC_CTX_free(self.ctx);
                ffi_ossl::EVP_MAC_free(self.mac);
            }
        }
    }

    /// Calls per sample: about 2 MiB of input per sample.
    fn reps(bytes: usize) -> usize {
        (2 << 20) / bytes
    }

    /// The message and one-time key at `bytes` (the same in the parent and the child).
    fn inputs() -> Vec<(usize, Vec<u8>, [u8; 32])> {
        let mut rng = ChaCha8Rng::seed_from_u64(0x6e61_7469_7665);
        SIZES
            .iter()
            .map(|&bytes| {
                let msg: Vec<u8> = (0..bytes).map(|_| rng.random()).collect();
                (bytes, msg, rng.random())
            })
            .collect()
    }

    fn row(kernel: &str, bytes: usize, implementation: &str, ns: f64) -> NativeRow {
        let ns_per_byte = ns / bytes as f64;
        NativeRow {
            kernel: kernel.into(),
            bytes,
            implementation: implementation.into(),
            ns_per_byte,
            mb_per_s: 1e3 / ns_per_byte,
        }
    }

    /// OpenSSL alone at every size (the child's work), rows named `openssl`.
    pub fn openssl_rows(runs: usize) -> Result<Vec<NativeRow>, String> {
        let mut hasher = Hasher::new(MessageDigest::md5()).map_err(|e| e.to_string())?;
        let mut mac = OpensslPoly1305::new()?;
        let mut rows = Vec::new();
        for (bytes, msg, key) in inputs() {
            hasher.update(&msg).map_err(|e| e.to_string())?;
            let digest = hasher.finish().map_err(|e| e.to_string())?;
            if digest[..] != md5::Md5::digest(&msg)[..] || mac.tag(&key, &msg)? != lab_poly1305(&key, &msg) {
                return Err(format!("OpenSSL disagrees with the reference at {bytes} bytes"));
            }
            let t = time_interleaved(
                runs,
                reps(bytes),
                &mut [
                    ("md5", &mut || {
                        hasher.update(black_box(&msg)).expect("EVP_DigestUpdate");
                        black_box(hasher.finish().expect("EVP_DigestFinal"));
                    }),
                    ("poly1305", &mut || {
                        black_box(mac.tag(black_box(&key), black_box(&msg)).expect("EVP_MAC"));
                    }),
                ],
            );
            rows.push(row("md5", bytes, "openssl", t[0]));
            rows.push(row("poly1305", bytes, "openssl", t[1]));
        }
        Ok(rows)
    }

    /// One of OpenSSL's paths, timed by this binary re-run as a child with `OPENSSL_ia32cap` =
    /// `ia32cap`; its rows are named `implementation`.
    fn openssl_child(runs: usize, ia32cap: &str, implementation: &str) -> Result<Vec<NativeRow>, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        if exe.file_stem() != Some(std::ffi::OsStr::new("lab")) {
            return Err(format!(
                "{} is not `lab` (only `lab bench` re-runs itself for the scalar path)",
                exe.display()
            ));
        }
        let out = std::process::Command::new(&exe)
            .arg("bench")
            .env(super::CHILD_ENV, runs.to_string())
            .env("OPENSSL_ia32cap", ia32cap)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        if !out.status.success() {
            return Err(format!("the OpenSSL child failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        let mut rows: Vec<NativeRow> =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("the OpenSSL child's output: {e}"))?;
        for r in &mut rows {
            r.implementation = implementation.into();
        }
        Ok(rows)
    }

    pub fn bench(runs: usize) -> Result<NativeReport, String> {
        let mut rows = Vec::new();
        let mut ratios = Vec::new();
        let mut vector_skipped = Vec::new();
        let mut builds: Vec<(&'static str, ProcessBlocks)> = Vec::new();
        for (name, entry) in [("lab-avx2", avx2_entry()), ("lab-ifma", ifma_entry())] {
            match entry {
                Ok(f) => builds.push((name, f)),
                Err(why) => vector_skipped.push(why),
            }
        }
        let mut vector_ratios = Vec::new();
        let mut hasher = Hasher::new(MessageDigest::md5()).map_err(|e| e.to_string())?;
        let mut mac = OpensslPoly1305::new()?;
        for (bytes, msg, key) in inputs() {
            // Same answers first.
            hasher.update(&msg).map_err(|e| e.to_string())?;
            let (a, b, c) = (lab_md5(&msg), hasher.finish().map_err(|e| e.to_string())?, md5::Md5::digest(&msg));
            if a[..] != b[..] || a[..] != c[..] {
                return Err(format!(
                    "MD5 of {bytes} bytes: lab {a:02x?}, OpenSSL {:02x?}, RustCrypto {c:02x?}",
                    &b[..]
                ));
            }
            let rc = |k: &[u8; 32], m: &[u8]| poly1305::Poly1305::new(k.into()).compute_unpadded(m);
            let (a, b, c) = (lab_poly1305(&key, &msg), mac.tag(&key, &msg)?, rc(&key, &msg));
            if a[..] != b[..] || a[..] != c[..] {
                return Err(format!("Poly1305 of {bytes} bytes: lab {a:02x?}, OpenSSL {b:02x?}, RustCrypto {c:02x?}"));
            }
            for (name, f) in &builds {
                let v = lab_poly1305_with(*f, &key, &msg);
                if v != a {
                    return Err(format!("Poly1305 of {bytes} bytes: {name} {v:02x?}, lab and OpenSSL {a:02x?}"));
                }
            }
            let md5_times = time_interleaved(
                runs,
                reps(bytes),
                &mut [
                    ("lab", &mut || {
                        black_box(lab_md5(black_box(&msg)));
                    }),
                    ("openssl", &mut || {
                        hasher.update(black_box(&msg)).expect("EVP_DigestUpdate");
                        black_box(hasher.finish().expect("EVP_DigestFinal"));
                    }),
                    ("rustcrypto", &mut || {
                        black_box(md5::Md5::digest(black_box(&msg)));
                    }),
                ],
            );
            let mut lab = || {
                black_box(lab_poly1305(black_box(&key), black_box(&msg)));
            };
            let mut ossl = || {
                black_box(mac.tag(black_box(&key), black_box(&msg)).expect("EVP_MAC"));
            };
            let mut rustc = || {
                black_box(rc(black_box(&key), black_box(&msg)));
            };
            let mut vector: Vec<Box<dyn FnMut()>> = builds
                .iter()
                .map(|&(_, f)| {
                    let (key, msg) = (&key, &msg);
                    Box::new(move || {
                        black_box(lab_poly1305_with(f, black_box(key), black_box(msg)));
                    }) as Box<dyn FnMut()>
                })
                .collect();
            let mut impls: Vec<(&'static str, &mut dyn FnMut())> =
                vec![("lab", &mut lab), ("openssl", &mut ossl), ("rustcrypto", &mut rustc)];
            for ((name, _), f) in builds.iter().zip(vector.iter_mut()) {
                impls.push((name, f.as_mut()));
            }
            let poly_times = time_interleaved(runs, reps(bytes), &mut impls);
            for ((name, _), ns) in builds.iter().zip(&poly_times[3..]) {
                rows.push(row("poly1305", bytes, name, *ns));
                let ifma = *name == "lab-ifma";
                vector_ratios.push(VectorRatio {
                    build: name,
                    bytes,
                    openssl_path: if ifma { "openssl" } else { "openssl-avx2" },
                    vs_openssl_path: (ifma && simd_flags().contains("avx512ifma")).then(|| poly_times[1] / ns),
                    vs_openssl: poly_times[1] / ns,
                    vs_lab: poly_times[0] / ns,
                });
            }
            for (kernel, times) in [("md5", md5_times), ("poly1305", poly_times)] {
                for (name, ns) in ["lab", "openssl", "rustcrypto"].into_iter().zip(&times) {
                    rows.push(row(kernel, bytes, name, *ns));
                }
                ratios.push(NativeRatio {
                    kernel,
                    bytes,
                    lab_vs_openssl: times[1] / times[0],
                    lab_vs_openssl_scalar: None,
                    lab_vs_rustcrypto: times[2] / times[0],
                });
            }
        }
        let mut paths = vec![format!(
            "openssl: default path, what libcrypto picks for this CPU ({}); MD5 has no SIMD path",
            simd_flags()
        )];
        if vector_ratios.iter().any(|r| r.build == "lab-avx2") {
            match openssl_child(runs, super::AVX2_IA32CAP, "openssl-avx2") {
                Ok(rows_avx2) => {
                    for r in vector_ratios.iter_mut().filter(|r| r.build == "lab-avx2") {
                        let lab = rows.iter().find(|x| x.bytes == r.bytes && x.implementation == "lab-avx2");
                        let o = rows_avx2.iter().find(|x| x.kernel == "poly1305" && x.bytes == r.bytes);
                        r.vs_openssl_path = lab.zip(o).map(|(l, o)| o.ns_per_byte / l.ns_per_byte);
                    }
                    rows.extend(rows_avx2.into_iter().filter(|x| x.kernel == "poly1305"));
                    paths.push(format!(
                        "openssl-avx2: a child process with OPENSSL_ia32cap={} (every AVX-512 bit of CPUID(7) masked: Poly1305's AVX2 code)",
                        super::AVX2_IA32CAP
                    ));
                }
                Err(e) => vector_skipped.push(format!("openssl-avx2: {e}")),
            }
        }
        let scalar_skipped = match openssl_child(runs, super::SCALAR_IA32CAP, "openssl-scalar") {
            Ok(scalar) => {
                for r in &mut ratios {
                    let lab =
                        rows.iter().find(|x| x.kernel == r.kernel && x.bytes == r.bytes && x.implementation == "lab");
                    let s = scalar.iter().find(|x| x.kernel == r.kernel && x.bytes == r.bytes);
                    r.lab_vs_openssl_scalar = lab.zip(s).map(|(l, s)| s.ns_per_byte / l.ns_per_byte);
                }
                rows.extend(scalar);
                paths.push(format!(
                    "openssl-scalar: a child process with OPENSSL_ia32cap={} (AVX and every CPUID(7) feature masked before libcrypto initialises)",
                    super::SCALAR_IA32CAP
                ));
                None
            }
            Err(e) => Some(e),
        };
        Ok(NativeReport {
            cpu: cpu_model(),
            openssl: openssl::version::version().to_string(),
            runs,
            rows,
            ratios,
            openssl_paths: paths,
            openssl_scalar_skipped: scalar_skipped,
            poly1305_vector: vector_ratios,
            vector_skipped,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn lab_finish_matches_the_reference_at_the_reduction_edges() {
            // h = p - 1, p, p + 4, 2^130 + 34 (largest after a fold), and 2^131 - 1 in limbs.
            let edge: [[u64; 5]; 4] = [
                [0x3ff_fffa, 0x3ff_ffff, 0x3ff_ffff, 0x3ff_ffff, 0x3ff_ffff],
                [0x3ff_fffb, 0x3ff_ffff, 0x3ff_ffff, 0x3ff_ffff, 0x3ff_ffff],
                [0x3ff_ffff, 0x3ff_ffff, 0x3ff_ffff, 0x3ff_ffff, 0x3ff_ffff],
                [0x3ff_ffff, 0x3ff_ffff, 0x3ff_ffff, 0x3ff_ffff, 0x7ff_ffff],
            ];
            let s = [0xa5u8; 16];
            for l in edge {
                let want = poly_ref::finish(&poly_ref::Limbs26(l), &poly_ref::Limbs26::default(), &[], &s);
                assert_eq!(finish(&l, &s), want, "{l:x?}");
            }
        }
    }
}

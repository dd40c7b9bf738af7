//! The JDK's call domain: the arguments HotSpot's stubs actually receive from the JDK, which
//! is the HotSpot family's contract (docs/contracts.md, "The JDK call domain"). The lab's own
//! contract text is wider (any `int` `ofs`/`limit`, any Poly1305 `length`); HotSpot's code is
//! only ever called inside this domain, and compares differently outside it (its x86_64
//! `md5_implCompressMB` loop compares `ofs`/`limit` unsigned).
//!
//! * `md5_implCompressMB(buf, state, ofs, limit)`: `0 <= ofs <= limit <= 2^31 - 65`.
//!   `DigestBase.implCompressMultiBlock` is called with `ofs >= 0` and `limit = ofs + len - 64`
//!   where `ofs + len` is at most the array length, at most `Integer.MAX_VALUE`; the stub's
//!   loop adds 64 to `ofs` after each block, so `limit <= 2^31 - 65` keeps `ofs + 64` from
//!   overflowing.
//! * `poly1305_processBlocks(input, length, acc, r)`: `length` a multiple of 16 in
//!   `[0, 2^31 - 16]`. `Poly1305.engineUpdate` passes `len & ~15` of an `int` length
//!   (`processMultipleBlocks` takes whole blocks; the tail stays in the Java buffer).
//!   `acc` is what the JDK's Java code leaves or what the stub itself returned
//!   ([`AccRange`]): a kernel that declares [`AccRange::Jdk`] is handed and must hand back only
//!   the former.
//!
//! Runs and fuzzing stay inside the domain by default ([`Domain::Jdk`]): a Poly1305 call
//! length is passed as the JDK would pass it (its whole blocks: the contract ignores the tail,
//! so the expected result is the same), an MD5 call outside it is not run. `--domain wide`
//! ([`Domain::Wide`]) runs every call the lab's contract allows; a finding on a call outside
//! the domain is then class `out-of-domain` ([`crate::finding::Class::OutOfDomain`]), apart
//! from the kernel's failures.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::contract::Family;
use crate::reference::poly1305::{Limbs26, LIMB_BOUND, TOP_LIMB_BOUND};
use crate::vectors::{Body, Md5Stub, Vector};

/// Whether this process runs [`Domain::Wide`]: one setting per `lab run`/`lab fuzz` command
/// ([`set_current`]), read where calls are planned and judged.
static WIDE: AtomicBool = AtomicBool::new(false);

/// Sets the domain of this process's runs (the `--domain` option).
pub fn set_current(d: Domain) {
    WIDE.store(d == Domain::Wide, Ordering::Relaxed);
}

/// The domain of this process's runs ([`Domain::Jdk`] unless [`set_current`] said otherwise).
pub fn current() -> Domain {
    if WIDE.load(Ordering::Relaxed) {
        Domain::Wide
    } else {
        Domain::Jdk
    }
}

/// Whether this process's Poly1305 kernels declare [`AccRange::Jdk`] ([`set_acc_range`]).
static JDK_ACC: AtomicBool = AtomicBool::new(false);

/// Sets the accumulator range of this process's Poly1305 kernels (a manifest's
/// `poly1305_acc`, `--poly1305-acc`; one setting per run, like the domain).
pub fn set_acc_range(r: AccRange) {
    JDK_ACC.store(r == AccRange::Jdk, Ordering::Relaxed);
}

/// The accumulator range of this process's Poly1305 kernels ([`AccRange::Lab`] unless
/// [`set_acc_range`] said otherwise).
pub fn acc_range() -> AccRange {
    if JDK_ACC.load(Ordering::Relaxed) {
        AccRange::Jdk
    } else {
        AccRange::Lab
    }
}

/// The largest limb 4 the JDK's Java code leaves in a Poly1305 accumulator: 2^26 + 13.
///
/// `Poly1305.processBlock` is `a.setSum(n); a.setProduct(r)`; `IntegerPolynomial1305.mult`
/// ends in `carryReduce`, whose last step carries limbs 0 to 3 upwards with `x >> 26` and
/// leaves limbs 0-3 in `[0, 2^26)` and limb 4 below 2^26 plus the carry out of limb 3. That
/// carry is at most 13 for any `a + n` with limbs 0-3 below 2^27 and limb 4 below
/// 2^26 + 2^25 + 14 (an accumulator of this range plus a block, whose limb 4 is below 2^25)
/// and any clamped r (worst-case interval arithmetic over the product columns; the bound is a
/// fixed point of one block). The JDK hands `poly1305_processBlocks` that, a zero
/// accumulator (`engineReset`), or the stub's own last result.
pub const JDK_TOP_LIMB_MAX: u64 = LIMB_BOUND + 13;

/// Which accumulators a HotSpot-family Poly1305 kernel is handed and must hand back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccRange {
    /// The lab's contract: limbs 0-3 below 2^26, limb 4 below 2^27 (values below 2^131). A
    /// kernel that returns such accumulators is handed them back by the JDK, so every one is in
    /// its domain (the lab's own kernels).
    #[default]
    Lab,
    /// What the JDK's Java code leaves: limbs 0-3 below 2^26, limb 4 at most
    /// [`JDK_TOP_LIMB_MAX`]. A kernel that declares it (HotSpot's own stubs: `lab capture`
    /// writes it) must return accumulators in it too, and is never handed a larger one in
    /// [`Domain::Jdk`].
    Jdk,
}

impl AccRange {
    /// The option value (`lab`, `jdk`).
    pub fn name(self) -> &'static str {
        match self {
            AccRange::Lab => "lab",
            AccRange::Jdk => "jdk",
        }
    }

    /// The largest limb 4 in the range.
    pub fn top_limb_max(self) -> u64 {
        match self {
            AccRange::Lab => TOP_LIMB_BOUND - 1,
            AccRange::Jdk => JDK_TOP_LIMB_MAX,
        }
    }

    /// The range in words, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            AccRange::Lab => "limbs 0-3 < 2^26, limb 4 < 2^27",
            AccRange::Jdk => "limbs 0-3 < 2^26, limb 4 <= 2^26 + 13: what the JDK's IntegerPolynomial1305 leaves",
        }
    }

    /// The first limb of `acc` outside the range, as `(index, value)`.
    pub fn first_outside(self, acc: &Limbs26) -> Option<(usize, u64)> {
        acc.0
            .iter()
            .enumerate()
            .find(|&(i, &l)| if i == 4 { l > self.top_limb_max() } else { l >= LIMB_BOUND })
            .map(|(i, &l)| (i, l))
    }
}

/// Which calls a run or a fuzz campaign makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Domain {
    /// Only calls the JDK makes (the HotSpot family's contract).
    #[default]
    Jdk,
    /// Every call the lab's contract text allows, those outside the JDK's domain reported as
    /// out-of-domain findings.
    Wide,
}

impl Domain {
    /// The option value (`jdk`, `wide`).
    pub fn name(self) -> &'static str {
        match self {
            Domain::Jdk => "jdk",
            Domain::Wide => "wide",
        }
    }
}

/// The largest `limit` the JDK passes to `md5_implCompressMB`: 2^31 - 65.
pub const MD5_LIMIT_MAX: i32 = i32::MAX - 64;

/// The largest `length` the JDK passes to `poly1305_processBlocks`: 2^31 - 16.
pub const POLY1305_LENGTH_MAX: i64 = (i32::MAX as i64) & !15;

/// Why `md5_implCompressMB(ofs, limit)` lies outside the JDK's domain, if it does.
pub fn md5_outside(ofs: i32, limit: i32) -> Option<String> {
    if ofs < 0 {
        Some(format!("ofs = {ofs} < 0"))
    } else if limit < ofs {
        Some(format!("limit = {limit} < ofs = {ofs}"))
    } else if limit > MD5_LIMIT_MAX {
        Some(format!("limit = {limit} > 2^31 - 65"))
    } else {
        None
    }
}

/// Why `poly1305_processBlocks(length)` lies outside the JDK's domain, if it does.
pub fn poly1305_outside(length: i64) -> Option<String> {
    if length < 0 {
        Some(format!("length = {length} < 0"))
    } else if length % 16 != 0 {
        Some(format!("length = {length} is not a multiple of 16"))
    } else if length > POLY1305_LENGTH_MAX {
        Some(format!("length = {length} > 2^31 - 16"))
    } else {
        None
    }
}

/// The `length` the JDK would pass for `length` bytes: its whole blocks (`len & ~15`), or
/// `length` itself when it is negative or too large (kept so the call stays outside).
pub fn jdk_length(length: i64) -> i64 {
    if (0..=i64::from(i32::MAX)).contains(&length) {
        length & !15
    } else {
        length
    }
}

/// Why `poly1305_processBlocks` handed `acc` first lies outside the JDK's domain for a kernel
/// of accumulator range `range`, if it does (later calls of a chain take the kernel's own
/// result, which is inside by definition).
pub fn poly1305_acc_outside(acc: &Limbs26, range: AccRange) -> Option<String> {
    range.first_outside(acc).map(|(i, l)| {
        format!(
            "acc limb {i} = {l:#x}, outside the accumulators the JDK hands a kernel of poly1305_acc = \"{}\" ({})",
            range.name(),
            range.describe()
        )
    })
}

/// Why a HotSpot-family vector makes a call outside the JDK's domain when run in `domain`, if
/// it does: an MD5 call entry's `(ofs, limit)`, or a Poly1305 call length (in [`Domain::Jdk`]
/// lengths are passed as [`jdk_length`], so only a negative or too large one stays outside) or
/// its first accumulator ([`poly1305_acc_outside`] with [`acc_range`]).
/// Digests and tags are driven the JDK's way and always lie inside.
pub fn vector_outside(v: &Vector, domain: Domain) -> Option<String> {
    match &v.body {
        Body::Md5Call(c) if c.stub == Md5Stub::CompressMb => {
            md5_outside(c.ofs, c.limit).map(|why| format!("md5_implCompressMB with {why}"))
        }
        Body::Poly1305Call(c) => c
            .lengths
            .iter()
            .find_map(|&l| poly1305_outside(if domain == Domain::Jdk { jdk_length(l) } else { l }))
            .or_else(|| poly1305_acc_outside(&c.acc, acc_range()))
            .map(|why| format!("poly1305_processBlocks with {why}")),
        _ => None,
    }
}

/// Why an OpenSSL-family vector makes a call outside OpenSSL's contract when run in `domain`,
/// if it does. `poly1305_blocks`' callers pass whole blocks only (`Poly1305_Update` keeps the
/// tail; OpenSSL leaves other lengths unspecified), so by default ([`Domain::Jdk`]) a call
/// length is cut to its whole blocks, inside the contract. [`Domain::Wide`] passes a positive
/// length that is not a multiple of 16 as the vector gives it, which lies outside.
pub fn openssl_outside(v: &Vector, domain: Domain) -> Option<String> {
    let Body::Poly1305Call(c) = &v.body else { return None };
    if domain != Domain::Wide {
        return None;
    }
    c.lengths
        .iter()
        .find(|&&l| l > 0 && l % 16 != 0)
        .map(|l| format!("poly1305_blocks with len = {l}, not a multiple of 16"))
}

/// Why a vector of contract family `family` makes a call outside that family's domain when run
/// in `domain`, if it does: [`vector_outside`] for HotSpot, [`openssl_outside`] for OpenSSL;
/// BoringSSL's MD5 row has no such calls.
pub fn outside_for(v: &Vector, domain: Domain, family: Family) -> Option<String> {
    match family {
        Family::HotSpot => vector_outside(v, domain),
        Family::OpenSsl => openssl_outside(v, domain),
        Family::BoringSsl => None,
    }
}

/// The name of `family`'s call domain in reports: "the JDK call domain" (HotSpot), "OpenSSL's
/// contract" (OpenSSL, BoringSSL).
pub fn domain_name(family: Family) -> &'static str {
    match family {
        Family::HotSpot => "the JDK call domain",
        Family::OpenSsl | Family::BoringSsl => "OpenSSL's contract",
    }
}

/// Why a call outside `family`'s domain is not the kernel's failure, for reports: "HotSpot's
/// code is never called so", "OpenSSL's callers never call it so".
pub fn never_called(family: Family) -> &'static str {
    match family {
        Family::HotSpot => "HotSpot's code is never called so",
        Family::OpenSsl | Family::BoringSsl => "OpenSSL's callers never call it so",
    }
}

/// The out-of-domain finding's text for a call of a `family` kernel outside its domain (`why`
/// from [`outside_for`]).
pub fn outside_message(family: Family, why: &str) -> String {
    let place = match family {
        Family::HotSpot => "the JDK's call domain",
        Family::OpenSsl | Family::BoringSsl => "OpenSSL's contract",
    };
    format!("outside {place} ({why}): {}", never_called(family))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_domain_edges() {
        assert_eq!(md5_outside(0, 0), None);
        assert_eq!(md5_outside(0, MD5_LIMIT_MAX), None);
        assert_eq!(md5_outside(-64, -64).as_deref(), Some("ofs = -64 < 0"));
        assert_eq!(md5_outside(64, 0).as_deref(), Some("limit = 0 < ofs = 64"));
        assert_eq!(md5_outside(0, MD5_LIMIT_MAX + 1).as_deref(), Some("limit = 2147483584 > 2^31 - 65"));
    }

    #[test]
    fn accumulators_the_jdk_hands_over() {
        let top = |l4| Limbs26([LIMB_BOUND - 1, LIMB_BOUND - 1, LIMB_BOUND - 1, LIMB_BOUND - 1, l4]);
        assert_eq!(poly1305_acc_outside(&top(JDK_TOP_LIMB_MAX), AccRange::Jdk), None);
        let why = poly1305_acc_outside(&top(JDK_TOP_LIMB_MAX + 1), AccRange::Jdk).unwrap_or_default();
        assert!(why.starts_with("acc limb 4 = 0x400000e, outside"), "{why}");
        assert_eq!(poly1305_acc_outside(&top(TOP_LIMB_BOUND - 1), AccRange::Lab), None);
        assert_eq!(AccRange::Lab.first_outside(&top(TOP_LIMB_BOUND)), Some((4, TOP_LIMB_BOUND)));
        assert_eq!(AccRange::Jdk.first_outside(&Limbs26([LIMB_BOUND, 0, 0, 0, 0])), Some((0, LIMB_BOUND)));
    }

    /// [`JDK_TOP_LIMB_MAX`] is what `IntegerPolynomial1305.carryReduce` can leave: the
    /// worst-case carry out of limb 3, by interval arithmetic over the product columns of the
    /// largest `a + n` (this range plus a block) and the largest clamped r, replaying its steps.
    #[test]
    fn the_jdk_top_limb_bound_is_carry_reduces_worst_case() {
        let b = LIMB_BOUND as u128;
        let a: [u128; 5] = [2 * b - 2, 2 * b - 2, 2 * b - 2, 2 * b - 2, JDK_TOP_LIMB_MAX as u128 + (1 << 25) - 1];
        let r = Limbs26::from_value(&num_bigint::BigUint::from(crate::reference::poly1305::CLAMP)).0.map(u128::from);
        let mut c = [0u128; 9];
        for i in 0..5 {
            for j in 0..5 {
                c[i + j] += a[i] * r[j];
            }
        }
        // carryReduce: fold c7, c8; carry c3, c4 (each remainder at most 2^26 - 1); fold c5, c6;
        // then carry limbs 0..3 upwards.
        let mut l = [c[0], c[1], c[2] + 5 * c[7], 0, 0];
        let c3 = c[3] + 5 * c[8];
        let c4 = c[4] + (c3 >> 26);
        let c5 = c[5] + (c4 >> 26);
        l[0] += 5 * c5;
        l[1] += 5 * c[6];
        l[3] = b - 1;
        l[4] = b - 1;
        for i in 0..4 {
            l[i + 1] += l[i] >> 26;
        }
        assert_eq!(l[4] as u64, JDK_TOP_LIMB_MAX);
    }

    #[test]
    fn poly1305_lengths_as_the_jdk_passes_them() {
        assert_eq!((jdk_length(0), jdk_length(15), jdk_length(17), jdk_length(-1)), (0, 0, 16, -1));
        assert_eq!(poly1305_outside(POLY1305_LENGTH_MAX), None);
        assert_eq!(poly1305_outside(POLY1305_LENGTH_MAX + 16).as_deref(), Some("length = 2147483648 > 2^31 - 16"));
        assert_eq!(poly1305_outside(-16).as_deref(), Some("length = -16 < 0"));
        assert_eq!(poly1305_outside(5).as_deref(), Some("length = 5 is not a multiple of 16"));
    }
}

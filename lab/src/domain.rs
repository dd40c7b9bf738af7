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
//!
//! Runs and fuzzing stay inside the domain by default ([`Domain::Jdk`]): a Poly1305 call
//! length is passed as the JDK would pass it (its whole blocks: the contract ignores the tail,
//! so the expected result is the same), an MD5 call outside it is not run. `--domain wide`
//! ([`Domain::Wide`]) runs every call the lab's contract allows; a finding on a call outside
//! the domain is then class `out-of-domain` ([`crate::finding::Class::OutOfDomain`]), apart
//! from the kernel's failures.

use std::sync::atomic::{AtomicBool, Ordering};

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

/// Why a HotSpot-family vector makes a call outside the JDK's domain when run in `domain`, if
/// it does: an MD5 call entry's `(ofs, limit)`, or a Poly1305 call length (in [`Domain::Jdk`]
/// lengths are passed as [`jdk_length`], so only a negative or too large one stays outside).
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
            .map(|why| format!("poly1305_processBlocks with {why}")),
        _ => None,
    }
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
    fn poly1305_lengths_as_the_jdk_passes_them() {
        assert_eq!((jdk_length(0), jdk_length(15), jdk_length(17), jdk_length(-1)), (0, 0, 16, -1));
        assert_eq!(poly1305_outside(POLY1305_LENGTH_MAX), None);
        assert_eq!(poly1305_outside(POLY1305_LENGTH_MAX + 16).as_deref(), Some("length = 2147483648 > 2^31 - 16"));
        assert_eq!(poly1305_outside(-16).as_deref(), Some("length = -16 < 0"));
        assert_eq!(poly1305_outside(5).as_deref(), Some("length = 5 is not a multiple of 16"));
    }
}

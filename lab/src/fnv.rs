//! FNV-1a, 64-bit (Fowler, Noll, Vo; draft-eastlake-fnv): the one small, stable,
//! non-cryptographic hash the lab uses for cache keys, seed streams, case digests and the
//! protocol's checksum (which hashes u64 words, see [`crate::protocol::checksum`]).

/// The 64-bit offset basis.
pub const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// The 64-bit FNV prime.
pub const PRIME: u64 = 0x100_0000_01b3;

/// An FNV-1a hash fed piece by piece.
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(OFFSET)
    }
}

impl Fnv1a {
    /// Hashes `bytes` into the state.
    pub fn add(&mut self, bytes: &[u8]) {
        self.0 = bytes.iter().fold(self.0, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    }

    /// The hash of everything added so far.
    pub fn finish(self) -> u64 {
        self.0
    }
}

/// FNV-1a of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::default();
    h.add(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    /// Published FNV-1a 64 test values: "" and "a".
    #[test]
    fn known_values() {
        assert_eq!(super::fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}

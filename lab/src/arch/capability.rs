//! OpenSSL's capability words and the Poly1305 code paths they choose, as data: each
//! architecture's row ([`super::ArchSpec::capability`]) names its word, its size and, per
//! path, the bits `poly1305_init` (and the blocks functions) test, the symbol only that path's
//! code defines and the extensions it executes.

/// One architecture's capability word (`OPENSSL_ia32cap_P`, `OPENSSL_armcap_P`,
/// `OPENSSL_riscvcap_P`): what the lab defines when an object references it.
#[derive(Debug, Clone, Copy)]
pub struct CapabilitySpec {
    /// The symbol.
    pub symbol: &'static str,
    /// Its size in 32-bit words.
    pub words: usize,
    /// Where its layout is defined.
    pub source: &'static str,
    /// The Poly1305 paths, scalar first.
    pub paths: &'static [DispatchPath],
}

/// One code path of OpenSSL's Poly1305 and the capability bits that choose it.
#[derive(Debug, Clone, Copy)]
pub struct DispatchPath {
    /// Report name (`avx2`), appended to the variant's name (`my-poly@avx2`).
    pub name: &'static str,
    /// Bits set in the capability word: (32-bit word index, bits).
    pub bits: &'static [(usize, u32)],
    /// A symbol only this path's code defines (`poly1305_blocks_avx2`); `None`: always present.
    pub marker: Option<&'static str>,
    /// Extensions the path executes, by the arch row's names (`xsave`, `avx`, `avx2`).
    pub extensions: &'static [&'static str],
    /// Which perlasm test reads these bits.
    pub source: &'static str,
}

impl CapabilitySpec {
    /// The word's bytes for `path` (little-endian 32-bit words; all others zero).
    pub fn bytes(&self, path: &DispatchPath) -> Vec<u8> {
        let mut w = vec![0u32; self.words];
        for &(i, bits) in path.bits {
            if let Some(x) = w.get_mut(i) {
                *x |= bits;
            }
        }
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
}

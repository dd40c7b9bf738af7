//! Messages of vector entries: bytes from the file (`msg_hex`) or a generated pattern (`msg`),
//! read a range at a time so that a 256 MiB pattern is never held whole.

use sha2::{Digest, Sha256};

/// Largest message an entry may describe: 2^31 - 1 bytes, the largest Java `byte[]` (so every
/// DigestBase `ofs` and `limit` fits an `int`).
pub const MAX_MSG_LEN: u64 = i32::MAX as u64;

/// A message: literal bytes or a pattern generated on demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Bytes as written in the file (`msg_hex`).
    Bytes(Vec<u8>),
    /// `len` bytes, byte i = i mod 256.
    Counter {
        /// Length in bytes.
        len: usize,
    },
    /// `len` copies of `byte`.
    Repeat {
        /// The byte.
        byte: u8,
        /// Length in bytes.
        len: usize,
    },
    /// SHA-256(seed as u64 LE || block counter as u64 LE), blocks concatenated, truncated to
    /// `len`: easy to reproduce in any language (ci/tools/gen_vectors.py does).
    Random {
        /// The seed.
        seed: u64,
        /// Length in bytes.
        len: usize,
    },
}

impl Default for Message {
    fn default() -> Self {
        Message::Bytes(Vec::new())
    }
}

impl From<Vec<u8>> for Message {
    fn from(b: Vec<u8>) -> Self {
        Message::Bytes(b)
    }
}

impl Message {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Message::Bytes(b) => b.len(),
            Message::Counter { len } | Message::Repeat { len, .. } | Message::Random { len, .. } => *len,
        }
    }

    /// True for the empty message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes `start..start + len`, cut short at the end of the message (empty past it).
    pub fn read(&self, start: usize, len: usize) -> Vec<u8> {
        let start = start.min(self.len());
        let end = start.saturating_add(len).min(self.len());
        match self {
            Message::Bytes(b) => b[start..end].to_vec(),
            Message::Counter { .. } => (start..end).map(|i| i as u8).collect(),
            Message::Repeat { byte, .. } => vec![*byte; end - start],
            Message::Random { seed, .. } => generated(*seed, start, end),
        }
    }

    /// The whole message (for small messages and tests).
    pub fn to_vec(&self) -> Vec<u8> {
        self.read(0, self.len())
    }
}

/// Most bytes of generated messages [`generated`] keeps, and the longest read it keeps.
const GENERATED_CACHE_BYTES: usize = 64 << 20;
const GENERATED_CACHE_READ: usize = 1 << 20;

/// [`random_range`], generated once per process: every variant × backend of a run reads the
/// same ranges of the same messages (a case's reads depend only on its identity), and SHA-256
/// counter mode cost ~2% of a run. Reads up to [`GENERATED_CACHE_READ`] bytes are kept until
/// [`GENERATED_CACHE_BYTES`] are; the bytes are the same either way.
fn generated(seed: u64, start: usize, end: usize) -> Vec<u8> {
    use std::sync::{Arc, Mutex, OnceLock};
    type Cache = (usize, rustc_hash::FxHashMap<(u64, usize, usize), Arc<[u8]>>);
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    if end - start > GENERATED_CACHE_READ {
        return random_range(seed, start, end);
    }
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(hit) = cache.lock().ok().and_then(|c| c.1.get(&(seed, start, end)).cloned()) {
        return hit.to_vec();
    }
    let bytes = random_range(seed, start, end);
    if let Ok(mut c) = cache.lock() {
        if c.0 + bytes.len() <= GENERATED_CACHE_BYTES {
            c.0 += bytes.len();
            c.1.insert((seed, start, end), Arc::from(&bytes[..]));
        }
    }
    bytes
}

/// The `random` pattern's bytes `start..end`.
fn random_range(seed: u64, start: usize, end: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(end - start + 64);
    let first = start / 32;
    let mut counter = first as u64;
    while out.len() < end - first * 32 {
        let mut h = Sha256::new();
        h.update(seed.to_le_bytes());
        h.update(counter.to_le_bytes());
        out.extend_from_slice(&h.finalize());
        counter += 1;
    }
    out.truncate(end - first * 32);
    out.drain(..start - first * 32);
    out
}

/// The `random` pattern: SHA-256(seed LE || counter LE) for counter = 0, 1, ..., truncated.
pub fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    random_range(seed, 0, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_read_is_the_same_from_the_cache() {
        let m = Message::Random { seed: 11, len: 300 };
        let first = m.read(37, 200);
        assert_eq!(first, random_range(11, 37, 237));
        assert_eq!(m.read(37, 200), first, "the second read comes from the cache");
        assert_eq!(m.read(36, 200)[1..], first[..199]);
    }

    #[test]
    fn random_pattern_is_sha256_counter_mode() {
        let b = random_bytes(7, 40);
        let mut h = Sha256::new();
        h.update(7u64.to_le_bytes());
        h.update(0u64.to_le_bytes());
        assert_eq!(&b[..32], &h.finalize()[..]);
        assert_eq!(b.len(), 40);
    }

    #[test]
    fn ranges_of_every_pattern_agree_with_the_whole() {
        for m in [
            Message::Counter { len: 1000 },
            Message::Repeat { byte: 0x61, len: 1000 },
            Message::Random { seed: 3, len: 1000 },
            Message::Bytes((0..1000u32).map(|i| (i * 7) as u8).collect()),
        ] {
            let whole = m.to_vec();
            assert_eq!(whole.len(), 1000);
            for (s, n) in [(0, 0), (0, 1000), (31, 2), (33, 64), (999, 5), (1000, 3), (5000, 1)] {
                let end = (s + n).min(1000);
                let want = if s >= 1000 { Vec::new() } else { whole[s..end].to_vec() };
                assert_eq!(m.read(s, n), want, "{m:?} {s}+{n}");
            }
        }
        assert_eq!(Message::Counter { len: 300 }.read(256, 2), vec![0, 1]);
    }
}

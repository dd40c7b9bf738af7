//! MD5 (RFC 1321) with the HotSpot stub contracts: `implCompress` (one block),
//! `implCompressMB` (do-while over `ofs`/`limit`, returning the first unprocessed `ofs`), and a
//! full digest driven the way `sun.security.provider.DigestBase` drives them.

/// MD5 state: the four chaining words a, b, c, d (RFC 1321 §3.3).
pub type State = [u32; 4];

/// Initial state (RFC 1321 §3.3, "Initialize MD Buffer"), as little-endian words.
pub const IV: State = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// Bytes per block.
pub const BLOCK: usize = 64;

/// T[i] = floor(2^32 * |sin(i + 1)|) (RFC 1321 §3.4, the table in step 4).
const T: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501, 0x698098d8,
    0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340,
    0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87,
    0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c,
    0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039,
    0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92,
    0xffeff47d, 0x85845dd1, 0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391,
];

/// Per-round rotate amounts (RFC 1321 §3.4: S11..S44).
const S: [[u32; 4]; 4] = [[7, 12, 17, 22], [5, 9, 14, 20], [4, 11, 16, 23], [6, 10, 15, 21]];

/// `md5_implCompress`: processes one 64-byte block into `state` (RFC 1321 §3.4).
///
/// # Panics
/// If `block` is shorter than 64 bytes.
pub fn compress(state: &mut State, block: &[u8]) {
    let x: [u32; 16] =
        std::array::from_fn(|i| u32::from_le_bytes(block[4 * i..4 * i + 4].try_into().expect("4 bytes")));
    let [mut a, mut b, mut c, mut d] = *state;
    for i in 0..64 {
        let round = i / 16;
        let (f, k) = match round {
            0 => ((b & c) | (!b & d), i),
            1 => ((b & d) | (c & !d), (5 * i + 1) % 16),
            2 => (b ^ c ^ d, (3 * i + 5) % 16),
            _ => (c ^ (b | !d), (7 * i) % 16),
        };
        let t = a.wrapping_add(f).wrapping_add(x[k]).wrapping_add(T[i]).rotate_left(S[round][i % 4]);
        (a, d, c) = (d, c, b);
        b = b.wrapping_add(t);
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d]) {
        *s = s.wrapping_add(v);
    }
}

/// `md5_implCompressMB`: `do { compress(buf); buf += 64; ofs += 64 } while (ofs <= limit)`;
/// returns the first unprocessed `ofs` (wrapping like a Java `int`), or `None` when `buf` holds
/// fewer blocks than the loop processes. `limit` is the last valid block start.
pub fn compress_mb(state: &mut State, buf: &[u8], ofs: i32, limit: i32) -> Option<i32> {
    let blocks = mb_blocks(ofs, limit);
    if buf.len() / BLOCK < blocks {
        return None;
    }
    for block in buf.chunks_exact(BLOCK).take(blocks) {
        compress(state, block);
    }
    Some((i64::from(ofs) + (blocks * BLOCK) as i64) as i32)
}

/// Number of blocks `implCompressMB(ofs, limit)` processes (at least one: it is a do-while).
/// Counted without wrapping: a Java caller's `limit` is at most 2^31 - 65.
pub fn mb_blocks(ofs: i32, limit: i32) -> usize {
    if limit < ofs {
        1
    } else {
        ((i64::from(limit) - i64::from(ofs)) / BLOCK as i64 + 1) as usize
    }
}

/// One kernel call of a DigestBase-style digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `implCompressMB(msg + start, state, ofs, limit)`, expecting it to return `ret`.
    Mb {
        /// Byte offset of `buf` in the message (DigestBase passes the same number as `ofs`).
        start: usize,
        /// `ofs` argument.
        ofs: i32,
        /// `limit` argument: `ofs + len - 64`, the last valid block start.
        limit: i32,
        /// Expected return: the first unprocessed `ofs`.
        ret: i32,
    },
    /// `implCompress` over a block DigestBase assembled in its own buffer (update pieces that
    /// straddle blocks, or padding).
    Single {
        /// The block.
        block: [u8; BLOCK],
        /// How many blocks the buffer assembled before this one.
        index: usize,
    },
}

impl Step {
    /// Message bytes an `Mb` step reads (`start..end`); `None` for a `Single`.
    pub fn mb_range(&self) -> Option<std::ops::Range<usize>> {
        match *self {
            Step::Mb { start, ofs, ret, .. } => Some(start..start + (i64::from(ret) - i64::from(ofs)) as usize),
            Step::Single { .. } => None,
        }
    }
}

/// How `sun.security.provider.DigestBase` digests a message of `len` bytes fed in `updates`
/// pieces (empty: one update), each piece longer than `max_piece` fed as several updates of
/// at most `max_piece` (a multiple of 64) bytes, as a stream would. Each `engineUpdate` first
/// tops up its 64-byte buffer (`implCompress` when full), then hands the remaining whole blocks
/// to `implCompressMB(b, ofs, ofs + len - 64)`, then keeps the rest; `MD5.implDigest` pads
/// (RFC 1321 §3.1-3.2) through the buffer. The steps come one at a time; `read(start, n)` gives
/// message bytes, and is asked only for the bytes that go through the buffer.
pub struct DigestSteps<'a> {
    read: Box<dyn Fn(usize, usize) -> Vec<u8> + 'a>,
    len: usize,
    pieces: std::vec::IntoIter<usize>,
    max_piece: usize,
    /// Bytes of the current piece not yet fed.
    piece_left: usize,
    pos: usize,
    buffer: Vec<u8>,
    assembled: usize,
    queue: std::collections::VecDeque<Step>,
    padded: bool,
}

impl<'a> DigestSteps<'a> {
    /// The steps for a message of `len` bytes read through `read` (see the type's docs).
    pub fn new(len: usize, updates: &[usize], max_piece: usize, read: impl Fn(usize, usize) -> Vec<u8> + 'a) -> Self {
        let pieces = if updates.is_empty() { vec![len] } else { updates.to_vec() };
        DigestSteps {
            read: Box::new(read),
            len,
            pieces: pieces.into_iter(),
            max_piece: (max_piece / BLOCK * BLOCK).max(BLOCK),
            piece_left: 0,
            pos: 0,
            buffer: Vec::with_capacity(BLOCK),
            assembled: 0,
            queue: Default::default(),
            padded: false,
        }
    }

    /// Appends bytes to the buffer, compressing it each time it fills.
    fn top_up(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.buffer.push(b);
            if self.buffer.len() == BLOCK {
                let mut block = [0u8; BLOCK];
                block.copy_from_slice(&self.buffer);
                self.buffer.clear();
                self.queue.push_back(Step::Single { block, index: self.assembled });
                self.assembled += 1;
            }
        }
    }

    /// One `engineUpdate(b, pos, n)`.
    fn update(&mut self, n: usize) {
        let (mut ofs, mut len) = (self.pos, n.min(self.len.saturating_sub(self.pos)));
        self.pos += len;
        if !self.buffer.is_empty() {
            let k = len.min(BLOCK - self.buffer.len());
            let bytes = (self.read)(ofs, k);
            self.top_up(&bytes);
            ofs += k;
            len -= k;
        }
        if len >= BLOCK {
            let whole = len / BLOCK * BLOCK;
            let int = |x: usize| i32::try_from(x).unwrap_or(i32::MAX);
            let step = Step::Mb { start: ofs, ofs: int(ofs), limit: int(ofs + len - BLOCK), ret: int(ofs + whole) };
            self.queue.push_back(step);
            ofs += whole;
            len -= whole;
        }
        let rest = (self.read)(ofs, len);
        self.buffer.extend_from_slice(&rest);
    }

    /// `implDigest`: 0x80, zeros to 56 mod 64, the bit length (RFC 1321 §3.1-3.2).
    fn pad(&mut self) {
        self.top_up(&[0x80]);
        let zeros = (BLOCK + 56 - self.buffer.len()) % BLOCK;
        self.top_up(&vec![0u8; zeros]);
        self.top_up(&(self.len as u64).wrapping_mul(8).to_le_bytes());
        self.padded = true;
    }
}

impl Iterator for DigestSteps<'_> {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        loop {
            if let Some(s) = self.queue.pop_front() {
                return Some(s);
            }
            if self.piece_left == 0 {
                match self.pieces.next() {
                    Some(p) => self.piece_left = p,
                    None if !self.padded => self.pad(),
                    None => return None,
                }
                continue;
            }
            let n = self.piece_left.min(self.max_piece);
            self.piece_left -= n;
            self.update(n);
        }
    }
}

/// Every step of [`DigestSteps`] over `msg` in `updates` pieces, with no piece limit.
pub fn digest_plan_updates(msg: &[u8], updates: &[usize]) -> Vec<Step> {
    DigestSteps::new(msg.len(), updates, usize::MAX, |s, n| msg[s..s + n].to_vec()).collect()
}

/// [`digest_plan_updates`] with the whole message in one update.
pub fn digest_plan(msg: &[u8]) -> Vec<Step> {
    digest_plan_updates(msg, &[])
}

/// Runs `steps` from `state` through the reference; `read(start, n)` gives message bytes.
/// Returns `None` when an `Mb` step's bytes are missing.
pub fn run_steps(
    state: &mut State,
    steps: impl Iterator<Item = Step>,
    read: impl Fn(usize, usize) -> Vec<u8>,
) -> Option<()> {
    for step in steps {
        match step {
            Step::Mb { start, ofs, limit, .. } => {
                let n = mb_blocks(ofs, limit) * BLOCK;
                compress_mb(state, &read(start, n), ofs, limit)?;
            }
            Step::Single { block, .. } => compress(state, &block),
        }
    }
    Some(())
}

/// MD5 of `msg` fed in `updates` pieces, computed through the plan and the reference compress.
/// `updates` must sum to `msg.len()` (extra pieces are cut at the end of the message).
pub fn digest_updates(msg: &[u8], updates: &[usize]) -> [u8; 16] {
    let mut state = IV;
    let steps =
        DigestSteps::new(msg.len(), updates, usize::MAX, |s, n| msg[s.min(msg.len())..(s + n).min(msg.len())].to_vec());
    let _ = run_steps(&mut state, steps, |s, n| msg[s.min(msg.len())..(s + n).min(msg.len())].to_vec());
    state_to_digest(&state)
}

/// MD5 of `msg` (one update).
pub fn digest(msg: &[u8]) -> [u8; 16] {
    digest_updates(msg, &[])
}

/// The 16-byte digest of a final state (RFC 1321 §3.5: a, b, c, d little-endian).
pub fn state_to_digest(state: &State) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, w) in state.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// State words from 16 little-endian bytes (the `int[4]` the kernel updates).
pub fn state_from_bytes(b: &[u8]) -> State {
    std::array::from_fn(|i| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().expect("4 bytes")))
}

/// The 16 little-endian bytes of state words.
pub fn state_to_bytes(s: &State) -> [u8; 16] {
    state_to_digest(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use md5::Digest as _;

    #[test]
    fn rfc1321_a5_abc() {
        assert_eq!(hex::encode(digest(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
    }

    #[test]
    fn matches_rustcrypto_md5_for_every_length_to_300() {
        let msg: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in 0..=msg.len() {
            let ours = digest(&msg[..n]);
            let theirs: [u8; 16] = md5::Md5::digest(&msg[..n]).into();
            assert_eq!(ours, theirs, "length {n}");
        }
    }

    #[test]
    fn mb_stops_at_last_block_start_not_after_limit() {
        // limit - ofs = 65: blocks at 0 and 64 are processed (64 <= 65), 128 is not.
        assert_eq!(mb_blocks(0, 65), 2);
        let buf = [0x5au8; 192];
        let mut s = IV;
        assert_eq!(compress_mb(&mut s, &buf, 0, 65), Some(128));
        let mut t = IV;
        compress(&mut t, &buf[..64]);
        compress(&mut t, &buf[64..128]);
        assert_eq!(s, t);
        // limit < ofs still processes one block (do-while).
        assert_eq!(compress_mb(&mut IV.clone(), &buf, 100, 50), Some(164));
        // Too short a buffer, or the ofs near 2^31: an answer, never a panic.
        assert_eq!(compress_mb(&mut IV.clone(), &buf, 0, 1000), None);
        assert_eq!(compress_mb(&mut IV.clone(), &buf, 2147483600, 2147483647), Some(-2147483632));
    }

    #[test]
    fn uneven_updates_use_both_stubs_and_match_rustcrypto() {
        let msg: Vec<u8> = (0..5000u32).map(|i| (i * 31 + 7) as u8).collect();
        let pieces = [1, 63, 64, 65, 127, 4096, 0, 584];
        assert_eq!(pieces.iter().sum::<usize>(), msg.len());
        let steps = digest_plan_updates(&msg, &pieces);
        assert!(steps.iter().any(|s| matches!(s, Step::Mb { ofs, .. } if *ofs > 0)), "MB with a non-zero ofs");
        assert!(steps.iter().filter(|s| matches!(s, Step::Single { .. })).count() >= 3);
        let theirs: [u8; 16] = md5::Md5::digest(&msg).into();
        assert_eq!(digest_updates(&msg, &pieces), theirs);
    }

    #[test]
    fn plan_uses_mb_for_the_bulk_and_single_for_padding() {
        let steps = digest_plan(&[0u8; 130]);
        assert_eq!(steps[0], Step::Mb { start: 0, ofs: 0, limit: 66, ret: 128 });
        assert!(matches!(steps[1], Step::Single { index: 0, .. }));
        assert_eq!(steps.len(), 2);
        let steps = digest_plan(&[0u8; 56]);
        assert_eq!(steps.len(), 2, "56 bytes need two padding blocks");
    }

    #[test]
    fn long_pieces_are_fed_in_chunks_with_the_same_digest() {
        let msg: Vec<u8> = (0..10_000u32).map(|i| (i * 11 + 5) as u8).collect();
        let steps: Vec<Step> = DigestSteps::new(msg.len(), &[3, 9997], 1024, |s, n| msg[s..s + n].to_vec()).collect();
        let mbs: Vec<_> = steps.iter().filter_map(Step::mb_range).collect();
        assert!(mbs.len() >= 9 && mbs.iter().all(|r| r.len() <= 1024), "{mbs:?}");
        let mut state = IV;
        run_steps(&mut state, steps.into_iter(), |s, n| msg[s..s + n].to_vec()).unwrap();
        let theirs: [u8; 16] = md5::Md5::digest(&msg).into();
        assert_eq!(state_to_digest(&state), theirs);
    }
}

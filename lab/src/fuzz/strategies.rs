//! proptest strategies per contract: the cases a campaign draws (edge-weighted bytes, states,
//! limbs, split points), shared with `cargo test`.

use super::random_bytes;
use crate::contract::Family;
use crate::domain::Domain;
use crate::reference::{md5, poly1305};
use crate::variant::Kernel;
use crate::vectors::{Body, Md5Call, Md5Stub, Poly1305Call, Vector};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// A fuzz case: an input vector (with its one offset), built so the reference is the oracle.
pub type Case = Vector;

pub(super) fn case(name: &str, offset: usize, body: Body) -> Case {
    Vector { index: 0, name: name.into(), source: String::new(), offsets: vec![offset], body }
}

/// Bytes weighted towards all-0xFF and all-zero runs, which exercise carries.
pub(super) fn bytes(len: usize) -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        6 => random_bytes::exactly(len),
        1 => Just(vec![0xff; len]),
        1 => Just(vec![0; len]),
    ]
    .boxed()
}

/// One 64-byte block, weighted towards all-0xFF and all-zero.
pub(super) fn block64() -> BoxedStrategy<Vec<u8>> {
    bytes(64)
}

/// MD5 stub calls: any state, 1..=64 blocks weighted to 1, 2 and 16, offsets 0..63,
/// `(ofs, limit)` with `limit - ofs` often not a multiple of 64 (RFC 1321 §3.4; docs/DESIGN.md MB).
///
/// Edge arms (`md5_state`, [`Md5Anchor`]): state words 0 / 0xffffffff / the sign bit, and
/// `(ofs, limit)` at the `int` edges: `limit` at the largest valid value (`i32::MAX - 64`,
/// DigestBase's `ofs + len <= Integer.MAX_VALUE`), `ofs` at `i32::MIN`, and `ofs` crossing 0
/// (where a kernel that compares the 64-bit registers without sign-extending goes wrong).
///
/// The block count is its own value (a union of fixed counts, which proptest shrinks towards
/// the first arm at once), and the input cycles through up to 8 generated blocks: shrinking a
/// 16-block case then takes a few steps, not thousands of byte-by-byte ones.
pub fn md5_call() -> BoxedStrategy<Case> {
    md5_call_in(Domain::Wide)
}

/// [`md5_call`] within `domain`: [`Domain::Jdk`] keeps `0 <= ofs <= limit <= 2^31 - 65`
/// ([`crate::domain`]): `ofs` in [0, 2^30), and of the edge arms `ofs = 0` and `limit` at its
/// largest value.
pub fn md5_call_in(domain: Domain) -> BoxedStrategy<Case> {
    let count = prop_oneof![3 => Just(1usize), 2 => Just(2usize), 1 => Just(16usize), 2 => 1usize..=64];
    let blocks = proptest::collection::vec(block64(), 1..=8);
    let ofs = match domain {
        Domain::Wide => (md5_anchor(), -(1i32 << 30)..(1i32 << 30)),
        Domain::Jdk => (md5_anchor_jdk(), 0..(1i32 << 30)),
    };
    (count, blocks, md5_state(), 0usize..64, ofs, 0i32..64, prop::bool::weighted(0.2))
        .prop_map(|(count, blocks, state, offset, (anchor, ofs), extra, single)| {
            let (stub, n) = if single { (Md5Stub::Compress, 1) } else { (Md5Stub::CompressMb, count) };
            let (ofs, limit) = anchor.ofs_limit(ofs, n, extra);
            let input: Vec<u8> = (0..n).flat_map(|i| blocks[i % blocks.len()].iter().copied()).collect();
            case(
                "md5 call",
                offset,
                Body::Md5Call(Md5Call { stub, state, input: input.into(), ofs, limit, expect: Default::default() }),
            )
        })
        .boxed()
}

/// Where an MD5 call's `(ofs, limit)` sit in the `int` range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Md5Anchor {
    /// `ofs` anywhere in ±2^30 (the random value).
    Anywhere,
    /// `limit` at the largest valid value, `i32::MAX - 64` (`ofs + 64` does not overflow).
    LimitAtMax,
    /// `ofs` at `i32::MIN`.
    OfsAtMin,
    /// `ofs` just below 0 (-64, -1): the sign changes inside the call.
    CrossingZero,
    /// `ofs` = 0.
    Zero,
}

impl Md5Anchor {
    /// `(ofs, limit)` for `n` blocks with `extra` bytes (< 64) of slack past the last block
    /// start; `ofs` is the random value [`Md5Anchor::Anywhere`] uses.
    pub fn ofs_limit(self, ofs: i32, n: usize, extra: i32) -> (i32, i32) {
        let span = (n as i32 - 1) * 64 + extra;
        match self {
            Md5Anchor::Anywhere => (ofs, ofs + span),
            Md5Anchor::LimitAtMax => (i32::MAX - 64 - span, i32::MAX - 64),
            Md5Anchor::OfsAtMin => (i32::MIN, i32::MIN + span),
            Md5Anchor::CrossingZero => {
                let o = if ofs & 1 == 0 { -64 } else { -1 };
                (o, o + span)
            }
            Md5Anchor::Zero => (0, span),
        }
    }
}

pub(super) fn md5_anchor() -> BoxedStrategy<Md5Anchor> {
    prop_oneof![
        6 => Just(Md5Anchor::Anywhere),
        1 => Just(Md5Anchor::Zero),
        1 => Just(Md5Anchor::LimitAtMax),
        1 => Just(Md5Anchor::OfsAtMin),
        1 => Just(Md5Anchor::CrossingZero),
    ]
    .boxed()
}

/// [`md5_anchor`]'s arms inside the JDK's call domain.
fn md5_anchor_jdk() -> BoxedStrategy<Md5Anchor> {
    prop_oneof![
        6 => Just(Md5Anchor::Anywhere),
        1 => Just(Md5Anchor::Zero),
        1 => Just(Md5Anchor::LimitAtMax),
    ]
    .boxed()
}

/// An MD5 state: random words, or each word at an edge (0, 0xffffffff, the sign bit, the IV's).
pub(super) fn md5_state() -> BoxedStrategy<[u32; 4]> {
    let edge = prop::sample::select(vec![0u32, 0xffff_ffff, 0x8000_0000, 0x7fff_ffff, 1, md5::IV[0], md5::IV[2]]);
    prop_oneof![
        3 => any::<[u32; 4]>(),
        1 => prop::array::uniform4(edge),
        1 => prop::sample::select(vec![[0u32; 4], [0xffff_ffff; 4]]),
    ]
    .boxed()
}

/// Whole MD5 digests, DigestBase-driven: 0..=8 KiB with lengths weighted to 55, 56, 63, 64, 65
/// mod 64 (the padding edges), fed in random update pieces. Built from whole blocks plus a tail,
/// without `prop_flat_map`, so shrinking drops blocks and shortens the tail.
pub fn md5_digest() -> BoxedStrategy<Case> {
    let edge_tail = prop::sample::select(vec![55usize, 56, 63, 64, 65]);
    let edges = (proptest::collection::vec(block64(), 0..=126), edge_tail, random_bytes::exactly(65))
        .prop_map(|(blocks, r, tail)| [blocks.concat(), tail[..r].to_vec()].concat());
    let msg = prop_oneof![2 => random_bytes::between(0..=8192), 3 => edges];
    (msg, proptest::collection::vec(0usize..=300, 0..6), 0usize..64)
        .prop_map(|(msg, cuts, offset)| {
            let updates = pieces(msg.len(), &cuts);
            let digest = md5::digest_updates(&msg, &updates);
            case("md5 digest", offset, Body::Md5Digest { msg: msg.into(), digest, updates })
        })
        .boxed()
}

/// Update piece sizes from cut lengths: the cuts, then the rest (empty cuts: one update).
pub(super) fn pieces(len: usize, cuts: &[usize]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut left = len;
    for &c in cuts {
        let c = c.min(left);
        out.push(c);
        left -= c;
    }
    if !out.is_empty() {
        out.push(left);
    }
    out
}

/// A limb at 0, at its maximum, or anywhere below the bound.
pub(super) fn limb(bound: u64) -> BoxedStrategy<u64> {
    prop_oneof![1 => Just(0u64), 2 => Just(bound - 1), 3 => 0..bound].boxed()
}

/// A limb at one of its edges: 0, 1, half the bound, the bound minus 1 (and for limb 4, whose
/// bound is 2^27, also the canonical maximum 2^26 - 1 and 2^26).
pub(super) fn limb_edge(bound: u64) -> BoxedStrategy<u64> {
    let mut v = vec![0, 1, bound / 2 - 1, bound / 2, bound - 1];
    if bound > 1 << 26 {
        v.extend([(1 << 26) - 1, 1 << 26, 3 << 24]);
    }
    prop::sample::select(v).boxed()
}

/// Accumulator values at and near the carry edges, as canonical limbs: around p = 2^130 - 5
/// (p - 1 .. p + 4 = 2^130 - 1), 2^130, 2p, 2^131 - 1 (every limb at its bound), 2^128 ± 1,
/// and the small values 0, 1, 5 (Limbs26::from_value puts everything above 2^104 in limb 4).
pub fn edge_accumulators() -> Vec<poly1305::Limbs26> {
    use num_bigint::BigUint;
    let p = poly1305::p();
    let two = |e: u32| BigUint::from(1u8) << e;
    let one = BigUint::from(1u8);
    let mut values = vec![BigUint::default(), one.clone(), BigUint::from(5u8)];
    values.extend((0u8..=5).map(|d| &p - &one + d));
    values.extend([two(130) - 2u8, two(130), two(130) + 4u8, two(130) + 5u8]);
    values.extend([&p * 2u8 - 1u8, &p * 2u8, two(131) - 7u8, two(131) - 6u8, two(131) - 5u8, two(131) - 1u8]);
    values.extend([two(128) - 1u8, two(128), two(129) - 1u8]);
    values.iter().map(poly1305::Limbs26::from_value).collect()
}

/// An accumulator: random limbs with their bounds weighted (the kernel's whole accumulator
/// range, [`crate::domain::acc_range`], in the JDK's domain; the lab's contract range in
/// `--domain wide`), a value at a carry edge ([`edge_accumulators`]), or every limb at one of
/// its edges.
pub(super) fn poly1305_acc() -> BoxedStrategy<poly1305::Limbs26> {
    let range = match crate::domain::current() {
        Domain::Jdk => crate::domain::acc_range(),
        Domain::Wide => crate::domain::AccRange::Lab,
    };
    let b = 1u64 << 26;
    let top = range.top_limb_max() + 1;
    let random =
        (limb(b), limb(b), limb(b), limb(b), limb(top)).prop_map(|(a, b, c, d, e)| poly1305::Limbs26([a, b, c, d, e]));
    let edges = (limb_edge(b), limb_edge(b), limb_edge(b), limb_edge(b), limb_edge(top))
        .prop_map(|(a, b, c, d, e)| poly1305::Limbs26([a, b, c, d, e]));
    let carry_edges: Vec<_> = edge_accumulators().into_iter().filter(|a| range.first_outside(a).is_none()).collect();
    prop_oneof![4 => random, 3 => prop::sample::select(carry_edges), 1 => edges].boxed()
}

/// `r` before clamping: the largest clamp, 0, 1 (acc * r = acc: the block sum reaches the
/// reduction unchanged), tiny values, or random.
pub(super) fn poly1305_r() -> BoxedStrategy<u128> {
    prop_oneof![
        2 => Just(poly1305::CLAMP),
        1 => Just(0u128),
        3 => Just(1u128),
        1 => 0u128..16,
        1 => prop::sample::select(vec![0x0fff_fffc_u128 << 96, 0x0fff_fffc_0fff_fffc_0fff_fffc_0fff_fffc, 1 << 26, 5]),
        4 => any::<u128>().prop_map(|r| r & poly1305::CLAMP),
    ]
    .boxed()
}

/// One 16-byte block, weighted towards all-0xFF (the carry edge), all-zero, and the blocks
/// next to them (2^128 - 5, 2^128 - 2, 1).
pub(super) fn block16() -> BoxedStrategy<[u8; 16]> {
    let edge = |low: u8| {
        let mut b = [0xffu8; 16];
        b[0] = low;
        b
    };
    let mut one = [0u8; 16];
    one[0] = 1;
    prop_oneof![
        4 => any::<[u8; 16]>(),
        2 => Just([0xff; 16]),
        2 => Just([0; 16]),
        1 => prop::sample::select(vec![edge(0xfb), edge(0xfe), one]),
    ]
    .boxed()
}

/// Poly1305 call chains: accumulators across the whole contract range and at its carry edges,
/// r clamped (largest, 0, 1, tiny, random), 0..=256 blocks (often 1 or 2) plus every tail
/// length 0..15, random 16-byte splits and short calls. Blocks are separate values so that
/// shrinking drops and simplifies whole blocks.
pub fn poly1305_call() -> BoxedStrategy<Case> {
    let blocks = prop_oneof![
        2 => proptest::collection::vec(block16(), 1..=2),
        2 => proptest::collection::vec(block16(), 0..=4),
        2 => proptest::collection::vec(block16(), 0..=256)
    ];
    let tail = random_bytes::between(0..=15);
    let cuts = proptest::collection::vec(0usize..=40, 0..5);
    (poly1305_acc(), poly1305_r(), blocks, tail, cuts, 0usize..16)
        .prop_map(|(acc, r, blocks, tail, cuts, offset)| {
            let input: Vec<u8> = blocks.iter().flatten().chain(&tail).copied().collect();
            let lengths = chain_lengths(input.len(), &cuts);
            let r = poly1305::clamp_r(&r.to_le_bytes());
            case(
                "poly1305 call",
                offset,
                Body::Poly1305Call(Poly1305Call { acc, r, input: input.into(), lengths, expect: Default::default() }),
            )
        })
        .boxed()
}

/// `length` arguments for a chain: each cut (in blocks) becomes a call of that many blocks, a
/// cut of 0 a call with a short length (acc untouched); the last call takes the rest.
pub(super) fn chain_lengths(len: usize, cuts: &[usize]) -> Vec<i64> {
    let mut out = Vec::new();
    let mut left = len;
    for &c in cuts {
        let take = (c * 16).min(left / 16 * 16);
        out.push(if c == 0 { (left % 16) as i64 } else { take as i64 });
        left -= if c == 0 { 0 } else { take };
    }
    out.push(left as i64);
    out
}

/// The strategy for a kernel: MD5 mixes stub calls and whole digests.
pub fn strategy(kernel: Kernel) -> BoxedStrategy<Case> {
    match kernel {
        Kernel::Md5 => prop_oneof![3 => md5_call(), 1 => md5_digest()].boxed(),
        Kernel::Poly1305 => poly1305_call(),
    }
}

/// The strategy for a kernel called through `family`'s contract ([`crate::contract`]). The
/// OpenSSL family adds whole tags to Poly1305 ([`poly1305_tag`]): their tails reach
/// `poly1305_blocks` with padbit 0, the call entries with padbit 1. MD5 stub calls become
/// `md5_block_data_order` calls of the same blocks.
///
/// HotSpot's MD5 calls stay inside the JDK's call domain unless this process runs
/// `--domain wide` ([`crate::domain::current`]); Poly1305 lengths are made the JDK's by the
/// planner ([`crate::domain::jdk_length`]).
pub fn strategy_for(kernel: Kernel, family: Family) -> BoxedStrategy<Case> {
    match (kernel, family) {
        (Kernel::Poly1305, Family::OpenSsl) => prop_oneof![3 => poly1305_call(), 2 => poly1305_tag()].boxed(),
        (Kernel::Md5, Family::HotSpot) if crate::domain::current() == Domain::Jdk => {
            prop_oneof![3 => md5_call_in(Domain::Jdk), 1 => md5_digest()].boxed()
        }
        _ => strategy(kernel),
    }
}

/// Whole Poly1305 tags: any key, 0..=20 whole blocks (weighted to all-0xFF and all-zero
/// blocks) and every tail length 0..15; the tag from the reference ([`poly1305::tag`]).
pub fn poly1305_tag() -> BoxedStrategy<Case> {
    let blocks = proptest::collection::vec(block16(), 0..=20);
    let tail = random_bytes::between(0..=15);
    let key = prop_oneof![3 => any::<[u8; 32]>(), 1 => Just([0xff; 32]), 1 => Just([0; 32])];
    (key, blocks, tail, 0usize..16)
        .prop_map(|(key, blocks, tail, offset)| {
            let msg: Vec<u8> = blocks.iter().flatten().chain(&tail).copied().collect();
            let tag = poly1305::tag(&key, &msg);
            case("poly1305 tag", offset, Body::Poly1305Tag { key, msg: msg.into(), tag })
        })
        .boxed()
}

/// A deterministic proptest runner for `seed`.
pub fn runner(seed: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(
        Config { max_shrink_iters: 4096, ..Config::default() },
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

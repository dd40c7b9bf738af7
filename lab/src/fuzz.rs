//! Differential fuzzing: proptest strategies per contract, cases run in batches through the
//! guest-side driver, every call compared with the portable reference (the comparison is
//! [`crate::cases::verdict::check`], the same as for vectors), failures shrunk with proptest's value trees and
//! written as vector files that `lab run --vectors FILE` replays.
//!
//! The strategies are shared by `lab fuzz` and `cargo test`.

mod random_bytes;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::abi::Abi;
use crate::backend::{self, Backend, BackendError};
use crate::batch::{BatchBuilder, Placement};
use crate::cases::plan::{self, CasePlan, Stubs};
use crate::cases::verdict;
use crate::contract::Family;
use crate::domain::Domain;
use crate::finding::{Class, Finding};
use crate::image::Image;
use crate::reference::{md5, poly1305};
use crate::variant::{Kernel, Variant};
use crate::vectors::{Body, Md5Call, Md5Stub, Poly1305Call, Vector};

/// A fuzz case: an input vector (with its one offset), built so the reference is the oracle.
pub type Case = Vector;

fn case(name: &str, offset: usize, body: Body) -> Case {
    Vector { index: 0, name: name.into(), source: String::new(), offsets: vec![offset], body }
}

/// Bytes weighted towards all-0xFF and all-zero runs, which exercise carries.
fn bytes(len: usize) -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        6 => random_bytes::exactly(len),
        1 => Just(vec![0xff; len]),
        1 => Just(vec![0; len]),
    ]
    .boxed()
}

/// One 64-byte block, weighted towards all-0xFF and all-zero.
fn block64() -> BoxedStrategy<Vec<u8>> {
    bytes(64)
}

/// MD5 stub calls: any state, 1..=64 blocks weighted to 1, 2 and 16, offsets 0..63,
/// `(ofs, limit)` with `limit - ofs` often not a multiple of 64 (RFC 1321 §3.4; docs/DESIGN.md MB).
///
/// Edge arms ([`md5_state`], [`Md5Anchor`]): state words 0 / 0xffffffff / the sign bit, and
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

fn md5_anchor() -> BoxedStrategy<Md5Anchor> {
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
fn md5_state() -> BoxedStrategy<[u32; 4]> {
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
fn pieces(len: usize, cuts: &[usize]) -> Vec<usize> {
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
fn limb(bound: u64) -> BoxedStrategy<u64> {
    prop_oneof![1 => Just(0u64), 2 => Just(bound - 1), 3 => 0..bound].boxed()
}

/// A limb at one of its edges: 0, 1, half the bound, the bound minus 1 (and for limb 4, whose
/// bound is 2^27, also the canonical maximum 2^26 - 1 and 2^26).
fn limb_edge(bound: u64) -> BoxedStrategy<u64> {
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

/// An accumulator: random limbs with their bounds weighted (the contract's whole range), a
/// value at a carry edge ([`edge_accumulators`]), or every limb at one of its edges.
fn poly1305_acc() -> BoxedStrategy<poly1305::Limbs26> {
    let b = 1u64 << 26;
    let random = (limb(b), limb(b), limb(b), limb(b), limb(2 * b))
        .prop_map(|(a, b, c, d, e)| poly1305::Limbs26([a, b, c, d, e]));
    let edges = (limb_edge(b), limb_edge(b), limb_edge(b), limb_edge(b), limb_edge(2 * b))
        .prop_map(|(a, b, c, d, e)| poly1305::Limbs26([a, b, c, d, e]));
    prop_oneof![4 => random, 3 => prop::sample::select(edge_accumulators()), 1 => edges].boxed()
}

/// `r` before clamping: the largest clamp, 0, 1 (acc * r = acc: the block sum reaches the
/// reduction unchanged), tiny values, or random.
fn poly1305_r() -> BoxedStrategy<u128> {
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
fn block16() -> BoxedStrategy<[u8; 16]> {
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
fn chain_lengths(len: usize, cuts: &[usize]) -> Vec<i64> {
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

/// Where and what to run.
pub struct Target<'a> {
    /// The backend, open on `image`.
    pub backend: &'a mut dyn Backend,
    /// The variant the image was built for.
    pub variant: &'static Variant,
    /// The image.
    pub image: &'a Image,
    /// Seed for poison values and argument garbage.
    pub seed: u64,
}

/// Runs `cases` in one batch and returns each case's findings (empty = agrees with the
/// reference). Each case runs twice ([`plan::plan_vector`]): guarded against guard pages, and
/// packed at its offset; a case's findings are those of both.
///
/// # Errors
/// When the backend itself fails or the batch does not fit the arena.
pub fn run_cases(t: &mut Target, cases: &[Case]) -> Result<Vec<Vec<Finding>>, BackendError> {
    let entry = Stubs::of(t.image);
    let abi = Abi::of(t.variant.arch);
    // The thread's builder and payload from the batch before: no fresh memory per batch.
    let mut b = BatchBuilder::take_spare(abi);
    let mut rng = ChaCha8Rng::seed_from_u64(t.seed);
    let plans: Vec<Vec<CasePlan>> =
        cases.iter().map(|c| plan::plan_vector(&mut b, &entry, &mut rng, "fuzz", c, Placement::End)).collect();
    let spare = crate::batch::ZeroedPayload::take_spare();
    let arena = t.image.arena()?;
    let batch = b.layout_and_clear(arena, spare).map_err(|e| BackendError::Unsupported(e.to_string()));
    b.keep_as_spare();
    let batch = batch?;
    let run = backend::run_batch(t.backend, &batch)?;
    let findings = |ps: &Vec<CasePlan>| {
        let mut all: Vec<Finding> = Vec::new();
        for f in ps.iter().flat_map(|p| verdict::check(p, &batch, &run, abi, t.image)) {
            // The guarded and the offset case usually fail alike: say it once.
            if !all.iter().any(|g| g.text == f.text) {
                all.push(f);
            }
        }
        all
    };
    let out = plans.iter().map(findings).collect();
    t.backend.recycle(run.resp);
    batch.into_payload().keep_as_spare();
    Ok(out)
}

/// Shrinks a failing value tree to a minimal failing case (proptest's simplify/complicate
/// loop), evaluating each candidate on the backend. Returns the smallest failing case found
/// and its findings, and whether shrinking stopped at `deadline` (then the case is failing but
/// maybe not minimal). Each candidate is one batch, so the deadline is kept to within one
/// batch's budget (a hanging kernel makes every candidate cost the whole budget).
///
/// # Errors
/// When the backend fails.
pub fn shrink(
    t: &mut Target,
    mut tree: impl ValueTree<Value = Case>,
    findings: Vec<Finding>,
    max_iters: u32,
    deadline: Option<std::time::Instant>,
) -> Result<(Case, Vec<Finding>, bool), BackendError> {
    let mut best = (tree.current(), findings);
    let mut iters = 0;
    if !tree.simplify() {
        return Ok((best.0, best.1, false));
    }
    while iters < max_iters {
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Ok((best.0, best.1, true));
        }
        iters += 1;
        let candidate = tree.current();
        let f = run_cases(t, std::slice::from_ref(&candidate))?.remove(0);
        // A union can "simplify" into a bigger value (another arm); only smaller failures count.
        let more = if f.is_empty() || blocks_of(&candidate) > blocks_of(&best.0) {
            tree.complicate()
        } else {
            best = (candidate, f);
            tree.simplify()
        };
        if !more {
            break;
        }
    }
    Ok((best.0, best.1, false))
}

/// How big a case is, for messages: blocks of its input.
pub fn blocks_of(c: &Case) -> usize {
    match &c.body {
        Body::Md5Digest { msg, .. } => msg.len().div_ceil(64),
        Body::Md5Call(m) => m.input.len() / 64,
        Body::Poly1305Tag { msg, .. } => msg.len().div_ceil(16),
        Body::Poly1305Call(p) => p.input.len().div_ceil(16),
        Body::Md5Chain(c) => c.seed.len().div_ceil(64) + c.steps,
        Body::Poly1305MacOfMacs(m) => m.count * (m.count + 16) / 32,
    }
}

/// How long a campaign runs.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// This many cases per target (variant × backend × kernel), across all shards.
    Cases(u64),
    /// This much wall time for the whole campaign, split evenly across targets.
    Time(std::time::Duration),
}

/// What to fuzz.
#[derive(Debug, Clone)]
pub struct FuzzConfig {
    /// Variants, in order.
    pub variants: Vec<&'static Variant>,
    /// Backends, in order.
    pub backends: Vec<crate::backend::BackendKind>,
    /// Kernels, in order.
    pub kernels: Vec<Kernel>,
    /// Kernel sources and image cache.
    pub build: crate::toolchain::BuildConfig,
    /// Campaign seed: the same seed gives the same cases.
    pub seed: u64,
    /// Cases or time.
    pub budget: Budget,
    /// `(index, count)`: this run takes case k when `k % count == index`.
    pub shard: (u64, u64),
    /// Cases per batch (per backend entry).
    pub batch: usize,
    /// Where failing cases are written as vector files.
    pub out_dir: std::path::PathBuf,
    /// Hang budgets.
    pub limits: crate::backend::Limits,
    /// Pieces run at once, each on its own thread (0: one per CPU, [`crate::pool::default_jobs`]).
    /// The results are the same for any number (but for times).
    pub jobs: usize,
}

/// A shrunk failure.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Index of the original failing case in the campaign.
    pub case_index: u64,
    /// Blocks in the original failing case.
    pub original_blocks: usize,
    /// The minimal failing case.
    pub case: Case,
    /// What it does wrong.
    pub findings: Vec<Finding>,
    /// The vector file that replays it (`lab run --vectors FILE`).
    pub file: std::path::PathBuf,
    /// The `lab run` command that replays it from the file ([`crate::replay`]).
    pub replay: String,
}

/// How one target ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Every case agreed with the reference.
    Clean,
    /// A case disagreed; shrunk and written.
    Failed(Box<Failure>),
    /// The backend cannot run the variant, or the image lacks the kernel.
    Skipped(String),
    /// The backend and the variant cannot exist together on this host (native on another
    /// architecture, [`crate::backend::BackendKind::applicable`]): nothing was skipped.
    NotApplicable(String),
    /// Building, loading or running failed.
    Error(String),
}

/// One variant × backend × kernel of a campaign.
#[derive(Debug, Clone)]
pub struct TargetResult {
    /// Variant name.
    pub variant: &'static str,
    /// Backend.
    pub backend: crate::backend::BackendKind,
    /// Kernel.
    pub kernel: Kernel,
    /// The contract family the image runs the kernel through (reports name it when it is
    /// not HotSpot's).
    pub family: Family,
    /// Cases run (this shard's).
    pub cases: u64,
    /// Time spent running them, added up over the target's pieces (time on one core).
    pub elapsed: std::time::Duration,
    /// How it ended.
    pub outcome: Outcome,
    /// Findings about the variant's image that concern this target, as `lab run` reports them:
    /// the static ISA and system-call scan, and contract symbols of the kernel that the image
    /// lacks. Any of them fails the campaign (qemu-user runs a kernel's system calls itself,
    /// so only the static scan sees them there).
    pub image_findings: Vec<Finding>,
    /// The variant's image, when it was built (the SARIF report maps addresses through it).
    pub image: Option<std::path::PathBuf>,
}

impl TargetResult {
    /// Cases per second.
    pub fn rate(&self) -> f64 {
        self.cases as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn stable_hash(parts: &[&str]) -> u64 {
    let mut h = crate::fnv::Fnv1a::default();
    for p in parts {
        h.add(p.as_bytes());
        h.add(&[0]);
    }
    h.finish()
}

/// Batches in a piece: a target's case indices are cut into pieces of `PIECE_BATCHES × batch`
/// consecutive indices (the last one shorter), which the workers run independently. Piece 0 is
/// the campaign as it ran before pieces (a target of at most that many cases is one piece, so
/// its cases are those of earlier versions for the same seed).
pub const PIECE_BATCHES: u64 = 8;

/// Case indices in one piece of `cfg`'s targets.
fn piece_size(cfg: &FuzzConfig) -> u64 {
    PIECE_BATCHES * cfg.batch.max(1) as u64
}

/// The seed of piece `piece` of a target: piece 0 keeps the (campaign seed, variant, kernel)
/// stream; the others get their own, so no piece has to generate another's cases to skip them.
fn piece_seed(seed: u64, variant: &str, kernel: Kernel, piece: u64) -> u64 {
    match piece {
        0 => seed ^ stable_hash(&[variant, kernel.name()]),
        p => seed ^ stable_hash(&[variant, kernel.name(), &p.to_string()]),
    }
}

/// A variant × backend × kernel that can run: its slot in the results, its image.
struct Runnable {
    slot: usize,
    image: usize,
    kind: crate::backend::BackendKind,
    kernel: Kernel,
    /// Pieces it is cut into (case budgets; `u64::MAX` for time budgets, bounded by time).
    pieces: u64,
}

/// Shared between the pieces of one target while they run.
#[derive(Default)]
struct TargetState {
    /// The lowest piece that failed or errored (`u64::MAX`: none): higher pieces stop, since
    /// the target's verdict is the lowest piece's.
    stop_above: std::sync::atomic::AtomicU64,
    /// End of the target's time window, fixed when its first piece starts (time budgets).
    window: std::sync::OnceLock<Option<std::time::Instant>>,
}

/// One job of the pool: pieces `first`, `first + stride`, ... of target `target` on one
/// backend (a target has one such stream per worker, at most one per piece), until its pieces
/// are done, one does not pass, or (time budgets) the target's window closes.
struct Job {
    target: usize,
    first: u64,
    stride: u64,
}

/// How a piece ended.
enum PieceOutcome {
    Clean,
    Failed(Box<Shrunk>),
    Error(String),
    Interrupted(String),
    /// A lower piece failed first: this one's cases do not count.
    Cancelled,
}

/// A failure found and shrunk in a piece, not yet written.
struct Shrunk {
    case_index: u64,
    original_blocks: usize,
    case: Case,
    findings: Vec<Finding>,
    stopped: bool,
}

struct PieceResult {
    piece: u64,
    cases: u64,
    elapsed: std::time::Duration,
    outcome: PieceOutcome,
}

/// Runs a campaign: every variant × backend × kernel, until the budget is spent or a case fails.
///
/// Targets are cut into pieces ([`PIECE_BATCHES`]) that run on [`FuzzConfig::jobs`] workers
/// ([`crate::pool`]); a target's verdict is that of its lowest piece that did not pass, so
/// results (cases, failing case, shrunk case) are the same for any number of workers, and the
/// results come in variant, backend, kernel order.
///
/// A time budget is one deadline for the whole campaign: each target gets an equal share of the
/// workers' time (budget × workers / targets) on `ceil(workers / targets)` streams of pieces,
/// never past the deadline, and stops (shrinking included) at the first batch boundary after
/// it, so the campaign ends by the budget plus one batch's budget; a target reached after the
/// deadline is skipped, saying so.
pub fn campaign(cfg: &FuzzConfig, progress: &mut dyn FnMut(crate::progress::Progress<'_>)) -> Vec<TargetResult> {
    let started = std::time::Instant::now();
    let deadline = match cfg.budget {
        Budget::Time(d) => Some(started + d),
        Budget::Cases(_) => None,
    };
    let workers = crate::pool::resolve_jobs(cfg.jobs);
    let mut out: Vec<TargetResult> = Vec::new();
    let mut runnable: Vec<Runnable> = Vec::new();
    let mut images: Vec<(&'static Variant, Image)> = Vec::new();
    for &variant in &cfg.variants {
        plan_variant(cfg, variant, &mut out, &mut runnable, &mut images);
    }
    // Streams per target: one per worker for a case budget (at most one per piece); with a
    // time budget the workers are spread over the targets.
    let targets = runnable.len().max(1) as u64;
    let time_streams = (workers as u64).div_ceil(targets);
    let jobs: Vec<Job> = runnable
        .iter()
        .enumerate()
        .flat_map(|(target, r)| {
            let streams = match cfg.budget {
                Budget::Cases(_) => r.pieces.min(workers as u64),
                Budget::Time(_) => time_streams,
            };
            (0..streams).map(move |first| Job { target, first, stride: streams })
        })
        .collect();
    let states: Vec<TargetState> =
        runnable.iter().map(|_| TargetState { stop_above: u64::MAX.into(), ..TargetState::default() }).collect();
    // A time budget is shared by the targets that can run, not by the skipped ones: each gets
    // budget × workers / targets of worker time, on its `time_streams` streams at once.
    let share = match cfg.budget {
        Budget::Time(d) => Some(d.mul_f64(workers as f64 / (targets * time_streams) as f64)),
        Budget::Cases(_) => None,
    };
    let total = match cfg.budget {
        Budget::Cases(n) => runnable.len() as u64 * shard_cases(n, cfg.shard.0, cfg.shard.1),
        Budget::Time(_) => 0,
    };
    progress(crate::progress::Progress::Start { task: "fuzzing", total, unit: "cases" });
    let ctx = JobContext { cfg, runnable: &runnable, images: &images, states: &states, deadline, share };
    let results = crate::pool::run_ordered(&jobs, workers, &[], |job, lane| run_job(&ctx, job, lane), progress);
    progress(crate::progress::Progress::Finish);
    let mut per_target: Vec<Vec<PieceResult>> = runnable.iter().map(|_| Vec::new()).collect();
    for (job, r) in jobs.iter().zip(results) {
        match r {
            Some(pieces) => per_target[job.target].extend(pieces),
            None => per_target[job.target].push(PieceResult {
                piece: job.first,
                cases: 0,
                elapsed: Default::default(),
                outcome: PieceOutcome::Error("the lab panicked fuzzing this piece (a bug in the lab)".into()),
            }),
        }
    }
    for (r, pieces) in runnable.iter().zip(per_target) {
        let (variant, _) = &images[r.image];
        let result = merge_pieces(cfg, variant, r, pieces);
        out[r.slot].cases = result.0;
        out[r.slot].elapsed = result.1;
        out[r.slot].outcome = result.2;
    }
    for (variant, image) in &images {
        let mine: Vec<usize> = (0..out.len()).filter(|&i| out[i].variant == variant.name).collect();
        if let (Some(&first), Some(&last)) = (mine.first(), mine.last()) {
            cross_check(cfg, variant, image, &mut out[first..=last]);
        }
    }
    out
}

/// What every job reads.
struct JobContext<'a> {
    cfg: &'a FuzzConfig,
    runnable: &'a [Runnable],
    images: &'a [(&'static Variant, Image)],
    states: &'a [TargetState],
    deadline: Option<std::time::Instant>,
    /// Each target's share of a time budget.
    share: Option<std::time::Duration>,
}

/// Builds and scans `variant`'s image and pushes one result per backend × kernel: final for the
/// targets that cannot run (skipped or errors), a placeholder for the [`Runnable`] ones.
fn plan_variant(
    cfg: &FuzzConfig,
    variant: &'static Variant,
    out: &mut Vec<TargetResult>,
    runnable: &mut Vec<Runnable>,
    images: &mut Vec<(&'static Variant, Image)>,
) {
    let image = crate::toolchain::build_image(&cfg.build, variant)
        .map_err(|e| e.to_string())
        .and_then(|p| Image::load(&p, variant.arch).map_err(|e| e.to_string()));
    let (scan, unicorn_refusal, scan_errors) = match &image {
        Ok(i) => crate::run::scan_image(variant, i),
        Err(_) => Default::default(),
    };
    let index = images.len();
    for &kind in &cfg.backends {
        for &kernel in &cfg.kernels {
            let mut findings: Vec<Finding> = scan.iter().map(|f| f.finding.clone()).collect();
            let not_provided = crate::run::not_provided(variant, kernel);
            if let (Ok(i), None) = (&image, &not_provided) {
                findings.extend(crate::run::missing_symbols(variant, i, &[kernel]).into_iter().map(|f| f.finding));
            }
            let family = image.as_ref().ok().and_then(|i| Stubs::of(i).family(kernel)).unwrap_or(Family::HotSpot);
            let result = |outcome| TargetResult {
                variant: variant.name,
                backend: kind,
                kernel,
                family,
                cases: 0,
                elapsed: Default::default(),
                outcome,
                image_findings: findings.clone(),
                image: image.as_ref().ok().map(|i| i.path.clone()),
            };
            if let Err(why) = kind.applicable(variant) {
                out.push(result(Outcome::NotApplicable(why)));
                continue;
            }
            let image = match (&image, scan_errors.first()) {
                (Ok(i), None) => i,
                (Err(e), _) | (Ok(_), Some(e)) => {
                    out.push(result(Outcome::Error(e.clone())));
                    continue;
                }
            };
            let refused = (kind == crate::backend::BackendKind::Unicorn).then(|| unicorn_refusal.clone()).flatten();
            let why =
                kind.supports(variant).err().or(refused).or(not_provided).or_else(|| Stubs::of(image).missing(kernel));
            if let Some(why) = why.or_else(interrupted_reason) {
                out.push(result(Outcome::Skipped(why)));
                continue;
            }
            let pieces = match cfg.budget {
                Budget::Cases(n) => n.div_ceil(piece_size(cfg)).max(1),
                Budget::Time(_) => u64::MAX,
            };
            runnable.push(Runnable { slot: out.len(), image: index, kind, kernel, pieces });
            out.push(result(Outcome::Clean));
        }
    }
    if let Ok(image) = image {
        images.push((variant, image));
    }
}

/// Runs one job's pieces on a backend of its own.
fn run_job(ctx: &JobContext, job: &Job, lane: &crate::pool::Lane) -> Vec<PieceResult> {
    let r = &ctx.runnable[job.target];
    let state = &ctx.states[job.target];
    let (variant, image) = &ctx.images[r.image];
    let window = *state.window.get_or_init(|| {
        let now = std::time::Instant::now();
        match (ctx.share, ctx.deadline) {
            (Some(share), Some(deadline)) => Some((now + share).min(deadline)),
            _ => None,
        }
    });
    if window.is_some_and(|end| std::time::Instant::now() >= end) {
        return Vec::new();
    }
    let mut backend = match r.kind.open(variant, image, ctx.cfg.limits) {
        Ok(b) => b,
        Err(e) => {
            let outcome = PieceOutcome::Error(e.to_string());
            state.stop_above.fetch_min(job.first, std::sync::atomic::Ordering::Relaxed);
            let piece = PieceResult { piece: job.first, cases: 0, elapsed: Default::default(), outcome };
            return vec![piece];
        }
    };
    let mut t = Target { backend: backend.as_mut(), variant, image, seed: ctx.cfg.seed };
    let mut pieces = Vec::new();
    let mut piece = job.first;
    loop {
        let result = run_piece(ctx, &mut t, (r, state), piece, window, lane);
        let stop = !matches!(result.outcome, PieceOutcome::Clean);
        pieces.push(result);
        piece += job.stride;
        let closed = window.is_some_and(|end| std::time::Instant::now() >= end);
        if stop || piece >= r.pieces || closed || state.stop_above.load(std::sync::atomic::Ordering::Relaxed) < piece {
            break;
        }
    }
    pieces
}

/// Runs piece `piece` of target `r`: its case indices of this shard, batch by batch, until
/// they are done, a case fails (then shrunk), the window closes or a lower piece failed.
fn run_piece(
    ctx: &JobContext,
    t: &mut Target,
    (r, state): (&Runnable, &TargetState),
    piece: u64,
    window: Option<std::time::Instant>,
    lane: &crate::pool::Lane,
) -> PieceResult {
    use std::sync::atomic::Ordering;
    let cfg = ctx.cfg;
    let started = std::time::Instant::now();
    let label = format!("{}/{}/{}", t.variant.name, t.backend.kind(), r.kernel);
    let label = match r.pieces {
        1 => label,
        u64::MAX => format!("{label} piece {}", piece + 1),
        n => format!("{label} piece {}/{n}", piece + 1),
    };
    let mut runner = runner(piece_seed(cfg.seed, t.variant.name, r.kernel, piece));
    let family = Stubs::of(t.image).family(r.kernel).unwrap_or(Family::HotSpot);
    let strategy = strategy_for(r.kernel, family);
    let (shard, shards) = cfg.shard;
    let first = piece * piece_size(cfg);
    let end = match cfg.budget {
        Budget::Cases(n) => (first + piece_size(cfg)).min(n),
        Budget::Time(_) => first + piece_size(cfg),
    };
    let mut index = first;
    let mut cases = 0u64;
    let result = |cases, outcome| PieceResult { piece, cases, elapsed: started.elapsed(), outcome };
    loop {
        if state.stop_above.load(Ordering::Relaxed) < piece {
            return result(cases, PieceOutcome::Cancelled);
        }
        if let Some(why) = interrupted_reason() {
            return result(cases, PieceOutcome::Interrupted(why));
        }
        if window.is_some_and(|w| std::time::Instant::now() >= w) {
            return result(cases, PieceOutcome::Clean);
        }
        let mut trees = Vec::with_capacity(cfg.batch);
        while trees.len() < cfg.batch.max(1) && index < end {
            let tree = strategy.new_tree(&mut runner).expect("strategies do not reject");
            if index % shards == shard {
                trees.push((index, tree));
            }
            index += 1;
        }
        if trees.is_empty() {
            return result(cases, PieceOutcome::Clean);
        }
        let batch: Vec<Case> = trees.iter().map(|(_, tree)| tree.current()).collect();
        let findings = run_cases(t, &batch);
        // A batch the interruption killed proves nothing about its cases.
        if let Some(why) = interrupted_reason() {
            return result(cases, PieceOutcome::Interrupted(why));
        }
        let findings = match findings {
            Ok(f) => f,
            Err(e) => {
                state.stop_above.fetch_min(piece, Ordering::Relaxed);
                return result(cases, PieceOutcome::Error(e.to_string()));
            }
        };
        cases += batch.len() as u64;
        let rate = cases as f64 / started.elapsed().as_secs_f64().max(1e-9);
        lane.advance(batch.len() as u64, &format!("{label}: {cases} cases, {rate:.0} cases/s"));
        if let Some(j) = findings.iter().position(|f| !f.is_empty()) {
            state.stop_above.fetch_min(piece, Ordering::Relaxed);
            let (case_index, tree) = trees.swap_remove(j);
            let original_blocks = blocks_of(&tree.current());
            lane.advance(0, &format!("{label}: shrinking case {case_index}"));
            let outcome = match shrink(t, tree, findings[j].clone(), 4096, window) {
                Ok((case, findings, stopped)) => {
                    PieceOutcome::Failed(Box::new(Shrunk { case_index, original_blocks, case, findings, stopped }))
                }
                Err(e) => PieceOutcome::Error(e.to_string()),
            };
            return result(cases, outcome);
        }
    }
}

/// The lowest piece that did not pass, which decides a target's verdict (so it does not depend
/// on which pieces ran first), with the cases and time of the pieces up to it (of every piece
/// when all passed; cancelled pieces, above a failed one, do not count).
fn decide(mut pieces: Vec<PieceResult>) -> (u64, std::time::Duration, Option<PieceOutcome>) {
    pieces.sort_by_key(|p| p.piece);
    let (mut cases, mut elapsed) = (0u64, std::time::Duration::ZERO);
    for p in pieces {
        if matches!(p.outcome, PieceOutcome::Cancelled) {
            continue;
        }
        cases += p.cases;
        elapsed += p.elapsed;
        if !matches!(p.outcome, PieceOutcome::Clean) {
            return (cases, elapsed, Some(p.outcome));
        }
    }
    (cases, elapsed, None)
}

/// Why a timed target ran no case.
const TIME_SPENT: &str =
    "not run: the --time budget was spent before this target ran a case (earlier targets and set-up ran to it)";

/// A target's result from its pieces ([`decide`]); a failure is written as a vector file.
fn merge_pieces(
    cfg: &FuzzConfig,
    variant: &'static Variant,
    r: &Runnable,
    pieces: Vec<PieceResult>,
) -> (u64, std::time::Duration, Outcome) {
    let (cases, elapsed, decided) = decide(pieces);
    let outcome = match decided {
        Some(PieceOutcome::Failed(s)) => write_failure(cfg, variant, r.kind, r.kernel, *s),
        Some(PieceOutcome::Error(e)) => Outcome::Error(e),
        Some(PieceOutcome::Interrupted(why)) => Outcome::Skipped(why),
        // A timed target whose share went before its first batch (set-up, earlier targets)
        // proves nothing: skipped, not clean.
        Some(PieceOutcome::Clean | PieceOutcome::Cancelled) | None
            if cases == 0 && matches!(cfg.budget, Budget::Time(_)) =>
        {
            Outcome::Skipped(TIME_SPENT.into())
        }
        Some(PieceOutcome::Clean | PieceOutcome::Cancelled) | None => Outcome::Clean,
    };
    (cases, elapsed, outcome)
}

/// How many of a campaign's first `n` case indices shard `shard` of `shards` owns (index k
/// belongs to shard k mod `shards`); over shards 0..`shards` they add up to `n`.
pub fn shard_cases(n: u64, shard: u64, shards: u64) -> u64 {
    (n + shards - 1 - shard) / shards
}

/// Replays each shrunk failure of one variant whose findings are wrong outputs (value,
/// bounds) on the campaign's other backends for that variant and puts it to the vote
/// ([`blame`]): when the vote blames this backend, the failure's first finding says so (the
/// cases are the same on every backend: the runner is seeded by variant and kernel, and so are
/// the argument garbage and poison).
fn cross_check(cfg: &FuzzConfig, variant: &'static Variant, image: &Image, results: &mut [TargetResult]) {
    let others: Vec<crate::backend::BackendKind> = results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Clean | Outcome::Failed(_)))
        .map(|r| r.backend)
        .collect();
    for r in results.iter_mut() {
        let Outcome::Failed(f) = &mut r.outcome else { continue };
        // Only wrong outputs are compared: a fault one backend alone sees (bounds are checked
        // by bytes on Unicorn, by pages elsewhere) is a kernel finding, not an emulator's.
        let outputs_only = f.findings.iter().all(|x| matches!(x.class, Class::Value | Class::Bounds));
        if !outputs_only {
            continue;
        }
        let mut verdicts: Vec<(crate::backend::BackendKind, bool)> = Vec::new();
        for &kind in others.iter().filter(|&&k| k != r.backend) {
            let Ok(mut backend) = kind.open(variant, image, cfg.limits) else { continue };
            let mut t = Target { backend: backend.as_mut(), variant, image, seed: cfg.seed };
            if let Ok(found) = run_cases(&mut t, std::slice::from_ref(&f.case)) {
                verdicts.push((kind, found[0].is_empty()));
            }
        }
        if let Some(finding) = blame(variant, r.backend, &verdicts) {
            f.findings.insert(0, finding);
        }
    }
}

/// The vote ([`crate::vote`]) on a shrunk failure of `failed` replayed on other backends
/// (`verdicts`: backend and whether it passed): the finding that blames an emulator, or says
/// no side has a majority; `None` when the failure stands as the kernel's. The outputs
/// themselves are not kept here, so every failing backend counts as failing alike.
fn blame(
    variant: &Variant,
    failed: crate::backend::BackendKind,
    verdicts: &[(crate::backend::BackendKind, bool)],
) -> Option<Finding> {
    use crate::vote::{culprit_name, decide, Ballot, Decision};
    let ballot = |backend, passed: bool| Ballot { backend, digest: Some(u64::from(passed)), passed };
    let ballots: Vec<Ballot> =
        std::iter::once(ballot(failed, false)).chain(verdicts.iter().map(|&(b, p)| ballot(b, p))).collect();
    let names = |v: &[crate::backend::BackendKind]| v.iter().map(|b| b.name()).collect::<Vec<_>>().join(" and ");
    match decide(&ballots) {
        Decision::EmulatorFault { faulty, witnesses, .. } if faulty.contains(&failed) => {
            let others: Vec<_> = faulty.iter().copied().filter(|&b| b != failed).collect();
            let also = if others.is_empty() { String::new() } else { format!(" ({} fails it too)", names(&others)) };
            Some(Finding::new(
                Class::EmulatorFault,
                format!(
                    "emulator fault on the shrunk case: {} fails it; {} and the reference agree{also}; not counted as \
                     a kernel failure",
                    culprit_name(failed, variant.arch),
                    names(&witnesses)
                ),
            ))
        }
        Decision::NoMajority { failing, passing } => Some(Finding::new(
            Class::Disagreement,
            format!(
                "backends disagree on the shrunk case and no side has a majority: {} and the reference agree; {} fail it",
                names(&passing),
                names(&failing)
            ),
        )),
        _ => None,
    }
}

/// Why a target stops after SIGINT/SIGTERM (lab/src/interrupt.rs).
fn interrupted_reason() -> Option<String> {
    crate::interrupt::interrupted().map(|s| format!("interrupted by {}", crate::interrupt::name(s)))
}

/// The replay options of a campaign with `seed` on the kernels in `kernels_dir`: `--kernels-dir`
/// when they are not the repository's, so that a printed command reproduces it.
fn replay_options(seed: u64, kernels_dir: &std::path::Path, variant: &Variant) -> crate::replay::Replay {
    let mut replay = crate::replay::Replay::new(seed);
    match crate::user_kernel::of(variant) {
        // A user's kernel: the options that select it (--manifest/--variant or --object/--symbol/--isa).
        Some(k) => k.replay.iter().for_each(|(name, value)| {
            replay.value(name, value.clone());
        }),
        None if kernels_dir != crate::paths::kernels_dir() => {
            replay.path("--kernels-dir", kernels_dir);
        }
        None => {}
    }
    if crate::domain::current() != Domain::Jdk {
        replay.value("--domain", crate::domain::current().name());
    }
    replay
}

/// The `lab run` line that replays a shrunk failure of `variant` saved in `file`.
fn replay_line(
    seed: u64,
    kernels_dir: &std::path::Path,
    variant: &Variant,
    backend: backend::BackendKind,
    kernel: Kernel,
    file: &std::path::Path,
) -> String {
    let mut replay = replay_options(seed, kernels_dir, variant);
    replay.flag("--no-bundled").path("--vectors", file);
    replay.narrowed(variant.name, backend, kernel, None, None)
}

/// Writes a piece's shrunk failure as a vector file and builds the outcome with its replay
/// command.
fn write_failure(
    cfg: &FuzzConfig,
    variant: &'static Variant,
    backend: backend::BackendKind,
    kernel: Kernel,
    shrunk: Shrunk,
) -> Outcome {
    let Shrunk { case_index, original_blocks, mut case, findings, stopped } = shrunk;
    case.name = format!("fuzz seed {} case {case_index} on {}/{backend} (shrunk)", cfg.seed, variant.name);
    let campaign = replay_options(cfg.seed, &cfg.build.kernels_dir, variant).fuzz_target(variant.name, backend, kernel);
    case.source = format!(
        "{campaign}: case {case_index}, shrunk from {original_blocks} to {} blocks{}; expected values from the portable reference",
        blocks_of(&case),
        if stopped { " (shrinking stopped at the --time deadline: maybe not minimal)" } else { "" }
    );
    let file =
        cfg.out_dir.join(format!("fuzz-{}-{backend}-{kernel}-seed{}.json", variant.name.replace('+', "_"), cfg.seed));
    let written = std::fs::create_dir_all(&cfg.out_dir).and_then(|()| {
        crate::vectors::write_file(
            &file,
            kernel,
            "fuzz-regressions",
            "shrunk lab fuzz failures",
            std::slice::from_ref(&case),
        )
    });
    if let Err(e) = written {
        return Outcome::Error(format!("{}: cannot write the failing case: {e}", file.display()));
    }
    let replay = replay_line(cfg.seed, &cfg.build.kernels_dir, variant, backend, kernel, &file);
    Outcome::Failed(Box::new(Failure { case_index, original_blocks, case, findings, file, replay }))
}

/// Why a HotSpot-family failure lies outside the JDK's call domain (`--domain wide`), if it
/// does: its shrunk case makes a call the JDK never makes.
pub fn out_of_domain(r: &TargetResult, f: &Failure) -> Option<String> {
    let wide = crate::domain::current() == Domain::Wide && r.family == Family::HotSpot;
    let why = crate::domain::vector_outside(&f.case, Domain::Wide).filter(|_| wide)?;
    Some(format!("outside the JDK's call domain ({why}): HotSpot's code is never called so"))
}

/// The campaign as a [`Report`](crate::report::Report) for the JSON and JUnit reporters: one row
/// per target (set `fuzz`) holding one case, the campaign, which passed, failed with the
/// shrunk case's findings and file, or was skipped with its reason. A variant × backend that
/// cannot exist on this host has no row: it is listed once in the report's `not_applicable`.
pub fn to_report(
    results: &[TargetResult],
    seed: u64,
    shard: (u64, u64),
    elapsed: std::time::Duration,
) -> crate::report::Report {
    use crate::report::{CaseOutcome, NotApplicable, Report, Row, Verdict};
    let mut not_applicable: Vec<NotApplicable> = Vec::new();
    for r in results {
        let Outcome::NotApplicable(reason) = &r.outcome else { continue };
        if !not_applicable.iter().any(|n| n.variant == r.variant && n.backend == r.backend) {
            not_applicable.push(NotApplicable { variant: r.variant, backend: r.backend, reason: reason.clone() });
        }
    }
    let rows = results
        .iter()
        .filter(|r| !matches!(r.outcome, Outcome::NotApplicable(_)))
        .map(|r| {
            // No seed, shard or case count in the name: they change every night, and CI
            // viewers follow a test's history by its name.
            let name = "differential fuzzing".to_string();
            let verdict = match &r.outcome {
                Outcome::Clean => Verdict::Passed,
                Outcome::Skipped(why) | Outcome::NotApplicable(why) => Verdict::Skipped(why.clone()),
                Outcome::Error(e) => Verdict::Failed(vec![Finding::new(Class::NotRun, e.clone())]),
                Outcome::Failed(f) => {
                    let mut findings = f.findings.clone();
                    let written = format!(
                        "minimal case (case {} of seed {seed}, shard {}/{}) written to {}; replay: {}",
                        f.case_index,
                        shard.0,
                        shard.1,
                        f.file.display(),
                        f.replay
                    );
                    // The note takes the class of what failed (its first finding).
                    let class = findings.first().map_or(Class::Value, |f| f.class);
                    findings.push(Finding::new(class, written));
                    if matches!(findings[0].class, Class::Disagreement | Class::EmulatorFault) {
                        Verdict::Disagreed(findings)
                    } else if let Some(why) = out_of_domain(r, f) {
                        findings.insert(0, Finding::new(Class::OutOfDomain, why));
                        Verdict::OutOfDomain(findings)
                    } else {
                        Verdict::Failed(findings)
                    }
                }
            };
            let mut row =
                Row { elapsed: r.elapsed, family: r.family, ..Row::for_set(r.variant, r.backend, r.kernel, "fuzz") };
            row.push(CaseOutcome { name, msg_len: 0, time: r.elapsed, verdict });
            row
        })
        .collect();
    let mut image_findings: Vec<crate::report::ImageFinding> = Vec::new();
    for r in results {
        for f in &r.image_findings {
            if !image_findings.iter().any(|g| g.variant == r.variant && g.finding == *f) {
                image_findings.push(crate::report::ImageFinding { variant: r.variant, finding: f.clone() });
            }
        }
    }
    let mut images: Vec<(&'static str, std::path::PathBuf)> = Vec::new();
    for r in results {
        if let (Some(path), false) = (&r.image, images.iter().any(|(v, _)| *v == r.variant)) {
            images.push((r.variant, path.clone()));
        }
    }
    let interrupted = crate::interrupt::interrupted();
    Report { rows, seed, elapsed, image_findings, interrupted, not_applicable, images, ..Report::default() }
}

#[cfg(test)]
mod tests {
    use super::{replay_line, shard_cases};
    use crate::backend::BackendKind;
    use crate::variant::{Kernel, Variant};

    /// A shrunk failure's replay keeps the variant's Zbb choice (riscv64 and riscv64+zbb
    /// share `--arch riscv64`), the kernels folder and the saved file.
    #[test]
    fn the_replay_of_a_failure_names_zbb_the_kernels_and_the_file() {
        let zbb = Variant::by_name("riscv64+zbb").expect("riscv64+zbb");
        let kernels = std::path::Path::new("/tmp/my kernels");
        let line = replay_line(9, kernels, zbb, BackendKind::Qemu, Kernel::Md5, std::path::Path::new("/f/x.json"));
        assert!(
            line.ends_with(
                "lab run --seed 9 --kernels-dir '/tmp/my kernels' --no-bundled --vectors /f/x.json --arch riscv64 --zbb \
                 --backend qemu --kernel md5"
            ),
            "{line}"
        );
    }

    /// Whatever order the pieces finished in, the lowest one that did not pass decides, and
    /// only the pieces up to it count.
    #[test]
    fn the_lowest_piece_that_did_not_pass_decides() {
        use super::{decide, PieceOutcome, PieceResult};
        let piece = |piece: u64, cases: u64, outcome: PieceOutcome| PieceResult {
            piece,
            cases,
            elapsed: std::time::Duration::from_millis(cases),
            outcome,
        };
        let pieces = || {
            vec![
                piece(3, 5, PieceOutcome::Error("piece 3".into())),
                piece(0, 16, PieceOutcome::Clean),
                piece(4, 2, PieceOutcome::Cancelled),
                piece(2, 7, PieceOutcome::Error("piece 2".into())),
                piece(1, 16, PieceOutcome::Clean),
            ]
        };
        for rotate in 0..5 {
            let mut p = pieces();
            p.rotate_left(rotate);
            let (cases, elapsed, outcome) = decide(p);
            assert_eq!((cases, elapsed.as_millis()), (39, 39), "pieces 0, 1 and 2");
            assert!(matches!(outcome, Some(PieceOutcome::Error(e)) if e == "piece 2"));
        }
        let (cases, _, outcome) = decide(vec![piece(1, 16, PieceOutcome::Clean), piece(0, 16, PieceOutcome::Clean)]);
        assert!(cases == 32 && outcome.is_none());
    }

    #[test]
    fn shards_0_to_n_minus_1_own_every_case_index_exactly_once() {
        for n in [0u64, 1, 3, 4, 5, 2000, 2001] {
            for shards in 1..=5u64 {
                // The indices shard i takes: i, i + N, i + 2N, ... below n.
                let owned: Vec<u64> = (0..shards).map(|i| (0..n).filter(|k| k % shards == i).count() as u64).collect();
                let counted: Vec<u64> = (0..shards).map(|i| shard_cases(n, i, shards)).collect();
                assert_eq!(counted, owned, "n {n}, {shards} shards");
                assert_eq!(counted.iter().sum::<u64>(), n);
            }
        }
    }
}

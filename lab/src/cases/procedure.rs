//! One case of a vector as a sequence of segments, each laid into one batch. Most cases are one
//! segment. Longer ones are cut the way Java feeds the stubs, so the arena never holds more
//! than a segment: a long message goes to DigestBase as a stream of updates of at most
//! [`CHUNK`] bytes (one `implCompressMB` call each), a long Poly1305 input as calls of at most
//! [`CHUNK`] bytes, and a segment holds at most [`SEGMENT_BYTES`] of input and
//! [`SEGMENT_CALLS`] calls. Each segment starts from the state or accumulator the kernel left
//! at the end of the previous one (read back from the response), so every call still runs on
//! the kernel's own results, and the reference advances alongside.
//!
//! Chained entries work the same way: each step of an `md5_iterate` chain is a digest of the
//! kernel's previous digest; a MAC of MACs first runs every inner tag, then the outer tag over
//! the tags the kernel produced.

use std::borrow::Cow;
use std::iter::Peekable;

use rand::RngExt;

use crate::batch::{BatchBuilder, BufId, Placement};
use crate::cases::answers::Tape;
use crate::cases::openssl_checks::OsslFinal;
use crate::cases::plan::{self, CasePlan, Final, Layout, Planner, Stubs, SEGMENT_BYTES, SEGMENT_CALLS};
use crate::contract::Family;
use crate::reference::md5::{self, DigestSteps, State};
use crate::reference::poly1305::{self, Limbs26};
use crate::variant::{Arch, Kernel};
use crate::vectors::{self, Body, Message, Vector};

/// Bytes of one chunk long digests and tags are cut into ([`crate::vectors`] cost model).
pub const CHUNK: usize = vectors::CHUNK as usize;

/// A DigestBase digest in progress.
struct DigestRun<'v> {
    msg: Cow<'v, Message>,
    steps: Peekable<DigestSteps<'v>>,
    /// The reference's state.
    state: State,
    /// The state the kernel left at the end of the previous segment.
    kernel: [u8; 16],
    /// Expected digest: `None` for the reference's own.
    digest: Option<[u8; 16]>,
    what: &'static str,
}

impl<'v> DigestRun<'v> {
    fn new(msg: Cow<'v, Message>, updates: &[usize], digest: Option<[u8; 16]>, what: &'static str) -> Self {
        let reader = msg.clone().into_owned();
        let steps = DigestSteps::new(msg.len(), updates, CHUNK, move |s, n| reader.read(s, n)).peekable();
        DigestRun { msg, steps, state: md5::IV, kernel: md5::state_to_bytes(&md5::IV), digest, what }
    }

    /// Plans the next segment; returns (last state buffer, finished, the final check).
    fn plan<R: RngExt>(&mut self, p: &mut Planner<'_, R>) -> (BufId, Option<Final>) {
        let last = p.md5_digest_segment(&mut self.steps, &self.msg, &self.kernel, &mut self.state);
        let fin = self.steps.peek().is_none().then(|| Final::Md5Digest {
            state: last,
            digest: self.digest.unwrap_or_else(|| md5::state_to_digest(&self.state)),
            what: self.what,
        });
        (last, fin)
    }
}

/// A chain of `processBlocks` calls in progress.
struct PolyRun<'v> {
    msg: Cow<'v, Message>,
    r: Limbs26,
    lengths: Vec<i64>,
    /// Index of the next call in `lengths`, and the message byte it starts at.
    next: usize,
    at: usize,
    /// The reference's accumulator, and the kernel's result (accumulator or context) at the end
    /// of the previous segment (`None` before the first: the planner lays `acc` out).
    acc: Limbs26,
    kernel: Option<Vec<u8>>,
    /// `expect_acc` of a call entry.
    expect: Option<&'v num_bigint::BigUint>,
    /// For a tag: what the host adds after the last call, and the expected tag.
    tag: Option<TagEnd>,
}

/// The host's end of a tag: the tail block, `s`, the expected tag and how a finding names it.
struct TagEnd {
    tail: Vec<u8>,
    s: [u8; 16],
    tag: [u8; 16],
    what: String,
}

impl<'v> PolyRun<'v> {
    /// A tag of `msg` under `key`: the whole blocks in calls of at most [`CHUNK`] bytes, cut
    /// further at `cuts`, then the tail and `+ s` on the host.
    fn tag(key: &[u8; 32], msg: Cow<'v, Message>, tag: [u8; 16], cuts: &[usize], what: String) -> Self {
        let r = poly1305::clamp_r(key[..16].try_into().unwrap_or(&[0; 16]));
        let whole = msg.len() / 16 * 16;
        let mut bounds: Vec<usize> = cuts.iter().copied().filter(|&c| c > 0 && c < whole).collect();
        bounds.extend((CHUNK..whole).step_by(CHUNK));
        bounds.push(whole);
        bounds.sort_unstable();
        bounds.dedup();
        let lengths = bounds.iter().scan(0, |at, &end| Some((end - std::mem::replace(at, end)) as i64)).collect();
        let tail = msg.read(whole, 16);
        let s: [u8; 16] = key[16..].try_into().unwrap_or_default();
        let acc = Limbs26::default();
        let t = Some(TagEnd { tail, s, tag, what });
        PolyRun { msg, r, lengths, next: 0, at: 0, acc, kernel: None, expect: None, tag: t }
    }

    fn plan<R: RngExt>(&mut self, p: &mut Planner<'_, R>) -> (BufId, Option<Final>) {
        let (mut bytes, mut end) = (0usize, self.next);
        while end < self.lengths.len() && (end == self.next || end - self.next < SEGMENT_CALLS) {
            let take = vectors::whole_blocks(self.lengths[end]) * 16;
            if end > self.next && bytes + take > SEGMENT_BYTES {
                break;
            }
            bytes += take;
            end += 1;
        }
        let last_segment = end == self.lengths.len();
        let expect = if last_segment { self.expect } else { None };
        let lengths = &self.lengths[self.next..end];
        let init = self.kernel.clone().unwrap_or_else(|| p.poly1305_start(&self.acc, &self.r));
        let out = p.poly1305_chain(&init, &mut self.acc, self.r, &self.msg, self.at, lengths, expect);
        self.next = end;
        self.at += bytes;
        match (&self.tag, last_segment) {
            (Some(t), true) => {
                let (out, fin) = p.poly1305_finish(out, &mut self.acc, self.r, &t.tail, t.s, t.tag, t.what.clone());
                (out, Some(fin))
            }
            _ => (out, None),
        }
    }

    fn done(&self) -> bool {
        self.next >= self.lengths.len()
    }
}

/// Where a case stands.
enum Stage<'v> {
    Start,
    Digest(DigestRun<'v>),
    Poly(PolyRun<'v>),
    /// Step `step` (from 0) of an `md5_iterate` chain.
    Chain {
        step: usize,
        run: DigestRun<'v>,
    },
    /// The inner tags of a MAC of MACs are out; the kernel's accumulators come next.
    InnerTags,
    /// The outer tag of a MAC of MACs.
    OuterTag(PolyRun<'v>),
    Done,
}

/// One case of a vector, planned a segment at a time.
pub struct CaseRun<'v> {
    v: &'v Vector,
    set: String,
    name: String,
    layout: Layout,
    stage: Stage<'v>,
    /// The reference's answers, computed or replayed ([`crate::cases::answers`]).
    tape: Tape,
    /// The family the Poly1305 calls went through (how carried results become tags).
    poly_family: Family,
    /// The architecture of the batch (the OpenSSL context layout), once planned.
    arch: Option<Arch>,
}

impl<'v> CaseRun<'v> {
    /// The case of `v` named `name` with its buffers laid out as `layout`; the reference
    /// computes every answer.
    pub fn new(v: &'v Vector, set: &str, name: &str, layout: Layout) -> Self {
        Self::replaying(v, set, name, layout, Tape::default())
    }

    /// [`CaseRun::new`] taking the reference's answers from `tape` where it has them
    /// ([`crate::cases::answers::Answers::tape`]).
    pub fn replaying(v: &'v Vector, set: &str, name: &str, layout: Layout, tape: Tape) -> Self {
        CaseRun {
            v,
            set: set.into(),
            name: name.into(),
            layout,
            stage: Stage::Start,
            poly_family: Family::HotSpot,
            arch: None,
            tape,
        }
    }

    /// The reference's answers given so far, to keep for other cells
    /// ([`crate::cases::answers::Answers::keep`]).
    pub fn into_tape(self) -> Tape {
        self.tape
    }

    /// An upper bound of the bytes the next segment adds to a batch's payload: its buffers'
    /// data (a digest's input and DigestBase's buffer: twice the bytes read), four pages per
    /// guarded buffer (rounding, the guard after it, one that keeps the guard grid) or its
    /// offset per packed one, and table entries.
    pub fn estimate(&self) -> u64 {
        let (bytes, calls) = match &self.stage {
            Stage::Start => {
                let c = self.v.cost();
                (c.bytes_per_case, c.calls_per_case)
            }
            Stage::Chain { .. } => (256, 4),
            _ => (SEGMENT_BYTES as u64, SEGMENT_CALLS as u64),
        };
        // A MAC of MACs has four buffers per call (input, r, two accumulators), others at most
        // about two.
        let per_call = if matches!(self.v.body, Body::Poly1305MacOfMacs(_)) { 4 } else { 2 };
        // + 8: the case's own (input, first context) and, through `poly1305_init`, its key,
        // context and func, and emit's nonce and tag.
        let buffers = calls.min(SEGMENT_CALLS as u64) * per_call + 8;
        let per_buffer = match self.layout {
            Layout::Guarded(_) => 4 * 4096 + 512,
            Layout::Offset(o) => 64 + o as u64 + 16 + 512,
        };
        2 * bytes.min(SEGMENT_BYTES as u64 + 4096) + buffers * per_buffer
    }

    /// Whether the last segment is planned.
    pub fn done(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    /// Plans the next segment into `b`. After a segment with [`CasePlan::more`], call
    /// [`absorb`](Self::absorb) with what the kernel left before planning the next.
    pub fn plan_next(&mut self, b: &mut BatchBuilder, e: &Stubs, rng: &mut impl RngExt) -> CasePlan {
        if let Stage::Start = self.stage {
            self.stage = self.first_stage(rng);
        }
        let mut p = Planner::new(b, e, rng, self.layout, &mut self.tape);
        self.poly_family = p.family(Kernel::Poly1305);
        self.arch = Some(p.b.abi().arch);
        let (carry, last, done) = match &mut self.stage {
            Stage::Digest(run) => {
                let (out, fin) = run.plan(&mut p);
                let done = fin.is_some();
                (vec![out], fin.into_iter().collect(), done)
            }
            Stage::Poly(run) | Stage::OuterTag(run) => {
                let (out, fin) = run.plan(&mut p);
                (vec![out], fin.into_iter().collect(), run.done())
            }
            Stage::Chain { step, run } => {
                p.label_prefix = format!("step {}: ", *step + 1);
                let (out, fin) = run.plan(&mut p);
                let last_step = *step + 1 == chain_steps(self.v);
                (vec![out], fin.into_iter().collect(), last_step && !fin_pending(run))
            }
            Stage::Start | Stage::InnerTags | Stage::Done => match &self.v.body {
                Body::Md5Call(c) => (vec![p.md5_call(c)], Vec::new(), true),
                Body::Poly1305MacOfMacs(m) => {
                    let (carry, last) = inner_tags(&mut p, m.count);
                    (carry, last, false)
                }
                _ => (Vec::new(), Vec::new(), true),
            },
        };
        if let (Stage::Start, Body::Poly1305MacOfMacs(_)) = (&self.stage, &self.v.body) {
            self.stage = Stage::InnerTags;
        }
        let mut plan = p.finish(&self.set, &self.name, self.v.msg_len(), last, carry);
        plan.more = !done;
        if done {
            self.stage = Stage::Done;
        }
        plan
    }

    /// Takes what the kernel left in the carried buffers of the last segment (see
    /// [`CasePlan::carried`]).
    pub fn absorb(&mut self, carried: &[Vec<u8>]) {
        let first = carried.first().map(Vec::as_slice).unwrap_or_default();
        match &mut self.stage {
            Stage::Digest(run) => run.kernel = state_part(first),
            Stage::Poly(run) | Stage::OuterTag(run) => run.kernel = Some(first.to_vec()),
            Stage::Chain { step, run } => {
                if run.steps.peek().is_some() {
                    run.kernel = state_part(first);
                } else {
                    // The step's digest is the next step's message.
                    let digest = md5::state_to_bytes(&md5::state_from_bytes(first.get(..16).unwrap_or(&[0; 16])));
                    *step += 1;
                    let expect = (*step + 1 == chain_steps(self.v)).then(|| chain_digest(self.v));
                    let what = if expect.is_some() { "chain digest " } else { "step digest " };
                    *run = DigestRun::new(Cow::Owned(Message::Bytes(digest.to_vec())), &[], expect, what);
                }
            }
            Stage::InnerTags => {
                let Body::Poly1305MacOfMacs(m) = &self.v.body else { return };
                let mut tags = Vec::with_capacity(16 * m.count);
                for (i, acc) in carried.iter().enumerate() {
                    let (r, s, tail) = inner_key(i);
                    tags.extend(match self.poly_family {
                        Family::OpenSsl => self.arch.map_or([0; 16], |a| OsslFinal::tag_of(a, acc, &s)),
                        // BoringSSL has no Poly1305 row: its family never runs Poly1305.
                        Family::HotSpot | Family::BoringSsl => {
                            poly1305::finish(&Limbs26::from_bytes(acc), &r, &tail, &s)
                        }
                    });
                }
                let what = "tag of the tags ".to_owned();
                self.stage = Stage::OuterTag(PolyRun::tag(&m.key, Cow::Owned(Message::Bytes(tags)), m.tag, &[], what));
            }
            Stage::Start | Stage::Done => {}
        }
    }

    /// The stage a case starts in (cut points of split tags drawn here).
    fn first_stage(&self, rng: &mut impl RngExt) -> Stage<'v> {
        let split = matches!(self.layout, Layout::Offset(_));
        match &self.v.body {
            Body::Md5Digest { msg, digest, updates } => {
                Stage::Digest(DigestRun::new(Cow::Borrowed(msg), updates, Some(*digest), "digest "))
            }
            Body::Poly1305Tag { key, msg, tag } => {
                let cuts = if split { plan::random_cuts(rng, msg.len() / 16) } else { Vec::new() };
                Stage::Poly(PolyRun::tag(key, Cow::Borrowed(msg), *tag, &cuts, "tag ".into()))
            }
            Body::Poly1305Call(c) => Stage::Poly(PolyRun {
                msg: Cow::Borrowed(&c.input),
                r: c.r,
                lengths: c.lengths.clone(),
                next: 0,
                at: 0,
                acc: c.acc,
                kernel: None,
                expect: c.expect.acc.as_ref(),
                tag: None,
            }),
            Body::Md5Chain(c) => {
                let expect = (c.steps == 1).then_some(c.digest);
                let what = if expect.is_some() { "chain digest " } else { "step digest " };
                Stage::Chain { step: 0, run: DigestRun::new(Cow::Borrowed(&c.seed), &[], expect, what) }
            }
            Body::Md5Call(_) | Body::Poly1305MacOfMacs(_) => Stage::Start,
        }
    }
}

/// The MD5 state words at the start of a carried state or `MD5_CTX`.
fn state_part(carried: &[u8]) -> [u8; 16] {
    carried.get(..16).and_then(|s| s.try_into().ok()).unwrap_or_default()
}

/// Whether a chain step's digest still has segments to plan.
fn fin_pending(run: &mut DigestRun) -> bool {
    run.steps.peek().is_some()
}

fn chain_steps(v: &Vector) -> usize {
    match &v.body {
        Body::Md5Chain(c) => c.steps,
        _ => 0,
    }
}

fn chain_digest(v: &Vector) -> [u8; 16] {
    match &v.body {
        Body::Md5Chain(c) => c.digest,
        _ => [0; 16],
    }
}

/// r, s and the tail of inner tag `i` of a MAC of MACs: key = 32 bytes of value i, message =
/// i bytes of value i (poly1305-donna's self-test).
fn inner_key(i: usize) -> (Limbs26, [u8; 16], Vec<u8>) {
    let b = i as u8;
    (poly1305::clamp_r(&[b; 16]), [b; 16], vec![b; i % 16])
}

/// Plans the `count` inner tags of a MAC of MACs, one call each; returns their accumulator
/// buffers (to carry) and their final checks against the reference's tags.
fn inner_tags<R: RngExt>(p: &mut Planner<'_, R>, count: usize) -> (Vec<BufId>, Vec<Final>) {
    let (mut carry, mut last) = (Vec::new(), Vec::new());
    for i in 0..count {
        let b = i as u8;
        let msg = Message::Repeat { byte: b, len: i };
        let (r, s, tail) = inner_key(i);
        p.label_prefix = format!("tag {i}: ");
        let whole = (i / 16 * 16) as i64;
        let mut acc = Limbs26::default();
        let init = p.poly1305_start(&acc, &r);
        let out = p.poly1305_chain(&init, &mut acc, r, &msg, 0, &[whole], None);
        let tag = poly1305::tag(&[b; 32], &msg.to_vec());
        let (out, fin) = p.poly1305_finish(out, &mut acc, r, &tail, s, tag, format!("tag {i}: tag "));
        last.push(fin);
        carry.push(out);
    }
    p.label_prefix.clear();
    (carry, last)
}

/// Plans every case of `v` into `b` (see [`plan::cases_of`] and [`plan::case_names`]); `flush` says which
/// end of its pages the guarded case's inputs touch ([`Placement::End`] or [`Placement::Start`]).
/// For vectors whose cases fit one batch each (`lab fuzz` cases); a case that needs more
/// segments (this module) gets only its first here, marked [`CasePlan::more`].
pub fn plan_vector(
    b: &mut BatchBuilder,
    e: &Stubs,
    rng: &mut impl RngExt,
    set: &str,
    v: &Vector,
    flush: Placement,
) -> Vec<CasePlan> {
    let names = plan::case_names(v);
    let misalign = rng.random_range(1..64);
    // The layouts of a vector make the same calls: the reference answers them once.
    let mut tape = Tape::default();
    plan::layouts(v, flush, misalign)
        .zip(names)
        .map(|(layout, name)| {
            let mut run = CaseRun::replaying(v, set, &name, layout, std::mem::take(&mut tape));
            let plan = run.plan_next(b, e, rng);
            tape = run.into_tape().replay();
            plan
        })
        .collect()
}

//! Vector -> calls: a case of a vector becomes a few kernel calls laid into a batch plus what
//! each call must leave behind (`Expect`) and the case's final digest or tag (`Final`),
//! computed with the portable reference as the calls are laid out. The `Planner` lays one
//! segment; [`crate::cases::procedure`] cuts long cases into segments; judging the results is
//! [`crate::cases::verdict`]'s.
//!
//! Multi-call cases start each call from a copy of the previous call's output (the driver's
//! `copy` field), so every intermediate state stays visible to the verdict.

use rand::RngExt;

use crate::abi::UpperBits;
use crate::batch::{Arg, Batch, BatchBuilder, BufId, Placement};
use crate::cases::answers::Tape;
use crate::cases::dispatch::PolyPath;
use crate::cases::openssl_checks::{OsslExpect, OsslFinal};
use crate::contract::{self, Family, MD5_BLOCK_ASM_DATA_ORDER, MD5_BLOCK_DATA_ORDER, POLY1305_BLOCKS};
use crate::image::Image;
use crate::reference::md5::{self, State, Step};
use crate::reference::poly1305::Limbs26;
use crate::variant::{Kernel, MD5_IMPL_COMPRESS, MD5_IMPL_COMPRESS_MB, POLY1305_PROCESS_BLOCKS};
use crate::vectors::{self, Body, Md5Call, Md5Expect, Md5Stub, Message, Vector};

/// The addresses of the contract entry points (HotSpot's stubs, OpenSSL's block functions:
/// [`crate::contract`]) in an image.
#[derive(Debug, Clone, Default)]
pub struct Stubs {
    /// `md5_implCompress`.
    pub md5_compress: Option<u64>,
    /// `md5_implCompressMB`.
    pub md5_compress_mb: Option<u64>,
    /// `poly1305_processBlocks`.
    pub poly1305: Option<u64>,
    /// OpenSSL's `md5_block_data_order` ([`crate::contract`]).
    pub md5_block_data_order: Option<u64>,
    /// OpenSSL's `poly1305_blocks`.
    pub poly1305_blocks: Option<u64>,
    /// The path OpenSSL's `poly1305_init` chooses, when the image defines `poly1305_init`,
    /// `poly1305_blocks` and `poly1305_emit` ([`crate::cases::dispatch`]);
    /// `None` for the scalar-layout contract (an image with `poly1305_blocks` alone).
    pub poly1305_path: Option<PolyPath>,
    /// The upper-bits policy of `int` arguments when it is not the family's
    /// ([`UpperBits::for_family`]): the lab's reliance probe plans with [`UpperBits::Fail`].
    pub upper_bits: Option<UpperBits>,
    /// BoringSSL's `md5_block_asm_data_order` (16-byte state).
    pub md5_block_asm_data_order: Option<u64>,
}

impl Stubs {
    /// Looks the stub symbols up in `image`.
    pub fn of(image: &Image) -> Stubs {
        let a = |s| image.entry(s).map(|s| s.addr);
        Stubs {
            md5_compress: a(MD5_IMPL_COMPRESS),
            md5_compress_mb: a(MD5_IMPL_COMPRESS_MB),
            poly1305: a(POLY1305_PROCESS_BLOCKS),
            md5_block_data_order: a(MD5_BLOCK_DATA_ORDER),
            poly1305_blocks: a(POLY1305_BLOCKS),
            poly1305_path: crate::cases::dispatch::poly1305_path(image),
            upper_bits: None,
            md5_block_asm_data_order: a(MD5_BLOCK_ASM_DATA_ORDER),
        }
    }

    /// Whether the image defines contract symbol `symbol`.
    fn defines(&self, symbol: &str) -> bool {
        let addr = match symbol {
            MD5_IMPL_COMPRESS => self.md5_compress,
            MD5_IMPL_COMPRESS_MB => self.md5_compress_mb,
            POLY1305_PROCESS_BLOCKS => self.poly1305,
            MD5_BLOCK_DATA_ORDER => self.md5_block_data_order,
            POLY1305_BLOCKS => self.poly1305_blocks,
            MD5_BLOCK_ASM_DATA_ORDER => self.md5_block_asm_data_order,
            _ => None,
        };
        addr.is_some()
    }

    /// The contract family `kernel` runs through ([`contract::family_of`]).
    pub fn family(&self, kernel: Kernel) -> Option<Family> {
        contract::family_of(kernel, |s| self.defines(s))
    }

    /// Why `kernel` cannot run from this image, if it cannot.
    pub fn missing(&self, kernel: Kernel) -> Option<String> {
        if self.family(kernel).is_some() {
            return None;
        }
        let intended = contract::intended_family(kernel, |s| self.defines(s));
        if intended != Family::HotSpot {
            let lacking: Vec<&str> = contract::contracts(intended, kernel)
                .filter(|c| c.required())
                .map(|c| c.symbol)
                .filter(|s| !self.defines(s))
                .collect();
            return Some(format!("the image defines no {}", lacking.join(", ")));
        }
        let lacking: Vec<&str> = match kernel {
            Kernel::Md5 => [(MD5_IMPL_COMPRESS, self.md5_compress), (MD5_IMPL_COMPRESS_MB, self.md5_compress_mb)]
                .into_iter()
                .filter(|(_, a)| a.is_none())
                .map(|(n, _)| n)
                .collect(),
            Kernel::Poly1305 => {
                if self.poly1305.is_none() {
                    vec![POLY1305_PROCESS_BLOCKS]
                } else {
                    vec![]
                }
            }
        };
        (!lacking.is_empty()).then(|| format!("the image defines no {}", lacking.join(", ")))
    }
}

/// What one call must leave behind.
#[derive(Debug, Clone)]
pub(crate) enum Expect {
    /// The MD5 state buffer holds these words.
    Md5State(BufId, State),
    /// The MD5 state buffer holds the words the vector file gives (`expect_state_hex`).
    Md5StateFile(BufId, State),
    /// The return register holds this `int` (compared as 32 bits: the upper half of the return
    /// register is unspecified for an `int` on x86_64 and aarch64, sign-extended on riscv64).
    RetI32(i32),
    /// The returned `int` is the one the vector file gives (`expect_ofs`).
    RetI32File(i32),
    /// The accumulator is congruent to this value mod 2^130-5 and within the limb bounds.
    Acc(BufId, Limbs26),
    /// The accumulator is congruent mod 2^130-5 to the value the vector file gives (`expect_acc`).
    AccFile(BufId, num_bigint::BigUint),
    /// The accumulator is bit-for-bit what it was before the call (no whole block): `acc` must
    /// equal the buffer `before` the call was copied from.
    AccUntouched { acc: BufId, before: BufId },
    /// The planner could not compute the expectation (a lab bug, never a pass).
    Unplanned(String),
    /// An expectation of an OpenSSL-contract call ([`crate::cases::openssl`]).
    OpenSsl(OsslExpect),
}

/// One planned call: its index in the batch, its label in findings and what it must leave.
#[derive(Debug, Clone)]
pub(crate) struct CallCheck {
    pub(super) call: usize,
    pub(super) label: String,
    pub(super) expects: Vec<Expect>,
    /// Arguments that are C `int`s: (argument index, parameter name).
    pub(super) ints: Vec<(usize, &'static str)>,
}

/// The last thing a case checks, after all its calls.
#[derive(Debug, Clone)]
pub(crate) enum Final {
    Md5Digest {
        state: BufId,
        digest: [u8; 16],
        what: &'static str,
    },
    Poly1305Tag {
        acc: BufId,
        r: Limbs26,
        tail: Vec<u8>,
        s: [u8; 16],
        tag: [u8; 16],
        what: String,
    },
    /// The last check of an OpenSSL-contract case ([`crate::cases::openssl`]).
    OpenSsl(OsslFinal),
}

/// A case laid into a batch: its calls and expectations. A case too long for one batch (a long
/// message, a chain) is laid out one segment at a time ([`crate::cases::procedure`]); a segment that
/// is not the last carries its outputs to the next.
#[derive(Debug, Clone)]
pub struct CasePlan {
    /// Vector set name.
    pub set: String,
    /// Case name (vector name, plus a suffix for split variants).
    pub name: String,
    /// Message length in bytes, for reports.
    pub msg_len: usize,
    pub(crate) calls: Vec<CallCheck>,
    pub(crate) last: Vec<Final>,
    /// More segments of the same case follow this one.
    pub more: bool,
    /// Writable buffers whose contents (as the kernel left them) the next segment starts from.
    pub(crate) carry: Vec<BufId>,
    /// Guest instructions the longest call of this plan may need (its blocks times a generous
    /// per-block count); the Unicorn budget is raised to this for the batch.
    pub call_instructions: u64,
}

impl CasePlan {
    /// The carried buffers as the kernel left them, for the next segment.
    pub fn carried(&self, batch: &Batch, resp: &[u8]) -> Vec<Vec<u8>> {
        self.carry.iter().map(|&b| batch.buffer(resp, b).to_vec()).collect()
    }
}

/// One `int` argument of a planned call: where it is and what it is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntArg {
    /// Call index in the batch.
    pub call: usize,
    /// Argument index (0-based: 2 is the third argument register).
    pub arg: usize,
    /// The C parameter name (`ofs`, `limit`).
    pub name: &'static str,
    /// The call's label in findings.
    pub label: String,
}

impl CasePlan {
    /// Every `int` argument of this case's calls (the MD5 `ofs` and `limit`).
    pub fn int_args(&self) -> Vec<IntArg> {
        self.calls
            .iter()
            .flat_map(|c| c.ints.iter().map(|&(arg, name)| IntArg { call: c.call, arg, name, label: c.label.clone() }))
            .collect()
    }
}

fn buf_ptr(b: BufId) -> Arg {
    Arg::Ptr(b, 0)
}

/// Instructions one MD5 block may take on any variant, with margin: measured 494-792
/// (`lab bench`, unaligned riscv64 the most), Zbb emulation adds no counted instructions.
pub const MD5_INSTRUCTIONS_PER_BLOCK: u64 = 4096;
/// Instructions one Poly1305 block may take, with margin (measured 30-43 per 16-byte block).
pub const POLY1305_INSTRUCTIONS_PER_BLOCK: u64 = 512;

/// Most input bytes one segment (one batch) of a case holds; a single call of a call entry
/// ([`crate::vectors::MAX_CALL_INPUT`]) always fits.
pub const SEGMENT_BYTES: usize = 16 << 20;
/// Most calls one segment holds (each has a state buffer and a guard page in guarded layouts).
pub const SEGMENT_CALLS: usize = 512;

/// The arguments of one MD5 stub call as the planner sees them.
pub(crate) struct Md5Args<'i> {
    pub stub: Md5Stub,
    /// The `buf` pointer.
    pub buf: Arg,
    /// The bytes at `buf` (for the reference).
    pub input: &'i [u8],
    pub ofs: i32,
    pub limit: i32,
    /// Appended to the `implCompress` label, e.g. `(buffered block 1)`.
    pub note: String,
}

/// Where a case's buffers go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Every buffer on pages of its own, flush against a guard page: inputs at `End` (catches
    /// over-reads) or `Start` (under-reads), or their misaligned twins `Misaligned(m)` /
    /// `Offset(m)`; outputs at `End`; inputs read-only. Unicorn checks the bytes on the first
    /// and last page of each buffer exactly, qemu and native the guard pages.
    Guarded(Placement),
    /// Packed without guards, the inputs this many bytes past a 64-byte boundary: the cheap
    /// misaligned twin of the guarded case, for sweeps.
    Offset(usize),
}

/// A planner's view of one case (segment) being laid into a batch.
pub(crate) struct Planner<'a, R> {
    pub b: &'a mut BatchBuilder,
    pub e: &'a Stubs,
    pub rng: &'a mut R,
    pub layout: Layout,
    pub calls: Vec<CallCheck>,
    /// Instructions the longest call needs (see [`CasePlan::call_instructions`]).
    pub instructions: u64,
    /// Put before every call label (`step 3: `).
    pub label_prefix: String,
    /// Where the reference's answers come from: computed, or replayed from another cell's
    /// planning of the same case ([`crate::cases::answers`]).
    pub tape: &'a mut Tape,
}

impl<'a, R: RngExt> Planner<'a, R> {
    /// A planner laying one case into `b`, taking the reference's answers from `tape`.
    pub fn new(b: &'a mut BatchBuilder, e: &'a Stubs, rng: &'a mut R, layout: Layout, tape: &'a mut Tape) -> Self {
        Planner { b, e, rng, layout, calls: Vec::new(), instructions: 0, label_prefix: String::new(), tape }
    }

    /// The plan of what was laid out.
    pub fn finish(self, set: &str, name: &str, msg_len: usize, last: Vec<Final>, carry: Vec<BufId>) -> CasePlan {
        CasePlan {
            set: set.into(),
            name: name.into(),
            msg_len,
            calls: self.calls,
            last,
            more: false,
            carry,
            call_instructions: self.instructions,
        }
    }

    /// A read-only input; `nth` staggers the offsets of a case's second input.
    pub fn input(&mut self, name: &'static str, bytes: &[u8], nth: usize) -> BufId {
        let placement = match self.layout {
            Layout::Guarded(p) => p,
            Layout::Offset(o) => Placement::Packed(o + 7 * nth),
        };
        self.b.buffer(name, bytes, false, placement)
    }

    /// A read-only input the kernel may assume naturally aligned (`r`, `int64_t[5]`).
    pub fn aligned_input(&mut self, name: &'static str, bytes: &[u8]) -> BufId {
        let placement = match self.layout {
            Layout::Guarded(_) => Placement::End,
            Layout::Offset(_) => Placement::Packed(0),
        };
        self.b.buffer(name, bytes, false, placement)
    }

    /// A writable output (state, accumulator).
    pub fn output(&mut self, name: &'static str, init: &[u8]) -> BufId {
        let placement = match self.layout {
            Layout::Guarded(_) => Placement::End,
            Layout::Offset(_) => Placement::Packed(0),
        };
        self.b.buffer(name, init, true, placement)
    }

    /// An `int` argument of a `kernel` call as the ABI passes it (garbage or sign-extended
    /// upper half), clean where the family's upper-bits policy is [`UpperBits::Warn`]. The
    /// garbage is drawn either way, so the cases' other draws do not depend on the policy.
    pub(crate) fn int(&mut self, kernel: Kernel, v: i32) -> Arg {
        let policy = self.e.upper_bits.unwrap_or_else(|| UpperBits::for_family(self.family(kernel)));
        Arg::Imm(self.b.abi().int32_arg_as(v, self.rng.random(), policy))
    }

    /// Adds a call that starts from a copy of `prev` into a fresh buffer `out`.
    pub(crate) fn call(
        &mut self,
        func: u64,
        args: [Arg; 4],
        prev: BufId,
        out: BufId,
        label: String,
        expects: Vec<Expect>,
    ) {
        let call = self.b.call_after_copy(func, args, self.rng.random(), prev, out);
        let label = if self.label_prefix.is_empty() { label } else { format!("{}{label}", self.label_prefix) };
        self.calls.push(CallCheck { call, label, expects, ints: Vec::new() });
    }

    /// Adds a call that starts from the buffers as laid out (no copy): `poly1305_init` into a
    /// fresh context, `poly1305_emit` reading the last one.
    pub(crate) fn call_plain(&mut self, func: u64, args: [Arg; 4], label: String, expects: Vec<Expect>) {
        let call = self.b.call(func, args, self.rng.random());
        let label = if self.label_prefix.is_empty() { label } else { format!("{}{label}", self.label_prefix) };
        self.calls.push(CallCheck { call, label, expects, ints: Vec::new() });
    }

    /// The contract family `kernel`'s calls go through (HotSpot's when the image has none).
    pub(crate) fn family(&self, kernel: Kernel) -> Family {
        self.e.family(kernel).unwrap_or(Family::HotSpot)
    }

    /// A fresh MD5 state buffer holding `init`: the state words (HotSpot, BoringSSL) or an
    /// `MD5_CTX` (OpenSSL).
    fn md5_state(&mut self, init: &[u8; 16]) -> BufId {
        match self.family(Kernel::Md5) {
            Family::HotSpot | Family::BoringSsl => self.output("state", init),
            Family::OpenSsl => self.openssl_md5_ctx(init),
        }
    }

    /// The bytes a Poly1305 chain starts from when nothing is carried in: `acc` as limbs
    /// (HotSpot) or a base 2^64 context with `r` (OpenSSL).
    pub(crate) fn poly1305_start(&self, acc: &Limbs26, r: &Limbs26) -> Vec<u8> {
        match self.family(Kernel::Poly1305) {
            Family::HotSpot | Family::BoringSsl => acc.to_bytes().to_vec(),
            Family::OpenSsl => self.openssl_poly_ctx(acc, r),
        }
    }

    /// The end of a Poly1305 tag after the whole blocks left their result in `out`: the host
    /// adds the tail and s (HotSpot), or the tail goes through the kernel and the tag is
    /// `poly1305_emit`'s (OpenSSL). Returns the buffer holding the last result and the check.
    #[allow(clippy::too_many_arguments)] // a tag's parts
    pub(crate) fn poly1305_finish(
        &mut self,
        out: BufId,
        acc: &mut Limbs26,
        r: Limbs26,
        tail: &[u8],
        s: [u8; 16],
        tag: [u8; 16],
        what: String,
    ) -> (BufId, Final) {
        match self.family(Kernel::Poly1305) {
            Family::HotSpot | Family::BoringSsl => {
                (out, Final::Poly1305Tag { acc: out, r, tail: tail.to_vec(), s, tag, what })
            }
            Family::OpenSsl => self.openssl_poly_finish(out, acc, r, tail, s, tag, what),
        }
    }

    /// One MD5 stub call on `state` (the reference's state, advanced); returns the buffer
    /// holding the kernel's new state. `file` adds the vector file's expectations.
    pub fn md5_step(&mut self, c: Md5Args, prev: BufId, state: &mut State, file: &Md5Expect) -> BufId {
        match self.family(Kernel::Md5) {
            Family::OpenSsl => return self.openssl_md5_step(c, prev, state, file),
            Family::BoringSsl => return self.boringssl_md5_step(c, prev, state, file),
            Family::HotSpot => {}
        }
        let out = self.output("state", &[0u8; 16]);
        let (func, args, label, mut expects) = match c.stub {
            Md5Stub::CompressMb => {
                self.instructions =
                    self.instructions.max(md5::mb_blocks(c.ofs, c.limit) as u64 * MD5_INSTRUCTIONS_PER_BLOCK);
                // The loader and the planner give the blocks the call takes; a short input
                // would be a lab bug, reported as a not-run finding rather than a panic.
                let ret = self.tape.compress_mb(state, c.input, c.ofs, c.limit);
                let args = [c.buf, buf_ptr(out), self.int(Kernel::Md5, c.ofs), self.int(Kernel::Md5, c.limit)];
                let label = format!("{MD5_IMPL_COMPRESS_MB}(ofs={}, limit={})", c.ofs, c.limit);
                let expects = match ret {
                    Some(ret) => vec![Expect::Md5State(out, *state), Expect::RetI32(ret)],
                    None => vec![Expect::Unplanned(format!("the reference had {} bytes for this call", c.input.len()))],
                };
                (self.e.md5_compress_mb, args, label, expects)
            }
            Md5Stub::Compress => {
                self.instructions = self.instructions.max(MD5_INSTRUCTIONS_PER_BLOCK);
                let expects = match c.input.get(..64) {
                    Some(block) => {
                        self.tape.compress(state, block);
                        vec![Expect::Md5State(out, *state)]
                    }
                    None => vec![Expect::Unplanned(format!("the reference had {} bytes for this call", c.input.len()))],
                };
                let args = [c.buf, buf_ptr(out), Arg::Imm(self.rng.random()), Arg::Imm(self.rng.random())];
                (self.e.md5_compress, args, format!("{MD5_IMPL_COMPRESS}{}", c.note), expects)
            }
        };
        expects.extend(file.state.map(|s| Expect::Md5StateFile(out, s)));
        expects.extend(file.ofs.map(Expect::RetI32File));
        let func = func.unwrap_or_default(); // Stubs::missing keeps kernels without symbols out
        self.call(func, args, prev, out, label, expects);
        if c.stub == Md5Stub::CompressMb {
            if let Some(last) = self.calls.last_mut() {
                last.ints = vec![(2, "ofs"), (3, "limit")];
            }
        }
        out
    }

    /// One segment of a DigestBase-driven digest: takes steps from `steps` while they fit
    /// ([`SEGMENT_BYTES`], [`SEGMENT_CALLS`]), starting from the kernel state `init` (the
    /// reference's is `state`). The input buffer holds the message from the first
    /// `implCompressMB` block of the segment to the last one it reads (the rest reaches the
    /// kernel through DigestBase's buffer), so a read past it leaves the buffer. Returns the
    /// buffer holding the kernel's last state.
    pub fn md5_digest_segment(
        &mut self,
        steps: &mut std::iter::Peekable<md5::DigestSteps>,
        msg: &Message,
        init: &[u8; 16],
        state: &mut State,
    ) -> BufId {
        let mut taken: Vec<Step> = Vec::new();
        let mut span: Option<std::ops::Range<usize>> = None;
        while let Some(next) = steps.peek() {
            let grown = match (next.mb_range(), &span) {
                (Some(r), Some(s)) => Some(s.start..r.end),
                (Some(r), None) => Some(r),
                (None, s) => s.clone(),
            };
            let too_big = grown.as_ref().is_some_and(|g| g.len() > SEGMENT_BYTES);
            if !taken.is_empty() && (taken.len() >= SEGMENT_CALLS || too_big) {
                break;
            }
            span = grown;
            taken.extend(steps.next());
        }
        let span = span.unwrap_or(0..0);
        let bytes = msg.read(span.start, span.len());
        let input = self.input("input", &bytes, 0);
        let host: Vec<u8> = taken
            .iter()
            .filter_map(|s| match s {
                Step::Single { block, .. } => Some(&block[..]),
                Step::Mb { .. } => None,
            })
            .flatten()
            .copied()
            .collect();
        let host_buf = self.input("buffer", &host, 1);
        let mut prev = self.md5_state(init);
        let mut host_at = 0;
        for step in &taken {
            let args = match step {
                Step::Mb { start, ofs, limit, .. } => {
                    let at = start - span.start;
                    let (buf, input) = (Arg::Ptr(input, at), &bytes[at..]);
                    Md5Args { stub: Md5Stub::CompressMb, buf, input, ofs: *ofs, limit: *limit, note: String::new() }
                }
                Step::Single { index, .. } => {
                    host_at += 64;
                    Md5Args {
                        stub: Md5Stub::Compress,
                        buf: Arg::Ptr(host_buf, host_at - 64),
                        input: &host[host_at - 64..host_at],
                        ofs: 0,
                        limit: 0,
                        note: format!("(buffered block {index})"),
                    }
                }
            };
            prev = self.md5_step(args, prev, state, &Md5Expect::default());
        }
        prev
    }

    /// One MD5 call entry. The input holds exactly the blocks the call processes, so a read past
    /// the last block leaves the buffer.
    pub fn md5_call(&mut self, c: &Md5Call) -> BufId {
        let used = if c.stub == Md5Stub::Compress { 64 } else { md5::mb_blocks(c.ofs, c.limit) * 64 };
        let bytes = c.input.read(0, used);
        let input = self.input("input", &bytes, 0);
        let prev = self.md5_state(&md5::state_to_bytes(&c.state));
        let mut state = c.state;
        let args = Md5Args {
            stub: c.stub,
            buf: buf_ptr(input),
            input: &bytes,
            ofs: c.ofs,
            limit: c.limit,
            note: String::new(),
        };
        self.md5_step(args, prev, &mut state, &c.expect)
    }

    /// A chain of `processBlocks` calls with the given `length` arguments over `msg` from byte
    /// `at`, the accumulator passed on by copies from the kernel's `init` (the reference's is
    /// `acc`); `expect` (from the file) is checked after the last call. Returns the last
    /// accumulator buffer. The input buffer holds only the whole blocks the calls take, so a
    /// read past the last one leaves it.
    #[allow(clippy::too_many_arguments)] // one call chain's inputs; a struct would only rename them
    pub fn poly1305_chain(
        &mut self,
        init: &[u8],
        acc: &mut Limbs26,
        r: Limbs26,
        msg: &Message,
        at: usize,
        lengths: &[i64],
        expect: Option<&num_bigint::BigUint>,
    ) -> BufId {
        if self.family(Kernel::Poly1305) == Family::OpenSsl {
            return self.openssl_poly_chain(init, acc, r, msg, at, lengths, expect, 1);
        }
        let used: usize = lengths.iter().map(|&l| vectors::whole_blocks(l) * 16).sum();
        let bytes = msg.read(at, used);
        let input = self.input("input", &bytes, 0);
        let r_buf = self.aligned_input("r", &r.to_bytes());
        let mut prev = self.output("acc", init);
        let mut off = 0;
        // Inside the JDK's call domain the stub gets what `Poly1305.engineUpdate` passes: the
        // whole blocks of the length (the contract ignores a tail, so the result is the same).
        let jdk = crate::domain::current() == crate::domain::Domain::Jdk;
        for (i, &len) in lengths.iter().enumerate() {
            let len = if jdk { crate::domain::jdk_length(len) } else { len };
            let out = self.output("acc", &[0u8; 40]);
            let args = [Arg::Ptr(input, off), Arg::Imm(len as u64), buf_ptr(out), buf_ptr(r_buf)];
            let take = vectors::whole_blocks(len) * 16;
            self.instructions = self.instructions.max((take / 16) as u64 * POLY1305_INSTRUCTIONS_PER_BLOCK);
            let mut expects = vec![if take == 0 {
                Expect::AccUntouched { acc: out, before: prev }
            } else {
                *acc = self.tape.process_blocks(acc, &r, bytes.get(off..off + take).unwrap_or_default());
                Expect::Acc(out, *acc)
            }];
            if i + 1 == lengths.len() {
                expects.extend(expect.map(|v| Expect::AccFile(out, v.clone())));
            }
            let label = format!("{POLY1305_PROCESS_BLOCKS}(input+{}, length={len})", at + off);
            self.call(self.e.poly1305.unwrap_or_default(), args, prev, out, label, expects);
            prev = out;
            off += take;
        }
        prev
    }
}

/// Random cut points at 16-byte boundaries inside a message of `blocks` whole blocks.
pub(crate) fn random_cuts(rng: &mut impl RngExt, blocks: usize) -> Vec<usize> {
    if blocks < 2 {
        return Vec::new();
    }
    let mut c: Vec<usize> =
        (0..rng.random_range(1..=blocks.min(4))).map(|_| rng.random_range(1..blocks) * 16).collect();
    c.sort_unstable();
    c.dedup();
    c
}

/// The cases of a vector, in order: one with every buffer flush against a guard page, one with
/// the inputs guarded but `misalign` bytes (1..64) past a 64-byte boundary, then one packed case
/// per offset of the vector (Poly1305 tags: split over several calls).
pub fn layouts(v: &Vector, flush: Placement, misalign: usize) -> impl Iterator<Item = Layout> + '_ {
    // The misaligned twin keeps the flush side: the end less than 64 bytes below the guard, or
    // the start `misalign` bytes above it.
    let twin = match flush {
        Placement::Start => Placement::Offset(misalign),
        _ => Placement::Misaligned(misalign),
    };
    [Layout::Guarded(flush), Layout::Guarded(twin)].into_iter().chain(v.offsets.iter().map(|&o| Layout::Offset(o)))
}

/// How many cases a vector makes: the guarded case, its misaligned twin and one per offset.
pub fn cases_of(v: &Vector) -> usize {
    2 + v.offsets.len()
}

/// Suffix of the guarded case's name ([`case_names`]): every buffer flush against a guard page.
pub const GUARDED: &str = " [guarded]";

/// Suffix of the misaligned guarded case's name ([`case_names`]).
pub const MISALIGNED_GUARD: &str = " [guarded, misaligned]";

/// The case names of `v`, in planning order: the vector's name and [`GUARDED`] for the guarded
/// case, the name and [`MISALIGNED_GUARD`] for its misaligned twin (its misalignment comes from
/// the seed), then `@+N` per offset (` [split]` added for a Poly1305 tag's split-call cases).
/// Stable across seeds, so CI history can follow a case.
pub fn case_names(v: &Vector) -> Vec<String> {
    let split = if matches!(v.body, Body::Poly1305Tag { .. }) { " [split]" } else { "" };
    [format!("{}{GUARDED}", v.name), format!("{}{MISALIGNED_GUARD}", v.name)]
        .into_iter()
        .chain(v.offsets.iter().map(|o| format!("{} @+{o}{split}", v.name)))
        .collect()
}

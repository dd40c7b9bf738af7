//! Cases and checks: a vector becomes a few kernel calls in a batch plus what to expect of each,
//! and the results come back as findings, written as sentences (BoringSSL's abi_test style):
//! a wrong state after a named call, a register not restored, a fault with its place.
//!
//! Every call is checked, not only the last one: multi-call cases start each call from a copy of
//! the previous call's output (the driver's `copy` field), so every intermediate state stays
//! visible.

use rand::Rng;

use crate::abi::{Abi, X86_RFLAGS_DF};
use crate::backend::{BatchRun, Fault, FaultKind};
use crate::batch::{Arg, Batch, BatchBuilder, BufId, Placement};
use crate::image::Image;
use crate::reference::md5::{self, State, Step};
use crate::reference::poly1305::{self, Limbs26};
use crate::variant::{Arch, Kernel, MD5_IMPL_COMPRESS, MD5_IMPL_COMPRESS_MB, POLY1305_PROCESS_BLOCKS};
use crate::vectors::{self, Body, Md5Call, Md5Stub, Vector};

/// Kernel entry points found in an image.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// `md5_implCompress`.
    pub md5_compress: Option<u64>,
    /// `md5_implCompressMB`.
    pub md5_compress_mb: Option<u64>,
    /// `poly1305_processBlocks`.
    pub poly1305: Option<u64>,
}

impl Entry {
    /// Looks the stub symbols up in `image`.
    pub fn of(image: &Image) -> Entry {
        let a = |s| image.symbol(s).map(|s| s.addr);
        Entry {
            md5_compress: a(MD5_IMPL_COMPRESS),
            md5_compress_mb: a(MD5_IMPL_COMPRESS_MB),
            poly1305: a(POLY1305_PROCESS_BLOCKS),
        }
    }

    /// Why `kernel` cannot run from this image, if it cannot.
    pub fn missing(&self, kernel: Kernel) -> Option<String> {
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
enum Expect {
    /// The MD5 state buffer holds these words.
    Md5State(BufId, State),
    /// The return register holds this `int` (compared as 32 bits: the upper half of the return
    /// register is unspecified for an `int` on x86_64 and aarch64, sign-extended on riscv64).
    RetI32(i32),
    /// The accumulator is congruent to this value mod 2^130-5 and within the limb bounds.
    Acc(BufId, Limbs26),
    /// The accumulator is bit-for-bit what it was before the call (no whole block): `acc` must
    /// equal the buffer `before` the call was copied from.
    AccUntouched { acc: BufId, before: BufId },
}

#[derive(Debug, Clone)]
struct CallCheck {
    call: usize,
    label: String,
    expects: Vec<Expect>,
}

/// The last thing a case checks, after all its calls.
#[derive(Debug, Clone)]
enum Final {
    Md5Digest { state: BufId, digest: [u8; 16] },
    Poly1305Tag { acc: BufId, r: Limbs26, tail: Vec<u8>, s: [u8; 16], tag: [u8; 16] },
}

/// A case laid into a batch: its calls and expectations.
#[derive(Debug, Clone)]
pub struct CasePlan {
    /// Vector set name.
    pub set: String,
    /// Case name (vector name, plus a suffix for split variants).
    pub name: String,
    /// Message length in bytes, for reports.
    pub msg_len: usize,
    calls: Vec<CallCheck>,
    last: Option<Final>,
}

/// What kind of problem a finding reports (JUnit failure types and report grouping use it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// A wrong state, digest, tag, return value, or accumulator value.
    Value,
    /// Output limbs outside the contract bounds.
    Bounds,
    /// A psABI violation: callee-saved register, stack pointer, direction flag.
    Abi,
    /// An access outside the call's buffers and stack budget (guard page, read-only input,
    /// unmapped memory).
    Memory,
    /// An instruction outside the variant's ISA (static scan).
    Isa,
    /// A system call from a kernel.
    Syscall,
    /// The kernel faulted otherwise (illegal instruction, misaligned access, trap, ...).
    Fault,
    /// The kernel ran past its budget.
    Hang,
    /// The call never ran (an earlier failure abandoned the batch) or the backend failed.
    NotRun,
}

impl Class {
    /// Lower-case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Class::Value => "value",
            Class::Bounds => "bounds",
            Class::Abi => "abi",
            Class::Memory => "memory",
            Class::Isa => "isa",
            Class::Syscall => "syscall",
            Class::Fault => "fault",
            Class::Hang => "hang",
            Class::NotRun => "not-run",
        }
    }
}

/// A finding: one sentence about what went wrong, and its class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The kind of problem.
    pub class: Class,
    /// The sentence: call, what, expected and actual.
    pub text: String,
}

impl Finding {
    /// A finding of `class` saying `text`.
    pub fn new(class: Class, text: impl Into<String>) -> Finding {
        Finding { class, text: text.into() }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn buf_ptr(b: BufId) -> Arg {
    Arg::Ptr(b, 0)
}

/// The arguments of one MD5 stub call as the planner sees them.
struct Md5Args<'i> {
    stub: Md5Stub,
    /// The `buf` pointer.
    buf: Arg,
    /// The bytes at `buf` (for the reference).
    input: &'i [u8],
    ofs: i32,
    limit: i32,
    /// Appended to the `implCompress` label, e.g. `(buffered block 1)`.
    note: String,
}

/// Where a case's buffers go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Every buffer on pages of its own, flush against a guard page: inputs at `End` (catches
    /// over-reads) or `Start` (under-reads), outputs at `End`; inputs read-only.
    Guarded(Placement),
    /// Packed without guards, the inputs this many bytes past a 64-byte boundary: the cheap
    /// misaligned twin of the guarded case, for sweeps.
    Offset(usize),
}

/// A planner's view of one case being laid into a batch.
struct Planner<'a, R> {
    b: &'a mut BatchBuilder,
    e: &'a Entry,
    rng: &'a mut R,
    layout: Layout,
    calls: Vec<CallCheck>,
}

impl<R: Rng> Planner<'_, R> {
    /// A read-only input; `nth` staggers the offsets of a case's second input.
    fn input(&mut self, name: &str, bytes: &[u8], nth: usize) -> BufId {
        let placement = match self.layout {
            Layout::Guarded(p) => p,
            Layout::Offset(o) => Placement::Packed(o + 7 * nth),
        };
        self.b.buffer(name, bytes, false, placement)
    }

    /// A read-only input the kernel may assume naturally aligned (`r`, `int64_t[5]`).
    fn aligned_input(&mut self, name: &str, bytes: &[u8]) -> BufId {
        let placement = match self.layout {
            Layout::Guarded(_) => Placement::End,
            Layout::Offset(_) => Placement::Packed(0),
        };
        self.b.buffer(name, bytes, false, placement)
    }

    /// A writable output (state, accumulator).
    fn output(&mut self, name: &str, init: &[u8]) -> BufId {
        let placement = match self.layout {
            Layout::Guarded(_) => Placement::End,
            Layout::Offset(_) => Placement::Packed(0),
        };
        self.b.buffer(name, init, true, placement)
    }

    /// An `int` argument as the ABI passes it (garbage or sign-extended upper half).
    fn int(&mut self, v: i32) -> Arg {
        Arg::Imm(self.b.abi().int32_arg(v, self.rng.gen()))
    }

    /// Adds a call that starts from a copy of `prev` into a fresh buffer `out`.
    fn call(&mut self, func: u64, args: [Arg; 4], prev: BufId, out: BufId, label: String, expects: Vec<Expect>) {
        let call = self.b.call_after_copy(func, args, self.rng.gen(), prev, out);
        self.calls.push(CallCheck { call, label, expects });
    }

    /// One MD5 stub call on `state`; returns the buffer holding the new state.
    fn md5_step(&mut self, c: Md5Args, prev: BufId, state: &mut State) -> BufId {
        let out = self.output("state", &[0u8; 16]);
        let (func, args, label, expects) = match c.stub {
            Md5Stub::CompressMb => {
                let ret = md5::compress_mb(state, c.input, c.ofs, c.limit);
                let args = [c.buf, buf_ptr(out), self.int(c.ofs), self.int(c.limit)];
                let label = format!("{MD5_IMPL_COMPRESS_MB}(ofs={}, limit={})", c.ofs, c.limit);
                (self.e.md5_compress_mb, args, label, vec![Expect::Md5State(out, *state), Expect::RetI32(ret)])
            }
            Md5Stub::Compress => {
                md5::compress(state, &c.input[..64]);
                let args = [c.buf, buf_ptr(out), Arg::Imm(self.rng.gen()), Arg::Imm(self.rng.gen())];
                (
                    self.e.md5_compress,
                    args,
                    format!("{MD5_IMPL_COMPRESS}{}", c.note),
                    vec![Expect::Md5State(out, *state)],
                )
            }
        };
        self.call(func.expect("md5 symbols checked"), args, prev, out, label, expects);
        out
    }

    /// A DigestBase-driven digest of `msg` fed in `updates`. The message buffer ends with the
    /// last block an `implCompressMB` call reads (the rest reaches the kernel through
    /// DigestBase's buffer), so a read past it leaves the buffer.
    fn md5_digest(&mut self, msg: &[u8], updates: &[usize], digest: [u8; 16]) -> Final {
        let (steps, host) = md5::digest_plan_updates(msg, updates);
        let read = steps.iter().filter_map(|s| match *s {
            Step::Mb { start, ofs, ret, .. } => Some(start + (ret - ofs) as usize),
            Step::Single { .. } => None,
        });
        let input = self.input("input", &msg[..read.max().unwrap_or(0)], 0);
        let host_buf = self.input("buffer", &host, 1);
        let mut state = md5::IV;
        let mut prev = self.output("state", &md5::state_to_bytes(&state));
        for step in steps {
            let args = match step {
                Step::Mb { start, ofs, limit, .. } => {
                    let buf = Arg::Ptr(input, start);
                    Md5Args { stub: Md5Stub::CompressMb, buf, input: &msg[start..], ofs, limit, note: String::new() }
                }
                Step::Single { host_offset } => Md5Args {
                    stub: Md5Stub::Compress,
                    buf: Arg::Ptr(host_buf, host_offset),
                    input: &host[host_offset..host_offset + 64],
                    ofs: 0,
                    limit: 0,
                    note: format!("(buffered block {})", host_offset / 64),
                },
            };
            prev = self.md5_step(args, prev, &mut state);
        }
        Final::Md5Digest { state: prev, digest }
    }

    /// One MD5 call entry. The input holds exactly the blocks the call processes, so a read past
    /// the last block leaves the buffer.
    fn md5_call(&mut self, c: &Md5Call) {
        let used = if c.stub == Md5Stub::Compress { 64 } else { md5::mb_blocks(c.ofs, c.limit) * 64 };
        let input = self.input("input", &c.input[..used], 0);
        let prev = self.output("state", &md5::state_to_bytes(&c.state));
        let mut state = c.state;
        let args = Md5Args {
            stub: c.stub,
            buf: buf_ptr(input),
            input: &c.input,
            ofs: c.ofs,
            limit: c.limit,
            note: String::new(),
        };
        self.md5_step(args, prev, &mut state);
    }

    /// A chain of `processBlocks` calls with the given `length` arguments, accumulator passed on
    /// by copies; returns the last accumulator buffer. The input buffer holds only the whole
    /// blocks the calls take, so a read past the last one leaves it.
    fn poly1305_chain(&mut self, acc: Limbs26, r: Limbs26, msg: &[u8], lengths: &[i64]) -> BufId {
        let used: usize = lengths.iter().map(|&l| vectors::whole_blocks(l) * 16).sum();
        let input = self.input("input", &msg[..used], 0);
        let r_buf = self.aligned_input("r", &r.to_bytes());
        let mut acc = acc;
        let mut prev = self.output("acc", &acc.to_bytes());
        let mut at = 0;
        for &len in lengths {
            let out = self.output("acc", &[0u8; 40]);
            let args = [Arg::Ptr(input, at), Arg::Imm(len as u64), buf_ptr(out), buf_ptr(r_buf)];
            let take = vectors::whole_blocks(len) * 16;
            let expect = if take == 0 {
                Expect::AccUntouched { acc: out, before: prev }
            } else {
                acc = poly1305::process_blocks(&acc, &r, &msg[at..at + take]);
                Expect::Acc(out, acc)
            };
            let label = format!("{POLY1305_PROCESS_BLOCKS}(input+{at}, length={len})");
            self.call(self.e.poly1305.expect("poly1305 symbol checked"), args, prev, out, label, vec![expect]);
            prev = out;
            at += take;
        }
        prev
    }

    /// A tag vector: whole blocks through the kernel (one call, or split at `cuts`), then the
    /// tail block and `+ s` on the host.
    fn poly1305_tag(&mut self, key: &[u8; 32], msg: &[u8], tag: [u8; 16], cuts: &[usize]) -> Final {
        let r = poly1305::clamp_r(key[..16].try_into().expect("16 bytes"));
        let whole = msg.len() / 16 * 16;
        let mut bounds: Vec<usize> = cuts.iter().copied().filter(|&c| c > 0 && c < whole).collect();
        bounds.push(whole);
        let lengths: Vec<i64> =
            bounds.iter().scan(0, |at, &end| Some((end - std::mem::replace(at, end)) as i64)).collect();
        let acc = self.poly1305_chain(Limbs26::default(), r, msg, &lengths);
        let s = key[16..].try_into().expect("16 bytes");
        Final::Poly1305Tag { acc, r, tail: msg[whole..].to_vec(), s, tag }
    }
}

/// Random cut points at 16-byte boundaries inside a message of `blocks` whole blocks.
fn random_cuts(rng: &mut impl Rng, blocks: usize) -> Vec<usize> {
    if blocks < 2 {
        return Vec::new();
    }
    let mut c: Vec<usize> = (0..rng.gen_range(1..=blocks.min(4))).map(|_| rng.gen_range(1..blocks) * 16).collect();
    c.sort_unstable();
    c.dedup();
    c
}

/// The cases of a vector, in order: one with every buffer flush against a guard page, then one
/// packed case per offset of the vector (Poly1305 tags: split over several calls).
fn layouts(v: &Vector, flush: Placement) -> impl Iterator<Item = Layout> + '_ {
    std::iter::once(Layout::Guarded(flush)).chain(v.offsets.iter().map(|&o| Layout::Offset(o)))
}

/// How many cases a vector makes: the guarded case and one per offset.
pub fn cases_of(v: &Vector) -> usize {
    1 + v.offsets.len()
}

/// The case names of `v`, in planning order: `NAME [guarded]` for the guarded case (every
/// buffer flush against a guard page), then `NAME @+N` per offset (` [split]` added for a
/// Poly1305 tag's split-call cases). Stable across seeds, so CI history can follow a case.
pub fn case_names(v: &Vector) -> Vec<String> {
    let split = if matches!(v.body, Body::Poly1305Tag { .. }) { " [split]" } else { "" };
    std::iter::once(format!("{} [guarded]", v.name))
        .chain(v.offsets.iter().map(|o| format!("{} @+{o}{split}", v.name)))
        .collect()
}

/// Plans every case of `v` into `b` (see [`cases_of`] and [`case_names`]); `flush` says which
/// end of its pages the guarded case's inputs touch ([`Placement::End`] or [`Placement::Start`]).
pub fn plan_vector(
    b: &mut BatchBuilder,
    e: &Entry,
    rng: &mut impl Rng,
    set: &str,
    v: &Vector,
    flush: Placement,
) -> Vec<CasePlan> {
    let names = case_names(v);
    layouts(v, flush)
        .zip(names)
        .map(|(layout, name)| {
            let mut p = Planner { b: &mut *b, e, rng: &mut *rng, layout, calls: Vec::new() };
            let last = match &v.body {
                Body::Md5Digest { msg, digest, updates } => Some(p.md5_digest(msg, updates, *digest)),
                Body::Md5Call(c) => {
                    p.md5_call(c);
                    None
                }
                Body::Poly1305Tag { key, msg, tag } => {
                    let split = matches!(layout, Layout::Offset(_));
                    let cuts = if split { random_cuts(p.rng, msg.len() / 16) } else { Vec::new() };
                    Some(p.poly1305_tag(key, msg, *tag, &cuts))
                }
                Body::Poly1305Call(c) => {
                    p.poly1305_chain(c.acc, c.r, &c.input, &c.lengths);
                    None
                }
            };
            CasePlan { set: set.into(), name, msg_len: v.msg_len(), calls: p.calls, last }
        })
        .collect()
}

/// Checks one planned case against a finished batch; returns every finding (empty = pass).
pub fn check(plan: &CasePlan, batch: &Batch, run: &BatchRun, abi: &Abi, image: &Image) -> Vec<Finding> {
    let mut findings = Vec::new();
    for c in &plan.calls {
        let rec = batch.record(&run.resp, c.call);
        if let Some(f) = run.fault_of(c.call) {
            findings.push(describe_fault(&c.label, f, image, batch));
            continue;
        }
        if !rec.completed {
            let why = match (run.batch_fault(), &run.abandoned) {
                (Some(f), _) => describe_fault("batch", f, image, batch).text,
                (None, Some(reason)) => reason.clone(),
                (None, None) => "the batch stopped before it".into(),
            };
            findings.push(Finding::new(Class::NotRun, format!("{} did not run: {why}", c.label)));
            continue;
        }
        findings.extend(abi_findings(&c.label, &rec, abi));
        for e in &c.expects {
            findings.extend(expect_finding(&c.label, e, batch, &run.resp, rec.ret));
        }
    }
    if let (true, Some(last)) = (findings.is_empty(), &plan.last) {
        findings.extend(final_finding(last, batch, &run.resp));
    }
    findings
}

/// The sentence for a fault: what, where the address lies relative to the call's buffers and
/// stack (`1 byte past the end of input`), the place (symbol+offset, pc), the instruction
/// disassembled, and the backend's words.
pub fn describe_fault(label: &str, f: &Fault, image: &Image, batch: &Batch) -> Finding {
    let place =
        f.pc.map(|pc| {
            let insn = image.instruction_at(pc).map(|t| format!(": `{t}`")).unwrap_or_default();
            format!(" at {} (pc {pc:#x}){insn}", image.symbolize(pc))
        })
        .unwrap_or_default();
    let addr = match f.kind {
        FaultKind::Memory { addr: Some(a), .. } | FaultKind::Bus { addr: Some(a) } => Some(a),
        _ => None,
    };
    let whereabouts = addr.and_then(|a| batch.locate(a)).map(|w| format!(", {w}")).unwrap_or_default();
    let detail = if f.detail.is_empty() { String::new() } else { format!(" [{}]", f.detail) };
    let class = match f.kind {
        FaultKind::Hang(_) | FaultKind::InstructionBudget(_) => Class::Hang,
        FaultKind::Memory { .. } => Class::Memory,
        FaultKind::SystemCall => Class::Syscall,
        _ => Class::Fault,
    };
    Finding::new(class, format!("{label}: {}{whereabouts}{place}{detail}", f.kind))
}

/// Callee-saved registers, stack pointer and (x86_64) the direction flag after a call.
fn abi_findings(label: &str, rec: &crate::batch::CallRecord, abi: &Abi) -> Vec<Finding> {
    let mut out: Vec<Finding> = abi
        .saved
        .iter()
        .enumerate()
        .filter(|&(i, _)| rec.saved[i] != Abi::poison(rec.seed, i))
        .map(|(i, name)| {
            Finding::new(
                Class::Abi,
                format!(
                    "{label}: {name} was not restored: before {:#018x}, after {:#018x} ({})",
                    Abi::poison(rec.seed, i),
                    rec.saved[i],
                    abi.source
                ),
            )
        })
        .collect();
    if rec.sp_after != rec.sp_before {
        out.push(Finding::new(
            Class::Abi,
            format!("{label}: {} was not restored: before {:#x}, after {:#x}", abi.sp, rec.sp_before, rec.sp_after),
        ));
    }
    if abi.arch == Arch::X86_64 && rec.flags & X86_RFLAGS_DF != 0 {
        out.push(Finding::new(
            Class::Abi,
            format!("{label}: the direction flag (DF) is set on return ({})", abi.source),
        ));
    }
    out
}

fn expect_finding(label: &str, e: &Expect, batch: &Batch, resp: &[u8], ret: u64) -> Option<Finding> {
    match e {
        Expect::Md5State(buf, want) => {
            let got = md5::state_from_bytes(batch.buffer(resp, *buf));
            (got != *want).then(|| {
                Finding::new(Class::Value, format!("{label}: state expected {}, got {}", words(want), words(&got)))
            })
        }
        Expect::RetI32(want) => {
            let got = ret as u32 as i32;
            (got != *want).then(|| Finding::new(Class::Value, format!("{label}: returned ofs {got}, expected {want}")))
        }
        Expect::Acc(buf, want) => {
            let got = Limbs26::from_bytes(batch.buffer(resp, *buf));
            if let Some((i, l)) = got.first_out_of_bounds() {
                Some(Finding::new(Class::Bounds, format!("{label}: acc limb {i} = {l:#x} is out of bounds (limbs 0-3 < 2^26, limb 4 < 2^27); acc = {got}")))
            } else if got.reduced() != want.reduced() {
                Some(Finding::new(
                    Class::Value,
                    format!(
                        "{label}: acc mod 2^130-5 expected {:#x}, got {:#x} (limbs {got})",
                        want.reduced(),
                        got.reduced()
                    ),
                ))
            } else {
                None
            }
        }
        Expect::AccUntouched { acc, before } => {
            let before = Limbs26::from_bytes(batch.buffer(resp, *before));
            let got = Limbs26::from_bytes(batch.buffer(resp, *acc));
            (got != before).then(|| {
                Finding::new(
                    Class::Value,
                    format!("{label}: acc must be untouched for length < 16: was {before}, now {got}"),
                )
            })
        }
    }
}

fn final_finding(last: &Final, batch: &Batch, resp: &[u8]) -> Option<Finding> {
    match last {
        Final::Md5Digest { state, digest } => {
            let got = md5::state_to_digest(&md5::state_from_bytes(batch.buffer(resp, *state)));
            (got != *digest).then(|| {
                Finding::new(Class::Value, format!("digest expected {}, got {}", hex::encode(digest), hex::encode(got)))
            })
        }
        Final::Poly1305Tag { acc, r, tail, s, tag } => {
            let got = poly1305::finish(&Limbs26::from_bytes(batch.buffer(resp, *acc)), r, tail, s);
            (got != *tag).then(|| {
                Finding::new(Class::Value, format!("tag expected {}, got {}", hex::encode(tag), hex::encode(got)))
            })
        }
    }
}

fn words(s: &State) -> String {
    format!("[{:08x} {:08x} {:08x} {:08x}]", s[0], s[1], s[2], s[3])
}

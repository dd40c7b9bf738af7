//! Cases and checks: a vector becomes a few kernel calls in a batch plus what to expect of each,
//! and the results come back as findings, written as sentences (BoringSSL's abi_test style):
//! a wrong state after a named call, a register not restored, a fault with its place.
//!
//! Every call is checked, not only the last one: multi-call cases start each call from a copy of
//! the previous call's output (the driver's `copy` field), so every intermediate state stays
//! visible.

use rand::Rng;

use crate::abi::{Abi, X86_RFLAGS_DF};
use crate::backend::BatchRun;
use crate::batch::{Arg, Batch, BatchBuilder, BufId};
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
    /// The kernel faulted (illegal instruction, memory, system call, ...).
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

/// A planner's view of one case being laid into a batch.
struct Planner<'a, R> {
    b: &'a mut BatchBuilder,
    e: &'a Entry,
    rng: &'a mut R,
    calls: Vec<CallCheck>,
}

impl<R: Rng> Planner<'_, R> {
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
        let out = self.b.output(&[0u8; 16]);
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

    /// A DigestBase-driven digest of `msg` fed in `updates`, message at `misalign`.
    fn md5_digest(&mut self, msg: &[u8], updates: &[usize], digest: [u8; 16], misalign: usize) -> Final {
        let (steps, host) = md5::digest_plan_updates(msg, updates);
        let input = self.b.input(msg, misalign);
        let host_buf = self.b.input(&host, (misalign + 7) % 64);
        let mut state = md5::IV;
        let mut prev = self.b.output(&md5::state_to_bytes(&state));
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
    fn md5_call(&mut self, c: &Md5Call, misalign: usize) {
        let used = if c.stub == Md5Stub::Compress { 64 } else { md5::mb_blocks(c.ofs, c.limit) * 64 };
        let input = self.b.input(&c.input[..used], misalign);
        let prev = self.b.output(&md5::state_to_bytes(&c.state));
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
    /// by copies; returns the last accumulator buffer and its expected value.
    fn poly1305_chain(
        &mut self,
        acc: Limbs26,
        r: Limbs26,
        msg: &[u8],
        lengths: &[i64],
        misalign: usize,
    ) -> (BufId, Limbs26) {
        let input = self.b.input(msg, misalign);
        let r_buf = self.b.input(&r.to_bytes(), 0);
        let mut acc = acc;
        let mut prev = self.b.output(&acc.to_bytes());
        let mut at = 0;
        for &len in lengths {
            let out = self.b.output(&[0u8; 40]);
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
        (prev, acc)
    }

    /// A tag vector: whole blocks through the kernel (one call, or split at `cuts`), then the
    /// tail block and `+ s` on the host.
    fn poly1305_tag(&mut self, key: &[u8; 32], msg: &[u8], tag: [u8; 16], misalign: usize, cuts: &[usize]) -> Final {
        let r = poly1305::clamp_r(key[..16].try_into().expect("16 bytes"));
        let whole = msg.len() / 16 * 16;
        let mut bounds: Vec<usize> = cuts.iter().copied().filter(|&c| c > 0 && c < whole).collect();
        bounds.push(whole);
        let lengths: Vec<i64> =
            bounds.iter().scan(0, |at, &end| Some((end - std::mem::replace(at, end)) as i64)).collect();
        let (acc, _) = self.poly1305_chain(Limbs26::default(), r, msg, &lengths, misalign);
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

/// How many cases a vector makes: one per offset, and for Poly1305 tags two per offset (one
/// call, and split calls).
pub fn cases_of(v: &Vector) -> usize {
    v.offsets.len() * if matches!(v.body, Body::Poly1305Tag { .. }) { 2 } else { 1 }
}

/// The case names of `v`, in planning order: the vector's name, `@+N` per offset when there
/// are several, and ` [split]` for the split-call case of a Poly1305 tag. Stable across seeds,
/// so CI history can follow a case.
pub fn case_names(v: &Vector) -> Vec<String> {
    let splits: &[bool] = if matches!(v.body, Body::Poly1305Tag { .. }) { &[false, true] } else { &[false] };
    let mut names = Vec::with_capacity(cases_of(v));
    for &misalign in &v.offsets {
        let at = if v.offsets.len() > 1 { format!(" @+{misalign}") } else { String::new() };
        for &split in splits {
            names.push(format!("{}{at}{}", v.name, if split { " [split]" } else { "" }));
        }
    }
    names
}

/// Plans every case of `vector` into `b` (see [`cases_of`] and [`case_names`]).
pub fn plan_vector(b: &mut BatchBuilder, e: &Entry, rng: &mut impl Rng, set: &str, v: &Vector) -> Vec<CasePlan> {
    let mut plans = Vec::new();
    let mut names = case_names(v).into_iter();
    for &misalign in &v.offsets {
        let splits: &[bool] = if matches!(v.body, Body::Poly1305Tag { .. }) { &[false, true] } else { &[false] };
        for &split in splits {
            let mut p = Planner { b: &mut *b, e, rng: &mut *rng, calls: Vec::new() };
            let last = match &v.body {
                Body::Md5Digest { msg, digest, updates } => Some(p.md5_digest(msg, updates, *digest, misalign)),
                Body::Md5Call(c) => {
                    p.md5_call(c, misalign);
                    None
                }
                Body::Poly1305Tag { key, msg, tag } => {
                    let cuts = if split { random_cuts(p.rng, msg.len() / 16) } else { Vec::new() };
                    Some(p.poly1305_tag(key, msg, *tag, misalign, &cuts))
                }
                Body::Poly1305Call(c) => {
                    p.poly1305_chain(c.acc, c.r, &c.input, &c.lengths, misalign);
                    None
                }
            };
            let name = names.next().expect("one name per case");
            plans.push(CasePlan { set: set.into(), name, msg_len: v.msg_len(), calls: p.calls, last });
        }
    }
    plans
}

/// Checks one planned case against a finished batch; returns every finding (empty = pass).
pub fn check(plan: &CasePlan, batch: &Batch, run: &BatchRun, abi: &Abi, image: &Image) -> Vec<Finding> {
    let mut findings = Vec::new();
    for c in &plan.calls {
        let rec = batch.record(&run.resp, c.call);
        if let Some(f) = run.fault_of(c.call) {
            findings.push(describe_fault(&c.label, f, image));
            continue;
        }
        if !rec.completed {
            let why = run
                .batch_fault()
                .map(|f| describe_fault("batch", f, image).text)
                .unwrap_or_else(|| "the batch stopped before it".into());
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

/// The sentence for a fault: class, place (symbol+offset) and the backend's words.
pub fn describe_fault(label: &str, f: &crate::backend::Fault, image: &Image) -> Finding {
    let place = f.pc.map(|pc| format!(" at {} (pc {pc:#x})", image.symbolize(pc))).unwrap_or_default();
    let detail = if f.detail.is_empty() { String::new() } else { format!(" [{}]", f.detail) };
    let class = if matches!(f.kind, crate::backend::FaultKind::Hang(_)) { Class::Hang } else { Class::Fault };
    Finding::new(class, format!("{label}: {}{place}{detail}", f.kind))
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

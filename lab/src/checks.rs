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
use crate::vectors::{Body, Vector};

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
    /// The accumulator is bit-for-bit what it was before the call (length < 16).
    AccUntouched { acc: BufId, before: Before },
}

/// Where the "before" value of an untouched accumulator is.
#[derive(Debug, Clone, Copy)]
enum Before {
    Buffer(BufId),
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
    last: Final,
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

/// Plans an MD5 vector as DigestBase would drive it: `implCompressMB` over the bulk, then
/// `implCompress` per padding block, each call from a copy of the previous state. The message
/// sits `misalign` bytes past a 64-byte boundary.
fn plan_md5(
    b: &mut BatchBuilder,
    e: &Entry,
    rng: &mut impl Rng,
    msg: &[u8],
    digest: [u8; 16],
    placement: Placement,
) -> (Vec<CallCheck>, Final) {
    let abi = b.abi();
    let (steps, pad) = md5::digest_plan(msg);
    // The bulk alone (the tail is copied into the padding blocks), so reading past the last
    // whole block reaches the guard page.
    let input = b.buffer("input", &msg[..msg.len() / 64 * 64], false, placement);
    let pad_placement = match placement {
        Placement::Offset(m) => Placement::Offset((m + 7) % 64),
        p => p,
    };
    let pad_buf = b.buffer("padding", &pad, false, pad_placement);
    let mut state = md5::IV;
    let mut prev = b.buffer("state", &md5::state_to_bytes(&state), true, Placement::End);
    let mut calls = Vec::new();
    for step in steps {
        let out = b.buffer("state", &[0u8; 16], true, Placement::End);
        let (func, args, label, ret) = match step {
            Step::Mb { start, ofs, limit, ret } => {
                md5::compress_mb(&mut state, &msg[start..], ofs, limit);
                let args = [
                    Arg::Ptr(input, start),
                    buf_ptr(out),
                    Arg::Imm(abi.int32_arg(ofs, rng.gen())),
                    Arg::Imm(abi.int32_arg(limit, rng.gen())),
                ];
                (e.md5_compress_mb, args, format!("{MD5_IMPL_COMPRESS_MB}(ofs={ofs}, limit={limit})"), Some(ret))
            }
            Step::Single { pad_offset } => {
                md5::compress(&mut state, &pad[pad_offset..pad_offset + 64]);
                let args = [Arg::Ptr(pad_buf, pad_offset), buf_ptr(out), Arg::Imm(rng.gen()), Arg::Imm(rng.gen())];
                (e.md5_compress, args, format!("{MD5_IMPL_COMPRESS}(padding block {})", pad_offset / 64), None)
            }
        };
        let call = b.call_after_copy(func.expect("md5 symbols checked"), args, rng.gen(), prev, out);
        let mut expects = vec![Expect::Md5State(out, state)];
        expects.extend(ret.map(Expect::RetI32));
        calls.push(CallCheck { call, label, expects });
        prev = out;
    }
    (calls, Final::Md5Digest { state: prev, digest })
}

/// Plans a Poly1305 tag vector: the whole blocks through `processBlocks` split at `cuts`
/// (16-byte boundaries; none = one call), accumulator chained by copies, tail and `+ s` on the host.
#[allow(clippy::too_many_arguments)]
fn plan_poly1305(
    b: &mut BatchBuilder,
    e: &Entry,
    rng: &mut impl Rng,
    key: &[u8; 32],
    msg: &[u8],
    tag: [u8; 16],
    placement: Placement,
    cuts: &[usize],
) -> (Vec<CallCheck>, Final) {
    let r = poly1305::clamp_r(key[..16].try_into().expect("16 bytes"));
    let whole = msg.len() / 16 * 16;
    // The whole blocks alone (the host adds the tail), so reading past them reaches the guard.
    let input = b.buffer("input", &msg[..whole], false, placement);
    let r_buf = b.buffer("r", &r.to_bytes(), false, Placement::End);
    let mut acc = Limbs26::default();
    let mut prev = b.buffer("acc", &acc.to_bytes(), true, Placement::End);
    let mut bounds: Vec<usize> = cuts.iter().copied().filter(|&c| c > 0 && c < whole).collect();
    bounds.push(whole);
    let mut calls = Vec::new();
    let mut at = 0;
    for end in bounds {
        let out = b.buffer("acc", &[0u8; 40], true, Placement::End);
        let len = end - at;
        let args = [Arg::Ptr(input, at), Arg::Imm(len as u64), buf_ptr(out), buf_ptr(r_buf)];
        let call = b.call_after_copy(e.poly1305.expect("poly1305 symbol checked"), args, rng.gen(), prev, out);
        let expect = if len < 16 {
            Expect::AccUntouched { acc: out, before: Before::Buffer(prev) }
        } else {
            acc = poly1305::process_blocks(&acc, &r, &msg[at..end]);
            Expect::Acc(out, acc)
        };
        calls.push(CallCheck {
            call,
            label: format!("{POLY1305_PROCESS_BLOCKS}(input+{at}, length={len})"),
            expects: vec![expect],
        });
        prev = out;
        at = end;
    }
    let s = key[16..].try_into().expect("16 bytes");
    (calls, Final::Poly1305Tag { acc: prev, r, tail: msg[whole..].to_vec(), s, tag })
}

/// How a case is laid out: which Poly1305 calls, where the inputs sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseKind {
    /// Poly1305: split the blocks over several calls at random 16-byte boundaries (MD5 cases
    /// always use both stubs as DigestBase does).
    pub split: bool,
    /// Where the read-only inputs sit: flush against a guard page ([`Placement::End`],
    /// [`Placement::Start`]) or misaligned ([`Placement::Offset`]).
    pub inputs: Placement,
}

/// Plans `vector` into `b` as a case of `kind`.
pub fn plan_vector(
    b: &mut BatchBuilder,
    e: &Entry,
    rng: &mut impl Rng,
    set: &str,
    v: &Vector,
    kind: CaseKind,
) -> CasePlan {
    let split = kind.split;
    let misalign = match kind.inputs {
        Placement::Offset(m) => format!(" [input at +{m}]"),
        _ => String::new(),
    };
    let (calls, last, suffix) = match &v.body {
        Body::Md5 { msg, digest } => {
            let (c, l) = plan_md5(b, e, rng, msg, *digest, kind.inputs);
            (c, l, misalign)
        }
        Body::Poly1305 { key, msg, tag } => {
            let blocks = msg.len() / 16;
            let cuts: Vec<usize> = if split && blocks >= 2 {
                let mut c: Vec<usize> =
                    (0..rng.gen_range(1..=blocks.min(4))).map(|_| rng.gen_range(1..blocks) * 16).collect();
                c.sort_unstable();
                c.dedup();
                c
            } else {
                Vec::new()
            };
            let suffix = if cuts.is_empty() { misalign } else { format!(" [split at {cuts:?}]{misalign}") };
            let (c, l) = plan_poly1305(b, e, rng, key, msg, *tag, kind.inputs, &cuts);
            (c, l, suffix)
        }
    };
    CasePlan { set: set.into(), name: format!("{}{suffix}", v.name), msg_len: v.msg_len(), calls, last }
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
            let why = run
                .batch_fault()
                .map(|f| describe_fault("batch", f, image, batch).text)
                .unwrap_or_else(|| "the batch stopped before it".into());
            findings.push(Finding::new(Class::NotRun, format!("{} did not run: {why}", c.label)));
            continue;
        }
        findings.extend(abi_findings(&c.label, &rec, abi));
        for e in &c.expects {
            findings.extend(expect_finding(&c.label, e, batch, &run.resp, rec.ret));
        }
    }
    if findings.is_empty() {
        findings.extend(final_finding(&plan.last, batch, &run.resp));
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
            let before = match before {
                Before::Buffer(b) => Limbs26::from_bytes(batch.buffer(resp, *b)),
            };
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

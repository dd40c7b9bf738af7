//! Results -> findings: reads a finished batch against a [`CasePlan`] and says, call by call,
//! what went wrong (wrong state, return value or accumulator, limbs out of bounds, a callee-saved
//! register not restored, a fault with its place and instruction), then the case's final digest
//! or tag. Also the digest of a case's outputs that `lab run` compares across backends.
//!
//! Every call is checked, not only the last one: multi-call cases start each call from a copy of
//! the previous call's output (the driver's `copy` field), so every intermediate state stays
//! visible.

use crate::abi::Abi;
use crate::backend::{BatchRun, Fault, FaultKind};
use crate::batch::Batch;
use crate::cases::plan::{CasePlan, Expect, Final};
use crate::finding::{Class, Finding};
use crate::image::Image;
use crate::reference::md5::{self, State};
use crate::reference::poly1305::{self, Limbs26};

impl CasePlan {
    /// A 64-bit digest (FNV-1a) of what this case's calls left behind in `run`: the buffers and
    /// the `int` return value its checks read; 0 (no result, not compared) when a call faulted
    /// or did not run. Saved registers and flags are left out (flag bits the ISA leaves undefined
    /// may differ between CPUs and emulators). Equal digests on two backends mean equal
    /// results; the lab keeps only this per case and backend to compare backends.
    pub fn outputs_digest(&self, batch: &Batch, run: &BatchRun) -> u64 {
        let mut h = crate::fnv::Fnv1a::default();
        for c in &self.calls {
            let (completed, ret) = batch.outcome(&run.resp, c.call);
            if run.fault_of(c.call).is_some() {
                // Faults are not compared: the backends check bounds at different granularity
                // (bytes on Unicorn, pages elsewhere) and see system calls differently, so a
                // fault on one backend alone is a kernel finding, not an emulator's.
                return 0;
            }
            if !completed {
                // Not run (the batch was given up): no result to compare.
                return 0;
            }
            h.add(&[0]);
            for e in &c.expects {
                match e {
                    Expect::Md5State(buf, _)
                    | Expect::Md5StateFile(buf, _)
                    | Expect::Acc(buf, _)
                    | Expect::AccFile(buf, _)
                    | Expect::AccUntouched { acc: buf, .. } => {
                        h.add(batch.buffer(&run.resp, *buf));
                    }
                    Expect::RetI32(_) | Expect::RetI32File(_) => h.add(&(ret as u32).to_le_bytes()),
                    Expect::OpenSsl(o) => h.add(batch.buffer(&run.resp, o.buffer())),
                    // A lab error: no result to compare.
                    Expect::Unplanned(_) => return 0,
                }
            }
        }
        h.finish()
    }
}

/// Checks one planned case against a finished batch; returns every finding (empty = pass).
/// After a call that faulted or did not run, later calls of the case may use what it left (a
/// chain's next step, a MAC of earlier tags): their wrong values and bounds are consequences,
/// counted in one [`Class::KnockOn`] finding instead of reading like arithmetic bugs of their
/// own. Their own faults and ABI findings stay listed: those are causes.
pub fn check(plan: &CasePlan, batch: &Batch, run: &BatchRun, abi: &Abi, image: &Image) -> Vec<Finding> {
    if let Some(why) = not_run_past(plan, run, image) {
        return vec![Finding::new(Class::NotRun, why)];
    }
    let mut findings = Vec::new();
    let mut broke: Option<&str> = None;
    let mut knock_on = 0;
    for c in &plan.calls {
        let own = check_call(c, batch, run, abi, image);
        let outputs = |f: &Finding| matches!(f.class, Class::Value | Class::Bounds);
        if broke.is_some() {
            knock_on += usize::from(own.iter().any(outputs));
            findings.extend(own.into_iter().filter(|f| !outputs(f)));
            continue;
        }
        if own.iter().any(|f| !outputs(f) && f.class != Class::Abi) {
            broke = Some(&c.label);
        }
        findings.extend(own);
    }
    if let (Some(label), true) = (broke, knock_on > 0) {
        let calls = if knock_on == 1 { "call returns" } else { "calls return" };
        findings.push(Finding::new(
            Class::KnockOn,
            format!(
                "{knock_on} later {calls} wrong outputs after the finding in {label}, which they may build on \
                 (their value findings are not listed)"
            ),
        ));
    }
    // Partial loads under `--partial-loads fail`: findings of their own class (the load ran).
    for (_, _, text) in partial_loads(plan, batch, run, image).into_iter().filter(|p| p.0) {
        findings.push(Finding::new(Class::PartialLoad, format!("{text} (--partial-loads fail)")));
    }
    if findings.is_empty() {
        findings.extend(plan.last.iter().filter_map(|last| final_finding(last, batch, &run.resp)));
    }
    findings
}

/// Why the case was not run, when one of its calls stopped before an instruction the backend
/// cannot execute ([`FaultKind::NotRunPast`]): `not run past `vle8.v v8, (a0)` at
/// md5_implCompress+0x2c: Unicorn 2.1.5 cannot execute v (...)`, the same words for every case
/// that stops there. The case is then skipped, whatever its other calls did: what they build on
/// never ran ([`is_not_run_past`]).
pub fn not_run_past(plan: &CasePlan, run: &BatchRun, image: &Image) -> Option<String> {
    plan.calls.iter().find_map(|c| match run.fault_of(c.call) {
        Some(Fault { kind: FaultKind::NotRunPast { insn, extension }, pc, .. }) => {
            let at = pc.map(|pc| image.symbolize(pc)).unwrap_or_else(|| "an unknown address".into());
            Some(format!("{NOT_RUN_PAST} `{insn}` at {at}: Unicorn 2.1.5 cannot execute {extension}"))
        }
        _ => None,
    })
}

/// How [`not_run_past`] reasons start.
pub const NOT_RUN_PAST: &str = "not run past";

/// Whether `findings` say only that the case was not run past an instruction the backend
/// cannot execute ([`not_run_past`]): a skip, never a failure or a pass.
pub fn is_not_run_past(findings: &[Finding]) -> bool {
    matches!(findings, [f] if f.class == Class::NotRun && f.text.starts_with(NOT_RUN_PAST))
}

/// The findings of one call of a case: its fault, or why it did not run, or its ABI and
/// output checks.
fn check_call(
    c: &crate::cases::plan::CallCheck,
    batch: &Batch,
    run: &BatchRun,
    abi: &Abi,
    image: &Image,
) -> Vec<Finding> {
    let rec = batch.record(&run.resp, c.call);
    if let Some(f) = run.fault_of(c.call) {
        let plain = describe_fault(&c.label, f, image, batch);
        return vec![crate::diagnose::explain(&c.label, f, plain, image, batch, abi, rec.seed)];
    }
    if !rec.completed {
        let why = match (run.batch_fault(), &run.abandoned) {
            (Some(f), _) => describe_fault("batch", f, image, batch).text,
            (None, Some(reason)) => reason.clone(),
            (None, None) => "the batch stopped before it".into(),
        };
        // A refused system call that killed the guest before it could say which call made
        // it (backend/process/) is still the kernel's doing, not a lab failure.
        let class = match run.batch_fault() {
            Some(Fault { kind: FaultKind::SystemCall { .. }, .. }) => Class::Syscall,
            _ => Class::NotRun,
        };
        return vec![Finding::new(class, format!("{} did not run: {why}", c.label))];
    }
    let mut findings = abi_findings(&c.label, &rec, abi);
    for e in &c.expects {
        findings.extend(expect_finding(&c.label, e, batch, &run.resp, rec.ret));
    }
    findings
}

/// The partial loads ([`crate::backend::PartialLoads::Warn`]) the backend let run in `plan`'s
/// calls, each as (pc, sentence): `md5_block_data_order(num=1): reads 3 bytes past the end of
/// input (input[66]; ...) inside an aligned 8-byte word; cannot fault (a load of 8 bytes at 0x..)
/// at sym+0x10 (pc 0x..): `ld a0, 0(a1)``.
pub fn partial_load_warnings(plan: &CasePlan, batch: &Batch, run: &BatchRun, image: &Image) -> Vec<(u64, String)> {
    partial_loads(plan, batch, run, image).into_iter().filter(|p| !p.0).map(|(_, pc, text)| (pc, text)).collect()
}

/// Every partial load of `plan`'s calls as (a finding under `fail`, pc, sentence).
fn partial_loads(plan: &CasePlan, batch: &Batch, run: &BatchRun, image: &Image) -> Vec<(bool, u64, String)> {
    let mut out = Vec::new();
    for check in &plan.calls {
        for p in run.partial_loads.iter().filter(|p| p.call == check.call) {
            let last = p.addr + p.size.max(1) - 1;
            let Some(whereabouts) =
                batch.locate(last).filter(|w| w.contains("past the end")).or_else(|| batch.locate(p.addr))
            else {
                continue;
            };
            let insn = image.instruction_at(p.pc).map(|t| format!(": `{t}`")).unwrap_or_default();
            out.push((
                p.fail,
                p.pc,
                format!(
                    "{}: reads {whereabouts} inside an aligned 8-byte word; cannot fault (a load of {} bytes at {:#x}) at {} \
                     (pc {:#x}){insn}",
                    check.label,
                    p.size,
                    p.addr,
                    image.symbolize(p.pc),
                    p.pc
                ),
            ));
        }
    }
    out
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
    let whereabouts = addr
        .and_then(|a| {
            batch.locate(a).or_else(|| image.locate_data(a).map(|w| format!("in the kernel image's {w} ({a:#x})")))
        })
        .map(|w| format!(", {w}"))
        .unwrap_or_default();
    let detail = if f.detail.is_empty() { String::new() } else { format!(" [{}]", f.detail) };
    let class = match f.kind {
        FaultKind::Hang(_) | FaultKind::InstructionBudget(_) => Class::Hang,
        FaultKind::Memory { .. } => Class::Memory,
        FaultKind::SystemCall { .. } => Class::Syscall,
        FaultKind::HostSaw(_) => Class::Tamper,
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
    if let Some(flag) = abi.clear_on_return.filter(|f| rec.flags & f.mask != 0) {
        out.push(Finding::new(Class::Abi, format!("{label}: {} is set on return ({})", flag.name, abi.source)));
    }
    out.extend(control_findings(label, rec.fpctl, abi));
    out
}

/// One finding per FP control field (`Abi::control`) the call left other than the driver's
/// poison, naming the register and the psABI rule.
fn control_findings(label: &str, fpctl: u64, abi: &Abi) -> Vec<Finding> {
    let Some(c) = abi.control else { return Vec::new() };
    c.fields
        .iter()
        .filter(|f| (fpctl ^ c.poison) & f.mask != 0)
        .map(|f| {
            let shift = f.mask.trailing_zeros();
            let (before, after) = ((c.poison & f.mask) >> shift, (fpctl & f.mask) >> shift);
            Finding::new(
                Class::Abi,
                format!("{label}: {} was not preserved: before {before:#x}, after {after:#x} ({})", f.name, f.rule),
            )
        })
        .collect()
}

fn expect_finding(label: &str, e: &Expect, batch: &Batch, resp: &[u8], ret: u64) -> Option<Finding> {
    match e {
        Expect::Md5State(buf, want) => {
            let got = md5::state_from_bytes(batch.buffer(resp, *buf));
            (got != *want).then(|| {
                Finding::new(Class::Value, format!("{label}: state expected {}, got {}", words(want), words(&got)))
            })
        }
        Expect::Md5StateFile(buf, want) => {
            let got = md5::state_from_bytes(batch.buffer(resp, *buf));
            (got != *want).then(|| {
                let (w, g) = (words(want), words(&got));
                Finding::new(
                    Class::Value,
                    format!("{label}: state expected {w} (expect_state_hex in the file), got {g}"),
                )
            })
        }
        Expect::RetI32(want) => {
            let got = ret as u32 as i32;
            (got != *want).then(|| Finding::new(Class::Value, format!("{label}: returned ofs {got}, expected {want}")))
        }
        Expect::RetI32File(want) => {
            let got = ret as u32 as i32;
            (got != *want).then(|| {
                Finding::new(
                    Class::Value,
                    format!("{label}: returned ofs {got}, expected {want} (expect_ofs in the file)"),
                )
            })
        }
        Expect::AccFile(buf, want) => {
            let got = Limbs26::from_bytes(batch.buffer(resp, *buf));
            let want = want % poly1305::p();
            (got.reduced() != want).then(|| {
                Finding::new(
                    Class::Value,
                    format!(
                        "{label}: acc mod 2^130-5 expected {want:#x} (expect_acc in the file), got {:#x} (limbs {got})",
                        got.reduced()
                    ),
                )
            })
        }
        Expect::Acc(buf, want) => {
            let got = Limbs26::from_bytes(batch.buffer(resp, *buf));
            let range = crate::domain::acc_range();
            if let Some((i, l)) = range.first_outside(&got) {
                let of = if range == crate::domain::AccRange::Lab {
                    String::new()
                } else {
                    format!(" of poly1305_acc = \"{}\"", range.name())
                };
                Some(Finding::new(
                    Class::Bounds,
                    format!("{label}: acc limb {i} = {l:#x} is out of bounds{of} ({}); acc = {got}", range.describe()),
                ))
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
        Expect::Unplanned(why) => Some(Finding::new(Class::NotRun, format!("{label}: lab error, not checked: {why}"))),
        Expect::OpenSsl(o) => o.finding(label, batch, resp),
        Expect::AccUntouched { acc, before } => {
            let before = Limbs26::from_bytes(batch.buffer(resp, *before));
            let got = Limbs26::from_bytes(batch.buffer(resp, *acc));
            // The JDK reads the limbs only as a number mod p (JDK 25's x86_64 stub folds a
            // limb 4 above 2^26 even for length 0): an equal value in the range is untouched.
            let range = crate::domain::acc_range();
            let same_for_the_jdk = range == crate::domain::AccRange::Jdk
                && range.first_outside(&got).is_none()
                && got.reduced() == before.reduced();
            (got != before && !same_for_the_jdk).then(|| {
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
        Final::OpenSsl(o) => o.finding(batch, resp),
        Final::Md5Digest { state, digest, what } => {
            let got = md5::state_to_digest(&md5::state_from_bytes(batch.buffer(resp, *state)));
            (got != *digest).then(|| {
                Finding::new(Class::Value, format!("{what}expected {}, got {}", hex::encode(digest), hex::encode(got)))
            })
        }
        Final::Poly1305Tag { acc, r, tail, s, tag, what } => {
            let got = poly1305::finish(&Limbs26::from_bytes(batch.buffer(resp, *acc)), r, tail, s);
            (got != *tag).then(|| {
                Finding::new(Class::Value, format!("{what}expected {}, got {}", hex::encode(tag), hex::encode(got)))
            })
        }
    }
}

fn words(s: &State) -> String {
    format!("[{:08x} {:08x} {:08x} {:08x}]", s[0], s[1], s[2], s[3])
}

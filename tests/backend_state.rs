//! What a kernel can read of the driver's state on each backend (issue 28, "Unicorn
//! indistinguishable"): a probe kernel (tests/fixtures/x86_64/probe_state.S, probe_regs.S for
//! aarch64 and riscv64) records scratch registers at entry, lab_batch's return address, the
//! arena header's `prot_id` and every nonzero word of the driver's memory (its private words,
//! its altstack and its stack, lab_batch's frame with the callee-saved registers included), on
//! Unicorn, qemu-user and natively, after a batch that returned, after one that faulted and in
//! the entry that resumes a batch after its fault.
//! docs/threat-model.md lists what still differs.

use std::collections::BTreeMap;

use kernel_lab::backend::{run_batch, BackendKind, Limits};
use kernel_lab::batch::{Arg, BatchBuilder};
use kernel_lab::image::Image;

use crate::common::{fixture_image, fixture_kernels, variant, SEED};

/// The probe's (address, value) pairs: as many as it records (its PAIRS).
const PAIRS: usize = 32;

/// What the probe saw on one backend: its fixed words, then the nonzero words of the driver's
/// memory by address.
struct View {
    kind: BackendKind,
    fixed: Vec<u64>,
    nonzero: BTreeMap<u64, u64>,
}

/// What runs before the probe: a batch of the probe itself, a batch of a call that faults after
/// setting every callee-saved register (the request loop resumed with them under qemu-user, and
/// the signal's frame stayed on the altstack), or that call first in the probe's own batch (the
/// probe then runs in the entry that resumes the batch: the second request, from call 1).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Before {
    Probe,
    Fault,
    FaultInBatch,
}

/// Every `before`.
const BEFORE: [Before; 3] = [Before::Probe, Before::Fault, Before::FaultInBatch];

/// `arch`'s probe `fixture` (`fixed` words before the count and pairs), run after `before`, on
/// every backend that runs `arch`; and the image.
fn probe(arch: &str, fixture: &str, fixed: usize, before: Before) -> (Vec<View>, Image) {
    let v = variant(arch);
    let (_dir, cfg) = fixture_kernels(arch, "poly1305.S", fixture);
    let image = fixture_image(&cfg, v, fixture);
    let probe = image.require("poly1305_processBlocks").expect("probe").addr;
    let arena = image.arena().expect("arena");
    let fault = image.require("probe_fault").expect("probe_fault").addr;
    let words = fixed + 1 + 2 * PAIRS;
    let mut b = BatchBuilder::new(kernel_lab::abi::Abi::of(v.arch));
    if before == Before::FaultInBatch {
        b.call(fault, [Arg::Imm(0); 4], SEED);
    }
    let out = b.output(&vec![0; 8 * words]);
    b.call(probe, [Arg::Ptr(out, 0), Arg::Imm(0), Arg::Imm(0), Arg::Imm(0)], SEED);
    let batch = b.layout(arena).expect("layout");
    let first = match before {
        Before::Probe => Some(batch.clone()),
        Before::Fault => {
            let mut b = BatchBuilder::new(kernel_lab::abi::Abi::of(v.arch));
            b.call(fault, [Arg::Imm(0); 4], SEED);
            Some(b.layout(arena).expect("layout"))
        }
        Before::FaultInBatch => None,
    };
    let mut views = Vec::new();
    for kind in BackendKind::ALL.into_iter().filter(|k| k.supports(v).is_ok()) {
        let mut backend = kind.open(v, &image, Limits::default()).expect("backend");
        if let Some(first) = &first {
            let run = run_batch(backend.as_mut(), first).expect("run");
            assert_eq!(run.faults.is_empty(), before == Before::Probe, "{arch} {kind}: {:?}", run.faults);
        }
        let run = run_batch(backend.as_mut(), &batch).expect("run");
        let faulted = usize::from(before == Before::FaultInBatch);
        assert_eq!(run.faults.len(), faulted, "{arch} {kind}: {:?}", run.faults);
        let w: Vec<u64> =
            batch.buffer(&run.resp, out).chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        let count = w[fixed] as usize;
        let pairs = w[fixed + 1..][..2 * count.min(PAIRS)].chunks(2).map(|p| (p[0], p[1]));
        let nonzero: BTreeMap<u64, u64> = pairs.collect();
        let first: Vec<String> = nonzero.iter().map(|(&a, w)| format!("{} = {w:#x}", name(&image, a))).collect();
        assert!(count <= PAIRS, "{arch} {kind}: {count} nonzero driver words (the probe records {PAIRS}): {first:?}");
        views.push(View { kind, fixed: w[..fixed].to_vec(), nonzero });
    }
    (views, image)
}

/// `addr` as the nearest driver symbol at or below it, plus an offset (the kernels' data-end
/// mark shares its address with the driver's first word: never a name).
fn name(image: &Image, addr: u64) -> String {
    let below = image
        .symbol_names()
        .filter(|&n| n != kernel_lab::protocol::KERNEL_DATA_END)
        .filter_map(|n| Some((n, image.symbol(n)?.addr)))
        .filter(|&(_, a)| a <= addr);
    match below.max_by_key(|&(_, a)| a) {
        Some((n, a)) => format!("{n}+{:#x}", addr - a),
        None => format!("{addr:#x}"),
    }
}

/// Checks one scenario: the fixed words (but `prot_id`) and the nonzero driver words are the
/// same on every backend, but for `lab_prot_id` (the header's id: ids count the tables sent in
/// the lab's process, so they differ by backend; it must equal the header's) and, natively,
/// `lab_in_child` (1 in the batch child: docs/threat-model.md); the driver's stack holds only
/// the words of lab_batch's own in `stack_words` ((bytes below lab_stack_top, value): its
/// return address; the callee-saved registers in its frame are zero) and the altstack nothing.
fn check(arch: &str, before: Before, (views, image): (Vec<View>, Image), prot_id: usize, stack_words: &[(u64, u64)]) {
    let at = |s: &'static str| image.require(s).expect(s).addr;
    let (prot_at, top) = (at("lab_prot_id"), at("lab_stack_top"));
    let child = image.symbol("lab_in_child").map(|s| s.addr);
    let stack = top - kernel_lab::protocol::DRIVER_STACK_SIZE..top;
    let altstack = ["lab_altstack", "lab_sigstack"].iter().find_map(|s| image.symbol(s)).expect("altstack").addr;
    let altstack = altstack..altstack + kernel_lab::protocol::ALTSTACK_SIZE;
    let mut norm = Vec::new();
    for v in &views {
        let ctx = format!("{arch}, after a {before:?} batch, {}", v.kind);
        assert_ne!(v.fixed[prot_id], 0, "{ctx}: prot_id is the host's table id");
        assert_eq!(v.nonzero.get(&prot_at), Some(&v.fixed[prot_id]), "{ctx}: lab_prot_id is the header's id");
        let mut words = v.nonzero.clone();
        words.remove(&prot_at);
        if v.kind == BackendKind::Native {
            assert_eq!(words.remove(&child.expect("lab_in_child")), Some(1), "{ctx}: lab_in_child");
        }
        for (&a, &w) in &words {
            assert!(!altstack.contains(&a), "{ctx}: {} = {w:#x} on the altstack", name(&image, a));
            let want = stack_words.iter().find(|&&(below, _)| a == top - below).map_or(0, |&(_, v)| v);
            assert!(!stack.contains(&a) || w == want, "{ctx}: {} = {w:#x} on the driver's stack", name(&image, a));
        }
        for &(below, want) in stack_words {
            assert_eq!(words.get(&(top - below)), Some(&want), "{ctx}: lab_stack_top - {below}");
        }
        let mut fixed = v.fixed.clone();
        fixed[prot_id] = 0;
        norm.push((v.kind, fixed, words));
    }
    let (first, rest) = norm.split_first().expect("a backend");
    for (kind, fixed, words) in rest {
        assert_eq!(fixed, &first.1, "{arch}, after a {before:?} batch: fixed words, {kind} vs {}", first.0);
        let keys: std::collections::BTreeSet<u64> = words.keys().chain(first.2.keys()).copied().collect();
        for a in keys {
            assert_eq!(
                words.get(&a),
                first.2.get(&a),
                "{arch}, after a {before:?} batch: driver word {} on {kind} vs {}",
                name(&image, a),
                first.0
            );
        }
    }
}

/// x86_64 on Unicorn, qemu-user and natively: r8-r11 and rax at entry, the driver stack's top
/// word (`lab_batch_return`, where Unicorn stops and where the request loop, or natively the
/// batch child, calls `lab_batch` from `lab_stack_top`) and every nonzero word of the driver's
/// memory are the same, after a batch that returned, after one that faulted and after a fault
/// in the same batch. The CPU is not:
/// CPUID leaf 0 names Unicorn's model ("GenuineIntel") and qemu-user's ("AuthenticAMD", its
/// `max` model under TCG) whatever the host; nor the vector registers at a batch's first call:
/// the last call's (after a fault, the faulting kernel's) on Unicorn and under qemu-user, zero
/// in a native batch child, whose parent never runs a kernel (docs/threat-model.md).
#[test]
fn what_a_kernel_reads_of_the_driver_is_the_same_on_every_x86_64_backend() {
    for before in BEFORE {
        let (mut views, image) = probe("x86_64", "probe_state.S", 10, before);
        assert_eq!(views.len(), 3, "Unicorn, qemu-user and native");
        let ret = image.require("lab_batch_return").expect("lab_batch_return").addr;
        // What the call before left in xmm0 and xmm15: the probe's mark, or probe_fault's rbx, r15.
        let left = match before {
            Before::Probe => [0x0e0e0e0e0e0e0e0e; 2],
            Before::Fault | Before::FaultInBatch => [0x1b1b1b1b1b1b1b1b, 0x1515151515151515],
        };
        for v in &mut views {
            let vendor = std::mem::take(&mut v.fixed[7]);
            let xmm: Vec<u64> = v.fixed.drain(8..10).collect();
            match v.kind {
                BackendKind::Unicorn => assert_eq!(vendor, u64::from(u32::from_le_bytes(*b"Genu"))),
                BackendKind::Qemu => assert_eq!(vendor, u64::from(u32::from_le_bytes(*b"Auth"))),
                BackendKind::Native => {}
            }
            let want = if v.kind == BackendKind::Native { vec![0, 0] } else { left.to_vec() };
            assert_eq!(xmm, want, "x86_64, after a {before:?} batch, {}: xmm0, xmm15 at entry", v.kind);
            assert_eq!(v.fixed[5], ret, "{}: the driver stack's top word", v.kind);
        }
        check("x86_64", before, (views, image), 6, &[(8, ret)]);
    }
}

/// aarch64 and riscv64 on Unicorn and qemu-user: the scratch registers a kernel finds at entry
/// (aarch64 x4-x18, riscv64 a1-a7 and t0-t6; the drivers clear those that would hold what
/// `_start` or Unicorn left), the return address `lab_batch` saved in its frame, two scratch
/// floating-point registers (aarch64 d0 and d31, riscv64 ft0 and ft11: the last call's, after a
/// fault the faulting kernel's) and every nonzero word of the driver's memory are the same,
/// after a batch that returned, after one that faulted and after a fault in the same batch.
#[test]
fn what_a_kernel_reads_of_the_driver_is_the_same_on_unicorn_and_qemu_user() {
    // (arch, fixed words, the header's prot_id among them, lab_batch's saved return address
    // below lab_stack_top: x30 above x29 at the frame's bottom, or ra there).
    let nsaved = |arch: &str| kernel_lab::abi::Abi::of(variant(arch).arch).saved.len() as u64;
    let aarch64_frame = (16 + 8 * nsaved("aarch64") + 15) & !15;
    let riscv64_frame = (8 + 8 * nsaved("riscv64") + 15) & !15;
    // (arch, fixed words, lab_batch's saved return address, the header's prot_id and the two
    // floating-point registers among them, what probe_fault leaves in those).
    let archs = [("aarch64", 19, 15, 16, 17, [0x1919, 0x2929]), ("riscv64", 18, 14, 15, 16, [0x5050, 0x5b5b])];
    for (arch, fixed, ret_at, prot_id, fp_at, fault_fp) in archs {
        for before in BEFORE {
            let mut views = probe(arch, "probe_regs.S", fixed, before);
            assert_eq!(views.0.len(), 2, "{arch}: Unicorn and qemu-user");
            let at = |s: &'static str| views.1.require(s).expect(s).addr;
            let (ret, top) = (at("lab_batch_return"), at("lab_stack_top"));
            let left = match before {
                Before::Probe => [0x0e0e0e0e0e0e0e0e; 2],
                Before::Fault | Before::FaultInBatch => fault_fp,
            };
            for v in &mut views.0 {
                assert_eq!(v.fixed[ret_at], ret, "{arch} {}: lab_batch's saved return address", v.kind);
                let fp: Vec<u64> = v.fixed.drain(fp_at..fp_at + 2).collect();
                assert_eq!(fp, left, "{arch}, after a {before:?} batch, {}: floating-point registers", v.kind);
            }
            // aarch64: x30 above x29 at the frame's bottom, and the x29 lab_batch saves among
            // x19-x29 is its own frame pointer (`mov x29, sp` first); riscv64: ra at the bottom.
            let stack_words = match arch {
                "aarch64" => vec![(aarch64_frame - 8, ret), (aarch64_frame - 16 - 8 * 10, top - aarch64_frame)],
                _ => vec![(riscv64_frame, ret)],
            };
            check(arch, before, views, prot_id, &stack_words);
        }
    }
}

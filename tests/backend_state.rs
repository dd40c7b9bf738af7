//! What a kernel can read of the driver's state on each backend (issue 28, "Unicorn
//! indistinguishable"): a probe kernel (tests/fixtures/x86_64/probe_state.S) records scratch
//! registers at entry, the driver stack's top word, the arena header's `prot_id`, a fold of the
//! driver's private words, the nonzero words of its stack and the CPU vendor, on Unicorn,
//! qemu-user and natively. docs/threat-model.md lists what differs.

use kernel_lab::backend::{run_batch, BackendKind, Limits};
use kernel_lab::batch::{Arg, BatchBuilder};

use crate::common::{fixture_image, fixture_kernels, variant, SEED};

/// The words `arch`'s probe `fixture` writes (`words` of them), per backend that runs `arch`.
fn probe(arch: &str, fixture: &str, words: usize) -> Vec<(BackendKind, Vec<u64>)> {
    let v = variant(arch);
    let (_dir, cfg) = fixture_kernels(arch, "poly1305.S", fixture);
    let image = fixture_image(&cfg, v, fixture);
    let probe = image.require("poly1305_processBlocks").expect("probe").addr;
    let mut b = BatchBuilder::new(kernel_lab::abi::Abi::of(v.arch));
    let out = b.output(&vec![0; 8 * words]);
    b.call(probe, [Arg::Ptr(out, 0), Arg::Imm(0), Arg::Imm(0), Arg::Imm(0)], SEED);
    let batch = b.layout(image.arena().expect("arena")).expect("layout");
    let mut rows = Vec::new();
    for kind in BackendKind::ALL.into_iter().filter(|k| k.supports(v).is_ok()) {
        let mut backend = kind.open(v, &image, Limits::default()).expect("backend");
        // Twice: the second batch sees what the first left (a guest's sequence number...).
        let _ = run_batch(backend.as_mut(), &batch).expect("run");
        let run = run_batch(backend.as_mut(), &batch).expect("run");
        assert!(run.faults.is_empty(), "{kind}: {:?}", run.faults);
        let words = batch.buffer(&run.resp, out).chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        rows.push((kind, words));
    }
    rows
}

/// Pins what a kernel can tell apart today: the driver's private words (`_start`'s set-up never
/// ran under Unicorn) and the CPU. The same on every backend: the scratch registers r8-r11 and
/// rax, the driver stack's top word (`lab_batch`'s return address: `lab_batch_return`, where
/// Unicorn stops and where the request loop, or natively the batch child, calls it from
/// `lab_stack_top`), and a nonzero `prot_id` (Unicorn stamps the header as the host does for
/// a process guest).
#[test]
fn what_a_kernel_reads_of_the_driver_differs_between_unicorn_and_a_process() {
    let rows = probe("x86_64", "probe_state.S", 10);
    let get = |k: BackendKind| rows.iter().find(|r| r.0 == k).map(|r| r.1.clone()).expect("row");
    let (uc, qemu) = (get(BackendKind::Unicorn), get(BackendKind::Qemu));
    for (kind, w) in &rows {
        assert_eq!(w[5], uc[5], "{kind}: lab_batch returns to lab_batch_return in every process and under Unicorn");
    }
    for (kind, w) in &rows {
        // Ids count the tables sent in the lab's process (every backend draws from one counter),
        // so their values differ by backend; none is the 0 Unicorn left before.
        assert_ne!(w[6], 0, "{kind}: prot_id is the host's table id");
    }
    assert_ne!(uc[7], qemu[7], "the driver's private words: _start ran under qemu only");
    for (kind, w) in &rows {
        assert_eq!(w[..5], uc[..5], "{kind}: r8-r11 and rax at entry are the driver's own everywhere");
    }
}

/// The scratch registers a kernel finds at entry (aarch64 x4-x18, riscv64 a1-a7 and t0-t6) are
/// the driver's own on Unicorn and under qemu-user: the drivers clear those that would hold
/// what `_start` or Unicorn left. So is the return address `lab_batch` saved at the top of the
/// driver's stack (the probe's last word): `lab_batch_return` on both, at the same place.
#[test]
fn the_scratch_registers_at_entry_are_the_same_on_every_backend() {
    for (arch, words) in [("aarch64", 16), ("riscv64", 15)] {
        let rows = probe(arch, "probe_regs.S", words);
        assert_eq!(rows.len(), 2, "{arch}: Unicorn and qemu-user");
        assert_eq!(rows[0].1, rows[1].1, "{arch}: {:x?}", rows);
        let (_dir, cfg) = fixture_kernels(arch, "poly1305.S", "probe_regs.S");
        let image = fixture_image(&cfg, variant(arch), "probe_regs.S");
        let ret = image.require("lab_batch_return").expect("lab_batch_return").addr;
        assert_eq!(rows[0].1[words - 1], ret, "{arch}: lab_batch's saved return address");
    }
}

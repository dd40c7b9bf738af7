//! Unicorn's Zbb emulation against qemu-user with `zbb=true`: a small image whose functions each
//! execute one Zbb instruction (every Zbb instruction, `rori`/`roriw` at every shift amount) runs
//! through the driver on both backends with randomized operands, and every result must agree,
//! with each other and with the model in `backend::zbb`. Words next to Zbb in the encoding space
//! (Zbc, Zba, Zbs, Zbkb, the RV32 `rev8`) must stay illegal instructions on both.

use std::fmt::Write as _;

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use kernel_lab::abi::Abi;
use kernel_lab::backend::zbb::{decode, execute};
use kernel_lab::backend::{run_batch, Backend, BackendKind, FaultKind, Limits, UnicornBackend};
use kernel_lab::batch::{Arg, BatchBuilder};
use kernel_lab::image::Image;
use kernel_lab::paths;
use kernel_lab::toolchain;

use crate::common::{variant, SEED};

/// (function suffix, instruction text): binary ops read a1, a2; unary ops read a1; all write t3,
/// then the function returns it in a0, so a missed write to rd shows as a wrong return value.
const OPS: [(&str, &str); 22] = [
    ("andn", "andn t3, a1, a2"),
    ("orn", "orn t3, a1, a2"),
    ("xnor", "xnor t3, a1, a2"),
    ("clz", "clz t3, a1"),
    ("clzw", "clzw t3, a1"),
    ("ctz", "ctz t3, a1"),
    ("ctzw", "ctzw t3, a1"),
    ("cpop", "cpop t3, a1"),
    ("cpopw", "cpopw t3, a1"),
    ("max", "max t3, a1, a2"),
    ("maxu", "maxu t3, a1, a2"),
    ("min", "min t3, a1, a2"),
    ("minu", "minu t3, a1, a2"),
    ("sext_b", "sext.b t3, a1"),
    ("sext_h", "sext.h t3, a1"),
    ("zext_h", "zext.h t3, a1"),
    ("rol", "rol t3, a1, a2"),
    ("rolw", "rolw t3, a1, a2"),
    ("ror", "ror t3, a1, a2"),
    ("rorw", "rorw t3, a1, a2"),
    ("orc_b", "orc.b t3, a1"),
    ("rev8", "rev8 t3, a1"),
];

/// Encodings next to Zbb that a Zbb-only CPU must reject: (name, word).
const NOT_ZBB: [(&str, u32); 5] = [
    ("clmul", 0x0ab5_1533),     // Zbc clmul a0, a0, a1: funct7 of max/min, funct3 001
    ("sh1add", 0x20b5_2533),    // Zba
    ("bset", 0x28b5_1533),      // Zbs
    ("pack", 0x08b5_4533),      // Zbkb; also zext.h's RV32 encoding
    ("rev8_rv32", 0x6985_5513), // rev8 with the RV32 immediate
];

fn functions() -> Vec<(String, String)> {
    let mut f: Vec<(String, String)> = OPS.iter().map(|(n, i)| (format!("zbb_{n}"), i.to_string())).collect();
    f.extend((0..64).map(|s| (format!("zbb_rori_{s}"), format!("rori t3, a1, {s}"))));
    f.extend((0..32).map(|s| (format!("zbb_roriw_{s}"), format!("roriw t3, a1, {s}"))));
    // rd = x0: the write is discarded, so a0 (the first argument) comes back unchanged.
    f.push(("zbb_andn_x0".into(), "andn zero, a1, a2\n\tmv t3, a0".into()));
    f
}

/// Builds driver.S + a generated zbb_ops.S (in a temporary folder) as the riscv64+zbb variant.
fn build_test_image(dir: &std::path::Path) -> Image {
    let arch_dir = dir.join("riscv64");
    std::fs::create_dir_all(&arch_dir).unwrap();
    std::fs::copy(paths::kernels_dir().join("riscv64/driver.S"), arch_dir.join("driver.S")).unwrap();
    let mut s = String::from("\t.option norelax\n\t.text\n");
    for (name, insn) in functions() {
        let _ = writeln!(s, "\t.globl {name}\n\t.p2align 2\n{name}:\n\t{insn}\n\tmv a0, t3\n\tret");
    }
    // Reads its own first word (the `rori`) back through a load: the real word, patched or not.
    s.push_str("\t.globl zbb_self_read\n\t.p2align 2\nzbb_self_read:\n\trori t3, a1, 7\n\tauipc t4, 0\n\tlwu a0, -4(t4)\n\tret\n");
    for (name, word) in NOT_ZBB {
        let _ = writeln!(s, "\t.globl not_zbb_{name}\n\t.p2align 2\nnot_zbb_{name}:\n\t.word {word:#x}\n\tret");
    }
    std::fs::write(arch_dir.join("zbb_ops.S"), s).unwrap();
    // The shared image cache (keyed by the generated source, the same every run).
    let cfg = crate::common::fixture_build(dir);
    let v = variant("riscv64+zbb");
    let path = toolchain::build_image(&cfg, v).unwrap_or_else(|e| panic!("{e}"));
    Image::load(&path, v.arch).unwrap()
}

/// Operands: edge values (0, -1, sign bits, byte and halfword boundaries) and random words.
fn operands(rng: &mut impl RngExt) -> Vec<u64> {
    let mut v = vec![
        0,
        1,
        u64::MAX,
        1 << 63,
        (1 << 63) - 1,
        0x8000_0000,
        0x7fff_ffff,
        0xffff_ffff,
        0x1_0000_0000,
        0x80,
        0x7f,
        0x8000,
        0x7fff,
        0x00ff_0000_ff00_0001,
        63,
        64,
        31,
        32,
    ];
    v.extend((0..30).map(|_| rng.random::<u64>()));
    // Sparse words exercise clz/ctz/cpop and orc.b beyond all-random bytes.
    v.extend(
        (0..16).map(|_| rng.random::<u64>() & rng.random::<u64>() & rng.random::<u64>() >> rng.random_range(0..64)),
    );
    v
}

fn open(kind: BackendKind, image: &Image) -> Box<dyn Backend> {
    kind.open(variant("riscv64+zbb"), image, Limits::default()).unwrap_or_else(|e| panic!("{kind}: {e}"))
}

#[test]
fn every_zbb_instruction_agrees_with_qemu_on_random_operands() {
    let dir = tempfile::tempdir().unwrap();
    let image = build_test_image(dir.path());
    let abi = Abi::of(image.arch);
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let ops = operands(&mut rng);
    let mut b = BatchBuilder::new(abi);
    let mut expected = Vec::new();
    for (name, _) in functions() {
        let addr = image.symbol(&name).unwrap_or_else(|| panic!("{name} missing")).addr;
        let word = u32::from_le_bytes(image.bytes_at(addr, 4).unwrap().try_into().unwrap());
        let insn = decode(word).unwrap_or_else(|| panic!("{name}: {word:#010x} does not decode as Zbb"));
        for _ in 0..48 {
            let (a0, a1, a2) =
                (rng.random::<u64>(), ops[rng.random_range(0..ops.len())], ops[rng.random_range(0..ops.len())]);
            let model = if insn.rd == 0 { a0 } else { execute(insn.op, a1, a2) };
            b.call(addr, [Arg::Imm(a0), Arg::Imm(a1), Arg::Imm(a2), Arg::Imm(rng.random())], rng.random());
            expected.push((name.clone(), a1, a2, model));
        }
    }
    let batch = b.layout(image.arena().unwrap()).unwrap();
    let rets = |backend: &mut dyn Backend, what: &str| {
        let run = run_batch(backend, &batch).unwrap();
        assert!(run.faults.is_empty(), "{what}: {:?}", run.faults.first());
        (0..batch.ncalls()).map(|i| batch.record(&run.resp, i).ret).collect::<Vec<u64>>()
    };
    let qemu = rets(open(BackendKind::Qemu, &image).as_mut(), "qemu");
    // Unicorn twice: the first run emulates each Zbb instruction on its trap, the second runs
    // the patched code (backend::zbb::ZbbPatches), which must by then cover every function.
    let mut uc = UnicornBackend::new(&image, Limits::default()).unwrap();
    uc.emulate_zbb(true).unwrap();
    let trapped = rets(&mut uc, "unicorn, trapping");
    assert_eq!(uc.zbb_patched(), 0, "nothing is patched while a run is on");
    let patched = rets(&mut uc, "unicorn, patched");
    assert_eq!(uc.zbb_patched(), functions().len(), "every function's Zbb instruction is patched");
    let mut mismatches = Vec::new();
    let mut errata = 0;
    for (i, (name, a1, a2, model)) in expected.iter().enumerate() {
        let (t, p, q) = (trapped[i], patched[i], qemu[i]);
        if t == *model && p == *model && q != *model && qemu_ctzw_erratum(name, *a1) {
            errata += 1;
            eprintln!("{name}({a1:#x}): qemu {q:#x}, the model and Unicorn {model:#x} (qemu 7.2's ctzw erratum)");
        } else if t != q || p != q || q != *model {
            mismatches.push(format!(
                "{name}({a1:#x}, {a2:#x}): unicorn trapping {t:#x}, patched {p:#x}, qemu {q:#x}, model {model:#x}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} calls disagree:\n{}",
        mismatches.len(),
        expected.len(),
        mismatches.join("\n")
    );
    assert!(errata < expected.len() / 100, "{errata} calls hit the ctzw erratum: too many to be the one operand class");
}

/// qemu 7.2's `ctzw` counts the zeros of the whole 64-bit register when its low word is zero
/// (`ctzw(0x8000000000000000)` gives 63, not 32: Zbb's ctzw counts in rs1[31:0] and gives 32
/// for a zero word). The model and Unicorn agree with the Zbb specification; a `lab run` on qemu
/// meets it as an emulator fault (docs/verdicts.md) where native or the reference outvotes it.
fn qemu_ctzw_erratum(name: &str, a1: u64) -> bool {
    name == "zbb_ctzw" && a1 as u32 == 0 && a1 != 0
}

#[test]
fn encodings_next_to_zbb_stay_illegal_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let image = build_test_image(dir.path());
    for kind in [BackendKind::Unicorn, BackendKind::Qemu] {
        let mut backend = open(kind, &image);
        for (name, _) in NOT_ZBB {
            let sym = format!("not_zbb_{name}");
            let addr = image.symbol(&sym).unwrap().addr;
            let mut b = BatchBuilder::new(Abi::of(image.arch));
            b.call(addr, [Arg::Imm(1), Arg::Imm(2), Arg::Imm(3), Arg::Imm(4)], 5);
            let batch = b.layout(image.arena().unwrap()).unwrap();
            let run = run_batch(backend.as_mut(), &batch).unwrap();
            let f = run.fault_of(0).unwrap_or_else(|| panic!("{kind}: {sym} did not fault"));
            assert_eq!(f.kind, FaultKind::IllegalInstruction, "{kind}: {sym}: {f:?}");
            assert_eq!(f.pc, Some(addr), "{kind}: {sym}: fault reported at {}", image.symbolize(f.pc.unwrap_or(0)));
        }
    }
}

#[test]
fn without_emulation_unicorn_reports_zbb_as_illegal() {
    // What a build without Zbb must see: the riscv64 variant's Unicorn backend leaves it off.
    let dir = tempfile::tempdir().unwrap();
    let image = build_test_image(dir.path());
    let mut uc = UnicornBackend::new(&image, Limits::default()).unwrap();
    let addr = image.symbol("zbb_andn").unwrap().addr;
    let mut b = BatchBuilder::new(Abi::of(image.arch));
    b.call(addr, [Arg::Imm(1), Arg::Imm(2), Arg::Imm(3), Arg::Imm(4)], 5);
    let batch = b.layout(image.arena().unwrap()).unwrap();
    let run = run_batch(&mut uc, &batch).unwrap();
    let f = run.fault_of(0).expect("andn must fault without emulation");
    assert_eq!((f.kind.clone(), f.pc), (FaultKind::IllegalInstruction, Some(addr)), "{f:?}");
}

#[test]
fn a_kernel_reading_its_patched_code_sees_the_real_words() {
    let dir = tempfile::tempdir().unwrap();
    let image = build_test_image(dir.path());
    let addr = image.symbol("zbb_self_read").unwrap().addr;
    let word = u64::from(u32::from_le_bytes(image.bytes_at(addr, 4).unwrap().try_into().unwrap()));
    let mut b = BatchBuilder::new(Abi::of(image.arch));
    b.call(addr, [Arg::Imm(1), Arg::Imm(2), Arg::Imm(3), Arg::Imm(4)], 5);
    let batch = b.layout(image.arena().unwrap()).unwrap();
    let mut uc = UnicornBackend::new(&image, Limits::default()).unwrap();
    uc.emulate_zbb(true).unwrap();
    for round in ["trapping", "patched"] {
        let run = run_batch(&mut uc, &batch).unwrap();
        assert!(run.faults.is_empty(), "{round}: {:?}", run.faults.first());
        assert_eq!(batch.record(&run.resp, 0).ret, word, "{round}: the load must see the rori word");
    }
    assert_eq!(uc.zbb_patched(), 1);
}

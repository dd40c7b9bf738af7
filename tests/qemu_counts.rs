//! Instruction counts under qemu-user's exec log (issue 27): on a call both can run, Unicorn's
//! block profile and qemu's log give the same count and mix exactly; rows Unicorn cannot run
//! (AVX2, RVV at each VLEN) get a real count from qemu; a VLEN-agnostic kernel's count follows
//! the VLEN; and a user's kernel whose long path Unicorn cannot run is still timed natively at
//! every size, each row naming its counter or why it was not counted. Fixtures:
//! tests/fixtures/riscv64/rvv_copy.S, x86_64/vex_long.S, and the lab's own
//! kernels/x86_64/poly1305.S assembled with AVX-512 IFMA.

use std::path::Path;
use std::process::Command;

use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;
use serde_json::Value;

use kernel_lab::bench::counter::{self, Counter};
use kernel_lab::bench::counts;
use kernel_lab::bench::mix::Disassembly;
use kernel_lab::bench::static_loop;
use kernel_lab::bench::workload::Workload;
use kernel_lab::variant::Kernel;

use crate::common::{build, variant as row, SEED};

#[test]
fn unicorn_and_qemu_count_the_same_scalar_call_exactly() {
    for (name, kernel) in [("riscv64", Kernel::Md5), ("x86_64", Kernel::Poly1305), ("aarch64", Kernel::Md5)] {
        let v = row(name);
        let image = build(v);
        let dis = Disassembly::of(&image).unwrap();
        let mut uc = Counter::unicorn(&image, v).unwrap();
        let mut qemu = Counter::qemu(&image, v, None).unwrap();
        assert_eq!((uc.name(), qemu.name()), (counter::UNICORN, counter::QEMU));
        for blocks in [1, 16] {
            let w = Workload::of(kernel, blocks, 1);
            // The same operands on both: the same seed.
            let a = uc.profile(&image, &w, &mut ChaCha8Rng::seed_from_u64(SEED)).unwrap();
            let b = qemu.profile(&image, &w, &mut ChaCha8Rng::seed_from_u64(SEED)).unwrap();
            assert!(a.instructions() > 20 * blocks, "{name} {kernel} x{blocks}: {}", a.instructions());
            assert_eq!(a.instructions(), b.instructions(), "{name} {kernel} x{blocks}: Unicorn vs qemu");
            // Item 3: the mix from qemu's pcs is the mix from Unicorn's blocks.
            assert_eq!(dis.mix(&a).unwrap(), dis.mix(&b).unwrap(), "{name} {kernel} x{blocks}: mix");
        }
    }
}

#[test]
fn rows_unicorn_cannot_run_are_counted_under_qemu() {
    let scalar = row("x86_64");
    let image = build(scalar);
    let dis = Disassembly::of(&image).unwrap();
    let base = counts::count(&image, scalar, &dis, Kernel::Poly1305, 0, SEED).unwrap();
    assert_eq!(base.counter, counter::UNICORN);

    let avx2 = row("x86_64+avx2");
    let image = build(avx2);
    let dis = Disassembly::of(&image).unwrap();
    let on_qemu = || Counter::qemu(&image, avx2, None);
    let r = counts::count_with(&image, avx2, &dis, Kernel::Poly1305, 0, SEED, &on_qemu).unwrap();
    assert_eq!((r.counter, r.vector_length.as_deref()), (counter::QEMU, None));
    assert!(r.repeatable, "{r:?}");
    let long = r.steady_per_block.expect("the AVX2 loop of the 256-block call");
    assert!(long < base.per_block, "AVX2 {long} instructions per block, scalar {}", base.per_block);
    assert!(r.mix_per_block.vector > 0.5 * r.per_block, "{:?}", r.mix_per_block);

    // RVV at two VLENs: the lab's kernel runs VLEN/16 lanes (vl = VLMAX at e32/m2), so its
    // long calls cost fewer instructions per block at VLEN 512 than at 128; each row names its
    // VLEN and counts vector instructions.
    let rvv = row("riscv64+v");
    let image = build(rvv);
    let dis = Disassembly::of(&image).unwrap();
    let at = |bits| {
        let vl = counter::vector_lengths(rvv).into_iter().flatten().find(|vl| vl.bits == bits).unwrap();
        let on_qemu = || Counter::qemu(&image, rvv, Some(vl));
        counts::count_with(&image, rvv, &dis, Kernel::Poly1305, 0, SEED, &on_qemu).unwrap()
    };
    let (r128, r512) = (at(128), at(512));
    assert_eq!(r128.vector_length.as_deref(), Some("VLEN 128"));
    assert_eq!(r512.vector_length.as_deref(), Some("VLEN 512"));
    assert_eq!(r128.per_call[0], r512.per_call[0], "1 block runs the scalar path at every VLEN");
    let long = |r: &counts::CountRow| r.per_call[2].1;
    assert!(long(&r512) < long(&r128), "256 blocks: VLEN 512 {r512:?}, VLEN 128 {r128:?}");
    assert!(r128.mix_per_block.vector > 1.0 && r512.mix_per_block.vector > 1.0, "{r128:?} {r512:?}");
    assert!((long(&r128) as f64) < 43.0 * 256.0, "{r128:?}: below the scalar 43 per block");
}

/// AVX-512 rows, which no counter here runs, are counted from the steady loop's text; on the
/// AVX2 row, which qemu counts, the same static method gives qemu's steady count.
#[test]
fn the_ifma_loop_is_counted_from_its_text_and_the_method_agrees_with_qemu_on_avx2() {
    let ifma = row("x86_64+avx512ifma");
    let (c, lp) = static_loop::find(&build(ifma), ifma, Kernel::Poly1305).unwrap();
    // kernels/x86_64/poly1305-ifma.inc: 103 instructions per sixteen blocks (two chains of
    // eight lanes), 36 of them IFMA.
    assert_eq!((c.loop_instructions, c.blocks_per_iteration, c.extension.as_str()), (103, 16, "avx512ifma"), "{c:?}");
    assert_eq!(c.per_block, 103.0 / 16.0);
    assert_eq!(lp.insns.iter().filter(|i| i.mnemonic().starts_with("vpmadd52")).count(), 36);
    assert_eq!(c.counter, "counted statically from the loop text");

    let avx2 = row("x86_64+avx2");
    let image = build(avx2);
    let (s, _) = static_loop::find(&image, avx2, Kernel::Poly1305).unwrap();
    let dis = Disassembly::of(&image).unwrap();
    let on_qemu = || Counter::qemu(&image, avx2, None);
    let r = counts::count_with(&image, avx2, &dis, Kernel::Poly1305, 0, SEED, &on_qemu).unwrap();
    assert_eq!(r.steady_per_block, Some(s.per_block), "qemu {r:?}, static {s:?}");
    assert!(static_loop::find(&build(row("x86_64")), row("x86_64"), Kernel::Poly1305).is_err(), "no extension loop");
}

/// `fixture` (relative to the repository) assembled for `march` with that arch's `md5.S` beside
/// it as `real_md5.inc`, into `dir/<stem>.o`.
fn object(dir: &Path, arch: &str, target: &str, march: &[&str], fixture: &Path, stem: &str) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let kernels = repo.join("kernels").join(arch);
    std::fs::copy(kernels.join("md5.S"), dir.join("real_md5.inc")).expect("copy md5.S");
    let obj = dir.join(stem).with_extension("o");
    let out = Command::new("clang")
        .args([&format!("--target={target}"), "-mno-relax", "-c"])
        .args(march)
        .arg("-I")
        .arg(dir)
        .arg("-I")
        .arg(&kernels)
        .arg(repo.join(fixture))
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("clang (Debian package clang)");
    assert!(out.status.success(), "clang: {}", String::from_utf8_lossy(&out.stderr));
    obj.display().to_string()
}

/// `lab bench` of `obj` declared `isa`, counts and native only, as JSON.
fn bench(dir: &Path, obj: &str, isa: &str, kernel: &str, extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .env("KERNEL_LAB_CACHE", dir.join("cache"))
        .args(["bench", "--object", obj, "--isa", isa, "--kernel", kernel, "--no-throughput", "--no-predict"])
        .args(["--runs", "3", "--format", "json"])
        .args(extra)
        .output()
        .expect("run lab");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn a_vlen_agnostic_kernel_is_counted_at_every_vlen() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new("tests/fixtures/riscv64/rvv_copy.S");
    let obj = object(dir.path(), "riscv64", "riscv64-linux-gnu", &["-march=rv64gcv"], fixture, "rvv_copy");
    let json = bench(dir.path(), &obj, "rv64gcv", "md5", &["--no-native"]);
    let rows: Vec<&Value> = json["counts"].as_array().unwrap().iter().filter(|r| r["misalign"] == 0).collect();
    let single = |vlen: &str| {
        let r = rows.iter().find(|r| r["vector_length"] == vlen).unwrap_or_else(|| panic!("no {vlen} row: {json}"));
        assert_eq!(r["counter"], counter::QEMU, "{r}");
        r["single_block_call"].as_u64().unwrap()
    };
    // md5_implCompress copies 64 bytes with a vsetvli loop of 7 instructions, e8 m1: VLEN/8
    // bytes per pass: 4 passes at VLEN 128, 2 at 256, 1 from 512 on.
    let (s128, s256, s512, s1024) = (single("VLEN 128"), single("VLEN 256"), single("VLEN 512"), single("VLEN 1024"));
    assert_eq!((s128 - s512, s256 - s512, s1024), (3 * 7, 7, s512), "{json}");
    assert!(json["errors"].as_array().unwrap().is_empty(), "{json}");
}

#[test]
fn native_timing_of_a_users_kernel_never_waits_on_a_count() {
    if kernel_lab::bench::native::unavailable().is_some() || !std::arch::is_x86_feature_detected!("avx") {
        println!("skipped: native timing needs an x86_64 host with AVX");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Scalar up to 3 blocks, one `vpxor` from 4 blocks on: Unicorn counts 64 B, qemu the rest.
    let fixture = Path::new("tests/fixtures/x86_64/vex_long.S");
    let obj = object(dir.path(), "x86_64", "x86_64-linux-gnu", &["-march=x86-64-v3"], fixture, "vex_long");
    let json = bench(dir.path(), &obj, "x86-64-v3", "md5", &[]);
    let native = json["user_native"].as_array().unwrap_or_else(|| panic!("{json}"));
    let count = json["counts"].as_array().unwrap().iter().find(|r| r["misalign"] == 0).expect("a count row");
    assert_eq!(count["counter"], counter::QEMU, "{count}");
    let per_call =
        |blocks: u64| count["per_call"].as_array().unwrap().iter().find(|p| p[0] == blocks).unwrap()[1].clone();
    let sizes: Vec<(u64, Value, Value)> = native
        .iter()
        .map(|r| (r["bytes"].as_u64().unwrap(), r["counted"].clone(), r["instructions_per_call"].clone()))
        .collect();
    assert_eq!(
        sizes,
        [
            (64, counter::UNICORN.into(), per_call(1)),
            (1024, counter::QEMU.into(), per_call(16)),
            (16384, counter::QEMU.into(), per_call(256))
        ],
        "{json}"
    );
    assert!(native.iter().all(|r| r["ns_per_byte"].as_f64().unwrap() > 0.0), "{json}");

    // AVX-512 IFMA from 256 bytes on: neither Unicorn nor qemu 7.2 runs it, native does.
    if !std::arch::is_x86_feature_detected!("avx512ifma") {
        println!("skipped the AVX-512 half: this CPU has no AVX-512 IFMA");
        return;
    }
    let poly = Path::new("kernels/x86_64/poly1305.S");
    let obj = object(dir.path(), "x86_64", "x86_64-linux-gnu", &["-march=x86-64-v4", "-mavx512ifma"], poly, "lab_ifma");
    let json = bench(dir.path(), &obj, "x86-64-v4+avx512ifma", "poly1305", &[]);
    let native = json["user_native"].as_array().unwrap_or_else(|| panic!("{json}"));
    assert_eq!(native.iter().map(|r| r["bytes"].as_u64().unwrap()).collect::<Vec<_>>(), [64, 1024, 16384]);
    assert!(native.iter().all(|r| r["ns_per_byte"].as_f64().unwrap() > 0.0), "{json}");
    assert_eq!(native[0]["counted"], counter::UNICORN, "64 B runs the scalar path: {json}");
    for r in &native[1..] {
        let why = r["counted"].as_str().unwrap();
        assert!(r["instructions_per_call"].is_null(), "{r}");
        assert!(why.starts_with("not counted: Unicorn: ") && why.contains("qemu 7.2's TCG has no AVX-512"), "{why}");
    }
}

//! The checks fire: a Zbb build on a CPU without Zbb faults with an illegal instruction, and a
//! kernel with one rotate amount changed fails named vectors on every backend.

use kernel_lab::backend::{BackendKind, Limits, ProcessBackend};
use kernel_lab::paths;
use kernel_lab::run;
use kernel_lab::variant::Kernel;
use kernel_lab::vectors;

use crate::common::{build, mutated_kernels, variant, SEED};

fn rfc1321() -> vectors::VectorSet {
    let (set, errors) = vectors::load_file(&paths::vectors_dir().join("md5/rfc1321.json"));
    assert!(errors.is_empty(), "{errors:?}");
    set.expect("rfc1321.json")
}

#[test]
fn zbb_build_on_a_cpu_without_zbb_is_an_illegal_instruction() {
    let zbb = variant("riscv64+zbb");
    let image = build(zbb);
    let no_zbb_cpu = variant("riscv64").qemu_cpu;
    assert!(no_zbb_cpu.contains("zbb=false"));
    let mut qemu = ProcessBackend::qemu(&image, no_zbb_cpu, Limits::default()).expect("qemu-riscv64");
    let set = rfc1321();
    let row = run::run_set(&mut qemu, zbb, &image, &set, SEED);
    assert_eq!(row.passed(), 0);
    assert_eq!(row.failed().len(), run::cases_in(&set));
    for f in &row.failed() {
        let first = &f.findings[0].text;
        assert!(first.contains("illegal instruction at md5_implCompress"), "{}: {first}", f.name);
    }
    // The same image on a CPU with Zbb passes: the failure above is the gate, not the kernel.
    let mut qemu = ProcessBackend::qemu(&image, zbb.qemu_cpu, Limits::default()).expect("qemu-riscv64");
    let row = run::run_set(&mut qemu, zbb, &image, &set, SEED);
    assert_eq!((row.passed(), row.failed().len()), (run::cases_in(&set), 0), "{:?}", row.failed());
}

#[test]
fn zbb_builds_poly1305_uses_no_zbb_and_runs_on_a_cpu_without_it() {
    // riscv64+zbb shares the base Poly1305 code (Zbb saves nothing there): prove it runs
    // under zbb=false, so the shared code cannot hide a Zbb instruction.
    let zbb = variant("riscv64+zbb");
    let image = build(zbb);
    let mut qemu = ProcessBackend::qemu(&image, variant("riscv64").qemu_cpu, Limits::default()).expect("qemu-riscv64");
    let (set, errors) = vectors::load_file(&paths::vectors_dir().join("poly1305/rfc8439.json"));
    assert!(errors.is_empty(), "{errors:?}");
    let set = set.expect("rfc8439.json");
    let row = run::run_set(&mut qemu, zbb, &image, &set, SEED);
    assert_eq!((row.passed(), row.failed().len()), (kernel_lab::run::cases_in(&set), 0), "{:?}", row.failed());
}

/// One round-1 rotate amount (step 4, s = 22) changed to 21 in each architecture's source.
const ROTATE_MUTATIONS: [(&str, &str, &str, &str); 3] = [
    ("riscv64", "FF\tB, C, D, A, 22, PRE_F, A, C, D, X4, 4", "FF\tB, C, D, A, 21, PRE_F, A, C, D, X4, 4", "riscv64"),
    ("aarch64", "FF      B, C, D, A, X(3),  T3, 22", "FF      B, C, D, A, X(3),  T3, 21", "aarch64"),
    ("x86_64", "F_STEP RB, RC, RD, RA,  3, 22,", "F_STEP RB, RC, RD, RA,  3, 21,", "x86_64"),
];

#[test]
fn a_changed_rotate_amount_fails_named_vectors_on_every_backend() {
    for (arch, from, to, variant_name) in ROTATE_MUTATIONS {
        let (_dir, build) = mutated_kernels(arch, "md5.S", from, to);
        let v = variant(variant_name);
        let cfg = crate::common::config_with(
            v,
            BackendKind::ALL.to_vec(),
            Kernel::Md5,
            vec![paths::vectors_dir().join("md5/rfc1321.json")],
            build,
        );
        let report = run::run(&cfg);
        assert_eq!(report.status(), kernel_lab::exit::ExitCode::Failed, "{}", report.to_human());
        for row in report.rows.iter().filter(|r| r.backend.supports(v).is_ok()) {
            assert_eq!(
                (row.passed(), row.failed().len()),
                (0, run::cases_in(&rfc1321())),
                "{arch} on {}: all three cases of every RFC 1321 vector must fail",
                row.backend
            );
            let f = &row.failed()[0];
            assert_eq!(f.name, "RFC1321 A.5 #1: MD5(\"\") [guarded]");
            assert!(f.findings[0].text.contains("state expected"), "{}", f.findings[0]);
        }
        let text = report.to_human();
        assert!(text.contains(&format!("FAILED {variant_name} on unicorn, md5 / rfc1321")), "{text}");
    }
}

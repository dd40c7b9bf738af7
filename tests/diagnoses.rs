//! Diagnoses that name the cause (issue 12, class 6): an unbalanced push is "returned through
//! a corrupted stack" with the register whose value became the return address, the same class
//! on every backend, and an address outside every symbol is never printed as a huge offset
//! from the last one (`lab_sigreturn+0x71034183a0d377b4`).

use kernel_lab::backend::BackendKind;
use kernel_lab::finding::Class;
use kernel_lab::paths;
use kernel_lab::run;
use kernel_lab::variant::{Arch, Kernel};

use crate::common::{build, config_with, fixture_kernels, variant};

#[test]
fn an_unbalanced_push_is_a_return_through_a_corrupted_stack_on_every_backend() {
    assert_eq!(Arch::host(), Some(Arch::X86_64), "the native backend needs an x86_64 host");
    let (_dir, build) = fixture_kernels("x86_64", "md5.S", "unbalanced_push.S");
    let files = vec![paths::vectors_dir().join("md5/rfc1321.json")];
    let report = run::run(&config_with(variant("x86_64"), BackendKind::ALL.to_vec(), Kernel::Md5, files, build));
    for r in &report.rows {
        assert_eq!(r.passed(), 0, "{}", report.to_human());
        assert!(!r.failed().is_empty());
        for c in &r.failed() {
            let f = &c.findings[0];
            assert_eq!(f.class, Class::Abi, "{}: {f}", r.backend);
            assert!(f.text.contains("returned through a corrupted stack ("), "{}: {f}", r.backend);
            assert!(f.text.contains("was not the driver's"), "{}: {f}", r.backend);
            assert!(!f.text.contains("lab_sigreturn+"), "{}: {f}", r.backend);
            if r.backend != BackendKind::Native {
                // The emulators see the address; hardware faults at the `ret` (non-canonical).
                assert!(
                    f.text.contains("it is the value the driver put in rbx, so rbx was pushed and not popped"),
                    "{f}"
                );
            }
        }
    }
    assert_eq!(report.disagreed(), 0, "the same cause on every backend is no disagreement");
}

#[test]
fn addresses_outside_every_symbol_are_not_symbolised() {
    for v in ["x86_64", "riscv64", "aarch64"] {
        let image = build(variant(v));
        let start = image.symbol("_start").expect("_start");
        let far = 0x7103_4183_a0d3_77b4;
        assert_eq!(image.symbolize(far), format!("{far:#x} (outside the image)"), "{v}");
        let inside = start.addr + start.size.saturating_sub(1);
        assert!(image.symbolize(inside).starts_with("_start+"), "{v}: {}", image.symbolize(inside));
        let mb = image.symbol("md5_implCompressMB").unwrap();
        assert_eq!(image.symbolize(mb.addr + 8), "md5_implCompressMB+0x8", "{v}");
    }
}

#[test]
fn a_kernel_that_compares_int_arguments_as_64_bit_values_is_told_so() {
    let cases = [
        ("x86_64", "rdx (int ofs, passed as 0x", "rcx (int limit, passed as 0x"),
        ("aarch64", "x2 (int ofs", "x3 (int limit"),
    ];
    for (arch, ofs, limit) in cases {
        let (_dir, build) = fixture_kernels(arch, "md5.S", "upper_bits.S");
        let files = vec![paths::vectors_dir().join("md5/mb-semantics.json")];
        let backends: Vec<BackendKind> =
            BackendKind::ALL.into_iter().filter(|b| b.supports(variant(arch)).is_ok()).collect();
        let report = run::run(&config_with(variant(arch), backends, Kernel::Md5, files, build));
        assert!(report.totals().1 > 0, "{arch}: the garbage upper bits make cases fail: {}", report.to_human());
        for r in &report.rows {
            for c in &r.failed() {
                let f = &c.findings[0];
                assert_eq!(f.class, Class::Abi, "{arch} on {}: {f}", r.backend);
                assert!(f.text.contains("depends on the upper 32 bits of "), "{arch} on {}: {f}", r.backend);
                assert!(f.text.contains(ofs) || f.text.contains(limit), "{arch} on {}: {f}", r.backend);
                assert!(f.text.contains("the ABI leaves them unspecified"), "{f}");
            }
        }
    }
}

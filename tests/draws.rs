//! A case's random draws (poison, argument garbage, misalignment, split points) come from its
//! identity - seed, set, vector, case - never from the variant or the backend: the same broken
//! Poly1305 code built as riscv64 and as riscv64+zbb must fail the same cases with the same
//! findings, call labels (split points) included.

use kernel_lab::backend::BackendKind;
use kernel_lab::paths;
use kernel_lab::report::Verdict;
use kernel_lab::run;
use kernel_lab::variant::Kernel;

use crate::common::{config_with, mutated_kernels, variant};

/// Every full block gets 2^129 instead of the 2^128 pad bit: every call with a block is wrong.
const PAD_BIT: (&str, &str) = ("addi\tH2, H2, 1\t", "addi\tH2, H2, 2\t");

#[test]
fn riscv64_and_riscv64_zbb_run_identical_cases() {
    let (_dir, build) = mutated_kernels("riscv64", "poly1305.S", PAD_BIT.0, PAD_BIT.1);
    let files = vec![paths::vectors_dir().join("poly1305/rfc8439.json")];
    let mut cfg = config_with(variant("riscv64"), vec![BackendKind::Unicorn], Kernel::Poly1305, files, build);
    cfg.variants.push(variant("riscv64+zbb"));
    let report = run::run(&cfg);
    assert!(report.setup_errors.is_empty(), "{:?}", report.setup_errors);
    let cases = |name: &str| -> Vec<(String, Vec<String>)> {
        let rows: Vec<_> = report.rows.iter().filter(|r| r.variant == name).collect();
        assert_eq!(rows.len(), 1, "one rfc8439 row for {name}");
        rows[0]
            .cases
            .iter()
            .map(|c| match &c.verdict {
                Verdict::Failed(f) => (c.name.clone(), f.iter().map(|f| f.text.clone()).collect()),
                other => (c.name.clone(), vec![format!("{other:?}")]),
            })
            .collect()
    };
    let (plain, zbb) = (cases("riscv64"), cases("riscv64+zbb"));
    let split: Vec<_> =
        plain.iter().filter(|(n, f)| n.contains("[split]") && f.iter().any(|t| t.contains(", length="))).collect();
    assert!(split.len() >= 3, "split cases fail with call labels: {plain:#?}");
    assert_eq!(plain, zbb);
}

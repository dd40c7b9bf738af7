//! vectors/poly1305/top-limb.json bites: a Poly1305 kernel that masks limb 4 to 26 bits when it
//! stores the accumulator (dropping 2^130, which is 5 mod p, whenever the partially reduced
//! result is at or above 2^130) fails the set's entries that leave such a result, on their
//! value, while the bundled kernel passes the whole set.

use kernel_lab::backend::BackendKind;
use kernel_lab::finding::Class;
use kernel_lab::paths;
use kernel_lab::run;
use kernel_lab::toolchain;
use kernel_lab::variant::Kernel;

use crate::common::{config_with, mutated_kernels, variant};

/// x86_64 Poly1305 stores limb 4 = (h1 >> 40 | h2 << 24) & (2^26 - 1) instead of the whole
/// h1 >> 40 | h2 << 24 (h2 = 4 there when the result is in [2^130, 2^130 + 2^64)).
const MASKED_TOP_LIMB: (&str, &str) =
    ("        mov     [r14 + 32], rcx\n", "        and     ecx, M26\n        mov     [r14 + 32], rcx\n");

fn top_limb_row(build: kernel_lab::toolchain::BuildConfig) -> kernel_lab::report::Row {
    let files = vec![paths::vectors_dir().join("poly1305/top-limb.json")];
    let cfg = config_with(variant("x86_64"), vec![BackendKind::Unicorn], Kernel::Poly1305, files, build);
    let report = run::run(&cfg);
    assert!(report.setup_errors.is_empty(), "{:?}", report.setup_errors);
    assert_eq!(report.rows.len(), 1, "{}", report.to_human());
    let row = report.rows.into_iter().next().expect("one row");
    assert_eq!(row.set, "top-limb");
    row
}

#[test]
fn a_kernel_that_masks_the_top_limb_fails_the_top_limb_set_on_value() {
    let clean = top_limb_row(toolchain::default_build());
    assert!(clean.failed().is_empty() && clean.disagreed().is_empty(), "bundled kernel: {:?}", clean.failed());
    assert_eq!(clean.passed(), 156, "52 entries, each a guarded case, its misaligned twin and an offset case");

    let (_dir, build) = mutated_kernels("x86_64", "poly1305.S", MASKED_TOP_LIMB.0, MASKED_TOP_LIMB.1);
    let row = top_limb_row(build);
    // The entries that leave (after some call) a result of 2^130 .. 2^130 + 4, limb 4 = 2^26:
    // three r = 1 sums (2^131 - 5, - 4, - 1), results 2^130, + 1, + 4 for four r, four
    // two-block entries and both two-call entries: 21 entries, 63 cases. Results below 2^130
    // (p - 1, p, p + 1, 2^130 - 1) and sums the reduction folds below it pass, as they should.
    let at_2_130 = |name: &str| {
        (name.contains("result 2^130") && !name.contains("result 2^130 - ")) || name.contains("leaving 2^130")
    };
    let (set, errors) = kernel_lab::vectors::load_file(&paths::vectors_dir().join("poly1305/top-limb.json"));
    assert!(errors.is_empty(), "{errors:?}");
    let want: Vec<String> =
        set.expect("the set").vectors.iter().map(|v| v.name.clone()).filter(|n| at_2_130(n)).collect();
    assert_eq!(want.len(), 21, "{want:#?}");
    // Case names are the entry's name with " [guarded]", " [guarded, misaligned]" or " @+N".
    let entry =
        |case: &str| case.split(" [").next().and_then(|n| n.split(" @+").next()).unwrap_or_default().to_string();
    let mut got: Vec<String> = row.failed().into_iter().map(|f| entry(&f.name)).collect();
    got.dedup();
    assert_eq!((got, row.failed().len(), row.passed()), (want, 63, 93));
    for f in &row.failed() {
        assert!(
            f.findings.iter().all(|x| x.class == Class::Value)
                && f.findings[0].text.contains("acc mod 2^130-5 expected"),
            "{}: {:?}",
            f.name,
            f.findings
        );
    }
}

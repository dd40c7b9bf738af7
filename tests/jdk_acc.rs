//! The accumulators the JDK hands `poly1305_processBlocks` (lab/src/domain.rs `AccRange`,
//! docs/contracts.md "The JDK call domain"): a kernel declaring `poly1305_acc = "jdk"` is not
//! blamed for accumulators the JDK's Java code never leaves (skipped, or out-of-domain with
//! `--domain wide`), and must return accumulators in that range itself.

use std::process::Command;

use crate::common;

/// `lab run` on the x86_64 scalar variant built from `dir`, Poly1305 `limb-edges` on native,
/// with `extra` options: (exit status, stdout + stderr).
fn run(dir: &std::path::Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["run", "--kernels-dir", dir.to_str().unwrap(), "--arch", "x86_64", "--variant", "=x86_64"];
    args.extend(["--kernel", "poly1305", "--set", "=limb-edges", "--backend", "native"]);
    args.extend(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(&args).output().expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exit status"), text)
}

#[test]
fn accumulators_the_jdk_never_hands_over_are_outside_its_domain() {
    let (dir, _) = common::fixture_kernels("x86_64", "poly1305.S", "jdk_acc_in.S");
    // The lab's contract range: the fixture's wrong results on limb 4 > 2^26 + 13 are failures.
    let (code, text) = run(dir.path(), &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("acc mod 2^130-5 expected"), "{text}");
    // Declared `jdk`: those cases are not run, each set says why, and nothing fails.
    let (code, text) = run(dir.path(), &["--poly1305-acc", "jdk"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("poly1305_processBlocks with acc limb 4 = 0x7ffffff, outside the accumulators"), "{text}");
    assert!(text.contains(" 0 failed, ") && !text.contains(" 0 skipped"), "{text}");
    // `--domain wide` runs them and reports them apart, not as failures.
    let (code, text) = run(dir.path(), &["--poly1305-acc", "jdk", "--domain", "wide"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(" 0 failed, ") && text.contains("outside the JDK call domain (not failures)"), "{text}");
}

#[test]
fn a_kernel_declaring_the_jdk_range_must_return_accumulators_in_it() {
    let (dir, _) = common::fixture_kernels("x86_64", "poly1305.S", "jdk_acc_out.S");
    // acc + p as limbs is inside the lab's contract: a pass there.
    let (code, text) = run(dir.path(), &[]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = run(dir.path(), &["--poly1305-acc", "jdk"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("is out of bounds of poly1305_acc = \"jdk\" (limbs 0-3 < 2^26, limb 4 <= 2^26 + 13"),
        "{text}"
    );
}

#[test]
fn the_manifest_declares_the_range_and_one_run_has_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let m = dir.path().join("kernel-lab.toml");
    let entry = |name: &str, acc: &str| {
        format!("[[variant]]\nname = \"{name}\"\narch = \"x86_64\"\nsources = [\"k.S\"]\n{acc}")
    };
    std::fs::write(dir.path().join("k.S"), "").unwrap();
    std::fs::write(&m, entry("a", "poly1305_acc = \"jdk\"\n") + &entry("b", "")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["run", "--manifest", m.to_str().unwrap(), "--kernel", "poly1305"])
        .output()
        .expect("run lab");
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the manifest's variants choose different poly1305_acc (a: jdk, b: (the default))"),
        "{text}"
    );
    std::fs::write(&m, entry("a", "poly1305_acc = \"javas\"\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["run", "--manifest", m.to_str().unwrap()])
        .output()
        .expect("run lab");
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("poly1305_acc") && text.contains("javas"), "{text}");
}

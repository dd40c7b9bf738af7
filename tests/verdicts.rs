//! Verdict attribution (issue 25, docs/verdicts.md): a kernel bug fails alike on every backend
//! and is never blamed on an emulator, whichever kernels run beside it (the MD5 and Poly1305
//! sets of one name are different cases); an emulator fault is blamed on that emulator in every
//! set and counts no kernel failure; a fault inside a case does not leave a trail of value
//! findings that read like arithmetic bugs.

use std::path::{Path, PathBuf};
use std::process::Command;

use kernel_lab::backend::BackendKind;
use kernel_lab::finding::Class;
use kernel_lab::paths;
use kernel_lab::run;
use kernel_lab::variant::Kernel;
use serde_json::Value;

use crate::common::{config_with, mutated_kernels, variant};

/// Every bundled vector file of both kernels.
fn every_vector_file() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for k in ["md5", "poly1305"] {
        let dir = paths::vectors_dir().join(k);
        let mut here: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("dir entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        here.sort();
        files.extend(here);
    }
    files
}

#[test]
fn a_value_bug_with_both_kernels_selected_fails_every_md5_set_on_every_backend_and_blames_no_emulator() {
    // One MD5 rotate amount changed (round 1, step 4: 22 -> 21), in the x86_64 kernel.
    let (_dir, build) =
        mutated_kernels("x86_64", "md5.S", "F_STEP RB, RC, RD, RA,  3, 22,", "F_STEP RB, RC, RD, RA,  3, 21,");
    let mut cfg = config_with(variant("x86_64"), BackendKind::ALL.to_vec(), Kernel::Md5, every_vector_file(), build);
    cfg.kernels = vec![Kernel::Md5, Kernel::Poly1305];
    let report = run::run(&cfg);
    assert_eq!(report.disagreed(), 0, "{}", report.to_human());
    let md5_sets: Vec<&str> = report.rows.iter().filter(|r| r.kernel == Kernel::Md5).map(|r| r.set.as_str()).collect();
    assert!(md5_sets.contains(&"intermediate") && md5_sets.contains(&"chains"), "{md5_sets:?}");
    for r in &report.rows {
        match r.kernel {
            // Every MD5 case goes through round 1: every one fails, on every backend.
            Kernel::Md5 => {
                assert_eq!(
                    (r.passed(), r.failed().len()),
                    (0, r.cases.len()),
                    "{} / {} on {}",
                    r.kernel,
                    r.set,
                    r.backend
                )
            }
            Kernel::Poly1305 => {
                assert_eq!(
                    (r.passed(), r.failed().len()),
                    (r.cases.len(), 0),
                    "{} / {} on {}",
                    r.kernel,
                    r.set,
                    r.backend
                )
            }
        }
        assert!(r.skipped() == 0 && r.disagreed().is_empty());
    }
    assert!(!report.to_human().contains("emulator fault"));
}

/// `tests/fixtures/x86_64/blsi_carry.S` assembled with the real `md5.S` beside it as
/// `real_md5.inc`, into an object in `dir`.
fn blsi_object(dir: &Path) -> PathBuf {
    std::fs::copy(paths::kernels_dir().join("x86_64/md5.S"), dir.join("real_md5.inc")).expect("copy md5.S");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x86_64/blsi_carry.S");
    let obj = dir.join("blsi_carry.o");
    let out = Command::new("clang")
        .args(["--target=x86_64-linux-gnu", "-c", "-I"])
        .arg(dir)
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("clang (Debian package clang)");
    assert!(out.status.success(), "clang: {}", String::from_utf8_lossy(&out.stderr));
    obj
}

#[test]
fn qemus_blsi_carry_flag_is_blamed_on_qemu_in_every_set_and_counts_no_kernel_failure() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = blsi_object(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .env("KERNEL_LAB_CACHE", dir.path().join("cache"))
        .args(["run", "--seed", "3", "--kernel", "md5", "--backend", "qemu,native", "--isa", "x86-64+bmi1"])
        .arg("--object")
        .arg(&obj)
        .args(["--format", "json"])
        .output()
        .expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout);
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(out.status.code(), Some(1), "an emulator fault is not a clean run: {text}");
    assert_eq!(json["totals"]["failed"], 0, "no kernel failure");
    assert_eq!(
        json["image_findings"].as_array().map(Vec::len),
        Some(0),
        "BLSI is declared: {}",
        json["image_findings"]
    );
    let rows = json["rows"].as_array().expect("rows");
    let qemu: Vec<&Value> = rows.iter().filter(|r| r["backend"] == "qemu").collect();
    assert!(qemu.len() >= 8, "every bundled MD5 set: {}", qemu.len());
    for r in &qemu {
        let cases = r["cases"].as_array().expect("cases");
        // Cases that call only md5_implCompressMB never meet the BLSI and pass.
        let (blamed, passed) = (r["disagreed"].as_u64().unwrap_or(0), r["passed"].as_u64().unwrap_or(0));
        assert_eq!((r["failed"].as_u64(), blamed + passed), (Some(0), cases.len() as u64), "{}", r["set"]);
        assert!(blamed > 0, "{}: qemu is blamed", r["set"]);
        let first =
            cases.iter().find(|c| c["outcome"] == "disagreed").map(|c| &c["findings"][0]).expect("a blamed case");
        assert_eq!(first["class"], "emulator-fault", "{}", r["set"]);
        let said = first["text"].as_str().unwrap_or_default();
        assert!(
            said.starts_with("emulator fault: qemu 7.") && said.contains("native and the reference agree"),
            "{said}"
        );
    }
    for r in rows.iter().filter(|r| r["backend"] == "native") {
        assert_eq!(r["failed"], 0, "{}", r["set"]);
        assert!(r["passed"].as_u64().unwrap_or(0) > 0, "{}", r["set"]);
    }
}

/// An MD5 kernel whose `md5_implCompressMB` loads from address 8 (never mapped) when its first
/// block starts with the byte `1`, and is right otherwise.
const FAULT_ON_ONE: &str = r#"
#define md5_implCompressMB real_md5_implCompressMB
#include "real_md5.inc"
#undef md5_implCompressMB
        .intel_syntax noprefix
        .text
        .globl  md5_implCompressMB
        .p2align 4
md5_implCompressMB:
        cmp     byte ptr [rdi], 0x31
        jne     real_md5_implCompressMB
        mov     eax, [8]
        jmp     real_md5_implCompressMB
"#;

#[test]
fn a_fault_inside_a_case_is_the_first_cause_and_later_calls_are_knock_ons() {
    // RFC 1321 A.5 #7 ("1234567890" x 8, two blocks): implCompressMB faults on block 0, and the
    // buffered block 1 starts from the state it left (the IV) and returns a wrong state as a
    // consequence.
    let (_dir, build) = crate::common::generated_fixture_kernels("x86_64", "md5.S", FAULT_ON_ONE);
    let files = vec![paths::vectors_dir().join("md5/rfc1321.json")];
    let report = run::run(&config_with(variant("x86_64"), vec![BackendKind::Qemu], Kernel::Md5, files, build));
    let mut knock_ons = 0;
    for c in &report.rows[0].failed() {
        let classes: Vec<Class> = c.findings.iter().map(|f| f.class).collect();
        assert_eq!(classes.first(), Some(&Class::Memory), "{:?}", c.findings);
        assert!(!classes.iter().any(|k| matches!(k, Class::Value | Class::Bounds)), "{:?}", c.findings);
        if let Some(f) = c.findings.iter().find(|f| f.class == Class::KnockOn) {
            knock_ons += 1;
            assert!(
                f.text.contains(" later call") && f.text.contains("returns wrong outputs after the finding in"),
                "{f}"
            );
        }
    }
    assert!(knock_ons > 0, "{}", report.to_human());
}

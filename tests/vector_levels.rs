//! Vector kernels declared at the x86-64 psABI levels: an AVX2 kernel declared `x86-64-v3`
//! passes on qemu and natively with no image finding (Unicorn, which runs no VEX code, skips the
//! calls that reach it, naming the instruction); an AVX-512 kernel declared `x86-64-v4` passes
//! natively on a host with AVX-512 and is not run on qemu 7.2, which has none, with the reason.

use std::path::{Path, PathBuf};
use std::process::Command;

use kernel_lab::paths;
use serde_json::Value;

/// `tests/fixtures/x86_64/<fixture>` assembled with the real `md5.S` beside it as
/// `real_md5.inc`, into an object in `dir`.
fn object(dir: &Path, fixture: &str, march: &str) -> PathBuf {
    std::fs::copy(paths::kernels_dir().join("x86_64/md5.S"), dir.join("real_md5.inc")).expect("copy md5.S");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x86_64").join(fixture);
    let obj = dir.join(fixture).with_extension("o");
    let out = Command::new("clang")
        .args(["--target=x86_64-linux-gnu", &format!("-march={march}"), "-c", "-I"])
        .arg(dir)
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("clang (Debian package clang)");
    assert!(out.status.success(), "clang: {}", String::from_utf8_lossy(&out.stderr));
    obj
}

/// `lab run --kernel md5` of the object declared `isa` on every backend, as JSON.
fn run(fixture: &str, isa: &str) -> (Option<i32>, Value) {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = object(dir.path(), fixture, isa);
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .env("KERNEL_LAB_CACHE", dir.path().join("cache"))
        .args(["run", "--seed", "5", "--kernel", "md5", "--backend", "unicorn,qemu,native", "--isa", isa])
        .arg("--object")
        .arg(&obj)
        .args(["--format", "json"])
        .output()
        .expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout);
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (out.status.code(), json)
}

/// The rows of one backend.
fn rows<'a>(json: &'a Value, backend: &str) -> Vec<&'a Value> {
    json["rows"].as_array().expect("rows").iter().filter(|r| r["backend"] == backend).collect()
}

/// Every row of `backend` passed cases and failed none.
fn assert_passes(json: &Value, backend: &str) {
    let rows = rows(json, backend);
    assert!(rows.len() >= 8, "{backend}: every bundled MD5 set: {}", rows.len());
    for r in rows {
        assert_eq!(r["failed"], 0, "{backend} {}", r["set"]);
        assert!(r["passed"].as_u64().unwrap_or(0) > 0, "{backend} {}: {r}", r["set"]);
    }
}

/// Every row of `backend` was skipped, none passed, with a reason containing each of `why`.
fn assert_not_run(json: &Value, backend: &str, why: &[&str]) {
    let rows = rows(json, backend);
    assert!(!rows.is_empty(), "{backend} is listed");
    for r in rows {
        assert_eq!((r["passed"].as_u64(), r["failed"].as_u64()), (Some(0), Some(0)), "{backend} {}", r["set"]);
        let reason = r["skip_reason"].as_str().unwrap_or_default();
        for w in why {
            assert!(reason.contains(w), "{backend} {}: `{w}` in {reason}", r["set"]);
        }
    }
}

/// No row of `backend` failed, and its cases that did not run were skipped with a reason
/// containing each of `why` (the vector fixtures' `md5_implCompress` stops at its first vector
/// instruction on Unicorn; `md5_implCompressMB` is the scalar one and runs).
fn assert_stopped(json: &Value, backend: &str, why: &[&str]) {
    let rows = rows(json, backend);
    assert!(!rows.is_empty(), "{backend} is listed");
    let mut skipped = 0;
    for r in rows {
        assert_eq!(r["failed"].as_u64(), Some(0), "{backend} {}", r["set"]);
        for c in r["cases"].as_array().expect("cases").iter().filter(|c| c["outcome"] == "skipped") {
            skipped += 1;
            let reason = c["skip_reason"].as_str().unwrap_or_default();
            assert!(why.iter().all(|w| reason.contains(w)), "{backend} {}: {why:?} in {reason}", r["set"]);
        }
    }
    assert!(skipped > 0, "{backend}: the vector calls were stopped");
}

fn host_has(flag: &str) -> bool {
    kernel_lab::user_kernel::isa_decl::host_cpu_flags().iter().any(|f| f == flag)
}

#[test]
fn an_avx2_kernel_declared_x86_64_v3_passes_on_qemu_and_native_with_no_image_finding() {
    if !host_has("avx2") || !host_has("abm") {
        eprintln!("this host has no AVX2/LZCNT: the native half cannot run here");
        return;
    }
    let (code, json) = run("avx2_md5.S", "x86-64-v3");
    assert_eq!(json["image_findings"], serde_json::json!([]), "AVX2, LZCNT, ANDN are declared");
    assert_passes(&json, "qemu");
    assert_passes(&json, "native");
    assert_stopped(
        &json,
        "unicorn",
        &["not run past `vmovdqu ymm0,", "at md5_implCompress+0x", "cannot execute avx ("],
    );
    assert_eq!(code, Some(0), "{json}");
}

#[test]
fn an_avx512_kernel_declared_x86_64_v4_passes_natively_and_is_not_run_on_qemu() {
    if !host_has("avx512f") {
        eprintln!("this host has no AVX-512: nothing can run the kernel here");
        return;
    }
    let (code, json) = run("avx512_md5.S", "x86-64-v4");
    assert_eq!(json["image_findings"], serde_json::json!([]), "AVX-512F is declared");
    assert_passes(&json, "native");
    assert_not_run(&json, "qemu", &["avx512f", "qemu 7.2's TCG has no AVX-512"]);
    assert_stopped(
        &json,
        "unicorn",
        &["not run past `vmovdqu64 zmm0,", "cannot execute avx512f", "Unicorn 2.1.5 has no AVX-512"],
    );
    assert_eq!(json["ran_nowhere"], serde_json::json!([]), "native ran it");
    assert_eq!(code, Some(0), "{json}");
}

#[test]
fn undeclared_avx2_code_is_an_image_finding() {
    let (code, json) = run("avx2_md5.S", "x86-64");
    let findings = json["image_findings"].as_array().expect("findings");
    assert!(findings.iter().any(|f| f["text"].as_str().unwrap_or_default().contains("AVX2")), "{findings:?}");
    assert_eq!(code, Some(1));
}

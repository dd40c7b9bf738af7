//! Unicorn runs what it can (issue 27 item 3): a user's object whose calls reach an instruction
//! Unicorn 2.1.5 cannot execute (VEX on x86_64, RVV on riscv64) is run, not refused; the calls
//! that reach one are skipped, naming the instruction and symbol+offset, and the rest are
//! judged as before. Fixtures: tests/fixtures/x86_64/vex_long.S, riscv64/rvv_long.S (scalar
//! code for up to 3 blocks, one vector instruction from 4 blocks on, then the real MD5). `lab
//! fuzz` counts such cases apart as not run.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `tests/fixtures/<arch>/<fixture>` assembled for `march` with that arch's real `md5.S`
/// beside it as `real_md5.inc`, into an object in `dir`.
fn object(dir: &Path, arch: &str, target: &str, march: &str, fixture: &str) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(repo.join("kernels").join(arch).join("md5.S"), dir.join("real_md5.inc")).expect("copy md5.S");
    let obj = dir.join(fixture).with_extension("o");
    let out = Command::new("clang")
        .args([&format!("--target={target}"), &format!("-march={march}"), "-mno-relax", "-c", "-I"])
        .arg(dir)
        .arg(repo.join("tests/fixtures").join(arch).join(fixture))
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("clang (Debian package clang)");
    assert!(out.status.success(), "clang: {}", String::from_utf8_lossy(&out.stderr));
    obj.display().to_string()
}

/// `lab run --kernel md5` of `obj` declared `isa` on `backends`: (exit status, JSON report).
fn run(dir: &Path, obj: &str, isa: &str, backends: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let json = dir.join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .env("KERNEL_LAB_CACHE", dir.join("cache"))
        .args(["run", "--seed", "5", "--kernel", "md5", "--backend", backends, "--isa", isa, "--object", obj])
        .args(extra)
        .args(["--format", "json", "--output"])
        .arg(&json)
        .output()
        .expect("run lab");
    let text =
        std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), serde_json::from_str(&text).expect("JSON report"))
}

/// The cases of `backend`'s rows as (set, msg_len, outcome, skip reason).
fn cases(json: &Value, backend: &str) -> Vec<(String, u64, String, String)> {
    let rows = json["rows"].as_array().expect("rows");
    let mine = rows.iter().filter(|r| r["backend"].as_str().is_some_and(|b| b.starts_with(backend)));
    mine.flat_map(|r| {
        r["cases"].as_array().expect("cases").iter().map(move |c| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (s(&r["set"]), c["msg_len"].as_u64().unwrap_or(0), s(&c["outcome"]), s(&c["skip_reason"]))
        })
    })
    .collect()
}

/// Unicorn passes every case of fewer than 3 blocks and skips every case that reaches the
/// vector instruction with `reason`, failing none; the other backends pass every case.
fn assert_stops(json: &Value, reason: &str, others: &[&str]) {
    let uc = cases(json, "unicorn");
    assert!(uc.iter().all(|c| c.2 != "failed"), "{uc:?}");
    let skipped: Vec<_> = uc.iter().filter(|c| c.2 == "skipped").collect();
    // jtreg: 24 cases of 1024 bytes and up; mb-semantics: 9 of 256 bytes and up.
    assert_eq!(skipped.len(), 33, "{skipped:?}");
    for (set, len, _, why) in &skipped {
        assert_eq!(why, reason, "{set} {len}");
        assert!(*len >= 256, "{set}: a {len}-byte case reached the vector code");
    }
    assert!(uc.iter().filter(|c| c.1 < 192).all(|c| c.2 == "passed"), "short cases run scalar code");
    assert!(uc.iter().filter(|c| c.2 == "passed").count() > 8000, "the scalar calls ran");
    let rows = json["rows"].as_array().expect("rows");
    let summary = rows.iter().find(|r| r["backend"] == "unicorn" && r["set"] == "mb-semantics").expect("row");
    assert_eq!(summary["skip_reason"], reason, "one reason for the row");
    for b in others {
        let theirs = cases(json, b);
        assert!(!theirs.is_empty() && theirs.iter().all(|c| c.2 == "passed"), "{b}: {theirs:?}");
    }
}

#[test]
fn an_x86_64_kernel_reaching_vex_code_for_long_inputs_runs_its_short_calls_on_unicorn() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = object(dir.path(), "x86_64", "x86_64-linux-gnu", "x86-64-v3", "vex_long.S");
    let avx = kernel_lab::user_kernel::isa_decl::host_cpu_flags().iter().any(|f| f == "avx2");
    let backends = if avx { "unicorn,qemu,native" } else { "unicorn,qemu" };
    let (code, json) = run(dir.path(), &obj, "x86-64-v3", backends, &[]);
    let reason = "not run past `vpxor xmm0, xmm0, xmm0` at md5_implCompressMB+0xb: Unicorn 2.1.5 cannot execute avx \
                  (AVX; VEX-encoded: Unicorn 2.1.5 computes some VEX.128 forms wrongly (docs/DESIGN.md))";
    assert_stops(&json, reason, if avx { &["qemu", "native"] } else { &["qemu"] });
    assert_eq!(json["totals"]["skipped"].as_u64(), Some(33), "skips are counted as skipped, not passed");
    assert_eq!(code, Some(0), "a skip fails nothing");
}

#[test]
fn a_riscv64_kernel_reaching_rvv_code_for_long_inputs_runs_its_short_calls_on_unicorn() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = object(dir.path(), "riscv64", "riscv64-linux-gnu", "rv64gcv", "rvv_long.S");
    let (code, json) = run(dir.path(), &obj, "rv64gc_v", "unicorn,qemu", &["--vlen", "128"]);
    let reason = "not run past `vsetvli t0, zero, e8, m1, ta, ma` at md5_implCompressMB+0xc: Unicorn 2.1.5 cannot \
                  execute v (vector extension (RISC-V \"V\" Standard Extension for Vector Operations 1.0); Unicorn \
                  2.1.5 (QEMU 5.0.1) has no RVV 1.0)";
    assert_stops(&json, reason, &["qemu"]);
    assert_eq!(code, Some(0));
}

/// `lab fuzz` on Unicorn: the cases that reach the vector instruction are counted apart as not
/// run, naming it; the rest are compared as before and the target is clean.
#[test]
fn fuzzing_on_unicorn_counts_the_cases_stopped_at_vector_code_apart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = object(dir.path(), "x86_64", "x86_64-linux-gnu", "x86-64-v3", "vex_long.S");
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .env("KERNEL_LAB_CACHE", dir.path().join("cache"))
        .args(["fuzz", "--seed", "3", "--cases", "512", "--kernel", "md5", "--backend", "unicorn"])
        .args(["--isa", "x86-64-v3", "--object", &obj, "--out"])
        .arg(dir.path().join("failures"))
        .output()
        .expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let line = text.lines().find(|l| l.contains(" unicorn ")).expect("the target's line");
    assert!(line.contains("clean"), "{text}");
    let ran: u64 = line.split_whitespace().find_map(|w| w.parse().ok()).expect("cases");
    let stopped = text.lines().find(|l| l.contains("more cases not run (skipped)")).expect("not run line");
    let n: u64 = stopped.split_whitespace().find_map(|w| w.parse().ok()).expect("count");
    assert!(n > 0 && ran > 0 && ran + n == 512, "{ran} ran + {n} not run: {text}");
    assert!(stopped.contains("not run past `vpxor xmm0, xmm0, xmm0` at md5_implCompressMB+0xb"), "{stopped}");
    // The summary says so too: a clean target with cases not run is not all green.
    let summary = format!("{ran} cases ({n} more not run, listed per target): 1 targets clean");
    assert!(text.contains(&summary), "{summary}: {text}");
}

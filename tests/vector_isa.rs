//! Vector ISAs (issue 27, RVV): the vector length as a run dimension (qemu at every VLEN, one
//! row each, named in rows, replays and the one-line verdict), the RVV state the driver sets at
//! each call (vtype.vill, a poisoned vxrm), and RVV declared by a user (`--isa rv64gcv`).
//! Fixtures: tests/fixtures/riscv64/rvv_*.S, each wrapping the scalar MD5.

use std::path::{Path, PathBuf};
use std::process::Command;

use kernel_lab::backend::BackendKind;
use kernel_lab::finding::Class;
use kernel_lab::paths;
use kernel_lab::report::{Report, Row};
use kernel_lab::run;
use kernel_lab::toolchain::BuildConfig;
use kernel_lab::variant::Kernel;

use crate::common::{config_with, fixture_kernels, generated_fixture_kernels, variant};

fn rfc1321() -> Vec<PathBuf> {
    vec![paths::vectors_dir().join("md5/rfc1321.json")]
}

/// `riscv64+v` built from `build` on qemu at every default VLEN, MD5 over RFC 1321's vectors.
fn run_rvv(build: BuildConfig) -> Report {
    let cfg = config_with(variant("riscv64+v"), vec![BackendKind::Qemu], Kernel::Md5, rfc1321(), build);
    run::run(&cfg)
}

/// The rows that ran, as (VLEN, passed, failed).
fn by_vlen(report: &Report) -> Vec<(u32, usize, usize)> {
    let vlen = |r: &Row| r.vector_length.expect("an RVV row names its VLEN").bits;
    report.rows.iter().map(|r| (vlen(r), r.passed(), r.failed().len())).collect()
}

#[test]
fn a_vlen_agnostic_rvv_kernel_passes_at_every_vlen() {
    let (_dir, build) = fixture_kernels("riscv64", "md5.S", "rvv_copy.S");
    let report = run_rvv(build);
    assert!(report.setup_errors.is_empty() && report.image_findings.is_empty(), "{report:?}");
    assert_eq!(by_vlen(&report), [(128, 21, 0), (256, 21, 0), (512, 21, 0), (1024, 21, 0)]);
    assert!(report.vector_length_verdicts().is_empty());
    assert!(report.warnings.iter().all(|w| !w.contains("vxrm")), "{:?}", report.warnings);
}

#[test]
fn a_kernel_written_for_vlen_256_fails_exactly_at_vlen_128() {
    let (_dir, build) = fixture_kernels("riscv64", "md5.S", "rvv_vlen256.S");
    let report = run_rvv(build);
    let rows = by_vlen(&report);
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [128, 256, 512, 1024]);
    assert!(rows[0].2 > 0, "VLEN 128 copies half of each block: {rows:?}");
    assert!(rows[1..].iter().all(|&(_, p, f)| (p, f) == (21, 0)), "{rows:?}");
    assert_eq!(report.vector_length_verdicts(), ["riscv64+v, md5: passes at VLEN 256, 512, 1024; fails at VLEN 128"]);
    let failed = &report.rows[0];
    assert_eq!(failed.backend_label(), "qemu vlen=128");
    let finding = &failed.failed()[0].findings[0];
    assert_eq!(finding.class, Class::Value, "{finding}");
}

#[test]
fn a_kernel_relying_on_its_callers_vtype_traps_and_is_named() {
    let (_dir, build) = fixture_kernels("riscv64", "md5.S", "rvv_no_vsetvli.S");
    let report = run_rvv(build);
    assert_eq!(report.rows.len(), 4);
    for r in &report.rows {
        assert_eq!((r.passed(), r.failed().len()), (0, 21), "{}", r.backend_label());
        let f = &r.failed()[0].findings[0];
        assert_eq!(f.class, Class::Abi, "{f}");
        assert!(
            f.text.contains("vector instruction with vtype.vill set: the kernel relies on vl/vtype from its caller")
                && f.text.contains("`vle8.v v8, (a0)`"),
            "{f}"
        );
    }
}

#[test]
fn a_kernel_relying_on_vxrm_zero_fails_and_passes_once_it_sets_vxrm() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/riscv64/rvv_vxrm.S");
    let text = std::fs::read_to_string(&fixture).expect("fixture");
    let (_dir, build) = fixture_kernels("riscv64", "md5.S", "rvv_vxrm.S");
    let report = run_rvv(build);
    assert!(by_vlen(&report).iter().all(|&(_, p, f)| (p, f) == (0, 21)), "{:?}", by_vlen(&report));
    assert_eq!(report.rows[0].failed()[0].findings[0].class, Class::Value);
    let warned: Vec<&String> = report.warnings.iter().filter(|w| w.contains("rounds by vxrm")).collect();
    assert_eq!(warned.len(), 1, "{:?}", report.warnings);
    assert!(warned[0].contains("`vssrl.vi v4, v4, 1`") && warned[0].contains("never writes"), "{}", warned[0]);
    // The same kernel setting vxrm itself: every case passes, no warning. Only vxrm differs.
    let fixed = text.replacen("\tvsetivli zero, 2", "\tcsrwi\tvxrm, 0\n\tvsetivli zero, 2", 1);
    assert_ne!(fixed, text);
    let (_dir, build) = generated_fixture_kernels("riscv64", "md5.S", &fixed);
    let report = run_rvv(build);
    assert!(by_vlen(&report).iter().all(|&(_, p, f)| (p, f) == (21, 0)), "{:?}", by_vlen(&report));
    assert!(report.warnings.iter().all(|w| !w.contains("vxrm")), "{:?}", report.warnings);
}

/// `lab args...`: (exit status, stdout + stderr).
fn lab(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exit status"), text)
}

/// The rvv_vlen256 fixture as a user's object: assembled with the scalar MD5 beside it.
fn vlen256_object(dir: &Path) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(repo.join("kernels/riscv64/md5.S"), dir.join("real_md5.inc")).expect("copy md5.S");
    let obj = dir.join("rvv.o");
    let out = Command::new("clang")
        .args(["--target=riscv64-linux-gnu", "-march=rv64gcv", "-mno-relax", "-c", "-I"])
        .arg(dir)
        .arg(repo.join("tests/fixtures/riscv64/rvv_vlen256.S"))
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("clang");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    obj.display().to_string()
}

#[test]
fn a_users_rvv_object_runs_at_the_vlens_asked_and_reports_carry_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = vlen256_object(dir.path());
    let json = dir.path().join("lab.json");
    let args = ["run", "--object", &obj, "--isa", "rv64gc_v", "--kernel", "md5", "--set", "rfc1321", "--seed", "5"];
    let narrowed = [&args[..], &["--backend", "qemu", "--vlen", "128,256"]].concat();
    let (code, out) = lab(&[&narrowed[..], &["--format", "json", "--output", json.to_str().unwrap()]].concat());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("qemu vlen=128") && out.contains("qemu vlen=256") && !out.contains("vlen=512"), "{out}");
    assert!(out.contains("VECTOR LENGTH: ") && out.contains(": passes at VLEN 256; fails at VLEN 128"), "{out}");
    assert!(
        out.contains("--backend qemu --kernel md5 --set '=rfc1321' --vlen 128\n"),
        "the replay names the VLEN: {out}"
    );
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = doc["rows"].as_array().unwrap();
    let at = |bits: u64| rows.iter().find(|r| r["vector_length"]["bits"].as_u64() == Some(bits)).expect("row");
    assert_eq!((at(128)["failed"].as_u64(), at(256)["failed"].as_u64()), (Some(18), Some(0)), "{doc}");
    assert_eq!(at(128)["vector_length"]["name"], "VLEN");
    assert!(doc["vector_length_verdicts"][0].as_str().unwrap().ends_with("fails at VLEN 128"), "{doc}");
    // Unicorn has no RVV: it runs the object and stops each call at its first vector
    // instruction, saying so.
    let (code, out) = lab(&[&args[..], &["--backend", "unicorn"]].concat());
    assert!(
        out.contains("not run past `vsetvli zero, t0, e8, m1, ta, ma` at md5_implCompress+0x")
            && out.contains("Unicorn 2.1.5 cannot execute v (")
            && out.contains("has no RVV 1.0"),
        "{out}"
    );
    // Every rfc1321 case calls md5_implCompress: nothing ran, and nothing failed.
    assert!(out.contains("0 passed, 0 failed, 21 skipped") && code == 2, "a skip fails nothing: {out}");
}

#[test]
fn vlen_values_are_checked_against_the_selected_rows() {
    let (code, out) = lab(&["run", "--variant", "=riscv64+v", "--vlen", "384"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--vlen 384 for riscv64+v: VLEN 384: must be a power of two in 128..=1024 bits"), "{out}");
    let (code, out) = lab(&["run", "--variant", "=riscv64+v", "--vlen", "2048"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("VLEN 2048: must be a power of two in 128..=1024"), "{out}");
    let (code, out) = lab(&["run", "--arch", "x86_64", "--vlen", "256"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--vlen: no selected variant has a vector length"), "{out}");
}

#[test]
fn the_bundled_rvv_rows_run_on_qemu_at_every_vlen_and_list_says_who_runs_them() {
    let (code, out) =
        lab(&["run", "--variant", "=riscv64+zbb+v", "--kernel", "poly1305", "--set", "rfc8439", "--seed", "2"]);
    assert_eq!(code, 0, "{out}");
    for bits in [128, 256, 512, 1024] {
        assert!(out.contains(&format!("riscv64+zbb+v qemu vlen={bits}")), "{out}");
    }
    assert!(out.contains("NOT APPLICABLE riscv64+zbb+v on unicorn: unicorn cannot provide v"), "{out}");
    let (code, list) = lab(&["list", "--format", "json"]);
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&list).unwrap();
    let row = doc["variants"].as_array().unwrap().iter().find(|v| v["name"] == "riscv64+v").expect("riscv64+v");
    let backend = |name: &str| row["backends"].as_array().unwrap().iter().find(|b| b["backend"] == name).unwrap();
    assert_eq!(backend("qemu")["runs"], true);
    assert_eq!(backend("unicorn")["runs"], false);
    assert!(backend("unicorn")["why"].as_str().unwrap().contains("no RVV"), "{row}");
    assert_eq!(row["vector_length"]["defaults"], serde_json::json!([128, 256, 512, 1024]), "{row}");
}

/// The sve2_copy fixture as a user's object (`--isa armv8-a+sve2`).
fn sve2_object(dir: &Path) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(repo.join("kernels/aarch64/md5.S"), dir.join("real_md5.inc")).expect("copy md5.S");
    let obj = dir.join("sve2.o");
    let out = Command::new("clang")
        .args(["--target=aarch64-linux-gnu", "-march=armv8-a+sve2", "-c", "-I"])
        .arg(dir)
        .arg(repo.join("tests/fixtures/aarch64/sve2_copy.S"))
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("clang");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    obj.display().to_string()
}

#[test]
fn sve_vector_lengths_are_checked_for_a_declared_sve2_isa() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = sve2_object(dir.path());
    let (code, out) = lab(&["run", "--object", &obj, "--isa", "armv8-a+sve2", "--kernel", "md5", "--vlen", "200"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("SVE VL 200: must be a multiple of 128 in 128..=2048 bits"), "{out}");
}

/// qemu runs SVE2 on its `-cpu max` model, at each SVE vector length.
#[test]
fn a_vl_agnostic_sve2_kernel_passes_at_each_vector_length() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = sve2_object(dir.path());
    let args = ["run", "--object", &obj, "--isa", "armv8-a+sve2", "--kernel", "md5", "--set", "rfc1321"];
    let (code, out) = lab(&[&args[..], &["--backend", "qemu", "--seed", "4"]].concat());
    assert_eq!(code, 0, "{out}");
    for bits in [128, 256, 512] {
        assert!(out.contains(&format!("qemu sve-vl={bits} md5       rfc1321                 21      0")), "{out}");
    }
}

//! Linux's Poly1305 glue (`lab/src/user_kernel/glue_paths.rs`): objects defining
//! `poly1305_init_x86_64` or arm64's `poly1305_init_arm64` (and its later names; no function
//! table) and the kernel's per-path `blocks`/`emit` functions run once per path the glue
//! chooses, each row naming its path, with no `--symbol`. CI cannot download the kernel's
//! perlasm, so the objects here come from own fixtures with Linux's entry names and signatures
//! (tests/fixtures/{x86_64,aarch64}/linux_poly1305.S); the real objects were checked by hand
//! (README, "Bring your own kernel").

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{host_has, lab_json, row};

/// The glue's paths, the fixture's `BUG_PATH` number of each, and the backends of this host
/// that run it (AVX-512 only natively, where the CPU has it; qemu 7.2 has no AVX-512).
fn paths() -> Vec<(&'static str, u32, Vec<&'static str>)> {
    let avx512 = if host_has("avx512f") { vec!["native"] } else { vec![] };
    vec![
        ("scalar", 1, vec!["unicorn", "qemu", "native"]),
        ("avx", 2, vec!["qemu", "native"]),
        ("avx2", 3, vec!["qemu", "native"]),
        ("avx512", 4, avx512),
    ]
}

/// The fixture assembled into `dir/name.o`, with `-DBUG_PATH=bug` when given.
fn object(dir: &Path, name: &str, bug: Option<u32>) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x86_64/linux_poly1305.S");
    let obj = dir.join(format!("{name}.o"));
    let mut cmd = Command::new("clang");
    cmd.args(["--target=x86_64-linux-gnu", "-c"]);
    if let Some(b) = bug {
        cmd.arg(format!("-DBUG_PATH={b}"));
    }
    let status = cmd.arg(&src).arg("-o").arg(&obj).status().expect("clang");
    assert!(status.success(), "clang {}", src.display());
    obj
}

/// The vector sets these runs use: enough for every path's long inputs, short enough for CI.
const SETS: [&str; 4] = ["--set", "rfc8439,linux-testmgr,openssl,limb-edges", "--kernel", "poly1305"];

#[test]
fn every_linux_glue_path_runs_green_named_without_symbol_and_padbit_is_one_warning_for_the_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = object(dir.path(), "linux_poly1305", None);
    let o = obj.display().to_string();
    let (code, report) = lab_json(&[&["--object", &o], &SETS[..]].concat());
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["totals"]["failed"], 0, "{report:#}");
    for (path, _, backends) in paths() {
        let variant = format!("linux_poly1305@{path}");
        for backend in backends {
            let (passed, failed, why) = row(&report, &variant, backend);
            assert!(passed > 100 && failed == 0, "{variant} on {backend}: {passed} passed, {failed} failed; {why}");
        }
    }
    // One warning for the object and its padbit, naming every path's function.
    let warnings = report["warnings"].as_array().cloned().unwrap_or_default();
    let upper: Vec<&str> =
        warnings.iter().filter_map(|w| w.as_str()).filter(|w| w.contains("abi-upper-bits")).collect();
    assert_eq!(upper.len(), 1, "{upper:#?}");
    assert!(upper[0].starts_with("linux_poly1305 (poly1305; paths scalar, avx, avx2"), "{}", upper[0]);
    assert!(upper[0].contains("depend on the upper 32 bits of rcx (unsigned int padbit)"), "{}", upper[0]);
    for blocks in ["poly1305_blocks_x86_64 (scalar", "poly1305_blocks_avx (avx", "poly1305_blocks_avx2 (avx2"] {
        assert!(upper[0].contains(blocks), "{blocks}: {}", upper[0]);
    }
    let (passed, _, why) = row(&report, "linux_poly1305@avx512", "qemu");
    assert!(passed == 0 && why.contains("avx512f"), "{why}");
    let labels = report.to_string();
    assert!(!labels.contains("the lab's probe"), "Linux's init has no function table to probe");
}

#[test]
fn a_planted_carry_bug_fails_its_own_glue_path_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut checked = 0;
    for (path, bug, backends) in paths() {
        let Some(&backend) = backends.last() else {
            eprintln!("skipped: no backend of this host runs the {path} path");
            continue;
        };
        let name = format!("bug-{path}");
        let obj = object(dir.path(), &name, Some(bug));
        let o = obj.display().to_string();
        let (code, report) = lab_json(&[&["--object", &o, "--backend", backend], &SETS[..]].concat());
        assert_eq!(code, 1, "planted bug in {path} not caught: {report:#}");
        for (other, _, others) in paths() {
            if !others.contains(&backend) {
                continue;
            }
            let (passed, failed, _) = row(&report, &format!("{name}@{other}"), backend);
            if other == path {
                assert!(failed > 0, "{path}: the planted bug passed ({passed} passed)");
            } else {
                assert!(failed == 0 && passed > 100, "{other} failed {failed} with the bug in {path}");
            }
        }
        checked += 1;
    }
    assert!(checked >= 3, "scalar, avx and avx2 run on every x86_64 host with qemu");
}

#[test]
fn fuzz_probes_padbit_s_upper_bits_once_per_image_as_run_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = object(dir.path(), "linux_poly1305", None);
    let o = obj.display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["fuzz", "--seed", "26", "--format", "json", "--cases", "200", "--kernel", "poly1305"])
        .args(["--object", &o, "--variant", "=linux_poly1305@avx2", "--backend", "qemu,native"])
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("run lab fuzz");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    let warnings = report["warnings"].to_string();
    let want = "linux_poly1305@avx2 (poly1305, probed on qemu): abi-upper-bits: poly1305_blocks_avx2 depends on \
                the upper 32 bits of rcx (unsigned int padbit)";
    assert_eq!(warnings.matches("depends on the upper 32 bits").count(), 1, "one image, one argument: {warnings}");
    assert!(warnings.contains(want), "{warnings}");
}

#[test]
fn bench_times_every_glue_path_the_host_runs_natively_labelled_by_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = object(dir.path(), "linux_poly1305", None);
    let o = obj.display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["bench", "--format", "json", "--runs", "3", "--kernel", "poly1305", "--object", &o])
        .args(["--no-throughput", "--no-predict"])
        .output()
        .expect("run lab bench");
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let rows = report["user_native"].as_array().cloned().unwrap_or_default();
    for (path, _, backends) in paths() {
        let variant = format!("linux_poly1305@{path}");
        let mine: Vec<&serde_json::Value> = rows.iter().filter(|r| r["variant"] == variant.as_str()).collect();
        if !backends.contains(&"native") {
            assert!(mine.is_empty(), "{variant} timed although this host lacks its ISA: {mine:?}");
            continue;
        }
        let r =
            *mine.iter().find(|r| r["workload"] == "poly1305 1 KiB").unwrap_or_else(|| panic!("{variant}: {report:#}"));
        assert!(mine.iter().all(|r| r["path"] == path), "{mine:?}");
        let (mbs, nsb) = (r["mb_per_s"].as_f64().unwrap_or(0.0), r["ns_per_byte"].as_f64().unwrap_or(0.0));
        // A scalar 130-bit multiply per 16 bytes is at least 10 MB/s on any host that runs this
        // suite, and no kernel passes 100 GB/s.
        assert!(mbs > 10.0 && mbs < 1e5, "{variant}: {mbs} MB/s");
        assert!((nsb * mbs - 1e3).abs() < 1e-6 * 1e3, "{variant}: {nsb} ns/B against {mbs} MB/s");
        assert_eq!(r["symbol"], "poly1305_blocks", "{r}");
    }
    // The bench probes the upper bits as `lab run` does: one warning for the object.
    let warnings = report["warnings"].as_array().cloned().unwrap_or_default();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    let w = warnings[0].as_str().unwrap_or_default();
    assert!(w.starts_with("linux_poly1305 (poly1305; paths scalar, avx, avx2"), "{w}");
    assert!(w.contains("depend on the upper 32 bits of rcx (unsigned int padbit)"), "{w}");
}

/// The arm64 fixture assembled into `dir/name.o` with `-DGEN=gen` (the kernel's generation of
/// names) and `-DBUG_PATH=bug` when given.
fn arm64_object(dir: &Path, name: &str, gen: u32, bug: Option<u32>) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aarch64/linux_poly1305.S");
    let obj = dir.join(format!("{name}.o"));
    let mut cmd = Command::new("clang");
    cmd.args(["--target=aarch64-linux-gnu", "-c", &format!("-DGEN={gen}")]);
    if let Some(b) = bug {
        cmd.arg(format!("-DBUG_PATH={b}"));
    }
    let status = cmd.arg(&src).arg("-o").arg(&obj).status().expect("clang");
    assert!(status.success(), "clang {}", src.display());
    obj
}

/// Arm64 rows on Unicorn and qemu: every generation of Linux's names runs both paths green,
/// and `len` and `hibit` (u32, read whole) are one upper-bits warning each for the object.
#[test]
fn arm64_glue_paths_run_green_on_unicorn_and_qemu_with_len_and_hibit_one_warning_each() {
    let dir = tempfile::tempdir().expect("temp dir");
    for gen in 1..=3 {
        let name = format!("arm64-gen{gen}");
        let o = arm64_object(dir.path(), &name, gen, None).display().to_string();
        let (code, report) = lab_json(&[&["--object", &o], &SETS[..]].concat());
        assert_eq!(code, 0, "{report:#}");
        for path in ["scalar", "neon"] {
            for backend in ["unicorn", "qemu"] {
                let (passed, failed, why) = row(&report, &format!("{name}@{path}"), backend);
                assert!(passed > 100 && failed == 0, "{name}@{path} on {backend}: {passed}/{failed}; {why}");
            }
        }
        let warnings = report["warnings"].as_array().cloned().unwrap_or_default();
        let upper: Vec<&str> =
            warnings.iter().filter_map(|w| w.as_str()).filter(|w| w.contains("abi-upper-bits")).collect();
        assert_eq!(upper.len(), 2, "{upper:#?}");
        assert!(upper.iter().all(|w| w.starts_with(&format!("{name} (poly1305; paths scalar, neon)"))), "{upper:#?}");
        assert!(upper[0].contains("upper 32 bits of x2 (u32 len)"), "{}", upper[0]);
        assert!(upper[1].contains("upper 32 bits of x3 (unsigned int padbit)"), "{}", upper[1]);
    }
}

#[test]
fn an_arm64_planted_carry_bug_fails_its_own_glue_path_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, bug) in [("scalar", 1), ("neon", 2)] {
        let name = format!("arm64-bug-{path}");
        let o = arm64_object(dir.path(), &name, 1, Some(bug)).display().to_string();
        let (code, report) = lab_json(&[&["--object", &o, "--backend", "unicorn,qemu"], &SETS[..]].concat());
        assert_eq!(code, 1, "planted bug in {path} not caught: {report:#}");
        for backend in ["unicorn", "qemu"] {
            for other in ["scalar", "neon"] {
                let (passed, failed, _) = row(&report, &format!("{name}@{other}"), backend);
                if other == path {
                    assert!(failed > 0, "{path} on {backend}: the planted bug passed ({passed} passed)");
                } else {
                    assert!(failed == 0 && passed > 100, "{other} on {backend} failed {failed} with the bug in {path}");
                }
            }
        }
    }
}

#[test]
fn fuzz_of_every_arm64_path_lists_len_and_hibit_once_each_for_the_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let o = arm64_object(dir.path(), "arm64-fuzz", 3, None).display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["fuzz", "--seed", "26", "--format", "json", "--cases", "100", "--kernel", "poly1305"])
        .args(["--object", &o, "--backend", "unicorn"])
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("run lab fuzz");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    let warnings = report["warnings"].as_array().cloned().unwrap_or_default();
    let upper: Vec<&str> =
        warnings.iter().filter_map(|w| w.as_str()).filter(|w| w.contains("abi-upper-bits")).collect();
    assert_eq!(upper.len(), 2, "{upper:#?}");
    assert!(upper[0].starts_with("arm64-fuzz (poly1305; paths scalar, neon)"), "{}", upper[0]);
    assert!(upper[0].contains("poly1305_blocks_arm64 (scalar, probed on unicorn)"), "{}", upper[0]);
    assert!(upper[0].contains("x2 (u32 len)") && upper[1].contains("x3 (unsigned int padbit)"), "{upper:#?}");

    // The human report lists the same two, not one per path (it printed each path's own).
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["fuzz", "--seed", "26", "--cases", "100", "--kernel", "poly1305"])
        .args(["--object", &o, "--backend", "unicorn"])
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("run lab fuzz");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> =
        text.lines().filter(|l| l.starts_with("warning: ") && l.contains("abi-upper-bits")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines.iter().all(|l| l.starts_with("warning: arm64-fuzz (poly1305; paths scalar, neon)")), "{text}");
}

/// `lab bench --object` with every section on a user's object: the spin image is the lab's
/// (no "lab_spin is missing"), a vector path's Unicorn throughput is a skip naming the
/// instruction, and nothing is an error.
#[test]
fn bench_with_throughput_and_predictions_on_a_users_object_has_no_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let o = object(dir.path(), "linux_poly1305", None).display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["bench", "--format", "json", "--runs", "1", "--kernel", "poly1305", "--object", &o])
        .args(["--variant", "=linux_poly1305@scalar,=linux_poly1305@avx"])
        .output()
        .expect("run lab bench");
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["setup_errors"], serde_json::json!([]), "{report:#}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report:#}");
    let rows = report["throughput"].as_array().cloned().unwrap_or_default();
    for (variant, backend) in [("linux_poly1305@scalar", "unicorn"), ("linux_poly1305@avx", "qemu")] {
        let r = rows.iter().find(|r| r["variant"] == variant && r["backend"] == backend);
        let calls = r.and_then(|r| r["calls_per_s"].as_f64()).unwrap_or(0.0);
        assert!(calls > 0.0, "{variant} on {backend}: {rows:#?}");
    }
    let skipped = report["skipped"].to_string();
    assert!(
        skipped.contains("throughput of linux_poly1305@avx on unicorn: poly1305_blocks x")
            && skipped.contains("vzeroupper"),
        "{skipped}"
    );
    // The default `lab run` times the lab's own kernels: not a figure of this user's bench.
    assert_eq!(report["lab_run"], serde_json::Value::Null, "{report:#}");
    assert_eq!(out.status.code(), Some(0), "{report:#}");
}

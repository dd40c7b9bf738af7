//! cryptogams' riscv64 Poly1305 with its RVV entry (`lab/src/user_kernel/glue_paths.rs`):
//! objects defining `poly1305_blocks_vx` beside the OpenSSL family's `poly1305_init`,
//! `poly1305_blocks` and `poly1305_emit` run once per path a caller picks (scalar; vx where
//! the CPU has V), each row naming its path, with no `--symbol`; the scalar path declares no V
//! even when the object's own attribute names it. CI cannot download cryptogams, so the object
//! comes from an own fixture with its entry names and signatures
//! (tests/fixtures/riscv64/cryptogams_poly1305.S); cryptogams' own build was checked by hand
//! (README, "Bring your own kernel").

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{lab_json, row};

/// The fixture assembled into `dir/name.o` for rv64gcv, with `-DBUG_PATH=bug` when given.
fn object(dir: &Path, name: &str, bug: Option<u32>) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/riscv64/cryptogams_poly1305.S");
    let obj = dir.join(format!("{name}.o"));
    let mut cmd = Command::new("clang");
    cmd.args(["--target=riscv64-linux-gnu", "-march=rv64gcv", "-c"]);
    if let Some(b) = bug {
        cmd.arg(format!("-DBUG_PATH={b}"));
    }
    let status = cmd.arg(&src).arg("-o").arg(&obj).status().expect("clang");
    assert!(status.success(), "clang {}", src.display());
    obj
}

/// The vector sets these runs use: long inputs for the vector path, short enough for CI.
const SETS: [&str; 4] = ["--set", "rfc8439,openssl,limb-edges,vector-edges", "--kernel", "poly1305"];

/// `(passed, failed)` of `variant` on qemu at each vector length, in report order.
fn qemu_by_vlen(report: &serde_json::Value, variant: &str) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    for r in report["rows"].as_array().expect("rows") {
        if r["variant"] != variant || r["backend"] != "qemu" {
            continue;
        }
        let bits = r["vector_length"]["bits"].as_u64().unwrap_or(0);
        let (p, f) = (r["passed"].as_u64().unwrap_or(0), r["failed"].as_u64().unwrap_or(0));
        match out.iter_mut().find(|(b, _, _)| *b == bits) {
            Some(e) => (e.1, e.2) = (e.1 + p, e.2 + f),
            None => out.push((bits, p, f)),
        }
    }
    out
}

#[test]
fn the_rvv_entry_is_its_own_path_at_every_vlen_and_the_scalar_path_runs_without_v() {
    let dir = tempfile::tempdir().expect("temp dir");
    let obj = object(dir.path(), "cg", None);
    let o = obj.display().to_string();
    let (code, report) = lab_json(&[&["--object", &o], &SETS[..]].concat());
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["totals"]["failed"], 0, "{report:#}");
    // The scalar path: Unicorn and qemu without V (one row per set, no vector length).
    for backend in ["unicorn", "qemu"] {
        let (passed, failed, why) = row(&report, "cg@scalar", backend);
        assert!(passed > 1000 && failed == 0, "scalar on {backend}: {passed} passed, {failed} failed; {why}");
    }
    assert_eq!(qemu_by_vlen(&report, "cg@scalar").iter().map(|v| v.0).collect::<Vec<_>>(), [0]);
    // The vx path: every VLEN qemu runs, all green; skipped on Unicorn naming V.
    let vx = qemu_by_vlen(&report, "cg@vx");
    assert_eq!(vx.iter().map(|v| v.0).collect::<Vec<_>>(), [128, 256, 512, 1024], "{vx:?}");
    assert!(vx.iter().all(|&(_, p, f)| p > 1000 && f == 0), "{vx:?}");
    let (_, _, why) = row(&report, "cg@vx", "unicorn");
    assert!(why.contains("poly1305_blocks_vx") && why.contains("cannot execute v"), "{why}");
    let labels = report.to_string();
    assert!(!labels.contains("the lab's probe"), "init's probe runs on Unicorn past the driver's RVV entry");
}

#[test]
fn a_planted_carry_bug_fails_its_own_path_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (bug, path, other) in [(1, "scalar", "vx"), (2, "vx", "scalar")] {
        let name = format!("bug{bug}");
        let obj = object(dir.path(), &name, Some(bug));
        let o = obj.display().to_string();
        let (code, report) = lab_json(&[&["--object", &o, "--backend", "qemu"], &SETS[..]].concat());
        assert_eq!(code, 1, "planted bug in {path} not caught: {report:#}");
        for (_, passed, failed) in qemu_by_vlen(&report, &format!("{name}@{path}")) {
            assert!(failed > 100, "{path}: the planted bug passed ({passed} passed)");
        }
        for (_, passed, failed) in qemu_by_vlen(&report, &format!("{name}@{other}")) {
            assert!(failed == 0 && passed > 1000, "{other} failed {failed} with the bug in {path}");
        }
    }
}

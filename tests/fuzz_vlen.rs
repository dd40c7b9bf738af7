//! `lab fuzz` at every vector length (issue 27): an RVV row is fuzzed on qemu at VLEN 128, 256,
//! 512 and 1024 with the same cases, `--vlen` narrows it as for `lab run`, and a failure, its
//! file and its replay line name the VLEN. Fixture: tests/fixtures/riscv64/rvv_vlen256.S (right
//! only from VLEN 256 on: it copies a block as two 32-byte registers).

use std::process::Command;

use kernel_lab::backend::{BackendKind, Limits};
use kernel_lab::fuzz::{self, Budget, FuzzConfig, Outcome};
use kernel_lab::variant::Kernel;

use crate::common::{fixture_kernels, variant, SEED};

#[test]
fn a_kernel_right_only_from_vlen_256_fails_fuzzing_exactly_at_vlen_128() {
    let (_dir, build) = fixture_kernels("riscv64", "md5.S", "rvv_vlen256.S");
    let out = tempfile::tempdir().expect("temp dir");
    let cfg = FuzzConfig {
        variants: vec![variant("riscv64+v")],
        backends: vec![BackendKind::Qemu],
        kernels: vec![Kernel::Md5],
        build,
        seed: SEED,
        budget: Budget::Cases(64),
        shard: (0, 1),
        batch: 32,
        out_dir: out.path().to_path_buf(),
        limits: Limits::default(),
        jobs: 0,
        vector_lengths: Vec::new(),
    };
    let results = fuzz::campaign(&cfg, &mut |_| {});
    let at: Vec<(Option<u32>, bool)> =
        results.iter().map(|r| (r.vector_length.map(|vl| vl.bits), matches!(r.outcome, Outcome::Failed(_)))).collect();
    assert_eq!(at, [(Some(128), true), (Some(256), false), (Some(512), false), (Some(1024), false)], "{results:#?}");
    assert!(results[1..].iter().all(|r| matches!(r.outcome, Outcome::Clean) && r.cases == 64), "{results:#?}");
    let Outcome::Failed(f) = &results[0].outcome else { unreachable!() };
    assert!(f.replay.ends_with("--vlen 128"), "the replay names the VLEN: {}", f.replay);
    assert!(f.case.source.contains("lab fuzz ") && f.case.source.contains("--vlen 128"), "{}", f.case.source);
    assert!(f.case.name.contains("qemu vlen=128"), "{}", f.case.name);
    let file = f.file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(file.contains("-qemu-vlen128-md5-"), "{file}");
    let text = kernel_lab::fuzz::to_report(&results, SEED, (0, 1), Default::default());
    assert_eq!(text.rows[0].backend_label(), "qemu vlen=128");

    // `--vlen` narrows the targets; a length RVV does not have is a usage error naming it.
    let lab = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().expect("run lab");
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
    };
    let (code, text) = lab(&["fuzz", "--variant", "=riscv64+v", "--backend", "qemu", "--vlen", "384"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--vlen 384"), "{text}");
    let outdir = out.path().join("cli");
    let args = ["fuzz", "--seed", "3", "--cases", "40", "--variant", "=riscv64+v", "--backend", "qemu", "--kernel"];
    let (code, text) = lab(&[&args[..], &["md5", "--vlen", "256,1024", "--out", outdir.to_str().unwrap()]].concat());
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("qemu vlen=256") && text.contains("qemu vlen=1024") && !text.contains("vlen=128"), "{text}");
}

//! No silent green (issue 12, class 7): a kernels folder that lacks a contract symbol fails its
//! variant naming the symbol, a qemu-user that refuses the variant's CPU model is a set-up
//! error (exit 2) and not thousands of failed cases, and the fault budget of a batch never
//! turns calls into "not run" (unit test in lab/src/backend/mod.rs).

use std::process::Command;

use kernel_lab::backend::BackendKind;
use kernel_lab::finding::Class;
use kernel_lab::paths;
use kernel_lab::run;
use kernel_lab::toolchain::BuildConfig;
use kernel_lab::variant::Kernel;

use crate::common::{config_with, mutated_kernels, variant};

fn small_vectors(kernel: Kernel) -> Vec<std::path::PathBuf> {
    let file = match kernel {
        Kernel::Md5 => "md5/rfc1321.json",
        Kernel::Poly1305 => "poly1305/rfc8439.json",
    };
    vec![paths::vectors_dir().join(file)]
}

fn missing_symbol_texts(build: BuildConfig, arch: &str, kernel: Kernel) -> (i32, Vec<String>, usize) {
    let cfg = config_with(variant(arch), vec![BackendKind::Unicorn], kernel, small_vectors(kernel), build);
    let report = run::run(&cfg);
    let texts = report
        .image_findings
        .iter()
        .filter(|f| f.finding.class == Class::MissingSymbol)
        .map(|f| f.finding.text.clone())
        .collect();
    (report.status().code(), texts, report.totals().0)
}

#[test]
fn a_misspelt_md5_implcompressmb_fails_the_variant_naming_the_symbol() {
    let (dir, build) = mutated_kernels("riscv64", "md5.S", "md5_implCompressMB:", "md5_implCompressMb:");
    let path = dir.path().join("riscv64/md5.S");
    let src = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, src.replace("md5_implCompressMB", "md5_implCompressMb")).unwrap();
    let (code, texts, passed) = missing_symbol_texts(build, "riscv64", Kernel::Md5);
    assert_eq!(code, 1, "a missing contract symbol is a failure, not a pass: {texts:?}");
    assert_eq!(passed, 0);
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(texts[0].contains("`md5_implCompressMB` is missing"), "{}", texts[0]);
    assert!(texts[0].contains("the image defines `md5_implCompressMb`: misspelt?"), "{}", texts[0]);
}

#[test]
fn a_folder_without_poly1305_fails_its_variant() {
    let (dir, build) = mutated_kernels("aarch64", "md5.S", "\nmd5_implCompressMB:", "\nmd5_implCompressMB:");
    std::fs::remove_file(dir.path().join("aarch64/poly1305.S")).unwrap();
    let (code, texts, _) = missing_symbol_texts(build.clone(), "aarch64", Kernel::Poly1305);
    assert_eq!(code, 1, "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("`poly1305_processBlocks` is missing")), "{texts:?}");
    // The MD5 kernel of the same folder still passes on its own.
    let (code, texts, passed) = missing_symbol_texts(build, "aarch64", Kernel::Md5);
    assert_eq!((code, texts.len()), (0, 0), "{texts:?}");
    assert!(passed > 0);
}

/// A `qemu-riscv64` first on PATH that refuses the `zbb=` property, as qemu-user before 7.x
/// does, and otherwise runs the real one.
fn qemu_without_zbb() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let real = which::which("qemu-riscv64").expect("qemu-riscv64 (Debian package qemu-user)");
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in *zbb=*) echo \"qemu-riscv64: can't apply global rv64-riscv-cpu.zbb=false: \
         Property 'rv64-riscv-cpu.zbb' not found\" >&2; exit 1;; esac\nexec {} \"$@\"\n",
        real.display()
    );
    let path = dir.path().join("qemu-riscv64");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn a_qemu_that_refuses_the_cpu_model_is_a_set_up_error_not_failed_cases() {
    let fake = qemu_without_zbb();
    let path = std::env::join_paths(
        std::iter::once(fake.path().to_path_buf()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let vectors = paths::vectors_dir().join("md5/rfc1321.json");
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["run", "--arch", "riscv64", "--no-zbb", "--backend", "qemu", "--backend", "unicorn"])
        .args(["--kernel", "md5", "--no-bundled", "--vectors", vectors.to_str().unwrap()])
        .env("PATH", path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("set-up error: riscv64 on qemu:"), "{text}");
    assert!(text.contains("Property 'rv64-riscv-cpu.zbb' not found"), "{text}");
    assert!(text.contains("passed, 0 failed"), "no case fails for a backend that cannot start: {text}");
    assert!(!text.contains("riscv64      qemu"), "no qemu rows: {text}");
}

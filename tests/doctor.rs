//! `lab doctor`: all well on this machine (exit 0), and on a PATH without qemu-user or
//! llvm-objdump it names the Debian package and exits 2, as `lab run` does.

use std::process::Command;

use kernel_lab::variant::Arch;

fn doctor(path: Option<&std::ffi::OsStr>) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lab"));
    cmd.arg("doctor");
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let out = cmd.output().expect("run lab doctor");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exit status"), text)
}

#[test]
fn doctor_with_everything_installed_exits_0() {
    let (code, out) = doctor(None);
    assert_eq!(code, 0, "{out}");
    for line in
        ["ok       qemu-riscv64", "ok       ld.lld", "ok       riscv64+zbb on qemu", "ok       aarch64 on unicorn"]
    {
        assert!(out.contains(line), "{line:?} missing: {out}");
    }
    let native =
        if Arch::host() == Some(Arch::X86_64) { "ok       x86_64 on native" } else { "n/a      x86_64 on native" };
    assert!(out.contains(native), "{out}");
    // Unicorn runs the Zbb build through its Zbb emulation.
    assert!(out.contains("ok       riscv64+zbb on unicorn"), "{out}");
    // This machine's kernel has seccomp and Landlock ABI >= 6 (ci/setup.sh's runners too).
    assert!(out.contains("ok       guest confinement"), "{out}");
    // The vendored Unicorn core is the one linked, and this qemu takes the Zb* CPU properties.
    assert!(out.contains("ok       unicorn                  Unicorn 2.1.4 in-process: the C core vendored"), "{out}");
    assert!(out.contains("ok       qemu-riscv64 -cpu (riscv64) accepts -cpu rv64,zba=false,zbb=false"), "{out}");
    assert!(out.contains("(the copy built into lab)"), "{out}");
    assert!(out.contains("lab doctor: all well"), "{out}");
}

/// A folder of symlinks to every program on the current PATH except `qemu-*`.
fn path_without_qemu() -> tempfile::TempDir {
    path_without(|name| name.starts_with("qemu-"))
}

/// A folder of symlinks to every program on the current PATH except those `hidden` names.
/// On tmpfs (`/dev/shm`) when there is one: a PATH holds ~1500 programs, and one symlink costs
/// ~0.7 ms on some disk-backed `/tmp`s (1 s of system time per farm), ~5 µs on tmpfs.
fn path_without(hidden: fn(&str) -> bool) -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
    let dir = dir.or_else(|_| tempfile::tempdir()).unwrap();
    let path = std::env::var_os("PATH").expect("PATH");
    for d in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let name = e.file_name();
            let link = dir.path().join(&name);
            // The first PATH entry wins, as in a lookup.
            if !hidden(&name.to_string_lossy()) && !link.exists() {
                let _ = std::os::unix::fs::symlink(e.path(), link);
            }
        }
    }
    assert!(dir.path().join("clang").exists(), "clang must stay reachable");
    dir
}

#[test]
fn doctor_with_a_broken_kernel_exits_1_and_names_the_cell() {
    let (kernels, _) = crate::common::mutated_kernels(
        "x86_64",
        "md5.S",
        "F_STEP RB, RC, RD, RA,  3, 22,",
        "F_STEP RB, RC, RD, RA,  3, 21,",
    );
    let root = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(kernels.path(), root.path().join("kernels")).unwrap();
    std::os::unix::fs::symlink(kernel_lab::paths::vectors_dir(), root.path().join("vectors")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .arg("doctor")
        .env("KERNEL_LAB_ROOT", root.path())
        .output()
        .expect("run lab doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("WRONG    x86_64 on unicorn        MD5(\"abc\") [guarded]: md5_implCompress"), "{text}");
    assert!(text.contains("ok       aarch64 on qemu"), "{text}");
}

#[test]
fn doctor_names_a_qemu_without_the_zbb_cpu_property() {
    // A stand-in for Ubuntu 22.04's qemu-riscv64 6.2, which rejects the zbb=false property.
    let dir = path_without_qemu();
    let fake = dir.path().join("qemu-riscv64");
    std::fs::write(
        &fake,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'qemu-riscv64 version 6.2.0'; exit 0; fi\n\
         echo \"qemu-riscv64: can't apply global rv64-riscv-cpu.zba=false: Property 'rv64-riscv-cpu.zba' not found\" >&2\n\
         exit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, out) = doctor(Some(dir.path().as_os_str()));
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("ok       qemu-riscv64             "), "{out}");
    assert!(out.contains("version 6.2.0"), "{out}");
    let line = out.lines().find(|l| l.contains("qemu-riscv64 -cpu (riscv64)")).expect("the -cpu check");
    assert!(line.starts_with("BROKEN") && line.contains("Property 'rv64-riscv-cpu.zba' not found"), "{line}");
    assert!(line.contains("qemu before 7.0, such as Ubuntu 22.04's 6.2"), "{line}");
}

/// Doctor checks the tools `lab run` asks for ([`toolchain::run_tools`]), qemu-user and
/// llvm-objdump included: with both off PATH (one doctor run for the two, as each check is its
/// own line), doctor names each program and its package and exits 2; what needs neither still
/// works; and a run that has to disassemble (a fresh image cache, so no listing is cached)
/// exits 2 naming llvm-objdump too.
#[test]
fn doctor_without_qemu_or_llvm_objdump_names_both_packages_and_exits_2_like_run() {
    let dir = path_without(|name| name.starts_with("qemu-") || name == "llvm-objdump");
    let (code, out) = doctor(Some(dir.path().as_os_str()));
    assert_eq!(code, 2, "{out}");
    for arch in ["riscv64", "aarch64", "x86_64"] {
        let program = format!("qemu-{arch}");
        let line = format!("MISSING  {program:<24} `{program}` not on PATH: install the Debian package `qemu-user`");
        assert!(out.contains(&line), "{line:?} missing: {out}");
    }
    assert!(out.contains("MISSING  riscv64 on qemu"), "{out}");
    let line = "MISSING  llvm-objdump             `llvm-objdump` not on PATH: install the Debian package `llvm`";
    assert!(out.contains(line), "{line:?} missing: {out}");
    assert!(out.contains("missing Debian packages: llvm qemu-user\n"), "{out}");
    // What needs neither still works.
    assert!(out.contains("ok       riscv64 on unicorn"), "{out}");
    for t in kernel_lab::toolchain::run_tools()
        .iter()
        .filter(|t| t.program != "llvm-objdump" && !t.program.starts_with("qemu-"))
    {
        assert!(out.contains(&format!("ok       {:<24} ", t.program)), "{} not checked: {out}", t.program);
    }
    assert!(out.contains("lab doctor: the set-up is incomplete"), "{out}");
    let cache = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["run", "--arch", "x86_64", "--backend", "unicorn", "--kernel", "md5", "--set", "rfc1321"])
        .env("PATH", dir.path())
        .env("KERNEL_LAB_CACHE", cache.path())
        .output()
        .expect("run lab run");
    let text = String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{text}");
    assert!(text.contains("`llvm-objdump` not found on PATH: install the Debian package `llvm`"), "{text}");
}

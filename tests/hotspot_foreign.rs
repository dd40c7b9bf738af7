//! HotSpot's stubs of another architecture (issue 32, deliverable 2): Debian's arm64 JDK 17
//! (dpkg multiarch, installed by ci/setup.sh) run under qemu-aarch64, its MD5 stubs captured
//! from the live JVM and run on the aarch64 backends. JDK 17's aarch64 `md5_implCompressMB`
//! compares `ofs` and `limit` as whole 64-bit registers (`cmp x2, x3`), so it depends on the
//! upper halves of its `int` arguments: under the HotSpot family's default policy (`fail`) the
//! lab says so as the first finding of the failing cases; with `--abi-upper-bits warn` every
//! bundled vector passes and the reliance is one warning.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `lab args...` with the image cache in `cache`: (exit status, stdout + stderr).
fn lab_in(cache: &Path, args: &[&str]) -> (i32, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_lab")).env("KERNEL_LAB_CACHE", cache).args(args).output().expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exit status"), text)
}

/// The arm64 JDK's `java`, if installed (a skip outside CI says why; CI must have it).
fn arm64_java() -> Option<PathBuf> {
    let java = kernel_lab::hotspot::foreign_java(kernel_lab::variant::Arch::Aarch64);
    if java.is_none() {
        let why =
            "no arm64 JDK (/usr/lib/jvm/java-*-openjdk-arm64): ci/setup.sh installs openjdk-17-jdk-headless:arm64";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipped: {why}");
    }
    java
}

/// One capture per test process: (folder, manifest, what `lab capture` printed).
fn captured(java: &Path) -> &'static (tempfile::TempDir, PathBuf, String) {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf, String)> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("hs");
        let args = ["capture", "--java", java.to_str().unwrap(), "--out", out.to_str().unwrap()];
        let (code, text) = lab_in(&dir.path().join("cache"), &args);
        assert_eq!(code, 0, "lab capture of the arm64 JDK under qemu-aarch64 failed:\n{text}");
        (dir, out.join("kernel-lab.toml"), text)
    })
}

#[test]
fn an_arm64_jvm_under_qemu_gives_its_md5_stubs() {
    let Some(java) = arm64_java() else { return };
    let (_, manifest, text) = captured(&java);
    assert!(text.contains("under qemu-aarch64"), "{text}");
    for name in ["md5_implCompress", "md5_implCompressMB"] {
        let line = text.lines().find(|l| l.trim_start().starts_with(&format!("{name} -> {name} ("))).unwrap_or("");
        let bytes: usize =
            line.split('(').nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(bytes > 1000 && bytes % 4 == 0, "{name}: {line}\n{text}");
    }
    let m = std::fs::read_to_string(manifest).unwrap();
    assert!(m.contains("name = \"hotspot-aarch64-17.") && m.contains("arch = \"aarch64\""), "{m}");
    assert!(m.contains("isa = \"armv8-a\""), "{m}");
}

#[test]
fn captured_aarch64_md5_stubs_pass_every_vector_with_their_upper_bits_reliance_named() {
    let Some(java) = arm64_java() else { return };
    let (dir, manifest, _) = captured(&java);
    let (m, cache) = (manifest.to_str().unwrap(), dir.path().join("cache"));
    let (code, text) = lab_in(&cache, &["run", "--manifest", m, "--kernel", "md5", "--abi-upper-bits", "warn"]);
    assert_eq!(code, 0, "{text}");
    for backend in ["unicorn", "qemu"] {
        assert!(
            text.lines().any(|l| l.starts_with("hotspot-aarch64-") && l.contains(&format!(" {backend} "))),
            "{text}"
        );
    }
    assert!(text.contains("abi-upper-bits: md5_implCompressMB depends on the upper 32 bits of x2 (int ofs)"), "{text}");
    let summary = text.lines().last().unwrap_or_default();
    let passed: usize = summary.split(" passed").next().and_then(|n| n.trim().parse().ok()).unwrap_or(0);
    assert!(passed > 10_000 && summary.contains(" 0 failed"), "{summary}");

    // The family's default: every failing case names the reliance first, not a wrong value.
    let args = ["run", "--manifest", m, "--kernel", "md5", "--set", "=mb-semantics", "--seed", "3", "--format", "json"];
    let (code, text) = lab_in(&cache, &args);
    assert_eq!(code, 1, "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let mut failed = 0;
    for row in json["rows"].as_array().unwrap() {
        for case in row["cases"].as_array().into_iter().flatten().filter(|c| c["outcome"] == "failed") {
            failed += 1;
            let first = &case["findings"][0];
            assert_eq!(first["class"], "abi", "{case}");
            assert!(
                first["text"].as_str().unwrap_or("").contains("depends on the upper 32 bits of x2 (int ofs"),
                "{case}"
            );
        }
    }
    assert!(failed > 0, "{text}");
}

#[test]
fn fuzzing_captured_aarch64_stubs_is_clean_inside_the_jdk_domain() {
    let Some(java) = arm64_java() else { return };
    let (dir, manifest, _) = captured(&java);
    let args = ["fuzz", "--manifest", manifest.to_str().unwrap(), "--kernel", "md5", "--cases", "600", "--seed", "1"];
    let (code, text) = lab_in(&dir.path().join("cache"), &[&args[..], &["--abi-upper-bits", "warn"]].concat());
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("0 failed") && text.contains("2 targets clean"), "{text}");
}

#[test]
fn doctor_says_which_architectures_can_be_captured_here() {
    let Some(java) = arm64_java() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_, text) = lab_in(dir.path(), &["doctor"]);
    let line =
        |arch: &str| text.lines().find(|l| l.contains(&format!("capture {arch} stubs"))).unwrap_or("").to_string();
    let a64 = line("aarch64");
    assert!(
        a64.starts_with("ok") && a64.contains("under qemu-aarch64") && a64.contains(java.to_str().unwrap()),
        "{text}"
    );
    let rv = line("riscv64");
    assert!(rv.starts_with("n/a") && rv.contains("no check of captured riscv64 code"), "{text}");
}

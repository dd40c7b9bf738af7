//! The real client: OpenSSL 4.0.3's own MD5 and Poly1305 perlasm, generated with `perl` from
//! the `openssl-src` crate's tree (a dev-dependency: nothing of OpenSSL is in this
//! repository), assembled with clang as OpenSSL's build assembles its `.s`/`.S` files
//! (`-I crypto -I include` for the preprocessed aarch64 sources), and run through
//! `lab run --object` as built: every dispatch path its objects hold runs green (the paths no
//! backend here can run are listed with the reason), and one planted carry bug per path (a
//! carry instruction dropped from that path's generated code) fails that path.
//!
//! x86_64 is generated with `CC=gcc`: the perlasm emits its AVX-512 and IFMA paths only when
//! the assembler it probes is GNU as (binutils from `build-essential`); clang assembles all.
//! OpenSSL 4.0.3 has no riscv64 Poly1305; its riscv64 MD5 is the Zbb one.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{host_has, lab_json, row};

/// The OpenSSL tree of the `openssl-src` crate.
fn openssl_tree() -> PathBuf {
    openssl_src::source_dir()
}

/// `perl crypto/<script> <flavour> <out>` with `CC` set; returns the generated text.
fn perlasm(script: &str, flavour: &str, out: &Path) -> String {
    let status = Command::new("perl")
        .arg(openssl_tree().join("crypto").join(script))
        .args([flavour, &out.display().to_string()])
        .env("CC", "gcc")
        .status()
        .expect("perl (Debian package perl, installed by ci/setup.sh)");
    assert!(status.success(), "perl {script}");
    std::fs::read_to_string(out).expect("generated asm")
}

/// Assembles `src` for `target` into `obj` with clang, as OpenSSL's build does.
fn assemble(target: &str, flags: &[&str], src: &Path, obj: &Path) {
    let tree = openssl_tree();
    let status = Command::new("clang")
        .args([&format!("--target={target}"), "-c"])
        .args(flags)
        .arg(format!("-I{}", tree.join("crypto").display()))
        .arg(format!("-I{}", tree.join("include").display()))
        .arg(src)
        .arg("-o")
        .arg(obj)
        .status()
        .expect("clang");
    assert!(status.success(), "clang {}", src.display());
}

/// Whether some case of `variant` on `backend` was skipped as not run past an instruction,
/// and every such case's reason contains `why`.
fn skipped_past(report: &Value, variant: &str, backend: &str, why: &str) -> bool {
    let rows = report["rows"].as_array().expect("rows").iter();
    let mine = rows.filter(|r| r["variant"] == variant && r["backend"] == backend);
    let cases: Vec<&Value> = mine.flat_map(|r| r["cases"].as_array().expect("cases")).collect();
    let past: Vec<&str> = cases
        .iter()
        .filter(|c| c["outcome"] == "skipped")
        .filter_map(|c| c["skip_reason"].as_str())
        .filter(|r| r.starts_with("not run past `"))
        .collect();
    !past.is_empty() && past.iter().all(|r| r.contains(why))
}

/// `text` without the first line, after the line `label`, that starts with `prefix` and
/// contains `with`: one carry instruction dropped from one path's function.
fn drop_carry(text: &str, label: &str, prefix: &str, with: &str) -> String {
    let start = text.find(&format!("\n{label}\n")).unwrap_or_else(|| panic!("{label} in the generated asm"));
    let rest = &text[start..];
    let at = rest
        .split_inclusive('\n')
        .scan(0, |pos, l| {
            let here = *pos;
            *pos += l.len();
            Some((here, l))
        })
        .find(|(_, l)| l.starts_with(prefix) && l.contains(with))
        .map(|(p, _)| start + p)
        .unwrap_or_else(|| panic!("no `{prefix}...{with}` after {label}"));
    let end = at + text[at..].find('\n').expect("line end") + 1;
    format!("{}{}", &text[..at], &text[end..])
}

/// One planted bug: the path, its blocks function's label, and the carry line to drop.
struct Plant {
    path: &'static str,
    label: &'static str,
    prefix: &'static str,
    with: &'static str,
}

const X86_PLANTS: [Plant; 5] = [
    Plant { path: "scalar", label: "poly1305_blocks:", prefix: "\tadcq\t", with: "" },
    Plant { path: "avx", label: "poly1305_blocks_avx:", prefix: "\tvpsrlq\t$26,", with: "" },
    Plant { path: "avx2", label: "poly1305_blocks_avx2:", prefix: "\tvpsrlq\t$26,", with: "" },
    Plant { path: "avx512f", label: "poly1305_blocks_avx512:", prefix: "\tvpsrlq\t$26,", with: "" },
    Plant { path: "avx512ifma", label: "poly1305_blocks_vpmadd52:", prefix: "\tvpsrlvq\t", with: "" },
];

/// Whether a backend of this host runs x86_64 `path` (AVX-512 only natively, where the CPU
/// has it).
fn x86_runs(path: &str) -> Vec<&'static str> {
    match path {
        "avx512f" if host_has("avx512f") => vec!["native"],
        "avx512ifma" if host_has("avx512ifma") => vec!["native"],
        "avx512f" | "avx512ifma" => vec![],
        _ => vec!["qemu", "native"],
    }
}

#[test]
fn openssl_x86_64_poly1305_every_path_green_and_each_planted_carry_bug_caught() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("poly1305-x86_64.s");
    let text = perlasm("poly1305/asm/poly1305-x86_64.pl", "elf", &src);
    let obj = dir.path().join("poly1305-x86_64.o");
    assemble("x86_64-linux-gnu", &[], &src, &obj);
    let obj_s = obj.display().to_string();
    let (code, report) = lab_json(&["--object", &obj_s, "--kernel", "poly1305", "--backend", "unicorn,qemu,native"]);
    assert_eq!(report["totals"]["failed"], 0, "{report:#}");
    // OpenSSL calls its local `__poly1305_block` with rsp 8 off 16-byte alignment: its own
    // convention, not a psABI violation (src/align.rs), so no image finding either.
    assert_eq!(report["image_findings"], serde_json::json!([]), "{report:#}");
    assert_eq!(code, 0, "{report:#}");
    for p in &X86_PLANTS {
        let variant = format!("poly1305-x86_64@{}", p.path);
        for backend in x86_runs(p.path) {
            let (passed, failed, _) = row(&report, &variant, backend);
            assert!(passed > 6000 && failed == 0, "{variant} on {backend}: {passed} passed, {failed} failed");
        }
        // Unicorn runs every path's calls up to their first VEX/EVEX instruction: the scalar
        // path whole, the vector paths' short inputs (OpenSSL's vector blocks functions hand
        // them to the scalar code), the rest skipped naming the instruction.
        let (passed, failed, why) = row(&report, &variant, "unicorn");
        assert!(passed > 0 && failed == 0, "{variant} on unicorn: {passed} passed, {failed} failed");
        if p.path == "scalar" {
            assert!(passed > 6000 && why.is_empty(), "{variant} on unicorn: {passed} passed; {why}");
        } else {
            assert!(skipped_past(&report, &variant, "unicorn", "Unicorn 2.1.5 cannot execute avx"), "{variant}");
        }
    }
    let (_, _, why) = row(&report, "poly1305-x86_64@avx512f", "qemu");
    assert!(why.contains("no AVX-512"), "{why}");
    let warnings = report["warnings"].to_string();
    // One warning for the object's padbit, naming the paths' functions (upper_bits_report.rs).
    assert_eq!(warnings.matches("upper 32 bits of rcx (unsigned int padbit)").count(), 1, "{warnings}");
    assert!(warnings.contains("poly1305-x86_64 (poly1305; paths scalar, avx, avx2"), "{warnings}");
    assert!(warnings.contains("poly1305_blocks (scalar, probed on "), "{warnings}");

    for p in &X86_PLANTS {
        let Some(backend) = x86_runs(p.path).first().copied() else { continue };
        let bad = dir.path().join(format!("bad-{}.s", p.path));
        std::fs::write(&bad, drop_carry(&text, p.label, p.prefix, p.with)).expect("write");
        let bad_obj = dir.path().join(format!("poly1305-x86_64-{}.o", p.path));
        assemble("x86_64-linux-gnu", &[], &bad, &bad_obj);
        let o = bad_obj.display().to_string();
        let variant = format!("=poly1305-x86_64-{}@{}", p.path, p.path);
        let (code, report) =
            lab_json(&["--object", &o, "--kernel", "poly1305", "--backend", backend, "--variant", &variant]);
        let (_, failed, _) = row(&report, &variant[1..], backend);
        assert!(code == 1 && failed > 0, "planted bug in {} not caught: {report:#}", p.path);
    }
}

#[test]
fn openssl_aarch64_poly1305_scalar_neon_and_sve2_green_and_planted_carry_bugs_caught() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("poly1305-armv8.S");
    let text = perlasm("poly1305/asm/poly1305-armv8.pl", "linux64", &src);
    let sve2_src = dir.path().join("poly1305-armv9-sve2.S");
    let sve2_text = perlasm("poly1305/asm/poly1305-armv9-sve2.pl", "linux64", &sve2_src);
    let (obj, sve2) = (dir.path().join("poly1305-armv8.o"), dir.path().join("poly1305-armv9-sve2.o"));
    assemble("aarch64-linux-gnu", &[], &src, &obj);
    assemble("aarch64-linux-gnu", &[], &sve2_src, &sve2);
    let (o, s) = (obj.display().to_string(), sve2.display().to_string());
    let (code, report) = lab_json(&["--object", &o, "--object", &s, "--kernel", "poly1305", "--arch", "aarch64"]);
    assert_eq!(code, 0, "{report:#}");
    for path in ["scalar", "neon"] {
        for backend in ["unicorn", "qemu"] {
            let (passed, failed, _) = row(&report, &format!("poly1305-armv8@{path}"), backend);
            assert!(passed > 6000 && failed == 0, "{path} on {backend}: {passed} passed, {failed} failed");
        }
    }
    // SVE2 runs on qemu's `-cpu max` (the only 7.2 model with it); Unicorn has no SVE.
    let (passed, failed, _) = row(&report, "poly1305-armv8@sve2", "qemu");
    assert!(passed > 6000 && failed == 0, "sve2 on qemu: {passed} passed, {failed} failed");
    // Unicorn runs the SVE2 path's calls up to their first SVE2 instruction.
    let (_, failed, _) = row(&report, "poly1305-armv8@sve2", "unicorn");
    assert_eq!(failed, 0, "{report:#}");
    assert!(
        skipped_past(&report, "poly1305-armv8@sve2", "unicorn", "Unicorn 2.1.5 cannot execute sve2"),
        "the SVE2 path is not run past its first SVE2 instruction on Unicorn"
    );
    assert!(report["warnings"].to_string().contains("upper 32 bits of x3 (unsigned int padbit)"), "{report:#}");

    // Without the SVE2 object its symbol is the lab's trapping stub, and that path is not run.
    let (code, report) = lab_json(&["--object", &o, "--kernel", "poly1305", "--backend", "unicorn"]);
    assert_eq!(code, 0, "{report:#}");
    let (_, _, why) = row(&report, "poly1305-armv8@sve2", "unicorn");
    assert!(why.contains("do not define poly1305_blocks_sve2"), "{why}");

    let plants = [("scalar", "poly1305_blocks:", "\tadcs\t", ""), ("neon", "poly1305_blocks_neon:", "\tushr\t", "#26")];
    for (path, label, prefix, with) in plants {
        let bad = dir.path().join(format!("bad-{path}.S"));
        std::fs::write(&bad, drop_carry(&text, label, prefix, with)).expect("write");
        let bad_obj = dir.path().join(format!("poly1305-armv8-{path}.o"));
        assemble("aarch64-linux-gnu", &[], &bad, &bad_obj);
        let b = bad_obj.display().to_string();
        let variant = format!("=poly1305-armv8-{path}@{path}");
        let (code, report) =
            lab_json(&["--object", &b, "--kernel", "poly1305", "--backend", "qemu", "--variant", &variant]);
        let (_, failed, _) = row(&report, &variant[1..], "qemu");
        assert!(code == 1 && failed > 0, "planted bug in {path} not caught: {report:#}");
    }

    // The SVE2 path: its lazy reduction's `h0 -> h1` carry (perlasm emits SVE2 as `.inst`
    // words with the instruction as a comment) dropped; qemu's `-cpu max` runs it.
    let bad = dir.path().join("bad-sve2.S");
    std::fs::write(&bad, drop_carry(&sve2_text, "poly1305_lazy_reduce_sve2:", ".inst\t", "add z20.d,z20.d,z30.d"))
        .expect("write");
    let bad_obj = dir.path().join("poly1305-armv9-sve2-bad.o");
    assemble("aarch64-linux-gnu", &[], &bad, &bad_obj);
    let b = bad_obj.display().to_string();
    let args = ["--object", &o, "--object", &b, "--kernel", "poly1305", "--backend", "qemu"];
    let (code, report) = lab_json(&[&args[..], &["--variant", "poly1305-armv8@sve2"]].concat());
    let (_, failed, _) = row(&report, "poly1305-armv8@sve2", "qemu");
    assert!(code == 1 && failed > 0, "planted bug in sve2 not caught: {report:#}");
}

/// OpenSSL's MD5 (no dispatch path: one row per backend), found by the name it exports
/// (`ossl_md5_block_asm_data_order`, riscv64's `..._zbb` / `..._riscv64`), no `--symbol` and
/// no `--isa`: riscv64's two builds come from one perlasm (flavour `zbb` or none, as
/// crypto/md5/build.info generates them), both assembled `-march=rv64gc` with the Zbb
/// instructions as `.word`s, and the `_zbb` name declares Zbb (without it every `roriw` would
/// be an image finding).
#[test]
fn openssl_md5_green_on_every_architecture_under_its_exported_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let riscv = vec!["-march=rv64gc", "-mno-relax"];
    let cases = [
        ("md5/asm/md5-x86_64.pl", "elf", "x86_64-linux-gnu", vec![], "md5-x86_64.s"),
        ("md5/asm/md5-aarch64.pl", "linux64", "aarch64-linux-gnu", vec![], "md5-aarch64.S"),
        ("md5/asm/md5-riscv64-zbb.pl", "zbb", "riscv64-linux-gnu", riscv.clone(), "md5-riscv64-zbb.S"),
        ("md5/asm/md5-riscv64-zbb.pl", "linux64", "riscv64-linux-gnu", riscv, "md5-riscv64.S"),
    ];
    for (script, flavour, target, flags, file) in cases {
        let src = dir.path().join(file);
        let text = perlasm(script, flavour, &src);
        let exported = text
            .lines()
            .find_map(|l| l.trim().strip_prefix(".globl").map(|s| s.trim().to_owned()))
            .expect("the exported name");
        let obj = src.with_extension("o");
        assemble(target, &flags, &src, &obj);
        let o = obj.display().to_string();
        let (code, report) = lab_json(&["--object", &o, "--kernel", "md5"]);
        assert_eq!(report["image_findings"], serde_json::json!([]), "{file} ({exported}): {report:#}");
        assert_eq!(report["totals"]["failed"], 0, "{file} ({exported}): {report:#}");
        assert!(report["totals"]["passed"].as_u64() > Some(1000), "{file} ({exported}): {report:#}");
        let rows = report["rows"].as_array().expect("rows");
        assert!(rows.iter().all(|r| r["family"] == "openssl"), "{file} ({exported}): {report:#}");
        assert_eq!(code, 0, "{file} ({exported}): {report:#}");
    }
}

/// `lab fuzz` on every x86_64 path of OpenSSL's object with the default batch: the IFMA path is
/// judged through `emit` after every `blocks` call, so 256 of its cases need more than the
/// 32 MiB arena; the campaign runs such a batch in halves (it was an error: "batch needs
/// 45453312 bytes but lab_arena holds 33554432").
#[test]
fn fuzzing_every_openssl_x86_64_path_fits_the_arena() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("poly1305-x86_64.s");
    perlasm("poly1305/asm/poly1305-x86_64.pl", "elf", &src);
    let obj = dir.path().join("poly1305-x86_64.o");
    assemble("x86_64-linux-gnu", &[], &src, &obj);
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .env("KERNEL_LAB_CACHE", kernel_lab::paths::cache_dir())
        .args(["fuzz", "--object", &obj.display().to_string(), "--kernel", "poly1305", "--backend", "native"])
        .args(["--cases", "600", "--seed", "5"])
        .output()
        .expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains(" 0 errors") && !text.contains("lab_arena holds"), "{text}");
    let paths: Vec<&str> = X86_PLANTS.iter().map(|p| p.path).filter(|p| x86_runs(p).contains(&"native")).collect();
    for p in &paths {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("poly1305-x86_64@{p} ")) && l.contains("clean")),
            "{p}: {text}"
        );
    }
    if !host_has("avx512ifma") {
        eprintln!("skipped in part: this host's CPU lacks AVX-512 IFMA, so the IFMA path (the one that overflowed) did not run");
    }
}

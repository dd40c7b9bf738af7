//! Bring your own kernel (README "Bring your own kernel"): the example's foreign-named objects
//! (examples/byok/build.sh) through the manifest and the `--object` shortcut on every backend,
//! the lab's driver with a user folder that has none, the declared ISA driving the scan and the
//! backends, and prebuilt objects refused with the object and symbol named.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `lab args...` with the image cache in `cache`: (exit status, stdout + stderr).
fn lab_in(cache: &Path, args: &[&str]) -> (i32, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_lab")).env("KERNEL_LAB_CACHE", cache).args(args).output().expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exit status"), text)
}

/// The example built once per test process by its own script: (folder, cache folder). The
/// cache is the lab's shared one: images are keyed by the objects' bytes and names and the
/// symbol map (lab/src/toolchain.rs), and build.sh's objects are the same bytes every time, so
/// a suite run after the first builds none of the example's images again.
fn example() -> &'static (tempfile::TempDir, PathBuf) {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = Command::new(repo().join("examples/byok/build.sh")).arg(dir.path()).output().expect("build.sh");
        assert!(out.status.success(), "build.sh: {}", String::from_utf8_lossy(&out.stderr));
        (dir, kernel_lab::paths::cache_dir())
    })
}

fn ex(rel: &str) -> String {
    example().0.path().join(rel).display().to_string()
}

/// `lab run ... --format json` parsed.
fn run_json(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["run", "--seed", "5", "--set", "rfc1321,rfc8439", "--format", "json"];
    all.extend(args);
    let (code, text) = lab_in(&example().1, &all);
    let start = text.find('{').unwrap_or(0);
    let json: Value = serde_json::Deserializer::from_str(&text[start..])
        .into_iter()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("no JSON report: {text}"));
    (code, json, text)
}

/// Rows as (variant, backend, kernel, passed, failed, skipped).
fn rows(json: &Value) -> Vec<(String, String, String, u64, u64, u64)> {
    let s = |r: &Value, k: &str| r[k].as_str().unwrap_or_default().to_string();
    let n = |r: &Value, k: &str| r[k].as_u64().unwrap_or(u64::MAX);
    json["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| (s(r, "variant"), s(r, "backend"), s(r, "kernel"), n(r, "passed"), n(r, "failed"), n(r, "skipped")))
        .collect()
}

/// Every kernel of `variant` passed every case on exactly `backends` (RFC 1321: 21 cases,
/// RFC 8439: 36), and other backends were skipped.
fn passed_on(json: &Value, variant: &str, backends: &[&str]) {
    let r = rows(json);
    for b in backends {
        for (kernel, cases) in [("md5", 21), ("poly1305", 36)] {
            let hit =
                r.iter().any(|x| x.0 == variant && x.1 == *b && x.2 == kernel && (x.3, x.4, x.5) == (cases, 0, 0));
            assert!(hit, "{variant} {b} {kernel}: {r:?}");
        }
    }
    assert!(r.iter().filter(|x| x.0 == variant && !backends.contains(&x.1.as_str())).all(|x| x.3 == 0 && x.4 == 0));
}

fn native() -> &'static [&'static str] {
    if cfg!(target_arch = "x86_64") {
        &["unicorn", "qemu", "native"]
    } else {
        &["unicorn", "qemu"]
    }
}

#[test]
fn the_example_manifest_passes_every_published_vector_on_every_backend() {
    let (code, json, text) = run_json(&["--manifest", &ex("kernel-lab.toml")]);
    assert_eq!(code, 0, "{text}");
    passed_on(&json, "rv-zbb-port", &["unicorn", "qemu"]);
    passed_on(&json, "arm64-port", &["unicorn", "qemu"]);
    passed_on(&json, "x64-port", native());
    assert!(json["image_findings"].as_array().is_some_and(Vec::is_empty), "{text}");
}

#[test]
fn the_object_shortcut_runs_each_arch_and_the_archive() {
    let cases: [(&str, &[&str], &[&str]); 3] = [
        (
            "rv64gc_zbb",
            &["riscv64/md5.o", "riscv64/libpoly1305.a"],
            &[
                "md5_implCompress=rv_md5_block",
                "md5_implCompressMB=rv_md5_blocks",
                "poly1305_processBlocks=rv_poly1305_blocks",
            ],
        ),
        (
            "armv8-a",
            &["aarch64/md5.o", "aarch64/poly1305.o"],
            &[
                "md5_implCompress=arm64_md5_block_data_order",
                "md5_implCompressMB=arm64_md5_blocks",
                "poly1305_processBlocks=arm64_poly1305_blocks",
            ],
        ),
        ("x86-64", &["x86_64/md5.o"], &["md5_implCompress=x64_md5_one", "md5_implCompressMB=x64_md5_many"]),
    ];
    for (isa, objects, symbols) in cases {
        let mut args: Vec<String> = vec!["--isa".into(), isa.into()];
        args.extend(objects.iter().flat_map(|o| ["--object".to_string(), ex(o)]));
        args.extend(symbols.iter().flat_map(|s| ["--symbol".to_string(), s.to_string()]));
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, json, text) = run_json(&argv);
        assert_eq!(code, 0, "{isa}: {text}");
        let r = rows(&json);
        // Named after the first object; a kernel without a mapped symbol is not run.
        let backends = if isa.starts_with("x86") { native() } else { &["unicorn", "qemu"] };
        for b in backends {
            assert!(
                r.iter().any(|x| x.0 == "md5" && x.1 == *b && x.2 == "md5" && (x.3, x.4) == (21, 0)),
                "{isa} {b}: {r:?}"
            );
            let poly = r.iter().find(|x| x.1 == *b && x.2 == "poly1305").expect("poly1305 row");
            if isa.starts_with("x86") {
                assert_eq!((poly.3, poly.4), (0, 0), "x86_64 maps no poly1305 symbol: {r:?}");
            } else {
                assert_eq!((poly.3, poly.4), (36, 0), "{isa}: {r:?}");
            }
        }
    }
}

#[test]
fn fuzz_and_bench_take_the_same_options() {
    let m = ex("kernel-lab.toml");
    let (code, text) = lab_in(
        &example().1,
        &["fuzz", "--manifest", &m, "--arch", "riscv64", "--backend", "unicorn", "--cases", "20", "--seed", "2"],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("rv-zbb-port  unicorn  md5") && text.contains("0 failed"), "{text}");
    let o = ex("aarch64/md5.o");
    let (code, text) = lab_in(
        &example().1,
        &[
            "bench",
            "--object",
            &o,
            "--symbol",
            "md5_implCompress=arm64_md5_block_data_order",
            "--symbol",
            "md5_implCompressMB=arm64_md5_blocks",
            "--kernel",
            "md5",
            "--no-native",
            "--no-throughput",
            // The options are the point: the counts show them taken (tests/predict.rs predicts).
            "--no-predict",
            "--runs",
            "1",
        ],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.lines().any(|l| l.starts_with("md5") && l.contains("md5       +0")), "{text}");
}

#[test]
fn a_zbb_instruction_in_an_object_declared_rv64gc_is_reported_by_the_scan() {
    let (code, json, text) = run_json(&[
        "--object",
        &ex("riscv64/md5.o"),
        "--symbol",
        "md5_implCompress=rv_md5_block",
        "--symbol",
        "md5_implCompressMB=rv_md5_blocks",
        "--isa",
        "rv64gc",
        "--backend",
        "qemu",
    ]);
    assert_eq!(code, 1, "{text}");
    let findings: Vec<&str> =
        json["image_findings"].as_array().expect("image_findings").iter().filter_map(|f| f["text"].as_str()).collect();
    assert!(!findings.is_empty(), "{text}");
    assert!(
        findings.iter().any(|f| f.contains("at rv_md5_block") && f.contains("not in the declared ISA rv64gc")),
        "{findings:?}"
    );
    // Declared without Zbb, qemu runs the CPU without it: the Zbb instructions trap.
    assert!(rows(&json).iter().any(|x| x.1 == "qemu" && x.2 == "md5" && x.4 > 0), "{text}");
}

#[test]
/// A declared extension Unicorn lacks (Zbkb) does not keep it from running the object: only a
/// call that reaches a Zbkb instruction would stop (tests/unicorn_stops.rs), and this object
/// has none, so every case runs and passes there as on qemu.
fn an_extension_unicorn_lacks_that_the_code_never_uses_still_runs_on_unicorn() {
    let (code, json, text) = run_json(&[
        "--object",
        &ex("riscv64/md5.o"),
        "--symbol",
        "md5_implCompress=rv_md5_block",
        "--symbol",
        "md5_implCompressMB=rv_md5_blocks",
        "--isa",
        "rv64gc_zbb_zbkb",
    ]);
    assert_eq!(code, 0, "{text}");
    let r: Vec<&Value> = json["rows"].as_array().expect("rows").iter().collect();
    let unicorn = r.iter().find(|x| x["backend"] == "unicorn").expect("unicorn row");
    assert_eq!((unicorn["passed"].as_u64(), unicorn["skipped"].as_u64()), (Some(21), Some(0)), "{text}");
    assert!(r.iter().any(|x| x["backend"] == "qemu" && x["passed"] == 21), "{text}");
}

#[test]
fn a_missing_symbol_or_a_wrong_arch_object_exits_2_naming_it() {
    let cache = &example().1;
    let md5 = ex("riscv64/md5.o");
    let (code, text) =
        lab_in(cache, &["run", "--object", &md5, "--symbol", "md5_implCompressMB=rv_md5_blockz", "--set", "rfc1321"]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains(&format!("symbol `rv_md5_blockz` (for md5_implCompressMB) is not defined by {md5}"))
            && text.contains("defines `rv_md5_block`: misspelt?"),
        "{text}"
    );
    let arm = ex("aarch64/md5.o");
    let (code, text) = lab_in(cache, &["run", "--arch", "riscv64", "--object", &arm, "--set", "rfc1321"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains(&format!("{arm}: an object for aarch64, but the variant is riscv64")), "{text}");
    // The same through a manifest, and a manifest naming a file that is not there.
    let dir = tempfile::tempdir().expect("temp dir");
    let m = dir.path().join("kernel-lab.toml");
    std::fs::write(&m, format!("[[variant]]\nname = \"w\"\narch = \"x86_64\"\nobjects = [\"{arm}\"]\n")).unwrap();
    let (code, text) = lab_in(cache, &["run", "--manifest", m.to_str().unwrap(), "--set", "rfc1321"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains(&format!("{arm}: an object for aarch64, but the variant is x86_64")), "{text}");
    std::fs::write(&m, "[[variant]]\nname = \"w\"\narch = \"x86_64\"\nobjects = [\"gone.o\"]\n").unwrap();
    let (code, text) = lab_in(cache, &["run", "--manifest", m.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("variant `w` (entry 1): `objects[0]`") && text.contains("gone.o does not exist"), "{text}");
}

/// Assembles `source` for riscv64 into `dir/name.o` (extra clang flags in `flags`).
fn rv_object(dir: &Path, name: &str, source: &str, flags: &[&str]) -> String {
    let src = dir.join(format!("{name}.S"));
    std::fs::write(&src, source).unwrap();
    let obj = dir.join(format!("{name}.o"));
    let out = Command::new("clang")
        .args(["--target=riscv64-linux-gnu", "-march=rv64gc", "-c"])
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("clang");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    obj.display().to_string()
}

#[test]
fn objects_the_freestanding_image_cannot_hold_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let f = ".text\n.globl f\n.type f,@function\nf:\n";
    let cases = [
        (
            rv_object(d, "data", &format!("{f} ret\n.data\ncounter: .quad 0\n"), &["-mno-relax"]),
            "writable section `.data` (8 bytes)",
        ),
        (
            rv_object(d, "libc", &format!("{f} tail memcpy\n"), &["-mno-relax"]),
            "undefined references (the image links only the driver and your kernel, no libc): `memcpy` in",
        ),
        (
            rv_object(
                d,
                "tls",
                &format!("{f} lui a0, %tprel_hi(t)\n ret\n.section .tbss,\"awT\",@nobits\nt: .quad 0\n"),
                &["-mno-relax"],
            ),
            "thread-local",
        ),
        (rv_object(d, "relax", &format!("{f} nop\n.p2align 4\n ret\n"), &[]), "R_RISCV_ALIGN"),
        (rv_object(d, "local", ".text\ng:\n ret\n", &["-mno-relax"]), "defines it as a local symbol"),
    ];
    for (obj, want) in cases {
        let sym = if obj.ends_with("local.o") { "md5_implCompress=g" } else { "md5_implCompress=f" };
        let (code, text) = lab_in(&example().1, &["run", "--object", &obj, "--symbol", sym, "--set", "rfc1321"]);
        assert_eq!(code, 2, "{obj}: {text}");
        assert!(text.contains(&obj) && text.contains(want), "{obj}: want `{want}`:\n{text}");
    }
}

#[test]
fn a_kernels_folder_without_a_driver_gets_the_labs() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("riscv64")).unwrap();
    std::fs::copy(repo().join("kernels/riscv64/md5.S"), dir.path().join("riscv64/md5.S")).unwrap();
    let (code, text) = lab_in(
        &kernel_lab::paths::cache_dir(),
        &[
            "run",
            "--kernels-dir",
            dir.path().to_str().unwrap(),
            "--arch",
            "riscv64",
            "--no-zbb",
            "--kernel",
            "md5",
            "--set",
            "rfc1321",
            "--backend",
            "unicorn",
        ],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("21 passed, 0 failed"), "{text}");
}

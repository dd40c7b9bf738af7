//! Library objects as their builds name them (issue 26): `--symbol NAME=MINE` calls MINE without
//! redefining the objects' own NAME (a wrapper calling the library's NAME reaches it), OpenSSL's
//! exported `ossl_md5_block_asm_data_order*` names run without `--symbol`, BoringSSL's
//! `md5_block_asm_data_order` runs on a bare 16-byte state (a write past it is caught), and the
//! static scan decodes code only: a credit string after the last function, `$d` data and
//! `endbr64` are no image findings, while the same bytes inside a function still are.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Assembles `src` (relative to the repository) for `target` with clang and `defines` into
/// `dir/out`; returns the object's path.
fn assemble(dir: &Path, src: &str, out: &str, target: &str, march: &str, defines: &[&str]) -> String {
    let obj = dir.join(out);
    let status = Command::new("clang")
        .arg(format!("--target={target}"))
        .arg(format!("-march={march}"))
        .args(if target.starts_with("riscv64") { &["-mno-relax"][..] } else { &[] })
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg("-c")
        .arg(repo().join(src))
        .arg("-o")
        .arg(&obj)
        .status()
        .expect("clang (ci/setup.sh installs it)");
    assert!(status.success(), "clang {src}");
    obj.display().to_string()
}

/// The x86_64 OpenSSL-contract MD5 adapter of examples/openssl, its entry renamed `name`.
fn x86_adapter(dir: &Path, name: &str) -> String {
    let define = format!("md5_block_data_order={name}");
    let out = format!("{name}.o");
    assemble(dir, "examples/openssl/x86_64/md5_block_data_order.S", &out, "x86_64-linux-gnu", "x86-64", &[&define])
}

/// `lab run --seed 3 --set =rfc1321 --kernel md5 --format json args...`: (exit status, JSON, text).
fn run_md5(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["run", "--seed", "3", "--set", "=rfc1321", "--kernel", "md5", "--format", "json"];
    all.extend(args);
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(&all).output().expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let json = text
        .find('{')
        .and_then(|start| serde_json::Deserializer::from_str(&text[start..]).into_iter().next())
        .and_then(Result::ok)
        .unwrap_or(Value::Null);
    (out.status.code().expect("exit status"), json, text)
}

/// (backend, family, passed, failed) of every row.
fn rows(json: &Value) -> Vec<(String, String, u64, u64)> {
    let s = |r: &Value, k: &str| r[k].as_str().unwrap_or("hotspot").to_string();
    json["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    (
                        s(r, "backend"),
                        s(r, "family"),
                        r["passed"].as_u64().unwrap_or(0),
                        r["failed"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn image_findings(json: &Value) -> Vec<String> {
    json["image_findings"].as_array().map_or_else(Vec::new, |a| {
        a.iter()
            .map(|f| format!("{}: {}", f["class"].as_str().unwrap_or("?"), f["text"].as_str().unwrap_or("?")))
            .collect()
    })
}

/// Every row ran the RFC 1321 set (21 cases) through `family` and passed it.
fn all_passed(json: &Value, family: &str, backends: usize, text: &str) {
    let r = rows(json);
    assert_eq!(r.len(), backends, "{text}");
    for (backend, fam, passed, failed) in &r {
        assert_eq!((fam.as_str(), *passed, *failed), (family, 21, 0), "{backend}: {text}");
    }
}

fn x86_backends() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "unicorn,qemu,native"
    } else {
        "unicorn,qemu"
    }
}

#[test]
fn a_wrapper_calling_the_librarys_own_name_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let lib = x86_adapter(dir.path(), "md5_block_data_order");
    let wrapper =
        assemble(dir.path(), "tests/fixtures/library/md5_wrapper_x86_64.S", "w.o", "x86_64-linux-gnu", "x86-64", &[]);
    let backends = x86_backends();
    let (code, json, text) = run_md5(&[
        "--object",
        &lib,
        "--object",
        &wrapper,
        "--symbol",
        "md5_block_data_order=my_md5",
        "--backend",
        backends,
    ]);
    assert_eq!(code, 0, "{text}");
    all_passed(&json, "openssl", backends.split(',').count(), &text);
    // endbr64 at my_md5's entry and the credit string after its .size: no image finding.
    assert_eq!(image_findings(&json), Vec::<String>::new(), "{text}");
}

#[test]
fn the_same_credit_bytes_inside_a_function_are_decoded_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let lib = x86_adapter(dir.path(), "md5_block_data_order");
    let wrapper = assemble(
        dir.path(),
        "tests/fixtures/library/md5_wrapper_x86_64.S",
        "w.o",
        "x86_64-linux-gnu",
        "x86-64",
        &["CREDIT_INSIDE"],
    );
    let (code, json, text) = run_md5(&[
        "--object",
        &lib,
        "--object",
        &wrapper,
        "--symbol",
        "md5_block_data_order=my_md5",
        "--backend",
        "qemu",
    ]);
    assert_eq!(code, 1, "{text}");
    let found = image_findings(&json);
    assert!(
        found.iter().any(|f| f.starts_with("isa: ") && f.contains("my_md5+0xc") && f.contains("does not decode")),
        "{found:#?}\n{text}"
    );
}

#[test]
fn ossl_exported_names_run_without_symbol_options() {
    let dir = tempfile::tempdir().unwrap();
    let obj = x86_adapter(dir.path(), "ossl_md5_block_asm_data_order");
    let (code, json, text) = run_md5(&["--object", &obj, "--backend", "unicorn,qemu"]);
    assert_eq!(code, 0, "{text}");
    all_passed(&json, "openssl", 2, &text);
    // riscv64's perlasm appends the build's ISA: `_zbb` (here) or `_riscv64`.
    for (name, march, isa) in [
        ("ossl_md5_block_asm_data_order_zbb", "rv64gc_zbb", "rv64gc_zbb"),
        ("ossl_md5_block_asm_data_order_riscv64", "rv64gc", "rv64gc"),
    ] {
        let define = format!("md5_block_data_order={name}");
        let obj = assemble(
            dir.path(),
            "examples/openssl/riscv64/md5_block_data_order.S",
            &format!("{name}.o"),
            "riscv64-linux-gnu",
            march,
            &[&define],
        );
        let (code, json, text) = run_md5(&["--object", &obj, "--isa", isa, "--backend", "qemu"]);
        assert_eq!(code, 0, "{name}: {text}");
        all_passed(&json, "openssl", 1, &text);
    }
}

#[test]
fn boringssl_md5_runs_on_a_16_byte_state_and_a_write_past_it_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let real = x86_adapter(dir.path(), "real_md5");
    let src = "tests/fixtures/library/md5_boringssl_x86_64.S";
    let good = assemble(dir.path(), src, "good.o", "x86_64-linux-gnu", "x86-64", &[]);
    let (code, json, text) = run_md5(&["--object", &real, "--object", &good, "--backend", "unicorn,qemu"]);
    assert_eq!(code, 0, "{text}");
    all_passed(&json, "boringssl", 2, &text);
    assert!(text.contains("md5_block_asm_data_order(num=1)") || json["rows"].is_array(), "{text}");

    let bad = assemble(dir.path(), src, "bad.o", "x86_64-linux-gnu", "x86-64", &["WRITE_PAST_STATE"]);
    let (code, json, text) = run_md5(&["--object", &real, "--object", &bad, "--backend", "unicorn,qemu"]);
    assert_eq!(code, 1, "{text}");
    for (backend, family, _, failed) in rows(&json) {
        assert_eq!(family, "boringssl", "{text}");
        assert!(failed > 0, "{backend}: {text}");
    }
    // Unicorn checks every byte: the guarded cases name the first byte past the state.
    assert!(text.contains("write to unmapped or protected memory") || text.contains("past the end of state"), "{text}");
    assert!(text.contains("1 byte past the end of state"), "{text}");
}

#[test]
fn aarch64_data_words_in_text_are_not_decoded_but_a_hidden_svc_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let lib = assemble(
        dir.path(),
        "examples/openssl/aarch64/md5_block_data_order.S",
        "lib.o",
        "aarch64-linux-gnu",
        "armv8-a",
        &[],
    );
    let src = "tests/fixtures/library/svc_data_aarch64.S";
    let data = assemble(dir.path(), src, "data.o", "aarch64-linux-gnu", "armv8-a", &[]);
    let args = ["--symbol", "md5_block_data_order=my_md5", "--backend", "qemu"];
    let (code, json, text) = run_md5(&[&["--object", &lib, "--object", &data][..], &args].concat());
    // Not decoded (no ISA finding), but a branch could enter it: the every-word search
    // (hidden_syscall.rs, issue 28) names it as a system call hidden in data.
    assert_eq!(code, 1, "{text}");
    let found = image_findings(&json);
    assert_eq!(found.len(), 1, "{found:#?}\n{text}");
    assert!(found[0].starts_with("syscall: ") && found[0].contains("my_md5+0x4"), "{found:#?}");
    assert!(found[0].contains("in data of an executable section"), "{found:#?}");
    let code_svc = assemble(dir.path(), src, "code.o", "aarch64-linux-gnu", "armv8-a", &["SVC_AS_CODE"]);
    let (code, json, text) = run_md5(&[&["--object", &lib, "--object", &code_svc][..], &args].concat());
    assert_eq!(code, 1, "{text}");
    let found = image_findings(&json);
    assert!(found.iter().any(|f| f.starts_with("syscall: ") && f.contains("my_md5+0x4")), "{found:#?}\n{text}");
}

#[test]
fn bench_object_times_the_users_kernel_not_the_labs() {
    if !cfg!(target_arch = "x86_64") || kernel_lab::bench::native::unavailable().is_some() {
        // The native comparison needs an x86_64 host with the `openssl` feature; say so.
        eprintln!("bench --object: no native comparison in this build, checked on x86_64 hosts only");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let obj = x86_adapter(dir.path(), "ossl_md5_block_asm_data_order");
    let args = ["bench", "--object", &obj, "--kernel", "md5", "--no-throughput", "--no-predict", "--runs", "1"];
    let out =
        Command::new(env!("CARGO_BIN_EXE_lab")).args(args).args(["--format", "json"]).output().expect("lab bench");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {text}"));
    // The lab's own x86_64 kernels were not selected: their figures are not printed at all.
    assert!(json["native"].is_null(), "{text}");
    let rows = json["user_native"].as_array().expect("user_native rows");
    let workloads: Vec<&str> = rows.iter().filter_map(|r| r["workload"].as_str()).collect();
    assert_eq!(workloads, ["md5 64 B", "md5 1 KiB", "md5 16 KiB"], "--kernel md5 only: {text}");
    for r in rows {
        assert_eq!(r["variant"], "ossl_md5_block_asm_data_order", "{text}");
        assert_eq!(r["symbol"], "md5_block_data_order", "{text}");
        assert!(r["mb_per_s"].as_f64().is_some_and(|x| x > 0.0), "{text}");
        let theirs = r["openssl_mb_per_s"].as_f64().expect("OpenSSL's figure at the same size");
        let ratio = r["vs_openssl"].as_f64().expect("ratio");
        assert!((ratio - r["mb_per_s"].as_f64().unwrap() / theirs).abs() < 1e-9, "{text}");
    }
    // The instruction counts name the user's variant and MD5 alone.
    let counts = json["counts"].as_array().expect("counts");
    assert!(!counts.is_empty() && counts.iter().all(|c| c["kernel"] == "md5"), "{text}");
    // The human table labels the figures as the user's.
    let human = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().expect("lab bench");
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains("Your kernels, native") && !human.contains("Native x86_64, in-process"), "{human}");
}

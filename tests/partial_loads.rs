//! Bounds that match hardware (issue 26): a load that reaches past a buffer inside one aligned
//! 8-byte word the buffer also touches cannot fault on any machine. By default every backend
//! passes it and Unicorn, which alone sees it, lists it as a warning naming the instruction;
//! `--partial-loads fail` makes it a memory finding; a load crossing the aligned word still
//! fails. Fixtures: `tests/fixtures/<arch>/partial_load.S`, `x86_64/crossing_load.S`.

use std::process::Command;

use serde_json::Value;

use crate::common::fixture_kernels;

/// `lab run` of the RFC 1321 set on the kernels folder `dir` for `arch`, JSON: (exit, JSON, text).
fn run(dir: &std::path::Path, arch: &str, backends: &str, extra: &[&str]) -> (i32, Value, String) {
    let dir = dir.display().to_string();
    let exact = format!("={arch}");
    let mut args = vec!["run", "--seed", "11", "--kernels-dir", &dir, "--variant", &exact, "--backend", backends];
    args.extend(["--kernel", "md5", "--set", "=rfc1321", "--format", "json"]);
    args.extend(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(&args).output().expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().expect("exit status"), json, text)
}

/// (variant, backend, passed, failed) of every row.
fn rows(json: &Value) -> Vec<(String, String, u64, u64)> {
    let rows = json["rows"].as_array().map(Vec::as_slice).unwrap_or_default();
    let s = |r: &Value, k: &str| r[k].as_str().unwrap_or_default().to_string();
    rows.iter()
        .map(|r| {
            (s(r, "variant"), s(r, "backend"), r["passed"].as_u64().unwrap_or(0), r["failed"].as_u64().unwrap_or(0))
        })
        .collect()
}

fn warnings(json: &Value) -> Vec<String> {
    json["warnings"]
        .as_array()
        .map_or_else(Vec::new, |w| w.iter().filter_map(|x| x.as_str().map(String::from)).collect())
}

fn backends_of(arch: &str) -> &'static str {
    if arch == "x86_64" && cfg!(target_arch = "x86_64") {
        "unicorn,qemu,native"
    } else {
        "unicorn,qemu"
    }
}

#[test]
fn a_partial_load_passes_everywhere_with_a_warning_and_fails_on_request() {
    for arch in ["riscv64", "aarch64", "x86_64"] {
        let (dir, _) = fixture_kernels(arch, "md5.S", "partial_load.S");
        let (code, json, text) = run(dir.path(), arch, backends_of(arch), &[]);
        assert_eq!(code, 0, "{arch}: {text}");
        let r = rows(&json);
        // The RVV rows do not run on Unicorn (no RVV); every other row passes.
        let rvv_on_unicorn = |x: &(String, String, u64, u64)| x.0.ends_with("+v") && x.1 == "unicorn";
        assert!(!r.is_empty() && r.iter().all(|x| (x.2 > 0 && x.3 == 0) || rvv_on_unicorn(x)), "{arch}: {r:?}");
        let w = warnings(&json);
        let partial: Vec<&String> = w.iter().filter(|w| w.contains("partial load: ")).collect();
        assert!(!partial.is_empty(), "{arch}: no partial-load warning: {w:#?}");
        for w in &partial {
            assert!(w.contains(" on unicorn, md5 / rfc1321: "), "{arch}: only Unicorn sees them: {w}");
            assert!(w.contains("past the end of") && w.contains("inside an aligned 8-byte word; cannot fault"), "{w}");
            assert!(w.contains("(a load of 8 bytes at 0x") && w.contains("at md5_implCompress+"), "{arch}: {w}");
        }

        // On request a finding of its own class: Unicorn fails the misaligned cases; the guard
        // pages of qemu and native never see a load that stays inside the buffer's last word.
        let (code, json, text) = run(dir.path(), arch, "unicorn,qemu", &["--partial-loads", "fail"]);
        assert_eq!(code, 1, "{arch}: {text}");
        for (variant, backend, _, failed) in rows(&json) {
            let unicorn_ran = backend == "unicorn" && !variant.ends_with("+v");
            assert_eq!(failed > 0, unicorn_ran, "{arch} {variant} {backend}: {text}");
        }
        assert!(text.contains("past the end of"), "{arch}: {text}");
        let classes: Vec<&str> = json["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| r["cases"].as_array().into_iter().flatten())
            .flat_map(|c| c["findings"].as_array().into_iter().flatten())
            .filter_map(|f| f["class"].as_str())
            .collect();
        assert!(!classes.is_empty() && classes.iter().all(|c| *c == "partial-load"), "{arch}: {classes:?} {text}");
        let d = dir.path().display().to_string();
        let human = Command::new(env!("CARGO_BIN_EXE_lab"))
            .args([
                "run",
                "--seed",
                "11",
                "--kernels-dir",
                &d,
                "--variant",
                &format!("={arch}"),
                "--backend",
                "unicorn",
            ])
            .args(["--kernel", "md5", "--set", "=rfc1321", "--partial-loads", "fail"])
            .output()
            .expect("run lab");
        let human = String::from_utf8_lossy(&human.stdout);
        assert!(human.contains("replay: lab run ") && human.contains("--partial-loads fail"), "{arch}: {human}");
    }
}

#[test]
fn a_load_crossing_the_aligned_word_still_fails() {
    let (dir, _) = fixture_kernels("x86_64", "md5.S", "crossing_load.S");
    let backends = backends_of("x86_64");
    let (code, json, text) = run(dir.path(), "x86_64", backends, &[]);
    assert_eq!(code, 1, "{text}");
    // The guarded case ends on a guard page: every backend sees the load reach it.
    for (variant, backend, _, failed) in rows(&json) {
        assert!(failed > 0, "{variant} on {backend}: {text}");
    }
    assert!(text.contains("4 bytes past the end of") || text.contains("1 byte past the end of"), "{text}");
}

#[test]
fn the_manifest_field_and_the_option_are_checked() {
    let (code, _, text) = run(std::path::Path::new("kernels"), "x86_64", "qemu", &["--partial-loads", "maybe"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("`maybe` is not `warn` or `fail`"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("kernel-lab.toml");
    std::fs::write(
        &manifest,
        "[[variant]]\nname = \"k\"\narch = \"x86_64\"\nobjects = []\nsources = [\"k.S\"]\npartial_loads = \"often\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("k.S"), "").unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_lab")).args(["run", "--manifest"]).arg(&manifest).output().expect("run lab");
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("`partial_loads`: `often` is not `warn` or `fail`"), "{text}");
}

/// `lab fuzz ARGS --format json` with failures written under `out`: (exit, JSON, stderr).
fn fuzz(args: &[&str], out: &std::path::Path) -> (i32, Value, String) {
    let out_dir = out.display().to_string();
    let res = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["fuzz", "--seed", "5", "--format", "json", "--out", &out_dir])
        .args(args)
        .output()
        .expect("run lab fuzz");
    let json = serde_json::from_slice(&res.stdout).unwrap_or(Value::Null);
    (res.status.code().expect("exit status"), json, String::from_utf8_lossy(&res.stderr).into_owned())
}

#[test]
fn fuzz_lists_a_partial_load_once_per_instruction_and_fails_it_on_request() {
    let (dir, _) = fixture_kernels("x86_64", "md5.S", "partial_load.S");
    let failures = tempfile::tempdir().expect("temp dir");
    let d = dir.path().display().to_string();
    let base =
        ["--kernels-dir", &d, "--variant", "=x86_64", "--kernel", "md5", "--backend", "unicorn", "--cases", "300"];
    let (code, json, err) = fuzz(&base, failures.path());
    assert_eq!(code, 0, "{err}");
    let partial: Vec<String> = warnings(&json).into_iter().filter(|w| w.contains("partial load: ")).collect();
    assert_eq!(partial.len(), 1, "one load instruction, one warning: {partial:#?}");
    let w = &partial[0];
    assert!(w.starts_with("x86_64 on unicorn, md5 / fuzz: partial load: "), "{w}");
    assert!(w.contains("inside an aligned 8-byte word; cannot fault") && w.contains("at md5_implCompress+0x8"), "{w}");

    let (code, json, err) = fuzz(&[&base[..], &["--partial-loads", "fail"]].concat(), failures.path());
    assert_eq!(code, 1, "{err}");
    let text = json.to_string();
    assert!(text.contains("partial-load") && text.contains("cannot fault"), "{text}");
    let replays: Vec<std::path::PathBuf> =
        std::fs::read_dir(failures.path()).expect("failures written").map(|e| e.expect("entry").path()).collect();
    assert_eq!(replays.len(), 1, "{replays:?}");
    assert!(text.contains("--partial-loads fail"), "the replay keeps the policy: {text}");
}

#[test]
fn a_partial_load_is_one_warning_per_instruction_across_the_sets_of_an_image() {
    let (dir, _) = fixture_kernels("x86_64", "md5.S", "partial_load.S");
    let d = dir.path().display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["run", "--seed", "11", "--kernels-dir", &d, "--variant", "=x86_64", "--backend", "unicorn"])
        .args(["--kernel", "md5", "--set", "=rfc1321,=openssl", "--format", "json"])
        .output()
        .expect("run lab");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    let w = warnings(&json);
    let partial: Vec<&String> = w.iter().filter(|w| w.contains("partial load: ")).collect();
    assert!(!partial.is_empty(), "{w:#?}");
    let mut pcs: Vec<&str> = partial.iter().filter_map(|w| w.split("(pc ").nth(1)).collect();
    let n = pcs.len();
    pcs.sort_unstable();
    pcs.dedup();
    assert_eq!(pcs.len(), n, "one warning per instruction: {partial:#?}");
    assert!(
        partial.iter().any(|w| w.contains(" on unicorn, md5 / ") && w.contains("rfc1321") && w.contains("openssl")),
        "{partial:#?}"
    );
}

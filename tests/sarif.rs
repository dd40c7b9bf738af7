//! `--format sarif` as code scanning reads it: a kernel that reads past its input and a kernel
//! with an AVX instruction in the baseline build become results of their finding class, located
//! at the `.S` line of the faulting or offending instruction (DWARF) with the symbol as a logical
//! location and the replay line; a clean run is a valid log with no result; `lab fuzz` writes
//! the same format. Every log is parsed into serde-sarif's types (generated from the OASIS SARIF
//! 2.1.0 schema) and checked by hand for the fields the schema requires of what the lab writes.

use std::path::Path;
use std::process::Command;

use kernel_lab::paths;
use serde_json::Value;

use crate::common::fixture_kernels;

/// Runs `lab` with `args`; returns the exit status and stdout.
fn lab(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().expect("run lab");
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or_else(|| panic!("killed: {stderr}")), String::from_utf8_lossy(&out.stdout).into())
}

/// `lab run` of one x86_64 kernel on Unicorn over one bundled vector file, the SARIF written to
/// a file (`--output`), which is returned parsed with the exit status.
fn sarif_run(kernels: &Path, kernel: &str, vectors: &str) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lab.sarif");
    let vectors = paths::vectors_dir().join(vectors);
    let (code, _) = lab(&[
        "run",
        "--kernels-dir",
        kernels.to_str().unwrap(),
        "--arch",
        "x86_64",
        "--backend",
        "unicorn",
        "--kernel",
        kernel,
        "--no-bundled",
        "--vectors",
        vectors.to_str().unwrap(),
        "--seed",
        "7",
        "--format",
        "sarif",
        "--output",
        out.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&out).expect("--output wrote the SARIF file");
    (code, valid_sarif(&text))
}

/// `text` parsed as SARIF 2.1.0: into serde-sarif's schema types, then the schema's required
/// fields of what the lab writes (version, `$schema`, the driver's name and rules, each result's
/// message text, rule id and index, level, locations with 1-based lines and URIs). Returns the
/// log as JSON.
fn valid_sarif(text: &str) -> Value {
    let typed: serde_sarif::sarif::Sarif = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(typed.runs.len(), 1);
    let log: Value = serde_json::from_str(text).unwrap();
    assert_eq!(log["version"], "2.1.0");
    assert_eq!(log["$schema"], kernel_lab::reporters::SARIF_SCHEMA_URI);
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "kernel-lab");
    let rules: Vec<&str> =
        run["tool"]["driver"]["rules"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    for r in run["results"].as_array().expect("results") {
        let id = r["ruleId"].as_str().expect("ruleId");
        assert_eq!(rules.get(r["ruleIndex"].as_u64().unwrap() as usize), Some(&id), "{r}");
        assert!(r["message"]["text"].as_str().is_some_and(|t| !t.is_empty()), "{r}");
        assert!(["error", "warning", "note"].contains(&r["level"].as_str().unwrap()), "{r}");
        for loc in r["locations"].as_array().expect("locations") {
            let phys = &loc["physicalLocation"];
            assert!(phys["artifactLocation"]["uri"].as_str().is_some(), "{r}");
            if let Some(line) = phys["region"]["startLine"].as_u64() {
                assert!(line >= 1, "{r}");
            }
        }
    }
    assert!(run["invocations"][0]["exitCode"].is_i64());
    log
}

/// The first result of class `rule`.
fn result<'a>(log: &'a Value, rule: &str) -> &'a Value {
    let results = log["runs"][0]["results"].as_array().unwrap();
    results.iter().find(|r| r["ruleId"] == rule).unwrap_or_else(|| panic!("no {rule} result in {log:#}"))
}

/// The 1-based line of `fixture` (tests/fixtures/x86_64) that holds `text`.
fn line_of(fixture: &str, text: &str) -> u64 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x86_64").join(fixture);
    let source = std::fs::read_to_string(path).unwrap();
    source.lines().position(|l| l.contains(text)).expect("the instruction's line") as u64 + 1
}

/// The source file, line and logical place of a result's first location.
fn place(r: &Value) -> (&str, u64, &str) {
    let loc = &r["locations"][0];
    let phys = &loc["physicalLocation"];
    (
        phys["artifactLocation"]["uri"].as_str().unwrap(),
        phys["region"]["startLine"].as_u64().unwrap_or(0),
        loc["logicalLocations"][0]["fullyQualifiedName"].as_str().unwrap_or(""),
    )
}

#[test]
fn an_overread_is_a_memory_result_at_its_source_line_with_the_replay() {
    let (dir, _) = fixture_kernels("x86_64", "poly1305.S", "overread.S");
    let (code, log) = sarif_run(dir.path(), "poly1305", "poly1305/rfc8439.json");
    assert_eq!(code, 1);
    let r = result(&log, "memory");
    assert_eq!(r["level"], "error");
    let (uri, line, symbol) = place(r);
    // The run's own kernels folder, even when the cached image was built from another copy.
    assert_eq!(uri, format!("file://{}/x86_64/poly1305.S", dir.path().display()));
    assert_eq!(line, line_of("overread.S", "movzx"));
    assert_eq!(symbol, "poly1305_processBlocks");
    let text = r["message"]["text"].as_str().unwrap();
    assert!(text.starts_with("x86_64 on unicorn, poly1305 kernel, set rfc8439, case "), "{text}");
    assert!(text.contains("1 byte past the end of input"), "{text}");
    let replay = r["properties"]["replay"].as_str().unwrap();
    assert!(replay.starts_with("lab run --seed 7 ") && replay.contains("--case '="), "{replay}");
    let inv = &log["runs"][0]["invocations"][0];
    assert_eq!((inv["exitCode"].as_i64(), inv["properties"]["seed"].as_str()), (Some(1), Some("7")));
}

#[test]
fn an_avx_instruction_in_the_baseline_build_is_an_isa_result_at_its_line() {
    let (dir, _) = fixture_kernels("x86_64", "md5.S", "vex.S");
    let (code, log) = sarif_run(dir.path(), "md5", "md5/rfc1321.json");
    assert_eq!(code, 1);
    let r = result(&log, "isa");
    assert_eq!(r["level"], "error");
    let (uri, line, symbol) = place(r);
    assert_eq!(uri, format!("file://{}/x86_64/md5.S", dir.path().display()));
    assert_eq!(line, line_of("vex.S", "vpxor"));
    assert!(symbol.starts_with("md5_implCompress"), "{symbol}");
    assert!(r["properties"]["replay"].as_str().unwrap().contains("--variant '=x86_64'"), "{r}");
}

#[test]
fn a_clean_run_is_a_valid_log_with_no_result() {
    let rfc1321 = paths::vectors_dir().join("md5/rfc1321.json");
    let (code, stdout) = lab(&[
        "run",
        "--arch",
        "x86_64",
        "--backend",
        "unicorn",
        "--kernel",
        "md5",
        "--no-bundled",
        "--vectors",
        rfc1321.to_str().unwrap(),
        "--seed",
        "3",
        "--format",
        "sarif",
    ]);
    assert_eq!(code, 0, "{stdout}");
    let log = valid_sarif(&stdout);
    assert_eq!(log["runs"][0]["results"].as_array().map(Vec::len), Some(0));
    let inv = &log["runs"][0]["invocations"][0];
    assert_eq!((inv["exitCode"].as_i64(), inv["executionSuccessful"].as_bool()), (Some(0), Some(true)));
    assert_eq!(inv["properties"]["seed"], "3");
}

#[test]
fn a_fuzz_campaign_writes_sarif_too() {
    let (code, stdout) = lab(&[
        "fuzz",
        "--arch",
        "x86_64",
        "--backend",
        "unicorn",
        "--kernel",
        "md5",
        "--cases",
        "50",
        "--format",
        "sarif",
    ]);
    assert_eq!(code, 0, "{stdout}");
    let log = valid_sarif(&stdout);
    assert_eq!(log["runs"][0]["invocations"][0]["properties"]["command"], "fuzz");
    assert_eq!(log["runs"][0]["results"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_fuzz_failure_is_located_and_replays_its_shrunk_case() {
    let (dir, _) = fixture_kernels("x86_64", "poly1305.S", "overread.S");
    let out = tempfile::tempdir().unwrap();
    let (code, stdout) = lab(&[
        "fuzz",
        "--kernels-dir",
        dir.path().to_str().unwrap(),
        "--arch",
        "x86_64",
        "--backend",
        "unicorn",
        "--kernel",
        "poly1305",
        "--cases",
        "50",
        "--seed",
        "5",
        "--out",
        out.path().to_str().unwrap(),
        "--format",
        "sarif",
    ]);
    assert_eq!(code, 1, "{stdout}");
    let log = valid_sarif(&stdout);
    let r = result(&log, "memory");
    let (uri, line, _) = place(r);
    assert_eq!(uri, format!("file://{}/x86_64/poly1305.S", dir.path().display()));
    assert_eq!(line, line_of("overread.S", "movzx"));
    let replay = r["properties"]["replay"].as_str().unwrap();
    assert!(replay.starts_with("lab run --seed 5 ") && replay.contains("--vectors "), "{replay}");
}

//! Every command's JSON output starts with the one envelope (docs/report-schema.md "The JSON
//! envelope"): `schema_version`, `tool`, `command`, then the command's own fields. One test per
//! command, each reading the fields a reader needs first and one field of the body.

use std::process::Command;

use kernel_lab::paths;
use kernel_lab::reporters::SCHEMA_VERSION;
use serde_json::Value;

/// `lab ARGS` with stdout parsed as JSON (its text kept, for key order); `code` is the exit
/// status it must have.
fn json_of(args: &[&str], code: i32) -> (Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().expect("run lab");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "lab {}: {stderr}", args.join(" "));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("lab {}: not JSON ({e}): {stderr}", args.join(" ")));
    (doc, text)
}

/// The envelope's fields come first in the text, in order, and say `command`.
fn assert_envelope((doc, text): &(Value, String), command: &str) {
    let at = |key: &str| text.find(&format!("\"{key}\"")).unwrap_or_else(|| panic!("{command}: no {key}"));
    let first = text.trim_start().trim_start_matches('{').trim_start();
    assert!(first.starts_with("\"schema_version\""), "{command}: {}", &text[..text.len().min(200)]);
    assert!(at("schema_version") < at("tool") && at("tool") < at("command"), "{command}: envelope order");
    assert_eq!(doc["schema_version"], SCHEMA_VERSION, "{command}");
    assert_eq!(doc["tool"]["name"], "kernel-lab", "{command}");
    assert_eq!(doc["tool"]["version"], env!("CARGO_PKG_VERSION"), "{command}");
    assert_eq!(doc["command"], command);
}

fn rfc1321() -> String {
    paths::vectors_dir().join("md5/rfc1321.json").display().to_string()
}

#[test]
fn run_and_fuzz() {
    let v = rfc1321();
    let run =
        ["run", "--variant", "=x86_64", "--backend", "unicorn", "--no-bundled", "--vectors", &v, "--format", "json"];
    let doc = json_of(&run, 0);
    assert_envelope(&doc, "run");
    assert!(doc.0["totals"]["passed"].as_u64().unwrap() > 0, "{}", doc.1);
    let fuzz = [
        "fuzz",
        "--variant",
        "=x86_64",
        "--backend",
        "unicorn",
        "--kernel",
        "md5",
        "--cases",
        "20",
        "--format",
        "json",
    ];
    let doc = json_of(&fuzz, 0);
    assert_envelope(&doc, "fuzz");
    assert!(doc.0["rows"].as_array().is_some_and(|r| !r.is_empty()), "{}", doc.1);
}

#[test]
fn bench_and_its_saved_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("baseline.json");
    let s = saved.to_str().unwrap();
    let args =
        ["bench", "--arch", "x86_64", "--no-native", "--no-throughput", "--no-predict", "--json", "--save-baseline", s];
    let doc = json_of(&args, 0);
    assert_envelope(&doc, "bench");
    assert!(doc.0["counts"].as_array().is_some_and(|c| !c.is_empty()), "{}", doc.1);
    let text = std::fs::read_to_string(&saved).unwrap();
    let baseline = (serde_json::from_str(&text).unwrap(), text);
    assert_envelope(&baseline, "bench-baseline");
    assert!(baseline.0["instructions"].as_array().is_some_and(|c| !c.is_empty()), "{}", baseline.1);
    // The saved file is read back as a baseline, and a run report is refused as one.
    let gate =
        ["bench", "--arch", "x86_64", "--no-native", "--no-throughput", "--no-predict", "--json", "--baseline", s];
    assert_envelope(&json_of(&gate, 0), "bench");
    let report = dir.path().join("run.json");
    let mut run = serde_json::Map::new();
    run.insert("schema_version".into(), SCHEMA_VERSION.into());
    run.insert("command".into(), "run".into());
    std::fs::write(&report, Value::Object(run).to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["bench", "--arch", "x86_64", "--no-native", "--no-throughput", "--no-predict"])
        .args(["--baseline", report.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("run.json: a `run` document, not a baseline"), "{err}");
}

#[test]
fn doctor_and_list() {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(["doctor", "--format", "json"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc = (serde_json::from_str::<Value>(&text).expect("doctor JSON"), text);
    assert_envelope(&doc, "doctor");
    assert_eq!(doc.0["exit_code"].as_i64(), out.status.code().map(i64::from), "{}", doc.1);
    let doc = json_of(&["list", "--format", "json"], 0);
    assert_envelope(&doc, "list");
    assert!(doc.0["variants"].as_array().is_some_and(|v| v.iter().any(|v| v["name"] == "x86_64")), "{}", doc.1);
}

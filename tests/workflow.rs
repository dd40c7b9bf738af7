//! The CI workflow (ci/github-workflow.yml) read as GitHub would expand it: every `lab` command
//! in every job and matrix cell must parse (`lab --check-args`), the fuzz shards must cover every
//! case exactly once, and the hygiene rules the file states must hold (pinned actions, read-only
//! token, no expression interpolated into a script, the MSRV job on Cargo.toml's
//! rust-version, the release binary built once, one run per push or pull request).

use std::collections::BTreeMap;
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

const WORKFLOW: &str = include_str!("../ci/github-workflow.yml");

fn workflow() -> Yaml {
    YamlLoader::load_from_str(WORKFLOW).expect("ci/github-workflow.yml is YAML").remove(0)
}

/// A scalar as the string GitHub substitutes for it.
fn scalar(y: &Yaml) -> String {
    match y {
        Yaml::String(s) | Yaml::Real(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

/// One map per matrix cell (`include` entries, or the product of the listed axes).
fn matrix_cells(job: &Yaml) -> Vec<BTreeMap<String, String>> {
    let Some(matrix) = job["strategy"]["matrix"].as_hash() else { return vec![BTreeMap::new()] };
    let mut cells = vec![BTreeMap::new()];
    for (k, v) in matrix {
        let key = scalar(k);
        let values = v.as_vec().expect("a matrix axis is a list");
        if key == "include" {
            assert_eq!(cells.len(), 1, "include after other axes is not handled here");
            cells = values
                .iter()
                .map(|e| e.as_hash().expect("include entry").iter().map(|(k, v)| (scalar(k), scalar(v))).collect())
                .collect();
            continue;
        }
        let mut product = Vec::new();
        for c in &cells {
            for v in values {
                let mut c = c.clone();
                c.insert(key.clone(), scalar(v));
                product.push(c);
            }
        }
        cells = product;
    }
    cells
}

/// `${{ expr }}` evaluated the way the workflow uses it: matrix values, `a || 'default'` (the
/// default: inputs are empty on schedule and push), `github.run_id`.
fn expand(text: &str, cell: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("closed ${{") + start;
        let expr = rest[start + 3..end].trim();
        let value = if let Some(key) = expr.strip_prefix("matrix.") {
            cell.get(key).unwrap_or_else(|| panic!("matrix.{key} is not in {cell:?}")).clone()
        } else if let Some((_, default)) = expr.split_once("||") {
            default.trim().trim_matches('\'').to_string()
        } else if expr == "github.run_id" {
            "4242424242".to_string()
        } else {
            panic!("unexpected expression in a command: {expr}")
        };
        out.push_str(&value);
        rest = &rest[end + 2..];
    }
    out + rest
}

/// `$NAME` and `"$NAME"` replaced by the step's env values.
fn with_env(script: &str, env: &BTreeMap<String, String>) -> String {
    let mut s = script.to_string();
    // Longest names first so `$SHARD` cannot eat a prefix of a longer name.
    let mut names: Vec<&String> = env.keys().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for name in names {
        s = s.replace(&format!("${name}"), &env[name]);
    }
    s
}

/// Every `lab` command of the workflow, expanded per matrix cell: (job, arguments after `lab`).
fn lab_commands() -> Vec<(String, Vec<String>)> {
    let wf = workflow();
    let mut found = Vec::new();
    for (name, job) in wf["jobs"].as_hash().expect("jobs") {
        for cell in matrix_cells(job) {
            for step in job["steps"].as_vec().expect("steps") {
                let Some(script) = step["run"].as_str() else { continue };
                let env: BTreeMap<String, String> = step["env"]
                    .as_hash()
                    .map(|h| h.iter().map(|(k, v)| (scalar(k), expand(&scalar(v), &cell))).collect())
                    .unwrap_or_default();
                let script = with_env(&expand(script, &cell), &env);
                for line in script.lines() {
                    let words = shlex::split(line).unwrap_or_else(|| panic!("shell quoting in: {line}"));
                    // A command word: first on the line or after a control operator.
                    let is_lab = |i: usize| {
                        (words[i] == "lab" || words[i].ends_with("/release/lab"))
                            && (i == 0 || ["|", "&&", "||", ";"].contains(&words[i - 1].as_str()))
                    };
                    let Some(at) = (0..words.len()).find(|&i| is_lab(i)) else { continue };
                    let args: Vec<String> = words[at + 1..]
                        .iter()
                        .take_while(|w| !["|", "&&", "||", ";", ">", "2>"].contains(&w.as_str()))
                        .cloned()
                        .collect();
                    found.push((scalar(name), args));
                }
            }
        }
    }
    found
}

#[test]
fn every_lab_command_in_the_workflow_parses() {
    let commands = lab_commands();
    // 5 lab-run cells × (doctor + run), 4 fuzz shards, the bench gate.
    assert_eq!(commands.len(), 15, "{commands:#?}");
    for (job, args) in &commands {
        let out = Command::new(env!("CARGO_BIN_EXE_lab")).arg("--check-args").args(args).output().expect("run lab");
        assert!(
            out.status.success(),
            "job {job}: `lab {}` does not parse: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_fuzz_shards_cover_every_case_exactly_once() {
    let shards: Vec<(u64, u64)> = lab_commands()
        .iter()
        .filter(|(_, a)| a.first().is_some_and(|c| c == "fuzz"))
        .map(|(_, a)| {
            let at = a.iter().position(|w| w == "--shard").expect("--shard");
            let (i, n) = a[at + 1].split_once('/').expect("I/N");
            (i.parse().unwrap(), n.parse().unwrap())
        })
        .collect();
    let n = shards[0].1;
    let mut taken: Vec<u64> = shards.iter().map(|&(i, m)| if m == n { i } else { u64::MAX }).collect();
    taken.sort_unstable();
    // Case k belongs to shard k mod N, so shards 0..N-1, each once, take every case once.
    assert_eq!(taken, (0..n).collect::<Vec<_>>(), "{shards:?}");
}

#[test]
fn actions_are_pinned_the_token_is_read_only_and_expressions_stay_out_of_scripts() {
    let wf = workflow();
    assert_eq!(wf["permissions"]["contents"].as_str(), Some("read"));
    for (name, job) in wf["jobs"].as_hash().unwrap() {
        let name = scalar(name);
        for step in job["steps"].as_vec().unwrap() {
            if let Some(uses) = step["uses"].as_str() {
                let (_, hash) = uses.split_once('@').expect("action@ref");
                assert!(
                    hash.len() == 40 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
                    "{name}: {uses} is not pinned by commit"
                );
            }
            if let Some(run) = step["run"].as_str() {
                // Expressions reach scripts through env only (no template injection).
                assert!(!run.contains("${{"), "{name}: an expression is interpolated into: {run}");
            }
            if let Some(key) = step["with"]["key"].as_str() {
                // Keyed by the lock file alone: a source change must not make a new cache entry.
                assert!(key.ends_with("${{ hashFiles('Cargo.lock') }}"), "{name}: cache key {key}");
                assert!(!key.contains("lab/**"), "{name}: cache key {key} follows the sources");
            }
        }
    }
}

#[test]
fn the_msrv_job_builds_with_the_rust_version_of_cargo_toml() {
    let manifest = include_str!("../Cargo.toml");
    let want = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("rust-version in Cargo.toml");
    let container = workflow()["jobs"]["msrv"]["container"].as_str().expect("msrv container").to_string();
    assert_eq!(container, format!("rust:{want}.0-bookworm"));
}

#[test]
fn the_release_binary_is_built_once_and_every_lab_job_downloads_it() {
    let wf = workflow();
    let mut builds = Vec::new();
    for (name, job) in wf["jobs"].as_hash().unwrap() {
        let name = scalar(name);
        let steps = job["steps"].as_vec().unwrap();
        let runs = |needle: &str| steps.iter().any(|s| s["run"].as_str().is_some_and(|r| r.contains(needle)));
        if runs("cargo build --release") {
            builds.push(name.clone());
        }
        if runs("target/release/lab") {
            assert_eq!(job["needs"].as_str(), Some("build"), "{name} runs the binary without needing the build job");
            let downloads = steps.iter().any(|s| {
                s["uses"].as_str().is_some_and(|u| u.starts_with("actions/download-artifact@"))
                    && s["with"]["name"].as_str() == Some("lab-binary")
            });
            assert!(downloads, "{name} does not download the lab binary");
        }
    }
    assert_eq!(builds, ["build"], "cargo build --release runs in more than the build job");
}

#[test]
fn pushes_run_only_on_main_so_a_pull_request_runs_once_and_results_are_shown() {
    let wf = workflow();
    let on = &wf["on"];
    let branches: Vec<String> = on["push"]["branches"].as_vec().expect("push.branches").iter().map(scalar).collect();
    assert_eq!(branches, ["main"]);
    assert!(!on["pull_request"].is_badvalue(), "pull requests still run");
    let steps = wf["jobs"]["lab-run"]["steps"].as_vec().unwrap();
    let uses: Vec<&str> = steps.iter().filter_map(|s| s["uses"].as_str()).collect();
    assert!(uses.iter().any(|u| u.starts_with("mikepenz/action-junit-report@")), "{uses:?}");
    assert!(uses.iter().any(|u| u.starts_with("github/codeql-action/upload-sarif@")), "{uses:?}");
    let run = steps.iter().filter_map(|s| s["run"].as_str()).find(|r| r.contains("lab run")).unwrap();
    assert!(run.contains("--also-report") && run.contains("GITHUB_STEP_SUMMARY"), "{run}");
    assert_eq!(wf["jobs"]["lab-run"]["permissions"]["security-events"].as_str(), Some("write"));
}

#[test]
fn the_lab_run_matrix_covers_every_row_of_lab_list() {
    let cells = matrix_cells(&workflow()["jobs"]["lab-run"]);
    let mut covered = std::collections::BTreeSet::new();
    for cell in &cells {
        let args = shlex::split(&cell["args"]).expect("args");
        let out = Command::new(env!("CARGO_BIN_EXE_lab"))
            .args(["run", "--format", "json", "--set", "=rfc1321", "--kernel", "md5", "--backend", "unicorn,qemu"])
            .args(&args)
            .output()
            .expect("run lab");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let rows = doc["rows"].as_array().into_iter().flatten();
        let na = doc["not_applicable"].as_array().into_iter().flatten();
        covered.extend(rows.chain(na).map(|r| r["variant"].as_str().unwrap().to_string()));
    }
    let all: std::collections::BTreeSet<String> =
        kernel_lab::variant::VARIANTS.iter().map(|v| v.name.to_string()).collect();
    assert_eq!(covered, all, "rows of lab list that no lab-run cell selects");
}

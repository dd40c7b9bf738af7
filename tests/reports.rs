//! The JSON and JUnit reports of `lab run` as CI reads them: a failure (a kernel with one MD5
//! rotate amount changed) and a combination that cannot exist (aarch64 on native, not a skip)
//! appear as such, with the right counts, in XML that follows the JUnit schema's structure, and
//! JSON with its schema fields.

use std::path::Path;
use std::process::Command;

use kernel_lab::paths;

use crate::common::mutated_kernels;

/// Round 1, step 4 rotate amount 22 changed to 21 in the x86_64 MD5 kernel.
const X86_ROTATE: (&str, &str) = ("F_STEP RB, RC, RD, RA,  3, 22,", "F_STEP RB, RC, RD, RA,  3, 21,");
const SKIP_REASON: &str = "native runs only the host's architecture";

/// Cases the RFC 1321 set makes per variant × backend (guarded and offset cases).
fn rfc1321_cases() -> usize {
    let (set, errors) = kernel_lab::vectors::load_file(&paths::vectors_dir().join("md5/rfc1321.json"));
    assert!(errors.is_empty(), "{errors:?}");
    kernel_lab::run::cases_in(&set.expect("rfc1321.json"))
}

/// Runs `lab` with `args` and `env`; returns the exit status, stdout and stderr.
fn lab(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).envs(env.iter().copied()).output().expect("run lab");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().expect("exit status"), text(&out.stdout), text(&out.stderr))
}

/// `lab run` over aarch64 and the broken x86_64 on Unicorn and native, RFC 1321 only: aarch64
/// passes on Unicorn and is not applicable on native, x86_64 fails on both. `extra` adds the format
/// options.
fn broken_run(kernels: &Path, extra: &[&str]) -> (i32, String, String) {
    let rfc1321 = paths::vectors_dir().join("md5/rfc1321.json");
    let mut args = vec![
        "run",
        "--kernels-dir",
        kernels.to_str().unwrap(),
        "--variant",
        "=aarch64,=x86_64",
        "--backend",
        "unicorn",
        "--backend",
        "native",
        "--kernel",
        "md5",
        "--no-bundled",
        "--vectors",
        rfc1321.to_str().unwrap(),
        "--seed",
        "7",
    ];
    args.extend_from_slice(extra);
    lab(&args, &[])
}

/// The JUnit report lists aarch64 on native once, as a property of the suite `not applicable`
/// with the reason, and has no test case of it (not a skip).
fn assert_not_applicable(doc: &roxmltree::Document) {
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite") && n.attribute("name") == Some("not applicable"))
        .expect("a `not applicable` suite");
    let props: Vec<(&str, &str)> = suite
        .descendants()
        .filter(|n| n.has_tag_name("property"))
        .map(|p| (p.attribute("name").unwrap(), p.attribute("value").unwrap()))
        .collect();
    assert_eq!(props.len(), 1, "{props:?}");
    assert_eq!(props[0].0, "aarch64 on native");
    assert!(props[0].1.starts_with(SKIP_REASON), "{props:?}");
    let native_cases = doc.descendants().filter(|n| {
        n.has_tag_name("testcase") && n.attribute("classname").is_some_and(|c| c.starts_with("aarch64.native"))
    });
    assert_eq!(native_cases.count(), 0, "no test case for a combination that cannot exist");
}

fn attr<T: std::str::FromStr>(n: roxmltree::Node, name: &str) -> T {
    let v = n.attribute(name).unwrap_or_else(|| panic!("<{}> lacks `{name}`", n.tag_name().name()));
    v.parse().unwrap_or_else(|_| panic!("<{}> {name}={v:?}", n.tag_name().name()))
}

fn elements<'a, 'i>(n: roxmltree::Node<'a, 'i>) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> {
    n.children().filter(|c| c.is_element())
}

/// The rules of the JUnit schema that validating CI readers apply (Jenkins xunit-plugin
/// junit-10.xsd): which elements may appear where, the attributes allowed on `<testsuites>`,
/// required attributes, plain decimal times, and counts that agree with the cases below them.
/// Returns (name, tests, failures, errors, skipped) per suite.
fn check_junit_schema(doc: &roxmltree::Document) -> Vec<(String, usize, usize, usize, usize)> {
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let allowed = ["name", "time", "tests", "failures", "errors"];
    assert!(root.attributes().all(|a| allowed.contains(&a.name())), "<testsuites> attributes: {root:?}");
    let time = |n: roxmltree::Node| {
        let t = n.attribute("time").unwrap_or("0");
        assert!(t.chars().all(|c| c.is_ascii_digit() || c == '.'), "time={t:?} on <{}>", n.tag_name().name());
    };
    time(root);
    let mut suites = Vec::new();
    let mut sums = (0, 0, 0, 0);
    for suite in elements(root) {
        assert_eq!(suite.tag_name().name(), "testsuite");
        let name: String = attr(suite, "name");
        time(suite);
        let (mut tests, mut failures, mut errors, mut skipped) = (0, 0, 0, 0);
        for child in elements(suite) {
            match child.tag_name().name() {
                "properties" => assert!(elements(child).all(|p| p.tag_name().name() == "property"
                    && p.attribute("name").is_some()
                    && p.attribute("value").is_some())),
                "system-out" | "system-err" => {}
                "testcase" => {
                    tests += 1;
                    assert!(child.attribute("name").is_some() && child.attribute("classname").is_some());
                    if child.attribute("time").is_some() {
                        let _: f64 = attr(child, "time");
                    }
                    for outcome in elements(child) {
                        match outcome.tag_name().name() {
                            "failure" => failures += 1,
                            "error" => errors += 1,
                            "skipped" => skipped += 1,
                            "system-out" | "system-err" => {}
                            other => panic!("<{other}> inside <testcase>"),
                        }
                    }
                }
                other => panic!("<{other}> inside <testsuite>"),
            }
        }
        let counted = (attr(suite, "tests"), attr(suite, "failures"), attr(suite, "errors"), attr(suite, "skipped"));
        assert_eq!(counted, (tests, failures, errors, skipped), "suite {name}: attributes disagree with its cases");
        sums = (sums.0 + tests, sums.1 + failures, sums.2 + errors, sums.3 + skipped);
        suites.push((name, tests, failures, errors, skipped));
    }
    let root_counts = (attr(root, "tests"), attr(root, "failures"), attr(root, "errors"));
    assert_eq!(root_counts, (sums.0, sums.1, sums.2), "<testsuites> totals disagree with its suites");
    suites
}

#[test]
fn junit_all_cases_shows_the_failure_and_the_skip_with_the_right_counts() {
    let (dir, _) = mutated_kernels("x86_64", "md5.S", X86_ROTATE.0, X86_ROTATE.1);
    let xml_path = dir.path().join("lab-junit.xml");
    let out = ["--format", "junit", "--junit-cases", "all", "--output", xml_path.to_str().unwrap()];
    let (code, stdout, stderr) = broken_run(dir.path(), &out);
    assert_eq!(code, 1, "{stdout}{stderr}");
    // With --output the human table still goes to stdout, without colour on a pipe.
    let n = rfc1321_cases();
    let verdict = format!("{n} passed, {} failed, 0 skipped, 1 combination not applicable (seed 7", 2 * n);
    assert!(stdout.contains(&verdict), "{stdout}");
    assert!(!stdout.contains('\x1b'), "colour on a pipe: {stdout:?}");

    let xml = std::fs::read_to_string(&xml_path).expect("JUnit file written");
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let suites = check_junit_schema(&doc);
    assert_eq!(
        suites,
        vec![
            ("aarch64 on unicorn".to_string(), n, 0, 0, 0),
            ("x86_64 on unicorn".to_string(), n, n, 0, 0),
            ("x86_64 on native".to_string(), n, n, 0, 0),
            ("not applicable".to_string(), 0, 0, 0, 0),
        ]
    );

    let case = |classname: &str, name: &str| {
        doc.descendants()
            .find(|n| {
                n.has_tag_name("testcase")
                    && n.attribute("classname") == Some(classname)
                    && n.attribute("name") == Some(name)
            })
            .unwrap_or_else(|| panic!("no testcase {classname} / {name}"))
    };
    let failed = case("x86_64.unicorn.md5.rfc1321", "RFC1321 A.5 #1: MD5(\"\") [guarded]");
    let failure = elements(failed).find(|n| n.has_tag_name("failure")).expect("<failure>");
    assert_eq!(failure.attribute("type"), Some("value"));
    let message = failure.attribute("message").unwrap();
    assert!(message.starts_with("md5_implCompress(buffered block 0): state expected [d98c1dd4 04b2008f"), "{message}");
    let body = failure.text().unwrap_or_default();
    assert!(body.contains("[value] md5_implCompress(buffered block 0): state expected"), "{body}");
    let replay = format!(
        "replay: lab run --seed 7 --kernels-dir {} --no-bundled --vectors {} --variant '=x86_64' --backend unicorn --kernel md5 \
         --set '=rfc1321' --case '=RFC1321 A.5 #1: MD5(\"\") [guarded]'",
        dir.path().display(),
        paths::vectors_dir().join("md5/rfc1321.json").display()
    );
    assert!(body.contains(&replay), "{replay}\n{body}");

    assert_not_applicable(&doc);

    let passed = case("aarch64.unicorn.md5.rfc1321", "RFC1321 A.5 #3: MD5(\"abc\") @+2");
    assert_eq!(elements(passed).count(), 0, "a passed case has no outcome element");
}

#[test]
fn default_junit_has_one_case_per_row_and_one_skip_per_cell() {
    let (dir, _) = mutated_kernels("x86_64", "md5.S", X86_ROTATE.0, X86_ROTATE.1);
    let (code, xml, stderr) = broken_run(dir.path(), &["--format", "junit"]);
    assert_eq!(code, 1, "{stderr}");
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let suites = check_junit_schema(&doc);
    assert_eq!(
        suites,
        vec![
            ("aarch64 on unicorn".to_string(), 1, 0, 0, 0),
            ("x86_64 on unicorn".to_string(), 1, 1, 0, 0),
            ("x86_64 on native".to_string(), 1, 1, 0, 0),
            ("not applicable".to_string(), 0, 0, 0, 0),
        ]
    );
    let cases: Vec<(&str, &str)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| (n.attribute("classname").unwrap(), n.attribute("name").unwrap()))
        .collect();
    assert_eq!(
        cases,
        [("aarch64.unicorn.md5", "rfc1321"), ("x86_64.unicorn.md5", "rfc1321"), ("x86_64.native.md5", "rfc1321")]
    );
    assert_not_applicable(&doc);
    let n = rfc1321_cases();
    let failure = doc.descendants().find(|n| n.has_tag_name("failure")).expect("<failure>");
    let message = failure.attribute("message").unwrap();
    assert!(
        message.starts_with(&format!("{n} of {n} cases failed; first: RFC1321 A.5 #1: MD5(\"\") [guarded]: ")),
        "{message}"
    );
    let body = failure.text().unwrap();
    // The failed cases are listed up to the cap, each with its findings and replay, then counted.
    let listed = n.min(kernel_lab::reporters::FAILURES_LISTED);
    assert_eq!(body.matches("\n  replay: lab run --seed 7 ").count(), listed, "{body}");
    if n > listed {
        assert!(body.contains(&format!("... and {} more failed cases", n - listed)), "{body}");
    }
    assert!(body.contains("RFC1321 A.5 #7: MD5(\"1234567890") && body.contains("[value] md5_implCompress"), "{body}");
    let time: f64 = attr(failure.parent().unwrap(), "time");
    assert!(time > 0.0, "the row's wall time");
}

/// The `replay:` line printed under `FAILED {head}` in a human report, split into arguments.
fn replay_args(human: &str, head: &str) -> Vec<String> {
    let at = human.find(&format!("FAILED {head}")).unwrap_or_else(|| panic!("no FAILED {head}: {human}"));
    let line = human[at..].lines().nth(1).unwrap().trim().strip_prefix("replay: lab ").expect("a replay line");
    shlex::split(line).expect("shell words")
}

/// (case name, finding texts) of every failed case of the rows of `json`.
fn failed_cases(json: &str) -> Vec<(String, Vec<String>)> {
    let doc: serde_json::Value = serde_json::from_str(json).expect("JSON");
    let mut v = Vec::new();
    for row in doc["rows"].as_array().unwrap() {
        for c in row["cases"].as_array().unwrap().iter().filter(|c| c["outcome"] == "failed") {
            let texts = c["findings"].as_array().unwrap().iter().map(|f| f["text"].as_str().unwrap().to_string());
            v.push((c["name"].as_str().unwrap().to_string(), texts.collect()));
        }
    }
    v
}

#[test]
fn the_replay_line_reproduces_the_findings_and_case_narrows_them() {
    let (dir, _) = mutated_kernels("x86_64", "md5.S", X86_ROTATE.0, X86_ROTATE.1);
    let (code, human, _) = broken_run(dir.path(), &[]);
    assert_eq!(code, 1, "{human}");
    let (_, json, _) = broken_run(dir.path(), &["--format", "json"]);
    let unicorn_rows: Vec<_> = failed_cases(&json).into_iter().take(rfc1321_cases()).collect();

    let args = replay_args(&human, "x86_64 on unicorn, md5 / rfc1321:");
    let json_args: Vec<&str> = args.iter().map(String::as_str).chain(["--format", "json"]).collect();
    let (code, replayed, stderr) = lab(&json_args, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(failed_cases(&replayed), unicorn_rows, "the replay finds exactly what the run found");

    let one = &unicorn_rows.iter().find(|(n, _)| n.contains("#2") && n.ends_with(" [guarded]")).expect("#2").0;
    let (code, narrowed, stderr) = lab(&[&json_args[..], &["--case", one]].concat(), &[]);
    assert_eq!(code, 1, "{stderr}");
    let vector = one.strip_suffix(" [guarded]").unwrap_or(one);
    let expect: Vec<_> = unicorn_rows
        .iter()
        .filter(|(n, _)| n.strip_prefix(vector).is_some_and(|r| r.starts_with(' ')))
        .cloned()
        .collect();
    assert_eq!(failed_cases(&narrowed), expect, "--case runs that vector's cases, drawn as in the full run");

    let (code, _, stderr) = lab(&[&json_args[..], &["--case", "no such case"]].concat(), &[]);
    assert_eq!(code, 2, "a name that selects nothing is an error, not a pass");
    assert!(stderr.contains("--case `no such case`: no vector or case matches (nearest: "), "{stderr}");
}

#[test]
fn fail_fast_skips_what_follows_the_first_failure() {
    let (dir, _) = mutated_kernels("x86_64", "md5.S", X86_ROTATE.0, X86_ROTATE.1);
    let (code, json, stderr) = broken_run(dir.path(), &["--fail-fast", "--format", "json"]);
    assert_eq!(code, 1, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let native = doc["rows"].as_array().unwrap().iter().find(|r| r["variant"] == "x86_64" && r["backend"] == "native");
    let native = native.expect("the native row is reported");
    assert_eq!((native["failed"].as_u64(), native["skipped"].as_u64()), (Some(0), Some(rfc1321_cases() as u64)));
    assert_eq!(native["skip_reason"], kernel_lab::run::FAIL_FAST_SKIP);
}

/// The JSON report without its wall times (`elapsed_s`, per-case `time_s`).
fn without_times(json: &str) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.retain(|k, _| !k.ends_with("_s") && k != "time");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut doc: serde_json::Value = serde_json::from_str(json).expect("one JSON document");
    strip(&mut doc);
    doc
}

#[test]
fn the_report_is_the_same_for_any_number_of_jobs() {
    let (dir, _) = mutated_kernels("x86_64", "md5.S", X86_ROTATE.0, X86_ROTATE.1);
    for extra in [&[][..], &["--fail-fast"][..]] {
        let run = |jobs: &str| {
            let args: Vec<&str> = ["--format", "json", "--jobs", jobs].iter().chain(extra).copied().collect();
            let (code, json, stderr) = broken_run(dir.path(), &args);
            assert_eq!(code, 1, "{stderr}");
            without_times(&json)
        };
        let one = run("1");
        assert!(one["rows"].as_array().is_some_and(|r| r.len() == 3), "aarch64 on native has no row: {one}");
        assert_eq!(one, run("4"), "{extra:?}: --jobs 1 and --jobs 4 differ");
    }
}

#[test]
fn json_report_has_schema_version_seed_and_every_outcome() {
    let (dir, _) = mutated_kernels("x86_64", "md5.S", X86_ROTATE.0, X86_ROTATE.1);
    let (code, stdout, stderr) = broken_run(dir.path(), &["--format", "json"]);
    assert_eq!(code, 1, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is one JSON document");
    assert_eq!(doc["schema_version"], 2);
    assert_eq!(doc["interrupted"], serde_json::Value::Null);
    assert_eq!(doc["seed"], "7");
    assert_eq!(
        (doc["command"].as_str(), doc["status"].as_str(), doc["exit_code"].as_i64()),
        (Some("run"), Some("failed"), Some(1))
    );
    let n = rfc1321_cases() as u64;
    let totals = serde_json::json!({"passed": n, "failed": 2 * n, "skipped": 0, "disagreed": 0, "not_applicable": 1});
    assert_eq!(doc["totals"], totals);
    assert!(doc["elapsed_s"].as_f64().unwrap() > 0.0);

    let rows = doc["rows"].as_array().unwrap();
    let cells: Vec<(&str, &str, u64, u64, u64)> = rows
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            (r["variant"].as_str().unwrap(), r["backend"].as_str().unwrap(), n("passed"), n("failed"), n("skipped"))
        })
        .collect();
    assert_eq!(
        cells,
        vec![("aarch64", "unicorn", n, 0, 0), ("x86_64", "unicorn", 0, n, 0), ("x86_64", "native", 0, n, 0)]
    );
    for r in rows {
        let cases = r["cases"].as_array().unwrap();
        assert_eq!(cases.len() as u64, n, "every case is listed: {r}");
        let outcome = match (r["passed"].as_u64(), r["failed"].as_u64()) {
            (Some(p), _) if p == n => "passed",
            (_, Some(f)) if f == n => "failed",
            _ => panic!("a row neither passed nor failed whole: {r}"),
        };
        assert!(cases.iter().all(|c| c["outcome"] == outcome), "{r}");
    }
    let failed = &rows[1]["cases"][0];
    assert_eq!(failed["name"], "RFC1321 A.5 #1: MD5(\"\") [guarded]");
    assert_eq!(failed["findings"][0]["class"], "value");
    assert!(failed["findings"][0]["text"].as_str().unwrap().contains("state expected [d98c1dd4"), "{failed}");
    let na = &doc["not_applicable"];
    assert_eq!((na[0]["variant"].as_str(), na[0]["backend"].as_str()), (Some("aarch64"), Some("native")), "{na}");
    assert!(na[0]["reason"].as_str().unwrap().starts_with(SKIP_REASON), "{na}");
    assert_eq!(na.as_array().map(Vec::len), Some(1), "{na}");
}

#[test]
fn a_broken_vector_file_is_an_error_case_in_junit() {
    let (_dir, file) = crate::common::vector_file_with_a_typo();
    let args =
        ["run", "--variant", "=x86_64", "--backend", "unicorn", "--no-bundled", "--vectors", file.to_str().unwrap()];
    let (code, xml, stderr) = lab(&[&args[..], &["--format", "junit"]].concat(), &[]);
    assert_eq!(code, 2, "{stderr}");
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML on stdout");
    let suites = check_junit_schema(&doc);
    // The valid entry's row (its guarded case, its misaligned twin, its offset case) is one
    // test case.
    assert_eq!(suites, vec![("x86_64 on unicorn".to_string(), 1, 0, 0, 0), ("set-up".to_string(), 1, 0, 1, 0)]);
    let error = doc.descendants().find(|n| n.has_tag_name("error")).unwrap();
    assert!(error.attribute("message").unwrap().contains("entry 1 (\"typo\"): field `msg_hex`"), "{error:?}");
}

#[test]
fn human_colour_follows_clicolor_force_and_no_color() {
    // A rule about the output, not coverage: one small set.
    let args =
        ["run", "--variant", "=x86_64", "--backend", "unicorn", "--kernel", "md5", "--seed", "7", "--set", "rfc1321"];
    let (code, plain, _) = lab(&args, &[]);
    assert_eq!(code, 0, "{plain}");
    assert!(!plain.contains('\x1b'), "no colour on a pipe");
    let (_, forced, _) = lab(&args, &[("CLICOLOR_FORCE", "1")]);
    assert!(forced.contains("\x1b[1m\x1b[32m") || forced.contains("\x1b[32m"), "green verdict when forced: {forced:?}");
    let (_, no_color, _) = lab(&args, &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]);
    assert!(!no_color.contains('\x1b'), "NO_COLOR wins: {no_color:?}");
}

#[test]
fn image_scan_findings_reach_json_and_junit() {
    let (dir, _) = crate::common::fixture_kernels("riscv64", "md5.S", "ror.S");
    let args = ["run", "--kernels-dir", dir.path().to_str().unwrap(), "--arch", "riscv64", "--no-zbb"];
    let args = [&args[..], &["--backend", "unicorn", "--kernel", "md5", "--no-bundled"]].concat();
    let rfc1321 = paths::vectors_dir().join("md5/rfc1321.json");
    let args = [&args[..], &["--vectors", rfc1321.to_str().unwrap()]].concat();
    let (code, json, stderr) = lab(&[&args[..], &["--format", "json"]].concat(), &[]);
    assert_eq!(code, 1, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let f = &doc["image_findings"][0];
    assert_eq!((f["variant"].as_str(), f["class"].as_str()), (Some("riscv64"), Some("isa")), "{doc}");
    assert!(f["text"].as_str().unwrap().contains("ror"), "{f}");
    let (_, xml, _) = lab(&[&args[..], &["--format", "junit"]].concat(), &[]);
    let doc = roxmltree::Document::parse(&xml).expect("XML");
    let suites = check_junit_schema(&doc);
    assert!(
        suites.iter().any(|(name, tests, failures, ..)| name == "images" && *tests >= 1 && tests == failures),
        "{suites:?}"
    );
}

/// The JUnit report's replay line is built by the same builder as the human one
/// (lab/src/replay.rs): it keeps `--flush start`, `--kernels-dir` and `--vectors`, and run as
/// printed it finds exactly the failures of the run it came from.
#[test]
fn the_junit_replay_line_keeps_every_option_and_reproduces_the_run() {
    let (dir, _) = mutated_kernels("x86_64", "md5.S", X86_ROTATE.0, X86_ROTATE.1);
    let flush = ["--flush", "start"];
    let (code, xml, stderr) = broken_run(dir.path(), &[&flush[..], &["--format", "junit"]].concat());
    assert_eq!(code, 1, "{stderr}");
    let doc = roxmltree::Document::parse(&xml).expect("XML");
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("classname") == Some("x86_64.unicorn.md5"))
        .and_then(|c| c.children().find(|n| n.has_tag_name("failure")))
        .unwrap_or_else(|| panic!("no failed x86_64 unicorn row: {xml}"));
    let body = failure.text().unwrap_or_default();
    let line = body.lines().next().and_then(|l| l.strip_prefix("replay: lab ")).expect("a replay line first");
    let kernels = format!("--kernels-dir {}", dir.path().display());
    for option in ["--flush start", &kernels, "--no-bundled --vectors", "--backend unicorn", "--set '=rfc1321'"] {
        assert!(line.contains(option), "`{option}` missing from the replay line: {line}");
    }
    let args = shlex::split(line).expect("shell words");
    let json_args: Vec<&str> = args.iter().map(String::as_str).chain(["--format", "json"]).collect();
    let (code, replayed, stderr) = lab(&json_args, &[]);
    assert_eq!(code, 1, "{stderr}");
    let (_, json, _) = broken_run(dir.path(), &[&flush[..], &["--format", "json"]].concat());
    let unicorn_rows: Vec<_> = failed_cases(&json).into_iter().take(rfc1321_cases()).collect();
    assert_eq!(failed_cases(&replayed), unicorn_rows, "the replay finds exactly what the run found");
}

/// `--also-report`: one run writes every format, and they tell the same story as the primary
/// report (same counts, same failing rows); a bad FORMAT=FILE is refused before anything runs.
#[test]
fn one_run_writes_junit_sarif_and_json_with_the_same_verdicts() {
    let (dir, _) = mutated_kernels("x86_64", "md5.S", X86_ROTATE.0, X86_ROTATE.1);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let file = |name: &str| out.join(name).to_str().unwrap().to_string();
    let (junit, sarif, json) = (file("lab.xml"), file("lab.sarif"), file("lab.json"));
    let also_sarif = format!("sarif={sarif}");
    let also_json = format!("json={json}");
    let extra = ["--format", "junit", "--output", &junit, "--also-report", &also_sarif, "--also-report", &also_json];
    let (code, _, stderr) = broken_run(dir.path(), &extra);
    assert_eq!(code, 1, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let failed = report["totals"]["failed"].as_u64().unwrap();
    assert!(failed > 0, "{report}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let failing_rows = doc.descendants().filter(|n| n.has_tag_name("failure")).count();
    assert_eq!(failing_rows, 2, "x86_64 on unicorn and native fail: {xml}");
    let sarif: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let errors = results.iter().filter(|r| r["level"] == "error").count() as u64;
    assert_eq!(errors, failed, "one SARIF error per failed case");

    let (code, _, stderr) = broken_run(dir.path(), &["--also-report", "xml=lab.xml"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("`xml` is not a report format (formats: human, json, junit, sarif)"), "{stderr}");
}

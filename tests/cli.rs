//! The `lab` binary as a user runs it: exit statuses and what it prints.

use kernel_lab::variant::VARIANTS;
use std::process::Command;

fn lab(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exit status"), text)
}

#[test]
fn run_riscv64_without_zbb_passes_on_unicorn_and_qemu() {
    // The selection is the point (tests/matrix.rs runs every bundled vector): one small set.
    let (code, out) =
        lab(&["run", "--arch", "riscv64", "--no-zbb", "--kernel", "md5", "--seed", "3", "--set", "rfc1321"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("riscv64      unicorn  md5") && out.contains("riscv64      qemu     md5"), "{out}");
    assert!(!out.contains("riscv64+zbb"), "--no-zbb must leave the Zbb variant out: {out}");
    assert!(out.contains("NOT APPLICABLE riscv64 on native: native runs only the host's architecture"), "{out}");
}

#[test]
fn broken_hex_in_a_vector_file_exits_2_naming_file_entry_and_field() {
    let (_dir, file) = crate::common::vector_file_with_a_typo();
    let (code, out) = lab(&[
        "run",
        "--variant",
        "=x86_64",
        "--backend",
        "unicorn",
        "--no-bundled",
        "--vectors",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("mine.json: entry 1 (\"typo\"): field `msg_hex`: invalid hex"), "{out}");
    // The valid entry of the same file still ran (three cases: inputs flush, the guarded
    // misaligned twin, and packed at an offset).
    assert!(out.contains("3 passed, 0 failed"), "{out}");
}

#[test]
fn usage_errors_exit_2_and_list_names_every_variant() {
    assert_eq!(lab(&["run", "--arch", "sparc"]).0, 2);
    assert_eq!(lab(&["run", "--arch", "aarch64", "--zbb"]).0, 2);
    let (code, out) = lab(&["list"]);
    assert_eq!(code, 0);
    for v in VARIANTS {
        assert!(out.contains(v.name), "{out}");
    }
    // Unicorn runs every scalar variant (Zbb is emulated), no vector row; native runs only the
    // host's architecture.
    assert!(out.contains("no: native runs only the host's architecture"), "{out}");
    let unicorn_no = out.lines().filter(|l| l.trim_start().starts_with("unicorn  no")).count();
    assert_eq!(unicorn_no, 6, "RVV (2 rows), AVX2, AVX-512, AVX-512 IFMA, SVE2: {out}");
    assert!(out.contains("unicorn  no: unicorn cannot provide sve2 (Unicorn 2.1.5 has no SVE)"), "{out}");
    assert!(out.contains("qemu     no: qemu cannot provide avx512f"), "{out}");
    assert_eq!(out.matches("Unicorn 2.1.5 (QEMU 5.0.1) has no RVV 1.0").count(), 2, "{out}");
    assert_eq!(out.matches("qemu     yes, at VLEN 128, 256, 512, 1024 (--vlen narrows)").count(), 2, "{out}");
    assert!(out.contains("(NEON is baseline)"), "{out}");
}

#[test]
fn every_command_help_shows_an_example() {
    let (code, top) = lab(&["--help"]);
    assert_eq!(code, 0);
    assert!(top.contains("Examples:"), "{top}");
    // The commands `lab --help` lists, so a new command is covered as soon as it exists.
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.contains(&"run") && commands.contains(&"doctor"), "{top}");
    for c in commands {
        let (code, help) = lab(&[c, "--help"]);
        assert_eq!(code, 0, "{c}: {help}");
        assert!(help.contains(&format!("\n  lab {c}")), "`lab {c} --help` shows no example: {help}");
    }
}

#[test]
fn lab_run_reports_isa_and_memory_findings_in_its_normal_output() {
    let (dir, _) = crate::common::fixture_kernels("riscv64", "md5.S", "ror.S");
    let kernels = dir.path().to_str().unwrap();
    // One small published set each: a kernel that faults on every call needs no sweep to show it.
    let md5_rfc = format!("{}/vectors/md5/rfc1321.json", env!("CARGO_MANIFEST_DIR"));
    let poly_rfc = format!("{}/vectors/poly1305/rfc8439.json", env!("CARGO_MANIFEST_DIR"));
    let small = ["--no-bundled", "--vectors"];
    let args = ["run", "--kernels-dir", kernels, "--arch", "riscv64", "--no-zbb", "--kernel", "md5"];
    let (code, out) = lab(&[&args[..], &small, &[md5_rfc.as_str()]].concat());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAILED riscv64 image (isa): `ror t0, t0, t1` at md5_implCompress (0x"), "{out}");
    assert!(out.contains("illegal instruction at md5_implCompress (pc 0x"), "{out}");
    let (dir, _) = crate::common::fixture_kernels("x86_64", "poly1305.S", "underread.S");
    let kernels = dir.path().to_str().unwrap();
    let args = ["run", "--kernels-dir", kernels, "--variant", "=x86_64", "--kernel", "poly1305", "--flush", "start"];
    let (code, out) = lab(&[&args[..], &small, &[poly_rfc.as_str()]].concat());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("1 byte before the start of input"), "{out}");
    assert_eq!(lab(&["run", "--flush", "middle"]).0, 2);
}

#[test]
fn fuzz_writes_json_on_stdout_and_its_human_lines_on_stderr() {
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args([
            "fuzz",
            "--variant",
            "=x86_64",
            "--backend",
            "unicorn",
            "--cases",
            "64",
            "--seed",
            "5",
            "--format",
            "json",
        ])
        .output()
        .expect("run lab");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(doc["command"], "fuzz");
    assert_eq!(doc["seed"], "5");
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "md5 and poly1305 on x86_64/unicorn");
    assert!(rows.iter().all(|r| r["set"] == "fuzz" && r["passed"] == 1), "{doc}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("64 cases"), "human lines on stderr");
}

#[test]
fn a_closed_stdout_pipe_is_quiet_and_keeps_the_exit_status() {
    // `lab list | head -0`: the reader is gone before lab writes (EPIPE, since Rust ignores
    // SIGPIPE); lab must neither panic (exit 101) nor complain.
    let mut child = Command::new(env!("CARGO_BIN_EXE_lab"))
        .arg("list")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run lab");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait for lab");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn selections_take_comma_lists_and_repeated_options_alike() {
    let rfc1321 = kernel_lab::paths::vectors_dir().join("md5/rfc1321.json");
    let rows = |args: &[&str]| {
        let mut all = vec!["run", "--kernel", "md5", "--no-bundled", "--seed", "1", "--format", "json", "--vectors"];
        all.push(rfc1321.to_str().unwrap());
        all.extend_from_slice(args);
        let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(&all).output().expect("run lab");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let mut cells: Vec<String> = doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["passed"].as_u64() > Some(0))
            .map(|r| format!("{} {}", r["variant"].as_str().unwrap(), r["backend"].as_str().unwrap()))
            .collect();
        cells.sort();
        cells
    };
    let comma = rows(&["--arch", "aarch64,x86_64", "--backend", "unicorn,qemu"]);
    // `--arch` selects every row of the architecture; qemu 7.2 runs SVE2 (a row per SVE vector
    // length: 128, 256, 512) and AVX2, not AVX-512.
    let sve = "aarch64+sve2 qemu";
    let want = ["aarch64 qemu", "aarch64 unicorn", sve, sve, sve, "x86_64 qemu", "x86_64 unicorn", "x86_64+avx2 qemu"];
    assert_eq!(comma, want);
    assert_eq!(rows(&["--arch", "aarch64", "--arch", "x86_64", "--backend", "unicorn", "--backend", "qemu"]), comma);
}

#[test]
fn list_speaks_json_with_the_same_format_option() {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(["list", "--format", "json"]).output().expect("run lab");
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let names: Vec<&str> = doc["variants"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, VARIANTS.map(|v| v.name));
    let aarch64_native = &doc["variants"][4]["backends"][2];
    assert_eq!((aarch64_native["backend"].as_str(), aarch64_native["runs"].as_bool()), (Some("native"), Some(false)));
}

/// `lab fuzz` exits with the status its JSON report states ([`kernel_lab::exit::ExitCode`]):
/// a campaign where no target could exist (native on another architecture: not applicable,
/// nothing skipped) tested nothing, so it is a set-up error (2) like a `lab run` where nothing
/// ran, not a pass.
#[test]
fn fuzz_exits_with_the_status_its_json_report_states() {
    let foreign = if std::env::consts::ARCH == "riscv64" { "aarch64" } else { "riscv64" };
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["fuzz", "--backend", "native", "--arch", foreign, "--cases", "4", "--format", "json"])
        .output()
        .expect("run lab");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let combos = kernel_lab::variant::VARIANTS.iter().filter(|v| v.arch.name() == foreign).count() as u64;
    let totals = &doc["totals"];
    assert_eq!((doc["status"].as_str(), totals["skipped"].as_u64()), (Some("setup-error"), Some(0)), "{doc}");
    assert_eq!(totals["not_applicable"].as_u64(), Some(combos), "one per variant × backend, not per kernel: {doc}");
    assert_eq!(doc["rows"].as_array().map(Vec::len), Some(0), "{doc}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("native   md5       not applicable: native runs only"));
    assert_eq!(out.status.code(), doc["exit_code"].as_i64().map(|c| c as i32));
    assert_eq!(out.status.code(), Some(2));
}

/// A kernel source that does not assemble: exit 2, the assembler's message under one "building
/// <variant>:" (not two), and "nothing ran" blames the set-up, not the vector files.
#[test]
fn a_kernel_that_does_not_assemble_exits_2_naming_the_build() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("riscv64")).expect("mkdir");
    std::fs::write(dir.path().join("riscv64/md5.S"), ".globl md5_implCompress\nmd5_implCompress:\n  addi a0, a0,\n")
        .expect("write");
    let kernels = dir.path().to_str().unwrap();
    let (code, out) = lab(&["run", "--kernels-dir", kernels, "--arch", "riscv64", "--no-zbb", "--kernel", "md5"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("set-up error: building riscv64: `"), "{out}");
    assert!(out.contains("md5.S:3:15: error: unknown operand"), "{out}");
    assert!(!out.contains("riscv64: building riscv64"), "{out}");
    assert!(out.contains("nothing ran: no kernel could be set up"), "{out}");
    assert!(!out.contains("variant      backend"), "a table with no rows: {out}");
}

/// `lab run` of the x86_64 MD5 kernel on Unicorn (seed 3) with `args`, as JSON: the exit status,
/// the report (`Null` when stdout is no JSON) and stderr.
fn x86_md5_json(args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["run", "--variant", "=x86_64", "--backend", "unicorn", "--kernel", "md5", "--seed", "3"])
        .args(["--format", "json"])
        .args(args)
        .output()
        .expect("run lab");
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().expect("exit status"), doc, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The sets and the vector names (case names without their layout suffix) a JSON report ran,
/// each once, in order.
fn sets_and_vectors(doc: &serde_json::Value) -> (Vec<String>, Vec<String>) {
    let (mut sets, mut vectors) = (Vec::new(), Vec::new());
    for row in doc["rows"].as_array().expect("rows") {
        let set = row["set"].as_str().unwrap().to_string();
        if !sets.contains(&set) {
            sets.push(set);
        }
        for case in row["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let vector = name.split(" [").next().unwrap().split(" @+").next().unwrap().to_string();
            if !vectors.contains(&vector) {
                vectors.push(vector);
            }
        }
    }
    (sets, vectors)
}

/// Filters match substrings (the `--help` example `--case 'MD5("abc")'`), `=NAME` exactly and
/// `*`/`?` as globs over the whole name.
#[test]
fn filters_match_substrings_exact_names_and_globs() {
    let ran = |args: &[&str]| {
        let (code, doc, stderr) = x86_md5_json(args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        sets_and_vectors(&doc)
    };
    let abc = "RFC1321 A.5 #3: MD5(\"abc\")";
    assert_eq!(ran(&["--set", "rfc1321", "--case", "MD5(\"abc\")"]), (vec!["rfc1321".into()], vec![abc.into()]));
    assert_eq!(ran(&["--set", "=rfc1321", "--case", &format!("={abc}")]).1, [abc]);
    let (sets, vectors) = ran(&["--set", "rfc13*", "--case", "RFC1321 A.5 #?: MD5(\"a\")"]);
    assert_eq!((sets, vectors), (vec!["rfc1321".into()], vec!["RFC1321 A.5 #2: MD5(\"a\")".into()]));
    // A substring selects every set containing it; the exact form only the one.
    let (mut sets, _) = ran(&["--set", "openssl", "--case", "MD5"]);
    sets.sort();
    assert_eq!(sets, ["openssl", "openssl-misaligned"]);
    assert_eq!(ran(&["--set", "=openssl", "--case", "MD5"]).0, ["openssl"]);
    let (_, vectors) = ran(&["--set", "=openssl", "--case", "*MD5 test #?"]);
    assert_eq!(vectors.len(), 7, "evpmd_md.txt MD5 test #1 to #7, not the MD5-SHA1 tests: {vectors:?}");
}

/// A filter pattern that matches nothing exits 2 before anything runs, naming the filter and the
/// nearest names, not "no kernel could be set up".
#[test]
fn a_filter_that_matches_nothing_exits_2_naming_it_and_the_nearest_names() {
    let (code, doc, stderr) = x86_md5_json(&["--set", "rfc1321", "--case", "MD5(\"abd\")"]);
    assert_eq!((code, doc), (2, serde_json::Value::Null), "{stderr}");
    assert!(
        stderr.contains(
            "lab run: --case `MD5(\"abd\")`: no vector or case matches (nearest: `RFC1321 A.5 #3: MD5(\"abc\")`"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("no kernel could be set up") && !stderr.contains("building"), "{stderr}");
    let (code, _, stderr) = x86_md5_json(&["--set", "=openssl-misalign"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--set `=openssl-misalign`: no vector set matches (nearest: `openssl-misaligned`"),
        "{stderr}"
    );
    let (code, out) = lab(&["run", "--variant", "riscv65", "--check-args"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--variant `riscv65`: no variant matches (nearest: `riscv64`"), "{out}");
    let (code, out) = lab(&["run", "--kernel", "md6", "--check-args"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--kernel `md6`: no kernel matches (nearest: `md5`"), "{out}");
}

/// A mistyped `--vectors` path exits 2 at once, naming it, before any kernel is built or run.
#[test]
fn a_mistyped_vectors_path_exits_2_before_anything_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("my-vectros.json");
    let started = std::time::Instant::now();
    let (code, out) = lab(&["run", "--vectors", missing.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(&format!("lab run: --vectors {}: no such file or folder", missing.display())), "{out}");
    assert!(!out.contains(" passed, ") && !out.contains("variant "), "nothing may run: {out}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}", started.elapsed());
    let (code, out) = lab(&["run", "--kernels-dir", missing.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(&format!("--kernels-dir {}: no such file or folder", missing.display())), "{out}");
}

/// A report written with `--output` gets the mode the umask gives any new file: 0644 under
/// umask 022 (a temporary file's 0600 before).
#[test]
fn a_report_file_gets_the_mode_of_the_umask() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("lab.json");
    let rfc1321 = kernel_lab::paths::vectors_dir().join("md5/rfc1321.json");
    let script = "umask 022 && exec \"$@\"";
    let out = Command::new("sh")
        .args(["-c", script, "sh", env!("CARGO_BIN_EXE_lab"), "run", "--variant", "=x86_64", "--backend", "unicorn"])
        .args(["--kernel", "md5", "--no-bundled", "--vectors", rfc1321.to_str().unwrap(), "--format", "json"])
        .args(["--output", report.to_str().unwrap()])
        .output()
        .expect("run lab");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let mode = std::fs::metadata(&report).expect("report written").permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "mode {mode:o}");
}

/// A default run restricted to riscv64 (no Zbb) on Unicorn and native, on a host of another
/// architecture: native on riscv64 cannot exist, so it is listed once as not applicable with
/// its reason and no case is skipped, in the human table and in the JSON report.
#[test]
fn native_on_another_architecture_is_not_applicable_and_nothing_is_skipped() {
    if std::env::consts::ARCH == "riscv64" {
        return; // native runs riscv64 there
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("lab.json");
    let args = ["run", "--arch", "riscv64", "--no-zbb", "--backend", "unicorn,native", "--seed", "3"];
    let (code, human) = lab(&[&args[..], &["--format", "json", "--output", json.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{human}");
    assert!(human.contains(" failed, 0 skipped, 1 combination not applicable (seed 3"), "{human}");
    let reason = format!("native runs only the host's architecture ({}), not riscv64", std::env::consts::ARCH);
    assert!(human.contains(&format!("\nNOT APPLICABLE riscv64 on native: {reason}\n")), "{human}");
    assert_eq!(human.matches("(not applicable)").count(), 1, "one table line: {human}");
    assert!(!human.contains("SKIPPED"), "{human}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let totals = &doc["totals"];
    assert_eq!((totals["skipped"].as_u64(), totals["not_applicable"].as_u64()), (Some(0), Some(1)), "{totals}");
    assert!(totals["passed"].as_u64() > Some(10_000), "every bundled case ran on Unicorn: {totals}");
    assert_eq!(
        doc["not_applicable"],
        serde_json::json!([{ "variant": "riscv64", "backend": "native", "reason": reason }])
    );
    assert!(doc["rows"].as_array().unwrap().iter().all(|r| r["backend"] == "unicorn"), "no native row");
}

/// The figures README and `lab run --help` give for a full run are what a full run does on a
/// host like the one they were measured on (x86_64 with AVX-512 IFMA: every native row runs):
/// its cases within 2% of README's and of the help's, its JUnit test cases within 10%.
#[test]
fn readme_and_help_figures_of_a_full_run_are_true() {
    if !(cfg!(target_arch = "x86_64")
        && std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains(" avx512ifma")))
    {
        eprintln!("skipped: the figures are for an x86_64 host with AVX-512 IFMA; this host runs fewer native rows");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("full.json");
    let junit = dir.path().join("full.xml");
    let also = format!("junit={}", junit.display());
    let (code, out) =
        lab(&["run", "--seed", "1", "--format", "json", "--output", json.to_str().unwrap(), "--also-report", &also]);
    assert_eq!(code, 0, "{out}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cases = doc["totals"]["passed"].as_u64().unwrap();
    assert_eq!(doc["totals"]["skipped"], 0, "a healthy full run skips nothing");
    let testcases = std::fs::read_to_string(&junit).unwrap().matches("<testcase").count() as u64;
    let number = |text: &str, before: &str, after: &str| -> u64 {
        let at = text.find(before).unwrap_or_else(|| panic!("{before:?} not found")) + before.len();
        let digits: String = text[at..].split(after).next().unwrap().chars().filter(char::is_ascii_digit).collect();
        digits.parse().unwrap_or_else(|_| panic!("no number after {before:?}"))
    };
    let close = |claimed: u64, real: u64, pct: u64| claimed.abs_diff(real) * 100 <= real * pct;
    let readme = include_str!("../README.md");
    let claimed = number(readme, "lab run                                   # everything: ", " cases pass");
    assert!(close(claimed, cases, 2), "README says {claimed} cases, a full run has {cases}");
    let claimed = number(readme, "A full run is about ", " test cases");
    assert!(close(claimed, testcases, 10), "README says {claimed} JUnit test cases, a full run has {testcases}");
    let (_, help) = lab(&["run", "--help"]);
    let claimed = number(&help, "A full run: about ", " cases");
    assert!(close(claimed, cases, 2), "--help says {claimed} cases, a full run has {cases}");
    let claimed = number(&help, "JUnit: about ", " test cases");
    assert!(close(claimed, testcases, 10), "--help says {claimed} JUnit test cases, a full run has {testcases}");
}

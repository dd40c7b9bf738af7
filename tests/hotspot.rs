//! HotSpot's own stubs (issue 32): captured from the installed JDK (Debian's
//! openjdk-17-jdk-headless, which has the x86_64 MD5 intrinsic; ci/setup.sh installs it), run
//! through `lab run` and `lab fuzz` green on every backend inside the JDK's call domain, and
//! outside it only as out-of-domain findings; a truncated capture and unknown stubs refused.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use object::{Object as _, ObjectSymbol as _};

/// `lab args...` with the image cache in `cache`: (exit status, stdout + stderr).
fn lab_in(cache: &Path, args: &[&str]) -> (i32, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_lab")).env("KERNEL_LAB_CACHE", cache).args(args).output().expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exit status"), text)
}

/// One capture of the installed JDK per test process: (folder with the object and manifest,
/// manifest, what `lab capture` printed).
fn captured() -> &'static (tempfile::TempDir, PathBuf, String) {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf, String)> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("hs");
        let (code, text) = lab_in(&dir.path().join("cache"), &["capture", "--out", out.to_str().unwrap()]);
        assert_eq!(code, 0, "lab capture of the installed JDK (openjdk-17-jdk-headless) failed:\n{text}");
        (dir, out.join("kernel-lab.toml"), text)
    })
}

fn cache() -> PathBuf {
    captured().0.path().join("cache")
}

#[test]
fn the_installed_jdk_gives_both_md5_stubs_whole() {
    let (_, manifest, text) = captured();
    assert!(
        text.contains("md5_implCompress -> md5_implCompress (") && text.contains("md5_implCompressMB -> "),
        "{text}"
    );
    let m = std::fs::read_to_string(manifest).unwrap();
    assert!(m.contains("name = \"hotspot-17.") && m.contains("isa = \"x86-64\""), "{m}");
    let object = manifest.with_file_name(
        m.lines().find_map(|l| l.strip_prefix("objects = [\"")).and_then(|l| l.strip_suffix("\"]")).unwrap(),
    );
    let bytes = std::fs::read(&object).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let text_bytes = file.section_by_name(".text").map(|s| object::ObjectSection::data(&s).unwrap().to_vec()).unwrap();
    for name in ["md5_implCompress", "md5_implCompressMB"] {
        let s = file.symbols().find(|s| s.name() == Ok(name)).unwrap_or_else(|| panic!("no {name} in {m}"));
        let (at, size) = (s.address() as usize, s.size() as usize);
        assert!(size > 1000, "{name}: {size} bytes");
        // The log's hex drops a last group of < 4 bytes (HotSpot's `leave; ret` of
        // md5_implCompressMB); the live capture has it.
        assert_eq!(text_bytes[at + size - 1], 0xc3, "{name} ends in `ret`");
        assert!(text.contains(&format!("{name} -> {name} ({size} bytes")), "{text}");
    }
}

#[test]
fn captured_md5_stubs_pass_every_bundled_vector_on_every_backend() {
    let m = captured().1.to_str().unwrap();
    let (code, text) = lab_in(&cache(), &["run", "--manifest", m, "--kernel", "md5", "--seed", "3"]);
    assert_eq!(code, 0, "{text}");
    for backend in ["unicorn", "qemu", "native"] {
        assert!(text.lines().any(|l| l.starts_with("hotspot-17.") && l.contains(&format!(" {backend} "))), "{text}");
    }
    let summary = text.lines().last().unwrap_or_default();
    let passed: usize = summary.split(" passed").next().and_then(|n| n.trim().parse().ok()).unwrap_or(0);
    assert!(passed > 20_000 && summary.contains(" 0 failed"), "{summary}");
}

#[test]
fn fuzzing_captured_stubs_is_clean_inside_the_jdk_domain() {
    let m = captured().1.to_str().unwrap();
    let (code, text) = lab_in(&cache(), &["fuzz", "--manifest", m, "--kernel", "md5", "--cases", "600", "--seed", "1"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("3 targets clean, 0 failed"), "{text}");
}

#[test]
fn outside_the_jdk_domain_the_unsigned_compare_is_an_out_of_domain_finding_not_a_failure() {
    // Seed 1's case 118 (shrunk to ofs = limit = -64): HotSpot's x86_64 loop compares
    // ofs/limit unsigned, the lab's reference signed; the JDK never calls with ofs < 0.
    let m = captured().1.to_str().unwrap();
    let out = captured().0.path().join("failures");
    let args = ["fuzz", "--manifest", m, "--kernel", "md5", "--backend", "native", "--cases", "3000", "--seed", "1"];
    let (code, text) = lab_in(&cache(), &[&args[..], &["--domain", "wide", "--out", out.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("OUTSIDE THE JDK CALL DOMAIN (not a failure)") && text.contains("ofs = -64 < 0"), "{text}");
    assert!(text.contains("0 failed, 1 outside the JDK call domain"), "{text}");
    // The saved case replays as out-of-domain with --domain wide, and is skipped without it.
    let file = std::fs::read_dir(&out).unwrap().next().unwrap().unwrap().path();
    let replay = ["run", "--manifest", m, "--no-bundled", "--vectors", file.to_str().unwrap(), "--backend", "native"];
    let (code, text) = lab_in(&cache(), &[&replay[..], &["--domain", "wide"]].concat());
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("OUTSIDE THE JDK CALL DOMAIN") && text.contains("3 outside the JDK call domain"), "{text}");
    let (code, text) = lab_in(&cache(), &replay);
    assert_eq!(code, 2, "nothing ran: {text}");
    assert!(
        text.contains("outside the JDK's call domain (md5_implCompressMB with ofs = -64 < 0); --domain wide"),
        "{text}"
    );
}

#[test]
fn hotspot_option_captures_and_replay_lines_name_the_jvm() {
    let args =
        ["fuzz", "--hotspot", "java", "--kernel", "md5", "--backend", "native", "--cases", "3000", "--seed", "1"];
    let out = captured().0.path().join("failures-hotspot");
    let (code, text) = lab_in(&cache(), &[&args[..], &["--domain", "wide", "--out", out.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("replay: lab run --seed 1 --hotspot java --domain wide --no-bundled"), "{text}");
    assert!(text.contains("--variant '=hotspot-17."), "{text}");
    let run = ["run", "--hotspot", "java", "--kernel", "md5", "--backend", "native", "--set", "=rfc1321"];
    let (code, text) = lab_in(&cache(), &run);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn a_truncated_capture_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("java")
        .args(["-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintStubCode", "-version"])
        .output()
        .expect("java (openjdk-17-jdk-headless)");
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    // Cut the last hex line of md5_implCompress: a capture whose bytes stop short of its range.
    let start = log.find("StubRoutines::md5_implCompress [").expect("the JDK's MD5 stub");
    let end = start + log[start..].find("[/MachCode]").unwrap();
    let last_line = log[..end].trim_end().rfind('\n').unwrap();
    let cut = format!("{}\n{}", &log[..last_line], &log[end..]);
    let path = dir.path().join("cut.log");
    std::fs::write(&path, cut).unwrap();
    let o = dir.path().join("o");
    let (code, text) =
        lab_in(&cache(), &["capture", "--from-log", path.to_str().unwrap(), "--out", o.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("stub `md5_implCompress` refused: the log prints") && text.contains("truncated capture"),
        "{text}"
    );
    assert!(!o.join("kernel-lab.toml").exists(), "nothing written");
    // The JDK's own log: HotSpot's hex drops a last group of < 4 bytes, so a stub whose size
    // is not a multiple of 4 (Debian 17.0.15's md5_implCompressMB: 1734 bytes) is refused.
    let path = dir.path().join("whole.log");
    std::fs::write(&path, &log).unwrap();
    let (code, text) =
        lab_in(&cache(), &["capture", "--from-log", path.to_str().unwrap(), "--out", o.to_str().unwrap()]);
    let sizes = kernel_lab::hotspot::log::parse(&log);
    let short = sizes.iter().find(|s| s.name.starts_with("md5_implCompress") && s.size() % 4 != 0);
    match short {
        Some(s) => {
            assert_eq!(code, 2, "{text}");
            assert!(text.contains(&format!("stub `{}` refused: the log prints", s.name)), "{text}");
        }
        None => assert_eq!(code, 0, "{text}"),
    }
}

#[test]
fn unknown_stubs_and_jvms_without_the_intrinsic_are_refused() {
    let o = captured().0.path().join("refused");
    let o = o.to_str().unwrap();
    let (code, text) = lab_in(&cache(), &["capture", "--stub", "sha256_implCompress", "--out", o]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("stub `sha256_implCompress` has no contract in the lab"), "{text}");
    let (code, text) =
        lab_in(&cache(), &["capture", "--jvm-flag=-XX:-UseMD5Intrinsics", "--stub", "md5_implCompress", "--out", o]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("generated no `md5_implCompress` stub") && text.contains("-XX:-UseMD5Intrinsics"), "{text}");
    let (code, text) = lab_in(&cache(), &["capture", "--jvm-flag=-XX:+NoSuchFlagAtAll", "--out", o]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("the JVM ended before its main class ran") && text.contains("NoSuchFlagAtAll"), "{text}");
}

#[test]
fn bench_counts_captured_stubs_next_to_the_labs_kernel() {
    let m = captured().1.to_str().unwrap();
    let args = ["bench", "--manifest", m, "--kernel", "md5", "--no-native", "--no-throughput", "--no-predict"];
    let (code, text) = lab_in(&cache(), &args);
    assert_eq!(code, 0, "{text}");
    let per_block = |prefix: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(prefix) && l.contains(" md5 ") && l.contains("+0"))?;
        line.split_whitespace().nth(6)?.parse().ok()
    };
    // HotSpot's x86_64 MD5 stub: 606 instructions per block, the figure its source reads to.
    assert_eq!(per_block("hotspot-17."), Some(606), "{text}");
    assert!(per_block("x86_64 ").is_some_and(|n| n < 606), "the lab's own x86_64 kernel beside it:\n{text}");
}

#[test]
fn every_bundled_vector_lies_inside_the_jdk_domain() {
    use kernel_lab::domain::{vector_outside, Domain};
    let mut checked = 0;
    for kernel in ["md5", "poly1305"] {
        for entry in std::fs::read_dir(kernel_lab::paths::vectors_dir().join(kernel)).unwrap() {
            let path = entry.unwrap().path();
            let (set, errors) = kernel_lab::vectors::load_file(&path);
            assert!(errors.is_empty(), "{errors:?}");
            for v in set.unwrap().vectors {
                assert_eq!(vector_outside(&v, Domain::Jdk), None, "{}: {}", path.display(), v.name);
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked} vectors");
}

/// A stub whose code runs past its symbol's size (a truncated capture would) reads as falling
/// off its end, not as code "outside every symbol".
#[test]
fn running_past_a_stubs_last_byte_reads_as_falling_off_its_end() {
    use kernel_lab::backend::BackendKind;
    use kernel_lab::variant::Kernel;
    let source = ".text\n.globl md5_implCompress\n.type md5_implCompress,@function\nmd5_implCompress:\n  nop\n  nop\n\
                  .size md5_implCompress, 2\n  ud2\n.globl md5_implCompressMB\n.type md5_implCompressMB,@function\n\
                  md5_implCompressMB:\n  mov eax, edx\n  ret\n.size md5_implCompressMB, .-md5_implCompressMB\n";
    let source = format!(".intel_syntax noprefix\n{source}");
    let (_dir, build) = crate::common::generated_fixture_kernels("x86_64", "md5.S", &source);
    let files = vec![kernel_lab::paths::vectors_dir().join("md5/rfc1321.json")];
    let v = crate::common::variant("x86_64");
    let report =
        kernel_lab::run::run(&crate::common::config_with(v, BackendKind::ALL.to_vec(), Kernel::Md5, files, build));
    let texts: Vec<&str> =
        report.rows.iter().flat_map(|r| r.failed()).flat_map(|c| c.findings).map(|f| f.text.as_str()).collect();
    for backend in BackendKind::ALL {
        let row = report.rows.iter().find(|r| r.backend == backend).unwrap();
        let first = &row.failed().first().copied().unwrap_or_else(|| panic!("{}", report.to_human())).findings[0];
        assert!(
            first.text.contains("(fell off the end of `md5_implCompress`: the byte just past it)"),
            "{backend}: {first}"
        );
    }
    assert!(!texts.iter().any(|t| t.contains("outside every symbol")), "{texts:?}");
}

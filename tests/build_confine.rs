//! Hostile kernel sources cannot use the build against the host (issue 28, deliverable 4;
//! lab/src/build_confine.rs): `.incbin` of a host file outside the kernels folder, of
//! `/dev/zero` or of a FIFO (outside or inside the folder) is refused, naming the source and
//! the file, with exit 2 and no clang left running; SIGTERM during a slow build stops the lab
//! at once with an `interrupted` report, a second signal leaves no clang behind.
//!
//! Every run builds into its own temporary cache (`KERNEL_LAB_CACHE`), so nothing is taken from
//! a cache and the build really runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kernel_lab::sandbox::Support;

use crate::common::fixture_kernels;

/// Well under the 60 s a build tool may take ([`kernel_lab::build_confine::WALL_LIMIT`]): a
/// refused file must stop the build at once, not at the time limit.
const PROMPT: Duration = Duration::from_secs(20);

/// Whether this host's kernel confines builds (Landlock); without it the run must say so.
fn landlock() -> bool {
    Support::probe().landlock_abi > 0
}

/// `lab run --arch x86_64 --set rfc1321` on the kernels in `dir`, with a private cache there.
fn lab_run(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lab"));
    cmd.args(["run", "--arch", "x86_64", "--set", "rfc1321", "--kernels-dir"])
        .arg(dir)
        .env("KERNEL_LAB_CACHE", dir.join("cache"));
    cmd
}

/// Runs the x86_64 kernels with `fixture` in place of poly1305.S (`@FIFO_PATH@` replaced by
/// `fifo`); returns the output, its text (stdout and stderr) and how long it took.
fn run_fixture(
    fixture: &str,
    fifo: impl Fn(&Path) -> Option<PathBuf>,
) -> (tempfile::TempDir, Output, String, Duration) {
    let (dir, _) = fixture_kernels("x86_64", "poly1305.S", fixture);
    let src = dir.path().join("x86_64/poly1305.S");
    if let Some(fifo) = fifo(dir.path()) {
        let mode = rustix::fs::Mode::from_raw_mode(0o600);
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, mode, 0)
            .unwrap_or_else(|e| panic!("mkfifo {}: {e}", fifo.display()));
        let text = std::fs::read_to_string(&src).expect("fixture");
        std::fs::write(&src, text.replace("@FIFO_PATH@", &fifo.display().to_string())).expect("fixture");
    }
    let started = Instant::now();
    let out = lab_run(dir.path()).stdin(Stdio::null()).output().expect("run lab");
    let elapsed = started.elapsed();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (dir, out, text, elapsed)
}

/// Pids (other than this process) whose command line mentions `needle` and `program`.
fn processes(program: &str, needle: &str) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if pid != me && cmd.contains(needle) && cmd.contains(program) {
            out.push((pid, cmd));
        }
    }
    out
}

/// The run failed to set the kernels up (exit 2) promptly, naming the kernel source and
/// `refused`, with nothing built and no clang left; without Landlock it warned instead.
fn assert_refused(fixture: &str, out: &Output, text: &str, elapsed: Duration, dir: &Path, refused: &Path) {
    assert_eq!(out.status.code(), Some(2), "{fixture}: {text}");
    assert!(elapsed < PROMPT, "{fixture}: took {elapsed:?}");
    let left = processes("clang", &dir.display().to_string());
    assert!(left.is_empty(), "{fixture}: clang outlived the run: {left:?}");
    if !landlock() {
        assert!(text.contains("builds: the kernel has no Landlock"), "{fixture}: {text}");
        return;
    }
    let source = dir.join("x86_64/poly1305.S");
    let said = format!(
        "{}: the build was refused access to {} (kernel sources may read only the regular files of their own \
         folder and the lab's include folder)",
        source.display(),
        refused.display()
    );
    assert!(text.contains(&said), "{fixture}: {said:?} not in:\n{text}");
    assert!(text.contains("0 passed, 0 failed"), "{fixture}: {text}");
}

#[test]
fn incbin_of_a_host_file_is_refused_naming_the_source_and_the_file() {
    let (dir, out, text, elapsed) = run_fixture("incbin_host_file.S", |_| None);
    assert_refused("incbin_host_file.S", &out, &text, elapsed, dir.path(), Path::new("/etc/passwd"));
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let first = passwd.lines().next().expect("a line");
    assert!(!text.contains(first), "the host file reached the output:\n{text}");
}

#[test]
fn incbin_of_dev_zero_stops_at_once_with_exit_2() {
    let (dir, out, text, elapsed) = run_fixture("incbin_dev_zero.S", |_| None);
    assert_refused("incbin_dev_zero.S", &out, &text, elapsed, dir.path(), Path::new("/dev/zero"));
}

/// A FIFO outside the kernels folder is outside every grant.
#[test]
fn incbin_of_a_fifo_outside_the_folder_is_refused() {
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let fifo = elsewhere.path().join("waits");
    let (dir, out, text, elapsed) = run_fixture("incbin_fifo.S", |_| Some(fifo.clone()));
    assert_refused("incbin_fifo.S", &out, &text, elapsed, dir.path(), &fifo);
}

/// A FIFO inside the kernels folder is refused too, at once (not at the time limit): the
/// folder is granted file by file, regular files only, so the FIFO has no rule.
#[test]
fn incbin_of_a_fifo_inside_the_folder_is_refused_too() {
    let fifo = std::cell::RefCell::new(PathBuf::new());
    let (dir, out, text, elapsed) = run_fixture("incbin_fifo.S", |d| {
        let path = d.join("x86_64/waits.fifo");
        fifo.replace(path.clone());
        Some(path)
    });
    assert_refused("incbin_fifo.S", &out, &text, elapsed, dir.path(), &fifo.borrow());
}

/// Polls `f` every 20 ms for up to `limit`.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Starts `lab run` on the slow fixture (JSON report to `<dir>/report.json`) and waits until
/// its clang preprocesses the fixture; returns the lab and the fixture folder.
fn lab_in_a_slow_build() -> (std::process::Child, tempfile::TempDir) {
    let (dir, _) = fixture_kernels("x86_64", "poly1305.S", "slow_build.S");
    let lab = lab_run(dir.path())
        .args(["--format", "json", "--output"])
        .arg(dir.path().join("report.json"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start lab");
    let source = dir.path().join("x86_64/poly1305.S").display().to_string();
    assert!(wait_for(Duration::from_secs(60), || !processes("clang", &source).is_empty()), "clang never started");
    (lab, dir)
}

/// SIGTERM during a build: the lab exits 143 at once, with an interrupted report and no
/// set-up error, and clang is gone.
#[test]
fn sigterm_during_a_build_stops_the_lab_and_clang() {
    let (mut lab, dir) = lab_in_a_slow_build();
    let signalled = Instant::now();
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(lab.id() as i32, libc::SIGTERM) };
    let status = lab.wait().expect("lab exits");
    assert!(signalled.elapsed() < Duration::from_secs(2), "the lab took {:?} to stop", signalled.elapsed());
    assert_eq!(status.code(), Some(143));
    let needle = dir.path().display().to_string();
    assert!(wait_for(Duration::from_secs(1), || processes("clang", &needle).is_empty()), "clang outlived the lab");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).expect("report")).expect("JSON");
    assert_eq!(doc["status"], "interrupted", "{doc}");
    assert_eq!(doc["setup_errors"], serde_json::json!([]), "a killed build is no set-up error: {doc}");
}

/// Two signals in a row (the second exits the lab without a report): no clang is orphaned.
#[test]
fn a_second_signal_during_a_build_leaves_no_clang_behind() {
    let (mut lab, dir) = lab_in_a_slow_build();
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: signals to our own child.
        unsafe { libc::kill(lab.id() as i32, sig) };
    }
    let status = lab.wait().expect("lab exits");
    assert!(matches!(status.code(), Some(130 | 143)), "{status:?}");
    let needle = dir.path().display().to_string();
    assert!(
        wait_for(Duration::from_secs(1), || processes("clang", &needle).is_empty()),
        "clang outlived the lab: {:?}",
        processes("clang", &needle)
    );
}

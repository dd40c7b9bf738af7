//! Hostile kernels cannot act on the host (issue 11, reproductions 2 and 3): each fixture tries
//! to create a file, fork, or signal the lab; every attempt must end as a finding naming the
//! system call, with no file created, no process left behind, and a report for the run. And
//! SIGTERM to `lab run` during a hang leaves no process and an `interrupted` report.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kernel_lab::backend::BackendKind;
use kernel_lab::finding::Class;
use kernel_lab::protocol;
use kernel_lab::report::Row;
use kernel_lab::vectors;

use crate::common::{fixture_image, fixture_kernels, one_vector_set, run_fixture_set, variant};

/// Pids (other than this process) whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if pid != me && cmd.contains(needle) {
            out.push((pid, cmd));
        }
    }
    out
}

/// Runs `fixture` (replacing poly1305.S of `variant_name`, with `@ESCAPE_PATH@` set to a file in
/// a fresh folder) on `backends`; returns the rows and the folder's path and the escape path.
/// One Poly1305 vector of one block.
fn one_block_set() -> kernel_lab::vectors::VectorSet {
    one_vector_set("poly1305/rfc8439.json", |v| (16..32).contains(&v.msg_len()))
}

fn run_hostile(variant_name: &str, fixture: &str, backends: &[BackendKind]) -> (Vec<(BackendKind, Row)>, PathBuf) {
    let v = variant(variant_name);
    let (dir, cfg) = fixture_kernels(v.arch.name(), "poly1305.S", fixture);
    // Built into the temporary folder, not the shared cache: the guests' command lines then
    // name the folder (the check below that none survives), and the images, unique to the
    // folder's escape path, do not pile up in the shared cache run after run.
    let cfg = kernel_lab::toolchain::BuildConfig { cache_dir: dir.path().join("cache"), ..cfg };
    let escape = dir.path().join(format!("escaped-{}", std::process::id()));
    let src = dir.path().join(v.arch.name()).join("poly1305.S");
    let text = std::fs::read_to_string(&src).expect("fixture").replace("@ESCAPE_PATH@", &escape.display().to_string());
    std::fs::write(&src, text).expect("fixture");
    let image = fixture_image(&cfg, v, fixture);
    let set = one_block_set();
    let rows: Vec<(BackendKind, Row)> =
        backends.iter().map(|&kind| (kind, run_fixture_set(kind, v, &image, &set))).collect();
    let dir_name = dir.path().display().to_string();
    assert!(!escape.exists(), "{fixture}: {} was created", escape.display());
    assert!(image.path.starts_with(dir.path()), "{fixture}: the guests must name the folder");
    let left = processes_mentioning(&dir_name);
    assert!(left.is_empty(), "{fixture}: processes outlived the run: {left:?}");
    (rows, escape)
}

/// Every case of `row` failed, and the first finding is a `syscall` finding containing `text`.
fn assert_refused(fixture: &str, kind: BackendKind, row: &Row, text: &str) {
    assert_eq!(row.passed(), 0, "{fixture} on {kind}: a case passed");
    assert!(!row.failed().is_empty(), "{fixture} on {kind}: nothing failed");
    let f = &row.failed()[0].findings[0];
    assert_eq!(f.class, Class::Syscall, "{fixture} on {kind}: {f}");
    assert!(f.text.contains(text), "{fixture} on {kind}: {text:?} not in {f}");
}

#[test]
fn jumping_into_the_drivers_syscall_to_creat_is_refused_and_named() {
    let (rows, _) = run_hostile("x86_64", "escape.S", &[BackendKind::Native, BackendKind::Qemu]);
    for (kind, row) in &rows {
        assert_refused("escape.S", *kind, row, "system call 85 (creat) attempted and refused");
    }
}

#[test]
fn a_syscall_entered_one_byte_in_cannot_fork() {
    let (rows, _) = run_hostile("x86_64", "hidden_syscall.S", &[BackendKind::Native, BackendKind::Qemu]);
    // Natively syscall user dispatch stops the guest's own fork (57) and the handler names it.
    assert_refused("hidden_syscall.S", rows[0].0, &rows[0].1, "system call 57 (fork) attempted and refused");
    // qemu-user forks with the host's clone, every signal blocked: the trap kills it with SIGSYS
    // before anyone can name the call; the lab still files it as the kernel's system call.
    assert_refused("hidden_syscall.S", rows[1].0, &rows[1].1, "refused by the lab's seccomp filter");
}

/// The static scan sees the system calls the dynamic checks refuse, on every architecture, at
/// every position an instruction may start (hidden_syscall.rs): x86_64's `syscall` one byte into
/// a `mov`, riscv64's `ecall` two bytes into a `lui`, aarch64's `svc` in a data word of `.text`.
#[test]
fn the_scan_names_a_syscall_hidden_inside_another_instruction() {
    let rows = [
        ("x86_64", "hidden_syscall.S", "`syscall`", "1 byte(s) into this instruction", "mov"),
        ("riscv64", "hidden_ecall.S", "`ecall`", "2 byte(s) into this instruction", "lui"),
        ("aarch64", "svc_word.S", "`svc`", "in data of an executable section", "svc (data)"),
    ];
    for (arch, fixture, name, inside, insn) in rows {
        let v = variant(arch);
        let (_dir, cfg) = fixture_kernels(arch, "poly1305.S", fixture);
        let image = fixture_image(&cfg, v, fixture);
        let found = kernel_lab::isa::scan(&image, v).expect("scan");
        let hidden: Vec<_> = found.iter().filter(|f| f.why.starts_with("a system call hidden")).collect();
        assert_eq!(hidden.len(), 1, "{arch}: {found:#?}");
        let h = hidden[0];
        assert!(h.place.starts_with("poly1305_processBlocks+0x"), "{arch}: {h}");
        assert!(h.why.contains(name) && h.why.contains(inside), "{arch}: {h}");
        assert!(h.insn.starts_with(insn), "{arch}: {h}");
    }
}

#[test]
fn an_aarch64_word_holding_svc_cannot_create_a_file_under_qemu() {
    let (rows, _) = run_hostile("aarch64", "svc_word.S", &[BackendKind::Qemu]);
    assert_refused("svc_word.S", BackendKind::Qemu, &rows[0].1, "system call 56 (openat) attempted and refused");
}

#[test]
fn execve_of_a_shell_under_qemu_is_refused_and_named() {
    let (rows, _) = run_hostile("aarch64", "execve.S", &[BackendKind::Qemu]);
    // qemu-user passes the guest's execve to the host's (x86_64: 59), which seccomp traps.
    assert_refused("execve.S", BackendKind::Qemu, &rows[0].1, "system call 221 (execve) attempted and refused");
}

#[test]
fn kill_of_the_parent_under_qemu_is_a_finding_and_the_lab_lives() {
    let (rows, _) = run_hostile("riscv64", "kill_parent.S", &[BackendKind::Qemu]);
    assert_refused("kill_parent.S", BackendKind::Qemu, &rows[0].1, "system call 129 (kill) attempted and refused");
}

#[test]
fn an_administrators_system_call_is_trapped_not_a_quiet_eperm() {
    let (rows, _) = run_hostile("x86_64", "privileged.S", &[BackendKind::Native, BackendKind::Qemu]);
    for (kind, row) in &rows {
        assert_refused("privileged.S", *kind, row, "refused");
        assert!(row.failed()[0].findings[0].text.contains("syslog"), "{kind}: {}", row.failed()[0].findings[0]);
    }
    let (rows, _) = run_hostile("riscv64", "reboot.S", &[BackendKind::Qemu]);
    assert_refused("reboot.S", BackendKind::Qemu, &rows[0].1, "system call 142 (reboot) attempted and refused");
}

#[test]
fn a_guest_truncating_the_shared_arena_fails_its_cases_and_the_lab_lives() {
    // Unsealed, the truncation took effect: the guest's next access to the arena faulted, its
    // batch hung until killed (10 s) and every case "did not run". Sealed, the ftruncate fails,
    // the kernel returns having done no work, and each case fails on its values, at once.
    let (rows, _) = run_hostile("riscv64", "shrink_arena.S", &[BackendKind::Qemu]);
    let row = &rows[0].1;
    assert!(!row.failed().is_empty() && row.skipped() == 0, "{row:?}");
    for case in &row.failed() {
        for f in case.findings {
            assert!(!f.text.contains("did not run"), "the truncation reached the arena: {f}");
        }
    }
}

/// Polls `f` every 50 ms for up to `limit`.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn sigterm_during_a_hang_kills_the_guests_and_writes_an_interrupted_report() {
    let v = variant("x86_64");
    let (dir, cfg) = fixture_kernels(v.arch.name(), "poly1305.S", "loop.S");
    let vectors = dir.path().join("one.json");
    let set = one_block_set();
    let entry = &set.vectors[0];
    std::fs::write(
        &vectors,
        serde_json::json!({"kernel": "poly1305", "set": "one", "vectors": [vectors::entry_json(entry)]}).to_string(),
    )
    .expect("vector file");
    let out = dir.path().join("report.json");
    std::fs::write(&out, r#"{"status": "passed", "stale": true}"#).expect("stale report");
    // A descriptor the lab inherits (as a CI log or make's jobserver would be): fd 7 of lab.
    let inherited_path = dir.path().join("inherited.log");
    let inherited = std::fs::File::create(&inherited_path).expect("inherited file");
    let mut lab = Command::new(env!("CARGO_BIN_EXE_lab"));
    {
        use std::os::fd::AsRawFd as _;
        use std::os::unix::process::CommandExt as _;
        let fd = inherited.as_raw_fd();
        // SAFETY: dup2 in the forked child before exec, on descriptors it owns.
        unsafe {
            lab.pre_exec(move || if libc::dup2(fd, 7) < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) });
        }
    }
    let mut lab = lab
        .args(["run", "--variant", "=x86_64", "--backend", "qemu", "--backend", "native", "--kernel", "poly1305"])
        .args(["--no-bundled", "--seed", "7", "--format", "json"])
        .arg("--vectors")
        .arg(&vectors)
        .arg("--kernels-dir")
        .arg(&cfg.kernels_dir)
        .arg("--output")
        .arg(&out)
        .env("KERNEL_LAB_CACHE", dir.path().join("target"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start lab");
    let needle = dir.path().join("target").display().to_string();
    // Building the image (clang) also mentions the folder: wait for the qemu guest itself.
    // A guest holds the protocol's fds, the arena memfd on its fd 3; the CPU-model probe
    // (unconfined by design, exits at `_start`) has none, but qemu's own files (the image) may
    // sit on the same numbers while it runs, so the fd's target is checked, not its existence.
    let is_guest = |pid: u32, cmd: &str| {
        let arena = std::fs::read_link(format!("/proc/{pid}/fd/{}", protocol::fd::ARENA)).unwrap_or_default();
        cmd.contains("qemu-x86_64") && arena.to_string_lossy().starts_with("/memfd:lab_arena")
    };
    let qemu_guest = || processes_mentioning(&needle).into_iter().any(|(pid, cmd)| is_guest(pid, &cmd));
    let hanging = wait_for(Duration::from_secs(120), qemu_guest);
    // The first guest is qemu-x86_64: in seccomp filter mode (its three filters: refusal,
    // clone3, the witness's), traced by a thread of the lab, no new privileges,
    // no capability (the bounding set is emptied where the lab may: as root, as CI runs), its
    // limits, and none of the lab's inherited descriptors (this test's `inherited` on fd 7).
    let mut checked = 0;
    let root = rustix::process::geteuid().is_root();
    for (pid, cmd) in processes_mentioning(&needle) {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if is_guest(pid, &cmd) && !status.is_empty() {
            let mut want = vec!["Seccomp:\t2", "Seccomp_filters:\t3", "NoNewPrivs:\t1", "CapEff:\t0000000000000000"];
            want.extend(["CapPrm:\t0000000000000000", "CapAmb:\t0000000000000000"]);
            if root {
                want.push("CapBnd:\t0000000000000000");
            }
            for line in want {
                assert!(status.contains(line), "{line:?} not in the status of {cmd}:\n{status}");
            }
            // Traced by a thread of the lab (backend/process/witness.rs, the host's witness).
            let tracer = status.lines().find_map(|l| l.strip_prefix("TracerPid:")).unwrap_or("0").trim();
            let tracer = std::fs::read_to_string(format!("/proc/{tracer}/status")).unwrap_or_default();
            let lab_tgid = format!("Tgid:\t{}", lab.id());
            assert!(tracer.contains(&lab_tgid), "the guest's tracer is not a thread of the lab:\n{status}");
            let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
            let space = kernel_lab::backend::confine::GUEST_ADDRESS_SPACE;
            for (name, value) in [("Max address space", space.to_string()), ("Max open files", "256".into())] {
                let line = limits.lines().find(|l| l.starts_with(name)).unwrap_or_default();
                assert!(line.split_whitespace().any(|w| w == value), "{name} {value}: {limits}");
            }
            let fds: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|d| d.flatten().filter_map(|e| std::fs::read_link(e.path()).ok()).collect())
                .unwrap_or_default();
            assert!(!fds.iter().any(|f| f == &inherited_path), "the lab's inherited fd reached the guest: {fds:?}");
            checked += 1;
        }
    }
    assert!(checked > 0, "no qemu guest to inspect");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(lab.id() as i32, libc::SIGTERM) };
    let status = lab.wait().expect("lab exits");
    assert!(hanging, "the guest never started");
    assert_eq!(status.code(), Some(143), "exit status after SIGTERM");
    assert!(
        wait_for(Duration::from_secs(2), || processes_mentioning(&needle).is_empty()),
        "processes outlived the lab: {:?}",
        processes_mentioning(&needle)
    );
    let doc = read_json(&out);
    assert_eq!(doc["status"], "interrupted", "{doc}");
    assert_eq!(doc["interrupted"], "SIGTERM");
    assert_eq!(doc["exit_code"], 143);
    assert!(doc.get("stale").is_none(), "the stale report survived");
    assert_eq!(doc["totals"]["passed"], 0, "{doc}");
    assert_eq!(doc["totals"]["failed"], 0, "a killed batch must not fail its cases: {doc}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".lab-report-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary report files left: {leftovers:?}");
}

#[test]
fn sigterm_during_lab_fuzz_stops_it_with_an_interrupted_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("fuzz.json");
    let mut lab = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args([
            "fuzz",
            "--variant",
            "=x86_64",
            "--backend",
            "native",
            "--kernel",
            "md5",
            "--time",
            "120s",
            "--seed",
            "3",
        ])
        .args(["--format", "json", "--out"])
        .arg(dir.path().join("failures"))
        .arg("--output")
        .arg(&out)
        .env("KERNEL_LAB_CACHE", dir.path().join("target"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start lab");
    let needle = dir.path().join("target").display().to_string();
    let guest =
        || processes_mentioning(&needle).into_iter().any(|(_, cmd)| cmd.contains("lab.elf") && !cmd.contains("ld.lld"));
    let running = wait_for(Duration::from_secs(120), guest);
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(lab.id() as i32, libc::SIGTERM) };
    let status = lab.wait().expect("lab exits");
    assert!(running, "the guest never started");
    assert_eq!(status.code(), Some(143));
    assert!(
        wait_for(Duration::from_secs(2), || processes_mentioning(&needle).is_empty()),
        "processes outlived lab fuzz"
    );
    let doc = read_json(&out);
    assert_eq!((doc["command"].as_str(), doc["status"].as_str()), (Some("fuzz"), Some("interrupted")), "{doc}");
    assert_eq!(doc["totals"]["failed"], 0, "{doc}");
}

/// The guests of `parent` whose command line mentions `needle`: its children that lead a
/// process group of their own, as confined guests do (the qemu `-cpu` probe does not).
fn guests_mentioning(parent: u32, needle: &str) -> Vec<u32> {
    processes_mentioning(needle)
        .into_iter()
        .filter(|(pid, _)| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // After the parenthesised command name: state, ppid, pgrp.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let field = |i: usize| after.split_whitespace().nth(i).and_then(|p| p.parse::<u32>().ok());
            field(1) == Some(parent) && field(2) == Some(*pid)
        })
        .map(|(pid, _)| pid)
        .collect()
}

#[test]
fn a_guest_killed_from_outside_fails_no_correct_case() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("report.json");
    let mut lab = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["run", "--arch", "riscv64", "--backend", "qemu", "--seed", "1", "--format", "json", "--output"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("lab");
    let mut kills = 0;
    let started = Instant::now();
    while kills < 3 && started.elapsed() < Duration::from_secs(60) {
        if lab.try_wait().expect("wait").is_some() {
            break;
        }
        if let Some(pid) = guests_mentioning(lab.id(), "qemu-riscv64").first() {
            // SAFETY: kill(2) on a pid this test found as lab's guest; no memory is involved.
            if unsafe { libc::kill(*pid as i32, libc::SIGKILL) } == 0 {
                kills += 1;
                // As an operator or the OOM killer would: one kill, not a storm.
                std::thread::sleep(Duration::from_millis(150));
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = lab.wait().expect("wait");
    assert!(kills > 0, "no guest was killed: the run ended first");
    let json = read_json(&out);
    assert_eq!(json["totals"]["failed"], 0, "{kills} kills: {}", json["rows"]);
    assert_eq!(status.code(), Some(0), "{kills} kills: {}", json["setup_errors"]);
}

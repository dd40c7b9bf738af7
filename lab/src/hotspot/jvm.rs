//! Runs a `java` with the user's flags and `-XX:+PrintStubCode`, and reads the exact bytes of
//! the stubs it printed from the live JVM's code cache (`/proc/<pid>/mem`).
//!
//! The JVM runs a tiny main class through Java's single-file source launcher (JEP 330, JDK 11+):
//! it prints one ready line (`LAB-READY <pid> <java.runtime.version> <os.arch>`) and blocks
//! until its stdin closes. Stubs are generated before `main` (and, from JDK 21, compiler stubs
//! shortly after on a compiler thread), so the lab reads the log until the ready line and then
//! until the output has been quiet for [`QUIET`]; then it reads each stub's range, printed by
//! HotSpot itself, from the process's memory (the lab is the JVM's parent, which Yama's
//! `ptrace_scope` 1 allows), and closes stdin. The JVM runs in its own process group, killed
//! on any error or after [`DEADLINE`].
//!
//! A `java` built for another architecture (Debian's `openjdk-17-jdk-headless:arm64` through
//! dpkg multiarch, or a user's JDK folder) runs under that architecture's qemu-user, which
//! places guest memory at the host's same addresses for a 64-bit guest on a 64-bit host
//! (guest_base 0): the lab reads the stubs at the addresses the log prints, and refuses them
//! when the bytes there differ from the log's.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::log::{self, PrintedStub};
use super::CaptureError;
use crate::variant::Arch;

/// The main class the JVM runs (compiled in memory by the source launcher).
const MAIN: &str = r#"public class LabStubCapture {
    public static void main(String[] args) throws Exception {
        System.out.println("LAB-READY " + ProcessHandle.current().pid() + " "
            + System.getProperty("java.runtime.version") + " " + System.getProperty("os.arch"));
        System.out.flush();
        while (System.in.read() >= 0) { }
    }
}
"#;

/// How long the output must stay quiet after the ready line before the lab reads the stubs.
pub const QUIET: Duration = Duration::from_millis(1500);

/// Largest block read from the JVM besides the wanted stubs (constant areas are small).
const MAX_BLOCK: u64 = 1 << 20;

/// Longest the whole capture may take (JVM start, the source launcher's compile, the log).
pub const DEADLINE: Duration = Duration::from_secs(180);

/// What a live JVM printed and held.
#[derive(Debug)]
pub struct LiveJvm {
    /// `java.runtime.version` (`17.0.15+6-Debian-1deb12u1`).
    pub version: String,
    /// `os.arch` (`amd64`, `aarch64`, `riscv64`).
    pub os_arch: String,
    /// The qemu-user program the JVM ran under (`qemu-aarch64`), for a foreign-architecture JVM.
    pub emulator: Option<String>,
    /// Every stub of the log, with `printed` replaced by the exact bytes of its range (the
    /// stubs named in `wanted`, and every other block of at most 1 MiB).
    pub stubs: Vec<PrintedStub>,
    /// The JVM's memory, readable until this value is dropped (which ends the JVM): constants
    /// a stub reads outside every printed block (static tables of libjvm.so) are read here.
    pub memory: Option<JvmMemory>,
}

/// A live JVM's memory (`/proc/<pid>/mem`); dropping it ends the JVM.
#[derive(Debug)]
pub struct JvmMemory {
    file: std::fs::File,
    path: PathBuf,
    group: Group,
}

impl JvmMemory {
    /// The `len` bytes at `at` in the JVM.
    ///
    /// # Errors
    /// The range is not mapped readable in the JVM (the error names the file and address).
    pub fn read(&self, at: u64, len: usize) -> Result<Vec<u8>, String> {
        let mut bytes = vec![0u8; len];
        self.file.read_exact_at(&mut bytes, at).map_err(|e| format!("{} at {at:#x}: {e}", self.path.display()))?;
        Ok(bytes)
    }
}

impl Drop for JvmMemory {
    fn drop(&mut self) {
        self.group.end();
    }
}

/// Starts `java` with `flags`, waits for its stubs and reads the bytes of those named in
/// `wanted` from its memory.
///
/// # Errors
/// `java` cannot start, exits early (its stderr is quoted: an unknown `-XX` flag), prints no
/// ready line within [`DEADLINE`], or its memory cannot be read.
pub fn run(java: &Path, flags: &[String], wanted: &[&str]) -> Result<LiveJvm, CaptureError> {
    let dir = tempfile::tempdir().map_err(|e| CaptureError::Jvm(format!("cannot make a temporary folder: {e}")))?;
    let main = dir.path().join("LabStubCapture.java");
    std::fs::write(&main, MAIN).map_err(|e| CaptureError::Jvm(format!("cannot write {}: {e}", main.display())))?;
    let (mut cmd, emulator) = launcher(java)?;
    // Unlocked before the user's flags: diagnostic ones such as -XX:-UseMD5Intrinsics need it.
    cmd.arg("-XX:+UnlockDiagnosticVMOptions")
        .args(flags)
        .arg("-XX:+PrintStubCode")
        .arg(&main)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().map_err(|e| CaptureError::Jvm(format!("cannot start {}: {e}", java.display())))?;
    let mut group = Group(Some(child));
    // On an error the group is dropped here, which kills the JVM.
    let (live, file, path) = read_live(&mut group, wanted)?;
    let memory = Some(JvmMemory { file, path, group });
    Ok(LiveJvm { emulator, memory, ..live })
}

/// The command that starts `java`: the program itself on its own architecture, under qemu-user
/// when it is an ELF executable of another architecture of the lab (with the qemu program's
/// name).
///
/// # Errors
/// `java` is an ELF file of an architecture the lab does not know, or the qemu-user program it
/// needs is not installed.
pub fn launcher(java: &Path) -> Result<(Command, Option<String>), CaptureError> {
    // A bare name (`java`) is looked up on PATH, as the command itself would be.
    let file = which::which(java).unwrap_or_else(|_| java.to_path_buf());
    let Some(arch) = elf_arch(&file)? else { return Ok((Command::new(java), None)) };
    if Some(arch) == Arch::host() {
        return Ok((Command::new(java), None));
    }
    let qemu = arch.qemu_binary();
    let program = which::which(qemu).map_err(|_| {
        CaptureError::Jvm(format!(
            "{} is a {arch} program, which runs here under {qemu}: not found (install Debian's qemu-user)",
            java.display()
        ))
    })?;
    let mut cmd = Command::new(program);
    cmd.arg(java);
    Ok((cmd, Some(qemu.to_string())))
}

/// The lab architecture of the ELF executable at `path` (symbolic links followed); `None` when it
/// is not an ELF file (a wrapper script runs as it is).
fn elf_arch(path: &Path) -> Result<Option<Arch>, CaptureError> {
    use object::Object as _;
    let mut head = Vec::new();
    let file =
        std::fs::File::open(path).map_err(|e| CaptureError::Jvm(format!("cannot open {}: {e}", path.display())))?;
    // A launcher is small (java: ~14 KiB); the ELF header and program headers come first.
    file.take(MAX_LAUNCHER)
        .read_to_end(&mut head)
        .map_err(|e| CaptureError::Jvm(format!("cannot read {}: {e}", path.display())))?;
    if !head.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    let elf = object::File::parse(&*head)
        .map_err(|e| CaptureError::Jvm(format!("{}: not a readable ELF file ({e})", path.display())))?;
    let arch = Arch::ALL.into_iter().find(|a| a.spec().elf == elf.architecture());
    arch.map(Some).ok_or_else(|| {
        CaptureError::Jvm(format!(
            "{} is built for {:?}, not an architecture of the lab",
            path.display(),
            elf.architecture()
        ))
    })
}

/// Most bytes of a `java` launcher read to learn its architecture.
const MAX_LAUNCHER: u64 = 64 << 20;

/// Kills the JVM's process group when dropped (an error path) or ended.
#[derive(Debug)]
struct Group(Option<Child>);

impl Group {
    fn end(&mut self) {
        if let Some(mut c) = self.0.take() {
            drop(c.stdin.take()); // the main class returns when its stdin closes
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            kill_group(&mut c);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            kill_group(&mut c);
        }
    }
}

fn kill_group(c: &mut Child) {
    crate::sandbox::kill_group(c.id());
    let _ = c.wait();
}

/// The log's stubs with the bytes read from the JVM, and its memory file (path).
fn read_live(group: &mut Group, wanted: &[&str]) -> Result<(LiveJvm, std::fs::File, PathBuf), CaptureError> {
    let child = group.0.as_mut().ok_or_else(|| CaptureError::Jvm("the JVM is gone".into()))?;
    let pid = child.id();
    let stdout = child.stdout.take().ok_or_else(|| CaptureError::Jvm("no stdout pipe".into()))?;
    let mut stderr = child.stderr.take().ok_or_else(|| CaptureError::Jvm("no stderr pipe".into()))?;
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (etx, erx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut buf);
        let _ = etx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    let (text, ready) = collect(&rx, wanted)?.ok_or_else(|| {
        let _ = child.wait();
        let err = erx.recv_timeout(Duration::from_secs(2)).unwrap_or_default();
        let tail: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).take(6).collect();
        CaptureError::Jvm(format!("the JVM ended before its main class ran: {}", tail.join(" / ")))
    })?;
    let mut fields = ready.split_whitespace().skip(1);
    let printed_pid: Option<u32> = fields.next().and_then(|p| p.parse().ok());
    let version = fields.next().unwrap_or("unknown").to_string();
    let os_arch = fields.next().unwrap_or("unknown").to_string();
    if printed_pid != Some(pid) {
        return Err(CaptureError::Jvm(format!(
            "the JVM says its pid is {printed_pid:?}, the lab started {pid}: it cannot read that JVM's memory"
        )));
    }
    let mut stubs = log::parse(&text);
    let mem = PathBuf::from(format!("/proc/{pid}/mem"));
    let file = std::fs::File::open(&mem).map_err(|e| memory_error(&mem, &e))?;
    // Every block the log printed (a few hundred KiB): the wanted stubs and any constant area
    // they read. A block other than a wanted stub that cannot be read, or that changed since it
    // was printed (patched code), keeps its printed bytes: it matters only if a stub reads it.
    for s in stubs.iter_mut().filter(|s| wanted.contains(&s.name.as_str()) || s.size() <= MAX_BLOCK) {
        let must = wanted.contains(&s.name.as_str());
        let mut bytes = vec![0u8; usize::try_from(s.size()).unwrap_or(0)];
        match file.read_exact_at(&mut bytes, s.start) {
            Ok(()) if bytes.starts_with(&s.printed) => s.printed = bytes,
            Ok(()) if must => {
                let at = bytes.iter().zip(&s.printed).position(|(a, b)| a != b).unwrap_or(0);
                return Err(CaptureError::Jvm(format!(
                    "stub `{}` at {:#x}: its bytes from +{at:#x} on ({:02x?}) differ from those the log printed ({:02x?}): \
                     the code cache changed after the log",
                    s.name,
                    s.start,
                    &bytes[at..(at + 8).min(bytes.len())],
                    &s.printed[at..(at + 8).min(s.printed.len())]
                )));
            }
            Err(e) if must => return Err(memory_error(&mem, &e)),
            _ => {}
        }
    }
    let _ = child.stdin.as_mut().map(|i| i.write_all(b"\n"));
    Ok((LiveJvm { version, os_arch, emulator: None, stubs, memory: None }, file, mem))
}

/// The log up to the ready line and then until quiet (or every `wanted` stub printed); `None`
/// when the JVM ended before the ready line.
fn collect(rx: &mpsc::Receiver<String>, wanted: &[&str]) -> Result<Option<(String, String)>, CaptureError> {
    let start = Instant::now();
    let mut text = String::new();
    let mut ready: Option<String> = None;
    loop {
        let left = DEADLINE.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(CaptureError::Jvm(format!(
                "no ready line from the JVM within {} s (is it stuck, or very slow under load?)",
                DEADLINE.as_secs()
            )));
        }
        let wait = if ready.is_some() { QUIET.min(left) } else { left };
        match rx.recv_timeout(wait) {
            Ok(line) if line.starts_with("LAB-READY ") && ready.is_none() => ready = Some(line),
            Ok(line) => {
                text.push_str(&line);
                text.push('\n');
            }
            Err(mpsc::RecvTimeoutError::Timeout) if ready.is_some() => break,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if ready.is_some() && all_printed(&text, wanted) {
            break;
        }
    }
    Ok(ready.map(|r| (text, r)))
}

fn all_printed(text: &str, wanted: &[&str]) -> bool {
    wanted.iter().all(|w| text.contains(&format!("StubRoutines::{w} [")))
}

fn memory_error(mem: &Path, e: &std::io::Error) -> CaptureError {
    let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
        " (reading a child's memory needs kernel.yama.ptrace_scope <= 1, or root)"
    } else {
        ""
    };
    CaptureError::Jvm(format!("cannot read {}: {e}{hint}", mem.display()))
}

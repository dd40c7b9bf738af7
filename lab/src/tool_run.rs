//! External tools run with a wall-clock limit: the lab starts programs it does not trust to
//! answer (a broken or wrapped qemu on `PATH`, a foreign JVM under qemu-user, llvm-objdump and
//! llvm-mca on a user's image), so each run is killed and reported past its limit, never waited
//! on forever. Builds have their own confined runner ([`crate::build_confine`]).

use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How much of a tool's stdout and of its stderr is kept, in bytes (each): a disassembly of a
/// large user object (a few MiB) fits; a runaway writer is an error, not buffered without end.
pub const KEPT_BYTES: u64 = 256 << 20;

/// A tool answering `--version` or `-cpu help`.
pub const QUICK: Duration = Duration::from_secs(20);
/// A build step of a probe (clang, ld.lld), a probe guest under qemu-user, a disassembly or an
/// llvm-mca prediction of one image (about a second each here).
pub const BUILD: Duration = Duration::from_secs(120);
/// `java -version` of another architecture's JVM under qemu-user (measured 5-15 s here).
pub const FOREIGN_JVM: Duration = Duration::from_secs(120);

/// Runs `cmd` (stdin closed, in its own process group) and collects its output like
/// [`Command::output`], killing the group after `limit`.
///
/// Errors: the spawn error, [`std::io::ErrorKind::TimedOut`] naming the limit, or
/// [`std::io::ErrorKind::FileTooLarge`] when stdout or stderr passed [`KEPT_BYTES`] (the output
/// is never cut silently).
pub fn output(cmd: &mut Command, limit: Duration) -> std::io::Result<Output> {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0).spawn()?;
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let status = wait(&mut child, limit);
    let collect = |h: Option<JoinHandle<(Vec<u8>, bool)>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    let ((stdout, cut_out), (stderr, cut_err)) = (collect(stdout), collect(stderr));
    let status = status?;
    if cut_out || cut_err {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("wrote more than {} MiB to {}", KEPT_BYTES >> 20, if cut_out { "stdout" } else { "stderr" }),
        ));
    }
    Ok(Output { status, stdout, stderr })
}

/// Reads a pipe to its end on a thread, keeping [`KEPT_BYTES`] and discarding the rest: the
/// bytes kept and whether any were discarded.
fn drain(pipe: impl std::io::Read + Send + 'static) -> JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut pipe = pipe;
        let _ = pipe.by_ref().take(KEPT_BYTES).read_to_end(&mut kept);
        let rest = std::io::copy(&mut pipe, &mut std::io::sink()).unwrap_or(0);
        (kept, rest > 0)
    })
}

/// Waits for `child` up to `limit`; past it, kills its process group (so the pipes close and
/// the readers end) and reports the time-out.
fn wait(child: &mut Child, limit: Duration) -> std::io::Result<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() >= until {
            if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {} s: killed", limit.as_secs()),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_that_answers_gives_its_output() {
        let out = output(Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]), QUICK).unwrap();
        assert_eq!(
            (out.stdout.as_slice(), out.stderr.as_slice(), out.status.code()),
            (&b"out\n"[..], &b"err\n"[..], Some(3))
        );
    }

    #[test]
    fn a_hanging_probe_and_its_children_are_killed_at_the_limit() {
        let started = Instant::now();
        let err =
            output(Command::new("sh").args(["-c", "sleep 30 & sleep 30"]), Duration::from_millis(200)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(10), "the background sleep kept a pipe open");
    }
}

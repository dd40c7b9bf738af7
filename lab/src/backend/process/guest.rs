//! The guest process: its command line and confinement, start, end and how it ended, its bounded
//! stderr, and the one-off probe of a qemu `-cpu` string.

use std::os::unix::process::ExitStatusExt;

use super::*;

/// A pipe as (read end, write end), both close-on-exec and numbered 10 or higher.
pub(super) fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| format!("pipe2 failed: {e}"))?;
    Ok((high_fd(r)?, high_fd(w)?))
}

/// Bytes the guest wrote to its stdout so far (none is the only right answer), read without
/// blocking: the guest wrote them before its reply, so they are already in the pipe.
pub(super) fn stray_output(stdout: &mut ChildStdout) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = stdout.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
        if got.len() >= 1 << 16 {
            break;
        }
    }
    got
}

/// Starts `program -cpu cpu image` once without the protocol's fds (the guest's `_start` then
/// ends with one of its own exit statuses, [`protocol::exit`], `MMAP`) and says why it cannot
/// run, if qemu itself refuses (exit 1, its words on stderr): a qemu-user older than the variant's CPU
/// model (say, without the RISC-V `zbb=` property, added in qemu 7.x) refuses the `-cpu`
/// string and would otherwise fail every case of every batch as a crash. The answer is kept
/// per (program, cpu) for the life of the process.
///
/// Not confined, unlike every guest: without the protocol's fds the lab's own `_start` exits
/// before any kernel symbol is reached, and Landlock would refuse a qemu that is a wrapper
/// script (its `exec` of the real qemu), hiding qemu's own refusal behind EACCES.
pub(super) fn probe_qemu(program: &Path, cpu: &str, image: &Path) -> Result<(), String> {
    /// (qemu binary, -cpu model) -> whether it starts.
    type Probes = HashMap<(PathBuf, String), Result<(), String>>;
    static PROBED: OnceLock<Mutex<Probes>> = OnceLock::new();
    let key = (program.to_path_buf(), cpu.to_string());
    let probed = PROBED.get_or_init(Mutex::default);
    if let Some(known) = probed.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return known;
    }
    let start =
        || crate::tool_run::output(Command::new(program).args(["-cpu", cpu]).arg(image), crate::tool_run::BUILD);
    // Killed from outside (no qemu refusal ends by a signal): ask once more.
    let out = start().and_then(|out| if out.status.code().is_none() { start() } else { Ok(out) });
    let answer = match out {
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(e.to_string()),
        Err(e) => Err(format!("cannot start: {e}")),
        // The guest ran: qemu accepted the CPU model (1 is qemu's own failure, no `_start` status).
        Ok(out) if out.status.code().is_some_and(|c| c != 1 && protocol::exit::describe(c).is_some()) => Ok(()),
        Ok(out) if out.status.code().is_none() => {
            Err(format!("cannot start `-cpu {cpu}`: killed twice from outside ({})", out.status))
        }
        Ok(out) => Err(format!(
            "cannot start `-cpu {cpu}` ({}): {}; this qemu-user lacks the CPU model or a property the variant \
             needs (the lab needs qemu-user 7.2 or newer, Debian package qemu-user from bookworm)",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    };
    if let Ok(mut m) = probed.lock() {
        m.insert(key, answer.clone());
    }
    answer
}

/// Whether a guest that died without a reply (`how`: [`ProcessBackend::reap`]'s words) was
/// killed by SIGKILL. The lab never SIGKILLs a guest it still waits on, and the seccomp
/// allow-list lets a guest signal only its own process: so either someone outside killed it (an
/// operator, the OOM killer), and the batch proves nothing about its calls, or the kernel
/// killed itself, and it does so again when the batch runs a second time on a fresh guest
/// (then the calls are stepped one at a time as for any other death).
pub(super) fn killed_from_outside(how: &str) -> bool {
    how.starts_with("signal: 9 (SIGKILL)")
}

/// Bytes of a guest's stderr kept for reports; the rest is read (so the guest never blocks on
/// a full pipe) and counted, not kept: a guest that writes hundreds of MiB cannot grow the lab
/// or its report.
pub(super) const STDERR_KEPT: usize = 4096;

/// A guest's stderr as report text: its first [`STDERR_KEPT`] bytes with control characters
/// escaped (a guest's escape sequences must not reach the user's terminal), and how many bytes
/// followed.
pub(super) fn bounded_stderr(from: &mut impl Read) -> String {
    let mut kept = Vec::with_capacity(STDERR_KEPT);
    let mut buf = [0u8; 8192];
    let mut rest: u64 = 0;
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let take = n.min(STDERR_KEPT - kept.len());
                kept.extend_from_slice(&buf[..take]);
                rest += (n - take) as u64;
            }
        }
    }
    let mut text = escape_controls(&String::from_utf8_lossy(&kept));
    if rest > 0 {
        text.push_str(&format!(" ... and {rest} more bytes"));
    }
    text
}

/// `text` with every control character but newline and tab written as an escape (`\u{1b}`).
pub(crate) fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() && c != '\n' && c != '\t' { c.escape_unicode().to_string() } else { c.to_string() })
        .collect()
}

/// Waits for a guest (`child`, traced by `witness` or not) to end and says how. A traced guest is
/// reaped by its tracer (every thread of it reports there first; a `waitpid` of its pid from
/// another thread could take a ptrace stop for an exit), so this waits for the tracer instead.
pub(super) fn wait_guest(
    child: &mut Child,
    witness: Option<&mut witness::Witness>,
) -> std::io::Result<std::process::ExitStatus> {
    match witness.and_then(|w| w.finish()) {
        Some(raw) => Ok(std::process::ExitStatus::from_raw(raw)),
        None => child.wait(),
    }
}

impl ProcessBackend {
    /// The guest's command: stdin empty, stdout and stderr piped, and the protocol's fds in
    /// place (`pre_exec`). Kept apart from the I/O set-up so confinement can extend it alone.
    ///
    /// Confinement (backend/process/confine.rs) goes first: its `pre_exec` runs before the dup2 below,
    /// while its own descriptors (the Landlock ruleset) may still sit on fds 3-5.
    pub(super) fn command(&self, handed: [RawFd; 3]) -> Result<Command, BackendError> {
        let mut cmd = Command::new(&self.program);
        if let Some((_, (start, end))) = &self.trace {
            cmd.args(crate::backend::exec_trace::qemu_args(*start, *end));
        }
        cmd.args(&self.args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let arena = (self.arena.addr, self.arena.addr + self.arena.size);
        let protectable: Vec<(u64, u64)> = std::iter::once(arena).chain(self.arena.kernel_data).collect();
        let guest = match self.kind {
            BackendKind::Native => Confined::Native { image: &self.image, protectable: &protectable },
            _ => Confined::Qemu { qemu: &self.program, image: &self.image },
        };
        confine::confine(&mut cmd, &guest, self.support).map_err(|e| self.error(format!("cannot confine: {e}")))?;
        let targets = [protocol::fd::ARENA, protocol::fd::REQUEST, protocol::fd::REPLY];
        // SAFETY: only dup2 (async-signal-safe) between fork and exec. The sources are >= 10,
        // the targets 3-5, so no source is overwritten; dup2 clears close-on-exec on targets.
        unsafe {
            cmd.pre_exec(move || {
                for (src, dst) in handed.iter().zip(targets) {
                    if libc::dup2(*src, dst as RawFd) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        Ok(cmd)
    }

    pub(super) fn spawn(&mut self) -> Result<Guest, BackendError> {
        if let Some(sig) = crate::interrupt::interrupted() {
            return Err(self.error(format!("not started: the lab was interrupted by {}", crate::interrupt::name(sig))));
        }
        let arena_fd = self.shared.as_ref().map(|s| s.fd.as_raw_fd()).expect("arena created");
        let (req_r, req_w) = pipe().map_err(|e| self.error(e))?;
        let (rep_r, rep_w) = pipe().map_err(|e| self.error(e))?;
        let mut cmd = self.command([arena_fd, req_r.as_raw_fd(), rep_w.as_raw_fd()])?;
        let mut witness = self.prepare_witness(&mut cmd);
        let spawned = cmd.spawn();
        let traced = witness.as_mut().map(|(w, ends, rx)| {
            drop(ends.take());
            w.traced(rx)
        });
        let mut child = spawned.map_err(|e| self.error(format!("cannot start: {e}")))?;
        let witness = match (witness, traced) {
            (Some((w, _, _)), Some(Ok(()))) => Some(w),
            (_, Some(Err(why))) => {
                witness::note_gap(&why);
                None
            }
            _ => None,
        };
        crate::interrupt::register(child.id());
        drop((req_r, rep_w)); // the child's ends
        let stdout = child.stdout.take().expect("piped stdout");
        // O_NONBLOCK on our own read end: stray output is polled, never waited for. (F_SETFL on
        // a pipe end this process owns does not fail on Linux.)
        let _ = rustix::fs::fcntl_setfl(&stdout, rustix::fs::OFlags::NONBLOCK);
        let mut stderr = child.stderr.take().expect("piped stderr");
        let replies = File::from(rep_r);
        let (etx, stderr_rx) = mpsc::channel();
        let trace = self.trace.as_ref().map(|(t, _)| std::sync::Arc::clone(t));
        thread::spawn(move || {
            let text = match trace {
                Some(t) => escape_controls(&t.drain(&mut stderr)),
                None => bounded_stderr(&mut stderr),
            };
            let _ = etx.send(text);
        });
        Ok(Guest { child, requests: File::from(req_w), replies, stdout, stderr: stderr_rx, seq: 0, witness })
    }

    /// A tracer for a qemu-user guest (witness.rs), its half of the handshake added to `cmd`;
    /// `None` natively (the batch filter denies what the witness sees), without seccomp, or when
    /// the tracer cannot start (noted as a gap).
    fn prepare_witness(
        &self,
        cmd: &mut Command,
    ) -> Option<(witness::Witness, Option<witness::ChildEnds>, witness::Seized)> {
        if self.kind != BackendKind::Qemu || !self.limits.witness || !self.support.seccomp {
            return None;
        }
        let ready = confine::witness_filter()
            .map_err(|e| format!("the witness's seccomp filter: {e}"))
            .and_then(|filter| witness::Witness::prepare(self.watch()).map(|w| (w, filter)));
        match ready {
            Ok(((w, ends, rx), filter)) => {
                ends.hand_to(cmd, filter);
                Some((w, Some(ends), rx))
            }
            Err(why) => {
                witness::note_gap(&why);
                None
            }
        }
    }

    /// The guest addresses the witness watches: every segment of the image and the arena.
    fn watch(&self) -> witness::Watch {
        let (lo, hi) = (self.arena.addr, self.arena.addr + self.arena.size);
        let (lo, hi) = self.span.iter().fold((lo, hi), |(l, h), &(a, b)| (l.min(a), h.max(b)));
        witness::Watch { span: (lo, hi), arena: self.arena.addr }
    }

    /// Ends the guest and says how it ended (exit status with its meaning, or signal, and its
    /// stderr).
    pub(super) fn reap(&mut self) -> String {
        let Some(mut g) = self.guest.take() else { return String::new() };
        drop(g.requests);
        // The whole group: anything the guest started goes with it. Forget the pid before it
        // is reaped and free for reuse.
        crate::sandbox::kill_group(g.child.id());
        crate::interrupt::unregister(g.child.id());
        let status = match wait_guest(&mut g.child, g.witness.as_mut()) {
            Ok(s) => match s.code().and_then(protocol::exit::describe) {
                Some(meaning) => format!("{s} ({meaning})"),
                None => s.to_string(),
            },
            Err(_) => String::new(),
        };
        let stderr = g.stderr.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
        let stderr = stderr.trim();
        if stderr.is_empty() {
            status
        } else {
            format!("{status}; stderr: {stderr}")
        }
    }
}

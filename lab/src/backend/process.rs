//! qemu-user and native backends: the image's `_start` as a long-lived child process, fed
//! batches over stdin and answering on stdout (kernels/README.md, "`_start` I/O loop").
//! A qemu-user process costs about 20 ms to start (docs/DESIGN.md), so it is started once and
//! restarted only after the guest dies.
//!
//! A batch past its time budget is poked with SIGUSR1: the guest's fault handler reports the PC
//! and the call in flight like any fault, and the lab resumes at the next call. Only a guest
//! that does not answer the poke within [`POKE_GRACE`] is killed without a PC.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use super::confine::{self, Guest as Confined, Support};
use super::{Backend, BackendError, BackendKind, Fault, FaultKind, Limits, RawRun};
use crate::image::Image;
use crate::toolchain;

/// How long a poked guest has to send its fault frame before it is killed.
pub const POKE_GRACE: Duration = Duration::from_secs(2);

/// How [`ProcessBackend::reap`] describes a guest the kernel killed with SIGSYS (ExitStatus's
/// Display). Only the lab's seccomp filter does that: a trapped call made while the guest had
/// every signal blocked (qemu-user blocks them around its `fork`).
const SIGSYS_DEATH: &str = "signal: 31 (SIGSYS)";
const REFUSED_BLOCKED: &str = "refused by the lab's seccomp filter while the guest blocked every signal (qemu-user \
     does around fork), so the guest could not report the call: it was killed by SIGSYS";

/// Frame tags written by the guest's `_start`.
const TAG_RESULT: u64 = 0;
const TAG_FAULT: u64 = 1;

/// A frame read from the guest, or how the stream ended.
enum Frame {
    Result(Vec<u8>),
    Fault { signo: u64, addr: u64, pc: u64, current: u64, resp: Vec<u8> },
    Closed(String),
}

/// A running guest process with a reader thread for its stdout.
struct Guest {
    child: Child,
    stdin: ChildStdin,
    frames: Receiver<Frame>,
    stderr: Receiver<String>,
}

/// qemu-user or native execution of the image.
pub struct ProcessBackend {
    kind: BackendKind,
    program: PathBuf,
    args: Vec<String>,
    limits: Limits,
    guest: Option<Guest>,
    /// Bytes of the architecture's system-call instruction (`ecall`, `svc #0`: 4; `syscall`: 2).
    syscall_len: u64,
    /// The guest's architecture (names the system calls it attempts).
    arch: crate::variant::Arch,
    /// The image, and `lab_arena` (address, size) for the native allow-list.
    image: PathBuf,
    arena: (u64, u64),
    /// Confinement the kernel offers (backend/confine.rs).
    support: Support,
}

fn syscall_len(arch: crate::variant::Arch) -> u64 {
    match arch {
        crate::variant::Arch::X86_64 => 2,
        _ => 4,
    }
}

fn read_u64(r: &mut impl Read) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// No frame is longer than the arena plus the fault words; anything longer is a corrupt stream
/// (say, a fault frame interleaved with a result frame), not an allocation to attempt.
const MAX_FRAME: usize = (64 << 20) + 32;

fn read_frame(r: &mut impl Read) -> std::io::Result<Frame> {
    let tag = read_u64(r)?;
    let len = read_u64(r)? as usize;
    if len > MAX_FRAME {
        return Ok(Frame::Closed(format!("protocol error: frame tag {tag} claims {len} bytes")));
    }
    let mut data = vec![0u8; len];
    r.read_exact(&mut data)?;
    Ok(match tag {
        TAG_RESULT => Frame::Result(data),
        TAG_FAULT if len >= 32 => {
            let w = |i: usize| u64::from_le_bytes(data[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            Frame::Fault { signo: w(0), addr: w(1), pc: w(2), current: w(3), resp: data[32..].to_vec() }
        }
        other => Frame::Closed(format!("protocol error: frame tag {other}, length {len}")),
    })
}

/// Sends SIGUSR1 to a guest past its budget and waits briefly for the frame its handler sends.
fn poke(g: &mut Guest) -> Option<Frame> {
    let pid = libc::pid_t::try_from(g.child.id()).ok()?;
    // SAFETY: `kill` only sends a signal to our own child process; no memory is involved.
    if unsafe { libc::kill(pid, libc::SIGUSR1) } != 0 {
        return None;
    }
    g.frames.recv_timeout(POKE_GRACE).ok()
}

impl ProcessBackend {
    /// `qemu-<arch> -cpu <cpu> <image>`.
    ///
    /// # Errors
    /// The qemu binary is missing ([`BackendError::Tool`], naming `qemu-user`).
    pub fn qemu(image: &Image, cpu: &str, limits: Limits) -> Result<Self, BackendError> {
        let program = toolchain::find(toolchain::qemu_tool(image.arch))?;
        let args = vec!["-cpu".into(), cpu.into(), image.path.display().to_string()];
        Self::new(BackendKind::Qemu, program, args, image, limits)
    }

    fn new(
        kind: BackendKind,
        program: PathBuf,
        args: Vec<String>,
        image: &Image,
        limits: Limits,
    ) -> Result<Self, BackendError> {
        let arena = image.arena()?;
        Ok(ProcessBackend {
            kind,
            program,
            args,
            limits,
            guest: None,
            syscall_len: syscall_len(image.arch),
            arch: image.arch,
            image: image.path.clone(),
            arena: (arena.addr, arena.size),
            support: Support::probe(),
        })
    }

    /// The image executed directly (x86_64 host, x86_64 image).
    ///
    /// # Errors
    /// An image without `lab_arena`.
    pub fn native(image: &Image, limits: Limits) -> Result<Self, BackendError> {
        Self::new(BackendKind::Native, image.path.clone(), Vec::new(), image, limits)
    }

    fn spawn(&self) -> Result<Guest, BackendError> {
        if let Some(sig) = crate::interrupt::interrupted() {
            return Err(self.error(format!("not started: the lab was interrupted by {}", crate::interrupt::name(sig))));
        }
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let guest = match self.kind {
            BackendKind::Native => Confined::Native { image: &self.image, arena: self.arena },
            _ => Confined::Qemu { qemu: &self.program, image: &self.image },
        };
        confine::confine(&mut cmd, &guest, self.support).map_err(|e| self.error(format!("cannot confine: {e}")))?;
        let mut child = cmd.spawn().map_err(|e| self.error(format!("cannot start: {e}")))?;
        crate::interrupt::register(child.id());
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let (tx, frames) = mpsc::channel();
        thread::spawn(move || loop {
            let frame = read_frame(&mut stdout).unwrap_or_else(|e| Frame::Closed(e.to_string()));
            let closed = matches!(frame, Frame::Closed(_) | Frame::Fault { .. });
            if tx.send(frame).is_err() || closed {
                break;
            }
        });
        let (etx, stderr_rx) = mpsc::channel();
        thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            let _ = etx.send(s);
        });
        Ok(Guest { child, stdin, frames, stderr: stderr_rx })
    }

    fn error(&self, reason: String) -> BackendError {
        BackendError::Process { program: self.program.display().to_string(), reason }
    }

    /// Ends the guest after it reported a fault itself; returns what it wrote to stderr.
    fn reap_stderr(&mut self) -> String {
        let how = self.reap();
        how.split_once("; stderr: ").map(|(_, e)| e.to_string()).unwrap_or_default()
    }

    /// Ends the guest and says how it ended (exit status or signal, and its stderr).
    fn reap(&mut self) -> String {
        let Some(mut g) = self.guest.take() else { return String::new() };
        drop(g.stdin);
        // The whole group: anything the guest started goes with it.
        confine::kill_group(g.child.id());
        // Forget the pid before it is reaped and free for reuse.
        crate::interrupt::unregister(g.child.id());
        let status = g.child.wait().map(|s| s.to_string()).unwrap_or_default();
        let stderr = g.stderr.recv_timeout(std::time::Duration::from_secs(1)).unwrap_or_default();
        let stderr = stderr.trim();
        if stderr.is_empty() {
            status
        } else {
            format!("{status}; stderr: {stderr}")
        }
    }
}

impl Backend for ProcessBackend {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    fn execute(&mut self, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
        if self.guest.is_none() {
            self.guest = Some(self.spawn()?);
        }
        let g = self.guest.as_mut().expect("guest started");
        let sent = g
            .stdin
            .write_all(&(payload.len() as u64).to_le_bytes())
            .and_then(|()| g.stdin.write_all(payload))
            .and_then(|()| g.stdin.flush());
        let frame = match sent {
            Err(e) => Frame::Closed(format!("writing the batch failed: {e}")),
            Ok(()) => match g.frames.recv_timeout(self.limits.batch_time) {
                Ok(f) => f,
                Err(RecvTimeoutError::Timeout) => match poke(g) {
                    Some(f @ Frame::Fault { .. }) => f,
                    _ => {
                        let detail = self.reap();
                        let fault =
                            Fault { kind: FaultKind::Hang(self.limits.batch_time), pc: None, call: None, detail };
                        return Ok(RawRun { resp: payload[..resp_len].to_vec(), fault: Some(fault) });
                    }
                },
                Err(RecvTimeoutError::Disconnected) => Frame::Closed("output closed".into()),
            },
        };
        match frame {
            Frame::Result(resp) if resp.len() == resp_len => Ok(RawRun { resp, fault: None }),
            Frame::Result(resp) => {
                Err(self.error(format!("protocol error: {} response bytes, expected {resp_len}", resp.len())))
            }
            Frame::Fault { signo, addr, pc, current, mut resp } => {
                // The guest said what happened; only its stderr (qemu's own words) adds to it.
                let detail = self.reap_stderr();
                resp.resize(resp_len, 0);
                let kind = match FaultKind::from_signal(signo, addr) {
                    FaultKind::Hang(_) => FaultKind::Hang(self.limits.batch_time),
                    k => k,
                };
                let (kind, pc) = match kind {
                    // SIGSYS (syscall user dispatch or seccomp): the PC is past the system-call
                    // instruction, and the driver reports the call's number in place of si_addr.
                    FaultKind::SystemCall { .. } => (
                        FaultKind::SystemCall { nr: Some(addr), name: confine::syscall_name(self.arch, addr) },
                        pc.wrapping_sub(self.syscall_len),
                    ),
                    k => (k, pc),
                };
                let fault = Fault { kind, pc: Some(pc), call: usize::try_from(current).ok(), detail };
                Ok(RawRun { resp, fault: Some(fault) })
            }
            Frame::Closed(why) => {
                let how = self.reap();
                let fault = match how.starts_with(SIGSYS_DEATH) {
                    true => Fault {
                        kind: FaultKind::SystemCall { nr: None, name: None },
                        pc: None,
                        call: None,
                        detail: format!("{REFUSED_BLOCKED} ({how})"),
                    },
                    false => Fault { kind: FaultKind::Crash(how), pc: None, call: None, detail: why },
                };
                Ok(RawRun { resp: payload[..resp_len].to_vec(), fault: Some(fault) })
            }
        }
    }
}

impl Drop for ProcessBackend {
    fn drop(&mut self) {
        let _ = self.reap();
    }
}

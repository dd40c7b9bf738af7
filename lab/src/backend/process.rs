//! qemu-user and native backends: the image's `_start` as a long-lived child process, fed
//! batches over stdin and answering on stdout (kernels/README.md, "`_start` I/O loop").
//! A qemu-user process costs about 20 ms to start (docs/DESIGN.md), so it is started once and
//! restarted only after the guest dies.
//!
//! A batch past its time budget is poked with SIGUSR1: the guest's fault handler reports the PC
//! and the call in flight like any fault, and the lab resumes at the next call. Only a guest
//! that does not answer the poke within [`POKE_GRACE`] is killed without a PC.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use super::{Backend, BackendError, BackendKind, Fault, FaultKind, Limits, RawRun};
use crate::image::Image;
use crate::toolchain;

/// How long a poked guest has to send its fault frame before it is killed.
pub const POKE_GRACE: Duration = Duration::from_secs(2);

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

/// Starts `program -cpu cpu image` once with an empty stdin (the driver's `_start` exits 0 at
/// EOF) and says why it cannot run, if it cannot: a qemu-user older than the variant's CPU
/// model (say, without the RISC-V `zbb=` property, added in qemu 7.x) refuses the `-cpu`
/// string and would otherwise fail every case of every batch as a crash. The answer is kept
/// per (program, cpu) for the life of the process.
fn probe_qemu(program: &Path, cpu: &str, image: &Path) -> Result<(), String> {
    static PROBED: OnceLock<Mutex<HashMap<(PathBuf, String), Result<(), String>>>> = OnceLock::new();
    let key = (program.to_path_buf(), cpu.to_string());
    let probed = PROBED.get_or_init(Mutex::default);
    if let Some(known) = probed.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return known;
    }
    let answer = match Command::new(program).args(["-cpu", cpu]).arg(image).stdin(Stdio::null()).output() {
        Err(e) => Err(format!("cannot start: {e}")),
        Ok(out) if out.status.success() => Ok(()),
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

impl ProcessBackend {
    /// `qemu-<arch> -cpu <cpu> <image>`, after a probe that qemu accepts the CPU model.
    ///
    /// # Errors
    /// The qemu binary is missing ([`BackendError::Tool`], naming `qemu-user`), or it refuses
    /// the variant's `-cpu` string ([`BackendError::Process`], with qemu's words).
    pub fn qemu(image: &Image, cpu: &str, limits: Limits) -> Result<Self, BackendError> {
        let program = toolchain::find(toolchain::qemu_tool(image.arch))?;
        probe_qemu(&program, cpu, &image.path)
            .map_err(|reason| BackendError::Process { program: program.display().to_string(), reason })?;
        let args = vec!["-cpu".into(), cpu.into(), image.path.display().to_string()];
        Ok(ProcessBackend {
            kind: BackendKind::Qemu,
            program,
            args,
            limits,
            guest: None,
            syscall_len: syscall_len(image.arch),
        })
    }

    /// The image executed directly (x86_64 host, x86_64 image).
    ///
    /// # Errors
    /// None today; the signature matches the other constructors.
    pub fn native(image: &Image, limits: Limits) -> Result<Self, BackendError> {
        let program = image.path.clone();
        let syscall_len = syscall_len(image.arch);
        Ok(ProcessBackend { kind: BackendKind::Native, program, args: Vec::new(), limits, guest: None, syscall_len })
    }

    fn spawn(&self) -> Result<Guest, BackendError> {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.error(format!("cannot start: {e}")))?;
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
        let _ = g.child.kill();
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
                let pc = match kind {
                    // SIGSYS from syscall user dispatch: the PC is past the system-call instruction.
                    FaultKind::SystemCall => pc.wrapping_sub(self.syscall_len),
                    _ => pc,
                };
                let fault = Fault { kind, pc: Some(pc), call: usize::try_from(current).ok(), detail };
                Ok(RawRun { resp, fault: Some(fault) })
            }
            Frame::Closed(why) => {
                let how = self.reap();
                let fault = Fault { kind: FaultKind::Crash(how), pc: None, call: None, detail: why };
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

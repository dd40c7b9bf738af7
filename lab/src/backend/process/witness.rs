//! The host's witness of a qemu-user guest (issue 28): what the guest asks of the host kernel
//! while its calls run, seen from outside the guest's process.
//!
//! qemu-user runs guest code in its own address space, so kernel code can reach qemu's memory
//! and its emulated signal handlers; nothing inside the guest process is a sound witness. The
//! host kernel is: every protection change of a guest (`mprotect`, `mmap`, ... through qemu) is
//! a host system call of the qemu process, and every touch of a guard page or read-only page is
//! a host SIGSEGV delivered to it, whatever handler the guest installed inside qemu. The lab
//! traces the guest with `ptrace(2)` (`PTRACE_SEIZE` before `execve`, `PTRACE_O_TRACESECCOMP`,
//! `PTRACE_O_TRACECLONE`, `PTRACE_O_EXITKILL`): a seccomp filter ([`super::confine::witness_filter`])
//! stops the guest at those calls (`SECCOMP_RET_TRACE`) and at the driver's protocol calls
//! (`read` of the request fd, `write` of the reply fd, and the `getppid` the drivers make right
//! after their protection table is in force), and the tracer sees every signal before qemu does.
//!
//! The tracer follows the driver's phases on the guest's first thread: set-up (`_start`,
//! ignored) until the first request is read, then per request: protections (the driver's own
//! `mprotect`s) until its `getppid`, then calls (kernel code runs) until a reply is written. A
//! change to the image's or arena's mappings during calls or after the reply, from any thread
//! but in the driver's protection phase, and a host SIGSEGV/SIGBUS the driver's reply does not
//! report, are [`Event`]s the host fails the batch with: a lift undone before the call returned
//! and a fault swallowed by a handler kernel code installed (and restored) leave no trace in the
//! arena, but they do here.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use seccompiler::BpfProgram;

use crate::protocol::token;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The driver's phase on the guest's first thread, as the tracer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `_start`: before the first request was read.
    SetUp,
    /// A request was read; the driver puts its protection table in force.
    Protect,
    /// The driver's `getppid` marker passed: kernel code runs.
    Calls,
    /// A reply was written: only the driver's handler check and the next `read` follow.
    Replied,
}

/// What the tracer saw that the driver's own sequence never makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A host system call (`call`: its name) on the guest's mappings: `addr`, `len` host
    /// addresses and bytes; `arg` the protection (`mprotect`, `mmap`), advice or flags.
    Memory { call: &'static str, addr: u64, len: u64, arg: u64, phase: Phase, thread: bool },
    /// A host SIGSEGV (11) or SIGBUS (7) at host address `addr` while the calls ran.
    Signal { signo: i32, addr: u64, phase: Phase },
    /// A protocol call (`read` of the request fd, `write` of the reply fd, the marker) made by
    /// a thread other than the driver's.
    ThreadProtocol { call: &'static str },
}

/// What the tracer keeps for the host: events since the last [`Witness::take`], the guest's
/// `guest_base` once `_start` mapped the arena, and how the first thread ended.
#[derive(Debug, Default)]
struct Shared {
    events: Vec<Event>,
    base: Option<u64>,
    exit: Option<i32>,
}

/// The guest's addresses the tracer watches: the image's span (its segments and `lab_arena`)
/// and the arena's guest address, to learn `guest_base` from `_start`'s `mmap` of the arena fd.
#[derive(Debug, Clone, Copy)]
pub struct Watch {
    /// Guest addresses `[lo, hi)` of the image and its arena.
    pub span: (u64, u64),
    /// `lab_arena`'s guest address.
    pub arena: u64,
}

/// A running tracer of one guest.
pub struct Witness {
    shared: Arc<Mutex<Shared>>,
    thread: Option<JoinHandle<()>>,
}

/// Where the tracer thread says whether it seized the child (`Err`: why not).
pub type Seized = Receiver<Result<(), String>>;

/// The byte the tracer sends the child when it is traced (the child then installs the filter
/// that stops it for the tracer); any other byte, or none: it runs untraced.
pub const TRACED: u8 = b'y';

/// The child's ends of the start-up handshake ([`Witness::prepare`]): it writes its pid (a
/// native-endian `i32`) to `pid`, then reads one byte from `go` before it installs the filter.
pub struct ChildEnds {
    /// Write end: the child's pid.
    pub pid: OwnedFd,
    /// Read end: [`TRACED`] once the tracer holds the child.
    pub go: OwnedFd,
    /// The tracer's ends, which the forked child inherits and closes first (so a tracer that
    /// died leaves the child EOF, not a wait forever).
    parents: [RawFd; 2],
}

impl ChildEnds {
    /// Adds the child's half of the handshake to `cmd` (after every other `pre_exec`): name
    /// itself, wait for the tracer, then install `filter` ([`super::confine::witness_filter`]),
    /// whose `SECCOMP_RET_TRACE` would fail every watched call with ENOSYS were no tracer there.
    pub fn hand_to(&self, cmd: &mut Command, filter: BpfProgram) {
        let (pid_fd, go_fd, parents) = (self.pid.as_raw_fd(), self.go.as_raw_fd(), self.parents);
        // SAFETY: the closure runs in the forked child before exec and makes plain system
        // calls on descriptors it inherited and on a filter built before the fork.
        unsafe {
            cmd.pre_exec(move || {
                for fd in parents {
                    libc::close(fd);
                }
                let pid = libc::getpid().to_ne_bytes();
                libc::write(pid_fd, pid.as_ptr().cast(), pid.len());
                let mut byte = [0u8];
                if libc::read(go_fd, byte.as_mut_ptr().cast(), 1) == 1 && byte[0] == TRACED {
                    seccompiler::apply_filter(&filter).map_err(std::io::Error::other)?;
                }
                Ok(())
            });
        }
    }
}

impl Witness {
    /// Starts the tracer thread, which waits for a child's pid on the handshake's pipe, seizes
    /// it and lets it go on (`Command::spawn` returns only after the child's `execve`, so the
    /// child, not the spawner, names itself). The caller hands [`ChildEnds`] to the child and
    /// drops them after the spawn, then asks [`traced`](Self::traced).
    ///
    /// # Errors
    /// A pipe or the thread cannot be made.
    pub fn prepare(watch: Watch) -> Result<(Witness, ChildEnds, Seized), String> {
        let (pid_r, pid_w) = super::guest::pipe()?;
        let (go_r, go_w) = super::guest::pipe()?;
        let parents = [pid_r.as_raw_fd(), go_w.as_raw_fd()];
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (tx, rx) = std::sync::mpsc::channel();
        let keep = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("witness".into())
            .spawn(move || {
                let mut word = [0u8; 4];
                // SAFETY: reads at most 4 bytes into `word`; EOF (the child failed before it
                // wrote) ends the thread.
                let n = unsafe { libc::read(pid_r.as_raw_fd(), word.as_mut_ptr().cast(), 4) };
                if n != 4 {
                    let _ = tx.send(Err("the guest did not name itself to the tracer".into()));
                    return;
                }
                let pid = i32::from_ne_bytes(word);
                let seized = seize(pid);
                let byte = if seized.is_ok() { TRACED } else { b'n' };
                // SAFETY: a one-byte write to a pipe this thread owns.
                unsafe { libc::write(go_w.as_raw_fd(), [byte].as_ptr().cast(), 1) };
                let ok = seized.is_ok();
                let _ = tx.send(seized);
                if ok {
                    Tracer { pid, watch, phase: Phase::SetUp, reading: false, execed: false, shared: keep }.run();
                }
            })
            .map_err(|e| format!("cannot start the tracer thread: {e}"))?;
        Ok((Witness { shared, thread: Some(thread) }, ChildEnds { pid: pid_w, go: go_r, parents }, rx))
    }

    /// After the spawn: whether the tracer holds the guest (`Err`: why not; the guest then runs
    /// untraced).
    pub fn traced(&self, rx: &Seized) -> Result<(), String> {
        match rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(r) => r,
            Err(_) => Err("the tracer never answered".into()),
        }
    }

    /// The events seen since the last call.
    pub fn take(&self) -> Vec<Event> {
        self.shared.lock().map(|mut s| std::mem::take(&mut s.events)).unwrap_or_default()
    }

    /// `guest_base` (host address of guest address 0), once `_start` mapped the arena.
    pub fn base(&self) -> Option<u64> {
        self.shared.lock().ok().and_then(|s| s.base)
    }

    /// Waits for the tracer to end (every traced thread gone: the caller killed the guest) and
    /// returns the first thread's wait status (`waitpid(2)`), when the tracer reaped it.
    pub fn finish(&mut self) -> Option<i32> {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.lock().ok().and_then(|s| s.exit)
    }
}

/// `PTRACE_SEIZE` with the witness's options.
fn seize(pid: i32) -> Result<(), String> {
    let opts =
        libc::PTRACE_O_TRACESECCOMP | libc::PTRACE_O_TRACECLONE | libc::PTRACE_O_EXITKILL | libc::PTRACE_O_TRACESYSGOOD;
    // SAFETY: PTRACE_SEIZE takes no memory; the options are a plain bit set.
    let r = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0usize, opts as usize) };
    if r != 0 {
        return Err(format!("ptrace(PTRACE_SEIZE) of the guest failed: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// The tracer's loop state.
struct Tracer {
    pid: i32,
    watch: Watch,
    phase: Phase,
    /// The first thread was resumed from a `read` of the request fd to stop at its return
    /// (`PTRACE_SYSCALL`): a read that returns bytes starts a request's protection phase.
    reading: bool,
    /// The first thread's `execve` succeeded (`PTRACE_EVENT_EXEC`): from then on the tracer
    /// reaps it; before, a failed `execve` is `Command::spawn`'s to reap.
    execed: bool,
    shared: Arc<Mutex<Shared>>,
}

impl Tracer {
    /// Serves every stop of every traced thread until none is left (`ECHILD`).
    fn run(mut self) {
        loop {
            if !self.execed && self.leader_ended_before_exec() {
                // Its `execve` failed: `Command::spawn` reaps it and says why.
                return;
            }
            let mut status = 0;
            // SAFETY: waits for this thread's tracees only (__WNOTHREAD): never another
            // backend's guest or a build the lab runs.
            let tid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL | libc::__WNOTHREAD) };
            if tid < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return;
            }
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                if tid == self.pid {
                    self.note(|s| s.exit = Some(status));
                }
                continue;
            }
            if libc::WIFSTOPPED(status) {
                self.stopped(tid, status);
            }
        }
    }

    /// Whether the next thing to report is the first thread's end before its `execve` (looked
    /// at without reaping it: `waitid` with `WNOWAIT`). Blocks until something is reported.
    fn leader_ended_before_exec(&self) -> bool {
        // SAFETY: an all-zero siginfo_t is valid; waitid fills it and reaps nothing (WNOWAIT).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WSTOPPED | libc::WNOWAIT | libc::__WALL | libc::__WNOTHREAD;
        // SAFETY: as above; P_ALL with this thread's tracees only (__WNOTHREAD).
        let r = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, flags) };
        // SAFETY: waitid filled si_pid and si_code for a child it reports.
        let (pid, code) = unsafe { (info.si_pid(), info.si_code) };
        r == 0 && pid == self.pid && matches!(code, libc::CLD_EXITED | libc::CLD_KILLED | libc::CLD_DUMPED)
    }

    /// One stop: a seccomp stop (a watched call), a signal about to be delivered, or another
    /// ptrace event (a new thread, a group stop), after which the thread goes on.
    fn stopped(&mut self, tid: i32, status: i32) {
        let sig = libc::WSTOPSIG(status);
        let event = status >> 16;
        let inject = match event {
            libc::PTRACE_EVENT_SECCOMP => {
                if let Some(SysInfo::Seccomp(nr, args)) = syscall_info(tid) {
                    self.call(tid, nr, args);
                }
                0
            }
            0 if sig == libc::SIGTRAP | 0x80 => {
                // A syscall stop (TRACESYSGOOD): the return of the request `read`.
                if let (true, Some(SysInfo::Exit(rval))) = (tid == self.pid, syscall_info(tid)) {
                    self.reading = false;
                    if rval > 0 {
                        self.phase = Phase::Protect;
                    }
                }
                0
            }
            libc::PTRACE_EVENT_EXEC => {
                self.execed = true;
                0
            }
            0 => {
                if sig == libc::SIGSEGV || sig == libc::SIGBUS {
                    self.signal(sig, siginfo_addr(tid));
                }
                sig
            }
            _ => 0,
        };
        // While the first thread is in its request `read`, every resume asks for the stop at
        // its return (a signal delivered in between must not lose it).
        let resume = if tid == self.pid && self.reading { libc::PTRACE_SYSCALL } else { libc::PTRACE_CONT };
        // SAFETY: resumes a thread stopped for this tracer; ESRCH (killed meanwhile) is fine.
        unsafe { libc::ptrace(resume, tid, 0usize, inject as usize) };
    }

    fn note(&self, f: impl FnOnce(&mut Shared)) {
        if let Ok(mut s) = self.shared.lock() {
            f(&mut s);
        }
    }

    /// A watched system call `nr` with `args` by thread `tid` (a `read` of the request fd by
    /// the first thread is followed to its return: [`Tracer::reading`]).
    fn call(&mut self, tid: i32, nr: i64, args: [u64; 6]) {
        let first = tid == self.pid;
        if let Some(name) = protocol_call(nr) {
            if !first {
                self.note(|s| s.events.push(Event::ThreadProtocol { call: name }));
                return;
            }
            match (name, self.phase) {
                // Only a read that returns a request starts its protection phase: a kernel's
                // non-blocking read of an empty pipe does not.
                ("read", _) => self.reading = true,
                ("getppid", Phase::Protect) => self.phase = Phase::Calls,
                ("write", _) => self.phase = Phase::Replied,
                _ => {}
            }
            return;
        }
        let Some((call, addr, len, arg)) = memory_call(nr, args) else { return };
        match self.phase {
            Phase::SetUp => {
                // `_start` (no kernel code has run): it maps the arena fd over `lab_arena`, whose
                // host address gives guest_base. qemu's own threads map their memory here too.
                if first && nr == libc::SYS_mmap && args[4] == crate::protocol::fd::ARENA {
                    let base = addr.wrapping_sub(self.watch.arena);
                    self.note(|s| s.base = Some(base));
                }
                return;
            }
            Phase::Protect if first => return,
            _ => {}
        }
        let base = self.shared.lock().ok().and_then(|s| s.base);
        let watched = match base {
            Some(b) => {
                let (lo, hi) = (self.watch.span.0.wrapping_add(b), self.watch.span.1.wrapping_add(b));
                addr < hi && addr.saturating_add(len.max(1)) > lo
            }
            None => true,
        };
        if watched {
            let phase = self.phase;
            self.note(|s| s.events.push(Event::Memory { call, addr, len, arg, phase, thread: !first }));
        }
    }

    /// A host SIGSEGV/SIGBUS at host address `addr` (0 when unknown).
    fn signal(&mut self, signo: i32, addr: u64) {
        if matches!(self.phase, Phase::SetUp | Phase::Protect) {
            // The driver's own code: it never faults there; qemu's own (self-modifying code
            // checks) are not the kernel's either.
            return;
        }
        let phase = self.phase;
        self.note(|s| s.events.push(Event::Signal { signo, addr, phase }));
    }
}

/// The name of the driver's protocol call `nr` (host numbering): the filter stops only `read`
/// of the request fd, `write` of the reply fd and `getppid`.
fn protocol_call(nr: i64) -> Option<&'static str> {
    match nr {
        libc::SYS_read => Some("read"),
        libc::SYS_write => Some("write"),
        libc::SYS_getppid => Some("getppid"),
        _ => None,
    }
}

/// A call that can change existing mappings: its name, the range it acts on (start address,
/// length) and its protection/advice/flags. An `mmap` without `MAP_FIXED` (or an `mremap`
/// without `MREMAP_FIXED`, for its target) only takes free addresses: qemu's own allocations.
fn memory_call(nr: i64, a: [u64; 6]) -> Option<(&'static str, u64, u64, u64)> {
    const MREMAP_FIXED: u64 = 2;
    Some(match nr {
        libc::SYS_mprotect => ("mprotect", a[0], a[1], a[2]),
        libc::SYS_pkey_mprotect => ("pkey_mprotect", a[0], a[1], a[2]),
        libc::SYS_mmap if a[3] & libc::MAP_FIXED as u64 != 0 => ("mmap", a[0], a[1], a[2]),
        libc::SYS_munmap => ("munmap", a[0], a[1], 0),
        // Moving a range onto the watched span is as much a change as moving one off it.
        libc::SYS_mremap if a[3] & MREMAP_FIXED != 0 => {
            let (lo, hi) = (a[0].min(a[4]), a[0].saturating_add(a[1]).max(a[4].saturating_add(a[2])));
            ("mremap", lo, hi - lo, a[3])
        }
        libc::SYS_mremap => ("mremap", a[0], a[1], a[3]),
        libc::SYS_madvise => ("madvise", a[0], a[1], a[2]),
        libc::SYS_remap_file_pages => ("remap_file_pages", a[0], a[1], a[2]),
        libc::SYS_shmat if a[1] != 0 => ("shmat", a[1], 1, a[2]),
        libc::SYS_shmdt => ("shmdt", a[0], 1, 0),
        _ => return None,
    })
}

/// What `PTRACE_GET_SYSCALL_INFO` (Linux 5.3) says of a stop.
enum SysInfo {
    /// A seccomp stop: the call's number and arguments.
    Seccomp(i64, [u64; 6]),
    /// A syscall-entry stop.
    Entry,
    /// A syscall-exit stop: the return value.
    Exit(i64),
}

/// The system call thread `tid` is stopped at.
fn syscall_info(tid: i32) -> Option<SysInfo> {
    // SAFETY: an all-zero ptrace_syscall_info is a valid value of the plain C struct.
    let mut info: libc::ptrace_syscall_info = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::ptrace_syscall_info>();
    // SAFETY: the kernel writes at most `size` bytes into `info`.
    let r = unsafe { libc::ptrace(libc::PTRACE_GET_SYSCALL_INFO, tid, size, &mut info as *mut _ as usize) };
    if r <= 0 {
        return None;
    }
    // SAFETY: `op` says which member of the union the kernel filled.
    unsafe {
        match info.op {
            libc::PTRACE_SYSCALL_INFO_SECCOMP => Some(SysInfo::Seccomp(info.u.seccomp.nr as i64, info.u.seccomp.args)),
            libc::PTRACE_SYSCALL_INFO_ENTRY => Some(SysInfo::Entry),
            libc::PTRACE_SYSCALL_INFO_EXIT => Some(SysInfo::Exit(info.u.exit.sval)),
            _ => None,
        }
    }
}

/// `si_addr` of the signal thread `tid` is stopped with (0 when it cannot be read).
fn siginfo_addr(tid: i32) -> u64 {
    // SAFETY: an all-zero siginfo_t is valid; the kernel fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: PTRACE_GETSIGINFO writes one siginfo_t.
    let r = unsafe { libc::ptrace(libc::PTRACE_GETSIGINFO, tid, 0usize, &mut info as *mut _ as usize) };
    if r != 0 {
        return 0;
    }
    // SAFETY: SIGSEGV and SIGBUS carry si_addr.
    unsafe { info.si_addr() as u64 }
}

/// Traces a short-lived `true` the way a guest is traced (the handshake, the filter, the
/// tracer): whether this host lets the witness run (`lab doctor`).
///
/// # Errors
/// Why not: `PTRACE_SEIZE` refused (a container's seccomp profile, Yama), no seccomp filter
/// mode, or `true` cannot start.
pub fn probe() -> Result<(), String> {
    let filter = super::confine::witness_filter().map_err(|e| format!("the witness's seccomp filter: {e}"))?;
    let (mut w, ends, rx) = Witness::prepare(Watch { span: (0, 0), arena: 0 })?;
    let mut cmd = Command::new("true");
    ends.hand_to(&mut cmd, filter);
    let child = cmd.spawn();
    drop(ends);
    let traced = w.traced(&rx);
    let mut child = child.map_err(|e| format!("cannot start `true`: {e}"))?;
    // The tracer ends once `true` has exited and reaps it; wait() then finds nothing.
    let _ = w.finish();
    let _ = child.wait();
    traced
}

/// Why a qemu-user guest ran without the witness, once per reason for the life of the process.
static GAPS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Notes that a guest runs untraced and why ([`gaps`]).
pub(super) fn note_gap(why: &str) {
    if let Ok(mut g) = GAPS.lock() {
        if !g.iter().any(|w| w == why) {
            g.push(why.to_string());
        }
    }
}

/// Why qemu-user guests of this process ran without the host's witness (ptrace refused, no
/// seccomp...): under those a protection lift undone within a call, or a fault swallowed by a
/// handler kernel code installed and restored, is not seen (docs/threat-model.md). Empty when
/// every guest was traced.
pub fn gaps() -> Vec<String> {
    GAPS.lock()
        .map(|g| {
            g.iter()
                .map(|w| {
                    format!(
                        "ran without the host's witness ({w}): a protection lift undone within a call or a fault \
                         swallowed by the kernel's own handler is not seen"
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

impl super::ProcessBackend {
    /// Holds what the witness saw since the last reply to `reply` (`None`: no reply, after the
    /// batch): a change to the guest's mappings while calls ran or after a reply, a protocol
    /// call from a thread the driver did not start, and a host SIGSEGV/SIGBUS the reply does
    /// not report (a fault reply reports one: same signal, same guest address) are kept for
    /// [`Backend::verify`](super::Backend::verify), which fails the batch with them.
    pub(super) fn judge_witness(&mut self, reply: Option<&[u64; token::REPLY_WORDS]>) {
        let Some(w) = self.guest.as_ref().and_then(|g| g.witness.as_ref()) else { return };
        let (events, base) = (w.take(), w.base());
        let guest = |host: u64| base.map_or(host, |b| host.wrapping_sub(b));
        let mut reported =
            reply.filter(|r| r[token::KIND] == token::KIND_FAULT).map(|r| (r[token::SIGNO], r[token::SI_ADDR]));
        for e in events {
            let seen = match e {
                Event::Memory { call, addr, len, arg, phase, thread } => {
                    let who = if thread { "a thread kernel code started" } else { "kernel code" };
                    let when = match phase {
                        Phase::Replied => "after the driver's reply",
                        _ => "while the batch's calls ran",
                    };
                    let at = guest(addr);
                    (
                        format!(
                            "{who} called {call}({at:#x}, {len:#x}, {arg:#x}) on the guest's image or arena {when} (seen \
                             by the host's tracer: a protection change, even one undone before the call returned)"
                        ),
                        at,
                        at.saturating_add(len),
                    )
                }
                Event::Signal { signo, addr, .. } => {
                    let at = guest(addr);
                    if reported.is_some_and(|(s, a)| s == signo as u64 && (base.is_none() || a == at)) {
                        reported = None;
                        continue;
                    }
                    let name = if signo == libc::SIGBUS { "SIGBUS" } else { "SIGSEGV" };
                    (
                        format!(
                            "the host saw {name} at {at:#x} while the batch's calls ran, which the driver never \
                             reported: kernel code caught it with a handler of its own (seen by the host's tracer)"
                        ),
                        at,
                        at.saturating_add(1),
                    )
                }
                Event::ThreadProtocol { call } => {
                    (format!("a thread kernel code started made the driver's `{call}` on the protocol's pipes"), 0, 0)
                }
            };
            self.witnessed.push(seen);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_calls_that_can_change_existing_mappings_are_watched() {
        let fixed = libc::MAP_FIXED as u64 | libc::MAP_SHARED as u64;
        let private = libc::MAP_PRIVATE as u64 | libc::MAP_ANONYMOUS as u64;
        assert_eq!(
            memory_call(libc::SYS_mmap, [0x40_0000, 0x1000, 3, fixed, 3, 0]),
            Some(("mmap", 0x40_0000, 0x1000, 3))
        );
        // Without MAP_FIXED the kernel picks free addresses: qemu's own allocations.
        assert_eq!(memory_call(libc::SYS_mmap, [0, 0x800_0000, 0, private, u64::MAX, 0]), None);
        assert_eq!(
            memory_call(libc::SYS_mprotect, [0x1000, 0x2000, 3, 0, 0, 0]),
            Some(("mprotect", 0x1000, 0x2000, 3))
        );
        // mremap with MREMAP_FIXED (2) spans both the old range and the new place.
        let moved = memory_call(libc::SYS_mremap, [0x1000, 0x1000, 0x1000, 3, 0x9000, 0]).expect("watched");
        assert_eq!((moved.1, moved.2), (0x1000, 0x9000));
        assert_eq!(memory_call(libc::SYS_read, [4, 0, 32, 0, 0, 0]), None);
        assert_eq!(protocol_call(libc::SYS_getppid), Some("getppid"));
    }

    /// A traced child whose `execve` fails is `Command::spawn`'s to reap (std panics when its
    /// wait finds the child gone): the tracer leaves it.
    #[test]
    fn a_failed_execve_is_an_error_not_a_panic() {
        let filter = super::super::confine::witness_filter().expect("filter");
        let (mut w, ends, rx) = Witness::prepare(Watch { span: (0, 0), arena: 0 }).expect("prepare");
        let mut cmd = Command::new("/nonexistent/qemu-riscv64");
        ends.hand_to(&mut cmd, filter);
        let spawned = cmd.spawn();
        drop(ends);
        let _ = w.traced(&rx);
        let err = spawned.expect_err("no such program");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
        assert_eq!(w.finish(), None, "the tracer did not reap the child");
    }

    /// Where the tests run, the witness works (the lab's own runs depend on it).
    #[test]
    fn the_witness_probe_traces_a_child() {
        assert_eq!(probe(), Ok(()));
    }

    #[test]
    fn the_witness_filter_compiles_for_this_host() {
        assert!(!super::super::confine::witness_filter().expect("filter").is_empty());
    }
}

//! qemu-user and native backends: the image's `_start` as a long-lived child process
//! (kernels/README.md, "`_start` I/O loop").
//!
//! The arena is shared memory: the host creates a memfd the size of `lab_arena`, maps it, and
//! hands it to the child as fd 3; `_start` maps it `MAP_SHARED | MAP_FIXED` over `lab_arena`.
//! Batches never travel through a pipe: the host writes the payload into the mapping and sends
//! a small framed request token on fd 4; the guest answers with a reply token on fd 5
//! ([`crate::protocol::token`]: magic, sequence number, checksum of the call table, and the
//! fault words). Any surprise - a wrong magic, sequence number or checksum, a short token, the
//! stream closing, or any byte on the guest's stdout - kills the guest and fails only the calls
//! of that entry; the next entry starts a fresh guest, so nothing is judged on another batch's
//! data.
//!
//! A qemu-user process costs about 20 ms to start (docs/DESIGN.md), so it is started once and
//! restarted only after the guest dies. A batch past its time budget is poked with SIGUSR1: the
//! guest's fault handler reports the PC and the call in flight like any fault, and the lab
//! resumes at the next call. Only a guest that does not answer the poke within [`POKE_GRACE`]
//! is killed without a PC.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use super::confine::{self, Guest as Confined, Support};
use super::prot_delta::InForce;
use super::{Backend, BackendError, BackendKind, Fault, FaultKind, Limits, RawRun};
use crate::abi::Abi;
use crate::align;
use crate::batch::Batch;
use crate::image::{Arena, Image};
use crate::protocol::{self, header, token};
use crate::toolchain;

/// How long a poked guest has to send its fault reply before it is killed.
pub const POKE_GRACE: Duration = Duration::from_secs(2);

/// Why no reply came when the guest closed its end (it died).
const CLOSED: &str = "the reply stream closed";

/// How [`ProcessBackend::reap`] describes a guest the kernel killed with SIGSYS (ExitStatus's
/// Display). Only the lab's seccomp filter does that: a trapped call made while the guest had
/// every signal blocked (qemu-user blocks them around its `fork`).
const SIGSYS_DEATH: &str = "signal: 31 (SIGSYS)";
const REFUSED_BLOCKED: &str = "refused by the lab's seccomp filter while the guest blocked every signal (qemu-user \
     does around fork), so the guest could not report the call: it was killed by SIGSYS";

/// The detail of a fault named from the reply's registers ([`ProcessBackend::misaligned`]).
const NO_ADDRESS: &str = "the signal carried no address (si_addr 0, as for every #GP); the lab computed the operand's \
     address from the registers of the fault reply";

/// The aligned-only instructions of `image`'s kernel code whose operand address the arch row
/// computes from a fault reply's registers; none when the driver sends no registers, or when
/// the image cannot be disassembled (then such a fault keeps the signal's own words).
fn aligned_only_sites(image: &Image) -> Vec<crate::disasm::Insn> {
    if image.arch.spec().align.fault_regs.is_empty() {
        return Vec::new();
    }
    let sites = align::hook_sites(image).unwrap_or_default();
    sites.into_iter().filter(|s| matches!(s.check, align::SiteCheck::Operand(_))).map(|s| s.insn).collect()
}

/// A reply token, or why none came.
type Reply = Result<[u64; token::REPLY_WORDS], String>;

/// The arena as shared memory: a memfd mapped into the lab; the guest maps the same file.
struct SharedArena {
    fd: OwnedFd,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this value and only accessed through `&mut self` or by copy.
unsafe impl Send for SharedArena {}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// Moves `fd` to a number of at least 10, close-on-exec, so that handing fds 3-5 to a child
/// never overwrites one of the sources.
fn high_fd(fd: OwnedFd) -> Result<OwnedFd, String> {
    // SAFETY: F_DUPFD_CLOEXEC on an fd we own returns a new fd or -1.
    let high = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if high < 0 {
        return Err(os_err("fcntl(F_DUPFD_CLOEXEC)"));
    }
    // SAFETY: `high` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(high) })
}

impl SharedArena {
    fn new(len: usize) -> Result<Self, String> {
        // SAFETY: memfd_create with a NUL-terminated name; the result is checked.
        let raw = unsafe { libc::memfd_create(c"lab_arena".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(os_err("memfd_create"));
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = high_fd(unsafe { OwnedFd::from_raw_fd(raw) })?;
        // SAFETY: plain system calls on an fd we own; results are checked.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) != 0 {
                return Err(os_err("ftruncate(memfd)"));
            }
            let rw = libc::PROT_READ | libc::PROT_WRITE;
            let ptr = libc::mmap(std::ptr::null_mut(), len, rw, libc::MAP_SHARED, fd.as_raw_fd(), 0);
            if ptr == libc::MAP_FAILED {
                return Err(os_err("mmap(memfd)"));
            }
            Ok(SharedArena { fd, ptr: ptr.cast(), len })
        }
    }

    /// Copies `bytes` to the start of the arena (raw copies only: the guest writes the same
    /// memory, so no Rust reference into it is ever made).
    fn write(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.len);
        // SAFETY: `n` bytes fit both the mapping and `bytes`; the regions do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr, n) };
    }

    /// Copies `bytes` to `offset` (ignored past the end).
    fn write_at(&mut self, offset: usize, bytes: &[u8]) {
        let n = bytes.len().min(self.len.saturating_sub(offset));
        // SAFETY: `offset + n` is inside the mapping; the regions do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(offset), n) };
    }

    /// Copies `payload` to the start of the arena except the byte ranges in `skip` (sorted,
    /// disjoint): guard pages, whose bytes no call can reach, are never materialised. With
    /// `data` (sorted, disjoint), the payload's bytes outside those ranges are known to be
    /// zero: they are zeroed in place rather than copied (no read of the payload there).
    fn write_sparse(&mut self, payload: &[u8], skip: &[(usize, usize)], data: Option<&[(usize, usize)]>) {
        let Some(data) = data else {
            for (lo, hi) in kept(payload.len().min(self.len), skip) {
                self.write_at(lo, &payload[lo..hi]);
            }
            return;
        };
        let mut d = 0;
        for (lo, hi) in kept(payload.len().min(self.len), skip) {
            let mut at = lo;
            while at < hi {
                // Data ranges that end before `at` are behind us.
                while d < data.len() && data[d].1 <= at {
                    d += 1;
                }
                match data.get(d) {
                    Some(&(start, end)) if start < hi => {
                        let (start, end) = (start.max(at), end.min(hi));
                        self.zero_at(at, start - at);
                        self.write_at(start, &payload[start..end]);
                        at = end;
                    }
                    _ => {
                        self.zero_at(at, hi - at);
                        at = hi;
                    }
                }
            }
        }
    }

    /// Zeroes `n` bytes at `offset` (ignored past the end).
    fn zero_at(&mut self, offset: usize, n: usize) {
        let n = n.min(self.len.saturating_sub(offset));
        // SAFETY: `offset + n` is inside the mapping.
        unsafe { std::ptr::write_bytes(self.ptr.add(offset), 0, n) };
    }

    /// The first `len` bytes (zero-filled past the arena), with zeros in the ranges of `skip`
    /// (sorted, disjoint) instead of what the arena holds there: a guard page reads as the
    /// zeros the host laid out, whatever an earlier batch left in it.
    fn read_sparse(&self, len: usize, skip: &[(usize, usize)]) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.copy_ranges(&mut out, kept(len, skip));
        out
    }

    /// Copies the byte ranges `ranges` of the arena into the same places of `out` (clipped to
    /// `out` and the arena; the rest of `out` is left as it is).
    fn copy_ranges(&self, out: &mut [u8], ranges: impl Iterator<Item = (usize, usize)>) {
        let end = out.len().min(self.len);
        for (lo, hi) in ranges {
            let (lo, hi) = (lo.min(end), hi.min(end));
            if lo < hi {
                // SAFETY: `lo..hi` lies inside both the mapping and `out`, which are disjoint.
                unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(lo), out.as_mut_ptr().add(lo), hi - lo) };
            }
        }
    }

    /// The u64 word at byte `offset` (0 past the end), read in place.
    fn word(&self, offset: usize) -> u64 {
        if offset.saturating_add(8) > self.len {
            return 0;
        }
        // SAFETY: the 8 bytes lie inside the mapping; an unaligned raw read, no reference.
        u64::from_le(unsafe { self.ptr.add(offset).cast::<u64>().read_unaligned() })
    }

    /// [`protocol::checksum`] of `len` bytes at `offset`, read in place (past the arena: as if
    /// zero-filled, like [`read`](Self::read)).
    fn checksum(&self, offset: usize, len: usize) -> u64 {
        let words = len / 8;
        let inside = self.len.saturating_sub(offset) / 8;
        let mut h = protocol::FNV_OFFSET;
        for i in 0..words {
            let w = if i < inside {
                // SAFETY: word `i` lies inside the mapping; an unaligned raw read, no reference.
                unsafe { self.ptr.add(offset + 8 * i).cast::<u64>().read_unaligned() }
            } else {
                0
            };
            h = (h ^ u64::from_le(w)).wrapping_mul(protocol::FNV_PRIME);
        }
        h
    }

    /// A copy of the first `len` bytes (zero-filled past the arena).
    fn read(&self, len: usize) -> Vec<u8> {
        let n = len.min(self.len);
        let mut out = Vec::with_capacity(len);
        // SAFETY: `n` bytes fit both the mapping and the capacity of `out`, which are disjoint;
        // after the copy the first `n` bytes are initialised.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr, out.as_mut_ptr(), n);
            out.set_len(n);
        }
        out.resize(len, 0);
        out
    }
}

impl Drop for SharedArena {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The parts of `0..len` outside the ranges of `skip` (sorted by start, disjoint).
fn kept(len: usize, skip: &[(usize, usize)]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut at = 0;
    skip.iter().map(move |&(lo, hi)| (lo.min(len), hi.min(len))).chain(std::iter::once((len, len))).filter_map(
        move |(lo, hi)| {
            let part = (at < lo).then_some((at, lo));
            at = at.max(hi);
            part
        },
    )
}

/// `resp_len` zeros in the allocation of `spare`, whose bytes outside the ranges `dirty` are
/// zero (`None`: any byte may be nonzero): only those ranges are zeroed again. The capacity
/// grows to `room` at once when it must grow: growing by steps would move the bytes to fresh
/// pages each time.
fn zeroed_again(mut spare: Vec<u8>, dirty: Option<&[(usize, usize)]>, resp_len: usize, room: usize) -> Vec<u8> {
    match dirty {
        Some(ranges) => {
            let n = spare.len();
            for &(lo, hi) in ranges {
                spare[lo.min(n)..hi.min(n)].fill(0);
            }
        }
        None => spare.clear(),
    }
    if spare.capacity() < resp_len {
        spare.reserve_exact(room.max(resp_len) - spare.len());
    }
    spare.resize(resp_len, 0);
    spare
}

/// The guard pages of a payload's protection table (`prot` 0) as byte offsets into the arena,
/// sorted, into `out` (emptied first): what [`SharedArena::write_sparse`] and
/// [`SharedArena::read_sparse`] skip.
fn guard_ranges(out: &mut Vec<(usize, usize)>, payload: &[u8], arena_addr: u64) {
    out.clear();
    out.extend(
        crate::batch::protection_entries(payload, arena_addr)
            .filter(|p| p.prot == 0 && p.addr >= arena_addr)
            .filter_map(|p| {
                let lo = usize::try_from(p.addr - arena_addr).ok()?;
                Some((lo, lo.checked_add(usize::try_from(p.len).ok()?)?))
            }),
    );
    out.sort_unstable();
}

/// A pipe as (read end, write end), both close-on-exec and numbered 10 or higher.
fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills two descriptors on success; the result is checked.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os_err("pipe2"));
    }
    // SAFETY: both are fresh descriptors nobody else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((high_fd(r)?, high_fd(w)?))
}

/// A running guest: its request and reply pipes, its stdout (checked
/// for stray bytes after every reply) and a reader thread for its stderr.
struct Guest {
    child: Child,
    requests: File,
    replies: File,
    stdout: ChildStdout,
    stderr: Receiver<String>,
    /// Sequence number of the next request.
    seq: u64,
}

/// qemu-user or native execution of the image.
pub struct ProcessBackend {
    kind: BackendKind,
    program: PathBuf,
    args: Vec<String>,
    limits: Limits,
    guest: Option<Guest>,
    arena: Arena,
    shared: Option<SharedArena>,
    /// Bytes of one call entry (fixed words and `saved[]`).
    entry_bytes: usize,
    /// Bytes of the architecture's system-call instruction (`ecall`, `svc #0`: 4; `syscall`: 2).
    syscall_len: u64,
    /// The guest's architecture (names the system calls it attempts).
    arch: crate::variant::Arch,
    /// The image (Landlock rules).
    image: PathBuf,
    /// Confinement the kernel offers (backend/confine.rs).
    support: Support,
    /// Guard pages of the batch last written ([`guard_ranges`]) and the payload they belong
    /// to (address and length, to notice a resume of another batch).
    guards: (Vec<(usize, usize)>, (usize, usize)),
    /// Checksum range and value of the last verified reply, for [`Backend::response`].
    last_sum: ((u64, u64), u64),
    /// The response ranges the host reads of the batch last written ([`Batch::response_ranges`]:
    /// header, call table, writable buffers), keyed like `guards`; empty key: every byte
    /// outside the guard pages (a raw [`Backend::execute`]).
    reads: (Vec<(usize, usize)>, (usize, usize)),
    /// The payload's data ranges ([`Batch::data_ranges`], sorted) of the batch last handed to
    /// [`Backend::execute_batch`], keyed like `guards`: the rest of its payload is zeros.
    writes: (Vec<(usize, usize)>, (usize, usize)),
    /// A response allocation handed back by [`Backend::recycle`], and the ranges of it that may
    /// hold nonzero bytes (`None`: any), so the next response zeroes only those.
    spare_resp: (Vec<u8>, Option<Vec<(usize, usize)>>),
    /// The address of the last response handed out and the ranges copied into it (the rest
    /// is zero), to know it again in [`Backend::recycle`].
    lent: (usize, Vec<(usize, usize)>),
    /// The protection table last sent to the guest, for the delta to the next
    /// ([`stamp`](Self::stamp)), and the delta entries' allocation.
    in_force: (InForce, Vec<crate::batch::Protection>),
    /// The kernels' aligned-only instructions whose operand address a fault reply's registers
    /// give ([`align::hook_sites`]; empty where the driver sends no registers), to name a fault
    /// whose signal carries no address ([`misaligned`](Self::misaligned)).
    aligned: Vec<crate::disasm::Insn>,
}

fn syscall_len(arch: crate::variant::Arch) -> u64 {
    arch.spec().syscall.len
}

/// Waits up to `timeout` for one whole reply token on `from` (poll, then read; no thread in
/// between, so a reply costs the host one wake-up). `Ok(None)`: nothing came in time.
fn recv_reply(from: &mut File, timeout: Duration) -> Result<Option<[u64; token::REPLY_WORDS]>, String> {
    let mut buf = [0u8; token::REPLY_WORDS * 8];
    let mut got = 0;
    let deadline = Instant::now() + timeout;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd { fd: from.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for an fd we own.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        match ready {
            0 if got == 0 => return Ok(None),
            0 => return Err(format!("a short reply token ({got} of {} bytes)", buf.len())),
            r if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => continue,
            r if r < 0 => return Err(os_err("poll on the reply pipe")),
            _ => {}
        }
        match from.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Err(CLOSED.into()),
            Ok(0) => return Err(format!("a short reply token ({got} of {} bytes), then the stream closed", buf.len())),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading a reply token failed: {e}")),
        }
    }
    Ok(Some(std::array::from_fn(|i| u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().expect("8 bytes")))))
}

/// Sends SIGUSR1 to a guest past its budget and waits briefly for the reply its handler sends.
fn poke(g: &mut Guest) -> Option<Reply> {
    let pid = libc::pid_t::try_from(g.child.id()).ok()?;
    // SAFETY: `kill` only sends a signal to our own child process; no memory is involved.
    if unsafe { libc::kill(pid, libc::SIGUSR1) } != 0 {
        return None;
    }
    recv_reply(&mut g.replies, POKE_GRACE).transpose()
}

/// Bytes the guest wrote to its stdout so far (none is the only right answer), read without
/// blocking: the guest wrote them before its reply, so they are already in the pipe.
fn stray_output(stdout: &mut ChildStdout) -> Vec<u8> {
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

/// The call-table range of a payload (header `table`, `ncalls`): the result words the guest
/// checksums. Clamped to the payload; a header the host did not lay out gives an empty range.
fn table_range(payload: &[u8], arena_addr: u64, entry_bytes: usize) -> (u64, u64) {
    let word = |w: protocol::Word| header_word(payload, w);
    let Some(off) = word(header::TABLE).checked_sub(arena_addr).filter(|&o| o <= payload.len() as u64) else {
        return (0, 0);
    };
    let len = word(header::NCALLS).saturating_mul(entry_bytes as u64).min(payload.len() as u64 - off);
    (off & !7, len & !7)
}

/// The checksum range of a resumed entry: the call table from entry `start` on (the entries
/// before it were checked by earlier replies and do not run again).
fn from_entry(sum: (u64, u64), start: usize, entry_bytes: usize) -> (u64, u64) {
    let skip = (start as u64).saturating_mul(entry_bytes as u64).min(sum.1);
    (sum.0 + skip, sum.1 - skip)
}

/// Header word `w` of `payload` (0 when the payload is shorter).
fn header_word(payload: &[u8], w: protocol::Word) -> u64 {
    payload.get(w.offset()..w.offset() + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// The checksum range of a fault reply: `sum` cut after entry `current` of the call table at
/// guest address `table` (the calls after it did not run), rounded down to 8 bytes, when that
/// is shorter. The drivers compute the same (`sum_upto`), in wrapping 64-bit arithmetic.
fn fault_range(sum: (u64, u64), table: u64, arena_addr: u64, current: u64, entry_bytes: usize) -> (u64, u64) {
    let end = current.wrapping_add(1).wrapping_mul(entry_bytes as u64).wrapping_add(table).wrapping_sub(arena_addr);
    let len = end.wrapping_sub(sum.0) & !7;
    if len < sum.1 {
        (sum.0, len)
    } else {
        sum
    }
}

/// Makes the shared arena ready to resume `payload` at call `start`: the header words the host
/// owns and the protection table, from the payload as laid out (a kernel may have written
/// over them); the call table and buffers stay as the last entry left them.
fn rewrite_head(shared: &mut SharedArena, payload: &[u8], arena_addr: u64, start: usize) {
    let word = |w: protocol::Word| header_word(payload, w);
    for w in
        [header::NCALLS, header::TABLE, header::RESP_LEN, header::PROT_TABLE, header::PROT_COUNT, header::DELTA_TABLE]
    {
        shared.write_at(w.offset(), &word(w).to_le_bytes());
    }
    shared.write_at(header::START.offset(), &(start as u64).to_le_bytes());
    let len = word(header::PROT_COUNT).saturating_mul(protocol::PROT_ENTRY_WORDS as u64 * 8);
    let prot = word(header::PROT_TABLE)
        .checked_sub(arena_addr)
        .and_then(|off| Some((usize::try_from(off).ok()?, usize::try_from(len).ok()?)))
        .and_then(|(off, len)| payload.get(off..off.checked_add(len)?).map(|bytes| (off, bytes)));
    if let Some((off, bytes)) = prot {
        shared.write_at(off, bytes);
    }
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
fn probe_qemu(program: &Path, cpu: &str, image: &Path) -> Result<(), String> {
    /// (qemu binary, -cpu model) -> whether it starts.
    type Probes = HashMap<(PathBuf, String), Result<(), String>>;
    static PROBED: OnceLock<Mutex<Probes>> = OnceLock::new();
    let key = (program.to_path_buf(), cpu.to_string());
    let probed = PROBED.get_or_init(Mutex::default);
    if let Some(known) = probed.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return known;
    }
    let start = || Command::new(program).args(["-cpu", cpu]).arg(image).stdin(Stdio::null()).output();
    // Killed from outside (no qemu refusal ends by a signal): ask once more.
    let out = start().and_then(|out| if out.status.code().is_none() { start() } else { Ok(out) });
    let answer = match out {
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

impl ProcessBackend {
    /// `qemu-<arch> -cpu <cpu> <image>`, after a probe that qemu accepts the CPU model.
    ///
    /// # Errors
    /// The qemu binary is missing ([`BackendError::Tool`], naming `qemu-user`), it refuses
    /// the variant's `-cpu` string ([`BackendError::Process`], with qemu's words), or the image
    /// has no `lab_arena`.
    pub fn qemu(image: &Image, cpu: &str, limits: Limits) -> Result<Self, BackendError> {
        let program = toolchain::find(toolchain::qemu_tool(image.arch))?;
        probe_qemu(&program, cpu, &image.path)
            .map_err(|reason| BackendError::Process { program: program.display().to_string(), reason })?;
        let args = vec!["-cpu".into(), cpu.into(), image.path.display().to_string()];
        Self::new(BackendKind::Qemu, program, args, image, limits)
    }

    /// The image executed directly (x86_64 host, x86_64 image).
    ///
    /// # Errors
    /// The image has no `lab_arena`.
    pub fn native(image: &Image, limits: Limits) -> Result<Self, BackendError> {
        Self::new(BackendKind::Native, image.path.clone(), Vec::new(), image, limits)
    }

    fn new(
        kind: BackendKind,
        program: PathBuf,
        args: Vec<String>,
        image: &Image,
        limits: Limits,
    ) -> Result<Self, BackendError> {
        let abi = Abi::of(image.arch);
        Ok(ProcessBackend {
            kind,
            program,
            args,
            limits,
            guest: None,
            arena: image.arena()?,
            shared: None,
            entry_bytes: (protocol::entry::FIXED_WORDS + abi.saved.len()) * 8,
            syscall_len: syscall_len(image.arch),
            arch: image.arch,
            image: image.path.clone(),
            support: Support::probe(),
            guards: (Vec::new(), (0, 0)),
            last_sum: ((0, 0), 0),
            reads: (Vec::new(), (0, 0)),
            writes: (Vec::new(), (0, 0)),
            spare_resp: (Vec::new(), Some(Vec::new())),
            lent: (0, Vec::new()),
            in_force: (InForce::default(), Vec::new()),
            aligned: aligned_only_sites(image),
        })
    }

    /// The guest's command: stdin empty, stdout and stderr piped, and the protocol's fds in
    /// place (`pre_exec`). Kept apart from the I/O set-up so confinement can extend it alone.
    ///
    /// Confinement (backend/confine.rs) goes first: its `pre_exec` runs before the dup2 below,
    /// while its own descriptors (the Landlock ruleset) may still sit on fds 3-5.
    fn command(&self, handed: [RawFd; 3]) -> Result<Command, BackendError> {
        let mut cmd = Command::new(&self.program);
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

    fn spawn(&mut self) -> Result<Guest, BackendError> {
        if let Some(sig) = crate::interrupt::interrupted() {
            return Err(self.error(format!("not started: the lab was interrupted by {}", crate::interrupt::name(sig))));
        }
        let arena_fd = self.shared.as_ref().map(|s| s.fd.as_raw_fd()).expect("arena created");
        let (req_r, req_w) = pipe().map_err(|e| self.error(e))?;
        let (rep_r, rep_w) = pipe().map_err(|e| self.error(e))?;
        let mut child = self
            .command([arena_fd, req_r.as_raw_fd(), rep_w.as_raw_fd()])?
            .spawn()
            .map_err(|e| self.error(format!("cannot start: {e}")))?;
        crate::interrupt::register(child.id());
        drop((req_r, rep_w)); // the child's ends
        let stdout = child.stdout.take().expect("piped stdout");
        // SAFETY: O_NONBLOCK on our own read end: stray output is polled, never waited for.
        unsafe { libc::fcntl(stdout.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let mut stderr = child.stderr.take().expect("piped stderr");
        let replies = File::from(rep_r);
        let (etx, stderr_rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = etx.send(bounded_stderr(&mut stderr));
        });
        Ok(Guest { child, requests: File::from(req_w), replies, stdout, stderr: stderr_rx, seq: 0 })
    }

    fn error(&self, reason: String) -> BackendError {
        BackendError::Process { program: self.program.display().to_string(), reason }
    }

    /// Ends the guest and says how it ended (exit status with its meaning, or signal, and its
    /// stderr).
    fn reap(&mut self) -> String {
        let Some(mut g) = self.guest.take() else { return String::new() };
        drop(g.requests);
        // The whole group: anything the guest started goes with it. Forget the pid before it
        // is reaped and free for reuse.
        confine::kill_group(g.child.id());
        crate::interrupt::unregister(g.child.id());
        let status = match g.child.wait() {
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

    /// Sends one request and waits for its reply (poking the guest after the time budget).
    /// `None`: the guest neither answered nor reacted to the poke.
    fn round_trip(&mut self, sum: (u64, u64)) -> Option<Reply> {
        let g = self.guest.as_mut().expect("guest started");
        let words = [token::REQUEST_MAGIC, g.seq, sum.0, sum.1];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        if let Err(e) = g.requests.write_all(&bytes) {
            return Some(Err(format!("writing the request token failed: {e}")));
        }
        match recv_reply(&mut g.replies, self.limits.batch_time) {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => poke(g),
            Err(why) => Some(Err(why)),
        }
    }

    /// Checks a reply against the request it answers: magic, sequence number, checksum of the
    /// result words in `resp`, and no stray bytes on stdout. `Err` names the first surprise.
    fn verify(&mut self, reply: &[u64; token::REPLY_WORDS], want: u64) -> Result<(), String> {
        let g = self.guest.as_mut().expect("guest started");
        if reply[token::MAGIC] != token::REPLY_MAGIC {
            return Err(format!(
                "reply token with magic {:#018x}, expected {:#018x}",
                reply[token::MAGIC],
                token::REPLY_MAGIC
            ));
        }
        if reply[token::SEQ] != g.seq {
            return Err(format!("reply to request {} while request {} was in flight", reply[token::SEQ], g.seq));
        }
        g.seq += 1;
        if reply[token::SUM] != want {
            return Err(format!(
                "call-table checksum {:#018x} in the reply, {want:#018x} in the shared arena",
                reply[token::SUM]
            ));
        }
        let stray = stray_output(&mut g.stdout);
        if !stray.is_empty() {
            let head: String = stray.iter().take(16).map(|b| format!("{b:02x}")).collect();
            return Err(format!("the guest wrote {} unexpected bytes to its stdout ({head}...)", stray.len()));
        }
        Ok(())
    }

    /// Runs the calls the arena's header names on the guest (started if needed) and checks the
    /// reply. A protocol surprise kills the guest and comes back as [`Answer::Surprise`].
    /// `whole`: the response is all `resp_len` bytes even after a fault; otherwise a fault
    /// returns only the header (a resumed entry: [`Backend::response`] reads the rest once).
    fn exchange(&mut self, resp_len: usize, sum: (u64, u64), whole: bool) -> Result<Answer, BackendError> {
        if self.guest.is_none() {
            self.guest = Some(self.spawn()?);
        }
        let reply = match self.round_trip(sum) {
            Some(Ok(r)) => r,
            Some(Err(why)) if why == CLOSED => return Ok(self.crash()),
            Some(Err(why)) => return Ok(self.surprise(why)),
            None => {
                let detail = self.reap();
                let fault = Fault { kind: FaultKind::Hang(self.limits.batch_time), pc: None, call: None, detail };
                return Ok(Answer::Run(RawRun { resp: Vec::new(), fault: Some(fault) }));
            }
        };
        let shared = self.shared.as_ref().expect("arena created");
        let sum = if reply[token::KIND] == token::KIND_FAULT {
            let table = shared.word(header::TABLE.offset());
            fault_range(sum, table, self.arena.addr, reply[token::CURRENT], self.entry_bytes)
        } else {
            sum
        };
        let (off, len) = (sum.0 as usize, sum.1 as usize);
        let (resp, want) = if !whole && reply[token::KIND] == token::KIND_FAULT {
            // The call table stays in the arena: checksummed where it lies, copied once later.
            (shared.read(protocol::header::WORDS * 8), shared.checksum(off, len))
        } else {
            // The checksummed call table lies inside the ranges read back.
            let resp = self.read_response(resp_len);
            let want = protocol::checksum(resp.get(off..off + len).unwrap_or_default());
            (resp, want)
        };
        if let Err(why) = self.verify(&reply, want) {
            self.forget_lent();
            return Ok(self.surprise(why));
        }
        self.last_sum = (sum, want);
        let fault = match reply[token::KIND] {
            token::KIND_DONE => None,
            token::KIND_FAULT => Some(self.fault_of(&reply)),
            other => return Ok(self.surprise(format!("reply token of kind {other}"))),
        };
        Ok(Answer::Run(RawRun { resp, fault }))
    }

    /// Kills the guest after a protocol surprise; the reason and how the guest ended.
    fn surprise(&mut self, why: String) -> Answer {
        let how = self.reap();
        let detail = if how.is_empty() { String::new() } else { format!("guest ended: {how}") };
        Answer::Surprise { kind: FaultKind::Protocol(why), detail }
    }

    /// The guest died without a reply: how it ended (exit status and its meaning, or signal).
    fn crash(&mut self) -> Answer {
        let how = self.reap();
        if how.starts_with(SIGSYS_DEATH) {
            let kind = FaultKind::SystemCall { nr: None, name: None };
            return Answer::Surprise { kind, detail: format!("{REFUSED_BLOCKED} ({how})") };
        }
        Answer::Surprise { kind: FaultKind::Crash(how), detail: CLOSED.into() }
    }

    /// The fault a fault reply reports. The guest lives on: its handler returned into the
    /// request loop (kernels/README.md), so the next entry needs no new process.
    fn fault_of(&mut self, reply: &[u64; token::REPLY_WORDS]) -> Fault {
        let detail = String::new();
        let (signo, addr, pc) = (reply[token::SIGNO], reply[token::SI_ADDR], reply[token::PC]);
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
        let (kind, detail) = match self.misaligned(&kind, pc, reply) {
            Some(named) => (named, NO_ADDRESS.to_string()),
            None => (kind, detail),
        };
        Fault { kind, pc: Some(pc), call: usize::try_from(reply[token::CURRENT]).ok(), detail }
    }

    /// A fault without an address (an x86 `#GP` reports `si_addr` 0) at an aligned-only
    /// instruction whose operand, computed from the reply's register words, is misaligned: that
    /// is the fault ([`FaultKind::Misaligned`]).
    fn misaligned(&self, kind: &FaultKind, pc: u64, reply: &[u64; token::REPLY_WORDS]) -> Option<FaultKind> {
        if !matches!(kind, FaultKind::Memory { addr: Some(0) | None, .. } | FaultKind::Bus { addr: Some(0) | None }) {
            return None;
        }
        let insn = self.aligned.iter().find(|i| i.addr == pc)?;
        let spec = &self.arch.spec().align;
        let regs = &reply[token::REGS..token::REGS + token::NREGS];
        let mut read = |name: &str| spec.fault_regs.iter().position(|r| *r == name).and_then(|k| regs.get(k).copied());
        let (addr, need) = align::misaligned_operand(spec, insn, &mut read)?;
        Some(FaultKind::Misaligned { addr, need })
    }

    /// After a surprise in a whole entry: runs its calls again one per entry on a fresh guest,
    /// from the payload as sent, so the surprise is pinned to the call that causes it (a fault
    /// of that call) and the calls before it keep results that passed every check. Calls run in
    /// the same order on the same arena, so snapshot copies see what they saw before.
    fn step(
        &mut self,
        payload: &[u8],
        resp_len: usize,
        sum: (u64, u64),
        first: (FaultKind, String),
    ) -> Result<RawRun, BackendError> {
        let word = |w: protocol::Word| header_word(payload, w);
        let (start, ncalls) = (word(header::START), word(header::NCALLS));
        self.shared.as_mut().expect("arena created").write(payload);
        for call in start..ncalls {
            // Only a response this loop returns as it came may be recycled as lent.
            self.forget_lent();
            self.one_call_head(payload, call);
            match self.exchange(resp_len, sum, true)? {
                Answer::Run(run) if run.fault.is_none() => continue,
                Answer::Run(run) if run.resp.is_empty() => return Ok(self.hung(payload, resp_len, run)),
                Answer::Run(run) => return Ok(run),
                Answer::Surprise { kind, detail } => {
                    let resp = self.shared.as_ref().expect("arena created").read(resp_len);
                    let call = usize::try_from(call).ok();
                    return Ok(RawRun { resp, fault: Some(Fault { kind, pc: None, call, detail }) });
                }
            }
        }
        // Every call passed on its own: the first surprise did not come back. Its entry's
        // results are still not trusted: no call of it counts as run (the payload as sent).
        self.forget_lent();
        let (kind, detail) = first;
        let detail = format!("{detail}; not reproduced when the calls ran one at a time");
        let mut resp = payload[..resp_len.min(payload.len())].to_vec();
        resp.resize(resp_len, 0);
        Ok(RawRun { resp, fault: Some(Fault { kind, pc: None, call: None, detail }) })
    }

    /// A hang without a PC: the response is the payload as sent.
    fn hung(&self, payload: &[u8], resp_len: usize, run: RawRun) -> RawRun {
        RawRun { resp: payload[..resp_len].to_vec(), fault: run.fault }
    }

    /// The response as it stood before a resumed entry of `batch` at call `start`, rebuilt on
    /// a fresh guest: the batch as sent, then its calls before `start` one per entry (their
    /// faults are known already). A resumed entry that faults returns only the header, so the
    /// host holds no copy; only an entry that ends in a surprise or an unanswered hang needs
    /// this, for [`step`](Self::step) and [`hung`](Self::hung), which start from that state.
    fn replay(&mut self, batch: &crate::batch::Batch, start: usize) -> Result<Vec<u8>, BackendError> {
        let _ = self.reap();
        self.shared.as_mut().expect("arena created").write(&batch.payload);
        let sum = table_range(&batch.payload, self.arena.addr, self.entry_bytes);
        for call in 0..start as u64 {
            self.one_call_head(&batch.payload, call);
            self.exchange(batch.resp_len, sum, false)?;
        }
        self.forget_lent();
        Ok(self.shared.as_ref().expect("arena created").read_sparse(batch.resp_len, &self.guards.0))
    }

    /// Writes the header (and protection table) of `payload` for an entry that runs call
    /// `call` alone: what the host owns, not what an earlier call of the kernel left there.
    fn one_call_head(&mut self, payload: &[u8], call: u64) {
        let shared = self.shared.as_mut().expect("arena created");
        rewrite_head(shared, payload, self.arena.addr, call as usize);
        shared.write_at(header::NCALLS.offset(), &(call + 1).to_le_bytes());
        self.stamp(payload);
    }

    /// Writes the protection words of the header for sending `payload` to the guest: its
    /// table's id, and the delta entries from the table last sent with that table's id as
    /// their base when they take no more `mprotect` calls than the whole table and fit the room
    /// the layout left (`delta_table` up to the call table); else base 0, the whole table.
    fn stamp(&mut self, payload: &[u8]) {
        let word = |w: protocol::Word| header_word(payload, w);
        let lo = self.arena.addr;
        let (delta_at, table) = (word(header::DELTA_TABLE), word(header::TABLE));
        // Room up to the call table, inside the arena (any other payload gets the whole table).
        let room = if delta_at >= lo && table > delta_at && table - lo <= self.arena.size {
            ((table - delta_at) / (protocol::PROT_ENTRY_WORDS as u64 * 8)) as usize
        } else {
            0
        };
        let entries = crate::batch::protection_entries(payload, lo);
        let (guest, out) = &mut self.in_force;
        let stamp = guest.stamp(entries, (lo, lo + self.arena.size), (delta_at, room), out);
        let Some(shared) = self.shared.as_mut() else { return };
        let entry = protocol::PROT_ENTRY_WORDS * 8;
        for (i, p) in stamp.delta.iter().enumerate() {
            for (k, v) in [p.addr, p.len, p.prot].into_iter().enumerate() {
                shared.write_at((delta_at - lo) as usize + i * entry + k * 8, &v.to_le_bytes());
            }
        }
        let count = stamp.delta.len() as u64;
        for (w, v) in [(header::PROT_ID, stamp.id), (header::PROT_BASE, stamp.base), (header::DELTA_COUNT, count)] {
            shared.write_at(w.offset(), &v.to_le_bytes());
        }
    }

    /// Forgets the last response handed out: it was dropped, or another goes back instead.
    fn forget_lent(&mut self) {
        self.lent = (0, Vec::new());
    }

    /// Keeps the guard pages and the response ranges of `batch` for the sparse copies, unless
    /// they are known.
    fn note_batch(&mut self, batch: &Batch) {
        let key = (batch.payload.as_ptr() as usize, batch.payload.len());
        if self.guards.1 != key || key == (0, 0) {
            guard_ranges(&mut self.guards.0, &batch.payload, self.arena.addr);
            self.guards.1 = key;
            self.reads.0.clear();
            self.reads.0.extend(batch.response_ranges().map(|r| (r.start, r.end)));
            self.reads.1 = key;
        }
    }

    /// The response after an entry: `resp_len` bytes, holding what the arena holds in the
    /// ranges the host reads ([`Batch::response_ranges`] of the batch last written, or every
    /// byte outside its guard pages) and zeros elsewhere, in the allocation of a recycled
    /// response when there is one (only the ranges it was filled in are zeroed again).
    fn read_response(&mut self, resp_len: usize) -> Vec<u8> {
        let (spare, dirty) = std::mem::take(&mut self.spare_resp);
        let mut out = zeroed_again(spare, dirty.as_deref(), resp_len, self.arena.size as usize);
        let Some(shared) = self.shared.as_ref() else { return out };
        // The ranges copied, kept to zero them again when the response comes back (in the
        // allocation of the last such list).
        let mut ranges = dirty.unwrap_or_default();
        ranges.clear();
        if self.reads.1 == self.guards.1 && self.reads.1 != (0, 0) {
            ranges.extend_from_slice(&self.reads.0);
        } else {
            ranges.extend(kept(resp_len, &self.guards.0));
        }
        shared.copy_ranges(&mut out, ranges.iter().copied());
        self.lent = (out.as_ptr() as usize, ranges);
        out
    }
}

/// How the guest answered one request (one run of the calls a batch's header names).
enum Answer {
    /// The guest answered with a reply that passed every check (or hung: empty `resp`).
    Run(RawRun),
    /// A protocol surprise ([`FaultKind::Protocol`]) or a guest that died without a reply
    /// ([`FaultKind::Crash`]); the guest is gone. `detail` adds how it ended.
    Surprise { kind: FaultKind, detail: String },
}

impl Backend for ProcessBackend {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    /// [`execute`](Backend::execute), reading back only the bytes the host's checks read
    /// ([`Batch::response_ranges`]): the rest of the response is zeros.
    fn execute_batch(&mut self, batch: &Batch) -> Result<RawRun, BackendError> {
        let key = (batch.payload.as_ptr() as usize, batch.payload.len());
        // Into the lists' own allocations: a batch of thousands of buffers would otherwise take
        // fresh memory for them each time.
        self.reads.0.clear();
        self.reads.0.extend(batch.response_ranges().map(|r| (r.start, r.end)));
        self.reads.1 = key;
        self.writes.0.clear();
        self.writes.0.extend(batch.data_ranges().filter(|r| !r.is_empty()).map(|r| (r.start, r.end)));
        self.writes.0.sort_unstable();
        self.writes.1 = key;
        self.execute(&batch.payload, batch.resp_len)
    }

    fn recycle(&mut self, resp: Vec<u8>) {
        let dirty = (resp.as_ptr() as usize == self.lent.0).then(|| std::mem::take(&mut self.lent.1));
        self.spare_resp = (resp, dirty);
    }

    fn execute(&mut self, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
        self.forget_lent();
        let key = (payload.as_ptr() as usize, payload.len());
        // What `execute_batch` noted of this payload holds for this call alone, even one that
        // fails: a later raw payload at the same address is written and read back whole.
        let (read_key, write_key) = (std::mem::take(&mut self.reads.1), std::mem::take(&mut self.writes.1));
        if payload.len() as u64 > self.arena.size || resp_len > payload.len() {
            return Err(self.error(format!("a payload of {} bytes does not fit lab_arena", payload.len())));
        }
        if self.shared.is_none() {
            let size = self.arena.size.max(protocol::ARENA_SIZE) as usize;
            self.shared = Some(SharedArena::new(size).map_err(|e| self.error(e))?);
        }
        // A raw payload, not a batch's ([`Backend::execute_batch`]), is read back whole.
        self.reads.1 = if read_key == key { key } else { (0, 0) };
        guard_ranges(&mut self.guards.0, payload, self.arena.addr);
        self.guards.1 = key;
        let data = (write_key == key).then_some(self.writes.0.as_slice());
        self.shared.as_mut().expect("arena created").write_sparse(payload, &self.guards.0, data);
        self.stamp(payload);
        let sum = table_range(payload, self.arena.addr, self.entry_bytes);
        let mut answer = self.exchange(resp_len, sum, true)?;
        for _ in 0..KILL_RETRIES {
            if !answer.killed_from_outside() {
                break;
            }
            // Not the kernel's doing: run the batch again, whole, on a fresh guest.
            self.shared.as_mut().expect("arena created").write(payload);
            self.stamp(payload);
            answer = self.exchange(resp_len, sum, true)?;
        }
        match answer {
            Answer::Run(run) if run.resp.is_empty() => Ok(self.hung(payload, resp_len, run)),
            Answer::Run(run) => Ok(run),
            Answer::Surprise { kind, detail } => self.step(payload, resp_len, sum, (kind, detail)),
        }
    }

    /// The shared arena holds what the faulted entry left (`resp`, and inputs the guest could
    /// not write): only the header and protection table are written again, not the whole batch,
    /// and the guest keeps the protections in force (the table is the same). A fault returns
    /// only the header: a kernel that faults on every call costs no copy of the response per
    /// call ([`response`](Backend::response) reads it once).
    fn resume(&mut self, batch: &crate::batch::Batch, resp: &[u8], start: usize) -> Result<RawRun, BackendError> {
        self.forget_lent();
        let Some(shared) = self.shared.as_mut() else {
            return self.execute(&batch.resume_payload(resp, start), batch.resp_len);
        };
        rewrite_head(shared, &batch.payload, self.arena.addr, start);
        self.stamp(&batch.payload);
        self.note_batch(batch);
        let sum = from_entry(table_range(&batch.payload, self.arena.addr, self.entry_bytes), start, self.entry_bytes);
        match self.exchange(batch.resp_len, sum, false)? {
            Answer::Run(run) if run.resp.is_empty() => {
                let before = self.replay(batch, start)?;
                Ok(self.hung(&batch.resume_payload(&before, start), batch.resp_len, run))
            }
            Answer::Run(run) => Ok(run),
            answer @ Answer::Surprise { .. } if answer.killed_from_outside() => {
                // Not the kernel's doing: the rest of the batch again, as a fresh entry.
                let before = self.replay(batch, start)?;
                self.execute(&batch.resume_payload(&before, start), batch.resp_len)
            }
            Answer::Surprise { kind, detail } => {
                let before = self.replay(batch, start)?;
                self.step(&batch.resume_payload(&before, start), batch.resp_len, sum, (kind, detail))
            }
        }
    }

    /// The whole response after a resumed entry that ended in a fault, checked against the
    /// checksum of its reply.
    fn response(&mut self, resp_len: usize) -> Result<Vec<u8>, BackendError> {
        self.forget_lent();
        if self.shared.is_none() {
            return Ok(vec![0; resp_len]);
        }
        let resp = self.read_response(resp_len);
        let ((off, len), want) = self.last_sum;
        let got = protocol::checksum(resp.get(off as usize..(off + len) as usize).unwrap_or_default());
        if got != want {
            self.forget_lent();
            return Err(self
                .error(format!("the call table changed after its reply (checksum {got:#018x}, reply {want:#018x})")));
        }
        Ok(resp)
    }
}

impl Drop for ProcessBackend {
    fn drop(&mut self) {
        let _ = self.reap();
    }
}

/// How often a batch runs again after its guest was killed from outside
/// ([`Answer::killed_from_outside`]) before its calls are stepped one at a time.
const KILL_RETRIES: usize = 2;

impl Answer {
    /// Whether the guest died of SIGKILL ([`killed_from_outside`]): a crash, or a protocol
    /// surprise (a broken pipe) whose guest ended so.
    fn killed_from_outside(&self) -> bool {
        match self {
            Answer::Run(_) => false,
            Answer::Surprise { kind: FaultKind::Crash(how), .. } => killed_from_outside(how),
            Answer::Surprise { detail, .. } => {
                detail.split_once("guest ended: ").is_some_and(|(_, how)| killed_from_outside(how))
            }
        }
    }
}

/// Whether a guest that died without a reply (`how`: [`ProcessBackend::reap`]'s words) was
/// killed by SIGKILL. The lab never SIGKILLs a guest it still waits on, and the seccomp
/// allow-list lets a guest signal only its own process: so either someone outside killed it (an
/// operator, the OOM killer), and the batch proves nothing about its calls, or the kernel
/// killed itself, and it does so again when the batch runs a second time on a fresh guest
/// (then the calls are stepped one at a time as for any other death).
fn killed_from_outside(how: &str) -> bool {
    how.starts_with("signal: 9 (SIGKILL)")
}

/// Bytes of a guest's stderr kept for reports; the rest is read (so the guest never blocks on
/// a full pipe) and counted, not kept: a guest that writes hundreds of MiB cannot grow the lab
/// or its report.
const STDERR_KEPT: usize = 4096;

/// A guest's stderr as report text: its first [`STDERR_KEPT`] bytes with control characters
/// escaped (a guest's escape sequences must not reach the user's terminal), and how many bytes
/// followed.
fn bounded_stderr(from: &mut impl Read) -> String {
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

#[cfg(test)]
mod tests {
    #[test]
    fn guest_stderr_is_bounded_and_its_control_characters_escaped() {
        let mut noisy: Vec<u8> = b"\x1b[2Jboom\n".to_vec();
        noisy.extend(std::iter::repeat_n(b'x', 10_000));
        let text = super::bounded_stderr(&mut noisy.as_slice());
        assert!(text.starts_with("\\u{1b}[2Jboom\n"), "{}", &text[..20]);
        let tail = 10_000 + 9 - super::STDERR_KEPT;
        assert!(text.ends_with(&format!("x ... and {tail} more bytes")), "{}", &text[text.len() - 40..]);
    }

    use super::*;
    use crate::variant::Variant;

    /// Starts the guest of `variant` under qemu, sends `bytes` on its request pipe, closes it
    /// and returns the exit code.
    fn exit_after(variant: &str, bytes: &[u8]) -> Option<i32> {
        let v = Variant::by_name(variant).expect("variant");
        let path = crate::toolchain::build_image(&crate::paths::default_build(), v).expect("build");
        let image = Image::load(&path, v.arch).expect("image");
        let mut b = ProcessBackend::qemu(&image, v.qemu_cpu, Limits::default()).expect("qemu");
        b.shared = Some(SharedArena::new(protocol::ARENA_SIZE as usize).expect("memfd"));
        let mut g = b.spawn().expect("spawn");
        g.requests.write_all(bytes).expect("write");
        drop(g.requests);
        g.child.wait().expect("wait").code()
    }

    fn request(words: [u64; token::REQUEST_WORDS]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// The three drivers end the same way on the same input (lab_protocol.h exit codes).
    #[test]
    fn every_driver_exits_with_the_same_status_on_a_broken_request_stream() {
        let m = token::REQUEST_MAGIC;
        let cases: [(&str, Vec<u8>, protocol::Exit); 6] = [
            ("EOF before any token", Vec::new(), protocol::exit::OK),
            ("a short token", vec![1; 10], protocol::exit::TRUNCATED),
            ("a wrong magic", request([m ^ 1, 0, 0, 0]), protocol::exit::PROTOCOL),
            ("a wrong sequence number", request([m, 1, 0, 0]), protocol::exit::PROTOCOL),
            ("a checksum range past the arena", request([m, 0, 0, protocol::ARENA_SIZE + 8]), protocol::exit::PROTOCOL),
            ("an unaligned checksum range", request([m, 0, 4, 8]), protocol::exit::PROTOCOL),
        ];
        for arch in ["riscv64", "aarch64", "x86_64"] {
            for (what, bytes, want) in &cases {
                assert_eq!(exit_after(arch, bytes), Some(want.code), "{arch}: {what}");
            }
        }
    }

    /// A batch for `image`: a null call (faults), `md5_implCompress` over `short` bytes flush
    /// against a guard page (over-reads into it when under 64) with its state in the last 16
    /// bytes of a writable buffer of `state_len` bytes, a null call, then one whole block.
    fn guard_batch(image: &Image, short: usize, state_len: usize) -> crate::batch::Batch {
        use crate::batch::{Arg, BatchBuilder};
        let md5 = image.require("md5_implCompress").expect("md5_implCompress").addr;
        let mut b = BatchBuilder::new(Abi::of(image.arch));
        let cut = b.buffer("cut", &vec![7; short], false, crate::batch::Placement::End);
        let s1 = b.output(&vec![0; state_len]);
        let (whole, s2) = (b.input(&[7; 64], 0), b.output(&[0; 16]));
        let null = [Arg::Imm(0); 4];
        b.call(0, null, 1);
        b.call(md5, [Arg::Ptr(cut, 0), Arg::Ptr(s1, state_len - 16), Arg::Imm(0), Arg::Imm(0)], 2);
        b.call(0, null, 3);
        b.call(md5, [Arg::Ptr(whole, 0), Arg::Ptr(s2, 0), Arg::Imm(0), Arg::Imm(0)], 4);
        b.layout(image.arena().expect("arena")).expect("layout")
    }

    /// Guard pages stay in force across resumed entries (the driver keeps the table it applied
    /// and the fault handler leaves it), follow a new layout, and come back for an old one.
    #[test]
    fn guards_hold_after_faults_and_follow_each_layout() {
        for name in ["riscv64", "aarch64", "x86_64"] {
            guards_hold_on(Variant::by_name(name).expect("variant"));
        }
    }

    fn guards_hold_on(v: &'static Variant) {
        let path = crate::toolchain::build_image(&crate::paths::default_build(), v).expect("build");
        let image = Image::load(&path, v.arch).expect("image");
        let mut backends = vec![ProcessBackend::qemu(&image, v.qemu_cpu, Limits::default()).expect("qemu")];
        if crate::variant::Arch::host() == Some(v.arch) {
            backends.push(ProcessBackend::native(&image, Limits::default()).expect("native"));
        }
        for mut b in backends {
            // 40 bytes: md5 reads 24 past the end. 4128 bytes: two pages, and the block md5
            // reads crosses into the second, the guard page of the 40-byte layout; the state of
            // 4112 bytes is written on the page the guard after a 16-byte state held.
            for (short, state_len) in [(40, 16), (4128, 4112), (40, 16), (40, 16)] {
                let batch = guard_batch(&image, short, state_len);
                let run = super::super::run_batch(&mut b, &batch).expect("run");
                let calls: Vec<Option<usize>> = run.faults.iter().map(|f| f.call).collect();
                let want = if short < 64 { vec![Some(0), Some(1), Some(2)] } else { vec![Some(0), Some(2)] };
                assert_eq!(calls, want, "{v} {:?}, {short} bytes: {:?}", b.kind, run.faults);
                if short < 64 {
                    let f = &run.faults[1];
                    assert!(matches!(f.kind, FaultKind::Memory { .. }), "{v} {:?}: {f:?}", b.kind);
                }
                assert!(batch.record(&run.resp, 3).completed, "{v} {:?}: the last call returns", b.kind);
                assert_eq!(batch.record(&run.resp, 1).completed, short >= 64, "{v} {:?}", b.kind);
            }
        }
    }

    /// The native guest's mappings after a batch are its protection table, page for page:
    /// read-only buffers with guards between them (applied a span at a time), writable buffers
    /// and packed ones readable and writable. Batches laid out alike take the delta from the
    /// table in force, others (and a restarted guest) the whole table; the sequence takes both
    /// ways, back and forth, and checks the way it took.
    #[test]
    fn the_guest_maps_the_protection_table_page_for_page() {
        use crate::batch::{BatchBuilder, Placement};
        let Some((mut b, image)) = native_x86_64() else { return }; // native runs only on an x86_64 host
        let arena = image.arena().expect("arena");
        // (buffer groups, long inputs every `long`-th group, restart the guest first): a grid of
        // 40 groups, the same less two, a layout with long inputs, the first again, ...
        let rounds = [
            (40, 0, false),
            (38, 0, false),
            (6, 2, false),
            (40, 0, false),
            (38, 0, false),
            (39, 0, true),
            (41, 3, false),
            (41, 3, false),
        ];
        let (mut last_id, mut ways) = (0, Vec::new());
        for (round, &(groups, long, restart)) in rounds.iter().enumerate() {
            if restart {
                let _ = b.reap();
            }
            let mut bb = BatchBuilder::new(Abi::of(image.arch));
            for i in 0..groups {
                let len = if long > 0 && i % long == 0 { 5000 + 4096 * (i % 3) } else { 100 };
                bb.buffer("input", &vec![1; len], false, Placement::End);
                bb.output(&[2; 16]);
                bb.buffer("packed", &[3; 9], i % 2 == 0, Placement::Packed(5));
            }
            bb.call(0, [crate::batch::Arg::Imm(0); 4], 1);
            let batch = bb.layout(arena).expect("layout");
            super::super::run_batch(&mut b, &batch).expect("run");
            let head = b.shared.as_ref().expect("arena").read(header::WORDS * 8);
            let word = |w: protocol::Word| header_word(&head, w);
            let (id, base, count) = (word(header::PROT_ID), word(header::PROT_BASE), word(header::DELTA_COUNT));
            let took = (id, base, count);
            match round {
                0 => assert_eq!((base, count), (0, 0), "nothing in force: the whole table"),
                // Two groups fewer: the grid moves by four pages, only its ends change.
                1 | 4 => assert!(base == last_id && (1..=6).contains(&count), "round {round}: {took:?}"),
                // The same table again: nothing to change.
                7 => assert_eq!((id, base, count), (last_id, last_id, 0)),
                _ => assert!(id > last_id, "round {round}: {took:?}"),
            }
            ways.push(base != 0);
            last_id = id;
            assert_guest_maps(&b, arena, &batch, &format!("round {round}"));
        }
        assert!(ways.contains(&true) && ways[1..].contains(&false), "both ways: {ways:?}");
    }

    /// A native backend for the x86_64 image, and the image; `None` on another host.
    fn native_x86_64() -> Option<(ProcessBackend, Image)> {
        let v = Variant::by_name("x86_64").expect("variant");
        if crate::variant::Arch::host() != Some(v.arch) {
            return None;
        }
        let path = crate::toolchain::build_image(&crate::paths::default_build(), v).expect("build");
        let image = Image::load(&path, v.arch).expect("image");
        Some((ProcessBackend::native(&image, Limits::default()).expect("native"), image))
    }

    /// The pages of the native guest's arena, from its `/proc/<pid>/maps`, are those of
    /// `batch`'s protection table ("--" guard, "r-" read-only, "rw" not listed).
    fn assert_guest_maps(b: &ProcessBackend, arena: Arena, batch: &crate::batch::Batch, what: &str) {
        use crate::batch::PAGE;
        let pid = b.guest.as_ref().expect("guest").child.id();
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
        let mut ranges: Vec<(u64, u64, String)> = maps
            .lines()
            .filter_map(|l| {
                let (range, rest) = l.split_once(' ')?;
                let (lo, hi) = range.split_once('-')?;
                let (lo, hi) = (u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?);
                Some((lo, hi, rest.get(..2)?.to_string()))
            })
            .collect();
        ranges.sort_by_key(|r| r.0);
        let table = batch.protections();
        let (mut r, mut t) = (0, 0);
        for page in (arena.addr..arena.addr + arena.size).step_by(PAGE as usize) {
            while ranges.get(r).is_some_and(|m| m.1 <= page) {
                r += 1;
            }
            while table.get(t).is_some_and(|p| p.addr + p.len <= page) {
                t += 1;
            }
            let want = match table.get(t).filter(|p| p.contains(page)).map(|p| p.prot) {
                None => "rw",
                Some(0) => "--",
                Some(1) => "r-",
                Some(other) => panic!("prot {other}"),
            };
            let have = ranges.get(r).filter(|m| m.0 <= page).map(|m| m.2.as_str());
            assert_eq!(have, Some(want), "{what}: page {page:#x}");
        }
    }

    /// Random layouts (every placement, empty and read-only buffers, small changes of the last
    /// layout, guests restarted now and then) on one native guest: after every batch its pages
    /// are the table's, whichever way (delta or whole table) the batch took.
    #[test]
    fn random_layouts_leave_the_guest_pages_as_their_tables_say() {
        use crate::batch::{BatchBuilder, Placement};
        use rand::{Rng, SeedableRng};
        let Some((mut b, image)) = native_x86_64() else { return }; // native runs only on an x86_64 host
        let arena = image.arena().expect("arena");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(24);
        let buffer = |rng: &mut rand_chacha::ChaCha8Rng| {
            let len = if rng.gen_ratio(1, 5) { 0 } else { rng.gen_range(1..20_000) };
            (len, rng.gen_bool(0.5), rng.gen_range(0..5u8), rng.gen_range(0..64usize))
        };
        let (mut spec, mut ways) = (Vec::new(), [0; 2]);
        for round in 0..60 {
            if rng.gen_ratio(1, 15) {
                let _ = b.reap();
            }
            if spec.is_empty() || rng.gen_ratio(1, 3) {
                spec = (0..rng.gen_range(1..30)).map(|_| buffer(&mut rng)).collect();
            } else {
                match rng.gen_range(0..3) {
                    0 => drop(spec.pop()),
                    1 => spec.push(buffer(&mut rng)),
                    _ => {
                        let i = rng.gen_range(0..spec.len());
                        spec[i].0 = rng.gen_range(0..12_000);
                    }
                }
            }
            let mut bb = BatchBuilder::new(Abi::of(image.arch));
            for &(len, writable, place, m) in &spec {
                let placement = [
                    Placement::End,
                    Placement::Start,
                    Placement::Misaligned(m),
                    Placement::Offset(m),
                    Placement::Packed(m),
                ][usize::from(place)];
                bb.buffer("buf", &vec![1; len], writable, placement);
            }
            bb.call(0, [crate::batch::Arg::Imm(0); 4], 1);
            let batch = bb.layout(arena).expect("layout");
            super::super::run_batch(&mut b, &batch).expect("run");
            let base = header_word(&b.shared.as_ref().expect("arena").read(header::WORDS * 8), header::PROT_BASE);
            ways[usize::from(base != 0)] += 1;
            assert_guest_maps(&b, arena, &batch, &format!("round {round}, {spec:?}"));
        }
        assert!(ways[0] > 0 && ways[1] > 0, "whole tables and deltas: {ways:?}");
    }

    #[test]
    fn sparse_copies_skip_only_the_given_ranges() {
        assert_eq!(kept(10, &[(2, 4), (6, 7)]).collect::<Vec<_>>(), vec![(0, 2), (4, 6), (7, 10)]);
        assert_eq!(kept(10, &[(0, 3), (8, 20)]).collect::<Vec<_>>(), vec![(3, 8)]);
        assert_eq!(kept(4, &[]).collect::<Vec<_>>(), vec![(0, 4)]);
        let mut a = SharedArena::new(8192).expect("memfd");
        a.write(&[9; 16]);
        a.write_sparse(&[1; 16], &[(4, 8)], None);
        assert_eq!(a.read(16), [[1; 4], [9; 4], [1; 4], [1; 4]].concat(), "skipped bytes are not written");
        assert_eq!(a.read_sparse(16, &[(4, 8)]), [[1; 4], [0; 4], [1; 4], [1; 4]].concat(), "and read as zeros");
    }

    /// With the payload's data ranges known, the arena ends up as the payload outside the
    /// skipped ranges all the same (zeros written where the payload is zero), whatever it held.
    #[test]
    fn a_sparse_write_with_data_ranges_leaves_the_payload() {
        let mut payload = vec![0u8; 64];
        let data = [(0, 3), (10, 20), (21, 22), (40, 64)];
        for &(lo, hi) in &data {
            payload[lo..hi].iter_mut().enumerate().for_each(|(i, b)| *b = 1 + i as u8);
        }
        for skip in [vec![], vec![(4, 12)], vec![(0, 11), (30, 45)], vec![(0, 64)]] {
            let mut a = SharedArena::new(8192).expect("memfd");
            a.write(&[0xee; 80]);
            a.write_sparse(&payload, &skip, Some(&data));
            let got = a.read(80);
            for (i, &b) in got.iter().enumerate() {
                let skipped = skip.iter().any(|&(lo, hi)| (lo..hi).contains(&i));
                let want = if skipped || i >= 64 { 0xee } else { payload[i] };
                assert_eq!(b, want, "byte {i} with skip {skip:?}");
            }
        }
    }

    #[test]
    fn a_fault_reply_checksums_the_entries_up_to_the_one_in_flight() {
        let (arena, table, entry) = (0x10000u64, 0x10100u64, 176usize);
        let sum = (0x100, 10 * 176);
        assert_eq!(fault_range(sum, table, arena, 0, entry), (0x100, 176));
        assert_eq!(fault_range(sum, table, arena, 3, entry), (0x100, 4 * 176));
        assert_eq!(fault_range(sum, table, arena, 9, entry), sum, "the last entry: the whole range");
        assert_eq!(fault_range(sum, table, arena, u64::MAX - 1, entry), sum, "a wild `current`: unchanged");
        let resumed = from_entry(sum, 4, entry);
        assert_eq!(resumed, (0x100 + 4 * 176, 6 * 176));
        assert_eq!(fault_range(resumed, table, arena, 4, entry), (0x100 + 4 * 176, 176));
        assert_eq!(fault_range(resumed, table, arena, 2, entry), resumed, "before the range: unchanged");
        assert_eq!(from_entry(sum, 99, entry), (0x100 + 10 * 176, 0));
    }

    #[test]
    fn a_recycled_response_is_zeroed_where_it_was_filled() {
        let filled = vec![0, 0, 7, 7, 0, 9, 0, 0];
        let again = zeroed_again(filled.clone(), Some(&[(2, 4), (5, 6)]), 6, 64);
        assert_eq!(again, vec![0; 6], "shorter, and every filled range zeroed");
        assert!(again.capacity() >= 8, "the same allocation");
        let grown = zeroed_again(filled.clone(), Some(&[(2, 4), (5, 6), (7, 100)]), 20, 64);
        assert_eq!((grown.len(), grown.iter().all(|&b| b == 0), grown.capacity() >= 64), (20, true, true));
        let unknown = zeroed_again(vec![1; 8], None, 4, 0);
        assert_eq!(unknown, vec![0; 4], "unknown contents: all zeroed");
    }

    #[test]
    fn the_shared_arena_round_trips_bytes() {
        let mut a = SharedArena::new(8192).expect("memfd");
        a.write(&[1, 2, 3]);
        assert_eq!(a.read(4), vec![1, 2, 3, 0]);
        assert_eq!(a.read(8200).len(), 8200, "reads past the end are zero-filled, not a panic");
    }

    #[test]
    fn the_checksum_range_stays_inside_the_payload() {
        let arena = 0x10000;
        let mut p = vec![0u8; 4096];
        p[header::TABLE.offset()..][..8].copy_from_slice(&(0x10000u64 + 256).to_le_bytes());
        p[header::NCALLS.offset()..][..8].copy_from_slice(&3u64.to_le_bytes());
        assert_eq!(table_range(&p, arena, 176), (256, 3 * 176));
        p[header::NCALLS.offset()..][..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(table_range(&p, arena, 176), (256, 4096 - 256));
        p[header::TABLE.offset()..][..8].copy_from_slice(&5u64.to_le_bytes());
        assert_eq!(table_range(&p, arena, 176), (0, 0));
    }
}

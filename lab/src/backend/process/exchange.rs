//! One request and its reply over the token protocol (kernels/README.md): checksums of the call
//! table, the reply's checks, faults named from the reply words, and the protection table or its
//! deltas stamped into the payload.

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, Signal};

use super::*;

/// The aligned-only instructions of `image`'s kernel code whose operand address the arch row
/// computes from a fault reply's registers; none when the driver sends no registers, or when
/// the image cannot be disassembled (then such a fault keeps the signal's own words).
pub(super) fn aligned_only_sites(image: &Image) -> Vec<crate::disasm::Insn> {
    if image.arch.spec().align.fault_regs.is_empty() {
        return Vec::new();
    }
    let sites = align::hook_sites(image).unwrap_or_default();
    sites.into_iter().filter(|s| matches!(s.check, align::SiteCheck::Operand(_))).map(|s| s.insn).collect()
}

/// A reply token, or why none came.
pub(super) type Reply = Result<[u64; token::REPLY_WORDS], String>;

pub(super) fn syscall_len(arch: crate::variant::Arch) -> u64 {
    arch.spec().syscall.len
}

/// Waits up to `timeout` for one whole reply token on `from` (poll, then read; no thread in
/// between, so a reply costs the host one wake-up). `Ok(None)`: nothing came in time.
pub(super) fn recv_reply(from: &mut File, timeout: Duration) -> Result<Option<[u64; token::REPLY_WORDS]>, String> {
    let mut buf = [0u8; token::REPLY_WORDS * 8];
    let mut got = 0;
    let deadline = Instant::now() + timeout;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = [PollFd::new(&*from, PollFlags::IN)];
        // At least 1 ms: a zero timeout would spin instead of waiting for the last bytes.
        let wait =
            Timespec::try_from(left.max(Duration::from_millis(1))).unwrap_or(Timespec { tv_sec: i64::MAX, tv_nsec: 0 });
        match rustix::event::poll(&mut pfd, Some(&wait)) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(format!("a short reply token ({got} of {} bytes)", buf.len())),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(format!("poll on the reply pipe failed: {e}")),
            Ok(_) => {}
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
/// The whole process group (the guest's pid is its group, confine.rs): a native guest's batch
/// runs in a child, which answers the poke, while the parent blocks SIGUSR1.
pub(super) fn poke(g: &mut Guest) -> Option<Reply> {
    let pid = Pid::from_raw(i32::try_from(g.child.id()).ok()?)?;
    rustix::process::kill_process_group(pid, Signal::USR1).ok()?;
    recv_reply(&mut g.replies, POKE_GRACE).transpose()
}

/// The call-table range of a payload (header `table`, `ncalls`): the result words the guest
/// checksums. Clamped to the payload; a header the host did not lay out gives an empty range.
pub(crate) fn table_range(payload: &[u8], arena_addr: u64, entry_bytes: usize) -> (u64, u64) {
    let word = |w: protocol::Word| header_word(payload, w);
    let Some(off) = word(header::TABLE).checked_sub(arena_addr).filter(|&o| o <= payload.len() as u64) else {
        return (0, 0);
    };
    let len = word(header::NCALLS).saturating_mul(entry_bytes as u64).min(payload.len() as u64 - off);
    (off & !7, len & !7)
}

/// The checksum range of a resumed entry: the call table from entry `start` on (the entries
/// before it were checked by earlier replies and do not run again).
pub(crate) fn from_entry(sum: (u64, u64), start: usize, entry_bytes: usize) -> (u64, u64) {
    let skip = (start as u64).saturating_mul(entry_bytes as u64).min(sum.1);
    (sum.0 + skip, sum.1 - skip)
}

/// Header word `w` of `payload` (0 when the payload is shorter).
pub(super) fn header_word(payload: &[u8], w: protocol::Word) -> u64 {
    payload.get(w.offset()..w.offset() + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// The checksum range of a fault reply: `sum` cut after entry `current` of the call table at
/// guest address `table` (the calls after it did not run), rounded down to 8 bytes, when that
/// is shorter. The drivers compute the same (`sum_upto`), in wrapping 64-bit arithmetic.
pub(super) fn fault_range(
    sum: (u64, u64),
    table: u64,
    arena_addr: u64,
    current: u64,
    entry_bytes: usize,
) -> (u64, u64) {
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
pub(super) fn rewrite_head(shared: &mut SharedArena, payload: &[u8], arena_addr: u64, start: usize) {
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

impl ProcessBackend {
    /// Sends one request and waits for its reply (poking the guest after the time budget).
    /// `None`: the guest neither answered nor reacted to the poke.
    pub(super) fn round_trip(&mut self, sum: (u64, u64)) -> Option<Reply> {
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
    pub(super) fn verify(&mut self, reply: &[u64; token::REPLY_WORDS], want: u64) -> Result<(), String> {
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
    pub(super) fn exchange(&mut self, resp_len: usize, sum: (u64, u64), whole: bool) -> Result<Answer, BackendError> {
        if self.guest.is_none() {
            self.guest = Some(self.spawn()?);
        }
        let reply = match self.round_trip(sum) {
            Some(Ok(r)) => {
                self.judge_witness(Some(&r));
                r
            }
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
        let shared = self.shared.as_ref().expect("arena created");
        if let Err(why) = super::claims::check(&reply, self.sent, self.entry_bytes, |at| shared.word(at)) {
            // A forgery: the batch's results are not trusted (Backend::verify fails every call
            // of it) and the guest, which lied, does not serve another entry.
            self.forget_lent();
            self.forged.get_or_insert(why);
            let _ = self.reap();
            let resp = if resp.len() < resp_len { self.read_response(resp_len) } else { resp };
            return Ok(Answer::Run(RawRun { resp, fault: None }));
        }
        self.last_sum = (sum, want);
        let fault = match reply[token::KIND] {
            token::KIND_DONE => None,
            token::KIND_HANDLER => {
                let (sig, handler) = (reply[token::SIGNO], reply[token::SI_ADDR]);
                let name = protocol::SIGNALS.iter().find(|s| s.1 == sig).map_or("a signal", |s| s.0);
                self.foreign_handler.get_or_insert(format!(
                    "the driver found a handler it did not install for {name} ({sig}) at {handler:#x} when the \
                     entry ended: a handler installed by kernel code"
                ));
                None
            }
            token::KIND_FAULT => Some(self.fault_of(&reply)),
            other => return Ok(self.surprise(format!("reply token of kind {other}"))),
        };
        Ok(Answer::Run(RawRun { resp, fault }))
    }

    /// Kills the guest after a protocol surprise; the reason and how the guest ended.
    pub(super) fn surprise(&mut self, why: String) -> Answer {
        let how = self.reap();
        let detail = if how.is_empty() { String::new() } else { format!("guest ended: {how}") };
        Answer::Surprise { kind: FaultKind::Protocol(why), detail }
    }

    /// The guest died without a reply: how it ended (exit status and its meaning, or signal).
    pub(super) fn crash(&mut self) -> Answer {
        let how = self.reap();
        if how.starts_with(SIGSYS_DEATH) {
            let kind = FaultKind::SystemCall { nr: None, name: None };
            return Answer::Surprise { kind, detail: format!("{REFUSED_BLOCKED} ({how})") };
        }
        Answer::Surprise { kind: FaultKind::Crash(how), detail: CLOSED.into() }
    }

    /// The fault a fault reply reports. The guest lives on: its handler returned into the
    /// request loop (kernels/README.md), so the next entry needs no new process.
    pub(super) fn fault_of(&mut self, reply: &[u64; token::REPLY_WORDS]) -> Fault {
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
    pub(super) fn misaligned(&self, kind: &FaultKind, pc: u64, reply: &[u64; token::REPLY_WORDS]) -> Option<FaultKind> {
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

    /// Writes the header (and protection table) of `payload` for an entry that runs call
    /// `call` alone: what the host owns, not what an earlier call of the kernel left there.
    pub(super) fn one_call_head(&mut self, payload: &[u8], call: u64) {
        let shared = self.shared.as_mut().expect("arena created");
        rewrite_head(shared, payload, self.arena.addr, call as usize);
        shared.write_at(header::NCALLS.offset(), &(call + 1).to_le_bytes());
        self.stamp(payload);
        let table = super::claims::Sent::of(payload, self.arena.addr).table;
        self.sent = super::claims::Sent { start: call, ncalls: call + 1, table };
    }

    /// Writes the protection words of the header for sending `payload` to the guest
    /// ([`prot_delta::stamp_header`]) into the shared arena.
    pub(super) fn stamp(&mut self, payload: &[u8]) {
        use super::prot_delta::stamp_header;
        let arena = (self.arena.addr, self.arena.size);
        let (guest, out) = &mut self.in_force;
        match self.shared.as_mut() {
            Some(shared) => stamp_header(guest, out, payload, arena, |at, v| shared.write_at(at, &v.to_le_bytes())),
            None => stamp_header(guest, out, payload, arena, |_, _| {}),
        }
    }

    /// Forgets the last response handed out: it was dropped, or another goes back instead.
    pub(super) fn forget_lent(&mut self) {
        self.recycler.forget_lent();
    }

    /// Keeps the guard pages and the response ranges of `batch` for the sparse copies, unless
    /// they are known.
    pub(super) fn note_batch(&mut self, batch: &Batch) {
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
    pub(super) fn read_response(&mut self, resp_len: usize) -> Vec<u8> {
        let (mut out, mut ranges) = self.recycler.zeroed(resp_len, self.arena.size as usize);
        let Some(shared) = self.shared.as_ref() else { return out };
        // The ranges copied, kept to zero them again when the response comes back.
        if self.reads.1 == self.guards.1 && self.reads.1 != (0, 0) {
            ranges.extend_from_slice(&self.reads.0);
        } else {
            ranges.extend(kept(resp_len, &self.guards.0));
        }
        shared.copy_ranges(&mut out, ranges.iter().copied());
        self.recycler.lend(&out, ranges);
        out
    }
}

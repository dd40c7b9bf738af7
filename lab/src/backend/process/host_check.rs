//! Verdicts the host verifies itself (issue 28): after every batch of a qemu-user or native
//! guest, from the host's own mapping of the arena memfd and the guest's `/proc` files, the
//! lab checks what a kernel could have changed inside its own process to hide a bad call:
//!
//! - every read-only buffer still holds the bytes the host laid (a kernel that lifted its
//!   input's protection and wrote it);
//! - the bytes beside every paged buffer, inside its own pages, are still the zeros the host
//!   laid, and the guard page on each side ([`GUARD_WINDOW`] bytes) still holds
//!   the host's poison ([`poison`]) (a kernel that lifted a guard and wrote past its buffer);
//! - the guest's mappings of the arena (`PROCMAP_QUERY` on its `/proc/<pid>/maps`, vma_query.rs)
//!   are the protection table in force, page for page, and the kernels' data is read-only (a
//!   lift left in place);
//! - natively, the guest catches no signal the driver did not ask for (`SigCgt` of
//!   `/proc/<pid>/status`), and on both backends the image's executable bytes in the guest
//!   (read through `/proc/<pid>/mem`) are the image's own (a patched driver).
//!
//! Under qemu-user the guest's address `a` lives at host address `a + guest_base`; the lab
//! does not ask qemu for `guest_base` but reads it off the memfd's mapping (host address minus
//! file offset minus `lab_arena`), which holds for any base qemu 7.2 picks.
//!
//! A mismatch is a [`FaultKind::HostSaw`] fault on every call that pointed into the bytes
//! concerned (or on every call of the batch when none did), and the guest is restarted: the
//! next batch starts with a fresh process and the whole table, so one lift fails one batch.
//! What the host cannot see (a lift undone before the reply, bytes restored, reads, qemu's
//! emulated signal handlers) is in docs/threat-model.md.

use std::os::unix::fs::FileExt;

use super::*;
use crate::batch::{Protection, PAGE};

/// Bytes of each guard page next to a paged buffer that carry the host's poison: the whole
/// page, so a kernel that writes past (or before) its buffer with the guard lifted is seen
/// wherever in that page it writes. Two windows per buffer (one where neighbours share a
/// guard), so the check stays proportional to what was laid; the stack guard's pages beyond
/// the first are not poisoned (they can be megabytes).
pub(super) const GUARD_WINDOW: usize = PAGE as usize;

/// The poison byte at arena offset `at` of a guard window: never all one value, so a kernel
/// that writes a constant (zeros, ones) past its buffer cannot match it by chance.
pub(super) const fn poison(at: usize) -> u8 {
    (at as u8).wrapping_mul(0x9d) ^ 0xa5
}

/// [`poison`] of offsets 0..256 + [`GUARD_WINDOW`]: it repeats every 256 bytes, so the poison
/// of any window up to [`GUARD_WINDOW`] bytes is a slice of this, compared and copied at memcmp
/// speed.
const POISON: [u8; 256 + GUARD_WINDOW] = {
    let mut t = [0u8; 256 + GUARD_WINDOW];
    let mut i = 0;
    while i < t.len() {
        t[i] = poison(i);
        i += 1;
    }
    t
};

/// The poison of arena offsets `[lo, lo + len)` (`len` at most [`GUARD_WINDOW`]).
fn poison_at(lo: usize, len: usize) -> &'static [u8] {
    &POISON[lo % 256..lo % 256 + len]
}

/// A page of zeros, to compare slack at memcmp speed.
const ZEROS: [u8; PAGE as usize] = [0; PAGE as usize];

/// What a checked byte range of the arena should hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The payload's bytes: a read-only buffer.
    Laid,
    /// Zeros: the rest of a paged buffer's own pages.
    Zero,
    /// [`poison`]: a window of a guard page.
    Poison,
}

/// One checked range: arena offsets `[lo, hi)`, its buffer's index and what it should hold.
#[derive(Debug, Clone, Copy)]
struct Region {
    lo: usize,
    hi: usize,
    buf: usize,
    expect: Expect,
}

/// The regions of one batch the host checks, keyed by the batch's payload (address, length).
#[derive(Debug, Default)]
pub(super) struct Plan {
    key: (usize, usize),
    regions: Vec<Region>,
}

impl Plan {
    /// The regions of `batch`: every read-only buffer, and around every paged buffer its
    /// page slack and a guard window on each side.
    pub(super) fn of(batch: &Batch) -> Plan {
        let mut regions = Vec::new();
        let page = PAGE as usize;
        for (buf, _, off, len, writable, paged) in batch.buffers() {
            if !writable && len > 0 {
                regions.push(Region { lo: off, hi: off + len, buf, expect: Expect::Laid });
            }
            if !paged {
                continue;
            }
            let (first, end) = (off / page * page, (off + len).div_ceil(page) * page);
            regions.push(Region { lo: first, hi: off, buf, expect: Expect::Zero });
            regions.push(Region { lo: off + len, hi: end.max(off + len), buf, expect: Expect::Zero });
            regions.push(Region { lo: first.saturating_sub(GUARD_WINDOW), hi: first, buf, expect: Expect::Poison });
            regions.push(Region { lo: end, hi: end + GUARD_WINDOW, buf, expect: Expect::Poison });
        }
        regions.retain(|r| r.lo < r.hi);
        // A guard page between two buffers is both one's window after and the other's before:
        // poisoned and checked once.
        let mut windows = std::collections::HashSet::new();
        regions.retain(|r| r.expect != Expect::Poison || windows.insert(r.lo));
        Plan { key: (batch.payload.as_ptr() as usize, batch.payload.len()), regions }
    }

    /// Lays the poison into the guard windows that lie inside `guards` (sorted arena offsets
    /// of the guard pages of the payload being written: a resumed entry of the same layout has
    /// the same; another payload's windows are not guard pages and are left alone).
    pub(super) fn lay_poison(&self, shared: &mut SharedArena, guards: &[(usize, usize)]) {
        for r in self.regions.iter().filter(|r| r.expect == Expect::Poison) {
            if inside(guards, r.lo, r.hi) {
                shared.write_at(r.lo, poison_at(r.lo, r.hi - r.lo));
            }
        }
    }
}

/// Whether `[lo, hi)` lies inside one range of `ranges` (sorted, disjoint).
fn inside(ranges: &[(usize, usize)], lo: usize, hi: usize) -> bool {
    let i = ranges.partition_point(|r| r.1 <= lo);
    ranges.get(i).is_some_and(|r| r.0 <= lo && hi <= r.1)
}

/// One thing the host saw: the sentence and the guest addresses it concerns.
struct Seen {
    what: String,
    lo: u64,
    hi: u64,
}

impl ProcessBackend {
    /// Lays the guard poison again after a whole payload was written over the arena.
    pub(super) fn relay_poison(&mut self) {
        if let Some(shared) = self.shared.as_mut() {
            self.plan.lay_poison(shared, &self.guards.0);
        }
    }

    /// The checks of [`Backend::verify`]: memory, then (for a guest still running) its
    /// mappings, signals and code, and what the witness saw (witness.rs; first in the list).
    /// Any finding restarts the guest.
    pub(super) fn host_verify(&mut self, batch: &Batch) -> Vec<Fault> {
        let plan = std::mem::take(&mut self.plan);
        let mut seen = Vec::new();
        if let Some(why) = self.forged.take() {
            seen.push(Seen { what: format!("forged reply: {why}"), lo: 0, hi: 0 });
        }
        if let Some(what) = self.foreign_handler.take() {
            seen.push(Seen { what, lo: 0, hi: 0 });
        }
        if plan.key == (batch.payload.as_ptr() as usize, batch.payload.len()) && plan.key != (0, 0) {
            seen.extend(self.check_memory(batch, &plan));
        }
        if let Some(pid) = self.guest.as_ref().map(|g| g.child.id()) {
            seen.extend(self.check_process(batch, pid));
        }
        // After the mappings: a restore that beat that check was a traced call before it. The
        // tracer's sight comes first: it names the call itself, the checks above its effects.
        self.judge_witness(None);
        let seen: Vec<Seen> =
            self.witnessed.drain(..).map(|(what, lo, hi)| Seen { what, lo, hi }).chain(seen).collect();
        self.plan = plan;
        if seen.is_empty() {
            return Vec::new();
        }
        let detail = self.reap();
        faults_for(batch, seen, &detail)
    }

    /// The regions of `plan` whose bytes are not what the host laid.
    fn check_memory(&mut self, batch: &Batch, plan: &Plan) -> Vec<Seen> {
        let Some(shared) = self.shared.as_ref() else { return Vec::new() };
        let names: Vec<&str> = batch.buffers().map(|b| b.1).collect();
        let mut got = std::mem::take(&mut self.scratch);
        let mut seen = Vec::new();
        let mut guards = std::mem::take(&mut self.scratch_guards);
        guard_ranges(&mut guards, &batch.payload, self.arena.addr);
        for r in &plan.regions {
            if r.expect == Expect::Poison && !inside(&guards, r.lo, r.hi) {
                continue;
            }
            got.clear();
            got.resize(r.hi - r.lo, 0);
            shared.copy_ranges_to(&mut got, r.lo);
            let want = |at: usize| match r.expect {
                Expect::Laid => batch.payload.get(at).copied().unwrap_or(0),
                Expect::Zero => 0,
                Expect::Poison => poison(at),
            };
            // Whole-slice comparisons first (memcmp speed); the byte only for a mismatch.
            let same = match r.expect {
                Expect::Laid => batch.payload.get(r.lo..r.hi).is_some_and(|laid| laid == &got[..]),
                Expect::Zero => got.chunks(ZEROS.len()).all(|c| c == &ZEROS[..c.len()]),
                Expect::Poison => got[..] == *poison_at(r.lo, got.len()),
            };
            if same {
                continue;
            }
            let Some(i) = (0..got.len()).find(|&i| got[i] != want(r.lo + i)) else { continue };
            let at = r.lo + i;
            let name = names.get(r.buf).copied().unwrap_or("buffer");
            let (off, len) = batch.buffers().nth(r.buf).map(|b| (b.2, b.3)).unwrap_or((r.lo, 0));
            let place = match r.expect {
                Expect::Laid => format!("{name}[{}]", at - off),
                _ if at < off => format!("{} bytes before the start of {name}", off - at),
                _ => format!("{name}+{}", at - off),
            };
            let how = format!("{:#04x} laid, {:#04x} read back", want(at), got[i]);
            let what = match r.expect {
                Expect::Laid if self.is_protected(batch, at) => format!(
                    "input changed under a read-only mapping: {place} ({how}); the kernel lifted its protection"
                ),
                Expect::Laid => format!("read-only input changed: {place} ({how})"),
                Expect::Zero => format!("bytes beside the buffer changed: {place}, in its own pages ({how})"),
                Expect::Poison => {
                    format!("guard poison at {place} changed ({how}): the kernel lifted the guard page's protection")
                }
            };
            let lo = self.arena.addr + off as u64;
            seen.push(Seen { what, lo, hi: lo + len as u64 });
        }
        self.scratch = got;
        self.scratch_guards = guards;
        seen.extend(self.check_table(batch));
        seen
    }

    /// The words of the call table and header only the host writes (`fn`, the arguments, the
    /// copy fields, `seed`, `stack`; `table`, `resp_len`, the protection table's
    /// place) still hold what the host sent: a kernel that rewrote them (its later calls' inputs,
    /// the number of calls) changed what ran, whatever the reply said.
    fn check_table(&self, batch: &Batch) -> Option<Seen> {
        use protocol::{entry, Writer};
        let shared = self.shared.as_ref()?;
        let sent =
            |at: usize| batch.payload.get(at..at + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8")));
        let head = [header::TABLE, header::RESP_LEN, header::PROT_TABLE, header::PROT_COUNT];
        let mut words = head.iter().map(|w| (w.offset(), format!("header word `{}`", w.name))).collect::<Vec<_>>();
        let host: Vec<_> = entry::ALL.iter().filter(|w| w.writer == Writer::Host).collect();
        let table = batch.table_range().start;
        let changed = |at: usize| shared.word(at) != sent(at);
        if let Some((at, what)) = words.drain(..).find(|(at, _)| changed(*at)) {
            return Some(table_seen(what, sent(at), shared.word(at)));
        }
        for call in 0..batch.ncalls() {
            let base = table + call * self.entry_bytes;
            if let Some(w) = host.iter().find(|w| changed(base + w.offset())) {
                let at = base + w.offset();
                return Some(table_seen(format!("call {call}'s entry word `{}`", w.name), sent(at), shared.word(at)));
            }
        }
        None
    }

    /// Whether arena offset `at` lies in a read-only entry of `batch`'s protection table.
    fn is_protected(&self, batch: &Batch, at: usize) -> bool {
        let addr = self.arena.addr + at as u64;
        batch.protections().iter().any(|p| p.prot == crate::batch::PROT_READ && p.contains(addr))
    }

    /// The guest's mappings, caught signals and code against what the host set up.
    fn check_process(&self, batch: &Batch, pid: u32) -> Vec<Seen> {
        let table = batch.protections();
        let guest_lo = table.iter().map(|p| p.addr).chain([self.arena.addr]).min().unwrap_or(self.arena.addr);
        let guest_end = table.iter().map(|p| p.addr + p.len).chain([self.arena.addr + self.arena.size]).max();
        let Some(vmas) = self.guest_maps(pid, guest_lo, guest_end.unwrap_or(u64::MAX)) else { return Vec::new() };
        let Some(base) = guest_base(&vmas, self.arena.addr) else {
            if !alive(pid) {
                // Killed after its reply (from outside: an operator, the OOM killer): its
                // mappings, handlers and code are gone and act on nothing; the bytes it left
                // are checked from the host's mapping, its death is seen at the next request.
                return Vec::new();
            }
            let (lo, hi) = (self.arena.addr, self.arena.addr + self.arena.size);
            return vec![Seen { what: "the arena is no longer mapped from the lab's memfd".into(), lo, hi }];
        };
        let mut seen = check_protections(&vmas, &table, (self.arena.addr, self.arena.size), base);
        if self.kind == BackendKind::Native {
            seen.extend(self.check_signals(pid));
        }
        seen.extend(self.check_code(pid, base));
        seen
    }

    /// The guest's mappings of guest addresses `[lo, end)` (host addresses in the result), by
    /// `PROCMAP_QUERY` (vma_query.rs: only those mappings, no text), or from the text of its
    /// `/proc/<pid>/maps` on a kernel without it; empty when the arena memfd is not mapped at
    /// all, `None` when they cannot be read (the guest is gone).
    fn guest_maps(&self, pid: u32, lo: u64, end: u64) -> Option<Vec<Vma>> {
        use super::vma_query::{FileId, Maps, QueryError};
        let file = self.shared.as_ref().and_then(|s| FileId::of(&s.fd));
        if let (Some(file), Some(maps)) = (file, Maps::open(pid)) {
            let vmas = maps.file_origin(file).and_then(|origin| match origin {
                None => Ok(Vec::new()),
                Some(origin) => {
                    let base = origin.wrapping_sub(self.arena.addr) as i64;
                    maps.overlapping(lo.wrapping_add_signed(base), end.wrapping_add_signed(base), file)
                }
            });
            match vmas {
                Ok(v) => return Some(v),
                Err(QueryError::Failed) => return None,
                Err(QueryError::Unsupported) => {}
            }
        }
        read_maps(pid, self.arena.addr, end)
    }

    /// Natively: signals the guest catches beyond the driver's ([`protocol::SIGNALS`]).
    /// (qemu-user emulates `sigaction` itself: its `SigCgt` is qemu's, not the guest's.)
    fn check_signals(&self, pid: u32) -> Option<Seen> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let caught = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
        let caught = u64::from_str_radix(caught.trim(), 16).ok()?;
        let driver = protocol::SIGNALS.iter().fold(0u64, |m, &(_, n)| m | 1 << (n - 1));
        let extra = caught & !driver;
        if extra == 0 {
            return None;
        }
        let sigs: Vec<String> = (0..64).filter(|b| extra >> b & 1 == 1).map(|b| (b + 1).to_string()).collect();
        let what = format!(
            "the guest catches signal {} the driver never asked for (/proc/{pid}/status SigCgt {caught:#x}): a \
             handler installed by kernel code",
            sigs.join(", ")
        );
        Some(Seen { what, lo: 0, hi: 0 })
    }

    /// The image's executable segments as the guest holds them (`/proc/<pid>/mem` at
    /// `vaddr + base`) against the image file's bytes: a patched driver or kernel.
    fn check_code(&self, pid: u32, base: i64) -> Option<Seen> {
        let mem = File::open(format!("/proc/{pid}/mem")).ok()?;
        let mut buf = Vec::new();
        for (vaddr, bytes) in &self.code {
            buf.clear();
            buf.resize(bytes.len(), 0);
            let host = vaddr.checked_add_signed(base)?;
            mem.read_exact_at(&mut buf, host).ok()?;
            if let Some(i) = buf.iter().zip(bytes).position(|(a, b)| a != b) {
                let addr = vaddr + i as u64;
                let what = format!(
                    "the image's code changed in the guest at {addr:#x} (a {:#04x} in the image, {:#04x} in the guest): \
                     the kernel patched code",
                    bytes[i], buf[i]
                );
                return Some(Seen { what, lo: 0, hi: 0 });
            }
        }
        None
    }
}

/// What a rewritten host word of the call table or header is.
fn table_seen(what: String, sent: u64, got: u64) -> Seen {
    let what =
        format!("{what} changed in the arena ({sent:#x} sent, {got:#x} read back): the kernel rewrote the call table");
    Seen { what, lo: 0, hi: 0 }
}

/// One line of `/proc/<pid>/maps`: `[lo, hi)`, readable, writable, the file offset and whether
/// the file is the lab's arena memfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Vma {
    pub lo: u64,
    pub hi: u64,
    pub read: bool,
    pub write: bool,
    pub offset: u64,
    pub arena: bool,
}

/// The lines of a `/proc/<pid>/maps` text (proc(5)), sorted by address; malformed lines skipped.
#[cfg(test)]
fn parse_maps(text: &str) -> Vec<Vma> {
    let mut out: Vec<Vma> = text.lines().filter_map(parse_vma).collect();
    out.sort_by_key(|v| v.lo);
    out
}

/// One line of `/proc/<pid>/maps` (proc(5)); `None` when malformed.
fn parse_vma(line: &str) -> Option<Vma> {
    let mut f = line.split_whitespace();
    let (lo, hi) = f.next()?.split_once('-')?;
    let perms = f.next()?.as_bytes();
    let offset = u64::from_str_radix(f.next()?, 16).ok()?;
    let path = f.nth(2).unwrap_or("");
    Some(Vma {
        lo: u64::from_str_radix(lo, 16).ok()?,
        hi: u64::from_str_radix(hi, 16).ok()?,
        read: perms.first() == Some(&b'r'),
        write: perms.get(1) == Some(&b'w'),
        offset,
        arena: path == "/memfd:lab_arena",
    })
}

/// The guest's mappings from `/proc/<pid>/maps` up to guest address `guest_end` (host
/// addresses; the kernel lists them in address order): reading stops past it once the arena's
/// memfd line gave the guest base, because the kernel writes the file as it is read and qemu
/// holds hundreds of mappings above the guest's (reading them all was a sixth of a qemu run's
/// CPU). `None` when the file cannot be read.
fn read_maps(pid: u32, arena_addr: u64, guest_end: u64) -> Option<Vec<Vma>> {
    use std::io::BufRead;
    let file = File::open(format!("/proc/{pid}/maps")).ok()?;
    let mut out: Vec<Vma> = Vec::new();
    let mut host_end: Option<u64> = None;
    for line in std::io::BufReader::with_capacity(4096, file).lines() {
        let Some(v) = parse_vma(&line.ok()?) else { continue };
        if host_end.is_some_and(|end| v.lo >= end) {
            break;
        }
        if v.arena && host_end.is_none() {
            let base = v.lo.wrapping_sub(v.offset).wrapping_sub(arena_addr) as i64;
            host_end = Some(guest_end.wrapping_add_signed(base));
        }
        out.push(v);
    }
    out.sort_by_key(|v| v.lo);
    Some(out)
}

/// Whether `pid` still runs: its `/proc/<pid>/stat` is readable and its state (proc(5), the
/// field after the parenthesised name) is neither zombie (`Z`) nor dead (`X`). A process
/// killed after its reply has an empty `maps`, which must not read as an unmapped arena.
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, None | Some('Z' | 'X'))
}

/// Host address minus guest address of the arena: where the memfd's offset 0 is mapped, less
/// `lab_arena` (0 natively; qemu-user's `guest_base`). `None` when no mapping of the memfd is
/// left.
fn guest_base(vmas: &[Vma], arena_addr: u64) -> Option<i64> {
    let v = vmas.iter().find(|v| v.arena)?;
    Some(v.lo.wrapping_sub(v.offset).wrapping_sub(arena_addr) as i64)
}

/// Mismatched pages reported per batch at most.
const MAX_SEEN: usize = 8;

/// `(readable, writable)` of a table `prot`.
fn rw(prot: u64) -> (bool, bool) {
    (prot & crate::batch::PROT_READ != 0, prot & crate::batch::PROT_WRITE != 0)
}

/// The arena's pages (`(addr, size)`, guest addresses) and the table's entries outside it
/// (the kernels' data) against the guest's mappings `vmas` (host addresses, `base` apart): a
/// page mapped otherwise than the table says, or not from the memfd at its own offset.
fn check_protections(vmas: &[Vma], table: &[Protection], arena: (u64, u64), base: i64) -> Vec<Seen> {
    let (lo, size) = arena;
    // (page, what the guest has, what the table says)
    let mut bad: Vec<(u64, String, (bool, bool))> = Vec::new();
    let mut page = lo;
    let (mut v, mut t) = (0, 0);
    // A few pages name the lift; a guest that remapped everything would list thousands.
    while page < lo + size && bad.len() < MAX_SEEN {
        let host = page.wrapping_add_signed(base);
        while vmas.get(v).is_some_and(|m| m.hi <= host) {
            v += 1;
        }
        while table.get(t).is_some_and(|p| p.addr + p.len <= page) {
            t += 1;
        }
        let entry = table.get(t).filter(|p| p.contains(page));
        let want = entry.map_or((true, true), |p| rw(p.prot));
        // Every page up to the next boundary of either side is alike: check it once.
        let next_t = entry.map_or(table.get(t).map_or(lo + size, |p| p.addr), |p| p.addr + p.len);
        match vmas.get(v).filter(|m| m.lo <= host) {
            Some(m) if m.arena && m.offset.wrapping_add(host - m.lo) == page - lo => {
                if (m.read, m.write) != want {
                    let have = if m.write {
                        "read-write"
                    } else if m.read {
                        "read-only"
                    } else {
                        "no access"
                    };
                    bad.push((page, have.into(), want));
                }
                let next_v = (m.hi as i64).wrapping_sub(base) as u64;
                page = next_t.min(next_v).min(lo + size).max(page + PAGE);
            }
            _ => {
                bad.push((page, "not the lab's memfd".into(), want));
                page = next_t.max(page + PAGE);
            }
        }
    }
    for p in table.iter().filter(|p| p.addr + p.len <= lo || p.addr >= lo + size) {
        let want = rw(p.prot);
        let host = p.addr.wrapping_add_signed(base);
        let differs = vmas.iter().filter(|m| m.lo < host + p.len && host < m.hi).any(|m| (m.read, m.write) != want);
        if differs {
            bad.push((p.addr, "mapped otherwise".into(), want));
        }
    }
    let name = |(r, w): (bool, bool)| match (r, w) {
        (false, false) => "no access",
        (true, false) => "read-only",
        _ => "read-write",
    };
    bad.into_iter()
        .map(|(at, have, want)| Seen {
            what: format!(
                "the page at {at:#x} is {have} in the guest, the table in force says {}: the kernel changed its \
                 protection",
                name(want)
            ),
            lo: at,
            hi: at + PAGE,
        })
        .collect()
}

/// The faults for what the host saw: each on the calls that pointed into its bytes, or on every
/// call of `batch` when none did or it concerns the whole process.
fn faults_for(batch: &Batch, seen: Vec<Seen>, detail: &str) -> Vec<Fault> {
    let mut out: Vec<Fault> = Vec::new();
    for s in seen {
        let near =
            if s.hi > s.lo { batch.calls_pointing_into(s.lo.saturating_sub(PAGE), s.hi + PAGE) } else { Vec::new() };
        let calls = if near.is_empty() { (0..batch.ncalls()).collect() } else { near };
        for call in calls {
            if out.iter().any(|f| f.call == Some(call)) {
                continue;
            }
            let kind = FaultKind::HostSaw(s.what.clone());
            out.push(Fault { kind, pc: None, call: Some(call), detail: format!("guest restarted: {detail}") });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARENA: u64 = 0x40_0000;

    fn vma(lo: u64, hi: u64, perms: &str, offset: u64) -> String {
        format!("{lo:x}-{hi:x} {perms} {offset:08x} 00:01 42 /memfd:lab_arena (deleted)")
    }

    #[test]
    fn a_running_process_is_alive_and_a_reaped_one_is_not() {
        assert!(alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!alive(pid));
    }

    #[test]
    fn the_guest_base_is_read_off_the_memfd_mapping() {
        // qemu-user: the guest's arena at ARENA lives at host ARENA + 0x7f00_0000_0000.
        let base = 0x7f00_0000_0000u64;
        let text = [
            "00400000-00401000 r-xp 00000000 08:01 7 /image".to_string(),
            vma(base + ARENA + 0x2000, base + ARENA + 0x8000, "rw-s", 0x2000),
            vma(base + ARENA, base + ARENA + 0x2000, "r--s", 0),
        ]
        .join("\n");
        let vmas = parse_maps(&text);
        assert_eq!(vmas.len(), 3);
        assert_eq!(guest_base(&vmas, ARENA), Some(base as i64));
        assert_eq!(guest_base(&vmas[..1], ARENA), None, "no memfd mapping");
    }

    #[test]
    fn a_page_mapped_otherwise_than_the_table_is_named() {
        let table = [
            Protection { addr: ARENA + 0x1000, len: 0x1000, prot: 0 },
            Protection { addr: ARENA + 0x2000, len: 0x2000, prot: crate::batch::PROT_READ },
        ];
        let arena = (ARENA, 0x8000);
        let good = [
            vma(ARENA, ARENA + 0x1000, "rw-s", 0),
            vma(ARENA + 0x1000, ARENA + 0x2000, "---s", 0x1000),
            vma(ARENA + 0x2000, ARENA + 0x4000, "r--s", 0x2000),
            vma(ARENA + 0x4000, ARENA + 0x8000, "rw-s", 0x4000),
        ];
        assert!(check_protections(&parse_maps(&good.join("\n")), &table, arena, 0).is_empty());
        // The second read-only page lifted to read-write.
        let lifted = [
            good[0].clone(),
            good[1].clone(),
            vma(ARENA + 0x2000, ARENA + 0x3000, "r--s", 0x2000),
            vma(ARENA + 0x3000, ARENA + 0x8000, "rw-s", 0x3000),
        ];
        let seen = check_protections(&parse_maps(&lifted.join("\n")), &table, arena, 0);
        assert_eq!(seen.len(), 1);
        assert_eq!((seen[0].lo, seen[0].hi), (ARENA + 0x3000, ARENA + 0x4000));
        assert!(
            seen[0].what.contains("is read-write in the guest, the table in force says read-only"),
            "{}",
            seen[0].what
        );
        // The guard replaced by an anonymous mapping.
        let mut anon = good.clone();
        anon[1] = format!("{:x}-{:x} rw-p 00000000 00:00 0", ARENA + 0x1000, ARENA + 0x2000);
        let seen = check_protections(&parse_maps(&anon.join("\n")), &table, arena, 0);
        assert_eq!(seen.len(), 1);
        assert!(seen[0].what.contains("not the lab's memfd"), "{}", seen[0].what);
    }

    #[test]
    fn the_plan_checks_read_only_bytes_slack_and_guard_windows() {
        use crate::batch::{BatchBuilder, Placement};
        let mut b = BatchBuilder::new(crate::abi::Abi::of(crate::variant::Arch::X86_64));
        b.buffer("input", &[7; 100], false, Placement::End);
        b.buffer("state", &[1; 16], true, Placement::Offset(8));
        b.call(0, [crate::batch::Arg::Imm(0); 4], 1);
        let batch = b.layout(crate::image::Arena { addr: ARENA, size: 32 << 20, kernel_data: None }).expect("layout");
        let plan = Plan::of(&batch);
        let kinds = |e: Expect| plan.regions.iter().filter(|r| r.expect == e).count();
        // Four guard pages around two buffers, the one between them shared: three windows,
        // each a whole page.
        assert_eq!((kinds(Expect::Laid), kinds(Expect::Poison)), (1, 3));
        for r in plan.regions.iter().filter(|r| r.expect == Expect::Poison) {
            assert_eq!((r.lo % PAGE as usize, r.hi - r.lo), (0, PAGE as usize), "{r:?}");
        }
        // input: flush at its page's end, so slack only before it; state: 8 bytes before it
        // and the rest of its page after it.
        assert_eq!(kinds(Expect::Zero), 3);
        let mut guards = Vec::new();
        guard_ranges(&mut guards, &batch.payload, ARENA);
        for r in plan.regions.iter().filter(|r| r.expect == Expect::Poison) {
            assert!(inside(&guards, r.lo, r.hi), "a poison window outside the guard pages: {r:?}");
        }
        assert_ne!(poison(0), poison(1));
    }
}

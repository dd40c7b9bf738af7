//! A laid-out batch and what its response says: call records, returned buffers, and addresses
//! described relative to the nearest buffer or the stack.

use super::{
    get, protections, put, BufId, Placed, Protection, StackWindow, ZeroedPayload, ENTRY_FIXED_WORDS, HEADER_WORDS,
};
use crate::image::Arena;
use crate::protocol::{entry as ent, header as hdr};

/// A laid-out batch, ready for a backend.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Bytes to write at `lab_arena`.
    pub payload: Vec<u8>,
    /// Bytes from `lab_arena` the backend returns (header, table, writable buffers).
    pub resp_len: usize,
    /// The arena the batch was laid out for.
    pub arena: Arena,
    /// The kernel stack of every call.
    pub stack: StackWindow,
    pub(super) table_off: usize,
    pub(super) names: Vec<&'static str>,
    pub(super) placed: Vec<Placed>,
    pub(super) seeds: Vec<u64>,
    pub(super) entry_words: usize,
    pub(super) nsaved: usize,
}

pub(super) fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// What the driver recorded for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// Whether the call returned to the driver.
    pub completed: bool,
    /// a0 / x0 / rax after the return.
    pub ret: u64,
    /// Stack pointer before the call and after the return.
    pub sp_before: u64,
    /// See `sp_before`.
    pub sp_after: u64,
    /// x86_64 RFLAGS after the return (0 elsewhere).
    pub flags: u64,
    /// The FP control registers after the return (`Abi::control`'s layout; 0 when the
    /// driver has none).
    pub fpctl: u64,
    /// Poison seed of this call.
    pub seed: u64,
    /// Callee-saved registers after the return, in ABI order.
    pub saved: Vec<u64>,
}

impl Batch {
    /// Number of calls in the table.
    pub fn ncalls(&self) -> usize {
        self.seeds.len()
    }

    /// Offset in the response where the call table ends and the writable buffers begin.
    pub fn table_end(&self) -> usize {
        self.table_off + self.entry_words * self.ncalls() * 8
    }

    /// Offset and length in bytes of the call table in the payload: the result words the
    /// qemu/native guest checksums after a batch ([`crate::protocol::checksum`]).
    pub fn table_range(&self) -> std::ops::Range<usize> {
        self.table_off..self.table_end()
    }

    /// The payload's allocation with its [`data_ranges`](Self::data_ranges) zeroed (so all
    /// zeros: nothing writes the payload outside them), for [`BatchBuilder::layout_and_clear`].
    pub fn into_payload(self) -> ZeroedPayload {
        let mut payload = self.payload;
        let table_end = (self.table_off + self.entry_words * self.seeds.len() * 8).min(payload.len());
        payload[..table_end].fill(0);
        for p in &self.placed {
            let at = (p.offset as usize).min(payload.len());
            let end = (at + p.len).min(payload.len());
            payload[at..end].fill(0);
        }
        ZeroedPayload { bytes: payload, placed: self.placed, names: self.names, seeds: self.seeds }
    }

    /// The byte ranges of [`payload`](Self::payload) that may hold anything but zeros: the
    /// header and tables, then every buffer (possibly empty ranges). Every other payload byte
    /// (guard pages, the rest of a buffer's pages) is zero.
    pub fn data_ranges(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let buffers = self.placed.iter().map(|p| p.offset as usize..p.offset as usize + p.len);
        std::iter::once(0..self.table_end()).chain(buffers)
    }

    /// The byte ranges of a response the host reads: the header and tables (with the call
    /// table's records) and every writable buffer. A backend may leave the rest of the
    /// response zero ([`crate::backend::Backend::execute_batch`]): nothing reads it.
    pub fn response_ranges(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let buffers = self.placed.iter().filter(|p| p.writable).map(|p| p.offset as usize..p.offset as usize + p.len);
        std::iter::once(0..self.table_end()).chain(buffers).filter(|r| !r.is_empty())
    }

    /// The protection table this batch asks the guest to apply, sorted by address.
    pub fn protections(&self) -> Vec<Protection> {
        protections(&self.payload, self.arena.addr)
    }

    /// Where `addr` is, in words for a finding: inside which buffer, or how far past the end or
    /// before the start of the nearest buffer or the kernel stack; `None` outside the arena.
    /// Example: `1 byte past the end of input (input[64]; 64 bytes at 0x10000)`.
    pub fn locate(&self, addr: u64) -> Option<String> {
        let end = self.arena.addr + self.arena.size;
        if addr < self.arena.addr || addr >= end {
            return None;
        }
        let s = self.stack;
        if (s.bottom..s.top).contains(&addr) {
            return Some(format!("{} bytes below sp at the call, inside the stack budget", s.top - addr));
        }
        let below_budget = |n: u64| {
            format!(
                "{n} byte{} below the stack budget ({} bytes below sp {:#x} at the call)",
                plural(n),
                s.top - s.bottom,
                s.top
            )
        };
        if (s.guard..s.bottom).contains(&addr) {
            return Some(below_budget(s.bottom - addr));
        }
        // The nearest buffer by index, formatted once: a kernel that faults on every call asks
        // this per call, and formatting every buffer each time made that quadratic.
        let mut best: Option<(u64, usize)> = None;
        for (i, p) in self.placed.iter().enumerate() {
            let start = self.arena.addr + p.offset;
            let stop = start + p.len as u64;
            if (start..stop).contains(&addr) {
                return Some(self.near_buffer(i, addr));
            }
            let dist = if addr >= stop { addr - stop + 1 } else { start - addr };
            if best.is_none_or(|(d, _)| dist < d) {
                best = Some((dist, i));
            }
        }
        let stack = if addr < s.bottom {
            let n = s.bottom - addr;
            (n, below_budget(n))
        } else {
            let n = addr - s.top + 1;
            (n, format!("{n} byte{} above sp at the call (the caller's frame)", plural(n)))
        };
        match best {
            Some((d, i)) if d <= stack.0 => Some(self.near_buffer(i, addr)),
            _ => Some(stack.1),
        }
    }

    /// [`locate`](Self::locate)'s words for `addr` relative to buffer `i`: inside it, past its
    /// end or before its start.
    pub(super) fn near_buffer(&self, i: usize, addr: u64) -> String {
        let (p, name) = (&self.placed[i], &self.names[i]);
        let start = self.arena.addr + p.offset;
        let stop = start + p.len as u64;
        let what = format!("{} bytes at {start:#x}{}", p.len, if p.writable { "" } else { ", read-only" });
        if (start..stop).contains(&addr) {
            format!("inside {name} ({name}[{}]; {what})", addr - start)
        } else if addr >= stop {
            let n = addr - stop + 1;
            format!("{n} byte{} past the end of {name} ({name}[{}]; {what})", plural(n), addr - start)
        } else {
            let n = start - addr;
            format!("{n} byte{} before the start of {name} ({what})", plural(n))
        }
    }

    /// Every buffer as the host laid it: (index, name, byte offset from the arena's start,
    /// length in bytes, writable, paged). Paged buffers have pages of their own between guard
    /// pages; packed ones share pages and have no guard.
    pub fn buffers(&self) -> impl Iterator<Item = (usize, &'static str, usize, usize, bool, bool)> + '_ {
        self.placed
            .iter()
            .zip(&self.names)
            .enumerate()
            .map(|(i, (p, n))| (i, *n, p.offset as usize, p.len, p.writable, p.paged))
    }

    /// The calls whose argument registers or copy source/destination point into the guest
    /// addresses `[lo, hi)`: the calls that could have touched those bytes, in call order.
    pub fn calls_pointing_into(&self, lo: u64, hi: u64) -> Vec<usize> {
        let words = [ent::ARG0, ent::ARG1, ent::ARG2, ent::ARG3, ent::COPY_SRC, ent::COPY_DST];
        (0..self.ncalls())
            .filter(|&call| {
                let base = self.table_off + self.entry_words * call * 8;
                words.iter().any(|w| (lo..hi).contains(&get(&self.payload, base + w.offset())))
            })
            .collect()
    }

    /// The guest address of byte `offset` of buffer `id`.
    pub fn addr_of(&self, id: BufId, offset: usize) -> u64 {
        self.arena.addr + self.placed[id.0].offset + offset as u64
    }

    /// The payload to resume at call `start`, keeping the results in `resp` of calls before it.
    pub fn resume_payload(&self, resp: &[u8], start: usize) -> Vec<u8> {
        let mut p = self.payload.clone();
        let n = resp.len().min(self.resp_len);
        p[..n].copy_from_slice(&resp[..n]);
        let head = self.resume_head(resp, start);
        p[..head.len()].copy_from_slice(&head);
        p
    }

    /// The header and protection table of [`resume_payload`](Self::resume_payload): all a
    /// backend whose arena still holds what the last entry left (the response, and the
    /// read-only inputs the guest cannot write) must rewrite to resume at call `start`.
    pub fn resume_head(&self, resp: &[u8], start: usize) -> Vec<u8> {
        let mut p = self.payload[..self.table_off].to_vec();
        let n = resp.len().min(self.table_off);
        p[..n].copy_from_slice(&resp[..n]);
        // The protection table comes from the host, never from what the guest left behind.
        let prot = HEADER_WORDS * 8..self.table_off;
        p[prot.clone()].copy_from_slice(&self.payload[prot]);
        for w in [hdr::PROT_TABLE, hdr::PROT_COUNT, hdr::PROT_ID, hdr::PROT_BASE, hdr::DELTA_TABLE, hdr::DELTA_COUNT] {
            put(&mut p, w.offset(), get(&self.payload, w.offset()));
        }
        put(&mut p, hdr::START.offset(), start as u64);
        put(&mut p, hdr::NCALLS.offset(), self.ncalls() as u64);
        put(&mut p, hdr::TABLE.offset(), get(&self.payload, hdr::TABLE.offset()));
        put(&mut p, hdr::RESP_LEN.offset(), self.resp_len as u64);
        p
    }

    /// Argument `i` (0..4) of call `call` as the payload passes it.
    pub fn arg(&self, call: usize, i: usize) -> u64 {
        get(&self.payload, self.table_off + self.entry_words * call * 8 + ent::ARG0.offset() + i * 8)
    }

    /// Sets argument `i` (0..4) of call `call` to `value` (a re-run with other argument bits).
    pub fn set_arg(&mut self, call: usize, i: usize, value: u64) {
        put(&mut self.payload, self.table_off + self.entry_words * call * 8 + ent::ARG0.offset() + i * 8, value);
    }

    /// Whether call `call` returned (`status`), and its return register (`ret`), from a response:
    /// [`record`](Self::record) without the saved registers.
    pub fn outcome(&self, resp: &[u8], call: usize) -> (bool, u64) {
        let base = self.table_off + self.entry_words * call * 8;
        (get(resp, base + ent::STATUS.offset()) == 1, get(resp, base + ent::RET.offset()))
    }

    /// Decodes one call entry from a response.
    pub fn record(&self, resp: &[u8], call: usize) -> CallRecord {
        let base = self.table_off + self.entry_words * call * 8;
        let w = |f: crate::protocol::Word| get(resp, base + f.offset());
        CallRecord {
            completed: w(ent::STATUS) == 1,
            ret: w(ent::RET),
            sp_before: w(ent::SP_BEFORE),
            sp_after: w(ent::SP_AFTER),
            flags: w(ent::FLAGS),
            fpctl: w(ent::FPCTL),
            seed: self.seeds[call],
            saved: (0..self.nsaved).map(|i| get(resp, base + (ENTRY_FIXED_WORDS + i) * 8)).collect(),
        }
    }

    /// The contents of writable buffer `id` in a response.
    pub fn buffer<'r>(&self, resp: &'r [u8], id: BufId) -> &'r [u8] {
        let p = self.placed[id.0];
        assert!(p.writable, "only writable buffers come back");
        &resp[p.offset as usize..p.offset as usize + p.len]
    }

    /// `current` from a response header: the call in flight when the driver stopped.
    pub fn current(resp: &[u8]) -> u64 {
        get(resp, hdr::CURRENT.offset())
    }

    /// `done` from a response header: calls completed.
    pub fn done(resp: &[u8]) -> u64 {
        get(resp, hdr::DONE.offset())
    }
}

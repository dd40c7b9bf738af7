//! The protection table and exact ranges a payload carries, read back by the backends that
//! apply them (Unicorn checks every access; qemu and native `mprotect`).

use super::{get, HEADER_WORDS, PROT_ENTRY_WORDS};
use crate::protocol::header as hdr;

/// One range of the protection table: `len` bytes at `addr` get `prot` ([`PROT_READ`](super::PROT_READ),
/// [`PROT_WRITE`](super::PROT_WRITE), 0 for a guard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protection {
    /// Page-aligned guest address.
    pub addr: u64,
    /// Length in bytes, a multiple of [`PAGE`](super::PAGE).
    pub len: u64,
    /// `PROT_*` bits.
    pub prot: u64,
}

impl Protection {
    /// Whether `addr` lies in this range.
    pub fn contains(&self, addr: u64) -> bool {
        self.addr <= addr && addr - self.addr < self.len
    }
}

/// Decodes the protection table of a payload (header words 6 and 7), sorted by address.
/// Entries that fall outside `payload` are ignored.
pub fn protections(payload: &[u8], arena_addr: u64) -> Vec<Protection> {
    let mut out: Vec<Protection> = protection_entries(payload, arena_addr).collect();
    out.sort_by_key(|p| p.addr);
    out
}

/// The entries of a payload's protection table in table order ([`protections`] without the
/// sort and the allocation).
pub fn protection_entries(payload: &[u8], arena_addr: u64) -> impl Iterator<Item = Protection> + '_ {
    let (off, count) = if payload.len() < HEADER_WORDS * 8 {
        (0, 0)
    } else {
        let table = get(payload, hdr::PROT_TABLE.offset());
        let count = get(payload, hdr::PROT_COUNT.offset()) as usize;
        table.checked_sub(arena_addr).map_or((0, 0), |o| (o as usize, count))
    };
    (0..count)
        .map(move |i| off.saturating_add(i.saturating_mul(PROT_ENTRY_WORDS * 8)))
        .take_while(move |&at| at.saturating_add(PROT_ENTRY_WORDS * 8) <= payload.len())
        .map(move |at| Protection { addr: get(payload, at), len: get(payload, at + 8), prot: get(payload, at + 16) })
}

/// Decodes the exact ranges of a payload: `[start, end)` of every paged buffer, whose first and
/// last pages a byte-exact backend (Unicorn) checks byte by byte. They follow the protection
/// table's entries (a count word, then `start, end` pairs), where the drivers never look.
pub fn exact_ranges(payload: &[u8], arena_addr: u64) -> Vec<(u64, u64)> {
    if payload.len() < HEADER_WORDS * 8 {
        return Vec::new();
    }
    let table = get(payload, hdr::PROT_TABLE.offset());
    let count = get(payload, hdr::PROT_COUNT.offset()) as usize;
    let Some(off) = table.checked_sub(arena_addr).map(|o| o as usize) else { return Vec::new() };
    let at = off.saturating_add(count.saturating_mul(PROT_ENTRY_WORDS * 8));
    if at + 8 > payload.len() {
        return Vec::new();
    }
    let n = get(payload, at) as usize;
    (0..n)
        .map(|i| at + 8 + i * 16)
        .take_while(|&e| e + 16 <= payload.len())
        .map(|e| (get(payload, e), get(payload, e + 8)))
        .collect()
}

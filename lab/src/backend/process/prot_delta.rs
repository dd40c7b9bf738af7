//! The protection table a qemu/native guest has in force, and the delta entries that turn it
//! into the next batch's (kernels/README.md, "Driver protocol": header words `prot_id`,
//! `prot_base`, `delta_table`, `delta_count`).
//!
//! Applying a whole table costs one `mprotect` per guard page, and each splits a mapping of the
//! guest: it was a third of the CPU of a full `lab run` on qemu and natively. Batches of one
//! vector set are laid out alike (lab/src/batch.rs keeps the guards on a two-page grid), so the
//! pages that change from one batch to the next are few; the host, which knows what it sent,
//! lists them and the driver makes one `mprotect` per run of them.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::batch::{Protection, PROT_ENTRY_WORDS, PROT_READ};

/// `prot` of an arena page no entry lists: readable and writable (the drivers' `PROT_RW`).
const PROT_RW: u64 = 3;

/// Ids of the tables sent to guests, unique in the process: an id names one table's contents.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The table a guest was last sent, by id. The guest's driver holds the id of the table it has
/// in force and applies a delta only when that id is the delta's base, so a guest that died,
/// was restarted or was interrupted while applying gets the whole table instead.
#[derive(Debug, Default)]
pub(crate) struct InForce {
    /// Id and entries (sorted by address) of the table last sent; id 0: none.
    id: u64,
    table: Vec<Protection>,
    /// The next table's entries, kept for their allocation.
    spare: Vec<Protection>,
}

/// What the host writes to the header for one request: the table's id, the id the delta
/// starts from (0: apply the whole table) and the delta entries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Stamp<'a> {
    /// `prot_id`.
    pub id: u64,
    /// `prot_base`.
    pub base: u64,
    /// The delta entries (`delta_count` of them).
    pub delta: &'a [Protection],
}

impl InForce {
    /// The stamp for sending `table` (a payload's protection table, any order) to the guest
    /// of `arena` (`[lo, hi)`), with room for `room` delta entries from address `delta_at` on;
    /// `table` becomes the one last sent. `out` receives the delta entries. The driver reads
    /// them before it changes a page, so they are used only where the table in force lets it
    /// read them (no entry of it below their end: the header and tables are never listed).
    pub fn stamp<'a>(
        &mut self,
        table: impl Iterator<Item = Protection>,
        arena: (u64, u64),
        (delta_at, room): (u64, usize),
        out: &'a mut Vec<Protection>,
    ) -> Stamp<'a> {
        out.clear();
        let mut next = std::mem::take(&mut self.spare);
        next.clear();
        next.extend(table);
        next.sort_by_key(|p| p.addr);
        if self.id != 0 && next == self.table {
            self.spare = next;
            return Stamp { id: self.id, base: self.id, delta: out };
        }
        let readable = |n: usize| {
            let end = delta_at.saturating_add((n * PROT_ENTRY_WORDS * 8) as u64);
            self.table.iter().all(|p| p.addr >= end || p.addr.saturating_add(p.len) <= arena.0)
        };
        let base = if self.id != 0
            && delta(&self.table, &next, arena, out)
            && out.len() <= room.min(full_cost(&next))
            && readable(out.len())
        {
            self.id
        } else {
            out.clear();
            0
        };
        self.spare = std::mem::replace(&mut self.table, next);
        self.id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Stamp { id: self.id, base, delta: out }
    }
}

/// Stamps the protection words of the header for sending `payload` (a batch laid out for the
/// arena `(addr, size)`) to a guest that was last sent what `in_force` holds: the table's id,
/// and the delta entries from the table last sent with that table's id as their base when they
/// take no more `mprotect` calls than the whole table and fit the room the layout left
/// (`delta_table` up to the call table); else base 0, the whole table. Each word goes through
/// `write(arena offset, value)`; `out` holds the delta entries' allocation. qemu-user and
/// native guests apply them; Unicorn writes the same words so that a kernel reads the same
/// header there (issue 28).
pub(crate) fn stamp_header(
    in_force: &mut InForce,
    out: &mut Vec<Protection>,
    payload: &[u8],
    (lo, size): (u64, u64),
    mut write: impl FnMut(usize, u64),
) {
    use crate::protocol::{header, Word};
    let word = |w: Word| {
        payload.get(w.offset()..w.offset() + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    let (delta_at, table) = (word(header::DELTA_TABLE), word(header::TABLE));
    // Room up to the call table, inside the arena (any other payload gets the whole table).
    let room = if delta_at >= lo && table > delta_at && table - lo <= size {
        ((table - delta_at) / (PROT_ENTRY_WORDS as u64 * 8)) as usize
    } else {
        0
    };
    let entries = crate::batch::protection_entries(payload, lo);
    let stamp = in_force.stamp(entries, (lo, lo + size), (delta_at, room), out);
    let entry = PROT_ENTRY_WORDS * 8;
    for (i, p) in stamp.delta.iter().enumerate() {
        for (k, v) in [p.addr, p.len, p.prot].into_iter().enumerate() {
            write((delta_at - lo) as usize + i * entry + k * 8, v);
        }
    }
    let count = stamp.delta.len() as u64;
    for (w, v) in [(header::PROT_ID, stamp.id), (header::PROT_BASE, stamp.base), (header::DELTA_COUNT, count)] {
        write(w.offset(), v);
    }
}

/// The `mprotect` calls a driver makes to apply `table` (sorted) whole: one to make the arena
/// readable and writable, one per span of adjacent read-only and guard entries holding a
/// read-only one, one per run of adjacent entries of another equal `prot` (kernels/README.md).
pub(crate) fn full_cost(table: &[Protection]) -> usize {
    let adjacent = |a: &Protection, b: &Protection| a.addr.checked_add(a.len) == Some(b.addr);
    let mut calls = 1;
    let mut i = 0;
    while i < table.len() {
        let mut j = i + 1;
        while j < table.len() && adjacent(&table[j - 1], &table[j]) && table[j].prot <= PROT_READ {
            j += 1;
        }
        if table[i].prot <= PROT_READ && table[i..j].iter().any(|p| p.prot == PROT_READ) {
            calls += 1;
        }
        i = if table[i].prot <= PROT_READ { j } else { i + 1 };
    }
    let mut i = 0;
    while i < table.len() {
        let mut j = i + 1;
        while j < table.len() && adjacent(&table[j - 1], &table[j]) && table[j].prot == table[i].prot {
            j += 1;
        }
        calls += usize::from(table[i].prot != PROT_READ);
        i = j;
    }
    calls
}

/// Writes to `out` the entries that turn the pages of `old` into those of `new` (both sorted
/// by address, inside `arena` = `[lo, hi)` a page is [`PROT_RW`] when no entry lists it): one
/// per maximal run of pages of one new `prot` that holds a changed page, so applying them in
/// any order leaves every page as `new` says. False (and `out` unspecified) when the delta
/// cannot say it: entries that overlap, or entries outside the arena (the kernels' data) that
/// differ between the tables, whose pages no entry would restore.
pub(crate) fn delta(old: &[Protection], new: &[Protection], arena: (u64, u64), out: &mut Vec<Protection>) -> bool {
    out.clear();
    let (lo, hi) = arena;
    let inside = |p: &&Protection| p.addr >= lo && p.addr.checked_add(p.len).is_some_and(|end| end <= hi);
    if !old.iter().filter(|p| !inside(p)).eq(new.iter().filter(|p| !inside(p))) {
        return false;
    }
    let overlaps = |t: &[Protection]| t.windows(2).any(|w| w[0].addr + w[0].len > w[1].addr);
    if overlaps(old) || overlaps(new) {
        return false;
    }
    let (o, n): (Vec<&Protection>, Vec<&Protection>) =
        (old.iter().filter(inside).collect(), new.iter().filter(inside).collect());
    let (mut i, mut j) = (0, 0);
    // Walk the pieces between consecutive boundaries of either table.
    let mut at = lo;
    let mut run: Option<(Protection, bool)> = None;
    while at < hi {
        let (was, o_end) = prot_at(&o, &mut i, at, hi);
        let (now, n_end) = prot_at(&n, &mut j, at, hi);
        let end = o_end.min(n_end).min(hi);
        match &mut run {
            Some((r, changed)) if r.prot == now => {
                r.len = end - r.addr;
                *changed |= was != now;
            }
            _ => {
                if let Some((r, true)) = run {
                    out.push(r);
                }
                run = Some((Protection { addr: at, len: end - at, prot: now }, was != now));
            }
        }
        at = end;
    }
    if let Some((r, true)) = run {
        out.push(r);
    }
    true
}

/// The `prot` at `at` of `table` (sorted, from entry `*k` on, which moves past the entries
/// that end at or before `at`) and where that piece ends.
fn prot_at(table: &[&Protection], k: &mut usize, at: u64, hi: u64) -> (u64, u64) {
    while table.get(*k).is_some_and(|p| p.addr + p.len <= at) {
        *k += 1;
    }
    match table.get(*k) {
        Some(p) if p.addr <= at => (p.prot, p.addr + p.len),
        Some(p) => (PROT_RW, p.addr),
        None => (PROT_RW, hi),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::PAGE;
    use proptest::prelude::*;

    const LO: u64 = 0x10_0000;
    const PAGES: u64 = 64;

    fn page_prot(table: &[Protection], page: u64) -> u64 {
        table.iter().find(|p| p.contains(LO + page * PAGE)).map_or(PROT_RW, |p| p.prot)
    }

    /// A table of `PAGES` pages from a list of (pages, prot) pieces, RW pieces left out.
    fn table(pieces: &[(u64, u64)]) -> Vec<Protection> {
        let mut at = LO;
        let mut t = Vec::new();
        for &(pages, prot) in pieces {
            if prot != PROT_RW && pages > 0 {
                t.push(Protection { addr: at, len: pages * PAGE, prot });
            }
            at += pages * PAGE;
        }
        t
    }

    fn pieces() -> impl Strategy<Value = Vec<(u64, u64)>> {
        prop::collection::vec((1..4u64, prop::sample::select(vec![0, PROT_READ, PROT_RW])), 0..16).prop_map(|mut v| {
            let mut total = 0;
            v.retain(|&(n, _)| {
                total += n;
                total <= PAGES
            });
            v
        })
    }

    proptest! {
        /// Applying the delta to the old table's pages, in the order given or reversed,
        /// leaves every page of the arena as the new table says; no entry changes nothing.
        #[test]
        fn the_delta_turns_the_old_pages_into_the_new(old in pieces(), new in pieces()) {
            let (old, new) = (table(&old), table(&new));
            let mut out = Vec::new();
            prop_assert!(delta(&old, &new, (LO, LO + PAGES * PAGE), &mut out));
            for order in [false, true] {
                let mut pages: Vec<u64> = (0..PAGES).map(|p| page_prot(&old, p)).collect();
                let ops: Vec<&Protection> = if order { out.iter().rev().collect() } else { out.iter().collect() };
                for op in ops {
                    prop_assert!(op.addr % PAGE == 0 && op.len % PAGE == 0 && op.len > 0);
                    prop_assert!((0..op.len / PAGE).any(|k| page_prot(&old, (op.addr - LO) / PAGE + k) != op.prot));
                    for k in 0..op.len / PAGE {
                        pages[((op.addr - LO) / PAGE + k) as usize] = op.prot;
                    }
                }
                let want: Vec<u64> = (0..PAGES).map(|p| page_prot(&new, p)).collect();
                prop_assert_eq!(pages, want);
            }
        }
    }

    #[test]
    fn a_grid_shifted_by_two_pages_changes_only_its_ends() {
        // guard, buffer, guard, buffer ... read-only, then the stack guard.
        let grid = |w: u64, r: u64| {
            let mut p = vec![(2, PROT_RW)];
            p.extend((0..w).flat_map(|_| [(1, 0), (1, PROT_RW)]));
            p.extend((0..r).flat_map(|_| [(1, 0), (1, PROT_READ)]));
            p.push((1, 0));
            p.push((PAGES - 3 - 2 * (w + r), 0));
            table(&p)
        };
        let mut out = Vec::new();
        assert!(delta(&grid(10, 12), &grid(9, 12), (LO, LO + PAGES * PAGE), &mut out));
        // Page 21 turns from rw to read-only, page 45 from read-only to guard: the read-only
        // page, and the run of guards from page 44 to the end that holds page 45.
        assert_eq!(
            out,
            vec![
                Protection { addr: LO + 21 * PAGE, len: PAGE, prot: PROT_READ },
                Protection { addr: LO + 44 * PAGE, len: (PAGES - 44) * PAGE, prot: 0 },
            ]
        );
        assert!(full_cost(&grid(9, 12)) > 10, "{}", full_cost(&grid(9, 12)));
    }

    #[test]
    fn entries_outside_the_arena_must_not_change() {
        let data = Protection { addr: LO + 2 * PAGES * PAGE, len: PAGE, prot: PROT_READ };
        let arena = (LO, LO + PAGES * PAGE);
        let mut out = Vec::new();
        assert!(delta(&[data], &[data], arena, &mut out));
        assert!(out.is_empty());
        assert!(!delta(&[data], &[], arena, &mut out));
        let overlapping =
            [Protection { addr: LO, len: 2 * PAGE, prot: 0 }, Protection { addr: LO + PAGE, len: PAGE, prot: 1 }];
        assert!(!delta(&[], &overlapping, arena, &mut out));
    }

    #[test]
    fn the_stamp_names_the_base_only_for_a_delta_no_dearer_than_the_table() {
        let arena = (LO, LO + PAGES * PAGE);
        let mut guest = InForce::default();
        let mut out = Vec::new();
        let a = table(&[(2, PROT_RW), (1, 0), (1, PROT_RW), (1, 0), (1, PROT_READ), (1, 0)]);
        let first = guest.stamp(a.iter().copied(), arena, (LO, 100), &mut out);
        assert_eq!((first.base, first.delta.len()), (0, 0), "nothing in force: the whole table");
        let id = first.id;
        let again = guest.stamp(a.iter().rev().copied(), arena, (LO, 100), &mut out);
        assert_eq!((again.id, again.base, again.delta.len()), (id, id, 0), "the same table: no change");
        let b = table(&[(2, PROT_RW), (1, 0), (1, PROT_READ), (1, 0), (1, PROT_READ), (1, 0)]);
        let next = guest.stamp(b.iter().copied(), arena, (LO, 100), &mut out);
        assert!(next.id > id);
        assert_eq!(
            (next.base, next.delta),
            (id, &[Protection { addr: LO + 3 * PAGE, len: PAGE, prot: PROT_READ }][..])
        );
        let next_id = next.id;
        let no_room = guest.stamp(a.iter().copied(), arena, (LO, 0), &mut out);
        assert_eq!((no_room.base, no_room.delta.len()), (0, 0), "no room for the delta: the whole table");
        assert!(no_room.id > next_id);
        let at_guard = guest.stamp(b.iter().copied(), arena, (LO + 2 * PAGE, 100), &mut out);
        assert_eq!(at_guard.base, 0, "the delta would lie on a guard page of the table in force: the whole table");
        let at_guard = at_guard.id;
        let below = guest.stamp(a.iter().copied(), arena, (LO + PAGE, 1), &mut out);
        assert_eq!((below.base, below.delta.len()), (at_guard, 1), "below the first entry");
    }
}

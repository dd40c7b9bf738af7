//! What the Unicorn engine's hooks share: the accesses seen and the fragments noted near buffer edges
//! ([`HookState`]), the byte spans of the exactly checked pages, and the alignment stops.

use super::*;

/// What the hooks saw during one `emu_start`.
#[derive(Debug, Default, Clone)]
pub(super) struct Seen {
    pub(super) intno: Option<u32>,
    pub(super) mem: Option<(Access, u64)>,
    /// The pc of the access a pin-down run stopped at.
    pub(super) pinned: Option<u64>,
    /// The instruction budget ran out in the block at this address.
    pub(super) budget: Option<u64>,
    /// The wall-clock bound ([`HookState::deadline`]) passed in the block at this address.
    pub(super) hang: Option<u64>,
    /// An x86 `syscall`/`sysenter` at this pc.
    pub(super) syscall: Option<u64>,
    /// The size and address of the access a confirmation run pinned.
    pub(super) exact: Option<(usize, u64)>,
    /// An MMIO access (read or write) that touched bytes outside its buffer on this exact page.
    /// Unaligned loads reach MMIO as aligned fragments, so a read is only a suspicion until a
    /// re-run with a memory hook sees the access itself.
    pub(super) suspect: Option<Fragment>,
    /// The fault in `mem` was seen in the batch's run, but the call's re-run under a memory
    /// hook did not repeat it: the kernel behaves differently when run again.
    pub(super) unrepeated: bool,
    /// An alignment rule an alignment hook saw broken ([`crate::align`]).
    pub(super) align: Option<AlignStop>,
    /// The call reached the instruction at this address, which Unicorn cannot execute
    /// ([`crate::isa::unicorn_stops`]): it stops there, not run past it.
    pub(super) unsupported: Option<u64>,
}

/// An alignment rule broken at an instruction the lab hooks ([`crate::align::hook_sites`]):
/// hardware faults (or the psABI is broken) where QEMU goes on.
#[derive(Debug, Clone, Copy)]
pub(super) enum AlignStop {
    /// sp was not 16-byte aligned at the instruction at `pc`.
    Sp { pc: u64, sp: u64 },
    /// The memory operand of the aligned-only instruction at `pc` was `addr`, not a multiple
    /// of `need` bytes.
    Operand { pc: u64, addr: u64, need: u64 },
}

/// The detail of a fault an alignment hook found.
pub(super) const ALIGN_HOOK: &str = "seen by the lab's alignment hook at the instruction";

/// An MMIO access fragment that touched bytes outside its buffer on exact page `page`: the bytes
/// `[lo, hi)` (a 4-byte read stands for the aligned 8 bytes around it; a write, only its bytes
/// outside the buffer), and whether it was a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Fragment {
    pub(super) page: u64,
    pub(super) lo: u64,
    pub(super) hi: u64,
    pub(super) write: bool,
}

/// Hook state: what was seen, the protection table of the running batch, the per-call count.
#[derive(Debug, Default)]
pub(super) struct HookState {
    pub(super) seen: Seen,
    pub(super) prots: Vec<Protection>,
    /// A page the TLB hook let through while the exact faulting access is pinned down.
    pub(super) open_page: Option<u64>,
    /// The page whose fill the TLB hook refused, if any.
    pub(super) refused: Option<u64>,
    /// Exactly checked pages (4 KiB, the batch's granule) and the allowed `[start, end)` bytes
    /// on each: the first and last page of every buffer.
    pub(super) exact: rustc_hash::FxHashMap<u64, (u64, u64)>,
    /// The exact page [`allowed`](Self::allowed) looked up last, with its range.
    pub(super) last_exact: Option<(u64, u64, u64)>,
    /// Exact pages a memory hook watches during a confirmation run (their MMIO callbacks then
    /// only do the access).
    pub(super) hooked: Vec<u64>,
    /// `lab_batch`: its own accesses (the snapshot copies) are the lab's, never a finding.
    pub(super) driver: std::ops::Range<u64>,
    pub(super) executed: u64,
    /// Instructions one call may execute (see [`Backend::set_call_instructions`]).
    pub(super) budget: u64,
    /// Blocks run in this `emu_start`, driver included.
    pub(super) batch_blocks: u64,
    /// When this `emu_start` passes the wall-clock bound ([`Limits::batch_time`] from its
    /// start; `None`: no bound): the block hook looks every [`DEADLINE_STRIDE`] blocks.
    pub(super) deadline: Option<std::time::Instant>,
    pub(super) blocks: BlockIcounts,
    /// Zbb instructions patched out of the code Unicorn fetches.
    pub(super) zbb: zbb::ZbbPatches,
    /// The arena's pages `[start, end)` (see [`GuestRam`]).
    pub(super) arena_pages: std::ops::Range<u64>,
    /// Whether the segment holding the arena may execute (then code fetched from the arena is
    /// tracked, [`arena_fetched`](Self::arena_fetched)); if not, a fetch there is a fault.
    pub(super) arena_exec: bool,
    /// Whether the guest fetched code from the arena since the last translation flush: the
    /// lab's plain copies into [`GuestRam`] bypass QEMU's tracking of written code, so code
    /// translated from the arena must be dropped before the lab writes it again.
    pub(super) arena_fetched: bool,
    /// Per arena page ([`PAGE`] bytes from the arena's start): the span of its bytes that may
    /// not be zero, as far as the lab knows ([`Span`]). A batch's payload is mostly zeros (guard
    /// pages, the rest of each buffer's pages); only its data and what may not be zero in the
    /// arena need a copy. `None`: the arena does not start on a page, every batch is copied whole.
    pub(super) dirty: Option<Vec<Span>>,
    /// The arena pages the guest can write in this batch, with the span it can write on each
    /// ([`HookState::find_writable`]).
    pub(super) writable: Vec<(usize, Span)>,
    /// Whether the virtual TLB may hold entries the TLB hook would no longer give: new
    /// protections, an opened page, patched code, arena writes (whose code fetches must be
    /// seen again). A confirmation run and the run after it keep the batch's entries.
    pub(super) tlb_stale: bool,
    /// Whether reads that may be fragments of a legal unaligned load are noted rather than
    /// stopping the run ([`allowed`](Self::allowed)): in the first run of a batch.
    pub(super) defer_reads: bool,
    /// The reads noted so far with the call in flight, in the order first seen.
    pub(super) deferred: Vec<(u64, Fragment)>,
    /// During a confirmation run: the fragments of the batch's run not yet explained by an access
    /// the run's memory hooks saw inside the buffer ([`UnicornBackend::exact_hook`]).
    pub(super) to_explain: Vec<(u64, u64)>,
    /// Whether partial loads are warnings or findings ([`crate::backend::PartialLoads`]).
    pub(super) partial_policy: crate::backend::PartialLoads,
    /// The call a confirmation run re-runs ([`UnicornBackend::confirm_call`]).
    pub(super) confirming: Option<u64>,
    /// Partial loads let run since the backend was last asked
    /// ([`crate::backend::Backend::take_partial_loads`]).
    pub(super) partial: Vec<crate::backend::PartialLoad>,
}

/// A span `[lo, hi)` of byte offsets within a page; empty when `lo >= hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) lo: u32,
    pub(super) hi: u32,
}

impl Span {
    pub(super) const CLEAN: Span = Span { lo: PAGE as u32, hi: 0 };
    pub(super) const WHOLE: Span = Span { lo: 0, hi: PAGE as u32 };

    pub(super) fn is_empty(self) -> bool {
        self.lo >= self.hi
    }

    /// The smallest span holding both.
    pub(super) fn union(self, o: Span) -> Span {
        match (self.is_empty(), o.is_empty()) {
            (true, _) => o,
            (_, true) => self,
            _ => Span { lo: self.lo.min(o.lo), hi: self.hi.max(o.hi) },
        }
    }

    /// The part of the absolute byte range `[lo, hi)` on the page starting at `page`.
    pub(super) fn on_page(page: u64, lo: u64, hi: u64) -> Span {
        let (lo, hi) = (lo.clamp(page, page + PAGE), hi.clamp(page, page + PAGE));
        Span { lo: (lo - page) as u32, hi: (hi - page) as u32 }
    }
}

impl HookState {
    /// What the guest can write under the current `prots` and exact pages, once per batch
    /// ([`writable`](Self::writable)): every arena page with no guard and not read-only; on an
    /// exact page only the buffer's bytes (every write there goes through
    /// [`allowed`](Self::allowed), which refuses the others), elsewhere the whole page.
    pub(super) fn find_writable(&mut self, arena: Arena) {
        let mut writable = std::mem::take(&mut self.writable);
        writable.clear();
        let pages = arena.size.div_ceil(PAGE) as usize;
        let page_of = |addr: u64| ((addr.saturating_sub(arena.addr) / PAGE) as usize).min(pages);
        let mut next = 0; // first page not yet decided
        let gap = |from: usize, to: usize, out: &mut Vec<(usize, Span)>| {
            for p in from..to {
                let page = arena.addr + p as u64 * PAGE;
                let span = match self.exact.get(&page) {
                    Some(&(lo, hi)) => Span::on_page(page, lo, hi),
                    None => Span::WHOLE,
                };
                out.push((p, span));
            }
        };
        for p in self.prots.iter().filter(|p| p.prot & PROT_WRITE == 0) {
            if p.addr < arena.addr {
                continue; // outside the arena: the kernels' data
            }
            let (lo, hi) = (page_of(p.addr), page_of(p.addr + p.len));
            if lo < next {
                next = next.max(hi); // overlaps the range before: protected as far as it reaches
                continue;
            }
            gap(next, lo, &mut writable);
            next = hi;
        }
        gap(next, pages, &mut writable);
        self.writable = writable;
    }

    /// After a run: what the guest could write ([`find_writable`](Self::find_writable)) may no
    /// longer be zero.
    pub(super) fn forget_written_pages(&mut self) {
        let Some(dirty) = self.dirty.as_mut() else { return };
        for &(p, span) in &self.writable {
            if let Some(d) = dirty.get_mut(p) {
                *d = d.union(span);
            }
        }
    }
}

impl HookState {
    /// Whether an MMIO access of `size` bytes at `addr` stays inside the allowed bytes of its
    /// exact page. When it does not and no memory hook watches the page, the page becomes the
    /// run's suspect and the run stops; but in a first run ([`defer_reads`](Self::defer_reads))
    /// a read (`read_call`: the call in flight) that also touches the buffer is only noted in
    /// [`deferred`](Self::deferred) and the run goes on.
    ///
    /// Such a read may be one aligned fragment of a legal unaligned load (QEMU splits those on
    /// the MMIO path, `load_helper`), and a kernel reading a misaligned buffer makes one at
    /// almost every call. Every fragment overlaps its load, so a fragment wholly outside the buffer
    /// stops the run at once; but the callbacks see at most 4 bytes at a time (QEMU's
    /// `access_with_adjusted_size` cuts an 8-byte fragment in two), so a 4-byte read stands for
    /// the aligned 8 bytes around it.
    pub(super) fn allowed(
        &mut self,
        uc: &mut Unicorn<'_, ()>,
        addr: u64,
        size: u64,
        read_call: Option<&dyn Fn() -> u64>,
    ) -> bool {
        let page = addr & !(PAGE - 1);
        // Most accesses hit the page the one before hit (a kernel walks its buffer).
        let (lo, hi) = match self.last_exact {
            Some((p, lo, hi)) if p == page => (lo, hi),
            _ => {
                let Some(&(lo, hi)) = self.exact.get(&page) else { return true };
                self.last_exact = Some((page, lo, hi));
                (lo, hi)
            }
        };
        if lo <= addr && addr + size <= hi {
            return true;
        }
        if self.hooked.contains(&page) {
            return false;
        }
        let (fragment, fragment_end) = match read_call {
            Some(_) if size == 4 => (addr & !7, (addr & !7) + 8),
            Some(_) => (addr, addr + size),
            // Writes reach MMIO exact (QEMU stores an unaligned access byte by byte and cuts an
            // aligned one in 4-byte halves): only the bytes outside the buffer are noted, which
            // no access inside it can explain when the call runs again.
            None if addr < lo => (addr, (addr + size).min(lo)),
            None => (addr.max(hi), addr + size),
        };
        let noted = Fragment { page, lo: fragment, hi: fragment_end, write: read_call.is_none() };
        if let Some(call) = read_call.filter(|_| self.defer_reads && fragment < hi && lo < fragment_end) {
            let at = (call(), noted);
            if self.deferred.last() != Some(&at) {
                self.deferred.push(at);
            }
            return false;
        }
        if self.seen.suspect.is_none() {
            self.seen.suspect = Some(noted);
            let _ = uc.emu_stop();
        }
        false
    }

    /// Whether the accesses to engine page `page` (`uc_page` bytes) go through the MMIO alias:
    /// those on an exact page, except on an engine page wholly inside the buffer and more than
    /// [`EXPLAIN_REACH`] bytes from each edge that has bytes outside it on the same page (an
    /// edge on a page boundary has the guard page that precedes and follows every paged buffer
    /// ([`batch`] layout): the TLB hook refuses it, and [`pin_down`] sees an access crossing
    /// into it whole). Such pages exist where the buffer starts or ends on a page boundary, and
    /// inside the buffer where the engine's pages are smaller than [`PAGE`] (QEMU's AArch64
    /// target: 1 KiB). Every access that can touch bytes outside the buffer, or explain a fragment
    /// that did, starts on an aliased page, where the confirmation hooks
    /// ([`UnicornBackend::exact_hook`]) see it whole.
    ///
    /// [`pin_down`]: UnicornBackend::pin_down
    pub(super) fn through_alias(&self, page: u64, uc_page: u64) -> bool {
        match self.exact.get(&(page & !(PAGE - 1))) {
            Some(&(lo, hi)) => {
                let inside = lo <= page && page + uc_page <= hi;
                let clear_of_start = lo % PAGE == 0 || lo + EXPLAIN_REACH <= page;
                let clear_of_end = hi % PAGE == 0 || page + uc_page + EXPLAIN_REACH <= hi;
                !(inside && clear_of_start && clear_of_end)
            }
            None => false,
        }
    }

    /// Whether a read of `size` bytes at `addr` on exact page `page` is a partial load
    /// ([`crate::backend::PartialLoads`]), which runs whatever the policy (the policy decides
    /// whether it is a warning or a finding): it touches bytes outside the buffer, and also the
    /// buffer, and lies inside one aligned 8-byte word (which, pages being multiples of 8
    /// bytes, it cannot leave: no machine faults on it).
    pub(super) fn partial_load_ok(&self, page: u64, addr: u64, size: u64) -> bool {
        let Some(&(lo, hi)) = self.exact.get(&page) else { return false };
        let one_word = size > 0 && addr & !7 == (addr + size - 1) & !7;
        let touches_buffer = addr < hi && lo < addr + size;
        let outside = addr < lo || addr + size > hi;
        one_word && touches_buffer && outside
    }

    /// The first byte outside the allowed range of exact page `page` that an access of `size`
    /// bytes at `addr` touches, if any.
    pub(super) fn outside(&self, page: u64, addr: u64, size: u64) -> Option<u64> {
        let &(lo, hi) = self.exact.get(&page)?;
        if addr < lo {
            Some(addr)
        } else if addr + size > hi {
            Some(addr.max(hi))
        } else {
            None
        }
    }
}

//! The Unicorn backend: maps the image's segments into a Unicorn 2.1.5 engine, writes the batch
//! into `lab_arena`, and runs `lab_batch` until it returns to an exit page of its own ([`EXIT_PAGE`]).
//!
//! Facts it relies on (docs/DESIGN.md "Backend facts", measured): an illegal RISC-V instruction
//! reaches the interrupt hook as `intno = 2` with `pc = fault + 4`; a timeout still returns
//! `Ok` from `emu_start` and must be asked for with `query(TIMEOUT)`; the handle is `Rc`-based,
//! so one engine lives on one thread.
//!
//! Checks beyond the CPU's own faults: the batch's protection table (guard pages, read-only
//! inputs) is enforced through Unicorn's virtual TLB, as `mprotect` does for qemu and native,
//! without splitting Unicorn's memory regions and without a per-access hook. The first and last
//! page of every buffer are checked byte by byte: the TLB maps them to an MMIO alias of the
//! arena whose callbacks do the access and check its bytes (MMIO is always the slow path, so
//! only those pages pay, and no memory hook makes every other access slow). QEMU hands an
//! unaligned load to MMIO as aligned pieces, so a piece that touches a byte outside a buffer
//! proves nothing when it also touches the buffer: the first run of a batch notes such reads
//! and goes on, then each call that made one runs again alone with memory hooks at the
//! buffer's edges, which see loads whole with their pc (`run_first`); a batch that turns out
//! to break a bound runs again, stopping at it. A block hook
//! counts instructions per call (reset whenever `lab_batch` runs) against the instruction
//! budget; an x86 `syscall`/`sysenter` hook and the interrupt hook catch system calls.
//!
//! For `lab bench`: Zbb emulation on the illegal-instruction exception ([`super::zbb`]), and an
//! execution profile of a code range from a block hook ([`super::icount`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use unicorn_engine::{uc_error, HookType, MemType, Prot, TlbEntry, TlbType, Unicorn};

use super::guest_ram::GuestRam;
use super::icount::{BlockIcounts, BlockProfile};
use super::{zbb, Access, Backend, BackendError, BackendKind, Fault, FaultKind, Limits, RawRun};
use crate::align::{self, SiteCheck};
use crate::arch::{Arch, ReturnAddress, Trap, TrapPc, UnicornSupport};
use crate::batch::{self, Batch, Protection, PROT_WRITE};
use crate::image::{Arena, Image};
use crate::protocol;

const PAGE: u64 = batch::PAGE;

/// Distance of the arena's MMIO alias from the arena in Unicorn's physical address space:
/// above every image the lab links and inside the physical address width of every target
/// (QEMU: riscv64 56 bits, aarch64 48, x86_64 52).
const ALIAS_OFFSET: u64 = 1 << 36;

/// Distance of the patched copies of code pages ([`zbb::ZbbPatches`]) from the pages: above the
/// arena's alias, inside riscv64's 56-bit physical address width.
const CODE_ALIAS_OFFSET: u64 = 2 << 36;

/// A page of its own, mapped executable and never run, whose address `EXIT_OFFSET` bytes in is
/// the return address of `lab_batch` and the address a run stops at. After every run Unicorn
/// drops the translated code around the byte before that address (`resume_all_vcpus`, so that
/// the exit can be translated again as code); at `lab_unicorn_halt` that byte ends the
/// driver's epilogue, which was then translated again at every run (two blocks per run, ~10%
/// of a fuzz run with many short runs). Above the arena's and the code's aliases, inside every
/// target's virtual and physical address width (riscv64 Sv39: 39 bits).
const EXIT_PAGE: u64 = 3 << 36;

/// Where in [`EXIT_PAGE`] a run stops: the bytes before it are never translated.
const EXIT_OFFSET: u64 = 64;

/// The address a Unicorn run stops at (`lab_batch`'s return address). A kernel that jumps
/// there itself ends the run before the driver finished the batch: the call in flight is then
/// a protocol fault ([`UnicornBackend`] checks the header's `done` against `ncalls`).
pub const EXIT_ADDRESS: u64 = EXIT_PAGE + EXIT_OFFSET;

/// How far before a buffer's end an access may start and still reach past it: the largest
/// access a memory hook is called with (QEMU 5's `MemOp` sizes, `MO_SIZE` = 3: 1 to 8 bytes;
/// wider guest loads and stores are made of 8-byte accesses).
const HOOK_REACH: u64 = 8;

/// How far from a buffer's edge an access that explains a noted piece may start: a piece is
/// at most 8 bytes on the aligned 8 bytes around the edge, and the access that made it at most
/// 8 bytes ([`HOOK_REACH`]) overlapping it.
const EXPLAIN_REACH: u64 = 2 * HOOK_REACH;

/// RISC-V exception cause 2, "illegal instruction" (privileged spec, `mcause` table).
const RISCV_ILLEGAL_INSTRUCTION: u32 = 2;

/// What the hooks saw during one `emu_start`.
#[derive(Debug, Default, Clone)]
struct Seen {
    intno: Option<u32>,
    mem: Option<(Access, u64)>,
    /// The pc of the access a pin-down run stopped at.
    pinned: Option<u64>,
    /// The instruction budget ran out in the block at this address.
    budget: Option<u64>,
    /// An x86 `syscall`/`sysenter` at this pc.
    syscall: Option<u64>,
    /// The size and address of the access a confirmation run pinned.
    exact: Option<(usize, u64)>,
    /// An MMIO access (read or write) that touched bytes outside its buffer on this exact page.
    /// Unaligned loads reach MMIO as aligned pieces, so a read is only a suspicion until a
    /// re-run with a memory hook sees the access itself.
    suspect: Option<Piece>,
    /// The fault in `mem` was seen in the batch's run, but the call's re-run under a memory
    /// hook did not repeat it: the kernel behaves differently when run again.
    unrepeated: bool,
    /// An alignment rule an alignment hook saw broken ([`crate::align`]).
    align: Option<AlignStop>,
}

/// An alignment rule broken at an instruction the lab hooks ([`crate::align::hook_sites`]):
/// hardware faults (or the psABI is broken) where QEMU goes on.
#[derive(Debug, Clone, Copy)]
enum AlignStop {
    /// sp was not 16-byte aligned at the instruction at `pc`.
    Sp { pc: u64, sp: u64 },
    /// The memory operand of the aligned-only instruction at `pc` was `addr`, not a multiple
    /// of `need` bytes.
    Operand { pc: u64, addr: u64, need: u64 },
}

/// The detail of a fault an alignment hook found.
const ALIGN_HOOK: &str = "seen by the lab's alignment hook at the instruction";

/// An MMIO access piece that touched bytes outside its buffer on exact page `page`: the bytes
/// `[lo, hi)` (a 4-byte read stands for the aligned 8 bytes around it; a write, only its bytes
/// outside the buffer), and whether it was a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Piece {
    page: u64,
    lo: u64,
    hi: u64,
    write: bool,
}

/// Hook state: what was seen, the protection table of the running batch, the per-call count.
#[derive(Debug, Default)]
struct HookState {
    seen: Seen,
    prots: Vec<Protection>,
    /// A page the TLB hook let through while the exact faulting access is pinned down.
    open_page: Option<u64>,
    /// The page whose fill the TLB hook refused, if any.
    refused: Option<u64>,
    /// Exactly checked pages (4 KiB, the batch's granule) and the allowed `[start, end)` bytes
    /// on each: the first and last page of every buffer.
    exact: rustc_hash::FxHashMap<u64, (u64, u64)>,
    /// The exact page [`allowed`](Self::allowed) looked up last, with its range.
    last_exact: Option<(u64, u64, u64)>,
    /// Exact pages a memory hook watches during a confirmation run (their MMIO callbacks then
    /// only do the access).
    hooked: Vec<u64>,
    /// `lab_batch`: its own accesses (the snapshot copies) are the lab's, never a finding.
    driver: std::ops::Range<u64>,
    executed: u64,
    /// Instructions one call may execute (see [`Backend::set_call_instructions`]).
    budget: u64,
    /// Blocks run in this `emu_start`, driver included.
    batch_blocks: u64,
    blocks: BlockIcounts,
    /// Zbb instructions patched out of the code Unicorn fetches.
    zbb: zbb::ZbbPatches,
    /// The arena's pages `[start, end)` (see [`GuestRam`]).
    arena_pages: std::ops::Range<u64>,
    /// Whether the segment holding the arena may execute (then code fetched from the arena is
    /// tracked, [`arena_fetched`](Self::arena_fetched)); if not, a fetch there is a fault.
    arena_exec: bool,
    /// Whether the guest fetched code from the arena since the last translation flush: the
    /// lab's plain copies into [`GuestRam`] bypass QEMU's tracking of written code, so code
    /// translated from the arena must be dropped before the lab writes it again.
    arena_fetched: bool,
    /// Per arena page ([`PAGE`] bytes from the arena's start): the span of its bytes that may
    /// not be zero, as far as the lab knows ([`Span`]). A batch's payload is mostly zeros (guard
    /// pages, the rest of each buffer's pages); only its data and what may not be zero in the
    /// arena need a copy. `None`: the arena does not start on a page, every batch is copied whole.
    dirty: Option<Vec<Span>>,
    /// The arena pages the guest can write in this batch, with the span it can write on each
    /// ([`HookState::find_writable`]).
    writable: Vec<(usize, Span)>,
    /// Whether the virtual TLB may hold entries the TLB hook would no longer give: new
    /// protections, an opened page, patched code, arena writes (whose code fetches must be
    /// seen again). A confirmation run and the run after it keep the batch's entries.
    tlb_stale: bool,
    /// Whether reads that may be pieces of a legal unaligned load are noted rather than
    /// stopping the run ([`allowed`](Self::allowed)): in the first run of a batch.
    defer_reads: bool,
    /// The reads noted so far with the call in flight, in the order first seen.
    deferred: Vec<(u64, Piece)>,
    /// During a confirmation run: the pieces of the batch's run not yet explained by an access
    /// the run's memory hooks saw inside the buffer ([`UnicornBackend::exact_hook`]).
    to_explain: Vec<(u64, u64)>,
}

/// A span `[lo, hi)` of byte offsets within a page; empty when `lo >= hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    lo: u32,
    hi: u32,
}

impl Span {
    const CLEAN: Span = Span { lo: PAGE as u32, hi: 0 };
    const WHOLE: Span = Span { lo: 0, hi: PAGE as u32 };

    fn is_empty(self) -> bool {
        self.lo >= self.hi
    }

    /// The smallest span holding both.
    fn union(self, o: Span) -> Span {
        match (self.is_empty(), o.is_empty()) {
            (true, _) => o,
            (_, true) => self,
            _ => Span { lo: self.lo.min(o.lo), hi: self.hi.max(o.hi) },
        }
    }

    /// The part of the absolute byte range `[lo, hi)` on the page starting at `page`.
    fn on_page(page: u64, lo: u64, hi: u64) -> Span {
        let (lo, hi) = (lo.clamp(page, page + PAGE), hi.clamp(page, page + PAGE));
        Span { lo: (lo - page) as u32, hi: (hi - page) as u32 }
    }
}

impl HookState {
    /// What the guest can write under the current `prots` and exact pages, once per batch
    /// ([`writable`](Self::writable)): every arena page with no guard and not read-only; on an
    /// exact page only the buffer's bytes (every write there goes through
    /// [`allowed`](Self::allowed), which refuses the others), elsewhere the whole page.
    fn find_writable(&mut self, arena: Arena) {
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
    fn forget_written_pages(&mut self) {
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
    /// Such a read may be one aligned piece of a legal unaligned load (QEMU splits those on
    /// the MMIO path, `load_helper`), and a kernel reading a misaligned buffer makes one at
    /// almost every call. Every piece overlaps its load, so a piece wholly outside the buffer
    /// stops the run at once; but the callbacks see at most 4 bytes at a time (QEMU's
    /// `access_with_adjusted_size` cuts an 8-byte piece in two), so a 4-byte read stands for
    /// the aligned 8 bytes around it.
    fn allowed(&mut self, uc: &mut Unicorn<'_, ()>, addr: u64, size: u64, read_call: Option<&dyn Fn() -> u64>) -> bool {
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
        let (piece, piece_end) = match read_call {
            Some(_) if size == 4 => (addr & !7, (addr & !7) + 8),
            Some(_) => (addr, addr + size),
            // Writes reach MMIO exact (QEMU stores an unaligned access byte by byte and cuts an
            // aligned one in 4-byte halves): only the bytes outside the buffer are noted, which
            // no access inside it can explain when the call runs again.
            None if addr < lo => (addr, (addr + size).min(lo)),
            None => (addr.max(hi), addr + size),
        };
        let noted = Piece { page, lo: piece, hi: piece_end, write: read_call.is_none() };
        if let Some(call) = read_call.filter(|_| self.defer_reads && piece < hi && lo < piece_end) {
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
    /// target: 1 KiB). Every access that can touch bytes outside the buffer, or explain a piece
    /// that did, starts on an aliased page, where the confirmation hooks
    /// ([`UnicornBackend::exact_hook`]) see it whole.
    ///
    /// [`pin_down`]: UnicornBackend::pin_down
    fn through_alias(&self, page: u64, uc_page: u64) -> bool {
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

    /// The first byte outside the allowed range of exact page `page` that an access of `size`
    /// bytes at `addr` touches, if any.
    fn outside(&self, page: u64, addr: u64, size: u64) -> Option<u64> {
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

/// The detail of a fault the batch's run saw and the call's re-run did not repeat.
const UNREPEATED: &str = "seen in the batch's run; the call's re-run under a memory hook made no access that explains \
     it: the kernel behaves differently when run again";

/// How a confirmation run of a suspect call ended ([`UnicornBackend::confirm`]).
enum Confirm {
    /// A memory hook saw an access outside a buffer (in `seen`, with its pc).
    Pinned,
    /// The call returned without one, and its accesses explained every noted piece.
    Completed,
    /// The call returned, but made no access that explains this piece of the batch's run
    /// (`[lo, hi)`): it behaved differently when run again.
    Unrepeated((u64, u64)),
    /// The call stopped otherwise: how the engine stopped and the pc.
    Stopped(Result<(), uc_error>, u64),
}

/// Unicorn engine with the image mapped, reused across batches of one variant.
pub struct UnicornBackend {
    uc: Unicorn<'static, ()>,
    arch: Arch,
    arena: Arena,
    /// The RAM behind the arena's pages; the arena starts `ram_offset` bytes into it. Declared
    /// after `uc`, so the engine is dropped first.
    ram: Rc<GuestRam>,
    ram_offset: usize,
    /// A response given back ([`Backend::recycle`]), whose allocation the next one reuses.
    spare_resp: RefCell<Vec<u8>>,
    /// The byte ranges of `spare_resp` that may not be zero (`None`: any).
    spare_written: RefCell<Option<Vec<std::ops::Range<usize>>>>,
    /// The address of the last response [`read_arena`](Self::read_arena) handed out and the
    /// ranges it copied into it (the rest is zeros), to know them again when it comes back.
    lent: RefCell<(usize, Vec<std::ops::Range<usize>>)>,
    /// Scratch for [`Backend::execute_batch`]: the span of data bytes on each payload page.
    data_pages: Vec<Span>,
    entry: u64,
    halt: u64,
    stack_top: u64,
    limits: Limits,
    /// The engine's page size (the virtual TLB's granule).
    uc_page: u64,
    state: Rc<RefCell<HookState>>,
    /// Emulate Zbb on illegal-instruction exceptions (RISC-V images built with Zbb only).
    zbb: Rc<Cell<bool>>,
    /// Whether a block hook runs [`zbb::ZbbPatches::enter`] (the budget's hook does).
    zbb_block_hook: bool,
    /// The running profile and its block hook, between `start_profile` and `take_profile`.
    profile: Rc<RefCell<Option<BlockProfile>>>,
    profile_hook: Option<unicorn_engine::UcHookId>,
    /// Calls of the running batch whose confirmation after its first run proved a fault (a
    /// memory hook saw an access outside a buffer, or the re-run explained none of a noted
    /// piece), with the fault: each fails with it whatever later runs of the call do
    /// ([`apply_proven`](Self::apply_proven)).
    proven: std::collections::BTreeMap<u64, Fault>,
}

fn uc_err(step: &str) -> impl Fn(uc_error) -> BackendError + '_ {
    move |e| BackendError::Unicorn(format!("{step}: {e:?}"))
}

/// Page ranges of all segments with the union of their rights, merged where they touch, and
/// the rights of the arena's pages `arena` (left out of the ranges: they are mapped on
/// [`GuestRam`]), which must be alike.
fn page_map_around(image: &Image, arena: &std::ops::Range<u64>) -> Result<(Vec<PageRun>, Prot), BackendError> {
    let mut arena_prot: Option<Prot> = None;
    let mut out = Vec::new();
    for (start, len, prot) in page_map(image) {
        let end = start + len;
        let (lo, hi) = (start.max(arena.start), end.min(arena.end));
        if lo >= hi {
            out.push((start, len, prot));
            continue;
        }
        match arena_prot {
            Some(p) if p != prot => {
                return Err(BackendError::Unicorn("lab_arena spans pages of different rights".into()))
            }
            _ => arena_prot = Some(prot),
        }
        if start < lo {
            out.push((start, lo - start, prot));
        }
        if hi < end {
            out.push((hi, end - hi, prot));
        }
    }
    let covered: u64 =
        page_map(image).iter().map(|&(s, l, _)| (s + l).min(arena.end).saturating_sub(s.max(arena.start))).sum();
    match arena_prot {
        Some(p) if covered == arena.end - arena.start => Ok((out, p)),
        _ => Err(BackendError::Unicorn("lab_arena is not inside the image's segments".into())),
    }
}

/// What may not be zero on each page of the page-aligned `arena` once the image is loaded:
/// the pages a segment's file bytes reach (`lab_arena` is `.bss`, so normally none).
fn arena_dirty_pages(image: &Image, arena: Arena) -> Vec<Span> {
    let mut dirty = vec![Span::CLEAN; arena.size.div_ceil(PAGE) as usize];
    for s in image.segments.iter().filter(|s| !s.data.is_empty()) {
        let (lo, hi) = (s.vaddr.max(arena.addr), (s.vaddr + s.data.len() as u64).min(arena.addr + arena.size));
        if lo < hi {
            dirty[((lo - arena.addr) / PAGE) as usize..=((hi - 1 - arena.addr) / PAGE) as usize].fill(Span::WHOLE);
        }
    }
    dirty
}

/// A run of pages: start address, length in bytes, rights.
type PageRun = (u64, u64, Prot);

/// Page ranges of all segments with the union of their rights, merged where they touch.
fn page_map(image: &Image) -> Vec<PageRun> {
    let mut pages: std::collections::BTreeMap<u64, Prot> = std::collections::BTreeMap::new();
    for s in &image.segments {
        let mut p = Prot::NONE;
        if s.perms.read {
            p |= Prot::READ;
        }
        if s.perms.write {
            p |= Prot::WRITE;
        }
        if s.perms.exec {
            p |= Prot::EXEC;
        }
        let (lo, hi) = (s.vaddr / PAGE * PAGE, (s.vaddr + s.memsz).div_ceil(PAGE) * PAGE);
        for page in (lo..hi).step_by(PAGE as usize) {
            *pages.entry(page).or_insert(Prot::NONE) |= p;
        }
    }
    let mut runs: Vec<(u64, u64, Prot)> = Vec::new();
    for (page, prot) in pages {
        match runs.last_mut() {
            Some((start, len, p)) if *start + *len == page && *p == prot => *len += PAGE,
            _ => runs.push((page, PAGE, prot)),
        }
    }
    runs
}

impl UnicornBackend {
    /// Creates an engine for `image` and maps its segments.
    ///
    /// # Errors
    /// Missing driver symbols, or an engine set-up step Unicorn refuses.
    pub fn new(image: &Image, limits: Limits) -> Result<Self, BackendError> {
        let spec = &image.arch.spec().unicorn;
        let mut uc = Unicorn::new(spec.arch, spec.mode).map_err(uc_err("engine"))?;
        let arena = image.arena()?;
        let arena_pages = arena.addr / PAGE * PAGE..(arena.addr + arena.size).div_ceil(PAGE) * PAGE;
        let (runs, arena_prot) = page_map_around(image, &arena_pages)?;
        for (addr, len, prot) in runs {
            uc.mem_map(addr, len, prot).map_err(uc_err("map segment"))?;
        }
        let ram =
            Rc::new(GuestRam::new((arena_pages.end - arena_pages.start) as usize).map_err(BackendError::Unicorn)?);
        let ram_offset = (arena.addr - arena_pages.start) as usize;
        // SAFETY: `ram` is page-aligned, as long as the range, and outlives the engine (the
        // backend holds it, declared after the engine; the alias's callbacks hold it too).
        unsafe {
            uc.mem_map_ptr(arena_pages.start, ram.len() as u64, arena_prot, ram.as_ptr().cast())
                .map_err(uc_err("map lab_arena"))?;
        }
        for s in &image.segments {
            uc.mem_write(s.vaddr, &s.data).map_err(uc_err("load segment"))?;
        }
        uc.mem_map(EXIT_PAGE, PAGE, Prot::READ | Prot::EXEC).map_err(uc_err("map exit page"))?;
        for &(reg, value, what) in spec.init {
            uc.reg_write(reg, value).map_err(uc_err(what))?;
        }
        let dirty = (ram_offset == 0).then(|| arena_dirty_pages(image, arena));
        let state = Rc::new(RefCell::new(HookState {
            arena_pages,
            arena_exec: arena_prot.0 & Prot::EXEC.0 != 0,
            dirty,
            ..HookState::default()
        }));
        Self::map_alias(&mut uc, arena, &state, (Rc::clone(&ram), ram_offset))?;
        let driver = image.require("lab_batch")?;
        let zbb = Rc::new(Cell::new(false));
        let driver_code = driver.addr..driver.addr + driver.size.max(1);
        state.borrow_mut().driver = driver_code.clone();
        Self::add_hooks(&mut uc, image.arch, &state, &zbb, driver_code, &limits)?;
        Self::add_align_hooks(&mut uc, image, &state)?;
        let uc_page_size = uc.ctl_get_page_size().map_err(uc_err("page size"))?;
        Ok(UnicornBackend {
            uc,
            arch: image.arch,
            arena,
            ram,
            ram_offset,
            data_pages: Vec::new(),
            spare_resp: RefCell::new(Vec::new()),
            spare_written: RefCell::new(None),
            lent: RefCell::new((0, Vec::new())),
            entry: driver.addr,
            halt: {
                // The driver's own halt word stays part of the image contract (kernels/README.md).
                image.require("lab_unicorn_halt")?;
                EXIT_ADDRESS
            },
            stack_top: image.require("lab_stack_top")?.addr,
            limits,
            uc_page: u64::from(uc_page_size),
            state,
            zbb,
            zbb_block_hook: limits.call_instructions != u64::MAX,
            profile: Rc::new(RefCell::new(None)),
            profile_hook: None,
            proven: std::collections::BTreeMap::new(),
        })
    }

    /// Turns Zbb emulation on or off (RISC-V only: Unicorn 2.1.5 decodes no Zbb). Off, a Zbb
    /// instruction is an illegal instruction, which is what a build without Zbb must see. On,
    /// each Zbb instruction traps once and is then patched ([`zbb::ZbbPatches`]). Turn it on
    /// before the first batch and leave it on: patches are never undone.
    ///
    /// # Errors
    /// Unicorn refuses the block hook the patches need (only added when no budget hook runs).
    pub fn emulate_zbb(&mut self, on: bool) -> Result<(), BackendError> {
        let zbb = self.arch.spec().isa.extension("zbb");
        let on = on && zbb.is_some_and(|e| e.unicorn == UnicornSupport::Emulated);
        self.zbb.set(on);
        if on && !self.zbb_block_hook {
            let s = Rc::clone(&self.state);
            self.uc
                .add_block_hook(1, 0, move |uc, addr, size| s.borrow_mut().zbb.enter(uc, addr, size))
                .map_err(uc_err("Zbb block hook"))?;
            self.zbb_block_hook = true;
        }
        Ok(())
    }

    /// Zbb instructions patched so far ([`zbb::ZbbPatches`]).
    pub fn zbb_patched(&self) -> usize {
        self.state.borrow().zbb.len()
    }

    /// Patches the Zbb instructions that trapped since the last run: a copy of each one's code
    /// page (made once) gets [`zbb::PATCH_WORD`] in its place, and every translation is dropped
    /// so that no block translated from the unpatched code runs again. A word that crosses a
    /// page keeps trapping.
    fn patch_zbb(&mut self) -> Result<(), BackendError> {
        let pending = self.state.borrow_mut().zbb.take_pending();
        if pending.is_empty() {
            return Ok(());
        }
        for (addr, insn) in pending {
            let page = addr & !(PAGE - 1);
            if addr - page > PAGE - 4 || !self.state.borrow().zbb.fits(addr) {
                continue;
            }
            if !self.state.borrow().zbb.has_page(page) {
                let bytes = self.uc.mem_read_as_vec(page, PAGE as usize).map_err(uc_err("read code page"))?;
                self.uc
                    .mem_map(page + CODE_ALIAS_OFFSET, PAGE, Prot::READ | Prot::EXEC)
                    .map_err(uc_err("map code copy"))?;
                self.uc.mem_write(page + CODE_ALIAS_OFFSET, &bytes).map_err(uc_err("copy code page"))?;
            }
            let word = zbb::PATCH_WORD.to_le_bytes();
            self.uc.mem_write(addr + CODE_ALIAS_OFFSET, &word).map_err(uc_err("patch Zbb"))?;
            self.state.borrow_mut().zbb.patched(page, addr, insn);
        }
        self.state.borrow_mut().tlb_stale = true;
        self.uc.ctl_flush_tb().map_err(uc_err("TB flush"))
    }

    /// Starts profiling the translation blocks that start in `start..end` (a kernel's symbols),
    /// replacing any running profile. Costs a block hook on that range only.
    ///
    /// # Errors
    /// Unicorn refuses the hook.
    pub fn start_profile(&mut self, start: u64, end: u64) -> Result<(), BackendError> {
        let _ = self.take_profile();
        *self.profile.borrow_mut() = Some(BlockProfile::new(start, end));
        let p = Rc::clone(&self.profile);
        let hook = self
            .uc
            .add_block_hook(start, end.saturating_sub(1), move |uc, addr, size| {
                if let Some(p) = p.borrow_mut().as_mut() {
                    p.record(uc, addr, size);
                }
            })
            .map_err(uc_err("block hook"))?;
        self.profile_hook = Some(hook);
        Ok(())
    }

    /// Stops profiling and returns what was recorded since [`start_profile`](Self::start_profile).
    pub fn take_profile(&mut self) -> Option<BlockProfile> {
        if let Some(h) = self.profile_hook.take() {
            let _ = self.uc.remove_hook(h);
        }
        self.profile.borrow_mut().take()
    }

    /// Maps the arena's MMIO alias at `arena.addr + ALIAS_OFFSET`: each access is done on the
    /// arena itself; one that touches bytes outside the allowed range of its exact page is not
    /// done, is recorded as a suspect and stops the run.
    ///
    /// The callbacks reach the bytes in `ram` (the arena at its offset) directly, not through
    /// `uc_mem_read`/`uc_mem_write`, except for a write after the guest fetched code from the
    /// arena, which goes through the engine so that stale translations are dropped.
    fn map_alias(
        uc: &mut Unicorn<'static, ()>,
        arena: Arena,
        state: &Rc<RefCell<HookState>>,
        (ram, ram_offset): (Rc<GuestRam>, usize),
    ) -> Result<(), BackendError> {
        let size = arena.size.div_ceil(PAGE) * PAGE;
        let (r, w) = (Rc::clone(state), Rc::clone(state));
        let ram_w = Rc::clone(&ram);
        let read = move |uc: &mut Unicorn<'_, ()>, offset: u64, size: usize| {
            let addr = arena.addr + offset;
            let size = size.min(8);
            // A read is done even outside its buffer: an unaligned load reaches MMIO as aligned
            // pieces, so a suspect read may be a legal load whose value the run needs.
            let call = || ram.read_le(ram_offset + protocol::header::CURRENT.offset(), 8);
            r.borrow_mut().allowed(uc, addr, size as u64, Some(&call));
            ram.read_le(ram_offset + offset as usize, size)
        };
        let write = move |uc: &mut Unicorn<'_, ()>, offset: u64, size: usize, value: u64| {
            let addr = arena.addr + offset;
            let size = size.min(8);
            let mut st = w.borrow_mut();
            if st.allowed(uc, addr, size as u64, None) {
                if st.arena_fetched {
                    let _ = uc.mem_write(addr, &value.to_le_bytes()[..size]);
                } else {
                    ram_w.write_le(ram_offset + offset as usize, size, value);
                }
            }
        };
        uc.mmio_map(arena.addr + ALIAS_OFFSET, size, Some(read), Some(write)).map_err(uc_err("map MMIO alias"))
    }

    /// Interrupts, unmapped memory, the protection table, the instruction budget, x86 syscalls.
    fn add_hooks(
        uc: &mut Unicorn<'static, ()>,
        arch: Arch,
        state: &Rc<RefCell<HookState>>,
        zbb: &Rc<Cell<bool>>,
        driver: std::ops::Range<u64>,
        limits: &Limits,
    ) -> Result<(), BackendError> {
        let s = Rc::clone(state);
        let z = Rc::clone(zbb);
        let mut emulator = zbb::ZbbEmulator::default();
        uc.add_intr_hook(move |uc, intno| {
            // A Zbb instruction is executed here and the guest goes on at the next instruction;
            // anything else stops the run.
            let mut st = s.borrow_mut();
            // Whatever block runs next was not entered through a patch.
            st.zbb.reset_run();
            if z.get() && intno == RISCV_ILLEGAL_INSTRUCTION {
                if let Some((at, insn)) = emulator.emulate(uc) {
                    st.zbb.trapped(at, insn);
                    return;
                }
            }
            st.seen.intno = Some(intno);
            let _ = uc.emu_stop();
        })
        .map_err(uc_err("interrupt hook"))?;
        // Everywhere but the arena's RAM, where nothing is unmapped and the TLB hook decides
        // (below): QEMU lets a store make a page's TLB entry fast again (`notdirty_write`,
        // `tlb_set_dirty`) only where no memory hook is installed, and kernels and the driver
        // store to the arena (the stack, outputs) all the time.
        let arena = state.borrow().arena_pages.clone();
        for (from, to) in [(0, arena.start.saturating_sub(1)), (arena.end, u64::MAX)] {
            let s = Rc::clone(state);
            uc.add_mem_hook(HookType::MEM_INVALID, from, to, move |_, ty, addr, _, _| {
                let access = match ty {
                    MemType::WRITE_UNMAPPED | MemType::WRITE_PROT => Access::Write,
                    MemType::FETCH_UNMAPPED | MemType::FETCH_PROT => Access::Fetch,
                    _ => Access::Read,
                };
                s.borrow_mut().seen.mem = Some((access, addr));
                false
            })
            .map_err(uc_err("memory hook"))?;
        }
        // The protection table through Unicorn's virtual TLB: the fill hook runs once per page
        // on a TLB miss (not per access), so guarded runs keep native speed. A guard page gets no
        // entry (the access faults as unmapped, caught by the hook above); a read-only page gets
        // an entry without write permission (a write faults as WRITE_PROT). A per-access memory
        // hook made x86_64 runs about 10x slower: Unicorn re-derives the pc from the whole
        // translation block before every hooked access (cpu_restore_state in cputlb.c).
        uc.ctl_set_tlb_type(TlbType::VIRTUAL).map_err(uc_err("virtual TLB"))?;
        // The engine's own page size (QEMU's AArch64 target uses 1 KiB pages), not the guest's.
        let uc_page = u64::from(uc.ctl_get_page_size().map_err(uc_err("page size"))?);
        let s = Rc::clone(state);
        uc.add_tlb_hook(1, 0, move |_, vaddr, ty| {
            let page = vaddr & !(uc_page - 1);
            let mut st = s.borrow_mut();
            if page >= ALIAS_OFFSET && !(matches!(ty, MemType::FETCH) && (EXIT_PAGE..EXIT_PAGE + PAGE).contains(&page))
            {
                // The engine's own pages above the image (the arena's MMIO alias, the patched
                // code copies, the exit page) are no guest memory: the virtual TLB maps addresses
                // one to one, so a kernel reached them at their physical addresses (and the
                // arena through its alias, past guards and read-only rights), where qemu and
                // native fault. Only the driver's return to the exit is fetched there.
                let access = match ty {
                    MemType::WRITE => Access::Write,
                    MemType::FETCH => Access::Fetch,
                    _ => Access::Read,
                };
                st.seen.mem.get_or_insert((access, vaddr));
                return None;
            }
            let in_arena = st.arena_pages.contains(&page);
            if matches!(ty, MemType::FETCH) && in_arena {
                if !st.arena_exec {
                    // What the arena's mapping would refuse (FETCH_PROT), refused here, so that
                    // its entries can go without execute rights (see `arena_entry`).
                    st.seen.mem.get_or_insert((Access::Fetch, vaddr));
                    return None;
                }
                st.arena_fetched = true;
            }
            let i = st.prots.partition_point(|p| p.addr + p.len <= page);
            let prot = st.prots.get(i).filter(|p| p.contains(page)).map(|p| p.prot);
            let write = matches!(ty, MemType::WRITE);
            if st.open_page == Some(page) {
                let read_only = !write && prot.is_some_and(|p| p != 0 && p & PROT_WRITE == 0);
                return Some(TlbEntry { paddr: page, perms: if read_only { Prot::READ } else { Prot::ALL } });
            }
            // Refused fills surface as a guest page fault, not as Unicorn's unmapped-memory
            // hook, so the access is recorded here, with its exact address.
            if prot == Some(0) || (write && prot.is_some_and(|p| p & PROT_WRITE == 0)) {
                let access = if write {
                    Access::Write
                } else if matches!(ty, MemType::FETCH) {
                    Access::Fetch
                } else {
                    Access::Read
                };
                st.seen.mem.get_or_insert((access, vaddr));
                st.refused.get_or_insert(page);
                return None;
            }
            let read_only = prot.is_some_and(|p| p & PROT_WRITE == 0);
            if st.through_alias(page, uc_page) {
                // Every access near a buffer's edge goes through the MMIO alias (map_alias).
                let perms = if read_only { Prot::READ } else { Prot::READ | Prot::WRITE };
                return Some(TlbEntry { paddr: page + ALIAS_OFFSET, perms });
            }
            let mut perms = if read_only { Prot::READ | Prot::EXEC } else { Prot::ALL };
            if in_arena && !st.arena_exec {
                // QEMU keeps every store to a page whose TLB entry may execute on its slow path
                // (`notdirty_write` never clears TLB_NOTDIRTY there).
                perms = Prot(perms.0 & !Prot::EXEC.0);
            }
            if st.zbb.has_page(page) {
                // Fetches see the patched copy, loads and stores the real words; QEMU's victim
                // TLB keeps both entries, so a page that is read and run does not refill often.
                return Some(if matches!(ty, MemType::FETCH) {
                    TlbEntry { paddr: page + CODE_ALIAS_OFFSET, perms: Prot::EXEC }
                } else {
                    TlbEntry { paddr: page, perms: if read_only { Prot::READ } else { Prot::READ | Prot::WRITE } }
                });
            }
            Some(TlbEntry { paddr: page, perms })
        })
        .map_err(uc_err("TLB fill hook"))?;
        let s = Rc::clone(state);
        state.borrow_mut().budget = limits.call_instructions;
        // `u64::MAX` means no budget at all: no block hook, so timed runs (`lab bench`) see the
        // engine's own speed.
        let hook = limits.call_instructions != u64::MAX;
        hook.then(|| {
            uc.add_block_hook(1, 0, move |uc, addr, size| {
                let mut st = s.borrow_mut();
                st.zbb.enter(uc, addr, size);
                let budget = st.budget;
                // A whole batch may run this many blocks (driver included), so that even a kernel
                // that scribbles over the call table cannot keep the engine running forever
                // without the wall-clock timer (which costs Unicorn a thread waking every 2 us,
                // uc.c `_timeout_fn`).
                let batch_blocks = budget.saturating_mul(64);
                st.batch_blocks += 1;
                if st.batch_blocks > batch_blocks && st.seen.budget.is_none() {
                    st.seen.budget = Some(addr);
                    let _ = uc.emu_stop();
                }
                if driver.contains(&addr) {
                    st.executed = 0; // between calls: the next kernel call starts a fresh count
                    return;
                }
                let n = u64::from(st.blocks.get(uc, addr, size));
                st.executed += n;
                if st.executed > budget && st.seen.budget.is_none() {
                    st.seen.budget = Some(addr);
                    let _ = uc.emu_stop();
                }
            })
        })
        .transpose()
        .map_err(uc_err("block hook"))?;
        for &insn in arch.spec().unicorn.syscall_hooks {
            let s = Rc::clone(state);
            uc.add_insn_sys_hook(insn, 1, 0, move |uc| {
                s.borrow_mut().seen.syscall = Some(uc.pc_read().unwrap_or(0));
                let _ = uc.emu_stop();
            })
            .map_err(uc_err("syscall hook"))?;
        }
        Ok(())
    }

    /// One code hook per instruction of the kernels' code that an alignment rule checks
    /// ([`align::hook_sites`]: sp-based accesses on AArch64, calls on x86_64 and riscv64, and
    /// aligned-only instructions): QEMU checks neither sp alignment nor (in Unicorn's x86 engine)
    /// the operands of aligned-only SSE moves. Only those instructions pay a callback, so runs
    /// of kernels without them cost nothing. A broken rule stops the run ([`AlignStop`]).
    fn add_align_hooks(
        uc: &mut Unicorn<'static, ()>,
        image: &Image,
        state: &Rc<RefCell<HookState>>,
    ) -> Result<(), BackendError> {
        let sites = align::hook_sites(image).map_err(|e| BackendError::Unicorn(format!("alignment hooks: {e}")))?;
        let spec = image.arch.spec();
        let (sp_reg, rules) = (spec.unicorn.sp, &spec.align);
        for site in sites {
            let s = Rc::clone(state);
            let pc = site.insn.addr;
            uc.add_code_hook(pc, pc, move |uc, addr, _| {
                let stop = match site.check {
                    SiteCheck::Sp => uc
                        .reg_read(sp_reg)
                        .ok()
                        .filter(|sp| !sp.is_multiple_of(align::SP_ALIGN))
                        .map(|sp| AlignStop::Sp { pc: addr, sp }),
                    SiteCheck::Operand(_) => {
                        let mut read = |name: &str| {
                            let id = rules.unicorn_regs.iter().find(|(n, _)| *n == name)?.1;
                            uc.reg_read(id).ok()
                        };
                        align::misaligned_operand(rules, &site.insn, &mut read)
                            .map(|(addr_, need)| AlignStop::Operand { pc: addr, addr: addr_, need })
                    }
                };
                if let Some(stop) = stop {
                    s.borrow_mut().seen.align.get_or_insert(stop);
                    let _ = uc.emu_stop();
                }
            })
            .map_err(uc_err("alignment hook"))?;
        }
        Ok(())
    }

    /// Runs `lab_batch` on the arena as it is, with fresh hook state and TLB; returns how the
    /// engine stopped and the pc.
    fn start(&mut self) -> Result<(Result<(), uc_error>, u64), BackendError> {
        self.set_entry_registers()?;
        {
            let mut st = self.state.borrow_mut();
            st.seen = Seen::default();
            st.executed = 0;
            st.batch_blocks = 0;
            st.refused = None;
            st.zbb.reset_run();
        }
        self.patch_zbb()?;
        // New protections: drop the pages the virtual TLB cached before.
        if std::mem::take(&mut self.state.borrow_mut().tlb_stale) {
            self.uc.ctl_flush_tlb().map_err(uc_err("TLB flush"))?;
        }
        // No wall-clock timeout: the block hook's budgets stop runaway code (see add_hooks).
        let result = self.uc.emu_start(self.entry, self.halt, 0, 0);
        self.state.borrow_mut().forget_written_pages();
        Ok((result, self.pc()))
    }

    /// The TLB hook only sees the page of a refused access. To name the exact address and
    /// instruction, run the faulting call again alone from the arena as the fault left it (the
    /// driver re-copies the call's inputs), with that page let through and a memory hook on it
    /// alone: the first access to it is the fault. Returns the pc of that access; `None` when
    /// the re-run made none, and then the access the batch's run saw stands, marked as not
    /// repeated ([`Seen::unrepeated`]).
    fn pin_down(&mut self, page: u64) -> Result<Option<u64>, BackendError> {
        let current = self.header(protocol::header::CURRENT)?;
        let ncalls = self.header(protocol::header::NCALLS)?;
        // The refused access as the batch's run saw it (the re-run starts from fresh hooks).
        let first = self.state.borrow().seen.mem;
        self.set_header(protocol::header::START, current)?;
        // The call alone: one that does not repeat the access must not run the rest.
        self.set_header(protocol::header::NCALLS, current + 1)?;
        // On a read-only page only a write is the fault (the TLB hook keeps the page read-only
        // meanwhile, so the first write comes through the slow path and this hook).
        let writes_only = {
            let st = self.state.borrow();
            let i = st.prots.partition_point(|p| p.addr + p.len <= page);
            st.prots.get(i).is_some_and(|p| p.contains(page) && p.prot != 0)
        };
        // The page itself, and the last bytes before it (through the arena's alias if that page
        // is exact): an unaligned access may start there and cross into the page.
        let ranges = [(page, page + self.uc_page, 0), (page.saturating_sub(HOOK_REACH), page, 0)];
        let alias = (page.saturating_sub(HOOK_REACH) + ALIAS_OFFSET, page + ALIAS_OFFSET, ALIAS_OFFSET);
        let mut hooks = Vec::new();
        for (from, to, offset) in ranges.into_iter().chain([alias]).filter(|(from, to, _)| from < to) {
            let s = Rc::clone(&self.state);
            let hook = self
                .uc
                .add_mem_hook(HookType::MEM_READ | HookType::MEM_WRITE, from, to - 1, move |uc, ty, addr, size, _| {
                    let access = if ty == MemType::WRITE { Access::Write } else { Access::Read };
                    let addr = addr.wrapping_sub(offset);
                    let mut st = s.borrow_mut();
                    let reaches = addr.saturating_add(size as u64) > page;
                    if reaches && st.open_page.is_some() && (access == Access::Write || !writes_only) {
                        st.seen.mem = Some((access, addr.max(page)));
                        st.open_page = None;
                        st.seen.pinned = uc.pc_read().ok();
                        let _ = uc.emu_stop();
                    }
                    true
                })
                .map_err(uc_err("pin-down hook"));
            match hook {
                Ok(h) => hooks.push(h),
                Err(e) => {
                    for h in hooks {
                        let _ = self.uc.remove_hook(h);
                    }
                    return Err(e);
                }
            }
        }
        {
            let mut st = self.state.borrow_mut();
            st.open_page = Some(page);
            st.tlb_stale = true;
        }
        // Only the pc the hook saw counts: the pc the run stopped at is not the access's.
        let run = self.start();
        for h in hooks {
            let _ = self.uc.remove_hook(h);
        }
        let _ = run?;
        let mut st = self.state.borrow_mut();
        st.open_page = None;
        st.tlb_stale = true;
        // The page was let through: the guest may have written it.
        if page >= self.arena.addr {
            let opened = ((page - self.arena.addr) / PAGE) as usize;
            if let Some(d) = st.dirty.as_mut().and_then(|d| d.get_mut(opened)) {
                *d = Span::WHOLE;
            }
        }
        let pinned = st.seen.pinned.take();
        if pinned.is_none() {
            // The call did not make the access again: the batch's run saw it, and it stands.
            st.seen = Seen { mem: first, unrepeated: first.is_some(), ..Seen::default() };
        }
        drop(st);
        self.set_header(protocol::header::NCALLS, ncalls)?;
        Ok(pinned)
    }

    /// Header word `word` of the arena ([`protocol::header`]).
    fn header(&self, word: protocol::Word) -> Result<u64, BackendError> {
        let mut w = [0u8; 8];
        self.uc.mem_read(self.arena.addr + word.offset() as u64, &mut w).map_err(uc_err("read header"))?;
        Ok(u64::from_le_bytes(w))
    }

    fn set_header(&mut self, word: protocol::Word, value: u64) -> Result<(), BackendError> {
        self.uc.mem_write(self.arena.addr + word.offset() as u64, &value.to_le_bytes()).map_err(uc_err("write header"))
    }

    /// An MMIO access on exact page `page` touched bytes outside its buffer. Re-runs the call in
    /// flight alone ([`confirm_call`](Self::confirm_call)); when it completes, the batch goes on
    /// from the next call.
    fn confirm(&mut self, piece: Piece) -> Result<Confirm, BackendError> {
        let current = self.header(protocol::header::CURRENT)?;
        let ncalls = self.header(protocol::header::NCALLS)?;
        let outcome = self.confirm_call(current, &[piece.page], &[(piece.lo, piece.hi)]);
        self.set_header(protocol::header::NCALLS, ncalls)?;
        if matches!(outcome, Ok(Confirm::Completed)) {
            self.set_header(protocol::header::START, current + 1)?;
        }
        outcome
    }

    /// Re-runs call `call` of the batch in the arena alone (the driver copies its inputs again),
    /// with memory hooks on exact pages `pages` and on each further suspect page, which see
    /// every access whole, with its pc ([`exact_hook`](Self::exact_hook)). Leaves `start` and
    /// `ncalls` of the header at `call` and `call + 1`.
    fn confirm_call(&mut self, call: u64, pages: &[u64], pieces: &[(u64, u64)]) -> Result<Confirm, BackendError> {
        self.set_header(protocol::header::START, call)?;
        self.set_header(protocol::header::NCALLS, call + 1)?;
        self.state.borrow_mut().to_explain = pieces.to_vec();
        let mut hooks = Vec::new();
        let mut pending = pages.to_vec();
        let outcome = loop {
            let hooked = pending.drain(..).try_for_each(|page| {
                self.state.borrow_mut().hooked.push(page);
                self.exact_hook(page, &mut hooks)
            });
            let (result, pc) = match hooked.and_then(|()| self.start()) {
                Ok(r) => r,
                Err(e) => break Err(e),
            };
            let st = self.state.borrow();
            if st.seen.pinned.is_some() {
                break Ok(Confirm::Pinned);
            }
            match st.seen.suspect.map(|p| p.page).filter(|p| !st.hooked.contains(p)) {
                Some(p) => pending.push(p),
                None if result.is_ok() && pc == self.halt && st.refused.is_none() => {
                    break Ok(st.to_explain.first().map_or(Confirm::Completed, |&piece| Confirm::Unrepeated(piece)))
                }
                None => break Ok(Confirm::Stopped(result, pc)),
            }
        };
        for h in hooks {
            let _ = self.uc.remove_hook(h);
        }
        let mut st = self.state.borrow_mut();
        st.hooked.clear();
        st.to_explain.clear();
        outcome
    }

    /// Re-runs alone each call of a finished batch that made a read noted in
    /// [`HookState::deferred`], under memory hooks that must see the accesses the noted pieces
    /// came from. The calls of a batch start from copies of earlier calls' outputs into buffers
    /// of their own, and later calls write only their own, so a call's re-run reads what it
    /// read. A call whose re-run touches a byte outside its buffer, or explains none of a noted
    /// piece, goes to [`proven`](Self::proven). Returns whether a re-run stopped otherwise (then
    /// the batch must run again). The header is left as the batch left it.
    fn confirm_deferred(&mut self, deferred: &mut [(u64, Piece)]) -> Result<bool, BackendError> {
        let start = self.header(protocol::header::START)?;
        let ncalls = self.header(protocol::header::NCALLS)?;
        deferred.sort_unstable();
        let mut stopped = false;
        for group in deferred.chunk_by(|a, b| a.0 == b.0) {
            let call = group[0].0;
            let mut pages: Vec<u64> = group.iter().map(|&(_, p)| p.page).collect();
            pages.dedup();
            let pieces: Vec<(u64, u64)> = group.iter().map(|&(_, p)| (p.lo, p.hi)).collect();
            let fault = match self.confirm_call(call, &pages, &pieces)? {
                Confirm::Completed => continue,
                Confirm::Unrepeated(piece) => {
                    let (access, addr) = self.unrepeated(piece, false);
                    let kind = FaultKind::Memory { access: Some(access), addr: Some(addr) };
                    Fault { kind, pc: None, call: None, detail: UNREPEATED.into() }
                }
                Confirm::Pinned => {
                    let pc = self.state.borrow().seen.pinned.unwrap_or(0);
                    let Some((kind, pc, detail)) = self.classify(Ok(()), pc) else { continue };
                    Fault { kind, pc: Some(pc), call: None, detail }
                }
                Confirm::Stopped(..) => {
                    stopped = true;
                    break;
                }
            };
            self.proven.insert(call, Fault { call: usize::try_from(call).ok(), ..fault });
        }
        self.set_header(protocol::header::START, start)?;
        self.set_header(protocol::header::NCALLS, ncalls)?;
        Ok(stopped)
    }

    /// Makes `run` end in the fault of the first [`proven`](Self::proven) call, when it ends
    /// later (or not at all): a kernel that behaves when a call runs again (it can tell, from
    /// the stack it left or the driver's header) must not pass by it.
    fn apply_proven(&mut self, run: &mut RawRun) {
        let at = run.fault.as_ref().map_or(Some(u64::MAX), |f| f.call.map(|c| c as u64));
        if let (Some(at), Some(entry)) = (at, self.proven.first_entry()) {
            if *entry.key() < at {
                run.fault = Some(entry.remove());
            }
        }
    }

    /// The first run of the batch `payload` the arena holds (with its protections set): reads
    /// that may be pieces of legal unaligned loads are noted, not stopped at
    /// ([`HookState::allowed`]), and afterwards each call that made one runs again alone under
    /// memory hooks ([`confirm_deferred`](Self::confirm_deferred)). If one of them touches a byte
    /// outside its buffer, or the batch faulted, the batch runs again from `payload`, stopping
    /// at every suspect, so that what comes back is what a run stopping at once gives. A call
    /// whose re-run explains none of a noted piece fails with it: a kernel that behaves one
    /// way when first run and another when run again must not pass by it.
    fn run_first(&mut self, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
        {
            let mut st = self.state.borrow_mut();
            st.defer_reads = true;
            st.deferred.clear();
        }
        let run = self.run_loaded(resp_len, resp_len);
        let mut deferred = {
            let mut st = self.state.borrow_mut();
            st.defer_reads = false;
            std::mem::take(&mut st.deferred)
        };
        let mut run = run?;
        let rerun = match (deferred.is_empty(), &run.fault) {
            (true, _) => false,
            (false, Some(_)) => true,
            (false, None) => self.confirm_deferred(&mut deferred)?,
        };
        deferred.clear();
        self.state.borrow_mut().deferred = deferred;
        if rerun {
            run = self.rerun(run.resp, payload, resp_len)?;
        }
        self.apply_proven(&mut run);
        Ok(run)
    }

    /// Runs the batch `payload` again from the start, stopping at every suspect (after a first
    /// run whose response `resp` is given back).
    fn rerun(&mut self, resp: Vec<u8>, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
        self.recycle(resp);
        self.write_arena(payload)?;
        self.load_protections(payload);
        self.run_loaded(resp_len, resp_len)
    }

    /// The access and first byte outside its buffer of a noted piece `[lo, hi)` (a write if
    /// `write`) that a re-run did not explain.
    fn unrepeated(&self, (lo, hi): (u64, u64), write: bool) -> (Access, u64) {
        let st = self.state.borrow();
        let first = st.outside(lo & !(PAGE - 1), lo, hi - lo).unwrap_or(lo);
        (if write { Access::Write } else { Access::Read }, first)
    }

    /// Memory hooks on the alias of exact page `page` that stop at the first access outside the
    /// page's allowed bytes and record it with its pc; an access inside explains the noted
    /// pieces it overlaps ([`HookState::to_explain`]).
    ///
    /// Unicorn runs a memory hook with the access as the guest made it (before the MMIO path
    /// splits an unaligned one) and only for accesses that start inside the hook's range, but
    /// before each it re-derives the pc from the translation block (`cpu_restore_state`, which
    /// costs about as much as the block's instructions). So the hooks cover only where an access
    /// outside the buffer, or explain a piece that did, can start: up to [`EXPLAIN_REACH`]
    /// bytes past the buffer's start, and from as far before its end to the page's end;
    /// accesses well inside the buffer run unhooked.
    fn exact_hook(&mut self, page: u64, hooks: &mut Vec<unicorn_engine::UcHookId>) -> Result<(), BackendError> {
        let Some(&(lo, hi)) = self.state.borrow().exact.get(&page) else { return Ok(()) };
        let end = page + PAGE;
        // `(from, to, offset)`: guest bytes `[from, to)` hooked at `offset` above them.
        let mut zones = vec![
            (page, (lo + EXPLAIN_REACH).clamp(page, end), ALIAS_OFFSET),
            (hi.saturating_sub(EXPLAIN_REACH).clamp(page, end), end, ALIAS_OFFSET),
        ];
        // A load that explains a piece past an end just after a page boundary may start on the
        // page before (QEMU splits it there): hooked at both of that page's addresses, which
        // may be plain or the alias.
        let before = hi.saturating_sub(EXPLAIN_REACH).max(lo).max(page.saturating_sub(PAGE));
        if (page + 1..=end).contains(&hi) && before < page {
            zones.extend([(before, page, 0), (before, page, ALIAS_OFFSET)]);
        }
        for (from, to, offset) in zones.into_iter().filter(|&(from, to, _)| from < to) {
            let s = Rc::clone(&self.state);
            let hook = self
                .uc
                .add_mem_hook(
                    HookType::MEM_READ | HookType::MEM_WRITE,
                    from + offset,
                    to + offset - 1,
                    move |uc, ty, addr, size, _| {
                        let access = if ty == MemType::WRITE { Access::Write } else { Access::Read };
                        let addr = addr.wrapping_sub(offset);
                        let mut st = s.borrow_mut();
                        if st.seen.pinned.is_some() {
                            return true;
                        }
                        if let Some(first) = st.outside(page, addr, size as u64) {
                            st.seen.mem = Some((access, first));
                            st.seen.pinned = uc.pc_read().ok();
                            st.seen.exact = Some((size, addr));
                            let _ = uc.emu_stop();
                        } else {
                            let end = addr + size as u64;
                            st.to_explain.retain(|&(lo, hi)| !(addr < hi && lo < end));
                        }
                        true
                    },
                )
                .map_err(uc_err("exact-page hook"))?;
            hooks.push(hook);
        }
        Ok(())
    }

    /// Sets the stack and the return address so that `lab_batch` returns to the exit ([`EXIT_PAGE`]).
    fn set_entry_registers(&mut self) -> Result<(), BackendError> {
        let e = uc_err("registers");
        let sp = self.stack_top & !15;
        let spec = &self.arch.spec().unicorn;
        match spec.return_address {
            ReturnAddress::Register(ra) => {
                self.uc.reg_write(spec.sp, sp).map_err(&e)?;
                self.uc.reg_write(ra, self.halt).map_err(&e)?;
            }
            ReturnAddress::Stack => {
                let sp = sp - 8;
                self.uc.mem_write(sp, &self.halt.to_le_bytes()).map_err(&e)?;
                self.uc.reg_write(spec.sp, sp).map_err(&e)?;
            }
        }
        Ok(())
    }

    /// Turns the engine's stop into a fault, if it was one.
    fn classify(&self, result: Result<(), uc_error>, pc: u64) -> Option<(FaultKind, u64, String)> {
        let seen = self.state.borrow().seen.clone();
        match seen.align {
            Some(AlignStop::Sp { pc, sp }) => return Some((FaultKind::StackMisaligned { sp }, pc, ALIGN_HOOK.into())),
            Some(AlignStop::Operand { pc, addr, need }) => {
                return Some((FaultKind::Misaligned { addr, need }, pc, ALIGN_HOOK.into()))
            }
            None => {}
        }
        if let Some(at) = seen.syscall {
            // The hook sees the pc of the `syscall`/`sysenter` itself (measured).
            return Some((FaultKind::SystemCall { nr: None, name: None }, at, String::new()));
        }
        if let Some(at) = seen.budget {
            let budget = self.state.borrow().budget;
            return Some((FaultKind::InstructionBudget(budget), at, String::new()));
        }
        if let Some((access, mut addr)) = seen.mem {
            if seen.unrepeated {
                return Some((FaultKind::Memory { access: Some(access), addr: Some(addr) }, pc, UNREPEATED.into()));
            }
            // A refused code fetch reaches the TLB hook with its page's address; the pc is the
            // instruction the guest tried to fetch.
            if access == Access::Fetch && pc & !(self.uc_page - 1) == addr & !(self.uc_page - 1) {
                addr = pc;
            }
            let detail = seen
                .exact
                .map(|(size, at)| format!("{size}-byte access at {at:#x}; unicorn checks these bytes exactly"))
                .unwrap_or_default();
            return Some((FaultKind::Memory { access: Some(access), addr: Some(addr) }, pc, detail));
        }
        if let Some(intno) = seen.intno {
            return Some(self.interrupt(intno, pc));
        }
        match result {
            Ok(()) if pc == self.halt => None,
            Ok(()) => Some((FaultKind::Crash(format!("emulation stopped at {pc:#x}")), pc, String::new())),
            Err(e) => {
                let kind = match e {
                    uc_error::INSN_INVALID => FaultKind::IllegalInstruction,
                    uc_error::READ_UNALIGNED | uc_error::WRITE_UNALIGNED | uc_error::FETCH_UNALIGNED => {
                        FaultKind::Bus { addr: None }
                    }
                    uc_error::EXCEPTION => FaultKind::Exception(0),
                    other => FaultKind::Crash(format!("unicorn error {other:?}")),
                };
                Some((kind, pc, format!("uc_emu_start: {e:?}")))
            }
        }
    }

    /// A run that reached the exit before the driver completed every call: the kernel jumped to
    /// [`EXIT_ADDRESS`] itself instead of returning, so the call in flight did not return and
    /// the calls after it did not run.
    fn left_early(&self, pc: u64) -> Result<Option<(FaultKind, u64, String)>, BackendError> {
        let (done, ncalls) = (self.header(protocol::header::DONE)?, self.header(protocol::header::NCALLS)?);
        Ok((done < ncalls).then(|| {
            let why = "the call jumped to the lab's exit address instead of returning to the driver".to_string();
            (FaultKind::Protocol(why), pc, format!("the driver had completed {done} of the batch's {ncalls} calls"))
        }))
    }

    /// The fault an interrupt number stands for, from the arch row's table
    /// (`UnicornSpec::interrupts`: QEMU `EXCP_*` / RISC-V `mcause`).
    fn interrupt(&self, intno: u32, pc: u64) -> (FaultKind, u64, String) {
        let detail = format!("interrupt {intno}");
        let table = self.arch.spec().unicorn.interrupts;
        let Some(row) = table.iter().find(|r| r.intnos.contains(&intno)) else {
            return (FaultKind::Exception(intno), pc, detail);
        };
        let at = match row.pc {
            TrapPc::Pc => pc,
            TrapPc::Before(n) => pc.wrapping_sub(n),
            TrapPc::Register(reg, n) => self.uc.reg_read(reg).ok().filter(|&e| e != 0).unwrap_or(pc.wrapping_sub(n)),
        };
        let addr = || row.addr_register.and_then(|r| self.uc.reg_read(r).ok()).filter(|&a| a != 0);
        let kind = match row.trap {
            Trap::IllegalInstruction => FaultKind::IllegalInstruction,
            Trap::SystemCall => FaultKind::SystemCall { nr: None, name: None },
            Trap::Breakpoint => FaultKind::Trap,
            Trap::Misaligned => FaultKind::Bus { addr: addr() },
            Trap::Arithmetic => FaultKind::Arithmetic,
        };
        (kind, at, detail)
    }

    fn pc(&self) -> u64 {
        self.uc.pc_read().unwrap_or(0)
    }
}

impl Backend for UnicornBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Unicorn
    }

    fn set_call_instructions(&mut self, need: u64) {
        self.state.borrow_mut().budget = self.limits.call_instructions.saturating_add(need);
    }

    /// Copies only what may differ from the arena: on each page the span of the payload's
    /// data and of what may not be zero in the arena ([`HookState::dirty`]). The arena then
    /// holds exactly the payload, as after a whole copy.
    fn execute_batch(&mut self, batch: &Batch) -> Result<RawRun, BackendError> {
        let payload = &batch.payload;
        if payload.len() as u64 > self.arena.size || self.state.borrow().dirty.is_none() {
            return self.execute(payload, batch.resp_len);
        }
        self.flush_arena_code()?;
        let pages = payload.len().div_ceil(PAGE as usize);
        let page = PAGE as usize;
        // Per payload page, the span of its data bytes.
        let mut data = std::mem::take(&mut self.data_pages);
        data.clear();
        data.resize(pages, Span::CLEAN);
        for r in batch.data_ranges().filter(|r| !r.is_empty()) {
            let first = r.start / page;
            for (p, d) in data.iter_mut().enumerate().take((r.end - 1) / page + 1).skip(first) {
                *d = d.union(Span::on_page((p * page) as u64, r.start as u64, r.end as u64));
            }
        }
        {
            let mut st = self.state.borrow_mut();
            let dirty = st.dirty.as_mut().expect("checked above");
            for (p, &d) in data.iter().enumerate() {
                let at = p * page;
                // The payload ends inside its last page: what lies past it stays as it was.
                let end = (payload.len() - at).min(page) as u32;
                let span = d.union(dirty[p]);
                let copy = Span { lo: span.lo, hi: span.hi.min(end) };
                if !copy.is_empty() {
                    let range = at + copy.lo as usize..at + copy.hi as usize;
                    self.ram.write(self.ram_offset + range.start, &payload[range]);
                }
                let beyond = Span { lo: dirty[p].lo.max(end), hi: dirty[p].hi };
                dirty[p] = d.union(beyond);
            }
        }
        self.data_pages = data;
        self.load_protections(payload);
        self.proven.clear();
        self.run_first(payload, batch.resp_len)
    }

    fn execute(&mut self, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
        if payload.len() as u64 > self.arena.size {
            return Err(BackendError::Unicorn(format!("write batch: {} bytes do not fit lab_arena", payload.len())));
        }
        self.write_arena(payload)?;
        self.load_protections(payload);
        self.proven.clear();
        self.run_first(payload, resp_len)
    }

    /// After a fault, the arena holds what the entry left: only the header and the protection
    /// table are rewritten (not the whole payload, which made a kernel that faults on every
    /// call cost a copy of the batch per call). An entry that faults again returns only the
    /// header; [`Backend::response`] reads the rest when the batch stops.
    fn resume(&mut self, batch: &Batch, resp: &[u8], start: usize) -> Result<RawRun, BackendError> {
        self.write_arena(&batch.resume_head(resp, start))?;
        let mut run = self.run_loaded(batch.resp_len, batch::HEADER_WORDS * 8)?;
        self.apply_proven(&mut run);
        Ok(run)
    }

    fn response(&mut self, resp_len: usize) -> Result<Vec<u8>, BackendError> {
        self.read_arena(resp_len)
    }

    fn recycle(&mut self, resp: Vec<u8>) {
        // Nothing on the host writes a response: one that comes back as lent is zero outside
        // the ranges read into it.
        let lent = std::mem::take(&mut *self.lent.borrow_mut());
        *self.spare_written.borrow_mut() = (lent.0 == resp.as_ptr() as usize).then_some(lent.1);
        *self.spare_resp.borrow_mut() = resp;
    }
}

impl UnicornBackend {
    /// Copies `bytes` to the start of the arena: a plain copy into [`GuestRam`], after dropping
    /// the translations of code the guest fetched from the arena (the copy bypasses QEMU's
    /// tracking of written code).
    fn write_arena(&mut self, bytes: &[u8]) -> Result<(), BackendError> {
        self.flush_arena_code()?;
        self.state.borrow_mut().tlb_stale = true;
        self.ram.write(self.ram_offset, bytes);
        if let Some(dirty) = self.state.borrow_mut().dirty.as_mut() {
            let n = bytes.len().div_ceil(PAGE as usize).min(dirty.len());
            dirty[..n].fill(Span::WHOLE);
        }
        Ok(())
    }

    /// Drops the translations of code the guest fetched from the arena, before the lab writes
    /// the arena with plain copies (which bypass QEMU's tracking of written code).
    fn flush_arena_code(&mut self) -> Result<(), BackendError> {
        let fetched = std::mem::take(&mut self.state.borrow_mut().arena_fetched);
        if fetched {
            self.uc.ctl_flush_tb().map_err(uc_err("TB flush"))?;
        }
        Ok(())
    }

    /// Takes the protection table and the exact ranges of the batch `payload` for the hooks.
    fn load_protections(&mut self, payload: &[u8]) {
        let mut st = self.state.borrow_mut();
        st.tlb_stale = true;
        st.prots = batch::protections(payload, self.arena.addr);
        st.exact.clear();
        st.last_exact = None;
        for (lo, hi) in batch::exact_ranges(payload, self.arena.addr).into_iter().filter(|(lo, hi)| lo < hi) {
            st.exact.insert(lo & !(PAGE - 1), (lo, hi));
            st.exact.insert((hi - 1) & !(PAGE - 1), (lo, hi));
        }
        st.find_writable(self.arena);
    }

    /// The first `len` bytes of the arena (an error past its end, as `uc_mem_read` gave). With
    /// the arena's nonzero spans known ([`HookState::dirty`]), zeros and a copy of each page's
    /// span: most of a response is guard pages and the rest of each buffer's pages.
    fn read_arena(&self, len: usize) -> Result<Vec<u8>, BackendError> {
        if self.ram_offset + len > self.ram.len() {
            return Err(BackendError::Unicorn(format!("read results: {len} bytes are past lab_arena")));
        }
        let spare = std::mem::take(&mut *self.spare_resp.borrow_mut());
        let written = self.spare_written.borrow_mut().take();
        let st = self.state.borrow();
        let Some(dirty) = st.dirty.as_ref() else { return Ok(self.ram.read_vec(self.ram_offset, len, spare)) };
        let mut out = spare;
        // Zeros everywhere but the spans copied below: clear only what the spare held.
        match written {
            Some(ranges) => {
                for r in ranges {
                    let r = r.start.min(out.len())..r.end.min(out.len());
                    out[r].fill(0);
                }
                out.truncate(len);
            }
            None => out.clear(),
        }
        out.resize(len, 0);
        let mut copied = std::mem::take(&mut self.lent.borrow_mut().1);
        copied.clear();
        let page = PAGE as usize;
        for (p, d) in dirty.iter().enumerate().take(len.div_ceil(page)) {
            let range = (p * page + d.lo as usize).min(len)..(p * page + d.hi as usize).min(len);
            if !range.is_empty() {
                self.ram.read(self.ram_offset + range.start, &mut out[range.clone()]);
                copied.push(range);
            }
        }
        *self.lent.borrow_mut() = (out.as_ptr() as usize, copied);
        Ok(out)
    }
}

impl UnicornBackend {
    /// Runs the batch the arena holds (with its protections set) and reads the response:
    /// `resp_len` bytes, or only `fault_len` when the entry ends in a fault.
    fn run_loaded(&mut self, resp_len: usize, fault_len: usize) -> Result<RawRun, BackendError> {
        let (mut result, mut pc) = self.start()?;
        // Whether `pc` is the faulting access's: not where the run stopped in an MMIO callback.
        let mut pc_known = true;
        loop {
            let (refused, suspect) = {
                let st = self.state.borrow();
                // An alignment hook's stop is the call's fault: the rest of the translation
                // block still ran after it (`emu_stop` ends the run at the next block), and
                // what it touched must not take its place.
                if st.seen.align.is_some() {
                    break;
                }
                (st.refused, st.seen.suspect)
            };
            if let Some(page) = refused {
                pc = self.pin_down(page)?.unwrap_or(pc);
                break;
            }
            let Some(piece) = suspect else { break };
            match self.confirm(piece)? {
                Confirm::Pinned => {
                    pc = self.state.borrow().seen.pinned.unwrap_or(pc);
                    break;
                }
                // The call made it in the batch's run, not when run again: that is its fault.
                Confirm::Unrepeated(p) => {
                    let mem = self.unrepeated(p, piece.write);
                    let mut st = self.state.borrow_mut();
                    st.seen.mem = Some(mem);
                    st.seen.unrepeated = true;
                    pc_known = false;
                    break;
                }
                // The call stopped for another reason: that is its fault.
                Confirm::Stopped(r, p) => (result, pc) = (r, p),
                // Only an unaligned load looked like one: the batch goes on from the next call.
                Confirm::Completed => (result, pc) = self.start()?,
            }
        }
        let fault = match self.classify(result, pc) {
            None => self.left_early(pc)?,
            some => some,
        };
        let len = if fault.is_some() { fault_len.min(resp_len) } else { resp_len };
        let resp = self.read_arena(len)?;
        let fault = fault.map(|(kind, pc, detail)| {
            let call = usize::try_from(Batch::current(&resp)).ok();
            Fault { kind, pc: pc_known.then_some(pc), call, detail }
        });
        Ok(RawRun { resp, fault })
    }
}

//! Batches for the guest-side driver: the host lays out a header, a table of call entries and
//! the buffers in `lab_arena` (kernels/README.md, "Driver protocol"), a backend runs the whole
//! table in one entry, and the host decodes the entries and the writable buffers it gets back.
//!
//! Layout of the arena, from the start of `lab_arena` (pages of [`PAGE`] bytes, G = a guard
//! page with no access):
//! `header (12 words) | protection table | exact ranges | delta entries | call table | G |
//! writable buffers, each followed by G | read-only buffers, each followed by G | stack guard
//! (no access, the rest of the arena, at least [`STACK_GUARD`] bytes) | kernel stack | G` (the
//! arena's last page). Every paged buffer has pages of its own, flush against a guard page at
//! one end ([`Placement`]); read-only buffers are protected against writes. The guards after
//! buffers lie on even pages and paged buffers come before packed ones, so the batches of one
//! vector set share their pattern of pages and a qemu/native guest changes few of them from one
//! to the next (the delta entries, backend/process/prot_delta.rs). The
//! protection table (header words 6 and 7) tells the guest which pages to protect; `_start`
//! applies it with `mprotect`, the Unicorn backend checks every access against it, and checks
//! the bytes of the first and last page of every paged buffer exactly (the exact ranges after
//! the table, which the drivers never read). The kernels' own writable data
//! ([`Arena::kernel_data`]) is read-only during calls. The kernel stack comes last, so nothing
//! below it for at least [`STACK_GUARD`] bytes is accessible and no other call's record is
//! within reach of a stack probe. Only the part up to the last writable buffer (`resp_len` bytes) travels
//! back, and only the part up to the last read-only buffer is sent.

use crate::abi::Abi;
use crate::image::Arena;

pub use crate::protocol::PROT_ENTRY_WORDS;
use crate::protocol::{entry as ent, header as hdr};

/// Words in the arena header ([`crate::protocol::header`]).
pub const HEADER_WORDS: usize = hdr::WORDS;
/// Fixed words at the start of every call entry, before `saved[]` ([`crate::protocol::entry`]).
pub const ENTRY_FIXED_WORDS: usize = ent::FIXED_WORDS;

/// Guest page size the guards are laid out in (4 KiB on every Linux target the lab runs).
pub const PAGE: u64 = 4096;
/// Bytes with no access at least right below the kernel's stack budget: a stack probe or a frame
/// this far below the budget faults instead of landing in other memory (1 MiB, as issue 12
/// asks). The stack sits at the end of the arena, so the guard is in fact everything between the
/// last buffer and the stack budget.
pub const STACK_GUARD: u64 = 1 << 20;
/// `prot` bits of a protection-table entry (Linux `PROT_READ`, `PROT_WRITE`); 0 = guard page.
pub const PROT_READ: u64 = 1;
/// See [`PROT_READ`].
pub const PROT_WRITE: u64 = 2;

/// Where a buffer sits in its pages, relative to the guard pages around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The last byte sits just below a guard page: any read or write past the end faults.
    End,
    /// The first byte sits at the start of a page just above a guard page: any access before
    /// the start faults.
    Start,
    /// The first byte sits this many bytes (0..64) past a page boundary, to test unaligned
    /// inputs; an under-read faults at once, an over-read on page-guard backends only once it
    /// reaches the next page (Unicorn checks the bytes after the end exactly).
    Offset(usize),
    /// The first byte sits this many bytes (0..64) past a 64-byte boundary and the last byte
    /// less than 64 bytes below a guard page: the misaligned twin of [`End`](Self::End). Unicorn
    /// checks the bytes between the end and the guard exactly; qemu and native see an over-read
    /// only once it reaches the guard page.
    Misaligned(usize),
    /// No pages of its own and no guard: packed after the previous buffer, starting this many
    /// bytes (0..4096) past a 64-byte boundary. For sweeps of many small cases whose guard-page
    /// twins run separately; accesses past it are not caught.
    Packed(usize),
}

/// One range of the protection table: `len` bytes at `addr` get `prot` ([`PROT_READ`],
/// [`PROT_WRITE`], 0 for a guard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protection {
    /// Page-aligned guest address.
    pub addr: u64,
    /// Length in bytes, a multiple of [`PAGE`].
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

/// A payload allocation holding only zeros ([`Batch::into_payload`]), for
/// [`BatchBuilder::layout_and_clear`]: a run lays hundreds of batches of hundreds of KiB, and
/// zeroing each whole (or a fresh allocation's page faults) cost more than zeroing what the
/// last batch wrote.
#[derive(Debug, Default)]
pub struct ZeroedPayload {
    /// The payload bytes, all zero.
    bytes: Vec<u8>,
    /// The allocations of the last batch's tables of its buffers and calls (empty), for the
    /// next batch: a batch of thousands of buffers would otherwise take fresh memory for them.
    placed: Vec<Placed>,
    names: Vec<&'static str>,
    seeds: Vec<u64>,
}

thread_local! {
    /// This thread's spare builder allocations ([`BatchBuilder::take_spare`]).
    static SPARE_BUILDER: std::cell::RefCell<Option<BatchBuilder>> = const { std::cell::RefCell::new(None) };
    /// This thread's spare payload, shared by every batch the thread lays (all vector sets and
    /// cells of `lab run`, all fuzz batches): a set that starts with a fresh allocation grows it
    /// through fresh pages the kernel must zero.
    static SPARE_PAYLOAD: std::cell::RefCell<ZeroedPayload> = std::cell::RefCell::new(ZeroedPayload::default());
}

impl ZeroedPayload {
    /// Takes this thread's spare payload (empty if none was kept).
    pub fn take_spare() -> ZeroedPayload {
        SPARE_PAYLOAD.with(|s| std::mem::take(&mut *s.borrow_mut()))
    }

    /// Keeps `self` as this thread's spare payload for the next batch.
    pub fn keep_as_spare(self) {
        SPARE_PAYLOAD.with(|s| *s.borrow_mut() = self);
    }
}

/// Handle of a buffer added to a [`BatchBuilder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufId(usize);

/// A kernel argument: an immediate register value or a guest pointer into a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// The 64-bit register value as passed.
    Imm(u64),
    /// Address of byte `offset` of a buffer.
    Ptr(BufId, usize),
}

/// A buffer of a [`BatchBuilder`]: its bytes are `len` bytes at `start` of the builder's
/// byte store (one allocation for every buffer, written straight into the payload).
#[derive(Debug, Clone)]
struct BufSpec {
    name: &'static str,
    start: usize,
    len: usize,
    writable: bool,
    placement: Placement,
}

#[derive(Debug, Clone)]
struct CallSpec {
    func: u64,
    args: [Arg; 4],
    copy: Option<(BufId, BufId)>,
    seed: u64,
}

/// Errors while laying out a batch.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The batch does not fit into `lab_arena`.
    #[error("batch needs {needed} bytes but lab_arena holds {available}")]
    TooLarge { needed: u64, available: u64 },
}

/// Collects buffers and calls, then lays them out for one arena.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    abi: &'static Abi,
    bufs: Vec<BufSpec>,
    /// The bytes of every buffer, one after another.
    bytes: Vec<u8>,
    calls: Vec<CallSpec>,
    exact: bool,
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

impl BatchBuilder {
    /// An empty batch for the driver of `abi.arch`.
    pub fn new(abi: &'static Abi) -> Self {
        BatchBuilder { abi, bufs: Vec::new(), bytes: Vec::new(), calls: Vec::new(), exact: true }
    }

    /// [`new`](Self::new) in the allocations of the builder this thread kept last
    /// ([`keep_as_spare`](Self::keep_as_spare)): every vector set of a run lays its batches
    /// through one builder per thread, whose byte store does not grow through fresh pages again.
    pub fn take_spare(abi: &'static Abi) -> Self {
        let spare = SPARE_BUILDER.with(|s| s.borrow_mut().take());
        match spare {
            Some(mut b) => {
                b.clear();
                BatchBuilder { abi, exact: true, ..b }
            }
            None => Self::new(abi),
        }
    }

    /// Keeps `self`'s allocations for this thread's next [`take_spare`](Self::take_spare).
    pub fn keep_as_spare(self) {
        SPARE_BUILDER.with(|s| *s.borrow_mut() = Some(self));
    }

    /// Removes every buffer and call, keeping the allocations.
    fn clear(&mut self) {
        self.bufs.clear();
        self.bytes.clear();
        self.calls.clear();
    }

    /// Lists no exact ranges: every backend checks guard pages only. For timed and counted runs
    /// (`lab bench`), where Unicorn's byte checks would cost time and re-runs.
    pub fn page_bounds_only(&mut self) {
        self.exact = false;
    }

    /// The ABI the batch is built for.
    pub fn abi(&self) -> &'static Abi {
        self.abi
    }

    /// Number of calls so far.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// True when no call was added.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Adds a read-only input starting `misalign` bytes (0..64) past a page boundary
    /// ([`Placement::Offset`]).
    pub fn input(&mut self, bytes: &[u8], misalign: usize) -> BufId {
        self.buffer("input", bytes, false, Placement::Offset(misalign % 64))
    }

    /// Adds a writable in-out buffer (state, accumulator), its end flush against a guard page.
    pub fn output(&mut self, init: &[u8]) -> BufId {
        self.buffer("output", init, true, Placement::End)
    }

    /// Adds a buffer called `name` in findings (`input`, `state`, ...), read-only unless
    /// `writable`, placed as `placement` says.
    pub fn buffer(&mut self, name: &'static str, bytes: &[u8], writable: bool, placement: Placement) -> BufId {
        let placement = match placement {
            Placement::Offset(m) => Placement::Offset(m % 64),
            Placement::Misaligned(m) => Placement::Misaligned(m % 64),
            Placement::Packed(m) => Placement::Packed(m % PAGE as usize),
            p => p,
        };
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        self.push(BufSpec { name, start, len: bytes.len(), writable, placement })
    }

    /// The bytes of buffer `b`.
    fn data(&self, b: &BufSpec) -> &[u8] {
        &self.bytes[b.start..b.start + b.len]
    }

    fn push(&mut self, b: BufSpec) -> BufId {
        self.bufs.push(b);
        BufId(self.bufs.len() - 1)
    }

    /// Adds a call of the kernel at `func`; returns its index in the table.
    /// `seed` chooses the poison values of the callee-saved registers.
    pub fn call(&mut self, func: u64, args: [Arg; 4], seed: u64) -> usize {
        self.calls.push(CallSpec { func, args, copy: None, seed });
        self.calls.len() - 1
    }

    /// Like [`call`](Self::call), but first copies buffer `from` into `to` (same length), so the
    /// call starts from a snapshot of an earlier call's output and both stay checkable.
    pub fn call_after_copy(&mut self, func: u64, args: [Arg; 4], seed: u64, from: BufId, to: BufId) -> usize {
        assert_eq!(self.bufs[from.0].len, self.bufs[to.0].len, "copy between buffers of different sizes");
        self.calls.push(CallSpec { func, args, copy: Some((from, to)), seed });
        self.calls.len() - 1
    }

    /// Calls added so far.
    pub fn ncalls(&self) -> usize {
        self.calls.len()
    }

    /// Adds the call `call` again (the same function, arguments and copy) with poison `seed`:
    /// for timing many calls of one planned case. A call that starts from a copy starts from
    /// the same snapshot each time, so it leaves the same result.
    pub fn repeat(&mut self, call: usize, seed: u64) -> usize {
        let again = CallSpec { seed, ..self.calls[call].clone() };
        self.calls.push(again);
        self.calls.len() - 1
    }

    fn entry_bytes(&self) -> u64 {
        ((ENTRY_FIXED_WORDS + self.abi.saved.len()) * 8) as u64
    }

    /// Bytes of the protection table: a guard after and an entry for each buffer, a guard
    /// below the first buffer, the stack guard, the guard above the stack, the kernels' data.
    fn prot_size(&self) -> u64 {
        (PROT_ENTRY_WORDS * 8) as u64 * (2 * self.bufs.len() as u64 + 4)
    }

    /// Bytes of the exact ranges: a count and a `start, end` pair per buffer.
    fn exact_size(&self) -> u64 {
        8 + 16 * self.bufs.len() as u64
    }

    /// Bytes of the delta entries a qemu/native host may write ([`crate::protocol::header::DELTA_TABLE`]):
    /// room for one entry per run of pages of the protection table and one per gap between
    /// them, the most a change from any other table takes.
    fn delta_size(&self) -> u64 {
        2 * self.prot_size() + 2 * (PROT_ENTRY_WORDS * 8) as u64
    }

    /// Bytes of the header, protection table, exact ranges, delta entries and call table.
    fn tables_size(&self) -> u64 {
        (HEADER_WORDS * 8) as u64
            + self.prot_size()
            + self.exact_size()
            + self.delta_size()
            + self.entry_bytes() * self.calls.len() as u64
    }

    /// Pages of the kernel stack: the ABI's budget plus red zone, rounded up.
    fn stack_pages(&self) -> u64 {
        (self.abi.stack_budget + self.abi.red_zone).div_ceil(PAGE)
    }

    /// Bytes of the arena the batch needs: the payload, the minimum stack guard and the stack.
    pub fn payload_size(&self) -> u64 {
        align_up(self.walk(|_| ()), PAGE) + STACK_GUARD + self.stack_pages() * PAGE + PAGE
    }

    /// Walks the buffer region as [`lay`](Self::lay) places it, from the guard below the first
    /// buffer, telling `put` each piece in arena order; returns where the last buffer's guard
    /// (or the last packed buffer) ends. Offsets are from the arena's start.
    ///
    /// Writable buffers come first (they are inside the response), and in each pass the paged
    /// buffers before the packed ones, so the paged ones make one even pattern of pages
    /// (guard, buffer, guard, ...) that batches laid alike share.
    fn walk(&self, mut put: impl FnMut(Piece)) -> u64 {
        let guard = |put: &mut dyn FnMut(Piece), at: u64| {
            put(Piece::Guard(at));
            at + PAGE
        };
        // A guard below the first buffer, for under-reads of a buffer flush at its start.
        let mut cursor = guard(&mut put, align_up(self.tables_size(), 2 * PAGE));
        let mut last_guard_end = cursor;
        for (writable, packed) in [(true, false), (true, true), (false, false), (false, true)] {
            let in_pass =
                |b: &&BufSpec| b.writable == writable && matches!(b.placement, Placement::Packed(_)) == packed;
            for (i, b) in self.bufs.iter().enumerate().filter(|(_, b)| in_pass(b)) {
                if let Placement::Packed(m) = b.placement {
                    let off = align_up(cursor, 64) + m as u64;
                    put(Piece::Buffer(i, off));
                    cursor = off + b.len as u64;
                    continue;
                }
                // A paged buffer after packed ones needs its own guard below it.
                if cursor != last_guard_end {
                    cursor = align_up(cursor, PAGE);
                    if cursor % (2 * PAGE) != 0 {
                        cursor = guard(&mut put, cursor);
                    }
                    cursor = guard(&mut put, cursor);
                }
                let pages = run_pages(b);
                // Every guard after a buffer sits on an even page of the arena: one more guard
                // below a buffer of an even number of pages keeps the grid, so batches laid
                // alike differ in few pages (the drivers change only those).
                if (cursor / PAGE + pages) % 2 == 1 {
                    cursor = guard(&mut put, cursor);
                }
                let len = b.len as u64;
                let off = match b.placement {
                    // No page of its own: it sits between the guard below it and the one after
                    // it, so any access to it faults, before or past it, on every backend.
                    _ if len == 0 => cursor,
                    Placement::End => cursor + pages * PAGE - len,
                    _ => cursor + lead(b),
                };
                put(Piece::Buffer(i, off));
                if !b.writable && pages > 0 {
                    put(Piece::ReadOnly(cursor, pages));
                }
                cursor = guard(&mut put, cursor + pages * PAGE);
                last_guard_end = cursor;
            }
            if writable && packed {
                put(Piece::WritableEnd(cursor));
            }
        }
        cursor
    }

    /// Places everything in `arena` and encodes the payload.
    ///
    /// # Errors
    /// [`BatchError::TooLarge`] when it does not fit.
    pub fn layout(self, arena: Arena) -> Result<Batch, BatchError> {
        self.lay(arena, ZeroedPayload::default())
    }

    /// [`layout`](Self::layout) into `spare`, an earlier batch's payload
    /// ([`Batch::into_payload`]), then empties the builder for the next batch, keeping its
    /// allocations.
    ///
    /// # Errors
    /// As [`layout`](Self::layout) (the builder is emptied all the same).
    pub fn layout_and_clear(&mut self, arena: Arena, spare: ZeroedPayload) -> Result<Batch, BatchError> {
        let batch = self.lay(arena, spare);
        self.clear();
        batch
    }

    fn lay(&self, arena: Arena, spare: ZeroedPayload) -> Result<Batch, BatchError> {
        let entry = self.entry_bytes();
        let prot_off = (HEADER_WORDS * 8) as u64;
        let exact_off = prot_off + self.prot_size();
        let delta_off = exact_off + self.exact_size();
        let table_off = delta_off + self.delta_size();
        let ZeroedPayload { bytes: spare_bytes, mut placed, mut names, mut seeds } = spare;
        let mut prots: Vec<Protection> = Vec::with_capacity(2 * self.bufs.len() + 4);
        placed.clear();
        placed.resize(self.bufs.len(), Placed::default());
        let mut exact: Vec<(u64, u64)> = Vec::with_capacity(self.bufs.len());
        let mut resp_len = table_off + entry * self.calls.len() as u64;
        let cursor = self.walk(|piece| match piece {
            // Adjacent guards make one entry.
            Piece::Guard(at) => match prots.last_mut() {
                Some(g) if g.prot == 0 && g.addr + g.len == arena.addr + at => g.len += PAGE,
                _ => prots.push(Protection { addr: arena.addr + at, len: PAGE, prot: 0 }),
            },
            Piece::ReadOnly(at, pages) => {
                prots.push(Protection { addr: arena.addr + at, len: pages * PAGE, prot: PROT_READ })
            }
            Piece::Buffer(i, off) => {
                let b = &self.bufs[i];
                placed[i] = Placed { offset: off, len: b.len, writable: b.writable };
                let paged = !matches!(b.placement, Placement::Packed(_));
                if paged && b.len > 0 && self.exact {
                    exact.push((arena.addr + off, arena.addr + off + b.len as u64));
                }
            }
            Piece::WritableEnd(at) => resp_len = resp_len.max(at),
        });
        let payload_len = cursor;
        // The kernel stack at the very end of the arena, below one guard page: everything between
        // the last buffer and the stack budget (at least STACK_GUARD bytes) has no access.
        let top_guard = arena.size / PAGE * PAGE - PAGE;
        let bottom = top_guard.saturating_sub(self.stack_pages() * PAGE);
        let guard_bottom = align_up(cursor, PAGE);
        if bottom < guard_bottom + STACK_GUARD {
            let needed = guard_bottom + STACK_GUARD + (self.stack_pages() + 1) * PAGE;
            return Err(BatchError::TooLarge { needed, available: arena.size });
        }
        prots.push(Protection { addr: arena.addr + guard_bottom, len: bottom - guard_bottom, prot: 0 });
        let budget = self.abi.stack_budget + self.abi.red_zone;
        let stack = StackWindow {
            guard: arena.addr + guard_bottom,
            bottom: arena.addr + bottom,
            top: arena.addr + bottom + budget,
        };
        prots.push(Protection { addr: arena.addr + top_guard, len: PAGE, prot: 0 });
        if let Some((lo, hi)) = arena.kernel_data {
            prots.push(Protection { addr: lo, len: hi - lo, prot: PROT_READ });
        }
        // All zeros already: only a longer payload's new bytes are written (zeros).
        let mut payload = spare_bytes;
        if payload.capacity() < payload_len as usize {
            // Room for any batch of the arena at once: growing by steps would move the bytes
            // to fresh pages each time.
            payload.reserve_exact((arena.size as usize).max(payload_len as usize) - payload.len());
        }
        if payload.len() > payload_len as usize {
            payload.truncate(payload_len as usize);
        } else {
            payload.resize(payload_len as usize, 0);
        }
        for (b, p) in self.bufs.iter().zip(&placed) {
            payload[p.offset as usize..p.offset as usize + p.len].copy_from_slice(self.data(b));
        }
        for (n, p) in prots.iter().enumerate() {
            let at = (prot_off as usize) + n * PROT_ENTRY_WORDS * 8;
            put(&mut payload, at, p.addr);
            put(&mut payload, at + 8, p.len);
            put(&mut payload, at + 16, p.prot);
        }
        // The exact ranges follow the entries actually used.
        let at = prot_off as usize + prots.len() * PROT_ENTRY_WORDS * 8;
        put(&mut payload, at, exact.len() as u64);
        for (n, (lo, hi)) in exact.iter().enumerate() {
            put(&mut payload, at + 8 + 16 * n, *lo);
            put(&mut payload, at + 16 + 16 * n, *hi);
        }
        let addr = |id: BufId, off: usize| arena.addr + placed[id.0].offset + off as u64;
        put(&mut payload, hdr::NCALLS.offset(), self.calls.len() as u64);
        put(&mut payload, hdr::START.offset(), 0);
        put(&mut payload, hdr::TABLE.offset(), arena.addr + table_off);
        put(&mut payload, hdr::RESP_LEN.offset(), resp_len);
        put(&mut payload, hdr::PROT_TABLE.offset(), arena.addr + prot_off);
        put(&mut payload, hdr::PROT_COUNT.offset(), prots.len() as u64);
        put(&mut payload, hdr::DELTA_TABLE.offset(), arena.addr + delta_off);
        for (n, c) in self.calls.iter().enumerate() {
            let base = (table_off + entry * n as u64) as usize;
            put(&mut payload, base + ent::FN.offset(), c.func);
            for (k, a) in c.args.iter().enumerate() {
                let v = match *a {
                    Arg::Imm(v) => v,
                    Arg::Ptr(id, off) => addr(id, off),
                };
                put(&mut payload, base + ent::ARG0.offset() + k * 8, v);
            }
            if let Some((from, to)) = c.copy {
                put(&mut payload, base + ent::COPY_SRC.offset(), addr(from, 0));
                put(&mut payload, base + ent::COPY_DST.offset(), addr(to, 0));
                put(&mut payload, base + ent::COPY_LEN.offset(), placed[to.0].len as u64);
            }
            put(&mut payload, base + ent::SEED.offset(), c.seed);
            put(&mut payload, base + ent::STACK.offset(), stack.top);
        }
        Ok(Batch {
            payload,
            resp_len: resp_len as usize,
            arena,
            table_off: table_off as usize,
            names: {
                names.clear();
                names.extend(self.bufs.iter().map(|b| b.name));
                names
            },
            placed,
            stack,
            seeds: {
                seeds.clear();
                seeds.extend(self.calls.iter().map(|c| c.seed));
                seeds
            },
            entry_words: entry as usize / 8,
            nsaved: self.abi.saved.len(),
        })
    }
}

/// A piece of the buffer region ([`BatchBuilder::walk`]), at an offset from the arena's start.
#[derive(Debug, Clone, Copy)]
enum Piece {
    /// A guard page.
    Guard(u64),
    /// Pages of a read-only buffer: the first and how many.
    ReadOnly(u64, u64),
    /// Buffer `.0` starts at `.1`.
    Buffer(usize, u64),
    /// The writable buffers end here.
    WritableEnd(u64),
}

/// Where a paged buffer's first byte sits in its first page ([`Placement::End`]: flush against
/// the guard after it; [`Placement::Misaligned`]: the latest start at the asked misalignment
/// that ends before the guard).
fn lead(b: &BufSpec) -> u64 {
    let len = b.len as u64;
    let flush = (PAGE - len % PAGE) % PAGE;
    match b.placement {
        Placement::Offset(m) => m as u64,
        Placement::End => flush,
        Placement::Misaligned(m) => {
            let m = m as u64 % 64;
            (flush + PAGE - (flush + 64 - m) % 64) % PAGE
        }
        Placement::Start | Placement::Packed(_) => 0,
    }
}

/// Pages a buffer occupies: none for an empty buffer, which still has an address of its own (the
/// boundary between the guard below it and its own guard after it).
fn run_pages(b: &BufSpec) -> u64 {
    if b.len == 0 {
        return 0;
    }
    (lead(b) + b.len as u64).div_ceil(PAGE)
}

/// The stack the kernel runs on: `sp` at the call is `top`; it may use `[bottom, top)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackWindow {
    /// Lowest byte of the [`STACK_GUARD`] below the budget.
    pub guard: u64,
    /// Lowest byte the kernel may touch (just above the stack guard).
    pub bottom: u64,
    /// Stack pointer at the call (16-byte aligned).
    pub top: u64,
}

fn put(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[derive(Debug, Clone, Copy, Default)]
struct Placed {
    offset: u64,
    len: usize,
    writable: bool,
}

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
    table_off: usize,
    names: Vec<&'static str>,
    placed: Vec<Placed>,
    seeds: Vec<u64>,
    entry_words: usize,
    nsaved: usize,
}

fn plural(n: u64) -> &'static str {
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
    fn near_buffer(&self, i: usize, addr: u64) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{RISCV64, X86_64};

    const ARENA: Arena = Arena { addr: 0x10_0000, size: 32 << 20, kernel_data: None };

    #[test]
    fn flush_placements_touch_a_guard_page_and_inputs_are_read_only() {
        let mut b = BatchBuilder::new(&RISCV64);
        let end = b.buffer("input", &[1; 100], false, Placement::End);
        let start = b.buffer("pad", &[2; 100], false, Placement::Start);
        let state = b.buffer("state", &[3; 16], true, Placement::End);
        let batch = b.layout(ARENA).unwrap();
        let prots = batch.protections();
        let prot_at = |a: u64| prots.iter().find(|p| p.contains(a)).map(|p| p.prot);
        let end_addr = batch.addr_of(end, 100);
        assert_eq!(end_addr % PAGE, 0, "flush at the end: the byte after the input starts a page");
        assert_eq!(prot_at(end_addr), Some(0), "and that page is a guard");
        assert_eq!(prot_at(end_addr - 1), Some(PROT_READ), "the input itself is read-only");
        let start_addr = batch.addr_of(start, 0);
        assert_eq!((start_addr % PAGE, prot_at(start_addr - 1)), (0, Some(0)));
        assert_eq!(prot_at(batch.addr_of(state, 16)), Some(0));
        assert_eq!(prot_at(batch.addr_of(state, 0)), None, "writable buffers need no entry");
        assert_eq!(prot_at(batch.stack.bottom - 1), Some(0), "a guard below the stack budget");
        assert_eq!(batch.stack.top - batch.stack.bottom, 4096);
        // Only the writable buffers come back.
        assert!(batch.resp_len as u64 <= batch.addr_of(end, 0) - ARENA.addr);
    }

    /// Every paged buffer lies between guard pages with the guard after it on an even page of
    /// the arena (an even number of pages gets a second guard below it), packed buffers follow
    /// the paged ones of their pass, and every guard is a guard on every page it covers.
    #[test]
    fn guards_keep_a_two_page_grid_and_packed_buffers_come_last_in_their_pass() {
        let mut b = BatchBuilder::new(&X86_64);
        let mut ids = Vec::new();
        for (i, len) in [100usize, 5000, 0, 16, 9000, 4096, 1].into_iter().enumerate() {
            let placement = [Placement::End, Placement::Start, Placement::Misaligned(5)][i % 3];
            ids.push((b.buffer("input", &vec![1; len], i % 2 == 0, placement), len));
            ids.push((b.buffer("packed", &[3; 9], i % 2 == 1, Placement::Packed(7)), 9));
        }
        let size = b.payload_size();
        let batch = b.layout(ARENA).unwrap();
        let prots = batch.protections();
        let prot_at = |a: u64| prots.iter().find(|p| p.contains(a)).map(|p| p.prot);
        let page = |a: u64| (a - ARENA.addr) / PAGE;
        let mut last_paged = [0u64; 2];
        let mut first_packed = [u64::MAX; 2];
        for &(id, len) in &ids {
            let (lo, writable) = (batch.addr_of(id, 0), batch.placed[id.0].writable);
            let hi = lo + len as u64;
            if batch.placed[id.0].len == 9 {
                first_packed[usize::from(writable)] = first_packed[usize::from(writable)].min(lo);
                continue;
            }
            let first = lo / PAGE * PAGE;
            let after = if len == 0 { lo } else { hi.div_ceil(PAGE) * PAGE };
            assert_eq!(page(after) % 2, 0, "the guard after a {len}-byte buffer lies on an even page");
            assert_eq!((prot_at(first - PAGE), prot_at(after)), (Some(0), Some(0)), "{len} bytes between guards");
            last_paged[usize::from(writable)] = last_paged[usize::from(writable)].max(hi);
        }
        for w in 0..2 {
            assert!(last_paged[w] < first_packed[w], "pass {w}: paged buffers before packed ones");
        }
        assert!(prots.windows(2).all(|p| p[0].addr + p[0].len <= p[1].addr), "entries do not overlap");
        assert!(prots.windows(2).all(|p| !(p[0].prot == 0 && p[1].prot == 0 && p[0].addr + p[0].len == p[1].addr)));
        let bottom = align_up(batch.payload.len() as u64, PAGE);
        assert_eq!(size, bottom + STACK_GUARD + (batch.stack.top - batch.stack.bottom).div_ceil(PAGE) * PAGE + PAGE);
    }

    #[test]
    fn addresses_are_described_relative_to_the_nearest_buffer_or_the_stack() {
        let mut b = BatchBuilder::new(&X86_64);
        let input = b.buffer("input", &[0; 64], false, Placement::End);
        let batch = b.layout(ARENA).unwrap();
        let at = |off: u64| batch.locate(batch.addr_of(input, 0) + off).unwrap();
        assert!(at(64).starts_with("1 byte past the end of input (input[64]; 64 bytes at 0x"), "{}", at(64));
        assert!(at(71).starts_with("8 bytes past the end of input"), "{}", at(71));
        assert!(at(3).starts_with("inside input (input[3];") && at(3).contains("read-only"), "{}", at(3));
        let below = batch.locate(batch.stack.bottom - 8).unwrap();
        // The budget lies below the red zone: 4096 + 128 bytes below sp on x86_64.
        let budget = X86_64.stack_budget + X86_64.red_zone;
        assert!(below.starts_with(&format!("8 bytes below the stack budget ({budget} bytes below sp")), "{below}");
        assert_eq!(batch.locate(ARENA.addr - 1), None);
    }

    #[test]
    fn misaligned_inputs_start_at_their_offset_and_end_less_than_64_bytes_below_a_guard() {
        for len in [0usize, 1, 63, 64, 100, 4096, 5000] {
            for m in [0usize, 1, 4, 5, 63] {
                let mut b = BatchBuilder::new(&RISCV64);
                let input = b.buffer("input", &vec![7; len], false, Placement::Misaligned(m));
                let batch = b.layout(ARENA).unwrap();
                let prots = batch.protections();
                let start = batch.addr_of(input, 0);
                let end = batch.addr_of(input, len);
                let guard = end.next_multiple_of(PAGE);
                let guarded = prots.iter().any(|p| p.prot == 0 && p.contains(guard));
                assert!(guarded && guard - end < 64, "len {len} m {m}: end {end:#x}");
                if len > 0 {
                    assert_eq!(start % 64, m as u64, "len {len} m {m}");
                    assert_eq!(exact_ranges(&batch.payload, ARENA.addr), vec![(start, end)]);
                }
            }
        }
    }

    #[test]
    fn the_stack_comes_last_above_a_megabyte_guard_and_the_kernels_data_is_read_only() {
        let data = (0x1000, 0x3000);
        let mut b = BatchBuilder::new(&RISCV64);
        let state = b.output(&[0; 16]);
        b.call(0x1234, [Arg::Ptr(state, 0), Arg::Imm(0), Arg::Imm(0), Arg::Imm(0)], 1);
        let batch = b.layout(Arena { kernel_data: Some(data), ..ARENA }).unwrap();
        let prots = batch.protections();
        let s = batch.stack;
        assert!(s.bottom - s.guard >= STACK_GUARD);
        let guard = prots.iter().find(|p| p.contains(s.guard)).unwrap();
        assert_eq!((guard.addr, guard.len, guard.prot), (s.guard, s.bottom - s.guard, 0));
        assert_eq!(s.bottom + PAGE, ARENA.addr + ARENA.size - PAGE, "the stack ends a page below the arena's end");
        assert!(prots.iter().any(|p| p.prot == 0 && p.contains(ARENA.addr + ARENA.size - 1)));
        // Nothing the call writes or the driver records lies within reach below the stack.
        assert!(batch.addr_of(state, 16) <= s.guard && ARENA.addr + batch.table_end() as u64 <= s.guard);
        assert!(batch.payload.len() as u64 <= s.guard - ARENA.addr, "the guard and stack are never sent");
        let image = prots.iter().find(|p| p.addr == data.0).unwrap();
        assert_eq!((image.len, image.prot), (data.1 - data.0, PROT_READ));
        let far = batch.locate(s.guard).unwrap();
        assert!(far.starts_with(&format!("{} bytes below the stack budget", s.bottom - s.guard)), "{far}");
        assert!(batch.locate(s.bottom - 4104).unwrap().starts_with("4104 bytes below the stack budget"));
    }

    #[test]
    fn every_nonzero_payload_byte_is_inside_a_data_range() {
        let mut b = BatchBuilder::new(&RISCV64);
        let input = b.buffer("input", &[0xa5; 5000], false, Placement::Misaligned(3));
        let state = b.output(&[0x5a; 16]);
        b.buffer("packed", &[0x77; 9], false, Placement::Packed(5));
        b.call(0x1234, [Arg::Ptr(input, 0), Arg::Ptr(state, 0), Arg::Imm(7), Arg::Imm(9)], 1);
        let batch = b.layout(ARENA).unwrap();
        let ranges: Vec<_> = batch.data_ranges().collect();
        assert_eq!(ranges.len(), 4, "the tables and three buffers");
        assert_eq!(ranges[1], {
            let at = (batch.addr_of(input, 0) - ARENA.addr) as usize;
            at..at + 5000
        });
        let covered = |i: usize| ranges.iter().any(|r| r.contains(&i));
        let stray: Vec<usize> = (0..batch.payload.len()).filter(|&i| batch.payload[i] != 0 && !covered(i)).collect();
        assert!(stray.is_empty(), "nonzero bytes outside the data ranges at {:?}", &stray[..stray.len().min(4)]);
        assert!(batch.payload[ranges[2].clone()].iter().all(|&x| x == 0x5a));
        let len = batch.payload.len();
        let spare = batch.into_payload();
        assert!(spare.bytes.len() == len && spare.bytes.iter().all(|&x| x == 0), "a reused payload is all zeros");
        let mut again = BatchBuilder::new(&RISCV64);
        again.buffer("input", &[3; 10], false, Placement::End);
        let fresh = again.clone().layout(ARENA).unwrap();
        assert_eq!(again.layout_and_clear(ARENA, spare).unwrap().payload, fresh.payload);
    }

    #[test]
    fn the_response_ranges_are_the_tables_and_the_writable_buffers() {
        let mut b = BatchBuilder::new(&X86_64);
        let input = b.buffer("input", &[0xa5; 100], false, Placement::End);
        let state = b.output(&[0x5a; 16]);
        let packed = b.buffer("acc", &[1; 40], true, Placement::Packed(3));
        b.call(0x1234, [Arg::Ptr(input, 0), Arg::Ptr(state, 0), Arg::Ptr(packed, 0), Arg::Imm(1)], 1);
        let batch = b.clone().layout(ARENA).unwrap();
        let at = |id: BufId, len: usize| {
            let lo = (batch.addr_of(id, 0) - ARENA.addr) as usize;
            lo..lo + len
        };
        let mut got: Vec<_> = batch.response_ranges().collect();
        got.sort_by_key(|r| r.start);
        assert_eq!(got, vec![0..batch.table_end(), at(state, 16), at(packed, 40)]);
        assert!(got.iter().all(|r| r.end <= batch.resp_len), "all inside the response");
        // Laid out and cleared: the same batch, and an empty builder that lays the next one.
        let mut again = b.clone();
        let same = again.layout_and_clear(ARENA, ZeroedPayload::default()).unwrap();
        assert_eq!(same.payload, batch.payload);
        assert!(again.is_empty() && again.bufs.is_empty() && again.bytes.is_empty());
        again.buffer("input", &[3; 10], false, Placement::End);
        let mut fresh = BatchBuilder::new(&X86_64);
        fresh.buffer("input", &[3; 10], false, Placement::End);
        assert_eq!(again.layout(ARENA).unwrap().payload, fresh.layout(ARENA).unwrap().payload);
    }

    #[test]
    fn timed_batches_list_no_exact_ranges() {
        let mut b = BatchBuilder::new(&X86_64);
        b.page_bounds_only();
        b.input(&[1; 64], 3);
        let batch = b.layout(ARENA).unwrap();
        assert!(exact_ranges(&batch.payload, ARENA.addr).is_empty());
    }
}

//! Laying a batch out in the arena: guard pages, placements, the stack window, and the encoded
//! header, tables and buffers (the module docs of `crate::batch` draw the layout).

use super::{
    align_up, Arg, Batch, BatchBuilder, BatchError, BufId, BufSpec, Placement, Protection, ZeroedPayload, HEADER_WORDS,
    PAGE, PROT_ENTRY_WORDS, PROT_READ, STACK_GUARD,
};
use crate::image::Arena;
use crate::protocol::{entry as ent, header as hdr};

impl BatchBuilder {
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

    pub(super) fn lay(&self, arena: Arena, spare: ZeroedPayload) -> Result<Batch, BatchError> {
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
                let paged = !matches!(b.placement, Placement::Packed(_));
                placed[i] = Placed { offset: off, len: b.len, writable: b.writable, paged };
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
pub(super) enum Piece {
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
pub(super) fn lead(b: &BufSpec) -> u64 {
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
pub(super) fn run_pages(b: &BufSpec) -> u64 {
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

pub(super) fn put(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

pub(super) fn get(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Placed {
    pub(super) offset: u64,
    pub(super) len: usize,
    pub(super) writable: bool,
    /// Pages of its own between guard pages (not [`Placement::Packed`]).
    pub(super) paged: bool,
}

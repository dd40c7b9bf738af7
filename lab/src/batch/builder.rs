//! Collecting a batch: buffers (bytes, placement, access) and calls (function, arguments, poison
//! seed), and the sizes of the tables they need.

use super::{
    lead, run_pages, Arg, BufId, Extent, Placement, ENTRY_FIXED_WORDS, HEADER_WORDS, PAGE, PROT_ENTRY_WORDS,
    SPARE_BUILDER, STACK_GUARD,
};
use crate::abi::Abi;

/// A buffer of a [`BatchBuilder`]: its bytes are `len` bytes at `start` of the builder's
/// byte store (one allocation for every buffer, written straight into the payload).
#[derive(Debug, Clone)]
pub(super) struct BufSpec {
    pub(super) name: &'static str,
    pub(super) start: usize,
    pub(super) len: usize,
    pub(super) writable: bool,
    pub(super) placement: Placement,
}

#[derive(Debug, Clone)]
pub(super) struct CallSpec {
    pub(super) func: u64,
    pub(super) args: [Arg; 4],
    pub(super) copy: Option<(BufId, BufId)>,
    pub(super) seed: u64,
}

/// Collects buffers and calls, then lays them out for one arena.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    pub(super) abi: &'static Abi,
    pub(super) bufs: Vec<BufSpec>,
    /// The bytes of every buffer, one after another.
    pub(super) bytes: Vec<u8>,
    pub(super) calls: Vec<CallSpec>,
    pub(super) exact: bool,
}

pub(super) fn align_up(x: u64, a: u64) -> u64 {
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
    pub(super) fn clear(&mut self) {
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
    pub(super) fn data(&self, b: &BufSpec) -> &[u8] {
        &self.bytes[b.start..b.start + b.len]
    }

    pub(super) fn push(&mut self, b: BufSpec) -> BufId {
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

    /// The guest address call `call` calls, when there is such a call.
    pub fn call_target(&self, call: usize) -> Option<u64> {
        self.calls.get(call).map(|c| c.func)
    }

    /// Adds the call `call` again (the same function, arguments and copy) with poison `seed`:
    /// for timing many calls of one planned case. A call that starts from a copy starts from
    /// the same snapshot each time, so it leaves the same result.
    pub fn repeat(&mut self, call: usize, seed: u64) -> usize {
        let again = CallSpec { seed, ..self.calls[call].clone() };
        self.calls.push(again);
        self.calls.len() - 1
    }

    pub(super) fn entry_bytes(&self) -> u64 {
        ((ENTRY_FIXED_WORDS + self.abi.saved.len()) * 8) as u64
    }

    /// Bytes of the protection table: a guard after and an entry for each buffer, a guard
    /// below the first buffer, the stack guard, the guard above the stack, the kernels' data.
    pub(super) fn prot_size(&self) -> u64 {
        (PROT_ENTRY_WORDS * 8) as u64 * (2 * self.bufs.len() as u64 + 4)
    }

    /// Bytes of the exact ranges: a count and a `start, end` pair per buffer.
    pub(super) fn exact_size(&self) -> u64 {
        8 + 16 * self.bufs.len() as u64
    }

    /// Bytes of the delta entries a qemu/native host may write ([`crate::protocol::header::DELTA_TABLE`]):
    /// room for one entry per run of pages of the protection table and one per gap between
    /// them, the most a change from any other table takes.
    pub(super) fn delta_size(&self) -> u64 {
        2 * self.prot_size() + 2 * (PROT_ENTRY_WORDS * 8) as u64
    }

    /// Bytes of the header, protection table, exact ranges, delta entries and call table.
    pub(super) fn tables_size(&self) -> u64 {
        (HEADER_WORDS * 8) as u64
            + self.prot_size()
            + self.exact_size()
            + self.delta_size()
            + self.entry_bytes() * self.calls.len() as u64
    }

    /// Pages of the kernel stack: the ABI's budget plus red zone, rounded up.
    pub(super) fn stack_pages(&self) -> u64 {
        (self.abi.stack_budget + self.abi.red_zone).div_ceil(PAGE)
    }

    /// Bytes of the arena the batch needs: the payload, the minimum stack guard and the stack.
    pub fn payload_size(&self) -> u64 {
        align_up(self.walk(|_| ()), PAGE) + STACK_GUARD + self.stack_pages() * PAGE + PAGE
    }

    /// Walks the buffer region as [`lay`](Self::lay) places it, from the guard below the first
    /// buffer, telling `put` each extent in arena order; returns where the last buffer's guard
    /// (or the last packed buffer) ends. Offsets are from the arena's start.
    ///
    /// Writable buffers come first (they are inside the response), and in each pass the paged
    /// buffers before the packed ones, so the paged ones make one even pattern of pages
    /// (guard, buffer, guard, ...) that batches laid alike share.
    pub(super) fn walk(&self, mut put: impl FnMut(Extent)) -> u64 {
        let guard = |put: &mut dyn FnMut(Extent), at: u64| {
            put(Extent::Guard(at));
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
                    put(Extent::Buffer(i, off));
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
                put(Extent::Buffer(i, off));
                if !b.writable && pages > 0 {
                    put(Extent::ReadOnly(cursor, pages));
                }
                cursor = guard(&mut put, cursor + pages * PAGE);
                last_guard_end = cursor;
            }
            if writable && packed {
                put(Extent::WritableEnd(cursor));
            }
        }
        cursor
    }
}

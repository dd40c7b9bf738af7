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
//! (`Arena::kernel_data`) is read-only during calls. The kernel stack comes last, so nothing
//! below it for at least [`STACK_GUARD`] bytes is accessible and no other call's record is
//! within reach of a stack probe. Only the part up to the last writable buffer (`resp_len` bytes) travels
//! back, and only the part up to the last read-only buffer is sent.

mod builder;
mod layout;
mod payload;
mod protection;
mod response;
#[cfg(test)]
mod tests;

pub use builder::BatchBuilder;
use builder::*;
pub use layout::StackWindow;
use layout::*;
pub use payload::ZeroedPayload;
use payload::*;
pub use protection::{exact_ranges, protection_entries, protections, Protection};
pub use response::{Batch, CallRecord};

pub use crate::protocol::PROT_ENTRY_WORDS;
use crate::protocol::{entry as ent, header as hdr};

/// Words in the arena header ([`crate::protocol::header`]).
pub const HEADER_WORDS: usize = hdr::WORDS;
/// Fixed words at the start of every call entry, before `saved[]` ([`crate::protocol::entry`]).
pub const ENTRY_FIXED_WORDS: usize = ent::FIXED_WORDS;

/// Guest page size the guards are laid out in ([`crate::protocol::PAGE`]).
pub use crate::protocol::PAGE;
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

/// Handle of a buffer added to a [`BatchBuilder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufId(pub(super) usize);

/// A kernel argument: an immediate register value or a guest pointer into a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// The 64-bit register value as passed.
    Imm(u64),
    /// Address of byte `offset` of a buffer.
    Ptr(BufId, usize),
}

/// Errors while laying out a batch.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The batch does not fit into `lab_arena`.
    #[error("batch needs {needed} bytes but lab_arena holds {available}")]
    TooLarge { needed: u64, available: u64 },
}

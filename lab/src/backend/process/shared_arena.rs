//! The arena the lab shares with a guest process: a memfd both map, written and read sparsely
//! (guard pages and untouched ranges skipped), and the recycled response buffers.

use super::*;

/// The arena as shared memory: a memfd mapped into the lab; the guest maps the same file.
pub(super) struct SharedArena {
    pub(super) fd: OwnedFd,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this value and only accessed through `&mut self` or by copy.
unsafe impl Send for SharedArena {}

pub(super) fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// Moves `fd` to a number of at least 10, close-on-exec, so that handing fds 3-5 to a child
/// never overwrites one of the sources.
pub(super) fn high_fd(fd: OwnedFd) -> Result<OwnedFd, String> {
    rustix::io::fcntl_dupfd_cloexec(&fd, 10).map_err(|e| format!("fcntl(F_DUPFD_CLOEXEC) failed: {e}"))
}

impl SharedArena {
    pub(super) fn new(len: usize) -> Result<Self, String> {
        use rustix::fs::{MemfdFlags, SealFlags};
        let memfd = rustix::fs::memfd_create(c"lab_arena", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
            .map_err(|e| format!("memfd_create failed: {e}"))?;
        let fd = high_fd(memfd)?;
        rustix::fs::ftruncate(&fd, len as u64).map_err(|e| format!("ftruncate(memfd) failed: {e}"))?;
        // Sealed at its size: a guest that truncates the arena it shares with the lab would
        // otherwise kill the lab with SIGBUS at its next access (issue 28); now the guest's
        // ftruncate fails with EPERM and the lab's mapping stays whole.
        let seals = SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
        rustix::fs::fcntl_add_seals(&fd, seals).map_err(|e| format!("sealing the arena memfd failed: {e}"))?;
        // SAFETY: a shared mapping of an fd we own, at an address the kernel picks; checked.
        unsafe {
            let rw = libc::PROT_READ | libc::PROT_WRITE;
            let ptr = libc::mmap(std::ptr::null_mut(), len, rw, libc::MAP_SHARED, fd.as_raw_fd(), 0);
            if ptr == libc::MAP_FAILED {
                return Err(os_err("mmap(memfd)"));
            }
            Ok(SharedArena { fd, ptr: ptr.cast(), len })
        }
    }

    /// Copies `bytes` to the start of the arena (raw copies only: the guest writes the same
    /// memory, so no Rust reference into it is ever made).
    pub(super) fn write(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.len);
        // SAFETY: `n` bytes fit both the mapping and `bytes`; the regions do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr, n) };
    }

    /// Copies `bytes` to `offset` (ignored past the end).
    pub(super) fn write_at(&mut self, offset: usize, bytes: &[u8]) {
        let n = bytes.len().min(self.len.saturating_sub(offset));
        // SAFETY: `offset + n` is inside the mapping; the regions do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(offset), n) };
    }

    /// Copies `payload` to the start of the arena except the byte ranges in `skip` (sorted,
    /// disjoint): guard pages, whose bytes no call can reach, are never materialised. With
    /// `data` (sorted, disjoint), the payload's bytes outside those ranges are known to be
    /// zero: they are zeroed in place rather than copied (no read of the payload there).
    pub(super) fn write_sparse(&mut self, payload: &[u8], skip: &[(usize, usize)], data: Option<&[(usize, usize)]>) {
        let Some(data) = data else {
            for (lo, hi) in kept(payload.len().min(self.len), skip) {
                self.write_at(lo, &payload[lo..hi]);
            }
            return;
        };
        let mut d = 0;
        for (lo, hi) in kept(payload.len().min(self.len), skip) {
            let mut at = lo;
            while at < hi {
                // Data ranges that end before `at` are behind us.
                while d < data.len() && data[d].1 <= at {
                    d += 1;
                }
                match data.get(d) {
                    Some(&(start, end)) if start < hi => {
                        let (start, end) = (start.max(at), end.min(hi));
                        self.zero_at(at, start - at);
                        self.write_at(start, &payload[start..end]);
                        at = end;
                    }
                    _ => {
                        self.zero_at(at, hi - at);
                        at = hi;
                    }
                }
            }
        }
    }

    /// Zeroes `n` bytes at `offset` (ignored past the end).
    pub(super) fn zero_at(&mut self, offset: usize, n: usize) {
        let n = n.min(self.len.saturating_sub(offset));
        // SAFETY: `offset + n` is inside the mapping.
        unsafe { std::ptr::write_bytes(self.ptr.add(offset), 0, n) };
    }

    /// The first `len` bytes (zero-filled past the arena), with zeros in the ranges of `skip`
    /// (sorted, disjoint) instead of what the arena holds there: a guard page reads as the
    /// zeros the host laid out, whatever an earlier batch left in it.
    pub(super) fn read_sparse(&self, len: usize, skip: &[(usize, usize)]) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.copy_ranges(&mut out, kept(len, skip));
        out
    }

    /// Copies the byte ranges `ranges` of the arena into the same places of `out` (clipped to
    /// `out` and the arena; the rest of `out` is left as it is).
    pub(super) fn copy_ranges(&self, out: &mut [u8], ranges: impl Iterator<Item = (usize, usize)>) {
        let end = out.len().min(self.len);
        for (lo, hi) in ranges {
            let (lo, hi) = (lo.min(end), hi.min(end));
            if lo < hi {
                // SAFETY: `lo..hi` lies inside both the mapping and `out`, which are disjoint.
                unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(lo), out.as_mut_ptr().add(lo), hi - lo) };
            }
        }
    }

    /// Copies `out.len()` bytes from arena offset `at` into `out` (zeros past the arena).
    pub(super) fn copy_ranges_to(&self, out: &mut [u8], at: usize) {
        let n = out.len().min(self.len.saturating_sub(at));
        out[n..].fill(0);
        if n > 0 {
            // SAFETY: `at..at + n` lies inside the mapping, `out` holds `n` bytes; disjoint.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(at), out.as_mut_ptr(), n) };
        }
    }

    /// The u64 word at byte `offset` (0 past the end), read in place.
    pub(super) fn word(&self, offset: usize) -> u64 {
        if offset.saturating_add(8) > self.len {
            return 0;
        }
        // SAFETY: the 8 bytes lie inside the mapping; an unaligned raw read, no reference.
        u64::from_le(unsafe { self.ptr.add(offset).cast::<u64>().read_unaligned() })
    }

    /// [`protocol::checksum`] of `len` bytes at `offset`, read in place (past the arena: as if
    /// zero-filled, like [`read`](Self::read)).
    pub(super) fn checksum(&self, offset: usize, len: usize) -> u64 {
        let words = len / 8;
        let inside = self.len.saturating_sub(offset) / 8;
        let mut h = protocol::FNV_OFFSET;
        for i in 0..words {
            let w = if i < inside {
                // SAFETY: word `i` lies inside the mapping; an unaligned raw read, no reference.
                unsafe { self.ptr.add(offset + 8 * i).cast::<u64>().read_unaligned() }
            } else {
                0
            };
            h = (h ^ u64::from_le(w)).wrapping_mul(protocol::FNV_PRIME);
        }
        h
    }

    /// A copy of the first `len` bytes (zero-filled past the arena).
    pub(super) fn read(&self, len: usize) -> Vec<u8> {
        let n = len.min(self.len);
        let mut out = Vec::with_capacity(len);
        // SAFETY: `n` bytes fit both the mapping and the capacity of `out`, which are disjoint;
        // after the copy the first `n` bytes are initialised.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr, out.as_mut_ptr(), n);
            out.set_len(n);
        }
        out.resize(len, 0);
        out
    }
}

impl Drop for SharedArena {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The parts of `0..len` outside the ranges of `skip` (sorted by start, disjoint).
pub(super) fn kept(len: usize, skip: &[(usize, usize)]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut at = 0;
    skip.iter().map(move |&(lo, hi)| (lo.min(len), hi.min(len))).chain(std::iter::once((len, len))).filter_map(
        move |(lo, hi)| {
            let part = (at < lo).then_some((at, lo));
            at = at.max(hi);
            part
        },
    )
}

/// `resp_len` zeros in the allocation of `spare`, whose bytes outside the ranges `dirty` are
/// zero (`None`: any byte may be nonzero): only those ranges are zeroed again. The capacity
/// grows to `room` at once when it must grow: growing by steps would move the bytes to fresh
/// pages each time.
pub(super) fn zeroed_again(
    mut spare: Vec<u8>,
    dirty: Option<&[(usize, usize)]>,
    resp_len: usize,
    room: usize,
) -> Vec<u8> {
    match dirty {
        Some(ranges) => {
            let n = spare.len();
            for &(lo, hi) in ranges {
                spare[lo.min(n)..hi.min(n)].fill(0);
            }
        }
        None => spare.clear(),
    }
    if spare.capacity() < resp_len {
        spare.reserve_exact(room.max(resp_len) - spare.len());
    }
    spare.resize(resp_len, 0);
    spare
}

/// The guard pages of a payload's protection table (`prot` 0) as byte offsets into the arena,
/// sorted, into `out` (emptied first): what [`SharedArena::write_sparse`] and
/// [`SharedArena::read_sparse`] skip.
pub(super) fn guard_ranges(out: &mut Vec<(usize, usize)>, payload: &[u8], arena_addr: u64) {
    out.clear();
    out.extend(
        crate::batch::protection_entries(payload, arena_addr)
            .filter(|p| p.prot == 0 && p.addr >= arena_addr)
            .filter_map(|p| {
                let lo = usize::try_from(p.addr - arena_addr).ok()?;
                Some((lo, lo.checked_add(usize::try_from(p.len).ok()?)?))
            }),
    );
    out.sort_unstable();
}

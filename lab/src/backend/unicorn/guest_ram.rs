//! Host memory the Unicorn backend lends the engine as the RAM behind `lab_arena`
//! (`uc_mem_map_ptr`), so the lab writes a batch and reads its results with plain copies and
//! the MMIO alias's callbacks reach the bytes directly: each `uc_mem_read`/`uc_mem_write`
//! walks QEMU's flat view of the address space (`flatview_translate`, `phys_page_find`), which
//! was ~10% of a Unicorn run when every checked access of a kernel paid it.
//!
//! The engine writes the same memory while it runs, so no Rust reference into it outlives a
//! call here: every access is a raw copy, made on the engine's own thread while it is stopped
//! or from inside one of its callbacks.

use std::ptr::NonNull;

/// Anonymous, page-aligned, zero-filled host memory of a fixed length (`mmap`), unmapped on
/// drop. Pages the guest never touches are never backed.
#[derive(Debug)]
pub(crate) struct GuestRam {
    ptr: NonNull<u8>,
    len: usize,
}

impl GuestRam {
    /// Maps `len` bytes (a multiple of the host page size).
    ///
    /// # Errors
    /// The `mmap` error.
    pub fn new(len: usize) -> Result<Self, String> {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: an anonymous mapping at an address the kernel picks; the result is checked.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, rw, flags, -1, 0) };
        if ptr == libc::MAP_FAILED {
            return Err(format!("mmap of {len} bytes for lab_arena: {}", std::io::Error::last_os_error()));
        }
        NonNull::new(ptr.cast()).map(|ptr| GuestRam { ptr, len }).ok_or_else(|| "mmap returned null".to_string())
    }

    /// The start of the memory, for `uc_mem_map_ptr`.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Copies `bytes` to `offset`; the part past the end is dropped.
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        let n = bytes.len().min(self.len.saturating_sub(offset));
        // SAFETY: `offset + n <= len`; `bytes` is host memory outside the mapping.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.as_ptr().add(offset), n) };
    }

    /// Copies bytes from `offset` into `out`; the part past the end is zero-filled.
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        let n = out.len().min(self.len.saturating_sub(offset));
        // SAFETY: `offset + n <= len`; `out` is host memory outside the mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), out.as_mut_ptr(), n) };
        out[n..].fill(0);
    }

    /// The little-endian value of the `size` bytes (1, 2, 4 or 8) at `offset`, zero-extended;
    /// bytes past the end read as zero. The MMIO callbacks' access: a fixed-size load, not a
    /// `memcpy` of a variable length plus a fill (~10% of an aarch64 fuzz run).
    pub fn read_le(&self, offset: usize, size: usize) -> u64 {
        if offset.checked_add(size).is_none_or(|end| end > self.len) {
            let mut bytes = [0u8; 8];
            self.read(offset, &mut bytes[..size.min(8)]);
            return u64::from_le_bytes(bytes);
        }
        // SAFETY: `offset + size <= len`: inside the mapping; unaligned reads of plain integers.
        unsafe {
            let p = self.ptr.as_ptr().add(offset);
            match size {
                1 => u64::from(p.read()),
                2 => u64::from(u16::from_le(p.cast::<u16>().read_unaligned())),
                4 => u64::from(u32::from_le(p.cast::<u32>().read_unaligned())),
                8 => u64::from_le(p.cast::<u64>().read_unaligned()),
                _ => {
                    let mut bytes = [0u8; 8];
                    std::ptr::copy_nonoverlapping(p, bytes.as_mut_ptr(), size.min(8));
                    u64::from_le_bytes(bytes)
                }
            }
        }
    }

    /// Stores the low `size` bytes (1, 2, 4 or 8) of `value`, little-endian, at `offset`; the
    /// part past the end is dropped.
    pub fn write_le(&self, offset: usize, size: usize, value: u64) {
        let bytes = value.to_le_bytes();
        if offset.checked_add(size).is_none_or(|end| end > self.len) || size > 8 {
            self.write(offset, &bytes[..size.min(8)]);
            return;
        }
        // SAFETY: `offset + size <= len`: inside the mapping; unaligned writes of plain integers.
        unsafe {
            let p = self.ptr.as_ptr().add(offset);
            match size {
                1 => p.write(bytes[0]),
                2 => p.cast::<u16>().write_unaligned((value as u16).to_le()),
                4 => p.cast::<u32>().write_unaligned((value as u32).to_le()),
                8 => p.cast::<u64>().write_unaligned(value.to_le()),
                _ => std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, size),
            }
        }
    }

    /// A copy of `len` bytes from `offset` (zero-filled past the end), in the allocation of
    /// `spare`.
    pub fn read_vec(&self, offset: usize, len: usize, spare: Vec<u8>) -> Vec<u8> {
        let n = len.min(self.len.saturating_sub(offset));
        let mut out = spare;
        out.clear();
        out.reserve(len);
        // SAFETY: `offset + n <= len` and `n` fits the capacity of `out` (disjoint memory);
        // after the copy the first `n` bytes are initialised. Not `vec![0; len]`: a zeroed
        // allocation of a large response costs fresh pages and their faults before the copy.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), out.as_mut_ptr(), n);
            out.set_len(n);
        }
        out.resize(len, 0);
        out
    }
}

impl Drop for GuestRam {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; the engine that used it is dropped
        // before (the backend keeps the engine in a field declared first).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_in_and_out_and_clamps_at_the_end() {
        let ram = GuestRam::new(8192).unwrap();
        assert_eq!(ram.read_vec(0, 4, Vec::new()), vec![0; 4], "fresh memory is zero");
        ram.write(8190, &[1, 2, 3, 4]);
        assert_eq!(ram.read_vec(8188, 6, vec![5; 9]), vec![0, 0, 1, 2, 0, 0], "past the end: dropped, read as zero");
        ram.write(5, &[9; 3]);
        assert_eq!(ram.read_le(4, 4), 0x0909_0900);
        assert_eq!(ram.read_le(5, 2), 0x0909);
        assert_eq!(ram.read_le(8190, 8), 0x0201, "past the end: zero");
        ram.write_le(16, 8, 0x1122_3344_5566_7788);
        ram.write_le(17, 2, 0xaabb);
        assert_eq!(ram.read_le(16, 8), 0x1122_3344_55aa_bb88);
        ram.write_le(8191, 4, 0xffff_ff77);
        assert_eq!(ram.read_le(8190, 2), 0x7701, "the part past the end is dropped");
        let mut out = [0u8; 4];
        ram.read(4, &mut out);
        assert_eq!(out, [0, 9, 9, 9]);
    }
}

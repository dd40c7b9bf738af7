//! The guest's mappings of the ranges the host checks, through `PROCMAP_QUERY`: an ioctl on
//! `/proc/<pid>/maps` (Linux 6.11, `include/uapi/linux/fs.h`) that answers one mapping per call
//! as binary words, with no text: no path printed (the memfd's name cost as much as the rest of
//! a line) and nothing parsed. The host asks only for the mappings of the arena and the kernels'
//! data, from their first address on, so a qemu-user guest's own mappings are never visited.
//! The arena's mappings are still all read: every one can hold a lifted protection.
//!
//! Older kernels answer ENOTTY; host_check.rs then reads the text of `/proc/<pid>/maps`.

use std::fs::File;
use std::os::fd::AsRawFd;

use super::host_check::Vma;

/// `struct procmap_query` (include/uapi/linux/fs.h), the fields in the kernel's order.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

const QUERY_SIZE: usize = std::mem::size_of::<ProcmapQuery>();
const _: () = assert!(QUERY_SIZE == 104, "struct procmap_query is 104 bytes");

/// `_IOWR('f', 17, struct procmap_query)`: direction 3 (read and write) in bits 30-31, the size
/// in bits 16-29, the type `'f'` (`PROCFS_IOCTL_MAGIC`) in bits 8-15, the number 17.
const PROCMAP_QUERY: u64 = (3 << 30) | ((QUERY_SIZE as u64) << 16) | ((b'f' as u64) << 8) | 17;

/// `enum procmap_query_flags`: the mapping's permissions (out) and what to look for (in).
const VMA_READABLE: u64 = 0x01;
const VMA_WRITABLE: u64 = 0x02;
const COVERING_OR_NEXT_VMA: u64 = 0x10;
const FILE_BACKED_VMA: u64 = 0x20;

/// The file (device and inode) whose mappings are the arena: the lab's memfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileId {
    pub dev: (u32, u32),
    pub ino: u64,
}

impl FileId {
    /// The device and inode of `fd`.
    pub(super) fn of(fd: &impl std::os::fd::AsFd) -> Option<FileId> {
        let st = rustix::fs::fstat(fd).ok()?;
        let dev = st.st_dev;
        Some(FileId { dev: (rustix::fs::major(dev), rustix::fs::minor(dev)), ino: st.st_ino })
    }
}

/// An open `/proc/<pid>/maps` to query.
pub(super) struct Maps(File);

/// Why a query failed: the kernel has no `PROCMAP_QUERY` (read the text instead), or another
/// error (the process is gone).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum QueryError {
    Unsupported,
    Failed,
}

impl Maps {
    /// Opens the maps file of `pid`; `None` when it cannot be opened (the process is gone).
    pub(super) fn open(pid: u32) -> Option<Maps> {
        File::open(format!("/proc/{pid}/maps")).ok().map(Maps)
    }

    /// The mapping covering `addr`, or the next one above it, with `flags` added to the query;
    /// `Ok(None)` when there is none.
    fn query(&self, addr: u64, flags: u64) -> Result<Option<ProcmapQuery>, QueryError> {
        let mut q = ProcmapQuery {
            size: QUERY_SIZE as u64,
            query_flags: COVERING_OR_NEXT_VMA | flags,
            query_addr: addr,
            ..ProcmapQuery::default()
        };
        // SAFETY: PROCMAP_QUERY reads and writes one `struct procmap_query` of `size` bytes;
        // no name or build id is asked for (their sizes are 0), so no other memory is written.
        let r = unsafe { libc::ioctl(self.0.as_raw_fd(), PROCMAP_QUERY as _, &mut q as *mut ProcmapQuery) };
        if r == 0 {
            return Ok(Some(q));
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            Some(libc::ENOTTY | libc::EINVAL) => Err(QueryError::Unsupported),
            _ => Err(QueryError::Failed),
        }
    }

    /// Host address minus file offset of the first mapping of `file` (the arena memfd: its
    /// offset 0 would be mapped there), walking the file-backed mappings from address 0 (under
    /// qemu-user the image's few come first); `Ok(None)` when `file` is not mapped.
    ///
    /// # Errors
    /// As the query.
    pub(super) fn file_origin(&self, file: FileId) -> Result<Option<u64>, QueryError> {
        let mut addr = 0;
        while let Some(q) = self.query(addr, FILE_BACKED_VMA)? {
            if q.inode == file.ino && (q.dev_major, q.dev_minor) == file.dev {
                return Ok(Some(q.vma_start.wrapping_sub(q.vma_offset)));
            }
            addr = q.vma_end;
        }
        Ok(None)
    }

    /// Every mapping that overlaps host addresses `[lo, hi)`, in address order; `arena` marks
    /// those of `file`.
    ///
    /// # Errors
    /// As the query.
    pub(super) fn overlapping(&self, lo: u64, hi: u64, file: FileId) -> Result<Vec<Vma>, QueryError> {
        let mut out = Vec::new();
        let mut addr = lo;
        while addr < hi {
            let Some(q) = self.query(addr, 0)? else { break };
            if q.vma_start >= hi {
                break;
            }
            out.push(Vma {
                lo: q.vma_start,
                hi: q.vma_end,
                read: q.vma_flags & VMA_READABLE != 0,
                write: q.vma_flags & VMA_WRITABLE != 0,
                offset: q.vma_offset,
                arena: q.inode == file.ino && (q.dev_major, q.dev_minor) == file.dev,
            });
            addr = q.vma_end;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own mappings of a memfd: one read-only page between two read-write ones
    /// reads as three mappings of the file at their offsets, and the origin is the first's.
    #[test]
    fn a_memfd_mapping_reads_back_page_by_page() {
        use rustix::fs::MemfdFlags;
        let fd = rustix::fs::memfd_create(c"vma_query_test", MemfdFlags::CLOEXEC).expect("memfd");
        rustix::fs::ftruncate(&fd, 3 * 4096).expect("ftruncate");
        let file = FileId::of(&fd).expect("fstat");
        // SAFETY: a fresh shared mapping of our own memfd, unmapped below.
        let ptr = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                3 * 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            assert_eq!(libc::mprotect(p.cast::<u8>().add(4096).cast(), 4096, libc::PROT_READ), 0);
            p as u64
        };
        let maps = Maps::open(std::process::id()).expect("maps");
        match maps.overlapping(ptr, ptr + 3 * 4096, file) {
            Err(QueryError::Unsupported) => {} // a kernel before 6.11: the text is read instead
            got => {
                let got = got.expect("query");
                let rw: Vec<(u64, u64, bool, bool, u64, bool)> =
                    got.iter().map(|v| (v.lo - ptr, v.hi - ptr, v.read, v.write, v.offset, v.arena)).collect();
                assert_eq!(
                    rw,
                    vec![
                        (0, 4096, true, true, 0, true),
                        (4096, 8192, true, false, 4096, true),
                        (8192, 12288, true, true, 8192, true)
                    ]
                );
                assert_eq!(maps.file_origin(file), Ok(Some(ptr)));
                // Another memfd of the same name (a guest's own "lab_arena") is not the file.
                let other = rustix::fs::memfd_create(c"vma_query_test", MemfdFlags::CLOEXEC).expect("memfd");
                let other = FileId::of(&other).expect("fstat");
                assert_ne!(other, file);
                assert!(maps.overlapping(ptr, ptr + 4096, other).expect("query").iter().all(|v| !v.arena));
            }
        }
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(ptr as *mut libc::c_void, 3 * 4096) };
    }
}

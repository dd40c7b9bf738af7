//! The engine's memory map: the image's segments as page runs, the arena on the lab's own RAM,
//! and the arena's MMIO alias through which the pages near buffer edges are checked byte by byte.

use super::*;

/// Page ranges of all segments with the union of their rights, merged where they touch, and
/// the rights of the arena's pages `arena` (left out of the ranges: they are mapped on
/// [`GuestRam`]), which must be alike.
pub(super) fn page_map_around(
    image: &Image,
    arena: &std::ops::Range<u64>,
) -> Result<(Vec<PageRun>, Prot), BackendError> {
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
pub(super) fn arena_dirty_pages(image: &Image, arena: Arena) -> Vec<Span> {
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
pub(super) type PageRun = (u64, u64, Prot);

/// Page ranges of all segments with the union of their rights, merged where they touch.
pub(super) fn page_map(image: &Image) -> Vec<PageRun> {
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
    /// Maps the arena's MMIO alias at `arena.addr + ALIAS_OFFSET`: each access is done on the
    /// arena itself; one that touches bytes outside the allowed range of its exact page is not
    /// done, is recorded as a suspect and stops the run.
    ///
    /// The callbacks reach the bytes in `ram` (the arena at its offset) directly, not through
    /// `uc_mem_read`/`uc_mem_write`, except for a write after the guest fetched code from the
    /// arena, which goes through the engine so that stale translations are dropped.
    pub(super) fn map_alias(
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
            // fragments, so a suspect read may be a legal load whose value the run needs.
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
}

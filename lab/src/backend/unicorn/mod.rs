//! The Unicorn backend: maps the image's segments into a Unicorn 2.1.5 engine, writes the batch
//! into `lab_arena`, and runs `lab_batch` until it returns to `lab_batch_return`, where the
//! driver's request loop has it return in a process (never run here).
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
//! unaligned load to MMIO as aligned fragments, so a fragment that touches a byte outside a buffer
//! proves nothing when it also touches the buffer: the first run of a batch notes such reads
//! and goes on, then each call that made one runs again alone with memory hooks at the
//! buffer's edges, which see loads whole with their pc (`run_first`); a batch that turns out
//! to break a bound runs again, stopping at it. A block hook
//! counts instructions per call (reset whenever `lab_batch` runs) against the instruction
//! budget and keeps a wall-clock bound per run ([`Limits::batch_time`], `--batch-seconds`, as for
//! qemu and native: a call slow per instruction hangs under its budget); an x86
//! `syscall`/`sysenter` hook and the interrupt hook catch system calls. Calls stop before an
//! instruction Unicorn cannot execute ([`UnicornBackend::stop_at_unsupported`]).
//!
//! For `lab bench`: Zbb emulation on the illegal-instruction exception ([`zbb`]), and an
//! execution profile of a code range from a block hook ([`super::icount`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use unicorn_engine::{uc_error, HookType, MemType, Prot, TlbEntry, TlbType, Unicorn};

use super::icount::{BlockIcounts, BlockProfile};
use super::process::prot_delta::{stamp_header, InForce};
use super::recycled::Recycler;
use super::{Access, Backend, BackendError, BackendKind, Fault, FaultKind, Limits, RawRun};
use crate::align::{self, SiteCheck};
use crate::arch::{Arch, ReturnAddress, Trap, TrapPc, UnicornSupport};
use crate::batch::{self, Batch, Protection, PROT_WRITE};
use crate::image::{Arena, Image};
use crate::protocol;
use guest_ram::GuestRam;

mod confirm;
mod driver_words;
mod faults;
mod guest_ram;
mod hook_state;
mod hooks;
mod pages;
pub mod zbb;

use confirm::{Confirm, UNREPEATED};
use driver_words::DriverWords;
use hook_state::{AlignStop, Fragment, HookState, Seen, Span, ALIGN_HOOK};
use pages::{arena_dirty_pages, page_map_around};

const PAGE: u64 = batch::PAGE;

/// Distance of the arena's MMIO alias from the arena in Unicorn's physical address space:
/// above every image the lab links and inside the physical address width of every target
/// (QEMU: riscv64 56 bits, aarch64 48, x86_64 52).
const ALIAS_OFFSET: u64 = 1 << 36;

/// Distance of the patched copies of code pages ([`zbb::ZbbPatches`]) from the pages: above the
/// arena's alias, inside riscv64's 56-bit physical address width.
const CODE_ALIAS_OFFSET: u64 = 2 << 36;

/// How far before a buffer's end an access may start and still reach past it: the largest
/// access a memory hook is called with (QEMU 5's `MemOp` sizes, `MO_SIZE` = 3: 1 to 8 bytes;
/// wider guest loads and stores are made of 8-byte accesses).
const HOOK_REACH: u64 = 8;

/// How far from a buffer's edge an access that explains a noted fragment may start: a fragment is
/// at most 8 bytes on the aligned 8 bytes around the edge, and the access that made it at most
/// 8 bytes ([`HOOK_REACH`]) overlapping it.
const EXPLAIN_REACH: u64 = 2 * HOOK_REACH;

/// Blocks between two looks at the clock for the wall-clock bound ([`Limits::batch_time`]): a
/// block is a few to a few hundred ns of guest code, so the bound is kept to within well under
/// a millisecond, and the clock (a vDSO call of ~20 ns) costs under 0.1% of a run.
pub(super) const DEADLINE_STRIDE: u64 = 1024;

/// RISC-V exception cause 2, "illegal instruction" (privileged spec, `mcause` table).
const RISCV_ILLEGAL_INSTRUCTION: u32 = 2;

/// Unicorn engine with the image mapped, reused across batches of one variant.
pub struct UnicornBackend {
    uc: Unicorn<'static, ()>,
    arch: Arch,
    arena: Arena,
    /// The RAM behind the arena's pages; the arena starts `ram_offset` bytes into it. Declared
    /// after `uc`, so the engine is dropped first.
    ram: Rc<GuestRam>,
    ram_offset: usize,
    /// Responses given back ([`Backend::recycle`]), whose allocations the next ones reuse.
    recycler: RefCell<Recycler>,
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
    /// Whether the instruction budget's block hook runs (it also keeps the wall-clock bound).
    budget_hook: bool,
    /// The running profile and its block hook, between `start_profile` and `take_profile`.
    profile: Rc<RefCell<Option<BlockProfile>>>,
    profile_hook: Option<unicorn_engine::UcHookId>,
    /// Calls of the running batch whose confirmation after its first run proved a fault (a
    /// memory hook saw an access outside a buffer, or the re-run explained none of a noted
    /// fragment), with the fault: each fails with it whatever later runs of the call do
    /// ([`apply_proven`](Self::apply_proven)).
    proven: std::collections::BTreeMap<u64, Fault>,
    /// The kernel instructions a call stops at ([`stop_at_unsupported`](Self::stop_at_unsupported)).
    stops: Vec<crate::isa::UnicornStop>,
    /// The protection table last stamped into the header, as a process guest would hold it,
    /// and the delta entries' allocation ([`stamp`](Self::stamp)).
    in_force: (InForce, Vec<Protection>),
    /// The driver's private words a process guest holds at each request ([`DriverWords`]).
    words: DriverWords,
}

fn uc_err(step: &str) -> impl Fn(uc_error) -> BackendError + '_ {
    move |e| BackendError::Unicorn(format!("{step}: {e:?}"))
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
        for &(reg, value, what) in spec.init {
            uc.reg_write(reg, value).map_err(uc_err(what))?;
        }
        let dirty = (ram_offset == 0).then(|| arena_dirty_pages(image, arena));
        let state = Rc::new(RefCell::new(HookState {
            arena_pages,
            arena_exec: arena_prot.0 & Prot::EXEC.0 != 0,
            dirty,
            partial_policy: limits.partial_loads,
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
            recycler: RefCell::new(Recycler::default()),
            entry: driver.addr,
            halt: {
                // The driver's own halt word stays part of the image contract (kernels/README.md).
                image.require("lab_unicorn_halt")?;
                // Where the driver's request loop calls lab_batch returns to: the top word of the
                // driver's stack is then what it is in a process (issue 28, a kernel must not
                // tell Unicorn apart by it). The byte before it, which Unicorn drops from its
                // translations after every run, is `_start`'s, never run here.
                image.require("lab_batch_return")?.addr
            },
            stack_top: image.require("lab_stack_top")?.addr,
            limits,
            uc_page: u64::from(uc_page_size),
            state,
            zbb,
            zbb_block_hook: limits.call_instructions != u64::MAX,
            budget_hook: limits.call_instructions != u64::MAX,
            profile: Rc::new(RefCell::new(None)),
            profile_hook: None,
            proven: std::collections::BTreeMap::new(),
            stops: Vec::new(),
            in_force: (InForce::default(), Vec::new()),
            words: DriverWords::new(
                image,
                (protocol::entry::FIXED_WORDS + crate::abi::Abi::of(image.arch).saved.len()) * 8,
            )?,
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
        // The wall-clock bound: the budget's block hook looks at the clock (add_hooks); without
        // that hook (`lab bench`'s timed runs turn it off) Unicorn's own timeout does, at the
        // cost of a timer thread per run (uc.c `_timeout_fn`), and must be asked for.
        let bound = self.limits.batch_time;
        self.state.borrow_mut().deadline = (!bound.is_zero()).then(|| std::time::Instant::now() + bound);
        let timeout = if self.budget_hook || bound.is_zero() { 0 } else { bound.as_micros() as u64 };
        let result = self.uc.emu_start(self.entry, self.halt, timeout, 0);
        if timeout != 0 && self.uc.query(unicorn_engine::Query::TIMEOUT).unwrap_or(0) != 0 {
            let pc = self.pc();
            self.state.borrow_mut().seen.hang.get_or_insert(pc);
        }
        self.state.borrow_mut().forget_written_pages();
        Ok((result, self.pc()))
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

    /// Sets the stack and the return address so that `lab_batch` returns to `lab_batch_return`,
    /// and the callee-saved registers to zero, as the request loop calls it (issue 28).
    fn set_entry_registers(&mut self) -> Result<(), BackendError> {
        let e = uc_err("registers");
        let sp = self.stack_top & !15;
        let spec = &self.arch.spec().unicorn;
        for &reg in spec.callee_saved {
            self.uc.reg_write(reg, 0).map_err(&e)?;
        }
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
    /// data and of what may not be zero in the arena (`HookState::dirty`). The arena then
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
        self.stamp(payload, 0)?;
        self.load_protections(payload);
        self.proven.clear();
        self.run_first(payload, batch.resp_len)
    }

    fn execute(&mut self, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
        if payload.len() as u64 > self.arena.size {
            return Err(BackendError::Unicorn(format!("write batch: {} bytes do not fit lab_arena", payload.len())));
        }
        self.write_arena(payload)?;
        self.stamp(payload, 0)?;
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
        self.stamp(&batch.payload, start)?;
        let mut run = self.run_loaded(batch.resp_len, batch::HEADER_WORDS * 8)?;
        self.apply_proven(&mut run);
        Ok(run)
    }

    fn response(&mut self, resp_len: usize) -> Result<Vec<u8>, BackendError> {
        self.read_arena(resp_len)
    }

    fn take_partial_loads(&mut self) -> Vec<crate::backend::PartialLoad> {
        let mut partial = std::mem::take(&mut self.state.borrow_mut().partial);
        partial.sort_unstable_by_key(|p| (p.call, p.pc, p.addr));
        partial.dedup();
        partial
    }

    fn recycle(&mut self, resp: Vec<u8>) {
        self.recycler.get_mut().give_back(resp);
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

    /// Writes the header's protection words (`prot_id`, `prot_base`, `delta_count`) and the
    /// delta entries for `payload` as the host stamps them for a qemu-user or native guest
    /// ([`stamp_header`]; the engine applies the table itself and reads none of them), then the
    /// driver's private words of a request for `payload` from call `start` on
    /// ([`DriverWords`]): a kernel reads the same header and driver on every backend (issue 28).
    fn stamp(&mut self, payload: &[u8], start: usize) -> Result<(), BackendError> {
        self.stamp_header(payload);
        let prot_id = self.header(protocol::header::PROT_ID)?;
        self.words.write(&mut self.uc, payload, self.arena.addr, start, prot_id)
    }

    fn stamp_header(&mut self, payload: &[u8]) {
        let (in_force, out) = &mut self.in_force;
        let (ram, ram_offset) = (&self.ram, self.ram_offset);
        let mut st = self.state.borrow_mut();
        let mut dirty = st.dirty.as_mut();
        let arena = (self.arena.addr, self.arena.size);
        stamp_header(in_force, out, payload, arena, |at, v| {
            ram.write(ram_offset + at, &v.to_le_bytes());
            let page = at / PAGE as usize;
            if let Some(d) = dirty.as_mut().and_then(|d| d.get_mut(page)) {
                let on = Span::on_page((page * PAGE as usize) as u64, at as u64, at as u64 + 8);
                *d = d.union(on);
            }
        });
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
        let mut recycler = self.recycler.borrow_mut();
        let st = self.state.borrow();
        let Some(dirty) = st.dirty.as_ref() else {
            return Ok(self.ram.read_vec(self.ram_offset, len, recycler.take_spare()));
        };
        let (mut out, mut copied) = recycler.zeroed(len, len);
        let page = PAGE as usize;
        for (p, d) in dirty.iter().enumerate().take(len.div_ceil(page)) {
            let (lo, hi) = ((p * page + d.lo as usize).min(len), (p * page + d.hi as usize).min(len));
            if lo < hi {
                self.ram.read(self.ram_offset + lo, &mut out[lo..hi]);
                copied.push((lo, hi));
            }
        }
        recycler.lend(&out, copied);
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
                if st.seen.align.is_some() || st.seen.unsupported.is_some() {
                    break;
                }
                (st.refused, st.seen.suspect)
            };
            if let Some(page) = refused {
                pc = self.pin_down(page)?.unwrap_or(pc);
                break;
            }
            let Some(fragment) = suspect else { break };
            match self.confirm(fragment)? {
                Confirm::Pinned => {
                    pc = self.state.borrow().seen.pinned.unwrap_or(pc);
                    break;
                }
                // The call made it in the batch's run, not when run again: that is its fault.
                Confirm::Unrepeated(p) => {
                    let mem = self.unrepeated(p, fragment.write);
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

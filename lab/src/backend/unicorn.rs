//! The Unicorn backend: maps the image's segments into a Unicorn 2.1.5 engine, writes the batch
//! into `lab_arena`, and runs `lab_batch` until it returns to `lab_unicorn_halt`.
//!
//! Facts it relies on (DESIGN.md "Backend facts", measured): an illegal RISC-V instruction
//! reaches the interrupt hook as `intno = 2` with `pc = fault + 4`; a timeout still returns
//! `Ok` from `emu_start` and must be asked for with `query(TIMEOUT)`; the handle is `Rc`-based,
//! so one engine lives on one thread.
//!
//! Checks beyond the CPU's own faults: every load and store inside `lab_arena` is checked
//! against the batch's protection table (guard pages, read-only inputs), as `mprotect` does for
//! qemu and native, but with a memory hook instead of splitting Unicorn's regions; a block hook
//! counts instructions per call (reset whenever `lab_batch` runs) against the instruction
//! budget; an x86 `syscall`/`sysenter` hook and the interrupt hook catch system calls.

use std::cell::RefCell;
use std::rc::Rc;

use unicorn_engine::{
    uc_error, Arch as UcArch, HookType, MemType, Mode, Prot, Query, RegisterARM64, RegisterRISCV, RegisterX86, Unicorn,
    X86Insn,
};

use super::icount::BlockCounts;
use super::{Access, Backend, BackendError, BackendKind, Fault, FaultKind, Limits, RawRun};
use crate::batch::{self, Batch, Protection, PROT_WRITE};
use crate::image::{Arena, Image};
use crate::variant::Arch;

const PAGE: u64 = 4096;

/// What the hooks saw during one `emu_start`.
#[derive(Debug, Default, Clone)]
struct Seen {
    intno: Option<u32>,
    mem: Option<(Access, u64)>,
    /// A protection-table violation: access, first bad byte, pc of the instruction.
    guard: Option<(Access, u64, u64)>,
    /// The instruction budget ran out in the block at this address.
    budget: Option<u64>,
    /// An x86 `syscall`/`sysenter` at this pc.
    syscall: Option<u64>,
}

/// Hook state: what was seen, the protection table of the running batch, the per-call count.
#[derive(Debug, Default)]
struct HookState {
    seen: Seen,
    prots: Vec<Protection>,
    executed: u64,
    blocks: BlockCounts,
}

/// The first byte of `[addr, addr + size)` that `prots` forbids for `access`, if any.
fn violation(prots: &[Protection], access: Access, addr: u64, size: u64) -> Option<u64> {
    // Ranges are sorted and disjoint: look at the one holding the first byte and its successor.
    let i = prots.partition_point(|p| p.addr + p.len <= addr);
    prots[i..]
        .iter()
        .take_while(|p| p.addr < addr + size)
        .find(|p| p.prot == 0 || (access == Access::Write && p.prot & PROT_WRITE == 0))
        .map(|p| p.addr.max(addr))
}

/// Unicorn engine with the image mapped, reused across batches of one variant.
pub struct UnicornBackend {
    uc: Unicorn<'static, ()>,
    arch: Arch,
    arena: Arena,
    entry: u64,
    halt: u64,
    stack_top: u64,
    limits: Limits,
    state: Rc<RefCell<HookState>>,
}

fn uc_err(step: &str) -> impl Fn(uc_error) -> BackendError + '_ {
    move |e| BackendError::Unicorn(format!("{step}: {e:?}"))
}

/// Page ranges of all segments with the union of their rights, merged where they touch.
fn page_map(image: &Image) -> Vec<(u64, u64, Prot)> {
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
        let (arch, mode) = match image.arch {
            Arch::Riscv64 => (UcArch::RISCV, Mode::RISCV64),
            Arch::Aarch64 => (UcArch::ARM64, Mode::LITTLE_ENDIAN),
            Arch::X86_64 => (UcArch::X86, Mode::MODE_64),
        };
        let mut uc = Unicorn::new(arch, mode).map_err(uc_err("engine"))?;
        for (addr, len, prot) in page_map(image) {
            uc.mem_map(addr, len, prot).map_err(uc_err("map segment"))?;
        }
        for s in &image.segments {
            uc.mem_write(s.vaddr, &s.data).map_err(uc_err("load segment"))?;
        }
        if image.arch == Arch::Riscv64 {
            // mstatus.FS = Dirty: the driver saves fs0-fs11, and with FS = Off every FP
            // instruction is illegal (RISC-V privileged spec, "Extension Context Status").
            uc.reg_write(RegisterRISCV::MSTATUS, 0x6000).map_err(uc_err("mstatus"))?;
        }
        let state = Rc::new(RefCell::new(HookState::default()));
        let arena = image.arena()?;
        let driver = image.require("lab_batch")?;
        Self::add_hooks(&mut uc, image.arch, &state, arena, driver.addr..driver.addr + driver.size.max(1), &limits)?;
        Ok(UnicornBackend {
            uc,
            arch: image.arch,
            arena,
            entry: driver.addr,
            halt: image.require("lab_unicorn_halt")?.addr,
            stack_top: image.require("lab_stack_top")?.addr,
            limits,
            state,
        })
    }

    /// Interrupts, unmapped memory, the protection table, the instruction budget, x86 syscalls.
    fn add_hooks(
        uc: &mut Unicorn<'static, ()>,
        arch: Arch,
        state: &Rc<RefCell<HookState>>,
        arena: crate::image::Arena,
        driver: std::ops::Range<u64>,
        limits: &Limits,
    ) -> Result<(), BackendError> {
        let s = Rc::clone(state);
        uc.add_intr_hook(move |uc, intno| {
            s.borrow_mut().seen.intno = Some(intno);
            let _ = uc.emu_stop();
        })
        .map_err(uc_err("interrupt hook"))?;
        let s = Rc::clone(state);
        uc.add_mem_hook(HookType::MEM_INVALID, 1, 0, move |_, ty, addr, _, _| {
            let access = match ty {
                MemType::WRITE_UNMAPPED | MemType::WRITE_PROT => Access::Write,
                MemType::FETCH_UNMAPPED | MemType::FETCH_PROT => Access::Fetch,
                _ => Access::Read,
            };
            s.borrow_mut().seen.mem = Some((access, addr));
            false
        })
        .map_err(uc_err("memory hook"))?;
        let s = Rc::clone(state);
        let arena_end = arena.addr + arena.size - 1;
        uc.add_mem_hook(
            HookType::MEM_READ | HookType::MEM_WRITE,
            arena.addr,
            arena_end,
            move |uc, ty, addr, size, _| {
                let access = if ty == MemType::WRITE { Access::Write } else { Access::Read };
                let mut st = s.borrow_mut();
                if st.seen.guard.is_none() {
                    if let Some(bad) = violation(&st.prots, access, addr, size as u64) {
                        st.seen.guard = Some((access, bad, uc.pc_read().unwrap_or(0)));
                        let _ = uc.emu_stop();
                    }
                }
                true
            },
        )
        .map_err(uc_err("protection hook"))?;
        let s = Rc::clone(state);
        let budget = limits.call_instructions;
        uc.add_block_hook(1, 0, move |uc, addr, size| {
            let mut st = s.borrow_mut();
            if driver.contains(&addr) {
                st.executed = 0; // between calls: the next kernel call starts a fresh count
                return;
            }
            let n = st.blocks.icount(uc, addr, size);
            st.executed += n;
            if st.executed > budget && st.seen.budget.is_none() {
                st.seen.budget = Some(addr);
                let _ = uc.emu_stop();
            }
        })
        .map_err(uc_err("block hook"))?;
        if arch == Arch::X86_64 {
            for insn in [X86Insn::SYSCALL, X86Insn::SYSENTER] {
                let s = Rc::clone(state);
                uc.add_insn_sys_hook(insn, 1, 0, move |uc| {
                    s.borrow_mut().seen.syscall = Some(uc.pc_read().unwrap_or(0));
                    let _ = uc.emu_stop();
                })
                .map_err(uc_err("syscall hook"))?;
            }
        }
        Ok(())
    }

    /// Sets the stack and the return address so that `lab_batch` returns to `lab_unicorn_halt`.
    fn set_entry_registers(&mut self) -> Result<(), BackendError> {
        let e = uc_err("registers");
        let sp = self.stack_top & !15;
        match self.arch {
            Arch::Riscv64 => {
                self.uc.reg_write(RegisterRISCV::SP, sp).map_err(&e)?;
                self.uc.reg_write(RegisterRISCV::RA, self.halt).map_err(&e)?;
            }
            Arch::Aarch64 => {
                self.uc.reg_write(RegisterARM64::SP, sp).map_err(&e)?;
                self.uc.reg_write(RegisterARM64::LR, self.halt).map_err(&e)?;
            }
            Arch::X86_64 => {
                // A `call` pushed the return address: rsp is 8 mod 16 at entry (SysV §3.2.2).
                let rsp = sp - 8;
                self.uc.mem_write(rsp, &self.halt.to_le_bytes()).map_err(&e)?;
                self.uc.reg_write(RegisterX86::RSP, rsp).map_err(&e)?;
            }
        }
        Ok(())
    }

    /// Turns the engine's stop into a fault, if it was one.
    fn classify(&self, result: Result<(), uc_error>, pc: u64) -> Option<(FaultKind, u64, String)> {
        let seen = self.state.borrow().seen.clone();
        if let Some((access, addr, at)) = seen.guard {
            let detail = String::new();
            return Some((FaultKind::Memory { access: Some(access), addr: Some(addr) }, at, detail));
        }
        if let Some(at) = seen.syscall {
            // The hook sees the pc of the `syscall`/`sysenter` itself (measured).
            return Some((FaultKind::SystemCall, at, String::new()));
        }
        if let Some(at) = seen.budget {
            return Some((FaultKind::InstructionBudget(self.limits.call_instructions), at, String::new()));
        }
        if let Some((access, addr)) = seen.mem {
            return Some((FaultKind::Memory { access: Some(access), addr: Some(addr) }, pc, String::new()));
        }
        if let Some(intno) = seen.intno {
            return Some(self.interrupt(intno, pc));
        }
        match result {
            Ok(()) if pc == self.halt => None,
            Ok(()) if self.uc.query(Query::TIMEOUT).unwrap_or(0) != 0 => {
                Some((FaultKind::Hang(self.limits.batch_time), pc, String::new()))
            }
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

    /// Interrupt numbers per QEMU target (`EXCP_*` / RISC-V `mcause`).
    fn interrupt(&self, intno: u32, pc: u64) -> (FaultKind, u64, String) {
        let detail = format!("interrupt {intno}");
        // RISC-V: the engine has taken the trap, so `pc` is past the instruction; mepc holds
        // the faulting instruction and mtval the bad address (privileged spec, "Machine Trap
        // Handling"; Unicorn 2.1.5 leaves mtval 0). Without mepc, fall back to pc - 4.
        let epc = || self.uc.reg_read(RegisterRISCV::MEPC).ok().filter(|&e| e != 0).unwrap_or(pc.wrapping_sub(4));
        match (self.arch, intno) {
            (Arch::Riscv64, 2) => (FaultKind::IllegalInstruction, epc(), detail),
            (Arch::Riscv64, 8 | 9 | 11) => (FaultKind::SystemCall, epc(), detail),
            (Arch::Riscv64, 3) => (FaultKind::Trap, epc(), detail),
            // Load (4) and store/AMO (6) address misaligned.
            (Arch::Riscv64, 4 | 6) => (
                FaultKind::Bus { addr: self.uc.reg_read(RegisterRISCV::MTVAL).ok().filter(|&a| a != 0) },
                epc(),
                detail,
            ),
            // AArch64: EXCP_UDEF = 1, EXCP_SWI = 2, EXCP_DATA_ABORT = 4 (here an alignment fault:
            // unmapped memory reaches the memory hook first; FAR_EL1 may hold the address), EXCP_BKPT = 7.
            (Arch::Aarch64, 1) => (FaultKind::IllegalInstruction, pc, detail),
            (Arch::Aarch64, 2) => (FaultKind::SystemCall, pc.wrapping_sub(4), detail),
            (Arch::Aarch64, 4) => {
                (FaultKind::Bus { addr: self.uc.reg_read(RegisterARM64::FAR_EL1).ok().filter(|&a| a != 0) }, pc, detail)
            }
            (Arch::Aarch64, 7) => (FaultKind::Trap, pc, detail),
            // x86: #UD = 6, #BP = 3, #DE = 0.
            (Arch::X86_64, 6) => (FaultKind::IllegalInstruction, pc, detail),
            (Arch::X86_64, 3) => (FaultKind::Trap, pc, detail),
            (Arch::X86_64, 0) => (FaultKind::Arithmetic, pc, detail),
            // `int 0x80`: the pc is past the 2-byte instruction.
            (Arch::X86_64, 0x80) => (FaultKind::SystemCall, pc.wrapping_sub(2), detail),
            _ => (FaultKind::Exception(intno), pc, detail),
        }
    }

    fn pc(&self) -> u64 {
        self.uc.pc_read().unwrap_or(0)
    }
}

impl Backend for UnicornBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Unicorn
    }

    fn execute(&mut self, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
        self.uc.mem_write(self.arena.addr, payload).map_err(uc_err("write batch"))?;
        self.set_entry_registers()?;
        {
            let mut st = self.state.borrow_mut();
            st.seen = Seen::default();
            st.executed = 0;
            st.prots = batch::protections(payload, self.arena.addr);
        }
        let timeout = u64::try_from(self.limits.batch_time.as_micros()).unwrap_or(u64::MAX);
        let result = self.uc.emu_start(self.entry, self.halt, timeout, 0);
        let pc = self.pc();
        let resp = self.uc.mem_read_as_vec(self.arena.addr, resp_len).map_err(uc_err("read results"))?;
        let fault = self.classify(result, pc).map(|(kind, pc, detail)| {
            let call = usize::try_from(Batch::current(&resp)).ok();
            Fault { kind, pc: Some(pc), call, detail }
        });
        Ok(RawRun { resp, fault })
    }
}

//! The Unicorn backend: maps the image's segments into a Unicorn 2.1.5 engine, writes the batch
//! into `lab_arena`, and runs `lab_batch` until it returns to `lab_unicorn_halt`.
//!
//! Facts it relies on (DESIGN.md "Backend facts", measured): an illegal RISC-V instruction
//! reaches the interrupt hook as `intno = 2` with `pc = fault + 4`; a timeout still returns
//! `Ok` from `emu_start` and must be asked for with `query(TIMEOUT)`; the handle is `Rc`-based,
//! so one engine lives on one thread.
//!
//! Two additions for `lab bench`: Zbb emulation on the illegal-instruction exception
//! ([`super::zbb`]), and an execution profile of a code range from a block hook
//! ([`super::icount`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use unicorn_engine::{
    uc_error, Arch as UcArch, HookType, MemType, Mode, Prot, Query, RegisterARM64, RegisterRISCV, RegisterX86, Unicorn,
};

use super::icount::BlockProfile;
use super::{zbb, Access, Backend, BackendError, BackendKind, Fault, FaultKind, Limits, RawRun};
use crate::batch::Batch;
use crate::image::{Arena, Image};
use crate::variant::Arch;

const PAGE: u64 = 4096;

/// RISC-V exception cause 2, "illegal instruction" (privileged spec, `mcause` table).
const RISCV_ILLEGAL_INSTRUCTION: u32 = 2;

/// What the hooks saw during one `emu_start`.
#[derive(Debug, Default, Clone)]
struct Seen {
    intno: Option<u32>,
    mem: Option<(Access, u64)>,
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
    seen: Rc<RefCell<Seen>>,
    /// Emulate Zbb on illegal-instruction exceptions (RISC-V images built with Zbb only).
    zbb: Rc<Cell<bool>>,
    /// The running profile and its block hook, between `start_profile` and `take_profile`.
    profile: Rc<RefCell<Option<BlockProfile>>>,
    profile_hook: Option<unicorn_engine::UcHookId>,
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
        let seen = Rc::new(RefCell::new(Seen::default()));
        let zbb = Rc::new(Cell::new(false));
        let s = Rc::clone(&seen);
        let z = Rc::clone(&zbb);
        let mut emulator = zbb::ZbbEmulator::default();
        uc.add_intr_hook(move |uc, intno| {
            // A Zbb instruction is executed here and the guest goes on at the next instruction;
            // anything else stops the run as before.
            if z.get() && intno == RISCV_ILLEGAL_INSTRUCTION && emulator.emulate(uc) {
                return;
            }
            s.borrow_mut().intno = Some(intno);
            let _ = uc.emu_stop();
        })
        .map_err(uc_err("interrupt hook"))?;
        let s = Rc::clone(&seen);
        uc.add_mem_hook(HookType::MEM_INVALID, 1, 0, move |_, ty, addr, _, _| {
            let access = match ty {
                MemType::WRITE_UNMAPPED | MemType::WRITE_PROT => Access::Write,
                MemType::FETCH_UNMAPPED | MemType::FETCH_PROT => Access::Fetch,
                _ => Access::Read,
            };
            s.borrow_mut().mem = Some((access, addr));
            false
        })
        .map_err(uc_err("memory hook"))?;
        Ok(UnicornBackend {
            uc,
            arch: image.arch,
            arena: image.arena()?,
            entry: image.require("lab_batch")?.addr,
            halt: image.require("lab_unicorn_halt")?.addr,
            stack_top: image.require("lab_stack_top")?.addr,
            limits,
            seen,
            zbb,
            profile: Rc::new(RefCell::new(None)),
            profile_hook: None,
        })
    }

    /// Turns Zbb emulation on or off (RISC-V only: Unicorn 2.1.5 decodes no Zbb). Off, a Zbb
    /// instruction is an illegal instruction, which is what a build without Zbb must see.
    pub fn emulate_zbb(&mut self, on: bool) {
        self.zbb.set(on && self.arch == Arch::Riscv64);
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
        let seen = self.seen.borrow().clone();
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
        match (self.arch, intno) {
            // RISC-V: illegal instruction is cause 2, reported with pc = fault + 4 (measured).
            (Arch::Riscv64, 2) => (FaultKind::IllegalInstruction, pc.wrapping_sub(4), detail),
            (Arch::Riscv64, 8 | 9 | 11) => (FaultKind::SystemCall, pc.wrapping_sub(4), detail),
            (Arch::Riscv64, 3) => (FaultKind::Trap, pc.wrapping_sub(4), detail),
            // AArch64: EXCP_UDEF = 1, EXCP_SWI = 2, EXCP_BKPT = 7.
            (Arch::Aarch64, 1) => (FaultKind::IllegalInstruction, pc, detail),
            (Arch::Aarch64, 2) => (FaultKind::SystemCall, pc.wrapping_sub(4), detail),
            (Arch::Aarch64, 7) => (FaultKind::Trap, pc, detail),
            // x86: #UD = 6, #BP = 3, #DE = 0.
            (Arch::X86_64, 6) => (FaultKind::IllegalInstruction, pc, detail),
            (Arch::X86_64, 3) => (FaultKind::Trap, pc, detail),
            (Arch::X86_64, 0) => (FaultKind::Arithmetic, pc, detail),
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
        *self.seen.borrow_mut() = Seen::default();
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

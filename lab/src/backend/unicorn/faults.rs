//! How a stopped engine becomes a fault: the CPU exception or interrupt, an early exit, the pc.

use super::*;

impl UnicornBackend {
    /// Turns the engine's stop into a fault, if it was one.
    pub(super) fn classify(&self, result: Result<(), uc_error>, pc: u64) -> Option<(FaultKind, u64, String)> {
        let seen = self.state.borrow().seen.clone();
        if let Some(at) = seen.unsupported {
            if let Some(stop) = self.stops.iter().find(|s| s.addr == at) {
                let kind = FaultKind::NotRunPast { insn: stop.insn.clone(), extension: stop.extension.clone() };
                return Some((kind, at, String::new()));
            }
        }
        match seen.align {
            Some(AlignStop::Sp { pc, sp }) => return Some((FaultKind::StackMisaligned { sp }, pc, ALIGN_HOOK.into())),
            Some(AlignStop::Operand { pc, addr, need }) => {
                return Some((FaultKind::Misaligned { addr, need }, pc, ALIGN_HOOK.into()))
            }
            None => {}
        }
        if let Some(at) = seen.syscall {
            // The hook sees the pc of the `syscall`/`sysenter` itself (measured).
            return Some((FaultKind::SystemCall { nr: None, name: None }, at, String::new()));
        }
        if let Some(at) = seen.hang {
            let detail = "Unicorn's wall-clock bound per run of the batch (--batch-seconds)".to_string();
            return Some((FaultKind::Hang(self.limits.batch_time), at, detail));
        }
        if let Some(at) = seen.budget {
            let budget = self.state.borrow().budget;
            return Some((FaultKind::InstructionBudget(budget), at, String::new()));
        }
        if let Some((access, mut addr)) = seen.mem {
            if seen.unrepeated {
                return Some((FaultKind::Memory { access: Some(access), addr: Some(addr) }, pc, UNREPEATED.into()));
            }
            // A refused code fetch reaches the TLB hook with its page's address; the pc is the
            // instruction the guest tried to fetch.
            if access == Access::Fetch && pc & !(self.uc_page - 1) == addr & !(self.uc_page - 1) {
                addr = pc;
            }
            let detail = seen
                .exact
                .map(|(size, at)| format!("{size}-byte access at {at:#x}; unicorn checks these bytes exactly"))
                .unwrap_or_default();
            return Some((FaultKind::Memory { access: Some(access), addr: Some(addr) }, pc, detail));
        }
        if let Some(intno) = seen.intno {
            return Some(self.interrupt(intno, pc));
        }
        match result {
            Ok(()) if pc == self.halt => None,
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

    /// A run that reached the exit before the driver completed every call: the kernel jumped to
    /// `lab_batch_return` itself instead of returning, so the call in flight did not return and
    /// the calls after it did not run.
    pub(super) fn left_early(&self, pc: u64) -> Result<Option<(FaultKind, u64, String)>, BackendError> {
        let (done, ncalls) = (self.header(protocol::header::DONE)?, self.header(protocol::header::NCALLS)?);
        Ok((done < ncalls).then(|| {
            let why = "the call jumped to the lab's exit address instead of returning to the driver".to_string();
            (FaultKind::Protocol(why), pc, format!("the driver had completed {done} of the batch's {ncalls} calls"))
        }))
    }

    /// The fault an interrupt number stands for, from the arch row's table
    /// (`UnicornSpec::interrupts`: QEMU `EXCP_*` / RISC-V `mcause`).
    pub(super) fn interrupt(&self, intno: u32, pc: u64) -> (FaultKind, u64, String) {
        let detail = format!("interrupt {intno}");
        let table = self.arch.spec().unicorn.interrupts;
        let Some(row) = table.iter().find(|r| r.intnos.contains(&intno)) else {
            return (FaultKind::Exception(intno), pc, detail);
        };
        let at = match row.pc {
            TrapPc::Pc => pc,
            TrapPc::Before(n) => pc.wrapping_sub(n),
            TrapPc::Register(reg, n) => self.uc.reg_read(reg).ok().filter(|&e| e != 0).unwrap_or(pc.wrapping_sub(n)),
        };
        let addr = || row.addr_register.and_then(|r| self.uc.reg_read(r).ok()).filter(|&a| a != 0);
        let kind = match row.trap {
            Trap::IllegalInstruction => FaultKind::IllegalInstruction,
            Trap::SystemCall => FaultKind::SystemCall { nr: None, name: None },
            Trap::Breakpoint => FaultKind::Trap,
            Trap::Misaligned => FaultKind::Bus { addr: addr() },
            Trap::Arithmetic => FaultKind::Arithmetic,
        };
        (kind, at, detail)
    }
}

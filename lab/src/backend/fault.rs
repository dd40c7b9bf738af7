//! What went wrong in a call, as every backend reports it: the fault kind (memory, bus,
//! illegal instruction, system call, hang...), where, and which call was in flight. The
//! alignment rules (`crate::align`) and the verdict read these; no backend is needed for that.

use std::fmt;
use std::time::Duration;

/// How a memory access went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
    /// An instruction fetch.
    Fetch,
}

/// Why a call did not return normally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// The CPU model does not decode the instruction (SIGILL; Unicorn `INSN_INVALID`).
    IllegalInstruction,
    /// An access to unmapped or protected memory (SIGSEGV; Unicorn `*_UNMAPPED`, `*_PROT`).
    Memory { access: Option<Access>, addr: Option<u64> },
    /// A misaligned or otherwise bad bus access (SIGBUS; Unicorn `*_UNALIGNED`).
    Bus { addr: Option<u64> },
    /// An aligned-only instruction's memory operand at `addr`, not a multiple of `need` bytes:
    /// a fault on hardware that the backend names from the registers (Unicorn's alignment hook,
    /// or an x86 `#GP`, whose signal carries no address). [`crate::align`].
    Misaligned { addr: u64, need: u64 },
    /// sp was `sp`, not 16-byte aligned, where the architecture or its psABI requires it (an
    /// sp-based access on AArch64, a call on x86_64 and riscv64): Unicorn's alignment hook.
    StackMisaligned { sp: u64 },
    /// A breakpoint or trap instruction (SIGTRAP).
    Trap,
    /// An arithmetic exception (SIGFPE).
    Arithmetic,
    /// A system call from the kernel (`ecall`, `svc`, `syscall`), which kernels may not make, or
    /// one the guest's seccomp filter refused (backend/process/confine.rs). `nr` and `name` when the
    /// backend knows the call (the guest's SIGSYS report carries its number).
    SystemCall { nr: Option<u64>, name: Option<&'static str> },
    /// Another CPU exception, by the emulator's interrupt number.
    Exception(u32),
    /// The call reached `insn`, of `extension`, which this backend cannot execute (Unicorn
    /// 2.1.5: VEX/EVEX code, RVV, SVE2; [`crate::isa::unicorn_stops`]): stopped before it. Not
    /// the kernel's fault and not a pass: the case is skipped, saying so.
    NotRunPast { insn: String, extension: String },
    /// The batch ran past its time budget.
    Hang(Duration),
    /// The call ran past its instruction budget (Unicorn).
    InstructionBudget(u64),
    /// The process ended without reporting (killed, or exited with a status).
    Crash(String),
    /// The guest broke the qemu/native token protocol (wrong magic, sequence number or
    /// checksum, a short token, bytes on its stdout): the results of the entry are discarded.
    Protocol(String),
    /// What the host saw after the batch, from its own mapping of the arena and the guest's
    /// `/proc` files (backend/process/host_check.rs): the kernel changed a read-only input,
    /// guard poison, bytes beside its buffer, the protections in force, a signal handler or the
    /// driver's code. The sentence names what and where.
    HostSaw(String),
}

/// A fault: what, where, and which call of the batch was in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// What went wrong.
    pub kind: FaultKind,
    /// Guest PC of the faulting instruction, when known.
    pub pc: Option<u64>,
    /// Index of the call in flight, when known.
    pub call: Option<usize>,
    /// The backend's own words (qemu's stderr, Unicorn's error), for the report.
    pub detail: String,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultKind::IllegalInstruction => write!(f, "illegal instruction"),
            FaultKind::Memory { access, addr } => {
                let what = match access {
                    Some(Access::Read) => "read of",
                    Some(Access::Write) => "write to",
                    Some(Access::Fetch) => "fetch from",
                    None => "access to",
                };
                match addr {
                    Some(a) => write!(f, "{what} unmapped or protected memory at {a:#x}"),
                    None => write!(f, "{what} unmapped or protected memory"),
                }
            }
            FaultKind::Bus { addr: Some(a) } => write!(f, "bus error (misaligned or bad access) at {a:#x}"),
            FaultKind::Bus { addr: None } => write!(f, "bus error (misaligned or bad access)"),
            FaultKind::Misaligned { addr, need } => {
                write!(f, "misaligned operand: {addr:#x} is not {need}-byte aligned")
            }
            FaultKind::StackMisaligned { sp } => write!(f, "stack pointer {sp:#x} is not 16-byte aligned"),
            FaultKind::Trap => write!(f, "trap (breakpoint)"),
            FaultKind::Arithmetic => write!(f, "arithmetic exception"),
            FaultKind::SystemCall { nr: None, .. } => write!(f, "system call from a kernel"),
            FaultKind::SystemCall { nr: Some(n), name } => {
                write!(f, "system call {n} ({}) attempted and refused", name.unwrap_or("unknown"))
            }
            FaultKind::Exception(n) => write!(f, "CPU exception {n}"),
            FaultKind::NotRunPast { insn, extension } => {
                write!(f, "not run past `{insn}`: Unicorn 2.1.5 cannot execute {extension}")
            }
            FaultKind::Hang(d) => write!(f, "hang: batch still running after {:.1} s", d.as_secs_f64()),
            FaultKind::InstructionBudget(n) => write!(f, "hang: call still running after {n} instructions"),
            FaultKind::Crash(s) => write!(f, "guest process died: {s}"),
            FaultKind::Protocol(s) => write!(f, "protocol error, results discarded: {s}"),
            FaultKind::HostSaw(s) => write!(f, "{s} (seen by the host after the batch)"),
        }
    }
}

impl FaultKind {
    /// The fault a Linux signal stands for (`signo`, `si_addr` from the guest's handler).
    pub fn from_signal(signo: u64, addr: u64) -> FaultKind {
        match signo {
            4 => FaultKind::IllegalInstruction,
            11 => FaultKind::Memory { access: None, addr: Some(addr) },
            7 => FaultKind::Bus { addr: Some(addr) },
            5 => FaultKind::Trap,
            8 => FaultKind::Arithmetic,
            31 => FaultKind::SystemCall { nr: None, name: None },
            // SIGUSR1: the host's poke after the time budget; the caller fills in the budget.
            10 => FaultKind::Hang(Duration::ZERO),
            n => FaultKind::Crash(format!("signal {n}")),
        }
    }
}

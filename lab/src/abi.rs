//! Calling-convention facts per architecture, described once as data (after BoringSSL's
//! `abi_test.h`): the callee-saved registers the guest-side driver poisons and reads back,
//! and how 32-bit `int` arguments are passed. Names in findings come from these tables, and
//! the driver's call-entry layout is derived from their length.

use crate::variant::Arch;

/// How the psABI passes a 32-bit `int` in a 64-bit argument register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int32Args {
    /// Upper 32 bits are unspecified (SysV x86-64 §3.2.3, AAPCS64 §6.8.2): the lab fills them
    /// with garbage so a kernel that relies on clean upper bits is caught.
    UpperGarbage,
    /// Sign-extended to 64 bits (RISC-V psABI "Integer Calling Convention": 32-bit values are
    /// sign-extended in RV64 registers).
    SignExtended,
}

/// One architecture's calling convention, as far as the lab checks it.
#[derive(Debug)]
pub struct Abi {
    /// The architecture this table describes.
    pub arch: Arch,
    /// Callee-saved registers in driver order: the driver writes poison `i` into `saved[i]` and
    /// stores the value after the call into word `16 + i` of the call entry.
    pub saved: &'static [&'static str],
    /// How many of `saved` are integer registers; the rest are FP registers (the driver moves
    /// their raw 64-bit patterns through an integer register).
    pub saved_gprs: usize,
    /// Where the rules come from.
    pub source: &'static str,
    /// How `int` arguments (`ofs`, `limit`) are passed.
    pub int32_args: Int32Args,
    /// Name of the stack-pointer register in findings.
    pub sp: &'static str,
    /// The first four integer argument registers, by their psABI names.
    pub args: [&'static str; 4],
    /// Bytes of stack a kernel may use below the stack pointer at the call (the lab's budget,
    /// not a psABI rule: the HotSpot stubs need a few hundred bytes at most).
    pub stack_budget: u64,
    /// Bytes below the lowest stack pointer a leaf may use without moving it (SysV x86-64
    /// §3.2.2: 128; none on riscv64 and AAPCS64).
    pub red_zone: u64,
}

/// The lab's per-call stack budget, bytes below `sp` at the call.
pub const STACK_BUDGET: u64 = 4096;

/// RISC-V psABI, "Integer Register Convention" and "Floating-point Register Convention":
/// s0–s11 and fs0–fs11 are callee-saved; gp and tp must not be changed by a callee.
pub const RISCV64: Abi = Abi {
    arch: Arch::Riscv64,
    saved: &[
        "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "gp", "tp", "fs0", "fs1", "fs2",
        "fs3", "fs4", "fs5", "fs6", "fs7", "fs8", "fs9", "fs10", "fs11",
    ],
    saved_gprs: 14,
    source: "RISC-V ELF psABI, Register Convention (LP64D)",
    int32_args: Int32Args::SignExtended,
    sp: "sp",
    args: ["a0", "a1", "a2", "a3"],
    stack_budget: STACK_BUDGET,
    red_zone: 0,
};

/// AAPCS64 §6.1.1 (x19–x29 callee-saved) and §6.1.2 (low 64 bits of v8–v15).
pub const AARCH64: Abi = Abi {
    arch: Arch::Aarch64,
    saved: &[
        "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29", "d8", "d9", "d10", "d11", "d12",
        "d13", "d14", "d15",
    ],
    saved_gprs: 11,
    source: "AAPCS64 §6.1.1, §6.1.2",
    int32_args: Int32Args::UpperGarbage,
    sp: "sp",
    args: ["x0", "x1", "x2", "x3"],
    stack_budget: STACK_BUDGET,
    red_zone: 0,
};

/// System V AMD64 psABI §3.2.1, Figure 3.4: rbx, rbp, r12–r15 belong to the caller; DF clear.
pub const X86_64: Abi = Abi {
    arch: Arch::X86_64,
    saved: &["rbx", "rbp", "r12", "r13", "r14", "r15"],
    saved_gprs: 6,
    source: "System V AMD64 psABI §3.2.1 (Figure 3.4)",
    int32_args: Int32Args::UpperGarbage,
    sp: "rsp",
    args: ["rdi", "rsi", "rdx", "rcx"],
    stack_budget: STACK_BUDGET,
    red_zone: 128,
};

/// RFLAGS bit 10, the direction flag, which must be clear on return (SysV psABI §3.2.1).
pub const X86_RFLAGS_DF: u64 = 1 << 10;

pub use crate::protocol::POISON_STEP;

impl Abi {
    /// The table for `arch`.
    pub fn of(arch: Arch) -> &'static Abi {
        match arch {
            Arch::Riscv64 => &RISCV64,
            Arch::Aarch64 => &AARCH64,
            Arch::X86_64 => &X86_64,
        }
    }

    /// Poison value the driver puts into `saved[index]` for a call with `seed`.
    pub fn poison(seed: u64, index: usize) -> u64 {
        seed.wrapping_add((index as u64 + 1).wrapping_mul(POISON_STEP))
    }

    /// Register value for a 32-bit `int` argument, as this ABI passes it; `garbage` fills the
    /// undefined upper half where the ABI allows it.
    pub fn int32_arg(&self, value: i32, garbage: u32) -> u64 {
        match self.int32_args {
            Int32Args::SignExtended => value as i64 as u64,
            Int32Args::UpperGarbage => (u64::from(garbage) << 32) | u64::from(value as u32),
        }
    }
}

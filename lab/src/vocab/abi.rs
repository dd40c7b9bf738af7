//! Calling-convention facts per architecture, described once as data (after BoringSSL's
//! `abi_test.h`): the callee-saved registers the guest-side driver poisons and reads back,
//! and how 32-bit `int` arguments are passed. Names in findings come from these tables, and
//! the driver's call-entry layout is derived from their length. The tables themselves are part
//! of each architecture's row (`lab/src/arch/<arch>.rs`); `crate::abi` looks them up.

use crate::vocab::arch::Arch;

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
    /// Where the rules come from (named in findings).
    pub source: &'static str,
    /// The published document `source` cites.
    pub url: &'static str,
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
    /// A flag that must be clear on return (x86-64: DF), if the ABI has one.
    pub clear_on_return: Option<ReturnFlag>,
    /// FP/vector control state a call must leave as it found it (x86-64: MXCSR control bits
    /// and the x87 control word; AAPCS64: FPCR fields; RISC-V: `fcsr.frm`), if the psABI names any.
    pub control: Option<ControlState>,
}

/// The FP control registers of one architecture as the driver's `fpctl` call-entry word holds
/// them (`protocol::entry::FPCTL`): the driver loads [`poison`](Self::poison) before each
/// call, stores the registers after it and loads [`default`](Self::default) again.
#[derive(Debug, Clone, Copy)]
pub struct ControlState {
    /// What the word holds, bit by bit (`MXCSR in bits 0-31, the x87 control word in 32-47`).
    pub layout: &'static str,
    /// Loaded before each call: a value no kernel starts from, harmless to integer code (a
    /// rounding mode other than to-nearest, flush-to-zero; every exception stays masked).
    pub poison: u64,
    /// Loaded after each call: the value a Linux process starts with.
    pub default: u64,
    /// The fields checked, each with its own finding.
    pub fields: &'static [ControlField],
}

/// One field of a [`ControlState`] that must be unchanged by a call.
#[derive(Debug, Clone, Copy)]
pub struct ControlField {
    /// Its bits within the `fpctl` word.
    pub mask: u64,
    /// Its name in findings (`the MXCSR control bits`).
    pub name: &'static str,
    /// The psABI rule, with its section.
    pub rule: &'static str,
}

/// The lab's per-call stack budget, bytes below `sp` at the call.
pub const STACK_BUDGET: u64 = 4096;

/// A status flag that must be clear when a call returns.
#[derive(Debug, Clone, Copy)]
pub struct ReturnFlag {
    /// The flag's bit in the flags word the driver records (`protocol::entry::FLAGS`).
    pub mask: u64,
    /// Its name in findings.
    pub name: &'static str,
}

/// Step between poison values: callee-saved register `i` gets `seed + (i + 1) * POISON_STEP`
/// (wrapping). The 64-bit golden-ratio constant, odd, so every register gets its own value.
pub const POISON_STEP: u64 = 0x9E37_79B9_7F4A_7C15;

impl Abi {
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

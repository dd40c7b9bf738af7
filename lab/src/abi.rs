//! Calling-convention facts per architecture, described once as data (after BoringSSL's
//! `abi_test.h`): the callee-saved registers the guest-side driver poisons and reads back,
//! and how 32-bit `int` arguments are passed. Names in findings come from these tables, and
//! the driver's call-entry layout is derived from their length. The tables themselves are part
//! of each architecture's row (`lab/src/arch/<arch>.rs`).

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

/// What the lab does about the unspecified upper 32 bits of `int` arguments
/// ([`Int32Args::UpperGarbage`] ABIs: x86_64, aarch64). Chosen per contract family from its
/// real callers ([`UpperBits::default_for`]), or by `--abi-upper-bits` / the manifest's
/// `abi_upper_bits` ([`set_upper_bits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpperBits {
    /// Every call gets garbage upper bits and a kernel that reads them fails each case (its
    /// findings name the register): HotSpot's compiled callers leave garbage there.
    Fail,
    /// Every call gets clean upper bits (the value checks mean what they say); one probe case
    /// with garbage per image and backend tells whether the kernel relies on them, reported
    /// once per image and argument as an `abi-upper-bits` warning: OpenSSL's C callers pass a
    /// zero-extended value.
    Warn,
}

impl UpperBits {
    /// The policy of `family` when nothing is chosen: its real callers' behaviour.
    pub fn default_for(family: crate::contract::Family) -> UpperBits {
        match family {
            crate::contract::Family::HotSpot => UpperBits::Fail,
            crate::contract::Family::OpenSsl => UpperBits::Warn,
        }
    }

    /// The policy in force for `family`: the one chosen ([`set_upper_bits`]), else the default.
    pub fn for_family(family: crate::contract::Family) -> UpperBits {
        match CHOSEN.load(std::sync::atomic::Ordering::Relaxed) {
            1 => UpperBits::Fail,
            2 => UpperBits::Warn,
            _ => UpperBits::default_for(family),
        }
    }

    /// Its name on the command line and in manifests (`fail`, `warn`).
    pub fn name(self) -> &'static str {
        match self {
            UpperBits::Fail => "fail",
            UpperBits::Warn => "warn",
        }
    }
}

/// The chosen policy: 0 none (family defaults), 1 fail, 2 warn.
static CHOSEN: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Chooses the upper-bits policy of this process for every family (`None`: the families'
/// defaults). `lab run`, `lab fuzz` and `lab bench` set it from `--abi-upper-bits`, else from
/// the manifest's `abi_upper_bits`.
pub fn set_upper_bits(policy: Option<UpperBits>) {
    let v = match policy {
        None => 0,
        Some(UpperBits::Fail) => 1,
        Some(UpperBits::Warn) => 2,
    };
    CHOSEN.store(v, std::sync::atomic::Ordering::Relaxed);
}

/// The policy chosen with [`set_upper_bits`], if any.
pub fn chosen_upper_bits() -> Option<UpperBits> {
    match CHOSEN.load(std::sync::atomic::Ordering::Relaxed) {
        1 => Some(UpperBits::Fail),
        2 => Some(UpperBits::Warn),
        _ => None,
    }
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
}

/// The lab's per-call stack budget, bytes below `sp` at the call.
pub const STACK_BUDGET: u64 = 4096;

pub use crate::arch::aarch64::ABI as AARCH64;
pub use crate::arch::riscv64::ABI as RISCV64;
pub use crate::arch::x86_64::{ABI as X86_64, RFLAGS_DF as X86_RFLAGS_DF};

/// A status flag that must be clear when a call returns.
#[derive(Debug, Clone, Copy)]
pub struct ReturnFlag {
    /// The flag's bit in the flags word the driver records (`protocol::entry::FLAGS`).
    pub mask: u64,
    /// Its name in findings.
    pub name: &'static str,
}

pub use crate::protocol::POISON_STEP;

impl Abi {
    /// The table for `arch`.
    pub fn of(arch: Arch) -> &'static Abi {
        arch.spec().abi
    }

    /// Poison value the driver puts into `saved[index]` for a call with `seed`.
    pub fn poison(seed: u64, index: usize) -> u64 {
        seed.wrapping_add((index as u64 + 1).wrapping_mul(POISON_STEP))
    }

    /// Register value for a 32-bit `int` argument, as this ABI passes it; `garbage` fills the
    /// undefined upper half where the ABI allows it.
    pub fn int32_arg(&self, value: i32, garbage: u32) -> u64 {
        self.int32_arg_as(value, garbage, UpperBits::Fail)
    }

    /// [`Abi::int32_arg`] under `policy`: [`UpperBits::Warn`] passes the value clean (the low
    /// 32 bits sign-extended, as a C caller's 32-bit move of a non-negative value leaves it).
    pub fn int32_arg_as(&self, value: i32, garbage: u32, policy: UpperBits) -> u64 {
        if policy == UpperBits::Warn {
            return value as i64 as u64;
        }
        match self.int32_args {
            Int32Args::SignExtended => value as i64 as u64,
            Int32Args::UpperGarbage => (u64::from(garbage) << 32) | u64::from(value as u32),
        }
    }
}

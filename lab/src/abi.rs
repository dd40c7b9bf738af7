//! The calling-convention tables of the architecture rows, looked up by architecture. The
//! table type and its psABI facts are vocabulary (`crate::vocab::abi`), below the rows that
//! hold one each.

pub use crate::vocab::abi::*;

pub use crate::arch::aarch64::ABI as AARCH64;
pub use crate::arch::riscv64::ABI as RISCV64;
pub use crate::arch::x86_64::{ABI as X86_64, RFLAGS_DF as X86_RFLAGS_DF};

use crate::arch::Arch;

impl Abi {
    /// The table for `arch`.
    pub fn of(arch: Arch) -> &'static Abi {
        arch.spec().abi
    }

    /// [`Abi::int32_arg`] under `policy`: [`UpperBits::Warn`] passes the value clean (the low
    /// 32 bits sign-extended, as a C caller's 32-bit move of a non-negative value leaves it).
    pub fn int32_arg_as(&self, value: i32, garbage: u32, policy: UpperBits) -> u64 {
        match policy {
            UpperBits::Warn => value as i64 as u64,
            UpperBits::Fail => self.int32_arg(value, garbage),
        }
    }
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
            crate::contract::Family::OpenSsl | crate::contract::Family::BoringSsl => UpperBits::Warn,
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

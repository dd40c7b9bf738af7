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
}

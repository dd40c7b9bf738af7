//! The architectures the lab knows, by name only: every fact about one is its row
//! (`crate::arch`, whose `Arch::spec` is implemented there, above this vocabulary).

/// A guest instruction-set architecture with its own kernel folder (`kernels/<arch>/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// RV64GC (LP64D ABI).
    Riscv64,
    /// ARMv8-A AArch64 (AAPCS64).
    Aarch64,
    /// x86-64 (System V AMD64 psABI).
    X86_64,
}

impl Arch {
    /// Every architecture, in report order.
    pub const ALL: [Arch; 3] = [Arch::Riscv64, Arch::Aarch64, Arch::X86_64];
}

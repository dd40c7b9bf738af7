//! Variants: one row per (architecture, ISA extensions) pair a kernel is built for.
//!
//! Choosing a variant is a table lookup ([`VARIANTS`]), never a chain of `if`s: `-march`, the
//! declared ISA extensions, the qemu-user `-cpu` model and the kernel folder all live in one row;
//! what is true of the whole architecture (triple, ABI, tools) lives in its [`crate::arch`] row.
//! The rows follow docs/DESIGN.md "Variants".

use std::fmt;

pub use crate::arch::Arch;

/// One build of the kernels: an architecture plus the ISA extensions the code may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Variant {
    /// Report name, e.g. `riscv64+zbb`.
    pub name: &'static str,
    /// Guest architecture; selects `kernels/<arch>/` and the ABI table.
    pub arch: Arch,
    /// Whether the build may use the RISC-V Zbb extension (basic bit manipulation).
    pub zbb: bool,
    /// The ISA extensions the build declares, by their arch-row names (`IsaSpec::extension`);
    /// `mattr` and `qemu_cpu` are what the arch row derives from them (a unit test keeps them equal).
    pub extensions: &'static [&'static str],
    /// clang `-march`: the ISA the assembler accepts for this variant.
    pub march: &'static str,
    /// qemu-user `-cpu` argument. qemu 7.2 turns Zba/Zbb/Zbc/Zbs on by default for `rv64`,
    /// so every extension is named explicitly (docs/DESIGN.md "Variants").
    pub qemu_cpu: &'static str,
    /// What the code may use, in words, for `lab list` and reports.
    pub isa: &'static str,
    /// `llvm-objdump --mattr` that decodes exactly this ISA (LLVM 14 feature names), for the
    /// static legality scan (`isa.rs`); empty for x86_64, whose disassembler ignores features.
    pub mattr: &'static str,
    /// A kernel the user brought (a manifest entry or `--object`), with its declared ISA;
    /// `None` for the lab's own variants, built from a kernels folder.
    pub custom: Option<Custom>,
}

/// A user's kernel attached to a [`Variant`]: its handle in [`crate::user_kernel`]'s registry
/// (each is registered once per process, `UserKernel::into_variant`, and never removed), so a
/// variant names it without this table depending on the user-kernel layer above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Custom(pub usize);

/// Every variant the lab builds, in report order.
pub const VARIANTS: [Variant; 6] = [
    Variant {
        name: "riscv64",
        arch: Arch::Riscv64,
        zbb: false,
        extensions: &[],
        march: "rv64gc",
        qemu_cpu: "rv64,zba=false,zbb=false,zbc=false,zbs=false",
        isa: "RV64GC only",
        mattr: "+m,+a,+f,+d,+c",
        custom: None,
    },
    Variant {
        name: "riscv64+zbb",
        arch: Arch::Riscv64,
        zbb: true,
        extensions: &["zbb"],
        march: "rv64gc_zbb",
        qemu_cpu: "rv64,zba=false,zbb=true,zbc=false,zbs=false",
        isa: "RV64GC + Zbb",
        mattr: "+m,+a,+f,+d,+c,+zbb",
        custom: None,
    },
    // RVV 1.0 rows: the kernels keep their scalar code (issue 27: an RVV Poly1305 is later
    // work); the driver enters each call with vtype.vill set and vxrm poisoned, and qemu runs
    // every VLEN of the arch row's vector-length spec.
    Variant {
        name: "riscv64+v",
        arch: Arch::Riscv64,
        zbb: false,
        extensions: &["v"],
        march: "rv64gcv",
        qemu_cpu: "rv64,zba=false,zbb=false,zbc=false,zbs=false,v=true,vext_spec=v1.0,elen=64",
        isa: "RV64GC + V (RVV 1.0)",
        mattr: "+m,+a,+f,+d,+c,+v",
        custom: None,
    },
    Variant {
        name: "riscv64+zbb+v",
        arch: Arch::Riscv64,
        zbb: true,
        extensions: &["zbb", "v"],
        march: "rv64gcv_zbb",
        qemu_cpu: "rv64,zba=false,zbb=true,zbc=false,zbs=false,v=true,vext_spec=v1.0,elen=64",
        isa: "RV64GC + Zbb + V (RVV 1.0)",
        mattr: "+m,+a,+f,+d,+c,+zbb,+v",
        custom: None,
    },
    Variant {
        name: "aarch64",
        arch: Arch::Aarch64,
        zbb: false,
        extensions: &[],
        march: "armv8-a",
        qemu_cpu: "cortex-a72",
        isa: "ARMv8.0-A base (NEON is baseline)",
        mattr: "+fp-armv8,+neon",
        custom: None,
    },
    Variant {
        name: "x86_64",
        arch: Arch::X86_64,
        zbb: false,
        extensions: &[],
        march: "x86-64",
        qemu_cpu: "qemu64",
        isa: "baseline x86-64 (no BMI, no AVX)",
        mattr: "",
        custom: None,
    },
];

impl Variant {
    /// Looks a variant up by its report name (`riscv64+zbb`).
    pub fn by_name(name: &str) -> Option<&'static Variant> {
        VARIANTS.iter().find(|v| v.name == name)
    }

    /// The vector length this variant's ISA has as a run dimension (RVV's VLEN, SVE's VL),
    /// from its arch row; `None` for a scalar ISA.
    pub fn vector_length(&self) -> Option<&'static crate::arch::VectorLengthSpec> {
        self.arch.spec().isa.vector_length_of(self.extensions)
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// A kernel contract (docs/DESIGN.md "Kernel contracts"); each names the HotSpot stub symbols it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// `md5_implCompress` and `md5_implCompressMB` (RFC 1321).
    Md5,
    /// `poly1305_processBlocks` (RFC 8439, JDK 26-bit limbs).
    Poly1305,
}

impl Kernel {
    /// Every kernel, in report order.
    pub const ALL: [Kernel; 2] = [Kernel::Md5, Kernel::Poly1305];

    /// Command-line and report name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Md5 => "md5",
            Kernel::Poly1305 => "poly1305",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The ELF symbols a kernel image must define for this contract.
    pub fn symbols(self) -> &'static [&'static str] {
        match self {
            Kernel::Md5 => &[MD5_IMPL_COMPRESS, MD5_IMPL_COMPRESS_MB],
            Kernel::Poly1305 => &[POLY1305_PROCESS_BLOCKS],
        }
    }
}

named_values!(Kernel);

/// HotSpot stub `md5_implCompress(buf, state)`.
pub const MD5_IMPL_COMPRESS: &str = "md5_implCompress";
/// HotSpot stub `md5_implCompressMB(buf, state, ofs, limit) -> ofs`.
pub const MD5_IMPL_COMPRESS_MB: &str = "md5_implCompressMB";
/// HotSpot stub `poly1305_processBlocks(input, length, acc, r)`.
pub const POLY1305_PROCESS_BLOCKS: &str = "poly1305_processBlocks";

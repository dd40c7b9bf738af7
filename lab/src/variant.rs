//! Variants: one row per (architecture, ISA extensions) pair a kernel is built for.
//!
//! Choosing a variant is a table lookup ([`VARIANTS`]), never a chain of `if`s: `-march`, the
//! declared ISA extensions, the qemu-user `-cpu` model and the kernel folder all live in one row;
//! what is true of the whole architecture (triple, ABI, tools) lives in its [`crate::arch`] row.
//! The rows follow docs/DESIGN.md "Variants".

use std::fmt;

pub use crate::arch::Arch;
use crate::vocab::backend_kind::BackendKind;

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
pub const VARIANTS: [Variant; 10] = [
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
    Variant {
        name: "x86_64+avx2",
        arch: Arch::X86_64,
        zbb: false,
        extensions: X86_64_V3,
        march: "x86-64-v3",
        qemu_cpu: QEMU_X86_64_V3,
        isa: "x86-64-v3 (AVX2, BMI1/2, FMA, LZCNT, MOVBE; XSAVE)",
        mattr: "",
        custom: None,
    },
    Variant {
        name: "x86_64+avx512",
        arch: Arch::X86_64,
        zbb: false,
        extensions: X86_64_V4,
        march: "x86-64-v4",
        // qemu 7.2 has no AVX-512: the row is not run there; the string is what the rows derive.
        qemu_cpu: QEMU_X86_64_V3,
        isa: "x86-64-v4 (AVX-512 F, BW, CD, DQ, VL)",
        mattr: "",
        custom: None,
    },
    Variant {
        name: "x86_64+avx512ifma",
        arch: Arch::X86_64,
        zbb: false,
        extensions: X86_64_V4_IFMA,
        march: "x86-64-v4",
        qemu_cpu: QEMU_X86_64_V3,
        isa: "x86-64-v4 + AVX-512 IFMA (-mavx512ifma)",
        mattr: "",
        custom: None,
    },
    Variant {
        name: "aarch64+sve2",
        arch: Arch::Aarch64,
        zbb: false,
        extensions: &["sve2"],
        march: "armv8-a+sve2",
        // Only `max` has SVE2 in qemu 7.2, and it cannot turn features off: the ISA scan
        // (`--mattr=+fp-armv8,+neon,+sve2`) keeps the build to ARMv8.0-A + SVE2.
        qemu_cpu: "max",
        isa: "ARMv8.0-A + SVE2 (NEON is baseline ARMv8-A)",
        mattr: "+fp-armv8,+neon,+sve2",
        custom: None,
    },
];

/// x86-64 psABI micro-architecture level x86-64-v3, as the x86_64 row's extension names (XSAVE
/// included: the OS must save the AVX state, and qemu needs it for `vzeroupper`).
const X86_64_V3: &[&str] = &[
    "popcnt", "lzcnt", "movbe", "bmi1", "bmi2", "avx", "avx2", "cx16", "sse3", "ssse3", "sse4.1", "sse4.2", "xsave",
    "fma", "f16c",
];

/// x86-64-v4: v3 plus AVX-512 F, BW, CD, DQ, VL.
const X86_64_V4: &[&str] = &[
    "popcnt", "lzcnt", "movbe", "bmi1", "bmi2", "avx", "avx2", "cx16", "sse3", "ssse3", "sse4.1", "sse4.2", "xsave",
    "fma", "f16c", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl",
];

/// x86-64-v4 plus AVX-512 IFMA (52-bit integer multiply-add: HotSpot's and OpenSSL's base 2^44
/// Poly1305).
const X86_64_V4_IFMA: &[&str] = &[
    "popcnt",
    "lzcnt",
    "movbe",
    "bmi1",
    "bmi2",
    "avx",
    "avx2",
    "cx16",
    "sse3",
    "ssse3",
    "sse4.1",
    "sse4.2",
    "xsave",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512cd",
    "avx512dq",
    "avx512vl",
    "avx512ifma",
];

/// qemu `-cpu` of x86-64-v3 (the x86_64 row's properties, in row order).
const QEMU_X86_64_V3: &str = "qemu64,popcnt=true,abm=true,movbe=true,bmi1=true,bmi2=true,avx=true,avx2=true,\
                              cx16=true,pni=true,ssse3=true,sse4.1=true,sse4.2=true,xsave=true,fma=true,f16c=true";

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

    /// Why `backend` cannot run code built for this variant's extensions, if it cannot, from the
    /// arch row's extension rows (Unicorn 2.1.5: no AVX2, AVX-512 or SVE; qemu 7.2: no AVX-512;
    /// native: the flags of this host's `/proc/cpuinfo`, `host_flags`, under Linux's names).
    /// Zbb, which the Unicorn backend emulates, is no reason. Architecture mismatches are
    /// `BackendKind::applicable`'s business, not this.
    pub fn backend_lacks(&self, backend: BackendKind, host_flags: &[String]) -> Option<String> {
        let isa = &self.arch.spec().isa;
        let on = isa.rows(self.extensions);
        let why = match backend {
            BackendKind::Unicorn => isa.unicorn_lacks(&on),
            BackendKind::Qemu => isa.qemu_lacks(&on),
            BackendKind::Native => isa.host_lacks(&on, host_flags),
        }?;
        Some(format!("{backend} {why}, which {} uses", self.name))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str) -> &'static Variant {
        Variant::by_name(name).unwrap_or_else(|| panic!("no variant {name}"))
    }

    fn sorted(names: &[&'static str]) -> Vec<&'static str> {
        let mut v = names.to_vec();
        v.sort_unstable();
        v
    }

    #[test]
    fn the_x86_vector_rows_are_the_psabi_levels() {
        let isa = &Arch::X86_64.spec().isa;
        let level = |n: &str| isa.levels.iter().find(|l| l.name == n).expect("level").implies;
        assert_eq!(sorted(row("x86_64+avx2").extensions), sorted(level("x86-64-v3")));
        assert_eq!(sorted(row("x86_64+avx512").extensions), sorted(level("x86-64-v4")));
        let ifma = row("x86_64+avx512ifma");
        let flags = isa.clang_flags(ifma.march, &isa.rows(ifma.extensions));
        assert_eq!(flags, ["-mavx512ifma"], "IFMA is beyond x86-64-v4");
        let v3 = row("x86_64+avx2");
        assert!(isa.clang_flags(v3.march, &isa.rows(v3.extensions)).is_empty());
    }

    #[test]
    fn each_vector_row_names_the_backends_that_cannot_run_it_and_why() {
        let all_x86: Vec<String> = Arch::X86_64.spec().isa.extensions.iter().map(|e| e.cpuinfo.to_string()).collect();
        let avx2 = row("x86_64+avx2");
        let u = avx2.backend_lacks(BackendKind::Unicorn, &[]).expect("Unicorn runs no AVX2");
        assert!(u.contains("avx2") && u.contains("Unicorn 2.1.5"), "{u}");
        assert_eq!(avx2.backend_lacks(BackendKind::Qemu, &[]), None);
        assert_eq!(avx2.backend_lacks(BackendKind::Native, &all_x86), None);
        let no_abm: Vec<String> = all_x86.iter().filter(|f| *f != "abm").cloned().collect();
        let n = avx2.backend_lacks(BackendKind::Native, &no_abm).expect("LZCNT is `abm` in /proc/cpuinfo");
        assert!(n.contains("lzcnt (`abm`)"), "{n}");
        let avx512 = row("x86_64+avx512ifma");
        let q = avx512.backend_lacks(BackendKind::Qemu, &[]).expect("qemu 7.2 has no AVX-512");
        assert!(q.contains("avx512ifma") && q.contains("no AVX-512"), "{q}");
        assert_eq!(avx512.backend_lacks(BackendKind::Native, &all_x86), None);
        let sve2 = row("aarch64+sve2");
        assert_eq!((sve2.qemu_cpu, sve2.backend_lacks(BackendKind::Qemu, &[])), ("max", None));
        assert!(sve2.backend_lacks(BackendKind::Unicorn, &[]).expect("no SVE").contains("no SVE"));
        // The rows without vector extensions (Zbb: Unicorn emulates it; a riscv64 host lists it).
        let flags: Vec<String> = all_x86.iter().cloned().chain(["zbb".to_string()]).collect();
        for base in ["riscv64", "riscv64+zbb", "aarch64", "x86_64"] {
            for b in BackendKind::ALL {
                assert_eq!(row(base).backend_lacks(b, &flags), None, "{base} on {b}");
            }
        }
    }
}

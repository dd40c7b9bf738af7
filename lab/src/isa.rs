//! ISA legality, statically: every instruction of a variant's image must decode within that
//! variant's ISA (docs/DESIGN.md "Variants": riscv64 RV64GC, riscv64+zbb RV64GC + Zbb, aarch64
//! ARMv8.0-A, x86_64 baseline x86-64 with no VEX/EVEX, BMI or ADX), and no kernel may contain a
//! system-call instruction (only the driver's I/O code, between `lab_syscalls_begin` and
//! `lab_syscalls_end`, may).
//!
//! riscv64 and aarch64: `llvm-objdump --mattr=<Variant::mattr>` ([`crate::disasm`]) prints
//! `<unknown>` for what the variant's ISA does not have. x86_64: LLVM's x86 disassembler ignores
//! features, so each instruction's bytes go through iced-x86, whose per-instruction CPUID
//! feature list decides (x86-64 psABI "Micro-architecture levels": the baseline is CMOV, CX8,
//! FPU, FXSR, MMX, SCE, SSE, SSE2). A user's kernel is scanned against its declared ISA instead
//! (`--mattr` and CPUID features from [`crate::user_kernel::isa_decl`]).

use iced_x86::{CpuidFeature, Decoder, DecoderOptions, EncodingKind};

use crate::disasm::{DisasmError, Insn, Listing};
use crate::image::Image;
use crate::variant::{Arch, Variant};

/// One instruction outside the variant's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Guest address of the instruction.
    pub addr: u64,
    /// `symbol+offset`.
    pub place: String,
    /// The instruction as the widest disassembly prints it (`ror t0, t0, t1`).
    pub insn: String,
    /// Why it is not allowed.
    pub why: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` at {} ({:#x}): {}", self.insn, self.place, self.addr, self.why)
    }
}

/// CPUID features of baseline x86-64 (x86-64-v1) and of every earlier x86 generation.
const X86_BASELINE: &[CpuidFeature] = &[
    CpuidFeature::INTEL8086,
    CpuidFeature::INTEL186,
    CpuidFeature::INTEL286,
    CpuidFeature::INTEL386,
    CpuidFeature::INTEL486,
    CpuidFeature::X64,
    CpuidFeature::CPUID,
    CpuidFeature::CMOV,
    CpuidFeature::CX8,
    CpuidFeature::FPU,
    CpuidFeature::FPU287,
    CpuidFeature::FPU387,
    CpuidFeature::FXSR,
    CpuidFeature::MMX,
    CpuidFeature::SSE,
    CpuidFeature::SSE2,
    CpuidFeature::SYSCALL,
    CpuidFeature::TSC,
    CpuidFeature::CLFSH,
    CpuidFeature::PAUSE,
    CpuidFeature::MULTIBYTENOP,
];

/// Whether the listed instruction is a system call (`ecall`, `svc`, `syscall`, `sysenter`, `int`).
fn is_syscall(arch: Arch, insn: &Insn) -> bool {
    let mnemonic = insn.text.split_whitespace().next().unwrap_or("");
    match arch {
        Arch::Riscv64 => mnemonic == "ecall",
        Arch::Aarch64 => mnemonic == "svc",
        Arch::X86_64 => matches!(mnemonic, "syscall" | "sysenter" | "int"),
    }
}

/// Why an x86 instruction is outside baseline x86-64, if it is.
fn x86_outside_baseline(bytes: &[u8], addr: u64) -> Option<String> {
    let mut d = Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE);
    let i = d.decode();
    if i.is_invalid() {
        return Some("does not decode as x86-64".into());
    }
    match i.encoding() {
        EncodingKind::Legacy => {}
        EncodingKind::VEX => return Some("VEX-encoded (AVX/BMI family), not baseline x86-64".into()),
        EncodingKind::EVEX => return Some("EVEX-encoded (AVX-512), not baseline x86-64".into()),
        other => return Some(format!("{other:?}-encoded, not baseline x86-64")),
    }
    let extra: Vec<String> =
        i.cpuid_features().iter().filter(|f| !X86_BASELINE.contains(f)).map(|f| format!("{f:?}")).collect();
    (!extra.is_empty()).then(|| format!("needs {}, not baseline x86-64", extra.join(" + ")))
}

/// Why an x86 instruction is outside a user's declared ISA (baseline x86-64 plus the CPUID
/// features of the declared level and extensions, [`crate::user_kernel::isa_decl`]), if it is.
fn x86_outside_declared(bytes: &[u8], addr: u64, isa: &crate::user_kernel::DeclaredIsa) -> Option<String> {
    let i = Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE).decode();
    if i.is_invalid() {
        return Some("does not decode as x86-64".into());
    }
    let declared = isa.x86_cpuid();
    let extra: Vec<String> = i
        .cpuid_features()
        .iter()
        .filter(|f| !X86_BASELINE.contains(f) && !declared.contains(f))
        .map(|f| format!("{f:?}"))
        .collect();
    (!extra.is_empty()).then(|| format!("needs {}, not in the declared ISA {}", extra.join(" + "), isa.text))
}

/// Whether the x86 instruction is VEX-, EVEX- or XOP-encoded (Unicorn computes some VEX.128
/// forms wrongly: docs/DESIGN.md "Backend facts").
fn x86_vex_family(bytes: &[u8], addr: u64) -> bool {
    let i = Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE).decode();
    matches!(i.encoding(), EncodingKind::VEX | EncodingKind::EVEX | EncodingKind::XOP)
}

/// Addresses the scan leaves alone: `lab_unicorn_halt` is a deliberately illegal word that is
/// never executed.
fn exempt(image: &Image, addr: u64) -> bool {
    image.symbol("lab_unicorn_halt").is_some_and(|s| addr >= s.addr && addr < s.addr + s.size.max(1))
}

/// The driver's system-call range `[lab_syscalls_begin, lab_syscalls_end)`, if it defines one.
fn syscall_range(image: &Image) -> Option<std::ops::Range<u64>> {
    Some(image.symbol("lab_syscalls_begin")?.addr..image.symbol("lab_syscalls_end")?.addr)
}

/// Scans `image` against `variant`'s ISA and the no-system-call rule.
///
/// # Errors
/// `llvm-objdump` missing (naming the Debian package `llvm`) or failing.
pub fn scan(image: &Image, variant: &Variant) -> Result<Vec<Violation>, DisasmError> {
    let full = image.listing()?;
    let own = match variant.arch {
        Arch::X86_64 => None,
        _ => Some(Listing::of(&image.path, variant.arch, variant.mattr)?),
    };
    let allowed = syscall_range(image);
    let mut out = Vec::new();
    for insn in full.iter().filter(|i| !exempt(image, i.addr)) {
        let violation = |why: String| Violation {
            addr: insn.addr,
            place: image.symbolize(insn.addr),
            insn: if insn.unknown() { format!(".byte {}", hex::encode(&insn.bytes)) } else { insn.text.clone() },
            why,
        };
        let outside = match &own {
            Some(own) => own
                .at(insn.addr)
                .is_some_and(Insn::unknown)
                .then(|| format!("not in {} (`-march={}`)", variant.isa, variant.march)),
            None => match crate::user_kernel::of(variant) {
                Some(k) => x86_outside_declared(&insn.bytes, insn.addr, &k.isa),
                None => x86_outside_baseline(&insn.bytes, insn.addr),
            },
        };
        if let Some(why) = outside {
            out.push(violation(why));
        }
        if is_syscall(variant.arch, insn) && !allowed.as_ref().is_some_and(|r| r.contains(&insn.addr)) {
            out.push(violation("a system call in kernel code (guest kernels may not make system calls)".into()));
        }
    }
    Ok(out)
}

/// The first VEX/EVEX/XOP-encoded instruction of an x86_64 image, as a reason to refuse it on
/// Unicorn; `None` for other architectures or a clean image.
///
/// # Errors
/// As [`scan`].
pub fn unicorn_refusal(image: &Image) -> Result<Option<String>, DisasmError> {
    if image.arch != Arch::X86_64 {
        return Ok(None);
    }
    let full = image.listing()?;
    Ok(full.iter().find(|i| x86_vex_family(&i.bytes, i.addr)).map(|i| {
        format!(
            "the image holds VEX/EVEX-encoded code (`{}` at {}), which Unicorn 2.1.5 computes wrongly for some \
             VEX.128 forms (docs/DESIGN.md): not run there",
            i.text,
            image.symbolize(i.addr)
        )
    }))
}

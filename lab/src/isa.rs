//! ISA legality, statically: every instruction of a variant's image must decode within that
//! variant's ISA (docs/DESIGN.md "Variants": riscv64 RV64GC, riscv64+zbb RV64GC + Zbb, aarch64
//! ARMv8.0-A, x86_64 baseline x86-64 with no VEX/EVEX, BMI or ADX), and no kernel may contain a
//! system-call instruction (only the driver's I/O code, between `lab_syscalls_begin` and
//! `lab_syscalls_end`, may).
//!
//! How legality is decided is the arch row's `IsaSpec::legality` ([`crate::arch`]): riscv64 and
//! aarch64: `llvm-objdump --mattr=<Variant::mattr>` ([`crate::disasm`]) prints `<unknown>` for
//! what the variant's ISA does not have. x86_64: LLVM's x86 disassembler ignores features, so
//! each instruction's bytes go through iced-x86, whose per-instruction CPUID feature list must
//! stay within the row's baseline (x86-64 psABI "Micro-architecture levels": CMOV, CX8, FPU,
//! FXSR, MMX, SCE, SSE, SSE2) plus the declared extensions' features. CET's landing pads
//! (`endbr64`, `endbr32`) are NOPs on every CPU without CET and legal in any build.
//!
//! Only code is decoded: bytes the image's symbols mark as code ([`Image::is_symbol_code`]:
//! inside a function's `.size` bytes, or up to the next symbol for a label without a size, and
//! not in a `$d` mapping-symbol region on aarch64 and riscv64). Data in `.text` (perlasm's
//! credit string after the last function, a constant table with its own `$d`) is not an
//! instruction. Symbols, not reachability from the entry points: they are what assemblers and
//! perlasm already write for every function, they need no guess at indirect branch targets (an
//! OpenSSL `poly1305_init` hands out its vector paths as pointers), and a hand-written kernel
//! without `.size` keeps the old, whole-label coverage. A stray instruction outside every symbol
//! that does run still meets the dynamic checks (illegal instruction, system call). System-call
//! encodings the decode does not see (inside another instruction, in data) are searched for at
//! every position an instruction may start ([`crate::hidden_syscall`]).

use iced_x86::{CpuidFeature, EncodingKind};

use crate::arch::{x86_64, IsaExtension, Legality, UnicornSupport};
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

/// Whether the listed instruction is a system call (the arch row's mnemonics: `ecall`, `svc`,
/// `syscall`, `sysenter`, `int`).
fn is_syscall(arch: Arch, insn: &Insn) -> bool {
    arch.spec().syscall.mnemonics.contains(&insn.mnemonic())
}

/// Why an x86 instruction is outside the variant's ISA `isa` (`baseline` CPUID features plus
/// those of the declared extensions), if it is. VEX and EVEX code is judged by the CPUID features it
/// needs, like legacy code: BLSI in an image declared `x86-64+bmi1` is legal.
fn x86_outside_baseline(bytes: &[u8], addr: u64, baseline: &[CpuidFeature], isa: &str) -> Option<String> {
    let i = x86_64::decode(bytes, addr);
    if i.is_invalid() {
        return Some("does not decode as x86-64".into());
    }
    // CET's landing pads are NOPs on every x86-64 CPU without CET (Intel SDM, ENDBR64): legal
    // in any build; compilers and perlasm put one at every function entry.
    if matches!(i.mnemonic(), iced_x86::Mnemonic::Endbr64 | iced_x86::Mnemonic::Endbr32) {
        return None;
    }
    let encoding = match i.encoding() {
        EncodingKind::Legacy => "",
        EncodingKind::VEX => "VEX-encoded (AVX/BMI family), ",
        EncodingKind::EVEX => "EVEX-encoded (AVX-512), ",
        other => return Some(format!("{other:?}-encoded, not baseline x86-64")),
    };
    let extra: Vec<String> =
        i.cpuid_features().iter().filter(|f| !baseline.contains(f)).map(|f| format!("{f:?}")).collect();
    (!extra.is_empty()).then(|| format!("{encoding}needs {}, not in {isa}", extra.join(" + ")))
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
    let isa = &variant.arch.spec().isa;
    // riscv64, aarch64: the variant's own listing; x86_64: the CPUID features it may use.
    let (own, cpuid) = match isa.legality {
        Legality::Mattr => (Some(Listing::of(&image.path, variant.arch, variant.mattr)?), Vec::new()),
        Legality::Cpuid(base) => {
            let declared = variant.extensions.iter().filter_map(|n| isa.extension(n));
            (None, base.iter().chain(declared.flat_map(|e| e.cpuid)).copied().collect())
        }
    };
    let allowed = syscall_range(image);
    let mut out = Vec::new();
    for insn in full.iter().filter(|i| image.is_symbol_code(i.addr) && !exempt(image, i.addr)) {
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
            None => x86_outside_baseline(&insn.bytes, insn.addr, &cpuid, variant.isa),
        };
        if let Some(why) = outside {
            out.push(violation(why));
        }
        if is_syscall(variant.arch, insn) && !allowed.as_ref().is_some_and(|r| r.contains(&insn.addr)) {
            out.push(violation("a system call in kernel code (guest kernels may not make system calls)".into()));
        }
    }
    // Encodings the decode above cannot see: inside other instructions, or in data.
    out.extend(crate::hidden_syscall::hidden(image, full, allowed.as_ref(), |i| is_syscall(variant.arch, i)));
    Ok(out)
}

/// The first kernel instruction that rounds by a register the psABI leaves unspecified at a
/// call (the arch row's [`crate::arch::RoundingSpec`]: RVV's `vxrm`) in an image whose kernel
/// code never writes that register, as a sentence; `None` when the image sets it, uses no such
/// instruction, or the arch has none.
///
/// # Errors
/// As [`scan`].
pub fn unset_rounding(image: &Image) -> Result<Option<String>, DisasmError> {
    let Some(rounding) = image.arch.spec().isa.vector_length.as_ref().and_then(|vl| vl.rounding.as_ref()) else {
        return Ok(None);
    };
    let Some((start, end)) = image.kernel_code() else { return Ok(None) };
    let kernel: Vec<&Insn> = image.listing()?.iter().filter(|i| (start..end).contains(&i.addr)).collect();
    let writes = |i: &Insn| {
        i.mnemonic().starts_with("csr")
            && crate::vocab::insn::operands(&i.text).split(", ").any(|o| rounding.written_through.contains(&o))
    };
    if kernel.iter().any(|i| writes(i)) {
        return Ok(None);
    }
    let user = kernel.iter().find(|i| rounding.users.iter().any(|u| i.mnemonic().starts_with(u)));
    Ok(user.map(|i| {
        format!(
            "{} (pc {:#x}): `{}` rounds by {}, which the kernel code never writes: {}",
            image.symbolize(i.addr),
            i.addr,
            i.text,
            rounding.register,
            rounding.rule
        )
    }))
}

/// An instruction of a kernel's code that Unicorn 2.1.5 cannot execute correctly: a call that
/// reaches it stops there, not run past it, instead of the whole image being refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnicornStop {
    /// Guest address of the instruction.
    pub addr: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The instruction as the widest disassembly prints it (`vle8.v v8, (a0)`).
    pub insn: String,
    /// The extension it belongs to and why Unicorn cannot run it, from the arch row
    /// (`avx2 (AVX2; VEX-encoded: Unicorn 2.1.5 computes some VEX.128 forms wrongly ...)`).
    pub extension: String,
}

/// Every instruction in the kernels' code (below `lab_kernel_text_end`, in symbol-covered code,
/// [`Image::is_symbol_code`]) of a declared extension (`extensions`, the variant's) that the
/// arch row marks `UnicornSupport::Missing`, in address order. x86_64: by each instruction's
/// CPUID features, plus any VEX/EVEX/XOP code, declared or not (`UnicornSpec::refuse`: Unicorn
/// computes some VEX.128 forms wrongly whatever the feature); riscv64 and aarch64: instructions
/// that do not decode with `--mattr` of every extension Unicorn runs but decode with a declared
/// one it lacks (one listing more per such extension). An undeclared extension's instruction is
/// no stop: it is an image finding, and traps on Unicorn as on a CPU without it. The lab's
/// driver is left out: its code is the lab's own, and the vector entry state it sets is jumped
/// over on Unicorn (`lab_vector_entry`, [`VECTOR_ENTRY`]).
///
/// # Errors
/// As [`scan`].
pub fn unicorn_stops(image: &Image, extensions: &[&str]) -> Result<Vec<UnicornStop>, DisasmError> {
    let Some((start, end)) = image.kernel_code() else { return Ok(Vec::new()) };
    let isa = &image.arch.spec().isa;
    let lacks = |e: &IsaExtension| match e.unicorn {
        UnicornSupport::Missing(why) => Some(why),
        _ => None,
    };
    let declared = |e: &IsaExtension| extensions.contains(&e.name) && lacks(e).is_some();
    let vex = image.arch.spec().unicorn.refuse.as_ref();
    if vex.is_none() && !isa.extensions.iter().any(declared) {
        return Ok(Vec::new());
    }
    let name = |e: &IsaExtension, why: &str| format!("{} ({}; {why})", e.name, e.doc);
    let full = image.listing()?;
    let code = full.iter().filter(|i| (start..end).contains(&i.addr) && image.is_symbol_code(i.addr));
    let code: Vec<&Insn> = code.filter(|i| !i.unknown() && !exempt(image, i.addr)).collect();
    let stop = |i: &Insn, extension: String| UnicornStop {
        addr: i.addr,
        len: i.bytes.len().max(1) as u64,
        insn: i.text.clone(),
        extension,
    };
    if let Legality::Cpuid(_) = isa.legality {
        let mut out = Vec::new();
        for i in code {
            let features = x86_64::decode(&i.bytes, i.addr).cpuid_features();
            let of = |e: &&IsaExtension| lacks(e).is_some() && e.cpuid.iter().any(|f| features.contains(f));
            let by_feature = isa.extensions.iter().find(of);
            let found = match (by_feature, vex.filter(|r| (r.insn)(i))) {
                (Some(e), Some(_)) => Some(name(e, lacks(e).unwrap_or_default())),
                (Some(e), None) if declared(e) => Some(name(e, lacks(e).unwrap_or_default())),
                (None, Some(r)) => Some(format!("{} ({})", r.what, r.why)),
                _ => None,
            };
            out.extend(found.map(|x| stop(i, x)));
        }
        return Ok(out);
    }
    let runs: Vec<&IsaExtension> = isa.extensions.iter().filter(|e| lacks(e).is_none()).collect();
    let own = Listing::of(&image.path, image.arch, &isa.mattr(&runs))?;
    let mut left: Vec<&Insn> = code.into_iter().filter(|i| own.at(i.addr).is_some_and(Insn::unknown)).collect();
    let missing: Vec<&IsaExtension> = isa.extensions.iter().filter(|e| declared(e)).collect();
    let mut out = Vec::new();
    for e in missing {
        if left.is_empty() {
            break;
        }
        let with = Listing::of(&image.path, image.arch, &isa.mattr(&[runs.as_slice(), &[e]].concat()))?;
        let (known, rest): (Vec<&Insn>, Vec<&Insn>) =
            left.into_iter().partition(|i| with.at(i.addr).is_some_and(|w| !w.unknown()));
        out.extend(known.into_iter().map(|i| stop(i, name(e, lacks(e).unwrap_or_default()))));
        left = rest;
    }
    out.sort_by_key(|s| s.addr);
    Ok(out)
}

/// The driver's vector entry state (riscv64 V builds: `vsetvl` to set vtype.vill, `csrw vxrm`),
/// between these two labels of `kernels/riscv64/driver.S`: the Unicorn backend jumps over it,
/// since Unicorn 2.1.5 has no vector unit and the kernel's first vector instruction stops the
/// call anyway ([`unicorn_stops`]).
pub const VECTOR_ENTRY: (&str, &str) = ("lab_vector_entry", "lab_vector_entry_end");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cet_shadow_stack_instructions_are_legal_only_where_cet_is_declared() {
        let base: Vec<CpuidFeature> = x86_64::BASELINE.to_vec();
        let isa = &Arch::X86_64.spec().isa;
        let cet: Vec<CpuidFeature> = base.iter().chain(isa.extension("cet").expect("cet row").cpuid).copied().collect();
        for (insn, bytes) in [
            ("incsspq rax", &[0xf3, 0x48, 0x0f, 0xae, 0xe8][..]),
            ("wrssq [rdi], rax", &[0x48, 0x0f, 0x38, 0xf6, 0x07]),
        ] {
            let why = x86_outside_baseline(bytes, 0, &base, "x86-64").unwrap_or_else(|| panic!("{insn} flagged"));
            assert!(why.contains("CET_SS"), "{insn}: {why}");
            assert_eq!(x86_outside_baseline(bytes, 0, &cet, "x86-64+cet"), None, "{insn} with cet declared");
        }
        assert_eq!(x86_outside_baseline(&[0xf3, 0x0f, 0x1e, 0xfa], 0, &base, "x86-64"), None, "endbr64 always");
        let declared = crate::user_kernel::DeclaredIsa::parse("x86-64+cet", Arch::X86_64).expect("x86-64+cet parses");
        assert!(declared.extensions.contains(&"cet"));
    }

    #[test]
    fn endbr64_is_legal_and_vex_code_is_judged_by_its_features() {
        let base = [CpuidFeature::INTEL8086, CpuidFeature::SSE2];
        assert_eq!(x86_outside_baseline(&[0xf3, 0x0f, 0x1e, 0xfa], 0, &base, "x86-64"), None, "endbr64");
        // blsi ecx, eax (VEX.LZ.0F38 F3 /3)
        let blsi = [0xc4, 0xe2, 0x70, 0xf3, 0xd8];
        let why = x86_outside_baseline(&blsi, 0, &base, "x86-64").expect("BMI1 is not baseline");
        assert_eq!(why, "VEX-encoded (AVX/BMI family), needs BMI1, not in x86-64");
        let with_bmi1 = [CpuidFeature::INTEL8086, CpuidFeature::SSE2, CpuidFeature::BMI1];
        assert_eq!(x86_outside_baseline(&blsi, 0, &with_bmi1, "x86-64+bmi1"), None);
    }
}

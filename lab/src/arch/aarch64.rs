//! aarch64: ARMv8-A, AAPCS64, Linux system calls through `svc #0`, Unicorn's ARM64 engine
//! (Cortex-A72 by default), qemu-user's `cortex-a72` CPU.

use unicorn_engine::{Arch as UcArch, Mode, RegisterARM64};

use super::capability::{CapabilitySpec, DispatchPath};
use super::{
    AlignSpec, Arch, ArchSpec, HotSpotSpec, IsaExtension, IsaSpec, Legality, LengthStep, McaSpec, QemuSupport,
    ReturnAddress, SpCheck, SpEffect, SpUse, StubDecoder, SyscallEncoding, SyscallSpec, Trap, TrapPc, UcInterrupt,
    UnicornSpec, UnicornSupport, VectorLengthSpec,
};
use crate::vocab::abi::{Abi, ControlField, ControlState, Int32Args, STACK_BUDGET};
use crate::vocab::insn::{operands, parse_imm};
use crate::vocab::insn::{Insn, InsnClass};
use crate::vocab::poly_ctx::{EmitReduction, PolyCtx};
use crate::vocab::tool::Tool;

/// AAPCS64 §6.1.1 (x19–x29 callee-saved) and §6.1.2 (low 64 bits of v8–v15).
pub const ABI: Abi = Abi {
    arch: Arch::Aarch64,
    saved: &[
        "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29", "d8", "d9", "d10", "d11", "d12",
        "d13", "d14", "d15",
    ],
    saved_gprs: 11,
    source: "AAPCS64 §6.1.1, §6.1.2",
    url: "https://github.com/ARM-software/abi-aa/blob/main/aapcs64/aapcs64.rst",
    int32_args: Int32Args::UpperGarbage,
    sp: "sp",
    args: ["x0", "x1", "x2", "x3"],
    stack_budget: STACK_BUDGET,
    red_zone: 0,
    clear_on_return: None,
    control: Some(ControlState {
        layout: "FPCR",
        // Linux starts a process with FPCR = 0 (round to nearest, no flush-to-zero).
        default: 0,
        // RMode = 01 (round towards plus infinity) and FZ: harmless to integer and NEON integer code.
        poison: 0x0140_0000,
        // NEP (bit 2, "zero on entry and return") is FEAT_AFP: RES0 on the Cortex-A72 and in
        // qemu 7.2, so no backend here could show a kernel setting it; not checked.
        fields: &[ControlField {
            mask: 0x01c0_1f03,
            name: "FPCR (AH, FIZ, the exception trap enables, RMode, FZ)",
            rule: "AAPCS64 §6.1.2: these FPCR bits change only through support functions that set the \
                   application's global floating-point state",
        }],
    }),
};

/// An extension the Cortex-A72 (qemu's model and Unicorn's default CPU) has: ID_AA64ISAR0 of
/// the A72 lists CRC32, AES+PMULL, SHA1 and SHA2.
const fn a72(name: &'static str, doc: &'static str, mattr: &'static str) -> IsaExtension {
    IsaExtension {
        name,
        doc,
        mattr,
        qemu: QemuSupport::InModel,
        unicorn: UnicornSupport::Decoded,
        cpuid: &[],
        cpuinfo: name,
    }
}

/// An extension beyond the Cortex-A72.
const fn beyond_a72(name: &'static str, doc: &'static str, mattr: &'static str) -> IsaExtension {
    const WHY: &str = "the Cortex-A72 model (qemu -cpu cortex-a72, Unicorn's default) does not have it";
    IsaExtension {
        name,
        doc,
        mattr,
        qemu: QemuSupport::Missing(WHY),
        unicorn: UnicornSupport::Missing(WHY),
        cpuid: &[],
        cpuinfo: name,
    }
}

/// An extension beyond the Cortex-A72 that qemu 7.2's `-cpu max` has (target/arm/cpu64.c
/// `aarch64_max_initfn`; checked with qemu-aarch64 7.2). `max` cannot turn its other features
/// off, so a build declaring one of these runs on a CPU with more than it declares: the static
/// scan (`llvm-objdump --mattr` of exactly the declared ISA) keeps the build honest.
const fn in_max(name: &'static str, doc: &'static str, mattr: &'static str, unicorn: &'static str) -> IsaExtension {
    IsaExtension {
        name,
        doc,
        mattr,
        qemu: QemuSupport::Model("max"),
        unicorn: UnicornSupport::Missing(unicorn),
        cpuid: &[],
        cpuinfo: name,
    }
}

/// Unicorn 2.1.5's ARM64 engine (QEMU 5.0) has the Cortex-A72's features only.
const A72_ONLY: &str = "Unicorn 2.1.5 models the Cortex-A72, which does not have it";

/// Arm ARM (DDI 0487) feature names, in `armv8-a+<ext>` spelling; `v8.5a` stands for every
/// instruction up to ARMv8.5-A (used to print anything).
const EXTENSIONS: &[IsaExtension] = &[
    beyond_a72("v8.5a", "every instruction up to ARMv8.5-A", "+v8.5a"),
    a72("crc", "CRC32 instructions (FEAT_CRC32)", "+crc"),
    a72("crypto", "AES, PMULL, SHA1, SHA256 (FEAT_AES, FEAT_PMULL, FEAT_SHA1, FEAT_SHA256)", "+crypto"),
    a72("aes", "AES and PMULL (FEAT_AES, FEAT_PMULL)", "+aes"),
    a72("sha2", "SHA1 and SHA256 (FEAT_SHA1, FEAT_SHA256)", "+sha2"),
    in_max("sha3", "SHA3 and SHA512 (FEAT_SHA3, FEAT_SHA512)", "+sha3", A72_ONLY),
    in_max("sm4", "SM3 and SM4 (FEAT_SM3, FEAT_SM4)", "+sm4", A72_ONLY),
    in_max("lse", "large system extensions: atomics (FEAT_LSE)", "+lse", A72_ONLY),
    in_max("rcpc", "load-acquire RCpc (FEAT_LRCPC)", "+rcpc", A72_ONLY),
    in_max("dotprod", "dot product (FEAT_DotProd)", "+dotprod", A72_ONLY),
    in_max("fullfp16", "half-precision arithmetic (FEAT_FP16)", "+fullfp16", A72_ONLY),
    in_max("sve", "scalable vector extension (FEAT_SVE)", "+sve", "Unicorn 2.1.5 has no SVE"),
    in_max("sve2", "SVE2 (FEAT_SVE2)", "+sve2", "Unicorn 2.1.5 has no SVE"),
];

/// SVE's vector length as a run dimension: any multiple of 128 bits up to 2048 (Arm ARM,
/// `ZCR_ELx.LEN`); qemu-user 7.2 sets the length a user process starts with through the CPU
/// property `sve-default-vector-length=<bytes>` (checked here with `rdvl`).
const SVE_VL: VectorLengthSpec = VectorLengthSpec {
    name: "SVE VL",
    column: "sve-vl",
    extensions: &["sve", "sve2"],
    bits: 128..=2048,
    step: LengthStep::Multiple(128),
    defaults: &[128, 256, 512],
    qemu_property: "sve-default-vector-length={bytes}",
    qemu_fixed: "",
    source: "AAPCS64 §6.1.3 (SVE registers): z0-z31 and p0-p15 are caller-saved in a base-PCS call",
    unconfigured: None,
    rounding: None,
    // `cntd`: 64-bit elements per vector (2048 bits: 32, within an exit status).
    probe: ".globl _start\n_start:\n\tcntd x0\n\tmov x8, #93\n\tsvc #0\n",
    probe_unit_bits: 64,
};

fn syscall_name(nr: usize) -> Option<&'static str> {
    syscalls::aarch64::Sysno::new(nr).map(|s| s.name())
}

/// The aarch64 row.
pub static SPEC: ArchSpec = ArchSpec {
    arch: Arch::Aarch64,
    name: "aarch64",
    rust_arch: "aarch64",
    elf: object::Architecture::Aarch64,
    c_guard: "defined(__aarch64__)",
    clang_triple: "aarch64-linux-gnu",
    clang_flags: &[],
    isa: IsaSpec {
        base: "armv8-a",
        base_mattr: "+fp-armv8,+neon",
        qemu_cpu_model: "cortex-a72",
        legality: Legality::Mattr,
        extensions: EXTENSIONS,
        levels: &[],
        march_separator: Some("+"),
        vector_length: Some(SVE_VL),
    },
    objdump_args: &[],
    asm_prologue: "",
    syscall: SyscallSpec {
        mnemonics: &["svc"],
        len: 4,
        name: syscall_name,
        // Arm ARM C6.2 "SVC": 0xd4000001 | imm16 << 5 (mask 0xffe0001f), in any aligned word.
        encodings: &[SyscallEncoding {
            name: "svc",
            bytes: &[0x01, 0x00, 0x00, 0xd4],
            mask: &[0x1f, 0x00, 0xe0, 0xff],
        }],
        step: 4,
    },
    abi: &ABI,
    qemu: Tool { program: "qemu-aarch64", package: "qemu-user" },
    unicorn: UnicornSpec {
        arch: UcArch::ARM64,
        mode: Mode::LITTLE_ENDIAN,
        init: &[],
        sp: RegisterARM64::SP as i32,
        callee_saved: &[
            RegisterARM64::X19 as i32,
            RegisterARM64::X20 as i32,
            RegisterARM64::X21 as i32,
            RegisterARM64::X22 as i32,
            RegisterARM64::X23 as i32,
            RegisterARM64::X24 as i32,
            RegisterARM64::X25 as i32,
            RegisterARM64::X26 as i32,
            RegisterARM64::X27 as i32,
            RegisterARM64::X28 as i32,
            RegisterARM64::X29 as i32,
            RegisterARM64::D8 as i32,
            RegisterARM64::D9 as i32,
            RegisterARM64::D10 as i32,
            RegisterARM64::D11 as i32,
            RegisterARM64::D12 as i32,
            RegisterARM64::D13 as i32,
            RegisterARM64::D14 as i32,
            RegisterARM64::D15 as i32,
        ],
        return_address: ReturnAddress::Register(RegisterARM64::LR as i32),
        syscall_hooks: &[],
        // QEMU's EXCP_UDEF = 1, EXCP_SWI = 2 (pc past the `svc`), EXCP_DATA_ABORT = 4 (here an
        // alignment fault: unmapped memory reaches the memory hook first; FAR_EL1 may hold the
        // address), EXCP_BKPT = 7.
        interrupts: &[
            UcInterrupt { intnos: &[1], trap: Trap::IllegalInstruction, pc: TrapPc::Pc, addr_register: None },
            UcInterrupt { intnos: &[2], trap: Trap::SystemCall, pc: TrapPc::Before(4), addr_register: None },
            UcInterrupt {
                intnos: &[4],
                trap: Trap::Misaligned,
                pc: TrapPc::Pc,
                addr_register: Some(RegisterARM64::FAR_EL1 as i32),
            },
            UcInterrupt { intnos: &[7], trap: Trap::Breakpoint, pc: TrapPc::Pc, addr_register: None },
        ],
        refuse: None,
    },
    mca: McaSpec {
        triple: "aarch64",
        models: &["cortex-a55", "cortex-a72", "neoverse-n1"],
        // Cores with SVE2 (Arm Neoverse N2 and V2 TRMs), both modelled by llvm-mca-19.
        by_extension: &[("sve2", &["neoverse-n2", "neoverse-v2"])],
        // Both implement SVE2 with 128-bit vectors (Arm's product pages).
        model_vlen: &[("neoverse-n2", 128), ("neoverse-v2", 128)],
        vector_reading: None,
    },
    spin_source: include_str!("../../guest/aarch64/spin.S"),
    openssl_poly1305: PolyCtx {
        bytes: 48,
        r_at: 32,
        s1_at: None,
        emit: EmitReduction::Compare,
        vector_flag_at: Some(24),
        source: "poly1305-armv8.pl: h[3] at 0, is_base2_26 24 (0: base 2^64), r0 32, r1 40",
    },
    classify,
    align: AlignSpec {
        sp_use,
        entry_sp: 0,
        access_rule: Some(
            "AArch64 Linux faults on this (SP alignment check: SCTLR_EL1.SA0 is set at EL0; Arm ARM DDI 0487, \
             \"SP alignment checking\"), though QEMU and Unicorn do not model it",
        ),
        call_rule: None,
        aligned_only,
        aligned_rule: "ARMv8.0-A exclusive and acquire/release accesses must be aligned to their size or they take an \
             alignment fault (Arm ARM DDI 0487, \"Alignment of data accesses\")",
        address: Some(base_address),
        fault_regs: &[],
        unicorn_regs: &UNICORN_REGS,
    },
    capability_trap: "udf #0",
    capability: CapabilitySpec {
        symbol: "OPENSSL_armcap_P",
        words: 1,
        source: "OpenSSL crypto/arm_arch.h (ARMV7_NEON = 1 << 0, ARMV9_SVE2_POLY1305 = 1 << 17)",
        paths: &[
            DispatchPath { name: "scalar", bits: &[], marker: None, extensions: &[], source: "no bit set" },
            DispatchPath {
                name: "neon",
                bits: &[(0, 1 << 0)],
                marker: Some("poly1305_blocks_neon"),
                extensions: &[],
                source: "poly1305-armv8.pl poly1305_init: `tst w17,#ARMV7_NEON`",
            },
            DispatchPath {
                name: "sve2",
                bits: &[(0, 1 << 0 | 1 << 17)],
                marker: Some("poly1305_blocks_sve2"),
                extensions: &["sve2"],
                source: "poly1305_init: `tst w17,#ARMV9_SVE2_POLY1305` (the code is poly1305-armv9-sve2.pl's)",
            },
        ],
    },
    hotspot: HotSpotSpec {
        os_arch: &["aarch64"],
        debian_arch: "arm64",
        variant_prefix: "hotspot-aarch64",
        jdk: "Debian's openjdk-17-jdk-headless:arm64 through dpkg multiarch, or a user's JDK folder",
        check: Some(StubDecoder::A64),
        // a zero word is UDF #0
        gap_fill: 0,
    },
};

/// Unicorn's ids of x0-x30 and sp, by name (for [`base_address`] under Unicorn).
const UNICORN_REGS: [(&str, i32); 32] = {
    const NAMES: [&str; 31] = [
        "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15", "x16",
        "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29", "x30",
    ];
    let mut out = [("sp", RegisterARM64::SP as i32); 32];
    let mut i = 0;
    while i < 29 {
        out[i] = (NAMES[i], RegisterARM64::X0 as i32 + i as i32);
        i += 1;
    }
    out[29] = (NAMES[29], RegisterARM64::X29 as i32);
    out[30] = (NAMES[30], RegisterARM64::X30 as i32);
    out
};

/// What an AArch64 instruction does with sp (llvm-objdump text): a load or store with an
/// `[sp` base is checked, and its pre- or post-index writeback moves sp after the access (Arm
/// ARM: the SP alignment check uses the base before the offset); `add`/`sub sp, sp, #imm`
/// moves it; any other write to sp, `b`, `br` and `ret` end the tracking.
fn sp_use(insn: &Insn) -> SpUse {
    let m = insn.mnemonic();
    let ops = operands(&insn.text);
    if let Some(at) = ops.find("[sp").filter(|_| m.starts_with("ld") || m.starts_with("st")) {
        return SpUse { check: Some(SpCheck::Access), then: writeback(&ops[at..]) };
    }
    if ["b", "br", "ret"].contains(&m) {
        return SpUse { check: None, then: SpEffect::Unknown };
    }
    let mut parts = ops.split(", ");
    if !matches!(parts.next(), Some("sp" | "wsp")) {
        return SpUse::NONE;
    }
    let adjust = match (m, parts.next(), parts.next(), parts.next()) {
        ("add" | "sub", Some("sp"), Some(imm), shift) => {
            let scale = match shift {
                None => Some(1),
                Some("lsl #12") => Some(1 << 12),
                Some(_) => None,
            };
            let signed =
                |(v, k): (i64, i64)| if m == "sub" { v.wrapping_mul(k).wrapping_neg() } else { v.wrapping_mul(k) };
            parse_imm(imm).zip(scale).map(signed)
        }
        _ => None,
    };
    SpUse { check: None, then: adjust.map_or(SpEffect::Unknown, SpEffect::Adjust) }
}

/// How the memory operand `mem` (from `[sp` on) moves sp: `[sp, #-16]!` by -16 (pre-index),
/// `[sp], #16` by 16 (post-index), a plain offset not at all.
fn writeback(mem: &str) -> SpEffect {
    if let Some(inner) = mem.strip_suffix("]!") {
        return inner.split(", ").nth(1).and_then(parse_imm).map_or(SpEffect::Unknown, SpEffect::Adjust);
    }
    match mem.split_once("], ") {
        Some((_, post)) => parse_imm(post).map_or(SpEffect::Unknown, SpEffect::Adjust),
        None => SpEffect::Keep,
    }
}

/// The size of an ARMv8.0 access that must be aligned to it: exclusives (`ldxr`, `stlxr`,
/// pairs twice the register) and acquire/release (`ldar`, `stlr`); `b`/`h` forms 1 and 2.
fn aligned_only(insn: &Insn) -> Option<u64> {
    const EXCL: &[&str] =
        &["ldxr", "ldaxr", "stxr", "stlxr", "ldxp", "ldaxp", "stxp", "stlxp", "ldar", "stlr", "ldapr"];
    let m = insn.mnemonic();
    let (base, size) = match m.strip_suffix('b').or_else(|| m.strip_suffix('h')) {
        Some(b) if EXCL.contains(&b) => (b, Some(if m.ends_with('b') { 1 } else { 2 })),
        _ => (m, None),
    };
    if !EXCL.contains(&base) {
        return None;
    }
    if let Some(s) = size {
        return Some(s);
    }
    // The data register: the first operand, after the status register of a store-exclusive.
    let ops: Vec<&str> = operands(&insn.text).split(", ").collect();
    let data = if base.starts_with("st") && base.contains('x') { ops.get(1) } else { ops.first() }?;
    let reg = if data.starts_with('x') { 8 } else { 4 };
    Some(if base.ends_with('p') { 2 * reg } else { reg })
}

/// The address of a base-register-only memory operand (`[x9]`, `[sp]`, `[x9, #0]`: every form
/// the aligned-only instructions have).
fn base_address(insn: &Insn, reg: &mut dyn FnMut(&str) -> Option<u64>) -> Option<u64> {
    let ops = operands(&insn.text);
    let mem = &ops[ops.find('[')? + 1..];
    let inner = mem.split(']').next()?;
    let mut parts = inner.split(", ");
    let base = reg(parts.next()?)?;
    let offset = parts.next().map_or(Some(0), parse_imm)?;
    Some(base.wrapping_add(offset as u64))
}

/// The class of an AArch64 instruction, by mnemonic.
/// Whether operands name a NEON or SVE register: `v3.4s`, `q0`, `z1.d`, `p0/z`, `{ v0.16b }`
/// (not the scalar FP `d8`/`s0`, which AAPCS64 treats as FP registers).
fn names_vector_register(ops: &str) -> bool {
    ops.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '/')).any(|w| {
        let w = w.to_ascii_lowercase();
        let Some(first) = w.chars().next() else { return false };
        let rest = &w[1..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let after = &rest[digits.len()..];
        !digits.is_empty()
            && match first {
                'v' | 'z' => after.starts_with('.') || (first == 'z' && after.is_empty()),
                'q' => after.is_empty(),
                'p' => after.is_empty() || after.starts_with('/') || after.starts_with('.'),
                _ => false,
            }
    })
}

fn classify(insn: &Insn) -> InsnClass {
    const BRANCH: &[&str] = &["b", "bl", "br", "blr", "ret", "cbz", "cbnz", "tbz", "tbnz"];
    const MUL: &[&str] = &[
        "mul", "madd", "msub", "mneg", "smull", "umull", "smulh", "umulh", "smaddl", "umaddl", "smsubl", "umsubl",
        "smnegl", "umnegl", "sdiv", "udiv",
    ];
    let m = insn.mnemonic().to_ascii_lowercase();
    let m = m.as_str();
    if BRANCH.contains(&m) || m.starts_with("b.") {
        InsnClass::Branch
    } else if m.starts_with("crc32") || m.starts_with("aes") || m.starts_with("sha") || m.starts_with("pmull") {
        InsnClass::Extension
    } else if names_vector_register(operands(&insn.text)) {
        InsnClass::Vector
    } else if MUL.contains(&m) {
        InsnClass::Multiply
    } else if m.starts_with("st") {
        InsnClass::Store
    } else if m.starts_with("ld") || m == "prfm" {
        InsnClass::Load
    } else {
        InsnClass::Alu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(text: &str) -> Insn {
        Insn { addr: 0x1000, bytes: vec![0; 4], text: text.into() }
    }

    #[test]
    fn sp_based_accesses_are_checked_and_sp_moves_tracked() {
        let access = |then| SpUse { check: Some(SpCheck::Access), then };
        let moves = |then| SpUse { check: None, then };
        let cases = [
            ("str x0, [sp]", access(SpEffect::Keep)),
            ("ldr q0, [sp, #32]", access(SpEffect::Keep)),
            ("stp x29, x30, [sp, #-32]!", access(SpEffect::Adjust(-32))),
            ("ldp x19, x20, [sp], #32", access(SpEffect::Adjust(32))),
            ("ld1 { v0.16b }, [sp], x2", access(SpEffect::Unknown)),
            ("sub sp, sp, #8", moves(SpEffect::Adjust(-8))),
            ("add sp, sp, #1, lsl #12", moves(SpEffect::Adjust(4096))),
            ("mov sp, x29", moves(SpEffect::Unknown)),
            ("ret", moves(SpEffect::Unknown)),
            ("mov x29, sp", SpUse::NONE),
            ("ldr x0, [x1, #8]", SpUse::NONE),
        ];
        for (text, want) in cases {
            assert_eq!(sp_use(&insn(text)), want, "{text}");
        }
    }

    #[test]
    fn exclusives_and_acquire_release_need_their_size() {
        let cases = [
            ("ldxr x10, [x9]", Some(8)),
            ("ldaxr w1, [x0]", Some(4)),
            ("stxr w1, x0, [x2]", Some(8)),
            ("stlxrh w1, w0, [x2]", Some(2)),
            ("ldxp x0, x1, [x2]", Some(16)),
            ("ldarb w0, [x1]", Some(1)),
            ("stlr w0, [x1]", Some(4)),
            ("ldr x0, [x1]", None),
            ("ldp x0, x1, [x2]", None),
        ];
        for (text, want) in cases {
            assert_eq!(aligned_only(&insn(text)), want, "{text}");
        }
        let mut regs = |r: &str| (r == "x9").then_some(0x2001);
        assert_eq!(base_address(&insn("ldxr x10, [x9]"), &mut regs), Some(0x2001));
    }
}

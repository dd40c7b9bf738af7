//! x86_64: baseline x86-64 (x86-64-v1), System V AMD64 psABI, Linux system calls through
//! `syscall`, Unicorn's X86 engine in 64-bit mode (Haswell by default), qemu-user's `qemu64` CPU.
//! The disassembler ignores features here, so legality and instruction classes come from
//! iced-x86's decoder and instruction info, not from llvm-objdump's text.

use iced_x86::{
    CpuidFeature, Decoder, DecoderOptions, EncodingKind, FlowControl, Instruction, InstructionInfoFactory, Mnemonic,
    OpAccess, OpKind, Register,
};
use unicorn_engine::{Arch as UcArch, Mode, RegisterX86, X86Insn};

use super::capability::{CapabilitySpec, DispatchPath};
use super::{
    AlignSpec, Arch, ArchSpec, HotSpotSpec, IsaExtension, IsaLevel, IsaSpec, Legality, McaSpec, QemuSupport,
    ReturnAddress, SpCheck, SpEffect, SpUse, StubDecoder, SyscallEncoding, SyscallSpec, Trap, TrapPc, UcInterrupt,
    UnicornRefusal, UnicornSpec, UnicornSupport,
};
use crate::vocab::abi::{Abi, ControlField, ControlState, Int32Args, ReturnFlag, STACK_BUDGET};
use crate::vocab::insn::{Insn, InsnClass};
use crate::vocab::poly_ctx::{EmitReduction, PolyCtx};
use crate::vocab::tool::Tool;

/// RFLAGS bit 10, the direction flag, which must be clear on return (SysV psABI §3.2.1).
pub const RFLAGS_DF: u64 = 1 << 10;

/// System V AMD64 psABI §3.2.1, Figure 3.4: rbx, rbp, r12–r15 belong to the caller; DF clear.
pub const ABI: Abi = Abi {
    arch: Arch::X86_64,
    saved: &["rbx", "rbp", "r12", "r13", "r14", "r15"],
    saved_gprs: 6,
    source: "System V AMD64 psABI §3.2.1 (Figure 3.4)",
    url: "https://gitlab.com/x86-psABIs/x86-64-ABI",
    int32_args: Int32Args::UpperGarbage,
    sp: "rsp",
    args: ["rdi", "rsi", "rdx", "rcx"],
    stack_budget: STACK_BUDGET,
    red_zone: 128,
    clear_on_return: Some(ReturnFlag { mask: RFLAGS_DF, name: "the direction flag (DF)" }),
    control: Some(ControlState {
        layout: "MXCSR in bits 0-31, the x87 control word in bits 32-47",
        // Linux's initial MXCSR 0x1f80 (every exception masked, round to nearest) and x87
        // control word 0x037f (Intel SDM vol. 1, 8.1.5 and 10.2.3.3).
        default: 0x0000_037f_0000_1f80,
        // MXCSR: round down (RC = 01) and flush-to-zero; x87: round toward zero (RC = 11) and
        // double precision (PC = 10). Every exception stays masked.
        poison: 0x0000_0e7f_0000_bf80,
        fields: &[
            ControlField {
                mask: 0xffc0,
                name: "the MXCSR control bits (DAZ, exception masks, RC, FTZ)",
                rule: "System V AMD64 psABI §3.2.1: the control bits of MXCSR are callee-saved, its status bits \
                       caller-saved",
            },
            ControlField {
                mask: 0x1f3f << 32,
                name: "the x87 control word",
                rule: "System V AMD64 psABI §3.2.1: the x87 control word is callee-saved",
            },
        ],
    }),
};

/// CPUID features of baseline x86-64 (x86-64 psABI "Micro-architecture levels": x86-64-v1 is
/// CMOV, CX8, FPU, FXSR, MMX, SCE, SSE, SSE2) and of every earlier x86 generation.
pub const BASELINE: &[CpuidFeature] = &[
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

/// Unicorn computes some VEX.128 forms wrongly (docs/DESIGN.md "Backend facts").
const VEX_ON_UNICORN: UnicornSupport =
    UnicornSupport::Missing("VEX-encoded: Unicorn 2.1.5 computes some VEX.128 forms wrongly (docs/DESIGN.md)");

/// An extension whose qemu `-cpu` property is `property` (qemu64 has none of them by default).
const fn ext(
    name: &'static str,
    property: &'static str,
    doc: &'static str,
    unicorn: UnicornSupport,
    cpuid: &'static [CpuidFeature],
) -> IsaExtension {
    IsaExtension {
        name,
        doc,
        mattr: "",
        qemu: QemuSupport::Property { name: property, default_on: false },
        unicorn,
        cpuid,
        cpuinfo: name,
    }
}

const NO_SHA_ON_UNICORN: UnicornSupport =
    UnicornSupport::Missing("Unicorn 2.1.5's default CPU (Haswell) has no SHA-NI");

/// An AVX-512 row: qemu 7.2's TCG has none, Unicorn runs no VEX/EVEX code.
const fn avx512(name: &'static str, cpuid: &'static [CpuidFeature]) -> IsaExtension {
    IsaExtension {
        name,
        doc: "AVX-512 (EVEX-encoded)",
        mattr: "",
        qemu: QemuSupport::Missing("qemu 7.2's TCG has no AVX-512"),
        unicorn: UnicornSupport::Missing("EVEX-encoded: Unicorn 2.1.5 has no AVX-512"),
        cpuid,
        cpuinfo: name,
    }
}

/// x86-64 psABI "Micro-architecture levels" (x86-64-v2: CMPXCHG16B, LAHF-SAHF, POPCNT, SSE3,
/// SSE4.1, SSE4.2, SSSE3; v3 adds AVX, AVX2, BMI1, BMI2, F16C, FMA, LZCNT, MOVBE, OSXSAVE; v4
/// adds AVX512F/BW/CD/DQ/VL).
const V2: &[&str] = &["cx16", "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2"];
const V3: &[&str] = &[
    "cx16", "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt",
    "movbe", "xsave",
];
const V4: &[&str] = &[
    "cx16", "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt",
    "movbe", "xsave", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl",
];

/// Extensions by their CPUID names (Intel SDM vol. 2, "CPUID"); qemu's `-cpu` property names as
/// `qemu-x86_64 -cpu help` (7.2) lists them under "Recognized CPUID flags" (`lab doctor` checks
/// each); the `/proc/cpuinfo` flag as Linux spells it (arch/x86/include/asm/cpufeatures.h: the
/// name in the comment, else the `X86_FEATURE_` suffix in lower case), kept by a unit test.
/// Unicorn's default CPU is Haswell, which has no ADX.
const EXTENSIONS: &[IsaExtension] = &[
    ext("popcnt", "popcnt", "POPCNT", UnicornSupport::Decoded, &[CpuidFeature::POPCNT]),
    // Linux lists LZCNT as `abm` (AMD's "advanced bit manipulation", CPUID 8000_0001h:ECX[5]).
    IsaExtension {
        cpuinfo: "abm",
        ..ext("lzcnt", "abm", "LZCNT (ABM)", UnicornSupport::Decoded, &[CpuidFeature::LZCNT])
    },
    ext("movbe", "movbe", "MOVBE", UnicornSupport::Decoded, &[CpuidFeature::MOVBE]),
    ext("bmi1", "bmi1", "bit manipulation 1 (ANDN, BEXTR, BLSI, TZCNT...)", VEX_ON_UNICORN, &[CpuidFeature::BMI1]),
    ext("bmi2", "bmi2", "bit manipulation 2 (MULX, RORX, SHLX, PDEP...)", VEX_ON_UNICORN, &[CpuidFeature::BMI2]),
    ext(
        "adx",
        "adx",
        "multi-precision add-carry (ADCX, ADOX)",
        UnicornSupport::Missing("Unicorn 2.1.5's default CPU (Haswell) has no ADX"),
        &[CpuidFeature::ADX],
    ),
    ext("avx", "avx", "AVX", VEX_ON_UNICORN, &[CpuidFeature::AVX]),
    ext("avx2", "avx2", "AVX2", VEX_ON_UNICORN, &[CpuidFeature::AVX2]),
    ext("cx16", "cx16", "CMPXCHG16B", UnicornSupport::Decoded, &[CpuidFeature::CMPXCHG16B]),
    // qemu and Linux both call SSE3 `pni` ("Prescott New Instructions").
    IsaExtension { cpuinfo: "pni", ..ext("sse3", "pni", "SSE3", UnicornSupport::Decoded, &[CpuidFeature::SSE3]) },
    ext("ssse3", "ssse3", "SSSE3", UnicornSupport::Decoded, &[CpuidFeature::SSSE3]),
    IsaExtension {
        cpuinfo: "sse4_1",
        ..ext("sse4.1", "sse4.1", "SSE4.1", UnicornSupport::Decoded, &[CpuidFeature::SSE4_1])
    },
    IsaExtension {
        cpuinfo: "sse4_2",
        ..ext("sse4.2", "sse4.2", "SSE4.2", UnicornSupport::Decoded, &[CpuidFeature::SSE4_2])
    },
    ext("aes", "aes", "AES-NI", UnicornSupport::Decoded, &[CpuidFeature::AES]),
    ext(
        "pclmulqdq",
        "pclmulqdq",
        "carry-less multiply (PCLMULQDQ)",
        UnicornSupport::Decoded,
        &[CpuidFeature::PCLMULQDQ],
    ),
    ext("xsave", "xsave", "XSAVE", UnicornSupport::Decoded, &[CpuidFeature::XSAVE]),
    ext("fma", "fma", "FMA3", VEX_ON_UNICORN, &[CpuidFeature::FMA]),
    ext("f16c", "f16c", "F16C", VEX_ON_UNICORN, &[CpuidFeature::F16C]),
    IsaExtension {
        qemu: QemuSupport::Missing("qemu 7.2's TCG has no SHA-NI"),
        cpuinfo: "sha_ni",
        ..ext("sha", "sha-ni", "SHA-NI (SHA1, SHA256)", NO_SHA_ON_UNICORN, &[CpuidFeature::SHA])
    },
    avx512("avx512f", &[CpuidFeature::AVX512F]),
    avx512("avx512bw", &[CpuidFeature::AVX512BW]),
    avx512("avx512cd", &[CpuidFeature::AVX512CD]),
    avx512("avx512dq", &[CpuidFeature::AVX512DQ]),
    avx512("avx512vl", &[CpuidFeature::AVX512VL]),
    avx512("avx512ifma", &[CpuidFeature::AVX512_IFMA]),
    // CET (Intel SDM vol. 1 ch. 17): declaring it allows the shadow-stack instructions (WRSS,
    // INCSSP, RDSSP, SETSSBSY...) and the IBT ones; `endbr64`/`endbr32` are legal without it
    // (NOPs on every CPU without CET). A process runs shadow-stack instructions only once it
    // has enabled a shadow stack (Linux 6.6+ `arch_prctl(ARCH_SHSTK_ENABLE)`, listed as the
    // kernel's `user_shstk` flag); neither qemu 7.2's TCG nor Unicorn 2.1.5 implements CET.
    IsaExtension {
        name: "cet",
        doc: "CET shadow stack and indirect-branch tracking",
        mattr: "",
        qemu: QemuSupport::Missing("qemu 7.2's TCG has no CET"),
        unicorn: UnicornSupport::Missing("Unicorn 2.1.5 has no CET"),
        cpuid: &[CpuidFeature::CET_SS, CpuidFeature::CET_IBT],
        cpuinfo: "user_shstk",
    },
];

fn syscall_name(nr: usize) -> Option<&'static str> {
    syscalls::x86_64::Sysno::new(nr).map(|s| s.name())
}

/// The x86_64 row.
pub static SPEC: ArchSpec = ArchSpec {
    arch: Arch::X86_64,
    name: "x86_64",
    rust_arch: "x86_64",
    elf: object::Architecture::X86_64,
    c_guard: "defined(__x86_64__)",
    clang_triple: "x86_64-linux-gnu",
    clang_flags: &[],
    isa: IsaSpec {
        base: "x86-64",
        base_mattr: "",
        qemu_cpu_model: "qemu64",
        legality: Legality::Cpuid(BASELINE),
        extensions: EXTENSIONS,
        levels: &[
            IsaLevel { name: "x86-64-v2", implies: V2 },
            IsaLevel { name: "x86-64-v3", implies: V3 },
            IsaLevel { name: "x86-64-v4", implies: V4 },
        ],
        march_separator: None,
        vector_length: None,
    },
    objdump_args: &["--x86-asm-syntax=intel"],
    asm_prologue: ".intel_syntax noprefix\n",
    syscall: SyscallSpec {
        mnemonics: &["syscall", "sysenter", "int"],
        len: 2,
        name: syscall_name,
        // Intel SDM vol. 2B: SYSCALL 0f 05, SYSENTER 0f 34, INT 0x80 cd 80; at any byte.
        encodings: &[
            SyscallEncoding { name: "syscall", bytes: &[0x0f, 0x05], mask: &[0xff, 0xff] },
            SyscallEncoding { name: "sysenter", bytes: &[0x0f, 0x34], mask: &[0xff, 0xff] },
            SyscallEncoding { name: "int 0x80", bytes: &[0xcd, 0x80], mask: &[0xff, 0xff] },
        ],
        step: 1,
    },
    abi: &ABI,
    qemu: Tool { program: "qemu-x86_64", package: "qemu-user" },
    unicorn: UnicornSpec {
        arch: UcArch::X86,
        mode: Mode::MODE_64,
        // RFLAGS.IF is set in a user process (a kernel's `pushfq` reads 0x2xx natively and under
        // qemu-user); Unicorn starts with it clear (issue 28).
        init: &[(RegisterX86::EFLAGS as i32, 0x202, "RFLAGS.IF")],
        sp: RegisterX86::RSP as i32,
        callee_saved: &[
            RegisterX86::RBX as i32,
            RegisterX86::RBP as i32,
            RegisterX86::R12 as i32,
            RegisterX86::R13 as i32,
            RegisterX86::R14 as i32,
            RegisterX86::R15 as i32,
        ],
        // A `call` pushed the return address: rsp is 8 mod 16 at entry (SysV §3.2.2).
        return_address: ReturnAddress::Stack,
        // The hook sees the pc of the `syscall`/`sysenter` itself (measured).
        syscall_hooks: &[X86Insn::SYSCALL, X86Insn::SYSENTER],
        // #UD = 6, #BP = 3, #DE = 0; `int 0x80`: the pc is past the 2-byte instruction.
        interrupts: &[
            UcInterrupt { intnos: &[6], trap: Trap::IllegalInstruction, pc: TrapPc::Pc, addr_register: None },
            UcInterrupt { intnos: &[3], trap: Trap::Breakpoint, pc: TrapPc::Pc, addr_register: None },
            UcInterrupt { intnos: &[0], trap: Trap::Arithmetic, pc: TrapPc::Pc, addr_register: None },
            UcInterrupt { intnos: &[0x80], trap: Trap::SystemCall, pc: TrapPc::Before(2), addr_register: None },
        ],
        refuse: Some(UnicornRefusal {
            insn: vex_family,
            what: "VEX/EVEX-encoded code",
            why: "which Unicorn 2.1.5 computes wrongly for some VEX.128 forms (docs/DESIGN.md)",
        }),
    },
    mca: McaSpec {
        triple: "x86_64",
        models: &["skylake", "znver3"],
        // Skylake (client) and Zen 3 have no AVX-512; Ice Lake server and Zen 4 do.
        by_extension: &[("avx512f", &["icelake-server", "znver4"])],
        model_vlen: &[],
        vector_reading: None,
    },
    spin_source: include_str!("../../guest/x86_64/spin.S"),
    openssl_poly1305: PolyCtx {
        bytes: 40,
        r_at: 24,
        s1_at: None,
        emit: EmitReduction::Compare,
        vector_flag_at: Some(20),
        source: "poly1305-x86_64.pl: h[3] at 0 (is_base2_26 = upper half of h2 for AVX), r0 24, r1 32",
    },
    classify,
    align: AlignSpec {
        sp_use,
        // The caller's `call` pushed the return address (SysV §3.2.2).
        entry_sp: 8,
        access_rule: None,
        call_rule: Some(
            "the System V AMD64 psABI requires it at every call (§3.2.2: rsp + 8 is a multiple of 16 at function \
             entry), and callees rely on it for aligned SSE spills",
        ),
        aligned_only,
        aligned_rule:
            "a misaligned memory operand of an aligned-only SSE/AVX instruction raises #GP (Intel SDM vol. 2, \
             MOVDQA: \"the operand must be aligned on a 16-byte boundary or a general-protection exception (#GP) will \
             be generated\"), which QEMU 5 (Unicorn) does not check",
        address: Some(operand_address),
        fault_regs: &GPRS,
        unicorn_regs: &UNICORN_REGS,
    },
    capability_trap: "ud2",
    capability: CapabilitySpec {
        symbol: "OPENSSL_ia32cap_P",
        words: 10,
        source: "OpenSSL include/internal/cryptlib.h (OPENSSL_IA32CAP_P_MAX_INDEXES = 10); word 1 = CPUID.1:ECX, \
                 word 2 = CPUID.7.0:EBX (crypto/x86_64cpuid.pl)",
        paths: &[
            DispatchPath { name: "scalar", bits: &[], marker: None, extensions: &[], source: "no bit set" },
            DispatchPath {
                name: "avx",
                bits: &[(1, 1 << 28 | 1 << 27)],
                marker: Some("poly1305_blocks_avx"),
                extensions: &["xsave", "avx"],
                source: "poly1305-x86_64.pl poly1305_init: `bt $60-32` of the qword at +4 (word 1 bit 28, AVX)",
            },
            DispatchPath {
                name: "avx2",
                bits: &[(1, 1 << 28 | 1 << 27), (2, 1 << 5)],
                marker: Some("poly1305_blocks_avx2"),
                extensions: &["xsave", "avx", "avx2"],
                source: "poly1305_init: `bt $5+32` (word 2 bit 5, AVX2)",
            },
            DispatchPath {
                name: "avx512f",
                bits: &[(1, 1 << 28 | 1 << 27), (2, 1 << 5 | 1 << 16 | 1 << 30 | 1 << 31)],
                marker: Some("poly1305_blocks_avx512"),
                extensions: &["xsave", "avx", "avx2", "avx512f", "avx512bw", "avx512vl"],
                source: "poly1305_blocks_avx2 (len >= 512): word 2 & (1<<31|1<<30|1<<16), bit 16 (AVX512F)",
            },
            DispatchPath {
                name: "avx512ifma",
                bits: &[(1, 1 << 28 | 1 << 27), (2, 1 << 5 | 1 << 16 | 1 << 21 | 1 << 30 | 1 << 31)],
                marker: Some("poly1305_blocks_vpmadd52"),
                // cryptogams' base 2^44 scalar helper (poly1305_blocks_base2_44) uses mulx and
                // andn on this path without testing their bits.
                extensions: &["xsave", "avx", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512ifma", "bmi1", "bmi2"],
                source: "poly1305_init: word 2 & (1<<31|1<<21|1<<16) all set (AVX512VL, IFMA, F): base 2^44 \
                         (cryptogams: its scalar base 2^44 code also needs BMI1 and BMI2)",
            },
        ],
    },
    hotspot: HotSpotSpec {
        os_arch: &["amd64", "x86_64"],
        debian_arch: "amd64",
        variant_prefix: "hotspot",
        jdk: "Debian's openjdk-17-jdk-headless (17.0.x has the MD5 intrinsic), or any JDK given with --java",
        check: Some(StubDecoder::IcedX86),
        // int3
        gap_fill: 0xcc,
    },
};

/// The 16 general-purpose registers in the order of Linux's `ucontext_t` `gregs[0..16]`
/// (`REG_R8` .. `REG_RSP`, arch/x86/include/uapi/asm/sigcontext.h), which the driver's fault
/// handler copies into the fault reply (kernels/README.md).
const GPRS: [&str; 16] =
    ["r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rdi", "rsi", "rbp", "rbx", "rdx", "rax", "rcx", "rsp"];

/// Unicorn's ids of the 16 general-purpose registers, by name.
const UNICORN_REGS: [(&str, i32); 16] = [
    ("r8", RegisterX86::R8 as i32),
    ("r9", RegisterX86::R9 as i32),
    ("r10", RegisterX86::R10 as i32),
    ("r11", RegisterX86::R11 as i32),
    ("r12", RegisterX86::R12 as i32),
    ("r13", RegisterX86::R13 as i32),
    ("r14", RegisterX86::R14 as i32),
    ("r15", RegisterX86::R15 as i32),
    ("rdi", RegisterX86::RDI as i32),
    ("rsi", RegisterX86::RSI as i32),
    ("rbp", RegisterX86::RBP as i32),
    ("rbx", RegisterX86::RBX as i32),
    ("rdx", RegisterX86::RDX as i32),
    ("rax", RegisterX86::RAX as i32),
    ("rcx", RegisterX86::RCX as i32),
    ("rsp", RegisterX86::RSP as i32),
];

/// The name of a 64-bit general-purpose register as [`GPRS`] spells it.
fn gpr_name(r: Register) -> Option<&'static str> {
    const IN_ORDER: [Register; 16] = [
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
        Register::R12,
        Register::R13,
        Register::R14,
        Register::R15,
        Register::RDI,
        Register::RSI,
        Register::RBP,
        Register::RBX,
        Register::RDX,
        Register::RAX,
        Register::RCX,
        Register::RSP,
    ];
    IN_ORDER.iter().position(|&g| g == r).map(|i| GPRS[i])
}

/// What an x86-64 instruction does with rsp: a `call` is checked (and returns with rsp where it
/// was); `push`/`pop`/`pushfq`/`enter` move it by their implicit increment; `sub`/`add rsp, imm`
/// and `lea rsp, [rsp + d]` by their operand; `leave`, any other write to rsp, a `jmp` or a
/// `ret` end the tracking.
fn sp_use(insn: &Insn) -> SpUse {
    const UNKNOWN: SpUse = SpUse { check: None, then: SpEffect::Unknown };
    let i = decode(&insn.bytes, insn.addr);
    if i.is_invalid() || i.mnemonic() == Mnemonic::Leave {
        return UNKNOWN;
    }
    let system_call = matches!(i.mnemonic(), Mnemonic::Syscall | Mnemonic::Sysenter);
    match i.flow_control() {
        FlowControl::Call | FlowControl::IndirectCall if !system_call => {
            return SpUse { check: Some(SpCheck::Call), then: SpEffect::Keep }
        }
        FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::IndirectBranch => return UNKNOWN,
        _ => {}
    }
    if i.is_stack_instruction() {
        return SpUse { check: None, then: SpEffect::Adjust(i64::from(i.stack_pointer_increment())) };
    }
    let writes_rsp =
        i.op_count() > 0 && i.op0_kind() == OpKind::Register && i.op0_register().full_register() == Register::RSP;
    if !writes_rsp {
        return SpUse::NONE;
    }
    let imm = i.try_immediate(1).ok().map(|v| v as i64);
    let adjust = match (i.mnemonic(), imm) {
        (Mnemonic::Sub, Some(v)) => Some(v.wrapping_neg()),
        (Mnemonic::Add, Some(v)) => Some(v),
        (Mnemonic::Lea, None) if i.memory_base() == Register::RSP && i.memory_index() == Register::None => {
            Some(i.memory_displacement64() as i64)
        }
        _ => None,
    };
    SpUse { check: None, then: adjust.map_or(SpEffect::Unknown, SpEffect::Adjust) }
}

/// The alignment an aligned-only instruction's memory operand needs, in bytes: legacy SSE
/// instructions with a 16-byte memory operand (Intel SDM vol. 1 §11.4.1.1 / vol. 2: "must be
/// aligned on a 16-byte boundary") except the explicitly unaligned ones; `cmpxchg16b` (16);
/// `fxsave`/`fxrstor` (16); VEX/EVEX aligned moves (`vmovdqa`, `vmovaps`, `vmovntdq`, ...) to
/// their vector length.
fn aligned_only(insn: &Insn) -> Option<u64> {
    let i = decode(&insn.bytes, insn.addr);
    let memory = (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory);
    if i.is_invalid() || !memory {
        return None;
    }
    let size = i.memory_size().size() as u64;
    let m = i.mnemonic();
    const UNALIGNED: &[Mnemonic] = &[
        Mnemonic::Movdqu,
        Mnemonic::Movups,
        Mnemonic::Movupd,
        Mnemonic::Lddqu,
        Mnemonic::Pcmpestri,
        Mnemonic::Pcmpestri64,
        Mnemonic::Pcmpestrm,
        Mnemonic::Pcmpestrm64,
        Mnemonic::Pcmpistri,
        Mnemonic::Pcmpistrm,
        Mnemonic::Maskmovdqu,
    ];
    const VEX_ALIGNED: &[Mnemonic] = &[
        Mnemonic::Vmovdqa,
        Mnemonic::Vmovdqa32,
        Mnemonic::Vmovdqa64,
        Mnemonic::Vmovaps,
        Mnemonic::Vmovapd,
        Mnemonic::Vmovntdq,
        Mnemonic::Vmovntdqa,
        Mnemonic::Vmovntps,
        Mnemonic::Vmovntpd,
    ];
    match i.encoding() {
        EncodingKind::Legacy => {
            let xmm = (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Register && i.op_register(k).is_xmm());
            let sse = size == 16 && xmm && !UNALIGNED.contains(&m);
            let fx = matches!(m, Mnemonic::Fxsave | Mnemonic::Fxsave64 | Mnemonic::Fxrstor | Mnemonic::Fxrstor64);
            (sse || fx || m == Mnemonic::Cmpxchg16b).then_some(16)
        }
        EncodingKind::VEX | EncodingKind::EVEX => VEX_ALIGNED.contains(&m).then_some(size).filter(|&s| s >= 16),
        _ => None,
    }
}

/// The effective address of an instruction's memory operand (iced-x86's `virtual_address`),
/// from the general-purpose registers by name; the segment bases of ES/CS/SS/DS are 0 in
/// 64-bit mode, FS/GS bases are not known here.
fn operand_address(insn: &Insn, reg: &mut dyn FnMut(&str) -> Option<u64>) -> Option<u64> {
    let i = decode(&insn.bytes, insn.addr);
    let op = (0..i.op_count()).find(|&k| i.op_kind(k) == OpKind::Memory)?;
    i.try_virtual_address(op, 0, |r, _, _| {
        if matches!(r, Register::ES | Register::CS | Register::SS | Register::DS) {
            return Some(0);
        }
        let full = reg(gpr_name(r.full_register())?)?;
        Some(match r.size() {
            4 => full & 0xffff_ffff,
            2 => full & 0xffff,
            1 => full & 0xff,
            _ => full,
        })
    })
}

/// Whether the instruction is VEX-, EVEX- or XOP-encoded (Unicorn computes some VEX.128 forms
/// wrongly: docs/DESIGN.md "Backend facts").
fn vex_family(insn: &Insn) -> bool {
    let i = decode(&insn.bytes, insn.addr);
    matches!(i.encoding(), EncodingKind::VEX | EncodingKind::EVEX | EncodingKind::XOP)
}

/// Decodes one instruction from its bytes.
pub fn decode(bytes: &[u8], addr: u64) -> Instruction {
    Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE).decode()
}

/// Whether an instruction is outside baseline x86-64: VEX/EVEX/XOP-encoded, or needs a CPUID
/// feature beyond [`BASELINE`].
pub fn beyond_baseline(i: &Instruction) -> bool {
    i.encoding() != EncodingKind::Legacy || i.cpuid_features().iter().any(|f| !BASELINE.contains(f))
}

/// Whether an operand (or the memory operand's index, as in a VSIB gather) is an xmm, ymm or
/// zmm register or an AVX-512 mask register (`k1`): SSE, AVX and AVX-512 code.
fn names_vector_register(i: &Instruction) -> bool {
    let vector = |r: Register| r.is_xmm() || r.is_ymm() || r.is_zmm() || r.is_k();
    (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Register && vector(i.op_register(k)))
        || vector(i.memory_index())
        || i.op_mask() != Register::None
}

/// The class of an x86-64 instruction from iced-x86's decoding of its bytes: control flow,
/// CPUID features, mnemonic (multiply/divide) and the memory operands' access.
fn classify(insn: &Insn) -> InsnClass {
    let i = decode(&insn.bytes, insn.addr);
    if i.is_invalid() {
        return InsnClass::Alu;
    }
    let mut info = InstructionInfoFactory::new();
    let memory: Vec<OpAccess> = info.info(&i).used_memory().iter().map(|m| m.access()).collect();
    let writes = memory
        .iter()
        .any(|a| matches!(a, OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite));
    let reads = memory.iter().any(|a| !matches!(a, OpAccess::None | OpAccess::NoMemAccess));
    // iced-x86 counts `syscall`/`sysenter` as calls; like `ecall` and `svc` they are no branch here.
    let system_call = matches!(i.mnemonic(), Mnemonic::Syscall | Mnemonic::Sysenter);
    if !system_call
        && matches!(
            i.flow_control(),
            FlowControl::UnconditionalBranch
                | FlowControl::ConditionalBranch
                | FlowControl::IndirectBranch
                | FlowControl::Call
                | FlowControl::IndirectCall
                | FlowControl::Return
        )
    {
        InsnClass::Branch
    } else if names_vector_register(&i) {
        InsnClass::Vector
    } else if beyond_baseline(&i) {
        InsnClass::Extension
    } else if matches!(i.mnemonic(), Mnemonic::Mul | Mnemonic::Imul | Mnemonic::Div | Mnemonic::Idiv) {
        InsnClass::Multiply
    } else if writes {
        InsnClass::Store
    } else if reads {
        InsnClass::Load
    } else {
        InsnClass::Alu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(bytes: &[u8]) -> Insn {
        Insn { addr: 0x1000, bytes: bytes.to_vec(), text: String::new() }
    }

    /// Linux's `/proc/cpuinfo` flag for each extension row (arch/x86/include/asm/cpufeatures.h,
    /// Linux 6.1: `X86_FEATURE_LZCNT` does not exist, LZCNT is `X86_FEATURE_ABM` "abm"; SSE3 is
    /// `X86_FEATURE_XMM3` "pni"; `X86_FEATURE_XMM4_1` "sse4_1"; `X86_FEATURE_SHA_NI` "sha_ni";
    /// `X86_FEATURE_CX16` "cx16"), written out independently of the rows.
    const LINUX_CPUINFO: [(&str, &str); 26] = [
        ("popcnt", "popcnt"),
        ("lzcnt", "abm"),
        ("movbe", "movbe"),
        ("bmi1", "bmi1"),
        ("bmi2", "bmi2"),
        ("adx", "adx"),
        ("avx", "avx"),
        ("avx2", "avx2"),
        ("cx16", "cx16"),
        ("sse3", "pni"),
        ("ssse3", "ssse3"),
        ("sse4.1", "sse4_1"),
        ("sse4.2", "sse4_2"),
        ("aes", "aes"),
        ("pclmulqdq", "pclmulqdq"),
        ("xsave", "xsave"),
        ("fma", "fma"),
        ("f16c", "f16c"),
        ("sha", "sha_ni"),
        ("avx512f", "avx512f"),
        ("avx512bw", "avx512bw"),
        ("avx512cd", "avx512cd"),
        ("avx512dq", "avx512dq"),
        ("avx512vl", "avx512vl"),
        ("avx512ifma", "avx512ifma"),
        ("cet", "user_shstk"),
    ];

    #[test]
    fn every_row_is_looked_up_in_proc_cpuinfo_under_linux_s_name() {
        assert_eq!(EXTENSIONS.len(), LINUX_CPUINFO.len(), "a new row needs its Linux name here");
        for (row, (name, linux)) in EXTENSIONS.iter().zip(LINUX_CPUINFO) {
            assert_eq!((row.name, row.cpuinfo), (name, linux), "{name}");
        }
    }

    /// Whether this host's CPU has the extension, by Rust's own CPUID reading (not /proc/cpuinfo).
    #[cfg(target_arch = "x86_64")]
    fn cpuid_has(name: &str) -> bool {
        match name {
            "popcnt" => is_x86_feature_detected!("popcnt"),
            "lzcnt" => is_x86_feature_detected!("lzcnt"),
            "movbe" => is_x86_feature_detected!("movbe"),
            "bmi1" => is_x86_feature_detected!("bmi1"),
            "bmi2" => is_x86_feature_detected!("bmi2"),
            "adx" => is_x86_feature_detected!("adx"),
            "avx" => is_x86_feature_detected!("avx"),
            "avx2" => is_x86_feature_detected!("avx2"),
            "cx16" => is_x86_feature_detected!("cmpxchg16b"),
            "sse3" => is_x86_feature_detected!("sse3"),
            "ssse3" => is_x86_feature_detected!("ssse3"),
            "sse4.1" => is_x86_feature_detected!("sse4.1"),
            "sse4.2" => is_x86_feature_detected!("sse4.2"),
            "aes" => is_x86_feature_detected!("aes"),
            "pclmulqdq" => is_x86_feature_detected!("pclmulqdq"),
            "xsave" => is_x86_feature_detected!("xsave"),
            "fma" => is_x86_feature_detected!("fma"),
            "f16c" => is_x86_feature_detected!("f16c"),
            "sha" => is_x86_feature_detected!("sha"),
            "avx512f" => is_x86_feature_detected!("avx512f"),
            "avx512bw" => is_x86_feature_detected!("avx512bw"),
            "avx512cd" => is_x86_feature_detected!("avx512cd"),
            "avx512dq" => is_x86_feature_detected!("avx512dq"),
            "avx512vl" => is_x86_feature_detected!("avx512vl"),
            "avx512ifma" => is_x86_feature_detected!("avx512ifma"),
            // `user_shstk` is the kernel's (CPU and kernel support user shadow stacks), not a
            // CPUID bit: CPUID.7.0:ECX[7] without kernel support is not it (this VM: CPUID
            // says CET_SS, /proc/cpuinfo lists no shstk). No independent check: the flag itself.
            "cet" => crate::user_kernel::isa_decl::host_cpu_flags().iter().any(|f| f == "user_shstk"),
            other => panic!("no CPUID check for `{other}`"),
        }
    }

    /// On an x86_64 host, /proc/cpuinfo lists a row's flag exactly when CPUID says the CPU has it.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_cpuinfo_names_agree_with_this_host_s_cpuid() {
        let flags = crate::user_kernel::isa_decl::host_cpu_flags();
        assert!(flags.iter().any(|f| f == "sse2"), "/proc/cpuinfo has no flags line: {flags:?}");
        for e in EXTENSIONS {
            assert_eq!(flags.iter().any(|f| f == e.cpuinfo), cpuid_has(e.name), "{} as `{}`", e.name, e.cpuinfo);
        }
    }

    #[test]
    fn aligned_only_instructions_and_their_alignment() {
        let cases: [(&[u8], Option<u64>, &str); 8] = [
            (&[0x66, 0x0f, 0x6f, 0x07], Some(16), "movdqa xmm0, [rdi]"),
            (&[0xf3, 0x0f, 0x6f, 0x07], None, "movdqu xmm0, [rdi]"),
            (&[0x66, 0x0f, 0xfe, 0x07], Some(16), "paddd xmm0, [rdi]: every legacy SSE m128 operand"),
            (&[0xf3, 0x0f, 0x7e, 0x07], None, "movq xmm0, [rdi]: 8 bytes"),
            (&[0x66, 0x0f, 0x6f, 0xc1], None, "movdqa xmm0, xmm1: no memory"),
            (&[0xc5, 0xfd, 0x6f, 0x07], Some(32), "vmovdqa ymm0, [rdi]"),
            (&[0xc5, 0xfe, 0x6f, 0x07], None, "vmovdqu ymm0, [rdi]"),
            (&[0x48, 0x0f, 0xc7, 0x0f], Some(16), "cmpxchg16b [rdi]"),
        ];
        for (bytes, want, what) in cases {
            assert_eq!(aligned_only(&insn(bytes)), want, "{what}");
        }
    }

    #[test]
    fn the_operand_address_comes_from_the_named_registers() {
        // movdqa xmm0, [rdi + rsi*4 + 8]
        let i = insn(&[0x66, 0x0f, 0x6f, 0x44, 0xb7, 0x08]);
        let mut regs = |r: &str| match r {
            "rdi" => Some(0x1000),
            "rsi" => Some(3),
            _ => None,
        };
        assert_eq!(operand_address(&i, &mut regs), Some(0x1000 + 12 + 8));
        let mut none = |_: &str| None;
        assert_eq!(operand_address(&i, &mut none), None, "an unknown register gives no address");
    }

    #[test]
    fn rsp_moves_are_tracked_and_calls_checked() {
        let cases: [(&[u8], SpUse, &str); 7] = [
            (&[0xe8, 0, 0, 0, 0], SpUse { check: Some(SpCheck::Call), then: SpEffect::Keep }, "call"),
            (&[0x53], SpUse { check: None, then: SpEffect::Adjust(-8) }, "push rbx"),
            (&[0x5b], SpUse { check: None, then: SpEffect::Adjust(8) }, "pop rbx"),
            (&[0x48, 0x83, 0xec, 0x08], SpUse { check: None, then: SpEffect::Adjust(-8) }, "sub rsp, 8"),
            (&[0x48, 0x8d, 0x64, 0x24, 0x10], SpUse { check: None, then: SpEffect::Adjust(16) }, "lea rsp, [rsp+16]"),
            (&[0x48, 0x89, 0xec], SpUse { check: None, then: SpEffect::Unknown }, "mov rsp, rbp"),
            (&[0xc3], SpUse { check: None, then: SpEffect::Unknown }, "ret"),
        ];
        for (bytes, want, what) in cases {
            assert_eq!(sp_use(&insn(bytes)), want, "{what}");
        }
        assert_eq!(sp_use(&insn(&[0x48, 0x01, 0xd8])), SpUse::NONE, "add rax, rbx");
    }
}

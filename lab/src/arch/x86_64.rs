//! x86_64: baseline x86-64 (x86-64-v1), System V AMD64 psABI, Linux system calls through
//! `syscall`, Unicorn's X86 engine in 64-bit mode (Haswell by default), qemu-user's `qemu64` CPU.
//! The disassembler ignores features here, so legality and instruction classes come from
//! iced-x86's decoder and instruction info, not from llvm-objdump's text.

use iced_x86::{
    CpuidFeature, Decoder, DecoderOptions, EncodingKind, FlowControl, Instruction, InstructionInfoFactory, Mnemonic,
    OpAccess,
};
use unicorn_engine::{Arch as UcArch, Mode, RegisterX86, X86Insn};

use super::{
    Arch, ArchSpec, IsaExtension, IsaSpec, Legality, McaSpec, QemuSupport, ReturnAddress, SyscallSpec, Trap, TrapPc,
    UcInterrupt, UnicornRefusal, UnicornSpec, UnicornSupport,
};
use crate::abi::{Abi, Int32Args, ReturnFlag, STACK_BUDGET};
use crate::disasm::{Insn, InsnClass};
use crate::toolchain::Tool;

/// RFLAGS bit 10, the direction flag, which must be clear on return (SysV psABI §3.2.1).
pub const RFLAGS_DF: u64 = 1 << 10;

/// System V AMD64 psABI §3.2.1, Figure 3.4: rbx, rbp, r12–r15 belong to the caller; DF clear.
pub const ABI: Abi = Abi {
    arch: Arch::X86_64,
    saved: &["rbx", "rbp", "r12", "r13", "r14", "r15"],
    saved_gprs: 6,
    source: "System V AMD64 psABI §3.2.1 (Figure 3.4)",
    int32_args: Int32Args::UpperGarbage,
    sp: "rsp",
    args: ["rdi", "rsi", "rdx", "rcx"],
    stack_budget: STACK_BUDGET,
    red_zone: 128,
    clear_on_return: Some(ReturnFlag { mask: RFLAGS_DF, name: "the direction flag (DF)" }),
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

const fn ext(
    name: &'static str,
    doc: &'static str,
    unicorn: UnicornSupport,
    cpuid: &'static [CpuidFeature],
) -> IsaExtension {
    IsaExtension { name, doc, mattr: "", qemu: QemuSupport::Property { name, default_on: false }, unicorn, cpuid }
}

/// Extensions by their CPUID names (Intel SDM vol. 2, "CPUID"; qemu spells the `-cpu` property
/// the same). Unicorn's default CPU is Haswell, which has no ADX.
const EXTENSIONS: &[IsaExtension] = &[
    ext("popcnt", "POPCNT", UnicornSupport::Decoded, &[CpuidFeature::POPCNT]),
    ext("lzcnt", "LZCNT (ABM)", UnicornSupport::Decoded, &[CpuidFeature::LZCNT]),
    ext("movbe", "MOVBE", UnicornSupport::Decoded, &[CpuidFeature::MOVBE]),
    ext("bmi1", "bit manipulation 1 (ANDN, BEXTR, BLSI, TZCNT...)", VEX_ON_UNICORN, &[CpuidFeature::BMI1]),
    ext("bmi2", "bit manipulation 2 (MULX, RORX, SHLX, PDEP...)", VEX_ON_UNICORN, &[CpuidFeature::BMI2]),
    ext(
        "adx",
        "multi-precision add-carry (ADCX, ADOX)",
        UnicornSupport::Missing("Unicorn 2.1.5's default CPU (Haswell) has no ADX"),
        &[CpuidFeature::ADX],
    ),
    ext("avx", "AVX", VEX_ON_UNICORN, &[CpuidFeature::AVX]),
    ext("avx2", "AVX2", VEX_ON_UNICORN, &[CpuidFeature::AVX2]),
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
    },
    objdump_args: &["--x86-asm-syntax=intel"],
    asm_prologue: ".intel_syntax noprefix\n",
    syscall: SyscallSpec { mnemonics: &["syscall", "sysenter", "int"], len: 2, name: syscall_name },
    abi: &ABI,
    qemu: Tool { program: "qemu-x86_64", package: "qemu-user" },
    unicorn: UnicornSpec {
        arch: UcArch::X86,
        mode: Mode::MODE_64,
        init: &[],
        sp: RegisterX86::RSP as i32,
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
    mca: McaSpec { triple: "x86_64", models: &["skylake", "znver3"] },
    spin_source: include_str!("../../guest/x86_64/spin.S"),
    classify,
};

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
    if matches!(
        i.flow_control(),
        FlowControl::UnconditionalBranch
            | FlowControl::ConditionalBranch
            | FlowControl::IndirectBranch
            | FlowControl::Call
            | FlowControl::IndirectCall
            | FlowControl::Return
    ) {
        InsnClass::Branch
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

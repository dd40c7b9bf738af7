//! aarch64: ARMv8-A, AAPCS64, Linux system calls through `svc #0`, Unicorn's ARM64 engine
//! (Cortex-A72 by default), qemu-user's `cortex-a72` CPU.

use unicorn_engine::{Arch as UcArch, Mode, RegisterARM64};

use super::{
    Arch, ArchSpec, IsaExtension, IsaSpec, Legality, McaSpec, QemuSupport, ReturnAddress, SyscallSpec, Trap, TrapPc,
    UcInterrupt, UnicornSpec, UnicornSupport,
};
use crate::abi::{Abi, Int32Args, STACK_BUDGET};
use crate::disasm::{Insn, InsnClass};
use crate::toolchain::Tool;

/// AAPCS64 §6.1.1 (x19–x29 callee-saved) and §6.1.2 (low 64 bits of v8–v15).
pub const ABI: Abi = Abi {
    arch: Arch::Aarch64,
    saved: &[
        "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29", "d8", "d9", "d10", "d11", "d12",
        "d13", "d14", "d15",
    ],
    saved_gprs: 11,
    source: "AAPCS64 §6.1.1, §6.1.2",
    int32_args: Int32Args::UpperGarbage,
    sp: "sp",
    args: ["x0", "x1", "x2", "x3"],
    stack_budget: STACK_BUDGET,
    red_zone: 0,
    clear_on_return: None,
};

/// An extension the Cortex-A72 (qemu's model and Unicorn's default CPU) has: ID_AA64ISAR0 of
/// the A72 lists CRC32, AES+PMULL, SHA1 and SHA2.
const fn a72(name: &'static str, doc: &'static str, mattr: &'static str) -> IsaExtension {
    IsaExtension { name, doc, mattr, qemu: QemuSupport::InModel, unicorn: UnicornSupport::Decoded, cpuid: &[] }
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
    }
}

/// Arm ARM (DDI 0487) feature names, in `armv8-a+<ext>` spelling; `v8.5a` stands for every
/// instruction up to ARMv8.5-A (used to print anything).
const EXTENSIONS: &[IsaExtension] = &[
    beyond_a72("v8.5a", "every instruction up to ARMv8.5-A", "+v8.5a"),
    a72("crc", "CRC32 instructions (FEAT_CRC32)", "+crc"),
    a72("crypto", "AES, PMULL, SHA1, SHA256 (FEAT_AES, FEAT_PMULL, FEAT_SHA1, FEAT_SHA256)", "+crypto"),
    a72("aes", "AES and PMULL (FEAT_AES, FEAT_PMULL)", "+aes"),
    a72("sha2", "SHA1 and SHA256 (FEAT_SHA1, FEAT_SHA256)", "+sha2"),
    beyond_a72("sha3", "SHA3 and SHA512 (FEAT_SHA3, FEAT_SHA512)", "+sha3"),
    beyond_a72("sm4", "SM3 and SM4 (FEAT_SM3, FEAT_SM4)", "+sm4"),
    beyond_a72("lse", "large system extensions: atomics (FEAT_LSE)", "+lse"),
    beyond_a72("rcpc", "load-acquire RCpc (FEAT_LRCPC)", "+rcpc"),
    beyond_a72("dotprod", "dot product (FEAT_DotProd)", "+dotprod"),
    beyond_a72("fullfp16", "half-precision arithmetic (FEAT_FP16)", "+fullfp16"),
    beyond_a72("sve", "scalable vector extension (FEAT_SVE)", "+sve"),
    beyond_a72("sve2", "SVE2 (FEAT_SVE2)", "+sve2"),
];

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
    },
    objdump_args: &[],
    asm_prologue: "",
    syscall: SyscallSpec { mnemonics: &["svc"], len: 4, name: syscall_name },
    abi: &ABI,
    qemu: Tool { program: "qemu-aarch64", package: "qemu-user" },
    unicorn: UnicornSpec {
        arch: UcArch::ARM64,
        mode: Mode::LITTLE_ENDIAN,
        init: &[],
        sp: RegisterARM64::SP as i32,
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
    mca: McaSpec { triple: "aarch64", models: &["cortex-a55", "cortex-a72", "neoverse-n1"] },
    spin_source: include_str!("../../guest/aarch64/spin.S"),
    classify,
};

/// The class of an AArch64 instruction, by mnemonic.
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
    } else if MUL.contains(&m) {
        InsnClass::Multiply
    } else if m.starts_with("crc32") || m.starts_with("aes") || m.starts_with("sha") || m.starts_with("pmull") {
        InsnClass::Extension
    } else if m.starts_with("st") {
        InsnClass::Store
    } else if m.starts_with("ld") || m == "prfm" {
        InsnClass::Load
    } else {
        InsnClass::Alu
    }
}

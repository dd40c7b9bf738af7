//! riscv64: RV64GC, LP64D psABI, Linux system calls through `ecall`, Unicorn's RISCV64 engine
//! (machine mode, so faults arrive as `mcause` values), qemu-user's `rv64` CPU with every Zb*
//! extension named.

use unicorn_engine::{Arch as UcArch, Mode, RegisterRISCV};

use super::{
    Arch, ArchSpec, IsaExtension, IsaSpec, Legality, McaSpec, QemuSupport, ReturnAddress, SyscallSpec, Trap, TrapPc,
    UcInterrupt, UnicornSpec, UnicornSupport,
};
use crate::abi::{Abi, Int32Args, STACK_BUDGET};
use crate::disasm::{Insn, InsnClass};
use crate::toolchain::Tool;

/// RISC-V psABI, "Integer Register Convention" and "Floating-point Register Convention":
/// s0–s11 and fs0–fs11 are callee-saved; gp and tp must not be changed by a callee.
pub const ABI: Abi = Abi {
    arch: Arch::Riscv64,
    saved: &[
        "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "gp", "tp", "fs0", "fs1", "fs2",
        "fs3", "fs4", "fs5", "fs6", "fs7", "fs8", "fs9", "fs10", "fs11",
    ],
    saved_gprs: 14,
    source: "RISC-V ELF psABI, Register Convention (LP64D)",
    int32_args: Int32Args::SignExtended,
    sp: "sp",
    args: ["a0", "a1", "a2", "a3"],
    stack_budget: STACK_BUDGET,
    red_zone: 0,
    clear_on_return: None,
};

const NO_UNICORN_ZB: UnicornSupport =
    UnicornSupport::Missing("Unicorn 2.1.5 decodes no Zb* extension and the lab emulates only Zbb");

/// Zb* extensions: "RISC-V Bit-Manipulation ISA-extensions" 1.0.0 (Zba, Zbb, Zbc, Zbs) and
/// "RISC-V Cryptography Extensions Volume I" 1.0.1 (Zbkb). qemu 7.2 turns Zba/Zbb/Zbc/Zbs on
/// for `rv64` by default (docs/DESIGN.md "Variants").
const EXTENSIONS: &[IsaExtension] = &[
    IsaExtension {
        name: "zba",
        doc: "address generation (Bitmanip 1.0.0 §1.2)",
        mattr: "+zba",
        qemu: QemuSupport::Property { name: "zba", default_on: true },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
    },
    IsaExtension {
        name: "zbb",
        doc: "basic bit manipulation (Bitmanip 1.0.0 §1.3)",
        mattr: "+zbb",
        qemu: QemuSupport::Property { name: "zbb", default_on: true },
        unicorn: UnicornSupport::Emulated,
        cpuid: &[],
    },
    IsaExtension {
        name: "zbc",
        doc: "carry-less multiplication (Bitmanip 1.0.0 §1.4)",
        mattr: "+zbc",
        qemu: QemuSupport::Property { name: "zbc", default_on: true },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
    },
    IsaExtension {
        name: "zbs",
        doc: "single-bit instructions (Bitmanip 1.0.0 §1.5)",
        mattr: "+zbs",
        qemu: QemuSupport::Property { name: "zbs", default_on: true },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
    },
    IsaExtension {
        name: "zbkb",
        doc: "bit manipulation for cryptography (Scalar Crypto 1.0.1 §2.1)",
        mattr: "+zbkb",
        qemu: QemuSupport::Property { name: "zbkb", default_on: false },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
    },
];

fn syscall_name(nr: usize) -> Option<&'static str> {
    syscalls::riscv64::Sysno::new(nr).map(|s| s.name())
}

/// The riscv64 row.
pub static SPEC: ArchSpec = ArchSpec {
    arch: Arch::Riscv64,
    name: "riscv64",
    rust_arch: "riscv64",
    elf: object::Architecture::Riscv64,
    c_guard: "defined(__riscv)",
    clang_triple: "riscv64-linux-gnu",
    // No linker relaxation: the addresses the lab reads from the image are the ones the
    // assembler laid out.
    clang_flags: &["-mno-relax"],
    isa: IsaSpec {
        base: "rv64gc",
        base_mattr: "+m,+a,+f,+d,+c",
        qemu_cpu_model: "rv64",
        legality: Legality::Mattr,
        extensions: EXTENSIONS,
    },
    objdump_args: &[],
    asm_prologue: "",
    syscall: SyscallSpec { mnemonics: &["ecall"], len: 4, name: syscall_name },
    abi: &ABI,
    qemu: Tool { program: "qemu-riscv64", package: "qemu-user" },
    unicorn: UnicornSpec {
        arch: UcArch::RISCV,
        mode: Mode::RISCV64,
        // mstatus.FS = Dirty: the driver saves fs0-fs11, and with FS = Off every FP instruction
        // is illegal (RISC-V privileged spec, "Extension Context Status").
        init: &[(RegisterRISCV::MSTATUS as i32, 0x6000, "mstatus.FS = Dirty")],
        sp: RegisterRISCV::SP as i32,
        return_address: ReturnAddress::Register(RegisterRISCV::RA as i32),
        syscall_hooks: &[],
        // `mcause` values (privileged spec, "Machine Cause Register"). The engine has taken the
        // trap, so the pc is past the instruction: mepc holds it (fallback pc - 4), and mtval the
        // bad address (Unicorn 2.1.5 leaves it 0).
        interrupts: &[
            UcInterrupt { intnos: &[2], trap: Trap::IllegalInstruction, pc: EPC, addr_register: None },
            UcInterrupt { intnos: &[8, 9, 11], trap: Trap::SystemCall, pc: EPC, addr_register: None },
            UcInterrupt { intnos: &[3], trap: Trap::Breakpoint, pc: EPC, addr_register: None },
            // Load (4) and store/AMO (6) address misaligned.
            UcInterrupt {
                intnos: &[4, 6],
                trap: Trap::Misaligned,
                pc: EPC,
                addr_register: Some(RegisterRISCV::MTVAL as i32),
            },
        ],
        refuse: None,
    },
    mca: McaSpec { triple: "riscv64", models: &["sifive-u74", "spacemit-x60", "sifive-p670"] },
    spin_source: include_str!("../../guest/riscv64/spin.S"),
    classify,
};

const EPC: TrapPc = TrapPc::Register(RegisterRISCV::MEPC as i32, 4);

/// Zbb mnemonics (RISC-V Bitmanip v1.0.0 §1.3).
const ZBB: &[&str] = &[
    "andn", "orn", "xnor", "clz", "clzw", "ctz", "ctzw", "cpop", "cpopw", "max", "maxu", "min", "minu", "sext.b",
    "sext.h", "zext.h", "rol", "rolw", "ror", "rori", "roriw", "rorw", "orc.b", "rev8",
];

/// The class of a RISC-V instruction, by mnemonic (compressed `c.` forms as their base).
fn classify(insn: &Insn) -> InsnClass {
    const BRANCH: &[&str] = &[
        "beq", "bne", "blt", "bge", "bltu", "bgeu", "beqz", "bnez", "blez", "bgez", "bltz", "bgtz", "bgt", "ble",
        "bgtu", "bleu", "j", "jal", "jr", "jalr", "ret", "call", "tail",
    ];
    const MUL: &[&str] =
        &["mul", "mulh", "mulhsu", "mulhu", "mulw", "div", "divu", "divw", "divuw", "rem", "remu", "remw", "remuw"];
    const LOAD: &[&str] = &["lb", "lh", "lw", "ld", "lbu", "lhu", "lwu", "flh", "flw", "fld", "lr.w", "lr.d"];
    const STORE: &[&str] = &["sb", "sh", "sw", "sd", "fsh", "fsw", "fsd", "sc.w", "sc.d"];
    let m = insn.mnemonic().to_ascii_lowercase();
    let m = m.strip_prefix("c.").unwrap_or(&m);
    if BRANCH.contains(&m) {
        InsnClass::Branch
    } else if MUL.contains(&m) {
        InsnClass::Multiply
    } else if ZBB.contains(&m) {
        InsnClass::Extension
    } else if STORE.contains(&m) || m.starts_with("amo") {
        InsnClass::Store
    } else if LOAD.contains(&m) {
        InsnClass::Load
    } else {
        InsnClass::Alu
    }
}

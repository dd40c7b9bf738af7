//! riscv64: RV64GC, LP64D psABI, Linux system calls through `ecall`, Unicorn's RISCV64 engine
//! (machine mode, so faults arrive as `mcause` values), qemu-user's `rv64` CPU with every Zb*
//! extension named.

use unicorn_engine::{Arch as UcArch, Mode, RegisterRISCV};

use super::capability::{CapabilitySpec, DispatchPath};
use super::{
    AlignSpec, Arch, ArchSpec, HotSpotSpec, IsaExtension, IsaSpec, Legality, LengthStep, McaSpec, QemuSupport,
    ReturnAddress, RoundingSpec, SpCheck, SpEffect, SpUse, SyscallEncoding, SyscallSpec, Trap, TrapPc, UcInterrupt,
    UnicornSpec, UnicornSupport, VectorLengthSpec,
};
use crate::vocab::abi::{Abi, ControlField, ControlState, Int32Args, STACK_BUDGET};
use crate::vocab::insn::{operands, parse_imm};
use crate::vocab::insn::{Insn, InsnClass};
use crate::vocab::poly_ctx::{EmitReduction, PolyCtx};
use crate::vocab::tool::Tool;

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
    url: "https://github.com/riscv-non-isa/riscv-elf-psabi-doc/blob/master/riscv-cc.adoc",
    int32_args: Int32Args::SignExtended,
    sp: "sp",
    args: ["a0", "a1", "a2", "a3"],
    stack_budget: STACK_BUDGET,
    red_zone: 0,
    clear_on_return: None,
    control: Some(ControlState {
        layout: "fcsr (fflags in bits 0-4, frm in bits 5-7)",
        default: 0,
        // frm = RUP (round up, 011).
        poison: 0x60,
        fields: &[ControlField {
            mask: 0xe0,
            name: "fcsr.frm (the dynamic rounding mode)",
            rule: "RISC-V psABI \"Floating-point Register Convention\": fcsr has thread storage duration (C11 \
                   §7.6), so a call leaves frm as it found it; fflags are not checked",
        }],
    }),
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
        cpuinfo: "zba",
    },
    IsaExtension {
        name: "zbb",
        doc: "basic bit manipulation (Bitmanip 1.0.0 §1.3)",
        mattr: "+zbb",
        qemu: QemuSupport::Property { name: "zbb", default_on: true },
        unicorn: UnicornSupport::Emulated,
        cpuid: &[],
        cpuinfo: "zbb",
    },
    IsaExtension {
        name: "zbc",
        doc: "carry-less multiplication (Bitmanip 1.0.0 §1.4)",
        mattr: "+zbc",
        qemu: QemuSupport::Property { name: "zbc", default_on: true },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
        cpuinfo: "zbc",
    },
    IsaExtension {
        name: "zbs",
        doc: "single-bit instructions (Bitmanip 1.0.0 §1.5)",
        mattr: "+zbs",
        qemu: QemuSupport::Property { name: "zbs", default_on: true },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
        cpuinfo: "zbs",
    },
    IsaExtension {
        name: "zbkb",
        doc: "bit manipulation for cryptography (Scalar Crypto 1.0.1 §2.1)",
        mattr: "+zbkb",
        qemu: QemuSupport::Property { name: "zbkb", default_on: false },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
        cpuinfo: "zbkb",
    },
    IsaExtension {
        name: "zbkc",
        doc: "carry-less multiply for cryptography (Scalar Crypto 1.0.1 §2.2)",
        mattr: "+zbkc",
        qemu: QemuSupport::Property { name: "zbkc", default_on: false },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
        cpuinfo: "zbkc",
    },
    IsaExtension {
        name: "zbkx",
        doc: "crossbar permutations (Scalar Crypto 1.0.1 §2.3)",
        mattr: "+zbkx",
        qemu: QemuSupport::Property { name: "zbkx", default_on: false },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
        cpuinfo: "zbkx",
    },
    IsaExtension {
        name: "zknd",
        doc: "AES decryption (Scalar Crypto 1.0.1 §2.4)",
        mattr: "+zknd",
        qemu: QemuSupport::Property { name: "zknd", default_on: false },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
        cpuinfo: "zknd",
    },
    IsaExtension {
        name: "zkne",
        doc: "AES encryption (Scalar Crypto 1.0.1 §2.5)",
        mattr: "+zkne",
        qemu: QemuSupport::Property { name: "zkne", default_on: false },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
        cpuinfo: "zkne",
    },
    IsaExtension {
        name: "zknh",
        doc: "SHA2 hash functions (Scalar Crypto 1.0.1 §2.6)",
        mattr: "+zknh",
        qemu: QemuSupport::Property { name: "zknh", default_on: false },
        unicorn: NO_UNICORN_ZB,
        cpuid: &[],
        cpuinfo: "zknh",
    },
    IsaExtension {
        name: "v",
        doc: "vector extension (RISC-V \"V\" Standard Extension for Vector Operations 1.0)",
        mattr: "+v",
        qemu: QemuSupport::Property { name: "v", default_on: false },
        unicorn: UnicornSupport::Missing("Unicorn 2.1.5 (QEMU 5.0.1) has no RVV 1.0"),
        cpuid: &[],
        cpuinfo: "v",
    },
];

/// RVV's VLEN as a run dimension: qemu-user 7.2 provides VLEN 128..=1024, powers of two
/// (`-cpu rv64,v=true,vlen=<bits>`; it refuses others: "VLEN must be power of 2").
const VLEN: VectorLengthSpec = VectorLengthSpec {
    name: "VLEN",
    column: "vlen",
    extensions: &["v"],
    bits: 128..=1024,
    step: LengthStep::PowerOfTwo,
    defaults: &[128, 256, 512, 1024],
    qemu_property: "vlen={bits}",
    // Without `vext_spec` qemu 7.2 prints "vector version is not specified" on every start.
    qemu_fixed: "vext_spec=v1.0,elen=64",
    source: "RISC-V psABI, \"Vector Register Convention\": vl and vtype are not preserved across calls; vxrm and \
             vxsat are unspecified at entry",
    unconfigured: Some(
        "vector instruction with vtype.vill set: the kernel relies on vl/vtype from its caller (RISC-V psABI, \
         \"Vector Register Convention\": vl and vtype are not preserved across calls, and the driver enters every \
         call with vtype.vill set; set them with vsetvli/vsetivli before the first vector instruction)",
    ),
    // RVV 1.0 §3.8 "Vector Fixed-Point Rounding Mode Register vxrm": the averaging adds and
    // subtracts, vsmul, the scaling shifts and the narrowing clips round by it.
    rounding: Some(RoundingSpec {
        register: "vxrm",
        users: &["vaadd", "vasub", "vsmul", "vssrl", "vssra", "vnclip"],
        written_through: &["vxrm", "vcsr"],
        rule:
            "the RISC-V psABI (\"Vector Register Convention\") leaves vxrm unspecified at a call, and the driver \
               enters each call with vxrm in 1..3 (never round-to-nearest-up): write it (csrwi vxrm, 0) before rounding",
    }),
    probe: ".globl _start\n_start:\n\tcsrr a0, vlenb\n\tli a7, 93\n\tecall\n",
    probe_unit_bits: 8,
};

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
        levels: &[],
        march_separator: Some("_"),
        vector_length: Some(VLEN),
    },
    objdump_args: &[],
    asm_prologue: "",
    syscall: SyscallSpec {
        mnemonics: &["ecall"],
        len: 4,
        name: syscall_name,
        // RISC-V unprivileged ISA, "Environment Call and Breakpoints": 0x00000073, 2-byte aligned
        // with the C extension.
        encodings: &[SyscallEncoding { name: "ecall", bytes: &[0x73, 0, 0, 0], mask: &[0xff; 4] }],
        step: 2,
    },
    abi: &ABI,
    qemu: Tool { program: "qemu-riscv64", package: "qemu-user" },
    unicorn: UnicornSpec {
        arch: UcArch::RISCV,
        mode: Mode::RISCV64,
        // mstatus.FS = Dirty: the driver saves fs0-fs11, and with FS = Off every FP instruction
        // is illegal (RISC-V privileged spec, "Extension Context Status").
        init: &[(RegisterRISCV::MSTATUS as i32, 0x6000, "mstatus.FS = Dirty")],
        sp: RegisterRISCV::SP as i32,
        callee_saved: &[
            RegisterRISCV::S0 as i32,
            RegisterRISCV::S1 as i32,
            RegisterRISCV::S2 as i32,
            RegisterRISCV::S3 as i32,
            RegisterRISCV::S4 as i32,
            RegisterRISCV::S5 as i32,
            RegisterRISCV::S6 as i32,
            RegisterRISCV::S7 as i32,
            RegisterRISCV::S8 as i32,
            RegisterRISCV::S9 as i32,
            RegisterRISCV::S10 as i32,
            RegisterRISCV::S11 as i32,
            RegisterRISCV::GP as i32,
            RegisterRISCV::TP as i32,
            RegisterRISCV::FS0 as i32,
            RegisterRISCV::FS1 as i32,
            RegisterRISCV::FS2 as i32,
            RegisterRISCV::FS3 as i32,
            RegisterRISCV::FS4 as i32,
            RegisterRISCV::FS5 as i32,
            RegisterRISCV::FS6 as i32,
            RegisterRISCV::FS7 as i32,
            RegisterRISCV::FS8 as i32,
            RegisterRISCV::FS9 as i32,
            RegisterRISCV::FS10 as i32,
            RegisterRISCV::FS11 as i32,
        ],
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
    mca: McaSpec {
        triple: "riscv64",
        models: &["sifive-u74", "spacemit-x60", "sifive-p670"],
        // RVV 1.0 cores llvm-mca-19 models (`llvm-mca-19 -mtriple=riscv64 -mcpu=help` lists both).
        by_extension: &[("v", &["sifive-x280", "sifive-p670"])],
        // LLVM 19's RISCVProcessors.td: sifive-x280 has Zvl512b (and a 256-bit datapath: an
        // LMUL 1 instruction is charged 2 beats), sifive-p670 Zvl128b.  spacemit-x60 (VLEN
        // 256) has no scheduling model before LLVM 20.
        model_vlen: &[("sifive-x280", 512), ("sifive-p670", 128)],
        vector_reading: Some(256),
    },
    spin_source: include_str!("../../guest/riscv64/spin.S"),
    openssl_poly1305: PolyCtx {
        bytes: 56,
        r_at: 24,
        s1_at: Some(40),
        emit: EmitReduction::FoldThenCompare,
        vector_flag_at: None,
        source: "poly1305-riscv64.pl: h[3] at 0, r0 24, r1 32, s1 40, top_power (u32) 48",
    },
    classify,
    align: AlignSpec {
        sp_use,
        entry_sp: 0,
        access_rule: None,
        call_rule: Some(
            "the RISC-V psABI requires it at every call (\"Integer Calling Convention\": the stack pointer shall be \
             aligned to a 128-bit boundary upon procedure entry)",
        ),
        aligned_only,
        aligned_rule: "LR/SC and AMOs need a naturally aligned address or they raise an address-misaligned or \
             access-fault exception (RISC-V unprivileged ISA, \"A\" extension)",
        address: Some(paren_address),
        fault_regs: &[],
        unicorn_regs: &UNICORN_REGS,
    },
    capability_trap: "unimp",
    capability: CapabilitySpec {
        symbol: "OPENSSL_riscvcap_P",
        words: 4,
        source: "OpenSSL crypto/riscvcap.c (OPENSSL_riscvcap_P[RISCV_CAPABILITY_COUNT]); OpenSSL 4.0.3 has no \
                 riscv64 Poly1305 and chooses its riscv64 MD5 at build time",
        paths: &[DispatchPath { name: "scalar", bits: &[], marker: None, extensions: &[], source: "no bit set" }],
    },
    hotspot: HotSpotSpec {
        os_arch: &["riscv64"],
        debian_arch: "riscv64",
        variant_prefix: "hotspot-riscv64",
        jdk: "Debian 12 has no riscv64 port (its OpenJDK is in Debian 13 and debian-ports), or a user's JDK folder",
        check: None,
        // a zero halfword is an illegal instruction (c.unimp)
        gap_fill: 0,
    },
};

/// Unicorn's ids of x0-x31, by the ABI names llvm-objdump prints.
const UNICORN_REGS: [(&str, i32); 32] = {
    const NAMES: [&str; 32] = [
        "zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7",
        "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "t6",
    ];
    let mut out = [("zero", RegisterRISCV::X0 as i32); 32];
    let mut i = 0;
    while i < 32 {
        out[i] = (NAMES[i], RegisterRISCV::X0 as i32 + i as i32);
        i += 1;
    }
    out
};

/// Whether the instruction's bytes are a call: `jal`/`jalr` with rd = ra, or `c.jalr` (RISC-V
/// unprivileged ISA, "Control Transfer Instructions"; RV64 has no `c.jal`).
fn is_call(bytes: &[u8]) -> bool {
    match *bytes {
        [a, b, c, d, ..] if a & 3 == 3 => {
            let w = u32::from_le_bytes([a, b, c, d]);
            matches!(w & 0x7f, 0x6f | 0x67) && (w >> 7) & 31 == 1
        }
        [a, b, ..] if a & 3 != 3 => {
            let h = u16::from_le_bytes([a, b]);
            h & 0xf07f == 0x9002 && (h >> 7) & 31 != 0
        }
        _ => false,
    }
}

/// What a RISC-V instruction does with sp: a call is checked (and returns with sp where it
/// was); `addi sp, sp, imm` moves it; any other write to sp, `j`, `jr`, `ret` and `tail` end
/// the tracking.
fn sp_use(insn: &Insn) -> SpUse {
    const NOT_WRITING: &[&str] = &[
        "sb", "sh", "sw", "sd", "fsh", "fsw", "fsd", "beq", "bne", "blt", "bge", "bltu", "bgeu", "beqz", "bnez",
        "blez", "bgez", "bltz", "bgtz", "bgt", "ble", "bgtu", "bleu",
    ];
    if is_call(&insn.bytes) {
        return SpUse { check: Some(SpCheck::Call), then: SpEffect::Keep };
    }
    let m = insn.mnemonic();
    let m = m.strip_prefix("c.").unwrap_or(m);
    if ["j", "jr", "ret", "tail"].contains(&m) {
        return SpUse { check: None, then: SpEffect::Unknown };
    }
    let mut parts = operands(&insn.text).split(", ");
    if parts.next() != Some("sp") || NOT_WRITING.contains(&m) {
        return SpUse::NONE;
    }
    let adjust = match (m, parts.next(), parts.next()) {
        ("addi", Some("sp"), Some(imm)) => parse_imm(imm),
        _ => None,
    };
    SpUse { check: None, then: adjust.map_or(SpEffect::Unknown, SpEffect::Adjust) }
}

/// The size an LR/SC/AMO must be aligned to: `.w` 4, `.d` 8.
fn aligned_only(insn: &Insn) -> Option<u64> {
    let m = insn.mnemonic();
    if !(m.starts_with("lr.") || m.starts_with("sc.") || m.starts_with("amo")) {
        return None;
    }
    match m.split('.').nth(1) {
        Some("w") => Some(4),
        Some("d") => Some(8),
        _ => None,
    }
}

/// The address of an A-extension memory operand, `(t0)` (or `0(t0)`).
fn paren_address(insn: &Insn, reg: &mut dyn FnMut(&str) -> Option<u64>) -> Option<u64> {
    let ops = operands(&insn.text);
    let open = ops.rfind('(')?;
    let name = ops[open + 1..].split(')').next()?;
    let offset = ops[..open].rsplit(", ").next().filter(|s| !s.is_empty()).map_or(Some(0), parse_imm)?;
    Some(reg(name)?.wrapping_add(offset as u64))
}

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
    } else if m.starts_with('v') {
        // Every RVV instruction (vsetvli, vle64.v, vadd.vv...) and no other starts with `v`.
        InsnClass::Vector
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

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(bytes: &[u8], text: &str) -> Insn {
        Insn { addr: 0x1000, bytes: bytes.to_vec(), text: text.into() }
    }

    #[test]
    fn calls_are_jal_and_jalr_with_rd_ra() {
        assert!(is_call(&[0xef, 0, 0, 0]), "jal ra, 0");
        assert!(is_call(&[0xe7, 0x00, 0x05, 0x00]), "jalr ra, 0(a0)");
        assert!(is_call(&[0x02, 0x95]), "c.jalr a0");
        assert!(!is_call(&[0x6f, 0, 0, 0]), "j 0 (jal zero)");
        assert!(!is_call(&[0x02, 0x85]), "c.jr a0");
        assert!(!is_call(&[0x02, 0x90]), "c.ebreak");
        assert!(!is_call(&[0xef]), "a short word");
    }

    #[test]
    fn sp_moves_are_tracked() {
        let moves = |then| SpUse { check: None, then };
        let cases = [
            (insn(&[0x13, 0x01, 0x01, 0xff], "addi sp, sp, -16"), moves(SpEffect::Adjust(-16))),
            (insn(&[0, 0], "mv sp, s0"), moves(SpEffect::Unknown)),
            (insn(&[0, 0], "sd ra, 8(sp)"), SpUse::NONE),
            (insn(&[0, 0], "sd sp, 0(a0)"), SpUse::NONE),
            (insn(&[0x82, 0x80], "ret"), moves(SpEffect::Unknown)),
            (insn(&[0xef, 0, 0, 0], "jal 0x1000"), SpUse { check: Some(SpCheck::Call), then: SpEffect::Keep }),
        ];
        for (i, want) in cases {
            assert_eq!(sp_use(&i), want, "{}", i.text);
        }
    }

    #[test]
    fn lr_sc_and_amos_need_their_size() {
        assert_eq!(aligned_only(&insn(&[], "lr.d t1, (t0)")), Some(8));
        assert_eq!(aligned_only(&insn(&[], "amoadd.w.aqrl a0, a1, (a2)")), Some(4));
        assert_eq!(aligned_only(&insn(&[], "ld t1, 0(t0)")), None);
        let mut regs = |r: &str| (r == "t0").then_some(0x3001);
        assert_eq!(paren_address(&insn(&[], "lr.d t1, (t0)"), &mut regs), Some(0x3001));
    }
}

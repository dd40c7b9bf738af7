//! Instruction mix: the image is disassembled once with `llvm-objdump` (Debian package `llvm`),
//! every instruction gets one class, and a block profile weights the classes by how often each
//! translation block ran.
//!
//! One class per instruction, first match wins: branch (any control transfer), multiply
//! (integer multiply and divide), extension (an instruction from an ISA extension beyond the
//! variant's base: Zbb on RISC-V; BMI/ADX/AVX/POPCNT on x86-64; CRC/crypto on AArch64), store
//! (writes memory), load (reads memory; an x86 ALU instruction with a memory source counts here),
//! ALU (everything else, including moves and `nop`).

use std::collections::BTreeMap;
use std::process::Command;

use serde::Serialize;

use crate::backend::icount::BlockProfile;
use crate::image::Image;
use crate::toolchain::{self, Tool};
use crate::variant::Arch;

/// `llvm-objdump` (package `llvm`, which ci/setup.sh installs).
pub const LLVM_OBJDUMP: Tool = Tool { program: "llvm-objdump", package: "llvm" };

/// The class of one instruction (see the module docs for the rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InsnClass {
    /// Reads memory.
    Load,
    /// Writes memory.
    Store,
    /// Integer arithmetic, logic, shifts, moves.
    Alu,
    /// Integer multiply or divide.
    Multiply,
    /// Jump, branch, call, return.
    Branch,
    /// From an ISA extension beyond the base (Zbb, BMI, ...).
    Extension,
}

/// Executed instructions by class (per block, per call, or in total).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Mix {
    /// Loads.
    pub loads: f64,
    /// Stores.
    pub stores: f64,
    /// ALU instructions.
    pub alu: f64,
    /// Multiplies and divides.
    pub multiplies: f64,
    /// Branches, jumps, calls, returns.
    pub branches: f64,
    /// Extension instructions.
    pub extension: f64,
}

impl Mix {
    /// Adds `n` instructions of `class`.
    pub fn add(&mut self, class: InsnClass, n: f64) {
        let slot = match class {
            InsnClass::Load => &mut self.loads,
            InsnClass::Store => &mut self.stores,
            InsnClass::Alu => &mut self.alu,
            InsnClass::Multiply => &mut self.multiplies,
            InsnClass::Branch => &mut self.branches,
            InsnClass::Extension => &mut self.extension,
        };
        *slot += n;
    }

    /// Sum over the classes.
    pub fn total(&self) -> f64 {
        self.loads + self.stores + self.alu + self.multiplies + self.branches + self.extension
    }

    /// `(self - other) / n`, class by class: the mix of the blocks one profile ran more.
    pub fn per(&self, other: &Mix, n: f64) -> Mix {
        Mix {
            loads: (self.loads - other.loads) / n,
            stores: (self.stores - other.stores) / n,
            alu: (self.alu - other.alu) / n,
            multiplies: (self.multiplies - other.multiplies) / n,
            branches: (self.branches - other.branches) / n,
            extension: (self.extension - other.extension) / n,
        }
    }
}

/// Every instruction of an image's code, by address.
#[derive(Debug, Clone)]
pub struct Disassembly {
    insns: BTreeMap<u64, (String, InsnClass)>,
}

/// `llvm-objdump` options per architecture: RV64GC and all of Zbb decoded on RISC-V (so a Zbb
/// instruction in a build without Zbb shows as one; `--mattr` replaces the defaults, hence
/// the whole list), Intel syntax on x86 (destination first).
fn objdump_args(arch: Arch) -> &'static [&'static str] {
    match arch {
        Arch::Riscv64 => &["--mattr=+m,+a,+f,+d,+c,+zbb"],
        Arch::Aarch64 => &[],
        Arch::X86_64 => &["-M", "intel"],
    }
}

impl Disassembly {
    /// Disassembles `image` with `llvm-objdump -d`.
    ///
    /// # Errors
    /// `llvm-objdump` missing (naming the Debian package) or failing.
    pub fn of(image: &Image) -> Result<Disassembly, String> {
        let objdump = toolchain::find(LLVM_OBJDUMP).map_err(|e| e.to_string())?;
        let out = Command::new(objdump)
            .args(["-d", "--no-show-raw-insn"])
            .args(objdump_args(image.arch))
            .arg(&image.path)
            .output()
            .map_err(|e| format!("llvm-objdump: {e}"))?;
        if !out.status.success() {
            return Err(format!("llvm-objdump {}: {}", image.path.display(), String::from_utf8_lossy(&out.stderr)));
        }
        Ok(Disassembly::parse(image.arch, &String::from_utf8_lossy(&out.stdout)))
    }

    /// Parses `llvm-objdump -d --no-show-raw-insn` output: lines `   addr: \tmnemonic\toperands`.
    pub fn parse(arch: Arch, text: &str) -> Disassembly {
        let mut insns = BTreeMap::new();
        for line in text.lines() {
            let Some((addr, rest)) = line.trim_start().split_once(':') else { continue };
            let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
            let mut fields = rest.trim().splitn(2, char::is_whitespace);
            let Some(mnemonic) = fields.next().filter(|m| !m.is_empty()) else { continue };
            let operands = fields.next().unwrap_or("").trim();
            insns.insert(
                addr,
                (format!("{mnemonic} {operands}").trim().to_string(), classify(arch, mnemonic, operands)),
            );
        }
        Disassembly { insns }
    }

    /// The classes of the `icount` instructions from `addr` (a translation block).
    ///
    /// # Errors
    /// When `addr` is not an instruction boundary or the block runs past the disassembly.
    pub fn block(&self, addr: u64, icount: u32) -> Result<Vec<InsnClass>, String> {
        let v: Vec<(u64, InsnClass)> =
            self.insns.range(addr..).take(icount as usize).map(|(&a, (_, c))| (a, *c)).collect();
        if v.first().map(|x| x.0) != Some(addr) || v.len() != icount as usize {
            return Err(format!("block at {addr:#x} ({icount} instructions) does not match the disassembly"));
        }
        if let Some((a, _)) = v.iter().find(|(a, _)| self.text(*a).is_some_and(|t| t.starts_with('<'))) {
            return Err(format!("llvm-objdump could not decode the executed instruction at {a:#x}"));
        }
        Ok(v.into_iter().map(|x| x.1).collect())
    }

    /// Every instruction in `start..end`: (address, text, class), by address.
    pub fn range(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, &str, InsnClass)> + '_ {
        self.insns.range(start..end).map(|(&a, (t, c))| (a, t.as_str(), *c))
    }

    /// The text of the instruction at `addr`, if one starts there.
    pub fn text(&self, addr: u64) -> Option<&str> {
        self.insns.get(&addr).map(|(t, _)| t.as_str())
    }

    /// The executed instructions of `profile`, by class.
    ///
    /// # Errors
    /// See [`block`](Self::block).
    pub fn mix(&self, profile: &BlockProfile) -> Result<Mix, String> {
        let mut m = Mix::default();
        for (addr, icount, execs) in profile.blocks() {
            for c in self.block(addr, icount)? {
                m.add(c, execs as f64);
            }
        }
        Ok(m)
    }
}

/// Zbb mnemonics (RISC-V Bitmanip v1.0.0 §1.3).
const ZBB: &[&str] = &[
    "andn", "orn", "xnor", "clz", "clzw", "ctz", "ctzw", "cpop", "cpopw", "max", "maxu", "min", "minu", "sext.b",
    "sext.h", "zext.h", "rol", "rolw", "ror", "rori", "roriw", "rorw", "orc.b", "rev8",
];

/// The class of one instruction of `arch`.
pub fn classify(arch: Arch, mnemonic: &str, operands: &str) -> InsnClass {
    let m = mnemonic.to_ascii_lowercase();
    match arch {
        Arch::Riscv64 => classify_riscv(m.strip_prefix("c.").unwrap_or(&m)),
        Arch::Aarch64 => classify_aarch64(&m),
        Arch::X86_64 => classify_x86(&m, operands),
    }
}

fn classify_riscv(m: &str) -> InsnClass {
    const BRANCH: &[&str] = &[
        "beq", "bne", "blt", "bge", "bltu", "bgeu", "beqz", "bnez", "blez", "bgez", "bltz", "bgtz", "bgt", "ble",
        "bgtu", "bleu", "j", "jal", "jr", "jalr", "ret", "call", "tail",
    ];
    const MUL: &[&str] =
        &["mul", "mulh", "mulhsu", "mulhu", "mulw", "div", "divu", "divw", "divuw", "rem", "remu", "remw", "remuw"];
    const LOAD: &[&str] = &["lb", "lh", "lw", "ld", "lbu", "lhu", "lwu", "flh", "flw", "fld", "lr.w", "lr.d"];
    const STORE: &[&str] = &["sb", "sh", "sw", "sd", "fsh", "fsw", "fsd", "sc.w", "sc.d"];
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

fn classify_aarch64(m: &str) -> InsnClass {
    const BRANCH: &[&str] = &["b", "bl", "br", "blr", "ret", "cbz", "cbnz", "tbz", "tbnz"];
    const MUL: &[&str] = &[
        "mul", "madd", "msub", "mneg", "smull", "umull", "smulh", "umulh", "smaddl", "umaddl", "smsubl", "umsubl",
        "smnegl", "umnegl", "sdiv", "udiv",
    ];
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

fn classify_x86(m: &str, operands: &str) -> InsnClass {
    const EXT: &[&str] = &[
        "andn", "bextr", "blsi", "blsmsk", "blsr", "bzhi", "mulx", "pdep", "pext", "rorx", "sarx", "shlx", "shrx",
        "adcx", "adox", "lzcnt", "tzcnt", "popcnt", "movbe",
    ];
    let memory = operands.contains('[') && m != "lea" && m != "nop";
    let dest_memory = memory && operands.split(',').next().is_some_and(|d| d.contains('['));
    if m.starts_with('j') || m == "call" || m == "ret" || m.starts_with("loop") {
        InsnClass::Branch
    } else if EXT.contains(&m) || m.starts_with('v') {
        InsnClass::Extension
    } else if matches!(m, "mul" | "imul" | "div" | "idiv") {
        InsnClass::Multiply
    } else if m == "push" || (dest_memory && !matches!(m, "cmp" | "test")) {
        InsnClass::Store
    } else if m == "pop" || memory {
        InsnClass::Load
    } else {
        InsnClass::Alu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_the_rules() {
        use InsnClass::*;
        let cases = [
            (Arch::Riscv64, "lw", "s0, 0(a0)", Load),
            (Arch::Riscv64, "sd", "s0, 0(sp)", Store),
            (Arch::Riscv64, "roriw", "a4, a4, 25", Extension),
            (Arch::Riscv64, "bset", "a0, a0, a1", Alu),
            (Arch::Riscv64, "bge", "a3, a2, 0x1128a", Branch),
            (Arch::Riscv64, "mulhu", "t0, a0, a1", Multiply),
            (Arch::Aarch64, "ldp", "x10, x11, [x3]", Load),
            (Arch::Aarch64, "stp", "x19, x20, [sp, #-32]!", Store),
            (Arch::Aarch64, "b.ne", "0x210aa8", Branch),
            (Arch::Aarch64, "umulh", "x1, x2, x3", Multiply),
            (Arch::Aarch64, "ror", "w9, w9, #25", Alu),
            (Arch::X86_64, "add", "r8d, dword ptr [rdi + 4]", Load),
            (Arch::X86_64, "mov", "dword ptr [rsi], r8d", Store),
            (Arch::X86_64, "cmp", "qword ptr [rsi], 0", Load),
            (Arch::X86_64, "lea", "r8d, [r8 + rax - 0x28955b88]", Alu),
            (Arch::X86_64, "rol", "r8d, 7", Alu),
            (Arch::X86_64, "mul", "r11", Multiply),
            (Arch::X86_64, "jle", "0x201180", Branch),
            (Arch::X86_64, "push", "rbx", Store),
            (Arch::X86_64, "rorx", "eax, ebx, 7", Extension),
        ];
        for (arch, m, ops, want) in cases {
            assert_eq!(classify(arch, m, ops), want, "{arch} {m} {ops}");
        }
    }

    #[test]
    fn parses_objdump_lines_and_maps_blocks() {
        let text = "\n0000000000011258 <md5_implCompress>:\n   11258:      \tli\ta2, 0\n   1125a:      \tli\ta3, 0\n\n\
                    000000000001125c <md5_implCompressMB>:\n   1125c:      \taddi\tsp, sp, -96\n   1125e:      \tsd\ts0, 0(sp)\n";
        let d = Disassembly::parse(Arch::Riscv64, text);
        assert_eq!(d.text(0x1125e), Some("sd s0, 0(sp)"));
        assert_eq!(
            d.block(0x11258, 4).unwrap(),
            vec![InsnClass::Alu, InsnClass::Alu, InsnClass::Alu, InsnClass::Store]
        );
        assert!(d.block(0x11259, 1).is_err(), "not an instruction boundary");
        assert!(d.block(0x1125c, 3).is_err(), "runs past the end");
    }
}

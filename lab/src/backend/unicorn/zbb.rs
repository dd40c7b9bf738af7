//! Zbb (basic bit manipulation) for the Unicorn backend, which decodes none of it: Unicorn 2.1.5
//! (QEMU 5.0.1 core) raises an illegal-instruction exception, the interrupt hook hands the word
//! to [`ZbbEmulator::emulate`], which decodes it, executes it on the register file and lets execution resume
//! at the next instruction. Anything that is not Zbb stays an illegal instruction.
//!
//! Encodings and semantics: "RISC-V Bit-Manipulation ISA-extensions", version 1.0.0
//! (2021-06-06), chapter 1.3 "Zbb: Basic bit-manipulation" (the instruction list) and
//! chapter 1.5 "Instructions (in alphabetical order)" (one encoding table and one operation
//! per instruction). Only the RV64 forms are decoded: the RV32-only encodings of `zext.h`
//! (major opcode OP) and `rev8` (imm 0x698) are different instructions on RV64 (`pack` of Zbkb,
//! and a reserved encoding) and stay illegal.

use std::collections::HashMap;

use unicorn_engine::{RegisterRISCV, Unicorn};

/// Major opcodes (RISC-V unprivileged spec, "RV32/64G Instruction Set Listings").
const OP_IMM: u32 = 0b001_0011;
const OP_IMM_32: u32 = 0b001_1011;
const OP: u32 = 0b011_0011;
const OP_32: u32 = 0b011_1011;

/// One Zbb operation. Shift amounts of `rori`/`roriw` are part of the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZbbOp {
    /// `rd = rs1 & ~rs2` (§1.5 andn).
    Andn,
    /// `rd = rs1 | ~rs2` (§1.5 orn).
    Orn,
    /// `rd = ~(rs1 ^ rs2)` (§1.5 xnor).
    Xnor,
    /// Count leading zeros, 64-bit (64 for 0).
    Clz,
    /// Count leading zeros of the low word (32 for 0).
    Clzw,
    /// Count trailing zeros, 64-bit (64 for 0).
    Ctz,
    /// Count trailing zeros of the low word (32 for 0).
    Ctzw,
    /// Population count, 64-bit.
    Cpop,
    /// Population count of the low word.
    Cpopw,
    /// Signed maximum.
    Max,
    /// Unsigned maximum.
    Maxu,
    /// Signed minimum.
    Min,
    /// Unsigned minimum.
    Minu,
    /// Sign-extend the low byte.
    SextB,
    /// Sign-extend the low halfword.
    SextH,
    /// Zero-extend the low halfword.
    ZextH,
    /// Rotate left by `rs2[5:0]`.
    Rol,
    /// Rotate the low word left by `rs2[4:0]`, sign-extend.
    Rolw,
    /// Rotate right by `rs2[5:0]`.
    Ror,
    /// Rotate right by the immediate `shamt[5:0]`.
    Rori(u32),
    /// Rotate the low word right by `shamt[4:0]`, sign-extend.
    Roriw(u32),
    /// Rotate the low word right by `rs2[4:0]`, sign-extend.
    Rorw,
    /// Each byte becomes 0xff if it was non-zero, else 0x00 (bitwise OR-combine).
    OrcB,
    /// Reverse the byte order of the 64-bit register.
    Rev8,
}

/// A decoded Zbb instruction: operation and register numbers (x0..x31).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZbbInsn {
    /// What it computes.
    pub op: ZbbOp,
    /// Destination register number.
    pub rd: u32,
    /// First source register number.
    pub rs1: u32,
    /// Second source register number (unused by unary and immediate forms).
    pub rs2: u32,
}

/// Decodes a 32-bit instruction word as Zbb (RV64), or `None` when it is anything else.
pub fn decode(word: u32) -> Option<ZbbInsn> {
    let opcode = word & 0x7f;
    let rd = (word >> 7) & 0x1f;
    let funct3 = (word >> 12) & 7;
    let rs1 = (word >> 15) & 0x1f;
    let rs2 = (word >> 20) & 0x1f;
    let funct7 = word >> 25;
    let imm12 = word >> 20;
    use ZbbOp::*;
    let op = match (opcode, funct3) {
        // R-type, OP: funct7 0100000 = negated-operand logic, 0000101 = min/max, 0110000 = rotates.
        (OP, _) => match (funct7, funct3) {
            (0b010_0000, 0b111) => Andn,
            (0b010_0000, 0b110) => Orn,
            (0b010_0000, 0b100) => Xnor,
            (0b000_0101, 0b110) => Max,
            (0b000_0101, 0b111) => Maxu,
            (0b000_0101, 0b100) => Min,
            (0b000_0101, 0b101) => Minu,
            (0b011_0000, 0b001) => Rol,
            (0b011_0000, 0b101) => Ror,
            _ => return None,
        },
        (OP_32, _) => match (funct7, funct3, rs2) {
            (0b011_0000, 0b001, _) => Rolw,
            (0b011_0000, 0b101, _) => Rorw,
            (0b000_0100, 0b100, 0) => ZextH, // RV64 encoding (§1.5 zext.h)
            _ => return None,
        },
        // Unary forms: imm[11:0] = 0110000 xxxxx, funct3 001.
        (OP_IMM, 0b001) => match imm12 {
            0x600 => Clz,
            0x601 => Ctz,
            0x602 => Cpop,
            0x604 => SextB,
            0x605 => SextH,
            _ => return None,
        },
        (OP_IMM, 0b101) => match imm12 {
            0x287 => OrcB,
            0x6b8 => Rev8, // RV64 encoding (§1.5 rev8); 0x698 is RV32's
            _ if imm12 >> 6 == 0b01_1000 => Rori(imm12 & 0x3f),
            _ => return None,
        },
        (OP_IMM_32, 0b001) => match imm12 {
            0x600 => Clzw,
            0x601 => Ctzw,
            0x602 => Cpopw,
            _ => return None,
        },
        (OP_IMM_32, 0b101) if funct7 == 0b011_0000 => Roriw(rs2),
        _ => return None,
    };
    Some(ZbbInsn { op, rd, rs1, rs2 })
}

/// Sign-extends a 32-bit result to 64 bits, as every RV64 `*w` instruction does.
fn sext32(x: u32) -> u64 {
    x as i32 as i64 as u64
}

/// The value `op` writes to rd, given the values of rs1 and rs2 (§1.5, "Operation").
pub fn execute(op: ZbbOp, a: u64, b: u64) -> u64 {
    use ZbbOp::*;
    let w = a as u32;
    match op {
        Andn => a & !b,
        Orn => a | !b,
        Xnor => !(a ^ b),
        Clz => u64::from(a.leading_zeros()),
        Clzw => u64::from(w.leading_zeros()),
        Ctz => u64::from(a.trailing_zeros()),
        Ctzw => u64::from(w.trailing_zeros()),
        Cpop => u64::from(a.count_ones()),
        Cpopw => u64::from(w.count_ones()),
        Max => (a as i64).max(b as i64) as u64,
        Maxu => a.max(b),
        Min => (a as i64).min(b as i64) as u64,
        Minu => a.min(b),
        SextB => a as u8 as i8 as i64 as u64,
        SextH => a as u16 as i16 as i64 as u64,
        ZextH => u64::from(a as u16),
        Rol => a.rotate_left((b & 63) as u32),
        Rolw => sext32(w.rotate_left((b & 31) as u32)),
        Ror => a.rotate_right((b & 63) as u32),
        Rori(sh) => a.rotate_right(sh & 63),
        Roriw(sh) => sext32(w.rotate_right(sh & 31)),
        Rorw => sext32(w.rotate_right((b & 31) as u32)),
        OrcB => u64::from_le_bytes(a.to_le_bytes().map(|x| if x == 0 { 0 } else { 0xff })),
        Rev8 => a.swap_bytes(),
    }
}

/// Unicorn register id of `x<n>`.
fn xreg(n: u32) -> i32 {
    RegisterRISCV::X0 as i32 + n as i32
}

/// Emulates the Zbb instructions of one engine on the illegal-instruction exception,
/// remembering each decoded word by its address (the lab never writes to guest code, so a word
/// at an address does not change).
#[derive(Debug, Default)]
pub struct ZbbEmulator {
    decoded: HashMap<u64, Option<ZbbInsn>>,
}

impl ZbbEmulator {
    /// Emulates the instruction that just raised an illegal-instruction exception, if it is Zbb,
    /// and returns its address and decoding.
    ///
    /// Call from the interrupt hook on `intno == 2` (RISC-V "illegal instruction" cause).
    /// Unicorn has already set pc to fault + 4 (docs/DESIGN.md, measured; `cpu_handle_exception`
    /// adds 4 on RISC-V), which is the next instruction because every Zbb instruction is 32
    /// bits wide. Returns `None`, touching nothing, when the word is not Zbb or cannot be read:
    /// the caller then reports the illegal instruction as before.
    pub fn emulate<D>(&mut self, uc: &mut Unicorn<D>) -> Option<(u64, ZbbInsn)> {
        let next = uc.reg_read(RegisterRISCV::PC).ok()?;
        let at = next.wrapping_sub(4);
        let insn = match self.decoded.get(&at) {
            Some(&d) => d,
            None => {
                let mut bytes = [0u8; 4];
                uc.mem_read(at, &mut bytes).ok()?;
                let d = decode(u32::from_le_bytes(bytes));
                self.decoded.insert(at, d);
                d
            }
        };
        let insn = insn?;
        apply(uc, insn).then_some((at, insn))
    }
}

/// Executes `insn` on the register file: reads rs1 and rs2, writes rd. `false` if Unicorn
/// refused a register access.
fn apply<D>(uc: &mut Unicorn<D>, insn: ZbbInsn) -> bool {
    let (Ok(a), Ok(b)) = (uc.reg_read(xreg(insn.rs1)), uc.reg_read(xreg(insn.rs2))) else { return false };
    // Writes to x0 are discarded (unprivileged spec, "Integer Register State").
    insn.rd == 0 || uc.reg_write(xreg(insn.rd), execute(insn.op, a, b)).is_ok()
}

/// `beq zero, zero, .+4`: the base-ISA word that replaces a Zbb instruction in the code Unicorn
/// fetches ([`ZbbPatches`]). Same length (4 bytes), writes no register, both outcomes go to the
/// next instruction, and it ends its translation block. Its upper half is 0x0000, the defined
/// illegal compressed parcel, so a jump into the middle of it is an illegal instruction.
pub const PATCH_WORD: u32 = 0x0000_0263;

/// Largest span of code, in bytes, that patched instructions may cover (one table slot per
/// 2-byte parcel); a Zbb instruction farther away keeps trapping.
const MAX_SPAN: u64 = 1 << 20;

/// Zbb without an exception per instruction. Each Zbb instruction that trapped once (and was
/// emulated by [`ZbbEmulator`]) is replaced by [`PATCH_WORD`] in a copy of its code page that
/// only instruction fetches see (loads still read the real words); the translation block that
/// ends with the patch falls through to the next instruction, and the block hook at the start of
/// that next block executes the Zbb instruction on the register file ([`ZbbPatches::enter`]).
/// Counts stay exact: the patch is one instruction in place of one, and no block is added to
/// the kernel's code. Fault addresses stay exact: Zbb instructions do not access memory, and no
/// other word moves.
#[derive(Debug, Default)]
pub struct ZbbPatches {
    /// Emulated on a trap, not yet patched (patched between runs, never while one runs).
    pending: Vec<(u64, ZbbInsn)>,
    /// The address of the first slot of `after`.
    base: u64,
    /// By 2-byte parcel from `base`: the patched instruction that ends just before that address.
    /// A direct table because the block hook asks at every block start.
    after: Vec<Option<ZbbInsn>>,
    patched: usize,
    /// Code pages (4 KiB) that have a patched copy.
    pages: Vec<u64>,
    /// End of the translation block that ran last (0 at the start of a run).
    last_end: u64,
}

impl ZbbPatches {
    /// Queues the Zbb instruction `insn` at `addr`, just emulated on a trap, for patching.
    pub fn trapped(&mut self, addr: u64, insn: ZbbInsn) {
        if !self.pending.iter().any(|&(a, _)| a == addr) {
            self.pending.push((addr, insn));
        }
    }

    /// Takes the queued instructions to patch, leaving out any already patched.
    pub fn take_pending(&mut self) -> Vec<(u64, ZbbInsn)> {
        let mut p = std::mem::take(&mut self.pending);
        p.retain(|&(a, _)| self.get(a + 4).is_none());
        p
    }

    /// The patched instruction that ends right before `next`, if any.
    fn get(&self, next: u64) -> Option<ZbbInsn> {
        let i = next.wrapping_sub(self.base) / 2;
        *self.after.get(usize::try_from(i).ok()?)?
    }

    /// Whether `insn` at `addr` may be patched: the table would stay within `MAX_SPAN`.
    pub fn fits(&self, addr: u64) -> bool {
        if self.after.is_empty() {
            return true;
        }
        let lo = self.base.min(addr + 4);
        let hi = (self.base + 2 * self.after.len() as u64).max(addr + 6);
        hi - lo <= MAX_SPAN
    }

    /// Records that `insn` at `addr` is now patched in the copy of code page `page`. Call only
    /// when [`fits`](Self::fits).
    pub fn patched(&mut self, page: u64, addr: u64, insn: ZbbInsn) {
        let next = addr + 4;
        if self.after.is_empty() {
            self.base = next;
        }
        if next < self.base {
            let grow = ((self.base - next) / 2) as usize;
            self.after.splice(0..0, std::iter::repeat_n(None, grow));
            self.base = next;
        }
        let i = ((next - self.base) / 2) as usize;
        if i >= self.after.len() {
            self.after.resize(i + 1, None);
        }
        if self.after[i].replace(insn).is_none() {
            self.patched += 1;
        }
        if !self.pages.contains(&page) {
            self.pages.push(page);
        }
    }

    /// Instructions patched so far.
    pub fn len(&self) -> usize {
        self.patched
    }

    /// Whether nothing is patched yet.
    pub fn is_empty(&self) -> bool {
        self.patched == 0
    }

    /// Whether code page `page` has a patched copy (fetches go there, loads do not).
    pub fn has_page(&self, page: u64) -> bool {
        self.pages.contains(&page)
    }

    /// A new run starts, or a trap interrupted the flow: no block ran through a patch.
    pub fn reset_run(&mut self) {
        self.last_end = 0;
    }

    /// Called by the block hook at the start of every translation block (`addr`, `size` bytes).
    /// When the block that ran before ended exactly here, after a patched instruction, control
    /// came through that patch (it ends its block and goes nowhere else): execute the Zbb
    /// instruction now. A block entered here from anywhere else is left alone.
    pub fn enter<D>(&mut self, uc: &mut Unicorn<D>, addr: u64, size: u32) {
        if self.patched == 0 {
            return;
        }
        let through_patch = self.last_end == addr;
        self.last_end = addr + u64::from(size);
        if through_patch {
            if let Some(insn) = self.get(addr) {
                let _ = apply(uc, insn);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words assembled by `clang --target=riscv64 -march=rv64gc_zbb` (llvm-objdump -d).
    #[test]
    fn decodes_words_the_assembler_produced() {
        let cases: [(u32, ZbbOp, u32, u32, u32); 8] = [
            (0x40b57533, ZbbOp::Andn, 10, 10, 11),      // andn a0, a0, a1
            (0x0ab56533, ZbbOp::Max, 10, 10, 11),       // max a0, a0, a1
            (0x60b51533, ZbbOp::Rol, 10, 10, 11),       // rol a0, a0, a1
            (0x6195551b, ZbbOp::Roriw(25), 10, 10, 25), // roriw a0, a0, 25
            (0x63f55513, ZbbOp::Rori(63), 10, 10, 31),  // rori a0, a0, 63
            (0x6b855513, ZbbOp::Rev8, 10, 10, 24),      // rev8 a0, a0
            (0x2875d513, ZbbOp::OrcB, 10, 11, 7),       // orc.b a0, a1
            (0x0805453b, ZbbOp::ZextH, 10, 10, 0),      // zext.h a0, a0
        ];
        for (word, op, rd, rs1, rs2) in cases {
            assert_eq!(decode(word), Some(ZbbInsn { op, rd, rs1, rs2 }), "{word:#010x}");
        }
    }

    #[test]
    fn neighbours_outside_zbb_are_not_decoded() {
        for word in [
            0x0ab51533u32, // clmul a0, a0, a1 (Zbc: funct7 0000101, funct3 001)
            0x20b52533,    // sh1add a0, a0, a1 (Zba)
            0x28b51533,    // bset a0, a0, a1 (Zbs)
            0x08b54533,    // pack a0, a0, a1 (Zbkb; zext.h's RV32 encoding)
            0x69855513,    // rev8 with the RV32 immediate
            0x02b50533,    // mul a0, a0, a1 (M)
            0x00b50533,    // add a0, a0, a1
            0x6035151b,    // clzw-like immediate 0x603 in OP-IMM-32
            0xffffffff,
        ] {
            assert_eq!(decode(word), None, "{word:#010x}");
        }
    }

    #[test]
    fn word_forms_sign_extend_and_take_five_bit_amounts() {
        assert_eq!(execute(ZbbOp::Rolw, 0x8000_0000, 33), 1);
        assert_eq!(execute(ZbbOp::Roriw(1), 1, 0), 0xffff_ffff_8000_0000);
        assert_eq!(execute(ZbbOp::Clzw, 0xffff_ffff_0000_0000, 0), 32);
        assert_eq!(execute(ZbbOp::OrcB, 0x0100_0000_0000_8000, 0), 0xff00_0000_0000_ff00);
    }
}

//! One decoded instruction and its class for `lab bench`'s mix, and the operand text helpers
//! the architecture rows' rules read (the classes' rules are in each row).

/// The class of one instruction for `lab bench`'s instruction mix. One class per instruction,
/// first match wins: branch (any control transfer), multiply (integer multiply and divide),
/// extension (an instruction from an ISA extension beyond the architecture's base: Zbb on
/// RISC-V; anything beyond x86-64-v1 on x86-64; CRC/crypto on AArch64), store (writes memory),
/// load (reads memory; an x86 ALU instruction with a memory source counts here), ALU
/// (everything else, including moves and `nop`). Each architecture's rules live in its row
/// (`ArchSpec::classify`).
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
    /// A SIMD/vector instruction: one naming a vector register (x86 xmm/ymm/zmm or an AVX-512
    /// mask register k; aarch64 NEON `vN.`/`qN`, SVE `zN`/`pN`; every RVV instruction), loads and
    /// stores of them included. Crypto instructions on vector registers (AES, SHA, PMULL) stay
    /// [`Extension`](Self::Extension), as before.
    Vector,
}

/// One decoded instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insn {
    /// Guest address.
    pub addr: u64,
    /// The instruction's bytes.
    pub bytes: Vec<u8>,
    /// Mnemonic and operands (`ror t0, t0, t1`), or `<unknown>` when it does not decode.
    pub text: String,
}

impl Insn {
    /// Whether the disassembler could not decode it with the listing's features.
    pub fn unknown(&self) -> bool {
        self.text.starts_with("<unknown>")
    }

    /// The mnemonic (`ror` of `ror t0, t0, t1`).
    pub fn mnemonic(&self) -> &str {
        self.text.split_whitespace().next().unwrap_or("")
    }
}

/// The operands of an instruction's text: `x29, x30, [sp, #-16]!` of `stp x29, x30, [sp, #-16]!`.
pub fn operands(text: &str) -> &str {
    text.split_once(' ').map_or("", |(_, o)| o.trim())
}

/// An immediate as llvm-objdump prints it: `#-16`, `#0x10`, `-16`, `16`.
pub fn parse_imm(s: &str) -> Option<i64> {
    let s = s.trim().trim_start_matches('#');
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let v = match digits.strip_prefix("0x") {
        Some(h) => i64::from_str_radix(h, 16).ok()?,
        None => digits.parse::<i64>().ok()?,
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

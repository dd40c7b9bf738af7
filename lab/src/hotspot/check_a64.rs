//! What a captured AArch64 stub must satisfy before it becomes an object: whole 4-byte
//! instructions ending in a return or an unconditional branch, no branch, call or
//! PC-relative address outside its own bytes (another stub or a constant area in HotSpot's
//! code cache, which the object would not hold), and no branch to a register (where it goes
//! cannot be known from the bytes).
//!
//! Only the instruction classes that reach other code or memory by PC are decoded (Arm ARM
//! DDI 0487, C4.1 "A64 instruction set encoding": unconditional branch (immediate),
//! compare/test and branch, conditional branch, unconditional branch (register), PC-rel.
//! addressing, load register (literal)); every other word is left to the image scan, which
//! checks each instruction against the declared ISA like any user object. Constant areas are
//! not relocated on AArch64 yet: a stub reading one by PC is refused, naming the instruction.

use super::check::Checked;
use super::CaptureError;

/// What one A64 word does with the program counter, if anything this check cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PcUse {
    /// `ret` (to x30 or another register).
    Return,
    /// `b` to `pc + offset`.
    Branch(i64),
    /// `bl` to `pc + offset`.
    Call(i64),
    /// `b.cond`, `cbz`/`cbnz`, `tbz`/`tbnz` to `pc + offset`.
    CondBranch(i64),
    /// `br`/`blr` to a register.
    Indirect,
    /// `adr` or `ldr` (literal) of `pc + offset`.
    PcRelative(&'static str, i64),
    /// `adrp`: a 4 KiB page address, i.e. an absolute address in the code cache.
    PagePc,
    /// Anything else.
    Other,
}

/// Sign-extends the `bits`-bit field of `w` at `lo`, scaled by `scale`.
fn field(w: u32, lo: u32, bits: u32, scale: i64) -> i64 {
    let v = (w >> lo) & ((1u32 << bits) - 1);
    let signed = ((v as i64) << (64 - bits)) >> (64 - bits);
    signed * scale
}

/// Decodes the PC use of one A64 word (encodings: Arm ARM DDI 0487, C4.1).
fn pc_use(w: u32) -> PcUse {
    match w {
        _ if w & 0xffff_fc1f == 0xd65f_0000 => PcUse::Return,
        _ if w & 0xffff_fc1f == 0xd61f_0000 || w & 0xffff_fc1f == 0xd63f_0000 => PcUse::Indirect,
        _ if w & 0xfc00_0000 == 0x1400_0000 => PcUse::Branch(field(w, 0, 26, 4)),
        _ if w & 0xfc00_0000 == 0x9400_0000 => PcUse::Call(field(w, 0, 26, 4)),
        _ if w & 0xff00_0010 == 0x5400_0000 => PcUse::CondBranch(field(w, 5, 19, 4)),
        _ if w & 0x7e00_0000 == 0x3400_0000 => PcUse::CondBranch(field(w, 5, 19, 4)),
        _ if w & 0x7e00_0000 == 0x3600_0000 => PcUse::CondBranch(field(w, 5, 14, 4)),
        _ if w & 0x9f00_0000 == 0x1000_0000 => {
            let imm = (field(w, 5, 19, 1) << 2) | i64::from((w >> 29) & 3);
            PcUse::PcRelative("adr", imm)
        }
        _ if w & 0x9f00_0000 == 0x9000_0000 => PcUse::PagePc,
        _ if w & 0x3b00_0000 == 0x1800_0000 => PcUse::PcRelative("ldr (literal)", field(w, 5, 19, 4)),
        _ => PcUse::Other,
    }
}

/// Checks one AArch64 stub (HotSpot's `name`, code at `start`).
///
/// # Errors
/// [`CaptureError::Refused`] naming the stub, the offset and what is wrong: a length that is
/// not whole instructions, a last instruction that is not a return or branch (a truncated
/// capture), a branch, call or PC-relative address outside the stub, `adrp`, or a branch to a
/// register.
pub fn a64_stub(name: &str, start: u64, bytes: &[u8]) -> Result<Checked, CaptureError> {
    let refuse = |why: String| CaptureError::Refused { stub: name.to_string(), why };
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return Err(refuse(format!(
            "its {} bytes are not whole 4-byte A64 instructions: a truncated capture",
            bytes.len()
        )));
    }
    let len = bytes.len() as i64;
    let mut last = PcUse::Other;
    for (n, word) in bytes.chunks_exact(4).enumerate() {
        let at = 4 * n as i64;
        let w = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        let u = pc_use(w);
        let outside = |off: i64| !(0..len).contains(&(at + off));
        let target = |off: i64| start.wrapping_add_signed(at + off);
        let why = match u {
            PcUse::Branch(o) | PcUse::CondBranch(o) if outside(o) => Some(format!("branches to {:#x}", target(o))),
            PcUse::Call(o) if outside(o) => Some(format!("calls {:#x}", target(o))),
            PcUse::PcRelative(what, o) if outside(o) => Some(format!("(`{what}`) addresses {:#x}", target(o))),
            PcUse::PagePc => Some("(`adrp`) takes the address of a page of the code cache".to_string()),
            PcUse::Indirect => Some("branches to a register, whose target the bytes do not tell".to_string()),
            _ => None,
        };
        if let Some(why) = why {
            return Err(refuse(format!(
                "the instruction {w:#010x} at +{at:#x} {why}, outside its captured bytes [{start:#x}, {:#x}): \
                 another stub or a constant area, which the lab does not capture and relocate on aarch64",
                start + bytes.len() as u64
            )));
        }
        last = u;
    }
    if !matches!(last, PcUse::Return | PcUse::Branch(_)) {
        return Err(refuse(format!(
            "its {} bytes end in {:#010x}, not a return or branch: the rest of the stub is missing (a truncated \
             capture)",
            bytes.len(),
            u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap_or([0; 4]))
        )));
    }
    Ok(Checked::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    const RET: u32 = 0xd65f_03c0;
    const NOP: u32 = 0xd503_201f;

    #[test]
    fn decodes_the_pc_classes() {
        assert_eq!(pc_use(RET), PcUse::Return);
        assert_eq!(pc_use(0x1400_0002), PcUse::Branch(8)); // b .+8
        assert_eq!(pc_use(0x17ff_ffff), PcUse::Branch(-4)); // b .-4
        assert_eq!(pc_use(0x9400_0010), PcUse::Call(64)); // bl .+64
        assert_eq!(pc_use(0x5400_0041), PcUse::CondBranch(8)); // b.ne .+8
        assert_eq!(pc_use(0xb400_0040), PcUse::CondBranch(8)); // cbz x0, .+8
        assert_eq!(pc_use(0x3700_0040), PcUse::CondBranch(8)); // tbnz w0, #0, .+8
        assert_eq!(pc_use(0x1000_0040), PcUse::PcRelative("adr", 8)); // adr x0, .+8
        assert_eq!(pc_use(0x5800_0040), PcUse::PcRelative("ldr (literal)", 8)); // ldr x0, .+8
        assert_eq!(pc_use(0x9000_0000), PcUse::PagePc); // adrp x0, .
        assert_eq!(pc_use(0xd63f_0020), PcUse::Indirect); // blr x1
        assert_eq!(pc_use(0x0b01_0000), PcUse::Other); // add w0, w0, w1
    }

    #[test]
    fn a_whole_stub_passes_and_a_cut_one_is_refused() {
        // cbz x0, .+8; nop; ret
        assert!(a64_stub("s", 0x1000, &words(&[0xb400_0040, NOP, RET])).is_ok());
        let e = a64_stub("s", 0x1000, &words(&[NOP, NOP])).unwrap_err().to_string();
        assert!(e.contains("`s` refused") && e.contains("not a return or branch"), "{e}");
        let e = a64_stub("s", 0x1000, &words(&[NOP, RET])[..6]).unwrap_err().to_string();
        assert!(e.contains("not whole 4-byte"), "{e}");
    }

    #[test]
    fn references_outside_the_stub_are_refused() {
        // bl .+64 from a 2-instruction stub at 0x1000
        let e = a64_stub("c", 0x1000, &words(&[0x9400_0010, RET])).unwrap_err().to_string();
        assert!(e.contains("calls 0x1040") && e.contains("+0x0"), "{e}");
        // ldr x0, .+8 from the last word: past the end
        let e = a64_stub("l", 0x1000, &words(&[NOP, 0x5800_0040, RET])).unwrap_err().to_string();
        assert!(e.contains("ldr (literal)") && e.contains("0x100c"), "{e}");
        // a backward branch to the stub's own first word is fine
        assert!(a64_stub("b", 0x1000, &words(&[NOP, 0x17ff_ffff])).is_ok());
        assert!(a64_stub("i", 0x1000, &words(&[0xd63f_0020, RET])).unwrap_err().to_string().contains("register"));
    }
}

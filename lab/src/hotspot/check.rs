//! What a captured stub must satisfy before it becomes an object (x86_64, decoded with
//! iced-x86): its bytes decode as whole instructions that end exactly at the end of its range
//! (a truncated capture ends inside one or short of the `ret`), it branches nowhere outside its
//! own bytes and loads no absolute address into HotSpot's code cache (another stub, which the
//! object would not hold), and the CPUID features it needs name the ISA string its variant
//! declares. Its RIP-relative reads outside itself (a constant area, such as the masks of
//! HotSpot's GHASH or AVX Poly1305 stubs) are returned as [`ConstRef`]s: the capture takes the
//! block holding each target and the object relocates the displacement to it.

use iced_x86::{CpuidFeature, Decoder, DecoderError, DecoderOptions, FlowControl, Instruction, OpKind};

use super::CaptureError;
use crate::arch::x86_64::BASELINE;
use crate::variant::Arch;

/// How far from a stub an immediate must lie to be taken for a plain number rather than an
/// absolute address into the code cache (HotSpot reserves 240 MiB of code cache by default).
const CODE_CACHE_REACH: u64 = 1 << 30;

/// An architecture's check of one captured stub ([`crate::arch::HotSpotSpec::check`]): HotSpot's
/// name, the stub's address, its bytes.
pub type StubCheck = fn(&str, u64, &[u8]) -> Result<Checked, CaptureError>;

/// What a stub that passed its check needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// The arch row's ISA extensions its instructions need beyond the base ISA, in row order.
    pub extensions: Vec<&'static str>,
    /// Its reads of memory outside itself relative to the instruction pointer (a constant
    /// area): each becomes a relocation against the captured block that holds the target.
    pub constants: Vec<ConstRef>,
}

/// One RIP-relative reference of a stub to memory outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstRef {
    /// Offset in the stub of the 32-bit displacement.
    pub disp_at: u64,
    /// Offset in the stub of the next instruction (the displacement counts from there).
    pub next: u64,
    /// The address it reaches in the JVM.
    pub target: u64,
    /// How many bytes the instruction reads there (one element of a broadcast); 0 when it only
    /// takes the address (`lea`), so the extent of what it points at is unknown.
    pub len: u64,
}

/// Checks one x86_64 stub (HotSpot's `name`, code at `start`).
///
/// # Errors
/// [`CaptureError::Refused`] naming the stub, the offset and what is wrong: bytes that do not
/// decode, a last instruction cut off or not a return or jump, a branch or an absolute address
/// outside the stub, or an instruction from an extension the lab's x86_64 row does not know.
pub fn x86_stub(name: &str, start: u64, bytes: &[u8]) -> Result<Checked, CaptureError> {
    let refuse = |why: String| CaptureError::Refused { stub: name.to_string(), why };
    let end = start + bytes.len() as u64;
    let mut decoder = Decoder::with_ip(64, bytes, start, DecoderOptions::NONE);
    let mut features: Vec<CpuidFeature> = Vec::new();
    let mut constants = Vec::new();
    let mut last = Instruction::default();
    while decoder.can_decode() {
        let i = decoder.decode();
        let at = i.ip() - start;
        if i.is_invalid() {
            let why = if decoder.last_error() != DecoderError::NoMoreBytes {
                format!("the bytes at +{at:#x} do not decode as x86-64")
            } else {
                format!(
                    "its last instruction, at +{at:#x}, is cut off at the end of the {} captured bytes: a truncated capture",
                    bytes.len()
                )
            };
            return Err(refuse(why));
        }
        if i.is_ip_rel_memory_operand() && (i.ip_rel_memory_address() < start || i.ip_rel_memory_address() >= end) {
            let disp = decoder.get_constant_offsets(&i).displacement_offset() as u64;
            constants.push(ConstRef {
                disp_at: at + disp,
                next: i.next_ip() - start,
                target: i.ip_rel_memory_address(),
                len: if i.mnemonic() == iced_x86::Mnemonic::Lea { 0 } else { i.memory_size().size() as u64 },
            });
        } else if let Some((target, how)) = outside_reference(&i, start, end) {
            return Err(refuse(format!(
                "`{}` at +{at:#x} {how} {target:#x}, outside its captured bytes [{start:#x}, {end:#x}): another stub or \
                 an absolute address in the code cache, which the lab does not capture and relocate",
                i.mnemonic_text()
            )));
        }
        features.extend(i.cpuid_features().iter().filter(|f| !BASELINE.contains(f)));
        last = i;
    }
    if !matches!(last.flow_control(), FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::Interrupt) {
        return Err(refuse(format!(
            "its {} bytes end in `{}`, not a return or jump: the rest of the stub is missing (a truncated capture)",
            bytes.len(),
            last.mnemonic_text()
        )));
    }
    Ok(Checked { extensions: extensions(name, &features)?, constants })
}

/// The x86_64 row's extensions that allow `features`.
fn extensions(stub: &str, features: &[CpuidFeature]) -> Result<Vec<&'static str>, CaptureError> {
    let isa = &crate::arch::x86_64::SPEC.isa;
    let mut names: Vec<&'static str> = Vec::new();
    for f in features {
        let row = isa.extensions.iter().find(|e| e.cpuid.contains(f)).ok_or_else(|| CaptureError::Refused {
            stub: stub.to_string(),
            why: format!("it uses {f:?}, which no x86_64 ISA row of the lab knows (lab/src/arch/x86_64.rs)"),
        })?;
        if !names.contains(&row.name) {
            names.push(row.name);
        }
    }
    names.sort_by_key(|n| isa.extensions.iter().position(|e| e.name == *n));
    Ok(names)
}

/// Mnemonic of a decoded instruction, lower case.
trait MnemonicText {
    fn mnemonic_text(&self) -> String;
}

impl MnemonicText for Instruction {
    fn mnemonic_text(&self) -> String {
        format!("{:?}", self.mnemonic()).to_ascii_lowercase()
    }
}

/// Where `i` reaches outside `[start, end)` other than by a RIP-relative operand, if it does: a
/// branch or call target, or an absolute address (a 64-bit immediate or a base-less
/// displacement) near the stub.
fn outside_reference(i: &Instruction, start: u64, end: u64) -> Option<(u64, &'static str)> {
    let outside = |a: u64| a < start || a >= end;
    let branch = (0..i.op_count())
        .any(|n| matches!(i.op_kind(n), OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64));
    if branch && outside(i.near_branch_target()) {
        return Some((i.near_branch_target(), "branches to"));
    }
    let near = |a: u64| a.abs_diff(start) < CODE_CACHE_REACH && outside(a);
    let imm64 = (0..i.op_count()).any(|n| i.op_kind(n) == OpKind::Immediate64);
    if imm64 && near(i.immediate64()) {
        return Some((i.immediate64(), "loads the absolute address"));
    }
    let absolute = (0..i.op_count()).any(|n| i.op_kind(n) == OpKind::Memory)
        && i.memory_base() == iced_x86::Register::None
        && i.memory_index() == iced_x86::Register::None
        && !i.is_ip_rel_memory_operand();
    if absolute && near(i.memory_displacement64()) {
        return Some((i.memory_displacement64(), "reads absolute memory at"));
    }
    None
}

/// The ISA string (`x86-64`, `x86-64+bmi2+adx`) of `arch` with `extensions` (row names).
pub fn isa_string(arch: Arch, extensions: &[&str]) -> String {
    let isa = &arch.spec().isa;
    let mut names: Vec<&str> = Vec::new();
    for e in extensions {
        if !names.contains(e) {
            names.push(e);
        }
    }
    names.sort_by_key(|n| isa.extensions.iter().position(|e| e.name == *n));
    std::iter::once(isa.base).chain(names).collect::<Vec<_>>().join("+")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// push rbp; mov rbp, rsp; pop rbp; ret
    const TINY: &[u8] = &[0x55, 0x48, 0x8b, 0xec, 0x5d, 0xc3];

    #[test]
    fn a_whole_stub_passes_and_a_cut_one_is_refused() {
        assert_eq!(x86_stub("s", 0x1000, TINY).unwrap(), Checked::default());
        let e = x86_stub("s", 0x1000, &TINY[..4]).unwrap_err().to_string();
        assert!(e.contains("not a return or jump") && e.contains("`s`"), "{e}");
        // mov eax, imm32 cut after two of its bytes
        let e = x86_stub("s", 0x1000, &[0x55, 0xb8, 0x01]).unwrap_err().to_string();
        assert!(e.contains("cut off") || e.contains("do not decode"), "{e}");
    }

    #[test]
    fn references_outside_the_stub_are_refused_or_recorded_as_constants() {
        // movdqa xmm0, [rip + 0x100]; ret: a constant 0x108 bytes on, its displacement at +4
        let rip = [0x66, 0x0f, 0x6f, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3];
        let c = x86_stub("ghash", 0x1000, &rip).unwrap();
        assert_eq!(c.constants, vec![ConstRef { disp_at: 4, next: 8, target: 0x1108, len: 16 }]);
        // call rel32 to 0x2000; ret
        let call = [0xe8, 0xfb, 0x0f, 0x00, 0x00, 0xc3];
        assert!(x86_stub("c", 0x1000, &call).unwrap_err().to_string().contains("branches to 0x2000"));
        // movabs rax, 0x1800 (near the stub); ret
        let abs = [0x48, 0xb8, 0x00, 0x18, 0, 0, 0, 0, 0, 0, 0xc3];
        assert!(x86_stub("a", 0x1000, &abs).unwrap_err().to_string().contains("absolute address 0x1800"));
    }

    #[test]
    fn features_name_the_isa() {
        // rorx eax, ecx, 7 (BMI2); ret
        let c = x86_stub("r", 0x1000, &[0xc4, 0xe3, 0x7b, 0xf0, 0xc1, 0x07, 0xc3]).unwrap();
        assert_eq!(c.extensions, vec!["bmi2"]);
        assert_eq!(isa_string(Arch::X86_64, &c.extensions), "x86-64+bmi2");
        assert_eq!(isa_string(Arch::X86_64, &[]), "x86-64");
    }
}

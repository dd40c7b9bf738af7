//! What a captured stub must satisfy before it becomes an object (x86_64, decoded with
//! iced-x86): its bytes decode as whole instructions that end exactly at the end of its range
//! (a truncated capture ends inside one or short of the `ret`), it reaches nothing outside its
//! own bytes (a RIP-relative operand, a branch or an absolute address into HotSpot's code
//! cache: a constant area or another stub, which the object would not hold), and the CPUID
//! features it needs name the ISA string its variant declares.

use iced_x86::{CpuidFeature, Decoder, DecoderError, DecoderOptions, FlowControl, Instruction, OpKind};

use super::CaptureError;
use crate::arch::x86_64::BASELINE;
use crate::variant::Arch;

/// How far from a stub an immediate must lie to be taken for a plain number rather than an
/// absolute address into the code cache (HotSpot reserves 240 MiB of code cache by default).
const CODE_CACHE_REACH: u64 = 1 << 30;

/// Checks one stub (HotSpot's `name`, code at `start`) and returns the CPUID features beyond
/// baseline x86-64 it needs.
///
/// # Errors
/// [`CaptureError::Refused`] naming the stub, the offset and what is wrong.
pub fn x86_stub(name: &str, start: u64, bytes: &[u8]) -> Result<Vec<CpuidFeature>, CaptureError> {
    let refuse = |why: String| CaptureError::Refused { stub: name.to_string(), why };
    let end = start + bytes.len() as u64;
    let mut decoder = Decoder::with_ip(64, bytes, start, DecoderOptions::NONE);
    let mut features: Vec<CpuidFeature> = Vec::new();
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
        if let Some((target, how)) = outside_reference(&i, start, end) {
            return Err(refuse(format!(
                "`{}` at +{at:#x} {how} {target:#x}, outside its captured bytes [{start:#x}, {end:#x}): a constant \
                 area or another stub of the code cache, which the lab does not capture and relocate (yet)",
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
    features.sort_by_key(|f| *f as u32);
    features.dedup();
    Ok(features)
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

/// Where `i` reaches outside `[start, end)`, if it does: a RIP-relative operand, a branch or
/// call target, or an absolute address (a 64-bit immediate or a base-less displacement) near
/// the stub.
fn outside_reference(i: &Instruction, start: u64, end: u64) -> Option<(u64, &'static str)> {
    let outside = |a: u64| a < start || a >= end;
    if i.is_ip_rel_memory_operand() && outside(i.ip_rel_memory_address()) {
        return Some((i.ip_rel_memory_address(), "reads RIP-relative memory at"));
    }
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

/// The ISA string (`x86-64`, `x86-64+bmi2+adx`) that allows `features`, from the arch row's
/// extensions.
///
/// # Errors
/// A feature no extension row of the lab knows, naming the stub.
pub fn isa_string(arch: Arch, stubs: &[(&str, Vec<CpuidFeature>)]) -> Result<String, CaptureError> {
    let isa = &arch.spec().isa;
    let mut names: Vec<&str> = Vec::new();
    for (stub, features) in stubs {
        for f in features {
            let row = isa.extensions.iter().find(|e| e.cpuid.contains(f)).ok_or_else(|| CaptureError::Refused {
                stub: (*stub).to_string(),
                why: format!("it uses {f:?}, which no x86_64 ISA row of the lab knows (lab/src/arch/x86_64.rs)"),
            })?;
            if !names.contains(&row.name) {
                names.push(row.name);
            }
        }
    }
    names.sort_by_key(|n| isa.extensions.iter().position(|e| e.name == *n));
    Ok(std::iter::once(isa.base).chain(names).collect::<Vec<_>>().join("+"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// push rbp; mov rbp, rsp; pop rbp; ret
    const TINY: &[u8] = &[0x55, 0x48, 0x8b, 0xec, 0x5d, 0xc3];

    #[test]
    fn a_whole_stub_passes_and_a_cut_one_is_refused() {
        assert_eq!(x86_stub("s", 0x1000, TINY).unwrap(), Vec::<CpuidFeature>::new());
        let e = x86_stub("s", 0x1000, &TINY[..4]).unwrap_err().to_string();
        assert!(e.contains("not a return or jump") && e.contains("`s`"), "{e}");
        // mov eax, imm32 cut after two of its bytes
        let e = x86_stub("s", 0x1000, &[0x55, 0xb8, 0x01]).unwrap_err().to_string();
        assert!(e.contains("cut off") || e.contains("do not decode"), "{e}");
    }

    #[test]
    fn references_outside_the_stub_are_refused() {
        // movdqa xmm0, [rip + 0x100]; ret
        let rip = [0x66, 0x0f, 0x6f, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3];
        let e = x86_stub("ghash", 0x1000, &rip).unwrap_err().to_string();
        assert!(e.contains("RIP-relative memory at 0x1108"), "{e}");
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
        let f = x86_stub("r", 0x1000, &[0xc4, 0xe3, 0x7b, 0xf0, 0xc1, 0x07, 0xc3]).unwrap();
        assert_eq!(isa_string(Arch::X86_64, &[("r", f)]).unwrap(), "x86-64+bmi2");
        assert_eq!(isa_string(Arch::X86_64, &[("s", Vec::new())]).unwrap(), "x86-64");
    }
}

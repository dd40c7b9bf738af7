//! Alignment rules that QEMU (qemu-user and Unicorn) does not model, checked by the lab itself
//! (the facts per architecture are the arch rows' [`AlignSpec`]):
//!
//! - **Stack pointer.** AArch64 Linux runs EL0 with SP alignment checking on (`SCTLR_EL1.SA0`),
//!   so a load or store with sp as its base faults on hardware when sp is not 16-byte aligned;
//!   the x86-64 and RISC-V psABIs require a 16-byte aligned sp at every call. [`sp_scan`] tracks
//!   sp modulo 16 through the straight-line code of the image's kernels and flags the
//!   instruction where it is off (an image finding, so every backend's run carries it); the
//!   Unicorn backend hooks exactly those instructions ([`hook_sites`]) and fails the call with
//!   sp's value.
//! - **Aligned-only instructions** (x86 `movdqa` and the other aligned SSE/AVX moves, AArch64
//!   exclusives and acquire/release, RISC-V LR/SC/AMOs): hardware faults on a misaligned
//!   operand. qemu and native report x86's `#GP` without an address; Unicorn's x86 engine (QEMU
//!   5) does not check at all. [`misaligned_operand`] computes the operand's address from the
//!   registers (Unicorn's, or the fault reply's) and [`explain`] names the instruction, the
//!   alignment it needs and the address it got, in the same words on every backend.

use crate::arch::{AlignSpec, SpCheck, SpEffect};
use crate::backend::fault::{Fault, FaultKind};
use crate::batch::Batch;
use crate::disasm::{DisasmError, Insn};
use crate::finding::{Class, Finding};
use crate::image::Image;
use crate::isa::Violation;

/// The alignment the psABIs and AArch64's SP alignment check require of sp, in bytes.
pub const SP_ALIGN: u64 = 16;

pub use crate::vocab::insn::{operands, parse_imm};

/// Where an sp offset came from in the static tracking: the last instruction that moved sp.
#[derive(Debug, Clone, Copy)]
struct Tracked {
    /// sp mod 16, in bytes (0..16).
    sp: u64,
    /// The last instruction that moved sp, if any since the entry.
    moved_by: Option<u64>,
}

/// Addresses of the sized symbols in `[start, end)`: function entries, where sp is known.
fn entries(image: &Image, (start, end): (u64, u64)) -> Vec<u64> {
    let mut out: Vec<u64> = image
        .symbol_names()
        .filter_map(|n| image.symbol(n))
        .filter(|s| s.size > 0 && (start..end).contains(&s.addr))
        .map(|s| s.addr)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The rule an sp check breaks, for `check` on this architecture (`None`: not checked there).
fn rule(spec: &AlignSpec, check: SpCheck) -> Option<&'static str> {
    match check {
        SpCheck::Access => spec.access_rule,
        SpCheck::Call => spec.call_rule,
    }
}

/// The static sp check of the image's kernel code ([`Image::kernel_code`]): from each function
/// entry (a sized symbol, where sp mod 16 is [`AlignSpec::entry_sp`]) through straight-line
/// code, sp moves by the adjustments the arch row recognises ([`AlignSpec::sp_use`]); an
/// unconditional jump, a return or an sp write it cannot follow ends the tracking until the next
/// entry. Each instruction the rules check (an sp-based access on AArch64, a call on x86_64 and
/// riscv64) with sp known to be off 16-byte alignment is a violation naming it, the
/// instruction that moved sp last, and the rule. Loops and jumps are not followed, so it sees
/// only what straight-line code shows (the Unicorn hooks see every path that runs).
///
/// # Errors
/// `llvm-objdump` missing or failing ([`Image::listing`]).
pub fn sp_scan(image: &Image) -> Result<Vec<Violation>, DisasmError> {
    let spec = &image.arch.spec().align;
    let Some(code) = image.kernel_code() else { return Ok(Vec::new()) };
    let listing = image.listing()?;
    let starts = entries(image, code);
    let mut state: Option<Tracked> = None;
    let mut out = Vec::new();
    // Data in `.text` (a perlasm credit string) is no instruction ([`Image::is_symbol_code`]).
    let code_insns = listing.iter().filter(|i| (code.0..code.1).contains(&i.addr) && image.is_symbol_code(i.addr));
    for insn in code_insns {
        if starts.binary_search(&insn.addr).is_ok() {
            state = Some(Tracked { sp: spec.entry_sp % SP_ALIGN, moved_by: None });
        }
        let u = (spec.sp_use)(insn);
        let check = u.check.filter(|&c| !calls_local_helper(image, insn, c));
        if let (Some(check), Some(t)) = (check, state) {
            if let Some(rule) = rule(spec, check).filter(|_| t.sp != 0) {
                out.push(static_violation(image, insn, t, rule));
            }
        }
        state = match (u.then, state) {
            (SpEffect::Keep, s) => s,
            (SpEffect::Adjust(d), Some(t)) => {
                // Modulo 16 first: an adjustment may be any i64 (a bogus immediate must not overflow).
                let sp = (t.sp + d.rem_euclid(SP_ALIGN as i64) as u64) % SP_ALIGN;
                Some(Tracked { sp, moved_by: Some(insn.addr) })
            }
            (SpEffect::Adjust(_), None) | (SpEffect::Unknown, _) => None,
        };
    }
    Ok(out)
}

/// Whether `insn` is a call ([`SpCheck::Call`]) straight to a local symbol of the image (the
/// object's own helper, e.g. OpenSSL's `__poly1305_block`): the psABI's stack alignment at a
/// call binds calls of interfaces (global functions, and anything reached through a register),
/// not a helper whose convention is its author's, so such a call is not checked. The target is
/// the `<name>` llvm-objdump prints after a direct call's address.
fn calls_local_helper(image: &Image, insn: &Insn, check: SpCheck) -> bool {
    if check != SpCheck::Call {
        return false;
    }
    let Some(name) = insn.text.split_once('<').and_then(|(_, r)| r.split_once('>')).map(|(n, _)| n) else {
        return false;
    };
    image.symbol(name).is_some_and(|s| !s.global)
}

/// The violation for `insn` reached with sp `t.sp` bytes past 16-byte alignment.
fn static_violation(image: &Image, insn: &Insn, t: Tracked, rule: &str) -> Violation {
    let after = t
        .moved_by
        .and_then(|a| image.listing().ok()?.at(a).map(|m| format!(" after `{}` at {}", m.text, image.symbolize(a))))
        .unwrap_or_default();
    Violation {
        addr: insn.addr,
        place: image.symbolize(insn.addr),
        insn: insn.text.clone(),
        why: format!("sp is {} bytes off 16-byte alignment here{after}; {rule}", t.sp),
    }
}

/// What a Unicorn hook at an instruction checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteCheck {
    /// sp must be 16-byte aligned when it starts.
    Sp,
    /// Its memory operand must be aligned to this many bytes.
    Operand(u64),
}

/// One instruction of the kernels' code that the Unicorn backend hooks.
#[derive(Debug, Clone)]
pub struct Site {
    /// The instruction.
    pub insn: Insn,
    /// What the hook checks there.
    pub check: SiteCheck,
}

/// The instructions of the image's kernel code the Unicorn backend hooks: every one with an sp
/// rule on this architecture ([`AlignSpec::sp_use`] with a rule), and every aligned-only one
/// whose operand address the arch row can compute ([`AlignSpec::address`]). Found once by
/// decoding the image, so the hooks cost only where they are.
///
/// # Errors
/// `llvm-objdump` missing or failing ([`Image::listing`]).
pub fn hook_sites(image: &Image) -> Result<Vec<Site>, DisasmError> {
    let spec = &image.arch.spec().align;
    let Some(code) = image.kernel_code() else { return Ok(Vec::new()) };
    let listing = image.listing()?;
    let mut out = Vec::new();
    for insn in listing.iter().filter(|i| (code.0..code.1).contains(&i.addr)) {
        let check = (spec.sp_use)(insn).check.filter(|&c| !calls_local_helper(image, insn, c));
        if check.is_some_and(|c| rule(spec, c).is_some()) {
            out.push(Site { insn: insn.clone(), check: SiteCheck::Sp });
        }
        if let Some(need) = (spec.aligned_only)(insn).filter(|_| spec.address.is_some()) {
            out.push(Site { insn: insn.clone(), check: SiteCheck::Operand(need) });
        }
    }
    Ok(out)
}

/// The operand address of aligned-only `insn` and the alignment it needs, when the address is
/// misaligned; `reg` gives register values by name.
pub fn misaligned_operand(
    spec: &AlignSpec,
    insn: &Insn,
    reg: &mut dyn FnMut(&str) -> Option<u64>,
) -> Option<(u64, u64)> {
    let need = (spec.aligned_only)(insn)?;
    let addr = (spec.address?)(insn, reg)?;
    (need > 1 && !addr.is_multiple_of(need)).then_some((addr, need))
}

/// The finding for an alignment fault of the call `label`, when `fault` is one: sp misaligned at
/// an instruction the rules check (Unicorn's hook), or a misaligned operand of an aligned-only
/// instruction (Unicorn's hook; a `#GP` whose address the process backend computed; a bus
/// error at such an instruction on any backend). Names the instruction, its place, the address
/// or sp value, where the address lies, and the rule; `rest` is the backend's own sentence.
pub fn explain(label: &str, fault: &Fault, image: &Image, batch: &Batch, rest: &str) -> Option<Finding> {
    let pc = fault.pc?;
    let insn = image.listing().ok()?.at(pc)?;
    let spec = &image.arch.spec().align;
    let at = format!("`{}` at {} (pc {pc:#x})", insn.text, image.symbolize(pc));
    let detail = if fault.detail.is_empty() { String::new() } else { format!(" [{}]", fault.detail) };
    match fault.kind {
        FaultKind::StackMisaligned { sp } => {
            let rule = (spec.sp_use)(insn).check.and_then(|c| rule(spec, c))?;
            let text = format!("{label}: {at}: sp is {sp:#x}, not 16-byte aligned; {rule}{detail}");
            Some(Finding::new(Class::Abi, text))
        }
        FaultKind::Misaligned { addr, need } => Some(operand_finding(label, &at, (addr, need), batch, spec, &detail)),
        FaultKind::Bus { addr: Some(addr) } | FaultKind::Memory { addr: Some(addr), .. } => {
            let need = (spec.aligned_only)(insn).filter(|&n| n > 1 && !addr.is_multiple_of(n))?;
            let saw = format!("; the backend saw: {rest}");
            Some(operand_finding(label, &at, (addr, need), batch, spec, &saw))
        }
        _ => None,
    }
}

/// "`movdqa xmm0, xmmword ptr [rdi]` at f+0x4 (pc 0x...): needs a 16-byte-aligned address, got
/// 0x...4, inside input (input[4]; ...); rule".
fn operand_finding(
    label: &str,
    at: &str,
    (addr, need): (u64, u64),
    batch: &Batch,
    spec: &AlignSpec,
    tail: &str,
) -> Finding {
    let place = batch.locate(addr).map(|w| format!(", {w}")).unwrap_or_default();
    let rule = spec.aligned_rule;
    Finding::new(
        Class::Fault,
        format!("{label}: {at}: needs a {need}-byte-aligned address, got {addr:#x}{place}; {rule}{tail}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediates_parse_as_llvm_objdump_prints_them() {
        assert_eq!(parse_imm("#-16"), Some(-16));
        assert_eq!(parse_imm("#0x10"), Some(16));
        assert_eq!(parse_imm(" -112"), Some(-112));
        assert_eq!(parse_imm("x1"), None);
        assert_eq!(operands("stp x29, x30, [sp, #-16]!"), "x29, x30, [sp, #-16]!");
        assert_eq!(operands("ret"), "");
    }
}

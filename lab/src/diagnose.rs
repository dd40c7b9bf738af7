//! Diagnoses that name the cause of a failure instead of its symptom: an alignment rule
//! ([`crate::align::explain`]: sp misaligned, an aligned-only instruction's operand misaligned,
//! named from the instruction whatever signal the backend saw), a return through a
//! corrupted stack (an unbalanced push/pop sends the kernel's `ret` to the driver's poison), a
//! runaway that walks off the end of the arena (a hang where memory is larger), and a kernel
//! that depends on the unspecified upper 32 bits of an `int` argument (found by re-running the
//! failing cases with them clean: [`crate::int_args::diagnose`]). The checks ([`crate::cases::verdict::check`]) call the first two on
//! every fault; each returns `None` when its cause does not fit, so the plain fault sentence
//! stays.

use crate::abi::Abi;
use crate::backend::{Access, Fault, FaultKind};
use crate::batch::{Batch, PAGE};
use crate::finding::{Class, Finding};
use crate::image::Image;

/// When `fault` is a return through a corrupted stack, the sentence that says so: control left
/// the image's code for an address that is no code at all (a fetch fault at the pc, or an
/// illegal instruction outside the image), or, on x86_64 hardware, a `ret` faulted on a
/// non-canonical return address. Names the callee-saved register whose poison the kernel
/// returned to (`seed`: the call's poison seed, [`Abi::poison`]).
pub fn corrupted_return(fault: &Fault, image: &Image, abi: &Abi, seed: u64) -> Option<String> {
    let pc = fault.pc?;
    if let Some(pc) = control_fault(fault).filter(|&pc| !image.is_code(pc)) {
        let whose = abi
            .saved
            .iter()
            .enumerate()
            .find(|&(i, _)| Abi::poison(seed, i) == pc)
            .map(|(_, r)| format!(": it is the value the driver put in {r}, so {r} was pushed and not popped"))
            .unwrap_or_default();
        return Some(format!(
            "returned through a corrupted stack (return address {pc:#x} was not the driver's{whose}; an unbalanced \
             push/pop or stack-pointer adjustment)"
        ));
    }
    let ret = image.instruction_at(pc).is_some_and(|t| t.trim_start().starts_with("ret"));
    let bad_ret = ret && matches!(fault.kind, FaultKind::Memory { addr: Some(0) | None, .. });
    bad_ret.then(|| {
        "returned through a corrupted stack (the return address on the stack was not the driver's: a \
         non-canonical address faults at the `ret` itself; an unbalanced push/pop or stack-pointer adjustment)"
            .to_string()
    })
}

/// The pc of a fault that control itself made: a fetch fault, an illegal instruction, or a
/// memory fault at the pc (no instruction there to access memory).
fn control_fault(fault: &Fault) -> Option<u64> {
    let pc = fault.pc?;
    let at_pc = match fault.kind {
        FaultKind::Memory { access: Some(Access::Fetch), .. } | FaultKind::IllegalInstruction => true,
        FaultKind::Memory { addr: Some(a), .. } => a == pc,
        _ => false,
    };
    at_pc.then_some(pc)
}

/// When `fault` is control reaching the arena (a fetch fault or illegal instruction at a pc
/// inside `lab_arena`, which holds data and is never executable), the sentence that says so and
/// names what lies there: a jump through a pointer to data, or a return to an address taken
/// from it, not a plain unbalanced stack (whose return address is the driver's poison).
pub fn into_data(fault: &Fault, batch: &Batch) -> Option<String> {
    let arena = batch.arena.addr..batch.arena.addr + batch.arena.size;
    let pc = control_fault(fault).filter(|pc| arena.contains(pc))?;
    let what = batch.locate(pc).unwrap_or_else(|| "the arena, outside every buffer".to_string());
    Some(format!(
        "control went to {pc:#x}, {what}: data, never code (a jump through a pointer to data, or a return to an \
         address taken from it)"
    ))
}

/// When `fault` is a vector instruction trapping as illegal in an image whose driver enters
/// every call with no vector configuration ([`crate::arch::VILL_SYMBOL`]; riscv64: vtype.vill
/// set), the arch row's sentence naming a kernel that relies on its caller's vl/vtype. The
/// row's own configuration instructions (`vsetvli`) never trap so.
pub fn unconfigured_vector(fault: &Fault, image: &Image) -> Option<&'static str> {
    let sentence = image.arch.spec().isa.vector_length.as_ref()?.unconfigured?;
    if fault.kind != FaultKind::IllegalInstruction || image.symbol(crate::arch::VILL_SYMBOL).is_none() {
        return None;
    }
    let text = image.instruction_at(fault.pc?)?;
    let mnemonic = text.split_whitespace().next()?;
    (mnemonic.starts_with('v') && !mnemonic.starts_with("vset")).then_some(sentence)
}

/// When a memory fault lies in the first page past the end of the arena, the call walked
/// through the whole arena: a runaway loop, which a backend with a budget in instructions
/// (Unicorn) reports as a hang before it gets there. Both are class [`Class::Hang`].
pub fn runaway(fault: &Fault, batch: &Batch) -> Option<String> {
    let FaultKind::Memory { addr: Some(a), .. } = fault.kind else { return None };
    let end = batch.arena.addr + batch.arena.size;
    (end..end + PAGE).contains(&a).then(|| {
        format!(
            "ran away: the call walked through the whole {} MiB arena to {a:#x}, the first byte past its end (a loop \
             that does not stop; a backend that counts instructions reports it as a hang)",
            batch.arena.size >> 20
        )
    })
}

/// The finding for `fault` of the call `label`: the plain sentence (`describe`, from
/// [`crate::cases::verdict::describe_fault`]) with the cause in front when a diagnosis fits.
pub fn explain(
    label: &str,
    fault: &Fault,
    describe: Finding,
    image: &Image,
    batch: &Batch,
    abi: &Abi,
    seed: u64,
) -> Finding {
    let rest =
        describe.text.strip_prefix(label).and_then(|t| t.strip_prefix(": ")).unwrap_or(&describe.text).to_string();
    if let Some(named) = crate::align::explain(label, fault, image, batch, &rest) {
        return named;
    }
    if let Some(why) = into_data(fault, batch) {
        return Finding::new(describe.class, format!("{label}: {why}; the backend saw: {rest}"));
    }
    if let Some(why) = corrupted_return(fault, image, abi, seed) {
        return Finding::new(Class::Abi, format!("{label}: {why}; the backend saw: {rest}"));
    }
    if let Some(why) = unconfigured_vector(fault, image) {
        return Finding::new(Class::Abi, format!("{label}: {why}; the backend saw: {rest}"));
    }
    if let Some(why) = runaway(fault, batch) {
        return Finding::new(Class::Hang, format!("{label}: {why}; the backend saw: {rest}"));
    }
    describe
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BatchBuilder, Placement};
    use crate::image::Arena;

    fn fault_at(addr: u64) -> Fault {
        Fault {
            kind: FaultKind::Memory { access: Some(Access::Read), addr: Some(addr) },
            pc: Some(0x1000),
            call: Some(0),
            detail: String::new(),
        }
    }

    #[test]
    fn a_fault_in_the_first_page_past_the_arena_is_a_runaway_and_others_are_not() {
        let mut b = BatchBuilder::new(&crate::abi::X86_64);
        let input = b.buffer("input", &[0; 64], false, Placement::End);
        let batch = b.layout(Arena { addr: 0x10_0000, size: 32 << 20, kernel_data: None }).unwrap();
        let end = 0x10_0000 + (32 << 20);
        let text = runaway(&fault_at(end + 8), &batch).expect("a runaway");
        assert!(text.starts_with("ran away: the call walked through the whole 32 MiB arena to 0x2100008"), "{text}");
        assert_eq!(runaway(&fault_at(end + PAGE), &batch), None, "a wild address further out");
        assert_eq!(runaway(&fault_at(batch.addr_of(input, 64)), &batch), None, "a guard page inside the arena");
    }
}

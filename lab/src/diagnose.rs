//! Diagnoses that name the cause of a failure instead of its symptom: a return through a
//! corrupted stack (an unbalanced push/pop sends the kernel's `ret` to the driver's poison) and
//! a runaway that walks off the end of the arena (a hang where memory is larger). The checks
//! ([`crate::checks::check`]) call these on every fault; each returns `None` when its cause does
//! not fit, so the plain fault sentence stays.

use crate::abi::Abi;
use crate::backend::{Access, Fault, FaultKind};
use crate::batch::{Batch, PAGE};
use crate::checks::{Class, Finding};
use crate::image::Image;

/// When `fault` is a return through a corrupted stack, the sentence that says so: control left
/// the image's code for an address that is no code at all (a fetch fault at the pc, or an
/// illegal instruction outside the image), or, on x86_64 hardware, a `ret` faulted on a
/// non-canonical return address. Names the callee-saved register whose poison the kernel
/// returned to (`seed`: the call's poison seed, [`Abi::poison`]).
pub fn corrupted_return(fault: &Fault, image: &Image, abi: &Abi, seed: u64) -> Option<String> {
    let pc = fault.pc?;
    let at_pc = match fault.kind {
        FaultKind::Memory { access: Some(Access::Fetch), .. } => true,
        FaultKind::Memory { addr: Some(a), .. } => a == pc,
        FaultKind::IllegalInstruction => true,
        _ => false,
    };
    if at_pc && !image.is_code(pc) {
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
/// [`crate::checks::describe_fault`]) with the cause in front when a diagnosis fits.
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
    if let Some(why) = corrupted_return(fault, image, abi, seed) {
        return Finding::new(Class::Abi, format!("{label}: {why}; the backend saw: {rest}"));
    }
    if let Some(why) = runaway(fault, batch) {
        return Finding::new(Class::Hang, format!("{label}: {why}; the backend saw: {rest}"));
    }
    describe
}

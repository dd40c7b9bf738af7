//! Verdicts the host verifies itself (issue 28): a kernel that changes, inside its own guest
//! process, what the checks rely on - its input's read-only protection, a guard page, the
//! driver's code - and then computes the right result is not green, and the lie fails only its
//! own batch: a correct kernel on the same backend, before and after, passes.

use kernel_lab::backend::BackendKind;
use kernel_lab::finding::Class;
use kernel_lab::report::Row;
use kernel_lab::vectors::VectorSet;

use crate::common::{fixture_image, fixture_kernels, one_vector_set, variant, FIXTURE_LIMITS, SEED};

/// The md5 set, the poly1305 set of one block (the hostile kernel), then the md5 set again, on
/// one backend (one guest process unless a finding restarted it): the three rows.
fn md5_hostile_md5(fixture: &str, kind: BackendKind) -> [Row; 3] {
    md5_hostile_md5_on("x86_64", fixture, kind)
}

/// [`md5_hostile_md5`] with `arch`'s fixture (tests/fixtures/<arch>/).
fn md5_hostile_md5_on(arch: &str, fixture: &str, kind: BackendKind) -> [Row; 3] {
    rows_of(arch, fixture, kind, FIXTURE_LIMITS)
}

/// [`md5_hostile_md5_on`] under qemu-user without the host's tracer (witness.rs): what the
/// host's checks after the batch see alone, as where ptrace is not allowed.
fn untraced(arch: &str, fixture: &str) -> [Row; 3] {
    rows_of(arch, fixture, BackendKind::Qemu, kernel_lab::backend::Limits { witness: false, ..FIXTURE_LIMITS })
}

fn rows_of(arch: &str, fixture: &str, kind: BackendKind, limits: kernel_lab::backend::Limits) -> [Row; 3] {
    let v = variant(arch);
    let (_dir, cfg) = fixture_kernels(arch, "poly1305.S", fixture);
    let image = fixture_image(&cfg, v, fixture);
    let md5 = one_vector_set("md5/rfc1321.json", |_| true);
    let poly: VectorSet = one_vector_set("poly1305/rfc8439.json", |v| (16..32).contains(&v.msg_len()));
    let mut backend = kind.open(v, &image, limits).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let mut run = |set: &VectorSet| {
        let progress = &mut kernel_lab::progress::ignore;
        let place = kernel_lab::batch::Placement::End;
        kernel_lab::run::run_set_with_progress(backend.as_mut(), v, &image, set, SEED, place, progress)
    };
    [run(&md5), run(&poly), run(&md5)]
}

/// The hostile row failed with a `tamper` finding holding `text` exactly in the cases whose
/// names end with one of `tampered` (every case when empty: the others' buffers were left
/// alone, packed ones have no protection to lift); the md5 rows around it passed whole.
fn assert_tamper(fixture: &str, kind: BackendKind, rows: &[Row; 3], text: &str, tampered: &[&str]) {
    let [before, hostile, after] = rows;
    let failed: Vec<&str> = hostile.failed().iter().map(|c| c.name).collect();
    if tampered.is_empty() {
        assert_eq!(hostile.passed(), 0, "{fixture} on {kind}: a case passed ({failed:?} failed)");
    } else {
        let want = failed.iter().filter(|n| tampered.iter().any(|t| n.ends_with(t))).count();
        assert_eq!((want, failed.len()), (tampered.len(), tampered.len()), "{fixture} on {kind}: {failed:?}");
    }
    for case in &hostile.failed() {
        let f = &case.findings[0];
        assert_eq!(f.class, Class::Tamper, "{fixture} on {kind}: {f}");
        assert!(f.text.contains(text), "{fixture} on {kind}: {text:?} not in {f}");
        assert!(f.text.contains("seen by the host"), "{fixture} on {kind}: {f}");
    }
    for (when, row) in [("before", before), ("after", after)] {
        assert!(row.passed() > 0 && row.failed().is_empty(), "{fixture} on {kind}, md5 {when}: {:?}", row.failed());
    }
}

/// The case names of the guarded cases (kernel_lab::cases::plan's suffixes).
const GUARDED: &str = " [guarded]";
const MISALIGNED: &str = " [guarded, misaligned]";

/// Natively the batch child's filter (confine.rs, `batch_filter`) traps the kernel's first
/// protection or handler change: every case of the hostile row fails with a system-call
/// finding naming `call`, the md5 rows around it pass.
fn assert_denied(fixture: &str, rows: &[Row; 3], call: &str) {
    let [before, hostile, after] = rows;
    assert_eq!(hostile.passed(), 0, "{fixture} natively: {:?}", hostile.failed());
    for case in &hostile.failed() {
        let f = &case.findings[0];
        assert_eq!(f.class, Class::Syscall, "{fixture} natively: {f}");
        assert!(f.text.contains(&format!("({call})")), "{fixture} natively: {call} not in {f}");
    }
    for (when, row) in [("before", before), ("after", after)] {
        assert!(row.passed() > 0 && row.failed().is_empty(), "{fixture} natively, md5 {when}: {:?}", row.failed());
    }
}

/// Under qemu-user the host's tracer (lab/src/backend/process/witness.rs) sees what the kernel
/// asked of the host kernel while its calls ran: every case of the hostile row fails with a
/// `tamper` finding holding `what` and naming the tracer (which comes before whatever else the
/// host saw after the batch), the md5 rows around it pass.
fn assert_witnessed(fixture: &str, rows: &[Row; 3], what: &str) {
    let [before, hostile, after] = rows;
    assert_eq!(hostile.passed(), 0, "{fixture} on qemu: {:?}", hostile.failed());
    for case in &hostile.failed() {
        let f = &case.findings[0];
        assert!(f.text.contains("the host's tracer"), "{fixture} on qemu, {}: {f}", case.name);
        assert_eq!(f.class, Class::Tamper, "{fixture} on qemu: {f}");
        assert!(f.text.contains(what), "{fixture} on qemu: {what:?} not in {f}");
    }
    for (when, row) in [("before", before), ("after", after)] {
        assert!(row.passed() > 0 && row.failed().is_empty(), "{fixture} on qemu, md5 {when}: {:?}", row.failed());
    }
}

/// With the host's tracer, a batch whose kernel swallowed a guard-page fault with its own
/// handler fails whole (the driver's handler report), and the guarded case, whose over-read
/// reached the guard page, names the SIGSEGV the host saw first.
fn assert_swallowed_fault_seen(fixture: &str, rows: &[Row; 3]) {
    assert_eq!(rows[1].passed(), 0, "{fixture}: {:?}", rows[1].failed());
    let failed = rows[1].failed();
    let guarded = failed.iter().find(|c| c.name.ends_with(GUARDED)).expect("the guarded case failed");
    let f = &guarded.findings[0];
    assert!(f.text.contains("the host saw SIGSEGV at 0x") && f.text.contains("the host's tracer"), "{fixture}: {f}");
    assert!(rows[0].failed().is_empty() && rows[2].failed().is_empty() && rows[2].passed() > 0, "{fixture}");
}

#[test]
fn a_kernel_lifting_its_inputs_protection_is_not_green() {
    let rows = untraced("x86_64", "lift_input.S");
    let text = "is read-write in the guest, the table in force says read-only";
    assert_tamper("lift_input.S", BackendKind::Qemu, &rows, text, &[GUARDED, MISALIGNED]);
    let rows = md5_hostile_md5("lift_input.S", BackendKind::Qemu);
    assert_witnessed("lift_input.S", &rows, "kernel code called mprotect(");
    assert_denied("lift_input.S", &md5_hostile_md5("lift_input.S", BackendKind::Native), "mprotect");
}

#[test]
fn a_kernel_writing_past_its_input_through_a_lifted_guard_is_not_green() {
    let rows = untraced("x86_64", "lift_guard.S");
    assert_tamper("lift_guard.S", BackendKind::Qemu, &rows, "guard poison at input+", &[GUARDED]);
    let rows = md5_hostile_md5("lift_guard.S", BackendKind::Qemu);
    assert_tamper("lift_guard.S", BackendKind::Qemu, &rows, "kernel code called mprotect(", &[GUARDED]);
    // Only the guarded case lifts (its input ends flush against a page); the others pass.
    let [before, hostile, after] = md5_hostile_md5("lift_guard.S", BackendKind::Native);
    let failed = hostile.failed();
    assert!(failed.len() == 1 && failed[0].name.ends_with(GUARDED), "natively: {failed:?}");
    assert_eq!(failed[0].findings[0].class, Class::Syscall, "{}", failed[0].findings[0]);
    assert!(failed[0].findings[0].text.contains("(mprotect)"), "{}", failed[0].findings[0]);
    assert!(before.failed().is_empty() && after.failed().is_empty() && after.passed() > 0);
}

/// A write deep into the guard page (2000 bytes past the input, beyond the first 256 bytes)
/// through a lifted guard that is put back before the return (`lift_guard_deep.S`): under
/// qemu-user the host poisons and checks the whole guard page next to each paged buffer, so the
/// guarded case fails with a `tamper` finding naming the byte; natively the lift is refused.
#[test]
fn a_kernel_writing_deep_into_a_lifted_guard_page_is_not_green() {
    for arch in ["x86_64", "aarch64", "riscv64"] {
        let rows = untraced(arch, "lift_guard_deep.S");
        let what = format!("{arch}/lift_guard_deep.S");
        // input+2016..2031: 2000 bytes past the end of a 16..32-byte input.
        assert_tamper(&what, BackendKind::Qemu, &rows, "guard poison at input+20", &[GUARDED]);
        let rows = md5_hostile_md5_on(arch, "lift_guard_deep.S", BackendKind::Qemu);
        assert_tamper(&what, BackendKind::Qemu, &rows, "kernel code called mprotect(", &[GUARDED]);
    }
    let [_, hostile, _] = md5_hostile_md5("lift_guard_deep.S", BackendKind::Native);
    let failed = hostile.failed();
    assert!(failed.len() == 1 && failed[0].name.ends_with(GUARDED), "natively: {failed:?}");
    assert!(failed[0].findings[0].text.contains("(mprotect)"), "{}", failed[0].findings[0]);
}

/// A lift fully undone before the return (bytes and protection as laid) is denied natively;
/// under qemu-user nothing of it is left in the arena or the guest's mappings after the batch,
/// but the host's tracer saw both `mprotect`s while the call ran: every case fails.
#[test]
fn a_lift_undone_within_the_call_is_denied_natively_and_seen_under_qemu() {
    assert_denied("lift_undone.S", &md5_hostile_md5("lift_undone.S", BackendKind::Native), "mprotect");
    let rows = md5_hostile_md5("lift_undone.S", BackendKind::Qemu);
    assert_witnessed("lift_undone.S", &rows, "kernel code called mprotect(");
}

/// A kernel that starts a thread which lifts its input's protection and puts it back before
/// the call returns (`thread_lift.S`): the tracer follows qemu's threads, so every case fails
/// naming the thread; natively the clone itself is refused.
#[test]
fn a_lift_from_a_thread_the_kernel_started_is_not_green() {
    let rows = md5_hostile_md5("thread_lift.S", BackendKind::Qemu);
    assert_witnessed("thread_lift.S", &rows, "a thread kernel code started called mprotect(");
    assert_denied("thread_lift.S", &md5_hostile_md5("thread_lift.S", BackendKind::Native), "clone");
}

#[test]
fn a_kernel_patching_the_driver_under_qemu_is_not_green() {
    let rows = untraced("x86_64", "patch_driver.S");
    assert_tamper("patch_driver.S", BackendKind::Qemu, &rows, "the kernel patched code", &[]);
    let rows = md5_hostile_md5("patch_driver.S", BackendKind::Qemu);
    assert_witnessed("patch_driver.S", &rows, "kernel code called mprotect(");
    // Natively the batch child may not mprotect at all: a system-call finding.
    assert_denied("patch_driver.S", &md5_hostile_md5("patch_driver.S", BackendKind::Native), "mprotect");
}

#[test]
fn a_kernel_installing_a_sigsegv_handler_natively_is_not_green() {
    assert_denied("sigsegv_handler.S", &md5_hostile_md5("sigsegv_handler.S", BackendKind::Native), "rt_sigaction");
}

/// The same tampering from aarch64 and riscv64 kernels (fixtures beside their `hostile.inc`),
/// under qemu-user, the backend that runs them in a process: lifting the input's protection,
/// writing through a lifted guard, patching the driver are each a `tamper` finding; a lift
/// fully undone is seen by the host's tracer, as on x86_64.
#[test]
fn tampering_from_aarch64_and_riscv64_kernels_is_not_green_under_qemu() {
    let qemu = BackendKind::Qemu;
    for arch in ["aarch64", "riscv64"] {
        let rows = md5_hostile_md5_on(arch, "lift_input.S", qemu);
        assert_witnessed(&format!("{arch}/lift_input.S"), &rows, "kernel code called mprotect(");
        let rows = untraced(arch, "lift_guard.S");
        assert_tamper(&format!("{arch}/lift_guard.S"), qemu, &rows, "guard poison at input+", &[GUARDED]);
        let rows = md5_hostile_md5_on(arch, "lift_guard.S", qemu);
        assert_tamper(&format!("{arch}/lift_guard.S"), qemu, &rows, "kernel code called mprotect(", &[GUARDED]);
        let rows = untraced(arch, "patch_driver.S");
        assert_tamper(&format!("{arch}/patch_driver.S"), qemu, &rows, "the kernel patched code", &[]);
        let rows = md5_hostile_md5_on(arch, "patch_driver.S", qemu);
        assert_witnessed(&format!("{arch}/patch_driver.S"), &rows, "kernel code called mprotect(");
        let rows = md5_hostile_md5_on(arch, "lift_undone.S", qemu);
        assert_witnessed(&format!("{arch}/lift_undone.S"), &rows, "kernel code called mprotect(");
    }
}

/// A kernel that claims the later calls of its batch returned and jumps into the driver's own
/// reply path (a well-formed "done" token with the right checksum, the guest still in step) is
/// a `tamper` finding naming the forged reply on every call of its batch, under qemu-user and
/// natively (lab/src/backend/process/claims.rs), and the same from aarch64 and riscv64 kernels
/// under qemu-user; the md5 rows around it pass.
#[test]
fn a_forged_done_reply_is_not_green() {
    for kind in [BackendKind::Qemu, BackendKind::Native] {
        let rows = md5_hostile_md5("forge_done.S", kind);
        let text = "forged reply: the reply said calls 0..";
        assert_tamper("forge_done.S", kind, &rows, text, &[]);
        let f = &rows[1].failed()[0].findings[0];
        assert!(f.text.contains("record was not written by the driver: its sp_before is 0x0"), "{kind}: {f}");
    }
    for arch in ["aarch64", "riscv64"] {
        let rows = md5_hostile_md5_on(arch, "forge_done.S", BackendKind::Qemu);
        let text = "forged reply: the reply said calls 0..";
        assert_tamper(&format!("{arch}/forge_done.S"), BackendKind::Qemu, &rows, text, &[]);
    }
}

/// A kernel that installs its own SIGSEGV handler to swallow an over-read under qemu-user (which
/// emulates the guest's handlers, out of the host's sight), on x86_64, aarch64 and riscv64: the
/// driver asks for its handlers after the batch (`check_handlers`, reply kind `KIND_HANDLER`)
/// and every case of the batch fails with a `tamper` finding naming the signal and the foreign
/// handler; the md5 rows around it pass.
#[test]
fn a_kernel_installing_a_sigsegv_handler_under_qemu_is_not_green() {
    for arch in ["x86_64", "aarch64", "riscv64"] {
        let rows = untraced(arch, "sigsegv_handler.S");
        let text = "the driver found a handler it did not install for SIGSEGV (11) at 0x";
        assert_tamper(&format!("{arch}/sigsegv_handler.S"), BackendKind::Qemu, &rows, text, &[]);
        assert_swallowed_fault_seen(
            &format!("{arch}/sigsegv_handler.S"),
            &md5_hostile_md5_on(arch, "sigsegv_handler.S", BackendKind::Qemu),
        );
    }
}

/// The same handler, and the batch's last call ends in an illegal instruction
/// (`handler_last_fault.S`): the batch's last entry ends in a fault reply, not in the driver's
/// check after `lab_batch`. The fault handler asks for the handlers too, so the handler fails
/// the batch that installed it (every case, a `tamper` finding) and the md5 batch after it in
/// the same guest passes; before, the finding landed on that next batch.
#[test]
fn a_handler_installed_by_a_batch_that_ends_in_a_fault_fails_that_batch() {
    for arch in ["x86_64", "aarch64", "riscv64"] {
        let rows = untraced(arch, "handler_last_fault.S");
        let text = "the driver found a handler it did not install for SIGSEGV (11) at 0x";
        assert_tamper(&format!("{arch}/handler_last_fault.S"), BackendKind::Qemu, &rows, text, &[]);
        let what = format!("{arch}/handler_last_fault.S");
        assert_swallowed_fault_seen(&what, &md5_hostile_md5_on(arch, "handler_last_fault.S", BackendKind::Qemu));
    }
}

/// A SIGSEGV handler that swallows an over-read and is replaced by the driver's own before the
/// call returns (`handler_restored.S`) is refused natively; under qemu-user the driver's check
/// finds its own handler again, but the host's tracer saw the SIGSEGV the guard page raised,
/// which no fault reply reported: the case whose over-read reaches the guard page fails, on
/// x86_64, aarch64 and riscv64. Without the tracer (where ptrace is refused) it passes: the gap
/// docs/threat-model.md names for that case.
#[test]
fn a_handler_restored_before_the_return_is_denied_natively_and_seen_under_qemu() {
    assert_denied("handler_restored.S", &md5_hostile_md5("handler_restored.S", BackendKind::Native), "rt_sigaction");
    for arch in ["x86_64", "aarch64", "riscv64"] {
        let what = format!("{arch}/handler_restored.S");
        // Only the guarded case's over-read reaches the guard page (the others stay in their page).
        let rows = md5_hostile_md5_on(arch, "handler_restored.S", BackendKind::Qemu);
        assert_tamper(&what, BackendKind::Qemu, &rows, "the host saw SIGSEGV at 0x", &[GUARDED]);
        assert!(rows[1].failed()[0].findings[0].text.contains("the host's tracer"), "{what}: {:?}", rows[1].failed());
        let [_, hostile, _] = untraced(arch, "handler_restored.S");
        assert!(hostile.failed().is_empty() && hostile.passed() > 0, "{what} untraced: {:?}", hostile.failed());
    }
}

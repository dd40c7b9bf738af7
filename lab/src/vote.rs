//! The verdict rule across backends: who is to blame when the backends that ran one case do not
//! return the same outputs. Pure logic over [`Ballot`]s (one per backend), shared by `lab run`'s
//! comparison ([`crate::run::compare`]) and `lab fuzz`'s cross-check, so both name the same
//! culprit. The rule, as docs/verdicts.md states it:
//!
//! 1. A backend whose call faulted or did not run has no outputs and does not vote.
//! 2. Every voter returns the same outputs: unanimous. All pass, or all fail alike: a kernel
//!    failure (an emulator bug shared by every backend cannot be told from a kernel bug here).
//! 3. Native hardware voted: it is the witness. When native passes, every backend that returns
//!    other outputs is at fault, even two emulators that agree with each other (Unicorn and
//!    qemu share QEMU's lineage, and so its bugs). When native fails, the kernel fails on
//!    hardware; an emulator that passes there is at fault too (it hides the bug).
//! 4. No native vote: the reference votes beside the backends. When the backends that pass and
//!    the reference are a strict majority, the failing minority is at fault.
//! 5. Otherwise no majority: said as such, and every failing backend keeps its failure.

use crate::backend::BackendKind;

/// One backend's result for one case: its outputs digest
/// ([`crate::cases::plan::CasePlan::outputs_digest`]; `None` when the call faulted or did not
/// run) and whether every check of the case held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ballot {
    /// The backend that ran the case.
    pub backend: BackendKind,
    /// Digest of what the case's calls left behind; `None`: no outputs to compare.
    pub digest: Option<u64>,
    /// The case passed on this backend.
    pub passed: bool,
}

/// What the vote decides about one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Fewer than two voters, or every voter returned the same outputs: each backend's own
    /// verdict stands (a failure is the kernel's).
    Unanimous,
    /// The `faulty` backends return outputs that the witnesses contradict: an emulator fault,
    /// not the kernel's. `witnesses` are the backends that agree with the reference (native
    /// among them when `native_witness`); when native failed, `witnesses` is empty and the
    /// faulty backends are emulators that passed where hardware did not.
    EmulatorFault {
        /// The backends at fault, in ballot order.
        faulty: Vec<BackendKind>,
        /// The backends whose outputs stand, in ballot order.
        witnesses: Vec<BackendKind>,
        /// Native hardware decided the vote.
        native_witness: bool,
    },
    /// Backends differ and no side holds a majority (with the reference counted as a voter).
    /// `failing` keep their failures.
    NoMajority {
        /// The backends that failed, in ballot order.
        failing: Vec<BackendKind>,
        /// The backends that passed, in ballot order.
        passing: Vec<BackendKind>,
    },
}

/// Applies the rule of this module to the ballots of one case.
pub fn decide(ballots: &[Ballot]) -> Decision {
    let voters: Vec<&Ballot> = ballots.iter().filter(|b| b.digest.is_some()).collect();
    let first = voters.first().map(|b| b.digest);
    if voters.len() < 2 || voters.iter().all(|b| b.digest == first.flatten()) {
        return Decision::Unanimous;
    }
    if let Some(native) = voters.iter().find(|b| b.backend == BackendKind::Native) {
        return native_decides(native, &voters);
    }
    let passing: Vec<BackendKind> = voters.iter().filter(|b| b.passed).map(|b| b.backend).collect();
    let failing: Vec<BackendKind> = voters.iter().filter(|b| !b.passed).map(|b| b.backend).collect();
    // The reference is one more vote on the passing side.
    if !passing.is_empty() && 2 * (passing.len() + 1) > voters.len() + 1 {
        return Decision::EmulatorFault { faulty: failing, witnesses: passing, native_witness: false };
    }
    if passing.is_empty() {
        // Every backend is wrong, in different ways: the kernel fails whoever is right.
        return Decision::Unanimous;
    }
    Decision::NoMajority { failing, passing }
}

/// Rule 3: native hardware's outputs decide.
fn native_decides(native: &Ballot, voters: &[&Ballot]) -> Decision {
    let differs = |b: &&&Ballot| b.digest != native.digest;
    if native.passed {
        // A backend that passes with other outputs (bytes no check reads) is not blamed.
        let faulty: Vec<BackendKind> = voters.iter().filter(|b| differs(b) && !b.passed).map(|b| b.backend).collect();
        let witnesses: Vec<BackendKind> = voters.iter().filter(|b| !differs(b)).map(|b| b.backend).collect();
        return Decision::EmulatorFault { faulty, witnesses, native_witness: true };
    }
    // The kernel fails on hardware; an emulator that passes hides it.
    let faulty: Vec<BackendKind> = voters.iter().filter(|b| differs(b) && b.passed).map(|b| b.backend).collect();
    if faulty.is_empty() {
        return Decision::Unanimous;
    }
    Decision::EmulatorFault { faulty, witnesses: Vec::new(), native_witness: true }
}

/// How reports name a backend as a culprit: the emulator and its version where the lab knows
/// it ("unicorn 2.1.5", "qemu 7.2.22"; qemu's from `qemu-<arch> --version`, asked once per run
/// and architecture), "native" for hardware.
pub fn culprit_name(backend: BackendKind, arch: crate::variant::Arch) -> String {
    match backend {
        BackendKind::Unicorn => "unicorn 2.1.5".into(),
        BackendKind::Native => "native".into(),
        BackendKind::Qemu => match qemu_version(arch) {
            Some(v) => format!("qemu {v}"),
            None => "qemu".into(),
        },
    }
}

/// The version qemu-user reports for `arch` (`qemu-x86_64 version 7.2.22 (Debian ...)` ->
/// `7.2.22`), cached for the process; `None` when it does not answer.
fn qemu_version(arch: crate::variant::Arch) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashMap<String, Option<String>>>> = OnceLock::new();
    let bin = format!("qemu-{}", arch.name());
    let mut seen = SEEN.get_or_init(Default::default).lock().ok()?;
    seen.entry(bin.clone())
        .or_insert_with(|| {
            let out =
                crate::tool_run::output(std::process::Command::new(&bin).arg("--version"), crate::tool_run::QUICK)
                    .ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            let words: Vec<&str> = text.lines().next()?.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "version")?;
            words.get(at + 1).map(|v| v.to_string())
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use BackendKind::{Native, Qemu, Unicorn};

    fn b(backend: BackendKind, digest: u64, passed: bool) -> Ballot {
        Ballot { backend, digest: (digest != 0).then_some(digest), passed }
    }

    #[test]
    fn all_equal_to_the_reference_is_unanimous() {
        assert_eq!(decide(&[b(Unicorn, 7, true), b(Qemu, 7, true), b(Native, 7, true)]), Decision::Unanimous);
    }

    #[test]
    fn all_equal_and_wrong_is_the_kernels_failure() {
        assert_eq!(decide(&[b(Unicorn, 9, false), b(Qemu, 9, false), b(Native, 9, false)]), Decision::Unanimous);
    }

    #[test]
    fn a_minority_against_native_and_the_rest_is_named() {
        let d = decide(&[b(Unicorn, 7, true), b(Qemu, 9, false), b(Native, 7, true)]);
        assert_eq!(
            d,
            Decision::EmulatorFault { faulty: vec![Qemu], witnesses: vec![Unicorn, Native], native_witness: true }
        );
    }

    #[test]
    fn two_emulators_agreeing_against_native_are_both_at_fault() {
        let d = decide(&[b(Unicorn, 9, false), b(Qemu, 9, false), b(Native, 7, true)]);
        assert_eq!(
            d,
            Decision::EmulatorFault { faulty: vec![Unicorn, Qemu], witnesses: vec![Native], native_witness: true }
        );
    }

    #[test]
    fn an_emulator_passing_where_native_fails_is_at_fault_not_a_pass() {
        let d = decide(&[b(Unicorn, 7, true), b(Qemu, 9, false), b(Native, 9, false)]);
        assert_eq!(d, Decision::EmulatorFault { faulty: vec![Unicorn], witnesses: vec![], native_witness: true });
    }

    #[test]
    fn without_native_the_reference_and_the_passing_backend_outvote_the_failing_one() {
        let d = decide(&[b(Unicorn, 9, false), b(Qemu, 7, true)]);
        assert_eq!(d, Decision::EmulatorFault { faulty: vec![Unicorn], witnesses: vec![Qemu], native_witness: false });
    }

    #[test]
    fn different_wrong_results_everywhere_stay_the_kernels() {
        assert_eq!(decide(&[b(Unicorn, 8, false), b(Qemu, 9, false)]), Decision::Unanimous);
    }

    #[test]
    fn a_backend_without_outputs_does_not_vote() {
        assert_eq!(decide(&[b(Unicorn, 0, false), b(Qemu, 7, true)]), Decision::Unanimous);
        let d = decide(&[b(Unicorn, 9, false), b(Qemu, 7, true), b(Native, 0, false)]);
        assert_eq!(d, Decision::EmulatorFault { faulty: vec![Unicorn], witnesses: vec![Qemu], native_witness: false });
    }

    #[test]
    fn no_majority_is_said_as_such() {
        // Four emulators (a future backend mix): one passes, three fail in three ways.
        let d = decide(&[b(Unicorn, 7, true), b(Qemu, 8, false), b(Unicorn, 9, false), b(Qemu, 10, false)]);
        assert_eq!(d, Decision::NoMajority { failing: vec![Qemu, Unicorn, Qemu], passing: vec![Unicorn] });
    }
}

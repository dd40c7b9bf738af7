//! The finding vocabulary: a [`Finding`] is one sentence about what went wrong (BoringSSL's
//! abi_test style: a wrong state after a named call, a register not restored, a fault with its
//! place) and its [`Class`]. Planning ([`crate::cases::plan`]), judging
//! ([`crate::cases::verdict`]), fuzzing, reports and reporters all speak it; it depends on
//! nothing else in the lab.

/// What kind of problem a finding reports (JUnit failure types and report grouping use it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// A wrong state, digest, tag, return value, or accumulator value.
    Value,
    /// Output limbs outside the contract bounds.
    Bounds,
    /// A psABI violation: callee-saved register, stack pointer, direction flag.
    Abi,
    /// An access outside the call's buffers and stack budget (guard page, read-only input,
    /// unmapped memory).
    Memory,
    /// An instruction outside the variant's ISA (static scan).
    Isa,
    /// A system call from a kernel.
    Syscall,
    /// The kernel faulted otherwise (illegal instruction, misaligned access, trap, ...).
    Fault,
    /// The kernel ran past its budget.
    Hang,
    /// The call never ran (an earlier failure abandoned the batch) or the backend failed.
    NotRun,
    /// The image lacks a contract symbol of a selected kernel (a misspelt or missing stub).
    MissingSymbol,
    /// Backends returned different results for the same case and no side holds a majority
    /// ([`crate::vote`]; counted apart from kernel failures).
    Disagreement,
    /// A backend returned outputs that native hardware, or the reference and the other
    /// backends, contradict ([`crate::vote`]): the emulator's fault, not the kernel's.
    EmulatorFault,
    /// A finding on a call outside the JDK's call domain ([`crate::domain`], `--domain wide`):
    /// HotSpot's code is never called so; reported apart from the kernel's failures.
    OutOfDomain,
    /// A load that reached past (or before) a buffer inside one aligned 8-byte word the buffer
    /// also touches: it cannot fault on any machine; a finding only under `--partial-loads
    /// fail` ([`crate::backend::PartialLoads`]), a warning otherwise.
    PartialLoad,
    /// A finding that follows from an earlier one in the same case (a later call started
    /// from what a faulting call left): listed so nothing is hidden, not a cause of its own.
    KnockOn,
    /// A kernel reads the unspecified upper 32 bits of an `int`/`unsigned int` argument
    /// register, found by the lab's probe call and reported once per image and argument
    /// ([`crate::abi::UpperBits::Warn`]; a warning or a failure as the policy says).
    UpperBits,
    /// The host saw, after a batch and from its own view of the guest, that the kernel changed
    /// what the lab's checks rely on: a read-only input, guard-page poison, bytes beside a
    /// buffer, the page protections in force, a signal handler or the driver's code
    /// (backend/process/host_check.rs; docs/threat-model.md).
    Tamper,
}

impl Class {
    /// Every class, in declaration order (the SARIF reporter lists each as a rule).
    pub const ALL: [Class; 17] = [
        Class::Value,
        Class::Bounds,
        Class::Abi,
        Class::Memory,
        Class::Isa,
        Class::Syscall,
        Class::Fault,
        Class::Hang,
        Class::NotRun,
        Class::MissingSymbol,
        Class::Disagreement,
        Class::EmulatorFault,
        Class::OutOfDomain,
        Class::PartialLoad,
        Class::KnockOn,
        Class::UpperBits,
        Class::Tamper,
    ];

    /// One line saying what a finding of this class means (the SARIF rules' short description).
    pub fn summary(self) -> &'static str {
        match self {
            Class::Value => "A wrong state, digest, tag, return value or accumulator value",
            Class::Bounds => "Output limbs outside the contract's bounds",
            Class::Abi => {
                "A psABI violation: callee-saved register, stack pointer or flag not restored, or a misaligned stack"
            }
            Class::Memory => "An access outside the call's buffers and stack budget",
            Class::Isa => "An instruction outside the variant's declared ISA",
            Class::Syscall => "A system call from a kernel",
            Class::Fault => "The kernel faulted (illegal instruction, misaligned access, trap)",
            Class::Hang => "The kernel ran past its instruction or time budget",
            Class::NotRun => "The call never ran, or the backend failed",
            Class::MissingSymbol => "The image lacks a contract symbol of a selected kernel",
            Class::Disagreement => {
                "Backends returned different results and no side holds a majority (not the kernel's)"
            }
            Class::EmulatorFault => "An emulator returned outputs the other backends contradict (not the kernel's)",
            Class::OutOfDomain => {
                "A finding on a call outside the JDK's call domain (--domain wide): not a failure of the HotSpot contract"
            }
            Class::PartialLoad => {
                "A load past a buffer inside one aligned 8-byte word it touches (cannot fault; --partial-loads fail)"
            }
            Class::KnockOn => "Follows from an earlier finding of the same case",
            Class::UpperBits => "The kernel reads the unspecified upper 32 bits of a 32-bit argument register",
            Class::Tamper => {
                "The host saw the kernel change what the checks rely on (read-only input, guard poison, page protections, \
                 signal handlers, the driver's code)"
            }
        }
    }

    /// Lower-case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Class::Value => "value",
            Class::Bounds => "bounds",
            Class::Abi => "abi",
            Class::Memory => "memory",
            Class::Isa => "isa",
            Class::Syscall => "syscall",
            Class::Fault => "fault",
            Class::Hang => "hang",
            Class::NotRun => "not-run",
            Class::MissingSymbol => "missing-symbol",
            Class::Disagreement => "backends-disagree",
            Class::EmulatorFault => "emulator-fault",
            Class::OutOfDomain => "out-of-domain",
            Class::PartialLoad => "partial-load",
            Class::KnockOn => "knock-on",
            Class::UpperBits => "abi-upper-bits",
            Class::Tamper => "tamper",
        }
    }
}

/// A finding: one sentence about what went wrong, and its class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The kind of problem.
    pub class: Class,
    /// The sentence: call, what, expected and actual.
    pub text: String,
}

impl Finding {
    /// A finding of `class` saying `text`.
    pub fn new(class: Class, text: impl Into<String>) -> Finding {
        Finding { class, text: text.into() }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

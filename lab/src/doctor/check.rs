//! What one line of `lab doctor` says: the thing checked and its [`State`].

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Works; the detail says what was found (path and version, cases run).
    Ok(String),
    /// A program is not on `PATH`; installing `package` brings it.
    Missing {
        /// The program.
        program: &'static str,
        /// The Debian 12 package that installs it.
        package: &'static str,
    },
    /// Present but broken (cannot build, load or start); the sentence says what happened.
    Failed(String),
    /// The set-up works but the kernel answered wrongly (`lab run` shows the details).
    WrongAnswer(String),
    /// This backend cannot run this variant by design (the reason `lab run` skips it with).
    NotApplicable(String),
    /// Works, with less protection than the lab can give (guests run partly unconfined).
    Warning(String),
}

/// One line of the diagnosis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked (`clang`, `riscv64 on qemu`).
    pub what: String,
    /// What it found.
    pub state: State,
}

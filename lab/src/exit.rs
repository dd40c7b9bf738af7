//! The exit status of every `lab` command, as one type. Each command decides which
//! [`ExitCode`] applies (a run from its report, [`crate::report::Report::status`]; `lab doctor`
//! from its checks; `lab bench` from its measurements); the number, and the name the JSON report
//! gives it, are said only here.
//!
//! | status | variant | `lab run`, `lab fuzz` | `lab doctor` | `lab bench` |
//! |---|---|---|---|---|
//! | 0 | [`ExitCode::Passed`] | every case that ran passed | all well | all measured |
//! | 1 | [`ExitCode::Failed`] | a case failed, backends disagreed, or an image finding (wins over 2) | a kernel gave a wrong answer | a measurement failed, or the gate found a regression |
//! | 2 | [`ExitCode::Error`] | usage error, bad vector file, set-up error (missing tool, build failure), nothing ran, or the report cannot be written | a tool missing or something broken (wins over 1) | usage error, bad baseline, set-up error, an output cannot be written (wins over 1) |
//! | 128 + N | [`ExitCode::Interrupted`] | signal N stopped the run: 130 for SIGINT, 143 for SIGTERM; the report is marked incomplete ([`crate::interrupt`]) | | |
//!
//! `--help` and `--version` exit 0; `--check-args` exits 0 or 2.

/// How a `lab` command ended (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Everything that ran passed (0).
    Passed,
    /// A kernel failed a check (1).
    Failed,
    /// Usage, input or set-up error, or nothing ran (2).
    Error,
    /// The signal with this number stopped the run (128 + N).
    Interrupted(i32),
}

impl ExitCode {
    /// The process exit status.
    pub fn code(self) -> i32 {
        match self {
            ExitCode::Passed => 0,
            ExitCode::Failed => 1,
            ExitCode::Error => 2,
            ExitCode::Interrupted(sig) => 128 + sig,
        }
    }

    /// The name the JSON report gives it (`status`): `passed`, `failed`, `setup-error`,
    /// `interrupted`.
    pub fn name(self) -> &'static str {
        match self {
            ExitCode::Passed => "passed",
            ExitCode::Failed => "failed",
            ExitCode::Error => "setup-error",
            ExitCode::Interrupted(_) => "interrupted",
        }
    }

    /// The graver of two by status number (an interruption, then an error, then a failure):
    /// for an output that could not be written after the verdict was reached, and for the
    /// commands where a broken set-up wins over a wrong answer (`lab doctor`, `lab bench`).
    #[must_use]
    pub fn worse(self, other: ExitCode) -> ExitCode {
        if other.code() > self.code() {
            other
        } else {
            self
        }
    }

    /// [`ExitCode::Error`] when `failed`, else this code: an output or a report that could not
    /// be written turns any verdict into a set-up error (an interruption stays one).
    #[must_use]
    pub fn or_error_if(self, failed: bool) -> ExitCode {
        if failed {
            self.worse(ExitCode::Error)
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ExitCode;

    #[test]
    fn the_table_holds() {
        let codes = [ExitCode::Passed, ExitCode::Failed, ExitCode::Error, ExitCode::Interrupted(2)];
        assert_eq!(codes.map(ExitCode::code), [0, 1, 2, 130]);
        assert_eq!(ExitCode::Interrupted(15).code(), 143);
        assert_eq!(codes.map(ExitCode::name), ["passed", "failed", "setup-error", "interrupted"]);
    }

    #[test]
    fn an_error_is_graver_than_a_failure_and_an_interruption_than_both() {
        assert_eq!(ExitCode::Failed.worse(ExitCode::Error), ExitCode::Error);
        assert_eq!(ExitCode::Error.worse(ExitCode::Failed), ExitCode::Error);
        assert_eq!(ExitCode::Interrupted(15).worse(ExitCode::Error), ExitCode::Interrupted(15));
        assert_eq!(ExitCode::Passed.or_error_if(false), ExitCode::Passed);
        assert_eq!(ExitCode::Failed.or_error_if(true), ExitCode::Error);
        assert_eq!(ExitCode::Interrupted(2).or_error_if(true), ExitCode::Interrupted(2));
    }
}

//! Results of a run and the human reporter. Rows are variant × backend × kernel × vector set;
//! every failure keeps its findings and every skip its reason, so nothing is counted silently.

use std::fmt::Write as _;
use std::time::Duration;

use crate::backend::BackendKind;
use crate::checks::{CasePlan, Class, Finding};
use crate::variant::{Kernel, Variant};
use crate::vectors::{VectorError, VectorSet};

/// A case that failed, with what went wrong.
#[derive(Debug, Clone)]
pub struct CaseFailure {
    /// Case name (the vector's name).
    pub name: String,
    /// Message length in bytes.
    pub msg_len: usize,
    /// One sentence per problem.
    pub findings: Vec<Finding>,
}

/// A finding about a variant's image as a whole (the static ISA scan), not about one case.
#[derive(Debug, Clone)]
pub struct ImageFinding {
    /// Variant name.
    pub variant: &'static str,
    /// What is wrong.
    pub finding: Finding,
}

/// Outcome counts of one variant × backend × vector set.
#[derive(Debug, Clone)]
pub struct Row {
    /// Variant name.
    pub variant: &'static str,
    /// Backend.
    pub backend: BackendKind,
    /// Kernel contract.
    pub kernel: Kernel,
    /// Vector set name.
    pub set: String,
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed, with findings.
    pub failed: Vec<CaseFailure>,
    /// Cases not run, and why.
    pub skipped: usize,
    /// Why the cases were skipped.
    pub skip_reason: Option<String>,
    /// Wall time of the row.
    pub elapsed: Duration,
}

impl Row {
    /// An empty row to fill.
    pub fn new(variant: &'static Variant, backend: BackendKind, set: &VectorSet) -> Row {
        Row {
            variant: variant.name,
            backend,
            kernel: set.kernel,
            set: set.set.clone(),
            passed: 0,
            failed: Vec::new(),
            skipped: 0,
            skip_reason: None,
            elapsed: Duration::ZERO,
        }
    }

    /// A row whose `cases` were all skipped for `reason`.
    pub fn skipped(
        variant: &'static Variant,
        backend: BackendKind,
        set: &VectorSet,
        cases: usize,
        reason: String,
    ) -> Row {
        Row { skipped: cases, skip_reason: Some(reason), ..Row::new(variant, backend, set) }
    }

    /// A row whose `cases` all failed with the same error.
    pub fn error(variant: &'static Variant, backend: BackendKind, set: &VectorSet, cases: usize, error: String) -> Row {
        let mut row = Row::new(variant, backend, set);
        row.failed = (0..cases)
            .map(|i| CaseFailure {
                name: format!("case {i}"),
                msg_len: 0,
                findings: vec![Finding::new(Class::NotRun, error.clone())],
            })
            .collect();
        row
    }

    /// Records the outcome of one case.
    pub fn record(&mut self, plan: &CasePlan, findings: Vec<Finding>) {
        if findings.is_empty() {
            self.passed += 1;
        } else {
            self.failed.push(CaseFailure { name: plan.name.clone(), msg_len: plan.msg_len, findings });
        }
    }
}

/// Overall verdict, mapped to the exit status by the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Everything that ran passed (skips are listed with reasons).
    Passed,
    /// At least one case failed.
    Failed,
    /// Input or set-up problems (bad vector file, missing tool, build failure).
    SetupError,
}

/// Everything a run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// One row per variant × backend × vector set.
    pub rows: Vec<Row>,
    /// Problems in vector files (the valid entries still ran).
    pub vector_errors: Vec<VectorError>,
    /// Builds or backends that could not start.
    pub setup_errors: Vec<String>,
    /// Findings about whole images (static ISA scan); any of them fails the run.
    pub image_findings: Vec<ImageFinding>,
    /// The run's seed.
    pub seed: u64,
    /// Wall time of the whole run.
    pub elapsed: Duration,
}

impl Report {
    /// Cases passed, failed and skipped over all rows.
    pub fn totals(&self) -> (usize, usize, usize) {
        self.rows.iter().fold((0, 0, 0), |(p, f, s), r| (p + r.passed, f + r.failed.len(), s + r.skipped))
    }

    /// The verdict.
    pub fn status(&self) -> Status {
        if !self.setup_errors.is_empty() || !self.vector_errors.is_empty() {
            Status::SetupError
        } else if self.rows.iter().any(|r| !r.failed.is_empty()) || !self.image_findings.is_empty() {
            Status::Failed
        } else {
            Status::Passed
        }
    }

    /// The rows of one variant and backend.
    pub fn rows_of<'a>(&'a self, variant: &'a str, backend: BackendKind) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows.iter().filter(move |r| r.variant == variant && r.backend == backend)
    }

    /// The human report: a table, then failures with findings, then skips with reasons.
    pub fn to_human(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<12} {:<8} {:<9} {:<19} {:>6} {:>6} {:>7} {:>8}",
            "variant", "backend", "kernel", "vector set", "passed", "failed", "skipped", "time"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:<12} {:<8} {:<9} {:<19} {:>6} {:>6} {:>7} {:>7.2}s",
                r.variant,
                r.backend.name(),
                r.kernel.name(),
                r.set,
                r.passed,
                r.failed.len(),
                r.skipped,
                r.elapsed.as_secs_f64()
            );
        }
        self.write_failures(&mut s);
        for f in &self.image_findings {
            let _ = writeln!(s, "\nFAILED {} image ({}): {}", f.variant, f.finding.class.name(), f.finding);
        }
        self.write_skips(&mut s);
        for e in &self.vector_errors {
            let _ = writeln!(s, "\nvector file error: {e}");
        }
        for e in &self.setup_errors {
            let _ = writeln!(s, "\nset-up error: {e}");
        }
        let (p, f, k) = self.totals();
        let _ = writeln!(
            s,
            "\n{p} passed, {f} failed, {k} skipped (seed {}, {:.2} s)",
            self.seed,
            self.elapsed.as_secs_f64()
        );
        s
    }

    fn write_failures(&self, s: &mut String) {
        for r in self.rows.iter().filter(|r| !r.failed.is_empty()) {
            let _ = writeln!(s, "\nFAILED {} on {}, {} / {}:", r.variant, r.backend, r.kernel, r.set);
            for c in &r.failed {
                let _ = writeln!(s, "  {} ({} bytes):", c.name, c.msg_len);
                for f in &c.findings {
                    let _ = writeln!(s, "    - {f}");
                }
            }
        }
    }

    fn write_skips(&self, s: &mut String) {
        let mut seen: Vec<(String, &str, &str)> = Vec::new();
        for r in &self.rows {
            if let Some(reason) = &r.skip_reason {
                let key = (reason.clone(), r.variant, r.backend.name());
                if !seen.contains(&key) {
                    let _ = writeln!(s, "\nSKIPPED {} on {}: {reason}", r.variant, r.backend);
                    seen.push(key);
                }
            }
        }
    }
}

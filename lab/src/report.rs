//! Results of a run and the human reporter. Rows are variant × backend × kernel × vector set;
//! every failure keeps its findings and every skip its reason, so nothing is counted silently.

use std::fmt::Write as _;
use std::time::Duration;

use crate::backend::BackendKind;
use crate::contract::Family;
use crate::exit::ExitCode;
use crate::finding::{Class, Finding};
use crate::variant::{Kernel, Variant};
use crate::vectors::{VectorError, VectorSet};

mod not_applicable;
pub use not_applicable::NotApplicable;

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

/// What became of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every check held.
    Passed,
    /// At least one finding (never empty).
    Failed(Vec<Finding>),
    /// Not the kernel's: the vote across backends ([`crate::vote`]) blamed this backend. The
    /// first finding says who returned what: class [`Class::EmulatorFault`] (this emulator
    /// returns outputs that native hardware, or the reference and the other backends,
    /// contradict) or [`Class::Disagreement`] (no side holds a majority); the rest are this
    /// backend's own checks. Counted apart from kernel failures ([`Report::disagreed`]), and
    /// the run is not clean.
    Disagreed(Vec<Finding>),
    /// Ran outside the JDK's call domain (`--domain wide`, [`crate::domain`]) and had
    /// findings, class [`Class::OutOfDomain`] first: reported apart ([`Row::out_of_domain`]),
    /// not a failure of the HotSpot contract, so it does not fail the run.
    OutOfDomain(Vec<Finding>),
    /// Not run, and why.
    Skipped(String),
}

impl Verdict {
    /// The verdict on a case that ran: passed when there are no findings.
    pub fn of(findings: Vec<Finding>) -> Verdict {
        if findings.is_empty() {
            Verdict::Passed
        } else {
            Verdict::Failed(findings)
        }
    }
}

/// One case of a row, in run order: what a JUnit test case or a JSON outcome stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseOutcome {
    /// Case name (the vector's name, plus a suffix for split variants).
    pub name: String,
    /// Message length in bytes (0 when unknown).
    pub msg_len: usize,
    /// Its share of the wall time: a batch's time divided evenly among its cases, since the
    /// driver runs a whole batch in one entry and times no single call.
    pub time: Duration,
    /// Passed, failed with findings, or skipped with a reason.
    pub verdict: Verdict,
}

/// Every case of one variant × backend × vector set in run order, and their counts.
///
/// A row is built from its cases: [`Row::new`] (or [`Row::for_set`]) and then [`Row::push`]
/// per case, which keeps the summary fields (`passed`, `failed`, `disagreed`, `skipped`,
/// `skip_reason`) in step with `cases`; the reporters list `cases`.
#[derive(Debug, Clone)]
pub struct Row {
    /// Variant name.
    pub variant: &'static str,
    /// Backend.
    pub backend: BackendKind,
    /// Kernel contract.
    pub kernel: Kernel,
    /// The contract family the image ran the kernel through (HotSpot's unless the image
    /// defines only another family's symbols, [`crate::contract::family_of`]).
    pub family: Family,
    /// Vector set name.
    pub set: String,
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed, with findings.
    pub failed: Vec<CaseFailure>,
    /// Cases whose result differs between backends ([`Verdict::Disagreed`]), with findings.
    pub disagreed: Vec<CaseFailure>,
    /// Cases outside the JDK's call domain with findings ([`Verdict::OutOfDomain`]).
    pub out_of_domain: Vec<CaseFailure>,
    /// Cases not run, and why.
    pub skipped: usize,
    /// Why the cases were skipped.
    pub skip_reason: Option<String>,
    /// Wall time of the row.
    pub elapsed: Duration,
    /// Every case, in run order (passed, failed and skipped).
    pub cases: Vec<CaseOutcome>,
}

impl Row {
    /// An empty row to fill.
    pub fn new(variant: &'static Variant, backend: BackendKind, set: &VectorSet) -> Row {
        Row::for_set(variant.name, backend, set.kernel, &set.set)
    }

    /// An empty row of variant `variant` for the cases of `kernel` called `set` (`fuzz` for a
    /// campaign).
    pub fn for_set(variant: &'static str, backend: BackendKind, kernel: Kernel, set: &str) -> Row {
        Row {
            variant,
            backend,
            kernel,
            family: Family::HotSpot,
            set: set.into(),
            passed: 0,
            failed: Vec::new(),
            disagreed: Vec::new(),
            out_of_domain: Vec::new(),
            skipped: 0,
            skip_reason: None,
            elapsed: Duration::ZERO,
            cases: Vec::new(),
        }
    }

    /// A row whose cases, named in `names`, were all skipped for `reason`.
    pub fn skipped_named(
        variant: &'static Variant,
        backend: BackendKind,
        set: &VectorSet,
        names: Vec<String>,
        reason: String,
    ) -> Row {
        let mut row = Row::new(variant, backend, set);
        for name in names {
            let verdict = Verdict::Skipped(reason.clone());
            row.push(CaseOutcome { name, msg_len: 0, time: Duration::ZERO, verdict });
        }
        row
    }

    /// A row whose `cases` all failed with the same error.
    pub fn error(variant: &'static Variant, backend: BackendKind, set: &VectorSet, cases: usize, error: String) -> Row {
        let mut row = Row::new(variant, backend, set);
        for i in 0..cases {
            let verdict = Verdict::Failed(vec![Finding::new(Class::NotRun, error.clone())]);
            row.push(CaseOutcome { name: format!("case {i}"), msg_len: 0, time: Duration::ZERO, verdict });
        }
        row
    }

    /// What the reports add for a row of another family than HotSpot's: `openssl contract:
    /// md5_block_data_order` (the family and its symbols for the kernel); `None` for HotSpot.
    pub fn contract_note(&self) -> Option<String> {
        crate::contract::report_note(self.family, self.kernel)
    }

    /// Appends a case and updates the counts (and the skip reason) to match.
    pub fn push(&mut self, case: CaseOutcome) {
        match &case.verdict {
            Verdict::Passed => self.passed += 1,
            Verdict::Failed(findings) => self.failed.push(CaseFailure {
                name: case.name.clone(),
                msg_len: case.msg_len,
                findings: findings.clone(),
            }),
            Verdict::Disagreed(findings) => self.disagreed.push(CaseFailure {
                name: case.name.clone(),
                msg_len: case.msg_len,
                findings: findings.clone(),
            }),
            Verdict::OutOfDomain(findings) => self.out_of_domain.push(CaseFailure {
                name: case.name.clone(),
                msg_len: case.msg_len,
                findings: findings.clone(),
            }),
            Verdict::Skipped(reason) => {
                self.skipped += 1;
                self.skip_reason.get_or_insert_with(|| reason.clone());
            }
        }
        self.cases.push(case);
    }

    /// Marks case `i`, which called a stub outside the JDK's call domain (`why`), as
    /// [`Verdict::OutOfDomain`] when it failed: an [`Class::OutOfDomain`] finding saying so
    /// first, then its own findings; the counts follow. Other cases stay as they are.
    pub fn mark_out_of_domain(&mut self, i: usize, why: &str) {
        let Some(Verdict::Failed(own)) = self.cases.get(i).map(|c| &c.verdict) else { return };
        let nth = self.cases[..i].iter().filter(|c| matches!(c.verdict, Verdict::Failed(_))).count();
        let mut findings = vec![Finding::new(
            Class::OutOfDomain,
            format!("outside the JDK's call domain ({why}): HotSpot's code is never called so"),
        )];
        findings.extend(own.iter().cloned());
        if nth < self.failed.len() {
            self.failed.remove(nth);
        }
        self.cases[i].verdict = Verdict::OutOfDomain(findings.clone());
        let failure = CaseFailure { name: self.cases[i].name.clone(), msg_len: self.cases[i].msg_len, findings };
        let at = self.cases[..i].iter().filter(|c| matches!(c.verdict, Verdict::OutOfDomain(_))).count();
        self.out_of_domain.insert(at.min(self.out_of_domain.len()), failure);
    }

    /// Takes case `i` away from the kernel's account after the vote across backends
    /// ([`crate::vote`]) blamed this backend: a failed or passed case becomes
    /// [`Verdict::Disagreed`] with `finding` (class [`Class::EmulatorFault`] or
    /// [`Class::Disagreement`]) first, then the case's own findings; the counts follow. Does
    /// nothing to a skipped or already re-attributed case.
    pub fn reattribute(&mut self, i: usize, finding: Finding) {
        let own = match self.cases.get(i).map(|c| &c.verdict) {
            Some(Verdict::Failed(own)) => {
                let nth = self.cases[..i].iter().filter(|c| matches!(c.verdict, Verdict::Failed(_))).count();
                let own = own.clone();
                if nth < self.failed.len() {
                    self.failed.remove(nth);
                }
                own
            }
            Some(Verdict::Passed) => {
                self.passed -= 1;
                Vec::new()
            }
            _ => return,
        };
        let findings: Vec<Finding> = std::iter::once(finding).chain(own).collect();
        let case = &mut self.cases[i];
        case.verdict = Verdict::Disagreed(findings.clone());
        let at = self.cases[..i].iter().filter(|c| matches!(c.verdict, Verdict::Disagreed(_))).count();
        let failure = CaseFailure { name: self.cases[i].name.clone(), msg_len: self.cases[i].msg_len, findings };
        self.disagreed.insert(at.min(self.disagreed.len()), failure);
    }
}

/// Failed cases the human report prints per row (the JSON and JUnit reports list all).
const FAILURES_SHOWN: usize = 8;
/// Findings the human report prints per failed case.
const FINDINGS_SHOWN: usize = 6;

/// Everything a run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// One row per variant × backend × vector set.
    pub rows: Vec<Row>,
    /// Problems in vector files (the valid entries still ran).
    pub vector_errors: Vec<VectorError>,
    /// Builds or backends that could not start.
    pub setup_errors: Vec<String>,
    /// Why a vector file gave no case although it loaded (left out by `--kernel`, empty).
    pub notes: Vec<String>,
    /// Findings about whole images (static ISA scan); any of them fails the run.
    pub image_findings: Vec<ImageFinding>,
    /// The run's seed.
    pub seed: u64,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// What the run could not guarantee (e.g. guests ran without seccomp or Landlock because
    /// the kernel lacks them); informational, the verdict does not change.
    pub warnings: Vec<String>,
    /// The signal (SIGINT, SIGTERM) that stopped the run early, if one did (lab/src/interrupt.rs).
    pub interrupted: Option<i32>,
    /// The run's replay options ([`crate::replay`]); `None`: the seed alone replays it.
    pub replay: Option<crate::replay::Replay>,
    /// Variant × backend combinations that cannot exist on this host, listed once each and
    /// counted apart from skips ([`Report::set_apart_not_applicable`]); they have no rows.
    pub not_applicable: Vec<NotApplicable>,
    /// Where each variant's image was built: variant name and ELF path, for reporters that map
    /// an address back to the kernel source (SARIF, through the image's DWARF line table).
    pub images: Vec<(&'static str, std::path::PathBuf)>,
    /// The kernels folder the images were built from (`--kernels-dir`), when known: an image
    /// from the cache may have been built from another copy of the same sources, and names
    /// that copy in its DWARF; the SARIF report names the file of this folder instead.
    pub kernels_dir: Option<std::path::PathBuf>,
}

impl Report {
    /// Cases passed, failed and skipped over all rows.
    pub fn totals(&self) -> (usize, usize, usize) {
        self.rows.iter().fold((0, 0, 0), |(p, f, s), r| (p + r.passed, f + r.failed.len(), s + r.skipped))
    }

    /// Cases (per backend) whose results differ between backends: an emulator fault is likely.
    /// Not kernel failures, but not passes either: they fail the run (exit 1).
    pub fn disagreed(&self) -> usize {
        self.rows.iter().map(|r| r.disagreed.len()).sum()
    }

    /// Cases with findings outside the JDK's call domain ([`Verdict::OutOfDomain`]): not
    /// failures.
    pub fn out_of_domain(&self) -> usize {
        self.rows.iter().map(|r| r.out_of_domain.len()).sum()
    }

    /// The verdict. A failed case, a disagreement between backends or an image finding wins
    /// over input and set-up errors (a kernel failure must not read as a configuration
    /// problem); those win over a pass, and so does a run where nothing ran.
    pub fn status(&self) -> ExitCode {
        let (passed, failed, _) = self.totals();
        if let Some(sig) = self.interrupted {
            ExitCode::Interrupted(sig)
        } else if failed > 0 || self.disagreed() > 0 || !self.image_findings.is_empty() {
            ExitCode::Failed
        } else if !self.setup_errors.is_empty() || !self.vector_errors.is_empty() || passed + self.out_of_domain() == 0
        {
            ExitCode::Error
        } else {
            ExitCode::Passed
        }
    }

    /// The rows of one variant and backend.
    pub fn rows_of<'a>(&'a self, variant: &'a str, backend: BackendKind) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows.iter().filter(move |r| r.variant == variant && r.backend == backend)
    }

    /// The human report: a table, then failures with findings, then skips with reasons.
    pub fn to_human(&self) -> String {
        self.to_human_styled(false)
    }

    /// The human report, with ANSI colour when `color` (failures red, skips yellow, the verdict
    /// line green or red). The CLI asks for colour and writes through `anstream`, which strips
    /// it when the output is not a terminal or `NO_COLOR` is set.
    pub fn to_human_styled(&self, color: bool) -> String {
        self.human(color, true)
    }

    /// The human report for a CLI that printed the vector file errors on stderr already: they
    /// are counted, not repeated.
    pub fn to_human_styled_errors_elsewhere(&self, color: bool) -> String {
        self.human(color, false)
    }

    fn human(&self, color: bool, list_vector_errors: bool) -> String {
        let paint = Painter(color);
        let mut s = String::new();
        // Columns as wide as the longest name (a user's variant or vector set may be long).
        let vw = self.rows.iter().map(|r| r.variant.len()).max().unwrap_or(0).max(12);
        let sw = self.rows.iter().map(|r| r.set.len()).max().unwrap_or(0).max(19);
        if !self.rows.is_empty() {
            let _ = writeln!(
                s,
                "{:<vw$} {:<8} {:<9} {:<sw$} {:>6} {:>6} {:>7} {:>8}",
                "variant", "backend", "kernel", "vector set", "passed", "failed", "skipped", "time"
            );
        }
        for group in self.rows.chunk_by(|a, b| a.variant == b.variant && a.backend == b.backend) {
            // A variant × backend skipped whole for one reason is one line, not one per set.
            let whole = group.iter().all(|r| r.passed == 0 && r.failed.is_empty() && r.skip_reason.is_some())
                && group.windows(2).all(|w| w[0].skip_reason == w[1].skip_reason);
            if whole && group.len() > 1 {
                let skipped = paint.apply(SKIP, &format!("{:>7}", group.iter().map(|r| r.skipped).sum::<usize>()));
                let (variant, backend) = (group[0].variant, group[0].backend.name());
                let _ = writeln!(
                    s,
                    "{variant:<vw$} {backend:<8} {:<9} {:<sw$} {:>6} {:>6} {skipped} {:>7.2}s",
                    "all", "(skipped)", 0, 0, 0.0
                );
                continue;
            }
            for r in group {
                let failed = format!("{:>6}", r.failed.len());
                let skipped = format!("{:>7}", r.skipped);
                let disagreed = if r.disagreed.is_empty() {
                    String::new()
                } else {
                    paint.apply(FAIL, &format!("  {} blamed on {} (emulator fault)", r.disagreed.len(), r.backend))
                };
                let contract = r.contract_note().map_or(String::new(), |n| format!("  ({n})"));
                let _ = writeln!(
                    s,
                    "{:<vw$} {:<8} {:<9} {:<sw$} {:>6} {} {} {:>7.2}s{disagreed}{contract}",
                    r.variant,
                    r.backend.name(),
                    r.kernel.name(),
                    r.set,
                    r.passed,
                    if r.failed.is_empty() { failed } else { paint.apply(FAIL, &failed) },
                    if r.skipped == 0 { skipped } else { paint.apply(SKIP, &skipped) },
                    r.elapsed.as_secs_f64()
                );
            }
        }
        self.write_not_applicable_rows(&mut s, vw, sw);
        self.write_bounds_legend(&mut s);
        // Findings about a whole image first: they usually explain the failures below them.
        for f in &self.image_findings {
            let head = format!("FAILED {} image ({})", f.variant, f.finding.class.name());
            let _ = writeln!(s, "\n{}: {}", paint.apply(FAIL, &head), f.finding);
        }
        self.write_failures(&mut s, paint);
        self.write_disagreements(&mut s, paint);
        self.write_out_of_domain(&mut s);
        self.write_skips(&mut s, paint);
        self.write_not_applicable(&mut s, paint);
        if list_vector_errors {
            for e in &self.vector_errors {
                let _ = writeln!(s, "\n{}: {e}", paint.apply(FAIL, "vector file error"));
            }
        } else if !self.vector_errors.is_empty() {
            let n = self.vector_errors.len();
            let head = format!("{n} vector file error{}", if n == 1 { "" } else { "s" });
            let _ = writeln!(s, "\n{} (listed on stderr before this table)", paint.apply(FAIL, &head));
        }
        for e in &self.setup_errors {
            let _ = writeln!(s, "\n{}: {e}", paint.apply(FAIL, "set-up error"));
        }
        for w in &self.warnings {
            let _ = writeln!(s, "\n{}: {w}", paint.apply(SKIP, "warning"));
        }
        if let Some(sig) = self.interrupted {
            let head = format!("INTERRUPTED by {}", crate::interrupt::name(sig));
            let _ = writeln!(
                s,
                "\n{}: the run stopped early; cases it did not finish are skipped",
                paint.apply(FAIL, &head)
            );
        }
        let (p, f, k) = self.totals();
        for n in &self.notes {
            let _ = writeln!(s, "\nnote: {n}");
        }
        if p + f + self.out_of_domain() == 0 {
            let only_filters = self.setup_errors.iter().all(|e| crate::filter::is_miss(e));
            let why = if self.rows.is_empty() && !self.setup_errors.is_empty() && only_filters {
                "no vector or case matches the --set/--case filters (see the set-up errors above)"
            } else if self.rows.is_empty() && !self.setup_errors.is_empty() {
                "no kernel could be set up (see the set-up errors above)"
            } else if self.rows.is_empty() && !self.not_applicable.is_empty() {
                "every selected variant × backend is not applicable on this host (see above)"
            } else if self.rows.is_empty() {
                "no vector entry to run (see the notes and errors above)"
            } else {
                "every selected case was skipped or could not be set up"
            };
            let _ = writeln!(s, "\nnothing ran: {why}");
        }
        let mut verdict = format!("{p} passed, {f} failed, {k} skipped{}", self.not_applicable_note());
        let (blamed, no_majority) = self.blamed();
        if !blamed.is_empty() {
            let each: Vec<String> = blamed.iter().map(|(b, n)| format!("{b} {n}")).collect();
            let n: usize = blamed.iter().map(|(_, n)| n).sum();
            let _ = write!(verdict, ", {n} emulator faults ({}; not the kernel's)", each.join(", "));
        }
        if no_majority > 0 {
            let _ = write!(verdict, ", {no_majority} disagreed between backends with no majority");
        }
        if !self.image_findings.is_empty() {
            let _ = write!(verdict, ", {} image findings", self.image_findings.len());
        }
        if self.out_of_domain() > 0 {
            let _ = write!(verdict, ", {} outside the JDK call domain (not failures)", self.out_of_domain());
        }
        let style = if self.status() == ExitCode::Passed { PASS } else { FAIL };
        let _ =
            writeln!(s, "\n{} (seed {}, {:.2} s)", paint.apply(style, &verdict), self.seed, self.elapsed.as_secs_f64());
        s
    }

    fn write_failures(&self, s: &mut String, paint: Painter) {
        for r in self.rows.iter().filter(|r| !r.failed.is_empty()) {
            let contract = r.contract_note().map_or(String::new(), |n| format!(" ({n})"));
            let head = format!("FAILED {} on {}, {} / {}{contract}:", r.variant, r.backend, r.kernel, r.set);
            let _ = writeln!(s, "\n{}", paint.apply(FAIL, &head));
            if let Some(replay) = &self.replay {
                let _ =
                    writeln!(s, "  replay: {}", replay.narrowed(r.variant, r.backend, r.kernel, Some(&r.set), None));
            }
            for c in r.failed.iter().take(FAILURES_SHOWN) {
                let _ = writeln!(s, "  {} ({} bytes):", c.name, c.msg_len);
                for f in c.findings.iter().take(FINDINGS_SHOWN) {
                    let _ = writeln!(s, "    - {f}");
                }
                if c.findings.len() > FINDINGS_SHOWN {
                    let _ = writeln!(s, "    - ... and {} more findings", c.findings.len() - FINDINGS_SHOWN);
                }
            }
            if r.failed.len() > FAILURES_SHOWN {
                let more = r.failed.len() - FAILURES_SHOWN;
                let _ = writeln!(s, "  ... and {more} more failed cases in this set (--format json lists them all)");
            }
        }
    }

    /// The cases the vote across backends took from the kernel's account, per row: the backend
    /// the vote blamed is the row's ("EMULATOR FAULT qemu on x86_64, md5 / rfc1321").
    fn write_disagreements(&self, s: &mut String, paint: Painter) {
        for r in self.rows.iter().filter(|r| !r.disagreed.is_empty()) {
            let named =
                r.disagreed.iter().filter(|c| c.findings.first().is_some_and(|f| f.class == Class::EmulatorFault));
            let head = if named.count() == r.disagreed.len() {
                format!(
                    "EMULATOR FAULT {} on {}, {} / {} (not counted as kernel failures):",
                    r.backend, r.variant, r.kernel, r.set
                )
            } else {
                format!(
                    "BACKENDS DISAGREE {} on {}, {} / {} (no side has a majority):",
                    r.backend, r.variant, r.kernel, r.set
                )
            };
            let _ = writeln!(s, "\n{}", paint.apply(FAIL, &head));
            for c in r.disagreed.iter().take(FAILURES_SHOWN) {
                let _ = writeln!(s, "  {} ({} bytes):", c.name, c.msg_len);
                for f in c.findings.iter().take(FINDINGS_SHOWN) {
                    let _ = writeln!(s, "    - {f}");
                }
            }
            if r.disagreed.len() > FAILURES_SHOWN {
                let more = r.disagreed.len() - FAILURES_SHOWN;
                let _ = writeln!(s, "  ... and {more} more such cases in this set (--format json lists them all)");
            }
        }
    }

    /// The cases with findings outside the JDK's call domain, per row (`--domain wide`).
    fn write_out_of_domain(&self, s: &mut String) {
        for r in self.rows.iter().filter(|r| !r.out_of_domain.is_empty()) {
            let _ = writeln!(
                s,
                "\nOUTSIDE THE JDK CALL DOMAIN {} on {}, {} / {} (not failures: HotSpot's code is never called so):",
                r.variant, r.backend, r.kernel, r.set
            );
            for c in r.out_of_domain.iter().take(FAILURES_SHOWN) {
                let _ = writeln!(s, "  {} ({} bytes):", c.name, c.msg_len);
                for f in c.findings.iter().take(FINDINGS_SHOWN) {
                    let _ = writeln!(s, "    - {f}");
                }
            }
            if r.out_of_domain.len() > FAILURES_SHOWN {
                let more = r.out_of_domain.len() - FAILURES_SHOWN;
                let _ = writeln!(s, "  ... and {more} more such cases in this set (--format json lists them all)");
            }
        }
    }

    /// The cases the vote blamed on each backend ([`Class::EmulatorFault`]), in backend order,
    /// and the cases with no majority ([`Class::Disagreement`]).
    pub fn blamed(&self) -> (Vec<(BackendKind, usize)>, usize) {
        let mut per: Vec<(BackendKind, usize)> = Vec::new();
        let mut no_majority = 0;
        for r in &self.rows {
            for c in &r.disagreed {
                if c.findings.first().is_some_and(|f| f.class == Class::EmulatorFault) {
                    match per.iter_mut().find(|(b, _)| *b == r.backend) {
                        Some((_, n)) => *n += 1,
                        None => per.push((r.backend, 1)),
                    }
                } else {
                    no_majority += 1;
                }
            }
        }
        per.sort_unstable();
        (per, no_majority)
    }

    /// One line per bounds granularity among the backends that ran (see [`BackendKind::bounds`]).
    fn write_bounds_legend(&self, s: &mut String) {
        let ran = |k: &BackendKind| self.rows.iter().any(|r| r.backend == *k && (r.passed > 0 || !r.failed.is_empty()));
        let mut kinds: Vec<BackendKind> = BackendKind::ALL.into_iter().filter(ran).collect();
        kinds.sort_by_key(|k| k.bounds());
        for group in kinds.chunk_by(|a, b| a.bounds() == b.bounds()) {
            let names: Vec<&str> = group.iter().map(|k| k.name()).collect();
            let how = match group[0].bounds() {
                "bytes" => "every byte around each buffer (its first and last page, exactly)",
                _ => "guard pages (past a misaligned buffer, an access shows once it reaches the next page)",
            };
            let _ = writeln!(s, "bounds checked by {}: {how}", names.join(", "));
        }
    }

    fn write_skips(&self, s: &mut String, paint: Painter) {
        let mut seen: Vec<(String, &str, &str)> = Vec::new();
        for r in &self.rows {
            if let Some(reason) = &r.skip_reason {
                let key = (reason.clone(), r.variant, r.backend.name());
                if !seen.contains(&key) {
                    let head = format!("SKIPPED {} on {}", r.variant, r.backend);
                    let _ = writeln!(s, "\n{}: {reason}", paint.apply(SKIP, &head));
                    seen.push(key);
                }
            }
        }
    }
}

const FAIL: anstyle::Style = anstyle::AnsiColor::Red.on_default().bold();
const SKIP: anstyle::Style = anstyle::AnsiColor::Yellow.on_default();
const PASS: anstyle::Style = anstyle::AnsiColor::Green.on_default().bold();

/// Wraps text in an ANSI style, or leaves it alone.
#[derive(Clone, Copy)]
struct Painter(bool);

impl Painter {
    fn apply(self, style: anstyle::Style, text: &str) -> String {
        if self.0 {
            format!("{style}{text}{style:#}")
        } else {
            text.to_string()
        }
    }
}

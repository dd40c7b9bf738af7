//! Results of a run (the human reporter is `crate::reporters::human`). Rows are variant × backend × kernel × vector set;
//! every failure keeps its findings and every skip its reason, so nothing is counted silently.

use std::time::Duration;

use crate::arch::VectorLength;
use crate::backend::BackendKind;
use crate::contract::Family;
use crate::exit::ExitCode;
use crate::finding::{Class, Finding};
use crate::variant::{Kernel, Variant};
use crate::vectors::{VectorError, VectorSet};

mod not_applicable;
mod vector_length;
pub use not_applicable::NotApplicable;

/// A case of a row with findings (failed, disagreed or out of domain), as [`Row::failed`] and
/// its siblings list it: a view into the row's [`CaseOutcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseFailure<'a> {
    /// Case name (the vector's name).
    pub name: &'a str,
    /// Message length in bytes.
    pub msg_len: usize,
    /// One sentence per problem.
    pub findings: &'a [Finding],
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

/// Every case of one variant × backend × vector set in run order.
///
/// A row is built from its cases: [`Row::new`] (or [`Row::for_set`]) and then [`Row::push`]
/// per case. `cases` is the one record: every count ([`passed`](Row::passed),
/// [`failed`](Row::failed), [`disagreed`](Row::disagreed), [`skipped`](Row::skipped)...) is
/// derived from it, so a verdict changed after the run (the vote, the call domain) moves its
/// case between the counts by itself.
#[derive(Debug, Clone)]
pub struct Row {
    /// Variant name.
    pub variant: &'static str,
    /// Backend.
    pub backend: BackendKind,
    /// The vector length qemu ran the row at (RVV's VLEN, SVE's VL; `lab run --vlen`); `None`
    /// for a scalar ISA or a backend without the dimension.
    pub vector_length: Option<VectorLength>,
    /// Kernel contract.
    pub kernel: Kernel,
    /// The contract family the image ran the kernel through (HotSpot's unless the image
    /// defines only another family's symbols, [`crate::contract::family_of`]).
    pub family: Family,
    /// Vector set name.
    pub set: String,
    /// Wall time of the row.
    pub elapsed: Duration,
    /// Every case, in run order (passed, failed and skipped).
    pub cases: Vec<CaseOutcome>,
    /// Partial loads let run ([`crate::backend::PartialLoads::Warn`]), one per instruction:
    /// (pc, the first sentence, how many calls made one there).
    pub partial_loads: Vec<(u64, String, usize)>,
}

/// The run's warnings for the partial loads of one image's rows (its backends, vector lengths
/// and sets): one per kernel and load instruction, with the first call's sentence, every
/// backend and set that saw it and the number of calls: `x86_64 on unicorn, md5 / rfc1321:
/// partial load: <sentence> (12 calls at this instruction)`. One image's loads are the same
/// code whatever the set, so one warning says it (a set each made a report of dozens).
pub fn partial_load_warnings(rows: &[Row]) -> Vec<String> {
    struct Seen<'a> {
        row: &'a Row,
        pc: u64,
        text: &'a str,
        calls: usize,
        backends: Vec<String>,
        sets: Vec<&'a str>,
    }
    let mut seen: Vec<Seen> = Vec::new();
    for row in rows {
        for (pc, text, n) in &row.partial_loads {
            let i = match seen.iter().position(|x| x.pc == *pc && x.row.kernel == row.kernel) {
                Some(i) => i,
                None => {
                    seen.push(Seen { row, pc: *pc, text, calls: 0, backends: Vec::new(), sets: Vec::new() });
                    seen.len() - 1
                }
            };
            let x = &mut seen[i];
            x.calls += n;
            let on = row.backend_label();
            if !x.backends.contains(&on) {
                x.backends.push(on);
            }
            if !x.sets.contains(&row.set.as_str()) {
                x.sets.push(&row.set);
            }
        }
    }
    seen.iter()
        .map(|x| {
            let more = if x.calls > 1 { format!(" ({} calls at this instruction)", x.calls) } else { String::new() };
            format!(
                "{} on {}, {} / {}: partial load: {}{more}",
                x.row.variant,
                x.backends.join(", "),
                x.row.kernel,
                x.sets.join(", "),
                x.text
            )
        })
        .collect()
}

impl Row {
    /// Notes a partial load at `pc` (`text`: its sentence): the first at each instruction is
    /// kept, later ones counted.
    pub fn note_partial_load(&mut self, pc: u64, text: String) {
        match self.partial_loads.iter_mut().find(|(p, _, _)| *p == pc) {
            Some((_, _, n)) => *n += 1,
            None => self.partial_loads.push((pc, text, 1)),
        }
    }

    /// The backend and the vector length it ran at: `qemu vlen=256`, or `qemu`.
    pub fn backend_label(&self) -> String {
        match self.vector_length {
            Some(vl) => format!("{} {vl}", self.backend),
            None => self.backend.to_string(),
        }
    }

    /// This row at vector length `vl`.
    pub fn at(mut self, vl: Option<VectorLength>) -> Row {
        self.vector_length = vl;
        self
    }

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
            vector_length: None,
            kernel,
            family: Family::HotSpot,
            set: set.into(),
            elapsed: Duration::ZERO,
            cases: Vec::new(),
            partial_loads: Vec::new(),
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

    /// Appends a case.
    pub fn push(&mut self, case: CaseOutcome) {
        self.cases.push(case);
    }

    /// Cases that passed.
    pub fn passed(&self) -> usize {
        self.cases.iter().filter(|c| c.verdict == Verdict::Passed).count()
    }

    /// Cases not run.
    pub fn skipped(&self) -> usize {
        self.cases.iter().filter(|c| matches!(c.verdict, Verdict::Skipped(_))).count()
    }

    /// Why the first skipped case was skipped (`None`: no case was).
    pub fn skip_reason(&self) -> Option<&str> {
        self.cases.iter().find_map(|c| match &c.verdict {
            Verdict::Skipped(reason) => Some(reason.as_str()),
            _ => None,
        })
    }

    /// Cases that failed ([`Verdict::Failed`]), with findings, in run order.
    pub fn failed(&self) -> Vec<CaseFailure<'_>> {
        self.failures(|v| match v {
            Verdict::Failed(f) => Some(f),
            _ => None,
        })
    }

    /// Cases the vote across backends took from the kernel's account ([`Verdict::Disagreed`]),
    /// with findings, in run order.
    pub fn disagreed(&self) -> Vec<CaseFailure<'_>> {
        self.failures(|v| match v {
            Verdict::Disagreed(f) => Some(f),
            _ => None,
        })
    }

    /// Cases outside the JDK's call domain with findings ([`Verdict::OutOfDomain`]), in run
    /// order.
    pub fn out_of_domain(&self) -> Vec<CaseFailure<'_>> {
        self.failures(|v| match v {
            Verdict::OutOfDomain(f) => Some(f),
            _ => None,
        })
    }

    /// Cases that ran to a verdict of their own: passed, failed, disagreed or out of domain
    /// (every case but the skipped ones).
    pub fn ran(&self) -> usize {
        self.cases.len() - self.skipped()
    }

    /// The cases whose verdict `pick` takes findings from, with those findings.
    fn failures<'a>(&'a self, pick: impl Fn(&'a Verdict) -> Option<&'a Vec<Finding>>) -> Vec<CaseFailure<'a>> {
        let failure = |c: &'a CaseOutcome, findings: &'a Vec<Finding>| CaseFailure {
            name: &c.name,
            msg_len: c.msg_len,
            findings,
        };
        self.cases.iter().filter_map(|c| pick(&c.verdict).map(|f| failure(c, f))).collect()
    }

    /// Marks case `i`, which made a call outside its contract family's domain (`why`), as
    /// [`Verdict::OutOfDomain`] when it failed: an [`Class::OutOfDomain`] finding saying so
    /// first, then its own findings. Other cases stay as they are.
    pub fn mark_out_of_domain(&mut self, i: usize, why: &str) {
        let Some(case) = self.cases.get_mut(i) else { return };
        let Verdict::Failed(own) = &mut case.verdict else { return };
        let mut findings = vec![Finding::new(Class::OutOfDomain, crate::domain::outside_message(self.family, why))];
        findings.append(own);
        case.verdict = Verdict::OutOfDomain(findings);
    }

    /// Takes case `i` away from the kernel's account after the vote across backends
    /// ([`crate::vote`]) blamed this backend: a failed or passed case becomes
    /// [`Verdict::Disagreed`] with `finding` (class [`Class::EmulatorFault`] or
    /// [`Class::Disagreement`]) first, then the case's own findings. Does nothing to a skipped
    /// or already re-attributed case.
    pub fn reattribute(&mut self, i: usize, finding: Finding) {
        let Some(case) = self.cases.get_mut(i) else { return };
        let own = match &mut case.verdict {
            Verdict::Failed(own) => std::mem::take(own),
            Verdict::Passed => Vec::new(),
            _ => return,
        };
        case.verdict = Verdict::Disagreed(std::iter::once(finding).chain(own).collect());
    }
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
        self.rows.iter().fold((0, 0, 0), |(p, f, s), r| (p + r.passed(), f + r.failed().len(), s + r.skipped()))
    }

    /// Variants built but run nowhere: every row skipped (no case passed, failed or disagreed
    /// on any backend), or no row at all because every selected backend is not applicable (an
    /// AVX-512 row on a host without AVX-512, whose emulators have none either); named in the
    /// verdict line so the run cannot read as green for them.
    pub fn ran_nowhere(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for r in &self.rows {
            if out.contains(&r.variant) {
                continue;
            }
            let rows = || self.rows.iter().filter(|x| x.variant == r.variant);
            if rows().all(|x| x.ran() == 0) {
                out.push(r.variant);
            }
        }
        // A variant not applicable on every selected backend has no rows at all.
        for n in &self.not_applicable {
            if !out.contains(&n.variant) && !self.rows.iter().any(|r| r.variant == n.variant) {
                out.push(n.variant);
            }
        }
        out
    }

    /// Cases (per backend) whose results differ between backends: an emulator fault is likely.
    /// Not kernel failures, but not passes either: they fail the run (exit 1).
    pub fn disagreed(&self) -> usize {
        self.rows.iter().map(|r| r.disagreed().len()).sum()
    }

    /// Cases with findings outside the JDK's call domain ([`Verdict::OutOfDomain`]): not
    /// failures.
    pub fn out_of_domain(&self) -> usize {
        self.rows.iter().map(|r| r.out_of_domain().len()).sum()
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

    /// The cases the vote blamed on each backend ([`Class::EmulatorFault`]), in backend order,
    /// and the cases with no majority ([`Class::Disagreement`]).
    pub fn blamed(&self) -> (Vec<(BackendKind, usize)>, usize) {
        let mut per: Vec<(BackendKind, usize)> = Vec::new();
        let mut no_majority = 0;
        for r in &self.rows {
            for c in &r.disagreed() {
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
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{CaseOutcome, Row, Verdict};
    use crate::backend::BackendKind;
    use crate::finding::{Class, Finding};
    use crate::variant::Kernel;

    fn case(name: &str, verdict: Verdict) -> CaseOutcome {
        CaseOutcome { name: name.into(), msg_len: 3, time: Duration::ZERO, verdict }
    }

    /// Every count follows the cases, also after the vote and the call domain change verdicts.
    #[test]
    fn counts_follow_the_cases() {
        let mut row = Row::for_set("x86_64", BackendKind::Qemu, Kernel::Md5, "rfc1321");
        let value = || vec![Finding::new(Class::Value, "state differs")];
        row.push(case("a", Verdict::Passed));
        row.push(case("b", Verdict::Failed(value())));
        row.push(case("c", Verdict::Skipped("first reason".into())));
        row.push(case("d", Verdict::Failed(value())));
        row.push(case("e", Verdict::Skipped("second reason".into())));
        row.push(case("f", Verdict::Passed));
        let counts =
            |r: &Row| (r.passed(), r.failed().len(), r.disagreed().len(), r.out_of_domain().len(), r.skipped());
        assert_eq!(counts(&row), (2, 2, 0, 0, 2));
        assert_eq!((row.skip_reason(), row.ran()), (Some("first reason"), 4));

        row.reattribute(0, Finding::new(Class::EmulatorFault, "qemu returned 1, native 2"));
        row.reattribute(1, Finding::new(Class::Disagreement, "no majority"));
        row.reattribute(2, Finding::new(Class::Disagreement, "a skipped case stays skipped"));
        row.mark_out_of_domain(3, "len 3");
        row.mark_out_of_domain(5, "a passed case stays passed");
        assert_eq!(counts(&row), (1, 0, 2, 1, 2));
        let disagreed = row.disagreed();
        assert_eq!(disagreed.iter().map(|c| c.name).collect::<Vec<_>>(), ["a", "b"]);
        let classes: Vec<Class> = disagreed[1].findings.iter().map(|f| f.class).collect();
        assert_eq!(classes, [Class::Disagreement, Class::Value], "the vote's finding first, then the case's own");
        let outside = row.out_of_domain();
        assert_eq!((outside[0].name, outside[0].msg_len, outside[0].findings[0].class), ("d", 3, Class::OutOfDomain));
    }
}

//! The human reporter: the table, failures with their findings, disagreements, skips with
//! their reasons, for a terminal (optionally coloured) or a log.

use std::fmt::Write as _;

use crate::backend::BackendKind;
use crate::exit::ExitCode;
use crate::finding::Class;
use crate::report::{Report, Row};

const FAIL: anstyle::Style = anstyle::AnsiColor::Red.on_default().bold();
const SKIP: anstyle::Style = anstyle::AnsiColor::Yellow.on_default();
const PASS: anstyle::Style = anstyle::AnsiColor::Green.on_default().bold();

/// Failed cases the human report prints per row (the JSON and JUnit reports list all).
const FAILURES_SHOWN: usize = 8;
/// Findings the human report prints per failed case.
const FINDINGS_SHOWN: usize = 6;

impl Report {
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
        // `qemu vlen=1024` where a row has a vector length.
        let bw = self.rows.iter().map(|r| r.backend_label().len()).max().unwrap_or(0).max(8);
        if !self.rows.is_empty() {
            let _ = writeln!(
                s,
                "{:<vw$} {:<bw$} {:<9} {:<sw$} {:>6} {:>6} {:>7} {:>8}",
                "variant", "backend", "kernel", "vector set", "passed", "failed", "skipped", "time"
            );
        }
        let same_cell =
            |a: &Row, b: &Row| a.variant == b.variant && a.backend == b.backend && a.vector_length == b.vector_length;
        for group in self.rows.chunk_by(same_cell) {
            // A variant × backend skipped whole for one reason is one line, not one per set.
            let whole = group.iter().all(|r| r.passed() == 0 && r.failed().is_empty() && r.skip_reason().is_some())
                && group.windows(2).all(|w| w[0].skip_reason() == w[1].skip_reason());
            if whole && group.len() > 1 {
                let skipped = paint.apply(SKIP, &format!("{:>7}", group.iter().map(|r| r.skipped()).sum::<usize>()));
                let (variant, backend) = (group[0].variant, group[0].backend_label());
                let _ = writeln!(
                    s,
                    "{variant:<vw$} {backend:<bw$} {:<9} {:<sw$} {:>6} {:>6} {skipped} {:>7.2}s",
                    "all", "(skipped)", 0, 0, 0.0
                );
                continue;
            }
            for r in group {
                let (failed_n, skipped_n, disagreed_n) = (r.failed().len(), r.skipped(), r.disagreed().len());
                let failed = format!("{failed_n:>6}");
                let skipped = format!("{skipped_n:>7}");
                let disagreed = if disagreed_n == 0 {
                    String::new()
                } else {
                    paint.apply(FAIL, &format!("  {disagreed_n} blamed on {} (emulator fault)", r.backend_label()))
                };
                let contract = r.contract_note().map_or(String::new(), |n| format!("  ({n})"));
                let _ = writeln!(
                    s,
                    "{:<vw$} {:<bw$} {:<9} {:<sw$} {:>6} {} {} {:>7.2}s{disagreed}{contract}",
                    r.variant,
                    r.backend_label(),
                    r.kernel.name(),
                    r.set,
                    r.passed(),
                    if failed_n == 0 { failed } else { paint.apply(FAIL, &failed) },
                    if skipped_n == 0 { skipped } else { paint.apply(SKIP, &skipped) },
                    r.elapsed.as_secs_f64()
                );
            }
        }
        self.write_not_applicable_rows(&mut s, vw, bw, sw);
        self.write_bounds_legend(&mut s);
        // Findings about a whole image first: they usually explain the failures below them.
        for f in &self.image_findings {
            let head = format!("FAILED {} image ({})", f.variant, f.finding.class.name());
            let _ = writeln!(s, "\n{}: {}", paint.apply(FAIL, &head), f.finding);
        }
        self.write_failures(&mut s, paint);
        for line in self.vector_length_verdicts() {
            let _ = writeln!(s, "\n{}: {line}", paint.apply(FAIL, "VECTOR LENGTH"));
        }
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
        let nowhere = self.ran_nowhere();
        if !nowhere.is_empty() {
            let _ = write!(verdict, ", NOT RUN on any backend: {} (see SKIPPED)", nowhere.join(", "));
        }
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
            let _ = write!(verdict, ", {} outside {} (not failures)", self.out_of_domain(), self.domain_names());
        }
        let style = if self.status() == ExitCode::Passed { PASS } else { FAIL };
        let _ =
            writeln!(s, "\n{} (seed {}, {:.2} s)", paint.apply(style, &verdict), self.seed, self.elapsed.as_secs_f64());
        s
    }

    fn write_failures(&self, s: &mut String, paint: Painter) {
        for (r, failed) in self.rows.iter().map(|r| (r, r.failed())).filter(|(_, f)| !f.is_empty()) {
            let contract = r.contract_note().map_or(String::new(), |n| format!(" ({n})"));
            let head = format!("FAILED {} on {}, {} / {}{contract}:", r.variant, r.backend_label(), r.kernel, r.set);
            let _ = writeln!(s, "\n{}", paint.apply(FAIL, &head));
            if let Some(replay) = &self.replay {
                let line = replay.narrowed_at(r.variant, r.backend, r.vector_length, r.kernel, Some(&r.set), None);
                let _ = writeln!(s, "  replay: {line}");
            }
            for c in failed.iter().take(FAILURES_SHOWN) {
                let _ = writeln!(s, "  {} ({} bytes):", c.name, c.msg_len);
                for f in c.findings.iter().take(FINDINGS_SHOWN) {
                    let _ = writeln!(s, "    - {f}");
                }
                if c.findings.len() > FINDINGS_SHOWN {
                    let _ = writeln!(s, "    - ... and {} more findings", c.findings.len() - FINDINGS_SHOWN);
                }
            }
            if failed.len() > FAILURES_SHOWN {
                let more = failed.len() - FAILURES_SHOWN;
                let _ = writeln!(s, "  ... and {more} more failed cases in this set (--format json lists them all)");
            }
        }
    }

    /// The domains of the rows with out-of-domain cases, for the verdict line: one family's
    /// name ("the JDK call domain"), or "their contracts' call domains" when rows differ.
    fn domain_names(&self) -> &'static str {
        let mut names = self.rows.iter().filter(|r| !r.out_of_domain().is_empty()).map(|r| r.family);
        match names.next() {
            Some(f) if names.all(|g| g == f) => crate::domain::domain_name(f),
            _ => "their contracts' call domains",
        }
    }

    /// The cases with findings outside their contract's call domain, per row (`--domain wide`).
    fn write_out_of_domain(&self, s: &mut String) {
        for (r, outside) in self.rows.iter().map(|r| (r, r.out_of_domain())).filter(|(_, o)| !o.is_empty()) {
            let _ = writeln!(
                s,
                "\nOUTSIDE {} {} on {}, {} / {} (not failures: {}):",
                crate::domain::domain_name(r.family).to_uppercase(),
                r.variant,
                r.backend_label(),
                r.kernel,
                r.set,
                crate::domain::never_called(r.family)
            );
            for c in outside.iter().take(FAILURES_SHOWN) {
                let _ = writeln!(s, "  {} ({} bytes):", c.name, c.msg_len);
                for f in c.findings.iter().take(FINDINGS_SHOWN) {
                    let _ = writeln!(s, "    - {f}");
                }
            }
            if outside.len() > FAILURES_SHOWN {
                let more = outside.len() - FAILURES_SHOWN;
                let _ = writeln!(s, "  ... and {more} more such cases in this set (--format json lists them all)");
            }
        }
    }

    /// The cases the vote across backends took from the kernel's account, per row: the backend
    /// the vote blamed is the row's ("EMULATOR FAULT qemu on x86_64, md5 / rfc1321").
    fn write_disagreements(&self, s: &mut String, paint: Painter) {
        for (r, disagreed) in self.rows.iter().map(|r| (r, r.disagreed())).filter(|(_, d)| !d.is_empty()) {
            let named =
                disagreed.iter().filter(|c| c.findings.first().is_some_and(|f| f.class == Class::EmulatorFault));
            let head = if named.count() == disagreed.len() {
                format!(
                    "EMULATOR FAULT {} on {}, {} / {} (not counted as kernel failures):",
                    r.backend_label(),
                    r.variant,
                    r.kernel,
                    r.set
                )
            } else {
                format!(
                    "BACKENDS DISAGREE {} on {}, {} / {} (no side has a majority):",
                    r.backend_label(),
                    r.variant,
                    r.kernel,
                    r.set
                )
            };
            let _ = writeln!(s, "\n{}", paint.apply(FAIL, &head));
            for c in disagreed.iter().take(FAILURES_SHOWN) {
                let _ = writeln!(s, "  {} ({} bytes):", c.name, c.msg_len);
                for f in c.findings.iter().take(FINDINGS_SHOWN) {
                    let _ = writeln!(s, "    - {f}");
                }
            }
            if disagreed.len() > FAILURES_SHOWN {
                let more = disagreed.len() - FAILURES_SHOWN;
                let _ = writeln!(s, "  ... and {more} more such cases in this set (--format json lists them all)");
            }
        }
    }

    /// One line per bounds granularity among the backends that ran (see [`BackendKind::bounds`]).
    fn write_bounds_legend(&self, s: &mut String) {
        let ran =
            |k: &BackendKind| self.rows.iter().any(|r| r.backend == *k && (r.passed() > 0 || !r.failed().is_empty()));
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
        let mut seen: Vec<(&str, &str, String)> = Vec::new();
        for r in &self.rows {
            if let Some(reason) = r.skip_reason() {
                let key = (reason, r.variant, r.backend_label());
                if !seen.contains(&key) {
                    let head = format!("SKIPPED {} on {}", r.variant, r.backend_label());
                    let _ = writeln!(s, "\n{}: {reason}", paint.apply(SKIP, &head));
                    seen.push(key);
                }
            }
        }
    }

    /// "NOT APPLICABLE riscv64 and riscv64+zbb on native: <reason>": one line per backend and
    /// reason, after the skips.
    fn write_not_applicable(&self, s: &mut String, paint: Painter) {
        let mut done: Vec<(BackendKind, &str)> = Vec::new();
        for n in &self.not_applicable {
            if done.contains(&(n.backend, n.reason.as_str())) {
                continue;
            }
            done.push((n.backend, n.reason.as_str()));
            let alike = self.not_applicable.iter().filter(|m| m.backend == n.backend && m.reason == n.reason);
            let variants: Vec<&str> = alike.map(|m| m.variant).collect();
            let head = format!("NOT APPLICABLE {} on {}", variants.join(" and "), n.backend);
            let _ = writeln!(s, "\n{}: {}", paint.apply(SKIP, &head), n.reason);
        }
    }

    /// One table line per not-applicable combination (`n/a` in every column), below the rows;
    /// `vw`, `bw` and `sw` are the table's variant, backend and set column widths.
    fn write_not_applicable_rows(&self, s: &mut String, vw: usize, bw: usize, sw: usize) {
        for n in &self.not_applicable {
            let _ = writeln!(
                s,
                "{:<vw$} {:<bw$} {:<9} {:<sw$} {:>6} {:>6} {:>7} {:>8}",
                n.variant,
                n.backend.name(),
                "all",
                "(not applicable)",
                "n/a",
                "n/a",
                "n/a",
                "-"
            );
        }
    }
}

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

//! Variant × backend combinations that cannot exist on this host (native on another
//! architecture; a row of the lab's own whose extensions the emulator or this CPU lacks, such as
//! Unicorn and RVV, qemu 7.2 and AVX-512): not skips, since nothing that could have run did not. Each is listed once, with
//! its reason, and counted apart ([`Report::not_applicable`]): a healthy run reports 0 skipped.

use super::Report;
use crate::backend::BackendKind;
use crate::variant::Variant;

/// A variant × backend that cannot exist on this host ([`BackendKind::applicable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotApplicable {
    /// Variant name.
    pub variant: &'static str,
    /// Backend.
    pub backend: BackendKind,
    /// Why the combination cannot exist ("native runs only the host's architecture (x86_64),
    /// not riscv64").
    pub reason: String,
}

impl Report {
    /// Records every combination of `variants` × `backends` that cannot exist on this host as
    /// not applicable (once each, in variant, backend order) and removes its rows, so its
    /// cases are neither run nor counted as skipped.
    pub fn set_apart_not_applicable(&mut self, variants: &[&'static Variant], backends: &[BackendKind]) {
        for &v in variants {
            for &backend in backends {
                let Err(reason) = backend.applicable(v) else { continue };
                if !self.not_applicable.iter().any(|n| n.variant == v.name && n.backend == backend) {
                    self.not_applicable.push(NotApplicable { variant: v.name, backend, reason });
                }
            }
        }
        let na = &self.not_applicable;
        self.rows.retain(|r| !na.iter().any(|n| n.variant == r.variant && n.backend == r.backend));
    }

    /// `", 3 combinations not applicable"` for the verdict line; empty when there are none.
    pub(crate) fn not_applicable_note(&self) -> String {
        match self.not_applicable.len() {
            0 => String::new(),
            1 => ", 1 combination not applicable".into(),
            n => format!(", {n} combinations not applicable"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{CaseOutcome, Row, Verdict};
    use crate::variant::{Arch, Kernel, VARIANTS};

    /// A variant of another architecture than the host's, and the host's own.
    fn foreign_and_host() -> (&'static Variant, &'static Variant) {
        let host = Arch::host().expect("a host the lab runs natively");
        let foreign = VARIANTS.iter().find(|v| v.arch != host).expect("a foreign variant");
        let own = VARIANTS.iter().find(|v| v.arch == host).expect("the host's variant");
        (foreign, own)
    }

    fn row(variant: &'static str, backend: BackendKind, verdict: Verdict) -> Row {
        let mut r = Row::for_set(variant, backend, Kernel::Md5, "rfc1321");
        r.push(CaseOutcome { name: "c".into(), msg_len: 0, time: Default::default(), verdict });
        r
    }

    #[test]
    fn native_on_another_architecture_is_listed_once_and_counted_apart_from_skips() {
        let (foreign, own) = foreign_and_host();
        let skip = || Verdict::Skipped("native runs only the host's architecture".into());
        let mut report = Report {
            rows: vec![
                row(foreign.name, BackendKind::Unicorn, Verdict::Passed),
                row(foreign.name, BackendKind::Native, skip()),
                row(foreign.name, BackendKind::Native, skip()),
                row(own.name, BackendKind::Native, Verdict::Passed),
            ],
            ..Report::default()
        };
        let backends = [BackendKind::Unicorn, BackendKind::Native];
        report.set_apart_not_applicable(&[foreign, own], &backends);
        report.set_apart_not_applicable(&[foreign], &backends);
        assert_eq!(report.not_applicable.len(), 1, "{:?}", report.not_applicable);
        let na = &report.not_applicable[0];
        assert_eq!((na.variant, na.backend), (foreign.name, BackendKind::Native));
        assert!(na.reason.starts_with("native runs only the host's architecture"), "{}", na.reason);
        assert_eq!(report.totals(), (2, 0, 0), "the native rows of {foreign} are gone, not skipped");
        let text = report.to_human();
        assert!(text.contains("2 passed, 0 failed, 0 skipped, 1 combination not applicable"), "{text}");
        let line = text.lines().find(|l| l.starts_with(foreign.name) && l.contains(" native ")).expect("n/a line");
        assert!(line.contains("(not applicable)") && line.contains("n/a"), "{line}");
        assert!(text.contains(&format!("NOT APPLICABLE {} on native: native runs only", foreign.name)), "{text}");
        assert!(!text.contains("SKIPPED"), "{text}");
    }

    #[test]
    fn a_run_of_only_impossible_combinations_says_so() {
        let (foreign, _) = foreign_and_host();
        let mut report = Report::default();
        report.set_apart_not_applicable(&[foreign], &[BackendKind::Native]);
        let text = report.to_human();
        assert!(text.contains("nothing ran: every selected variant × backend is not applicable"), "{text}");
        assert_eq!(report.status(), crate::exit::ExitCode::Error);
    }

    #[test]
    fn json_and_junit_count_not_applicable_apart_from_skips() {
        use crate::reporters::{render, Format};
        let (foreign, own) = foreign_and_host();
        let mut report =
            Report { rows: vec![row(own.name, BackendKind::Unicorn, Verdict::Passed)], ..Report::default() };
        report.set_apart_not_applicable(&[foreign, own], &[BackendKind::Unicorn, BackendKind::Native]);
        let doc: serde_json::Value = serde_json::from_str(&render(&report, Format::Json, "run").unwrap()).unwrap();
        assert_eq!((doc["totals"]["skipped"].as_u64(), doc["totals"]["not_applicable"].as_u64()), (Some(0), Some(1)));
        assert_eq!(doc["not_applicable"][0]["variant"], foreign.name);
        assert_eq!(doc["not_applicable"][0]["backend"], "native");
        let xml = render(&report, Format::Junit, "run").unwrap();
        let junit = roxmltree::Document::parse(&xml).unwrap();
        let suite = junit.descendants().find(|n| n.attribute("name") == Some("not applicable")).expect("suite");
        assert_eq!((suite.attribute("tests"), suite.attribute("skipped")), (Some("0"), Some("0")), "{xml}");
        let property = suite.descendants().find(|n| n.has_tag_name("property")).expect("a property");
        assert_eq!(property.attribute("name"), Some(format!("{} on native", foreign.name).as_str()));
        assert!(!xml.contains("<skipped"), "{xml}");
    }
}

#[cfg(test)]
mod ran_nowhere_tests {
    use crate::backend::BackendKind;
    use crate::report::{CaseOutcome, Report, Row, Verdict};
    use crate::variant::Kernel;

    fn row(variant: &'static str, backend: BackendKind, verdict: Verdict) -> Row {
        let mut r = Row::for_set(variant, backend, Kernel::Poly1305, "rfc8439");
        r.push(CaseOutcome { name: "c".into(), msg_len: 0, time: Default::default(), verdict });
        r
    }

    /// A variant every backend skipped is named in the verdict line and the JSON, apart from
    /// one that ran somewhere.
    #[test]
    fn a_variant_skipped_on_every_backend_is_named_as_not_run() {
        let skip = || Verdict::Skipped("qemu cannot provide avx512f".into());
        let report = Report {
            rows: vec![
                row("x86_64+avx512", BackendKind::Unicorn, skip()),
                row("x86_64+avx512", BackendKind::Qemu, skip()),
                row("x86_64+avx2", BackendKind::Unicorn, skip()),
                row("x86_64+avx2", BackendKind::Qemu, Verdict::Passed),
            ],
            ..Report::default()
        };
        assert_eq!(report.ran_nowhere(), ["x86_64+avx512"]);
        let text = report.to_human();
        assert!(text.contains("1 passed, 0 failed, 3 skipped, NOT RUN on any backend: x86_64+avx512"), "{text}");
        let json = crate::reporters::render(&report, crate::reporters::Format::Json, "run").unwrap();
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(doc["ran_nowhere"], serde_json::json!(["x86_64+avx512"]));
    }
}

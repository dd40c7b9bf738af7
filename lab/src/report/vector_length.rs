//! The vector-length verdict of a report: a kernel that is right only at some vector lengths
//! (RVV's VLEN, SVE's VL) is named in one line per variant and kernel, with the lengths where
//! it passes and the lengths where it fails.

use super::Report;
use crate::variant::Kernel;

impl Report {
    /// One line per variant and kernel whose rows ran at several vector lengths and failed at
    /// some of them: `riscv64+v, md5: passes at VLEN 256, 512, 1024; fails at VLEN 128`. A
    /// length fails when any of its rows (any vector set) has a failed or disagreed case; rows
    /// that ran no case are left out.
    pub fn vector_length_verdicts(&self) -> Vec<String> {
        let mut keys: Vec<(&str, Kernel, &str)> = Vec::new();
        let mut lengths: Vec<Vec<(u32, bool)>> = Vec::new();
        for r in &self.rows {
            let Some(vl) = r.vector_length else { continue };
            if r.passed() == 0 && r.failed().is_empty() && r.disagreed().is_empty() {
                continue;
            }
            let key = (r.variant, r.kernel, vl.spec.name);
            let at = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
                keys.push(key);
                lengths.push(Vec::new());
                keys.len() - 1
            });
            let failed = !r.failed().is_empty() || !r.disagreed().is_empty();
            match lengths[at].iter_mut().find(|(b, _)| *b == vl.bits) {
                Some((_, f)) => *f |= failed,
                None => lengths[at].push((vl.bits, failed)),
            }
        }
        let list = |ls: &[(u32, bool)], failed: bool| -> String {
            let bits: Vec<String> = ls.iter().filter(|(_, f)| *f == failed).map(|(b, _)| b.to_string()).collect();
            bits.join(", ")
        };
        keys.iter()
            .zip(&lengths)
            .filter(|(_, ls)| ls.iter().any(|(_, f)| *f))
            .map(|((variant, kernel, name), ls)| {
                let fails = list(ls, true);
                if ls.iter().all(|(_, f)| *f) {
                    format!("{variant}, {kernel}: fails at {name} {fails} (every length run)")
                } else {
                    format!("{variant}, {kernel}: passes at {name} {}; fails at {name} {fails}", list(ls, false))
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Class, Finding};
    use crate::report::{CaseOutcome, Row, Verdict};
    use crate::variant::Variant;

    #[test]
    fn one_line_names_the_passing_and_failing_lengths() {
        let v = Variant::by_name("riscv64+v").unwrap();
        let spec = v.vector_length().unwrap();
        let mut report = Report::default();
        for bits in [128, 256, 512, 1024] {
            let mut row =
                Row::for_set(v.name, crate::backend::BackendKind::Qemu, Kernel::Md5, "rfc1321").at(Some(spec.at(bits)));
            let verdict = if bits == 128 {
                Verdict::Failed(vec![Finding::new(Class::Value, "state differs")])
            } else {
                Verdict::Passed
            };
            row.push(CaseOutcome { name: "a".into(), msg_len: 1, time: Default::default(), verdict });
            report.rows.push(row);
        }
        assert_eq!(
            report.vector_length_verdicts(),
            vec!["riscv64+v, md5: passes at VLEN 256, 512, 1024; fails at VLEN 128".to_string()]
        );
        report.rows[0].cases[0].verdict = Verdict::Passed;
        assert!(report.vector_length_verdicts().is_empty(), "no line when every length passes");
    }
}

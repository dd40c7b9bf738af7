//! The baseline gate's result: every compared figure with its verdict, and the gate as text.
//! `baseline::compare` fills it; the bench report carries it.

use std::fmt::Write as _;

use serde::Serialize;

/// How one figure compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Costs more than the allowed regression.
    Regressed,
    /// Costs more, within the allowed regression.
    Worse,
    /// Identical.
    Same,
    /// Costs less (update the baseline to keep the gain).
    Improved,
    /// In the baseline, not measured now (tool missing, selection narrower).
    NotMeasured,
    /// Measured now, not in the baseline.
    New,
}

/// One compared figure.
#[derive(Debug, Clone, Serialize)]
pub struct GateRow {
    /// Kernel name.
    pub kernel: String,
    /// Variant name.
    pub variant: String,
    /// `instructions/block (input +0)` or `cycles/block on sifive-u74`.
    pub figure: String,
    /// Baseline value.
    pub baseline: Option<f64>,
    /// Value now.
    pub now: Option<f64>,
    /// (now − baseline) / baseline, percent.
    pub change_pct: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
}

/// The gate's result.
#[derive(Debug, Clone, Serialize)]
pub struct Gate {
    /// The baseline file.
    pub baseline: String,
    /// Largest allowed cost increase, percent.
    pub max_regression_pct: f64,
    /// Every compared figure.
    pub rows: Vec<GateRow>,
    /// Set when the baseline's cycles came from another llvm-mca than now's.
    pub tool_changed: Option<(String, String)>,
}

impl Gate {
    /// The figures that regressed beyond the threshold.
    pub fn regressions(&self) -> impl Iterator<Item = &GateRow> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Regressed)
    }

    /// The gate as text: every figure that differs, then the verdict.
    pub fn to_human(&self) -> String {
        let mut s =
            format!("\nBaseline gate against {} (fails above +{}% cost)\n", self.baseline, self.max_regression_pct);
        let fmt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
        let changed: Vec<&GateRow> = self.rows.iter().filter(|r| r.verdict != Verdict::Same).collect();
        for r in &changed {
            let _ = writeln!(
                s,
                "  {:<10} {:<9} {:<12} {:<32} {:>9} -> {:>9} {:>8}",
                format!("{:?}", r.verdict).to_uppercase(),
                r.kernel,
                r.variant,
                r.figure,
                fmt(r.baseline),
                fmt(r.now),
                r.change_pct.map_or(String::new(), |p| format!("{p:+.2}%"))
            );
        }
        if let Some((b, n)) = &self.tool_changed {
            let _ = writeln!(s, "  note: the baseline's cycles came from {b}, these from {n}");
        }
        let same = self.rows.len() - changed.len();
        let n = self.regressions().count();
        let _ = writeln!(
            s,
            "  {same} of {} figures identical; {}",
            self.rows.len(),
            if n == 0 { "no regression".to_string() } else { format!("{n} REGRESSED") }
        );
        if changed.iter().any(|r| r.verdict == Verdict::Improved) {
            let _ = writeln!(s, "  (improvements: keep them with --save-baseline {})", self.baseline);
        }
        s
    }
}

//! The performance gate: a saved baseline (instructions per block per variant × kernel × input
//! placement, predicted cycles per block per model) compared with a new report. Instruction
//! counts are exact on Unicorn and predictions deterministic for one llvm-mca build, so every
//! difference is real: each one is listed, and one that costs more than `max_regression_pct`
//! fails the gate (`lab bench --baseline FILE` exits 1, naming kernel, variant and model).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::report::BenchReport;

/// Format version of baseline files saved before the shared envelope (`"schema": 1`); they
/// still load. New files carry the envelope's `schema_version` ([`SCHEMA_VERSION`]).
pub const LEGACY_SCHEMA: u32 = 1;

/// The `command` of a saved baseline's envelope.
pub const COMMAND: &str = "bench-baseline";

use crate::vocab::envelope::{Envelope, SCHEMA_VERSION};

/// Instructions per block of one variant × kernel × input placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstructionEntry {
    /// Variant name.
    pub variant: String,
    /// Kernel name; `md5-openssl` for a kernel run through another contract family than
    /// HotSpot's ([`kernel_key`]), so figures of different code are never compared.
    pub kernel: String,
    /// Bytes past a 64-byte boundary where the input starts.
    pub misalign: usize,
    /// Instructions per block.
    pub per_block: f64,
}

/// Predicted cycles per block of one variant × kernel on one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleEntry {
    /// Variant name.
    pub variant: String,
    /// Kernel name.
    pub kernel: String,
    /// llvm-mca `-mcpu` model.
    pub model: String,
    /// Predicted cycles per block.
    pub cycles_per_block: f64,
}

/// A saved baseline (`lab bench --save-baseline FILE`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The llvm-mca that predicted the cycles (another LLVM may model the same code differently).
    #[serde(default)]
    pub llvm_mca: Option<String>,
    /// Instructions per block.
    pub instructions: Vec<InstructionEntry>,
    /// Predicted cycles per block.
    pub cycles: Vec<CycleEntry>,
}

pub use super::gate::{Gate, GateRow, Verdict};

impl Baseline {
    /// The figures of `report`.
    pub fn of(report: &BenchReport) -> Baseline {
        Baseline {
            llvm_mca: report.llvm_mca.clone(),
            instructions: report
                .counts
                .iter()
                .map(|r| InstructionEntry {
                    variant: r.variant.into(),
                    kernel: kernel_key(r.kernel, r.family),
                    misalign: r.misalign,
                    per_block: r.per_block,
                })
                .collect(),
            cycles: report
                .predictions
                .iter()
                .map(|p| CycleEntry {
                    variant: p.variant.clone(),
                    // The family of the count row the prediction's loop came from.
                    kernel: report
                        .counts
                        .iter()
                        .find(|r| r.variant == p.variant && r.kernel == p.kernel && r.misalign == 0)
                        .map_or_else(|| p.kernel.clone(), |r| kernel_key(r.kernel, r.family)),
                    model: p.vector_length.as_ref().map_or_else(|| p.model.clone(), |vl| format!("{} [{vl}]", p.model)),
                    cycles_per_block: p.cycles_per_block,
                })
                .collect(),
        }
    }

    /// Reads a baseline file.
    ///
    /// # Errors
    /// A sentence naming the file and, for bad content, the entry and what is wrong.
    pub fn load(path: &Path) -> Result<Baseline, String> {
        // A baseline is a few KiB; 16 MiB refuses /dev/zero and runaway files at once.
        let text = crate::input_file::read_regular(path, 16 << 20, "a baseline")
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let b = parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let bad = |what: String| Err(format!("{}: {what}", path.display()));
        for (i, e) in b.instructions.iter().enumerate() {
            if !(e.per_block.is_finite() && e.per_block > 0.0) {
                return bad(format!("instructions[{i}] ({} {}): per_block must be > 0", e.variant, e.kernel));
            }
        }
        for (i, e) in b.cycles.iter().enumerate() {
            if !(e.cycles_per_block.is_finite() && e.cycles_per_block > 0.0) {
                return bad(format!(
                    "cycles[{i}] ({} {} {}): cycles_per_block must be > 0",
                    e.variant, e.kernel, e.model
                ));
            }
        }
        Ok(b)
    }

    /// Writes the baseline as pretty JSON.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(&Envelope::new(COMMAND, self)).map_err(|e| e.to_string())? + "\n";
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// A baseline document: the shared envelope (`schema_version` [`SCHEMA_VERSION`], `command`
/// [`COMMAND`]) or a file saved before it (`"schema": 1`).
fn parse(text: &str) -> Result<Baseline, String> {
    let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not a baseline: {e}"))?;
    let number = |key: &str| doc.get(key).and_then(serde_json::Value::as_u64);
    match (number("schema_version"), number("schema"), doc.get("command").and_then(|c| c.as_str())) {
        (Some(v), _, Some(COMMAND)) if v == u64::from(SCHEMA_VERSION) => {}
        (Some(v), _, Some(COMMAND)) => return Err(format!("schema_version {v} (this lab reads {SCHEMA_VERSION})")),
        (Some(_), _, other) => return Err(format!("a `{}` document, not a baseline", other.unwrap_or("?"))),
        (None, Some(v), _) if v == u64::from(LEGACY_SCHEMA) => {}
        (None, Some(v), _) => return Err(format!("schema {v} (this lab reads {LEGACY_SCHEMA} and envelopes)")),
        (None, None, _) => return Err("not a baseline: no `schema_version`".into()),
    }
    serde_json::from_value(doc).map_err(|e| format!("not a baseline: {e}"))
}

/// The kernel as a baseline names it: `md5` for HotSpot's family (baselines saved before
/// families existed read the same), `md5-openssl` for another family.
pub fn kernel_key(kernel: &str, family: &str) -> String {
    if family == crate::contract::Family::HotSpot.name() {
        kernel.to_string()
    } else {
        format!("{kernel}-{family}")
    }
}

fn judge(base: Option<f64>, now: Option<f64>, max_pct: f64) -> (Option<f64>, Verdict) {
    match (base, now) {
        (Some(b), Some(n)) => {
            let pct = (n - b) / b * 100.0;
            let v = if (n - b).abs() < 1e-9 {
                Verdict::Same
            } else if n < b {
                Verdict::Improved
            } else if pct > max_pct {
                Verdict::Regressed
            } else {
                Verdict::Worse
            };
            (Some(pct), v)
        }
        (Some(_), None) => (None, Verdict::NotMeasured),
        _ => (None, Verdict::New),
    }
}

/// Compares `now` with `base`; figures beyond `max_pct` percent more cost are regressions.
pub fn compare(base: &Baseline, base_name: &str, now: &Baseline, max_pct: f64) -> Gate {
    let mut rows = Vec::new();
    let mut keys: Vec<(String, String, usize)> = Vec::new();
    for e in base.instructions.iter().chain(&now.instructions) {
        let k = (e.variant.clone(), e.kernel.clone(), e.misalign);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (variant, kernel, misalign) in keys {
        let find = |b: &Baseline| {
            b.instructions
                .iter()
                .find(|e| e.variant == variant && e.kernel == kernel && e.misalign == misalign)
                .map(|e| e.per_block)
        };
        let (b, n) = (find(base), find(now));
        let (change_pct, verdict) = judge(b, n, max_pct);
        let figure = format!("instructions/block (input +{misalign})");
        rows.push(GateRow { kernel, variant, figure, baseline: b, now: n, change_pct, verdict });
    }
    let mut keys: Vec<(String, String, String)> = Vec::new();
    for e in base.cycles.iter().chain(&now.cycles) {
        let k = (e.variant.clone(), e.kernel.clone(), e.model.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (variant, kernel, model) in keys {
        let find = |b: &Baseline| {
            b.cycles
                .iter()
                .find(|e| e.variant == variant && e.kernel == kernel && e.model == model)
                .map(|e| e.cycles_per_block)
        };
        let (b, n) = (find(base), find(now));
        let (change_pct, verdict) = judge(b, n, max_pct);
        let figure = format!("cycles/block on {model}");
        rows.push(GateRow { kernel, variant, figure, baseline: b, now: n, change_pct, verdict });
    }
    let tool_changed = match (&base.llvm_mca, &now.llvm_mca) {
        (Some(b), Some(n)) if b != n => Some((b.clone(), n.clone())),
        _ => None,
    };
    Gate { baseline: base_name.into(), max_regression_pct: max_pct, rows, tool_changed }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baseline(insns: f64, cycles: f64) -> Baseline {
        Baseline {
            llvm_mca: None,
            instructions: vec![InstructionEntry {
                variant: "riscv64".into(),
                kernel: "md5".into(),
                misalign: 0,
                per_block: insns,
            }],
            cycles: vec![CycleEntry {
                variant: "riscv64".into(),
                kernel: "md5".into(),
                model: "sifive-u74".into(),
                cycles_per_block: cycles,
            }],
        }
    }

    #[test]
    fn regressions_beyond_the_threshold_fail_and_are_named() {
        let base = baseline(721.0, 500.0);
        let g = compare(&base, "b.json", &baseline(785.0, 505.0), 2.0);
        let v: Vec<(Verdict, &str)> = g.rows.iter().map(|r| (r.verdict, r.figure.as_str())).collect();
        assert_eq!(
            v,
            vec![(Verdict::Regressed, "instructions/block (input +0)"), (Verdict::Worse, "cycles/block on sifive-u74")]
        );
        assert!(g.to_human().contains("REGRESSED  md5       riscv64"), "{}", g.to_human());
        let same = compare(&base, "b.json", &base, 2.0);
        assert_eq!(same.regressions().count(), 0);
        assert!(same.rows.iter().all(|r| r.verdict == Verdict::Same));
        let better = compare(&base, "b.json", &baseline(700.0, 400.0), 2.0);
        assert!(better.rows.iter().all(|r| r.verdict == Verdict::Improved));
    }

    /// An OpenSSL-contract image's figures are keyed apart from HotSpot's: comparing one with
    /// a HotSpot baseline lists them as new and not measured, never as a regression.
    #[test]
    fn another_family_is_never_compared_with_hotspot_figures() {
        assert_eq!(kernel_key("md5", "hotspot"), "md5");
        assert_eq!(kernel_key("md5", "openssl"), "md5-openssl");
        let mut openssl = baseline(785.0, 505.0);
        openssl.instructions[0].kernel = kernel_key("md5", "openssl");
        openssl.cycles[0].kernel = kernel_key("md5", "openssl");
        let g = compare(&baseline(721.0, 500.0), "b.json", &openssl, 2.0);
        assert_eq!(g.regressions().count(), 0);
        let v: Vec<Verdict> = g.rows.iter().map(|r| r.verdict).collect();
        assert_eq!(v, vec![Verdict::NotMeasured, Verdict::New, Verdict::NotMeasured, Verdict::New]);
    }

    #[test]
    fn missing_and_new_figures_are_listed_not_failed() {
        let mut now = baseline(721.0, 500.0);
        now.cycles[0].model = "spacemit-x60".into();
        let g = compare(&baseline(721.0, 500.0), "b.json", &now, 2.0);
        let v: Vec<Verdict> = g.rows.iter().map(|r| r.verdict).collect();
        assert_eq!(v, vec![Verdict::Same, Verdict::NotMeasured, Verdict::New]);
    }
}

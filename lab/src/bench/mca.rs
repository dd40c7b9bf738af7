//! Predicted cycles per block with LLVM's machine-code analyzer, `llvm-mca-19` (Debian package
//! `llvm-19`; LLVM 14's `llvm-mca` rejects Zbb on `sifive-u74`), for named CPU scheduling models.
//!
//! The steady-state loop ([`super::steady`]) is simulated for [`ITERATIONS`] and twice as many
//! iterations; cycles per iteration = the difference of the two total cycle counts / ITERATIONS,
//! so pipeline fill and drain cancel out (the same idea as the per-block instruction count). The
//! JSON view (`--json`) gives cycles, dispatch width and resource pressure per iteration; the text
//! bottleneck analysis (`-bottleneck-analysis`, out-of-order models only) splits the cycles
//! with backend pressure into resource pressure and register / memory dependencies. Nothing here
//! measures a machine: the figures are the model's, deterministic for one LLVM build.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::steady::SteadyLoop;
use crate::toolchain::{self, Tool};
use crate::variant::{Arch, Variant};

/// The analyzer (package `llvm-19`, which ci/setup.sh installs).
pub const LLVM_MCA: Tool = Tool { program: "llvm-mca-19", package: "llvm-19" };

/// Start of the error when this LLVM has no scheduling model for a CPU it knows by name
/// (LLVM 19: `spacemit-x60`, whose model arrived in LLVM 20); reported as skipped.
pub const NO_MODEL: &str = "no scheduling model in this LLVM";

/// Iterations of the shorter simulation (the longer one runs twice as many).
pub const ITERATIONS: u32 = 100;

/// Scheduling models predicted by default: riscv64 SiFive U74 (VisionFive 2), SpacemiT X60,
/// SiFive P670; aarch64 Cortex-A55, Cortex-A72, Neoverse N1; x86_64 Skylake and Zen 3 (the
/// host's own model is added by [`Mca::default_models`]). A variant declaring an extension the
/// arch row lists models for (`McaSpec::by_extension`: AVX-512, SVE2, RVV) gets those instead.
pub fn standard_models(variant: &Variant) -> &'static [&'static str] {
    vector_models(variant).unwrap_or(variant.arch.spec().mca.models)
}

/// The models of the first `McaSpec::by_extension` entry whose extension `variant` declares.
fn vector_models(variant: &Variant) -> Option<&'static [&'static str]> {
    let spec = &variant.arch.spec().mca;
    spec.by_extension.iter().find(|(e, _)| variant.extensions.contains(e)).map(|(_, m)| *m)
}

/// `-mtriple` for `arch`.
fn triple(arch: Arch) -> &'static str {
    arch.spec().mca.triple
}

/// mca's own bottleneck analysis: shares of all simulated cycles, percent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BottleneckAnalysis {
    /// Cycles with backend pressure increase.
    pub backend_pressure_pct: f64,
    /// ... of which from resource pressure.
    pub resource_pressure_pct: f64,
    /// ... of which from register dependencies.
    pub register_dependencies_pct: f64,
    /// ... of which from memory dependencies.
    pub memory_dependencies_pct: f64,
}

/// One loop on one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Variant name.
    pub variant: String,
    /// Kernel name.
    pub kernel: String,
    /// `-mcpu` scheduling model.
    pub model: String,
    /// The loop simulated (`md5_implCompressMB+0x2e..+0x726`).
    pub loop_span: String,
    /// Instructions in one iteration of the loop.
    pub loop_instructions: usize,
    /// Blocks one iteration processes.
    pub blocks_per_iteration: u32,
    /// Predicted cycles per block, steady state.
    pub cycles_per_block: f64,
    /// Predicted cycles per input byte (block: 64 bytes MD5, 16 bytes Poly1305).
    pub cycles_per_byte: f64,
    /// Instructions per cycle, steady state.
    pub ipc: f64,
    /// mca's block reciprocal throughput per block: the resource-only lower bound.
    pub rthroughput_per_block: f64,
    /// Instructions the model dispatches per cycle.
    pub dispatch_width: u32,
    /// The resource with the most cycles of use per block.
    pub busiest_resource: String,
    /// Its cycles of use per block.
    pub busiest_resource_cycles: f64,
    /// What limits the loop, in words (see [`bottleneck`]).
    pub bottleneck: String,
    /// Whether the model is in-order (mca's bottleneck analysis then does not apply).
    pub in_order: bool,
    /// mca's bottleneck analysis (out-of-order models).
    pub analysis: Option<BottleneckAnalysis>,
    /// For a row with a vector length: the length the blocks per iteration are read at and
    /// how it relates to the model's own registers (see [`vector_readings`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_length: Option<String>,
}

/// The vector lengths to read `model` at, among the lengths the rows were counted at
/// (`counted`: each row's bits and label, `VLEN 256`), with each reading's label. A model of
/// known register width ([`crate::arch::McaSpec::model_vlen`]) is read at that width ("the
/// model's own") and at the arch's [`crate::arch::McaSpec::vector_reading`] ("charged for the
/// model's own N-bit registers": mca's charge per instruction stays the one for its own width
/// while the lanes per group follow the length); any other model at the smallest length.
pub fn vector_readings(arch: Arch, model: &str, counted: &[(u32, String)]) -> Vec<(u32, String)> {
    let spec = &arch.spec().mca;
    let own = spec.model_vlen.iter().find(|(m, _)| *m == model).map(|&(_, bits)| bits);
    let Some(own) = own else {
        return counted.iter().min_by_key(|(b, _)| *b).map(|(b, l)| (*b, l.clone())).into_iter().collect();
    };
    counted
        .iter()
        .filter_map(|(bits, label)| {
            if *bits == own {
                Some((*bits, format!("{label}, the model's own")))
            } else if spec.vector_reading == Some(*bits) {
                Some((*bits, format!("{label}, charged for the model's own {own}-bit registers")))
            } else {
                None
            }
        })
        .collect()
}

/// A found `llvm-mca-19`.
#[derive(Debug, Clone)]
pub struct Mca {
    program: PathBuf,
}

#[derive(Deserialize)]
struct Json {
    #[serde(rename = "CodeRegions")]
    regions: Vec<Region>,
    #[serde(rename = "TargetInfo")]
    target: TargetInfo,
}

#[derive(Deserialize)]
struct TargetInfo {
    #[serde(rename = "Resources")]
    resources: Vec<String>,
}

#[derive(Deserialize)]
struct Region {
    #[serde(rename = "SummaryView")]
    summary: Summary,
    #[serde(rename = "ResourcePressureView")]
    pressure: Option<PressureView>,
    #[serde(rename = "Instructions")]
    instructions: Vec<String>,
}

#[derive(Deserialize)]
struct Summary {
    #[serde(rename = "TotalCycles")]
    total_cycles: u64,
    #[serde(rename = "DispatchWidth")]
    dispatch_width: u32,
    #[serde(rename = "BlockRThroughput")]
    block_rthroughput: f64,
}

#[derive(Deserialize)]
struct PressureView {
    #[serde(rename = "ResourcePressureInfo")]
    info: Vec<Pressure>,
}

#[derive(Deserialize)]
struct Pressure {
    #[serde(rename = "InstructionIndex")]
    instruction: usize,
    #[serde(rename = "ResourceIndex")]
    resource: usize,
    #[serde(rename = "ResourceUsage")]
    usage: f64,
}

/// The text run: total cycles, and the bottleneck analysis when the model supports it.
struct TextRun {
    total_cycles: u64,
    analysis: Option<BottleneckAnalysis>,
    in_order: bool,
}

/// `[ 19.39% ]` after `label` on some line of `text`.
fn percent_after(text: &str, label: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.trim_start().trim_start_matches("- ").starts_with(label))?;
    let inside = line.split('[').nth(1)?.split('%').next()?;
    inside.trim().parse().ok()
}

fn parse_text(stdout: &str, stderr: &str) -> Result<TextRun, String> {
    let total_cycles = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Total Cycles:"))
        .and_then(|x| x.trim().parse().ok())
        .ok_or("no `Total Cycles:` line in llvm-mca's output")?;
    let in_order = stderr.contains("not supported for in-order");
    let analysis = if in_order {
        None
    } else {
        Some(BottleneckAnalysis {
            backend_pressure_pct: percent_after(stdout, "Cycles with backend pressure increase").unwrap_or(0.0),
            resource_pressure_pct: percent_after(stdout, "Resource Pressure").unwrap_or(0.0),
            register_dependencies_pct: percent_after(stdout, "Register Dependencies").unwrap_or(0.0),
            memory_dependencies_pct: percent_after(stdout, "Memory Dependencies").unwrap_or(0.0),
        })
    };
    Ok(TextRun { total_cycles, analysis, in_order })
}

/// Names what limits a loop of `insns` instructions taking `cycles` per iteration: a resource
/// busy at least 95% of the cycles, else the dispatch width if it allows no more, else the
/// dependency chain (latency), with mca's split where it has one.
pub fn bottleneck(
    cycles: f64,
    insns: f64,
    dispatch_width: u32,
    busiest: (&str, f64),
    analysis: Option<&BottleneckAnalysis>,
) -> String {
    let busy = |c: f64| if cycles > 0.0 { c / cycles * 100.0 } else { 0.0 };
    if busy(busiest.1) >= 95.0 {
        return format!("resource {} ({:.0}% busy)", busiest.0, busy(busiest.1));
    }
    let dispatch = insns / f64::from(dispatch_width.max(1));
    if busy(dispatch) >= 95.0 {
        return format!("dispatch width {dispatch_width} ({:.0}% of cycles)", busy(dispatch));
    }
    let chain = match analysis {
        Some(a) if a.memory_dependencies_pct > a.register_dependencies_pct => "memory dependencies",
        _ => "register dependencies",
    };
    format!("{chain} (latency; busiest {} {:.0}%)", busiest.0, busy(busiest.1))
}

/// The unit with the most cycles of use per iteration. mca's JSON lists the use of every
/// instruction and, under the index one past the last instruction, the totals per iteration;
/// units of a group are named `A57UnitI.` plus a byte 0, 1, ... (shown as `A57UnitI.0`).
fn busiest(region: &Region, names: &[String]) -> (String, f64) {
    let n = region.instructions.len();
    let info = region.pressure.iter().flat_map(|v| &v.info);
    let mut busy: BTreeMap<usize, f64> = BTreeMap::new();
    for p in info.filter(|p| p.instruction < n) {
        *busy.entry(p.resource).or_default() += p.usage;
    }
    let name = |i: usize| {
        names.get(i).map_or_else(
            || format!("#{i}"),
            |s| {
                s.chars()
                    .map(|c| if c.is_control() { char::from_digit(c as u32, 36).unwrap_or('?') } else { c })
                    .collect()
            },
        )
    };
    busy.iter()
        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(&i, &c)| (name(i), c))
        .unwrap_or_else(|| ("-".into(), 0.0))
}

impl Mca {
    /// Finds `llvm-mca-19` on `PATH`.
    ///
    /// # Errors
    /// `llvm-mca-19 missing (Debian package llvm-19)`.
    pub fn find() -> Result<Mca, String> {
        toolchain::find(LLVM_MCA)
            .map(|program| Mca { program })
            .map_err(|_| format!("{} missing (Debian package {})", LLVM_MCA.program, LLVM_MCA.package))
    }

    /// The LLVM version line (`Debian LLVM version 19.1.7`), or `llvm-mca-19`.
    pub fn version(&self) -> String {
        Command::new(&self.program)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .find(|l| l.contains("LLVM version"))
                    .map(|l| l.trim().to_string())
            })
            .unwrap_or_else(|| LLVM_MCA.program.to_string())
    }

    /// The host CPU LLVM detects (`llvm-mca-19 --version`: `Host CPU: znver4`), if not generic.
    pub fn host_cpu(&self) -> Option<String> {
        let out = Command::new(&self.program).arg("--version").stdin(Stdio::null()).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let cpu = text.lines().find_map(|l| l.trim().strip_prefix("Host CPU:"))?.trim().to_string();
        (!cpu.is_empty() && cpu != "generic").then_some(cpu)
    }

    /// The CPU models `llvm-mca-19 -mcpu=help` lists for `arch`.
    ///
    /// # Errors
    /// When the list cannot be read.
    pub fn known_models(&self, arch: Arch) -> Result<Vec<String>, String> {
        let out = Command::new(&self.program)
            .args([format!("-mtriple={}", triple(arch)), "-mcpu=help".into()])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", LLVM_MCA.program))?;
        let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
        let models: Vec<String> = text
            .lines()
            .skip_while(|l| !l.starts_with("Available CPUs"))
            .skip(1)
            .take_while(|l| !l.starts_with("Available features"))
            .filter_map(|l| l.split_whitespace().next().filter(|_| l.contains(" - ")).map(str::to_string))
            .collect();
        if models.is_empty() {
            return Err(format!("{} -mtriple={} -mcpu=help listed no CPU", LLVM_MCA.program, triple(arch)));
        }
        Ok(models)
    }

    /// [`standard_models`] of `variant`, with the host's model first on x86_64 hosts (not for
    /// a vector row with models of its own: the host's CPU may not have its extension).
    pub fn default_models(&self, variant: &Variant) -> Vec<String> {
        let mut models: Vec<String> = Vec::new();
        if Arch::host() == Some(variant.arch) && vector_models(variant).is_none() {
            models.extend(self.host_cpu());
        }
        for m in standard_models(variant) {
            if !models.iter().any(|x| x == m) {
                models.push((*m).to_string());
            }
        }
        models
    }

    fn run(&self, args: &[String], source: &Path) -> Result<(String, String), String> {
        let out = Command::new(&self.program)
            .args(args)
            .arg(source)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", LLVM_MCA.program))?;
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
        if stderr.contains("unable to find instruction-level scheduling information") {
            return Err(format!("{NO_MODEL}: {}", stderr.trim()));
        }
        if !out.status.success() || stderr.contains("error:") {
            let command = format!("{} {} {}", LLVM_MCA.program, args.join(" "), source.display());
            return Err(format!("`{command}` failed: {}", stderr.trim()));
        }
        Ok((stdout, stderr))
    }

    /// Simulates `lp` of `variant` on `model` (a name from [`Mca::known_models`]).
    ///
    /// # Errors
    /// llvm-mca failing (an instruction the model or assembler rejects) or unreadable output.
    pub fn predict(
        &self,
        variant: &Variant,
        kernel: &str,
        block_bytes: u64,
        lp: &SteadyLoop,
        model: &str,
    ) -> Result<Prediction, String> {
        let mut file =
            tempfile::Builder::new().suffix(".s").tempfile().map_err(|e| format!("a temporary file: {e}"))?;
        file.write_all(lp.mca_source().as_bytes()).map_err(|e| format!("a temporary file: {e}"))?;
        let mut base = vec![format!("-mtriple={}", triple(variant.arch)), format!("-mcpu={model}")];
        if !variant.mattr.is_empty() {
            base.push(format!("-mattr={}", variant.mattr));
        }
        let args = |extra: &[&str]| base.iter().cloned().chain(extra.iter().map(|s| s.to_string())).collect::<Vec<_>>();
        let short = format!("-iterations={ITERATIONS}");
        let long = format!("-iterations={}", 2 * ITERATIONS);
        let (out, err) = self.run(
            &args(&[&short, "-bottleneck-analysis", "-instruction-info=0", "-resource-pressure=0"]),
            file.path(),
        )?;
        let text = parse_text(&out, &err)?;
        let (json, _) = self.run(&args(&[&long, "--json"]), file.path())?;
        let json: Json = serde_json::from_str(&json).map_err(|e| format!("llvm-mca's JSON: {e}"))?;
        let region = json.regions.first().ok_or("llvm-mca's JSON has no code region")?;
        let cycles = region.summary.total_cycles.saturating_sub(text.total_cycles) as f64 / f64::from(ITERATIONS);
        let (res, res_cycles) = busiest(region, &json.target.resources);
        let n = lp.insns.len() as f64;
        let k = f64::from(lp.blocks_per_iteration);
        let dispatch = region.summary.dispatch_width;
        Ok(Prediction {
            variant: variant.name.into(),
            kernel: kernel.into(),
            model: model.into(),
            loop_span: lp.span(),
            loop_instructions: lp.insns.len(),
            blocks_per_iteration: lp.blocks_per_iteration,
            cycles_per_block: cycles / k,
            cycles_per_byte: cycles / k / block_bytes as f64,
            ipc: if cycles > 0.0 { n / cycles } else { 0.0 },
            rthroughput_per_block: region.summary.block_rthroughput / k,
            dispatch_width: dispatch,
            bottleneck: bottleneck(cycles, n, dispatch, (&res, res_cycles), text.analysis.as_ref()),
            busiest_resource: res,
            busiest_resource_cycles: res_cycles / k,
            in_order: text.in_order,
            analysis: text.analysis,
            vector_length: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_rows_are_predicted_on_models_that_have_their_extension() {
        let models = |name: &str| standard_models(Variant::by_name(name).expect("a row"));
        assert_eq!(models("x86_64+avx512"), ["icelake-server", "znver4"]);
        assert_eq!(models("x86_64+avx512ifma"), ["icelake-server", "znver4"]);
        assert_eq!(models("x86_64+avx2"), ["skylake", "znver3"], "both have AVX2");
        assert_eq!(models("aarch64+sve2"), ["neoverse-n2", "neoverse-v2"]);
        assert_eq!(models("aarch64"), ["cortex-a55", "cortex-a72", "neoverse-n1"]);
        for a in Arch::ALL {
            for (ext, _) in a.spec().mca.by_extension {
                // Helper rows may arrive later (riscv64 `v`); the others must be known extensions.
                assert!(a.spec().isa.extension(ext).is_some() || *ext == "v", "{a}: unknown extension {ext}");
            }
        }
    }

    #[test]
    fn rvv_models_are_read_at_their_own_vlen_and_at_256() {
        let counted: Vec<(u32, String)> = [128, 256, 512, 1024].map(|b| (b, format!("VLEN {b}"))).to_vec();
        assert_eq!(
            vector_readings(Arch::Riscv64, "sifive-x280", &counted),
            [
                (256, "VLEN 256, charged for the model's own 512-bit registers".to_string()),
                (512, "VLEN 512, the model's own".to_string())
            ]
        );
        assert_eq!(
            vector_readings(Arch::Riscv64, "sifive-p670", &counted),
            [
                (128, "VLEN 128, the model's own".to_string()),
                (256, "VLEN 256, charged for the model's own 128-bit registers".to_string())
            ]
        );
        assert_eq!(vector_readings(Arch::Riscv64, "generic", &counted), [(128, "VLEN 128".to_string())]);
        let sve: Vec<(u32, String)> = [128, 256].map(|b| (b, format!("SVE VL {b}"))).to_vec();
        assert_eq!(
            vector_readings(Arch::Aarch64, "neoverse-v2", &sve),
            [(128, "SVE VL 128, the model's own".to_string())]
        );
    }

    const TEXT: &str = "Iterations:        100\nInstructions:      57700\nTotal Cycles:      42804\n\n\
        Cycles with backend pressure increase [ 64.48% ]\nThroughput Bottlenecks: \n  Resource Pressure       [ 19.39% ]\n\
        \x20 Data Dependencies:      [ 45.09% ]\n  - Register Dependencies [ 45.09% ]\n  - Memory Dependencies   [ 0.00% ]\n";

    #[test]
    fn text_run_yields_cycles_and_the_analysis() {
        let t = parse_text(TEXT, "").unwrap();
        assert_eq!(t.total_cycles, 42804);
        let a = t.analysis.unwrap();
        assert_eq!(
            (a.backend_pressure_pct, a.resource_pressure_pct, a.register_dependencies_pct, a.memory_dependencies_pct),
            (64.48, 19.39, 45.09, 0.0)
        );
        let inorder = parse_text(TEXT, "warning: bottleneck analysis is not supported for in-order CPU 'x'.").unwrap();
        assert!(inorder.in_order && inorder.analysis.is_none());
        assert!(parse_text("nothing", "").is_err());
    }

    #[test]
    fn bottleneck_names_a_saturated_resource_dispatch_or_the_chain() {
        assert_eq!(bottleneck(100.0, 150.0, 2, ("PipeA", 97.0), None), "resource PipeA (97% busy)");
        assert_eq!(bottleneck(100.0, 196.0, 2, ("PipeA", 60.0), None), "dispatch width 2 (98% of cycles)");
        assert_eq!(
            bottleneck(100.0, 120.0, 4, ("Port0", 50.0), None),
            "register dependencies (latency; busiest Port0 50%)"
        );
    }
}

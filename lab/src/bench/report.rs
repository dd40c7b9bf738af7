//! The bench report: its own type (separate from `lab run`'s report), printed as tables or JSON.

use std::fmt::Write as _;

use serde::Serialize;

use crate::contract::Family;
use crate::exit::ExitCode;

use super::board::BoardComparison;
use super::counts::{CountRow, BLOCKS};
use super::gate::Gate;
use super::mca::Prediction;
use super::native::NativeReport;
use super::throughput::{RawRate, ThroughputRow};

/// Wall time of a default `lab run` and its verdict counts.
#[derive(Debug, Clone, Serialize)]
pub struct LabRunTime {
    /// Seconds, images already built.
    pub seconds: f64,
    /// Cases passed.
    pub passed: usize,
    /// Cases failed.
    pub failed: usize,
    /// Cases skipped.
    pub skipped: usize,
}

/// Everything `lab bench` measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BenchReport {
    /// Samples per timing; figures are medians.
    pub runs: usize,
    /// Instruction counts per variant × kernel × input placement (Unicorn).
    pub counts: Vec<CountRow>,
    /// Instructions per block counted from the steady loop's text, for rows no counter runs.
    pub static_counts: Vec<super::static_loop::StaticCount>,
    /// Predicted cycles per block per variant × kernel × CPU model (llvm-mca-19, aligned input).
    pub predictions: Vec<Prediction>,
    /// The analyzer's version line, when predictions ran.
    pub llvm_mca: Option<String>,
    /// The `sifive-u74` predictions beside the VisionFive 2 figures, when predicted.
    pub board: Option<BoardComparison>,
    /// The baseline gate, when `--baseline` was given.
    pub gate: Option<Gate>,
    /// The native x86_64 comparison, when it ran.
    pub native: Option<NativeReport>,
    /// Users' kernels timed natively against OpenSSL ([`super::user_native`]).
    pub user_native: Vec<super::user_native::UserNativeRow>,
    /// Raw instruction rates per variant × backend.
    pub raw_rates: Vec<RawRate>,
    /// Lab throughput per variant × backend × workload.
    pub throughput: Vec<ThroughputRow>,
    /// The default `lab run`, timed.
    pub lab_run: Option<LabRunTime>,
    /// Warnings about the user's images: the `abi-upper-bits` probe, once per object and
    /// argument ([`crate::upper_bits_report`]).
    pub warnings: Vec<String>,
    /// Sections or cells not run, with the reason.
    pub skipped: Vec<String>,
    /// Measurements that failed (a fault, a wrong result, disagreeing implementations).
    pub errors: Vec<String>,
    /// Builds or tools that could not start.
    pub setup_errors: Vec<String>,
    /// Wall time of the whole bench, seconds.
    pub elapsed_seconds: f64,
    /// 1-minute load average at the start and the end (/proc/loadavg): timings taken on a busy
    /// machine say so.
    pub load_average: (f64, f64),
}

/// The 1-minute load average, or 0 where /proc/loadavg is missing.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0.0)
}

/// A count with no fraction printed as an integer, else with two decimals.
fn num(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{}", x.round() as i64)
    } else {
        format!("{x:.2}")
    }
}

fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map(f).unwrap_or_else(|| "-".into())
}

/// 12345678 -> "12.3 M".
fn si(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{:.2} G", x / 1e9),
        x if x >= 1e6 => format!("{:.2} M", x / 1e6),
        x if x >= 1e3 => format!("{:.1} k", x / 1e3),
        x => format!("{x:.1} "),
    }
}

impl BenchReport {
    /// Exit status: passed when all was measured; failed when a measurement failed or the gate
    /// found a regression; an error (it wins) for set-up errors.
    pub fn exit_code(&self) -> ExitCode {
        if !self.setup_errors.is_empty() {
            ExitCode::Error
        } else if !self.errors.is_empty()
            || self.counts.iter().any(|r| !r.repeatable || !r.explained())
            || self.gate.as_ref().is_some_and(|g| g.regressions().next().is_some())
        {
            ExitCode::Failed
        } else {
            ExitCode::Passed
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&crate::vocab::envelope::Envelope::new("bench", self))
            .expect("the report serializes")
    }

    /// The report as tables.
    pub fn to_human(&self) -> String {
        let mut s = String::new();
        self.write_counts(&mut s);
        self.write_static_counts(&mut s);
        self.write_mix(&mut s);
        self.write_predictions(&mut s);
        self.write_board(&mut s);
        self.write_native(&mut s);
        self.write_user_native(&mut s);
        self.write_throughput(&mut s);
        for w in &self.warnings {
            let _ = writeln!(s, "\nwarning: {w}");
        }
        for (title, lines) in
            [("SKIPPED", &self.skipped), ("ERROR", &self.errors), ("SET-UP ERROR", &self.setup_errors)]
        {
            for l in lines {
                let _ = writeln!(s, "\n{title} {l}");
            }
        }
        if let Some(g) = &self.gate {
            s.push_str(&g.to_human());
        }
        let _ = writeln!(
            s,
            "\nbench took {:.1} s (medians of {} runs; load average {:.2} at the start, {:.2} at the end on {} cores)",
            self.elapsed_seconds,
            self.runs,
            self.load_average.0,
            self.load_average.1,
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        s
    }

    fn write_counts(&self, s: &mut String) {
        if self.counts.is_empty() {
            return;
        }
        let _ = writeln!(
            s,
            "Instructions per call and per block (the kernel's own code; counter: Unicorn's block profile, or qemu's exec log where Unicorn cannot run the row; identical on a fresh engine = repeatable)"
        );
        let _ = writeln!(
            s,
            "{:<17} {:<9} {:<5} {:>7} {:>8} {:>9} {:>9} {:>7} {:>8} {:>7} {:>6} {:>10} {:>10}  counter",
            "variant",
            "kernel",
            "input",
            "1 blk",
            "16 blk",
            "256 blk",
            "per block",
            "fixed",
            "HotSpot",
            "ratio",
            "Zbb",
            "1-blk stub",
            "repeatable"
        );
        // Rows of another contract family (an OpenSSL-contract image) name it and the symbol.
        let families = self.counts.iter().any(|r| r.family != Family::HotSpot.name());
        for r in &self.counts {
            let c: Vec<String> = BLOCKS
                .iter()
                .map(|n| r.per_call.iter().find(|(b, _)| b == n).map_or("-".into(), |x| x.1.to_string()))
                .collect();
            let _ = write!(
                s,
                "{:<17} {:<9} {:<5} {:>7} {:>8} {:>9} {:>9} {:>7} {:>8} {:>7} {:>6} {:>10} {:>10}  {}{}",
                r.variant,
                r.kernel,
                format!("+{}", r.misalign),
                c[0],
                c[1],
                c[2],
                num(r.per_block),
                num(r.fixed),
                opt(r.hotspot, num),
                opt(r.hotspot_ratio, |x| format!("{x:.2}x")),
                opt(r.zbb_saving_pct, |x| if x.abs() < 0.05 { "0.0%".into() } else { format!("-{x:.1}%") }),
                r.single_block_call.map_or("-".into(), |x| x.to_string()),
                match (r.repeatable, r.linear, r.steady_per_block) {
                    (true, true, _) => "yes".to_string(),
                    (false, ..) => "NO".to_string(),
                    (true, false, Some(long)) => format!("yes, {long} from 2 paths"),
                    (true, false, None) => "nonlinear".to_string(),
                },
                r.counter,
                r.vector_length.as_ref().map_or(String::new(), |vl| format!(", {vl}"))
            );
            let _ = if families { writeln!(s, "  {} {}", r.family, r.stub) } else { writeln!(s) };
        }
        let _ = writeln!(
            s,
            "(input +N: buffer N bytes past a 64-byte boundary; HotSpot: stub instructions per block, docs/DESIGN.md; \
             `yes, X from 2 paths`: long calls take another loop (a vector path), X instructions per block; \
             ratio = per block / HotSpot; Zbb: saving against riscv64; 1-blk stub: one md5_implCompress call{})",
            if families {
                ", or md5_block_data_order with num = 1 on openssl rows; last column: contract family and symbol counted"
            } else {
                ""
            }
        );
    }

    fn write_static_counts(&self, s: &mut String) {
        if self.static_counts.is_empty() {
            return;
        }
        let _ = writeln!(
            s,
            "\nInstructions per block {} (rows no counter runs; the steady loop head to back-branch, over the blocks its input advance covers)",
            super::static_loop::COUNTER
        );
        let _ = writeln!(
            s,
            "{:<17} {:<9} {:<40} {:>6} {:>7} {:>9}  chosen by",
            "variant", "kernel", "loop", "instr", "blocks", "per block"
        );
        for r in &self.static_counts {
            let _ = writeln!(
                s,
                "{:<17} {:<9} {:<40} {:>6} {:>7} {:>9}  its {} instructions",
                r.variant,
                r.kernel,
                r.loop_span,
                r.loop_instructions,
                r.blocks_per_iteration,
                num(r.per_block),
                r.extension
            );
        }
    }

    fn write_mix(&self, s: &mut String) {
        if self.counts.is_empty() {
            return;
        }
        let _ = writeln!(
            s,
            "\nInstruction mix per block (aligned input; llvm-objdump classes weighted by executions: of blocks on Unicorn, of instructions under qemu)"
        );
        let _ = writeln!(
            s,
            "{:<17} {:<9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>9} {:>7}",
            "variant", "kernel", "loads", "stores", "ALU", "mul", "branch", "extension", "vector"
        );
        for r in self.counts.iter().filter(|r| r.misalign == 0) {
            let m = &r.mix_per_block;
            let _ = writeln!(
                s,
                "{:<17} {:<9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>9} {:>7}{}",
                r.variant,
                r.kernel,
                num(m.loads),
                num(m.stores),
                num(m.alu),
                num(m.multiplies),
                num(m.branches),
                num(m.extension),
                num(m.vector),
                r.vector_length.as_ref().map_or(String::new(), |vl| format!("  {vl}"))
            );
        }
    }

    fn write_predictions(&self, s: &mut String) {
        if self.predictions.is_empty() {
            return;
        }
        let _ = writeln!(
            s,
            "\nPredicted cycles per block (llvm-mca-19, steady-state loop of the multi-block stub, aligned input; a model, not a machine)"
        );
        let _ = writeln!(
            s,
            "{:<12} {:<9} {:<13} {:>6} {:>8} {:>7} {:>5} {:>8}  bottleneck",
            "variant", "kernel", "model", "instr", "cyc/blk", "cyc/B", "IPC", "RThr/blk"
        );
        for p in &self.predictions {
            let _ = writeln!(
                s,
                "{:<12} {:<9} {:<13} {:>6} {:>8} {:>7.2} {:>5.2} {:>8}  {}{}",
                p.variant,
                p.kernel,
                p.model,
                p.loop_instructions,
                num(p.cycles_per_block),
                p.cycles_per_byte,
                p.ipc,
                num(p.rthroughput_per_block),
                p.bottleneck,
                p.vector_length.as_ref().map_or(String::new(), |vl| format!("  [{vl}]"))
            );
        }
        let _ = writeln!(
            s,
            "(instr: loop instructions per iteration; cyc/blk: (cycles at 200 - at 100 iterations) / 100 per block; \
             RThr/blk: mca's resource-only bound; bottleneck: a resource busy >= 95% of the cycles, else dispatch, else the dependency chain; \
             [VLEN ...]: the vector length the blocks per iteration are read at: a vector model charges each instruction for its own registers)"
        );
    }

    fn write_board(&self, s: &mut String) {
        let Some(b) = &self.board else { return };
        let us = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0} us"));
        let pct = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}%"));
        let _ = writeln!(
            s,
            "\nMD5 16 KiB on {} at {} GHz ({} compressions), predicted for the lab's kernels:",
            b.model, b.clock_ghz, b.compressions
        );
        let _ = writeln!(
            s,
            "  RV64GC {}   +Zbb {}   Zbb saves {} of the time ({} of the instructions)",
            us(b.predicted_us_rv64gc),
            us(b.predicted_us_zbb),
            pct(b.predicted_zbb_time_saving_pct),
            pct(b.lab_zbb_instruction_saving_pct)
        );
        let _ = writeln!(s, "VisionFive 2, JMH, HotSpot's code (reference, not a check):");
        for f in &b.board {
            let _ = writeln!(s, "  {:<44} {:>4.0} us", f.code, f.us);
        }
        let _ = writeln!(
            s,
            "  Zbb saves {:.1}% of the time ({:.1}% of HotSpot's instructions); the intrinsic runs {:.0} cycles/block, IPC {:.2}",
            b.board_zbb_time_saving_pct, b.hotspot_zbb_instruction_saving_pct, b.board_cycles_per_block, b.board_ipc
        );
    }

    fn write_native(&self, s: &mut String) {
        let Some(n) = &self.native else { return };
        let _ =
            writeln!(s, "\nNative x86_64, in-process, whole digest/tag per call, CPU time ({}; {})", n.cpu, n.openssl);
        let _ = writeln!(
            s,
            "{:<9} {:>6} {:>9} {:>12} {:>14} {:>11} {:>12} {:>15} {:>13}",
            "kernel",
            "bytes",
            "lab ns/B",
            "OpenSSL ns/B",
            "(scalar) ns/B",
            "RustC. ns/B",
            "lab/OpenSSL",
            "lab/OSSL scalar",
            "lab/RustCrypto"
        );
        for r in &n.ratios {
            let ns = |imp: &str| {
                n.rows
                    .iter()
                    .find(|x| x.kernel == r.kernel && x.bytes == r.bytes && x.implementation == imp)
                    .map_or("-".to_string(), |x| format!("{:.3}", x.ns_per_byte))
            };
            let _ = writeln!(
                s,
                "{:<9} {:>6} {:>9} {:>12} {:>14} {:>11} {:>11.2}x {:>15} {:>12.2}x",
                r.kernel,
                r.bytes,
                ns("lab"),
                ns("openssl"),
                ns("openssl-scalar"),
                ns("rustcrypto"),
                r.lab_vs_openssl,
                opt(r.lab_vs_openssl_scalar, |x| format!("{x:.2}x")),
                r.lab_vs_rustcrypto
            );
        }
        for p in &n.openssl_paths {
            let _ = writeln!(s, "  {p}");
        }
        if let Some(why) = &n.openssl_scalar_skipped {
            let _ = writeln!(s, "  openssl-scalar: not timed ({why})");
        }
        if !n.poly1305_vector.is_empty() {
            let _ = writeln!(
                s,
                "\nPoly1305 vector builds of kernels/x86_64/poly1305.S (AVX2: x86-64-v3; IFMA: x86-64-v4 + IFMA), ns/B\n{:<9} {:>6} {:>8} {:>8} {:>8} {:>13} {:>10} {:>13} {:>10} {:>9}",
                "build", "bytes", "lab", "build", "OpenSSL", "OSSL path", "ns/B", "build/path", "build/OSSL", "build/lab"
            );
            for r in &n.poly1305_vector {
                let ns = |imp: &str| {
                    n.rows
                        .iter()
                        .find(|x| x.kernel == "poly1305" && x.bytes == r.bytes && x.implementation == imp)
                        .map_or("-".to_string(), |x| format!("{:.3}", x.ns_per_byte))
                };
                let _ = writeln!(
                    s,
                    "{:<9} {:>6} {:>8} {:>8} {:>8} {:>13} {:>10} {:>13} {:>9.2}x {:>8.2}x",
                    r.build,
                    r.bytes,
                    ns("lab"),
                    ns(r.build),
                    ns("openssl"),
                    r.openssl_path,
                    ns(r.openssl_path),
                    opt(r.vs_openssl_path, |x| format!("{x:.2}x")),
                    r.vs_openssl,
                    r.vs_lab
                );
            }
        }
        for why in &n.vector_skipped {
            let _ = writeln!(s, "  not timed: {why}");
        }
        let _ = writeln!(
            s,
            "(OpenSSL as users call it: one EVP_MD_CTX / EVP_MAC_CTX reused; ratios are throughput: lab bytes/s over theirs, > 1 = the lab's kernel is faster)"
        );
    }

    fn write_user_native(&self, s: &mut String) {
        if self.user_native.is_empty() {
            return;
        }
        let _ = writeln!(s, "\nYour kernels, native (through the lab's driver on this CPU), against OpenSSL");
        let _ = writeln!(
            s,
            "{:<20} {:<16} {:<30} {:>7} {:>8} {:>9} {:>13} {:>11} {:>10}  instructions",
            "variant", "workload", "symbol", "bytes", "ns/B", "MB/s", "OpenSSL MB/s", "vs OpenSSL", "instr/call"
        );
        for r in &self.user_native {
            let _ = writeln!(
                s,
                "{:<20} {:<16} {:<30} {:>7} {:>8.3} {:>9.1} {:>13} {:>11} {:>10}  {}",
                r.variant,
                r.workload,
                r.symbol,
                r.bytes,
                r.ns_per_byte,
                r.mb_per_s,
                opt(r.openssl_mb_per_s, |x| format!("{x:.1}")),
                opt(r.vs_openssl, |x| format!("{x:.2}x")),
                r.instructions_per_call.map_or("-".into(), |x| x.to_string()),
                r.counted
            );
        }
        let _ = writeln!(
            s,
            "(each call through the lab's driver: fresh callee-saved values and an input copy per call, so a lower bound on the kernel's own speed; OpenSSL: whole digests and tags through EVP, its default path)"
        );
    }

    fn write_throughput(&self, s: &mut String) {
        if self.raw_rates.is_empty() && self.throughput.is_empty() {
            return;
        }
        let _ =
            writeln!(s, "\nLab throughput (calls added to a batch, laid out, run, records decoded; median per call)");
        let head = [
            "variant",
            "backend",
            "raw instr/s",
            "workload",
            "calls/batch",
            "calls/s",
            "bytes/s",
            "instr/call",
            "vs raw",
            "loop instr/s",
            "vs loop",
        ];
        let _ = writeln!(
            s,
            "{:<12} {:<8} {:>11} {:<15} {:>11} {:>9} {:>10} {:>10} {:>7} {:>12} {:>7}",
            head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7], head[8], head[9], head[10]
        );
        // A reason not to count is said once per run of rows that share it.
        let mut said = "";
        for t in &self.throughput {
            let raw = self.raw_rates.iter().find(|r| r.variant == t.variant && r.backend == t.backend);
            let _ = writeln!(
                s,
                "{:<12} {:<8} {:>11} {:<15} {:>11} {:>9} {:>10} {:>10} {:>7} {:>12} {:>7}",
                t.variant,
                t.backend,
                raw.map_or("-".into(), |r| si(r.instructions_per_s)),
                t.workload,
                t.calls_per_batch,
                si(t.calls_per_s),
                format!("{}B", si(t.bytes_per_s)),
                t.instructions_per_call.map_or("-".into(), |x| x.to_string()),
                opt(t.overhead_ratio, |x| format!("{x:.2}")),
                opt(t.kernel_loop_instructions_per_s, si),
                opt(t.overhead_vs_kernel_loop, |x| format!("{x:.2}")),
            );
            if t.instructions_per_call.is_none() && t.counted != said {
                let _ = writeln!(s, "  {}", t.counted);
                said = &t.counted;
            }
        }
        let _ = writeln!(
            s,
            "(raw instr/s: lab_spin, 256 straight-line ALU instructions per iteration, on the same backend;\n \
             vs raw = wall time / (instructions / raw rate); loop instr/s: the same kernel in 64 KiB calls;\n \
             vs loop = wall time / (instructions / loop rate), the lab's own overhead)"
        );
        if let Some(r) = &self.lab_run {
            let _ = writeln!(
                s,
                "default `lab run`: {:.2} s ({} passed, {} failed, {} skipped)",
                r.seconds, r.passed, r.failed, r.skipped
            );
        }
    }
}

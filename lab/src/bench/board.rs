//! The `sifive-u74` predictions held beside the seeds' VisionFive 2 figures (StarFive JH7110,
//! SiFive U74 cores at 1.5 GHz; docs/DESIGN.md "Reference figures"): JMH, MD5 of 16 KiB,
//! Java 217 µs, HotSpot intrinsic 162 µs, with Zbb rotates 145 µs, with andn/orn too 137 µs.
//! Those timed HotSpot's stubs, not the lab's kernels: they are a reference, not a check.

use serde::Serialize;

use super::counts::{hotspot_figure, CountRow};
use super::mca::Prediction;
use crate::variant::{Kernel, Variant};

/// Clock of the VisionFive 2's U74 cores, GHz.
pub const CLOCK_GHZ: f64 = 1.5;
/// Message size of the JMH figures, bytes.
pub const MESSAGE_BYTES: u64 = 16384;
/// Block compressions of one 16 KiB digest: 256 message blocks and one padding block.
pub const COMPRESSIONS: u64 = MESSAGE_BYTES / 64 + 1;
/// The scheduling model of the board's cores.
pub const MODEL: &str = "sifive-u74";

/// One published board figure.
#[derive(Debug, Clone, Serialize)]
pub struct BoardFigure {
    /// What ran (`HotSpot intrinsic, Zbb rotates`).
    pub code: &'static str,
    /// JMH time for a 16 KiB MD5 digest, µs.
    pub us: f64,
}

/// The VisionFive 2 figures of the seeds (HotSpot's code).
pub const VISION_FIVE_2: [BoardFigure; 4] = [
    BoardFigure { code: "Java (no intrinsic)", us: 217.0 },
    BoardFigure { code: "HotSpot intrinsic, RV64GC", us: 162.0 },
    BoardFigure { code: "HotSpot intrinsic, Zbb rotates", us: 145.0 },
    BoardFigure { code: "HotSpot intrinsic, Zbb rotates + andn/orn", us: 137.0 },
];

/// Predicted against published, for MD5 on the U74.
#[derive(Debug, Clone, Serialize)]
pub struct BoardComparison {
    /// Always "reference, not a check": the board ran HotSpot's code.
    pub note: &'static str,
    /// The model the prediction used.
    pub model: &'static str,
    /// Clock assumed, GHz.
    pub clock_ghz: f64,
    /// Compressions per 16 KiB digest.
    pub compressions: u64,
    /// Predicted µs for the lab's RV64GC kernel (steady-state cycles × compressions / clock).
    pub predicted_us_rv64gc: Option<f64>,
    /// Predicted µs for the lab's Zbb kernel.
    pub predicted_us_zbb: Option<f64>,
    /// Predicted time saved by Zbb, percent.
    pub predicted_zbb_time_saving_pct: Option<f64>,
    /// Instructions per block saved by Zbb in the lab's kernels, percent (Unicorn counts).
    pub lab_zbb_instruction_saving_pct: Option<f64>,
    /// The board's figures.
    pub board: Vec<BoardFigure>,
    /// The board's time saving with every Zbb change (162 → 137 µs), percent.
    pub board_zbb_time_saving_pct: f64,
    /// HotSpot's instructions per block saved by Zbb (835 → 660), percent.
    pub hotspot_zbb_instruction_saving_pct: f64,
    /// Cycles per compression the board's intrinsic figure implies (162 µs × clock / compressions).
    pub board_cycles_per_block: f64,
    /// Instructions per cycle that implies for HotSpot's RV64GC stub (835 / cycles per block).
    pub board_ipc: f64,
}

fn saving(before: f64, after: f64) -> f64 {
    (1.0 - after / before) * 100.0
}

/// The comparison, or `None` when neither riscv64 variant was predicted on [`MODEL`].
pub fn vision_five_2(counts: &[CountRow], predictions: &[Prediction]) -> Option<BoardComparison> {
    let cycles = |v: &str| {
        predictions.iter().find(|p| p.variant == v && p.kernel == "md5" && p.model == MODEL).map(|p| p.cycles_per_block)
    };
    let (base, zbb) = (cycles("riscv64"), cycles("riscv64+zbb"));
    if base.is_none() && zbb.is_none() {
        return None;
    }
    let us = |c: f64| c * COMPRESSIONS as f64 / (CLOCK_GHZ * 1e3);
    let insns =
        |v: &str| counts.iter().find(|r| r.variant == v && r.kernel == "md5" && r.misalign == 0).map(|r| r.per_block);
    let hotspot = |name| Variant::by_name(name).and_then(|v| hotspot_figure(v, Kernel::Md5)).unwrap_or(f64::NAN);
    let board_cycles = VISION_FIVE_2[1].us * CLOCK_GHZ * 1e3 / COMPRESSIONS as f64;
    Some(BoardComparison {
        note: "VisionFive 2 figures timed HotSpot's stubs (JMH): a reference, not a check",
        model: MODEL,
        clock_ghz: CLOCK_GHZ,
        compressions: COMPRESSIONS,
        predicted_us_rv64gc: base.map(us),
        predicted_us_zbb: zbb.map(us),
        predicted_zbb_time_saving_pct: base.zip(zbb).map(|(b, z)| saving(b, z)),
        lab_zbb_instruction_saving_pct: insns("riscv64").zip(insns("riscv64+zbb")).map(|(b, z)| saving(b, z)),
        board: VISION_FIVE_2.to_vec(),
        board_zbb_time_saving_pct: saving(VISION_FIVE_2[1].us, VISION_FIVE_2[3].us),
        hotspot_zbb_instruction_saving_pct: saving(hotspot("riscv64"), hotspot("riscv64+zbb")),
        board_cycles_per_block: board_cycles,
        board_ipc: hotspot("riscv64") / board_cycles,
    })
}

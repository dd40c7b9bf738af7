//! `lab bench --plot FILE.svg`: one panel per kernel, one group of bars per variant: the
//! measured instructions per block (grey) and the predicted cycles per block on each CPU model
//! (coloured, the model named on the bar). Markers: HotSpot's stub instructions per block
//! (docs/DESIGN.md, counted by reading) over the instruction bar, and on the `sifive-u74` bars
//! the cycles per block the VisionFive 2 JMH figures imply for HotSpot's code (µs × 1.5 GHz /
//! 257 compressions). Drawn with `plotters`' SVG backend (text stays SVG text).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::board::{self, VISION_FIVE_2};
use super::counts::CountRow;
use super::mca::Prediction;
use super::report::BenchReport;

/// Width and height of one kernel's panel, pixels.
const PANEL: (u32, u32) = (1100, 430);

const INSN: RGBColor = RGBColor(150, 150, 150);
const MODEL_COLOURS: [RGBColor; 4] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(148, 103, 189)];

/// One bar: label, value, colour.
struct Bar {
    label: String,
    value: f64,
    colour: RGBColor,
}

/// One variant's bars and markers in one panel.
struct Group {
    variant: &'static str,
    bars: Vec<Bar>,
    /// (bar index, value, is the VisionFive 2 figure)
    markers: Vec<(usize, f64, bool)>,
}

fn groups(report: &BenchReport, kernel: &str) -> Vec<Group> {
    let rows: Vec<&CountRow> = report.counts.iter().filter(|r| r.kernel == kernel && r.misalign == 0).collect();
    rows.iter()
        .map(|r| {
            let mut bars = vec![Bar { label: "instructions".into(), value: r.per_block, colour: INSN }];
            let mut markers: Vec<(usize, f64, bool)> = r.hotspot.map(|h| (0, h, false)).into_iter().collect();
            // a vector row's predictions are those read at its own length
            let at_row = |p: &&Prediction| {
                p.vector_length.as_deref().is_none_or(|vl| vl.split(',').next() == r.vector_length.as_deref())
            };
            let preds =
                report.predictions.iter().filter(|p| p.variant == r.variant && p.kernel == kernel).filter(at_row);
            for (i, p) in preds.enumerate() {
                bars.push(Bar {
                    label: p.model.clone(),
                    value: p.cycles_per_block,
                    colour: MODEL_COLOURS[i % MODEL_COLOURS.len()],
                });
                if kernel == "md5" && p.model == board::MODEL {
                    // The board's figure for the matching build: RV64GC intrinsic, or all of Zbb.
                    let us = if r.variant == "riscv64+zbb" { VISION_FIVE_2[3].us } else { VISION_FIVE_2[1].us };
                    if r.variant.starts_with("riscv64") {
                        let cycles = us * board::CLOCK_GHZ * 1e3 / board::COMPRESSIONS as f64;
                        markers.push((bars.len() - 1, cycles, true));
                    }
                }
            }
            Group { variant: r.variant, bars, markers }
        })
        .collect()
}

/// x extent of bar `i` of `n` in the group centred at `g`.
fn bar_x(g: usize, i: usize, n: usize) -> (f64, f64) {
    let w = 0.84 / n as f64;
    let x0 = g as f64 - 0.42 + i as f64 * w;
    (x0 + 0.06 * w, x0 + 0.94 * w)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn panel(area: &Area, title: &str, groups: &[Group]) -> Result<(), Box<dyn std::error::Error>> {
    let top = groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.value).chain(g.markers.iter().map(|m| m.1)))
        .fold(1.0_f64, f64::max);
    let n = groups.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(56)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..top * 1.45)?;
    let names: Vec<&str> = groups.iter().map(|g| g.variant).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).copied().unwrap_or("").to_string()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(WHITE)
        .y_desc("per block")
        .draw()?;
    // Bar labels read upwards from the bar's foot, inside the bar, clear of the markers.
    let small = ("sans-serif", 10).into_font().transform(FontTransform::Rotate270).color(&WHITE);
    let small = small.pos(Pos::new(HPos::Left, VPos::Center));
    for (g, group) in groups.iter().enumerate() {
        for (i, b) in group.bars.iter().enumerate() {
            let (x0, x1) = bar_x(g, i, group.bars.len());
            chart.draw_series(std::iter::once(Rectangle::new([(x0, 0.0), (x1, b.value)], b.colour.filled())))?;
            let label = format!("{} {:.0}", b.label, b.value);
            chart.draw_series(std::iter::once(Text::new(label, ((x0 + x1) / 2.0, top * 0.02), small.clone())))?;
        }
        for &(i, value, board) in &group.markers {
            let (x0, x1) = bar_x(g, i, group.bars.len());
            let (colour, style) = if board { (RED, 2) } else { (BLACK, 3) };
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x0 - 0.01, value), (x1 + 0.01, value)],
                colour.stroke_width(style),
            )))?;
            chart.draw_series(std::iter::once(TriangleMarker::new(((x0 + x1) / 2.0, value), 5, colour.filled())))?;
        }
    }
    // Legend entries as empty series.
    let legend = [
        (INSN, "instructions per block (Unicorn, exact)"),
        (MODEL_COLOURS[0], "predicted cycles per block (llvm-mca-19; model named on the bar)"),
    ];
    for (c, name) in legend {
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    for (c, name) in [
        (BLACK, "HotSpot stub instructions per block (docs/DESIGN.md, by reading)"),
        (RED, "VisionFive 2, HotSpot's code: cycles per block from JMH µs at 1.5 GHz (reference)"),
    ] {
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
            .label(name)
            .legend(move |(x, y)| TriangleMarker::new((x + 6, y), 5, c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Draws `report` (counts and predictions) into the SVG file `path`.
///
/// # Errors
/// Nothing to draw, or the file cannot be written.
pub fn draw(report: &BenchReport, path: &Path) -> Result<(), String> {
    let kernels: Vec<&str> =
        ["md5", "poly1305"].into_iter().filter(|k| report.counts.iter().any(|r| r.kernel == *k)).collect();
    if kernels.is_empty() {
        return Err("no instruction counts to draw".into());
    }
    let size = (PANEL.0, PANEL.1 * kernels.len() as u32);
    let area = SVGBackend::new(path, size).into_drawing_area();
    let result = (|| -> Result<(), Box<dyn std::error::Error>> {
        area.fill(&WHITE)?;
        for (k, a) in kernels.iter().zip(area.split_evenly((kernels.len(), 1))) {
            let title = match *k {
                "md5" => "MD5: instructions and predicted cycles per 64-byte block",
                _ => "Poly1305: instructions and predicted cycles per 16-byte block",
            };
            panel(&a, title, &groups(report, k))?;
        }
        area.present()?;
        Ok(())
    })();
    result.map_err(|e| format!("{}: {e}", path.display()))
}

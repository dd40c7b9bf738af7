//! The report of a run assembled from its cells: rows in report order, filtered sets, the
//! interruption reason, then the cross-backend comparison (`compare`).

use super::{case_names, compare, CellOut, Filter, PlacedCell, RunConfig, Scan, FAIL_FAST_SKIP};
use crate::image::Image;
use crate::report::{Report, Row};
use crate::variant::Variant;
use crate::vectors::VectorSet;

/// Puts the cells' results into `report` in report order (variant, backend, set), applies
/// `--fail-fast` as a run one cell after another would (every row after the first failed one
/// is skipped; the backends of a variant are compared before the next variant's rows), and
/// compares the backends of each variant.
pub(super) fn assemble(
    cfg: &RunConfig,
    images: &[(&'static Variant, Image)],
    scans: Vec<Scan>,
    cells: &[PlacedCell],
    outs: Vec<Option<CellOut>>,
    sets: &[VectorSet],
    report: &mut Report,
) {
    let mut outs = outs.into_iter();
    let mut cells = cells.iter();
    for (index, ((variant, _), scan)) in images.iter().zip(scans).enumerate() {
        let variant: &'static Variant = variant;
        report.image_findings.extend(scan.findings);
        report.setup_errors.extend(scan.errors);
        report.warnings.extend(scan.warnings);
        let mut ran: Vec<(usize, Vec<u64>)> = Vec::new();
        let first_row = report.rows.len();
        let own = cells.clone().take_while(|c| c.cell.image == index).count();
        for (cell, out) in cells.by_ref().take(own).zip(outs.by_ref()) {
            let (kind, vl) = (cell.cell.kind, cell.cell.vector_length);
            let out = out.unwrap_or_else(|| {
                let on = super::matrix::backend_label(kind, vl);
                CellOut::OpenError(format!("{variant} on {on}: lab bug: the worker running this cell panicked"))
            });
            match out {
                CellOut::OpenError(e) => report.setup_errors.push(e),
                CellOut::Skipped(reason) => {
                    for set in sets {
                        let row = Row::skipped_named(variant, kind, set, case_names(set), reason.clone());
                        report.rows.push(row.at(vl));
                    }
                }
                CellOut::Rows(rows) => {
                    for ((row, digests), set) in rows.into_iter().zip(sets) {
                        if cfg.filter.fail_fast && report.rows.iter().any(|r| !r.failed().is_empty()) {
                            let skip = Row::skipped_named(variant, kind, set, case_names(set), FAIL_FAST_SKIP.into());
                            report.rows.push(skip.at(vl));
                            continue;
                        }
                        if let Some(d) = digests {
                            ran.push((report.rows.len(), d));
                        }
                        report.rows.push(row);
                    }
                }
            }
        }
        let partial = crate::report::partial_load_warnings(&report.rows[first_row..]);
        report.warnings.extend(partial);
        compare::compare_backends(report, &ran, variant.arch);
    }
}

/// Why work is not started or not judged after SIGINT/SIGTERM (lab/src/interrupt.rs).
pub(super) fn interrupted_reason() -> Option<String> {
    crate::interrupt::interrupted()
        .map(|s| format!("not finished: the run was interrupted by {}", crate::interrupt::name(s)))
}

/// Keeps the sets and vectors `filter` selects ([`crate::filter::select`]: names match as
/// substrings, `=NAME` exactly, `*`/`?` as globs); a `--set` or `--case` pattern that selects
/// nothing is a set-up error naming the nearest names, so a mistyped name never passes as
/// "0 failed".
pub(super) fn apply_filter(filter: &Filter, sets: Vec<VectorSet>, report: &mut Report) -> Vec<VectorSet> {
    let (sets, misses) = crate::filter::select(filter, sets);
    report.setup_errors.extend(misses);
    sets
}

//! vectors/poly1305/rvv-edges.json bites on the VLEN-wide riscv64 RVV path of the lab's own
//! Poly1305 kernel (kernels/riscv64/poly1305-rvv.inc, copied into a temporary kernels folder and
//! run with `lab run --kernels-dir` on qemu at VLEN 128, 256, 512 and 1024): the clean kernel
//! passes every entry at every VLEN, and one-spot bugs planted in the new code fail the entries
//! aimed at them at every VLEN while the entries below that VLEN's crossover still pass.

use std::collections::BTreeSet;

use crate::vector_edges_neon_rvv::{kernels, run_set, set_entries};

const INC: &str = "poly1305-rvv.inc";

/// `lab run` of the kernels in `dir` on riscv64+v over rvv-edges.json: (VLEN in bits, cases
/// passed, entries with a failed case) per row, one row per VLEN.
fn run(dir: &std::path::Path) -> Vec<(u32, u64, BTreeSet<String>)> {
    let rows = run_set(dir, "=riscv64+v", "rvv-edges");
    assert_eq!(rows.len(), 4, "VLEN 128, 256, 512, 1024: {rows:?}");
    rows.into_iter()
        .map(|(label, passed, failed)| {
            let bits = label
                .split("\"bits\":")
                .nth(1)
                .and_then(|b| b.chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok());
            (bits.unwrap_or_else(|| panic!("no VLEN in {label}")), passed, failed)
        })
        .collect()
}

/// Entries of rvv-edges.json for `vlen` whose name contains `part`.
fn aimed(vlen: u32, part: &str) -> BTreeSet<String> {
    let prefix = format!("rvv VLEN {vlen} ");
    set_entries("rvv-edges", |n, _| n.starts_with(&prefix) && n.contains(part))
}

/// Entries that take the scalar loop alone at `vlen` (below its crossover).
fn scalar_at(vlen: u32) -> BTreeSet<String> {
    let note = format!("at VLEN {vlen} ({} lanes) below the RVV path's crossover", vlen / 32);
    set_entries("rvv-edges", |_, c| c.contains(&note))
}

#[test]
fn the_rvv_path_passes_every_rvv_edge_at_every_vlen() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (vlen, passed, failed) in run(&kernels(dir.path(), "riscv64", "", "", "")) {
        // 126 entries, each a guarded case, its misaligned twin and an offset case.
        assert_eq!((passed, failed), (378, BTreeSet::new()), "VLEN {vlen}");
    }
}

#[test]
fn a_tail_mask_of_8l_bytes_fails_exactly_the_tails_of_half_a_group_or_more() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The bytes left for the scalar loop masked with 8 L - 1 instead of 16 L - 1: a tail of
    // L/2 .. L-1 blocks loses L/2 of them, a shorter tail is right.
    let k = kernels(
        dir.path(),
        "riscv64",
        INC,
        "\tslli\tt2, t2, 4\n\taddi\tt2, t2, -1",
        "\tslli\tt2, t2, 3\n\taddi\tt2, t2, -1",
    );
    for (vlen, _, failed) in run(&k) {
        // L = VLEN / 16 lanes (e32/m2); every tail length up to 15 blocks, twelve of 1 .. L-1 above.
        let lanes = vlen as usize / 16;
        let long: BTreeSet<_> = (lanes / 2..lanes).flat_map(|t| aimed(vlen, &format!(", then {t} block(s)"))).collect();
        let short: BTreeSet<_> = (1..lanes / 2).flat_map(|t| aimed(vlen, &format!(", then {t} block(s)"))).collect();
        let want = if lanes <= 16 { (lanes - lanes / 2, lanes / 2 - 1) } else { (6, 6) };
        assert_eq!((long.len(), short.len()), want, "VLEN {vlen}");
        assert!(long.is_subset(&failed), "VLEN {vlen}: {:?}", long.difference(&failed).collect::<Vec<_>>());
        assert!(short.is_disjoint(&failed), "VLEN {vlen}: {:?}", short.intersection(&failed).collect::<Vec<_>>());
        assert!(scalar_at(vlen).is_disjoint(&failed), "VLEN {vlen}: {failed:#?}");
    }
}

#[test]
fn a_final_carry_chain_without_its_last_carry_fails_the_r1_products_that_store_2_26() {
    let dir = tempfile::tempdir().expect("temp dir");
    let k = kernels(dir.path(), "riscv64", INC, "\tRVV_CARRY1 a7, t0\n\tld\ta2, RVV_ACC(sp)", "\tld\ta2, RVV_ACC(sp)");
    for (vlen, _, failed) in run(&k) {
        // Limb 3 left at 2^26 where the last product makes the result 2^130 or 2^130 + 4.
        let want = aimed(vlen, "limb 4 = 2^26)");
        assert_eq!(want.len(), 2, "VLEN {vlen}: {want:#?}");
        assert!(want.is_subset(&failed), "VLEN {vlen}: {:?}", want.difference(&failed).collect::<Vec<_>>());
        assert!(scalar_at(vlen).is_disjoint(&failed), "VLEN {vlen}: {failed:#?}");
    }
}

#[test]
fn a_loop_reduction_without_its_carry_from_x0_to_x1_fails_the_lazy_entries_at_every_vlen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let k = kernels(dir.path(), "riscv64", INC, "\tvadd.vv\tX1, X1, v30\t\t/* x1 = d1 mod 2^26 + (x0 >> 26) */\n", "");
    for (vlen, _, failed) in run(&k) {
        // x0 = d0 mod 2^26 + 5 c4 (up to 2^31.8) loses its bits from 2^26 up.
        let want = aimed(vlen, "lazy reduction: a limb");
        assert_eq!(want.len(), 4, "VLEN {vlen}: {want:#?}");
        assert!(want.is_subset(&failed), "VLEN {vlen}: {:?}", want.difference(&failed).collect::<Vec<_>>());
        assert!(scalar_at(vlen).is_disjoint(&failed), "VLEN {vlen}: {failed:#?}");
    }
}

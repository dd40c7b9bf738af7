//! vectors/poly1305/vector-edges.json bites on the aarch64 NEON path of the lab's own Poly1305
//! kernel (kernels/aarch64/poly1305-neon.inc, copied into a temporary kernels folder and run with
//! `lab run --kernels-dir`): the clean kernel passes every entry on Unicorn and qemu, and a
//! carry bug planted in the NEON path fails the entries aimed at it while the entries below its
//! crossover, which take the scalar loop, still pass.  The helpers serve tests/rvv_edges.rs too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// kernels/`arch`/ copied to `dir/kernels/arch/`, `from` replaced by `to` in `file` (exactly
/// once; nothing when `from` is empty); returns `dir/kernels`.
pub(crate) fn kernels(dir: &Path, arch: &str, file: &str, from: &str, to: &str) -> PathBuf {
    let out = dir.join("kernels");
    std::fs::create_dir_all(out.join(arch)).expect("mkdir");
    for e in std::fs::read_dir(repo().join("kernels").join(arch)).expect("kernels folder") {
        let path = e.expect("entry").path();
        let name = path.file_name().expect("name").to_string_lossy().to_string();
        let mut text = std::fs::read_to_string(&path).expect("kernel source");
        if name == file && !from.is_empty() {
            assert_eq!(text.matches(from).count(), 1, "{from:?} must occur once in {name}");
            text = text.replacen(from, to, 1);
        }
        std::fs::write(out.join(arch).join(&name), text).expect("write source");
    }
    out
}

/// `lab run --format json` of the kernels in `dir` on `variant` over vector-edges.json alone:
/// every row's (variant, backend and vector length, cases passed, the names of the entries with a
/// failed case).
fn run(dir: &Path, variant: &str) -> Vec<(String, u64, BTreeSet<String>)> {
    run_set(dir, variant, "vector-edges")
}

/// [`run`] over vectors/poly1305/`set`.json alone.
pub(crate) fn run_set(dir: &Path, variant: &str, set: &str) -> Vec<(String, u64, BTreeSet<String>)> {
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .env("KERNEL_LAB_CACHE", kernel_lab::paths::cache_dir())
        .args(["run", "--seed", "29", "--format", "json", "--kernel", "poly1305", "--no-bundled", "--variant", variant])
        .arg("--kernels-dir")
        .arg(dir)
        .arg("--vectors")
        .arg(repo().join(format!("vectors/poly1305/{set}.json")))
        .output()
        .expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout);
    let json: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&out.stderr)));
    let rows = json["rows"].as_array().expect("rows");
    rows.iter()
        .filter(|row| row["set"] == set)
        .map(|row| {
            let mut failed = BTreeSet::new();
            for c in row["cases"].as_array().expect("cases") {
                if c["outcome"] != "passed" {
                    // Case names are the entry's name with " [guarded]", " [guarded, misaligned]" or " @+N".
                    let name = c["name"].as_str().expect("name");
                    failed.insert(
                        name.split(" [").next().and_then(|n| n.split(" @+").next()).unwrap_or(name).to_string(),
                    );
                }
            }
            let label = format!("{} on {} {}", row["variant"], row["backend"], row["vector_length"]);
            (label, row["passed"].as_u64().expect("passed"), failed)
        })
        .collect()
}

/// Entry names of vector-edges.json whose name or comment satisfies `pick`.
fn entries(pick: impl Fn(&str, &str) -> bool) -> BTreeSet<String> {
    set_entries("vector-edges", pick)
}

/// [`entries`] of vectors/poly1305/`set`.json.
pub(crate) fn set_entries(set: &str, pick: impl Fn(&str, &str) -> bool) -> BTreeSet<String> {
    let path = repo().join(format!("vectors/poly1305/{set}.json"));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .expect("JSON");
    doc["vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .filter(|v| pick(v["name"].as_str().unwrap_or(""), v["comment"].as_str().unwrap_or("")))
        .map(|v| v["name"].as_str().expect("name").to_string())
        .collect()
}

#[test]
fn the_neon_path_passes_every_vector_edge_on_unicorn_and_qemu() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rows = run(&kernels(dir.path(), "aarch64", "", "", ""), "=aarch64");
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (row, passed, failed) in rows {
        // 131 entries, each a guarded case, its misaligned twin and an offset case.
        assert_eq!((passed, failed), (393, BTreeSet::new()), "{row}");
    }
}

#[test]
fn a_neon_final_carry_chain_without_its_last_carry_fails_the_neon_lane_sums_that_store_2_26() {
    let dir = tempfile::tempdir().expect("temp dir");
    let k = kernels(dir.path(), "aarch64", "poly1305-neon.inc", "    POLY_CARRY x13, x14\n    stp", "    stp");
    // Limb 3 left at 2^26 where the lane sum makes the result 2^130 or 2^130 + 4.
    let aimed = entries(|n, c| n.starts_with("neon r = 1") && c.contains("limb 4 stored: 0x4000000"));
    assert_eq!(aimed.len(), 4, "{aimed:#?}");
    let scalar = entries(|_, c| c.contains("below the NEON path's 320-byte crossover"));
    assert_eq!(scalar.len(), 2, "{scalar:#?}");
    for (row, _, failed) in run(&k, "=aarch64") {
        assert!(aimed.is_subset(&failed), "{row}: {:?}", aimed.difference(&failed).collect::<Vec<_>>());
        assert!(scalar.is_disjoint(&failed), "{row}: {failed:#?}");
    }
}

//! vectors/poly1305/vector-edges.json bites on the x86_64 vector paths: kernels/x86_64/poly1305.S
//! (with its vector paths, poly1305-avx2.inc and poly1305-ifma.inc) assembled at x86-64-v3 (`__AVX2__`) passes every entry on qemu (and natively on an AVX2
//! host), while mutations of its vector code fail the entries aimed at them: a final store
//! that masks limb 4 to 26 bits fails exactly the entries whose stored limb 4 is 2^26, and a
//! lazy reduction without its last carry (limb 0 up to 2^35.4, truncated by vpmuludq's 32-bit
//! inputs) fails every largest-magnitude entry; a 26-bit mask after the lazy reduction's last
//! 0->1 (or 3->4) carry fails exactly the entries whose model has limb 1 (or 4) reach 2^26 after
//! a lazy reduction (aimed at each chain's last one); a lazy fold of 2^130 as 4 fails every
//! r = 1 entry whose lanes fold. Entries below the crossover take the scalar loop and pass under
//! every mutation. Assembled with AVX-512 IFMA (`__AVX512IFMA__`), the
//! same file passes natively on a host with IFMA (qemu 7.2 has no AVX-512), and a carry pass
//! that folds 2^130 as 4 instead of 5 fails every largest-magnitude entry the IFMA path takes,
//! and a mask after any of its three parallel carries fails exactly the entries whose IFMA model
//! has that limb reach its width (aimed at each chain's last carry pass).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The ISA the AVX2 object declares: qemu then runs a CPU with XSAVE, AVX and AVX2.
const ISA: &str = "x86-64+avx+avx2+xsave";
/// The ISA of the AVX-512 IFMA build (native only).
const IFMA_ISA: &str = "x86-64+avx+avx2+xsave+avx512f+avx512vl+avx512ifma";
/// clang's flags for the two builds.
const AVX2_FLAGS: &[&str] = &["-march=x86-64-v3"];
const IFMA_FLAGS: &[&str] = &["-march=x86-64-v4", "-mavx512ifma"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn edges() -> PathBuf {
    repo().join("vectors/poly1305/vector-edges.json")
}

/// kernels/x86_64/poly1305.S (with the vector paths it includes, poly1305-avx2.inc and
/// poly1305-ifma.inc) copied to `dir/name/`, `from` replaced by `to` in `file` (exactly once;
/// nothing when `from` is empty), assembled with clang `flags` into `dir/name.o`.
fn assemble(dir: &Path, name: &str, flags: &[&str], file: &str, from: &str, to: &str) -> PathBuf {
    let src = dir.join(name);
    std::fs::create_dir_all(&src).expect("mkdir");
    for f in ["poly1305.S", "poly1305-avx2.inc", "poly1305-ifma.inc"] {
        let text = std::fs::read_to_string(repo().join("kernels/x86_64").join(f)).expect("kernel source");
        let text = if f == file && !from.is_empty() {
            assert_eq!(text.matches(from).count(), 1, "{from:?} must occur once in {f}");
            text.replacen(from, to, 1)
        } else {
            text
        };
        std::fs::write(src.join(f), text).expect("write source");
    }
    let o = dir.join(format!("{name}.o"));
    let out = Command::new("clang")
        .arg("--target=x86_64-linux-gnu")
        .args(flags)
        .args(["-c", "-o"])
        .arg(&o)
        .arg(src.join("poly1305.S"))
        .output()
        .expect("clang (Debian package `clang`)");
    assert!(out.status.success(), "clang: {}", String::from_utf8_lossy(&out.stderr));
    o
}

/// `lab run --format json` of the object, declared `isa`, on `backend` over vector-edges.json
/// alone: its one row.
fn run_row(object: &Path, isa: &str, backend: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .env("KERNEL_LAB_CACHE", kernel_lab::paths::cache_dir())
        .args(["run", "--seed", "29", "--format", "json", "--kernel", "poly1305", "--no-bundled", "--isa", isa])
        .args(["--backend", backend, "--object"])
        .arg(object)
        .arg("--vectors")
        .arg(edges())
        .output()
        .expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout);
    let json: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&out.stderr)));
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{text}");
    rows[0].clone()
}

/// [`run_row`]'s (cases passed, the names of the entries with a failed case).
fn run(object: &Path, isa: &str, backend: &str) -> (u64, BTreeSet<String>) {
    let row = run_row(object, isa, backend);
    assert_eq!(row["set"], "vector-edges", "{row}");
    let mut failed = BTreeSet::new();
    for c in row["cases"].as_array().expect("cases") {
        if c["outcome"] != "passed" {
            // Case names are the entry's name with " [guarded]", " [guarded, misaligned]" or " @+N".
            let name = c["name"].as_str().expect("name");
            failed.insert(name.split(" [").next().and_then(|n| n.split(" @+").next()).unwrap_or(name).to_string());
        }
    }
    (row["passed"].as_u64().expect("passed"), failed)
}

/// Entry names of vector-edges.json whose `pick` holds on the entry.
fn entries(pick: impl Fn(&Value) -> bool) -> BTreeSet<String> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(edges()).expect("vector-edges.json")).expect("JSON");
    doc["vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .filter(|v| pick(v))
        .map(|v| v["name"].as_str().expect("name").to_string())
        .collect()
}

fn backends() -> Vec<&'static str> {
    let mut b = vec!["qemu"];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        b.push("native");
    }
    b
}

#[test]
fn the_avx2_path_passes_every_vector_edge() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clean = assemble(dir.path(), "avx2", AVX2_FLAGS, "", "", "");
    for b in backends() {
        // 131 entries, each a guarded case, its misaligned twin and an offset case.
        assert_eq!(run(&clean, ISA, b), (393, BTreeSet::new()), "{b}");
    }
}

#[test]
fn a_store_that_masks_limb_4_fails_exactly_the_entries_that_store_2_26() {
    let dir = tempfile::tempdir().expect("temp dir");
    let masked = assemble(
        dir.path(),
        "masked",
        AVX2_FLAGS,
        "poly1305-avx2.inc",
        "        mov     [rdx + 32], r12\n",
        "        and     r12, M26\n        mov     [rdx + 32], r12\n",
    );
    let want = entries(|v| v["comment"].as_str().is_some_and(|c| c.contains("stored limb 4 = 0x4000000")));
    // r = 1 eight-lane sums 2^131 - 5, 2^131 - 4 and 2^131 - 1, each with 24 and 25 blocks, and
    // the NEON entries whose lanes, as the two AVX2 chains sum them, store 2^26 there.
    assert_eq!(want.len(), 12, "{want:#?}");
    for b in backends() {
        assert_eq!(run(&masked, ISA, b), (393 - 36, want.clone()), "{b}");
    }
}

#[test]
fn a_lazy_reduction_without_its_last_carry_fails_every_largest_magnitude_entry() {
    let dir = tempfile::tempdir().expect("temp dir");
    let short = assemble(
        dir.path(),
        "short",
        AVX2_FLAGS,
        "poly1305-avx2.inc",
        "        vpsrlq      ymm10, ymm5, 26\n        vpand       ymm0, ymm5, ymm15\n        vpaddq      ymm1, ymm1, ymm10                   /* d0 -> d1 */\n",
        "        vmovdqa     ymm0, ymm5\n",
    );
    let largest = entries(|v| v["name"].as_str().is_some_and(|n| n.starts_with("largest magnitudes")));
    let scalar = entries(|v| v["comment"].as_str().is_some_and(|c| c.contains("the scalar loop alone")));
    assert_eq!((largest.len(), scalar.len()), (15, 3));
    for b in backends() {
        let (_, failed) = run(&short, ISA, b);
        assert!(largest.is_subset(&failed), "{b}: {:?}", largest.difference(&failed).collect::<Vec<_>>());
        assert!(scalar.is_disjoint(&failed), "{b}: {failed:#?}");
    }
}

/// Whether this host runs the IFMA build (AVX-512 F, VL and IFMA).
fn ifma_host() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512ifma") && std::arch::is_x86_feature_detected!("avx512vl");
    #[allow(unreachable_code)]
    false
}

#[test]
fn the_ifma_path_passes_every_vector_edge_and_a_fold_by_4_fails_the_largest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clean = assemble(dir.path(), "ifma", IFMA_FLAGS, "", "", "");
    if !ifma_host() {
        // Nothing can run it here: the lab must say so rather than pass it.
        let row = run_row(&clean, IFMA_ISA, "native");
        assert_eq!((row["passed"].as_u64(), row["skipped"].as_u64()), (Some(0), Some(393)), "{row}");
        assert!(row["skip_reason"].as_str().is_some_and(|w| w.contains("avx512")), "{row}");
        return;
    }
    assert_eq!(run(&clean, IFMA_ISA, "native"), (393, BTreeSet::new()));
    let fold4 = assemble(
        dir.path(),
        "fold4",
        IFMA_FLAGS,
        "poly1305-ifma.inc",
        "        vpandq      \\H0, \\L0, zmm26\n        vpaddq      \\H0, \\H0, zmm25\n",
        "        vpandq      \\H0, \\L0, zmm26\n",
    );
    // The largest-magnitude entries whose length the IFMA path takes (kernels/x86_64/poly1305.S:
    // POLY_IFMA_MIN, from 256 bytes): all of them (16, 17, 20, 31 and 64 blocks).
    let largest = entries(|v| {
        let bytes = v["msg_hex"].as_str().map_or(0, |h| h.len() / 2);
        v["name"].as_str().is_some_and(|n| n.starts_with("largest magnitudes")) && bytes >= 256
    });
    assert_eq!(largest.len(), 15, "{largest:#?}");
    let (_, failed) = run(&fold4, IFMA_ISA, "native");
    assert!(largest.is_subset(&failed), "{:?}", largest.difference(&failed).collect::<Vec<_>>());
    let scalar = entries(|v| v["comment"].as_str().is_some_and(|c| c.contains("the scalar loop alone")));
    assert!(scalar.is_disjoint(&failed), "{failed:#?}");
}

/// POLY_VCARRY2's last 0->1 and 3->4 carries (kernels/x86_64/poly1305-avx2.inc), each with a
/// 26-bit mask planted after it (the bug of code that takes a lazily reduced limb for < 2^26):
/// the limb it leaves, and the phrase the generator writes into the comment of every entry
/// whose model has that limb reach 2^26 after some lazy reduction.
const LAST_CARRIES: [(&str, &str, &str); 2] = [
    (
        "        vpaddq      ymm1, ymm1, ymm10                   /* d0 -> d1 */\n",
        "        vpand       ymm1, ymm1, ymm15\n",
        "limb 1 reaches 2^26 after a lazy reduction",
    ),
    (
        "        vpaddq      ymm4, ymm4, ymm10                   /* d3 -> d4 */\n",
        "        vpand       ymm4, ymm4, ymm15\n",
        "limb 4 reaches 2^26 after a lazy reduction",
    ),
];

#[test]
fn a_mask_after_either_last_lazy_carry_fails_exactly_the_entries_aimed_at_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, (carry, mask, phrase)) in LAST_CARRIES.iter().enumerate() {
        let masked = assemble(
            dir.path(),
            &format!("mask{i}"),
            AVX2_FLAGS,
            "poly1305-avx2.inc",
            carry,
            &format!("{carry}{mask}"),
        );
        let want = entries(|v| v["comment"].as_str().is_some_and(|c| c.contains(phrase)));
        // Twelve entries aimed at chain A's or chain B's last lazy reduction, four r = 1 entries
        // whose first lazy reduction leaves limbs 1 and 4 at 2^26; no other entry gets there.
        assert_eq!(want.len(), 16, "{phrase}: {want:#?}");
        assert!(want.iter().any(|n| n.contains("chain A's last")) && want.iter().any(|n| n.contains("chain B's last")));
        for b in backends() {
            assert_eq!(run(&masked, ISA, b), (393 - 3 * 16, want.clone()), "{phrase} on {b}");
        }
    }
}

#[test]
fn a_lazy_fold_by_4_fails_every_r_1_entry_whose_lanes_fold() {
    let dir = tempfile::tempdir().expect("temp dir");
    // POLY_VCARRY2's 4->0 carry adds c and 4c (times 5, 2^130 = 5 mod p); without the first add
    // it folds 2^130 as 4.
    let fold4 = assemble(
        dir.path(),
        "vfold4",
        AVX2_FLAGS,
        "poly1305-avx2.inc",
        "        vpaddq      ymm5, ymm5, ymm11\n        vpsllq      ymm11, ymm11, 2\n",
        "        vpsllq      ymm11, ymm11, 2\n",
    );
    // r = 1: the eight-lane sums (every lane folds once in its last lazy reduction, 18 entries)
    // and the lane left as (3, 2^26, 0, 0, 2^26) after a fold (4 entries).
    let folding = entries(|v| {
        v["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("r = 1, eight-lane sum") || n.contains("leaves its first lazy carry"))
    });
    assert_eq!(folding.len(), 22, "{folding:#?}");
    let scalar = entries(|v| v["comment"].as_str().is_some_and(|c| c.contains("the scalar loop alone")));
    for b in backends() {
        let (_, failed) = run(&fold4, ISA, b);
        assert!(folding.is_subset(&failed), "{b}: {:?}", folding.difference(&failed).collect::<Vec<_>>());
        assert!(scalar.is_disjoint(&failed), "{b}: {failed:#?}");
    }
}

/// POLY_CARRY8's three parallel carries (kernels/x86_64/poly1305-ifma.inc), each followed by a
/// planted mask to its limb's width, and the phrase the generator writes into the comment of
/// every entry whose IFMA model has that limb reach its width after a carry pass, and how many
/// entries say so: the eight aimed at chain A's or chain B's last carry pass, and for h0 and h2
/// the r = 1 entry of 24 blocks whose lanes the IFMA path also carries to the limit.
const IFMA_CARRIES: [(&str, &str, &str, usize); 3] = [
    (
        "        vpaddq      \\H0, \\H0, zmm25                     /* h0 = t0 & M44 + 5 (t2 >> 42) */\n",
        "        vpandq      \\H0, \\H0, zmm26\n",
        "h0 reaches 2^44 after a carry pass",
        9,
    ),
    (
        "        vpaddq      \\H1, \\H1, zmm9                      /* h1 = t1 & M44 + (t0 >> 44) */\n",
        "        vpandq      \\H1, \\H1, zmm26\n",
        "h1 reaches 2^44 after a carry pass",
        8,
    ),
    (
        "        vpaddq      \\H2, \\H2, zmm24                     /* h2 = t2 & M42 + (t1 >> 44) */\n",
        "        vpandq      \\H2, \\H2, zmm27\n",
        "h2 reaches 2^42 after a carry pass",
        9,
    ),
];

#[test]
fn an_ifma_mask_after_any_carry_fails_exactly_the_entries_aimed_at_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, (carry, mask, phrase, count)) in IFMA_CARRIES.iter().enumerate() {
        let masked = assemble(
            dir.path(),
            &format!("imask{i}"),
            IFMA_FLAGS,
            "poly1305-ifma.inc",
            carry,
            &format!("{carry}{mask}"),
        );
        if !ifma_host() {
            // Nothing can run it here: the lab must say so rather than pass it.
            let row = run_row(&masked, IFMA_ISA, "native");
            assert_eq!((row["passed"].as_u64(), row["skipped"].as_u64()), (Some(0), Some(393)), "{row}");
            continue;
        }
        let want = entries(|v| v["comment"].as_str().is_some_and(|c| c.contains(phrase)));
        assert_eq!(want.len(), *count, "{phrase}: {want:#?}");
        assert!(want.iter().any(|n| n.contains("chain A's last")) && want.iter().any(|n| n.contains("chain B's last")));
        let (passed, failed) = run(&masked, IFMA_ISA, "native");
        assert_eq!((passed, &failed), (393 - 3 * want.len() as u64, &want), "{phrase}");
    }
}

//! `lab bench`'s measurements hold: counts are identical across runs, the dynamic per-block
//! count and mix equal a static count of the kernel's block loop in the disassembly (every
//! variant, Zbb on Unicorn included), the spin loop counts what its source says, the native
//! implementations agree, and the CLI prints every row.

use std::process::Command;

use kernel_lab::bench::counts::{self, CountRow};
use kernel_lab::bench::mix::{Disassembly, InsnClass, Mix};
use kernel_lab::bench::workload::Workload;
use kernel_lab::bench::{native, throughput};
use kernel_lab::toolchain;
use kernel_lab::variant::{Kernel, VARIANTS};

use crate::common::{build, counted_variants, SEED};

fn count_all() -> Vec<CountRow> {
    let mut rows = Vec::new();
    for v in counted_variants() {
        let image = build(v);
        let dis = Disassembly::of(&image).unwrap();
        for k in Kernel::ALL {
            for m in counts::MISALIGNS {
                rows.push(counts::count(&image, v, &dis, k, m, SEED).unwrap_or_else(|e| panic!("{v} {k} +{m}: {e}")));
            }
        }
    }
    counts::add_zbb_savings(&mut rows);
    rows
}

#[test]
fn counts_are_identical_across_two_runs_and_linear_in_blocks() {
    let (first, second) = (count_all(), count_all());
    assert_eq!(first.len(), counted_variants().len() * 2 * counts::MISALIGNS.len());
    assert_eq!(first, second);
    for r in &first {
        assert!(
            r.repeatable && r.explained(),
            "{} {} +{}: repeatable {}, linear {}",
            r.variant,
            r.kernel,
            r.misalign,
            r.repeatable,
            r.linear
        );
        // The aarch64 Poly1305 kernel alone has two paths: 1 and 16 blocks (256 bytes) run its
        // scalar loop, 256 blocks its NEON loop (from 320 bytes), fewer instructions per block.
        let two_paths = (r.variant, r.kernel) == ("aarch64", "poly1305");
        assert_eq!(r.linear, !two_paths, "{} {}", r.variant, r.kernel);
        if two_paths {
            let (c1, c16) = (r.per_call[0].1, r.per_call[1].1);
            assert_eq!((c16 - c1) % 15, 0, "{r:?}: the short path is linear");
            let long = r.steady_per_block.expect("the long path's loop");
            assert!(long < ((c16 - c1) / 15) as f64, "{r:?}: the long path costs less per block");
            continue;
        }
        assert_eq!(r.per_block.fract(), 0.0, "{} {}: per-block cost must be a whole number", r.variant, r.kernel);
        assert!(
            (r.mix_per_block.total() - r.per_block).abs() < 1e-9,
            "{} {}: mix does not add up",
            r.variant,
            r.kernel
        );
    }
    let zbb_md5 = first.iter().find(|r| r.variant == "riscv64+zbb" && r.kernel == "md5" && r.misalign == 0).unwrap();
    assert!(zbb_md5.zbb_saving_pct.unwrap() > 0.0 && zbb_md5.mix_per_block.extension > 0.0, "{zbb_md5:?}");
}

/// The first backward conditional branch of the kernel's code and its target: the block loop.
/// Its instructions, counted statically, are what one block costs on 64-byte-aligned input.
fn static_loop(dis: &Disassembly, start: u64, end: u64) -> (f64, Mix) {
    let insns: Vec<(u64, String, InsnClass)> = dis.range(start, end).map(|(a, t, c)| (a, t.to_string(), c)).collect();
    let (branch, target) = insns
        .iter()
        .filter(|(_, t, c)| *c == InsnClass::Branch && !t.starts_with("j ") && !t.starts_with("jmp"))
        .find_map(|(a, t, _)| {
            let hex = t.split_whitespace().find_map(|w| w.trim_end_matches(',').strip_prefix("0x"))?;
            let target = u64::from_str_radix(hex, 16).ok()?;
            (target < *a && target >= start).then_some((*a, target))
        })
        .expect("a backward branch");
    let mut mix = Mix::default();
    let mut n = 0.0;
    for (_, _, c) in insns.iter().filter(|(a, _, _)| (target..=branch).contains(a)) {
        n += 1.0;
        mix.add(*c, 1.0);
    }
    (n, mix)
}

#[test]
fn per_block_counts_equal_the_static_loop_of_every_kernel() {
    for v in counted_variants() {
        let image = build(v);
        let dis = Disassembly::of(&image).unwrap();
        for k in Kernel::ALL {
            let (start, end) = Workload::code_range(k, &image).unwrap();
            let (n, mix) = static_loop(&dis, start, end);
            let row = counts::count(&image, v, &dis, k, 0, SEED).unwrap();
            if row.steady_per_block.is_some() {
                // Two paths (the aarch64 Poly1305 NEON loop from 320 bytes): the first loop is
                // the scalar one, which the 1- and 16-block calls run.
                let (c1, c16) = (row.per_call[0].1, row.per_call[1].1);
                assert_eq!((c16 - c1) as f64 / 15.0, n, "{v} {k}: dynamic per block of short calls vs static loop");
                continue;
            }
            assert_eq!(row.per_block, n, "{v} {k}: dynamic per block vs static loop");
            assert_eq!(row.mix_per_block, mix, "{v} {k}: dynamic mix vs static loop");
        }
    }
}

#[test]
fn spin_loop_counts_256_alu_instructions_and_its_loop_control() {
    // Every row, vector rows too: the driver's vector entry state is jumped over on Unicorn.
    for v in VARIANTS.iter().filter(|v| !v.zbb) {
        let image = throughput::spin_image(&toolchain::default_build(), v).unwrap();
        let (_, per_iteration) = throughput::spin_instructions(&image, v).unwrap();
        assert_eq!(per_iteration, 258, "{v}: spin.S has 256 ALU instructions, a decrement and a branch");
    }
}

#[test]
fn native_implementations_agree_or_say_why_not() {
    match native::unavailable() {
        Some(why) => assert!(!why.is_empty()),
        None => {
            let r = native::bench(1).unwrap();
            // lab-avx2 and lab-ifma: timed on a CPU with the ISA, else named as not timed.
            let mut builds = Vec::new();
            #[cfg(target_arch = "x86_64")]
            for (name, has) in [
                ("lab-avx2", std::arch::is_x86_feature_detected!("avx2")),
                ("lab-ifma", std::arch::is_x86_feature_detected!("avx512ifma")),
            ] {
                let timed = r.poly1305_vector.iter().filter(|x| x.build == name).count();
                assert_eq!(timed, if has { native::SIZES.len() } else { 0 }, "{name}: {:?}", r.vector_skipped);
                assert_eq!(r.vector_skipped.iter().any(|w| w.starts_with(name)), !has, "{:?}", r.vector_skipped);
                if has {
                    builds.push(name);
                }
            }
            // md5 and poly1305 (lab, openssl, rustcrypto) and the vector builds at every size;
            // the OpenSSL children run only under `lab` itself.
            assert_eq!(r.rows.len(), native::SIZES.len() * (2 * 3 + builds.len()));
            assert!(r.rows.iter().all(|x| x.ns_per_byte > 0.0), "{:?}", r.rows);
        }
    }
}

#[test]
fn lab_bench_json_has_every_count_row_and_a_zbb_row_on_unicorn() {
    let out = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(["bench", "--no-native", "--no-throughput", "--no-predict", "--format", "json"])
        .output()
        .expect("run lab bench");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = json["counts"].as_array().expect("counts");
    let skipped = json["skipped"].to_string();
    // Rows Unicorn cannot run are counted under qemu at each vector length (RVV VLEN, SVE VL),
    // or, where qemu cannot run them either (AVX-512), listed as not counted with both reasons.
    for v in VARIANTS.iter().filter(|v| !counted_variants().contains(v)) {
        if kernel_lab::backend::BackendKind::Qemu.supports(v).is_err() {
            assert!(skipped.contains(&format!("counting on {v}: not counted: Unicorn: ")), "{v}: {skipped}");
            continue;
        }
        for vl in kernel_lab::bench::counter::vector_lengths(v) {
            let vl = vl.map(|vl| format!("{} {}", vl.spec.name, vl.bits));
            for k in Kernel::ALL.iter().filter(|&&k| kernel_lab::run::not_provided(v, k).is_none()) {
                let row = rows.iter().find(|r| {
                    r["variant"] == v.name
                        && r["kernel"] == k.name()
                        && r["misalign"] == 0
                        && r["vector_length"] == serde_json::Value::from(vl.as_deref())
                });
                let row = row.unwrap_or_else(|| panic!("no row for {v} {k} {vl:?}"));
                assert_eq!(row["counter"], kernel_lab::bench::counter::QEMU, "{row}");
                assert!(row["per_block"].as_f64().unwrap() > 0.0 && row["repeatable"] == true, "{row}");
            }
        }
    }
    for v in counted_variants() {
        for k in Kernel::ALL {
            let row = rows.iter().find(|r| r["variant"] == v.name && r["kernel"] == k.name() && r["misalign"] == 0);
            let row = row.unwrap_or_else(|| panic!("no row for {v} {k}"));
            assert!(row["per_block"].as_f64().unwrap() > 0.0, "{row}");
            assert!(row["hotspot"].as_f64().is_some(), "{row}");
        }
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_lab")).args(["bench", "--runs", "0"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "--runs 0 is a usage error");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--runs"), "the error names the option");
}

/// The kernels' unaligned paths (riscv64 funnel shifts, byte edges) at every placement within
/// 16 bytes and 1 to 3 blocks per call, on every backend, against the reference.
#[test]
fn every_input_placement_computes_the_reference_on_every_backend() {
    use kernel_lab::abi::Abi;
    use kernel_lab::backend::{run_batch, BackendKind, Limits};
    use kernel_lab::batch::BatchBuilder;
    use kernel_lab::cases::plan::Stubs;
    use kernel_lab::cases::verdict;
    use rand::SeedableRng;

    for v in &VARIANTS {
        let image = build(v);
        let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(SEED);
        let mut b = BatchBuilder::new(Abi::of(v.arch));
        let mut planned = Vec::new();
        for k in Kernel::ALL {
            for misalign in 0..16 {
                for blocks in 1..=3 {
                    let w = Workload::of(k, blocks, misalign);
                    planned.push((w, w.plan(&mut b, &Stubs::of(&image), &mut rng)));
                }
            }
        }
        let batch = b.layout(image.arena().unwrap()).unwrap();
        for kind in BackendKind::ALL.into_iter().filter(|k| k.supports(v).is_ok()) {
            let mut backend = kind.open(v, &image, Limits::default()).unwrap();
            let run = run_batch(backend.as_mut(), &batch).unwrap();
            assert!(run.faults.is_empty(), "{v} on {kind}: {:?}", run.faults.first());
            for (w, p) in &planned {
                let findings = verdict::check(p, &batch, &run, Abi::of(v.arch), &image);
                assert!(findings.is_empty(), "{v} on {kind}, {} input +{}: {findings:?}", w.label(), w.misalign);
            }
        }
    }
}

/// `lab bench` times OpenSSL on its default path and, in a child process with
/// `OPENSSL_ia32cap` masking SIMD, on its scalar path, and says which is which.
#[test]
fn lab_bench_times_openssl_on_its_default_and_scalar_paths() {
    if let Some(why) = native::unavailable() {
        assert!(!why.is_empty());
        return;
    }
    let args = ["bench", "--arch", "x86_64", "--no-throughput", "--no-predict", "--runs", "1", "--json"];
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().expect("run lab bench");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let native = &json["native"];
    let rows = native["rows"].as_array().expect("rows");
    for kernel in ["md5", "poly1305"] {
        for imp in ["lab", "openssl", "openssl-scalar", "rustcrypto"] {
            let n = rows.iter().filter(|r| r["kernel"] == kernel && r["implementation"] == imp).count();
            assert_eq!(n, native::SIZES.len(), "{kernel} {imp}: {native}");
        }
    }
    let paths = native["openssl_paths"].to_string();
    assert!(paths.contains(native::SCALAR_IA32CAP) && paths.contains("default path"), "{paths}");
    assert!(native["ratios"].as_array().unwrap().iter().all(|r| r["lab_vs_openssl_scalar"].as_f64().is_some()));
}

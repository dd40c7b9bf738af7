//! `lab bench`'s llvm-mca-19 predictions and baseline gate: every variant × kernel is predicted
//! on its architecture's models with identical figures on a second run, the loop simulated is as
//! long as the measured instructions per block, a kernel with one extra instruction per MD5 step
//! fails the gate naming kernel, variant and model, and a missing llvm-mca-19 skips only the
//! predictions. Needs llvm-19 (ci/setup.sh installs it).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use kernel_lab::bench::mca;
use kernel_lab::variant::Kernel;

use crate::common::{counted_variants, mutated_kernels};

fn lab(args: &[&str], path_env: Option<&Path>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lab"));
    cmd.args(args);
    if let Some(p) = path_env {
        cmd.env("PATH", p);
    }
    let out = cmd.output().expect("run lab");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn bench_json(extra: &[&str]) -> Value {
    let (code, out, err) = lab(&[&["bench", "--no-native", "--no-throughput", "--json"][..], extra].concat(), None);
    assert_eq!(code, 0, "{err}\n{out}");
    serde_json::from_str(&out).expect("JSON")
}

/// The riscv64 MD5 rows (both variants) of a bench report's `key` array.
fn riscv64_md5_rows(report: &Value, key: &str) -> Vec<Value> {
    let rows = report[key].as_array().expect(key).iter();
    let riscv64_md5 =
        |r: &&Value| r["variant"].as_str().is_some_and(|v| v.starts_with("riscv64")) && r["kernel"] == "md5";
    rows.filter(riscv64_md5).cloned().collect()
}

#[test]
fn every_variant_is_predicted_on_its_models_identically_twice() {
    let m = mca::Mca::find().expect("llvm-mca-19 (run ci/setup.sh)");
    // One after the other: two cold runs at once would race on the disassembly cache. The
    // first on two workers, the second on one, for riscv64's two variants and MD5 (a fifth
    // of the llvm-mca runs): identical figures, in the same order.
    let second = ["--jobs", "1", "--arch", "riscv64", "--kernel", "md5"];
    let (first, second) = (bench_json(&["--jobs", "2"]), bench_json(&second));
    for key in ["counts", "predictions"] {
        let (a, b) = (riscv64_md5_rows(&first, key), riscv64_md5_rows(&second, key));
        assert!(!a.is_empty(), "{key}");
        assert_eq!(a, b, "two runs must give identical {key}, whatever the workers");
    }
    let preds = first["predictions"].as_array().expect("predictions");
    for v in counted_variants() {
        for k in Kernel::ALL {
            let count = first["counts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["variant"] == v.name && r["kernel"] == k.name() && r["misalign"] == 0)
                .expect("count row");
            for model in m.default_models(v) {
                let p =
                    preds.iter().find(|p| p["variant"] == v.name && p["kernel"] == k.name() && p["model"] == *model);
                let Some(p) = p else {
                    // A model LLVM 19 names but cannot schedule must be reported as skipped.
                    let skipped = first["skipped"].to_string();
                    assert!(skipped.contains(&format!("{model}: {}", mca::NO_MODEL)), "{v} {k} {model}: {skipped}");
                    continue;
                };
                // A kernel with a vector path for long calls: its long path's loop.
                let per_block = count["steady_per_block"].as_f64().or(count["per_block"].as_f64());
                let blocks = p["blocks_per_iteration"].as_f64().unwrap();
                assert_eq!(
                    p["loop_instructions"].as_f64().map(|n| n / blocks),
                    per_block,
                    "{v} {k} {model}: simulated loop vs measured instructions per block"
                );
                let cycles = p["cycles_per_block"].as_f64().unwrap();
                assert!(cycles > 0.0, "{p}");
                assert!(!p["bottleneck"].as_str().unwrap().is_empty(), "{p}");
            }
        }
    }
    let board = &first["board"];
    assert!(board["predicted_us_rv64gc"].as_f64().unwrap() > 0.0, "{board}");
    assert!(board["predicted_zbb_time_saving_pct"].as_f64().unwrap() > 0.0, "Zbb saves time on sifive-u74: {board}");
}

#[test]
fn one_extra_instruction_per_md5_step_fails_the_gate_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    let base = base.to_str().unwrap();
    let select = ["--arch", "riscv64", "--no-zbb", "--kernel", "md5", "--no-native", "--no-throughput"];
    let select: Vec<&str> = select.into_iter().chain(["--cpu", "sifive-u74"]).collect();
    let (code, out, err) = lab(&[&["bench", "--save-baseline", base][..], &select].concat(), None);
    assert_eq!(code, 0, "{err}\n{out}");
    let (code, out, err) = lab(&[&["bench", "--baseline", base][..], &select].concat(), None);
    assert_eq!(code, 0, "an unchanged kernel passes its own baseline: {err}\n{out}");
    assert!(out.contains("no regression"), "{out}");

    // Every step's last chain instruction (`add a, a, b`: one per round macro and build, five
    // in all) gets an identity `addi a, a, 0` after it: one more instruction per step, on the
    // dependency chain.
    let frame = "\taddi\tsp, sp, -112\n"; // unchanged: mutated_kernels only makes the copy here
    let (kernels, _) = mutated_kernels("riscv64", "md5.S", frame, frame);
    let path = kernels.path().join("riscv64/md5.S");
    let src = std::fs::read_to_string(&path).unwrap();
    let chain_end = "\tadd\t\\a, \\a, \\b\n";
    assert_eq!(src.matches(chain_end).count(), 5, "one `add a, a, b` per round macro and build");
    std::fs::write(&path, src.replace(chain_end, &format!("{chain_end}\taddi\t\\a, \\a, 0\n"))).unwrap();
    let kdir = kernels.path().to_str().unwrap();
    let (code, out, err) = lab(&[&["bench", "--baseline", base, "--kernels-dir", kdir][..], &select].concat(), None);
    assert_eq!(code, 1, "the gate must fail: {err}\n{out}");
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("REGRESSED")).collect();
    assert!(
        lines.iter().any(|l| l.contains("md5") && l.contains("riscv64") && l.contains("instructions/block (input +0)")),
        "{out}"
    );
    assert!(lines.iter().any(|l| l.contains("md5") && l.contains("cycles/block on sifive-u74")), "{out}");
    assert!(
        lines.iter().any(|l| l.contains("721.00 ->") && l.contains("785.00") && l.contains("+8.88%")),
        "64 more instructions per block: {out}"
    );
}

#[test]
fn without_llvm_mca_only_the_predictions_are_skipped() {
    // A PATH with the build and disassembly tools but no llvm-mca-19.
    let dir = tempfile::tempdir().unwrap();
    for tool in ["clang", "ld.lld", "llvm-objdump"] {
        let real = which::which(tool).unwrap_or_else(|_| panic!("{tool} (run ci/setup.sh)"));
        std::os::unix::fs::symlink(real, dir.path().join(tool)).unwrap();
    }
    let args = ["bench", "--no-native", "--no-throughput", "--arch", "x86_64", "--kernel", "poly1305", "--json"];
    let (code, out, err) = lab(&args, Some(dir.path()));
    assert_eq!(code, 0, "{err}\n{out}");
    let json: Value = serde_json::from_str(&out).unwrap();
    assert!(json["predictions"].as_array().unwrap().is_empty());
    assert!(!json["counts"].as_array().unwrap().is_empty(), "counts still run");
    let skipped = json["skipped"].to_string();
    assert!(skipped.contains("llvm-mca-19 missing (Debian package llvm-19)"), "{skipped}");
}

#[test]
fn plot_shows_every_variant_and_bad_baselines_and_models_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("bench.svg");
    let args = ["bench", "--no-native", "--no-throughput", "--no-predict", "--plot", svg.to_str().unwrap()];
    let (code, out, err) = lab(&args, None);
    assert_eq!(code, 0, "{err}\n{out}");
    let text = std::fs::read_to_string(&svg).expect("the SVG");
    assert!(text.starts_with("<svg"), "{}", &text[..text.len().min(80)]);
    // The contents of the SVG's <text> elements.
    let labels: Vec<&str> =
        text.split("<text").skip(1).filter_map(|t| Some(t.split_once('>')?.1.split('<').next()?.trim())).collect();
    for v in counted_variants() {
        assert!(labels.contains(&v.name), "{v} is labelled in the plot: {labels:?}");
    }
    assert!(labels.contains(&"instructions 721"), "the riscv64 MD5 bar carries its count: {labels:?}");

    let args = ["bench", "--no-native", "--no-throughput", "--arch", "x86_64", "--kernel", "poly1305"];
    let (code, out, _) = lab(&[&args[..], &["--cpu", "sifive-u74,no-such-cpu"]].concat(), None);
    assert_eq!(code, 2, "an unknown model is a set-up error: {out}");
    assert!(
        out.contains("--cpu no-such-cpu") && out.contains("--cpu sifive-u74"),
        "both are named (no x86 model): {out}"
    );

    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"schema":1,"instructions":[{"variant":"x","kernel":"md5","misalign":0,"per_block":-1}],"cycles":[]}"#,
    )
    .unwrap();
    let (code, _, err) = lab(&["bench", "--no-native", "--no-throughput", "--baseline", bad.to_str().unwrap()], None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.json") && err.contains("instructions[0]"), "names file and entry: {err}");
}

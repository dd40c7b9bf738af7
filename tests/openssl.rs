//! The OpenSSL contract family (lab/src/contract.rs): the example kernels of
//! `examples/openssl/<arch>/` pass every bundled vector through `md5_block_data_order` and
//! `poly1305_blocks` on every variant (every set on Unicorn, all but the two big sweeps on qemu
//! and native), and broken ones (padbit ignored, padbit's unspecified upper bits read) are
//! caught.

use std::path::{Path, PathBuf};

use kernel_lab::backend::BackendKind;
use kernel_lab::bench::counts;
use kernel_lab::bench::mix::Disassembly;
use kernel_lab::bench::steady;
use kernel_lab::cases::plan::Stubs;
use kernel_lab::contract::Family;
use kernel_lab::finding::Class;
use kernel_lab::image::Image;
use kernel_lab::paths;
use kernel_lab::report::Report;
use kernel_lab::reporters::{self, Format, JunitCases};
use kernel_lab::run::{self, cases_in};
use kernel_lab::toolchain::{self, BuildConfig};
use kernel_lab::variant::{Kernel, Variant};
use kernel_lab::vectors;
use rstest::rstest;

use crate::common::{config_with, variant, SEED};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/openssl")
}

/// A kernels folder with the OpenSSL examples of every arch (symbolic links resolved) and the
/// lab's driver; `edit` may change `poly1305_blocks.S` of an arch. Builds into the shared image
/// cache ([`crate::common::fixture_build`]).
fn openssl_kernels(edit: impl Fn(&str, String) -> String) -> (tempfile::TempDir, BuildConfig) {
    openssl_kernels_editing("poly1305_blocks.S", edit)
}

/// [`openssl_kernels`], `edit` changing `file` of an arch.
fn openssl_kernels_editing(file: &str, edit: impl Fn(&str, String) -> String) -> (tempfile::TempDir, BuildConfig) {
    let dir = tempfile::tempdir().expect("temp dir");
    for arch in ["riscv64", "aarch64", "x86_64"] {
        let to = dir.path().join(arch);
        std::fs::create_dir_all(&to).expect("mkdir");
        std::fs::copy(paths::kernels_dir().join(arch).join("driver.S"), to.join("driver.S")).expect("driver");
        for e in std::fs::read_dir(examples_dir().join(arch)).expect("examples") {
            let e = e.expect("entry");
            let text = std::fs::read_to_string(e.path()).expect("read (links followed)");
            let text = if e.file_name() == file { edit(arch, text) } else { text };
            std::fs::write(to.join(e.file_name()), text).expect("write");
        }
    }
    // The shared image cache: keyed by the folder's contents, so edited copies never share an
    // image, and the unedited copies of every test share one per variant.
    let build = crate::common::fixture_build(dir.path());
    (dir, build)
}

/// `source` with every line marked `PADBIT` replaced by `line`.
fn replace_padbit(source: &str, line: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let mut done = false;
    for l in source.lines() {
        if l.contains("PADBIT") && !l.trim_start().starts_with("//") && !l.trim_start().starts_with('*') {
            if !done {
                out.push(line);
                done = true;
            }
        } else {
            out.push(l);
        }
    }
    assert!(done, "no PADBIT line");
    out.join("\n") + "\n"
}

fn image(v: &Variant, build: &BuildConfig) -> Image {
    let path = toolchain::build_image(build, v).unwrap_or_else(|e| panic!("{e}"));
    Image::load(&path, v.arch).unwrap_or_else(|e| panic!("{e}"))
}

fn run_with(
    v: &'static Variant,
    backends: Vec<BackendKind>,
    kernel: Kernel,
    files: Vec<PathBuf>,
    build: BuildConfig,
) -> Report {
    run::run(&config_with(v, backends, kernel, files, build))
}

fn all_findings(report: &Report) -> Vec<String> {
    report
        .rows
        .iter()
        .flat_map(|r| r.failed())
        .flat_map(|c| c.findings.iter().map(move |f| format!("{}: {f}", c.name)))
        .collect()
}

#[rstest]
fn every_bundled_vector_passes_through_the_openssl_contract(
    #[values("riscv64", "riscv64+zbb", "aarch64", "x86_64")] variant_name: &str,
    #[values("md5", "poly1305")] kernel_name: &str,
) {
    let v = variant(variant_name);
    let kernel = Kernel::from_name(kernel_name).unwrap();
    let (_dir, build) = openssl_kernels(|_, s| s);
    let entry = Stubs::of(&image(v, &build));
    assert_eq!(
        entry.family(kernel),
        Some(Family::OpenSsl),
        "the example image runs {kernel} through OpenSSL's contract"
    );
    let files = vectors::bundled_files(&paths::vectors_dir(), &[kernel]);
    let cases = |files: &[PathBuf]| -> usize {
        files.iter().map(|f| cases_in(&vectors::load_file(f).0.expect("parses"))).sum()
    };
    // Every set on Unicorn; on qemu and native every set but the two big sweeps (md5/jtreg,
    // poly1305/layout: 8.7k and 5k cases), which tests/matrix.rs runs on every backend: the
    // backends run the same driver protocol whatever the contract.
    let big = |f: &PathBuf| f.ends_with("md5/jtreg.json") || f.ends_with("poly1305/layout.json");
    let small: Vec<PathBuf> = files.iter().filter(|f| !big(f)).cloned().collect();
    assert!(small.len() < files.len(), "the big sets are bundled: {files:?}");
    let processes = [BackendKind::Qemu, BackendKind::Native];
    let runnable = processes.iter().filter(|b| b.supports(v).is_ok()).count();
    let expected = [cases(&files), cases(&small) * runnable];
    let reports = [
        run_with(v, vec![BackendKind::Unicorn], kernel, files, build.clone()),
        run_with(v, processes.to_vec(), kernel, small, build),
    ];
    for (report, expected) in reports.iter().zip(expected) {
        assert!(report.setup_errors.is_empty() && report.vector_errors.is_empty(), "{}", report.to_human());
        assert!(report.image_findings.is_empty(), "{}", report.to_human());
        let (passed, failed, _) = report.totals();
        assert_eq!((passed, failed), (expected, 0), "{}", report.to_human());
    }
}

/// A `poly1305_blocks` that always adds 2^128 (padbit ignored) fails exactly the tags whose
/// length is not a multiple of 16 (their tail goes through the kernel with padbit 0).
#[rstest]
fn a_kernel_that_ignores_padbit_is_caught(#[values("riscv64", "aarch64", "x86_64")] variant_name: &str) {
    let v = variant(variant_name);
    let always_one = |arch: &str, s: String| {
        let line = match arch {
            "riscv64" => "\tli\ta3, 1",
            "aarch64" => "\tmov\tx3, #1",
            _ => "\tmov\t$1, %ebp",
        };
        replace_padbit(&s, line)
    };
    let (_dir, build) = openssl_kernels(always_one);
    let files = vec![paths::vectors_dir().join("poly1305/rfc8439.json")];
    let report = run_with(v, vec![BackendKind::Unicorn], Kernel::Poly1305, files, build);
    let findings = all_findings(&report);
    assert!(!findings.is_empty(), "{}", report.to_human());
    assert!(
        findings
            .iter()
            .any(|f| f.contains("poly1305_blocks(padded tail, len=16, padbit=0)")
                && f.contains("h mod 2^130-5 expected")),
        "{findings:#?}"
    );
    let failed = report.rows.iter().flat_map(|r| r.failed());
    assert!(failed.clone().all(|c| c.msg_len % 16 != 0), "only tags with a tail fail: {findings:#?}");
    assert!(failed.clone().all(|c| c.findings.iter().all(|f| f.class == Class::Value)), "{findings:#?}");
}

/// Reading padbit as a whole register, under OpenSSL's default `warn` policy: every case passes
/// padbit clean (as OpenSSL's C callers do) and passes; one probe case with garbage upper bits
/// finds the reliance on x86_64 and aarch64 (the psABI leaves them unspecified for an `unsigned
/// int`), reported once as an `abi-upper-bits` warning naming the register. riscv64
/// sign-extends: no warning there.
#[rstest]
#[case("x86_64", "\tmov\t%rcx, %rbp", Some("rcx"))]
#[case("aarch64", "\tnop", Some("x3"))]
#[case("riscv64", "\tnop", None)]
fn padbit_upper_bits_are_one_warning_per_image_under_the_openssl_default(
    #[case] variant_name: &str,
    #[case] line: &str,
    #[case] register: Option<&str>,
) {
    let v = variant(variant_name);
    let arch = v.arch.name().to_owned();
    let (_dir, build) = openssl_kernels(|a, s| if a == arch { replace_padbit(&s, line) } else { s });
    let files = vec![paths::vectors_dir().join("poly1305/rfc8439.json")];
    let report = run_with(v, vec![BackendKind::Unicorn], Kernel::Poly1305, files, build);
    let findings = all_findings(&report);
    assert!(findings.is_empty(), "clean padbit passes: {findings:#?}");
    assert!(report.totals().0 > 0, "{}", report.to_human());
    let warned: Vec<&String> = report.warnings.iter().filter(|w| w.contains("abi-upper-bits")).collect();
    match register {
        Some(reg) => {
            assert_eq!(warned.len(), 1, "{warned:#?}");
            let want = format!("poly1305_blocks depends on the upper 32 bits of {reg} (unsigned int padbit)");
            assert!(warned[0].contains(&want), "{warned:#?}");
        }
        None => assert!(warned.is_empty(), "{warned:#?}"),
    }
}

/// `--abi-upper-bits fail` puts garbage into padbit's upper half in every call, so the kernel
/// reading the whole register fails its cases, each diagnosis naming padbit (exit 1); the
/// correct kernel passes under the same policy.
#[test]
fn abi_upper_bits_fail_makes_the_reliance_fail_every_case() {
    let (dir, _build) = openssl_kernels(|a, s| if a == "x86_64" { replace_padbit(&s, "\tmov\t%rcx, %rbp") } else { s });
    let cache = kernel_lab::paths::cache_dir();
    let kdir = dir.path().display().to_string();
    let args = ["run", "--kernels-dir", &kdir, "--arch", "x86_64", "--backend", "unicorn", "--kernel", "poly1305"];
    let narrow = ["--set", "=rfc8439", "--seed", "5", "--abi-upper-bits", "fail"];
    let (code, text) = lab_in(&cache, &[&args[..], &narrow].concat());
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("depends on the upper 32 bits of rcx (int padbit"), "{text}");
    assert!(!text.contains("abi-upper-bits:"), "no probe warning under fail: {text}");
    let (clean_dir, _b) = openssl_kernels(|_, s| s);
    let kdir = clean_dir.path().display().to_string();
    let args = ["run", "--kernels-dir", &kdir, "--arch", "x86_64", "--backend", "unicorn", "--kernel", "poly1305"];
    let (code, text) = lab_in(&cache, &[&args[..], &narrow].concat());
    assert_eq!(code, 0, "{text}");
}

/// An `md5_block_data_order` that writes `Nl` (byte 16 of `MD5_CTX`, past A..D) fails every
/// case with a memory finding naming the byte, though every digest is right.
#[test]
fn an_md5_kernel_writing_past_the_state_words_is_caught() {
    let v = variant("x86_64");
    let clobber = |_: &str, s: String| s.replace("\tpop\t%r13\n", "\tmovb\t$0x77, 16(%rbx)\n\tpop\t%r13\n");
    let (_dir, build) = openssl_kernels_editing("md5_block_data_order.S", clobber);
    let files = vec![paths::vectors_dir().join("md5/rfc1321.json")];
    let expected = cases_in(&vectors::load_file(&files[0]).0.expect("parses"));
    let report = run_with(v, vec![BackendKind::Unicorn], Kernel::Md5, files, build);
    let (passed, failed, _) = report.totals();
    assert_eq!((passed, failed), (0, expected), "{}", report.to_human());
    let findings = all_findings(&report);
    assert!(
        findings
            .iter()
            .all(|f| f.contains("md5_block_data_order(num=") && f.contains("byte 16 of the context is 0x77")),
        "{findings:#?}"
    );
    let classes = report.rows.iter().flat_map(|r| r.failed()).flat_map(|c| c.findings).map(|f| f.class);
    assert!(classes.clone().all(|c| c == Class::Memory), "{findings:#?}");
}

/// `lab bench` counts OpenSSL-contract images on Unicorn as it counts HotSpot's: repeatable,
/// linear in blocks, under the family's symbols, without the HotSpot figure. The MD5 example
/// is an adapter calling the repository's `implCompressMB` under another name: its per-block
/// count equals the bundled kernel's exactly (the inner function is counted: the whole kernel
/// code is profiled, not only the contract symbol) and only the fixed cost grows; the steady
/// loop is found in the inner function. Poly1305's loop counted statically equals the dynamic
/// per-block cost.
#[rstest]
fn lab_bench_counts_openssl_contract_images_under_their_symbols(
    #[values("riscv64", "aarch64", "x86_64")] variant_name: &str,
) {
    let v = variant(variant_name);
    let (_dir, build) = openssl_kernels(|_, s| s);
    let img = image(v, &build);
    let dis = Disassembly::of(&img).expect("disassembly");
    let bundled = crate::common::build(v);
    let bundled_dis = Disassembly::of(&bundled).expect("disassembly");
    for k in Kernel::ALL {
        let row = counts::count(&img, v, &dis, k, 0, SEED).unwrap_or_else(|e| panic!("{v} {k}: {e}"));
        let stub = if k == Kernel::Md5 { "md5_block_data_order" } else { "poly1305_blocks" };
        assert_eq!((row.family, row.stub), ("openssl", stub), "{v} {k}");
        assert!(row.repeatable && row.linear && row.per_block > 0.0, "{v} {k}: {row:?}");
        assert_eq!((row.hotspot, row.hotspot_ratio), (None, None), "{v} {k}: HotSpot's figure counts HotSpot's stubs");
        let lp = steady::find(&img, k, row.per_block).unwrap_or_else(|e| panic!("{v} {k}: {e}"));
        assert_eq!(lp.insns.len() as f64, row.per_block * f64::from(lp.blocks_per_iteration), "{v} {k}");
        if k == Kernel::Md5 {
            let hotspot = counts::count(&bundled, v, &bundled_dis, k, 0, SEED).expect("bundled count");
            assert_eq!(hotspot.family, "hotspot");
            assert_eq!(row.per_block, hotspot.per_block, "{v}: the adapter runs the same block loop");
            assert!(row.fixed > hotspot.fixed, "{v}: the adapter's call costs instructions: {row:?}");
            assert_eq!(row.single_block_call, Some(row.per_call[0].1), "{v}: num = 1 is the one-block call");
            assert_eq!(lp.symbol, "ossl_hs_md5_implCompressMB", "{v}: the loop is in the inner function");
        } else {
            assert_eq!(lp.symbol, "poly1305_blocks", "{v}");
        }
    }
}

/// Reports name the contract family of a row that is not HotSpot's: the human table and a
/// failure's heading add `(openssl contract: <symbol>)`, JSON rows carry `"family": "openssl"`
/// (absent on HotSpot rows, so reports of HotSpot kernels stay as they were), JUnit classnames
/// say `md5-openssl`.
#[test]
fn reports_name_the_openssl_family_and_leave_hotspot_rows_as_they_were() {
    let v = variant("x86_64");
    let clobber = |_: &str, s: String| s.replace("\tpop\t%r13\n", "\tmovb\t$0x77, 16(%rbx)\n\tpop\t%r13\n");
    let (_dir, build) = openssl_kernels_editing("md5_block_data_order.S", clobber);
    let files = vec![paths::vectors_dir().join("md5/rfc1321.json")];
    let report = run_with(v, vec![BackendKind::Unicorn], Kernel::Md5, files.clone(), build);
    assert_eq!(report.rows.iter().map(|r| r.family).collect::<Vec<_>>(), vec![Family::OpenSsl]);
    let human = report.to_human();
    assert!(human.contains("rfc1321") && human.contains("(openssl contract: md5_block_data_order)"), "{human}");
    assert!(
        human.contains("FAILED x86_64 on unicorn, md5 / rfc1321 (openssl contract: md5_block_data_order):"),
        "{human}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&reporters::render(&report, Format::Json, "run").expect("json")).expect("parses");
    assert_eq!(json["rows"][0]["family"], "openssl", "{json}");
    let junit = reporters::render_with(&report, Format::Junit, "run", JunitCases::All).expect("junit");
    assert!(junit.contains("classname=\"x86_64.unicorn.md5-openssl.rfc1321\""), "{junit}");
    let junit = reporters::render(&report, Format::Junit, "run").expect("junit");
    assert!(junit.contains("classname=\"x86_64.unicorn.md5-openssl\""), "{junit}");

    let hotspot = run_with(v, vec![BackendKind::Unicorn], Kernel::Md5, files, toolchain::default_build());
    assert_eq!(hotspot.rows[0].family, Family::HotSpot);
    assert!(!hotspot.to_human().contains("contract:"), "{}", hotspot.to_human());
    let json: serde_json::Value =
        serde_json::from_str(&reporters::render(&hotspot, Format::Json, "run").expect("json")).expect("parses");
    assert!(json["rows"][0].get("family").is_none(), "{json}");
    let junit = reporters::render(&hotspot, Format::Junit, "run").expect("junit");
    assert!(junit.contains("classname=\"x86_64.unicorn.md5\""), "{junit}");
}

/// `lab args...` with the image cache in `cache`: (exit status, stdout + stderr).
fn lab_in(cache: &Path, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lab"))
        .env("KERNEL_LAB_CACHE", cache)
        .args(args)
        .output()
        .expect("run lab");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exit status"), text)
}

/// Assembles `examples/openssl/riscv64/<file>` into `out` with clang, `-D` renaming symbols.
fn riscv64_object(file: &str, march: &str, defines: &[&str], out: &Path) -> String {
    let status = std::process::Command::new("clang")
        .args(["--target=riscv64-linux-gnu", &format!("-march={march}"), "-mno-relax", "-c"])
        .args(defines)
        .arg(examples_dir().join("riscv64").join(file))
        .arg("-o")
        .arg(out)
        .status()
        .expect("clang");
    assert!(status.success(), "clang {file}");
    out.display().to_string()
}

/// A new user's path with OpenSSL-contract objects under their own names (README "Bring your
/// own kernel"): `--object ... --symbol md5_block_data_order=my_md5` runs the OpenSSL
/// contract on every backend of the arch, `lab fuzz` names the family, and `lab bench` counts
/// it under the family's symbols; code outside the declared ISA is an image finding (exit 1); an unmapped foreign
/// name, a wrong symbol or a wrong-arch object exit 2 naming the object; an object with the
/// contract names of MD5 only runs MD5 and skips Poly1305 naming the object.
#[test]
fn openssl_objects_under_their_own_names_through_the_cli_shortcut() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The shared image cache: images are keyed by the objects' bytes (the same every run).
    let cache = kernel_lab::paths::cache_dir();
    let md5 = riscv64_object(
        "md5_block_data_order.S",
        "rv64gc_zbb",
        &["-Dmd5_block_data_order=my_md5"],
        &dir.path().join("md5.o"),
    );
    let poly =
        riscv64_object("poly1305_blocks.S", "rv64gc", &["-Dpoly1305_blocks=my_poly"], &dir.path().join("poly.o"));
    let mapped = ["--object", &md5, "--object", &poly, "--symbol", "md5_block_data_order=my_md5"];
    let mapped = [&mapped[..], &["--symbol", "poly1305_blocks=my_poly", "--arch", "riscv64"]].concat();
    let sets = ["--set", "rfc1321,rfc8439", "--seed", "3", "--format", "json"];

    let (code, text) = lab_in(&cache, &[&["run", "--isa", "rv64gc_zbb"][..], &mapped, &sets].concat());
    assert_eq!(code, 0, "{text}");
    let json: serde_json::Value = serde_json::from_str(&text[text.find('{').expect("json")..]).expect("json");
    let ran: Vec<(String, String, String, u64, u64)> = json["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["passed"].as_u64() > Some(0))
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (
                s("backend"),
                s("kernel"),
                s("family"),
                r["passed"].as_u64().unwrap_or(0),
                r["failed"].as_u64().unwrap_or(9),
            )
        })
        .collect();
    for backend in ["unicorn", "qemu"] {
        for kernel in ["md5", "poly1305"] {
            let row = ran.iter().find(|r| r.0 == backend && r.1 == kernel);
            assert!(row.is_some_and(|r| r.2 == "openssl" && r.4 == 0), "{backend} {kernel}: {ran:?}\n{text}");
        }
    }

    let fuzz = ["fuzz", "--isa", "rv64gc_zbb", "--backend", "unicorn", "--cases", "40", "--seed", "3"];
    let (code, text) = lab_in(&cache, &[&fuzz[..], &mapped].concat());
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("clean  (openssl contract: md5_block_data_order)"), "{text}");
    assert!(text.contains("clean  (openssl contract: poly1305_blocks)"), "{text}");

    let (code, text) = lab_in(
        &cache,
        &[&["bench", "--isa", "rv64gc_zbb"][..], &mapped, &["--no-native", "--no-throughput", "--no-predict"]].concat(),
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("openssl md5_block_data_order") && text.contains("openssl poly1305_blocks"), "{text}");

    // rfc8439 is a Poly1305 set: with --kernel md5 a --set naming it would select nothing (exit 2).
    let md5_sets = ["--set", "rfc1321", "--seed", "3", "--format", "json"];
    let (code, text) =
        lab_in(&cache, &[&["run", "--isa", "rv64gc", "--kernel", "md5"][..], &mapped, &md5_sets].concat());
    assert_eq!(code, 1, "a Zbb object declared rv64gc: {text}");
    assert!(text.contains("\"class\": \"isa\"") && text.contains("roriw"), "{text}");

    let (code, text) = lab_in(&cache, &["run", "--object", &md5, "--symbol", "md5_block_data_order=nosuch"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("`nosuch`") && text.contains(&md5), "{text}");
    let (code, text) =
        lab_in(&cache, &["run", "--object", &md5, "--arch", "aarch64", "--symbol", "md5_block_data_order=my_md5"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains(&md5) && text.contains("wrong architecture"), "{text}");
    let (code, text) = lab_in(&cache, &["run", "--object", &md5, "--isa", "rv64gc_zbb", "--set", "rfc1321"]);
    assert_eq!(code, 2, "a foreign name and no --symbol: nothing to run: {text}");
    assert!(text.contains(&format!("{md5} defines no md5 contract symbol")), "{text}");

    let plain = riscv64_object("md5_block_data_order.S", "rv64gc", &[], &dir.path().join("plain.o"));
    let (code, text) = lab_in(&cache, &["run", "--object", &plain, "--set", "rfc1321,rfc8439", "--backend", "unicorn"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(&format!("{plain} defines no poly1305 contract symbol")), "{text}");
    assert!(text.contains("(openssl contract: md5_block_data_order)"), "{text}");
}

/// OpenSSL leaves `poly1305_blocks` lengths that are not a multiple of 16 unspecified
/// (`Poly1305_Update` passes whole blocks): by default the lab cuts a vector's length to its
/// whole blocks, so a kernel that rounds the length up (reads and hashes the tail as a block)
/// passes; `--domain wide` passes the length as given and reports those cases apart as
/// outside OpenSSL's contract, not as failures (exit 0), while whole-block cases still pass.
#[test]
fn lengths_outside_openssl_s_contract_run_only_on_request_and_are_reported_apart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = std::fs::read_to_string(examples_dir().join("x86_64/poly1305_blocks.S")).expect("example");
    assert!(source.contains("\npoly1305_blocks:\n"), "entry label");
    let rounded = source.replace("\npoly1305_blocks:\n", "\npoly1305_blocks:\n\tadd\t$15, %rdx\n");
    std::fs::write(dir.path().join("up.S"), rounded).expect("write");
    let o = dir.path().join("up.o");
    let status = std::process::Command::new("clang")
        .args(["--target=x86_64-linux-gnu", "-c"])
        .arg(dir.path().join("up.S"))
        .arg("-o")
        .arg(&o)
        .status()
        .expect("clang");
    assert!(status.success(), "clang up.S");
    let run = |domain: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_lab"))
            .args(["run", "--object", o.to_str().unwrap(), "--kernel", "poly1305", "--backend", "unicorn"])
            .args(["--set", "=limb-edges", "--domain", domain])
            .output()
            .expect("run lab");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let (code, text) = run("jdk");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains(" passed, 0 failed, 0 skipped") && !text.contains("OUTSIDE"), "{text}");
    let (code, text) = run("wide");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("OUTSIDE OPENSSL'S CONTRACT up on unicorn, poly1305 / limb-edges"), "{text}");
    assert!(text.contains("poly1305_blocks with len = "), "{text}");
    assert!(text.contains("byte past the end of input"), "the rounded-up read is the finding: {text}");
    let outside: u64 = text
        .split(" outside OpenSSL's contract (not failures)")
        .next()
        .and_then(|head| head.rsplit(", ").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(outside > 0 && text.contains(" 0 failed, "), "{text}");
}

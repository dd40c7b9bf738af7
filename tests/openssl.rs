//! The OpenSSL contract family (lab/src/contract.rs): the example kernels of
//! `examples/openssl/<arch>/` pass every bundled vector through `md5_block_data_order` and
//! `poly1305_blocks` on every variant (every set on Unicorn, all but the two big sweeps on qemu
//! and native), and broken ones (padbit ignored, padbit's unspecified upper bits read) are
//! caught.

use std::path::{Path, PathBuf};

use kernel_lab::backend::BackendKind;
use kernel_lab::cases::plan::Stubs;
use kernel_lab::contract::Family;
use kernel_lab::finding::Class;
use kernel_lab::image::Image;
use kernel_lab::paths;
use kernel_lab::report::Report;
use kernel_lab::run::{self, cases_in};
use kernel_lab::toolchain::{self, BuildConfig};
use kernel_lab::variant::{Kernel, Variant};
use kernel_lab::vectors;
use rstest::rstest;

use crate::common::{config_with, variant};

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
        .flat_map(|r| &r.failed)
        .flat_map(|c| c.findings.iter().map(|f| format!("{}: {f}", c.name)))
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
    let failed = report.rows.iter().flat_map(|r| &r.failed);
    assert!(failed.clone().all(|c| c.msg_len % 16 != 0), "only tags with a tail fail: {findings:#?}");
    assert!(failed.clone().all(|c| c.findings.iter().all(|f| f.class == Class::Value)), "{findings:#?}");
}

/// Reading padbit as a whole register: garbage upper bits make it fail on x86_64 and aarch64
/// (the psABI leaves them unspecified for an `unsigned int`); riscv64 sign-extends, so the same
/// mistake is harmless there and passes.
#[rstest]
#[case("x86_64", "\tmov\t%rcx, %rbp", true)]
#[case("aarch64", "\tnop", true)]
#[case("riscv64", "\tnop", false)]
fn padbit_upper_bits_are_garbage_where_the_abi_says_so(
    #[case] variant_name: &str,
    #[case] line: &str,
    #[case] fails: bool,
) {
    let v = variant(variant_name);
    let arch = v.arch.name().to_owned();
    let (_dir, build) = openssl_kernels(|a, s| if a == arch { replace_padbit(&s, line) } else { s });
    let files = vec![paths::vectors_dir().join("poly1305/rfc8439.json")];
    let report = run_with(v, vec![BackendKind::Unicorn], Kernel::Poly1305, files, build);
    let findings = all_findings(&report);
    assert_eq!(!findings.is_empty(), fails, "{findings:#?}");
    if fails {
        let why = |f: &&String| f.contains("depends on the upper 32 bits") && f.contains("padbit");
        assert!(findings.iter().any(|f| why(&f)), "the diagnosis names padbit's upper half: {findings:#?}");
    }
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
    let classes = report.rows.iter().flat_map(|r| &r.failed).flat_map(|c| &c.findings).map(|f| f.class);
    assert!(classes.clone().all(|c| c == Class::Memory), "{findings:#?}");
}

//! Backends that disagree (issue 12, class 4): a RIP-relative `shld qword ptr [rip + g], rax, 4`
//! returns the same wrong value on Unicorn 2.1.5 and qemu-x86_64 7.2 while native is right
//! (fixture `tests/fixtures/x86_64/shld_rip.S`). Every case is compared across the backends
//! that ran it, and a difference is its own finding class, counted apart from kernel failures,
//! in the human, JSON and JUnit reports. A kernel bug that fails alike everywhere stays a
//! kernel failure.

use kernel_lab::backend::BackendKind;
use kernel_lab::finding::Class;
use kernel_lab::paths;
use kernel_lab::report::Verdict;
use kernel_lab::reporters::{self, Format};
use kernel_lab::run;
use kernel_lab::toolchain::BuildConfig;
use kernel_lab::variant::{Arch, Kernel};

use crate::common::{config_with, fixture_kernels, mutated_kernels, variant};

fn rfc1321_on_every_backend(build: BuildConfig) -> kernel_lab::report::Report {
    let files = vec![paths::vectors_dir().join("md5/rfc1321.json")];
    run::run(&config_with(variant("x86_64"), BackendKind::ALL.to_vec(), Kernel::Md5, files, build))
}

#[test]
fn an_emulator_fault_is_a_disagreement_not_a_kernel_failure() {
    assert_eq!(Arch::host(), Some(Arch::X86_64), "the native backend needs an x86_64 host");
    let (_dir, build) = fixture_kernels("x86_64", "md5.S", "shld_rip.S");
    let report = rfc1321_on_every_backend(build);
    let (passed, failed, _) = report.totals();
    let per_backend = report.rows[0].cases.len();
    assert_eq!(failed, 0, "no kernel failure: {}", report.to_human());
    assert_eq!(passed, per_backend, "native passes every case");
    assert_eq!(report.disagreed(), 2 * per_backend, "unicorn and qemu disagree with native on every case");
    assert_eq!(report.status(), kernel_lab::exit::ExitCode::Failed, "a disagreement is not a pass");
    for r in report.rows.iter().filter(|r| r.backend != BackendKind::Native) {
        let Verdict::Disagreed(f) = &r.cases[0].verdict else { panic!("{:?}", r.cases[0].verdict) };
        assert_eq!(f[0].class, Class::EmulatorFault);
        let culprit = if r.backend == BackendKind::Unicorn { "unicorn 2.1.5" } else { "qemu " };
        let other = if r.backend == BackendKind::Unicorn { "(qemu " } else { "(unicorn 2.1.5 is at fault" };
        assert!(
            f[0].text.starts_with(&format!(
                "emulator fault: {culprit}"
            )) && f[0].text.contains("returns other outputs (md5_implCompress(buffered block 0): see below); native and the reference agree")
                && f[0].text.contains(other)
                && f[0].text.ends_with("not counted as a kernel failure"),
            "{}",
            f[0].text
        );
        assert_eq!(f[1].class, Class::Value, "the backend's own finding follows: {f:?}");
    }
    let human = report.to_human();
    assert!(
        human.contains("EMULATOR FAULT unicorn on x86_64, md5 / rfc1321 (not counted as kernel failures):"),
        "{human}"
    );
    assert!(
        human.contains("EMULATOR FAULT qemu on x86_64, md5 / rfc1321 (not counted as kernel failures):"),
        "{human}"
    );
    assert!(
        human.contains(&format!(
            "0 failed, 0 skipped, {} emulator faults (unicorn {per_backend}, qemu {per_backend}; not the kernel's)",
            2 * per_backend
        )),
        "{human}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&reporters::render(&report, Format::Json, "run").unwrap()).unwrap();
    assert_eq!(json["totals"]["disagreed"], 2 * per_backend);
    assert_eq!(json["totals"]["failed"], 0);
    assert_eq!(json["exit_code"], 1);
    assert_eq!(json["rows"][0]["cases"][0]["outcome"], "disagreed");
    assert_eq!(json["rows"][0]["cases"][0]["findings"][0]["class"], "emulator-fault");

    let xml = reporters::render_with(&report, Format::Junit, "run", reporters::JunitCases::All).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let failures: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("failure")).collect();
    assert_eq!(failures.len(), 2 * per_backend);
    assert!(failures.iter().all(|f| f.attribute("type") == Some("emulator-fault")));
}

#[test]
fn a_kernel_bug_fails_alike_and_is_not_blamed_on_the_emulators() {
    let (_dir, build) =
        mutated_kernels("x86_64", "md5.S", "F_STEP RB, RC, RD, RA,  3, 22,", "F_STEP RB, RC, RD, RA,  3, 21,");
    let report = rfc1321_on_every_backend(build);
    assert_eq!(report.disagreed(), 0, "{}", report.to_human());
    assert!(report.totals().1 > 0);
    assert!(!report.to_human().contains("emulator fault"));
}

#[test]
fn a_fuzz_failure_that_native_passes_is_blamed_on_the_emulator() {
    use kernel_lab::fuzz::{self, Budget, FuzzConfig, Outcome};
    let (dir, build) = fixture_kernels("x86_64", "md5.S", "shld_rip.S");
    let cfg = FuzzConfig {
        variants: vec![variant("x86_64")],
        backends: vec![BackendKind::Unicorn, BackendKind::Native],
        kernels: vec![Kernel::Md5],
        build,
        seed: crate::common::SEED,
        budget: Budget::Cases(500),
        shard: (0, 1),
        batch: 64,
        out_dir: dir.path().join("out"),
        limits: kernel_lab::backend::Limits::default(),
        jobs: 0,
        vector_lengths: Vec::new(),
    };
    let results = fuzz::campaign(&cfg, &mut |_| {});
    assert!(matches!(results[1].outcome, Outcome::Clean), "native: {:?}", results[1].outcome);
    let Outcome::Failed(f) = &results[0].outcome else { panic!("unicorn: {:?}", results[0].outcome) };
    assert_eq!(f.findings[0].class, Class::EmulatorFault, "{:?}", f.findings);
    assert!(
        f.findings[0].text.starts_with(
            "emulator fault on the shrunk case: unicorn 2.1.5 fails it; native and the reference agree; not counted"
        ),
        "{}",
        f.findings[0].text
    );
}

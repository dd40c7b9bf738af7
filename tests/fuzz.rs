//! Differential fuzzing finds real bugs: a wrong round-3 rotate in MD5 and a dropped carry in
//! Poly1305 are found by a 2000-case campaign, shrunk to at most two blocks, and the written
//! vector file replays the failure with `lab run --vectors`. The bundled kernels fuzz clean, and
//! the dropped carry also fails named RFC 8439 vectors.

use kernel_lab::backend::{BackendKind, Limits};
use kernel_lab::fuzz::{self, Budget, FuzzConfig, Outcome};
use kernel_lab::paths;
use kernel_lab::run;
use kernel_lab::toolchain::BuildConfig;
use kernel_lab::variant::Kernel;

use crate::common::{mutated_kernels, variant, SEED};

fn campaign(
    build: BuildConfig,
    kernel: Kernel,
    backends: Vec<BackendKind>,
    out: &std::path::Path,
) -> Vec<fuzz::TargetResult> {
    let cfg = FuzzConfig {
        variants: vec![variant("x86_64")],
        backends,
        kernels: vec![kernel],
        build,
        seed: SEED,
        budget: Budget::Cases(2000),
        shard: (0, 1),
        batch: 256,
        out_dir: out.to_path_buf(),
        limits: Limits::default(),
    };
    fuzz::campaign(&cfg, &mut |_| {})
}

fn replay(build: BuildConfig, kernel: Kernel, file: &std::path::Path, backend: BackendKind) -> (usize, usize) {
    let cfg = crate::common::config_with(variant("x86_64"), vec![backend], kernel, vec![file.to_path_buf()], build);
    let report = run::run(&cfg);
    assert!(report.vector_errors.is_empty(), "{:?}", report.vector_errors);
    let (p, f, _) = report.totals();
    (p, f)
}

#[test]
fn fuzz_finds_shrinks_and_saves_seeded_bugs() {
    let bugs = [
        (Kernel::Md5, "md5.S", "H_STEP RC, RD, RA, RB, 11, 16,", "H_STEP RC, RD, RA, RB, 11, 15,"),
        (Kernel::Poly1305, "poly1305.S", "adc     rcx, [rdi + rsi + 8]", "add     rcx, [rdi + rsi + 8]"),
    ];
    for (kernel, file, from, to) in bugs {
        let (dir, build) = mutated_kernels("x86_64", file, from, to);
        let results = campaign(build.clone(), kernel, vec![BackendKind::Unicorn, BackendKind::Qemu], dir.path());
        for r in &results {
            let Outcome::Failed(f) = &r.outcome else {
                panic!("{kernel} on {}: not found: {:?}", r.backend, r.outcome)
            };
            assert!(fuzz::blocks_of(&f.case) <= 2, "{kernel}: shrunk only to {} blocks", fuzz::blocks_of(&f.case));
            assert!(!f.findings.is_empty());
            // The file holds one vector: its guarded case and its offset case.
            let cases = kernel_lab::checks::cases_of(&f.case);
            assert_eq!(
                replay(build.clone(), kernel, &f.file, r.backend),
                (0, cases),
                "the saved case fails on the broken kernel"
            );
            assert_eq!(
                replay(paths::default_build(), kernel, &f.file, r.backend),
                (cases, 0),
                "and passes on the real one"
            );
        }
    }
}

#[test]
fn bundled_kernels_fuzz_clean_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    for kernel in Kernel::ALL {
        for r in campaign(paths::default_build(), kernel, BackendKind::ALL.to_vec(), dir.path()) {
            assert!(matches!(r.outcome, Outcome::Clean), "{kernel} on {}: {:?}", r.backend, r.outcome);
            assert_eq!(r.cases, 2000);
        }
    }
}

#[test]
fn dropped_low_limb_carry_fails_named_rfc8439_vectors() {
    let (_dir, build) =
        mutated_kernels("x86_64", "poly1305.S", "adc     rcx, [rdi + rsi + 8]", "add     rcx, [rdi + rsi + 8]");
    let cfg = crate::common::config_with(
        variant("x86_64"),
        vec![BackendKind::Unicorn],
        Kernel::Poly1305,
        vec![paths::vectors_dir().join("poly1305/rfc8439.json")],
        build,
    );
    let report = run::run(&cfg);
    let failed: Vec<&str> = report.rows[0].failed.iter().map(|f| f.name.as_str()).collect();
    assert!(failed.iter().any(|n| n.starts_with("RFC8439 A.3 Test Vector #")), "{}", report.to_human());
}

/// Seeded proptest cases per variant × backend × kernel, one case per backend entry so that
/// proptest itself shrinks and persists failures (tests/proptest-regressions/fuzz.txt).
#[rstest::rstest]
fn proptest_cases_agree_with_the_reference(
    #[values("unicorn", "qemu", "native")] backend_name: &str,
    #[values("md5", "poly1305")] kernel_name: &str,
) {
    use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestCaseError, TestRunner};
    use std::cell::RefCell;

    let kind = BackendKind::from_name(backend_name).unwrap();
    let kernel = Kernel::from_name(kernel_name).unwrap();
    let variants: Vec<_> = kernel_lab::variant::VARIANTS.iter().filter(|v| kind.supports(v).is_ok()).collect();
    assert!(!variants.is_empty(), "{kind} runs no variant on this host");
    for v in variants {
        let image = crate::common::build(v);
        let backend = RefCell::new(kind.open(v, &image, Limits::default()).unwrap());
        let config = Config {
            cases: 128,
            rng_seed: RngSeed::Fixed(SEED),
            failure_persistence: Some(Box::new(FileFailurePersistence::Direct("tests/proptest-regressions/fuzz.txt"))),
            ..Config::default()
        };
        let result = TestRunner::new(config).run(&fuzz::strategy(kernel), |case| {
            let mut b = backend.borrow_mut();
            let mut t = fuzz::Target { backend: b.as_mut(), variant: v, image: &image, seed: SEED };
            let findings =
                fuzz::run_cases(&mut t, std::slice::from_ref(&case)).map_err(|e| TestCaseError::fail(e.to_string()))?;
            match findings[0].is_empty() {
                true => Ok(()),
                false => Err(TestCaseError::fail(format!(
                    "{} on {kind}: {}",
                    v.name,
                    findings[0].iter().map(|f| f.text.as_str()).collect::<Vec<_>>().join("; ")
                ))),
            }
        });
        if let Err(e) = result {
            panic!("{} on {kind}, {kernel}: {e}", v.name);
        }
    }
}

//! Every variant × backend × kernel against every bundled vector. A cell that cannot exist on
//! this host (native on another architecture) must be reported as not applicable with its
//! reason, never as passed or skipped.

use kernel_lab::backend::BackendKind;
use kernel_lab::exit::ExitCode;
use kernel_lab::run::{self, cases_in};
use kernel_lab::variant::Kernel;
use kernel_lab::vectors;
use rstest::rstest;

use crate::common::{config, variant};

#[rstest]
fn bundled_vectors(
    #[values("riscv64", "riscv64+zbb", "aarch64", "x86_64")] variant_name: &str,
    #[values("unicorn", "qemu", "native")] backend_name: &str,
    #[values("md5", "poly1305")] kernel_name: &str,
) {
    let v = variant(variant_name);
    let backend = BackendKind::from_name(backend_name).unwrap();
    let kernel = Kernel::from_name(kernel_name).unwrap();
    let cfg = config(v, backend, kernel);
    let expected: usize =
        cfg.vector_files.iter().map(|f| cases_in(&vectors::load_file(f).0.expect("bundled file parses"))).sum();
    assert!(expected > 0, "no bundled {kernel} vectors");
    let report = run::run(&cfg);
    assert!(report.setup_errors.is_empty() && report.vector_errors.is_empty(), "{}", report.to_human());
    let (passed, failed, skipped) = report.totals();
    match backend.supports(v) {
        Ok(()) => {
            assert_eq!((passed, failed, skipped), (expected, 0, 0), "{}", report.to_human());
            assert_eq!(report.status(), ExitCode::Passed);
        }
        Err(reason) => {
            // Only native on another architecture here: a combination that cannot exist, listed
            // once as not applicable, with no rows and no skipped case.
            assert_eq!(backend.applicable(v), Err(reason.clone()));
            assert_eq!((passed, failed, skipped), (0, 0, 0), "{}", report.to_human());
            assert!(report.rows.is_empty(), "{}", report.to_human());
            let na: Vec<(&str, BackendKind, &str)> =
                report.not_applicable.iter().map(|n| (n.variant, n.backend, n.reason.as_str())).collect();
            assert_eq!(na, [(v.name, backend, reason.as_str())]);
            assert_eq!(report.status(), ExitCode::Error, "nothing ran");
        }
    }
}

//! Unicorn's wall-clock bound (issue 28 item 6): a call that stays under its instruction budget
//! but runs too long is a hang finding naming the bound, as on qemu and native. The fixture
//! (tests/fixtures/x86_64/loop.S) never returns; the test raises the instruction budget out of
//! reach (`--call-instructions 1099511627776`) and lowers the bound to one second
//! (`--batch-seconds 1`), through the same `Limits` the options set.

use std::time::{Duration, Instant};

use kernel_lab::backend::{BackendKind, Limits};
use kernel_lab::batch::Placement;
use kernel_lab::finding::Class;
use kernel_lab::report::Verdict;

use crate::common::{fixture_image, fixture_kernels, one_vector_set, variant, FIXTURE_LIMITS, SEED};

#[test]
fn a_unicorn_call_under_its_instruction_budget_hangs_at_the_wall_clock_bound() {
    let v = variant("x86_64");
    let (_dir, cfg) = fixture_kernels("x86_64", "poly1305.S", "loop.S");
    let image = fixture_image(&cfg, v, "loop.S");
    let set = one_vector_set("poly1305/rfc8439.json", |x| x.msg_len() >= 16);
    let limits = Limits { batch_time: Duration::from_secs(1), call_instructions: 1 << 40, ..FIXTURE_LIMITS };
    let mut backend = BackendKind::Unicorn.open(v, &image, limits).expect("unicorn");
    let started = Instant::now();
    let progress = &mut kernel_lab::progress::ignore;
    let row = kernel_lab::run::run_set_with_progress(backend.as_mut(), v, &image, &set, SEED, Placement::End, progress);
    let took = started.elapsed();
    let Some(Verdict::Failed(findings)) = row.cases.first().map(|c| &c.verdict) else { panic!("{row:?}") };
    let f = &findings[0];
    assert_eq!(f.class, Class::Hang, "{f}");
    assert!(
        f.text.contains("hang: batch still running after 1.0 s")
            && f.text.contains("at poly1305_processBlocks")
            && f.text.contains("wall-clock bound")
            && f.text.contains("--batch-seconds"),
        "{f}"
    );
    // One bound, not the instruction budget (2^40 instructions take hours) nor one per call:
    // the batch is given up after its first hang.
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(8), "{took:?}");
}

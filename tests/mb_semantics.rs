//! Multi-block semantics: an `implCompressMB` that processes one block too many or too few, or
//! returns the wrong ofs, fails the named (ofs, limit) cases of vectors/md5/mb-semantics.json
//! on every backend.

use kernel_lab::backend::BackendKind;
use kernel_lab::paths;
use kernel_lab::run;
use kernel_lab::variant::Kernel;

use crate::common::{mutated_kernels, variant};

/// (what the bug is, text replaced in kernels/x86_64/md5.S, replacement, a case that must fail,
/// a case that must still pass).
const MB_BUGS: [(&str, &str, &str, &str, &str); 3] = [
    (
        "one block too many when limit - ofs is not a multiple of 64",
        "        cmp     edx, ecx\n        jle",
        "        lea     eax, [rcx + 63]\n        cmp     edx, eax\n        jle",
        "implCompressMB limit - ofs = 65",
        "implCompressMB limit - ofs = 64 (two blocks)",
    ),
    (
        "one block too few when limit - ofs is a multiple of 64",
        "        jle     .Lmd5_block",
        "        jl      .Lmd5_block",
        "implCompressMB limit - ofs = 64 (two blocks)",
        "implCompressMB limit - ofs = 65",
    ),
    (
        "returns the ofs of the last processed block instead of the first unprocessed one",
        "        mov     eax, edx                        /* return ofs */",
        "        lea     eax, [rdx - 64]",
        "implCompressMB limit - ofs = 127",
        "implCompress one block from a random state",
    ),
];

#[test]
fn mb_counting_bugs_fail_named_cases_on_every_backend() {
    let v = variant("x86_64");
    for (bug, from, to, fails, passes) in MB_BUGS {
        let (_dir, build) = mutated_kernels("x86_64", "md5.S", from, to);
        let cfg = crate::common::config_with(
            v,
            BackendKind::ALL.to_vec(),
            Kernel::Md5,
            vec![paths::vectors_dir().join("md5/mb-semantics.json")],
            build,
        );
        let report = run::run(&cfg);
        assert_eq!(report.rows.len(), 3, "{bug}: {}", report.to_human());
        for row in &report.rows {
            let names: Vec<&str> = row.failed().into_iter().map(|f| f.name).collect();
            // Case names are the vector's name plus ` [guarded]` or ` @+N`.
            let of = |vector: &str| names.iter().any(|n| n.strip_prefix(vector).is_some_and(|r| r.starts_with(' ')));
            assert!(of(fails), "{bug} on {}: {fails:?} must fail; failed: {names:?}", row.backend);
            assert!(!of(passes), "{bug} on {}: {passes:?} must pass", row.backend);
        }
    }
}

/// A one-block-ahead preload (8 bytes of the next block read in every iteration, the last one
/// included) is invisible in the digests but fails the guarded cases, whose input ends at a
/// guard page, on every backend.
#[test]
fn a_preload_past_the_last_block_fails_the_guarded_cases() {
    let preload = "        /* do { ... } while (ofs <= limit): signed 32-bit compare, as in Java */\n";
    let with_preload = "        mov     rax, qword ptr [rdi + 64]       /* preload the next block (the bug) */\n        /* do { ... } while (ofs <= limit): signed 32-bit compare, as in Java */\n";
    let (_dir, build) = mutated_kernels("x86_64", "md5.S", preload, with_preload);
    let files = vec![paths::vectors_dir().join("md5/mb-semantics.json")];
    let cfg = crate::common::config_with(variant("x86_64"), BackendKind::ALL.to_vec(), Kernel::Md5, files, build);
    let report = run::run(&cfg);
    assert_eq!(report.rows.len(), 3, "{}", report.to_human());
    for row in &report.rows {
        let guarded: Vec<_> = row.failed().into_iter().filter(|f| !f.name.contains(" @+")).collect();
        assert!(!guarded.is_empty(), "{}: no guarded case failed", row.backend);
        for f in guarded {
            let text = &f.findings[0].text;
            assert!(
                text.contains("byte") && text.contains("past the end of input"),
                "{} / {}: {text}",
                row.backend,
                f.name
            );
        }
        // The packed offset cases read valid memory and compute right digests: only the guard
        // pages see this bug.
        assert!(row.failed().into_iter().all(|f| !f.name.contains(" @+")), "{}: an offset case failed", row.backend);
    }
}

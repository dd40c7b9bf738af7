//! Alignment rules QEMU does not model (lab/src/align.rs), on every backend that runs the case:
//! an sp-based access with sp off 16-byte alignment (AArch64 hardware faults: SP alignment
//! check), a call with a misaligned sp (x86_64 and riscv64 psABIs), and an aligned-only
//! `movdqa` on a misaligned input (qemu and native see a #GP without an address, Unicorn does
//! not check). Fixtures: tests/fixtures/README.md. The bundled kernels raise none of them.

use kernel_lab::align;
use kernel_lab::backend::BackendKind;
use kernel_lab::finding::{Class, Finding};
use kernel_lab::image::Image;
use kernel_lab::report::Row;
use kernel_lab::run;
use kernel_lab::variant::VARIANTS;
use kernel_lab::vectors::VectorSet;
use rstest::rstest;

use crate::common::{build, fixture_image, fixture_kernels, one_vector_set, run_fixture_set, variant};

/// What a fixture gave: the static image findings and, per backend, the row.
struct Outcome {
    image_findings: Vec<Finding>,
    rows: Vec<(BackendKind, Row)>,
}

fn run_fixture(name: &str, file: &str, fixture: &str, set: &VectorSet) -> Outcome {
    let v = variant(name);
    let (_dir, cfg) = fixture_kernels(v.arch.name(), file, fixture);
    let image: Image = fixture_image(&cfg, v, fixture);
    let image_findings = run::scan_image(v, &image).0.into_iter().map(|f| f.finding).collect();
    let rows = BackendKind::ALL
        .into_iter()
        .filter(|k| k.supports(v).is_ok())
        .map(|k| (k, run_fixture_set(k, v, &image, set)))
        .collect();
    Outcome { image_findings, rows }
}

/// The value after `prefix` in `text`, read as hex up to the first character that is not a
/// hex digit.
fn hex_after(text: &str, prefix: &str) -> u64 {
    let at = text.find(prefix).unwrap_or_else(|| panic!("no {prefix:?} in {text}")) + prefix.len();
    let digits: String = text[at..].chars().take_while(char::is_ascii_hexdigit).collect();
    u64::from_str_radix(&digits, 16).unwrap_or_else(|e| panic!("{digits:?} in {text}: {e}"))
}

/// Every failed case's findings on `kind`, flattened.
fn failures(o: &Outcome, kind: BackendKind) -> Vec<&Finding> {
    let row = &o.rows.iter().find(|(k, _)| *k == kind).unwrap_or_else(|| panic!("{kind} did not run")).1;
    row.failed().into_iter().flat_map(|c| c.findings.iter()).collect()
}

/// A misaligned sp where the rule checks it: on Unicorn every case fails with the instruction,
/// its place and sp's value (8 mod 16); qemu cannot see it, and the static scan names the same
/// instruction and the adjustment that broke the alignment as an image finding of the run.
#[rstest]
#[case("aarch64", "poly1305.S", "sp_misaligned.S", "`str x0, [sp]` at poly1305_processBlocks+0x4", "sub sp, sp, #8")]
#[case("x86_64", "md5.S", "call_misaligned.S", "at md5_implCompress (", "")]
#[case("riscv64", "md5.S", "call_misaligned.S", "`jal", "addi sp, sp, -8")]
fn a_misaligned_sp_is_named_by_unicorn_and_by_the_static_scan(
    #[case] name: &str,
    #[case] file: &str,
    #[case] fixture: &str,
    #[case] at: &str,
    #[case] moved_by: &str,
) {
    let set = if file == "md5.S" {
        one_vector_set("md5/rfc1321.json", |v| v.msg_len() == 3)
    } else {
        one_vector_set("poly1305/rfc8439.json", |v| (16..32).contains(&v.msg_len()))
    };
    let o = run_fixture(name, file, fixture, &set);
    let stat: Vec<&Finding> = o.image_findings.iter().filter(|f| f.text.contains("16-byte alignment")).collect();
    assert_eq!(stat.len(), if name == "aarch64" { 2 } else { 1 }, "{:#?}", o.image_findings);
    let s = stat[0];
    assert_eq!(s.class, Class::Abi, "{s:?}");
    assert!(s.text.contains("sp is 8 bytes off 16-byte alignment here") && s.text.contains(moved_by), "{s:?}");
    let dynamic = failures(&o, BackendKind::Unicorn);
    let row = &o.rows.iter().find(|(k, _)| *k == BackendKind::Unicorn).expect("unicorn").1;
    assert_eq!(row.passed(), 0, "every call makes the access: {dynamic:#?}");
    for f in dynamic {
        assert_eq!(f.class, Class::Abi, "{f:?}");
        assert!(f.text.contains(at) && f.text.contains("(pc 0x"), "{f:?}");
        assert_eq!(hex_after(&f.text, "sp is 0x") % 16, 8, "{f:?}");
        assert!(f.text.contains("not 16-byte aligned"), "{f:?}");
    }
    // qemu and native run it as the CPU does (a call is legal; QEMU has no SP alignment check).
    for (kind, row) in o.rows.iter().filter(|(k, _)| *k != BackendKind::Unicorn) {
        assert!(row.failed().is_empty(), "{kind}: {:#?}", row.failed().first().copied());
    }
}

/// `movdqa xmm0, [rdi]` fails on every backend exactly where the input is not 16-byte aligned,
/// with the same sentence: the instruction, the alignment and the address it got, inside the
/// input. (qemu and native see a #GP without an address; Unicorn does not check by itself.)
#[test]
fn an_aligned_only_load_from_a_misaligned_input_is_named_on_every_backend() {
    let set = one_vector_set("poly1305/rfc8439.json", |v| v.msg_len() >= 32);
    let o = run_fixture("x86_64", "poly1305.S", "movdqa.S", &set);
    assert_eq!(o.rows.len(), 3, "unicorn, qemu and native");
    let mut per_backend = Vec::new();
    for (kind, row) in &o.rows {
        assert!(row.passed() > 0, "{kind}: an aligned input passes");
        assert!(!row.failed().is_empty(), "{kind}: a misaligned input fails");
        for case in &row.failed() {
            let f = case.findings.first().expect("a finding");
            assert_eq!(f.class, Class::Fault, "{kind}: {f:?}");
            let want = "`movdqa xmm0, xmmword ptr [rdi]` at poly1305_processBlocks+0x6 (pc 0x";
            assert!(f.text.contains(want), "{kind}: {f:?}");
            assert!(f.text.contains("needs a 16-byte-aligned address, got 0x"), "{kind}: {f:?}");
            assert_ne!(hex_after(&f.text, "got 0x") % 16, 0, "{kind}: {f:?}");
            assert!(f.text.contains("inside input (input[0]"), "{kind}: {f:?}");
            assert!(f.text.contains("#GP"), "{kind}: {f:?}");
        }
        let mut names: Vec<&str> = row.failed().into_iter().map(|c| c.name).collect();
        names.sort_unstable();
        per_backend.push((*kind, names));
    }
    let first = &per_backend[0].1;
    assert!(per_backend.iter().all(|(_, n)| n == first), "the same cases fail everywhere: {per_backend:#?}");
}

/// The exclusives that trap on qemu and Unicorn (misaligned.S: `input + 1`) are named the same
/// way on both: instruction, alignment, address inside the input.
#[rstest]
#[case("aarch64", "`ldxr x10, [x9]` at poly1305_processBlocks+0x4 (pc 0x", "needs a 8-byte-aligned address")]
#[case("riscv64", "`lr.d t1, (t0)` at poly1305_processBlocks+0x4 (pc 0x", "needs a 8-byte-aligned address")]
fn a_misaligned_exclusive_is_named_alike_on_qemu_and_unicorn(#[case] name: &str, #[case] at: &str, #[case] need: &str) {
    let set = one_vector_set("poly1305/rfc8439.json", |v| (16..32).contains(&v.msg_len()));
    let o = run_fixture(name, "poly1305.S", "misaligned.S", &set);
    for kind in [BackendKind::Unicorn, BackendKind::Qemu] {
        let found = failures(&o, kind);
        assert!(!found.is_empty(), "{kind}: nothing failed");
        for f in found {
            assert!(f.text.contains(at) && f.text.contains(need), "{kind}: {f:?}");
            assert!(f.text.contains("inside input (input[1];"), "the fixture's input + 1: {kind}: {f:?}");
            assert_ne!(hex_after(&f.text, "got 0x") % 8, 0, "{kind}: {f:?}");
        }
    }
}

/// The bundled kernels keep every rule: no static sp finding on any variant, and the Unicorn
/// hooks are in place where the rules look (AArch64's saves and restores through sp).
#[test]
fn the_bundled_kernels_break_no_alignment_rule() {
    for v in &VARIANTS {
        let image = build(v);
        let found = align::sp_scan(&image).expect("listing");
        assert!(found.is_empty(), "{}: {found:?}", v.name);
        let sites = align::hook_sites(&image).expect("listing");
        if v.arch.name() == "aarch64" {
            assert!(sites.len() >= 4, "{}: the md5 kernel's stp/str/ldr/ldp through sp: {sites:?}", v.name);
        }
    }
}

/// A call to the object's own local helper with sp off 16-byte alignment (OpenSSL's perlasm
/// calls `__poly1305_block` so) is the author's convention, not the psABI's: no image finding,
/// and every case passes on every backend, Unicorn's hooks included.
#[rstest]
#[case("x86_64")]
#[case("riscv64")]
fn a_call_to_a_local_helper_is_not_held_to_the_psabi_alignment(#[case] name: &str) {
    let set = one_vector_set("md5/rfc1321.json", |v| v.msg_len() == 3);
    let o = run_fixture(name, "md5.S", "call_local_helper.S", &set);
    let stat: Vec<&Finding> = o.image_findings.iter().filter(|f| f.text.contains("16-byte alignment")).collect();
    assert!(stat.is_empty(), "{stat:#?}");
    assert!(o.rows.iter().any(|(k, _)| *k == BackendKind::Unicorn), "Unicorn ran");
    for (kind, row) in &o.rows {
        assert!(row.passed() > 0 && row.failed().is_empty(), "{kind}: {:#?}", row.failed().first().copied());
    }
}

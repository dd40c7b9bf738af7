//! The checks fire: every broken kernel in tests/fixtures (README there) is reported with the
//! right class and register or address on every backend that can see it, and the real kernels
//! are clean (no ABI, memory, ISA or hang findings).

use std::time::Duration;

use kernel_lab::abi::Abi;
use kernel_lab::backend::{run_batch, BackendKind, Limits};
use kernel_lab::batch::{Arg, BatchBuilder, Placement};
use kernel_lab::cases::plan::Stubs;
use kernel_lab::finding::Class;
use kernel_lab::image::Image;
use kernel_lab::isa::{self, Violation};
use kernel_lab::paths;
use kernel_lab::reference::md5;
use kernel_lab::report::{Row, Verdict};
use kernel_lab::run;
use kernel_lab::toolchain;
use kernel_lab::variant::{Kernel, VARIANTS};
use kernel_lab::vectors::{self, VectorSet};
use rstest::rstest;

use crate::common::{build, fixture_kernels, variant, SEED};

/// Short budgets: the hang fixture must not cost the suite 20 s per call.
const LIMITS: Limits = Limits {
    batch_time: Duration::from_millis(500),
    call_instructions: 1_000_000,
    partial_loads: kernel_lab::backend::PartialLoads::Warn,
    witness: true,
};

/// One small vector per kernel: MD5 with three whole blocks (so `implCompressMB` loops), Poly1305
/// with one block (one call per case, so the hang fixture hangs only twice per backend).
fn small_set(kernel: Kernel) -> VectorSet {
    let (file, len) = match kernel {
        Kernel::Md5 => ("md5/openssl-misaligned.json", 192..256),
        Kernel::Poly1305 => ("poly1305/rfc8439.json", 16..32),
    };
    let (set, errors) = vectors::load_file(&paths::vectors_dir().join(file));
    assert!(errors.is_empty(), "{errors:?}");
    let mut set = set.expect(file);
    let v = set.vectors.iter().find(|v| len.contains(&v.msg_len())).expect("a vector of that length").clone();
    set.vectors = vec![v];
    set
}

/// What a fixture run produced: per backend the row, the static scan, and the instructions a
/// Unicorn call stops at.
struct Outcome {
    rows: Vec<(BackendKind, Row)>,
    violations: Vec<Violation>,
    stops: Vec<isa::UnicornStop>,
}

fn run_fixture(variant_name: &str, file: &str, fixture: &str, flush: Placement) -> Outcome {
    let v = variant(variant_name);
    let (_dir, cfg) = fixture_kernels(v.arch.name(), file, fixture);
    let path = toolchain::build_image(&cfg, v).unwrap_or_else(|e| panic!("{fixture}: {e}"));
    let image = Image::load(&path, v.arch).expect("image");
    let kernel = if file == "md5.S" { Kernel::Md5 } else { Kernel::Poly1305 };
    let set = small_set(kernel);
    let violations = isa::scan(&image, v).expect("ISA scan");
    let stops = isa::unicorn_stops(&image, v.extensions).expect("Unicorn stop scan");
    let mut rows = Vec::new();
    for kind in BackendKind::ALL.into_iter().filter(|k| k.supports(v).is_ok()) {
        let mut backend = kind.open(v, &image, LIMITS).unwrap_or_else(|e| panic!("{kind}: {e}"));
        rows.push((
            kind,
            run::run_set_with_progress(
                backend.as_mut(),
                v,
                &image,
                &set,
                SEED,
                flush,
                &mut kernel_lab::progress::ignore,
            ),
        ));
    }
    Outcome { rows, violations, stops }
}

/// Asserts that the first failing case on every backend in `on` has a finding of `class`
/// containing every one of `texts`.
fn assert_caught(o: &Outcome, on: &[BackendKind], class: Class, texts: &[&str]) {
    for (kind, row) in o.rows.iter().filter(|(k, _)| on.contains(k)) {
        let first = row.failed().first().copied().unwrap_or_else(|| panic!("{kind}: nothing failed"));
        assert!(
            first.findings.iter().any(|f| f.class == class && texts.iter().all(|t| f.text.contains(t))),
            "{kind}: expected a {} finding with {texts:?} in {:#?}",
            class.name(),
            first.findings
        );
    }
    let seen: Vec<BackendKind> = o.rows.iter().map(|(k, _)| *k).collect();
    assert!(on.iter().all(|k| seen.contains(k)), "backends run: {seen:?}, expected at least {on:?}");
}

const U: BackendKind = BackendKind::Unicorn;
const Q: BackendKind = BackendKind::Qemu;
const N: BackendKind = BackendKind::Native;

#[rstest]
#[case("riscv64", "md5.S", "clobber.S", &[U, Q], Class::Abi, &["s3 was not restored: before 0x", ", after 0x"])]
#[case("aarch64", "md5.S", "clobber.S", &[U, Q], Class::Abi, &["x19 was not restored: before 0x", ", after 0x"])]
#[case("x86_64", "md5.S", "clobber.S", &[U, Q, N], Class::Abi, &["rbx was not restored: before 0x", ", after 0x"])]
#[case("riscv64", "poly1305.S", "overread.S", &[U, Q], Class::Memory, &["1 byte past the end of input", "`lbu t1, 0(t0)`"])]
#[case("aarch64", "poly1305.S", "overread.S", &[U, Q], Class::Memory, &["1 byte past the end of input", "`ldrb w9, [x0, x1]`"])]
#[case("x86_64", "poly1305.S", "overread.S", &[U, Q, N], Class::Memory, &["1 byte past the end of input", "`movzx eax, byte ptr [rdi + rsi]`"])]
#[case("riscv64", "poly1305.S", "write_input.S", &[U, Q], Class::Memory, &["inside input (input[0]", "read-only", "`sb zero, 0(a0)`"])]
#[case("aarch64", "poly1305.S", "write_input.S", &[U, Q], Class::Memory, &["inside input (input[0]", "read-only"])]
#[case("x86_64", "poly1305.S", "write_input.S", &[U, Q, N], Class::Memory, &["inside input (input[0]", "read-only"])]
#[case("riscv64", "md5.S", "overwrite.S", &[U, Q], Class::Memory, &["1 byte past the end of state (state[16]", "`sb zero, 16(a1)`"])]
#[case("aarch64", "md5.S", "overwrite.S", &[U, Q], Class::Memory, &["1 byte past the end of state (state[16]"])]
#[case("x86_64", "md5.S", "overwrite.S", &[U, Q, N], Class::Memory, &["1 byte past the end of state (state[16]"])]
// The stack budget ends abi::STACK_BUDGET (4096) bytes below sp at the call, below the red zone
// where the psABI has one (x86_64: 128 bytes, abi.rs), so 4096 + 128 = 4224 there; the fixtures
// write 8 bytes past it.
#[case("riscv64", "poly1305.S", "stack.S", &[U, Q], Class::Memory, &["8 bytes below the stack budget (4096 bytes below sp"])]
#[case("aarch64", "poly1305.S", "stack.S", &[U, Q], Class::Memory, &["8 bytes below the stack budget (4096 bytes below sp"])]
#[case("x86_64", "poly1305.S", "stack.S", &[U, Q, N], Class::Memory, &["8 bytes below the stack budget (4224 bytes below sp"])]
#[case("riscv64", "poly1305.S", "loop.S", &[U, Q], Class::Hang, &["hang: ", "at poly1305_processBlocks", "(pc 0x"])]
#[case("aarch64", "poly1305.S", "loop.S", &[U, Q], Class::Hang, &["hang: ", "at poly1305_processBlocks", "(pc 0x"])]
#[case("x86_64", "poly1305.S", "loop.S", &[U, Q, N], Class::Hang, &["hang: ", "at poly1305_processBlocks", "(pc 0x"])]
#[case("riscv64", "poly1305.S", "syscall.S", &[U], Class::Syscall, &["system call from a kernel at poly1305_processBlocks+0x4", "`ecall`"])]
#[case("aarch64", "poly1305.S", "syscall.S", &[U], Class::Syscall, &["system call from a kernel at poly1305_processBlocks+0x4", "`svc #0`"])]
#[case("x86_64", "poly1305.S", "syscall.S", &[U], Class::Syscall, &["system call from a kernel at poly1305_processBlocks+0x5", "`syscall`"])]
#[case("x86_64", "poly1305.S", "syscall.S", &[N], Class::Syscall, &["system call 39 (getpid) attempted and refused at poly1305_processBlocks+0x5", "`syscall`"])]
#[case("riscv64", "md5.S", "ror.S", &[U, Q], Class::Fault, &["illegal instruction at md5_implCompress (pc 0x", "`ror t0, t0, t1`"])]
// Named from the instruction on both (tests/alignment.rs): Unicorn's hook, qemu's SIGBUS.
#[case("riscv64", "poly1305.S", "misaligned.S", &[U, Q], Class::Fault, &["`lr.d t1, (t0)` at poly1305_processBlocks+0x4 (pc 0x", "needs a 8-byte-aligned address"])]
#[case("aarch64", "poly1305.S", "misaligned.S", &[U, Q], Class::Fault, &["`ldxr x10, [x9]` at poly1305_processBlocks+0x4 (pc 0x", "needs a 8-byte-aligned address"])]
fn broken_kernel_is_caught(
    #[case] variant_name: &str,
    #[case] file: &str,
    #[case] fixture: &str,
    #[case] on: &[BackendKind],
    #[case] class: Class,
    #[case] texts: &[&str],
) {
    let o = run_fixture(variant_name, file, fixture, Placement::End);
    assert_caught(&o, on, class, texts);
}

/// A kernel that keeps state in a callee-saved register fails with that register named even
/// though every digest is right.
#[rstest]
fn a_clobbered_register_fails_even_with_right_digests(#[values("riscv64", "aarch64", "x86_64")] name: &str) {
    let o = run_fixture(name, "md5.S", "clobber.S", Placement::End);
    for (kind, row) in &o.rows {
        assert_eq!(row.passed(), 0, "{kind}");
        for case in &row.failed() {
            assert!(case.findings.iter().all(|f| f.class == Class::Abi), "{kind}: {:#?}", case.findings);
        }
    }
}

/// qemu-user performs a guest's system call itself, so there the static scan is what sees it:
/// every variant's scan names the instruction, its address and symbol.
#[rstest]
#[case("riscv64", "`ecall` at poly1305_processBlocks+0x4")]
#[case("aarch64", "`svc #0` at poly1305_processBlocks+0x4")]
#[case("x86_64", "`syscall` at poly1305_processBlocks+0x5")]
fn a_system_call_is_found_by_the_static_scan(#[case] name: &str, #[case] text: &str) {
    let o = run_fixture(name, "poly1305.S", "syscall.S", Placement::End);
    assert_eq!(o.violations.len(), 1, "{:?}", o.violations);
    let v = o.violations[0].to_string();
    assert!(v.contains(text) && v.contains("a system call in kernel code"), "{v}");
}

#[test]
fn ror_in_the_base_riscv64_build_is_an_isa_violation() {
    let o = run_fixture("riscv64", "md5.S", "ror.S", Placement::End);
    let texts: Vec<String> = o.violations.iter().map(Violation::to_string).collect();
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(
        texts[0].starts_with("`ror t0, t0, t1` at md5_implCompress (0x") && texts[0].contains("not in RV64GC"),
        "{texts:?}"
    );
}

#[test]
fn vex_code_is_an_isa_violation_and_is_not_run_on_unicorn() {
    let o = run_fixture("x86_64", "md5.S", "vex.S", Placement::End);
    let texts: Vec<String> = o.violations.iter().map(Violation::to_string).collect();
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(texts[0].contains("`vpxor xmm0, xmm0, xmm0` at md5_implCompress") && texts[0].contains("VEX"), "{texts:?}");
    assert_eq!(o.stops.len(), 1, "{:?}", o.stops);
    assert_eq!((o.stops[0].insn.as_str(), o.stops[0].len), ("vpxor xmm0, xmm0, xmm0", 4));
    // Unicorn runs the image and stops every call at the vpxor: skipped, none failed or passed.
    let (_, uc) = o.rows.iter().find(|(k, _)| *k == BackendKind::Unicorn).expect("Unicorn ran the image");
    assert!(!uc.cases.is_empty());
    for c in &uc.cases {
        let Verdict::Skipped(why) = &c.verdict else { panic!("{}: {:?}", c.name, c.verdict) };
        assert!(
            why.starts_with(
                "not run past `vpxor xmm0, xmm0, xmm0` at md5_implCompress: Unicorn 2.1.5 cannot execute avx"
            ),
            "{why}"
        );
    }
}

/// Flush-at-start placement catches an under-read on every backend; with flush-at-end only
/// Unicorn, which checks the bytes before the input on its first page exactly, sees it.
#[rstest]
fn an_under_read_is_caught_with_inputs_flush_at_the_start(#[values("riscv64", "aarch64", "x86_64")] name: &str) {
    let on: &[BackendKind] = if name == "x86_64" { &[U, Q, N] } else { &[U, Q] };
    let o = run_fixture(name, "poly1305.S", "underread.S", Placement::Start);
    assert_caught(&o, on, Class::Memory, &["1 byte before the start of input"]);
    let end = run_fixture(name, "poly1305.S", "underread.S", Placement::End);
    assert_caught(&end, &[U], Class::Memory, &["1 byte before the start of input", "checks these bytes exactly"]);
    for (kind, row) in end.rows.iter().filter(|(k, _)| *k != U) {
        assert!(
            row.failed().into_iter().all(|c| c.findings.iter().all(|f| f.class != Class::Memory)),
            "{kind}: flush at the end leaves the byte before the input inside the page"
        );
    }
}

/// Issue 28, a kernel telling Unicorn apart: `tell_process.S` (an MD5 wrapper, right digests)
/// reads the byte before its block only where it finds the driver's request loop (`lab_loop_sp`
/// nonzero). With the inputs flush at the end of their pages, qemu-user and native cannot see
/// that read (the byte lies on the same page) and pass every case; Unicorn, which now shows the
/// driver words a process guest holds, makes the kernel read it too and checks it exactly.
#[rstest]
fn a_kernel_that_under_reads_only_where_it_finds_a_process_is_caught_on_unicorn(
    #[values("riscv64", "aarch64", "x86_64")] name: &str,
) {
    let o = run_fixture(name, "md5.S", "tell_process.S", Placement::End);
    assert_caught(&o, &[U], Class::Memory, &["1 byte before the start of", "`", "checks these bytes exactly"]);
    for (kind, row) in o.rows.iter().filter(|(k, _)| *k != U) {
        let failed: Vec<_> = row.failed().into_iter().flat_map(|c| c.findings.clone()).collect();
        assert!(failed.is_empty(), "{kind}: the byte before the block lies on its page: {failed:#?}");
    }
}

/// A kernel that compares `int` arguments as 64-bit values passes with clean upper bits and
/// fails with the garbage the lab puts there (x86_64, aarch64: psABI leaves them undefined).
#[rstest]
fn relying_on_clean_upper_argument_bits_is_caught(#[values("aarch64", "x86_64")] name: &str) {
    let v = variant(name);
    let (_dir, cfg) = fixture_kernels(v.arch.name(), "md5.S", "upper_bits.S");
    let image = Image::load(&toolchain::build_image(&cfg, v).expect("build"), v.arch).expect("image");
    let e = Stubs::of(&image);
    let abi = Abi::of(v.arch);
    let msg: Vec<u8> = (0..192u8).collect();
    let mut want = md5::IV;
    md5::compress_mb(&mut want, &msg, 0, 128);
    // ofs = 0, limit = 128 (three blocks); upper halves (ofs, limit): clean, then garbage.
    for (garbage, clean) in [((0, 0), true), ((1, 0), false)] {
        let mut b = BatchBuilder::new(abi);
        let input = b.buffer("input", &msg, false, Placement::End);
        let state = b.output(&md5::state_to_bytes(&md5::IV));
        let args = [
            Arg::Ptr(input, 0),
            Arg::Ptr(state, 0),
            Arg::Imm(abi.int32_arg(0, garbage.0)),
            Arg::Imm(abi.int32_arg(128, garbage.1)),
        ];
        b.call(e.md5_compress_mb.expect("symbol"), args, SEED);
        let batch = b.layout(image.arena().expect("arena")).expect("layout");
        for kind in BackendKind::ALL.into_iter().filter(|k| k.supports(v).is_ok()) {
            let mut backend = kind.open(v, &image, LIMITS).expect("backend");
            let run = run_batch(backend.as_mut(), &batch).expect("run");
            let got = md5::state_from_bytes(batch.buffer(&run.resp, state));
            assert_eq!(got == want && run.faults.is_empty(), clean, "{name} on {kind}, upper bits {garbage:?}");
        }
    }
    // And `lab run`'s own garbage makes it fail.
    let o = run_fixture(name, "md5.S", "upper_bits.S", Placement::End);
    for (kind, row) in &o.rows {
        assert!(!row.failed().is_empty(), "{kind}: garbage upper bits went unnoticed");
    }
}

/// The real kernels: no ISA violation and no system call in any variant's image; no code
/// Unicorn cannot execute (it would stop calls there) in any image Unicorn runs, i.e. vector code only where the row
/// declares it (x86_64+avx2 and up hold the AVX2 and IFMA Poly1305 paths).
#[test]
fn real_kernels_pass_the_static_scan() {
    for v in &VARIANTS {
        let image = build(v);
        let found = isa::scan(&image, v).expect("scan");
        assert!(found.is_empty(), "{v}: {found:?}");
        let stops = isa::unicorn_stops(&image, v.extensions).expect("scan");
        assert!(stops.is_empty() || BackendKind::Unicorn.supports(v).is_err(), "{v}: {stops:?}");
    }
}

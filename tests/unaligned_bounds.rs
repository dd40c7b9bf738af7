//! Unicorn's byte-exact bounds with unaligned multi-byte loads. QEMU cuts an unaligned load on
//! the MMIO path into aligned pieces, so a piece may touch bytes outside a buffer while the
//! load does not (the backend then re-runs the call under a memory hook, which sees the load
//! whole). A load that reaches one byte outside the input is still caught, with its
//! instruction; loads that stay inside it, misaligned or not, pass. The rows here run with
//! `--partial-loads fail`: an aligned load of the word holding the input's last byte (a
//! partial load, README) is then a `partial-load` finding, and the over-read fixtures below
//! are such loads.

use kernel_lab::backend::{BackendKind, Limits, PartialLoads};
use kernel_lab::batch::Placement;
use kernel_lab::finding::Class;
use kernel_lab::report::Row;
use kernel_lab::vectors::{self, Vector};
use kernel_lab::{paths, run};
use rstest::rstest;

use crate::common::{fixture_image, generated_fixture_kernels, variant, FIXTURE_LIMITS, SEED};

/// `poly1305_processBlocks(input, length, ...)` that first makes `loads` (8-byte loads
/// relative to the input's start or end) when `length >= 9`, then runs the real kernel.
fn fixture(arch: &str, loads: &str) -> String {
    match arch {
        "aarch64" => format!(
            "#define poly1305_processBlocks real_poly1305_processBlocks\n#include \"real_poly1305.inc\"\n\
             #undef poly1305_processBlocks\n    .text\n    .globl poly1305_processBlocks\n    .balign 4\n\
             poly1305_processBlocks:\n    cmp x1, #9\n    b.lo 1f\n    add x10, x0, x1\n{loads}\n\
             1:  b real_poly1305_processBlocks\n"
        ),
        _ => format!(
            "#define poly1305_processBlocks real_poly1305_processBlocks\n#include \"real_poly1305.inc\"\n\
             #undef poly1305_processBlocks\n        .intel_syntax noprefix\n        .text\n\
             .globl poly1305_processBlocks\n        .p2align 4\npoly1305_processBlocks:\n\
             cmp rsi, 9\n        jb 1f\n{loads}\n1:      jmp real_poly1305_processBlocks\n"
        ),
    }
}

/// The Unicorn row of the Poly1305 vectors of 16..=64 bytes (each laid out against a guard
/// page and at its misaligned offset) with `loads` in front of the kernel.
fn unicorn_row(arch: &str, loads: &str) -> Row {
    let keep = |v: &Vector| (16..=64).contains(&v.msg_len());
    unicorn_row_of(arch, ("poly1305.S", &fixture(arch, loads)), "poly1305/rfc8439.json", keep, Placement::End)
}

/// The Unicorn row of the vectors of bundled file `set` that `keep` keeps, on an image whose
/// kernel file `file.0` is the source `file.1`.
fn unicorn_row_of(
    arch: &str,
    file: (&str, &str),
    set: &str,
    keep: impl Fn(&Vector) -> bool,
    guard_at: Placement,
) -> Row {
    let v = variant(arch);
    let (_dir, cfg) = generated_fixture_kernels(arch, file.0, file.1);
    let image = fixture_image(&cfg, v, file.1);
    let (loaded, errors) = vectors::load_file(&paths::vectors_dir().join(set));
    assert!(errors.is_empty(), "{errors:?}");
    let mut loaded = loaded.expect(set);
    loaded.vectors.retain(|v| keep(v));
    assert!(!loaded.vectors.is_empty());
    let limits = Limits { partial_loads: PartialLoads::Fail, ..FIXTURE_LIMITS };
    let mut backend = BackendKind::Unicorn.open(v, &image, limits).expect("unicorn");
    run::run_set_with_progress(backend.as_mut(), v, &image, &loaded, SEED, guard_at, &mut kernel_lab::progress::ignore)
}

/// The classes of a load reaching outside the input: `memory`, or `partial-load` where the load
/// happens to be aligned and so stays inside the 8-byte word holding the input's last byte.
fn outside(class: Class) -> bool {
    matches!(class, Class::Memory | Class::PartialLoad)
}

/// 8-byte loads inside the input, at its start + 1 and ending 1 byte before its end: for
/// most offsets both are unaligned and their pieces reach past the input.
#[rstest]
#[case("aarch64", "    ldur x9, [x0, #1]\n    ldur x9, [x10, #-9]")]
#[case("x86_64", "        mov rax, qword ptr [rdi + 1]\n        mov rax, qword ptr [rdi + rsi - 9]")]
fn unaligned_loads_inside_the_input_pass(#[case] arch: &str, #[case] loads: &str) {
    let row = unicorn_row(arch, loads);
    assert!(row.failed().is_empty(), "{:#?}", row.failed());
    assert!(row.passed() > 0);
}

/// An 8-byte load from one byte before the input, or reaching one byte past its end, fails
/// the cases that make it, naming the byte and the load.
#[rstest]
#[case("aarch64", "    ldur x9, [x0, #-1]", "1 byte before the start of input", "ldur x9, [x0, #-1]")]
#[case("aarch64", "    ldur x9, [x10, #-7]", "1 byte past the end of input", "ldur x9, [x10, #-7]")]
#[case(
    "x86_64",
    "        mov rax, qword ptr [rdi - 1]",
    "1 byte before the start of input",
    "mov rax, qword ptr [rdi - 1]"
)]
#[case(
    "x86_64",
    "        mov rax, qword ptr [rdi + rsi - 7]",
    "1 byte past the end of input",
    "mov rax, qword ptr [rdi + rsi - 7]"
)]
fn an_unaligned_load_one_byte_outside_is_caught(
    #[case] arch: &str,
    #[case] loads: &str,
    #[case] place: &str,
    #[case] insn: &str,
) {
    let row = unicorn_row(arch, loads);
    // A case whose calls all start past the input's start (or end before its end) makes no
    // such load; the misaligned twins and the guarded layouts of the others do.
    assert!(row.failed().len() >= 5, "{} failed, {} passed", row.failed().len(), row.passed());
    for case in &row.failed() {
        assert!(
            case.findings.iter().any(|f| outside(f.class) && f.text.contains(place) && f.text.contains(insn)),
            "{:#?}",
            case.findings
        );
    }
}

/// `md5_implCompress(buf, state)` that, when `buf` does not end against a guard page (a fault
/// there would re-run the whole batch at once) and `state` still holds the MD5 initial value
/// (RFC 1321 3.3), first loads 8 bytes at `buf + 60`: 4 bytes past the 64-byte block. The first
/// run of the batch only notes the read (it may be a piece of a legal unaligned load); the
/// call's re-run after the batch must start from the state the call started from (the driver
/// copies it again from the buffer before it), so it makes the load again: the case fails.
/// (review-5 asked whether a data-dependent over-read escapes the deferred confirmation; a
/// one-block message, as the buffered blocks of a longer one share one buffer.)
#[test]
fn a_data_dependent_load_outside_is_caught_by_the_confirmation_after_the_batch() {
    let src = "#define md5_implCompress real_md5_implCompress\n#include \"real_md5.inc\"\n\
               #undef md5_implCompress\n        .intel_syntax noprefix\n        .text\n\
               .globl md5_implCompress\n        .p2align 4\nmd5_implCompress:\n\
               lea rax, [rdi + 64]\n        test eax, 4095\n        jz 1f\n\
               cmp dword ptr [rsi], 0x67452301\n        jne 1f\n\
               mov rax, qword ptr [rdi + 60]\n1:      jmp real_md5_implCompress\n";
    // One-block messages: their only implCompress call reads the last block of its buffer.
    let row = unicorn_row_of("x86_64", ("md5.S", src), "md5/rfc1321.json", |v| v.msg_len() < 56, Placement::End);
    assert!(
        row.failed()
            .into_iter()
            .any(|c| c.findings.iter().any(|f| outside(f.class) && f.text.contains("past the end"))),
        "{} failed, {} passed: the over-read went unreported: {:#?}",
        row.failed().len(),
        row.passed(),
        row.failed()
    );
}

/// The same over-read made on every run, only where the input does not end against a guard
/// page: no call of the batch faults, so only the confirmation after the batch
/// (`confirm_deferred`) can find it. (The tests above also fault at the guarded layouts, which
/// re-runs the whole batch stopping at once, and so never reach that path.)
#[test]
fn an_over_read_in_a_batch_without_faults_is_caught_after_the_batch() {
    let loads = "        lea rax, [rdi + rsi]\n        test eax, 4095\n        jz 1f\n\
                 mov rax, qword ptr [rdi + rsi - 7]";
    let row = unicorn_row("x86_64", loads);
    assert!(row.failed().len() >= 3, "{} failed, {} passed", row.failed().len(), row.passed());
    for case in &row.failed() {
        assert!(
            case.findings.iter().any(|f| outside(f.class) && f.text.contains("1 byte past the end of input")),
            "{:#?}",
            case.findings
        );
    }
}

/// QEMU's AArch64 target has 1 KiB pages, so Unicorn sends only the 1 KiB pages near a buffer's
/// edges through its MMIO alias. A 1024-byte input laid flush against the guard below it ends
/// on a 1 KiB boundary: its last 1 KiB page lies wholly inside it, yet an 8-byte load 7 bytes
/// before its end starts there and reaches 1 byte past it. That page must stay on the alias
/// (where the confirmation hooks see the load whole), or the over-read would pass.
#[test]
fn an_over_read_from_a_1_kib_page_inside_the_input_is_caught() {
    let loads = "    ldur x9, [x10, #-7]";
    let file = ("poly1305.S", &fixture("aarch64", loads)[..]);
    let row = unicorn_row_of("aarch64", file, "poly1305/layout.json", |v| v.msg_len() == 1024, Placement::Start);
    let guarded = row.failed().into_iter().find(|c| c.name.ends_with(" [guarded]"));
    let guarded = guarded.unwrap_or_else(|| panic!("the guarded case passed: {:#?}", row.failed()));
    assert!(
        guarded.findings.iter().any(|f| f.class == Class::Memory && f.text.contains("1 byte past the end of input")),
        "{:#?}",
        guarded.findings
    );
}

/// A buffer that ends flush against its guard page needs no byte-exact check at its end: its
/// last page runs on RAM. An 8-byte load 7 bytes before the end of a 1 MiB input crosses into
/// the guard page, and is still named as reaching 1 byte past the end, with its instruction.
#[rstest]
#[case("aarch64", "    ldur x9, [x10, #-7]", "ldur x9, [x10, #-7]")]
#[case("x86_64", "        mov rax, qword ptr [rdi + rsi - 7]", "mov rax, qword ptr [rdi + rsi - 7]")]
fn an_over_read_into_the_guard_after_a_long_input_is_caught(
    #[case] arch: &str,
    #[case] loads: &str,
    #[case] insn: &str,
) {
    let file = ("poly1305.S", &fixture(arch, loads)[..]);
    let row = unicorn_row_of(arch, file, "poly1305/layout.json", |v| v.msg_len() > 4096, Placement::End);
    let guarded = row.failed().into_iter().find(|c| c.name.ends_with(" [guarded]"));
    let guarded = guarded.unwrap_or_else(|| panic!("the guarded case passed: {:#?}", row.failed()));
    assert!(
        guarded.findings.iter().any(|f| f.class == Class::Memory
            && f.text.contains("1 byte past the end of input")
            && f.text.contains(insn)),
        "{:#?}",
        guarded.findings
    );
}

/// `poly1305_processBlocks` that reads the aligned 8 bytes holding its input's last byte when
/// the input does not end on 8 bytes (1 to 7 bytes past the end: one MMIO piece that also
/// touches the input, which the batch's run only notes), unless `detect` (x86_64, may use rax,
/// r8-r11) jumps to `4f`: it thinks the call is being run again, and instead makes a legal
/// unaligned load of the input's last 8 bytes, whose pieces are the same.
fn rerun_aware_over_read(detect: &str) -> String {
    format!(
        "#define poly1305_processBlocks real_poly1305_processBlocks\n#include \"real_poly1305.inc\"\n\
         #undef poly1305_processBlocks\n        .intel_syntax noprefix\n        .text\n\
         .globl poly1305_processBlocks\n        .p2align 4\npoly1305_processBlocks:\n\
         mov rax, rsi\n        and rax, -16\n        jz 1f\n        add rax, rdi\n\
         test eax, 7\n        jz 1f\n{detect}\n\
         and rax, -8\n        mov r10, qword ptr [rax]\n        jmp 1f\n\
         4:      mov r10, qword ptr [rax - 8]\n1:      jmp real_poly1305_processBlocks\n"
    )
}

/// Tells a re-run from the batch's run by the driver's header: `start == current` and
/// `ncalls == current + 1` (a confirmation runs the call alone).
const DETECT_BY_HEADER: &str = "        lea r8, [rip + lab_arena]\n        mov r9, qword ptr [r8 + 0x20]\n\
     cmp r9, qword ptr [r8 + 0x08]\n        jne 5f\n        lea r9, [r9 + 1]\n\
     cmp r9, qword ptr [r8]\n        je 4f\n5:";

/// Tells a re-run by a ring of the last 64 input addresses kept below the stack pointer (the
/// kernel stack keeps its bytes from call to call).
const DETECT_BY_STACK: &str = "        lea r8, [rsp - 2048]\n        xor r9d, r9d\n\
     3:      cmp rdi, qword ptr [r8 + 8 * r9]\n        je 4f\n        inc r9d\n        cmp r9d, 64\n\
     jb 3b\n        mov r9, qword ptr [rsp - 2056]\n        and r9d, 63\n\
     mov qword ptr [r8 + 8 * r9], rdi\n        inc r9\n        mov qword ptr [rsp - 2056], r9";

/// The same over-read of 1..7 bytes past a misaligned input (a partial load, a finding under
/// `--partial-loads fail`), with the kernel's re-run detector `detect`: fails on Unicorn (the
/// cases of the guarded layouts, naming the bytes past the end).
fn assert_the_over_read_fails(detect: &str) {
    let src = rerun_aware_over_read(detect);
    let keep = |v: &Vector| (16..=64).contains(&v.msg_len());
    let row = unicorn_row_of("x86_64", ("poly1305.S", &src), "poly1305/rfc8439.json", keep, Placement::End);
    assert!(
        row.failed().len() >= 3,
        "{} failed, {} passed: the over-read went unreported",
        row.failed().len(),
        row.passed()
    );
    for case in &row.failed() {
        assert!(
            case.findings.iter().any(|f| f.class == Class::PartialLoad && f.text.contains("past the end of input")),
            "{:#?}",
            case.findings
        );
    }
}

/// The over-read made every time: the confirmation re-run sees the load whole and pins it.
#[test]
fn an_over_read_past_a_misaligned_input_made_every_time_fails() {
    assert_the_over_read_fails("");
}

/// KNOWN LIMIT (review-6): an over-read made only when the kernel believes it is not being run
/// again (here from the driver's header: a confirmation runs the call alone) passes on Unicorn:
/// the illegal aligned load and the legal unaligned load its re-run makes instead give the same
/// MMIO pieces, and only a re-run under memory hooks tells instructions apart. Closing it needs
/// re-runs a kernel cannot tell (header, stack, later calls' buffers, timers) or hooks in the
/// batch's run (+60% CPU measured). qemu and native see this over-read only at the page.
#[test]
#[ignore = "known limit: a kernel that detects Unicorn's confirmation re-run (driver header) hides a sub-page over-read"]
fn an_over_read_hidden_from_re_runs_by_the_header_still_fails() {
    assert_the_over_read_fails(DETECT_BY_HEADER);
}

/// KNOWN LIMIT (review-6): as above, the re-run told by a ring of input addresses the kernel
/// keeps below its stack pointer (the stack keeps its bytes from call to call).
#[test]
#[ignore = "known limit: a kernel that detects Unicorn's confirmation re-run (stack leftovers) hides a sub-page over-read"]
fn an_over_read_hidden_from_re_runs_by_the_stack_still_fails() {
    assert_the_over_read_fails(DETECT_BY_STACK);
}

/// Counts the sights of each input address in a table below the stack pointer (64 slots by
/// page number) and tells a third sight or later as a re-run.
const DETECT_AFTER_TWO_SIGHTS: &str = "        mov r9, rdi\n        shr r9, 12\n        and r9d, 63\n\
     shl r9, 4\n        lea r8, [rsp - 2048]\n        add r8, r9\n        cmp rdi, qword ptr [r8]\n\
     je 3f\n        mov qword ptr [r8], rdi\n        mov qword ptr [r8 + 8], 0\n\
     3:      mov r9, qword ptr [r8 + 8]\n        inc r9\n        mov qword ptr [r8 + 8], r9\n\
     cmp r9, 2\n        ja 4f";

/// The same over-read made on the first two sights of a buffer only: the batch's run notes it,
/// the call's confirmation sees it whole and pins it, and the batch then runs again stopping
/// at once, where the kernel behaves. Unicorn must keep what the confirmation proved (review-6:
/// it failed only the first such call of each batch), so exactly the cases of the over-read
/// made every time fail, with the load's instruction.
#[test]
fn an_over_read_pinned_by_a_confirmation_stands_when_the_kernel_then_behaves() {
    let keep = |v: &Vector| (16..=64).contains(&v.msg_len());
    let row = |detect: &str| {
        let src = rerun_aware_over_read(detect);
        unicorn_row_of("x86_64", ("poly1305.S", &src), "poly1305/rfc8439.json", keep, Placement::End)
    };
    let names = |r: &Row| r.failed().into_iter().map(|c| c.name.to_string()).collect::<Vec<_>>();
    let (always, twice) = (row(""), row(DETECT_AFTER_TWO_SIGHTS));
    assert!(always.failed().len() >= 3, "{} failed", always.failed().len());
    assert_eq!(names(&twice), names(&always));
    for case in &twice.failed() {
        let named = |f: &kernel_lab::finding::Finding| {
            f.class == Class::PartialLoad
                && f.text.contains("past the end of input")
                && f.text.contains("mov r10, qword ptr [rax]")
        };
        assert!(case.findings.iter().any(named), "{:#?}", case.findings);
    }
}

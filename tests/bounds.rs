//! Memory bounds beyond whole pages (issue 12, classes 1-3), each rebuilt on a copy of a real
//! kernel: an over-read only on the misaligned path is caught byte-exactly on Unicorn at any
//! start offset; a stack probe far below the budget faults as "N bytes below the stack budget"
//! instead of landing in another call's record; a store into the kernel image's own data is
//! reported with the symbol written, on every backend. The real kernels stay green.

use kernel_lab::abi::Abi;
use kernel_lab::backend::{run_batch, Access, BackendKind, FaultKind, Limits};
use kernel_lab::batch::{Arg, BatchBuilder, Placement, STACK_GUARD};
use kernel_lab::cases::plan::{Stubs, MISALIGNED_GUARD};
use kernel_lab::finding::Class;
use kernel_lab::image::Image;
use kernel_lab::paths;
use kernel_lab::reference::md5;
use kernel_lab::run;
use kernel_lab::toolchain::{self, BuildConfig};
use kernel_lab::variant::Kernel;
use rstest::rstest;

use crate::common::{
    config_with, fixture_image, fixture_kernels, generated_fixture_kernels, mutated_kernels, one_vector_set, variant,
    FIXTURE_LIMITS, SEED,
};

const U: BackendKind = BackendKind::Unicorn;
const Q: BackendKind = BackendKind::Qemu;
const N: BackendKind = BackendKind::Native;

/// riscv64 MD5 with one extra byte load at `buf + 64` on the path taken only when `buf` is not
/// 4-aligned (the real kernel assembles those words from bytes).
const MISALIGNED_ONLY_OVER_READ: (&str, &str) = (
    ".Lmd5_load_bytes:\n\tLDB\tX0, 0\n",
    ".Lmd5_load_bytes:\n\tlbu\tt0, 64(BUF)\t\t/* the bug: one byte past the block */\n\tLDB\tX0, 0\n",
);

fn image_of(build: &BuildConfig, name: &str) -> Image {
    let v = variant(name);
    Image::load(&toolchain::build_image(build, v).unwrap_or_else(|e| panic!("{e}")), v.arch).expect("image")
}

/// One `implCompress` call per start offset 0..64 with the input `Misaligned(m)`: on Unicorn
/// the broken kernel faults at exactly `buf + 64` for every offset that is not 4-aligned and
/// nowhere else, with the pc of the load; the real kernels of every architecture (whose
/// unaligned loads reach Unicorn's exact pages split into aligned pieces) never fault.
#[rstest]
#[case("riscv64", true)]
#[case("riscv64", false)]
#[case("aarch64", false)]
#[case("x86_64", false)]
fn every_start_offset_is_checked_byte_exactly_on_unicorn(#[case] name: &str, #[case] broken: bool) {
    let (_dir, build) = if broken {
        let (from, to) = MISALIGNED_ONLY_OVER_READ;
        mutated_kernels("riscv64", "md5.S", from, to)
    } else {
        (tempfile::tempdir().expect("temp dir"), toolchain::default_build())
    };
    let v = variant(name);
    let image = image_of(&build, name);
    let e = Stubs::of(&image);
    let block: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
    let mut want = md5::IV;
    md5::compress(&mut want, &block);
    let mut b = BatchBuilder::new(Abi::of(v.arch));
    let init = b.output(&md5::state_to_bytes(&md5::IV));
    let mut calls = Vec::new();
    for m in 0..64 {
        let input = b.buffer("input", &block, false, Placement::Misaligned(m));
        let state = b.output(&[0; 16]);
        let args = [Arg::Ptr(input, 0), Arg::Ptr(state, 0), Arg::Imm(0), Arg::Imm(0)];
        b.call_after_copy(e.md5_compress.expect("symbol"), args, SEED, init, state);
        calls.push((m, input, state));
    }
    let batch = b.layout(image.arena().expect("arena")).expect("layout");
    let mut backend = U.open(v, &image, Limits::default()).expect("unicorn");
    let run = run_batch(backend.as_mut(), &batch).expect("run");
    for (i, &(m, input, state)) in calls.iter().enumerate() {
        assert_eq!(batch.addr_of(input, 0) % 64, m as u64, "placement");
        let fault = run.fault_of(i);
        if broken && m % 4 != 0 {
            let f = fault.unwrap_or_else(|| panic!("offset {m}: the load at buf+64 went unnoticed"));
            let want_kind = FaultKind::Memory { access: Some(Access::Read), addr: Some(batch.addr_of(input, 64)) };
            assert_eq!(f.kind, want_kind, "offset {m}");
            let pc = f.pc.expect("pc");
            assert_eq!(image.instruction_at(pc).as_deref(), Some("lbu t0, 64(a0)"), "offset {m}: pc {pc:#x}");
        } else {
            assert!(fault.is_none(), "{name} offset {m}: {fault:?}");
            assert_eq!(md5::state_from_bytes(batch.buffer(&run.resp, state)), want, "{name} offset {m}");
        }
    }
}

/// `lab run` on the broken kernel: Unicorn fails exactly the misaligned guarded cases whose
/// offset takes the byte path, naming "1 byte past the end"; the aligned guarded and the packed
/// offset cases pass, and qemu, which checks pages, says so in the report.
#[test]
fn lab_run_fails_only_the_misaligned_guarded_cases_of_a_misaligned_only_over_read() {
    let (from, to) = MISALIGNED_ONLY_OVER_READ;
    let (_dir, build) = mutated_kernels("riscv64", "md5.S", from, to);
    let files = vec![paths::vectors_dir().join("md5/rfc1321.json"), paths::vectors_dir().join("md5/openssl.json")];
    let report = run::run(&config_with(variant("riscv64"), vec![U, Q], Kernel::Md5, files, build));
    let unicorn: Vec<_> = report.rows.iter().filter(|r| r.backend == U).flat_map(|r| r.failed()).collect();
    assert!(!unicorn.is_empty(), "{}", report.to_human());
    for case in unicorn {
        assert!(case.name.ends_with(MISALIGNED_GUARD), "{}: {:?}", case.name, case.findings);
        let f = &case.findings[0];
        assert_eq!(f.class, Class::Memory, "{f}");
        assert!(f.text.contains("1 byte past the end of") && f.text.contains("`lbu t0, 64(a0)`"), "{f}");
    }
    let human = report.to_human();
    assert!(
        human.contains("bounds checked by unicorn: every byte") && human.contains("by qemu: guard pages"),
        "{human}"
    );
}

/// A probe `n` bytes below the stack pointer at entry, then the real MD5, per architecture.
fn stack_probe(arch: &str, n: u64) -> (&'static str, String, String) {
    match arch {
        "riscv64" => (
            "md5_implCompressMB:\t\t\t/* no alignment directive: md5_implCompress falls in */\n",
            "md5_implCompressMB:\t\t\t/* no alignment directive: md5_implCompress falls in */\n".into(),
            format!("\tli\tt0, {n}\n\tsub\tsp, sp, t0\n\tsd\tzero, 0(sp)\n\tadd\tsp, sp, t0\n"),
        ),
        "x86_64" => (
            "md5_implCompressMB:\n",
            "md5_implCompressMB:\n".into(),
            format!("        sub     rsp, {n}\n        mov     qword ptr [rsp], 0\n        add     rsp, {n}\n"),
        ),
        _ => unreachable!("{arch}"),
    }
}

/// Probes of 8200 bytes, 64 KiB, 1 MiB and 4 MiB below sp fail every case with "N bytes below the
/// stack budget" on every backend, and no other call's record is touched (no "was not
/// restored"): the guard is at least 1 MiB and in fact all of the arena below the stack that the
/// batch does not use.
#[rstest]
#[case("riscv64", &[U, Q])]
#[case("x86_64", &[U, Q, N])]
fn stack_probes_far_below_the_budget_fault_in_the_stack_guard(#[case] arch: &str, #[case] on: &[BackendKind]) {
    let v = variant(arch);
    let abi = Abi::of(v.arch);
    for probe in [8200u64, 65536, STACK_GUARD, 4 << 20] {
        let (from, label, code) = stack_probe(arch, probe);
        let (_dir, build) = mutated_kernels(arch, "md5.S", from, &(label + &code));
        let files = vec![paths::vectors_dir().join("md5/rfc1321.json")];
        let report = run::run(&config_with(v, on.to_vec(), Kernel::Md5, files, build));
        // x86_64: the call pushed the return address, so rsp at entry is 8 below sp at the call.
        let entry_sp_below_call = if arch == "x86_64" { 8 } else { 0 };
        let below = probe + entry_sp_below_call - (abi.stack_budget + abi.red_zone);
        let text = format!("{below} bytes below the stack budget");
        for row in &report.rows {
            assert_eq!(row.passed(), 0, "{arch} probe {probe} on {}: {}", row.backend, report.to_human());
            for case in &row.failed() {
                assert!(
                    case.findings.iter().all(|f| f.class == Class::Memory && f.text.contains(&text)),
                    "{arch} probe {probe} on {} / {}: {:#?}",
                    row.backend,
                    case.name,
                    case.findings
                );
            }
        }
        assert_eq!(report.rows.iter().map(|r| r.backend).collect::<Vec<_>>(), on, "backends run");
    }
}

/// A kernel that stores to a global of its own image (`.data` on riscv64, `.bss` elsewhere) fails
/// every case with the store's pc and the symbol written, on every backend; the kernels' data is
/// read-only during calls but their `.rodata` (riscv64's and aarch64's MD5 read `md5_T` there)
/// stays readable: the real kernels pass.
#[rstest]
#[case("riscv64", ".data at fixture_calls+8", &[U, Q])]
#[case("aarch64", ".bss at fixture_calls+8", &[U, Q])]
#[case("x86_64", ".bss at fixture_calls+8", &[U, Q, N])]
fn a_store_into_the_kernel_image_is_reported_with_its_symbol(
    #[case] name: &str,
    #[case] place: &str,
    #[case] on: &[BackendKind],
) {
    let v = variant(name);
    let (_dir, build) = fixture_kernels(v.arch.name(), "md5.S", "image_write.S");
    let image = image_of(&build, name);
    let (lo, hi) = image.arena().expect("arena").kernel_data.expect("the fixture has writable data");
    let global = image.symbol("fixture_calls").expect("fixture symbol").addr;
    assert!((lo..hi).contains(&(global + 8)), "{global:#x} in [{lo:#x}, {hi:#x})");
    let files = vec![paths::vectors_dir().join("md5/rfc1321.json")];
    let report = run::run(&config_with(v, on.to_vec(), Kernel::Md5, files, build));
    let want = format!("in the kernel image's {place} ({:#x})", global + 8);
    for row in &report.rows {
        assert_eq!(row.passed(), 0, "{name} on {}: {}", row.backend, report.to_human());
        for case in &row.failed() {
            let f = &case.findings[0];
            assert!(
                f.class == Class::Memory && f.text.contains(&want),
                "{name} on {} / {}: {f}",
                row.backend,
                case.name
            );
            assert!(f.text.contains("at md5_implCompress"), "the store's place: {f}");
        }
    }
    assert_eq!(report.rows.iter().map(|r| r.backend).collect::<Vec<_>>(), on, "backends run");
}

/// The kernels' data is read-only during calls, not unreadable, and their `.rodata` is untouched:
/// a correct kernel that reads a global of its own and then runs the real MD5 (which reads
/// `md5_T` from `.rodata`) passes every case on every backend.
#[rstest]
#[case("riscv64")]
#[case("aarch64")]
fn a_kernel_reading_its_data_and_rodata_passes(#[case] name: &str) {
    let v = variant(name);
    let (_dir, build) = fixture_kernels(v.arch.name(), "md5.S", "image_read.S");
    let image = image_of(&build, name);
    let (lo, hi) = image.arena().expect("arena").kernel_data.expect("the fixture has writable data");
    let t = image.symbol("md5_T").expect("md5_T in .rodata").addr;
    assert!(!(lo..hi).contains(&t), "md5_T at {t:#x} in the protected data [{lo:#x}, {hi:#x})");
    let files = vec![paths::vectors_dir().join("md5/rfc1321.json")];
    let report = run::run(&config_with(v, vec![U, Q], Kernel::Md5, files, build));
    assert_eq!(report.status(), kernel_lab::exit::ExitCode::Passed, "{}", report.to_human());
    assert_eq!(report.rows.len(), 2, "{}", report.to_human());
}

/// A kernel that jumps to the address a Unicorn run stops at (instead of returning) ends the run
/// before the driver finished the batch: every call that does it fails as a fault naming the
/// jump, none passes, and the calls after it still run (the batch resumes after each).
#[test]
fn a_jump_to_the_unicorn_exit_address_fails_the_call_that_made_it() {
    let to = "md5_implCompress:\n        lea     rax, [rip + lab_batch_return]\n        jmp     rax\n        xor     edx, edx";
    let (_dir, build) = mutated_kernels("x86_64", "md5.S", "md5_implCompress:\n        xor     edx, edx", to);
    let files = vec![paths::vectors_dir().join("md5/rfc1321.json")];
    let report = run::run(&config_with(variant("x86_64"), vec![BackendKind::Unicorn], Kernel::Md5, files, build));
    let row = &report.rows[0];
    assert_eq!((row.passed(), row.failed().len()), (0, 21), "{}", report.to_human());
    for case in &row.failed() {
        let f = &case.findings[0];
        assert_eq!(f.class, Class::Fault, "{}: {f}", case.name);
        assert!(f.text.contains("md5_implCompress(") && f.text.contains("jumped to the lab's exit address"), "{f}");
    }
}

/// A kernel that jumps into its input (executes its message) faults on the fetch: the arena is
/// data, never code. Unicorn refuses it in its TLB hook (its arena entries carry no execute
/// right, so stores stay on QEMU's fast path) and names the fetch and the buffer.
#[test]
fn a_jump_into_the_input_is_a_fetch_fault() {
    let to = "md5_implCompress:\n        jmp     rdi\n        xor     edx, edx";
    let (_dir, build) = mutated_kernels("x86_64", "md5.S", "md5_implCompress:\n        xor     edx, edx", to);
    let files = vec![paths::vectors_dir().join("md5/rfc1321.json")];
    let on = vec![BackendKind::Unicorn, BackendKind::Qemu, BackendKind::Native];
    let report = run::run(&config_with(variant("x86_64"), on, Kernel::Md5, files, build));
    assert_eq!(report.rows.len(), 3, "{}", report.to_human());
    for row in &report.rows {
        assert_eq!((row.passed(), row.failed().len()), (0, 21), "{}", report.to_human());
        // Not "returned through a corrupted stack": the pc is the message, not the driver's poison.
        for case in &row.failed() {
            let f = &case.findings[0];
            assert!(f.text.contains(": data, never code (a jump through a pointer to data"), "{}: {f}", row.backend);
            assert!(!f.text.contains("corrupted stack"), "{}: {f}", row.backend);
        }
    }
    // The fetch's own address (the message's first byte), as qemu and native name it.
    for case in &report.rows[0].failed() {
        let f = &case.findings[0];
        let named = f.text.contains("fetch from unmapped or protected memory at ")
            && (f.text.contains("inside input (input[0]") || f.text.contains("inside buffer (buffer[0]"));
        assert!(named, "{}: {f}", case.name);
    }
}

/// A kernel that over-reads only the first time it sees a buffer (it keeps the last buffer's
/// address below its stack pointer) and behaves when the same call runs again. Unicorn re-runs
/// a call to pin down a guard-page fault or to confirm a byte-exact suspicion; a re-run that
/// does not repeat what the batch's run saw must fail the call, not clear it. So every case
/// qemu fails (it never re-runs), Unicorn fails too, and some of them say the re-run differed.
#[test]
fn an_over_read_a_kernel_makes_only_the_first_time_fails_on_unicorn_too() {
    let to = "md5_implCompress:\n        cmp     rdi, qword ptr [rsp - 256]\n        je      1f\n\
              mov     qword ptr [rsp - 256], rdi\n        mov     rax, qword ptr [rdi + 60]\n1:\n\
              xor     edx, edx";
    let (_dir, build) = mutated_kernels("x86_64", "md5.S", "md5_implCompress:\n        xor     edx, edx", to);
    let files = ["md5/rfc1321.json", "md5/openssl-misaligned.json"].map(|f| paths::vectors_dir().join(f)).to_vec();
    let on = vec![BackendKind::Unicorn, BackendKind::Qemu];
    let report = run::run(&config_with(variant("x86_64"), on, Kernel::Md5, files, build));
    let failed = |b: BackendKind| -> std::collections::BTreeSet<(String, String)> {
        let rows = report.rows.iter().filter(|r| r.backend == b);
        rows.flat_map(|r| r.failed().into_iter().map(|c| (r.set.clone(), c.name.to_string()))).collect()
    };
    let (unicorn, qemu) = (failed(BackendKind::Unicorn), failed(BackendKind::Qemu));
    assert!(qemu.len() >= 10, "{}", report.to_human());
    let missed: Vec<_> = qemu.difference(&unicorn).collect();
    assert!(missed.is_empty(), "unicorn passed cases qemu failed: {missed:?}\n{}", report.to_human());
    let said = report.rows.iter().filter(|r| r.backend == BackendKind::Unicorn).flat_map(|r| r.failed());
    let said =
        said.flat_map(|c| c.findings).filter(|f| f.text.contains("the kernel behaves differently when run again"));
    assert!(said.count() >= 5, "{}", report.to_human());
}

/// A batch of `n` MD5 calls on misaligned inputs, each writing its own state (`n` distinct
/// layouts: the buffers move with `n`).
fn md5_batch(image: &Image, n: usize) -> kernel_lab::batch::Batch {
    let e = Stubs::of(image);
    let mut b = BatchBuilder::new(Abi::of(image.arch));
    let init = b.output(&md5::state_to_bytes(&md5::IV));
    for m in 0..n {
        let block: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37).wrapping_add(m as u8)).collect();
        let input = b.buffer("input", &block, false, Placement::Misaligned(m * 7));
        let state = b.output(&[0xa5; 16]);
        let args = [Arg::Ptr(input, 0), Arg::Ptr(state, 0), Arg::Imm(0), Arg::Imm(0)];
        b.call_after_copy(e.md5_compress.expect("symbol"), args, SEED, init, state);
    }
    b.layout(image.arena().expect("arena")).expect("layout")
}

/// Unicorn reuses a response given back and zeroes only what it copied into it: a batch run
/// after others, on the recycled allocation, reads back byte for byte what a fresh engine
/// reads for it alone. (After 40 calls, whose call table spans pages that are a guard and
/// buffers in a batch of one call, a response left with the old bytes differs.)
#[test]
fn a_response_on_a_recycled_allocation_equals_a_fresh_ones() {
    let v = variant("x86_64");
    let image = image_of(&toolchain::default_build(), "x86_64");
    let mut reused = U.open(v, &image, Limits::default()).expect("unicorn");
    for n in [40, 12, 3] {
        let run = run_batch(reused.as_mut(), &md5_batch(&image, n)).expect("run");
        reused.recycle(run.resp);
    }
    let last = md5_batch(&image, 1);
    let got = run_batch(reused.as_mut(), &last).expect("run");
    let mut fresh = U.open(v, &image, Limits::default()).expect("unicorn");
    let want = run_batch(fresh.as_mut(), &last).expect("run");
    assert_eq!(got.resp.len(), want.resp.len());
    let (got, want) = (without_stamp(&last, got.resp), without_stamp(&last, want.resp));
    let first_diff = got.iter().zip(&want).position(|(a, b)| a != b);
    assert_eq!(first_diff, None, "the reused response differs");
}

/// `resp` with the header's protection stamp (`prot_id`, `prot_base`, `delta_count`) and the
/// delta entries zeroed: they follow the tables sent before (as for a process guest), so an
/// engine that ran other batches first holds other ones by design.
fn without_stamp(batch: &kernel_lab::batch::Batch, mut resp: Vec<u8>) -> Vec<u8> {
    use kernel_lab::protocol::header;
    let word = |w: kernel_lab::protocol::Word| {
        u64::from_le_bytes(batch.payload[w.offset()..w.offset() + 8].try_into().expect("8 bytes"))
    };
    for w in [header::PROT_ID, header::PROT_BASE, header::DELTA_COUNT] {
        resp[w.offset()..w.offset() + 8].fill(0);
    }
    let arena = word(header::TABLE) - batch.table_range().start as u64;
    let (lo, hi) = ((word(header::DELTA_TABLE) - arena) as usize, batch.table_range().start);
    resp[lo..hi].fill(0);
    resp
}

/// A Poly1305 call of fewer than 16 bytes gets an empty input (no whole block): no byte of it
/// may be touched. With the guarded inputs flush at the start of their pages (`--flush start`)
/// an empty input sat at the start of a readable page with no exact range, so an 8-byte load
/// from it passed on every backend, Unicorn's byte-exact check included (review-6). An empty
/// buffer now sits between the guard below it and the guard after it: the guarded case and its
/// misaligned twin fail at either flush, on Unicorn and qemu, naming `input[0]`; the packed
/// offset cases (never checked past their buffers) pass.
#[rstest]
#[case(Placement::Start)]
#[case(Placement::End)]
fn a_load_from_an_empty_input_fails_at_either_flush(#[case] flush: Placement) {
    let src = "#define poly1305_processBlocks real_poly1305_processBlocks\n#include \"real_poly1305.inc\"\n\
               #undef poly1305_processBlocks\n        .intel_syntax noprefix\n        .text\n\
               .globl poly1305_processBlocks\n        .p2align 4\npoly1305_processBlocks:\n\
               cmp rsi, 16\n        jae 1f\n        mov rax, qword ptr [rdi]\n1:      jmp real_poly1305_processBlocks\n";
    let v = variant("x86_64");
    let (_dir, build) = generated_fixture_kernels("x86_64", "poly1305.S", src);
    let image = fixture_image(&build, v, "empty-input load");
    let set = one_vector_set("poly1305/layout.json", |v| v.msg_len() == 5);
    for kind in [U, Q] {
        let mut backend = kind.open(v, &image, FIXTURE_LIMITS).expect("backend");
        let row = run::run_set_with_progress(
            backend.as_mut(),
            v,
            &image,
            &set,
            SEED,
            flush,
            &mut kernel_lab::progress::ignore,
        );
        let mut failed: Vec<&str> = row.failed().into_iter().map(|c| c.name).collect();
        failed.sort_unstable();
        assert_eq!(
            failed,
            ["length 5 [guarded, misaligned]", "length 5 [guarded]"],
            "{kind} at {flush:?}: {:#?}",
            row.failed()
        );
        for case in &row.failed() {
            let f = &case.findings[0];
            assert!(f.class == Class::Memory && f.text.contains("(input[0]; 0 bytes at"), "{kind} at {flush:?}: {f}");
        }
        assert!(row.passed() >= 16, "{kind}: the packed cases pass ({} passed)", row.passed());
    }
}

/// An 8-byte store 4 bytes before a writable buffer whose start is 4 bytes past an 8-byte
/// boundary (a 20-byte state flush against its guard here; OpenSSL's 92-byte `MD5_CTX` in
/// `lab run`), made only when the kernel believes it is not being run again (the driver's
/// header says `start == current` and `ncalls == current + 1` in a confirmation); when run again
/// it stores the same 4 bytes inside the buffer. Unicorn's MMIO callbacks see stores exactly
/// (QEMU stores an unaligned access byte by byte): the bytes before the buffer prove the fault,
/// and no store inside the buffer may explain them (review-6: one did, when a 4-byte store
/// stood for the aligned 8 bytes around it, and every call passed). Every call fails with the
/// store's first byte.
#[test]
fn a_store_before_a_buffer_hidden_from_re_runs_fails_on_unicorn() {
    let to = "md5_implCompress:\n        mov     eax, esi\n        and     eax, 7\n        cmp     eax, 4\n\
              jne     6f\n        lea     r8, [rip + lab_arena]\n        mov     r9, qword ptr [r8 + 0x20]\n\
              cmp     r9, qword ptr [r8 + 0x08]\n        jne     5f\n        lea     r9, [r9 + 1]\n\
              cmp     r9, qword ptr [r8]\n        je      4f\n\
              5:      mov     eax, dword ptr [rsi]\n        shl     rax, 32\n        mov     qword ptr [rsi - 4], rax\n\
              jmp     6f\n4:      mov     eax, dword ptr [rsi]\n        mov     dword ptr [rsi], eax\n\
              6:\n        xor     edx, edx";
    let (_dir, build) = mutated_kernels("x86_64", "md5.S", "md5_implCompress:\n        xor     edx, edx", to);
    let v = variant("x86_64");
    let image = image_of(&build, "x86_64");
    let compress = Stubs::of(&image).md5_compress.expect("symbol");
    let mut b = BatchBuilder::new(Abi::of(v.arch));
    let mut init = md5::state_to_bytes(&md5::IV).to_vec();
    init.extend([0; 4]);
    let from = b.output(&init);
    let mut states = Vec::new();
    // The last call is left unchecked: a batch resumed at it (after the fault of the call
    // before) looks like a re-run to this kernel, which then behaves.
    for _ in 0..5 {
        let input = b.buffer("input", &[0x61; 64], false, Placement::End);
        let state = b.output(&[0; 20]);
        b.call_after_copy(
            compress,
            [Arg::Ptr(input, 0), Arg::Ptr(state, 0), Arg::Imm(0), Arg::Imm(0)],
            SEED,
            from,
            state,
        );
        states.push(state);
    }
    let batch = b.layout(image.arena().expect("arena")).expect("layout");
    let mut backend = U.open(v, &image, Limits::default()).expect("unicorn");
    let run = run_batch(backend.as_mut(), &batch).expect("run");
    for (i, &state) in states.iter().enumerate().take(4) {
        let at = batch.addr_of(state, 0);
        assert_eq!(at % 8, 4, "placement");
        let f = run.fault_of(i).unwrap_or_else(|| panic!("call {i}: the store 4 bytes before the state passed"));
        assert_eq!(f.kind, FaultKind::Memory { access: Some(Access::Write), addr: Some(at - 4) }, "call {i}: {f:?}");
    }
}

/// Unicorn's own pages above the image (the arena's MMIO alias at `2^36` past the arena, the
/// exit page at `3 * 2^36`) are not guest memory: a load or store there faults on every backend.
/// The virtual TLB maps addresses one to one, so before review-6 a kernel reached them on
/// Unicorn at their physical addresses, and the arena through its alias, past guard pages and
/// read-only rights: every case passed on Unicorn and failed on qemu.
#[rstest]
#[case("x86_64", "        movabs r8, 0x1000000000\n        mov rax, qword ptr [rdi + r8]", Access::Read)]
#[case("x86_64", "        movabs r8, 0x1000000000\n        mov byte ptr [rdi + r8], 1", Access::Write)]
#[case("x86_64", "        movabs r8, 0x3000000000\n        mov rax, qword ptr [r8]", Access::Read)]
#[case("aarch64", "    mov x9, #0x1000000000\n    ldr x9, [x0, x9]", Access::Read)]
fn the_engines_own_pages_are_unmapped_for_kernels(#[case] arch: &str, #[case] access: &str, #[case] what: Access) {
    let src = match arch {
        "aarch64" => format!(
            "#define poly1305_processBlocks real_poly1305_processBlocks\n#include \"real_poly1305.inc\"\n\
             #undef poly1305_processBlocks\n    .text\n    .globl poly1305_processBlocks\n    .balign 4\n\
             poly1305_processBlocks:\n{access}\n    b real_poly1305_processBlocks\n"
        ),
        _ => format!(
            "#define poly1305_processBlocks real_poly1305_processBlocks\n#include \"real_poly1305.inc\"\n\
             #undef poly1305_processBlocks\n        .intel_syntax noprefix\n        .text\n\
             .globl poly1305_processBlocks\n        .p2align 4\npoly1305_processBlocks:\n{access}\n\
             jmp real_poly1305_processBlocks\n"
        ),
    };
    let v = variant(arch);
    let (_dir, build) = generated_fixture_kernels(arch, "poly1305.S", &src);
    let image = fixture_image(&build, v, "engine page access");
    let set = one_vector_set("poly1305/layout.json", |v| v.msg_len() == 40);
    for kind in [U, Q] {
        let mut backend = kind.open(v, &image, FIXTURE_LIMITS).expect("backend");
        let progress = &mut kernel_lab::progress::ignore;
        let row = run::run_set_with_progress(backend.as_mut(), v, &image, &set, SEED, Placement::End, progress);
        assert_eq!(row.passed(), 0, "{kind}: {} failed", row.failed().len());
        for case in &row.failed() {
            let f = &case.findings[0];
            assert_eq!(f.class, Class::Memory, "{kind} {}: {f}", case.name);
            if kind == U {
                let named = match what {
                    Access::Write => "write to unmapped or protected memory at 0x",
                    _ => "read of unmapped or protected memory at 0x",
                };
                assert!(f.text.contains(named), "{}: {f}", case.name);
            }
        }
    }
}

/// A legal load of an input's last bytes that starts on the page before the one its end lies
/// on (the end 1..15 bytes past a page boundary) reaches Unicorn's MMIO alias as a piece that
/// also touches bytes past the end. The confirmation re-run must see that load, which starts
/// off the end's page, or it fails a correct kernel (it did at `lab run --flush start --seed 7`:
/// aarch64, "128 KiB of random bytes" at offset 6). The real `md5_implCompressMB` of every
/// architecture over 8 KiB at offsets 1..15 past a page (the page before the end's is then a
/// plain page inside the input, not one the batch's run noted): no fault, the reference's state.
#[rstest]
#[case("riscv64")]
#[case("aarch64")]
#[case("x86_64")]
fn legal_loads_across_the_page_before_an_input_end_pass(#[case] name: &str) {
    let v = variant(name);
    let image = image_of(&toolchain::default_build(), name);
    let e = Stubs::of(&image);
    let input: Vec<u8> = (0..8192u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let mut want = md5::IV;
    assert_eq!(md5::compress_mb(&mut want, &input, 0, 8192 - 64), Some(8192));
    let mut b = BatchBuilder::new(Abi::of(v.arch));
    let mut calls = Vec::new();
    for m in 1..16 {
        let buf = b.input(&input, m);
        let state = b.output(&md5::state_to_bytes(&md5::IV));
        let args = [Arg::Ptr(buf, 0), Arg::Ptr(state, 0), Arg::Imm(0), Arg::Imm(8192 - 64)];
        b.call(e.md5_compress_mb.expect("symbol"), args, SEED);
        calls.push((m, buf, state));
    }
    let batch = b.layout(image.arena().expect("arena")).expect("layout");
    let mut backend = U.open(v, &image, Limits::default()).expect("unicorn");
    let run = run_batch(backend.as_mut(), &batch).expect("run");
    for (i, &(m, buf, state)) in calls.iter().enumerate() {
        assert_eq!(batch.addr_of(buf, 8192) % 4096, m as u64, "placement");
        assert!(run.fault_of(i).is_none(), "{name} end {m} past a page: {:?}", run.fault_of(i));
        assert_eq!(md5::state_from_bytes(batch.buffer(&run.resp, state)), want, "{name} offset {m}");
    }
}

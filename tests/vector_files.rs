//! Issue 13: vector files are strict and bounded and never panic the lab; long messages run in
//! chunks; expected intermediate states and chained procedures are checked. Each reproduction
//! of the issue is a test here (exit codes and messages asserted).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kernel_lab::backend::BackendKind;
use kernel_lab::paths;
use kernel_lab::run;
use kernel_lab::variant::Kernel;

use crate::common::{config_with, mutated_kernels, variant};

/// Runs `lab` with `args`; gives up (and fails) after 60 s, so a hang is a failure, not a stuck
/// test. Returns the exit status, stdout and stderr.
fn lab(args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lab");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("lab {args:?} still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().expect("exit status, not a signal"), text(&out.stdout), text(&out.stderr))
}

/// `lab run` on x86_64/Unicorn with only the given vector files.
fn run_files(files: &[&Path], extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["run", "--variant", "=x86_64", "--backend", "unicorn", "--no-bundled", "--seed", "13"];
    for f in files {
        args.extend(["--vectors", f.to_str().expect("utf-8 path")]);
    }
    args.extend(extra);
    lab(&args)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(&p, text).expect("write vector file");
    p
}

const STATE: &str = "0123456789abcdeffedcba9876543210";
const MD5_EMPTY: &str = "d41d8cd98f00b204e9800998ecf8427e";

#[test]
fn the_two_panics_are_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let mb = write(
        dir.path(),
        "mb.json",
        &format!(
            r#"{{"kernel":"md5","vectors":[{{"name":"mb","source":"issue 13","stub":"md5_implCompressMB","state_hex":"{STATE}","msg":{{"pattern":"counter","len":64}},"ofs":2147483600,"limit":2147483647}}]}}"#
        ),
    );
    let poly = write(
        dir.path(),
        "poly.json",
        r#"{"kernel":"poly1305","vectors":[{"name":"wrap","source":"issue 13","acc":[0,0,0,0,0],"r_hex":"00000000000000000000000000000000","msg":{"pattern":"counter","len":64},"lengths":[9223372036854775792,9223372036854775792,48]}]}"#,
    );
    let (code, out, err) = run_files(&[&mb, &poly], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("mb.json: entry 0 (\"mb\"): field `limit`: ofs 2147483600 + 1 blocks of 64"), "{err}");
    assert!(err.contains("poly.json: entry 0 (\"wrap\"): field `lengths[0]`"), "{err}");
}

#[test]
fn costly_entries_and_files_that_are_not_regular_are_refused_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let huge = write(
        dir.path(),
        "huge.json",
        &format!(
            r#"{{"kernel":"md5","vectors":[{{"name":"64 MiB at 0..4095","source":"issue 13","msg":{{"pattern":"counter","len":67108864}},"offsets":{{"from":0,"to":4095}},"digest_hex":"{MD5_EMPTY}"}}]}}"#
        ),
    );
    let started = Instant::now();
    let (code, out, err) = run_files(&[&huge], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("entry 0 (\"64 MiB at 0..4095\"): would cost") && err.contains("--max-entry-bytes"), "{err}");
    // A raised entry limit still meets the run limit.
    let (code, _, err) = run_files(&[&huge], &["--max-entry-bytes", "999999999999999"]);
    assert_eq!(code, 2);
    assert!(err.contains("over the run limit") && err.contains("--max-run-bytes"), "{err}");
    let fifo = dir.path().join("fifo.json");
    let mode = rustix::fs::Mode::from_raw_mode(0o600);
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, mode, 0).expect("mkfifo");
    for f in [Path::new("/dev/zero"), fifo.as_path()] {
        let (code, out, err) = run_files(&[f], &[]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains("not a regular file"), "{err}");
    }
    assert!(started.elapsed() < Duration::from_secs(20), "refusals must not expand anything");
}

#[test]
fn every_silently_accepted_mistake_is_an_error_naming_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let key = "00".repeat(32);
    let tag = "00".repeat(16);
    let block = "00".repeat(64);
    let entries = [
        format!(r#"{{"name":"other kind","source":"x","msg_hex":"","digest_hex":"{MD5_EMPTY}","key_hex":"zz"}}"#),
        format!(
            r#"{{"name":"ofs on implCompress","source":"x","stub":"md5_implCompress","state_hex":"{STATE}","msg_hex":"{block}","ofs":0,"limit":0}}"#
        ),
        format!(
            r#"{{"name":"msg key","source":"x","msg":{{"pattern":"counter","len":1,"lenght":2}},"digest_hex":"{MD5_EMPTY}"}}"#
        ),
        format!(
            r#"{{"name":"offsets key","source":"x","msg_hex":"","offsets":{{"from":0,"to":1,"by":1}},"digest_hex":"{MD5_EMPTY}"}}"#
        ),
        format!(
            r#"{{"name":"both offsets","source":"x","msg_hex":"","offset":1,"offsets":[1],"digest_hex":"{MD5_EMPTY}"}}"#
        ),
        r#"{"name":"duplicate key","source":"x","msg_hex":"zz","msg_hex":"616263","digest_hex":"900150983cd24fb0d6963f7d28e17f72"}"#
            .to_string(),
        format!(r#"{{"name":"duplicate key","source":"x","msg_hex":"","digest_hex":"{MD5_EMPTY}"}}"#),
        format!(r#"{{"name":"","source":"x","msg_hex":"","digest_hex":"{MD5_EMPTY}"}}"#),
        format!(r#"{{"name":"no source","source":"","msg_hex":"","digest_hex":"{MD5_EMPTY}"}}"#),
    ];
    let md5 = write(dir.path(), "md5.json", &format!(r#"{{"kernel":"md5","vectors":[{}]}}"#, entries.join(",")));
    let poly = write(
        dir.path(),
        "poly.json",
        &format!(
            r#"{{"kernel":"poly1305","vectors":[{{"name":"tag with lengths","source":"x","key_hex":"{key}","msg_hex":"","tag_hex":"{tag}","lengths":[16],"updates":[0]}}]}}"#
        ),
    );
    let top = write(dir.path(), "top.json", r#"{"kernel":"md5","sett":"s","vectors":[]}"#);
    let set5 = write(dir.path(), "set5.json", r#"{"kernel":"md5","set":5,"vectors":[]}"#);
    let (code, out, err) = run_files(&[&md5, &poly, &top, &set5], &[]);
    assert_eq!(code, 2, "{out}{err}");
    for want in [
        "md5.json: entry 0 (\"other kind\"): field `key_hex`: not a field of an MD5 digest entry",
        "md5.json: entry 1 (\"ofs on implCompress\"): field `ofs`: md5_implCompress takes no ofs/limit",
        "md5.json: entry 2 (\"msg key\"): field `msg.lenght`",
        "md5.json: entry 3 (\"offsets key\"): field `offsets.by`",
        "md5.json: entry 4 (\"both offsets\"): field `offsets`: give `offset` or `offsets`, not both",
        "md5.json: entry 5 (\"duplicate key\"): field `msg_hex`: duplicate key",
        "md5.json: entry 7 (\"\"): field `name`: must not be empty",
        "md5.json: entry 8 (\"no source\"): field `source`: must not be empty",
        "poly.json: entry 0 (\"tag with lengths\"): field `lengths`: not a field of a Poly1305 tag entry",
        "top.json: field `sett`: not a field of the top level of a vector file",
        "set5.json: field `set`: invalid type: integer `5`, expected a string",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    // Entry 6 is valid and ran (guarded, guarded misaligned, packed); its name is not a
    // duplicate of the refused entry 5.
    assert!(out.contains("3 passed, 0 failed"), "{out}");
}

#[test]
fn a_failed_case_wins_over_a_bad_file_and_errors_come_first_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "mixed.json",
        &format!(
            r#"{{"kernel":"md5","vectors":[{{"name":"abc","source":"RFC 1321","msg_hex":"616263","digest_hex":"900150983cd24fb0d6963f7d28e17f72"}},
            {{"name":"bad","source":"x","msg_hex":"6","digest_hex":"{MD5_EMPTY}"}}]}}"#
        ),
    );
    let (kernels, _) =
        mutated_kernels("x86_64", "md5.S", "H_STEP RC, RD, RA, RB, 11, 16,", "H_STEP RC, RD, RA, RB, 11, 15,");
    let dir_arg = kernels.path().to_str().unwrap();
    let (code, out, err) = run_files(&[&file], &["--kernels-dir", dir_arg]);
    assert_eq!(code, 1, "a kernel failure is exit 1 even beside a bad file:\n{out}{err}");
    assert!(err.starts_with("vector file error: "), "{err}");
    assert!(err.contains("entry 1 (\"bad\"): field `msg_hex`: invalid hex"), "{err}");
    assert!(out.contains("FAILED x86_64 on unicorn, md5 / mixed") && out.contains("1 vector file error"), "{out}");
    assert!(!out.contains("invalid hex"), "the table does not repeat the error: {out}");
}

#[test]
fn nothing_ran_says_why_and_a_folder_runs_every_json_file() {
    let dir = tempfile::tempdir().unwrap();
    let poly = write(
        dir.path(),
        "sub/poly.json",
        r#"{"kernel":"poly1305","vectors":[{"name":"RFC 8439 2.5.2","source":"RFC 8439","key_hex":"85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b","msg_hex":"43727970746f6772617068696320466f72756d2052657365617263682047726f7570","tag_hex":"a8061dc1305136c6c22b8baf0c0127a9"}]}"#,
    );
    let empty = write(dir.path(), "empty.json", r#"{"kernel":"md5","vectors":[]}"#);
    write(
        dir.path(),
        "deep/er/md5.json",
        &format!(
            r#"{{"kernel":"md5","vectors":[{{"name":"empty","source":"RFC 1321","msg_hex":"","digest_hex":"{MD5_EMPTY}"}}]}}"#
        ),
    );
    let (code, out, err) = run_files(&[&poly], &["--kernel", "md5"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("poly.json: a poly1305 file, left out because --kernel selects md5"), "{out}");
    assert!(out.contains("nothing ran: no vector entry to run"), "{out}");
    let (code, out, _) = run_files(&[&empty], &[]);
    assert_eq!(code, 2);
    assert!(out.contains("empty.json: an empty `vectors` list, nothing to run"), "{out}");
    let (code, out, err) = run_files(&[dir.path()], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("empty.json: an empty `vectors` list"), "{out}");
    assert!(out.contains("x86_64       unicorn  md5       md5") && out.contains("unicorn  poly1305  poly"), "{out}");
    assert!(out.contains("6 passed, 0 failed"), "{out}");
    assert_eq!(lab(&["run", "--call-instructions", "0"]).0, 2);
}

#[test]
fn long_messages_run_in_chunks_with_the_budget_scaled_to_their_length() {
    // 9 MiB: three chunks of at most 4 MiB. The base budget of 1M instructions is far below
    // what one 4 MiB call needs (~33M on x86_64): it passes only because the budget scales.
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "long.json",
        r#"{"kernel":"md5","vectors":[{"name":"9 MiB of 'a'","source":"Python hashlib","msg":{"pattern":"repeat","byte_hex":"61","len":9437184},"offset":3,"digest_hex":"61f246280efff5b3d7e1cdf29dc8e7a9"}]}"#,
    );
    let (code, out, err) = run_files(&[&file], &["--call-instructions", "1000000"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("3 passed, 0 failed"), "{out}");
}

#[test]
fn expected_intermediate_values_and_chains_fail_when_the_file_disagrees() {
    let dir = tempfile::tempdir().unwrap();
    let bundled = |f: &str| std::fs::read_to_string(paths::vectors_dir().join(f)).expect("bundled file");
    // Each bundled expectation with its last hex digit changed.
    let spoil = |text: &str, field: &str| -> String {
        let at = text.find(&format!("\"{field}\": \"")).expect("field") + field.len() + 5;
        let end = at + text[at..].find('"').expect("closing quote");
        let last = if text.as_bytes()[end - 1] == b'0' { "1" } else { "0" };
        format!("{}{last}{}", &text[..end - 1], &text[end..])
    };
    let md5 = write(dir.path(), "m.json", &spoil(&bundled("md5/intermediate.json"), "expect_state_hex"));
    let chain = write(dir.path(), "c.json", &spoil(&bundled("md5/chains.json"), "digest_hex"));
    let acc = write(dir.path(), "a.json", &spoil(&bundled("poly1305/intermediate.json"), "expect_acc"));
    let macs = write(dir.path(), "t.json", &spoil(&bundled("poly1305/chains.json"), "tag_hex"));
    let (code, out, err) = run_files(&[&md5, &chain, &acc, &macs], &[]);
    assert_eq!(code, 1, "{out}{err}");
    for want in [
        "RFC 1321 A.5 #7: state after the first block [guarded] (64 bytes):",
        "(expect_state_hex in the file), got",
        "MD5 iterated 100 times from the empty message [guarded] (0 bytes):",
        "chain digest expected",
        "RFC 8439 §2.5.2: Acc after block 1 [guarded] (16 bytes):",
        "(expect_acc in the file), got",
        "tag of the tags expected",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

/// A wrong rotate fails every case of the multi-batch and chained entries: each segment and
/// each step runs through the kernel and is checked, on both emulators.
#[test]
fn a_broken_kernel_fails_every_chained_and_multi_batch_case() {
    let (_dir, build) =
        mutated_kernels("x86_64", "md5.S", "H_STEP RC, RD, RA, RB, 11, 16,", "H_STEP RC, RD, RA, RB, 11, 15,");
    let files = vec![paths::vectors_dir().join("md5/chains.json")];
    let backends = vec![BackendKind::Unicorn, BackendKind::Qemu];
    let report = run::run(&config_with(variant("x86_64"), backends, Kernel::Md5, files, build));
    assert_eq!(report.status(), kernel_lab::exit::ExitCode::Failed, "{}", report.to_human());
    for row in &report.rows {
        assert_eq!((row.passed(), row.failed().len()), (0, 9), "{}", report.to_human());
    }
}

/// The bundled sets load cleanly and fit the default limits with room to spare (the figure in
/// vectors/README.md, "Limits").
#[test]
fn bundled_sets_fit_the_default_cost_limits() {
    let limits = kernel_lab::vectors::CostLimits::default();
    let mut total = 0u64;
    for f in kernel_lab::vectors::bundled_files(&paths::vectors_dir(), &Kernel::ALL) {
        let (set, errors) = kernel_lab::vectors::load_file(&f);
        assert!(errors.is_empty(), "{errors:?}");
        for v in set.expect("bundled file loads").vectors {
            let cost = v.cost().total();
            assert!(cost <= limits.max_entry_bytes, "{}: {cost}", v.name);
            total += cost;
        }
    }
    eprintln!("bundled cost: {total} bytes");
    assert!(total > 100 << 20 && total < limits.max_run_bytes / 8, "{total}");
}

mod no_panic {
    //! Random JSON-ish entries, built from the format's own field names and edge values
    //! (huge and negative numbers, wrong types, duplicate keys), must load or be refused with
    //! an error, and whatever loads must plan every segment without a panic.

    use proptest::prelude::*;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    use kernel_lab::abi::X86_64;
    use kernel_lab::batch::{BatchBuilder, Placement};
    use kernel_lab::cases::plan::{self, Stubs};
    use kernel_lab::cases::procedure::CaseRun;
    use kernel_lab::image::Arena;
    use rand::SeedableRng;

    const KEYS: &[&str] = &[
        "name",
        "source",
        "comment",
        "msg_hex",
        "msg",
        "offset",
        "offsets",
        "digest_hex",
        "updates",
        "stub",
        "state_hex",
        "ofs",
        "limit",
        "expect_state_hex",
        "expect_ofs",
        "key_hex",
        "tag_hex",
        "acc",
        "r_hex",
        "lengths",
        "expect_acc",
        "chain",
        "steps",
        "count",
        "bogus",
    ];

    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("0".to_owned()),
            Just("16".to_owned()),
            Just("-1".to_owned()),
            Just("2147483647".to_owned()),
            Just("2147483600".to_owned()),
            Just("9223372036854775792".to_owned()),
            Just("18446744073709551615".to_owned()),
            Just("1e400".to_owned()),
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("\"zz\"".to_owned()),
            Just("\"md5_implCompressMB\"".to_owned()),
            Just("\"md5_implCompress\"".to_owned()),
            Just("\"md5_iterate\"".to_owned()),
            Just("\"poly1305_mac_of_macs\"".to_owned()),
            Just("\"2c88c77849d64ae9147ddeb88e69c83fc\"".to_owned()),
            (0usize..70).prop_map(|n| format!("\"{}\"", "ff".repeat(n))),
            (0u64..300).prop_map(|n| n.to_string()),
        ];
        leaf.prop_recursive(2, 16, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec(
                    (prop::sample::select(vec!["pattern", "len", "byte_hex", "seed", "from", "to", "x"]), inner),
                    0..5
                )
                .prop_map(|kv| {
                    let body: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", body.join(","))
                }),
                prop::sample::select(vec!["counter", "repeat", "random"])
                    .prop_map(|p| format!(r#"{{"pattern":"{p}","len":100,"byte_hex":"61","seed":1}}"#)),
            ]
        })
    }

    /// Valid entries of every kind, as (key, value) pairs, to mutate.
    fn templates(kernel: &str) -> Vec<Vec<(&'static str, String)>> {
        let s = |x: &str| x.to_owned();
        let q = |x: &str| format!("\"{x}\"");
        if kernel == "md5" {
            vec![
                vec![
                    ("msg_hex", q("616263")),
                    ("digest_hex", q("900150983cd24fb0d6963f7d28e17f72")),
                    ("updates", s("[1,2]")),
                ],
                vec![
                    ("stub", q("md5_implCompressMB")),
                    ("state_hex", q("0123456789abcdeffedcba9876543210")),
                    ("msg", s(r#"{"pattern":"counter","len":192}"#)),
                    ("ofs", s("0")),
                    ("limit", s("100")),
                ],
                vec![
                    ("chain", q("md5_iterate")),
                    ("msg_hex", q("")),
                    ("steps", s("3")),
                    ("digest_hex", q(&"00".repeat(16))),
                ],
            ]
        } else {
            vec![
                vec![
                    ("key_hex", q(&"01".repeat(32))),
                    ("msg", s(r#"{"pattern":"random","seed":3,"len":100}"#)),
                    ("tag_hex", q(&"00".repeat(16))),
                ],
                vec![
                    ("acc", s("[0,0,0,0,0]")),
                    ("r_hex", q(&"00".repeat(16))),
                    ("msg_hex", q(&"ff".repeat(40))),
                    ("lengths", s("[16,3,17]")),
                ],
                vec![
                    ("chain", q("poly1305_mac_of_macs")),
                    ("count", s("5")),
                    ("key_hex", q(&"01".repeat(32))),
                    ("tag_hex", q(&"00".repeat(16))),
                ],
            ]
        }
    }

    /// A valid entry of `kernel` with up to three fields replaced or added (sometimes twice).
    fn entry(kernel: &'static str) -> impl Strategy<Value = String> {
        let edits = proptest::collection::vec((prop::sample::select(KEYS.to_vec()), value(), 0u8..10), 0..4);
        (0usize..3, edits, any::<u64>()).prop_map(move |(t, edits, id)| {
            let mut kv: Vec<(&str, String)> = vec![("name", format!("\"n{id}\"")), ("source", "\"s\"".into())];
            kv.extend(templates(kernel).swap_remove(t));
            for (k, v, how) in edits {
                match kv.iter_mut().find(|(key, _)| *key == k) {
                    Some(slot) if how > 0 => slot.1 = v,
                    _ => kv.push((k, v)),
                }
            }
            let body: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", body.join(","))
        })
    }

    #[test]
    fn random_entries_load_or_fail_and_plan_without_a_panic() {
        let strategy = prop::sample::select(vec!["md5", "poly1305"])
            .prop_flat_map(|k| (Just(k), proptest::collection::vec(entry(k), 1..4)));
        let config = ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() };
        // A fixed stream, so the counts below are the same on every run.
        let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut runner = proptest::test_runner::TestRunner::new_with_rng(config, rng);
        let planned = std::cell::Cell::new(0usize);
        let refused = std::cell::Cell::new(0usize);
        runner
            .run(&strategy, |(kernel, entries)| {
                let dir = tempfile::tempdir().unwrap();
                let file = dir.path().join("r.json");
                std::fs::write(&file, format!(r#"{{"kernel":"{kernel}","vectors":[{}]}}"#, entries.join(","))).unwrap();
                let (set, errors) = kernel_lab::vectors::load_file(&file);
                let loaded = set.as_ref().map_or(0, |s| s.vectors.len());
                prop_assert!(loaded + errors.len() >= 1, "every entry loads or has an error");
                refused.set(refused.get() + errors.len());
                let Some(set) = set else { return Ok(()) };
                let e = Stubs {
                    md5_compress: Some(0x1000),
                    md5_compress_mb: Some(0x2000),
                    poly1305: Some(0x3000),
                    ..Default::default()
                };
                let arena = Arena { addr: 0x10_0000, size: 32 << 20, kernel_data: None };
                let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(1);
                for v in set.vectors.iter().filter(|v| v.cost().total() <= 4 << 20) {
                    planned.set(planned.get() + 1);
                    for (layout, name) in plan::layouts(v, Placement::End, 7).zip(plan::case_names(v)) {
                        let mut case = CaseRun::new(v, &set.set, &name, layout);
                        loop {
                            let mut b = BatchBuilder::new(&X86_64);
                            let plan = case.plan_next(&mut b, &e, &mut rng);
                            let _ = b.layout(arena);
                            if !plan.more {
                                break;
                            }
                            case.absorb(&vec![vec![0u8; 40]; 256]);
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
        // Both outcomes occur often enough for the test to mean something.
        let (planned, refused) = (planned.get(), refused.get());
        eprintln!("planned {planned}, refused {refused}");
        assert!(planned > 25 && refused > 25, "planned {planned}, refused {refused}");
    }
}

/// The batch packer adds per-segment estimates instead of measuring the payload: they must be
/// upper bounds, or a batch would not fit the arena. Every bundled case, every layout.
#[test]
fn segment_estimates_bound_the_payload_they_add() {
    use kernel_lab::batch::{BatchBuilder, Placement};
    use kernel_lab::cases::plan::{self, Stubs};
    use kernel_lab::cases::procedure::CaseRun;
    use rand::SeedableRng;
    let e = Stubs {
        md5_compress: Some(0x1000),
        md5_compress_mb: Some(0x2000),
        poly1305: Some(0x3000),
        ..Default::default()
    };
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(1);
    for f in kernel_lab::vectors::bundled_files(&paths::vectors_dir(), &Kernel::ALL) {
        let set = kernel_lab::vectors::load_file(&f).0.expect("bundled file loads");
        for abi in [&kernel_lab::abi::X86_64] {
            let mut b = BatchBuilder::new(abi);
            let mut estimate = run::BATCH_OVERHEAD;
            for (i, v) in set.vectors.iter().enumerate() {
                // Every misalignment of the guarded twin (1..64) over the vectors.
                let misalign = 1 + i % 63;
                for (layout, name) in plan::layouts(v, Placement::End, misalign).zip(plan::case_names(v)) {
                    let mut case = CaseRun::new(v, &set.set, &name, layout);
                    loop {
                        estimate += case.estimate();
                        let plan = case.plan_next(&mut b, &e, &mut rng);
                        assert!(
                            b.payload_size() <= estimate,
                            "{}: {name}: {} > {estimate}",
                            f.display(),
                            b.payload_size()
                        );
                        if !plan.more {
                            break;
                        }
                        case.absorb(&vec![vec![0u8; 40]; 256]);
                    }
                }
            }
        }
    }
}

//! Unicorn, qemu and native agree case by case: the same random call entries, planned and
//! judged as `lab run` plans and judges them ([`kernel_lab::cases`]), pass on every backend that
//! can run the variant (return values, callee-saved registers, stack balance, direction flag,
//! output buffers against the reference), and leave byte-identical outputs
//! ([`CasePlan::outputs_digest`]). (The absolute stack address and the x86 arithmetic flags,
//! which psABI leaves undefined after a call, may differ.)

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use kernel_lab::abi::Abi;
use kernel_lab::backend::{run_batch, BackendKind, Limits};
use kernel_lab::batch::BatchBuilder;
use kernel_lab::cases::plan::{CasePlan, Layout, Stubs};
use kernel_lab::cases::procedure::CaseRun;
use kernel_lab::cases::verdict;
use kernel_lab::reference::md5;
use kernel_lab::reference::poly1305::{clamp_r, Limbs26};
use kernel_lab::variant::VARIANTS;
use kernel_lab::vectors::{Body, Md5Call, Md5Stub, Message, Poly1305Call, Vector};
use rstest::rstest;

use crate::common::{build, variant, SEED};

/// A random `implCompressMB` call (1-4 blocks, `ofs` anywhere in -1000..1000, the upper
/// half of the `int` registers garbage) and a random `processBlocks` call over 0..320 bytes
/// (whole blocks and a tail that must be left alone).
fn random_calls(rng: &mut impl RngExt, i: usize) -> [Vector; 2] {
    let blocks = rng.random_range(1..=4usize);
    let data: Vec<u8> = (0..blocks * 64 + 64).map(|_| rng.random()).collect();
    let ofs: i32 = rng.random_range(-1000..1000);
    let limit = ofs + rng.random_range(0..blocks as i32 * 64);
    let state = md5::state_from_bytes(&rng.random::<[u8; 16]>());
    let md5 = Md5Call {
        stub: Md5Stub::CompressMb,
        state,
        input: Message::Bytes(data.clone()),
        ofs,
        limit,
        expect: Default::default(),
    };
    let acc = Limbs26(std::array::from_fn(|i| rng.random_range(0..if i == 4 { 1u64 << 27 } else { 1 << 26 })));
    let lengths = vec![rng.random_range(0..data.len() as i64)];
    let poly = Poly1305Call {
        acc,
        r: clamp_r(&rng.random()),
        input: Message::Bytes(data),
        lengths,
        expect: Default::default(),
    };
    let mut vector = |name: String, body| Vector {
        index: i,
        name,
        source: "random".into(),
        offsets: vec![rng.random_range(0..64)],
        body,
    };
    [
        vector(format!("md5 call {i}"), Body::Md5Call(md5)),
        vector(format!("poly1305 call {i}"), Body::Poly1305Call(poly)),
    ]
}

#[rstest]
fn backends_agree_on_random_calls(#[values("riscv64", "riscv64+zbb", "aarch64", "x86_64")] name: &str) {
    let v = variant(name);
    let image = build(v);
    let stubs = Stubs::of(&image);
    let abi = Abi::of(v.arch);
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut b = BatchBuilder::new(abi);
    let vectors: Vec<Vector> = (0..200).flat_map(|i| random_calls(&mut rng, i)).collect();
    let plans: Vec<CasePlan> = vectors
        .iter()
        .map(|x| CaseRun::new(x, "random", &x.name, Layout::Offset(x.offsets[0])).plan_next(&mut b, &stubs, &mut rng))
        .collect();
    assert_eq!(b.ncalls(), 400, "one call per entry");
    let batch = b.layout(image.arena().unwrap()).unwrap();
    let mut results = Vec::new();
    for kind in BackendKind::ALL.into_iter().filter(|k| k.supports(v).is_ok()) {
        let mut backend = kind.open(v, &image, Limits::default()).unwrap();
        let run = run_batch(backend.as_mut(), &batch).unwrap();
        for p in &plans {
            let findings = verdict::check(p, &batch, &run, abi, &image);
            assert!(findings.is_empty(), "{name} on {kind}, {}: {findings:?}", p.name);
        }
        let digests: Vec<u64> = plans.iter().map(|p| p.outputs_digest(&batch, &run)).collect();
        assert!(digests.iter().all(|&d| d != 0), "{kind}: every case has a result to compare");
        results.push((kind, digests));
    }
    assert!(results.len() >= if VARIANTS.iter().any(|x| x.zbb && x.name == name) { 1 } else { 2 });
    for pair in results.windows(2) {
        let ((ka, da), (kb, db)) = (&pair[0], &pair[1]);
        let case = da.iter().zip(db).position(|(x, y)| x != y).map(|i| &plans[i].name);
        assert_eq!(case, None, "{name}: {ka} and {kb} outputs differ");
    }
}

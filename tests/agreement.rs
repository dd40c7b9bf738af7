//! Unicorn, qemu and native agree case by case: the same random batch gives the same return
//! values, callee-saved registers, stack balance, direction flag and byte-identical output
//! buffers on every backend that can run the variant. (The absolute stack address and the
//! x86 arithmetic flags, which psABI leaves undefined after a call, may differ.)

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use kernel_lab::abi::Abi;
use kernel_lab::backend::{run_batch, BackendKind, Limits};
use kernel_lab::batch::{Arg, BatchBuilder};
use kernel_lab::cases::plan::Stubs;
use kernel_lab::variant::VARIANTS;
use rstest::rstest;

use crate::common::{build, variant, SEED};

#[rstest]
fn backends_agree_on_random_calls(#[values("riscv64", "riscv64+zbb", "aarch64", "x86_64")] name: &str) {
    let v = variant(name);
    let image = build(v);
    let e = Stubs::of(&image);
    let abi = Abi::of(v.arch);
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut b = BatchBuilder::new(abi);
    for _ in 0..200 {
        let blocks = rng.gen_range(1..=4usize);
        let data: Vec<u8> = (0..blocks * 64 + 64).map(|_| rng.gen()).collect();
        let input = b.input(&data, rng.gen_range(0..64));
        let state = b.output(&rng.gen::<[u8; 16]>());
        let ofs: i32 = rng.gen_range(-1000..1000);
        let limit = ofs + rng.gen_range(0..blocks as i32 * 64);
        let args = [
            Arg::Ptr(input, 0),
            Arg::Ptr(state, 0),
            Arg::Imm(abi.int32_arg(ofs, rng.gen())),
            Arg::Imm(abi.int32_arg(limit, rng.gen())),
        ];
        b.call(e.md5_compress_mb.unwrap(), args, rng.gen());
        let acc = b.output(
            &kernel_lab::reference::poly1305::Limbs26(std::array::from_fn(|i| {
                rng.gen_range(0..if i == 4 { 1u64 << 27 } else { 1 << 26 })
            }))
            .to_bytes(),
        );
        let r = kernel_lab::reference::poly1305::clamp_r(&rng.gen());
        let r = b.input(&r.to_bytes(), 0);
        let len = rng.gen_range(0..data.len() as u64);
        b.call(e.poly1305.unwrap(), [Arg::Ptr(input, 0), Arg::Imm(len), Arg::Ptr(acc, 0), Arg::Ptr(r, 0)], rng.gen());
    }
    let batch = b.layout(image.arena().unwrap()).unwrap();
    let mut results = Vec::new();
    for kind in BackendKind::ALL.into_iter().filter(|k| k.supports(v).is_ok()) {
        let mut backend = kind.open(v, &image, Limits::default()).unwrap();
        let run = run_batch(backend.as_mut(), &batch).unwrap();
        assert!(run.faults.is_empty(), "{kind}: {:?}", run.faults);
        assert!((0..batch.ncalls()).all(|i| batch.record(&run.resp, i).completed), "{kind}: not every call completed");
        let calls: Vec<_> = (0..batch.ncalls())
            .map(|i| {
                let r = batch.record(&run.resp, i);
                (r.ret, r.saved, r.sp_after.wrapping_sub(r.sp_before), r.flags & kernel_lab::abi::X86_RFLAGS_DF)
            })
            .collect();
        let buffers = run.resp[batch.table_end()..].to_vec();
        results.push((kind, calls, buffers));
    }
    assert!(results.len() >= if VARIANTS.iter().any(|x| x.zbb && x.name == name) { 1 } else { 2 });
    for pair in results.windows(2) {
        let ((ka, ca, ba), (kb, cb, bb)) = (&pair[0], &pair[1]);
        let call = ca.iter().zip(cb).position(|(x, y)| x != y);
        assert_eq!(call, None, "{name}: {ka} and {kb} records differ at call {call:?}");
        let byte = ba.iter().zip(bb).position(|(x, y)| x != y);
        assert_eq!(byte, None, "{name}: {ka} and {kb} output buffers differ at byte {byte:?} after the table");
    }
}

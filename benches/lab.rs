//! Criterion benchmarks of the lab's own hot paths, so a regression in the host-side code shows:
//! laying vector cases into a batch (planning + layout), checking a finished batch's results,
//! and one Unicorn round trip of that batch. Run with `cargo bench` (needs clang and lld, like
//! the tests).

use criterion::{criterion_group, criterion_main, Criterion};
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;

use kernel_lab::abi::Abi;
use kernel_lab::backend::{run_batch, BackendKind, Limits};
use kernel_lab::batch::{Batch, BatchBuilder, Placement};
use kernel_lab::cases::plan::{CasePlan, Stubs};
use kernel_lab::cases::procedure;
use kernel_lab::cases::verdict;
use kernel_lab::image::Image;
use kernel_lab::paths;
use kernel_lab::toolchain;
use kernel_lab::variant::{Kernel, Variant};
use kernel_lab::vectors::{self, VectorSet};

/// The bundled vector sets of both kernels.
fn sets() -> Vec<VectorSet> {
    vectors::bundled_files(&paths::vectors_dir(), &Kernel::ALL).iter().filter_map(|f| vectors::load_file(f).0).collect()
}

/// Every case of `sets` planned into one batch, as `lab run` plans them (first segment of each).
fn plan(image: &Image, sets: &[VectorSet]) -> (Batch, Vec<CasePlan>) {
    let entry = Stubs::of(image);
    let mut b = BatchBuilder::new(Abi::of(image.arch));
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut plans = Vec::new();
    for set in sets {
        for v in &set.vectors {
            plans.extend(procedure::plan_vector(&mut b, &entry, &mut rng, &set.set, v, Placement::End));
        }
    }
    (b.layout(image.arena().expect("arena")).expect("fits"), plans)
}

fn lab(c: &mut Criterion) {
    let v = Variant::by_name("x86_64").expect("x86_64 variant");
    let path = toolchain::build_image(&toolchain::default_build(), v).expect("build (clang, lld)");
    let image = Image::load(&path, v.arch).expect("image");
    let sets = sets();
    let abi = Abi::of(v.arch);
    let (batch, plans) = plan(&image, &sets);
    let mut unicorn = BackendKind::Unicorn.open(v, &image, Limits::default()).expect("unicorn");
    let run = run_batch(unicorn.as_mut(), &batch).expect("run");

    c.bench_function("batch building: plan + layout of every bundled vector", |bench| {
        bench.iter(|| plan(&image, &sets));
    });
    c.bench_function("result checking: every case of the batch", |bench| {
        bench.iter(|| plans.iter().map(|p| verdict::check(p, &batch, &run, abi, &image).len()).sum::<usize>());
    });
    c.bench_function("unicorn round trip: the whole batch", |bench| {
        bench.iter(|| run_batch(unicorn.as_mut(), &batch).expect("run").resp.len());
    });
}

criterion_group!(benches, lab);
criterion_main!(benches);

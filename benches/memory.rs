//! The buffer pool against creating a wgpu buffer each time, and a 10-op
//! eval chain with and without the cache. Run: `cargo bench --bench memory`.

mod common;

use common::Raw;
use criterion::{BenchmarkId, Criterion};
use wgarray::{Array, DType, Device};

const SIZES: [usize; 3] = [4 << 10, 1 << 20, 64 << 20];

fn alloc_release(c: &mut Criterion, device: &Device) {
    let mut g = c.benchmark_group(format!("alloc+release ({:?})", device.backend()));
    for &bytes in &SIZES {
        let n = bytes / 4;
        device.set_cache_limit(u64::MAX);
        g.bench_with_input(BenchmarkId::new("pool (cached)", bytes), &n, |b, &n| {
            b.iter(|| drop(Array::empty(&[n], DType::F32, device).unwrap()))
        });
        // The floor for the line above: an array with no buffer yet. An
        // allocation that is a cache hit costs bookkeeping, a few times this,
        // not a submission and a wait (a loss probe once made it 25x).
        g.bench_with_input(BenchmarkId::new("lazy zeros", bytes), &n, |b, &n| {
            b.iter(|| drop(Array::zeros(&[n], DType::F32, device).unwrap()))
        });
        device.set_cache_limit(0);
        g.bench_with_input(
            BenchmarkId::new("pool (cache limit 0)", bytes),
            &n,
            |b, &n| b.iter(|| drop(Array::empty(&[n], DType::F32, device).unwrap())),
        );
        device.set_cache_limit(u64::MAX);
        let raw = Raw::new(device);
        g.bench_with_input(
            BenchmarkId::new("wgpu create_buffer", bytes),
            &bytes,
            |b, &bytes| b.iter(|| drop(raw.buffer(bytes as u64, common::STORAGE_RW))),
        );
    }
    g.finish();
}

fn chain(c: &mut Criterion, device: &Device) {
    let mut g = c.benchmark_group(format!(
        "10-op chain on f32[1M], eval ({:?})",
        device.backend()
    ));
    let n = 1 << 20;
    let x = Array::full(&[n], 1.0, DType::F32, device).unwrap();
    x.eval().unwrap();
    for (name, limit) in [("with cache", u64::MAX), ("cache limit 0", 0)] {
        device.set_cache_limit(limit);
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut y = x.clone();
                for i in 0..10 {
                    y = (&y + &x).unwrap();
                    if i == 4 {
                        y = (&y * 0.5).unwrap();
                    }
                }
                y.eval().unwrap();
                device.synchronize().unwrap();
            })
        });
    }
    device.set_cache_limit(u64::MAX);
    g.finish();
}

common::bench_main!(
    memory,
    Criterion::default().sample_size(20),
    alloc_release,
    chain
);

//! Matmul throughput: the tiled GEMM beside, in the same run, the reference
//! one-thread-per-output WGSL kernel and CPU sgemm (the `matrixmultiply`
//! crate, single-threaded: its `threading` feature is off).
//!
//! Throughput is in elements = 2*M*N*K flops, so criterion's "Gelem/s" reads
//! as GFLOP/s. One iteration records the matmul, evaluates it and waits for
//! the device (`synchronize`); inputs are on the device already.
//!
//! Also printed once, outside criterion: the cost of the first call of a new
//! shape (pipeline compile included) on a fresh device.

use std::time::{Duration, Instant};

mod common;

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use wgarray::Array;

/// `out = x @ y` on the CPU, one thread (`matrixmultiply::sgemm`): `x` an
/// `m x k` row-major matrix, `y` a `k x n` one read with element strides
/// `(rsb, csb)`, `out` `m x n` row-major.
fn cpu_sgemm(
    (m, k, n): (usize, usize, usize),
    x: &[f32],
    y: &[f32],
    (rsb, csb): (isize, isize),
    out: &mut [f32],
) {
    assert!(m > 0 && k > 0 && n > 0 && rsb >= 0 && csb >= 0);
    assert!(x.len() == m * k && out.len() == m * n);
    assert!(((k - 1) as isize * rsb + (n - 1) as isize * csb) < y.len() as isize);
    // SAFETY: the asserts: `x` and `out` hold exactly their row-major
    // matrices, and every element `(p, j)` of `y` at `p rsb + j csb` lies
    // inside it.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            x.as_ptr(),
            k as isize,
            1,
            y.as_ptr(),
            rsb,
            csb,
            0.0,
            out.as_mut_ptr(),
            n as isize,
            1,
        )
    }
}

fn data(len: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i as u32).wrapping_mul(2654435761) >> 8) as f32 / (1u32 << 24) as f32 - 0.5)
        .collect()
}

const SQUARE: [usize; 4] = [256, 512, 1024, 2048];
/// (M, K, N): decode (M = 1) and a 128-token prefill against transformer
/// weight shapes.
const TRANSFORMER: [(usize, usize, usize); 6] = [
    (1, 384, 1152),
    (1, 1024, 3072),
    (1, 4096, 4096),
    (128, 384, 1152),
    (128, 1024, 3072),
    (128, 4096, 4096),
];
/// The naive kernel only runs where one iteration stays around a second.
const NAIVE_MAX_FLOP: usize = 2_200_000_000;

fn shapes() -> Vec<(usize, usize, usize)> {
    SQUARE
        .iter()
        .map(|&s| (s, s, s))
        .chain(TRANSFORMER)
        .collect()
}

fn first_call() {
    // A fresh device: no GEMM compiled yet. One small elementwise eval
    // first, so that what the process does once (the device's first
    // submission, its poller, the pool's first buffers) is not counted
    // as the first GEMM's. Opened before any other device of the process,
    // and not waited on: a warm-up of the tuning file's kernels (a later
    // process) runs beside the program, as it would in a user's.
    let device = wgarray::Device::new_default().expect("a GPU adapter (see README)");
    let device_name = format!("{} ({:?})", device.info().name, device.backend());
    let warm = Array::from_slice(&data(256), &[256], &device).unwrap();
    (&warm + 1.0f32).unwrap().to_vec::<f32>().unwrap();
    // The last with B transposed (`x @ w.T`, its own shape class).
    for (m, k, n, transposed) in [
        (1024, 1024, 1024, false),
        (1, 4096, 4096, false),
        (128, 1024, 3072, false),
        (1, 4096, 4096, true),
    ] {
        let a = Array::from_slice(&data(m * k), &[m, k], &device).unwrap();
        let b = if transposed {
            Array::from_slice(&data(k * n), &[n, k], &device)
                .unwrap()
                .transpose()
        } else {
            Array::from_slice(&data(k * n), &[k, n], &device).unwrap()
        };
        device.synchronize().unwrap();
        let t = Instant::now();
        a.matmul(&b).unwrap().eval().unwrap();
        device.synchronize().unwrap();
        let first = t.elapsed();
        let t = Instant::now();
        a.matmul(&b).unwrap().eval().unwrap();
        device.synchronize().unwrap();
        let second = t.elapsed();
        println!(
            "first call {m}x{k}x{n}{} on {device_name}: {:.1} ms (second call {:.1} ms, so compile ~{:.1} ms)",
            if transposed { " (B transposed)" } else { "" },
            first.as_secs_f64() * 1e3,
            second.as_secs_f64() * 1e3,
            (first.as_secs_f64() - second.as_secs_f64()) * 1e3
        );
    }
}

/// The group `"{what} f32 on {adapter} ({backend})"`: `samples` samples
/// of 2 s each after 0.5 s of warm-up.
fn group<'a>(
    c: &'a mut Criterion,
    what: &str,
    device: &wgarray::Device,
    samples: usize,
) -> BenchmarkGroup<'a, WallTime> {
    let name = format!("{} ({:?})", device.info().name, device.backend());
    let mut group = c.benchmark_group(format!("{what} f32 on {name}"));
    group.sample_size(samples);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    group
}

fn bench(c: &mut Criterion) {
    first_call(); // the process's first device, for its warm-up
    let device = common::device();
    let mut group = group(c, "matmul", &device, 10);
    for (m, k, n) in shapes() {
        let flop = 2 * m * k * n;
        group.throughput(Throughput::Elements(flop as u64));
        let id = format!("{m}x{k}x{n}");
        let x = data(m * k);
        let y = data(k * n);
        let a = Array::from_slice(&x, &[m, k], &device).unwrap();
        let b = Array::from_slice(&y, &[k, n], &device).unwrap();
        device.synchronize().unwrap();
        group.bench_function(BenchmarkId::new("wgarray gemm", &id), |bch| {
            bch.iter(|| {
                a.matmul(&b).unwrap().eval().unwrap();
                device.synchronize().unwrap();
            })
        });
        if flop <= NAIVE_MAX_FLOP {
            group.bench_function(BenchmarkId::new("wgsl naive", &id), |bch| {
                bch.iter(|| {
                    wgarray::baseline::matmul_naive(&a, &b)
                        .unwrap()
                        .eval()
                        .unwrap();
                    device.synchronize().unwrap();
                })
            });
        }
        let mut out = vec![0.0f32; m * n];
        group.bench_function(BenchmarkId::new("cpu sgemm 1 thread", &id), |bch| {
            bch.iter(|| cpu_sgemm((m, k, n), &x, &y, (n as isize, 1), &mut out))
        });
    }
    group.finish();
}

/// Matrix-vector products (M = 1, the decode step of a language model),
/// with B row-major (`x @ w`, `w: [K, N]`) and transposed (`x @ w.T`,
/// `w: [N, K]`, PyTorch's `nn.Linear` layout, what examples/minilm uses):
/// the tuned kernel (the class's choice, narrowed to the product's columns,
/// see `ShapeClass`), the previous default tile on lavapipe (`register 8 1
/// 1 4`, forced; elsewhere whatever that kernel does there) and CPU sgemm
/// on one core reading the same layout, in the same run. MiniLM's decode shapes
/// (384 -> 1152 Q|K|V, 384 -> 1536 and 1536 -> 384 feed-forward) and two
/// larger ones. Select with `cargo bench --bench matmul -- gemv`.
fn gemv(c: &mut Criterion) {
    use wgarray::tuning::{GemmKernel, ShapeClass};
    let device = common::device();
    let mut group = group(c, "gemv", &device, 20);
    let previous: GemmKernel = "register 8 1 1 4".parse().unwrap();
    for (k, n) in [
        (384, 1152),
        (384, 1536),
        (1536, 384),
        (1024, 3072),
        (4096, 4096),
    ] {
        group.throughput(Throughput::Elements(2 * (k * n) as u64));
        let x = data(k);
        let y = data(k * n);
        let a = Array::from_slice(&x, &[1, k], &device).unwrap();
        for transposed in [false, true] {
            let (b, rsb, csb, id) = if transposed {
                let w = Array::from_slice(&y, &[n, k], &device).unwrap();
                (w.transpose(), 1, k as isize, format!("1x{k}x{n} wT"))
            } else {
                let w = Array::from_slice(&y, &[k, n], &device).unwrap();
                (w, n as isize, 1, format!("1x{k}x{n} w"))
            };
            let class = ShapeClass::of_layout(1, n, rsb, csb);
            // Tune (first call of the class) outside the measurement.
            a.matmul(&b).unwrap().eval().unwrap();
            device.synchronize().unwrap();
            device.wait_warm_up();
            let tuned = device.gemm_kernel(wgarray::DType::F32, class);
            let label = tuned.map_or("?".into(), |k| k.to_string());
            let mut runs = vec![(format!("tuned [{label}]"), None)];
            if device.set_gemm_kernel(Some(previous)).is_ok() {
                runs.push((format!("previous [{previous}]"), Some(previous)));
            }
            for (what, kernel) in runs {
                device.set_gemm_kernel(kernel).unwrap();
                group.bench_function(BenchmarkId::new(what, &id), |bch| {
                    bch.iter(|| {
                        a.matmul(&b).unwrap().eval().unwrap();
                        device.synchronize().unwrap();
                    })
                });
            }
            device.set_gemm_kernel(None).unwrap();
            let mut out = vec![0.0f32; n];
            group.bench_function(BenchmarkId::new("cpu sgemm 1 thread", &id), |bch| {
                bch.iter(|| cpu_sgemm((1, k, n), &x, &y, (rsb, csb), &mut out))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench, gemv);
criterion_main!(benches);

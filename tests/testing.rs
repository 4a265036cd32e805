//! `wgarray::testing` on the adapter WGARRAY_BACKEND picks: user kernels
//! against independent host references, on random data at odd sizes, with
//! poisoned outputs; and the typed errors.

mod common;

use common::{Rng, device};
use half::f16;
use wgarray::testing::{self, KernelTest, Tolerance};
use wgarray::{DType, Error};

const AXPY: &str = r#"
override alpha: f32 = 1.0;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn axpy(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = id.x + id.y * nwg.x * 64u;
    if i < arrayLength(&out) {
        out[i] = alpha * x[i] + y[i];
    }
}
"#;

#[test]
fn axpy_with_an_override_constant_matches_the_host() {
    let dev = device();
    let mut rng = Rng::new(1);
    for n in [1usize, 63, 65, 4097, 100_003] {
        let x = rng.vec_f32(n);
        let y = rng.vec_f32(n);
        let alpha = -1.75;
        let out = KernelTest::new(AXPY, "axpy")
            .device(&dev)
            .input(&x)
            .input(&y)
            .output(DType::F32, &[n])
            .constant("alpha", alpha)
            .workgroups([(n as u32).div_ceil(64), 1, 1])
            .run()
            .expect("axpy runs");
        // f64 reference, rounded once; the GPU may or may not fuse.
        let want: Vec<f32> = x
            .iter()
            .zip(&y)
            .map(|(&x, &y)| (alpha * x as f64 + y as f64) as f32)
            .collect();
        out.assert_close(0, &want, Tolerance::abs(1e-6).with_ulps(2));
        assert!(out.unwritten(0).is_empty());
        assert_eq!(out.shape(0), &[n]);
    }
}

#[test]
fn integer_kernel_with_several_outputs_is_exact() {
    const DIVMOD: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<i32>;
@group(0) @binding(1) var<storage, read> b: array<i32>;
@group(0) @binding(2) var<storage, read_write> q: array<i32>;
@group(0) @binding(3) var<storage, read_write> r: array<i32>;
@group(0) @binding(4) var<storage, read_write> bits: array<u32>;
@group(0) @binding(5) var<storage, read_write> negative: array<u32>;

@compute @workgroup_size(32)
fn divmod(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&q) {
        return;
    }
    // Not `a % b`: naga writes it as GLSL `%`, undefined for negative
    // operands, and llvmpipe gets it wrong (e.g. -7 % 3 gives 0). See
    // kernels/portability.rs, which rejects signed `%` in wgarray's kernels.
    let quotient = a[i] / b[i];
    q[i] = quotient;
    r[i] = a[i] - b[i] * quotient;
    bits[i] = bitcast<u32>(a[i]) >> 3u;
    negative[i] = select(0u, 1u, a[i] < 0);
}
"#;
    let dev = device();
    let mut rng = Rng::new(2);
    let n = 777;
    let a = rng.vec_i32(n, 100_000);
    let b: Vec<i32> = rng
        .vec_i32(n, 50)
        .into_iter()
        .map(|v| if v == 0 { 7 } else { v })
        .collect();
    let out = KernelTest::new(DIVMOD, "divmod")
        .device(&dev)
        .input(&a)
        .input(&b)
        .output(DType::I32, &[n])
        .output(DType::I32, &[n])
        .output(DType::U32, &[n])
        .output(DType::Bool, &[n])
        .workgroups([(n as u32).div_ceil(32), 1, 1])
        .run()
        .expect("divmod runs");
    assert_eq!(out.len(), 4);
    let q: Vec<i32> = a.iter().zip(&b).map(|(a, b)| a / b).collect();
    let r: Vec<i32> = a.iter().zip(&b).map(|(a, b)| a % b).collect();
    let bits: Vec<u32> = a.iter().map(|&a| (a as u32) >> 3).collect();
    let negative: Vec<bool> = a.iter().map(|&a| a < 0).collect();
    out.assert_close(0, &q, Tolerance::EXACT);
    out.assert_close(1, &r, Tolerance::EXACT);
    out.assert_close(2, &bits, Tolerance::EXACT);
    assert_eq!(out.get::<bool>(3).unwrap(), negative);
    assert!(matches!(
        out.get::<f32>(0),
        Err(Error::DType {
            dtype: DType::F32,
            other: Some(DType::I32),
            ..
        })
    ));
}

#[test]
fn two_dimensional_dispatch_with_a_uniform_transposes() {
    const TRANSPOSE: &str = r#"
struct Dims { rows: u32, cols: u32 }
@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(8, 8)
fn transpose(@builtin(global_invocation_id) id: vec3<u32>) {
    let r = id.y;
    let c = id.x;
    if r < dims.rows && c < dims.cols {
        dst[c * dims.rows + r] = src[r * dims.cols + c];
    }
}
"#;
    let dev = device();
    let mut rng = Rng::new(3);
    let (rows, cols) = (37usize, 53usize);
    let src = rng.vec_f32(rows * cols);
    let dims: Vec<u8> = [rows as u32, cols as u32]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let out = KernelTest::new(TRANSPOSE, "transpose")
        .device(&dev)
        .uniform_bytes(&dims)
        .input(&src)
        .output(DType::F32, &[cols, rows])
        .workgroups([(cols as u32).div_ceil(8), (rows as u32).div_ceil(8), 1])
        .run()
        .expect("transpose runs");
    let mut want = vec![0.0f32; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            want[c * rows + r] = src[r * cols + c];
        }
    }
    out.assert_close(0, &want, Tolerance::EXACT);
}

/// A kernel that skips elements is caught by the poison, whatever the
/// tolerance, and the report says which elements were never written.
#[test]
fn never_written_elements_fail_with_a_readable_report() {
    const EVEN_ONLY: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = 2u * id.x;
    if i < arrayLength(&out) {
        out[i] = x[i] * 2.0;
    }
}
"#;
    let dev = device();
    let mut rng = Rng::new(4);
    let (rows, cols) = (5usize, 7usize);
    let n = rows * cols;
    let x = rng.vec_f32(n);
    let out = KernelTest::new(EVEN_ONLY, "main")
        .device(&dev)
        .input(&x)
        .output(DType::F32, &[rows, cols])
        .workgroups([1, 1, 1])
        .run()
        .expect("runs");
    let want: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    let odd: Vec<usize> = (1..n).step_by(2).collect();
    assert_eq!(out.unwritten(0), odd);
    let m = out
        .check(0, &want, Tolerance::abs(f64::INFINITY))
        .expect_err("the odd elements were never written");
    assert_eq!((m.count, m.unwritten, m.total), (odd.len(), odd.len(), n));
    let report = m.to_string();
    assert!(
        report.contains("17 of 35 float32 elements differ (17 never written"),
        "{report}"
    );
    assert!(
        report.contains("[0, 1] (flat 1): never written (still poison 0x7fc0dead)"),
        "{report}"
    );
    let panic = std::panic::catch_unwind(|| out.assert_close(0, &want, Tolerance::EXACT))
        .expect_err("assert_close panics");
    let text = panic.downcast_ref::<String>().expect("a formatted message");
    assert!(text.contains("output 0 does not match"), "{text}");
}

/// f16 arithmetic needs SHADER_F16: it runs (and is right) where the adapter
/// has it, and fails with exactly `MissingFeature` where it does not. GL
/// (llvmpipe, and wgpu's GL back end in general) never has it.
#[test]
fn f16_kernels_run_or_fail_with_missing_feature() {
    const FMA16: &str = r#"
enable f16;
@group(0) @binding(0) var<storage, read> a: array<f16>;
@group(0) @binding(1) var<storage, read> b: array<f16>;
@group(0) @binding(2) var<storage, read_write> out: array<f16>;
@compute @workgroup_size(64)
fn mul16(@builtin(global_invocation_id) id: vec3<u32>) {
    // Two elements per thread: no two threads share a 32-bit word.
    for (var k = 0u; k < 2u; k++) {
        let i = 2u * id.x + k;
        if i < arrayLength(&out) {
            out[i] = a[i] * b[i];
        }
    }
}
"#;
    let dev = device();
    let mut rng = Rng::new(5);
    let n = 1001; // odd: the last word is half padding
    let a: Vec<f16> = rng.vec_f32(n).into_iter().map(f16::from_f32).collect();
    let b: Vec<f16> = rng.vec_f32(n).into_iter().map(f16::from_f32).collect();
    let result = KernelTest::new(FMA16, "mul16")
        .device(&dev)
        .input(&a)
        .input(&b)
        .output(DType::F16, &[n])
        .workgroups([(n as u32).div_ceil(128), 1, 1])
        .run();
    let has_f16 = dev.features().contains(wgarray::wgpu::Features::SHADER_F16);
    if common::is_gl(&dev) {
        assert!(!has_f16, "wgpu's GL back end offers no SHADER_F16");
    }
    if has_f16 {
        let out = result.expect("f16 kernel runs with SHADER_F16");
        // Correctly rounded f16 product, computed in f64. A product below
        // f16's smallest normal (6.1e-5) may be flushed to zero.
        let want: Vec<f16> = a
            .iter()
            .zip(&b)
            .map(|(a, b)| f16::from_f64(a.to_f64() * b.to_f64()))
            .collect();
        out.assert_close(0, &want, Tolerance::ulps(1).with_abs(6.2e-5));
    } else {
        match result {
            Err(Error::MissingFeature {
                feature: "SHADER_F16",
                ..
            }) => {}
            other => panic!("expected MissingFeature(SHADER_F16), got {other:?}"),
        }
    }
}

#[test]
fn bad_wgsl_is_a_kernel_error_with_nagas_message() {
    let dev = device();
    let run = |src: &str, ep: &str| {
        KernelTest::new(src, ep)
            .device(&dev)
            .output(DType::F32, &[4])
            .run()
    };
    let syntax = "@compute @workgroup_size(1) fn main() { let x = ; }";
    match run(syntax, "main") {
        Err(Error::Kernel { kernel, message }) => {
            assert!(kernel.contains("main"), "{kernel}");
            assert!(message.contains("expected"), "{message}");
        }
        other => panic!("expected Error::Kernel, got {other:?}"),
    }
    let types = "@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n\
                 @compute @workgroup_size(1) fn main() { o[0] = 1u; }";
    assert!(matches!(run(types, "main"), Err(Error::Kernel { .. })));
    let fine = "@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n\
                @compute @workgroup_size(1) fn main() { o[0] = 1.0; }";
    match run(fine, "nope") {
        Err(Error::Kernel { message, .. }) => assert!(message.contains("no entry point `nope`")),
        other => panic!("expected Error::Kernel, got {other:?}"),
    }
    assert!(run(fine, "main").is_ok());
}

#[test]
fn wgpu_validation_errors_are_typed() {
    let dev = device();
    // The shader writes binding 0, but the test binds it read-only.
    let writes = "@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n\
                  @compute @workgroup_size(1) fn main() { o[0] = 1.0; }";
    let r = KernelTest::new(writes, "main")
        .device(&dev)
        .input(&[0.0f32; 4])
        .run();
    assert!(matches!(r, Err(Error::Validation(_))), "{r:?}");
    // More workgroups than the adapter allows.
    let too_many = dev.limits().max_compute_workgroups_per_dimension + 1;
    let r = KernelTest::new(writes, "main")
        .device(&dev)
        .output(DType::F32, &[4])
        .workgroups([too_many, 1, 1])
        .run();
    assert!(matches!(r, Err(Error::Validation(_))), "{r:?}");
    // An override the shader does not declare.
    let r = KernelTest::new(writes, "main")
        .device(&dev)
        .output(DType::F32, &[4])
        .constant("no_such_constant", 1.0)
        .run();
    assert!(matches!(r, Err(Error::Validation(_))), "{r:?}");
    // The device is still usable afterwards.
    let ok = KernelTest::new(writes, "main")
        .device(&dev)
        .output(DType::F32, &[4])
        .run()
        .expect("runs");
    assert_eq!(ok.get::<f32>(0).unwrap()[0], 1.0);
    assert_eq!(ok.unwritten(0), vec![1, 2, 3]);
    assert!(dev.take_uncaptured_errors().is_empty());
}

/// Without `.device(..)` the harness picks its own adapter, honouring
/// WGARRAY_BACKEND, and fails (never skips) when there is none.
#[test]
fn the_default_device_follows_the_environment() {
    let dev = testing::default_device().expect("a default adapter");
    if let Ok(b) = std::env::var(wgarray::BACKEND_ENV)
        && !b.trim().is_empty()
    {
        assert_eq!(dev.backend(), wgarray::parse_backend(&b).unwrap());
    }
    let out = KernelTest::new(AXPY, "axpy")
        .input(&[1.0f32, 2.0, 3.0])
        .input(&[10.0f32, 20.0, 30.0])
        .output(DType::F32, &[3])
        .run()
        .expect("runs on the default device");
    out.assert_close(0, &[11.0f32, 22.0, 33.0], Tolerance::EXACT);
}

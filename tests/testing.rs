//! `wgarray::testing` on the adapter WGARRAY_BACKEND picks: user kernels
//! against independent host references, on random data at odd sizes, with
//! poisoned outputs; and the typed errors.

mod common;

use common::{Rng, device};
use half::f16;
use wgarray::testing::{self, Disagreement, Fixture, KernelTest, Tolerance};
use wgarray::wgpu::Backend;
use wgarray::{DType, Error, Limit};

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
            .workgroups([n.div_ceil(64), 1, 1])
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
        .workgroups([n.div_ceil(32), 1, 1])
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
        .workgroups([cols.div_ceil(8), rows.div_ceil(8), 1])
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
        .workgroups([n.div_ceil(128), 1, 1])
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

/// Bad input is a typed error before anything reaches wgpu: bindings that
/// do not match the shader, too many workgroups, unknown or out-of-range
/// override constants. The device stays usable and wgpu saw nothing.
#[test]
fn bad_input_is_a_typed_error_never_a_panic() {
    let dev = device();
    // The shader writes binding 0, but the test binds it read-only.
    let writes = "@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n\
                  @compute @workgroup_size(1) fn main() { o[0] = 1.0; }";
    let r = KernelTest::new(writes, "main")
        .device(&dev)
        .input(&[0.0f32; 4])
        .run();
    match r {
        Err(Error::BindingMismatch {
            binding: 0,
            name,
            wgsl,
            host,
            ..
        }) => {
            assert_eq!(name, "o");
            assert_eq!(wgsl, "var<storage, read_write> o: array<f32>");
            assert_eq!(host, "an input of 4 f32");
        }
        other => panic!("expected BindingMismatch, got {other:?}"),
    }
    // More workgroups than the adapter allows.
    let too_many = dev.limits().max_compute_workgroups_per_dimension as usize + 1;
    let r = KernelTest::new(writes, "main")
        .device(&dev)
        .output(DType::F32, &[4])
        .workgroups([too_many, 1, 1])
        .run();
    match r {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.contains("max_compute_workgroups_per_dimension"), "{m}")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // An override the shader does not declare, and a value its type cannot take.
    let axpy_with = |name: &str, value: f64| {
        KernelTest::new(AXPY, "axpy")
            .device(&dev)
            .input(&[1.0f32])
            .input(&[1.0f32])
            .output(DType::F32, &[1])
            .constant(name, value)
            .run()
    };
    match axpy_with("no_such_constant", 1.0) {
        Err(Error::InvalidArgument(m)) => assert!(
            m.contains("`no_such_constant` is not declared by the shader; it declares [alpha]"),
            "{m}"
        ),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    let r = axpy_with("alpha", 1e39);
    assert!(
        matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("`alpha: f32` cannot take the value 1e39")),
        "{r:?}"
    );
    // A read of an output that does not exist.
    let r = KernelTest::new(writes, "main")
        .device(&dev)
        .read_output(3)
        .run();
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
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

/// f32 host data into `array<u32>` used to pass silently: the declared
/// types are read from naga's module, and every mismatch names the binding,
/// its WGSL type and the host type.
#[test]
fn host_types_are_checked_against_the_declared_types() {
    const BITS: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&y) { y[id.x] = x[id.x] >> 1u; }
}
"#;
    let dev = device();
    let base = || KernelTest::new(BITS, "main").device(&dev);
    let expect_mismatch =
        |r: wgarray::Result<testing::Outputs>, b: u32, wgsl: &str, host: &str| match r {
            Err(e @ Error::BindingMismatch { .. }) => {
                let Error::BindingMismatch {
                    binding,
                    wgsl: w,
                    host: h,
                    ..
                } = &e
                else {
                    unreachable!()
                };
                assert_eq!(*binding, b, "{e}");
                assert_eq!(w, wgsl, "{e}");
                assert!(h.contains(host), "{e}");
            }
            other => panic!("expected BindingMismatch at {b}, got {other:?}"),
        };
    expect_mismatch(
        base().input(&[1.0f32, 2.0]).output(DType::U32, &[2]).run(),
        0,
        "var<storage, read> x: array<u32>",
        "an input of 2 f32 (a f32 element cannot back u32)",
    );
    expect_mismatch(
        base().input(&[1u32, 2]).output(DType::I32, &[2]).run(),
        1,
        "var<storage, read_write> y: array<u32>",
        "output 0 (2 i32, read-write)",
    );
    // A binding the shader does not declare, and one it uses but is not bound.
    expect_mismatch(
        base()
            .input(&[1u32, 2])
            .output(DType::U32, &[2])
            .output(DType::U32, &[2])
            .run(),
        2,
        "nothing",
        "output 1",
    );
    expect_mismatch(
        base().input(&[1u32, 2]).run(),
        1,
        "var<storage, read_write> y: array<u32>",
        "nothing",
    );
    // The right types pass, and the bits are right.
    let x: Vec<u32> = (0..7).map(|i| 0xF000_0001u32.wrapping_mul(i + 1)).collect();
    let out = base()
        .input(&x)
        .output(DType::U32, &[7])
        .threads([7, 1, 1])
        .run()
        .unwrap();
    out.assert_close(
        0,
        &x.iter().map(|v| v >> 1).collect::<Vec<u32>>(),
        Tolerance::EXACT,
    );
    // Outputs::check with the wrong element type says so.
    let m = out.check(0, &[0.0f32; 7], Tolerance::EXACT).unwrap_err();
    assert_eq!(
        m.incomparable,
        Some(testing::Incomparable::DType {
            got: DType::U32,
            want: DType::F32
        })
    );
    let text = m.to_string();
    assert!(
        text.contains("the output is uint32, want is float32"),
        "{text}"
    );
    let m = out.check(5, &[0u32; 7], Tolerance::EXACT).unwrap_err();
    assert!(m.to_string().contains("there is no output 5"), "{m}");
}

/// An output past the adapter's largest storage binding is `TooLarge`, as in
/// the array API, before anything is allocated.
#[test]
fn an_output_past_the_binding_limit_is_too_large() {
    let dev = device();
    let max = dev.limits().max_storage_buffer_binding_size;
    let elems = (max / 4 + 1) as usize;
    let r = KernelTest::new(AXPY, "axpy")
        .device(&dev)
        .input(&[1.0f32])
        .input(&[1.0f32])
        .output(DType::F32, &[elems])
        .run();
    let e = r.expect_err("expected TooLarge, got Ok");
    match &e {
        Error::TooLarge {
            limit,
            value,
            max: m,
            ..
        } => {
            assert_eq!(*limit, Limit::StorageBinding);
            assert_eq!(*value, elems as u64 * 4);
            assert_eq!(*m, max);
            assert!(e.to_string().contains("bytes"), "{e}");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(dev.take_uncaptured_errors().is_empty());
}

const SIGNED_REM: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<i32>;
@group(0) @binding(1) var<storage, read> b: array<i32>;
@group(0) @binding(2) var<storage, read_write> r: array<i32>;
@compute @workgroup_size(64)
fn rem(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&r) {
        r[id.x] = a[id.x] % b[id.x]; // WGSL: truncated; GLSL: undefined for negatives
    }
}
"#;

/// The headline: one call runs the kernel on every adapter, and a kernel
/// that is wrong on one backend only (signed `%` through naga's GLSL on
/// llvmpipe) is caught, with a report naming both adapters and backends,
/// the elements and both values. The finding becomes a fixture file that
/// pins the driver bug: it replays right on Vulkan and wrong on GL.
#[test]
fn a_backend_only_bug_is_caught_by_the_differential_run_and_pinned() {
    let mut rng = Rng::new(11);
    let n = 37;
    let a = rng.vec_i32(n, 50);
    let b: Vec<i32> = rng
        .vec_i32(n, 9)
        .into_iter()
        .map(|v| if v == 0 { 3 } else { v })
        .collect();
    let want: Vec<i32> = a.iter().zip(&b).map(|(a, b)| a % b).collect();
    let test = KernelTest::new(SIGNED_REM, "rem")
        .input(&a)
        .input(&b)
        .output(DType::I32, &[n])
        .threads([n, 1, 1]);
    let diff = test.run_on_all().expect("adapters");
    let vulkan = diff.on(Backend::Vulkan).expect("a Vulkan adapter ran it");
    let gl = diff.on(Backend::Gl).expect("a GL adapter ran it");
    vulkan.assert_close(0, &want, Tolerance::EXACT);
    assert!(
        gl.check(0, &want, Tolerance::EXACT).is_err(),
        "llvmpipe got signed % right"
    );
    let report = diff
        .check(Tolerance::EXACT)
        .expect_err("the backends disagree");
    let text = report.to_string();
    assert!(text.contains("1 disagreement(s)"), "{text}");
    assert!(
        text.contains(" on gl") && text.contains(" on vulkan"),
        "{text}"
    );
    let Disagreement::Values { mismatches, .. } = &report.items[0] else {
        panic!("{text}")
    };
    let first = &mismatches.first[0];
    assert!(a[first.index] < 0 || b[first.index] < 0, "{text}");
    // Both values are printed, each after its backend.
    let (g, w) = (first.got, first.want);
    let line = |a: &str, b: &str| format!("[{}]: {a} {g}, {b} {w} ", first.index);
    assert!(
        text.contains(&line("gl", "vulkan")) || text.contains(&line("vulkan", "gl")),
        "{text}"
    );
    // Against the host reference, only GL fails.
    let against = diff.check_output(0, &want, Tolerance::EXACT).unwrap_err();
    assert_eq!(against.items.len(), 1, "{against}");
    assert!(
        against.to_string().contains("on gl vs reference"),
        "{against}"
    );
    // Issue 37: the headline separates a backend difference from a wrong
    // kernel.
    assert!(
        against
            .to_string()
            .contains("\nthe adapters disagree with each other: ")
            && against
                .to_string()
                .contains("on vulkan match the reference"),
        "{against}"
    );
    // The static check flags the same hazard without running anything.
    let p = test
        .check_portability()
        .expect_err("signed % is a GL hazard");
    assert_eq!(
        p.issues[0].stage,
        testing::portability::Stage::GlHazard,
        "{p}"
    );

    // Pin it: save the GL finding, load it back, replay on every adapter.
    let gl_adapter = diff
        .runs
        .iter()
        .find(|r| r.adapter.backend == Backend::Gl)
        .unwrap()
        .adapter
        .clone();
    let fixture = Fixture::new(&test)
        .expect(0, &want, Tolerance::EXACT)
        .found_on(&gl_adapter, gl)
        .note("llvmpipe: signed % through naga's GLSL is wrong for negative operands");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("signed_rem_gl.json");
    fixture.save(&path).unwrap();
    let loaded = Fixture::load(&path).unwrap();
    assert_eq!(loaded, fixture);
    assert_eq!(loaded.observed.as_ref(), Some(gl));
    for (adapter, device) in testing::all_devices() {
        let Ok(device) = device else { continue };
        let replay = loaded.replay_on(&device).unwrap();
        match adapter.backend {
            Backend::Gl => assert!(loaded.check(&replay).is_err(), "fixed on {adapter}?"),
            _ => loaded.check(&replay).unwrap(),
        }
    }
    assert_eq!(loaded.recorded_device().unwrap().backend(), Backend::Gl);
}

/// A portable kernel agrees on every adapter and with the reference.
#[test]
fn a_portable_kernel_agrees_on_every_adapter() {
    let mut rng = Rng::new(12);
    let n = 1025;
    let (x, y) = (rng.vec_f32(n), rng.vec_f32(n));
    let diff = KernelTest::new(AXPY, "axpy")
        .input(&x)
        .input(&y)
        .output(DType::F32, &[n])
        .constant("alpha", 0.5f32)
        .threads([n, 1, 1])
        .run_on_all()
        .unwrap();
    assert!(diff.outputs().count() >= 2, "{diff:?}");
    diff.assert_agree(Tolerance::ulps(1));
    let want: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(&x, &y)| (0.5 * x as f64 + y as f64) as f32)
        .collect();
    diff.assert_close(0, &want, Tolerance::ulps(1));
}

const REVERSE: &str = r#"
const WG: u32 = 64u;
var<workgroup> tile: array<f32, WG>;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

// Reverse each block of 64 through workgroup memory.
@compute @workgroup_size(64)
fn with_barrier(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) i: u32) {
    tile[i] = x[wg.x * WG + i];
    workgroupBarrier();
    y[wg.x * WG + i] = tile[WG - 1u - i];
}

@compute @workgroup_size(64)
fn racy(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) i: u32) {
    tile[i] = x[wg.x * WG + i];
    // missing workgroupBarrier(): reads slots other invocations may not have written yet
    y[wg.x * WG + i] = tile[WG - 1u - i];
}
"#;

/// A race through workgroup memory (a missing barrier) is caught by
/// repeated runs: on Mesa every run is wrong alike, on a GPU runs differ;
/// the check reports either.
#[test]
fn a_missing_barrier_is_caught_by_repeated_runs() {
    let dev = device();
    let mut rng = Rng::new(13);
    let n = 64 * 5;
    let x = rng.vec_f32(n);
    let want: Vec<f32> = x.chunks(64).flat_map(|c| c.iter().rev().copied()).collect();
    let test = |ep: &str| {
        KernelTest::new(REVERSE, ep)
            .device(&dev)
            .input(&x)
            .output(DType::F32, &[n])
            .workgroups([n / 64, 1, 1])
    };
    let good = test("with_barrier").run_repeated(8).unwrap();
    good.check_stable().unwrap();
    good.assert_close(0, &want, Tolerance::EXACT);
    let bad = test("racy").run_repeated(8).unwrap();
    let report = bad
        .check(0, &want, Tolerance::EXACT)
        .expect_err("the race is caught");
    let text = report.to_string();
    assert!(text.starts_with("8 runs on "), "{text}");
    assert!(text.contains("vs reference"), "{text}");
    if dev.info().device_type == wgarray::wgpu::DeviceType::Cpu {
        // Mesa runs a workgroup's invocations in a fixed order: every run
        // is wrong alike, reported once, and the headline says what that
        // means (issue 37: it printed the same mismatches 8 times).
        assert_eq!(report.items.len(), 1, "{text}");
        assert!(
            text.contains(
                "\nevery run agrees bit for bit and every run differs from the reference"
            ) && text.contains("missing barrier"),
            "{text}"
        );
        assert_eq!(text.matches("vs reference").count(), 1, "{text}");
    }
}

/// Issue 37: an accumulating kernel bound to a plain `output` (filled with
/// poison) gives poison plus its count; the report says so and suggests a
/// zeroed `inout`. Run on every adapter, which all get it wrong alike: the
/// headline says the adapters agree and all differ from the reference.
#[test]
fn an_accumulator_on_a_poisoned_output_is_explained() {
    const COUNT: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> bins: array<atomic<u32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&x) { atomicAdd(&bins[x[id.x] % 4u], 1u); }
}
"#;
    let mut rng = Rng::new(37);
    let n = 1025;
    let x: Vec<u32> = (0..n).map(|_| (rng.next_u64() % 1000) as u32).collect();
    let mut want = vec![0u32; 4];
    for v in &x {
        want[*v as usize % 4] += 1;
    }
    let test = |zeroed: bool| {
        let t = KernelTest::new(COUNT, "main").input(&x);
        let t = if zeroed {
            t.inout(&[0u32; 4])
        } else {
            t.output(DType::U32, &[4])
        };
        t.threads([n, 1, 1])
    };
    let diff = test(false).run_on_all().expect("adapters");
    let report = diff
        .check_output(0, &want, Tolerance::EXACT)
        .expect_err("poison plus the counts");
    let text = report.to_string();
    let first = want[0];
    assert!(
        text.contains(&format!("= poison 0xdeadbeef + {first}"))
            && text.contains(
                "hint: 4 of the 4 values shown are the poison pattern plus a small count"
            )
            && text.contains("`inout(&zeros)`"),
        "{text}"
    );
    if diff.outputs().count() >= 2 {
        assert!(
            text.contains("\nthe adapters agree with each other and all differ from the reference"),
            "{text}"
        );
    }
    // What the hint says works.
    test(true)
        .run_on_all()
        .expect("adapters")
        .assert_close(0, &want, Tolerance::EXACT);
}

/// Atomics in storage and in workgroup memory: a histogram into zeros
/// (`inout`), and a workgroup-local count added once per workgroup.
#[test]
fn atomics_in_storage_and_workgroup_memory() {
    const HIST: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> bins: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read_write> odd: atomic<u32>;
var<workgroup> local_odd: atomic<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    if id.x < arrayLength(&x) {
        atomicAdd(&bins[x[id.x] % arrayLength(&bins)], 1u);
        if (x[id.x] & 1u) == 1u { atomicAdd(&local_odd, 1u); }
    }
    workgroupBarrier();
    if li == 0u { atomicAdd(&odd, atomicLoad(&local_odd)); }
}
"#;
    let dev = device();
    let mut rng = Rng::new(14);
    let n = 1025;
    let bins = 7;
    let x: Vec<u32> = (0..n).map(|_| (rng.next_u64() % 1000) as u32).collect();
    let runs = KernelTest::new(HIST, "main")
        .device(&dev)
        .input(&x)
        .inout(&vec![0u32; bins])
        .inout(&[0u32])
        .threads([n, 1, 1])
        .run_repeated(3)
        .unwrap();
    let mut want = vec![0u32; bins];
    for v in &x {
        want[*v as usize % bins] += 1;
    }
    runs.assert_close(0, &want, Tolerance::EXACT);
    let odd = x.iter().filter(|v| *v % 2 == 1).count() as u32;
    runs.assert_close(1, &[odd], Tolerance::EXACT);
}

/// A uniform struct straight from a `#[repr(C)]` Rust struct (bytemuck);
/// a layout mistake (vec3's 16-byte alignment) is refused with both sizes.
#[test]
fn uniform_structs_by_bytemuck_with_layout_checked() {
    const AFFINE: &str = r#"
struct Params { n: u32, scale: f32, offset: vec3<f32> }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < p.n { y[id.x] = p.scale * x[id.x] + p.offset[id.x % 3u]; }
}
"#;
    #[repr(C)]
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    struct Params {
        n: u32,
        scale: f32,
        _pad: [u32; 2],
        offset: [f32; 3],
        _pad2: u32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    struct Packed {
        n: u32,
        scale: f32,
        offset: [f32; 3],
    }
    let dev = device();
    let mut rng = Rng::new(15);
    let n = 33;
    let x = rng.vec_f32(n);
    let p = Params {
        n: n as u32,
        scale: -2.0,
        _pad: [0; 2],
        offset: [0.5, 1.5, -4.0],
        _pad2: 0,
    };
    let out = KernelTest::new(AFFINE, "main")
        .device(&dev)
        .uniform(&p)
        .input(&x)
        .output(DType::F32, &[n])
        .threads([n, 1, 1])
        .run()
        .unwrap();
    let want: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, v)| -2.0 * v + p.offset[i % 3])
        .collect();
    out.assert_close(0, &want, Tolerance::ulps(1));
    let r = KernelTest::new(AFFINE, "main")
        .device(&dev)
        .uniform(&Packed {
            n: n as u32,
            scale: 1.0,
            offset: [0.0; 3],
        })
        .input(&x)
        .output(DType::F32, &[n])
        .run();
    match r {
        Err(e @ Error::BindingMismatch { binding: 0, .. }) => {
            let text = e.to_string();
            assert!(text.contains("a uniform of 20 bytes (Packed)"), "{text}");
            assert!(text.contains("takes 32 bytes"), "{text}");
            assert!(text.contains("vec3"), "{text}");
        }
        other => panic!("expected BindingMismatch, got {other:?}"),
    }
}

/// Override constants of every scalar type (f16 where the adapter has
/// SHADER_F16), including one that sizes the workgroup, which
/// `threads` follows.
#[test]
fn override_constants_of_every_scalar_type() {
    const CONSTS: &str = r#"
override flag: bool = false;
override k_i: i32 = 0;
override k_u: u32 = 0u;
override k_f: f32 = 0.0;
@id(7) override wg: u32 = 64u;
@group(0) @binding(0) var<storage, read_write> ints: array<i32>;
@group(0) @binding(1) var<storage, read_write> floats: array<f32>;
@group(0) @binding(2) var<storage, read_write> per_thread: array<u32>;
@compute @workgroup_size(wg)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(workgroup_id) g: vec3<u32>) {
    if id.x == 0u {
        ints[0] = select(0, 1, flag);
        ints[1] = k_i;
        ints[2] = i32(k_u >> 16u);
        floats[0] = k_f;
    }
    if id.x < arrayLength(&per_thread) { per_thread[id.x] = g.x; }
}
"#;
    let dev = device();
    let n = 100;
    let out = KernelTest::new(CONSTS, "main")
        .device(&dev)
        .output(DType::I32, &[3])
        .output(DType::F32, &[1])
        .output(DType::U32, &[n])
        .constant("flag", true)
        .constant("k_i", -123_456i32)
        .constant("k_u", 0xFFFF_0000u32)
        .constant("k_f", 0.1f32)
        .constant("7", 16u32)
        .threads([n, 1, 1])
        .run()
        .unwrap();
    out.assert_close(0, &[1i32, -123_456, 0xFFFF], Tolerance::EXACT);
    out.assert_close(1, &[0.1f32], Tolerance::EXACT);
    // 16 invocations per workgroup: the override sized it, threads followed.
    out.assert_close(
        2,
        &(0..n as u32).map(|i| i / 16).collect::<Vec<u32>>(),
        Tolerance::EXACT,
    );
    let r = KernelTest::new(CONSTS, "main")
        .device(&dev)
        .output(DType::I32, &[3])
        .output(DType::F32, &[1])
        .output(DType::U32, &[n])
        .constant("k_u", -1i32)
        .run();
    assert!(
        matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("`k_u: u32` cannot take the value -1")),
        "{r:?}"
    );

    const HALF: &str = r#"
enable f16;
override h: f16 = 0.0h;
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(1) fn main() { o[0] = f32(h); }
"#;
    let r = KernelTest::new(HALF, "main")
        .device(&dev)
        .output(DType::F32, &[1])
        .constant("h", half::f16::from_f32(0.333))
        .run();
    if dev.features().contains(wgarray::wgpu::Features::SHADER_F16) {
        r.unwrap()
            .assert_close(0, &[half::f16::from_f32(0.333).to_f32()], Tolerance::EXACT);
    } else {
        assert!(matches!(r, Err(Error::MissingFeature { .. })), "{r:?}");
    }
}

/// Several entry points of one module over several passes: the output of
/// one pass is the input of the next, and a last pass updates an output
/// in place.
#[test]
fn several_entry_points_over_several_passes() {
    const STAGES: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
override add: f32 = 0.0;

@compute @workgroup_size(64)
fn square(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&dst) { dst[id.x] = src[id.x] * src[id.x]; }
}

@compute @workgroup_size(64)
fn shift(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&dst) { dst[id.x] = src[id.x] + add; }
}

@group(0) @binding(0) var<storage, read_write> inplace: array<f32>;
@compute @workgroup_size(64)
fn negate(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&inplace) { inplace[id.x] = -inplace[id.x]; }
}
"#;
    let dev = device();
    let mut rng = Rng::new(16);
    let n = 129;
    let x = rng.vec_f32(n);
    let out = KernelTest::new(STAGES, "square")
        .device(&dev)
        .input(&x)
        .output(DType::F32, &[n])
        .threads([n, 1, 1])
        .then("shift")
        .read_output(0)
        .output(DType::F32, &[n])
        .constant("add", 3.0f32)
        .threads([n, 1, 1])
        .then("negate")
        .write_output(0)
        .threads([n, 1, 1])
        .run()
        .unwrap();
    let sq: Vec<f32> = x.iter().map(|v| v * v).collect();
    out.assert_close(
        0,
        &sq.iter().map(|v| -v).collect::<Vec<f32>>(),
        Tolerance::EXACT,
    );
    out.assert_close(
        1,
        &sq.iter().map(|v| v + 3.0).collect::<Vec<f32>>(),
        Tolerance::EXACT,
    );
}

/// Mesa's software adapters (lavapipe and llvmpipe: gallivm) stop an
/// invocation after 65535 loop iterations (LP_MAX_TGSI_LOOP_ITERATIONS)
/// and go on with what they have: a number comes back instead of a hang.
/// A reference comparison notices; a differential run between two Mesa
/// adapters does not (both stop), one against a GPU does.
#[test]
fn llvmpipe_loop_cap_returns_a_number_and_the_reference_notices() {
    const LOOP: &str = r#"
override n: u32 = 100000u;
@group(0) @binding(0) var<storage, read_write> o: array<u32>;
@compute @workgroup_size(1) fn main() {
    var h = 1u;
    var count = 0u;
    for (var i = 0u; i < n; i++) {
        h = h * 1664525u + 1013904223u;
        count += 1u;
    }
    o[0] = count;
    o[1] = h;
}
"#;
    let dev = device();
    let n = 100_000u32;
    let out = KernelTest::new(LOOP, "main")
        .device(&dev)
        .output(DType::U32, &[2])
        .constant("n", n)
        .run()
        .unwrap();
    let count = out.get::<u32>(0).unwrap()[0];
    let want_h = (0..n).fold(1u32, |h, _| {
        h.wrapping_mul(1_664_525).wrapping_add(1_013_904_223)
    });
    let check = out.check(0, &[n, want_h], Tolerance::EXACT);
    if dev.info().device_type == wgarray::wgpu::DeviceType::Cpu {
        // LP_MAX_TGSI_LOOP_ITERATIONS: the loop stopped, the kernel went on.
        assert_eq!(count, 65_535);
        let m = check.expect_err("the reference notices the capped loop");
        assert!(
            m.to_string().contains(&format!("got {count}, want {n}")),
            "{m}"
        );
        // Issue 37: the report names the cap.
        assert!(
            m.to_string().contains("= Mesa's loop cap")
                && m.to_string()
                    .contains("exactly 65535 where more was expected"),
            "{m}"
        );
    } else {
        check.unwrap();
    }
}

/// Property-based kernel tests (feature `proptest`, which scripts/test.sh
/// turns on).
#[cfg(feature = "proptest")]
mod property {
    use super::*;
    use proptest::prelude::*;
    use testing::{PropertyTest, Values};

    const CLAMP: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<i32>;
@group(0) @binding(1) var<storage, read_write> y: array<i32>;
override lo: i32 = -100;
override hi: i32 = 100;
override buggy: bool = false;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&y) {
        var v = clamp(x[id.x], lo, hi);
        // The bug: off by one above 1000.
        if buggy && x[id.x] > 1000 { v = v + 1; }
        y[id.x] = v;
    }
}
"#;

    fn clamp_test(x: &[i32], buggy: bool) -> KernelTest {
        KernelTest::new(CLAMP, "main")
            .input(x)
            .output(DType::I32, &[x.len()])
            .constant("hi", 5000)
            .constant("buggy", buggy)
            .threads([x.len(), 1, 1])
    }

    fn clamp_ref(x: &[i32]) -> Vec<i32> {
        x.iter().map(|v| (*v).clamp(-100, 5000)).collect()
    }

    /// A right kernel passes on every adapter, integer extremes included.
    #[test]
    fn a_right_kernel_passes_on_every_adapter_with_edge_values() {
        PropertyTest::new(
            Values::<i32>::range(-10_000.0, 10_000.0)
                .with_edges()
                .vec(1..200),
            |x: &Vec<i32>| clamp_test(x, false),
        )
        .reference(0, |x: &Vec<i32>| clamp_ref(x), Tolerance::EXACT)
        .cases(12)
        .on_all_adapters()
        .assert();
    }

    /// A wrong kernel fails, the input shrinks to the smallest that shows the
    /// bug (one element, 1001), and the failure becomes a fixture.
    #[test]
    fn a_failure_shrinks_to_a_small_input() {
        let failure = PropertyTest::new(
            Values::<i32>::range(-10_000.0, 10_000.0).vec(1..200),
            |x: &Vec<i32>| clamp_test(x, true),
        )
        .reference(0, |x: &Vec<i32>| clamp_ref(x), Tolerance::EXACT)
        .cases(32)
        .run()
        .expect_err("the bug is found");
        assert_eq!(failure.input, "[1001]", "{failure}");
        let text = failure.to_string();
        assert!(text.contains("smallest failing input: [1001]"), "{text}");
        assert!(text.contains("[0]: got 1002, want 1001"), "{text}");
        let fixture = failure.fixture().expect("a kernel test");
        let replay = fixture.replay().unwrap();
        assert!(fixture.check(&replay).is_err());
        assert_eq!(Fixture::from_json(&fixture.to_json()).unwrap(), fixture);
    }

    /// Edge values reach the kernel: NaN, infinities, subnormals and signed
    /// zero go through a copy bit for bit (f32 and f16 bits in u32 words).
    #[test]
    fn edge_values_reach_the_kernel_bit_for_bit() {
        const COPY: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&y) { y[id.x] = bitcast<u32>(x[id.x]); }
}
"#;
        let strategy = Values::<f32>::new().with_edges().vec(1..100);
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..20 {
            for v in strategy.new_tree(&mut runner).unwrap().current() {
                seen.insert(v.to_bits());
            }
        }
        for edge in [f32::INFINITY, -0.0, f32::from_bits(1), f32::MAX] {
            assert!(seen.contains(&edge.to_bits()), "{edge} never drawn");
        }
        assert!(seen.iter().any(|b| f32::from_bits(*b).is_nan()));
        PropertyTest::new(strategy, |x: &Vec<f32>| {
            KernelTest::new(COPY, "main")
                .input(x)
                .output(DType::U32, &[x.len()])
                .threads([x.len(), 1, 1])
        })
        .reference(
            0,
            |x: &Vec<f32>| x.iter().map(|v| v.to_bits()).collect::<Vec<u32>>(),
            Tolerance::EXACT,
        )
        .cases(8)
        .assert();
    }

    /// On every adapter, one without a feature the kernel needs (f16 on GL)
    /// is skipped; the others still check every case.
    #[test]
    fn an_f16_property_runs_where_f16_is() {
        const TWICE: &str = r#"
enable f16;
@group(0) @binding(0) var<storage, read> x: array<f16>;
@group(0) @binding(1) var<storage, read_write> y: array<f16>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    for (var k = 0u; k < 2u; k++) {
        let i = 2u * id.x + k;
        if i < arrayLength(&y) { y[i] = x[i] * 2.0h; }
    }
}
"#;
        let any_f16 = testing::all_devices().into_iter().any(|(_, d)| {
            d.is_ok_and(|d| d.features().contains(wgarray::wgpu::Features::SHADER_F16))
        });
        let run = PropertyTest::new(
            Values::<f16>::new().vec(2..200usize).prop_map(|mut v| {
                v.truncate(v.len() & !1); // whole words: no two threads share one
                v
            }),
            |x: &Vec<f16>| {
                KernelTest::new(TWICE, "main")
                    .input(x)
                    .output(DType::F16, &[x.len()])
                    .threads([x.len() / 2, 1, 1])
            },
        )
        .reference(
            0,
            |x: &Vec<f16>| {
                x.iter()
                    .map(|v| f16::from_f32(v.to_f32() * 2.0))
                    .collect::<Vec<f16>>()
            },
            Tolerance::EXACT,
        )
        .cases(6)
        .on_all_adapters()
        .run();
        if any_f16 {
            run.unwrap();
        } else {
            let f = run.unwrap_err();
            assert!(f.report.contains("no device ran the kernel"), "{f}");
        }
    }

    /// Shared sizes come from proptest itself: two vectors of one length.
    #[test]
    fn inputs_that_share_a_length() {
        let strategy = (1usize..300)
            .prop_flat_map(|n| (Values::<f32>::new().vec(n), Values::<f32>::new().vec(n)));
        PropertyTest::new(strategy, |(x, y): &(Vec<f32>, Vec<f32>)| {
            KernelTest::new(AXPY, "axpy")
                .input(x)
                .input(y)
                .output(DType::F32, &[x.len()])
                .constant("alpha", 3.0)
                .threads([x.len(), 1, 1])
        })
        .reference(
            0,
            |(x, y): &(Vec<f32>, Vec<f32>)| {
                x.iter()
                    .zip(y)
                    .map(|(&x, &y)| (3.0 * x as f64 + y as f64) as f32)
                    .collect::<Vec<f32>>()
            },
            // 3x + y may or may not be fused: half an ulp of 3x (|3x| < 300)
            // either way, which is many ulps of a result near zero.
            Tolerance::abs(4e-5).with_ulps(1),
        )
        .cases(10)
        .assert();
    }
}

//! Errors in one order, the same on every backend: devices, then shapes,
//! then dtypes, then the adapter's features (issue 21: an empty f32 @ f16
//! matmul said `MissingFeature(SHADER_F16)` on GL and a dtype error on
//! Vulkan). And limits reported at the call, in their own unit, under the
//! name of the op the caller called. Every case leaks nothing.

mod common;

use common::{assert_empty, device, is_gl};
use wgarray::{Array, DType, Device, Error, Limit, Result, random, stack, wgpu};

fn zeros(shape: &[usize], dtype: DType, d: &Device) -> Array {
    Array::zeros(shape, dtype, d).unwrap()
}

/// What kind of error `r` is, as the order names them.
fn kind<T: std::fmt::Debug>(r: &Result<T>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(Error::DeviceMismatch { .. }) => "device",
        Err(
            Error::ShapeMismatch { .. }
            | Error::InvalidAxis { .. }
            | Error::TooLarge {
                limit: Limit::Dimensions,
                ..
            },
        ) => "shape",
        Err(Error::InvalidArgument(m)) if m.contains("dimension") => "shape",
        Err(Error::DType { .. } | Error::OpDType { .. }) => "dtype",
        Err(Error::MissingFeature { .. }) => "feature",
        Err(e) => panic!("unexpected error {e:?}"),
    }
}

#[test]
fn matmul_checks_shapes_then_dtypes_then_features_on_every_backend() {
    let d = device();
    let f16_ok = !is_gl(&d) && d.features().contains(wgpu::Features::SHADER_F16);
    {
        // The case: an empty f32 @ f16 is a dtype error everywhere.
        let r = zeros(&[0, 2], DType::F32, &d).matmul(&zeros(&[2, 3], DType::F16, &d));
        assert!(
            matches!(
                r,
                Err(Error::DType {
                    op: "matmul",
                    dtype: DType::F32,
                    other: Some(DType::F16)
                })
            ),
            "{r:?}"
        );
        // Shapes before dtypes (and before features): i32 and f16 operands
        // of the wrong shapes are a shape error.
        for (a, b) in [
            (DType::F32, DType::F16),
            (DType::I32, DType::I32),
            (DType::F16, DType::F16),
        ] {
            let r = zeros(&[2, 3], a, &d).matmul(&zeros(&[2, 3], b, &d));
            assert_eq!(kind(&r), "shape", "{a} @ {b}: {r:?}");
            let r = zeros(&[], a, &d).matmul(&zeros(&[3], b, &d));
            assert_eq!(kind(&r), "shape", "0-d {a} @ {b}: {r:?}");
        }
        // Dtypes before features: i32 @ f16 is a dtype error on GL too.
        let r = zeros(&[2, 3], DType::I32, &d).matmul(&zeros(&[3, 2], DType::F16, &d));
        assert_eq!(kind(&r), "dtype", "{r:?}");
        let r = zeros(&[2, 3], DType::F16, &d).matmul(&zeros(&[3, 2], DType::BF16, &d));
        assert_eq!(kind(&r), "dtype", "{r:?}");
        // Features last: f16 @ f16 of good shapes is fine where f16 is.
        let r = zeros(&[2, 3], DType::F16, &d).matmul(&zeros(&[3, 2], DType::F16, &d));
        assert_eq!(kind(&r), if f16_ok { "ok" } else { "feature" }, "{r:?}");
        // addmm: the bias's shape before the dtypes of all three.
        let (a, b) = (
            zeros(&[2, 3], DType::F32, &d),
            zeros(&[3, 4], DType::F32, &d),
        );
        let r = zeros(&[5], DType::I32, &d).addmm(&a, &b, 1.0, 1.0);
        assert!(
            matches!(r, Err(Error::ShapeMismatch { op: "addmm", .. })),
            "{r:?}"
        );
        let r = zeros(&[4], DType::BF16, &d).addmm(&a, &b, 1.0, 1.0);
        assert!(matches!(r, Err(Error::DType { op: "addmm", .. })), "{r:?}");
        let h = zeros(&[4], DType::F16, &d);
        let r = h.addmm(&a.astype(DType::F16).unwrap(), &b, 1.0, 1.0);
        assert_eq!(kind(&r), "dtype", "{r:?}");
    }
    assert_empty(&d);
}

#[test]
fn other_ops_check_in_the_same_order() {
    let d = device();
    let d2 = device();
    {
        let x = zeros(&[2, 3], DType::F32, &d);
        // Devices first: another device's operand of the wrong shape and
        // dtype is a device error.
        let other = zeros(&[5], DType::I32, &d2);
        assert_eq!(kind(&x.matmul(&other)), "device");
        assert_eq!(kind(&(&x + &other)), "device");
        assert_eq!(kind(&x.take(&zeros(&[2], DType::F32, &d2), 7)), "device");
        // take: the axis, then the result's shape, then the indices' dtype.
        let f_idx = zeros(&[2], DType::F32, &d);
        assert_eq!(kind(&x.take(&f_idx, 2)), "shape");
        let deep = zeros(&[1; 8], DType::F32, &d);
        assert_eq!(kind(&x.take(&deep, 0)), "shape");
        assert_eq!(kind(&x.take(&f_idx, 1)), "dtype");
        // random: the key's shape, then its dtype, then the sample's dtype.
        let bad_key = zeros(&[3], DType::F32, &d);
        let r = random::uniform(&bad_key, &[4], 0.0, 1.0, DType::I32);
        assert!(matches!(r, Err(Error::ShapeMismatch { .. })), "{r:?}");
        let key = random::key(1, &d).unwrap();
        let r = random::uniform(&key.astype(DType::I32).unwrap(), &[4], 0.0, 1.0, DType::F32);
        assert!(
            matches!(
                r,
                Err(Error::DType {
                    dtype: DType::I32,
                    ..
                })
            ),
            "{r:?}"
        );
        let r = random::normal(&key, &[4], 0.0, 1.0, DType::U32);
        assert!(
            matches!(
                r,
                Err(Error::DType {
                    dtype: DType::U32,
                    ..
                })
            ),
            "{r:?}"
        );
        // A composite op names itself, not a step inside it.
        let w = zeros(&[4], DType::F32, &d);
        for r in [
            x.layer_norm(Some(&w), None, 1e-5),
            x.layer_norm(None, Some(&w), 1e-5f32),
            x.rms_norm(Some(&w), 1e-5),
        ] {
            match r {
                Err(Error::ShapeMismatch { op, .. }) => {
                    assert!(op == "layer_norm" || op == "rms_norm", "{op}")
                }
                r => panic!("expected ShapeMismatch, got {r:?}"),
            }
        }
        assert_eq!(
            kind(&stack(&[&x, &zeros(&[2, 4], DType::I32, &d)], 0)),
            "shape"
        );
        drop((x, other, f_idx, deep, bad_key, key, w));
    }
    assert_empty(&d);
    assert_empty(&d2);
}

/// The reduction kernel's limit (2^26 elements into one output) is
/// reported by the call, in elements, under the caller's op; before, eval
/// said "reduce: ... bytes" against the adapter's binding.
#[test]
fn the_reduction_limit_is_reported_at_the_call_in_elements() {
    let d = device();
    {
        let n = (1usize << 26) + 1;
        let b = Array::scalar(1.0f32, DType::F32, &d)
            .unwrap()
            .broadcast_to(&[3, n])
            .unwrap();
        for (r, op) in [
            (b.sum(-1, false), "sum"),
            (b.max(None, false), "max"),
            (b.mean([0usize, 1], true), "mean"),
            (b.var(1, false, 0), "var"),
            (b.argmax(None, false), "argmax"),
        ] {
            match r {
                Err(Error::TooLarge {
                    op: got,
                    limit: Limit::ReducedElements,
                    value,
                    max,
                }) => {
                    assert_eq!(got, op);
                    assert!(value >= n as u64, "{op}: {value}");
                    assert_eq!(max, 1 << 26);
                    let msg = Error::TooLarge {
                        op: got,
                        limit: Limit::ReducedElements,
                        value,
                        max,
                    }
                    .to_string();
                    assert!(msg.starts_with(&format!("{op}: ")), "{msg}");
                    assert!(msg.contains("elements") && !msg.contains("bytes"), "{msg}");
                }
                r => panic!("{op}: expected TooLarge (reduced elements), got {r:?}"),
            }
        }
        // Reducing the short axis of the same view folds 3 elements into
        // each output: fine for the kernel, but the result (4 n bytes) must
        // fit one storage binding, which is checked at the call too.
        let max = d.limits().max_storage_buffer_binding_size;
        match b.sum(0, false) {
            Ok(s) => {
                assert!(4 * n as u64 <= max);
                assert_eq!(s.shape(), &[n]);
            }
            Err(Error::TooLarge {
                op: "sum",
                limit: Limit::StorageBinding,
                value,
                max: m,
            }) => assert_eq!((value, m), (4 * n as u64, max)),
            Err(e) => panic!("sum over the short axis: {e:?}"),
        }
        drop(b);
    }
    assert_empty(&d);
}

#[test]
fn every_limit_says_its_unit() {
    for (limit, unit) in [
        (Limit::StorageBinding, "bytes"),
        (Limit::UniformBinding, "bytes"),
        (Limit::Dimensions, "dimensions"),
        (Limit::Elements, "elements"),
        (Limit::ReducedElements, "elements"),
        (Limit::KernelIndex, "elements"),
        (Limit::DispatchThreads, "threads"),
    ] {
        assert_eq!(limit.unit(), unit);
        let msg = Error::TooLarge {
            op: "op",
            limit,
            value: 10,
            max: 5,
        }
        .to_string();
        assert!(msg.starts_with("op: "), "{msg}");
        assert!(msg.contains(unit), "{limit:?}: {msg}");
        for other in ["bytes", "dimensions", "elements", "threads"] {
            assert!(other == unit || !msg.contains(other), "{limit:?}: {msg}");
        }
    }
}

/// The environment variable that makes the two tests below fail on
/// purpose: only [`a_failing_test_prints_the_error_as_display_shows_it`]
/// sets it, in the child process it runs them in. Unset, they pass.
const CHILD: &str = "WGARRAY_TEST_FAILING_CHILD";

/// A kernel with a syntax error (a `;` missing), whose naga diagnostic
/// spans several lines.
fn broken_kernel() -> Result<wgarray::testing::Outputs> {
    let src = "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n\
               @compute @workgroup_size(1)\n\
               fn saxpy(@builtin(global_invocation_id) g: vec3<u32>) {\n    \
                   y[g.x] = 1.0\n\
               }\n";
    wgarray::testing::KernelTest::new(src, "saxpy")
        .output(DType::F32, &[1])
        .device(&device())
        .run()
}

#[test]
fn child_returns_a_kernel_error() -> Result<()> {
    if std::env::var_os(CHILD).is_none() {
        return Ok(());
    }
    broken_kernel()?;
    Ok(())
}

#[test]
fn child_unwraps_a_kernel_error() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    broken_kernel().unwrap();
}

#[test]
fn child_prints_a_no_adapter_error() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let err = Device::new(&wgarray::DeviceOptions::default().with_adapter_name("no-such-adapter"))
        .expect_err("no adapter has that name");
    println!("CHILD-ERROR: {err}");
}

/// Issue 37: Mesa's EGL prints "XDG_RUNTIME_DIR is invalid or not set"
/// when the variable is unset, which reads as an error of wgarray's; the
/// no-adapter error says what it is then, and only then.
#[test]
fn no_adapter_explains_mesas_runtime_dir_warning_when_it_applies() {
    let exe = std::env::current_exe().expect("the test binary");
    for unset in [true, false] {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["child_prints_a_no_adapter_error", "--exact", "--nocapture"])
            .env(CHILD, "1");
        if unset {
            cmd.env_remove("XDG_RUNTIME_DIR");
        } else {
            cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
        }
        let out = cmd.output().expect("run the test binary");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout
            .lines()
            .find(|l| l.contains("CHILD-ERROR: "))
            .unwrap_or_else(|| panic!("no error printed: {stdout}"));
        assert!(line.contains("no GPU adapter matched"), "{line}");
        assert_eq!(
            line.contains("come from Mesa's EGL"),
            unset,
            "XDG_RUNTIME_DIR unset: {unset}: {line}"
        );
    }
}

/// Issue 37: a `#[test] fn ... -> wgarray::Result<()>` and an `.unwrap()`
/// print the error's `Debug`; it must read as `Display` does (variant
/// name, then the message with naga's line breaks), not as one escaped
/// line of `\n`. Runs this test binary again as a child, with the two
/// tests above made to fail, and reads what the harness printed.
#[test]
fn a_failing_test_prints_the_error_as_display_shows_it() {
    let exe = std::env::current_exe().expect("the test binary");
    for (test, prefix) in [
        ("child_returns_a_kernel_error", "Error: Kernel: kernel `"),
        (
            "child_unwraps_a_kernel_error",
            "called `Result::unwrap()` on an `Err` value: Kernel: kernel `",
        ),
    ] {
        let out = std::process::Command::new(&exe)
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .expect("run the test binary");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{test} should fail:\n{text}");
        assert!(text.contains(prefix), "{test}: no `{prefix}` in:\n{text}");
        let start = text.find(prefix).expect("found above");
        let report = &text[start..];
        // naga's diagnostic on lines of its own, not escaped into one.
        assert!(
            report
                .lines()
                .any(|l| l.trim_start().starts_with("┌─ wgsl:")),
            "{test}: the diagnostic is not on its own lines:\n{text}"
        );
        assert!(
            !report.lines().next().unwrap_or("").contains("\\n"),
            "{test}: escaped line breaks in:\n{text}"
        );
    }
}

/// Issue 37: reading back as another dtype names the read-back called, the
/// array's dtype and the three ways to read it.
#[test]
fn reading_as_another_dtype_names_the_call_and_the_fixes() {
    let d = device();
    let x = Array::from_slice(&[1.5f32], &[1], &d).unwrap();
    let e = x.item::<f64>().unwrap_err();
    assert_eq!(
        e,
        Error::ReadDType {
            op: "item",
            dtype: DType::F32,
            requested: DType::F64
        }
    );
    let msg = e.to_string();
    for part in [
        "item::<f64>()",
        "float32",
        "`item::<f32>()`",
        "astype(DType::F64)",
        "to_f64_vec()",
    ] {
        assert!(msg.contains(part), "no `{part}` in: {msg}");
    }
    let mut dst = [0i32; 1];
    let e = x.read_into(&mut dst).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ReadDType {
                op: "read_into",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("read_into(&mut [f32])"), "{e}");
    assert!(matches!(
        x.to_vec::<half::f16>(),
        Err(Error::ReadDType {
            op: "to_vec",
            requested: DType::F16,
            ..
        })
    ));
    // What the message suggests works.
    assert_eq!(x.item::<f32>().unwrap(), 1.5);
    assert_eq!(x.to_f64_vec().unwrap(), vec![1.5]);
    drop(x);
    assert_empty(&d);
}

/// Issue 37: every constructor and op whose result cannot fit the largest
/// storage binding says so at the call, naming itself (`zeros` returned
/// `Ok` and eval failed as `TooLarge { op: "eval" }`). Inputs are small
/// arrays or broadcast views, so nothing large is ever allocated; nothing
/// leaks on the error paths.
#[test]
fn results_past_the_largest_binding_are_refused_at_the_call_naming_the_op() {
    let d = device();
    let max = d.limits().max_storage_buffer_binding_size;
    let n = (max / 4 + 1) as usize; // f32 elements one past the limit
    let half = n / 2 + 1;
    let side = ((n as f64).sqrt() as usize) + 1; // side * side > n
    {
        let s = Array::scalar(1.0f32, DType::F32, &d).unwrap();
        let view = |len: usize| s.broadcast_to(&[len]).unwrap();
        let small = Array::from_slice(&[1.0f32, 2.0], &[2], &d).unwrap();
        let vec_side = Array::zeros(&[side], DType::F32, &d).unwrap();
        let col = Array::zeros(&[side, 1], DType::F32, &d).unwrap();
        let row = Array::zeros(&[1, side], DType::F32, &d).unwrap();
        let i0 = Array::scalar(0i32, DType::I32, &d).unwrap();
        let idx = i0.broadcast_to(&[n]).unwrap();
        let one_idx = Array::from_slice(&[0i32], &[1], &d).unwrap();
        let key = random::key(1, &d).unwrap();
        let cases: Vec<(&str, Result<Array>)> = vec![
            (
                "zeros",
                Array::zeros(&[1 << 20, n.div_ceil(1 << 20)], DType::F32, &d),
            ),
            ("ones", Array::ones(&[n], DType::F32, &d)),
            ("full", Array::full(&[n], 2.0, DType::F32, &d)),
            ("empty", Array::empty(&[n], DType::F32, &d)),
            ("eye", Array::eye(side, None, 0, DType::F32, &d)),
            ("linspace", Array::linspace(0.0, 1.0, n, DType::F32, &d)),
            ("arange", Array::arange(0.0, n as f64, 1.0, DType::F32, &d)),
            ("one_hot", Array::one_hot(&one_idx, n, DType::F32)),
            (
                "random::uniform",
                random::uniform(&key, &[n], 0.0, 1.0, DType::F32),
            ),
            (
                "random::normal",
                random::normal(&key, &[n], 0.0, 1.0, DType::F32),
            ),
            ("random::bits", random::bits(&key, &[n])),
            ("tile", small.tile(&[half])),
            ("repeat", small.repeat(half, None)),
            ("pad", small.pad(&[(n, 0)], wgarray::PadMode::Edge)),
            ("diag", vec_side.diag(0)),
            (
                "concatenate",
                wgarray::concatenate(&[&view(half), &view(half)], 0),
            ),
            ("stack", stack(&[&view(half), &view(half)], 0)),
            ("take", small.take(&idx, 0)),
            ("take_along_axis", small.take_along_axis(&idx, 0)),
            ("matmul", col.matmul(&row)),
            ("cumsum", view(n).cumsum(0, false, true)),
            ("split", view(2 * n).split(2, 0).map(|mut v| v.remove(0))),
        ];
        for (op, r) in cases {
            match r {
                Err(Error::TooLarge {
                    op: got,
                    limit: Limit::StorageBinding,
                    value,
                    max: m,
                }) => {
                    assert_eq!(got, op);
                    assert!(value > max, "{op}: {value}");
                    assert_eq!(m, max, "{op}");
                }
                r => panic!("{op}: expected TooLarge (storage binding) at the call, got {r:?}"),
            }
        }
        drop((s, small, vec_side, col, row, i0, idx, one_idx, key));
    }
    assert_empty(&d);
}

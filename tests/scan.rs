//! `cumsum`, `cumprod`, `cummax` and `cummin` against a host reference
//! (f64 for floats, wrapping i32/u32 arithmetic for integers): every dtype,
//! odd lengths on each side of the kernel's modes (a thread per row up to
//! 64, one block up to 1024, three passes beyond, more than 256 blocks per
//! row), reverse and exclusive, views (transposed, stepped, broadcast),
//! empty arrays, NaN, rounding once for f16/bf16, typed errors, lifetimes.

mod common;

use common::arrays::{of_dtype, random_values, round_to};
use common::reference::strides;
use common::{Rng, assert_empty, device, poison_pool, pollute, word_dtypes};
use wgarray::{Array, DType, Error, Slice};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Sum,
    Prod,
    Max,
    Min,
}

const OPS: [Op; 4] = [Op::Sum, Op::Prod, Op::Max, Op::Min];

fn run(x: &Array, op: Op, axis: Option<isize>, reverse: bool, inclusive: bool) -> Array {
    match op {
        Op::Sum => x.cumsum(axis, reverse, inclusive),
        Op::Prod => x.cumprod(axis, reverse, inclusive),
        Op::Max => x.cummax(axis, reverse, inclusive),
        Op::Min => x.cummin(axis, reverse, inclusive),
    }
    .unwrap()
}

/// The dtype a scan of `dtype` produces.
fn out_dtype(op: Op, dtype: DType) -> DType {
    match (op, dtype) {
        (Op::Sum | Op::Prod, DType::Bool) => DType::I32,
        _ => dtype,
    }
}

/// The accumulator's identity and combination, as the dtype computes.
fn identity(op: Op, acc: DType) -> f64 {
    match (op, acc) {
        (Op::Sum, _) => 0.0,
        (Op::Prod, _) => 1.0,
        (Op::Max, DType::I32) => i32::MIN as f64,
        (Op::Max, DType::U32 | DType::Bool) => 0.0,
        (Op::Max, _) => f64::NEG_INFINITY,
        (Op::Min, DType::I32) => i32::MAX as f64,
        (Op::Min, DType::U32) => u32::MAX as f64,
        (Op::Min, DType::Bool) => 1.0,
        (Op::Min, _) => f64::INFINITY,
    }
}

/// `op` of two integers, wrapping as the kernels' 32-bit arithmetic does.
fn int_op<T: Ord>(op: Op, a: T, b: T, add: fn(T, T) -> T, mul: fn(T, T) -> T) -> T {
    match op {
        Op::Sum => add(a, b),
        Op::Prod => mul(a, b),
        Op::Max => a.max(b),
        Op::Min => a.min(b),
    }
}

fn combine(op: Op, acc: DType, a: f64, b: f64) -> f64 {
    match acc {
        DType::I32 => int_op(op, a as i32, b as i32, i32::wrapping_add, i32::wrapping_mul) as f64,
        DType::U32 | DType::Bool => {
            int_op(op, a as u32, b as u32, u32::wrapping_add, u32::wrapping_mul) as f64
        }
        _ => match op {
            Op::Sum => a + b,
            Op::Prod => a * b,
            _ if a.is_nan() || b.is_nan() => f64::NAN,
            Op::Max => a.max(b),
            Op::Min => a.min(b),
        },
    }
}

/// The scan of row-major `x` of `shape` along `axis`, in f64 (floats) or
/// the integer type's own wrapping arithmetic, rounded to the output dtype.
#[allow(clippy::too_many_arguments)]
fn reference(
    op: Op,
    dtype: DType,
    x: &[f64],
    shape: &[usize],
    axis: usize,
    reverse: bool,
    inclusive: bool,
) -> Vec<f64> {
    let out = out_dtype(op, dtype);
    let st = strides(shape);
    let len = shape[axis];
    let mut y = vec![0.0; x.len()];
    for flat in 0..x.len() {
        if !(flat / st[axis]).is_multiple_of(len) {
            continue; // one walk per row, from its first element
        }
        let mut acc = identity(op, out);
        for q in 0..len {
            let r = if reverse { len - 1 - q } else { q };
            let at = flat + r * st[axis];
            if inclusive {
                acc = combine(op, out, acc, x[at]);
                y[at] = acc;
            } else {
                y[at] = acc;
                acc = combine(op, out, acc, x[at]);
            }
        }
    }
    y.iter().map(|&v| round_to(v, out)).collect()
}

/// Whether `got` matches `want`: exactly for integers and for max/min,
/// within f32 accumulation error for float sums and products (`scale` is
/// the sum of magnitudes the element accumulates, from the same scan of
/// |x|).
fn check(got: &[f64], want: &[f64], scale: &[f64], op: Op, dtype: DType, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if dtype.is_float() && matches!(op, Op::Sum | Op::Prod) {
            (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 4e-6 * (1.0 + scale[i])
        } else {
            (g.is_nan() && w.is_nan()) || g == w
        };
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// Run `op` on `x` every way (axes, reverse, exclusive) and compare.
fn check_all_ways(x: &Array, op: Op, axes: &[Option<isize>], what: &str) {
    let h = x.to_f64_vec().unwrap();
    let dtype = x.dtype();
    for &axis in axes {
        let (shape, a) = match axis {
            None => (vec![x.size()], 0),
            Some(a) => (x.shape().to_vec(), a.rem_euclid(x.ndim() as isize) as usize),
        };
        for reverse in [false, true] {
            for inclusive in [true, false] {
                let y = run(x, op, axis, reverse, inclusive);
                assert_eq!(y.shape(), &shape[..]);
                assert_eq!(y.dtype(), out_dtype(op, dtype));
                let want = reference(op, dtype, &h, &shape, a, reverse, inclusive);
                let abs: Vec<f64> = h.iter().map(|v| v.abs()).collect();
                let scale = if op == Op::Prod {
                    // Products of factors near 1: relative error.
                    want.iter().map(|w| w.abs() * 1e2).collect()
                } else {
                    reference(Op::Sum, DType::F32, &abs, &shape, a, reverse, true)
                };
                let got = y.to_f64_vec().unwrap();
                check(
                    &got,
                    &want,
                    &scale,
                    op,
                    dtype,
                    &format!(
                        "{what} {op:?} {dtype} axis {axis:?} reverse {reverse} inclusive {inclusive}"
                    ),
                );
            }
        }
    }
}

/// Random data for `op` in `dtype`: factors near 1 for float products (so
/// long products neither vanish nor overflow), small factors for integer
/// products (they wrap), the shared random values otherwise.
fn data(rng: &mut Rng, n: usize, op: Op, dtype: DType) -> Vec<f64> {
    match (op, dtype) {
        (Op::Prod, DType::F32) => (0..n).map(|_| 1.0 + rng.f32() as f64 / 64.0).collect(),
        (Op::Prod, DType::F16 | DType::BF16) => (0..n)
            .map(|_| [1.0, -1.0, 1.0, 2.0, 0.5][(rng.next_u64() % 5) as usize])
            .collect(),
        (Op::Prod, DType::I32 | DType::U32) => {
            (0..n).map(|_| (rng.next_u64() % 7) as f64).collect()
        }
        _ => random_values(rng, n, dtype),
    }
}

/// Inclusive prefix sums of `v` with `add` (wrapping, for the integer
/// cumsum's reference).
fn prefix_sums<T: Copy + Default>(v: &[T], add: impl Fn(T, T) -> T) -> Vec<T> {
    let mut acc = T::default();
    v.iter()
        .map(|&e| {
            acc = add(acc, e);
            acc
        })
        .collect()
}

#[test]
fn scans_match_the_host_in_every_dtype_and_mode() {
    let d = device();
    poison_pool(&d, 1 << 14);
    let mut rng = Rng::new(15);
    // Lengths on each side of the modes: thread per row (<= 64), one block
    // (<= 1024), three passes.
    for len in [1usize, 7, 64, 65, 1024, 1025, 2500] {
        for op in OPS {
            for dtype in word_dtypes() {
                let shape = [3, len];
                let x = of_dtype(&d, &data(&mut rng, 3 * len, op, dtype), &shape, dtype);
                check_all_ways(&x, op, &[Some(-1)], &format!("[3, {len}]"));
            }
        }
    }
}

#[test]
fn scans_along_every_axis_and_flattened() {
    let d = device();
    let mut rng = Rng::new(21);
    let shape = [5, 33, 7];
    for op in OPS {
        for dtype in [DType::F32, DType::I32] {
            let x = of_dtype(&d, &data(&mut rng, 5 * 33 * 7, op, dtype), &shape, dtype);
            check_all_ways(
                &x,
                op,
                &[Some(0), Some(1), Some(2), Some(-2), None],
                "[5, 33, 7]",
            );
        }
    }
}

#[test]
fn scans_read_transposed_stepped_and_broadcast_views() {
    let d = device();
    let mut rng = Rng::new(7);
    for (op, dtype) in [
        (Op::Sum, DType::F32),
        (Op::Prod, DType::BF16),
        (Op::Max, DType::U32),
        (Op::Min, DType::F16),
        (Op::Sum, DType::I32),
    ] {
        {
            let base = of_dtype(
                &d,
                &data(&mut rng, 40 * 1100, op, dtype),
                &[40, 1100],
                dtype,
            );
            let t = base.transpose(); // [1100, 40], axis 0 strided
            check_all_ways(&t, op, &[Some(0), Some(1)], "transposed");
            let s = base
                .slice(&[Slice::new(Some(1), None, 3), Slice::step(-2)])
                .unwrap(); // [13, 550]
            check_all_ways(&s, op, &[Some(0), Some(-1), None], "stepped");
            let row = of_dtype(&d, &data(&mut rng, 5, op, dtype), &[1, 5], dtype);
            let b = row.broadcast_to(&[1100, 5]).unwrap();
            check_all_ways(&b, op, &[Some(0), Some(1)], "broadcast");
        }
    }
}

#[test]
fn long_rows_with_more_than_256_blocks_are_exact_in_integers() {
    let d = device();
    let mut rng = Rng::new(3);
    // 300,000 elements: 293 blocks, so the totals pass walks two per thread.
    let n = 300_000;
    let v: Vec<i32> = (0..n)
        .map(|_| (rng.next_u64() % 2001) as i32 - 1000)
        .collect();
    let x = Array::from_slice(&v, &[n], &d).unwrap();
    let want = prefix_sums(&v, i32::wrapping_add);
    assert_eq!(
        x.cumsum(None, false, true)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        want
    );
    // u32 sums wrap: 300,000 values near 2^31.
    let u: Vec<u32> = (0..n).map(|i| (1u32 << 31) + i as u32).collect();
    let x = Array::from_slice(&u, &[1, n], &d).unwrap();
    let want = prefix_sums(&u, u32::wrapping_add);
    assert_eq!(
        x.cumsum(1, false, true).unwrap().to_vec::<u32>().unwrap(),
        want
    );
    // Reverse exclusive max of an ascending ramp: the next element's value.
    let ramp: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = Array::from_slice(&ramp, &[n], &d).unwrap();
    let got = x.cummax(0, true, false).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got[0], (n - 1) as f32);
    assert_eq!(got[n - 2], (n - 1) as f32);
    assert_eq!(got[n - 1], f32::NEG_INFINITY);
}

#[test]
fn float16_and_bfloat16_round_once_at_the_store() {
    let d = device();
    // 1 followed by 2048 times 2^-12: in f16 each step would round back to
    // 1 (half an ulp, ties to even); accumulated in f32 the sum is 1.5.
    let mut v = vec![1.0f64];
    v.extend(std::iter::repeat_n(1.0 / 4096.0, 2048));
    for dtype in [DType::F16, DType::BF16] {
        let step = if dtype == DType::F16 {
            1.0 / 4096.0
        } else {
            1.0 / 512.0
        };
        let v: Vec<f64> = v
            .iter()
            .map(|&x| if x == 1.0 { 1.0 } else { step })
            .collect();
        let x = of_dtype(&d, &v, &[v.len()], dtype);
        let y = x.cumsum(0, false, true).unwrap().to_f64_vec().unwrap();
        assert_eq!(y[2048], round_to(1.0 + 2048.0 * step, dtype), "{dtype}");
        assert_eq!(y[1], 1.0, "{dtype}: one step is below half an ulp");
    }
}

#[test]
fn cummax_and_cummin_propagate_nan_and_keep_infinities() {
    let d = device();
    let v = [1.0f32, f32::NAN, 3.0, -1.0];
    let x = Array::from_slice(&v, &[4], &d).unwrap();
    let m = x.cummax(0, false, true).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(m[0], 1.0);
    assert!(m[1..].iter().all(|v| v.is_nan()), "{m:?}");
    let m = x.cummin(0, true, true).unwrap().to_vec::<f32>().unwrap();
    assert!(m[..2].iter().all(|v| v.is_nan()), "{m:?}");
    assert_eq!(&m[2..], &[-1.0, -1.0]);
    let m = x.cummin(0, false, false).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(m[0], f32::INFINITY);
    // Long rows (block passes) propagate it too, from the middle block.
    let mut long = vec![0.5f32; 3000];
    long[1500] = f32::NAN;
    let x = Array::from_slice(&long, &[3000], &d).unwrap();
    let s = x
        .cumsum(None, false, true)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(s[1499], 750.0);
    assert!(s[1500..].iter().all(|v| v.is_nan()));
    let m = x
        .cummax(None, false, true)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(m[..1500].iter().all(|&v| v == 0.5) && m[1500..].iter().all(|v| v.is_nan()));
}

#[test]
fn empty_arrays_scan_to_empty_arrays() {
    let d = device();
    for shape in [vec![0usize], vec![3, 0], vec![0, 5], vec![2, 0, 1100]] {
        let x = Array::zeros(&shape, DType::F32, &d).unwrap();
        for axis in [None, Some(0), Some(-1)] {
            let y = x.cumsum(axis, false, true).unwrap();
            let want = if axis.is_none() {
                vec![0]
            } else {
                shape.clone()
            };
            assert_eq!(y.shape(), &want[..]);
            assert!(y.to_vec::<f32>().unwrap().is_empty());
        }
    }
    drop(d);
}

#[test]
fn scan_errors_are_typed_and_leave_nothing_behind() {
    let d = device();
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3], &d).unwrap();
    for op in OPS {
        for axis in [1isize, -2] {
            let (name, e) = match op {
                Op::Sum => ("cumsum", x.cumsum(axis, false, true)),
                Op::Prod => ("cumprod", x.cumprod(axis, false, true)),
                Op::Max => ("cummax", x.cummax(axis, false, true)),
                Op::Min => ("cummin", x.cummin(axis, false, true)),
            };
            assert!(
                matches!(e, Err(Error::InvalidAxis { op, ndim: 1, .. }) if op == name),
                "{e:?}"
            );
        }
    }
    // The packed integers and f64 are refused by name, after the axis.
    for dtype in [DType::I8, DType::U8, DType::I16, DType::U16, DType::F64] {
        let Ok(y) = Array::zeros(&[3], dtype, &d) else {
            continue; // f64 without SHADER_F64
        };
        for (name, e) in [
            ("cumsum", y.cumsum(None, false, true)),
            ("cumprod", y.cumprod(0, true, false)),
            ("cummax", y.cummax(-1, false, true)),
            ("cummin", y.cummin(None, false, true)),
        ] {
            assert!(
                matches!(e, Err(Error::OpDType { op, dtype: t, .. }) if op == name && t == dtype),
                "{e:?}"
            );
        }
        assert!(matches!(
            y.cumsum(1, false, true),
            Err(Error::InvalidAxis { .. })
        ));
    }
    let s = Array::scalar(2.0, DType::F32, &d).unwrap();
    assert!(matches!(
        s.cumsum(0, false, true),
        Err(Error::InvalidAxis { .. })
    ));
    // A scalar scans flattened, as NumPy's axis=None.
    assert_eq!(
        s.cumsum(None, false, true)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![2.0]
    );
    drop((x, s));
    assert_empty(&d);
}

#[test]
fn a_scan_is_one_node_and_its_scratch_goes_back_to_the_pool() {
    let d = device();
    let x = Array::from_slice(&vec![1.0f32; 5000], &[5000], &d).unwrap();
    let input_bytes = d.active_memory();
    let y = x.cumsum(None, false, true).unwrap();
    assert_eq!(d.live_nodes(), 1);
    drop(x);
    y.eval().unwrap();
    assert_eq!(d.live_nodes(), 0);
    // Only the output (as large as the input) remains: the input and the
    // block totals went back.
    assert_eq!(d.active_memory(), input_bytes);
    assert_eq!(y.to_vec::<f32>().unwrap()[4999], 5000.0);
    drop(y);
    assert_empty(&d);
}

// Probes of the pipelines without workgroup-memory zeroing (090f893):
// huge values first (`common::pollute`), then the edge cases where an
// unwritten element would be read.

/// Host scan of `v` in rows of `len`: (sum or max), reverse, inclusive.
fn scan_ref(v: &[f32], len: usize, max: bool, reverse: bool, inclusive: bool) -> Vec<f64> {
    let mut out = vec![0.0; v.len()];
    for row in 0..v.len() / len {
        let mut acc = if max { f64::NEG_INFINITY } else { 0.0 };
        for q in 0..len {
            let r = if reverse { len - 1 - q } else { q };
            let x = v[row * len + r] as f64;
            let next = if max { acc.max(x) } else { acc + x };
            out[row * len + r] = if inclusive { next } else { acc };
            acc = next;
        }
    }
    out
}

#[test]
fn scans_after_huge_values_read_no_stale_workgroup_memory() {
    let d = device();
    let mut rng = Rng::new(601);
    let mut failures = Vec::new();
    for (rows, len) in [(1, 1), (3, 7), (2, 65), (1, 257), (2, 1025), (1, 3000)] {
        let v = rng.vec_f32(rows * len);
        let x = Array::from_slice(&v, &[rows, len], &d).unwrap();
        for max in [false, true] {
            for reverse in [false, true] {
                for inclusive in [false, true] {
                    pollute(&d);
                    let got = if max {
                        x.cummax(Some(-1), reverse, inclusive)
                    } else {
                        x.cumsum(Some(-1), reverse, inclusive)
                    };
                    let got = got.unwrap().to_vec::<f32>().unwrap();
                    let want = scan_ref(&v, len, max, reverse, inclusive);
                    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        // cummax's exclusive identity is -inf (or the
                        // dtype's lowest): compare it exactly.
                        let ok = if w.is_infinite() {
                            g as f64 == w || g == f32::MIN
                        } else {
                            (g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs())
                        };
                        if !ok {
                            failures.push(format!(
                                "{rows}x{len} max {max} rev {reverse} incl {inclusive} [{i}]: {g} vs {w}"
                            ));
                            break;
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A row of more than 256 blocks (pass 2 walks several block totals per
/// thread, some threads none): cummax exactly, and an i32 cumsum.
#[test]
fn scans_of_more_than_256_blocks_after_huge_values() {
    let d = device();
    let mut rng = Rng::new(605);
    let len = 300_001;
    let v = rng.vec_f32(len);
    let ints: Vec<i32> = rng.vec_i32(len, 100);
    let x = Array::from_slice(&v, &[len], &d).unwrap();
    let xi = Array::from_slice(&ints, &[len], &d).unwrap();
    for reverse in [false, true] {
        for inclusive in [false, true] {
            pollute(&d);
            let got = x
                .cummax(None, reverse, inclusive)
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            let want = scan_ref(&v, len, true, reverse, inclusive);
            let bad = got
                .iter()
                .zip(&want)
                .position(|(&g, &w)| !(g as f64 == w || (w.is_infinite() && g == f32::MIN)));
            assert_eq!(bad, None, "cummax rev {reverse} incl {inclusive}");
            pollute(&d);
            let got = xi
                .cumsum(None, reverse, inclusive)
                .unwrap()
                .to_vec::<i32>()
                .unwrap();
            let mut acc = 0i32;
            let mut want = vec![0; len];
            for q in 0..len {
                let r = if reverse { len - 1 - q } else { q };
                let next = acc + ints[r];
                want[r] = if inclusive { next } else { acc };
                acc = next;
            }
            assert!(got == want, "i32 cumsum rev {reverse} incl {inclusive}");
        }
    }
}

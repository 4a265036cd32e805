//! Donation through views (issue 36, item 4): a buffer that only one kernel
//! reads, through a reshape, a transpose, a slice or a broadcast that adds
//! length-1 axes, is written over by that kernel's output when the output
//! fits it, fused and unfused. Peak-memory counters tell; values are
//! checked against the host on poisoned pools, and the cases that must not
//! donate (a view someone holds, a slice that starts past the buffer's
//! first element, a broadcast that repeats elements, a reversed view, a
//! small slice of a large buffer) are checked too.

mod common;

use common::{Rng, assert_empty, device, poison_pool};
use wgarray::shape::INFER;
use wgarray::{Array, DType, Device, Slice};

const MIB: u64 = 1 << 20;

/// A graph built on an input.
type Build<'a> = Box<dyn Fn(&Array) -> Array + 'a>;

/// A device with fusion on or off.
fn device_with(fusion: bool) -> Device {
    let d = device();
    d.set_fusion(fusion);
    d
}

/// MLX's own `test_donation_for_noops` (python/tests/test_eval.py), ported
/// as it is: ten rounds of `abs`, `reshape(-1)`, `.T.T` and `abs` on a
/// dropped f32[4096, 4096] (MLX's `stop_gradient` is left out: wgarray has
/// no gradients, it is a no-op there), then ten of `abs`, `[:-1]`, `abs`
/// on a dropped f32[4096 * 4096]. MLX asserts the peak memory after the
/// eval equals the peak before it (the input's 64 MiB): every kernel
/// writes into the buffer it reads.
fn mlx_donation_for_noops(fusion: bool) {
    let d = device_with(fusion);
    let fun = |mut x: Array| {
        for _ in 0..10 {
            x = x.abs().unwrap();
            x = x.reshape(&[INFER]).unwrap();
            x = x.transpose().transpose();
            x = x.abs().unwrap();
        }
        x
    };
    let x = Array::zeros(&[4096, 4096], DType::F32, &d).unwrap();
    x.eval().unwrap();
    d.reset_peak_memory();
    let pre = d.peak_memory();
    assert_eq!(pre, 64 * MIB);
    let out = fun(x);
    out.eval().unwrap();
    assert_eq!(d.peak_memory(), pre, "reshape, transpose (fusion {fusion})");
    drop(out);

    let fun = |mut x: Array| {
        for _ in 0..10 {
            x = x.abs().unwrap();
            x = x.slice(&[Slice::new(None, Some(-1), 1)]).unwrap();
            x = x.abs().unwrap();
        }
        x
    };
    let x = Array::zeros(&[4096 * 4096], DType::F32, &d).unwrap();
    x.eval().unwrap();
    d.reset_peak_memory();
    let pre = d.peak_memory();
    let out = fun(x);
    out.eval().unwrap();
    assert_eq!(out.shape(), &[4096 * 4096 - 10]);
    assert_eq!(d.peak_memory(), pre, "slice (fusion {fusion})");
    drop(out);
    assert_empty(&d);
}

#[test]
fn mlx_donation_for_noops_fused() {
    mlx_donation_for_noops(true);
}

#[test]
fn mlx_donation_for_noops_unfused() {
    mlx_donation_for_noops(false);
}

/// `[r, c]` random f32 values on the device, and the host copy.
fn random(d: &Device, rng: &mut Rng, r: usize, c: usize) -> (Array, Vec<f32>) {
    let v = rng.vec_f32(r * c);
    (Array::from_slice(&v, &[r, c], d).unwrap(), v)
}

/// Runs `f` on a dropped random `[r, c]` array and returns the result,
/// its values, the host input and the peak memory above what was active
/// before (the input).
fn run(
    d: &Device,
    rng: &mut Rng,
    (r, c): (usize, usize),
    f: impl Fn(&Array) -> Array,
) -> (Array, Vec<f32>, Vec<f32>, u64) {
    poison_pool(d, r * c + 64);
    let (x, host) = random(d, rng, r, c);
    d.reset_peak_memory();
    let before = d.active_memory();
    let y = f(&x);
    drop(x);
    y.eval().unwrap();
    let extra = d.peak_memory() - before;
    let got = y.to_vec::<f32>().unwrap();
    (y, got, host, extra)
}

#[test]
fn each_view_passes_donation_on_fused_and_unfused() {
    // 33 x 1025 f32: 132 KiB, so a second buffer would show in the peak.
    let (r, c) = (33usize, 1025usize);
    let bytes = (r * c * 4) as u64;
    for fusion in [true, false] {
        let d = device_with(fusion);
        let mut rng = Rng::new(36);
        let tag = |what: &str| format!("{what} (fusion {fusion})");

        // A reshape that strides can express (a view) and one the planner
        // lowers on its own ([r, c] -> [c, r] is more than length-1 axes).
        let (y, got, x, extra) = run(&d, &mut rng, (r, c), |x| {
            x.square()
                .unwrap()
                .reshape(&[c, r])
                .unwrap()
                .sqrt()
                .unwrap()
        });
        assert_eq!(y.shape(), &[c, r]);
        for (g, v) in got.iter().zip(&x) {
            assert_eq!(*g, v.powi(2).sqrt(), "{}", tag("reshape"));
        }
        assert!(
            extra < bytes,
            "{}: {extra} bytes above the input",
            tag("reshape")
        );
        drop(y);

        // A transpose: the result takes the buffer in the transposed
        // order (its strides say so), and reads back right.
        let (y, got, x, extra) = run(&d, &mut rng, (r, c), |x| {
            x.square().unwrap().transpose().sqrt().unwrap()
        });
        assert_eq!(y.shape(), &[c, r]);
        for i in 0..c {
            for j in 0..r {
                assert_eq!(
                    got[i * r + j],
                    x[j * c + i].powi(2).sqrt(),
                    "{}",
                    tag("transpose")
                );
            }
        }
        assert!(extra < bytes, "{}: {extra} bytes", tag("transpose"));
        // And a further op on the transposed result donates again.
        let z = (&y + 1.0).unwrap();
        drop(y);
        d.reset_peak_memory();
        let before = d.active_memory();
        let zv = z.to_vec::<f32>().unwrap();
        for i in 0..c {
            assert_eq!(zv[i * r + 5], x[5 * c + i].powi(2).sqrt() + 1.0);
        }
        // The read-back copied the transposed result dense once: one
        // buffer for that copy, one for its staging, none for `+ 1`.
        assert!(
            d.peak_memory() - before < 2 * bytes + MIB,
            "{}: {} bytes",
            tag("after a transpose"),
            d.peak_memory() - before
        );
        drop(z);

        // A slice that keeps the buffer's first elements (rows, then a
        // 1-d prefix), and a broadcast that only adds a length-1 axis.
        let (y, got, x, extra) = run(&d, &mut rng, (r, c), |x| {
            x.negative()
                .unwrap()
                .slice(&[Slice::range(0, r as isize - 1)])
                .unwrap()
                .reshape(&[INFER])
                .unwrap()
                .slice(&[Slice::range(0, 7 * 1025 + 3)])
                .unwrap()
                .broadcast_to(&[1, 7 * 1025 + 3])
                .unwrap()
                .abs()
                .unwrap()
        });
        assert_eq!(y.shape(), &[1, 7 * 1025 + 3]);
        for (g, v) in got.iter().zip(&x) {
            assert_eq!(*g, v.abs(), "{}", tag("slice"));
        }
        // 7 * 1025 + 3 of 33 * 1025 elements: beyond the 16 KiB slack, so
        // the large buffer is not kept alive by the small result.
        assert!(extra > 0, "{}", tag("a small slice of a large buffer"));
        drop(y);
        let (y, got, x, extra) = run(&d, &mut rng, (r, c), |x| {
            x.negative()
                .unwrap()
                .slice(&[Slice::range(0, r as isize), Slice::range(0, c as isize)])
                .unwrap()
                .reshape(&[INFER])
                .unwrap()
                .slice(&[Slice::range(0, (r * c) as isize - 3)])
                .unwrap()
                .expand_dims(0)
                .unwrap()
                .abs()
                .unwrap()
        });
        assert_eq!(y.shape(), &[1, r * c - 3]);
        for (g, v) in got.iter().zip(&x) {
            assert_eq!(*g, v.abs(), "{}", tag("prefix"));
        }
        assert!(extra < bytes, "{}: {extra} bytes", tag("prefix"));
        drop(y);
        assert_empty(&d);
    }
}

#[test]
fn views_that_must_not_donate_do_not() {
    let (r, c) = (33usize, 1025usize);
    let bytes = (r * c * 4) as u64;
    for fusion in [true, false] {
        let d = device_with(fusion);
        let mut rng = Rng::new(37);
        let tag = |what: &str| format!("{what} (fusion {fusion})");

        // A transposed view the caller holds keeps its values.
        let (x, host) = random(&d, &mut rng, r, c);
        let e = x.square().unwrap();
        let t = e.transpose();
        let y = t.sqrt().unwrap();
        drop(e);
        y.eval().unwrap();
        let tv = t.to_vec::<f32>().unwrap();
        for i in 0..c {
            assert_eq!(
                tv[i * r + 3],
                host[3 * c + i].powi(2),
                "{}",
                tag("held view")
            );
        }
        drop((x, t, y));

        // A slice that starts past the first element, a reversed one, and
        // a broadcast that repeats elements: each thread would read an
        // element another thread writes.
        let cases: [(&str, Build); 3] = [
            (
                "offset slice",
                Box::new(|x: &Array| {
                    x.square()
                        .unwrap()
                        .slice(&[Slice::range(1, r as isize)])
                        .unwrap()
                        .sqrt()
                        .unwrap()
                }),
            ),
            (
                "reversed",
                Box::new(|x: &Array| {
                    x.square()
                        .unwrap()
                        .slice(&[Slice::FULL, Slice::step(-1)])
                        .unwrap()
                        .sqrt()
                        .unwrap()
                }),
            ),
            (
                "repeating broadcast",
                Box::new(|x: &Array| {
                    x.square()
                        .unwrap()
                        .slice(&[Slice::FULL, Slice::range(0, 1)])
                        .unwrap()
                        .broadcast_to(&[r, c])
                        .unwrap()
                        .sqrt()
                        .unwrap()
                }),
            ),
        ];
        for (what, f) in cases {
            let (y, got, x, extra) = run(&d, &mut rng, (r, c), f);
            let shape = y.shape().to_vec();
            for i in 0..shape[0] {
                for j in 0..shape[1] {
                    let want = match what {
                        "offset slice" => x[(i + 1) * c + j],
                        "reversed" => x[i * c + c - 1 - j],
                        _ => x[i * c],
                    };
                    assert_eq!(got[i * shape[1] + j], want.powi(2).sqrt(), "{}", tag(what));
                }
            }
            assert!(extra >= bytes - 4 * c as u64, "{}: {extra}", tag(what));
            drop(y);
        }
        assert_empty(&d);
    }
}

//! Fusion at eval: fused and unfused evaluation agree on random graphs, and
//! fusion does what it promises (dispatch counts, held intermediates
//! written as extra outputs, memory that stays bounded).

mod common;

use common::{Rng, device};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use wgarray::{Array, DType, Device, Slice};

/// One step of a random elementwise graph over values of shapes that
/// broadcast to `[R, C]`.
#[derive(Clone, Debug)]
enum Op {
    Unary(u8, usize),
    Binary(u8, usize, usize),
    Scalar(u8, usize, i8),
    Where(usize, usize, usize),
    /// Round trip through a narrower dtype.
    Cast(u8, usize),
    /// Views on (maybe pending) values: reversed, transposed twice,
    /// expanded and squeezed, broadcast to the full shape.
    View(u8, usize),
    DivMod(usize, usize),
    /// A reduction in the middle (a materialisation point): sum over the
    /// last axis, kept.
    Sum(usize),
    /// Evaluate this value now (a partial eval).
    Eval(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let v = 0usize..64;
    prop_oneof![
        (0u8..10, v.clone()).prop_map(|(k, a)| Op::Unary(k, a)),
        (0u8..7, v.clone(), v.clone()).prop_map(|(k, a, b)| Op::Binary(k, a, b)),
        (0u8..4, v.clone(), -3i8..4).prop_map(|(k, a, s)| Op::Scalar(k, a, s)),
        (v.clone(), v.clone(), v.clone()).prop_map(|(c, a, b)| Op::Where(c, a, b)),
        (0u8..3, v.clone()).prop_map(|(k, a)| Op::Cast(k, a)),
        (0u8..4, v.clone()).prop_map(|(k, a)| Op::View(k, a)),
        (v.clone(), v.clone()).prop_map(|(a, b)| Op::DivMod(a, b)),
        v.clone().prop_map(Op::Sum),
        v.prop_map(Op::Eval),
    ]
}

const R: usize = 7;
const C: usize = 7;

/// Build the graph on `d` from the same inputs, evaluate the values whose
/// bit in `hold` is set, and return them as f64.
fn run(d: &Device, inputs: &[Vec<f32>], ops: &[Op], hold: u64) -> Vec<Vec<f64>> {
    let mut vals: Vec<Array> = vec![
        Array::from_slice(&inputs[0], &[R, C], d).unwrap(),
        Array::from_slice(&inputs[1], &[C], d).unwrap(),
        Array::from_slice(&inputs[2], &[R, 1], d).unwrap(),
    ];
    for op in ops {
        let n = vals.len();
        let pick = |i: usize| vals[i % n].clone();
        let next = match *op {
            Op::Unary(k, a) => {
                let x = pick(a);
                Some(match k {
                    0 => x.negative(),
                    1 => x.abs(),
                    2 => x.tanh(),
                    3 => x.sigmoid(),
                    4 => x.square(),
                    5 => x.abs().and_then(|y| y.sqrt()),
                    6 => x.sin(),
                    7 => x.floor(),
                    8 => x.relu(),
                    _ => x.exp(),
                })
            }
            Op::Binary(k, a, b) => {
                let (x, y) = (pick(a), pick(b));
                Some(match k {
                    0 => &x + &y,
                    1 => &x - &y,
                    2 => &x * &y,
                    3 => x.maximum(&y),
                    4 => x.minimum(&y),
                    5 => &x / &y,
                    _ => x.greater(&y).and_then(|g| g.astype(DType::F32)),
                })
            }
            Op::Scalar(k, a, s) => {
                let x = pick(a);
                let s = s as f64 * 0.75;
                Some(match k {
                    0 => &x + s,
                    1 => &x * s,
                    2 => &x - s,
                    _ => &x / (s + 4.0),
                })
            }
            Op::Where(c, a, b) => {
                let cond = pick(c).greater(pick(a));
                Some(cond.and_then(|c| wgarray::where_(&c, pick(a), pick(b))))
            }
            Op::Cast(k, a) => {
                let to = [DType::F16, DType::BF16, DType::I32][k as usize];
                Some(pick(a).astype(to).and_then(|y| y.astype(DType::F32)))
            }
            Op::View(k, a) => {
                let x = pick(a);
                Some(match k {
                    0 => x.slice(&vec![Slice::step(-1); x.ndim()]),
                    1 => Ok(x.transpose().transpose()),
                    2 => x.expand_dims(0).and_then(|y| y.squeeze(0)),
                    _ => x.broadcast_to(&[R, C]),
                })
            }
            Op::DivMod(a, b) => {
                let (q, r) = pick(a)
                    .divmod((pick(b).abs().unwrap() + 0.5).unwrap())
                    .unwrap();
                vals.push(q);
                Some(Ok(r))
            }
            Op::Sum(a) => {
                let x = pick(a);
                Some(x.sum(-1, true))
            }
            Op::Eval(a) => {
                pick(a).eval().unwrap();
                None
            }
        };
        if let Some(y) = next {
            vals.push(y.expect("a valid op"));
        }
    }
    // Drop what is not held (reassignment ends references), then evaluate
    // the held values together.
    let held: Vec<Array> = vals
        .into_iter()
        .enumerate()
        .filter(|(i, _)| hold >> (i % 64) & 1 == 1)
        .map(|(_, a)| a)
        .collect();
    wgarray::eval(&held.iter().collect::<Vec<_>>()).unwrap();
    held.iter().map(|a| a.to_f64_vec().unwrap()).collect()
}

fn agree(got: &[Vec<f64>], want: &[Vec<f64>]) -> std::result::Result<(), String> {
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        for (i, (&a, &b)) in g.iter().zip(w).enumerate() {
            let same = (a.is_nan() && b.is_nan())
                || a == b
                || (a - b).abs() <= 1e-5 * b.abs().max(1.0)
                // One f16 or bf16 rounding step apart (an FMA contracted
                // inside a fused kernel can tip a rounding).
                || (a - b).abs() <= 8e-3 * b.abs().max(1e-3);
            if !same {
                return Err(format!("value {k}, element {i}: fused {a}, unfused {b}"));
            }
        }
    }
    Ok(())
}

/// `cases` random values of `strategy`, each evaluated by `run` on a device
/// with fusion on and on one with it off, must agree; afterwards neither
/// device holds an array, a node or a buffer.
fn fused_and_unfused_agree<S: Strategy>(
    cases: u32,
    strategy: S,
    run: impl Fn(&Device, &S::Value) -> Vec<Vec<f64>>,
) {
    let fused = device();
    let unfused = device();
    fused.set_fusion(true);
    unfused.set_fusion(false);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |v| {
            agree(&run(&fused, &v), &run(&unfused, &v)).map_err(TestCaseError::fail)
        })
        .unwrap();
    for d in [&fused, &unfused] {
        assert_eq!(d.live_arrays(), 0);
        assert_eq!(d.live_nodes(), 0);
        assert_eq!(d.active_memory(), 0);
    }
}

#[test]
fn fused_and_unfused_agree_on_random_graphs() {
    let strategy = (
        prop::collection::vec(op(), 1..10),
        any::<u64>(),
        any::<u64>(),
    );
    fused_and_unfused_agree(96, strategy, |d, (ops, hold, seed)| {
        let mut rng = Rng::new(*seed);
        let inputs = vec![rng.vec_f32(R * C), rng.vec_f32(C), rng.vec_f32(R)];
        let hold = hold | 1 << 63; // the last value at least
        run(d, &inputs, ops, hold)
    });
}

/// Dispatches one eval of `build`'s result costs on `d`.
fn dispatches(d: &Device, build: impl Fn() -> Array) -> u64 {
    common::eval_dispatches(d, &build())
}

#[test]
fn a_chain_of_elementwise_ops_is_one_dispatch() {
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let mut rng = Rng::new(3);
    let n = 1025;
    let x = Array::from_slice(&rng.vec_f32(n), &[n], &d).unwrap();
    let b = Array::from_slice(&rng.vec_f32(n), &[n], &d).unwrap();
    let chain = || {
        let y = (&x * 2.0).unwrap();
        let y = (&y + &b).unwrap().tanh().unwrap();
        let y = y.astype(DType::F16).unwrap().astype(DType::F32).unwrap();
        (&y - 1.0).unwrap().exp().unwrap()
    };
    assert_eq!(dispatches(&d, chain), 1);
    d.set_fusion(false);
    assert_eq!(
        dispatches(&d, chain),
        7,
        "unfused: one per op, constants fold"
    );
}

/// A fused chain in the wide variant (kernels/program/wide.rs: 16 bytes of
/// each operand per thread): three inputs, one of them donated to the
/// output, a constant, a held intermediate written beside the result, an
/// f16 round trip; every tail size, poisoned pools, against f64 references
/// rounded as each op rounds.
#[test]
fn a_fused_chain_runs_wide_with_a_donated_input() {
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let mut rng = Rng::new(17);
    for n in [1, 3, 4, 5, 7, 33, 1025, 4099] {
        common::poison_pool(&d, 2 * n);
        let (xa, xb, xc) = (rng.vec_f32(n), rng.vec_f32(n), rng.vec_f32(n));
        let b = Array::from_slice(&xb, &[n], &d).unwrap();
        let c = Array::from_slice(&xc, &[n], &d).unwrap();
        let (mid, out) = {
            // After this block `a`'s only holder is the multiply: its
            // buffer may be donated to an output.
            let a = Array::from_slice(&xa, &[n], &d).unwrap();
            a.eval().unwrap();
            let mid = ((&a * 1.5).unwrap() + &b).unwrap().tanh().unwrap();
            let y = (&mid - &c).unwrap().astype(DType::F16).unwrap();
            let out = y.astype(DType::F32).unwrap().abs().unwrap();
            (mid, out)
        };
        let (before, wide) = (d.dispatches(), d.wide_dispatches());
        wgarray::eval(&[&mid, &out]).unwrap();
        assert_eq!(d.dispatches() - before, 1, "n = {n}: one kernel");
        assert_eq!(d.wide_dispatches() - wide, 1, "n = {n}: the wide variant");
        let (m, o) = (mid.to_vec::<f32>().unwrap(), out.to_vec::<f32>().unwrap());
        for i in 0..n {
            let want = ((xa[i] as f64 * 1.5) as f32 as f64 + xb[i] as f64).tanh();
            assert!(
                (m[i] as f64 - want).abs() <= 2e-6,
                "n = {n}: mid[{i}] {} vs {want}",
                m[i]
            );
            let want = half::f16::from_f32(m[i] - xc[i]).to_f32().abs();
            assert_eq!(o[i], want, "n = {n}: out[{i}]");
        }
    }
}

#[test]
fn a_held_intermediate_is_written_by_the_same_kernel() {
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let mut rng = Rng::new(5);
    let n = 33;
    let xv = rng.vec_f32(n);
    let x = Array::from_slice(&xv, &[n], &d).unwrap();
    let mid = (&x * 3.0).unwrap().exp().unwrap(); // held by the caller
    let out = (&mid + 1.0).unwrap().sqrt().unwrap();
    let before = d.dispatches();
    wgarray::eval(&[&out]).unwrap();
    assert_eq!(d.dispatches() - before, 1);
    assert!(mid.is_evaluated(), "the held intermediate was written");
    let (m, o) = (mid.to_vec::<f32>().unwrap(), out.to_vec::<f32>().unwrap());
    for i in 0..n {
        let want = (xv[i] * 3.0).exp();
        assert!((m[i] - want).abs() <= 1e-5 * want, "mid[{i}]");
        assert!(
            (o[i] - (want + 1.0).sqrt()).abs() <= 1e-5 * o[i],
            "out[{i}]"
        );
    }
}

#[test]
fn views_of_pending_values_fuse_through_their_strides() {
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let mut rng = Rng::new(9);
    let (r, c) = (7, 33);
    let av = rng.vec_f32(r * c);
    let a = Array::from_slice(&av, &[r, c], &d).unwrap();
    let build = || {
        let t = (&a + 1.0).unwrap().transpose(); // [c, r], pending
        let rev = t.slice(&[Slice::step(-1), Slice::step(2)]).unwrap(); // [c, 4]
        (&rev * 2.0).unwrap()
    };
    assert_eq!(dispatches(&d, build), 1);
    let got = build().to_vec::<f32>().unwrap();
    let cols = r.div_ceil(2);
    for i in 0..c {
        for j in 0..cols {
            let (row, col) = (2 * j, c - 1 - i);
            assert_eq!(got[i * cols + j], (av[row * c + col] + 1.0) * 2.0);
        }
    }
}

#[test]
fn a_long_chain_splits_at_the_kernel_size_limit_and_stays_in_two_buffers() {
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let n = 4096;
    let x = Array::full(&[n], 0.5, DType::F32, &d).unwrap();
    x.eval().unwrap();
    let mut y = x.clone();
    for i in 0..200 {
        y = if i % 2 == 0 { &y + 1.0 } else { &y * 1.0 }.unwrap();
    }
    let before = d.dispatches();
    d.reset_peak_memory();
    let base = d.active_memory();
    y.eval().unwrap();
    let k = d.dispatches() - before;
    assert!((2..=8).contains(&k), "{k} dispatches for 200 ops");
    assert!(d.peak_memory() - base <= 2 * (n as u64 * 4).next_multiple_of(256));
    assert_eq!(y.to_vec::<f32>().unwrap()[n - 1], 100.5);
}

/// Few rows longer than 4096 elements take the composed path (the
/// reduction, then the wide elementwise kernel); tests/normalize.rs
/// covers the one-pass kernel.
#[test]
fn normalisations_take_two_dispatches_each() {
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let mut rng = Rng::new(9);
    let (rows, cols) = (7, 4099);
    let dtypes: &[DType] = if common::is_gl(&d) {
        &[DType::F32]
    } else {
        &[DType::F32, DType::F16]
    };
    for &dt in dtypes {
        let x = Array::from_slice(&rng.vec_f32(rows * cols), &[rows, cols], &d)
            .unwrap()
            .astype(dt)
            .unwrap();
        x.eval().unwrap();
        let w = Array::from_slice(&rng.vec_f32(cols), &[cols], &d).unwrap();
        let b = Array::from_slice(&rng.vec_f32(cols), &[cols], &d).unwrap();
        type Build<'a> = Box<dyn Fn() -> Array + 'a>;
        let cases: [(&str, Build); 4] = [
            ("softmax", Box::new(|| x.softmax(-1).unwrap())),
            ("log_softmax", Box::new(|| x.log_softmax(-1).unwrap())),
            (
                "layer_norm",
                Box::new(|| x.layer_norm(Some(&w), Some(&b), 1e-5).unwrap()),
            ),
            ("rms_norm", Box::new(|| x.rms_norm(Some(&w), 1e-5).unwrap())),
        ];
        for (name, build) in cases {
            assert_eq!(dispatches(&d, build), 2, "{name} on {dt}");
        }
    }
}

/// One op of a random GEMM epilogue over a product of shape `[m, n]`.
#[derive(Clone, Copy, Debug)]
enum Epi {
    /// `+ b`, a row of `n` broadcast along rows.
    Bias,
    /// `+ r`, a residual `[m, n]` (read transposed when `true`).
    Residual(bool),
    /// `* s`.
    Scale(i8),
    Gelu,
    Relu,
    Tanh,
    /// Round trip through f16 (where the adapter has it; else bf16).
    Half,
    /// Keep this value: the caller holds it.
    Hold,
}

fn epi() -> impl Strategy<Value = Epi> {
    prop_oneof![
        Just(Epi::Bias),
        any::<bool>().prop_map(Epi::Residual),
        (-4i8..5).prop_map(Epi::Scale),
        Just(Epi::Gelu),
        Just(Epi::Relu),
        Just(Epi::Tanh),
        Just(Epi::Half),
        Just(Epi::Hold),
    ]
}

/// One random GEMM-and-epilogue graph: sizes, which operand is a
/// transposed view, whether the product is held, the epilogue's ops, and
/// whether the last value is cast to f16 (or bf16).
#[derive(Clone, Debug)]
struct EpiCase {
    m: usize,
    n: usize,
    k: usize,
    a_t: bool,
    w_t: bool,
    hold_product: bool,
    ops: Vec<Epi>,
    cast_out: bool,
}

fn epi_case() -> impl Strategy<Value = EpiCase> {
    let size = prop::sample::select(vec![1usize, 7, 33, 65]);
    (
        (size.clone(), size.clone(), size),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        prop::collection::vec(epi(), 1..5),
    )
        .prop_map(
            |((m, n, k), (a_t, w_t, hold_product, cast_out), ops)| EpiCase {
                m,
                n,
                k,
                a_t,
                w_t,
                hold_product,
                ops,
                cast_out,
            },
        )
}

/// Evaluate `case` on `d` from `seed`'s data; every value the caller holds
/// (the product if asked, held intermediates, the result), as f64.
fn run_epilogue(d: &Device, case: &EpiCase, seed: u64) -> Vec<Vec<f64>> {
    let (m, n, k) = (case.m, case.n, case.k);
    let mut rng = Rng::new(seed);
    let half = if common::is_gl(d) {
        DType::BF16
    } else {
        DType::F16
    };
    // A transposed operand is the transpose of a stored transpose.
    let x = if case.a_t {
        Array::from_slice(&rng.vec_f32(k * m), &[k, m], d)
            .unwrap()
            .transpose()
    } else {
        Array::from_slice(&rng.vec_f32(m * k), &[m, k], d).unwrap()
    };
    let w = if case.w_t {
        Array::from_slice(&rng.vec_f32(n * k), &[n, k], d)
            .unwrap()
            .transpose()
    } else {
        Array::from_slice(&rng.vec_f32(k * n), &[k, n], d).unwrap()
    };
    let b = Array::from_slice(&rng.vec_f32(n), &[n], d).unwrap();
    let r = Array::from_slice(&rng.vec_f32(m * n), &[m, n], d).unwrap();
    let rt = Array::from_slice(&rng.vec_f32(m * n), &[n, m], d)
        .unwrap()
        .transpose();
    let product = x.matmul(&w).unwrap();
    let mut held = Vec::new();
    if case.hold_product {
        held.push(product.clone());
    }
    let mut y = product;
    for op in &case.ops {
        y = match *op {
            Epi::Bias => (&y + &b).unwrap(),
            Epi::Residual(false) => (&y + &r).unwrap(),
            Epi::Residual(true) => (&y + &rt).unwrap(),
            Epi::Scale(s) => (&y * (s as f64 * 0.5)).unwrap(),
            Epi::Gelu => y.gelu().unwrap(),
            Epi::Relu => y.relu().unwrap(),
            Epi::Tanh => y.tanh().unwrap(),
            Epi::Half => y.astype(half).unwrap().astype(DType::F32).unwrap(),
            Epi::Hold => {
                held.push(y.clone());
                y
            }
        };
    }
    if case.cast_out {
        y = y.astype(half).unwrap();
    }
    held.push(y);
    wgarray::eval(&held.iter().collect::<Vec<_>>()).unwrap();
    held.iter().map(|a| a.to_f64_vec().unwrap()).collect()
}

#[test]
fn gemm_epilogues_agree_fused_and_unfused() {
    // Each case compiles a GEMM of its own (seconds on llvmpipe for the
    // medium tile): few cases.
    fused_and_unfused_agree(16, (epi_case(), any::<u64>()), |d, (case, seed)| {
        run_epilogue(d, case, *seed)
    });
}

#[test]
fn gelu_of_a_biased_matmul_is_one_dispatch() {
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let mut rng = Rng::new(11);
    let (m, k, n) = (33, 65, 7);
    let (xv, wv, bv) = (rng.vec_f32(m * k), rng.vec_f32(k * n), rng.vec_f32(n));
    let rv = rng.vec_f32(m * n);
    let x = Array::from_slice(&xv, &[m, k], &d).unwrap();
    let w = Array::from_slice(&wv, &[k, n], &d).unwrap();
    let b = Array::from_slice(&bv, &[n], &d).unwrap();
    let r = Array::from_slice(&rv, &[m, n], &d).unwrap();
    let mlp = || (&x.matmul(&w).unwrap() + &b).unwrap().gelu().unwrap();
    let residual = || (&(&x.matmul(&w).unwrap() + &b).unwrap() + &r).unwrap();
    assert_eq!(dispatches(&d, mlp), 1);
    assert_eq!(dispatches(&d, residual), 1);
    let plan = wgarray::explain(&[&mlp()]).unwrap();
    assert!(plan.contains("1 kernel for"), "{plan}");
    assert!(plan.contains("fused [matmul, add, gelu]"), "{plan}");
    // The values: against an f64 reference.
    let got = mlp().to_vec::<f32>().unwrap();
    let got_r = residual().to_vec::<f32>().unwrap();
    for i in 0..m {
        for j in 0..n {
            let h: f64 = (0..k)
                .map(|t| xv[i * k + t] as f64 * wv[t * n + j] as f64)
                .sum::<f64>()
                + bv[j] as f64;
            let g = 0.5 * h * (1.0 + erf(h / std::f64::consts::SQRT_2));
            let e = i * n + j;
            assert!(
                (got[e] as f64 - g).abs() <= 1e-4 * (1.0 + g.abs()),
                "gelu [{i}, {j}]"
            );
            let want = h + rv[e] as f64;
            assert!(
                (got_r[e] as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "residual [{i}, {j}]"
            );
        }
    }
    d.set_fusion(false);
    assert_eq!(dispatches(&d, mlp), 3, "unfused: matmul, add, gelu");
}

#[test]
fn a_product_read_elsewhere_or_held_stays_correct() {
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let mut rng = Rng::new(13);
    let (m, k, n) = (7, 33, 65);
    let x = Array::from_slice(&rng.vec_f32(m * k), &[m, k], &d).unwrap();
    let w = Array::from_slice(&rng.vec_f32(k * n), &[k, n], &d).unwrap();
    // Held: written by the epilogue as a second output, one dispatch.
    let p = x.matmul(&w).unwrap();
    let y = p.relu().unwrap();
    let before = d.dispatches();
    wgarray::eval(&[&y]).unwrap();
    assert_eq!(d.dispatches() - before, 1);
    assert!(p.is_evaluated());
    let (pv, yv) = (p.to_vec::<f32>().unwrap(), y.to_vec::<f32>().unwrap());
    for (a, b) in pv.iter().zip(&yv) {
        assert_eq!(a.max(0.0), *b);
    }
    // Read by a reduction too: the GEMM writes it, the epilogue is not fused.
    let p = x.matmul(&w).unwrap();
    let s = p.sum(-1, true).unwrap();
    let y = (&p.tanh().unwrap() - &s).unwrap();
    let before = d.dispatches();
    y.eval().unwrap();
    assert_eq!(d.dispatches() - before, 3);
}

/// The error function (Abramowitz and Stegun 7.1.26 is too coarse here:
/// a series for small arguments, a continued fraction beyond).
fn erf(x: f64) -> f64 {
    if x.abs() > 3.0 {
        // erfc by its continued fraction.
        let t = x.abs();
        let mut f = 0.0;
        for i in (1..60).rev() {
            f = (i as f64 / 2.0) / (t + f);
        }
        let erfc = (-t * t).exp() / (t + f) / std::f64::consts::PI.sqrt();
        return x.signum() * (1.0 - erfc);
    }
    let mut sum = 0.0;
    let mut term = x;
    for n in 0..80 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
    }
    2.0 / std::f64::consts::PI.sqrt() * sum
}

#[test]
fn every_gemm_family_runs_an_epilogue() {
    // Forced with `set_gemm_kernel`; the workgroup-memory family compiles
    // for about a minute on llvmpipe through GL, so it is checked on
    // Vulkan only. Odd N (scalar stores, rows not word aligned: the packed
    // output merges with atomics), a transposed weight, a held product.
    let d = device();
    let mut kernels = vec!["register 8 8 4 1", "splitk 16 16 0"];
    if !common::is_gl(&d) {
        kernels.push("shared 16 16 4 1 16");
    }
    if d.features().contains(wgarray::wgpu::Features::SUBGROUP) {
        kernels.push("splitk 8 8 1");
    }
    let mut rng = Rng::new(17);
    let (m, k, n) = (9, 33, 7);
    let x = Array::from_slice(&rng.vec_f32(m * k), &[m, k], &d).unwrap();
    let w = Array::from_slice(&rng.vec_f32(n * k), &[n, k], &d)
        .unwrap()
        .transpose();
    let b = Array::from_slice(&rng.vec_f32(n), &[n], &d).unwrap();
    let r = Array::from_slice(&rng.vec_f32(m * n), &[m, n], &d).unwrap();
    let half = if common::is_gl(&d) {
        DType::BF16
    } else {
        DType::F16
    };
    for s in kernels {
        d.set_gemm_kernel(Some(s.parse().unwrap())).unwrap();
        let run = |fusion: bool| {
            d.set_fusion(fusion);
            let p = x.matmul(&w).unwrap();
            let y = (&(&p + &b).unwrap().gelu().unwrap() + &r).unwrap();
            let h = y.astype(half).unwrap();
            let before = d.dispatches();
            wgarray::eval(&[&p, &y, &h]).unwrap();
            let count = d.dispatches() - before;
            let values = [&p, &y, &h].map(|a| a.to_f64_vec().unwrap()).to_vec();
            (count, values)
        };
        let (fused_count, fused) = run(true);
        let (_, unfused) = run(false);
        assert_eq!(fused_count, 1, "{s}");
        agree(&fused, &unfused).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    d.set_gemm_kernel(None).unwrap();
}

#[test]
fn an_f64_epilogue_falls_back_to_the_gemm_and_a_kernel() {
    // The GEMM kernels do not enable f64: the planner fuses, lowering runs
    // the GEMM, then the rest as an elementwise kernel.
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let mut rng = Rng::new(19);
    let (m, k, n) = (7, 9, 5);
    let (xv, wv) = (rng.vec_f32(m * k), rng.vec_f32(k * n));
    let x = Array::from_slice(&xv, &[m, k], &d).unwrap();
    let w = Array::from_slice(&wv, &[k, n], &d).unwrap();
    if !d.features().contains(wgarray::wgpu::Features::SHADER_F64) {
        // Without f64 the cast is refused before anything runs.
        let y = x.matmul(&w).unwrap().astype(DType::F64);
        assert!(
            matches!(y, Err(wgarray::Error::MissingFeature { .. })),
            "{y:?}"
        );
        return;
    }
    let y = x
        .matmul(&w)
        .unwrap()
        .tanh()
        .unwrap()
        .astype(DType::F64)
        .unwrap();
    let before = d.dispatches();
    y.eval().unwrap();
    assert_eq!(d.dispatches() - before, 2);
    let got = y.to_vec::<f64>().unwrap();
    for i in 0..m {
        for j in 0..n {
            let p: f32 = (0..k).map(|t| xv[i * k + t] * wv[t * n + j]).sum();
            assert!(
                (got[i * n + j] - p.tanh() as f64).abs() <= 1e-5,
                "[{i}, {j}]"
            );
        }
    }
    drop((x, w, y));
    assert_eq!(d.active_memory(), 0);
}

#[test]
fn a_new_shape_or_scalar_reuses_the_epilogue_pipeline() {
    // Pipelines are keyed by the GEMM variant and the epilogue's structure:
    // sizes, strides and constants are parameters.
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let mut rng = Rng::new(23);
    let mut run = |m: usize, k: usize, n: usize, s: f64| {
        let x = Array::from_slice(&rng.vec_f32(m * k), &[m, k], &d).unwrap();
        let w = Array::from_slice(&rng.vec_f32(k * n), &[k, n], &d).unwrap();
        let b = Array::from_slice(&rng.vec_f32(n), &[n], &d).unwrap();
        let y = (&(&x.matmul(&w).unwrap() + &b).unwrap() * s)
            .unwrap()
            .relu()
            .unwrap();
        y.eval().unwrap();
    };
    run(33, 65, 7, 0.5);
    let created = d.pipelines_created();
    // Same shape class and load modes (K and N not multiples of 4).
    run(35, 67, 9, -2.0);
    assert_eq!(d.pipelines_created(), created);
}

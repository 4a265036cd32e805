//! Host references and comparisons: results computed in f64 on the host,
//! error measures, and row-major index arithmetic.

/// Row-major f64 matmul reference: [batch, m, k] x [batch, k, n].
pub fn matmul_ref(a: &[f32], b: &[f32], batch: usize, m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; batch * m * n];
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f64;
                for kk in 0..k {
                    acc += a[bi * m * k + i * k + kk] as f64 * b[bi * k * n + kk * n + j] as f64;
                }
                c[bi * m * n + i * n + j] = acc;
            }
        }
    }
    c
}

/// Relative Frobenius error of `got` against `want`.
pub fn rel_frobenius(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "length");
    let mut num = 0.0;
    let mut den = 0.0;
    for (&g, &w) in got.iter().zip(want) {
        assert!(g.is_finite(), "non-finite output {g} (unwritten element?)");
        num += (g as f64 - w).powi(2);
        den += w * w;
    }
    (num / den.max(1e-300)).sqrt()
}

/// Whether `got` equals `want` within `tol` relative to `1 + |want|`
/// element by element; NaN matches NaN and equal values (infinities
/// included) always match.
pub fn all_close(got: &[f32], want: &[f32], tol: f32) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| {
            (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs())
        })
}

/// Mean and variance of `v`, the sum of squared deviations divided by
/// `len - ddof` (ddof 0: population, 1: sample; NumPy's `ddof`).
pub fn mean_and_variance(v: &[f64], ddof: f64) -> (f64, f64) {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() as f64 - ddof);
    (m, var)
}

/// Variance of `v` with `ddof` as in [`mean_and_variance`].
pub fn variance(v: &[f64], ddof: f64) -> f64 {
    mean_and_variance(v, ddof).1
}

/// Row-major element strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    (0..shape.len())
        .map(|a| shape[a + 1..].iter().product())
        .collect()
}

/// The multi-index of row-major flat index `idx` in `shape`.
pub fn unravel(mut idx: usize, shape: &[usize]) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        out[a] = idx % shape[a];
        idx /= shape[a];
    }
    out
}

/// The row-major flat index of multi-index `ix` in `shape`.
pub fn ravel(ix: &[usize], shape: &[usize]) -> usize {
    ix.iter().zip(shape).fold(0, |acc, (&i, &s)| acc * s + i)
}

/// Every value of the 2-byte float `dtype` (f16, else bf16), in bit order:
/// 65536 of them, NaN and infinities included.
pub fn every_half_value(dtype: wgarray::DType) -> Vec<f64> {
    (0..=u16::MAX)
        .map(|b| match dtype {
            wgarray::DType::F16 => half::f16::from_bits(b).to_f64(),
            _ => half::bf16::from_bits(b).to_f64(),
        })
        .collect()
}

/// Run `op` on the f32 `inputs` (in chunks of 2^20) and return the largest
/// of `error(got, truth(x))`, with the input and the output where it
/// happens (the first NaN error, if any, wins).
pub fn max_error(
    d: &wgarray::Device,
    inputs: &[f32],
    op: fn(&wgarray::Array) -> wgarray::Result<wgarray::Array>,
    truth: fn(f64) -> f64,
    error: impl Fn(f64, f64) -> f64,
) -> (f64, f32, f32) {
    let mut worst = (0.0, 0.0f32, 0.0f32);
    for chunk in inputs.chunks(1 << 20) {
        let x = wgarray::Array::from_slice(chunk, &[chunk.len()], d).unwrap();
        let got = op(&x).unwrap().to_vec::<f32>().unwrap();
        for (&x, &g) in chunk.iter().zip(&got) {
            let u = error(g as f64, truth(x as f64));
            if u > worst.0 || (u.is_nan() && !worst.0.is_nan()) {
                worst = (u, x, g);
            }
        }
    }
    worst
}

/// `x [m, k] @ W^T` (`transpose`, `w` row-major `[n, k]`) or `x @ W` (`w`
/// row-major `[k, n]`) in f64: the reference of the quantized products,
/// with `w` the dequantized weights.
pub fn weights_matmul_ref(
    x: &[f32],
    m: usize,
    w: &[f32],
    k: usize,
    n: usize,
    transpose: bool,
) -> Vec<f64> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k)
                .map(|t| {
                    let wv = if transpose {
                        w[j * k + t]
                    } else {
                        w[t * n + j]
                    };
                    x[i * k + t] as f64 * wv as f64
                })
                .sum();
        }
    }
    y
}

/// Assert `got` equals `want` element by element within `tol` times the
/// largest `|want|` (at least 1).
pub fn assert_close_scaled(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().map(|v| v.abs()).fold(1.0, f64::max);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol * scale,
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

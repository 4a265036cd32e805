//! The example's core, shared with `tests/multi_device.rs`: a two-layer
//! network's forward pass over a batch split across several devices (one
//! per adapter), the results gathered on the first.

use wgarray::{Array, Device, concatenate};

/// The network's weights, on the host: `y = tanh(x @ w1 + b1) @ w2`.
pub struct Weights {
    pub d_in: usize,
    pub hidden: usize,
    pub d_out: usize,
    pub w1: Vec<f32>,
    pub b1: Vec<f32>,
    pub w2: Vec<f32>,
}

impl Weights {
    /// Deterministic weights of the given sizes, scaled so that `tanh`
    /// does not saturate.
    pub fn new(d_in: usize, hidden: usize, d_out: usize) -> Weights {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |scale: f32| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        };
        let s1 = 1.0 / (d_in as f32).sqrt();
        let s2 = 1.0 / (hidden as f32).sqrt();
        Weights {
            d_in,
            hidden,
            d_out,
            w1: (0..d_in * hidden).map(|_| next(s1)).collect(),
            b1: (0..hidden).map(|_| next(0.1)).collect(),
            w2: (0..hidden * d_out).map(|_| next(s2)).collect(),
        }
    }

    /// The forward pass of `rows` rows of `x` (row-major `[rows, d_in]`) in
    /// f64 on the host: the reference.
    pub fn reference(&self, x: &[f32], rows: usize) -> Vec<f64> {
        let mut out = vec![0.0; rows * self.d_out];
        let mut h = vec![0.0f64; self.hidden];
        for r in 0..rows {
            for (j, hj) in h.iter_mut().enumerate() {
                let mut acc = self.b1[j] as f64;
                for k in 0..self.d_in {
                    acc += x[r * self.d_in + k] as f64 * self.w1[k * self.hidden + j] as f64;
                }
                *hj = acc.tanh();
            }
            for c in 0..self.d_out {
                out[r * self.d_out + c] = (0..self.hidden)
                    .map(|j| h[j] * self.w2[j * self.d_out + c] as f64)
                    .sum();
            }
        }
        out
    }
}

/// How many of `rows` rows each of `parts` devices takes: as even as can
/// be, the first ones one more.
pub fn shares(rows: usize, parts: usize) -> Vec<usize> {
    (0..parts)
        .map(|i| rows / parts + usize::from(i < rows % parts))
        .collect()
}

/// The forward pass of `x` (`[rows, d_in]`, on the host) split by rows
/// across `devices`: the weights are uploaded to the first device and
/// moved to the others with `Array::to_device`; each device gets its
/// share of the rows straight from the host and computes on its own (all
/// evaluated together before any result is moved); the parts are moved
/// back to the first device and concatenated there, in order.
pub fn forward_split(
    devices: &[Device],
    weights: &Weights,
    x: &[f32],
    rows: usize,
) -> wgarray::Result<Array> {
    let first = &devices[0];
    let w1 = Array::from_slice(&weights.w1, &[weights.d_in, weights.hidden], first)?;
    let b1 = Array::from_slice(&weights.b1, &[weights.hidden], first)?;
    let w2 = Array::from_slice(&weights.w2, &[weights.hidden, weights.d_out], first)?;
    let mut parts = Vec::new();
    let mut start = 0;
    for (dev, n) in devices.iter().zip(shares(rows, devices.len())) {
        let (w1, b1, w2) = (w1.to_device(dev)?, b1.to_device(dev)?, w2.to_device(dev)?);
        let xs = Array::from_slice(
            &x[start * weights.d_in..(start + n) * weights.d_in],
            &[n, weights.d_in],
            dev,
        )?;
        let h = (xs.matmul(&w1)? + &b1)?.tanh()?;
        let y = h.matmul(&w2)?;
        // Submit now: every device computes its share while the next is
        // being set up.
        y.eval()?;
        parts.push(y);
        start += n;
    }
    let gathered = parts
        .iter()
        .map(|p| p.to_device(first))
        .collect::<wgarray::Result<Vec<_>>>()?;
    concatenate(&gathered.iter().collect::<Vec<_>>(), 0)
}

//! The check a GEMM candidate passes before tuning may choose it: its
//! product of known operands, at sampled positions, against f64 dot
//! products on the host. A kernel that a driver miscompiles (or a family
//! that no adapter here can run, such as cooperative matrices, with a bug
//! only a GPU shows) is then never chosen, however fast it is; the device
//! logs a warning and keeps the next candidate.
//!
//! Tolerance: the f32 accumulation bound `gamma_K * sum_k |a_ik b_kj|`
//! (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
//! 3.1) plus one rounding to the output dtype, as `wgbench`'s matmul check.

use half::{bf16, f16};

use crate::{DType, Result};

/// Output positions compared, at most.
const POSITIONS: usize = 64;

/// Known operands for a tuning proxy and the positions checked.
pub(crate) struct Probe {
    dtype: DType,
    /// The operands' elements (as stored: rounded to `dtype`), dense.
    a: Vec<f64>,
    b: Vec<f64>,
    /// A's bytes and B's bytes in `dtype`.
    pub a_bytes: Vec<u8>,
    pub b_bytes: Vec<u8>,
    at: Vec<(usize, usize)>,
}

/// A deterministic value in [-1, 1) from `i` (SplitMix64's finaliser).
fn value(i: u64) -> f32 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// `n` values from `seed`, rounded to `dtype`: their values and bytes.
fn operand(n: usize, seed: u64, dtype: DType) -> (Vec<f64>, Vec<u8>) {
    let mut vals = Vec::with_capacity(n);
    let mut bytes = Vec::with_capacity(n * dtype.size_in_bytes());
    for i in 0..n {
        let x = value(seed.wrapping_mul(0x1_0000_0000) + i as u64);
        match dtype {
            DType::F16 => {
                let h = f16::from_f32(x);
                vals.push(h.to_f64());
                bytes.extend_from_slice(&h.to_bits().to_le_bytes());
            }
            DType::BF16 => {
                let h = bf16::from_f32(x);
                vals.push(h.to_f64());
                bytes.extend_from_slice(&h.to_bits().to_le_bytes());
            }
            _ => {
                vals.push(x as f64);
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
    }
    (vals, bytes)
}

impl Probe {
    /// Operands of `a_elems` and `b_elems` elements (the whole proxy,
    /// batches included) and positions of an `m x n` output.
    pub(crate) fn new(dtype: DType, a_elems: usize, b_elems: usize, m: usize, n: usize) -> Probe {
        let (a, a_bytes) = operand(a_elems, 1, dtype);
        let (b, b_bytes) = operand(b_elems, 2, dtype);
        let mut at = vec![(0, 0), (m - 1, n - 1), (0, n - 1), (m - 1, 0)];
        let mut i = 0u64;
        while at.len() < POSITIONS.min(m * n) {
            let r = (value(1000 + i).abs() * m as f32) as usize;
            let c = (value(5000 + i).abs() * n as f32) as usize;
            at.push((r.min(m - 1), c.min(n - 1)));
            i += 1;
        }
        Probe {
            dtype,
            a,
            b,
            a_bytes,
            b_bytes,
            at,
        }
    }

    /// Check the first batch of a product `out` (its bytes, `dtype`, dense
    /// `m x n`) of A seen with strides `(a_rs, a_cs)` and B with `(b_rs,
    /// b_cs)` (elements) over `k`: `Err` names the first wrong position.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check(
        &self,
        out: &[u8],
        n: usize,
        k: usize,
        (a_rs, a_cs): (usize, usize),
        (b_rs, b_cs): (usize, usize),
    ) -> std::result::Result<(), String> {
        let u = 2f64.powi(-24);
        let gamma = k as f64 * u / (1.0 - k as f64 * u);
        let u_out = match self.dtype {
            DType::F16 => 2f64.powi(-11),
            DType::BF16 => 2f64.powi(-8),
            _ => 0.0,
        };
        for &(i, j) in &self.at {
            let (mut want, mut abs) = (0.0f64, 0.0f64);
            for p in 0..k {
                let x = self.a[i * a_rs + p * a_cs] * self.b[p * b_rs + j * b_cs];
                want += x;
                abs += x.abs();
            }
            let got = element(out, i * n + j, self.dtype);
            let tol = gamma * abs + u_out * (want.abs() + gamma * abs) + 1e-30;
            if (got - want).abs().is_nan() || (got - want).abs() > tol {
                return Err(format!("({i}, {j}) is {got}, want {want} within {tol:.3e}"));
            }
        }
        Ok(())
    }
}

/// Element `i` of `bytes` read as `dtype` (f32, f16, bf16).
fn element(bytes: &[u8], i: usize, dtype: DType) -> f64 {
    let s = dtype.size_in_bytes();
    let Some(b) = bytes.get(i * s..(i + 1) * s) else {
        return f64::NAN;
    };
    match dtype {
        DType::F16 => f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        DType::BF16 => bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        _ => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
    }
}

/// Read the first `bytes` of `buffer` (a `COPY_SRC` buffer) back.
///
/// # Errors
/// As [`crate::memory::map_read`].
pub(crate) fn read(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    bytes: u64,
) -> Result<Vec<u8>> {
    let size = bytes.next_multiple_of(4);
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("wgarray gemm tuning check"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("wgarray gemm tuning check"),
    });
    encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
    let index = queue.submit([encoder.finish()]);
    crate::memory::map_read(device, &staging, ..size, index, crate::DEFAULT_WAIT_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_right_product_passes_and_a_wrong_one_is_named() {
        let (m, k, n) = (5, 7, 3);
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let p = Probe::new(dtype, m * k, k * n, m, n);
            // The product, rounded to the dtype like a kernel's store.
            let mut out = Vec::new();
            for i in 0..m {
                for j in 0..n {
                    let s: f64 = (0..k).map(|q| p.a[i * k + q] * p.b[q * n + j]).sum();
                    match dtype {
                        DType::F16 => out.extend(f16::from_f64(s).to_bits().to_le_bytes()),
                        DType::BF16 => out.extend(bf16::from_f64(s).to_bits().to_le_bytes()),
                        _ => out.extend((s as f32).to_le_bytes()),
                    }
                }
            }
            assert_eq!(p.check(&out, n, k, (k, 1), (n, 1)), Ok(()), "{dtype}");
            // B read as if transposed: wrong.
            assert!(p.check(&out, n, k, (k, 1), (1, k)).is_err(), "{dtype}");
            // One corner wrong.
            let s = dtype.size_in_bytes();
            let last = out.len() - s;
            out[last..].fill(0x7f);
            let e = p.check(&out, n, k, (k, 1), (n, 1)).unwrap_err();
            assert!(e.contains(&format!("({}, {})", m - 1, n - 1)), "{e}");
        }
    }
}

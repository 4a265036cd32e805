//! A small host n-d array (f64 values, row-major) for references of data
//! movement ops, and device copies of one host array in several layouts
//! (dense, transposed, step-sliced, reversed) and every dtype.

use super::reference::{ravel, unravel};
use super::rng::Rng;
use wgarray::{Array, DType, Device, Slice};

#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl Host {
    pub fn from_fn(shape: &[usize], mut f: impl FnMut(&[usize]) -> f64) -> Host {
        let n: usize = shape.iter().product();
        let data = (0..n).map(|i| f(&unravel(i, shape))).collect();
        Host {
            shape: shape.to_vec(),
            data,
        }
    }

    /// Small random integers (exact in every dtype; 0 or 1 for bool).
    pub fn random(shape: &[usize], dtype: DType, rng: &mut Rng) -> Host {
        Host::from_fn(shape, |_| {
            let v = (rng.next_u64() % 200) as f64;
            match dtype {
                DType::Bool => v % 2.0,
                DType::U32 => v,
                _ => v - 100.0,
            }
        })
    }

    /// Integers in [-3, 3]: sums of a thousand products stay exact in f32
    /// and finite in f16.
    pub fn small(shape: &[usize], rng: &mut Rng) -> Host {
        Host::from_fn(shape, |_| (rng.next_u64() % 7) as f64 - 3.0)
    }

    pub fn get(&self, ix: &[usize]) -> f64 {
        self.data[ravel(ix, &self.shape)]
    }

    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// Axes in the order `axes` gives.
    pub fn permute(&self, axes: &[usize]) -> Host {
        let shape: Vec<usize> = axes.iter().map(|&a| self.shape[a]).collect();
        Host::from_fn(&shape, |ix| {
            let mut src = vec![0; ix.len()];
            for (k, &a) in axes.iter().enumerate() {
                src[a] = ix[k];
            }
            self.get(&src)
        })
    }
}

/// `values` as a device array of `dtype` and `shape` (converted as
/// `astype` would).
pub fn upload(d: &Device, values: &[f64], shape: &[usize], dtype: DType) -> Array {
    super::arrays::of_dtype(d, values, shape, dtype)
}

/// The host array as a dense device array.
pub fn dense(d: &Device, h: &Host, dtype: DType) -> Array {
    upload(d, &h.data, &h.shape, dtype)
}

/// The same logical array on the device in several layouts: dense;
/// transposed (axes reversed in memory); every axis sliced with step 2
/// from a larger buffer; axis 0 reversed (a negative stride). Each with
/// its name.
pub fn layouts(d: &Device, h: &Host, dtype: DType) -> Vec<(&'static str, Array)> {
    let nd = h.shape.len();
    let mut out = vec![("dense", dense(d, h, dtype))];
    if nd == 0 {
        return out;
    }
    // Transposed: the reversed-axes array, stored densely, viewed back.
    let rev: Vec<usize> = (0..nd).rev().collect();
    let t = dense(d, &h.permute(&rev), dtype).transpose();
    out.push(("transposed", t));
    // Step 2 on every axis: element (2i) of a buffer twice as long.
    let big: Vec<usize> = h.shape.iter().map(|&s| 2 * s.max(1)).collect();
    let sentinel = if dtype == DType::U32 || dtype == DType::Bool {
        1.0
    } else {
        -7.0
    };
    let b = Host::from_fn(&big, |ix| {
        if ix
            .iter()
            .zip(&h.shape)
            .all(|(&i, &s)| i % 2 == 0 && i / 2 < s)
        {
            h.get(&ix.iter().map(|i| i / 2).collect::<Vec<_>>())
        } else {
            sentinel
        }
    });
    let slices: Vec<Slice> = h
        .shape
        .iter()
        .map(|&s| Slice::new(Some(0), Some(2 * s as isize), 2))
        .collect();
    out.push(("strided", dense(d, &b, dtype).slice(&slices).unwrap()));
    // Axis 0 reversed in memory, read backwards.
    let r = Host::from_fn(&h.shape, |ix| {
        let mut j = ix.to_vec();
        j[0] = h.shape[0] - 1 - ix[0];
        h.get(&j)
    });
    let reversed = dense(d, &r, dtype)
        .slice(&[Slice::new(None, None, -1)])
        .unwrap();
    out.push(("reversed", reversed));
    out
}

/// The device array's values (evaluated) and shape as a host array.
pub fn read(a: &Array) -> Host {
    Host {
        shape: a.shape().to_vec(),
        data: a.to_f64_vec().expect("read back"),
    }
}

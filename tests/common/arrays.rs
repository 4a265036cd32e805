//! One-line device arrays from host slices, for short tests. They panic on
//! error: a test that expects an error calls `Array::from_slice` itself.

use wgarray::{Array, Device};

/// An f32 array of `shape` holding `v`.
pub fn f(d: &Device, v: &[f32], shape: &[usize]) -> Array {
    Array::from_slice(v, shape, d).unwrap()
}

/// An i32 array of `shape` holding `v`.
pub fn i(d: &Device, v: &[i32], shape: &[usize]) -> Array {
    Array::from_slice(v, shape, d).unwrap()
}

/// A u32 array of `shape` holding `v`.
pub fn u(d: &Device, v: &[u32], shape: &[usize]) -> Array {
    Array::from_slice(v, shape, d).unwrap()
}

/// An array of `dtype` and `shape` holding `v` converted as `astype` would
/// (floats rounded to nearest, integers truncated, bool `!= 0`).
pub fn of_dtype(d: &Device, v: &[f64], shape: &[usize], dtype: wgarray::DType) -> Array {
    use wgarray::DType;
    use wgarray::half::{bf16, f16};
    match dtype {
        DType::F32 => Array::from_slice(&v.iter().map(|&x| x as f32).collect::<Vec<_>>(), shape, d),
        DType::F16 => Array::from_slice(
            &v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>(),
            shape,
            d,
        ),
        DType::BF16 => Array::from_slice(
            &v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>(),
            shape,
            d,
        ),
        DType::I32 => Array::from_slice(&v.iter().map(|&x| x as i32).collect::<Vec<_>>(), shape, d),
        DType::U32 => Array::from_slice(&v.iter().map(|&x| x as u32).collect::<Vec<_>>(), shape, d),
        DType::F64 => Array::from_slice(v, shape, d),
        DType::I8 => Array::from_slice(&v.iter().map(|&x| x as i8).collect::<Vec<_>>(), shape, d),
        DType::U8 => Array::from_slice(&v.iter().map(|&x| x as u8).collect::<Vec<_>>(), shape, d),
        DType::I16 => Array::from_slice(&v.iter().map(|&x| x as i16).collect::<Vec<_>>(), shape, d),
        DType::U16 => Array::from_slice(&v.iter().map(|&x| x as u16).collect::<Vec<_>>(), shape, d),
        DType::Bool => {
            Array::from_slice(&v.iter().map(|&x| x != 0.0).collect::<Vec<_>>(), shape, d)
        }
        d => panic!("{d} has no element values"),
    }
    .unwrap()
}

/// `v` as `dtype` would hold it, back in f64 (what [`of_dtype`] stores).
pub fn round_to(v: f64, dtype: wgarray::DType) -> f64 {
    use wgarray::DType;
    use wgarray::half::{bf16, f16};
    match dtype {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        DType::I32 => v as i32 as f64,
        DType::U32 => v as u32 as f64,
        DType::F64 => v,
        DType::I8 => v as i8 as f64,
        DType::U8 => v as u8 as f64,
        DType::I16 => v as i16 as f64,
        DType::U16 => v as u16 as f64,
        DType::Bool => (v != 0.0) as u8 as f64,
        d => panic!("{d} has no element values"),
    }
}

/// Random values every dtype holds exactly: quarters in [-4, 4] for
/// floats (with ties), integers in [-1000, 1000) for i32 and i16, [0, 2000)
/// for u32 and u16, [-100, 100) for i8, [0, 200) for u8, 0 and 1 for bool.
pub fn random_values(rng: &mut super::Rng, n: usize, dtype: wgarray::DType) -> Vec<f64> {
    use wgarray::DType;
    (0..n)
        .map(|_| match dtype {
            DType::F32 | DType::F16 | DType::BF16 | DType::F64 => {
                (rng.f32() as f64 * 16.0).round() / 4.0
            }
            DType::I32 | DType::I16 => (rng.next_u64() % 2000) as f64 - 1000.0,
            DType::U32 | DType::U16 => (rng.next_u64() % 2000) as f64,
            DType::I8 => (rng.next_u64() % 200) as f64 - 100.0,
            DType::U8 => (rng.next_u64() % 200) as f64,
            DType::Bool => (rng.next_u64() % 2) as f64,
            d => panic!("{d} has no element values"),
        })
        .collect()
}

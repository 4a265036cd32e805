//! The 8- and 16-bit integer dtypes (packed), f64 where the adapter has
//! `SHADER_F64`, i64/u64 at the host boundary, bitwise ops and `view`,
//! against host references computed in i64/f64 with the dtype's wrap-around
//! (NumPy's semantics), on odd sizes and non-contiguous views.

mod common;

use common::{R, Rng, assert_empty, device, poison_pool};
use wgarray::{Array, DType, Device, Error, Slice};

use DType::{Bool, F16, F32, F64, I8, I16, I32, U8, U16, U32};

const INTS: [DType; 7] = [I8, U8, I16, U16, I32, U32, Bool];

/// `v` wrapped to `t`'s width, as a C cast (NumPy's wrap-around).
fn wrap(t: DType, v: i64) -> i64 {
    match t {
        I8 => v as i8 as i64,
        U8 => v as u8 as i64,
        I16 => v as i16 as i64,
        U16 => v as u16 as i64,
        I32 => v as i32 as i64,
        U32 => v as u32 as i64,
        Bool => (v != 0) as i64,
        _ => panic!("{t} is not an integer dtype"),
    }
}

fn bits(t: DType) -> i64 {
    8 * t.size_in_bytes() as i64
}

/// Uniform over the whole range of `t`.
fn random_ints(rng: &mut Rng, t: DType, n: usize) -> Vec<i64> {
    (0..n).map(|_| wrap(t, rng.next_u64() as i64)).collect()
}

fn upload(t: DType, v: &[i64], shape: &[usize], d: &Device) -> Array {
    macro_rules! up {
        ($ty:ty) => {{
            let h: Vec<$ty> = v.iter().map(|&x| x as $ty).collect();
            Array::from_slice(&h, shape, d)
        }};
    }
    match t {
        I8 => up!(i8),
        U8 => up!(u8),
        I16 => up!(i16),
        U16 => up!(u16),
        I32 => up!(i32),
        U32 => up!(u32),
        Bool => {
            let h: Vec<bool> = v.iter().map(|&x| x != 0).collect();
            Array::from_slice(&h, shape, d)
        }
        _ => panic!("{t}"),
    }
    .unwrap()
}

fn read(a: &Array) -> Vec<i64> {
    macro_rules! rd {
        ($ty:ty) => {
            a.to_vec::<$ty>()
                .unwrap()
                .into_iter()
                .map(|x| x as i64)
                .collect()
        };
    }
    match a.dtype() {
        I8 => rd!(i8),
        U8 => rd!(u8),
        I16 => rd!(i16),
        U16 => rd!(u16),
        I32 => rd!(i32),
        U32 => rd!(u32),
        Bool => rd!(bool),
        t => panic!("{t}"),
    }
}

/// An operand of logical shape `[rows, cols]` holding `host` (row-major):
/// kind 0 dense, 1 a transpose, 2 every other row of a taller array,
/// backwards.
fn operand(t: DType, host: &[i64], rows: usize, cols: usize, kind: usize, d: &Device) -> Array {
    match kind {
        0 => upload(t, host, &[rows, cols], d),
        1 => {
            let mut tr = vec![0; host.len()];
            for r in 0..rows {
                for c in 0..cols {
                    tr[c * rows + r] = host[r * cols + c];
                }
            }
            upload(t, &tr, &[cols, rows], d).transpose()
        }
        _ => {
            // Row 2k+1 of the tall array is logical row rows-1-k.
            let mut tall = vec![0; 2 * host.len()];
            for r in 0..rows {
                let src = &host[r * cols..(r + 1) * cols];
                let dst = 2 * (rows - 1 - r) + 1;
                tall[dst * cols..(dst + 1) * cols].copy_from_slice(src);
            }
            upload(t, &tall, &[2 * rows, cols], d)
                .slice(&[Slice::step(-2)])
                .unwrap()
        }
    }
}

const SHAPES: [(usize, usize); 4] = [(1, 1), (1, 7), (7, 33), (1, 1025)];

/// Two of [`SHAPES`] for the `p`-th dtype pair, with their layout kinds
/// (index % 3): every pair gets a strided 7x33 and one other size, so
/// that the pairs together cover every size and layout without compiling
/// every program for every pair (lavapipe compiles slowly).
fn shapes_for(p: usize) -> [(usize, (usize, usize)); 2] {
    let other = [0, 1, 3][p % 3];
    [(other + p, SHAPES[other]), (p + 1, SHAPES[2])]
}

#[test]
fn bitwise_ops_and_shifts_match_numpy_on_every_integer_dtype_and_bool() -> R {
    let d = device();
    poison_pool(&d, 4096);
    let mut rng = Rng::new(22);
    type Op = fn(&Array, &Array) -> wgarray::Result<Array>;
    let ops: [(&str, Op); 5] = [
        ("and", |a, b| a.bitwise_and(b)),
        ("or", |a, b| a.bitwise_or(b)),
        ("xor", |a, b| a.bitwise_xor(b)),
        ("shl", |a, b| a.left_shift(b)),
        ("shr", |a, b| a.right_shift(b)),
    ];
    // Same dtype, and mixed pairs that promote (i8 with u8 is i16).
    let mut pairs: Vec<(DType, DType)> = INTS.iter().map(|&t| (t, t)).collect();
    pairs.extend([(I8, U8), (U8, I32), (I16, U16), (U16, U8), (Bool, I8)]);
    for (p, (ta, tb)) in pairs.into_iter().enumerate() {
        for (si, (rows, cols)) in shapes_for(p) {
            let n = rows * cols;
            let kind = si % 3;
            let ha = random_ints(&mut rng, ta, n);
            let a = operand(ta, &ha, rows, cols, kind, &d);
            for (name, op) in ops {
                let shift = name.starts_with("sh");
                let t = wgarray::promote_types(ta, tb);
                let t = if shift && t == Bool { I8 } else { t };
                // Shift counts from -2 to past the width.
                let hb: Vec<i64> = if shift && tb != Bool {
                    (0..n)
                        .map(|_| {
                            let c = (rng.next_u64() % (bits(t) as u64 + 6)) as i64 - 2;
                            wrap(tb, c)
                        })
                        .collect()
                } else {
                    random_ints(&mut rng, tb, n)
                };
                let b = operand(tb, &hb, rows, cols, (kind + 1) % 3, &d);
                let got = op(&a, &b)?;
                assert_eq!(got.dtype(), t, "{name} {ta} {tb}");
                assert_eq!(got.shape(), &[rows, cols]);
                let want: Vec<i64> = ha
                    .iter()
                    .zip(&hb)
                    .map(|(&x, &y)| match name {
                        "and" => wrap(t, x & y),
                        "or" => wrap(t, x | y),
                        "xor" => wrap(t, x ^ y),
                        "shl" if (0..bits(t)).contains(&y) => wrap(t, x << y),
                        "shr" if (0..bits(t)).contains(&y) => x >> y,
                        "shl" => 0,
                        _ => -((x < 0) as i64),
                    })
                    .collect();
                assert_eq!(read(&got), want, "{name} {ta} {tb} {rows}x{cols}");
            }
            // ~x in the dtype's own width; ~bool is logical not.
            let got = a.bitwise_invert()?;
            assert_eq!(got.dtype(), ta);
            let want: Vec<i64> = ha
                .iter()
                .map(|&x| if ta == Bool { 1 - x } else { wrap(ta, !x) })
                .collect();
            assert_eq!(read(&got), want, "invert {ta} {rows}x{cols}");
            assert_eq!(read(&(!&a)?), want);
        }
    }
    // Fused with arithmetic: (a & 0x0f) << 2 + a, one program.
    let h = random_ints(&mut rng, U8, 33);
    let a = upload(U8, &h, &[33], &d);
    let m = upload(U8, &vec![0x0f; 33], &[33], &d);
    let s = upload(U8, &vec![2; 33], &[33], &d);
    let got = ((&a & &m)? << s)?.add(&a)?;
    let want: Vec<i64> = h.iter().map(|&x| wrap(U8, ((x & 15) << 2) + x)).collect();
    assert_eq!(read(&got), want);
    // Weak integer scalars take the array's dtype: (a & 15) << 2, a + 1
    // wraps; a float scalar makes it f32 (NEP 50: the kind, not the value),
    // so a bitwise op with one is refused; 256 does not fit u8.
    let got = ((&a & 15)? << 2u32)?;
    let want: Vec<i64> = h.iter().map(|&x| wrap(U8, (x & 15) << 2)).collect();
    assert_eq!((got.dtype(), read(&got)), (U8, want));
    let got = (&a + 1)?;
    let want: Vec<i64> = h.iter().map(|&x| wrap(U8, x + 1)).collect();
    assert_eq!((got.dtype(), read(&got)), (U8, want));
    assert_eq!((&a + 1.0)?.dtype(), F32);
    assert!(matches!(&a & 15.0, Err(Error::OpDType { dtype: F32, .. })));
    assert!(matches!(&a + 256, Err(Error::InvalidArgument(_))));
    let i8s = upload(I8, &[-128, 5, 127], &[3], &d);
    assert!(matches!(i8s.add(-129), Err(Error::InvalidArgument(_))));
    assert_eq!(read(&i8s.add(-1)?), vec![127, 4, 126]);
    assert_eq!(read(&i8s.greater(200)?), vec![0, 0, 0]);
    Ok(())
}

#[test]
fn bitwise_ops_refuse_floats_naming_op_dtype_and_what_works() -> R {
    let d = device();
    let x = Array::from_slice(&[1.0f32, 2.0], &[2], &d)?;
    let i = Array::from_slice(&[1i32, 2], &[2], &d)?;
    for (got, op) in [
        (x.bitwise_and(&x), "bitwise_and"),
        (x.bitwise_or(&i), "bitwise_or"),
        (i.bitwise_xor(&x), "bitwise_xor"),
        (x.left_shift(&i), "left_shift"),
        (i.right_shift(&x), "right_shift"),
        (x.bitwise_invert(), "bitwise_invert"),
    ] {
        match got {
            Err(e @ Error::OpDType { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains(op) && msg.contains("float32"), "{msg}");
                assert!(msg.contains("integer and bool"), "{msg}");
            }
            other => panic!("{op}: {other:?}"),
        }
    }
    drop((x, i));
    assert_empty(&d);
    Ok(())
}

#[test]
fn view_reinterprets_bits_for_free_on_any_layout() -> R {
    let d = device();
    let mut rng = Rng::new(5);
    let mut v: Vec<f32> = rng.vec_f32(7 * 33).iter().map(|x| x * 1e5).collect();
    v[..5].copy_from_slice(&[f32::NAN, -0.0, f32::INFINITY, f32::MIN_POSITIVE / 4.0, -1.0]);
    let x = Array::from_slice(&v, &[7, 33], &d)?;
    x.eval()?;
    let before = d.active_memory();
    let u = x.view(U32)?;
    let i = x.view(I32)?;
    assert_eq!((u.dtype(), u.shape()), (U32, &[7usize, 33][..]));
    let want: Vec<u32> = v.iter().map(|f| f.to_bits()).collect();
    assert_eq!(u.to_vec::<u32>()?, want);
    let wi: Vec<i32> = want.iter().map(|&b| b as i32).collect();
    assert_eq!(i.to_vec::<i32>()?, wi);
    // Free: nothing new allocated for either view.
    assert_eq!(d.active_memory(), before);
    // Back again: the same bits, NaN and -0 included.
    let back: Vec<u32> = u
        .view(F32)?
        .to_vec::<f32>()?
        .iter()
        .map(|f| f.to_bits())
        .collect();
    assert_eq!(back, want);
    // A transposed and a stepped view keep their layout.
    let t = x.transpose().view(U32)?;
    let mut wt = Vec::new();
    for c in 0..33 {
        for r in 0..7 {
            wt.push(want[r * 33 + c]);
        }
    }
    assert_eq!(t.to_vec::<u32>()?, wt);
    let s = x.slice(&[Slice::step(-3)])?.view(I32)?;
    let ws: Vec<i32> = [6usize, 3, 0]
        .iter()
        .flat_map(|&r| wi[r * 33..(r + 1) * 33].to_vec())
        .collect();
    assert_eq!(s.to_vec::<i32>()?, ws);
    // Of a lazy result, then computed on: the sign bit of -x.
    let sign = x
        .negative()?
        .view(U32)?
        .right_shift(&Array::from_slice(&[31u32], &[1], &d)?)?;
    let wsign: Vec<u32> = v.iter().map(|f| (-f).to_bits() >> 31).collect();
    assert_eq!(sign.to_vec::<u32>()?, wsign);
    // 2-byte and 1-byte dtypes, odd lengths (packed words).
    let h: Vec<half::f16> = v[..33].iter().map(|&f| half::f16::from_f32(f)).collect();
    let hx = Array::from_slice(&h, &[33], &d)?;
    let hb: Vec<u16> = h.iter().map(|x| x.to_bits()).collect();
    assert_eq!(hx.view(U16)?.to_vec::<u16>()?, hb);
    let hbi: Vec<i16> = hb.iter().map(|&b| b as i16).collect();
    let bf = hx.view(I16)?.view(DType::BF16)?;
    assert_eq!(bf.view(I16)?.to_vec::<i16>()?, hbi);
    let b8: Vec<u8> = (0..7u8).map(|k| k.wrapping_mul(77)).collect();
    let i8s: Vec<i8> = b8.iter().map(|&b| b as i8).collect();
    assert_eq!(
        Array::from_slice(&b8, &[7], &d)?.view(I8)?.to_vec::<i8>()?,
        i8s
    );
    // Sizes must match; bool has no bit view.
    assert!(matches!(
        x.view(U16),
        Err(Error::DType {
            op: "view",
            dtype: F32,
            other: Some(U16)
        })
    ));
    assert!(matches!(x.view(F64), Err(Error::DType { .. })));
    let b = Array::from_slice(&[true, false], &[2], &d)?;
    assert!(matches!(
        b.view(U32),
        Err(Error::OpDType {
            op: "view",
            dtype: Bool,
            ..
        })
    ));
    assert!(matches!(
        u.view(Bool),
        Err(Error::OpDType { op: "view", .. })
    ));
    drop((x, u, i, t, s, sign, hx, bf, b));
    assert_empty(&d);
    Ok(())
}

#[test]
fn i64_and_u64_cross_the_host_boundary_with_a_range_check() -> R {
    let d = device();
    let v: Vec<i64> = vec![0, -1, 7, i32::MAX as i64, i32::MIN as i64, 12345, -9];
    let a = Array::from_slice(&v, &[7], &d)?;
    assert_eq!(a.dtype(), I32);
    assert_eq!(
        a.to_vec::<i32>()?,
        v.iter().map(|&x| x as i32).collect::<Vec<_>>()
    );
    assert_eq!(a.to_vec::<i64>()?, v);
    let w: Vec<u64> = vec![0, u32::MAX as u64, 5];
    let b = Array::from_slice(&w, &[3], &d)?;
    assert_eq!((b.dtype(), b.to_vec::<u64>()?), (U32, w));
    // i64 indices take rows, as PyTorch's do.
    let table = Array::from_slice(&[10.0f32, 11.0, 12.0, 13.0], &[4], &d)?;
    let idx = Array::from_slice(&[3i64, 0, -1], &[3], &d)?;
    assert_eq!(
        table.take(&idx, 0)?.to_vec::<f32>()?,
        vec![13.0, 10.0, 13.0]
    );
    drop((a, b, table, idx));
    assert_empty(&d);
    // The first value that does not fit is named; nothing is uploaded.
    let bad: Vec<i64> = vec![1, 2, -3, 1 << 31, -(1 << 40)];
    match Array::from_slice(&bad, &[5], &d) {
        Err(e @ Error::OutOfRange { .. }) => {
            let Error::OutOfRange {
                index,
                value,
                dtype,
                ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!((*index, *value, *dtype), (3, 1 << 31, I32));
            assert!(e.to_string().contains("2147483648"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let neg: Vec<u64> = vec![5, 1 << 32];
    assert!(matches!(
        Array::from_slice(&neg, &[2], &d),
        Err(Error::OutOfRange {
            index: 1,
            value: 4294967296,
            dtype: U32,
            ..
        })
    ));
    let low: Vec<i64> = vec![i32::MIN as i64 - 1];
    assert!(matches!(
        Array::from_slice(&low, &[1], &d),
        Err(Error::OutOfRange { index: 0, .. })
    ));
    assert_empty(&d);
    Ok(())
}

/// A host reference for a binary op on two values of the result dtype `t`.
fn int_binary(name: &str, t: DType, x: i64, y: i64) -> i64 {
    match name {
        "add" => wrap(t, x + y),
        "sub" => wrap(t, x - y),
        "mul" => wrap(t, x.wrapping_mul(y)),
        "max" => x.max(y),
        "min" => x.min(y),
        "lt" => (x < y) as i64,
        "eq" => (x == y) as i64,
        _ => (x >= y) as i64,
    }
}

#[test]
fn small_integers_compute_widened_and_wrap_like_numpy() -> R {
    let d = device();
    poison_pool(&d, 4096);
    let mut rng = Rng::new(8);
    type Op = fn(&Array, &Array) -> wgarray::Result<Array>;
    let ops: [(&str, Op); 8] = [
        ("add", |a, b| a.add(b)),
        ("sub", |a, b| a.subtract(b)),
        ("mul", |a, b| a.multiply(b)),
        ("max", |a, b| a.maximum(b)),
        ("min", |a, b| a.minimum(b)),
        ("lt", |a, b| a.less(b)),
        ("eq", |a, b| a.equal(b)),
        ("ge", |a, b| a.greater_equal(b)),
    ];
    let pairs = [
        (I8, I8),
        (U8, U8),
        (I16, I16),
        (U16, U16),
        (I8, U8),
        (U8, U16),
        (I8, I32),
        (U16, I8),
    ];
    for (p, (ta, tb)) in pairs.into_iter().enumerate() {
        let t = wgarray::promote_types(ta, tb);
        for (si, (rows, cols)) in shapes_for(p) {
            let n = rows * cols;
            let ha = random_ints(&mut rng, ta, n);
            // Some equal elements, for eq and ge.
            let mut hb = random_ints(&mut rng, tb, n);
            for k in (0..n).step_by(5) {
                hb[k] = wrap(tb, ha[k]);
            }
            let a = operand(ta, &ha, rows, cols, si % 3, &d);
            let b = operand(tb, &hb, rows, cols, (si + 2) % 3, &d);
            for (name, op) in ops {
                let got = op(&a, &b)?;
                let pred = matches!(name, "lt" | "eq" | "ge");
                assert_eq!(got.dtype(), if pred { Bool } else { t }, "{name} {ta} {tb}");
                let want: Vec<i64> = ha
                    .iter()
                    .zip(&hb)
                    .map(|(&x, &y)| int_binary(name, t, x, y))
                    .collect();
                assert_eq!(read(&got), want, "{name} {ta} {tb} {rows}x{cols}");
            }
            // Unary ops keep the dtype and wrap: -int8(-128) == -128.
            let want: Vec<i64> = ha.iter().map(|&x| wrap(ta, -x)).collect();
            assert_eq!(read(&a.negative()?), want, "neg {ta}");
            let want: Vec<i64> = ha.iter().map(|&x| wrap(ta, x.abs())).collect();
            assert_eq!(read(&a.abs()?), want, "abs {ta}");
            // A fused chain: (a * a + b) as the promoted dtype.
            let got = a.multiply(&a)?.add(&b)?;
            let want: Vec<i64> = ha
                .iter()
                .zip(&hb)
                .map(|(&x, &y)| wrap(t, wrap(ta, x * x) + y))
                .collect();
            assert_eq!(read(&got), want, "fused {ta} {tb}");
        }
    }
    // Float-only math on small integers gives f32; mixing with floats too.
    let a = upload(U8, &[0, 1, 4, 255, 9, 16, 100], &[7], &d);
    assert_eq!(
        a.sqrt()?.to_vec::<f32>()?,
        vec![0.0, 1.0, 2.0, 255f32.sqrt(), 3.0, 4.0, 10.0]
    );
    let scale = Array::from_slice(&[0.5f32], &[1], &d)?;
    let deq = a.multiply(&scale)?;
    assert_eq!(deq.dtype(), F32);
    assert_eq!(
        deq.to_vec::<f32>()?,
        vec![0.0, 0.5, 2.0, 127.5, 4.5, 8.0, 50.0]
    );
    Ok(())
}

#[test]
fn astype_between_every_integer_width_wraps_and_floats_saturate() -> R {
    let d = device();
    let mut rng = Rng::new(3);
    for from in INTS {
        let h = random_ints(&mut rng, from, 33);
        let a = operand(from, &h, 3, 11, 1, &d);
        for to in INTS {
            let got = a.astype(to)?;
            let want: Vec<i64> = h.iter().map(|&x| wrap(to, x)).collect();
            assert_eq!(read(&got), want, "{from} -> {to}");
        }
        let want: Vec<f32> = h.iter().map(|&x| x as f32).collect();
        assert_eq!(a.astype(F32)?.to_vec::<f32>()?, want, "{from} -> f32");
    }
    // Floats truncate toward zero and saturate (Rust's `as`).
    let f = [
        -1e9f32, -129.5, -128.9, -1.5, -0.5, 0.7, 127.9, 255.5, 3e9, 70000.2,
    ];
    let x = Array::from_slice(&f, &[10], &d)?;
    for to in [I8, U8, I16, U16] {
        let want: Vec<i64> = f
            .iter()
            .map(|&v| match to {
                I8 => v as i8 as i64,
                U8 => v as u8 as i64,
                I16 => v as i16 as i64,
                _ => v as u16 as i64,
            })
            .collect();
        assert_eq!(read(&x.astype(to)?), want, "f32 -> {to}");
    }
    Ok(())
}

#[test]
fn small_integer_reductions_accumulate_in_32_bits() -> R {
    let d = device();
    let mut rng = Rng::new(11);
    for t in [I8, U8, I16, U16] {
        for (rows, cols) in [(7usize, 33usize), (3, 1025), (1, 1)] {
            let h = random_ints(&mut rng, t, rows * cols);
            let a = operand(t, &h, rows, cols, rows % 3, &d);
            let acc = if t.is_signed_integer() { I32 } else { U32 };
            for axis in [0isize, 1] {
                let (outer, inner) = if axis == 0 {
                    (cols, rows)
                } else {
                    (rows, cols)
                };
                let at = |o: usize, k: usize| {
                    if axis == 0 {
                        h[k * cols + o]
                    } else {
                        h[o * cols + k]
                    }
                };
                let sum = a.sum(axis, false)?;
                assert_eq!(sum.dtype(), acc);
                let want: Vec<i64> = (0..outer)
                    .map(|o| (0..inner).map(|k| at(o, k)).sum())
                    .collect();
                assert_eq!(read(&sum), want, "sum {t} {rows}x{cols} axis {axis}");
                let max = a.max(axis, false)?;
                assert_eq!(max.dtype(), t);
                let want: Vec<i64> = (0..outer)
                    .map(|o| (0..inner).map(|k| at(o, k)).max().unwrap())
                    .collect();
                assert_eq!(read(&max), want, "max {t} axis {axis}");
                let want: Vec<i64> = (0..outer)
                    .map(|o| (0..inner).map(|k| at(o, k)).min().unwrap())
                    .collect();
                assert_eq!(read(&a.min(axis, false)?), want, "min {t} axis {axis}");
                let want: Vec<i64> = (0..outer)
                    .map(|o| {
                        let m = (0..inner).map(|k| at(o, k)).max().unwrap();
                        (0..inner).position(|k| at(o, k) == m).unwrap() as i64
                    })
                    .collect();
                assert_eq!(read(&a.argmax(axis, false)?), want, "argmax {t}");
            }
        }
    }
    Ok(())
}

fn has_f64(d: &Device) -> bool {
    d.features()
        .contains(wgarray::wgpu::Features::SHADER_F64 | wgarray::wgpu::Features::SHADER_INT64)
}

#[test]
fn f64_computes_in_f64_where_the_adapter_has_it_and_is_a_typed_error_elsewhere() -> R {
    let d = device();
    let mut rng = Rng::new(64);
    // Values f32 cannot hold: 1 + 2^-40 and friends.
    let mk = |rng: &mut Rng, n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| {
                let x = rng.f32() as f64;
                x * 1e3 + (rng.next_u64() >> 12) as f64 * 2f64.powi(-52)
            })
            .collect()
    };
    if !has_f64(&d) {
        let v = mk(&mut rng, 7);
        for e in [
            Array::from_slice(&v, &[7], &d).err(),
            Array::full(&[3], 1.0, F64, &d).err(),
            Array::from_slice(&[1.0f32], &[1], &d)?.astype(F64).err(),
            Array::scalar(2.0, F64, &d).err(),
        ] {
            match e {
                Some(Error::MissingFeature { feature, .. }) => {
                    assert!(feature.starts_with("SHADER_"), "{feature}")
                }
                other => panic!("{other:?}"),
            }
        }
        assert_empty(&d);
        return Ok(());
    }
    for (rows, cols) in [(1usize, 1usize), (7, 33), (1, 1025)] {
        let n = rows * cols;
        let ha = mk(&mut rng, n);
        let hb: Vec<f64> = mk(&mut rng, n).iter().map(|x| x + 2000.0).collect();
        let a = Array::from_slice(&ha, &[rows, cols], &d)?;
        // b transposed: a strided f64 read (two words per element).
        let mut ht = vec![0.0; n];
        for r in 0..rows {
            for c in 0..cols {
                ht[c * rows + r] = hb[r * cols + c];
            }
        }
        let b = Array::from_slice(&ht, &[cols, rows], &d)?.transpose();
        assert_eq!(a.to_vec::<f64>()?, ha);
        let check = |got: Array, want: Vec<f64>, what: &str| {
            assert_eq!(got.dtype(), F64, "{what}");
            assert_eq!(got.to_vec::<f64>().unwrap(), want, "{what} {rows}x{cols}");
        };
        let z = ha.iter().zip(&hb);
        check(a.add(&b)?, z.clone().map(|(x, y)| x + y).collect(), "add");
        check(
            a.multiply(&b)?,
            z.clone().map(|(x, y)| x * y).collect(),
            "mul",
        );
        check(
            a.divide(&b)?,
            z.clone().map(|(x, y)| x / y).collect(),
            "div",
        );
        check(b.sqrt()?, hb.iter().map(|x| x.sqrt()).collect(), "sqrt");
        check(a.negative()?, ha.iter().map(|x| -x).collect(), "neg");
        check(a.floor()?, ha.iter().map(|x| x.floor()).collect(), "floor");
        // Fused: a * b + a.
        check(
            a.multiply(&b)?.add(&a)?,
            z.clone().map(|(x, y)| x * y + x).collect(),
            "fused",
        );
        let lt = a.less(&b)?;
        assert_eq!(
            lt.to_vec::<bool>()?,
            z.clone().map(|(x, y)| x < y).collect::<Vec<_>>()
        );
        // Casts: f64 -> f32 rounds to nearest even, f32 -> f64 is exact.
        let f = a.astype(F32)?;
        assert_eq!(
            f.to_vec::<f32>()?,
            ha.iter().map(|&x| x as f32).collect::<Vec<_>>()
        );
        check(
            f.astype(F64)?,
            ha.iter().map(|&x| x as f32 as f64).collect(),
            "f32->f64",
        );
        // Reductions accumulate in f64.
        let s = a.sum(1, false)?;
        assert_eq!(s.dtype(), F64);
        let got = s.to_vec::<f64>()?;
        for r in 0..rows {
            let want: f64 = ha[r * cols..(r + 1) * cols].iter().sum();
            let tol = 1e-12 * ha.iter().map(|x| x.abs()).sum::<f64>();
            assert!(
                (got[r] - want).abs() <= tol,
                "sum {r}: {} vs {want}",
                got[r]
            );
        }
        let m = a.max(0, false)?.to_vec::<f64>()?;
        for c in 0..cols {
            let want = (0..rows).map(|r| ha[r * cols + c]).fold(f64::MIN, f64::max);
            assert_eq!(m[c], want);
        }
    }
    // Transcendental ops have no 64-bit WGSL builtin: a typed error.
    let a = Array::from_slice(&[1.0f64, 2.0], &[2], &d)?;
    match a.exp() {
        Err(e @ Error::OpDType { op: "exp", .. }) => {
            assert!(e.to_string().contains("float64"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(a.power(&a), Err(Error::OpDType { .. })));
    assert!(matches!(
        a.logsumexp(0, false),
        Err(Error::OpDType {
            op: "logsumexp",
            dtype: F64,
            ..
        })
    ));
    assert!(matches!(
        a.topk(1, 0),
        Err(Error::OpDType { op: "topk", .. })
    ));
    assert!(matches!(
        a.softmax(0),
        Err(Error::OpDType { op: "softmax", .. })
    ));
    // rms_norm computes its mean of squares and rsqrt in f64.
    let hv = [1.5f64, -2.25, 3.0, 0.125, 7.0];
    let v = Array::from_slice(&hv, &[5], &d)?;
    let got = v.rms_norm(None, 0.0)?;
    assert_eq!(got.dtype(), F64);
    let ms = hv.iter().map(|x| x * x).sum::<f64>() / 5.0;
    for (g, x) in got.to_vec::<f64>()?.iter().zip(hv) {
        assert!((g - x / ms.sqrt()).abs() < 1e-14, "rms_norm f64: {g}");
    }
    assert!(matches!(a.bitwise_and(&a), Err(Error::OpDType { .. })));
    // f16 and f64 promote to f64.
    let h = Array::from_slice(&[half::f16::from_f32(1.5)], &[1], &d)?;
    assert_eq!(h.add(&a)?.dtype(), F64);
    assert_eq!(F16.size_in_bytes() * 4, F64.size_in_bytes());
    Ok(())
}

#[test]
fn take_where_and_concatenate_on_packed_dtypes() -> R {
    let d = device();
    poison_pool(&d, 4096);
    let mut rng = Rng::new(13);
    // A u8 and an i16 table of 33 rows x 3; i8 (negative counts from the
    // end) and u16 indices, 7 of them.
    for (tt, ti) in [(U8, I8), (I16, U16), (I8, U8), (U16, I16)] {
        let table = random_ints(&mut rng, tt, 33 * 3);
        let idx: Vec<i64> = (0..7)
            .map(|_| {
                let k = (rng.next_u64() % 33) as i64;
                if ti.is_signed_integer() && rng.next_u64() & 1 == 1 {
                    k - 33
                } else {
                    k
                }
            })
            .collect();
        let t = upload(tt, &table, &[33, 3], &d);
        let i = upload(ti, &idx, &[7], &d);
        let got = t.take(&i, 0)?;
        assert_eq!((got.dtype(), got.shape()), (tt, &[7usize, 3][..]));
        let want: Vec<i64> = idx
            .iter()
            .flat_map(|&k| {
                let r = k.rem_euclid(33) as usize;
                table[3 * r..3 * r + 3].to_vec()
            })
            .collect();
        assert_eq!(read(&got), want, "take {tt}[{ti}]");
        // Along axis 1 of the transposed table (a strided gather).
        let i1 = upload(ti, &[2, 0, 1, 1, 0], &[5], &d);
        let got = t.transpose().take(&i1, 1)?;
        let want: Vec<i64> = (0..3)
            .flat_map(|c| [2usize, 0, 1, 1, 0].map(|r| table[3 * r + c]))
            .collect();
        assert_eq!(read(&got), want, "take axis 1 {tt}");
    }
    // where_ promotes its branches: i8 and u8 give i16.
    let n = 33;
    let hc: Vec<i64> = (0..n).map(|_| (rng.next_u64() & 1) as i64).collect();
    let ha = random_ints(&mut rng, I8, n);
    let hb = random_ints(&mut rng, U8, n);
    let got = wgarray::where_(
        &upload(Bool, &hc, &[n], &d),
        upload(I8, &ha, &[n], &d),
        upload(U8, &hb, &[n], &d),
    )?;
    assert_eq!(got.dtype(), I16);
    let want: Vec<i64> = (0..n)
        .map(|k| if hc[k] != 0 { ha[k] } else { hb[k] })
        .collect();
    assert_eq!(read(&got), want);
    // concatenate of odd-length u8 pieces (a thread owns a whole word,
    // pieces start mid-word) and of i8 with u8 (promoted to i16).
    let parts: Vec<Vec<i64>> = [1usize, 7, 3, 33]
        .iter()
        .map(|&len| random_ints(&mut rng, U8, len))
        .collect();
    let arrays: Vec<Array> = parts
        .iter()
        .map(|p| upload(U8, p, &[p.len()], &d))
        .collect();
    let refs: Vec<&Array> = arrays.iter().collect();
    let got = wgarray::concatenate(&refs, 0)?;
    assert_eq!(read(&got), parts.concat());
    let a = upload(I8, &ha, &[n], &d);
    let got = wgarray::concatenate(&[&a, &refs[1].clone()], 0)?;
    assert_eq!(got.dtype(), I16);
    assert_eq!(read(&got), [ha.clone(), parts[1].clone()].concat());
    Ok(())
}

/// `a @ b` with the host's triple loop, wrapped to `t` (i32 or u32).
fn int_matmul_ref(a: &[i64], b: &[i64], m: usize, k: usize, n: usize, t: DType) -> Vec<i64> {
    let mut c = vec![0i64; m * n];
    for i in 0..m {
        for j in 0..n {
            let s = (0..k).fold(0i64, |s, q| {
                s.wrapping_add(a[i * k + q].wrapping_mul(b[q * n + j]))
            });
            c[i * n + j] = wrap(t, s);
        }
    }
    c
}

#[test]
fn int8_matmul_accumulates_exactly_in_i32() -> R {
    let d = device();
    let mut rng = Rng::new(88);
    for (ta, tb, (m, k, n)) in [
        (I8, I8, (7, 33, 5)),
        (I8, I8, (1, 1025, 3)),
        (U8, U8, (3, 7, 1)),
        (U8, I8, (5, 65, 9)),
        (I32, I32, (4, 9, 6)),
        // Two chunks of k (32 MiB of products each).
        (I8, U8, (64, 2100, 64)),
    ] {
        let ha = random_ints(&mut rng, ta, m * k);
        let hb = random_ints(&mut rng, tb, k * n);
        let a = upload(ta, &ha, &[m, k], &d);
        // b as a transposed view.
        let mut hbt = vec![0; k * n];
        for q in 0..k {
            for j in 0..n {
                hbt[j * k + q] = hb[q * n + j];
            }
        }
        let b = upload(tb, &hbt, &[n, k], &d).transpose();
        let got = a.matmul(&b)?;
        let t = if ta.is_signed_integer() || tb.is_signed_integer() {
            I32
        } else {
            U32
        };
        assert_eq!((got.dtype(), got.shape()), (t, &[m, n][..]));
        assert_eq!(
            read(&got),
            int_matmul_ref(&ha, &hb, m, k, n, t),
            "{ta}@{tb} {m}x{k}x{n}"
        );
    }
    // Batched and 1-D operands, as NumPy: [2, 3, 4] @ [4] -> [2, 3].
    let ha = random_ints(&mut rng, I8, 24);
    let hv = random_ints(&mut rng, I8, 4);
    let got = upload(I8, &ha, &[2, 3, 4], &d).matmul(&upload(I8, &hv, &[4], &d))?;
    assert_eq!(got.shape(), &[2, 3]);
    assert_eq!(read(&got), int_matmul_ref(&ha, &hv, 6, 4, 1, I32));
    // Dequantise: i8 weights times a per-row f32 scale.
    let w = upload(I8, &[-128, -1, 0, 127], &[2, 2], &d);
    let scale = Array::from_slice(&[0.5f32, 0.25], &[2, 1], &d)?;
    assert_eq!(
        w.multiply(&scale)?.to_vec::<f32>()?,
        vec![-64.0, -0.5, 0.0, 31.75]
    );
    if has_f64(&d) {
        let (m, k, n) = (7usize, 33usize, 5usize);
        let ha: Vec<f64> = (0..m * k).map(|_| rng.f32() as f64 / 3.0).collect();
        let hb: Vec<f64> = (0..k * n).map(|_| rng.f32() as f64 / 7.0).collect();
        let a = Array::from_slice(&ha, &[m, k], &d)?;
        let b = Array::from_slice(&hb, &[k, n], &d)?;
        let got = a.matmul(&b)?;
        assert_eq!(got.dtype(), F64);
        let got = got.to_vec::<f64>()?;
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k).map(|q| ha[i * k + q] * hb[q * n + j]).sum();
                // f64 rounding only: far below f32's 1e-7.
                assert!((got[i * n + j] - want).abs() < 1e-14, "f64 matmul");
            }
        }
    }
    Ok(())
}

//! The scatter kernel (wgsl/scatter.wgsl): updates added (duplicates
//! accumulating) or stored into a zeroed output at indices along an axis.

use super::bits::store_element;
use super::elementwise::element_bits;
use super::{CONVERT, Context, Dispatch, Kernel, Operand, Params, Spec, UNRAVEL};
use crate::{DType, Error, Result};

/// Every scatter-add; index decoding and the atomic add per specialisation.
pub(crate) static SCATTER: Kernel =
    Kernel::new("scatter", &[CONVERT, UNRAVEL], wgsl!("scatter"), 2, 1);

/// What a scatter thread does with its update.
#[derive(Clone, Copy)]
enum Write {
    /// Add it (duplicates accumulate): f32, i32 or u32.
    Add(DType),
    /// Store an element of this dtype (any): a 1- or 2-byte element is
    /// merged into its word with an atomic AND and OR
    /// (`bits::store_element`), so threads writing the other lanes of one
    /// word do not race; f64 is two word stores.
    Store(DType),
}

/// The specialisation for `index` indices (i32, u32, or `None`: every
/// update at its own coordinates, as a slice write) and `write`.
fn spec(index: Option<DType>, write: Write) -> (Spec, &'static Kernel) {
    let index = match index {
        Some(DType::I32) => "    return bitcast<i32>(indices[i]);",
        Some(_) => "    return i32(min(indices[i], 0x7fffffffu));",
        None => "    return 0;",
    };
    let store = |dtype: DType| match dtype.size_in_bytes() {
        4 => "    atomicStore(&out[q], updates[i]);".to_string(),
        8 => "    atomicStore(&out[2u * q], updates[2u * i]);\n    \
              atomicStore(&out[2u * q + 1u], updates[2u * i + 1u]);"
            .to_string(),
        _ => format!(
            "    let v = {};\n{}",
            element_bits(dtype, "updates", "i"),
            store_element(dtype, "out").1
        ),
    };
    let add = match write {
        Write::Store(dtype) => store(dtype),
        Write::Add(DType::F32) => "    let v = bitcast<f32>(updates[i]);\n    \
             var old = atomicLoad(&out[q]);\n    \
             loop {\n        \
             let r = atomicCompareExchangeWeak(&out[q], old, bitcast<u32>(bitcast<f32>(old) + v));\n        \
             if r.exchanged {\n            break;\n        }\n        \
             old = r.old_value;\n    }"
            .to_string(),
        Write::Add(_) => "    atomicAdd(&out[q], updates[i]);".to_string(),
    };
    SCATTER.spec(&[("INDEX", index), ("ADD", &add)])
}

/// Every specialisation [`scatter`], [`slice_write`] and
/// [`dynamic_slice_write`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for index in [DType::I32, DType::U32] {
        for acc in [DType::F32, DType::I32, DType::U32] {
            out.push(spec(Some(index), Write::Add(acc)));
        }
    }
    for dtype in [DType::U8, DType::U16, DType::U32, DType::F64] {
        out.push(spec(None, Write::Store(dtype)));
        for index in [DType::I32, DType::U32] {
            out.push(spec(Some(index), Write::Store(dtype)));
        }
    }
    out
}

/// Encode a scatter into `out` (dense, `out_shape`, the updates' dtype,
/// zeroed by the first dispatch): every element of `updates` (shape
/// `shape`, as `indices`) is added (`add`) or stored at its own
/// coordinates with the `axis` coordinate taken from `indices`. Two
/// dispatches.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter(
    cx: &Context,
    add: bool,
    indices: &Operand<'_>,
    updates: &Operand<'_>,
    shape: &[usize],
    axis: usize,
    out: &wgpu::Buffer,
    out_shape: &[usize],
) -> Result<Vec<Dispatch>> {
    let words: usize = out_shape.iter().product();
    if words == 0 {
        return Ok(Vec::new());
    }
    let mut out_strides = crate::shape::contiguous_strides(out_shape);
    let axis_stride = out_strides[axis];
    out_strides[axis] = 0;
    let write = match add {
        true => Write::Add(updates.dtype),
        false => Write::Store(DType::U32),
    };
    let target = Target {
        buffer: out,
        offset: 0,
        strides: &out_strides,
        axis_len: out_shape[axis],
        axis_stride,
        zero_words: words,
    };
    encode(
        cx,
        spec(Some(indices.dtype), write),
        indices,
        updates,
        shape,
        &target,
    )
}

/// Encode a slice write: every element of `updates` (shape `shape`, any
/// dtype, read through its strides) stored into `out` at element `offset +
/// sum(coordinate * strides)` (the slice of an array of the updates' dtype
/// that `out` holds; strides may be negative). One dispatch, none for an
/// empty slice; packed dtypes are merged into their words atomically.
pub(crate) fn slice_write(
    cx: &Context,
    updates: &Operand<'_>,
    shape: &[usize],
    out: &wgpu::Buffer,
    offset: usize,
    strides: &[isize],
) -> Result<Vec<Dispatch>> {
    let target = Target {
        buffer: out,
        offset,
        strides,
        axis_len: 1,
        axis_stride: 0,
        zero_words: 0,
    };
    // One specialisation per element size: the bits are moved, not read.
    // The index binding is unused (`index` returns 0): the updates fill it.
    encode(
        cx,
        spec(None, Write::Store(store_dtype(updates.dtype))),
        updates,
        updates,
        shape,
        &target,
    )
}

/// Encode a slice write whose start on `axis` is read from `index` (one
/// i32 or u32 element, read by every thread: its strides are 0): as
/// [`slice_write`], with `index` (negative counting from the end of
/// `0..starts`, then clamped to it) times the axis's stride added to each
/// update's place. `starts` is the number of valid starts, `len - n + 1`.
/// One dispatch, none for an empty slice.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dynamic_slice_write(
    cx: &Context,
    index: &Operand<'_>,
    updates: &Operand<'_>,
    shape: &[usize],
    out: &wgpu::Buffer,
    offset: usize,
    strides: &[isize],
    axis: usize,
    starts: usize,
) -> Result<Vec<Dispatch>> {
    let target = Target {
        buffer: out,
        offset,
        strides,
        axis_len: starts,
        axis_stride: strides[axis],
        zero_words: 0,
    };
    encode(
        cx,
        spec(Some(index.dtype), Write::Store(store_dtype(updates.dtype))),
        index,
        updates,
        shape,
        &target,
    )
}

/// The dtype a store moves for elements of `dtype`: its bits, by size.
fn store_dtype(dtype: DType) -> DType {
    match dtype.size_in_bytes() {
        1 => DType::U8,
        2 => DType::U16,
        4 => DType::U32,
        _ => DType::F64,
    }
}

/// Where a scatter writes: the output buffer, the element offset and
/// strides of the updates' coordinates in it, the indexed axis's length and
/// stride, and how many words the first pass zeroes (0: no such pass).
struct Target<'a> {
    buffer: &'a wgpu::Buffer,
    offset: usize,
    strides: &'a [isize],
    axis_len: usize,
    axis_stride: isize,
    zero_words: usize,
}

/// The dispatches of one scatter specialisation: a zeroing pass if the
/// target asks for one, then a thread per update.
fn encode(
    cx: &Context,
    (spec, kernel): (Spec, &'static Kernel),
    indices: &Operand<'_>,
    updates: &Operand<'_>,
    shape: &[usize],
    out: &Target<'_>,
) -> Result<Vec<Dispatch>> {
    if shape.len() > 8 {
        return Err(Error::InvalidArgument(
            "scatter_add, put_along_axis and slice_update take at most 8 dimensions".into(),
        ));
    }
    let n: usize = shape.iter().product();
    let mut p = Params::new("scatter");
    p.put(
        0,
        [
            n as i64,
            shape.len() as i64,
            out.axis_len as i64,
            out.axis_stride as i64,
            indices.offset as i64,
            updates.offset as i64,
            out.zero_words as i64,
            out.offset as i64,
        ],
    )?;
    let slots = |v: &[isize]| -> Vec<i64> { v.iter().map(|&s| s as i64).collect() };
    let dims: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
    p.put(8, slots(&dims))?;
    p.put(16, slots(&indices.strides))?;
    p.put(24, slots(&updates.strides))?;
    p.put(32, slots(out.strides))?;
    let pipeline = cx.cache.get(kernel, &spec)?;
    let buffers = vec![
        indices.buffer.clone(),
        updates.buffer.clone(),
        out.buffer.clone(),
    ];
    let mut dispatches = Vec::new();
    for (pass, threads) in [(0i64, out.zero_words), (1, n)] {
        if threads == 0 {
            continue;
        }
        let mut p = p.clone();
        p.put(40, [pass])?;
        dispatches.push(Dispatch {
            windows: Vec::new(),
            pipeline: pipeline.clone(),
            params: p.words(),
            buffers: buffers.clone(),
            workgroups: cx.grid(threads as u64)?,
        });
    }
    Ok(dispatches)
}

//! Lowering of quantize, dequantize and quantized_matmul, and the byte
//! view through which arrays of a block format move whole rows of blocks
//! (copies, concatenate, take).
//!
//! quantized_matmul is one GEMM: the quantized family's, which reads the
//! packed weights as stored (`kernels::gemm::quant`), or for a product it
//! cannot run (batched weights, block formats along n) the weights
//! dequantized into a scratch f32 buffer and the float GEMM on them
//! (see [`gemm_into`]); with a fused elementwise epilogue either way
//! (`lower/matmul.rs::with_epilogue`).

use super::{Lowered, Lowering, NodeIo, matmul};
use crate::array::{Array, Storage};
use crate::graph::Node;
use crate::graph::primitive::{Primitive, QuantMode};
use crate::kernels::Operand;
use crate::kernels::gemm::common::epilogue::Epilogue;
use crate::kernels::gemm::common::operand::{Gemm, Mode, QuantB};
use crate::kernels::gemm::plan;
use crate::kernels::quant::{self as kernel, Rows, Source};
use crate::shape::{contiguous_strides, numel};
use crate::{DType, Error, Result};

/// How a block-format array's layout may be: what the ops allow.
const BLOCK_VIEWS: &str = "views whose last axis stays unit-stride and \
     starts and ends on whole blocks (slices, reshapes and permutations of the \
     leading axes; the last axis only in whole blocks)";

/// An array of a block format seen as bytes: its shape with the last axis
/// counted in bytes, and a u8 storage (strides and offset in bytes) over
/// the same buffer. Every kernel that moves bits (copy, concatenate, take)
/// moves a block format this way, whole blocks at a time.
///
/// # Errors
/// [`Error::OpDType`] naming `op` when the layout splits a block: the last
/// axis not unit-stride or not a whole number of blocks, or an offset or a
/// leading stride inside a block.
pub(super) fn byte_view(
    op: &'static str,
    shape: &[usize],
    s: &Storage,
    dtype: DType,
) -> Result<(Vec<usize>, Storage)> {
    let (b, bytes) = (dtype.block_size(), dtype.size_in_bytes());
    let n = shape.len();
    let whole = |e: isize| e.rem_euclid(b as isize) == 0;
    let ok = n >= 1
        && shape[n - 1].is_multiple_of(b)
        && (shape[n - 1] <= 1 || s.strides[n - 1] == 1)
        && s.offset.is_multiple_of(b)
        && (0..n - 1).all(|d| shape[d] <= 1 || whole(s.strides[d]));
    if !ok {
        return Err(Error::OpDType {
            op,
            dtype,
            takes: BLOCK_VIEWS,
        });
    }
    let conv = |e: isize| e / b as isize * bytes as isize;
    let mut byte_shape = shape.to_vec();
    byte_shape[n - 1] = shape[n - 1] / b * bytes;
    let mut strides: Vec<isize> = s.strides[..n - 1].iter().map(|&e| conv(e)).collect();
    strides.push(1);
    Ok((byte_shape, s.view(strides, s.offset / b * bytes)))
}

/// The array of `shape` read through `s` as rows along its last axis:
/// the element offset of row 0 and the element stride from a row to the
/// next, when the last axis is unit-stride and the leading axes walk the
/// rows at one non-negative stride (a dense array, a slice of rows).
fn rows(shape: &[usize], s: &Storage) -> Option<(usize, usize)> {
    let n = shape.len();
    if n == 0 {
        return Some((s.offset, 1));
    }
    if shape[n - 1] > 1 && s.strides[n - 1] != 1 {
        return None;
    }
    let mut row: Option<isize> = None;
    let mut inner = 1isize;
    for d in (0..n - 1).rev() {
        if shape[d] <= 1 {
            continue;
        }
        match row {
            None => {
                row = Some(s.strides[d]);
                inner = shape[d] as isize;
            }
            Some(r) => {
                if s.strides[d] != r * inner {
                    return None;
                }
                inner *= shape[d] as isize;
            }
        }
    }
    let r = row.unwrap_or(shape[n - 1] as isize);
    (r >= 0).then_some((s.offset, r as usize))
}

/// Input `i` of `io` as rows (see [`rows`]), copied dense first where its
/// layout is not one; the storage it reads (the copy, if one was made).
fn rows_of(lw: &mut Lowering<'_>, io: &NodeIo<'_>, i: usize) -> Result<(Storage, usize, usize)> {
    let x = io.input(i);
    let s = &io.storages[i];
    if x.dtype.is_quantized() {
        // Refuse a layout that splits blocks before anything else.
        byte_view(io.node.primitive.name(), &x.shape, s, x.dtype)?;
    }
    if let Some((offset, stride)) = rows(&x.shape, s) {
        return Ok((s.clone(), offset, stride));
    }
    let dense = super::program::copy(lw, s, &x.shape, x.dtype)?;
    let row = x.shape.last().copied().unwrap_or(1);
    Ok((dense, 0, row))
}

/// The logical shape of quantized weights (input 1 of quantized_matmul,
/// input 0 of dequantize): a block format's own, or for affine the packed
/// shape with the last axis in elements.
fn logical_shape(io: &NodeIo<'_>, i: usize, mode: QuantMode) -> Vec<usize> {
    let mut shape = io.input(i).shape.clone();
    if let (QuantMode::Affine { bits, .. }, Some(last)) = (mode, shape.last_mut()) {
        *last = *last * 32 / bits as usize;
    }
    shape
}

/// Dequantize the weights of `io` (inputs `first..`: a block-format array,
/// or affine quants, scales and biases) into the dense `out` of `dtype`.
fn dequantize_into(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    first: usize,
    mode: QuantMode,
    out: &Storage,
    dtype: DType,
) -> Result<()> {
    let shape = logical_shape(io, first, mode);
    let row_len = shape.last().copied().unwrap_or(1);
    let n_rows = numel(&shape[..shape.len().saturating_sub(1)]);
    let (ws, w_off, w_stride) = rows_of(lw, io, first)?;
    let d = match mode {
        QuantMode::Blocks => {
            let w = io.input(first).dtype;
            let (b, bytes) = (w.block_size(), w.size_in_bytes());
            let rows = Rows {
                buffer: ws.buffer.buffer(),
                offset: w_off / b * bytes,
                stride: w_stride / b * bytes,
            };
            kernel::dequantize(
                lw.cx(),
                Source::Blocks(w),
                &rows,
                None,
                None,
                n_rows,
                row_len,
                out.buffer.buffer(),
                dtype,
            )?
        }
        QuantMode::Affine { group_size, bits } => {
            let (ss, s_off, s_stride) = rows_of(lw, io, first + 1)?;
            let (bs, b_off, b_stride) = rows_of(lw, io, first + 2)?;
            let source = Source::Affine {
                bits,
                group_size,
                scales: io.input(first + 1).dtype,
            };
            kernel::dequantize(
                lw.cx(),
                source,
                &rows_at(&ws, w_off, w_stride),
                Some(&rows_at(&ss, s_off, s_stride)),
                Some(&rows_at(&bs, b_off, b_stride)),
                n_rows,
                row_len,
                out.buffer.buffer(),
                dtype,
            )?
        }
    };
    lw.push(d);
    Ok(())
}

fn rows_at(s: &Storage, offset: usize, stride: usize) -> Rows<'_> {
    Rows {
        buffer: s.buffer.buffer(),
        offset,
        stride,
    }
}

/// MLX's affine quantize of input 0: the three outputs, each dense (a
/// dead one in a scratch buffer that goes back to the pool when the node
/// is done). Shapes come from the input: a compiled function's replay
/// gives dead outputs no shape.
pub(super) fn quantize(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    group_size: u32,
    bits: u32,
) -> Lowered {
    let x = io.input(0);
    let (gs, k) = (group_size as usize, x.shape.last().copied().unwrap_or(0));
    let mut wq_shape = x.shape.clone();
    let mut s_shape = x.shape.clone();
    if let (Some(a), Some(b)) = (wq_shape.last_mut(), s_shape.last_mut()) {
        *a = k * bits as usize / 32;
        *b = k / gs;
    }
    let wq = lw.alloc(&wq_shape, DType::U32)?;
    let scales = lw.alloc(&s_shape, x.dtype)?;
    let biases = lw.alloc(&s_shape, x.dtype)?;
    let (xs, offset, stride) = rows_of(lw, io, 0)?;
    let d = kernel::quantize(
        lw.cx(),
        x.dtype,
        bits,
        group_size,
        &Rows {
            buffer: xs.buffer.buffer(),
            offset,
            stride,
        },
        numel(&s_shape),
        k / gs,
        wq.buffer.buffer(),
        scales.buffer.buffer(),
        biases.buffer.buffer(),
    )?;
    lw.push(d);
    Ok([wq, scales, biases]
        .into_iter()
        .zip(io.outputs)
        .map(|(s, o)| o.as_ref().map(|_| s))
        .collect())
}

/// Dequantize: the weights' elements in the output's dtype, dense.
pub(super) fn dequantize(lw: &mut Lowering<'_>, io: &NodeIo<'_>, mode: QuantMode) -> Lowered {
    let o = io.output()?;
    let out = lw.alloc(&o.shape, o.dtype)?;
    dequantize_into(lw, io, 0, mode, &out, o.dtype)?;
    Ok(vec![Some(out)])
}

/// `x @ w.T` (`transpose`) or `x @ w` for quantized `w`: one GEMM (see
/// [`gemm_into`]) into a fresh output.
pub(super) fn quantized_matmul(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    mode: QuantMode,
    transpose: bool,
) -> Lowered {
    let o = io.output()?;
    let out = lw.alloc(&o.shape, o.dtype)?;
    gemm_into(lw, io, mode, transpose, out.buffer.buffer(), None)?;
    Ok(vec![Some(out)])
}

/// The weights of a quantized_matmul as the quantized GEMM family reads
/// them (`kernels::gemm::common::operand::QuantB`): the packed rows (in
/// bytes for block formats, words for affine) and, for affine, the scales'
/// and biases' rows; each storage a dense copy where its layout was not
/// rows at one stride.
struct Weights {
    source: Source,
    packed: (Storage, usize, usize),
    scales: Option<[(Storage, usize, usize); 2]>,
}

impl Weights {
    /// The weights of `io` (inputs 1..) when the family can run the
    /// product: not batched (every leading axis of length 1), and what
    /// `plan::quant_supported` asks of m, K, n and the buffer. `None` else.
    fn of(
        lw: &mut Lowering<'_>,
        io: &NodeIo<'_>,
        mode: QuantMode,
        transpose: bool,
        mkn: [usize; 3],
    ) -> Result<Option<Weights>> {
        let w = io.input(1);
        let shape = logical_shape(io, 1, mode);
        let source = match mode {
            QuantMode::Blocks => Source::Blocks(w.dtype),
            QuantMode::Affine { group_size, bits } => Source::Affine {
                bits,
                group_size,
                scales: io.input(2).dtype,
            },
        };
        let bytes = io.storages[1].buffer.buffer().size();
        if numel(&shape[..shape.len() - 2]) != 1
            || !plan::quant_supported(source, transpose, mkn, bytes)
        {
            return Ok(None);
        }
        let (ws, off, stride) = rows_of(lw, io, 1)?;
        let packed = match source {
            Source::Blocks(d) => {
                let (b, bytes) = (d.block_size(), d.size_in_bytes());
                (ws, off / b * bytes, stride / b * bytes)
            }
            Source::Affine { .. } => (ws, off, stride),
        };
        let scales = match source {
            Source::Affine { .. } => Some([rows_of(lw, io, 2)?, rows_of(lw, io, 3)?]),
            Source::Blocks(_) => None,
        };
        Ok(Some(Weights {
            source,
            packed,
            scales,
        }))
    }
}

/// The GEMM of the quantized_matmul `io` into `out` (f32, the output's
/// shape), with a fused `epilogue` if any: the quantized GEMM family where
/// it can run the product (`kernels::gemm::quant`: the packed weights read
/// as stored, dequantized in registers); else the weights dequantized to f32
/// in a scratch buffer and the float GEMM on a matmul node made for it (`x`
/// and the scratch as an evaluated array, seen transposed where
/// `transpose` asks). One node either way, so that `compile`'s constant
/// folding never keeps a dequantized copy of a captured weight; the scratch
/// goes back to the pool as soon as the node is lowered (a later dispatch
/// of the same pass may reuse it, ordered after the GEMM that reads it).
pub(super) fn gemm_into(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    mode: QuantMode,
    transpose: bool,
    out: &wgpu::Buffer,
    epilogue: Option<Epilogue<'_>>,
) -> Result<()> {
    let o = io.output()?;
    let nd = o.shape.len();
    let (m, n) = (o.shape[nd - 2], o.shape[nd - 1]);
    let k = io.input(0).shape[io.input(0).shape.len() - 1];
    let batch = &o.shape[..nd - 2];
    if let Some(w) = Weights::of(lw, io, mode, transpose, [m, k, n])? {
        let (ws, off, stride) = &w.packed;
        let mut strides = vec![0isize; 6];
        strides[if transpose { 5 } else { 4 }] = *stride as isize;
        let mut g = Gemm {
            dtype: DType::F32,
            batch_shape: matmul::batch_shape(batch),
            m,
            n,
            k,
            a: matmul::batched(io, 0, batch),
            b: Operand {
                buffer: ws.buffer.buffer(),
                dtype: io.input(1).dtype,
                offset: *off,
                strides,
            },
            bias: None,
            alpha: 1.0,
            beta: 0.0,
            out,
            epilogue,
            quant: Some(QuantB {
                source: w.source,
                mode: if transpose {
                    Mode::QuantK
                } else {
                    Mode::QuantN
                },
                scales: w.scales.as_ref().map(|s| rows_at(&s[0].0, s[0].1, s[0].2)),
                biases: w.scales.as_ref().map(|s| rows_at(&s[1].0, s[1].1, s[1].2)),
            }),
        };
        let d = plan::gemm(lw.cx(), &mut g)?;
        drop(g);
        lw.push(d);
        return Ok(());
    }
    let shape = logical_shape(io, 1, mode);
    let scratch = lw.alloc(&shape, DType::F32)?;
    dequantize_into(lw, io, 1, mode, &scratch, DType::F32)?;
    let n = shape.len();
    let mut b_shape = shape.clone();
    let mut strides = contiguous_strides(&shape);
    if transpose {
        b_shape.swap(n - 2, n - 1);
        strides.swap(n - 2, n - 1);
    }
    let b = scratch.view(strides, 0);
    let device = lw.device;
    let b_array = Array::from_storage(&b_shape, DType::F32, device, b.clone());
    let node = Node::new(
        device,
        Primitive::Matmul {
            alpha: 1.0,
            beta: 0.0,
        },
        vec![io.node.inputs[0].clone(), b_array],
        None,
    );
    let mm = NodeIo {
        node: &node,
        storages: vec![io.storages[0].clone(), b],
        outputs: io.outputs,
    };
    let mut g = matmul::gemm(&mm, o, 1.0, 0.0, out);
    g.epilogue = epilogue;
    let d = plan::gemm(lw.cx(), &mut g)?;
    drop(g);
    lw.push(d);
    Ok(())
}

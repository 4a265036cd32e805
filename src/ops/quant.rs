//! Quantized weights: MLX's affine quantization ([`quantize`],
//! [`dequantize`], [`quantized_matmul`], with MLX's names, argument order
//! and formula) and ggml's block formats (`DType::Q4_0` ...: GGUF files'
//! quantized tensors, see [`crate::io::GgufFile`]), which [`dequantize`]
//! and [`quantized_matmul`] take as they are stored.
//!
//! # Affine quantization (MLX)
//!
//! `w` (f32, f16 or bf16, at least 2-D) is cut into groups of `group_size`
//! (32, 64 or 128) consecutive elements along its last axis; each group
//! gets a scale and a bias (in `w`'s dtype) and each element a `bits`-bit
//! (2, 3, 4, 5, 6 or 8) quant `q`, and `w ~ scale * q + bias`. The scale
//! and bias follow `mlx/ops.cpp` (`affine_quantize`) and its CPU kernel
//! exactly, in f32: `scale = max((max - min) / (2^bits - 1), 1e-7)`, signed
//! so that the group's edge of larger magnitude (`min` if `|min| > |max|`,
//! else `max`) is `q0 = round(edge / scale)` steps from 0; when `q0 != 0`
//! the scale becomes `edge / q0` and the bias `edge`, so the edge is
//! exactly representable (a weight at the edge dequantizes to itself, a
//! group of zeros to zeros); else the bias is 0. Then `q = clamp(round((w -
//! bias) / scale), 0, 2^bits - 1)`, rounding half to even. Each row's
//! quants are one little-endian bit stream packed into u32 words (quant
//! `e` at bit `e * bits`, low bits first; for 3, 5 and 6 bits a quant may
//! straddle two words), as MLX packs them: `w_q` has `k * bits / 32` words
//! a row. Dequantized elements are `q * scale + bias`, computed in f32 and
//! rounded once to the output's dtype (MLX's GPU kernels compute in the
//! scales' dtype; the values agree to that rounding).
//!
//! MLX's GPU kernels (Metal, CUDA) start a group's running maximum at 0
//! rather than at the first element, so for a group whose elements are
//! all negative they quantize against `[min, 0]` where MLX's CPU kernel
//! and this one use `[min, max]`; the difference is only in such groups.
//!
//! # Block formats (ggml)
//!
//! An array of a block format (`DType::is_quantized`) is its packed blocks:
//! `nbytes()` is the packed size, the buffer is uploaded as stored and
//! never expanded to f32 on the device except by [`dequantize`] (a new
//! array) or inside [`quantized_matmul`] (a scratch buffer of that node).
//! Its values are ggml's (`dequantize_row_*` in ggml-quants.c), bit for
//! bit: see `DType`'s variants for each format's formula.
//!
//! # quantized_matmul, for now
//!
//! One node; its lowering dequantizes the weights into an f32 scratch
//! buffer (returned to the pool when the node is lowered) and runs the float
//! GEMM on it, `x` read in f32. The kernels that dequantize in registers
//! (matrix-vector and tiled, with the GEMM's fused epilogue) replace that
//! lowering without changing this API.

use crate::graph::Primitive;
use crate::graph::primitive::{MAX_MATMUL_BATCH_DIMS, QuantMode};
use crate::kernels::quant::{AFFINE_BITS, AFFINE_GROUP_SIZES, FLOATS};
use crate::ops::elementwise::promote_types;
use crate::shape::{broadcast_shapes, check_shape, numel};
use crate::{Array, DType, Device, Error, Result};

/// MLX's default group size (`quantize(w)` with no `group_size`).
pub const DEFAULT_GROUP_SIZE: usize = 64;

/// MLX's default bits per weight.
pub const DEFAULT_BITS: u32 = 4;

/// The longest reduction `quantized_matmul` runs as one node; a longer one
/// (on llvmpipe, one GEMM dispatch's loop limit) is [`dequantize`] and
/// [`Array::matmul`], which cuts K into chunks.
const K_CHUNK: usize = crate::ops::matmul::K_CHUNK;

/// The affine parameters, MLX's defaults filled in and checked.
fn affine_params(
    op: &'static str,
    group_size: Option<usize>,
    bits: Option<u32>,
) -> Result<(usize, u32)> {
    let gs = group_size.unwrap_or(DEFAULT_GROUP_SIZE);
    let bits = bits.unwrap_or(DEFAULT_BITS);
    if !AFFINE_GROUP_SIZES.iter().any(|&g| g as usize == gs) {
        return Err(Error::InvalidArgument(format!(
            "{op}: `group_size` {gs} is not supported; the group sizes are 32, 64 and 128"
        )));
    }
    if !AFFINE_BITS.contains(&bits) {
        return Err(Error::InvalidArgument(format!(
            "{op}: `bits` {bits} is not supported; the bits are 2, 3, 4, 5, 6 and 8"
        )));
    }
    Ok((gs, bits))
}

/// [`Error::OpDType`] naming `op` unless `d` is f32, f16 or bf16.
fn check_float(op: &'static str, d: DType) -> Result<()> {
    if FLOATS.contains(&d) {
        return Ok(());
    }
    Err(Error::OpDType {
        op,
        dtype: d,
        takes: "float32, float16 and bfloat16 arrays",
    })
}

/// The bits a block format's quants have (4, 8 or 6).
fn format_bits(d: DType) -> u32 {
    match d {
        DType::Q8_0 => 8,
        DType::Q6K => 6,
        _ => 4,
    }
}

/// The weights of [`dequantize`] and [`quantized_matmul`], checked: the
/// mode, the inputs that carry them, and their shape in elements.
struct Weights {
    mode: QuantMode,
    inputs: Vec<Array>,
    shape: Vec<usize>,
    /// The scales' dtype (affine), or `None` for a block format.
    scales: Option<DType>,
}

/// Check quantized weights as MLX's `validate_quantized_input` and
/// `affine_dequantize` do (and, for a block format, that nothing but the
/// array is given).
fn weights(
    op: &'static str,
    w: &Array,
    scales: Option<&Array>,
    biases: Option<&Array>,
    group_size: Option<usize>,
    bits: Option<u32>,
) -> Result<Weights> {
    if w.dtype().is_quantized() {
        let d = w.dtype();
        if scales.is_some() || biases.is_some() {
            return Err(Error::InvalidArgument(format!(
                "{op}: a {d} array carries its own scales; `scales` and `biases` must be None"
            )));
        }
        if group_size.is_some_and(|g| g != d.block_size())
            || bits.is_some_and(|b| b != format_bits(d))
        {
            return Err(Error::InvalidArgument(format!(
                "{op}: {d} has blocks of {} elements of {} bits; `group_size` {group_size:?} \
                 and `bits` {bits:?} must be None or those",
                d.block_size(),
                format_bits(d)
            )));
        }
        return Ok(Weights {
            mode: QuantMode::Blocks,
            inputs: vec![w.clone()],
            shape: w.shape().to_vec(),
            scales: None,
        });
    }
    let (gs, bits) = affine_params(op, group_size, bits)?;
    let (Some(scales), Some(biases)) = (scales, biases) else {
        return Err(Error::InvalidArgument(format!(
            "{op}: affine quantization needs `scales` and `biases` (a block format's array \
             needs neither)"
        )));
    };
    super::same_device(op, w, scales)?;
    super::same_device(op, w, biases)?;
    if w.ndim() < 2 {
        return Err(Error::InvalidArgument(format!(
            "{op}: the quantized matrix must have at least 2 dimensions, got shape {:?}",
            w.shape()
        )));
    }
    if scales.shape() != biases.shape() {
        return Err(Error::ShapeMismatch {
            op,
            lhs: scales.shape().to_vec(),
            rhs: biases.shape().to_vec(),
        });
    }
    let (wl, sl) = (w.shape().len(), scales.shape().len());
    if wl != sl || w.shape()[..wl - 1] != scales.shape()[..sl - 1] {
        return Err(Error::ShapeMismatch {
            op,
            lhs: w.shape().to_vec(),
            rhs: scales.shape().to_vec(),
        });
    }
    let words = w.shape()[wl - 1];
    let k = words * 32 / bits as usize;
    if !(words * 32).is_multiple_of(bits as usize) || k != scales.shape()[sl - 1] * gs {
        return Err(Error::InvalidArgument(format!(
            "{op}: the shapes of `w` {:?} and `scales` {:?} do not agree with group_size \
             {gs} and bits {bits} (w's last axis holds {words} words of {bits}-bit quants, \
             scales' one scale per {gs} of them)",
            w.shape(),
            scales.shape()
        )));
    }
    if w.dtype() != DType::U32 {
        return Err(Error::OpDType {
            op,
            dtype: w.dtype(),
            takes: "packed quants as uint32 (as quantize makes them) or an array of a block format",
        });
    }
    check_float(op, scales.dtype())?;
    check_float(op, biases.dtype())?;
    let t = promote_types(scales.dtype(), biases.dtype());
    let mut shape = w.shape().to_vec();
    shape[wl - 1] = k;
    check_shape(op, &shape)?;
    Ok(Weights {
        mode: QuantMode::Affine {
            group_size: gs as u32,
            bits,
        },
        inputs: vec![w.clone(), scales.astype(t)?, biases.astype(t)?],
        shape,
        scales: Some(t),
    })
}

/// MLX `quantize(w, group_size, bits)`: `w` quantized with MLX's affine
/// quantization (the module docs give the formula and the packing),
/// returning `(w_q, scales, biases)`.
///
/// `w` is f32, f16 or bf16 of shape `[..., k]` (at least 2-D, as MLX asks),
/// `k` a multiple of `group_size`. `w_q` is u32 `[..., k * bits / 32]`,
/// `scales` and `biases` `[..., k / group_size]` in `w`'s dtype.
/// `group_size` is 32, 64 or 128 (`None`: 64), `bits` 2, 3, 4, 5, 6 or 8
/// (`None`: 4), as MLX's.
///
/// One node with three outputs (one dispatch: a thread per two groups).
/// The outputs are siblings as [`Array::split`]'s: none holds another, and
/// dropping, replacing or reassigning any of them, evaluated or not, inside
/// [`crate::compile()`] or not, releases what only it held; an output
/// dropped before eval is written to a scratch buffer that goes straight
/// back to the pool.
///
/// ```
/// # use wgarray::{Array, Device};
/// # let device = Device::new_default()?;
/// let w = Array::from_slice(&(0..64).map(|i| i as f32 / 8.0 - 4.0).collect::<Vec<_>>(), &[2, 32], &device)?;
/// let (w_q, scales, biases) = wgarray::quantize(&w, 32, 4)?;
/// assert_eq!((w_q.shape(), scales.shape()), (&[2, 4][..], &[2, 1][..]));
/// let back = wgarray::dequantize(&w_q, &scales, &biases, 32, 4, None)?;
/// // Within a step (the scale) of each group.
/// assert!(back.allclose(&w, 0.0, 0.27, false)?.item::<bool>()?);
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] for another group size or bit width, fewer
/// than 2 dimensions, or a last axis that is not a multiple of
/// `group_size`; [`Error::OpDType`] for a `w` that is not f32, f16 or
/// bf16.
#[track_caller]
pub fn quantize(
    w: &Array,
    group_size: impl Into<Option<usize>>,
    bits: impl Into<Option<u32>>,
) -> Result<(Array, Array, Array)> {
    let (gs, bits) = affine_params("quantize", group_size.into(), bits.into())?;
    if w.ndim() < 2 {
        return Err(Error::InvalidArgument(format!(
            "quantize: the matrix to quantize must have at least 2 dimensions, got shape {:?}",
            w.shape()
        )));
    }
    let k = w.shape()[w.ndim() - 1];
    if !k.is_multiple_of(gs) {
        return Err(Error::InvalidArgument(format!(
            "quantize: the last axis of `w` (shape {:?}) is not a multiple of the group size {gs}",
            w.shape()
        )));
    }
    check_float("quantize", w.dtype())?;
    let mut wq = w.shape().to_vec();
    let mut s = w.shape().to_vec();
    let last = wq.len() - 1;
    wq[last] = k * bits as usize / 32;
    s[last] = k / gs;
    let mut out = Array::from_node(
        w.device(),
        Primitive::Quantize {
            group_size: gs as u32,
            bits,
        },
        vec![w.clone()],
        vec![(wq, DType::U32), (s.clone(), w.dtype()), (s, w.dtype())],
    );
    let biases = out.pop().expect("three outputs");
    let scales = out.pop().expect("three outputs");
    let w_q = out.pop().expect("three outputs");
    Ok((w_q, scales, biases))
}

/// MLX `dequantize(w, scales, biases, group_size, bits, dtype=...)`: the
/// elements of quantized weights, of shape `[..., k]`.
///
/// - Affine (MLX): `w` the u32 quants `[..., k * bits / 32]` and `scales`
///   and `biases` `[..., k / group_size]` as [`quantize`] makes them;
///   `group_size` and `bits` as there (`None`: 64 and 4). The result's
///   dtype is `dtype`, or by default the promotion of the scales' and
///   biases' dtypes.
/// - A block format (ggml: `w.dtype().is_quantized()`, a GGUF tensor):
///   `scales` and `biases` `None` (the blocks carry theirs), `group_size`
///   and `bits` `None` (or the format's own block size and bits). The
///   result has `w`'s shape and `dtype` (default f32): ggml's
///   `dequantize_row_*` values bit for bit (in f32; f16 and bf16 rounded
///   once, to nearest even).
///
/// `dtype` is f32, f16 or bf16. One dispatch, a thread per 32 elements.
///
/// ```
/// # use wgarray::{Array, DType, Device};
/// # let device = Device::new_default()?;
/// // One Q8_0 block: f16 scale 0.5, then 32 signed quants 0, 1, ..., 31.
/// let mut block = half::f16::from_f32(0.5).to_le_bytes().to_vec();
/// block.extend(0u8..32);
/// let w = Array::from_blocks(&block, &[1, 32], DType::Q8_0, &device)?;
/// let x = wgarray::dequantize(&w, None, None, None, None, DType::F32)?;
/// assert_eq!(x.to_vec::<f32>()?[..3], [0.0, 0.5, 1.0]);
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// # Errors
/// [`Error::DeviceMismatch`]; [`Error::InvalidArgument`] for unsupported
/// `group_size` or `bits`, missing `scales` or `biases` (affine), given
/// ones (block format), or shapes that do not agree with `group_size` and
/// `bits` (with the shapes); [`Error::ShapeMismatch`] for `scales` and
/// `biases` of different shapes or leading axes other than `w`'s;
/// [`Error::OpDType`] for `w` neither u32 nor a block format, or scales,
/// biases or `dtype` not f32, f16 or bf16.
#[track_caller]
pub fn dequantize<'a>(
    w: &Array,
    scales: impl Into<Option<&'a Array>>,
    biases: impl Into<Option<&'a Array>>,
    group_size: impl Into<Option<usize>>,
    bits: impl Into<Option<u32>>,
    dtype: impl Into<Option<DType>>,
) -> Result<Array> {
    let wt = weights(
        "dequantize",
        w,
        scales.into(),
        biases.into(),
        group_size.into(),
        bits.into(),
    )?;
    let dtype = dtype.into().or(wt.scales).unwrap_or(DType::F32);
    check_float("dequantize", dtype)?;
    Ok(Array::from_node(
        w.device(),
        Primitive::Dequantize(wt.mode),
        wt.inputs,
        vec![(wt.shape, dtype)],
    )
    .pop()
    .expect("one output"))
}

/// MLX `quantized_matmul(x, w, scales, biases, transpose, group_size,
/// bits)`: `x @ W.T` (`transpose`, MLX's default: `W` is `[..., n, k]`, a
/// Linear layer's weight as GGUF and PyTorch store it) or `x @ W` (`W` is
/// `[..., k, n]`), where `W` is the quantized weights as [`dequantize`]
/// takes them: MLX's affine triple, or an array of a block format with
/// `scales`, `biases`, `group_size` and `bits` `None`.
///
/// `x` is f32, f16 or bf16 of shape `[..., m, k]` (or `[k]`); batch axes
/// of `x` and `W` broadcast (at most 4). The result is `[..., m, n]` (`[n]`
/// for a 1-D `x`), of the promotion of `x`'s and the scales' dtypes
/// (affine, as MLX) or `x`'s dtype (block format); products accumulate in
/// f32.
///
/// ```
/// # use wgarray::{Array, DType, Device};
/// # let device = Device::new_default()?;
/// let w = Array::from_slice(&(0..64 * 3).map(|i| (i % 7) as f32 - 3.0).collect::<Vec<_>>(), &[3, 64], &device)?;
/// let (wq, s, b) = wgarray::quantize(&w, 64, 8)?;
/// let x = Array::ones(&[2, 64], DType::F32, &device)?;
/// let y = wgarray::quantized_matmul(&x, &wq, &s, &b, true, 64, 8)?;
/// let w_hat = wgarray::dequantize(&wq, &s, &b, 64, 8, None)?;
/// assert!(y.allclose(&x.matmul(&w_hat.transpose())?, 1e-5, 1e-4, false)?.item::<bool>()?);
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// # Errors
/// As [`dequantize`] for the weights; [`Error::DeviceMismatch`];
/// [`Error::InvalidArgument`] for a 0-d `x` or more than 4 batch axes;
/// [`Error::ShapeMismatch`] when `x`'s last axis is not `W`'s inner one
/// or batch axes do not broadcast; [`Error::OpDType`] for an `x` that is
/// not f32, f16 or bf16.
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn quantized_matmul<'a>(
    x: &Array,
    w: &Array,
    scales: impl Into<Option<&'a Array>>,
    biases: impl Into<Option<&'a Array>>,
    transpose: bool,
    group_size: impl Into<Option<usize>>,
    bits: impl Into<Option<u32>>,
) -> Result<Array> {
    let op = "quantized_matmul";
    super::same_device(op, x, w)?;
    let (scales, biases) = (scales.into(), biases.into());
    let wt = weights(op, w, scales, biases, group_size.into(), bits.into())?;
    if x.ndim() == 0 {
        return Err(Error::InvalidArgument(format!(
            "{op}: `x` is 0-dimensional; it needs at least one axis"
        )));
    }
    let wn = wt.shape.len();
    if wn < 2 {
        return Err(Error::InvalidArgument(format!(
            "{op}: the weights must have at least 2 dimensions, got shape {:?}",
            wt.shape
        )));
    }
    let (k, n) = if transpose {
        (wt.shape[wn - 1], wt.shape[wn - 2])
    } else {
        (wt.shape[wn - 2], wt.shape[wn - 1])
    };
    let mismatch = || Error::ShapeMismatch {
        op,
        lhs: x.shape().to_vec(),
        rhs: wt.shape.clone(),
    };
    if x.shape()[x.ndim() - 1] != k {
        return Err(mismatch());
    }
    check_float(op, x.dtype())?;
    let out_dtype = match wt.scales {
        Some(s) => promote_types(x.dtype(), s),
        None => x.dtype(),
    };
    let x2: Vec<usize> = if x.ndim() == 1 {
        vec![1, k]
    } else {
        x.shape().to_vec()
    };
    let batch =
        broadcast_shapes(op, &x2[..x2.len() - 2], &wt.shape[..wn - 2]).map_err(|_| mismatch())?;
    if batch.len() > MAX_MATMUL_BATCH_DIMS {
        return Err(Error::InvalidArgument(format!(
            "{op}: at most {MAX_MATMUL_BATCH_DIMS} batch dimensions, got {} (shapes {:?} and {:?})",
            batch.len(),
            x.shape(),
            wt.shape
        )));
    }
    let m = x2[x2.len() - 2];
    let mut out = batch;
    out.extend([m, n]);
    check_shape(op, &out)?;
    let mut result = out[..out.len() - 2].to_vec();
    if x.ndim() > 1 {
        result.push(m);
    }
    result.push(n);
    let xf = x.astype(DType::F32)?.reshape_to(&x2);
    let y = if k > K_CHUNK {
        // One GEMM dispatch per K chunk: through the dequantized weights.
        let (gs, bits) = wt.params();
        let d = dequantize(w, scales, biases, gs, bits, DType::F32)?;
        let d = if transpose { d.swapaxes(-1, -2)? } else { d };
        xf.matmul(&d)?
    } else {
        let mut inputs = vec![xf];
        inputs.extend(wt.inputs);
        Array::from_node1(
            x.device(),
            Primitive::QuantizedMatmul {
                mode: wt.mode,
                transpose,
            },
            inputs,
            out,
            DType::F32,
        )
    };
    y.reshape(&result)?.astype(out_dtype)
}

impl Weights {
    /// The group size and bits to give [`dequantize`] again for these
    /// weights.
    fn params(&self) -> (Option<usize>, Option<u32>) {
        match self.mode {
            QuantMode::Affine { group_size, bits } => (Some(group_size as usize), Some(bits)),
            QuantMode::Blocks => (None, None),
        }
    }
}

impl Array {
    /// An evaluated array of a block format (`dtype.is_quantized()`) from
    /// its packed bytes, in ggml's layout (the bytes of a GGUF tensor's
    /// data): each row of `shape[-1]` elements is `shape[-1] /
    /// dtype.block_size()` blocks of `dtype.size_in_bytes()` bytes, rows in
    /// row-major order. Uploaded as they are, in one copy.
    ///
    /// # Errors
    /// [`Error::OpDType`] for an element dtype (use [`Array::from_slice`]);
    /// [`Error::InvalidArgument`] for a 0-d shape, a last axis that is not
    /// a whole number of blocks, or `bytes` of another length than the
    /// shape's blocks take; [`Error::TooLarge`] for more than
    /// [`crate::shape::MAX_DIMS`] dimensions or past the adapter's largest
    /// storage binding; [`Error::OutOfMemory`].
    #[track_caller]
    pub fn from_blocks(
        bytes: &[u8],
        shape: &[usize],
        dtype: DType,
        device: &Device,
    ) -> Result<Array> {
        check_shape("from_blocks", shape)?;
        check_block_shape("from_blocks", shape, dtype)?;
        let want = dtype.nbytes(numel(shape));
        if bytes.len() != want {
            return Err(Error::InvalidArgument(format!(
                "from_blocks: {} bytes cannot fill shape {shape:?} of {dtype} ({want} bytes)",
                bytes.len()
            )));
        }
        let origin = device.origin(|| "from_blocks");
        let buffer = crate::transfer::upload(device, "from_blocks", want as u64, origin, |dst| {
            crate::transfer::write_device_bytes(dst, bytes)
        })?;
        Ok(Array::ready(shape, dtype, device, buffer, origin))
    }

    /// The packed bytes of an array of a block format, rows in row-major
    /// order ([`Array::from_blocks`]'s layout, [`Array::nbytes`] of them):
    /// evaluated, copied dense on the device if it is a strided view, then
    /// read back.
    ///
    /// # Errors
    /// [`Error::OpDType`] for an element dtype (use [`Array::to_vec`]); the
    /// errors of [`crate::eval`]; [`Error::Readback`].
    #[track_caller]
    pub fn to_blocks(&self) -> Result<Vec<u8>> {
        let dtype = self.dtype();
        if !dtype.is_quantized() {
            return Err(Error::OpDType {
                op: "to_blocks",
                dtype,
                takes: "arrays of a block format (to_vec reads element dtypes)",
            });
        }
        let dense = self.contiguous()?;
        crate::graph::eval::evaluate(&[&dense])?;
        let nbytes = self.nbytes();
        if nbytes == 0 {
            self.device().probe_lost()?;
            return Ok(Vec::new());
        }
        let storage = dense.inner.storage()?;
        // Rows need not start on a word: read the words around them.
        let start = dtype.nbytes(storage.offset);
        let from = start & !3;
        let to = (start + nbytes).next_multiple_of(4);
        let device = self.device();
        let dev = &device.inner;
        let origin = device.origin(|| "read-back");
        device.scoped(|| {
            crate::memory::read_back(
                &dev.pool,
                &dev.queue,
                storage.buffer.buffer(),
                from as u64,
                (to - from) as u64,
                origin,
                device.wait_timeout(),
                |b| b[start - from..start - from + nbytes].to_vec(),
            )
        })
    }
}

/// [`Error::OpDType`] unless `dtype` is a block format, and
/// [`Error::InvalidArgument`] unless `shape` is rows of whole blocks.
pub(crate) fn check_block_shape(op: &'static str, shape: &[usize], dtype: DType) -> Result<()> {
    if !dtype.is_quantized() {
        return Err(Error::OpDType {
            op,
            dtype,
            takes: "block formats (DType::BLOCK_FORMATS; element dtypes come from from_slice)",
        });
    }
    match shape.last() {
        Some(&k) if k.is_multiple_of(dtype.block_size()) => Ok(()),
        _ => Err(Error::InvalidArgument(format!(
            "{op}: shape {shape:?} is not rows of whole {dtype} blocks: its last axis must be \
             a multiple of {}",
            dtype.block_size()
        ))),
    }
}

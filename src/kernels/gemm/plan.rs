//! Above the families: a product's dispatches from the tuned choice. The
//! shape class and the kernel ([`gemm`], through the device's tuning), then
//! the variant (each operand's load mode from its strides, the stores, the
//! flags), its pipeline, and the grid, split where it passes the
//! per-dimension limit ([`dispatches`]); and the warm-up of the tuning
//! file's list ([`warm_up`]).

use super::common::epilogue;
use super::common::operand::{
    Gemm, Mode, col_stride, pair_k_layout_ok, pair_layout_ok, row_stride, uniform_rows, vec_ok,
};
use super::common::params::gemm_params;
use super::quant::{self, XLoad};
use super::tuning::Wanted;
use super::tuning::candidates::{candidates, fit_gemv_columns, register_tile};
use super::tuning::class::{QUANT_GEMV_ROWS, ShapeClass};
use super::tuning::first_use;
use super::tuning::kernel::{GemmKernel, usable};
use super::tuning::variant::{GemmVariant, looped_stores, pair_device_ok, scalar_staging};
use super::uniform;
use crate::kernels::quant::Source;
use crate::kernels::{
    Context, Dispatch, Params, Pipeline, QuickKey, WINDOW_BYTES, WarmBuild, Window,
};
use crate::{DType, Result};

/// The dispatches of the GEMM: one, several when the grid passes the
/// per-dimension workgroup limit, none for an empty output. The kernel is
/// the one forced on the device, else the one chosen for the shape class
/// and dtype (timed on first use, see `tuning`), else the
/// family's default, where the adapter can run it.
///
/// # Errors
/// [`crate::Error::TooLarge`] for sizes, strides or offsets past `u32`,
/// [`crate::Error::Kernel`] if the specialisation fails to compile; a
/// failed tuning run's errors (a lost device).
pub(crate) fn gemm(cx: &Context, g: &mut Gemm<'_>) -> Result<Vec<Dispatch>> {
    let batch: usize = g.batch_shape.iter().product();
    if batch * g.m * g.n == 0 {
        return Ok(Vec::new());
    }
    let (dtype, class) = match &g.quant {
        Some(q) => (
            q.source.tuning_dtype(),
            ShapeClass::of_quantized(g.m, q.mode == Mode::QuantK),
        ),
        None => (
            g.dtype,
            ShapeClass::of_layout(g.m, g.n, row_stride(&g.b), col_stride(&g.b)),
        ),
    };
    let want = Wanted {
        dtype,
        class,
        dims: [batch, g.m, g.n, g.k],
        b_transposed: row_stride(&g.b) == 1 && col_stride(&g.b) != 1,
        quant: g.quant.as_ref().map(|q| (q.source, q.mode)),
    };
    let kernel = cx.tuning.kernel(cx, want, dispatches)?;
    dispatches(cx, g, kernel)
}

/// Whether the quantized family can run a product of `m` rows of x by
/// `n` columns over `k` with weights in `source`, laid out along K (`x @
/// W^T`, `along_k`) or n, in a buffer of `bytes` bytes: the matrix-vector
/// classes only (`m` up to [`QUANT_GEMV_ROWS`]: decode); not Q6_K; affine
/// along n only; K a whole number of blocks (of 32 for affine); for `x @ W`
/// n a whole number of spans of 32; the buffer a whole number of the
/// kernel's `vec4<u32>` loads. What it cannot run, the lowering gives to
/// the dequantize kernel and the float GEMM.
///
/// Why not more rows, nor Q6_K: the family's straight-line code compiles
/// slowly on llvmpipe (2026-12-03, lavapipe, untimed first call of a
/// 64-column product: Q4_0 2.2 s at one row and 17 s at 33 rows with the
/// 16 x 16 tile, Q4_K 1.7 s and 465 s, Q6_K 19 s at one row), which a
/// tiled kernel with a K loop instead of unrolled blocks must fix first.
pub(crate) fn quant_supported(
    source: Source,
    along_k: bool,
    [m, k, n]: [usize; 3],
    bytes: u64,
) -> bool {
    let block = match source {
        Source::Blocks(d) => d.block_size(),
        Source::Affine { .. } => 32,
    };
    let orientation = along_k
        || matches!(source, Source::Affine { .. })
            && n.is_multiple_of(quant::SPAN_COLUMNS as usize);
    orientation
        && m <= QUANT_GEMV_ROWS
        && source != Source::Blocks(DType::Q6K)
        && k > 0
        && k.is_multiple_of(block)
        && bytes.is_multiple_of(16)
}

/// The largest divisor of `steps` up to `most` (at least 1).
fn divisor_up_to(steps: usize, most: u32) -> u32 {
    (1..=most.max(1))
        .rev()
        .find(|&d| steps.is_multiple_of(d as usize))
        .unwrap_or(1)
}

/// `kernel` (a quantized one: another family forced on the device takes
/// the class's default) fitted to the quantized product `g`: the
/// matrix-vector classes' rows of x to the product's; `x @ W`'s columns
/// per thread to one span; the K step to divide K; the lanes to the steps.
fn fit_quant(cx: &Context, g: &Gemm<'_>, kernel: GemmKernel) -> GemmKernel {
    let q = g.quant.as_ref().expect("a quantized product");
    let along_k = q.mode == Mode::QuantK;
    let class = ShapeClass::of_quantized(g.m, along_k);
    let dtype = q.source.tuning_dtype();
    let kernel = match kernel {
        GemmKernel::Quant { .. } => kernel,
        _ => candidates(class, cx.software, dtype, &|k| usable(cx, *k, dtype))[0],
    };
    let GemmKernel::Quant {
        wg,
        mut tm,
        mut nc,
        g: step,
        lanes,
    } = kernel
    else {
        unreachable!("the quantized family's candidates")
    };
    if class.is_gemv() {
        tm = g.m as u32;
    }
    let steps = match (q.source, along_k) {
        (Source::Blocks(d), _) => g.k / d.block_size(),
        (Source::Affine { .. }, true) => g.k / 32,
        (Source::Affine { .. }, false) => g.k,
    };
    if !along_k {
        nc = quant::SPAN_COLUMNS;
        // (Up to 32 columns per thread: `tm * nc` within the limits.)
        tm = tm.min(256 / nc);
    }
    let step = divisor_up_to(steps, step);
    let mut lanes = lanes;
    while lanes > 1 && (steps / step as usize) < lanes as usize {
        lanes /= 2;
    }
    GemmKernel::Quant {
        wg,
        tm,
        nc,
        g: step,
        lanes,
    }
}

/// The dispatches of the quantized family (`g.quant`) with `kernel` (see
/// [`fit_quant`]). x is read through a uniform binding on software
/// adapters where its rows are dense and bindable
/// (`common::operand::uniform_rows`).
///
/// # Errors
/// As [`gemm`].
fn quant_dispatches(cx: &Context, g: &mut Gemm<'_>, kernel: GemmKernel) -> Result<Vec<Dispatch>> {
    let kernel = fit_quant(cx, g, kernel);
    let GemmKernel::Quant { wg, tm, nc, .. } = kernel else {
        unreachable!("fitted to the quantized family")
    };
    let q = g.quant.as_ref().expect("a quantized product");
    let (source, mode) = (q.source, q.mode);
    let batch: usize = g.batch_shape.iter().product();
    let window = (cx.software && batch == 1)
        .then(|| uniform_rows(cx, &g.a, g.m, g.k))
        .flatten()
        .filter(|_| 4 * (g.m * g.k) as u64 <= WINDOW_BYTES);
    let (a_mode, x) = match window {
        Some(_) => (Mode::Scalar, XLoad::Uniform((g.m * g.k / 4) as u32)),
        None if vec_ok(&g.a, g.m, g.k, true) => (Mode::Inner, XLoad::Inner),
        None => (Mode::Scalar, XLoad::Scalar),
    };
    let variant = GemmVariant {
        dtype: DType::F32,
        kernel,
        a_mode,
        b_mode: mode,
        out_vec: g.n.is_multiple_of(4),
        has_bias: false,
        k_tail: false,
        scalar_staging: false,
        looped_stores: false,
        a_quads: match x {
            XLoad::Uniform(quads) => quads,
            _ => 0,
        },
        quant: Some(source),
    };
    let epi_words = match g.epilogue.as_mut() {
        Some(e) => epilogue::params(e)?,
        None => Vec::new(),
    };
    let mut p = gemm_params(g, epi_words)?;
    quant::put_params(&mut p, g, mode)?;
    let mut buffers = vec![g.a.buffer.clone(), g.b.buffer.clone()];
    if let Some(q) = &g.quant
        && let (Some(s), Some(b)) = (&q.scales, &q.biases)
    {
        buffers.push(s.buffer.clone());
        buffers.push(b.buffer.clone());
    }
    let pipeline = pipeline(cx, g, variant, &mut buffers)?;
    let windows = window.map(|offset| Window {
        buffer: g.a.buffer.clone(),
        offset,
        size: 4 * (g.m * g.k) as u64,
    });
    let groups = [
        g.n.div_ceil((wg * nc) as usize),
        g.m.div_ceil(tm as usize),
        batch,
    ];
    grid(cx, &p, &pipeline, &buffers, windows, groups)
}

/// The pipeline of `variant` for `g` (with its fused epilogue, if any),
/// noted for the warm-up list when it has none; `buffers` (A, B and the
/// family's reads so far) get the output or the epilogue's bindings.
///
/// # Errors
/// [`crate::Error::Kernel`] if the specialisation fails to compile.
fn pipeline(
    cx: &Context,
    g: &Gemm<'_>,
    variant: GemmVariant,
    buffers: &mut Vec<wgpu::Buffer>,
) -> Result<Pipeline> {
    let subgroup = cx.subgroup_min_size;
    match &g.epilogue {
        None => {
            buffers.push(g.out.clone());
            let p = cx
                .cache
                .get_quick(QuickKey::Gemm(variant), || variant.spec(subgroup, 0, None))?;
            cx.tuning.note_used(variant);
            Ok(p)
        }
        Some(e) => {
            buffers.extend(e.bound.inputs.iter().map(|&b| b.clone()));
            buffers.extend(e.bound.outputs.iter().map(|&b| b.clone()));
            cx.cache
                .get_quick(QuickKey::GemmEpilogue(variant, e.program.clone()), || {
                    variant.spec(subgroup, 0, Some(&e.program))
                })
        }
    }
}

/// The dispatches of a grid of `groups` workgroups (x, y, z): several
/// where it passes the per-dimension limit, each told its workgroup offset
/// (`group0`, words 32 to 34 of `p`).
///
/// # Errors
/// [`crate::Error::TooLarge`] for an offset past `u32`.
fn grid(
    cx: &Context,
    p: &Params,
    pipeline: &Pipeline,
    buffers: &[wgpu::Buffer],
    windows: Option<Window>,
    groups: [usize; 3],
) -> Result<Vec<Dispatch>> {
    let max = cx.limits.max_compute_workgroups_per_dimension as usize;
    let mut out = Vec::new();
    for z0 in (0..groups[2]).step_by(max) {
        for y0 in (0..groups[1]).step_by(max) {
            for x0 in (0..groups[0]).step_by(max) {
                let origin = [x0, y0, z0];
                let mut params = p.clone();
                params.put(32, origin.map(|o| o as i64))?;
                out.push(Dispatch {
                    windows: windows
                        .iter()
                        .map(|w| Window {
                            buffer: w.buffer.clone(),
                            offset: w.offset,
                            size: w.size,
                        })
                        .collect(),
                    pipeline: pipeline.clone(),
                    params: params.words(),
                    buffers: buffers.to_vec(),
                    workgroups: [0, 1, 2].map(|d| (groups[d] - origin[d]).min(max) as u32),
                });
            }
        }
    }
    Ok(out)
}

/// The dispatches of the uniform family (`GemmKernel::Uniform`), or `None`
/// for a product it cannot run: not f32, a batch, more than one row, K = 0,
/// a fused epilogue, or operands that `uniform::dispatches` cannot place
/// in windows.
///
/// # Errors
/// As [`gemm`].
fn uniform_dispatches(
    cx: &Context,
    g: &Gemm<'_>,
    kernel: GemmKernel,
) -> Result<Option<Vec<Dispatch>>> {
    let batch: usize = g.batch_shape.iter().product();
    // (K = 0 goes to the register tile, which stores `beta * bias`: the
    // family would plan no dispatch at all.)
    if !usable(cx, kernel, g.dtype) || batch != 1 || g.m != 1 || g.k == 0 || g.epilogue.is_some() {
        return Ok(None);
    }
    let windows = uniform::windows(cx);
    let (_, cols) = kernel.block();
    uniform::dispatches(cx, g, cols, &mut |a_quads| {
        let variant = GemmVariant::uniform(kernel, g.bias.is_some(), a_quads);
        let pipeline = cx.cache.get_quick(QuickKey::Gemm(variant), || {
            variant.spec(cx.subgroup_min_size, windows, None)
        })?;
        cx.tuning.note_used(variant);
        Ok(pipeline)
    })
}

/// The dispatches of `kernel` (see [`gemm`]) on the operands of `g` (whose
/// epilogue's program gets its rank and dense flags).
///
/// # Errors
/// As [`gemm`].
pub(crate) fn dispatches(
    cx: &Context,
    g: &mut Gemm<'_>,
    kernel: GemmKernel,
) -> Result<Vec<Dispatch>> {
    let (m, n, k) = (g.m, g.n, g.k);
    let batch: usize = g.batch_shape.iter().product();
    if batch * m * n == 0 {
        return Ok(Vec::new());
    }
    if g.quant.is_some() {
        return quant_dispatches(cx, g, kernel);
    }
    if let GemmKernel::Uniform { .. } = kernel {
        if let Some(d) = uniform_dispatches(cx, g, kernel)? {
            return Ok(d);
        }
        // What the family cannot run takes the register tile of its class.
        let class = ShapeClass::of_layout(m, n, row_stride(&g.b), col_stride(&g.b));
        let tile = fit_gemv_columns(register_tile(class, cx.software), n);
        return dispatches(cx, g, tile);
    }
    // Pair loads: what the device and the kernel offer, then the layout.
    let pair_k = pair_device_ok(cx, kernel, g.dtype) && pair_k_layout_ok(g);
    let a_mode = if pair_k {
        Mode::PairK
    } else if vec_ok(&g.a, m, k, true) {
        Mode::Inner
    } else if kernel.a_outer_ok() && vec_ok(&g.a, m, k, false) {
        Mode::Outer
    } else {
        Mode::Scalar
    };
    let b_mode = if pair_k {
        Mode::PairK
    } else if pair_device_ok(cx, kernel, g.dtype)
        && matches!(kernel, GemmKernel::Register { nv, .. } if nv.is_multiple_of(2))
        && pair_layout_ok(g)
    {
        Mode::Pair
    } else if vec_ok(&g.b, k, n, true) {
        Mode::Inner
    } else if vec_ok(&g.b, k, n, false) {
        Mode::Outer
    } else {
        Mode::Scalar
    };
    let variant = GemmVariant {
        dtype: g.dtype,
        kernel,
        a_mode,
        b_mode,
        out_vec: n.is_multiple_of(4),
        has_bias: g.bias.is_some(),
        k_tail: !k.is_multiple_of(kernel.k_step()),
        scalar_staging: scalar_staging(cx, kernel),
        looped_stores: looped_stores(cx, kernel),
        a_quads: 0,
        quant: None,
    };
    let epi_words = match g.epilogue.as_mut() {
        Some(e) => epilogue::params(e)?,
        None => Vec::new(),
    };
    let p = gemm_params(g, epi_words)?;
    let subgroup = cx.subgroup_min_size;
    // A tile slow to compile that the driver has not compiled yet runs as
    // a stand-in while the background thread compiles it (`first_use`).
    let program = g.epilogue.as_ref().map(|e| e.program.clone());
    let key = match &program {
        None => QuickKey::Gemm(variant),
        Some(p) => QuickKey::GemmEpilogue(variant, p.clone()),
    };
    let spec = move || variant.spec(subgroup, 0, program.as_ref());
    if let Some(quick) = first_use::stand_in(cx, kernel, &key, &spec, &p.clone().words()) {
        // The warm-up list names the kernel the next device will run (this
        // one, compiled by then), not its stand-in.
        if g.epilogue.is_none() {
            cx.tuning.note_used(variant);
        }
        return first_use::standing_in(|| dispatches(cx, g, fit_gemv_columns(quick, n)));
    }
    let mut buffers = vec![g.a.buffer.clone(), g.b.buffer.clone()];
    if let Some(c) = &g.bias {
        buffers.push(c.buffer.clone());
    }
    let pipeline = pipeline(cx, g, variant, &mut buffers)?;
    let (rows, cols) = kernel.block();
    let groups = [n.div_ceil(cols), m.div_ceil(rows), batch];
    grid(cx, &p, &pipeline, &buffers, None, groups)
}

/// Start compiling the tuning file's warm-up list on a thread of its own
/// (`tuning::WARM_UP_MAX`): the kernels `cx`'s device can run, as the
/// GEMM dispatch would ask for them.
///
/// Not on GL: there every wgpu call holds the one EGL context lock, so the
/// thread's compiles would wait on the program's work and the program's
/// on them (and wgpu-hal gives up on that lock after 6 s with a panic,
/// which a cold compile of a large tile on llvmpipe can approach).
pub(crate) fn warm_up(cx: &Context) {
    if cx.backend == wgpu::Backend::Gl {
        return;
    }
    let subgroup = cx.subgroup_min_size;
    let windows = uniform::windows(cx);
    let jobs = cx
        .tuning
        .warm_up_list()
        .into_iter()
        .filter(|v| v.possible_on(cx))
        .map(|v| {
            let build: WarmBuild = Box::new(move || v.spec(subgroup, windows, None));
            (QuickKey::Gemm(v), build)
        })
        .collect();
    cx.cache.warm_up(jobs);
}

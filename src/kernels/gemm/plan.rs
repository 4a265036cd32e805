//! Above the families: a product's dispatches from the tuned choice. The
//! shape class and the kernel ([`gemm`], through the device's tuning), then
//! the variant (each operand's load mode from its strides, the stores, the
//! flags), its pipeline, and the grid, split where it passes the
//! per-dimension limit ([`dispatches`]); and the warm-up of the tuning
//! file's list ([`warm_up`]).

use super::common::epilogue;
use super::common::operand::{
    Gemm, Mode, col_stride, pair_k_layout_ok, pair_layout_ok, row_stride, vec_ok,
};
use super::common::params::gemm_params;
use super::tuning::candidates::{fit_gemv_columns, register_tile};
use super::tuning::class::ShapeClass;
use super::tuning::kernel::{GemmKernel, usable};
use super::tuning::variant::{GemmVariant, looped_stores, pair_device_ok, scalar_staging};
use super::uniform;
use crate::Result;
use crate::kernels::{Context, Dispatch, QuickKey, WarmBuild};

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
    let class = ShapeClass::of_layout(g.m, g.n, row_stride(&g.b), col_stride(&g.b));
    let kernel = cx.tuning.kernel(
        cx,
        g.dtype,
        class,
        [batch, g.m, g.n, g.k],
        row_stride(&g.b) == 1 && col_stride(&g.b) != 1,
        dispatches,
    )?;
    dispatches(cx, g, kernel)
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
    };
    let epi_words = match g.epilogue.as_mut() {
        Some(e) => epilogue::params(e)?,
        None => Vec::new(),
    };
    let p = gemm_params(g, epi_words)?;
    let subgroup = cx.subgroup_min_size;
    let mut buffers = vec![g.a.buffer.clone(), g.b.buffer.clone()];
    if let Some(c) = &g.bias {
        buffers.push(c.buffer.clone());
    }
    let pipeline = match &g.epilogue {
        None => {
            buffers.push(g.out.clone());
            let p = cx
                .cache
                .get_quick(QuickKey::Gemm(variant), || variant.spec(subgroup, 0, None))?;
            cx.tuning.note_used(variant);
            p
        }
        Some(e) => {
            buffers.extend(e.bound.inputs.iter().map(|&b| b.clone()));
            buffers.extend(e.bound.outputs.iter().map(|&b| b.clone()));
            cx.cache
                .get_quick(QuickKey::GemmEpilogue(variant, e.program.clone()), || {
                    variant.spec(subgroup, 0, Some(&e.program))
                })?
        }
    };
    // A grid past the per-dimension limit runs as several dispatches, each
    // told its workgroup offset (`group0`).
    let max = cx.limits.max_compute_workgroups_per_dimension as usize;
    let (rows, cols) = kernel.block();
    let groups = [n.div_ceil(cols), m.div_ceil(rows), batch];
    let mut out = Vec::new();
    for z0 in (0..groups[2]).step_by(max) {
        for y0 in (0..groups[1]).step_by(max) {
            for x0 in (0..groups[0]).step_by(max) {
                let origin = [x0, y0, z0];
                let mut params = p.clone();
                params.put(32, origin.map(|o| o as i64))?;
                out.push(Dispatch {
                    windows: Vec::new(),
                    pipeline: pipeline.clone(),
                    params: params.words(),
                    buffers: buffers.clone(),
                    workgroups: [0, 1, 2].map(|d| (groups[d] - origin[d]).min(max) as u32),
                });
            }
        }
    }
    Ok(out)
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

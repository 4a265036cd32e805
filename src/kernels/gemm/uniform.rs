//! The uniform-window matrix-vector family (`GemmKernel::Uniform`): on
//! software adapters, `x @ B` for one row of A, with B read through
//! uniform-buffer bindings of 64 KiB ("windows") that each hold whole lines
//! of B, in as many dispatches as B needs. It has two kernels, chosen by
//! B's layout:
//! * the column kernel (`wgsl/gemm_uniform.wgsl`) for B unit-stride along
//!   n (row-major `x @ w`): windows of B's rows; a thread owns column
//!   quads and walks K, and the dispatches after the first add to the
//!   output;
//! * the row kernel (`wgsl/gemm_uniform_rows.wgsl`) for B unit-stride along
//!   K (`x @ w.T` of a row-major `w`, a Linear layer's weight): windows of
//!   B's columns (W's rows), A's row in one more uniform binding, eight
//!   lanes per column summing across K, and each dispatch storing columns
//!   of its own.
//!
//! Why: Mesa's llvmpipe (lavapipe, and llvmpipe behind GL) compiles every
//! storage-buffer load to a loop over the SIMD lanes, with a bounds check
//! and a branch per lane (Mesa 22.3 `lp_bld_nir_soa.c`, `emit_load_mem`),
//! while a uniform-buffer load with per-lane offsets is one gather
//! (`emit_load_ubo`). A matrix-vector product does one multiply-add per
//! loaded float, so the load decides; see docs/PERFORMANCE.md for the
//! measurements.
//!
//! This module writes the kernels' generated parts ([`family`]), places
//! the windows ([`plan`], [`a_window`]) and builds the dispatches
//! ([`dispatches`]) from the pipeline the planner gives it.

use super::common::indent;
use super::common::operand::{Gemm, col_stride, row_stride};
use super::common::params::gemm_params;
use super::common::prelude::{Family, PRELUDE, family_kernel};
use crate::Result;
use crate::kernels::{Context, Dispatch, Kernel, Operand, Pipeline, WINDOW_BYTES, Window};

/// The uniform-window matrix-vector GEMM's column kernel
/// (`wgsl/gemm_uniform.wgsl`).
pub(crate) static GEMM_UNIFORM: Kernel = family_kernel(
    "gemm_uniform",
    PRELUDE,
    include_str!("../../../wgsl/gemm_uniform.wgsl"),
);

/// The uniform-window matrix-vector GEMM's kernel for B read along K
/// (`wgsl/gemm_uniform_rows.wgsl`).
pub(crate) static GEMM_UNIFORM_ROWS: Kernel = family_kernel(
    "gemm_uniform_rows",
    PRELUDE,
    include_str!("../../../wgsl/gemm_uniform_rows.wgsl"),
);

/// The row kernel's lanes per column: llvmpipe's SIMD width on x86 (eight
/// f32 lanes of AVX2), so one SIMD group reads one column.
pub(crate) const ROW_LANES: u32 = 8;

/// The row kernel's columns per workgroup. Two, because a window holds as
/// few as 4 columns (K = 4096): lavapipe, 1 x 4096 x 4096, same run
/// (2026-12-02): 2 columns 18.7 ms, 1 column 18.3, 4 columns 24.4, against
/// 1.079 / 1.156 ms (4 / 2) at 1 x 384 x 1152; 16 lanes per column were
/// slower at every shape but 4096 x 4096.
pub(crate) const ROW_GROUP: u32 = 2;

/// The most windows one dispatch binds: WebGPU's default of 12 uniform
/// buffers per stage is the floor of what adapters offer, and lavapipe
/// offers 15 (one of them the parameter block).
pub(crate) const MAX_WINDOWS: u32 = 14;

/// The windows a dispatch binds on `cx`'s device: `MAX_WINDOWS`, fewer
/// where the adapter's `max_uniform_buffers_per_shader_stage` (less the
/// parameter block) is lower; 0 where it cannot bind one 64 KiB window.
pub(crate) fn windows(cx: &Context) -> u32 {
    if cx.limits.max_uniform_buffer_binding_size < WINDOW_BYTES {
        return 0;
    }
    cx.limits
        .max_uniform_buffers_per_shader_stage
        .saturating_sub(1)
        .min(MAX_WINDOWS)
}

/// Parameter words after the GEMM's own: `first` (a vec4; the column
/// kernel's first-dispatch flag) and one vec4 per window of B.
fn extra_words(windows: u32) -> usize {
    4 + 4 * windows as usize
}

/// `EPILOGUE_PARAMS` of the family: the parameter fields after the
/// GEMM's own, [`extra_words`] of them.
fn params_field(windows: u32) -> String {
    format!("    first: vec4<u32>,\n    win: array<vec4<u32>, {windows}>,")
}

/// The family's kernel for `windows` windows per dispatch on the device
/// ([`windows`]) and the storage bindings before them (up to
/// `first_binding`): with `a_quads` 0 the column kernel of `wg_x` threads
/// of `nv` column quads each; otherwise the row kernel (one geometry),
/// with A's row of `a_quads` quads in one of the windows.
pub(crate) fn family(wg_x: u32, nv: u32, windows: u32, a_quads: u32, first_binding: u32) -> Family {
    if a_quads > 0 {
        // The row kernel: one of the device's windows is A's.
        let b_windows = windows - 1;
        let mut bound = vec![WINDOW_BYTES; b_windows as usize];
        bound.push(16 * a_quads as u64);
        Family {
            kernel: &GEMM_UNIFORM_ROWS,
            subs: row_subs(b_windows, a_quads, first_binding),
            params: Some((params_field(b_windows), extra_words(b_windows))),
            windows: bound,
        }
    } else {
        Family {
            kernel: &GEMM_UNIFORM,
            subs: subs(wg_x, nv, windows, first_binding),
            params: Some((params_field(windows), extra_words(windows))),
            windows: vec![WINDOW_BYTES; windows as usize],
        }
    }
}

/// The column kernel's substitutions for `windows` windows (bindings from
/// `first_binding` on): the window declarations, the generated
/// declarations, the per-window loops and the stores.
fn subs(wg_x: u32, nv: u32, windows: u32, first_binding: u32) -> Vec<(&'static str, String)> {
    let quads = WINDOW_BYTES / 16;
    let bindings = (0..windows)
        .map(|j| {
            format!(
                "@group(0) @binding({}) var<uniform> w{j}: array<vec4<f32>, {quads}>;",
                first_binding + j
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut decls = Vec::new();
    for v in 0..nv {
        decls.push(format!(
            "let quad_{v} = min(q0 + {}u, last_quad);",
            v * wg_x
        ));
        decls.push(format!("var acc_{v} = vec4<f32>(0.0);"));
    }
    let mut loops = Vec::new();
    for j in 0..windows {
        loops.push(format!(
            "for (var k = p.win[{j}].x; k < p.win[{j}].y; k++) {{"
        ));
        loops.push("    let x = vec4<f32>(a1(p.a_off + k * p.a_cs));".into());
        loops.push(format!(
            "    let r = row_quad0 + k * row_quads - p.win[{j}].z;"
        ));
        for v in 0..nv {
            loops.push(format!(
                "    acc_{v} = fma(x, w{j}[r + quad_{v}], acc_{v});"
            ));
        }
        loops.push("}".into());
    }
    let stores = (0..nv)
        .map(|v| format!("store_or_add(q0 + {}u, acc_{v});", v * wg_x))
        .collect();
    vec![
        ("WG_X", wg_x.to_string()),
        ("NV", nv.to_string()),
        ("WINDOW_BINDINGS", bindings),
        ("DECLS", indent(decls, 1)),
        ("WINDOWS", indent(loops, 1)),
        ("STORES", indent(stores, 1)),
    ]
}

/// Where one window of B lies: the byte offset of its 64 KiB in B's buffer
/// and its parameter words (first line, end line, the quad of B's buffer
/// where the window starts, 0).
pub(crate) struct Placement {
    pub offset: u64,
    pub words: [u32; 4],
}

/// The windows of a `[1, k] x [k, n]` product with B `b` on `cx`'s device,
/// grouped `windows` to a dispatch (the last dispatch's unused windows
/// repeat its last one with no lines), or `None` when the family cannot
/// read this B. With `along_k` false a line is a row of B (`n` elements
/// along n, the column kernel's), with `along_k` true a column (`k`
/// elements along K, the row kernel's).
///
/// `None` when B's buffer lacks `UNIFORM` usage or is smaller than a
/// window, its size or the device's uniform offset alignment is not a
/// multiple of 16 bytes, B is not unit-stride along its lines, its offset
/// or line stride is not a multiple of four elements (nor 0, for the row
/// kernel, unless B has one column), or a line (padded to the alignment)
/// does not fit in one window.
pub(crate) fn plan(
    cx: &Context,
    b: &Operand<'_>,
    k: usize,
    n: usize,
    along_k: bool,
    windows: u32,
) -> Option<Vec<Vec<Placement>>> {
    let size = b.buffer.size();
    let align = (cx.limits.min_uniform_buffer_offset_alignment as u64).max(16);
    // Strides over [batch0..batch3, rows, cols]: the step between lines
    // and the step along one.
    let (lines, len, stride, step) = if along_k {
        (n, k, b.strides[5], b.strides[4])
    } else {
        (k, n, b.strides[4], b.strides[5])
    };
    let stride = if lines == 1 { 0 } else { stride };
    if windows == 0
        || !b.buffer.usage().contains(wgpu::BufferUsages::UNIFORM)
        || size < WINDOW_BYTES
        || !size.is_multiple_of(align)
        || !align.is_multiple_of(16)
        || (len > 1 && step != 1)
        || !len.is_multiple_of(4)
        || stride < 0
        // A broadcast column of B (stride 0) would put all of N in one
        // window: the row kernel's workgroups are the columns per window.
        || (along_k && stride == 0 && lines > 1)
        || stride % 4 != 0
        || !b.offset.is_multiple_of(4)
        || 4 * len as u64 + align > WINDOW_BYTES
    {
        return None;
    }
    let (stride, off) = (stride as u64, b.offset as u64);
    let (lines, len) = (lines as u64, len as u64);
    let mut all = Vec::new();
    let mut line = 0u64;
    while line < lines {
        let mut group: Vec<Placement> = Vec::with_capacity(windows as usize);
        for _ in 0..windows {
            if line == lines {
                let last = group.last().expect("a window per dispatch");
                let words = [lines as u32, lines as u32, last.words[2], 0];
                group.push(Placement {
                    offset: last.offset,
                    words,
                });
                continue;
            }
            let start = 4 * (off + line * stride);
            let mut offset = start / align * align;
            if offset + WINDOW_BYTES > size {
                // The last window of the buffer ends at its end (then
                // `offset` is still at most `start`, as the product's lines
                // lie inside the buffer).
                offset = size - WINDOW_BYTES;
            }
            // The lines whose `len` elements end inside the window: line l
            // ends at byte 4 (off + l stride + len).
            let end_elem = (offset + WINDOW_BYTES) / 4;
            let last = (end_elem - off - len)
                .checked_div(stride)
                .map_or(lines - 1, |l| l.min(lines - 1));
            let end = last + 1;
            debug_assert!(end > line && offset <= start);
            group.push(Placement {
                offset,
                words: [line as u32, end as u32, (offset / 16) as u32, 0],
            });
            line = end;
        }
        all.push(group);
    }
    Some(all)
}

/// The row kernel's binding of A's row on `cx`'s device: the byte offset
/// of its `4 k` bytes in A's buffer, or `None` when A's buffer lacks
/// `UNIFORM` usage, A is not unit-stride along K, or its first element's
/// byte offset is not a multiple of the device's uniform offset alignment
/// (then the register tile runs the product). `k` is a multiple of four
/// that [`plan`] accepted, so `4 k` bytes fit in one window.
pub(crate) fn a_window(cx: &Context, a: &Operand<'_>, k: usize) -> Option<u64> {
    // As `plan`'s: at least the 16 bytes of a quad.
    let align = (cx.limits.min_uniform_buffer_offset_alignment as u64).max(16);
    let offset = 4 * a.offset as u64;
    let bytes = 4 * k as u64;
    (a.buffer.usage().contains(wgpu::BufferUsages::UNIFORM)
        && (k == 1 || a.strides[5] == 1)
        && offset.is_multiple_of(align)
        && offset + bytes <= a.buffer.size()
        && bytes <= cx.limits.max_uniform_buffer_binding_size)
        .then_some(offset)
}

/// The row kernel's substitutions for `windows` windows of B and A's row of
/// `a_quads` quads (bindings from `first_binding` on, A's last).
fn row_subs(windows: u32, a_quads: u32, first_binding: u32) -> Vec<(&'static str, String)> {
    let quads = WINDOW_BYTES / 16;
    let mut bindings: Vec<String> = (0..windows)
        .map(|j| {
            format!(
                "@group(0) @binding({}) var<uniform> w{j}: array<vec4<f32>, {quads}>;",
                first_binding + j
            )
        })
        .collect();
    bindings.push(format!(
        "@group(0) @binding({}) var<uniform> x: array<vec4<f32>, {a_quads}>;",
        first_binding + windows
    ));
    let mut loops = Vec::new();
    for j in 0..windows {
        loops.extend([
            "{".to_string(),
            format!("    let c = min(p.win[{j}].x + t0 + lid.y, p.win[{j}].y - 1u);"),
            format!("    let r = col_quad0 + c * col_quads - p.win[{j}].z;"),
            "    var acc = vec4<f32>(0.0);".into(),
            "    for (var q = lid.x; q < XQ; q += LANES) {".into(),
            format!("        acc = fma(x[q], w{j}[r + q], acc);"),
            "    }".into(),
            format!("    part[({j}u * ROWS + lid.y) * LANES + lid.x] = acc;"),
            "}".into(),
        ]);
    }
    vec![
        ("LANES", ROW_LANES.to_string()),
        ("ROWS", ROW_GROUP.to_string()),
        ("WINDOW_COUNT", windows.to_string()),
        ("XQ", a_quads.to_string()),
        ("PART", (windows * ROW_GROUP * ROW_LANES).to_string()),
        ("WINDOW_BINDINGS", bindings.join("\n")),
        ("WINDOWS", indent(loops, 1)),
    ]
}

/// The dispatches of the family for `g` (one f32 row of A, no batch, K >
/// 0, no fused epilogue: the planner's checks), `cols` output columns per
/// workgroup of the column kernel, or `None` for operands that [`plan`]
/// and [`a_window`] cannot place in windows. B unit-stride along K and not
/// along n takes the row kernel (every dispatch stores columns of its
/// own); any other B the column kernel (one dispatch per group of windows,
/// the first storing and the later ones adding). `pipeline(a_quads)` gives
/// the kernel's pipeline (`a_quads` as for [`family`]).
///
/// # Errors
/// [`crate::Error::TooLarge`] for sizes, strides or offsets past `u32`;
/// what `pipeline` returns.
pub(crate) fn dispatches(
    cx: &Context,
    g: &Gemm<'_>,
    cols: usize,
    pipeline: &mut dyn FnMut(u32) -> Result<Pipeline>,
) -> Result<Option<Vec<Dispatch>>> {
    let windows = windows(cx);
    // The tuning's test of a transposed B (`ShapeClass` proxies).
    let along_k = row_stride(&g.b) == 1 && col_stride(&g.b) != 1;
    let b_windows = if along_k {
        windows.saturating_sub(1)
    } else {
        windows
    };
    let Some(plan) = plan(cx, &g.b, g.k, g.n, along_k, b_windows) else {
        return Ok(None);
    };
    let a_window = if along_k {
        match a_window(cx, &g.a, g.k) {
            Some(offset) => Some(Window {
                buffer: g.a.buffer.clone(),
                offset,
                size: 4 * g.k as u64,
            }),
            None => return Ok(None),
        }
    } else {
        None
    };
    let a_quads = if along_k { (g.k / 4) as u32 } else { 0 };
    let pipeline = pipeline(a_quads)?;
    let mut buffers = vec![g.a.buffer.clone(), g.b.buffer.clone()];
    if let Some(c) = &g.bias {
        buffers.push(c.buffer.clone());
    }
    buffers.push(g.out.clone());
    let mut out = Vec::with_capacity(plan.len());
    for (i, group) in plan.iter().enumerate() {
        // The column kernel's dispatches cover every column; the row
        // kernel's the most columns a window of this one holds.
        let groups = if along_k {
            let most = group.iter().map(|w| w.words[1] - w.words[0]).max();
            most.unwrap_or(0).div_ceil(ROW_GROUP)
        } else {
            g.n.div_ceil(cols) as u32
        };
        let mut extra = vec![(i == 0) as u32, 0, 0, 0];
        extra.extend(group.iter().flat_map(|w| w.words));
        let mut bound: Vec<Window> = group
            .iter()
            .map(|w| Window {
                buffer: g.b.buffer.clone(),
                offset: w.offset,
                size: WINDOW_BYTES,
            })
            .collect();
        bound.extend(a_window.iter().map(|w| Window {
            buffer: w.buffer.clone(),
            offset: w.offset,
            size: w.size,
        }));
        out.push(Dispatch {
            pipeline: pipeline.clone(),
            params: gemm_params(g, extra)?.words(),
            buffers: buffers.clone(),
            windows: bound,
            workgroups: [groups, 1, 1],
        });
    }
    Ok(Some(out))
}

//! The uniform-window matrix-vector family (`wgsl/gemm_uniform.wgsl`,
//! `GemmKernel::Uniform`): on software adapters, `x @ B` for one row of A,
//! with B read through uniform-buffer bindings of 64 KiB ("windows") that
//! each hold whole rows of B, and as many dispatches as K needs.
//!
//! Why: Mesa's llvmpipe (lavapipe, and llvmpipe behind GL) compiles every
//! storage-buffer load to a loop over the SIMD lanes, with a bounds check
//! and a branch per lane (Mesa 22.3 `lp_bld_nir_soa.c`, `emit_load_mem`),
//! while a uniform-buffer load with per-lane offsets is one gather
//! (`emit_load_ubo`). A matrix-vector product does one multiply-add per
//! loaded float, so the load decides; see docs/PERFORMANCE.md for the
//! measurements.
//!
//! This module writes the kernel's generated parts ([`subs`]) and places
//! the windows ([`plan`]); `matmul::dispatches` builds the dispatches.

use super::matmul::{GemmKernel, indent};
use super::{Context, Operand, WINDOW_BYTES};

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

/// Parameter words after the GEMM's own: `first` (a vec4) and one vec4
/// per window.
pub(crate) fn extra_words(windows: u32) -> usize {
    4 + 4 * windows as usize
}

/// `EPILOGUE_PARAMS` of the family: the parameter fields after the
/// GEMM's own, [`extra_words`] of them.
pub(crate) fn params_field(windows: u32) -> String {
    format!("    first: vec4<u32>,\n    win: array<vec4<u32>, {windows}>,")
}

/// The family's substitutions for `windows` windows (bindings from
/// `first_binding` on): the window declarations, the generated
/// declarations, the per-window loops and the stores.
pub(crate) fn subs(
    kernel: GemmKernel,
    windows: u32,
    first_binding: u32,
) -> Vec<(&'static str, String)> {
    let GemmKernel::Uniform { wg_x, nv } = kernel else {
        unreachable!("gemm_uniform::subs of {kernel}")
    };
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

/// Where one dispatch's windows lie: per window the byte offset of its
/// 64 KiB in B's buffer and its parameter words (first row, end row, the
/// quad of B's buffer where the window starts, 0).
pub(crate) struct Window {
    pub offset: u64,
    pub words: [u32; 4],
}

/// The windows of a `[1, k] x [k, n]` product with B `b` on `cx`'s device,
/// grouped `windows` to a dispatch (the last dispatch's unused windows
/// repeat its last one with no rows), or `None` when the family cannot
/// read this B: its buffer lacks `UNIFORM` usage or is smaller than a
/// window, its size or the device's uniform offset alignment is not a
/// multiple of 16 bytes, B is not unit-stride along n with its offset and
/// row stride multiples of four elements, or a row (`n` floats, padded to
/// the alignment) does not fit in one window.
pub(crate) fn plan(
    cx: &Context,
    b: &Operand<'_>,
    k: usize,
    n: usize,
    windows: u32,
) -> Option<Vec<Vec<Window>>> {
    let size = b.buffer.size();
    let align = (cx.limits.min_uniform_buffer_offset_alignment as u64).max(16);
    // Strides over [batch0..batch3, rows, cols].
    let (row_stride, col_stride) = (b.strides[4], b.strides[5]);
    let rs = if k == 1 { 0 } else { row_stride };
    if windows == 0
        || !b.buffer.usage().contains(wgpu::BufferUsages::UNIFORM)
        || size < WINDOW_BYTES
        || !size.is_multiple_of(align)
        || !align.is_multiple_of(16)
        || (n > 1 && col_stride != 1)
        || !n.is_multiple_of(4)
        || rs < 0
        || rs % 4 != 0
        || !b.offset.is_multiple_of(4)
        || 4 * n as u64 + align > WINDOW_BYTES
    {
        return None;
    }
    let (rs, off) = (rs as u64, b.offset as u64);
    let mut all = Vec::new();
    let mut row = 0u64;
    let k = k as u64;
    while row < k {
        let mut group: Vec<Window> = Vec::with_capacity(windows as usize);
        for _ in 0..windows {
            if row == k {
                let last = group.last().expect("a window per dispatch");
                let words = [k as u32, k as u32, last.words[2], 0];
                group.push(Window {
                    offset: last.offset,
                    words,
                });
                continue;
            }
            let start = 4 * (off + row * rs);
            let mut offset = start / align * align;
            if offset + WINDOW_BYTES > size {
                // The last window of the buffer ends at its end (then
                // `offset` is still at most `start`, as the product's rows
                // lie inside the buffer).
                offset = size - WINDOW_BYTES;
            }
            // The rows whose n floats end inside the window: row r ends at
            // byte 4 (off + r rs + n).
            let end_elem = (offset + WINDOW_BYTES) / 4;
            let last = (end_elem - off - n as u64)
                .checked_div(rs)
                .map_or(k - 1, |r| r.min(k - 1));
            let end = last + 1;
            debug_assert!(end > row && offset <= start);
            group.push(Window {
                offset,
                words: [row as u32, end as u32, (offset / 16) as u32, 0],
            });
            row = end;
        }
        all.push(group);
    }
    Some(all)
}

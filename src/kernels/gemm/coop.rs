//! The cooperative-matrix GEMM family (`wgsl/gemm_coop.wgsl`): tensor cores
//! (Vulkan's `VK_KHR_cooperative_matrix`), through wgpu's
//! `EXPERIMENTAL_COOPERATIVE_MATRIX`, requested only with
//! `WGARRAY_COOPERATIVE_MATRIX=1` (see `device.rs`). Not on Metal: wgpu's
//! Metal back end reports subgroup sizes 4 to 64, and the family needs a
//! fixed size (`GemmKernel`'s `usable`). A workgroup is four
//! subgroups in a 2 x 2 grid; each multiplies `frags x frags` fragments of
//! `size x size` out of the same double-buffered workgroup-memory staging
//! as the workgroup-memory family (`common::staging`, converted to the
//! fragment type: f16 for f16 operands, f32 otherwise), with f32
//! accumulators. Each accumulator goes through a subgroup's slot of
//! workgroup memory to `store_quad`, the epilogue every family shares.

use super::common::operand::Mode;
use super::common::prelude::{Family, GEMM_COMMON, family_kernel, numbers};
use super::common::staging::{Staging, Tiled, staging_decls, tiled_subs};
use crate::kernels::Kernel;

/// The cooperative-matrix GEMM (`wgsl/gemm_coop.wgsl`).
/// The prelude of the family's kernel: the extension, then [`GEMM_COMMON`].
const COOP_PRELUDE: &[&str] = &["enable wgpu_cooperative_matrix;", GEMM_COMMON];

/// The cooperative-matrix GEMM (`wgsl/gemm_coop.wgsl`).
pub(crate) static GEMM_COOP: Kernel = family_kernel(
    "gemm_coop",
    COOP_PRELUDE,
    include_str!("../../../wgsl/gemm_coop.wgsl"),
);

/// The K step of the family (one or two fragments).
pub(crate) const COOP_BK: u32 = 16;

/// The family's kernel (`wgsl/gemm_coop.wgsl`) for `frags x frags`
/// fragments of `size x size` (f16 where `half`, else f32) per subgroup,
/// on an adapter whose subgroups have `subgroup` invocations.
pub(crate) fn family(
    size: u32,
    half: bool,
    frags: u32,
    subgroup: u32,
    a_mode: Mode,
    b_mode: Mode,
) -> Family {
    let (bm, bk) = (2 * frags * size, COOP_BK);
    let threads = 4 * subgroup;
    let staging = Staging {
        bm,
        bn: bm,
        bk,
        threads,
    };
    let ty = if half { "f16" } else { "f32" };
    let mat = |role: &str| format!("coop_mat{size}x{size}<{ty}, {role}>");
    let acc = format!("coop_mat{size}x{size}<f32, C>");
    let mut decls = Vec::new();
    for i in 0..frags {
        for j in 0..frags {
            decls.push(format!("var c_{i}_{j} = coopLoad<{acc}>(&sc[0], {size}u);"));
        }
    }
    // One step: BK / size fragments of k; A column-major (element (r, k) at
    // k BM + r), B row-major (element (k, c) at k BN + c).
    let mut substeps = Vec::new();
    for kf in 0..bk / size {
        let mut c = Vec::new();
        for i in 0..frags {
            c.push(format!(
                "let a{i} = coopLoad<{}>(&sa[(cur + {}u) * {bm}u + wm + {}u], {bm}u);",
                mat("A"),
                kf * size,
                i * size
            ));
        }
        for j in 0..frags {
            c.push(format!(
                "let b{j} = coopLoadT<{}>(&sb[(cur + {}u) * {bm}u + wn + {}u], {bm}u);",
                mat("B"),
                kf * size,
                j * size
            ));
        }
        for i in 0..frags {
            for j in 0..frags {
                c.push(format!(
                    "c_{i}_{j} = coopMultiplyAdd(a{i}, b{j}, c_{i}_{j});"
                ));
            }
        }
        substeps.push(c);
    }
    let mut epilogue = Vec::new();
    for i in 0..frags {
        for j in 0..frags {
            epilogue.push(format!(
                "store_fragment(c_{i}_{j}, tile_row0 + wm + {}u, tile_q0 + (wn + {}u) / 4u, slot, lane, lanes, bases);",
                i * size,
                j * size
            ));
        }
    }
    let tiled = Tiled {
        decls,
        substeps,
        stores: epilogue,
    };
    let mut subs = numbers([
        ("SIZE", size),
        ("FRAGS", frags),
        ("THREADS", threads),
        ("BM", bm),
        ("BK", bk),
    ]);
    subs.extend([
        ("CT", ty.to_string()),
        ("ACC", acc),
        (
            "STAGING",
            staging_decls(2 * bm * bk, 2 * bm * bk, Some("CT")),
        ),
    ]);
    subs.extend(tiled_subs(staging, a_mode, b_mode, tiled));
    Family::new(&GEMM_COOP, subs)
}

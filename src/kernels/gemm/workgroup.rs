//! The workgroup-memory GEMM family (`wgsl/gemm_shared.wgsl`), the one
//! GPUs take: each step a workgroup stages a block of A and a block of B
//! through workgroup memory (vec4 loads where the layout allows them,
//! double buffered, one barrier per step), then every thread multiplies
//! its register block out of it. The staging code is shared with the
//! cooperative-matrix family (`common::staging`).
//!
//! Like the register family, the per-thread code is generated straight-line
//! (named variables, literal indices) for the tile and the operand load
//! modes; see `common::block` for why.

use super::common::operand::Mode;
use super::common::prelude::{Family, PRELUDE, family_kernel, numbers};
use super::common::staging::{Staging, Tiled, staging_decls, tiled_subs};
use super::common::store::store_quads;
use crate::kernels::Kernel;

/// The workgroup-memory GEMM (`wgsl/gemm_shared.wgsl`).
pub(crate) static GEMM_SHARED: Kernel = family_kernel(
    "gemm_shared",
    PRELUDE,
    include_str!("../../../wgsl/gemm_shared.wgsl"),
);

/// A workgroup-memory tile (`GemmKernel::Shared`): `wg_x * wg_y` threads,
/// each `tm` rows by `4 nv` columns, K steps of `bk`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tile {
    pub wg_x: u32,
    pub wg_y: u32,
    pub tm: u32,
    pub nv: u32,
    pub bk: u32,
}

/// The family's kernel (`wgsl/gemm_shared.wgsl`) for `tile`.
/// `looped`: the stores as one loop (`common::store::store_quads`);
/// `scalar_staging`: f32 staging arrays (`common::staging::staging_decls`).
pub(crate) fn family(
    tile: Tile,
    a_mode: Mode,
    b_mode: Mode,
    looped: bool,
    scalar_staging: bool,
) -> Family {
    let Tile {
        wg_x,
        wg_y,
        tm,
        nv,
        bk,
    } = tile;
    let (bm, bn) = (wg_y * tm, wg_x * 4 * nv);
    let staging = Staging {
        bm,
        bn,
        bk,
        threads: wg_x * wg_y,
    };
    // Thread (tx, ty) owns rows (g WG_Y + ty) 4 + i and column quads
    // v WG_X + tx of the block: vec4 reads of both staged blocks, and
    // neighbouring threads store neighbouring quads.
    let mut decls = Vec::new();
    for r in 0..tm {
        for v in 0..nv {
            decls.push(format!("var acc_{r}_{v} = vec4<f32>(0.0);"));
        }
    }
    // Alike in shape to the cooperative family's steps (`coop.rs`), but
    // left apart: vec4 multiply-adds per thread there are fragment loads
    // and `coopMultiplyAdd` per subgroup.
    let mut substeps = Vec::new();
    for kk in 0..bk {
        let mut c = vec![format!("let ka = (cur + {kk}u) * {}u + ty;", bm / 4)];
        for g in 0..tm / 4 {
            c.push(format!("let a{g} = sa4(ka + {}u);", g * wg_y));
        }
        c.push(format!("let kb = (cur + {kk}u) * {}u + tx;", bn / 4));
        for v in 0..nv {
            c.push(format!("let b{v} = sb4(kb + {}u);", v * wg_x));
        }
        for r in 0..tm {
            let (g, i) = (r / 4, r % 4);
            for v in 0..nv {
                c.push(format!(
                    "acc_{r}_{v} = fma(vec4<f32>(a{g}[{i}]), b{v}, acc_{r}_{v});"
                ));
            }
        }
        substeps.push(c);
    }
    let mut calls = Vec::new();
    for r in 0..tm {
        let (g, i) = (r / 4, r % 4);
        for v in 0..nv {
            calls.push([
                format!("tile_row0 + ({}u + ty) * 4u + {i}u", g * wg_y),
                format!("tile_q0 + {}u + tx", v * wg_x),
                format!("acc_{r}_{v}"),
            ]);
        }
    }
    let tiled = Tiled {
        decls,
        substeps,
        stores: store_quads(&calls, "bases.c", "bases.out", looped),
    };
    let mut subs = numbers([
        ("WG_X", wg_x),
        ("WG_Y", wg_y),
        ("BM", bm),
        ("BN", bn),
        ("BK", bk),
    ]);
    let scalar = scalar_staging.then_some("f32");
    subs.push(("STAGING", staging_decls(2 * bm * bk, 2 * bn * bk, scalar)));
    subs.extend(tiled_subs(staging, a_mode, b_mode, tiled));
    Family::new(&GEMM_SHARED, subs)
}

//! The register-blocked GEMM family (`wgsl/gemm.wgsl`), the one software
//! adapters take: no workgroup memory, each thread `tm` rows by `4 nv`
//! columns of accumulators, operands read straight from storage. Its
//! per-thread code is the straight-line register block of
//! `common::block`, for the tile and the operand load modes.

use super::common::block::{Tile, gemm_body};
use super::common::operand::Mode;
use super::common::prelude::{Family, PRELUDE, family_kernel, numbers};
use crate::kernels::Kernel;

/// The register-blocked GEMM (`wgsl/gemm.wgsl`; bindings A, B, the bias if any,
/// out).
pub(crate) static GEMM: Kernel =
    family_kernel("gemm", PRELUDE, include_str!("../../../wgsl/gemm.wgsl"));

/// The family's kernel for `tile` and the load modes; `looped`: the stores
/// as one loop (`common::store::store_quads`).
pub(crate) fn family(tile: Tile, a_mode: Mode, b_mode: Mode, looped: bool) -> Family {
    let Tile { wg_x, wg_y, tm, nv } = tile;
    // Eight k per step where both operands are read eight k per load.
    let k_step = if a_mode == Mode::PairK { 8 } else { 4 };
    let mut subs = numbers([
        ("WG_X", wg_x),
        ("WG_Y", wg_y),
        ("TM", tm),
        ("NV", nv),
        ("K_STEP", k_step),
    ]);
    subs.extend(gemm_body(tile, a_mode, b_mode, looped).subs());
    Family::new(&GEMM, subs)
}

//! The register-blocked GEMM family (`wgsl/gemm.wgsl`), the one software
//! adapters take: no workgroup memory, each thread `tm` rows by `4 nv`
//! columns of accumulators, operands read straight from storage. Its
//! per-thread code is the straight-line register block of
//! `common::block`, for the tile and the operand load modes.

use super::common::block::{Tile, gemm_body};
use super::common::operand::Mode;
use super::common::prelude::{Family, GEMM_COMMON};
use crate::kernels::Kernel;

/// The register-blocked GEMM (`wgsl/gemm.wgsl`; bindings A, B, the bias if any,
/// out).
pub(crate) static GEMM: Kernel = Kernel {
    name: "gemm",
    prelude: &[GEMM_COMMON],
    source: include_str!("../../../wgsl/gemm.wgsl"),
    reads: 2,
    writes: 1,
};

/// The family's kernel for `tile` and the load modes; `looped`: the stores
/// as one loop (`common::store::store_quads`).
pub(crate) fn family(tile: Tile, a_mode: Mode, b_mode: Mode, looped: bool) -> Family {
    let body = gemm_body(tile, a_mode, b_mode, looped);
    let Tile { wg_x, wg_y, tm, nv } = tile;
    Family {
        kernel: &GEMM,
        subs: vec![
            ("WG_X", wg_x.to_string()),
            ("WG_Y", wg_y.to_string()),
            ("TM", tm.to_string()),
            ("NV", nv.to_string()),
            (
                "K_STEP",
                if a_mode == Mode::PairK { "8" } else { "4" }.into(),
            ),
            ("DECLS", body.decls),
            ("CHUNK", body.chunk),
            ("EPILOGUE", body.epilogue),
        ],
        params: None,
        windows: Vec::new(),
    }
}

//! The split-K matrix-vector family (`wgsl/gemm_splitk.wgsl`): for small
//! `m` and long K, `ks` threads share the K of each column quad, each
//! summing every `ks`-th chunk of four k, and their sums are added with
//! subgroup shuffles (where the adapter has `SUBGROUP`) or through
//! workgroup memory. One chunk's loads and multiply-adds are the register
//! family's (`common::block` for a 1 x 4 block), so every load mode
//! and dtype works the same way.

use super::common::block::{Tile, gemm_body};
use super::common::indent;
use super::common::operand::Mode;
use super::common::prelude::{Family, PRELUDE, family_kernel, numbers};
use crate::kernels::Kernel;

/// The split-K matrix-vector kernel (`wgsl/gemm_splitk.wgsl`).
pub(crate) static GEMM_SPLITK: Kernel = family_kernel(
    "gemm_splitk",
    PRELUDE,
    include_str!("../../../wgsl/gemm_splitk.wgsl"),
);

/// The family's kernel (`wgsl/gemm_splitk.wgsl`): `ks` threads per column
/// quad, `cq` quads per workgroup, the reduction by subgroup shuffles or
/// workgroup memory.
pub(crate) fn family(ks: u32, cq: u32, subgroups: bool, a_mode: Mode, b_mode: Mode) -> Family {
    let body = gemm_body(
        Tile {
            wg_x: 1,
            wg_y: 1,
            tm: 1,
            nv: 1,
        },
        a_mode,
        b_mode,
        false,
    );
    // A butterfly over the ks lanes of one quad (consecutive invocations,
    // aligned to ks within the subgroup), or a tree in workgroup memory.
    let mut reduce = Vec::new();
    let mut mask = ks / 2;
    while mask > 0 {
        if subgroups {
            reduce.push(format!("acc_0_0 += subgroupShuffleXor(acc_0_0, {mask}u);"));
        } else {
            reduce.push(format!(
                "red[li] = acc_0_0; workgroupBarrier(); if s < {mask}u {{ acc_0_0 += red[li + {mask}u]; }} workgroupBarrier();"
            ));
        }
        mask /= 2;
    }
    let mut subs = numbers([("KS", ks), ("CQ", cq)]);
    subs.push(("REDUCE", indent(reduce, 1)));
    subs.extend(body.subs());
    Family::new(&GEMM_SPLITK, subs)
}

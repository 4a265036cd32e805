//! What every GEMM family shares, below the families (which import these
//! parts and never each other; nothing here imports a family):
//!
//! - [`operand`]: the product ([`operand::Gemm`]), an operand's six
//!   strides, the load modes ([`operand::Mode`]) and their WGSL loads;
//! - [`params`]: the parameter block every family reads;
//! - [`prelude`]: the generator of `wgsl/gemm_common.wgsl`'s substitutions
//!   (bindings, loads and stores for the dtype, flags) under a family's
//!   own text, and the fused epilogue's wrapping of it;
//! - [`block`]: the straight-line per-thread register block (one K chunk's
//!   loads and multiply-adds), which the register and split-K families
//!   both run;
//! - [`staging`]: the double-buffered workgroup-memory staging of A and B
//!   blocks, shared by the workgroup-memory and cooperative-matrix
//!   families;
//! - [`store`] and [`epilogue`]: the stores through `store_quad` and the
//!   fused elementwise epilogue it calls.

pub(crate) mod block;
pub(crate) mod epilogue;
pub(crate) mod operand;
pub(crate) mod params;
pub(crate) mod prelude;
pub(crate) mod staging;
pub(crate) mod store;

/// Generated WGSL lines, each indented `depth` levels and ended.
pub(crate) fn indent(lines: Vec<String>, depth: usize) -> String {
    let pad = " ".repeat(depth * 4);
    lines
        .iter()
        .map(|l| format!("{pad}{l}\n"))
        .collect::<String>()
}

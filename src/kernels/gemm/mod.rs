//! The GEMM (matmul and addmm): families of kernels, the parts they share,
//! the tuning that picks one per adapter, shape class and dtype, and the
//! planner that turns a product into dispatches. Layered, each layer
//! importing only those below it:
//!
//! - `plan.rs` (top): a product's dispatches from the tuned choice;
//! - `spec.rs`: a variant's WGSL, its family's text under the prelude, and
//!   the lists of every specialisation for the portability test;
//! - `tuning/`: shape classes (`class.rs`), kernel names and their parsing
//!   (`kernel.rs`), candidates and default tiles (`candidates.rs`), the
//!   variant key and the warm-up list's entries (`variant.rs`), the check a
//!   candidate passes (`check.rs`), and the timing and the tuning file
//!   (`mod.rs`);
//! - one file per family: the register tile (`register.rs`,
//!   `wgsl/gemm.wgsl`), workgroup memory (`workgroup.rs`,
//!   `wgsl/gemm_shared.wgsl`), split-K (`splitk.rs`,
//!   `wgsl/gemm_splitk.wgsl`), cooperative matrices (`coop.rs`,
//!   `wgsl/gemm_coop.wgsl`), the uniform window (`uniform.rs`,
//!   `wgsl/gemm_uniform.wgsl`, `wgsl/gemm_uniform_rows.wgsl`) and the
//!   reference kernel (`naive.rs`, `wgsl/matmul_naive.wgsl`). A family
//!   imports the shared parts and never another family;
//! - `common/` (bottom): the shared parts: the operand description and load
//!   modes, the parameter block, the prelude's generator
//!   (`wgsl/gemm_common.wgsl`), the register block, the workgroup-memory
//!   staging, the stores and the fused epilogue (`store_quad`). Nothing
//!   there imports a family.
//!
//! docs/ARCHITECTURE.md ("How to add a GEMM family") lists what a new
//! family touches.

pub(crate) mod common;
pub(crate) mod coop;
pub(crate) mod naive;
pub(crate) mod plan;
pub(crate) mod register;
pub(crate) mod spec;
pub(crate) mod splitk;
pub(crate) mod tuning;
pub(crate) mod uniform;
pub(crate) mod workgroup;

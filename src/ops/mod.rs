//! Graph-building operations, one file per family. Each checks its inputs
//! (shapes, dtypes, devices) and records a node; nothing runs until eval.

pub mod concat;
pub mod elementwise;
pub mod grid;
pub mod matmul;
pub mod nn;
pub mod reduce;
pub mod scan;
pub mod scatter;
pub mod shape;
pub mod sort;
pub mod topk;

use crate::{Array, Error, Result};

/// [`Error::DeviceMismatch`] naming `op` unless `a` and `b` live on one device.
pub(crate) fn same_device(op: &'static str, a: &Array, b: &Array) -> Result<()> {
    if a.device() != b.device() {
        return Err(Error::DeviceMismatch { op });
    }
    Ok(())
}

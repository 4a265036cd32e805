//! GPU memory: the per-device buffer pool and its statistics.
//!
//! This module knows nothing about arrays or graphs. It hands out
//! [`PooledBuffer`]s and takes them back in their `Drop`, synchronously.

mod pool;

pub use pool::MemoryStats;
pub(crate) use pool::{BufferKind, Pool, PooledBuffer, QueueGuard};

//! Lowering: one graph node and its input storages become kernel dispatches
//! and output storages. One file per family of primitives; each turns the
//! node's arrays (shapes, dtypes, strides) into the operands its kernels
//! take (`kernels::Operand`) and allocates the outputs from the pool.
//!
//! Nothing here schedules or submits (`graph::eval` does), and nothing here
//! writes WGSL (`kernels` does).

mod concat;
mod fast;
mod matmul;
pub(crate) mod program;
mod quant;
mod random;
mod reduce;
mod scan;
mod scatter;
mod sort;
mod topk;
mod view;

use std::sync::Arc;

use super::{Node, Primitive};
use crate::array::{ArrayInner, Storage};
use crate::kernels::{Context, Dispatch, Operand};
use crate::memory::{BufferKind, Origin, QueueGuard};
use crate::shape::{contiguous_strides, numel};
use crate::{DType, Device, Error, Result};

/// Where lowering puts its work: the device, the queue lock every
/// allocation needs (see `memory::pool`), the eval's dispatches, and the
/// origin of the node being lowered (`None` unless memory history is on),
/// which labels the buffers it allocates, and the op that recorded it, which
/// a buffer past the adapter's limits is reported under (an elementwise
/// result is checked here, not at its call: fused into a reduction or a
/// GEMM, a result of any size needs no buffer).
pub(crate) struct Lowering<'a> {
    pub device: &'a Device,
    pub guard: &'a QueueGuard<'a>,
    pub dispatches: Vec<Dispatch>,
    pub origin: Option<Origin>,
    pub op: &'static str,
}

impl Lowering<'_> {
    /// The device's kernel context.
    fn cx(&self) -> &Context {
        &self.device.inner.kernels
    }

    /// A dense buffer for `shape` and `dtype`, from the pool.
    ///
    /// # Errors
    /// [`Error::MissingFeature`] for an f64 result on a device without
    /// f64 (a lazy `full` or a graph built before the check could run);
    /// [`Error::TooLarge`], [`Error::OutOfMemory`].
    fn alloc(&self, shape: &[usize], dtype: DType) -> Result<Storage> {
        self.alloc_for(shape, dtype, self.origin)
    }

    /// [`Lowering::alloc`] labelled with `origin` (an array a kernel writes
    /// for another op: a held value a reduction's prologue computes).
    ///
    /// # Errors
    /// As [`Lowering::alloc`].
    fn alloc_for(&self, shape: &[usize], dtype: DType, origin: Option<Origin>) -> Result<Storage> {
        if !dtype.is_quantized() {
            self.device.check_dtype("float64", dtype)?;
        }
        let bytes = dtype.nbytes(numel(shape)) as u64;
        self.device.check_binding(self.op, bytes)?;
        let buffer =
            self.device
                .inner
                .pool
                .acquire(self.guard, bytes, BufferKind::Storage, origin)?;
        Ok(Storage {
            buffer: Arc::new(buffer),
            strides: contiguous_strides(shape),
            offset: 0,
        })
    }

    fn push(&mut self, dispatches: impl IntoIterator<Item = Dispatch>) {
        self.dispatches.extend(dispatches);
    }
}

/// A node being lowered: its inputs (arrays and their storages) and its
/// live outputs (`None` where nobody holds that output any more).
pub(crate) struct NodeIo<'n> {
    pub node: &'n Node,
    pub storages: Vec<Storage>,
    pub outputs: &'n [Option<Arc<ArrayInner>>],
}

impl NodeIo<'_> {
    /// Input `i`'s array descriptor.
    fn input(&self, i: usize) -> &ArrayInner {
        &self.node.inputs[i].inner
    }

    /// The first live output. Every output of one node has its shape and
    /// dtype, except split's, which looks at each.
    fn output(&self) -> Result<&ArrayInner> {
        self.outputs
            .iter()
            .flatten()
            .next()
            .map(|o| &**o)
            .ok_or_else(|| Error::Internal("a node was run without a live output".into()))
    }

    /// Input `i` as a kernel operand read through `strides`.
    fn operand(&self, i: usize, strides: Vec<isize>) -> Operand<'_> {
        Operand {
            buffer: self.storages[i].buffer.buffer(),
            dtype: self.input(i).dtype,
            offset: self.storages[i].offset,
            strides,
        }
    }
}

/// What lowering a node gives: one storage per output (`None` for a dead
/// output that needs none).
pub(super) type Lowered = Result<Vec<Option<Storage>>>;

/// Lower `node`: push its dispatches and return one storage per output
/// (`None` for a dead output that needs none).
pub(crate) fn lower(
    lw: &mut Lowering<'_>,
    node: &Arc<Node>,
    outputs: &[Option<Arc<ArrayInner>>],
) -> Lowered {
    if matches!(
        node.primitive,
        Primitive::Full { .. } | Primitive::Elementwise(_)
    ) {
        return program::node(lw, node, outputs);
    }
    // Asks whether it may donate its source before taking a storage.
    if let Primitive::SliceUpdate {
        starts,
        steps,
        dynamic,
    } = &node.primitive
    {
        return scatter::slice_update(lw, node, outputs, starts, steps, *dynamic);
    }
    let storages = node
        .inputs
        .iter()
        .map(|a| a.inner.storage())
        .collect::<Result<_>>()?;
    let io = NodeIo {
        node,
        storages,
        outputs,
    };
    match &node.primitive {
        Primitive::Full { .. } | Primitive::Elementwise(_) => {
            unreachable!("lowered as programs above")
        }
        Primitive::Split { axis, starts } => program::split(lw, &io, *axis, starts),
        Primitive::Take { axis } => program::take(lw, &io, *axis),
        Primitive::View(view) => view::view(lw, &io, view),
        Primitive::Matmul { alpha, beta } => matmul::matmul(lw, &io, *alpha, *beta),
        Primitive::Reduce { op, axes, ddof } => reduce::reduce(lw, &io, *op, axes, *ddof),
        Primitive::Normalize(norm) => reduce::normalize(lw, &io, *norm),
        Primitive::Random { dist, stream } => random::random(lw, &io, *dist, *stream),
        Primitive::Concatenate { axis } => concat::concatenate(lw, &io, *axis),
        Primitive::TopK { axis, k } => topk::topk(lw, &io, *axis, *k),
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => scan::scan(lw, &io, *op, *axis, *reverse, *inclusive),
        Primitive::Sort { axis } => sort::sort(lw, &io, *axis),
        Primitive::Scatter { axis, add } => scatter::scatter(lw, &io, *axis, *add),
        Primitive::SliceUpdate { .. } => unreachable!("lowered before its storages are taken"),
        Primitive::Bitcast => view::bitcast(&io),
        Primitive::Placeholder { .. } => Err(Error::Traced {
            op: node.primitive.name(),
        }),
        Primitive::Quantize { group_size, bits } => quant::quantize(lw, &io, *group_size, *bits),
        Primitive::Dequantize(mode) => quant::dequantize(lw, &io, *mode),
        Primitive::QuantizedMatmul { mode, transpose } => {
            quant::quantized_matmul(lw, &io, *mode, *transpose)
        }
        Primitive::SdpaVector { scale, length } => fast::sdpa_vector(lw, &io, *scale, *length),
        Primitive::Rope {
            dims,
            traditional,
            base,
            scale,
            offset,
            dynamic,
        } => fast::rope(
            lw,
            &io,
            &crate::kernels::rope::Rotation {
                dims: *dims,
                traditional: *traditional,
                base: *base,
                scale: *scale,
                offset: *offset,
            },
            *dynamic,
        ),
    }
}

//! Asynchronous evaluation and read-back: [`crate::eval_async`] and
//! [`Array::to_vec_async`] return futures that never block a thread on
//! the GPU, for use inside an async executor (a server's tokio runtime)
//! and, later, in a browser, where blocking is not allowed.
//!
//! Calling either does the CPU side at once, as the blocking versions do:
//! evaluation records and submits the pending graph (taking the device's
//! queue lock, so it may wait briefly for another thread's submission, and
//! compiling any new kernel), and a read-back submits its copy and asks
//! wgpu to map the staging buffer. The future then only waits: it resolves
//! when wgpu's callback says the GPU is done. A per-device poller thread
//! polls the device while such callbacks are outstanding, in waits of at
//! most 50 ms inside the driver or on a condition variable, never in a
//! busy loop (see `src/memory/pending.rs`). The futures are `Send`,
//! `'static` and `Unpin`, and do not borrow the arrays.
//!
//! Dropping a read-back future before it completes cancels the map and
//! returns the staging buffer to the pool at once
//! ([`crate::Device::pending_callbacks`] and
//! [`crate::Device::active_memory`] say so).

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::array::ReadSource;
use crate::memory::{MapRead, Slot, Source};
use crate::{Array, Device, Element, Error, Result};

enum ReadState {
    /// Failed before anything was submitted, or already resolved.
    Failed(Option<Error>),
    /// Nothing to read (an empty array).
    Empty,
    /// The copy is submitted and the map requested.
    Mapping {
        map: MapRead,
        nbytes: usize,
        /// Where the bytes come from (it holds the dense copy of a strided
        /// view until the read is done, or gathers a view's span).
        source: ReadSource,
    },
}

/// The future of [`Array::to_vec_async`]: the elements in row-major
/// order, once the GPU has finished and the staging buffer is mapped.
/// `Send`, `'static` and `Unpin`; dropping it cancels the read-back.
#[must_use = "a read-back future does nothing unless awaited (dropping it cancels the read)"]
pub struct ReadFuture<T> {
    state: ReadState,
    device: Device,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> Future for ReadFuture<T> {
    type Output = Result<Vec<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let out = match &mut this.state {
            ReadState::Failed(e) => Err(e.take().unwrap_or_else(|| {
                Error::Internal("a read-back future was polled after it completed".into())
            })),
            ReadState::Empty => Ok(Vec::new()),
            ReadState::Mapping {
                map,
                nbytes,
                source,
            } => {
                let n = *nbytes;
                match map.poll_with(cx, |b| T::from_device_bytes(&source.dense(b)[..n])) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(r) => r,
                }
            }
        };
        if let Err(Error::DeviceLost(m)) = &out {
            this.device.mark_lost(m);
        }
        // Drops the mapping state: its buffer is back in the pool already.
        this.state = ReadState::Failed(None);
        Poll::Ready(out)
    }
}

impl Array {
    /// Evaluate, then read the elements back in row-major order without
    /// blocking (the asynchronous [`Array::to_vec`]).
    ///
    /// The evaluation and the copy to a staging buffer are submitted now;
    /// the returned future resolves once the GPU has finished and the
    /// buffer is mapped (see the module docs of `read_async.rs` for how it
    /// makes progress). Many read-backs may be in flight at once, on one
    /// thread. A strided view is first copied dense, or gathered on the host
    /// past the memory limit, as `to_vec` does.
    ///
    /// ```
    /// use wgarray::{Array, Device};
    /// let device = Device::new_default()?;
    /// let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3], &device)?;
    /// let b = (&a * 2.0)?;
    /// let v = pollster::block_on(b.to_vec_async::<f32>())?;
    /// assert_eq!(v, vec![2.0, 4.0, 6.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// Through the future: [`Error::ReadDType`] when `T` is not this array's
    /// dtype; the errors of [`crate::eval`]; [`Error::Readback`] when the
    /// map fails; [`Error::Timeout`] after [`Device::wait_timeout`];
    /// [`Error::DeviceLost`].
    #[track_caller]
    pub fn to_vec_async<T: Element>(&self) -> ReadFuture<T> {
        let state = match self.start_read::<T>() {
            Ok(s) => s,
            Err(e) => ReadState::Failed(Some(e)),
        };
        ReadFuture {
            state,
            device: self.device().clone(),
            _t: PhantomData,
        }
    }

    #[track_caller]
    fn start_read<T: Element>(&self) -> Result<ReadState> {
        self.check_read::<T>("to_vec_async")?;
        let Some(source) = self.read_source()? else {
            return Ok(ReadState::Empty);
        };
        let nbytes = self.nbytes();
        let device = self.device();
        let dev = &device.inner;
        let origin = device.origin(|| "read-back");
        let (offset, size) = source.range(nbytes);
        let map = device.scoped(|| {
            crate::memory::read_back_async(
                &dev.pool,
                &dev.queue,
                &dev.poller,
                source.storage().buffer.buffer(),
                offset,
                size,
                origin,
                device.wait_timeout(),
            )
        })?;
        Ok(ReadState::Mapping {
            map,
            nbytes,
            source,
        })
    }
}

/// The future of [`eval_async`]: resolves once the GPU has finished the
/// work submitted for the arrays (all work submitted to the device's queue
/// up to the call). `Send`, `'static`, `Unpin`.
#[must_use = "an eval future is only a wait; the work is submitted already"]
pub struct EvalFuture {
    slot: Option<std::sync::Arc<Slot>>,
    error: Option<Error>,
    device: Option<Device>,
}

impl Future for EvalFuture {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(e) = this.error.take() {
            return Poll::Ready(Err(e));
        }
        let Some(slot) = &this.slot else {
            return Poll::Ready(Ok(()));
        };
        let (r, _source): (Result<()>, Source) = match slot.poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(x) => x,
        };
        if let (Err(Error::DeviceLost(m)), Some(d)) = (&r, &this.device) {
            d.mark_lost(m);
        }
        this.slot = None;
        Poll::Ready(r)
    }
}

/// Evaluate `arrays` without blocking (the asynchronous [`crate::eval`]):
/// the pending graph is recorded and submitted now, in one submission as
/// `eval` does, and the future resolves when the GPU has finished it. The
/// arrays are evaluated (their buffers assigned) as soon as this returns,
/// so reading them back may start before the future resolves.
///
/// ```
/// use wgarray::{Array, Device};
/// let device = Device::new_default()?;
/// let a = Array::from_slice(&[1.0f32, 2.0], &[2], &device)?;
/// let b = a.exp()?;
/// pollster::block_on(wgarray::eval_async(&[&b]))?;
/// assert!(b.is_evaluated());
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// # Errors
/// Through the future: as [`crate::eval`] ([`Error::DeviceMismatch`] names
/// `eval_async`); [`Error::Timeout`] after
/// [`Device::wait_timeout`]; [`Error::DeviceLost`].
#[track_caller]
pub fn eval_async(arrays: &[&Array]) -> EvalFuture {
    let Some(first) = arrays.first() else {
        return EvalFuture {
            slot: None,
            error: None,
            device: None,
        };
    };
    let device = first.device().clone();
    // Checked here so that the error names this function.
    let same = match arrays.iter().find(|a| *a.device() != device) {
        None => Ok(()),
        Some(other) => Err(Error::device_mismatch(
            "eval_async",
            &device,
            other.device(),
        )),
    };
    let submitted = same
        .and_then(|()| crate::graph::eval::evaluate(arrays))
        .and_then(|ran| {
            if ran == 0 {
                // Nothing ran, so nothing told whether the device still works.
                device.probe_lost()?;
            }
            let dev = &device.inner;
            crate::memory::work_done(&dev.queue, &dev.poller, device.wait_timeout())
        });
    match submitted {
        Ok(slot) => EvalFuture {
            slot: Some(slot),
            error: None,
            device: Some(device),
        },
        Err(e) => EvalFuture {
            slot: None,
            error: Some(e),
            device: Some(device),
        },
    }
}

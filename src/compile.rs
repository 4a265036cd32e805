//! Compiled functions: trace once per input signature, replay without
//! calling the function or planning again (MLX's `mx.compile`, JAX's `jit`).
//!
//! A [`Compiled`] handle owns everything its calls made: its traces (each
//! holding the arrays the function captured, as constants), their fusion
//! plans, and the pipelines its calls compiled. Nothing is kept in a global
//! map: the cache is a field of the handle, keyed by shapes, dtypes and a
//! device number that is never reused, so dropping the handle frees it all
//! (DESIGN.md: compiled functions own their traces). Arrays a call returned
//! stay valid after the handle is gone.
//!
//! ```
//! use wgarray::{Array, Device, compile};
//! let device = Device::new_default()?;
//! let w = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &device)?;
//! // `w` is captured: it becomes a constant of every trace.
//! let f = compile(move |x: &[Array]| {
//!     let y = x[0].matmul(&w)?;
//!     Ok(vec![(&y * 2.0)?.exp()?])
//! });
//! let x = Array::from_slice(&[0.5f32, -1.0], &[1, 2], &device)?;
//! let out = f.call(&[&x])?; // traces, plans, runs
//! let again = f.call(&[&x])?; // replays
//! assert_eq!(out[0].to_vec::<f32>()?, again[0].to_vec::<f32>()?);
//! assert_eq!(f.len(), 1);
//! # Ok::<(), wgarray::Error>(())
//! ```

use std::sync::{Arc, Mutex};

use crate::graph::eval;
use crate::graph::tape::{self, Tape};
use crate::kernels;
use crate::{Array, DType, Device, Error, Result};

/// Input signatures one [`Compiled`] handle keeps traces for, unless told
/// otherwise ([`compile_with_capacity`]); the least recently used goes first.
pub const DEFAULT_CAPACITY: usize = 16;

type Function = dyn Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync;

/// What a trace is for: the device's number, each input's shape and dtype,
/// and which inputs are the same array (they are one load when fused).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Signature {
    device: u64,
    inputs: Vec<(Vec<usize>, DType)>,
    /// Per input: the first input that is the same array.
    same: Vec<usize>,
}

#[derive(Default)]
struct Cache {
    /// Least recently used first.
    traces: Vec<(Signature, Arc<Tape>)>,
    /// Pipelines this handle's calls compiled, per device.
    pipelines: Vec<(Device, Vec<u64>)>,
}

impl Cache {
    fn own(&mut self, device: &Device, ids: Vec<u64>) {
        if ids.is_empty() {
            return;
        }
        match self.pipelines.iter_mut().find(|(d, _)| d == device) {
            Some((_, v)) => v.extend(ids),
            None => self.pipelines.push((device.clone(), ids)),
        }
    }

    /// Drop every trace and release every pipeline.
    fn clear(&mut self) {
        self.traces.clear();
        for (device, ids) in self.pipelines.drain(..) {
            device.inner.kernels.cache.release(&ids);
        }
    }
}

/// A function of arrays, compiled: see [`compile`]. `Send + Sync`; calls
/// from several threads share its cache.
pub struct Compiled {
    f: Box<Function>,
    capacity: usize,
    cache: Mutex<Cache>,
}

/// Compile `f`, a function from arrays to arrays, with a cache of
/// [`DEFAULT_CAPACITY`] input signatures.
///
/// The first call with a signature (the inputs' device, shapes, dtypes, and
/// which inputs are the same array) calls `f` on placeholder arrays of those
/// shapes and dtypes, records the graph it builds (merging common
/// subexpressions, dropping what the outputs do not need, and evaluating
/// once what does not depend on the inputs, such as a captured lazy array),
/// and plans its fusion. Later calls with that signature build the recorded
/// graph for the new inputs and run it with the same plan, in one
/// submission, without calling `f`. Arrays `f` captures are held by the
/// handle (as constants of its traces) until it is dropped or cleared.
///
/// `f` must be a pure function of its inputs and captures, and must not
/// evaluate or read back anything computed from its inputs (a traced input
/// has no value): such a call fails with [`Error::Traced`]. A value `f`
/// computes from captures alone is computed once, when traced.
pub fn compile<F>(f: F) -> Compiled
where
    F: Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
{
    compile_with_capacity(f, DEFAULT_CAPACITY)
}

/// [`compile`] with a cache of `capacity` input signatures (at least 1).
pub fn compile_with_capacity<F>(f: F, capacity: usize) -> Compiled
where
    F: Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
{
    Compiled {
        f: Box::new(f),
        capacity: capacity.max(1),
        cache: Mutex::new(Cache::default()),
    }
}

impl Compiled {
    /// Run the function on `inputs` (evaluated first if they are pending)
    /// and return its outputs, evaluated: one submission, plus one for the
    /// first call of a signature if `f` computes anything from captures
    /// alone. Outputs are fresh arrays of each call (an output that is an
    /// input or a capture is that array).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no inputs; [`Error::DeviceMismatch`]
    /// when the inputs are not all on one device; on a signature's first
    /// call, whatever `f` returns (shape and dtype errors of its ops, for
    /// inputs of a rank or dtype it does not take) and [`Error::Traced`];
    /// the errors of [`crate::eval`]. Nothing is cached for a failed trace.
    pub fn call(&self, inputs: &[&Array]) -> Result<Vec<Array>> {
        let (device, tape) = self.tape_for(inputs)?;
        let ((order, outputs), created) = kernels::recording_created(|| {
            let (order, outputs) = tape.replay(&device, inputs);
            let result = if order.is_empty() {
                Ok(())
            } else {
                let plan = tape.plan(&device, &order);
                let guard = device.inner.pool.lock_queue();
                eval::run_planned(&device, &guard, order, &plan)
            };
            (result, outputs)
        });
        self.lock().own(&device, created);
        order.map(|()| outputs)
    }

    /// [`Compiled::call`] that takes its inputs by value and lets go of
    /// them before anything runs (JAX's `donate_argnums`, for every
    /// input): an input the caller held only through this vector is then
    /// held by the call's graph alone, so an op that may write in place
    /// ([`Array::slice_update`], [`Array::slice_update_dynamic`], an
    /// elementwise kernel's donation) writes into its buffer instead of a
    /// copy. A KV cache passed back in every step this way is written where
    /// it is: `caches = step.call_donating(caches)?` costs no cache-sized
    /// buffer and no copy. An input that is still held elsewhere (a clone,
    /// a view) is read, never written, exactly as with [`Compiled::call`].
    ///
    /// ```
    /// # use wgarray::{Array, DType, Device, compile};
    /// # let device = Device::new_default()?;
    /// let step = compile(|x: &[Array]| Ok(vec![x[0].slice_update_dynamic(&x[1], &x[2], 0)?]));
    /// let mut cache = Array::zeros(&[8, 4], DType::F32, &device)?;
    /// cache.eval()?;
    /// for t in 0..3u32 {
    ///     let row = Array::full(&[1, 4], 1.0 + t as f64, DType::F32, &device)?;
    ///     let pos = Array::from_slice(&[t], &[1], &device)?;
    ///     cache = step.call_donating(vec![cache, row, pos])?.remove(0);
    /// }
    /// assert_eq!(cache.to_vec::<f32>()?[..12], [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Compiled::call`]. The inputs are dropped on every path.
    pub fn call_donating(&self, inputs: Vec<Array>) -> Result<Vec<Array>> {
        let refs: Vec<&Array> = inputs.iter().collect();
        let (device, tape) = self.tape_for(&refs)?;
        let (order, outputs) = tape.replay(&device, &refs);
        // The replay's nodes hold the inputs now; let the caller's go.
        drop(refs);
        drop(inputs);
        let (result, created) = kernels::recording_created(|| {
            if order.is_empty() {
                return Ok(());
            }
            let plan = tape.plan(&device, &order);
            let guard = device.inner.pool.lock_queue();
            eval::run_planned(&device, &guard, order, &plan)
        });
        self.lock().own(&device, created);
        result.map(|()| outputs)
    }

    /// The scheduled kernels of a call on `inputs` (see [`crate::explain`]),
    /// tracing `f` if the signature is new; nothing runs but a trace's
    /// constant folding.
    ///
    /// # Errors
    /// As [`Compiled::call`].
    pub fn explain(&self, inputs: &[&Array]) -> Result<String> {
        let (device, tape) = self.tape_for(inputs)?;
        let (order, outputs) = tape.replay(&device, inputs);
        let plan = tape.plan(&device, &order);
        let text = crate::graph::explain::describe(&order, &plan, device.fusion());
        drop(outputs);
        Ok(text)
    }

    /// Input signatures with a trace in the cache now.
    pub fn len(&self) -> usize {
        self.lock().traces.len()
    }

    /// Whether the cache holds no trace.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most signatures the cache keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Drop every trace (and the constants they hold) and release the
    /// pipelines this handle's calls compiled; the next call traces again.
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The device and the trace for `inputs`, tracing on a miss.
    fn tape_for(&self, inputs: &[&Array]) -> Result<(Device, Arc<Tape>)> {
        let Some(first) = inputs.first() else {
            return Err(Error::InvalidArgument(
                "a compiled function takes at least one input array".into(),
            ));
        };
        let device = first.device().clone();
        if let Some(other) = inputs.iter().find(|a| *a.device() != device) {
            return Err(Error::device_mismatch("compile", &device, other.device()));
        }
        // A replay's schedule is its tape's steps alone.
        let pending: Vec<&Array> = inputs
            .iter()
            .copied()
            .filter(|a| a.inner.pending_node().is_some())
            .collect();
        eval::eval(&pending)?;
        let signature = Signature {
            device: device.inner.id,
            inputs: inputs
                .iter()
                .map(|a| (a.shape().to_vec(), a.dtype()))
                .collect(),
            same: inputs
                .iter()
                .map(|a| {
                    inputs
                        .iter()
                        .position(|b| Arc::ptr_eq(&a.inner, &b.inner))
                        .expect("a is in inputs")
                })
                .collect(),
        };
        {
            let mut cache = self.lock();
            if let Some(i) = cache.traces.iter().position(|(s, _)| *s == signature) {
                let entry = cache.traces.remove(i);
                let tape = Arc::clone(&entry.1);
                cache.traces.push(entry);
                return Ok((device, tape));
            }
        }
        // Traced without the lock: `f` may call this handle.
        let (tape, created) = kernels::recording_created(|| tape::trace(&device, inputs, &*self.f));
        let mut cache = self.lock();
        cache.own(&device, created);
        let tape = Arc::new(tape?);
        if cache.traces.len() >= self.capacity {
            cache.traces.remove(0);
        }
        cache.traces.push((signature, Arc::clone(&tape)));
        Ok((device, tape))
    }
}

impl Drop for Compiled {
    /// Frees the traces, the captured arrays `f` holds, and the pipelines
    /// this handle's calls compiled.
    fn drop(&mut self) {
        self.cache
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("traces", &self.len())
            .field("capacity", &self.capacity)
            .finish()
    }
}

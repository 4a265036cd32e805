//! Stand-ins for GEMM kernels slow to compile, on software adapters.
//!
//! Mesa's lavapipe compiles a kernel's machine code at its first dispatch
//! (inside whichever wait executes it), and LLVM's time grows much faster
//! than the register tile: with Mesa's shader cache empty, about 0.1 s of
//! CPU for 8 x 8 accumulators per thread, 1.3 s for 8 x 16, 3.6 to 4.7 s
//! for 16 x 16 (the medium and large defaults) and 21 s for 32 x 16
//! (lavapipe, 2026-12-03, docs/PERFORMANCE.md). MiniLM's first batch needs
//! three such 16 x 16 specialisations (one per fused epilogue). So the
//! first time a device would dispatch a register tile of more than
//! [`STAND_IN_QUADS`] accumulator quads whose first dispatch no process on
//! the adapter has run (the tuning file's compiled list), the eval runs a
//! smaller register tile of the same family instead ([`stand_in_for`]),
//! which compiles in a tenth of a second and computes the same sums in the
//! same order (each output's fused multiply-adds over k, one after the
//! other), so the results are bit for bit the same; and the device's
//! background thread compiles the real specialisation (its pipeline and one
//! dispatch of one workgroup with the product's parameters on scratch
//! buffers, so that the driver compiles the code the eval's dispatch will
//! run; lavapipe specialises a kernel on its parameters only when that
//! shrinks it a lot) once the device is idle. The evals after that run the
//! real tile, and later processes, whose driver cache holds its code, run
//! it from the start.
//!
//! Not on GPUs (their compiles take milliseconds), not on GL (no background
//! thread there), not for a forced kernel, and not while the tuning times
//! candidates (it times the tiles themselves).

use std::sync::Arc;

use super::kernel::GemmKernel;
use crate::kernels::{Context, Dispatch, Kernel, KernelCache, Pipeline, QuickKey, Spec};
use crate::progress::{Event, Span, Work};
use crate::{Error, Result};

/// The most accumulator quads (`tm * nv`, each a `vec4`) per thread of a
/// register tile that runs at once on a software adapter with its cache
/// empty: 8 x 8 and 16 x 4 accumulators compile in about 0.2 s of CPU on
/// lavapipe, 8 x 16 in 1.3 s.
pub const STAND_IN_QUADS: u32 = 16;

/// Whether a software adapter compiles `kernel` slowly with its caches
/// empty: a register tile of more than [`STAND_IN_QUADS`] accumulator
/// quads per thread.
pub(crate) fn slow_to_compile(kernel: GemmKernel) -> bool {
    matches!(kernel, GemmKernel::Register { tm, nv, .. } if tm * nv > STAND_IN_QUADS)
}

/// The register tile that stands in for `kernel` (a register tile slow to
/// compile): the same threads, `nv` and `tm` halved in turn, `nv` first,
/// until at most [`STAND_IN_QUADS`] quads remain (`register 8 1 16 4` ->
/// `register 8 1 8 2`, `register 8 8 16 4` -> `register 8 8 8 2`). Any
/// other kernel is returned as is.
pub(crate) fn stand_in_for(kernel: GemmKernel) -> GemmKernel {
    let GemmKernel::Register {
        wg_x,
        wg_y,
        mut tm,
        mut nv,
    } = kernel
    else {
        return kernel;
    };
    let mut halve_nv = true;
    while tm * nv > STAND_IN_QUADS {
        if (halve_nv && nv > 1) || tm == 1 {
            nv /= 2;
        } else {
            tm /= 2;
        }
        halve_nv = !halve_nv;
    }
    GemmKernel::Register { wg_x, wg_y, tm, nv }
}

/// A specialisation's hash in the tuning file's compiled list: FNV-1a of
/// its kernel name and substitutions (the WGSL it generates), as 16 hex
/// digits.
pub(crate) fn spec_hash(spec: &Spec) -> String {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(spec.kernel.as_bytes());
    for (k, v) in &spec.subs {
        bytes.push(0);
        bytes.extend_from_slice(k.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(v.as_bytes());
    }
    format!("{:016x}", crate::kernels::fnv1a(&bytes))
}

thread_local! {
    /// This thread plans a stand-in's dispatches ([`standing_in`]).
    static STANDING_IN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f` (planning a stand-in's dispatches) marked as standing in: the
/// stand-in's specialisation does not join the warm-up list
/// ([`standing_in_here`]).
pub(crate) fn standing_in<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            STANDING_IN.with(|s| s.set(self.0));
        }
    }
    let _reset = Reset(STANDING_IN.with(|s| s.replace(true)));
    f()
}

/// Whether this thread plans a stand-in's dispatches.
pub(crate) fn standing_in_here() -> bool {
    STANDING_IN.with(|s| s.get())
}

/// Whether `s` has the form of [`spec_hash`]'s hashes.
pub(crate) fn is_hash(s: &str) -> bool {
    s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The kernel an eval runs in place of `kernel` for the specialisation
/// `key` (built by `spec`, with the parameter block `params` of the
/// product at hand), if a stand-in is due (see the module docs); the first
/// time, the background compile of `key` is queued. `None`: run `kernel`.
pub(crate) fn stand_in(
    cx: &Context,
    kernel: GemmKernel,
    key: &QuickKey,
    spec: &dyn Fn() -> (Spec, &'static Kernel),
    params: &[u32],
) -> Option<GemmKernel> {
    if !cx.background
        || !cx.software
        || !slow_to_compile(kernel)
        || super::timing_here()
        || cx.tuning.forced().is_some()
    {
        return None;
    }
    let quick = stand_in_for(kernel);
    let mut states = super::lock(&cx.tuning.stand_ins);
    match states.get(key) {
        Some(true) => return None,
        Some(false) => return Some(quick),
        None => {}
    }
    // Made on this device already (a warm-up made it from a list that an
    // earlier process's evals ran), or run by a process before: the
    // driver's cache has its code.
    if cx.cache.has_quick(key) {
        states.insert(key.clone(), true);
        return None;
    }
    let (spec, source) = spec();
    let hash = spec_hash(&spec);
    if cx.tuning.known_compiled(&hash) {
        states.insert(key.clone(), true);
        return None;
    }
    states.insert(key.clone(), false);
    drop(states);
    let device = cx.device_id;
    crate::progress::emit(|| Event::StandIn {
        device,
        kernel,
        stand_in: quick,
    });
    let me = cx.me.clone();
    let key = key.clone();
    let params = params.to_vec();
    let run = move |cache: &Arc<KernelCache>| {
        let Some(cx) = me.upgrade() else { return };
        let _span = Span::start(
            device,
            Work::Compiling {
                kernel,
                stand_in: quick,
            },
            true,
        );
        let built = spec.clone();
        match cache
            .get_quick(key.clone(), move || (built, source))
            .and_then(|p| first_dispatch(&cx, &p, &spec, params))
        {
            Ok(()) => {
                super::lock(&cx.tuning.stand_ins).insert(key, true);
                cx.tuning.note_compiled(hash);
            }
            // The stand-in stays (the eval would fail the same way).
            Err(e) => log::warn!("wgarray: GEMM kernel {kernel} not compiled: {e}"),
        }
    };
    cx.cache
        .push_background(vec![crate::kernels::background::Job {
            what: format!("compiling GEMM kernel {kernel} (stand-in {quick})"),
            idle: true,
            run: Box::new(run),
        }]);
    Some(quick)
}

/// Dispatch `pipeline` (of `spec`) once, one workgroup, with the parameter
/// block `params` and scratch buffers of 256 bytes for its storage
/// bindings (reads past them return 0 and writes are dropped, WebGPU's
/// bounds checks), and wait: the driver compiles the code a dispatch with
/// those parameters runs.
///
/// # Errors
/// [`Error::Validation`] if wgpu refuses the dispatch; a wait's errors.
fn first_dispatch(cx: &Context, pipeline: &Pipeline, spec: &Spec, params: Vec<u32>) -> Result<()> {
    let device = cx.tuning.device();
    let queue = cx.tuning.queue();
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let buffer = |size: u64, usage: wgpu::BufferUsages| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgarray first dispatch"),
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    let params_buffer = buffer(
        (4 * params.len() as u64).next_multiple_of(256),
        wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
    );
    queue.write_buffer(&params_buffer, 0, bytemuck::cast_slice(&params));
    let d = Dispatch {
        pipeline: pipeline.clone(),
        params,
        buffers: (0..spec.reads + spec.writes)
            .map(|_| buffer(256, wgpu::BufferUsages::STORAGE))
            .collect(),
        windows: spec
            .windows
            .iter()
            .map(|&size| crate::kernels::Window {
                buffer: buffer(size, wgpu::BufferUsages::UNIFORM),
                offset: 0,
                size,
            })
            .collect(),
        workgroups: [1, 1, 1],
    };
    let group = crate::kernels::bind_group(device, &params_buffer, &d);
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("wgarray first dispatch"),
    });
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("wgarray first dispatch"),
            timestamp_writes: None,
        });
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, &group, &[0]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    let index = queue.submit([encoder.finish()]);
    if let Some(e) = pollster::block_on(scope.pop()) {
        return Err(Error::Validation(e.to_string()));
    }
    pipeline
        .dispatched
        .store(true, std::sync::atomic::Ordering::Relaxed);
    crate::memory::wait(
        device,
        Some(index),
        crate::DEFAULT_WAIT_TIMEOUT,
        "compiling a GEMM kernel",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stand_ins_are_small_register_tiles_of_the_same_threads() {
        let r = |wg_x, wg_y, tm, nv| GemmKernel::Register { wg_x, wg_y, tm, nv };
        for (slow, quick) in [
            (r(8, 1, 16, 4), r(8, 1, 8, 2)),
            (r(8, 8, 16, 4), r(8, 8, 8, 2)),
            (r(8, 1, 32, 4), r(8, 1, 16, 1)),
            (r(8, 8, 8, 4), r(8, 8, 8, 2)),
            (r(8, 4, 8, 4), r(8, 4, 8, 2)),
            (r(8, 1, 1, 32), r(8, 1, 1, 16)),
        ] {
            assert!(slow_to_compile(slow), "{slow}");
            assert_eq!(stand_in_for(slow), quick, "{slow}");
            assert!(!slow_to_compile(quick) && quick.is_valid(), "{quick}");
        }
        // The small and matrix-vector defaults compile fast already.
        for k in [r(8, 1, 16, 1), r(8, 1, 1, 4), r(8, 1, 1, 8), r(8, 8, 4, 1)] {
            assert!(!slow_to_compile(k), "{k}");
            assert_eq!(stand_in_for(k), k);
        }
        let other = GemmKernel::SplitK {
            ks: 8,
            cq: 8,
            subgroups: false,
        };
        assert!(!slow_to_compile(other));
        assert_eq!(stand_in_for(other), other);
    }

    #[test]
    fn hashes_name_the_generated_text() {
        let (a, _) = crate::kernels::REDUCE.spec(&[("OP", "a")]);
        let (b, _) = crate::kernels::REDUCE.spec(&[("OP", "b")]);
        assert_ne!(spec_hash(&a), spec_hash(&b));
        assert_eq!(spec_hash(&a), spec_hash(&a.clone()));
        assert!(is_hash(&spec_hash(&a)));
        assert!(!is_hash("float32;register 8 1 16 4"));
    }
}

//! The eager path's host cost per op (issue 19 item 8): evaluating a fused
//! chain plans and lowers it with allocations per kernel, not per node, so
//! a chain of 1000 `x + 1.0` evaluates with fewer host allocations than it
//! has ops (3.7 per op before the planner's vectors went inline), and
//! recording it costs at most 3 per op (13, then 6 before): the add's
//! node, its array and its shape; the scalar is one shared constant node
//! (`graph::constants`) and the node's inputs are inline. Counted by a
//! global allocator on the test's own thread, so the count is
//! deterministic; timings are in docs/PERFORMANCE.md.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use wgarray::Array;

/// The system allocator, counting this thread's allocations.
struct Counting;

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations `f` makes on this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = COUNT.with(Cell::get);
    let out = f();
    (COUNT.with(Cell::get) - before, out)
}

const OPS: usize = 1000;

fn chain(x: &Array) -> Array {
    let mut y = x.clone();
    for _ in 0..OPS {
        y = (&y + 1.0).unwrap();
    }
    y
}

#[test]
fn a_fused_chain_records_and_evaluates_with_allocations_per_kernel() -> common::R {
    let d = common::device();
    d.set_fusion(true);
    let host: Vec<f32> = (0..257).map(|i| ((i * 37) % 101) as f32 - 50.5).collect();
    let x = Array::from_slice(&host, &[257], &d)?;
    // Warm: the kernels' pipelines compiled, the pool holding buffers.
    chain(&x).eval()?;
    let (recorded, y) = allocations(|| chain(&x));
    let (evaluated, result) = allocations(|| y.eval());
    result?;
    assert!(
        recorded <= 3 * OPS as u64 + 8,
        "{recorded} allocations to record {OPS} ops"
    );
    assert!(
        evaluated < OPS as u64,
        "{evaluated} allocations to evaluate {OPS} fused ops"
    );
    let got = y.to_vec::<f32>()?;
    for (g, h) in got.iter().zip(&host) {
        let want = f64::from(*h) + OPS as f64;
        assert!((f64::from(*g) - want).abs() <= 1e-3, "{g} against {want}");
    }
    Ok(())
}

//! Property: random graphs of single- and multi-output ops, random subsets
//! evaluated, handles dropped in random order, leave nothing behind: no
//! active memory, no live arrays or nodes, and after `clear_cache` wgpu's own
//! allocator report is back at its baseline (Vulkan; GL has no report).

mod common;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use wgarray::{Array, DType, Device};

#[derive(Clone, Debug)]
enum Op {
    /// A new evaluated leaf of shape [r, c].
    Leaf(usize, usize),
    /// A lazy constant of shape [r, c].
    Full(usize, usize),
    Add(usize, usize),
    Mul(usize, usize),
    Matmul(usize, usize),
    /// split(x, sections, axis)
    Split(usize, usize, isize),
    /// quantize a new [r, 64] leaf (group 32, 4 bits): three sibling
    /// outputs, dropped and evaluated like any others.
    Quantize(usize),
    /// Replace handle i by a fresh scalar (reassignment ends a reference).
    Replace(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1usize..5, 1usize..7).prop_map(|(r, c)| Op::Leaf(r, c)),
        (1usize..5, 1usize..7).prop_map(|(r, c)| Op::Full(r, c)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Add(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Mul(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Matmul(a, b)),
        (any::<usize>(), 1usize..4, -2isize..2).prop_map(|(a, s, ax)| Op::Split(a, s, ax)),
        (1usize..4).prop_map(Op::Quantize),
        any::<usize>().prop_map(Op::Replace),
    ]
}

fn run_case(d: &Device, ops: &[Op], eval_mask: u64, drop_keys: &[u64]) {
    let mut arrays: Vec<Array> = vec![Array::from_slice(&[0.5f32; 6], &[2, 3], d).unwrap()];
    for op in ops {
        let pick = |i: usize| arrays[i % arrays.len()].clone();
        match *op {
            Op::Leaf(r, c) => {
                let v: Vec<f32> = (0..r * c).map(|i| i as f32 * 0.25 - 1.0).collect();
                arrays.push(Array::from_slice(&v, &[r, c], d).unwrap());
            }
            Op::Full(r, c) => arrays.push(Array::full(&[r, c], 1.5, DType::F32, d).unwrap()),
            // Shape errors are fine: the op is simply not recorded.
            Op::Add(a, b) => arrays.extend(pick(a).add(pick(b)).ok()),
            Op::Mul(a, b) => arrays.extend((&pick(a) * &pick(b)).ok()),
            Op::Matmul(a, b) => arrays.extend(pick(a).matmul(&pick(b)).ok()),
            Op::Split(a, s, axis) => {
                if let Ok(parts) = pick(a).split(s, axis) {
                    arrays.extend(parts);
                }
            }
            Op::Quantize(r) => {
                let v: Vec<f32> = (0..r * 64).map(|i| (i % 13) as f32 * 0.5 - 3.0).collect();
                let w = Array::from_slice(&v, &[r, 64], d).unwrap();
                let (wq, s, b) = wgarray::quantize(&w, 32, 4).unwrap();
                arrays.extend([wq, s, b]);
            }
            Op::Replace(i) => {
                let n = arrays.len();
                arrays[i % n] = Array::scalar(2.0, DType::F32, d).unwrap();
            }
        }
    }
    let targets: Vec<&Array> = arrays
        .iter()
        .enumerate()
        .filter(|(i, _)| eval_mask >> (i % 64) & 1 == 1)
        .map(|(_, a)| a)
        .collect();
    wgarray::eval(&targets).unwrap();
    // Drop in a random order.
    let mut order: Vec<(u64, Array)> = arrays
        .into_iter()
        .enumerate()
        .map(|(i, a)| (drop_keys.get(i).copied().unwrap_or(i as u64), a))
        .collect();
    order.sort_by_key(|(k, _)| *k);
    for (_, a) in order {
        drop(a);
    }
}

/// Count and bytes of the driver allocations the pool made (labelled
/// "wgarray pool"); `None` without an allocator report (GL). The driver's
/// sizes include its own alignment, so they are at least the pool's.
fn pool_allocations(d: &Device) -> Option<(u64, u64)> {
    let report = d.allocator_report()?;
    let ours = report
        .allocations
        .iter()
        .filter(|a| a.name.contains("wgarray pool"));
    Some(ours.fold((0, 0), |(n, b), a| (n + 1, b + a.size)))
}

/// Driver bytes other than the device's parameter buffer (which lasts and
/// may grow up to 1 MiB) and the pool's own allocations.
fn non_pool_bytes(d: &Device) -> Option<u64> {
    let report = d.allocator_report()?;
    let ours: u64 = report
        .allocations
        .iter()
        .filter(|a| a.name.starts_with("wgarray"))
        .map(|a| a.size)
        .sum();
    Some(report.total_allocated_bytes - ours)
}

#[test]
fn random_graphs_release_everything() {
    let d = common::device();
    // Baseline after wgpu's own lasting allocations (zero-init and staging).
    run_case(&d, &[Op::Leaf(3, 2), Op::Add(0, 1)], u64::MAX, &[]);
    d.clear_cache();
    d.synchronize().unwrap();
    let baseline = non_pool_bytes(&d);

    let cases: u32 = std::env::var("WGARRAY_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        prop::collection::vec(op(), 1..16),
        any::<u64>(),
        prop::collection::vec(any::<u64>(), 0..40),
    );
    let n = std::cell::Cell::new(0u32);
    runner
        .run(&strategy, |(ops, mask, keys)| {
            run_case(&d, &ops, mask, &keys);
            prop_assert_eq!(d.active_memory(), 0, "active memory after {:?}", ops);
            prop_assert_eq!(d.live_arrays(), 0);
            prop_assert_eq!(d.live_nodes(), 0);
            n.set(n.get() + 1);
            // The pool's accounting agrees with wgpu's: the cached buffers
            // are exactly the driver allocations labelled by the pool.
            d.synchronize().unwrap();
            if let Some((count, bytes)) = pool_allocations(&d) {
                prop_assert_eq!(count, d.memory_stats().live_buffers);
                prop_assert!(bytes >= d.cache_memory());
            }
            // Every so often, empty the cache: the pool's allocations are
            // gone from the driver, and nothing else grew.
            if n.get().is_multiple_of(25) {
                d.clear_cache();
                prop_assert_eq!(d.memory_stats().live_buffers, 0);
                d.synchronize().unwrap();
                prop_assert_eq!(pool_allocations(&d).unwrap_or((0, 0)), (0, 0));
                let now = non_pool_bytes(&d);
                prop_assert!(
                    now <= baseline,
                    "driver bytes {:?} above baseline {:?}",
                    now,
                    baseline
                );
            }
            Ok(())
        })
        .unwrap();
    assert!(n.get() >= cases, "ran {} cases", n.get());
}

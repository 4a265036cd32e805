//! The buffer pool and the memory API: accounting, limits, donation, reuse
//! while in flight, out of memory midway and recovery, and deterministic
//! lifetime tests (DESIGN.md, rule 6).

mod common;

use common::arrays::{f, i};
use common::{R, Rng, assert_empty, device};
use half::f16;
use wgarray::{Array, DType, Device, Error, Slice, eval, where_};

const MIB: u64 = 1 << 20;
const MIB_F32: usize = (MIB / 4) as usize;

/// Bytes wgpu's allocator holds (Vulkan); `None` where there is no report (GL).
fn driver_bytes(d: &Device) -> Option<u64> {
    d.synchronize().unwrap();
    d.allocator_report().map(|r| r.total_allocated_bytes)
}

fn assert_cache(d: &Device, want: u64) {
    assert_eq!(d.cache_memory(), want, "cache bytes");
}

fn evaluated(a: Array) -> Array {
    a.eval().unwrap();
    a
}

#[test]
fn allocator_report_returns_to_baseline_after_clear_cache() {
    let d = device();
    // Let wgpu make its own internal allocations (staging, zero buffers) first.
    let w = Array::from_slice(&[1.0f32; 8], &[8], &d).unwrap();
    (&w + &w).unwrap().to_vec::<f32>().unwrap();
    drop(w);
    d.clear_cache();
    let baseline = driver_bytes(&d);
    let a = evaluated(Array::full(&[16 * MIB_F32], 1.0, DType::F32, &d).unwrap());
    let b = evaluated((&a * 2.0).unwrap());
    let during = driver_bytes(&d);
    drop((a, b));
    assert_eq!(d.active_memory(), 0);
    assert!(d.cache_memory() >= 32 * MIB);
    d.clear_cache();
    assert_eq!(d.cache_memory(), 0);
    assert_eq!(d.memory_stats().live_buffers, 0);
    let after = driver_bytes(&d);
    match d.backend() {
        wgarray::wgpu::Backend::Vulkan => {
            let (baseline, during, after) = (baseline.unwrap(), during.unwrap(), after.unwrap());
            assert!(during >= baseline + 32 * MIB, "{during} vs {baseline}");
            assert_eq!(after, baseline, "every byte went back to the driver");
        }
        _ => assert!(after.is_none() || after == baseline),
    }
}

#[test]
fn cache_limit_zero_frees_at_once_and_the_report_agrees() {
    let d = device();
    d.set_cache_limit(0);
    // Let wgpu and the device make their lasting allocations first (staging,
    // the parameter buffer).
    let warm = Array::from_slice(&[1.0f32; 8], &[8], &d).unwrap();
    (&warm + &warm).unwrap().to_vec::<f32>().unwrap();
    drop(warm);
    let baseline = driver_bytes(&d);
    let before = d.memory_stats();
    let a = evaluated(Array::full(&[4 * MIB_F32], 1.0, DType::F32, &d).unwrap());
    assert_eq!(d.active_memory(), 4 * MIB);
    drop(a);
    let after = d.memory_stats();
    assert_eq!(after.active, 0);
    assert_eq!(after.cache, 0);
    assert_eq!(
        after.frees,
        before.frees + after.allocations - before.allocations
    );
    assert_eq!(driver_bytes(&d), baseline);
}

#[test]
fn the_pool_reuses_near_sizes_only() {
    let d = device();
    let n = MIB_F32;
    drop(evaluated(Array::full(&[n], 1.0, DType::F32, &d).unwrap()));
    let s0 = d.memory_stats();
    assert_cache(&d, MIB);
    // Same size: a hit.
    let a = evaluated(Array::full(&[n], 2.0, DType::F32, &d).unwrap());
    let s1 = d.memory_stats();
    assert_eq!(s1.cache_hits, s0.cache_hits + 1);
    assert_eq!(s1.allocations, s0.allocations);
    drop(a);
    // Less than half: not served by the 1 MiB buffer (it would waste > 2 pages).
    let b = evaluated(Array::full(&[n / 3], 2.0, DType::F32, &d).unwrap());
    let s2 = d.memory_stats();
    assert_eq!(s2.allocations, s1.allocations + 1);
    assert_cache(&d, MIB);
    // Larger: a miss too.
    let c = evaluated(Array::full(&[n + 1], 2.0, DType::F32, &d).unwrap());
    assert_eq!(d.memory_stats().allocations, s2.allocations + 1);
    assert_eq!(c.to_vec::<f32>().unwrap()[n], 2.0);
    drop((b, c));
    assert_eq!(d.active_memory(), 0);
    // Granularity: 513 MiB would not hold 1 GiB; here, 1 byte past a page
    // rounds to two pages, not to a power of two.
    let e = evaluated(Array::full(&[4097], 1.0, DType::F32, &d).unwrap());
    assert_eq!(d.active_memory(), 32 * 1024);
    drop(e);
}

#[test]
fn set_cache_limit_evicts_least_recently_released_first() {
    let d = device();
    let a = evaluated(Array::full(&[MIB_F32], 1.0, DType::F32, &d).unwrap());
    let b = evaluated(Array::full(&[2 * MIB_F32], 1.0, DType::F32, &d).unwrap());
    drop(a); // released first
    drop(b);
    assert_cache(&d, 3 * MIB);
    let default = d.cache_limit();
    assert_eq!(d.set_cache_limit(2 * MIB), default);
    assert_cache(&d, 2 * MIB);
    d.set_cache_limit(2 * MIB + MIB / 2);
    // The 2 MiB one is still there: a 2 MiB request hits.
    let hits = d.memory_stats().cache_hits;
    let c = evaluated(Array::full(&[2 * MIB_F32], 3.0, DType::F32, &d).unwrap());
    drop(c);
    let e = evaluated(Array::full(&[2 * MIB_F32], 3.0, DType::F32, &d).unwrap());
    assert!(d.memory_stats().cache_hits >= hits + 2);
    drop(e);
    d.clear_cache();
    assert_eq!(d.cache_memory(), 0);
    assert_eq!(d.set_cache_limit(default), 2 * MIB + MIB / 2);
    assert_eq!(d.cache_limit(), default);
}

#[test]
fn the_default_cache_limit_is_the_adapters_max_buffer_size() {
    let d = device();
    let max = d.limits().max_buffer_size;
    assert_eq!(d.cache_limit(), max.max(256 * MIB), "max_buffer_size {max}");
}

#[test]
fn peak_and_reset_peak() {
    let d = device();
    let a = evaluated(Array::full(&[MIB_F32], 1.0, DType::F32, &d).unwrap());
    let b = evaluated(Array::full(&[2 * MIB_F32], 1.0, DType::F32, &d).unwrap());
    assert!(d.peak_memory() >= 3 * MIB);
    drop(b);
    assert!(d.peak_memory() >= 3 * MIB);
    d.reset_peak_memory();
    assert_eq!(d.peak_memory(), d.active_memory());
    assert_eq!(d.active_memory(), MIB);
    drop(a);
}

#[test]
fn memory_limit_evicts_the_cache_then_fails_and_leaves_the_graph_intact() {
    let d = device();
    let mut rng = Rng::new(7);
    let x = rng.vec_f32(MIB_F32);
    let a = Array::from_slice(&x, &[MIB_F32], &d).unwrap();
    let b = Array::from_slice(&x, &[MIB_F32], &d).unwrap();
    let junk = evaluated(Array::full(&[MIB_F32], 5.0, DType::F32, &d).unwrap());
    drop(evaluated(
        Array::full(&[2 * MIB_F32], 0.0, DType::F32, &d).unwrap(),
    )); // 2 MiB cached
    assert_cache(&d, 2 * MIB);
    let prev = d.set_memory_limit(3 * MIB + MIB / 2);
    assert_eq!(prev, u64::MAX);

    let c = (&a + &b).unwrap();
    let err = c
        .eval()
        .expect_err("3 MiB active + 1 MiB would pass the limit");
    match err {
        Error::OutOfMemory {
            requested,
            active,
            limit,
        } => {
            assert_eq!(requested, MIB);
            assert_eq!(active, 3 * MIB);
            assert_eq!(limit, 3 * MIB + MIB / 2);
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(
        d.cache_memory(),
        0,
        "the cache was emptied before giving up"
    );
    assert!(!c.is_evaluated());
    assert_eq!(d.active_memory(), 3 * MIB);

    drop(junk);
    c.eval().unwrap();
    d.set_memory_limit(u64::MAX);
    let got = c.to_vec::<f32>().unwrap();
    for i in (0..MIB_F32).step_by(4099) {
        assert_eq!(got[i], x[i] + x[i]);
    }
    d.set_memory_limit(u64::MAX);
    drop((a, b, c));
    assert_empty(&d);
}

#[test]
fn an_eval_stopped_midway_keeps_what_it_finished() {
    let d = device();
    let a = evaluated(Array::full(&[MIB_F32], 1.0, DType::F32, &d).unwrap());
    let junk = evaluated(Array::full(&[MIB_F32], 1.0, DType::F32, &d).unwrap());
    d.set_memory_limit(3 * MIB + MIB / 2);
    let b = (&a * 2.0).unwrap(); // fits: 3 MiB
    let c = (&b * &a).unwrap(); // would be 4 MiB (b is held, no donation)
    let err = wgarray::eval(&[&b, &c]).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    assert!(b.is_evaluated(), "the node before the failure ran");
    assert!(!c.is_evaluated());
    drop(junk);
    c.eval().unwrap();
    d.set_memory_limit(u64::MAX);
    assert_eq!(b.to_vec::<f32>().unwrap()[0], 2.0);
    assert_eq!(c.to_vec::<f32>().unwrap()[7], 2.0);
    drop((a, b, c));
    assert_empty(&d);
}

#[test]
fn donation_keeps_a_chain_of_50_ops_on_64_mib_within_two_buffers() {
    let d = device();
    let n = 64 * MIB_F32;
    let x = Array::full(&[n], 0.5, DType::F32, &d).unwrap();
    x.eval().unwrap();
    d.reset_peak_memory();
    let mut y = x.clone();
    for i in 0..50 {
        y = if i % 2 == 0 {
            (&y + 1.0).unwrap()
        } else {
            (&y * 1.0).unwrap()
        };
    }
    y.eval().unwrap();
    let peak = d.peak_memory();
    assert!(peak <= 2 * 64 * MIB + MIB, "peak {peak} bytes");
    let got = y.to_vec::<f32>().unwrap();
    assert_eq!(got[0], 25.5);
    assert_eq!(got[n - 1], 25.5);
    // x was held by the caller, so it was not written over.
    assert_eq!(x.to_vec::<f32>().unwrap()[n / 2], 0.5);
    drop((x, y));
    assert_empty(&d);
}

#[test]
fn donation_never_writes_over_an_array_someone_holds() {
    let d = device();
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3], &d).unwrap();
    let b = (&a + 1.0).unwrap();
    let c = (&b * 2.0).unwrap();
    wgarray::eval(&[&c]).unwrap();
    // b is held by the caller: c must not have been written into it.
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0]);
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![4.0, 6.0, 8.0]);
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
}

#[test]
fn a_buffer_released_while_in_flight_is_reused_safely() {
    let d = device();
    let mut rng = Rng::new(11);
    let n = 3 * MIB_F32 + 17;
    let (x, y) = (rng.vec_f32(n), rng.vec_f32(n));
    let a = Array::from_slice(&x, &[n], &d).unwrap();
    let b = (&a * 2.0).unwrap();
    b.eval().unwrap(); // submitted; may still be running
    drop(a); // its buffer goes back to the pool now
    let hits = d.memory_stats().cache_hits;
    let c = Array::from_slice(&y, &[n], &d).unwrap(); // takes a's buffer
    assert_eq!(
        d.memory_stats().cache_hits,
        hits + 1,
        "a's buffer was reused"
    );
    let e = (&c * 3.0).unwrap();
    let (bv, ev) = (b.to_vec::<f32>().unwrap(), e.to_vec::<f32>().unwrap());
    for i in 0..n {
        assert_eq!(bv[i], x[i] * 2.0, "b[{i}]");
        assert_eq!(ev[i], y[i] * 3.0, "e[{i}]");
    }
}

// ---- lifetime tests (issue 3, item 7); each ends with nothing alive ----

#[test]
fn lifetime_a_both_split_outputs_dropped_unevaluated_in_each_order() {
    for first in [0, 1] {
        let d = device();
        let x = Array::from_slice(&[1.0f32; 64], &[8, 8], &d).unwrap();
        let mut parts = (&x + 1.0).unwrap().split(2, 0).unwrap();
        drop(x);
        let a = parts.remove(first);
        drop(a);
        assert!(d.live_nodes() > 0, "the sibling still holds the node");
        drop(parts);
        assert_empty(&d);
    }
}

#[test]
fn lifetime_b_one_split_output_kept_and_evaluated() {
    let d = device();
    let x = Array::from_slice(&[1.0f32; 64], &[8, 8], &d).unwrap();
    let mut parts = (&x + 1.0).unwrap().split(2, 1).unwrap();
    drop(x);
    let kept = parts.pop().unwrap();
    drop(parts);
    assert_eq!(kept.to_vec::<f32>().unwrap(), vec![2.0; 32]);
    assert_eq!(d.live_nodes(), 0);
    assert_eq!(
        d.active_memory(),
        256,
        "only the kept output (128 bytes, rounded)"
    );
    drop(kept);
    assert_empty(&d);
}

#[test]
fn lifetime_c_last_split_output_replaced_by_assignment() {
    let d = device();
    let x = Array::from_slice(&[1.0f32; 4 * MIB_F32], &[4, MIB_F32], &d).unwrap();
    let mut parts = x.split(4, 0).unwrap();
    drop(x);
    let mut last = parts.pop().unwrap();
    drop(parts);
    assert!(
        d.active_memory() >= 4 * MIB,
        "the input is held through the node"
    );
    assert_eq!(last.shape(), &[1, MIB_F32]);
    last = Array::scalar(1.0, DType::F32, &d).unwrap();
    assert_eq!(d.live_nodes(), 0);
    assert_eq!(d.live_arrays(), 1);
    assert_eq!(d.active_memory(), 256);
    drop(last);
    assert_empty(&d);
}

#[test]
fn lifetime_d_a_split_output_assigned_over_its_sibling() {
    let d = device();
    let x = Array::from_slice(&[2.0f32; 2 * MIB_F32], &[2, MIB_F32], &d).unwrap();
    let [mut a, b]: [Array; 2] = x.split(2, 0).unwrap().try_into().unwrap();
    drop(x);
    assert_eq!(a.shape(), b.shape());
    a = b; // the group's last outside reference is now `a` itself
    assert_eq!(d.live_arrays(), 2, "the input and one output");
    assert_eq!(a.to_vec::<f32>().unwrap()[0], 2.0);
    drop(a);
    assert_empty(&d);
}

/// The three outputs of `quantize` (one node), as a vector, from a fresh
/// `[4, 64 Ki]` f32 weight of 1 MiB that only the node holds.
fn quantized(d: &Device) -> Vec<Array> {
    let mut rng = Rng::new(17);
    let w = Array::from_slice(&rng.vec_f32(4 * MIB_F32), &[4, MIB_F32], d).unwrap();
    let (wq, s, b) = wgarray::quantize(&w, 64, 4).unwrap();
    vec![wq, s, b]
}

#[test]
fn lifetime_g_quantize_outputs_dropped_in_every_order_unevaluated() {
    for order in [[0, 1, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
        let d = device();
        let mut outs: Vec<Option<Array>> = quantized(&d).into_iter().map(Some).collect();
        for (n, &i) in order.iter().enumerate() {
            drop(outs[i].take());
            if n < 2 {
                assert!(d.live_nodes() > 0, "a sibling still holds the node");
                assert!(d.active_memory() >= 4 * MIB, "the weight, through the node");
            }
        }
        assert_empty(&d);
    }
}

#[test]
fn lifetime_h_one_quantize_output_kept_evaluated_the_others_dropped() {
    for keep in 0..3 {
        let d = device();
        let mut outs = quantized(&d);
        let kept = outs.remove(keep);
        drop(outs);
        kept.eval().unwrap();
        assert_eq!(
            d.live_nodes(),
            0,
            "evaluated: the node and the weight are gone"
        );
        assert_eq!(d.live_arrays(), 1);
        assert!(d.active_memory() < 4 * MIB, "only the kept output");
        drop(kept);
        assert_empty(&d);
    }
}

#[test]
fn lifetime_i_quantize_outputs_replaced_and_reassigned() {
    let d = device();
    // Replaced by assignment, unevaluated: the last outside reference to
    // the node goes with it.
    let [mut wq, s, b]: [Array; 3] = quantized(&d).try_into().unwrap();
    drop((s, b));
    assert_eq!(wq.dtype(), DType::U32);
    wq = Array::scalar(1.0, DType::F32, &d).unwrap();
    assert_eq!((d.live_nodes(), d.live_arrays()), (0, 1));
    drop(wq);
    assert_empty(&d);
    // A sibling assigned over another, then evaluated.
    let [wq, mut s, b]: [Array; 3] = quantized(&d).try_into().unwrap();
    drop(wq);
    assert_eq!(s.shape(), b.shape());
    s = b;
    assert_eq!(s.to_vec::<f32>().unwrap().len(), 4 * MIB_F32 / 64);
    assert_eq!(d.live_nodes(), 0);
    drop(s);
    assert_empty(&d);
    // mem::replace of an evaluated output, the others evaluated too.
    let mut outs = quantized(&d);
    eval(&outs.iter().collect::<Vec<_>>()).unwrap();
    let old = std::mem::replace(&mut outs[1], Array::scalar(0.0, DType::F32, &d).unwrap());
    drop(old);
    drop(outs);
    assert_empty(&d);
}

fn closure_case(evaluate: Option<bool>) {
    let d = device();
    let mut rng = Rng::new(13);
    let w = Array::from_slice(&rng.vec_f32(64 * 96), &[64, 96], &d).unwrap();
    let x = Array::from_slice(&rng.vec_f32(8 * 64), &[8, 64], &d).unwrap();
    let f = {
        let w = w.clone();
        move |x: &Array| x.matmul(&w).unwrap().split(3, -1).unwrap()
    };
    drop(w);
    let mut kept = Vec::new();
    for i in 0..100 {
        let parts = f(&x);
        match evaluate {
            Some(true) => {
                wgarray::eval(&parts.iter().collect::<Vec<_>>()).unwrap();
            }
            Some(false) => {}
            None => {
                // Evaluation stopped by the memory limit, then given up on.
                let limit = d.active_memory();
                d.set_memory_limit(limit);
                assert!(matches!(parts[0].eval(), Err(Error::OutOfMemory { .. })));
                d.set_memory_limit(u64::MAX);
            }
        }
        if i % 10 == 0 {
            kept.push(parts[i % 3].clone());
        }
    }
    drop(kept);
    drop(f);
    drop(x);
    assert_empty(&d);
    d.clear_cache();
    assert_eq!(d.memory_stats().live_buffers, 0);
}

#[test]
fn lifetime_e_closure_capturing_a_weight_called_100_times_then_dropped() {
    closure_case(Some(true));
}

#[test]
fn lifetime_f_closure_with_no_output_evaluated() {
    closure_case(Some(false));
}

#[test]
fn lifetime_f_closure_with_eval_stopped_by_out_of_memory() {
    closure_case(None);
}

#[test]
fn memory_api() -> R {
    let d = device();
    d.set_cache_limit(0);
    {
        let x = Array::ones(&[1 << 16], DType::F32, &d).unwrap();
        let y = (&x * 2.0)?;
        let s = y.sum(None, false)?;
        d.clear_cache();
        assert_eq!(s.item::<f32>()?, 2.0 * 65536.0);
        d.clear_cache();
        assert_eq!(d.cache_memory(), 0);
    }
    assert_eq!(d.cache_memory(), 0);
    assert_empty(&d);
    d.set_cache_limit(u64::MAX);
    let x = Array::ones(&[1 << 16], DType::F32, &d).unwrap();
    x.eval()?;
    d.reset_peak_memory();
    assert_eq!(d.peak_memory(), d.active_memory());
    drop(x);
    assert_eq!(d.active_memory(), 0);
    d.reset_peak_memory();
    assert_eq!(d.peak_memory(), 0);
    Ok(())
}

#[test]
fn oom_midway_then_recover() -> R {
    let d = device();
    {
        let x = Array::from_slice(&vec![1.0f32; 1 << 16], &[1 << 16], &d)?;
        let a = (&x + 1.0)?;
        let b = (&x * 3.0)?;
        let c = (&a + &b)?; // needs a, b, c alive at once
        let e = c.sum(None, false)?;
        let active = d.active_memory();
        d.set_memory_limit(active + (1 << 18) + 4096); // room for ~1 more buffer
        let r = e.eval();
        assert!(matches!(r, Err(Error::OutOfMemory { .. })), "{r:?}");
        d.set_memory_limit(u64::MAX);
        assert_eq!(e.item::<f32>()?, 5.0 * (1 << 16) as f32);
        assert_eq!(a.to_vec::<f32>()?[0], 2.0);
        assert_eq!(c.to_vec::<f32>()?[0], 5.0);
        // Read-back staging is not counted: a result that fit reads back
        // with the limit at what is active.
        let y = (&x * 2.0)?;
        y.eval()?;
        d.set_memory_limit(d.active_memory());
        d.clear_cache();
        assert_eq!(y.to_vec::<f32>()?[0], 2.0);
        d.set_memory_limit(u64::MAX);
        // memory limit 0: from_slice and scalar
        d.set_memory_limit(0);
        assert!(matches!(
            Array::scalar(1.0, DType::F32, &d),
            Err(Error::OutOfMemory { .. })
        ));
        assert!(Array::from_slice(&[1.0f32], &[1], &d).is_err());
        d.set_memory_limit(u64::MAX);
    }
    assert_empty(&d);
    Ok(())
}

#[test]
fn donation_never_overwrites_held_inputs() -> R {
    let d = device();
    {
        let x = f(&d, &[1.0, 2.0, 3.0, 4.0], &[4]);
        let y = (&x + &x)?;
        let z = (&x * 2.0)?;
        eval(&[&y, &z])?;
        assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(y.to_vec::<f32>()?, vec![2.0, 4.0, 6.0, 8.0]);
        // intermediate held also by a pending view
        let t = (&x * 10.0)?;
        let v = t.reshape(&[2, 2])?;
        let w = (t + 1.0)?; // moves t
        eval(&[&w, &v])?;
        assert_eq!(v.to_vec::<f32>()?, vec![10.0, 20.0, 30.0, 40.0]);
        assert_eq!(w.to_vec::<f32>()?, vec![11.0, 21.0, 31.0, 41.0]);
        // intermediate held by an evaluated view, then consumed
        let t = (&x * 10.0)?;
        let v = t.slice(&[Slice::range(0, 4)])?;
        v.eval()?;
        let w = (t + 1.0)?;
        w.eval()?;
        assert_eq!(v.to_vec::<f32>()?, vec![10.0, 20.0, 30.0, 40.0]);
        // intermediate used by two consumers in one eval
        let t = (&x * 10.0)?;
        let a = (&t + 1.0)?;
        let b = (&t - 1.0)?;
        drop(t);
        eval(&[&b, &a])?;
        assert_eq!(a.to_vec::<f32>()?, vec![11.0, 21.0, 31.0, 41.0]);
        assert_eq!(b.to_vec::<f32>()?, vec![9.0, 19.0, 29.0, 39.0]);
        // t used twice by one op, as intermediate
        let t = (&x * 10.0)?;
        let tt = (&t * &t)?;
        drop(t);
        assert_eq!(tt.to_vec::<f32>()?, vec![100.0, 400.0, 900.0, 1600.0]);
        // contiguous() shares a dense buffer; consuming it must not clobber x
        let c = x.contiguous()?;
        let c1 = (c + 5.0)?;
        assert_eq!(c1.to_vec::<f32>()?, vec![6.0, 7.0, 8.0, 9.0]);
        assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
        let c = x.contiguous()?;
        c.eval()?;
        let c2 = (c + 5.0)?;
        c2.eval()?;
        assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
        // evaluated reshape view of x, consumed
        let rv = x.reshape(&[2, 2])?;
        rv.eval()?;
        let r2 = (rv * 3.0)?;
        r2.eval()?;
        assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
        // where_ donation with the same intermediate as cond and value
        let t = (&x - 2.5)?;
        let w = where_(&t, &t, &Array::scalar(0.0, DType::F32, &d)?)?;
        drop(t);
        assert_eq!(w.to_vec::<f32>()?, vec![-1.5, -0.5, 0.5, 1.5]);
    }
    assert_empty(&d);
    Ok(())
}

#[test]
fn donation_chain_f16_bool_odd() -> R {
    let d = device();
    {
        let v: Vec<f16> = (0..7).map(|x| f16::from_f32(x as f32)).collect();
        let x = Array::from_slice(&v, &[7], &d)?;
        let y = (((&x + 1.0)? * 2.0)? - 1.0)?;
        let want: Vec<f16> = v
            .iter()
            .map(|h| f16::from_f32((h.to_f32() + 1.0) * 2.0 - 1.0))
            .collect();
        assert_eq!(y.to_vec::<f16>()?, want);
        assert_eq!(x.to_vec::<f16>()?, v);
        let b = x.greater(&Array::scalar(2.0, DType::F16, &d)?)?;
        let nb = b.logical_not()?.logical_not()?.logical_not()?;
        assert_eq!(
            nb.to_vec::<bool>()?,
            vec![true, true, true, false, false, false, false]
        );
    }
    assert_empty(&d);
    Ok(())
}

#[test]
fn where_donating_cond() -> R {
    let d = device();
    {
        let x = f(&d, &[1.0, 2.0, 3.0, 4.0, 5.0], &[5]);
        let cond = (&x - 3.0)?; // f32, dense, sole: donation candidate at input 0
        let w = where_(&cond, &(&x * 10.0)?, &(&x * -1.0)?)?;
        drop(cond);
        assert_eq!(w.to_vec::<f32>()?, vec![10.0, 20.0, -3.0, 40.0, 50.0]);
    }
    assert_empty(&d);
    Ok(())
}

#[test]
fn divmod_with_donated_inputs() -> R {
    let d = device();
    {
        let av = [7.0f32, -7.0, 7.0, -7.0, 5.5, 0.0];
        let bv = [3.0f32, 3.0, -3.0, -3.0, 2.0, 4.0];
        let a = f(&d, &av, &[6]);
        let b = f(&d, &bv, &[6]);
        for donate_a in [true, false] {
            let ta = (&a * 1.0)?;
            let tb = (&b * 1.0)?;
            let (q, r) = if donate_a {
                ta.divmod(&b)?
            } else {
                a.divmod(&tb)?
            };
            drop((ta, tb));
            eval(&[&q, &r])?;
            let qv = q.to_vec::<f32>()?;
            let rv = r.to_vec::<f32>()?;
            for k in 0..6 {
                let wq = (av[k] / bv[k]).floor();
                let wr = av[k] - wq * bv[k];
                assert_eq!((qv[k], rv[k]), (wq, wr), "k {k} donate_a {donate_a}");
            }
        }
        // i32
        let ai = (&i(&d, &[7, -7, 7, -7, 0, 5], &[6]) * 1)?;
        let (q, r) = ai.divmod(i(&d, &[3, 3, -3, -3, 0, 0], &[6]))?;
        drop(ai);
        assert_eq!(q.to_vec::<i32>()?, vec![2, -3, -3, 2, 0, 0]);
        assert_eq!(r.to_vec::<i32>()?, vec![1, 2, -2, -1, 0, 0]);
    }
    assert_empty(&d);
    Ok(())
}

// ---- the cache under a growing request pattern ----

/// One row of 16 KiB (4096 f32) appended per step, 200 steps, keeping only
/// the newest array and evaluating each step: every request is a little
/// larger than any cached buffer, so none is ever reused (a decode loop with
/// a growing KV cache does the same). Active plus cached memory must stay
/// within 3 times the peak of active memory, and the values must be right.
#[test]
fn a_growing_array_keeps_active_plus_cache_within_three_peaks() {
    const ROW: usize = 4096;
    const STEPS: usize = 200;
    let d = device();
    let mut rng = Rng::new(31);
    let mut want: Vec<f32> = rng.vec_f32(ROW);
    let mut x = Array::from_slice(&want, &[1, ROW], &d).unwrap();
    let mut worst = 0;
    for _ in 1..STEPS {
        let row = rng.vec_f32(ROW);
        want.extend_from_slice(&row);
        let r = Array::from_slice(&row, &[1, ROW], &d).unwrap();
        x = wgarray::concatenate(&[&x, &r], 0).unwrap();
        x.eval().unwrap();
        let s = d.memory_stats();
        worst = worst.max(s.active + s.cache);
    }
    let s = d.memory_stats();
    assert_eq!(x.shape(), &[STEPS, ROW]);
    assert!(
        worst <= 3 * s.peak,
        "active + cache reached {worst} bytes, {:.1} times the peak of {} bytes \
         ({} cache hits, {} misses)",
        worst as f64 / s.peak as f64,
        s.peak,
        s.cache_hits,
        s.cache_misses
    );
    // The last array holds every row, in order.
    assert_eq!(x.to_vec::<f32>().unwrap(), want);
    drop(x);
    assert_empty(&d);
}

/// The footprint rule must not cost an ordinary loop its reuse: the same
/// ops over the same shapes, step after step, take every buffer from the
/// cache after the first step.
#[test]
fn a_steady_loop_reuses_every_buffer_after_its_first_step() {
    let d = device();
    let mut rng = Rng::new(41);
    let w1 = Array::from_slice(&rng.vec_f32(64 * 256), &[64, 256], &d).unwrap();
    let w2 = Array::from_slice(&rng.vec_f32(256 * 33), &[256, 33], &d).unwrap();
    let x = rng.vec_f32(129 * 64);
    let step = || {
        let x = Array::from_slice(&x, &[129, 64], &d).unwrap();
        let h = x.matmul(&w1).unwrap().relu().unwrap();
        let y = h.matmul(&w2).unwrap().softmax(-1).unwrap();
        y.to_vec::<f32>().unwrap()
    };
    let first = step();
    for row in first.chunks(33) {
        let total: f32 = row.iter().sum();
        assert!((total - 1.0).abs() < 1e-5, "softmax row sums to {total}");
    }
    let before = d.memory_stats();
    for _ in 0..4 {
        assert_eq!(step(), first);
    }
    let after = d.memory_stats();
    assert_eq!(
        after.cache_misses, before.cache_misses,
        "no new buffer after the first step"
    );
    assert!(after.cache_hits >= before.cache_hits + 4 * 5);
}

#[test]
fn reset_peak_memory_does_not_shrink_the_cache() {
    let d = device();
    drop(evaluated(
        Array::full(&[4 * MIB_F32], 1.0, DType::F32, &d).unwrap(),
    ));
    assert_cache(&d, 4 * MIB);
    d.reset_peak_memory();
    assert_eq!(d.peak_memory(), 0);
    // A miss: the footprint rule follows the high-water mark (4 MiB), not
    // the user's peak, so the cached 4 MiB stay.
    let small = evaluated(Array::full(&[1000], 1.0, DType::F32, &d).unwrap());
    assert_cache(&d, 4 * MIB);
    drop(small);
    assert_cache(&d, 4 * MIB + 4096);
}

// ---- memory snapshot and history ----

/// Bytes a request of `bytes` takes in the pool: 256-byte granules below
/// 16 KiB, 16 KiB pages above.
fn pooled(bytes: u64) -> u64 {
    if bytes <= 16384 {
        bytes.div_ceil(256) * 256
    } else {
        bytes.div_ceil(16384) * 16384
    }
}

#[test]
fn a_leaked_array_shows_up_in_the_snapshot_with_its_call_site() {
    let d = device();
    d.record_memory_history(true);
    let mut rng = Rng::new(43);
    let a = Array::from_slice(&rng.vec_f32(33 * 64), &[33, 64], &d).unwrap();
    let b = Array::from_slice(&rng.vec_f32(64 * 1025), &[64, 1025], &d).unwrap();
    let product_line = line!() + 1;
    let product = a.matmul(&b).unwrap();
    product.eval().unwrap();
    let view_line = line!() + 1;
    let view = product.transpose();
    view.eval().unwrap();
    std::mem::forget(view); // leaked on purpose
    drop((a, b, product));

    let snap = d.memory_snapshot();
    assert!(snap.history);
    let active: Vec<_> = snap.buffers.iter().filter(|b| !b.cached).collect();
    assert_eq!(active.len(), 1, "only the leaked view's buffer:\n{snap}");
    let buf = active[0];
    assert_eq!(buf.bytes, pooled(33 * 1025 * 4));
    assert_eq!(buf.bytes, snap.stats.active);
    assert!(!buf.readback);
    let o = buf.origin.expect("history on");
    assert_eq!(
        (o.op, o.location.file(), o.location.line()),
        ("matmul", file!(), product_line)
    );
    // The product itself is gone; the view that holds its buffer is listed.
    assert_eq!(buf.arrays.len(), 1, "{snap}");
    let v = &buf.arrays[0];
    assert_eq!((v.shape.as_slice(), v.dtype), (&[1025, 33][..], DType::F32));
    assert_eq!((v.offset, v.strides.as_slice()), (0, &[1, 1025][..]));
    let vo = v.origin.expect("history on");
    assert_eq!(
        (vo.op, vo.location.file(), vo.location.line()),
        ("permute", file!(), view_line)
    );
    // The inputs went back to the cache, still labelled.
    let cached: Vec<_> = snap.buffers.iter().filter(|b| b.cached).collect();
    assert_eq!(cached.len(), 2);
    assert!(cached.iter().all(|b| b.origin.unwrap().op == "from_slice"));
    assert_eq!(
        cached.iter().map(|b| b.bytes).sum::<u64>(),
        snap.stats.cache
    );

    let text = snap.to_string();
    assert!(
        text.contains(&format!("matmul at {}:{product_line}:", file!())),
        "{text}"
    );
    assert!(text.contains("float32[1025, 33] permute at"), "{text}");

    let json: serde_json::Value = serde_json::from_str(&snap.to_json()).unwrap();
    assert_eq!(json["active"], snap.stats.active);
    assert_eq!(json["history"], true);
    let j = &json["buffers"][0];
    assert_eq!(j["bytes"], buf.bytes);
    assert_eq!(j["cached"], false);
    assert_eq!(j["origin"]["op"], "matmul");
    assert_eq!(j["origin"]["file"], file!());
    assert_eq!(j["origin"]["line"], product_line);
    assert_eq!(j["arrays"][0]["shape"], serde_json::json!([1025, 33]));
    assert_eq!(j["arrays"][0]["dtype"], "float32");
    assert_eq!(j["arrays"][0]["strides"], serde_json::json!([1, 1025]));
    assert_eq!(j["arrays"][0]["origin"]["line"], view_line);
    assert_eq!(json["buffers"].as_array().unwrap().len(), 3);
}

#[test]
fn with_history_off_the_snapshot_still_lists_every_buffer() {
    let d = device();
    let a = evaluated(Array::full(&[MIB_F32], 1.0, DType::F32, &d).unwrap());
    let b = evaluated(Array::full(&[3], 1.0, DType::F32, &d).unwrap());
    drop(evaluated(
        Array::full(&[2 * MIB_F32], 1.0, DType::F32, &d).unwrap(),
    ));
    let snap = d.memory_snapshot();
    assert!(!snap.history);
    let sizes: Vec<(u64, bool)> = snap.buffers.iter().map(|b| (b.bytes, b.cached)).collect();
    assert_eq!(sizes, vec![(MIB, false), (256, false), (2 * MIB, true)]);
    assert_eq!(snap.stats.active, MIB + 256);
    assert_eq!(snap.stats.live_buffers, 3);
    assert!(
        snap.buffers
            .iter()
            .all(|b| b.origin.is_none() && b.arrays.is_empty())
    );
    assert!(snap.to_string().contains("not recorded: history was off"));
    assert!(d.memory_timeline().events.is_empty());
    drop((a, b));
}

#[test]
fn the_timeline_records_allocations_hits_releases_and_frees() {
    use wgarray::MemoryEventKind::{Alloc, CacheHit, Free, Release};
    let d = device();
    d.set_cache_limit(2 * MIB);
    d.record_memory_history(true);
    let line_a = line!() + 1;
    let a = evaluated(Array::full(&[MIB_F32], 1.0, DType::F32, &d).unwrap());
    let line_b = line!() + 1;
    let b = evaluated(Array::full(&[2 * MIB_F32], 2.0, DType::F32, &d).unwrap());
    drop(a); // to the cache
    let line_c = line!() + 1;
    let c = evaluated(Array::full(&[MIB_F32], 3.0, DType::F32, &d).unwrap()); // a's buffer
    drop(b); // to the cache (2 MiB: the limit)
    drop(c); // to the cache, evicting b's buffer (least recently released)

    let t = d.memory_timeline();
    let (ia, ib) = (t.events[0].buffer, t.events[1].buffer);
    let got: Vec<_> = t
        .events
        .iter()
        .map(|e| {
            let o = e.origin.expect("history on");
            assert_eq!(o.location.file(), file!());
            assert_eq!(o.op, "full");
            (
                e.kind,
                e.buffer,
                e.bytes / MIB,
                e.active / MIB,
                e.cache / MIB,
                o.location.line(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (Alloc, ia, 1, 1, 0, line_a),
            (Alloc, ib, 2, 3, 0, line_b),
            (Release, ia, 1, 2, 1, line_a),
            (CacheHit, ia, 1, 3, 0, line_c),
            (Release, ib, 2, 1, 2, line_b),
            (Free, ib, 2, 0, 0, line_b),
            (Release, ia, 1, 0, 1, line_c),
        ]
    );
    assert!(t.events.windows(2).all(|w| w[0].time_s <= w[1].time_s));
    assert_eq!(t.dropped, 0);
    // At the peak (3 MiB, first reached by b's allocation) a and b held it.
    let peak = t.peak_index().unwrap();
    assert_eq!(peak, 1);
    let holders: Vec<_> = t
        .holders_at(peak)
        .iter()
        .map(|h| (h.buffer, h.bytes / MIB, h.origin.unwrap().location.line()))
        .collect();
    assert_eq!(holders, vec![(ib, 2, line_b), (ia, 1, line_a)]);

    let json: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
    assert_eq!(json["events"].as_array().unwrap().len(), 7);
    assert_eq!(json["events"][3]["kind"], "cache_hit");
    assert_eq!(json["events"][3]["origin"]["line"], line_c);

    // Off: nothing more is recorded, and the timeline is gone.
    d.record_memory_history(false);
    drop(evaluated(Array::full(&[8], 1.0, DType::F32, &d).unwrap()));
    assert!(d.memory_timeline().events.is_empty());
    d.record_memory_history(true);
    assert!(d.memory_timeline().events.is_empty(), "a fresh timeline");
}

/// `#[track_caller]` must reach from every public op down to where nodes
/// and buffers are recorded, through the ops that call other ops (casts in
/// binary ops and concatenate, softmax's steps, matmul's K chunks, keepdims
/// reshapes, read-back copies): every origin names this file.
#[test]
fn every_op_records_the_callers_location() {
    use wgarray::{Slice, random};
    let d = device();
    d.record_memory_history(true);
    let mut rng = Rng::new(47);
    let x = Array::from_slice(&rng.vec_f32(7 * 33), &[7, 33], &d).unwrap();
    let idx = Array::from_slice(&[0i32, 5, -1], &[3], &d).unwrap();
    let xb = x.astype(DType::BF16).unwrap();
    let key = random::key(7, &d).unwrap();
    let long_a = Array::ones(&[1, 40_000], DType::F32, &d).unwrap();
    let long_b = Array::ones(&[40_000, 1], DType::F32, &d).unwrap();
    let positive = (&x.abs().unwrap() + 1.0).unwrap();
    let (q, r) = x.divmod(&positive).unwrap();
    let (tv, ti) = x.topk(3, -1).unwrap();
    let (mv, mi) = x.max_with_index(0, false).unwrap();
    let mut held: Vec<Array> = [
        x.exp(),
        x.sigmoid(),
        &x + &x,
        &x * 2.0,
        -&x,
        x.maximum(Array::zeros(&[33], DType::F32, &d).unwrap()),
        x.greater(Array::scalar(0.0, DType::F32, &d).unwrap()),
        wgarray::where_(&x.greater(&positive).unwrap(), &x, &xb),
        x.sum(1isize, false),
        xb.mean(-1isize, true),
        x.var(-1isize, true, 1),
        x.std(0isize, false, 0),
        x.argmax(1, false),
        x.logsumexp(-1isize, true),
        x.softmax(-1),
        xb.softmax(-1),
        xb.layer_norm(None, None, 1e-5),
        x.rms_norm(Some(&Array::ones(&[33], DType::F32, &d).unwrap()), 1e-5),
        x.log_softmax(0),
        x.reshape(&[33, 7]),
        Ok(x.transpose()),
        x.permute([1, 0]),
        x.slice(&[Slice::range(1, 5), Slice::step(2)]),
        x.broadcast_to(&[2, 7, 33]),
        x.expand_dims(0).and_then(|e| e.squeeze(None)),
        Ok(x.ravel()),
        x.swapaxes(0, 1),
        x.take(&idx, 1),
        x.contiguous(),
        wgarray::concatenate(&[&x, &xb], 0),
        wgarray::stack(&[&x, &x], 0),
        x.matmul(&x.transpose()),
        Array::zeros(&[7], DType::F32, &d)
            .unwrap()
            .addmm(&x, &x.transpose(), 1.0, 0.5),
        long_a.matmul(&long_b),
        wgarray::baseline::matmul_naive(&x, &x.transpose()),
        random::split(&key, 2),
        random::bits(&key, &[5]),
        random::uniform(&key, &[9], 0.0, 1.0, DType::F32),
        random::normal(&key, &[9], 0.0, 1.0, DType::BF16),
        Array::arange(0.0, 10.0, 1.0, DType::I32, &d),
        Ok(Array::full(&[3], 2.0, DType::U32, &d).unwrap()),
        Array::empty(&[5], DType::F32, &d),
    ]
    .into_iter()
    .collect::<wgarray::Result<_>>()
    .unwrap();
    held.extend([q, r, tv, ti, mv, mi]);
    held.extend(x.split(3, 1).unwrap());
    wgarray::eval(&held.iter().collect::<Vec<_>>()).unwrap();
    // A strided read-back: a copy node, then a staging buffer.
    let back = held[20].to_vec::<f32>().unwrap();
    assert_eq!(back.len(), 7 * 33);

    let mut ops = std::collections::BTreeSet::new();
    let t = d.memory_timeline();
    assert!(t.events.len() > 60, "{} events", t.events.len());
    for e in &t.events {
        let o = e.origin.expect("history was on from the start");
        assert_eq!(o.location.file(), file!(), "{e:?}");
        ops.insert(o.op);
    }
    let snap = d.memory_snapshot();
    for b in &snap.buffers {
        let o = b.origin.expect("history was on from the start");
        assert_eq!(o.location.file(), file!(), "buffer {}: {o}", b.id);
        for a in &b.arrays {
            let o = a.origin.expect("made with history on");
            assert_eq!(o.location.file(), file!(), "array {:?}: {o}", a.shape);
            ops.insert(o.op);
        }
    }
    for op in [
        "from_slice",
        "astype",
        "exp",
        "add",
        "multiply",
        "negative",
        "maximum",
        "greater",
        "where",
        "sum",
        "mean",
        "moments",
        "argmax",
        "logsumexp",
        "reshape",
        "permute",
        "slice",
        "broadcast_to",
        "take",
        "concatenate",
        "matmul",
        "random::bits",
        "random::uniform",
        "random::normal",
        "arange",
        "full",
        "empty",
        "scalar",
        "divmod",
        "topk",
        "split",
        "copy",
        "read-back",
    ] {
        assert!(ops.contains(op), "no {op} among {ops:?}");
    }
}

/// The registry behind snapshots holds arrays weakly: with history on, a
/// workload of a few thousand arrays (enough to prune the registry) leaves
/// nothing alive once dropped.
#[test]
fn memory_history_never_keeps_an_array_alive() {
    let d = device();
    d.record_memory_history(true);
    let x = Array::from_slice(&[1.0f32; 64], &[8, 8], &d).unwrap();
    let mut kept = Vec::new();
    for i in 0..1500 {
        let y = (&x + i as f64).unwrap(); // a scalar and a node each
        if i % 100 == 0 {
            let parts = y.split(2, 0).unwrap();
            parts[1].eval().unwrap();
            kept.push(parts[1].clone());
        }
    }
    let snap = d.memory_snapshot();
    let viewed: usize = snap.buffers.iter().map(|b| b.arrays.len()).sum();
    assert_eq!(viewed, 1 + kept.len(), "x and the kept halves");
    drop(snap);
    drop((x, kept));
    assert_empty(&d);
    let snap = d.memory_snapshot();
    assert!(snap.buffers.iter().all(|b| b.cached && b.arrays.is_empty()));
    d.record_memory_history(false);
    assert_empty(&d);
}

/// Issue 36, item 6: under `set_memory_limit(9 MiB)` a 6 MiB result
/// computed within the limit reads back through every read-back path (the
/// staging buffer is host memory the limit does not count), a strided view
/// of it too (its dense copy would pass the limit: the bytes it spans are
/// gathered on the host), while storage allocations stay limited.
#[test]
fn a_result_computed_within_the_limit_reads_back() {
    let d = device();
    let mut rng = Rng::new(36);
    let n = 6 * MIB_F32;
    let host = rng.vec_f32(n);
    d.set_memory_limit(9 * MIB);
    // 6 MiB up, `* 2 + 1` written over it (donation): 6 MiB active.
    let y = ((Array::from_slice(&host, &[n], &d).unwrap() * 2.0).unwrap() + 1.0).unwrap();
    y.eval().unwrap();
    assert_eq!(d.active_memory(), 6 * MIB);
    let want: Vec<f32> = host.iter().map(|&v| v * 2.0 + 1.0).collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), want, "to_vec");
    let got = pollster::block_on(y.to_vec_async::<f32>()).unwrap();
    assert_eq!(got, want, "to_vec_async");
    let mut into = vec![0.0f32; n];
    y.read_into(&mut into).unwrap();
    assert_eq!(into, want, "read_into");
    let path =
        std::env::temp_dir().join(format!("wgarray-limit-{}.safetensors", std::process::id()));
    wgarray::io::save_safetensors(&path, &[("y", &y)]).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let tail: Vec<u8> = want.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert!(bytes.ends_with(&tail), "save_safetensors");

    // A transposed view: its dense copy (6 MiB more) would pass the limit.
    let (r, c) = (1536usize, 1024usize);
    let t = y.reshape(&[r, c]).unwrap().transpose();
    let got = t.to_vec::<f32>().unwrap();
    for i in (0..c).step_by(7) {
        for j in (0..r).step_by(5) {
            assert_eq!(got[i * r + j], want[j * c + i], "transposed [{i}, {j}]");
        }
    }
    let got = pollster::block_on(t.to_vec_async::<f32>()).unwrap();
    assert_eq!(got[5 * r + 3], want[3 * c + 5], "transposed, async");
    // Rows stepped and reversed from an odd start, as f16 (2-byte
    // elements off word boundaries): a 3 MiB cast fits, its view's copy
    // does not beside it and y.
    let h = y.astype(DType::F16).unwrap();
    h.eval().unwrap();
    let v = h
        .reshape(&[r, c])
        .unwrap()
        .slice(&[Slice::new(Some(1), None, 3), Slice::new(None, None, -2)])
        .unwrap();
    let hv: Vec<f16> = v.to_vec().unwrap();
    let rows = (r - 1).div_ceil(3);
    assert_eq!(hv.len(), rows * (c / 2));
    for (k, got) in hv.iter().enumerate().step_by(11) {
        let (i, j) = (1 + 3 * (k / (c / 2)), c - 1 - 2 * (k % (c / 2)));
        assert_eq!(*got, f16::from_f32(want[i * c + j]), "f16 view at {k}");
    }
    drop(v);
    // Storage stays limited: another 6 MiB does not fit.
    let err = (&y + 1.0).unwrap().eval().unwrap_err();
    assert!(
        matches!(err, Error::OutOfMemory { limit, .. } if limit == 9 * MIB),
        "{err}"
    );
    d.set_memory_limit(u64::MAX);
    drop((y, t, h));
    assert_empty(&d);
}

// ---- copy: a buffer of its own, so a view lets its parent go ----

/// Issue 37: a view keeps its whole parent; `copy()` makes a buffer of the
/// view's own size, so dropping the parent returns its memory. Rows in the
/// middle and at offset 0 (where an elementwise kernel may write into its
/// input's buffer: the copy of an evaluated row that nothing else holds
/// must not take the parent's buffer), every dtype family, values against
/// the host, before and after the parent goes.
#[test]
fn copy_of_a_view_lets_the_parent_go() -> R {
    let d = device();
    let (rows, cols) = (257usize, 1025usize);
    for dtype in [DType::F32, DType::I32, DType::F16, DType::U8, DType::Bool] {
        let host: Vec<f64> = {
            let mut rng = Rng::new(37);
            common::arrays::random_values(&mut rng, rows * cols, dtype)
        };
        let parent_bytes = pooled((rows * cols * dtype.size_in_bytes()) as u64);
        let row_bytes = pooled((cols * dtype.size_in_bytes()) as u64);
        for r in [0usize, 100] {
            let want = &host[r * cols..(r + 1) * cols];
            let slice = [Slice::range(r as isize, r as isize + 1)];
            let new_parent = || -> wgarray::Result<Array> {
                // An empty cache: every buffer lent is of its request's size.
                d.clear_cache();
                let a = common::arrays::of_dtype(&d, &host, &[rows, cols], dtype);
                a.eval()?;
                Ok(a)
            };
            // A view, its contiguous() and its astype() to the same dtype
            // share the parent's buffer: all of it stays.
            for how in ["view", "contiguous", "astype"] {
                let big = new_parent()?;
                // One expression: a `let v` shadowed by another would keep
                // the first until the end of the block (README, Memory).
                let v = match how {
                    "view" => big.slice(&slice)?,
                    "contiguous" => big.slice(&slice)?.contiguous()?,
                    _ => big.slice(&slice)?.astype(dtype)?,
                };
                v.eval()?;
                drop(big);
                assert_eq!(d.active_memory(), parent_bytes, "{dtype} row {r} {how}");
                drop(v);
                assert_empty(&d);
            }
            // copy() of the lazy view, of an evaluated view the copy alone
            // holds (reassignment drops the view's handle before eval), and
            // of one the caller still holds.
            for how in ["lazy", "reassigned", "held"] {
                let big = new_parent()?;
                let mut row = big.slice(&slice)?;
                let mut held = None;
                match how {
                    "lazy" => row = row.copy()?,
                    "reassigned" => {
                        row.eval()?;
                        row = row.copy()?;
                    }
                    _ => {
                        row.eval()?;
                        let copy = row.copy()?;
                        held = Some(std::mem::replace(&mut row, copy));
                    }
                }
                // The parent goes before the copy runs: only views hold
                // its buffer then.
                drop(big);
                row.eval()?;
                drop(held);
                assert_eq!(d.active_memory(), row_bytes, "{dtype} row {r} copy {how}");
                assert_eq!(row.shape(), &[1, cols]);
                assert_eq!(row.dtype(), dtype);
                assert_eq!(row.to_f64_vec()?, want, "{dtype} row {r} copy {how}");
                drop(row);
                assert_empty(&d);
            }
        }
    }
    Ok(())
}

/// `copy()` of a transposed view is dense and of an evaluated dense array a
/// new buffer: writing through neither changes the other (functional
/// `slice_update` on the copy leaves the source as it was).
#[test]
fn copy_is_a_new_array_of_the_same_values() -> R {
    let d = device();
    common::poison_pool(&d, 1 << 12);
    let v = Rng::new(5).vec_f32(7 * 33);
    let x = f(&d, &v, &[7, 33]);
    let t = x.transpose().copy()?;
    let mut want = vec![0.0f32; 7 * 33];
    for r in 0..7 {
        for c in 0..33 {
            want[c * 7 + r] = v[r * 33 + c];
        }
    }
    assert_eq!(t.to_vec::<f32>()?, want);
    let c = x
        .copy()?
        .slice_update(&f(&d, &[9.0], &[1, 1]), &[0, 0], None)?;
    assert_eq!(c.to_vec::<f32>()?[0], 9.0);
    assert_eq!(x.to_vec::<f32>()?, v);
    drop((x, t, c));
    assert_empty(&d);
    Ok(())
}

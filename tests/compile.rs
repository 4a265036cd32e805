//! `compile`: compiled functions give the eager results, replay without
//! calling the function, and own what they made: traces, captured arrays and
//! pipelines go when the handle does (deterministic counters only).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{R, Rng, arrays::f, assert_empty, device};
use wgarray::{Array, Axes, DType, Device, Error, compile, compile_with_capacity};

/// The function most tests compile: `relu(x @ w + 1) * 0.5`, split in two
/// along the last axis.
fn mlp(x: &Array, w: &Array) -> wgarray::Result<Vec<Array>> {
    let h = (&x.matmul(w)? + 1.0)?;
    let h = (&h.maximum(&(&h * 0.0)?)? * 0.5)?;
    h.split(2usize, -1)
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn compiled_matches_eager_and_replays_without_calling_f() -> R {
    let d = device();
    let mut rng = Rng::new(7);
    let w = f(&d, &rng.vec_f32(33 * 8), &[33, 8]);
    let calls = Arc::new(AtomicUsize::new(0));
    let (w2, c2) = (w.clone(), Arc::clone(&calls));
    let g = compile(move |x: &[Array]| {
        c2.fetch_add(1, Ordering::SeqCst);
        mlp(&x[0], &w2)
    });
    for fusion in [true, false] {
        d.set_fusion(fusion);
        for _ in 0..3 {
            // A transposed view as the input: not contiguous.
            let x = f(&d, &rng.vec_f32(33 * 7), &[33, 7]).transpose();
            let got = g.call(&[&x])?;
            let want = mlp(&x, &w)?;
            assert_eq!(got.len(), 2);
            for (a, b) in got.iter().zip(&want) {
                assert_eq!(a.shape(), b.shape());
                close(&a.to_vec::<f32>()?, &b.to_vec::<f32>()?);
            }
        }
    }
    // One trace, and one plan per fusion setting: `f` ran once.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(g.len(), 1);
    Ok(())
}

/// A compiled elementwise function replays in the wide variant
/// (kernels/program/wide.rs) for sizes with and without a tail, and for an
/// unaligned view in the scalar one, with no new pipeline after the first
/// call of each.
#[test]
fn compiled_elementwise_replays_wide() -> R {
    let d = device();
    let g = compile(|x: &[Array]| Ok(vec![((&x[0] * 2.0)? + &x[1])?.exp()?]));
    let mut rng = Rng::new(23);
    let big = rng.vec_f32(1031);
    let y = rng.vec_f32(1030);
    let want = |x: &[f32], y: &[f32]| -> Vec<f32> {
        x.iter().zip(y).map(|(a, b)| (a * 2.0 + b).exp()).collect()
    };
    let b = f(&d, &y, &[1030]);
    let full = f(&d, &big, &[1031]);
    // Dense (wide) twice, then a view from element 1 (scalar), twice.
    let dense = full.slice(&[wgarray::Slice::new(None, Some(1030), 1)])?;
    let shifted = full.slice(&[wgarray::Slice::new(Some(1), None, 1)])?;
    for (call, (x, host, wide)) in [
        (&dense, &big[..1030], true),
        (&dense, &big[..1030], true),
        (&shifted, &big[1..], false),
        (&shifted, &big[1..], false),
    ]
    .into_iter()
    .enumerate()
    {
        let (before, pipelines) = (d.wide_dispatches(), d.pipelines_created());
        let got = g.call(&[x, &b])?.remove(0).to_vec::<f32>()?;
        assert_eq!(d.wide_dispatches() > before, wide, "call {call}");
        if call % 2 == 1 {
            assert_eq!(
                d.pipelines_created(),
                pipelines,
                "call {call}: new pipeline"
            );
        }
        close(&got, &want(host, &y));
    }
    Ok(())
}

#[test]
fn common_subexpressions_are_merged_and_dead_code_dropped() -> R {
    let d = device();
    let g = compile(|x: &[Array]| {
        let a = x[0].exp()?.sum(Axes::from(0), false)?;
        let b = x[0].exp()?.sum(Axes::from(0), false)?; // the same
        let _unused = x[0].matmul(&x[0].transpose())?;
        Ok(vec![(&a + &b)?])
    });
    let x = f(&d, &[0.5, -1.0, 2.0, 0.25, 1.5, -0.75], &[3, 2]);
    let text = g.explain(&[&x])?;
    assert!(!text.contains("matmul"), "dead matmul scheduled:\n{text}");
    assert_eq!(text.matches("sum").count(), 1, "sum not merged:\n{text}");
    let before = d.dispatches();
    let got = g.call(&[&x])?.remove(0).to_vec::<f32>()?;
    // exp (fused into nothing else: it feeds a reduction), sum, add, and
    // the read-back copy of `to_vec` at most.
    assert!(d.dispatches() - before <= 4, "{}", d.dispatches() - before);
    let host = |c: usize| -> f32 {
        let v = [0.5f32, -1.0, 2.0, 0.25, 1.5, -0.75];
        2.0 * (0..3).map(|r| v[r * 2 + c].exp()).sum::<f32>()
    };
    close(&got, &[host(0), host(1)]);
    Ok(())
}

#[test]
fn dropping_the_handle_frees_traces_weights_and_pipelines() -> R {
    let d = device();
    // The first device of a test binary may be compiling the tuning
    // file's GEMM kernels on a thread of its own: pipelines the device
    // keeps, which would land in either count.
    d.wait_warm_up();
    let pipelines = d.live_pipelines();
    let mut rng = Rng::new(11);
    let w = f(&d, &rng.vec_f32(16 * 6), &[16, 6]);
    let weight_bytes = d.active_memory();
    let g = {
        let w = w.clone();
        compile(move |x: &[Array]| mlp(&x[0], &w))
    };
    drop(w); // the handle's closure holds the only reference now
    assert_eq!(d.active_memory(), weight_bytes);
    for _ in 0..1000 {
        let x = f(&d, &rng.vec_f32(5 * 16), &[5, 16]);
        let out = g.call(&[&x])?;
        assert_eq!(out[1].shape(), &[5, 3]);
    }
    let made = d.live_pipelines();
    assert!(made > pipelines, "the calls compiled nothing?");
    // Outputs outlive the handle.
    let x = f(&d, &rng.vec_f32(5 * 16), &[5, 16]);
    let kept = g.call(&[&x])?;
    drop(x);
    drop(g);
    assert_eq!(d.live_pipelines(), pipelines, "pipelines the handle made");
    assert_eq!(kept[0].to_vec::<f32>()?.len(), 15);
    drop(kept);
    d.synchronize()?;
    assert_empty(&d);
    Ok(())
}

/// `quantize` inside a compiled function, with outputs unused (dead in
/// the trace) and returned, and a captured quantized weight read by
/// `quantized_matmul`: the replays give the eager results, and dropping
/// the handle returns the captured weight's memory and its pipelines.
#[test]
fn quantize_inside_compile_owns_nothing_after_the_handle_goes() -> R {
    let d = device();
    d.wait_warm_up();
    let mut rng = Rng::new(23);
    let w = f(&d, &rng.vec_f32(8 * 64), &[8, 64]);
    let (wq, s, b) = wgarray::quantize(&w, 32, 4)?;
    let eager_w = wgarray::dequantize(&wq, &s, &b, 32, 4, None)?;
    // The eager results first: their pipelines are the device's, not the
    // handle's.
    let mut cases = Vec::new();
    for _ in 0..20 {
        let x = f(&d, &rng.vec_f32(3 * 64), &[3, 64]);
        let want = x.matmul(&eager_w.transpose())?.to_vec::<f32>()?;
        let scales = wgarray::quantize(&x, 32, 8)?.1.to_vec::<f32>()?;
        cases.push((x, want, scales));
    }
    drop((w, eager_w));
    let pipelines = d.live_pipelines();
    let g = {
        let (wq, s, b) = (wq.clone(), s.clone(), b.clone());
        compile(move |x: &[Array]| {
            // The quants of x: only its scales are returned.
            let (_q, xs, _xb) = wgarray::quantize(&x[0], 32, 8)?;
            let y = wgarray::quantized_matmul(&x[0], &wq, &s, &b, true, 32, 4)?;
            Ok(vec![y, xs])
        })
    };
    drop((wq, s, b));
    let held = d.active_memory();
    for (x, want, scales) in &cases {
        let out = g.call(&[x])?;
        close(&out[0].to_vec::<f32>()?, want);
        assert_eq!(&out[1].to_vec::<f32>()?, scales);
    }
    assert_eq!(d.active_memory(), held, "the calls kept nothing");
    drop((g, cases));
    d.synchronize()?;
    assert_empty(&d);
    assert_eq!(d.live_pipelines(), pipelines, "pipelines the handle made");
    Ok(())
}

#[test]
fn compiling_afresh_in_a_loop_does_not_grow_memory() -> R {
    let d = device();
    let mut rng = Rng::new(3);
    let a = f(&d, &rng.vec_f32(4 * 9), &[4, 9]);
    let b = f(&d, &rng.vec_f32(4 * 9), &[4, 9]).transpose().transpose();
    let mut seen = None;
    for i in 0..100 {
        let (a, b) = (a.clone(), b.clone());
        let g = compile(move |x: &[Array]| {
            // A multi-output op reading captured, evaluated arrays.
            let (q, r) = (&x[0] + &a)?.divmod(&(&b.abs()? + 1.0)?)?;
            let (mean, var) = q.moments(Axes::from(1), true, 0)?;
            Ok(vec![r, mean, var])
        });
        let x = f(&d, &rng.vec_f32(4 * 9), &[4, 9]);
        let out = g.call(&[&x])?;
        assert_eq!(out.len(), 3);
        drop((g, out, x));
        let now = (d.active_memory(), d.live_arrays(), d.live_nodes());
        match seen {
            None => seen = Some(now),
            Some(s) => assert_eq!(now, s, "iteration {i} grew"),
        }
    }
    Ok(())
}

#[test]
fn a_trace_that_refers_to_its_closure_state_is_freed() -> R {
    let d = device();
    let nodes = d.live_nodes();
    {
        let base = f(&d, &[1.0, 2.0, 3.0], &[3]);
        // Lazy closure state: computed once, when traced (constant folding).
        let state = (&base.exp()? * 2.0)?;
        let calls = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&calls);
        let g = compile(move |x: &[Array]| {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(vec![(&x[0] + &state)?, state.clone()])
        });
        let x = f(&d, &[0.5, 0.25, -1.0], &[3]);
        let before = d.dispatches();
        let out = g.call(&[&x])?;
        let first = d.dispatches() - before;
        let before = d.dispatches();
        let again = g.call(&[&x])?;
        // The state is not recomputed by replays.
        assert!(d.dispatches() - before < first);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let want: Vec<f32> = [1.0f32, 2.0, 3.0]
            .iter()
            .zip([0.5f32, 0.25, -1.0])
            .map(|(b, x)| x + 2.0 * b.exp())
            .collect();
        close(&out[0].to_vec::<f32>()?, &want);
        close(&again[0].to_vec::<f32>()?, &want);
        drop((out, again, x, base));
        assert!(d.active_memory() > 0, "the state lives in the handle");
    }
    d.synchronize()?;
    assert_eq!(d.live_nodes(), nodes);
    assert_empty(&d);
    Ok(())
}

#[test]
fn the_cache_is_bounded_by_its_capacity() -> R {
    let d = device();
    let w = f(&d, &[0.5, -0.5, 2.0], &[3, 1]);
    let g = {
        let w = w.clone();
        compile_with_capacity(
            move |x: &[Array]| Ok(vec![(&x[0].matmul(&w)? * 3.0)?.tanh()?]),
            8,
        )
    };
    d.wait_warm_up(); // no warm-up pipelines among those counted
    let pipelines_after_first = {
        let x = f(&d, &[1.0; 3], &[1, 3]);
        g.call(&[&x])?;
        d.live_pipelines()
    };
    let mut most = 0;
    for rows in 1..=500usize {
        let x = Array::full(&[rows, 3], 0.25, DType::F32, &d)?;
        let out = g.call(&[&x])?;
        assert_eq!(out[0].shape(), &[rows, 1]);
        assert!(g.len() <= 8);
        most = most.max(d.live_pipelines());
    }
    assert_eq!(g.len(), 8);
    assert_eq!(g.capacity(), 8);
    // Sizes are parameters: new shapes of one structure reuse pipelines
    // (the GEMM picks among a few tile variants by shape).
    assert!(
        most <= pipelines_after_first + 8,
        "{most} pipelines after 500 shapes, {pipelines_after_first} after one"
    );
    g.clear();
    assert!(g.is_empty());
    drop((g, w));
    d.synchronize()?;
    assert_empty(&d);
    Ok(())
}

#[test]
fn two_compilations_are_independent_and_a_handle_drops_on_another_thread() -> R {
    let d = device();
    let make = || compile(|x: &[Array]| Ok(vec![(&x[0] * &x[0])?]));
    let (g1, g2) = (make(), make());
    let x = f(&d, &[1.0, -2.0, 3.0], &[3]);
    assert_eq!(g1.call(&[&x])?[0].to_vec::<f32>()?, vec![1.0, 4.0, 9.0]);
    assert_eq!((g1.len(), g2.len()), (1, 0));
    drop(g1);
    assert_eq!(g2.call(&[&x])?[0].to_vec::<f32>()?, vec![1.0, 4.0, 9.0]);
    std::thread::spawn(move || {
        let y = f(x.device(), &[2.0], &[1]);
        assert_eq!(
            g2.call(&[&y]).unwrap()[0].to_vec::<f32>().unwrap(),
            vec![4.0]
        );
        drop(g2);
    })
    .join()
    .expect("the thread");
    Ok(())
}

#[test]
fn bad_calls_are_typed_errors_and_leak_nothing() -> R {
    let d = device();
    let w = f(&d, &[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let g = {
        let w = w.clone();
        compile(move |x: &[Array]| Ok(vec![x[0].matmul(&w)?]))
    };
    let baseline = (d.active_memory(), d.live_arrays(), d.live_nodes());
    // Wrong rank and wrong inner size: the op's own shape error.
    let x3 = f(&d, &[1.0; 3], &[3]);
    assert!(matches!(g.call(&[&x3]), Err(Error::ShapeMismatch { .. })));
    // Wrong dtype.
    let xi = Array::full(&[1, 2], 1.0, DType::I32, &d)?;
    assert!(matches!(g.call(&[&xi]), Err(Error::DType { .. })));
    // No inputs; inputs of two devices.
    assert!(matches!(g.call(&[]), Err(Error::InvalidArgument(_))));
    let other = Device::new_default()?;
    let xo = f(&other, &[1.0, 2.0], &[1, 2]);
    let xd = f(&d, &[1.0, 2.0], &[1, 2]);
    assert!(matches!(
        g.call(&[&xd, &xo]),
        Err(Error::DeviceMismatch { op: "compile", .. })
    ));
    // Nothing was cached for a failed trace.
    assert!(g.is_empty());
    drop((x3, xi, xo, xd));
    assert_eq!(
        (d.active_memory(), d.live_arrays(), d.live_nodes()),
        baseline
    );
    // A function that reads a traced value back.
    let peek = compile(|x: &[Array]| {
        let s = x[0].sum(None, false)?.item::<f32>()?;
        Ok(vec![(&x[0] * s as f64)?])
    });
    let x = f(&d, &[1.0, 2.0], &[2]);
    assert!(matches!(peek.call(&[&x]), Err(Error::Traced { .. })));
    drop((x, peek, g, w));
    d.synchronize()?;
    assert_empty(&d);
    Ok(())
}

#[test]
fn explain_lists_fused_kernels() -> R {
    let d = device();
    let x = f(&d, &[1.0, 2.0, 3.0], &[3]);
    let y = (&(&x * 2.0)?.exp()? + 1.0)?.sum(None, false)?;
    d.set_fusion(true);
    let text = wgarray::explain(&[&y])?;
    // The elementwise chain is the sum's prologue: one kernel.
    assert!(text.starts_with("1 kernel "), "{text}");
    assert!(
        text.contains("fused [full, full, multiply, exp, add, sum] -> float32[], reads 1 array"),
        "{text}"
    );
    d.set_fusion(false);
    let text = wgarray::explain(&[&y])?;
    assert!(text.starts_with("4 kernels"), "{text}");
    Ok(())
}

#[test]
fn a_compiled_chain_fuses_like_the_eager_one() -> R {
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let chain = |x: &Array| -> wgarray::Result<Array> {
        let mut y = x.clone();
        for i in 0..100 {
            y = (&y + (i % 3) as f32)?;
        }
        Ok(y)
    };
    let g = compile(move |x: &[Array]| Ok(vec![chain(&x[0])?]));
    let x = f(&d, &[0.5, -1.0, 2.0], &[3]);
    let eager = {
        let y = chain(&x)?;
        let before = d.dispatches();
        y.eval()?;
        d.dispatches() - before
    };
    for _ in 0..2 {
        let before = d.dispatches();
        let y = g.call(&[&x])?.remove(0);
        // Scalars stay constants of the tape (parameter words), not buffers.
        assert_eq!(d.dispatches() - before, eager, "{}", g.explain(&[&x])?);
        close(&y.to_vec::<f32>()?, &[99.5, 98.0, 101.0]);
    }
    assert_eq!(eager, 1);
    Ok(())
}

#[test]
fn a_handle_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<wgarray::Compiled>();
}

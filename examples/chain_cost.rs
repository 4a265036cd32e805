//! Per-op cost of 1000 chained `x = x + 1.0` on f32[256], then one
//! read-back (issue 19 item 8), fused, unfused and through `compile`, the
//! three measured alternately in one process so that the machine's load
//! hits them alike. Prints the median per op of each.
//!
//! ```text
//! cargo run --release --example chain_cost -- [ROUNDS] [fused|unfused|compiled|all|explain]
//! ```
//!
//! Each round times 5 chains of each path; the figure is the median over
//! all chains. With one path named it only runs that one (for a profiler:
//! `valgrind --tool=callgrind --toggle-collect='chain_cost::measure*'
//! target/release/examples/chain_cost 2 fused`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use wgarray::{Array, Device, compile};

/// The system allocator, counting allocations (for `explain`'s figures).
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}

const OPS: usize = 1000;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Five timed chains (outside warm-up: `valgrind --tool=callgrind
/// --toggle-collect=chain_cost::measure` counts only these).
#[inline(never)]
fn measure(times: &mut Vec<f64>, mut chain: impl FnMut() -> f64) {
    for _ in 0..5 {
        times.push(chain());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let which = args.get(2).map_or("all", String::as_str);
    let d = Device::new_default().unwrap();
    let x = Array::from_slice(&vec![0.0f32; 256], &[256], &d).unwrap();
    let f = compile(|x: &[Array]| {
        let mut y = x[0].clone();
        for _ in 0..OPS {
            y = (&y + 1.0)?;
        }
        Ok(vec![y])
    });
    let eager = |fusion: bool| {
        d.set_fusion(fusion);
        let t = Instant::now();
        let mut y = x.clone();
        for _ in 0..OPS {
            y = (&y + 1.0).unwrap();
        }
        assert_eq!(y.to_vec::<f32>().unwrap()[0], OPS as f32);
        t.elapsed().as_secs_f64()
    };
    let compiled = || {
        d.set_fusion(true);
        let t = Instant::now();
        let y = f.call(&[&x]).unwrap().remove(0);
        assert_eq!(y.to_vec::<f32>().unwrap()[0], OPS as f32);
        t.elapsed().as_secs_f64()
    };
    if which == "explain" {
        for fusion in [true, false] {
            d.set_fusion(fusion);
            eager(fusion); // warm
            let a0 = allocs();
            let mut y = x.clone();
            for _ in 0..OPS {
                y = (&y + 1.0).unwrap();
            }
            let a1 = allocs();
            if fusion {
                let text = wgarray::explain(&[&y]).unwrap();
                print!("{}", text.lines().next().unwrap_or_default());
            }
            let (d0, a2) = (d.dispatches(), allocs());
            y.eval().unwrap();
            println!(
                "\nfusion {fusion}: {} dispatches; allocations per op: {:.2} building, {:.2} in eval",
                d.dispatches() - d0,
                (a1 - a0) as f64 / OPS as f64,
                (allocs() - a2) as f64 / OPS as f64
            );
        }
        compiled(); // traced and planned: later calls replay
        let a0 = allocs();
        let y = f.call(&[&x]).unwrap().remove(0);
        println!(
            "compiled: allocations per op {:.2}",
            (allocs() - a0) as f64 / OPS as f64
        );
        drop(y);
        return;
    }
    let paths = ["fused", "unfused", "compiled"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); 3];
    // Warm up: pipelines compiled, the compiled trace planned, pools filled.
    eager(true);
    eager(false);
    compiled();
    for _ in 0..rounds {
        for (p, name) in paths.iter().enumerate() {
            if which == "all" || which == *name {
                measure(&mut times[p], || match p {
                    0 => eager(true),
                    1 => eager(false),
                    _ => compiled(),
                });
            }
        }
    }
    for (p, name) in paths.iter().enumerate() {
        if !times[p].is_empty() {
            let m = median(&mut times[p]);
            println!("{name}: {:.3} us/op", m / OPS as f64 * 1e6);
        }
    }
}

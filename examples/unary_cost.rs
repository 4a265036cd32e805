//! Time of one float function of wgarray (wgsl/math.wgsl) on f32[16M]:
//! one unary kernel, 64 MiB in and 64 MiB out, against a plain `abs` of the
//! same array (the bandwidth floor), each evaluated and waited for, the
//! functions taken in turn round after round so that the machine's load
//! hits them alike. Prints the median time per function and its ratio to
//! `abs`. Inputs: a ramp over [-6, 6] (every branch of tanh, erf, gelu,
//! exp, log of |x|...).
//!
//! ```text
//! cargo run --release --example unary_cost -- [ROUNDS] [FUNCTION...]
//! ```
//!
//! FUNCTION is one of abs, tanh, exp, expm1, sigmoid, gelu, erf, log,
//! silu (default: all of them), or `tanh5` (five tanh, fused into one
//! kernel), `chain20` (benches/fusion.rs's 20-op chain, fused) or
//! `cheap20` (the same chain with `negative` for `tanh`).

use std::time::Instant;
use wgarray::{Array, Device};

const N: usize = 1 << 24;

fn apply(name: &str, x: &Array, ax: &Array) -> Array {
    match name {
        "abs" => x.abs(),
        "tanh" => x.tanh(),
        "exp" => x.exp(),
        "expm1" => x.expm1(),
        "sigmoid" => x.sigmoid(),
        "gelu" => x.gelu(),
        "erf" => x.erf(),
        "log" => ax.log(),
        "silu" => x.silu(),
        "tanh5" => (0..5).try_fold(x.clone(), |y, _| y.tanh()),
        "chain20" => (0..5).try_fold(x.clone(), |y, i| {
            ((&y * 0.5)? + 0.25 * i as f64)?.tanh()?.abs()
        }),
        "cheap20" => (0..5).try_fold(x.clone(), |y, i| {
            ((&y * 0.5)? + 0.25 * i as f64)?.negative()?.abs()
        }),
        // The same on x[1..]: an offset that is not a whole vec4 keeps the
        // fused kernel in its scalar variant (one element per thread).
        "tanh5s" | "chain20s" | "abss" => {
            let v = x.slice(&[(1..N).into()]).unwrap();
            return apply(&name[..name.len() - 1], &v, ax);
        }
        other => panic!("unknown function {other}"),
    }
    .unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let all = [
        "abs", "tanh", "exp", "expm1", "sigmoid", "gelu", "erf", "log", "silu",
    ];
    let names: Vec<&str> = if args.len() > 2 {
        args[2..].iter().map(String::as_str).collect()
    } else {
        all.to_vec()
    };
    let d = Device::new_default().expect("an adapter");
    let ramp: Vec<f32> = (0..N).map(|i| (i as f32 / N as f32) * 12.0 - 6.0).collect();
    let x = Array::from_slice(&ramp, &[N], &d).unwrap();
    let ax = x.abs().unwrap();
    ax.eval().unwrap();
    let mut times = vec![Vec::new(); names.len()];
    for round in 0..=rounds {
        for (i, name) in names.iter().enumerate() {
            let start = Instant::now();
            let y = apply(name, &x, &ax);
            y.eval().unwrap();
            d.synchronize().unwrap();
            // Round 0 compiles the pipelines.
            if round > 0 {
                times[i].push(start.elapsed().as_secs_f64());
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let meds: Vec<f64> = times.iter_mut().map(median).collect();
    let base = names.iter().position(|n| *n == "abs").map(|i| meds[i]);
    println!("{:?}, f32[{N}], median of {rounds}", d.backend());
    for (name, t) in names.iter().zip(&meds) {
        match base {
            Some(b) => println!("{name:8} {:9.1} ms  {:6.2} x abs", t * 1e3, t / b),
            None => println!("{name:8} {:9.1} ms", t * 1e3),
        }
    }
}

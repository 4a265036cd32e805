//! Who holds the memory, and how it moves: a toy decode loop (one-head
//! attention over a KV cache that grows by one row per step, the request
//! pattern that defeats a naive buffer cache) runs with memory history on;
//! then the example prints the memory snapshot (every live buffer, the op
//! and line that made it, the arrays that view it) and draws the timeline
//! of active and cached memory as an SVG, with the largest holders at the
//! peak named.
//!
//! ```sh
//! cargo run --release --example memory_timeline               # -> memory_timeline.svg
//! cargo run --release --example memory_timeline -- --steps 400 --out t.svg --json t.json
//! ```
//!
//! `WGARRAY_BACKEND=vulkan|gl` chooses the backend. The plot is plain SVG
//! written by hand from [`wgarray::MemoryTimeline`], a plain list of events
//! any plotting tool can read (`--json` writes it as JSON).

use std::path::PathBuf;

use clap::Parser;
use wgarray::{Array, DType, Device, MemoryTimeline, random};

/// Run a toy decode loop with memory history on; print the memory snapshot
/// and draw the timeline of active and cached memory as SVG.
#[derive(Parser, Debug)]
#[command(name = "memory_timeline")]
struct Args {
    /// Decode steps (each adds one row to the K and V caches).
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// Model width (row length of the caches, in f32 elements).
    #[arg(long, default_value_t = 512)]
    dim: usize,
    /// Where to write the SVG plot.
    #[arg(long, default_value = "memory_timeline.svg")]
    out: PathBuf,
    /// Also write the timeline's events as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The toy model: three projections and the caches they fill.
struct Decoder {
    wq: Array,
    wk: Array,
    wv: Array,
    k_cache: Option<Array>,
    v_cache: Option<Array>,
    x: Array,
}

impl Decoder {
    fn new(dim: usize, device: &Device) -> wgarray::Result<Decoder> {
        let scale = 1.0 / (dim as f64).sqrt();
        let weight = |seed| -> wgarray::Result<Array> {
            random::normal(
                &random::key(seed, device)?,
                &[dim, dim],
                0.0,
                scale,
                DType::F32,
            )
        };
        let (wq, wk, wv) = (weight(1)?, weight(2)?, weight(3)?);
        let x = random::normal(&random::key(4, device)?, &[1, dim], 0.0, 1.0, DType::F32)?;
        Ok(Decoder {
            wq,
            wk,
            wv,
            k_cache: None,
            v_cache: None,
            x,
        })
    }

    /// One step: project, append k and v to the caches, attend, evaluate.
    fn step(&mut self) -> wgarray::Result<()> {
        let dim = self.x.shape()[1];
        let (q, k, v) = (
            self.x.matmul(&self.wq)?,
            self.x.matmul(&self.wk)?,
            self.x.matmul(&self.wv)?,
        );
        let grow = |cache: Option<&Array>, row: &Array| match cache {
            None => Ok(row.clone()),
            Some(c) => wgarray::concatenate(&[c, row], 0),
        };
        let k_cache = grow(self.k_cache.as_ref(), &k)?;
        let v_cache = grow(self.v_cache.as_ref(), &v)?;
        let scores = (&q.matmul(&k_cache.transpose())? * (1.0 / (dim as f64).sqrt()))?;
        let x = scores.softmax(-1)?.matmul(&v_cache)?.tanh()?;
        wgarray::eval(&[&x, &k_cache, &v_cache])?;
        (self.x, self.k_cache, self.v_cache) = (x, Some(k_cache), Some(v_cache));
        Ok(())
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The timeline as an SVG plot: active memory and cached memory stacked
/// over the pool's events, a marker at the peak, and the `holders` largest
/// buffers on loan at the peak named below the plot.
fn svg(t: &MemoryTimeline, title: &str, holders: usize) -> String {
    const W: f64 = 900.0;
    const H: f64 = 360.0;
    const LEFT: f64 = 70.0;
    const TOP: f64 = 40.0;
    let n = t.events.len().max(1);
    let top = t
        .events
        .iter()
        .map(|e| e.active + e.cache)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    // At most one point per pixel column: the largest value in it.
    let columns = (W as usize).min(n);
    let mut active = vec![0u64; columns];
    let mut total = vec![0u64; columns];
    for (i, e) in t.events.iter().enumerate() {
        let c = i * columns / n;
        active[c] = active[c].max(e.active);
        total[c] = total[c].max(e.active + e.cache);
    }
    let x = |c: usize| LEFT + W * c as f64 / columns.max(1) as f64;
    let y = |v: u64| TOP + H - H * v as f64 / top;
    let area = |values: &[u64], below: Option<&[u64]>| {
        let mut d = format!("M {:.1} {:.1}", x(0), y(0));
        for (c, &v) in values.iter().enumerate() {
            d.push_str(&format!(
                " L {:.1} {:.1} L {:.1} {:.1}",
                x(c),
                y(v),
                x(c + 1),
                y(v)
            ));
        }
        match below {
            None => d.push_str(&format!(" L {:.1} {:.1} Z", x(values.len()), y(0))),
            Some(b) => {
                for (c, &v) in b.iter().enumerate().rev() {
                    d.push_str(&format!(
                        " L {:.1} {:.1} L {:.1} {:.1}",
                        x(c + 1),
                        y(v),
                        x(c),
                        y(v)
                    ));
                }
                d.push_str(" Z");
            }
        }
        d
    };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n",
        W + LEFT + 20.0,
        H + TOP + 60.0 + 16.0 * holders as f64
    );
    s.push_str("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    s.push_str(&format!(
        "<text x=\"{LEFT}\" y=\"20\" font-size=\"14\">{}</text>\n",
        escape(title)
    ));
    s.push_str(&format!(
        "<path d=\"{}\" fill=\"#f4a259\" fill-opacity=\"0.8\"/>\n",
        area(&total, Some(&active))
    ));
    s.push_str(&format!(
        "<path d=\"{}\" fill=\"#3b6ea8\" fill-opacity=\"0.9\"/>\n",
        area(&active, None)
    ));
    // Axes: MiB on the left, events along the bottom.
    for i in 0..=4 {
        let v = (top * i as f64 / 4.0) as u64;
        s.push_str(&format!(
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ccc\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{:.1} MiB</text>\n",
            LEFT + W,
            LEFT - 6.0,
            y(v) + 4.0,
            mib(v),
            y = y(v)
        ));
    }
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">pool events (allocations, cache hits, \
         releases, frees): {} in {:.2} s</text>\n",
        LEFT + W / 2.0,
        TOP + H + 20.0,
        t.events.len(),
        t.events.last().map_or(0.0, |e| e.time_s)
    ));
    s.push_str(&format!(
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"#3b6ea8\"/>\
         <text x=\"{}\" y=\"{}\">active</text>\
         <rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"#f4a259\"/>\
         <text x=\"{}\" y=\"{}\">cached</text>\n",
        LEFT + W - 150.0,
        TOP - 16.0,
        LEFT + W - 134.0,
        TOP - 6.0,
        LEFT + W - 80.0,
        TOP - 16.0,
        LEFT + W - 64.0,
        TOP - 6.0
    ));
    if let Some(peak) = t.peak_index() {
        let px = x(peak * columns / n);
        s.push_str(&format!(
            "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"#b00\" \
             stroke-dasharray=\"4 3\"/>\n",
            TOP + H
        ));
        let mut line_y = TOP + H + 44.0;
        s.push_str(&format!(
            "<text x=\"{LEFT}\" y=\"{line_y}\" fill=\"#b00\">at the peak ({:.2} MiB active), \
             the largest holders:</text>\n",
            mib(t.events[peak].active)
        ));
        for h in t.holders_at(peak).iter().take(holders) {
            line_y += 16.0;
            let who = h.origin.map_or_else(
                || "(made before history was on)".to_string(),
                |o| o.to_string(),
            );
            s.push_str(&format!(
                "<text x=\"{}\" y=\"{line_y}\">{:.3} MiB  buffer #{}  {}</text>\n",
                LEFT + 10.0,
                mib(h.bytes),
                h.buffer,
                escape(&who)
            ));
        }
    }
    s.push_str("</svg>\n");
    s
}

/// `text` with XML's special characters escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Run the loop on `device` with history on; the timeline, and the snapshot
/// taken while the decoder was still alive.
fn run(device: &Device, steps: usize, dim: usize) -> wgarray::Result<(MemoryTimeline, String)> {
    device.record_memory_history(true);
    let mut decoder = Decoder::new(dim, device)?;
    for _ in 0..steps {
        decoder.step()?;
    }
    let snapshot = device.memory_snapshot().to_string();
    drop(decoder);
    let timeline = device.memory_timeline();
    device.record_memory_history(false);
    Ok((timeline, snapshot))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let device = Device::new_default()?;
    println!("device: {}", device.info());
    let (timeline, snapshot) = run(&device, args.steps, args.dim)?;
    println!("memory snapshot after {} steps:\n{snapshot}", args.steps);
    let stats = device.memory_stats();
    let footprint = timeline
        .events
        .iter()
        .map(|e| e.active + e.cache)
        .max()
        .unwrap_or(0);
    println!(
        "peak active {:.2} MiB; most active + cached {:.2} MiB ({:.2} times the peak); \
         {} cache hits, {} misses; active after dropping everything: {} bytes",
        mib(stats.peak),
        mib(footprint),
        footprint as f64 / stats.peak.max(1) as f64,
        stats.cache_hits,
        stats.cache_misses,
        stats.active
    );
    let title = format!(
        "wgarray memory: {} decode steps, dim {}, on {}",
        args.steps,
        args.dim,
        device.info()
    );
    std::fs::write(&args.out, svg(&timeline, &title, 6))?;
    println!("wrote {}", args.out.display());
    if let Some(path) = &args.json {
        std::fs::write(path, timeline.to_json())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_plots_both_series_and_names_the_holders() {
        let device = Device::new_default().expect("this test needs a GPU adapter");
        let (t, snapshot) = run(&device, 12, 64).unwrap();
        assert!(
            snapshot.contains("examples/memory_timeline.rs"),
            "{snapshot}"
        );
        assert!(snapshot.contains("concatenate at"), "{snapshot}");
        assert_eq!(device.active_memory(), 0);
        let peak = device.peak_memory();
        let footprint = t.events.iter().map(|e| e.active + e.cache).max().unwrap();
        assert!(footprint <= 3 * peak, "{footprint} vs peak {peak}");
        let s = svg(&t, "a <test> & more", 3);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<path d=\"M").count(), 2, "active and cached");
        assert!(s.contains("a &lt;test&gt; &amp; more"));
        assert!(s.contains("the largest holders"));
        assert_eq!(s.matches("MiB  buffer #").count(), 3);
        assert!(s.contains("examples/memory_timeline.rs:"));
    }
}

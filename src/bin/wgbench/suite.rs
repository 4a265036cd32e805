//! The three suites: what each measures, at which sizes, how often.

use std::time::Duration;

use crate::measure::Protocol;

/// How much to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Suite {
    /// Small sizes, few repeats: seconds per adapter; for tests and CI.
    Smoke,
    /// The figures that matter at sizes a software adapter runs in a few
    /// minutes.
    Quick,
    /// Every size up to 4096^3 matmuls and 128 MiB arrays.
    Full,
}

impl Suite {
    pub fn name(self) -> &'static str {
        match self {
            Suite::Smoke => "smoke",
            Suite::Quick => "quick",
            Suite::Full => "full",
        }
    }

    pub fn protocol(self) -> Protocol {
        match self {
            Suite::Smoke => Protocol {
                warmup: 1,
                min_samples: 3,
                max_samples: 5,
                budget: Duration::from_millis(50),
            },
            Suite::Quick => Protocol {
                warmup: 1,
                min_samples: 3,
                max_samples: 15,
                budget: Duration::from_millis(800),
            },
            Suite::Full => Protocol {
                warmup: 2,
                min_samples: 5,
                max_samples: 50,
                budget: Duration::from_secs(3),
            },
        }
    }

    /// Square matmul sizes N (N x N x N).
    pub fn square(self) -> &'static [usize] {
        match self {
            Suite::Smoke => &[64, 256],
            Suite::Quick => &[256, 512, 1024],
            Suite::Full => &[256, 512, 1024, 2048, 4096],
        }
    }

    /// Transformer shapes: M (tokens: 1 = decode) against (K, N) weights.
    pub fn transformer(self) -> (&'static [usize], &'static [(usize, usize)]) {
        match self {
            Suite::Smoke => (&[1, 128], &[(384, 384)]),
            Suite::Quick => (&[1, 128, 512], &[(384, 1536), (1536, 384), (4096, 4096)]),
            Suite::Full => (
                &[1, 128, 512],
                &[
                    (384, 384),
                    (384, 1536),
                    (1536, 384),
                    (1024, 1024),
                    (1024, 4096),
                    (4096, 1024),
                    (4096, 4096),
                ],
            ),
        }
    }

    /// Every matmul shape (M, K, N): the square ones, then the transformer
    /// ones by M.
    pub fn matmul_shapes(self) -> Vec<(usize, usize, usize)> {
        let (ms, kns) = self.transformer();
        let mut v: Vec<_> = self.square().iter().map(|&s| (s, s, s)).collect();
        for &m in ms {
            v.extend(kns.iter().map(|&(k, n)| (m, k, n)));
        }
        v
    }

    /// Elements of each array in the bandwidth group (f32).
    pub fn stream_elements(self) -> usize {
        match self {
            Suite::Smoke => 1 << 20,
            Suite::Quick => 16 << 20,
            Suite::Full => 32 << 20,
        }
    }

    /// `[rows, cols]` for the reduction, softmax and layer_norm.
    pub fn rows_cols(self) -> (usize, usize) {
        match self {
            Suite::Smoke => (256, 1024),
            Suite::Quick => (4096, 4096),
            Suite::Full => (8192, 4096),
        }
    }

    /// Ops in the dispatch-overhead chain (each on `f32[256]`).
    pub fn chain_ops(self) -> usize {
        match self {
            Suite::Smoke => 100,
            Suite::Quick | Suite::Full => 1000,
        }
    }

    /// Buffer sizes for the allocate-and-release rate, bytes.
    pub fn pool_sizes(self) -> &'static [u64] {
        match self {
            Suite::Smoke => &[4 << 10, 1 << 20],
            Suite::Quick | Suite::Full => &[4 << 10, 1 << 20, 64 << 20],
        }
    }

    /// Whether MiniLM runs (when the model is there).
    pub fn minilm(self) -> bool {
        self != Suite::Smoke
    }
}

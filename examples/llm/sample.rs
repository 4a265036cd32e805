//! Choosing the next token from the logits on the host: temperature, top-k
//! and top-p (nucleus) filtering as Hugging Face's `generate` applies them
//! (temperature, then top-k, then top-p over the softmax of what is left),
//! then a draw from a seeded generator. Temperature 0 is greedy (the
//! argmax, which the decode step computes on the device).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How to choose each token.
#[derive(Clone, Debug)]
pub struct Sampling {
    /// 0: greedy.
    pub temperature: f64,
    /// Keep the `k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability
    /// reaches `p` (1: all).
    pub top_p: f64,
}

impl Sampling {
    /// Whether tokens are the argmax.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }
}

/// A sampler: the settings and a generator seeded once.
pub struct Sampler {
    pub settings: Sampling,
    rng: StdRng,
}

impl Sampler {
    pub fn new(settings: Sampling, seed: u64) -> Sampler {
        Sampler {
            settings,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// A token id drawn from `logits` (one per vocabulary entry).
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let s = &self.settings;
        let mut order: Vec<(usize, f64)> = logits
            .iter()
            .enumerate()
            .filter(|(_, l)| l.is_finite())
            .map(|(i, &l)| (i, l as f64 / s.temperature))
            .collect();
        if order.is_empty() {
            return 0;
        }
        order.sort_by(|a, b| b.1.total_cmp(&a.1));
        if s.top_k > 0 {
            order.truncate(s.top_k);
        }
        let max = order[0].1;
        let mut probs: Vec<f64> = order.iter().map(|(_, l)| (l - max).exp()).collect();
        let total: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
        if s.top_p < 1.0 {
            let mut acc = 0.0;
            let keep = probs
                .iter()
                .position(|p| {
                    acc += p;
                    acc >= s.top_p
                })
                .map_or(probs.len(), |i| i + 1);
            probs.truncate(keep);
            order.truncate(keep);
        }
        let total: f64 = probs.iter().sum();
        let mut r = self.rng.random::<f64>() * total;
        for (i, p) in probs.iter().enumerate() {
            r -= p;
            if r <= 0.0 {
                return order[i].0 as u32;
            }
        }
        order[order.len() - 1].0 as u32
    }
}

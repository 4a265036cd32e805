//! `wgarray::random` against a host Philox 4x32-10 written from the paper
//! (Salmon et al., SC'11) and checked against Random123's known answers:
//! raw bits bit for bit, uniform and normal against host transforms and
//! their moments, split, determinism, errors and lifetimes.

mod common;

use common::reference::mean_and_variance;
use common::{assert_empty, device, poison_pool};
use wgarray::{Array, DType, Error, Slice, random};

/// Philox 4x32-10 on the host, with 64-bit products.
fn philox(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for _ in 0..10 {
        let p0 = 0xD251_1F53u64 * c[0] as u64;
        let p1 = 0xCD9E_8D57u64 * c[2] as u64;
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
        k = [
            k[0].wrapping_add(0x9E37_79B9),
            k[1].wrapping_add(0xBB67_AE85),
        ];
    }
    c
}

/// The crate's documented stream: element 4b + j is word j of block
/// (b, stream, 0, 0).
fn host_bits(key: [u32; 2], n: usize, stream: u32) -> Vec<u32> {
    (0..n)
        .map(|e| philox([(e / 4) as u32, stream, 0, 0], key)[e % 4])
        .collect()
}

fn key_words(seed: u64) -> [u32; 2] {
    [(seed >> 32) as u32, seed as u32]
}

#[test]
fn host_reference_matches_random123_known_answers() {
    // Random123 tests/kat_vectors, the three `philox4x32 10` lines:
    // counter[4] key[2] -> result[4].
    let kat: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
        (
            [0, 0, 0, 0],
            [0, 0],
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
        ),
        (
            [0xffffffff; 4],
            [0xffffffff; 2],
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
        ),
        (
            [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
            [0xa4093822, 0x299f31d0],
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
        ),
    ];
    for (ctr, key, want) in kat {
        assert_eq!(philox(ctr, key), want, "ctr {ctr:x?} key {key:x?}");
    }
}

#[test]
fn device_bits_give_the_known_answer_for_key_zero_counter_zero() {
    let d = device();
    let k = random::key(0, &d).unwrap();
    let b = random::bits(&k, &[4]).unwrap().to_vec::<u32>().unwrap();
    assert_eq!(b, vec![0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]);
}

#[test]
fn the_kernels_philox_function_gives_all_three_known_answers_on_the_device() {
    // The counters of two vectors are out of reach of the public stream
    // (counter word 1 is the stream tag), so run the kernel's own WGSL
    // functions, cut from wgsl/random.wgsl (and the 64-bit product from
    // wgsl/math.wgsl), on arbitrary counters.
    let src = include_str!("../wgsl/random.wgsl");
    let start = src.find("fn philox4x32_10").expect("philox in random.wgsl");
    let end = src.find("// A float in [0, 1)").expect("end marker");
    let math = include_str!("../wgsl/math.wgsl");
    let wide = &math[math
        .find("fn mul_u32_wide")
        .expect("mul_u32_wide in math.wgsl")..];
    let wide = &wide[..wide.find("\n}\n").expect("its end") + 3];
    let kernel = format!(
        "{wide}\n{}\n\
         @group(0) @binding(0) var<storage, read> ctr: array<u32>;\n\
         @group(0) @binding(1) var<storage, read> key: array<u32>;\n\
         @group(0) @binding(2) var<storage, read_write> out: array<u32>;\n\
         @compute @workgroup_size(1)\n\
         fn kat(@builtin(global_invocation_id) id: vec3<u32>) {{\n\
             let i = id.x;\n\
             let c = vec4<u32>(ctr[4u * i], ctr[4u * i + 1u], ctr[4u * i + 2u], ctr[4u * i + 3u]);\n\
             let r = philox4x32_10(c, vec2<u32>(key[2u * i], key[2u * i + 1u]));\n\
             out[4u * i] = r.x;\n\
             out[4u * i + 1u] = r.y;\n\
             out[4u * i + 2u] = r.z;\n\
             out[4u * i + 3u] = r.w;\n\
         }}\n",
        &src[start..end]
    );
    let ctr = [
        0,
        0,
        0,
        0, //
        0xffffffff,
        0xffffffff,
        0xffffffff,
        0xffffffff, //
        0x243f6a88,
        0x85a308d3,
        0x13198a2e,
        0x03707344u32,
    ];
    let key = [0, 0, 0xffffffff, 0xffffffff, 0xa4093822, 0x299f31d0u32];
    let out = wgarray::testing::KernelTest::new(kernel, "kat")
        .device(&device())
        .input(&ctr)
        .input(&key)
        .output(DType::U32, &[12])
        .workgroups([3, 1, 1])
        .run()
        .unwrap();
    assert_eq!(
        out.get::<u32>(0).unwrap(),
        vec![
            0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8, //
            0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd, //
            0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1,
        ]
    );
}

#[test]
fn device_bits_match_the_host_reference_bit_for_bit() {
    let d = device();
    for seed in [0u64, 1, 42, 0xdead_beef_1234_5678, u64::MAX] {
        let k = random::key(seed, &d).unwrap();
        for shape in [
            vec![1usize],
            vec![7],
            vec![33],
            vec![1025],
            vec![7, 33],
            vec![3, 0],
        ] {
            let n: usize = shape.iter().product();
            poison_pool(&d, n.max(1));
            let got = random::bits(&k, &shape).unwrap();
            assert_eq!(got.shape(), &shape[..]);
            assert_eq!(
                got.to_vec::<u32>().unwrap(),
                host_bits(key_words(seed), n, 0),
                "seed {seed:#x}, shape {shape:?}"
            );
        }
    }
    drop(d);
}

#[test]
fn split_keys_follow_the_stream_and_a_strided_key_view_works() {
    let d = device();
    let k = random::key(7, &d).unwrap();
    let keys = random::split(&k, 3).unwrap();
    assert_eq!(keys.shape(), &[3, 2]);
    let words = keys.to_vec::<u32>().unwrap();
    assert_eq!(words, host_bits(key_words(7), 6, 1));
    // Distinct from each other and from the parent key.
    let pairs: Vec<[u32; 2]> = words.chunks(2).map(|c| [c[0], c[1]]).collect();
    for (i, a) in pairs.iter().enumerate() {
        assert_ne!(*a, key_words(7));
        for b in &pairs[i + 1..] {
            assert_ne!(a, b);
        }
    }
    // Key 2 read through a strided view: the transpose's column 2.
    let col = keys
        .transpose()
        .slice(&[Slice::FULL, Slice::range(2, 3)])
        .unwrap()
        .reshape(&[2])
        .unwrap();
    let got = random::bits(&col, &[9]).unwrap().to_vec::<u32>().unwrap();
    assert_eq!(got, host_bits(pairs[2], 9, 0));
    // Unevaluated keys work too (the split is lazy above as well).
    let lazy = random::split(&random::key(8, &d).unwrap(), 2).unwrap();
    let k0 = lazy
        .slice(&[Slice::range(0, 1), Slice::FULL])
        .unwrap()
        .reshape(&[2])
        .unwrap();
    let want_key = host_bits(key_words(8), 2, 1);
    let got = random::bits(&k0, &[5]).unwrap().to_vec::<u32>().unwrap();
    assert_eq!(got, host_bits([want_key[0], want_key[1]], 5, 0));
    // Different keys, different numbers.
    let a = random::uniform(&k, &[64], 0.0, 1.0, DType::F32).unwrap();
    let b = random::uniform(&k0, &[64], 0.0, 1.0, DType::F32).unwrap();
    assert_ne!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
}

fn unit(w: u32) -> f32 {
    (w >> 8) as f32 * (1.0 / 16_777_216.0)
}

#[test]
fn uniform_f32_is_the_documented_transform_of_the_bits() {
    let d = device();
    let k = random::key(2024, &d).unwrap();
    for n in [1usize, 7, 33, 1025] {
        poison_pool(&d, n);
        let w = host_bits(key_words(2024), n, 0);
        // [0, 1): exact.
        let got = random::uniform(&k, &[n], 0.0, 1.0, DType::F32).unwrap();
        let want: Vec<f32> = w.iter().map(|&x| unit(x)).collect();
        assert_eq!(got.to_vec::<f32>().unwrap(), want, "n = {n}");
        // [-2, 3): within one ulp (a backend may fuse the multiply-add).
        let got = random::uniform(&k, &[n], -2.0, 3.0, DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for (g, &x) in got.iter().zip(&w) {
            let want = -2.0f32 + 5.0 * unit(x);
            assert!((g - want).abs() <= want.abs().max(1.0) * f32::EPSILON);
            assert!((-2.0..3.0).contains(g));
        }
    }
}

#[test]
fn uniform_moments_and_range_in_every_float_dtype() {
    let d = device();
    let k = random::key(99, &d).unwrap();
    let n = 100_003;
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let (lo, hi) = (-1.5, 2.5);
        let x = random::uniform(&k, &[n], lo, hi, dtype).unwrap();
        assert_eq!(x.dtype(), dtype);
        let v = x.to_f64_vec().unwrap();
        assert!(v.iter().all(|&u| (lo..hi).contains(&u)), "{dtype}");
        let (m, var) = mean_and_variance(&v, 0.0);
        // Uniform: mean (lo + hi) / 2, variance (hi - lo)^2 / 12; the
        // standard error of the mean is sqrt(var / n) ~ 0.0036.
        assert!((m - 0.5).abs() < 0.02, "{dtype}: mean {m}");
        assert!((var - 16.0 / 12.0).abs() < 0.03, "{dtype}: var {var}");
        // Against the host transform, rounded to the dtype.
        let w = host_bits(key_words(99), 1000, 0);
        for (i, &x) in w.iter().enumerate() {
            let f = -1.5f32 + 4.0 * unit(x);
            let want = match dtype {
                DType::F16 => half::f16::from_f32(f).to_f64(),
                DType::BF16 => half::bf16::from_f32(f).to_f64(),
                _ => f as f64,
            };
            let ulp = match dtype {
                DType::F16 => 2f64.powi(-10),
                DType::BF16 => 2f64.powi(-7),
                _ => 2f64.powi(-23),
            } * want.abs().max(1.0);
            assert!(
                (v[i] - want).abs() <= ulp,
                "{dtype}[{i}]: {} vs {want}",
                v[i]
            );
        }
    }
    // f32 values just below 1 round to 1 in bf16: clamped below it.
    let x = random::uniform(&k, &[4096], 0.0, 1.0, DType::BF16).unwrap();
    assert!(
        x.to_f64_vec()
            .unwrap()
            .iter()
            .all(|&u| (0.0..1.0).contains(&u))
    );
}

#[test]
fn normal_matches_box_muller_and_its_moments() {
    let d = device();
    let k = random::key(5, &d).unwrap();
    let n = 100_001;
    let x = random::normal(&k, &[n], 0.0, 1.0, DType::F32).unwrap();
    let v: Vec<f64> = x.to_f64_vec().unwrap();
    let (m, var) = mean_and_variance(&v, 0.0);
    assert!(m.abs() < 0.02, "mean {m}");
    assert!((var.sqrt() - 1.0).abs() < 0.02, "std {}", var.sqrt());
    // Element by element against the host transform in f64.
    let w = host_bits(key_words(5), 4000, 0);
    for b in 0..1000 {
        let u1 = (w[4 * b] >> 8) as f64 / 16_777_216.0 + 1.0 / 16_777_216.0;
        let u2 = (w[4 * b + 1] >> 8) as f64 / 16_777_216.0;
        let u3 = (w[4 * b + 2] >> 8) as f64 / 16_777_216.0 + 1.0 / 16_777_216.0;
        let u4 = (w[4 * b + 3] >> 8) as f64 / 16_777_216.0;
        let t = std::f64::consts::TAU;
        let (r1, r2) = ((-2.0 * u1.ln()).sqrt(), (-2.0 * u3.ln()).sqrt());
        let want = [
            r1 * (t * u2).cos(),
            r1 * (t * u2).sin(),
            r2 * (t * u4).cos(),
            r2 * (t * u4).sin(),
        ];
        for j in 0..4 {
            let g = v[4 * b + j];
            assert!(
                (g - want[j]).abs() <= 1e-4 * (1.0 + want[j].abs()),
                "[{}]: {g} vs {}",
                4 * b + j,
                want[j]
            );
        }
    }
    // Scaled, and in 16-bit dtypes.
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let y = random::normal(&k, &[n], 3.0, 0.5, dtype).unwrap();
        let (m, var) = mean_and_variance(&y.to_f64_vec().unwrap(), 0.0);
        assert!((m - 3.0).abs() < 0.02, "{dtype}: mean {m}");
        assert!(
            (var.sqrt() - 0.5).abs() < 0.02,
            "{dtype}: std {}",
            var.sqrt()
        );
    }
}

#[test]
fn the_same_key_gives_the_same_numbers() {
    let d = device();
    let a = random::normal(
        &random::key(11, &d).unwrap(),
        &[7, 33],
        0.0,
        1.0,
        DType::F32,
    )
    .unwrap()
    .to_vec::<f32>()
    .unwrap();
    let k = random::key(11, &d).unwrap();
    let b = random::normal(&k, &[7, 33], 0.0, 1.0, DType::F32).unwrap();
    let c = random::normal(&k, &[7, 33], 0.0, 1.0, DType::F32).unwrap();
    assert_eq!(a, b.to_vec::<f32>().unwrap());
    assert_eq!(a, c.to_vec::<f32>().unwrap());
    // The first elements of a larger draw are the smaller draw (counter based).
    let big = random::bits(&k, &[1025]).unwrap().to_vec::<u32>().unwrap();
    let small = random::bits(&k, &[33]).unwrap().to_vec::<u32>().unwrap();
    assert_eq!(&big[..33], &small[..]);
}

#[test]
fn bad_keys_and_arguments_are_typed_errors() {
    let d = device();
    let k = random::key(1, &d).unwrap();
    let f = Array::zeros(&[2], DType::F32, &d).unwrap();
    assert!(matches!(random::bits(&f, &[3]), Err(Error::DType { .. })));
    let long = Array::zeros(&[3], DType::U32, &d).unwrap();
    assert!(matches!(
        random::split(&long, 2),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        random::uniform(&k, &[3], 1.0, 1.0, DType::F32),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        random::uniform(&k, &[3], 0.0, f64::INFINITY, DType::F32),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        random::uniform(&k, &[3], 1.001, 1.002, DType::BF16),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        random::uniform(&k, &[3], 0.0, 1.0, DType::I32),
        Err(Error::DType { .. })
    ));
    assert!(matches!(
        random::normal(&k, &[3], f64::NAN, 1.0, DType::F32),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn random_arrays_release_everything() {
    let d = device();
    poison_pool(&d, 4096);
    {
        let k = random::key(3, &d).unwrap();
        let keys = random::split(&k, 4).unwrap();
        let k1 = keys
            .slice(&[Slice::range(1, 2), Slice::FULL])
            .unwrap()
            .reshape(&[2])
            .unwrap();
        let u = random::uniform(&k1, &[33, 7], 0.0, 1.0, DType::F16).unwrap();
        let z = random::normal(&k1, &[1025], 0.0, 1.0, DType::F32).unwrap();
        drop((k, keys, k1));
        u.eval().unwrap();
        // Unevaluated `z` still holds its key; dropping it frees all.
        drop((u, z));
    }
    assert_empty(&d);
}

// ---- the samplers of issue 21 ----

/// `(2 (w >> 9) + 1) 2^-24`: the open unit interval of the module docs.
fn open_unit(w: u32) -> f64 {
    ((w >> 9) as f64 + 0.5) / 8_388_608.0
}

/// Kolmogorov-Smirnov distance of `v` from the CDF `cdf`.
fn ks_distance(v: &[f64], cdf: impl Fn(f64) -> f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len() as f64;
    s.iter().enumerate().fold(0.0f64, |d, (i, &x)| {
        let f = cdf(x);
        d.max(f - i as f64 / n).max((i + 1) as f64 / n - f)
    })
}

/// The KS critical distance at significance 0.001 for `n` samples.
fn ks_critical(n: usize) -> f64 {
    1.95 / (n as f64).sqrt()
}

/// Pearson's chi-square of `counts` against `probs` (expected counts n p).
fn chi_square(counts: &[u64], probs: &[f64]) -> f64 {
    let n: u64 = counts.iter().sum();
    counts
        .iter()
        .zip(probs)
        .map(|(&c, &p)| {
            let e = n as f64 * p;
            (c as f64 - e).powi(2) / e
        })
        .sum()
}

/// The 99.9th percentile of chi-square with `k` degrees of freedom
/// (Wilson-Hilferty).
fn chi_square_critical(k: usize) -> f64 {
    let k = k as f64;
    let z = 3.090; // the 0.999 quantile of the standard normal
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

/// randint bit for bit against the documented transform (64 bits from
/// counters (b, 0, 0, 0) and (b, 0, 1, 0), widened multiply-shift), in
/// i32 and u32, over small, negative, and full ranges; and uniform by
/// chi-square at a fixed key.
#[test]
fn randint_is_the_documented_transform_and_uniform() {
    let d = device();
    let seed = 77;
    let k = random::key(seed, &d).unwrap();
    let n = 1025;
    let cases: [(i64, i64, DType); 6] = [
        (0, 7, DType::I32),
        (-5, 6, DType::I32),
        (i32::MIN as i64, i32::MAX as i64 + 1, DType::I32),
        (3, 1_000_003, DType::U32),
        (0, 1 << 32, DType::U32),
        (4_000_000_000, 4_000_000_001, DType::U32),
    ];
    for (low, high, dtype) in cases {
        let x = random::randint(&k, &[n], low, high, dtype).unwrap();
        assert_eq!(x.dtype(), dtype);
        let got = x.to_f64_vec().unwrap();
        let range = (high - low) as u128;
        for (e, &g) in got.iter().enumerate() {
            let b = (e / 4) as u32;
            let hi = philox([b, 0, 0, 0], key_words(seed))[e % 4] as u128;
            let lo = philox([b, 0, 1, 0], key_words(seed))[e % 4] as u128;
            let want = low + (((hi << 32 | lo) * range) >> 64) as i64;
            assert_eq!(g as i64, want, "randint({low}, {high}) {dtype}[{e}]");
        }
    }
    // Ten values, 100003 draws: chi-square with 9 degrees of freedom.
    let m = 100_003;
    let v = random::randint(&k, &[m], 10, 20, DType::I32)
        .unwrap()
        .to_vec::<i32>()
        .unwrap();
    let mut counts = [0u64; 10];
    for x in v {
        assert!((10..20).contains(&x));
        counts[(x - 10) as usize] += 1;
    }
    let chi = chi_square(&counts, &[0.1; 10]);
    assert!(chi < chi_square_critical(9), "chi-square {chi}: {counts:?}");
}

#[test]
fn laplace_and_gumbel_follow_their_cdfs() {
    let d = device();
    let seed = 31;
    let k = random::key(seed, &d).unwrap();
    let n = 100_003;
    let w = host_bits(key_words(seed), 4096, 0);
    // Laplace(loc 1.5, scale 2).
    let (loc, scale) = (1.5, 2.0);
    let v = random::laplace(&k, &[n], loc, scale, DType::F32)
        .unwrap()
        .to_f64_vec()
        .unwrap();
    for (i, &x) in w.iter().enumerate() {
        let t = 2.0 * open_unit(x) - 1.0;
        let want = loc - scale * t.signum() * (1.0 - t.abs()).ln();
        assert!(
            (v[i] - want).abs() <= 1e-6 * (1.0 + want.abs()),
            "laplace[{i}]: {} vs {want}",
            v[i]
        );
    }
    let (m, var) = mean_and_variance(&v, 0.0);
    assert!((m - loc).abs() < 0.05, "laplace mean {m}");
    assert!((var - 2.0 * scale * scale).abs() < 0.2, "laplace var {var}");
    let cdf = |x: f64| {
        let z = (x - loc) / scale;
        if z < 0.0 {
            0.5 * z.exp()
        } else {
            1.0 - 0.5 * (-z).exp()
        }
    };
    let ks = ks_distance(&v, cdf);
    assert!(ks < ks_critical(n), "laplace KS {ks}");
    // Standard Gumbel.
    let g = random::gumbel(&k, &[n], DType::F32)
        .unwrap()
        .to_f64_vec()
        .unwrap();
    for (i, &x) in w.iter().enumerate() {
        let want = -(-open_unit(x).ln()).ln();
        assert!(
            (g[i] - want).abs() <= 2e-6 * (1.0 + want.abs()),
            "gumbel[{i}]: {} vs {want}",
            g[i]
        );
    }
    assert!(g.iter().all(|x| x.is_finite()));
    let (m, var) = mean_and_variance(&g, 0.0);
    assert!((m - 0.577_215_664_9).abs() < 0.02, "gumbel mean {m}");
    assert!(
        (var - std::f64::consts::PI.powi(2) / 6.0).abs() < 0.05,
        "gumbel var {var}"
    );
    let ks = ks_distance(&g, |x| (-(-x).exp()).exp());
    assert!(ks < ks_critical(n), "gumbel KS {ks}");
    // 16-bit dtypes: moments.
    for dtype in [DType::F16, DType::BF16] {
        let v = random::laplace(&k, &[n], 0.0, 1.0, dtype).unwrap();
        assert_eq!(v.dtype(), dtype);
        let (m, var) = mean_and_variance(&v.to_f64_vec().unwrap(), 0.0);
        assert!(
            m.abs() < 0.03 && (var - 2.0).abs() < 0.1,
            "{dtype}: {m} {var}"
        );
        let g = random::gumbel(&k, &[n], dtype)
            .unwrap()
            .to_f64_vec()
            .unwrap();
        let (m, _) = mean_and_variance(&g, 0.0);
        assert!((m - 0.5772).abs() < 0.03, "{dtype}: gumbel mean {m}");
    }
}

/// The standard normal CDF.
fn phi(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

#[test]
fn truncated_normal_stays_inside_and_follows_its_cdf() {
    let d = device();
    let k = random::key(123, &d).unwrap();
    let n = 100_003;
    let inf = f64::INFINITY;
    for (a, b) in [
        (-2.0, 2.0),
        (3.0, 6.0),
        (-inf, -1.0),
        (-1.0, inf),
        (-inf, inf),
        (0.5, 0.75),
        (-8.0, -7.5),
    ] {
        let v = random::truncated_normal(&k, &[n], a, b, DType::F32)
            .unwrap()
            .to_f64_vec()
            .unwrap();
        assert!(
            v.iter().all(|&x| a < x && x < b),
            "({a}, {b}): a value outside"
        );
        // The CDF of the truncated law, the tails by erfc.
        let (pa, pb) = (phi(a), phi(b));
        let cdf = |x: f64| {
            if a >= 0.0 {
                let q = |t: f64| 0.5 * libm::erfc(t / std::f64::consts::SQRT_2);
                (q(a) - q(x)) / (q(a) - q(b))
            } else {
                (phi(x) - pa) / (pb - pa)
            }
        };
        let ks = ks_distance(&v, cdf);
        assert!(ks < ks_critical(n), "({a}, {b}): KS {ks}");
    }
    for dtype in [DType::F16, DType::BF16] {
        for (a, b) in [(-2.0, 2.0), (1.0, 1.01)] {
            let v = random::truncated_normal(&k, &[4099], a, b, dtype).unwrap();
            assert_eq!(v.dtype(), dtype);
            assert!(
                v.to_f64_vec().unwrap().iter().all(|&x| a < x && x < b),
                "{dtype} ({a}, {b})"
            );
        }
    }
}

#[test]
fn bernoulli_with_a_scalar_and_an_array_of_probabilities() {
    let d = device();
    let seed = 8;
    let k = random::key(seed, &d).unwrap();
    let n = 100_003;
    let v = random::bernoulli(&k, 0.3, &[n]).unwrap();
    assert_eq!(v.dtype(), DType::Bool);
    let v = v.to_vec::<bool>().unwrap();
    // Exactly `uniform < p` on the 24-bit uniform.
    let w = host_bits(key_words(seed), 2048, 0);
    for (i, &x) in w.iter().enumerate() {
        assert_eq!(v[i], unit(x) < 0.3f32, "[{i}]");
    }
    let p = v.iter().filter(|&&b| b).count() as f64 / n as f64;
    assert!((p - 0.3).abs() < 0.005, "frequency {p}");
    assert!(
        random::bernoulli(&k, 0.0, &[999])
            .unwrap()
            .to_vec::<bool>()
            .unwrap()
            .iter()
            .all(|b| !b)
    );
    assert!(
        random::bernoulli(&k, 1.0, &[999])
            .unwrap()
            .to_vec::<bool>()
            .unwrap()
            .iter()
            .all(|&b| b)
    );
    // A probability per column, broadcast over rows.
    let probs = [0.0f32, 0.1, 0.5, 0.9, 1.0];
    let pa = Array::from_slice(&probs, &[1, 5], &d).unwrap();
    let rows = 20_000;
    let m = random::bernoulli_with(&k, &pa, Some(&[rows, 5])).unwrap();
    assert_eq!(m.shape(), &[rows, 5]);
    let m = m.to_vec::<bool>().unwrap();
    for (j, &p) in probs.iter().enumerate() {
        let f = (0..rows).filter(|&r| m[r * 5 + j]).count() as f64 / rows as f64;
        assert!((f - p as f64).abs() < 0.015, "column {j}: {f} vs {p}");
    }
    // p's own shape when none is given; f16 probabilities.
    let ph = pa.astype(DType::F16).unwrap();
    assert_eq!(
        random::bernoulli_with(&k, &ph, None).unwrap().shape(),
        &[1, 5]
    );
}

#[test]
fn categorical_samples_softmax_of_the_logits() {
    let d = device();
    let k = random::key(2024, &d).unwrap();
    let probs = [0.1f64, 0.2, 0.0, 0.7];
    let logits: Vec<f32> = probs.iter().map(|&p| (p as f32).ln()).collect();
    // Two distributions along axis 0 (the second one shifted by +3: the
    // same probabilities), as columns of a [4, 2] array.
    let mut cols = Vec::new();
    for &l in &logits {
        cols.push(l);
        cols.push(l + 3.0);
    }
    let x = Array::from_slice(&cols, &[4, 2], &d).unwrap();
    let s = 40_000;
    let draws = random::categorical(&k, &x, 0, Some(s)).unwrap();
    assert_eq!(
        (draws.dtype(), draws.shape()),
        (DType::U32, &[2usize, s][..])
    );
    let v = draws.to_vec::<u32>().unwrap();
    for row in 0..2 {
        let mut counts = [0u64; 4];
        for &c in &v[row * s..(row + 1) * s] {
            counts[c as usize] += 1;
        }
        assert_eq!(counts[2], 0, "a category of probability 0 was drawn");
        let chi = chi_square(&[counts[0], counts[1], counts[3]], &[0.1, 0.2, 0.7]);
        assert!(
            chi < chi_square_critical(2),
            "row {row}: chi-square {chi}: {counts:?}"
        );
    }
    // One draw per row of a batch of logits along the last axis, in
    // every float dtype; the same key gives the same tokens.
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let l = Array::from_slice(&[0.0f32, 0.0, 50.0, 0.0, 60.0, 0.0], &[2, 3], &d)
            .unwrap()
            .astype(dtype)
            .unwrap();
        let t = random::categorical(&k, &l, -1, None).unwrap();
        assert_eq!(t.shape(), &[2]);
        assert_eq!(t.to_vec::<u32>().unwrap(), vec![2, 1], "{dtype}");
    }
    let a = random::categorical(&k, &x.transpose(), -1, Some(7)).unwrap();
    let b = random::categorical(&k, &x.transpose(), -1, Some(7)).unwrap();
    assert_eq!(a.to_vec::<u32>().unwrap(), b.to_vec::<u32>().unwrap());
    // Zero samples, or an empty batch: an empty result.
    assert_eq!(
        random::categorical(&k, &x, 0, Some(0)).unwrap().shape(),
        &[2, 0]
    );
    let e = Array::zeros(&[0, 3], DType::F32, &d).unwrap();
    assert_eq!(random::categorical(&k, &e, 1, None).unwrap().shape(), &[0]);
}

#[test]
fn new_sampler_errors_name_the_op_and_leave_nothing() {
    let d = device();
    {
        let k = random::key(1, &d).unwrap();
        let bad = |r: wgarray::Result<Array>, op: &str| match r {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(op), "{m}"),
            other => panic!(
                "{op}: expected InvalidArgument, got {:?}",
                other.map(|a| a.shape().to_vec())
            ),
        };
        bad(random::randint(&k, &[3], 5, 5, DType::I32), "randint");
        bad(random::randint(&k, &[3], -1, 5, DType::U32), "randint");
        bad(
            random::randint(&k, &[3], 0, (1i64 << 31) + 1, DType::I32),
            "randint",
        );
        assert!(matches!(
            random::randint(&k, &[3], 0, 5, DType::F32),
            Err(Error::DType {
                op: "random::randint",
                ..
            })
        ));
        bad(random::laplace(&k, &[3], 0.0, 0.0, DType::F32), "laplace");
        bad(
            random::laplace(&k, &[3], f64::NAN, 1.0, DType::F32),
            "laplace",
        );
        assert!(matches!(
            random::gumbel(&k, &[3], DType::U32),
            Err(Error::DType {
                op: "random::gumbel",
                ..
            })
        ));
        bad(
            random::truncated_normal(&k, &[3], 1.0, 1.0, DType::F32),
            "truncated_normal",
        );
        bad(
            random::truncated_normal(&k, &[3], f64::NAN, 1.0, DType::F32),
            "truncated_normal",
        );
        bad(
            random::truncated_normal(&k, &[3], 40.0, 50.0, DType::F32),
            "truncated_normal",
        );
        bad(
            random::truncated_normal(&k, &[3], 1.0, 1.001, DType::BF16),
            "truncated_normal",
        );
        bad(random::bernoulli(&k, 1.5, &[3]), "bernoulli");
        let bools = Array::zeros(&[3], DType::Bool, &d).unwrap();
        assert!(matches!(
            random::bernoulli_with(&k, &bools, None),
            Err(Error::DType {
                op: "random::bernoulli",
                ..
            })
        ));
        let p = Array::zeros(&[3], DType::F32, &d).unwrap();
        assert!(matches!(
            random::bernoulli_with(&k, &p, Some(&[4])),
            Err(Error::ShapeMismatch { .. })
        ));
        let logits = Array::zeros(&[2, 0], DType::F32, &d).unwrap();
        bad(random::categorical(&k, &logits, -1, None), "categorical");
        assert!(matches!(
            random::categorical(&k, &logits, 2, None),
            Err(Error::InvalidAxis { .. })
        ));
        let ints = Array::zeros(&[2, 3], DType::I32, &d).unwrap();
        assert!(matches!(
            random::categorical(&k, &ints, -1, None),
            Err(Error::DType {
                op: "random::categorical",
                ..
            })
        ));
        assert!(matches!(
            random::laplace(
                &Array::zeros(&[3], DType::U32, &d).unwrap(),
                &[3],
                0.0,
                1.0,
                DType::F32
            ),
            Err(Error::ShapeMismatch { .. })
        ));
    }
    assert_empty(&d);
}

/// The dispatch counts docs/OPS.md gives for the samplers composed of
/// several nodes (with fusion on).
#[test]
fn composed_samplers_cost_the_documented_dispatches() {
    let d = device();
    d.set_fusion(true);
    let k = random::key(5, &d).unwrap();
    k.eval().unwrap();
    let count = |a: Array| {
        let before = d.dispatches();
        a.eval().unwrap();
        d.dispatches() - before
    };
    let logits = Array::from_slice(&[0.5f32, 1.0, -1.0, 2.0, 0.0, 0.25], &[2, 3], &d).unwrap();
    logits.eval().unwrap();
    assert_eq!(
        count(random::categorical(&k, &logits, -1, None).unwrap()),
        2,
        "categorical: the noise, then argmax with the sum in its loads"
    );
    assert_eq!(
        count(random::bernoulli(&k, 0.3, &[33]).unwrap()),
        2,
        "bernoulli"
    );
}

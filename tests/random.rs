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
    // functions, cut from wgsl/random.wgsl, on arbitrary counters.
    let src = include_str!("../wgsl/random.wgsl");
    let start = src.find("fn mulhilo").expect("mulhilo in random.wgsl");
    let end = src.find("// A float in [0, 1)").expect("end marker");
    let kernel = format!(
        "{}\n\
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

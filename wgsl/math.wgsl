// Scalar math the WGSL builtins lack, for the elementwise kernel. All f32.

const NAN_BITS: u32 = 0x7fc00000u;
const INF_BITS: u32 = 0x7f800000u;

// log(1 + x) and exp(x) - 1 to about 1 ulp of f32, from additions,
// multiplications and bit operations (musl's log1pf and expm1f, after Sun's
// fdlibm: argument reduction by powers of two, k * ln 2 split in a part
// exact in f32 and a correction, minimax polynomials). Measured maxima are
// in docs/ARCHITECTURE.md, "Accuracy of log1p and expm1". Not WGSL's `log` and `exp`: WGSL allows
// them 3 ulp (and `exp` 3 + 2|x|), `log(1 + x)` loses the low bits of x, and
// `1 + x` tricks (Goldberg's theorem 4) stay as inaccurate as `log`. Each
// division only feeds a correction term, so WGSL's 2.5 ulp division costs
// a small fraction of an ulp. Special values are tested on the bits.
fn log1p_f(x: f32) -> f32 {
    let ix = bitcast<u32>(x);
    if is_nan(x) || ix == INF_BITS {
        return x;
    }
    if ix >= 0xbf800000u {
        // x <= -1: -inf at -1, NaN below.
        if ix == 0xbf800000u {
            return bitcast<f32>(0xff800000u);
        }
        return bitcast<f32>(NAN_BITS);
    }
    // 1 + x = 2^k (1 + f) with f exact in f32 (musl's reduction, but with
    // [sqrt(2)/2, 3/2) for k = 0 instead of [sqrt(2)/2, sqrt(2)): then f is
    // exact for every k, where musl rounds it and corrects by
    // c = x - ((1 + x) - 1), which compilers that reassociate, Mesa's NIR
    // among them, fold to 0; that lost up to 0.7 ulp).
    var k = 1;
    var f = x;
    if ix < 0x3f000000u || (ix >> 31u) != 0u {
        // |x| < 2^-24 is its own log1p (subnormals too).
        if (ix << 1u) < (0x33800000u << 1u) {
            return x;
        }
        // -0.2929 <= x < 0.5: f = x.
        if ix <= 0xbe95f619u {
            k = 0;
        }
    }
    if k != 0 {
        // k from the rounded 1 + x: 1 + f in [sqrt(2)/2, sqrt(2)), give or
        // take that rounding.
        var iu = bitcast<u32>(1.0 + x) + (0x3f800000u - 0x3f3504f3u);
        k = i32(iu >> 23u) - 0x7f;
        if k < 25 {
            // f = x 2^-k + (2^-k - 1): x 2^-k and 2^-k - 1 are exact, and
            // so is their sum, a multiple of 2^-25 below 1/2 in magnitude.
            let p = bitcast<f32>(u32(0x7f - k) << 23u);
            f = x * p + (p - 1.0);
        } else {
            // 1 + x rounded loses less than 2^-24 of it: nothing to correct.
            iu = (iu & 0x007fffffu) + 0x3f3504f3u;
            f = bitcast<f32>(iu) - 1.0;
        }
    }
    // log(1 + f) = 2 atanh(s), s = f / (2 + f), by a minimax in s^2.
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (bitcast<f32>(0x3eccce13u) + w * bitcast<f32>(0x3e789e26u));
    let t2 = z * (bitcast<f32>(0x3f2aaaaau) + w * bitcast<f32>(0x3e91e9eeu));
    let hfsq = 0.5 * f * f;
    let dk = f32(k);
    // ln 2 = hi + lo, hi with trailing zeros so that dk * hi is exact.
    let ln2_hi = bitcast<f32>(0x3f317180u);
    let ln2_lo = bitcast<f32>(0x3717f7d1u);
    return s * (hfsq + t2 + t1) + dk * ln2_lo - hfsq + f + dk * ln2_hi;
}

// Branch-free (as every hot function below): SIMD-masked drivers
// (lavapipe, llvmpipe, and GPUs on divergent lanes) run both sides of an
// `if`, so the argument is clamped into the core's range, the core runs
// once, fdlibm's cases of the result are each a few operations picked by
// `select`, and special values (NaN, infinities, tiny and huge x) are
// selected at the end, on the bits.
fn expm1_f(x_in: f32) -> f32 {
    let ux = bitcast<u32>(x_in);
    let hx = ux & 0x7fffffffu;
    let negative = (ux >> 31u) != 0u;
    // Past -27 ln 2 the result is -1, past ln(f32::MAX) inf: clamp there
    // (NaN gives anything here, replaced at the end).
    let x = clamp(x_in, bitcast<f32>(0xc195b844u), bitcast<f32>(0x42b17217u));
    let ln2_hi = bitcast<f32>(0x3f317180u);
    let ln2_lo = bitcast<f32>(0x3717f7d1u);
    // x = k ln 2 + r, |r| <= ln 2 / 2 (give or take the rounding of
    // x / ln 2, which the minimax tolerates); k = 0 for |x| <= ln 2 / 2,
    // where r = x and the correction c = 0 exactly.
    var k = i32(bitcast<f32>(0x3fb8aa3bu) * x + select(0.5, -0.5, negative));
    k = select(k, 0, hx <= 0x3eb17218u);
    let t = f32(k);
    let hi = x - t * ln2_hi;
    let lo = t * ln2_lo;
    let r = hi - lo;
    let c = (hi - r) - lo;
    // exp(r) - 1 by a rational minimax (fdlibm's R).
    let hfx = 0.5 * r;
    let hxs = r * hfx;
    let r1 = 1.0 + hxs * (bitcast<f32>(0xbd088868u) + hxs * bitcast<f32>(0x3acf3010u));
    let t3 = 3.0 - r1 * hfx;
    var e = hxs * ((r1 - t3) / (6.0 - r * t3));
    let y_k0 = r - (r * e - hxs);
    e = r * (e - c) - c;
    e -= hxs;
    // exp(x) - 1 = 2^k (r - e + 1) - 1, rounded as fdlibm does by k.
    let y_km1 = 0.5 * (r - e) - 0.5;
    let y_k1 = select(1.0 + 2.0 * (r - e), -2.0 * (e - (r + 0.5)), r < -0.25);
    let twopk = exp2i_f(min(k, 127));
    let twomk = exp2i_f(max(-k, -126));
    // k < 0 or k > 56: 2^(k - 1), then 2 (2^128 at k = 128 is past f32;
    // neither factor is a constant a compiler could fold into an inf).
    let y_far = (r - e + 1.0) * exp2i_f(k - 1) * 2.0 - 1.0;
    let y_mid = select((r - (e + twomk) + 1.0) * twopk, (r - e + (1.0 - twomk)) * twopk, k < 23);
    var y = select(y_mid, y_far, k < 0 || k > 56);
    y = select(y, y_k1, k == 1);
    y = select(y, y_km1, k == -1);
    y = select(y, y_k0, k == 0);
    // |x| < 2^-25 is its own expm1 (subnormals too).
    y = select(y, x_in, hx < 0x33000000u);
    y = select(y, -1.0, negative && hx >= 0x4195b844u);
    y = select(y, bitcast<f32>(INF_BITS), !negative && hx > 0x42b17217u);
    return select(y, x_in, hx > INF_BITS);
}

// NumPy maximum/minimum: NaN propagates.
fn maximum_f(a: f32, b: f32) -> f32 {
    if is_nan(a) || is_nan(b) {
        return bitcast<f32>(NAN_BITS);
    }
    return max(a, b);
}

fn minimum_f(a: f32, b: f32) -> f32 {
    if is_nan(a) || is_nan(b) {
        return bitcast<f32>(NAN_BITS);
    }
    return min(a, b);
}

fn pow_i(a: i32, b: i32) -> i32 {
    if b < 0 {
        return 0;
    }
    var base = a;
    var e = u32(b);
    var r = 1;
    while e > 0u {
        if (e & 1u) == 1u {
            r *= base;
        }
        base *= base;
        e >>= 1u;
    }
    return r;
}

fn pow_u(a: u32, b: u32) -> u32 {
    var base = a;
    var e = b;
    var r = 1u;
    while e > 0u {
        if (e & 1u) == 1u {
            r *= base;
        }
        base *= base;
        e >>= 1u;
    }
    return r;
}

// Floored remainder and quotient (NumPy remainder / floor_divide).
fn rem_f(a: f32, b: f32) -> f32 {
    var m = a - b * trunc(a / b);
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        m += b;
    }
    return m;
}

fn fdiv_f(a: f32, b: f32) -> f32 {
    return floor(a / b);
}

// Truncated remainder without `%`: GLSL leaves `%` on negative operands
// undefined, and naga's GL back end passes it through.
fn trem_i(a: i32, b: i32) -> i32 {
    return a - (a / b) * b;
}

fn rem_i(a: i32, b: i32) -> i32 {
    if b == 0 {
        return 0;
    }
    let r = trem_i(a, b);
    if r != 0 && ((r < 0) != (b < 0)) {
        return r + b;
    }
    return r;
}

fn fdiv_i(a: i32, b: i32) -> i32 {
    if b == 0 {
        return 0;
    }
    let q = a / b;
    if (trem_i(a, b) != 0) && ((a < 0) != (b < 0)) {
        return q - 1;
    }
    return q;
}

fn rem_u(a: u32, b: u32) -> u32 {
    if b == 0u {
        return 0u;
    }
    return a % b;
}

fn fdiv_u(a: u32, b: u32) -> u32 {
    if b == 0u {
        return 0u;
    }
    return a / b;
}

// ---- Accurate f32 elementary functions (ops from issue 21) ----
//
// Each is a transcription of a float routine from musl (after Sun's
// fdlibm) or of a published algorithm, named at the function; only
// `+ - * /`, `sqrt` and bit operations, never WGSL's `exp`, `log`, `tan`,
// `asin`, ... whose WGSL accuracy bounds are loose (3 ulp and worse, an
// absolute 2^-21 for `log` near 1, `tan` inherited from sin/cos with an
// absolute 2^-11). Special values (NaN, infinities, thresholds) are tested
// on the bits: drivers may assume no NaN in float comparisons. Measured
// maxima are in docs/OPS.md, "Accuracy".

const LN2_F: f32 = 0.693147180559945309;

// 2^k as an f32, for -126 <= k <= 127.
fn exp2i_f(k: i32) -> f32 {
    return bitcast<f32>(u32(0x7f + k) << 23u);
}

// y 2^k for -252 <= k <= 254 in two exact steps (musl's scalbnf, without
// its subnormal care: a GPU may flush subnormal results to zero).
fn scalbn_f(y: f32, k: i32) -> f32 {
    let k1 = k / 2;
    return y * exp2i_f(k1) * exp2i_f(k - k1);
}

// e^x (musl's expf before 2017, after fdlibm): x = k ln 2 + r with ln 2
// split in an exact part and a correction, a degree-2 rational in r.
fn exp_f(x_in: f32) -> f32 {
    let ux = bitcast<u32>(x_in);
    let negative = (ux >> 31u) != 0u;
    let hx = ux & 0x7fffffffu;
    // Overflow past 0x42b17218, underflow below -0x42cff1b5: clamp just
    // beyond both (the results are selected at the end, NaN too).
    let x = clamp(x_in, -104.0, 89.0);
    // k = round(x / ln 2), 0 for |x| <= ln 2 / 2 (then hi = x, lo = 0).
    var k = i32(bitcast<f32>(0x3fb8aa3bu) * x + select(0.5, -0.5, negative));
    k = select(k, 0, hx <= 0x3eb17218u);
    let dk = f32(k);
    let hi = x - dk * bitcast<f32>(0x3f317200u);
    let lo = dk * bitcast<f32>(0x35bfbe8eu);
    let r = hi - lo;
    let rr = r * r;
    let c = r - rr * (bitcast<f32>(0x3e2aaa8fu) + rr * bitcast<f32>(0xbb355215u));
    // 1 + (r c / (2 - c) - lo + hi), written so that a compiler which
    // reassociates the constant 1 into the sum (lavapipe did, 2.1 ulp)
    // does not.
    var y = scalbn_f(1.0 - ((lo - r * c / (2.0 - c)) - hi), k);
    y = select(y, bitcast<f32>(INF_BITS), !negative && hx >= 0x42b17218u);
    y = select(y, 0.0, negative && hx >= 0x42cff1b5u);
    return select(y, x_in, hx > INF_BITS);
}

// 2^x: x = k + r with k = round(x) and |r| <= 1/2 both exact, then
// e^(r ln 2) by exp_f (the product's rounding moves the result by at most
// 0.35 ulp) scaled by 2^k exactly (as musl's exp2f, which uses a table for
// 2^r instead).
fn exp2_f(x: f32) -> f32 {
    if is_nan(x) {
        return x;
    }
    let hx = bitcast<u32>(x) & 0x7fffffffu;
    if x >= 128.0 {
        return bitcast<f32>(INF_BITS);
    }
    if x < -150.0 {
        return 0.0;
    }
    if hx <= 0x33000000u {
        // |x| <= 2^-25: 1 + x ln 2 rounds to 1.
        return 1.0;
    }
    let k = round(x);
    return scalbn_f(exp_f((x - k) * LN2_F), i32(k));
}

// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow, and e^x itself
// (by log1p's x for tiny x) far below 0 (PyTorch and JAX's stable form).
fn softplus_f(x: f32) -> f32 {
    if is_nan(x) {
        return x;
    }
    let ax = bitcast<f32>(bitcast<u32>(x) & 0x7fffffffu);
    return max(x, 0.0) + log1p_f(exp_f(-ax));
}

// The shared part of log, log2 and log10 (musl's logf, log2f, log10f
// before 2017, after fdlibm): x = 2^k (1 + f) with 1 + f in
// [sqrt(2)/2, sqrt(2)), exact. Returns (k, f, s (hfsq + R), hfsq), where
// log(1 + f) = f - hfsq + s (hfsq + R). Subnormal x are normalised with
// integer operations (a GPU may flush them to zero in float arithmetic).
fn log_parts(x: f32) -> vec4<f32> {
    let ix0 = bitcast<u32>(x);
    // A subnormal x = ix 2^-149, and f32(ix) is exact.
    let subnormal = ix0 < 0x00800000u;
    var ix = select(ix0, bitcast<u32>(f32(ix0)), subnormal);
    var k = select(0, -149, subnormal);
    ix += 0x3f800000u - 0x3f3504f3u;
    k += i32(ix >> 23u) - 0x7f;
    ix = (ix & 0x007fffffu) + 0x3f3504f3u;
    let f = bitcast<f32>(ix) - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (bitcast<f32>(0x3eccce13u) + w * bitcast<f32>(0x3e789e26u));
    let t2 = z * (bitcast<f32>(0x3f2aaaaau) + w * bitcast<f32>(0x3e91e9eeu));
    let hfsq = 0.5 * f * f;
    return vec4<f32>(f32(k), f, s * (hfsq + t2 + t1), hfsq);
}

// log, log2, log10 of special x (NaN, <= 0, +inf, 1), as the bits of the
// result; 1u (not a float result here) when x is ordinary.
fn log_special_bits(x: f32) -> u32 {
    let ix = bitcast<u32>(x);
    var r = select(1u, 0u, ix == 0x3f800000u);
    r = select(r, INF_BITS, ix == INF_BITS);
    r = select(r, NAN_BITS, (ix >> 31u) != 0u);
    r = select(r, 0xff800000u, (ix << 1u) == 0u);
    return select(r, ix, (ix & 0x7fffffffu) > INF_BITS);
}

fn log_f(x: f32) -> f32 {
    let special = log_special_bits(x);
    let p = log_parts(x);
    let dk = p.x;
    let y = p.z + dk * bitcast<f32>(0x3717f7d1u) - p.w + p.y + dk * bitcast<f32>(0x3f317180u);
    return select(bitcast<f32>(special), y, special == 1u);
}

// log2 and log10: f - hfsq split in a 12-bit head and a tail, so the
// products with the head of 1/ln 2 (1/ln 10) are exact.
fn log2_f(x: f32) -> f32 {
    let special = log_special_bits(x);
    let p = log_parts(x);
    let hi = bitcast<f32>(bitcast<u32>(p.y - p.w) & 0xfffff000u);
    let lo = p.y - hi - p.w + p.z;
    let ivln2hi = bitcast<f32>(0x3fb8b000u);
    let ivln2lo = bitcast<f32>(0xb9389ad4u);
    let y = (lo + hi) * ivln2lo + lo * ivln2hi + hi * ivln2hi + p.x;
    return select(bitcast<f32>(special), y, special == 1u);
}

// log10_f follows log2_f step by step but stays apart: each is musl's own
// routine with its own constants, checked line by line against it.
fn log10_f(x: f32) -> f32 {
    let special = log_special_bits(x);
    let p = log_parts(x);
    let hi = bitcast<f32>(bitcast<u32>(p.y - p.w) & 0xfffff000u);
    let lo = p.y - hi - p.w + p.z;
    let ivln10hi = bitcast<f32>(0x3ede6000u);
    let ivln10lo = bitcast<f32>(0xb804ead9u);
    let log10_2hi = bitcast<f32>(0x3e9a2080u);
    let log10_2lo = bitcast<f32>(0x355427dbu);
    let y = p.x * log10_2lo + (lo + hi) * ivln10lo + lo * ivln10hi + hi * ivln10hi + p.x * log10_2hi;
    return select(bitcast<f32>(special), y, special == 1u);
}

// e^|x| / 2 times sign for |x| beyond ln(f32::MAX), without overflowing
// on the way (musl's __expo2f): e^(x - k ln 2) 2^(k - 1), k = 235. The
// second factor 2^117 goes into the exponent bits: a shader compiler may
// reassociate `y * 2^117 * 2^117` into `y * inf` (lavapipe does).
fn expo2_f(x: f32, sign: f32) -> f32 {
    let y = exp_f(x - bitcast<f32>(0x4322e3bcu)) * (sign * exp2i_f(117));
    let uy = bitcast<u32>(y);
    if ((uy >> 23u) & 0xffu) + 117u >= 0xffu {
        return bitcast<f32>((uy & 0x80000000u) | INF_BITS);
    }
    return bitcast<f32>(uy + (117u << 23u));
}

// sinh and cosh (musl's sinhf, coshf): from expm1 near 0, from exp
// further out, expo2 past ln(f32::MAX).
fn sinh_f(x: f32) -> f32 {
    let h = select(0.5, -0.5, (bitcast<u32>(x) >> 31u) != 0u);
    let w = bitcast<u32>(x) & 0x7fffffffu;
    let a = bitcast<f32>(w);
    if is_nan(x) {
        return x;
    }
    if w < 0x42b17217u {
        let t = expm1_f(a);
        if w < 0x3f800000u {
            if w < 0x39800000u {
                return x;
            }
            return h * (2.0 * t - t * t / (t + 1.0));
        }
        return h * (t + t / (t + 1.0));
    }
    return expo2_f(a, 2.0 * h);
}

fn cosh_f(x: f32) -> f32 {
    let w = bitcast<u32>(x) & 0x7fffffffu;
    let a = bitcast<f32>(w);
    if is_nan(x) {
        return x;
    }
    if w < 0x3f317217u {
        if w < 0x39800000u {
            return 1.0;
        }
        let t = expm1_f(a);
        return 1.0 + t * t / (2.0 * (1.0 + t));
    }
    if w < 0x42b17217u {
        let t = exp_f(a);
        return 0.5 * (t + 1.0 / t);
    }
    return expo2_f(a, 1.0);
}

// The rational approximation of asin near 0 shared by asin and acos
// (musl's asinf/acosf R(z)): asin(x) = x + x R(x^2).
fn asin_r(z: f32) -> f32 {
    let p = z * (bitcast<f32>(0x3e2aaa75u) + z * (bitcast<f32>(0xbd2f13bau) + z * bitcast<f32>(0xbc0dd36bu)));
    let q = 1.0 + z * bitcast<f32>(0xbf34e5aeu);
    return p / q;
}

// pi/2 as a head exact in f32 and a tail.
const PIO2_HI_BITS: u32 = 0x3fc90fdau;
const PIO2_LO_BITS: u32 = 0x33a22168u;

// asin (musl's asinf; for |x| >= 1/2 fdlibm's split of sqrt((1 - |x|)/2)
// into a 12-bit head and a correction, so that no double is needed).
fn asin_f(x: f32) -> f32 {
    let hx = bitcast<u32>(x);
    let ix = hx & 0x7fffffffu;
    if ix >= 0x3f800000u {
        if ix == 0x3f800000u {
            return x * bitcast<f32>(PIO2_HI_BITS) + x * bitcast<f32>(PIO2_LO_BITS);
        }
        return bitcast<f32>(NAN_BITS);
    }
    if ix < 0x3f000000u {
        if ix < 0x39800000u {
            return x;
        }
        return x + x * asin_r(x * x);
    }
    let z = (1.0 - bitcast<f32>(ix)) * 0.5;
    let s = sqrt(z);
    let df = bitcast<f32>(bitcast<u32>(s) & 0xfffff000u);
    let c = (z - df * df) / (s + df);
    let pio4_hi = bitcast<f32>(0x3f490fdau);
    let p = 2.0 * s * asin_r(z) - (bitcast<f32>(PIO2_LO_BITS) - 2.0 * c);
    let q = pio4_hi - 2.0 * df;
    let t = pio4_hi - (p - q);
    return select(t, -t, (hx >> 31u) != 0u);
}

// acos (musl's acosf).
fn acos_f(x: f32) -> f32 {
    let hx = bitcast<u32>(x);
    let ix = hx & 0x7fffffffu;
    let pio2_hi = bitcast<f32>(PIO2_HI_BITS);
    let pio2_lo = bitcast<f32>(PIO2_LO_BITS);
    if ix >= 0x3f800000u {
        if ix == 0x3f800000u {
            return select(0.0, 2.0 * pio2_hi + 2.0 * pio2_lo, (hx >> 31u) != 0u);
        }
        return bitcast<f32>(NAN_BITS);
    }
    if ix < 0x3f000000u {
        if ix <= 0x32800000u {
            return pio2_hi + pio2_lo;
        }
        return pio2_hi - (x - (pio2_lo - x * asin_r(x * x)));
    }
    if (hx >> 31u) != 0u {
        let z = (1.0 + x) * 0.5;
        let s = sqrt(z);
        let w = asin_r(z) * s - pio2_lo;
        return 2.0 * (pio2_hi - (s + w));
    }
    let z = (1.0 - x) * 0.5;
    let s = sqrt(z);
    let df = bitcast<f32>(bitcast<u32>(s) & 0xfffff000u);
    let c = (z - df * df) / (s + df);
    let w = asin_r(z) * s + c;
    return 2.0 * (df + w);
}

// atan (musl's atanf, after fdlibm): reduction to |x| < 7/16 around
// atan(1/2), atan(1), atan(3/2) and atan(inf), each a head and a tail.
fn atan_f(x_in: f32) -> f32 {
    let ux = bitcast<u32>(x_in);
    let negative = (ux >> 31u) != 0u;
    let ix = ux & 0x7fffffffu;
    if ix >= 0x4c800000u {
        // |x| >= 2^26
        if is_nan(x_in) {
            return x_in;
        }
        let z = bitcast<f32>(PIO2_HI_BITS) + bitcast<f32>(PIO2_LO_BITS);
        return select(z, -z, negative);
    }
    var x = x_in;
    var hi = 0.0;
    var lo = 0.0;
    var reduced = true;
    if ix < 0x3ee00000u {
        // |x| < 7/16
        if ix < 0x39800000u {
            return x;
        }
        reduced = false;
    } else {
        x = abs(x);
        if ix < 0x3f300000u {
            // 7/16 <= |x| < 11/16
            hi = bitcast<f32>(0x3eed6338u);
            lo = bitcast<f32>(0x31ac3769u);
            x = (2.0 * x - 1.0) / (2.0 + x);
        } else if ix < 0x3f980000u {
            // 11/16 <= |x| < 19/16
            hi = bitcast<f32>(0x3f490fdau);
            lo = bitcast<f32>(0x33222168u);
            x = (x - 1.0) / (x + 1.0);
        } else if ix < 0x401c0000u {
            // 19/16 <= |x| < 39/16
            hi = bitcast<f32>(0x3f7b985eu);
            lo = bitcast<f32>(0x33140fb4u);
            x = (x - 1.5) / (1.0 + 1.5 * x);
        } else {
            hi = bitcast<f32>(PIO2_HI_BITS);
            lo = bitcast<f32>(PIO2_LO_BITS);
            x = -1.0 / x;
        }
    }
    let z = x * x;
    let w = z * z;
    let s1 = z * (bitcast<f32>(0x3eaaaaa9u) + w * (bitcast<f32>(0x3e11f50du) + w * bitcast<f32>(0x3d7cac25u)));
    let s2 = w * (bitcast<f32>(0xbe4cca98u) + w * bitcast<f32>(0xbdda1247u));
    if !reduced {
        return x - x * (s1 + s2);
    }
    let r = hi - ((x * (s1 + s2) - lo) - x);
    return select(r, -r, negative);
}

// atan2(y, x) (musl's atan2f), NumPy's `arctan2` argument order.
fn atan2_f(y: f32, x: f32) -> f32 {
    if is_nan(x) || is_nan(y) {
        return bitcast<f32>(NAN_BITS);
    }
    let pi = bitcast<f32>(0x40490fdbu);
    let pi_lo = bitcast<f32>(0xb3bbbd2eu);
    let pio2 = bitcast<f32>(0x3fc90fdbu);
    let pio4 = bitcast<f32>(0x3f490fdbu);
    let ux = bitcast<u32>(x);
    let uy = bitcast<u32>(y);
    if ux == 0x3f800000u {
        return atan_f(y);
    }
    // m = 2 sign(x) + sign(y)
    let m = ((uy >> 31u) & 1u) | ((ux >> 30u) & 2u);
    let ix = ux & 0x7fffffffu;
    let iy = uy & 0x7fffffffu;
    let ysign = (m & 1u) != 0u;
    if iy == 0u {
        if m < 2u {
            return y;
        }
        return select(pi, -pi, ysign);
    }
    if ix == 0u {
        return select(pio2, -pio2, ysign);
    }
    if ix == INF_BITS {
        var r = 0.0;
        if iy == INF_BITS {
            r = select(pio4, 3.0 * pio4, m >= 2u);
        } else if m >= 2u {
            r = pi;
        }
        return select(r, -r, ysign);
    }
    if ix + (26u << 23u) < iy || iy == INF_BITS {
        return select(pio2, -pio2, ysign);
    }
    var z = 0.0;
    if !((m & 2u) != 0u && iy + (26u << 23u) < ix) {
        z = atan_f(abs(y / x));
    }
    if m == 0u {
        return z;
    }
    if m == 1u {
        return -z;
    }
    if m == 2u {
        return pi - (z - pi_lo);
    }
    return (z - pi_lo) - pi;
}

// asinh, acosh, atanh (musl's asinhf, acoshf, atanhf).
fn asinh_f(x_in: f32) -> f32 {
    let i = bitcast<u32>(x_in) & 0x7fffffffu;
    let x = bitcast<f32>(i);
    var r = x;
    if i >= 0x45800000u {
        // |x| >= 2^12, inf and NaN
        r = log_f(x) + LN2_F;
    } else if i >= 0x40000000u {
        // |x| >= 2
        r = log_f(2.0 * x + 1.0 / (sqrt(x * x + 1.0) + x));
    } else if i >= 0x39800000u {
        // |x| >= 2^-12
        r = log1p_f(x + x * x / (sqrt(x * x + 1.0) + 1.0));
    }
    return select(r, -r, (bitcast<u32>(x_in) >> 31u) != 0u);
}

fn acosh_f(x: f32) -> f32 {
    let u = bitcast<u32>(x);
    if is_nan(x) {
        return x;
    }
    if u < 0x3f800000u || (u >> 31u) != 0u {
        // x < 1
        return bitcast<f32>(NAN_BITS);
    }
    if u < 0x40000000u {
        // 1 <= x < 2
        let t = x - 1.0;
        return log1p_f(t + sqrt(t * t + 2.0 * t));
    }
    if u < 0x45800000u {
        // 2 <= x < 2^12
        return log_f(2.0 * x - 1.0 / (x + sqrt(x * x - 1.0)));
    }
    return log_f(x) + LN2_F;
}

fn atanh_f(x: f32) -> f32 {
    let u = bitcast<u32>(x) & 0x7fffffffu;
    let a = bitcast<f32>(u);
    if is_nan(x) {
        return x;
    }
    var y = a;
    if u > 0x3f800000u {
        return bitcast<f32>(NAN_BITS);
    } else if u == 0x3f800000u {
        y = bitcast<f32>(INF_BITS);
    } else if u >= 0x3f000000u {
        // 1/2 <= |x| < 1
        y = 0.5 * log1p_f(2.0 * (a / (1.0 - a)));
    } else if u >= 0x2f800000u {
        // 2^-32 <= |x| < 1/2
        y = 0.5 * log1p_f(2.0 * a + 2.0 * a * a / (1.0 - a));
    }
    return select(y, -y, (bitcast<u32>(x) >> 31u) != 0u);
}

// tan. The argument is reduced by pi/2 exactly, for every finite f32
// (Payne and Hanek 1983, with 32-bit integer words as CUDA's slow path
// does it): the 24-bit significand times 256 bits of 2/pi, the quadrant
// and 64 bits of the fraction picked at the binary point, the fraction
// times pi/2 as a head and a tail; then fdlibm's __kernel_tan (k_tan.c,
// its coefficients rounded to f32), which takes the tail and gives
// -1/tan for odd quadrants accurately.

// The high and low words of the 64-bit product a * b.
fn mul_u32_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>(p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u), a * b);
}

// 32 bits of the 288-bit number `p` (nine words, least significant first)
// starting at bit `bit` (bits past the top are zero).
fn wide_bits(p: ptr<function, array<u32, 10>>, bit: u32) -> u32 {
    let w = bit >> 5u;
    let s = bit & 31u;
    let lo = (*p)[min(w, 9u)];
    let hi = (*p)[min(w + 1u, 9u)];
    if s == 0u {
        return lo;
    }
    return (lo >> s) | (hi << (32u - s));
}

// |x| >= pi/4, finite: |x| = (q + f) pi/2 with |f| <= 1/2. Returns the
// quadrant q mod 4 (x, as a float) and f pi/2 as a head (y) and tail (z).
fn rem_pio2_f(x: f32) -> vec3<f32> {
    let ix = bitcast<u32>(x) & 0x7fffffffu;
    let e = i32(ix >> 23u) - 127;
    let m = (ix & 0x7fffffu) | 0x800000u;
    // m times 2/pi 2^256 (the words of 2/pi, least significant first).
    var p: array<u32, 10>;
    var words = array<u32, 8>(
        0xdebbc561u, 0xfe5163abu, 0x3c439041u, 0xdb629599u,
        0xf534ddc0u, 0xfc2757d1u, 0x4e441529u, 0xa2f9836eu,
    );
    var carry = 0u;
    for (var i = 0u; i < 8u; i++) {
        let prod = mul_u32_wide(m, words[i]);
        p[i] = prod.y + carry;
        carry = prod.x + select(0u, 1u, p[i] < prod.y);
    }
    p[8] = carry;
    p[9] = 0u;
    // x 2/pi = (m T) 2^(e - 23 - 256): the binary point is at bit 279 - e.
    let b0 = u32(279 - e);
    let w0 = wide_bits(&p, b0 - 64u);
    var fh = wide_bits(&p, b0 - 32u);
    var fl = w0;
    var q = wide_bits(&p, b0) & 3u;
    let neg = (fh >> 31u) != 0u;
    if neg {
        // f >= 1/2: one more quadrant, and f - 1 (negated: 2^64 - f).
        q = (q + 1u) & 3u;
        fl = ~fl + 1u;
        fh = ~fh + select(0u, 1u, fl == 0u);
    }
    if fh == 0u && fl == 0u {
        return vec3<f32>(f32(q), 0.0, 0.0);
    }
    // Normalise: the top bit of (nh, nl) is the fraction's first 1.
    let lz = select(32u + countLeadingZeros(fl), countLeadingZeros(fh), fh != 0u);
    var nh = fh;
    var nl = fl;
    if lz >= 32u {
        nh = fl << (lz - 32u);
        nl = 0u;
    } else if lz > 0u {
        nh = (fh << lz) | (fl >> (32u - lz));
        nl = fl << lz;
    }
    // |f| = a + b: a = a_int 2^(-24 - lz) (24 bits), b the next 24 bits.
    let a_int = nh >> 8u;
    let b_int = ((nh & 0xffu) << 16u) | (nl >> 16u);
    let ilz = i32(lz);
    let ah = f32(a_int >> 12u) * exp2i_f(-12 - ilz);
    let al = f32(a_int & 0xfffu) * exp2i_f(-24 - ilz);
    let b = f32(b_int) * exp2i_f(-24 - ilz) * exp2i_f(-24);
    // pi/2 = c1 + c2: c1 has 12 bits, so ah c1 is exact.
    let c1 = bitcast<f32>(0x3fc91000u);
    let c2 = bitcast<f32>(0xb6957000u) + bitcast<f32>(0xb06f5000u);
    let hi = ah * c1;
    let lo = al * c1 + b * c1 + (ah + al) * c2;
    let r = hi + lo;
    let rlo = lo - (r - hi);
    return vec3<f32>(f32(q), select(r, -r, neg), select(rlo, -rlo, neg));
}

// tan(x + y) for |x + y| <= pi/4 + a little, or -1/tan(x + y) when `odd`
// (fdlibm's __kernel_tan in f32, as newlib's kf_tan.c).
fn kernel_tan_f(x_in: f32, y_in: f32, odd: bool) -> f32 {
    var x = x_in;
    var y = y_in;
    let hx = bitcast<u32>(x);
    let big = (hx & 0x7fffffffu) >= 0x3f2ca140u;
    let negative = (hx >> 31u) != 0u;
    if big {
        // tan(pi/4 - x) = (1 - tan x) / (1 + tan x): work with pi/4 - |x|.
        if negative {
            x = -x;
            y = -y;
        }
        x = (bitcast<f32>(0x3f490fdau) - x) + (bitcast<f32>(0x33222168u) - y);
        y = 0.0;
    }
    let z = x * x;
    let w = z * z;
    let r0 = bitcast<f32>(0x3e088889u) + w * (bitcast<f32>(0x3cb327a4u) + w * (bitcast<f32>(0x3b6b6916u)
        + w * (bitcast<f32>(0x3a1a26c8u) + w * (bitcast<f32>(0x38a3f445u) + w * bitcast<f32>(0xb79bae5fu)))));
    let v0 = z * (bitcast<f32>(0x3d5d0dd1u) + w * (bitcast<f32>(0x3c11371fu) + w * (bitcast<f32>(0x3abede48u)
        + w * (bitcast<f32>(0x398137b9u) + w * (bitcast<f32>(0x3895c07au) + w * bitcast<f32>(0x37d95384u))))));
    let s = z * x;
    var r = y + z * (s * (r0 + v0) + y);
    r += bitcast<f32>(0x3eaaaaabu) * s;
    let sum = x + r;
    if big {
        let v = select(1.0, -1.0, odd);
        let t = v - 2.0 * (x - (sum * sum / (sum + v) - r));
        return select(t, -t, negative);
    }
    if !odd {
        return sum;
    }
    // -1 / (x + r), with heads of 12 bits so the products are exact.
    let zh = bitcast<f32>(bitcast<u32>(sum) & 0xfffff000u);
    let vt = r - (zh - x);
    let a = -1.0 / sum;
    let th = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u);
    let st = 1.0 + th * zh;
    return th + a * (st + th * vt);
}

fn tan_f(x: f32) -> f32 {
    let ix = bitcast<u32>(x) & 0x7fffffffu;
    if ix >= INF_BITS {
        return bitcast<f32>(NAN_BITS);
    }
    if ix < 0x39800000u {
        return x;
    }
    if ix <= 0x3f490fdau {
        return kernel_tan_f(x, 0.0, false);
    }
    let red = rem_pio2_f(x);
    let t = kernel_tan_f(red.y, red.z, (u32(red.x) & 1u) == 1u);
    return select(t, -t, (bitcast<u32>(x) >> 31u) != 0u);
}

// erfinv (Giles, "Approximating the erfinv function", GPU Computing Gems
// Jade, 2011: the single-precision version): erfinv(x) = x p(w) with
// w = -log((1 - x)(1 + x)), p a polynomial in w - 2.5 for w < 5, in
// sqrt(w) - 3 beyond. `erfinv_poly` is p; the callers compute w: from x,
// with log1p(-x^2) for |x| < 1/2, where (1 - x)(1 + x) would lose the low
// bits of x^2; or (random::truncated_normal) from q = 1 - x, as
// -log(q (2 - q)), exact in the tail where 1 - x is not.
fn erfinv_poly(w_in: f32) -> f32 {
    var p = 0.0;
    if w_in < 5.0 {
        let w = w_in - 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        let w = sqrt(w_in) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    return p;
}

// sqrt(2) erfcinv(q) for 0 < q <= 2^-20 (x > 4.9): the x with
// Q(x) = q / 2, Q the normal upper tail, where Giles' polynomial no longer
// holds. Newton's method on log Q(x) = log R(x) - x^2 / 2 - log sqrt(2 pi),
// R = Q / phi Mills' ratio by Laplace's continued fraction (Abramowitz &
// Stegun 26.2.14, 40 terms, converged to f32 for x > 4); the derivative of
// log Q is -1 / R, so each step is x += g(x) R(x). Starts at
// sqrt(2 c), c = -log(q sqrt(pi / 2)), above the root.
fn erfcinv_tail_sqrt2(q: f32) -> f32 {
    let c = -log_f(q) - 0.22579135264472743;
    var x = sqrt(2.0 * c);
    for (var i = 0; i < 6; i++) {
        var r = x;
        for (var k = 40; k >= 1; k--) {
            r = x + f32(k) / r;
        }
        let mills = 1.0 / r;
        // log sqrt(2 pi) = log 2 + log sqrt(pi / 2): the constants cancel.
        let g = log_f(mills) - 0.5 * x * x + c;
        x += g * mills;
    }
    return x;
}

fn erfinv_f(x: f32) -> f32 {
    let ux = bitcast<u32>(x);
    let ax = bitcast<f32>(ux & 0x7fffffffu);
    if is_nan(x) || (ux & 0x7fffffffu) > 0x3f800000u {
        return bitcast<f32>(NAN_BITS);
    }
    if (ux & 0x7fffffffu) == 0x3f800000u {
        return select(bitcast<f32>(INF_BITS), bitcast<f32>(0xff800000u), (ux >> 31u) != 0u);
    }
    var w = 0.0;
    if ax < 0.5 {
        w = -log1p_f(-x * x);
    } else {
        w = -log_f((1.0 - ax) * (1.0 + ax));
    }
    return erfinv_poly(w) * x;
}

// log(e^a + e^b) (NumPy's npy_logaddexpf): equal arguments (infinities
// of one sign included) give a + ln 2, else max + log1p(e^-|a - b|).
fn logaddexp_f(a: f32, b: f32) -> f32 {
    if is_nan(a) || is_nan(b) {
        return bitcast<f32>(NAN_BITS);
    }
    if a == b {
        return a + LN2_F;
    }
    let d = a - b;
    if d > 0.0 {
        return a + log1p_f(exp_f(-d));
    }
    return b + log1p_f(exp_f(d));
}

// ---- Accurate f32 functions of issue 22 (docs/ACCURACY.md) ----
//
// Transcriptions of fdlibm's float routines (Sun 1993; the float versions
// by Ian Lance Taylor, as in newlib, FreeBSD's msun and musl), in place of
// WGSL's `sin`, `cos`, `tanh` and `pow`, which missed 2 ulp on lavapipe
// (sin and cos are wrong by far beyond |x| ~ 1e5, tanh returns 2^-25 for
// subnormal x) and have no bound in WGSL's specification beyond an
// absolute 2^-11. Bounds measured and tested in tests/accuracy.rs.

// sin(x + y) for |x + y| <= pi/4 + a little, y a tail below an ulp of x
// (fdlibm's __kernel_sinf, k_sinf.c).
fn kernel_sin_f(x: f32, y: f32) -> f32 {
    let z = x * x;
    let v = z * x;
    let r = bitcast<f32>(0x3c088889u) + z * (bitcast<f32>(0xb9500d01u) + z * (bitcast<f32>(0x3638ef1bu)
        + z * (bitcast<f32>(0xb2d72f34u) + z * bitcast<f32>(0x2f2ec9d3u))));
    return x - ((z * (0.5 * y - v * r) - y) - v * bitcast<f32>(0xbe2aaaabu));
}

// cos(x + y) likewise (fdlibm's __kernel_cosf, k_cosf.c): 1 - x^2/2 with
// x^2/2 split as (x^2/2 - qx) and qx near x^2/2, 1 - qx exact.
fn kernel_cos_f(x: f32, y: f32) -> f32 {
    let ix = bitcast<u32>(x) & 0x7fffffffu;
    if ix < 0x32000000u {
        return 1.0;
    }
    let z = x * x;
    let r = z * (bitcast<f32>(0x3d2aaaabu) + z * (bitcast<f32>(0xbab60b61u) + z * (bitcast<f32>(0x37d00d01u)
        + z * (bitcast<f32>(0xb493f27cu) + z * (bitcast<f32>(0x310f74f6u) + z * bitcast<f32>(0xad47d74eu))))));
    if ix < 0x3e99999au {
        return 1.0 - (0.5 * z - (z * r - x * y));
    }
    var qx = 0.28125;
    if ix <= 0x3f480000u {
        // x^2/16 = (|x|/4)^2 ... fdlibm: qx = |x|/4 by the exponent bits.
        qx = bitcast<f32>(ix - 0x01000000u);
    }
    let hz = 0.5 * z - qx;
    let a = 1.0 - qx;
    return a - (hz - (z * r - x * y));
}

// sin(|x|) (q = 0) or cos(|x|) (q = 1) of finite x, with |x| reduced by
// pi/2 exactly (rem_pio2_f, Payne and Hanek) beyond pi/4: the quadrant
// picks the kernel and the sign.
fn sin_cos_abs_f(x: f32, q: u32) -> f32 {
    let ix = bitcast<u32>(x) & 0x7fffffffu;
    var quadrant = q;
    var y = bitcast<f32>(ix);
    var tail = 0.0;
    if ix > 0x3f490fdau {
        let red = rem_pio2_f(x);
        quadrant += u32(red.x);
        y = red.y;
        tail = red.z;
    }
    var r = 0.0;
    if (quadrant & 1u) == 0u {
        r = kernel_sin_f(y, tail);
    } else {
        r = kernel_cos_f(y, tail);
    }
    return select(r, -r, (quadrant & 2u) != 0u);
}

fn sin_f(x: f32) -> f32 {
    let ix = bitcast<u32>(x) & 0x7fffffffu;
    if ix >= INF_BITS {
        return bitcast<f32>(NAN_BITS);
    }
    if ix < 0x39800000u {
        // |x| < 2^-12: sin x = x to within x^3/6 (and -0 stays -0).
        return x;
    }
    let r = sin_cos_abs_f(x, 0u);
    return select(r, -r, (bitcast<u32>(x) >> 31u) != 0u);
}

fn cos_f(x: f32) -> f32 {
    if (bitcast<u32>(x) & 0x7fffffffu) >= INF_BITS {
        return bitcast<f32>(NAN_BITS);
    }
    return sin_cos_abs_f(x, 1u);
}

// n / (c + e) for c = 1 or 2 and 0 <= e <= c, without the rounding of
// c + e: e is cut at c's ulp on the bits (e_hi), so s = c + e_hi is exact,
// and the quotient by s is corrected by the rest e - e_hi (exact too) to
// first order. No compiler can fold the correction away (the head comes
// from bits), where the arithmetic 2Sum `e - ((c + e) - c)` can be.
fn div_by_sum_f(n: f32, c: f32, e: f32) -> f32 {
    let ue = bitcast<u32>(e);
    let drop = i32((bitcast<u32>(c) >> 23u) & 0xffu) - i32((ue >> 23u) & 0xffu);
    let cut = bitcast<f32>(ue & (0xffffffffu << u32(clamp(drop, 0, 31))));
    let e_hi = select(0.0, cut, drop < 24);
    let s = c + e_hi;
    let q = n / s;
    return q - q * ((e - e_hi) / s);
}

// tanh: below log(3)/2, |x| + |x| z P(z) with z = x^2 and P a minimax of
// (tanh(x) - x) / x^3 on [0, 0.5495^2] (degree 4, fitted for relative
// error in double by Lawson's iteration on 600 Chebyshev points: 1.0e-9,
// about 0.02 ulp; the coefficients rounded to f32); beyond,
// 1 - 2 / (e^(2|x|) + 1) (as musl's tanhf: the sum is at least 4 there),
// |x| clamped at 10 where tanh rounds to 1, with an exp of its own: no
// special cases to handle (the argument is in [0, 20]) and the sum
// e^u + 1 rounded once (exp_f there: 1.43 ulp at most over every f32 in
// [0.5, 10], 2.0x the time of `abs` on f32[16M] on lavapipe; this one:
// 1.39 ulp, 1.5x to 1.6x, 2026-12-01). Both sides are evaluated (no
// branch), subnormals are their own tanh.
fn tanh_f(x_in: f32) -> f32 {
    let ux = bitcast<u32>(x_in);
    let w = ux & 0x7fffffffu;
    let a = bitcast<f32>(w);
    let z = a * a;
    let p = bitcast<f32>(0xbeaaaaa6u) + z * (bitcast<f32>(0x3e0886a1u) + z * (bitcast<f32>(0xbd5c966au)
        + z * (bitcast<f32>(0x3cacb035u) + z * bitcast<f32>(0xbbcdfb53u))));
    let small = a + a * (z * p);
    // e^u for u = 2 min(|x|, 10) in [0, 20]: u = k ln 2 + r, |r| <= ln 2 / 2,
    // k in [0, 29] (no overflow, no subnormal: 2^k goes into the exponent
    // bits), e^r = 1 + q with q Taylor's degree-7 polynomial (truncation
    // 5e-9 relative, 0.1 ulp).
    let u = 2.0 * min(a, 10.0);
    let k = i32(u * bitcast<f32>(0x3fb8aa3bu) + 0.5);
    let dk = f32(k);
    let r = (u - dk * bitcast<f32>(0x3f317200u)) - dk * bitcast<f32>(0x35bfbe8eu);
    let q = r * (1.0 + r * (0.5 + r * (bitcast<f32>(0x3e2aaaabu) + r * (bitcast<f32>(0x3d2aaaabu)
        + r * (bitcast<f32>(0x3c088889u) + r * (bitcast<f32>(0x3ab60b61u) + r * bitcast<f32>(0x39500d01u)))))));
    // e^u + 1 = (2^k + 1) + 2^k q, in one rounding (2^k + 1 is exact up
    // to k = 23, and beyond it tanh rounds to 1).
    let p2 = bitcast<f32>(u32(k + 127) << 23u);
    let big = 1.0 - 2.0 / ((p2 + 1.0) + p2 * q);
    var t = select(small, big, w > 0x3f0c9f54u);
    t = select(t, a, w < 0x00800000u);
    t = select(t, -t, (ux >> 31u) != 0u);
    return select(t, x_in, w > INF_BITS);
}

// 1 / (1 + e^-x), from e^-|x| (exp_f) so that nothing cancels: for x < 0
// it is e^x / (1 + e^x); the sums are not rounded (div_by_sum_f).
fn sigmoid_f(x: f32) -> f32 {
    let ux = bitcast<u32>(x);
    let e = exp_f(bitcast<f32>(ux | 0x80000000u));
    let r = div_by_sum_f(select(e, 1.0, (ux >> 31u) == 0u), 1.0, e);
    return select(r, x, (ux & 0x7fffffffu) > INF_BITS);
}

// erf and erfc (musl's erff, erfcf, after fdlibm's s_erff.c): x + x R(x^2)
// below 0.84375, erx + P/Q(|x| - 1) below 1.25, and beyond
// exp(-z^2 - 0.5625) exp((z - x)(z + x) + R/S(1/x^2)) / x for erfc, with z
// x's 12-bit head so that z^2 is exact. Branch-free: the four rationals
// (R, P/Q, and R/S on either side of 1/0.35) are one of degree 7 over
// degree 8, its coefficients picked by region (the shorter ones padded
// with zeros, which leaves Horner's results as they were).

const ERX_BITS: u32 = 0x3f58560bu;

// The coefficient of region r (0: |x| < 0.84375, 1: < 1.25, 2: < 1/0.35,
// 3: beyond) from fdlibm's four sets, as bits.
fn erf_coef(r: u32, c0: u32, c1: u32, c2: u32, c3: u32) -> f32 {
    return bitcast<f32>(select(select(c0, c1, r >= 1u), select(c2, c3, r >= 3u), r >= 2u));
}

// (erf(u), erfc(u)) for u = |x| >= 0, each to fdlibm's accuracy (erf
// relative near 0, erfc relative in the tail); NaN gives anything.
fn erf_erfc_f(u: f32) -> vec2<f32> {
    let iu = bitcast<u32>(u);
    let r = select(0u, 1u, iu >= 0x3f580000u) + select(0u, 1u, iu >= 0x3fa00000u)
        + select(0u, 1u, iu >= 0x4036db6du);
    // The rational's variable: u^2, u - 1, 1/u^2.
    let v = select(select(u * u, u - 1.0, r == 1u), 1.0 / (u * u), r >= 2u);
    var p = erf_coef(r, 0u, 0u, 0xc11d077eu, 0u);
    p = erf_coef(r, 0u, 0xbb0df9c0u, 0xc2a2932bu, 0xc3f1c275u) + v * p;
    p = erf_coef(r, 0u, 0x3d1151b3u, 0xc3389ae7u, 0xc480230bu) + v * p;
    p = erf_coef(r, 0u, 0xbde31cc2u, 0xc322658cu, 0xc41f6441u) + v * p;
    p = erf_coef(r, 0xb7c756b1u, 0x3ea2fe54u, 0xc2798057u, 0xc320a2eau) + v * p;
    p = erf_coef(r, 0xbbbd1489u, 0xbebe9208u, 0xc128f022u, 0xc18e104bu) + v * p;
    p = erf_coef(r, 0xbce9528fu, 0x3ed46805u, 0xbf31a0b7u, 0xbf4c9dd4u) + v * p;
    p = erf_coef(r, 0xbea66bebu, 0xbb1acdc6u, 0xbc21a093u, 0xbc21a092u) + v * p;
    // Region 0's R starts at v^0 with 0x3e0375d4 where the others are done:
    // it is one degree shorter, so its last step multiplies by v.
    p = select(p, bitcast<f32>(0x3e0375d4u) + v * p, r == 0u);
    var q = erf_coef(r, 0u, 0u, 0xbd777f97u, 0u);
    q = erf_coef(r, 0u, 0u, 0x40d23f7cu, 0xc1b38712u) + v * q;
    q = erf_coef(r, 0u, 0x3c445aa3u, 0x42d9451fu, 0x43ed43a7u) + v * q;
    q = erf_coef(r, 0xb684e21au, 0x3c5f6e13u, 0x43d6810bu, 0x451f90ceu) + v * q;
    q = erf_coef(r, 0x390aee49u, 0x3e013307u, 0x442158c9u, 0x4547fdbbu) + v * q;
    q = erf_coef(r, 0x3ba68116u, 0x3d931ae7u, 0x43d9486fu, 0x44c01759u) + v * q;
    q = erf_coef(r, 0x3d852a63u, 0x3f0a5785u, 0x4309a863u, 0x43a2e571u) + v * q;
    q = erf_coef(r, 0x3ecbbbceu, 0x3dd9f331u, 0x419d35ceu, 0x41f2b459u) + v * q;
    q = 1.0 + v * q;
    let y = p / q;
    // The tail: erfc(u) = exp(-z^2 - 0.5625) exp((z - u)(z + u) + y) / u
    // (u clamped to 28, past which erfc is 0, so the exps stay finite).
    let ut = clamp(u, 1.0, 28.0);
    let z = bitcast<f32>(bitcast<u32>(ut) & 0xffffe000u);
    let tail = exp_f(-z * z - 0.5625) * exp_f((z - ut) * (z + ut) + y) / ut;
    let erx = bitcast<f32>(ERX_BITS);
    // Below 2^-28 erf u = u (2/sqrt(pi)), scaled by 8 against underflow.
    let erf_tiny = 0.125 * (8.0 * u + bitcast<f32>(0x3f8375d4u) * u);
    var e = select(u + u * y, erf_tiny, iu < 0x31800000u);
    e = select(e, erx + y, r == 1u);
    e = select(e, 1.0 - tail, r >= 2u);
    e = select(e, 1.0, iu >= 0x40c00000u);
    var c = select(0.5 - (u - 0.5 + u * y), 1.0 - (u + u * y), iu < 0x3e800000u);
    c = select(c, (1.0 - erx) - y, r == 1u);
    c = select(c, tail, r >= 2u);
    c = select(c, 0.0, iu >= 0x41e00000u);
    return vec2<f32>(e, c);
}

fn erf_f(x: f32) -> f32 {
    let ux = bitcast<u32>(x);
    let y = erf_erfc_f(bitcast<f32>(ux & 0x7fffffffu)).x;
    let r = select(y, -y, (ux >> 31u) != 0u);
    return select(r, x, (ux & 0x7fffffffu) > INF_BITS);
}

// GELU x Phi(x) = x erfc(-x / sqrt(2)) / 2; NaN as is.
fn gelu_f(x: f32) -> f32 {
    let ux = bitcast<u32>(x);
    let negative = (ux >> 31u) != 0u;
    let t = x * 0.70710678118654752;
    let ee = erf_erfc_f(abs(t));
    // For x < 0, erfc(-t) is steep: correct for the rounding of t,
    // d = x c - t (c = 1/sqrt(2) as a 12-bit head and a tail, x as a
    // 12-bit head and a tail, so x_h c_h is exact and x_h c_h - t too, by
    // Sterbenz), erfc(-t - d) = erfc(-t) (1 - 2 t d) to first order.
    let c_hi = bitcast<f32>(0x3f350000u);
    let c_lo = 7.5531186547521e-5;
    let x_h = bitcast<f32>(ux & 0xfffff000u);
    let d = (x_h * c_hi - t) + (x - x_h) * c_hi + x * c_lo;
    let neg = 0.5 * x * (ee.y * (1.0 - 2.0 * t * d));
    var g = select(0.5 * x * (1.0 + ee.x), neg, negative);
    // Below -14, x Phi(x) < 2^-142: -0 (and no inf times 0); -inf gives
    // NaN, as -inf * 0 in PyTorch's formula.
    g = select(g, select(-0.0, bitcast<f32>(NAN_BITS), ux == 0xff800000u), negative && ux > 0xc1600000u);
    return select(g, x, (ux & 0x7fffffffu) > INF_BITS);
}

// |a|^n exactly, for |a| = m 2^e (m odd) when m^|n| fits in 24 bits (a
// power of two for n < 0): the odd part by integer multiplication, the
// exponent by bits; -1 when the result is not exact that way (or its
// exponent is past scalbn_f's range).
fn pow_exact_f(ia: u32, n: i32) -> f32 {
    let biased = i32(ia >> 23u);
    var m = (ia & 0x7fffffu) | 0x800000u;
    var e = biased - 150;
    if biased == 0 {
        m = ia;
        e = -149;
    }
    let tz = countTrailingZeros(m);
    m >>= tz;
    e += i32(tz);
    let an = u32(abs(n));
    if m != 1u && n < 0 {
        return -1.0;
    }
    var r = 1u;
    for (var i = 0u; i < an && m != 1u; i++) {
        if r > 0xffffffu / m {
            return -1.0;
        }
        r *= m;
    }
    let big_e = e * n;
    if big_e < -250 || big_e > 250 {
        return -1.0;
    }
    return scalbn_f(f32(r), big_e);
}

// |a|^b for finite, nonzero |a| != 1 and finite b (fdlibm's e_powf.c):
// log2|a| as t1 + t2 (a 12-bit head and a tail) from a rational in
// s = (x - 1)/(x + 1) around 1 or 1.5, times b as a head and a tail, then
// 2^(p_h + p_l) by a rational around 0. Every head is cut on the bits, so
// no compiler can fold the tails away.
fn pow_abs_f(ia_in: u32, y: f32) -> f32 {
    let huge = bitcast<f32>(INF_BITS);
    var ix = i32(ia_in);
    let iy = bitcast<u32>(y) & 0x7fffffffu;
    let ypos = (bitcast<u32>(y) >> 31u) == 0u;
    var t1 = 0.0;
    var t2 = 0.0;
    if iy > 0x4d000000u {
        // |y| > 2^27: overflow or underflow unless |a| is within 2^-20 of 1.
        if ix < 0x3f7ffff8 {
            return select(huge, 0.0, ypos);
        }
        if ix > 0x3f800007 {
            return select(0.0, huge, ypos);
        }
        let t = bitcast<f32>(ia_in) - 1.0;
        let w = (t * t) * (0.5 - t * (0.333333333333 - t * 0.25));
        let u = bitcast<f32>(0x3fb8aa00u) * t;
        let v = t * bitcast<f32>(0x36eca570u) - w * bitcast<f32>(0x3fb8aa3bu);
        t1 = bitcast<f32>(bitcast<u32>(u + v) & 0xfffff000u);
        t2 = v - (t1 - u);
    } else {
        var n = 0;
        var ax = bitcast<f32>(ia_in);
        if ix < 0x00800000 {
            // Subnormal: scale by 2^24 (exact in integers: normalise the bits).
            ax = f32(u32(ix)) * exp2i_f(-126) * exp2i_f(-23) * 16777216.0;
            n -= 24;
            ix = bitcast<i32>(ax);
        }
        n += (ix >> 23u) - 0x7f;
        let j = ix & 0x007fffff;
        ix = j | 0x3f800000;
        var k = 0;
        if j <= 0x1cc471 {
            k = 0;
        } else if j < 0x5db3d7 {
            k = 1;
        } else {
            n += 1;
            ix -= 0x00800000;
        }
        ax = bitcast<f32>(ix);
        let bp = select(1.0, 1.5, k == 1);
        let dp_h = select(0.0, bitcast<f32>(0x3f15c000u), k == 1);
        let dp_l = select(0.0, bitcast<f32>(0x35d1cfdcu), k == 1);
        // s = s_h + s_l = (x - bp) / (x + bp)
        var u = ax - bp;
        var v = 1.0 / (ax + bp);
        let s = u * v;
        let s_h = bitcast<f32>(bitcast<u32>(s) & 0xfffff000u);
        var t_h = bitcast<f32>((((u32(ix) >> 1u) & 0xfffff000u) | 0x20000000u) + 0x00400000u + (u32(k) << 21u));
        var t_l = ax - (t_h - bp);
        let s_l = v * ((u - s_h * t_h) - s_h * t_l);
        // log(ax)
        var s2 = s * s;
        var r = s2 * s2 * (bitcast<f32>(0x3f19999au) + s2 * (bitcast<f32>(0x3edb6db7u) + s2 * (bitcast<f32>(0x3eaaaaabu)
            + s2 * (bitcast<f32>(0x3e8ba305u) + s2 * (bitcast<f32>(0x3e6c3255u) + s2 * bitcast<f32>(0x3e53f142u))))));
        r += s_l * (s_h + s);
        s2 = s_h * s_h;
        t_h = bitcast<f32>(bitcast<u32>(3.0 + s2 + r) & 0xfffff000u);
        t_l = r - ((t_h - 3.0) - s2);
        u = s_h * t_h;
        v = s_l * t_h + t_l * s;
        let p_h = bitcast<f32>(bitcast<u32>(u + v) & 0xfffff000u);
        let p_l = v - (p_h - u);
        // 2/(3 ln 2) = cp_h + cp_l
        let z_h = bitcast<f32>(0x3f764000u) * p_h;
        let z_l = bitcast<f32>(0xb8f623c6u) * p_h + p_l * bitcast<f32>(0x3f76384fu) + dp_l;
        let t = f32(n);
        t1 = bitcast<f32>(bitcast<u32>(((z_h + z_l) + dp_h) + t) & 0xfffff000u);
        t2 = z_l - (((t1 - t) - dp_h) - z_h);
    }
    // (y1 + y2)(t1 + t2), y1 the 12-bit head of y.
    let y1 = bitcast<f32>(bitcast<u32>(y) & 0xfffff000u);
    let p_l = (y - y1) * t1 + y * t2;
    var p_h = y1 * t1;
    let z0 = p_l + p_h;
    let j = bitcast<i32>(z0);
    if j > 0x43000000 {
        return huge;
    } else if j == 0x43000000 {
        if p_l + bitcast<f32>(0x3338aa3cu) > z0 - p_h {
            return huge;
        }
    } else if (j & 0x7fffffff) > 0x43160000 {
        return 0.0;
    } else if u32(j) == 0xc3160000u && p_l <= z0 - p_h {
        return 0.0;
    }
    // 2^(p_h + p_l): n = [z + 1/2], the rest by a rational.
    let i = j & 0x7fffffff;
    var k = (i >> 23u) - 0x7f;
    var n = 0;
    if i > 0x3f000000 {
        n = j + (0x00800000 >> u32(k + 1));
        k = ((n & 0x7fffffff) >> 23u) - 0x7f;
        let t = bitcast<f32>(u32(n) & ~(0x007fffffu >> u32(k)));
        n = ((n & 0x007fffff) | 0x00800000) >> u32(23 - k);
        if j < 0 {
            n = -n;
        }
        p_h -= t;
    }
    let t = bitcast<f32>(bitcast<u32>(p_l + p_h) & 0xffff8000u);
    let u = t * bitcast<f32>(0x3f317200u);
    let v = (p_l - (t - p_h)) * bitcast<f32>(0x3f317218u) + t * bitcast<f32>(0x35bfbe8cu);
    var z = u + v;
    let w = v - (z - u);
    let tt = z * z;
    let tz = z - tt * (bitcast<f32>(0x3e2aaaabu) + tt * (bitcast<f32>(0xbb360b61u) + tt * (bitcast<f32>(0x388ab355u)
        + tt * (bitcast<f32>(0xb5ddea0eu) + tt * bitcast<f32>(0x3331bb4cu)))));
    let rr = (z * tz) / (tz - 2.0) - (w + z * w);
    z = 1.0 - (rr - z);
    let jz = bitcast<i32>(z) + (n << 23u);
    if (jz >> 23u) <= 0 {
        return scalbn_f(z, n);
    }
    return bitcast<f32>(jz);
}

// NumPy power for floats (C99's pow): x^0 = 1 and 1^y = 1 even for NaN;
// (-1)^(+-inf) = 1; zeros and infinities by the sign of y, odd integer
// y keeping a negative base's sign; a negative finite base with a
// non-integer exponent gives NaN. Exact whenever the exact result is
// representable and y is an integer with |y| <= 64 (pow_exact_f) or y is
// 1/2 (sqrt, correctly rounded); fdlibm's powf otherwise.
fn pow_f(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let ia = ua & 0x7fffffffu;
    let ib = ub & 0x7fffffffu;
    if ib == 0u || ua == 0x3f800000u {
        return 1.0;
    }
    if ia > INF_BITS || ib > INF_BITS {
        return bitcast<f32>(NAN_BITS);
    }
    // 0: b not an integer, 1: odd, 2: even.
    var yisint = 0u;
    if ib >= 0x4b800000u {
        yisint = 2u;
    } else if ib >= 0x3f800000u {
        let k = (ib >> 23u) - 0x7fu;
        let j = ib >> (23u - k);
        if (j << (23u - k)) == ib {
            yisint = 2u - (j & 1u);
        }
    }
    let negative = (ua >> 31u) != 0u;
    let bneg = (ub >> 31u) != 0u;
    let inf = bitcast<f32>(INF_BITS);
    if ib == INF_BITS {
        if ia == 0x3f800000u {
            return 1.0;
        }
        return select(0.0, inf, (ia > 0x3f800000u) != bneg);
    }
    let odd = negative && yisint == 1u;
    if ia == INF_BITS || ia == 0u {
        // inf^positive and 0^negative are inf, the others 0.
        let r = select(0.0, inf, (ia == 0u) == bneg);
        return select(r, -r, odd);
    }
    if negative && yisint == 0u {
        return bitcast<f32>(NAN_BITS);
    }
    if ub == 0x3f000000u {
        return sqrt(a);
    }
    var r = -1.0;
    if yisint != 0u && ib <= 0x42800000u {
        r = pow_exact_f(ia, i32(b));
    }
    if r < 0.0 {
        r = pow_abs_f(ia, b);
    }
    return select(r, -r, odd);
}

// Scalar math the WGSL builtins lack, for the elementwise kernel. All f32.

const NAN_BITS: u32 = 0x7fc00000u;
const INF_BITS: u32 = 0x7f800000u;

// erf by Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7).
fn erf_f(x: f32) -> f32 {
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
    return sign(x) * y;
}

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

fn expm1_f(x_in: f32) -> f32 {
    var x = x_in;
    let hx = bitcast<u32>(x) & 0x7fffffffu;
    let negative = (bitcast<u32>(x) >> 31u) != 0u;
    if hx >= 0x4195b844u {
        // |x| >= 27 ln 2: -1 below, inf past ln(f32::MAX), NaN as is.
        if is_nan(x) {
            return x;
        }
        if negative {
            return -1.0;
        }
        if hx > 0x42b17217u {
            return bitcast<f32>(INF_BITS);
        }
    }
    let ln2_hi = bitcast<f32>(0x3f317180u);
    let ln2_lo = bitcast<f32>(0x3717f7d1u);
    var k = 0;
    var c = 0.0;
    if hx > 0x3eb17218u {
        // |x| > ln 2 / 2: x = k ln 2 + r, |r| <= ln 2 / 2.
        var hi = 0.0;
        var lo = 0.0;
        if hx < 0x3f851592u {
            if negative {
                hi = x + ln2_hi;
                lo = -ln2_lo;
                k = -1;
            } else {
                hi = x - ln2_hi;
                lo = ln2_lo;
                k = 1;
            }
        } else {
            k = i32(bitcast<f32>(0x3fb8aa3bu) * x + select(0.5, -0.5, negative));
            let t = f32(k);
            hi = x - t * ln2_hi;
            lo = t * ln2_lo;
        }
        x = hi - lo;
        c = (hi - x) - lo;
    } else if hx < 0x33000000u {
        // |x| < 2^-25 is its own expm1 (subnormals too).
        return x;
    }
    // exp(x) - 1 on the reduced x by a rational minimax (fdlibm's R).
    let hfx = 0.5 * x;
    let hxs = x * hfx;
    let r1 = 1.0 + hxs * (bitcast<f32>(0xbd088868u) + hxs * bitcast<f32>(0x3acf3010u));
    let t = 3.0 - r1 * hfx;
    var e = hxs * ((r1 - t) / (6.0 - x * t));
    if k == 0 {
        return x - (x * e - hxs);
    }
    e = x * (e - c) - c;
    e -= hxs;
    // exp(x_in) - 1 = 2^k (x - e + 1) - 1.
    if k == -1 {
        return 0.5 * (x - e) - 0.5;
    }
    if k == 1 {
        if x < -0.25 {
            return -2.0 * (e - (x + 0.5));
        }
        return 1.0 + 2.0 * (x - e);
    }
    if k < 0 || k > 56 {
        // 2^(k - 1), then 2: 2^128 (k = 128) is past f32. Neither factor
        // is a constant, so no compiler folds them into an infinity.
        let y = (x - e + 1.0) * bitcast<f32>(u32(0x7e + k) << 23u) * 2.0;
        return y - 1.0;
    }
    let twopk = bitcast<f32>(u32(0x7f + k) << 23u);
    let twomk = bitcast<f32>(u32(0x7f - k) << 23u);
    if k < 23 {
        return (x - e + (1.0 - twomk)) * twopk;
    }
    return (x - (e + twomk) + 1.0) * twopk;
}

// tanh that saturates instead of overflowing exp for large |x|.
fn tanh_f(x: f32) -> f32 {
    if is_nan(x) {
        return x;
    }
    if abs(x) > 10.0 {
        return sign(x);
    }
    return tanh(x);
}

fn sigmoid_f(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
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

// NumPy power for floats: negative bases with integral exponents.
fn pow_f(a: f32, b: f32) -> f32 {
    // C99 pow special cases, as NumPy: x^0 = 1 and 1^y = 1 even for NaN,
    // (-1)^(+-inf) = 1, 0^negative odd integer keeps the zero's sign.
    if b == 0.0 || a == 1.0 {
        return 1.0;
    }
    if a == -1.0 && abs(b) == bitcast<f32>(INF_BITS) {
        return 1.0;
    }
    if is_nan(a) || is_nan(b) {
        return bitcast<f32>(NAN_BITS);
    }
    let odd = floor(b) == b && abs(b - 2.0 * trunc(b / 2.0)) == 1.0;
    if a == 0.0 {
        var r = 0.0;
        if b < 0.0 {
            r = bitcast<f32>(INF_BITS);
        }
        if odd && (bitcast<u32>(a) & 0x80000000u) != 0u {
            return -r;
        }
        return r;
    }
    let r = exp2(b * log2(abs(a)));
    if a < 0.0 {
        if floor(b) != b {
            return bitcast<f32>(NAN_BITS);
        }
        if abs(b - 2.0 * trunc(b / 2.0)) == 1.0 {
            return -r;
        }
    }
    return r;
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

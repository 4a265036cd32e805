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

// log(1 + x) without cancellation (Goldberg, "What every computer scientist
// should know about floating-point arithmetic", theorem 4).
fn log1p_f(x: f32) -> f32 {
    if x == bitcast<f32>(INF_BITS) {
        return x;
    }
    let u = 1.0 + x;
    if u == 1.0 {
        return x;
    }
    return log(u) * x / (u - 1.0);
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

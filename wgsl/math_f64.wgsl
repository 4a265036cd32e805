// float64 helpers, prepended only to kernels that use f64: the `f64` and
// `u64` types need SHADER_F64 and SHADER_INT64 (Vulkan; naga writes them
// for SPIR-V only). Buffers stay `array<u32>`: an f64 element is words 2i
// (low) and 2i + 1 (high), joined into a u64 and bit-cast.
//
// Conversions to and from f32 are written on the bits, like the 16-bit ones
// in convert.wgsl: exact, round to nearest even, the same on every driver
// (whatever it does with subnormals in float conversions), and NaN tests
// are on the bits (drivers may assume no NaN in float comparisons).

fn word_pair(lo: u32, hi: u32) -> u64 {
    return u64(lo) | (u64(hi) << 32u);
}

fn is_nan64(x: f64) -> bool {
    let b = bitcast<u64>(x);
    let hi = u32(b >> 32u) & 0x7fffffffu;
    return hi > 0x7ff00000u || (hi == 0x7ff00000u && u32(b) != 0u);
}

fn nan64() -> f64 {
    return bitcast<f64>(u64(0x7ff80000u) << 32u);
}

// f64 to f32, round to nearest even; NaN stays NaN (quiet, the top of its
// payload kept), as Rust's `as f32`.
fn f64_to_f32(x: f64) -> f32 {
    let b = bitcast<u64>(x);
    let sign = u32(b >> 32u) & 0x80000000u;
    let e = i32(u32(b >> 52u) & 0x7ffu);
    let mant = b & ((u64(1u) << 52u) - u64(1u));
    if e == 0x7ff {
        if mant != u64(0u) {
            return bitcast<f32>(sign | 0x7fc00000u | u32(mant >> 29u));
        }
        return bitcast<f32>(sign | 0x7f800000u);
    }
    if e == 0 {
        // f64 subnormals lie far below half of f32's smallest subnormal.
        return bitcast<f32>(sign);
    }
    let ex = e - 1023 + 127;
    if ex >= 0xff {
        return bitcast<f32>(sign | 0x7f800000u);
    }
    let sig = mant | (u64(1u) << 52u);
    // A normal result keeps 24 of the 53 significant bits; a subnormal one
    // 1 - ex fewer.
    var shift = 29u;
    var top = 0u;
    if ex > 0 {
        top = u32(ex) << 23u;
    } else {
        shift = u32(30 - ex);
    }
    if shift >= 64u {
        return bitcast<f32>(sign);
    }
    let q = sig >> shift;
    let rest = sig & ((u64(1u) << shift) - u64(1u));
    let half = u64(1u) << (shift - 1u);
    var m = u32(q);
    if ex > 0 {
        m &= 0x7fffffu;
    }
    // A carry out of the mantissa moves into the exponent (up to infinity).
    var bits = sign | top | m;
    if rest > half || (rest == half && (m & 1u) == 1u) {
        bits += 1u;
    }
    return bitcast<f32>(bits);
}

// f32 to f64, exact (subnormals normalised, NaN payloads kept).
fn f32_to_f64(x: f32) -> f64 {
    let b = bitcast<u32>(x);
    let sign = u64(b & 0x80000000u) << 32u;
    let e = (b >> 23u) & 0xffu;
    let m = b & 0x7fffffu;
    if e == 0xffu {
        return bitcast<f64>(sign | (u64(0x7ff00000u) << 32u) | (u64(m) << 29u));
    }
    if e == 0u {
        if m == 0u {
            return bitcast<f64>(sign);
        }
        // m * 2^-149 with its top bit at p: exponent p - 149.
        let p = 31u - countLeadingZeros(m);
        let frac = (m << (23u - p)) & 0x7fffffu;
        return bitcast<f64>(sign | (u64(p + 874u) << 52u) | (u64(frac) << 29u));
    }
    return bitcast<f64>(sign | (u64(e + 896u) << 52u) | (u64(m) << 29u));
}

// Float to integer, saturating at the integer type's limits, NaN to 0, as
// the f32 versions in convert.wgsl.
fn f64_to_i32_sat(x: f64) -> i32 {
    if is_nan64(x) {
        return 0;
    }
    if x >= 2147483647.0 {
        return 2147483647;
    }
    if x <= -2147483648.0 {
        return -2147483647 - 1;
    }
    return i32(x);
}

fn f64_to_u32_sat(x: f64) -> u32 {
    if is_nan64(x) || x < 1.0 {
        return 0u;
    }
    if x >= 4294967295.0 {
        return 4294967295u;
    }
    return u32(x);
}

// NumPy maximum/minimum: NaN propagates.
fn maximum_d(a: f64, b: f64) -> f64 {
    if is_nan64(a) || is_nan64(b) {
        return nan64();
    }
    return max(a, b);
}

fn minimum_d(a: f64, b: f64) -> f64 {
    if is_nan64(a) || is_nan64(b) {
        return nan64();
    }
    return min(a, b);
}

// NumPy remainder and floor_divide, as rem_f and fdiv_f in math.wgsl.
fn rem_d(a: f64, b: f64) -> f64 {
    var m = a - b * trunc(a / b);
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        m += b;
    }
    return m;
}

fn fdiv_d(a: f64, b: f64) -> f64 {
    return floor(a / b);
}

// Bit-exact conversions between f32 and the 16-bit float formats, written
// with integer operations so they need no SHADER_F16 and round the same on
// every backend: round to nearest even, as the `half` crate's
// f32_to_f16_fallback / bf16::from_f32 (half 2.x, src/binary16/arch.rs).

// Element i of a packed buffer, from the word w that holds it: the 16-bit
// half (2-byte dtypes, two to a word) or the byte (1-byte dtypes, four to a
// word), little-endian as on the host.
fn half_word(w: u32, i: u32) -> u32 {
    return (w >> ((i & 1u) * 16u)) & 0xffffu;
}

fn byte_of(w: u32, i: u32) -> u32 {
    return (w >> ((i & 3u) * 8u)) & 0xffu;
}

// NaN test on the bits. A float comparison (x != x) is not enough: WGSL
// lets implementations assume no NaN in float arithmetic, and NVIDIA's
// Vulkan driver folds such tests away (relu(NaN) gave 0 on an H200).
fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// Float to integer, saturating at the integer type's own limits (NumPy
// leaves these undefined; PyTorch and WGSL saturate): i32::MAX for
// x >= 2^31, which f32 cannot hold (clamping in f32 gave 2147483520),
// u32::MAX for x >= 2^32, 0 for NaN and for negative x into u32. The limits
// are tested on the bits, so infinities need no float comparison.
fn f32_to_i32_sat(x: f32) -> i32 {
    let b = bitcast<u32>(x);
    if is_nan(x) {
        return 0;
    }
    if (b & 0x7fffffffu) >= 0x4f000000u {
        return select(2147483647, -2147483647 - 1, (b >> 31u) != 0u);
    }
    return i32(x);
}

fn f32_to_u32_sat(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if is_nan(x) || (b >> 31u) != 0u {
        return 0u;
    }
    if b >= 0x4f800000u {
        return 4294967295u;
    }
    return u32(x);
}

fn f16_bits_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let exp = h & 0x7c00u;
    let man = h & 0x03ffu;
    if (h & 0x7fffu) == 0u {
        return bitcast<f32>(sign);
    }
    if exp == 0x7c00u {
        if man == 0u {
            return bitcast<f32>(sign | 0x7f800000u);
        }
        return bitcast<f32>(sign | 0x7fc00000u | (man << 13u));
    }
    if exp == 0u {
        // Subnormal: normalise.
        let e = countLeadingZeros(man) - 22u;
        let m = (man << (14u + e)) & 0x7fffffu;
        return bitcast<f32>(sign | ((112u - e) << 23u) | m);
    }
    return bitcast<f32>(sign | (((exp >> 10u) + 112u) << 23u) | (man << 13u));
}

fn f32_to_f16_bits(x: u32) -> u32 {
    let sign = x & 0x80000000u;
    let exp = x & 0x7f800000u;
    let man = x & 0x007fffffu;
    if exp == 0x7f800000u {
        var nan_bit = 0u;
        if man != 0u {
            nan_bit = 0x0200u;
        }
        return (sign >> 16u) | 0x7c00u | nan_bit | (man >> 13u);
    }
    let half_sign = sign >> 16u;
    let half_exp = i32(exp >> 23u) - 127 + 15;
    if half_exp >= 0x1f {
        return half_sign | 0x7c00u;
    }
    if half_exp <= 0 {
        if 14 - half_exp > 24 {
            return half_sign;
        }
        let m = man | 0x00800000u;
        var half_man = m >> u32(14 - half_exp);
        let round_bit = 1u << u32(13 - half_exp);
        if (m & round_bit) != 0u && (m & (3u * round_bit - 1u)) != 0u {
            half_man += 1u;
        }
        return half_sign | half_man;
    }
    let bits = half_sign | (u32(half_exp) << 10u) | (man >> 13u);
    let round_bit = 0x00001000u;
    if (man & round_bit) != 0u && (man & (3u * round_bit - 1u)) != 0u {
        return bits + 1u;
    }
    return bits;
}

fn f32_to_bf16_bits(x: u32) -> u32 {
    if (x & 0x7fffffffu) > 0x7f800000u {
        return (x >> 16u) | 0x0040u;
    }
    let round_bit = 0x00008000u;
    if (x & round_bit) != 0u && (x & (3u * round_bit - 1u)) != 0u {
        return (x >> 16u) + 1u;
    }
    return x >> 16u;
}

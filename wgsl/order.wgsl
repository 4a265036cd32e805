// Shared by the topk and sort kernels.

// The order key of float bits b with sign bit `sign` and infinity `inf`:
// unsigned order of keys is the order of values, -0 and +0 alike, every
// NaN above +inf (NumPy sorts NaN last).
fn float_key(b: u32, sign: u32, inf: u32) -> u32 {
    let mag = b & (sign - 1u);
    if mag > inf {
        return 0xffffffffu;
    }
    if mag == 0u {
        return sign;
    }
    if (b & sign) != 0u {
        return sign - 1u - mag;
    }
    return sign | mag;
}

// Counter-based random numbers: Philox 4x32-10 (Salmon, Moraes, Dror &
// Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11), with the
// round and key-schedule constants of Random123 (and JAX).
//
// Thread b computes one Philox block: counter (b, p.head.w, 0, 0) under the
// key read from `key` (two u32 words at p.head.y and p.head.y + p.head.z),
// giving four u32 words, which become output elements 4b .. 4b + 3. The
// second counter word is a stream tag: 0 for sampling, 1 for `split`, so
// split keys never repeat sampled bits.
//
// Generated per specialisation (placeholders in double braces):
//   DIST       0: raw u32 bits; 1: uniform; 2: normal (Box-Muller);
//              3: integers in a range; 4: Laplace; 5: Gumbel;
//              6: truncated normal
//   OUT_BYTES  4, or 2 (f16/bf16: the thread writes two words of two elements)
//   ENCODE     the output bits of f32 `v` (low 16 bits for 2-byte dtypes)

const WG: u32 = 256u;
const DIST: u32 = {{DIST}}u;
const OUT_BYTES: u32 = {{OUT_BYTES}}u;

struct Params {
    // n (elements), key offset, key stride, stream tag
    head: vec4<u32>,
    // uniform: low, high - low, largest output value below high, -
    // normal: mean, std, -, -
    // integers: low (bits), range (0 for 2^32), -, -
    // Laplace: loc, scale, -, -
    // truncated normal: u0, du, smallest and largest output value
    // (f32 bits unless said)
    a: vec4<u32>,
    // truncated normal: 0 central (u = erf), 1 upper tail (u = erfc),
    // 2 lower tail (the upper tail negated)
    b: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> key: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

fn philox4x32_10(counter: vec4<u32>, k: vec2<u32>) -> vec4<u32> {
    var c = counter;
    var kk = k;
    for (var r = 0u; r < 10u; r++) {
        let m0 = mul_u32_wide(0xD2511F53u, c.x);
        let m1 = mul_u32_wide(0xCD9E8D57u, c.z);
        c = vec4<u32>(m1.x ^ c.y ^ kk.x, m1.y, m0.x ^ c.w ^ kk.y, m0.y);
        kk += vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}

// A float in [0, 1) from the top 24 bits (exact in f32).
fn unit(x: u32) -> f32 {
    return f32(x >> 8u) * 5.9604644775390625e-8;
}

// A float in (0, 1), symmetric about 1/2 and never 0 or 1: (2k + 1) 2^-24
// from the top 23 bits (exact in f32).
fn open_unit(x: u32) -> f32 {
    return (f32(x >> 9u) + 0.5) * 1.1920928955078125e-7;
}

// floor((x 2^32 + y) range / 2^64): 64 random bits scaled to [0, range)
// (Lemire's multiply-shift, widened to 64 bits: the bias is below
// range / 2^64); range 0 stands for 2^32, where x itself is the value.
fn scaled_int(x: u32, y: u32, range: u32) -> u32 {
    if range == 0u {
        return x;
    }
    let xr = mul_u32_wide(x, range);
    let yr = mul_u32_wide(y, range);
    let mid = xr.y + yr.x;
    return xr.x + select(0u, 1u, mid < xr.y);
}

// -log(u) for u in (0, 1), accurate near 1 (log1p of the exact u - 1).
fn neg_log_unit(u: f32) -> f32 {
    if u < 0.5 {
        return -log_f(u);
    }
    return -log1p_f(u - 1.0);
}

fn encode(v: f32) -> u32 {
{{ENCODE}}
}

// The four output values of block b, as output bits.
fn block(b: u32) -> vec4<u32> {
    let k = vec2<u32>(key[p.head.y], key[p.head.y + p.head.z]);
    let x = philox4x32_10(vec4<u32>(b, p.head.w, 0u, 0u), k);
    if DIST == 0u {
        return x;
    }
    let a = bitcast<vec4<f32>>(p.a);
    if DIST == 1u {
        let v = a.x + a.y * vec4<f32>(unit(x.x), unit(x.y), unit(x.z), unit(x.w));
        let c = clamp(v, vec4<f32>(a.x), vec4<f32>(a.z));
        return vec4<u32>(encode(c.x), encode(c.y), encode(c.z), encode(c.w));
    }
    if DIST == 2u {
        // Box-Muller: u1 in (0, 1] keeps the log finite.
        let u1 = vec2<f32>(unit(x.x), unit(x.z)) + 5.9604644775390625e-8;
        let u2 = vec2<f32>(unit(x.y), unit(x.w));
        let r = sqrt(-2.0 * log(u1));
        let t = 6.2831853071795865 * u2;
        let z = vec4<f32>(r.x * cos(t.x), r.x * sin(t.x), r.y * cos(t.y), r.y * sin(t.y));
        let v = a.x + a.y * z;
        return vec4<u32>(encode(v.x), encode(v.y), encode(v.z), encode(v.w));
    }
    if DIST == 3u {
        // Integers: a second block (third counter word 1) gives the low
        // 32 of each element's 64 bits.
        let y = philox4x32_10(vec4<u32>(b, p.head.w, 1u, 0u), k);
        let low = p.a.x;
        let range = p.a.y;
        return vec4<u32>(
            low + scaled_int(x.x, y.x, range),
            low + scaled_int(x.y, y.y, range),
            low + scaled_int(x.z, y.z, range),
            low + scaled_int(x.w, y.w, range),
        );
    }
    var v = vec4<f32>(0.0);
    for (var j = 0; j < 4; j++) {
        let u = open_unit(x[j]);
        if DIST == 4u {
            // Laplace by inversion: w = 2u - 1 in (-1, 1), exact, never 0;
            // x = loc - scale sign(w) log(1 - |w|).
            let w = 2.0 * u - 1.0;
            let e = log1p_f(-abs(w));
            v[j] = a.x - a.y * select(e, -e, w < 0.0);
        } else if DIST == 5u {
            // Gumbel: -log(-log(u)).
            v[j] = -log_f(neg_log_unit(u));
        } else {
            // Truncated normal by inversion of the normal CDF over
            // [u0, u0 + du]: central in erf, tails in erfc (q = 1 - erf).
            let t = a.x + a.y * u;
            var z = 0.0;
            if p.b.x == 0u {
                z = 1.4142135623730951 * erfinv_f(t);
            } else {
                if t <= 9.5367431640625e-7 {
                    z = erfcinv_tail_sqrt2(t);
                } else {
                    z = 1.4142135623730951 * erfinv_poly(-log_f(t * (2.0 - t))) * (1.0 - t);
                }
                if p.b.x == 2u {
                    z = -z;
                }
            }
            v[j] = clamp(z, a.z, a.w);
        }
    }
    return vec4<u32>(encode(v.x), encode(v.y), encode(v.z), encode(v.w));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let b = gid.x + gid.y * nwg.x * WG;
    let n = p.head.x;
    let e = 4u * b;
    if e >= n {
        return;
    }
    let v = block(b);
    if OUT_BYTES == 4u {
        out[e] = v.x;
        if e + 1u < n { out[e + 1u] = v.y; }
        if e + 2u < n { out[e + 2u] = v.z; }
        if e + 3u < n { out[e + 3u] = v.w; }
    } else {
        // Elements 4b .. 4b + 3 are words 2b and 2b + 1: no word is shared.
        out[2u * b] = (v.x & 0xffffu) | (v.y << 16u);
        if e + 2u < n {
            out[2u * b + 1u] = (v.z & 0xffffu) | (v.w << 16u);
        }
    }
}

// MLX's affine quantization (mlx/ops.cpp `affine_quantize`, whose CPU
// kernel mlx/backend/cpu/quantized.cpp `quantize` this follows step for
// step in f32): per group of `gs` consecutive elements of a row,
//   scale = max((max - min) / (2^bits - 1), 1e-7), negated unless
//           |min| > |max|; edge = min if |min| > |max| else max;
//   q0 = round(edge / scale); if q0 != 0: scale = edge / q0, bias = edge
//           (the edge is then exactly a quantized value), else bias = 0;
//   q = clamp(round((w - bias) / scale), 0, 2^bits - 1),
// rounding half to even. The quants of a row form one little-endian bit
// stream of `bits`-bit values packed into u32 words (value e at bit e * bits;
// for 3, 5 and 6 bits a value may straddle two words), as MLX packs them.
//
// One thread per two groups, so that a 2-byte scale or bias word belongs to
// one thread. Parameters (words): groups, groups per row, the input's
// element offset and row stride; the group size and the bits.
//
// Generated per specialisation (placeholders in double braces):
//   LOAD    statements of fn load(i): input element i as f32
//   SCALES  statements of fn store_sb(t, s0, b0, s1, b1): the scales and
//           biases of groups 2t and 2t + 1 in the input's dtype

const WG: u32 = 256u;

struct Params {
    head: vec4<u32>,
    // group size, bits
    q: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> wq: array<u32>;
@group(0) @binding(3) var<storage, read_write> scales: array<u32>;
@group(0) @binding(4) var<storage, read_write> biases: array<u32>;

fn load(i: u32) -> f32 {
{{LOAD}}
}

fn store_sb(t: u32, s0: f32, b0: f32, s1: f32, b1: f32) {
{{SCALES}}
}

// Quantize group g (its first element at input element `first`); returns
// its scale and bias.
fn group(g: u32, first: u32) -> vec2<f32> {
    let gs = p.q.x;
    let bits = p.q.y;
    let n_bins = f32((1u << bits) - 1u);
    var lo = bitcast<f32>(0x7f800000u);
    var hi = -lo;
    for (var e = 0u; e < gs; e++) {
        let v = load(first + e);
        lo = min(lo, v);
        hi = max(hi, v);
    }
    let side = abs(lo) > abs(hi);
    var scale = max((hi - lo) / n_bins, 1e-7f);
    scale = select(-scale, scale, side);
    let edge = select(hi, lo, side);
    let q0 = round(edge / scale);
    var bias = 0.0f;
    if q0 != 0.0f {
        scale = edge / q0;
        bias = edge;
    }
    var acc = 0u;
    var used = 0u;
    // The words one group's quants take.
    var at = g * (gs * bits / 32u);
    for (var e = 0u; e < gs; e++) {
        let q = u32(clamp(round((load(first + e) - bias) / scale), 0.0f, n_bins));
        acc = acc | (q << used);
        let end = used + bits;
        if end >= 32u {
            wq[at] = acc;
            at += 1u;
            used = end - 32u;
            // The bits of q that did not fit.
            acc = select(0u, q >> (bits - used), used > 0u);
        } else {
            used = end;
        }
    }
    return vec2<f32>(scale, bias);
}

@compute @workgroup_size(256)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let t = gid.x + gid.y * nwg.x * WG;
    let groups = p.head.x;
    let g0 = 2u * t;
    if g0 >= groups {
        return;
    }
    let per_row = p.head.y;
    let a = group(g0, p.head.z + (g0 / per_row) * p.head.w + (g0 % per_row) * p.q.x);
    var b = vec2<f32>(0.0f, 0.0f);
    let g1 = g0 + 1u;
    if g1 < groups {
        b = group(g1, p.head.z + (g1 / per_row) * p.head.w + (g1 % per_row) * p.q.x);
    }
    store_sb(t, a.x, a.y, b.x, b.y);
}

// Rotary position embedding (Su et al. 2021; MLX fast.rope): x [..., L, D]
// rotated by position (offset + l) for row l of the L axis, the first
// `dims` features of each row in pairs, the rest copied:
//
//   pair i (i < dims / 2): traditional (x[2i], x[2i + 1]), else
//   (x[i], x[i + dims / 2]); theta = scale * position * base^(-2i / dims);
//   (a, b) -> (a cos theta - b sin theta, a sin theta + b cos theta).
//
// One thread per output word (one f32 element, or two 2-byte elements,
// so no two threads share a word); x read through its strides
// (straight-line unravel), the partner element at the pair's other
// column. Angles in f32, as MLX and llama.cpp compute them.
//
// Generated per specialisation (placeholders in double braces):
//   TRADITIONAL  true or false
//   EPW          elements per output word (1 or 2)
//   LOAD         statements of fn load_x(i) -> f32: element i of x
//   ENCODE       statements of fn encode(v) -> u32: v's bits in the
//                output dtype (the low 16 for 2-byte dtypes)
//   POSITION     expression: the position of row 0 (f32), from the
//                static offset p.misc.y and the offset array

const WG: u32 = 256u;
const EPW: u32 = {{EPW}}u;

struct Params {
    // output words, ndim, D (last axis), dims
    head: vec4<u32>,
    // L (axis -2), static offset (i32 bits), x's offset, offset array's offset
    misc: vec4<u32>,
    // scale (f32 bits), log2(base) (f32 bits), elements, x's last stride
    fl: vec4<u32>,
    shape: array<vec4<u32>, 2>,
    strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> offset: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

fn load_x(i: u32) -> f32 {
{{LOAD}}
}

fn encode(v: f32) -> u32 {
{{ENCODE}}
}

fn value(e: u32) -> f32 {
    let dd = p.head.z;
    let dims = p.head.w;
    let c = e % dd;
    let at = p.misc.z + unravel(e, p.head.y, p.shape, p.strides);
    let a = load_x(at);
    if c >= dims {
        return a;
    }
    let half = dims / 2u;
    var i = c / 2u;
    var partner = c ^ 1u;
    var first = (c & 1u) == 0u;
    if !{{TRADITIONAL}} {
        first = c < half;
        i = select(c - half, c, first);
        partner = select(c - half, c + half, first);
    }
    let b = load_x(at + (partner - c) * p.fl.w);
    let l = (e / dd) % p.misc.x;
    let pos = bitcast<f32>(p.fl.x) * ({{POSITION}} + f32(l));
    let theta = pos * exp2(-f32(2u * i) / f32(dims) * bitcast<f32>(p.fl.y));
    let co = cos(theta);
    let si = sin(theta);
    if first {
        return a * co - b * si;
    }
    return b * si + a * co;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * WG;
    if t >= p.head.x {
        return;
    }
    var word = 0u;
    for (var k = 0u; k < EPW; k++) {
        let e = EPW * t + k;
        if e < p.fl.z {
            word |= encode(value(e)) << (16u * k);
        }
    }
    out[t] = word;
}

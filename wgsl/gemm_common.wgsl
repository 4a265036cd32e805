// What every GEMM family shares (the prelude of gemm.wgsl, gemm_shared.wgsl,
// gemm_splitk.wgsl and gemm_coop.wgsl):
//   out[b, i, j] = alpha * sum_k A[b, i, k] * B[b, k, j] + beta * bias[b, i, j]
// the parameter block, the bindings, the element loads for the dtype, the
// batch offsets, and THE epilogue (`store_quad`): every family stores its
// results through it, so a fused epilogue replaces one function.
//
// A, B and bias are read through element strides (transposed, sliced and
// broadcast operands need no copy), up to four batch dimensions
// (workgroup_id.z walks the flattened batch), f32 accumulation.
//
// Placeholders (src/kernels/gemm/common/prelude.rs):
//   OUT_VEC: N % 4 == 0, so a column quad is stored as one vec4;
//   HAS_BIAS: the bias binding exists;
//   HAS_EPILOGUE: a fused elementwise epilogue
//   (src/kernels/gemm/common/epilogue.rs, EPILOGUE_FN: its bindings and
//   `epilogue`, EPILOGUE_PARAMS: its parameter words `p.w`) stores the
//   results instead of `out`;
//   K_TAIL: K is not a multiple of the family's K step, so the last step
//   masks k >= K (when false the masks fold away at compile time);
//   BINDINGS and the A_*, B_*, BIAS_*, OUT_* expressions: element loads and
//   stores for the dtype (f32, f16, or bf16 held in u32 words).
// A vec4 load `a4(e)` reads the aligned group of four that holds element e:
// at an edge it may read past the last element, but never past the 16-byte
// group that holds it (pool buffers are multiples of 256 bytes).

struct Params {
    m: u32,
    n: u32,
    k: u32,
    _pad0: u32,
    a_off: u32,
    a_rs: u32,
    a_cs: u32,
    b_off: u32,
    b_rs: u32,
    b_cs: u32,
    c_off: u32,
    c_rs: u32,
    c_cs: u32,
    alpha: f32,
    beta: f32,
    _pad1: u32,
    batch_shape: vec4<u32>,
    a_bs: vec4<u32>,
    b_bs: vec4<u32>,
    c_bs: vec4<u32>,
    // Workgroup offset of this dispatch (x, y, z): a grid larger than the
    // per-dimension dispatch limit runs as several dispatches.
    group0: vec4<u32>,
{{EPILOGUE_PARAMS}}
}

@group(0) @binding(0) var<uniform> p: Params;

const OUT_VEC: bool = {{OUT_VEC}};
const HAS_BIAS: bool = {{HAS_BIAS}};
const K_TAIL: bool = {{K_TAIL}};
const HAS_EPILOGUE: bool = {{HAS_EPILOGUE}};

{{BINDINGS}}

fn a1(e: u32) -> f32 { return {{A_ONE}}; }
fn a4(e: u32) -> vec4<f32> { return {{A_FOUR}}; }
fn b1(e: u32) -> f32 { return {{B_ONE}}; }
fn b4(e: u32) -> vec4<f32> { return {{B_FOUR}}; }
fn bias1(e: u32) -> f32 { return {{BIAS_ONE}}; }
fn out1(e: u32, x: f32) { {{OUT_ONE}}; }
fn out4(e: u32, v: vec4<f32>) { {{OUT_FOUR}}; }

{{EPILOGUE_FN}}

// bfloat16 helpers (unused by the other dtypes). Element 2i of a bf16
// array is the low half of word i.
fn bfloat_lo(w: u32) -> f32 { return bitcast<f32>(w << 16u); }
fn bfloat_hi(w: u32) -> f32 { return bitcast<f32>(w & 0xffff0000u); }
fn bfloat4(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(bfloat_lo(w.x), bfloat_hi(w.x), bfloat_lo(w.y), bfloat_hi(w.y));
}
fn bfloat_bits(x: f32) -> u32 {
    // Round to nearest even; NaN stays a quiet NaN.
    let u = bitcast<u32>(x);
    let r = (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
    // NaN tested on the bits (see is_nan in convert.wgsl).
    return select(r, (u >> 16u) | 0x40u, (u & 0x7fffffffu) > 0x7f800000u);
}

// `x` with the lanes of k >= K zeroed when this is the tail chunk.
fn kmasked(x: vec4<f32>, tail: bool, kmask: vec4<bool>) -> vec4<f32> {
    return select(x, select(vec4<f32>(0.0), x, kmask), tail);
}

// `x` (four consecutive k from `k`) with the lanes of k >= K zeroed; the
// identity unless K_TAIL.
fn kmask4(x: vec4<f32>, k: u32) -> vec4<f32> {
    if !K_TAIL {
        return x;
    }
    return select(vec4<f32>(0.0), x, vec4<u32>(k, k + 1u, k + 2u, k + 3u) < vec4<u32>(p.k));
}

// `k` clamped inside K (a load at a k >= K reads a real element, which the
// mask then zeroes); the identity unless K_TAIL.
fn kclamp(k: u32) -> u32 {
    return select(k, min(k, p.k - 1u), K_TAIL);
}

// Element offsets of batch entry `z` in A, B, the bias and the output.
struct Bases {
    a: u32,
    b: u32,
    c: u32,
    out: u32,
}

fn batch_bases(z: u32) -> Bases {
    var r = Bases(p.a_off, p.b_off, p.c_off, z * p.m * p.n);
    var bi = z;
    for (var d = 3; d >= 0; d--) {
        let size = p.batch_shape[d];
        let idx = bi % size;
        bi /= size;
        r.a += idx * p.a_bs[d];
        r.b += idx * p.b_bs[d];
        r.c += idx * p.c_bs[d];
    }
    return r;
}

// THE epilogue of every family: scale, add the bias and store one column
// quad (columns 4q .. 4q + 4) of one output row, if it lies inside the
// output; with a fused epilogue, hand the quad to it instead.
fn store_quad(row: u32, q: u32, x: vec4<f32>, c_base: u32, out_base: u32) {
    let col = q * 4u;
    if row >= p.m || col >= p.n {
        return;
    }
    var r = x * p.alpha;
    if HAS_BIAS {
        let e = c_base + row * p.c_rs;
        for (var j = 0u; j < 4u; j++) {
            r[j] += p.beta * bias1(e + min(col + j, p.n - 1u) * p.c_cs);
        }
    }
    let o = out_base + row * p.n + col;
    if HAS_EPILOGUE {
        epilogue(o, r, min(4u, p.n - col));
    } else if OUT_VEC {
        out4(o, r);
    } else {
        for (var j = 0u; j < 4u; j++) {
            if col + j < p.n {
                out1(o + j, r[j]);
            }
        }
    }
}

// Register-blocked, workgroup-tiled GEMM with a fused epilogue:
//   out[b, i, j] = alpha * sum_k A[b, i, k] * B[b, k, j] + beta * bias[b, i, j]
// A, B and bias are read through element strides (transposed, sliced and
// broadcast operands need no copy), up to four batch dimensions
// (workgroup_id.z walks the flattened batch), f32 accumulation.
//
// A workgroup of WG_X x WG_Y threads computes a (WG_Y*TM) x (WG_X*4*NV) tile
// of the output. Each thread owns TM consecutive rows and NV groups of four
// consecutive columns (group v of thread x starts at column
// 4 * (tile_quad + v * WG_X + x)), and keeps those TM x 4NV accumulators in
// registers. K is walked in chunks of four: per chunk a thread loads a
// TM x 4 block of A and a 4 x 4NV block of B, as vec4s where the layout
// allows it, and does 16 * TM * NV fused multiply-adds, in k order for every
// output (so results do not depend on the tile). Operands are read straight
// from storage: on lavapipe (the CPU adapter this crate is tuned on)
// workgroup memory costs the same per-lane loads as storage, so a tile copy
// only adds work; the caches do the reuse.
//
// The per-thread code (DECLS, CHUNK, EPILOGUE) is generated straight-line
// by src/kernels/matmul.rs (`gemm_body`) for the tile and the operand load
// modes: A as vec4s along k (row-major), along m (a transposed view), or
// scalars; B as vec4s along n, along k, or scalars.
//
// Other placeholders:
//   WG_X, WG_Y, TM, NV: the tile shape (chosen per shape class);
//   OUT_VEC: N % 4 == 0, so a column group is stored as one vec4;
//   HAS_BIAS: the bias binding exists;
//   K_TAIL: K % 4 != 0;
//   BINDINGS and the A_*, B_*, BIAS_*, OUT_* expressions: element loads and
//   stores for the dtype (f32, f16, or bf16 held in u32 words).
// Edges: rows and columns past M and N are clamped on load and skipped on
// store; the last partial K chunk is masked to zero in both operands. A vec4
// load at an edge may read past the last element, but never past the
// 16-byte group that holds it: pool buffers are multiples of 256 bytes.

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
}

@group(0) @binding(0) var<uniform> p: Params;

const WG_X: u32 = {{WG_X}}u;
const WG_Y: u32 = {{WG_Y}}u;
const TM: u32 = {{TM}}u;
const NV: u32 = {{NV}}u;
const OUT_VEC: bool = {{OUT_VEC}};
const HAS_BIAS: bool = {{HAS_BIAS}};
// K is not a multiple of four: the last chunk needs masks. When false the
// masks fold away at compile time.
const K_TAIL: bool = {{K_TAIL}};

{{BINDINGS}}

fn a1(e: u32) -> f32 { return {{A_ONE}}; }
fn a4(e: u32) -> vec4<f32> { return {{A_FOUR}}; }
fn b1(e: u32) -> f32 { return {{B_ONE}}; }
fn b4(e: u32) -> vec4<f32> { return {{B_FOUR}}; }
fn bias1(e: u32) -> f32 { return {{BIAS_ONE}}; }
fn out1(e: u32, x: f32) { {{OUT_ONE}}; }
fn out4(e: u32, v: vec4<f32>) { {{OUT_FOUR}}; }

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

// Generated: the thread's accumulators acc_{r}_{v} (zero-initialised, as
// every private variable), the element offset arow_{r} of each of its rows
// of A (row clamped to m - 1) and the clamped column quad quad_{v} of each
// of its column groups. Separate variables rather than arrays: NIR keeps
// them in registers without having to split or unroll anything.
// `x` with the lanes of k >= K zeroed when this is the tail chunk.
fn kmasked(x: vec4<f32>, tail: bool, kmask: vec4<bool>) -> vec4<f32> {
    return select(x, select(vec4<f32>(0.0), x, kmask), tail);
}

// Scale, add the bias and store one column quad of one output row, if it
// lies inside the output.
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
    if OUT_VEC {
        out4(o, r);
    } else {
        for (var j = 0u; j < 4u; j++) {
            if col + j < p.n {
                out1(o + j, r[j]);
            }
        }
    }
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) local_wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let wid = local_wid + p.group0.xyz;
    var a_base = p.a_off;
    var b_base = p.b_off;
    var c_base = p.c_off;
    var bi = wid.z;
    for (var d = 3; d >= 0; d--) {
        let size = p.batch_shape[d];
        let idx = bi % size;
        bi /= size;
        a_base += idx * p.a_bs[d];
        b_base += idx * p.b_bs[d];
        c_base += idx * p.c_bs[d];
    }
    let out_base = wid.z * p.m * p.n;
    let row0 = (wid.y * WG_Y + lid.y) * TM;
    // Column group v of this thread is quad q0 + v * WG_X.
    let q0 = wid.x * WG_X * NV + lid.x;
    let last_quad = (p.n + 3u) / 4u - 1u;
    // Generated: the thread's accumulators acc_{r}_{v}, the element offset
    // arow_{r} of each of its rows of A (row clamped to m - 1) and the
    // clamped column quad quad_{v} of each of its column groups.
{{DECLS}}
    for (var k0 = 0u; k0 < p.k; k0 += 4u) {
        // The last chunk of a K that is not a multiple of four masks k >= K.
        let tail = K_TAIL && k0 + 4u > p.k;
        let kmask = vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u) < vec4<u32>(p.k);
        // The four k indices, clamped inside K in the tail chunk.
        let kc = select(vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u),
            min(vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u), vec4<u32>(p.k - 1u)), tail);
        // Generated, straight-line: the 4 x 4NV block of B (b{kk}_{v} holds
        // B[k0 + kk, 4 quad_{v} .. 4 quad_{v} + 4]), then per row r its four
        // A values x{r} = A[row r, k0 .. k0 + 4] and 16 NV multiply-adds.
{{CHUNK}}
    }
    // Generated: store_quad for every row and column group.
{{EPILOGUE}}
}

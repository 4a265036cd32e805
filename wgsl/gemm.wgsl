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
// allows it, and does 16 * TM * NV fused multiply-adds. Operands are read
// straight from storage: on lavapipe (the CPU adapter this crate is tuned on)
// workgroup memory costs the same per-lane loads as storage, so a tile copy
// only adds work; the caches do the reuse.
//
// Specialisation (text placeholders, see src/kernels/matmul.rs):
//   WG_X, WG_Y, TM, NV: the tile shape (chosen per shape class);
//   A_MODE: 0 scalar loads, 1 vec4 along k (row-major A), 2 vec4 along m
//           (column-major A, that is a transposed view);
//   B_MODE: 0 scalar loads, 1 vec4 along n (row-major B), 2 vec4 along k
//           (column-major B);
//   OUT_VEC: N % 4 == 0, so a column group is stored as one vec4;
//   HAS_BIAS: the bias binding exists;
//   BINDINGS and the A_*, B_*, BIAS_*, OUT_* expressions: element loads and
//   stores for the dtype (f32, f16, or bf16 held in u32 words).
// Edges: rows and columns past M and N are clamped on load and skipped on
// store; the last partial K chunk is masked to zero in both operands.

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
}

@group(0) @binding(0) var<uniform> p: Params;

const WG_X: u32 = {{WG_X}}u;
const WG_Y: u32 = {{WG_Y}}u;
const TM: u32 = {{TM}}u;
const NV: u32 = {{NV}}u;
const A_MODE: u32 = {{A_MODE}}u;
const B_MODE: u32 = {{B_MODE}}u;
const OUT_VEC: bool = {{OUT_VEC}};
const HAS_BIAS: bool = {{HAS_BIAS}};
// Rows of A loaded per block: a constant, so that loops over it unroll and
// the register arrays stay registers (TM is below 4 or a multiple of 4).
const RB: u32 = min(TM, 4u);

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
    return select(r, (u >> 16u) | 0x40u, x != x);
}

var<private> acc: array<array<vec4<f32>, NV>, TM>;
// Element offset of each of the thread's rows of A (row clamped to m - 1).
var<private> a_row: array<u32, TM>;
// Column quad (clamped) of each column group.
var<private> quad: array<u32, NV>;

// One chunk of four k values starting at k0; `tail` masks k >= K.
fn chunk(k0: u32, a_base: u32, b_base: u32, tail: bool) {
    let kmask = vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u) < vec4<u32>(p.k);
    // B block: bq[kk][v] holds B[k0 + kk, 4 quad[v] .. 4 quad[v] + 4].
    var bq: array<array<vec4<f32>, NV>, 4>;
    for (var v = 0u; v < NV; v++) {
        let col = quad[v] * 4u;
        if B_MODE == 1u {
            for (var kk = 0u; kk < 4u; kk++) {
                let kr = select(k0 + kk, min(k0 + kk, p.k - 1u), tail);
                let x = b4(b_base + kr * p.b_rs + col);
                bq[kk][v] = select(x, vec4<f32>(0.0), tail && !kmask[kk]);
            }
        } else {
            // Four columns, each a vec4 along k (B_MODE 2) or four scalars.
            var t: array<vec4<f32>, 4>;
            for (var j = 0u; j < 4u; j++) {
                let cj = min(col + j, p.n - 1u);
                let e = b_base + cj * p.b_cs;
                if B_MODE == 2u {
                    t[j] = b4(e + k0);
                } else {
                    let ks = select(vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u),
                        min(vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u), vec4<u32>(p.k - 1u)), tail);
                    t[j] = vec4<f32>(b1(e + ks.x * p.b_rs), b1(e + ks.y * p.b_rs),
                        b1(e + ks.z * p.b_rs), b1(e + ks.w * p.b_rs));
                }
                if tail {
                    t[j] = select(vec4<f32>(0.0), t[j], kmask);
                }
            }
            for (var kk = 0u; kk < 4u; kk++) {
                bq[kk][v] = vec4<f32>(t[0][kk], t[1][kk], t[2][kk], t[3][kk]);
            }
        }
    }
    // A block, four rows at a time: ar[r] holds A[row r, k0 .. k0 + 4].
    for (var i0 = 0u; i0 < TM; i0 += 4u) {
        var ar: array<vec4<f32>, 4>;
        if A_MODE == 2u {
            // Column-major A: a vec4 along m per k.
            var t: array<vec4<f32>, 4>;
            for (var kk = 0u; kk < 4u; kk++) {
                let kr = select(k0 + kk, min(k0 + kk, p.k - 1u), tail);
                t[kk] = a4(a_row[i0] + kr * p.a_cs);
            }
            for (var r = 0u; r < 4u; r++) {
                ar[r] = vec4<f32>(t[0][r], t[1][r], t[2][r], t[3][r]);
            }
        } else {
            for (var r = 0u; r < RB; r++) {
                let e = a_row[i0 + r];
                if A_MODE == 1u {
                    ar[r] = a4(e + k0);
                } else {
                    let ks = select(vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u),
                        min(vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u), vec4<u32>(p.k - 1u)), tail);
                    ar[r] = vec4<f32>(a1(e + ks.x * p.a_cs), a1(e + ks.y * p.a_cs),
                        a1(e + ks.z * p.a_cs), a1(e + ks.w * p.a_cs));
                }
            }
        }
        for (var r = 0u; r < RB; r++) {
            var x = ar[r];
            if tail {
                x = select(vec4<f32>(0.0), x, kmask);
            }
            for (var v = 0u; v < NV; v++) {
                var s = acc[i0 + r][v];
                s = fma(vec4<f32>(x.x), bq[0][v], s);
                s = fma(vec4<f32>(x.y), bq[1][v], s);
                s = fma(vec4<f32>(x.z), bq[2][v], s);
                s = fma(vec4<f32>(x.w), bq[3][v], s);
                acc[i0 + r][v] = s;
            }
        }
    }
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
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
    let quads = (p.n + 3u) / 4u;
    for (var i = 0u; i < TM; i++) {
        a_row[i] = a_base + min(row0 + i, p.m - 1u) * p.a_rs;
        for (var v = 0u; v < NV; v++) {
            acc[i][v] = vec4<f32>(0.0);
        }
    }
    for (var v = 0u; v < NV; v++) {
        quad[v] = min(wid.x * WG_X * NV + v * WG_X + lid.x, quads - 1u);
    }
    let full = p.k & ~3u;
    for (var k0 = 0u; k0 < full; k0 += 4u) {
        chunk(k0, a_base, b_base, false);
    }
    if full < p.k {
        chunk(full, a_base, b_base, true);
    }
    // Epilogue: scale, add the bias, store what lies inside the output.
    for (var v = 0u; v < NV; v++) {
        let q = wid.x * WG_X * NV + v * WG_X + lid.x;
        let col = q * 4u;
        if col >= p.n {
            continue;
        }
        for (var i = 0u; i < TM; i++) {
            let row = row0 + i;
            if row >= p.m {
                break;
            }
            var r = acc[i][v] * p.alpha;
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
    }
}

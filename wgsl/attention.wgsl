// Scaled dot-product attention of one query row per head (decode), after
// MLX's sdpa_vector: one workgroup per (batch, KV head) computes the
// outputs of the GROUP query heads that read that KV head (grouped-query
// attention: each key and value row is loaded once for all of them, K and
// V are never repeated), with the softmax online (Milakov & Gimelshein
// 2018): keys in blocks of BK, a running maximum and sum per query head,
// the weighted values rescaled when the maximum grows.
//
//   out[b, h, 0, :] = softmax_j(scale * q[b, h, 0, :] . k[b, h / GROUP, j, :])
//                     @ v[b, h / GROUP, j, :]      for keys j < len
//
// `len` is the static key count or, with a length operand, that element
// (read at run time, clamped to the keys): the keys past it are never
// read. No visible key gives NaN, as a softmax over -inf scores does.
//
// Per block, with the workgroup's threads:
//   1. scores of the GROUP x BK (query head, key) pairs into `s`;
//   2. a thread per query head: the block's maximum, the new running
//      maximum and the factor that rescales what came before;
//   3. s = exp(s - max);
//   4. a thread per query head: the running sum; a thread per output
//      element (OWN each): acc = acc * factor + sum_j s[j] * v[j].
// Loops unrolled by 4 (llvmpipe counts every loop iteration, 65535 per
// invocation: primitive.rs sdpa_vector_fits bounds the keys).
//
// Generated per specialisation (placeholders in double braces):
//   GROUP  query heads per KV head
//   D      head dimension (a multiple of 4)
//   LOAD_Q, LOAD_K, LOAD_V  statements of fn load_*(i) -> f32: element i
//          of the buffer, decoded to f32
//   LEN    expression: the keys read (u32), from p.head.w and len[]
//   STORE  statements writing the workgroup's GROUP * D outputs (in `o`)
//          from word `base` of `out`, thread t first

const WG: u32 = 128u;
const BK: u32 = 64u;
const GROUP: u32 = {{GROUP}}u;
const D: u32 = {{D}}u;
const GD: u32 = GROUP * D;
// Output elements per thread.
const OWN: u32 = (GD + WG - 1u) / WG;
// Masked scores: below every finite score (a score of -inf is masked too).
const NEG_INF: f32 = -3.40282347e+38f;

struct Params {
    // batch, query heads, KV heads, keys
    head: vec4<u32>,
    // q: offset, batch stride, head stride, element stride
    q: vec4<u32>,
    // k: offset, batch stride, head stride, key stride
    k: vec4<u32>,
    // v: offset, batch stride, head stride, key stride
    v: vec4<u32>,
    // k element stride, v element stride, length offset, -
    misc: vec4<u32>,
    // scale (f32 bits), -, -, -
    scale: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<u32>;
@group(0) @binding(2) var<storage, read> k: array<u32>;
@group(0) @binding(3) var<storage, read> v: array<u32>;
@group(0) @binding(4) var<storage, read> len: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<u32>;

// The scaled queries, then the outputs.
var<workgroup> o: array<f32, GD>;
// A block's scores, then their weights.
var<workgroup> s: array<f32, GROUP * BK>;
// Per query head: the running maximum and sum, the block's factor.
var<workgroup> m: array<f32, GROUP>;
var<workgroup> l: array<f32, GROUP>;
var<workgroup> f: array<f32, GROUP>;

fn load_q(i: u32) -> f32 {
{{LOAD_Q}}
}

fn load_k(i: u32) -> f32 {
{{LOAD_K}}
}

fn load_v(i: u32) -> f32 {
{{LOAD_V}}
}

@compute @workgroup_size(128)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let t = lid.x;
    let kvh = wid.x % p.head.z;
    let b = wid.x / p.head.z;
    let n = {{LEN}};
    let scale = bitcast<f32>(p.scale.x);
    let ks = p.misc.x;
    let vs = p.misc.y;
    for (var w = t; w < GD; w += WG) {
        let h = kvh * GROUP + w / D;
        o[w] = load_q(p.q.x + b * p.q.y + h * p.q.z + (w % D) * p.q.w) * scale;
    }
    if t < GROUP {
        m[t] = NEG_INF;
        l[t] = 0.0;
    }
    var acc: array<f32, OWN>;
    for (var r = 0u; r < OWN; r++) {
        acc[r] = 0.0;
    }
    workgroupBarrier();
    let kb = p.k.x + b * p.k.y + kvh * p.k.z;
    let vb = p.v.x + b * p.v.y + kvh * p.v.z;
    let blocks = (n + BK - 1u) / BK;
    for (var blk = 0u; blk < blocks; blk++) {
        let j0 = blk * BK;
        // 1. Scores.
        for (var w = t; w < GROUP * BK; w += WG) {
            let g = w / BK;
            let j = j0 + w % BK;
            var sc = NEG_INF;
            if j < n {
                let kr = kb + j * p.k.w;
                let qr = g * D;
                var dot = 0.0;
                for (var d = 0u; d < D; d += 4u) {
                    dot += o[qr + d] * load_k(kr + d * ks)
                        + o[qr + d + 1u] * load_k(kr + (d + 1u) * ks)
                        + o[qr + d + 2u] * load_k(kr + (d + 2u) * ks)
                        + o[qr + d + 3u] * load_k(kr + (d + 3u) * ks);
                }
                sc = dot;
            }
            s[w] = sc;
        }
        workgroupBarrier();
        // 2. The running maximum.
        if t < GROUP {
            var bm = NEG_INF;
            for (var j = 0u; j < BK; j += 4u) {
                let r = t * BK + j;
                bm = max(bm, max(max(s[r], s[r + 1u]), max(s[r + 2u], s[r + 3u])));
            }
            let old = m[t];
            let mx = max(old, bm);
            var fac = 1.0;
            if mx > NEG_INF {
                fac = exp(old - mx);
            }
            m[t] = mx;
            f[t] = fac;
        }
        workgroupBarrier();
        // 3. Weights.
        for (var w = t; w < GROUP * BK; w += WG) {
            let mx = m[w / BK];
            var e = 0.0;
            if s[w] > NEG_INF {
                e = exp(s[w] - mx);
            }
            s[w] = e;
        }
        workgroupBarrier();
        // 4. The running sum and the weighted values.
        if t < GROUP {
            var sum = 0.0;
            for (var j = 0u; j < BK; j += 4u) {
                let r = t * BK + j;
                sum += (s[r] + s[r + 1u]) + (s[r + 2u] + s[r + 3u]);
            }
            l[t] = l[t] * f[t] + sum;
        }
        let keys = min(BK, n - j0);
        let quads = keys / 4u;
        for (var r = 0u; r < OWN; r++) {
            let w = t + r * WG;
            if w < GD {
                let g = w / D;
                let sr = g * BK;
                let vr = vb + j0 * p.v.w + (w % D) * vs;
                var a = acc[r] * f[g];
                for (var u = 0u; u < quads; u++) {
                    let j = 4u * u;
                    a += s[sr + j] * load_v(vr + j * p.v.w)
                        + s[sr + j + 1u] * load_v(vr + (j + 1u) * p.v.w)
                        + s[sr + j + 2u] * load_v(vr + (j + 2u) * p.v.w)
                        + s[sr + j + 3u] * load_v(vr + (j + 3u) * p.v.w);
                }
                for (var j = 4u * quads; j < keys; j++) {
                    a += s[sr + j] * load_v(vr + j * p.v.w);
                }
                acc[r] = a;
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < OWN; r++) {
        let w = t + r * WG;
        if w < GD {
            let den = l[w / D];
            // NaN, from a run-time word (a constant NaN is not WGSL).
            var y = bitcast<f32>(p.scale.y | 0x7fc00000u);
            if den > 0.0 {
                y = acc[r] / den;
            }
            o[w] = y;
        }
    }
    workgroupBarrier();
    // Query heads kvh * GROUP .. of batch b: GROUP * D dense outputs.
    let base = (b * p.head.y + kvh * GROUP) * D;
{{STORE}}
}

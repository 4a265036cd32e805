// The split-K matrix-vector family; its prelude is gemm_common.wgsl
// (parameters, loads, the epilogue).
//
// A workgroup of KS * CQ threads computes one output row (workgroup_id.y)
// by 4 CQ columns. Thread li is lane s = li % KS of column quad
// c = li / KS: it sums the chunks of four k starting at 4 s, 4 (s + KS),
// ... (the register family's chunk code for a 1 x 4 block: CHUNK), then the
// KS partial sums of a quad are added (REDUCE: subgroup shuffles, or a tree
// in workgroup memory) and lane 0 stores them through store_quad.
// Long K is spread over KS threads: a [1, K] x [K, N] product with small N
// still gives every core work, and a transposed B (x @ W^T, vec4 loads
// along k) is read in runs of 16 KS contiguous bytes per column.

const KS: u32 = {{KS}}u;
const CQ: u32 = {{CQ}}u;

var<workgroup> red: array<vec4<f32>, KS * CQ>;

@compute @workgroup_size(KS * CQ, 1, 1)
fn main(@builtin(workgroup_id) local_wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let wid = local_wid + p.group0.xyz;
    let bases = batch_bases(wid.z);
    let a_base = bases.a;
    let b_base = bases.b;
    let c_base = bases.c;
    let out_base = bases.out;
    let s = li % KS;
    let row0 = wid.y;
    let q0 = wid.x * CQ + li / KS;
    let last_quad = (p.n + 3u) / 4u - 1u;
{{DECLS}}
    for (var k0 = 4u * s; k0 < p.k; k0 += 4u * KS) {
        // The last chunk of a K that is not a multiple of four masks k >= K.
        let tail = K_TAIL && k0 + 4u > p.k;
        let kmask = vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u) < vec4<u32>(p.k);
        let kc = select(vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u),
            min(vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u), vec4<u32>(p.k - 1u)), tail);
{{CHUNK}}
    }
{{REDUCE}}
    if s == 0u {
{{EPILOGUE}}
    }
}

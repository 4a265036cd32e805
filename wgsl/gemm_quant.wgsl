// The quantized GEMM family: out = x @ W (with W quantized) through the
// GEMM prelude (gemm_common.wgsl: parameters, x's loads, the batch offsets,
// `store_quad` and a fused epilogue), reading W's packed bytes and
// dequantizing them in registers: no dequantized copy of W exists.
//
// W is in one of ggml's block formats (Q4_0 ... Q6_K, decoded by the
// functions of quant_blocks.wgsl) or MLX's affine quantization (quants,
// scales, biases; decoded by generated functions). Two orientations:
//   along K (x @ W^T, W [N, K]: a Linear or GGUF weight): row j of W is
//     output column j, K runs along its blocks;
//   along N (x @ W, W [K, N], affine only): row k of W holds the N output
//     columns' weights of k.
//
// A workgroup of WG x LANES threads computes TM rows of x by WG x NC
// output columns: thread t (< WG) owns NC consecutive columns, and its
// LANES lanes split K between them (lane l takes steps l, l + LANES, ...;
// their sums are added in workgroup memory at the end: REDUCE). Each
// K step, a thread loads the step's bytes of each of its W rows with vec4
// loads from a 16-byte boundary (`b` is array<vec4<u32>>) and realigns
// them in registers into `qw` (rows start at any even byte: a Q4_0 block
// is 18 bytes), then decodes them with every index a constant (`q_word`
// reads qw, which lives in registers), so each packed byte is loaded once.
// Why: software adapters (Mesa's llvmpipe) turn every storage load into a
// loop over the SIMD lanes whose cost hardly depends on its width, so the
// widest aligned loads and no repeated ones decide; GPUs read the same
// bytes, coalesced across LANES.
//
// Parameters (gemm_common's Params; this family binds no bias, so the
// bias words hold the affine scales' and biases' rows):
//   a_off, a_rs, a_cs   x (elements), as every family;
//   b_off               W's row 0: bytes (block formats) or words (affine);
//   b_cs / b_rs         W's row stride along N (along K) / along K (along N)
//                       in the same unit;
//   c_off, c_rs         the scales' offset and row stride (elements);
//   c_cs, _pad0         the biases' offset and row stride (elements).
//
// Generated (src/kernels/gemm/quant.rs):
//   WG, LANES, TM, NC, QW (words of one W row's step in qw), STEPS (the
//   expression of K steps), FORMAT (affine's decode and scale loads, or
//   nothing), X_BINDING (x as a uniform window, software adapters), RED
//   (workgroup memory of the lane reduction), DECLS, STEP, REDUCE, EPILOGUE.

const WG: u32 = {{WG}}u;
const LANES: u32 = {{LANES}}u;
const TM: u32 = {{TM}}u;
const NC: u32 = {{NC}}u;
const QW: u32 = {{QW}}u;

// The realigned words of the current K step of each of the thread's W
// rows (row c's word i is qw[c][i]). Every index is a constant once the
// generated code is unrolled, so drivers keep it in registers.
var<private> qw: array<array<u32, QW>, {{QROWS}}>;

fn q_word(i: u32) -> u32 {
    return qw[i / QW][i % QW];
}

{{FORMAT}}
{{X_BINDING}}
{{RED}}

// The four words from word `w` of chunk words c0..c7 (realignment by a
// phase of 0 to 3 words).
fn pick(ws: u32, c0: u32, c1: u32, c2: u32, c3: u32) -> u32 {
    return select(select(c0, c1, ws == 1u), select(c2, c3, ws == 3u), ws >= 2u);
}

// The word from byte 2 of `lo` (a funnel of two words), or `lo`.
fn half_shift(odd: bool, lo: u32, hi: u32) -> u32 {
    return select(lo, (lo >> 16u) | (hi << 16u), odd);
}

@compute @workgroup_size(WG * LANES, 1, 1)
fn main(@builtin(workgroup_id) local_wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let wid = local_wid + p.group0.xyz;
    let bases = batch_bases(wid.z);
    let a_base = bases.a;
    let c_base = bases.c;
    let out_base = bases.out;
    let lane = li % LANES;
    let t = li / LANES;
    let row0 = wid.y * TM;
    let col0 = (wid.x * WG + t) * NC;
    let last_col = p.n - 1u;
    // Generated: x's row offsets (clamped to m - 1), W's row offsets
    // (clamped to the last column), the accumulators acc_{r}_{q} (output
    // row r, column quad q).
{{DECLS}}
    for (var st = lane; st < {{STEPS}}; st += LANES) {
{{STEP}}
    }
{{REDUCE}}
{{EPILOGUE}}
}

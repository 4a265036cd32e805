// The register-blocked GEMM family (no workgroup memory), the one software
// adapters take; its prelude is gemm_common.wgsl (parameters, loads, the
// epilogue).
//
// A workgroup of WG_X x WG_Y threads computes a (WG_Y*TM) x (WG_X*4*NV) tile
// of the output. Each thread owns TM consecutive rows and NV groups of four
// consecutive columns (group v of thread x starts at column
// 4 * (tile_quad + v * WG_X + x)), and keeps those TM x 4NV accumulators in
// registers. K is walked in chunks of four: per chunk a thread loads a
// TM x 4 block of A and a 4 x 4NV block of B, as vec4s where the layout
// allows it, and does 16 * TM * NV fused multiply-adds, in k order for every
// output (so results do not depend on the tile). Operands are read straight
// from storage: on lavapipe (the CPU adapter this family is tuned on)
// workgroup memory costs the same per-lane loads as storage, so a tile copy
// only adds work; the caches do the reuse.
//
// The per-thread code (DECLS, CHUNK, EPILOGUE) is generated straight-line
// by src/kernels/gemm/common/block.rs (`gemm_body`) for the tile and the
// operand load modes: A as vec4s along k (row-major), along m (a
// transposed view), or scalars; B as vec4s along n, along k, or scalars.
//
// Edges: rows and columns past M and N are clamped on load and skipped on
// store; the last partial K chunk is masked to zero in both operands.

const WG_X: u32 = {{WG_X}}u;
const WG_Y: u32 = {{WG_Y}}u;
const TM: u32 = {{TM}}u;
const NV: u32 = {{NV}}u;

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(workgroup_id) local_wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let wid = local_wid + p.group0.xyz;
    let bases = batch_bases(wid.z);
    let a_base = bases.a;
    let b_base = bases.b;
    let c_base = bases.c;
    let out_base = bases.out;
    let row0 = (wid.y * WG_Y + lid.y) * TM;
    // Column group v of this thread is quad q0 + v * WG_X.
    let q0 = wid.x * WG_X * NV + lid.x;
    let last_quad = (p.n + 3u) / 4u - 1u;
    // Generated: the thread's accumulators acc_{r}_{v} (zero-initialised),
    // the element offset arow_{r} of each of its rows of A (row clamped to
    // m - 1) and the clamped column quad quad_{v} of each of its column
    // groups. Separate variables rather than arrays: NIR keeps them in
    // registers without having to split or unroll anything.
{{DECLS}}
    // K_STEP is 8 where both operands are read eight k per load
    // (`Mode::PairK`, K a multiple of eight; the chunk does eight k), else 4.
    for (var k0 = 0u; k0 < p.k; k0 += {{K_STEP}}u) {
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
    // Generated: store_quad (gemm_common.wgsl) for every row and column group.
{{EPILOGUE}}
}

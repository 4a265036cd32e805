// The cooperative-matrix GEMM family (needs wgpu's
// EXPERIMENTAL_COOPERATIVE_MATRIX and SUBGROUP); its prelude is
// `enable wgpu_cooperative_matrix;` and gemm_common.wgsl (parameters,
// loads, the epilogue).
//
// A workgroup of four subgroups (THREADS invocations: the adapter's fixed
// subgroup size times four) computes a BM x BM block of the output; the
// subgroups form a 2 x 2 grid, each FRAGS x FRAGS fragments of SIZE x SIZE.
// K is walked in steps of BK through double-buffered workgroup memory, as
// in gemm_shared.wgsl (the same generated staging, converted to the
// fragment type CT), and each subgroup multiplies its fragments with
// coopMultiplyAdd into f32 accumulators. At the end each accumulator is
// stored into the subgroup's slot of workgroup memory and its lanes hand
// it, one column quad at a time, to store_quad (THE epilogue).
//
// Cooperative operations run in uniform control flow: the K loop's bounds
// and every coop call are the same for the whole workgroup.

const SIZE: u32 = {{SIZE}}u;
const BM: u32 = {{BM}}u;
const BN: u32 = {{BM}}u;
const BK: u32 = {{BK}}u;
alias CT = {{CT}};

// Two buffers of the k-major blocks (A's element (r, k) at k BM + r, B's
// (k, c) at k BN + c), in the fragments' type, and their stores
// (src/kernels/gemm/common/staging.rs, as the workgroup-memory family's).
{{STAGING}}
// One SIZE x SIZE slot per subgroup for the epilogue (zero at the start:
// the accumulators load it).
var<workgroup> sc: array<f32, 4u * {{SIZE}} * {{SIZE}}>;


// Store fragment `c`, whose first element is output row `row`, column
// quad `q`, through the subgroup's slot: row-major into sc, then each lane
// reads column quads and calls store_quad.
fn store_fragment(c: {{ACC}}, row: u32, q: u32, slot: u32, lane: u32, lanes: u32, bases: Bases) {
    coopStoreT(c, &sc[slot], SIZE);
    workgroupBarrier();
    for (var i = lane; i < SIZE * SIZE / 4u; i += lanes) {
        let r = i / (SIZE / 4u);
        let cq = i % (SIZE / 4u);
        let e = slot + r * SIZE + cq * 4u;
        let v = vec4<f32>(sc[e], sc[e + 1u], sc[e + 2u], sc[e + 3u]);
        store_quad(row + r, q + cq, v, bases.c, bases.out);
    }
    workgroupBarrier();
}

@compute @workgroup_size({{THREADS}}, 1, 1)
fn main(
    @builtin(workgroup_id) local_wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) lanes: u32,
) {
    let wid = local_wid + p.group0.xyz;
    let bases = batch_bases(wid.z);
    let a_base = bases.a;
    let b_base = bases.b;
    let tile_row0 = wid.y * BM;
    let tile_q0 = wid.x * (BN / 4u);
    let last_quad = (p.n + 3u) / 4u - 1u;
    // This subgroup's quarter of the block, and its epilogue slot.
    let wm = (sg / 2u) * (BM / 2u);
    let wn = (sg % 2u) * (BN / 2u);
    let slot = sg * SIZE * SIZE;
    for (var i = tid; i < 4u * SIZE * SIZE; i += {{THREADS}}u) {
        sc[i] = 0.0;
    }
    workgroupBarrier();
{{DECLS}}
{{STEPS}}
{{EPILOGUE}}
}

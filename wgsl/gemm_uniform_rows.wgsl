// The uniform-window matrix-vector family's kernel for B read along K
// (software adapters); its prelude is gemm_common.wgsl (parameters, loads,
// the bias).
//
// out[0, j] = alpha * sum_k A[0, k] * B[k, j] + beta * bias[0, j], with B
// unit-stride along k: B = W^T of a row-major W [n, k] (`x @ w.T`, the
// layout of PyTorch's and MLX's Linear weights). B's columns (W's rows) are
// read through WINDOWS uniform-buffer bindings w0, w1, ... of 64 KiB each
// (src/kernels/gemm/uniform.rs places them): window j holds columns
// p.win[j].x .. p.win[j].y whole, and B[4q, c] is quad
// (b_off + c b_cs) / 4 + q - p.win[j].z of it. A's row is one more uniform
// binding, `x`, of exactly K / 4 quads from A's first element. Why uniform
// buffers, A's included: see gemm_uniform.wgsl (a storage load costs a loop
// over the SIMD lanes on llvmpipe even when every lane reads one address).
//
// Every dispatch stores its own columns: none adds to another's.
//
// A workgroup of LANES x ROWS threads computes ROWS columns of every window:
// thread (l, r) sums the quads l, l + LANES, ... of its column of each
// window (lanes side by side, so a SIMD group reads contiguous bytes of one
// column); the sums go to workgroup memory and, after one barrier, each
// column's LANES partial sums are added and stored.

const LANES: u32 = {{LANES}}u;
const ROWS: u32 = {{ROWS}}u;
const WINDOWS: u32 = {{WINDOW_COUNT}}u;
const XQ: u32 = {{XQ}}u;

{{WINDOW_BINDINGS}}

var<workgroup> part: array<vec4<f32>, {{PART}}>;

// Scale, add the bias and store output column c (< N).
fn store_col(c: u32, s: f32) {
    var r = s * p.alpha;
    if HAS_BIAS {
        r += p.beta * bias1(p.c_off + c * p.c_cs);
    }
    out1(c, r);
}

@compute @workgroup_size(LANES, ROWS, 1)
fn main(@builtin(workgroup_id) local_wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t0 = (local_wid.x + p.group0.x) * ROWS;
    // B's column c starts at quad col_quad0 + c col_quads.
    let col_quad0 = p.b_off / 4u;
    let col_quads = p.b_cs / 4u;
    // Generated: per window j, column c_j = win[j].x + t0 + lid.y (clamped
    // inside the window; a window with no columns repeats column N - 1),
    // its partial sum over this lane's quads, stored to part.
{{WINDOWS}}
    workgroupBarrier();
    for (var o = lid.y * LANES + lid.x; o < WINDOWS * ROWS; o += LANES * ROWS) {
        let c = p.win[o / ROWS].x + t0 + o % ROWS;
        var s = vec4<f32>(0.0);
        for (var l = 0u; l < LANES; l++) {
            s += part[o * LANES + l];
        }
        if c < p.win[o / ROWS].y {
            store_col(c, dot(s, vec4<f32>(1.0)));
        }
    }
}

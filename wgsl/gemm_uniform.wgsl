// The uniform-window matrix-vector family (software adapters); its prelude
// is gemm_common.wgsl (parameters, loads, the epilogue).
//
// out[0, j] = alpha * sum_k A[0, k] * B[k, j] + beta * bias[0, j], with B
// unit-stride along n. B is read through WINDOWS uniform-buffer bindings
// w0, w1, ... of 64 KiB each (src/kernels/gemm/uniform.rs places them):
// window j holds rows p.win[j].x .. p.win[j].y of B whole, and element
// B[k, 4q] is quad (b_off + k b_rs) / 4 + q - p.win[j].z of it. Why uniform
// buffers: Mesa's llvmpipe (lavapipe, llvmpipe GL) turns every
// storage-buffer load into a loop over the SIMD lanes with a bounds check
// and a branch per lane, but a uniform-buffer load into one gather.
//
// A workgroup of WG_X threads computes 4 WG_X NV columns: thread x owns
// the column quads q0 + v WG_X (v < NV, lanes side by side, so a SIMD
// group reads contiguous bytes), and walks its rows one k at a time, A[0, k]
// (the same address in every lane) from storage. A product whose K needs
// more windows than one dispatch has runs as several dispatches over
// consecutive rows: the first (p.first.x == 1) stores through store_quad,
// with the bias; each later one adds alpha times its sums to the output.

const WG_X: u32 = {{WG_X}}u;
const NV: u32 = {{NV}}u;

{{WINDOW_BINDINGS}}

// Store (first dispatch) or add (later ones) column quad q of the output.
fn store_or_add(q: u32, x: vec4<f32>) {
    if p.first.x == 1u {
        store_quad(0u, q, x, p.c_off, 0u);
    } else if q * 4u < p.n {
        out[q] += x * p.alpha;
    }
}

@compute @workgroup_size(WG_X, 1, 1)
fn main(@builtin(workgroup_id) local_wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let wid = local_wid + p.group0.xyz;
    let q0 = wid.x * WG_X * NV + lid.x;
    let last_quad = (p.n + 3u) / 4u - 1u;
    // B's row k starts at quad row_quad0 + k row_quads.
    let row_quad0 = p.b_off / 4u;
    let row_quads = p.b_rs / 4u;
    // Generated: the clamped column quads quad_{v} and the accumulators
    // acc_{v}; per window j the loop over its rows; the stores.
{{DECLS}}
{{WINDOWS}}
{{STORES}}
}

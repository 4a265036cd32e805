// Reference matmul: one thread per output element, f32 accumulation.
// C[b, i, j] = sum_k A[b, i, k] * B[b, k, j], with A and B read through
// element strides (so transposed or broadcast operands need no copy) and up
// to four batch dimensions (stride 0 broadcasts). Correct, not fast: the
// tiled GEMM is a separate kernel. One dispatch sums k in [k0, k); with
// `accumulate` it adds C's previous value, so a long K runs as chunks under
// llvmpipe's limit of 65535 loop iterations per invocation.

const WG: u32 = 256u;

struct Params {
    m: u32,
    n: u32,
    k: u32,
    total: u32,
    a_off: u32,
    a_rs: u32,
    a_cs: u32,
    b_off: u32,
    b_rs: u32,
    b_cs: u32,
    k0: u32,
    accumulate: u32,
    batch_shape: vec4<u32>,
    a_bs: vec4<u32>,
    b_bs: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * WG;
    if t >= p.total {
        return;
    }
    let j = t % p.n;
    let i = (t / p.n) % p.m;
    var bi = t / (p.n * p.m);
    var a_base = p.a_off + i * p.a_rs;
    var b_base = p.b_off + j * p.b_cs;
    for (var d = 3; d >= 0; d--) {
        let size = p.batch_shape[d];
        let idx = bi % size;
        bi /= size;
        a_base += idx * p.a_bs[d];
        b_base += idx * p.b_bs[d];
    }
    var acc = 0.0;
    for (var kk = p.k0; kk < p.k; kk++) {
        acc += a[a_base + kk * p.a_cs] * b[b_base + kk * p.b_rs];
    }
    if p.accumulate != 0u {
        acc += c[t];
    }
    c[t] = acc;
}

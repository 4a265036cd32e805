// Shared by the elementwise kernels: parameters and strided indexing.
//
// A kernel thread handles output element `t` (row-major over `shape`).
// Operand k (0 or 1) reads element `offset_k(t)` of its buffer:
// `off_k + sum_d index_d(t) * strides_k[d]`, where strides are in elements
// and may be 0 (broadcast). With CONTIGUOUS the operands are dense and of the
// output's shape, and the sum is just `off_k + t`.

const WG: u32 = 256u;
const CONTIGUOUS: bool = {{CONTIGUOUS}};

struct Params {
    n: u32,
    ndim: u32,
    off0: u32,
    off1: u32,
    shape: array<vec4<u32>, 2>,
    strides0: array<vec4<u32>, 2>,
    strides1: array<vec4<u32>, 2>,
    extra: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

fn offset0(t: u32) -> u32 {
    if CONTIGUOUS {
        return p.off0 + t;
    }
    var rem = t;
    var off = p.off0;
    for (var d = i32(p.ndim) - 1; d >= 0; d--) {
        let ud = u32(d);
        let size = p.shape[ud / 4u][ud % 4u];
        off += (rem % size) * p.strides0[ud / 4u][ud % 4u];
        rem /= size;
    }
    return off;
}

fn offset1(t: u32) -> u32 {
    if CONTIGUOUS {
        return p.off1 + t;
    }
    var rem = t;
    var off = p.off1;
    for (var d = i32(p.ndim) - 1; d >= 0; d--) {
        let ud = u32(d);
        let size = p.shape[ud / 4u][ud % 4u];
        off += (rem % size) * p.strides1[ud / 4u][ud % 4u];
        rem /= size;
    }
    return off;
}

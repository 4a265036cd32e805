// Shared by the elementwise kernels: parameters and strided indexing.
//
// A thread handles output element `t` (row-major over `shape`). Operand k
// (0, 1 or 2) reads element `offset_k(t)` of its buffer:
// `offsets[k] + sum_d index_d(t) * strides_k[d]`, in elements. Strides are
// two's-complement (negative for reversed views) and wrap in u32 arithmetic
// to the right index; 0 broadcasts. With CONTIGUOUS every operand is dense
// with the output's shape, and the offset is just `offsets[k] + t`.

const WG: u32 = 256u;
const CONTIGUOUS: bool = {{CONTIGUOUS}};

struct Params {
    // n (elements), ndim, extra0, extra1
    head: vec4<u32>,
    offsets: vec4<u32>,
    shape: array<vec4<u32>, 2>,
    strides0: array<vec4<u32>, 2>,
    strides1: array<vec4<u32>, 2>,
    strides2: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

fn offset_of(t: u32, k: u32) -> u32 {
    if CONTIGUOUS {
        return p.offsets[k] + t;
    }
    var rem = t;
    var off = p.offsets[k];
    for (var d = i32(p.head.y) - 1; d >= 0; d--) {
        let ud = u32(d);
        let size = p.shape[ud / 4u][ud % 4u];
        var stride: u32;
        switch k {
            case 0u: { stride = p.strides0[ud / 4u][ud % 4u]; }
            case 1u: { stride = p.strides1[ud / 4u][ud % 4u]; }
            default: { stride = p.strides2[ud / 4u][ud % 4u]; }
        }
        off += (rem % size) * stride;
        rem /= size;
    }
    return off;
}

// An index read for a gather: negative counts from the end of the axis
// (length p.head.w), then clamped into it (NumPy take, mode="clip").
fn gather_index(i: i32) -> u32 {
    let len = i32(p.head.w);
    var j = i;
    if j < 0 {
        j += len;
    }
    return u32(clamp(j, 0, len - 1));
}

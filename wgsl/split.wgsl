// Split along an axis: one dispatch writes every live part, each a dense
// output of its own (up to 7: WebGPU guarantees 8 storage buffers per
// stage, the input takes one). The input is read through its element
// strides (wrapping u32 arithmetic: negative strides work); the kernel
// moves bits.
//
// A thread owns one output word: thread t belongs to part j when
// word_start_j <= t < word_start_{j+1}; its elements are part j's
// EPW * (t - word_start_j) + k, unravelled over the input's shape with
// the axis of part j's length, read at base_j + sum index_d * stride_d
// (base_j: the input's offset plus the part's start along the axis).
//
// Parameters, as 64 words: total words, ndim, axis, -, shape[8],
// strides[8], then per part: base, length along the axis, word start,
// elements.
//
// Generated per specialisation (placeholders in double braces):
//   NOUT       parts in the dispatch
//   OUT_BYTES  4, 2 or 1 (packed: EPW = 4 / OUT_BYTES elements a word)
//   BINDINGS   out0 .. out{NOUT-1}
//   STORE      statements of fn store(j, i, v): word i of part j

const WG: u32 = 256u;
const NOUT: u32 = {{NOUT}}u;
const OUT_BYTES: u32 = {{OUT_BYTES}}u;
const EPW: u32 = 4u / OUT_BYTES;

struct Params {
    w: array<vec4<u32>, 16>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
{{BINDINGS}}

fn w(i: u32) -> u32 {
    return p.w[i >> 2u][i & 3u];
}

fn store(j: u32, i: u32, v: u32) {
{{STORE}}
}

// The bits of element e of part j (the low 8 or 16 for packed dtypes).
fn element(j: u32, e: u32) -> u32 {
    let nd = w(1u);
    let axis = w(2u);
    let part = 20u + 4u * j;
    var off = w(part);
    var rem = e;
    for (var d = nd; d > 0u; d--) {
        var size = w(3u + d);
        if d - 1u == axis {
            size = w(part + 1u);
        }
        off += (rem % size) * w(11u + d);
        rem /= size;
    }
    if OUT_BYTES == 4u {
        return src[off];
    }
    if OUT_BYTES == 2u {
        return half_word(src[off >> 1u], off);
    }
    return byte_of(src[off >> 2u], off);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * WG;
    if t >= w(0u) {
        return;
    }
    var j = 0u;
    for (var k = 1u; k < NOUT; k++) {
        if t >= w(22u + 4u * k) {
            j = k;
        }
    }
    let i = t - w(22u + 4u * j);
    if OUT_BYTES == 4u {
        store(j, i, element(j, i));
        return;
    }
    let n = w(23u + 4u * j);
    var word = 0u;
    for (var k = 0u; k < EPW; k++) {
        let e = EPW * i + k;
        if e < n {
            word |= element(j, e) << (k * 8u * OUT_BYTES);
        }
    }
    store(j, i, word);
}

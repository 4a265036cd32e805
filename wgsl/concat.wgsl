// Concatenation along an axis: one dispatch writes the output elements of a
// group of up to 7 inputs (WebGPU guarantees 8 storage buffers per stage:
// the inputs and the output). Inputs are read through their own element
// strides, so transposed or sliced inputs need no copy. Every input has the
// output's dtype (the op casts first where dtypes differ); the kernel moves
// bits.
//
// Output element e, at axis index a = (e / inner) % len, belongs to input j
// when start_j <= a < start_{j+1}; it reads element
// base_j + sum_d index_d(e) * stride_j[d] (base_j already subtracts
// start_j * stride_j[axis]; all in wrapping u32 arithmetic, so negative
// strides work). Elements outside [group start, group end) along the axis
// belong to another dispatch.
//
// Parameters, as 64 words: n, ndim, inner, len, group start, group end,
// shape[ndim], then per input: base, start, strides[ndim].
//
// Generated per specialisation (placeholders in double braces):
//   NIN        inputs in the group
//   OUT_BYTES  4, 2 or 1 (packed: a thread owns one output word, 4 /
//              OUT_BYTES elements); 8-byte dtypes come as pairs of words
//              (an extra axis of length 2)
//   BINDINGS   in0 .. in{NIN-1}, out
//   LOAD_WORD  statements of fn load_word(j, i): word i of input j

const WG: u32 = 256u;
const NIN: u32 = {{NIN}}u;
const OUT_BYTES: u32 = {{OUT_BYTES}}u;
// Elements per output word.
const EPW: u32 = 4u / OUT_BYTES;

struct Params {
    w: array<vec4<u32>, 16>,
}

@group(0) @binding(0) var<uniform> p: Params;
{{BINDINGS}}

fn w(i: u32) -> u32 {
    return p.w[i >> 2u][i & 3u];
}

fn load_word(j: u32, i: u32) -> u32 {
{{LOAD_WORD}}
}

// Whether output element e belongs to this dispatch's group.
fn in_group(e: u32) -> bool {
    let a = (e / w(2u)) % w(3u);
    return a >= w(4u) && a < w(5u);
}

// The bits of output element e (the low 8 or 16 for packed dtypes).
fn element(e: u32) -> u32 {
    let nd = w(1u);
    let a = (e / w(2u)) % w(3u);
    let per = nd + 2u;
    let first = 6u + nd;
    var j = 0u;
    for (var k = 1u; k < NIN; k++) {
        if a >= w(first + k * per + 1u) {
            j = k;
        }
    }
    let base = first + j * per;
    var off = w(base);
    var rem = e;
    for (var d = nd; d > 0u; d--) {
        let size = w(5u + d);
        off += (rem % size) * w(base + 1u + d);
        rem /= size;
    }
    if OUT_BYTES == 4u {
        return load_word(j, off);
    }
    if OUT_BYTES == 2u {
        return half_word(load_word(j, off >> 1u), off);
    }
    return byte_of(load_word(j, off >> 2u), off);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * WG;
    let n = w(0u);
    if OUT_BYTES == 4u {
        if t >= n || !in_group(t) {
            return;
        }
        out[t] = element(t);
    } else {
        let e = EPW * t;
        if e >= n {
            return;
        }
        // Elements of this word owned by another group keep what that
        // dispatch wrote: wgpu puts a barrier between two dispatches that
        // use one buffer as read-write storage (no wgpu-hal back end counts
        // STORAGE_READ_WRITE among its ordered uses), so the earlier
        // dispatch's writes are visible here.
        let width = 8u * OUT_BYTES;
        let ones = select(0xffffu, 0xffu, OUT_BYTES == 1u);
        var word = 0u;
        var keep = 0u;
        var mine = false;
        for (var k = 0u; k < EPW; k++) {
            if e + k < n {
                if in_group(e + k) {
                    word |= element(e + k) << (k * width);
                    mine = true;
                } else {
                    keep |= ones << (k * width);
                }
            }
        }
        if !mine {
            return;
        }
        if keep != 0u {
            word |= out[t] & keep;
        }
        out[t] = word;
    }
}

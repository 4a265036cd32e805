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
//   OUT_BYTES  4, or 2 (a thread owns one output word, two elements)
//   BINDINGS   in0 .. in{NIN-1}, out
//   LOAD_WORD  statements of fn load_word(j, i): word i of input j

const WG: u32 = 256u;
const NIN: u32 = {{NIN}}u;
const OUT_BYTES: u32 = {{OUT_BYTES}}u;

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

// The bits of output element e (low 16 bits for 2-byte dtypes).
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
    return (load_word(j, off >> 1u) >> ((off & 1u) * 16u)) & 0xffffu;
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
        let e = 2u * t;
        if e >= n {
            return;
        }
        let lo_in = in_group(e);
        let hi_in = e + 1u < n && in_group(e + 1u);
        if !lo_in && !hi_in {
            return;
        }
        // A half owned by another group keeps what that dispatch wrote:
        // wgpu puts a barrier between two dispatches that use one buffer
        // as read-write storage (no wgpu-hal back end counts
        // STORAGE_READ_WRITE among its ordered uses), so the earlier
        // dispatch's writes are visible here.
        var word = 0u;
        if !lo_in || (!hi_in && e + 1u < n) {
            word = out[t];
        }
        if lo_in {
            word = (word & 0xffff0000u) | element(e);
        }
        if hi_in {
            word = (word & 0xffffu) | (element(e + 1u) << 16u);
        }
        out[t] = word;
    }
}

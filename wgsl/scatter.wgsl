// Scatters along one axis: out (zeroed first) gets, for every element u of
// the updates' shape U, `out[coords(u) with axis -> index(u)] += update(u)`
// (scatter_add) or `= update(u)` (put_along_axis: one of the duplicates
// wins, atomicStore). Duplicate indices of an add accumulate: i32 and u32 with atomicAdd
// (two's complement: one u32 add serves both), f32 with a compare-exchange
// loop on the word's bits (the order of additions is unspecified, so f32
// sums agree with a sequential sum to rounding, not bit for bit). A
// negative index counts from the end; out-of-range ones are clamped (as
// take).
//
// A slice write (slice_update) is the same walk without indices: INDEX
// returns 0, the axis has length 1, no zeroing pass, and each update is
// stored at `out offset + coords(u) . out strides` (strides of the slice
// in its array, negative for a negative step). Packed elements (1 and 2
// bytes) are read with half_word/byte_of (convert.wgsl) and merged into
// their word with atomicAnd and atomicOr (kernels/bits.rs store_element),
// so two threads writing lanes of one word do not race; 8-byte elements
// are two word stores.
//
//   PASS 0  a thread per output word: zero it
//   PASS 1  a thread per update: add or store it
//
// A compare-exchange loop retries only while another invocation changed
// the word in between, so it runs at most as many times as invocations
// contend for one word at once: far below llvmpipe's 65535 iterations.
//
// Generated per specialisation (placeholders in double braces):
//   INDEX  statements of fn index(i) -> i32: index element i, as i32 (u32
//          indices past i32::MAX saturate, and clamp to the end)
//   ADD    statements of fn add(q, i): add (or store) update element i to
//          out element q (a word, but for the packed and 8-byte stores)

const WG: u32 = 256u;

struct Params {
    // updates' element count, ndim, axis length, output stride of the axis
    head: vec4<u32>,
    // index offset, update offset, output words to zero, output offset
    misc: vec4<u32>,
    shape: array<vec4<u32>, 2>,
    index_strides: array<vec4<u32>, 2>,
    update_strides: array<vec4<u32>, 2>,
    // output strides with 0 on the axis
    out_strides: array<vec4<u32>, 2>,
    // the pass, -, -, -
    stage: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> indices: array<u32>;
@group(0) @binding(2) var<storage, read> updates: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<atomic<u32>>;

fn index(i: u32) -> i32 {
{{INDEX}}
}

fn add(q: u32, i: u32) {
{{ADD}}
}

@compute @workgroup_size(256)
fn main(id: Ids) {
    let u = invocation_index(id, WG);
    if p.stage.x == 0u {
        if u < p.misc.z {
            atomicStore(&out[u], 0u);
        }
        return;
    }
    if u >= p.head.x {
        return;
    }
    let nd = p.head.y;
    let len = i32(p.head.z);
    var j = index(p.misc.x + unravel(u, nd, p.shape, p.index_strides));
    if j < 0 {
        j += len;
    }
    j = clamp(j, 0, len - 1);
    let q = p.misc.w + unravel(u, nd, p.shape, p.out_strides) + u32(j) * p.head.w;
    add(q, p.misc.y + unravel(u, nd, p.shape, p.update_strides));
}

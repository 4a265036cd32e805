// Stable ascending sort of each row (all elements along one axis): values
// and their original indices (sort, argsort, partition, argpartition).
//
// Each element becomes a pair (key, index): the key's unsigned order is
// NumPy's ascending order (wgsl/order.wgsl: floats by value, -0 == +0, NaN
// last), and pairs compare as (key, index), so the network's result is the
// stable order. Rows are padded to P = next power of two of the length with
// (0xffffffff, 0xffffffff), which sorts after every real pair.
//
// Bitonic sort (Batcher 1968) over the virtual array of rows * P pairs:
// stage k (2, 4, ..., P) merges runs of k, step j (k/2, ..., 1) compares
// element g with g + j, ascending where (g & k) == 0 or k == P (so every
// row ends ascending and rows of P < BLOCK share a block). Steps with
// j < BLOCK run inside a workgroup on a block of BLOCK = 1024 pairs in
// workgroup memory; steps with j >= BLOCK run one thread per pair on
// `work` in global memory (one dispatch each). Passes:
//   PASS 0  P <= BLOCK: load, every stage in workgroup memory, write the
//           outputs (one dispatch for the whole sort)
//   PASS 1  P > BLOCK: load, stages up to BLOCK, into `work`
//   PASS 2  one global step (k, j), a thread per pair, on `work`
//   PASS 3  the steps j < BLOCK of stage k, a workgroup per block, from
//           `work` back to `work`, or to the outputs when k == P
// No invocation loops more than about 120 times (llvmpipe stops an
// invocation after 65535 loop iterations).
//
// Outputs are dense [rows, len] (row-major over the other axes): `vals`
// holds the input's bits at the sorted index (so -0 and NaN payloads
// survive), `idx` the index (u32).
//
// Generated per specialisation (placeholders in double braces):
//   KEY        statements of fn key(i): the order key of input element i
//   BITS       statements of fn bits(i): its raw bits (low 16 for 2-byte)
//   VALS_TYPE  u32, or atomic<u32> for 2-byte dtypes (rows may share a word)
//   STORE      statements of fn store(q, v): output value q gets bits v

const WG: u32 = 256u;
const BLOCK: u32 = 1024u;
const PAD: vec2<u32> = vec2<u32>(0xffffffffu, 0xffffffffu);

struct Params {
    // rows, len, outer ndim, P
    head: vec4<u32>,
    // input offset, input stride along the axis, pass, -
    misc: vec4<u32>,
    outer_shape: array<vec4<u32>, 2>,
    outer_strides: array<vec4<u32>, 2>,
    // stage k, step j, -, -
    step: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> work: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> vals: array<{{VALS_TYPE}}>;
@group(0) @binding(4) var<storage, read_write> idx: array<u32>;

var<workgroup> s: array<vec2<u32>, 1024>;

fn key(i: u32) -> u32 {
{{KEY}}
}

fn bits(i: u32) -> u32 {
{{BITS}}
}

fn store(q: u32, v: u32) {
{{STORE}}
}

// Input element index of position r of row o.
fn source(o: u32, r: u32) -> u32 {
    return p.misc.x + unravel(o, p.head.z, p.outer_shape, p.outer_strides) + r * p.misc.y;
}

// Whether pair a goes before pair b.
fn before(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.x < b.x || (a.x == b.x && a.y < b.y);
}

// Whether the comparison at global element g of stage k is ascending.
fn ascending(g: u32, k: u32) -> bool {
    return (g & k) == 0u || k >= p.head.w;
}

// Pair q's (0 .. rows*P/2) lower element at step j.
fn lower(q: u32, j: u32) -> u32 {
    return (q / j) * 2u * j + q % j;
}

// The pair at global element g, straight from the input.
fn load(g: u32) -> vec2<u32> {
    let o = g / p.head.w;
    let r = g % p.head.w;
    if o >= p.head.x || r >= p.head.y {
        return PAD;
    }
    return vec2<u32>(key(source(o, r)), r);
}

// The steps j = j0, j0/2, ..., 1 of stage k on the block at `first`, in
// workgroup memory; each thread compares two pairs per step.
fn block_steps(t: u32, first: u32, k: u32, j0: u32) {
    for (var j = j0; j > 0u; j >>= 1u) {
        for (var h = 0u; h < 2u; h++) {
            let lo = lower(t + h * WG, j);
            let a = s[lo];
            let b = s[lo + j];
            if before(b, a) == ascending(first + lo, k) {
                s[lo] = b;
                s[lo + j] = a;
            }
        }
        workgroupBarrier();
    }
}

// Write the block at `first` to the outputs.
fn write_out(t: u32, first: u32) {
    for (var h = 0u; h < BLOCK / WG; h++) {
        let e = h * WG + t;
        let g = first + e;
        let o = g / p.head.w;
        let r = g % p.head.w;
        if o < p.head.x && r < p.head.y {
            let q = o * p.head.y + r;
            let i = s[e].y;
            idx[q] = i;
            store(q, bits(source(o, i)));
        }
    }
}

@compute @workgroup_size(256)
fn main(id: Ids) {
    let pass_ = p.misc.z;
    let big = p.head.w;
    let total = p.head.x * big;
    let t = id.lid.x;
    if pass_ == 2u {
        let q = invocation_index(id, WG);
        let k = p.step.x;
        let j = p.step.y;
        if q < total / 2u {
            let lo = lower(q, j);
            let a = work[lo];
            let b = work[lo + j];
            if before(b, a) == ascending(lo, k) {
                work[lo] = b;
                work[lo + j] = a;
            }
        }
        return;
    }
    // Passes 0, 1, 3: a workgroup per block. The block index is uniform, so
    // the early return keeps the barriers in uniform control flow.
    let first = (group_index(id)) * BLOCK;
    if first >= total {
        return;
    }
    for (var h = 0u; h < BLOCK / WG; h++) {
        let e = h * WG + t;
        if pass_ == 3u {
            s[e] = work[first + e];
        } else {
            s[e] = load(first + e);
        }
    }
    workgroupBarrier();
    if pass_ == 3u {
        let k = p.step.x;
        block_steps(t, first, k, BLOCK / 2u);
        if k >= big {
            write_out(t, first);
            return;
        }
    } else {
        for (var k = 2u; k <= min(big, BLOCK); k <<= 1u) {
            block_steps(t, first, k, k / 2u);
        }
        if pass_ == 0u {
            write_out(t, first);
            return;
        }
    }
    for (var h = 0u; h < BLOCK / WG; h++) {
        let e = h * WG + t;
        work[first + e] = s[e];
    }
}

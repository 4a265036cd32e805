// Scans (cumsum, cumprod, cummax, cummin) along one axis: row `o` is the
// `len` elements at `in_base(o) + r * in_stride`, written to
// `out_base(o) + r * out_stride` (out dense in the input's shape).
// Walking logical positions q = 0, 1, ...: q is physical r = q, or
// r = len - 1 - q when reversed; an exclusive scan writes at q the
// combination of the elements before q (the identity first).
//
// Reduce-then-scan (Merrill & Garland, "Single-pass Parallel Prefix Scan
// with Decoupled Look-back", 2016, section 3: the three-kernel baseline),
// blocks of BLOCK = 1024 elements, 4 per thread:
//   PASS 1  a workgroup per block: the block's total, into `totals`
//   PASS 2  a workgroup per row: exclusive scan of the row's block totals,
//           in place (each thread walks about blocks / 256 of them)
//   PASS 3  a workgroup per block: load the block into workgroup memory,
//           each thread folds its 4 consecutive elements, a Hillis-Steele
//           scan of the 256 thread totals, then each thread rewrites its 4
//           from the block's prefix (from pass 2) and its own; store
//   PASS 0  a thread per row, sequential (short rows)
// A row of one block runs pass 3 alone. The input is read twice and the
// output written once, in its own dtype: f16 and bf16 accumulate in f32 and
// are rounded once, at the store. No invocation loops more than about
// blocks / 128 + 100 times (pass 0: 2 len, len <= 64): llvmpipe stops a
// shader after 65535 loop iterations in one invocation.
//
// The pass is a parameter (one pipeline serves all four). Generated per
// specialisation (placeholders in double braces):
//   ACC, INIT, LIFT, COMBINE  the accumulator, as the reduce kernel's
//   CT                        the compute type (f32, i32, u32)
//   LOAD      statements of fn load(i) -> CT: input element i
//   OUT_TYPE  u32, or atomic<u32> for 2-byte outputs (rows share words)
//   STORE     statements of fn store(q, a: Acc): output element q

const WG: u32 = 256u;
const PER: u32 = 4u;
const BLOCK: u32 = 1024u;

struct Params {
    // rows, len, outer ndim, blocks per row
    head: vec4<u32>,
    // input offset, input axis stride, output axis stride,
    // flags (1: reverse, 2: exclusive)
    misc: vec4<u32>,
    outer_shape: array<vec4<u32>, 2>,
    in_strides: array<vec4<u32>, 2>,
    out_strides: array<vec4<u32>, 2>,
    // the pass (0 to 3), -, -, -
    stage: vec4<u32>,
}

struct Acc {
{{ACC}}
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> totals: array<Acc>;
@group(0) @binding(3) var<storage, read_write> out: array<{{OUT_TYPE}}>;

var<workgroup> tile: array<Acc, 1024>;
var<workgroup> part: array<Acc, 256>;

fn load(i: u32) -> {{CT}} {
{{LOAD}}
}

fn lift(x: {{CT}}, r: u32) -> Acc {
    return {{LIFT}};
}

fn combine(a: Acc, b: Acc) -> Acc {
{{COMBINE}}
}

fn store(q: u32, a: Acc) {
{{STORE}}
}

fn identity() -> Acc {
    return {{INIT}};
}

fn exclusive() -> bool {
    return (p.misc.w & 2u) != 0u;
}

// Input element at logical position q of the row starting at `base`.
fn element(base: u32, q: u32) -> Acc {
    var r = q;
    if (p.misc.w & 1u) != 0u {
        r = p.head.y - 1u - q;
    }
    return lift(load(base + r * p.misc.y), r);
}

// Output element index of logical position q of the row starting at `base`.
fn dest(base: u32, q: u32) -> u32 {
    var r = q;
    if (p.misc.w & 1u) != 0u {
        r = p.head.y - 1u - q;
    }
    return base + r * p.misc.z;
}

fn in_base(o: u32) -> u32 {
    return p.misc.x + unravel(o, p.head.z, p.outer_shape, p.in_strides);
}

fn out_base(o: u32) -> u32 {
    return unravel(o, p.head.z, p.outer_shape, p.out_strides);
}

// Inclusive scan of `part` across the workgroup: 8 steps.
fn scan_part(t: u32) {
    for (var s = 1u; s < WG; s <<= 1u) {
        var v = part[t];
        if t >= s {
            v = combine(part[t - s], v);
        }
        workgroupBarrier();
        part[t] = v;
        workgroupBarrier();
    }
}

@compute @workgroup_size(256)
fn main(id: Ids) {
    let rows = p.head.x;
    let len = p.head.y;
    let blocks = p.head.w;
    let t = id.lid.x;
    let pass_ = p.stage.x;
    if pass_ == 0u {
        // No early return: the barriers of the other passes stay in
        // uniform control flow for the uniformity analysis.
        let o = invocation_index(id, WG);
        if o < rows {
            let bi = in_base(o);
            let bo = out_base(o);
            var acc = identity();
            for (var q = 0u; q < len; q++) {
                let v = element(bi, q);
                if exclusive() {
                    store(dest(bo, q), acc);
                    acc = combine(acc, v);
                } else {
                    acc = combine(acc, v);
                    store(dest(bo, q), acc);
                }
            }
        }
        return;
    }
    if pass_ == 2u {
        let o = group_index(id);
        if o >= rows {
            return;
        }
        let per = (blocks + WG - 1u) / WG;
        let start = o * blocks + min(t * per, blocks);
        let end = o * blocks + min(t * per + per, blocks);
        var acc = identity();
        for (var i = start; i < end; i++) {
            acc = combine(acc, totals[i]);
        }
        part[t] = acc;
        workgroupBarrier();
        scan_part(t);
        var run = identity();
        if t > 0u {
            run = part[t - 1u];
        }
        for (var i = start; i < end; i++) {
            let v = totals[i];
            totals[i] = run;
            run = combine(run, v);
        }
        return;
    }
    // Passes 1 and 3: a workgroup per block.
    let w = group_index(id);
    if w >= rows * blocks {
        return;
    }
    let o = w / blocks;
    let first = (w % blocks) * BLOCK;
    let bi = in_base(o);
    if pass_ == 1u {
        var acc = identity();
        for (var j = 0u; j < PER; j++) {
            let q = first + j * WG + t;
            if q < len {
                acc = combine(acc, element(bi, q));
            }
        }
        part[t] = acc;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if t < s {
                part[t] = combine(part[t], part[t + s]);
            }
            workgroupBarrier();
        }
        if t == 0u {
            totals[w] = part[0];
        }
        return;
    }
    for (var j = 0u; j < PER; j++) {
        let k = j * WG + t;
        var v = identity();
        if first + k < len {
            v = element(bi, first + k);
        }
        tile[k] = v;
    }
    workgroupBarrier();
    var acc = identity();
    for (var j = 0u; j < PER; j++) {
        acc = combine(acc, tile[t * PER + j]);
    }
    part[t] = acc;
    workgroupBarrier();
    scan_part(t);
    var run = identity();
    if blocks > 1u {
        run = totals[w];
    }
    if t > 0u {
        run = combine(run, part[t - 1u]);
    }
    for (var j = 0u; j < PER; j++) {
        let k = t * PER + j;
        let v = tile[k];
        if exclusive() {
            tile[k] = run;
            run = combine(run, v);
        } else {
            run = combine(run, v);
            tile[k] = run;
        }
    }
    workgroupBarrier();
    let bo = out_base(o);
    for (var j = 0u; j < PER; j++) {
        let k = j * WG + t;
        if first + k < len {
            store(dest(bo, first + k), tile[k]);
        }
    }
}

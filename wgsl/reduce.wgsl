// Reductions over a set of axes. Output element `o` reduces the R input
// elements at `outer_offset(o) + inner_offset(r)`, r < R (kept axes and
// reduced axes, each read through element strides).
//
// ROW: one workgroup per output: each thread folds a strided share of the R
// elements, then a shared-memory tree combines the 256 partial results (so
// a sum of 10^7 ones is exact). Otherwise one thread per output folds all R
// elements in order, in blocks (used when R is small, and on software
// adapters when there are enough outputs to keep every core busy: there a
// workgroup barrier costs more than the loads it orders).
//
// Generated per specialisation (placeholders in double braces):
//   ACC      fields of struct Acc
//   INIT     the identity Acc
//   LIFT     an Acc from one element x (compute type CT) at reduced index r
//   COMBINE  statements of fn combine(a: Acc, b: Acc) -> Acc
//   FINAL    statements writing output o from `acc` (out0, out1; an f64
//            output as two words)
//   BINDINGS, LOAD as in the elementwise kernel.
//   ELEMENT  statements returning element r of output o's reduced set
//            (`base` is outer_offset(o)): a load, or with a fused
//            elementwise prologue (kernels::reduce::prologue) the
//            prologue's value there, computed from its own loads
//   PROLOGUE_PARAMS  the prologue's parameter words (`w`), or nothing

const WG: u32 = 256u;
const ROW: bool = {{ROW}};

struct Params {
    // n_out, R, outer ndim, inner ndim
    head: vec4<u32>,
    // input offset, ddof, -, -
    misc: vec4<u32>,
    outer_shape: array<vec4<u32>, 2>,
    outer_strides: array<vec4<u32>, 2>,
    inner_shape: array<vec4<u32>, 2>,
    inner_strides: array<vec4<u32>, 2>,
{{PROLOGUE_PARAMS}}
}

@group(0) @binding(0) var<uniform> p: Params;
{{BINDINGS}}

struct Acc {
{{ACC}}
}

fn load(i: u32) -> {{CT}} {
{{LOAD}}
}

fn element(o: u32, base: u32, r: u32) -> {{CT}} {
{{ELEMENT}}
}

fn lift(x: {{CT}}, r: u32) -> Acc {
    return {{LIFT}};
}

fn combine(a: Acc, b: Acc) -> Acc {
{{COMBINE}}
}

fn outer_offset(o: u32) -> u32 {
    return p.misc.x + unravel(o, p.head.z, p.outer_shape, p.outer_strides);
}

fn inner_offset(r: u32) -> u32 {
    // One reduced axis (the common case, after merging): no unravelling.
    if p.head.w == 1u {
        return r * p.inner_strides[0][0];
    }
    return unravel(r, p.head.w, p.inner_shape, p.inner_strides);
}

// FINAL declares what it needs of the element count (p.head.y) and ddof
// (p.misc.y), in its float type.
fn finish(o: u32, acc: Acc) {
{{FINAL}}
}

var<workgroup> partial: array<Acc, 256>;

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let n_out = p.head.x;
    let big_r = p.head.y;
    if ROW {
        let o = wid.x + wid.y * nwg.x;
        let oc = min(o, n_out - 1u);
        let base = outer_offset(oc);
        var acc = {{INIT}};
        // Eight elements per iteration keeps the loop count far below
        // llvmpipe's limit (see unravel): 2^16 / 2 * 8 * 256 elements per row.
        var r = lid.x;
        for (; r + 7u * WG < big_r; r += 8u * WG) {
            acc = combine(acc, lift(element(oc, base, r), r));
            acc = combine(acc, lift(element(oc, base, r + WG), r + WG));
            acc = combine(acc, lift(element(oc, base, r + 2u * WG), r + 2u * WG));
            acc = combine(acc, lift(element(oc, base, r + 3u * WG), r + 3u * WG));
            acc = combine(acc, lift(element(oc, base, r + 4u * WG), r + 4u * WG));
            acc = combine(acc, lift(element(oc, base, r + 5u * WG), r + 5u * WG));
            acc = combine(acc, lift(element(oc, base, r + 6u * WG), r + 6u * WG));
            acc = combine(acc, lift(element(oc, base, r + 7u * WG), r + 7u * WG));
        }
        for (; r < big_r; r += WG) {
            acc = combine(acc, lift(element(oc, base, r), r));
        }
        partial[lid.x] = acc;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if lid.x < s {
                partial[lid.x] = combine(partial[lid.x], partial[lid.x + s]);
            }
            workgroupBarrier();
        }
        if lid.x == 0u && o < n_out {
            finish(o, partial[0]);
        }
    } else {
        let o = gid.x + gid.y * nwg.x * WG;
        if o >= n_out {
            return;
        }
        let base = outer_offset(o);
        // Blocks of 256 folded in order, then combined: the rounding error
        // of a sum grows with 256 + R / 256 terms, not R (every iteration
        // of both loops counts towards llvmpipe's limit: R stays below it).
        var acc = {{INIT}};
        for (var r0 = 0u; r0 < big_r; r0 += WG) {
            var block = {{INIT}};
            let end = min(r0 + WG, big_r);
            for (var r = r0; r < end; r++) {
                block = combine(block, lift(element(o, base, r), r));
            }
            acc = combine(acc, block);
        }
        finish(o, acc);
    }
}

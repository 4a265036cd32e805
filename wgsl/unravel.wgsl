// Shared by the reduce, scan, scatter, sort and topk kernels.

// An invocation's ids, the one entry-point argument of the scan, scatter,
// sort and topk kernels: a 1-D workgroup in a 2-D grid of workgroups (a
// dispatch's x count is capped at 65535).
struct Ids {
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
}

// The workgroup's index in the grid, row-major.
fn group_index(id: Ids) -> u32 {
    return id.wid.x + id.wid.y * id.nwg.x;
}

// The invocation's index in the grid, for workgroups of `wg` invocations.
fn invocation_index(id: Ids, wg: u32) -> u32 {
    return id.gid.x + id.gid.y * id.nwg.x * wg;
}

// `i` must be below the product of the `nd` sizes.

// Straight-line unravelling, no loop: llvmpipe (Mesa's software driver)
// stops any shader that runs more than 65535 loop iterations in one
// invocation (LP_MAX_TGSI_LOOP_ITERATIONS in gallivm), counting every loop,
// so per-element loops would cap the reduction length.
fn unravel(i: u32, nd: u32, shape: array<vec4<u32>, 2>, strides: array<vec4<u32>, 2>) -> u32 {
    var rem = i;
    var off = 0u;
    if nd > 7u { off += (rem % shape[1][3]) * strides[1][3]; rem /= shape[1][3]; }
    if nd > 6u { off += (rem % shape[1][2]) * strides[1][2]; rem /= shape[1][2]; }
    if nd > 5u { off += (rem % shape[1][1]) * strides[1][1]; rem /= shape[1][1]; }
    if nd > 4u { off += (rem % shape[1][0]) * strides[1][0]; rem /= shape[1][0]; }
    if nd > 3u { off += (rem % shape[0][3]) * strides[0][3]; rem /= shape[0][3]; }
    if nd > 2u { off += (rem % shape[0][2]) * strides[0][2]; rem /= shape[0][2]; }
    if nd > 1u { off += (rem % shape[0][1]) * strides[0][1]; rem /= shape[0][1]; }
    // The outermost index needs no modulo: callers pass i < the product.
    if nd > 0u { off += rem * strides[0][0]; }
    return off;
}

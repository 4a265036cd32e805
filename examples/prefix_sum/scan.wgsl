// An inclusive prefix sum (scan) of u32 in three passes, the way a user of
// wgpu writes one: each workgroup scans a block of 256 elements in
// workgroup memory (Hillis-Steele, a barrier between steps) and writes its
// block's total; one workgroup scans the block totals in place; every
// block then adds the total of the blocks before it. Up to 256 blocks:
// 65536 elements. u32 sums wrap, as Rust's wrapping_add does.

const WG: u32 = 256u;

// Set to false to drop the barriers: the race the harness must catch.
override barriers: bool = true;

var<workgroup> tile: array<u32, 256>;

@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<storage, read_write> block_sums: array<u32>;

fn sync() {
    if barriers {
        workgroupBarrier();
    }
}

// Inclusive scan of `tile` across the workgroup: log2(256) = 8 steps.
fn scan_tile(li: u32) {
    for (var offset = 1u; offset < WG; offset <<= 1u) {
        var v = 0u;
        if li >= offset {
            v = tile[li - offset];
        }
        sync();
        tile[li] += v;
        sync();
    }
}

@compute @workgroup_size(256)
fn scan_blocks(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let n = arrayLength(&x);
    tile[li] = select(0u, x[gid.x], gid.x < n);
    sync();
    scan_tile(li);
    if gid.x < n {
        y[gid.x] = tile[li];
    }
    if li == WG - 1u {
        block_sums[wid.x] = tile[li];
    }
}

@group(0) @binding(0) var<storage, read_write> sums: array<u32>;

@compute @workgroup_size(256)
fn scan_sums(@builtin(local_invocation_index) li: u32) {
    let n = arrayLength(&sums);
    tile[li] = select(0u, sums[li], li < n);
    sync();
    scan_tile(li);
    if li < n {
        sums[li] = tile[li];
    }
}

@group(0) @binding(0) var<storage, read> scanned_sums: array<u32>;

@compute @workgroup_size(256)
fn add_offsets(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    if wid.x > 0u && gid.x < arrayLength(&y) {
        y[gid.x] += scanned_sums[wid.x - 1u];
    }
}

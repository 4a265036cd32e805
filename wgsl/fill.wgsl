// Fill: every u32 word of the output gets `p.head.z` (the element's bits,
// repeated twice for 2-byte dtypes). `p.head.x` counts words.

@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = thread_index(gid, nwg);
    if t >= p.head.x {
        return;
    }
    dst[t] = p.head.z;
}

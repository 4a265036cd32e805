// Elementwise binary op with NumPy broadcasting (strided operands).
// Specialised by {{T}} (the element type) and {{OP}} (an expression in `a` and `b`).

@group(0) @binding(1) var<storage, read> lhs: array<{{T}}>;
@group(0) @binding(2) var<storage, read> rhs: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = thread_index(gid, nwg);
    if t >= p.n {
        return;
    }
    let a = lhs[offset0(t)];
    let b = rhs[offset1(t)];
    out[t] = {{OP}};
}

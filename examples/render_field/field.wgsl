// The application's render pipeline: a full-screen triangle whose fragment
// shader reads the field wgarray computed, straight from wgarray's buffer
// (one f32 per pixel, row-major [height, width], values in [0, 1]), and
// maps it to a colour.

@group(0) @binding(0) var<storage, read> field: array<f32>;
// x: width, y: height (pixels).
@group(0) @binding(1) var<uniform> size: vec4<u32>;

@vertex
fn vs_main(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    // (-1, -1), (3, -1), (-1, 3): one triangle covers the whole target.
    let x = f32(i32(i & 1u) * 4 - 1);
    let y = f32(i32(i >> 1u) * 4 - 1);
    return vec4<f32>(x, y, 0.0, 1.0);
}

// Blue through green to red (the example's `colour`, in f64 there).
fn colour(v: f32) -> vec3<f32> {
    let t = clamp(v, 0.0, 1.0);
    return vec3<f32>(t, 1.0 - abs(2.0 * t - 1.0), 1.0 - t);
}

@fragment
fn fs_main(@builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
    // Pixel centres are at .5; row 0 is the top of the image.
    let x = u32(p.x);
    let y = u32(p.y);
    let v = field[y * size.x + x];
    return vec4<f32>(colour(v), 1.0);
}

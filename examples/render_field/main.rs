//! An application with its own wgpu device computes a field with wgarray on
//! that device and draws it with its own render pipeline into a texture,
//! saved as a PNG: the field's buffer is bound straight into the fragment
//! shader (`Array::wgpu_buffer`), with no read-back between compute and
//! draw. Headless: runs on lavapipe (Mesa's software Vulkan).
//!
//! Run: `cargo run --example render_field -- field.png [WIDTH HEIGHT]`
//! (`WGARRAY_BACKEND=vulkan|gl` picks the application's backend).

mod render;

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(args.next().unwrap_or_else(|| "field.png".into()));
    let width: usize = args.next().map_or(Ok(320), |s| s.parse())?;
    let height: usize = args.next().map_or(Ok(200), |s| s.parse())?;
    let backend = match std::env::var(wgarray::BACKEND_ENV) {
        Ok(s) if !s.trim().is_empty() => Some(wgarray::parse_backend(&s)?),
        _ => None,
    };

    // The application's own adapter, device and queue.
    let app = render::App::new(backend)?;
    println!("application's adapter: {:?}", app.adapter.get_info().name);
    // wgarray on that device: no second device, no copy between them.
    let dev = wgarray::Device::from_wgpu(&app.adapter, app.device.clone(), app.queue.clone())?;
    let field = render::field(&dev, width, height)?;
    let pixels = render::draw(&app, &field)?;
    // Against the f64 field and colour map: unorm8 rounding and f32.
    let mut worst = 0.0f64;
    for (i, p) in pixels.chunks_exact(4).enumerate() {
        let want = render::colour(render::field_at(i % width, i / width, width, height));
        for c in 0..3 {
            worst = worst.max((p[c] as f64 - want[c] * 255.0).abs());
        }
    }
    println!("largest channel error against the f64 reference: {worst:.2} of 255");
    println!(
        "drew a {width}x{height} field; wgarray's active memory {} bytes",
        dev.active_memory()
    );

    let file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let mut png = png::Encoder::new(file, width as u32, height as u32);
    png.set_color(png::ColorType::Rgba);
    png.set_depth(png::BitDepth::Eight);
    png.write_header()?.write_image_data(&pixels)?;
    println!("wrote {}", path.display());
    Ok(())
}

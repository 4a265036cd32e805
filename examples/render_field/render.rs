//! The example's core, shared with `tests/interop.rs`: an application that
//! owns its wgpu device, computes a field with wgarray on that device, and
//! draws it with its own render pipeline, the field's buffer bound straight
//! into the fragment shader (no read-back between compute and draw).

use wgarray::wgpu;
use wgarray::{Array, DType, Device};

/// The fragment shader's colour map and the field's layout: one f32 per
/// pixel, row-major `[height, width]`, values in `[0, 1]`.
pub const SHADER: &str = include_str!("field.wgsl");

/// The application's own wgpu objects, made as any wgpu program makes them.
pub struct App {
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
}

impl App {
    /// An adapter of `backend` (any if `None`) and a device with its
    /// limits and no optional feature: the application's choice, not
    /// wgarray's.
    pub fn new(backend: Option<wgpu::Backend>) -> Result<App, String> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = backend.map_or(wgpu::Backends::all(), wgpu::Backends::from);
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(instance.request_adapter(&Default::default()))
            .map_err(|e| format!("no adapter: {e}"))?;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("the application's device"),
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .map_err(|e| format!("request_device: {e}"))?;
        Ok(App {
            adapter,
            device,
            queue,
        })
    }
}

/// The field at pixel `(x, y)` of a `width x height` image, in f64: a wave
/// under a Gaussian bump, mapped to `[0, 1]`. The reference for
/// [`field`], which computes the same in f32 with arrays.
pub fn field_at(x: usize, y: usize, width: usize, height: usize) -> f64 {
    let u = x as f64 / width as f64;
    let v = y as f64 / height as f64;
    let wave = (u * 12.0).sin() * (v * 8.0).cos();
    let bump = (-((u - 0.5).powi(2) + (v - 0.5).powi(2)) * 6.0).exp();
    0.5 + 0.5 * wave * bump
}

/// [`field_at`] for every pixel, as a lazy `[height, width]` f32 array on
/// `dev`: two `arange`s broadcast against each other; one fused kernel at
/// eval.
pub fn field(dev: &Device, width: usize, height: usize) -> wgarray::Result<Array> {
    let u = (Array::arange(0.0, width as f64, 1.0, DType::F32, dev)? / width as f64)?
        .reshape(&[1, width])?;
    let v = (Array::arange(0.0, height as f64, 1.0, DType::F32, dev)? / height as f64)?
        .reshape(&[height, 1])?;
    let wave = ((&u * 12.0)?.sin()? * (&v * 8.0)?.cos()?)?;
    let du = (&u - 0.5)?.square()?;
    let dv = (&v - 0.5)?.square()?;
    let bump = ((&du + &dv)? * -6.0)?.exp()?;
    (&(&wave * &bump)? * 0.5)? + 0.5
}

/// The colour map, in f64 (the shader's `colour`): blue through green to
/// red, each channel in `[0, 1]`.
pub fn colour(v: f64) -> [f64; 3] {
    let v = v.clamp(0.0, 1.0);
    [v, 1.0 - (2.0 * v - 1.0).abs(), 1.0 - v]
}

/// Draw `field` (an evaluated or pending `[height, width]` f32 array on
/// the application's device) into a new `Rgba8Unorm` texture with the
/// application's own render pipeline, the field's buffer bound as a
/// read-only storage buffer of the fragment stage; returns the texture's
/// pixels, row-major RGBA, read back after the draw.
pub fn draw(app: &App, field: &Array) -> Result<Vec<u8>, String> {
    let [height, width] = field.shape() else {
        return Err(format!("a [height, width] field, not {:?}", field.shape()));
    };
    let (width, height) = (*width as u32, *height as u32);
    // Evaluates the field (one submission on the application's queue) and
    // lends its buffer: work submitted below sees its values.
    let view = field.wgpu_buffer().map_err(|e| e.to_string())?;
    let d = &app.device;
    let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("field"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let layout = d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("field"),
        entries: &[
            wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::FRAGMENT,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: true },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            },
            wgpu::BindGroupLayoutEntry {
                binding: 1,
                visibility: wgpu::ShaderStages::FRAGMENT,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            },
        ],
    });
    let size = wgpu::util::DeviceExt::create_buffer_init(
        d,
        &wgpu::util::BufferInitDescriptor {
            label: Some("field size"),
            contents: bytemuck::cast_slice(&[width, height, 0, 0]),
            usage: wgpu::BufferUsages::UNIFORM,
        },
    );
    let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("field"),
        layout: &layout,
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(view.binding()),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: size.as_entire_binding(),
            },
        ],
    });
    let pipeline_layout = d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("field"),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let format = wgpu::TextureFormat::Rgba8Unorm;
    let pipeline = d.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some("field"),
        layout: Some(&pipeline_layout),
        vertex: wgpu::VertexState {
            module: &module,
            entry_point: Some("vs_main"),
            compilation_options: Default::default(),
            buffers: &[],
        },
        primitive: wgpu::PrimitiveState::default(),
        depth_stencil: None,
        multisample: wgpu::MultisampleState::default(),
        fragment: Some(wgpu::FragmentState {
            module: &module,
            entry_point: Some("fs_main"),
            compilation_options: Default::default(),
            targets: &[Some(format.into())],
        }),
        multiview_mask: None,
        cache: None,
    });
    let texture = d.create_texture(&wgpu::TextureDescriptor {
        label: Some("image"),
        size: wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let target = texture.create_view(&Default::default());
    // Rows of the copy to the host are padded to 256 bytes.
    let row = (4 * width).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
    let out = d.create_buffer(&wgpu::BufferDescriptor {
        label: Some("image read-back"),
        size: (row * height) as u64,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut encoder = d.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("draw the field"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &target,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                    store: wgpu::StoreOp::Store,
                },
            })],
            depth_stencil_attachment: None,
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.draw(0..3, 0..1);
    }
    encoder.copy_texture_to_buffer(
        texture.as_image_copy(),
        wgpu::TexelCopyBufferInfo {
            buffer: &out,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(row),
                rows_per_image: None,
            },
        },
        wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        },
    );
    app.queue.submit([encoder.finish()]);
    // The draw is submitted: the field's buffer may go back to wgarray's
    // pool now; whatever wgarray does with it next is ordered after it.
    drop(view);
    let slice = out.slice(..);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    d.poll(wgpu::PollType::Wait {
        submission_index: None,
        timeout: Some(std::time::Duration::from_secs(60)),
    })
    .map_err(|e| format!("poll: {e}"))?;
    rx.recv()
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("map: {e}"))?;
    let mapped = slice.get_mapped_range().map_err(|e| e.to_string())?;
    let mut pixels = Vec::with_capacity((4 * width * height) as usize);
    for r in 0..height as usize {
        let start = r * row as usize;
        pixels.extend_from_slice(&mapped[start..start + 4 * width as usize]);
    }
    drop(mapped);
    out.unmap();
    Ok(pixels)
}

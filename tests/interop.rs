//! The application's own wgpu: `Device::from_wgpu`, arrays over the
//! application's buffers (`Array::from_wgpu_buffer`), the application's
//! passes over arrays' buffers (`Array::wgpu_buffer`), the ordering of
//! the two sides' submissions on one queue, and the render example's core.

mod common;

#[path = "../examples/render_field/render.rs"]
#[allow(dead_code)]
mod render;

use common::Rng;
use wgarray::wgpu::{self, util::DeviceExt};
use wgarray::{Array, DType, Device, Error};

/// The application's device, on WGARRAY_BACKEND's backend.
fn app() -> render::App {
    let backend = std::env::var(wgarray::BACKEND_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .map(|s| wgarray::parse_backend(&s).unwrap());
    render::App::new(backend).expect("this test needs a GPU adapter")
}

fn wrap(app: &render::App) -> Device {
    Device::from_wgpu(&app.adapter, app.device.clone(), app.queue.clone()).unwrap()
}

const RW: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

fn app_buffer(app: &render::App, data: &[f32], usage: wgpu::BufferUsages) -> wgpu::Buffer {
    app.device
        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("app"),
            contents: bytemuck::cast_slice(data),
            usage,
        })
}

/// The application reads `size` bytes of `buffer` from `offset` with its
/// own copy and map (its own submission, after whatever came before).
fn app_read(app: &render::App, buffer: &wgpu::Buffer, offset: u64, size: u64) -> Vec<u8> {
    let out = app.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("app read-back"),
        size: size.next_multiple_of(4),
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut e = app.device.create_command_encoder(&Default::default());
    e.copy_buffer_to_buffer(buffer, offset, &out, 0, size.next_multiple_of(4));
    app.queue.submit([e.finish()]);
    app_map(app, &out, size)
}

fn app_map(app: &render::App, out: &wgpu::Buffer, size: u64) -> Vec<u8> {
    let slice = out.slice(..);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| tx.send(r).unwrap());
    app.device
        .poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout: Some(std::time::Duration::from_secs(60)),
        })
        .unwrap();
    rx.recv().unwrap().unwrap();
    let v = slice.get_mapped_range().unwrap()[..size as usize].to_vec();
    out.unmap();
    v
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(bytes)
}

#[test]
fn from_wgpu_computes_on_the_applications_device() {
    let app = app();
    let dev = wrap(&app);
    assert_eq!(dev.wgpu_device(), &app.device);
    // The application asked for no optional feature: wgarray uses none.
    assert!(!dev.features().contains(wgpu::Features::SHADER_F16));
    let mut rng = Rng::new(1);
    for n in [1usize, 7, 33, 1025] {
        let x = rng.vec_f32(n);
        let a = Array::from_slice(&x, &[n], &dev).unwrap();
        let y = (&(&a * &a).unwrap() + 1.0)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let want: Vec<f32> = x.iter().map(|v| v * v + 1.0).collect();
        assert_eq!(y, want, "n = {n}");
    }
    // f16 arrays need no SHADER_F16 (kernels widen to f32).
    let h = Array::from_slice(&[half::f16::from_f32(1.5); 3], &[3], &dev).unwrap();
    assert_eq!((&h * 2.0).unwrap().to_f64_vec().unwrap(), [3.0; 3]);
    drop(h);
    common::assert_empty(&dev);
}

#[test]
fn from_wgpu_names_what_the_device_lacks() {
    let a = app();
    // A device made with WebGL2's limits: no storage buffers, no compute.
    let (device, queue) = pollster::block_on(a.adapter.request_device(&wgpu::DeviceDescriptor {
        required_limits: wgpu::Limits::downlevel_webgl2_defaults(),
        ..Default::default()
    }))
    .unwrap();
    let err = Device::from_wgpu(&a.adapter, device, queue).unwrap_err();
    let Error::DeviceUnsuitable { missing } = &err else {
        panic!("{err:?}");
    };
    let text = err.to_string();
    for limit in [
        "max_storage_buffers_per_shader_stage",
        "max_compute_invocations_per_workgroup",
        "max_compute_workgroup_size_x",
    ] {
        assert!(
            missing.iter().any(|m| m.contains(limit)),
            "{limit}: {missing:?}"
        );
    }
    assert!(text.contains("wgarray needs 8, the device has 0"), "{text}");
    // Limits that only size arrays are not required.
    assert!(!text.contains("max_storage_buffer_binding_size"), "{text}");
}

/// wgarray leaves the application's uncaptured-error handler in place.
#[test]
fn from_wgpu_keeps_the_applications_error_handler() {
    let app = app();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s = seen.clone();
    app.device
        .on_uncaptured_error(std::sync::Arc::new(move |_e: wgpu::Error| {
            s.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }));
    let dev = wrap(&app);
    // wgarray's own work is inside error scopes: nothing reaches the handler.
    let a = Array::from_slice(&[1.0f32, 2.0], &[2], &dev).unwrap();
    assert_eq!((&a + 1.0).unwrap().to_vec::<f32>().unwrap(), [2.0, 3.0]);
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 0);
    // The application's own mistake reaches its own handler.
    let _bad = app.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::MAP_WRITE,
        mapped_at_creation: false,
    });
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(dev.take_uncaptured_errors().is_empty());
}

#[test]
fn an_array_over_the_applications_buffer_reads_it_without_a_copy() {
    let app = app();
    let dev = wrap(&app);
    let mut rng = Rng::new(2);
    // 5 floats: a buffer of 20 bytes, not a multiple of 16 (the wide
    // elementwise kernel must not be chosen for it).
    for n in [1usize, 5, 7, 33, 1025] {
        let x = rng.vec_f32(n + 3);
        let buf = app_buffer(&app, &x, RW);
        let before = dev.memory_stats();
        // From element 3 on.
        let a = Array::from_wgpu_buffer(&buf, 12, &[n], DType::F32, &dev).unwrap();
        let s = dev.memory_stats();
        assert_eq!(s.external, buf.size(), "n = {n}");
        assert_eq!(s.external_buffers, 1);
        assert_eq!(
            (s.active, s.allocations),
            (before.active, before.allocations)
        );
        let y = (&a * 2.0).unwrap();
        drop(a);
        // `a` is held by nothing but y's node now: an op may write over
        // such an input, but never over the application's buffer.
        let got = y.to_vec::<f32>().unwrap();
        let want: Vec<f32> = x[3..].iter().map(|v| v * 2.0).collect();
        assert_eq!(got, want, "n = {n}");
        assert_eq!(floats(&app_read(&app, &buf, 0, buf.size())), x, "n = {n}");
        drop(y);
        let s = dev.memory_stats();
        assert_eq!((s.external, s.external_buffers), (0, 0));
        common::assert_empty(&dev);
    }
    // Packed dtypes: 7 f16 (14 bytes) and 5 i8 from a byte offset.
    let halves: Vec<half::f16> = (0..8)
        .map(|i| half::f16::from_f32(i as f32 - 3.5))
        .collect();
    let buf = app
        .device
        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(&halves),
            usage: RW,
        });
    let h = Array::from_wgpu_buffer(&buf, 2, &[7], DType::F16, &dev).unwrap();
    assert_eq!(h.to_vec::<half::f16>().unwrap(), halves[1..]);
    drop(h);
    let bytes: Vec<i8> = (-4..8).collect();
    let buf = app
        .device
        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(&bytes),
            usage: RW,
        });
    let b = Array::from_wgpu_buffer(&buf, 3, &[5], DType::I8, &dev).unwrap();
    assert_eq!((&b + 1).unwrap().to_vec::<i8>().unwrap(), [0, 1, 2, 3, 4]);
    drop(b);
    // A 2-d view of it, transposed by wgarray (strides, no copy until used).
    let a = Array::from_wgpu_buffer(&buf, 0, &[3, 4], DType::I8, &dev).unwrap();
    let t = a.transpose().to_vec::<i8>().unwrap();
    assert_eq!(t, [-4, 0, 4, -3, 1, 5, -2, 2, 6, -1, 3, 7]);
    drop(a);
    common::assert_empty(&dev);
    assert_eq!(dev.memory_stats().external, 0);
}

#[test]
fn bad_application_buffers_are_typed_errors_and_leak_nothing() {
    let app = app();
    let dev = wrap(&app);
    let data = [1.0f32; 16];
    let usage_err = |usage, want: &str| {
        let buf = app_buffer(&app, &data, usage);
        match Array::from_wgpu_buffer(&buf, 0, &[16], DType::F32, &dev) {
            Err(Error::BufferUsage {
                op, flag, usage, ..
            }) => {
                assert_eq!((op, flag), ("from_wgpu_buffer", want), "{usage}")
            }
            r => panic!("{want}: {r:?}"),
        }
    };
    usage_err(
        wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
        "STORAGE",
    );
    usage_err(
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        "COPY_SRC",
    );
    let buf = app_buffer(&app, &data, RW);
    let bad = |offset, shape: &[usize], dtype, want: &str| match Array::from_wgpu_buffer(
        &buf, offset, shape, dtype, &dev,
    ) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(want), "{m}"),
        r => panic!("{want}: {r:?}"),
    };
    bad(2, &[4], DType::F32, "not a multiple of 4");
    bad(0, &[17], DType::F32, "past the buffer's 64 bytes");
    bad(60, &[2], DType::F32, "past the buffer's 64 bytes");
    // 1 byte past the last whole word: 61 + 3 bytes round to 68.
    bad(62, &[3], DType::I8, "end at byte 68");
    assert!(matches!(
        Array::from_wgpu_buffer(&buf, 0, &[1; 9], DType::F32, &dev),
        Err(Error::TooLarge { .. })
    ));
    // A buffer of another wgpu device of the same instance, and one of
    // another instance (wgpu-core panics there; caught).
    let (device2, _queue2) =
        pollster::block_on(app.adapter.request_device(&Default::default())).unwrap();
    let same_instance = device2.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 64,
        usage: RW,
        mapped_at_creation: false,
    });
    let other = self::app();
    let other_instance = app_buffer(&other, &data, RW);
    for foreign in [&same_instance, &other_instance] {
        match Array::from_wgpu_buffer(foreign, 0, &[16], DType::F32, &dev) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("another wgpu device"), "{m}"),
            r => panic!("{r:?}"),
        }
    }
    // The exact fit is fine: 16 floats.
    let a = Array::from_wgpu_buffer(&buf, 0, &[4, 4], DType::F32, &dev).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), data);
    drop(a);
    assert_eq!(dev.memory_stats().external, 0);
    common::assert_empty(&dev);
    assert!(!dev.is_lost());
}

/// The application writes, wgarray reads: `queue.write_buffer` and the
/// application's own submissions land before wgarray's next submission,
/// with or without `synchronize`; wgarray reads at eval, not when the
/// array is made.
#[test]
fn the_application_writes_and_wgarray_reads_in_queue_order() {
    let app = app();
    let dev = wrap(&app);
    let buf = app_buffer(&app, &[0.0; 33], RW);
    let a = Array::from_wgpu_buffer(&buf, 0, &[33], DType::F32, &dev).unwrap();
    let mut rng = Rng::new(3);
    for sync in [false, true] {
        // A lazy graph made before the write reads what was written.
        let y = (&a * 3.0).unwrap();
        let x = rng.vec_f32(33);
        app.queue.write_buffer(&buf, 0, bytemuck::cast_slice(&x));
        if sync {
            dev.synchronize().unwrap();
        }
        let want: Vec<f32> = x.iter().map(|v| v * 3.0).collect();
        assert_eq!(
            y.to_vec::<f32>().unwrap(),
            want,
            "write_buffer, sync {sync}"
        );

        // The application's own submission: a copy into the buffer.
        let x2 = rng.vec_f32(33);
        let src = app_buffer(&app, &x2, wgpu::BufferUsages::COPY_SRC);
        let mut e = app.device.create_command_encoder(&Default::default());
        e.copy_buffer_to_buffer(&src, 0, &buf, 0, 33 * 4);
        app.queue.submit([e.finish()]);
        if sync {
            dev.synchronize().unwrap();
        }
        let z = (&a + 1.0).unwrap().to_vec::<f32>().unwrap();
        let want: Vec<f32> = x2.iter().map(|v| v + 1.0).collect();
        assert_eq!(z, want, "copy submission, sync {sync}");
    }
    drop(a);
    common::assert_empty(&dev);
}

/// wgarray writes, the application reads: `wgpu_buffer` evaluates and
/// submits, so the application's later submissions see the values, with
/// or without `synchronize`. And a buffer given back to the pool after
/// the application's submission is reused only by work ordered after it.
#[test]
fn wgarray_writes_and_the_application_reads_in_queue_order() {
    let app = app();
    let dev = wrap(&app);
    let mut rng = Rng::new(4);
    for sync in [false, true] {
        let x = rng.vec_f32(1025);
        let a = Array::from_slice(&x, &[1025], &dev).unwrap();
        let y = (&a.exp().unwrap() + 1.0).unwrap(); // pending
        let view = y.wgpu_buffer().unwrap();
        assert!(y.is_evaluated());
        assert_eq!((view.offset(), view.size()), (0, 1025 * 4));
        if sync {
            dev.synchronize().unwrap();
        }
        let got = floats(&app_read(&app, view.buffer(), view.offset(), view.size()));
        assert_eq!(got, y.to_vec::<f32>().unwrap(), "sync {sync}");
        for (g, v) in got.iter().zip(&x) {
            assert!(
                (*g as f64 - (*v as f64).exp() - 1.0).abs() < 1e-5,
                "{g} {v}"
            );
        }
    }

    // The application submits a copy of the array's buffer and lets go of
    // the view and the array before the copy is done; wgarray then fills
    // the buffer it gets back with other values. The copy still sees 7s.
    let y = Array::full(&[4096], 7.0, DType::F32, &dev).unwrap();
    let view = y.wgpu_buffer().unwrap();
    let out = app.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: view.size(),
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut e = app.device.create_command_encoder(&Default::default());
    e.copy_buffer_to_buffer(view.buffer(), 0, &out, 0, view.size());
    app.queue.submit([e.finish()]);
    let size = view.size();
    let hits = dev.memory_stats().cache_hits;
    drop((view, y));
    let z = Array::full(&[4096], 9.0, DType::F32, &dev).unwrap();
    z.eval().unwrap();
    assert_eq!(
        dev.memory_stats().cache_hits,
        hits + 1,
        "the buffer was reused"
    );
    assert_eq!(floats(&app_map(&app, &out, size)), vec![7.0; 4096]);
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![9.0; 4096]);
    drop(z);
    common::assert_empty(&dev);
}

#[test]
fn wgpu_buffer_holds_the_buffer_and_refuses_strided_views() {
    let app = app();
    let dev = wrap(&app);
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &dev).unwrap();
    match a.transpose().wgpu_buffer() {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(".contiguous()"), "{m}"),
        r => panic!("{r:?}"),
    }
    // A contiguous view starts at its offset: row 1.
    let row = a
        .slice(&[wgarray::Slice::new(Some(1), Some(2), 1)])
        .unwrap();
    let view = row.wgpu_buffer().unwrap();
    assert_eq!((view.offset(), view.size()), (12, 12));
    let active = dev.active_memory();
    drop((a, row));
    // The view keeps the buffer on loan: nothing went back to the pool.
    assert_eq!(dev.active_memory(), active);
    assert_eq!(
        floats(&app_read(&app, view.buffer(), view.offset(), view.size())),
        [4.0, 5.0, 6.0]
    );
    drop(view);
    common::assert_empty(&dev);
    // An array over the application's buffer hands that buffer back.
    let buf = app_buffer(&app, &[1.0; 8], RW);
    let a = Array::from_wgpu_buffer(&buf, 16, &[4], DType::F32, &dev).unwrap();
    let view = a.wgpu_buffer().unwrap();
    assert_eq!(view.buffer(), &buf);
    assert_eq!((view.offset(), view.size()), (16, 16));
}

/// The render example's core: the field computed by wgarray on the
/// application's device, drawn by the application's pipeline straight from
/// wgarray's buffer; every pixel against the f64 reference and colour map.
#[test]
fn the_render_example_draws_the_field_wgarray_computed() {
    let app = app();
    let dev = wrap(&app);
    let (w, h) = (67, 35);
    let field = render::field(&dev, w, h).unwrap();
    let pixels = render::draw(&app, &field).unwrap();
    assert_eq!(pixels.len(), 4 * w * h);
    let mut worst = 0.0f64;
    for y in 0..h {
        for x in 0..w {
            let want = render::colour(render::field_at(x, y, w, h));
            let p = &pixels[4 * (y * w + x)..][..4];
            for c in 0..3 {
                worst = worst.max((p[c] as f64 - want[c] * 255.0).abs());
            }
            assert_eq!(p[3], 255);
        }
    }
    // Unorm8 rounding (0.5) plus the f32 field's error.
    assert!(worst <= 1.0, "largest channel error {worst}");
    // The image is not flat: the field spans most of the colour map.
    let reds: Vec<u8> = pixels.chunks(4).map(|p| p[0]).collect();
    assert!(reds.iter().max().unwrap() - reds.iter().min().unwrap() > 150);
    drop(field);
    common::assert_empty(&dev);
}

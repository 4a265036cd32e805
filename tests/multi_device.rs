//! Several devices in one process: `Array::to_device` (a lazy copy on the
//! same device, through host memory between devices), errors that name
//! both devices, and the multi-adapter example's core across every
//! adapter of the machine (lavapipe and llvmpipe here).

mod common;

#[path = "../examples/multi_adapter/batch.rs"]
mod batch;

use common::arrays::{of_dtype, random_values, round_to};
use common::{Rng, assert_empty, device};
use wgarray::{Array, DType, Device, DeviceOptions, Error};

/// Every dtype both devices hold.
fn dtypes(a: &Device, b: &Device) -> Vec<DType> {
    DType::ALL
        .into_iter()
        .filter(|&d| {
            let ok = |dev: &Device| {
                d != DType::F64 || dev.features().contains(wgarray::wgpu::Features::SHADER_F64)
            };
            ok(a) && ok(b)
        })
        .collect()
}

/// `a` moved to `to`, against the host values `want` of its elements in
/// row-major order; both devices' memory checked: the source keeps what
/// it had active, the target gains the result only.
fn check_move(a: &Array, to: &Device, want: &[f64], what: &str) {
    a.eval().unwrap();
    let (src, dst) = (a.device().active_memory(), to.active_memory());
    let b = a.to_device(to).unwrap();
    assert_eq!(b.device(), to, "{what}");
    assert!(b.is_evaluated(), "{what}: moved at the call");
    assert_eq!((b.shape(), b.dtype()), (a.shape(), a.dtype()), "{what}");
    assert_eq!(a.device().active_memory(), src, "{what}: source");
    // The result's buffer (the pool may hand out a cached one up to twice
    // the size), nothing else.
    let gained = to.active_memory() - dst;
    let rounded = (b.nbytes() as u64).max(256);
    assert!(
        gained >= b.nbytes() as u64 && gained <= 2 * rounded + 2 * 16384,
        "{what}: target gained {gained}"
    );
    assert_eq!(b.to_f64_vec().unwrap(), want, "{what}");
    // And back, through the same path.
    let back = b.to_device(a.device()).unwrap();
    assert_eq!(back.to_f64_vec().unwrap(), want, "{what}: back");
    drop((b, back));
    assert_eq!(to.active_memory(), dst, "{what}: target after drop");
    assert_eq!(a.device().active_memory(), src, "{what}: source after drop");
}

fn move_every_dtype(from: &Device, to: &Device) {
    let mut rng = Rng::new(5);
    for dtype in dtypes(from, to) {
        for n in [0usize, 1, 7, 33, 1025] {
            let v = random_values(&mut rng, n, dtype);
            let want: Vec<f64> = v.iter().map(|&x| round_to(x, dtype)).collect();
            let a = of_dtype(from, &v, &[n], dtype);
            check_move(&a, to, &want, &format!("{dtype} [{n}]"));
        }
        // A transposed view and a pending result.
        let v = random_values(&mut rng, 7 * 5, dtype);
        let a = of_dtype(from, &v, &[7, 5], dtype);
        let t = a.transpose();
        let want: Vec<f64> = (0..5)
            .flat_map(|j| (0..7).map(move |i| (i, j)))
            .map(|(i, j)| round_to(v[i * 5 + j], dtype))
            .collect();
        check_move(&t, to, &want, &format!("{dtype} transposed"));
    }
    assert_empty(from);
    assert_empty(to);
}

#[test]
fn to_device_moves_every_dtype_between_two_devices_of_one_adapter() {
    let (a, b) = (device(), device());
    move_every_dtype(&a, &b);
}

/// Vulkan (lavapipe) and GL (llvmpipe): every adapter of the machine.
#[test]
fn to_device_moves_every_dtype_between_adapters() {
    let devices = Device::all(&DeviceOptions::default()).unwrap();
    assert!(
        devices.len() >= 2,
        "this test needs two adapters (lavapipe and llvmpipe on CI): {devices:?}"
    );
    move_every_dtype(&devices[0], &devices[1]);
    move_every_dtype(&devices[1], &devices[0]);
}

#[test]
fn to_device_on_the_same_device_is_a_lazy_copy() {
    let d = device();
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &d).unwrap();
    let dispatches = d.dispatches();
    let b = a.transpose().to_device(&d).unwrap();
    assert!(!b.is_evaluated());
    assert_eq!(d.dispatches(), dispatches);
    assert_eq!(b.to_vec::<f32>().unwrap(), [1.0, 3.0, 2.0, 4.0]);
    // Its own buffer: a's can go.
    let active = d.active_memory();
    drop(a);
    assert!(d.active_memory() < active);
    assert_eq!(b.to_vec::<f32>().unwrap(), [1.0, 3.0, 2.0, 4.0]);
    drop(b);
    assert_empty(&d);
}

#[test]
fn to_device_errors_leave_nothing_behind() {
    let devices = Device::all(&DeviceOptions::default()).unwrap();
    let gl = devices
        .iter()
        .find(|d| !d.features().contains(wgarray::wgpu::Features::SHADER_F64));
    let vk = devices
        .iter()
        .find(|d| d.features().contains(wgarray::wgpu::Features::SHADER_F64));
    if let (Some(gl), Some(vk)) = (gl, vk) {
        let a = Array::from_slice(&[1.0f64, 2.0], &[2], vk).unwrap();
        assert!(matches!(
            a.to_device(gl),
            Err(Error::MissingFeature {
                op: "to_device",
                feature: "SHADER_F64"
            })
        ));
        drop(a);
        assert_empty(gl);
        assert_empty(vk);
    }
    // A lost target: the source is untouched, the target holds nothing.
    let (a_dev, b_dev) = (device(), device());
    let a = Array::from_slice(&[1.0f32; 300], &[300], &a_dev).unwrap();
    b_dev.wgpu_device().destroy();
    assert!(matches!(a.to_device(&b_dev), Err(Error::DeviceLost(_))));
    assert_eq!(a.to_vec::<f32>().unwrap(), [1.0; 300]);
    assert_eq!(b_dev.active_memory(), 0);
    // A lost source.
    let c_dev = device();
    a_dev.wgpu_device().destroy();
    assert!(matches!(
        (&a + 1.0).and_then(|x| x.to_device(&c_dev)),
        Err(Error::DeviceLost(_))
    ));
    drop(a);
    assert_empty(&c_dev);
}

#[test]
fn mixing_devices_names_both() {
    let (d1, d2) = (device(), device());
    let a = Array::ones(&[2], DType::F32, &d1).unwrap();
    let b = Array::ones(&[2], DType::F32, &d2).unwrap();
    let err = (&a + &b).unwrap_err();
    let Error::DeviceMismatch { op, lhs, rhs } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*op, "add");
    assert_eq!((lhs, rhs), (&d1.to_string(), &d2.to_string()));
    assert_ne!(lhs, rhs);
    let text = err.to_string();
    assert!(
        text.contains(&d1.to_string()) && text.contains(&d2.to_string()),
        "{text}"
    );
    assert!(text.contains("to_device"), "{text}");
    match wgarray::eval(&[&a, &b]) {
        Err(Error::DeviceMismatch {
            op: "eval",
            lhs,
            rhs,
        }) => {
            assert_eq!((lhs, rhs), (d1.to_string(), d2.to_string()))
        }
        r => panic!("{r:?}"),
    }
    // The fix the message suggests.
    let c = (&a + &b.to_device(&d1).unwrap()).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), [2.0, 2.0]);
}

#[test]
fn device_all_opens_one_device_per_adapter() {
    let devices = Device::all(&DeviceOptions::default()).unwrap();
    let adapters = Device::enumerate();
    assert_eq!(devices.len(), adapters.len(), "{adapters:?}");
    for d in &devices {
        assert!(adapters.contains(d.info()), "{d}");
    }
    let vulkan =
        Device::all(&DeviceOptions::default().with_backend(wgarray::wgpu::Backend::Vulkan))
            .unwrap();
    assert!(
        vulkan
            .iter()
            .all(|d| d.backend() == wgarray::wgpu::Backend::Vulkan)
    );
    assert!(matches!(
        Device::all(&DeviceOptions::default().with_adapter_name("no such adapter")),
        Err(Error::NoAdapter { .. })
    ));
}

/// The example's core: a batch split across every adapter, gathered in
/// order on the first, against an f64 reference and one device's result.
#[test]
fn a_batch_split_across_every_adapter_matches_one_device() {
    let devices = Device::all(&DeviceOptions::default()).unwrap();
    let weights = batch::Weights::new(33, 64, 7);
    let rows = 101;
    let mut rng = Rng::new(6);
    let x = rng.vec_f32(rows * weights.d_in);
    let split = batch::forward_split(&devices, &weights, &x, rows).unwrap();
    assert_eq!(split.shape(), [rows, 7]);
    assert_eq!(split.device(), &devices[0]);
    let split = {
        let v = split.to_vec::<f32>().unwrap();
        drop(split);
        v
    };
    let one = batch::forward_split(&devices[..1], &weights, &x, rows)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let reference = weights.reference(&x, rows);
    for (i, ((s, o), r)) in split.iter().zip(&one).zip(&reference).enumerate() {
        assert!(
            (*s as f64 - r).abs() < 1e-4,
            "row {} col {}: {s} vs {r}",
            i / 7,
            i % 7
        );
        assert!((s - o).abs() < 1e-4, "{i}: {s} vs {o}");
    }
    assert_eq!(batch::shares(101, 2), [51, 50]);
    assert_eq!(batch::shares(2, 3), [1, 1, 0]);
    for d in &devices {
        assert_empty(d);
    }
}

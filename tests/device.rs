//! Adapter selection, features, limits and the no-adapter error; arrays of
//! two devices never meet in one op.

mod common;

use common::{assert_empty, device};
use wgarray::wgpu::Backend;
use wgarray::{Array, DType, Device, DeviceOptions, Error, concatenate, eval, stack, where_};

#[test]
fn enumerate_lists_vulkan_and_gl_software_adapters() {
    let all = Device::enumerate();
    assert!(
        all.iter().any(|a| a.backend == Backend::Vulkan),
        "no Vulkan adapter: {all:?}"
    );
    assert!(
        all.iter().any(|a| a.backend == Backend::Gl),
        "no GL adapter: {all:?}"
    );
    for a in &all {
        assert!(!a.name.is_empty());
    }
}

#[test]
fn selects_by_backend() {
    for backend in [Backend::Vulkan, Backend::Gl] {
        let d = Device::new(&DeviceOptions::default().with_backend(backend))
            .unwrap_or_else(|e| panic!("{backend}: {e}"));
        assert_eq!(d.backend(), backend);
        assert!(d.limits().max_storage_buffer_binding_size >= 128 << 20);
    }
}

#[test]
fn selects_by_name_substring_case_insensitively() {
    let name = Device::enumerate()[0].name.clone();
    let needle = name[..name.len().min(6)].to_uppercase();
    let d = Device::new(&DeviceOptions::default().with_adapter_name(needle)).unwrap();
    assert!(
        d.info()
            .name
            .to_uppercase()
            .contains(&name[..name.len().min(6)].to_uppercase())
    );
}

#[test]
fn prefers_vulkan_over_gl_among_equal_device_types() {
    let d = Device::new(&DeviceOptions::default()).unwrap();
    let all = Device::enumerate();
    if all.iter().all(|a| a.device_type == all[0].device_type) {
        assert_ne!(d.backend(), Backend::Gl);
    }
}

#[test]
fn no_adapter_is_a_typed_error_that_says_what_to_do() {
    let err = Device::new(&DeviceOptions::default().with_adapter_name("no-such-adapter-xyz"))
        .expect_err("nothing is called that");
    let msg = err.to_string();
    assert!(matches!(err, Error::NoAdapter { .. }), "{err:?}");
    assert!(msg.contains("mesa-vulkan-drivers"), "{msg}");
    assert!(msg.contains("WGARRAY_BACKEND"), "{msg}");
    assert!(msg.contains("no-such-adapter-xyz"), "{msg}");
}

/// `available` names every adapter of every backend, not only those of the
/// backend asked for: with a backend that has no adapter here (Metal on
/// Linux), and with one that has adapters none of which has the name.
#[test]
fn no_adapter_lists_every_adapter_of_every_backend() {
    let all = Device::enumerate();
    assert!(!all.is_empty(), "this test needs an adapter and found none");
    let mut want: Vec<String> = all.iter().map(|a| a.to_string()).collect();
    want.sort();
    let absent = [Backend::Metal, Backend::Dx12, Backend::Vulkan, Backend::Gl]
        .into_iter()
        .find(|b| all.iter().all(|a| a.backend != *b))
        .expect("some backend has no adapter here");
    let present = all[0].backend;
    for options in [
        DeviceOptions::default().with_backend(absent),
        DeviceOptions::default()
            .with_backend(present)
            .with_adapter_name("no-such-adapter-xyz"),
    ] {
        let err = Device::new(&options).expect_err("nothing matches");
        let msg = err.to_string();
        let Error::NoAdapter { mut available, .. } = err else {
            panic!("{options:?}: {err:?}");
        };
        available.sort();
        assert_eq!(available, want, "{options:?}");
        for a in &all {
            assert!(
                msg.contains(&format!("{} ({}, {:?})", a.name, a.backend, a.device_type)),
                "{msg}"
            );
        }
    }
}

#[test]
fn backend_names_parse() {
    assert_eq!(wgarray::parse_backend("Vulkan").unwrap(), Backend::Vulkan);
    assert_eq!(wgarray::parse_backend("gl").unwrap(), Backend::Gl);
    assert_eq!(wgarray::parse_backend("dx12").unwrap(), Backend::Dx12);
    assert_eq!(wgarray::parse_backend("metal").unwrap(), Backend::Metal);
    assert!(matches!(
        wgarray::parse_backend("cuda"),
        Err(Error::UnknownBackend(_))
    ));
}

#[test]
fn optional_features_follow_the_backend() {
    let vk = Device::new(&DeviceOptions::default().with_backend(Backend::Vulkan)).unwrap();
    assert!(vk.features().contains(wgarray::wgpu::Features::SHADER_F16));
    let gl = Device::new(&DeviceOptions::default().with_backend(Backend::Gl)).unwrap();
    assert!(!gl.features().contains(wgarray::wgpu::Features::SHADER_F16));
    assert!(!gl.features().contains(wgarray::wgpu::Features::SUBGROUP));
}

#[test]
fn default_device_follows_wgarray_backend() {
    let d = device();
    if let Ok(b) = std::env::var(wgarray::BACKEND_ENV) {
        assert_eq!(d.backend(), wgarray::parse_backend(&b).unwrap());
    }
}

/// No poll between the loss and the calls (tests/device_loss.rs tries
/// every entry point).
#[test]
fn device_loss_is_a_typed_error() {
    let d = device();
    let a = wgarray::Array::from_slice(&[1.0f32, 2.0], &[2], &d).unwrap();
    d.wgpu_device().destroy();
    let r = (&a + 1.0).and_then(|b| b.to_vec::<f32>());
    assert!(
        matches!(r, Err(Error::DeviceLost(_))),
        "expected DeviceLost, got {r:?}"
    );
    assert!(matches!(d.synchronize(), Err(Error::DeviceLost(_))));
}

#[test]
fn two_devices_are_rejected() {
    let d1 = device();
    let d2 = device();
    let a = Array::ones(&[2], DType::F32, &d1).unwrap();
    let b = Array::ones(&[2], DType::F32, &d2).unwrap();
    let m1 = Array::ones(&[2, 2], DType::F32, &d1).unwrap();
    let m2 = Array::ones(&[2, 2], DType::F32, &d2).unwrap();
    // Each names the op the caller called, even inside a composite op.
    let named = |r: Result<Array, Error>, want: &str| match r {
        Err(Error::DeviceMismatch { op, .. }) => assert_eq!(op, want),
        r => panic!("{want}: expected DeviceMismatch, got {r:?}"),
    };
    named(&a + &b, "add");
    named(where_(&a, &b, &b), "where");
    named(where_(&a, &a, &b), "where");
    named(m1.matmul(&m2), "matmul");
    named(a.divmod(&b).map(|(q, _)| q), "divmod");
    let i2 = Array::zeros(&[1], DType::I32, &d2).unwrap();
    named(a.take(&i2, 0), "take");
    named(m2.addmm(&m1, &m1, 1.0, 1.0), "addmm");
    named(m1.addmm(&m2, &m2, 1.0, 1.0), "addmm");
    named(m1.addmm(&m1, &m2, 1.0, 1.0), "addmm");
    named(concatenate(&[&a, &b], 0), "concatenate");
    named(stack(&[&a, &b], 0), "stack");
    named(m1.layer_norm(Some(&b), None, 1e-5), "layer_norm");
    named(m1.layer_norm(None, Some(&b), 1e-5), "layer_norm");
    named(m1.rms_norm(Some(&b), 1e-5), "rms_norm");
    match eval(&[&a, &b]) {
        Err(Error::DeviceMismatch { op, .. }) => assert_eq!(op, "eval"),
        r => panic!("expected DeviceMismatch, got {r:?}"),
    }
    drop(i2);
    drop((a, b, m1, m2));
    assert_empty(&d1);
    assert_empty(&d2);
}

#[test]
fn addmm_bias_device_mismatch_only_in_bias() {
    let d1 = device();
    let d2 = device();
    let m1 = Array::ones(&[2, 2], DType::F32, &d1).unwrap();
    let c2 = Array::ones(&[2], DType::F32, &d2).unwrap();
    let r = c2.addmm(&m1, &m1, 1.0, 1.0).and_then(|c| c.to_vec::<f32>());
    assert!(
        matches!(r, Err(Error::DeviceMismatch { op: "addmm", .. })),
        "{r:?}"
    );
}

//! `wgarray::distributed` in a process no MPI launcher started: a group of
//! one (MLX's `init(strict=False)`), where collectives give back their
//! input's values and there is no peer to send to. One test function: MPI
//! is initialised and finalised once per process.

mod common;

use common::{assert_empty, device};
use wgarray::distributed;
use wgarray::{Array, DType, Error};

#[test]
fn a_process_alone_is_a_group_of_one() {
    assert!(distributed::is_available());
    assert!(
        !distributed::launched_by_mpirun(),
        "run this test without mpirun (tests/distributed.rs runs under it)"
    );
    let d = device();
    let group = distributed::init(&d).unwrap();
    assert_eq!((group.rank(), group.size()), (0, 1));
    assert_eq!(group.device(), &d);
    // init again: the same world.
    let again = distributed::init(&d).unwrap();
    assert_eq!((again.rank(), again.size()), (0, 1));

    let x = Array::from_slice(&[1.5f32, -2.0, 7.0], &[3], &d).unwrap();
    for f in [
        distributed::all_sum,
        distributed::all_max,
        distributed::all_min,
    ] {
        assert_eq!(
            f(&x, &group).unwrap().to_vec::<f32>().unwrap(),
            [1.5, -2.0, 7.0]
        );
    }
    let g = distributed::all_gather(&x.reshape(&[1, 3]).unwrap(), &group).unwrap();
    assert_eq!(g.shape(), [1, 3]);
    let b = distributed::broadcast(&x, 0, &group).unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap(), [1.5, -2.0, 7.0]);
    distributed::barrier(&group).unwrap();
    // No peer: a send or receive to this rank, or past the group.
    for dst in [0, 1] {
        assert!(matches!(
            distributed::send(&x, dst, &group),
            Err(Error::InvalidRank { op: "send", rank, size: 1, me: 0 }) if rank == dst
        ));
        assert!(matches!(
            distributed::recv(&[3], DType::F32, dst, &group),
            Err(Error::InvalidRank { op: "recv", .. })
        ));
    }
    // An array of another device: this rank's own error.
    let other = device();
    let y = Array::ones(&[2], DType::F32, &other).unwrap();
    assert!(matches!(
        distributed::all_sum(&y, &group),
        Err(Error::DeviceMismatch { op: "all_sum", .. })
    ));
    drop((x, g, b, y));
    assert_empty(&d);
    assert_empty(&other);

    // MPI is finalised with the last group, and cannot start again.
    drop((group, again));
    match distributed::init(&d) {
        Err(Error::Distributed {
            op: "init",
            message,
        }) => {
            assert!(message.contains("cannot be initialised twice"), "{message}")
        }
        r => panic!("{r:?}"),
    }
}

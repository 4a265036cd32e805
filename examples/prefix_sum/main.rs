//! Testing a small kernel of your own with `wgarray::testing`: an inclusive
//! prefix sum in three passes with workgroup memory (`scan.wgsl`, beside
//! this file).
//!
//! 1. one run against a host reference, at odd sizes;
//! 2. the same run on every adapter of the machine, compared (a
//!    differential run: naga's SPIR-V on lavapipe against its GLSL on
//!    llvmpipe here, a GPU's drivers where present);
//! 3. repeated runs, which catch the race when the barriers are left out;
//! 4. the portability check: naga's four back ends, WebGPU's limits;
//! 5. with `--features proptest`, random lengths and values, shrunk to a
//!    small input on failure;
//! 6. a failing case saved as a fixture file and replayed.
//!
//! Run: `cargo run --example prefix_sum [--features proptest]`; its checks
//! also run as tests (`cargo test --example prefix_sum`).

use wgarray::DType;
use wgarray::testing::{Fixture, KernelTest, Tolerance};

const SCAN: &str = include_str!("scan.wgsl");
/// Elements per block (the kernel's workgroup size); at most 256 blocks.
const BLOCK: usize = 256;

/// The three passes for `x`: scan each block (outputs 0 = the scan, 1 =
/// block totals), scan the totals in place, add them to the blocks.
fn scan_test(x: &[u32], barriers: bool) -> KernelTest {
    let blocks = x.len().div_ceil(BLOCK).max(1);
    KernelTest::new(SCAN, "scan_blocks")
        .input(x)
        .output(DType::U32, &[x.len()])
        .output(DType::U32, &[blocks])
        .constant("barriers", barriers)
        .workgroups([blocks, 1, 1])
        .then("scan_sums")
        .write_output(1)
        .constant("barriers", barriers)
        .then("add_offsets")
        .read_output(1)
        .write_output(0)
        .workgroups([blocks, 1, 1])
}

/// The host reference: a wrapping inclusive prefix sum.
fn reference(x: &[u32]) -> Vec<u32> {
    x.iter()
        .scan(0u32, |acc, v| {
            *acc = acc.wrapping_add(*v);
            Some(*acc)
        })
        .collect()
}

/// Deterministic test data, large values included (sums wrap).
fn data(n: usize, seed: u64) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let v = (s >> 33) as u32;
            if v.is_multiple_of(7) { v } else { v % 1000 }
        })
        .collect()
}

fn one_run() -> wgarray::Result<()> {
    for n in [1, 7, 255, 256, 257, 1025, 65_536] {
        let x = data(n, n as u64);
        let out = scan_test(&x, true).run()?;
        out.assert_close(0, &reference(&x), Tolerance::EXACT);
    }
    println!("1. one run: right at 1, 7, 255, 256, 257, 1025, 65536 elements");
    Ok(())
}

fn every_adapter() -> wgarray::Result<()> {
    let x = data(3000, 1);
    let diff = scan_test(&x, true).run_on_all()?;
    let names: Vec<String> = diff.outputs().map(|(a, _)| a.to_string()).collect();
    diff.assert_agree(Tolerance::EXACT);
    diff.assert_close(0, &reference(&x), Tolerance::EXACT);
    println!("2. every adapter agrees: {}", names.join("; "));
    Ok(())
}

fn repeated() -> wgarray::Result<()> {
    let x = data(1025, 2);
    let want = reference(&x);
    scan_test(&x, true)
        .run_repeated(8)?
        .assert_close(0, &want, Tolerance::EXACT);
    let racy = scan_test(&x, false).run_repeated(8)?;
    let report = racy
        .check(0, &want, Tolerance::EXACT)
        .expect_err("without barriers the scan races");
    let first = report.to_string();
    let first = first.lines().take(4).collect::<Vec<_>>().join("\n   ");
    println!("3. repeated runs: stable and right with barriers; without them:\n   {first}");
    Ok(())
}

fn portability() {
    match scan_test(&data(7, 3), true).check_portability() {
        Ok(()) => println!("4. portable: SPIR-V, MSL, HLSL, GLSL ES 3.1, WebGPU default limits"),
        Err(p) => panic!("{p}"),
    }
}

#[cfg(feature = "proptest")]
fn property() {
    use wgarray::testing::{PropertyTest, Values};
    PropertyTest::new(
        Values::<u32>::range(0.0, u32::MAX as f64)
            .with_edges()
            .vec(1..=4 * BLOCK + 1),
        |x: &Vec<u32>| scan_test(x, true),
    )
    .reference(0, |x: &Vec<u32>| reference(x), Tolerance::EXACT)
    .cases(16)
    .assert();
    println!("5. property: 16 random inputs of 1 to 1025 elements, edge values mixed in");
}

#[cfg(not(feature = "proptest"))]
fn property() {
    println!("5. property: run with --features proptest");
}

fn fixture() -> wgarray::Result<()> {
    // Pretend the racy kernel is a finding: pin it as a fixture file.
    let x = data(300, 4);
    let racy = scan_test(&x, false);
    let device = wgarray::testing::default_device()?;
    let observed = racy.run()?;
    let fixture = Fixture::new(&racy)
        .expect(0, &reference(&x), Tolerance::EXACT)
        .found_on(device.info(), &observed)
        .note("prefix sum without barriers races");
    let path = std::env::temp_dir().join(format!("wgarray-prefix-sum-{}.json", std::process::id()));
    fixture.save(&path)?;
    let loaded = Fixture::load(&path)?;
    std::fs::remove_file(&path).ok();
    let replay = loaded.replay()?;
    assert!(
        loaded.check(&replay).is_err(),
        "the pinned race still shows"
    );
    println!(
        "6. fixture: saved, loaded and replayed; the race still shows on {}",
        device.info()
    );
    Ok(())
}

fn main() -> wgarray::Result<()> {
    one_run()?;
    every_adapter()?;
    repeated()?;
    portability();
    property();
    fixture()
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_run() {
        super::one_run().unwrap();
    }

    #[test]
    fn every_adapter() {
        super::every_adapter().unwrap();
    }

    #[test]
    fn repeated() {
        super::repeated().unwrap();
    }

    #[test]
    fn portability() {
        super::portability();
    }

    #[test]
    fn property() {
        super::property();
    }

    #[test]
    fn fixture() {
        super::fixture().unwrap();
    }
}

//! [`KernelTest`]: one run of a WGSL compute entry point on host data, and
//! its [`Outputs`].

use naga::valid::Capabilities;
use wgpu::util::DeviceExt;

use super::compare::{Elem, bits_of, compare_elems, element_poison, elems_of, poison};
use super::{Mismatches, Tolerance, default_device};
use crate::kernels;
use crate::{DType, Device, Element, Error, Result};

/// One output as read back: dtype, shape and the raw device bytes.
#[derive(Clone, Debug)]
struct Output {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

/// The outputs of one [`KernelTest::run`], in the order they were declared
/// (output 0 is the first [`KernelTest::output`], whatever its binding).
#[derive(Clone, Debug)]
pub struct Outputs {
    outputs: Vec<Output>,
}

impl Outputs {
    /// How many outputs were declared.
    pub fn len(&self) -> usize {
        self.outputs.len()
    }

    /// Whether no output was declared.
    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    fn output(&self, i: usize) -> Result<&Output> {
        self.outputs.get(i).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "output {i} does not exist: the kernel test declared {}",
                self.outputs.len()
            ))
        })
    }

    /// The shape output `i` was declared with.
    ///
    /// # Panics
    /// When there is no output `i`.
    pub fn shape(&self, i: usize) -> &[usize] {
        &self.outputs[i].shape
    }

    /// The dtype output `i` was declared with.
    ///
    /// # Panics
    /// When there is no output `i`.
    pub fn dtype(&self, i: usize) -> DType {
        self.outputs[i].dtype
    }

    /// The raw device bytes of output `i` (elements of
    /// [`DType::size_in_bytes`], row-major; bool as a `u32` each).
    ///
    /// # Panics
    /// When there is no output `i`.
    pub fn bytes(&self, i: usize) -> &[u8] {
        &self.outputs[i].bytes
    }

    /// Output `i` as host values, row-major.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when there is no output `i`;
    /// [`Error::DType`] when `T` is not its dtype.
    pub fn get<T: Element>(&self, i: usize) -> Result<Vec<T>> {
        let o = self.output(i)?;
        if T::DTYPE != o.dtype {
            return Err(Error::DType {
                op: "testing::Outputs::get",
                dtype: T::DTYPE,
                other: Some(o.dtype),
            });
        }
        Ok(T::from_device_bytes(&o.bytes))
    }

    /// Flat indices of the elements of output `i` that still hold the
    /// [`poison`] pattern: the kernel (almost surely) never wrote them.
    ///
    /// # Panics
    /// When there is no output `i`.
    pub fn unwritten(&self, i: usize) -> Vec<usize> {
        let o = &self.outputs[i];
        let poison_bits = element_poison(o.dtype);
        o.bytes
            .chunks_exact(o.dtype.size_in_bytes())
            .enumerate()
            .filter(|(_, b)| bits_of(b) == poison_bits)
            .map(|(i, _)| i)
            .collect()
    }

    /// Compare output `i` with `want` within `tol` (see [`Tolerance`]);
    /// the report gives positions in the output's shape and names
    /// never-written elements.
    ///
    /// # Errors
    /// The [`Mismatches`] when any element fails, the lengths differ, there
    /// is no output `i` or `T` is not its dtype (reported as a length or
    /// dtype mismatch).
    pub fn check<T: Element>(
        &self,
        i: usize,
        want: &[T],
        tol: Tolerance,
    ) -> std::result::Result<(), Mismatches> {
        let Some(o) = self.outputs.get(i).filter(|o| o.dtype == T::DTYPE) else {
            return Err(Mismatches {
                dtype: T::DTYPE,
                total: want.len(),
                count: want.len(),
                unwritten: 0,
                first: Vec::new(),
                tolerance: tol,
                lengths: Some((0, want.len())),
            });
        };
        let values = T::from_device_bytes(&o.bytes);
        let got: Vec<Elem> = values
            .iter()
            .zip(o.bytes.chunks_exact(o.dtype.size_in_bytes()))
            .map(|(v, b)| Elem {
                value: v.to_f64(),
                bits: bits_of(b),
            })
            .collect();
        compare_elems(T::DTYPE, &got, &elems_of(want), tol, Some(&o.shape), true)
    }

    /// [`Outputs::check`], panicking with the report on failure: for tests.
    ///
    /// # Panics
    /// With the [`Mismatches`] report when the check fails.
    #[track_caller]
    pub fn assert_close<T: Element>(&self, i: usize, want: &[T], tol: Tolerance) {
        if let Err(m) = self.check(i, want, tol) {
            panic!("output {i} does not match its reference: {m}");
        }
    }
}

/// One binding of a kernel test, in group 0.
#[derive(Clone, Debug)]
enum Binding {
    Input { bytes: Vec<u8> },
    Uniform { bytes: Vec<u8> },
    Output { dtype: DType, shape: Vec<usize> },
}

/// One run of a WGSL compute entry point on host data; see the
/// [module docs](super) for an example.
///
/// Build it with [`KernelTest::new`], add bindings in binding order
/// ([`KernelTest::input`], [`KernelTest::output`],
/// [`KernelTest::uniform_bytes`]), set [`KernelTest::workgroups`], and
/// [`KernelTest::run`] it. A test can be run more than once.
#[derive(Clone, Debug)]
pub struct KernelTest {
    source: String,
    entry_point: String,
    bindings: Vec<Binding>,
    workgroups: [u32; 3],
    constants: Vec<(String, f64)>,
    device: Option<Device>,
}

impl KernelTest {
    /// A test of the `@compute` function `entry_point` in the WGSL `source`,
    /// with no bindings and one workgroup.
    pub fn new(source: impl Into<String>, entry_point: impl Into<String>) -> Self {
        KernelTest {
            source: source.into(),
            entry_point: entry_point.into(),
            bindings: Vec::new(),
            workgroups: [1, 1, 1],
            constants: Vec::new(),
            device: None,
        }
    }

    /// Bind `data` at the next binding as `var<storage, read>`: an
    /// `array<T>` of `data.len()` elements of `T`'s [`DType`] (bool as one
    /// `u32` each). The buffer is padded to a multiple of 4 bytes (at least
    /// 4), so WGSL's `arrayLength` may round up for 2-byte dtypes.
    pub fn input<T: Element>(mut self, data: &[T]) -> Self {
        self.bindings.push(Binding::Input {
            bytes: T::to_device_bytes(data),
        });
        self
    }

    /// Bind `bytes` at the next binding as `var<uniform>`, zero-padded to a
    /// multiple of 16 bytes (the layout, WGSL's uniform rules, is yours).
    pub fn uniform_bytes(mut self, bytes: &[u8]) -> Self {
        self.bindings.push(Binding::Uniform {
            bytes: bytes.to_vec(),
        });
        self
    }

    /// Bind an output at the next binding as `var<storage, read_write>`:
    /// `shape.iter().product()` elements of `dtype`, row-major, each filled
    /// with [`poison`] before the kernel runs. Outputs are numbered 0, 1, ...
    /// in the order of these calls (see [`Outputs`]). The buffer is padded
    /// to a multiple of 4 bytes (at least 4).
    pub fn output(mut self, dtype: DType, shape: &[usize]) -> Self {
        self.bindings.push(Binding::Output {
            dtype,
            shape: shape.to_vec(),
        });
        self
    }

    /// Dispatch `[x, y, z]` workgroups (each at most the adapter's
    /// `max_compute_workgroups_per_dimension`, 65535 by WebGPU's defaults).
    /// Default `[1, 1, 1]`.
    pub fn workgroups(mut self, counts: [u32; 3]) -> Self {
        self.workgroups = counts;
        self
    }

    /// Set the pipeline-overridable constant `name` (its identifier, or its
    /// `@id` as a decimal string) to `value`, as WebGPU's `constants` do;
    /// the value converts to the constant's WGSL type.
    pub fn constant(mut self, name: impl Into<String>, value: f64) -> Self {
        self.constants.push((name.into(), value));
        self
    }

    /// Run on `device` instead of [`default_device`].
    pub fn device(mut self, device: &Device) -> Self {
        self.device = Some(device.clone());
        self
    }

    /// Validate the kernel with naga, run it once and read every output back.
    ///
    /// # Errors
    /// See the [module docs](super#errors): [`Error::Kernel`],
    /// [`Error::MissingFeature`], [`Error::Validation`], [`Error::NoAdapter`],
    /// and read-back failures.
    pub fn run(&self) -> Result<Outputs> {
        let device = match &self.device {
            Some(d) => d.clone(),
            None => default_device()?,
        };
        self.validate(&device)?;
        // wgpu panics in `create_buffer_init` on a lost device: ask first.
        device.probe_lost()?;
        let dev = &device.inner;
        let d = &dev.device;

        // Buffers: inputs and uniforms filled, outputs poisoned.
        let buffers: Vec<wgpu::Buffer> = self
            .bindings
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let (contents, usage) = match b {
                    Binding::Input { bytes } => (padded(bytes, 4), wgpu::BufferUsages::STORAGE),
                    Binding::Uniform { bytes } => (padded(bytes, 16), wgpu::BufferUsages::UNIFORM),
                    Binding::Output { dtype, shape } => {
                        let len = (shape.iter().product::<usize>() * dtype.size_in_bytes())
                            .next_multiple_of(4)
                            .max(4);
                        let word = poison(*dtype).to_ne_bytes();
                        (
                            word.iter().copied().cycle().take(len).collect(),
                            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                        )
                    }
                };
                device.scoped(|| {
                    Ok(d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                        label: Some(&format!("wgarray::testing binding {i}")),
                        contents: &contents,
                        usage,
                    }))
                })
            })
            .collect::<Result<_>>()?;

        // Pipeline, bind group and commands: wgpu's validation errors
        // surface here, as Error::Validation.
        let staging: Vec<(usize, wgpu::Buffer)> = self
            .bindings
            .iter()
            .enumerate()
            .filter(|(_, b)| matches!(b, Binding::Output { .. }))
            .map(|(i, _)| {
                let size = buffers[i].size();
                let buffer = d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("wgarray::testing read-back"),
                    size,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                (i, buffer)
            })
            .collect();
        let commands = device.scoped(|| Ok(self.encode(d, &buffers, &staging)))?;

        let index = device.scoped(|| {
            let _guard = dev.pool.lock_queue();
            Ok(dev.queue.submit([commands]))
        })?;
        let mut outputs = Vec::new();
        for (i, buffer) in &staging {
            let Binding::Output { dtype, shape } = &self.bindings[*i] else {
                unreachable!("staging buffers are made for outputs only")
            };
            let len = shape.iter().product::<usize>() * dtype.size_in_bytes();
            let mut bytes = device.scoped(|| {
                let timeout = device.wait_timeout();
                crate::memory::map_read(d, buffer, ..buffer.size(), index.clone(), timeout)
            })?;
            bytes.truncate(len);
            outputs.push(Output {
                dtype: *dtype,
                shape: shape.clone(),
                bytes,
            });
        }
        Ok(Outputs { outputs })
    }

    /// naga's verdict (the same checks the kernel cache makes), with
    /// missing features told apart from broken WGSL.
    fn validate(&self, device: &Device) -> Result<()> {
        let label = format!("testing:{}", self.entry_point);
        let kernel_error = |message: String| Error::Kernel {
            kernel: label.clone(),
            message,
        };
        let module = kernels::parse(&self.source, &label)?;
        let features = device.features();
        let mut caps = Capabilities::default();
        let mut needs = Vec::new();
        for (feature, name, cap) in [
            (
                wgpu::Features::SHADER_F16,
                "SHADER_F16",
                Capabilities::SHADER_FLOAT16,
            ),
            (
                wgpu::Features::SUBGROUP,
                "SUBGROUP",
                Capabilities::SUBGROUP | Capabilities::SUBGROUP_BARRIER,
            ),
        ] {
            if features.contains(feature) {
                caps |= cap;
            } else {
                needs.push((name, cap));
            }
        }
        // `enable f16;` alone needs the feature, even if nothing uses f16.
        if !features.contains(wgpu::Features::SHADER_F16) && enables(&self.source, "f16") {
            return Err(missing_feature("SHADER_F16"));
        }
        if let Err(e) = kernels::validate(&module, &self.source, &label, caps) {
            // Would a feature the adapter lacks make it valid?
            for (name, cap) in needs {
                if kernels::validate(&module, &self.source, &label, caps | cap).is_ok() {
                    return Err(missing_feature(name));
                }
            }
            return Err(e);
        }
        match module
            .entry_points
            .iter()
            .find(|ep| ep.name == self.entry_point)
        {
            Some(ep) if ep.stage == naga::ShaderStage::Compute => Ok(()),
            Some(ep) => Err(kernel_error(format!(
                "entry point `{}` is a {:?} shader, not @compute",
                ep.name, ep.stage
            ))),
            None => Err(kernel_error(format!(
                "no entry point `{}`; the module has: [{}]",
                self.entry_point,
                module
                    .entry_points
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    fn encode(
        &self,
        d: &wgpu::Device,
        buffers: &[wgpu::Buffer],
        staging: &[(usize, wgpu::Buffer)],
    ) -> wgpu::CommandBuffer {
        let entries: Vec<wgpu::BindGroupLayoutEntry> = self
            .bindings
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: match b {
                        Binding::Input { .. } => {
                            wgpu::BufferBindingType::Storage { read_only: true }
                        }
                        Binding::Output { .. } => {
                            wgpu::BufferBindingType::Storage { read_only: false }
                        }
                        Binding::Uniform { .. } => wgpu::BufferBindingType::Uniform,
                    },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let layout = d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("wgarray::testing"),
            entries: &entries,
        });
        let pipeline_layout = d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("wgarray::testing"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(&self.entry_point),
            source: wgpu::ShaderSource::Wgsl(self.source.as_str().into()),
        });
        let constants: Vec<(&str, f64)> = self
            .constants
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&self.entry_point),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(&self.entry_point),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &constants,
                zero_initialize_workgroup_memory: true,
            },
            cache: None,
        });
        let bind_entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("wgarray::testing"),
            layout: &layout,
            entries: &bind_entries,
        });
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("wgarray::testing"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("wgarray::testing"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            let [x, y, z] = self.workgroups;
            pass.dispatch_workgroups(x, y, z);
        }
        for (i, dst) in staging {
            encoder.copy_buffer_to_buffer(&buffers[*i], 0, dst, 0, dst.size());
        }
        encoder.finish()
    }
}

/// `bytes` zero-padded to a multiple of `align` (at least `align` bytes).
fn padded(bytes: &[u8], align: usize) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v.resize(bytes.len().next_multiple_of(align).max(align), 0);
    v
}

fn missing_feature(feature: &'static str) -> Error {
    Error::MissingFeature {
        op: "testing::KernelTest::run",
        feature,
    }
}

/// Whether the WGSL has an `enable` directive naming `extension`.
fn enables(source: &str, extension: &str) -> bool {
    source.lines().any(|l| {
        let l = l.trim_start();
        l.strip_prefix("enable").is_some_and(|rest| {
            rest.trim_end_matches([';', ' ', '\t'])
                .split(',')
                .any(|e| e.trim() == extension)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enable_directives() {
        assert!(enables("enable f16;\nfn f() {}", "f16"));
        assert!(enables("  enable subgroups, f16 ;", "f16"));
        assert!(!enables("// enable f16;", "f16"));
        assert!(!enables("enable subgroups;", "f16"));
    }
}

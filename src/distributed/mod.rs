//! Several processes: collectives and point-to-point messages between
//! arrays of processes started by an MPI launcher (`mpirun -np 2 ...`),
//! with MLX's names and meanings (`mlx.core.distributed`): [`init`], a
//! [`Group`] with [`Group::rank`] and [`Group::size`], [`all_sum`],
//! [`all_max`], [`all_min`], [`all_gather`], [`send`], [`recv`],
//! [`recv_like`]; and [`broadcast`] and [`barrier`], which MLX's API
//! lacks. Feature `mpi`: the `mpi` crate (rsmpi) over the system's MPI
//! library (Open MPI on Debian: `libopenmpi-dev openmpi-bin`,
//! `scripts/install-deps.sh`). No transport of wgarray's own.
//!
//! ```no_run
//! use wgarray::{Array, Device, distributed};
//! let device = Device::new_default()?;
//! let group = distributed::init(&device)?; // every process of `mpirun -np N`
//! let x = Array::from_slice(&[group.rank() as f32; 4], &[4], &device)?;
//! let total = distributed::all_sum(&x, &group)?; // 0 + 1 + ... + N-1, on every rank
//! # Ok::<(), wgarray::Error>(())
//! ```
//!
//! # How data moves
//! Through host memory, one copy each way: the array is evaluated and read
//! back (its mapped read-back memory is MPI's send buffer, no copy of it);
//! MPI writes the result straight into a mapped upload buffer from the
//! pool (a reduction, which reads what it writes, into a host buffer the
//! group keeps, then one copy into the upload buffer), which is copied
//! into the result's storage on the queue. Both staging buffers go back
//! to the pool's cache, so active memory after a call is what it was
//! before plus the result, and a loop of calls reuses their memory (fresh
//! host memory each time would cost more than the copies: page faults).
//! wgpu offers no memory another process or library can reach (see
//! "Scale-out" in `docs/ARCHITECTURE.md` for what a GPU-direct path would
//! take).
//!
//! # Eager, where MLX is lazy
//! MLX records a collective in the graph and runs it at eval; here each
//! function runs at the call (evaluating its input first) and returns an
//! evaluated array. Call them in the same order on every rank, as MPI
//! requires (and MLX too, at eval).
//!
//! # No rank left waiting
//! Every call starts by exchanging, with every rank of the call, a short
//! description of it (the op, dtype, shape, root or peer, and whether it
//! already failed on that rank), within the group's timeout
//! ([`Group::set_timeout`], default [`crate::DEFAULT_WAIT_TIMEOUT`]).
//! Every rank draws the same conclusion from the same descriptions, so a
//! bad call is an error on every rank, and no data moves: mismatched
//! shapes, dtypes, roots or ops give [`Error::RankMismatch`] on every rank;
//! a call that fails on one rank before its data is ready (an array of
//! another device, a lost device, a root out of range) gives that rank its
//! own error and every other rank [`Error::PeerFailed`] naming it. Only
//! then does data move, with blocking MPI calls that every rank has agreed
//! to (each rank's data is already on the host by then). A rank that never
//! makes the call leaves the others with [`Error::Timeout`]: MPI cannot
//! cancel a collective, so the group is then broken (every later call
//! returns [`Error::Distributed`]; end the process). The abandoned call
//! is kept with its buffers and completes if the late rank joins before
//! the process ends (dropping the last group waits up to 10 s for that
//! before MPI is finalised). [`send`] waits for its
//! receiver's answer before moving data, so it returns once a matching
//! receive has started (like `MPI_Ssend`): order sends and receives so
//! that they pair up. A receive that times out is cancelled and leaves
//! the group usable.

mod call;
mod transport;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use self::call::{Call, Disagreement, Op, Status};
use self::transport::{Combine, Comm, Elem, HalfKind};
use crate::{Array, DType, Device, Error, Result};

/// Message tags of point-to-point calls: the sender's call, the
/// receiver's answer, the data.
const TAG_CALL: i32 = 0x7761;
const TAG_ANSWER: i32 = 0x7762;
const TAG_DATA: i32 = 0x7763;

/// Whether this build can communicate between processes: always `true`
/// (the module exists only with feature `mpi`), as MLX's `is_available`.
pub fn is_available() -> bool {
    true
}

/// Whether this process was started by an MPI launcher (`mpirun`,
/// `mpiexec`, `srun`), from the launchers' environment variables (Open
/// MPI's `OMPI_COMM_WORLD_SIZE`, PMI's `PMI_SIZE` and `PMIX_RANK`,
/// MPICH's `MPI_LOCALNRANKS`). Without one, [`init`] gives a group of one.
pub fn launched_by_mpirun() -> bool {
    transport::launched()
}

/// The processes that communicate, and this one's place among them (MLX
/// `mlx.core.distributed.Group`), with the device whose arrays they move:
/// collectives take arrays of [`Group::device`] and return arrays there.
/// Cheap to clone; `Send + Sync` (wgarray serialises its MPI calls).
#[derive(Clone)]
pub struct Group {
    inner: Arc<GroupInner>,
}

struct GroupInner {
    // Dropped before `world`: a communicator is freed before MPI is
    // finalised.
    comm: Comm,
    world: Arc<transport::World>,
    rank: usize,
    size: usize,
    device: Device,
    timeout_ns: AtomicU64,
    /// Collective calls made so far (each call carries it).
    calls: AtomicU64,
    /// Why the group is unusable (a collective timed out), if it is.
    broken: Mutex<Option<String>>,
    /// Host memory MPI reduces into (8-byte words, so any element type
    /// fits), kept from one call to the next: as large as the group's
    /// largest reduction. A reduction reads what it writes, so it does not
    /// run in mapped upload memory (write-combined on many GPUs).
    scratch: Mutex<Vec<u64>>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Group(rank {} of {}, {})",
            self.inner.rank, self.inner.size, self.inner.device
        )
    }
}

/// The group of every process the launcher started (MLX
/// `mlx.core.distributed.init()`; MPI's `MPI_COMM_WORLD`), moving arrays
/// of `device`. The first call initialises MPI (`MPI_Init_thread`, with
/// serialized threads); later calls share it, and MPI is finalised when
/// the last group is dropped (a process cannot initialise MPI again after
/// that). A process not started by `mpirun` is a group of one, where
/// every collective returns its input's values (MLX's `strict=False`).
///
/// # Errors
/// [`Error::Distributed`] when MPI was already finalised in this process,
/// or gives less than serialized thread support.
pub fn init(device: &Device) -> Result<Group> {
    let (world, comm) = transport::world().map_err(|message| Error::Distributed {
        op: "init",
        message,
    })?;
    Ok(Group::new(world, comm, device))
}

impl Group {
    fn new(world: Arc<transport::World>, comm: Comm, device: &Device) -> Group {
        Group {
            inner: Arc::new(GroupInner {
                rank: comm.rank(),
                size: comm.size(),
                comm,
                world,
                device: device.clone(),
                timeout_ns: AtomicU64::new(crate::DEFAULT_WAIT_TIMEOUT.as_nanos() as u64),
                calls: AtomicU64::new(0),
                broken: Mutex::new(None),
                scratch: Mutex::new(Vec::new()),
            }),
        }
    }

    /// This process's rank in the group, from 0.
    pub fn rank(&self) -> usize {
        self.inner.rank
    }

    /// The number of processes in the group.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// The device whose arrays the group's calls take and return.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// How long a call waits for the other ranks to join it before it
    /// fails with [`Error::Timeout`]. Default:
    /// [`crate::DEFAULT_WAIT_TIMEOUT`].
    pub fn timeout(&self) -> Duration {
        Duration::from_nanos(self.inner.timeout_ns.load(Ordering::Relaxed))
    }

    /// Set the wait limit (see [`Group::timeout`]) for this group and its
    /// clones; returns the previous one. Set the same on every rank.
    pub fn set_timeout(&self, timeout: Duration) -> Duration {
        let ns = timeout.as_nanos().min(u64::MAX as u128) as u64;
        Duration::from_nanos(self.inner.timeout_ns.swap(ns, Ordering::Relaxed))
    }

    /// The ranks that pass the same `color` as a group of their own, ranked
    /// by `key` (ties, and a negative `key`, by their rank here), on this
    /// group's device (MLX `Group.split(color, key=-1)`, MPI's
    /// `MPI_Comm_split`). A collective: every rank of this group calls it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative `color` (and
    /// [`Error::PeerFailed`] on the other ranks); as every collective.
    pub fn split(&self, color: i32, key: i32) -> Result<Group> {
        let local = if color < 0 {
            Err(Error::InvalidArgument(format!(
                "split: color {color} is negative; every rank needs a colour of 0 or more"
            )))
        } else {
            Ok(())
        };
        let _g = transport::lock();
        let seq = self.next_call(Op::Split)?;
        let call = Call::new(Op::Split, None, &[], color.max(0) as u64, seq);
        self.agree(call, local.err())?;
        let key = if key < 0 { self.rank() as i32 } else { key };
        let comm = transport::split(&self.inner.comm, color, key);
        Ok(Group::new(
            Arc::clone(&self.inner.world),
            comm,
            &self.inner.device,
        ))
    }

    /// The error of a broken group, if it is.
    fn usable(&self, op: Op) -> Result<()> {
        if let Some(why) = &*self.inner.broken.lock().unwrap_or_else(|e| e.into_inner()) {
            return Err(Error::Distributed {
                op: op.name(),
                message: format!("the group is unusable: {why}"),
            });
        }
        Ok(())
    }

    /// The next collective's number (point-to-point calls take none), or
    /// the error of a broken group.
    fn next_call(&self, op: Op) -> Result<u64> {
        self.usable(op)?;
        Ok(self.inner.calls.fetch_add(1, Ordering::SeqCst))
    }

    fn timeout_error(&self, op: Op, what: &'static str, broken: bool) -> Error {
        if broken {
            *self.inner.broken.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                "{} timed out waiting for every rank (MPI cannot cancel a collective)",
                op.name()
            ));
        }
        Error::Timeout {
            what,
            waited: self.timeout(),
        }
    }

    /// Exchange this rank's `call` (failed when `local` is an error) with
    /// every rank's, under the MPI lock the caller holds, and conclude:
    /// every rank's calls when they fit; else this rank's own error, or
    /// the error every rank gives.
    fn agree(&self, call: Call, local: Option<Error>) -> Result<Vec<Call>> {
        let op = call.op;
        let call = match local {
            Some(_) => call.with(Status::Failed),
            None => call,
        };
        let words = transport::exchange(&self.inner.comm, call.encode(), self.timeout())
            .ok_or_else(|| self.timeout_error(op, "the other ranks to join an MPI call", true))?;
        if let Some(e) = local {
            return Err(e);
        }
        let calls: Vec<&[u64]> = words.chunks_exact(call::WORDS).collect();
        call::agree(&calls).map_err(|d| match d {
            Disagreement::PeerFailed(peer) => Error::PeerFailed {
                op: op.name(),
                peer,
            },
            Disagreement::Mismatch(message) => Error::RankMismatch {
                op: op.name(),
                message,
            },
        })
    }

    /// [`Error::DeviceMismatch`] unless `x` lives on the group's device.
    fn check_device(&self, op: Op, x: &Array) -> Result<()> {
        if x.device() != self.device() {
            return Err(Error::device_mismatch(op.name(), self.device(), x.device()));
        }
        Ok(())
    }

    /// [`Error::InvalidRank`] unless `rank` is in the group (and, for a
    /// peer, not this rank).
    fn check_rank(&self, op: Op, rank: usize, peer: bool) -> Result<()> {
        if rank >= self.size() || (peer && rank == self.rank()) {
            return Err(Error::InvalidRank {
                op: op.name(),
                rank,
                size: self.size(),
                me: self.rank(),
            });
        }
        Ok(())
    }
}

/// The element type and combination a reduction of `dtype` takes, or
/// `None` for a dtype it does not (decided through `DType`'s own
/// classification, so a new dtype is refused until it is handled).
fn reduction(op: Op, dtype: DType) -> Option<(Elem, Combine)> {
    let float_combine = match op {
        Op::AllSum => Combine::Sum,
        Op::AllMax => Combine::Max,
        _ => Combine::Min,
    };
    if dtype == DType::Bool {
        let c = if op == Op::AllMin {
            Combine::And
        } else {
            Combine::Or
        };
        return Some((Elem::U32, c));
    }
    let elem = if dtype == DType::F16 {
        Elem::Half(HalfKind::F16)
    } else if dtype == DType::BF16 {
        Elem::Half(HalfKind::BF16)
    } else if dtype.is_float() {
        match dtype.size_in_bytes() {
            4 => Elem::F32,
            8 => Elem::F64,
            _ => return None,
        }
    } else if dtype.is_integer() {
        match (dtype.size_in_bytes(), dtype.is_signed_integer()) {
            (1, true) => Elem::I8,
            (1, false) => Elem::U8,
            (2, true) => Elem::I16,
            (2, false) => Elem::U16,
            (4, true) => Elem::I32,
            (4, false) => Elem::U32,
            _ => return None,
        }
    } else {
        return None;
    };
    Some((elem, float_combine))
}

/// The most elements or bytes one MPI call moves per rank (MPI counts are
/// C `int`s).
const MAX_COUNT: usize = i32::MAX as usize;

/// What a collective does with the ranks' host bytes once they agree.
enum Move {
    Reduce(Elem, Combine),
    Gather,
    Broadcast { root: usize },
}

/// What a collective gives this rank: its result's buffer and shape, or
/// (the root of a broadcast) nothing new.
type Moved = Option<(crate::memory::PooledBuffer, Vec<usize>)>;

/// A collective of `op` over `x`: local checks (`local`), the read-back,
/// the call exchange (a failed call when anything before it failed), and
/// the data move, MPI writing the result into the mapped upload buffer of
/// the result's storage (`transfer::upload_staged`); the result array.
#[track_caller]
fn collective(group: &Group, op: Op, x: &Array, param: u64, local: Result<Move>) -> Result<Array> {
    let device = group.device();
    let origin = device.origin(|| op.name());
    let seq_call = |seq| Call::new(op, Some(x.dtype()), x.shape(), param, seq);
    // Anything that fails before the exchange still takes part in it, as
    // a failed call, so that no other rank waits.
    let fail = |e: Error| -> Result<Array> {
        let _g = transport::lock();
        let seq = group.next_call(op)?;
        Err(group.agree(seq_call(seq), Some(e)).unwrap_err())
    };
    let mv = match local {
        Ok(mv) => mv,
        Err(e) => return fail(e),
    };
    // Run with the input's bytes on the host (mapped read-back memory):
    // the exchange, then the move.
    let run = |bytes: &[u8]| -> Result<Moved> {
        let _g = transport::lock();
        let seq = group.next_call(op)?;
        let calls = group.agree(seq_call(seq), None)?;
        let comm = &group.inner.comm;
        let stage = |len: usize, fill: &mut dyn FnMut(std::ptr::NonNull<u8>)| {
            crate::transfer::upload_staged(device, op.name(), len as u64, origin, |mut dst| {
                let padded = dst.len();
                fill(dst.as_raw_element_ptr());
                // The padding to a whole word.
                dst.slice(len..padded).fill(0);
                Ok(())
            })
            .map(|(buffer, ())| buffer)
        };
        match &mv {
            Move::Reduce(elem, combine) => {
                let mut scratch = group
                    .inner
                    .scratch
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                let words = bytes.len().div_ceil(8);
                if scratch.len() < words {
                    scratch.resize(words, 0);
                }
                let out = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut scratch)[..bytes.len()];
                transport::all_reduce(comm, *elem, *combine, bytes, out);
                let buffer = crate::transfer::upload_staged(
                    device,
                    op.name(),
                    bytes.len() as u64,
                    origin,
                    |dst| {
                        crate::transfer::write_device_bytes(dst, out);
                        Ok(())
                    },
                )?
                .0;
                Ok(Some((buffer, x.shape().to_vec())))
            }
            Move::Gather => {
                let elem = x.dtype().size_in_bytes();
                let counts: Vec<usize> = calls
                    .iter()
                    .map(|c| c.shape.iter().product::<usize>() * elem)
                    .collect();
                let total: usize = counts.iter().sum();
                if total > MAX_COUNT {
                    return Err(Error::Distributed {
                        op: op.name(),
                        message: format!(
                            "{total} bytes in all, past MPI's count of {MAX_COUNT} per call"
                        ),
                    });
                }
                let mut shape = x.shape().to_vec();
                match shape.first_mut() {
                    Some(first) => *first = calls.iter().map(|c| c.shape[0]).sum(),
                    None => shape.push(group.size()),
                }
                let buffer = stage(total, &mut |out| {
                    transport::all_gather_into(comm, bytes, &counts, out)
                })?;
                Ok(Some((buffer, shape)))
            }
            Move::Broadcast { root } if *root == group.rank() => {
                transport::broadcast_from(comm, *root, bytes);
                Ok(None)
            }
            Move::Broadcast { root } => {
                let buffer = stage(x.nbytes(), &mut |out| {
                    transport::broadcast_into(comm, *root, out, x.nbytes())
                })?;
                Ok(Some((buffer, x.shape().to_vec())))
            }
        }
    };
    let moved = if matches!(mv, Move::Broadcast { root } if root != group.rank()) {
        // A broadcast's other ranks read nothing of `x`.
        run(&[])?
    } else {
        let mut exchanged = false;
        let read = x.read_mapped(|bytes| {
            exchanged = true;
            run(bytes)
        });
        match read {
            Ok(r) => r?,
            Err(e) if !exchanged => return fail(e),
            Err(e) => return Err(e),
        }
    };
    Ok(match moved {
        Some((buffer, shape)) => Array::ready(&shape, x.dtype(), device, buffer, origin),
        None => x.clone(),
    })
}

/// The local checks of a reduction `op` of `x`.
fn reduce_checks(group: &Group, op: Op, x: &Array) -> Result<Move> {
    group.check_device(op, x)?;
    let (elem, combine) = reduction(op, x.dtype()).ok_or(Error::OpDType {
        op: op.name(),
        dtype: x.dtype(),
        takes: "arrays of every dtype wgarray has but quantized ones",
    })?;
    if x.size() > MAX_COUNT {
        return Err(Error::Distributed {
            op: op.name(),
            message: format!("{} elements, past MPI's count of {MAX_COUNT}", x.size()),
        });
    }
    Ok(Move::Reduce(elem, combine))
}

#[track_caller]
fn reduce(op: Op, x: &Array, group: &Group) -> Result<Array> {
    let local = reduce_checks(group, op, x);
    collective(group, op, x, 0, local)
}

/// The elementwise sum of `x` over every rank of `group`, on every rank
/// (MLX `all_sum`, MPI's `MPI_Allreduce` with `MPI_SUM`): same shape and
/// dtype. Integer sums wrap around (as wgarray's arithmetic); f16 and bf16
/// add in f64 and round once per pair of ranks (MLX's way); bool arrays
/// give the logical or (the sum cast back to bool). A group of one returns
/// a copy of `x`'s values.
///
/// # Errors
/// On this rank: [`Error::DeviceMismatch`] for an array of another device
/// than the group's; [`Error::OpDType`] for a dtype it cannot reduce;
/// the errors of [`crate::eval`] and of the read-back; on every rank:
/// [`Error::RankMismatch`] when the ranks' shapes or dtypes differ (or
/// another rank called another op), [`Error::PeerFailed`] when another
/// rank's call failed on its side, [`Error::Timeout`] when a rank does not
/// join within [`Group::timeout`] (the group is then broken),
/// [`Error::Distributed`] on a broken group. No data moves on error, and
/// nothing stays allocated.
#[track_caller]
pub fn all_sum(x: &Array, group: &Group) -> Result<Array> {
    reduce(Op::AllSum, x, group)
}

/// The elementwise maximum over the ranks (MLX `all_max`), as
/// [`all_sum`]: float NaN propagates (a NaN on any rank gives NaN, as
/// wgarray's `maximum`); bool arrays give the logical or.
///
/// # Errors
/// As [`all_sum`].
#[track_caller]
pub fn all_max(x: &Array, group: &Group) -> Result<Array> {
    reduce(Op::AllMax, x, group)
}

/// The elementwise minimum over the ranks (MLX `all_min`), as
/// [`all_sum`]: float NaN propagates; bool arrays give the logical and.
///
/// # Errors
/// As [`all_sum`].
#[track_caller]
pub fn all_min(x: &Array, group: &Group) -> Result<Array> {
    reduce(Op::AllMin, x, group)
}

/// Every rank's `x` concatenated along the first axis in rank order, on
/// every rank (MLX `all_gather`, MPI's `MPI_Allgatherv`); a 0-dimensional
/// `x` gathers into a vector of `size` elements. Unlike MLX, the first
/// axis may differ between ranks (an uneven split of a batch gathers in
/// one call; a rank may give 0 rows); the other axes and the dtype must
/// agree. Any dtype (bytes move as they are).
///
/// # Errors
/// As [`all_sum`] ([`Error::RankMismatch`] when dtypes, ranks of arrays or
/// axes past the first differ), and [`Error::Distributed`] past MPI's
/// count of 2^31 - 1 bytes in all.
#[track_caller]
pub fn all_gather(x: &Array, group: &Group) -> Result<Array> {
    let op = Op::AllGather;
    let local = group.check_device(op, x).and_then(|()| {
        if x.nbytes() > MAX_COUNT {
            return Err(Error::Distributed {
                op: op.name(),
                message: format!("{} bytes, past MPI's count of {MAX_COUNT}", x.nbytes()),
            });
        }
        Ok(Move::Gather)
    });
    collective(group, op, x, 0, local)
}

/// The root's `x` on every rank (MPI's `MPI_Bcast`; MLX has no such
/// function): every rank passes an array of the same shape and dtype
/// (only the root's values are read); the root gets `x` itself back, the
/// others a new array. Any dtype.
///
/// # Errors
/// As [`all_sum`], and [`Error::InvalidRank`] for a `root` outside the
/// group (on every rank that passes it; the others get
/// [`Error::RankMismatch`] or [`Error::PeerFailed`]).
#[track_caller]
pub fn broadcast(x: &Array, root: usize, group: &Group) -> Result<Array> {
    let op = Op::Broadcast;
    let local = group
        .check_device(op, x)
        .and_then(|()| group.check_rank(op, root, false))
        .and_then(|()| {
            if x.nbytes() > MAX_COUNT {
                return Err(Error::Distributed {
                    op: op.name(),
                    message: format!("{} bytes, past MPI's count of {MAX_COUNT}", x.nbytes()),
                });
            }
            Ok(Move::Broadcast { root })
        });
    collective(group, op, x, root as u64, local)
}

/// Wait until every rank of `group` has called `barrier` (MPI's
/// `MPI_Barrier`), at most [`Group::timeout`].
///
/// # Errors
/// [`Error::Timeout`] (the group is then broken); [`Error::RankMismatch`]
/// when another rank made another call; [`Error::Distributed`] on a
/// broken group.
pub fn barrier(group: &Group) -> Result<()> {
    let _g = transport::lock();
    let seq = group.next_call(Op::Barrier)?;
    group
        .agree(Call::new(Op::Barrier, None, &[], 0, seq), None)
        .map(|_| ())
}

/// Send `x` to rank `dst` of `group` (MLX `send`; MPI's `MPI_Send`): it
/// is evaluated and read back, then its description goes first, and its
/// data only once `dst`'s [`recv`] or [`recv_like`] has answered that it
/// expects that shape and dtype, so `send` returns once the receiver has
/// the data (like `MPI_Ssend`). Any dtype. MLX returns an array that
/// performs the send when evaluated; this one runs at the call.
///
/// # Errors
/// [`Error::InvalidRank`] for a `dst` outside the group or this rank
/// (nothing is sent); [`Error::DeviceMismatch`] for an array of another
/// device, and the errors of [`crate::eval`] and the read-back (the
/// receiver is told, and gets [`Error::PeerFailed`]);
/// [`Error::RankMismatch`] when the receiver expects another shape or
/// dtype (it gets the same error); [`Error::PeerFailed`] when the
/// receiver's call failed on its side; [`Error::Timeout`] when no receive
/// answers within [`Group::timeout`] (the group is then broken: the
/// description stays queued at the receiver).
#[track_caller]
pub fn send(x: &Array, dst: usize, group: &Group) -> Result<()> {
    let op = Op::Send;
    group.check_rank(op, dst, true)?;
    let call = |status| {
        Call::new(op, Some(x.dtype()), x.shape(), dst as u64, 0)
            .with(status)
            .encode()
    };
    let comm = &group.inner.comm;
    let failed = |e: Error| {
        let _g = transport::lock();
        group.usable(op)?;
        if !transport::send_words(comm, dst, TAG_CALL, call(Status::Failed), group.timeout()) {
            return Err(group.timeout_error(op, "a receiver to take a send's description", true));
        }
        Err(e)
    };
    if let Err(e) = group.check_device(op, x) {
        return failed(e);
    }
    let mut started = false;
    let r = x.read_mapped(|bytes| {
        started = true;
        let _g = transport::lock();
        group.usable(op)?;
        if !transport::send_words(comm, dst, TAG_CALL, call(Status::Ready), group.timeout()) {
            return Err(group.timeout_error(op, "a receiver to take a send's description", true));
        }
        let answer = transport::receive_words(comm, dst, TAG_ANSWER, group.timeout())
            .ok_or_else(|| group.timeout_error(op, "a receiver to answer a send", true))?;
        let answer = Call::decode(&answer).map_err(|m| Error::Distributed {
            op: op.name(),
            message: format!("rank {dst} answered with {m}"),
        })?;
        match answer.status {
            Status::Ready => {
                transport::send_bytes(comm, dst, TAG_DATA, bytes);
                Ok(())
            }
            Status::Failed => Err(Error::PeerFailed {
                op: op.name(),
                peer: dst,
            }),
            Status::Mismatch => Err(Error::RankMismatch {
                op: op.name(),
                message: call::match_p2p(
                    &Call::decode(&call(Status::Ready)).expect("our own call"),
                    group.rank(),
                    dst,
                    dtype_of(answer.dtype).unwrap_or(x.dtype()),
                    &answer.shape,
                )
                .err()
                .unwrap_or_default(),
            }),
        }
    });
    match r {
        Ok(r) => r,
        Err(e) if !started => failed(e),
        Err(e) => Err(e),
    }
}

/// The dtype a call's code names, if any.
fn dtype_of(code: u64) -> Option<DType> {
    DType::ALL
        .into_iter()
        .find(|&d| call::dtype_code(d) == code)
}

/// An array of `shape` and `dtype` received from rank `src` of `group`,
/// on the group's device (MLX `recv(shape, dtype, src)`; MPI's
/// `MPI_Recv`): the sender's [`send`] must be of that shape and dtype.
///
/// # Errors
/// [`Error::InvalidRank`] for a `src` outside the group or this rank;
/// [`Error::MissingFeature`] for f64 on a device without it, and
/// [`Error::TooLarge`] past the device's largest binding (the sender is
/// told: it gets [`Error::PeerFailed`]); [`Error::RankMismatch`] when the
/// sender sends another shape or dtype (the sender gets the same error);
/// [`Error::PeerFailed`] when the send failed on the sender's side;
/// [`Error::Timeout`] when nothing comes within [`Group::timeout`] (the
/// receive is cancelled; the group stays usable); the device's errors on
/// upload.
#[track_caller]
pub fn recv(shape: &[usize], dtype: DType, src: usize, group: &Group) -> Result<Array> {
    let op = Op::Send;
    group.check_rank(Op::Send, src, true).map_err(|e| match e {
        Error::InvalidRank { rank, size, me, .. } => Error::InvalidRank {
            op: "recv",
            rank,
            size,
            me,
        },
        e => e,
    })?;
    let device = group.device();
    let local = crate::shape::check_shape("recv", shape)
        .and_then(|()| device.check_dtype("recv", dtype))
        .and_then(|()| {
            device.check_binding(
                "recv",
                crate::shape::numel(shape).saturating_mul(dtype.size_in_bytes()) as u64,
            )
        });
    let comm = &group.inner.comm;
    let origin = device.origin(|| "recv");
    let buffer = {
        let _g = transport::lock();
        group.usable(op)?;
        let Some(words) = transport::receive_words(comm, src, TAG_CALL, group.timeout()) else {
            // Nothing came (the receive is cancelled): this rank's own
            // failure, if it had one, says more than the wait.
            return Err(local.err().unwrap_or(Error::Timeout {
                what: "a sender's description of its data",
                waited: group.timeout(),
            }));
        };
        let sent = Call::decode(&words).map_err(|m| Error::Distributed {
            op: "recv",
            message: format!("rank {src} sent {m}"),
        })?;
        if sent.status != Status::Ready {
            return Err(Error::PeerFailed {
                op: "recv",
                peer: src,
            });
        }
        let result = local.and_then(|()| {
            call::match_p2p(&sent, src, group.rank(), dtype, shape).map_err(|message| {
                Error::RankMismatch {
                    op: "recv",
                    message,
                }
            })
        });
        let answer = |status| {
            let answer = Call::new(op, Some(dtype), shape, src as u64, 0).with(status);
            if transport::send_words(comm, src, TAG_ANSWER, answer.encode(), group.timeout()) {
                Ok(())
            } else {
                Err(group.timeout_error(op, "a sender to take a receive's answer", true))
            }
        };
        if let Err(e) = result {
            let status = match e {
                Error::RankMismatch { .. } => Status::Mismatch,
                _ => Status::Failed,
            };
            answer(status)?;
            return Err(e);
        }
        // The answer goes once the upload buffer is mapped, so that the
        // data has somewhere to go; a failure before that is answered too.
        let nbytes = crate::shape::numel(shape) * dtype.size_in_bytes();
        let mut answered = false;
        let staged =
            crate::transfer::upload_staged(device, "recv", nbytes as u64, origin, |mut dst| {
                answered = true;
                answer(Status::Ready)?;
                let padded = dst.len();
                transport::receive_into(comm, src, TAG_DATA, dst.as_raw_element_ptr(), nbytes);
                dst.slice(nbytes..padded).fill(0);
                Ok(())
            });
        match staged {
            Ok((buffer, ())) => buffer,
            Err(e) => {
                if !answered {
                    answer(Status::Failed)?;
                }
                return Err(e);
            }
        }
    };
    Ok(Array::ready(shape, dtype, device, buffer, origin))
}

/// An array shaped and typed like `like` received from rank `src` (MLX
/// `recv_like`): [`recv`] with `like`'s shape and dtype; `like` must be of
/// the group's device (its values are not read).
///
/// # Errors
/// As [`recv`], and [`Error::DeviceMismatch`] for `like` of another device
/// (the sender is told).
#[track_caller]
pub fn recv_like(like: &Array, src: usize, group: &Group) -> Result<Array> {
    if let Err(e) = group.check_device(Op::Send, like) {
        let e = match e {
            Error::DeviceMismatch { lhs, rhs, .. } => Error::DeviceMismatch {
                op: "recv_like",
                lhs,
                rhs,
            },
            e => e,
        };
        // Answer the sender (if there is one in range) so that it does not
        // wait, then fail.
        if group.check_rank(Op::Send, src, true).is_ok() {
            let _g = transport::lock();
            let comm = &group.inner.comm;
            if let Some(words) = transport::receive_words(comm, src, TAG_CALL, group.timeout()) {
                let sent = Call::decode(&words).ok();
                if sent.is_some_and(|c| c.status == Status::Ready) {
                    let answer = Call::new(Op::Send, None, &[], src as u64, 0).with(Status::Failed);
                    transport::send_words(comm, src, TAG_ANSWER, answer.encode(), group.timeout());
                }
            }
        }
        return Err(e);
    }
    recv(like.shape(), like.dtype(), src, group)
}

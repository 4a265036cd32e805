//! MPI through the `mpi` crate (rsmpi): the library's life (initialised
//! once, finalised when the last group goes), the bounded waits of the
//! call exchange, and the data moves of host buffers. Knows nothing of
//! arrays: bytes, element kinds and counts.
//!
//! Every MPI call of the process happens under [`lock`], so MPI needs only
//! `MPI_THREAD_SERIALIZED` whichever threads call.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;

use super::call::WORDS;

/// The lock every MPI call of the process is made under.
static MPI_LOCK: Mutex<()> = Mutex::new(());

pub(super) fn lock() -> MutexGuard<'static, ()> {
    MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The MPI library while a group uses it: dropping the last handle
/// finalises it (`MPI_Finalize`), unless wgarray found it initialised by
/// someone else, who then finalises it.
pub(super) struct World {
    universe: Option<mpi::environment::Universe>,
}

// SAFETY: the universe is only touched under `lock()`: when the last
// group drops it (`MPI_Finalize`).
unsafe impl Send for World {}
unsafe impl Sync for World {}

impl Drop for World {
    fn drop(&mut self) {
        let _g = lock();
        // Calls that timed out may still complete if their late ranks
        // join: give them a while, so that MPI is finalised with no
        // request pending where it can be helped.
        reap(Some(Instant::now() + REAP_AT_EXIT));
        if let Some(u) = self.universe.take() {
            drop(u);
            *lock_state() = Life::Finalized;
        }
    }
}

enum Life {
    Never,
    Running(Weak<World>),
    Finalized,
}

static LIFE: Mutex<Life> = Mutex::new(Life::Never);

fn lock_state() -> MutexGuard<'static, Life> {
    LIFE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A communicator, used (and freed) only under `lock()`.
pub(super) struct Comm(std::mem::ManuallyDrop<SimpleCommunicator>);

impl Comm {
    fn new(c: SimpleCommunicator) -> Comm {
        Comm(std::mem::ManuallyDrop::new(c))
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        let _g = lock();
        // SAFETY: dropped once, here (`MPI_Comm_free` for a split
        // communicator; nothing for the world's).
        unsafe { std::mem::ManuallyDrop::drop(&mut self.0) }
    }
}

// SAFETY: an MPI communicator handle may be used from any thread under
// MPI_THREAD_SERIALIZED, which `lock()` guarantees.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

impl Comm {
    pub(super) fn rank(&self) -> usize {
        self.0.rank() as usize
    }

    pub(super) fn size(&self) -> usize {
        self.0.size() as usize
    }
}

/// The MPI world: initialised (with `MPI_THREAD_SERIALIZED`) on the first
/// call, shared while a group lives.
///
/// # Errors
/// A message when MPI was finalised already (it cannot start twice in a
/// process) or gives less than serialized threads.
pub(super) fn world() -> Result<(Arc<World>, Comm), String> {
    let _g = lock();
    let mut life = lock_state();
    let world = match &*life {
        Life::Running(w) => w.upgrade(),
        Life::Finalized => {
            return Err(
                "MPI was finalised when this process's last group was dropped, \
                        and MPI cannot be initialised twice in a process: keep a Group \
                        alive for as long as the process communicates"
                    .into(),
            );
        }
        Life::Never => None,
    };
    let world = match world {
        Some(w) => w,
        None => {
            let universe = match mpi::initialize_with_threading(mpi::Threading::Serialized) {
                Some((u, level)) => {
                    if level < mpi::Threading::Serialized {
                        return Err(format!(
                            "the MPI library gives {level:?} thread support; wgarray \
                             needs Serialized (it serialises its own calls)"
                        ));
                    }
                    Some(u)
                }
                // Initialised by someone else (the application's own use
                // of rsmpi): theirs to finalise.
                None => None,
            };
            let w = Arc::new(World { universe });
            *life = Life::Running(Arc::downgrade(&w));
            w
        }
    };
    Ok((world, Comm::new(SimpleCommunicator::world())))
}

/// How long finalising waits for calls that timed out to complete.
const REAP_AT_EXIT: Duration = Duration::from_secs(10);

/// A request whose wait timed out, with the buffers MPI may still read or
/// write: kept until it completes.
struct Abandoned {
    request: ffi::MPI_Request,
    _buffers: Vec<Box<[u64]>>,
}

// SAFETY: touched only under `lock()`.
unsafe impl Send for Abandoned {}

static ABANDONED: Mutex<Vec<Abandoned>> = Mutex::new(Vec::new());

fn abandon(request: ffi::MPI_Request, buffers: Vec<Box<[u64]>>) {
    ABANDONED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Abandoned {
            request,
            _buffers: buffers,
        });
}

/// Free the abandoned requests that completed (each call exchange polls
/// them once); with a `deadline`, keep polling until all have or it
/// passes. Under `lock()`.
fn reap(deadline: Option<Instant>) {
    let mut list = ABANDONED.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        list.retain_mut(|a| {
            let mut flag: c_int = 0;
            // SAFETY: a live request, polled under the MPI lock.
            unsafe { ffi::MPI_Test(&mut a.request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            flag == 0
        });
        match deadline {
            Some(d) if !list.is_empty() && Instant::now() < d => {
                std::thread::sleep(Duration::from_millis(1))
            }
            _ => return,
        }
    }
}

/// Poll `request` until it completes (`true`) or `deadline` passes
/// (`false`, the request still active). Spins with yields for the first
/// thousand polls (a call exchange usually completes in microseconds),
/// then sleeps 50 us between polls. Under `lock()`.
fn wait_until(request: &mut ffi::MPI_Request, deadline: Instant) -> bool {
    let mut polls = 0u32;
    loop {
        let mut flag: c_int = 0;
        // SAFETY: a live request; MPI writes the flag and the status.
        unsafe {
            ffi::MPI_Test(request, &mut flag, ffi::RSMPI_STATUS_IGNORE);
        }
        if flag != 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        polls += 1;
        if polls < 1000 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// Every rank's call words, gathered within `timeout` (`MPI_Iallgather`
/// polled): `None` when the time passed first. The request then stays
/// active (MPI cannot cancel a collective), kept with its buffers until it
/// completes (when the late ranks join; polled by later exchanges and
/// before MPI is finalised); the caller marks the group broken.
pub(super) fn exchange(comm: &Comm, mine: [u64; WORDS], timeout: Duration) -> Option<Vec<u64>> {
    reap(None);
    let deadline = Instant::now() + timeout;
    let send: Box<[u64]> = Box::new(mine);
    let mut recv = vec![0u64; WORDS * comm.size()].into_boxed_slice();
    let dt = u64::equivalent_datatype().as_raw();
    let mut request = std::mem::MaybeUninit::<ffi::MPI_Request>::uninit();
    // SAFETY: both buffers outlive the request: they are freed only after
    // it completed, or leaked.
    let mut request = unsafe {
        ffi::MPI_Iallgather(
            send.as_ptr() as *const c_void,
            WORDS as c_int,
            dt,
            recv.as_mut_ptr() as *mut c_void,
            WORDS as c_int,
            dt,
            comm.0.as_raw(),
            request.as_mut_ptr(),
        );
        request.assume_init()
    };
    if wait_until(&mut request, deadline) {
        Some(recv.into_vec())
    } else {
        abandon(request, vec![send, recv]);
        None
    }
}

/// Which nonblocking point-to-point call [`post_words`] posts.
#[derive(Clone, Copy)]
enum Post {
    Send,
    Receive,
}

/// Post a send (`MPI_Isend`) of the `WORDS` words at `buf` to `peer`, or
/// a receive (`MPI_Irecv`) of as many from `peer` into `buf`, with `tag`;
/// the request.
///
/// # Safety
/// `buf` holds `WORDS` words and stays alive (and, for a receive, unread)
/// until the request completes or is cancelled and waited for.
unsafe fn post_words(
    comm: &Comm,
    peer: usize,
    tag: c_int,
    buf: *mut u64,
    post: Post,
) -> ffi::MPI_Request {
    let mut request = std::mem::MaybeUninit::<ffi::MPI_Request>::uninit();
    let (n, dt, peer) = (
        WORDS as c_int,
        u64::equivalent_datatype().as_raw(),
        peer as c_int,
    );
    let (comm, r) = (comm.0.as_raw(), request.as_mut_ptr());
    // SAFETY: as the caller promises; MPI writes the request.
    unsafe {
        match post {
            Post::Send => ffi::MPI_Isend(buf as *const c_void, n, dt, peer, tag, comm, r),
            Post::Receive => ffi::MPI_Irecv(buf as *mut c_void, n, dt, peer, tag, comm, r),
        };
        request.assume_init()
    }
}

/// Send one call's words to `dest` with `tag` within `timeout`: `false`
/// when the time passed first (the send is then kept until it completes,
/// as in [`exchange`]; the caller marks the group broken).
pub(super) fn send_words(
    comm: &Comm,
    dest: usize,
    tag: c_int,
    words: [u64; WORDS],
    timeout: Duration,
) -> bool {
    let deadline = Instant::now() + timeout;
    let mut send: Box<[u64]> = Box::new(words);
    // SAFETY: the buffer outlives the request (freed after it completes).
    let mut request = unsafe { post_words(comm, dest, tag, send.as_mut_ptr(), Post::Send) };
    if wait_until(&mut request, deadline) {
        true
    } else {
        abandon(request, vec![send]);
        false
    }
}

// Alike in shape to `send_words`, but left apart: a receive that times out
// is cancelled and may still complete, a send is abandoned with its buffer.

/// One call's words from `source` with `tag` within `timeout`: `None` when
/// the time passed first, the receive then cancelled (nothing is left
/// posted that a later message could match).
pub(super) fn receive_words(
    comm: &Comm,
    source: usize,
    tag: c_int,
    timeout: Duration,
) -> Option<[u64; WORDS]> {
    let deadline = Instant::now() + timeout;
    let mut recv = Box::new([0u64; WORDS]);
    // SAFETY: the buffer outlives the request: it completes or is
    // cancelled and waited for before the buffer is freed.
    let mut request = unsafe { post_words(comm, source, tag, recv.as_mut_ptr(), Post::Receive) };
    if wait_until(&mut request, deadline) {
        return Some(*recv);
    }
    let mut status = std::mem::MaybeUninit::<ffi::MPI_Status>::uninit();
    let mut cancelled: c_int = 0;
    // SAFETY: a live receive request; after the cancel, the wait returns
    // at once (cancelled) or with the message that matched meanwhile.
    unsafe {
        ffi::MPI_Cancel(&mut request);
        ffi::MPI_Wait(&mut request, status.as_mut_ptr());
        ffi::MPI_Test_cancelled(status.as_ptr(), &mut cancelled);
    }
    // A message that arrived during the cancel is the one we waited for.
    (cancelled == 0).then_some(*recv)
}

/// The element type a reduction moves, and its host type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Elem {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    F32,
    F64,
    /// f16 or bf16 bits (`u16` to MPI), reduced by user operations.
    Half(HalfKind),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HalfKind {
    F16,
    BF16,
}

/// How to combine two elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Combine {
    Sum,
    Max,
    Min,
    /// Bool words: logical or (all_sum, all_max) and and (all_min).
    Or,
    And,
}

/// Reduce `bytes` (this rank's elements of `elem`, densely) with every
/// rank's by `combine` (`MPI_Allreduce`, blocking: every rank has agreed
/// to this call). Sums of integers wrap; float max and min propagate NaN
/// (user operations, since `MPI_MAX` on NaN depends on the order); f16 and
/// bf16 combine in f64 and round once per pair (MLX does the same). The
/// result goes to `out` (as many bytes as `bytes`, aligned to 8).
pub(super) fn all_reduce(comm: &Comm, elem: Elem, combine: Combine, bytes: &[u8], out: &mut [u8]) {
    use mpi::collective::SystemOperation as S;
    let sys = match combine {
        Combine::Sum => S::sum(),
        Combine::Max => S::max(),
        Combine::Min => S::min(),
        Combine::Or => S::logical_or(),
        Combine::And => S::logical_and(),
    };
    if bytes.is_empty() {
        // Every rank agreed on the shape: none has an element.
        return;
    }
    match (elem, combine) {
        // Open MPI's vectorised MPI_SUM saturates 8- and 16-bit integers
        // (AVX `adds`); wgarray's sums wrap.
        (Elem::I8, Combine::Sum) => reduce_user::<i8>(comm, bytes, out, wrapping_sum::<i8>),
        (Elem::U8, Combine::Sum) => reduce_user::<u8>(comm, bytes, out, wrapping_sum::<u8>),
        (Elem::I16, Combine::Sum) => reduce_user::<i16>(comm, bytes, out, wrapping_sum::<i16>),
        (Elem::U16, Combine::Sum) => reduce_user::<u16>(comm, bytes, out, wrapping_sum::<u16>),
        (Elem::I8, _) => reduce_with::<i8, _>(comm, bytes, out, sys),
        (Elem::U8, _) => reduce_with::<u8, _>(comm, bytes, out, sys),
        (Elem::I16, _) => reduce_with::<i16, _>(comm, bytes, out, sys),
        (Elem::U16, _) => reduce_with::<u16, _>(comm, bytes, out, sys),
        (Elem::I32, _) => reduce_with::<i32, _>(comm, bytes, out, sys),
        (Elem::U32, _) => reduce_with::<u32, _>(comm, bytes, out, sys),
        (Elem::F32, Combine::Sum) => reduce_with::<f32, _>(comm, bytes, out, sys),
        (Elem::F64, Combine::Sum) => reduce_with::<f64, _>(comm, bytes, out, sys),
        (Elem::F32, c) => reduce_user::<u32>(comm, bytes, out, user_fn::<F32Bits>(c)),
        (Elem::F64, c) => reduce_user::<u64>(comm, bytes, out, user_fn::<F64Bits>(c)),
        (Elem::Half(HalfKind::F16), c) => {
            reduce_user::<u16>(comm, bytes, out, user_fn::<F16Bits>(c))
        }
        (Elem::Half(HalfKind::BF16), c) => {
            reduce_user::<u16>(comm, bytes, out, user_fn::<BF16Bits>(c))
        }
    }
}

/// `bytes` as a slice of `T`, without a copy when they are aligned (mapped
/// read-back memory is), else copied.
fn as_elems<T: bytemuck::Pod>(bytes: &[u8]) -> std::borrow::Cow<'_, [T]> {
    match bytemuck::try_cast_slice(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => std::borrow::Cow::Owned(bytemuck::pod_collect_to_vec(bytes)),
    }
}

fn reduce_with<T, O>(comm: &Comm, bytes: &[u8], out: &mut [u8], op: O)
where
    T: bytemuck::Pod + Equivalence,
    O: mpi::collective::Operation,
{
    let send = as_elems::<T>(bytes);
    let recv: &mut [T] = bytemuck::cast_slice_mut(out);
    comm.0.all_reduce_into(&send[..], recv, op);
}

fn reduce_user<T: bytemuck::Pod + Equivalence>(
    comm: &Comm,
    bytes: &[u8],
    out: &mut [u8],
    f: mpi::collective::UnsafeUserFunction,
) {
    // SAFETY: `f` reads and writes `len` elements of the buffers' own type
    // (`T`, the bits of the float type it was instantiated for).
    let op = unsafe { mpi::collective::UnsafeUserOperation::commutative(f) };
    reduce_with::<T, _>(comm, bytes, out, &op)
}

/// A float type as bits: how a user operation reads and writes it.
trait FloatBits {
    type Bits: bytemuck::Pod;
    fn value(bits: Self::Bits) -> f64;
    fn bits(value: f64) -> Self::Bits;
}

/// One unit struct a float type and its [`FloatBits`]: the bits' type,
/// then the conversions from and to f64.
macro_rules! float_bits {
    ($($name:ident: $bits:ty, |$b:ident| $value:expr, |$v:ident| $to:expr;)*) => {$(
        struct $name;
        impl FloatBits for $name {
            type Bits = $bits;
            fn value($b: $bits) -> f64 {
                $value
            }
            fn bits($v: f64) -> $bits {
                $to
            }
        }
    )*};
}

float_bits! {
    F32Bits: u32, |b| f32::from_bits(b) as f64, |v| (v as f32).to_bits();
    F64Bits: u64, |b| f64::from_bits(b), |v| v.to_bits();
    F16Bits: u16, |b| half::f16::from_bits(b).to_f64(), |v| half::f16::from_f64(v).to_bits();
    BF16Bits: u16, |b| half::bf16::from_bits(b).to_f64(), |v| half::bf16::from_f64(v).to_bits();
}

/// A user operation's two buffers of `*len` elements of `T`.
///
/// # Safety
/// `input` and `inout` point to `*len` elements of `T` each, as MPI
/// passes them to a user operation used with `T`'s datatype.
unsafe fn operands<'a, T>(
    input: *mut c_void,
    inout: *mut c_void,
    len: *mut c_int,
) -> (&'a [T], &'a mut [T]) {
    // SAFETY: as the caller promises.
    unsafe {
        let n = *len as usize;
        (
            std::slice::from_raw_parts(input as *const T, n),
            std::slice::from_raw_parts_mut(inout as *mut T, n),
        )
    }
}

/// The user function combining elements of `F` by `c` (`Or` and `And`
/// are for bool words and never reach here).
fn user_fn<F: FloatBits>(c: Combine) -> mpi::collective::UnsafeUserFunction {
    match c {
        Combine::Sum => combine::<F, 0>,
        Combine::Max => combine::<F, 1>,
        _ => combine::<F, 2>,
    }
}

/// `inout[i] = in[i] (sum 0 | max 1 | min 2) inout[i]` over `len` elements
/// of `F`'s bits; max and min return a NaN operand (either one's bits).
unsafe extern "C" fn combine<F: FloatBits, const OP: u8>(
    input: *mut c_void,
    inout: *mut c_void,
    len: *mut c_int,
    _datatype: *mut ffi::MPI_Datatype,
) {
    // SAFETY: MPI passes two buffers of `len` elements of the datatype the
    // operation was used with, `F::Bits` (see `all_reduce`).
    let (a, b) = unsafe { operands::<F::Bits>(input, inout, len) };
    for (x, y) in a.iter().zip(b.iter_mut()) {
        let (u, v) = (F::value(*x), F::value(*y));
        *y = match OP {
            0 => F::bits(u + v),
            _ if u.is_nan() => *x,
            _ if v.is_nan() => *y,
            1 => F::bits(u.max(v)),
            _ => F::bits(u.min(v)),
        };
    }
}

/// Integers that add with wrap-around.
trait WrappingAdd: bytemuck::Pod {
    fn wrapping(self, other: Self) -> Self;
}

macro_rules! wrapping_add {
    ($($t:ty),*) => {$(
        impl WrappingAdd for $t {
            fn wrapping(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
        }
    )*};
}
wrapping_add!(i8, u8, i16, u16);

/// `inout[i] = in[i] + inout[i]`, wrapping, over `len` elements of `T`.
unsafe extern "C" fn wrapping_sum<T: WrappingAdd>(
    input: *mut c_void,
    inout: *mut c_void,
    len: *mut c_int,
    _datatype: *mut ffi::MPI_Datatype,
) {
    // SAFETY: MPI passes two buffers of `len` elements of the datatype the
    // operation was used with, `T` (see `all_reduce`).
    let (a, b) = unsafe { operands::<T>(input, inout, len) };
    for (x, y) in a.iter().zip(b.iter_mut()) {
        *y = x.wrapping(*y);
    }
}

/// Every rank's bytes, concatenated in rank order into `out` (`counts[r]`
/// bytes from rank `r`; `MPI_Allgatherv`, blocking: every rank agreed).
/// MPI only writes `out`.
pub(super) fn all_gather_into(
    comm: &Comm,
    bytes: &[u8],
    counts: &[usize],
    out: std::ptr::NonNull<u8>,
) {
    if counts.iter().all(|&n| n == 0) {
        return;
    }
    let c: Vec<c_int> = counts.iter().map(|&n| n as c_int).collect();
    let displs: Vec<c_int> = counts
        .iter()
        .scan(0usize, |acc, &n| {
            let d = *acc;
            *acc += n;
            Some(d as c_int)
        })
        .collect();
    let byte = u8::equivalent_datatype().as_raw();
    // SAFETY: `out` holds the sum of `counts` bytes (the caller's mapped
    // upload range); MPI reads `bytes` and writes `out`.
    unsafe {
        ffi::MPI_Allgatherv(
            bytes.as_ptr() as *const c_void,
            bytes.len() as c_int,
            byte,
            out.as_ptr() as *mut c_void,
            c.as_ptr(),
            displs.as_ptr(),
            byte,
            comm.0.as_raw(),
        );
    }
}

/// The root's half of `MPI_Bcast` (blocking: every rank agreed): `bytes`
/// go to every rank (MPI only reads them).
pub(super) fn broadcast_from(comm: &Comm, root: usize, bytes: &[u8]) {
    if bytes.is_empty() {
        // Every rank agreed on the shape: nothing to move.
        return;
    }
    // SAFETY: MPI_Bcast only reads the root's buffer.
    unsafe { bcast(comm, root, bytes.as_ptr() as *mut c_void, bytes.len()) }
}

/// The other ranks' half of `MPI_Bcast`: `len` bytes from `root` into
/// `out` (MPI only writes them).
pub(super) fn broadcast_into(comm: &Comm, root: usize, out: std::ptr::NonNull<u8>, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: `out` holds `len` bytes (the caller's mapped upload range).
    unsafe { bcast(comm, root, out.as_ptr() as *mut c_void, len) }
}

/// `MPI_Bcast` of the `len` bytes at `buf` from `root`: the root's are
/// read, the other ranks' written.
///
/// # Safety
/// `buf` holds `len` bytes, writable on every rank but the root.
unsafe fn bcast(comm: &Comm, root: usize, buf: *mut c_void, len: usize) {
    let byte = u8::equivalent_datatype().as_raw();
    // SAFETY: as the caller promises.
    unsafe {
        ffi::MPI_Bcast(buf, len as c_int, byte, root as c_int, comm.0.as_raw());
    }
}

/// Send `bytes` to `dest` with `tag` (blocking: the receiver has agreed;
/// nothing for no bytes, as the receiver expects none).
pub(super) fn send_bytes(comm: &Comm, dest: usize, tag: c_int, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    comm.0
        .process_at_rank(dest as i32)
        .send_with_tag(bytes, tag);
}

/// `len` bytes from `source` with `tag` into `out` (`MPI_Recv`, blocking:
/// the sender has agreed; MPI only writes `out`).
pub(super) fn receive_into(
    comm: &Comm,
    source: usize,
    tag: c_int,
    out: std::ptr::NonNull<u8>,
    len: usize,
) {
    if len == 0 {
        return;
    }
    // SAFETY: `out` holds `len` bytes (the caller's mapped upload range).
    unsafe {
        ffi::MPI_Recv(
            out.as_ptr() as *mut c_void,
            len as c_int,
            u8::equivalent_datatype().as_raw(),
            source as c_int,
            tag,
            comm.0.as_raw(),
            ffi::RSMPI_STATUS_IGNORE,
        );
    }
}

/// The communicator of the ranks that pass the same `color`, ordered by
/// `key` then rank (`MPI_Comm_split`, blocking: every rank agreed).
pub(super) fn split(comm: &Comm, color: i32, key: i32) -> Comm {
    Comm::new(
        comm.0
            .split_by_color_with_key(Color::with_value(color), key)
            .expect("a non-negative colour always gives a communicator"),
    )
}

/// Whether this process was started by an MPI launcher (`mpirun`,
/// `mpiexec`, `srun`): the environment variables of Open MPI, MPICH and
/// PMI-based launchers.
pub(super) fn launched() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

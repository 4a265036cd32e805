//! Shape operations. All of them are views where strides allow (no copy
//! until a kernel needs contiguity; kernels read strided input): reshape,
//! transpose/permute, broadcast_to, expand_dims, squeeze, flatten, slice.

use crate::axis::{Axes, Axis};
use crate::graph::{Primitive, View};
use crate::shape::{INFER, broadcast_shapes, check_shape, normalize_axis, numel};
use crate::{Array, Error, Result};

/// One axis of [`Array::slice`]: NumPy's `start:stop:step`. `None` bounds
/// mean the whole axis in the step's direction; negative bounds count from
/// the end; out-of-range bounds are clipped, as in NumPy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// First index (inclusive).
    pub start: Option<isize>,
    /// Last index (exclusive).
    pub stop: Option<isize>,
    /// Step; not 0. Negative steps walk backwards.
    pub step: isize,
}

impl Slice {
    /// The whole axis (`:`).
    pub const FULL: Slice = Slice {
        start: None,
        stop: None,
        step: 1,
    };

    /// `start:stop:step`.
    pub fn new(start: Option<isize>, stop: Option<isize>, step: isize) -> Slice {
        Slice { start, stop, step }
    }

    /// `start:stop`.
    pub fn range(start: isize, stop: isize) -> Slice {
        Slice::new(Some(start), Some(stop), 1)
    }

    /// The whole axis with a step (`::step`).
    pub fn step(step: isize) -> Slice {
        Slice::new(None, None, step)
    }

    /// NumPy `slice.indices(len)`: (first, count, step).
    pub(crate) fn resolve(self, axis: usize, len: usize) -> Result<(usize, usize, isize)> {
        if self.step == 0 {
            return Err(Error::InvalidArgument(format!(
                "slice: the step of axis {axis} is 0"
            )));
        }
        let len = len as isize;
        let clip = |v: isize, lo: isize, hi: isize| v.clamp(lo, hi);
        let norm = |v: isize| if v < 0 { v + len } else { v };
        let (start, stop) = if self.step > 0 {
            (
                self.start.map_or(0, |s| clip(norm(s), 0, len)),
                self.stop.map_or(len, |s| clip(norm(s), 0, len)),
            )
        } else {
            (
                self.start.map_or(len - 1, |s| clip(norm(s), -1, len - 1)),
                self.stop.map_or(-1, |s| clip(norm(s), -1, len - 1)),
            )
        };
        // In unsigned arithmetic, so that a step of isize::MAX or MIN (one
        // element, as NumPy) cannot overflow.
        let span = if self.step > 0 {
            stop - start
        } else {
            start - stop
        };
        let count = match span.max(0) as usize {
            0 => 0,
            s => (s - 1) / self.step.unsigned_abs() + 1,
        };
        // With at most one element the step moves nothing: 1 keeps the
        // view's strides (stride times step) from overflowing.
        let step = if count <= 1 { 1 } else { self.step };
        Ok((start.max(0) as usize, count, step))
    }
}

macro_rules! slice_from_ranges {
    ($($t:ty),*) => {$(
        impl From<std::ops::Range<$t>> for Slice {
            fn from(r: std::ops::Range<$t>) -> Slice {
                Slice::new(Some(index(r.start)), Some(index(r.end)), 1)
            }
        }
        impl From<std::ops::RangeInclusive<$t>> for Slice {
            /// `a..=b`: through `b`; `..=-1` is the whole axis, as `..`.
            fn from(r: std::ops::RangeInclusive<$t>) -> Slice {
                let end = index(*r.end());
                Slice::new(Some(index(*r.start())), (end != -1).then(|| end.saturating_add(1)), 1)
            }
        }
        impl From<std::ops::RangeFrom<$t>> for Slice {
            fn from(r: std::ops::RangeFrom<$t>) -> Slice {
                Slice::new(Some(index(r.start)), None, 1)
            }
        }
        impl From<std::ops::RangeTo<$t>> for Slice {
            fn from(r: std::ops::RangeTo<$t>) -> Slice {
                Slice::new(None, Some(index(r.end)), 1)
            }
        }
        impl From<std::ops::RangeToInclusive<$t>> for Slice {
            fn from(r: std::ops::RangeToInclusive<$t>) -> Slice {
                let end = index(r.end);
                Slice::new(None, (end != -1).then(|| end.saturating_add(1)), 1)
            }
        }
    )*};
}

/// A slice bound of any integer type [`Slice`] converts from, as `isize`
/// (a `usize` past `isize::MAX` is clipped like any bound past the end).
fn index<T: TryInto<isize>>(i: T) -> isize {
    i.try_into().unwrap_or(isize::MAX)
}

slice_from_ranges!(isize, i32, usize);

impl From<std::ops::RangeFull> for Slice {
    fn from(_: std::ops::RangeFull) -> Slice {
        Slice::FULL
    }
}

impl Array {
    #[track_caller]
    fn view_node(&self, view: View, shape: Vec<usize>) -> Array {
        Array::from_node(
            self.device(),
            Primitive::View(view),
            vec![self.clone()],
            vec![(shape, self.dtype())],
        )
        .pop()
        .expect("one output")
    }

    /// The same elements, in row-major order, under `shape` (NumPy
    /// `reshape`). One entry may be [`crate::shape::INFER`] (NumPy's and
    /// MLX's `-1`): its length is inferred from the others. A view when
    /// the strides allow it, else a copy on eval.
    ///
    /// ```
    /// # use wgarray::{Array, DType, Device, shape::INFER};
    /// # let device = Device::new_default()?;
    /// let x = Array::zeros(&[2, 3, 4], DType::F32, &device)?;
    /// assert_eq!(x.reshape(&[6, INFER])?.shape(), &[6, 4]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the sizes differ, for more than one
    /// `INFER`, or for `INFER` beside a 0 (NumPy refuses it too: any length
    /// fits); [`Error::TooLarge`] for more than
    /// [`crate::shape::MAX_DIMS`] dimensions.
    #[track_caller]
    pub fn reshape(&self, shape: &[usize]) -> Result<Array> {
        let size = self.size();
        let bad = |why: &str| {
            Error::InvalidArgument(format!(
                "reshape: cannot reshape an array of shape {:?} into `shape` {}: {why}",
                self.shape(),
                crate::shape::display_shape(shape),
            ))
        };
        let holes = shape.iter().filter(|&&d| d == INFER).count();
        if holes > 1 {
            return Err(bad("at most one length can be inferred"));
        }
        let known_dims: Vec<usize> = shape.iter().copied().filter(|&d| d != INFER).collect();
        let known = crate::shape::checked_numel(&known_dims);
        if holes == 1 && known == Some(0) {
            return Err(bad("a length beside a 0 cannot be inferred"));
        }
        let new: Vec<usize> = shape
            .iter()
            .map(|&d| {
                if d == INFER {
                    known.and_then(|k| size.checked_div(k)).unwrap_or(0)
                } else {
                    d
                }
            })
            .collect();
        check_shape("reshape", &new)?;
        if numel(&new) != size {
            return Err(bad(&format!("{size} elements do not fit")));
        }
        if self.dtype().is_quantized() {
            crate::ops::quant::check_block_shape("reshape", &new, self.dtype())?;
        }
        Ok(self.reshape_to(&new))
    }

    /// Reshape to a shape of the same size (checked by the caller).
    #[track_caller]
    pub(crate) fn reshape_to(&self, shape: &[usize]) -> Array {
        if shape == self.shape() {
            return self.clone();
        }
        self.view_node(View::Reshape, shape.to_vec())
    }

    /// A 1-D array of all elements in row-major order (NumPy `ravel`): a
    /// view when the strides allow, else one copy on eval.
    #[track_caller]
    pub fn ravel(&self) -> Array {
        self.reshape_to(&[self.size()])
    }

    /// Axes `start_axis ..= end_axis` merged into one (MLX `flatten(a,
    /// start_axis, end_axis)`, PyTorch `flatten`; NumPy's `flatten` is
    /// `x.flatten(0, -1)`, or [`Array::ravel`]). Negative axes count from
    /// the end; a 0-d array becomes shape `[1]`. A view when the strides
    /// allow, else one copy on eval.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] when `start_axis`
    /// comes after `end_axis`.
    #[track_caller]
    pub fn flatten(&self, start_axis: impl Into<Axis>, end_axis: impl Into<Axis>) -> Result<Array> {
        let (start_axis, end_axis) = (start_axis.into().get(), end_axis.into().get());
        if self.ndim() == 0 {
            // MLX: a scalar flattens to one element; its only axes are 0
            // and -1 of the (virtual) 1-D result.
            normalize_axis("flatten", start_axis, 1)?;
            normalize_axis("flatten", end_axis, 1)?;
            return Ok(self.reshape_to(&[1]));
        }
        let (start, end) = (
            normalize_axis("flatten", start_axis, self.ndim())?,
            normalize_axis("flatten", end_axis, self.ndim())?,
        );
        if start > end {
            return Err(Error::InvalidArgument(format!(
                "flatten: start_axis {start_axis} comes after end_axis {end_axis} \
                 for an array of {} dimensions",
                self.ndim()
            )));
        }
        let s = self.shape();
        let mut shape = s[..start].to_vec();
        shape.push(s[start..=end].iter().product());
        shape.extend_from_slice(&s[end + 1..]);
        Ok(self.reshape_to(&shape))
    }

    /// Axes in the order `axes` gives (NumPy `transpose(x, axes)`), a view:
    /// `x.permute([1, 0, 2])`; `None` reverses them, as NumPy's
    /// `axes=None` ([`Array::transpose`]).
    ///
    /// # Errors
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] unless `axes` is
    /// a permutation of the array's axes (negative entries count from the
    /// end).
    #[track_caller]
    pub fn permute(&self, axes: impl Into<Axes>) -> Result<Array> {
        let nd = self.ndim();
        let axes: Vec<usize> = match axes.into() {
            Axes::All => (0..nd).rev().collect(),
            Axes::These(a) => a
                .iter()
                .map(|&a| normalize_axis("permute", a, nd))
                .collect::<Result<_>>()?,
        };
        let mut seen = vec![false; nd];
        for &a in &axes {
            seen[a] = true;
        }
        if axes.len() != nd || seen.iter().any(|s| !s) {
            return Err(Error::InvalidArgument(format!(
                "permute: `axes` {axes:?} are not a permutation of {nd} axes"
            )));
        }
        if self.dtype().is_quantized() && axes.last().is_some_and(|&a| a + 1 != nd) {
            return Err(Error::InvalidArgument(format!(
                "permute: the last axis of a {} array holds its blocks and stays last; \
                 `axes` {axes:?} move it",
                self.dtype()
            )));
        }
        let shape = axes.iter().map(|&a| self.shape()[a]).collect();
        Ok(self.view_node(View::Permute(axes), shape))
    }

    /// Axes reversed (NumPy `transpose` / `.T`), a view. (Of an array of a
    /// block format with more than one axis, it moves the blocks' axis:
    /// evaluating it returns [`Error::OpDType`].)
    #[track_caller]
    pub fn transpose(&self) -> Array {
        let axes: Vec<usize> = (0..self.ndim()).rev().collect();
        let shape = axes.iter().map(|&a| self.shape()[a]).collect();
        self.view_node(View::Permute(axes), shape)
    }

    /// Swap two axes (NumPy `swapaxes`), a view.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`].
    #[track_caller]
    pub fn swapaxes(&self, a: impl Into<Axis>, b: impl Into<Axis>) -> Result<Array> {
        let (a, b) = (
            a.into().resolve("swapaxes", self.ndim())?,
            b.into().resolve("swapaxes", self.ndim())?,
        );
        let mut axes: Vec<isize> = (0..self.ndim() as isize).collect();
        axes.swap(a, b);
        self.permute(&axes)
    }

    /// Axis `source` moved to position `destination`, the others keeping
    /// their order (NumPy/MLX `moveaxis`), a view.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`] for either axis.
    #[track_caller]
    pub fn moveaxis(&self, source: impl Into<Axis>, destination: impl Into<Axis>) -> Result<Array> {
        let nd = self.ndim();
        let (src, dst) = (
            source.into().resolve("moveaxis", nd)?,
            destination.into().resolve("moveaxis", nd)?,
        );
        let mut axes: Vec<isize> = (0..nd as isize).filter(|&a| a != src as isize).collect();
        axes.insert(dst, src as isize);
        self.permute(&axes)
    }

    /// This array repeated along new or length-1 axes to `shape` (NumPy
    /// `broadcast_to`), a view with stride 0 where repeated.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] when the shapes do not broadcast to `shape`;
    /// [`Error::TooLarge`] for more than [`crate::shape::MAX_DIMS`]
    /// dimensions or an element count past `usize`.
    #[track_caller]
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Array> {
        check_shape("broadcast_to", shape)?;
        let out = broadcast_shapes("broadcast_to", self.shape(), shape)?;
        if out != shape {
            return Err(Error::ShapeMismatch {
                op: "broadcast_to",
                lhs: self.shape().to_vec(),
                rhs: shape.to_vec(),
            });
        }
        if shape == self.shape() {
            return Ok(self.clone());
        }
        Ok(self.view_node(View::Broadcast, shape.to_vec()))
    }

    /// New axes of length 1 at `axes`, positions in the result (NumPy/MLX
    /// `expand_dims`; `x.expand_dims(0)`, `x.expand_dims([0, -1])`);
    /// negative positions count from the end of the result, whose rank is
    /// this array's plus the number of axes. A view.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] for a repeated
    /// position or `None`; [`Error::TooLarge`] for a result of more
    /// than [`crate::shape::MAX_DIMS`] dimensions.
    #[track_caller]
    pub fn expand_dims(&self, axes: impl Into<Axes>) -> Result<Array> {
        let axes = match axes.into() {
            Axes::These(a) => a,
            Axes::All => {
                return Err(Error::InvalidArgument(
                    "expand_dims: `axes` is None; it needs the positions of the new axes".into(),
                ));
            }
        };
        let nd = self.ndim() + axes.len();
        let mut new: Vec<usize> = axes
            .iter()
            .map(|&a| normalize_axis("expand_dims", a, nd))
            .collect::<Result<_>>()?;
        new.sort_unstable();
        if new.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!(
                "expand_dims: `axes` {axes:?} repeat a position"
            )));
        }
        let mut rest = self.shape().iter();
        let shape: Vec<usize> = (0..nd)
            .map(|a| {
                if new.binary_search(&a).is_ok() {
                    1
                } else {
                    *rest.next().expect("one length per remaining axis")
                }
            })
            .collect();
        check_shape("expand_dims", &shape)?;
        if self.dtype().is_quantized() {
            crate::ops::quant::check_block_shape("expand_dims", &shape, self.dtype())?;
        }
        Ok(self.reshape_to(&shape))
    }

    /// Without the given axes of length 1, or every axis of length 1 for
    /// `None` (NumPy `squeeze`), a view. `x.squeeze(0)`,
    /// `x.squeeze([0, 2])`, `x.squeeze(None)`.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] for a repeated
    /// axis or an axis whose length is not 1.
    #[track_caller]
    pub fn squeeze(&self, axes: impl Into<Axes>) -> Result<Array> {
        let axes = axes.into();
        let drop: Vec<usize> = match &axes {
            Axes::All => (0..self.ndim()).filter(|&a| self.shape()[a] == 1).collect(),
            Axes::These(ax) => ax
                .iter()
                .map(|&a| normalize_axis("squeeze", a, self.ndim()))
                .collect::<Result<_>>()?,
        };
        let mut seen = drop.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != drop.len() {
            return Err(Error::InvalidArgument(format!(
                "squeeze: `axes` {axes:?} repeat an axis"
            )));
        }
        if let Some(&a) = drop.iter().find(|&&a| self.shape()[a] != 1) {
            return Err(Error::InvalidArgument(format!(
                "squeeze: axis {a} of `axes` has length {}, not 1",
                self.shape()[a]
            )));
        }
        let shape: Vec<usize> = (0..self.ndim())
            .filter(|a| !drop.contains(a))
            .map(|a| self.shape()[a])
            .collect();
        Ok(self.reshape_to(&shape))
    }

    /// NumPy basic slicing: one [`Slice`] per leading axis (the rest are
    /// whole), a view. `x.slice(&[(1..5).into(), Slice::step(-2)])` is
    /// NumPy's `x[1:5, ::-2]`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more slices than axes or a step of 0.
    #[track_caller]
    pub fn slice(&self, slices: &[Slice]) -> Result<Array> {
        if slices.len() > self.ndim() {
            return Err(Error::InvalidArgument(format!(
                "slice: {} slices for an array of {} dimensions",
                slices.len(),
                self.ndim()
            )));
        }
        let mut starts = Vec::with_capacity(self.ndim());
        let mut steps = Vec::with_capacity(self.ndim());
        let mut shape = Vec::with_capacity(self.ndim());
        for (a, &len) in self.shape().iter().enumerate() {
            let s = slices.get(a).copied().unwrap_or(Slice::FULL);
            let (start, count, step) = s.resolve(a, len)?;
            starts.push(if count == 0 { 0 } else { start });
            steps.push(step);
            shape.push(count);
        }
        let d = self.dtype();
        if d.is_quantized()
            && let (Some(&start), Some(&count), Some(&step)) =
                (starts.last(), shape.last(), steps.last())
            && !(start.is_multiple_of(d.block_size())
                && count.is_multiple_of(d.block_size())
                && (step == 1 || count == 0))
        {
            return Err(Error::InvalidArgument(format!(
                "slice: the last axis of a {d} array is sliced in whole blocks of {} \
                 (step 1), not from {start}, {count} elements, step {step}",
                d.block_size()
            )));
        }
        Ok(self.view_node(View::Slice { starts, steps }, shape))
    }
}

impl Array {
    /// Elements at `indices` along `axis`, out-of-range indices clamped to
    /// the axis (NumPy `take(mode="clip")`; [`Array::take_checked`] raises
    /// instead, as PyTorch's and MLX's default). An embedding lookup is
    /// `weights.take(&token_ids, 0)`. The result's shape is
    /// `x.shape[..axis] + indices.shape + x.shape[axis + 1..]`; `None`
    /// flattens `x` first. `indices` are any integer dtype (PyTorch's int64
    /// indices arrive as i32: see [`crate::Element`]); a negative index
    /// counts from the end, and one past either end is clamped to the first
    /// or last element: a kernel cannot raise, so a bad token id gives
    /// another token's row, silently.
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`]; [`Error::InvalidAxis`];
    /// [`Error::InvalidArgument`] for indices into an empty axis or a list
    /// of several axes; [`Error::TooLarge`] for a result of more than
    /// [`crate::shape::MAX_DIMS`] dimensions or past the largest storage
    /// binding; [`Error::OpDType`] for indices that are not integers.
    #[track_caller]
    pub fn take(&self, indices: &Array, axis: impl Into<Axes>) -> Result<Array> {
        self.take_op("take", indices, axis)
    }

    /// [`Array::take`] that refuses an out-of-range index instead of
    /// clamping it (NumPy `take(mode="raise")`, PyTorch `index_select` and
    /// `embedding`, MLX `take`). `indices` are evaluated and their minimum
    /// and maximum read back at the call (one reduction dispatch each, one
    /// submission, 8 bytes read): the call waits for the GPU, and inside a
    /// function traced by [`crate::compile()`] it is [`Error::Traced`]
    /// (check the indices outside, or use `take`). The result is lazy, as
    /// `take`'s.
    ///
    /// ```
    /// # use wgarray::{Array, Device, DType, Error};
    /// # let device = Device::new_default()?;
    /// let table = Array::ones(&[4, 2], DType::F32, &device)?;
    /// let ids = Array::from_slice(&[0i32, 3, 4], &[3], &device)?;
    /// assert!(matches!(
    ///     table.take_checked(&ids, 0),
    ///     Err(Error::IndexOutOfRange { op: "take_checked", index: 4, len: 4 })
    /// ));
    /// assert_eq!(table.take(&ids, 0)?.shape(), &[3, 2]); // clamped: row 3 twice
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Array::take`], naming `take_checked`; then
    /// [`Error::IndexOutOfRange`] with the smallest or largest index when
    /// one is outside `-len..len`; the errors of evaluating `indices`.
    #[track_caller]
    pub fn take_checked(&self, indices: &Array, axis: impl Into<Axes>) -> Result<Array> {
        const OP: &str = "take_checked";
        let axis = axis.into();
        let out = self.take_op(OP, indices, axis.clone())?;
        let len = match axis.one(OP, self.ndim())? {
            None => self.size(),
            Some(a) => self.shape()[a],
        };
        if indices.size() > 0 {
            let lo = indices.min(None, false)?;
            let hi = indices.max(None, false)?;
            crate::eval(&[&lo, &hi])?;
            // Every integer dtype is exact in f64.
            let (lo, hi) = (lo.to_f64_vec()?[0], hi.to_f64_vec()?[0]);
            let n = len as f64;
            for index in [lo, hi] {
                if index < -n || index >= n {
                    return Err(Error::IndexOutOfRange {
                        op: OP,
                        index: index as i64,
                        len,
                    });
                }
            }
        }
        Ok(out)
    }

    #[track_caller]
    fn take_op(&self, op: &'static str, indices: &Array, axis: impl Into<Axes>) -> Result<Array> {
        super::same_device(op, self, indices)?;
        let axis = axis.into().one(op, self.ndim())?;
        let len = axis.map_or(self.size(), |a| self.shape()[a]);
        if len == 0 && indices.size() > 0 {
            return Err(Error::InvalidArgument(format!(
                "{op}: `indices` index an empty axis (shape {:?}, axis {axis:?})",
                self.shape()
            )));
        }
        let (outer, inner) = match axis {
            None => (&[][..], &[][..]),
            Some(a) => (&self.shape()[..a], &self.shape()[a + 1..]),
        };
        let shape: Vec<usize> = [outer, indices.shape(), inner].concat();
        self.device().check_array(op, &shape, self.dtype())?;
        if !indices.dtype().is_integer() {
            return Err(Error::OpDType {
                op,
                dtype: indices.dtype(),
                takes: "integer indices (int8 to int32, uint8 to uint32)",
            });
        }
        if self.dtype().is_quantized() && axis.is_none_or(|a| a + 1 == self.ndim()) {
            return Err(Error::InvalidArgument(format!(
                "take: the elements of a {} array lie in blocks along its last axis; it takes \
                 whole rows, along another axis (got axis {axis:?})",
                self.dtype()
            )));
        }
        let (x, axis) = match axis {
            None => (self.ravel(), 0),
            Some(a) => (self.clone(), a),
        };
        Ok(Array::from_node(
            self.device(),
            Primitive::Take { axis },
            vec![x.clone(), indices.clone()],
            vec![(shape, x.dtype())],
        )
        .pop()
        .expect("one output"))
    }
}

/// How [`Array::split`] divides an axis, as NumPy's `indices_or_sections`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitSpec {
    /// This many equal parts; the axis length must divide evenly.
    Sections(usize),
    /// Cut before each of these indices (NumPy slicing: an index past the end
    /// or below its predecessor gives an empty part).
    Indices(Vec<usize>),
}

impl From<usize> for SplitSpec {
    fn from(n: usize) -> Self {
        SplitSpec::Sections(n)
    }
}

impl From<&[usize]> for SplitSpec {
    fn from(v: &[usize]) -> Self {
        SplitSpec::Indices(v.to_vec())
    }
}

impl From<Vec<usize>> for SplitSpec {
    fn from(v: Vec<usize>) -> Self {
        SplitSpec::Indices(v)
    }
}

impl<const N: usize> From<[usize; N]> for SplitSpec {
    fn from(v: [usize; N]) -> Self {
        SplitSpec::Indices(v.to_vec())
    }
}

impl Array {
    /// NumPy/MLX `split(x, indices_or_sections, axis)`: parts of `self` along
    /// `axis` (negative counts from the end), in order.
    ///
    /// One multi-output node; on eval each live output is one strided-copy
    /// dispatch (dead outputs cost nothing), all in the eval's one submission.
    /// Any dtype.
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3], &device)?;
    /// let parts = x.split([1], -1)?;
    /// assert_eq!(parts[0].to_vec::<i32>()?, vec![0, 3]);
    /// assert_eq!(parts[1].to_vec::<i32>()?, vec![1, 2, 4, 5]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] for zero sections
    /// or sections that do not divide the axis.
    #[track_caller]
    pub fn split(&self, spec: impl Into<SplitSpec>, axis: impl Into<Axis>) -> Result<Vec<Array>> {
        let axis = axis.into().resolve("split", self.ndim())?;
        let len = self.shape()[axis];
        let bounds: Vec<(usize, usize)> = match spec.into() {
            SplitSpec::Sections(0) => {
                return Err(Error::InvalidArgument(
                    "split: `indices_or_sections` asks for 0 sections".into(),
                ));
            }
            SplitSpec::Sections(n) if !len.is_multiple_of(n) => {
                return Err(Error::InvalidArgument(format!(
                    "split: an axis of length {len} does not split into {n} equal sections"
                )));
            }
            SplitSpec::Sections(n) => (0..n).map(|i| (i * len / n, (i + 1) * len / n)).collect(),
            SplitSpec::Indices(idx) => {
                let mut cuts = vec![0];
                cuts.extend(idx.iter().map(|&i| i.min(len)));
                cuts.push(len);
                cuts.windows(2).map(|w| (w[0], w[1].max(w[0]))).collect()
            }
        };
        let d = self.dtype();
        if d.is_quantized()
            && axis + 1 == self.ndim()
            && bounds.iter().any(|&(s, e)| {
                !(s.is_multiple_of(d.block_size()) && e.is_multiple_of(d.block_size()))
            })
        {
            return Err(Error::InvalidArgument(format!(
                "split: the last axis of a {d} array splits only between blocks of {} \
                 elements, not at {bounds:?}",
                d.block_size()
            )));
        }
        let outputs = bounds
            .iter()
            .map(|&(s, e)| {
                let mut shape = self.shape().to_vec();
                shape[axis] = e - s;
                (shape, self.dtype())
            })
            .collect::<Vec<_>>();
        for (shape, dtype) in &outputs {
            self.device().check_array("split", shape, *dtype)?;
        }
        let starts = bounds.iter().map(|b| b.0).collect();
        Ok(Array::from_node(
            self.device(),
            Primitive::Split { axis, starts },
            vec![self.clone()],
            outputs,
        ))
    }
}

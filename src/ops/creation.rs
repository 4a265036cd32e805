//! Arrays made from other arrays: `zeros_like`, `ones_like`, `full_like`,
//! `diag`, `diagonal`, `trace`, `tile`, `repeat`, `meshgrid`, `pad`,
//! `roll`, `broadcast_arrays`, `atleast_1d`/`2d`/`3d`.
//!
//! All are composed from existing primitives, no kernel of their own:
//! views (reshape, broadcast, slice, permute) cost nothing, a reshape of a
//! broadcast view is one copy dispatch, and `concatenate` is one dispatch
//! per group of up to 7 inputs, reading its inputs through their strides
//! (so a broadcast constant or a sliced edge is never materialised). The
//! dispatch count of each op is in its docs and in docs/OPS.md.

use crate::axis::{Axes, Axis};
use crate::ops::concat::concatenate;
use crate::ops::shape::Slice;
use crate::shape::{MAX_DIMS, broadcast_shapes, check_shape};
use crate::{Array, Error, Result, Scalar};

/// How [`meshgrid`] lays out its outputs (NumPy's `indexing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Indexing {
    /// Cartesian (NumPy's default): with inputs of lengths `n0, n1, n2, ...`
    /// every output has shape `[n1, n0, n2, ...]`.
    #[default]
    Xy,
    /// Matrix: every output has shape `[n0, n1, n2, ...]`.
    Ij,
}

/// What [`Array::pad`] puts in the new elements (NumPy's `mode`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// This value, converted to the array's dtype (NumPy `mode="constant"`
    /// with `constant_values`).
    Constant(f64),
    /// The edge element of each axis, repeated (NumPy `mode="edge"`).
    Edge,
}

impl Array {
    /// Zeros of this array's shape and dtype (NumPy/MLX `zeros_like`).
    /// Lazy: one fill dispatch on eval (none for an empty array).
    #[track_caller]
    pub fn zeros_like(&self) -> Array {
        // The shape is this array's, checked when it was made.
        Array::full_bits(self.shape(), 0, self.dtype(), self.device())
    }

    /// Ones of this array's shape and dtype (NumPy/MLX `ones_like`).
    #[track_caller]
    pub fn ones_like(&self) -> Array {
        // 1 as `true`: every dtype holds it.
        let word = self.dtype().bits_of(1.0);
        Array::full_bits(self.shape(), word, self.dtype(), self.device())
    }

    /// `value` in every element, of this array's shape and dtype (NumPy
    /// `full_like(a, fill_value)`). `value` is any [`Scalar`], converted to
    /// the dtype as [`Array::full`] does (the array's dtype wins: the
    /// scalar is weak, as NumPy 2's). For another dtype use
    /// `Array::full(x.shape(), value, dtype, x.device())`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an integer `value` outside an integer
    /// dtype's range, as [`Array::full`].
    #[track_caller]
    pub fn full_like(&self, value: impl Scalar) -> Result<Array> {
        super::refuse_blocks("full_like", &[self])?;
        let word = value.value().bits("full_like", self.dtype())?;
        Ok(Array::full_bits(
            self.shape(),
            word,
            self.dtype(),
            self.device(),
        ))
    }

    /// The diagonal with `offset` (above the main one for `offset > 0`,
    /// below for `< 0`) of the matrices spanned by `axis1` and `axis2`
    /// (NumPy `diagonal(a, offset, axis1, axis2)`, MLX `diagonal`): the
    /// result drops both axes and appends one of the diagonal's length
    /// (0 when the offset is past the matrix). Any dtype.
    ///
    /// A view of the input's buffer when the two axes can be merged
    /// (`x.diagonal(0, 0, 1)` of a dense matrix: no dispatch), otherwise
    /// one copy dispatch first. Unlike NumPy (a read-only view) the
    /// result is an ordinary array.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for fewer than 2 dimensions or equal
    /// axes; [`Error::InvalidAxis`].
    #[track_caller]
    pub fn diagonal(
        &self,
        offset: isize,
        axis1: impl Into<Axis>,
        axis2: impl Into<Axis>,
    ) -> Result<Array> {
        let (axis1, axis2) = (axis1.into(), axis2.into());
        if self.ndim() < 2 {
            return Err(Error::InvalidArgument(format!(
                "diagonal: needs an array of at least 2 dimensions, got shape {:?}",
                self.shape()
            )));
        }
        let (a1, a2) = (
            axis1.resolve("diagonal", self.ndim())?,
            axis2.resolve("diagonal", self.ndim())?,
        );
        if a1 == a2 {
            return Err(Error::InvalidArgument(format!(
                "diagonal: axis1 and axis2 are the same axis ({}, {})",
                axis1.get(),
                axis2.get()
            )));
        }
        let (m, n) = (self.shape()[a1], self.shape()[a2]);
        let len = if offset >= 0 {
            m.min(n.saturating_sub(offset.unsigned_abs()))
        } else {
            n.min(m.saturating_sub(offset.unsigned_abs()))
        };
        let mut order: Vec<isize> = (0..self.ndim())
            .filter(|&a| a != a1 && a != a2)
            .map(|a| a as isize)
            .collect();
        let mut shape: Vec<usize> = order.iter().map(|&a| self.shape()[a as usize]).collect();
        if len == 0 {
            shape.push(0);
            return Ok(Array::full_bits(&shape, 0, self.dtype(), self.device()));
        }
        order.extend([a1 as isize, a2 as isize]);
        shape.push(m * n);
        let flat = self.permute(&order)?.reshape_to(&shape);
        // Element (i, i + offset) of an m x n row-major matrix is at
        // i (n + 1) + offset, or at (i - offset) n + i for offset < 0.
        let start = if offset >= 0 {
            offset.unsigned_abs()
        } else {
            offset.unsigned_abs() * n
        };
        let step = n + 1;
        let mut slices = vec![Slice::FULL; shape.len() - 1];
        slices.push(Slice::new(
            Some(start as isize),
            Some((start + (len - 1) * step + 1) as isize),
            step as isize,
        ));
        flat.slice(&slices)
    }

    /// NumPy/MLX `diag(v, k)`: for a 1-D `v` of length `n`, the square
    /// matrix of side `n + |k|` with `v` on diagonal `k` and zeros
    /// elsewhere; for a 2-D array, its diagonal `k` (as
    /// [`Array::diagonal`]`(k, 0, 1)`: a view of a dense matrix). Any dtype.
    ///
    /// Building a matrix costs two concatenate dispatches (the vector beside
    /// a broadcast zero block, then the zero prefix and suffix of the
    /// flattened result) and one fill of a single zero.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the array is 1-D or 2-D;
    /// [`Error::TooLarge`] for a matrix whose element count overflows.
    #[track_caller]
    pub fn diag(&self, k: isize) -> Result<Array> {
        match self.ndim() {
            2 => self.diagonal(k, 0, 1),
            1 => {
                let n = self.shape()[0];
                let side = n.saturating_add(k.unsigned_abs());
                self.device()
                    .check_array("diag", &[side, side], self.dtype())?;
                let dtype = self.dtype();
                if n == 0 {
                    return Array::zeros(&[side, side], dtype, self.device());
                }
                let zero = Array::zeros(&[], dtype, self.device())?;
                // [v | zeros(n, side)]: v_i lands at i (side + 1) of the
                // flattened [n, side + 1] block.
                let block = concatenate(
                    &[&self.reshape_to(&[n, 1]), &zero.broadcast_to(&[n, side])?],
                    1,
                )?;
                let flat = block.ravel();
                let prefix = if k >= 0 {
                    k.unsigned_abs()
                } else {
                    k.unsigned_abs() * side
                };
                let total = side * side;
                let take = (total - prefix).min(flat.size());
                let body = flat.slice(&[Slice::range(0, take as isize)])?;
                let head = zero.broadcast_to(&[prefix])?;
                let tail = zero.broadcast_to(&[total - prefix - take])?;
                Ok(concatenate(&[&head, &body, &tail], 0)?.reshape_to(&[side, side]))
            }
            _ => Err(Error::InvalidArgument(format!(
                "diag: needs a 1-D or 2-D array, got shape {:?}",
                self.shape()
            ))),
        }
    }

    /// The sum along diagonal `offset` of the matrices spanned by `axis1`
    /// and `axis2` (NumPy `trace(a, offset, axis1, axis2)`, MLX `trace`):
    /// [`Array::diagonal`] then `sum` over it, so the dtype is `sum`'s
    /// (bool sums as i32; an empty diagonal sums to 0). One reduce
    /// dispatch (plus a copy when the diagonal is not a view).
    ///
    /// # Errors
    /// As [`Array::diagonal`].
    #[track_caller]
    pub fn trace(
        &self,
        offset: isize,
        axis1: impl Into<Axis>,
        axis2: impl Into<Axis>,
    ) -> Result<Array> {
        self.diagonal(offset, axis1, axis2)?
            .sum(Axes::from(-1isize), false)
    }

    /// This array repeated `reps[i]` times along axis `i` (NumPy `tile`,
    /// MLX `tile`): when `reps` is longer than the array's rank, the shape
    /// gains leading axes of length 1; when shorter, `reps` gains leading
    /// 1s. A zero repetition gives an empty axis. Any dtype.
    ///
    /// A broadcast to `[r0, s0, r1, s1, ...]` (axes with `r = 1` left out)
    /// and one reshape: one copy dispatch (none when every repetition is 1).
    /// Past 8 dimensions of that intermediate it tiles axis by axis, a copy
    /// each.
    ///
    /// # Errors
    /// [`Error::TooLarge`] for a result of more than
    /// [`crate::shape::MAX_DIMS`] dimensions or an element count past
    /// `usize`.
    #[track_caller]
    pub fn tile(&self, reps: &[usize]) -> Result<Array> {
        let d = self.ndim().max(reps.len());
        let mut shape = vec![1; d - self.ndim()];
        shape.extend_from_slice(self.shape());
        let mut r = vec![1; d - reps.len()];
        r.extend_from_slice(reps);
        let out: Vec<usize> = shape
            .iter()
            .zip(&r)
            .map(|(s, k)| s.saturating_mul(*k))
            .collect();
        self.device().check_array("tile", &out, self.dtype())?;
        let x = self.reshape_to(&shape);
        let tiled_axes = r.iter().filter(|&&k| k != 1).count();
        if tiled_axes == 0 {
            return Ok(x);
        }
        if d + tiled_axes > MAX_DIMS {
            // One axis at a time keeps every view within the kernels' rank.
            let mut y = x;
            for (axis, &k) in r.iter().enumerate() {
                if k != 1 {
                    let mut one = vec![1; d];
                    one[axis] = k;
                    y = y.tile(&one)?;
                }
            }
            return Ok(y);
        }
        let mut split = Vec::with_capacity(d + tiled_axes);
        let mut wide = Vec::with_capacity(d + tiled_axes);
        for (&s, &k) in shape.iter().zip(&r) {
            if k != 1 {
                split.push(1);
                wide.push(k);
            }
            split.push(s);
            wide.push(s);
        }
        Ok(x.reshape_to(&split).broadcast_to(&wide)?.reshape_to(&out))
    }

    /// Each element repeated `repeats` times along `axis` (NumPy/MLX
    /// `repeat(a, repeats, axis)`), or along the flattened array for `None`
    /// (`x.repeat(2, None)`, `x.repeat(3, 0)`). Any dtype. Unlike NumPy,
    /// `repeats` is one count for every element (as MLX).
    ///
    /// A new axis after `axis`, broadcast to `repeats`, and a reshape: one
    /// copy dispatch.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] for a list of
    /// several axes; [`Error::TooLarge`] for an element count past `usize`.
    /// (A negative count, which NumPy refuses at run time, cannot be
    /// expressed: `repeats` is a `usize`.)
    #[track_caller]
    pub fn repeat(&self, repeats: usize, axis: impl Into<Axes>) -> Result<Array> {
        let (x, axis) = match axis.into().one("repeat", self.ndim())? {
            None => (self.ravel(), 0),
            Some(a) => (self.clone(), a),
        };
        let s = x.shape();
        let mut out = s.to_vec();
        out[axis] = out[axis].saturating_mul(repeats);
        self.device().check_array("repeat", &out, self.dtype())?;
        if repeats == 1 {
            return Ok(x);
        }
        // [pre, s_axis, 1, post], merged where the rank would pass the
        // kernels' limit.
        let (split, wide) = if s.len() < MAX_DIMS {
            let mut split = s[..=axis].to_vec();
            split.push(1);
            split.extend_from_slice(&s[axis + 1..]);
            let mut wide = split.clone();
            wide[axis + 1] = repeats;
            (split, wide)
        } else {
            let pre: usize = s[..axis].iter().product();
            let post: usize = s[axis + 1..].iter().product();
            (
                vec![pre, s[axis], 1, post],
                vec![pre, s[axis], repeats, post],
            )
        };
        Ok(x.reshape_to(&split).broadcast_to(&wide)?.reshape_to(&out))
    }

    /// Padded with `widths[i] = (before, after)` new elements on each side
    /// of axis `i` (NumPy `pad(a, pad_width, mode)`, MLX `pad`); one pair
    /// applies to every axis, as NumPy's broadcasting of `pad_width`.
    /// [`PadMode::Constant`] fills them with a value, [`PadMode::Edge`]
    /// with the axis' edge element. Any dtype.
    ///
    /// One concatenate dispatch per padded axis, reading the input and the
    /// padding (a broadcast constant, or a broadcast edge slice) through
    /// their strides; a constant costs one fill of a single element.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `widths` has neither one pair nor one
    /// per axis, or for [`PadMode::Edge`] on an empty axis that gets
    /// padding (there is no edge to repeat; NumPy refuses it too);
    /// [`Error::TooLarge`] for an element count past `usize`.
    #[track_caller]
    pub fn pad(&self, widths: &[(usize, usize)], mode: PadMode) -> Result<Array> {
        let nd = self.ndim();
        let widths: Vec<(usize, usize)> = match widths.len() {
            n if n == nd => widths.to_vec(),
            1 => vec![widths[0]; nd],
            0 if nd == 0 => vec![],
            n => {
                return Err(Error::InvalidArgument(format!(
                    "pad: pad_width has {n} (before, after) pairs for an array of {nd} \
                     dimensions (shape {:?}); give one pair, or one per axis",
                    self.shape()
                )));
            }
        };
        if mode == PadMode::Edge
            && let Some(a) =
                (0..nd).find(|&a| self.shape()[a] == 0 && widths[a].0 + widths[a].1 > 0)
        {
            return Err(Error::InvalidArgument(format!(
                "pad: mode edge cannot extend axis {a}, which is empty (shape {:?})",
                self.shape()
            )));
        }
        let out: Vec<usize> = (0..nd)
            .map(|a| {
                self.shape()[a]
                    .saturating_add(widths[a].0)
                    .saturating_add(widths[a].1)
            })
            .collect();
        self.device().check_array("pad", &out, self.dtype())?;
        let fill = match mode {
            PadMode::Constant(v) => Some(Array::full(&[], v, self.dtype(), self.device())?),
            PadMode::Edge => None,
        };
        let mut y = self.clone();
        for (axis, &(before, after)) in widths.iter().enumerate() {
            if before + after == 0 {
                continue;
            }
            let len = y.shape()[axis] as isize;
            let head = y.pad_side(axis, before, 0, fill.as_ref())?;
            let tail = y.pad_side(axis, after, len - 1, fill.as_ref())?;
            y = concatenate(&[&head, &y, &tail], axis as isize)?;
        }
        Ok(y)
    }

    /// `count` elements of padding along `axis`: the 0-d `fill` broadcast,
    /// or (for `None`) element `edge` of the axis broadcast. A view.
    #[track_caller]
    fn pad_side(
        &self,
        axis: usize,
        count: usize,
        edge: isize,
        fill: Option<&Array>,
    ) -> Result<Array> {
        let mut shape = self.shape().to_vec();
        shape[axis] = count;
        match fill {
            Some(c) => c.broadcast_to(&shape),
            None => {
                let mut s = vec![Slice::FULL; self.ndim()];
                s[axis] = Slice::range(edge, edge + 1);
                self.slice(&s)?.broadcast_to(&shape)
            }
        }
    }

    /// Elements shifted by `shift` positions along `axis`, those pushed
    /// past the end coming back at the start (NumPy/MLX `roll(a, shift,
    /// axis)`); `None` rolls the flattened array and restores the shape.
    /// Negative shifts roll the other way; any shift is taken modulo the
    /// length. Any dtype.
    ///
    /// The two slices concatenated: one dispatch (none for a shift of 0,
    /// which gives the array itself).
    ///
    /// # Errors
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] for a list of
    /// several axes.
    #[track_caller]
    pub fn roll(&self, shift: isize, axis: impl Into<Axes>) -> Result<Array> {
        let (x, axis) = match axis.into().one("roll", self.ndim())? {
            None => (self.ravel(), 0),
            Some(a) => (self.clone(), a),
        };
        let n = x.shape()[axis];
        if n == 0 {
            return Ok(self.clone());
        }
        let s = shift.rem_euclid(n as isize);
        if s == 0 {
            return Ok(self.clone());
        }
        let mut head = vec![Slice::FULL; x.ndim()];
        let mut tail = head.clone();
        let cut = n as isize - s;
        head[axis] = Slice::new(Some(cut), None, 1);
        tail[axis] = Slice::new(None, Some(cut), 1);
        let y = concatenate(&[&x.slice(&head)?, &x.slice(&tail)?], axis as isize)?;
        Ok(y.reshape_to(self.shape()))
    }

    /// This array with at least one dimension (NumPy/MLX `atleast_1d`): a
    /// 0-d array becomes shape `[1]`, others are returned as they are.
    #[track_caller]
    pub fn atleast_1d(&self) -> Array {
        match self.ndim() {
            0 => self.reshape_to(&[1]),
            _ => self.clone(),
        }
    }

    /// At least two dimensions (NumPy/MLX `atleast_2d`): `[]` becomes
    /// `[1, 1]`, `[n]` becomes `[1, n]`. A view.
    #[track_caller]
    pub fn atleast_2d(&self) -> Array {
        match self.ndim() {
            0 => self.reshape_to(&[1, 1]),
            1 => self.reshape_to(&[1, self.shape()[0]]),
            _ => self.clone(),
        }
    }

    /// At least three dimensions (NumPy/MLX `atleast_3d`): `[]` becomes
    /// `[1, 1, 1]`, `[n]` becomes `[1, n, 1]`, `[m, n]` becomes `[m, n, 1]`.
    /// A view.
    #[track_caller]
    pub fn atleast_3d(&self) -> Array {
        let s = self.shape();
        match self.ndim() {
            0 => self.reshape_to(&[1, 1, 1]),
            1 => self.reshape_to(&[1, s[0], 1]),
            2 => self.reshape_to(&[s[0], s[1], 1]),
            _ => self.clone(),
        }
    }
}

/// Coordinate arrays from coordinate vectors (NumPy `meshgrid(*xi,
/// indexing)`, MLX `meshgrid`): output `i` holds input `i` (flattened)
/// along its own axis, broadcast over the others; with
/// [`Indexing::Xy`] the first two axes are swapped (see [`Indexing`]).
///
/// Broadcast views, no dispatch (NumPy copies by default; these arrays
/// cannot be written, so sharing is safe). An empty list gives no arrays.
///
/// # Errors
/// [`Error::DeviceMismatch`]; [`Error::TooLarge`] for more than
/// [`crate::shape::MAX_DIMS`] arrays or an element count past `usize`.
#[track_caller]
pub fn meshgrid(arrays: &[&Array], indexing: Indexing) -> Result<Vec<Array>> {
    let Some(first) = arrays.first() else {
        return Ok(Vec::new());
    };
    let mut lengths: Vec<usize> = Vec::with_capacity(arrays.len());
    for a in arrays {
        super::same_device("meshgrid", first, a)?;
        lengths.push(a.size());
    }
    // The output axis of input i.
    let place = |i: usize| match (indexing, i) {
        (Indexing::Xy, 0) if arrays.len() > 1 => 1,
        (Indexing::Xy, 1) => 0,
        _ => i,
    };
    let mut shape = vec![0; arrays.len()];
    for (i, &n) in lengths.iter().enumerate() {
        shape[place(i)] = n;
    }
    check_shape("meshgrid", &shape)?;
    let mut out = Vec::with_capacity(arrays.len());
    for (i, a) in arrays.iter().enumerate() {
        let mut own = vec![1; arrays.len()];
        own[place(i)] = lengths[i];
        out.push(a.ravel().reshape_to(&own).broadcast_to(&shape)?);
    }
    Ok(out)
}

/// The arrays broadcast against each other (NumPy/MLX
/// `broadcast_arrays`): each a view of the common shape, stride 0 along
/// repeated axes. No dispatch.
///
/// # Errors
/// [`Error::DeviceMismatch`]; [`Error::ShapeMismatch`] when the shapes do
/// not broadcast.
#[track_caller]
pub fn broadcast_arrays(arrays: &[&Array]) -> Result<Vec<Array>> {
    let Some(first) = arrays.first() else {
        return Ok(Vec::new());
    };
    for a in &arrays[1..] {
        super::same_device("broadcast_arrays", first, a)?;
    }
    let mut shape = first.shape().to_vec();
    for a in &arrays[1..] {
        shape = broadcast_shapes("broadcast_arrays", &shape, a.shape())?;
    }
    let mut out = Vec::with_capacity(arrays.len());
    for a in arrays {
        out.push(a.broadcast_to(&shape)?);
    }
    Ok(out)
}

//! What each rank says about its call before any data moves: the op, the
//! array's dtype and shape, a root or peer, and whether the call already
//! failed on that rank. Every collective starts by gathering these from
//! all ranks (a bounded wait), and every rank draws the same conclusion
//! from the same list ([`agree`]); a point-to-point pair trades them
//! ([`match_p2p`]). Pure data: no MPI here, so it is unit-tested.

use crate::DType;

/// Words in an encoded call.
pub(crate) const WORDS: usize = 16;
/// The first word of every call: "wgarr", and the protocol's version.
const MAGIC: u64 = 0x7767_6172_7200_0001;
/// The most dimensions a call carries (`shape::MAX_DIMS`).
const MAX_DIMS: usize = crate::shape::MAX_DIMS;

/// The operation a call is part of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    AllSum = 1,
    AllMax,
    AllMin,
    AllGather,
    Broadcast,
    Barrier,
    Split,
    /// A send, as the sender describes it and as the receiver answers.
    Send,
}

impl Op {
    const ALL: [Op; 8] = [
        Op::AllSum,
        Op::AllMax,
        Op::AllMin,
        Op::AllGather,
        Op::Broadcast,
        Op::Barrier,
        Op::Split,
        Op::Send,
    ];

    /// The public function's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::AllSum => "all_sum",
            Op::AllMax => "all_max",
            Op::AllMin => "all_min",
            Op::AllGather => "all_gather",
            Op::Broadcast => "broadcast",
            Op::Barrier => "barrier",
            Op::Split => "split",
            Op::Send => "send",
        }
    }

    fn from_code(code: u64) -> Option<Op> {
        Op::ALL.into_iter().find(|&o| o as u64 == code)
    }
}

/// How a rank's call stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Ready to move data.
    Ready = 0,
    /// Failed on that rank before any data moved (its own error says why).
    Failed = 1,
    /// A receiver's answer: the send does not match what it expects.
    Mismatch = 2,
}

/// One rank's call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    pub op: Op,
    pub status: Status,
    /// [`dtype_code`] of the array's dtype (0 without an array).
    pub dtype: u64,
    /// The root (broadcast), the peer (send), the colour (split), else 0.
    pub param: u64,
    pub shape: Vec<usize>,
    /// The group's count of collective calls before this one: ranks out
    /// of step (one skipped a call) differ here.
    pub seq: u64,
}

/// A dtype as a call carries it: a hash of its name (FNV-1a), so that no
/// table of dtypes needs updating when one is added.
pub(crate) fn dtype_code(dtype: DType) -> u64 {
    dtype.name().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The name of the dtype of `code`, for messages.
fn dtype_name(code: u64) -> String {
    DType::ALL
        .into_iter()
        .find(|&d| dtype_code(d) == code)
        .map_or_else(|| format!("dtype #{code:x}"), |d| d.name().to_string())
}

impl Call {
    pub(crate) fn new(op: Op, dtype: Option<DType>, shape: &[usize], param: u64, seq: u64) -> Call {
        Call {
            op,
            status: Status::Ready,
            dtype: dtype.map_or(0, dtype_code),
            param,
            shape: shape.to_vec(),
            seq,
        }
    }

    /// This call with `status`.
    pub(crate) fn with(mut self, status: Status) -> Call {
        self.status = status;
        self
    }

    pub(crate) fn encode(&self) -> [u64; WORDS] {
        let mut w = [0u64; WORDS];
        w[0] = MAGIC;
        w[1] = self.op as u64;
        w[2] = self.status as u64;
        w[3] = self.dtype;
        w[4] = self.param;
        w[5] = self.shape.len() as u64;
        for (i, &d) in self.shape.iter().take(MAX_DIMS).enumerate() {
            w[6 + i] = d as u64;
        }
        w[6 + MAX_DIMS] = self.seq;
        w
    }

    /// The call `words` encode, or what is wrong with them.
    pub(crate) fn decode(words: &[u64]) -> Result<Call, String> {
        if words.len() != WORDS || words[0] != MAGIC {
            return Err("a message that is not a call of this wgarray version".into());
        }
        let op = Op::from_code(words[1]).ok_or("an unknown op")?;
        let status = match words[2] {
            0 => Status::Ready,
            1 => Status::Failed,
            2 => Status::Mismatch,
            _ => return Err("an unknown status".into()),
        };
        let ndim = words[5] as usize;
        if ndim > MAX_DIMS {
            return Err(format!("{ndim} dimensions"));
        }
        Ok(Call {
            op,
            status,
            dtype: words[3],
            param: words[4],
            shape: words[6..6 + ndim].iter().map(|&d| d as usize).collect(),
            seq: words[6 + MAX_DIMS],
        })
    }

    /// `all_sum float32 [3, 4]`, as messages list calls.
    fn describe(&self) -> String {
        let mut s = self.op.name().to_string();
        if self.dtype != 0 {
            s += &format!(" {} {:?}", dtype_name(self.dtype), self.shape);
        }
        match self.op {
            Op::Broadcast => s += &format!(" from root {}", self.param),
            Op::Send => s += &format!(" to rank {}", self.param),
            _ => {}
        }
        s
    }
}

/// Why the ranks' calls cannot go ahead: the same on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Disagreement {
    /// Rank `0` failed its part before any data moved.
    PeerFailed(usize),
    /// The calls do not fit together; the message lists them.
    Mismatch(String),
}

/// Whether the calls of every rank (`calls[r]` from rank `r`, encoded) fit
/// together for their op: the same op and step, no failure, and for the
/// reductions and broadcast one dtype and shape (and root), for all_gather
/// one dtype and the same shape but along the first axis.
pub(crate) fn agree(calls: &[&[u64]]) -> Result<Vec<Call>, Disagreement> {
    let mut decoded = Vec::with_capacity(calls.len());
    for (r, w) in calls.iter().enumerate() {
        match Call::decode(w) {
            Ok(c) => decoded.push(c),
            Err(e) => {
                return Err(Disagreement::Mismatch(format!(
                    "rank {r} sent {e} (another library's MPI traffic on the communicator?)"
                )));
            }
        }
    }
    if let Some(r) = decoded.iter().position(|c| c.status != Status::Ready) {
        return Err(Disagreement::PeerFailed(r));
    }
    let first = &decoded[0];
    let fits = |c: &Call| {
        c.op == first.op
            && c.seq == first.seq
            && c.dtype == first.dtype
            && match first.op {
                Op::AllSum | Op::AllMax | Op::AllMin => c.shape == first.shape,
                Op::Broadcast => c.shape == first.shape && c.param == first.param,
                Op::AllGather => {
                    c.shape.len() == first.shape.len() && c.shape.get(1..) == first.shape.get(1..)
                }
                Op::Barrier | Op::Split | Op::Send => true,
            }
    };
    if decoded.iter().all(fits) {
        return Ok(decoded);
    }
    let list: Vec<String> = decoded
        .iter()
        .enumerate()
        .map(|(r, c)| format!("rank {r}: {} (call {})", c.describe(), c.seq))
        .collect();
    let why = match first.op {
        _ if decoded.iter().any(|c| c.op != first.op) => "different operations",
        _ if decoded.iter().any(|c| c.seq != first.seq) => {
            "ranks out of step (one skipped or repeated a call)"
        }
        _ if decoded.iter().any(|c| c.dtype != first.dtype) => "different dtypes",
        Op::AllGather => "shapes that differ past the first axis, or ranks of arrays that differ",
        Op::Broadcast if decoded.iter().any(|c| c.param != first.param) => "different roots",
        _ => "different shapes",
    };
    Err(Disagreement::Mismatch(format!(
        "{why}: {}",
        list.join("; ")
    )))
}

/// Whether a sender's call (`sent`, from rank `src`) matches what the
/// receiver (rank `dst`) expects (`dtype`, `shape`): the message both
/// return when it does not.
pub(crate) fn match_p2p(
    sent: &Call,
    src: usize,
    dst: usize,
    dtype: DType,
    shape: &[usize],
) -> Result<(), String> {
    if sent.dtype == dtype_code(dtype) && sent.shape == shape {
        return Ok(());
    }
    Err(format!(
        "rank {src} sends {} {:?} and rank {dst} expects {} {shape:?}",
        dtype_name(sent.dtype),
        sent.shape,
        dtype.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(c: &Call) -> [u64; WORDS] {
        c.encode()
    }

    #[test]
    fn calls_round_trip() {
        for op in Op::ALL {
            let c = Call::new(op, Some(DType::BF16), &[3, 0, 7], 2, 41).with(Status::Failed);
            assert_eq!(Call::decode(&enc(&c)), Ok(c));
        }
        let scalar = Call::new(Op::Barrier, None, &[], 0, 0);
        assert_eq!(Call::decode(&enc(&scalar)), Ok(scalar));
        assert!(Call::decode(&[0; WORDS]).is_err());
        assert!(Call::decode(&[MAGIC; 3]).is_err());
        // Every dtype has its own code.
        let mut codes: Vec<u64> = DType::ALL.iter().map(|&d| dtype_code(d)).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), DType::ALL.len());
        assert_eq!(dtype_name(dtype_code(DType::U16)), "uint16");
    }

    #[test]
    fn agreement_is_the_same_conclusion_from_the_same_list() {
        let a = enc(&Call::new(Op::AllSum, Some(DType::F32), &[3], 0, 5));
        let b = enc(&Call::new(Op::AllSum, Some(DType::F32), &[4], 0, 5));
        assert!(agree(&[&a, &a, &a]).is_ok());
        let Err(Disagreement::Mismatch(m)) = agree(&[&a, &b]) else {
            panic!()
        };
        assert!(m.starts_with("different shapes"), "{m}");
        assert!(m.contains("rank 1: all_sum float32 [4]"), "{m}");
        let f = enc(&Call::new(Op::AllSum, None, &[], 0, 5).with(Status::Failed));
        assert_eq!(agree(&[&a, &f, &b]), Err(Disagreement::PeerFailed(1)));
        let i = enc(&Call::new(Op::AllSum, Some(DType::I32), &[3], 0, 5));
        let Err(Disagreement::Mismatch(m)) = agree(&[&a, &i]) else {
            panic!()
        };
        assert!(m.starts_with("different dtypes"), "{m}");
        let max = enc(&Call::new(Op::AllMax, Some(DType::F32), &[3], 0, 5));
        let Err(Disagreement::Mismatch(m)) = agree(&[&a, &max]) else {
            panic!()
        };
        assert!(m.starts_with("different operations"), "{m}");
        let late = enc(&Call::new(Op::AllSum, Some(DType::F32), &[3], 0, 6));
        let Err(Disagreement::Mismatch(m)) = agree(&[&a, &late]) else {
            panic!()
        };
        assert!(m.contains("out of step"), "{m}");
        // all_gather: the first axis may differ, nothing else.
        let g = |s: &[usize]| enc(&Call::new(Op::AllGather, Some(DType::U8), s, 0, 1));
        assert!(agree(&[&g(&[2, 5]), &g(&[0, 5]), &g(&[7, 5])]).is_ok());
        assert!(agree(&[&g(&[]), &g(&[])]).is_ok());
        assert!(agree(&[&g(&[2, 5]), &g(&[2, 4])]).is_err());
        assert!(agree(&[&g(&[2]), &g(&[2, 1])]).is_err());
        // broadcast: one root.
        let r = |root| enc(&Call::new(Op::Broadcast, Some(DType::F16), &[2], root, 1));
        let Err(Disagreement::Mismatch(m)) = agree(&[&r(0), &r(1)]) else {
            panic!()
        };
        assert!(m.starts_with("different roots"), "{m}");
    }

    #[test]
    fn a_send_matches_what_the_receiver_expects() {
        let sent = Call::new(Op::Send, Some(DType::F32), &[2, 3], 1, 0);
        assert!(match_p2p(&sent, 0, 1, DType::F32, &[2, 3]).is_ok());
        assert_eq!(
            match_p2p(&sent, 0, 1, DType::I32, &[2, 3]),
            Err("rank 0 sends float32 [2, 3] and rank 1 expects int32 [2, 3]".into())
        );
        assert!(match_p2p(&sent, 0, 1, DType::F32, &[6]).is_err());
    }
}

//! Reference answers computed once per run and shared by every variant × backend. A case's
//! calls and draws depend only on its identity (seed, set, vector, case: see `lab/src/run.rs`),
//! so the reference's answers to them are the same in every cell: the first cell to plan a case
//! records them on a [`Tape`], the others replay it ([`Answers`]). Each answer keeps what it was
//! computed from (the state or accumulator before the call, the call's length and offsets, and
//! a sum of its input bytes: foldhash, keyed with a seed drawn once per process, so a kernel
//! cannot aim an output at a recorded sum; it reads ~16 bytes a cycle, where the byte-wise FNV-1a
//! it replaces took ~4 cycles a byte and was most of the cost of a replay); an answer whose
//! inputs differ is computed afresh, never replayed.
//!
//! Only reference arithmetic is recorded (MD5 compressions, Poly1305 block sums); what depends
//! on the kernel's own outputs (the state a segment starts from) never is.

use std::sync::{Arc, Mutex};

use crate::reference::md5::{self, State};
use crate::reference::poly1305::{self, Limbs26};

/// The keyed sum of an answer's input bytes (see the module docs); the length is summed too.
fn input_sum(bytes: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    static KEY: std::sync::OnceLock<foldhash::quality::RandomState> = std::sync::OnceLock::new();
    KEY.get_or_init(foldhash::quality::RandomState::default).hash_one(bytes)
}

/// One reference answer with the inputs it was computed from (`sum`: [`input_sum`] of the input).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    /// `md5_implCompressMB(ofs, limit)` over `len` bytes from `before`: the state after, and
    /// the return value (`None`: the input was too short for the call).
    CompressMb { before: State, sum: u64, len: usize, ofs: i32, limit: i32, after: State, ret: Option<i32> },
    /// `md5_implCompress` from `before`.
    Compress { before: State, sum: u64, after: State },
    /// `poly1305_processBlocks` over `len` bytes from `before` with `r`.
    Blocks { before: Limbs26, r: Limbs26, sum: u64, len: usize, after: Limbs26 },
}

/// The answers of one case, in the order the planner asks for them: replayed from a recording
/// while it matches, computed (and appended) past it.
#[derive(Debug, Default)]
pub struct Tape {
    recorded: Option<Arc<Vec<Answer>>>,
    /// Answers given so far (replayed or computed), in order.
    given: Vec<Answer>,
    /// Whether an answer was computed (the tape is worth keeping).
    computed: bool,
}

impl Tape {
    /// A tape replaying `recorded` (none: compute everything).
    fn replaying(recorded: Option<Arc<Vec<Answer>>>) -> Tape {
        Tape { recorded, given: Vec::new(), computed: false }
    }

    /// A tape replaying what this one gave: for another layout of the same case, whose calls
    /// (and so the reference's answers) are the same; an answer whose inputs differ is computed
    /// afresh.
    pub fn replay(self) -> Tape {
        Tape::replaying(Some(Arc::new(self.given)))
    }

    /// The recorded answer at this point if it was computed from `matches` inputs, else
    /// `compute()`'s.
    fn next(&mut self, matches: impl Fn(&Answer) -> bool, compute: impl FnOnce() -> Answer) -> &Answer {
        let at = self.given.len();
        let replay = self.recorded.as_ref().and_then(|r| r.get(at)).filter(|a| matches(a)).cloned();
        let answer = replay.unwrap_or_else(|| {
            self.computed = true;
            compute()
        });
        self.given.push(answer);
        &self.given[at]
    }

    /// [`md5::compress_mb`] on `state` (advanced in place); returns its result.
    pub fn compress_mb(&mut self, state: &mut State, input: &[u8], ofs: i32, limit: i32) -> Option<i32> {
        let (before, len, sum) = (*state, input.len(), input_sum(input));
        let a = self.next(
            |a| matches!(a, Answer::CompressMb { before: b, sum: x, len: l, ofs: o, limit: m, .. } if (*b, *x, *l, *o, *m) == (before, sum, len, ofs, limit)),
            || {
                let mut after = before;
                let ret = md5::compress_mb(&mut after, input, ofs, limit);
                Answer::CompressMb { before, sum, len, ofs, limit, after, ret }
            },
        );
        match a {
            Answer::CompressMb { after, ret, .. } => {
                *state = *after;
                *ret
            }
            _ => None, // `next` gives a CompressMb: `matches` and `compute` agree
        }
    }

    /// [`md5::compress`] of the 64-byte `block` on `state` (advanced in place).
    pub fn compress(&mut self, state: &mut State, block: &[u8]) {
        let (before, sum) = (*state, input_sum(block));
        let a = self.next(
            |a| matches!(a, Answer::Compress { before: b, sum: x, .. } if (*b, *x) == (before, sum)),
            || {
                let mut after = before;
                md5::compress(&mut after, block);
                Answer::Compress { before, sum, after }
            },
        );
        if let Answer::Compress { after, .. } = a {
            *state = *after;
        }
    }

    /// [`poly1305::process_blocks`] of `input` on `acc` with `r`.
    pub fn process_blocks(&mut self, acc: &Limbs26, r: &Limbs26, input: &[u8]) -> Limbs26 {
        let (before, r, len, sum) = (*acc, *r, input.len(), input_sum(input));
        let a = self.next(
            |a| matches!(a, Answer::Blocks { before: b, r: rr, sum: x, len: l, .. } if (*b, *rr, *x, *l) == (before, r, sum, len)),
            || Answer::Blocks { before, r, sum, len, after: poly1305::process_blocks(&before, &r, input) },
        );
        match a {
            Answer::Blocks { after, .. } => *after,
            _ => poly1305::process_blocks(&before, &r, input), // not reached: see `compress_mb`
        }
    }
}

/// Which case of a run a tape belongs to: the set's position in the run, the vector's index in
/// its file, and the case's position among the vector's cases.
pub type CaseKey = (usize, usize, usize);

/// The reference answers of one run, shared by every variant × backend (and thread).
#[derive(Debug, Default)]
pub struct Answers {
    /// FxHash: looked up once per case and cell (SipHash was ~1% of a Unicorn run).
    tapes: Mutex<rustc_hash::FxHashMap<CaseKey, Arc<Vec<Answer>>>>,
}

impl Answers {
    /// A tape for case `key`: replays what an earlier cell recorded, if one did.
    pub fn tape(&self, key: CaseKey) -> Tape {
        let recorded = self.tapes.lock().ok().and_then(|t| t.get(&key).cloned());
        Tape::replaying(recorded)
    }

    /// Keeps `tape` for the cells after this one when it answered more than what is recorded
    /// (a cell whose kernel failed early plans fewer segments).
    pub fn keep(&self, key: CaseKey, tape: Tape) {
        if !tape.computed {
            return;
        }
        if let Ok(mut tapes) = self.tapes.lock() {
            let longer = tapes.get(&key).is_none_or(|t| t.len() < tape.given.len());
            if longer {
                tapes.insert(key, Arc::new(tape.given));
            }
        }
    }

    /// Cases with a recording.
    pub fn len(&self) -> usize {
        self.tapes.lock().map_or(0, |t| t.len())
    }

    /// Whether no case is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replayed_tape_gives_the_computed_answers_and_computes_nothing() {
        let answers = Answers::default();
        let block = [0x61u8; 64];
        let r = poly1305::clamp_r(&[7; 16]);
        let run = |tape: &mut Tape| {
            let mut s = md5::IV;
            tape.compress(&mut s, &block);
            let ret = tape.compress_mb(&mut s, &[1; 128], 0, 127);
            let acc = tape.process_blocks(&Limbs26::default(), &r, &[9; 32]);
            (s, ret, acc)
        };
        let mut first = answers.tape((0, 1, 2));
        let computed = run(&mut first);
        answers.keep((0, 1, 2), first);
        let mut second = answers.tape((0, 1, 2));
        assert_eq!(run(&mut second), computed);
        assert!(!second.computed, "every answer came from the recording");
        let mut want = md5::IV;
        md5::compress(&mut want, &block);
        let ret = md5::compress_mb(&mut want, &[1; 128], 0, 127);
        assert_eq!((computed.0, computed.1), (want, ret));
        assert_eq!(computed.2, poly1305::process_blocks(&Limbs26::default(), &r, &[9; 32]));
    }

    #[test]
    fn an_answer_computed_from_other_inputs_is_not_replayed() {
        let answers = Answers::default();
        let r = poly1305::clamp_r(&[7; 16]);
        let mut first = answers.tape((0, 0, 0));
        first.process_blocks(&Limbs26::default(), &r, &[9; 32]);
        answers.keep((0, 0, 0), first);
        let acc = Limbs26([1, 2, 3, 4, 0]);
        for (from, input) in [(acc, [9u8; 32]), (Limbs26::default(), [8; 32])] {
            let mut other = answers.tape((0, 0, 0));
            assert_eq!(other.process_blocks(&from, &r, &input), poly1305::process_blocks(&from, &r, &input));
            assert!(other.computed, "another accumulator or other bytes: computed afresh");
        }
    }
}

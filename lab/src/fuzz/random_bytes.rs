//! Random byte strings for the fuzz strategies, drawn in one fill. proptest's
//! `vec(any::<u8>(), n)` builds a value tree per byte (an 8 KiB message: 8192 trees, about an
//! eighth of a Unicorn fuzz run's CPU) and shrinks a long message one deleted byte at a time,
//! which a shrink budget of a few thousand steps never finishes. These shrink as a whole: the
//! length by bisection towards the shortest, then every byte to zero in one step.

use proptest::prelude::{Rng, RngExt};
use proptest::strategy::{NewTree, Strategy, ValueTree};
use proptest::test_runner::TestRunner;

/// Byte strings of a length in `min..=max` (uniform), each byte uniform.
#[derive(Debug, Clone, Copy)]
pub struct Bytes {
    min: usize,
    max: usize,
}

/// Byte strings of exactly `len` bytes.
pub fn exactly(len: usize) -> Bytes {
    Bytes { min: len, max: len }
}

/// Byte strings of `len.start()..=len.end()` bytes.
pub fn between(len: std::ops::RangeInclusive<usize>) -> Bytes {
    Bytes { min: *len.start(), max: (*len.end()).max(*len.start()) }
}

impl Strategy for Bytes {
    type Tree = BytesTree;
    type Value = Vec<u8>;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let rng = runner.rng();
        let len = rng.random_range(self.min..=self.max);
        let mut bytes = vec![0u8; len];
        rng.fill_bytes(&mut bytes);
        Ok(BytesTree { bytes, lo: self.min, hi: len, cur: len, zero: false, last: Step::None })
    }
}

/// What the last [`ValueTree::simplify`] or [`ValueTree::complicate`] tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Nothing yet (the current value is the one drawn).
    None,
    /// A shorter length, `cur`.
    Shorter,
    /// Every byte zero.
    Zeroed,
    /// Shrinking is over.
    Done,
}

/// The value tree of [`Bytes`]: the drawn bytes and a bisection of their length. `hi` is the
/// shortest length known to fail (the drawn one at first), `lo` the shortest not yet ruled out.
#[derive(Debug, Clone)]
pub struct BytesTree {
    bytes: Vec<u8>,
    lo: usize,
    hi: usize,
    cur: usize,
    zero: bool,
    last: Step,
}

impl BytesTree {
    /// The next step once the length is settled at `hi`: zero every byte, if any is not.
    fn settle(&mut self) -> bool {
        self.cur = self.hi;
        if self.bytes[..self.hi].iter().any(|&b| b != 0) {
            self.zero = true;
            self.last = Step::Zeroed;
            true
        } else {
            self.last = Step::Done;
            false
        }
    }

    /// A length between `lo` and `hi` to try, or the next step when none is left.
    fn bisect(&mut self) -> bool {
        if self.lo < self.hi {
            self.cur = self.lo + (self.hi - self.lo) / 2;
            self.last = Step::Shorter;
            true
        } else {
            self.settle()
        }
    }
}

impl ValueTree for BytesTree {
    type Value = Vec<u8>;

    fn current(&self) -> Vec<u8> {
        if self.zero {
            vec![0; self.cur]
        } else {
            self.bytes[..self.cur].to_vec()
        }
    }

    /// The current value still fails: keep it, try a simpler one.
    fn simplify(&mut self) -> bool {
        match self.last {
            Step::None => self.bisect(),
            Step::Shorter => {
                self.hi = self.cur;
                self.bisect()
            }
            Step::Zeroed | Step::Done => {
                self.last = Step::Done;
                false
            }
        }
    }

    /// The current value passed: step back towards the last failing one.
    fn complicate(&mut self) -> bool {
        match self.last {
            Step::Shorter => {
                self.lo = self.cur + 1;
                self.bisect()
            }
            Step::Zeroed => {
                self.zero = false;
                self.last = Step::Done;
                false
            }
            Step::None | Step::Done => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shrinks `tree` with "fails" = `fails(value)` the way `fuzz::shrink` does; the result.
    fn shrink(mut tree: BytesTree, fails: impl Fn(&[u8]) -> bool) -> Vec<u8> {
        let mut best = tree.current();
        let mut more = tree.simplify();
        while more {
            let v = tree.current();
            more = if fails(&v) {
                best = v;
                tree.simplify()
            } else {
                tree.complicate()
            };
        }
        best
    }

    fn tree(strategy: Bytes, seed: u8) -> BytesTree {
        let rng = proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &[seed; 32]);
        let mut runner = TestRunner::new_with_rng(proptest::test_runner::Config::default(), rng);
        strategy.new_tree(&mut runner).unwrap()
    }

    #[test]
    fn lengths_stay_in_range_and_bytes_vary() {
        for seed in 0..64 {
            let v = tree(between(3..=300), seed).current();
            assert!((3..=300).contains(&v.len()), "{}", v.len());
        }
        let v = tree(exactly(4096), 1).current();
        assert_eq!(v.len(), 4096);
        // 4096 uniform bytes: every value shows up.
        assert_eq!(v.iter().collect::<std::collections::HashSet<_>>().len(), 256);
    }

    #[test]
    fn a_failure_from_a_length_on_shrinks_to_that_length_of_zeros() {
        for seed in 0..32 {
            let t = tree(between(0..=8192), seed);
            let drawn = t.current().len();
            let threshold = drawn / 3;
            let min = shrink(t, |v| v.len() >= threshold);
            assert_eq!(min, vec![0; threshold], "seed {seed}, drawn {drawn}");
        }
    }

    #[test]
    fn a_failure_that_needs_a_byte_keeps_the_bytes() {
        let t = tree(between(50..=100), 7);
        let drawn = t.current();
        let at = 40 + drawn[40..].iter().position(|&b| b != 0).unwrap();
        let min = shrink(t, |v| v.get(at).is_some_and(|&b| b != 0));
        assert_eq!(min, drawn[..=at.max(49)].to_vec());
    }

    #[test]
    fn shrinking_never_goes_below_the_shortest_length() {
        let min = shrink(tree(between(64..=640), 3), |_| true);
        assert_eq!(min, vec![0; 64]);
    }
}

//! Response allocations handed back to a backend ([`super::Backend::recycle`]) and reused: a
//! response is mostly zeros (guard pages, untouched buffer tails), so a backend that knows
//! which byte ranges it copied into the response it lent out zeroes only those again when the
//! allocation comes back, instead of a fresh allocation and a full clear per batch.

/// Byte ranges `[start, end)` of a response, in bytes from its start.
pub type Ranges = Vec<(usize, usize)>;

/// One backend's spare response and what it knows of the response it last lent out.
///
/// The protocol: [`zeroed`](Self::zeroed) gives a response of zeros (in the spare allocation
/// when there is one) and an empty range list; the backend copies ranges into the response,
/// notes them in the list and hands both to [`lend`](Self::lend) before returning the
/// response; [`give_back`](Self::give_back) takes it back. A response that comes back at the
/// address lent is known to be zero outside the noted ranges, since nothing on the host writes
/// a response; any other allocation is cleared whole on its next use.
#[derive(Debug, Default)]
pub struct Recycler {
    /// The allocation to reuse.
    spare: Vec<u8>,
    /// The ranges of `spare` that may hold nonzero bytes (`None`: any byte may).
    spare_dirty: Option<Ranges>,
    /// The address of the response last lent out and the ranges copied into it.
    lent: Option<(usize, Ranges)>,
}

impl Recycler {
    /// `resp_len` zeros in the spare allocation (growing it to `room` bytes at once when it
    /// must grow), and an empty range list for [`lend`](Self::lend). Forgets the response
    /// last lent: this one takes its place.
    pub fn zeroed(&mut self, resp_len: usize, room: usize) -> (Vec<u8>, Ranges) {
        let spare = std::mem::take(&mut self.spare);
        let dirty = self.spare_dirty.take();
        let out = zeroed_again(spare, dirty.as_deref(), resp_len, room);
        let mut list = dirty.or_else(|| self.lent.take().map(|(_, l)| l)).unwrap_or_default();
        list.clear();
        self.lent = None;
        (out, list)
    }

    /// The spare allocation as it is (any contents), for a response the caller overwrites
    /// whole; not lent, so it is cleared whole when it comes back.
    pub fn take_spare(&mut self) -> Vec<u8> {
        self.lent = None;
        self.spare_dirty = None;
        std::mem::take(&mut self.spare)
    }

    /// Notes `resp`, about to be returned, as lent, with `copied` the only ranges of it that
    /// may be nonzero.
    pub fn lend(&mut self, resp: &[u8], copied: Ranges) {
        self.lent = Some((resp.as_ptr() as usize, copied));
    }

    /// Forgets the response last lent: it was dropped, or changed after it was noted.
    pub fn forget_lent(&mut self) {
        self.lent = None;
    }

    /// Takes back a response once its reader is done with it, to reuse its allocation.
    pub fn give_back(&mut self, resp: Vec<u8>) {
        self.spare_dirty = match self.lent.take() {
            Some((at, copied)) if at == resp.as_ptr() as usize => Some(copied),
            _ => None,
        };
        self.spare = resp;
    }
}

/// `resp_len` zeros in the allocation of `spare`, whose bytes outside the ranges `dirty` are
/// zero (`None`: any byte may be nonzero): only those ranges are zeroed again. The capacity
/// grows to `room` at once when it must grow: growing by steps would move the bytes to fresh
/// pages each time.
fn zeroed_again(mut spare: Vec<u8>, dirty: Option<&[(usize, usize)]>, resp_len: usize, room: usize) -> Vec<u8> {
    match dirty {
        Some(ranges) => {
            let n = spare.len();
            for &(lo, hi) in ranges {
                spare[lo.min(n)..hi.min(n)].fill(0);
            }
        }
        None => spare.clear(),
    }
    if spare.capacity() < resp_len {
        spare.reserve_exact(room.max(resp_len) - spare.len());
    }
    spare.resize(resp_len, 0);
    spare
}

#[cfg(test)]
mod tests {
    use super::{zeroed_again, Recycler};

    #[test]
    fn a_recycled_response_is_zeroed_where_it_was_filled() {
        let filled = vec![0, 0, 7, 7, 0, 9, 0, 0];
        let again = zeroed_again(filled.clone(), Some(&[(2, 4), (5, 6)]), 6, 64);
        assert_eq!(again, vec![0; 6], "shorter, and every filled range zeroed");
        assert!(again.capacity() >= 8, "the same allocation");
        let grown = zeroed_again(filled.clone(), Some(&[(2, 4), (5, 6), (7, 100)]), 20, 64);
        assert_eq!((grown.len(), grown.iter().all(|&b| b == 0), grown.capacity() >= 64), (20, true, true));
        let unknown = zeroed_again(vec![1; 8], None, 4, 0);
        assert_eq!(unknown, vec![0; 4], "unknown contents: all zeroed");
    }

    #[test]
    fn only_the_response_lent_comes_back_known() {
        let mut r = Recycler::default();
        let (mut out, mut list) = r.zeroed(8, 8);
        out[1..3].fill(5);
        list.push((1, 3));
        r.lend(&out, list);
        let at = out.as_ptr();
        r.give_back(out);
        let (again, list) = r.zeroed(8, 8);
        assert_eq!((again.as_ptr(), again, list), (at, vec![0; 8], Vec::new()), "reused and zeroed");

        // A response not lent (another allocation, or one forgotten) is cleared whole.
        let mut stranger = vec![9u8; 8];
        stranger[0] = 1;
        r.give_back(stranger);
        assert_eq!(r.zeroed(4, 4).0, vec![0; 4]);
        let (mut out, list) = r.zeroed(4, 4);
        out.fill(3);
        r.lend(&out, list);
        r.forget_lent();
        r.give_back(out);
        assert_eq!(r.zeroed(4, 4).0, vec![0; 4], "a forgotten loan is not trusted");
        let mut whole = r.take_spare();
        whole.resize(4, 6);
        r.give_back(whole);
        assert_eq!(r.zeroed(4, 4).0, vec![0; 4], "a spare taken whole is not trusted");
    }
}

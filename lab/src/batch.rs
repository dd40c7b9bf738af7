//! Batches for the guest-side driver: the host lays out a header, a table of call entries and
//! the buffers in `lab_arena` (kernels/README.md, "Driver protocol"), a backend runs the whole
//! table in one entry, and the host decodes the entries and the writable buffers it gets back.
//!
//! Layout of the payload, from the start of `lab_arena`:
//! `header (8 words) | call table | writable buffers | read-only buffers`. Only the first three
//! parts (`resp_len` bytes) travel back, so read-only inputs are sent once and never returned.

use crate::abi::Abi;
use crate::image::Arena;

/// Words in the arena header.
pub const HEADER_WORDS: usize = 8;
/// Fixed words at the start of every call entry, before `saved[]`.
pub const ENTRY_FIXED_WORDS: usize = 16;
/// Header word indices.
mod hdr {
    pub const NCALLS: usize = 0;
    pub const START: usize = 1;
    pub const TABLE: usize = 2;
    pub const RESP_LEN: usize = 3;
    pub const CURRENT: usize = 4;
    pub const DONE: usize = 5;
}
/// Call-entry word indices.
mod ent {
    pub const FN: usize = 0;
    pub const ARGS: usize = 1;
    pub const COPY_SRC: usize = 5;
    pub const COPY_DST: usize = 6;
    pub const COPY_LEN: usize = 7;
    pub const SEED: usize = 8;
    pub const RET: usize = 9;
    pub const SP_BEFORE: usize = 10;
    pub const SP_AFTER: usize = 11;
    pub const FLAGS: usize = 12;
    pub const STATUS: usize = 13;
}

/// Handle of a buffer added to a [`BatchBuilder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufId(usize);

/// A kernel argument: an immediate register value or a guest pointer into a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// The 64-bit register value as passed.
    Imm(u64),
    /// Address of byte `offset` of a buffer.
    Ptr(BufId, usize),
}

#[derive(Debug, Clone)]
struct BufSpec {
    data: Vec<u8>,
    writable: bool,
    /// Bytes past a 64-byte boundary where the buffer starts (0..4096; tests unaligned inputs).
    misalign: usize,
}

#[derive(Debug, Clone)]
struct CallSpec {
    func: u64,
    args: [Arg; 4],
    copy: Option<(BufId, BufId)>,
    seed: u64,
}

/// Errors while laying out a batch.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The batch does not fit into `lab_arena`.
    #[error("batch needs {needed} bytes but lab_arena holds {available}")]
    TooLarge { needed: u64, available: u64 },
}

/// Collects buffers and calls, then lays them out for one arena.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    abi: &'static Abi,
    bufs: Vec<BufSpec>,
    calls: Vec<CallSpec>,
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

impl BatchBuilder {
    /// An empty batch for the driver of `abi.arch`.
    pub fn new(abi: &'static Abi) -> Self {
        BatchBuilder { abi, bufs: Vec::new(), calls: Vec::new() }
    }

    /// The ABI the batch is built for.
    pub fn abi(&self) -> &'static Abi {
        self.abi
    }

    /// Number of calls so far.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// True when no call was added.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Adds a read-only input starting `misalign` bytes (0..4096) past a 64-byte boundary.
    pub fn input(&mut self, bytes: &[u8], misalign: usize) -> BufId {
        self.push(BufSpec { data: bytes.to_vec(), writable: false, misalign: misalign % 4096 })
    }

    /// Adds a writable in-out buffer (state, accumulator), 64-byte aligned.
    pub fn output(&mut self, init: &[u8]) -> BufId {
        self.push(BufSpec { data: init.to_vec(), writable: true, misalign: 0 })
    }

    fn push(&mut self, b: BufSpec) -> BufId {
        self.bufs.push(b);
        BufId(self.bufs.len() - 1)
    }

    /// Adds a call of the kernel at `func`; returns its index in the table.
    /// `seed` chooses the poison values of the callee-saved registers.
    pub fn call(&mut self, func: u64, args: [Arg; 4], seed: u64) -> usize {
        self.calls.push(CallSpec { func, args, copy: None, seed });
        self.calls.len() - 1
    }

    /// Like [`call`](Self::call), but first copies buffer `from` into `to` (same length), so the
    /// call starts from a snapshot of an earlier call's output and both stay checkable.
    pub fn call_after_copy(&mut self, func: u64, args: [Arg; 4], seed: u64, from: BufId, to: BufId) -> usize {
        assert_eq!(self.bufs[from.0].data.len(), self.bufs[to.0].data.len(), "copy between buffers of different sizes");
        self.calls.push(CallSpec { func, args, copy: Some((from, to)), seed });
        self.calls.len() - 1
    }

    fn entry_bytes(&self) -> u64 {
        ((ENTRY_FIXED_WORDS + self.abi.saved.len()) * 8) as u64
    }

    /// Bytes the laid-out payload will take.
    pub fn payload_size(&self) -> u64 {
        let table = (HEADER_WORDS * 8) as u64 + self.entry_bytes() * self.calls.len() as u64;
        let bufs: u64 = self.bufs.iter().map(|b| 64 + (b.misalign + b.data.len()) as u64 + 64).sum();
        table + bufs
    }

    /// Places everything in `arena` and encodes the payload.
    ///
    /// # Errors
    /// [`BatchError::TooLarge`] when it does not fit.
    pub fn layout(self, arena: Arena) -> Result<Batch, BatchError> {
        let entry = self.entry_bytes();
        let table_off = (HEADER_WORDS * 8) as u64;
        let mut cursor = table_off + entry * self.calls.len() as u64;
        let mut placed = vec![Placed::default(); self.bufs.len()];
        // Writable buffers first: they are inside the response.
        for pass_writable in [true, false] {
            for (i, b) in self.bufs.iter().enumerate().filter(|(_, b)| b.writable == pass_writable) {
                let off = align_up(cursor, 64) + b.misalign as u64;
                placed[i] = Placed { offset: off, len: b.data.len(), writable: b.writable };
                cursor = off + b.data.len() as u64;
            }
            if pass_writable {
                cursor = align_up(cursor, 64);
            }
        }
        let resp_len = placed.iter().filter(|p| p.writable).map(|p| p.offset + p.len as u64).max().unwrap_or(0);
        let resp_len = resp_len.max(table_off + entry * self.calls.len() as u64);
        if cursor > arena.size {
            return Err(BatchError::TooLarge { needed: cursor, available: arena.size });
        }
        let mut payload = vec![0u8; cursor as usize];
        for (b, p) in self.bufs.iter().zip(&placed) {
            payload[p.offset as usize..p.offset as usize + p.len].copy_from_slice(&b.data);
        }
        let addr = |id: BufId, off: usize| arena.addr + placed[id.0].offset + off as u64;
        let words = [self.calls.len() as u64, 0, arena.addr + table_off, resp_len];
        for (i, w) in words.iter().enumerate() {
            put(&mut payload, i * 8, *w);
        }
        for (n, c) in self.calls.iter().enumerate() {
            let base = (table_off + entry * n as u64) as usize;
            put(&mut payload, base + ent::FN * 8, c.func);
            for (k, a) in c.args.iter().enumerate() {
                let v = match *a {
                    Arg::Imm(v) => v,
                    Arg::Ptr(id, off) => addr(id, off),
                };
                put(&mut payload, base + (ent::ARGS + k) * 8, v);
            }
            if let Some((from, to)) = c.copy {
                put(&mut payload, base + ent::COPY_SRC * 8, addr(from, 0));
                put(&mut payload, base + ent::COPY_DST * 8, addr(to, 0));
                put(&mut payload, base + ent::COPY_LEN * 8, placed[to.0].len as u64);
            }
            put(&mut payload, base + ent::SEED * 8, c.seed);
        }
        Ok(Batch {
            payload,
            resp_len: resp_len as usize,
            arena,
            placed,
            seeds: self.calls.iter().map(|c| c.seed).collect(),
            entry_words: entry as usize / 8,
            nsaved: self.abi.saved.len(),
        })
    }
}

fn put(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[derive(Debug, Clone, Copy, Default)]
struct Placed {
    offset: u64,
    len: usize,
    writable: bool,
}

/// A laid-out batch, ready for a backend.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Bytes to write at `lab_arena`.
    pub payload: Vec<u8>,
    /// Bytes from `lab_arena` the backend returns (header, table, writable buffers).
    pub resp_len: usize,
    /// The arena the batch was laid out for.
    pub arena: Arena,
    placed: Vec<Placed>,
    seeds: Vec<u64>,
    entry_words: usize,
    nsaved: usize,
}

/// What the driver recorded for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// Whether the call returned to the driver.
    pub completed: bool,
    /// a0 / x0 / rax after the return.
    pub ret: u64,
    /// Stack pointer before the call and after the return.
    pub sp_before: u64,
    /// See `sp_before`.
    pub sp_after: u64,
    /// x86_64 RFLAGS after the return (0 elsewhere).
    pub flags: u64,
    /// Poison seed of this call.
    pub seed: u64,
    /// Callee-saved registers after the return, in ABI order.
    pub saved: Vec<u64>,
}

impl Batch {
    /// Number of calls in the table.
    pub fn ncalls(&self) -> usize {
        self.seeds.len()
    }

    /// Offset in the response where the call table ends and the writable buffers begin.
    pub fn table_end(&self) -> usize {
        (HEADER_WORDS + self.entry_words * self.ncalls()) * 8
    }

    /// The guest address of byte `offset` of buffer `id`.
    pub fn addr_of(&self, id: BufId, offset: usize) -> u64 {
        self.arena.addr + self.placed[id.0].offset + offset as u64
    }

    /// The payload to resume at call `start`, keeping the results in `resp` of calls before it.
    pub fn resume_payload(&self, resp: &[u8], start: usize) -> Vec<u8> {
        let mut p = self.payload.clone();
        let n = resp.len().min(self.resp_len);
        p[..n].copy_from_slice(&resp[..n]);
        put(&mut p, hdr::START * 8, start as u64);
        put(&mut p, hdr::NCALLS * 8, self.ncalls() as u64);
        put(&mut p, hdr::TABLE * 8, get(&self.payload, hdr::TABLE * 8));
        put(&mut p, hdr::RESP_LEN * 8, self.resp_len as u64);
        p
    }

    /// Decodes one call entry from a response.
    pub fn record(&self, resp: &[u8], call: usize) -> CallRecord {
        let base = (HEADER_WORDS + self.entry_words * call) * 8;
        let w = |i: usize| get(resp, base + i * 8);
        CallRecord {
            completed: w(ent::STATUS) == 1,
            ret: w(ent::RET),
            sp_before: w(ent::SP_BEFORE),
            sp_after: w(ent::SP_AFTER),
            flags: w(ent::FLAGS),
            seed: self.seeds[call],
            saved: (0..self.nsaved).map(|i| w(ENTRY_FIXED_WORDS + i)).collect(),
        }
    }

    /// The contents of writable buffer `id` in a response.
    pub fn buffer<'r>(&self, resp: &'r [u8], id: BufId) -> &'r [u8] {
        let p = self.placed[id.0];
        assert!(p.writable, "only writable buffers come back");
        &resp[p.offset as usize..p.offset as usize + p.len]
    }

    /// `current` from a response header: the call in flight when the driver stopped.
    pub fn current(resp: &[u8]) -> u64 {
        get(resp, hdr::CURRENT * 8)
    }

    /// `done` from a response header: calls completed.
    pub fn done(resp: &[u8]) -> u64 {
        get(resp, hdr::DONE * 8)
    }
}

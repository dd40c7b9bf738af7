//! Unit tests of the layout: placements, guards, read-only inputs, stack window, ranges.

use super::*;
use crate::abi::{RISCV64, X86_64};
use crate::image::Arena;

const ARENA: Arena = Arena { addr: 0x10_0000, size: 32 << 20, kernel_data: None };

#[test]
fn flush_placements_touch_a_guard_page_and_inputs_are_read_only() {
    let mut b = BatchBuilder::new(&RISCV64);
    let end = b.buffer("input", &[1; 100], false, Placement::End);
    let start = b.buffer("pad", &[2; 100], false, Placement::Start);
    let state = b.buffer("state", &[3; 16], true, Placement::End);
    let batch = b.layout(ARENA).unwrap();
    let prots = batch.protections();
    let prot_at = |a: u64| prots.iter().find(|p| p.contains(a)).map(|p| p.prot);
    let end_addr = batch.addr_of(end, 100);
    assert_eq!(end_addr % PAGE, 0, "flush at the end: the byte after the input starts a page");
    assert_eq!(prot_at(end_addr), Some(0), "and that page is a guard");
    assert_eq!(prot_at(end_addr - 1), Some(PROT_READ), "the input itself is read-only");
    let start_addr = batch.addr_of(start, 0);
    assert_eq!((start_addr % PAGE, prot_at(start_addr - 1)), (0, Some(0)));
    assert_eq!(prot_at(batch.addr_of(state, 16)), Some(0));
    assert_eq!(prot_at(batch.addr_of(state, 0)), None, "writable buffers need no entry");
    assert_eq!(prot_at(batch.stack.bottom - 1), Some(0), "a guard below the stack budget");
    assert_eq!(batch.stack.top - batch.stack.bottom, 4096);
    // Only the writable buffers come back.
    assert!(batch.resp_len as u64 <= batch.addr_of(end, 0) - ARENA.addr);
}

/// Every paged buffer lies between guard pages with the guard after it on an even page of
/// the arena (an even number of pages gets a second guard below it), packed buffers follow
/// the paged ones of their pass, and every guard is a guard on every page it covers.
#[test]
fn guards_keep_a_two_page_grid_and_packed_buffers_come_last_in_their_pass() {
    let mut b = BatchBuilder::new(&X86_64);
    let mut ids = Vec::new();
    for (i, len) in [100usize, 5000, 0, 16, 9000, 4096, 1].into_iter().enumerate() {
        let placement = [Placement::End, Placement::Start, Placement::Misaligned(5)][i % 3];
        ids.push((b.buffer("input", &vec![1; len], i % 2 == 0, placement), len));
        ids.push((b.buffer("packed", &[3; 9], i % 2 == 1, Placement::Packed(7)), 9));
    }
    let size = b.payload_size();
    let batch = b.layout(ARENA).unwrap();
    let prots = batch.protections();
    let prot_at = |a: u64| prots.iter().find(|p| p.contains(a)).map(|p| p.prot);
    let page = |a: u64| (a - ARENA.addr) / PAGE;
    let mut last_paged = [0u64; 2];
    let mut first_packed = [u64::MAX; 2];
    for &(id, len) in &ids {
        let (lo, writable) = (batch.addr_of(id, 0), batch.placed[id.0].writable);
        let hi = lo + len as u64;
        if batch.placed[id.0].len == 9 {
            first_packed[usize::from(writable)] = first_packed[usize::from(writable)].min(lo);
            continue;
        }
        let first = lo / PAGE * PAGE;
        let after = if len == 0 { lo } else { hi.div_ceil(PAGE) * PAGE };
        assert_eq!(page(after) % 2, 0, "the guard after a {len}-byte buffer lies on an even page");
        assert_eq!((prot_at(first - PAGE), prot_at(after)), (Some(0), Some(0)), "{len} bytes between guards");
        last_paged[usize::from(writable)] = last_paged[usize::from(writable)].max(hi);
    }
    for w in 0..2 {
        assert!(last_paged[w] < first_packed[w], "pass {w}: paged buffers before packed ones");
    }
    assert!(prots.windows(2).all(|p| p[0].addr + p[0].len <= p[1].addr), "entries do not overlap");
    assert!(prots.windows(2).all(|p| !(p[0].prot == 0 && p[1].prot == 0 && p[0].addr + p[0].len == p[1].addr)));
    let bottom = align_up(batch.payload.len() as u64, PAGE);
    assert_eq!(size, bottom + STACK_GUARD + (batch.stack.top - batch.stack.bottom).div_ceil(PAGE) * PAGE + PAGE);
}

#[test]
fn addresses_are_described_relative_to_the_nearest_buffer_or_the_stack() {
    let mut b = BatchBuilder::new(&X86_64);
    let input = b.buffer("input", &[0; 64], false, Placement::End);
    let batch = b.layout(ARENA).unwrap();
    let at = |off: u64| batch.locate(batch.addr_of(input, 0) + off).unwrap();
    assert!(at(64).starts_with("1 byte past the end of input (input[64]; 64 bytes at 0x"), "{}", at(64));
    assert!(at(71).starts_with("8 bytes past the end of input"), "{}", at(71));
    assert!(at(3).starts_with("inside input (input[3];") && at(3).contains("read-only"), "{}", at(3));
    let below = batch.locate(batch.stack.bottom - 8).unwrap();
    // The budget lies below the red zone: 4096 + 128 bytes below sp on x86_64.
    let budget = X86_64.stack_budget + X86_64.red_zone;
    assert!(below.starts_with(&format!("8 bytes below the stack budget ({budget} bytes below sp")), "{below}");
    assert_eq!(batch.locate(ARENA.addr - 1), None);
}

#[test]
fn misaligned_inputs_start_at_their_offset_and_end_less_than_64_bytes_below_a_guard() {
    for len in [0usize, 1, 63, 64, 100, 4096, 5000] {
        for m in [0usize, 1, 4, 5, 63] {
            let mut b = BatchBuilder::new(&RISCV64);
            let input = b.buffer("input", &vec![7; len], false, Placement::Misaligned(m));
            let batch = b.layout(ARENA).unwrap();
            let prots = batch.protections();
            let start = batch.addr_of(input, 0);
            let end = batch.addr_of(input, len);
            let guard = end.next_multiple_of(PAGE);
            let guarded = prots.iter().any(|p| p.prot == 0 && p.contains(guard));
            assert!(guarded && guard - end < 64, "len {len} m {m}: end {end:#x}");
            if len > 0 {
                assert_eq!(start % 64, m as u64, "len {len} m {m}");
                assert_eq!(exact_ranges(&batch.payload, ARENA.addr), vec![(start, end)]);
            }
        }
    }
}

#[test]
fn the_stack_comes_last_above_a_megabyte_guard_and_the_kernels_data_is_read_only() {
    let data = (0x1000, 0x3000);
    let mut b = BatchBuilder::new(&RISCV64);
    let state = b.output(&[0; 16]);
    b.call(0x1234, [Arg::Ptr(state, 0), Arg::Imm(0), Arg::Imm(0), Arg::Imm(0)], 1);
    let batch = b.layout(Arena { kernel_data: Some(data), ..ARENA }).unwrap();
    let prots = batch.protections();
    let s = batch.stack;
    assert!(s.bottom - s.guard >= STACK_GUARD);
    let guard = prots.iter().find(|p| p.contains(s.guard)).unwrap();
    assert_eq!((guard.addr, guard.len, guard.prot), (s.guard, s.bottom - s.guard, 0));
    assert_eq!(s.bottom + PAGE, ARENA.addr + ARENA.size - PAGE, "the stack ends a page below the arena's end");
    assert!(prots.iter().any(|p| p.prot == 0 && p.contains(ARENA.addr + ARENA.size - 1)));
    // Nothing the call writes or the driver records lies within reach below the stack.
    assert!(batch.addr_of(state, 16) <= s.guard && ARENA.addr + batch.table_end() as u64 <= s.guard);
    assert!(batch.payload.len() as u64 <= s.guard - ARENA.addr, "the guard and stack are never sent");
    let image = prots.iter().find(|p| p.addr == data.0).unwrap();
    assert_eq!((image.len, image.prot), (data.1 - data.0, PROT_READ));
    let far = batch.locate(s.guard).unwrap();
    assert!(far.starts_with(&format!("{} bytes below the stack budget", s.bottom - s.guard)), "{far}");
    assert!(batch.locate(s.bottom - 4104).unwrap().starts_with("4104 bytes below the stack budget"));
}

#[test]
fn every_nonzero_payload_byte_is_inside_a_data_range() {
    let mut b = BatchBuilder::new(&RISCV64);
    let input = b.buffer("input", &[0xa5; 5000], false, Placement::Misaligned(3));
    let state = b.output(&[0x5a; 16]);
    b.buffer("packed", &[0x77; 9], false, Placement::Packed(5));
    b.call(0x1234, [Arg::Ptr(input, 0), Arg::Ptr(state, 0), Arg::Imm(7), Arg::Imm(9)], 1);
    let batch = b.layout(ARENA).unwrap();
    let ranges: Vec<_> = batch.data_ranges().collect();
    assert_eq!(ranges.len(), 4, "the tables and three buffers");
    assert_eq!(ranges[1], {
        let at = (batch.addr_of(input, 0) - ARENA.addr) as usize;
        at..at + 5000
    });
    let covered = |i: usize| ranges.iter().any(|r| r.contains(&i));
    let stray: Vec<usize> = (0..batch.payload.len()).filter(|&i| batch.payload[i] != 0 && !covered(i)).collect();
    assert!(stray.is_empty(), "nonzero bytes outside the data ranges at {:?}", &stray[..stray.len().min(4)]);
    assert!(batch.payload[ranges[2].clone()].iter().all(|&x| x == 0x5a));
    let len = batch.payload.len();
    let spare = batch.into_payload();
    assert!(spare.bytes.len() == len && spare.bytes.iter().all(|&x| x == 0), "a reused payload is all zeros");
    let mut again = BatchBuilder::new(&RISCV64);
    again.buffer("input", &[3; 10], false, Placement::End);
    let fresh = again.clone().layout(ARENA).unwrap();
    assert_eq!(again.layout_and_clear(ARENA, spare).unwrap().payload, fresh.payload);
}

#[test]
fn the_response_ranges_are_the_tables_and_the_writable_buffers() {
    let mut b = BatchBuilder::new(&X86_64);
    let input = b.buffer("input", &[0xa5; 100], false, Placement::End);
    let state = b.output(&[0x5a; 16]);
    let packed = b.buffer("acc", &[1; 40], true, Placement::Packed(3));
    b.call(0x1234, [Arg::Ptr(input, 0), Arg::Ptr(state, 0), Arg::Ptr(packed, 0), Arg::Imm(1)], 1);
    let batch = b.clone().layout(ARENA).unwrap();
    let at = |id: BufId, len: usize| {
        let lo = (batch.addr_of(id, 0) - ARENA.addr) as usize;
        lo..lo + len
    };
    let mut got: Vec<_> = batch.response_ranges().collect();
    got.sort_by_key(|r| r.start);
    assert_eq!(got, vec![0..batch.table_end(), at(state, 16), at(packed, 40)]);
    assert!(got.iter().all(|r| r.end <= batch.resp_len), "all inside the response");
    // Laid out and cleared: the same batch, and an empty builder that lays the next one.
    let mut again = b.clone();
    let same = again.layout_and_clear(ARENA, ZeroedPayload::default()).unwrap();
    assert_eq!(same.payload, batch.payload);
    assert!(again.is_empty() && again.bufs.is_empty() && again.bytes.is_empty());
    again.buffer("input", &[3; 10], false, Placement::End);
    let mut fresh = BatchBuilder::new(&X86_64);
    fresh.buffer("input", &[3; 10], false, Placement::End);
    assert_eq!(again.layout(ARENA).unwrap().payload, fresh.layout(ARENA).unwrap().payload);
}

#[test]
fn timed_batches_list_no_exact_ranges() {
    let mut b = BatchBuilder::new(&X86_64);
    b.page_bounds_only();
    b.input(&[1; 64], 3);
    let batch = b.layout(ARENA).unwrap();
    assert!(exact_ranges(&batch.payload, ARENA.addr).is_empty());
}

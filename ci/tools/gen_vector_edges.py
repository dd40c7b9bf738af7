#!/usr/bin/env python3
"""Generates vectors/poly1305/vector-edges.json: Poly1305 processBlocks cases aimed at radix-2^26
vector code (Goll & Gueron, "Vectorization of Poly1305 message authentication code", 2015), as
kernels/x86_64/poly1305-avx2.inc computes it: two chains of four lanes, A and B, taking the
groups of four blocks in turns, each stepping by r^8 with the next group added to the product
columns before its lazy reduction; at the end A's lanes times (r^8, r^6, r^7, r^5), B's times
(r^4, r^2, r^3, r^1), the eight lanes' columns summed and carried once in full (vector_model):

  * lengths at the crossover (CROSSOVER = 256 bytes, POLY_AVX2_MIN) and one block either side,
    odd and even group counts (G even: A starts with acc; G odd: B does), lengths that are not
    a multiple of 64 (the scalar loop finishes 1..3 blocks), tails, calls handed between the
    paths; and the AVX-512 IFMA build's length rules (IFMA from 256 bytes, POLY_IFMA_MIN, else
    scalar; groups of eight for two chains of eight lanes by r^16, 0..7 blocks left);
  * the largest magnitudes: every acc limb at its bound, all-0xff blocks, r whose powers
    r^1..r^8 have the largest limbs (the eight lanes' products are summed before the last
    carry chain: the "limb overflow in the partial reduction of the last multiply" that broke
    shipped AVX2 code);
  * lazy-reduction edges, per chain: the last group of chain A (or B) chosen so that its last
    lazy carries leave limbs 1 and 4 above 2^26 (a carry across a 2^26 boundary the next
    multiply must absorb),
    r = 1 messages whose first lazy reduction leaves limbs 1 and 4 at 2^26, and the largest eight-lane
    sum and product columns of a random pool;
  * r = 1 sums at the final combine: 24 blocks whose eight lanes each fold once in their last
    lazy reduction, the eight-lane sum S at 2p - 1, 2p, 2p + 1, 2^131 - 6 .. 2^131 - 1, 2^131
    (results p, 2^130 - 1, 2^130, 2^130 + 4: limb 4 = 2^26 stored, and 10) and 2^131 - 2^104
    (limb 4 = 2^27 - 1), alone and handed to the scalar loop for a 25th block (at 16 blocks the
    two-chain sum cannot come below 7 * 2^129: r1_sum_entries).

  * the IFMA path's carry passes (ifma_model: radix 2^44, two chains of eight lanes by r^16,
    vpmadd52's low and high halves, POLY_CARRY8's three parallel carries): for chain A and
    chain B, its last group chosen so that each carry lands on a full limb (h0, h1 at or
    above 2^44, h2 at or above 2^42); every entry of 256 bytes or more says what the IFMA
    model makes of it too.

Every expected value (expect_acc) comes from Python integers, RFC 8439 §2.5.1, not from the
model; the model of the kernel's arithmetic (vector_model) only chooses the inputs and says in
each entry's comment what they make of it. Re-running rewrites the same file.
"""
import pathlib
import random
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gen_vectors import CLAMP, P, kernel_columns, limbs, limbs_value, poly_exact, write  # noqa: E402

M26 = (1 << 26) - 1
CROSSOVER = 256  # POLY_AVX2_MIN in kernels/x86_64/poly1305.S
NEON_MIN = 320  # POLY_NEON_MIN in kernels/aarch64/poly1305.S
RVV_MIN = 256  # POLY_RVV_MIN in kernels/riscv64/poly1305.S
IFMA_MIN = 256  # POLY_IFMA_MIN there (the IFMA build: IFMA from 256 bytes, else scalar)
LANES = (0, 2, 1, 3)  # block of a group each lane holds (vpunpck{l,h}qdq order)


def mulr_scalar(h, r):
    """The scalar kernel's h * r, partially reduced (used for the powers r^2..r^4)."""
    a0, a1, a2 = kernel_columns(r)
    d = (h & (2**64 - 1)) * a0 + ((h >> 64) & (2**64 - 1)) * a1 + (h >> 128) * a2
    return (d & ((1 << 130) - 1)) + 5 * (d >> 130)


def powers(r):
    """r, r^2, r^3, r^4 as the kernel computes them (partially reduced, radix 2^64)."""
    out = [r]
    for _ in range(3):
        out.append(mulr_scalar(out[-1], r))
    return out


def vmul(h, t):
    """One lane's five columns d = h * t (t: r limbs), s_j = 5 r_j; asserts vpmuludq's 32-bit inputs."""
    s = [5 * x for x in t]
    assert all(x < 1 << 32 for x in h + t + s)
    return [sum(h[i] * (t[k - i] if i <= k else s[k - i + 5]) for i in range(5)) for k in range(5)]


def block_limbs(b):
    lo, hi = int.from_bytes(b[:8], "little"), int.from_bytes(b[8:16], "little")
    return [lo & M26, (lo >> 26) & M26, ((lo >> 52) | (hi << 12)) & M26, (hi >> 14) & M26, (hi >> 40) | (1 << 24)]


def vector_model(acc, r, msg):
    """The AVX2 path (kernels/x86_64/poly1305-avx2.inc) on one call of len(msg) >= CROSSOVER
    bytes, a multiple of 64: (stats, S, result), S the eight lanes' column sum at the final
    combine as an integer (before the full carry chain), result the limbs it stores.

    Two chains of four lanes, A and B, take the groups of four in turns, each h <- lazy2(h *
    r^8 + its next group) (the message joins the product columns before the carry); with G
    groups, G even: A starts at acc + group 0, B at group 1; G odd: A at 0, B at acc + group 0.
    The chain holding acc takes group 2 into its first lazy reduction either way. At the end
    A's lanes are multiplied by (r^8, r^6, r^7, r^5), B's by (r^4, r^2, r^3, r^1), and the
    eight lanes' columns summed. Asserts vpmuludq's 32-bit inputs, 64-bit columns, and that
    the result is acc's Horner value mod p."""
    f4, f8 = avx2_tables(r)
    groups = len(msg) // 64
    # limbs 1 and 4 after any lazy reduction (the r^5..r^8 table's too): the last 0->1 and
    # 3->4 carries of POLY_VCARRY2 are what can leave them at or above 2^26
    top14 = [max(t[1] for t in f8), max(t[4] for t in f8)]

    def grp(g):
        return [block_limbs(msg[64 * g + 16 * k:64 * g + 16 * k + 16]) for k in LANES]
    st = {"max_h": 0, "max_d": 0, "max_lazy_a": 0, "max_lazy_b": 0, "max_sum": 0}
    first = [[a + b for a, b in zip(h, m)] for h, m in zip([list(acc)] + [[0] * 5] * 3, grp(0))]
    if groups % 2 == 0:
        chains, nxt, acc_chain = {"a": first, "b": grp(1)}, 2, "a"
    else:
        chains, nxt, acc_chain = {"a": [[0] * 5] * 4, "b": first}, 1, "b"
    for _ in range((groups + 1) // 2 - 1):
        for c in "ab":
            h = chains[c]
            st["max_h"] = max(st["max_h"], *(x for lane in h for x in lane))
            prods = [vmul(lane, f8[0]) for lane in h]
            st[f"last_{c}"] = (nxt, prods)
            ds = [[x + y for x, y in zip(p, m)] for p, m in zip(prods, grp(nxt))]
            nxt += 1
            st["max_d"] = max(st["max_d"], *(x for d in ds for x in d))
            chains[c] = [lazy2(d) for d in ds]
            top14 = [max(top14[0], *(lane[1] for lane in chains[c])), max(top14[1], *(lane[4] for lane in chains[c]))]
            for k in (1, 4):
                st[f"max_limb{k}_{c}"] = max(st.get(f"max_limb{k}_{c}", 0), *(lane[k] for lane in chains[c]))
            st[f"max_lazy_{c}"] = max(st[f"max_lazy_{c}"], *(x for lane in chains[c] for x in lane))
            if c == acc_chain:
                st.setdefault("acc_lane_first", list(chains[c][0]))
    assert nxt == groups
    st["limb1"], st["limb4"] = top14
    for c in "ab":
        st["max_h"] = max(st["max_h"], *(x for lane in chains[c] for x in lane))
    ds = [vmul(h, t) for h, t in zip(chains["a"], f8)] + [vmul(h, t) for h, t in zip(chains["b"], f4)]
    st["max_d"] = max(st["max_d"], *(x for d in ds for x in d))
    col = [sum(d[k] for d in ds) for k in range(5)]
    assert all(x < 1 << 64 for x in col)
    st["max_sum"] = max(col)
    out = list(col)
    for i in range(2):
        for k in range(4):
            out[k + 1] += out[k] >> 26
            out[k] &= M26
        if i == 0:
            out[0] += 5 * (out[4] >> 26)
            out[4] &= M26
    assert all(x <= M26 for x in out[:4]) and out[4] < 1 << 27
    assert limbs_value(out) % P == poly_exact(acc, r, msg) % P
    return st, limbs_value(col), out


M44, M42 = (1 << 44) - 1, (1 << 42) - 1
IFMA_LANES = (0, 4, 1, 5, 2, 6, 3, 7)  # block of a group of eight each lane holds
IFMA_F8 = (8, 4, 7, 3, 6, 2, 5, 1)  # chain B's last-group powers per lane; chain A's are these + 8


def split44(v):
    """An integer (below 2^131) as the IFMA path's limbs: 44, 44 and the rest."""
    return [v & M44, (v >> 44) & M44, v >> 88]


def ifma_block(b):
    """A 16-byte block as 44-bit limbs with the 2^128 bit (POLY_MSG8)."""
    x = int.from_bytes(b, "little")
    return [x & M44, (x >> 44) & M44, (x >> 88) | (1 << 40)]


def ifma_columns(h, t, low):
    """POLY_MUL8 and POLY_COLUMNS8 on one lane: t = (r0, r1, r2), s_j = 20 r_j; the low halves
    start at `low` (the message, or 0). Asserts vpmadd52's 52-bit operands and 64-bit sums."""
    r0, r1, r2 = t
    s1, s2 = 20 * r1, 20 * r2
    terms = [[(h[2], s1), (h[1], s2), (h[0], r0)], [(h[2], s2), (h[1], r0), (h[0], r1)], [(h[2], r0), (h[1], r1), (h[0], r2)]]
    lo, hi = list(low), [0, 0, 0]
    for k in range(3):
        for a, b in terms[k]:
            assert a < 1 << 52 and b < 1 << 52
            lo[k] += (a * b) & ((1 << 52) - 1)
            hi[k] += (a * b) >> 52
    t = [lo[0] + (hi[2] << 12) + (hi[2] << 10), lo[1] + (hi[0] << 8), lo[2] + (hi[1] << 8)]
    assert all(x < 1 << 64 for x in t)
    return t


def ifma_carry(t):
    """POLY_CARRY8: the three carries in parallel, 0->1, 1->2, 2->0 times 5."""
    return [(t[0] & M44) + 5 * (t[2] >> 42), (t[1] & M44) + (t[0] >> 44), (t[2] & M42) + (t[1] >> 44)]


def ifma_model(acc, r, msg):
    """The IFMA path (kernels/x86_64/poly1305-ifma.inc) on one call of len(msg) >= IFMA_MIN
    bytes, a multiple of 128: (stats, result limbs). Two chains of eight lanes, A and B, take
    the groups of eight in turns, each h <- carry(h * r^16 + its next group) (the message is
    the low halves' start); G even: A starts at acc + group 0, B at group 1; G odd: A at 0, B
    at acc + group 0. At the end A's lanes times r^16, r^12, r^15, r^11, r^14, r^10, r^13, r^9,
    B's times r^8, r^4, r^7, r^3, r^6, r^2, r^5, r^1, sixteen lanes summed, two carry passes.
    Asserts the result is acc's Horner value mod p."""
    pw = powers8(r)
    f8 = [split44(pw[k - 1]) for k in IFMA_F8]
    f16 = [ifma_carry(ifma_columns(t, f8[0], [0, 0, 0])) for t in f8]
    groups = len(msg) // 128

    def grp(g):
        return [ifma_block(msg[128 * g + 16 * k:128 * g + 16 * k + 16]) for k in IFMA_LANES]
    st = {}
    top = [0, 0, 0]
    for t in f16:
        top = [max(a, b) for a, b in zip(top, t)]
    first = [[a + b for a, b in zip(h, m)] for h, m in zip([split44(limbs_value(acc))] + [[0] * 3] * 7, grp(0))]
    if groups % 2 == 0:
        chains, nxt = {"a": first, "b": grp(1)}, 2
    else:
        chains, nxt = {"a": [[0] * 3] * 8, "b": first}, 1
    for _ in range((groups + 1) // 2 - 1):
        for c in "ab":
            cols = [ifma_columns(h, f16[0], [0, 0, 0]) for h in chains[c]]
            st[f"last_{c}"] = (nxt, cols)
            chains[c] = [ifma_carry([x + y for x, y in zip(col, m)]) for col, m in zip(cols, grp(nxt))]
            nxt += 1
            for k in range(3):
                st[f"h{k}_{c}"] = max(st.get(f"h{k}_{c}", 0), *(h[k] for h in chains[c]))
            top = [max(top[k], *(h[k] for h in chains[c])) for k in range(3)]
    assert nxt == groups
    st["top"] = top
    ts = [ifma_columns(h, t, [0, 0, 0]) for h, t in zip(chains["a"], f16)] + \
        [ifma_columns(h, t, [0, 0, 0]) for h, t in zip(chains["b"], f8)]
    t = [sum(x[k] for x in ts) for k in range(3)]
    assert all(x < 1 << 64 for x in t)
    t[1] += t[0] >> 44
    t[0] &= M44
    t[2] += t[1] >> 44
    t[1] &= M44
    t[0] += 5 * (t[2] >> 42)
    t[2] &= M42
    t[1] += t[0] >> 44
    t[0] &= M44
    t[2] += t[1] >> 44
    t[1] &= M44
    v = t[0] + (t[1] << 44) + (t[2] << 88)
    out = limbs(v)
    assert out[4] <= 1 << 26 and v % P == poly_exact(acc, r, msg) % P
    return st, out


def powers8(r):
    """r, r^2, .. r^8 as the scalar multiply computes them (partially reduced)."""
    out = [r]
    for _ in range(7):
        out.append(mulr_scalar(out[-1], r))
    return out


def ifma_note(acc, r, msg):
    """The IFMA model's words for an entry (tests/vector_edges.rs picks "hK reaches 2^44")."""
    st, out = ifma_model(acc, r, msg[:len(msg) // 128 * 128])
    widths = (44, 44, 42)
    note = (f". IFMA model (two chains of eight lanes by r^16): largest limbs after a carry pass h0, h1, h2 = "
            + ", ".join(f"2^{w} {x - (1 << w):+d}" for x, w in zip(st["top"], widths)))
    for k, w in enumerate(widths):
        if st["top"][k] >= 1 << w:
            note += f"; h{k} reaches 2^{w} after a carry pass"
    return note


def aim_ifma_carries(acc, r, msg, chain):
    """msg with the group `chain` adds in its last carry pass rewritten so that every lane's
    columns end at t0 & M44 = t1 & M44 = M44 and (where limb 2's 40 free bits reach) t2 & M42
    = M42: each of the three parallel carries lands on a full limb (h0, h1 at or above 2^44,
    h2 at or above 2^42)."""
    msg = bytearray(msg)
    g, cols = ifma_model(acc, r, bytes(msg[:len(msg) // 128 * 128]))[0][f"last_{chain}"]
    for lane, t in enumerate(cols):
        m0 = (M44 - t[0]) % (1 << 44)
        m1 = (M44 - t[1]) % (1 << 44)
        m2 = (M42 - t[2] - (1 << 40)) % (1 << 42)
        m2 = m2 if m2 < 1 << 40 else (1 << 40) - 1
        off = 128 * g + 16 * IFMA_LANES[lane]
        msg[off:off + 16] = (m0 | m1 << 44 | m2 << 88).to_bytes(16, "little")
    return bytes(msg)


def ifma_entries(rng):
    """For chain A and chain B of the IFMA path: its last carry pass aimed (aim_ifma_carries),
    at 32 blocks (G = 4: A at acc + group 0, B at group 1, one step each) and 40 (G = 5: A at
    0, B at acc + group 0, two steps each: A's first multiplies 0, so its carries cannot be
    aimed before its second), two r each."""
    v = []
    for rn, r in [("largest clamped r", CLAMP), ("random r", rng.getrandbits(128) & CLAMP)]:
        for blocks in (32, 40):
            for chain in "ab":
                acc = limbs(rng.getrandbits(130))
                for _ in range(200):
                    msg = aim_ifma_carries(acc, r, rbytes(rng, 16 * blocks), chain)
                    st = ifma_model(acc, r, msg)[0]
                    if all(st[f"h{k}_{chain}"] >= 1 << w for k, w in enumerate((44, 44, 42))):
                        break
                d = [st[f"h{k}_{chain}"] - (1 << w) for k, w in enumerate((44, 44, 42))]
                v.append(entry(f"IFMA carry pass: chain {chain.upper()}'s last leaves h0 at 2^44 {d[0]:+d}, h1 at 2^44 {d[1]:+d}, "
                               f"h2 at 2^42 {d[2]:+d}, {rn}, {blocks} blocks",
                               f"aims at the three parallel carries of chain {chain.upper()}'s last carry pass in the IFMA path "
                               "(POLY_CARRY8): its last group's blocks chosen so that each carry lands on a full limb",
                               acc, r, msg))
    return v


# The two other 4-blocks-per-group layouts (powers p[k] = r^(k+1)): per lane, the terms
# (block of the group, power, whether H is added to that block). aarch64 NEON: two 64-bit
# lanes, each (H + m_a) r^4 + m_b r^2; the last group (r^4, r^3 | r^2, r^1). riscv64 RVV:
# four lanes in block order, each (H + m_l) r^4; the last group r^(4-l).
SCHEMES = {
    "neon": ([[(0, 3, True), (2, 1, False)], [(1, 3, True), (3, 1, False)]],
             [[(0, 3, True), (2, 1, False)], [(1, 2, True), (3, 0, False)]]),
    "rvv": ([[(l, 3, True)] for l in range(4)], [[(l, 3 - l, True)] for l in range(4)]),
}


def lazy2(d):
    """The NEON and RVV lazy reduction: two interleaved chains 0->1, 3->4; 1->2, 4->0 (x5);
    2->3, 0->1; 3->4."""
    d = list(d)

    def carry(a, b):
        d[b] += d[a] >> 26
        d[a] &= M26
    carry(0, 1)
    carry(3, 4)
    carry(1, 2)
    c = d[4] >> 26
    d[4] &= M26
    d[0] += 5 * c
    carry(2, 3)
    carry(0, 1)
    carry(3, 4)
    return d


def scheme_model(scheme, acc, r, msg):
    """The NEON or RVV path on one call (len(msg) a multiple of 64, >= 128 bytes): (stats, S,
    result) as vector_model gives them for the AVX2 path."""
    pw = [limbs(p) for p in powers(r)]
    loop, last_spec = SCHEMES[scheme]
    groups = len(msg) // 64
    h = [list(acc)] + [[0] * 5 for _ in loop[1:]]
    st = {"max_h": 0, "max_d": 0, "max_lazy": 0, "max_sum": 0}
    for g in range(groups):
        last = g == groups - 1
        ds = []
        for lane, terms in enumerate(last_spec if last else loop):
            col = [0] * 5
            for k, power, add_h in terms:
                x = block_limbs(msg[64 * g + 16 * k:64 * g + 16 * k + 16])
                if add_h:
                    x = [a + b for a, b in zip(h[lane], x)]
                st["max_h"] = max(st["max_h"], *x)
                col = [a + b for a, b in zip(col, vmul(x, pw[power]))]
            ds.append(col)
        st["max_d"] = max(st["max_d"], *(x for d in ds for x in d))
        assert st["max_d"] < 1 << 64
        if not last:
            h = [lazy2(d) for d in ds]
            assert all(x < 1 << 32 for lane in h for x in lane)
            st["max_lazy"] = max(st["max_lazy"], *(x for lane in h for x in lane))
    col = [sum(d[k] for d in ds) for k in range(5)]
    assert all(x < 1 << 64 for x in col)
    st["max_sum"] = max(col)
    out = list(col)
    for _ in range(2):
        for k in range(4):
            out[k + 1] += out[k] >> 26
            out[k] &= M26
        if _ == 0:
            out[0] += 5 * (out[4] >> 26)
            out[4] &= M26
    assert all(x <= M26 for x in out[:4]) and out[4] < 1 << 27
    return st, limbs_value(col), out


def log2(x):
    return f"2^{x.bit_length() - 1}.{int(100 * (x / (1 << (x.bit_length() - 1)) - 1)):02d}" if x else "0"


def entry(name, what, acc, r, msg, lengths=None, rng_note="", scheme="avx2"):
    assert r & ~CLAMP == 0 and all(x <= M26 for x in acc[:4]) and acc[4] < 1 << 27
    path = {"avx2": "the AVX2 path", "neon": "the aarch64 NEON path", "rvv": "the riscv64 RVV path"}[scheme]
    e = {"name": name, "source": f"vector-kernel edges chosen with a model of {path}'s arithmetic (ci/tools/gen_vector_edges.py); expect_acc from Python integers (RFC 8439 §2.5.1)"}
    note = what
    if scheme != "avx2" and len(msg) >= {"neon": NEON_MIN, "rvv": RVV_MIN}[scheme] and not lengths:
        # "limb 4 stored:", not the AVX2 note's "stored limb 4 =" (tests/vector_edges.rs picks those)
        st, s, out = scheme_model(scheme, acc, r, msg[:len(msg) // 64 * 64])
        note += (f". {scheme.upper()} model: largest limb into a multiply {log2(st['max_h'])}, largest product column {log2(st['max_d'])}, "
                 f"largest limb after a lazy reduction {log2(st['max_lazy'])} ({st['max_lazy'] - (1 << 26):+d} from 2^26), "
                 f"last group's lane-sum column {log2(st['max_sum'])}, lane sum S = {describe(s)}, limb 4 stored: {out[4]:#x}")
    if len(msg) >= CROSSOVER and not lengths:
        st, s, out = vector_model(acc, r, msg[:len(msg) // 64 * 64])
        note += (f". AVX2 model (two chains of four lanes by r^8): largest h limb into a multiply {log2(st['max_h'])}, "
                 f"largest product column {log2(st['max_d'])}, largest limb after a lazy reduction: chain A "
                 f"{lazy_note(st['max_lazy_a'])}, chain B {lazy_note(st['max_lazy_b'])}; "
                 f"eight-lane sum column {log2(st['max_sum'])}, eight-lane sum S = {describe(s)}, stored limb 4 = {out[4]:#x}")
        # tests/vector_edges.rs picks these two phrases (a mask after either carry fails exactly these entries)
        for k in (1, 4):
            if st[f"limb{k}"] >= 1 << 26:
                note += f"; limb {k} reaches 2^26 after a lazy reduction (2^26 {st[f'limb{k}'] - (1 << 26):+d})"
    if len(msg) >= IFMA_MIN and not lengths:
        note += ifma_note(acc, r, msg)
    e["comment"] = note + rng_note
    e["acc"] = list(acc)
    e["r_hex"] = r.to_bytes(16, "little").hex()
    e["msg_hex"] = msg.hex()
    if lengths:
        e["lengths"] = lengths
    e["expect_acc"] = format(poly_exact(acc, r, msg), "x")
    return e


def lazy_note(x):
    """A chain's largest limb after a lazy reduction ("none": the chain never reduces)."""
    return f"{log2(x)} ({x - (1 << 26):+d} from 2^26)" if x else "none"


def describe(x):
    for name, base in [("2^131", 1 << 131), ("2p", 2 * P), ("2^130", 1 << 130), ("p", P)]:
        if abs(x - base) <= 16:
            d = x - base
            return name if d == 0 else f"{name} {'+' if d > 0 else '-'} {abs(d)}"
    return log2(x)


def rbytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def avx2_groups_note(n):
    """What the AVX2 path does with a call of n >= CROSSOVER bytes."""
    g, blocks, rest = n // 64, n // 16, n % 16
    start = ("even: A starts at acc + group 0, B at group 1" if g % 2 == 0
             else "odd: A starts at 0, B at acc + group 0")
    return (f"{g} groups of four for the two AVX2 chains ({start}; each then takes {(g + 1) // 2 - 1} more by r^8, "
            f"the last group is B's), then {blocks % 4} block(s) for the scalar loop and a {rest}-byte tail")


def ifma_groups_note(n):
    """What the IFMA build does with a call of n bytes (POLY_IFMA_MIN: IFMA from 256 bytes, else scalar)."""
    g, blocks, rest = n // 128, n // 16, n % 16
    if n < IFMA_MIN:
        return f"below the IFMA path's {IFMA_MIN}-byte crossover: the scalar loop alone"
    start = ("even: A starts at acc + group 0, B at group 1" if g % 2 == 0
             else "odd: A starts at 0, B at acc + group 0")
    return (f"{g} groups of eight for the two IFMA chains ({start}; each then takes {(g + 1) // 2 - 1} more by r^16), "
            f"then {blocks % 8} block(s) for the scalar loop and a {rest}-byte tail")


def crossover_entries(rng):
    """Lengths at the AVX2 and IFMA crossovers (both 256 bytes) and one block either side, odd
    and even group counts (which chain starts with acc), every count of blocks left to the
    scalar loop, and calls handed between the paths."""
    v = []
    for n in [CROSSOVER - 16, CROSSOVER - 1, CROSSOVER, CROSSOVER + 1, CROSSOVER + 15, CROSSOVER + 16, CROSSOVER + 32,
              CROSSOVER + 48, CROSSOVER + 63, CROSSOVER + 64, 2 * CROSSOVER - 16, 2 * CROSSOVER + 16, 1024 + 48, 4096 + 32]:
        acc, r = limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP
        blocks, rest = divmod(n, 16)
        v.append(entry(f"crossover: {n} bytes ({blocks} blocks + {rest})",
                       avx2_groups_note(n) if n >= CROSSOVER else f"below the {CROSSOVER}-byte crossover: the scalar loop alone",
                       acc, r, rbytes(rng, n)))
    # The AVX-512 IFMA build: groups of eight blocks from 256 bytes (two, so one per chain),
    # odd and even group counts, 0..7 blocks left to the scalar loop.
    for n in [IFMA_MIN - 16, IFMA_MIN, IFMA_MIN + 16, IFMA_MIN + 48, IFMA_MIN + 112, IFMA_MIN + 127, 384, 384 + 16,
              512 - 1, 512, 640, 640 + 112, 1024 + 112, 2048 + 112]:
        acc, r = limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP
        blocks, rest = divmod(n, 16)
        v.append(entry(f"IFMA lengths: {n} bytes ({blocks} blocks + {rest})", ifma_groups_note(n), acc, r, rbytes(rng, n)))
    for lengths in ([CROSSOVER, 48, CROSSOVER + 16], [CROSSOVER - 16, CROSSOVER + 16, 16], [CROSSOVER + 48, CROSSOVER + 48],
                    [CROSSOVER + 64, CROSSOVER + 128 + 8]):
        n = sum(lengths)
        v.append(entry(f"crossover: calls of {', '.join(map(str, lengths))} bytes", "each call's acc handed to the next between the vector and scalar paths",
                       limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP, rbytes(rng, n), lengths))
    return v


def avx2_tables(r):
    """The AVX2 path's multiplier limbs: F4 = (r^4, r^2, r^3, r^1) per lane (split from the
    scalar multiply's radix-2^64 powers) and F8 = (r^8, r^6, r^7, r^5) = F4 * r^4, lazily
    reduced (lazy2); r^4 and r^8 (lane 0) are broadcast for the loop."""
    pw = powers(r)
    f4 = [limbs(pw[3]), limbs(pw[1]), limbs(pw[2]), limbs(pw[0])]
    return f4, [lazy2(vmul(t, f4[0])) for t in f4]


def power_weight(r):
    """How large r's power limbs are (s_j = 5 r_j weighs the limbs 1..4 again)."""
    f4, f8 = avx2_tables(r)
    return sum(sum(t) + 4 * sum(t[1:]) for t in f4[:3] + f8)


def magnitude_entries(rng):
    best = max((rng.getrandbits(128) & CLAMP for _ in range(20000)), key=power_weight)
    cands = [(rng.getrandbits(128) & CLAMP) | (0x0fffffc << 96) for _ in range(20000)]
    best2 = max(cands, key=power_weight)
    top = [M26] * 4 + [(1 << 27) - 1]
    v = []
    for rn, r in [("largest clamped r", CLAMP), ("r whose powers have the largest limbs (searched)", best),
                  ("r with top word 0x0ffffffc whose powers have the largest limbs (searched)", best2)]:
        for blocks in [16, 17, 20, 31, 64]:
            v.append(entry(f"largest magnitudes: acc limbs at their bounds, {rn}, {blocks} blocks of 0xff",
                           "aims at the largest magnitudes: every h limb and product column at its largest in both chains "
                           "(r^8 in the loop, r^1..r^8 at the final combine) and in the eight-lane sum", top, r, b"\xff" * (16 * blocks)))
    return v


def aim_last_carries(acc, r, msg, chain):
    """msg with the group that `chain` ("a" or "b") adds in its last lazy reduction rewritten so
    that, in every lane, columns 0, 1 and 3 end at 2^26 - 1 after their first carries (so the
    last 0->1 carry lands its 5 * c4 fold on a full limb 1, and the 2->3 carry on a full limb
    3), column 2 takes its largest message limb, and column 4 ends at 2^26 - 1 where the
    message's 24 free bits of limb 4 reach it: limbs 1 and 4 leave at their largest."""
    msg = bytearray(msg)
    g, prods = vector_model(acc, r, bytes(msg[:len(msg) // 64 * 64]))[0][f"last_{chain}"]
    for lane, d in enumerate(prods):
        m0 = (M26 - d[0]) % (1 << 26)
        m1 = (M26 - d[1] - ((d[0] + m0) >> 26)) % (1 << 26)
        m2 = M26
        m3 = (M26 - d[3]) % (1 << 26)
        m4 = (M26 - d[4] - (1 << 24) - ((d[3] + m3) >> 26)) % (1 << 26)
        m4 = m4 if m4 < 1 << 24 else (1 << 24) - 1
        off = 64 * g + 16 * LANES[lane]
        msg[off:off + 16] = (m0 | m1 << 26 | m2 << 52 | m3 << 78 | m4 << 104).to_bytes(16, "little")
    return bytes(msg)


def lazy_entries(rng):
    """Lazy-reduction edges of each chain: for chain A and chain B, the group the chain adds in
    its last lazy reduction chosen (aim_last_carries) so that its last 0->1 and 3->4 carries
    leave limbs 1 and 4 at or above 2^26 (hill-climbing random blocks, as for the single-chain
    loop, no longer gets there: with POLY_VCARRY2's order limb 1 passes 2^26 only when a
    carry of some 2^4..2^6 lands on a limb within that much of 2^26, about 2^-21 per lane and
    step; the aimed entries reach 2^26 + 8 .. + 21); r = 1 messages whose first lazy
    reduction leaves limbs 1 and 4 at 2^26; and picked from a random pool, the largest
    eight-lane sum column and product column. tests/vector_edges.rs plants a 26-bit mask
    after either carry: exactly the entries whose comment says that limb reaches 2^26 fail."""
    edge = [b"\xff" * 16, b"\x00" * 16, b"\xfb" + b"\xff" * 15, b"\x01" + b"\x00" * 15]

    def block():
        return rng.choice(edge) if rng.random() < 0.5 else rbytes(rng, 16)

    v = []
    starts = [("largest clamped r", CLAMP), ("random r", rng.getrandbits(128) & CLAMP),
              ("r with top word 0x0ffffffc", (rng.getrandbits(128) & CLAMP) | (0x0fffffc << 96))]
    for rn, r in starts:
        for blocks in (16, 20):
            for chain in "ab":
                acc = limbs(rng.getrandbits(130))
                for _ in range(200):
                    msg = aim_last_carries(acc, r, b"".join(block() for _ in range(blocks)), chain)
                    st = vector_model(acc, r, msg)[0]
                    if st["limb4"] >= 1 << 26:
                        break
                l1, l4 = (st[f"max_limb{k}_{chain}"] - (1 << 26) for k in (1, 4))
                v.append(entry(f"lazy reduction: chain {chain.upper()}'s last lazy carry leaves limb 1 at 2^26 {l1:+d}, limb 4 at 2^26 {l4:+d}, "
                               f"{rn}, {blocks} blocks",
                               f"aims at the last 0->1 and 3->4 carries of chain {chain.upper()}'s lazy reduction (POLY_VCARRY2): its last "
                               "group's blocks chosen so that every lane's limbs 1 and 4 end at their largest (header bounds 2^26 + 2^8.34 "
                               "and 2^26 + 2^6.1)", acc, r, msg))
    # r = 1 (the products are the sums): acc, block 0 and block 8 (lane 0's block of group 2,
    # which the chain holding acc adds into its first lazy reduction, G odd or even): lane 0's
    # columns [2^27 - 2, 2^26 - 1, 2^26, 2^26 - 1, 2^27 - 1] go through POLY_VCARRY2's order
    # (3->4 and 0->1, 4->0 (x5) and 1->2, 2->3 and 0->1, 3->4): 0->1 makes limb 1 2^26, 1->2
    # empties it, 4->0 folds 5 into limb 0 (2^26 + 3), 2->3 makes limb 3 2^26, and the last
    # 0->1 and 3->4 carries each land one on a limb of 2^26 - 1: lane 0 leaves as limbs
    # [3, 2^26, 0, 0, 2^26], limbs 1 and 4 at 2^26 for the next multiply.
    acc = [M26, M26 - 1, M26, M26, (1 << 27) - 1 - (1 << 25)]
    m = [M26, 0, 1, 0, 0]  # limb 4 without the 2^128 bit
    lo = m[0] | m[1] << 26 | (m[2] & 0xFFF) << 52
    hi = m[2] >> 12 | m[3] << 14 | m[4] << 40
    b0 = lo.to_bytes(8, "little") + hi.to_bytes(8, "little")
    for total in (16, 17, 20, 24):
        blocks = [block() for _ in range(total)]
        blocks[0], blocks[8] = b0, bytes(16)
        msg = b"".join(blocks)
        st = vector_model(acc, 1, msg[:len(msg) // 64 * 64])[0]
        assert st["acc_lane_first"] == [3, 1 << 26, 0, 0, 1 << 26], st
        chain = "A" if total // 4 % 2 == 0 else "B"
        v.append(entry(f"lazy reduction: r = 1, acc's lane (chain {chain}) leaves its first lazy carry as limbs (3, 2^26, 0, 0, 2^26), "
                       f"{total} blocks", f"aims at the last 0->1 and 3->4 carries of chain {chain}'s first lazy reduction: "
                       "each stops at 2^26 (limbs 1 and 4), after a fold of 2^130 into limb 0", acc, 1, msg))
    pool = []
    for _ in range(600):
        r = rng.choice([CLAMP, rng.getrandbits(128) & CLAMP, (rng.getrandbits(128) & CLAMP) | (0x0fffffc << 96)])
        acc = rng.choice([[M26] * 4 + [(1 << 27) - 1], limbs(rng.getrandbits(130)), [M26] * 4 + [1 << 26]])
        msg = b"".join(block() for _ in range(rng.choice([16, 20, 24])))
        pool.append((vector_model(acc, r, msg)[0], acc, r, msg))
    for key, label in [("max_sum", "largest eight-lane sum column"), ("max_d", "largest product column")]:
        pool.sort(key=lambda t: -t[0][key])
        for i, (st, acc, r, msg) in enumerate(pool[:3]):
            v.append(entry(f"lazy reduction: {label} #{i + 1} ({log2(st[key])}), {len(msg) // 16} blocks",
                           f"picked among 600 edge-weighted messages for the {label}", acc, r, msg))
    return v


def r1_sum_entries(rng):
    """r = 1: every power is 1 and the products are the sums themselves, so the eight-lane sum S
    at the final combine is the sum of the lanes' values after their last lazy reduction.
    At 16 or 17 blocks (one lazy reduction per lane, of two blocks of 2^128 + x each) no lane
    but acc's can reach 2^130 to fold and S > 7 * 2^129: the single-chain loop's targets near
    2^131 cannot be reached there, so these entries take 24 blocks (six groups, three blocks a
    lane): every lane's last lazy reduction folds once (its value 2^130 + y, y just below
    2^128, chosen), leaving y + 5, and the last lane's y sets S exactly: both chains' folds and
    the final carry chain at its edges. With a 25th block the scalar loop then continues from
    the stored limbs."""
    v = []
    targets = [("2^131 - 2^104 (limb 4 = 2^27 - 1)", (1 << 131) - (1 << 104)), ("2p - 1", 2 * P - 1), ("2p (result p)", 2 * P),
               ("2p + 1", 2 * P + 1), ("2^131 - 6 (result 2^130 - 1)", (1 << 131) - 6), ("2^131 - 5 (result 2^130, limb 4 = 2^26)", (1 << 131) - 5),
               ("2^131 - 4", (1 << 131) - 4), ("2^131 - 1 (result 2^130 + 4, limb 4 = 2^26)", (1 << 131) - 1), ("2^131 (result 10)", 1 << 131)]

    def at(c, lane, step):
        """Byte offset of chain c's (0: A, 1: B) lane's block in its step-th group (A takes
        groups 0, 2, 4 and B 1, 3, 5 of six)."""
        return 64 * (2 * step + c) + 16 * LANES[lane]

    def put(msg, off, x):
        msg[off:off + 16] = x.to_bytes(16, "little")

    lanes = [(c, lane) for c in (0, 1) for lane in range(4)]
    for label, target in targets:
        for extra in (0, 1):
            for _ in range(1000):
                acc = limbs(rng.getrandbits(100))
                msg = bytearray(384)
                before = {}
                for c, lane in lanes:
                    for s in (0, 1):
                        x = (1 << 128) - 1 - rng.getrandbits(120) if (c, lane) == lanes[-1] else (1 << 127) + rng.getrandbits(126)
                        put(msg, at(c, lane, s), x)
                    before[c, lane] = sum(int.from_bytes(msg[at(c, lane, s):at(c, lane, s) + 16], "little") + (1 << 128) for s in (0, 1))
                before[0, 0] += limbs_value(acc)
                # seven lanes: the last block brings the lane to 2^130 + y, y in [2^128 - 2^125, 2^128 - 2^124)
                for c, lane in lanes[:-1]:
                    y = (1 << 128) - (1 << 125) + rng.getrandbits(124)
                    put(msg, at(c, lane, 2), (1 << 130) + y - before[c, lane] - (1 << 128))
                # the eighth: S0 with its last block 0 (its lane then 2^128 + before < 2^130 + 2^128 - 1, no fold
                # only if below 2^130: not needed, the value is checked below), then the block that makes S = target
                last = at(*lanes[-1], 2)
                put(msg, last, 0)
                s0 = vector_model(acc, 1, bytes(msg))[1]
                rest = s0 - (before[lanes[-1]] + (1 << 128) - P)  # as if the eighth folded once too
                x = target - rest + P - before[lanes[-1]] - (1 << 128)
                if 0 <= x < 1 << 128:
                    put(msg, last, x)
                    if vector_model(acc, 1, bytes(msg))[1] == target:
                        break
            else:
                raise SystemExit(f"no r = 1 message for S = {label}")
            msg = bytes(msg) + (rbytes(rng, 16) if extra else b"")
            tail = ", then a 25th block in the scalar loop from the stored limbs" if extra else ""
            v.append(entry(f"r = 1, eight-lane sum S = {label}, {24 + extra} blocks",
                           "aims at the final combine's carry chain (and each chain's fold): every one of the eight lanes "
                           f"folds once in its chain's last lazy reduction (at 2^130 + y), the last lane's y sets S{tail}", acc, 1, msg))
    return v


def path_crossover_entries(rng, scheme, n_min):
    """Lengths at a path's crossover and each way its loop can end: the NEON loop takes two
    groups per iteration (an odd group count runs one step apart), then 0..3 blocks go to
    the scalar loop."""
    v = []
    for n in [n_min - 16, n_min - 1, n_min, n_min + 1, n_min + 16, n_min + 48, n_min + 63, n_min + 64,
              n_min + 80, n_min + 128, n_min + 176, n_min + 192, 1024 + 32, 2048 + 16]:
        acc, r = limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP
        blocks, rest = divmod(n, 16)
        what = (f"{scheme.upper()} path: {n // 64} groups of four, then {blocks % 4} block(s) for the scalar loop and a {rest}-byte tail"
                if n >= n_min else f"below the {scheme.upper()} path's {n_min}-byte crossover: that kernel's scalar loop only")
        v.append(entry(f"{scheme} crossover: {n} bytes ({blocks} blocks + {rest})", what, acc, r, rbytes(rng, n), scheme=scheme))
    for lengths in ([n_min, 48, n_min + 16], [n_min - 16, n_min + 64, 16]):
        v.append(entry(f"{scheme} crossover: calls of {', '.join(map(str, lengths))} bytes",
                       "each call's acc handed to the next between the vector and scalar paths",
                       limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP, rbytes(rng, sum(lengths)), lengths, scheme=scheme))
    return v


def path_lazy_entries(rng, scheme, blocks):
    """Blocks hill-climbed (one at a time) towards the largest limb the path's lazy reduction
    leaves for the next multiply, acc limbs at their bounds or random."""
    edge = [b"\xff" * 16, b"\x00" * 16, b"\xfb" + b"\xff" * 15, b"\x01" + b"\x00" * 15]

    def block():
        return rng.choice(edge) if rng.random() < 0.5 else rbytes(rng, 16)

    v = []
    for rn, r in [("largest clamped r", CLAMP), ("random r", rng.getrandbits(128) & CLAMP)]:
        for acc in ([M26] * 4 + [(1 << 27) - 1], limbs(rng.getrandbits(130))):
            msg = [block() for _ in range(blocks)]
            best = scheme_model(scheme, acc, r, b"".join(msg))[0]["max_lazy"]
            for _ in range(300):
                i = rng.randrange(blocks - 4)
                old, msg[i] = msg[i], block()
                got = scheme_model(scheme, acc, r, b"".join(msg))[0]["max_lazy"]
                if got >= best:
                    best = got
                else:
                    msg[i] = old
            v.append(entry(f"{scheme} lazy reduction: a limb {best - (1 << 26):+d} from 2^26 after a lazy carry, {rn}, {blocks} blocks",
                           "blocks hill-climbed towards the largest limb a lazy reduction leaves for the next multiply",
                           acc, r, b"".join(msg), scheme=scheme))
    return v


def path_r1_entries(rng, scheme, blocks):
    """r = 1 (every power is 1, the products are the sums): random first groups (their lanes
    fold at 2^130 in the lazy reductions), then the last group's four blocks set the lane
    sum S before the final carry chain to each target exactly."""
    targets = [("2^131 - 2^104 (limb 4 = 2^27 - 1)", (1 << 131) - (1 << 104)), ("2p - 1", 2 * P - 1), ("2p (result p)", 2 * P),
               ("2p + 1", 2 * P + 1), ("2^131 - 6 (result 2^130 - 1)", (1 << 131) - 6), ("2^131 - 5 (result 2^130, limb 4 = 2^26)", (1 << 131) - 5),
               ("2^131 - 1 (result 2^130 + 4, limb 4 = 2^26)", (1 << 131) - 1), ("2^131", 1 << 131)]
    v = []
    for label, target in targets:
        for extra in (0, 1):
            while True:
                acc = limbs(rng.getrandbits(130))
                first = rbytes(rng, 16 * (blocks - 4))
                _, s0, _ = scheme_model(scheme, acc, 1, first + bytes(64))
                rest = target - s0
                if 0 <= rest <= 4 * ((1 << 128) - 1):
                    break
            last = [rest // 4 + (1 if i < rest % 4 else 0) for i in range(4)]
            msg = first + b"".join(x.to_bytes(16, "little") for x in last)
            _, s, _ = scheme_model(scheme, acc, 1, msg)
            assert s == target
            msg += rbytes(rng, 16) if extra else b""
            tail = f", then a block in the scalar loop from the stored limbs" if extra else ""
            v.append(entry(f"{scheme} r = 1, last-group lane sum S = {label}, {blocks + extra} blocks",
                           f"the lanes' sum before the final carry chain set by the last group's blocks{tail}", acc, 1, msg, scheme=scheme))
    return v


# riscv64 RVV (kernels/riscv64/poly1305-rvv.inc): L = VLEN / 16 lanes (e32/m2) in block order,
# each (H + m_l) r^L; the loop adds a group's words into the product columns and reduces with
# a narrowing carry chain (lazy_rvv_loop), the first group and the last one add limbs (x = H +
# m, H from lazy2 before the last); the last group's x_l folded in halves (y_j = lazy2(x_j
# r^(n/2)) + x_(j+n/2)) down to one lane, times r; powers r^(2^k) by squaring with the same
# multiply and lazy2.  RVV_VLENS: the VLENs `lab run` runs the RVV rows at.
RVV_VLENS = (128, 256, 512, 1024)
RVV_ONE_GROUP = 512  # RVV_ONE_GROUP in kernels/riscv64/poly1305-rvv.inc


def rvv_lanes(vlen):
    """Lanes of the RVV path at `vlen`: VLMAX at e32/m2."""
    return vlen // 16


def lazy_rvv_loop(d, b):
    """The RVV loop's reduction of the columns d with block b's words added at their bits'
    places (word k at 2^(32 k) = 2^(26 k) 2^(6 k) in column k, the pad bit 2^24 in column 4):
    the chain 0->1->2->3->4 with each carry narrowed to 32 bits, x_i = d_i mod 2^26, x0 += 5
    c4, x1 += x0 >> 26.  Asserts the narrowed carries and x0 fit 32 bits."""
    w = [int.from_bytes(b[4 * k:4 * k + 4], "little") for k in range(4)]
    d = [d[0] + w[0], d[1] + (w[1] << 6), d[2] + (w[2] << 12), d[3] + (w[3] << 18), d[4] + (1 << 24)]
    assert all(x < 1 << 64 for x in d)
    for k in range(4):
        c = d[k] >> 26
        assert c < 1 << 32, "a narrowed carry"
        d[k + 1] += c
    c4 = d[4] >> 26
    x = [v & M26 for v in d]
    x[0] += 5 * c4
    assert x[0] < 1 << 32, "x0 + 5 c4"
    x[1] += x[0] >> 26
    x[0] &= M26
    return x


def rvv_vector_bytes(n, lanes):
    """Whether the RVV path takes a call of n bytes at `lanes` lanes, and the bytes of its
    whole groups (the rest goes to the scalar loop)."""
    group = 16 * lanes
    takes = n >= RVV_MIN and n >= group and (n >= 2 * group or n >= RVV_ONE_GROUP)
    return takes, (n // group * group if takes else 0)


def rvv_model(acc, r, msg, lanes):
    """The RVV path on its whole groups (len(msg) a multiple of 16 lanes): (stats, S, result),
    S the value of the last product's columns (before the final carry chain), result the
    limbs it stores; asserts every column < 2^64 and every limb into a multiply < 2^32."""
    pw = {1: limbs(r)}
    k = 1
    while k < lanes:
        pw[2 * k] = lazy2(vmul(pw[k], pw[k]))
        k *= 2
    st = {"max_h": 0, "max_d": 0, "max_lazy": 0, "max_tree": 0}

    def mul(x, p):
        st["max_h"] = max(st["max_h"], *x)
        d = vmul(x, pw[p])
        st["max_d"] = max(st["max_d"], *d)
        assert st["max_d"] < 1 << 64
        return d

    def red(d):
        h = lazy2(d)
        st["max_lazy"] = max(st["max_lazy"], *h)
        return h
    groups = len(msg) // (16 * lanes)

    def blk(g, l):
        return msg[16 * (g * lanes + l):16 * (g * lanes + l) + 16]
    h = [list(acc)] + [[0] * 5 for _ in range(lanes - 1)]
    x = [[a + b for a, b in zip(h[l], block_limbs(blk(0, l)))] for l in range(lanes)]
    if groups > 1:
        d = [mul(v, lanes) for v in x]
        for g in range(1, groups - 1):
            x = [lazy_rvv_loop(d[l], blk(g, l)) for l in range(lanes)]
            st["max_lazy"] = max(st["max_lazy"], *(v for lane in x for v in lane))
            d = [mul(v, lanes) for v in x]
        x = [[a + b for a, b in zip(red(d[l]), block_limbs(blk(groups - 1, l)))] for l in range(lanes)]
    n = lanes
    while n > 1:
        n //= 2
        x = [[a + b for a, b in zip(red(mul(x[j], n)), x[j + n])] for j in range(n)]
        st["max_tree"] = max(st["max_tree"], *x[0])
    col = mul(x[0], 1)
    out = list(col)
    for i in range(2):
        for k in range(4):
            out[k + 1] += out[k] >> 26
            out[k] &= M26
        if i == 0:
            out[0] += 5 * (out[4] >> 26)
            out[4] &= M26
    assert all(x <= M26 for x in out[:4]) and out[4] < 1 << 27
    assert st["max_h"] < 1 << 32
    return st, limbs_value(col), out


def rvv_note(acc, r, msg, vlen):
    """What the RVV path does with the call at `vlen` (the entry's comment)."""
    lanes = rvv_lanes(vlen)
    takes, nb = rvv_vector_bytes(len(msg), lanes)
    blocks, rest = divmod(len(msg), 16)
    if not takes:
        return f"at VLEN {vlen} ({lanes} lanes) below the RVV path's crossover: the scalar loop only"
    st, s, out = rvv_model(acc, r, msg[:nb], lanes)
    assert limbs_value(out) % P == poly_exact(acc, r, msg[:nb]) % P
    return (f"at VLEN {vlen} ({lanes} lanes): {nb // (16 * lanes)} group(s), then {blocks - nb // 16} block(s) for the scalar "
            f"loop and a {rest}-byte tail. RVV model: largest limb into a multiply {log2(st['max_h'])}, largest product column "
            f"{log2(st['max_d'])}, largest limb after a lazy reduction {log2(st['max_lazy'])} ({st['max_lazy'] - (1 << 26):+d} "
            f"from 2^26), largest tree limb {log2(st['max_tree'])}, last product S = {describe(s)}, limb 4 stored: {out[4]:#x}")


def rvv_entry(name, what, acc, r, msg, vlen, lengths=None):
    assert r & ~CLAMP == 0 and all(x <= M26 for x in acc[:4]) and acc[4] < 1 << 27
    e = {"name": name, "source": "riscv64 RVV edges chosen with a model of the VLEN-wide RVV path's arithmetic "
         "(ci/tools/gen_vector_edges.py); expect_acc from Python integers (RFC 8439 §2.5.1)"}
    e["comment"] = what + ("" if lengths else ". " + rvv_note(acc, r, msg, vlen))
    e["acc"] = list(acc)
    e["r_hex"] = r.to_bytes(16, "little").hex()
    e["msg_hex"] = msg.hex()
    if lengths:
        e["lengths"] = lengths
    e["expect_acc"] = format(poly_exact(acc, r, msg), "x")
    return e


def rvv_entries(rng):
    """Per VLEN: lengths at the crossover, a tail of every length 1 .. L-1 blocks after three
    groups (one pass of the loop), hill-climbed lazy-reduction limbs (loop, tree and powers),
    and with r = 1 the last product S at the final carry chain's edges."""
    edge = [b"\xff" * 16, b"\x00" * 16, b"\xfb" + b"\xff" * 15, b"\x01" + b"\x00" * 15]

    def block():
        return rng.choice(edge) if rng.random() < 0.5 else rbytes(rng, 16)

    v = []
    for vlen in RVV_VLENS:
        lanes = rvv_lanes(vlen)
        group = 16 * lanes
        n_min = next(n for n in range(16, 4096, 16) if rvv_vector_bytes(n, lanes)[0])
        for n in sorted({n_min - 16, n_min - 1, n_min, n_min + 16, n_min + group - 16, n_min + group, 3 * group + 15}):
            acc, r = limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP
            v.append(rvv_entry(f"rvv VLEN {vlen} crossover: {n} bytes ({n // 16} blocks + {n % 16})",
                               f"the VLEN {vlen} path's crossover is {n_min} bytes", acc, r, rbytes(rng, n), vlen))
        v.append(rvv_entry(f"rvv VLEN {vlen} crossover: calls of {n_min}, 48, {n_min + 16} bytes",
                           f"each call's acc handed to the next between the vector and scalar paths at VLEN {vlen}",
                           limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP, rbytes(rng, 2 * n_min + 64),
                           vlen, [n_min, 48, n_min + 16]))
        groups = max(3, n_min // group)  # at least one pass of the loop, past the crossover
        # every tail up to 15 blocks; at more lanes the tails either side of L/4, L/2, 3L/4, L
        tails = range(1, lanes) if lanes <= 16 else sorted({1, 2, 3, lanes // 4, lanes // 2 - 2, lanes // 2 - 1, lanes // 2,
                                                             lanes // 2 + 1, 3 * lanes // 4, lanes - 3, lanes - 2, lanes - 1})
        for t in tails:
            acc, r = limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP
            rest = (7 * t) % 16
            v.append(rvv_entry(f"rvv VLEN {vlen} tail: {groups} groups of {lanes} blocks, then {t} block(s) + {rest} bytes",
                               f"a tail of {t} of the {lanes - 1} possible blocks for the scalar loop after the loop's pass",
                               acc, r, rbytes(rng, groups * group + 16 * t + rest), vlen))
        for rn, r in [("largest clamped r", CLAMP), ("random r", rng.getrandbits(128) & CLAMP)]:
            for acc in ([M26] * 4 + [(1 << 27) - 1], limbs(rng.getrandbits(130))):
                msg = [block() for _ in range(groups * lanes)]
                best = rvv_model(acc, r, b"".join(msg), lanes)[0]["max_lazy"]
                for _ in range(150):
                    i = rng.randrange(len(msg))
                    old, msg[i] = msg[i], block()
                    got = rvv_model(acc, r, b"".join(msg), lanes)[0]["max_lazy"]
                    if got >= best:
                        best = got
                    else:
                        msg[i] = old
                v.append(rvv_entry(f"rvv VLEN {vlen} lazy reduction: a limb {best - (1 << 26):+d} from 2^26, {rn}, {groups * lanes} blocks",
                                   "blocks hill-climbed towards the largest limb a lazy reduction (loop or tree) leaves for the next multiply",
                                   acc, r, b"".join(msg), vlen))
        targets = [("2^131 - 2^104 (limb 4 = 2^27 - 1)", (1 << 131) - (1 << 104)), ("2p - 1", 2 * P - 1), ("2p (result p)", 2 * P),
                   ("2^131 - 6 (result 2^130 - 1)", (1 << 131) - 6), ("2^131 - 5 (result 2^130, limb 4 = 2^26)", (1 << 131) - 5),
                   ("2^131 - 1 (result 2^130 + 4, limb 4 = 2^26)", (1 << 131) - 1)]
        # r = 1 (products are the sums): acc and block 0 make lane 0's first lazy reduction
        # carry through limbs 2, 3 into limb 4, fold 5 * 2 into limb 0, whose carry stops at
        # limb 1 = 2^26 for the next group (the AVX2 entry of lazy_entries, on lane 0 here).
        acc = [M26, M26 - 1, M26, M26, (1 << 27) - 1 - (1 << 24)]
        m = [M26, 0, 1, 0, 0]
        b0 = (m[0] | m[1] << 26 | m[2] << 52 | m[3] << 78 | m[4] << 104).to_bytes(16, "little")
        for extra in (0, lanes - 1):
            # lane 0's block of group 1 is zero: the loop's reduction adds it before carrying
            msg = b0 + b"".join(block() for _ in range(lanes - 1)) + bytes(16) + \
                b"".join(block() for _ in range((groups - 1) * lanes - 1 + extra))
            st = rvv_model(acc, 1, msg[:groups * group], lanes)[0]
            assert st["max_lazy"] >= 1 << 26, st
            v.append(rvv_entry(f"rvv VLEN {vlen} lazy reduction: r = 1, lane 0 leaves group 1 as limbs [8, 2^26, 0, 0, 0], "
                               f"{len(msg) // 16} blocks", "the first lazy reduction folds 2 * 2^130 into limb 0, whose carry "
                               "stops at 2^26 in limb 1, the next multiply's input", acc, 1, msg, vlen))
        nb = max(2 * group, n_min)
        for label, target in targets:
            for _ in range(20000):
                acc = limbs(rng.getrandbits(rng.choice([10, 100, 130])))
                msg = bytearray(b"".join(rng.choice([bytes(16), rbytes(rng, 16), b"\xff" * 16]) for _ in range(nb // 16)))
                msg[-16:] = bytes(16)
                _, s0, _ = rvv_model(acc, 1, bytes(msg), lanes)
                last = target - s0  # the last block (lane L-1 of the last group) enters the sum unreduced
                if 0 <= last < 1 << 128:
                    break
            else:
                raise SystemExit(f"no r = 1 message for {label} at VLEN {vlen}")
            msg[-16:] = last.to_bytes(16, "little")
            _, s, _ = rvv_model(acc, 1, bytes(msg), lanes)
            assert s == target
            v.append(rvv_entry(f"rvv VLEN {vlen} r = 1, last product S = {label}, {nb // 16} blocks",
                               "the value before the final carry chain set by the last block (lane L-1 enters the tree's sum unreduced)",
                               acc, 1, bytes(msg), vlen))
    return v


def main():
    rng = random.Random(29)
    v = crossover_entries(rng) + magnitude_entries(rng) + lazy_entries(rng) + r1_sum_entries(rng)
    v += ifma_entries(random.Random(29292))  # after the AVX2 ones, which stay as they were
    rng = random.Random(2929)  # the NEON entries: the AVX2 ones above stay as they were
    v += path_crossover_entries(rng, "neon", NEON_MIN)
    v += path_lazy_entries(rng, "neon", NEON_MIN // 16 + 4)
    v += path_r1_entries(rng, "neon", NEON_MIN // 16)
    write("poly1305", "vector-edges",
          "Poly1305 processBlocks aimed at radix-2^26 vector code (the x86_64 AVX2 path: two chains of four lanes stepping by r^8): "
          "lengths at the 256-byte scalar/vector crossover (AVX2 and IFMA) and one block either side, odd and even group counts, "
          "lengths not a multiple of 64 and tails, the IFMA build's groups of eight, calls handed between the paths; the largest "
          "limbs and product columns (acc limbs at their bounds, all-0xff blocks, r whose powers r^1..r^8 have the largest limbs); "
          "messages whose limbs after chain A's or chain B's lazy reduction sit furthest above 2^26; with r = 1 and every lane folding "
          "once, the eight-lane sum at the final combine at 2^131 - 2^104, 2p - 1 .. 2p + 1, 2^131 - 6 .. 2^131 - 1 and 2^131 "
          "(stored limb 4 = 2^26); for the IFMA path (two chains of eight lanes by r^16, radix 2^44), each chain's last carry pass "
          "with its three parallel carries landing on full limbs. The same kinds of entry for "
          "the aarch64 NEON path (320-byte crossover, two lanes of (r^4 | r^2)) with a model of its arithmetic. Inputs chosen with a "
          "model of the kernel's arithmetic; expect_acc from Python integers", v)
    write("poly1305", "rvv-edges",
          "Poly1305 processBlocks aimed at the VLEN-wide riscv64 RVV path (L = VLEN / 16 lanes, a halving tree for the last "
          "group), for each VLEN lab run uses (128, 256, 512, 1024): lengths at that VLEN's crossover, tails of 1 .. L-1 blocks "
          "after three groups (every length up to 15, twelve of them at 32 and 64 lanes), blocks hill-climbed towards the largest limb a lazy reduction leaves, and with "
          "r = 1 the last product at 2^131 - 2^104, 2p - 1, 2p, 2^131 - 6, 2^131 - 5 and 2^131 - 1 (stored limb 4 = 2^26). "
          "Inputs chosen with a model of the kernel's arithmetic; expect_acc from Python integers",
          rvv_entries(random.Random(292929)))

if __name__ == "__main__":
    main()

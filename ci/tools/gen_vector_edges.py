#!/usr/bin/env python3
"""Generates vectors/poly1305/vector-edges.json: Poly1305 processBlocks cases aimed at a 4-lane
radix-2^26 vector kernel (Goll & Gueron, "Vectorization of Poly1305 message authentication
code", 2015), as kernels/x86_64/poly1305.S's AVX2 path computes it:

  * lengths at the kernel's scalar/vector crossover (CROSSOVER bytes) and one block either
    side, lengths that are not a multiple of 64 (the scalar loop finishes 1..3 blocks), tails;
    and the AVX-512 IFMA path's length rules (groups of eight, 0..7 blocks left);
  * the largest magnitudes the vector multiply sees: every acc limb at its bound, all-0xff
    blocks, r whose powers r^2..r^4 have the largest limbs (the four lanes' products are summed
    before the last carry chain: the "limb overflow in the partial reduction of the last
    multiply" that broke shipped AVX2 code);
  * lazy-reduction edges: messages whose lane limbs after a lazy carry sit furthest above 2^26
    (a carry across a 2^26 boundary that the next multiply must absorb);
  * r = 1 sums: the last group's four-lane sum before the final carry chain at 2p - 1,
    2p, 2p + 1, 2^131 - 6 .. 2^131 - 1, 2^131 (results p, 2^130 - 1, 2^130, 2^130 + 4: limb 4
    = 2^26 stored) and 2^131 - 2^104 (limb 4 = 2^27 - 1), alone and handed to the scalar loop for a 17th block.

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
CROSSOVER = 192  # POLY_AVX2_MIN in kernels/x86_64/poly1305.S
NEON_MIN = 320  # POLY_NEON_MIN in kernels/aarch64/poly1305.S
RVV_MIN = 256  # POLY_RVV_MIN in kernels/riscv64/poly1305.S
IFMA_SHORT, IFMA_MIN = 256, 640  # POLY_IFMA_SHORT, POLY_IFMA_MIN there
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


def lazy(d):
    """The lazy reduction: one carry pass 0->1->2->3->4, 4->0 (x5), 0->1."""
    d = list(d)
    for k in range(4):
        d[k + 1] += d[k] >> 26
        d[k] &= M26
    c = d[4] >> 26
    d[4] &= M26
    d[0] += 5 * c
    d[1] += d[0] >> 26
    d[0] &= M26
    return d


def block_limbs(b):
    lo, hi = int.from_bytes(b[:8], "little"), int.from_bytes(b[8:16], "little")
    return [lo & M26, (lo >> 26) & M26, ((lo >> 52) | (hi << 12)) & M26, (hi >> 14) & M26, (hi >> 40) | (1 << 24)]


def vector_model(acc, r, msg):
    """The AVX2 path on one call of len(msg) >= CROSSOVER bytes: (stats, S, result), S the
    last group's lane sum as an integer (before the final carry chain), result the limbs it stores."""
    pw = powers(r)
    table = {0: limbs(pw[3]), 1: limbs(pw[1]), 2: limbs(pw[2]), 3: limbs(pw[0])}
    groups = len(msg) // 64
    h = [list(acc)] + [[0] * 5 for _ in range(3)]
    st = {"max_h": 0, "max_d": 0, "max_lazy": 0, "max_sum": 0}
    for g in range(groups):
        for lane, k in enumerate(LANES):
            m = block_limbs(msg[64 * g + 16 * k:64 * g + 16 * k + 16])
            h[lane] = [x + y for x, y in zip(h[lane], m)]
            st["max_h"] = max(st["max_h"], *h[lane])
        last = g == groups - 1
        ds = [vmul(h[lane], table[lane] if last else table[0]) for lane in range(4)]
        st["max_d"] = max(st["max_d"], *(x for d in ds for x in d))
        if not last:
            h = [lazy(d) for d in ds]
            st["max_lazy"] = max(st["max_lazy"], *(x for lane in h for x in lane))
            st.setdefault("lane0_first", list(h[0]))
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
        note += (f". AVX2 model: largest h limb into a multiply {log2(st['max_h'])}, largest product column {log2(st['max_d'])}, "
                 f"largest limb after a lazy reduction {log2(st['max_lazy'])} ({st['max_lazy'] - (1 << 26):+d} from 2^26), "
                 f"last group's lane-sum column {log2(st['max_sum'])}, lane sum S = {describe(s)}, stored limb 4 = {out[4]:#x}")
    e["comment"] = note + rng_note
    e["acc"] = list(acc)
    e["r_hex"] = r.to_bytes(16, "little").hex()
    e["msg_hex"] = msg.hex()
    if lengths:
        e["lengths"] = lengths
    e["expect_acc"] = format(poly_exact(acc, r, msg), "x")
    return e


def describe(x):
    for name, base in [("2^131", 1 << 131), ("2p", 2 * P), ("2^130", 1 << 130), ("p", P)]:
        if abs(x - base) <= 16:
            d = x - base
            return name if d == 0 else f"{name} {'+' if d > 0 else '-'} {abs(d)}"
    return log2(x)


def rbytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def crossover_entries(rng):
    v = []
    for n in [CROSSOVER - 16, CROSSOVER - 1, CROSSOVER, CROSSOVER + 1, CROSSOVER + 15, CROSSOVER + 16, CROSSOVER + 32,
              CROSSOVER + 48, CROSSOVER + 63, CROSSOVER + 64, 2 * CROSSOVER - 16, 2 * CROSSOVER + 16, 1024 + 48, 4096 + 32]:
        acc, r = limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP
        blocks, rest = divmod(n, 16)
        v.append(entry(f"crossover: {n} bytes ({blocks} blocks + {rest})",
                       f"{n // 64} groups of four for the vector loop, then {blocks % 4} block(s) for the scalar loop and a {rest}-byte tail ignored"
                       if n >= CROSSOVER else f"below the {CROSSOVER}-byte crossover: the scalar loop alone", acc, r, rbytes(rng, n)))
    # The AVX-512 IFMA path (POLY_IFMA_SHORT = 256, POLY_IFMA_MIN = 640): groups of eight
    # blocks, then 0..7 blocks for the scalar loop; 4..7 left below 640 bytes go to AVX2.
    for n in [IFMA_SHORT - 16, IFMA_SHORT, IFMA_SHORT + 16, IFMA_SHORT + 48, IFMA_SHORT + 64, IFMA_SHORT + 127,
              IFMA_MIN - 16, IFMA_MIN, IFMA_MIN + 16, IFMA_MIN + 112, IFMA_MIN + 127, 2048 + 112]:
        acc, r = limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP
        blocks, rest = divmod(n, 16)
        v.append(entry(f"IFMA lengths: {n} bytes ({blocks} blocks + {rest})",
                       f"{blocks // 8} groups of eight for an 8-lane path, then {blocks % 8} block(s) and a {rest}-byte tail",
                       acc, r, rbytes(rng, n)))
    for lengths in ([CROSSOVER, 48, CROSSOVER + 16], [CROSSOVER - 16, CROSSOVER + 16, 16], [CROSSOVER + 48, CROSSOVER + 48]):
        n = sum(lengths)
        v.append(entry(f"crossover: calls of {', '.join(map(str, lengths))} bytes", "each call's acc handed to the next between the vector and scalar paths",
                       limbs(rng.getrandbits(130)), rng.getrandbits(128) & CLAMP, rbytes(rng, n), lengths))
    return v


def power_weight(r):
    return sum(sum(limbs(p)) + 4 * sum(limbs(p)[1:]) for p in powers(r)[1:])


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
                           "every h limb and product column at its largest", top, r, b"\xff" * (16 * blocks)))
    return v


def lazy_entries(rng):
    """Edge-weighted messages: hill-climbed (one block changed at a time) towards the largest
    limb after a lazy reduction, and picked from a random pool for the largest last-group
    column and product column."""
    edge = [b"\xff" * 16, b"\x00" * 16, b"\xfb" + b"\xff" * 15, b"\x01" + b"\x00" * 15]

    def block():
        return rng.choice(edge) if rng.random() < 0.5 else rbytes(rng, 16)

    v = []
    starts = [("largest clamped r", CLAMP), ("random r", rng.getrandbits(128) & CLAMP),
              ("r with top word 0x0ffffffc", (rng.getrandbits(128) & CLAMP) | (0x0fffffc << 96))]
    for rn, r in starts:
        for blocks in (16, 20):
            acc = limbs(rng.getrandbits(130))
            msg = [block() for _ in range(blocks)]
            best = vector_model(acc, r, b"".join(msg))[0]["max_lazy"]
            for _ in range(400):
                i, old = rng.randrange(blocks - 4), None
                old, msg[i] = msg[i], block()
                got = vector_model(acc, r, b"".join(msg))[0]["max_lazy"]
                if got >= best:
                    best = got
                else:
                    msg[i] = old
            v.append(entry(f"lazy reduction: a limb {best - (1 << 26):+d} from 2^26 after a lazy carry, {rn}, {blocks} blocks",
                           "blocks hill-climbed towards the largest limb a lazy reduction leaves for the next multiply", acc, r, b"".join(msg)))
    # r = 1 (the products are the sums): acc and block 0 chosen so that lane 0's first lazy
    # reduction carries through limbs 2, 3 into limb 4 (d4 = 2^27), folds 5 * 2 into limb 0,
    # whose carry lands on a limb 1 of 2^26 - 1: lane 0 leaves the first group as limbs
    # [8, 2^26, 0, 0, 0], limb 1 at 2^26 for the next group.
    acc = [M26, M26 - 1, M26, M26, (1 << 27) - 1 - (1 << 24)]
    m = [M26, 0, 1, 0, 0]  # limb 4 without the 2^128 bit
    lo = m[0] | m[1] << 26 | (m[2] & 0xFFF) << 52
    hi = m[2] >> 12 | m[3] << 14 | m[4] << 40
    b0 = lo.to_bytes(8, "little") + hi.to_bytes(8, "little")
    for rest in (15, 16, 19):
        msg = b0 + b"".join(block() for _ in range(rest))
        st = vector_model(acc, 1, msg[:len(msg) // 64 * 64])[0]
        assert st["lane0_first"] == [8, 1 << 26, 0, 0, 0], st
        v.append(entry(f"lazy reduction: r = 1, lane 0 leaves group 1 as limbs [8, 2^26, 0, 0, 0], {rest + 1} blocks",
                       "the first lazy reduction folds 2 * 2^130 into limb 0, whose carry stops at 2^26 in limb 1", acc, 1, msg))
    pool = []
    for _ in range(600):
        r = rng.choice([CLAMP, rng.getrandbits(128) & CLAMP, (rng.getrandbits(128) & CLAMP) | (0x0fffffc << 96)])
        acc = rng.choice([[M26] * 4 + [(1 << 27) - 1], limbs(rng.getrandbits(130)), [M26] * 4 + [1 << 26]])
        msg = b"".join(block() for _ in range(rng.choice([16, 20, 24])))
        pool.append((vector_model(acc, r, msg)[0], acc, r, msg))
    for key, label in [("max_sum", "largest last-group lane-sum column"), ("max_d", "largest product column")]:
        pool.sort(key=lambda t: -t[0][key])
        for i, (st, acc, r, msg) in enumerate(pool[:3]):
            v.append(entry(f"lazy reduction: {label} #{i + 1} ({log2(st[key])}), {len(msg) // 16} blocks",
                           f"picked among 600 edge-weighted messages for the {label}", acc, r, msg))
    return v


def r1_sum_entries(rng):
    """r = 1: every power is 1, the products are the sums themselves. Lanes brought to
    2^130 + 2^105 + t in the third group (limb 4 over 2^26 before the carries: one fold each,
    leaving about 2^105), then the last group's four blocks make the
    lane sum S hit the target exactly."""
    v = []
    targets = [("2^131 - 2^104 (limb 4 = 2^27 - 1)", (1 << 131) - (1 << 104)), ("2p - 1", 2 * P - 1), ("2p (result p)", 2 * P),
               ("2p + 1", 2 * P + 1), ("2^131 - 6 (result 2^130 - 1)", (1 << 131) - 6), ("2^131 - 5 (result 2^130, limb 4 = 2^26)", (1 << 131) - 5),
               ("2^131 - 4", (1 << 131) - 4), ("2^131 - 1 (result 2^130 + 4, limb 4 = 2^26)", (1 << 131) - 1), ("2^131", 1 << 131)]
    for label, target in targets:
        for extra in (0, 1):
            acc = limbs(rng.getrandbits(100))
            m = {}
            for lane in range(4):
                a = limbs_value(acc) if lane == 0 else 0
                m0 = (1 << 126) + rng.getrandbits(100)
                m1 = (1 << 126) + rng.getrandbits(100)
                v1 = a + m0 + m1 + (1 << 129)
                m2 = (1 << 130) + (1 << 105) + rng.getrandbits(60) - (1 << 128) - v1
                assert 0 <= m2 < 1 << 128
                m[lane] = [m0, m1, m2]
            first = bytearray(192)
            for lane, k in enumerate(LANES):
                for g in range(3):
                    first[64 * g + 16 * k:64 * g + 16 * k + 16] = m[lane][g].to_bytes(16, "little")
            zero = bytes(first) + bytes(64)
            _, s0, _ = vector_model(acc, 1, zero)
            rest = target - s0
            assert 0 <= rest <= 4 * ((1 << 128) - 1), label
            last = [rest // 4 + (1 if i < rest % 4 else 0) for i in range(4)]
            msg = bytes(first) + b"".join(x.to_bytes(16, "little") for x in last)
            msg += rbytes(rng, 16) if extra else b""
            _, s, out = vector_model(acc, 1, msg[:256])
            assert s == target
            tail = ", then a 17th block in the scalar loop from the stored limbs" if extra else ""
            v.append(entry(f"r = 1, last-group lane sum S = {label}{', 17 blocks' if extra else ', 16 blocks'}",
                           f"three groups fold each lane once at 2^130 + 2^105 + t, the last group's blocks set S{tail}", acc, 1, msg))
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
    rng = random.Random(2929)  # the NEON entries: the AVX2 ones above stay as they were
    v += path_crossover_entries(rng, "neon", NEON_MIN)
    v += path_lazy_entries(rng, "neon", NEON_MIN // 16 + 4)
    v += path_r1_entries(rng, "neon", NEON_MIN // 16)
    write("poly1305", "vector-edges",
          "Poly1305 processBlocks aimed at 4-lane radix-2^26 vector code (the x86_64 AVX2 path): lengths at the 192-byte "
          "scalar/vector crossover and one block either side, lengths not a multiple of 64 and tails, calls handed between the "
          "paths; the largest limbs and product columns (acc limbs at their bounds, all-0xff blocks, r whose powers have the largest "
          "limbs); messages whose limbs after a lazy reduction sit furthest above 2^26; with r = 1, the last group's four-lane sum at "
          "2^131 - 2^104, 2p - 1 .. 2p + 1, 2^131 - 6 .. 2^131 - 1 and 2^131 (stored limb 4 = 2^26). The same kinds of entry for "
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

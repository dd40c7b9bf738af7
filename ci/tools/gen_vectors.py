#!/usr/bin/env python3
"""Generates the lab's generated vector sets, with every expected answer computed here,
independently of the lab's Rust reference:

  vectors/md5/jtreg.json          the JDK tests' MD5 cases; digests from Python hashlib
  vectors/md5/mb-semantics.json   implCompressMB (ofs, limit) table; checked against the reference
  vectors/poly1305/layout.json    every length 0..1024, a 1 MiB tag (Python big-int Poly1305),
                                  a message split over many calls
  vectors/poly1305/limb-edges.json  accumulators and r at the contract's edges
  vectors/md5/intermediate.json   MD5 states after given blocks (a from-RFC 1321 compression
                                  function here, checked against hashlib), expected ofs
  vectors/md5/chains.json         MD5 iterated 100 times on its own digest (hashlib)
  vectors/poly1305/intermediate.json  accumulators after given blocks (RFC 8439 §2.5.2 prints them)
  vectors/poly1305/chains.json    the MAC-of-MACs self-test of poly1305-donna (BoringSSL, OpenSSL,
                                  Linux carry it), recomputed here with Python integers
  vectors/poly1305/top-limb.json  accumulator sums and partially reduced results whose top limb
                                  (bits 104..) sits at and around 2^26 and 2^27, sums around p
                                  and 2p; expect_acc from Python integers (RFC 8439 §2.5.1)

Message patterns match lab/src/vectors.rs::generate: counter (i mod 256), repeat, and random =
SHA-256(seed u64 LE || counter u64 LE) blocks. Re-running rewrites the same files.
"""
import hashlib
import json
import pathlib
import random

ROOT = pathlib.Path(__file__).resolve().parents[2]
P = (1 << 130) - 5
CLAMP = 0x0FFFFFFC0FFFFFFC0FFFFFFC0FFFFFFF
JDK = "OpenJDK test/jdk"


def counter(n):
    return bytes(i & 0xFF for i in range(n))


def rand_bytes(seed, n):
    out = bytearray()
    c = 0
    while len(out) < n:
        out += hashlib.sha256(seed.to_bytes(8, "little") + c.to_bytes(8, "little")).digest()
        c += 1
    return bytes(out[:n])


def poly1305_tag(key, msg):
    """RFC 8439 §2.5.1, straight from the text, on Python integers."""
    r = int.from_bytes(key[:16], "little") & CLAMP
    s = int.from_bytes(key[16:], "little")
    acc = 0
    for i in range(0, len(msg), 16):
        block = msg[i:i + 16] + b"\x01"
        acc = (acc + int.from_bytes(block, "little")) * r % P
    return ((acc + s) % (1 << 128)).to_bytes(16, "little")


def write(kernel, name, description, vectors):
    doc = {"kernel": kernel, "set": name, "description": description, "vectors": vectors}
    path = ROOT / "vectors" / kernel / f"{name}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{path.relative_to(ROOT)}: {len(vectors)} entries")


def md5_jtreg():
    v = []
    src = "expected digest from Python hashlib"
    v.append({
        "name": "TestMD5MultiBlockIntrinsics: 1024 bytes of i & 0xff, one 16-block implCompressMB call",
        "source": f"{JDK}/compiler/intrinsics/sha/sanity (TestMD5MultiBlockIntrinsics) pattern; {src}",
        "msg": {"pattern": "counter", "len": 1024}, "offset": 0,
        "digest_hex": hashlib.md5(counter(1024)).hexdigest()})
    v.append({
        "name": "TestDigest: 1024 bytes of i & 0xff at source offset 1",
        "source": f"{JDK}/java/security/MessageDigest/TestDigest.java (offset 1); {src}",
        "msg": {"pattern": "counter", "len": 1024}, "offset": 1,
        "digest_hex": hashlib.md5(counter(1024)).hexdigest()})
    for n in range(0, 129):
        v.append({
            "name": f"Offsets: {n} bytes at every offset 0..64",
            "source": f"{JDK}/java/security/MessageDigest/Offsets.java (every length and offset); {src}",
            "msg": {"pattern": "counter", "len": n}, "offsets": {"from": 0, "to": 64},
            "digest_hex": hashlib.md5(counter(n)).hexdigest()})
    v.append({"name": "128 KiB of 'a'", "source": f"long message; {src}",
              "msg": {"pattern": "repeat", "byte_hex": "61", "len": 131072},
              "digest_hex": hashlib.md5(b"a" * 131072).hexdigest()})
    v.append({"name": "128 KiB of random bytes (seed 1)", "source": f"long message; {src}",
              "msg": {"pattern": "random", "seed": 1, "len": 131072},
              "digest_hex": hashlib.md5(rand_bytes(1, 131072)).hexdigest()})
    million = hashlib.md5(b"a" * 1000000).hexdigest()
    assert million == "7707d6ae4e027c70eea2a935c2296f21"
    v.append({"name": "one million 'a'", "source": "classic MD5 check value 7707d6ae4e027c70eea2a935c2296f21; Python hashlib agrees",
              "msg": {"pattern": "repeat", "byte_hex": "61", "len": 1000000}, "digest_hex": million})
    for i, pieces in enumerate([[1, 63, 64, 65, 127, 4096], [63, 1, 64, 64, 65, 127, 4096, 7],
                                [127, 129, 1, 1, 62, 4096, 200], [64, 64, 64, 3], [5, 5, 5, 5]]):
        n = sum(pieces)
        v.append({"name": f"DigestBase updates {pieces}",
                  "source": f"uneven engineUpdate pieces so implCompress and implCompressMB (ofs > 0) both run; {src}",
                  "msg": {"pattern": "random", "seed": 100 + i, "len": n}, "updates": pieces,
                  "digest_hex": hashlib.md5(rand_bytes(100 + i, n)).hexdigest()})
    write("md5", "jtreg", "The JDK tests' MD5 cases (TestMD5MultiBlockIntrinsics, TestDigest, Offsets), long messages, uneven updates", v)


def md5_mb():
    rng = random.Random(5)
    cases = [("one block (limit == ofs)", 0, 0), ("limit - ofs = 1", 0, 1), ("limit - ofs = 63", 0, 63),
             ("limit - ofs = 64 (two blocks)", 0, 64), ("limit - ofs = 65", 0, 65), ("limit - ofs = 127", 0, 127),
             ("limit - ofs = 128", 0, 128), ("limit - ofs = 129", 0, 129), ("ofs = 17, limit - ofs = 100", 17, 117),
             ("16 blocks, limit - ofs = 960", 0, 960), ("64 blocks, limit - ofs = 4042", 0, 4042),
             ("large ofs 0x7fff0000, 4 blocks", 0x7FFF0000, 0x7FFF0000 + 200),
             ("ofs near the top: ret = 0x7fffffc0", 0x7FFFFF00, 0x7FFFFF80), ("ofs = 1000000, limit - ofs = 191", 1000000, 1000191)]
    v = []
    for name, ofs, limit in cases:
        blocks = (limit - ofs) // 64 + 1
        state = bytes(rng.getrandbits(8) for _ in range(16))
        v.append({"name": f"implCompressMB {name}",
                  "source": "docs/DESIGN.md do-while ofs/limit contract (DigestBase: limit = ofs + len - 64); checked against the portable reference",
                  "stub": "md5_implCompressMB", "state_hex": state.hex(), "ofs": ofs, "limit": limit,
                  "msg": {"pattern": "random", "seed": 200 + len(v), "len": blocks * 64}})
    v.append({"name": "implCompress one block from a random state", "source": "RFC 1321 §3.4; checked against the portable reference",
              "stub": "md5_implCompress", "state_hex": bytes(rng.getrandbits(8) for _ in range(16)).hex(),
              "msg": {"pattern": "random", "seed": 300, "len": 64}})
    write("md5", "mb-semantics", "md5_implCompressMB (ofs, limit) semantics: whole and partial spans, many blocks, large ofs", v)


def limbs(x):
    return [(x >> (26 * i)) & ((1 << 26) - 1) for i in range(4)] + [x >> 104]


def poly_layout():
    rng = random.Random(8)
    v = []
    for n in range(0, 1025):
        acc = limbs(rng.getrandbits(130) % P)
        r = rng.getrandbits(128) & CLAMP
        # Every offset 0..15 for lengths up to 128 (each tail length at each alignment), then
        # offset = length mod 16: the full 1025 x 16 product would add ~10 s to every run.
        where = {"offsets": {"from": 0, "to": 15}} if n <= 128 else {"offset": n % 16}
        v.append({"name": f"length {n}", "source": "every length 0..1024, offsets 0..15 up to 128 bytes; checked against the portable reference",
                  "acc": acc, "r_hex": r.to_bytes(16, "little").hex(), **where,
                  "msg": {"pattern": "random", "seed": 1000 + n, "len": n}})
    key = rand_bytes(77, 32)
    mib = rand_bytes(78, 1 << 20)
    v.append({"name": "1 MiB message tag", "source": "RFC 8439 §2.5.1 tag computed with Python integers (ci/tools/gen_vectors.py)",
              "key_hex": key.hex(), "msg": {"pattern": "random", "seed": 78, "len": 1 << 20},
              "tag_hex": poly1305_tag(key, mib).hex()})
    for i in range(3):
        n = 16 * rng.randrange(64, 256) + rng.randrange(16)
        cuts = sorted(rng.sample(range(1, n // 16), min(40, n // 16 - 1)))
        bounds = [0] + [16 * c for c in cuts] + [n]
        lengths = [b - a for a, b in zip(bounds, bounds[1:])]
        v.append({"name": f"{n} bytes over {len(lengths)} chained calls", "source": "random 16-byte split points; accumulator passed between calls unchanged; checked against the portable reference",
                  "acc": [0, 0, 0, 0, 0], "r_hex": (rng.getrandbits(128) & CLAMP).to_bytes(16, "little").hex(),
                  "msg": {"pattern": "random", "seed": 2000 + i, "len": n}, "lengths": lengths})
    write("poly1305", "layout", "Poly1305 layout: every length 0..1024 at every offset, 1 MiB, many chained calls", v)


def poly_edges():
    m26, m27 = (1 << 26) - 1, (1 << 27) - 1
    accs = [("zero", [0] * 5), ("every limb at its maximum", [m26] * 4 + [m27]),
            ("p - 1", limbs(P - 1)), ("p", limbs(P)), ("p + 1", limbs(P + 1)), ("2^130 - 1", limbs((1 << 130) - 1)),
            ("2p + 3 = 2^131 - 7 (unreduced)", limbs(2 * P + 3))]
    rs = [("largest clamped r", CLAMP), ("r = 1", 1), ("r = 0", 0), ("r = 2^123 (highest bit the clamp keeps)", 1 << 123)]
    v = []
    for an, acc in accs:
        assert all(l < (1 << 26) for l in acc[:4]) and acc[4] < (1 << 27), an
        for rn, r in rs:
            for n in [0, 15, 16, 17, 31, 32, 33, 64, 1000]:
                v.append({"name": f"acc {an}, {rn}, {n} bytes of 0xff", "source": "contract edges (docs/DESIGN.md limb bounds); checked against the portable reference",
                          "acc": acc, "r_hex": r.to_bytes(16, "little").hex(), "msg": {"pattern": "repeat", "byte_hex": "ff", "len": n}})
    write("poly1305", "limb-edges", "Poly1305 processBlocks at the limb-contract edges: accumulators at the bounds and around p, extreme r, all-0xff blocks", v)


# MD5 compression function, straight from RFC 1321 §3.4, to pin intermediate states (hashlib
# gives only final digests); checked against hashlib in md5_intermediate().
MD5_IV = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476]
MD5_S = [[7, 12, 17, 22], [5, 9, 14, 20], [4, 11, 16, 23], [6, 10, 15, 21]]


def md5_compress(state, block):
    import math
    t = [int(abs(math.sin(i + 1)) * 2**32) & 0xFFFFFFFF for i in range(64)]
    x = [int.from_bytes(block[4 * i:4 * i + 4], "little") for i in range(16)]
    a, b, c, d = state
    for i in range(64):
        rnd = i // 16
        if rnd == 0:
            f, k = (b & c) | (~b & d), i
        elif rnd == 1:
            f, k = (b & d) | (c & ~d), (5 * i + 1) % 16
        elif rnd == 2:
            f, k = b ^ c ^ d, (3 * i + 5) % 16
        else:
            f, k = c ^ (b | (~d & 0xFFFFFFFF)), (7 * i) % 16
        v = (a + (f & 0xFFFFFFFF) + x[k] + t[i]) & 0xFFFFFFFF
        s = MD5_S[rnd][i % 4]
        a, d, c = d, c, b
        b = (b + ((v << s | v >> (32 - s)) & 0xFFFFFFFF)) & 0xFFFFFFFF
    return [(p + q) & 0xFFFFFFFF for p, q in zip(state, [a, b, c, d])]


def md5_pad(msg):
    n = len(msg)
    return msg + b"\x80" + b"\x00" * ((55 - n) % 64) + (8 * n).to_bytes(8, "little")


def state_hex(state):
    return b"".join(w.to_bytes(4, "little") for w in state).hex()


def md5_intermediate():
    for n in [0, 1, 55, 56, 63, 64, 65, 200]:
        padded, st = md5_pad(counter(n)), MD5_IV
        for i in range(0, len(padded), 64):
            st = md5_compress(st, padded[i:i + 64])
        assert state_hex(st) == hashlib.md5(counter(n)).hexdigest(), n
    rfc7 = b"1234567890" * 8
    padded = md5_pad(rfc7)
    after1 = md5_compress(MD5_IV, padded[:64])
    after2 = md5_compress(after1, padded[64:])
    assert state_hex(after2) == "57edf4a22be3c955ac49da2e2107b67a"  # RFC 1321 A.5, last line
    src = "RFC 1321 A.5 #7 message; state from a from-RFC compression function in ci/tools/gen_vectors.py (checked against hashlib)"
    v = [{"name": "RFC 1321 A.5 #7: state after the first block", "source": src,
          "stub": "md5_implCompress", "state_hex": state_hex(MD5_IV), "msg_hex": padded[:64].hex(),
          "expect_state_hex": state_hex(after1)},
         {"name": "RFC 1321 A.5 #7: the padding block from that state gives the published digest",
          "source": "RFC 1321 A.5 #7: MD5 = 57edf4a22be3c955ac49da2e2107b67a (the final state is the digest)",
          "stub": "md5_implCompress", "state_hex": state_hex(after1), "msg_hex": padded[64:].hex(),
          "expect_state_hex": "57edf4a22be3c955ac49da2e2107b67a"}]
    a128 = b"a" * 128
    st = md5_compress(md5_compress(MD5_IV, a128[:64]), a128[64:])
    v.append({"name": "implCompressMB over two blocks of 'a' from the IV: state and returned ofs",
              "source": "state from the compression function in ci/tools/gen_vectors.py; ofs + 2 x 64 per the do-while contract",
              "stub": "md5_implCompressMB", "state_hex": state_hex(MD5_IV), "ofs": 1000, "limit": 1064,
              "msg": {"pattern": "repeat", "byte_hex": "61", "len": 128},
              "expect_state_hex": state_hex(st), "expect_ofs": 1128})
    write("md5", "intermediate", "MD5 states after given blocks and returned ofs, checked against the file", v)


def md5_chains():
    x = b""
    for _ in range(100):
        x = hashlib.md5(x).digest()
    v = [{"name": "MD5 iterated 100 times from the empty message",
          "source": "x0 = empty, x(i+1) = MD5(x(i)) (NIST CAVP Monte Carlo style iteration); x100 from Python hashlib",
          "chain": "md5_iterate", "msg_hex": "", "steps": 100, "digest_hex": x.hex()}]
    x = b"abc"
    for _ in range(3):
        x = hashlib.md5(x).digest()
    v.append({"name": "MD5 iterated 3 times from \"abc\"", "source": "x3 from Python hashlib",
              "chain": "md5_iterate", "msg_hex": b"abc".hex(), "steps": 3, "digest_hex": x.hex()})
    pieces = [64] * 600 + [37]
    n = sum(pieces)
    v.append({"name": "601 updates (more calls than one batch segment holds)",
              "source": "600 one-block engineUpdate calls and a tail: the digest runs over two batches, the state carried; Python hashlib",
              "msg": {"pattern": "random", "seed": 400, "len": n}, "updates": pieces,
              "digest_hex": hashlib.md5(rand_bytes(400, n)).hexdigest()})
    write("md5", "chains", "Chained procedures: MD5 iterated on its own digest; a digest longer than one batch", v)


def poly_acc_hex(key, msg):
    r = int.from_bytes(key[:16], "little") & CLAMP
    acc = 0
    for i in range(0, len(msg) // 16 * 16, 16):
        acc = (acc + int.from_bytes(msg[i:i + 16] + b"\x01", "little")) * r % P
    return acc


def poly_intermediate():
    key = bytes.fromhex("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b")
    msg = b"Cryptographic Forum Research Group"
    r = int.from_bytes(key[:16], "little") & CLAMP
    published = ["2c88c77849d64ae9147ddeb88e69c83fc", "2d8adaf23b0337fa7cccfb4ea344b30de"]
    v = []
    for blocks, want in zip([1, 2], published):
        assert format(poly_acc_hex(key, msg[:16 * blocks]), "x") == want
        v.append({"name": f"RFC 8439 §2.5.2: Acc after block {blocks}",
                  "source": f"RFC 8439 §2.5.2 prints Acc = {want} after block #{blocks}; Python integers agree",
                  "acc": [0, 0, 0, 0, 0], "r_hex": r.to_bytes(16, "little").hex(), "msg_hex": msg[:16 * blocks].hex(),
                  "lengths": [16] * blocks, "expect_acc": want})
    rng = random.Random(13)
    lengths = [16] * 600
    n = 16 * 600
    data = rand_bytes(500, n)
    rr = rng.getrandbits(128) & CLAMP
    acc = 0
    for i in range(0, n, 16):
        acc = (acc + int.from_bytes(data[i:i + 16] + b"\x01", "little")) * rr % P
    v.append({"name": "600 one-block calls (more calls than one batch segment holds)",
              "source": "the chain runs over two batches, the accumulator carried; expect_acc from Python integers",
              "acc": [0, 0, 0, 0, 0], "r_hex": rr.to_bytes(16, "little").hex(), "msg": {"pattern": "random", "seed": 500, "len": n},
              "lengths": lengths, "expect_acc": format(acc, "x")})
    write("poly1305", "intermediate", "Poly1305 accumulators after given blocks, checked against the file", v)


def poly_chains():
    total_key = bytes([1, 2, 3, 4, 5, 6, 7, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9] + [0xff] * 14 + [0] * 4)
    tags = b"".join(poly1305_tag(bytes([i]) * 32, bytes([i]) * i) for i in range(256))
    total = poly1305_tag(total_key, tags).hex()
    assert total == "64afe2e8d6ad7bbdd287f97c44623d39", total  # poly1305-donna total_mac
    v = [{"name": "MAC of MACs: tag of the tags of keys and messages of bytes i, i = 0..255",
          "source": "poly1305-donna poly1305_power_on_self_test (total_key, total_mac = 64afe2e8d6ad7bbdd287f97c44623d39), as in BoringSSL/OpenSSL/Linux self-tests; recomputed with Python integers",
          "chain": "poly1305_mac_of_macs", "count": 256, "key_hex": total_key.hex(), "tag_hex": total}]
    tags = b"".join(poly1305_tag(bytes([i]) * 32, bytes([i]) * i) for i in range(20))
    v.append({"name": "MAC of MACs over i = 0..19", "source": "the same procedure, 20 inner tags; Python integers",
              "chain": "poly1305_mac_of_macs", "count": 20, "key_hex": total_key.hex(),
              "tag_hex": poly1305_tag(total_key, tags).hex()})
    write("poly1305", "chains", "Chained procedures: the MAC-of-MACs self-test", v)


# --- top-limb edges (vectors/poly1305/top-limb.json) ---------------------------------------
#
# The bundled kernels (kernels/*/poly1305.S) all compute the same integers: h in radix 2^64,
# per block h += m + 2^128, then the column product
#   D = h0 r0 + h1 s1 + (h0 r1 + h1 r0 + h2 s1) 2^64 + h2 r0 2^128    (s1 = r1 + r1/4)
# and the partial reduction h = (D mod 2^130) + 5 (D >> 130), which is what they convert to
# limbs (limb 4 = h >> 104). kernel_model() follows that only to CHOOSE inputs (which D and
# which result a block leads to); every expected value is RFC 8439 on Python integers
# (poly_exact), and the lab checks every call against its own reference as well.

M64 = (1 << 64) - 1


def limbs_value(l):
    return sum(v << (26 * i) for i, v in enumerate(l))


def kernel_columns(r):
    """The coefficients of h0, h1, h2 in D for a clamped r."""
    r0, r1 = r & M64, r >> 64
    s1 = r1 + (r1 >> 2)
    return r0 + (r1 << 64), s1 + (r0 << 64), (s1 << 64) + (r0 << 128)


def kernel_model(acc, r, msg, lengths):
    """Per call: (D of its last block, the partially reduced result the call stores)."""
    a0, a1, a2 = kernel_columns(r)
    h, pos, out = limbs_value(acc), 0, []
    for n in lengths:
        d = None
        for i in range(pos, pos + n // 16 * 16, 16):
            h += int.from_bytes(msg[i:i + 16], "little") + (1 << 128)
            h0, h1, h2 = h & M64, (h >> 64) & M64, h >> 128
            assert h2 <= 10  # the kernels' bound before a multiply
            d = h0 * a0 + h1 * a1 + h2 * a2
            assert d >> 128 <= M64  # d2 fits a 64-bit word
            h = (d & ((1 << 130) - 1)) + 5 * (d >> 130)
        out.append((d, h))
        pos += n
        h = limbs_value(limbs(h))
    return out


def poly_exact(acc, r, msg):
    a = limbs_value(acc) % P
    for i in range(0, len(msg) // 16 * 16, 16):
        a = (a + int.from_bytes(msg[i:i + 16] + b"\x01", "little")) * r % P
    return a


def lagrange(b1, b2):
    """Lagrange-Gauss reduction of a 2-dimensional lattice basis."""
    def dot(u, v):
        return u[0] * v[0] + u[1] * v[1]
    if dot(b1, b1) < dot(b2, b2):
        b1, b2 = b2, b1
    while True:
        n = dot(b2, b2)
        mu = (2 * dot(b1, b2) + n) // (2 * n)  # round(dot / n)
        b1 = (b1[0] - mu * b2[0], b1[1] - mu * b2[1])
        if dot(b1, b1) >= n:
            return b2, b1
        b1, b2 = b2, b1


def block_sums_for(r, h2, target):
    """Sums h = h0 + h1 2^64 + h2 2^128 (h0, h1 < 2^64) whose D is = target mod p: the lattice
    points {h0 + c h1 = t mod p} nearest the middle of the box (Babai rounding on a reduced basis)."""
    a0, a1, a2 = kernel_columns(r)
    inv = pow(a0, -1, P)
    c, t = a1 * inv % P, (target - h2 * a2) * inv % P
    b1, b2 = lagrange((P, 0), ((-c) % P, 1))
    gx, gy = (1 << 63) - t, 1 << 63
    det = b1[0] * b2[1] - b1[1] * b2[0]
    u0 = (2 * (gx * b2[1] - gy * b2[0]) + det) // (2 * det)
    v0 = (2 * (b1[0] * gy - b1[1] * gx) + det) // (2 * det)
    out = []
    for du in range(-2, 3):
        for dv in range(-2, 3):
            u, v = u0 + du, v0 + dv
            x, y = t + u * b1[0] + v * b2[0], u * b1[1] + v * b2[1]
            if 0 <= x <= M64 and 0 <= y <= M64:
                assert (x * a0 + y * a1 + h2 * a2 - target) % P == 0
                out.append(x | y << 64 | h2 << 128)
    return sorted(out)


def rel(x, base_name, base):
    d = x - base
    return base_name if d == 0 else f"{base_name} {'+' if d > 0 else '-'} {abs(d)}"


def describe(x):
    """A value near 2^130, 2^131 or p in words, with its top limb."""
    for name, base in [("2^131", 1 << 131), ("2p", 2 * P), ("2^130", 1 << 130), ("p", P)]:
        if abs(x - base) <= 16:
            return f"{rel(x, name, base)} (bits 104.. = {x >> 104:#x})"
    return f"{x:#x} (bits 104.. = {x >> 104:#x})"


def top_entry(name, what, acc, r, msg, lengths=None, note=""):
    assert r & ~CLAMP == 0 and all(x < (1 << 26) for x in acc[:4]) and acc[4] < (1 << 27)
    lengths = lengths or [len(msg)]
    calls = kernel_model(acc, r, msg, lengths)
    want = poly_exact(acc, r, msg)
    assert calls[-1][1] % P == want
    steps = "; ".join(
        f"call {i + 1}: D {describe(d)}, result {describe(h)}" if len(calls) > 1 else f"D {describe(d)}, result {describe(h)}"
        for i, (d, h) in enumerate(calls))
    e = {"name": name, "source": "top-limb edges, chosen with the bundled kernels' radix-2^64 arithmetic (ci/tools/gen_vectors.py); expect_acc from Python integers (RFC 8439 §2.5.1)",
         "comment": f"{what}. Bundled kernels: the last block's product before the final partial reduction, {steps}{note}",
         "acc": acc, "r_hex": r.to_bytes(16, "little").hex(), "msg_hex": msg.hex()}
    if len(lengths) > 1:
        e["lengths"] = lengths
    e["expect_acc"] = format(want, "x")
    return e, calls


def split_sum(rng, h):
    """acc (in bounds, < 2^131) and a block m with acc + m + 2^128 = h."""
    lo, hi = max(0, h - (1 << 128) - ((1 << 131) - 1)), min((1 << 128) - 1, h - (1 << 128))
    assert lo <= hi, hex(h)
    m = rng.choice([lo, hi, rng.randint(lo, hi)])
    return limbs(h - (1 << 128) - m), m.to_bytes(16, "little")


def poly_top_limb():
    rng = random.Random(25)
    v = []
    # r = 1: D is the sum acc + m + 2^128 itself, so its top limb is the one "before the final
    # partial reduction" in any limb form (26-bit limbs after their carry chain, or radix 2^64).
    sums = [
        ("p - 1 = 2^130 - 6", P - 1), ("p = 2^130 - 5", P), ("p + 1 = 2^130 - 4", P + 1),
        ("2^130 - 1 (limb 4 = 2^26 - 1, every limb full)", (1 << 130) - 1),
        ("2^130 (limb 4 = 2^26)", 1 << 130), ("2^130 + 1", (1 << 130) + 1),
        ("2^130 + 2^104 - 1 (limb 4 = 2^26, limbs 0-3 full)", (1 << 130) + (1 << 104) - 1),
        ("2^130 + 2^104 (limb 4 = 2^26 + 1)", (1 << 130) + (1 << 104)),
        ("2p - 1 = 2^131 - 11", 2 * P - 1), ("2p = 2^131 - 10", 2 * P), ("2p + 1 = 2^131 - 9", 2 * P + 1),
        ("2^131 - 6 (result 2^130 - 1)", (1 << 131) - 6), ("2^131 - 5 (result 2^130)", (1 << 131) - 5),
        ("2^131 - 4 (result 2^130 + 1)", (1 << 131) - 4), ("2^131 - 1 (result 2^130 + 4)", (1 << 131) - 1),
        ("2^131 - 2^104 (limb 4 = 2^27 - 1, the contract's largest)", (1 << 131) - (1 << 104)),
        ("2^131 (limb 4 = 2^27, above the contract's output bound)", 1 << 131),
        ("2^131 + 2^129 - 2 (the largest: every acc limb at its bound, m all 0xff)", (1 << 131) + (1 << 129) - 2),
    ]
    for label, s in sums:
        if s == (1 << 131) + (1 << 129) - 2:
            acc, m = [(1 << 26) - 1] * 4 + [(1 << 27) - 1], b"\xff" * 16
        else:
            acc, m = split_sum(rng, s)
        assert limbs_value(acc) + int.from_bytes(m, "little") + (1 << 128) == s
        e, _ = top_entry(f"r = 1, acc + m + 2^128 = {label}", f"sum acc + m + 2^128 = {describe(s)}; with r = 1 this is the value before the final partial reduction", acc, 1, m)
        v.append(e)
    # Other r: one block whose product the partial reduction leaves exactly at the target, so a
    # kernel that masks limb 4 (or loses the carry into it) is off by 2^130 = 5 (mod p).
    targets = [("p - 1", P - 1), ("p", P), ("p + 1", P + 1), ("2^130 - 1", (1 << 130) - 1),
               ("2^130", 1 << 130), ("2^130 + 1", (1 << 130) + 1), ("2^130 + 4", (1 << 130) + 4)]
    rs = [("r = 2^28 - 1 (largest below 2^64: D = h r exactly)", (1 << 28) - 1),
          ("largest clamped r", CLAMP), ("r = 2^123 + 1", (1 << 123) + 1),
          ("random clamped r", rng.getrandbits(128) & CLAMP)]
    for rn, r in rs:
        for tn, t in targets:
            hit = None
            for h2 in range(1, 10):
                for h in block_sums_for(r, h2, t):
                    acc, m = split_sum(rng, h)
                    if kernel_model(acc, r, m, [16])[0][1] == t:
                        hit = (acc, m)
                        break
                if hit:
                    break
            assert hit, (rn, tn)
            e, _ = top_entry(f"{rn}, one block, result {tn}", f"one block whose partially reduced result is {describe(t)}", hit[0], r, hit[1])
            v.append(e)
    # The same results after a random first block, in one call: the top limb is made inside the loop.
    for rn, r in rs[1:3]:
        for tn, t in [("2^130", 1 << 130), ("2^130 + 4", (1 << 130) + 4)]:
            for _ in range(1000):
                acc, m1 = limbs(rng.getrandbits(130)), rng.getrandbits(128).to_bytes(16, "little")
                h1 = kernel_model(acc, r, m1, [16])[0][1]
                fits = [h for h2 in range(1, 10) for h in block_sums_for(r, h2, t) if 0 <= h - h1 - (1 << 128) < (1 << 128)]
                if fits:
                    m2 = (fits[0] - h1 - (1 << 128)).to_bytes(16, "little")
                    break
            else:
                raise AssertionError("no second block")
            e, calls = top_entry(f"{rn}, two blocks in one call, result {tn}", f"a random first block, then a block whose partially reduced result is {describe(t)}", acc, r, m1 + m2)
            assert calls[-1][1] == t
            v.append(e)
    # A result with limb 4 = 2^26 handed to the next call: the kernel must take its own output.
    r = CLAMP
    h = next(h for h2 in range(1, 10) for h in block_sums_for(r, h2, 1 << 130))
    acc, m = split_sum(rng, h)
    msg = m + rng.getrandbits(128).to_bytes(16, "little")
    e, calls = top_entry("largest clamped r, two calls, the first leaving 2^130 (limb 4 = 2^26)", "call 1 leaves the result 2^130, limbs [0, 0, 0, 0, 2^26]; call 2 starts from the limbs call 1 stored", acc, r, msg, [16, 16])
    assert calls[0][1] == 1 << 130
    v.append(e)
    acc, m = split_sum(rng, (1 << 131) - 1)
    e, calls = top_entry("r = 1, two calls, the first leaving 2^130 + 4", "call 1: sum 2^131 - 1, result 2^130 + 4 (limbs [4, 0, 0, 0, 2^26]); call 2 starts from it", acc, 1, m + b"\xff" * 16, [16, 16])
    assert calls[0][1] == (1 << 130) + 4
    v.append(e)
    write("poly1305", "top-limb",
          "Poly1305 processBlocks with the accumulator's top limb (limb 4, bits 104..) at and around its bounds: "
          "sums acc + m + 2^128 (r = 1) at p - 1, p, p + 1, 2^130 - 1, 2^130, 2^130 + 1, 2^130 + 2^104 (limb 4 = 2^26 + 1), 2p - 1, 2p, 2p + 1, "
          "2^131 - 6 .. 2^131 - 1, 2^131 - 2^104 (limb 4 = 2^27 - 1), 2^131 and the largest sum; and, for r = 2^28 - 1, the largest clamped r, "
          "2^123 + 1 and a random r, blocks whose partially reduced result (what the bundled kernels store) is p - 1, p, p + 1, 2^130 - 1, "
          "2^130 (limb 4 = 2^26), 2^130 + 1, 2^130 + 4, alone, after a first block, and handed to a second call. Targets a kernel that "
          "masks limb 4 to 26 bits or drops a carry into it after the partial reduction (off by 2^130 = 5 mod p); each entry's comment "
          "says what the bundled kernels' arithmetic makes of it", v)


if __name__ == "__main__":
    assert poly1305_tag(bytes.fromhex("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b"),
                        b"Cryptographic Forum Research Group").hex() == "a8061dc1305136c6c22b8baf0c0127a9"
    md5_jtreg()
    md5_mb()
    poly_layout()
    poly_edges()
    md5_intermediate()
    md5_chains()
    poly_intermediate()
    poly_chains()
    poly_top_limb()

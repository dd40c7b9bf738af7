#!/usr/bin/env python3
"""Generates the lab's generated vector sets, with every expected answer computed here,
independently of the lab's Rust reference:

  vectors/md5/jtreg.json          the JDK tests' MD5 cases; digests from Python hashlib
  vectors/md5/mb-semantics.json   implCompressMB (ofs, limit) table; checked against the reference
  vectors/poly1305/layout.json    every length 0..1024, a 1 MiB tag (Python big-int Poly1305),
                                  a message split over many calls
  vectors/poly1305/limb-edges.json  accumulators and r at the contract's edges

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


if __name__ == "__main__":
    assert poly1305_tag(bytes.fromhex("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b"),
                        b"Cryptographic Forum Research Group").hex() == "a8061dc1305136c6c22b8baf0c0127a9"
    md5_jtreg()
    md5_mb()
    poly_layout()
    poly_edges()

#!/usr/bin/env python3
"""Imports ../shared/vectors/{md5,poly1305}.json into vectors/<kernel>/<set>.json.

Each published vector keeps its `source` field verbatim; the file adds the lab's header
(kernel, set, description). Sets are grouped by origin so reports count RFC, BoringSSL,
OpenSSL and Linux vectors apart. Re-running overwrites the files with the same content.
"""
import json
import re
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "vectors"

SETS = {
    "md5": [
        ("rfc1321", "RFC 1321", "RFC 1321 Appendix A.5 test suite"),
        ("linux-testmgr", "Linux kernel", "Linux crypto/testmgr.h md5_tv_template"),
        ("openssl-misaligned", "MD5 misaligned input", "OpenSSL evpmd_md.txt, MD5 misaligned-input section"),
        ("openssl", "OpenSSL", "OpenSSL evpmd_md.txt MD5 vectors"),
    ],
    "poly1305": [
        ("rfc8439", "RFC 8439", "RFC 8439 §2.5.2 and Appendix A.3 #1-#11"),
        ("boringssl", "BoringSSL", "BoringSSL crypto/poly1305/poly1305_tests.txt"),
        ("openssl", "OpenSSL", "OpenSSL evpmac_poly1305.txt"),
        ("linux-testmgr", "Linux kernel", "Linux crypto/testmgr.h poly1305_tv_template"),
    ],
}


LEN_IN_NAME = re.compile(r"\(len=(\d+)\)")


def checked(entry: dict) -> dict:
    """The entry as published, except a `(len=N)` in its name that disagrees with the message:
    the name is corrected and a `comment` says so (the digest is for the message as given)."""
    m = LEN_IN_NAME.search(entry["name"])
    n = len(entry.get("msg_hex", "")) // 2
    if not m or int(m.group(1)) == n:
        return entry
    fixed = dict(entry)
    fixed["name"] = LEN_IN_NAME.sub(f"(len={n})", entry["name"]).replace(f"{int(m.group(1)) - int(m.group(1)) % 8}-byte blob", "blob")
    fixed["comment"] = f"name corrected on import: the shared file said len={m.group(1)}, the message has {n} bytes"
    return fixed


def main() -> None:
    for kernel, sets in SETS.items():
        entries = json.loads((SHARED / f"{kernel}.json").read_text())
        taken = set()
        for set_name, marker, description in sets:
            picked = [i for i, e in enumerate(entries) if i not in taken and marker in e["source"]]
            taken.update(picked)
            chosen = [checked(entries[i]) for i in picked]
            doc = {"kernel": kernel, "set": set_name, "description": description, "vectors": chosen}
            out = ROOT / "vectors" / kernel / f"{set_name}.json"
            out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
            print(f"{out.relative_to(ROOT)}: {len(chosen)} vectors")
        if len(taken) != len(entries):
            sys.exit(f"{kernel}: {len(entries) - len(taken)} vectors matched no set")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the seed corpora of the primitives fuzz targets from TestVectors/primitives.

FuzzSecretStream: hostile-mode inputs (0x00, header, then length-prefixed chunks) from the secretstream vectors
whose chunks fit a one-byte length, and round-trip-mode inputs (0x01, then control-prefixed messages).
FuzzBLAKE2b: (output size, key length, split) prefixes with the key and message of BLAKE2b vectors.
FuzzSealedBoxes: the combined forms of the box and secretbox vectors, and sealed boxes, behind each kind byte.

Deterministic; files are named by the SHA-1 of their content. Run from the project root:
  python3 Fuzz/make-primitives-corpus.py
"""
import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
spec = importlib.util.spec_from_file_location("make_corpus", os.path.join(HERE, "make-corpus.py"))
make_corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_corpus)


def vectors(name):
    with open(os.path.join(ROOT, "TestVectors", "primitives", name), encoding="utf-8") as f:
        return json.load(f)["tests"]


def secretstream():
    items = []
    for t in vectors("secretstream.json"):
        chunks = [bytes.fromhex(c) for c in t["chunks"]]
        if all(len(c) < 256 for c in chunks):
            out = b"\x00" + bytes.fromhex(t["header"])
            for c in chunks:
                out += bytes([len(c)]) + c
            items.append(out)
        messages = [bytes.fromhex(m)[:63] for m in t["msgs"]]
        tags = {"message": 0, "push": 1, "rekey": 2, "final": 0}
        out = b"\x01"
        for m, tag in zip(messages, t["tags"]):
            out += bytes([(len(m) << 2) | tags[tag]]) + m
        items.append(out)
    return items


def blake2b():
    items = []
    for t in vectors("blake2b.json")[::7]:
        key = bytes.fromhex(t["key"])
        out_byte = (t["outLen"] - 16) % 49 if 16 <= t["outLen"] <= 64 else 0x80 | t["outLen"]
        key_byte = 0 if not key else ((len(key) - 16) % 49 if 16 <= len(key) <= 64 else 0x80 | len(key))
        items.append(bytes([out_byte, key_byte, 3]) + key + bytes.fromhex(t["msg"])[:512])
    return items


def sealed_boxes():
    items = []
    for t in vectors("secretbox.json")[:12]:
        items.append(b"\x00" + bytes.fromhex(t["nonce"]) + bytes.fromhex(t["ct"])[:600])
        items.append(b"\x03" + bytes.fromhex(t["msg"])[:200])
    for t in vectors("box.json")[:10]:
        items.append(b"\x01" + bytes.fromhex(t["nonce"]) + bytes.fromhex(t["ct"])[:600])
    for t in vectors("sealedbox.json"):
        items.append(b"\x02" + bytes.fromhex(t["sealed"])[:600])
    return items


if __name__ == "__main__":
    for target, items in [("FuzzSecretStream", secretstream()), ("FuzzBLAKE2b", blake2b()), ("FuzzSealedBoxes", sealed_boxes())]:
        print(target, make_corpus.write(target, items))

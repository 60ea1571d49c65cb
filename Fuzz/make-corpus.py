#!/usr/bin/env python3
"""Writes the small committed seed corpora Fuzz/Corpus/<Target>/ from the project's TestVectors.

FuzzCanonicalJSON: every 8th document input and expected text of TestVectors/canonical-json/documents.json (the
lone-surrogate inputs included), plus a few numbers from numbers.json as JSON texts.
FuzzBase64URL: base64url (unpadded and padded, URL-safe and standard alphabets) of byte strings taken from the
same vectors (the UTF-8 of document inputs, cut to several lengths), plus the base64url fields of any
TestVectors/primitives vector file that is present.

Deterministic; files are named by the SHA-1 of their content, as libFuzzer names corpus files.
Run from the project root:  python3 Fuzz/make-corpus.py
"""
import base64
import glob
import hashlib
import json
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "Fuzz", "Corpus")


def write(target, items):
    folder = os.path.join(CORPUS, target)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    seen = set()
    for data in items:
        name = hashlib.sha1(data).hexdigest()
        if name in seen:
            continue
        seen.add(name)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return len(seen)


def main():
    with open(os.path.join(ROOT, "TestVectors", "canonical-json", "documents.json"), encoding="utf-8") as f:
        docs = json.load(f)["tests"]
    json_items = []
    for t in docs[::8]:
        json_items.append(t["input"].encode("utf-8", "surrogatepass"))
        if "expected" in t:
            json_items.append(t["expected"].encode("utf-8"))
    for t in docs:
        if t["result"] == "invalid":
            json_items.append(t["input"].encode("utf-8", "surrogatepass"))
    with open(os.path.join(ROOT, "TestVectors", "canonical-json", "numbers.json"), encoding="utf-8") as f:
        groups = json.load(f)["tests"]
    for g in groups:
        json_items.append(("[" + ",".join(s for _, s in g["numbers"][:40:4]) + "]").encode())
    n_json = write("FuzzCanonicalJSON", json_items)

    raw = []
    for t in docs[::80]:
        data = t["input"].encode("utf-8", "surrogatepass")
        for n in (0, 1, 2, 3, 5, 32, 64):
            raw.append(data[:n])
    b64_items = []
    for data in raw:
        b64_items.append(base64.urlsafe_b64encode(data).rstrip(b"="))
        b64_items.append(base64.urlsafe_b64encode(data))
        b64_items.append(base64.standard_b64encode(data))
    for path in sorted(glob.glob(os.path.join(ROOT, "TestVectors", "primitives", "*.json")))[:10]:
        with open(path, encoding="utf-8") as f:
            try:
                tests = json.load(f).get("tests", [])
            except ValueError:
                continue
        for t in tests[:20]:
            for v in t.values():
                if isinstance(v, str) and 4 <= len(v) <= 200 and all(c.isalnum() or c in "-_=" for c in v):
                    b64_items.append(v.encode())
    n_b64 = write("FuzzBase64URL", b64_items)
    print(f"FuzzCanonicalJSON: {n_json} files; FuzzBase64URL: {n_b64} files")


if __name__ == "__main__":
    main()

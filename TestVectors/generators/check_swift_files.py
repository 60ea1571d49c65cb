#!/usr/bin/env python3
"""Decrypts files that E3DBKit (Swift) encrypted with Tozny's Python SDK (e3db==2.3.0) and checks them.

Input: a JSON manifest (path given as the only argument) of the form
  {"files": [{"name", "encryptedPath", "accessKey" (base64url), "plaintextBlake2b512" (hex),
              "plaintextSize", "checksum" (E3DBKit's MD5, padded base64), "ciphertextBlake2b512" (hex)}]}

For each file: the SDK's `SodiumCrypto.decrypt_file` must decrypt it; the plaintext's BLAKE2b-512 and size must
match; hashlib's MD5 (padded base64) and BLAKE2b-512 of the encrypted file must equal what E3DBKit reported; and the
encrypted size must be 124 + L + 17 * max(1, ceil(L / 65536)).

Prints one line per file and a closing `N passed, N failed` line; exits 1 if any file failed.
No network is used.

Usage (from the project root): `$(scripts/python-env.sh) TestVectors/generators/check_swift_files.py MANIFEST`
"""

import base64
import hashlib
import json
import os
import sys
import tempfile

from e3db.sodium_crypto import SodiumCrypto


def b64u_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def check(entry, workdir):
    path = entry["encryptedPath"]
    with open(path, "rb") as f:
        ciphertext = f.read()
    size = entry["plaintextSize"]
    expected_size = 124 + size + 17 * max(1, -(-size // 65536))
    if len(ciphertext) != expected_size:
        return f"encrypted size {len(ciphertext)}, expected {expected_size}"
    md5 = base64.b64encode(hashlib.md5(ciphertext).digest()).decode()
    if md5 != entry["checksum"]:
        return f"MD5 checksum {md5}, E3DBKit reported {entry['checksum']}"
    b2 = hashlib.blake2b(ciphertext).hexdigest()
    if b2 != entry["ciphertextBlake2b512"]:
        return f"BLAKE2b-512 {b2}, E3DBKit reported {entry['ciphertextBlake2b512']}"
    out = os.path.join(workdir, "plain.bin")
    try:
        SodiumCrypto.decrypt_file(path, out, b64u_decode(entry["accessKey"]))
    except Exception as error:  # the SDK raises plain exceptions
        return f"SDK decrypt_file failed: {type(error).__name__}: {error}"
    with open(out, "rb") as f:
        plaintext = f.read()
    os.remove(out)
    if len(plaintext) != size:
        return f"plaintext size {len(plaintext)}, expected {size}"
    if hashlib.blake2b(plaintext).hexdigest() != entry["plaintextBlake2b512"]:
        return "plaintext BLAKE2b-512 differs"
    return None


def main():
    if len(sys.argv) != 2:
        print("usage: check_swift_files.py MANIFEST", file=sys.stderr)
        return 64
    with open(sys.argv[1]) as f:
        manifest = json.load(f)
    passed = failed = 0
    workdir = tempfile.mkdtemp(prefix="e3dbkit-check-")
    for entry in manifest["files"]:
        problem = check(entry, workdir)
        if problem is None:
            passed += 1
            print(f"ok   {entry['name']}")
        else:
            failed += 1
            print(f"FAIL {entry['name']}: {problem}")
    os.rmdir(workdir)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

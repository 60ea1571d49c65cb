#!/usr/bin/env python3
"""Generates TestVectors/files/e3db_file_v3.json: E3DB file format v3 vectors made by Tozny's Python SDK.

Peer: PyPI e3db==2.3.0, `e3db.sodium_crypto.SodiumCrypto.encrypt_file` (libsodium through PyNaCl). No network.

Determinism. The SDK draws three random values per file: the data key (`crypto_secretstream_xchacha20poly1305_keygen`),
the edk nonce (`SodiumCrypto.random_nonce`) and the secretstream header (inside libsodium's `init_push`). The
generator replaces the first two with values derived from the case id, and replaces `init_push` by libsodium's own
`init_pull` on a derived header: libsodium's `init_push` is `randombytes_buf(header)` followed by exactly the state
set-up that `init_pull(header)` performs, so the state, and every byte the SDK then pushes, is what the SDK would
have written had its random generator produced those bytes. Everything else (header text, chunking, tags, MD5) is the
SDK's own code. Regenerating gives identical output.

Plaintext of N bytes for a 32-byte seed S: BLAKE2b-512(S || uint64_le(0)) || BLAKE2b-512(S || uint64_le(1)) || ...
truncated to N bytes (unkeyed BLAKE2b, 64-byte digests). Cases list the seed, not the plaintext, plus the
plaintext's BLAKE2b-512 so a reader can check its expansion.

Ciphertexts up to MAX_INLINE bytes are committed in hex. Larger cases record only the ciphertext's size, BLAKE2b-512
(what `b2sum` prints) and MD5; a reader regenerates them by encrypting the plaintext with the recorded data key,
edk nonce and stream header, and compares the hashes.

Also emitted: the spec's Appendix A.6 known answers (a 153-byte file, and a 131,251-byte three-chunk file whose
SHA-256 the spec gives), checked here against the spec's values, and `invalid` cases that describe a mutation of a
valid case (truncate, append, swap, duplicate, flip, replace access key or version) with the error code E3DBKit must
report.

Usage (from the project root): `$(scripts/python-env.sh) TestVectors/generators/e3db_files.py`
"""

import base64
import hashlib
import json
import os
import struct
import sys
import tempfile

import nacl.bindings
from e3db.sodium_crypto import SodiumCrypto

CHUNK = 65536
ABYTES = 17
HEADER_TEXT = 100
STREAM_HEADER = 24
PREFIX = HEADER_TEXT + STREAM_HEADER
MAX_INLINE = 140_000

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "TestVectors", "files", "e3db_file_v3.json")


def derive(tc_id, label, n):
    return hashlib.blake2b(f"e3dbkit-files-vectors|{tc_id}|{label}".encode(), digest_size=n).digest()


def expand(seed, n):
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.blake2b(seed + struct.pack("<Q", i), digest_size=64).digest()
        i += 1
    return bytes(out[:n])


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class FixedRandomness:
    """Feeds the SDK fixed values for its three random draws (see the module docstring)."""

    def __init__(self):
        self.real_keygen = nacl.bindings.crypto_secretstream_xchacha20poly1305_keygen
        self.real_init_push = nacl.bindings.crypto_secretstream_xchacha20poly1305_init_push
        self.real_random_nonce = SodiumCrypto.__dict__["random_nonce"]

    def install(self, dk, edk_nonce, stream_header):
        def keygen():
            return dk

        def random_nonce(cls):
            return edk_nonce

        def init_push(state, key):
            nacl.bindings.crypto_secretstream_xchacha20poly1305_init_pull(state, stream_header, key)
            return stream_header

        nacl.bindings.crypto_secretstream_xchacha20poly1305_keygen = keygen
        nacl.bindings.crypto_secretstream_xchacha20poly1305_init_push = init_push
        SodiumCrypto.random_nonce = classmethod(random_nonce)

    def uninstall(self):
        nacl.bindings.crypto_secretstream_xchacha20poly1305_keygen = self.real_keygen
        nacl.bindings.crypto_secretstream_xchacha20poly1305_init_push = self.real_init_push
        SodiumCrypto.random_nonce = self.real_random_nonce


def sdk_encrypt(plaintext, ak, dk, edk_nonce, stream_header, workdir):
    fixed = FixedRandomness()
    path = os.path.join(workdir, "plain.bin")
    with open(path, "wb") as f:
        f.write(plaintext)
    fixed.install(dk, edk_nonce, stream_header)
    try:
        enc_name, checksum, length = SodiumCrypto.encrypt_file(path, ak)
    finally:
        fixed.uninstall()
    with open(enc_name, "rb") as f:
        ciphertext = f.read()
    # Round trip through the SDK's own decryptor.
    dec_path = os.path.join(workdir, "dec.bin")
    SodiumCrypto.decrypt_file(enc_name, dec_path, ak)
    with open(dec_path, "rb") as f:
        assert f.read() == plaintext, "SDK round trip failed"
    os.remove(enc_name)
    os.remove(dec_path)
    checksum = checksum.decode() if isinstance(checksum, bytes) else checksum
    assert length == len(ciphertext)
    assert checksum == base64.b64encode(hashlib.md5(ciphertext).digest()).decode()
    return ciphertext, checksum


B64U = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def header_flip_error(ct, offset, bit):
    """What a flipped bit inside the base64url text of the header must give: a character outside the alphabet is a
    malformed header; any other changes the decoded edk or nonce, so the data key no longer opens."""
    return "wrongAccessKey" if (ct[offset] ^ (1 << bit)) in B64U else "malformedFileHeader"


def ct_hex_tail(ct, n):
    return ct[-n:].hex()


def chunk_count(n):
    return max(1, -(-n // CHUNK))


def valid_case(tc_id, comment, flags, plaintext, seed, ak, dk, edk_nonce, stream_header, workdir, inline=None):
    ciphertext, checksum = sdk_encrypt(plaintext, ak, dk, edk_nonce, stream_header, workdir)
    assert len(ciphertext) == PREFIX + len(plaintext) + ABYTES * chunk_count(len(plaintext))
    case = {
        "tcId": tc_id,
        "comment": comment,
        "result": "valid",
        "flags": flags,
        "accessKey": b64u(ak),
        "dataKey": dk.hex(),
        "edkNonce": edk_nonce.hex(),
        "streamHeader": stream_header.hex(),
        "plaintextSize": len(plaintext),
        "plaintextBlake2b512": hashlib.blake2b(plaintext).hexdigest(),
        "chunkCount": chunk_count(len(plaintext)),
        "ciphertextSize": len(ciphertext),
        "ciphertextBlake2b512": hashlib.blake2b(ciphertext).hexdigest(),
        "ciphertextSha256": hashlib.sha256(ciphertext).hexdigest(),
        "checksum": checksum,
    }
    if seed is not None:
        case["plaintextSeed"] = seed.hex()
    else:
        case["plaintext"] = plaintext.hex()
    if inline if inline is not None else len(ciphertext) <= MAX_INLINE:
        case["ciphertext"] = ciphertext.hex()
    return case, ciphertext


def main():
    tests = []
    workdir = tempfile.mkdtemp(prefix="e3dbkit-files-")
    tc = 0

    # Appendix A.6 known answers (fixed keys from the spec).
    ak = bytes([0x11] * 32)
    dk = bytes([0x66] * 32)
    edk_nonce = bytes([0x77] * 24)
    stream_header = bytes([0x88] * 24)
    tc += 1
    case, ct = valid_case(tc, "spec Appendix A.6: 'Hello, E3DB!' in one FINAL chunk, 153 bytes",
                          ["SpecKnownAnswer"], b"Hello, E3DB!", None, ak, dk, edk_nonce, stream_header, workdir)
    a6 = ("My5HUlc5a3d0R3JpaFR0U1NTQ2pzdkFaUGFZRUtmdENtdHlydlByQlR3bHpYWW1pQzRTelptek5tWVVLVlpMVkFCLmQzZDNkM2QzZDNk"
          "M2QzZDNkM2QzZDNkM2QzZDNkM2QzLoiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiOw58beWe7v+zO8uGOnzTTslQnR9TWHndZGNI1c7")
    assert base64.b64encode(ct).decode() == a6, "A.6 whole-file known answer differs"
    assert case["checksum"] == "slTvpeh3wxoeITIoI5RYHQ=="
    tests.append(case)

    tc += 1
    multi = bytes([0]) * CHUNK + bytes([1]) * CHUNK + b"tail"
    case, ct = valid_case(tc, "spec Appendix A.6 multi-chunk: 00x65536 || 01x65536 || 'tail', MESSAGE, MESSAGE, FINAL",
                          ["SpecKnownAnswer", "MultiChunk"], multi, None, ak, dk, edk_nonce, stream_header, workdir,
                          inline=True)
    assert len(ct) == 131251
    assert case["checksum"] == "RRniidURiCWIJU2/xoqUFA=="
    assert case["ciphertextSha256"] == "c4045b5cb04a55606f7250f428ca94f9df01b024cffe2275e5d8c57d5dabbec1"
    # The plaintext is long and regular: record it as a description instead of hex.
    del case["plaintext"]
    case["plaintextPattern"] = "A6multi"
    tests.append(case)

    sizes = [
        (0, ["Empty"], "empty plaintext: one empty FINAL chunk, 141 bytes"),
        (1, [], "one byte"),
        (16, [], "16 bytes"),
        (65535, ["ChunkBoundary"], "one byte short of a chunk"),
        (65536, ["ChunkBoundary"], "exactly one chunk: the full chunk carries FINAL"),
        (65537, ["ChunkBoundary", "MultiChunk"], "one byte past a chunk: the second chunk has one byte"),
        (131071, ["ChunkBoundary", "MultiChunk"], "two chunks less one byte"),
        (131072, ["ChunkBoundary", "MultiChunk"], "exactly two chunks"),
        (131073, ["ChunkBoundary", "MultiChunk"], "two chunks plus one byte"),
        (200000, ["MultiChunk", "Regenerate"], "200,000 bytes, four chunks"),
        (3, [], "random size"),
        (4097, [], "random size"),
        (77777, ["MultiChunk"], "random size"),
        (1048577, ["MultiChunk", "Regenerate"], "1 MiB + 1 (17 chunks), ciphertext not inlined"),
        (3_000_001, ["MultiChunk", "Regenerate"], "random size, 46 chunks, ciphertext not inlined"),
    ]
    valid_by_size = {}
    for size, flags, comment in sizes:
        tc += 1
        seed = derive(tc, "plaintext-seed", 32)
        plaintext = expand(seed, size)
        ak = derive(tc, "access-key", 32)
        case, ct = valid_case(tc, comment, flags, plaintext, seed, ak, derive(tc, "data-key", 32),
                              derive(tc, "edk-nonce", 24), derive(tc, "stream-header", 24), workdir)
        tests.append(case)
        valid_by_size[size] = (tc, ct)

    # Invalid cases: mutations of a valid case, with the error E3DBKit reports.
    three_id, three = valid_by_size[131073]
    two_id, two = valid_by_size[131072]
    empty_id, _ = valid_by_size[0]
    c0 = PREFIX
    c1 = PREFIX + CHUNK + ABYTES
    c2 = PREFIX + 2 * (CHUNK + ABYTES)
    muts = [
        (three_id, {"kind": "truncate", "length": 0}, "fileTruncated", "empty input"),
        (three_id, {"kind": "truncate", "length": 1}, "fileTruncated", "only the version byte"),
        (three_id, {"kind": "truncate", "length": 99}, "fileTruncated", "text header without its last '.'"),
        (three_id, {"kind": "truncate", "length": 100}, "fileTruncated", "text header only"),
        (three_id, {"kind": "truncate", "length": 123}, "fileTruncated", "stream header cut short"),
        (three_id, {"kind": "truncate", "length": c0}, "fileTruncated", "headers only: no chunk (zero-chunk file)"),
        (three_id, {"kind": "truncate", "length": c1}, "fileTruncated", "cut at the first chunk boundary"),
        (three_id, {"kind": "truncate", "length": c2}, "fileTruncated", "cut at the second chunk boundary"),
        (three_id, {"kind": "truncate", "length": c1 + 8}, "fileTruncated",
         "cut 8 bytes into the second chunk (fewer than 17 bytes remain)"),
        (three_id, {"kind": "truncate", "length": c1 + 30000}, "chunkAuthenticationFailed",
         "cut in the middle of the second chunk"),
        (three_id, {"kind": "truncate", "length": len(three) - 1}, "chunkAuthenticationFailed",
         "last byte of the FINAL chunk missing"),
        (three_id, {"kind": "append", "hex": "00"}, "trailingData",
         "one byte after a short FINAL chunk: it arrives in the same read, yet the chunk still ends where it did"),
        (two_id, {"kind": "append", "hex": "00"}, "trailingData", "one byte after a full FINAL chunk"),
        (two_id, {"kind": "append", "hex": ct_hex_tail(two, 18)}, "trailingData",
         "a copy of the last 18 bytes after a full FINAL chunk"),
        (three_id, {"kind": "swapChunks", "a": 0, "b": 1}, "chunkAuthenticationFailed", "first two chunks swapped"),
        (three_id, {"kind": "duplicateChunk", "index": 0}, "chunkAuthenticationFailed", "first chunk duplicated"),
        (three_id, {"kind": "flipBit", "offset": 0, "bit": 1}, "unsupportedFileVersion", "version '3' becomes '1'"),
        (three_id, {"kind": "flipBit", "offset": 1, "bit": 0}, "malformedFileHeader", "first '.' altered"),
        (three_id, {"kind": "flipBit", "offset": 10, "bit": 0}, header_flip_error(three, 10, 0), "edk character altered"),
        (three_id, {"kind": "flipBit", "offset": 80, "bit": 0}, header_flip_error(three, 80, 0), "edkN character altered"),
        (three_id, {"kind": "flipBit", "offset": 20, "bit": 7}, header_flip_error(three, 20, 7),
         "edk character made non-ASCII"),
        (three_id, {"kind": "flipBit", "offset": 110, "bit": 3}, "chunkAuthenticationFailed", "stream header altered"),
        (three_id, {"kind": "flipBit", "offset": c1 + 100, "bit": 7}, "chunkAuthenticationFailed",
         "byte inside the second chunk altered"),
        (three_id, {"kind": "flipBit", "offset": len(three) - 1, "bit": 0}, "chunkAuthenticationFailed",
         "MAC of the FINAL chunk altered"),
        (three_id, {"kind": "wrongAccessKey"}, "wrongAccessKey", "another access key"),
        (empty_id, {"kind": "truncate", "length": PREFIX}, "fileTruncated",
         "empty file without its FINAL chunk (the zero-chunk form old Swift and Java write)"),
    ]
    for base, mutation, error, comment in muts:
        tc += 1
        tests.append({
            "tcId": tc, "comment": comment, "result": "invalid", "flags": ["Mutation"],
            "baseTcId": base, "mutation": mutation, "expectedError": error,
        })

    envelope = {
        "algorithm": "E3DB-FILE-V3",
        "source": "Tozny Python SDK e3db==2.3.0 SodiumCrypto.encrypt_file/decrypt_file (libsodium via PyNaCl 1.6.2), "
                  "randomness fixed as described in the generator",
        "generator": "TestVectors/generators/e3db_files.py",
        "notes": {
            "plaintextSeed": "plaintext = BLAKE2b-512(seed || uint64_le(i)) for i = 0, 1, ..., truncated",
            "plaintextPattern A6multi": "bytes 00 x 65536 || 01 x 65536 || ASCII 'tail'",
            "accessKey": "base64url without padding, as the SDKs store it",
            "ciphertext": "present when at most 140,000 bytes; otherwise regenerate and compare ciphertextBlake2b512",
            "checksum": "the SDK's checksum: standard padded base64 of MD5(ciphertext)",
            "mutation": "truncate(length) | append(hex) | swapChunks(a,b) | duplicateChunk(index) | "
                        "flipBit(offset,bit) | wrongAccessKey (decrypt with BLAKE2b-256('wrong'))",
        },
        "numberOfTests": len(tests),
        "tests": tests,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(envelope, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT} ({len(tests)} tests)", file=sys.stderr)


if __name__ == "__main__":
    main()

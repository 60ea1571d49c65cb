#!/usr/bin/env python3
"""Generates TestVectors/primitives/*.json from independent implementations.

Peers: PyNaCl (its bundled libsodium, not the system copy the Swift code links), Python's hashlib (BLAKE2b,
PBKDF2-HMAC-SHA512, SHA-2, MD5: OpenSSL / CPython's own BLAKE2), `cryptography` (OpenSSL Ed25519 and X25519)
and Python's base64 module. Published known answers (RFC 8032, RFC 7748, RFC 7693, RFC 4648, the BLAKE2
reference KAT, published PBKDF2-HMAC-SHA512 values) are embedded and asserted against the peers, so a wrong
constant fails the generator instead of landing in a vector.

Deterministic: all "random" inputs come from a seeded PRNG, and every nonce is passed explicitly.
Regenerate from the project root:  $(scripts/python-env.sh) TestVectors/generators/primitives.py
"""
import base64
import hashlib
import json
import os
import random
import sys

import nacl.bindings as b
import nacl.pwhash
import nacl.signing
import nacl.public
from cryptography.hazmat.primitives.asymmetric import ed25519 as c_ed, x25519 as c_x
from cryptography.hazmat.primitives import serialization

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "primitives")
GEN = "TestVectors/generators/primitives.py"
rng = random.Random(0xE3DB)


def rb(n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def hx(x):
    return x.hex()


def write(name, algorithm, source, tests):
    for i, t in enumerate(tests, 1):
        t.setdefault("comment", "")
        t.setdefault("result", "valid")
        t.setdefault("flags", [])
        t["tcId"] = i
        # tcId first for readability
        tests[i - 1] = {"tcId": i, **{k: v for k, v in t.items() if k != "tcId"}}
    doc = {"algorithm": algorithm, "source": source, "generator": GEN, "numberOfTests": len(tests), "tests": tests}
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{name}: {len(tests)} tests")


LENGTHS = [0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 1000, 4096]

# ---------------------------------------------------------------- box
def box_vectors():
    tests = []
    for n in LENGTHS:
        seed_a, seed_b = rb(32), rb(32)
        pk_a, sk_a = b.crypto_box_seed_keypair(seed_a)
        pk_b, sk_b = b.crypto_box_seed_keypair(seed_b)
        nonce, msg = rb(24), rb(n)
        ct = b.crypto_box_easy(msg, nonce, pk_b, sk_a)
        # cryptography's X25519 as an independent check of the key pair
        assert c_x.X25519PrivateKey.from_private_bytes(sk_a).public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw) == pk_a
        tests.append({"comment": f"{n}-byte message", "senderSeed": hx(seed_a), "senderPrivate": hx(sk_a),
                      "senderPublic": hx(pk_a), "recipientSeed": hx(seed_b), "recipientPrivate": hx(sk_b),
                      "recipientPublic": hx(pk_b), "nonce": hx(nonce), "msg": hx(msg), "ct": hx(ct)})
        assert b.crypto_box_open_easy(ct, nonce, pk_a, sk_b) == msg
    # invalid: every region tampered, wrong keys
    base = tests[6]
    ct = bytes.fromhex(base["ct"])
    for pos, what in [(0, "tag byte 0"), (15, "tag byte 15"), (16, "ciphertext byte 0"), (len(ct) - 1, "last byte")]:
        bad = bytearray(ct); bad[pos] ^= 0x01
        tests.append({**base, "comment": f"flipped {what}", "ct": hx(bytes(bad)), "result": "invalid",
                      "flags": ["Tampered"], "error": "authenticationFailed"})
    bad_nonce = bytearray(bytes.fromhex(base["nonce"])); bad_nonce[23] ^= 0x80
    tests.append({**base, "comment": "wrong nonce", "nonce": hx(bytes(bad_nonce)), "result": "invalid",
                  "flags": ["WrongNonce"], "error": "authenticationFailed"})
    other_pk, other_sk = b.crypto_box_seed_keypair(rb(32))
    tests.append({**base, "comment": "wrong sender public key", "senderPublic": hx(other_pk), "result": "invalid",
                  "flags": ["WrongKey"], "error": "authenticationFailed"})
    tests.append({**base, "comment": "truncated to the tag minus one", "ct": hx(ct[:15]), "result": "invalid",
                  "flags": ["Truncated"], "error": "invalidLength"})
    # RFC 7748 §6.1 X25519 key pairs (Alice, Bob) as seedless private keys
    rfc_a = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    rfc_a_pub = bytes.fromhex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    rfc_b = bytes.fromhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
    rfc_b_pub = bytes.fromhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    assert b.crypto_scalarmult_base(rfc_a) == rfc_a_pub, "RFC 7748 Alice public key"
    assert b.crypto_scalarmult_base(rfc_b) == rfc_b_pub, "RFC 7748 Bob public key"
    shared = b.crypto_scalarmult(rfc_a, rfc_b_pub)
    assert shared == bytes.fromhex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"), "RFC 7748 K"
    nonce, msg = rb(24), b"RFC 7748 keys through crypto_box"
    tests.append({"comment": "RFC 7748 section 6.1 Alice to Bob", "senderPrivate": hx(rfc_a),
                  "senderPublic": hx(rfc_a_pub), "recipientPrivate": hx(rfc_b), "recipientPublic": hx(rfc_b_pub),
                  "nonce": hx(nonce), "msg": hx(msg), "ct": hx(b.crypto_box_easy(msg, nonce, rfc_b_pub, rfc_a)),
                  "sharedSecret": hx(shared), "flags": ["RFC7748"]})
    write("box.json", "crypto_box_curve25519xsalsa20poly1305",
          "PyNaCl crypto_box_easy and crypto_box_seed_keypair; key pairs cross-checked with cryptography X25519; RFC 7748 section 6.1",
          tests)


def sealedbox_vectors():
    tests = []
    for n in [0, 1, 32, 100, 1000]:
        pk, sk = b.crypto_box_seed_keypair(rb(32))
        msg = rb(n)
        sealed = b.crypto_box_seal(msg, pk)  # ephemeral key is random: the vector checks opening only
        tests.append({"comment": f"{n}-byte message", "recipientPrivate": hx(sk), "recipientPublic": hx(pk),
                      "msg": hx(msg), "sealed": hx(sealed)})
    base = tests[2]
    s = bytes.fromhex(base["sealed"])
    for pos, what in [(0, "ephemeral key byte 0"), (31, "ephemeral key byte 31"), (32, "tag byte 0"), (len(s) - 1, "last byte")]:
        bad = bytearray(s); bad[pos] ^= 0x01
        tests.append({**base, "comment": f"flipped {what}", "sealed": hx(bytes(bad)), "result": "invalid",
                      "flags": ["Tampered"], "error": "authenticationFailed"})
    tests.append({**base, "comment": "47 bytes", "sealed": hx(s[:47]), "result": "invalid", "flags": ["Truncated"],
                  "error": "invalidLength"})
    write("sealedbox.json", "crypto_box_seal", "PyNaCl crypto_box_seal (random ephemeral keys; open-only vectors)", tests)


def secretbox_vectors():
    tests = []
    for n in LENGTHS + [65536]:
        key, nonce, msg = rb(32), rb(24), rb(n)
        ct = b.crypto_secretbox_easy(msg, nonce, key)
        tests.append({"comment": f"{n}-byte message", "key": hx(key), "nonce": hx(nonce), "msg": hx(msg), "ct": hx(ct)})
    base = tests[6]
    ct = bytes.fromhex(base["ct"])
    for pos in range(len(ct)):
        if pos in (0, 8, 15, 16, 24, len(ct) - 1):
            bad = bytearray(ct); bad[pos] ^= 0x20
            tests.append({**base, "comment": f"flipped byte {pos}", "ct": hx(bytes(bad)), "result": "invalid",
                          "flags": ["Tampered"], "error": "authenticationFailed"})
    wrong = bytearray(bytes.fromhex(base["key"])); wrong[0] ^= 1
    tests.append({**base, "comment": "wrong key", "key": hx(bytes(wrong)), "result": "invalid", "flags": ["WrongKey"],
                  "error": "authenticationFailed"})
    tests.append({**base, "comment": "ciphertext extended by one byte", "ct": hx(ct + b"\x00"), "result": "invalid",
                  "flags": ["Extended"], "error": "authenticationFailed"})
    tests.append({**base, "comment": "ciphertext truncated by one byte", "ct": hx(ct[:-1]), "result": "invalid",
                  "flags": ["Truncated"], "error": "authenticationFailed"})
    write("secretbox.json", "crypto_secretbox_xsalsa20poly1305", "PyNaCl crypto_secretbox_easy", tests)


def ed25519_vectors():
    tests = []
    rfc = [
        ("RFC 8032 7.1 test 1", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
         "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        ("RFC 8032 7.1 test 2", "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
         "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
         "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
        ("RFC 8032 7.1 test 3", "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
         "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
         "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
    ]
    for comment, seed, pub, msg, sig in rfc:
        sk = nacl.signing.SigningKey(bytes.fromhex(seed))
        assert hx(bytes(sk.verify_key)) == pub, comment
        assert hx(sk.sign(bytes.fromhex(msg)).signature) == sig, comment
        tests.append({"comment": comment, "seed": seed, "public": pub, "private": seed + pub, "msg": msg, "sig": sig,
                      "flags": ["RFC8032"]})
    for n in [0, 1, 32, 64, 100, 1000, 10000]:
        seed, msg = rb(32), rb(n)
        sk = nacl.signing.SigningKey(seed)
        sig = sk.sign(msg).signature
        # cryptography (OpenSSL) must produce the same deterministic signature
        assert c_ed.Ed25519PrivateKey.from_private_bytes(seed).sign(msg) == sig
        pub = bytes(sk.verify_key)
        tests.append({"comment": f"{n}-byte message", "seed": hx(seed), "public": hx(pub), "private": hx(seed + pub),
                      "msg": hx(msg), "sig": hx(sig)})
    base = tests[4]
    sig = bytes.fromhex(base["sig"])
    for pos in (0, 31, 32, 63):
        bad = bytearray(sig); bad[pos] ^= 0x01
        tests.append({**base, "comment": f"signature byte {pos} flipped", "sig": hx(bytes(bad)), "result": "invalid",
                      "flags": ["Tampered"]})
    m = bytes.fromhex(base["msg"])
    tests.append({**base, "comment": "message changed", "msg": hx(bytes([m[0] ^ 1]) + m[1:]), "result": "invalid", "flags": ["Tampered"]})
    tests.append({**base, "comment": "signature truncated to 63 bytes", "sig": hx(sig[:63]), "result": "invalid", "flags": ["Truncated"]})
    tests.append({**base, "comment": "signature extended to 65 bytes", "sig": hx(sig + b"\x00"), "result": "invalid", "flags": ["Extended"]})
    other = nacl.signing.SigningKey(rb(32))
    tests.append({**base, "comment": "secret key whose public half belongs to another seed",
                  "private": base["seed"] + hx(bytes(other.verify_key)), "result": "invalid", "flags": ["InconsistentKey"],
                  "error": "inconsistentKey"})
    write("ed25519.json", "ed25519", "RFC 8032 section 7.1; PyNaCl crypto_sign, cross-checked with cryptography (OpenSSL)", tests)


def secretstream_vectors():
    tests = []
    for sizes in [[0], [1], [64], [65536], [100, 0], [1000, 1000, 4], [10, 20, 30, 40]]:
        key = rb(32)
        state = b.crypto_secretstream_xchacha20poly1305_state()
        header = b.crypto_secretstream_xchacha20poly1305_init_push(state, key)
        chunks = []
        msgs = []
        for i, n in enumerate(sizes):
            m = rb(n)
            tag = b.crypto_secretstream_xchacha20poly1305_TAG_FINAL if i == len(sizes) - 1 else b.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
            chunks.append(hx(b.crypto_secretstream_xchacha20poly1305_push(state, m, None, tag)))
            msgs.append(hx(m))
        tests.append({"comment": f"chunks of {sizes}", "key": hx(key), "header": hx(header), "chunks": chunks,
                      "msgs": msgs, "tags": ["message"] * (len(sizes) - 1) + ["final"]})
    # push and rekey tags
    key = rb(32)
    state = b.crypto_secretstream_xchacha20poly1305_state()
    header = b.crypto_secretstream_xchacha20poly1305_init_push(state, key)
    spec = [("push", b.crypto_secretstream_xchacha20poly1305_TAG_PUSH), ("rekey", b.crypto_secretstream_xchacha20poly1305_TAG_REKEY),
            ("message", 0), ("final", b.crypto_secretstream_xchacha20poly1305_TAG_FINAL)]
    chunks, msgs = [], []
    for name, tag in spec:
        m = rb(20)
        chunks.append(hx(b.crypto_secretstream_xchacha20poly1305_push(state, m, None, tag)))
        msgs.append(hx(m))
    tests.append({"comment": "push, rekey, message, final tags", "key": hx(key), "header": hx(header), "chunks": chunks,
                  "msgs": msgs, "tags": [s[0] for s in spec]})
    base = tests[5]  # three chunks
    ch = base["chunks"]
    tests.append({**base, "comment": "chunks 0 and 1 swapped", "chunks": [ch[1], ch[0], ch[2]], "result": "invalid",
                  "flags": ["Reordered"], "error": "authenticationFailed", "failAt": 0})
    tests.append({**base, "comment": "chunk 0 duplicated", "chunks": [ch[0], ch[0], ch[1], ch[2]], "result": "invalid",
                  "flags": ["Duplicated"], "error": "authenticationFailed", "failAt": 1})
    tests.append({**base, "comment": "final chunk missing", "chunks": ch[:2], "result": "invalid",
                  "flags": ["Truncated"], "error": "missingFinal", "failAt": 2})
    tests.append({**base, "comment": "data after the final chunk", "chunks": ch + [ch[2]], "result": "invalid",
                  "flags": ["Extended"], "error": "streamFinished", "failAt": 3})
    bad = bytearray(bytes.fromhex(ch[1])); bad[100] ^= 4
    tests.append({**base, "comment": "byte flipped in chunk 1", "chunks": [ch[0], hx(bytes(bad)), ch[2]], "result": "invalid",
                  "flags": ["Tampered"], "error": "authenticationFailed", "failAt": 1})
    tests.append({**base, "comment": "chunk 2 cut to 16 bytes", "chunks": [ch[0], ch[1], ch[2][:32]], "result": "invalid",
                  "flags": ["Truncated"], "error": "streamTruncated", "failAt": 2})
    hdr = bytearray(bytes.fromhex(base["header"])); hdr[0] ^= 1
    tests.append({**base, "comment": "header byte flipped", "header": hx(bytes(hdr)), "result": "invalid",
                  "flags": ["Tampered"], "error": "authenticationFailed", "failAt": 0})
    write("secretstream.json", "crypto_secretstream_xchacha20poly1305",
          "PyNaCl crypto_secretstream_xchacha20poly1305 (random headers; open-only vectors)", tests)


def blake2b_vectors():
    tests = []
    # RFC 7693 Appendix A and the empty string
    assert hashlib.blake2b(b"abc").hexdigest() == (
        "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923")
    tests.append({"comment": "RFC 7693 Appendix A", "msg": hx(b"abc"), "key": "", "outLen": 64,
                  "digest": hashlib.blake2b(b"abc").hexdigest(), "flags": ["RFC7693"]})
    # BLAKE2 reference KAT (blake2b-kat.txt): key = 00..3f, input = 00..(n-1), 64-byte output
    kat_key = bytes(range(64))
    assert hashlib.blake2b(b"", key=kat_key).hexdigest().startswith("10ebb67700b1868efb4417987acf4690"), "reference KAT entry 0"
    for n in range(256):
        tests.append({"comment": f"reference KAT, {n}-byte input", "msg": hx(bytes(range(n))), "key": hx(kat_key),
                      "outLen": 64, "digest": hashlib.blake2b(bytes(range(n)), key=kat_key).hexdigest(), "flags": ["KAT"]})
    for out in [16, 20, 32, 48, 64]:
        for n in [0, 1, 127, 128, 129, 1000]:
            msg = rb(n)
            tests.append({"comment": f"{out}-byte digest of {n} bytes", "msg": hx(msg), "key": "", "outLen": out,
                          "digest": hashlib.blake2b(msg, digest_size=out).hexdigest()})
        key = rb(rng.choice([16, 32, 64]))
        msg = rb(200)
        tests.append({"comment": f"keyed ({len(key)}-byte key), {out}-byte digest", "msg": hx(msg), "key": hx(key),
                      "outLen": out, "digest": hashlib.blake2b(msg, digest_size=out, key=key).hexdigest()})
    tests.append({"comment": "output of 15 bytes", "msg": "", "key": "", "outLen": 15, "digest": "", "result": "invalid",
                  "error": "invalidParameter"})
    tests.append({"comment": "output of 65 bytes", "msg": "", "key": "", "outLen": 65, "digest": "", "result": "invalid",
                  "error": "invalidParameter"})
    tests.append({"comment": "15-byte key", "msg": "", "key": hx(rb(15)), "outLen": 32, "digest": "", "result": "invalid",
                  "error": "invalidKeyLength"})
    write("blake2b.json", "blake2b", "Python hashlib.blake2b; RFC 7693 Appendix A; BLAKE2 reference KAT (blake2b-kat.txt)", tests)


def hash_vectors():
    tests = []
    for n in [0, 1, 3, 55, 56, 64, 70, 1000]:
        msg = b"testing" * 10 if n == 70 else rb(n)
        tests.append({"comment": f"{n} bytes", "msg": hx(msg), "sha256": hashlib.sha256(msg).hexdigest(),
                      "sha512": hashlib.sha512(msg).hexdigest(), "md5": hashlib.md5(msg).hexdigest(),
                      "md5Base64": base64.b64encode(hashlib.md5(msg).digest()).decode()})
    assert tests[6]["md5Base64"] == "DPb7oJVFD4O0cXsAkVRltA==", "e3db-swift testMD5 known answer"
    tests[6]["comment"] = "\"testing\" x 10: e3db-swift CryptoTests.testMD5 known answer"
    write("hashes.json", "sha256-sha512-md5", "Python hashlib; e3db-swift testMD5", tests)


def pbkdf2_vectors():
    tests = []
    published = [  # PBKDF2-HMAC-SHA512 values published alongside RFC 6070's inputs
        ("password", "salt", 1, 64,
         "867f70cf1ade02cff3752599a3a53dc4af34c7a669815ae5d513554e1c8cf252c02d470a285a0501bad999bfe943c08f050235d7d68b1da55e63f73b60a57fce"),
    ]
    p, s, c, dk, expect = published[0]
    assert hashlib.pbkdf2_hmac("sha512", p.encode(), s.encode(), c, dk).hex() == expect, "published PBKDF2-SHA512 c=1"
    tests.append({"comment": "published vector, c=1", "password": hx(p.encode()), "salt": hx(s.encode()), "rounds": c,
                  "outLen": dk, "derived": expect, "flags": ["Published"]})
    for pw, salt, rounds, n in [(b"password", b"salt", 2, 64), (b"password", b"salt", 4096, 64),
                                (b"passwordPASSWORDpassword", b"saltSALTsaltSALTsaltSALTsaltSALTsalt", 4096, 64),
                                (b"pass\x00word", b"sa\x00lt", 4096, 16), (b"correcthorsebatterystaple", b"fred@realm:IntegrationTest", 10000, 32),
                                (b"", b"salt", 1000, 32), (rb(100), rb(86), 10000, 32)]:
        tests.append({"comment": f"{rounds} rounds, {n} bytes", "password": hx(pw), "salt": hx(salt), "rounds": rounds,
                      "outLen": n, "derived": hashlib.pbkdf2_hmac("sha512", pw, salt, rounds, n).hex()})
    tests.append({"comment": "zero rounds", "password": "00", "salt": "00", "rounds": 0, "outLen": 32, "derived": "",
                  "result": "invalid", "error": "invalidParameter"})
    write("pbkdf2.json", "pbkdf2-hmac-sha512", "Python hashlib.pbkdf2_hmac; published PBKDF2-HMAC-SHA512 (c=1)", tests)


def argon2id_vectors():
    tests = []
    for pw, ops, mem, n in [(b"password", 2, 65536, 32), (b"", 1, 8192, 16), (rb(40), 3, 32768, 64), (b"correct horse", 2, 16384, 32)]:
        salt = rb(16)
        key = nacl.pwhash.argon2id.kdf(n, pw, salt, opslimit=ops, memlimit=mem)
        tests.append({"comment": f"ops {ops}, mem {mem}", "password": hx(pw), "salt": hx(salt), "opsLimit": ops,
                      "memLimit": mem, "outLen": n, "derived": hx(key)})
    tests.append({"comment": "15-byte salt", "password": "00", "salt": hx(rb(15)), "opsLimit": 2, "memLimit": 8192,
                  "outLen": 32, "derived": "", "result": "invalid", "error": "invalidLength"})
    write("argon2id.json", "argon2id13", "PyNaCl nacl.pwhash.argon2id.kdf", tests)


def base64_vectors():
    tests = []
    for plain in [b"", b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"]:  # RFC 4648 section 10
        tests.append({"comment": f"RFC 4648 section 10: {plain.decode()!r}", "bytes": hx(plain),
                      "url": base64.urlsafe_b64encode(plain).decode().rstrip("="), "std": base64.b64encode(plain).decode(),
                      "flags": ["RFC4648"]})
    for n in list(range(1, 40)) + [43, 64, 97, 1000]:
        data = rb(n)
        tests.append({"comment": f"{n} random bytes", "bytes": hx(data), "url": base64.urlsafe_b64encode(data).decode().rstrip("="),
                      "std": base64.b64encode(data).decode()})
    # every alphabet character
    alphabet = bytes(range(256))
    tests.append({"comment": "all byte values", "bytes": hx(alphabet), "url": base64.urlsafe_b64encode(alphabet).decode().rstrip("="),
                  "std": base64.b64encode(alphabet).decode()})
    # strict-decoder rejections, and whether the lenient decoder accepts (expected bytes) or not
    def neg(comment, text, lenient_bytes=None, flags=()):
        tests.append({"comment": comment, "text": text, "result": "invalid", "flags": list(flags),
                      "error": "invalidBase64", "lenient": None if lenient_bytes is None else hx(lenient_bytes)})
    key = rb(32)
    url = base64.urlsafe_b64encode(key).decode()
    neg("padded form (lenient accepts)", url, key, ["Padding"])
    std = base64.b64encode(b"\xfb\xff\xbf").decode()
    neg("standard alphabet + and / (lenient accepts)", std, b"\xfb\xff\xbf", ["StandardAlphabet"])
    neg("whitespace inside", url[:10] + " " + url[10:43], None, ["Whitespace"])
    neg("trailing newline", url[:43] + "\n", None, ["Whitespace"])
    neg("length 1 mod 4", "AAAAA", None, ["Length"])
    neg("non-zero trailing bits (lenient ignores them)", "AB", b"\x00", ["TrailingBits"])
    neg("non-zero trailing bits, two bytes", "AAB", b"\x00\x00", ["TrailingBits"])
    neg("three padding characters", "AA===", None, ["Padding"])
    neg("padding in the middle", "AA==AAAA", None, ["Padding"])
    neg("non-ASCII character", "AAA\u00e9", None, ["Alphabet"])
    neg("NUL character", "AA\u0000A", None, ["Alphabet"])
    neg("dot", "AA.A", None, ["Alphabet"])
    write("base64.json", "base64url", "RFC 4648 section 10; Python base64 module", tests)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    box_vectors(); sealedbox_vectors(); secretbox_vectors(); ed25519_vectors(); secretstream_vectors()
    blake2b_vectors(); hash_vectors(); pbkdf2_vectors(); argon2id_vectors(); base64_vectors()

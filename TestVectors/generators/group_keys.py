#!/usr/bin/env python3
"""Generates TestVectors/keys/group_wrappers.json: EAKInfo objects with group access key wrappers (spec §2.3).

Peer: PyNaCl 1.6.2 (its bundled libsodium, not the copy the Swift code links). The construction follows the spec
(§2.3 and §8.5, after js-sdk ``createGroupMembershipKey`` / ``createGroupAccessKey`` / ``decryptEak``):

* a group's 32-byte Curve25519 secret key is boxed for a member as ``membership_key = b64u(ct).b64u(nonce)``
  with ``crypto_box(group_sk, nonce, member_pk, authorizer_sk)``;
* the access key is boxed for the (innermost) group: ``eak = crypto_box(AK, nonce, group_pk, sharer_sk)``;
* a reader unwraps with ``private = reader_sk``, ``public = authorizer_public_key``; for each wrapper
  ``private = box_open(membership_key, public, private)``, ``public = wrapper.public_key``; finally
  ``AK = box_open(eak, public, private)``.

Every valid case is unwrapped here by an independent Python implementation of that chain, and every invalid
unwrap case is checked to fail at the stated step, before the file is written.

Deterministic: key pairs come from ``crypto_box_seed_keypair`` with fixed seeds, nonces and access keys from a
SHAKE-256 stream over a fixed label, so regenerating gives a byte-identical file. No network connection is opened
(``socket`` connects raise).

Usage: .venv/bin/python TestVectors/generators/group_keys.py [OUTPUT_ROOT]
(OUTPUT_ROOT defaults to the TestVectors directory beside this script.)
"""
import base64
import hashlib
import json
import os
import socket
import sys


def _no_network(*args, **kwargs):
    raise RuntimeError("network access is forbidden in the vector generator")


socket.socket.connect = _no_network
socket.socket.connect_ex = _no_network
socket.create_connection = _no_network

import nacl.bindings as sodium  # noqa: E402

GENERATOR = "TestVectors/generators/group_keys.py"
PEER = "PyNaCl 1.6.2 (crypto_box_easy / crypto_box_open_easy, crypto_box_seed_keypair)"


class Stream:
    """SHAKE-256 over a fixed label and a counter: deterministic 'random' bytes."""

    def __init__(self, label):
        self.label = label.encode()
        self.counter = 0

    def bytes(self, n):
        self.counter += 1
        return hashlib.shake_256(self.label + b":" + str(self.counter).encode()).digest(n)


RNG = Stream("e3dbkit-group-wrappers-v1")


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def b64u_decode(s):
    if "=" in s or "+" in s or "/" in s:
        raise ValueError("not unpadded base64url")
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def keypair(seed_byte):
    return sodium.crypto_box_seed_keypair(bytes([seed_byte]) * 32)  # (pk, sk)


def box(message, recipient_pk, sender_sk):
    nonce = RNG.bytes(24)
    ct = sodium.crypto_box_easy(message, nonce, recipient_pk, sender_sk)
    return b64u(ct) + "." + b64u(nonce)


def box_open(text, sender_pk, recipient_sk):
    parts = text.split(".")
    if len(parts) != 2:
        raise ValueError("not ct.nonce")
    return sodium.crypto_box_open_easy(b64u_decode(parts[0]), b64u_decode(parts[1]), sender_pk, recipient_sk)


def unwrap(info, reader_sk):
    """The spec §2.3 chain, written independently of E3DBKit."""
    private = reader_sk
    authorizer = info["authorizer_public_key"]
    public = b64u_decode(authorizer if isinstance(authorizer, str) else authorizer["curve25519"])  # Java: flat
    for wrapper in info.get("access_key_wrappers") or []:
        private = box_open(wrapper["membership_key"], public, private)
        assert len(private) == 32
        public = b64u_decode(wrapper["public_key"])
    return box_open(info["eak"], public, private)


READER = keypair(0x21)      # the client reading the record
AUTHORIZER = keypair(0x22)  # added the reader to the outer group (authorizer_public_key)
SHARER = keypair(0x23)      # shared the record type with the innermost group (signs nothing here)
MIDDLE = keypair(0x24)      # added the outer group to the inner group (two levels)
GROUP1 = keypair(0x25)      # outer group key pair
GROUP2 = keypair(0x26)      # inner group key pair
OTHER = keypair(0x27)       # an unrelated client
SIGNER_ED25519_PK = sodium.crypto_sign_seed_keypair(bytes([0x28]) * 32)[0]

AUTHORIZER_ID = "6b0a3b52-5c43-4c5b-9d43-0d1f4a1e2a01"
SIGNER_ID = "6b0a3b52-5c43-4c5b-9d43-0d1f4a1e2a02"
ACCESS_KEY_IDS = ["0d9c5f37-9b8e-4a51-8f1e-6f4c2a7b3c01", "0d9c5f37-9b8e-4a51-8f1e-6f4c2a7b3c02"]


def wrapper(group, member_pk, sender_sk, next_public, index):
    return {
        "membership_key": box(group[1], member_pk, sender_sk),
        "public_key": b64u(next_public),
        "access_key_id": ACCESS_KEY_IDS[index],
        "group_public_key": b64u(group[0]),
    }


def info(eak, wrappers, signer=False):
    out = {"eak": eak, "authorizer_id": AUTHORIZER_ID, "authorizer_public_key": {"curve25519": b64u(AUTHORIZER[0])},
           "access_key_wrappers": wrappers}
    if signer:
        out["signer_id"] = SIGNER_ID
        out["signer_signing_key"] = {"ed25519": b64u(SIGNER_ED25519_PK)}
    return out


def flip(text, index):
    """Changes one base64url character of `text` (never a '.')."""
    c = text[index]
    assert c != "."
    return text[:index] + ("A" if c != "A" else "B") + text[index + 1:]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    tests = []

    def add(comment, obj, result, ak=None, wrappers=None, stage=None, error=None, field=None, part=None, flags=()):
        text = obj if isinstance(obj, str) else json.dumps(obj)
        t = {"comment": comment, "result": result, "flags": list(flags), "json": text,
             "readerSecretKey": b64u(READER[1])}
        if result == "valid":
            assert unwrap(json.loads(text), READER[1]) == ak, comment
            t["accessKey"] = ak.hex()
            t["wrapperCount"] = wrappers
        else:
            t["stage"] = stage
            if stage == "unwrap":
                try:
                    unwrap(json.loads(text), READER[1])
                except Exception:
                    pass
                else:
                    raise AssertionError("the Python chain opened an invalid case: " + comment)
            t["error"] = error
            if field is not None:
                t["errorField"] = field
            if part is not None:
                t["errorPart"] = part
        tests.append(t)

    # One level: reader -> group 1 -> AK.
    ak1 = RNG.bytes(32)
    w1 = wrapper(GROUP1, READER[0], AUTHORIZER[1], SHARER[0], 0)
    eak1 = box(ak1, GROUP1[0], SHARER[1])
    one = info(eak1, [w1])
    add("one level of group wrapping", one, "valid", ak1, 1)
    add("one level, with signer members", info(eak1, [w1], signer=True), "valid", ak1, 1)
    add("one level, Java flat authorizer_public_key",
        dict(one, authorizer_public_key=b64u(AUTHORIZER[0])), "valid", ak1, 1)
    add("one level, wrapper members in another order, unknown member ignored",
        dict(one, access_key_wrappers=[{"group_public_key": w1["group_public_key"], "x": 1,
                                        "access_key_id": w1["access_key_id"], "public_key": w1["public_key"],
                                        "membership_key": w1["membership_key"]}]), "valid", ak1, 1)

    # Two levels: reader -> group 1 -> group 2 -> AK.
    ak2 = RNG.bytes(32)
    w2a = wrapper(GROUP1, READER[0], AUTHORIZER[1], MIDDLE[0], 0)
    w2b = wrapper(GROUP2, GROUP1[0], MIDDLE[1], SHARER[0], 1)
    eak2 = box(ak2, GROUP2[0], SHARER[1])
    two = info(eak2, [w2a, w2b])
    add("two levels of group wrapping", two, "valid", ak2, 2)

    # No wrappers: a direct EAK (null and empty array).
    ak0 = RNG.bytes(32)
    eak0 = box(ak0, READER[0], AUTHORIZER[1])
    add("access_key_wrappers empty: direct EAK", info(eak0, []), "valid", ak0, 0)
    add("access_key_wrappers null: direct EAK", info(eak0, None), "valid", ak0, 0)

    # Malformed wrappers (parse errors, the field names the wrapper index and member).
    def with_wrapper(base, index, **changes):
        ws = [dict(w) for w in base["access_key_wrappers"]]
        for k, v in changes.items():
            if v is None:
                ws[index].pop(k, None)
            else:
                ws[index][k] = v
        return dict(base, access_key_wrappers=ws)

    f0 = "access_key_wrappers[0]."
    add("access_key_wrappers is an object", dict(one, access_key_wrappers=w1), "invalid", stage="parse",
        error="invalidEAKInfo", field="access_key_wrappers")
    add("access_key_wrappers is a string", dict(one, access_key_wrappers="x"), "invalid", stage="parse",
        error="invalidEAKInfo", field="access_key_wrappers")
    add("wrapper is a string", dict(one, access_key_wrappers=[w1["membership_key"]]), "invalid", stage="parse",
        error="invalidEAKInfo", field="access_key_wrappers[0]")
    for member in ["membership_key", "public_key", "access_key_id", "group_public_key"]:
        add("wrapper without " + member, with_wrapper(one, 0, **{member: None}), "invalid", stage="parse",
            error="invalidEAKInfo", field=f0 + member)
    add("membership_key is a number", with_wrapper(one, 0, membership_key=5), "invalid", stage="parse",
        error="invalidEAKInfo", field=f0 + "membership_key")
    add("public_key is an object", with_wrapper(one, 0, public_key={"curve25519": w1["public_key"]}), "invalid",
        stage="parse", error="invalidEAKInfo", field=f0 + "public_key")
    add("access_key_id is an array", with_wrapper(one, 0, access_key_id=[]), "invalid", stage="parse",
        error="invalidEAKInfo", field=f0 + "access_key_id")
    add("group_public_key is true", with_wrapper(one, 0, group_public_key=True), "invalid", stage="parse",
        error="invalidEAKInfo", field=f0 + "group_public_key")
    mk = w1["membership_key"]
    ct, nonce = mk.split(".")
    add("membership_key with a bad base64url character", with_wrapper(one, 0, membership_key="*" + mk[1:]),
        "invalid", stage="parse", error="invalidEAKInfo", field=f0 + "membership_key")
    add("membership_key with one part", with_wrapper(one, 0, membership_key=ct), "invalid", stage="parse",
        error="invalidEAKInfo", field=f0 + "membership_key")
    add("membership_key ciphertext of 47 bytes", with_wrapper(one, 0, membership_key=b64u(b64u_decode(ct)[:47]) +
        "." + nonce), "invalid", stage="parse", error="invalidEAKInfo", field=f0 + "membership_key")
    add("membership_key nonce of 23 bytes", with_wrapper(one, 0, membership_key=ct + "." +
        b64u(b64u_decode(nonce)[:23])), "invalid", stage="parse", error="invalidEAKInfo", field=f0 + "membership_key")
    add("public_key of 31 bytes", with_wrapper(one, 0, public_key=b64u(SHARER[0][:31])), "invalid", stage="parse",
        error="invalidEAKInfo", field=f0 + "public_key")
    add("group_public_key padded", with_wrapper(one, 0, group_public_key=w1["group_public_key"] + "="), "invalid",
        stage="parse", error="invalidEAKInfo", field=f0 + "group_public_key")
    add("second wrapper without public_key", with_wrapper(two, 1, public_key=None), "invalid", stage="parse",
        error="invalidEAKInfo", field="access_key_wrappers[1].public_key")
    dup = json.dumps(one)
    wtext = json.dumps(w1)
    add("duplicate member inside a wrapper (strict JSON)",
        dup.replace(wtext, wtext[:-1] + ', "public_key": "' + b64u(OTHER[0]) + '"}'), "invalid", stage="parse",
        error="invalidEAKInfo")

    # Well-formed but wrong (unwrap errors).
    w_other = wrapper(GROUP1, OTHER[0], AUTHORIZER[1], SHARER[0], 0)
    add("wrapper encrypted for another client", info(eak1, [w_other]), "invalid", stage="unwrap",
        error="authenticationFailed", field=f0 + "membership_key", part="membership_key")
    add("membership_key ciphertext changed", with_wrapper(one, 0, membership_key=flip(mk, 5)), "invalid",
        stage="unwrap", error="authenticationFailed", field=f0 + "membership_key", part="membership_key")
    add("membership_key nonce changed", with_wrapper(one, 0, membership_key=flip(mk, len(ct) + 3)), "invalid",
        stage="unwrap", error="authenticationFailed", field=f0 + "membership_key", part="membership_key")
    add("eak ciphertext changed", dict(one, eak=flip(eak1, 7)), "invalid", stage="unwrap",
        error="authenticationFailed", part="eak")
    add("wrapper public_key of another client", with_wrapper(one, 0, public_key=b64u(OTHER[0])), "invalid",
        stage="unwrap", error="authenticationFailed", part="eak")
    add("authorizer_public_key of another client", dict(one, authorizer_public_key={"curve25519": b64u(OTHER[0])}),
        "invalid", stage="unwrap", error="authenticationFailed", field=f0 + "membership_key", part="membership_key")
    add("two levels, second wrapper for another group",
        info(eak2, [w2a, wrapper(GROUP2, OTHER[0], MIDDLE[1], SHARER[0], 1)]), "invalid", stage="unwrap",
        error="authenticationFailed", field="access_key_wrappers[1].membership_key", part="membership_key")
    add("two levels, wrappers in the wrong order", info(eak2, [w2b, w2a]), "invalid", stage="unwrap",
        error="authenticationFailed", field=f0 + "membership_key", part="membership_key")
    add("two levels, second wrapper missing", info(eak2, [w2a]), "invalid", stage="unwrap",
        error="authenticationFailed", part="eak")
    add("group wrapping ignored: direct EAK with a wrapper", info(eak0, [w1]), "invalid", stage="unwrap",
        error="authenticationFailed", part="eak")

    for i, t in enumerate(tests, 1):
        ordered = {"tcId": i, "comment": t.pop("comment"), "result": t.pop("result"), "flags": t.pop("flags")}
        ordered.update(t)
        tests[i - 1] = ordered
    out = {
        "algorithm": "E3DB EAKInfo with group access key wrappers (spec §2.3)",
        "source": "spec §2.3/§8.5 construction with " + PEER + "; every case unwrapped by the generator's own chain",
        "generator": GENERATOR,
        "numberOfTests": len(tests),
        "tests": tests,
    }
    path = os.path.join(root, "keys", "group_wrappers.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=True, indent=1)
        f.write("\n")
    print(f"wrote keys/group_wrappers.json: {len(tests)} tests")


if __name__ == "__main__":
    main()

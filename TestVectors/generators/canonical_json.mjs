// Node peer for canonical_json.py: no npm packages, only the engine's JSON.stringify and Array.prototype.sort.
// Reads one JSON request on stdin:
//   {"texts": [<JSON text>...], "numbers": [<16 hex digits: IEEE 754 bits>...]}
// and writes one JSON response on stdout:
//   {"utf16": [...], "js": [...], "plain": [...], "numbers": [...]}
// utf16: JSON.stringify for scalars, members sorted with the default sort() (UTF-16 code units), written in that
//        order without letting the engine re-enumerate them (RFC 8785 / Java / E3DB default).
// js:    JSON.stringify(sortObject(value)) the way js-sdk's Signable.stringify does it: a new object is built with
//        keys inserted in sort() order, and the engine enumerates array-index keys first (arrays stay arrays here).
// plain: JSON.stringify(JSON.parse(text)) with no sorting at all (engine enumeration order).
// Each entry is {"ok": string} or {"error": message}.
import { readFileSync } from 'node:fs';

const request = JSON.parse(readFileSync(0, 'utf8'));

function canonicalUtf16(value) {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return '[' + value.map(canonicalUtf16).join(',') + ']';
  const keys = Object.keys(value).sort();
  return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonicalUtf16(value[k])).join(',') + '}';
}

function sortObject(value) {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(sortObject);
  const out = {};
  for (const k of Object.keys(value).sort()) out[k] = sortObject(value[k]);
  return out;
}

function attempt(f) {
  try {
    return { ok: f() };
  } catch (e) {
    return { error: String(e) };
  }
}

const utf16 = [];
const js = [];
const plain = [];
for (const text of request.texts) {
  const value = JSON.parse(text);
  utf16.push(attempt(() => canonicalUtf16(value)));
  js.push(attempt(() => JSON.stringify(sortObject(value))));
  plain.push(attempt(() => JSON.stringify(value)));
}

const view = new DataView(new ArrayBuffer(8));
const numbers = request.numbers.map((hex) => {
  view.setBigUint64(0, BigInt('0x' + hex));
  return JSON.stringify(view.getFloat64(0));
});

process.stdout.write(JSON.stringify({ node: process.version, utf16, js, plain, numbers }));

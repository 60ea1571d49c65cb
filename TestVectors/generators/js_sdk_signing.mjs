// Node peer for js_variants.py: computes the messages js-sdk signs, with the engine's own JSON.parse and
// JSON.stringify (so member order is exactly what a JavaScript engine produces), and signs them with node:crypto's
// Ed25519. No npm packages.
//
// Reads one JSON request on stdin: {"seed": <64 hex>, "items": [item...]}, where an item is
//   {"kind": "recordInfo", "meta": <JSON text of the record's meta>, "data": <JSON text of the plaintext data>}
//     -> js-sdk RecordInfo.stringify: JSON.stringify({plain, type, user_id, writer_id}) + JSON.stringify(data),
//        plain and data unsorted (the engine enumerates array-index keys first, the rest in insertion order);
//   {"kind": "fileRecordInfo", "meta": <JSON text>}
//     -> the same with the data replaced by null (js-sdk writeFile / updateFileRecord);
//   {"kind": "noteInfo", "data": <JSON text of the plaintext note data>, "noteKeys": <JSON text>}
//     -> js-sdk Signable.stringify of NoteInfo: {"data":…,"note_keys":…} with keys sorted by sort() into new
//        objects (so array-index keys still come first), null members dropped.
// Writes {"results": [{"message": <string>, "signature": <b64u>}...], "publicKey": <b64u>}.
import { readFileSync } from 'node:fs';
import { createPrivateKey, createPublicKey, sign } from 'node:crypto';

const request = JSON.parse(readFileSync(0, 'utf8'));
const pkcs8Prefix = Buffer.from('302e020100300506032b657004220420', 'hex');
const privateKey = createPrivateKey({
  key: Buffer.concat([pkcs8Prefix, Buffer.from(request.seed, 'hex')]),
  format: 'der',
  type: 'pkcs8',
});
const spki = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
const b64u = (buf) => Buffer.from(buf).toString('base64url');

function sortObject(value) {
  if (value === null || typeof value !== 'object') return value;
  const out = {};
  for (const k of Object.keys(value).sort()) {
    if (value[k] !== null) out[k] = sortObject(value[k]);
  }
  return out;
}

function recordInfoMeta(meta) {
  return { plain: meta.plain, type: meta.type, user_id: meta.user_id, writer_id: meta.writer_id };
}

function message(item) {
  switch (item.kind) {
    case 'recordInfo':
      return JSON.stringify(recordInfoMeta(JSON.parse(item.meta))) + JSON.stringify(JSON.parse(item.data));
    case 'fileRecordInfo':
      return JSON.stringify(recordInfoMeta(JSON.parse(item.meta))) + JSON.stringify(null);
    case 'noteInfo':
      return JSON.stringify(sortObject({ data: JSON.parse(item.data), note_keys: JSON.parse(item.noteKeys) }));
    default:
      throw new Error('unknown kind ' + item.kind);
  }
}

const results = request.items.map((item) => {
  const text = message(item);
  return { message: text, signature: b64u(sign(null, Buffer.from(text, 'utf8'), privateKey)) };
});
process.stdout.write(JSON.stringify({ results, publicKey: b64u(spki.subarray(spki.length - 32)) }));

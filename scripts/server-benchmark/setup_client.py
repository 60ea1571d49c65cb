"""Registers a client with a running `e3dbkit-server run`, gets a Bearer token and writes records over one
keep-alive connection per server. Standard library only.

Usage: setup_client.py URL[,URL…] REGISTRATION_TOKEN RECORDS OUT_DIR
With several URLs (nodes on one database) the client registers through the first and the records are written
through each in turn, so that every node later reads records written through the others.
Writes OUT_DIR/token (the Bearer token), OUT_DIR/ids (record ids, one per line), OUT_DIR/body.json (the POST body
used for the records and the write benchmark) and OUT_DIR/record.json (one GET response, for the baseline's body).
"""
import base64
import http.client
import json
import os
import sys
import urllib.parse

urls, registration, count, out = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), sys.argv[4]
conns = [http.client.HTTPConnection(p.hostname, p.port, timeout=60) for p in map(urllib.parse.urlparse, urls)]


def call(method, path, body=None, headers=None, node=0):
    conn = conns[node]
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    if r.status >= 300:
        sys.exit("%s %s: HTTP %d %s" % (method, path, r.status, data[:300]))
    return data


def b64u(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


registered = json.loads(call("POST", "/v1/account/e3db/clients/register", json.dumps({
    "token": registration,
    "client": {"name": "bench", "public_key": {"curve25519": b64u(os.urandom(32))},
               "signing_key": {"ed25519": b64u(os.urandom(32))}},
}), {"Content-Type": "application/json"}))
basic = base64.b64encode(("%s:%s" % (registered["api_key_id"], registered["api_secret"])).encode()).decode()
token = json.loads(call("POST", "/v1/auth/token", "grant_type=client_credentials",
                        {"Authorization": "Basic " + basic,
                         "Content-Type": "application/x-www-form-urlencoded"}))["access_token"]
auth = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
client = registered["client_id"]


def field():  # an E3DB encrypted field's shape: four base64url parts joined by dots
    return ".".join(b64u(os.urandom(n)) for n in (48, 32, 24, 32))


body = json.dumps({"meta": {"writer_id": client, "user_id": client, "type": "bench", "plain": {"kind": "bench"}},
                   "data": {"name": field(), "email": field()}})
ids = [json.loads(call("POST", "/v1/storage/records", body, auth, i % len(conns)))["meta"]["record_id"]
       for i in range(count)]
with open(os.path.join(out, "token"), "w") as f:
    f.write(token)
with open(os.path.join(out, "ids"), "w") as f:
    f.write("\n".join(ids) + "\n")
with open(os.path.join(out, "body.json"), "w") as f:
    f.write(body)
with open(os.path.join(out, "record.json"), "wb") as f:
    f.write(call("GET", "/v1/storage/records/" + ids[0], headers=auth))

#!/usr/bin/env python3
"""Tozny's Python SDK (e3db 2.3.0) doing what Benchmarks/ClientThroughput does, against the same server:
records written and read per second with 1 and 16 threads (one SDK client object per thread, one registered client).

Usage: client_baseline.py API_URL TOKEN_FILE RECORDS TASKS...
Prints {"sdk":"python","op":...,"tasks":N,"records_per_second":X} lines.
"""
import json
import sys
import threading
import time

import e3db

api_url, token_file, records = sys.argv[1], sys.argv[2], int(sys.argv[3])
tasks_list = [int(t) for t in sys.argv[4:]]
token = open(token_file).read().strip()
pk, sk = e3db.Client.generate_keypair()
spk, ssk = e3db.Client.generate_signing_keypair()
details = e3db.Client.register(token, "bench-python", pk, api_url=api_url, public_signing_key=spk,
                               private_signing_key=ssk)
config = e3db.Config(details.client_id, details.api_key_id, details.api_secret, pk, sk, api_url=api_url,
                     public_signing_key=spk, private_signing_key=ssk)()


def fields(i):
    return {"field%d" % f: chr(97 + (i + f) % 26) * 32 for f in range(10)}


warm = e3db.Client(config)
warm.write("bench", fields(0))

for tasks in tasks_list:
    per_task = records // tasks
    clients = [e3db.Client(config) for _ in range(tasks)]
    for c in clients:
        c.write("bench", fields(0))  # token and access key outside the timing, as on the Swift side
    ids = [[] for _ in range(tasks)]

    def writer(t):
        for i in range(per_task):
            ids[t].append(clients[t].write("bench", fields(t * per_task + i)).meta.record_id)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(tasks)]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - start
    total = sum(len(x) for x in ids)
    print(json.dumps({"sdk": "python", "op": "write", "tasks": tasks, "records_per_second": total / elapsed}),
          flush=True)

    def reader(t):
        for rid in ids[t]:
            clients[t].read(rid)

    threads = [threading.Thread(target=reader, args=(t,)) for t in range(tasks)]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - start
    print(json.dumps({"sdk": "python", "op": "read", "tasks": tasks, "records_per_second": total / elapsed}),
          flush=True)

#!/usr/bin/env python3
"""Times Tozny's Python SDK (e3db==2.3.0, libsodium suite via PyNaCl) encrypting and decrypting a record of
10 fields x 32 bytes, the same workload as Benchmarks/DocumentsBenchmarks. No network: the SDK's private
record helpers are called with a stand-in client whose access-key lookup returns a fixed key.

Usage: .venv/bin/python TestVectors/generators/bench_python_records.py [records]
Prints records/s for encryption and decryption (best of 5 rounds).
"""
import socket
import sys
import time


def _no_network(*args, **kwargs):
    raise RuntimeError("network access is forbidden in the benchmark")


socket.socket.connect = _no_network
socket.create_connection = _no_network

from e3db.client import Client  # noqa: E402
from e3db.types import Meta, Record  # noqa: E402

WRITER = "d405a1ce-e528-4946-8682-4c2369a26604"
AK = bytes([0x11]) * 32
DATA = {f"field{i}": chr(65 + i) * 32 for i in range(10)}
META = {"writer_id": WRITER, "user_id": WRITER, "type": "bench", "plain": {}}


class Stand:
    client_id = WRITER

    def _Client__get_access_key(self, *args):
        return AK


def encrypt_once(stand):
    return Client._Client__encrypt_record(stand, Record(Meta(META), dict(DATA)))


def decrypt_once(stand, encrypted_data):
    return Client._Client__decrypt_record_with_key(stand, Record(Meta(META), dict(encrypted_data)), AK)


def best_rate(n, fn):
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    stand = Stand()
    enc = dict(encrypt_once(stand).to_json()["data"])
    assert decrypt_once(stand, enc).to_json()["data"] == DATA
    e = best_rate(n, lambda: encrypt_once(stand))
    d = best_rate(n, lambda: decrypt_once(stand, enc))
    print(f"python e3db 2.3.0: encrypt {e:.0f} records/s, decrypt {d:.0f} records/s "
          f"(10 fields x 32 bytes, {n} records per round, best of 5)")


if __name__ == "__main__":
    main()

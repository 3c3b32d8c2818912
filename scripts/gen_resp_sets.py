#!/usr/bin/env python3
"""Write a RESP stream of exactly N `SET key:<i> <value>` commands to stdout.

Used with `redis-cli --pipe` to load an exact number of distinct keys
(redis-benchmark -r draws keys at random, so it cannot guarantee N distinct
keys). Stdlib only.

usage: gen_resp_sets.py N [VALUE_SIZE]    (VALUE_SIZE defaults to 100 bytes)
"""
import sys

BATCH = 10_000  # commands per write: keeps memory small and writes large


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    n = int(sys.argv[1])
    size = int(sys.argv[2]) if len(sys.argv) == 3 else 100
    if n < 0 or size < 0:
        print("N and VALUE_SIZE must be >= 0", file=sys.stderr)
        return 2
    # Same value for every key: the server stores it per key anyway, and a
    # fixed value keeps the stream reproducible run to run.
    value = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    tail = b"$%d\r\n%s\r\n" % (size, value)
    out = sys.stdout.buffer
    for start in range(0, n, BATCH):
        parts = []
        for i in range(start, min(start + BATCH, n)):
            key = b"key:%d" % i
            parts.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n" % (len(key), key))
            parts.append(tail)
        out.write(b"".join(parts))
    out.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # The reader (redis-cli) went away; it reports the real error.
        sys.exit(1)

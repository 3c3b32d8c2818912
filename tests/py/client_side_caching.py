#!/usr/bin/env python3
"""redis-py's client-side caching against a node: a cached read is served without asking the
node, and is dropped when the node invalidates it (another client's write, FLUSHALL).

usage: client_side_caching.py PORT [--cluster]   (--cluster: PORT is one node of a cluster,
and both clients are redis-py RedisCluster clients)

Prints one line per step and exits 0 when every check held; a failed check exits 1 with the
reason. Waits for invalidations are bounded (a cache that is never invalidated keeps serving
the old value, so the wait then ends in failure).
"""
import sys
import time

import redis
import redis.connection
from redis.cache import CacheConfig

WAIT_S = 10.0

# redis-py offers its cache only to servers announcing 7.4 or later ("to maximize
# compatibility with all Redis products"); the node announces 7.0.15, whose CLIENT TRACKING
# (RESP3 pushes, `invalidate`, null on flush) is all the cache uses. Lower the gate to 7.0.
redis.connection.CacheProxyConnection.MIN_ALLOWED_VERSION = "7.0.0"


def node_info(client, section: str) -> dict:
    """INFO `section` of the node holding csc:k (a cluster client asks that node only)."""
    if hasattr(client, "get_node_from_key"):
        return client.info(section, target_nodes=client.get_node_from_key("csc:k"))
    return client.info(section)


def cache_of(client):
    """The client's cache: a cluster client keeps one per node, this is the node of csc:k's."""
    if hasattr(client, "get_cache"):
        return client.get_cache()
    return client.get_node_from_key("csc:k").redis_connection.get_cache()


def get_calls(admin) -> int:
    stats = node_info(admin, "commandstats").get("cmdstat_get", {})
    return int(stats.get("calls", 0))


def wait_for(what: str, check) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            sys.exit(f"FAIL: {what} within {WAIT_S} s")
        time.sleep(0.01)
    print(f"ok: {what}")


def main() -> None:
    port = int(sys.argv[1])
    if "--cluster" in sys.argv[2:]:
        cached = redis.RedisCluster(host="127.0.0.1", port=port, protocol=3,
                                    cache_config=CacheConfig())
        other = redis.RedisCluster(host="127.0.0.1", port=port)
    else:
        cached = redis.Redis(port=port, protocol=3, cache_config=CacheConfig())
        other = redis.Redis(port=port)

    other.set("csc:k", "v1")
    if cached.get("csc:k") != b"v1":
        sys.exit("FAIL: first read")
    size = cache_of(cached).size
    if size != 1:
        sys.exit(f"FAIL: the read was not cached (cache size {size})")
    tracked = node_info(other, "stats")["tracking_total_keys"]
    if tracked != 1:
        sys.exit(f"FAIL: the node tracks {tracked} keys, expected 1")
    print("ok: a read is cached and tracked by the node")

    calls = get_calls(other)
    if cached.get("csc:k") != b"v1" or get_calls(other) != calls:
        sys.exit("FAIL: a second read reached the node instead of the cache")
    print("ok: a second read is served from the cache")

    other.set("csc:k", "v2")
    wait_for("another client's write invalidates the cached read",
             lambda: cached.get("csc:k") == b"v2")

    cached.get("csc:k")
    other.flushall()
    wait_for("FLUSHALL empties the cache", lambda: cached.get("csc:k") is None)
    print("done")


if __name__ == "__main__":
    main()

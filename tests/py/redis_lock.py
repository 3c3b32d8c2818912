"""redis-py's Lock against a node: acquire, extend, reacquire, release, and the refusals
(a second holder, releasing a lock that expired or that someone else holds). Its scripts go
through EVALSHA, with EVAL when the node answers NOSCRIPT (redis-py's Script object).

Usage: redis_lock.py PORT [--cluster]. With --cluster, PORT is one node of a cluster and the
lock goes through redis-py's RedisCluster (its scripts run on the node of the lock's key).
Prints "ok" and exits 0 when every step held; an assertion or a redis error otherwise (exit
code 1, with the traceback).
"""
import sys
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError

port = int(sys.argv[1])
cluster = "--cluster" in sys.argv[2:]
r = redis.RedisCluster(host="127.0.0.1", port=port) if cluster else redis.Redis(port=port)
r.script_flush()

lock = r.lock("resource", timeout=10, blocking=False)
assert lock.acquire(), "a free lock is acquired"
token = r.get("resource")
assert token is not None and lock.local.token == token

other = r.lock("resource", timeout=10, blocking=False)
assert not other.acquire(), "a held lock is not acquired twice"

ttl_before = r.pttl("resource")
assert lock.extend(20), "the holder extends"
assert r.pttl("resource") > ttl_before + 5000, "extend adds to the TTL"
assert lock.extend(5, replace_ttl=True)
assert r.pttl("resource") <= 5000, "replace_ttl sets the TTL"
assert lock.reacquire()
assert 9000 < r.pttl("resource") <= 10000, "reacquire resets the timeout"
assert lock.owned() and lock.locked()

# Someone else's token: extend and release are refused by the scripts.
r.set("resource", "intruder", px=10000)
try:
    lock.extend(10)
    raise AssertionError("extended a lock it does not own")
except LockNotOwnedError:
    pass
try:
    lock.release()
    raise AssertionError("released a lock it does not own")
except LockNotOwnedError:
    pass
assert r.get("resource") == b"intruder", "the other holder's lock stays"
r.delete("resource")

# A lock that expired cannot be released either.
short = r.lock("short", timeout=0.05, blocking=False)
assert short.acquire()
time.sleep(0.2)
try:
    short.release()
    raise AssertionError("released an expired lock")
except LockError:
    pass

# The normal cycle, with the lock as a context manager.
with r.lock("cycle", timeout=5, blocking_timeout=2):
    assert r.exists("cycle") == 1
assert r.exists("cycle") == 0, "leaving the block released it"

# The scripts were cached by EVAL/EVALSHA: SCRIPT EXISTS knows them.
shas = [s.sha for s in (lock.lua_release, lock.lua_extend, lock.lua_reacquire)]
if cluster:
    # Cached where they ran: the node of the lock's key.
    node = r.get_node_from_key("resource")
    known = r.execute_command("SCRIPT EXISTS", *shas, target_nodes=node)
    assert [bool(k) for k in known] == [True, True, True], (shas, known)
else:
    assert r.script_exists(*shas) == [True, True, True], shas
print("ok")

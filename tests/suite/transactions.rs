//! Transactions (MULTI EXEC DISCARD WATCH UNWATCH) against a real node: replies checked frame
//! by frame over a raw connection (EXEC arrays carry error elements, which client libraries
//! turn into errors), WATCH driven from a second connection, and the `redis` crate's atomic
//! pipelines as a real client uses them.

use integration::raw::{bulk, Frame, RawClient};
use integration::{cmd, Node};
use redis::Value;
use std::time::{Duration, Instant};

fn ok() -> Frame {
    Frame::simple("OK")
}

fn queued() -> Frame {
    Frame::simple("QUEUED")
}

#[test]
fn exec_runs_the_queue_and_reports_runtime_errors_in_place() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["SET", "s", "text"]), queued());
    assert_eq!(c.call(&["INCR", "s"]), queued());
    assert_eq!(c.call(&["GET", "s"]), queued());
    assert_eq!(c.call(&["SET", "n", "1"]), queued());
    assert_eq!(c.call(&["incrby", "n", "41"]), queued());
    assert_eq!(
        c.call(&["EXEC"]),
        Frame::Array(vec![
            ok(),
            Frame::error("ERR value is not an integer or out of range"),
            bulk("text"),
            ok(),
            Frame::Integer(42),
        ])
    );
    // The failed INCR did not stop the commands after it.
    assert_eq!(node.cli(&["GET", "n"]), "42");
    // The transaction is over.
    assert_eq!(c.call(&["EXEC"]), Frame::error("ERR EXEC without MULTI"));
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["EXEC"]), Frame::Array(vec![]));
}

#[test]
fn queueing_errors_discard_the_transaction_with_execabort() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["SET", "a", "1"]), queued());
    assert_eq!(
        c.call(&["NOSUCH", "x"]),
        Frame::error("ERR unknown command 'NOSUCH', with args beginning with: 'x' ")
    );
    assert_eq!(
        c.call(&["GET"]),
        Frame::error("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(c.call(&["SET", "b", "2"]), queued());
    assert_eq!(
        c.call(&["EXEC"]),
        Frame::error("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(c.call(&["GET", "a"]), Frame::NullBulk, "nothing ran");
    assert_eq!(c.call(&["EXEC"]), Frame::error("ERR EXEC without MULTI"));

    // EXEC refused by the dispatcher (here: its arity) discards the transaction too.
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["SET", "a", "1"]), queued());
    assert_eq!(
        c.call(&["EXEC", "extra"]),
        Frame::error(
            "EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command"
        )
    );
    assert_eq!(
        c.call(&["DISCARD"]),
        Frame::error("ERR DISCARD without MULTI")
    );
    assert_eq!(c.call(&["GET", "a"]), Frame::NullBulk);
}

#[test]
fn control_commands_inside_multi_answer_without_dooming_it() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["EXEC"]), Frame::error("ERR EXEC without MULTI"));
    assert_eq!(
        c.call(&["DISCARD"]),
        Frame::error("ERR DISCARD without MULTI")
    );
    assert_eq!(c.call(&["UNWATCH"]), ok());
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(
        c.call(&["MULTI"]),
        Frame::error("ERR MULTI calls can not be nested")
    );
    assert_eq!(
        c.call(&["WATCH", "k"]),
        Frame::error("ERR WATCH inside MULTI is not allowed")
    );
    // UNWATCH is queued like any command, as in Redis.
    assert_eq!(c.call(&["UNWATCH"]), queued());
    assert_eq!(c.call(&["SET", "k", "v"]), queued());
    assert_eq!(c.call(&["EXEC"]), Frame::Array(vec![ok(), ok()]));
    assert_eq!(
        c.call(&["WATCH"]),
        Frame::error("ERR wrong number of arguments for 'watch' command")
    );
    assert_eq!(node.cli(&["EXEC"]), "ERR EXEC without MULTI");
}

#[test]
fn discard_and_reset_drop_the_queue_and_the_watches() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let mut other = node.client();
    assert_eq!(c.call(&["WATCH", "k"]), ok());
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["SET", "k", "mine"]), queued());
    assert_eq!(c.call(&["DISCARD"]), ok());
    cmd(&mut other, &["SET", "k", "theirs"]).unwrap();
    // The watch went with DISCARD: this EXEC runs.
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["GET", "k"]), queued());
    assert_eq!(c.call(&["EXEC"]), Frame::Array(vec![bulk("theirs")]));

    assert_eq!(c.call(&["WATCH", "k"]), ok());
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["SET", "k", "mine"]), queued());
    assert_eq!(c.call(&["RESET"]), Frame::simple("RESET"));
    cmd(&mut other, &["SET", "k", "again"]).unwrap();
    assert_eq!(c.call(&["EXEC"]), Frame::error("ERR EXEC without MULTI"));
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["EXEC"]), Frame::Array(vec![]));
    assert_eq!(node.cli(&["GET", "k"]), "again");
}

#[test]
fn a_write_by_another_client_aborts_exec_with_a_null_reply() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let mut other = node.client();
    cmd(&mut other, &["SET", "k", "1"]).unwrap();

    assert_eq!(c.call(&["WATCH", "k", "unrelated"]), ok());
    cmd(&mut other, &["SET", "k", "1"]).unwrap(); // same value: still a write
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["SET", "k", "mine"]), queued());
    assert_eq!(c.call(&["EXEC"]), Frame::NullArray);
    assert_eq!(node.cli(&["GET", "k"]), "1");

    // Untouched, the same transaction goes through; a write to an unwatched key is no harm.
    assert_eq!(c.call(&["WATCH", "k"]), ok());
    cmd(&mut other, &["SET", "elsewhere", "x"]).unwrap();
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["SET", "k", "mine"]), queued());
    assert_eq!(c.call(&["EXEC"]), Frame::Array(vec![ok()]));

    // UNWATCH forgets the watch before the write lands.
    assert_eq!(c.call(&["WATCH", "k"]), ok());
    assert_eq!(c.call(&["UNWATCH"]), ok());
    cmd(&mut other, &["SET", "k", "2"]).unwrap();
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["EXEC"]), Frame::Array(vec![]));

    // The client's own write after WATCH counts too.
    assert_eq!(c.call(&["WATCH", "k"]), ok());
    assert_eq!(c.call(&["SET", "k", "3"]), ok());
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["EXEC"]), Frame::NullArray);

    // Writes made by another client's EXEC invalidate watches as well.
    assert_eq!(c.call(&["WATCH", "k"]), ok());
    redis::pipe()
        .atomic()
        .set("k", "from-exec")
        .ignore()
        .query::<()>(&mut other)
        .unwrap();
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["EXEC"]), Frame::NullArray);

    // In RESP3 the aborted EXEC is the RESP3 null.
    assert!(matches!(c.call(&["HELLO", "3"]), Frame::Map(_)));
    assert_eq!(c.call(&["WATCH", "k"]), ok());
    cmd(&mut other, &["SET", "k", "4"]).unwrap();
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["EXEC"]), Frame::Null);
}

#[test]
fn a_watched_key_that_expires_aborts_exec() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    // The key must still be live when watched: GET after WATCH proves it was. A machine
    // too slow to WATCH within the TTL just tries again.
    let mut watched_live = false;
    for _ in 0..5 {
        assert_eq!(c.call(&["SET", "k", "v", "PX", "400"]), ok());
        assert_eq!(c.call(&["WATCH", "k"]), ok());
        if c.call(&["GET", "k"]) == bulk("v") {
            watched_live = true;
            break;
        }
        assert_eq!(c.call(&["UNWATCH"]), ok());
    }
    assert!(watched_live, "could not WATCH the key within its TTL");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["SET", "k", "new"]), queued());
    assert_eq!(c.call(&["EXEC"]), Frame::NullArray);
    assert_eq!(c.call(&["GET", "k"]), Frame::NullBulk);

    // A key already gone when watched is not a change when it stays gone.
    assert_eq!(c.call(&["SET", "gone", "v", "PX", "1"]), ok());
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.call(&["WATCH", "gone"]), ok());
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["GET", "gone"]), queued());
    assert_eq!(c.call(&["EXEC"]), Frame::Array(vec![Frame::NullBulk]));
}

#[test]
fn optimistic_increments_from_many_clients_lose_nothing() {
    // Goal: WATCH/MULTI/EXEC is a correct compare-and-set under concurrency. Method: four
    // threads each add 1 to a counter 50 times with the classic retry loop; every EXEC that
    // succeeds must count, so the total is exact.
    const THREADS: usize = 4;
    const INCREMENTS: usize = 50;
    let node = Node::start(&[]);
    cmd(&mut node.client(), &["SET", "counter", "0"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let mut c = RawClient::connect(node.port);
                let mut done = 0;
                while done < INCREMENTS {
                    assert!(Instant::now() < deadline, "no progress");
                    assert_eq!(c.call(&["WATCH", "counter"]), ok());
                    let Frame::Bulk(v) = c.call(&["GET", "counter"]) else {
                        panic!("counter missing");
                    };
                    let n: i64 = std::str::from_utf8(&v).unwrap().parse().unwrap();
                    assert_eq!(c.call(&["MULTI"]), ok());
                    let next = (n + 1).to_string();
                    assert_eq!(c.call(&["SET", "counter", &next]), queued());
                    match c.call(&["EXEC"]) {
                        Frame::NullArray => {}
                        Frame::Array(r) => {
                            assert_eq!(r, vec![ok()]);
                            done += 1;
                        }
                        other => panic!("unexpected EXEC reply {other:?}"),
                    }
                }
            });
        }
    });
    assert_eq!(
        node.cli(&["GET", "counter"]),
        (THREADS * INCREMENTS).to_string()
    );
}

#[test]
fn a_client_library_pipeline_runs_atomically() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let (set, n, got): (String, i64, String) = redis::pipe()
        .atomic()
        .set("a", "5")
        .incr("a", 10)
        .get("a")
        .query(&mut c)
        .unwrap();
    assert_eq!((set.as_str(), n, got.as_str()), ("OK", 15, "15"));
    // A failing command inside makes the library's EXEC result an error, not a panic here.
    cmd(&mut c, &["SET", "s", "x"]).unwrap();
    let r: redis::RedisResult<Value> = redis::pipe().atomic().incr("s", 1).query(&mut c);
    assert!(r.is_err());
    assert_eq!(
        cmd(&mut c, &["GET", "s"]).unwrap(),
        Value::BulkString(b"x".to_vec())
    );
}

#[test]
fn over_maxmemory_nothing_is_queued() {
    // maxmemory of one byte: the node is always over it, and the policy is noeviction.
    let node = Node::start(&["--maxmemory", "1"]);
    let mut c = RawClient::connect(node.port);
    let oom = "OOM command not allowed when used memory > 'maxmemory'.";
    assert_eq!(c.call(&["GET", "k"]), Frame::NullBulk, "reads still run");
    assert_eq!(c.call(&["MULTI"]), ok());
    // Redis refuses every command while queueing over maxmemory, reads included.
    assert_eq!(c.call(&["GET", "k"]), Frame::error(oom));
    assert_eq!(c.call(&["SET", "k", "v"]), Frame::error(oom));
    assert_eq!(
        c.call(&["EXEC"]),
        Frame::error("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["DISCARD"]), ok());
}

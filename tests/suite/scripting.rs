//! Lua scripting (EVAL, EVALSHA, EVAL_RO, SCRIPT) against real node processes: replies
//! checked frame by frame over a raw connection, errors in Redis 7.0's words, the script
//! cache, read-only scripts, a script's writes in the AOF as the commands it ran (and there
//! after a kill -9), BUSY and SCRIPT KILL, and redis-py's `Lock`, whose scripts real
//! applications run.

use integration::raw::{bulk, bulks, Frame, RawClient};
use integration::Node;
use std::time::{Duration, Instant};

/// Bound for anything waited on (a script becoming BUSY, a killed script answering).
const PATIENCE: Duration = Duration::from_secs(20);

fn error_text(frame: &Frame) -> String {
    match frame {
        Frame::Error(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// SHA1 of a script body as the node names it (SCRIPT LOAD answers it).
fn load(c: &mut RawClient, body: &str) -> String {
    match c.call(&["SCRIPT", "LOAD", body]) {
        Frame::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
        other => panic!("SCRIPT LOAD answered {other:?}"),
    }
}

#[test]
fn eval_converts_lua_values_and_replies_both_ways() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(
        c.call(&["EVAL", "return {1,2,3,'ciao',{1,2}}", "0"]),
        Frame::Array(vec![
            Frame::Integer(1),
            Frame::Integer(2),
            Frame::Integer(3),
            bulk("ciao"),
            Frame::Array(vec![Frame::Integer(1), Frame::Integer(2)]),
        ])
    );
    assert_eq!(
        c.call(&[
            "EVAL",
            "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}",
            "2",
            "a{t}",
            "b{t}",
            "c",
            "d"
        ]),
        bulks(&["a{t}", "b{t}", "c", "d"])
    );
    assert_eq!(c.call(&["EVAL", "return 3.99", "0"]), Frame::Integer(3));
    assert_eq!(c.call(&["EVAL", "return true", "0"]), Frame::Integer(1));
    assert_eq!(c.call(&["EVAL", "return false", "0"]), Frame::NullBulk);
    assert_eq!(
        c.call(&["EVAL", "return {1, nil, 3}", "0"]),
        Frame::Array(vec![Frame::Integer(1)]),
        "an array ends at its first nil"
    );
    assert_eq!(
        c.call(&["EVAL", "return {ok='fine'}", "0"]),
        Frame::simple("fine")
    );
    assert_eq!(
        c.call(&["EVAL", "return redis.status_reply('MY_OK')", "0"]),
        Frame::simple("MY_OK")
    );

    // Replies as the script sees them.
    assert_eq!(
        c.call(&[
            "EVAL",
            "return redis.call('set', KEYS[1], ARGV[1])",
            "1",
            "k",
            "v"
        ]),
        Frame::simple("OK")
    );
    assert_eq!(
        c.call(&[
            "EVAL",
            "local r = redis.call('get', KEYS[1]); return {type(r), r}",
            "1",
            "k"
        ]),
        bulks(&["string", "v"])
    );
    assert_eq!(
        c.call(&["EVAL", "return redis.call('get', 'missing') == false", "0"]),
        Frame::Integer(1),
        "a null is false under RESP2"
    );
    assert_eq!(
        c.call(&[
            "EVAL",
            "local r = redis.call('set', 'k', 'w'); return r.ok",
            "0"
        ]),
        bulk("OK")
    );
    assert_eq!(
        c.call(&[
            "EVAL",
            "local r = redis.pcall('incr', 'k'); return r.err",
            "0"
        ]),
        bulk("ERR value is not an integer or out of range")
    );
    c.call(&["RPUSH", "list", "a", "b", "c"]);
    assert_eq!(
        c.call(&[
            "EVAL",
            "local r = redis.call('lrange', KEYS[1], 0, -1); return {#r, r[3]}",
            "1",
            "list"
        ]),
        Frame::Array(vec![Frame::Integer(3), bulk("c")])
    );
    assert_eq!(
        c.call(&["EVAL", "return redis.call('incrby', 'n', 2.0)", "0"]),
        Frame::Integer(2),
        "numbers are passed as their text"
    );

    // RESP3: the client's HELLO 3 and the script's setresp(3).
    c.call(&["HELLO", "3"]);
    assert_eq!(
        c.call(&[
            "EVAL",
            "redis.setresp(3); return redis.call('hgetall', 'nohash').map ~= nil",
            "0"
        ]),
        Frame::Boolean(true)
    );
    assert_eq!(
        c.call(&["EVAL", "return {double=1.5}", "0"]),
        Frame::Double(1.5)
    );
    assert_eq!(
        c.call(&[
            "EVAL",
            "redis.setresp(3); return redis.call('get', 'missing') == nil",
            "0"
        ]),
        Frame::Boolean(true),
        "a null is nil under RESP3"
    );
    assert_eq!(
        c.call(&["EVAL", "return {map={a=1}}", "0"]),
        Frame::Map(vec![(bulk("a"), Frame::Integer(1))])
    );
}

#[test]
fn errors_read_as_redis_7_words_them() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let sha = |body: &str, c: &mut RawClient| load(c, body);

    let body = "return a";
    let s = sha(body, &mut c);
    assert_eq!(
        error_text(&c.call(&["EVAL", body, "0"])),
        format!("ERR user_script:1: Script attempted to access nonexistent global variable 'a' script: {s}, on @user_script:1.")
    );
    let body = "a = 10";
    let s = sha(body, &mut c);
    assert_eq!(
        error_text(&c.call(&["EVAL", body, "0"])),
        format!(
            "ERR user_script:1: Attempt to modify a readonly table script: {s}, on @user_script:1."
        )
    );
    let body = "local x = 1\nredis.call('nosuchcommand')";
    let s = sha(body, &mut c);
    assert_eq!(
        error_text(&c.call(&["EVAL", body, "0"])),
        format!("ERR Unknown Redis command called from script script: {s}, on @user_script:2.")
    );
    c.call(&["SET", "str", "x"]);
    let body = "redis.call('lpush', KEYS[1], 'v')";
    let s = sha(body, &mut c);
    assert_eq!(
        error_text(&c.call(&["EVAL", body, "1", "str"])),
        format!("WRONGTYPE Operation against a key holding the wrong kind of value script: {s}, on @user_script:1.")
    );
    for (body, expected) in [
        (
            "redis.call('set', 'x')",
            "ERR Wrong number of args calling Redis command from script",
        ),
        (
            "redis.call('multi')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "redis.call('eval', 'return 1', 0)",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "redis.call('ping', {})",
            "ERR Lua redis lib command arguments must be strings or integers",
        ),
    ] {
        let text = error_text(&c.call(&["EVAL", body, "0"]));
        assert!(text.starts_with(expected), "{body}: {text}");
    }
    // Returned error tables are the reply as they are.
    assert_eq!(
        c.call(&[
            "EVAL",
            "return redis.error_reply('MY_ERR_CODE custom msg')",
            "0"
        ]),
        Frame::error("MY_ERR_CODE custom msg")
    );
    assert_eq!(
        c.call(&["EVAL", "return {err='ERR this is an error'}", "0"]),
        Frame::error("ERR this is an error")
    );
    assert_eq!(
        error_text(&c.call(&["EVAL", "return 'x'", "-1"])),
        "ERR Number of keys can't be negative"
    );
    assert_eq!(
        error_text(&c.call(&["EVAL", "return 'x'", "2", "a"])),
        "ERR Number of keys can't be greater than number of args"
    );
    let text = error_text(&c.call(&["EVAL", "return +", "0"]));
    assert!(
        text.starts_with("ERR Error compiling script (new function): user_script:1:"),
        "{text}"
    );
    // The sandbox: no files, no printing, no binary chunks, libraries read-only.
    for (body, expected) in [
        ("loadfile('x')", "nonexistent global variable 'loadfile'"),
        ("dofile('x')", "nonexistent global variable 'dofile'"),
        ("print('x')", "nonexistent global variable 'print'"),
        ("os.exit()", "nonexistent global variable 'os'"),
        (
            "return loadstring(string.dump(function() return 1 end))()",
            "attempt to call a nil value",
        ),
        ("setmetatable(_G, {})", "Attempt to modify a readonly table"),
        (
            "redis.call = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        ("cjson.encode = nil", "Attempt to modify a readonly table"),
        ("string.x = 1", "Attempt to modify a readonly table"),
    ] {
        let text = error_text(&c.call(&["EVAL", body, "0"]));
        assert!(text.contains(expected), "{body}: {text}");
    }
    assert_eq!(
        c.call(&["PING"]),
        Frame::simple("PONG"),
        "the connection is fine after errors"
    );
}

#[test]
fn libraries_cjson_bit_sha1hex_and_a_seedable_random() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(
        c.call(&["EVAL", "return cjson.encode({1, 'a/b', {x=true}})", "0"]),
        bulk(r#"[1,"a\/b",{"x":true}]"#)
    );
    assert_eq!(
        c.call(&[
            "EVAL",
            "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')",
            "0"
        ]),
        bulk("0 -5000 -1 0.0003 1023.2 0")
    );
    assert_eq!(
        c.call(&["EVAL", "return {bit.band(7, 3), bit.bor(1, 2, 4), bit.bxor(1, 3), bit.lshift(1, 4), bit.tohex(255, 2), bit.tobit(0xffffffff)}", "0"]),
        Frame::Array(vec![
            Frame::Integer(3),
            Frame::Integer(7),
            Frame::Integer(2),
            Frame::Integer(16),
            bulk("ff"),
            Frame::Integer(-1),
        ])
    );
    assert_eq!(
        c.call(&["EVAL", "return redis.sha1hex('Pizza & Mandolino')", "0"]),
        bulk("74822d82031af7493c20eefa13bd07ec4fada82f")
    );
    let seeded = "math.randomseed(ARGV[1]); return tostring(math.random())";
    let a = c.call(&["EVAL", seeded, "0", "10"]);
    assert_eq!(
        c.call(&["EVAL", seeded, "0", "10"]),
        a,
        "one seed, one sequence"
    );
    assert_ne!(c.call(&["EVAL", seeded, "0", "20"]), a);
    assert_eq!(
        c.call(&[
            "EVAL",
            "return {redis.REPL_ALL, redis.LOG_WARNING, redis.replicate_commands() and 1}",
            "0"
        ]),
        Frame::Array(vec![
            Frame::Integer(3),
            Frame::Integer(3),
            Frame::Integer(1)
        ])
    );
    assert_eq!(
        c.call(&["EVAL", "redis.set_repl(redis.REPL_ALL); redis.log(redis.LOG_NOTICE, 'from a script'); return 1", "0"]),
        Frame::Integer(1)
    );
}

#[test]
fn evalsha_runs_cached_scripts_until_script_flush() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    c.call(&["SET", "mykey", "myval"]);
    let body = "return redis.call('get',KEYS[1])";
    let sha = "fd758d1589d044dd850a6f05d52f2eefd27f033f";
    let unknown = "ffd632c7d33e571e9f24556ebed26c3479a87130";
    assert_eq!(
        error_text(&c.call(&["EVALSHA", sha, "1", "mykey"])),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(c.call(&["EVAL", body, "1", "mykey"]), bulk("myval"));
    assert_eq!(
        c.call(&["EVALSHA", sha, "1", "mykey"]),
        bulk("myval"),
        "EVAL cached it"
    );
    assert_eq!(
        c.call(&["EVALSHA", &sha.to_uppercase(), "1", "mykey"]),
        bulk("myval")
    );
    assert_eq!(
        error_text(&c.call(&["EVALSHA", "NotValidShaSUM", "0"])),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(
        c.call(&["SCRIPT", "EXISTS", sha, unknown]),
        Frame::Array(vec![Frame::Integer(1), Frame::Integer(0)])
    );
    assert_eq!(c.call(&["SCRIPT", "FLUSH"]), Frame::simple("OK"));
    assert_eq!(
        c.call(&["SCRIPT", "EXISTS", sha]),
        Frame::Array(vec![Frame::Integer(0)])
    );
    assert_eq!(
        error_text(&c.call(&["EVALSHA", sha, "1", "mykey"])),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(load(&mut c, body), sha);
    assert_eq!(c.call(&["EVALSHA", sha, "1", "mykey"]), bulk("myval"));
    assert_eq!(c.call(&["SCRIPT", "FLUSH", "ASYNC"]), Frame::simple("OK"));
    assert_eq!(
        error_text(&c.call(&["SCRIPT", "FLUSH", "LATER"])),
        "ERR SCRIPT FLUSH only support SYNC|ASYNC option"
    );
    assert!(error_text(&c.call(&["SCRIPT", "LOAD", "return +"]))
        .starts_with("ERR Error compiling script"));
    assert_eq!(
        error_text(&c.call(&["SCRIPT", "KILL"])),
        "NOTBUSY No scripts in execution right now."
    );
    // FUNCTION FLUSH still answers (clients reset servers with it).
    assert_eq!(c.call(&["FUNCTION", "FLUSH"]), Frame::simple("OK"));
}

#[test]
fn read_only_scripts_refuse_writes() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    c.call(&["SET", "foo", "bar"]);
    assert_eq!(
        c.call(&["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "foo"]),
        bulk("bar")
    );
    let text = error_text(&c.call(&["EVAL_RO", "redis.call('del', KEYS[1])", "1", "foo"]));
    assert!(
        text.starts_with("ERR Write commands are not allowed from read-only scripts. script: "),
        "{text}"
    );
    let sha = load(&mut c, "return redis.call('del', KEYS[1])");
    let text = error_text(&c.call(&["EVALSHA_RO", &sha, "1", "foo"]));
    assert!(
        text.starts_with("ERR Write commands are not allowed"),
        "{text}"
    );
    let text = error_text(&c.call(&[
        "EVAL",
        "#!lua flags=no-writes\nredis.call('del', KEYS[1])",
        "1",
        "foo",
    ]));
    assert!(
        text.starts_with("ERR Write commands are not allowed"),
        "{text}"
    );
    assert_eq!(c.call(&["GET", "foo"]), bulk("bar"), "nothing was deleted");
    assert_eq!(
        error_text(&c.call(&["EVAL", "#!lua flags=no-such\nreturn 1", "0"])),
        "ERR Unexpected flag in script shebang"
    );
}

/// Goal: a script's writes reach the AOF as the commands it ran, wrapped in MULTI/EXEC (never
/// as the EVAL, which a replay could not repeat: it read a random number), and are there
/// after a kill -9. Method: `appendfsync always`, a script of three writes, the increment
/// file read, kill -9, restart, read back.
#[test]
fn a_scripts_writes_reach_the_aof_as_its_commands_and_survive_a_restart() {
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let node = Node::start(&args);
    let mut c = RawClient::connect(node.port);
    let body = "redis.call('set', KEYS[1], tostring(math.random())); redis.call('incr', KEYS[2]); redis.call('rpush', KEYS[3], 'x', 'y'); return redis.call('get', KEYS[1])";
    let Frame::Bulk(random) = c.call(&["EVAL", body, "3", "r", "n", "l"]) else {
        panic!("the script answers its random value");
    };
    let incr = std::fs::read(
        node.dir
            .path()
            .join("appendonlydir/appendonly.aof.1.incr.aof"),
    )
    .unwrap();
    let text = String::from_utf8_lossy(&incr).to_ascii_lowercase();
    assert!(!text.contains("eval"), "{text}");
    let multi = text.find("multi").expect("MULTI");
    let exec = text.find("exec").expect("EXEC");
    for cmd in ["set", "incr", "rpush"] {
        let at = text.find(cmd).unwrap_or_else(|| panic!("{cmd} in {text}"));
        assert!(multi < at && at < exec, "{cmd} inside MULTI/EXEC: {text}");
    }
    // A read-only script adds nothing.
    c.call(&["EVAL", "return redis.call('get', 'r')", "0"]);
    let after = std::fs::read(
        node.dir
            .path()
            .join("appendonlydir/appendonly.aof.1.incr.aof"),
    )
    .unwrap();
    assert_eq!(after.len(), incr.len());

    let node = Node::start_in(node.into_dir(), &args);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["GET", "r"]), Frame::Bulk(random));
    assert_eq!(c.call(&["GET", "n"]), bulk("1"));
    assert_eq!(c.call(&["LRANGE", "l", "0", "-1"]), bulks(&["x", "y"]));
}

/// Goal: a script running past `busy-reply-threshold` makes other clients' commands answer
/// BUSY; SCRIPT KILL stops it while it has not written, and not once it has (UNKILLABLE),
/// when SHUTDOWN NOSAVE is the way out. Method: an endless script on one connection, PING
/// polled on another, with the default single io-thread (the script's thread hands the
/// event loop over at the threshold) and with two.
#[test]
fn busy_scripts_answer_busy_and_script_kill_stops_them() {
    for io_threads in ["1", "2"] {
        let mut node = Node::start(&["--io-threads", io_threads, "--busy-reply-threshold", "50"]);
        let mut runner = RawClient::connect(node.port);
        let mut other = RawClient::connect(node.port);
        runner.send(&["EVAL", "local i = 0 while true do i = i + 1 end", "0"]);
        wait_for_busy(&mut other);
        assert_eq!(other.call(&["SCRIPT", "KILL"]), Frame::simple("OK"));
        let killed = error_text(
            &runner
                .read_within(PATIENCE)
                .expect("the killed script answers"),
        );
        assert!(
            killed.starts_with("ERR Script killed by user with SCRIPT KILL..."),
            "io-threads {io_threads}: {killed}"
        );
        assert_eq!(other.call(&["PING"]), Frame::simple("PONG"));
        assert_eq!(runner.call(&["PING"]), Frame::simple("PONG"));

        // Again on the same node: the event loop handed over for the first script serves on.
        runner.send(&["EVAL", "redis.call('set', 'x', 'y') while true do end", "0"]);
        wait_for_busy(&mut other);
        assert!(error_text(&other.call(&["SCRIPT", "KILL"])).starts_with("UNKILLABLE "));
        other.send(&["SHUTDOWN", "NOSAVE"]);
        assert!(node.wait_exit().success(), "io-threads {io_threads}");
    }
}

/// Goal: a command that arrived while a script ran and waits for the shards it holds is
/// answered BUSY once the script passes `busy-reply-threshold`, instead of waiting for a
/// script that may never end (and holding the io-thread SCRIPT KILL then needs). Method: two
/// io-threads, so that the GET is read (and waits for its shard) before the threshold; an
/// endless script; the GET must answer BUSY before anyone kills the script.
#[test]
fn a_command_waiting_behind_a_busy_script_is_answered_busy() {
    let node = Node::start(&["--io-threads", "2", "--busy-reply-threshold", "400"]);
    let mut runner = RawClient::connect(node.port);
    let mut waiter = RawClient::connect(node.port);
    let mut killer = RawClient::connect(node.port);
    runner.send(&["EVAL", "local i = 0 while true do i = i + 1 end", "0"]);
    // Well within the threshold: the script holds every shard, the GET waits for one.
    std::thread::sleep(Duration::from_millis(100));
    waiter.send(&["GET", "k"]);
    let reply = waiter
        .read_within(PATIENCE)
        .expect("the waiting GET is answered while the script still runs");
    assert_eq!(
        reply,
        Frame::error(
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        )
    );
    assert_eq!(killer.call(&["SCRIPT", "KILL"]), Frame::simple("OK"));
    assert!(
        runner.read_within(PATIENCE).is_some(),
        "the killed script answers"
    );
    assert_eq!(waiter.call(&["GET", "k"]), Frame::NullBulk);
}

fn wait_for_busy(c: &mut RawClient) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let reply = c.call(&["PING"]);
        if reply
            == Frame::error(
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
            )
        {
            return;
        }
        assert_eq!(reply, Frame::simple("PONG"));
        assert!(Instant::now() < deadline, "the script never became busy");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Goal: redis-py's `Lock` (scripts through EVALSHA, EVAL on NOSCRIPT) acquires, extends,
/// reacquires and releases, and its scripts refuse a token that is not the holder's.
#[test]
fn redis_py_lock_works_against_a_node() {
    let node = Node::start(&[]);
    run_redis_lock(node.port, &[]);
}

/// Goal: the same through redis-py's `RedisCluster` against a three-node cluster, where each
/// lock's scripts run on its key's node.
#[test]
fn redis_py_lock_works_against_a_cluster() {
    let nodes = integration::cluster::create_cluster_with("lock", 0, &[]);
    run_redis_lock(nodes[0].port, &["--cluster"]);
}

fn run_redis_lock(port: u16, extra: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/redis_lock.py");
    // python3 and its redis package: scripts/install-deps.sh.
    let (ok, text) = integration::cluster::run(
        std::process::Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .args(extra),
    );
    // Its only output line on stdout, which comes first.
    assert!(ok && text.starts_with("ok\n"), "{text}");
}

/// Goal: a script cannot take more than the Lua state's memory limit (1 GiB), also after
/// the node copied arguments and command replies into Lua with the limit lifted (those
/// copies are bounded by the request and the reply: see `scripting::engine::
/// outside_the_limit`), and the node goes on serving scripts after one hit it.
/// Method: a string doubled past 1 GiB, once alone and once after a `redis.call` whose 10 MB
/// reply entered Lua; both fail, the node's resident memory stays far below what the
/// doubling asks for, and scripts with KEYS, ARGV and calls answer afterwards.
#[test]
fn a_script_past_the_memory_limit_fails_and_scripts_go_on() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let big = "v".repeat(10 * 1024 * 1024);
    assert_eq!(c.call(&["SET", "big", &big]), Frame::Simple("OK".into()));
    let doubling = "local s = 'x' for i = 1, 40 do s = s .. s end return #s";
    let after_a_call =
        "local v = redis.call('GET', KEYS[1]) local s = v for i = 1, 40 do s = s .. s end return #s";
    for (body, keys) in [(doubling, &[][..]), (after_a_call, &["big"][..])] {
        let mut args = vec!["EVAL", body];
        let count = keys.len().to_string();
        args.push(&count);
        args.extend(keys);
        let reply = c.call(&args);
        let Frame::Error(text) = &reply else {
            panic!("a script growing past the limit answered {reply:?}");
        };
        assert!(
            String::from_utf8_lossy(text).contains("not enough memory"),
            "{reply:?}"
        );
    }
    let rss_kib: u64 = std::fs::read_to_string(format!("/proc/{}/status", node.pid()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(rss_kib < 3 * 1024 * 1024, "VmRSS {rss_kib} KiB");
    assert_eq!(
        c.call(&[
            "EVAL",
            "return {KEYS[1], ARGV[1], redis.call('STRLEN', KEYS[1])}",
            "1",
            "big",
            "arg",
        ]),
        Frame::Array(vec![
            bulk("big"),
            bulk("arg"),
            Frame::Integer(10 * 1024 * 1024)
        ])
    );
    assert_eq!(c.call(&["PING"]), Frame::Simple("PONG".into()));
}

//! Server and introspection commands (DBSIZE FLUSH* TIME SHUTDOWN CONFIG INFO CLIENT
//! COMMAND SLOWLOG) and the limits they configure (maxclients, timeout, maxmemory), against
//! real node processes.

use integration::{cmd, Node};
use redis::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn err_text(r: redis::RedisResult<Value>) -> String {
    let e = r.expect_err("an error reply");
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => e.to_string(),
    }
}

fn int(c: &mut redis::Connection, args: &[&str]) -> i64 {
    match cmd(c, args).unwrap() {
        Value::Int(n) => n,
        other => panic!("{args:?}: expected an integer, got {other:?}"),
    }
}

fn text(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut q = redis::cmd(args[0]);
    for a in &args[1..] {
        q.arg(*a);
    }
    q.query(c).unwrap()
}

fn info(c: &mut redis::Connection, section: &str) -> redis::InfoDict {
    redis::cmd("INFO").arg(section).query(c).unwrap()
}

/// A raw connection that sent PING and got PONG (so the node registered it).
fn raw_client(node: &Node) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"PING\r\n").unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    assert_eq!(line, "+PONG\r\n");
    s
}

#[test]
fn dbsize_flush_and_time() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(int(&mut c, &["DBSIZE"]), 0);
    for i in 0..10 {
        cmd(&mut c, &["SET", &format!("k{i}"), "v"]).unwrap();
    }
    assert_eq!(node.cli(&["--no-raw", "DBSIZE"]), "(integer) 10");
    assert_eq!(
        err_text(cmd(&mut c, &["FLUSHDB", "foo"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_text(cmd(&mut c, &["FLUSHALL", "SYNC", "ASYNC"])),
        "ERR syntax error"
    );
    assert_eq!(cmd(&mut c, &["FLUSHDB", "ASYNC"]).unwrap(), Value::Okay);
    assert_eq!(int(&mut c, &["DBSIZE"]), 0);
    cmd(&mut c, &["SET", "k", "v"]).unwrap();
    assert_eq!(cmd(&mut c, &["FLUSHALL", "sync"]).unwrap(), Value::Okay);
    assert_eq!(int(&mut c, &["DBSIZE"]), 0);

    let (secs, micros): (String, String) = redis::cmd("TIME").query(&mut c).unwrap();
    let secs: u64 = secs.parse().unwrap();
    let micros: u64 = micros.parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) <= 5 && micros < 1_000_000);
}

#[test]
fn info_sections_parse() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let all: redis::InfoDict = redis::cmd("INFO").query(&mut c).unwrap();
    assert_eq!(
        all.get::<String>("redis_version").as_deref(),
        Some("7.0.15")
    );
    assert_eq!(
        all.get::<String>("redis_mode").as_deref(),
        Some("standalone")
    );
    assert_eq!(all.get::<String>("role").as_deref(), Some("master"));
    assert_eq!(all.get::<u16>("tcp_port"), Some(node.port));
    assert_eq!(all.get::<u32>("process_id"), Some(node.pid()));
    assert_eq!(all.get::<u64>("connected_clients"), Some(1));
    assert_eq!(all.get::<u64>("maxclients"), Some(10000));
    assert_eq!(all.get::<u64>("maxmemory"), Some(0));
    assert_eq!(
        all.get::<String>("maxmemory_policy").as_deref(),
        Some("noeviction")
    );
    assert!(all.get::<u64>("used_memory").unwrap() > 0);
    assert!(all.get::<String>("used_memory_human").is_some());
    assert!(all.get::<f64>("used_cpu_user").is_some());
    assert_eq!(all.get::<u64>("loading"), Some(0));
    assert_eq!(all.get::<u64>("master_repl_offset"), Some(0));
    assert_eq!(all.get::<u64>("cluster_enabled"), Some(0));
    assert_eq!(all.get::<String>("run_id").map(|s| s.len()), Some(40));
    // No keys, no db0 line.
    assert!(all.get::<String>("db0").is_none());

    cmd(&mut c, &["SET", "a", "1"]).unwrap();
    cmd(&mut c, &["SET", "b", "1", "EX", "100"]).unwrap();
    cmd(&mut c, &["GET", "a"]).unwrap();
    cmd(&mut c, &["GET", "nokey"]).unwrap();
    cmd(&mut c, &["NOSUCHCOMMAND"]).ok();
    let keyspace = text(&mut c, &["INFO", "keyspace"]);
    assert_eq!(keyspace, "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0\r\n");
    let stats = info(&mut c, "stats");
    assert!(stats.get::<u64>("total_commands_processed").unwrap() >= 5);
    assert!(stats.get::<u64>("total_connections_received").unwrap() >= 1);
    assert_eq!(stats.get::<u64>("keyspace_hits"), Some(1));
    assert_eq!(stats.get::<u64>("keyspace_misses"), Some(1));
    assert_eq!(stats.get::<u64>("total_error_replies"), Some(1));
    assert!(stats.get::<u64>("used_memory").is_none(), "stats only");
    assert_eq!(
        info(&mut c, "persistence").get::<u64>("rdb_changes_since_last_save"),
        Some(2)
    );

    // Several sections, in Redis's order, separated by a blank line; unknown ones are empty.
    let two = text(&mut c, &["INFO", "keyspace", "CPU"]);
    assert!(two.starts_with("# CPU\r\nused_cpu_sys:"), "{two}");
    assert!(two.contains("\r\n\r\n# Keyspace\r\n"), "{two}");
    assert_eq!(text(&mut c, &["INFO", "nosuch"]), "");
    let default = text(&mut c, &["INFO"]);
    let headers: Vec<&str> = default.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        headers,
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Modules",
            "# Errorstats",
            "# Cluster",
            "# Keyspace"
        ]
    );
    let everything = text(&mut c, &["INFO", "everything"]);
    assert!(everything.contains("# Commandstats\r\n"));
    // RESP3 answers INFO as verbatim text; redis-cli shows the text.
    let resp3 = node.cli(&["-3", "INFO", "server"]);
    assert!(resp3.starts_with("# Server"), "{resp3}");
}

#[test]
fn config_get_set_resetstat() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, ["maxmemory", "0"]);
    assert_eq!(
        cmd(
            &mut c,
            &["CONFIG", "SET", "maxmemory", "10mb", "timeout", "30"]
        )
        .unwrap(),
        Value::Okay
    );
    let got: std::collections::HashMap<String, String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .arg("time*")
        .arg("port")
        .query(&mut c)
        .unwrap();
    assert_eq!(got.get("maxmemory").map(String::as_str), Some("10485760"));
    assert_eq!(got.get("timeout").map(String::as_str), Some("30"));
    assert_eq!(got.get("port"), Some(&node.port.to_string()));
    assert_eq!(got.len(), 3);
    // A plain name is echoed as asked.
    assert_eq!(
        node.cli(&["CONFIG", "GET", "MAXMEMORY"]),
        "MAXMEMORY\n10485760"
    );
    assert_eq!(
        node.cli(&["--no-raw", "CONFIG", "GET", "nosuch"]),
        "(empty array)"
    );
    // A glob matches aliases too, each name listed once, as Redis 7.0 does.
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*of")
        .arg("replicaof")
        .arg("slave*")
        .query(&mut c)
        .unwrap();
    let mut names: Vec<&str> = got.iter().step_by(2).map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["replicaof", "slave-serve-stale-data", "slaveof"],
        "{got:?}"
    );

    // All or nothing: a bad value leaves every parameter as it was.
    assert_eq!(
        err_text(cmd(
            &mut c,
            &[
                "CONFIG",
                "SET",
                "maxmemory",
                "20mb",
                "maxmemory-policy",
                "bad"
            ]
        ))
        .split(" - ")
        .next(),
        Some("ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy')")
    );
    assert_eq!(
        node.cli(&["CONFIG", "GET", "maxmemory"]),
        "maxmemory\n10485760"
    );
    for (args, expected) in [
        (
            vec!["CONFIG", "SET", "foo", "bar"],
            "ERR Unknown option or number of arguments for CONFIG SET - 'foo'",
        ),
        (
            vec!["CONFIG", "SET", "maxmemory", "abc"],
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value",
        ),
        (
            vec!["CONFIG", "SET", "hz", "20", "hz", "30"],
            "ERR CONFIG SET failed (possibly related to argument 'hz') - duplicate parameter",
        ),
        (
            vec!["CONFIG", "SET", "port", "1234"],
            "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config",
        ),
        // A value the parameter would refuse at start too: still Redis's immutable error.
        (
            vec!["CONFIG", "SET", "daemonize", "yes"],
            "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config",
        ),
        (vec!["CONFIG", "SET", "hz", "20", "x"], "ERR syntax error"),
        (
            vec!["CONFIG", "SET", "hz"],
            "ERR wrong number of arguments for 'config|set' command",
        ),
        (
            vec!["CONFIG", "GET"],
            "ERR wrong number of arguments for 'config|get' command",
        ),
        (
            vec!["CONFIG", "NOPE"],
            "ERR unknown subcommand 'NOPE'. Try CONFIG HELP.",
        ),
        (
            vec!["CONFIG", "REWRITE"],
            "ERR The server is running without a config file",
        ),
    ] {
        assert_eq!(err_text(cmd(&mut c, &args)), expected, "{args:?}");
    }
    // RESETSTAT zeroes the INFO stats counters.
    cmd(&mut c, &["GET", "x"]).unwrap();
    assert!(
        info(&mut c, "stats")
            .get::<u64>("total_commands_processed")
            .unwrap()
            > 0
    );
    assert_eq!(cmd(&mut c, &["CONFIG", "RESETSTAT"]).unwrap(), Value::Okay);
    assert_eq!(info(&mut c, "stats").get::<u64>("keyspace_misses"), Some(0));
    let help = node.cli(&["CONFIG", "HELP"]);
    assert!(
        help.starts_with(
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\nGET <pattern>"
        ),
        "{help}"
    );
}

#[test]
fn config_rewrite_updates_the_file() {
    let original =
        "# a node for the rewrite test\n\n# memory\nmaxmemory 10mb\nmaxmemory 20mb\nhz 10\n";
    let node = Node::start_with_config(original, &[]);
    let mut c = node.client();
    let file: String = {
        let got: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory")
            .query(&mut c)
            .unwrap();
        assert_eq!(
            got[1],
            (20u64 << 20).to_string(),
            "the last line wins at load"
        );
        let info = info(&mut c, "server");
        info.get("config_file").unwrap()
    };
    assert_eq!(
        std::path::Path::new(&file),
        node.config_path().canonicalize().unwrap()
    );
    cmd(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "30mb",
            "timeout",
            "7",
            "hz",
            "15",
        ],
    )
    .unwrap();
    assert_eq!(cmd(&mut c, &["CONFIG", "REWRITE"]).unwrap(), Value::Okay);
    let text = std::fs::read_to_string(node.config_path()).unwrap();
    assert!(
        text.starts_with("# a node for the rewrite test\n\n# memory\nmaxmemory 30mb\nhz 15\n"),
        "{text}"
    );
    assert_eq!(text.matches("maxmemory ").count(), 1, "{text}");
    let tail = text
        .split("# Generated by CONFIG REWRITE\n")
        .nth(1)
        .expect("signature");
    assert!(tail.contains("timeout 7\n"), "{text}");
    assert!(tail.contains(&format!("port {}\n", node.port)), "{text}");

    // A node started from the rewritten file has the rewritten values.
    let again = Node::start_with_config(&text, &[]);
    let mut c2 = again.client();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .arg("timeout")
        .arg("hz")
        .query(&mut c2)
        .unwrap();
    assert_eq!(got, ["maxmemory", "31457280", "timeout", "7", "hz", "15"]);
}

#[test]
fn shutdown_stops_the_process() {
    let mut node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(
        err_text(cmd(&mut c, &["SHUTDOWN", "ABORT"])),
        "ERR No shutdown in progress."
    );
    assert_eq!(
        err_text(cmd(&mut c, &["SHUTDOWN", "NOSAVE", "SAVE"])),
        "ERR syntax error"
    );
    // SHUTDOWN answers nothing: the connection just closes.
    assert!(cmd(&mut c, &["SHUTDOWN", "NOSAVE"]).is_err());
    let status = node.wait_exit();
    assert!(status.success(), "{status:?}");
}

#[test]
fn sigterm_stops_gracefully() {
    let mut node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SET", "k", "v"]).unwrap();
    let status = node.signal_and_wait("TERM");
    assert!(status.success(), "{status:?}");
    assert!(node.log().contains("SIGTERM"), "{}", node.log());
}

#[test]
fn client_commands() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let mut other = node.client();
    let my_id = int(&mut c, &["CLIENT", "ID"]);
    let other_id = int(&mut other, &["CLIENT", "ID"]);
    assert_ne!(my_id, other_id);
    assert_eq!(cmd(&mut c, &["CLIENT", "GETNAME"]).unwrap(), Value::Nil);
    assert_eq!(
        cmd(&mut c, &["CLIENT", "SETNAME", "worker-1"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        cmd(&mut c, &["CLIENT", "GETNAME"]).unwrap(),
        Value::BulkString(b"worker-1".to_vec())
    );
    assert_eq!(
        err_text(cmd(&mut c, &["CLIENT", "SETNAME", "a b"])),
        "ERR Client names cannot contain spaces, newlines or special characters."
    );
    assert_eq!(
        cmd(&mut c, &["CLIENT", "SETINFO", "LIB-NAME", "redis-rs"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        err_text(cmd(&mut c, &["CLIENT", "SETINFO", "nope", "x"])),
        "ERR Unrecognized option 'nope'"
    );

    let list = text(&mut c, &["CLIENT", "LIST"]);
    let lines: Vec<&str> = list.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("id={other_id} "))),
        "{list}"
    );
    let mine = lines
        .iter()
        .find(|l| l.starts_with(&format!("id={my_id} ")))
        .expect("own line");
    let fields: Vec<&str> = mine
        .split(' ')
        .map(|f| f.split('=').next().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "id",
            "addr",
            "laddr",
            "fd",
            "name",
            "age",
            "idle",
            "flags",
            "db",
            "sub",
            "psub",
            "ssub",
            "multi",
            "qbuf",
            "qbuf-free",
            "argv-mem",
            "multi-mem",
            "rbs",
            "rbp",
            "obl",
            "oll",
            "omem",
            "tot-mem",
            "events",
            "cmd",
            "user",
            "redir",
            "resp"
        ]
    );
    assert!(mine.contains(" name=worker-1 "), "{mine}");
    assert!(
        mine.contains(&format!(" laddr=127.0.0.1:{} ", node.port)),
        "{mine}"
    );
    assert!(mine.contains(" flags=N db=0 "), "{mine}");
    assert!(
        mine.ends_with(" cmd=client|list user=default redir=-1 resp=2"),
        "{mine}"
    );
    let info = text(&mut c, &["CLIENT", "INFO"]);
    assert!(
        info.starts_with(&format!("id={my_id} ")) && info.ends_with('\n'),
        "{info}"
    );
    assert_eq!(text(&mut c, &["CLIENT", "LIST", "TYPE", "pubsub"]), "");
    assert!(
        text(&mut c, &["CLIENT", "LIST", "TYPE", "normal"])
            .lines()
            .count()
            >= 2
    );
    let by_id = text(
        &mut c,
        &["CLIENT", "LIST", "ID", &other_id.to_string(), "999"],
    );
    assert!(by_id.starts_with(&format!("id={other_id} ")) && by_id.lines().count() == 1);
    assert_eq!(
        err_text(cmd(&mut c, &["CLIENT", "LIST", "TYPE", "foo"])),
        "ERR Unknown client type 'foo'"
    );

    // Kill by id (new form, counted) and by address (old form).
    assert_eq!(
        int(&mut c, &["CLIENT", "KILL", "ID", &other_id.to_string()]),
        1
    );
    assert!(
        cmd(&mut other, &["PING"]).is_err(),
        "killed connection still answers"
    );
    assert_eq!(
        err_text(cmd(&mut c, &["CLIENT", "KILL", "127.0.0.1:1"])),
        "ERR No such client"
    );
    let mut third = node.client();
    let third_line = text(&mut third, &["CLIENT", "INFO"]);
    let addr = third_line
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    assert_eq!(
        cmd(&mut c, &["CLIENT", "KILL", &addr]).unwrap(),
        Value::Okay
    );
    assert!(cmd(&mut third, &["PING"]).is_err());
    // Once the killed connections are gone, SKIPME yes (the default) spares the caller.
    let deadline = Instant::now() + Duration::from_secs(10);
    while text(&mut c, &["CLIENT", "LIST"]).lines().count() > 1 {
        assert!(Instant::now() < deadline, "killed clients linger");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(int(&mut c, &["CLIENT", "KILL", "TYPE", "normal"]), 0);
    assert_eq!(
        err_text(cmd(&mut c, &["CLIENT", "KILL", "ID", "0"])),
        "ERR client-id should be greater than 0"
    );
    assert_eq!(
        err_text(cmd(&mut c, &["CLIENT", "KILL", "USER", "bob"])),
        "ERR No such user 'bob'"
    );
    assert_eq!(
        err_text(cmd(&mut c, &["CLIENT", "KILL", "FOO", "bar"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_text(cmd(&mut c, &["CLIENT", "NOPE"])),
        "ERR unknown subcommand 'NOPE'. Try CLIENT HELP."
    );
    assert_eq!(int(&mut c, &["CLIENT", "GETREDIR"]), -1);
    assert_eq!(
        cmd(&mut c, &["CLIENT", "NO-EVICT", "on"]).unwrap(),
        Value::Okay
    );
    // Killing oneself (SKIPME no) answers, then closes.
    assert_eq!(
        int(
            &mut c,
            &["CLIENT", "KILL", "ID", &my_id.to_string(), "SKIPME", "no"]
        ),
        1
    );
    assert!(cmd(&mut c, &["PING"]).is_err());
}

#[test]
fn maxclients_rejects_extra_connections() {
    let node = Node::start(&["--maxclients", "2"]);
    let _first = raw_client(&node);
    let _second = {
        // The harness's readiness probe may take a moment to leave the registry.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(b"PING\r\n").unwrap();
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).unwrap();
            if line == "+PONG\r\n" {
                break s;
            }
            assert!(Instant::now() < deadline, "second client refused: {line}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let third = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(&third).read_line(&mut line).unwrap();
    assert_eq!(line, "-ERR max number of clients reached\r\n");
    drop(_first);
    let mut c = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = redis::Client::open(node.url()).unwrap().get_connection() {
                if cmd(&mut c, &["PING"]).is_ok() {
                    break c;
                }
            }
            assert!(Instant::now() < deadline, "no room after a client left");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert!(
        info(&mut c, "stats")
            .get::<u64>("rejected_connections")
            .unwrap()
            >= 1
    );
}

/// `io-busy-poll-us`: after a read the single event loop polls, then sleeps once idle (INFO
/// stats counts the sleeps); set to 0, reads no longer wake the poller; out-of-range values are
/// refused; with several io-threads nothing polls.
#[test]
fn the_event_loop_polls_after_reads_then_sleeps() {
    fn sleeps(c: &mut redis::Connection) -> u64 {
        info(c, "stats").get("io_busy_poll_sleeps").unwrap()
    }
    let node = Node::start(&["--io-threads", "1", "--io-busy-poll-us", "200"]);
    let mut c = node.client();
    for _ in 0..3 {
        // The INFO request woke the poller; 200 us after it, the poller sleeps again.
        let before = sleeps(&mut c);
        std::thread::sleep(Duration::from_millis(50));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = sleeps(&mut c);
            if now > before {
                break;
            }
            assert!(Instant::now() < deadline, "the poller never slept again");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // The count is the poller's thread CPU time, not wall time: on a crowded machine a
    // 200 us window can hold less than 200 us of it, so only its presence is asserted.
    let polled: u64 = info(&mut c, "stats").get("io_busy_poll_usec").unwrap();
    assert!(polled > 0, "no polling counted after three 200 us windows");
    for bad in ["10001", "-1", "x"] {
        let e = err_text(cmd(&mut c, &["CONFIG", "SET", "io-busy-poll-us", bad]));
        assert!(e.contains("io-busy-poll-us"), "{bad}: {e}");
    }
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "io-busy-poll-us", "0"]).unwrap(),
        Value::Okay
    );
    std::thread::sleep(Duration::from_millis(50));
    let off = sleeps(&mut c);
    for _ in 0..20 {
        assert_eq!(text(&mut c, &["PING"]), "PONG");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        sleeps(&mut c),
        off,
        "a read woke the poller with polling off"
    );

    let threaded = Node::start(&["--io-threads", "2"]);
    let mut c = threaded.client();
    assert_eq!(text(&mut c, &["PING"]), "PONG");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(sleeps(&mut c), 0);
}

/// The kernel's timer state (`/proc/net/tcp` "tr": 2 is the keepalive timer) of the node's
/// side of the connection whose client end is `client`.
fn server_side_timer(node: &Node, client: &TcpStream) -> String {
    let client_port = client.local_addr().unwrap().port();
    let want = (format!(":{:04X}", node.port), format!(":{client_port:04X}"));
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f[1].ends_with(&want.0) && f[2].ends_with(&want.1) {
            return f[5].split(':').next().unwrap().to_string();
        }
    }
    panic!("no server-side socket for client port {client_port} in\n{table}");
}

/// `tcp-keepalive` arms the kernel's keepalive timer on each client socket (default 300 s,
/// as Redis); 0 leaves it off.
#[test]
fn client_sockets_get_tcp_keepalive() {
    let node = Node::start(&[]);
    let client = raw_client(&node);
    assert_eq!(server_side_timer(&node, &client), "02");
    let off = Node::start(&["--tcp-keepalive", "0"]);
    let client = raw_client(&off);
    assert_eq!(server_side_timer(&off, &client), "00");
}

/// CONFIG SET loglevel takes effect at once: a debug line (a client closed for a protocol
/// error) is absent at the default level and written after `loglevel debug`.
#[test]
fn config_set_loglevel_changes_what_is_logged() {
    let node = Node::start(&[]);
    let protocol_error = || {
        let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"*abc\r\n").unwrap();
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        assert!(reply.starts_with(b"-ERR Protocol error"), "{reply:?}");
    };
    protocol_error();
    assert!(
        !node.log().contains("protocol error; closing"),
        "{}",
        node.log()
    );
    assert_eq!(node.cli(&["CONFIG", "SET", "loglevel", "debug"]), "OK");
    protocol_error();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !node.log().contains("protocol error; closing") {
        assert!(Instant::now() < deadline, "{}", node.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let node = Node::start(&["--timeout", "1"]);
    let mut idle = raw_client(&node);
    let started = Instant::now();
    let mut buf = [0u8; 64];
    // The node closes the connection: read returns 0 bytes (or a reset) well within the
    // read timeout of raw_client.
    match idle.read(&mut buf) {
        Ok(0) | Err(_) => {}
        Ok(n) => panic!("unexpected bytes: {:?}", &buf[..n]),
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(9),
        "{waited:?}"
    );
}

#[test]
fn maxmemory_noeviction_refuses_and_lru_evicts() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let used: u64 = info(&mut c, "memory").get("used_memory").unwrap();
    let limit = used + (1 << 20);
    cmd(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]).unwrap();
    let value = "x".repeat(10_000);
    let mut refused = None;
    for i in 0..1000 {
        if let Err(e) = cmd(&mut c, &["SET", &format!("k{i}"), &value]) {
            refused = Some(e);
            break;
        }
    }
    let e = refused.expect("writes past maxmemory must be refused under noeviction");
    assert_eq!(
        (e.code(), e.detail()),
        (
            Some("OOM"),
            Some("command not allowed when used memory > 'maxmemory'.")
        ),
        "{e}"
    );
    assert_eq!(
        node.cli(&["SET", "one", "more"]),
        "OOM command not allowed when used memory > 'maxmemory'."
    );
    // Reads and deletes still work.
    assert!(cmd(&mut c, &["GET", "k0"]).is_ok());

    cmd(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    )
    .unwrap();
    for i in 1000..1300 {
        cmd(&mut c, &["SET", &format!("k{i}"), &value]).unwrap();
    }
    let stats = info(&mut c, "stats");
    assert!(stats.get::<u64>("evicted_keys").unwrap() > 0);
    assert!(int(&mut c, &["DBSIZE"]) < 300);
    let memory = info(&mut c, "memory");
    assert_eq!(
        memory.get::<String>("maxmemory_policy").as_deref(),
        Some("allkeys-lru")
    );
}

/// Goal: a command that takes the node over `maxmemory` (a SETBIT far out: 200 kB from a
/// small request) makes the very next command evict, even when both arrive in one pipeline
/// (the cached allocator reading is refreshed after a large allocation, not only every
/// millisecond): Redis's "Tracking invalidation message of eviction keys should be before
/// response" relies on it.
#[test]
fn the_command_after_one_that_grew_memory_evicts() {
    let node = Node::start(&["--maxmemory-policy", "volatile-random"]);
    let mut c = node.client();
    for round in 0..5 {
        cmd(&mut c, &["CONFIG", "SET", "maxmemory", "0"]).unwrap();
        cmd(&mut c, &["FLUSHALL"]).unwrap();
        let used: u64 = info(&mut c, "memory").get("used_memory").unwrap();
        let limit = (used + 100 * 1024).to_string();
        cmd(&mut c, &["CONFIG", "SET", "maxmemory", &limit]).unwrap();
        cmd(&mut c, &["SETEX", "volatile-key", "10000", "x"]).unwrap();
        let (_, exists): (i64, i64) = redis::pipe()
            .cmd("SETBIT")
            .arg("big-key")
            .arg(1_600_000)
            .arg(0)
            .cmd("EXISTS")
            .arg("volatile-key")
            .query(&mut c)
            .unwrap();
        assert_eq!(
            exists, 0,
            "round {round}: not evicted before the next command"
        );
    }
}

/// The volatile-* policies evict only keys with a TTL, and refuse writes with Redis's OOM
/// error once none is left; allkeys-random evicts keys without one too.
#[test]
fn volatile_policies_evict_only_keys_with_a_ttl() {
    let value = "x".repeat(10_000);
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let node = Node::start(&["--maxmemory-policy", policy]);
        let mut c = node.client();
        let used: u64 = info(&mut c, "memory").get("used_memory").unwrap();
        let limit = (used + (3 << 20)).to_string();
        cmd(&mut c, &["CONFIG", "SET", "maxmemory", &limit]).unwrap();
        for i in 0..100 {
            let ttl = (1000 + i).to_string();
            cmd(&mut c, &["SET", &format!("t{i}"), &value, "EX", &ttl]).unwrap();
        }
        let mut written = 0;
        let refused = loop {
            assert!(written < 1000, "{policy}: never refused");
            match cmd(&mut c, &["SET", &format!("p{written}"), &value]) {
                Ok(_) => written += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(refused.code(), Some("OOM"), "{policy}: {refused}");
        assert!(written > 100, "{policy}: only {written} written");
        let persistent: Vec<String> = (0..written).map(|i| format!("p{i}")).collect();
        let mut exists = vec!["EXISTS"];
        exists.extend(persistent.iter().map(String::as_str));
        assert_eq!(int(&mut c, &exists), written as i64, "{policy}");
        let volatile: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
        let mut exists = vec!["EXISTS"];
        exists.extend(volatile.iter().map(String::as_str));
        assert_eq!(int(&mut c, &exists), 0, "{policy}: keys with a TTL left");
        assert!(info(&mut c, "stats").get::<u64>("evicted_keys").unwrap() >= 100);
    }

    let node = Node::start(&["--maxmemory-policy", "allkeys-random"]);
    let mut c = node.client();
    let used: u64 = info(&mut c, "memory").get("used_memory").unwrap();
    let limit = (used + (1 << 20)).to_string();
    cmd(&mut c, &["CONFIG", "SET", "maxmemory", &limit]).unwrap();
    for i in 0..300 {
        cmd(&mut c, &["SET", &format!("p{i}"), &value]).unwrap();
    }
    assert!(info(&mut c, "stats").get::<u64>("evicted_keys").unwrap() > 0);
    assert!(int(&mut c, &["DBSIZE"]) < 300);
}

#[test]
fn slowlog_records_and_resets() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["CLIENT", "SETNAME", "slowpoke"]).unwrap();
    cmd(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]).unwrap();
    cmd(&mut c, &["SET", "slow", "value"]).unwrap();
    cmd(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]).unwrap();
    assert!(int(&mut c, &["SLOWLOG", "LEN"]) >= 2);
    let entries: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(&mut c)
        .unwrap();
    let set_entry = entries
        .iter()
        .find_map(|e| match e {
            Value::Array(fields)
                if fields.get(3)
                    == Some(&Value::Array(vec![
                        Value::BulkString(b"SET".to_vec()),
                        Value::BulkString(b"slow".to_vec()),
                        Value::BulkString(b"value".to_vec()),
                    ])) =>
            {
                Some(fields.clone())
            }
            _ => None,
        })
        .expect("the SET is logged");
    assert_eq!(set_entry.len(), 6);
    assert!(matches!(set_entry[0], Value::Int(_)));
    assert!(matches!(set_entry[1], Value::Int(t) if t > 1_600_000_000));
    assert!(matches!(set_entry[2], Value::Int(us) if us >= 0));
    assert!(matches!(&set_entry[4], Value::BulkString(peer) if peer.starts_with(b"127.0.0.1:")));
    assert_eq!(set_entry[5], Value::BulkString(b"slowpoke".to_vec()));
    let one: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(
        err_text(cmd(&mut c, &["SLOWLOG", "GET", "-2"])),
        "ERR count should be greater than or equal to -1"
    );
    assert_eq!(cmd(&mut c, &["SLOWLOG", "RESET"]).unwrap(), Value::Okay);
    assert_eq!(int(&mut c, &["SLOWLOG", "LEN"]), 0);
    assert!(node
        .cli(&["SLOWLOG", "HELP"])
        .starts_with("SLOWLOG <subcommand>"));
}

#[test]
fn command_introspection() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let count = int(&mut c, &["COMMAND", "COUNT"]);
    assert!(count > 40, "{count}");
    let all: Vec<Value> = redis::cmd("COMMAND").query(&mut c).unwrap();
    assert_eq!(all.len() as i64, count);
    // COMMAND INFO GET exactly as redis-server 7.0 prints it.
    assert_eq!(
        node.cli(&["--no-raw", "COMMAND", "INFO", "get"]),
        r#"1)  1) "get"
    2) (integer) 2
    3) 1) readonly
       2) fast
    4) (integer) 1
    5) (integer) 1
    6) (integer) 1
    7) 1) @read
       2) @string
       3) @fast
    8) (empty array)
    9) 1) 1) "flags"
          2) 1) RO
             2) access
          3) "begin_search"
          4) 1) "type"
             2) "index"
             3) "spec"
             4) 1) "index"
                2) (integer) 1
          5) "find_keys"
          6) 1) "type"
             2) "range"
             3) "spec"
             4) 1) "lastkey"
                2) (integer) 0
                3) "keystep"
                4) (integer) 1
                5) "limit"
                6) (integer) 0
   10) (empty array)"#
    );
    let config: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("config")
        .arg("nosuch")
        .query(&mut c)
        .unwrap();
    assert_eq!(config.len(), 2);
    assert_eq!(config[1], Value::Nil);
    match &config[0] {
        Value::Array(f) => {
            assert_eq!(f[1], Value::Int(-2));
            assert!(matches!(&f[9], Value::Array(subs) if subs.len() == 5));
        }
        other => panic!("{other:?}"),
    }
    let docs: std::collections::HashMap<String, Value> = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("expire")
        .arg("nosuch")
        .query(&mut c)
        .unwrap();
    assert_eq!(docs.len(), 1);
    let expire_docs = format!("{:?}", docs["expire"]);
    assert!(
        expire_docs.contains("generic") && expire_docs.contains("1.0.0"),
        "{expire_docs}"
    );

    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("MSET")
        .arg("a")
        .arg("1")
        .arg("b")
        .arg("2")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["a", "b"]);
    for (args, expected) in [
        (
            vec!["COMMAND", "GETKEYS", "nosuch", "a"],
            "ERR Invalid command specified",
        ),
        (
            vec!["COMMAND", "GETKEYS", "config", "get", "x"],
            "ERR The command has no key arguments",
        ),
        (
            vec!["COMMAND", "GETKEYS", "get", "a", "b"],
            "ERR Invalid number of arguments specified for command",
        ),
        (
            vec!["COMMAND", "GETKEYS", "get"],
            "ERR wrong number of arguments for 'command|getkeys' command",
        ),
        (
            vec!["COMMAND", "LIST", "FILTERBY", "foo", "x"],
            "ERR syntax error",
        ),
    ] {
        assert_eq!(err_text(cmd(&mut c, &args)), expected, "{args:?}");
    }
    let with_flags = node.cli(&["--no-raw", "COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v"]);
    // Redis 7.0: SET overwrites its key without reading it (OW), unless GET is given.
    assert_eq!(with_flags, "1) 1) \"k\"\n   2) 1) OW\n      2) update");

    let mut configs: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("PATTERN")
        .arg("config*")
        .query(&mut c)
        .unwrap();
    configs.sort();
    assert_eq!(
        configs,
        [
            "config",
            "config|get",
            "config|help",
            "config|resetstat",
            "config|rewrite",
            "config|set"
        ]
    );
    let keyspace: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("ACLCAT")
        .arg("keyspace")
        .query(&mut c)
        .unwrap();
    assert!(keyspace.contains(&"scan".to_string()) && !keyspace.contains(&"get".to_string()));
    let none: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("MODULE")
        .arg("x")
        .query(&mut c)
        .unwrap();
    assert!(none.is_empty());
    let list: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut c).unwrap();
    assert!(list.len() as i64 > count && list.contains(&"client|kill".to_string()));
    assert!(node
        .cli(&["COMMAND", "HELP"])
        .starts_with("COMMAND <subcommand>"));
}

/// INFO errorstats counts error replies by code as redis-server 7 does (same commands, same
/// section), and CONFIG RESETSTAT clears it.
#[test]
fn errorstats_count_error_replies_by_code_as_redis() {
    fn errorstats(cli: &dyn Fn(&[&str]) -> String) -> Vec<String> {
        for args in [
            &["SET", "k", "v"][..],
            &["LPUSH", "k", "x"],
            &["NOSUCH"],
            &["GET"],
            &["INCR", "k"],
            &["LPUSH", "k", "y"],
        ] {
            cli(args);
        }
        cli(&["INFO", "errorstats"])
            .lines()
            .filter(|l| l.starts_with("errorstat_"))
            .map(|l| l.trim().to_string())
            .collect()
    }
    let node = Node::start(&[]);
    let redis = integration::reference::RedisServer::start(&[]);
    let ours = errorstats(&|a| node.cli(a));
    let theirs = errorstats(&|a| redis.cli(a));
    assert_eq!(ours, theirs);
    assert_eq!(
        ours,
        ["errorstat_ERR:count=3", "errorstat_WRONGTYPE:count=2"]
    );
    assert_eq!(node.cli(&["CONFIG", "RESETSTAT"]), "OK");
    assert!(!node.cli(&["INFO", "errorstats"]).contains("errorstat_"));
}

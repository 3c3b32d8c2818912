//! The append-only file against real node processes: acknowledged writes survive kill -9
//! under `appendfsync always`, BGREWRITEAOF under writes, damaged and truncated files at
//! start, and turning the AOF on at run time.

use integration::cluster::info_field;
use integration::{cmd, Node};
use redis::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Generous bound for anything asynchronous (a rewrite finishing).
const PATIENCE: Duration = Duration::from_secs(60);
/// Kill -9 trials in the default run; `AOF_KILL_TRIALS` sets another count (a soak: 20+).
const DEFAULT_KILL_TRIALS: usize = 5;
const ALWAYS: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];

fn aof_dir(dir: &Path) -> PathBuf {
    dir.join("appendonlydir")
}

/// The AOF folder's file names, sorted.
fn aof_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(aof_dir(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn manifest(dir: &Path) -> String {
    std::fs::read_to_string(aof_dir(dir).join("appendonly.aof.manifest")).unwrap()
}

/// Waits until INFO says no rewrite runs and the AOF is on.
fn wait_for_rewrite(node: &Node) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let running = info_field(node, "aof_rewrite_in_progress");
        if running == "0" && info_field(node, "aof_enabled") == "1" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "rewrite still running; {}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A number from the clock's nanoseconds, for kill times that differ between trials.
fn jitter(below: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    nanos % below
}

/// What one writer saw acknowledged.
#[derive(Default)]
struct Acked {
    /// The last value each counter's INCR returned.
    counters: Vec<i64>,
    /// Keys whose SET was answered OK.
    keys: Vec<String>,
}

const COUNTERS: usize = 4;

/// INCRs a few counters and SETs unique keys until the connection fails (the node is
/// killed) or `stop` is set; records what was answered, and counts each answered SET in
/// `answered` (shared by the writers of a trial).
fn write_until_gone(
    url: String,
    tag: String,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
) -> Acked {
    let mut acked = Acked {
        counters: vec![0; COUNTERS],
        keys: Vec::new(),
    };
    let Ok(mut c) = redis::Client::open(url).and_then(|c| c.get_connection()) else {
        return acked;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let counter = format!("counter:{}", i % COUNTERS);
        match redis::cmd("INCR").arg(&counter).query::<i64>(&mut c) {
            Ok(v) => acked.counters[i % COUNTERS] = v,
            Err(_) => break,
        }
        let key = format!("key:{tag}:{i}");
        match redis::cmd("SET").arg(&key).arg(i).query::<String>(&mut c) {
            Ok(ok) if ok == "OK" => {
                acked.keys.push(key);
                answered.fetch_add(1, Ordering::Relaxed);
            }
            _ => break,
        }
        i += 1;
    }
    acked
}

/// Goal: under `appendfsync always`, a node killed with SIGKILL keeps every write it
/// answered. Method: three writers INCR shared counters and SET unique keys, recording
/// each answer; the node is killed at a different moment each trial and restarted over the
/// same folder (so later trials also load what earlier crashes left); every acknowledged
/// key must be there and every counter at least at its last acknowledged value.
#[test]
fn kill_9_under_appendfsync_always_loses_no_acknowledged_write() {
    let trials: usize = std::env::var("AOF_KILL_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_KILL_TRIALS);
    kill_trials(ALWAYS, trials);
}

/// Goal: under `everysec` too, a process crash loses nothing answered (replies leave once
/// their writes reached the file; only an OS crash may lose the last second). Method: as
/// above, two trials.
#[test]
fn kill_9_under_appendfsync_everysec_loses_no_acknowledged_write() {
    kill_trials(&["--appendonly", "yes", "--appendfsync", "everysec"], 2);
}

/// Runs `trials` kill -9 trials on a node started with `args` (see the tests above).
fn kill_trials(args: &[&str], trials: usize) {
    let mut node = Node::start(args);
    let mut floor = [0i64; COUNTERS];
    for trial in 0..trials {
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..3)
            .map(|w| {
                let (url, stop, answered) = (node.url(), stop.clone(), answered.clone());
                let tag = format!("{trial}:{w}");
                std::thread::spawn(move || write_until_gone(url, tag, stop, answered))
            })
            .collect();
        // The kill lands at a different moment each trial, but only once writes flow: on a
        // loaded host the writers' first answers can take longer than the jitter.
        let flowing = Instant::now() + Duration::from_secs(30);
        while answered.load(Ordering::Relaxed) == 0 && Instant::now() < flowing {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50 + jitter(400)));
        node.signal("KILL");
        let acked: Vec<Acked> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        let answered: usize = acked.iter().map(|a| a.keys.len()).sum();
        assert!(answered > 0, "trial {trial}: no write was answered");
        node = Node::start_in(node.into_dir(), args);
        let mut c = node.client();
        for a in &acked {
            for (k, last) in a.counters.iter().enumerate() {
                floor[k] = floor[k].max(*last);
            }
            for key in &a.keys {
                let exists: i64 = redis::cmd("EXISTS").arg(key).query(&mut c).unwrap();
                assert_eq!(exists, 1, "trial {trial}: acknowledged {key} lost");
            }
        }
        for (k, least) in floor.iter().enumerate() {
            let v: Option<i64> = redis::cmd("GET")
                .arg(format!("counter:{k}"))
                .query(&mut c)
                .unwrap();
            assert!(
                v.unwrap_or(0) >= *least,
                "trial {trial}: counter:{k} is {v:?}, {least} was acknowledged"
            );
        }
        eprintln!("trial {trial}: {answered} acknowledged SETs kept");
    }
}

/// Goal: BGREWRITEAOF while writes go on keeps everything, switches the manifest to the
/// new base and increment, and removes the old files. Method: a writer runs through two
/// rewrites; after it stops, the folder must hold exactly base 3 + one increment +
/// manifest, and a node restarted after kill -9 must have every answered write.
#[test]
fn bgrewriteaof_under_writes_switches_files_and_keeps_everything() {
    let node = Node::start(&["--appendonly", "yes"]);
    let mut c = node.client();
    for i in 0..2000 {
        let _: () = redis::cmd("SET")
            .arg(format!("before:{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    assert_eq!(
        cmd(&mut c, &["RPUSH", "list", "a", "b", "c"]).unwrap(),
        Value::Int(3)
    );
    assert_eq!(
        cmd(&mut c, &["SET", "ttl", "v", "EX", "3600"]).unwrap(),
        Value::Okay
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (url, stop) = (node.url(), stop.clone());
        let answered = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || write_until_gone(url, "during".into(), stop, answered))
    };
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            cmd(&mut c, &["BGREWRITEAOF"]).unwrap(),
            Value::SimpleString("Background append only file rewriting started".into())
        );
        wait_for_rewrite(&node);
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let acked = writer.join().unwrap();
    assert!(!acked.keys.is_empty());
    assert_eq!(info_field(&node, "aof_last_bgrewrite_status"), "ok");
    assert_eq!(
        info_field(&node, "aof_rewrites"),
        "3",
        "the first base, then two"
    );
    let dir = node.dir.path().to_path_buf();
    assert_eq!(
        aof_files(&dir),
        [
            "appendonly.aof.3.base.snap",
            "appendonly.aof.3.incr.aof",
            "appendonly.aof.manifest"
        ],
        "the old base and increments are gone"
    );
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.3.base.snap seq 3 type b\nfile appendonly.aof.3.incr.aof seq 3 type i\n"
    );
    let base_size: u64 = info_field(&node, "aof_base_size").parse().unwrap();
    let current: u64 = info_field(&node, "aof_current_size").parse().unwrap();
    assert!(
        current >= base_size && base_size > 0,
        "{current} {base_size}"
    );

    let node = Node::start_in(node.into_dir(), &["--appendonly", "yes"]);
    assert!(
        node.log().contains("DB loaded from append only file"),
        "{}",
        node.log()
    );
    let mut c = node.client();
    for i in (0..2000).step_by(97) {
        let v: i64 = redis::cmd("GET")
            .arg(format!("before:{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(v, i);
    }
    for key in &acked.keys {
        let exists: i64 = redis::cmd("EXISTS").arg(key).query(&mut c).unwrap();
        assert_eq!(exists, 1, "{key} lost");
    }
    for (k, last) in acked.counters.iter().enumerate() {
        let v: Option<i64> = redis::cmd("GET")
            .arg(format!("counter:{k}"))
            .query(&mut c)
            .unwrap();
        // Everything was answered before the kill, and answered writes are written.
        assert_eq!(v.unwrap_or(0), *last, "counter:{k}");
    }
    assert_eq!(
        cmd(&mut c, &["LRANGE", "list", "0", "-1"]).unwrap(),
        Value::Array(vec![
            Value::BulkString(b"a".to_vec()),
            Value::BulkString(b"b".to_vec()),
            Value::BulkString(b"c".to_vec())
        ])
    );
    let ttl: i64 = redis::cmd("TTL").arg("ttl").query(&mut c).unwrap();
    assert!(ttl > 3500, "ttl {ttl}");
}

/// A node with the AOF on, some writes, stopped by kill -9: its folder.
fn folder_with_writes() -> tempfile::TempDir {
    let node = Node::start(&["--appendonly", "yes"]);
    let mut c = node.client();
    for i in 0..10 {
        assert_eq!(
            cmd(&mut c, &["SET", &format!("k{i}"), "v"]).unwrap(),
            Value::Okay
        );
    }
    node.into_dir()
}

fn incr_path(dir: &Path) -> PathBuf {
    aof_dir(dir).join("appendonly.aof.1.incr.aof")
}

/// Goal: a command cut short at the very end of the last increment loads with
/// `aof-load-truncated yes` (the file is cut back to its last whole command) and stops the
/// node with `no`, naming the file; a cut anywhere else is damage, never loaded.
#[test]
fn a_truncated_last_command_loads_only_with_aof_load_truncated_yes() {
    let dir = folder_with_writes();
    let path = incr_path(dir.path());
    let whole = std::fs::read(&path).unwrap();
    let mut cut = whole.clone();
    cut.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\nlost\r\n$5\r\nval");
    std::fs::write(&path, &cut).unwrap();

    let (status, log) = Node::start_expecting_exit(
        dir.path(),
        &["--appendonly", "yes", "--aof-load-truncated", "no"],
    );
    assert!(!status.success());
    assert!(log.contains(&path.display().to_string()), "{log}");
    assert!(log.contains("truncated"), "{log}");

    let node = Node::start_in(dir, &["--appendonly", "yes"]);
    assert!(node.log().contains("short read"), "{}", node.log());
    let mut c = node.client();
    assert_eq!(
        cmd(&mut c, &["GET", "k9"]).unwrap(),
        Value::BulkString(b"v".to_vec())
    );
    assert_eq!(cmd(&mut c, &["EXISTS", "lost"]).unwrap(), Value::Int(0));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        whole,
        "cut back to the whole commands"
    );
    // The log goes on after the cut, and loads again.
    assert_eq!(cmd(&mut c, &["SET", "after", "1"]).unwrap(), Value::Okay);
    let node = Node::start_in(node.into_dir(), &["--appendonly", "yes"]);
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["DBSIZE"]).unwrap(), Value::Int(11));

    // Garbage in the middle of the last increment: never a truncation.
    let dir = node.into_dir();
    let path = incr_path(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] = b'?';
    std::fs::write(&path, &bytes).unwrap();
    let (status, log) = Node::start_expecting_exit(dir.path(), &["--appendonly", "yes"]);
    assert!(!status.success());
    assert!(log.contains(&path.display().to_string()), "{log}");
    assert!(log.contains("Bad file format"), "{log}");
}

/// Goal: a damaged base or manifest stops the node at start, naming the file.
#[test]
fn a_damaged_base_or_manifest_refuses_to_start_naming_the_file() {
    let dir = folder_with_writes();
    let base = aof_dir(dir.path()).join("appendonly.aof.1.base.snap");
    let mut bytes = std::fs::read(&base).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&base, &bytes).unwrap();
    let (status, log) = Node::start_expecting_exit(dir.path(), &["--appendonly", "yes"]);
    assert!(!status.success());
    assert!(log.contains(&base.display().to_string()), "{log}");
    assert!(log.contains("corrupt"), "{log}");

    let manifest = aof_dir(dir.path()).join("appendonly.aof.manifest");
    std::fs::write(&manifest, "file ../../elsewhere seq 1 type b\n").unwrap();
    let (status, log) = Node::start_expecting_exit(dir.path(), &["--appendonly", "yes"]);
    assert!(!status.success());
    assert!(log.contains(&manifest.display().to_string()), "{log}");
    assert!(log.contains("not a plain file name"), "{log}");
}

/// Goal: CONFIG SET appendonly yes turns the AOF on at run time (a first base of the
/// dataset, then the log), and a restart with it loads everything; `no` turns it off.
/// Method: writes before and after the switch, kill -9, restart with `--appendonly yes`.
#[test]
fn config_set_appendonly_yes_at_run_time_then_restart_keeps_the_data() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(info_field(&node, "aof_enabled"), "0");
    assert_eq!(cmd(&mut c, &["SET", "before", "1"]).unwrap(), Value::Okay);
    assert_eq!(
        cmd(
            &mut c,
            &[
                "CONFIG",
                "SET",
                "appendonly",
                "yes",
                "appendfsync",
                "always"
            ]
        )
        .unwrap(),
        Value::Okay
    );
    wait_for_rewrite(&node);
    assert_eq!(info_field(&node, "aof_last_bgrewrite_status"), "ok");
    assert_eq!(cmd(&mut c, &["SET", "after", "2"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["INCR", "n"]).unwrap(), Value::Int(1));
    let dir = node.dir.path().to_path_buf();
    assert!(manifest(&dir).contains("type b"), "{}", manifest(&dir));

    let node = Node::start_in(node.into_dir(), &["--appendonly", "yes"]);
    let mut c = node.client();
    for (k, v) in [("before", "1"), ("after", "2"), ("n", "1")] {
        assert_eq!(
            cmd(&mut c, &["GET", k]).unwrap(),
            Value::BulkString(v.as_bytes().to_vec()),
            "{k}"
        );
    }
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "appendonly", "no"]).unwrap(),
        Value::Okay
    );
    assert_eq!(info_field(&node, "aof_enabled"), "0");
    assert_eq!(cmd(&mut c, &["SET", "unlogged", "x"]).unwrap(), Value::Okay);
    let node = Node::start_in(node.into_dir(), &["--appendonly", "yes"]);
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["EXISTS", "after"]).unwrap(), Value::Int(1));
    assert_eq!(
        cmd(&mut c, &["EXISTS", "unlogged"]).unwrap(),
        Value::Int(0),
        "written while the AOF was off"
    );
}

/// Goal: a node started with `appendonly yes` over a snapshot and no AOF loads the snapshot
/// and writes the AOF's first base from it before serving (as Redis creates its AOF at
/// start); from then on the AOF alone holds the data.
/// Method: SAVE without the AOF, restart with it, write, kill -9, remove the snapshot,
/// restart.
#[test]
fn appendonly_over_a_snapshot_starts_from_it() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["SET", "saved", "1"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["SAVE"]).unwrap(), Value::Okay);
    let node = Node::start_in(node.into_dir(), ALWAYS);
    assert!(node.log().contains("DB loaded from disk"), "{}", node.log());
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["SET", "logged", "2"]).unwrap(), Value::Okay);
    let dir = node.into_dir();
    std::fs::remove_file(dir.path().join("dump.snap")).unwrap();
    let node = Node::start_in(dir, ALWAYS);
    assert!(
        node.log().contains("DB loaded from append only file"),
        "{}",
        node.log()
    );
    let mut c = node.client();
    for (k, v) in [("saved", "1"), ("logged", "2")] {
        assert_eq!(
            cmd(&mut c, &["GET", k]).unwrap(),
            Value::BulkString(v.as_bytes().to_vec()),
            "{k}"
        );
    }
}

/// Goal: the log rewrites itself once it grew by `auto-aof-rewrite-percentage` over its
/// base and is past `auto-aof-rewrite-min-size`, and what it rewrote loads.
/// Method: a small min-size, overwrites of the same keys (the log grows, the data does
/// not), then INFO's counters and a restart.
#[test]
fn the_log_rewrites_itself_when_it_grows() {
    let args = [
        "--appendonly",
        "yes",
        "--auto-aof-rewrite-min-size",
        "64kb",
        "--auto-aof-rewrite-percentage",
        "100",
    ];
    let node = Node::start(&args);
    let mut c = node.client();
    let value = "x".repeat(100);
    for round in 0..20 {
        for i in 0..100 {
            let _: () = redis::cmd("SET")
                .arg(format!("k{i}"))
                .arg(format!("{round}{value}"))
                .query(&mut c)
                .unwrap();
        }
    }
    // Rewrites are started by the cron when the log has doubled past the minimum; under
    // load one may come while the writes still run and the log grow past the minimum again
    // behind it, so the check is that, once the writes stop, a rewrite brings it back under.
    let deadline = Instant::now() + PATIENCE;
    loop {
        wait_for_rewrite(&node);
        let current: u64 = info_field(&node, "aof_current_size").parse().unwrap();
        let rewrites: u64 = info_field(&node, "aof_rewrites").parse().unwrap();
        if rewrites > 1 && current < 64 * 1024 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no automatic rewrite shrank the log: {current} bytes after {rewrites}; {}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let node = Node::start_in(node.into_dir(), &args);
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["DBSIZE"]).unwrap(), Value::Int(100));
    assert_eq!(
        cmd(&mut c, &["GET", "k7"]).unwrap(),
        Value::BulkString(format!("19{value}").into_bytes())
    );
}

/// Goal: over the fabric too, a reply under `appendfsync always` leaves only once its
/// write is synced. Method: SETs through an interactive `operator cli --fabric ofi:tcp`,
/// the node killed with SIGKILL right after the last answer; `--hz 1` leaves a write whose
/// reply skipped the wait in the buffer for up to a second.
#[test]
fn fabric_replies_under_appendfsync_always_wait_for_the_log() {
    use std::io::{BufRead, BufReader, Write};
    let rdma_port = integration::free_port().to_string();
    let mut args = ALWAYS.to_vec();
    args.extend([
        "--hz",
        "1",
        "--rdma-port",
        &rdma_port,
        "--rdma-bind",
        "127.0.0.1",
        "--fabric-provider",
        "ofi:tcp",
    ]);
    let node = Node::start(&args);
    let deadline = Instant::now() + PATIENCE;
    while !node.log().contains("ready to accept connections (fabric)") {
        assert!(
            Instant::now() < deadline,
            "no fabric listener; {}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut cli = integration::operator(&["cli", "--fabric", "ofi:tcp", "-p", &rdma_port])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = cli.stdin.take().unwrap();
    let mut output = BufReader::new(cli.stdout.take().unwrap());
    for i in 0..10 {
        writeln!(input, "SET fabric:{i} v").unwrap();
        input.flush().unwrap();
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "OK", "SET fabric:{i}");
    }
    let dir = node.into_dir();
    let _ = cli.kill();
    let _ = cli.wait();
    let node = Node::start_in(dir, ALWAYS);
    let mut c = node.client();
    for i in 0..10 {
        assert_eq!(
            cmd(&mut c, &["EXISTS", &format!("fabric:{i}")]).unwrap(),
            Value::Int(1),
            "fabric:{i}"
        );
    }
}

/// Goal: BGREWRITEAOF with the AOF off writes a base alone (as Redis does), and a node
/// started with `appendonly yes` over it loads it and opens its first increment.
/// Method: the rewrite, the manifest, a restart, a write, a kill -9, a restart.
#[test]
fn bgrewriteaof_with_the_log_off_writes_a_base_that_a_start_continues() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["SET", "k", "1"]).unwrap(), Value::Okay);
    assert_eq!(
        cmd(&mut c, &["BGREWRITEAOF"]).unwrap(),
        Value::SimpleString("Background append only file rewriting started".into())
    );
    let deadline = Instant::now() + PATIENCE;
    while info_field(&node, "aof_rewrites") != "1"
        || info_field(&node, "aof_rewrite_in_progress") != "0"
    {
        assert!(Instant::now() < deadline, "no rewrite; {}", node.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_field(&node, "aof_enabled"), "0");
    let dir = node.dir.path().to_path_buf();
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.1.base.snap seq 1 type b\n"
    );
    let node = Node::start_in(node.into_dir(), ALWAYS);
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.1.base.snap seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["INCR", "k"]).unwrap(), Value::Int(2));
    let node = Node::start_in(node.into_dir(), ALWAYS);
    let mut c = node.client();
    assert_eq!(
        cmd(&mut c, &["GET", "k"]).unwrap(),
        Value::BulkString(b"2".to_vec())
    );
}

//! ACL users against a real node over TCP: a restricted user playing the attacker, AUTH
//! guesses in the ACL LOG, the ACL file's privacy and round trip, disconnections on
//! DELUSER and on a revoked channel, requirepass as the default user's password, and ACL
//! CAT agreeing with COMMAND INFO.

use integration::{cmd, redis_cli, Node};
use redis::Value;

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Int(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn strings(v: Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(text).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// `redis-cli` as `user` (exact reply texts).
fn cli_as(node: &Node, user: &str, pass: &str, args: &[&str]) -> String {
    let mut all = vec!["--user", user, "--pass", pass, "--no-auth-warning"];
    all.extend_from_slice(args);
    redis_cli(node.port, &all)
}

fn error_of(r: redis::RedisResult<Value>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// Fields of an ACL LOG entry (RESP2: a flat key/value array).
fn log_entries(c: &mut redis::Connection) -> Vec<Vec<(String, String)>> {
    let Value::Array(entries) = cmd(c, &["ACL", "LOG"]).unwrap() else {
        panic!("ACL LOG is an array")
    };
    entries
        .into_iter()
        .map(|e| {
            let Value::Array(kv) = e else {
                panic!("an entry is an array")
            };
            kv.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect()
        })
        .collect()
}

fn field<'a>(entry: &'a [(String, String)], name: &str) -> &'a str {
    &entry.iter().find(|(k, _)| k == name).expect(name).1
}

/// Goal: a user limited to reading `app:*` keys and publishing on `news` cannot run any
/// other command, touch any other key, write its own keys, publish or subscribe elsewhere,
/// widen its own rights, or slip a command through MULTI; every refusal is Redis's exact
/// NOPERM text and is logged. Method: the attacker's own connection, and redis-cli for
/// the exact texts.
#[test]
fn a_restricted_user_can_do_only_what_its_rules_allow() {
    let node = Node::start(&[]);
    let mut admin = node.client();
    cmd(&mut admin, &["SET", "app:1", "public"]).unwrap();
    cmd(&mut admin, &["SET", "secret", "s3cr3t"]).unwrap();
    let setuser = [
        "ACL",
        "SETUSER",
        "mallory",
        "on",
        ">pw",
        "%R~app:*",
        "&news",
        "+get",
        "+set",
        "+sort",
        "+publish",
        "+subscribe",
        "+multi",
        "+exec",
        "+acl|whoami",
    ];
    assert_eq!(cmd(&mut admin, &setuser).unwrap(), Value::Okay);

    assert_eq!(cli_as(&node, "mallory", "pw", &["GET", "app:1"]), "public");
    assert_eq!(
        cli_as(&node, "mallory", "pw", &["GET", "secret"]),
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    assert_eq!(
        cli_as(&node, "mallory", "pw", &["SET", "app:1", "mine"]),
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    assert_eq!(
        cli_as(&node, "mallory", "pw", &["DEL", "app:1"]),
        "NOPERM this user has no permissions to run the 'del' command"
    );
    assert_eq!(
        cli_as(
            &node,
            "mallory",
            "pw",
            &["CONFIG", "SET", "requirepass", ""]
        ),
        "NOPERM this user has no permissions to run the 'config|set' command"
    );
    assert_eq!(
        cli_as(
            &node,
            "mallory",
            "pw",
            &["ACL", "SETUSER", "mallory", "+@all", "~*"]
        ),
        "NOPERM this user has no permissions to run the 'acl|setuser' command"
    );
    assert_eq!(
        cli_as(&node, "mallory", "pw", &["PUBLISH", "alerts", "x"]),
        "NOPERM this user has no permissions to access one of the channels used as arguments"
    );
    assert_eq!(
        cli_as(&node, "mallory", "pw", &["PUBLISH", "news", "x"]),
        "0"
    );
    assert_eq!(
        cli_as(&node, "mallory", "pw", &["ACL", "WHOAMI"]),
        "mallory"
    );
    // SORT's BY and GET patterns name keys no key check sees: refused without allkeys.
    cmd(&mut admin, &["RPUSH", "app:list", "1"]).unwrap();
    assert_eq!(cli_as(&node, "mallory", "pw", &["SORT", "app:list"]), "1");
    assert_eq!(
        cli_as(
            &node,
            "mallory",
            "pw",
            &["SORT", "app:list", "GET", "secret"]
        ),
        "ERR GET option of SORT denied due to insufficient ACL permissions."
    );
    assert_eq!(
        cli_as(
            &node,
            "mallory",
            "pw",
            &["SORT", "app:list", "BY", "secret*"]
        ),
        "ERR BY option of SORT denied due to insufficient ACL permissions."
    );

    // One connection: inside MULTI the forbidden command is refused when queued, and
    // the transaction is doomed.
    let mut m = node.client();
    assert_eq!(
        cmd(&mut m, &["AUTH", "mallory", "pw"]).unwrap(),
        Value::Okay
    );
    assert_eq!(cmd(&mut m, &["MULTI"]).unwrap(), Value::Okay);
    assert!(error_of(cmd(&mut m, &["FLUSHALL"])).contains("no permissions to run the 'flushall'"));
    assert!(error_of(cmd(&mut m, &["EXEC"])).contains("Transaction discarded"));
    assert!(error_of(cmd(&mut m, &["SUBSCRIBE", "alerts"])).contains("channels"));

    // Nothing the attacker tried changed the data.
    assert_eq!(text(&cmd(&mut admin, &["GET", "app:1"]).unwrap()), "public");
    assert_eq!(
        text(&cmd(&mut admin, &["GET", "secret"]).unwrap()),
        "s3cr3t"
    );
    assert_eq!(text(&cmd(&mut admin, &["DBSIZE"]).unwrap()), "3");

    let entries = log_entries(&mut admin);
    let reasons: Vec<&str> = entries.iter().map(|e| field(e, "reason")).collect();
    for reason in ["command", "key", "channel"] {
        assert!(reasons.contains(&reason), "{reasons:?}");
    }
    let flushall = entries
        .iter()
        .find(|e| field(e, "object") == "flushall")
        .expect("the refused FLUSHALL is logged");
    assert_eq!(field(flushall, "context"), "multi");
    assert_eq!(field(flushall, "username"), "mallory");
}

/// Goal: a permission revoked between MULTI and EXEC is enforced by EXEC, for that
/// command only, as Redis does.
#[test]
fn exec_checks_queued_commands_against_the_rules_of_now() {
    let node = Node::start(&[]);
    let mut admin = node.client();
    cmd(
        &mut admin,
        &[
            "ACL", "SETUSER", "u", "on", "nopass", "~*", "+multi", "+exec", "+incr", "+get",
        ],
    )
    .unwrap();
    // Raw frames: EXEC's array holds an error, which the client library would turn into
    // an error for the whole reply.
    let mut c = integration::raw::RawClient::connect(node.port);
    for args in [
        &["AUTH", "u", "x"][..],
        &["MULTI"],
        &["INCR", "n"],
        &["GET", "n"],
    ] {
        c.send(args);
        c.read();
    }
    cmd(&mut admin, &["ACL", "SETUSER", "u", "-incr"]).unwrap();
    c.send(&["EXEC"]);
    let exec = format!("{:?}", c.read());
    assert!(
        exec.contains("NOPERM this user has no permissions to run the 'incr' command"),
        "{exec}"
    );
    assert_eq!(cmd(&mut admin, &["EXISTS", "n"]).unwrap(), Value::Int(0));
}

/// Goal: every wrong AUTH lands in the ACL LOG (grouped, counted), and the log stays
/// within acllog-max-len.
#[test]
fn auth_guesses_are_logged_and_the_log_is_bounded() {
    let node = Node::start(&[]);
    let mut admin = node.client();
    cmd(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "victim",
            "on",
            ">correct-horse",
            "+@all",
            "~*",
        ],
    )
    .unwrap();
    let mut attacker = node.client();
    for guess in 0..25 {
        let e = error_of(cmd(
            &mut attacker,
            &["AUTH", "victim", &format!("guess{guess}")],
        ));
        assert!(e.contains("WRONGPASS"), "{e}");
    }
    let entries = log_entries(&mut admin);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(field(&entries[0], "reason"), "auth");
    assert_eq!(field(&entries[0], "object"), "AUTH");
    assert_eq!(field(&entries[0], "username"), "victim");
    assert_eq!(field(&entries[0], "count"), "25");
    // The right password still works, and the log is bounded.
    assert_eq!(
        cmd(&mut attacker, &["AUTH", "victim", "correct-horse"]).unwrap(),
        Value::Okay
    );
    cmd(&mut admin, &["CONFIG", "SET", "acllog-max-len", "3"]).unwrap();
    for user in ["a", "b", "c", "d", "e"] {
        let _ = cmd(&mut attacker, &["AUTH", user, "x"]);
    }
    assert_eq!(log_entries(&mut admin).len(), 3);
    assert_eq!(
        cmd(&mut admin, &["ACL", "LOG", "RESET"]).unwrap(),
        Value::Okay
    );
    assert!(log_entries(&mut admin).is_empty());
}

/// Goal: ACL SAVE writes a file only its owner can read, holding password hashes, not
/// passwords; a node started over it knows the users; ACL LOAD of a broken file changes
/// nothing.
#[test]
fn the_acl_file_is_private_and_round_trips() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("node-test-")
        .tempdir()
        .unwrap();
    std::fs::write(
        dir.path().join("users.acl"),
        "user default on nopass ~* &* +@all\n",
    )
    .unwrap();
    let node = Node::start_in(dir, &["--aclfile", "users.acl"]);
    let mut admin = node.client();
    cmd(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "carol",
            "on",
            ">plain-secret",
            "~c:*",
            "+get",
        ],
    )
    .unwrap();
    assert_eq!(cmd(&mut admin, &["ACL", "SAVE"]).unwrap(), Value::Okay);
    let path = node.dir.path().join("users.acl");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the ACL file is readable by its owner only");
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.contains("user carol on #"), "{saved}");
    assert!(!saved.contains("plain-secret"), "{saved}");

    // A duplicate user makes the whole file refused; the users in memory stay.
    std::fs::write(&path, format!("{saved}user carol on nopass\n")).unwrap();
    let e = error_of(cmd(&mut admin, &["ACL", "LOAD"]));
    assert!(e.contains("Duplicate user 'carol' found"), "{e}");
    assert_eq!(cli_as(&node, "carol", "plain-secret", &["GET", "c:1"]), "");
    std::fs::write(&path, &saved).unwrap();

    let dir = node.into_dir();
    let node = Node::start_in(dir, &["--aclfile", "users.acl"]);
    assert_eq!(
        cli_as(&node, "carol", "plain-secret", &["ACL", "WHOAMI"]),
        "NOPERM this user has no permissions to run the 'acl|whoami' command"
    );
    assert_eq!(
        node.cli(&["AUTH", "carol", "wrong"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
}

/// Goal: ACL DELUSER closes the connections of the deleted user (the others stay), and a
/// subscriber whose channel is revoked is disconnected.
#[test]
fn deleting_a_user_or_revoking_a_channel_disconnects_its_clients() {
    let node = Node::start(&[]);
    let mut admin = node.client();
    cmd(
        &mut admin,
        &["ACL", "SETUSER", "bob", "on", ">pw", "+@all", "~*", "&*"],
    )
    .unwrap();
    let mut bob = node.client();
    cmd(&mut bob, &["AUTH", "bob", "pw"]).unwrap();
    assert_eq!(text(&cmd(&mut bob, &["PING"]).unwrap()), "PONG");
    assert_eq!(
        cmd(&mut admin, &["ACL", "DELUSER", "bob", "nobody"]).unwrap(),
        Value::Int(1)
    );
    assert!(
        cmd(&mut bob, &["PING"]).is_err(),
        "bob's connection is closed"
    );
    assert_eq!(text(&cmd(&mut admin, &["PING"]).unwrap()), "PONG");
    assert!(error_of(cmd(&mut admin, &["ACL", "DELUSER", "default"])).contains("cannot be removed"));

    cmd(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "sub",
            "on",
            "nopass",
            "+@all",
            "resetchannels",
            "&feed",
        ],
    )
    .unwrap();
    let mut raw = integration::raw::RawClient::connect(node.port);
    raw.send(&["AUTH", "sub", "x"]);
    raw.read();
    raw.send(&["CLIENT", "SETNAME", "deathrow"]);
    raw.read();
    raw.send(&["SUBSCRIBE", "feed"]);
    raw.read();
    assert!(text(&cmd(&mut admin, &["CLIENT", "LIST"]).unwrap()).contains("deathrow"));
    cmd(
        &mut admin,
        &["ACL", "SETUSER", "sub", "resetchannels", "&other"],
    )
    .unwrap();
    let list = text(&cmd(&mut admin, &["CLIENT", "LIST"]).unwrap());
    assert!(!list.contains("deathrow"), "{list}");
}

/// Goal: requirepass is the default user's password, and CONFIG SET requirepass replaces
/// it; other users are untouched.
#[test]
fn requirepass_is_the_default_users_password() {
    let node = Node::start(&["--requirepass", "first"]);
    assert_eq!(node.cli(&["GET", "k"]), "NOAUTH Authentication required.");
    assert_eq!(
        cli_as(&node, "default", "first", &["ACL", "WHOAMI"]),
        "default"
    );
    assert_eq!(
        cli_as(
            &node,
            "default",
            "first",
            &["CONFIG", "SET", "requirepass", "second"]
        ),
        "OK"
    );
    assert!(node
        .cli(&["AUTH", "default", "first"])
        .starts_with("WRONGPASS"));
    assert_eq!(cli_as(&node, "default", "second", &["PING"]), "PONG");
    let users = cli_as(&node, "default", "second", &["ACL", "LIST"]);
    assert!(users.starts_with("user default on #"), "{users}");
    assert!(!users.contains("second"), "{users}");
    assert_eq!(
        cli_as(
            &node,
            "default",
            "second",
            &["CONFIG", "SET", "requirepass", ""]
        ),
        "OK"
    );
    assert_eq!(node.cli(&["PING"]), "PONG");
}

/// Goal: ACL CAT lists the same commands per category as COMMAND LIST FILTERBY ACLCAT
/// (both from the command table), and GET is where COMMAND INFO says.
#[test]
fn acl_cat_agrees_with_the_command_table() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let categories = strings(cmd(&mut c, &["ACL", "CAT"]).unwrap());
    assert!(categories.contains(&"keyspace".to_string()));
    for category in &categories {
        let mut acl = strings(cmd(&mut c, &["ACL", "CAT", category]).unwrap());
        let mut listed =
            strings(cmd(&mut c, &["COMMAND", "LIST", "FILTERBY", "ACLCAT", category]).unwrap());
        acl.sort();
        listed.sort();
        assert_eq!(acl, listed, "@{category}");
    }
    let read = strings(cmd(&mut c, &["ACL", "CAT", "read"]).unwrap());
    assert!(read.contains(&"get".to_string()) && !read.contains(&"set".to_string()));
    assert!(error_of(cmd(&mut c, &["ACL", "CAT", "NON_EXISTS"]))
        .contains("Unknown category 'NON_EXISTS'"));
    let dry = cmd(
        &mut c,
        &["ACL", "SETUSER", "r", "on", "nopass", "+@read", "~*"],
    );
    assert_eq!(dry.unwrap(), Value::Okay);
    assert_eq!(
        cmd(&mut c, &["ACL", "DRYRUN", "r", "GET", "k"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        text(&cmd(&mut c, &["ACL", "DRYRUN", "r", "SET", "k", "v"]).unwrap()),
        "This user has no permissions to run the 'set' command"
    );
}

/// Goal: a script runs with its caller's rights: a user allowed EVAL and GET on `app:*` but
/// not SET cannot write through `redis.call` (nor `redis.pcall`), cannot read another key
/// through it, and each refusal is in the ACL LOG with context `lua`. Method: a real node,
/// EVAL as that user over TCP.
#[test]
fn a_script_runs_with_its_callers_acl_rights() {
    let node = Node::start(&[]);
    let mut admin = node.client();
    assert_eq!(
        text(
            &cmd(
                &mut admin,
                &["ACL", "SETUSER", "eve", "on", ">pw", "~app:*", "+eval", "+get"]
            )
            .unwrap()
        ),
        "OK"
    );
    assert_eq!(
        text(&cmd(&mut admin, &["SET", "secret", "s"]).unwrap()),
        "OK"
    );
    let mut eve = node.client();
    assert_eq!(text(&cmd(&mut eve, &["AUTH", "eve", "pw"]).unwrap()), "OK");
    let write = error_of(cmd(
        &mut eve,
        &["EVAL", "return redis.call('set', 'app:1', 'x')", "0"],
    ));
    assert!(
        write.contains("The user executing the script can't run this command or subcommand"),
        "{write}"
    );
    let read = error_of(cmd(
        &mut eve,
        &["EVAL", "return redis.call('get', 'secret')", "0"],
    ));
    assert!(
        read.contains("can't access at least one of the keys"),
        "{read}"
    );
    // pcall hands the refusal back as an error table; the write still does not happen.
    let caught = cmd(
        &mut eve,
        &[
            "EVAL",
            "local r = redis.pcall('set', 'app:2', 'y'); return r['err']",
            "0",
        ],
    );
    assert!(
        text(&caught.unwrap()).contains("can't run this command"),
        "pcall's error table"
    );
    assert_eq!(
        cmd(&mut admin, &["EXISTS", "app:1", "app:2"]).unwrap(),
        Value::Int(0)
    );
    // What the user may do, the script may do: GET of an allowed key (absent: nil).
    assert_eq!(
        cmd(
            &mut eve,
            &["EVAL", "return redis.call('get', 'app:3')", "0"]
        )
        .unwrap(),
        Value::Nil
    );
    let entries = log_entries(&mut admin);
    assert!(
        entries
            .iter()
            .any(|e| field(e, "context") == "lua" && field(e, "object") == "set"),
        "{entries:?}"
    );
    assert!(
        entries
            .iter()
            .any(|e| field(e, "context") == "lua" && field(e, "object") == "secret"),
        "{entries:?}"
    );
}

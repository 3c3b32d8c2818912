//! Rules as ACL SETUSER applies them, described back as Redis 7.0 describes them, and
//! checked against requests. The command table is installed for real: categories and ids
//! are the node's own.

use super::catalog;
use super::rules::{Denial, Request, Rules, KEY_READ, KEY_WRITE};
use super::{Acl, RuleError};

fn rules(ops: &str) -> Result<Rules, RuleError> {
    crate::commands::install_table();
    let mut r = Rules::new(false);
    for op in ops.split_whitespace() {
        r.apply(catalog::get(), op, false)?;
    }
    Ok(r)
}

fn commands(ops: &str) -> String {
    rules(ops).unwrap().commands.describe(catalog::get())
}

fn check(
    r: &Rules,
    args: &[&str],
    keys: &[(usize, u8)],
    channels: &[(usize, bool)],
) -> Result<(), Denial> {
    let catalog = catalog::get();
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    // A subcommand when the table has one by that name, else the command itself.
    let sub = args.get(1).map(|a| format!("{}|{a}", args[0]));
    let name = match sub {
        Some(sub) if catalog.id(&sub).is_some() => sub,
        _ => args[0].to_string(),
    };
    let command = catalog.id(&name).expect("a command of the table");
    r.check(
        catalog,
        &Request {
            command,
            args: &a,
            keys,
            channels,
        },
    )
}

/// Goal: descriptions read back as Redis 7.0 prints them (the acl unit's expectations).
#[test]
fn command_rules_are_described_as_redis_describes_them() {
    assert_eq!(commands(""), "-@all");
    assert_eq!(commands("+@all"), "+@all");
    assert_eq!(commands("+@all -client|kill"), "+@all -client|kill");
    assert_eq!(commands("+memory|doctor"), "-@all +memory|doctor");
    assert_eq!(commands("+memory|doctor +memory"), "-@all +memory");
    assert_eq!(commands("+@all +client|id"), "+@all");
    assert_eq!(commands("+@all -memory"), "+@all -memory");
    let d = commands("-@all +acl +config -config|set");
    assert!(d.contains("+config") && d.contains("-config|set"), "{d}");
    assert_eq!(commands("-@all +select|0"), "-@all +select|0");
    // Every category alone reads back as itself, from either side.
    for category in catalog::CATEGORIES {
        let members = catalog::get().in_category(catalog::category_bit(category).unwrap());
        if members.is_empty() {
            continue;
        }
        assert_eq!(
            commands(&format!("+@all -@{category}")),
            format!("+@all -@{category}")
        );
        assert_eq!(
            commands(&format!("-@all +@{category}")),
            format!("-@all +@{category}")
        );
    }
}

/// Goal: a user's whole line reads back in ACL LIST's shape, and the line rebuilds it.
#[test]
fn a_user_line_round_trips() {
    let r = rules("on nopass resetchannels &foo +@all").unwrap();
    assert_eq!(
        r.describe(catalog::get()),
        "on nopass resetchannels &foo +@all"
    );
    let r = rules("on >secret %R~read:* %W~write:* ~both &* -@all +get +set").unwrap();
    let line = r.describe(catalog::get());
    assert!(line.starts_with("on #"), "{line}");
    assert!(
        line.ends_with("%R~read:* %W~write:* ~both &* -@all +get +set"),
        "{line}"
    );
    assert!(!line.contains("secret"), "only the hash is kept: {line}");
    let again = rules(&line).unwrap();
    assert_eq!(again, r);
}

/// Goal: malformed rules are refused with Redis's reasons, and refuse nothing else.
#[test]
fn bad_rules_are_refused_with_redis_reasons() {
    assert_eq!(rules("+nosuch").unwrap_err(), RuleError::Unknown);
    assert_eq!(rules("+@nosuch").unwrap_err(), RuleError::Unknown);
    assert_eq!(rules("+config|asdf").unwrap_err(), RuleError::Unknown);
    assert_eq!(rules("-get|key1|key2").unwrap_err(), RuleError::Unknown);
    assert_eq!(
        rules("+config|get|appendonly").unwrap_err(),
        RuleError::FirstArgOfSubcommand
    );
    assert_eq!(rules("allkeys ~foo").unwrap_err(), RuleError::AfterAllKeys);
    assert_eq!(
        rules("allchannels &foo").unwrap_err(),
        RuleError::AfterAllChannels
    );
    assert_eq!(rules("#abc").unwrap_err(), RuleError::BadHash);
    assert_eq!(rules("<nosuch").unwrap_err(), RuleError::NoSuchPassword);
    assert_eq!(rules("%X~foo").unwrap_err(), RuleError::Syntax);
    assert_eq!(rules("%R~").map(|r| r.keys.len()), Ok(1));
    assert_eq!(rules("bogus").unwrap_err(), RuleError::Syntax);
    assert_eq!(rules("(~* +get)").unwrap_err(), RuleError::Selectors);
}

/// Goal: commands, keys (by read/write access) and channels are allowed exactly as the
/// rules say; NO_AUTH commands always run.
#[test]
fn requests_are_checked_against_commands_keys_and_channels() {
    let r = rules(
        "on -@all +get +set +publish +subscribe +psubscribe +client|id %R~r:* %W~w:* ~rw:* &news:*",
    )
    .unwrap();
    assert_eq!(check(&r, &["get", "r:1"], &[(1, KEY_READ)], &[]), Ok(()));
    assert_eq!(
        check(&r, &["get", "w:1"], &[(1, KEY_READ)], &[]),
        Err(Denial::Key(1))
    );
    assert_eq!(
        check(&r, &["set", "w:1", "v"], &[(1, KEY_WRITE)], &[]),
        Ok(())
    );
    assert_eq!(
        check(&r, &["set", "r:1", "v"], &[(1, KEY_WRITE)], &[]),
        Err(Denial::Key(1))
    );
    // SET ... GET reads and writes: only a pattern granting both will do.
    assert_eq!(
        check(
            &r,
            &["set", "w:1", "v", "get"],
            &[(1, KEY_READ | KEY_WRITE)],
            &[]
        ),
        Err(Denial::Key(1))
    );
    assert_eq!(
        check(
            &r,
            &["set", "rw:1", "v", "get"],
            &[(1, KEY_READ | KEY_WRITE)],
            &[]
        ),
        Ok(())
    );
    assert_eq!(
        check(&r, &["del", "rw:1"], &[(1, KEY_WRITE)], &[]),
        Err(Denial::Command)
    );
    assert_eq!(
        check(&r, &["publish", "news:1", "m"], &[], &[(1, false)]),
        Ok(())
    );
    assert_eq!(
        check(&r, &["publish", "gossip", "m"], &[], &[(1, false)]),
        Err(Denial::Channel(1))
    );
    // A pattern subscription needs the very same pattern.
    assert_eq!(
        check(&r, &["psubscribe", "news:*"], &[], &[(1, true)]),
        Ok(())
    );
    assert_eq!(
        check(&r, &["psubscribe", "news:1*"], &[], &[(1, true)]),
        Err(Denial::Channel(1))
    );
    assert_eq!(check(&r, &["client", "id"], &[], &[]), Ok(()));
    assert_eq!(
        check(&r, &["client", "kill"], &[], &[]),
        Err(Denial::Command)
    );
    assert_eq!(check(&r, &["auth", "x"], &[], &[]), Ok(()));
    // First-argument allowances: SELECT 0 only.
    let r = rules("on -@all +select|0").unwrap();
    assert_eq!(check(&r, &["select", "0"], &[], &[]), Ok(()));
    assert_eq!(check(&r, &["select", "1"], &[], &[]), Err(Denial::Command));
}

/// Goal: passwords log in only while the user is on; requirepass is the default user's
/// password; SETUSER is all or nothing.
#[test]
fn passwords_requirepass_and_atomic_setuser() {
    crate::commands::install_table();
    let acl = Acl::new(Some("sesame"));
    assert!(acl.default_needs_auth());
    assert!(acl.authenticate(b"default", b"sesame").is_some());
    assert!(acl.authenticate(b"default", b"wrong").is_none());
    acl.set_default_password(None);
    assert!(!acl.default_needs_auth());
    assert!(acl.authenticate(b"default", b"anything").is_some());

    let ops: [&[u8]; 1] = [b">pw"];
    acl.set_user(b"bob", &ops, false).unwrap();
    assert!(
        acl.authenticate(b"bob", b"pw").is_none(),
        "new users start off"
    );
    let ops: [&[u8]; 1] = [b"on"];
    acl.set_user(b"bob", &ops, false).unwrap();
    assert!(acl.authenticate(b"bob", b"pw").is_some());
    let ops: [&[u8]; 2] = [b"off", b"+nosuch"];
    assert!(acl.set_user(b"bob", &ops, false).is_err());
    assert!(
        acl.authenticate(b"bob", b"pw").is_some(),
        "a refused SETUSER changes nothing"
    );
    assert!(acl.set_user(b"a b", &[], false).is_err());
    assert!(acl.delete_users(&[b"default"]).is_err());
    assert_eq!(acl.delete_users(&[b"bob", b"nobody"]).unwrap().len(), 1);
    assert_eq!(acl.usernames(), ["default"]);
}

/// Goal: an ACL file parses all or nothing, naming the line of each mistake.
#[test]
fn acl_files_parse_all_or_nothing() {
    crate::commands::install_table();
    let text = "# users\nuser alice on allcommands allkeys &* >alice\n\nuser bob on -@all +@set +acl ~set* &* >bob\n";
    let users = super::file::parse(text, "f.acl", catalog::get(), false).unwrap();
    assert_eq!(users.len(), 2);
    let dup = format!("{text}user alice on nopass\n");
    let e = super::file::parse(&dup, "f.acl", catalog::get(), false).unwrap_err();
    assert!(e.contains("f.acl:5: Duplicate user 'alice' found"), "{e}");
    let bad = "user carol on +nosuch\n";
    let e = super::file::parse(bad, "f.acl", catalog::get(), false).unwrap_err();
    assert!(
        e.contains("f.acl:1:") && e.contains("Unknown command"),
        "{e}"
    );
}

/// Goal: the rendered file parses back to the users it was made from.
#[test]
fn a_rendered_acl_file_parses_back() {
    crate::commands::install_table();
    let lines = vec![
        "user alice on nopass ~* &* +@all".to_string(),
        "user bob off ~set* -@all +get".to_string(),
    ];
    let text = super::file::render(&lines);
    assert_eq!(text.lines().count(), 2);
    assert!(text.ends_with('\n'));
    let users = super::file::parse(&text, "f.acl", catalog::get(), false).unwrap();
    assert_eq!(users.keys().collect::<Vec<_>>(), ["alice", "bob"]);
}

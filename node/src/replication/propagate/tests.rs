use super::*;

fn run(argv: &[&str], effect: WriteEffect) -> Result<Vec<Vec<String>>, PropagateError> {
    let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
    propagate(&argv, &effect).map(|cmds| {
        cmds.into_iter()
            .map(|c| {
                c.into_iter()
                    .map(|a| String::from_utf8(a).unwrap())
                    .collect()
            })
            .collect()
    })
}

fn one(parts: &[&str]) -> Vec<Vec<String>> {
    vec![parts.iter().map(|p| p.to_string()).collect()]
}

#[test]
fn deterministic_writes_replay_as_written() {
    assert_eq!(
        run(&["set", "k", "v"], WriteEffect::None).unwrap(),
        one(&["SET", "k", "v"])
    );
    assert_eq!(
        run(&["LPUSH", "l", "a", "b"], WriteEffect::None).unwrap(),
        one(&["LPUSH", "l", "a", "b"])
    );
    assert_eq!(
        run(&["pexpireat", "k", "123"], WriteEffect::None).unwrap(),
        one(&["pexpireat", "k", "123"])
    );
    assert!(run(&[], WriteEffect::None).unwrap().is_empty());
}

#[test]
fn relative_expiries_become_absolute() {
    for name in ["EXPIRE", "pexpire", "expireat", "PEXPIREAT"] {
        assert_eq!(
            run(
                &[name, "k", "10", "NX"],
                WriteEffect::ExpiresAtMs(1_700_000_010_000)
            )
            .unwrap(),
            one(&["PEXPIREAT", "k", "1700000010000"])
        );
        assert_eq!(
            run(&[name, "k", "-1"], WriteEffect::KeyDeleted).unwrap(),
            one(&["DEL", "k"])
        );
    }
    assert_eq!(
        run(&["expire", "k", "10"], WriteEffect::None),
        Err(PropagateError::MissingEffect {
            command: "expire".into(),
            needed: "the absolute expiry"
        })
    );
    assert_eq!(
        run(&["setex", "k", "10", "v"], WriteEffect::ExpiresAtMs(5_000)).unwrap(),
        one(&["SET", "k", "v", "PXAT", "5000"])
    );
    assert_eq!(
        run(&["PSETEX", "k", "10", "v"], WriteEffect::ExpiresAtMs(77)).unwrap(),
        one(&["SET", "k", "v", "PXAT", "77"])
    );
}

#[test]
fn set_options_become_what_the_set_did() {
    for opt in ["EX", "px", "EXAT", "pxat"] {
        assert_eq!(
            run(
                &["SET", "k", "v", "NX", opt, "9", "GET"],
                WriteEffect::ExpiresAtMs(99)
            )
            .unwrap(),
            one(&["SET", "k", "v", "PXAT", "99"])
        );
    }
    assert_eq!(
        run(&["set", "k", "v", "exat", "1"], WriteEffect::KeyDeleted).unwrap(),
        one(&["DEL", "k"])
    );
    assert_eq!(
        run(
            &["SET", "k", "v", "XX", "KEEPTTL", "GET"],
            WriteEffect::None
        )
        .unwrap(),
        one(&["SET", "k", "v", "KEEPTTL"])
    );
    assert_eq!(
        run(&["SET", "k", "v", "NX"], WriteEffect::None).unwrap(),
        one(&["SET", "k", "v"])
    );
    // The value may look like an option: only arguments after it are options.
    assert_eq!(
        run(&["SET", "k", "EX", "GET"], WriteEffect::None).unwrap(),
        one(&["SET", "k", "EX"])
    );
    assert!(matches!(
        run(&["SET", "k", "v", "EX", "5"], WriteEffect::None),
        Err(PropagateError::MissingEffect { .. })
    ));
    assert!(matches!(
        run(&["SET", "k", "v"], WriteEffect::ExpiresAtMs(1)),
        Err(PropagateError::UnexpectedEffect { .. })
    ));
    assert!(matches!(
        run(&["SET", "k", "v"], WriteEffect::KeyDeleted),
        Err(PropagateError::UnexpectedEffect { .. })
    ));
}

#[test]
fn getex_becomes_pexpireat_persist_or_nothing() {
    assert_eq!(
        run(&["GETEX", "k", "EX", "5"], WriteEffect::ExpiresAtMs(8_000)).unwrap(),
        one(&["PEXPIREAT", "k", "8000"])
    );
    assert_eq!(
        run(&["getex", "k", "PERSIST"], WriteEffect::Persisted).unwrap(),
        one(&["PERSIST", "k"])
    );
    assert_eq!(
        run(&["getex", "k", "PXAT", "1"], WriteEffect::KeyDeleted).unwrap(),
        one(&["DEL", "k"])
    );
    assert!(run(&["getex", "k"], WriteEffect::None).unwrap().is_empty());
    assert!(matches!(
        run(&["getex", "k", "PERSIST"], WriteEffect::None),
        Err(PropagateError::MissingEffect { .. })
    ));
    assert!(matches!(
        run(&["SET", "k"], WriteEffect::None),
        Err(PropagateError::BadArgs { .. })
    ));
}

/// Goal: GETDEL reaches replicas (and SYNC consumers) as the DEL it did, as in Redis.
#[test]
fn getdel_becomes_del() {
    assert_eq!(
        run(&["getdel", "k"], WriteEffect::None).unwrap(),
        one(&["DEL", "k"])
    );
}

#[test]
fn float_increments_replicate_their_result() {
    assert_eq!(
        run(
            &["INCRBYFLOAT", "k", "0.1"],
            WriteEffect::NewValue(b"3.3".to_vec())
        )
        .unwrap(),
        one(&["SET", "k", "3.3", "KEEPTTL"])
    );
    assert_eq!(
        run(
            &["hincrbyfloat", "h", "f", "1e3"],
            WriteEffect::NewValue(b"1000.5".to_vec())
        )
        .unwrap(),
        one(&["HSET", "h", "f", "1000.5"])
    );
    assert!(matches!(
        run(&["incrbyfloat", "k", "1"], WriteEffect::None),
        Err(PropagateError::MissingEffect { .. })
    ));
}

#[test]
fn spop_becomes_srem_of_what_it_popped_in_batches() {
    assert_eq!(
        run(&["SPOP", "s"], WriteEffect::Popped(vec![b"m".to_vec()])).unwrap(),
        one(&["SREM", "s", "m"])
    );
    let members: Vec<Vec<u8>> = (0..SREM_BATCH_MAX + 3)
        .map(|i| i.to_string().into_bytes())
        .collect();
    let out = run(&["spop", "s", "5000"], WriteEffect::Popped(members)).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].len(), 2 + SREM_BATCH_MAX);
    assert_eq!(out[1], vec!["SREM", "s", "1024", "1025", "1026"]);
    assert!(run(&["spop", "s", "3"], WriteEffect::Popped(vec![]))
        .unwrap()
        .is_empty());
    assert!(run(&["spop", "s"], WriteEffect::None).is_err());
}

#[test]
fn blocking_pops_become_plain_pops_on_the_serving_key() {
    let served = |key: &str, count| WriteEffect::Served {
        key: key.as_bytes().to_vec(),
        count,
    };
    assert_eq!(
        run(&["BLPOP", "a", "b", "0"], served("b", 1)).unwrap(),
        one(&["LPOP", "b"])
    );
    assert_eq!(
        run(&["brpop", "a", "1.5"], served("a", 1)).unwrap(),
        one(&["RPOP", "a"])
    );
    assert_eq!(
        run(&["BZPOPMIN", "z", "y", "0"], served("y", 1)).unwrap(),
        one(&["ZPOPMIN", "y"])
    );
    assert_eq!(
        run(&["bzpopmax", "z", "0"], served("z", 1)).unwrap(),
        one(&["ZPOPMAX", "z"])
    );
    assert_eq!(
        run(
            &["BLMPOP", "0", "2", "a", "b", "RIGHT", "COUNT", "10"],
            served("b", 3)
        )
        .unwrap(),
        one(&["RPOP", "b", "3"])
    );
    assert_eq!(
        run(&["lmpop", "1", "a", "left"], served("a", 1)).unwrap(),
        one(&["LPOP", "a", "1"])
    );
    assert_eq!(
        run(
            &["BZMPOP", "1", "1", "z", "MAX", "COUNT", "2"],
            served("z", 2)
        )
        .unwrap(),
        one(&["ZPOPMAX", "z", "2"])
    );
    assert_eq!(
        run(&["zmpop", "2", "y", "z", "min"], served("z", 1)).unwrap(),
        one(&["ZPOPMIN", "z", "1"])
    );
    assert_eq!(
        run(&["BRPOPLPUSH", "s", "d", "0"], WriteEffect::None).unwrap(),
        one(&["RPOPLPUSH", "s", "d"])
    );
    assert_eq!(
        run(
            &["blmove", "s", "d", "LEFT", "RIGHT", "0"],
            WriteEffect::None
        )
        .unwrap(),
        one(&["LMOVE", "s", "d", "LEFT", "RIGHT"])
    );
    // A serving key the command never named, or the timeout named as a key: refused.
    assert!(matches!(
        run(&["BLPOP", "a", "b", "0"], served("c", 1)),
        Err(PropagateError::BadArgs { .. })
    ));
    assert!(run(&["BLPOP", "a", "0"], served("0", 1)).is_err());
    assert!(run(&["BLMPOP", "0", "1", "a", "UP"], served("a", 1)).is_err());
    assert!(run(&["BLMPOP", "0", "9", "a", "LEFT"], served("a", 1)).is_err());
    assert!(run(&["blpop", "a", "0"], WriteEffect::None).is_err());
}

#[test]
fn restore_with_a_relative_ttl_becomes_absttl() {
    assert_eq!(
        run(
            &["RESTORE", "k", "5000", "payload", "REPLACE"],
            WriteEffect::ExpiresAtMs(9_000)
        )
        .unwrap(),
        one(&["RESTORE", "k", "9000", "payload", "REPLACE", "ABSTTL"])
    );
    assert_eq!(
        run(
            &["restore-asking", "k", "9000", "p", "ABSTTL"],
            WriteEffect::ExpiresAtMs(9_000)
        )
        .unwrap(),
        one(&["RESTORE", "k", "9000", "p", "ABSTTL"])
    );
    assert_eq!(
        run(&["RESTORE", "k", "0", "p"], WriteEffect::None).unwrap(),
        one(&["RESTORE", "k", "0", "p"])
    );
    assert!(run(&["RESTORE", "k", "10", "p"], WriteEffect::None).is_err());
}

#[test]
fn scripts_and_stray_effects_are_refused() {
    assert!(matches!(
        run(&["EVAL", "return 1", "0"], WriteEffect::None),
        Err(PropagateError::UnexpectedEffect { .. })
    ));
    assert!(matches!(
        run(&["DEL", "k"], WriteEffect::Persisted),
        Err(PropagateError::UnexpectedEffect { .. })
    ));
}

#[test]
fn helpers_for_expiry_and_transactions() {
    assert_eq!(key_removed(b"k"), vec![b"DEL".to_vec(), b"k".to_vec()]);
    let one_cmd = vec![key_removed(b"a")];
    assert_eq!(transaction(one_cmd.clone()), one_cmd);
    let two = transaction(vec![key_removed(b"a"), key_removed(b"b")]);
    assert_eq!(two.len(), 4);
    assert_eq!(two[0], vec![b"MULTI".to_vec()]);
    assert_eq!(two[3], vec![b"EXEC".to_vec()]);
}

#[test]
fn stream_is_resp_multibulk_that_the_codec_reads_back() {
    let cmds = vec![
        vec![b"SET".to_vec(), b"k".to_vec(), b"v\r\n".to_vec()],
        vec![b"DEL".to_vec(), Vec::new()],
    ];
    let bytes = encode_stream(&cmds);
    assert_eq!(
        bytes,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\r\n\r\n*2\r\n$3\r\nDEL\r\n$0\r\n\r\n"
    );
    let mut appended = b"x".to_vec();
    encode_into(&cmds, &mut appended);
    assert_eq!(&appended[1..], &bytes[..]);
}

mod codec {
    use super::*;
    use proptest::prelude::*;
    use proto::resp::{decode::decode, frame::Frame};

    proptest! {
        /// Whatever the arguments (binary, empty, CRLF inside), the stream decodes with the
        /// node's own RESP decoder into exactly those commands, back to back.
        #[test]
        fn encoded_stream_decodes_to_the_same_commands(
            cmds in proptest::collection::vec(
                proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..6),
                1..5,
            )
        ) {
            let bytes = encode_stream(&cmds);
            let mut at = 0;
            for c in &cmds {
                let (frame, used) = decode(&bytes[at..]).unwrap().unwrap();
                let refs: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
                prop_assert_eq!(frame, Frame::command(&refs));
                at += used;
            }
            prop_assert_eq!(at, bytes.len());
        }
    }
}

//! CLIENT REPLY ON | OFF | SKIP: a client may silence the replies to its commands, all of
//! them (OFF, until ON) or the next one (SKIP). The CLIENT REPLY command itself answers only
//! ON. Replies to the subscribe family are pub/sub notifications, which Redis 7.0 delivers
//! even to a silenced client, so they are kept.

/// Whether replies reach the client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplyMode {
    #[default]
    On,
    Off,
    /// The next command's reply is dropped, then replies are on again.
    SkipNext,
}

/// What the connection does with the reply of the command that just ran, given the mode
/// before it and the mode CLIENT REPLY set during it (if it ran); updates `mode`.
pub fn keep_reply(mode: &mut ReplyMode, set_now: Option<ReplyMode>, command: &[u8]) -> bool {
    if let Some(new) = set_now {
        *mode = new;
        return new == ReplyMode::On;
    }
    match *mode {
        ReplyMode::On => true,
        ReplyMode::Off => is_subscription_notice(command),
        ReplyMode::SkipNext => {
            *mode = ReplyMode::On;
            is_subscription_notice(command)
        }
    }
}

fn is_subscription_notice(command: &[u8]) -> bool {
    [
        "subscribe",
        "psubscribe",
        "ssubscribe",
        "unsubscribe",
        "punsubscribe",
        "sunsubscribe",
    ]
    .iter()
    .any(|n| command.eq_ignore_ascii_case(n.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_silences_until_on_and_skip_silences_one() {
        let mut mode = ReplyMode::On;
        assert!(keep_reply(&mut mode, None, b"get"));
        assert!(!keep_reply(&mut mode, Some(ReplyMode::Off), b"client"));
        assert!(!keep_reply(&mut mode, None, b"set"));
        assert!(keep_reply(&mut mode, None, b"SUBSCRIBE"));
        assert!(keep_reply(&mut mode, Some(ReplyMode::On), b"client"));
        assert!(keep_reply(&mut mode, None, b"get"));
        assert!(!keep_reply(&mut mode, Some(ReplyMode::SkipNext), b"client"));
        assert!(!keep_reply(&mut mode, None, b"set"));
        assert!(keep_reply(&mut mode, None, b"get"));
        // SKIP then ON: ON answers and cancels the skip.
        assert!(!keep_reply(&mut mode, Some(ReplyMode::SkipNext), b"client"));
        assert!(keep_reply(&mut mode, Some(ReplyMode::On), b"client"));
        assert!(keep_reply(&mut mode, None, b"get"));
    }
}

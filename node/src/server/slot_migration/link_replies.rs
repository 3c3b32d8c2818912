//! The target's replies on a migration link, counted as they arrive, whatever carries them.
//! Each reply answers one command the target applied (and, with `repl-sync-acks` there, its
//! replicas acknowledged); an error reply (OOM, a slot no longer moving) fails the link.

use proto::resp::{decode, Frame};

/// Most reply bytes held undecoded (replies to migration writes are small).
pub const REPLY_BUFFER_MAX: usize = 64 << 20;

#[derive(Default)]
pub struct Replies {
    undecoded: Vec<u8>,
}

impl Replies {
    /// Takes received bytes; returns how many more whole replies have arrived, or why the
    /// link cannot go on.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<u64, String> {
        self.undecoded.extend_from_slice(bytes);
        let mut replies = 0u64;
        let mut used_total = 0;
        loop {
            match decode(&self.undecoded[used_total..]) {
                Ok(Some((frame, used))) => {
                    used_total += used;
                    if let Frame::Error(e) = frame {
                        return Err(format!(
                            "the target answered: {}",
                            String::from_utf8_lossy(&e)
                        ));
                    }
                    replies += 1;
                }
                Ok(None) => break,
                Err(e) => return Err(format!("the target's reply is not RESP: {e}")),
            }
        }
        self.undecoded.drain(..used_total);
        if self.undecoded.len() > REPLY_BUFFER_MAX {
            return Err("the target's reply is too long".into());
        }
        Ok(replies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_split_anywhere_are_counted_once_whole() {
        let mut r = Replies::default();
        let wire = b"+OK\r\n:1\r\n$3\r\nabc\r\n";
        let mut total = 0;
        for piece in wire.chunks(3) {
            total += r.feed(piece).unwrap();
        }
        assert_eq!(total, 3);
    }

    #[test]
    fn an_error_reply_or_garbage_fails_the_link() {
        let why = Replies::default()
            .feed(b"+OK\r\n-OOM no room\r\n")
            .unwrap_err();
        assert!(why.contains("OOM no room"), "{why}");
        let why = Replies::default().feed(b"?what\r\n").unwrap_err();
        assert!(why.contains("not RESP"), "{why}");
    }
}

//! `notify-keyspace-events`: which keyspace events are published, as Redis 7.0 spells them.
//! The bits are ours; the letters, the `A` alias and the canonical order CONFIG GET answers
//! in (`KEA` reads back as `AKE`) are Redis's.

/// `K`: publish on `__keyspace@<db>__:<key>` (the message is the event).
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>` (the message is the key).
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: a key deleted because it expired.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key deleted by `maxmemory` eviction.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: a key a read command looked up and did not find (`keymiss`); not part of `A`, as in
/// Redis (for its cost).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events; accepted for compatibility, never emitted (no modules here).
pub const MODULE: u32 = 1 << 12;
/// `n`: a key created. Not part of `A`, as in Redis.
pub const NEW: u32 = 1 << 13;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Redis's refusal of an unknown letter (7.0's wording, listing every letter).
pub const INVALID_CLASS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// The flags a `notify-keyspace-events` value names; None for an unknown letter.
pub fn parse(text: &str) -> Option<u32> {
    let mut flags = 0;
    for c in text.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The canonical text of `flags`: `A` when every class of it is on, else the classes in
/// Redis's order, then `K`, `E`, `m`.
pub fn format(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        let classes = [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ];
        out.extend(
            classes
                .iter()
                .filter(|(f, _)| flags & f != 0)
                .map(|(_, c)| c),
        );
    }
    for (f, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & f != 0 {
            out.push(c);
        }
    }
    out
}

/// Whether an event of `class` is published at all under `flags`: its class is on, and so
/// is at least one of the two channel kinds.
pub fn publishes(flags: u32, class: u32) -> bool {
    flags & class != 0 && flags & (KEYSPACE | KEYEVENT) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_match_redis() {
        assert_eq!(format(parse("KEA").unwrap()), "AKE");
        assert_eq!(format(parse("").unwrap()), "");
        assert_eq!(format(parse("Elg").unwrap()), "glE");
        assert_eq!(format(parse("Kx$").unwrap()), "$xK");
        // `n` and `m` are outside `A`; with `A`, `n` is hidden as Redis hides it.
        assert_eq!(format(parse("AnmK").unwrap()), "AKm");
        assert_eq!(format(parse("g$lshzxetdK").unwrap()), "AK");
        assert_eq!(format(parse("nE").unwrap()), "nE");
    }

    #[test]
    fn unknown_letters_are_refused() {
        assert_eq!(parse("KEAq"), None);
        assert_eq!(parse("a"), None);
        assert_eq!(parse(" "), None);
    }

    #[test]
    fn a_class_without_a_channel_kind_publishes_nothing() {
        let flags = parse("g$").unwrap();
        assert!(!publishes(flags, GENERIC));
        assert!(publishes(flags | KEYEVENT, GENERIC));
        assert!(!publishes(flags | KEYEVENT, LIST));
    }
}

//! CLIENT TRACKING | CACHING | GETREDIR | TRACKINGINFO: client-side caching, with Redis
//! 7.0's options, checks and error texts (`node_state::tracking` does the tracking).

use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::node_state::tracking::client_state::{
    BCAST, BROKEN_REDIRECT, NOLOOP, ON, OPTIN, OPTOUT,
};
use crate::node_state::tracking::prefixes::check_new;

/// CLIENT TRACKING on|off's arguments as given.
#[derive(Debug, Default, PartialEq, Eq)]
struct TrackingArgs<'a> {
    on: bool,
    /// 0: no REDIRECT.
    redirect: u64,
    options: u8,
    prefixes: Vec<&'a [u8]>,
}

/// Parses CLIENT TRACKING's arguments (after `tracking`) in Redis's order: the options
/// first (a REDIRECT must name a connected client: `exists`), then ON or OFF.
fn parse<'a>(
    args: &[&'a [u8]],
    exists: impl Fn(u64) -> bool,
) -> Result<TrackingArgs<'a>, CmdError> {
    let mut parsed = TrackingArgs::default();
    let mut redirect_given = false;
    let mut i = 1;
    while i < args.len() {
        let (opt, value) = (args[i], args.get(i + 1));
        match value {
            Some(v) if is(opt, "redirect") => {
                i += 1;
                if redirect_given {
                    return err("ERR A client can only redirect to a single other client");
                }
                let id = args::int(v)?;
                if id <= 0 || !exists(id as u64) {
                    return err("ERR The client ID you want redirect to does not exist");
                }
                parsed.redirect = id as u64;
                redirect_given = true;
            }
            Some(v) if is(opt, "prefix") => {
                i += 1;
                parsed.prefixes.push(v);
            }
            _ if is(opt, "bcast") => parsed.options |= BCAST,
            _ if is(opt, "optin") => parsed.options |= OPTIN,
            _ if is(opt, "optout") => parsed.options |= OPTOUT,
            _ if is(opt, "noloop") => parsed.options |= NOLOOP,
            _ => return Err(CmdError::Syntax),
        }
        i += 1;
    }
    parsed.on = if is(args[0], "on") {
        true
    } else if is(args[0], "off") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    Ok(parsed)
}

/// The checks of CLIENT TRACKING on against the options and the client's current mode
/// (`current`: its flags now), in Redis's order.
fn check_on(wanted: &TrackingArgs<'_>, current: u8) -> CmdResult {
    let options = wanted.options;
    if options & BCAST == 0 && !wanted.prefixes.is_empty() {
        return err("ERR PREFIX option requires BCAST mode to be enabled");
    }
    if current & ON != 0 && (current & BCAST != 0) != (options & BCAST != 0) {
        return err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if options & BCAST != 0 && options & (OPTIN | OPTOUT) != 0 {
        return err("ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if options & OPTIN != 0 && options & OPTOUT != 0 {
        return err("ERR You can't use both OPTIN and OPTOUT");
    }
    if (options & OPTIN != 0 && current & OPTOUT != 0)
        || (options & OPTOUT != 0 && current & OPTIN != 0)
    {
        return err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    Ok(())
}

/// CLIENT TRACKING on|off [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP].
pub fn tracking(ctx: &mut Ctx<'_>, a: &[&[u8]]) -> CmdResult {
    let clients = &ctx.server.clients;
    let wanted = parse(&a[2..], |id| {
        clients.get(id).is_some_and(|c| !c.is_killed())
    })?;
    let shared = ctx.client.shared.clone();
    let tracking = &ctx.server.tracking;
    if !wanted.on {
        tracking.disable(&shared, &mut ctx.client.tracking);
        ctx.reply.ok();
        return Ok(());
    }
    check_on(&wanted, shared.tracking.flags())?;
    if wanted.options & BCAST != 0 {
        check_new(&ctx.client.tracking.prefixes, &wanted.prefixes)
            .map_err(|e| CmdError::new(e.to_string()))?;
    }
    tracking.enable(
        &shared,
        &mut ctx.client.tracking,
        wanted.options,
        wanted.redirect,
        &wanted.prefixes,
    );
    ctx.reply.ok();
    Ok(())
}

/// CLIENT CACHING yes|no: whether the next command's keys are tracked, under OPTIN (yes)
/// or OPTOUT (no).
pub fn caching(ctx: &mut Ctx<'_>, a: &[&[u8]]) -> CmdResult {
    let flags = ctx.client.shared.tracking.flags();
    if flags & ON == 0 {
        return err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    }
    if is(a[2], "yes") {
        if flags & OPTIN == 0 {
            return err(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if is(a[2], "no") {
        if flags & OPTOUT == 0 {
            return err(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return Err(CmdError::Syntax);
    }
    ctx.client.tracking.caching = true;
    ctx.reply.ok();
    Ok(())
}

/// CLIENT GETREDIR: the redirect id while tracking (0: none), -1 when not tracking.
pub fn getredir(ctx: &mut Ctx<'_>, _a: &[&[u8]]) -> CmdResult {
    ctx.reply
        .integer(ctx.client.shared.tracking.redirect_shown());
    Ok(())
}

/// The flag words of CLIENT TRACKINGINFO, in Redis's order.
fn flag_words(flags: u8, caching: bool) -> Vec<&'static str> {
    let mut words = vec![if flags & ON != 0 { "on" } else { "off" }];
    if flags & BCAST != 0 {
        words.push("bcast");
    }
    if flags & OPTIN != 0 {
        words.push("optin");
        if caching {
            words.push("caching-yes");
        }
    }
    if flags & OPTOUT != 0 {
        words.push("optout");
        if caching {
            words.push("caching-no");
        }
    }
    if flags & NOLOOP != 0 {
        words.push("noloop");
    }
    if flags & BROKEN_REDIRECT != 0 {
        words.push("broken_redirect");
    }
    words
}

/// CLIENT TRACKINGINFO: `flags` (a set), `redirect`, `prefixes`.
pub fn trackinginfo(ctx: &mut Ctx<'_>, _a: &[&[u8]]) -> CmdResult {
    let shared = &ctx.client.shared.tracking;
    let words = flag_words(shared.flags(), ctx.client.tracking.caching);
    let reply = &mut ctx.reply;
    reply.map(3);
    reply.bulk(b"flags");
    reply.set(words.len());
    for w in words {
        reply.bulk(w.as_bytes());
    }
    reply.bulk(b"redirect");
    reply.integer(shared.redirect_shown());
    reply.bulk(b"prefixes");
    reply.array(ctx.client.tracking.prefixes.len());
    for p in &ctx.client.tracking.prefixes {
        reply.bulk(p);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(words: &[&str]) -> Result<TrackingArgs<'static>, String> {
        let a: Vec<&'static [u8]> = words
            .iter()
            .map(|w| -> &'static [u8] { w.to_string().leak().as_bytes() })
            .collect();
        parse(&a, |id| id == 5).map_err(|e| e.to_string())
    }

    fn on_check(words: &[&str], current: u8) -> String {
        match parsed(words).and_then(|p| check_on(&p, current).map_err(|e| e.to_string())) {
            Ok(()) => "OK".into(),
            Err(e) => e,
        }
    }

    #[test]
    fn options_parse_as_redis() {
        let p = parsed(&[
            "on", "REDIRECT", "5", "bcast", "PREFIX", "a", "prefix", "b", "noloop",
        ])
        .unwrap();
        assert_eq!(
            p,
            TrackingArgs {
                on: true,
                redirect: 5,
                options: BCAST | NOLOOP,
                prefixes: vec![b"a", b"b"],
            }
        );
        assert_eq!(
            parsed(&["on", "redirect", "6"]).unwrap_err(),
            "ERR The client ID you want redirect to does not exist"
        );
        assert_eq!(
            parsed(&["on", "redirect", "5", "redirect", "5"]).unwrap_err(),
            "ERR A client can only redirect to a single other client"
        );
        assert_eq!(
            parsed(&["on", "redirect", "x"]).unwrap_err(),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(parsed(&["on", "redirect"]).unwrap_err(), "ERR syntax error");
        assert_eq!(parsed(&["on", "prefix"]).unwrap_err(), "ERR syntax error");
        assert_eq!(parsed(&["maybe"]).unwrap_err(), "ERR syntax error");
        assert!(!parsed(&["OFF", "optin"]).unwrap().on);
    }

    #[test]
    fn bad_combinations_get_redis_errors() {
        assert_eq!(
            on_check(&["on", "prefix", "a"], 0),
            "ERR PREFIX option requires BCAST mode to be enabled"
        );
        assert_eq!(
            on_check(&["on", "bcast", "optin"], 0),
            "ERR OPTIN and OPTOUT are not compatible with BCAST"
        );
        assert_eq!(
            on_check(&["on", "optin", "optout"], 0),
            "ERR You can't use both OPTIN and OPTOUT"
        );
        assert_eq!(
            on_check(&["on", "bcast"], ON),
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
        );
        assert_eq!(
            on_check(&["on"], ON | BCAST),
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
        );
        assert_eq!(
            on_check(&["on", "optout"], ON | OPTIN),
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
        );
        assert_eq!(on_check(&["on", "optin"], ON | OPTIN), "OK");
        assert_eq!(on_check(&["on", "bcast", "prefix", "x"], ON | BCAST), "OK");
    }

    #[test]
    fn trackinginfo_flags_in_redis_order() {
        assert_eq!(flag_words(0, false), ["off"]);
        assert_eq!(flag_words(ON | OPTIN, true), ["on", "optin", "caching-yes"]);
        assert_eq!(
            flag_words(ON | OPTOUT, true),
            ["on", "optout", "caching-no"]
        );
        assert_eq!(
            flag_words(ON | NOLOOP | BROKEN_REDIRECT, false),
            ["on", "noloop", "broken_redirect"]
        );
        assert_eq!(flag_words(ON | BCAST, false), ["on", "bcast"]);
    }
}

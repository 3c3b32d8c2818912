//! GEO commands. Method: the same commands run against a node and against redis-server
//! 7.0.15, replies compared frame by frame in RESP2 and RESP3: scores (52-bit geohashes),
//! geohash strings, coordinates, distances to four decimals, search results and errors.

use crate::reply_compare::{assert_same_replies, reference, replies, script};
use integration::Node;

#[test]
fn geo_replies_match_redis_server() {
    let node = Node::start(&[]);
    let commands = script(&[
        "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
        "GEOADD Sicily NX 13.361389 38.115556 Palermo 12.758489 38.788135 edge2",
        "GEOADD Sicily XX CH 13.5 38.1 Palermo 1 1 nothere",
        "GEOADD Sicily 2.349014 48.864716 Paris -122.4194 37.7749 SanFrancisco",
        "ZRANGE Sicily 0 -1 WITHSCORES",
        "GEODIST Sicily Palermo Catania",
        "GEODIST Sicily Palermo Catania km",
        "GEODIST Sicily Palermo Catania MI",
        "GEODIST Sicily Palermo Catania ft",
        "GEODIST Sicily Palermo nobody",
        "GEODIST nokey a b",
        "GEODIST Sicily Palermo Catania furlongs",
        "GEODIST Sicily Palermo Catania km extra",
        "GEOHASH Sicily Palermo Catania nobody Paris",
        "GEOHASH nokey a",
        "GEOPOS Sicily Palermo Catania nobody SanFrancisco",
        "GEOPOS nokey a",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km DESC WITHCOORD WITHDIST WITHHASH",
        "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km ASC WITHDIST",
        "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 10000 km COUNT 2 WITHDIST",
        "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 10000 km COUNT 1 ANY",
        "GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1 m",
        "GEOSEARCH nokey FROMLONLAT 0 0 BYRADIUS 1 m",
        "GEOSEARCH nokey FROMMEMBER x BYRADIUS 1 m",
        "GEOSEARCH Sicily FROMMEMBER nobody BYRADIUS 1 m",
        "GEOSEARCH Sicily FROMLONLAT 200 0 BYRADIUS 1 m",
        "GEOSEARCH Sicily FROMLONLAT 0 86 BYRADIUS 1 m",
        "GEOSEARCH Sicily BYRADIUS 1 m",
        "GEOSEARCH Sicily FROMLONLAT 0 0",
        "GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1 m BYBOX 1 1 m",
        "GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS -1 m",
        "GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS x m",
        "GEOSEARCH Sicily FROMLONLAT 0 0 BYBOX -1 1 m",
        "GEOSEARCH Sicily FROMLONLAT 0 0 BYBOX 1 x m",
        "GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1 parsecs",
        "GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1 m COUNT 0",
        "GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1 m ANY",
        "GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1 m STORE x",
        "GEOSEARCHSTORE dest Sicily FROMLONLAT 15 37 BYRADIUS 200 km",
        "ZRANGE dest 0 -1 WITHSCORES",
        // STOREDIST scores are compared by range: the sorted sets print scores in their
        // shortest form where Redis prints 17 digits (README, differences).
        "GEOSEARCHSTORE dest Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST ASC COUNT 1",
        "ZRANGE dest 0 -1",
        "GEOSEARCHSTORE dest Sicily FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST",
        "GEOSEARCHSTORE dest Sicily FROMLONLAT 0 0 BYRADIUS 1 m",
        "EXISTS dest",
        "GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD ASC",
        "GEORADIUS Sicily 15 37 200 km STORE r1",
        "ZRANGE r1 0 -1 WITHSCORES",
        "GEORADIUS Sicily 15 37 200 km STOREDIST r2 DESC",
        "ZRANGE r2 0 -1",
        "ZRANGEBYSCORE r2 56.4412 56.4413",
        "GEORADIUS Sicily 15 37 200 km STORE r1 WITHDIST",
        "GEORADIUS_RO Sicily 15 37 200 km WITHHASH",
        "GEORADIUS_RO Sicily 15 37 200 km STORE r3",
        "GEORADIUSBYMEMBER Sicily Palermo 300 km WITHDIST ASC",
        "GEORADIUSBYMEMBER Sicily nobody 300 km",
        "GEORADIUSBYMEMBER_RO Sicily Catania 100 mi WITHCOORD",
        "GEORADIUSBYMEMBER nokey nobody 300 km STORE r4",
        "SET str x",
        "GEOADD str 1 1 a",
        "GEOPOS str a",
        "GEOSEARCH str FROMLONLAT 0 0 BYRADIUS 1 m",
        "GEOADD Sicily 1 1",
        "GEOADD Sicily NX XX 1 1 a",
        "GEOADD Sicily 181 1 a",
        "GEOADD Sicily x 1 a",
        "GEOADD Sicily 1 -85.06 a",
    ]);
    assert_same_replies("geo_replies_match_redis_server", &node, &commands);
}

/// Random points and searches: the same members, distances and coordinates as redis-server.
#[test]
fn random_searches_find_what_redis_server_finds() {
    let node = Node::start(&[]);
    let Some(redis) = reference("random_searches_find_what_redis_server_finds") else {
        return;
    };
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut commands = Vec::new();
    for i in 0..400 {
        let long = -180.0 + 360.0 * next();
        let lat = -85.0 + 170.0 * next();
        commands.push(vec![
            "GEOADD".into(),
            "points".into(),
            format!("{long:.6}"),
            format!("{lat:.6}"),
            format!("p{i}"),
        ]);
    }
    for _ in 0..60 {
        let long = format!("{:.4}", -180.0 + 360.0 * next());
        let lat = format!("{:.4}", -85.0 + 170.0 * next());
        let radius = format!("{:.1}", 10.0 + 3000.0 * next());
        let shape: Vec<String> = if next() < 0.5 {
            vec!["BYRADIUS".into(), radius, "km".into()]
        } else {
            vec!["BYBOX".into(), radius.clone(), radius, "km".into()]
        };
        let mut c: Vec<String> = ["GEOSEARCH", "points", "FROMLONLAT"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        c.extend([long, lat]);
        c.extend(shape);
        c.extend(["ASC", "WITHDIST", "WITHCOORD", "WITHHASH"].map(String::from));
        commands.push(c);
    }
    let ours = replies(node.port, false, &commands);
    let theirs = replies(redis.port, false, &commands);
    for ((c, o), t) in commands.iter().zip(&ours).zip(&theirs) {
        assert_eq!(o, t, "{c:?}");
    }
}

#[test]
fn stored_searches_need_one_slot_in_cluster_mode() {
    let node = Node::start(&["--cluster-enabled", "yes"]);
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
    let crossslot = "CROSSSLOT Keys in request don't hash to the same slot";
    assert_eq!(
        node.cli(&["GEOADD", "{g}src", "13.361389", "38.115556", "Palermo"]),
        "1"
    );
    assert_eq!(
        node.cli(&[
            "GEOSEARCHSTORE",
            "dest",
            "{g}src",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "100",
            "km"
        ]),
        crossslot
    );
    assert_eq!(
        node.cli(&[
            "GEORADIUS",
            "{g}src",
            "13",
            "38",
            "100",
            "km",
            "STORE",
            "dest"
        ]),
        crossslot
    );
    assert_eq!(
        node.cli(&[
            "GEORADIUS",
            "{g}src",
            "13",
            "38",
            "100",
            "km",
            "STORE",
            "{g}dest"
        ]),
        "1"
    );
    assert_eq!(node.cli(&["ZCARD", "{g}dest"]), "1");
    assert_eq!(
        node.cli(&[
            "COMMAND",
            "GETKEYS",
            "GEORADIUSBYMEMBER",
            "{g}src",
            "Palermo",
            "1",
            "km",
            "STOREDIST",
            "{g}d2"
        ]),
        "{g}src\n{g}d2"
    );
}

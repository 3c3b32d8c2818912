//! Goal: the fabric transport carries the client's requests and replies whole and in order,
//! including transfers larger than its channels and the stream's window, reports a node that
//! closes the stream as `Closed`, and names the provider's reason when a provider cannot open.
//! Method: a real `ofi:tcp` listener in this process serving a server-side bus Stream that
//! answers `ECHO x` with `x` and `QUIT` with `+OK` and a close; the client is the library's own
//! `Client` over `Target::Fabric`. Needs libfabric (scripts/install-deps.sh).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bus::ofi::{OfiKind, OfiProvider};
use bus::stream::{Stream, RX_SIZE_DEFAULT};
use bus::{EndpointConfig, Listener, Provider};
use proto::resp::{decode, Frame};

use super::*;

const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// Serves one fabric client on `ofi:tcp`: echoes `ECHO`'s argument, answers `QUIT` with `+OK`
/// and closes. Returns the listener's address.
fn echo_server() -> (SocketAddr, std::thread::JoinHandle<()>) {
    let provider = OfiProvider::open(OfiKind::Tcp).expect("libfabric (scripts/install-deps.sh)");
    let mut listener = provider
        .listen(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            &EndpointConfig::default(),
        )
        .unwrap();
    let addr = listener.local_addr();
    let server = std::thread::spawn(move || {
        let conn = listener.accept(STEP_TIMEOUT).unwrap().expect("a client");
        let mut stream = Stream::server(conn, RX_SIZE_DEFAULT).unwrap();
        let started = Instant::now();
        let mut input = Vec::new();
        let mut output: Vec<u8> = Vec::new();
        let mut scratch = vec![0u8; 64 * 1024];
        let mut quitting = false;
        let deadline = Instant::now() + STEP_TIMEOUT * 3;
        while Instant::now() < deadline {
            if stream.progress(started.elapsed()).is_err() {
                return; // the client closed
            }
            while let Ok(n @ 1..) = stream.read(&mut scratch) {
                input.extend_from_slice(&scratch[..n]);
            }
            // As Redis: nothing after QUIT is executed.
            if quitting {
                input.clear();
            }
            while let Some((frame, used)) = decode(&input).unwrap() {
                input.drain(..used);
                if quitting {
                    input.clear();
                    break;
                }
                let Frame::Array(args) = frame else {
                    panic!("requests are arrays")
                };
                match args[0].as_bytes().unwrap() {
                    b"QUIT" => {
                        output.extend_from_slice(b"+OK\r\n");
                        quitting = true;
                    }
                    _ => {
                        let arg = args[1].as_bytes().unwrap();
                        output.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                        output.extend_from_slice(arg);
                        output.extend_from_slice(b"\r\n");
                    }
                }
            }
            let n = stream.write(&output).unwrap();
            output.drain(..n);
            stream.flush().unwrap();
            if quitting && output.is_empty() {
                // Let the last reply's WRITE complete before the connection goes.
                for _ in 0..100 {
                    let _ = stream.progress(started.elapsed());
                    std::thread::sleep(Duration::from_millis(1));
                }
                stream.close("QUIT");
                return;
            }
            std::thread::yield_now();
        }
        panic!("the echo server ran out of time");
    });
    (addr, server)
}

fn fabric_target(provider: &str, addr: SocketAddr) -> Target {
    Target::Fabric {
        provider: provider.into(),
        host: addr.ip().to_string(),
        port: addr.port(),
    }
}

/// The library's client, connected over `ofi:tcp` to `addr`.
async fn connect_over_ofi_tcp(addr: SocketAddr) -> Client {
    Client::connect(&ConnectOptions::new(fabric_target("ofi:tcp", addr)))
        .await
        .unwrap()
}

/// Pipelines `count` ECHOs of `<tag><i>` and asserts every reply is its argument, in order.
async fn assert_echoes_in_order(client: &mut Client, tag: &str, count: usize) {
    let commands: Vec<Vec<String>> = (0..count)
        .map(|i| vec!["ECHO".into(), format!("{tag}{i}")])
        .collect();
    let replies = client.pipeline(&commands).await.unwrap();
    let expected: Vec<Frame> = (0..count)
        .map(|i| Frame::bulk(format!("{tag}{i}").as_bytes()))
        .collect();
    assert_eq!(replies, expected, "echoes tagged {tag}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_replies_cross_the_fabric_whole_and_in_order() {
    let (addr, server) = echo_server();
    let mut client = connect_over_ofi_tcp(addr).await;
    assert_echoes_in_order(&mut client, "m", 500).await;
    // 3 MiB each way: more than the stream's 1 MiB window and the channels' 1 MiB, so both
    // directions go through partial writes and full channels.
    let big: String = (0..3 * 1024 * 1024)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let reply = client.request(&["ECHO", big.as_str()]).await.unwrap();
    assert_eq!(reply.as_bytes(), Some(big.as_bytes()));
    // The last reply before the node closes arrives whole.
    assert_eq!(
        client.request(&["QUIT"]).await.unwrap(),
        Frame::simple("OK")
    );
    server.join().unwrap();
}

/// Goal: connections sharing a driver thread keep their own replies in their own order, and
/// one ending (the node closes it after QUIT) leaves the others running. Method: six clients,
/// each on its own echo server, pipelining at once; the first quits half-way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_sharing_a_driver_stay_apart() {
    const CLIENTS: usize = 6;
    let mut servers = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let (addr, server) = echo_server();
        servers.push(server);
        let mut client = connect_over_ofi_tcp(addr).await;
        tasks.spawn(async move {
            for round in 0..4 {
                assert_echoes_in_order(&mut client, &format!("c{c}r{round}m"), 200).await;
                if c == 0 && round == 1 {
                    break;
                }
            }
            let quit = client.request(&["QUIT"]).await.unwrap();
            assert_eq!(quit, Frame::simple("OK"), "client {c}");
            // The node closed the stream: the next request fails instead of hanging.
            assert!(
                client.request(&["ECHO", "late"]).await.is_err(),
                "client {c}"
            );
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    for server in servers {
        server.join().unwrap();
    }
}

/// Goal: a node that closes the stream while the client is still writing a long pipeline,
/// with more replies pending than the client's reply channel holds, fails the client's write
/// instead of leaving both waiting on each other (the driver holds replies until the client
/// reads; the client reads only after writing). Method: 1.5 MiB of replies, then QUIT, then
/// 64 MiB more requests (more than can cross before the node closes), all in one pipeline; it
/// must end, with an error, within a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_closing_mid_pipeline_fails_the_write_instead_of_hanging() {
    let (addr, server) = echo_server();
    let mut client = connect_over_ofi_tcp(addr).await;
    let chunk: String = "x".repeat(64 * 1024);
    let mut commands: Vec<Vec<String>> = (0..24)
        .map(|_| vec!["ECHO".into(), chunk.clone()])
        .collect();
    commands.push(vec!["QUIT".into()]);
    commands.extend((0..1024).map(|_| vec!["ECHO".into(), chunk.clone()]));
    let outcome = tokio::time::timeout(STEP_TIMEOUT, client.pipeline(&commands)).await;
    match outcome {
        Ok(result) => assert!(
            result.is_err(),
            "the node closed: the pipeline cannot succeed"
        ),
        Err(_) => panic!("the pipeline hung after the node closed the stream"),
    }
    server.join().unwrap();
}

/// Goal: the driver takes a node as gone only after it was silent for PEER_SILENCE_MAX, and
/// anything received restarts the count. Method: the tracker on a made-up clock.
#[test]
fn a_node_is_presumed_gone_only_after_a_silence_of_the_limit() {
    let t0 = Instant::now();
    let mut live = Liveness::new(t0);
    assert!(live.heard(0, t0 + PEER_SILENCE_MAX / 2));
    assert!(live.heard(1, t0 + PEER_SILENCE_MAX - Duration::from_millis(1)));
    let heard_at = t0 + PEER_SILENCE_MAX - Duration::from_millis(1);
    assert!(live.heard(1, heard_at + PEER_SILENCE_MAX / 2));
    assert!(!live.heard(1, heard_at + PEER_SILENCE_MAX));
}

#[tokio::test]
async fn a_provider_that_cannot_open_is_named_with_its_reason() {
    let addr = SocketAddr::from(([127, 0, 0, 1], 1));
    let err = Client::connect(&ConnectOptions::new(fabric_target("ib", addr)))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Fabric { .. }), "{err:?}");
    assert!(
        err.to_string().contains("ofi:shm"),
        "lists the names: {err}"
    );
    // verbs on a host without an RDMA device (CI) is Unavailable, with the reason.
    if let Err(err) = Client::connect(&ConnectOptions::new(fabric_target("verbs", addr))).await {
        assert!(matches!(err, ClientError::Fabric { .. }), "{err:?}");
        assert!(err.is_fatal());
        assert!(err.to_string().contains("over fabric verbs"), "{err}");
    }
}

/// Goal: an idle driver goes from spinning to sleeps that double up to the cap, and any
/// activity brings it back to spinning. Method: the back-off on a made-up clock.
#[test]
fn the_idle_back_off_spins_then_sleeps_longer_up_to_the_cap() {
    let t0 = Instant::now();
    let mut backoff = Backoff::new(t0);
    assert_eq!(backoff.next(true, t0), Idle::Spin);
    assert_eq!(backoff.next(false, t0 + SPIN / 2), Idle::Spin);
    let later = t0 + SPIN;
    assert_eq!(backoff.next(false, later), Idle::Sleep(IDLE_SLEEP_MIN));
    assert_eq!(backoff.next(false, later), Idle::Sleep(IDLE_SLEEP_MIN * 2));
    let mut last = Duration::ZERO;
    for _ in 0..64 {
        match backoff.next(false, later) {
            Idle::Sleep(d) => last = d,
            Idle::Spin => panic!("idle past SPIN must sleep"),
        }
    }
    assert_eq!(last, IDLE_SLEEP_MAX);
    assert_eq!(backoff.next(true, later), Idle::Spin);
    assert_eq!(
        backoff.next(false, later + SPIN),
        Idle::Sleep(IDLE_SLEEP_MIN)
    );
}

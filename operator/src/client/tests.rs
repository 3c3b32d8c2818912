//! Goal: the client against a scripted server over real TCP: pipelined replies come back in
//! order, AUTH and HELLO are sent as specified and their failures are typed, the reply and
//! request limits hold, and a closed or garbled connection is reported as such.

use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use proto::resp::{decode, Frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

type Requests = Arc<Mutex<Vec<Vec<String>>>>;

/// Serves one connection: every request it decodes is recorded and answered with what
/// `respond` returns (`None` closes the connection).
async fn scripted_server<F>(respond: F) -> (Target, Requests)
where
    F: Fn(&[String]) -> Option<Vec<u8>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests: Requests = Arc::default();
    let seen = Arc::clone(&requests);
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = BytesMut::new();
        loop {
            while let Some((frame, used)) = decode(&buf).unwrap() {
                let _ = buf.split_to(used);
                let Frame::Array(items) = frame else {
                    panic!("requests are arrays")
                };
                let args: Vec<String> = items
                    .iter()
                    .map(|i| String::from_utf8_lossy(i.as_bytes().unwrap()).into_owned())
                    .collect();
                seen.lock().unwrap().push(args.clone());
                match respond(&args) {
                    Some(reply) => socket.write_all(&reply).await.unwrap(),
                    None => return,
                }
            }
            if socket.read_buf(&mut buf).await.unwrap() == 0 {
                return;
            }
        }
    });
    (Target::tcp("127.0.0.1", port), requests)
}

#[tokio::test]
async fn pipelined_replies_come_back_in_order() {
    let (target, requests) =
        scripted_server(|args| Some(format!("${}\r\n{}\r\n", args[1].len(), args[1]).into_bytes()))
            .await;
    let mut client = Client::connect(&ConnectOptions::new(target)).await.unwrap();
    let commands: Vec<Vec<String>> = (0..100)
        .map(|i| vec!["ECHO".into(), format!("m{i}")])
        .collect();
    let replies = client.pipeline(&commands).await.unwrap();
    let expected: Vec<Frame> = (0..100)
        .map(|i| Frame::bulk(format!("m{i}").as_bytes()))
        .collect();
    assert_eq!(replies, expected);
    assert_eq!(*requests.lock().unwrap(), commands);
    // Manual pipelining: queue, flush, read.
    client.queue(&["ECHO", "a"]).unwrap();
    client
        .queue_raw(b"*2\r\n$4\r\nECHO\r\n$1\r\nb\r\n")
        .unwrap();
    client.flush().await.unwrap();
    assert_eq!(client.read_reply().await.unwrap(), Frame::bulk(b"a"));
    assert_eq!(client.read_reply().await.unwrap(), Frame::bulk(b"b"));
}

#[tokio::test]
async fn auth_and_hello_are_sent_and_their_refusals_are_typed() {
    let (target, requests) = scripted_server(|args| {
        Some(match args[0].as_str() {
            "AUTH" if args.last().unwrap() == "right" => b"+OK\r\n".to_vec(),
            "AUTH" => b"-WRONGPASS invalid username-password pair\r\n".to_vec(),
            _ => b"+PONG\r\n".to_vec(),
        })
    })
    .await;
    let mut options = ConnectOptions::new(target.clone());
    options.password = Some("wrong".into());
    match Client::connect(&options).await {
        Err(ClientError::Auth(message)) => assert!(message.starts_with("WRONGPASS"), "{message}"),
        other => panic!("expected an AUTH failure, got {other:?}"),
    }
    assert_eq!(*requests.lock().unwrap(), [["AUTH", "wrong"]]);

    let (target, requests) = scripted_server(|args| {
        Some(match args[0].as_str() {
            "HELLO" => b"%1\r\n+proto\r\n:3\r\n".to_vec(),
            _ => b"_\r\n".to_vec(),
        })
    })
    .await;
    let mut options = ConnectOptions::new(target);
    options.protocol = Protocol::Resp3;
    options.user = Some("alice".into());
    options.password = Some("pw".into());
    let mut client = Client::connect(&options).await.unwrap();
    assert_eq!(client.protocol(), Protocol::Resp3);
    assert_eq!(client.request(&["GET", "x"]).await.unwrap(), Frame::Null);
    assert_eq!(
        requests.lock().unwrap()[0],
        ["HELLO", "3", "AUTH", "alice", "pw"]
    );

    let (target, _) =
        scripted_server(|_| Some(b"-NOPROTO unsupported protocol version\r\n".to_vec())).await;
    let mut options = ConnectOptions::new(target);
    options.protocol = Protocol::Resp3;
    assert!(matches!(
        Client::connect(&options).await,
        Err(ClientError::Hello(_))
    ));
}

#[tokio::test]
async fn call_turns_error_replies_into_errors_and_request_keeps_them() {
    let (target, _) = scripted_server(|_| Some(b"-ERR nope\r\n".to_vec())).await;
    let mut client = Client::connect(&ConnectOptions::new(target)).await.unwrap();
    assert_eq!(
        client.request(&["X"]).await.unwrap(),
        Frame::error("ERR nope")
    );
    let err = client.call(&["X"]).await.unwrap_err();
    assert!(matches!(&err, ClientError::Server(m) if m == "ERR nope"));
    assert!(
        !err.is_fatal(),
        "the connection stays usable after an error reply"
    );
}

#[tokio::test]
async fn a_reply_over_the_limit_is_refused() {
    let (target, _) = scripted_server(|args| {
        let len: usize = args[1].parse().unwrap();
        Some(format!("${len}\r\n{}\r\n", "x".repeat(len)).into_bytes())
    })
    .await;
    let mut options = ConnectOptions::new(target);
    options.limits.reply_bytes_max = 4096;
    let mut client = Client::connect(&options).await.unwrap();
    // Just under the limit (header and CRLFs included) is fine.
    let fits = client.request(&["BIG", "4000"]).await.unwrap();
    assert_eq!(fits.as_bytes().map(<[u8]>::len), Some(4000));
    match client.request(&["BIG", "100000"]).await {
        Err(e @ ClientError::ReplyTooLarge { .. }) => assert!(e.is_fatal()),
        other => panic!("expected ReplyTooLarge, got {other:?}"),
    }
}

#[tokio::test]
async fn a_request_over_the_limit_is_refused_before_sending() {
    let (target, requests) = scripted_server(|_| Some(b"+OK\r\n".to_vec())).await;
    let mut options = ConnectOptions::new(target);
    options.limits.request_bytes_max = 100;
    let mut client = Client::connect(&options).await.unwrap();
    let big = "v".repeat(200);
    assert!(matches!(
        client.request(&["SET", "k", &big]).await,
        Err(ClientError::RequestTooLarge { max: 100, .. })
    ));
    // Nothing of the refused request was queued: the next one goes through alone.
    assert_eq!(
        client.request(&["PING"]).await.unwrap(),
        Frame::simple("OK")
    );
    assert_eq!(*requests.lock().unwrap(), [["PING"]]);
}

#[tokio::test]
async fn closed_and_garbled_connections_are_reported() {
    let (target, _) = scripted_server(|_| None).await;
    let mut client = Client::connect(&ConnectOptions::new(target)).await.unwrap();
    assert!(matches!(
        client.request(&["PING"]).await,
        Err(ClientError::Closed)
    ));

    let (target, _) = scripted_server(|_| Some(b"?what\r\n".to_vec())).await;
    let mut client = Client::connect(&ConnectOptions::new(target)).await.unwrap();
    assert!(matches!(
        client.request(&["PING"]).await,
        Err(ClientError::Protocol(_))
    ));
}

#[tokio::test]
async fn pushes_are_set_aside_except_subscription_confirmations() {
    let (target, _) = scripted_server(|args| {
        Some(match args[0].as_str() {
            "GET" => b">2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n$1\r\nv\r\n".to_vec(),
            _ => b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n".to_vec(),
        })
    })
    .await;
    let mut client = Client::connect(&ConnectOptions::new(target)).await.unwrap();
    assert_eq!(
        client.request(&["GET", "k"]).await.unwrap(),
        Frame::bulk(b"v")
    );
    let pushes = client.take_pushes();
    assert_eq!(pushes.len(), 1);
    assert!(matches!(&pushes[0], Frame::Push(items) if items[0] == Frame::simple("invalidate")));
    let confirmation = client.request(&["SUBSCRIBE", "ch"]).await.unwrap();
    assert!(matches!(confirmation, Frame::Push(items) if items.len() == 3));
    assert!(client.take_pushes().is_empty());
    assert_eq!(client.pushes_dropped(), 0);
}

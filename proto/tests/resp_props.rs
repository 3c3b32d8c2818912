//! Property tests of the RESP codec and the server's request parser.
//!
//! Goal: what the codec writes it reads back whole and exactly; a buffer cut short anywhere
//! asks for more; no input, however wrong, panics; and the request parser's answer does not
//! depend on how the bytes were split into reads. Method: proptest over generated frames
//! (every RESP2/RESP3 type, nested a few levels), over random and RESP-flavoured bytes, and
//! over random chunkings of request streams; the byte-level oracles are the ones the fuzz
//! targets run (`proto::resp::fuzz_checks`).

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use proto::resp::fuzz_checks::{self, run_request_parser};
use proto::resp::limits::RequestLimits;
use proto::resp::{decode, encode, Frame};

fn wire(frame: &Frame) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(frame, &mut out);
    out.to_vec()
}

/// Bytes that a line-typed frame (`+`, `-`) may hold: anything but CR and LF.
fn line_bytes() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..24,
    )
    .prop_map(Bytes::from)
}

fn any_bytes() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from)
}

fn leaf() -> impl Strategy<Value = Frame> {
    prop_oneof![
        line_bytes().prop_map(Frame::Simple),
        line_bytes().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        any_bytes().prop_map(Frame::Bulk),
        Just(Frame::Null),
        Just(Frame::NullBulk),
        Just(Frame::NullArray),
        // NaN is not equal to itself; its round trip is checked by `nan_round_trips`.
        any::<f64>()
            .prop_filter("not NaN", |v| !v.is_nan())
            .prop_map(Frame::Double),
        any::<bool>().prop_map(Frame::Boolean),
        "[-+]?[0-9]{1,60}".prop_map(|s| Frame::BigNumber(Bytes::from(s))),
        (any::<[u8; 3]>(), any_bytes()).prop_map(|(format, text)| Frame::Verbatim { format, text }),
        any_bytes().prop_map(Frame::BlobError),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    leaf().prop_recursive(4, 64, 6, |inner| {
        let pairs = proptest::collection::vec((inner.clone(), inner.clone()), 0..4);
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Array),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Set),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Push),
            pairs.clone().prop_map(Frame::Map),
            (pairs, inner).prop_map(|(attrs, data)| Frame::Attribute {
                attrs,
                data: Box::new(data),
            }),
        ]
    })
}

/// Byte strings made of RESP pieces, so random input reaches deep into the grammar.
fn resp_flavoured() -> impl Strategy<Value = Vec<u8>> {
    const TOKENS: &[&[u8]] = &[
        b"\r\n",
        b"\r",
        b"\n",
        b"*",
        b"$",
        b"%",
        b"~",
        b">",
        b"|",
        b"=",
        b"!",
        b"(",
        b",",
        b"#",
        b"_",
        b":",
        b"+",
        b"-",
        b"-1",
        b"0",
        b"1",
        b"2",
        b"3",
        b"txt:",
        b"inf",
        b"nan",
        b"t",
        b"2147483648",
        b"536870913",
        b"9223372036854775808",
        b"\"",
        b"'",
        b" ",
        b"\\x4",
        b"abc",
    ];
    let token = prop::sample::select(TOKENS);
    proptest::collection::vec(token, 0..48).prop_map(|tokens| tokens.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn frames_round_trip(frame in frame(), trailing in any_bytes()) {
        let bytes = wire(&frame);
        prop_assert_eq!(decode(&bytes), Ok(Some((frame.clone(), bytes.len()))));
        // Bytes after the frame are not consumed.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&trailing);
        prop_assert_eq!(decode(&longer), Ok(Some((frame, bytes.len()))));
    }

    #[test]
    fn every_truncation_asks_for_more(frame in frame()) {
        let bytes = wire(&frame);
        for end in 0..bytes.len() {
            prop_assert_eq!(decode(&bytes[..end]), Ok(None), "prefix of {} bytes", end);
        }
    }

    #[test]
    fn frames_in_a_row_decode_in_order(frames in proptest::collection::vec(frame(), 1..5)) {
        let mut bytes = Vec::new();
        for frame in &frames {
            bytes.extend(wire(frame));
        }
        let mut at = 0;
        for frame in &frames {
            let (got, used) = decode(&bytes[at..]).unwrap().unwrap();
            prop_assert_eq!(&got, frame);
            at += used;
        }
        prop_assert_eq!(at, bytes.len());
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz_checks::resp_decode(&bytes);
    }

    #[test]
    fn resp_flavoured_bytes_never_panic(bytes in resp_flavoured()) {
        fuzz_checks::resp_decode(&bytes);
    }

    #[test]
    fn mutated_frames_never_panic(frame in frame(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = wire(&frame);
        let i = at.index(bytes.len());
        bytes[i] = byte;
        fuzz_checks::resp_decode(&bytes);
    }

    #[test]
    fn request_parser_ignores_read_boundaries(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz_checks::request_parser(&bytes);
    }

    #[test]
    fn request_parser_ignores_read_boundaries_of_resp(
        header in any::<u8>(),
        bytes in resp_flavoured(),
    ) {
        let mut input = vec![header];
        input.extend(bytes);
        fuzz_checks::request_parser(&input);
    }

    #[test]
    fn request_streams_parse_the_same_in_any_chunks(
        commands in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 0..5),
            1..6,
        ),
        inline in "[a-z \"'\\\\]{0,20}",
        chunks in proptest::collection::vec(1usize..16, 0..64),
    ) {
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for args in &commands {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            stream.extend(wire(&Frame::command(&refs)));
            expected.push(args.clone());
        }
        stream.extend_from_slice(inline.as_bytes());
        stream.extend_from_slice(b"\r\n");
        let limits = RequestLimits::default();
        let whole = run_request_parser(&stream, [stream.len()], &limits);
        prop_assert_eq!(&whole.requests[..expected.len()], &expected[..]);
        prop_assert_eq!(run_request_parser(&stream, chunks, &limits), whole);
    }
}

#[test]
fn nan_round_trips() {
    let frame = Frame::Array(vec![Frame::Double(f64::NAN)]);
    let bytes = wire(&frame);
    assert_eq!(bytes, b"*1\r\n,nan\r\n");
    let (Frame::Array(items), used) = decode(&bytes).unwrap().unwrap() else {
        panic!("expected an array");
    };
    assert_eq!(used, bytes.len());
    assert!(matches!(items[..], [Frame::Double(v)] if v.is_nan()));
}

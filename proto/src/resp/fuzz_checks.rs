//! What must hold for any input bytes: the oracles shared by the cargo-fuzz targets
//! (`fuzz/fuzz_targets/`), the stable-Rust fuzz driver (`proto/examples/fuzz_resp.rs`) and the
//! property tests. Each function panics when a property fails, which is what a fuzzer reports.
//! None of them does I/O.

use super::limits::{RequestLimits, MAX_INLINE_LEN};
use super::request::Parsed;
use super::{decode, DecodeError, Frame, ProtocolError, RequestParser};

/// Decodes `data` and checks what any answer implies:
/// - a frame took between 1 and `data.len()` bytes;
/// - its encoding is canonical: it decodes to a frame that encodes to the same bytes, taking
///   all of them, and proper prefixes of those bytes ask for more;
/// - the answer is monotonic: one byte less gives the same frame or error, or `Ok(None)`.
pub fn resp_decode(data: &[u8]) {
    let got = decode(data);
    if let Ok(Some((frame, used))) = &got {
        assert!(
            *used >= 1 && *used <= data.len(),
            "used {used} of {}",
            data.len()
        );
        let wire = frame.to_bytes();
        let again = decode(&wire);
        let Ok(Some((again, again_used))) = again else {
            panic!("{frame:?} encoded as {wire:?} decodes as {again:?}");
        };
        assert_eq!(again_used, wire.len(), "{frame:?} encoded as {wire:?}");
        assert_eq!(again.to_bytes(), wire, "{frame:?} is not canonical");
        // A few prefixes, not all: checking all would be quadratic in the input length.
        for end in [0, wire.len() / 2, wire.len() - 1] {
            assert_eq!(decode(&wire[..end]), Ok(None), "prefix {end} of {wire:?}");
        }
        assert_eq!(decode(&data[..*used - 1]), Ok(None), "prefix of {data:?}");
    }
    if let Some((_, shorter)) = data.split_last() {
        match decode(shorter) {
            Ok(None) => {}
            earlier => assert!(
                same_frames(&earlier, &got),
                "{earlier:?} for a prefix, {got:?} for {data:?}"
            ),
        }
    }
}

/// Equality of two decode results, where NaN equals NaN (as its wire form `nan` does).
fn same_frames(
    a: &Result<Option<(Frame, usize)>, DecodeError>,
    b: &Result<Option<(Frame, usize)>, DecodeError>,
) -> bool {
    match (a, b) {
        (Ok(Some((fa, ua))), Ok(Some((fb, ub)))) => ua == ub && fa.to_bytes() == fb.to_bytes(),
        _ => a == b,
    }
}

/// What a server sees from one connection's bytes: each request's arguments (empty for an
/// empty request such as `*0`), then either an error or the count of bytes left buffered.
#[derive(Debug, PartialEq, Eq)]
pub struct ParserRun {
    pub requests: Vec<Vec<Vec<u8>>>,
    pub end: Result<usize, ProtocolError>,
}

/// Feeds `stream` to a [`RequestParser`] in chunks of the given lengths (the last chunk takes
/// whatever is left), as a server would: appending each read to its buffer, parsing every
/// complete request, and dropping the bytes of each request once parsed.
pub fn run_request_parser(
    stream: &[u8],
    chunks: impl IntoIterator<Item = usize>,
    limits: &RequestLimits,
) -> ParserRun {
    let mut parser = RequestParser::new();
    let mut buf = Vec::new();
    let mut requests = Vec::new();
    let mut fed = 0;
    let mut chunks = chunks.into_iter();
    while fed < stream.len() {
        let len = chunks.next().unwrap_or(usize::MAX).max(1);
        let end = stream.len().min(fed.saturating_add(len));
        buf.extend_from_slice(&stream[fed..end]);
        fed = end;
        loop {
            match parser.parse(&buf, limits) {
                Ok(Parsed::Request { len }) => {
                    assert!(len >= 1 && len <= buf.len(), "request of {len} bytes");
                    let args = (0..parser.arg_count())
                        .map(|i| parser.arg(&buf, i).to_vec())
                        .collect();
                    requests.push(args);
                    buf.drain(..len);
                }
                Ok(Parsed::Empty { len }) => {
                    assert!(len >= 1 && len <= buf.len(), "empty request of {len} bytes");
                    requests.push(Vec::new());
                    buf.drain(..len);
                }
                Ok(Parsed::Incomplete) => break,
                Err(e) => {
                    return ParserRun {
                        requests,
                        end: Err(e),
                    }
                }
            }
        }
    }
    ParserRun {
        requests,
        end: Ok(buf.len()),
    }
}

/// Splits `data` into a header that picks limits and chunk lengths, and a stream for the
/// request parser; checks that parsing the stream in those chunks gives the same requests and
/// the same end as parsing it in one piece.
///
/// Streams longer than `MAX_INLINE_LEN` are parsed without the comparison: there, as in Redis,
/// whether an unterminated line is "too big" depends on how much of it had arrived.
pub fn request_parser(data: &[u8]) {
    let Some((&header, stream)) = data.split_first() else {
        return;
    };
    let limits = RequestLimits {
        // Small limits reach the length errors with small inputs.
        max_bulk_len: if header & 1 == 0 { 1 << 20 } else { 20 },
        max_multibulk_len: if header & 2 == 0 { 1 << 20 } else { 5 },
        unauthenticated: header & 4 != 0,
    };
    // Chunk lengths from 1 to `most` bytes, from a generator seeded by the header and the
    // stream's length.
    let most = 1 + (header >> 3) as usize;
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ (header as u64) ^ ((stream.len() as u64) << 8);
    let chunks = std::iter::from_fn(move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        Some(1 + (state % most as u64) as usize)
    });
    let chunked = run_request_parser(stream, chunks, &limits);
    if stream.len() <= MAX_INLINE_LEN {
        let whole = run_request_parser(stream, [stream.len()], &limits);
        assert_eq!(
            chunked, whole,
            "chunks of at most {most} bytes of {stream:?}"
        );
        let bytewise = run_request_parser(stream, std::iter::repeat(1), &limits);
        assert_eq!(bytewise, whole, "single bytes of {stream:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oracles_accept_good_and_bad_input() {
        for input in [
            &b""[..],
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
            b"%1\r\n,nan\r\n_\r\n",
            b"*1\r\n:1",
            b"@@",
            b"\x00*1\r\n$3\r\nGET\r\nPING\r\n*0\r\n\r\n",
            b"\x07*2\r\n$3\r\nGET\r\n$20000\r\n",
        ] {
            resp_decode(input);
            request_parser(input);
        }
    }

    #[test]
    fn parser_runs_record_requests_and_leftovers() {
        let limits = RequestLimits::default();
        let run = run_request_parser(b"PING\r\n*1\r\n$4\r\nECHO\r\n*1", [3, 5], &limits);
        assert_eq!(
            run,
            ParserRun {
                requests: vec![vec![b"PING".to_vec()], vec![b"ECHO".to_vec()]],
                end: Ok(2),
            }
        );
    }
}

//! The little HTTP/1.1 a scraper needs: one `GET` request head read with limits, one
//! response, connection closed. Nothing else is served.

/// Longest request head read (request line and headers); past it the request is refused.
pub const REQUEST_HEAD_MAX: usize = 8 * 1024;
/// Most header lines read.
pub const HEADERS_MAX: usize = 64;

#[derive(Debug, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    pub path: String,
    /// The `Authorization` header's value, if sent.
    pub authorization: Option<String>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the request head is longer than {REQUEST_HEAD_MAX} bytes")]
    TooLong,
    #[error("more than {HEADERS_MAX} headers")]
    TooManyHeaders,
    #[error("malformed request: {0}")]
    Malformed(&'static str),
}

/// Where the head ends (after the blank line), if it has arrived whole.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Parses a complete request head (up to and including the blank line).
pub fn parse_head(head: &[u8]) -> Result<RequestHead, HeadError> {
    if head.len() > REQUEST_HEAD_MAX {
        return Err(HeadError::TooLong);
    }
    let text = std::str::from_utf8(head).map_err(|_| HeadError::Malformed("not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().ok_or(HeadError::Malformed("empty"))?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed("request line"));
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !path.starts_with('/') {
        return Err(HeadError::Malformed("request line"));
    }
    let mut authorization = None;
    let mut count = 0;
    for line in lines.take_while(|l| !l.is_empty()) {
        count += 1;
        if count > HEADERS_MAX {
            return Err(HeadError::TooManyHeaders);
        }
        let (name, value) = line
            .split_once(':')
            .ok_or(HeadError::Malformed("header line"))?;
        if name.trim().eq_ignore_ascii_case("authorization") {
            authorization = Some(value.trim().to_string());
        }
    }
    Ok(RequestHead {
        method: method.to_string(),
        path: path.to_string(),
        authorization,
    })
}

/// A whole response, `Connection: close`.
pub fn response(status: &str, content_type: &str, body: &[u8], extra_headers: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_request_is_read_with_its_authorization() {
        let raw = b"GET /metrics HTTP/1.1\r\nHost: x\r\nauthorization:  Bearer t0k\r\n\r\n";
        assert_eq!(head_end(raw), Some(raw.len()));
        let head = parse_head(raw).unwrap();
        assert_eq!(head.method, "GET");
        assert_eq!(head.path, "/metrics");
        assert_eq!(head.authorization.as_deref(), Some("Bearer t0k"));
    }

    #[test]
    fn bad_heads_are_refused() {
        assert!(head_end(b"GET / HTTP/1.1\r\n").is_none());
        for bad in [
            &b"GET\r\n\r\n"[..],
            b"GET /x HTTP/1.1 extra\r\n\r\n",
            b"GET x HTTP/1.1\r\n\r\n",
            b"GET /x SPDY/3\r\n\r\n",
            b"GET /x HTTP/1.1\r\nno colon\r\n\r\n",
            b"\xff\xfe /x HTTP/1.1\r\n\r\n",
        ] {
            assert!(
                matches!(parse_head(bad), Err(HeadError::Malformed(_))),
                "{bad:?}"
            );
        }
        let many = format!(
            "GET / HTTP/1.1\r\n{}\r\n",
            "a: b\r\n".repeat(HEADERS_MAX + 1)
        );
        assert_eq!(parse_head(many.as_bytes()), Err(HeadError::TooManyHeaders));
        let long = vec![b'a'; REQUEST_HEAD_MAX + 1];
        assert_eq!(parse_head(&long), Err(HeadError::TooLong));
    }
}

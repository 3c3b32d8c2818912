//! A small JSON writer for `--json` output: objects of strings, numbers, booleans and
//! nested values, enough for the admin API's messages.

/// One JSON value, already written.
pub struct Json(pub String);

/// A JSON string literal.
pub fn string(s: &str) -> Json {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    Json(out)
}

pub fn number(n: impl std::fmt::Display) -> Json {
    Json(n.to_string())
}

/// A float; NaN and infinities (not JSON) become null.
pub fn float(f: f64) -> Json {
    if f.is_finite() {
        Json(format!("{f}"))
    } else {
        Json("null".into())
    }
}

pub fn boolean(b: bool) -> Json {
    Json(b.to_string())
}

pub fn array(items: impl IntoIterator<Item = Json>) -> Json {
    let parts: Vec<String> = items.into_iter().map(|j| j.0).collect();
    Json(format!("[{}]", parts.join(",")))
}

pub fn object<'a>(fields: impl IntoIterator<Item = (&'a str, Json)>) -> Json {
    let parts: Vec<String> = fields
        .into_iter()
        .map(|(k, v)| format!("{}:{}", string(k).0, v.0))
        .collect();
    Json(format!("{{{}}}", parts.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_valid_json() {
        let j = object([
            ("a", string("x\"y\\\n\u{1}")),
            ("b", array([number(1), float(f64::NAN), boolean(true)])),
        ]);
        assert_eq!(j.0, r#"{"a":"x\"y\\\n\u0001","b":[1,null,true]}"#);
    }
}

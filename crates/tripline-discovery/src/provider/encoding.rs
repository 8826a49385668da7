//! Percent-encoding as Java's `URLEncoder`/`URLDecoder` do it (UTF-8),
//! which is how Dubbo writes a provider URL into a child's name.
//!
//! Written here rather than taken from a crate because the one difference
//! matters: `+` is a space, as in HTML forms, and a literal `+` is `%2B`.

use super::ParseError;

/// Decodes `%XX` sequences and `+` (a space); the bytes must be UTF-8.
pub fn decode(text: &str) -> Result<String, ParseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| {
                    let h = std::str::from_utf8(h).ok()?;
                    u8::from_str_radix(h, 16)
                        .ok()
                        .filter(|_| h.chars().all(|c| c.is_ascii_hexdigit()))
                });
                let Some(byte) = hex else {
                    return Err(ParseError(format!(
                        "a % at byte {i} is not followed by two hex digits"
                    )));
                };
                out.push(byte);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| ParseError("the decoded name is not UTF-8".to_owned()))
}

/// Encodes as `URLEncoder.encode(text, "UTF-8")`: letters, digits and
/// `.-*_` stay, a space becomes `+`, every other byte `%XX` (upper case).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3 / 2);
    for &b in text.as_bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.push('%');
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
            }
        }
    }
    out
}

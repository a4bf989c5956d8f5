//! Decoding errors shared by the GitHub and Linear decoders, and the one JSON entry point they use.
//!
//! A verified body that cannot become an [`crate::event::Event`] is a [`DecodeError`]; a body we
//! understand but do not act on is not an error (it decodes to `EventKind::Unrouted`). Error details
//! name the failing field path (via `serde_path_to_error`) and serde's message, capped in length, and
//! never quote the body otherwise: bodies can hold private repository content. This module does not
//! choose HTTP statuses; the ingest stage maps each variant in one place (documented per variant).

use serde::de::DeserializeOwned;

/// Longest error detail kept, in bytes: enough for a field path and serde's message, short enough
/// that a huge string value quoted by serde cannot flood logs.
const MAX_DETAIL_BYTES: usize = 240;

/// Why a verified delivery could not be decoded. Neither variant is retryable: the same bytes fail
/// the same way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Returned by `github::payload_bytes` when `Content-Type` is missing or is neither
    /// `application/json` nor `application/x-www-form-urlencoded`. Maps to 415.
    #[error("unsupported content type {content_type:?}")]
    UnsupportedMediaType {
        /// The media type as sent (without parameters, truncated), or `None` when the header was absent.
        content_type: Option<String>,
    },
    /// Returned by every decoder when the body is not valid JSON, lacks a field a routed event needs,
    /// or has a field of the wrong type; also by `github::payload_bytes` for a form body without a
    /// `payload` field. Maps to 400.
    #[error("malformed payload: {detail}")]
    Malformed {
        /// The field path and what was wrong with it; never body text beyond serde's message.
        detail: String,
    },
}

impl DecodeError {
    /// A [`DecodeError::Malformed`] with `detail` capped at a safe length.
    pub(crate) fn malformed(detail: impl Into<String>) -> Self {
        DecodeError::Malformed { detail: truncate(detail.into(), MAX_DETAIL_BYTES) }
    }

    /// A [`DecodeError::UnsupportedMediaType`] for the given header value.
    pub(crate) fn unsupported(content_type: Option<&str>) -> Self {
        DecodeError::UnsupportedMediaType { content_type: content_type.map(|c| truncate(c.to_owned(), 64)) }
    }

    /// A [`DecodeError::Malformed`] for a field that a routed event needs but the payload lacks.
    pub(crate) fn missing(path: &str) -> Self {
        DecodeError::malformed(format!("{path}: missing field"))
    }
}

/// Parses `json` into a wire type, naming the failing field path on error. Every webhook body is a
/// JSON object: anything else (serde would accept an array for a struct) and trailing garbage after
/// the document are refused too. Parses without tracking the path first (most bodies are fine);
/// only a body that fails is parsed again, tracking it, for the error's detail.
pub(crate) fn from_json<T: DeserializeOwned>(json: &[u8]) -> Result<T, DecodeError> {
    if json.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(DecodeError::malformed(".: expected a JSON object"));
    }
    serde_json::from_slice(json).map_err(|plain| match from_json_traced::<T>(json) {
        Err(traced) => traced,
        // Cannot happen (the same bytes, the same type); keep the untraced message if it does.
        Ok(_) => DecodeError::malformed(format!(".: {plain}")),
    })
}

/// [`from_json`]'s slow path: the same parse, naming the failing field path.
fn from_json_traced<T: DeserializeOwned>(json: &[u8]) -> Result<T, DecodeError> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        DecodeError::malformed(format!("{path}: {}", err.into_inner()))
    })?;
    de.end().map_err(|err| DecodeError::malformed(format!(".: {err}")))?;
    Ok(value)
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Outer {
        inner: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Inner {
        number: u64,
    }

    #[test]
    fn parses_a_valid_document() {
        let parsed = from_json::<Outer>(br#" {"inner":{"number":7,"extra":true}} "#).map(|o| o.inner.number);
        assert_eq!(parsed, Ok(7));
    }

    #[test]
    fn names_the_failing_path() {
        let err = from_json::<Outer>(br#"{"inner":{"number":"seven"}}"#).err();
        let Some(DecodeError::Malformed { detail }) = err else { panic!("expected Malformed, got {err:?}") };
        assert!(detail.starts_with("inner.number: invalid type"), "{detail}");
    }

    #[test]
    fn refuses_trailing_garbage() {
        assert!(matches!(from_json::<Outer>(br#"{"inner":{"number":1}} x"#), Err(DecodeError::Malformed { .. })));
    }

    #[test]
    fn caps_detail_on_a_char_boundary() {
        let DecodeError::Malformed { detail } = DecodeError::malformed("é".repeat(500)) else { panic!("variant") };
        assert!(detail.len() <= MAX_DETAIL_BYTES + '…'.len_utf8(), "{}", detail.len());
        assert!(detail.ends_with('…'));
    }
}

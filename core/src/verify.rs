//! The verify stage: webhook signatures and Linear's replay window. Pure and constant time.
//!
//! Owns the checks that run on the raw request before anything is parsed: GitHub's
//! `X-Hub-Signature-256` (`sha256=<hex>`), Linear's `Linear-Signature` (bare hex), and the ±window
//! check on Linear's *signed* `webhookTimestamp`. It never reads headers, config or the clock itself;
//! callers pass values in. Several secrets may be configured at once (rotation), and each is tried in
//! turn with `Mac::verify_slice`, which compares in constant time. Signatures must be exactly 64
//! lowercase hex digits, as both trackers send them; anything else is refused before any HMAC runs.
//! The unsigned `Linear-Timestamp` header is deliberately not an input: trusting it reopens the replay
//! bypass Linear's SDK fixed. Errors never carry secrets or signature text; every variant maps to 401.

use std::time::Duration;

use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;

use crate::clock::Millis;

/// The prefix GitHub puts before the hex digest in `X-Hub-Signature-256`.
const GITHUB_PREFIX: &str = "sha256=";

/// Hex length of an HMAC-SHA256 digest.
const SHA256_HEX_LEN: usize = 64;

/// Why a delivery failed verification. Every variant means "not from the tracker, or not now": the
/// ingest stage answers 401 and changes nothing. None is retryable by the sender as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Returned by [`github`] and [`linear`] when the signature header is absent or empty.
    #[error("signature header is missing")]
    MissingSignature,
    /// Returned by [`github`] and [`linear`] when the header is not the tracker's format: GitHub needs
    /// `sha256=` followed by 64 lowercase hex digits, Linear needs 64 lowercase hex digits and no prefix.
    #[error("signature header is malformed: {reason}")]
    MalformedSignature {
        /// What is wrong with the format (never the header's text).
        reason: &'static str,
    },
    /// Returned by [`github`] and [`linear`] when no configured secret produces the signature.
    #[error("signature does not match any configured secret")]
    Mismatch,
    /// Returned by [`github`] and [`linear`] when the secret list is empty or holds only empty
    /// secrets: a deployment error, refused rather than treated as "unsigned is fine".
    #[error("no webhook secret is configured")]
    NoSecretConfigured,
    /// Returned by [`linear_timestamp`] when the signed body has no `webhookTimestamp`.
    #[error("signed webhookTimestamp is missing")]
    MissingTimestamp,
    /// Returned by [`linear_timestamp`] when `webhookTimestamp` is further from now than the window
    /// (a replay, or a badly skewed clock).
    #[error("signed webhookTimestamp is {skew:?} away from now, outside the {window:?} window")]
    StaleTimestamp {
        /// How far the timestamp is from now, either direction.
        skew: Duration,
        /// The window allowed.
        window: Duration,
    },
}

/// Verifies a GitHub delivery: `signature` is the `X-Hub-Signature-256` header value
/// (`sha256=<64 lowercase hex>`), computed over the raw `body` bytes exactly as received (for
/// form-encoded deliveries, the url-encoded bytes, not the decoded JSON).
///
/// Accepts when any of `secrets` matches, so old and new secrets can overlap during rotation.
///
/// # Errors
/// [`VerifyError::NoSecretConfigured`], [`VerifyError::MissingSignature`],
/// [`VerifyError::MalformedSignature`] or [`VerifyError::Mismatch`], checked in that order.
pub fn github(secrets: &[SecretString], body: &[u8], signature: Option<&str>) -> Result<(), VerifyError> {
    let usable = usable_secrets(secrets)?;
    let signature = present(signature)?;
    let hex_digest = signature
        .strip_prefix(GITHUB_PREFIX)
        .ok_or(VerifyError::MalformedSignature { reason: "missing the sha256= prefix" })?;
    let digest = decode_digest(hex_digest)?;
    verify_any(&usable, body, &digest)
}

/// Verifies a Linear delivery: `signature` is the `Linear-Signature` header value (64 lowercase hex
/// digits, no prefix), computed over the raw `body` bytes.
///
/// Accepts when any of `secrets` matches. This checks authenticity only; call [`linear_timestamp`]
/// with the decoded `webhookTimestamp` as well.
///
/// # Errors
/// [`VerifyError::NoSecretConfigured`], [`VerifyError::MissingSignature`],
/// [`VerifyError::MalformedSignature`] (including a GitHub-style `sha256=` prefix) or
/// [`VerifyError::Mismatch`], checked in that order.
pub fn linear(secrets: &[SecretString], body: &[u8], signature: Option<&str>) -> Result<(), VerifyError> {
    let usable = usable_secrets(secrets)?;
    let signature = present(signature)?;
    let digest = decode_digest(signature)?;
    verify_any(&usable, body, &digest)
}

/// Checks Linear's replay window: the body's signed `webhookTimestamp` must lie within `window` of
/// `now`, in either direction (60 s in production, as Linear recommends). Call it only after
/// [`linear`] succeeded, since an unverified timestamp proves nothing.
///
/// # Errors
/// [`VerifyError::MissingTimestamp`] when the body had none, [`VerifyError::StaleTimestamp`] when
/// it is outside the window.
pub fn linear_timestamp(webhook_timestamp: Option<Millis>, now: Millis, window: Duration) -> Result<(), VerifyError> {
    let sent = webhook_timestamp.ok_or(VerifyError::MissingTimestamp)?;
    let skew = sent.abs_diff(now);
    if skew > window {
        return Err(VerifyError::StaleTimestamp { skew, window });
    }
    Ok(())
}

/// The non-empty secrets, or an error when there are none. An empty key would make every
/// signature computed with an empty key valid, which is never what an operator meant.
fn usable_secrets(secrets: &[SecretString]) -> Result<Vec<&[u8]>, VerifyError> {
    let usable: Vec<&[u8]> =
        secrets.iter().map(|s| s.expose_secret().as_bytes()).filter(|key| !key.is_empty()).collect();
    if usable.is_empty() {
        return Err(VerifyError::NoSecretConfigured);
    }
    Ok(usable)
}

fn present(signature: Option<&str>) -> Result<&str, VerifyError> {
    match signature.map(str::trim) {
        None | Some("") => Err(VerifyError::MissingSignature),
        Some(value) => Ok(value),
    }
}

/// Decodes exactly 64 lowercase hex digits into the 32-byte digest.
fn decode_digest(hex_digest: &str) -> Result<Vec<u8>, VerifyError> {
    if hex_digest.len() != SHA256_HEX_LEN {
        return Err(VerifyError::MalformedSignature { reason: "not 64 hex digits" });
    }
    if !hex_digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(VerifyError::MalformedSignature { reason: "not lowercase hex" });
    }
    hex::decode(hex_digest).map_err(|_| VerifyError::MalformedSignature { reason: "not lowercase hex" })
}

fn verify_any(keys: &[&[u8]], body: &[u8], digest: &[u8]) -> Result<(), VerifyError> {
    // Stopping at the first matching key can reveal through timing only *which* configured secret
    // matched, never anything about the expected digest: each comparison is constant time.
    for key in keys {
        // HMAC accepts keys of any length, so `new_from_slice` cannot fail; a failure would only
        // mean "this key does not verify".
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else { continue };
        mac.update(body);
        if mac.verify_slice(digest).is_ok() {
            return Ok(());
        }
    }
    Err(VerifyError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC_SECRET: &str = "It's a Secret to Everybody";
    const DOC_BODY: &[u8] = b"Hello, World!";
    const DOC_HEX: &str = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    fn secrets(list: &[&str]) -> Vec<SecretString> {
        list.iter().map(|s| SecretString::from((*s).to_owned())).collect()
    }

    fn doc_header() -> String {
        format!("sha256={DOC_HEX}")
    }

    #[test]
    fn github_documented_vector_verifies() {
        assert_eq!(github(&secrets(&[DOC_SECRET]), DOC_BODY, Some(&doc_header())), Ok(()));
    }

    #[test]
    fn github_wrong_secret_is_a_mismatch() {
        assert_eq!(github(&secrets(&["nope"]), DOC_BODY, Some(&doc_header())), Err(VerifyError::Mismatch));
    }

    #[test]
    fn github_altered_body_is_a_mismatch() {
        assert_eq!(github(&secrets(&[DOC_SECRET]), b"Hello, World?", Some(&doc_header())), Err(VerifyError::Mismatch));
    }

    #[test]
    fn github_rotated_second_secret_verifies() {
        assert_eq!(github(&secrets(&["old-secret", DOC_SECRET]), DOC_BODY, Some(&doc_header())), Ok(()));
    }

    #[test]
    fn github_missing_or_empty_header_is_missing() {
        assert_eq!(github(&secrets(&[DOC_SECRET]), DOC_BODY, None), Err(VerifyError::MissingSignature));
        assert_eq!(github(&secrets(&[DOC_SECRET]), DOC_BODY, Some("")), Err(VerifyError::MissingSignature));
    }

    #[test]
    fn github_malformed_headers_are_refused() {
        let cases = [
            ("uppercase", format!("sha256={}", DOC_HEX.to_uppercase())),
            ("short", format!("sha256={}", &DOC_HEX[..62])),
            ("long", format!("sha256={DOC_HEX}00")),
            ("non-hex", format!("sha256={}zz", &DOC_HEX[..62])),
            ("missing prefix", DOC_HEX.to_owned()),
            ("sha1 prefix", format!("sha1={DOC_HEX}")),
            ("multibyte", format!("sha256={}é", &DOC_HEX[..62])),
        ];
        for (name, header) in cases {
            let got = github(&secrets(&[DOC_SECRET]), DOC_BODY, Some(&header));
            assert!(matches!(got, Err(VerifyError::MalformedSignature { .. })), "{name}: {got:?}");
        }
    }

    #[test]
    fn no_usable_secret_is_refused_before_anything_else() {
        assert_eq!(github(&[], DOC_BODY, Some(&doc_header())), Err(VerifyError::NoSecretConfigured));
        assert_eq!(github(&secrets(&[""]), DOC_BODY, None), Err(VerifyError::NoSecretConfigured));
        assert_eq!(linear(&[], DOC_BODY, Some(DOC_HEX)), Err(VerifyError::NoSecretConfigured));
    }

    #[test]
    fn linear_bare_hex_verifies_and_prefix_is_refused() {
        assert_eq!(linear(&secrets(&[DOC_SECRET]), DOC_BODY, Some(DOC_HEX)), Ok(()));
        assert_eq!(linear(&secrets(&["old", DOC_SECRET]), DOC_BODY, Some(DOC_HEX)), Ok(()));
        assert_eq!(linear(&secrets(&["nope"]), DOC_BODY, Some(DOC_HEX)), Err(VerifyError::Mismatch));
        assert!(matches!(
            linear(&secrets(&[DOC_SECRET]), DOC_BODY, Some(&doc_header())),
            Err(VerifyError::MalformedSignature { .. })
        ));
        assert_eq!(linear(&secrets(&[DOC_SECRET]), DOC_BODY, None), Err(VerifyError::MissingSignature));
    }

    #[test]
    fn errors_never_echo_secret_or_signature() {
        let header = format!("sha256={}", DOC_HEX.to_uppercase());
        for err in [
            github(&secrets(&[DOC_SECRET]), DOC_BODY, Some(&header)),
            github(&secrets(&["nope"]), DOC_BODY, Some(&doc_header())),
        ] {
            let text = format!("{err:?} {}", err.clone().err().map(|e| e.to_string()).unwrap_or_default());
            assert!(!text.to_lowercase().contains(DOC_HEX), "{text}");
            assert!(!text.contains("nope") && !text.contains(DOC_SECRET), "{text}");
        }
    }

    #[test]
    fn linear_timestamp_window() {
        let now = Millis(1_773_883_617_700);
        let window = Duration::from_secs(60);
        assert_eq!(linear_timestamp(Some(now), now, window), Ok(()));
        assert_eq!(linear_timestamp(Some(now.minus(window)), now, window), Ok(()));
        assert_eq!(linear_timestamp(Some(now.plus(window)), now, window), Ok(()));
        assert_eq!(
            linear_timestamp(Some(now.minus(Duration::from_millis(60_001))), now, window),
            Err(VerifyError::StaleTimestamp { skew: Duration::from_millis(60_001), window })
        );
        assert_eq!(
            linear_timestamp(Some(now.plus(Duration::from_secs(3_600))), now, window),
            Err(VerifyError::StaleTimestamp { skew: Duration::from_secs(3_600), window })
        );
        assert_eq!(linear_timestamp(None, now, window), Err(VerifyError::MissingTimestamp));
    }
}

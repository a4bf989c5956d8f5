//! GitHub credentials: a personal token, or a GitHub App's JWT and the installation tokens it mints.
//!
//! The App JWT is RS256 with `iat` back-dated 60 s (clock drift) and `exp` 9 minutes ahead, so the
//! whole validity window is GitHub's 10-minute maximum. Installation tokens are cached per
//! installation until [`TOKEN_REFRESH_MARGIN`] before their `expires_at`. Two callers racing on an
//! empty cache may both mint; both tokens are valid and the last one is kept (simpler than a lock
//! held across an HTTP call). Secrets stay in `SecretString`; `Debug` shows only the app id.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;

use crate::clock::Millis;
use crate::tracker::TrackerError;

/// How far back `iat` is dated, against clock drift between us and GitHub.
pub const JWT_BACKDATE: Duration = Duration::from_secs(60);

/// How far ahead `exp` is set: `iat` to `exp` spans exactly GitHub's 10-minute maximum.
pub const JWT_LIFETIME: Duration = Duration::from_secs(9 * 60);

/// A cached installation token is replaced this long before it expires, so no call starts with a
/// token about to die mid-request.
pub const TOKEN_REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// How the client authenticates.
#[derive(Debug)]
pub enum GithubAuth {
    /// A personal access token (`beckon serve` on a laptop). Cannot be narrowed per task.
    Token(SecretString),
    /// A GitHub App: installation tokens minted per installation, and narrowed per task.
    App(GithubApp),
}

/// A GitHub App's identity: its id and its private key.
pub struct GithubApp {
    app_id: String,
    key: EncodingKey,
}

impl GithubApp {
    /// The app from its id (numeric App ID or client ID; it becomes the JWT `iss`) and its PEM
    /// private key (PKCS#1 `BEGIN RSA PRIVATE KEY` or PKCS#8 `BEGIN PRIVATE KEY`).
    ///
    /// # Errors
    /// [`TrackerError::Invalid`] when the key is not an RSA PEM (the message never quotes it).
    pub fn from_pem(app_id: impl Into<String>, private_key_pem: &SecretString) -> Result<GithubApp, TrackerError> {
        let key = EncodingKey::from_rsa_pem(private_key_pem.expose_secret().as_bytes())
            .map_err(|_| TrackerError::Invalid { detail: "the GitHub App private key is not an RSA PEM".to_owned() })?;
        Ok(GithubApp { app_id: app_id.into(), key })
    }

    /// The id the JWT names as `iss`.
    pub fn app_id(&self) -> &str {
        &self.app_id
    }
}

impl fmt::Debug for GithubApp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GithubApp").field("app_id", &self.app_id).field("key", &"[REDACTED]").finish()
    }
}

#[derive(Serialize)]
struct Claims<'a> {
    iat: i64,
    exp: i64,
    iss: &'a str,
}

/// The App JWT for `now`: RS256, `iat` = now − [`JWT_BACKDATE`], `exp` = now + [`JWT_LIFETIME`],
/// `iss` = the app id.
///
/// # Errors
/// [`TrackerError::Invalid`] if signing fails (an unusable key).
pub fn app_jwt(app: &GithubApp, now: Millis) -> Result<SecretString, TrackerError> {
    let now_s = now.0.div_euclid(1000);
    let claims = Claims { iat: now_s - secs(JWT_BACKDATE), exp: now_s + secs(JWT_LIFETIME), iss: &app.app_id };
    jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &app.key)
        .map(SecretString::from)
        .map_err(|_| TrackerError::Invalid { detail: "could not sign the GitHub App JWT".to_owned() })
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// Parses GitHub's `expires_at` (`2016-07-11T22:14:10Z`).
///
/// # Errors
/// [`TrackerError::Decode`] for anything else.
pub(crate) fn parse_expires_at(text: &str) -> Result<Millis, TrackerError> {
    let at = humantime::parse_rfc3339(text)
        .map_err(|_| TrackerError::Decode { detail: format!("expires_at is not RFC 3339: {text:?}") })?;
    let ms = at.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
    Ok(Millis(i64::try_from(ms).unwrap_or(i64::MAX)))
}

/// A minted installation token and when it stops being usable.
#[derive(Debug, Clone)]
pub(crate) struct InstallationToken {
    pub token: SecretString,
    pub expires_at: Millis,
}

/// Installation tokens by installation id.
#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    tokens: Mutex<HashMap<u64, InstallationToken>>,
}

impl TokenCache {
    /// The cached token for `installation`, unless it is within [`TOKEN_REFRESH_MARGIN`] of expiry.
    pub(crate) fn get(&self, installation: u64, now: Millis) -> Option<SecretString> {
        let tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        tokens.get(&installation).filter(|t| now.plus(TOKEN_REFRESH_MARGIN) < t.expires_at).map(|t| t.token.clone())
    }

    /// Stores a freshly minted token.
    pub(crate) fn put(&self, installation: u64, token: InstallationToken) {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner).insert(installation, token);
    }

    /// Forgets the token (after GitHub answered 401 with it).
    pub(crate) fn invalidate(&self, installation: u64) {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner).remove(&installation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_at_parses_githubs_format() {
        assert_eq!(parse_expires_at("2016-07-11T22:14:10Z").unwrap(), Millis(1_468_275_250_000));
        assert!(parse_expires_at("tomorrow").is_err());
    }

    #[test]
    fn cache_refreshes_before_expiry() {
        let cache = TokenCache::default();
        let now = Millis(1_700_000_000_000);
        let token =
            InstallationToken { token: SecretString::from("ghs_x"), expires_at: now.plus(Duration::from_secs(3600)) };
        cache.put(7, token);
        assert!(cache.get(7, now).is_some());
        assert!(cache.get(7, now.plus(Duration::from_secs(3600 - 301))).is_some());
        assert!(cache.get(7, now.plus(Duration::from_secs(3600 - 300))).is_none());
        cache.invalidate(7);
        assert!(cache.get(7, now).is_none());
    }

    #[test]
    fn debug_hides_the_key() {
        let pem = SecretString::from(include_str!("../../../tests/fixtures/github-app-test-key.pem"));
        let app = GithubApp::from_pem("123", &pem).unwrap();
        let shown = format!("{app:?}");
        assert!(shown.contains("123") && shown.contains("REDACTED") && !shown.contains("PRIVATE"));
    }
}

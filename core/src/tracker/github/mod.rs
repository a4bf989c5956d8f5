//! The GitHub adapter of the tracker port: a REST client (platforms.md A3) for github.com and GHES.
//!
//! It owns the GitHub credentials ([`auth`]), the transport (headers, one place that turns a
//! response into a [`TrackerError`], retries), pacing ([`politeness`]) and the endpoints ([`api`]).
//! A [`GithubClient`] is installation-wide (the edge acknowledgement); [`GithubClient::for_task`]
//! derives a task-scoped one holding a token narrowed to one repository, which the worker revokes
//! with [`GithubClient::revoke`] when the task ends. It must not log bodies, headers or tokens.
//! Choices where the docs are silent: pagination `next` links must stay on the configured API
//! origin (a token is never sent elsewhere); a 401 with a cached installation token re-mints once.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION};
use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::clock::{Clock, Millis};
use crate::event::{GithubSubject, Subject, Tracker};
use crate::tracker::retry::RetryPolicy;
use crate::tracker::TrackerError;

pub mod api;
pub mod auth;
mod politeness;
mod pulls;

pub use pulls::{PullHeadBranch, PullRequest};
mod wire;

pub use api::{CreatedComment, RepoPermission};
pub use auth::{GithubApp, GithubAuth};

use auth::{InstallationToken, TokenCache};
use politeness::WriteGates;

/// github.com's API root (`BECKON_GITHUB_API_URL` overrides it for GHES and test doubles).
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// The REST API version we speak (supported until March 2028; see platforms.md A3).
pub const API_VERSION: &str = "2022-11-28";

/// Knobs of a [`GithubClient`]; [`GithubConfig::new`] has production defaults.
#[derive(Debug, Clone)]
pub struct GithubConfig {
    /// API root without a trailing slash, e.g. `https://api.github.com` or `https://ghe.example/api/v3`.
    pub api_url: String,
    /// Sent as `User-Agent` (GitHub rejects requests without one).
    pub user_agent: String,
    /// Deadline for one HTTP request, connection to last body byte.
    pub request_timeout: Duration,
    /// Retries of transient failures and rate limits.
    pub retry: RetryPolicy,
    /// The least time between two writes of one installation (GitHub asks for ≥ 1 s).
    pub min_write_interval: Duration,
    /// How long a collaborator-permission answer is reused.
    pub permission_ttl: Duration,
}

impl GithubConfig {
    /// Defaults: 30 s request timeout, [`RetryPolicy::default`], 1 s between writes, 5-minute
    /// permission cache, `User-Agent: beckon/<version>`.
    pub fn new(api_url: impl Into<String>) -> GithubConfig {
        GithubConfig {
            api_url: api_url.into().trim_end_matches('/').to_owned(),
            user_agent: format!("beckon/{}", env!("CARGO_PKG_VERSION")),
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            min_write_interval: Duration::from_secs(1),
            permission_ttl: Duration::from_secs(5 * 60),
        }
    }
}

/// A GitHub REST client. Cheap to clone; clones share token caches, write gates and the
/// permission cache.
#[derive(Clone)]
pub struct GithubClient {
    shared: Arc<Shared>,
    scope: Scope,
}

struct Shared {
    http: reqwest::Client,
    config: GithubConfig,
    auth: GithubAuth,
    clock: Arc<dyn Clock>,
    tokens: TokenCache,
    gates: WriteGates,
    permissions: Mutex<PermissionCache>,
}

/// (owner, repo, login), lowercased → the answer and until when it may be reused.
type PermissionCache = HashMap<(String, String, String), (RepoPermission, Millis)>;

/// Which credential calls use.
#[derive(Clone)]
enum Scope {
    /// The personal token, or the installation token of the subject's installation.
    Installation,
    /// One task's repository, with a token narrowed to it (or the personal token, which cannot be).
    Task(Arc<TaskScope>),
}

struct TaskScope {
    repository_id: u64,
    /// `Some` for an App: the narrowed token and its installation. `None`: the personal token.
    narrowed: Option<(u64, SecretString)>,
}

impl fmt::Debug for GithubClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scope = match &self.scope {
            Scope::Installation => "installation".to_owned(),
            Scope::Task(t) => format!("task(repository {})", t.repository_id),
        };
        f.debug_struct("GithubClient")
            .field("api_url", &self.shared.config.api_url)
            .field("auth", &self.shared.auth)
            .field("scope", &scope)
            .finish()
    }
}

/// The bearer for one call, and the installation whose write gate it uses (0: personal token).
struct Credential {
    bearer: SecretString,
    installation: u64,
    /// True when it came from the installation-token cache (a 401 then re-mints once).
    cached: bool,
}

/// Reads are not paced; writes go through the installation's gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// A successful response.
struct Raw {
    headers: HeaderMap,
    body: String,
}

impl Raw {
    fn json<T: DeserializeOwned>(&self) -> Result<T, TrackerError> {
        serde_json::from_str(&self.body).map_err(|e| TrackerError::Decode { detail: format!("GitHub response: {e}") })
    }
}

impl GithubClient {
    /// A client for `config` authenticating with `auth`; `clock` dates JWTs and ages caches.
    ///
    /// # Errors
    /// [`TrackerError::Invalid`] when the HTTP client cannot be built (TLS setup) or the user agent
    /// is not a valid header value.
    pub fn new(config: GithubConfig, auth: GithubAuth, clock: Arc<dyn Clock>) -> Result<GithubClient, TrackerError> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/vnd.github+json"));
        headers.insert("x-github-api-version", HeaderValue::from_static(API_VERSION));
        let http = crate::tracker::retry::http_client(&config.user_agent, headers, config.request_timeout)?;
        let shared = Shared {
            http,
            config,
            auth,
            clock,
            tokens: TokenCache::default(),
            gates: WriteGates::default(),
            permissions: Mutex::new(HashMap::new()),
        };
        Ok(GithubClient { shared: Arc::new(shared), scope: Scope::Installation })
    }

    /// A client for one task on `subject`'s repository. With a GitHub App it mints an installation
    /// token narrowed to `repository_ids: [subject.repository_id]` and issues, pull requests and
    /// contents write; with a personal token (which GitHub cannot narrow) it reuses that token.
    /// Either way the returned client refuses subjects of other repositories.
    ///
    /// # Errors
    /// [`TrackerError::Invalid`] for a Linear subject or an App subject without an installation id;
    /// otherwise the HTTP errors of the mint call.
    pub async fn for_task(&self, subject: &Subject) -> Result<GithubClient, TrackerError> {
        let s = github_subject(subject)?;
        let narrowed = match &self.shared.auth {
            GithubAuth::Token(_) => None,
            GithubAuth::App(_) => {
                let installation = installation_of(s)?;
                let body = wire::TokenRequest {
                    repository_ids: vec![s.repository_id],
                    permissions: BTreeMap::from([
                        ("contents", "write"),
                        ("issues", "write"),
                        ("pull_requests", "write"),
                    ]),
                };
                let minted = self.mint(installation, Some(&body)).await?;
                Some((installation, minted.token))
            }
        };
        let scope = TaskScope { repository_id: s.repository_id, narrowed };
        Ok(GithubClient { shared: Arc::clone(&self.shared), scope: Scope::Task(Arc::new(scope)) })
    }

    /// Revokes this task-scoped client's token (`DELETE /installation/token`). Idempotent: a token
    /// GitHub already rejects (401) counts as revoked. With a personal token there is nothing to
    /// revoke and nothing is sent.
    ///
    /// # Errors
    /// [`TrackerError::Invalid`] on an installation-wide client; otherwise HTTP errors.
    pub async fn revoke(&self) -> Result<(), TrackerError> {
        let Scope::Task(task) = &self.scope else {
            return Err(TrackerError::Invalid { detail: "only a task-scoped client has a token to revoke".to_owned() });
        };
        let Some((installation, token)) = &task.narrowed else {
            return Ok(());
        };
        let cred = Credential { bearer: token.clone(), installation: *installation, cached: false };
        let url = format!("{}/installation/token", self.shared.config.api_url);
        match self.send_with_retries(&cred, Access::Read, Method::DELETE, &url, None::<&()>).await {
            Ok(_) | Err(TrackerError::Unauthorized { .. }) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Mints an installation token with the App JWT, optionally narrowed by `body`.
    async fn mint(
        &self,
        installation: u64,
        body: Option<&wire::TokenRequest>,
    ) -> Result<InstallationToken, TrackerError> {
        let GithubAuth::App(app) = &self.shared.auth else {
            return Err(TrackerError::Invalid { detail: "installation tokens need a GitHub App".to_owned() });
        };
        let jwt = auth::app_jwt(app, self.shared.clock.now())?;
        let cred = Credential { bearer: jwt, installation, cached: false };
        let url = format!("{}/app/installations/{installation}/access_tokens", self.shared.config.api_url);
        let raw = self.send_with_retries(&cred, Access::Read, Method::POST, &url, body).await?;
        let minted: wire::InstallationTokenResponse = raw.json()?;
        let expires_at = auth::parse_expires_at(&minted.expires_at)?;
        Ok(InstallationToken { token: SecretString::from(minted.token), expires_at })
    }

    /// The credential for a call about `s`; `fresh` bypasses the installation-token cache.
    async fn credential(&self, s: &GithubSubject, fresh: bool) -> Result<Credential, TrackerError> {
        if let Scope::Task(task) = &self.scope {
            if task.repository_id != s.repository_id {
                return Err(TrackerError::Invalid {
                    detail: format!("{}/{} is outside this task's repository", s.owner, s.repo),
                });
            }
            if let Some((installation, token)) = &task.narrowed {
                return Ok(Credential { bearer: token.clone(), installation: *installation, cached: false });
            }
        }
        match &self.shared.auth {
            GithubAuth::Token(token) => Ok(Credential { bearer: token.clone(), installation: 0, cached: false }),
            GithubAuth::App(_) => {
                let installation = installation_of(s)?;
                let cached = if fresh { None } else { self.shared.tokens.get(installation, self.shared.clock.now()) };
                let bearer = match cached {
                    Some(token) => token,
                    None => {
                        let minted = self.mint(installation, None).await?;
                        self.shared.tokens.put(installation, minted.clone());
                        minted.token
                    }
                };
                Ok(Credential { bearer, installation, cached: true })
            }
        }
    }

    /// One API call about `s` with retries; a 401 on a cached installation token re-mints once.
    async fn call<B: Serialize>(
        &self,
        s: &GithubSubject,
        access: Access,
        method: Method,
        url: &str,
        body: Option<&B>,
    ) -> Result<Raw, TrackerError> {
        let cred = self.credential(s, false).await?;
        match self.send_with_retries(&cred, access, method.clone(), url, body).await {
            Err(TrackerError::Unauthorized { .. }) if cred.cached => {
                self.shared.tokens.invalidate(cred.installation);
                let cred = self.credential(s, true).await?;
                self.send_with_retries(&cred, access, method, url, body).await
            }
            other => other,
        }
    }

    /// Sends until success or [`RetryPolicy::wait_after`] gives up. Writes hold the installation's
    /// gate for all attempts and are paced by it.
    async fn send_with_retries<B: Serialize>(
        &self,
        cred: &Credential,
        access: Access,
        method: Method,
        url: &str,
        body: Option<&B>,
    ) -> Result<Raw, TrackerError> {
        let config = &self.shared.config;
        let mut permit = match access {
            Access::Write => Some(self.shared.gates.acquire(cred.installation, config.min_write_interval).await),
            Access::Read => None,
        };
        let mut attempt = 1;
        loop {
            if let Some(permit) = &permit {
                permit.pace().await;
            }
            let result = self.send_once(cred, method.clone(), url, body).await;
            if let Some(permit) = &mut permit {
                permit.mark();
            }
            let err = match result {
                Ok(raw) => return Ok(raw),
                Err(err) => err,
            };
            match config.retry.wait_after(attempt, &err) {
                Some(wait) => {
                    tracing::debug!(attempt, wait_ms = wait.as_millis(), error = %err, "GitHub call will be retried");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                None => return Err(err),
            }
        }
    }

    /// One HTTP exchange, and the one place a GitHub response becomes a [`TrackerError`].
    async fn send_once<B: Serialize>(
        &self,
        cred: &Credential,
        method: Method,
        url: &str,
        body: Option<&B>,
    ) -> Result<Raw, TrackerError> {
        let mut bearer = HeaderValue::from_str(&format!("Bearer {}", cred.bearer.expose_secret()))
            .map_err(|_| TrackerError::Invalid { detail: "the GitHub token is not a valid header value".to_owned() })?;
        bearer.set_sensitive(true);
        let mut request = self.shared.http.request(method, url).header(AUTHORIZATION, bearer);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(crate::tracker::retry::transport_error)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.map_err(crate::tracker::retry::transport_error)?;
        if (200..300).contains(&status) {
            return Ok(Raw { headers, body });
        }
        let message = serde_json::from_str::<wire::ErrorResponse>(&body)
            .ok()
            .and_then(|e| e.message)
            .unwrap_or_else(|| format!("HTTP {status}"));
        let wait = politeness::rate_limit_wait(status, &headers, &message, self.shared.clock.now());
        Err(TrackerError::from_status(status, wait, message))
    }

    fn repo_url(&self, s: &GithubSubject) -> Result<String, TrackerError> {
        Ok(format!("{}/repos/{}/{}", self.shared.config.api_url, segment(&s.owner)?, segment(&s.repo)?))
    }
}

fn github_subject(subject: &Subject) -> Result<&GithubSubject, TrackerError> {
    match subject {
        Subject::Github(s) => Ok(s),
        Subject::Linear(_) => Err(TrackerError::wrong_tracker(Tracker::Github, "a Linear subject")),
    }
}

fn installation_of(s: &GithubSubject) -> Result<u64, TrackerError> {
    s.installation_id.ok_or_else(|| TrackerError::Invalid {
        detail: format!("{}/{} has no installation id; a GitHub App needs one", s.owner, s.repo),
    })
}

/// A path segment taken from a webhook (owner, repo, login): refuse anything that could change the
/// path, so a hostile payload cannot steer an authenticated request elsewhere.
fn segment(value: &str) -> Result<&str, TrackerError> {
    let ok = !value.is_empty()
        && value != "."
        && value != ".."
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(value)
    } else {
        Err(TrackerError::Invalid { detail: format!("{value:?} is not a valid GitHub name") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_plain_names() {
        for good in ["octo-org", "my_repo.rs", "a"] {
            assert_eq!(segment(good).unwrap(), good);
        }
        for bad in ["", "..", "a/b", "a?b", "a#b", "a%2f", "ü"] {
            assert!(segment(bad).is_err(), "{bad}");
        }
    }
}

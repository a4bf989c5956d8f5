//! Pull requests and pushing: what `pull_request_open` needs from GitHub.
//!
//! Opening is idempotent: when GitHub answers 422 because the branch already has an open pull
//! request, that pull request is updated instead. The push credential is handed out only as a
//! [`SecretString`] for the worker's own `git push`; it never reaches the agent.

use reqwest::Method;
use secrecy::SecretString;

use super::wire::{PullCreateRequest, PullDetailResponse, PullResponse, PullUpdateRequest, RepoResponse};
use super::{Access, GithubClient};
use crate::event::GithubSubject;
use crate::tracker::reply::cap_body;
use crate::tracker::TrackerError;

/// A pull request Beckon opened or updated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// Its number.
    pub number: u64,
    /// Its web URL, when GitHub gave one.
    pub url: Option<String>,
    /// False when an open pull request for the branch existed and was updated.
    pub created: bool,
}

/// Where a pull request's head lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullHeadBranch {
    /// A branch of this repository: pushing it updates the pull request.
    SameRepository(String),
    /// A fork (or a deleted repository): Beckon cannot push there.
    Elsewhere(String),
}

impl GithubClient {
    /// `GET /repos/{o}/{r}/pulls/{n}`: where the pull request's head branch lives.
    ///
    /// # Errors
    /// [`TrackerError`] as mapped from the response.
    pub async fn pull_request_head(&self, s: &GithubSubject) -> Result<PullHeadBranch, TrackerError> {
        let url = format!("{}/pulls/{}", self.repo_url(s)?, s.number);
        let raw = self.call(s, Access::Read, Method::GET, &url, None::<&()>).await?;
        let head = raw.json::<PullDetailResponse>()?.head;
        Ok(match head.repo {
            Some(repo) if repo.id == s.repository_id => PullHeadBranch::SameRepository(head.branch),
            Some(_) | None => PullHeadBranch::Elsewhere(head.branch),
        })
    }

    /// `GET /repos/{o}/{r}`: the default branch (the base of new pull requests).
    ///
    /// # Errors
    /// [`TrackerError`] as mapped from the response.
    pub async fn default_branch(&self, s: &GithubSubject) -> Result<String, TrackerError> {
        let raw = self.call(s, Access::Read, Method::GET, &self.repo_url(s)?, None::<&()>).await?;
        Ok(raw.json::<RepoResponse>()?.default_branch)
    }

    /// Opens a pull request from `head` into `base`, or updates the open one `head` already has.
    ///
    /// # Errors
    /// [`TrackerError`] as mapped from the responses (a 422 other than "already exists" stays an
    /// error: e.g. no commits between the branches).
    pub async fn open_pull_request(
        &self,
        s: &GithubSubject,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, TrackerError> {
        let url = format!("{}/pulls", self.repo_url(s)?);
        let body = cap_body(body);
        let create = PullCreateRequest { title, head, base, body: &body };
        match self.call(s, Access::Write, Method::POST, &url, Some(&create)).await {
            Ok(raw) => {
                let pr: PullResponse = raw.json()?;
                Ok(PullRequest { number: pr.number, url: pr.html_url, created: true })
            }
            Err(TrackerError::Rejected { status: 422, message }) => {
                let list = format!("{url}?state=open&head={}:{head}", s.owner);
                let raw = self.call(s, Access::Read, Method::GET, &list, None::<&()>).await?;
                let Some(existing) = raw.json::<Vec<PullResponse>>()?.into_iter().next() else {
                    return Err(TrackerError::Rejected { status: 422, message });
                };
                let patch = format!("{url}/{}", existing.number);
                let update = PullUpdateRequest { title, body: &body };
                let raw = self.call(s, Access::Write, Method::PATCH, &patch, Some(&update)).await?;
                let pr: PullResponse = raw.json()?;
                Ok(PullRequest { number: pr.number, url: pr.html_url.or(existing.html_url), created: false })
            }
            Err(e) => Err(e),
        }
    }

    /// The credential this client would use for `s`, for the worker's own `git push` over HTTPS.
    /// On a task-scoped App client it is the task's narrowed token.
    ///
    /// # Errors
    /// As the credential lookup (minting may fail).
    pub async fn push_credential(&self, s: &GithubSubject) -> Result<SecretString, TrackerError> {
        Ok(self.credential(s, false).await?.bearer)
    }
}

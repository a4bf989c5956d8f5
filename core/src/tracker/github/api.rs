//! GitHub REST endpoints Beckon uses, and the [`TrackerClient`] implementation built on them.
//!
//! Issue and PR-conversation comments have no threading, so a "reply" there is a new comment; a
//! review-thread reply goes to `/replies` of the thread's top-level comment. Lists follow `Link`
//! headers to the end. Every body sent is capped at 65,536 characters ([`reply::cap_body`]).
//! Reactions: GitHub answers 201 (created) or 200 (already there); both are success.

use std::sync::PoisonError;

use async_trait::async_trait;
use reqwest::Method;

use super::politeness::next_link;
use super::wire::{BodyRequest, CommentResponse, IssueResponse, PermissionResponse, ReactionRequest};
use super::{github_subject, segment, Access, GithubClient};
use crate::event::{GithubSubject, Placement, Subject, Tracker};
use crate::tracker::reply::{self, cap_body};
use crate::tracker::{
    CommentRef, Issue, PostedReply, Reaction, Reply, ReplyDelivery, ThreadComment, ThreadRef, TrackerClient,
    TrackerError,
};

/// A comment GitHub just created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedComment {
    /// The comment id, as text.
    pub id: String,
    /// `html_url`.
    pub url: Option<String>,
}

/// A user's role on a repository (`GET /repos/{o}/{r}/collaborators/{u}/permission`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RepoPermission {
    /// `admin`.
    Admin,
    /// `maintain`.
    Maintain,
    /// `write`.
    Write,
    /// `triage`.
    Triage,
    /// `read`.
    Read,
    /// `none`, or a value we do not know (denied: unknown never means allowed).
    None,
}

impl RepoPermission {
    /// True for the roles that may summon the agent: admin, maintain, write.
    pub fn allows_agent(self) -> bool {
        match self {
            RepoPermission::Admin | RepoPermission::Maintain | RepoPermission::Write => true,
            RepoPermission::Triage | RepoPermission::Read | RepoPermission::None => false,
        }
    }

    /// From the wire: `role_name` when it is a built-in role (it distinguishes maintain and
    /// triage), else the coarse `permission` (custom roles report their base there).
    fn from_wire(w: &PermissionResponse) -> RepoPermission {
        let parse = |s: &str| match s {
            "admin" => Some(RepoPermission::Admin),
            "maintain" => Some(RepoPermission::Maintain),
            "write" => Some(RepoPermission::Write),
            "triage" => Some(RepoPermission::Triage),
            "read" => Some(RepoPermission::Read),
            "none" => Some(RepoPermission::None),
            _ => None,
        };
        w.role_name.as_deref().and_then(parse).or_else(|| parse(&w.permission)).unwrap_or(RepoPermission::None)
    }
}

fn comment_id(id: &str) -> Result<u64, TrackerError> {
    id.parse().map_err(|_| TrackerError::Invalid { detail: format!("{id:?} is not a GitHub comment id") })
}

impl GithubClient {
    /// `GET /repos/{o}/{r}/issues/{n}`: an issue or pull request.
    ///
    /// # Errors
    /// [`TrackerError`] as mapped from the response; `Decode` for an unexpected body.
    pub async fn get_issue(&self, s: &GithubSubject) -> Result<Issue, TrackerError> {
        let url = format!("{}/issues/{}", self.repo_url(s)?, s.number);
        let raw = self.call(s, Access::Read, Method::GET, &url, None::<&()>).await?;
        Ok(raw.json::<IssueResponse>()?.into())
    }

    /// All issue or PR-conversation comments, oldest first (every page).
    ///
    /// # Errors
    /// As [`GithubClient::get_issue`]; `Decode` when a `next` link leaves the API origin.
    pub async fn issue_comments(&self, s: &GithubSubject) -> Result<Vec<ThreadComment>, TrackerError> {
        let url = format!("{}/issues/{}/comments?per_page=100", self.repo_url(s)?, s.number);
        Ok(self.list_all(s, url).await?.into_iter().map(ThreadComment::from).collect())
    }

    /// One review thread of a pull request: its top-level comment `root_id` and the replies to it,
    /// oldest first.
    ///
    /// # Errors
    /// As [`GithubClient::issue_comments`].
    pub async fn review_thread(&self, s: &GithubSubject, root_id: &str) -> Result<Vec<ThreadComment>, TrackerError> {
        let root = comment_id(root_id)?;
        let url = format!("{}/pulls/{}/comments?per_page=100", self.repo_url(s)?, s.number);
        let all = self.list_all(s, url).await?;
        Ok(all
            .into_iter()
            .filter(|c| c.id == root || c.in_reply_to_id == Some(root))
            .map(ThreadComment::from)
            .collect())
    }

    /// `POST /repos/{o}/{r}/issues/{n}/comments` with `body` capped.
    ///
    /// # Errors
    /// As [`GithubClient::get_issue`].
    pub async fn create_issue_comment(&self, s: &GithubSubject, body: &str) -> Result<CreatedComment, TrackerError> {
        let url = format!("{}/issues/{}/comments", self.repo_url(s)?, s.number);
        self.write_comment(s, Method::POST, &url, body).await
    }

    /// `POST /repos/{o}/{r}/pulls/{n}/comments/{root_id}/replies` with `body` capped. `root_id` must
    /// be the thread's top-level comment (GitHub refuses replies to replies).
    ///
    /// # Errors
    /// As [`GithubClient::get_issue`].
    pub async fn reply_in_review_thread(
        &self,
        s: &GithubSubject,
        root_id: &str,
        body: &str,
    ) -> Result<CreatedComment, TrackerError> {
        let url = format!("{}/pulls/{}/comments/{}/replies", self.repo_url(s)?, s.number, comment_id(root_id)?);
        self.write_comment(s, Method::POST, &url, body).await
    }

    /// `PATCH /repos/{o}/{r}/issues/comments/{id}` with `body` capped.
    ///
    /// # Errors
    /// As [`GithubClient::get_issue`].
    pub async fn edit_issue_comment(&self, s: &GithubSubject, id: &str, body: &str) -> Result<(), TrackerError> {
        let url = format!("{}/issues/comments/{}", self.repo_url(s)?, comment_id(id)?);
        self.write_comment(s, Method::PATCH, &url, body).await.map(drop)
    }

    /// `PATCH /repos/{o}/{r}/pulls/comments/{id}` with `body` capped.
    ///
    /// # Errors
    /// As [`GithubClient::get_issue`].
    pub async fn edit_review_comment(&self, s: &GithubSubject, id: &str, body: &str) -> Result<(), TrackerError> {
        let url = format!("{}/pulls/comments/{}", self.repo_url(s)?, comment_id(id)?);
        self.write_comment(s, Method::PATCH, &url, body).await.map(drop)
    }

    /// Reacts to an issue comment (`/issues/comments/{id}/reactions`) or, with `review` set, to a
    /// review comment (`/pulls/comments/{id}/reactions`). 200 (exists) and 201 (created) both succeed.
    ///
    /// # Errors
    /// As [`GithubClient::get_issue`].
    pub async fn react_to_comment(
        &self,
        s: &GithubSubject,
        id: &str,
        review: bool,
        reaction: Reaction,
    ) -> Result<(), TrackerError> {
        let kind = if review { "pulls" } else { "issues" };
        let url = format!("{}/{kind}/comments/{}/reactions", self.repo_url(s)?, comment_id(id)?);
        let body = ReactionRequest { content: reaction.name() };
        self.call(s, Access::Write, Method::POST, &url, Some(&body)).await.map(drop)
    }

    /// The role of `login` on `s`'s repository, cached for [`super::GithubConfig::permission_ttl`]
    /// (the deferred permission check of the trigger rules).
    ///
    /// # Errors
    /// As [`GithubClient::get_issue`]; `NotFound` for an unknown user.
    pub async fn collaborator_permission(
        &self,
        s: &GithubSubject,
        login: &str,
    ) -> Result<RepoPermission, TrackerError> {
        let key = (s.owner.to_ascii_lowercase(), s.repo.to_ascii_lowercase(), login.to_ascii_lowercase());
        let now = self.shared.clock.now();
        let cached = {
            let cache = self.shared.permissions.lock().unwrap_or_else(PoisonError::into_inner);
            cache.get(&key).filter(|(_, until)| now < *until).map(|(p, _)| *p)
        };
        if let Some(permission) = cached {
            return Ok(permission);
        }
        let url = format!("{}/collaborators/{}/permission", self.repo_url(s)?, segment(login)?);
        let raw = self.call(s, Access::Read, Method::GET, &url, None::<&()>).await?;
        let permission = RepoPermission::from_wire(&raw.json()?);
        let until = now.plus(self.shared.config.permission_ttl);
        self.shared.permissions.lock().unwrap_or_else(PoisonError::into_inner).insert(key, (permission, until));
        Ok(permission)
    }

    async fn write_comment(
        &self,
        s: &GithubSubject,
        method: Method,
        url: &str,
        body: &str,
    ) -> Result<CreatedComment, TrackerError> {
        let capped = cap_body(body);
        let raw = self.call(s, Access::Write, method, url, Some(&BodyRequest { body: &capped })).await?;
        let created: CommentResponse = raw.json()?;
        Ok(CreatedComment { id: created.id.to_string(), url: created.html_url })
    }

    /// GETs `url` and every `rel="next"` page after it.
    async fn list_all(&self, s: &GithubSubject, first: String) -> Result<Vec<CommentResponse>, TrackerError> {
        let origin = format!("{}/", self.shared.config.api_url);
        let mut items = Vec::new();
        let mut next = Some(first);
        while let Some(url) = next {
            let raw = self.call(s, Access::Read, Method::GET, &url, None::<&()>).await?;
            items.extend(raw.json::<Vec<CommentResponse>>()?);
            next = next_link(&raw.headers);
            if next.as_deref().is_some_and(|n| !n.starts_with(&origin)) {
                return Err(TrackerError::Decode { detail: "a pagination link leaves the API origin".to_owned() });
            }
        }
        Ok(items)
    }
}

#[async_trait]
impl TrackerClient for GithubClient {
    fn tracker(&self) -> Tracker {
        Tracker::Github
    }

    async fn issue(&self, subject: &Subject) -> Result<Issue, TrackerError> {
        self.get_issue(github_subject(subject)?).await
    }

    async fn thread(&self, thread: &ThreadRef) -> Result<Vec<ThreadComment>, TrackerError> {
        let s = github_subject(&thread.subject)?;
        match thread.trigger.as_ref().map(|t| &t.placement) {
            None | Some(Placement::TopLevel) => self.issue_comments(s).await,
            Some(Placement::ReviewThread { root_id }) => self.review_thread(s, root_id).await,
            Some(Placement::Reply { .. } | Placement::AgentSession { .. }) => {
                Err(TrackerError::wrong_tracker(Tracker::Github, "a Linear thread"))
            }
        }
    }

    async fn post_reply(&self, thread: &ThreadRef, reply: &Reply) -> Result<PostedReply, TrackerError> {
        let s = github_subject(&thread.subject)?;
        let existing = self.thread(thread).await?;
        if let Some(found) = existing.into_iter().find(|c| reply::carries_marker(&c.body, reply)) {
            return Ok(PostedReply { comment_id: found.id, url: found.url, delivery: ReplyDelivery::AlreadyPosted });
        }
        let body = reply::render(reply);
        let created = match thread.trigger.as_ref().map(|t| &t.placement) {
            None | Some(Placement::TopLevel) => self.create_issue_comment(s, &body).await?,
            Some(Placement::ReviewThread { root_id }) => self.reply_in_review_thread(s, root_id, &body).await?,
            Some(Placement::Reply { .. } | Placement::AgentSession { .. }) => {
                return Err(TrackerError::wrong_tracker(Tracker::Github, "a Linear thread"));
            }
        };
        Ok(PostedReply { comment_id: created.id, url: created.url, delivery: ReplyDelivery::Posted })
    }

    async fn react(&self, subject: &Subject, comment: &CommentRef, reaction: Reaction) -> Result<(), TrackerError> {
        let s = github_subject(subject)?;
        match &comment.placement {
            Placement::TopLevel => self.react_to_comment(s, &comment.id, false, reaction).await,
            Placement::ReviewThread { .. } => self.react_to_comment(s, &comment.id, true, reaction).await,
            Placement::Reply { .. } | Placement::AgentSession { .. } => {
                Err(TrackerError::wrong_tracker(Tracker::Github, "a Linear thread"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_prefer_the_role_name() {
        let cases = [
            ("admin", None, RepoPermission::Admin, true),
            ("write", Some("maintain"), RepoPermission::Maintain, true),
            ("write", Some("write"), RepoPermission::Write, true),
            ("write", Some("custom-deployer"), RepoPermission::Write, true),
            ("read", Some("triage"), RepoPermission::Triage, false),
            ("read", None, RepoPermission::Read, false),
            ("none", None, RepoPermission::None, false),
            ("weird", None, RepoPermission::None, false),
        ];
        for (permission, role, want, allowed) in cases {
            let w = PermissionResponse { permission: permission.to_owned(), role_name: role.map(str::to_owned) };
            assert_eq!(RepoPermission::from_wire(&w), want, "{permission} {role:?}");
            assert_eq!(want.allows_agent(), allowed);
        }
    }
}

//! Reply rules shared by every tracker: the idempotency marker and the body cap.
//!
//! Each reply body starts with a hidden HTML comment `<!-- beckon:task=<id>;seq=<n> -->` (invisible
//! in rendered markdown on GitHub and Linear). Before posting, adapters look for that exact marker
//! in the thread, so a crash between "posted" and "recorded" never posts twice. The marker comes
//! first so that truncation can never cut it. Bodies are capped at GitHub's 65,536 *characters*
//! with a visible note; Linear documents no limit, and the same cap keeps replies comparable.
//! Pure functions only: no I/O here.

use sha2::{Digest, Sha256};

use crate::tracker::Reply;

/// GitHub's comment body limit, in characters (not bytes); longer bodies get `422`.
pub const MAX_BODY_CHARS: usize = 65_536;

/// Appended to a body that was cut to fit [`MAX_BODY_CHARS`].
pub const TRUNCATION_NOTE: &str = "\n\n---\n_Reply truncated: it exceeded the tracker's 65,536-character limit._";

/// The hidden marker identifying one reply of one task.
pub fn marker(reply: &Reply) -> String {
    format!("<!-- beckon:task={};seq={} -->", reply.task_id, reply.seq)
}

/// The body to send: marker, newline, the reply's body, capped by [`cap_body`].
pub fn render(reply: &Reply) -> String {
    cap_body(&format!("{}\n{}", marker(reply), reply.body))
}

/// True when `body` carries exactly `reply`'s marker (the `-->` terminator stops `seq=1` from
/// matching `seq=12`).
pub fn carries_marker(body: &str, reply: &Reply) -> bool {
    body.contains(&marker(reply))
}

/// `body` unchanged when it fits [`MAX_BODY_CHARS`]; otherwise its head plus [`TRUNCATION_NOTE`],
/// exactly [`MAX_BODY_CHARS`] characters long.
pub fn cap_body(body: &str) -> String {
    if body.chars().count() <= MAX_BODY_CHARS {
        return body.to_owned();
    }
    let keep = MAX_BODY_CHARS - TRUNCATION_NOTE.chars().count();
    let mut capped: String = body.chars().take(keep).collect();
    capped.push_str(TRUNCATION_NOTE);
    capped
}

/// A deterministic comment id for Linear's client-chosen `CommentCreateInput.id`: the first 16
/// bytes of SHA-256 over the marker, shaped as a UUID v4 (version and variant bits set), so a
/// retried `commentCreate` names the same comment.
pub fn linear_comment_id(reply: &Reply) -> String {
    let digest = Sha256::digest(marker(reply).as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid().hyphenated().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskId;

    fn reply(seq: u32, body: &str) -> Reply {
        Reply { task_id: TaskId("t_abc".to_owned()), seq, body: body.to_owned() }
    }

    #[test]
    fn marker_leads_the_body_and_matches_exactly() {
        let r = reply(1, "done");
        assert_eq!(render(&r), "<!-- beckon:task=t_abc;seq=1 -->\ndone");
        assert!(carries_marker(&render(&r), &r));
        assert!(!carries_marker(&render(&reply(12, "x")), &r));
        assert!(!carries_marker("<!-- beckon:task=t_abcd;seq=1 -->", &r));
    }

    #[test]
    fn cap_counts_characters_not_bytes() {
        let fits = "é".repeat(MAX_BODY_CHARS);
        assert_eq!(cap_body(&fits), fits);
        let long = "é".repeat(MAX_BODY_CHARS + 1);
        let capped = cap_body(&long);
        assert_eq!(capped.chars().count(), MAX_BODY_CHARS);
        assert!(capped.ends_with(TRUNCATION_NOTE));
    }

    #[test]
    fn truncation_keeps_the_marker() {
        let r = reply(0, &"x".repeat(100_000));
        let body = render(&r);
        assert_eq!(body.chars().count(), MAX_BODY_CHARS);
        assert!(carries_marker(&body, &r));
    }

    #[test]
    fn linear_ids_are_stable_v4_shaped_and_distinct() {
        let a = linear_comment_id(&reply(0, "a"));
        assert_eq!(a, linear_comment_id(&reply(0, "different body")));
        assert_ne!(a, linear_comment_id(&reply(1, "a")));
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
    }
}

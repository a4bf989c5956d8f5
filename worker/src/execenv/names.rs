//! Pure naming rules of the execution environment: which owner, repository and branch names are
//! accepted, the task's branch, the clone URL. Nothing here touches the disk.

use beckon_core::event::Subject;

use super::{ExecEnvError, BRANCH_PREFIX};

/// Checks an owner or repository name: `[A-Za-z0-9._-]{1,100}`, not starting with `-`, no `..`.
///
/// # Errors
/// [`ExecEnvError::InvalidRepository`] naming `what` and the reason.
pub fn validate_repo_part(what: &'static str, value: &str) -> Result<(), ExecEnvError> {
    let fail = |reason| Err(ExecEnvError::InvalidRepository { what, value: value.to_owned(), reason });
    if value.is_empty() || value.len() > 100 {
        return fail("must be 1 to 100 characters");
    }
    if !value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return fail("only letters, digits, '.', '_' and '-' are allowed");
    }
    if value.starts_with('-') || value == "." || value.contains("..") {
        return fail("must not start with '-', be '.', or contain '..'");
    }
    Ok(())
}

/// Checks a branch name from a pull request: `[A-Za-z0-9._/-]`, no `..`, `//`, `@{`, no leading
/// `-`, `/` or `.`, no trailing `/`, `.` or `.lock`, no component starting with `.`.
///
/// # Errors
/// [`ExecEnvError::InvalidBranch`].
pub fn validate_branch(name: &str) -> Result<(), ExecEnvError> {
    let chars_ok = name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-'));
    let shape_ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with(['-', '/'])
        && !name.ends_with(['/', '.'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && !name.contains("//")
        && name.split('/').all(|part| !part.starts_with('.') && !part.ends_with(".lock"));
    if chars_ok && shape_ok {
        Ok(())
    } else {
        Err(ExecEnvError::InvalidBranch(name.to_owned()))
    }
}

/// The task's new branch: `beckon/issue-<n>` on GitHub, `beckon/<identifier>` (e.g. `eng-123`)
/// on Linear, only `[a-z0-9-]` after the prefix.
#[must_use]
pub fn branch_for(subject: &Subject) -> String {
    let slug = match subject {
        Subject::Github(s) => format!("issue-{}", s.number),
        Subject::Linear(s) => {
            let slug = slugify(s.identifier.as_deref().unwrap_or(&s.issue_id));
            if slug.is_empty() {
                slugify(&s.issue_id)
            } else {
                slug
            }
        }
    };
    format!("{BRANCH_PREFIX}{slug}")
}

/// Lowercase, runs of anything but `[a-z0-9]` become one `-`, no leading or trailing `-`.
fn slugify(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').chars().take(60).collect()
}

/// The clone URL: `{base}{owner}/{repo}.git`, from configuration and validated names only.
///
/// # Errors
/// [`ExecEnvError::InvalidRepository`] when a name is not valid.
pub fn clone_url(base: &str, owner: &str, repo: &str) -> Result<String, ExecEnvError> {
    validate_repo_part("owner", owner)?;
    validate_repo_part("repo", repo)?;
    Ok(format!("{base}{owner}/{repo}.git"))
}

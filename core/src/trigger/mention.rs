//! Finding `@handle` in a comment's markdown, the way a reader would see it.
//!
//! A mention counts only in prose: text inside inline code, fenced or indented code blocks, `>`
//! block quotes (quoting someone who asked is not asking) and HTML blocks is skipped, using
//! pulldown-cmark's source offsets. Matching runs over the raw source of the prose ranges, so word
//! boundaries see the real neighbouring characters (`foo@agent`, `@agent-bot` are not mentions).
//! On Linear a real @mention is written as a profile URL (`https://linear.app/<ws>/profiles/<handle>`),
//! bare, autolinked or as a link target; those count too. Only the first mention matters: its
//! trailing text is the command (`stop`); further mentions in the same comment add nothing.
//!
//! Comments run to 65,536 characters, often of pasted log, so the scan parses only as much as
//! decides: nothing when the raw text holds no candidate, else up to the end of the first
//! candidate's block when nothing further down can change it (see `decided_by`).

use std::ops::Range;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use crate::event::Tracker;

/// Linear's profile URL prefix; the workspace slug and `/profiles/` follow.
const LINEAR_ORIGIN: &str = "https://linear.app/";

/// The first mention of the handle in a comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    /// The raw markdown after the first mention (after its link, when it sits in one), trimmed.
    /// Empty for a bare `@handle`.
    pub command: String,
}

impl Mention {
    /// True when the whole request is `stop` (`@agent stop`, `@agent: STOP!`), and not a sentence
    /// that merely starts with it (`@agent stop the server from crashing`).
    pub fn is_stop(&self) -> bool {
        let word = self.command.trim_start_matches([',', ':']).trim_end_matches(['.', '!']).trim();
        word.eq_ignore_ascii_case("stop")
    }
}

/// The first mention of `handle` (without `@`) in `body`, or `None`. ASCII case-insensitive.
/// Linear profile URLs count only when `tracker` is Linear.
pub fn find(body: &str, handle: &str, tracker: Tracker) -> Option<Mention> {
    if handle.is_empty() {
        return None;
    }
    let linear = match tracker {
        Tracker::Linear => true,
        Tracker::Github => false,
    };
    let first = match decided_by(body, handle, linear) {
        Extent::Nothing => None,
        Extent::Prefix(end) => first_mention(&body[..end], handle, linear).or_else(|| {
            // The candidate was code, quoted or the like; a later one is decided on the whole body.
            candidate(&body[end..], handle, linear).and_then(|_| first_mention(body, handle, linear))
        }),
        Extent::Whole => first_mention(body, handle, linear),
    }?;
    let command = body.get(first.end..).unwrap_or_default().trim().to_owned();
    Some(Mention { command })
}

/// How much of a comment the markdown parse must see to decide its first mention candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Extent {
    /// No candidate at all: no mention, and no parse.
    Nothing,
    /// The comment up to the blank line that ends the candidate's block.
    Prefix(usize),
    /// All of it.
    Whole,
}

/// Every mention contains a candidate, `@handle` or (Linear) `/handle`, in the raw source, so a
/// comment without one needs no parse: most comments a webhook brings do not address the agent.
///
/// Whether a candidate is prose is decided by the lines up to it and the rest of its block: block
/// structure (fences, quotes, indented code, HTML blocks) is settled line by line from the top,
/// and inline structure (code spans, links) does not cross a blank line. An unclosed fence or HTML
/// block in the prefix hides the candidate there as it would in the whole. What reaches further
/// takes the whole comment: a link reference definition below (`[x]: …` can turn the candidate's
/// text into a link) and, on Linear, where a link's target can be the mention, any definition (a
/// reference below can point at a profile defined above) and any entity or backslash escape (a
/// target's decoded text can spell a profile URL the raw source does not).
fn decided_by(body: &str, handle: &str, linear: bool) -> Extent {
    if linear && (memchr::memchr2(b'&', b'\\', body.as_bytes()).is_some() || has_definition(body)) {
        return Extent::Whole;
    }
    let Some(candidate) = candidate(body, handle, linear) else { return Extent::Nothing };
    let end = block_end(body, candidate);
    if has_definition(&body[end..]) {
        return Extent::Whole;
    }
    Extent::Prefix(end)
}

/// Whether `text` may hold a link reference definition (`[label]: destination`).
fn has_definition(text: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), b"]:").is_some()
}

/// Where the first `@handle` (or, on Linear, `/handle`) starts, ASCII case-insensitive, with no
/// regard to word boundaries or markdown. A `memchr` scan: comments can hold 65,536 characters
/// of pasted log.
fn candidate(text: &str, handle: &str, linear: bool) -> Option<usize> {
    let bytes = text.as_bytes();
    let named = |at: &usize| {
        bytes.get(at + 1..at + 1 + handle.len()).is_some_and(|n| n.eq_ignore_ascii_case(handle.as_bytes()))
    };
    if linear {
        memchr::memchr2_iter(b'@', b'/', bytes).find(named)
    } else {
        memchr::memchr_iter(b'@', bytes).find(named)
    }
}

/// The start of the first blank line after `from` (the end of `from`'s block), or the end of `text`.
fn block_end(text: &str, from: usize) -> usize {
    let mut line_start = match text[from..].find('\n') {
        Some(newline) => from + newline + 1,
        None => return text.len(),
    };
    while line_start < text.len() {
        let line_end = text[line_start..].find('\n').map_or(text.len(), |n| line_start + n + 1);
        if text[line_start..line_end].trim_matches([' ', '\t', '\r', '\n']).is_empty() {
            return line_start;
        }
        line_start = line_end;
    }
    text.len()
}

/// The byte span of the first mention in `body`, parsing all of it.
fn first_mention(body: &str, handle: &str, linear: bool) -> Option<Range<usize>> {
    // Nesting depth of blocks whose text is not a request (code, quotes, raw HTML).
    let mut hidden = 0usize;
    // The end of the link being walked, so a mention inside `[...](...)` ends after the link.
    let mut link_end: Option<usize> = None;
    // Prose ranges, merged when contiguous: pulldown-cmark splits text at `_`, `*`, … and a
    // handle or URL may straddle such a split.
    let mut prose: Vec<(Range<usize>, Option<usize>)> = Vec::new();
    let mut first: Option<Range<usize>> = None;

    for (event, range) in Parser::new(body).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(_) | Tag::BlockQuote(_) | Tag::HtmlBlock) => hidden += 1,
            Event::End(TagEnd::CodeBlock | TagEnd::BlockQuote(_) | TagEnd::HtmlBlock) => {
                hidden = hidden.saturating_sub(1);
            }
            Event::Start(Tag::Link { dest_url, .. }) if hidden == 0 => {
                if linear && profile_url_len(&dest_url, handle) == Some(dest_url.len()) {
                    keep_earliest(&mut first, range.clone());
                }
                link_end = Some(range.end);
            }
            Event::End(TagEnd::Link) => link_end = None,
            Event::Text(_) if hidden == 0 => match prose.last_mut() {
                Some((last, end)) if last.end == range.start => {
                    last.end = range.end;
                    *end = link_end;
                }
                _ => prose.push((range, link_end)),
            },
            Event::Start(_)
            | Event::End(_)
            | Event::Text(_)
            | Event::Code(_)
            | Event::InlineMath(_)
            | Event::DisplayMath(_)
            | Event::Html(_)
            | Event::InlineHtml(_)
            | Event::FootnoteReference(_)
            | Event::SoftBreak
            | Event::HardBreak
            | Event::Rule
            | Event::TaskListMarker(_) => {}
        }
    }

    for (range, link_end) in prose {
        if let Some(span) = scan(body, range, handle, linear) {
            let end = link_end.unwrap_or(span.end);
            keep_earliest(&mut first, span.start..end);
        }
    }
    first
}

fn keep_earliest(first: &mut Option<Range<usize>>, span: Range<usize>) {
    if first.as_ref().is_none_or(|f| span.start < f.start) {
        *first = Some(span);
    }
}

/// The first mention inside `range` of `body`, as a byte span of `body`.
fn scan(body: &str, range: Range<usize>, handle: &str, linear: bool) -> Option<Range<usize>> {
    let text = body.get(range.clone())?;
    for (i, c) in text.char_indices() {
        let at = range.start + i;
        let rest = &body[at..];
        let len = match c {
            '@' => at_handle_len(rest, handle),
            'h' | 'H' if linear => profile_url_len(rest, handle),
            _ => None,
        };
        if let Some(len) = len.filter(|len| at + len <= range.end && starts_word(body, at)) {
            return Some(at..at + len);
        }
    }
    None
}

/// True when the character before `at` cannot be part of a word, an e-mail address or a path.
fn starts_word(body: &str, at: usize) -> bool {
    body[..at].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '+' | '/')))
}

/// The length of `@handle` at the start of `s`, if it is there and ends at a word boundary.
fn at_handle_len(s: &str, handle: &str) -> Option<usize> {
    let name = s.strip_prefix('@')?;
    handle_at_start(name, handle).map(|len| len + 1)
}

/// The length of `https://linear.app/<workspace>/profiles/<handle>` at the start of `s`.
fn profile_url_len(s: &str, handle: &str) -> Option<usize> {
    let origin = s.get(..LINEAR_ORIGIN.len()).filter(|o| o.eq_ignore_ascii_case(LINEAR_ORIGIN))?;
    let after_origin = &s[origin.len()..];
    let workspace = after_origin.find('/')?;
    let slug = &after_origin[..workspace];
    if slug.is_empty() || slug.contains(char::is_whitespace) {
        return None;
    }
    let profile = &after_origin[workspace + 1..];
    let name = profile.get(.."profiles/".len()).filter(|p| p.eq_ignore_ascii_case("profiles/"))?;
    let len = handle_at_start(&profile[name.len()..], handle)?;
    Some(origin.len() + workspace + 1 + name.len() + len)
}

/// The length of `handle` at the start of `s` when the next character ends the name.
fn handle_at_start(s: &str, handle: &str) -> Option<usize> {
    let name = s.get(..handle.len()).filter(|n| n.eq_ignore_ascii_case(handle))?;
    let next = s[name.len()..].chars().next();
    next.is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '/'))).then_some(name.len())
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// `Some(command)` when a mention is expected.
    const CASES: &[(&str, Tracker, &str, Option<&str>)] = &[
        ("at start", Tracker::Github, "@agent fix the toast", Some("fix the toast")),
        ("in the middle", Tracker::Github, "hey @agent fix it", Some("fix it")),
        ("at the end", Tracker::Github, "can you look, @agent", Some("")),
        ("bare", Tracker::Github, "@agent", Some("")),
        ("after a newline", Tracker::Github, "context\n@agent go", Some("go")),
        ("after an opening paren", Tracker::Github, "(@agent) please", Some(") please")),
        ("followed by a comma", Tracker::Github, "@agent, fix", Some(", fix")),
        ("followed by a period", Tracker::Github, "thanks @agent.", Some(".")),
        ("followed by a colon", Tracker::Github, "@agent: fix", Some(": fix")),
        ("in emphasis", Tracker::Github, "**@agent** fix", Some("** fix")),
        ("case-insensitive", Tracker::Github, "@Agent fix", Some("fix")),
        ("upper case", Tracker::Github, "@AGENT fix", Some("fix")),
        ("longer handle", Tracker::Github, "@agents fix", None),
        ("hyphenated handle", Tracker::Github, "@agent-bot fix", None),
        ("underscored handle", Tracker::Github, "@agent_x fix", None),
        ("team handle", Tracker::Github, "@agent/team fix", None),
        ("e-mail address", Tracker::Github, "write to me@agent.com", None),
        ("glued to a word", Tracker::Github, "x@agent fix", None),
        ("after a dot", Tracker::Github, "a.@agent fix", None),
        ("after a plus", Tracker::Github, "a+@agent fix", None),
        ("after a slash", Tracker::Github, "a/@agent fix", None),
        ("no at sign", Tracker::Github, "agent fix this", None),
        ("another handle", Tracker::Github, "@someone fix this", None),
        ("inline code", Tracker::Github, "run `@agent fix` to ask", None),
        ("backtick fence", Tracker::Github, "```\n@agent fix\n```", None),
        ("tilde fence", Tracker::Github, "~~~sh\n@agent fix\n~~~", None),
        ("indented code", Tracker::Github, "example:\n\n    @agent fix\n", None),
        ("block quote", Tracker::Github, "> @agent fix\n\nagreed", None),
        ("nested quote", Tracker::Github, "> > @agent fix\n> yes", None),
        ("html block", Tracker::Github, "<!--\n@agent fix\n-->", None),
        ("after a code block", Tracker::Github, "```\n@agent no\n```\n@agent yes", Some("yes")),
        ("after a quote", Tracker::Github, "> @agent old\n\n@agent new", Some("new")),
        ("code span over a nbsp line", Tracker::Github, "`@agent fix\n\u{a0}\nnow`", None),
        ("code span over lines", Tracker::Github, "`@agent fix\nnow` ok", None),
        ("link defined below", Tracker::Github, "[@agent fix][x]\n\n[x]: https://x.test", Some("[x]: https://x.test")),
        (
            "profile defined above",
            Tracker::Linear,
            "[x]: https://linear.app/a/profiles/agent\nhi\n\n[x] go",
            Some("go"),
        ),
        ("inline code then prose", Tracker::Github, "`@agent` and @agent go", Some("go")),
        ("two mentions", Tracker::Github, "@agent one @agent two", Some("one @agent two")),
        ("inside a link's text", Tracker::Github, "[@agent](https://x.test) go", Some("go")),
        ("profile URL on GitHub", Tracker::Github, "https://linear.app/acme/profiles/agent go", None),
        ("at-mention on Linear", Tracker::Linear, "@agent go", Some("go")),
        ("bare profile URL", Tracker::Linear, "https://linear.app/acme/profiles/agent can you?", Some("can you?")),
        ("profile URL mid-text", Tracker::Linear, "cc https://linear.app/acme/profiles/agent go", Some("go")),
        ("profile URL, upper case", Tracker::Linear, "HTTPS://linear.app/acme/profiles/Agent go", Some("go")),
        ("profile URL, slug with _", Tracker::Linear, "https://linear.app/my_ws/profiles/agent go", Some("go")),
        ("autolinked profile URL", Tracker::Linear, "<https://linear.app/acme/profiles/agent> go", Some("go")),
        ("profile link target", Tracker::Linear, "[Agent](https://linear.app/acme/profiles/agent) go", Some("go")),
        ("another user's profile", Tracker::Linear, "https://linear.app/acme/profiles/agents go", None),
        ("another user's link", Tracker::Linear, "[Agent](https://linear.app/acme/profiles/jane) go", None),
        ("profile URL, no workspace", Tracker::Linear, "https://linear.app//profiles/agent go", None),
        ("profile URL in code", Tracker::Linear, "`https://linear.app/acme/profiles/agent` go", None),
        ("profile URL in a quote", Tracker::Linear, "> https://linear.app/acme/profiles/agent go", None),
        ("glued profile URL", Tracker::Linear, "xhttps://linear.app/acme/profiles/agent go", None),
    ];

    #[test]
    fn mentions_count_only_in_prose_at_word_boundaries() {
        for &(name, tracker, body, expected) in CASES {
            let found = find(body, "agent", tracker).map(|m| m.command);
            assert_eq!(found.as_deref(), expected, "{name}: {body:?}");
        }
    }

    #[test]
    fn stop_is_the_whole_request() {
        let cases = [
            ("@agent stop", true),
            ("@agent stop.", true),
            ("@agent STOP!", true),
            ("@agent: stop", true),
            ("please @agent, stop!!", true),
            ("@agent   stop  ", true),
            ("@agent stop the server from crashing", false),
            ("@agent stopping is broken", false),
            ("@agent don't stop", false),
            ("@agent", false),
            ("`@agent stop` is how you stop it", false),
        ];
        for (body, stop) in cases {
            assert_eq!(find(body, "agent", Tracker::Github).is_some_and(|m| m.is_stop()), stop, "{body:?}");
        }
    }

    /// Pieces of markdown that change what is prose: fences, quotes, code spans, HTML blocks,
    /// links and their reference definitions, list markers, setext underlines, blank and
    /// almost-blank lines, entities and escapes; and candidates that are and are not mentions.
    const PIECES: &[&str] = &[
        "@agent",
        "@Agent fix ",
        "x@agent",
        "@agents ",
        "/agent",
        "text ",
        "please ",
        "`",
        "``",
        "```\n",
        "~~~\n",
        "> ",
        "\n",
        "\n\n",
        " \n",
        "\t\n",
        "\r\n",
        "\u{a0}\n",
        "    ",
        "[",
        "]",
        "](https://x.test)",
        "]: https://x.test\n",
        "[x]",
        "[@agent please][x]",
        "[x]: https://linear.app/acme/profiles/agent\n",
        "<!--",
        "-->",
        "<pre>\n",
        "</pre>\n",
        "<div>\n",
        "https://linear.app/acme/profiles/agent ",
        "[Agent](https://linear.app/acme/profiles/agent)",
        "(https://linear.app/acme/profiles/&#97;gent)",
        "&#97;",
        "\\",
        "- ",
        "1. ",
        "*",
        "_",
        "===\n",
        "---\n",
        "<",
        ">",
        "go",
    ];

    /// What `find` answers when it always parses the whole comment.
    fn find_parsing_all(body: &str, tracker: Tracker) -> Option<String> {
        let span = first_mention(body, "agent", matches!(tracker, Tracker::Linear))?;
        Some(body[span.end..].trim().to_owned())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
        /// Parsing only up to the candidate's block never changes the answer.
        #[test]
        fn the_shortcut_finds_what_the_whole_parse_finds(
            pieces in proptest::collection::vec(proptest::sample::select(PIECES), 0..28),
        ) {
            let body = pieces.concat();
            for tracker in [Tracker::Github, Tracker::Linear] {
                let found = find(&body, "agent", tracker).map(|m| m.command);
                proptest::prop_assert_eq!(found, find_parsing_all(&body, tracker), "{:?} on {:?}", body, tracker);
            }
        }
    }

    #[test]
    fn the_parse_stops_at_the_candidates_block() {
        let log = format!("@agent fix\n\n```\n{}```\n", "at x (y.ts:1:2)\n".repeat(100));
        assert_eq!(decided_by(&log, "agent", false), Extent::Prefix("@agent fix\n".len()));
        assert_eq!(decided_by("no mention here\n\nat all", "agent", false), Extent::Nothing);
        let referenced = "[@agent fix][x]\n\n[x]: https://x.test\n";
        assert_eq!(decided_by(referenced, "agent", false), Extent::Whole, "a definition below decides the link");
        assert_eq!(decided_by("@agent go &amp; see", "agent", true), Extent::Whole, "entities on Linear");
        assert_eq!(decided_by("@agent go\n \t\r\nmore", "agent", false), Extent::Prefix("@agent go\n".len()));
        assert_eq!(
            decided_by("@agent go\n\u{a0}\nmore", "agent", false),
            Extent::Prefix("@agent go\n\u{a0}\nmore".len())
        );
    }

    #[test]
    fn an_empty_handle_matches_nothing() {
        assert_eq!(find("@ hello", "", Tracker::Github), None);
    }
}

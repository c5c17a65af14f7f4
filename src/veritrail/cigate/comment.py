"""One pull-request comment, created once and updated by every later run:
`python -m veritrail.cigate.comment --repo OWNER/NAME --pr N --body-file FILE`.

The comment is found by its hidden first line, `<!-- veritrail-report -->` (`runs.diffmd.MARKER`,
which `veritrail diff --markdown` writes; added when the body lacks it): the pull request's
comments are listed page by page (GitHub's REST API, `GET /repos/{repo}/issues/{n}/comments`,
following the `Link: <...>; rel="next"` header), the first comment whose body starts with the
marker and whose author is `--author` (the action passes `github-actions[bot]`, the author of
what `GITHUB_TOKEN` posts) is updated (`PATCH /repos/{repo}/issues/comments/{id}`), and only when
none is one created (`POST`). A comment without the marker, anyone's, is never touched; nor is a
marked comment by someone else, so a commenter cannot plant a comment that the next run would
fill with the real results and its author could then edit. A failed POST is
never retried: it may have created the comment, and a retry would make a second one; listing and
updating are retried on a 5xx or a dropped connection.

The token is `GITHUB_TOKEN` from the environment (never an argument, so it is in no process
list), sent only to the API's own origin (`GITHUB_API_URL`, default https://api.github.com; a
`next` link elsewhere is refused) and never printed: every message passes through
`redaction.redact` with the token registered as a secret.

Exit status: 0 created or updated; 2 bad input (no token, a malformed repository or pull-request
number, an unreadable body), one line `error: ...`; 3 GitHub refused or failed (HTTP status, its
message, and what to check), one line.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import urlsplit

from ..errors import InputProblem, RunFailure
from ..redaction import redact, register_secret

MARKER = "<!-- veritrail-report -->"
"""The hidden first line of the comment (the same as `runs.diffmd.MARKER`; cigate sits below
runs, so it keeps its own copy, and a test checks the two are equal)."""

DEFAULT_API_URL = "https://api.github.com"
MAX_BODY = 65_536
"""GitHub's limit on a comment's body, in characters."""
PER_PAGE = 100
MAX_PAGES = 100
"""10,000 comments: a pull request with more is refused rather than walked without end."""
TIMEOUT = 30.0
RETRIES = 2
"""Extra attempts of a GET or PATCH after a 5xx or a dropped connection."""

_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


class CommentInputError(InputProblem, ValueError):
    """The comment cannot be posted as asked: no token, a bad repository, number or body."""


class GitHubError(RunFailure):
    """GitHub's API refused a request or could not be reached."""


@dataclass(frozen=True, slots=True)
class Posted:
    """What was done: `created` or `updated`, the comment's id and its page."""

    action: str
    comment_id: int
    url: str


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    body: Any
    headers: Mapping[str, str]


class GitHubClient:
    """The three calls of the issue-comments API this module makes, over `urllib`."""

    def __init__(self, api_url: str, token: str, *, timeout: float = TIMEOUT) -> None:
        parts = urlsplit(api_url.rstrip("/"))
        if parts.scheme not in ("https", "http") or not parts.netloc:
            raise CommentInputError(f"GITHUB_API_URL {api_url!r} is not an http(s) URL")
        self.base = api_url.rstrip("/")
        self.origin = (parts.scheme, parts.netloc)
        self._token = token
        self.timeout = timeout
        handlers: list[urllib.request.BaseHandler] = []
        if _loopback(parts.hostname or ""):
            handlers.append(urllib.request.ProxyHandler({}))  # a proxy never serves loopback
        self._opener = urllib.request.build_opener(*handlers)

    def _request(self, method: str, url: str, payload: Any = None, *, retry: bool) -> _Reply:
        if (urlsplit(url).scheme, urlsplit(url).netloc) != self.origin:
            # The token goes to the API's origin only, whatever a Link header says.
            raise GitHubError(f"GitHub API: refusing to follow a link to another origin: {url}")
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self._token}",
            "User-Agent": "veritrail",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        if data is not None:
            headers["Content-Type"] = "application/json"
        attempts = 1 + (RETRIES if retry else 0)
        for attempt in range(attempts):
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with self._opener.open(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                    return _Reply(resp.status, _json(raw), dict(resp.headers.items()))
            except urllib.error.HTTPError as exc:
                if exc.code >= 500 and attempt + 1 < attempts:
                    time.sleep(1.0 + attempt)
                    continue
                raise GitHubError(_http_message(method, url, exc)) from None
            except (urllib.error.URLError, OSError) as exc:
                if attempt + 1 < attempts:
                    time.sleep(1.0 + attempt)
                    continue
                reason = getattr(exc, "reason", exc)
                raise GitHubError(
                    f"GitHub API: {method} {_path(url)} failed: {reason} "
                    "(check GITHUB_API_URL and the runner's network)"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Every comment of issue or pull request `number`, oldest first, all pages."""
        url: str | None = f"{self.base}/repos/{repo}/issues/{number}/comments?per_page={PER_PAGE}"
        out: list[dict[str, Any]] = []
        pages = 0
        while url is not None:
            pages += 1
            if pages > MAX_PAGES:
                raise GitHubError(f"GitHub API: more than {MAX_PAGES} pages of comments")
            reply = self._request("GET", url, retry=True)
            if not isinstance(reply.body, list):
                raise GitHubError(f"GitHub API: GET {_path(url)} did not return a list")
            out.extend(c for c in reply.body if isinstance(c, dict))
            url = next_link(reply.headers)
        return out

    def create(self, repo: str, number: int, body: str) -> dict[str, Any]:
        """A new comment on `number` (never retried: see the module docstring)."""
        url = f"{self.base}/repos/{repo}/issues/{number}/comments"
        return _object(self._request("POST", url, {"body": body}, retry=False), url)

    def update(self, repo: str, comment_id: int, body: str) -> dict[str, Any]:
        """Comment `comment_id`'s body replaced."""
        url = f"{self.base}/repos/{repo}/issues/comments/{comment_id}"
        return _object(self._request("PATCH", url, {"body": body}, retry=True), url)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def _object(reply: _Reply, url: str) -> dict[str, Any]:
    if not isinstance(reply.body, dict) or not isinstance(reply.body.get("id"), int):
        raise GitHubError(f"GitHub API: {_path(url)} returned no comment")
    return reply.body


def _path(url: str) -> str:
    return urlsplit(url).path


_HINTS = {
    401: "the token is not valid",
    403: "the token may lack `pull-requests: write` (a pull request from a fork gets a "
    "read-only token)",
    404: "no such repository or pull request, or the token cannot see it",
    422: "GitHub refused the comment's body",
}


def _http_message(method: str, url: str, exc: urllib.error.HTTPError) -> str:
    detail = ""
    try:
        body = _json(exc.read())
    except OSError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        detail = ": " + " ".join(body["message"].split())[:200]
    hint = _HINTS.get(exc.code, "GitHub failed; run the job again" if exc.code >= 500 else "")
    return f"GitHub API: {method} {_path(url)} returned {exc.code} {exc.reason}{detail}" + (
        f" ({hint})" if hint else ""
    )


def next_link(headers: Mapping[str, str]) -> str | None:
    """The `rel="next"` URL of a `Link` header, if any."""
    for name, value in headers.items():
        if name.lower() == "link":
            for part in value.split(","):
                m = _NEXT.search(part)
                if m:
                    return m.group(1)
    return None


def with_marker(body: str) -> str:
    """`body` with the marker as its first line (added when missing), cut to GitHub's limit."""
    if not body.startswith(MARKER):
        body = f"{MARKER}\n{body}"
    if len(body) > MAX_BODY:
        note = "\n\n_… cut to fit one comment._\n"
        body = body[: MAX_BODY - len(note)] + note
    return body


def is_ours(comment: Mapping[str, Any], author: str | None = None) -> bool:
    """A comment a previous run posted: its body starts with the marker and, when `author` is
    given, that account wrote it."""
    body = comment.get("body")
    if not (isinstance(body, str) and body.lstrip("\ufeff").startswith(MARKER)):
        return False
    if not author:
        return True
    user = comment.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    return isinstance(login, str) and login.lower() == author.lower()


def upsert_comment(
    client: GitHubClient, repo: str, number: int, body: str, *, author: str | None = None
) -> Posted:
    """Update the pull request's marked comment (by `author`, when given), or create it when
    there is none."""
    body = with_marker(body)
    ours = [c for c in client.comments(repo, number) if is_ours(c, author)]
    if ours:
        done = client.update(repo, int(ours[0]["id"]), body)
        action = "updated"
    else:
        done = client.create(repo, number, body)
        action = "created"
    return Posted(action, int(done["id"]), str(done.get("html_url") or ""))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CommentInputError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m veritrail.cigate.comment",
        description="Create the pull request's veritrail comment, or update it (found by "
        f"its first line, {MARKER}). The token is read from GITHUB_TOKEN, the API from "
        "GITHUB_API_URL.",
    )
    p.add_argument("--repo", help="OWNER/NAME [default: $GITHUB_REPOSITORY]")
    p.add_argument("--pr", required=True, help="the pull request's number")
    p.add_argument("--body-file", required=True, help="the comment (veritrail diff --markdown)")
    p.add_argument(
        "--author",
        default="",
        help="only a marked comment by this login is updated (the action: github-actions[bot]) "
        "[default: any author]",
    )
    return p


def _read_body(path: str) -> str:
    from ..textio import InputError, read_input_text

    try:
        text = read_input_text(path, "comment body")
    except InputError as exc:
        raise CommentInputError(str(exc)) from None
    if not text.strip():
        raise CommentInputError(f"{path}: the comment body is empty")
    return text


def run(argv: Sequence[str], environ: Mapping[str, str]) -> Posted:
    """Parse `argv`, check every input, then post (see the module docstring)."""
    args = _parser().parse_args(list(argv))
    token = environ.get("GITHUB_TOKEN", "").strip()
    if not token:
        raise CommentInputError("GITHUB_TOKEN is not set (the action passes `github-token`)")
    register_secret(token)
    repo = args.repo or environ.get("GITHUB_REPOSITORY", "")
    if not _REPO.fullmatch(repo):
        raise CommentInputError(f"--repo {repo!r}: expected OWNER/NAME")
    if not str(args.pr).isdigit() or int(args.pr) < 1:
        raise CommentInputError(f"--pr {args.pr!r}: expected a pull request's number")
    body = _read_body(args.body_file)
    client = GitHubClient(environ.get("GITHUB_API_URL") or DEFAULT_API_URL, token)
    return upsert_comment(client, repo, int(args.pr), body, author=args.author or None)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """The command: one line on stdout when done, one `error:` line on stderr when not."""
    env = os.environ if environ is None else environ
    try:
        posted = run(sys.argv[1:] if argv is None else argv, env)
    except (CommentInputError, GitHubError) as exc:
        print(redact(f"error: {exc}"), file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    print(redact(f"veritrail comment {posted.action}: {posted.url or posted.comment_id}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

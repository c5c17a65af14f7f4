"""`veritrail view` without a browser: its routes through Starlette's TestClient over a real index
of real runs (SQLite), the token and CSRF rules, the Host check, the security headers, and
pipeline text that tries to be markup on every page.

`build_runs` makes the runs directory the browser journey (test_view_browser.py) uses too."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

from starlette.testclient import TestClient
from test_diff import EX, NEW_SENTENCE, edited_quickstart

from veritrail.cli.main import cli
from veritrail.runs.index import RunIndex, open_index
from veritrail.runs.view.app import create_app
from veritrail.runs.view.safety import (
    PAGE_CSP,
    TRAIL_CSP,
    Guard,
    ViewUsageError,
    check_bind,
    is_loopback,
)

XSS = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
XSS_CLAIM = f"The vault held {XSS} gold \u202eevil."
XSS_RUN = "xss-<b>&\"'"
XSS_PIPELINE = "<script>window.__pwned=3</script>pipeline"
ORIGIN = "http://127.0.0.1"
TOKEN = "a-long-enough-token-1234"


def _verify(dag: Path, claims: Path, oracle: Path, run_dir: Path) -> None:
    args = ["verify", str(dag), "--claims", str(claims), "--oracle", str(oracle)]
    args += ["--run-dir", str(run_dir), "--out", str(run_dir / "report.json"), "--quiet"]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code in (0, 1), res.output


def build_runs(tmp: Path) -> Path:
    """A runs directory with four runs: the quick-start DAG before and after an edit of a stage
    (`quickstart`, oracle), a run whose pipeline name, DAG, claim and id hold markup
    (`XSS_RUN`), and a second DAG verified by the loopback model (`items`, openai/loopback)."""
    root = tmp / "runs"
    (tmp / "v1").mkdir()
    (tmp / "v2").mkdir()
    (tmp / "v1" / "quickstart.json").write_text((EX / "dag.json").read_text())
    dag_b, claims_b, oracle_b = edited_quickstart(tmp)
    (tmp / "v2" / "quickstart.json").write_text(dag_b.read_text())
    _verify(tmp / "v1" / "quickstart.json", EX / "claims.json", EX / "oracle.json", root / "before")
    _verify(tmp / "v2" / "quickstart.json", claims_b, oracle_b, root / "after")

    dag = {
        "meta": {"pipeline": XSS_PIPELINE},
        "nodes": [
            {"id": "r<i>1</i>", "text": f"The vault held gold. {XSS}"},
            {"id": "t", "text": XSS_CLAIM, "sources": ["r<i>1</i>"]},
        ],
    }
    claims = [{"id": "c<b>1</b>", "text": XSS_CLAIM, "sentence_indices": [0]}]
    oracle = {
        "claims": [
            {
                "claim": XSS_CLAIM,
                "evidence": {"r<i>1</i>": [0]},
                "verdicts": ["Not Fully Supported"],
            }
        ]
    }
    for name, doc in (("xss-dag.json", dag), ("xss-claims.json", claims), ("xss-or.json", oracle)):
        (tmp / name).write_text(json.dumps(doc))
    _verify(tmp / "xss-dag.json", tmp / "xss-claims.json", tmp / "xss-or.json", root / XSS_RUN)

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from runkit import CLAIMS, build_dag, responder
    from veritrail.testing import FakeOpenAIServer
    from veritrail.testing.overlap import loopback_env

    (tmp / "items.json").write_text(json.dumps({"nodes": build_dag().to_records()}))
    (tmp / "items-claims.json").write_text(
        json.dumps([{"id": f"c{i}", "text": t} for i, t in enumerate(CLAIMS, 1)])
    )
    with FakeOpenAIServer(responder=responder) as srv:
        args = ["verify", str(tmp / "items.json"), "--claims", str(tmp / "items-claims.json")]
        args += ["--run-dir", str(root / "items-run"), "--out", str(root / "items-run/report.json")]
        res = CliRunner(env=loopback_env(srv)).invoke(cli, [*args, "--quiet"])
        assert res.exit_code in (0, 1), res.output
    return root


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_runs(tmp_path_factory.mktemp("view"))


@pytest.fixture
def index(runs_root: Path, tmp_path: Path) -> Iterator[RunIndex]:
    # Each test its own SQLite index file (reviews write to the shared run directories).
    with open_index(runs_root, str(tmp_path / "index.sqlite")) as idx:
        yield idx


def client(index: RunIndex, token: str | None = None) -> TestClient:
    return TestClient(create_app(index, Guard.create(token)), base_url=ORIGIN)


class Tags(HTMLParser):
    """Every element and attribute of a page, to prove no data became markup."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


def tags(page: str) -> Tags:
    t = Tags()
    t.feed(page)
    return t


def csrf_of(page: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    assert m, "no review form"
    return m.group(1)


# -- pages -----------------------------------------------------------------------------------------


def test_runs_list_filters_and_trend(index: RunIndex) -> None:
    c = client(index)
    page = c.get("/").text
    assert all(f'data-run="{r}"' in page for r in ("before", "after", "items-run"))
    assert "4 runs" in page and "<svg" in page and "<polyline" in page  # quickstart: 2 points
    only_qs = c.get("/", params={"dag": "quickstart"}).text
    assert "2 runs" in only_qs and 'data-run="items-run"' not in only_qs
    only_model = c.get("/", params={"model": "loopback"}).text
    assert "1 run" in only_model and 'data-run="items-run"' in only_model
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")
    today = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")
    assert "0 runs" in c.get("/", params={"since": tomorrow}).text
    assert "4 runs" in c.get("/", params={"since": today, "until": tomorrow}).text


def test_run_page_claims_stage_chart_and_trail(index: RunIndex) -> None:
    c = client(index)
    page = c.get("/run", params={"id": "after"}).text
    assert NEW_SENTENCE in page and 'data-claim="c5"' in page
    assert "Where unsupported content entered" in page and "stage 2" in page
    assert 'src="/run/trail?id=after"' in page and csrf_of(page)
    trail = c.get("/run/trail", params={"id": "after"})
    assert trail.status_code == 200 and trail.headers["content-security-policy"] == TRAIL_CSP
    assert 'id="vt-data"' in trail.text  # the HTML report's own page, one renderer
    assert c.get("/run", params={"id": "nope"}).status_code == 404
    assert c.get("/run/trail", params={"id": "nope"}).status_code == 404


def test_compare_names_the_new_claim_and_its_stage(index: RunIndex) -> None:
    page = client(index).get("/compare", params={"a": "before", "b": "after"}).text
    newly = page.split('id="vt-newly"', 1)[1].split("</section>", 1)[0]
    assert NEW_SENTENCE in newly and "stage 2" in newly and "summary-1" in newly
    assert client(index).get("/compare", params={"a": "before"}).status_code == 400


def test_security_headers_and_static_assets(index: RunIndex) -> None:
    c = client(index)
    r = c.get("/")
    assert r.headers["content-security-policy"] == PAGE_CSP
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "SAMEORIGIN"
    assert r.headers["cache-control"] == "no-store"
    assert "script" not in tags(r.text).tags
    for name in ("report.css", "diff.css", "view.css"):
        got = c.get(f"/static/{name}")
        assert got.status_code == 200 and got.headers["content-type"].startswith("text/css")
    assert c.get("/static/../../pyproject.toml").status_code == 404
    # every asset a page links is served here: nothing from another host
    links = [v for k, v in tags(r.text).attrs if k in ("href", "src") and v]
    assert links and all(v.startswith(("/", "#")) for v in links), links


# -- reviews and CSRF ------------------------------------------------------------------------------


def test_review_is_kept_with_history(index: RunIndex, runs_root: Path) -> None:
    c = client(index)
    csrf = csrf_of(c.get("/run", params={"id": "after"}).text)
    # c1 stays Fully Supported: the comparison of before and after is the same in any order.
    form = {"csrf": csrf, "run": "after", "claim": "c1", "verdict": "Fully Supported"}
    for reason in ("first look", "the will says so"):
        r = c.post(
            "/review",
            data={**form, "reason": reason, "author": "ana"},
            headers={"origin": ORIGIN},
            follow_redirects=False,
        )
        assert r.status_code == 303 and r.headers["location"].startswith("/run?id=after#claim-")
    page = c.get("/run", params={"id": "after"}).text
    row = page.split('data-claim="c1"', 1)[1].split("</tr>", 1)[0]
    assert "the will says so" in row and "ana" in row and "history (2)" in row
    lines = (runs_root / "after" / "reviews.jsonl").read_text().splitlines()
    assert [json.loads(x)["reason"] for x in lines][-2:] == ["first look", "the will says so"]
    bad = c.post(
        "/review",
        data={**form, "reason": "  "},
        headers={"origin": ORIGIN},
        follow_redirects=False,
    )
    assert bad.status_code == 400 and "reason" in bad.text


def test_cross_site_review_posts_are_refused(index: RunIndex, runs_root: Path) -> None:
    c = client(index)
    csrf = csrf_of(c.get("/run", params={"id": "before"}).text)
    form = {"run": "before", "claim": "c1", "verdict": "Inconclusive", "reason": "x"}
    reviews = runs_root / "before" / "reviews.jsonl"
    before = reviews.read_bytes() if reviews.exists() else b""
    attempts = [
        ({**form}, {"origin": ORIGIN}),  # no CSRF field
        ({**form, "csrf": "0" * 64}, {"origin": ORIGIN}),  # a forged one
        ({**form, "csrf": csrf}, {"origin": "http://evil.example"}),  # another site's page
        ({**form, "csrf": csrf}, {"origin": "null"}),
        ({**form, "csrf": csrf}, {}),  # neither Origin nor Referer
        ({**form, "csrf": csrf}, {"referer": "http://evil.example/page"}),
    ]
    for data, headers in attempts:
        r = c.post("/review", data=data, headers=headers, follow_redirects=False)
        assert r.status_code == 403, (data, headers, r.status_code)
    # The field of one browser session is refused in another's.
    other = client(index)
    other.get("/")
    r = other.post(
        "/review", data={**form, "csrf": csrf}, headers={"origin": ORIGIN}, follow_redirects=False
    )
    assert r.status_code == 403
    assert (reviews.read_bytes() if reviews.exists() else b"") == before
    # The same session's field from its own origin (Referer alone will do) is accepted.
    ok = c.post(
        "/review",
        data={**form, "csrf": csrf},
        headers={"referer": f"{ORIGIN}/run?id=before"},
        follow_redirects=False,
    )
    assert ok.status_code == 303


def test_session_cookie_is_strict_and_httponly(index: RunIndex) -> None:
    r = client(index).get("/")
    cookie = r.headers["set-cookie"]
    assert "vt_session=" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie


# -- who may connect -------------------------------------------------------------------------------


def test_bind_rules() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert is_loopback(host)
        check_bind(host, None)
    for host in ("0.0.0.0", "192.168.1.10", "::", "example.org"):
        assert not is_loopback(host)
        with pytest.raises(ViewUsageError, match="--token"):
            check_bind(host, None)
        check_bind(host, TOKEN)
    with pytest.raises(ViewUsageError, match="at least"):
        check_bind("0.0.0.0", "short")


def test_cli_refuses_a_public_host_without_a_token(runs_root: Path) -> None:
    res = CliRunner().invoke(cli, ["view", str(runs_root), "--host", "0.0.0.0"])
    assert res.exit_code == 2 and "--token" in res.output
    res = CliRunner().invoke(cli, ["view", str(runs_root), "--host", "0.0.0.0", "--token", "x"])
    assert res.exit_code == 2 and "at least" in res.output


def test_cli_names_the_extra_when_it_is_missing(
    runs_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # `import uvicorn` raises ImportError
    res = CliRunner().invoke(cli, ["view", str(runs_root)])
    assert res.exit_code == 2 and "pip install 'veritrail[view]'" in res.output


def test_token_is_required_on_every_request(index: RunIndex) -> None:
    c = client(index, TOKEN)
    assert c.get("/").status_code == 401
    assert c.get("/static/view.css").status_code == 401
    assert c.get("/", params={"token": "wrong-token-wrong-token"}).status_code == 401
    first = c.get("/run", params={"id": "after", "token": TOKEN}, follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/run?id=after"
    cookie = first.headers["set-cookie"]
    assert TOKEN not in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert c.get("/run", params={"id": "after"}).status_code == 200  # the cookie now
    fresh = client(index, TOKEN)
    assert fresh.get("/", headers={"x-veritrail-token": TOKEN}).status_code == 200
    assert fresh.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert fresh.get("/", headers={"authorization": "Bearer nope"}).status_code == 401


def test_only_loopback_host_names_without_a_token(index: RunIndex) -> None:
    c = client(index)
    assert c.get("/", headers={"host": "evil.example"}).status_code == 400  # DNS rebinding
    assert c.get("/", headers={"host": "localhost:8000"}).status_code == 200
    assert c.get("/", headers={"host": "[::1]:8000"}).status_code == 200
    # With a token, any host name (the machine's own) is fine: the token guards.
    assert client(index, TOKEN).get("/", headers={"host": "box.lan", "x-veritrail-token": TOKEN})


# -- pipeline text is text -------------------------------------------------------------------------


def _no_markup_from_data(page: str) -> None:
    found = tags(page)
    assert "script" not in found.tags and "img" not in found.tags
    assert not [k for k, _ in found.attrs if k.startswith("on")]
    assert "window.__pwned" in page  # the payload is shown ...
    assert "<script>window" not in page  # ... as text


def test_pages_show_markup_in_runs_as_text(index: RunIndex) -> None:
    c = client(index)
    listing = c.get("/").text
    _no_markup_from_data(listing)
    assert "&lt;script&gt;window.__pwned=3&lt;/script&gt;pipeline" in listing
    run = c.get("/run", params={"id": XSS_RUN})
    assert run.status_code == 200
    _no_markup_from_data(run.text)
    assert "[U+202E]evil" in run.text and "\u202e" not in run.text
    assert "c&lt;b&gt;1&lt;/b&gt;" in run.text
    cmp_page = c.get("/compare", params={"a": "before", "b": XSS_RUN}).text
    _no_markup_from_data(cmp_page)
    trail = c.get("/run/trail", params={"id": XSS_RUN}).text
    data = trail.split('id="vt-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and "\\u003cscript\\u003e" in data  # embedded as JSON, escaped
    # A review of it: reason and author with markup, shown as text.
    csrf = csrf_of(run.text)
    c.post(
        "/review",
        data={
            "csrf": csrf,
            "run": XSS_RUN,
            "claim": "c<b>1</b>",
            "verdict": "Not Fully Supported",
            "reason": XSS,
            "author": "<i>mallory</i>",
        },
        headers={"origin": ORIGIN},
    )
    again = c.get("/run", params={"id": XSS_RUN}).text
    _no_markup_from_data(again)
    assert "&lt;i&gt;mallory&lt;/i&gt;" in again

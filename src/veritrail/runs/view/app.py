"""The routes of `veritrail view` (a Starlette application over one `RunIndex`).

    GET  /                   the runs: filters (DAG, model, dates), the trend chart, the table
    GET  /run?id=RUN         a run: its claims, reviews, stage chart, the trail viewer below
    GET  /run/trail?id=RUN   the trail viewer: the run's report through `html.render_html`
    GET  /compare?a=A&b=B    two runs compared (`veritrail diff`'s sections)
    POST /review             a review (run, claim, verdict, reason, author, csrf)
    GET  /static/NAME        the stylesheets

Runs are named by query parameters, not path segments: a run's id is its path under the runs
directory and may hold any character. Endpoints are plain functions (Starlette runs them in its
thread pool), as the index's calls block.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ...errors import VeritrailError
from ...records import Verdict
from ..diff import DiffInputError, compare, diff_document, load_side
from ..diffhtml import diff_sections
from ..index import RunFilter, RunIndex, RunRow, RunsIndexUnavailable
from .pages import model_label, render, reviews_by_claim, run_stage_chart, trend_chart
from .safety import Guard, GuardMiddleware

PAGE_SIZE = 100
"""Runs per page of the list (the trend chart draws every run that matches the filters)."""

MAX_FORM_BYTES = 64 * 1024

REFRESH_EVERY = 2.0
"""Seconds between two refreshes of the index by the list page: a refresh `stat`s every run's
files (150 ms for 1,000 runs), the larger part of the page's time; a run that finished since
shows at the next reload after this, and a run asked for by id is looked for at once."""

_STATIC = {
    "report.css": ("veritrail.html", "report.css"),
    "diff.css": ("veritrail.runs", "web/diff.css"),
    "view.css": ("veritrail.runs", "web/view.css"),
}


def _date(value: str | None) -> datetime | None:
    """A `YYYY-MM-DD` filter value as midnight UTC (None when empty or not a date)."""
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None


def create_app(index: RunIndex, guard: Guard) -> Starlette:
    """The view's application over `index`, every request through `guard`."""
    common = {"root": str(index.root), "db": index.display_url}
    last_refresh = [-REFRESH_EVERY]

    def refresh() -> int:
        """Refresh the index unless that was done less than `REFRESH_EVERY` ago; returns how
        many run directories could not be read (0 when not refreshed)."""
        now = time.monotonic()
        if now - last_refresh[0] < REFRESH_EVERY:
            return 0
        last_refresh[0] = now
        return len(index.refresh().failed)

    def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(render(name, **common, **context), status_code=status)

    def message(heading: str, text: str, status: int) -> HTMLResponse:
        return page("message.html", status, title=heading, heading=heading, message=text)

    def runs_page(request: Request) -> Response:
        q = request.query_params
        since_s, until_s = q.get("since", ""), q.get("until", "")
        until = _date(until_s)
        flt = RunFilter(
            dag=q.get("dag") or None,
            model=q.get("model") or None,
            since=_date(since_s),
            until=until + timedelta(days=1) if until else None,  # the "to" day included
        )
        failed = refresh()
        try:
            offset = max(0, int(q.get("offset", "0")))
        except ValueError:
            offset = 0
        matching = index.list_runs(flt)
        shown = matching[offset : offset + PAGE_SIZE]
        keep = {k: v for k, v in q.items() if k != "offset" and v}

        def at(off: int) -> str:
            return "/?" + urlencode({**keep, "offset": str(off)})

        # The compare form preselects the two newest runs of one DAG (the newest run's, else
        # the next DAG's with two runs), never two unrelated pipelines' runs; none without a pair.
        pair: tuple[str, str] | None = None
        for r in shown:
            same = [o for o in shown if o.dag == r.dag]
            if len(same) >= 2:
                pair = (same[1].id, same[0].id)
                break
        return page(
            "runs.html",
            title="Runs",
            runs=shown,
            compare_a=pair[0] if pair else None,
            compare_b=pair[1] if pair else None,
            total=len(matching),
            total_all=len(matching) or index.count_runs(),
            offset=offset,
            refresh_failed=failed,
            dags=index.dags(),
            models=index.models(),
            flt={
                "dag": flt.dag or "",
                "model": flt.model or "",
                "since": since_s if flt.since else "",
                "until": until_s if until else "",
            },
            trend=trend_chart(matching),
            prev_url=at(max(0, offset - PAGE_SIZE)) if offset else None,
            next_url=at(offset + PAGE_SIZE) if offset + PAGE_SIZE < len(matching) else None,
        )

    def find(run_id: str | None) -> RunRow | None:
        if not run_id:
            return None
        row = index.get_run(run_id)
        if row is None:  # a run that finished since the last listing
            last_refresh[0] = time.monotonic()
            index.refresh()
            row = index.get_run(run_id)
        return row

    def run_page(request: Request) -> Response:
        run = find(request.query_params.get("id"))
        if run is None:
            return message("No such run", "The index has no run with this id.", 404)
        from ..reviewing import default_author
        from ..reviews import read_reviews

        claims = index.run_claims(run.id)
        # Runs of this very DAG name (the filter matches substrings), newest first: the
        # first is preselected as B.
        others = [
            r
            for r in index.list_runs(RunFilter(dag=run.dag))
            if r.id != run.id and r.dag == run.dag
        ]
        counts = {v.value: 0 for v in Verdict} | {"Error": 0}
        for c in claims:
            counts[c.effective_verdict or "Error"] += 1
        tiles = [
            (label, cls, counts[label])
            for label, cls in (
                (Verdict.FULLY_SUPPORTED.value, "fs"),
                (Verdict.NOT_FULLY_SUPPORTED.value, "nfs"),
                (Verdict.INCONCLUSIVE.value, "inc"),
                ("Error", "err"),
            )
        ]
        return page(
            "run.html",
            title=run.id,
            run=run,
            claims=claims,
            tiles=tiles,
            others=others,
            stage_chart=run_stage_chart(claims),
            histories=reviews_by_claim(read_reviews(run.path)),
            csrf=guard.csrf_token(request.state.vt_session),
            writable=run.path.is_dir(),
            verdicts=[v.value for v in Verdict],
            default_author=default_author(),
            model_label=model_label(run.model),
        )

    def trail_page(request: Request) -> Response:
        run = find(request.query_params.get("id"))
        if run is None:
            return message("No such run", "The index has no run with this id.", 404)
        from ...html import render_html
        from ...report import ReportFormatError, load_report_doc
        from ..reviewing import doc_with_reviews

        path = next(
            (
                p
                for p in (run.path / "report.json", run.path / "partial-report.json")
                if p.is_file()
            ),
            None,
        )
        if path is None:
            return message("No report", "This run has no report yet.", 404)
        try:
            # Validated once here (a report that breaks the contract is named by its field,
            # never drawn half-way by the page's script), with the run's reviews in it.
            doc = doc_with_reviews(load_report_doc(path), run.path)
        except ReportFormatError as exc:
            return message("Unreadable report", str(exc), 500)
        # A way back to the run and the list: the page may be opened on its own ("trail").
        back = (f"/run?id={quote(run.id, safe='')}", f"run {run.id}")
        return HTMLResponse(render_html(doc, back=back))

    def compare_page(request: Request) -> Response:
        q = request.query_params
        a, b = find(q.get("a")), find(q.get("b"))
        if a is None or b is None:
            return message("Compare", "Choose two runs of the index (A and B) to compare.", 400)
        try:
            side_a = load_side(a.path, label="A")
            side_b = load_side(b.path, label="B")
        except DiffInputError as exc:
            return message("Cannot compare", str(exc), 409)
        doc = diff_document(compare(side_a, side_b))
        from markupsafe import Markup

        return page("compare.html", title="Compare", a=a, b=b, sections=Markup(diff_sections(doc)))

    async def review(request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return message("Review refused", "The form is too large.", 413)
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if not guard.csrf_ok(request.cookies.get("vt_session"), form.get("csrf")):
            return message(
                "Review refused",
                "The form's security field does not match this browser's session; reload the "
                "run's page and submit again.",
                403,
            )
        from starlette.concurrency import run_in_threadpool

        from ..reviews import ReviewError

        run_id, claim_id = form.get("run", ""), form.get("claim", "")
        stage_text, node = form.get("stage", "").strip(), form.get("node", "").strip() or None
        try:
            stage = int(stage_text) if stage_text else None
        except ValueError:
            return message("Review refused", f"error stage {stage_text!r} is not a number", 400)
        try:
            await run_in_threadpool(
                index.review,
                run_id,
                claim_id,
                form.get("verdict", ""),
                form.get("reason", ""),
                author=form.get("author") or None,
                stage=stage,
                node=node,
            )
        except ReviewError as exc:
            return message("Review refused", str(exc), 400)
        claims = await run_in_threadpool(index.run_claims, run_id)
        pos = next((c.position for c in claims if c.claim_id == claim_id), None)
        anchor = f"#claim-{pos}" if pos is not None else ""
        return RedirectResponse(f"/run?id={quote(run_id, safe='')}{anchor}", status_code=303)

    def static(request: Request) -> Response:
        found = _STATIC.get(request.path_params["name"])
        if found is None:
            return Response("not found", status_code=404, media_type="text/plain")
        package, rel = found
        data = (resources.files(package) / rel).read_bytes()
        return Response(data, media_type="text/css; charset=utf-8")

    routes = [
        Route("/", runs_page),
        Route("/run", run_page),
        Route("/run/trail", trail_page),
        Route("/compare", compare_page),
        Route("/review", review, methods=["POST"]),
        Route("/static/{name}", static),
        # Browsers ask for it on their own; an empty answer keeps their consoles clean.
        Route("/favicon.ico", lambda request: Response(status_code=204)),
    ]

    def failed(request: Request, exc: Exception) -> Response:
        # A page that says what is wrong, never a bare "Internal Server Error": a database
        # that stopped answering is unavailable (503: try again later); anything else that
        # veritrail explains (a report of a version it cannot read, ...) is a 500 with the text.
        if isinstance(exc, RunsIndexUnavailable):
            return message("Index database unavailable", str(exc), 503)
        return message("Cannot show this page", str(exc), 500)

    return Starlette(
        routes=routes,
        middleware=[Middleware(GuardMiddleware, guard=guard)],
        exception_handlers={VeritrailError: failed},
    )


__all__ = ["MAX_FORM_BYTES", "PAGE_SIZE", "REFRESH_EVERY", "create_app"]

"""The labelling page's ASGI app (Starlette): the page, its script and style, and a small JSON API.

    GET  /                      the page (static/index.html; app.js and app.css beside it, nothing external)
    GET  /api/study             name, metric, scale, systems, the default labeller, pair count
    GET  /api/next?labeller=X   the pair X should grade next (query, highlighted document segments, fingerprint)
                                and X's progress. Never the LLM's grade: a person is not anchored by it.
                                `&mode=agreement`: a pair someone else graded and X has not (a second opinion,
                                in queue order), so the people's agreement (Cohen's kappa) can be measured
    POST /api/label  {"labeller", "pair_id", "grade", "doc_sha256"}   store a grade; the reply reveals the LLM's
                                grade of that pair, now that the person's is on disk
    POST /api/skip   {"labeller", "pair_id", "doc_sha256"}            out of X's queue (not a label)
    POST /api/undo   {"labeller"}                                     take back X's latest grade or skip
    GET  /api/estimate          `estimate_study` per system (interval narrowing as labels arrive) and agreement

Which pair comes next and the estimates are the study's (`retbench.studies.labels.answer`: `next_pairs`,
`estimate_study`); labels are written only through the label log (`retbench.studies.labels.log`). The app holds
no state of its own beyond caches, so a restarted server resumes exactly where the log says each person was.

Cross-site requests: a POST must be `application/json` (a form on another site cannot send that without a
CORS preflight, which this app never grants), and is refused when its Origin is another site's or the browser
says (Sec-Fetch-Site) it comes from another site. The Host header must name the address the server was told
to serve (a DNS-rebinding page gets 400). Every reply carries a Content-Security-Policy allowing only this
origin's own script and style: no inline script, no external asset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retbench.errors import InputError
from retbench.io.files import json_safe
from retbench.labelapp.study import StudyFiles
from retbench.studies.labels.answer import estimate_study, next_pairs
from retbench.studies.labels.highlight import Highlighter
from retbench.studies.labels.log import LabelConflict, LabelLog, agreement_summary, check_labeller, doc_sha256

STATIC = Path(__file__).parent / "static"
MAX_BODY = 64 * 1024
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
LOOPBACK_HOSTS = ["127.0.0.1", "localhost"]


class _Headers:
    """Adds the security headers to every reply (pure ASGI, so streamed files get them too)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"cache-control", b"no-store"),
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _reply(obj: object, status: int = 200) -> JSONResponse:
    return JSONResponse(json_safe(obj), status_code=status)


def _same_origin(request: Request) -> str | None:
    """Why this POST is refused as cross-site, or None."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        return "send JSON (Content-Type: application/json)"
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"cross-site request refused (Sec-Fetch-Site: {site})"
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        return f"cross-origin request refused (Origin: {origin})"
    return None


class LabelPage:
    """The routes over one study folder."""

    def __init__(self, study_dir: str | Path, labeller: str | None = None) -> None:
        self.dir = Path(study_dir)
        self.files = StudyFiles(self.dir)
        self.log = LabelLog(self.dir)
        self.labeller = check_labeller(labeller) if labeller is not None else None
        self.highlighter = Highlighter()
        self.log.read()  # a malformed log is an error now, at start, not on the first request

    # -- helpers -----------------------------------------------------------------------------------
    def _pair(self, pair_id: object) -> dict[str, Any]:
        pairs = self.files.pairs()
        if isinstance(pair_id, bool) or not isinstance(pair_id, int) or not 0 <= pair_id < len(pairs):
            raise InputError(f"no pair {pair_id!r} (pairs are 0..{len(pairs) - 1})", field="pair_id")
        return pairs[pair_id]

    def _view(self, pair: dict[str, Any]) -> dict[str, Any]:
        """What the page shows of a pair: never its LLM grade."""
        terms = self.highlighter.terms(pair["query"])
        return {
            "pair_id": pair["pair_id"],
            "qid": pair["qid"],
            "doc_id": pair["doc_id"],
            "query": pair["query"],
            "terms": terms,
            "segments": self.highlighter.segments(pair["doc_text"], terms),
            "doc_sha256": doc_sha256(pair["doc_text"]),
        }

    def _second_opinions(self, labeller: str) -> list[int]:
        """Pairs others graded and `labeller` has not, queued ones first in queue order, then by id."""
        wanted = self.log.read().second_opinions(labeller)
        pairs = [p for p in self.files.pairs() if p["pair_id"] in wanted]
        pairs.sort(key=lambda p: (p.get("order") is None, p.get("order") or 0, p["pair_id"]))
        return [p["pair_id"] for p in pairs[:1]]

    def _progress(self, labeller: str) -> dict[str, Any]:
        pairs = self.files.pairs()
        labels = self.log.read()
        queue = {p["pair_id"] for p in pairs if p.get("order") is not None}
        done = labels.done(labeller)
        graded = set().union(*(grades.keys() for grades in labels.by_labeller().values()))
        return {
            "queued": len(queue),
            "done": len(done & queue),
            "graded_by_you": len(labels.effective(labeller)),
            "skipped_by_you": sum(1 for _, e in labels.active(labeller) if e["event"] == "skip"),
            "pairs": len(pairs),
            "pairs_graded": len(graded),
            "note": labels.note,
        }

    async def _body(self, request: Request) -> dict[str, Any]:
        if (why := _same_origin(request)) is not None:
            raise PermissionError(why)
        raw = await request.body()
        if len(raw) > MAX_BODY:
            raise InputError(f"request body over {MAX_BODY} bytes")
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise InputError(f"the body is not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise InputError("the body must be a JSON object")
        return body

    def _checked_pair(self, body: dict[str, Any]) -> dict[str, Any]:
        pair = self._pair(body.get("pair_id"))
        if body.get("doc_sha256") != doc_sha256(pair["doc_text"]):
            raise LabelConflict(
                f"pair {pair['pair_id']} changed since it was shown (pairs.jsonl was rewritten): reload the page",
                field="doc_sha256",
            )
        return pair

    def _shown(self, pair: dict[str, Any], labeller: str) -> dict[str, Any]:
        """What the person saw when answering (recorded with the event)."""
        seen = any(
            e["event"] == "grade" and e["labeller"] == labeller and e["pair_id"] == pair["pair_id"]
            for _, e in self.log.read().events
        )  # an earlier grade of this pair, since undone: its reply showed them the LLM's grade
        return {
            "query": pair["query"],
            "doc_sha256": doc_sha256(pair["doc_text"]),
            "llm_hidden": not seen,
            "highlight": self.highlighter.terms(pair["query"]),
        }

    # -- routes ------------------------------------------------------------------------------------
    def index(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    def study(self, request: Request) -> Response:
        study = self.files.study()
        keys = ("name", "metric", "k", "systems", "decision")
        return _reply(
            {
                **{k: study.get(k) for k in keys},
                "scale": self.files.scale(),
                "labeller": self.labeller,
                "pairs": len(self.files.pairs()),
            }
        )

    def next(self, request: Request) -> Response:
        labeller = check_labeller(request.query_params.get("labeller"))
        if request.query_params.get("mode") == "agreement":
            ids = self._second_opinions(labeller)
        else:
            ids = next_pairs(self.dir, labeller, 1)
        pair = self._view(self._pair(ids[0])) if ids else None
        return _reply({"pair": pair, "progress": self._progress(labeller)})

    async def label(self, request: Request) -> Response:
        body = await self._body(request)
        return _reply(await run_in_threadpool(self._label, body))  # the fsync waits off the event loop

    async def skip(self, request: Request) -> Response:
        body = await self._body(request)
        return _reply(await run_in_threadpool(self._skip, body))

    async def undo(self, request: Request) -> Response:
        body = await self._body(request)
        return _reply(await run_in_threadpool(self._undo, body))

    def _label(self, body: dict[str, Any]) -> dict[str, Any]:
        labeller = check_labeller(body.get("labeller"))
        grade = body.get("grade")
        scale = self.files.scale()
        if isinstance(grade, bool) or grade not in scale:
            raise InputError(f"grade must be one of {scale}, got {grade!r}", field="grade")
        pair = self._checked_pair(body)
        index, event, again = self.log.record("grade", pair, labeller, self._shown(pair, labeller), grade=grade)
        llm = pair.get("llm")
        reveal = {"grade": llm.get("grade"), "status": llm.get("status")} if isinstance(llm, dict) else None
        return {
            "stored": index,
            "duplicate": again,
            "event": event,
            "reveal": {"pair_id": pair["pair_id"], "grade": grade, "llm": reveal},
            "progress": self._progress(labeller),
        }

    def _skip(self, body: dict[str, Any]) -> dict[str, Any]:
        labeller = check_labeller(body.get("labeller"))
        pair = self._checked_pair(body)
        index, event, again = self.log.record("skip", pair, labeller, self._shown(pair, labeller))
        return {"stored": index, "duplicate": again, "event": event, "progress": self._progress(labeller)}

    def _undo(self, body: dict[str, Any]) -> dict[str, Any]:
        labeller = check_labeller(body.get("labeller"))
        done = self.log.undo(labeller)
        if done is None:
            raise LabelConflict(f"{labeller} has nothing to undo")
        index, _, old = done
        pair = self._view(self._pair(int(old["pair_id"])))
        return {"stored": index, "undone": old, "pair": pair, "progress": self._progress(labeller)}

    def estimate(self, request: Request) -> Response:
        out: dict[str, Any] = {"agreement": agreement_summary(self.dir)}
        try:
            out["estimate"] = estimate_study(self.dir)
        except InputError as exc:  # e.g. nothing labelled or pre-labelled yet: the page says why
            out["estimate"], out["error"] = None, str(exc)
        return _reply(out)


async def _input_error(request: Request, exc: Exception) -> Response:
    return _reply({"error": str(exc)}, 409 if isinstance(exc, LabelConflict) else 400)


async def _forbidden(request: Request, exc: Exception) -> Response:
    return _reply({"error": str(exc)}, 403)


def create_app(study_dir: str | Path, *, labeller: str | None = None, hosts: list[str] | None = None) -> Starlette:
    """The page over `study_dir`. `hosts`: the Host header values accepted (default: the loopback names)."""
    page = LabelPage(study_dir, labeller)
    routes = [
        Route("/", page.index),
        Route("/api/study", page.study),
        Route("/api/next", page.next),
        Route("/api/label", page.label, methods=["POST"]),
        Route("/api/skip", page.skip, methods=["POST"]),
        Route("/api/undo", page.undo, methods=["POST"]),
        Route("/api/estimate", page.estimate),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(_Headers),
            Middleware(TrustedHostMiddleware, allowed_hosts=hosts or LOOPBACK_HOSTS),
        ],
        exception_handlers={InputError: _input_error, PermissionError: _forbidden},
    )

"""The user's own retrieval service over HTTP: one request per query, bounded retries, a thread pool.

Request: `method` POST sends `body` as JSON; GET sends `body` (a flat mapping) as the query string.
In `body` and `url`, `{query}` and `{k}` are replaced: a string that is exactly `{k}`
becomes the integer k, anything else is text substitution (URL-quoted inside `url`). The default body
is `{"query": "{query}", "k": "{k}"}`. A token read from the environment variable `auth_env` is sent
as `auth_header: auth_scheme token` (with `auth_scheme: Basic` a `user:pass` token is sent base64-encoded);
`headers_env` maps more header names to environment variables. Secrets never come from the config
itself: credentials in the URL (`user:pass@host`) and literal header values that look like credentials
are config errors; describe() lists header names only. Every secret is masked (`retbench.secrets`) in
every encoded form before an error body is cut to its first 200 characters.

Response: JSON; `response_path` (dots, integers index lists: `data.hits`, `results.0.docs`) leads to
the ranked list, which is read by the system-outputs contract of `io.outputs`: `{"retrieved": [...]}`
or a bare list, of objects with `id` (and `text`, `score`) or bare ids; `id_field`/`score_field`/
`text_field` rename the keys. Items without a score get n - rank. The list is cut to k in served order.
Texts the service returns are kept in `self.texts`.

A RAG endpoint's answer side is read the same way, each from a dotted path of the response
(`answer_path`, `references_path`, `abstained_path`, `latency_path`; defaults `answer`,
`references`, `abstained`, `latency`; a path absent from a response is simply not there) by the
system-outputs contract of `io.answers`, and kept in `self.answers` (query id -> SystemAnswer), so a
deployed RAG service is evaluated end to end by the answer metrics.

A service that chooses a scope itself (a folder, a vault, a metadata filter) may say which at `scope_path`
(default `scope`): a filter mapping in the language of `retrievers/filters.py` (`{"folder": "notes"}`), a string
(a folder: `"notes"` means `{"folder": "notes"}`), or null (it searched everything). It is recorded per query as a
scoped system's choice is (`self.scopes`, query id -> `retrievers.scope.ScopeRecord`; journal and status.jsonl),
so `scope_miss_rate` audits the service's scope stage against the corpus's documents; a malformed scope makes
the query `invalid`. The service's own fallback and the selection's time are not visible in the field: a
`scope` stage in its `latency` block is reported as the other stages are.

Failures, per query: a socket timeout becomes status `timeout`; refused or reset connections and HTTP
statuses in `retry_on` are retried up to `retries` times with exponential backoff, then `error`; any
other HTTP status is an `error` at once; an unparsable or malformed answer is `invalid` (not retried).
Every attempt is recorded: `self.attempts[qid] = {"attempts": n, "errors": [...]}`, and a query that
succeeded only after retrying keeps status ok with `Run.errors[qid] = "ok after n attempts; earlier: ..."`
so a retried-into-success answer is never silent. Latency is the query's own wall time, retries
included. `index()` builds nothing (the service holds its index); it checks the host accepts
connections, so an unreachable store fails before the run with a message naming the URL.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retbench.data import Corpus, Queries, QueryStatus, Run, RunBuilder
from retbench.data.answers import SystemAnswer
from retbench.errors import BackendError, ConfigError, InputError
from retbench.io.answers import parse_answer
from retbench.io.outputs import parse_ranking
from retbench.jsontypes import JSONObject, JSONValue
from retbench.retrievers.base import Ranking, Retriever, register
from retbench.retrievers.filters import parse_filter
from retbench.retrievers.scope import ScopeRecord
from retbench.retrievers.stores import secret_from_env
from retbench.secrets import clip, has_userinfo, looks_secret
from retbench.secrets import register as register_secret

if TYPE_CHECKING:
    import http.client

DEFAULT_BODY = {"query": "{query}", "k": "{k}"}
RETRY_STATUSES = (429, 500, 502, 503, 504)
NO_SCOPE_FIELD: Any = object()  # the response carried no scope field (unlike `null`: it chose no scope)
Scope = Mapping[str, Any] | None  # a filter mapping; None: no scope (everything searched)
_MAX_ERROR_BODY = 200


def fill(template: Any, query: str, k: int) -> Any:
    """The template with `{query}` and `{k}` filled in (a string that is exactly `{k}` becomes an int)."""
    if isinstance(template, str):
        if template == "{k}":
            return k
        return template.replace("{query}", query).replace("{k}", str(k))
    if isinstance(template, Mapping):
        return {key: fill(v, query, k) for key, v in template.items()}
    if isinstance(template, (list, tuple)):
        return [fill(v, query, k) for v in template]
    return template


def follow(obj: JSONValue, path: str | None) -> JSONValue:
    """The value at a dotted path (`data.hits`, `results.0`); KeyError names the missing step."""
    if not path:
        return obj
    for step in path.split("."):
        if isinstance(obj, list) and step.lstrip("-").isdigit():
            try:
                obj = obj[int(step)]
            except IndexError:
                raise KeyError(step) from None
        elif isinstance(obj, dict) and step in obj:
            obj = obj[step]
        else:
            raise KeyError(step)
    return obj


@dataclass
class Answer:
    """What asking the service for one query produced."""

    ranking: Ranking = field(default_factory=list)
    status: QueryStatus | None = None  # None: ok or empty, decided by the Run
    error: str | None = None
    attempts: int = 0
    errors: list[str] = field(default_factory=list)
    latency: float = 0.0
    answer: SystemAnswer | None = None  # a RAG endpoint's answer side
    scope: Scope = NO_SCOPE_FIELD  # the scope the service says it chose (module docstring)


class _Failure(Exception):
    def __init__(self, status: QueryStatus, message: str, retry: bool) -> None:
        super().__init__(message)
        self.status, self.retry = status, retry


@register("http")
class HttpRetriever(Retriever):
    """A retrieval service behind a URL; see the module docstring for the request and response contract."""

    adapter = "http"
    capabilities = frozenset()

    def __init__(
        self,
        url: str,
        method: str = "POST",
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        headers_env: Mapping[str, str] | None = None,
        auth_env: str | None = None,
        auth_header: str = "Authorization",
        auth_scheme: str = "Bearer",
        response_path: str | None = None,
        id_field: str = "id",
        score_field: str = "score",
        text_field: str = "text",
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.1,
        retry_on: Sequence[int] = RETRY_STATUSES,
        concurrency: int = 4,
        name: str | None = None,
        answer_path: str = "answer",
        references_path: str = "references",
        abstained_path: str = "abstained",
        latency_path: str = "latency",
        scope_path: str = "scope",
    ) -> None:
        super().__init__(name)
        method = method.upper()
        if method not in ("GET", "POST"):
            raise ValueError(f"method must be GET or POST, not {method!r}")
        parts = urllib.parse.urlsplit(url)
        if has_userinfo(url):
            raise ConfigError(
                "url carries credentials (user:pass@host); put them in an environment variable named by auth_env "
                "(auth_scheme: Basic sends user:pass base64-encoded)",
                field="url",
            )
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port]/path, not {url!r}")
        body = DEFAULT_BODY if body is None else body
        if method == "GET" and not (
            isinstance(body, Mapping) and all(not isinstance(v, (Mapping, list)) for v in body.values())
        ):
            raise ValueError("a GET body must be a flat mapping (it becomes the query string)")
        if timeout <= 0 or retries < 0 or backoff < 0 or concurrency < 1:
            raise ValueError("timeout and concurrency must be positive, retries and backoff not negative")
        self.url, self.method, self.body = url, method, body
        self.headers = {str(n): str(v) for n, v in (headers or {}).items()}
        for name, value in self.headers.items():
            if looks_secret(name, value):
                raise ConfigError(
                    f"header {name!r} looks like a credential; name an environment variable for it in headers_env "
                    "(secrets are never read from configs, which are copied into manifests)",
                    field=f"headers.{name}",
                )
        self.headers_env = {str(n): str(v) for n, v in (headers_env or {}).items()}
        self._secret_headers = {n: secret_from_env(v, f"headers_env.{n}") or "" for n, v in self.headers_env.items()}
        self.auth_env, self.auth_header, self.auth_scheme = auth_env, auth_header, auth_scheme
        self._token = secret_from_env(auth_env, "auth_env")
        if self._token and auth_scheme.lower() == "basic" and ":" in self._token:
            self._token = base64.b64encode(self._token.encode("utf-8")).decode("ascii")
            register_secret(self._token)
        self.response_path = response_path
        self.id_field, self.score_field, self.text_field = id_field, score_field, text_field
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.retry_on = frozenset(int(s) for s in retry_on)
        self.concurrency = int(concurrency)
        self.attempts: dict[str, dict[str, Any]] = {}
        self.texts: dict[str, str] = {}
        self.answer_paths = {
            "answer": answer_path,
            "references": references_path,
            "abstained": abstained_path,
            "latency": latency_path,
        }
        self.answers: dict[str, SystemAnswer] = {}
        self.scope_path = scope_path
        self.scopes: dict[str, ScopeRecord] = {}
        self._parts = parts
        self._local = threading.local()
        self._conns: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    # -- description ---------------------------------------------------------------------------
    def describe(self) -> JSONObject:
        return {
            "adapter": self.adapter,
            "url": self.url,
            "method": self.method,
            "body": self.body,
            "headers": sorted({*self.headers, *self.headers_env}),  # names only: values may be keys
            "auth": f"{self.auth_header} from ${self.auth_env}" if self.auth_env else None,
            "response_path": self.response_path,
            "fields": {"id": self.id_field, "score": self.score_field, "text": self.text_field},
            "answer_paths": dict(self.answer_paths),
            "scope_path": self.scope_path,
            "timeout_s": self.timeout,
            "retries": self.retries,
            "backoff_s": self.backoff,
            "retry_on": sorted(self.retry_on),
            "concurrency": self.concurrency,
        }

    # -- transport -----------------------------------------------------------------------------
    def _connection(self) -> Any:
        """This thread's keep-alive connection (http.client; one per worker thread)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            import http.client

            cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
            conn = cls(self._parts.hostname or "", self._parts.port, timeout=self.timeout)
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _request(self, text: str, k: int) -> tuple[int, bytes]:
        path = fill(self._parts.path or "/", urllib.parse.quote(text, safe=""), k)
        query = fill(self._parts.query, urllib.parse.quote_plus(text), k)
        headers = {**self.headers, **self._secret_headers}
        if self._token:
            headers[self.auth_header] = f"{self.auth_scheme} {self._token}".strip()
        payload = None
        filled = fill(self.body, text, k)
        if self.method == "GET":
            extra = urllib.parse.urlencode(filled)
            query = f"{query}&{extra}" if query and extra else query or extra
        else:
            payload = json.dumps(filled).encode("utf-8")
            headers.setdefault("Content-Type", "application/json")
        target = f"{path}?{query}" if query else path
        import http.client

        while True:
            conn = self._connection()
            reused = getattr(conn, "_retbench_used", False)
            try:
                conn.request(self.method, target, body=payload, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._drop_connection()
                if reused:  # the server closed an idle keep-alive connection: the request never reached it
                    continue
                raise
            except BaseException:
                self._drop_connection()  # a half-read connection cannot be reused
                raise
            conn._retbench_used = True
            if resp.getheader("Connection", "").lower() == "close":
                self._drop_connection()
            return resp.status, data

    def _attempt(self, text: str, k: int) -> tuple[Ranking, dict[str, str], SystemAnswer | None, Scope]:
        """One request: the ranking, returned texts, answer side and scope, or a _Failure saying whether to retry."""
        import http.client

        try:
            status, data = self._request(text, k)
        except TimeoutError:
            raise _Failure(QueryStatus.TIMEOUT, f"timeout after {self.timeout:g} s", retry=True) from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Failure(QueryStatus.ERROR, f"{type(exc).__name__}: {exc}", retry=True) from None
        if not 200 <= status < 300:
            snippet = clip(data.decode("utf-8", "replace").strip(), _MAX_ERROR_BODY)  # redacted, then cut
            raise _Failure(QueryStatus.ERROR, f"HTTP {status}: {snippet}", retry=status in self.retry_on)
        try:
            return self.parse(data)
        except InputError as exc:
            raise _Failure(QueryStatus.INVALID, f"malformed response: {exc.reason}", retry=False) from None

    def parse(self, data: bytes) -> tuple[Ranking, dict[str, str], SystemAnswer | None, Scope]:
        """A response body -> (ranking in served order, texts by doc id, answer side, scope chosen); InputError if
        it is not one."""

        try:
            obj = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"not JSON ({exc})") from None
        try:
            value = follow(obj, self.response_path)
        except KeyError as exc:
            raise InputError(f"response_path {self.response_path!r}: no {exc.args[0]!r} in the response") from None
        if isinstance(value, dict) and "retrieved" in value:
            value = value["retrieved"]
        if isinstance(value, list) and (self.id_field, self.score_field, self.text_field) != ("id", "score", "text"):
            renames = {self.id_field: "id", self.score_field: "score", self.text_field: "text"}
            value = [
                {renames.get(f, f): v for f, v in item.items() if f in renames} if isinstance(item, dict) else item
                for item in value
            ]
        texts: dict[str, str] = {}
        ranking = parse_ranking(value, self.url, None, texts)
        return ranking, texts, self._answer_side(obj), self._scope(obj)  # type: ignore[return-value]

    def _scope(self, obj: JSONValue) -> Scope:
        """The scope at `scope_path` as a filter mapping (None: no scope), or NO_SCOPE_FIELD when absent."""
        try:
            value = follow(obj, self.scope_path)
        except KeyError:
            return NO_SCOPE_FIELD
        if isinstance(value, str):
            value = {"folder": value}
        if value is not None and not isinstance(value, Mapping):
            raise InputError(f"{self.scope_path}: expected a filter mapping, a folder or null, got {value!r:.60}")
        try:
            f = parse_filter(value, where=self.scope_path)
        except ConfigError as exc:
            raise InputError(f"{self.scope_path}: {exc.reason}") from None
        return None if f is None else f.as_dict()

    def _answer_side(self, obj: JSONValue) -> SystemAnswer | None:
        """The answer fields found at their paths in the response (None when there are none)."""
        found: dict[str, JSONValue] = {}
        for name, path in self.answer_paths.items():
            try:
                found[name] = follow(obj, path)
            except KeyError:
                continue
        return parse_answer(found, self.url, None) if found else None

    def ask(self, text: str, k: int) -> Answer:
        """One query, retried as configured; never raises for a backend failure."""
        answer = Answer()
        t0 = time.perf_counter()
        for attempt in range(1, self.retries + 2):
            answer.attempts = attempt
            try:
                ranking, texts, answer.answer, answer.scope = self._attempt(text, k)
            except _Failure as fail:
                answer.errors.append(clip(str(fail), 4 * _MAX_ERROR_BODY))
                answer.status, answer.error = fail.status, answer.errors[-1]
                if not fail.retry or attempt > self.retries:
                    break
                time.sleep(min(self.backoff * 2 ** (attempt - 1), 5.0))
                continue
            answer.ranking, answer.status, answer.error = ranking[:k], None, None
            if attempt > 1:
                answer.error = f"ok after {attempt} attempts; earlier: " + "; ".join(answer.errors)
            with self._lock:
                for doc in dict(answer.ranking):
                    if doc in texts:
                        self.texts.setdefault(doc, texts[doc])
            break
        if answer.status is not None and answer.attempts > 1:
            answer.error = (
                f"{answer.error} (after {answer.attempts} attempts; earlier: {'; '.join(answer.errors[:-1])})"
            )
        answer.latency = time.perf_counter() - t0
        return answer

    # -- Retriever -----------------------------------------------------------------------------
    def index(self, corpus: Corpus) -> None:
        """The service holds its own index: check that it accepts connections."""
        host, port = self._parts.hostname, self._parts.port or (443 if self._parts.scheme == "https" else 80)
        try:
            with socket.create_connection((host, port), timeout=self.timeout):
                pass
        except OSError as exc:
            raise BackendError(f"retrieval endpoint {self.url} is unreachable: {type(exc).__name__}: {exc}") from None

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix=f"retbench-http-{self.name}")
        return self._pool

    def search(self, queries: Queries, k: int, *, batch_size: int = 0) -> Run:
        """Every query through `ask`, `concurrency` at a time; statuses, latencies and retries recorded."""
        qids = list(queries)
        answers = list(self._executor().map(lambda q: self.ask(queries[q], k), qids))
        builder = RunBuilder(self.name)
        for qid, a in zip(qids, answers, strict=True):
            self.attempts[qid] = {"attempts": a.attempts, "errors": a.errors}
            if a.answer is not None:
                self.answers[qid] = a.answer
            if a.scope is not NO_SCOPE_FIELD:
                self.scopes[qid] = ScopeRecord(a.scope, len(a.ranking), latency={})
            builder.add(qid, a.ranking, status=a.status, latency=a.latency, error=a.error)
        return builder.build()

    @staticmethod
    def _ranking_or_raise(a: Answer) -> Ranking:
        """A failed answer raises (TimeoutError for a timeout, else BackendError) for callers that only know exceptions."""
        if a.status == QueryStatus.TIMEOUT:
            raise TimeoutError(a.error)
        if a.status is not None:
            raise BackendError(a.error or a.status.value)
        return a.ranking

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        """Rankings for texts, `concurrency` at a time; the first failed query raises."""
        return [self._ranking_or_raise(a) for a in self._executor().map(lambda t: self.ask(t, k), list(texts))]

    def search_one(self, text: str, k: int) -> Ranking:
        """One request on the caller's thread, so stress mode's own concurrency is not capped by the pool."""
        return self._ranking_or_raise(self.ask(text, k))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()

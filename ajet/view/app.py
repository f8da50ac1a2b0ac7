"""The viewer's HTTP API and page: a FastAPI app over one or more run folders, read-only.

    GET /                                       the page (static/index.html, app.js, style.css, vendor/uplot)
    GET /api/runs                               the runs: name, model, stages, steps, episode files
    GET /api/runs/{run}/metrics                 metrics.jsonl rows (and its corrupt lines)
    GET /api/runs/{run}/episodes                the episode table: ?file= step= task= group= q= reward_min=
                                                reward_max= success= failure= stop= turns_min= turns_max=
                                                tools_min= tools_max= sort= order=asc|desc offset= limit=
    GET /api/runs/{run}/episodes/{line}         one episode (its line of the file), or its corrupt record
    GET /api/runs/{run}/episodes/{line}/tokens  its samples token by token
    GET /api/runs/{run}/compare?a=&b=           two episodes of one GRPO group side by side

Every request re-reads only what the run appended since the last one. A bad parameter is a 400 with an
OpenAI-shaped error naming it; a corrupt line is returned as {"corrupt": true, "line", "text"}.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from ajet.backbone.monitor import finite_json
from ajet.errors import GatewayError
from ajet.gateway.request import bad_request, error_response, install_error_handlers
from ajet.serving.auth import ApiKeyMiddleware, LoopbackHostMiddleware
from ajet.view.episodes import SORT_KEYS, EpisodeFilter, facets, select
from ajet.view.jsonl_index import TEXT_SHOWN, JsonlIndex
from ajet.view.run_folder import EPISODE_FILES, RunFolder
from ajet.view.tokens import token_view

STATIC = Path(__file__).resolve().parent / "static"
MAX_PAGE = 500


class ViewJSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        # NaN and infinities as null: they are not JSON, and a browser's JSON.parse refuses them
        # (a lone surrogate, valid in JSON text, cannot be UTF-8: it is written "?", never a 500)
        return json.dumps(finite_json(content), ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")


class _Query:
    """Typed query parameters; a value that does not parse is a 400 naming the parameter."""

    def __init__(self, request: Request) -> None:
        self.params = request.query_params

    def text(self, name: str) -> str | None:
        value = self.params.get(name)
        return value if value not in (None, "") else None

    def number(self, name: str, kind: type = float, low: float | None = None, high: float | None = None) -> Any:
        raw = self.text(name)
        if raw is None:
            return None
        try:
            value = kind(raw)
        except ValueError:
            raise bad_request(f"{name}={raw!r} is not {'an integer' if kind is int else 'a number'}", name) from None
        if (low is not None and value < low) or (high is not None and value > high) or value != value:
            raise bad_request(f"{name}={raw!r} is outside [{low}, {high}]", name)
        return value

    def flag(self, name: str) -> bool | None:
        raw = self.text(name)
        if raw is None:
            return None
        if raw.lower() not in ("true", "false", "1", "0"):
            raise bad_request(f"{name}={raw!r}: use true or false", name)
        return raw.lower() in ("true", "1")

    def choice(self, name: str, options: tuple[str, ...], default: str) -> str:
        raw = self.text(name) or default
        if raw not in options:
            raise bad_request(f"{name}={raw!r}: one of {', '.join(options)}", name)
        return raw


def create_app(runs: list[RunFolder], api_key: str | None = None, loopback_only: bool = True) -> FastAPI:
    """api_key: every /api route needs `Authorization: Bearer KEY` (the page and its static files do not:
    they hold no run data). loopback_only: answer only requests whose Host header is a loopback name."""
    app = FastAPI(title="ajet view", docs_url=None, redoc_url=None, openapi_url=None,
                  default_response_class=ViewJSON)
    install_error_handlers(app)
    if api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=api_key, public_paths=("/",), public_prefixes=("/static/",))
    if loopback_only:
        app.add_middleware(LoopbackHostMiddleware)

    @app.exception_handler(GatewayError)
    async def _refused(request: Request, exc: GatewayError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _bad_path(request: Request, exc: RequestValidationError) -> JSONResponse:
        where = exc.errors()[0].get("loc", ("", "?")) if exc.errors() else ("", "?")
        return error_response(bad_request(f"{where[-1]}: {exc.errors()[0].get('msg', 'invalid')}", str(where[-1])))

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    api = ViewApi(runs)
    app.get("/", include_in_schema=False)(api.page)
    app.get("/api/runs")(api.list_runs)
    app.get("/api/runs/{run_id}/metrics")(api.metrics)
    app.get("/api/runs/{run_id}/episodes")(api.episodes)
    app.get("/api/runs/{run_id}/episodes/{line}")(api.episode)
    app.get("/api/runs/{run_id}/episodes/{line}/tokens")(api.tokens)
    app.get("/api/runs/{run_id}/compare")(api.compare)
    return app


def _episode_filter(q: _Query) -> EpisodeFilter:
    return EpisodeFilter(
        step=q.number("step", int), task=q.text("task"), group=q.text("group"), query=q.text("q"),
        reward_min=q.number("reward_min"), reward_max=q.number("reward_max"), success=q.flag("success"),
        failure=q.text("failure"), stop=q.text("stop"),
        turns_min=q.number("turns_min", int, 0), turns_max=q.number("turns_max", int, 0),
        tools_min=q.number("tools_min", int, 0), tools_max=q.number("tools_max", int, 0))


class ViewApi:
    """The routes, one method each (the module docstring lists them)."""

    def __init__(self, runs: list[RunFolder]) -> None:
        self.runs = runs

    # ------------------------------------------------------------------ lookups
    def run_of(self, run_id: int) -> RunFolder:
        if not 0 <= run_id < len(self.runs):
            raise GatewayError(f"no run {run_id}; there are {len(self.runs)} (0 to {len(self.runs) - 1})",
                               status=404, code="not_found", param="run")
        return self.runs[run_id]

    @staticmethod
    def episode_file(run: RunFolder, query: _Query) -> tuple[str, JsonlIndex]:
        name = query.choice("file", EPISODE_FILES, default=_default_file(run))
        index = run.episode_index(name)
        index.refresh()
        return name, index

    def episode_at(self, run: RunFolder, query: _Query, line: int, param: str = "line"):
        """(file name, its index, the indexed line, the row or its corrupt record)."""
        name, index = self.episode_file(run, query)
        found = index.line(line)
        if found is None:
            raise GatewayError(f"{name}.jsonl has no episode on line {line}", status=404, code="not_found", param=param)
        return name, index, found, index.read(found)

    # ------------------------------------------------------------------ routes
    def page(self) -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-cache"})

    def list_runs(self) -> list[dict[str, Any]]:
        return [run.describe() for run in self.runs]

    def metrics(self, run_id: int) -> dict[str, Any]:
        return self.run_of(run_id).metric_rows()

    def episodes(self, run_id: int, request: Request) -> dict[str, Any]:
        run, q = self.run_of(run_id), _Query(request)
        name, index = self.episode_file(run, q)
        flt = _episode_filter(q)
        sort = q.choice("sort", SORT_KEYS, "line")
        descending = q.choice("order", ("asc", "desc"), "asc") == "desc"
        offset = q.number("offset", int, 0) or 0
        limit = q.number("limit", int, 1, MAX_PAGE) or 50
        lines = index.lines()
        chosen = select(lines, flt, sort, descending)
        rows = [index.read(line) if line.summary is None else {"line": line.number, **line.summary}
                for line in chosen[offset:offset + limit]]
        return {"file": name, "total": len(lines), "matched": len(chosen), "offset": offset, "limit": limit,
                "rows": rows, "facets": facets(lines)}

    def episode(self, run_id: int, line: int, request: Request) -> dict[str, Any]:
        run = self.run_of(run_id)
        name, index, found, row = self.episode_at(run, _Query(request), line)
        if row.get("corrupt"):
            return row
        return _shown(found.number, row, lambda: {**row, "_view": _episode_extras(run, index, name, found.number, row)})

    def tokens(self, run_id: int, line: int, request: Request) -> dict[str, Any]:
        run = self.run_of(run_id)
        _, _, found, row = self.episode_at(run, _Query(request), line)
        if row.get("corrupt"):
            return row
        return _shown(found.number, row,
                      lambda: token_view(row, run.samples_of(str(row.get("episode_id"))), run.model_name()))

    def compare(self, run_id: int, request: Request) -> dict[str, Any]:
        run, q = self.run_of(run_id), _Query(request)
        lines = {}
        for param in ("a", "b"):
            value = q.number(param, int, 1)
            if value is None:
                raise bad_request(f"{param} is required: the line of an episode to compare", param)
            lines[param] = value
        out = {}
        for param, number in lines.items():
            name, index, found, row = self.episode_at(run, q, number, param)
            if row.get("corrupt"):
                raise bad_request(f"line {number} of {name}.jsonl is corrupt: {row['text'][:80]!r}", param)
            shown = _shown(found.number, row, lambda: {**row, "_view": _episode_extras(run, index, name, found.number, row)})
            if shown.get("corrupt"):
                raise bad_request(f"line {number} of {name}.jsonl cannot be shown: {shown['reason']}", param)
            out[param] = shown
        if out["a"].get("group_id") != out["b"].get("group_id"):
            raise bad_request(f"episodes on lines {lines['a']} and {lines['b']} are in different GRPO groups "
                              f"({out['a'].get('group_id')!r} and {out['b'].get('group_id')!r}); compare two "
                              "episodes of one group", "b")
        return out


# What a row of the wrong shape raises while a view is built from it (a field of another type, ids that
# are not integers, Infinity where a count belongs): the row is shown as corrupt, never a 500.
_SHAPE_ERRORS = (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError)


def _shown(number: int, row: dict[str, Any], build: Any) -> dict[str, Any]:
    try:
        return build()
    except _SHAPE_ERRORS as exc:
        try:
            text = json.dumps(row, default=str)[:TEXT_SHOWN]
        except _SHAPE_ERRORS:
            text = ""
        return {"corrupt": True, "line": number, "text": text, "reason": f"unexpected row: {type(exc).__name__}: {exc}"}


def _default_file(run: RunFolder) -> str:
    """The first episode file the folder has (a training run: episodes; an eval folder: eval_episodes)."""
    for name in EPISODE_FILES:
        if run.episode_index(name).path.is_file():
            return name
    return EPISODE_FILES[0]


def _episode_extras(run: RunFolder, index: JsonlIndex, name: str, number: int, row: dict[str, Any]) -> dict[str, Any]:
    """Where the episode sits: its file and line, the other members of its GRPO group, and per sample
    the advantage it was trained with (from samples.jsonl, without the token arrays)."""
    group = row.get("group_id")
    members = [{"line": ln.number, "episode_id": ln.summary["episode_id"], "reward": ln.summary["reward"],
                "success": ln.summary["success"], "repeat": ln.summary["repeat"]}
               for ln in index.lines() if ln.summary is not None and group and ln.summary["group_id"] == group]
    samples = [{"index": s.get("index"), "advantage": s.get("advantage"), "trained": s.get("trained"),
                "fork_reason": s.get("fork_reason"), "tokens": len(s.get("input_ids") or []),
                "trained_tokens": sum(s.get("loss_mask") or [])}
               for s in run.samples_of(str(row.get("episode_id")))]
    return {"file": name, "line": number, "run": run.id, "group": members, "samples": samples}

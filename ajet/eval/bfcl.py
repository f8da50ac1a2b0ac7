"""`ajet eval --benchmark bfcl`: the Berkeley Function Calling Leaderboard's single-turn categories,
scored with the `bfcl-eval` package's own data, prompts, decoders and AST checker.

Nothing here re-implements BFCL. Each test entry goes through BFCL's `OpenAICompletionsHandler`
(its chat-completions handler) pointed at an OpenAI-compatible endpoint:

    mode=prompt  BFCL's prompt-based path for models without native tool calling: the function
                 docs go into BFCL's system prompt and the reply is parsed as `[func(arg=...)]`
                 with BFCL's AST decoder.
    mode=fc      BFCL's function-calling path: the functions are sent as OpenAI `tools` and the
                 reply's `tool_calls` are scored.

A local model (the embedded name, a model or exported folder, a checkpoint or run folder) is
served first by `ajet.serving.local` on 127.0.0.1, so local and hosted models take the same path.
The reply is scored by BFCL's per-entry evaluators (`_evaluate_single_ast_entry`,
`_evaluate_single_relevance_entry`, the functions its own runner calls). BFCL is an evaluation
set: nothing in ajet trains on it.

Writes `eval.json` (per-category accuracy) and `predictions.jsonl` (one line per entry: the raw
reply, whether BFCL counted it correct, and BFCL's error) to the output folder.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from ajet.errors import ConfigError
from ajet.serving.local import Endpoint

console = Console()
Mode = Literal["prompt", "fc"]
INSTALL_HINT = (
    "BFCL needs the bfcl-eval package and what its checker imports: pip install 'ajet[bfcl]' && "
    "pip install --no-deps bfcl-eval==2026.3.23 (--no-deps: its numpy==1.26.4 pin would break numpy 2; "
    "see docs/evaluation.md)"
)


def _bfcl():
    """The parts of bfcl-eval ajet calls (imported late: the package is an optional extra)."""
    try:
        from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING
        from bfcl_eval.eval_checker import eval_runner
        from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler
        from bfcl_eval import utils
    except ImportError as exc:
        raise ConfigError(f"{INSTALL_HINT} ({exc})") from exc
    return MODEL_CONFIG_MAPPING, eval_runner, OpenAICompletionsHandler, utils


def single_turn_categories() -> list[str]:
    """BFCL's single-turn categories (the ones this command runs), in BFCL's order."""
    return _bfcl()[3].parse_test_category_argument(["single_turn"])


def resolve_categories(requested: list[str] | None) -> list[str]:
    """Category names or BFCL group names (`single_turn`, `non_live`, `live`, ...) -> categories."""
    utils = _bfcl()[3]
    allowed = single_turn_categories()
    names = requested or ["simple_python"]
    try:
        chosen = utils.parse_test_category_argument(names)
    except Exception as exc:  # BFCL raises a bare Exception for unknown names
        raise ConfigError(f"--categories {','.join(names)}: {exc}; single-turn categories: "
                          f"{', '.join(allowed)}") from exc
    unsupported = [c for c in chosen if c not in allowed]
    if unsupported:
        raise ConfigError(f"--categories: {', '.join(unsupported)} are multi-turn or agentic BFCL categories, "
                          f"which need BFCL's execution environments; ajet runs the single-turn ones: "
                          f"{', '.join(allowed)}")
    return [c for c in allowed if c in chosen]


def checker_model_name(mode: Mode) -> str:
    """A BFCL model key whose `underscore_to_dot` fits the mode, for the checker's name lookup.

    BFCL's checker reads one flag by model name: whether dots in function names were sent as
    underscores. fc mode sends OpenAI tools (BFCL rewrites `math.hypot` to `math_hypot`), prompt
    mode sends the names as they are.
    """
    mapping = _bfcl()[0]
    want = mode == "fc"
    for key, config in mapping.items():
        if "_" not in key and config.underscore_to_dot == want and config.is_fc_model == want:
            return key
    raise ConfigError(f"bfcl-eval has no model entry with underscore_to_dot={want}; upgrade bfcl-eval")


def make_handler(endpoint: Endpoint, mode: Mode, max_tokens: int, timeout_s: float | None):
    """BFCL's OpenAI chat-completions handler, talking to `endpoint`, greedy, replies capped.

    timeout_s None (a local model served in-process): wait as long as the queue takes and never
    resend; a timed-out request would keep the engine busy while its retry queued behind it."""
    base = _bfcl()[2]

    class EndpointHandler(base):  # BFCL's handler; only where it connects and the reply cap differ
        def _build_client_kwargs(self) -> dict[str, Any]:
            return {"base_url": endpoint.base_url, "api_key": endpoint.api_key, "timeout": timeout_s,
                    "max_retries": 0 if timeout_s is None else 1}

        def generate_with_backoff(self, **kwargs):
            kwargs.setdefault("max_tokens", max_tokens)
            return super().generate_with_backoff(**kwargs)

    return EndpointHandler(model_name=endpoint.model, temperature=0.0, registry_name="ajet", is_fc_model=mode == "fc")


def score_entry(handler: Any, entry: dict, answer: dict | None, category: str, reply: Any, mode: Mode) -> dict:
    """BFCL's own verdict on one reply: {'valid': bool, 'error': ..., 'error_type': ...}."""
    _, runner, _, utils = _bfcl()
    from bfcl_eval.constants.enums import Language, ReturnFormat

    name = checker_model_name(mode)
    if utils.is_relevance_or_irrelevance(category):
        return runner._evaluate_single_relevance_entry(handler, entry["id"], reply, entry, name, category)
    if utils.is_java(category):
        language, fmt = Language.JAVA, ReturnFormat.JAVA
    elif utils.is_js(category):
        language, fmt = Language.JAVASCRIPT, ReturnFormat.JAVASCRIPT
    else:
        language, fmt = Language.PYTHON, ReturnFormat.PYTHON
    return runner._evaluate_single_ast_entry(handler, entry["id"], reply, answer["ground_truth"], entry, name,
                                             category, language=language, return_format=fmt)


def load_category(category: str, limit: int | None) -> list[tuple[dict, dict | None]]:
    """(test entry, ground truth or None for relevance categories), BFCL's order, first `limit`."""
    utils = _bfcl()[3]
    entries = utils.load_dataset_entry(category)
    answers: list[dict | None]
    if utils.is_relevance_or_irrelevance(category):
        answers = [None] * len(entries)
    else:
        answers = utils.load_ground_truth_entry(category)
    pairs = list(zip(entries, answers))
    return pairs[:limit] if limit else pairs


def _infer_and_score(handler: Any, entry: dict, answer: dict | None, category: str, mode: Mode) -> dict:
    """One entry: BFCL's inference through the handler, then BFCL's verdict. Never raises."""
    started = time.perf_counter()
    record: dict[str, Any] = {"id": entry["id"], "category": category}
    try:
        reply, meta = handler.inference(copy.deepcopy(entry), include_input_log=False, exclude_state_log=True)
    except Exception as exc:  # a refused or failed request counts as a wrong answer, with its reason
        record.update(valid=False, result=None, error=f"inference failed: {type(exc).__name__}: {exc}",
                      error_type="ajet:inference_failed", seconds=round(time.perf_counter() - started, 3))
        return record
    verdict = score_entry(handler, copy.deepcopy(entry), answer, category, reply, mode)
    record.update(valid=bool(verdict.get("valid")), result=reply, error=verdict.get("error"),
                  error_type=verdict.get("error_type"), input_tokens=meta.get("input_token_count"),
                  output_tokens=meta.get("output_token_count"), seconds=round(time.perf_counter() - started, 3))
    if "model_result_decoded" in verdict:
        record["decoded"] = verdict["model_result_decoded"]
    return record


async def run_categories(endpoint: Endpoint, categories: list[str], mode: Mode, *, limit: int | None,
                         concurrency: int, max_tokens: int, timeout_s: float | None,
                         on_record=None) -> list[dict]:
    """Every entry of `categories` through `endpoint`, `concurrency` requests at a time."""
    handler = make_handler(endpoint, mode, max_tokens, timeout_s)
    jobs = [(entry, answer, category) for category in categories for entry, answer in load_category(category, limit)]
    loop = asyncio.get_running_loop()
    records: list[dict] = []
    # BFCL's handlers are synchronous: run them in threads while the event loop serves the local model.
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bfcl")
    try:
        futures = [loop.run_in_executor(pool, _infer_and_score, handler, e, a, c, mode) for e, a, c in jobs]
        for future in asyncio.as_completed(futures):
            record = await future
            records.append(record)
            if on_record is not None:
                on_record(record, len(records), len(jobs))
    finally:  # interrupted: entries not started are dropped, not run against a stopped server
        pool.shutdown(wait=False, cancel_futures=True)
    order = {(c, e["id"]): i for i, (e, _, c) in enumerate(jobs)}
    return sorted(records, key=lambda r: order[(r["category"], r["id"])])


def summarize(records: list[dict], categories: list[str]) -> dict[str, Any]:
    """Per-category accuracy (correct / total) and their unweighted mean, as BFCL reports groups."""
    per: dict[str, dict[str, Any]] = {}
    for category in categories:
        rows = [r for r in records if r["category"] == category]
        correct = sum(r["valid"] for r in rows)
        per[category] = {"accuracy": correct / len(rows) if rows else 0.0, "correct": correct, "total": len(rows),
                         "inference_failed": sum(r.get("error_type") == "ajet:inference_failed" for r in rows)}
    accuracies = [v["accuracy"] for v in per.values() if v["total"]]
    return {"categories": per, "accuracy_mean": sum(accuracies) / len(accuracies) if accuracies else 0.0,
            "correct": sum(v["correct"] for v in per.values()), "total": sum(v["total"] for v in per.values())}


def default_mode(model: str) -> Mode:
    """fc for endpoints and for models whose chat template renders tools (ajet checkpoints and exports
    carry the tool template they were trained with); prompt for models without native tool calling."""
    if model.startswith(("http://", "https://")):
        return "fc"
    path = Path(model)
    if (path / "checkpoints").is_dir() or (path / "state.json").is_file():
        return "fc"
    from ajet.models import resolve_model_path

    try:
        folder = Path(resolve_model_path(model))
    except Exception:
        return "prompt"
    template = ""
    for name in ("chat_template.jinja", "tokenizer_config.json"):
        if (folder / name).is_file():
            template += (folder / name).read_text(encoding="utf-8", errors="replace")
    return "fc" if "tools" in template else "prompt"


async def _evaluate(model: str, categories: list[str], mode: Mode, out_dir: Path, *, api_key: str,
                    served_model: str | None, limit: int | None, concurrency: int, max_tokens: int,
                    timeout_s: float, chat_template: str | None) -> list[dict]:
    from rich.progress import Progress

    # Each record is appended as it completes, so an interrupted run keeps what it scored.
    with Progress(console=console, transient=True) as progress, \
            (out_dir / "predictions.jsonl").open("w", encoding="utf-8") as stream:
        task = progress.add_task(f"BFCL {mode}", total=None)

        def tick(record: dict, done: int, total: int) -> None:
            stream.write(json.dumps(record, default=str) + "\n")
            stream.flush()
            progress.update(task, completed=done, total=total)

        kwargs = dict(limit=limit, concurrency=concurrency, max_tokens=max_tokens, timeout_s=timeout_s,
                      on_record=tick)
        if model.startswith(("http://", "https://")):
            endpoint = Endpoint(base_url=model.rstrip("/"), model=served_model or _first_model(model, api_key),
                                api_key=api_key)
            return await run_categories(endpoint, categories, mode, **kwargs)
        from ajet.serving.local import local_endpoint

        async with local_endpoint(model, out_dir, chat_template=chat_template) as endpoint:
            return await run_categories(endpoint, categories, mode, **{**kwargs, "timeout_s": None})


def _first_model(base_url: str, api_key: str) -> str:
    """The first model an endpoint lists (GET /models), for endpoints given without a model name."""
    import httpx

    try:
        response = httpx.get(base_url.rstrip("/") + "/models", headers={"Authorization": f"Bearer {api_key}"},
                             timeout=30)
        response.raise_for_status()
        return response.json()["data"][0]["id"]
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"cannot list the models of {base_url} ({exc}); pass --served-model NAME") from exc


def run_bfcl(model: str, *, categories: list[str] | None = None, mode: Mode | None = None,
             out_dir: str | Path | None = None, api_key: str = "EMPTY", served_model: str | None = None,
             limit: int | None = None, concurrency: int = 8, max_tokens: int = 256, timeout_s: float = 600,
             chat_template: str | None = None) -> dict[str, Any]:
    """The `ajet eval --benchmark bfcl` command: run, print a table, write eval.json and predictions.jsonl."""
    chosen = resolve_categories(categories)
    mode = mode or default_mode(model)
    out = Path(out_dir or Path("runs") / "bfcl" / time.strftime("%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    records = asyncio.run(_evaluate(model, chosen, mode, out, api_key=api_key, served_model=served_model,
                                    limit=limit, concurrency=concurrency, max_tokens=max_tokens,
                                    timeout_s=timeout_s, chat_template=chat_template))
    report = {"benchmark": "bfcl", "bfcl_eval_version": _version(), "model": model, "mode": mode,
              "limit_per_category": limit, "seconds": round(time.perf_counter() - started, 1),
              **summarize(records, chosen)}
    with (out / "predictions.jsonl").open("w", encoding="utf-8") as handle:  # rewritten in BFCL's order
        for record in records:
            handle.write(json.dumps(record, default=str) + "\n")
    (out / "eval.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print_bfcl(report)
    console.print(f"wrote {out / 'eval.json'} and {out / 'predictions.jsonl'}")
    return report


def print_bfcl(report: dict[str, Any]) -> None:
    table = Table(title=f"BFCL · {report['model']} · {report['mode']} mode", header_style="bold")
    for column, justify in (("category", "left"), ("correct", "right"), ("total", "right"), ("accuracy", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for name, row in report["categories"].items():
        table.add_row(name, str(row["correct"]), str(row["total"]), f"{row['accuracy']:.1%}")
    table.add_row("mean of categories", str(report["correct"]), str(report["total"]), f"{report['accuracy_mean']:.1%}")
    console.print(table)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bfcl-eval")
    except PackageNotFoundError:
        return "unknown"

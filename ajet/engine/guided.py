"""Constrained decoding: a `GuidedDecoding` spec becomes a token matcher the engine consults per step.

    matcher = build_matcher(spec, tokenizer, vocab_size)
    for each decoding step:
        matcher.mask_logits(logits_row)   # (V,) float32, in place: disallowed tokens -> -inf
        token = sample(logits_row)
        matcher.accept(token)
        if matcher.done: stop              # the grammar is complete and its EOS was accepted

The grammar library is llguidance (Earley parser over a lazily built lexer, no dependencies).
Measured on this project's 2-core CPU for the tool-call grammar of the energy tutorial's 8 tools
and SmolLM2's 49,152-token vocabulary (benchmarks/guided_decoding.py, contended machine):
tokenizer import 0.3-0.8 s (once per tokenizer, cached), grammar compile 7 ms against xgrammar's
46 ms and outlines-core's 1.4 s, and 0.02 ms to compute a mask plus about 0.07 ms to apply it,
against xgrammar's 0.2 ms per token. xgrammar also needs triton and apache-tvm-ffi installed;
llguidance is one 3 MB wheel. Either is small next to a SmolLM2 forward step (~10 ms).

Spec kinds (`ajet.engine.base.GuidedDecoding.kind`):
    json_schema     value: a JSON schema (dict); the completion is one JSON value fitting it
    regex           value: a regular expression the whole completion matches
    ebnf            value: a GBNF grammar (llama.cpp / xgrammar dialect), root rule `root`
    structural_tag  value: ajet's tool-call spec, a dict (see `tool_call_lark`):
                    {"tags": [{"begin": str, "schema": dict, "end": str}, ...],
                     "trigger": "<tool_call>", "separator": "\\n", "text_allowed": bool,
                     "max_calls": int | None, "text_schema": dict | None}

JSON inside a grammar is written compactly with `, ` and `: ` separators (what `json.dumps`
writes, so constrained calls look like the demonstrations the model is trained on); schema
keywords llguidance does not implement are ignored rather than refused (`lenient`).
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from typing import Any

from ajet.engine.base import GuidedDecoding
from ajet.errors import EngineError
from ajet.tool_prompt import single_token_tags

JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": ", "lenient": True}
_CACHE_SIZE = 64


class GuidedDecodingError(EngineError):
    """A constraint that cannot be compiled (bad schema, regex or grammar), or a token it forbids."""


def _styled(schema: Any) -> Any:
    """The schema with llguidance's formatting options (a copy; booleans are wrapped)."""
    if schema is True or schema == {}:
        schema = {}
    if not isinstance(schema, dict):
        raise GuidedDecodingError(f"a JSON schema must be an object, got {type(schema).__name__}: {schema!r:.80}")
    return {**schema, "x-guidance": {**JSON_STYLE, **schema.get("x-guidance", {})}}


def tool_call_lark(value: dict[str, Any], tag_tokens: dict[str, int] | None = None) -> str:
    """The Lark grammar of a tool-call spec.

    text_allowed False: the completion is one or more tags separated by `separator` and nothing
    else ('required', or a named function with one tag and max_calls 1). text_allowed True: free
    text, and once the text contains `trigger` the rest must be tags ('auto'); with `text_schema`
    the text alternative is JSON fitting that schema instead (a response_format next to tools).

    tag_tokens: tag text -> the id of the one added token a tokenizer holds for it (Qwen2.5's
    `<tool_call>` is token 151657). The grammar then takes that token wherever it takes the text:
    llguidance matches text against ordinary tokens only, so a model that writes the tag as its own
    token (as its template and its training teach) would otherwise have it masked away at every step.
    """
    tag_tokens = tag_tokens or {}
    tags = value.get("tags") or []
    if not tags:
        raise GuidedDecodingError("a structural_tag spec needs at least one tag (tool)")
    trigger = value.get("trigger", "<tool_call>")
    separator = value.get("separator", "\n")
    rules, alternatives = [], []
    for i, tag in enumerate(tags):
        begin, end = tag["begin"], tag["end"]
        if not begin.startswith(trigger):
            raise GuidedDecodingError(f"tag begin {begin!r} does not start with the trigger {trigger!r}")
        rules.append(f"body_{i}: {_literal(begin[len(trigger):], tag_tokens)} args_{i} {_literal(end, tag_tokens)}")
        rules.append(f"args_{i}: %json {json.dumps(_styled(tag.get('schema', {})))}")
        alternatives.append(f"body_{i}")
    max_calls = value.get("max_calls")
    more = "" if max_calls == 1 else f"({json.dumps(separator)} call)*"
    trigger_lit = _literal(trigger, tag_tokens)
    if value.get("text_allowed") and value.get("text_schema") is not None:
        # 'auto' with a response_format: either calls, or a reply that fits the schema.
        head = [f"start: answer | call {more}", f"answer: %json {json.dumps(_styled(value['text_schema']))}"]
    elif value.get("text_allowed"):
        # PRE: any text that ends at its first trigger; TEXT: any text without the trigger.
        escaped = _regex_literal(trigger)
        token_form = [f"TEXT? <[{tag_tokens[trigger]}]> body {more}"] if trigger in tag_tokens else []
        head = [
            " | ".join([f"start: TEXT", f"PRE body {more}", *token_form]),
            f"TEXT: /(?s:.+)/ & ~/(?s:.*{escaped}.*)/",
            f"PRE: /(?s:.*){escaped}/ & ~/(?s:.*{escaped}.+)/",
        ]
    else:
        head = [f"start: call {more}"]
    lines = head + [f"call: {trigger_lit} body", "body: " + " | ".join(alternatives)] + rules
    return "\n".join(lines) + "\n"


def _literal(text: str, tag_tokens: dict[str, int]) -> str:
    """`text` as a Lark expression: a string, where each tag of `tag_tokens` in it may also be its token."""
    parts, rest = [], text
    while rest:
        found = min(((rest.find(tag), tag) for tag in tag_tokens if tag in rest), default=None)
        if found is None:
            parts.append(json.dumps(rest))
            break
        at, tag = found
        if at:
            parts.append(json.dumps(rest[:at]))
        parts.append(f"({json.dumps(tag)} | <[{tag_tokens[tag]}]>)")
        rest = rest[at + len(tag):]
    return " ".join(parts) or '""'


def _regex_literal(text: str) -> str:
    """`text` as a literal inside a Lark /regex/ (slashes escaped too)."""
    return re.escape(text).replace("/", "\\/")


def to_grammar(spec: GuidedDecoding, tag_tokens: dict[str, int] | None = None) -> str:
    """The llguidance grammar (Lark text, or its JSON form) of `spec` (`tag_tokens`: see `tool_call_lark`);
    raises GuidedDecodingError."""
    import llguidance

    try:
        if spec.kind == "json_schema":
            return llguidance.LLMatcher.grammar_from_json_schema(_styled(spec.value))
        if spec.kind == "regex":
            return llguidance.LLMatcher.grammar_from_regex(str(spec.value))
        if spec.kind == "ebnf":
            from llguidance.gbnf_to_lark import gbnf_to_lark

            return llguidance.LLMatcher.grammar_from_lark(gbnf_to_lark(str(spec.value)))
        if spec.kind == "structural_tag":
            return llguidance.LLMatcher.grammar_from_lark(tool_call_lark(spec.value, tag_tokens))
    except GuidedDecodingError:
        raise
    except Exception as exc:  # llguidance raises ValueError/RuntimeError for text it cannot read
        raise GuidedDecodingError(f"cannot compile the {spec.kind} constraint: {exc}") from None
    raise GuidedDecodingError(f"unknown guided decoding kind {spec.kind!r}; expected json_schema, regex, ebnf "
                              "or structural_tag")


def check_spec(spec: GuidedDecoding) -> None:
    """Compile `spec` without a tokenizer; raise GuidedDecodingError naming the problem (for HTTP 400s)."""
    import llguidance

    problem = llguidance.LLMatcher.validate_grammar(to_grammar(spec), None)
    if problem:
        raise GuidedDecodingError(f"cannot compile the {spec.kind} constraint: {' '.join(problem.split())[:500]}")


class Matcher:
    """Tracks one completion against its grammar. Not thread-safe: one per request."""

    def __init__(self, matcher: Any, vocab_size: int, eos_ids: list[int]) -> None:
        self._m = matcher
        self.vocab_size = vocab_size
        self._eos_ids = eos_ids
        self._ended = False

    def mask_logits(self, logits_row: Any) -> None:
        """Set the logits of tokens the grammar forbids next to -inf, in place; `logits_row`: (V,)."""
        import torch

        if self._m.is_error():
            raise GuidedDecodingError(f"the constrained completion went off its grammar: {self._m.get_error()[:300]}")
        if self._m.is_stopped():
            # The grammar cannot go on (e.g. the one call of a named function is written): end the
            # turn with EOS, as an unconstrained turn ends, so the recorded tokens look the same.
            keep = logits_row[self._eos_ids].clone()
            logits_row.fill_(float("-inf"))
            logits_row[self._eos_ids] = keep
            return
        bias = self._m.compute_logit_bias()  # one byte per token: 0 forbidden, 200 allowed
        allowed = torch.frombuffer(bytearray(bias), dtype=torch.uint8)  # (grammar_vocab,)
        width = min(logits_row.shape[-1], allowed.shape[0])
        logits_row[:width].masked_fill_(allowed[:width].to(logits_row.device) == 0, float("-inf"))
        if logits_row.shape[-1] > width:
            logits_row[width:] = float("-inf")  # padding rows of the embedding: never text

    def accept(self, token_id: int) -> None:
        """Advance past the sampled token; raises GuidedDecodingError for a token the grammar forbids."""
        token_id = int(token_id)
        if self._m.is_stopped() and token_id in self._eos_ids:
            self._ended = True
            return
        if not self._m.consume_token(token_id):
            raise GuidedDecodingError(f"token {token_id} is not allowed here: {self._m.get_error()[:300]}")
        self._ended = token_id in self._eos_ids and bool(self._m.is_stopped())

    @property
    def done(self) -> bool:
        """True once the grammar is complete and an EOS token was accepted."""
        return self._ended

    @property
    def accepting(self) -> bool:
        """True when the text so far is a complete match (EOS would be allowed now)."""
        return bool(self._m.is_accepting())


class _Compiled:
    """Per-tokenizer llguidance state: the converted tokenizer and a cache of compiled matchers."""

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import llguidance.hf

        eos = _eos_ids(tokenizer)
        self.eos_ids = eos
        try:
            self.tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=eos or None)
        except ValueError as exc:
            raise GuidedDecodingError(f"constrained decoding needs a fast (Rust) Hugging Face tokenizer: {exc}") from None
        self.vocab_size = vocab_size
        self.tag_tokens = {tag: i for tag, i in single_token_tags(tokenizer).items() if i < vocab_size}
        self.templates: OrderedDict[str, Any] = OrderedDict()
        self.lock = threading.Lock()

    def matcher(self, spec: GuidedDecoding) -> Matcher:
        import llguidance

        key = json.dumps([spec.kind, spec.value], sort_keys=True, default=str)
        with self.lock:
            template = self.templates.get(key)
            if template is not None:
                self.templates.move_to_end(key)
        if template is None:
            template = llguidance.LLMatcher(self.tokenizer, to_grammar(spec, self.tag_tokens), log_level=0)
            if template.is_error():
                raise GuidedDecodingError(f"cannot compile the {spec.kind} constraint: {template.get_error()[:500]}")
            with self.lock:
                self.templates[key] = template
                while len(self.templates) > _CACHE_SIZE:
                    self.templates.popitem(last=False)
        return Matcher(template.deep_copy(), self.vocab_size, self.eos_ids)


_STATE: dict[tuple[int, int], _Compiled] = {}
_STATE_LOCK = threading.Lock()


def build_matcher(spec: GuidedDecoding, tokenizer: Any, vocab_size: int) -> Matcher:
    """A fresh matcher for one completion. The tokenizer conversion (~0.5 s) and each distinct
    grammar (~10 ms) are compiled once and reused; raises GuidedDecodingError for a bad spec."""
    key = (id(tokenizer), int(vocab_size))
    with _STATE_LOCK:
        state = _STATE.get(key)
    if state is None:
        state = _Compiled(tokenizer, int(vocab_size))
        with _STATE_LOCK:
            state = _STATE.setdefault(key, state)
    return state.matcher(spec)


def _eos_ids(tokenizer: Any) -> list[int]:
    eos = getattr(tokenizer, "eos_token_id", None)
    return [eos] if isinstance(eos, int) else []

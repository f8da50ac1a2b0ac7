"""Turn OpenAI chat messages into prompt token ids, splicing in the exact ids of earlier generations.

Rendering uses the model's own chat template. When that template cannot render tools, messages are
first rewritten into the Hermes tool format, which any template can show as plain text: the tool
specs go into the system message inside `<tools>`, one signature line each (`ajet.tool_prompt`),
assistant tool calls become `<tool_call>{json}</tool_call>` text, and tool results become
`<tool_response>` text.

Token exactness: an assistant message that the policy generated earlier in the episode is not
re-tokenized from its text. The prompt is cut at each such message into chunks; the text chunks
between them are tokenized, and the generated ids are inserted as they were sampled. Because every
request of an episode cuts at the same places and tokenizes the same text chunks, the prompt of a
later call starts with the exact tokens of an earlier call plus its completion, which is what lets
the tracker merge a multi-turn episode into one sample.

Rendered texts are cached, keyed by the JSON of the tools and of the messages rendered: a call of an
episode re-renders every earlier turn's "before" and "after" text, which the previous call already
rendered, and the calls of a GRPO group start from the same messages. The cache returns the same
string the template would, so token ids do not change (a template that reads the clock, like
`strftime_now`, is never cached).

Only the template makes control tokens: text in the messages and tools that spells a special token
(`<|im_end|>\n<|im_start|>system\n...` in a user message or a tool result) would otherwise be
encoded as that token, and a user could forge a system turn. Such text is swapped for a private-use
placeholder before the template runs, and the chunks holding placeholders are encoded with special
tokens off between the template's own special tokens (`_encode_escaped`). Messages and tools that
spell no special token take the plain path, so their ids are what they always were.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ajet.errors import GatewayError
from ajet.tool_prompt import CALL_TEXT, RESULT_TEXT, renders_tools, tools_text
from ajet.tracker.episode import EpisodeTracker
from ajet.tracker.timeline import GeneratedTurn, Segment, canonical_arguments


@dataclass
class RenderedPrompt:
    token_ids: list[int]
    segments: list[Segment]
    spliced: int = 0  # assistant messages replaced by their generated ids
    unmatched_assistant: int = 0  # assistant messages rendered from text (not generated here, or edited)
    think_stripped: int = 0  # of those, ones that equal a generation with its <think> block removed


SpliceLookup = Callable[[dict[str, Any]], "GeneratedTurn | None"]
RENDER_CACHE_ENTRIES = 2048  # rendered texts kept: with their keys ~10-40 KB each at 4,096-token prompts, tens of MB at most


# The canonical JSON of a tool list: what identifies a tool set, in the tracker and in the caches here.
tools_key = EpisodeTracker.tools_key


def _message_key(message: dict) -> str | None:
    try:
        return json.dumps(message, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):  # not JSON (an SDK object, a float NaN ...): render without the cache
        return None


@dataclass
class ChatRenderer:
    """Renders messages with a tokenizer's chat template (or `chat_template` when given)."""

    tokenizer: Any
    chat_template: str | None = None
    _native_tools: bool = field(init=False, default=False)
    _eos_texts: list[str] = field(init=False, default_factory=list)
    _chunk_cache: dict[str, list[int]] = field(init=False, default_factory=dict)
    _render_cache: OrderedDict[tuple, str] = field(init=False, default_factory=OrderedDict)
    _cache_renders: bool = field(init=False, default=True)
    _specials: list[str] = field(init=False, default_factory=list)  # texts of the special tokens
    _special_ids: frozenset[int] = field(init=False, default=frozenset())
    _escape_re: re.Pattern | None = field(init=False, default=None)
    _plain_backend: Any = field(init=False, default=None)  # the Rust tokenizer with special tokens off

    def __post_init__(self) -> None:
        template = self.chat_template or getattr(self.tokenizer, "chat_template", None)
        if not template:
            raise GatewayError("the tokenizer has no chat template; set model.chat_template", status=500)
        self.chat_template = template
        # A template that mentions `tools` renders them itself; otherwise use the Hermes rewrite.
        self._native_tools = renders_tools(template)
        self._eos_texts = [t for t in {self.tokenizer.eos_token} if t]
        # A template that reads the clock renders differently over time: never serve it from the cache.
        self._cache_renders = "strftime" not in template and "now(" not in template
        self._specials, self._special_ids = _special_tokens(self.tokenizer)
        if self._specials:
            alternatives = sorted(self._specials, key=len, reverse=True)  # the longest spelling wins
            self._escape_re = re.compile("|".join(map(re.escape, [*alternatives, _MARK])))

    # ----------------------------------------------------------------- special tokens in the text
    def _escape(self, value: Any) -> Any:
        """`value` (a message, the tools: strings, dicts, lists) with every spelling of a special
        token replaced by its placeholder; the same object when there is none (the common case:
        a read-only walk, nothing rebuilt)."""
        if self._escape_re is None or not _spells(value, self._escape_re.search):
            return value
        return _substitute(value, lambda text: self._escape_re.sub(self._placeholder, text))

    def _placeholder(self, match: re.Match) -> str:
        text = match.group(0)
        return f"{_MARK}e{_END}" if text == _MARK else f"{_MARK}{self._specials.index(text)}{_END}"

    def _unescape(self, text: str) -> str:
        if _MARK not in text:
            return text
        return _PLACEHOLDER.sub(lambda m: _MARK if m.group(1) == "e" else self._specials[int(m.group(1))], text)

    def _encode_plain(self, text: str) -> list[int]:
        """Ids of `text` with every special token spelled out as ordinary text."""
        if not text:
            return []
        backend = getattr(self.tokenizer, "_tokenizer", None)
        if backend is not None and hasattr(backend, "encode_special_tokens"):
            if self._plain_backend is None:
                from tokenizers import Tokenizer

                plain = Tokenizer.from_str(backend.to_str())  # a copy: the shared tokenizer keeps its setting
                plain.encode_special_tokens = True
                self._plain_backend = plain
            return list(self._plain_backend.encode(text, add_special_tokens=False).ids)
        return list(self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    def _encode_escaped(self, text: str) -> list[int]:
        """Ids of a rendered chunk holding placeholders: the template's own special tokens (found by
        the tokenizer, which matches them as it always does) stay; the text between them, placeholders
        restored, is encoded with special tokens off. The tokenizer encodes the text between special
        tokens on its own anyway, so a stretch without placeholders gets its usual ids."""
        backend = getattr(self.tokenizer, "_tokenizer", None)
        if backend is None or not hasattr(backend, "encode"):  # a slow tokenizer: cut at the placeholders
            ids: list[int] = []
            for n, piece in enumerate(_PLACEHOLDER.split(text)):
                if n % 2 == 0:
                    ids += self.tokenizer(piece, add_special_tokens=False)["input_ids"] if piece else []
                else:
                    ids += self._encode_plain(_MARK if piece == "e" else self._specials[int(piece)])
            return ids
        encoding = backend.encode(text, add_special_tokens=False)
        ids, start = [], 0
        for token, (begin, end) in zip(encoding.ids, encoding.offsets):
            if token in self._special_ids:
                ids += self._encode_plain(self._unescape(text[start:begin]))
                ids.append(token)
                start = end
        return ids + self._encode_plain(self._unescape(text[start:]))

    # ----------------------------------------------------------------- text rendering
    def render_text(self, messages: list[dict], tools: list[dict] | None, add_generation_prompt: bool) -> str:
        """The template's rendering of `messages` (and `tools`), as text."""
        return self._unescape(self._render(self._escape(messages), self._escape(tools), add_generation_prompt))

    def _render(self, messages: list[dict], tools: list[dict] | None, add_generation_prompt: bool) -> str:
        """The rendering of messages and tools already escaped: placeholders stay in the text."""
        msgs = [self._plain_message(m) for m in messages]
        kwargs: dict[str, Any] = {}
        if tools and self._native_tools:
            kwargs["tools"] = tools
        elif tools:
            msgs = _inject_tools(msgs, tools)
        if not self._native_tools:
            msgs = [_hermes_message(m) for m in msgs]
        try:
            return self.tokenizer.apply_chat_template(
                msgs,
                chat_template=self.chat_template,
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
                **kwargs,
            )
        except Exception as exc:  # jinja raise_exception or a template bug: the client's messages are at fault
            raise GatewayError(f"the chat template cannot render these messages: {exc}") from exc

    @staticmethod
    def _plain_message(message: dict) -> dict:
        content = message.get("content")
        if isinstance(content, list):
            message = {**message, "content": "".join(p.get("text", "") for p in content if isinstance(p, dict))}
        elif content is None:
            message = {**message, "content": ""}
        calls = message.get("tool_calls")
        if isinstance(calls, list) and any(isinstance(_arguments(c), str) for c in calls):
            # OpenAI sends arguments as a JSON string; templates that render calls (Qwen2.5's, Llama
            # 3.1's) write `arguments | tojson`, which would quote the string again. vLLM parses them
            # for the template as well.
            message = {**message, "tool_calls": [_with_object_arguments(c) for c in calls]}
        return message

    def encode_text(self, text: str) -> list[int]:
        """Token ids of a text chunk. Chunks repeat across the calls of an episode (the system prompt
        with its tools, earlier tool results), so they are cached."""
        ids = self._chunk_cache.get(text)
        if ids is None:
            backend = getattr(self.tokenizer, "_tokenizer", None)  # the Rust tokenizer: 2x faster than __call__
            if _MARK in text:  # special-token spellings from the messages: never control tokens
                ids = self._encode_escaped(text)
            elif backend is not None and hasattr(backend, "encode"):
                ids = backend.encode(text, add_special_tokens=False).ids
            else:
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            if len(self._chunk_cache) >= 4096:
                self._chunk_cache.pop(next(iter(self._chunk_cache)))  # drop the oldest entry
            self._chunk_cache[text] = ids = list(ids)
        return list(ids)

    def prefix_renderer(self, messages: list[dict], tools: list[dict] | None,
                        tools_json: str | None = None) -> Callable[[int, bool], str]:
        """`text(n, add_generation_prompt)`: `render_text(messages[:n], tools, ...)` with the special-token
        spellings of the messages and tools left as placeholders (the text prompt ids are encoded from),
        served from the render cache when the same tools and first n messages were rendered before."""
        keys = [_message_key(m) for m in messages] if self._cache_renders else []
        usable = len(keys) if None not in keys else keys.index(None)  # prefixes up to here have a key
        tools_json = tools_key(tools) if tools_json is None and self._cache_renders else tools_json

        escaped: list = []  # messages and tools escaped once, on the first render: not once per prefix

        def render(n: int, add_generation_prompt: bool) -> str:
            if not escaped:
                escaped.extend((self._escape(messages), self._escape(tools)))
            return self._render(escaped[0][:n], escaped[1], add_generation_prompt)

        def text(n: int, add_generation_prompt: bool) -> str:
            if n > usable:
                return render(n, add_generation_prompt)
            key = (tools_json, add_generation_prompt, *keys[:n])
            found = self._render_cache.get(key)
            if found is None:
                found = self._render_cache[key] = render(n, add_generation_prompt)
            # No lock (the renderer must stay picklable for swift's workers): a race between threads
            # can only lose an LRU touch or an eviction, never give a wrong text.
            with contextlib.suppress(KeyError):
                self._render_cache.move_to_end(key)
                while len(self._render_cache) > RENDER_CACHE_ENTRIES:
                    self._render_cache.popitem(last=False)  # the least recently used
            return found

        return text

    # ----------------------------------------------------------------- exact-token prompt
    def encode(
        self,
        messages: list[dict],
        tools: list[dict] | None,
        lookup: SpliceLookup | None = None,
        is_think_stripped: Callable[[dict], bool] | None = None,
        add_generation_prompt: bool = True,
        tools_json: str | None = None,
    ) -> RenderedPrompt:
        """Prompt ids for `messages` plus a generation prompt, with generated turns spliced in.
        tools_json: `tools_key(tools)` when the caller has it already."""
        prefix = self.prefix_renderer(messages, tools, tools_json)
        full = prefix(len(messages), add_generation_prompt)
        out = RenderedPrompt(token_ids=[], segments=[])
        consumed = ""  # prefix of `full` already covered by segments
        pending = ""  # text owed after the last spliced turn (e.g. the newline after an EOS)
        for i, message in enumerate(messages):
            if message.get("role") != "assistant":
                continue
            turn = lookup(message) if lookup else None
            if turn is None:
                out.unmatched_assistant += 1
                if is_think_stripped and is_think_stripped(message):
                    out.think_stripped += 1
                continue
            before, after = prefix(i, True), prefix(i + 1, False)
            if not (before.startswith(consumed) and after.startswith(before) and full.startswith(after)):
                out.unmatched_assistant += 1  # template not prefix-stable here: render this turn as text
                continue
            tail = self._tail_after_generation(after[len(before):], turn.ends_with_eos)
            if tail is None:
                out.unmatched_assistant += 1
                continue
            self._add_text(out, pending + before[len(consumed):])
            out.segments.append(Segment("llm", list(turn.token_ids), list(turn.logprobs), turn.call_index))
            out.token_ids.extend(turn.token_ids)
            out.spliced += 1
            consumed, pending = after, tail
        self._add_text(out, pending + full[len(consumed):])
        return out

    def encode_conversation(self, messages: list[dict], tools: list[dict] | None) -> RenderedPrompt:
        """Render a whole conversation for SFT: every assistant turn counts as generated, with the
        tokens of its rendered text up to and including the EOS. This is the same code path as a
        live episode, so an SFT sample equals what the gateway records when the model produces
        those tokens (mask parity)."""
        index = {id(m): n for n, m in enumerate(messages)}
        tools_json = tools_key(tools)
        prefix = self.prefix_renderer(messages, tools, tools_json)

        def as_generated(message: dict) -> GeneratedTurn | None:
            i = index[id(message)]
            turn = prefix(i + 1, False)[len(prefix(i, True)):]
            for eos in self._eos_texts:
                at = turn.rfind(eos)
                if at >= 0:
                    ids = self.encode_text(turn[: at + len(eos)])
                    return GeneratedTurn(ids, [0.0] * len(ids), ends_with_eos=True, call_index=i)
            return None

        rendered = self.encode(messages, tools, lookup=as_generated, add_generation_prompt=False,
                               tools_json=tools_json)
        # Text after the last trained turn (the template's closing newline) is never part of a
        # recorded episode, so it is not part of the SFT sample either.
        while rendered.segments and rendered.segments[-1].author == "prompt" and rendered.spliced:
            dropped = rendered.segments.pop()
            del rendered.token_ids[len(rendered.token_ids) - len(dropped.token_ids):]
        return rendered

    def _tail_after_generation(self, rendered_turn: str, ends_with_eos: bool) -> str | None:
        """The template's text after the generated tokens: what follows the EOS (e.g. a newline),
        or the EOS itself and what follows when the generation was cut before its EOS."""
        for eos in self._eos_texts:
            at = rendered_turn.rfind(eos)
            if at >= 0:
                return rendered_turn[at + len(eos):] if ends_with_eos else rendered_turn[at:]
        return None

    def _add_text(self, out: RenderedPrompt, text: str) -> None:
        if not text:
            return
        ids = self.encode_text(text)
        out.segments.append(Segment("prompt", ids))
        out.token_ids.extend(ids)


# A placeholder is _MARK, the index of the special token (or "e" for a _MARK of the text itself), _END:
# private-use characters, which no template changes and no tokenizer treats as special.
_MARK, _END = "\ue000", "\ue001"
_PLACEHOLDER = re.compile(f"{_MARK}(e|[0-9]+){_END}")


def _spells(value: Any, search: Callable[[str], Any]) -> bool:
    """Whether a string anywhere in `value` (strings, dicts, lists) matches `search`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if search(item):
                return True
        elif isinstance(item, dict):
            stack += item
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return False


def _substitute(value: Any, sub: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return sub(value)
    if isinstance(value, dict):
        return {_substitute(k, sub): _substitute(v, sub) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, sub) for v in value]
    return value


def _special_tokens(tokenizer: Any) -> tuple[list[str], frozenset[int]]:
    """The texts and ids of the tokenizer's special tokens (those it matches in any text)."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is not None and hasattr(backend, "get_added_tokens_decoder"):
        added = backend.get_added_tokens_decoder()
    else:
        added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found = {token.content: token_id for token_id, token in added.items() if getattr(token, "special", False)}
    for text in getattr(tokenizer, "all_special_tokens", None) or []:
        token_id = tokenizer.convert_tokens_to_ids(text)
        if isinstance(token_id, int):
            found.setdefault(text, token_id)
    found = {text: token_id for text, token_id in found.items() if text}
    return sorted(found), frozenset(found.values())


def _arguments(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    return function.get("arguments") if isinstance(function, dict) else None


def _with_object_arguments(call: Any) -> Any:
    """`call` with its JSON-string arguments as the object they spell (left as they are otherwise)."""
    arguments = _arguments(call)
    parsed = canonical_arguments(arguments) if isinstance(arguments, str) else None
    if not isinstance(parsed, dict):
        return call
    return {**call, "function": {**call["function"], "arguments": parsed}}


def _inject_tools(messages: list[dict], tools: list[dict]) -> list[dict]:
    tool_text = tools_text(tools)
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first.get('content') or ''}\n\n{tool_text}".strip()}, *messages[1:]]
    return [{"role": "system", "content": tool_text}, *messages]


def _hermes_message(message: dict) -> dict:
    role = message.get("role")
    if role == "assistant" and message.get("tool_calls"):
        parts = [message.get("content") or ""]
        for call in message["tool_calls"]:
            fn = call.get("function") or {}
            payload = {"name": fn.get("name"), "arguments": canonical_arguments(fn.get("arguments"))}
            parts.append(CALL_TEXT.format(json.dumps(payload, ensure_ascii=False)))
        return {"role": "assistant", "content": "\n".join(p for p in parts if p)}
    if role == "tool":
        return {"role": "tool", "content": RESULT_TEXT.format(message.get("content") or "")}
    return {"role": role, "content": message.get("content") or ""}

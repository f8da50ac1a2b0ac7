"""The `generate:` section: what `ajet generate explore`, `tasks`, `demos` and `rounds` read.

The question writer and the teacher are any OpenAI-compatible chat endpoint, or `self`: the run's
own model (`model.path`) served in this process, whose tool calls the gateway constrains to the
tool schemas (cold start without a teacher). Keys for hosted endpoints come from the environment
(`api_key: ${oc.env:OPENAI_API_KEY}`); a `.env` file beside the YAML is read first.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TeacherConfig(_Section):
    base_url: str = Field(description="OpenAI-compatible chat endpoint, e.g. https://api.openai.com/v1 or a "
                          "served checkpoint's http://127.0.0.1:8000/v1 (`ajet serve`).")
    model: str | None = Field(None, description="Model name sent with each request. None: the first in /v1/models.")
    api_key: str = Field("EMPTY", description="API key; write ${oc.env:OPENAI_API_KEY} and keep the key in the "
                         "environment or a .env file beside the YAML.")


class GenerateTasksConfig(_Section):
    per_request: int = Field(5, ge=1, le=50, description="Questions asked for in one request to the question writer.")
    multi_tool_share: float = Field(
        0.3, ge=0, le=1, description="Share of requests that ask for questions needing two tools in sequence "
        "(the rest ask for questions one tool answers).")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature of the question writer.")
    max_tokens: int = Field(600, ge=16, description="Most tokens of one question-writer reply.")
    similarity: float = Field(
        0.85, gt=0, le=1, description="A question whose normalised text is this similar (difflib ratio) to one "
        "already kept is dropped as a near-duplicate; 1 drops exact duplicates only.")
    min_words: int = Field(4, ge=1, description="Shorter questions are dropped.")
    max_requests: int | None = Field(
        None, ge=1, description="Give up after this many question-writer requests. None: 4 x the requests "
        "needed for n questions, plus 8.")
    guidance: str | None = Field(None, description="Extra instruction for the question writer (domain, language, "
                                 "style), appended to its prompt.")
    # --from-calls (call-first tasks, ajet.generate.call_tasks)
    chain_share: float = Field(0.4, ge=0, le=1, description="--from-calls: most share of tasks that are chains of "
                               "2-3 calls (an earlier result feeds a later argument); fewer when a chain's first "
                               "tool has too few single-call tasks (a call never goes on more often than it stops).")
    max_chain: int = Field(3, ge=1, le=5, description="--from-calls: most calls in one chain task.")
    phrasings_per_call: int = Field(
        2, ge=1, le=10, description="--from-calls: most tasks made from one call or chain, each phrased anew, so "
        "that a tool with few working calls still gets its share of tasks (ajet.generate.schedule).")
    refused_share: float = Field(
        0.1, ge=0, le=0.5, description="--from-calls: most share of tasks about an id the server refused (the "
        "same-shape ids `ajet generate explore` tries when it knows few): the answer reports the refusal, which "
        "teaches a model to send the id the user gave, not the one id it saw in training. A plan gets at least 4 of them "
        "when explore filed that many, whatever the share (ajet.generate.schedule.with_refusals).")
    phrasing: Literal["writer", "template"] = Field(
        "writer", description="--from-calls: writer: the question writer phrases each question (checked, the "
        "template when it fails); template: templated questions only (no model needed for phrasing).")
    round_trip: bool = Field(True, description="--from-calls: keep a task only when the teacher, asked its "
                             "question with the tools, first calls the gold call (drops counted as round_trip_*).")


class GenerateDemosConfig(_Section):
    attempts: int = Field(1, ge=1, description="Episodes run per task; the first ones that pass the filter are kept.")
    keep_per_task: int = Field(1, ge=1, description="Most demonstrations kept per task.")
    temperature: float = Field(0.7, ge=0, description="Sampling temperature of the teacher's episodes.")
    first_tool_choice: Literal["auto", "required"] | None = Field(
        None, description="tool_choice of each episode's first LLM call. None: 'required' when the teacher is "
        "self (a base model that never calls tools then calls one), 'auto' for a hosted teacher.")
    no_reference_check: Literal["grounding", "llm_judge"] = Field(
        "grounding", description="Filter for tasks without a reference answer: grounding (the final answer "
        "states values the tools returned, no other numbers) or llm_judge (the teacher endpoint grades "
        "the episode). Tasks with a reference answer are scored by the run's judge.")
    llm_judge_threshold: float = Field(0.7, ge=0, le=1, description="no_reference_check=llm_judge: lowest score kept.")
    final_sentence: Literal["teacher", "template"] = Field(
        "teacher", description="Call-first tasks (built, not sampled): who writes the last sentence stating the "
        "gold value: the teacher (checked to state it, the template when it does not) or the template only.")
    plan_line: bool = Field(
        False, description="Call-first tasks: the first assistant turn opens with the tools the episode will call, "
        "in order ('Plan: list_rooms, then get_bookings.'), so the trained model decides the whole chain while the "
        "question is the last thing it read, and after a result reads on from its own plan. Off by default: on the "
        "zoo it raised weather 0.156 -> 0.281 but not the held-out servers (docs/mcp_pipeline.md).")
    name_record: bool = Field(
        False, description="Call-first tasks: when the answer is read from one record of a list and the question "
        "names that record ('the capacity of Keel'), the template sentence names it too ('The capacity for Keel is "
        "8.') in place of the call's arguments, so the trained model writes the name it must find before the value "
        "it reads beside it. Off by default: on the zoo it raised weather 0.156 -> 0.219 and rooms 0.094 -> 0.125, "
        "not held-out hr and helpdesk (docs/mcp_pipeline.md).")
    format: Literal["openai", "sharegpt"] = Field(
        "openai", description="openai: {tools, messages}; sharegpt: {conversations, system, tools} (seed "
        "MCPTrainAgent, LLaMA-Factory). ajet's SFT reads both.")


class GenerateExploreConfig(_Section):
    max_calls: int = Field(400, ge=1, description="Most calls `ajet generate explore` runs in all (working or "
                           "not, probes included, the calls already in a resumed --out and its dropped file too).")
    max_calls_per_tool: int = Field(40, ge=1, description="Most calls per tool, spread over the rounds.")
    rounds: int = Field(4, ge=1, description="Passes over the tools. Each pass can use the values earlier results "
                        "returned (an id listed by one tool feeds another's argument), so a chain of N tools needs "
                        "N passes; exploration stops early when a pass has nothing new to run.")
    max_values_per_argument: int = Field(30, ge=1, description="Most candidate values tried per argument, the "
                                         "most trusted first (schema, description, error messages, earlier "
                                         "results, generic numbers).")
    probe: bool = Field(True, description="Call each free-text argument once with a value no server knows, to read "
                        "the valid ones from the error ('unknown city ...; known cities: ...'). Probe calls are "
                        "never kept; they are counted in the dropped file as probe or probe_accepted.")
    call_timeout_s: float | None = Field(None, gt=0, description="A call running longer is dropped (reason "
                                         "timeout). None: workflow_args.tool_timeout_s, else 30.")
    seed: int = Field(0, description="Seed of the sampled argument combinations.")


class GenerateRoundsConfig(_Section):
    attempts: int = Field(4, ge=1, description="Episodes sampled per train task in each round (k; --k sets it).")
    heldout_share: float = Field(
        0.2, gt=0, lt=1, description="Share of the tasks file held out (never sampled or trained on) to decide "
        "whether a round improved; at least one task. Ignored with --heldout FILE.")
    seed: int = Field(0, description="Seed of the train / held-out split.")
    previous_rows: bool = Field(
        False, description="Also train each round on the rows kept in earlier rounds. Off: the current model "
        "already learned them, so repeating them only adds epochs on old data; on: a replay against forgetting.")


class GenerateConfig(_Section):
    teacher: Literal["self"] | TeacherConfig = Field(
        "self", description="Who answers the tasks for `ajet generate demos`: an endpoint {base_url, model, "
        "api_key}, or self (the run's own model, tool calls constrained to the schemas).")
    question_writer: Literal["self"] | TeacherConfig | None = Field(
        None, description="Who writes the questions for `ajet generate tasks`. None: the teacher.")
    structured_output: bool = Field(
        True, description="Ask the question writer for JSON with response_format json_schema (turn off for "
        "endpoints that reject it; replies are then parsed leniently).")
    request_timeout_s: float = Field(120, gt=0, description="Timeout of one request to an endpoint question writer "
                                     "or teacher (self has none: the local model answers when it is done).")
    max_retries: int = Field(2, ge=0, description="Extra attempts after an endpoint's timeout, HTTP 429/5xx or "
                             "connection error.")
    explore: GenerateExploreConfig = Field(default_factory=GenerateExploreConfig,
                                           description="`ajet generate explore`.")
    tasks: GenerateTasksConfig = Field(default_factory=GenerateTasksConfig, description="`ajet generate tasks`.")
    demos: GenerateDemosConfig = Field(default_factory=GenerateDemosConfig, description="`ajet generate demos`.")
    rounds: GenerateRoundsConfig = Field(default_factory=GenerateRoundsConfig,
                                         description="`ajet generate rounds`: self-improvement rounds.")

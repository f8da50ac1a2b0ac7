"""The rollout-seed rule by hand, and the seeds a real batch sends to the engine."""

from __future__ import annotations

from ajet import Judge, Reward, Task, Workflow, WorkflowOutput
from ajet.engine.base import Engine, Generation, SamplingParams
from ajet.gateway.episodes import derive_seed
from ajet.rollout.runner import RolloutRunner, RolloutSettings
from ajet.rollout.seeds import batch_seed, episode_seed
from tests.unit.gw_helpers import running_gateway, scripted_engine


def test_batch_seed_by_hand():
    assert batch_seed(0, 0) == 0
    assert batch_seed(0, 1) == 1_000_003
    assert batch_seed(7, 3) == 7 + 3_000_009
    # wraps into [0, 2**31): 5 + 1_000_003 * 2148 = 2_148_006_449 = 2**31 + 522_801
    assert batch_seed(5, 2148) == 522_801


def test_episode_seed_is_the_hash_of_the_position():
    # step 2 of a run with engine.seed 11: batch seed 11 + 2_000_006 = 2_000_017
    base = batch_seed(11, 2)
    assert base == 2_000_017
    # sha256(repr((2000017, 'a', 0, 0))), first 8 bytes big-endian, >> 1: pinned, so a run resumed
    # by a later version of ajet still samples what it sampled before
    assert episode_seed(base, "a", 0, 0) == 484150614076916315
    seeds = {(t, r, a): episode_seed(base, t, r, a) for t in ("a", "b", "c") for r in range(4) for a in range(2)}
    assert len(set(seeds.values())) == 24  # every task, repeat and retry its own numbers
    assert all(0 <= s < 2**63 for s in seeds.values())
    assert episode_seed(None, "a", 2, 0) is None  # unseeded batch: the engine draws per request


def test_seeds_depend_on_the_position_only_so_a_resumed_run_repeats_them():
    # a run resumed at step 5 computes step 6's seeds from (engine.seed, step, task, repeat, attempt) alone,
    # whatever order the tasks come in
    first = {(t, r): episode_seed(batch_seed(3, 6), t, r, 0) for t in "abcdefgh" for r in range(2)}
    again = {(t, r): episode_seed(batch_seed(3, 6), t, r, 0) for t in reversed("abcdefgh") for r in range(2)}
    assert first == again
    step_5 = {episode_seed(batch_seed(3, 5), t, r, 0) for t in "abcdefgh" for r in range(2)}
    assert not step_5 & set(first.values())  # another step, other seeds


class _Recording(Engine):
    """The scripted engine, noting the seed of every request by the prompt's text."""

    def __init__(self, inner: Engine) -> None:
        self.inner, self.tokenizer = inner, inner.tokenizer
        self.seeds: list[tuple[str, int | None]] = []

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        self.seeds.append((self.tokenizer.decode(prompt_ids), sampling.seed))
        return await self.inner.generate(prompt_ids, sampling)


class Ask(Workflow):
    async def execute(self, task, tuner):
        client = tuner.openai_client()
        r = await client.chat.completions.create(model=tuner.model, messages=[{"role": "user", "content": task.query}])
        return WorkflowOutput(answer=r.choices[0].message.content)


class One(Judge):
    async def score(self, task, output):
        return Reward(total=1.0)


async def test_a_batch_sends_each_episode_its_seed(tiny_tokenizer):
    engine = _Recording(scripted_engine(tiny_tokenizer, [{"text": "ok"}] * 6))
    tasks = [Task(task_id="a", query="alpha"), Task(task_id="b", query="bravo")]
    async with running_gateway(engine, tiny_tokenizer) as (gateway, url):
        runner = RolloutRunner(gateway, url, Ask(), One())
        await runner.run(tasks, RolloutSettings(group_size=3, seed=100), show_progress=False)
    by_task = {q: sorted(seed for text, seed in engine.seeds if q in text) for q in ("alpha", "bravo")}
    # each episode's first call (index 0) is sampled with derive_seed(episode seed, 0)
    assert by_task == {q: sorted(derive_seed(episode_seed(100, t, r, 0), 0) for r in range(3))
                       for q, t in (("alpha", "a"), ("bravo", "b"))}
    assert len({seed for _, seed in engine.seeds}) == 6

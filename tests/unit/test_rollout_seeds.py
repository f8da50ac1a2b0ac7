"""The rollout-seed rule by hand, and the seeds a real batch sends to the engine."""

from __future__ import annotations

from ajet import Judge, Reward, Task, Workflow, WorkflowOutput
from ajet.engine.base import Engine, Generation, SamplingParams
from ajet.rollout.runner import RolloutRunner, RolloutSettings
from ajet.rollout.seeds import batch_seed, episode_seed
from tests.unit.gw_helpers import running_gateway, scripted_engine


def test_batch_seed_by_hand():
    assert batch_seed(0, 0) == 0
    assert batch_seed(0, 1) == 1_000_003
    assert batch_seed(7, 3) == 7 + 3_000_009
    # wraps into [0, 2**31): 5 + 1_000_003 * 2148 = 2_148_006_449 = 2**31 + 522_801
    assert batch_seed(5, 2148) == 522_801


def test_episode_seed_by_hand():
    # step 2 of a run with engine.seed 11: batch seed 11 + 2_000_006 = 2_000_017
    base = batch_seed(11, 2)
    assert base == 2_000_017
    # 3 tasks x group_size 4: task g, member k gets base + 4 g + k; all twelve differ
    seeds = [[episode_seed(base, g, k, 4) for k in range(4)] for g in range(3)]
    assert seeds == [[2_000_017, 2_000_018, 2_000_019, 2_000_020],
                     [2_000_021, 2_000_022, 2_000_023, 2_000_024],
                     [2_000_025, 2_000_026, 2_000_027, 2_000_028]]
    assert episode_seed(None, 1, 2, 4) is None  # unseeded batch: the engine draws per request


def test_seeds_depend_on_the_position_only_so_a_resumed_run_repeats_them():
    # a run resumed at step 5 computes step 6's seeds from (engine.seed, step) alone
    first = [episode_seed(batch_seed(3, 6), g, k, 2) for g in range(8) for k in range(2)]
    again = [episode_seed(batch_seed(3, 6), g, k, 2) for g in range(8) for k in range(2)]
    assert first == again
    # and no two steps' episodes share a seed (a batch has far fewer than 1_000_003 episodes)
    step_5 = {episode_seed(batch_seed(3, 5), g, k, 2) for g in range(8) for k in range(2)}
    assert len(set(first)) == 16 and not step_5 & set(first)


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
    assert by_task == {"alpha": [100, 101, 102], "bravo": [103, 104, 105]}

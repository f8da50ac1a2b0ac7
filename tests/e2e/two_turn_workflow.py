"""A two-turn chat that scores itself, for the RL tests on the tiny model (PPO, turn-level credit).

The model answers the task's question, is asked to go on, and answers again: one episode, two LLM
calls, merged into one sample with two trained spans. The tiny random model writes noise, so the
reward is made from the text (it differs between episodes, which is all a test of the update needs):
each turn's reward is 1 when its reply has an even number of characters, and the episode's reward is
their mean, with the turn rewards attached (`Reward.turn_rewards`).
"""

from __future__ import annotations

from ajet import Reward, Task, Tuner, Workflow, WorkflowOutput


class TwoTurnChat(Workflow):
    async def execute(self, task: Task, tuner: Tuner) -> WorkflowOutput:
        llm = tuner.openai_client()
        messages = [{"role": "user", "content": task.query}]
        turns = []
        for follow_up in ("Go on.", None):
            reply = (await llm.chat.completions.create(model=tuner.model, messages=messages)).choices[0].message
            text = reply.content or ""
            messages.append({"role": "assistant", "content": text})
            turns.append(float(len(text) % 2 == 0))
            if follow_up:
                messages.append({"role": "user", "content": follow_up})
        return WorkflowOutput(answer=messages[-1]["content"], messages=messages,
                              reward=Reward(total=sum(turns) / len(turns), turn_rewards=turns))

"""TRL reward function scoring each prompt group against a run's online rubrics (``POST /score/group``).

Wire it into TRL::

    from trl import GRPOConfig, GRPOTrainer
    from trl_reward import rubric_reward    # this file, on PYTHONPATH or copied next to your script

    trainer = GRPOTrainer(model=..., reward_funcs=[rubric_reward], args=GRPOConfig(...), train_dataset=...)

Environment:

- ``REWARD_HARNESS_URL``: the run, e.g. ``https://<worker>/t/<run token>/runs/<run>`` (the token in the path;
  error messages show it as ``/t/***``), or ``http://127.0.0.1:8787`` for the local default run.
- ``REWARD_HARNESS_TOKEN``: the run token sent as a header instead of in the path.
- ``REWARD_HARNESS_GOAL`` and ``REWARD_HARNESS_MODEL_SIZE``: training metadata the judge is told (the server's
  defaults when unset).
- ``REWARD_HARNESS_ABSTAIN=1``: a group the judge cannot score (down past its budget: ``llm_unavailable``,
  ``overloaded``, ``judge_budget_exceeded``, a network failure, after the client's retries) gets ``None`` for each of
  its completions, which TRL turns into NaN: that reward function then gives those rows nothing (with this function
  alone TRL sums them to 0 for the whole group, so its advantages are 0: no gradient from it), and the share is logged
  as ``reward_harness/abstained``. Unset, such a group raises.

TRL calls the function once per batch with every completion, ``num_generations`` consecutive ones per prompt, and
passes ``trainer_state`` and every dataset column but ``prompt`` as keyword arguments. So each run of equal
consecutive prompts is one group, and the groups are scored at once, one request each. ``trainer_state.global_step``
is sent as ``current_step`` (and ``max_steps`` as ``total_steps``), so the run closes a step when the trainer moves
on. The reference answer is the first dataset column among ``REFERENCE_COLUMNS`` that TRL passes. Conversational
prompts are sent as messages; a conversational completion with tool calls (TRL's tool loop: assistant turns with
``tool_calls``, ``tool`` results) or several turns is sent as its messages, so the judge reads the policy's words,
its calls and the tools' output apart; a single plain turn is sent as its text.

Per-criterion components reach TRL's logs: for each anchor rubric of the run, ``log_extra("rubric/<id>", …)`` (a
column of the completions table, grade ÷ grade_max per completion, NaN where abstained) and
``log_metric("rubric/<id>", mean)``.

With several processes TRL may split a group between them; each part is then scored as a group of its own, which
leaves the scores as they are (they are absolute) and only the server's ``advantages``, unused here, differ.
A group that fails raises (after the client's retries of 429/503): never a silent 0.
"""

from __future__ import annotations

import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Tuple

try:
    from reward_harness_client import RewardHarnessClient, judge_is_down, reward_components
except ImportError:  # run from a checkout: the client sits one folder up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from reward_harness_client import RewardHarnessClient, judge_is_down, reward_components

__all__ = ["rubric_reward", "REFERENCE_COLUMNS"]

#: Dataset columns taken as the reference answer, first present wins.
REFERENCE_COLUMNS = ("reference", "answer", "solution", "ground_truth", "label")
# Groups in flight at once: a batch's groups overlap instead of queueing behind one another, within what one
# trainer process should hold open.
MAX_PARALLEL_GROUPS = 16

_clients: Dict[Tuple[str, Optional[str]], RewardHarnessClient] = {}


def _client() -> RewardHarnessClient:
    # Read at call time, not import time, so the environment may be set after TRL's script imported this file.
    key = (
        os.environ.get("REWARD_HARNESS_URL", "http://127.0.0.1:8787"),
        os.environ.get("REWARD_HARNESS_TOKEN") or None,
    )
    if key not in _clients:
        _clients[key] = RewardHarnessClient(key[0], token=key[1])
    return _clients[key]


def rubric_reward(prompts: List[Any], completions: List[Any], **kwargs: Any) -> List[Optional[float]]:
    """One reward per completion, in input order, from the run's rubrics (None where the group abstained).

    Example: ``rubric_reward(prompts=["What is 2+2?"] * 2, completions=["4", "5"], answer=["4", "4"])``
    """
    if len(prompts) != len(completions):
        raise ValueError(f"rubric_reward got {len(prompts)} prompts and {len(completions)} completions")
    responses = [_response(c) for c in completions]
    reference = next((kwargs[c] for c in REFERENCE_COLUMNS if isinstance(kwargs.get(c), list)), None)
    metadata = _metadata(kwargs.get("trainer_state"))
    groups = _groups(prompts)
    client = _client()
    anchors = client.anchor_ids()
    abstain = os.environ.get("REWARD_HARNESS_ABSTAIN") == "1"

    def score(group: Tuple[int, int]) -> List[Tuple[Optional[float], Dict[str, float]]]:
        start, end = group
        try:
            answer = client.score_group(
                prompts[start],
                responses[start:end],
                reference=None if reference is None else reference[start],
                metadata=metadata or None,
            )
        except Exception as error:
            if abstain and judge_is_down(error):
                return [(None, {f"rubric/{a}": math.nan for a in anchors})] * (end - start)
            raise
        scores = answer["scores"]
        if len(scores) != end - start:
            raise RuntimeError(f"/score/group answered {len(scores)} scores for {end - start} responses")
        grade_max = int(answer.get("grade_max") or 1)
        criteria = answer.get("criteria") or [[] for _ in scores]
        return [(float(s), reward_components(c, anchors, grade_max)) for s, c in zip(scores, criteria)]

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL_GROUPS, len(groups)))) as pool:
        # map keeps the groups' order and re-raises the first failure when its result is read.
        scored = [item for items in pool.map(score, groups) for item in items]
    _log(kwargs.get("log_extra"), kwargs.get("log_metric"), anchors, scored)
    return [reward for reward, _ in scored]


def _log(
    log_extra: Optional[Callable[[str, list], None]],
    log_metric: Optional[Callable[[str, float], None]],
    anchors: List[str],
    scored: List[Tuple[Optional[float], Dict[str, float]]],
) -> None:
    """Each anchor's grades as a completions-table column and its batch mean as a metric; the abstained share."""
    for name in (f"rubric/{a}" for a in anchors):
        values = [components.get(name, math.nan) for _, components in scored]
        if callable(log_extra):
            log_extra(name, values)
        present = [v for v in values if not math.isnan(v)]
        if callable(log_metric) and present:
            log_metric(name, sum(present) / len(present))
    if callable(log_metric) and scored:
        log_metric("reward_harness/abstained", sum(1 for reward, _ in scored if reward is None) / len(scored))


def _groups(prompts: List[Any]) -> List[Tuple[int, int]]:
    """``(start, end)`` of each run of equal consecutive prompts."""
    groups, start = [], 0
    for index in range(1, len(prompts) + 1):
        if index == len(prompts) or prompts[index] != prompts[start]:
            groups.append((start, index))
            start = index
    return groups


def _metadata(trainer_state: Any) -> Dict[str, Any]:
    metadata: Dict[str, Any] = {}
    for field, name in (("high_level_goal", "REWARD_HARNESS_GOAL"), ("model_size", "REWARD_HARNESS_MODEL_SIZE")):
        if os.environ.get(name):
            metadata[field] = os.environ[name]
    step = getattr(trainer_state, "global_step", None)
    if isinstance(step, int) and step >= 0:
        metadata["current_step"] = step
    max_steps = getattr(trainer_state, "max_steps", None)
    # TrainerState.max_steps is 0 until training starts; the server takes only a positive total.
    if isinstance(max_steps, int) and max_steps > 0:
        metadata["total_steps"] = max_steps
    return metadata


def _response(completion: Any) -> Any:
    """A completion as the server takes it: text as is; a conversational completion as its text when it is one plain
    turn, else as its messages (tool calls, tool results and every turn kept apart for the judge)."""
    if isinstance(completion, str):
        return completion
    messages = [m for m in completion if isinstance(m, dict)]
    plain = len(messages) == 1 and messages[0].get("role") == "assistant" and not messages[0].get("tool_calls")
    if plain:
        return _content_text(messages[0].get("content"))
    return [_message(m) for m in messages]


def _message(message: Dict[str, Any]) -> Dict[str, Any]:
    """A TRL message with only the fields the server reads (TRL may add others)."""
    keep = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content", "reasoning")
    out = {k: message[k] for k in keep if message.get(k) is not None}
    if isinstance(out.get("content"), list):
        out["content"] = _content_text(out["content"])
    out.setdefault("content", "")
    return out


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)

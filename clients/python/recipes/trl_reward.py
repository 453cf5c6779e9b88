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

TRL calls the function once per batch with every completion, ``num_generations`` consecutive ones per prompt, and
passes ``trainer_state`` and every dataset column but ``prompt`` as keyword arguments. So each run of equal
consecutive prompts is one group, and the groups are scored at once, one request each. ``trainer_state.global_step``
is sent as ``current_step`` (and ``max_steps`` as ``total_steps``), so the run closes a step when the trainer moves
on. The reference answer is the first dataset column among ``REFERENCE_COLUMNS`` that TRL passes. Conversational
prompts are sent as messages; a conversational completion is scored on the text of its messages.

With several processes TRL may split a group between them; each part is then scored as a group of its own, which
leaves the scores as they are (they are absolute) and only the server's ``advantages``, unused here, differ.
A group that fails raises (after the client's retries of 429/503): never a silent 0.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

try:
    from reward_harness_client import RewardHarnessClient
except ImportError:  # run from a checkout: the client sits one folder up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from reward_harness_client import RewardHarnessClient

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


def rubric_reward(prompts: List[Any], completions: List[Any], **kwargs: Any) -> List[float]:
    """One reward per completion, in input order, from the run's rubrics.

    Example: ``rubric_reward(prompts=["What is 2+2?"] * 2, completions=["4", "5"], answer=["4", "4"])``
    """
    if len(prompts) != len(completions):
        raise ValueError(f"rubric_reward got {len(prompts)} prompts and {len(completions)} completions")
    texts = [_completion_text(c) for c in completions]
    reference = next((kwargs[c] for c in REFERENCE_COLUMNS if isinstance(kwargs.get(c), list)), None)
    metadata = _metadata(kwargs.get("trainer_state"))
    groups = _groups(prompts)
    client = _client()

    def score(group: Tuple[int, int]) -> List[float]:
        start, end = group
        answer = client.score_group(
            prompts[start],
            texts[start:end],
            reference=None if reference is None else reference[start],
            metadata=metadata or None,
        )
        scores = answer["scores"]
        if len(scores) != end - start:
            raise RuntimeError(f"/score/group answered {len(scores)} scores for {end - start} responses")
        return [float(s) for s in scores]

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL_GROUPS, len(groups)))) as pool:
        # map keeps the groups' order and re-raises the first failure when its result is read.
        return [reward for scores in pool.map(score, groups) for reward in scores]


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


def _completion_text(completion: Any) -> str:
    """A completion as text: standard format as is, conversational as its messages' text, one per paragraph."""
    if isinstance(completion, str):
        return completion
    return "\n\n".join(_content_text(message.get("content")) for message in completion if isinstance(message, dict))


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)

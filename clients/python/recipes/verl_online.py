"""verl reward function scoring each response against a run's ONLINE rubrics (``POST /score``).

Wire it into verl::

    python -m verl.trainer.main_ppo ... \\
        custom_reward_function.path=clients/python/recipes/verl_online.py \\
        custom_reward_function.name=compute_score

Environment:

- ``REWARD_HARNESS_URL``: the run, e.g. ``https://<worker>/t/<run token>/runs/<run>`` (the token in the path;
  error messages show it as ``/t/***``), or ``http://127.0.0.1:8787`` for the local default run.
- ``REWARD_HARNESS_TOKEN``: the run token sent as a header instead of in the path.
- ``REWARD_HARNESS_GOAL`` and ``REWARD_HARNESS_MODEL_SIZE``: the training metadata the judge is told (default
  ``general`` and ``unknown``).

verl passes the response only (``solution_str``), so the question must travel in ``extra_info["question"]`` (or
``extra_info["prompt"]``, text or chat messages); without it this raises rather than have the judge grade an answer
to an unknown question. ``ground_truth`` is shown to the judge as the reference; ``extra_info["instance_id"]``, when
present, picks the rubric instance of a ``per_instance`` run (else the server hashes the question).

The rollout id is a hash of question and response, so verl retrying a sample, or two equal responses in one group,
count once in the step. verl does not tell the reward function its step: ``current_step`` stays 0 and the run closes
each step when rollouts pause (``close_after_idle_s``); use an ``async``-mode run, since a ``sync``-mode ``/score``
waits for the step's update while verl calls one sample at a time.

Every sample returns the same keys (``score``, ``rubric_version``), as verl requires to collect ``reward_extra_info``
column-wise. A failed request raises (after the client's retries of 429/503): never a silent 0.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from typing import Any, Dict, Optional

try:
    from reward_harness_client import RewardHarnessClient
except ImportError:  # loaded by path from a checkout (as verl does): the client sits one folder up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from reward_harness_client import RewardHarnessClient

__all__ = ["compute_score"]


@functools.lru_cache(maxsize=1)
def _client() -> RewardHarnessClient:
    # Built on first use, not at import, so the environment may be set after verl has loaded this file.
    return RewardHarnessClient(
        os.environ.get("REWARD_HARNESS_URL", "http://127.0.0.1:8787"),
        token=os.environ.get("REWARD_HARNESS_TOKEN") or None,
    )


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Optional[Dict[str, Any]] = None,
    **kwargs: Any,
) -> Dict[str, Any]:
    """Scores one response with the run's current rubrics: ``{"score", "rubric_version"}``.

    Example: ``compute_score("gsm8k", "2 + 2 = 4", "4", {"question": "What is 2+2?"})["score"]``
    """
    extra_info = extra_info or {}
    question = _text(extra_info.get("question", extra_info.get("prompt")))
    if question == "":
        raise ValueError(
            "verl_online.compute_score needs the question in extra_info['question'] (or extra_info['prompt'])"
        )
    digest = hashlib.sha256(f"{question}\0{solution_str}".encode("utf-8")).hexdigest()[:32]
    rollout: Dict[str, Any] = {"id": f"verl-{digest}", "input": question, "output": solution_str}
    if ground_truth is not None:
        rollout["supplemental_context"] = _text(ground_truth)
    metadata = {
        "high_level_goal": os.environ.get("REWARD_HARNESS_GOAL") or "general",
        "model_size": os.environ.get("REWARD_HARNESS_MODEL_SIZE") or "unknown",
        "current_step": 0,
        "total_steps": 1,
    }
    instance_id = extra_info.get("instance_id")
    result = _client().score_async(rollout, metadata, instance_id=None if instance_id is None else str(instance_id))
    return {"score": float(result["score"]), "rubric_version": int(result["rubric_version"])}


# The two helpers below are repeated in verl_artifact.py on purpose: each recipe is pasted on its own.
def _text(value: Any) -> str:
    """A question or reference as text: chat messages become their contents, one per paragraph."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) and "content" in m for m in value):
        return "\n\n".join(_content_text(m["content"]) for m in value)
    return json.dumps(value, ensure_ascii=False)


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)

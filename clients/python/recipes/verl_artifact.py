"""verl reward function scoring each response with a deployed RM artifact (``/rm/<target>/score``).

Wire it into verl::

    python -m verl.trainer.main_ppo ... \\
        custom_reward_function.path=clients/python/recipes/verl_artifact.py \\
        custom_reward_function.name=compute_score

Environment:

- ``REWARD_HARNESS_URL``: the Worker, e.g. ``https://<worker>`` or ``https://<worker>/t/<RM token>`` (the token in
  the path; error messages show it as ``/t/***``). Not a ``/runs/<run>`` URL: artifacts are not run-scoped.
- ``REWARD_HARNESS_TOKEN``: the ``RM_TOKEN`` secret or the admin token, sent as a header (instead of the path form).
- ``REWARD_HARNESS_TARGET``: the deployment target, default ``prod``.

verl passes the response only (``solution_str``), so the prompt travels in ``extra_info``: ``extra_info["question"]``
(or ``extra_info["prompt"]``), and ``extra_info["prompt_id"]`` names the artifact's rubric; an id the artifact lacks
is scored with its ``__default__`` rubric (``fallback_rubric`` is then 1). A library artifact judges against a
reference response: put it in ``extra_info["reference"]``.

Every sample returns the same keys (``score``, ``fallback_rubric``), as verl requires to collect
``reward_extra_info`` column-wise. A failed request raises: a reward of 0 would train the policy on a server outage.
verl loads this file by path without putting its folder on ``sys.path``; the client one folder up is found anyway.
"""

from __future__ import annotations

import functools
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
) -> Dict[str, float]:
    """Scores one response with the target's artifact: ``{"score", "fallback_rubric"}``.

    Example: ``compute_score("math", "4", "4", {"prompt_id": "p_math", "question": "What is 2+2?"})["score"]``
    """
    extra_info = extra_info or {}
    candidate: Dict[str, Any] = {
        "candidate_id": str(extra_info.get("index", 0)),
        "text": solution_str,
        "source": "verl",
    }
    if extra_info.get("reference") is not None:
        candidate["metadata"] = {"reference": _text(extra_info["reference"])}
    result = _client().rm_score(
        os.environ.get("REWARD_HARNESS_TARGET") or "prod",
        prompt_id=str(extra_info.get("prompt_id", "auto")),
        prompt=_text(extra_info.get("question", extra_info.get("prompt", ""))),
        candidate=candidate,
    )
    return {"score": float(result["score"]), "fallback_rubric": float(bool(result.get("fallback_rubric", False)))}


# The two helpers below are repeated in verl_online.py on purpose: each recipe is pasted on its own.
def _text(value: Any) -> str:
    """A prompt or reference as text: chat messages become their contents, one per paragraph."""
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

"""verl reward function scoring each response against a run's ONLINE rubrics (``POST /score``).

Wire it into verl (the reward loop, verl's default, awaits the async one: ``compute_score_async``; the older managers
call ``compute_score``)::

    python -m verl.trainer.main_ppo ... \\
        custom_reward_function.path=clients/python/recipes/verl_online.py \\
        custom_reward_function.name=compute_score_async

Environment:

- ``REWARD_HARNESS_URL``: the run, e.g. ``https://<worker>/t/<run token>/runs/<run>`` (the token in the path;
  error messages show it as ``/t/***``), or ``http://127.0.0.1:8787`` for the local default run.
- ``REWARD_HARNESS_TOKEN``: the run token sent as a header instead of in the path.
- ``REWARD_HARNESS_GOAL`` and ``REWARD_HARNESS_MODEL_SIZE``: the training metadata the judge is told (default
  ``general`` and ``unknown``).
- ``REWARD_HARNESS_ABSTAIN=1``: when the judge is down past its budget (``llm_unavailable``, ``overloaded``,
  ``judge_budget_exceeded``, a network failure, after the client's retries), return ``abstained: 1`` with the score
  ``REWARD_HARNESS_ABSTAIN_SCORE`` (default 0.0) and NaN components instead of raising. verl has no "no reward":
  a GRPO group that abstains whole gets zero advantages; filter ``abstained`` in your logs. Unset, it raises.
- ``REWARD_HARNESS_MAX_CONCURRENCY``: requests in flight at once from ``compute_score_async`` (default 64).

verl passes the response only (``solution_str``), so the task comes from ``extra_info["question"]`` (or
``extra_info["prompt"]``, text or chat messages), else from ``extra_info["raw_prompt"]``, the chat messages verl's
agent loop adds (through ``tool_extra_fields``); without any of them this raises rather than have the judge grade an
answer to an unknown question. ``ground_truth`` is shown to the judge as the reference; ``extra_info["instance_id"]``
picks the rubric instance of a ``per_instance`` run (else the server hashes the question).

A multi-turn sample (verl's tool agent loop, Hermes tool format: ``<tool_call>`` JSON in the policy's turns,
``<tool_response>`` in the turns verl adds, role words left where ``skip_special_tokens`` removed the markers) is sent
as messages, so the judge reads the policy's words, its calls and the tool results apart. The parse is trusted only
when its turns add up to verl's own ``num_turns`` (assistant turns + user turns + 1): a policy that writes a fake
tool response in its own text adds a turn, and is then sent as one turn of its own words. ``num_turns``,
``turn_scores`` and ``tool_rewards`` travel in the rollout's metadata (kept in the ledger and the archive).
``reward_router_address`` and ``reward_model_tokenizer`` (verl passes them when it serves a reward model of its own)
are accepted and unused: the judge is the run's.

The rollout id is a hash of question and response, so verl retrying a sample, or two equal responses in one group,
count once in the step. verl does not tell the reward function its step: ``current_step`` stays 0 and the run closes
each step when rollouts pause (``close_after_idle_s``); use an ``async``-mode run, since a ``sync``-mode ``/score``
waits for the step's update.

Every sample returns the same keys, as verl requires to collect ``reward_extra_info`` column-wise: ``score``,
``rubric_version``, ``abstained`` and ``rubric/<id>`` (grade ÷ grade_max) for each anchor rubric of the run (anchors
never change). A failed request raises (after the client's retries of 429/503) unless abstaining: never a silent 0.
With verl's ``limited`` manager a raise becomes reward 0.0 with an ``error`` column: see docs/trainers.md.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional

try:
    from reward_harness_client import RewardHarnessClient, judge_is_down, reward_components
except ImportError:  # loaded by path from a checkout (as verl does): the client sits one folder up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from reward_harness_client import RewardHarnessClient, judge_is_down, reward_components

__all__ = ["compute_score", "compute_score_async", "parse_hermes_turns"]


@functools.lru_cache(maxsize=1)
def _client() -> RewardHarnessClient:
    # Built on first use, not at import, so the environment may be set after verl has loaded this file.
    return RewardHarnessClient(
        os.environ.get("REWARD_HARNESS_URL", "http://127.0.0.1:8787"),
        token=os.environ.get("REWARD_HARNESS_TOKEN") or None,
    )


@functools.lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    # verl's reward loop runs a sync reward function on the event loop's default executor (a few threads on a small
    # host); the async entry point keeps its own, wide enough for a whole batch of slow judge calls at once.
    return ThreadPoolExecutor(max_workers=int(os.environ.get("REWARD_HARNESS_MAX_CONCURRENCY") or 64))


async def compute_score_async(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Optional[Dict[str, Any]] = None,
    **kwargs: Any,
) -> Dict[str, Any]:
    """``compute_score`` for verl's reward loop (async; many samples in flight at once).

    Example: ``await compute_score_async("gsm8k", "2 + 2 = 4", "4", {"question": "What is 2+2?"})``
    """
    call = functools.partial(compute_score, data_source, solution_str, ground_truth, extra_info, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_pool(), call)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Optional[Dict[str, Any]] = None,
    **kwargs: Any,
) -> Dict[str, Any]:
    """Scores one response with the run's current rubrics: ``{"score", "rubric_version", "abstained", "rubric/…"}``.

    Example: ``compute_score("gsm8k", "2 + 2 = 4", "4", {"question": "What is 2+2?"})["score"]``
    """
    extra_info = extra_info or {}
    question = extra_info.get("question", extra_info.get("prompt"))
    task = _task_messages(question if question is not None else extra_info.get("raw_prompt"))
    if not task:
        raise ValueError(
            "verl_online.compute_score needs the question in extra_info['question'] (or extra_info['prompt'], or "
            "verl's extra_info['raw_prompt'])"
        )
    input_text = _text(question) if question is not None else _text(extra_info.get("raw_prompt"))
    digest = hashlib.sha256(f"{input_text}\0{solution_str}".encode("utf-8")).hexdigest()[:32]
    rollout: Dict[str, Any] = {"id": f"verl-{digest}", "input": input_text}
    turns = parse_hermes_turns(solution_str, extra_info.get("num_turns"))
    if turns is None:
        rollout["output"] = solution_str
    else:
        rollout["messages"] = task + turns
    if ground_truth is not None:
        rollout["supplemental_context"] = _text(ground_truth)
    verl_fields = {k: _plain(extra_info[k]) for k in ("num_turns", "turn_scores", "tool_rewards") if k in extra_info}
    if verl_fields:
        rollout["metadata"] = verl_fields
    metadata = {
        "high_level_goal": os.environ.get("REWARD_HARNESS_GOAL") or "general",
        "model_size": os.environ.get("REWARD_HARNESS_MODEL_SIZE") or "unknown",
        "current_step": 0,
        "total_steps": 1,
    }
    instance_id = extra_info.get("instance_id")
    client = _client()
    anchors = client.anchor_ids(None if instance_id is None else str(instance_id))
    try:
        result = client.score_async(rollout, metadata, instance_id=None if instance_id is None else str(instance_id))
    except Exception as error:
        if os.environ.get("REWARD_HARNESS_ABSTAIN") != "1" or not judge_is_down(error):
            raise
        abstained = {"rubric/" + a: math.nan for a in anchors}
        score = float(os.environ.get("REWARD_HARNESS_ABSTAIN_SCORE") or 0.0)
        return {"score": score, "rubric_version": -1, "abstained": 1.0, **abstained}
    return {
        "score": float(result["score"]),
        "rubric_version": int(result["rubric_version"]),
        "abstained": 0.0,
        **reward_components(result["criteria"], anchors, int(result["grade_max"])),
    }


# Hermes tool format as verl's decoded response shows it (skip_special_tokens=True removes <|im_start|>/<|im_end|>
# and leaves the role word): a turn verl added starts with a line "user" or "tool", the policy's next turn with a
# line "assistant".
_TURN = re.compile(r"\n?(?:^|\n)(user|tool|assistant)\n", re.MULTILINE)
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.DOTALL)


def parse_hermes_turns(response: str, num_turns: Any = None) -> Optional[List[Dict[str, Any]]]:
    """The policy's turns, its tool calls and the tool results in a decoded multi-turn response, as chat messages.

    None when the response holds no tool markup (a single turn: sent as text), or when the turns found do not add
    up to verl's ``num_turns`` (then the markup is not verl's own and all of it is the policy's words).
    Example: ``parse_hermes_turns('<tool_call>{"name": "f", "arguments": {}}</tool_call>\\nuser\\n…', 3)``
    """
    if "<tool_call>" not in response and "<tool_response>" not in response:
        return None
    parts = _TURN.split(response)
    segments = [("assistant", parts[0])] + [(parts[i], parts[i + 1]) for i in range(1, len(parts) - 1, 2)]
    messages: List[Dict[str, Any]] = []
    assistant_turns = user_turns = 0
    for role, text in segments:
        if role == "assistant":
            assistant_turns += 1
            calls = [_tool_call(raw, f"call_{assistant_turns}_{k}") for k, raw in enumerate(_TOOL_CALL.findall(text))]
            words = _TOOL_CALL.sub("", text).strip()
            message: Dict[str, Any] = {"role": "assistant", "content": words}
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
        else:
            results = _TOOL_RESPONSE.findall(text)
            if not results:
                user_turns += 1
                messages.append({"role": "user", "content": text.strip()})
            open_calls = [c for m in messages for c in m.get("tool_calls", [])][-len(results) :] if results else []
            for index, result in enumerate(results):
                call_id = open_calls[index]["id"] if index < len(open_calls) else None
                messages.append({"role": "tool", "content": result, **({"tool_call_id": call_id} if call_id else {})})
    if isinstance(num_turns, (int, float)) and not isinstance(num_turns, bool):
        if assistant_turns + user_turns + 1 != int(num_turns):
            return None
    return messages


def _tool_call(raw: str, call_id: str) -> Dict[str, Any]:
    """A ``<tool_call>`` body as an OpenAI tool call; a body that is not the Hermes JSON keeps its text as arguments."""
    try:
        parsed = json.loads(raw)
        name, arguments = str(parsed["name"]), parsed.get("arguments", {})
    except (ValueError, KeyError, TypeError):
        name, arguments = "unparsed_tool_call", raw
    if not re.fullmatch(r"[\w.:-]{1,64}", name):
        name, arguments = "unparsed_tool_call", raw
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _task_messages(value: Any) -> List[Dict[str, Any]]:
    """The task as chat messages: messages as they are (content kept), a text as one user turn."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if hasattr(value, "tolist"):  # numpy arrays of messages, as verl's non-tensor batch holds them
        value = value.tolist()
    if isinstance(value, list) and all(isinstance(m, dict) and "content" in m for m in value):
        return [{"role": str(m.get("role", "user")), "content": _content_text(m["content"])} for m in value]
    return [{"role": "user", "content": _text(value)}]


def _plain(value: Any) -> Any:
    """verl's numpy values as JSON: arrays as lists, numbers as floats."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


# The two helpers below are repeated in verl_artifact.py on purpose: each recipe is pasted on its own.
def _text(value: Any) -> str:
    """A question or reference as text: chat messages become their contents, one per paragraph."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list) and all(isinstance(m, dict) and "content" in m for m in value):
        return "\n\n".join(_content_text(m["content"]) for m in value)
    return json.dumps(value, ensure_ascii=False)


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)

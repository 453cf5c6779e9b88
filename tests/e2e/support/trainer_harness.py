"""Calls a reward recipe the way its trainer does, for the end-to-end tests. Standard library only (python3.11).

Usage (prints one JSON line: the results and ``wall_s``; on failure ``{"ok": false, "error_type", "error"}`` and
exit status 1)::

    trainer_harness.py verl-naive <recipe.py> <samples.jsonl> [--name compute_score]
    trainer_harness.py verl-loop <recipe.py> <samples.jsonl> [--name compute_score_async]
    trainer_harness.py verl-limited <recipe.py> <samples.jsonl> [--name compute_score_async]
    trainer_harness.py trl <recipe.py> <batch.json> [--name rubric_reward]
    trainer_harness.py autosr <endpoint> <items.json>

``verl-naive``: verl's ``NaiveRewardManager.__call__`` (volcengine/verl HEAD b178a3c,
``verl/workers/reward_manager/naive.py``; loading as ``verl/utils/import_utils.py`` ``load_extern_object`` and
``verl/trainer/ppo/reward.py`` ``get_custom_reward_fn``). The recipe is loaded by file path under a generated module
name, its folder not put on ``sys.path``. Each JSONL line is ``{"data_source", "solution_str", "ground_truth",
"extra_info"?}``; ``compute_score`` is called once per sample, one after another, with keyword arguments, and
``extra_info`` gains ``num_turns`` (None) and ``rollout_reward_scores`` ({}) as verl adds them. A dict result gives the
reward from ``["score"]`` (KeyError if missing) and appends every key to ``reward_extra_info``; the reward must be a
number (verl writes it into a float tensor). A key missing from some samples leaves its column short, which verl's
``DataProto`` rejects ("key … length … is not equal to batch size …"): so does this. Prints ``{"rewards",
"reward_extra_info", "wall_s"}``.

``verl-loop``: the reward loop's ``NaiveRewardManager.run_single`` (verl-project/verl HEAD 1dda039,
``verl/experimental/reward_loop/reward_manager/naive.py``), every sample of the file at once (``asyncio.gather``, as
``RewardLoopWorker.compute_score_batch`` fans them out). A line may add ``"tool_extra_fields"`` (merged into
``extra_info``: verl's agent loop puts ``raw_prompt``, ``turn_scores`` and ``tool_rewards`` there) and
``"num_turns"``; ``extra_info`` gains ``num_turns`` and ``rollout_reward_scores``; an ``async def`` is awaited, a sync
one run on the loop's default executor; ``reward_router_address`` and ``reward_model_tokenizer`` are passed when
``REWARD_ROUTER_ADDRESS`` is set. A dict result's keys go to ``reward_extra_info``; a float gives ``acc``.
``verl-limited``: the same through ``RateLimitedRewardManager.run_single`` (``limited.py``): an exception becomes
reward 0.0 with ``reward_extra_info`` ``{"error": str(e), "acc": 0.0}`` (its timeout path is not reproduced).
Prints ``{"rewards", "reward_extra_info" (one list per key, None where a sample lacks it), "wall_s"}``.

``trl``: TRL's ``GRPOTrainer._calculate_rewards`` (huggingface/trl HEAD f2cd577, ``trl/trainer/grpo_trainer.py``).
The JSON file is ``{"prompts", "completions", "completion_ids"?, "columns"?: {name: [one per completion]},
"global_step"?, "max_steps"?}``. The function is called once for the whole batch with ``prompts``,
``completions``, ``completion_ids`` (the completions' UTF-8 bytes when not given), every column (TRL passes every
dataset column but ``prompt``, ``completion`` and ``completion_ids``), ``trainer_state`` (an object with
``global_step``, ``max_steps``, ``epoch``), ``log_extra`` and ``log_metric``; an ``async def`` is awaited. None
becomes NaN (printed as null); the result must have one number per completion (TRL writes it into a float32
column). Prints ``{"rewards", "log_extra", "log_metric", "wall_s"}``.

``autosr``: autosr's ``RMScoringClient`` (clients/python/recipes/autosr_client.py) against ``<endpoint>``
(``<base>/t/<token>/rm/<target>``). The JSON file is a list of ``{prompt_id, prompt, candidate: {candidate_id, text,
source?, metadata?}}`` items, or ``{"items": [...], "expected_artifact_id"?, "expected_source_session_id"?,
"timeout_seconds"?}``. Runs ``healthz_check()``, ``score(...)`` for each item in turn, then ``batch_score(items)``.
Prints ``{"healthz", "scores", "batch", "wall_s"}``. Printed errors show a path token as ``/t/***``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import math
import os
import re
import sys
import time
from typing import Any, Callable, Dict, List

_PATH_TOKEN = re.compile(r"/t/[^/?#\s'\"]+")


class TrainerState:
    """The fields of ``transformers.TrainerState`` a reward function may read.

    Example: ``TrainerState(global_step=3, max_steps=100).global_step``
    """

    def __init__(self, global_step: int, max_steps: int, epoch: float = 0.0):
        self.global_step = global_step
        self.max_steps = max_steps
        self.epoch = epoch


def load_function(path: str, name: str) -> Callable[..., Any]:
    """The ``name`` attribute of the Python file at ``path``, loaded as verl loads a custom reward function.

    Example: ``load_function("clients/python/recipes/verl_online.py", "compute_score")``
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"Custom module file not found: {path=}")
    spec = importlib.util.spec_from_file_location(f"custom_module_{hash(os.path.abspath(path))}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"Could not load module from {path=}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, name):
        raise AttributeError(f"Object not found in module: {name=}, {path=}.")
    return getattr(module, name)


def run_verl_naive(recipe: str, samples_path: str, name: str) -> Dict[str, Any]:
    """verl's NaiveRewardManager over the samples: ``{"rewards", "reward_extra_info"}``.

    Example: ``run_verl_naive("clients/python/recipes/verl_online.py", "samples.jsonl", "compute_score")["rewards"]``
    """
    compute_score = load_function(recipe, name)
    with open(samples_path, encoding="utf-8") as handle:
        samples = [json.loads(line) for line in handle if line.strip()]
    rewards: List[float] = []
    extra: Dict[str, List[Any]] = {}
    for sample in samples:
        extra_info = sample.get("extra_info") or {}
        extra_info["num_turns"] = None
        extra_info["rollout_reward_scores"] = {}
        score = compute_score(
            data_source=sample["data_source"],
            solution_str=sample["solution_str"],
            ground_truth=sample.get("ground_truth"),
            extra_info=extra_info,
        )
        if isinstance(score, dict):
            reward = score["score"]
            for key, value in score.items():
                extra.setdefault(key, []).append(value)
        else:
            reward = score
        rewards.append(_as_float(reward))
    for key, values in extra.items():
        if len(values) != len(samples):
            raise AssertionError(f"key {key} length {len(values)} is not equal to batch size {len(samples)}")
    return {"rewards": rewards, "reward_extra_info": extra}


async def _verl_loop_single(compute_score: Callable[..., Any], sample: Dict[str, Any], limited: bool) -> Dict[str, Any]:
    extra_info = dict(sample.get("extra_info") or {})
    extra_info.update((sample.get("tool_extra_fields") or {}).items())
    extra_info["num_turns"] = sample.get("num_turns")
    extra_info["rollout_reward_scores"] = {}
    extra: Dict[str, Any] = {}
    if os.environ.get("REWARD_ROUTER_ADDRESS"):
        extra = {"reward_router_address": os.environ["REWARD_ROUTER_ADDRESS"], "reward_model_tokenizer": None}
    kwargs = dict(
        data_source=sample["data_source"],
        solution_str=sample["solution_str"],
        ground_truth=sample.get("ground_truth"),
        extra_info=extra_info,
        **extra,
    )
    info: Dict[str, Any] = {}
    try:
        if inspect.iscoroutinefunction(compute_score):
            result = await compute_score(**kwargs)
        else:
            result = await asyncio.get_running_loop().run_in_executor(None, lambda: compute_score(**kwargs))
    except Exception as error:
        if not limited:
            raise
        return {"reward_score": 0.0, "reward_extra_info": {"error": str(error), "acc": 0.0}}
    if isinstance(result, dict):
        score = result["score"]
        info.update(result)
    else:
        score = result
        info["acc"] = score
    return {"reward_score": _as_float(score), "reward_extra_info": info}


def run_verl_loop(recipe: str, samples_path: str, name: str, limited: bool) -> Dict[str, Any]:
    """verl's reward loop over the samples, all at once: ``{"rewards", "reward_extra_info"}``.

    Example: ``run_verl_loop("clients/python/recipes/verl_online.py", "s.jsonl", "compute_score_async", False)``
    """
    compute_score = load_function(recipe, name)
    with open(samples_path, encoding="utf-8") as handle:
        samples = [json.loads(line) for line in handle if line.strip()]

    async def batch() -> List[Dict[str, Any]]:
        return await asyncio.gather(*(_verl_loop_single(compute_score, s, limited) for s in samples))

    results = asyncio.run(batch())
    keys = sorted({key for r in results for key in r["reward_extra_info"]})
    extra = {key: [r["reward_extra_info"].get(key) for r in results] for key in keys}
    return {"rewards": [r["reward_score"] for r in results], "reward_extra_info": extra}


def run_trl(recipe: str, batch_path: str, name: str) -> Dict[str, Any]:
    """TRL's ``_calculate_rewards`` for one reward function: ``{"rewards", "log_extra", "log_metric"}``.

    Example: ``run_trl("clients/python/recipes/trl_reward.py", "batch.json", "rubric_reward")["rewards"]``
    """
    reward_func = load_function(recipe, name)
    with open(batch_path, encoding="utf-8") as handle:
        batch = json.load(handle)
    prompts, completions = batch["prompts"], batch["completions"]
    completion_ids = batch.get("completion_ids") or [list(_text_of(c).encode("utf-8")) for c in completions]
    reserved = ("prompt", "completion", "completion_ids")
    columns = {k: v for k, v in (batch.get("columns") or {}).items() if k not in reserved}
    log_extra: Dict[str, List[Any]] = {}
    log_metric: Dict[str, List[float]] = {}
    kwargs: Dict[str, Any] = dict(columns)
    kwargs["trainer_state"] = TrainerState(int(batch.get("global_step", 0)), int(batch.get("max_steps", 0)))
    kwargs["log_extra"] = lambda column, values: log_extra.setdefault(column, []).extend(values)
    kwargs["log_metric"] = lambda metric, value: log_metric.setdefault(metric, []).append(value)
    call = lambda: reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
    output = asyncio.run(call()) if inspect.iscoroutinefunction(reward_func) else call()
    rewards = [math.nan if r is None else _as_float(r) for r in output]
    if len(rewards) != len(prompts):
        raise RuntimeError(
            f"The expanded size of the tensor ({len(rewards)}) must match the existing size ({len(prompts)})"
        )
    return {
        "rewards": [None if math.isnan(r) else r for r in rewards],
        "log_extra": log_extra,
        "log_metric": log_metric,
    }


def run_autosr(endpoint: str, items_path: str) -> Dict[str, Any]:
    """autosr's RMScoringClient through healthz, score and batch_score: ``{"healthz", "scores", "batch"}``.

    Example: ``run_autosr("http://127.0.0.1:8787/t/TOKEN/rm/prod", "items.json")["batch"]["results"]``
    """
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../clients/python/recipes"))
    from autosr_client import RMScoringClient

    with open(items_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    spec = {"items": spec} if isinstance(spec, list) else spec
    option_names = ("expected_artifact_id", "expected_source_session_id", "timeout_seconds")
    options = {k: spec[k] for k in option_names if k in spec}
    client = RMScoringClient(endpoint, **options)
    healthz = client.healthz_check()
    scores = []
    for item in spec["items"]:
        candidate = item["candidate"]
        scores.append(
            client.score(
                prompt_id=item["prompt_id"],
                prompt=item["prompt"],
                candidate_id=candidate["candidate_id"],
                text=candidate["text"],
                source=candidate.get("source", "verl"),
                metadata=candidate.get("metadata"),
            )
        )
    return {"healthz": healthz, "scores": scores, "batch": client.batch_score(spec["items"])}


def _as_float(value: Any) -> float:
    """What ``torch.tensor(value, dtype=float)`` accepts of a reward: a number or a boolean."""
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return float(value)
    raise TypeError(f"must be real number, not {type(value).__name__}")


def _text_of(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))


def _without_nan(value: Any) -> Any:
    """NaN as null: the test reads the line with JSON.parse, which has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _without_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nan(v) for v in value]
    return value


def main(argv: List[str]) -> int:
    args, name = list(argv), None
    if "--name" in args:
        at = args.index("--name")
        name = args[at + 1]
        del args[at : at + 2]
    if len(args) != 3 or args[0] not in ("verl-naive", "verl-loop", "verl-limited", "trl", "autosr"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, target, data = args
    started = time.monotonic()
    try:
        if mode == "verl-naive":
            result = run_verl_naive(target, data, name or "compute_score")
        elif mode in ("verl-loop", "verl-limited"):
            result = run_verl_loop(target, data, name or "compute_score_async", mode == "verl-limited")
        elif mode == "trl":
            result = run_trl(target, data, name or "rubric_reward")
        else:
            result = run_autosr(target, data)
    except Exception as error:  # the test reads the failure from the JSON line
        message = _PATH_TOKEN.sub("/t/***", str(error))
        wall_s = round(time.monotonic() - started, 3)
        print(json.dumps({"ok": False, "error_type": type(error).__name__, "error": message, "wall_s": wall_s}))
        return 1
    out = {"ok": True, "mode": mode, **result, "wall_s": round(time.monotonic() - started, 3)}
    print(json.dumps(_without_nan(out), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

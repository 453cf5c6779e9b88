"""Python client of the Reward Harness edge scoring API, standard library only (urllib).

Example::

    client = RewardHarnessClient("http://127.0.0.1:8787")
    client.score_async({"id": "r1", "input": "What is 2+2?", "output": "4"},
                       {"high_level_goal": "math", "model_size": "7B", "current_step": 0, "total_steps": 10})["score"]
    client.rollouts_complete()
    client.rubric_updated()

Deployed RM artifacts (``/rm/<target>/...``, the autosr RM server's API; open locally, else the ``RM_TOKEN``
secret or the admin token) and trainer protocols over a run's online rubrics::

    client.rm_score("prod", "p_math_0001", "What is 2+2?", {"candidate_id": "c1", "text": "4"})["score"]
    item = {"prompt_id": "p1", "prompt": "Q", "candidate": {"candidate_id": "c1", "text": "A"}}
    client.rm_batch_score("prod", [item])
    client.openrlhf(query=[prompt + response], prompts=[prompt], labels=["4"])["rewards"]
    client.score_group("What is 2+2?", ["4", "5", "four"], reference="4")["advantages"]

From verl (``custom_reward_function.path=my_reward.py``, ``custom_reward_function.name=compute_score``); verl passes
the response only, so the prompt and its id travel in ``extra_info`` (an id the artifact lacks is scored with its
``__default__`` rubric). Every sample returns the same keys, as verl requires::

    import os
    from reward_harness_client import RewardHarnessClient

    _client = RewardHarnessClient(os.environ.get("REWARD_HARNESS_URL", "http://127.0.0.1:8787"),
                                  token=os.environ.get("REWARD_HARNESS_TOKEN"))

    def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        extra_info = extra_info or {}
        result = _client.rm_score(
            "prod",
            prompt_id=str(extra_info.get("prompt_id", "auto")),
            prompt=str(extra_info.get("question", "")),
            candidate={"candidate_id": str(extra_info.get("index", 0)), "text": solution_str, "source": "verl"},
        )
        return {"score": result["score"], "fallback_rubric": float(result["fallback_rubric"])}

From TRL (``GRPOTrainer(reward_funcs=[rubric_reward], ...)``): use the maintained recipe, which scores the prompt
groups of a batch concurrently (one ``/score/group`` each) and sends TRL's step, rather than a loop of your own::

    import sys
    sys.path.insert(0, "clients/python/recipes")   # or copy recipes/trl_reward.py next to your script
    from trl_reward import rubric_reward

Mirrors the TypeScript client (src/client/index.ts): 429, 502 and 503 are retried honouring Retry-After (except a run
budget's 429, ``*_budget_exceeded``), every other non-2xx answer raises RewardHarnessError carrying the server's error
code.

The verl recipe above is the short form; recipes/ holds the maintained ones, each a file to point the trainer at:
recipes/verl_online.py (verl over a run's online rubrics), recipes/verl_artifact.py (verl over a deployed artifact),
recipes/trl_reward.py (TRL, groups scored concurrently) and recipes/autosr_client.py (autosr's RMScoringClient).
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import random
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = [
    "RMHealthzError",
    "RMScoringClient",
    "RewardHarnessClient",
    "RewardHarnessError",
    "judge_is_down",
    "parse_retry_after",
    "reward_components",
]

RETRYABLE_STATUS = (429, 502, 503)
# A Retry-After longer than this is capped: a trainer step should not stall on one header.
MAX_RETRY_AFTER_S = 60.0


# The answers that mean "the judge is down past its budget", after the client's own retries: a trainer that abstains
# (``REWARD_HARNESS_ABSTAIN=1`` in the recipes) gets "no reward" for them instead of an exception. Anything else (a
# malformed request, a wrong token, a body over a limit) is the caller's to fix and always raises.
JUDGE_DOWN_CODES = ("llm_unavailable", "overloaded", "judge_budget_exceeded", "network", "rate_limited")
# A gateway's own 502/503/504 (no JSON error of the harness's: a proxy, a load balancer, a dev server restarting the
# worker) says the judge could not be reached, as a network failure does.
GATEWAY_STATUS = (502, 503, 504)


def judge_is_down(error: BaseException) -> bool:
    """Whether ``error`` says the judge could not give a reward now (its budget spent, unreachable, overloaded).

    Example: ``except RewardHarnessError as e: reward = None if judge_is_down(e) else raise_it(e)``
    """
    if not isinstance(error, RewardHarnessError):
        return False
    return error.code in JUDGE_DOWN_CODES or (error.code == "http_error" and error.status in GATEWAY_STATUS)


def reward_components(criteria: List[Dict[str, Any]], anchor_ids: List[str], grade_max: int) -> Dict[str, float]:
    """Per-criterion components of one answer: ``{"rubric/<id>": grade / grade_max}`` for each anchor rubric.

    Anchors come from the run's config and never change, so every sample of a run gets the same keys, as verl's
    ``reward_extra_info`` and TRL's logged columns need; an anchor an answer lacks is NaN. The dict is also what
    NeMo-RL's environment metrics take.
    Example: ``reward_components(result["criteria"], ["a-correct"], result["grade_max"])["rubric/a-correct"]``
    """
    grades = {c.get("rubric_id"): c.get("grade") for c in criteria if isinstance(c, dict)}
    out: Dict[str, float] = {}
    for rubric_id in anchor_ids:
        grade = grades.get(rubric_id)
        out[f"rubric/{rubric_id}"] = float(grade) / grade_max if isinstance(grade, (int, float)) else math.nan
    return out


class RewardHarnessError(Exception):
    """A non-2xx answer (or a transport failure after the last attempt), with the server's error code.

    Example: ``except RewardHarnessError as e: print(e.status, e.code)``
    """

    def __init__(self, status: int, code: str, message: str, request_id: Optional[str] = None, details: Any = None):
        super().__init__(f"{code} (HTTP {status}): {message}")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.details = details


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a Retry-After header: delta seconds or an HTTP date; None when absent or unreadable.

    Example: ``parse_retry_after("2") == 2.0``
    """
    if value is None or value.strip() == "":
        return None
    try:
        seconds = float(value)
        if math.isfinite(seconds):
            return max(0.0, seconds)
        return None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class RewardHarnessClient:
    """Scores rollouts and drives steps of one run.

    Example: ``RewardHarnessClient("http://127.0.0.1:8787", token="rh_...").rubric_status()["status"]``

    base_url: e.g. ``http://127.0.0.1:8787``, or ``http://host/t/<token>`` to carry the token in the path (routes
    are appended to it; error messages show it as ``/t/***``); token: a run token or the admin token (omit for the
    local default run); run_id: address a run by path (``/runs/<id>``) instead of by token; timeout: seconds per
    request; max_attempts: attempts for 429 / 502 / 503 / network failures.
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        run_id: Optional[str] = None,
        timeout: float = 180,
        max_attempts: int = 4,
        sleep: Callable[[float], None] = time.sleep,
    ):
        root = base_url.rstrip("/")
        self.root = root
        self.base = f"{root}/runs/{urllib.parse.quote(run_id, safe='')}" if run_id else root
        self.token = token
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self._sleep = sleep
        self._anchor_ids: Optional[List[str]] = None

    def score_async(
        self, rollout: Dict[str, Any], metadata: Dict[str, Any], instance_id: Optional[str] = None
    ) -> Dict[str, Any]:
        """Scores one rollout; in a sync-mode run the answer comes after the step's rubric update.

        Example: ``client.score_async({"id": "r1", "input": "Q", "output": "A"}, metadata)["score"]``
        """
        body: Dict[str, Any] = {"rollout": rollout, "metadata": metadata}
        if instance_id is not None:
            body["instance_id"] = instance_id
        return self._request("POST", "/score", body)[1]

    def rollouts_complete(self) -> Dict[str, Any]:
        """Tells the service the step's rollouts are all in (``noop`` when the run closes steps by count).

        Example: ``client.rollouts_complete()["closed"]``
        """
        return self._request("POST", "/complete", {})[1]

    def rubric_updated(self, timeout_s: float = 300) -> Dict[str, Any]:
        """Long-polls until the step's rubric update is done (``status == "updated"``) or ``timeout_s`` passes.

        On the deadline the last answer is returned with ``timed_out: True``.
        Example: ``client.rubric_updated(timeout_s=60)["status"]``
        """
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = max(0, math.ceil(deadline - time.monotonic()))
            status, answer = self._request("GET", f"/rubric_status/wait?timeout_s={remaining}", timeout=remaining + 30)
            if status != 202 or time.monotonic() >= deadline:
                return answer

    def rubric_status(self) -> Dict[str, Any]:
        """Where the run stands now, without waiting.

        Example: ``client.rubric_status()["rollouts"]``
        """
        return self._request("GET", "/rubric_status")[1]

    def rubrics(self, instance_id: Optional[str] = None) -> Dict[str, Any]:
        """The instance's anchor and adaptive rubrics with their version.

        Example: ``client.rubrics()["rubric_version"]``
        """
        query = f"?instance_id={urllib.parse.quote(instance_id, safe='')}" if instance_id else ""
        return self._request("GET", f"/rubrics{query}")[1]

    def anchor_ids(self, instance_id: Optional[str] = None) -> List[str]:
        """The ids of the run's anchor rubrics (read once per client: anchors never change).

        Example: ``client.anchor_ids()  # ['a-correct']``
        """
        if self._anchor_ids is None:
            answer = self.rubrics(instance_id)
            self._anchor_ids = [str(r["id"]) for r in answer.get("anchor_rubrics", []) if isinstance(r, dict)]
        return self._anchor_ids

    # -- deployed RM artifacts: /rm/<target>/... (not run-scoped) -------------------------------------------

    def rm_healthz(self, target: str) -> Dict[str, Any]:
        """The target's active artifact: ``{status, artifact_id, source_session_id, schema_version, rm_api_version}``.

        Example: ``client.rm_healthz("prod")["artifact_id"]``
        """
        return self._request("GET", f"{_rm_path(target)}/healthz", root=True)[1]

    def rm_score(self, target: str, prompt_id: str, prompt: str, candidate: Any) -> Dict[str, Any]:
        """Scores one candidate with the target's artifact: the prompt's rubric, else its ``__default__`` rubric.

        ``candidate`` is ``{"candidate_id", "text", "source"?, "metadata"?}`` or just the text.
        The answer has ``score``, ``rubric_id``, ``fallback_rubric``, ``criteria`` and the per-vote grades.
        Example: ``client.rm_score("prod", "p1", "What is 2+2?", {"candidate_id": "c1", "text": "4"})["score"]``
        """
        body = {"prompt_id": prompt_id, "prompt": prompt, "candidate": _candidate(candidate)}
        return self._request("POST", f"{_rm_path(target)}/score", body, root=True)[1]

    def rm_batch_score(self, target: str, items: List[Dict[str, Any]]) -> Dict[str, Any]:
        """Scores many ``{prompt_id, prompt, candidate}`` items; one failing item never fails the batch.

        Each of ``results`` has ``index`` and ``ok``: the score fields, or ``error_code`` and ``error_message``.
        Example: ``[r.get("score") for r in client.rm_batch_score("prod", items)["results"]]``
        """
        body = {
            "items": [
                dict(item, candidate=_candidate(item.get("candidate"))) if isinstance(item, dict) else item
                for item in items
            ]
        }
        return self._request("POST", f"{_rm_path(target)}/batch_score", body, root=True)[1]

    # -- trainer protocols over the run's online rubrics ----------------------------------------------------

    def openrlhf(self, query: List[str], prompts: List[str], labels: Optional[List[Any]] = None) -> Dict[str, Any]:
        """OpenRLHF's remote reward protocol: ``query`` = prompt + response, parallel to ``prompts`` and ``labels``.

        Returns ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``; empty lists give empty lists.
        Example: ``client.openrlhf([p + r], [p], ["4"])["rewards"][0]``
        """
        body: Dict[str, Any] = {"query": list(query), "prompts": list(prompts)}
        if labels is not None:
            body["labels"] = list(labels)
        return self._request("POST", "/compat/openrlhf", body)[1]

    def slime(self, prompt: Any, response: str, label: Any = None) -> Dict[str, Any]:
        """slime's remote reward protocol: one sample; the answer's ``score`` is the reward.

        Example: ``client.slime("What is 2+2?", "4", "4")["score"]``
        """
        return self._request("POST", "/compat/slime", {"prompt": prompt, "response": response, "label": label})[1]

    def score_group(
        self, prompt: Any, responses: List[str], reference: Any = None, metadata: Optional[Dict[str, Any]] = None
    ) -> Dict[str, Any]:
        """Scores a GRPO group (responses to one prompt): ``scores`` and ``advantages`` ((s - mean) / (std + 1e-6)).

        A response is a text, or the completion's messages (assistant turns with ``tool_calls``, ``tool`` results).

        Example: ``client.score_group("What is 2+2?", ["4", "5"], reference="4")["advantages"]``
        """
        body: Dict[str, Any] = {"prompt": prompt, "responses": list(responses)}  # texts, or each a list of messages
        if reference is not None:
            body["reference"] = reference
        if metadata is not None:
            body["metadata"] = metadata
        return self._request("POST", "/score/group", body)[1]

    def _request(
        self, method: str, path: str, body: Any = None, timeout: Optional[float] = None, root: bool = False
    ) -> Tuple[int, Dict[str, Any]]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"accept": "application/json"}
        if data is not None:
            headers["content-type"] = "application/json"
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        url = (self.root if root else self.base) + path
        for attempt in range(1, self.max_attempts + 1):
            last = attempt >= self.max_attempts
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout if timeout is None else timeout) as response:
                    return response.status, _read_json(response.read())
            except urllib.error.HTTPError as error:
                raw = error.read()
                retry_after = parse_retry_after(error.headers.get("retry-after") if error.headers else None)
                error.close()
                # A run budget's 429 (``*_budget_exceeded``) is the run's limit, not the server's load: never retried.
                if error.code in RETRYABLE_STATUS and not last and not _to_error(error.code, raw).code.endswith(
                    "_budget_exceeded"
                ):
                    self._sleep(min(MAX_RETRY_AFTER_S, retry_after) if retry_after is not None else _backoff_s(attempt))
                    continue
                raise _to_error(error.code, raw) from None
            except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError) as error:
                if last:
                    reason = getattr(error, "reason", error)
                    raise RewardHarnessError(0, "network", _redact(f"{method} {url} failed: {reason}")) from error
                self._sleep(_backoff_s(attempt))
        raise AssertionError("unreachable")


class RMHealthzError(Exception):
    """autosr's healthz failure, raised by :class:`RMScoringClient` (the token never in its message).

    Example: ``except RMHealthzError as e: print(e)``
    """


class RMScoringClient:
    """A drop-in for autosr's verl ``RMScoringClient`` that keeps the RM token out of URLs and error messages.

    autosr's own client sends no header, so its endpoint must carry the token in the path (``/t/<token>/rm/<target>``)
    and every error it raises prints that URL. This one has the same constructor and methods (``healthz_check``,
    ``score``, ``batch_score``, the same checks of ``/healthz``) but sends the token as a header (``token=`` or
    ``REWARD_HARNESS_TOKEN``) and raises :class:`RewardHarnessError` (a ``/t/<token>`` left in an endpoint shows as
    ``/t/***``) or :class:`RMHealthzError`. Swap the import; the endpoint loses its ``/t/<token>``.
    Example: ``RMScoringClient("https://<worker>/rm/prod", token=os.environ["RM_TOKEN"]).score(prompt_id="p1", …)``
    """

    def __init__(
        self,
        endpoint: str,
        *,
        expected_artifact_id: str = "",
        expected_source_session_id: str = "",
        expected_schema_version: str = "1.0",
        expected_rm_api_version: str = "1.0",
        timeout_seconds: float = 30.0,
        token: Optional[str] = None,
    ) -> None:
        base, _, target = endpoint.rstrip("/").rpartition("/rm/")
        if not base or not target:
            raise ValueError(_redact(f"the endpoint is <base>/rm/<target>: {endpoint!r}"))
        self.target = urllib.parse.unquote(target)
        self.expected = {
            "artifact_id": expected_artifact_id,
            "source_session_id": expected_source_session_id,
            "schema_version": expected_schema_version,
            "rm_api_version": expected_rm_api_version,
        }
        self._client = RewardHarnessClient(
            base, token=token or os.environ.get("REWARD_HARNESS_TOKEN") or None, timeout=timeout_seconds, max_attempts=1
        )

    def healthz_check(self) -> Dict[str, Any]:
        """``/healthz``, checked as autosr checks it: status ok, the expected artifact, session and API versions.

        Example: ``RMScoringClient(url, token=t, expected_artifact_id="rm_...").healthz_check()["status"]``
        """
        data = self._client.rm_healthz(self.target)
        if str(data.get("status", "")).strip() != "ok":
            raise RMHealthzError(f"healthz status is not ok: {data.get('status')!r}")
        for field, expected in self.expected.items():
            actual = str(data.get(field, "")).strip()
            if expected and actual != expected:
                raise RMHealthzError(f"{field} mismatch: expected {expected!r}, got {actual!r}")
        return data

    def score(
        self,
        *,
        prompt_id: str,
        prompt: str,
        candidate_id: str,
        text: str,
        source: str = "verl",
        metadata: Optional[Dict[str, Any]] = None,
    ) -> Dict[str, Any]:
        """Scores one candidate, as autosr's client does; callers read ``["score"]``.

        Example: ``client.score(prompt_id="p1", prompt="What is 2+2?", candidate_id="c1", text="4")["score"]``
        """
        candidate = {"candidate_id": candidate_id, "text": text, "source": source, "metadata": metadata or {}}
        return self._client.rm_score(self.target, prompt_id, prompt, candidate)

    def batch_score(self, items: List[Dict[str, Any]]) -> Dict[str, Any]:
        """Scores ``{prompt_id, prompt, candidate}`` items in one request; callers read ``["results"][i]``.

        Example: ``client.batch_score([item])["results"][0]["score"]``
        """
        return self._client.rm_batch_score(self.target, items)


# A token carried in the base URL (``http://host/t/<token>``, for trainers that cannot send headers) must not
# reach logs through an exception message.
_PATH_TOKEN = re.compile(r"/t/[^/?#\s]+")


def _redact(text: str) -> str:
    """``text`` with any ``/t/<token>`` path segment replaced by ``/t/***``."""
    return _PATH_TOKEN.sub("/t/***", text)


def _rm_path(target: str) -> str:
    return f"/rm/{urllib.parse.quote(target, safe='')}"


def _candidate(candidate: Any) -> Any:
    """A candidate as the RM API takes it; a bare text becomes ``{"candidate_id": "0", "text": text}``."""
    if isinstance(candidate, str):
        return {"candidate_id": "0", "text": candidate}
    return candidate


def _read_json(raw: bytes) -> Dict[str, Any]:
    if not raw:
        return {}
    return json.loads(raw.decode("utf-8"))


def _to_error(status: int, raw: bytes) -> RewardHarnessError:
    try:
        payload = json.loads(raw.decode("utf-8")) if raw else {}
    except (ValueError, UnicodeDecodeError):
        payload = {}
    error = payload.get("error") if isinstance(payload, dict) else None
    error = error if isinstance(error, dict) else {}
    return RewardHarnessError(
        status,
        str(error.get("code") or "http_error"),
        _redact(str(error.get("message") or f"HTTP {status}")),
        payload.get("request_id") if isinstance(payload, dict) else None,
        error.get("details"),
    )


def _backoff_s(attempt: int) -> float:
    """Exponential backoff with jitter: about 0.25 s, 0.5 s, 1 s, … capped at 10 s."""
    return min(10.0, 0.25 * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)

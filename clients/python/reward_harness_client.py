"""Python client of the Reward Harness edge scoring API, standard library only (urllib).

Example::

    client = RewardHarnessClient("http://127.0.0.1:8787")
    client.score_async({"id": "r1", "input": "What is 2+2?", "output": "4"},
                       {"high_level_goal": "math", "model_size": "7B", "current_step": 0, "total_steps": 10})["score"]
    client.rollouts_complete()
    client.rubric_updated()

Mirrors the TypeScript client (src/client/index.ts): 429 and 503 are retried honouring Retry-After,
every other non-2xx answer raises RewardHarnessError carrying the server's error code.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Optional, Tuple

__all__ = ["RewardHarnessClient", "RewardHarnessError", "parse_retry_after"]

RETRYABLE_STATUS = (429, 503)
# A Retry-After longer than this is capped: a trainer step should not stall on one header.
MAX_RETRY_AFTER_S = 60.0


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

    base_url: e.g. ``http://127.0.0.1:8787``; token: a run token or the admin token (omit for the local
    default run); run_id: address a run by path (``/runs/<id>``) instead of by token; timeout: seconds per
    request; max_attempts: attempts for 429 / 503 / network failures.
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
        self.base = f"{root}/runs/{urllib.parse.quote(run_id, safe='')}" if run_id else root
        self.token = token
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self._sleep = sleep

    def score_async(self, rollout: Dict[str, Any], metadata: Dict[str, Any], instance_id: Optional[str] = None) -> Dict[str, Any]:
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

    def _request(self, method: str, path: str, body: Any = None, timeout: Optional[float] = None) -> Tuple[int, Dict[str, Any]]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"accept": "application/json"}
        if data is not None:
            headers["content-type"] = "application/json"
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        for attempt in range(1, self.max_attempts + 1):
            last = attempt >= self.max_attempts
            request = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout if timeout is None else timeout) as response:
                    return response.status, _read_json(response.read())
            except urllib.error.HTTPError as error:
                raw = error.read()
                retry_after = parse_retry_after(error.headers.get("retry-after") if error.headers else None)
                error.close()
                if error.code in RETRYABLE_STATUS and not last:
                    self._sleep(min(MAX_RETRY_AFTER_S, retry_after) if retry_after is not None else _backoff_s(attempt))
                    continue
                raise _to_error(error.code, raw) from None
            except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError) as error:
                if last:
                    reason = getattr(error, "reason", error)
                    raise RewardHarnessError(0, "network", f"{method} {self.base + path} failed: {reason}") from error
                self._sleep(_backoff_s(attempt))
        raise AssertionError("unreachable")


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
        str(error.get("message") or f"HTTP {status}"),
        payload.get("request_id") if isinstance(payload, dict) else None,
        error.get("details"),
    )


def _backoff_s(attempt: int) -> float:
    """Exponential backoff with jitter: about 0.25 s, 0.5 s, 1 s, … capped at 10 s."""
    return min(10.0, 0.25 * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)

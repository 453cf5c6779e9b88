"""autosr's verl reward client (``reward_harness/rl/verl/reward_client.py``, class ``RMScoringClient``), re-implemented.

Not a recipe: a behaviour-for-behaviour stand-in written from the description in autosr.md §4.2 and a reading of
that file, so tests can show that an autosr user points the client they already vendor at this server unchanged::

    client = RMScoringClient("https://<worker>/t/<RM token>/rm/prod", expected_artifact_id="rm_...")
    client.healthz_check()
    client.score(prompt_id="p1", prompt="What is 2+2?", candidate_id="c1", text="4")["score"]
    item = {"prompt_id": "p1", "prompt": "Q", "candidate": {"candidate_id": "c1", "text": "A"}}
    client.batch_score([item])["results"]

What it reproduces:

- stdlib ``urllib`` only; the endpoint loses trailing ``/``; every path is appended to it (so a ``/t/<token>``
  prefix is kept); ``timeout_seconds`` defaults to 30; no auth header, no retries.
- ``healthz_check``: ``GET <endpoint>/healthz``; ``status`` must be ``"ok"`` once trimmed; when the expectation is
  non-empty, ``artifact_id`` and ``source_session_id`` must equal it exactly, and ``schema_version`` and
  ``rm_api_version`` (trimmed, as text) must equal theirs (both default ``"1.0"``); any failure raises
  ``RMHealthzError``. Returns the parsed answer.
- ``score`` (keyword-only): ``POST <endpoint>/score`` ``{prompt_id, prompt, candidate: {candidate_id, text,
  source ("verl" by default), metadata ({} by default)}}``, UTF-8 with non-ASCII left unescaped.
- ``batch_score(items)``: ``POST <endpoint>/batch_score`` ``{"items": items}`` with the items as given.
- errors of ``score`` and ``batch_score`` raise ``ScoreError``: ``HTTP <code> from <url>: <body>``,
  ``Connection error to <url>: <reason>``, or ``Unexpected error calling <url>: <error>`` (a read timeout, an
  answer that is not JSON). As in autosr these messages carry the URL, so a token in the path reaches them.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Type

__all__ = ["RMScoringClient", "RMHealthzError", "ScoreError"]

logger = logging.getLogger("reward_harness.rl.verl.reward_client")


class RMHealthzError(Exception):
    """The RM server's ``/healthz`` failed, or named another artifact, session or API version.

    Example: ``except RMHealthzError as e: print(e)``
    """


class ScoreError(Exception):
    """A ``/score`` or ``/batch_score`` request failed.

    Example: ``except ScoreError as e: print(e)``
    """


class RMScoringClient:
    """A client of one RM endpoint (``<base>/rm/<target>``).

    Example: ``RMScoringClient("http://127.0.0.1:8787/rm/prod").healthz_check()["artifact_id"]``
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
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.expected_artifact_id = expected_artifact_id
        self.expected_source_session_id = expected_source_session_id
        self.expected_schema_version = expected_schema_version
        self.expected_rm_api_version = expected_rm_api_version
        self.timeout_seconds = timeout_seconds

    def healthz_check(self) -> Dict[str, Any]:
        """Reads ``/healthz`` and checks it names the expected artifact and API versions.

        Example: ``RMScoringClient(url, expected_artifact_id="rm_...").healthz_check()["status"] == "ok"``
        """
        data = self._call(urllib.request.Request(f"{self.endpoint}/healthz", method="GET"), RMHealthzError)
        status = str(data.get("status", "")).strip()
        if status != "ok":
            raise RMHealthzError(f"healthz status is not ok: {status!r}")
        exact = (("artifact_id", self.expected_artifact_id), ("source_session_id", self.expected_source_session_id))
        for field, expected in exact:
            if expected and data.get(field, "") != expected:
                raise RMHealthzError(f"{field} mismatch: expected {expected!r}, got {data.get(field, '')!r}")
        versions = (("schema_version", self.expected_schema_version), ("rm_api_version", self.expected_rm_api_version))
        for field, expected in versions:
            actual = str(data.get(field, "")).strip()
            if expected and actual != expected:
                raise RMHealthzError(f"{field} mismatch: expected {expected!r}, got {actual!r}")
        logger.info(
            "RM healthz ok: artifact_id=%s source_session_id=%s schema=%s rm_api=%s",
            data.get("artifact_id"),
            data.get("source_session_id"),
            data.get("schema_version"),
            data.get("rm_api_version"),
        )
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
        """Scores one candidate; callers read ``["score"]``.

        Example: ``client.score(prompt_id="p1", prompt="What is 2+2?", candidate_id="c1", text="4")["score"]``
        """
        candidate = {"candidate_id": candidate_id, "text": text, "source": source, "metadata": metadata or {}}
        return self._post("/score", {"prompt_id": prompt_id, "prompt": prompt, "candidate": candidate})

    def batch_score(self, items: List[Dict[str, Any]]) -> Dict[str, Any]:
        """Scores ``{prompt_id, prompt, candidate}`` items in one request; callers read ``["results"][i]``.

        Example: ``client.batch_score([item])["results"][0]["score"]``
        """
        return self._post("/batch_score", {"items": items})

    def _post(self, path: str, payload: Dict[str, Any]) -> Dict[str, Any]:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(
            f"{self.endpoint}{path}", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        return self._call(request, ScoreError)

    def _call(self, request: urllib.request.Request, error: Type[Exception]) -> Dict[str, Any]:
        url = request.full_url
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise error(f"HTTP {exc.code} from {url}: {exc.read().decode('utf-8', errors='replace')}") from exc
        except urllib.error.URLError as exc:
            raise error(f"Connection error to {url}: {exc.reason}") from exc
        except Exception as exc:
            raise error(f"Unexpected error calling {url}: {exc}") from exc

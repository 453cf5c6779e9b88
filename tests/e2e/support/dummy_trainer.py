"""A stand-in trainer for the end-to-end tests of ``reward-harness train``: one "step" that scores 4 samples through
the OpenRLHF protocol and writes its metrics. Standard library only.

Usage (run by ``reward-harness train run --env-file <file> -- python3 dummy_trainer.py <metrics.json>``)::

    dummy_trainer.py <metrics.json>

Reads ``REWARD_HARNESS_URL``, ``REWARD_HARNESS_TOKEN`` and ``REWARD_HARNESS_TRAINING_RUN_ID`` from the environment
(the env file ``train prepare`` wrote), posts ``{query, prompts, labels}`` for 4 samples to
``<URL>/compat/openrlhf`` with ``Authorization: Bearer <token>``, checks the answer has 4 numeric rewards, writes
``{"reward_mean": …, "steps": 1}`` to ``<metrics.json>`` and prints one line. Exit status 3 when anything is wrong
(the message on stderr never shows the token).
"""

from __future__ import annotations

import json
import math
import os
import sys
import urllib.error
import urllib.request

SAMPLES = [
    ("Q: What is 2+2? A:", " 4", "4"),
    ("Q: What is 3+3? A:", " 6", "6"),
    ("Q: What is 5+5? A:", " 10", "10"),
    ("Q: What is 7+1? A:", " 9", "8"),
]


def fail(message: str) -> None:
    token = os.environ.get("REWARD_HARNESS_TOKEN")
    print(f"dummy_trainer: {message.replace(token, '***') if token else message}", file=sys.stderr)
    sys.exit(3)


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        fail("usage: dummy_trainer.py <metrics.json>")
    url = os.environ.get("REWARD_HARNESS_URL")
    token = os.environ.get("REWARD_HARNESS_TOKEN")
    run_id = os.environ.get("REWARD_HARNESS_TRAINING_RUN_ID")
    if not url or not token or not run_id:
        fail("REWARD_HARNESS_URL, REWARD_HARNESS_TOKEN and REWARD_HARNESS_TRAINING_RUN_ID must be set")
    body = {
        "query": [prompt + response for prompt, response, _ in SAMPLES],
        "prompts": [prompt for prompt, _, _ in SAMPLES],
        "labels": [label for _, _, label in SAMPLES],
    }
    request = urllib.request.Request(
        f"{url.rstrip('/')}/compat/openrlhf",
        data=json.dumps(body).encode("utf-8"),
        headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        fail(f"POST /compat/openrlhf: {error.code} {error.read().decode('utf-8', 'replace')[:300]}")
    except (urllib.error.URLError, OSError, ValueError) as error:
        fail(f"POST /compat/openrlhf: {error}")
    rewards = answer.get("rewards") if isinstance(answer, dict) else None
    if not isinstance(rewards, list) or len(rewards) != len(SAMPLES):
        fail(f"expected {len(SAMPLES)} rewards, got {json.dumps(answer)[:300]}")
    if not all(isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r) for r in rewards):
        fail(f"the rewards are not all numbers: {rewards}")
    reward_mean = sum(rewards) / len(rewards)
    with open(argv[1], "w", encoding="utf-8") as out:
        json.dump({"reward_mean": reward_mean, "steps": 1}, out)
    print(f"dummy_trainer: {run_id}: 1 step, {len(rewards)} samples, reward_mean={reward_mean:.4f}")


if __name__ == "__main__":
    main(sys.argv)

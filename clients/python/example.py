"""Demo: score two rollouts, close the step, wait for the rubric update; prints one JSON object.

Usage: python3 clients/python/example.py [BASE_URL] [TOKEN]
       (BASE_URL defaults to http://127.0.0.1:8787, the address of `npm start`)
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from reward_harness_client import RewardHarnessClient, RewardHarnessError  # noqa: E402

METADATA = {"high_level_goal": "math", "model_size": "7B", "current_step": 0, "total_steps": 10}
ROLLOUTS = [
    {"id": "py-demo-right", "input": "What is 2+2?", "output": "2 + 2 = 4", "supplemental_context": "4"},
    {"id": "py-demo-wrong", "input": "What is 3*3?", "output": "3 * 3 = 6", "supplemental_context": "9"},
]


def main(argv):
    base_url = argv[1] if len(argv) > 1 else "http://127.0.0.1:8787"
    token = argv[2] if len(argv) > 2 else os.environ.get("REWARD_HARNESS_TOKEN")
    client = RewardHarnessClient(base_url, token=token, timeout=60)
    try:
        scores = [client.score_async(rollout, METADATA) for rollout in ROLLOUTS]
        complete = client.rollouts_complete()
        updated = client.rubric_updated(timeout_s=60)
    except RewardHarnessError as error:
        print(json.dumps({"error": {"status": error.status, "code": error.code, "message": error.message}}))
        return 1
    print(json.dumps({
        "scores": [
            {key: result.get(key) for key in ("rollout_id", "score", "rubric_version", "step", "duplicate", "cached")}
            for result in scores
        ],
        "complete": complete,
        "updated": updated,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

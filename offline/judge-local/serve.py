"""llama.cpp's own HTTP server (xllamacpp, in-process) for `judge:local`: one server per entry of the JSON list in
argv[1], each on 127.0.0.1:<port>, until SIGINT or SIGTERM. Prints `serving <port>` once each answers.

An entry: {"model": path, "alias": id, "port": n, "n_ctx": n, "n_parallel": n, "threads": n, "embedding": bool,
"set": {"dotted.name": value}}. `set` is applied last (the user's `-- --name value` arguments), so it wins.
"""

import json
import os
import signal
import sys
import threading

import xllamacpp as xlc


def params_of(entry):
    params = xlc.CommonParams()
    params.model.path = entry["model"]
    params.model_alias = {entry["alias"]}
    params.hostnames = ["127.0.0.1"]
    params.port = entry["port"]
    params.n_ctx = entry["n_ctx"]
    params.n_parallel = entry["n_parallel"]
    params.cpuparams.n_threads = entry["threads"]
    params.cpuparams_batch.n_threads = entry["threads"]
    # The host-memory prompt cache: a slot's prompt is kept there when the slot takes another, and the best match is
    # loaded back for a later request (llama.cpp's default is 8 GiB; a 135M model's 8k-token state is ~190 MB).
    params.cache_ram_mib = entry.get("cache_ram_mib", 1024)
    if entry.get("embedding"):
        params.embedding = True
        params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
        # An encoder reads a text in one batch: the batch must hold the longest input the context takes.
        params.n_batch = entry["n_ctx"]
        params.n_ubatch = entry["n_ctx"]
    for name, value in entry.get("set", {}).items():
        target = params
        *path, last = name.split(".")
        for part in path:
            target = getattr(target, part)
        current = getattr(target, last)
        if isinstance(current, bool):
            value = str(value).lower() in ("1", "true", "yes", "on")
        elif isinstance(current, (int, float, str)):
            value = type(current)(value)
        setattr(target, last, value)
    return params


def main():
    entries = json.loads(sys.argv[1])
    servers = []
    for entry in entries:
        servers.append(xlc.Server(params_of(entry)))
        print(f"serving {entry['port']}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    # The servers' threads are llama.cpp's own: exit without waiting on their destructors.
    os._exit(0)


if __name__ == "__main__":
    main()

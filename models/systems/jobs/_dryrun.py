"""Sandboxed dry run of a training script (executed by path in a child interpreter).

Not imported by the package: :mod:`hwcosim.models.systems.jobs.jobcheck` runs ``python _dryrun.py CONFIG``
inside its sandbox (:mod:`hwcosim.models.systems.jobs.sandbox`, which confines writes, processes and
the network at the kernel level), where CONFIG is a JSON file (or ``fd:N``, an open file descriptor)
naming the script, its arguments, the tiny batch sizes and the result file (or ``fd:N``). The child

- blocks the network (``socket`` connects and name look-ups raise ``OSError``),
- caps CPU time and address space with ``resource`` limits,
- runs the script with ``runpy.run_path``: an untraced warm-up at the first tiny batch size,
  then once per tiny batch size traced, with ``HWCOSIM_DRYRUN=1``,
  ``HWCOSIM_BATCH=b`` and ``HWCOSIM_STEPS=s`` in the environment, and ``--batch-size``/``--epochs``
  style options of the script's command line rewritten to the tiny values,
- imports the script's top-level modules first (outside tracing),
- records the tracemalloc peak (numpy allocations are traced) and the maximum RSS per run,
  numpy floating-point events (invalid / overflow / divide) with the script line that raised them,
  and the first exception with its type, message and innermost script frame.

The result is written as JSON; the parent classifies it.
"""

import gc
import json
import os
import resource
import runpy
import socket
import sys
import traceback
import tracemalloc


def _block_network():
    def deny(*a, **k):
        raise OSError("network access is disabled in the hwcosim jobcheck dry run")

    socket.socket.connect = deny
    socket.socket.connect_ex = deny
    socket.create_connection = deny
    socket.getaddrinfo = deny


def _rewrite_argv(argv, options, value):
    out = list(argv)
    for i, a in enumerate(out):
        for opt in options:
            if a == opt and i + 1 < len(out):
                out[i + 1] = str(value)
            elif a.startswith(opt + "="):
                out[i] = f"{opt}={value}"
    return out


def _open(name, mode):
    """``open`` of a path, or of an inherited file descriptor given as ``fd:N`` (closed with the file)."""
    if name.startswith("fd:"):
        return os.fdopen(int(name[3:]), mode)
    return open(name, mode)


def _limit(res, soft, hard):
    try:
        resource.setrlimit(res, (soft, hard))
    except (ValueError, OSError):  # already lower (the sandbox set it, and may not be raised): keep it
        pass


def main(cfg_path):
    with _open(cfg_path, "r") as f:
        cfg = json.load(f)
    out = _open(cfg["result"], "w")  # opened now: the script must not be able to close it first
    script = os.path.abspath(cfg["script"])
    res = {"runs": [], "fp_events": [], "exception": None}
    lim = cfg.get("cpu_s")
    if lim:
        _limit(resource.RLIMIT_CPU, int(lim), int(lim) + 1)
    mem = cfg.get("address_space_bytes")
    if mem:
        _limit(resource.RLIMIT_AS, int(mem), int(mem))
    _block_network()
    sys.path.insert(0, os.path.dirname(script))
    fp = res["fp_events"]

    def on_fp(kind, flag):
        if len(fp) >= 20:
            return
        where = None
        for fr in reversed(traceback.extract_stack()[:-1]):
            if os.path.abspath(fr.filename) == script:
                where = fr.lineno
                break
        fp.append({"kind": kind, "line": where})

    try:
        import numpy as np

        np.seterr(all="call", under="ignore")
        np.seterrcall(on_fp)
    except ImportError:
        pass
    for mod in cfg.get("preimport", []):
        try:  # modules imported before tracing: import cost is not the job's working set
            __import__(mod)
        except BaseException:  # noqa: BLE001 - the script's own import reports it
            pass
    # run 0: warm-up, untraced (lazy imports and first-use caches of the frameworks); runs 1, 2: traced
    plan = [(cfg["batches"][0], False)] + [(b, True) for b in cfg["batches"]]
    for b, traced in plan:
        gc.collect()
        os.environ.update({"HWCOSIM_DRYRUN": "1", "HWCOSIM_BATCH": str(b), "HWCOSIM_STEPS": str(cfg["steps"])})
        argv = _rewrite_argv(cfg["args"], cfg["batch_options"], b)
        argv = _rewrite_argv(argv, cfg["epoch_options"], 1)
        argv = _rewrite_argv(argv, cfg["step_options"], cfg["steps"])
        sys.argv = [script, *argv]
        if traced:
            tracemalloc.start()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
        exc = None
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                exc = e
        except BaseException as e:  # noqa: BLE001 - we report whatever the script raised
            exc = e
        if traced:
            peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            res["runs"].append({"batch": b, "traced_peak_bytes": peak, "max_rss_bytes": rss,
                                "torch": "torch" in sys.modules})
        if exc is not None:
            tb = traceback.extract_tb(exc.__traceback__)
            line = None
            for fr in tb:
                if os.path.abspath(fr.filename) == script:
                    line = fr.lineno
            res["exception"] = {"type": type(exc).__name__,
                                "mro": [c.__name__ for c in type(exc).__mro__],
                                "errno": getattr(exc, "errno", None),
                                "filename": str(exc.filename) if getattr(exc, "filename", None) else None,
                                "message": str(exc)[:2000] if not isinstance(exc, SystemExit) else f"exit {exc.code}",
                                "line": line, "batch": b,
                                "traceback": "".join(traceback.format_exception(exc))[-4000:]}
            break
    sys.stdout.flush()
    with out:
        json.dump(res, out)


if __name__ == "__main__":
    main(sys.argv[1])

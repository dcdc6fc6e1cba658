"""atheris (libFuzzer) harness for the readers of user files, all targets in one process.

    python fuzz/readers.py TARGET[,TARGET...] CORPUS_DIR [libFuzzer flags, e.g. -max_total_time=30]

Targets are :data:`hwcosim.cosim.flow.fuzz.TARGETS` (``hwcosim fuzz --list``). The first byte of an
input picks the target (``byte % len(targets)``), the rest is the file's content, so one
process and one coverage map serve every reader. An input that makes a reader raise anything but
its documented error is a crash: libFuzzer saves it (``-artifact_prefix``), and
``hwcosim fuzz`` splits it into ``<target>/<payload>``. Normally run through
``hwcosim fuzz --seconds N``. Crashes listed in :data:`hwcosim.cosim.flow.fuzz.KNOWN_BUGS` (each has
a strict-xfail regression test) are skipped so the fuzzer looks for new ones, unless
``HWCOSIM_FUZZ_STRICT=1``.
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["hwcosim.pruning", "hwcosim.cosim.flow.vectors", "hwcosim.cosim.flow.sweep",
                                         "hwcosim.models.safeparse", "hwcosim.models.systems.cluster.scenario",
                                         "hwcosim.models.systems.cluster.topology",
                                         "hwcosim.models.systems.jobs.jobcheck",
                                         "hwcosim.models.systems.elastic.easyscale",
                                         "safetensors", "tomllib", "json", "yaml", "csv",
                                         "onnx.numpy_helper", "onnx.external_data_helper", "tokenize", "zipfile",
                                         "numpy.lib.format", "numpy.lib._npyio_impl"]):
    import csv  # noqa: F401
    import tokenize  # noqa: F401

    import hwcosim.cosim.flow.sweep  # noqa: F401
    import hwcosim.models.safeparse  # noqa: F401
    import hwcosim.models.systems.cluster.scenario  # noqa: F401
    import hwcosim.models.systems.cluster.topology  # noqa: F401
    import hwcosim.models.systems.elastic.easyscale  # noqa: F401
    import hwcosim.models.systems.jobs.jobcheck  # noqa: F401
    import hwcosim.pruning.formats.csb  # noqa: F401
    import hwcosim.pruning.formats.fss  # noqa: F401
    import hwcosim.pruning.formats.nm  # noqa: F401
    import hwcosim.pruning.formats.sparse  # noqa: F401
    import hwcosim.pruning.io  # noqa: F401
    import hwcosim.pruning.onnx_io  # noqa: F401
    import numpy  # noqa: F401
    import onnx.external_data_helper  # noqa: F401
    import onnx.numpy_helper  # noqa: F401
    import yaml  # noqa: F401

from hwcosim.cosim.flow.fuzz import TARGETS, Crash, known_bug, run_target, seeds  # noqa: E402


def main() -> None:
    names = sys.argv.pop(1).split(",") if len(sys.argv) > 1 else []
    if not names or any(n not in TARGETS for n in names):
        sys.exit(f"usage: {sys.argv[0]} TARGET[,TARGET...] [corpus] [libFuzzer flags]; "
                 f"targets: {', '.join(TARGETS)}")
    for n in names:   # build the targets' valid companion files before fuzzing
        run_target(n, seeds(n)[0])
    strict = os.environ.get("HWCOSIM_FUZZ_STRICT") == "1"
    work = Path(tempfile.mkdtemp(prefix="hwcosim-fuzz-"))
    counts_file = os.environ.get("HWCOSIM_FUZZ_COUNTS")   # inputs per target, for hwcosim fuzz
    counts = dict.fromkeys(names, 0)
    last = [0.0]

    def one_input(data: bytes) -> None:
        if not data:
            return
        name = names[data[0] % len(names)]
        counts[name] += 1
        if counts_file and time.monotonic() - last[0] > 1.0:   # (libFuzzer exits without Python's atexit)
            last[0] = time.monotonic()
            Path(counts_file).write_text(json.dumps(counts))
        try:
            run_target(name, data[1:], work)
        except Crash as e:        # a reader bug ...
            if strict or not known_bug(name, e.__cause__):
                raise             # ... that no xfail regression test records yet


    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

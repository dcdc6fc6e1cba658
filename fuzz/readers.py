"""atheris (libFuzzer) harness for the readers of user files, all targets in one process.

    python fuzz/readers.py TARGET[,TARGET...] CORPUS_DIR [libFuzzer flags, e.g. -max_total_time=30]

Targets are :data:`cosim.fuzz.TARGETS` (``python -m cosim.fuzz --list``). The first byte of an
input picks the target (``byte % len(targets)``), the rest is the file's content, so one
process and one coverage map serve every reader. An input that makes a reader raise anything but
its documented error is a crash: libFuzzer saves it (``-artifact_prefix``), and
``python -m cosim.fuzz`` splits it into ``<target>/<payload>``. Normally run through
``python -m cosim.fuzz --seconds N``. Crashes listed in :data:`cosim.fuzz.KNOWN_BUGS` (each has
a strict-xfail regression test) are skipped so the fuzzer looks for new ones, unless
``HWCOSIM_FUZZ_STRICT=1``.
"""

import os
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["pruning", "cosim.commands", "safetensors", "tomllib", "json",
                                         "zipfile", "numpy.lib.format", "numpy.lib._npyio_impl"]):
    import numpy  # noqa: F401

    import pruning.formats.csb  # noqa: F401
    import pruning.formats.fss  # noqa: F401
    import pruning.formats.nm  # noqa: F401
    import pruning.formats.sparse  # noqa: F401
    import pruning.io  # noqa: F401

from cosim.fuzz import TARGETS, Crash, known_bug, run_target, seeds  # noqa: E402


def main() -> None:
    names = sys.argv.pop(1).split(",") if len(sys.argv) > 1 else []
    if not names or any(n not in TARGETS for n in names):
        sys.exit(f"usage: {sys.argv[0]} TARGET[,TARGET...] [corpus] [libFuzzer flags]; "
                 f"targets: {', '.join(TARGETS)}")
    for n in names:   # build the targets' valid companion files before fuzzing
        run_target(n, seeds(n)[0])
    strict = os.environ.get("HWCOSIM_FUZZ_STRICT") == "1"
    work = Path(tempfile.mkdtemp(prefix="hwcosim-fuzz-"))

    def one_input(data: bytes) -> None:
        if not data:
            return
        name = names[data[0] % len(names)]
        try:
            run_target(name, data[1:], work)
        except Crash as e:        # a reader bug ...
            if strict or not known_bug(name, e.__cause__):
                raise             # ... that no xfail regression test records yet


    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

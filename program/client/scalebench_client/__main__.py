"""``python -m scalebench_client SCRIPT [ARGS...]``: runs SCRIPT as ``python SCRIPT ARGS``
would, with the adapters that need a hook installed first, so that the program's code stays
untouched (docs/programs.md#adapters):

* Keras (Keras 3 on any backend, or tf.keras): every ``Model.fit`` and ``Model.predict``
  gets scalebench_client.keras's callback; installed when the script imports Keras.

Lightning needs no runner (its entry point loads the callback). ``-m MODULE`` runs a module
instead of a script, as ``python -m MODULE`` would.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import runpy
import sys


class _KerasHook(importlib.abc.MetaPathFinder):
    """Installs the Keras adapter right after the program imports keras or tf.keras."""

    def find_spec(self, name, path=None, target=None):
        if name not in ("keras", "tensorflow.keras"):
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_install(module):
            exec_module(module)
            sys.meta_path[:] = [
                f for f in sys.meta_path if not isinstance(f, _KerasHook)
            ]
            from scalebench_client import keras as sbk

            sbk.install()

        loader.exec_module = exec_and_install
        return spec


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        raise SystemExit(0 if argv else 2)
    sys.meta_path.insert(0, _KerasHook())
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit(
                "python -m scalebench_client -m MODULE [ARGS...]: MODULE missing"
            )
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        sys.path.insert(
            0, __import__("os").path.dirname(__import__("os").path.abspath(argv[0]))
        )
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])

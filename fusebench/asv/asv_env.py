"""An asv environment named after the Python version, not its path: one result file per commit
and machine wherever the checkout lives.

asv 0.6.6 names an ``existing`` environment after the interpreter's absolute path
(``ExistingEnvironment.name`` in ``asv/environment.py``: ``get_env_name("existing",
executable.replace(os.sep, "_"), ...)``), and puts that name in the result file's name
(``<sha8>-existing-py_opt_torch_.venv_bin_python3.json``) and the path in its ``python``
parameter (a selector on the site). A clone in another folder then stores a second file for the
same commit and machine.

:class:`StableExisting` is asv's ``existing`` environment (same interpreter, nothing installed,
results saved only with ``--set-commit-hash``) whose name is ``existing-py<major>.<minor>``
(``existing-py3.12``: the form of asv's own virtualenv names) and whose ``python`` parameter is
that version: the names ``fusebench.asv.store`` writes. asv loads this module as a plugin
(``"plugins": [".fusebench.asv.asv_env"]`` in a configuration) and selects it with
``-E stable:<python>`` (:data:`TOOL_NAME`), for an ``asv run`` of ``benchmarks/`` that stores
into the files ``make bench`` writes (``tests/asvrun.py``). Imported by asv only: it imports asv.
"""

from __future__ import annotations

from asv.environment import ExistingEnvironment, get_env_name

#: The ``-E`` environment type that selects :class:`StableExisting`.
TOOL_NAME = "stable"
#: The asv ``plugins`` entry that loads this module (a leading dot: imported from asv's cwd).
PLUGIN = ".fusebench.asv.asv_env"


def env_name(python_version: str) -> str:
    """The environment name of a Python ``"3.12"``: ``"existing-py3.12"`` (asv's sanitizing)."""
    return get_env_name("existing", python_version, {}, {})


class StableExisting(ExistingEnvironment):
    """asv's ``existing`` environment, named and labelled by the interpreter's ``X.Y`` version.

    Raises asv's ``EnvironmentUnavailable`` (as its parent) when the interpreter cannot be run.
    """

    tool_name = TOOL_NAME

    def __init__(self, conf, executable, requirements, tagged_env_vars):
        super().__init__(conf, executable, requirements, tagged_env_vars)
        # The parent asked the interpreter for "X.Y", then the base class replaced it by the
        # path; the version is what the results' "python" parameter should say.
        self._version = self._python_version_of_executable()
        self._python = self._version

    def _python_version_of_executable(self) -> str:
        from asv import util

        return util.check_output([self._executable, "-c",
                                  "import sys; print('%d.%d' % sys.version_info[:2])"]).strip()

    @property
    def name(self) -> str:
        version = getattr(self, "_version", None)  # asv's base __init__ asks before it is known
        return get_env_name("existing", version, {}, self._tagged_env_vars) if version else super().name

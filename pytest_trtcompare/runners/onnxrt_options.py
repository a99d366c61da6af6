"""onnxruntime session options: the suite's defaults, the user's (an
onnxruntime.SessionOptions, or a dict of its settings that pickle can send to an isolated
worker), and what describe() records of them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import RunnerOptionError

#: Session config entries of the sessions built without the user's `session_options`.
QUIET_THREADS = {
    "session.intra_op.allow_spinning": "0",
    "session.inter_op.allow_spinning": "0",
}


def default_session_options(ort: Any) -> Any:
    """Session options for a test suite: the thread pool's threads sleep between ops instead
    of spin-waiting. Spinning buys a little latency for a service; in a suite it burned about
    as much CPU as the inference itself, taken from the comparisons, the conversions and the
    other xdist workers on the same cores. It changes no result."""
    options = ort.SessionOptions()
    for key, value in QUIET_THREADS.items():
        options.add_session_config_entry(key, value)
    return options


def session_options_summary(options: Any, *, given: bool) -> dict[str, Any]:
    """What of a session's options can change its numbers or its speed, as JSON: the graph
    optimizations (fusions change rounding), execution mode, thread counts (0: onnxruntime
    chooses), deterministic compute and thread spinning; `given`: the user's options, not
    `default_session_options`."""
    return {
        "given": given,
        "graph_optimization_level": _name(options.graph_optimization_level),
        "execution_mode": _name(options.execution_mode),
        "intra_op_num_threads": int(options.intra_op_num_threads),
        "inter_op_num_threads": int(options.inter_op_num_threads),
        "use_deterministic_compute": bool(options.use_deterministic_compute),
        "allow_spinning": _config_entry(options, "session.intra_op.allow_spinning") != "0",
    }


def _name(value: Any) -> str:
    return str(getattr(value, "name", value))


#: The settings a dict may give, with the enum of each that takes a name ("ORT_DISABLE_ALL").
_ENUMS = {
    "graph_optimization_level": "GraphOptimizationLevel",
    "execution_mode": "ExecutionMode",
    "execution_order": "ExecutionOrder",
}
#: The other settings and the type each takes.
_VALUES: dict[str, type] = {
    "intra_op_num_threads": int,
    "inter_op_num_threads": int,
    "use_deterministic_compute": bool,
    "enable_cpu_mem_arena": bool,
    "enable_mem_pattern": bool,
    "enable_mem_reuse": bool,
    "log_severity_level": int,
    "optimized_model_filepath": str,
}
SETTINGS = (*_ENUMS, *_VALUES, "config")


def session_options_of(ort: Any, given: Any) -> Any:
    """The onnxruntime.SessionOptions a session is built with: the user's object as it is,
    one made from a dict of its settings ({"graph_optimization_level": "ORT_DISABLE_ALL",
    "intra_op_num_threads": 1, "config": {"session.intra_op.allow_spinning": "0"}}), or
    the suite's defaults (None)."""
    if given is None:
        return default_session_options(ort)
    if isinstance(given, ort.SessionOptions):
        return given
    if not isinstance(given, Mapping):
        raise RunnerOptionError(
            f"onnxrt option session_options={given!r} ({type(given).__name__}) takes an "
            "onnxruntime.SessionOptions or a dict of its settings, e.g. "
            "{'graph_optimization_level': 'ORT_DISABLE_ALL', 'intra_op_num_threads': 1}"
        )
    options = ort.SessionOptions()
    for key, value in given.items():
        if key == "config":
            if not isinstance(value, Mapping):
                raise RunnerOptionError(
                    f"onnxrt option session_options['config']={value!r}: takes a dict of "
                    "config entries, e.g. {'session.intra_op.allow_spinning': '0'}"
                )
            for entry, text in value.items():
                options.add_session_config_entry(str(entry), str(text))
        else:
            setattr(options, str(key), _setting(ort, str(key), value))
    return options


def _setting(ort: Any, key: str, value: Any) -> Any:
    """The value of one setting of a dict, checked (an enum's by its name)."""
    where = f"onnxrt option session_options[{key!r}]"
    if key in _ENUMS:
        enum = getattr(ort, _ENUMS[key])
        if isinstance(value, enum):
            return value
        if not (isinstance(value, str) and value in enum.__members__):
            names = ", ".join(enum.__members__)
            raise RunnerOptionError(f"{where}={value!r}: takes one of {names}")
        return enum.__members__[value]
    kind = _VALUES.get(key)
    if kind is None:
        raise RunnerOptionError(f"{where}: unknown setting; the settings are {', '.join(SETTINGS)}")
    if type(value) is not kind:  # bool is no int here, nor 1 a bool
        raise RunnerOptionError(
            f"{where}={value!r}: takes {'an' if kind is int else 'a'} {kind.__name__}"
        )
    return value


def session_options_key(options: Any) -> tuple[tuple[str, str], ...]:
    """What a SessionOptions object holds of the settings a dict may give (and the spinning
    entries), for the session's runner cache: a shared object changed between tests is
    another session, not the one built before (config entries other than spinning cannot
    be read back without knowing their names)."""
    values = [(key, repr(getattr(options, key))) for key in (*_ENUMS, *_VALUES)]
    values += [(key, _config_entry(options, key)) for key in QUIET_THREADS]
    return tuple(values)


def _config_entry(options: Any, key: str) -> str:
    try:
        return str(options.get_session_config_entry(key))
    except Exception:  # onnxruntime raises when the entry was never set
        return ""

"""An out-of-memory end, named: which errors mean the run ran out of memory, and what it tried to
allocate where the framework says so. A run that ends so is recorded `oom`, never `failed` with a
traceback. No TensorFlow here: errors are told apart by their type's name and their text.

- TensorFlow: ResourceExhaustedError, "OOM when allocating tensor with shape[4096,14,14,64] …";
- XLA (JAX, TensorFlow with jit_compile): "RESOURCE_EXHAUSTED: Out of memory while trying to allocate
  123456 bytes";
- Python: MemoryError (an allocation refused under RLIMIT_AS / RLIMIT_DATA);
- the run process's own host-memory guard (dashbench.jobs.run_signals.OutOfHostMemory);
- the kernel's OOM killer: judged by the launcher from SIGKILL and the cgroup's oom_kill counter.
"""

from __future__ import annotations

import re
from typing import Optional

STATUS = "oom"
EXIT_CODE = 3  # `run`, `preset`: a run that ran out of memory (1 is any other failure)

_TENSOR = re.compile(r"OOM when allocating tensor (?:with shape\s*)?(\[[^\]]*\])?(?:\s*and type (\w+))?")
_BYTES = re.compile(r"(?:trying to allocate|allocating|allocate)\s+([\d.,]+\s*(?:[KMGT]i?B|bytes|B)?)", re.I)
_SAYS_OOM = re.compile(r"OOM|RESOURCE_EXHAUSTED|[Oo]ut of memory")
_OOM_TYPES = ("ResourceExhaustedError", "OutOfHostMemory", "MemoryError", "OutOfMemoryError")


def is_oom(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & set(_OOM_TYPES):
        return True
    # XLA's errors come as one runtime error type whatever went wrong: its status code tells.
    return "RESOURCE_EXHAUSTED" in str(exc)


def tried(text: str) -> Optional[str]:
    """What the run tried to allocate, as the framework said it: 'a tensor of shape [4096,14,14,64]
    (float)' or '123456 bytes'; None where it does not say."""
    found = _TENSOR.search(text)
    if found and found.group(1):
        return f"a tensor of shape {found.group(1)}" + (f" ({found.group(2)})" if found.group(2) else "")
    found = _BYTES.search(text)
    if found:
        amount = found.group(1).strip().rstrip(",.")
        return amount if not amount.replace(",", "").isdigit() else f"{amount} bytes"
    return None


def error_text(exc: BaseException, message: str) -> str:
    """The stored error of an out-of-memory end: 'out of memory: <who said it>[, tried to allocate
    <what>]', one line. `message`: the exception's text without TensorFlow's trace."""
    name = type(exc).__name__
    if name == "OutOfHostMemory":
        return message  # "out of host memory (N GB of M …)": already says what and where
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    # The line that says it ("OOM when allocating …"), not a header such as "Graph execution error:".
    first = next((line for line in lines if _SAYS_OOM.search(line)), lines[0] if lines else "")
    what = tried(message)
    head = f"out of memory ({name}"
    head += f": {first[:300]})" if first else ")"
    return head + (f"; tried to allocate {what}" if what else "")


def killed_by_kernel(signum: int, kills_before: Optional[int], kills_after: Optional[int]) -> bool:
    """A run process ended by SIGKILL while its cgroup's oom_kill counter grew: the OOM killer's."""
    import signal

    return (
        signum == signal.SIGKILL and kills_before is not None and kills_after is not None and kills_after > kills_before
    )

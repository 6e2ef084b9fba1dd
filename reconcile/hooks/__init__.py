"""reconcile.hooks: how a DecoratorController (or a MapController) asks for desired state.

A `Hook` takes a JSON-shaped request and answers a JSON object. Three kinds share the interface:
a webhook speaking Metacontroller's protocol (webhook.py, with TLS and credentials from tls.py),
a Python function called in-process (python.py), and a Δ pipeline evaluated in-process
(pipeline.py). `build_hook` (build.py) makes one from a hook spec, within what the process's
`HookPolicy` (policy.py) allows; base.py holds the protocol, the errors and response checking.
docs/runtime.md ("Hooks") is the guide, docs/security.md the threat model.
"""

from reconcile.hooks.base import (
    Hook,
    HookConfigError,
    HookError,
    HookMetrics,
    HookRefused,
    HookRetryAfter,
    ResponseShape,
)
from reconcile.hooks.build import build_hook, parse_resolve
from reconcile.hooks.policy import HookPolicy

__all__ = ["Hook", "HookConfigError", "HookError", "HookMetrics", "HookPolicy", "HookRefused", "HookRetryAfter",
           "ResponseShape", "build_hook", "parse_resolve"]

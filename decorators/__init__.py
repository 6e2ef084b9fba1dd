"""decorators: a Metacontroller-compatible DecoratorController on porchkit's runtime.

To come: target selection, attachments, write-back, update strategies, finalize and customize
hooks, with webhook, in-process Python and declarative pipeline hooks.
"""

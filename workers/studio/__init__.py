"""The policy studio: tune a pool's launch-selection policy live in a browser.

``apportion studio`` serves it (docs/studio.md). The numbers it shows all come from
the launch_select engine: :mod:`.deployable` computes a job's allocation candidates
once and re-runs the selection policy (``apportion.selection.choose``) on every change;
:mod:`.app` is the web server (Starlette) with its security checks (:mod:`.guard`).
"""

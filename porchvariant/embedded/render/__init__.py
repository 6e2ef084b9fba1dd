"""Rendering a package's Kptfile pipeline (renderer.py): through `kpt fn render` when kpt is
there, otherwise in-process (inprocess.py) with the functions the caller supplies; pipeline.py
reads the pipeline itself.
"""

"""The browser page: its built assets (web/ in the repository, built by scripts/setup) served
on the public listener (serving.py). It imports nothing else of Pigeonhole: the server hands
it the few facts the page's config.json tells (docs/web.md).
"""
